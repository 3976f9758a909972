# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decoding a Kineto (torch.profiler) Chrome trace: the events, distributedInfo, deviceProperties.

Private to this collection. Standard library only, so it runs on the nodes; uses msgspec typed
decoding when it is installed: only the fields the analysis reads, ``args`` into the four keys
it uses, the events about 1 MB at a time, in lists, which takes about a third of the time
orjson needs to build the full object tree. Without msgspec every field is decoded by json up
front; the events have the same attributes either way:
``ph cat name ts dur pid tid id`` and ``args`` with ``correlation collective_name in_msg_nelems dtype``.
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
import re

try:  # optional, faster decoding
    import msgspec
except ImportError:  # pragma: no cover - exercised on nodes without msgspec
    msgspec = None  # type: ignore[assignment]


class TraceFileError(Exception):
    """One trace file cannot be analysed; the message names the file and says why."""


class NotATrace(TraceFileError):
    """A JSON file that holds no profiler trace (no ``traceEvents``, or none in it): skipped and
    named, never taken for a rank."""


class OutlineGuessWrong(Exception):
    """The quick outline guessed the end of ``traceEvents`` wrong (an array follows it in the
    file); decode again with ``load(path, exact=True)``."""


class _PlainArgs:
    """The args the analysis reads, from a dict (standard library, or a field msgspec could not type)."""

    __slots__ = ("collective_name", "correlation", "dtype", "group_size", "in_msg_nelems", "out_msg_nelems")

    def __init__(self, raw) -> None:
        raw = raw if isinstance(raw, dict) else {}
        self.correlation = raw.get("correlation")
        self.collective_name = raw.get("Collective name")
        self.in_msg_nelems = raw.get("In msg nelems")
        self.out_msg_nelems = raw.get("Out msg nelems")
        self.group_size = raw.get("Group size")
        self.dtype = raw.get("dtype")


_NO_PLAIN_ARGS = _PlainArgs({})


class _Plain:
    """An event decoded by the standard library, with the attributes of the msgspec struct."""

    __slots__ = ("args", "cat", "dur", "id", "name", "ph", "pid", "tid", "ts")

    def __init__(self, raw: dict) -> None:
        self.ph = raw.get("ph", "")
        self.cat = raw.get("cat", "")
        name = raw.get("name", "")
        self.name = name if isinstance(name, str) else ""
        self.ts = raw.get("ts", 0.0)
        self.dur = raw.get("dur", 0.0)
        self.pid = raw.get("pid")
        self.tid = raw.get("tid")
        self.id = raw.get("id")
        args = raw.get("args")
        self.args = _PlainArgs(args) if args else _NO_PLAIN_ARGS


if msgspec is not None:

    class _Args(msgspec.Struct, frozen=True, gc=False):
        # Only what the analysis reads; every other key is skipped without building it.
        correlation: object = None
        collective_name: object = msgspec.field(default=None, name="Collective name")
        in_msg_nelems: object = msgspec.field(default=None, name="In msg nelems")
        out_msg_nelems: object = msgspec.field(default=None, name="Out msg nelems")
        group_size: object = msgspec.field(default=None, name="Group size")
        dtype: object = None

    _NO_ARGS = _Args()

    # gc=False: events hold no cycles, and a collector pass over millions of them is the cost.
    class _Event(msgspec.Struct, gc=False):
        ph: str = ""
        cat: str = ""
        name: str = ""
        ts: float = 0.0
        dur: float = 0.0
        pid: object = None
        tid: object = None
        id: object = None
        args: _Args = _NO_ARGS

    class _Lenient(_Event):
        # For a batch the typed struct rejects (a name that is not a string, args that are not an
        # object): the other fields as strict as there, name and args taken as they come (msgspec
        # decodes by the subclass's annotations; mypy objects to the wider types).
        name: object = ""  # type: ignore[assignment]
        args: object = None  # type: ignore[assignment]

    class _Outline(msgspec.Struct):
        # Each event kept as its raw bytes: decoded a batch at a time, so the decoded events of
        # a multi-GB trace never all exist at once.
        traceEvents: msgspec.Raw = msgspec.Raw(b"[]")
        distributedInfo: object = None
        deviceProperties: object = None
        baseTimeNanoseconds: object = None

    _EVENTS_DECODER = msgspec.json.Decoder(_Outline)
    _BATCH_DECODER = msgspec.json.Decoder(list[_Event])
    _LENIENT_DECODER = msgspec.json.Decoder(list[_Lenient])
else:  # pragma: no cover - the standard-library path decodes every field up front
    _EVENTS_DECODER = _BATCH_DECODER = _LENIENT_DECODER = None
_CHUNK_BYTES = 1 << 20  # about 1 MB of events decoded at a time: they are used while still in cache


_KINETO_KEYS = (b'"schemaVersion"', b'"distributedInfo"', b'"deviceProperties"', b'"baseTimeNanoseconds"')
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux: the kernel maps every page in one call
_NOT_BLANK = re.compile(rb"\S")


