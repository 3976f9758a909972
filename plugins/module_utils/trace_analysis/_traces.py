# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Trace files: find a run's new files, pack them, verify and unpack them (standard library only).

Private to this collection. Runs on the nodes (packing) and on the controller (unpacking), so it
keeps to Python >= 3.9 and the standard library; zstd is used through its command when present.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from zlib import error as zlib_error

# Directories a run's collection never takes: consolidated trees and the launcher's own files.
EXCLUDED_DIRS = ("combined_traces", ".aorta-cluster", ".git")
_CHUNK = 1 << 20
_KEY = b'"distributedInfo"'
# zstd as both packs run it: quiet, fast level, every core (Kineto JSON still shrinks 15-20x).
_ZSTD_PACK = ["zstd", "-q", "-1", "-T0"]
# The last member of a streamed pack: {path: [size, sha256]} as the node read each file.
PACK_MEMBER = ".aorta-pack.json"
# A streamed pack's first line, before the compressed tar: b"AORTA-TRACES/1 <compression>\n".
STREAM_MAGIC = b"AORTA-TRACES/1 "


class TraceError(Exception):
    """A file or archive that cannot be used; the message names it."""


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def find_new_files(root: str, floor: float, excluded=EXCLUDED_DIRS) -> list:
    """Files under ``root`` modified at or after ``floor`` (epoch seconds), as sorted relative paths.

    Files older than the floor belong to an earlier run and are never taken; nor is anything
    under an excluded directory, nor a symlink.
    """
    found: list = []
    if not os.path.isdir(root):
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in excluded and not os.path.islink(os.path.join(dirpath, d)))
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            stat = os.stat(path)
            if stat.st_mtime >= floor:
                found.append(os.path.relpath(path, root))
    return sorted(found)


def _open_trace(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def distributed_ranks(path: str, head_bytes: int = 4 << 20) -> list:
    """Global ranks a Kineto trace declares in its ``distributedInfo`` (empty when it has none).

    Read from the file, never guessed from its name. The key sits near the start of a Kineto
    trace; only when it is not in the first ``head_bytes`` is the rest scanned, in chunks, so a
    multi-GB trace is never held in memory.
    """
    if not path.endswith((".json", ".json.gz")):
        return []
    try:
        with _open_trace(path) as handle:
            window = handle.read(head_bytes)
            while True:
                at = window.find(_KEY)
                if at >= 0:
                    tail = window[at:] + handle.read(64 << 10)
                    return _ranks_from(tail[len(_KEY) :])
                more = handle.read(_CHUNK)
                if not more:
                    return []
                window = window[-len(_KEY) :] + more
    except (OSError, EOFError, ValueError) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None


def _ranks_from(after_key: bytes) -> list:
    text = after_key.decode("utf-8", "replace").lstrip()
    if not text.startswith(":"):
        return []
    try:
        info, _end = json.JSONDecoder().raw_decode(text[1:].lstrip())
    except ValueError:
        return []
    if not isinstance(info, dict) or not isinstance(info.get("rank"), int):
        return []
    return [info["rank"]]


def _compression(asked: str) -> str:
    """The compression a pack uses: V(auto) is zstd where its command exists, else gzip."""
    if asked == "auto":
        return "zstd" if zstd_available() else "gzip"
    if asked not in ("zstd", "gzip", "none"):
        raise TraceError(f"compression {asked!r} is not one of auto, zstd, gzip, none")
    return asked


def zstd_available() -> bool:
    return shutil.which("zstd") is not None


def _pipe(stream):
    """A pipe of a process started with it (never None; says so for the type checker)."""
    if stream is None:
        raise TraceError("zstd: a pipe to it is missing")
    return stream


class _Hashing:
    """A file read once: tarfile copies it into the archive while its sha256 is taken."""

    def __init__(self, handle):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size=-1):
        block = self.handle.read(size)
        self.digest.update(block)
        return block


