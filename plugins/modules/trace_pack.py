#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trace_pack
short_description: Pack the files a run wrote on a node into one compressed archive
version_added: 0.1.0
description:
  - Runs on a node after a run. Takes the files under O(root) modified at or after O(since) (the
    run's start floor, read on the node's own clock before launch), never anything under
    C(combined_traces), C(.aorta-cluster) or C(.git), never symlinks; so files of earlier runs are
    left alone even in the same directory.
  - Records each file's size and sha256 (the originals, for verification on arrival) and packs
    them into O(archive), with zstd when the node has it (Kineto JSON shrinks 15-20x) else gzip.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  root:
    description: The run's output directory on the node.
    type: path
    required: true
  since:
    description: Epoch seconds; older files are not taken.
    type: float
    default: 0
  archive:
    description: Where to write the archive on the node.
    type: path
    required: true
  compression:
    description: V(auto) picks zstd when its command exists, else gzip.
    type: str
    choices: [auto, zstd, gzip, none]
    default: auto
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Lists and hashes the files but writes no archive.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Pack this run's files on every node
  aorta.cluster.trace_pack:
    root: /home/me/aorta/aorta_runs/20261130T101500-a1b2c3
    since: 1796040000
    archive: /home/me/aorta/.aorta-cluster/20261130T101500-a1b2c3/traces.tar.zst
  register: aorta_pack
"""

RETURN = r"""
files:
  description: The packed files, relative to O(root).
  returned: always
  type: list
  elements: dict
  sample: [{"path": "torch_profiler/rank0/trace_step6.json", "size": 1834211, "sha256": "9f2c..."}]
raw_bytes:
  description: Total size of the files.
  returned: always
  type: int
  sample: 214958080
archive:
  description: The archive written, or V(null) when there was nothing to pack.
  returned: always
  type: str
archive_bytes:
  description: Size of the archive.
  returned: always
  type: int
archive_sha256:
  description: sha256 of the archive, to check it on arrival.
  returned: always
  type: str
compression:
  description: V(zstd), V(gzip) or V(none).
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import (
    TraceError,
    find_new_files,
    pack,
    sha256_file,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "since": {"type": "float", "default": 0},
            "archive": {"type": "path", "required": True},
            "compression": {"type": "str", "default": "auto", "choices": ["auto", "zstd", "gzip", "none"]},
        },
        supports_check_mode=True,
    )
    root, archive = module.params["root"], module.params["archive"]
    try:
        names = find_new_files(root, module.params["since"])
        hashes: dict = {}
        compression = "none"
        if names and not module.check_mode:
            # One pass: each file is read once, hashed as it goes into the archive.
            compression = pack(root, names, archive, module.params["compression"], hashes=hashes)
        else:
            hashes = {
                rel: (os.path.getsize(os.path.join(root, rel)), sha256_file(os.path.join(root, rel))) for rel in names
            }
        files = [{"path": rel, "size": hashes[rel][0], "sha256": hashes[rel][1]} for rel in names]
        result = {
            "files": files,
            "raw_bytes": sum(f["size"] for f in files),
            "archive": None,
            "archive_bytes": 0,
            "archive_sha256": "",
            "compression": compression,
        }
        if files and not module.check_mode:
            result.update(archive=archive, archive_bytes=os.path.getsize(archive), archive_sha256=sha256_file(archive))
    except (OSError, TraceError) as exc:
        module.fail_json(msg=f"cannot pack {root} into {archive}: {exc}")
    module.exit_json(changed=bool(files), **result)


if __name__ == "__main__":
    main()
