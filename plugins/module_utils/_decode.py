# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decoding a Kineto (torch.profiler) Chrome trace: the events, distributedInfo, deviceProperties.

Private to this collection. Standard library only, so it runs on the nodes; uses msgspec typed
decoding (only the fields needed, ``name`` and ``args`` left raw until an event that matters needs
them, the events decoded about 16 MB at a time) when it is installed, which decodes faster than
orjson builds a full object tree. Without msgspec every field is decoded by json up front; the
events have the same attribute names either way.
"""

from __future__ import annotations

import gzip
import json

try:  # optional, faster decoding
    import msgspec
except ImportError:  # pragma: no cover - exercised on nodes without msgspec
    msgspec = None  # type: ignore[assignment]


class TraceFileError(Exception):
    """One trace file cannot be analysed; the message names the file and says why."""


if msgspec is not None:

    class _Event(msgspec.Struct, omit_defaults=True):
        # name and args stay raw bytes until an event that matters needs them: most events of a
        # big trace (python_function, cpu_instant_event) never do, and a str per name costs RAM.
        ph: str = ""
        cat: str = ""
        name: msgspec.Raw = msgspec.Raw(b'""')
        ts: float = 0.0
        dur: float = 0.0
        pid: object = None
        tid: object = None
        id: object = None
        args: msgspec.Raw = msgspec.Raw(b"{}")

    class _Outline(msgspec.Struct):
        # Each event kept as its raw bytes: decoded a batch at a time, so the decoded events of
        # a multi-GB trace never all exist at once.
        traceEvents: msgspec.Raw = msgspec.Raw(b"[]")
        distributedInfo: object = None
        deviceProperties: object = None
        baseTimeNanoseconds: object = None

    _EVENTS_DECODER = msgspec.json.Decoder(_Outline)
    _BATCH_DECODER = msgspec.json.Decoder(list[_Event])
    _ARGS_DECODER = msgspec.json.Decoder(dict)
    _NAME_DECODER = msgspec.json.Decoder(str)
else:  # pragma: no cover - the standard-library path decodes every field up front
    _EVENTS_DECODER = _BATCH_DECODER = _ARGS_DECODER = _NAME_DECODER = None
_CHUNK_BYTES = 16 << 20  # about 16 MB of events decoded at a time


def _read(path: str) -> bytes:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                return handle.read()
        with open(path, "rb") as handle:
            return handle.read()
    except (OSError, EOFError) as exc:
        raise TraceFileError(f"{path}: cannot read ({exc})") from None


class _Plain:
    """An event decoded by the standard library, with the attribute names of the msgspec struct."""

    __slots__ = ("args", "cat", "dur", "id", "name", "ph", "pid", "tid", "ts")

    def __init__(self, raw: dict) -> None:
        self.ph = raw.get("ph", "")
        self.cat = raw.get("cat", "")
        self.name = raw.get("name", "")
        self.ts = raw.get("ts", 0.0)
        self.dur = raw.get("dur", 0.0)
        self.pid = raw.get("pid")
        self.tid = raw.get("tid")
        self.id = raw.get("id")
        self.args = raw.get("args") or {}


def load(path: str):
    """Decode a trace: (events, distributedInfo, deviceProperties, baseTimeNanoseconds). Every
    failure names the file."""
    data = _read(path)
    if not data.strip():
        raise TraceFileError(f"{path}: empty file")
    if msgspec is not None:
        try:
            outline = _EVENTS_DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
        array = outline.traceEvents
        first = data.find(b"[", data.find(b'"traceEvents"'))
        last = first + len(array) - 1
        if first < 0 or data[last : last + 1] != b"]" or data[first : first + 64] != memoryview(array)[:64].tobytes():
            # Not where a Kineto writer puts it: decode the raw array on its own.
            data, first, last = bytes(array), 0, len(array) - 1
        return (
            _batched(path, data, first, last),
            outline.distributedInfo,
            outline.deviceProperties,
            outline.baseTimeNanoseconds,
        )
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("traceEvents", []), list):
        raise TraceFileError(f"{path}: not a Kineto trace: no traceEvents array")
    events = [_Plain(e) for e in raw.get("traceEvents", []) if isinstance(e, dict)]
    return events, raw.get("distributedInfo"), raw.get("deviceProperties"), raw.get("baseTimeNanoseconds")


def _batched(path: str, data: bytes, first: int, last: int):
    """Events of the ``traceEvents`` array ``data[first:last + 1]``, decoded about ``_CHUNK_BYTES`` at a time.

    The array is cut after a ``}`` followed by ``,``; a cut that falls inside a string makes the
    piece fail to decode, and the cut moves on to the next candidate.
    """
    view = memoryview(data)
    pos = first + 1  # after [
    while pos < last:
        cut = min(pos + _CHUNK_BYTES, last)
        while True:
            if cut < last:
                found = data.find(b"},", cut, last)
                cut = last if found < 0 else found + 1
            piece = bytearray(b"[")
            piece += view[pos:cut]
            piece += b"]"
            try:
                events = _BATCH_DECODER.decode(piece)
                break
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if cut >= last:
                    raise TraceFileError(f"{path}: not a Kineto trace: {short_error(exc)}") from None
        del piece
        yield from events
        pos = cut + 1  # past the comma


def short_error(exc: Exception) -> str:
    """The first line of a decoder's message, at most 200 characters (a JSON error can quote a lot)."""
    return str(exc).splitlines()[0][:200]


def _decoded(event, field: str, decoder, empty):
    """A field msgspec left raw, decoded on first use and kept (events read by json are decoded already)."""
    value = getattr(event, field)
    if msgspec is None or not isinstance(value, msgspec.Raw):
        return value
    try:
        value = decoder.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        value = empty
    setattr(event, field, value)
    return value


def event_name(event) -> str:
    """The event's name (decoded on first use)."""
    return _decoded(event, "name", _NAME_DECODER, "")


def event_args(event) -> dict:
    """The event's args (decoded on first use; {} when they are not an object)."""
    return _decoded(event, "args", _ARGS_DECODER, {})
