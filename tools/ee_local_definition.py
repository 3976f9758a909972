# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the execution-environment definition `make ee` builds here, from the published one.

The published execution-environment.yml is what a user builds with a registry and Galaxy in
reach (CentOS Stream base, collections from Galaxy). Here neither is reachable, so the same
definition is rewritten, and only in these keys:
- images.base_image: the debootstrapped Debian trixie base (tools/build_ee.sh makes it);
- dependencies.python_interpreter: trixie's /usr/bin/python3 (3.13), from the base;
- dependencies.galaxy: every collection as a local tarball (today only the artifact of this
  checkout, which depends on no other collection; a collection the published file pinned from
  Galaxy would be packed with --pack from the PyPI `ansible` package, at the pinned version);
- additional_build_files / prepend_galaxy: those tarballs;
- options: the base's apt wrapper as package manager, and the image's tag.
Everything else (ansible-core, ansible-runner, the collection's Python and system needs) is the
published definition's.

usage: ee_local_definition.py <published.yml> <dist dir> <base image> <tag> > <out.yml>
       ee_local_definition.py --pack <installed collection dir> <out.tar.gz>
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

import yaml

IN_CONTEXT = "/tmp/ee-dist"  # where the prepend_galaxy step puts the tarballs in the build


def local_definition(published: dict, dist: Path, base_image: str, tag: str) -> dict:
    definition = copy.deepcopy(published)
    definition["images"] = {"base_image": {"name": base_image}}
    deps = definition["dependencies"]
    deps["python_interpreter"] = {"package_system": "python3", "python_path": "/usr/bin/python3"}
    tarballs = sorted(p.name for p in dist.glob("*.tar.gz"))
    wanted = []
    for entry in deps["galaxy"]["collections"]:
        name = entry["name"]
        if entry.get("type") == "file":
            artifact = Path(name).name
        else:
            artifact = f"{name.replace('.', '-')}-{entry['version']}.tar.gz"
        if artifact not in tarballs:
            raise SystemExit(f"{dist}: no {artifact} for {name}")
        wanted.append(artifact)
    # Other tarballs in the dist (a pinned collection's own dependencies, packed beside it) go in
    # after the pinned ones; with no pinned collection build_ee.sh packs none.
    wanted += [t for t in tarballs if t not in wanted]
    deps["galaxy"] = {"collections": [{"name": f"{IN_CONTEXT}/{t}", "type": "file"} for t in wanted]}
    definition["additional_build_files"] = [{"src": str(dist), "dest": "ee-dist"}]
    definition["additional_build_steps"] = dict(
        definition.get("additional_build_steps") or {}, prepend_galaxy=[f"ADD _build/ee-dist {IN_CONTEXT}"]
    )
    definition["options"] = dict(
        definition.get("options") or {}, package_manager_path="/usr/local/bin/ee-apt", tags=[tag]
    )
    return definition


def pack_installed(directory: Path, out: Path) -> None:
    """An installable artifact of a collection as the PyPI ``ansible`` package installs it.

    Its FILES.json still lists what the package left out (CI files such as .azure-pipelines), and
    ansible-galaxy refuses an artifact lacking a listed entry; so FILES.json is written anew from
    the files that are there (same format, sha256 each) and MANIFEST.json's checksum of it with it.
    """
    entries = [{"name": ".", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1}]
    members = []
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if "__pycache__" in path.parts or relative in ("MANIFEST.json", "FILES.json"):
            continue
        if path.is_dir():
            entries.append({"name": relative, "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1})
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            entries.append(
                {"name": relative, "ftype": "file", "chksum_type": "sha256", "chksum_sha256": digest, "format": 1}
            )
        members.append((relative, path))
    files_json = json.dumps({"files": entries, "format": 1}, indent=4).encode()
    manifest = json.loads((directory / "MANIFEST.json").read_text())
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_json).hexdigest()
    with tarfile.open(out, "w:gz") as tar:
        for name, data in (("MANIFEST.json", json.dumps(manifest, indent=4).encode()), ("FILES.json", files_json)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, path in members:
            tar.add(path, arcname=name, recursive=False)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--pack":
        pack_installed(Path(argv[2]), Path(argv[3]))
        return 0
    if len(argv) != 5:
        print(__doc__.rsplit("usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    published = yaml.safe_load(Path(argv[1]).read_text())
    print("---\n# Generated by tools/ee_local_definition.py: do not edit.")
    print(yaml.safe_dump(local_definition(published, Path(argv[2]), argv[3], argv[4]), sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
