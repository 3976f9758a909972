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
import json
import os
import shutil
import subprocess
import tarfile
from zlib import error as zlib_error

# Directories a run's collection never takes: consolidated trees and the launcher's own files.
EXCLUDED_DIRS = ("combined_traces", ".aorta-cluster", ".git")
_CHUNK = 1 << 20
_KEY = b'"distributedInfo"'


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
    if compression == "auto":
        compression = "zstd" if zstd_available() else "gzip"
    if compression not in ("zstd", "gzip", "none"):
        raise TraceError(f"compression {compression!r} is not one of auto, zstd, gzip, none")
    os.makedirs(os.path.dirname(archive) or ".", exist_ok=True)
    tmp = archive + ".part"
    hashes = {} if hashes is None else hashes
    zstd = None
    try:
        opened: dict = {"name": tmp, "mode": "w", "format": tarfile.PAX_FORMAT}
        if compression == "zstd":
            # A pipe that tar writes into while zstd runs: run_command would wait for its end.
            argv = ["zstd", "-q", "-1", "-T0", "-f", "-o", tmp]
            zstd = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE)  # pylint: disable=ansible-bad-function
            opened.update(name=None, fileobj=zstd.stdin, mode="w|")
        elif compression == "gzip":
            opened.update(mode="w:gz", compresslevel=1)
        with tarfile.open(**opened) as tar:
            for rel in files:
                path = os.path.join(root, rel)
                with open(path, "rb") as handle:
                    info = tar.gettarinfo(arcname=rel, fileobj=handle)
                    reader = _Hashing(handle)
                    tar.addfile(info, reader)
                hashes[rel] = (info.size, reader.digest.hexdigest())
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


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts and "\\" not in name


def unpack(archive: str, dest: str, compression: str, run_command=None, hashes=None) -> list:
    """Extract regular files only, refusing absolute paths, ``..`` and links; returns their names.
    A zstd archive is decompressed straight into the extraction (no intermediate .tar), and each
    file's (size, sha256) goes into ``hashes`` as it is written (no second read to verify it)."""
    del run_command
    hashes = {} if hashes is None else hashes
    os.makedirs(dest, exist_ok=True)
    names = []
    zstd = None
    opened: dict = {"name": archive, "mode": "r|gz" if compression == "gzip" else "r|"}
    try:
        if compression == "zstd":
            # A pipe that tar reads from while zstd runs: run_command would wait for its end.
            argv = ["zstd", "-q", "-d", "-c", archive]
            zstd = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # pylint: disable=ansible-bad-function
            opened.update(name=None, fileobj=zstd.stdout, mode="r|")
        with tarfile.open(**opened) as tar:
            for member in tar:
                if member.isdir():
                    continue
                if not member.isfile() or not _safe_name(member.name):
                    raise TraceError(f"{archive}: refusing archive member {member.name!r} (not a plain relative file)")
                target = os.path.join(dest, member.name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                content = tar.extractfile(member)
                if content is None:  # not a regular file: refused above, never reached
                    raise TraceError(f"{archive}: {member.name!r} has no content")
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
                raise TraceError(f"{archive}: zstd could not decompress it ({zstd.returncode}): {err.strip()}")
    except (tarfile.TarError, EOFError, zlib_error, gzip.BadGzipFile) as exc:
        if zstd is not None:
            _pipe(zstd.stdout).read()  # drained, so that zstd ends and its own verdict can be read
        if zstd is not None and zstd.wait() != 0:
            err = _pipe(zstd.stderr).read().decode("utf-8", "replace")
            raise TraceError(f"{archive}: zstd could not decompress it ({zstd.returncode}): {err.strip()}") from None
        raise TraceError(f"{archive}: damaged archive: {exc}") from None
    finally:
        if zstd is not None and zstd.poll() is None:
            zstd.kill()
            zstd.wait()
    return names
