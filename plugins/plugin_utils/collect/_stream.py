# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One node's traces streamed to the controller: packed, sent and unpacked at once (controller side).

Private to this collection. The node runs module_utils/trace_analysis/_traces.py itself (``python3 - ROOT FLOOR
COMPRESSION``, the file's text on stdin), which reads each file once, hashes it and writes a
compressed tar to the SSH channel; here that channel goes straight into zstd (a gzip or plain
stream straight into Python's tarfile) and the extraction, which hashes each file as it writes it.
Nothing waits for a whole archive: the node's disk, compression, the wire and the controller's disk
work together, as rsync's do, on 8-16x fewer bytes.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _traces

SCRIPT = _traces.__file__.replace(".pyc", ".py")
MAX_MAGIC = 64  # the stream's first line: b"AORTA-TRACES/1 zstd\n"


class StreamError(Exception):
    """The stream did not arrive whole; the message says what broke."""


def remote_command(python: str, root: str, floor: float, compression: str) -> str:
    """The command the node runs, its script arriving on stdin (no file is left on the node)."""
    return " ".join(shlex.quote(str(part)) for part in (python, "-", root, repr(float(floor)), compression))


def _first_line(fd: int) -> bytes:
    """Read the magic line byte by byte, so that what follows stays in the pipe for zstd."""
    line = b""
    while not line.endswith(b"\n") and len(line) < MAX_MAGIC:
        block = os.read(fd, 1)
        if not block:
            break
        line += block
    return line


def pull(argv: Sequence[bytes | str], dest: str, timeout_s: float, script: str = SCRIPT) -> dict[str, Any]:
    """Run ``argv`` (ssh to the node and the remote command), feed it the packing script, and unpack
    what it streams into ``dest``. Returns ``files`` (the node's list: path, size, sha256, read on the
    node), ``arrived`` (path -> [size, sha256] as written here) and ``compression``; raises
    StreamError naming what broke (``dest`` is then removed)."""
    with open(script, "rb") as handle:
        body = handle.read()
    with tempfile.TemporaryFile() as stderr:
        ssh = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        zstd = None
        try:
            if ssh.stdin is None or ssh.stdout is None:
                raise StreamError("ssh started without its pipes")
            with contextlib.suppress(BrokenPipeError):  # ssh ended early: its exit and stderr say why
                ssh.stdin.write(body)
            ssh.stdin.close()
            line = _first_line(ssh.stdout.fileno())
            if not line.startswith(_traces.STREAM_MAGIC):
                raise StreamError(_said(ssh, stderr, timeout_s, "the node sent no trace stream"))
            compression = line[len(_traces.STREAM_MAGIC) :].strip().decode("ascii", "replace")
            hashes: dict = {}
            listed: dict = {}
            if compression == "zstd":
                zstd = subprocess.Popen(
                    ["zstd", "-q", "-d", "-c"], stdin=ssh.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
                source, mode = zstd.stdout, "none"
            else:
                source, mode = ssh.stdout, compression
            try:
                _traces.unpack_stream(source, dest, "the stream", mode, hashes, listed, decompressor=zstd)
            except _traces.TraceError as exc:
                raise StreamError(_said(ssh, stderr, timeout_s, str(exc))) from None
            if ssh.wait(timeout=timeout_s) != 0:
                raise StreamError(_said(ssh, stderr, timeout_s, f"ssh ended with {ssh.returncode}"))
            if not listed and hashes:
                raise StreamError("the stream ended before the node's list of files")
        except (StreamError, OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(dest, ignore_errors=True)
            raise StreamError(str(exc)) from None
        finally:
            for proc in (zstd, ssh):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
    files = [{"path": rel, "size": int(pair[0]), "sha256": str(pair[1])} for rel, pair in sorted(listed.items())]
    return {"files": files, "arrived": {rel: list(pair) for rel, pair in hashes.items()}, "compression": compression}


def _said(ssh: subprocess.Popen, stderr: Any, timeout_s: float, what: str) -> str:
    """``what``, and the last lines ssh or the node's script wrote to stderr."""
    try:
        ssh.wait(timeout=min(timeout_s, 10))
    except subprocess.TimeoutExpired:
        ssh.kill()
        ssh.wait()
    stderr.seek(0)
    tail = " | ".join(stderr.read().decode("utf-8", "replace").strip().splitlines()[-3:])
    return f"{what} (rc {ssh.returncode}): {tail}" if tail else f"{what} (rc {ssh.returncode})"
