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
    found = []
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


def pack(root: str, files: list, archive: str, compression: str = "auto") -> str:
    """Write ``files`` (relative to ``root``) into a tar archive; returns the compression used.

    zstd (multi-threaded, fast level) when the command exists: Kineto JSON shrinks 15-20x, so a
    slow management network moves a fraction of the bytes; else gzip at a fast level.
    """
    if compression == "auto":
        compression = "zstd" if zstd_available() else "gzip"
    os.makedirs(os.path.dirname(archive) or ".", exist_ok=True)
    tmp = archive + ".part"
    try:
        if compression == "zstd":
            with open(tmp, "wb") as out:
                proc = subprocess.Popen(["zstd", "-q", "-1", "-T0", "-c"], stdin=subprocess.PIPE, stdout=out)
                with tarfile.open(fileobj=proc.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                    for rel in files:
                        tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
                proc.stdin.close()
                if proc.wait() != 0:
                    raise TraceError(f"{archive}: zstd failed with exit code {proc.returncode}")
        elif compression in ("gzip", "none"):
            mode = "w:gz" if compression == "gzip" else "w"
            kwargs = {"compresslevel": 1} if compression == "gzip" else {}
            with tarfile.open(tmp, mode=mode, format=tarfile.PAX_FORMAT, **kwargs) as tar:
                for rel in files:
                    tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
        else:
            raise TraceError(f"compression {compression!r} is not one of auto, zstd, gzip, none")
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return compression


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts and "\\" not in name


def unpack(archive: str, dest: str, compression: str) -> list:
    """Extract regular files only, refusing absolute paths, ``..`` and links; returns their names."""
    os.makedirs(dest, exist_ok=True)
    names = []
    proc = None
    try:
        if compression == "zstd":
            proc = subprocess.Popen(["zstd", "-q", "-d", "-c", archive], stdout=subprocess.PIPE)
            tar = tarfile.open(fileobj=proc.stdout, mode="r|")  # noqa: SIM115 - closed by the with below
        else:
            tar = tarfile.open(archive, mode="r|gz" if compression == "gzip" else "r|")  # noqa: SIM115 - same
        with tar:
            for member in tar:
                if member.isdir():
                    continue
                if not member.isfile() or not _safe_name(member.name):
                    raise TraceError(f"{archive}: refusing archive member {member.name!r} (not a plain relative file)")
                target = os.path.join(dest, member.name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                source = tar.extractfile(member)
                with open(target, "wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
                os.utime(target, (member.mtime, member.mtime))
                names.append(member.name)
    except (tarfile.TarError, EOFError) as exc:
        raise TraceError(f"{archive}: damaged archive: {exc}") from None
    finally:
        if proc is not None:
            proc.stdout.close()
            if proc.wait() != 0:
                raise TraceError(f"{archive}: zstd could not decompress it (exit {proc.returncode})")
    return names