def pack(root: str, files: list, archive: str, compression: str, run_command=None, hashes=None) -> str:
    """Write ``files`` (relative to ``root``) into a tar archive; returns the compression used.

    zstd (multi-threaded, fast level) when the command exists: Kineto JSON shrinks 15-20x, so a
    slow management network moves a fraction of the bytes; else gzip at a fast level. One pass:
    each file is read once, its sha256 taken as tar reads it (into ``hashes``, rel -> (size,
    sha256)), and the tar stream goes straight into zstd's stdin: no intermediate .tar, no
    second read, no trace through memory. (``run_command`` is accepted for older callers.)
    """
    del run_command
    compression = _compression(compression)
    os.makedirs(os.path.dirname(archive) or ".", exist_ok=True)
    tmp = archive + ".part"
    hashes = {} if hashes is None else hashes
    zstd = None
    try:
        opened: dict = {"name": tmp, "mode": "w", "format": tarfile.PAX_FORMAT}
        if compression == "zstd":
            # A pipe that tar writes into while zstd runs: run_command would wait for its end.
            argv = [*_ZSTD_PACK, "-f", "-o", tmp]
            zstd = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE)  # pylint: disable=ansible-bad-function
            opened.update(name=None, fileobj=zstd.stdin, mode="w|")
        elif compression == "gzip":
            opened.update(mode="w:gz", compresslevel=1)
        with tarfile.open(**opened) as tar:
            _add_files(tar, root, files, hashes)
        if zstd is not None:
            _pipe(zstd.stdin).close()
            err = _pipe(zstd.stderr).read().decode("utf-8", "replace")
            if zstd.wait() != 0:
                raise TraceError(f"{archive}: zstd failed ({zstd.returncode}): {err.strip()}")
        os.replace(tmp, archive)
    except BrokenPipeError:
        err = _pipe(zstd.stderr).read().decode("utf-8", "replace") if zstd is not None else ""
        raise TraceError(f"{archive}: zstd stopped reading: {err.strip()}") from None
    finally:
        if zstd is not None and zstd.poll() is None:
            zstd.kill()
            zstd.wait()
        if os.path.exists(tmp):
            os.unlink(tmp)
    return compression


def _add_files(tar, root: str, files: list, hashes: dict) -> None:
    """Each file read once, its (size, sha256) taken as tar copies it (in 1 MB blocks, not 16 KB)."""
    tar.copybufsize = _CHUNK
    for rel in files:
        path = os.path.join(root, rel)
        with open(path, "rb") as handle:
            info = tar.gettarinfo(arcname=rel, fileobj=handle)
            reader = _Hashing(handle)
            tar.addfile(info, reader)
        hashes[rel] = (info.size, reader.digest.hexdigest())


def pack_stream(root: str, floor: float, compression: str, out_fd: int = 1) -> int:
    """The run's new files under ``root`` as one stream on ``out_fd`` (the SSH channel): a line
    STREAM_MAGIC + compression, then the compressed tar, read, hashed, compressed and sent at
    once (the controller unpacks while it arrives), ending with PACK_MEMBER: each file's size and
    sha256 as read here. Returns how many files went."""
    compression = _compression(compression)
    files = [rel for rel in find_new_files(root, floor) if rel != PACK_MEMBER]
    os.write(out_fd, STREAM_MAGIC + compression.encode() + b"\n")
    hashes: dict = {}
    zstd = None
    out = os.fdopen(os.dup(out_fd), "wb")
    try:
        mode = "w|gz" if compression == "gzip" else "w|"
        opened: dict = {"fileobj": out, "mode": mode, "format": tarfile.PAX_FORMAT, "bufsize": _CHUNK}
        if compression == "zstd":
            argv = [*_ZSTD_PACK, "-c"]
            zstd = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out_fd)  # pylint: disable=ansible-bad-function
            opened["fileobj"] = zstd.stdin
        with tarfile.open(**opened) as tar:
            _add_files(tar, root, files, hashes)
            body = json.dumps({rel: list(pair) for rel, pair in hashes.items()}).encode()
            info = tarfile.TarInfo(PACK_MEMBER)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        if zstd is not None:
            _pipe(zstd.stdin).close()
            if zstd.wait() != 0:
                raise TraceError(f"{root}: zstd failed ({zstd.returncode})")
    finally:
        out.close()
        if zstd is not None and zstd.poll() is None:
            zstd.kill()
            zstd.wait()
    return len(files)


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts and "\\" not in name


