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


def pack(root: str, files: list, archive: str, compression: str, run_command) -> str:
    """Write ``files`` (relative to ``root``) into a tar archive; returns the compression used.

    zstd (multi-threaded, fast level) when the command exists: Kineto JSON shrinks 15-20x, so a
    slow management network moves a fraction of the bytes; else gzip at a fast level.
    ``run_command`` is the module's (argv list in, (rc, out, err) out); zstd writes straight to
    files, so no trace ever passes through memory.
    """
    if compression == "auto":
        compression = "zstd" if zstd_available() else "gzip"
    if compression not in ("zstd", "gzip", "none"):
        raise TraceError(f"compression {compression!r} is not one of auto, zstd, gzip, none")
    os.makedirs(os.path.dirname(archive) or ".", exist_ok=True)
    tmp, tar_tmp = archive + ".part", archive + ".tar.part"
    try:
        mode, kwargs, target = "w", {}, tar_tmp if compression == "zstd" else tmp
        if compression == "gzip":
            mode, kwargs = "w:gz", {"compresslevel": 1}
        with tarfile.open(target, mode=mode, format=tarfile.PAX_FORMAT, **kwargs) as tar:  # type: ignore[call-overload]
            for rel in files:
                tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
        if compression == "zstd":
            rc, _out, err = run_command(["zstd", "-q", "-1", "-T0", "-f", "-o", tmp, tar_tmp])
            if rc != 0:
                raise TraceError(f"{archive}: zstd failed ({rc}): {err.strip()}")
        os.replace(tmp, archive)
    finally:
        for leftover in (tmp, tar_tmp):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return compression


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts and "\\" not in name


def unpack(archive: str, dest: str, compression: str, run_command) -> list:
    """Extract regular files only, refusing absolute paths, ``..`` and links; returns their names."""
    os.makedirs(dest, exist_ok=True)
    names = []
    plain = None
    try:
        if compression == "zstd":
            plain = f"{dest}.tar.part"
            rc, _out, err = run_command(["zstd", "-q", "-d", "-f", "-o", plain, archive])
            if rc != 0:
                raise TraceError(f"{archive}: zstd could not decompress it ({rc}): {err.strip()}")
        source = plain or archive
        with tarfile.open(source, mode="r|gz" if compression == "gzip" else "r|") as tar:
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
                with open(target, "wb") as out:
                    shutil.copyfileobj(content, out, _CHUNK)
                os.utime(target, (member.mtime, member.mtime))
                names.append(member.name)
    except (tarfile.TarError, EOFError, zlib_error, gzip.BadGzipFile) as exc:
        raise TraceError(f"{archive}: damaged archive: {exc}") from None
    finally:
        if plain and os.path.exists(plain):
            os.unlink(plain)
    return names