def _read(path: str) -> bytearray | mmap.mmap:
    """The file's bytes, in a writable buffer that _batched marks in place (bytearray or mmap)."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                return bytearray(handle.read())
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data: bytearray | mmap.mmap
            if _POPULATE and size:
                # Anonymous memory the kernel maps whole before the read: faulting in a multi-GB
                # buffer a page at a time costs a third of the reading. A copy, not a mapping of
                # the file, so a file cut short meanwhile cannot crash the process (SIGBUS).
                data = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)
            else:
                data = bytearray(size)
            got = handle.readinto(data)
            rest = handle.read()  # a file that grew since fstat
    except (OSError, EOFError) as exc:
        raise TraceFileError(f"{path}: cannot read ({exc})") from None
    if got == size and not rest:
        return data
    return bytearray(data[:got]) + rest  # the file changed size while read


def load(path: str, exact: bool = False):
    """Decode a trace: (batches, distributedInfo, deviceProperties, baseTimeNanoseconds), where
    batches yields lists of events. Every failure names the file.

    The quick outline (msgspec) takes the events array to end at the file's last ``]``; when an
    array follows it, the last batch raises OutlineGuessWrong and ``exact=True`` reads the outline
    by decoding the whole file."""
    data = _read(path)
    if not data or not _NOT_BLANK.search(data):  # stops at the first other byte; strip() copies the file
        raise TraceFileError(f"{path}: empty file")
    if data.find(b'"traceEvents"') < 0:
        # A trace cut short before its events still has Kineto's keys: that one is an error.
        if any(data.find(key) >= 0 for key in _KINETO_KEYS):
            raise TraceFileError(f"{path}: not a Kineto trace: it has no traceEvents (cut short?)")
        raise NotATrace(f"{path}: not a profiler trace (no traceEvents), skipped")
    if msgspec is not None:
        quick = None if exact else _quick_outline(data)
        if quick is not None:
            outline, first, last = quick
        else:
            try:
                outline = _EVENTS_DECODER.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
            array = outline.traceEvents
            first = data.find(b"[", data.find(b'"traceEvents"'))
            last = first + len(array) - 1
            where_kineto_puts_it = (
                data[last : last + 1] == b"]" and data[first : first + 64] == memoryview(array)[:64].tobytes()
            )
            if first < 0 or not where_kineto_puts_it:
                # Not where a Kineto writer puts it: decode the raw array on its own.
                data, first, last = bytearray(array), 0, len(array) - 1
        return (
            _batched(path, data, first, last, guessed=quick is not None),
            outline.distributedInfo,
            outline.deviceProperties,
            outline.baseTimeNanoseconds,
        )
    try:
        raw = json.loads(data if isinstance(data, bytearray) else data[:])  # json takes no mmap
    except (ValueError, RecursionError) as exc:
        raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("traceEvents", []), list):
        raise TraceFileError(f"{path}: not a Kineto trace: no traceEvents array")
    events = [_Plain(e) for e in raw.get("traceEvents", []) if isinstance(e, dict)]
    return iter([events]), raw.get("distributedInfo"), raw.get("deviceProperties"), raw.get("baseTimeNanoseconds")


def _quick_outline(data: bytearray | mmap.mmap):
    """(outline, first, last) from the file with its events array left out, or None when the file
    does not look like that. Decoding only the keys around the array spares a scan of the whole
    file; the array is taken to run from ``"traceEvents": [`` to the last ``]``."""
    key = data.find(b'"traceEvents"')
    first = data.find(b"[", key)
    last = data.rfind(b"]")
    if key < 0 or first < 0 or last <= first or data[key + len(b'"traceEvents"') : first].strip() != b":":
        return None
    shell = data[:first] + b"[]" + data[last + 1 :]
    try:
        outline = _EVENTS_DECODER.decode(shell)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if bytes(outline.traceEvents) != b"[]":  # the key found was not the top-level one
        return None
    return outline, first, last


def _batched(path: str, data: bytearray | mmap.mmap, first: int, last: int, guessed: bool = False):
    """Lists of the events of the ``traceEvents`` array ``data[first:last + 1]``, decoded about
    ``_CHUNK_BYTES`` at a time.

    The array is cut after a ``}`` followed by ``,``; a cut that falls inside a string makes the
    piece fail to decode, and the cut moves on to the next candidate.
    """
    pos = first + 1  # after [
    while pos < last:
        cut = min(pos + _CHUNK_BYTES, last)
        while True:
            if cut < last:
                found = data.find(b"},", cut, last)
                cut = last if found < 0 else found + 1
            # The piece is decoded where it lies: the comma before it and the one after it are
            # turned into [ and ] for the decoding and back, instead of copying the piece.
            before, after = data[pos - 1], data[cut]
            data[pos - 1], data[cut] = 0x5B, 0x5D  # [ ]
            try:
                with memoryview(data) as view:
                    events = _decode_piece(view[pos - 1 : cut + 1])
                break
            except msgspec.ValidationError as exc:  # a subclass of DecodeError: the JSON was whole
                raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
            except msgspec.DecodeError as exc:
                if cut >= last:
                    if guessed:
                        raise OutlineGuessWrong(path) from None
                    raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
            finally:
                data[pos - 1], data[cut] = before, after
        yield events
        pos = cut + 1  # past the comma


def _decode_piece(piece) -> list:
    """One piece's events: typed, or, when a name or args have another type, read leniently."""
    try:
        return _BATCH_DECODER.decode(piece)
    except msgspec.ValidationError:
        lenient = _LENIENT_DECODER.decode(piece)  # DecodeError / ValidationError go to the caller
    return [_Plain(msgspec.structs.asdict(item)) for item in lenient]


def short_error(exc: Exception) -> str:
    """The first line of a decoder's message, at most 200 characters (a JSON error can quote a lot)."""
    return str(exc).splitlines()[0][:200]