def unpack(archive: str, dest: str, compression: str, run_command=None, hashes=None) -> list:
    """Extract regular files only, refusing absolute paths, ``..`` and links; returns their names.
    A zstd archive is decompressed straight into the extraction (no intermediate .tar), and each
    file's (size, sha256) goes into ``hashes`` as it is written (no second read to verify it)."""
    del run_command
    zstd = None
    try:
        if compression == "zstd":
            # A pipe that tar reads from while zstd runs: run_command would wait for its end.
            argv = ["zstd", "-q", "-d", "-c", archive]
            zstd = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # pylint: disable=ansible-bad-function
            return unpack_stream(_pipe(zstd.stdout), dest, archive, "none", hashes, decompressor=zstd)
        with open(archive, "rb") as handle:
            return unpack_stream(handle, dest, archive, compression, hashes)
    finally:
        if zstd is not None and zstd.poll() is None:
            zstd.kill()
            zstd.wait()


def unpack_stream(stream, dest: str, label: str, compression: str, hashes=None, listed=None, decompressor=None) -> list:
    """Extract a tar stream read once (``compression`` V(gzip) or V(none); zstd arrives already
    decompressed by ``decompressor``, a process whose stdout is ``stream``): regular files only,
    each file's (size, sha256) into ``hashes`` as it is written. A trailing PACK_MEMBER (what the
    node read, from pack_stream) goes into ``listed`` instead of onto disk. ``label`` names the
    source in errors."""
    hashes = {} if hashes is None else hashes
    listed = {} if listed is None else listed
    os.makedirs(dest, exist_ok=True)
    names = []
    zstd = decompressor
    try:
        # 1 MB reads from the pipe, not tarfile's 10 KB records: a third of the unpacking time.
        with tarfile.open(fileobj=stream, mode="r|gz" if compression == "gzip" else "r|", bufsize=_CHUNK) as tar:
            for member in tar:
                if member.isdir():
                    continue
                if not member.isfile() or not _safe_name(member.name):
                    raise TraceError(f"{label}: refusing archive member {member.name!r} (not a plain relative file)")
                content = tar.extractfile(member)
                if content is None:  # not a regular file: refused above, never reached
                    raise TraceError(f"{label}: {member.name!r} has no content")
                if member.name == PACK_MEMBER:
                    listed.update(json.loads(content.read().decode("utf-8")))
                    continue
                target = os.path.join(dest, member.name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                digest, size = hashlib.sha256(), 0
                with open(target, "wb") as out:
                    while True:
                        block = content.read(_CHUNK)
                        if not block:
                            break
                        digest.update(block)
                        out.write(block)
                        size += len(block)
                os.utime(target, (member.mtime, member.mtime))
                hashes[member.name] = (size, digest.hexdigest())
                names.append(member.name)
        if zstd is not None:
            _pipe(zstd.stdout).read()  # tar's end blocks may leave padding unread
            err = _pipe(zstd.stderr).read().decode("utf-8", "replace")
            if zstd.wait() != 0:
                raise TraceError(f"{label}: zstd could not decompress it ({zstd.returncode}): {err.strip()}")
    except (tarfile.TarError, EOFError, zlib_error, gzip.BadGzipFile, ValueError) as exc:
        if zstd is not None:
            _pipe(zstd.stdout).read()  # drained, so that zstd ends and its own verdict can be read
        if zstd is not None and zstd.wait() != 0:
            err = _pipe(zstd.stderr).read().decode("utf-8", "replace")
            raise TraceError(f"{label}: zstd could not decompress it ({zstd.returncode}): {err.strip()}") from None
        raise TraceError(f"{label}: damaged archive: {exc}") from None
    return names


if __name__ == "__main__":
    # Sent to a node over SSH as `python3 - ROOT FLOOR COMPRESSION` (plugin_utils/collect/_stream.py).
    try:
        pack_stream(sys.argv[1], float(sys.argv[2]), sys.argv[3])
    except (OSError, TraceError) as exc:
        sys.stderr.write(f"cannot pack {sys.argv[1]}: {exc}\n")
        raise SystemExit(1) from None
