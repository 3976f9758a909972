# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the pipeline INSIDE the execution environment, the way an AWX execution node runs a job.

ansible-runner with a container engine (what AWX's receptor workers do): a private data directory
with the job's inventory (an inventory source naming the cluster file, read by the EE's own
aorta.cluster inventory plugin with connection_vars off, as docs/awx.md sets it up),
its extra variables, the Machine credential's key (ssh-agent inside the container, never a file
the job reads) and a project that imports the collection's playbook, so the collection that runs
is the one installed in the image, not this checkout. The container uses the host's network (the
stand-in nodes sit on the host's Docker bridges); the results directory is mounted at the same
path, so the report lands on the host.

    python tests/standin/ee_job.py <image> <results root>   (after `standin.py up`)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import standin  # noqa: E402  (beside this file)

PROJECT_PLAYBOOK = """---
# The job template's playbook: the collection's own play, from the execution environment.
- name: Run Aorta across the cluster
  ansible.builtin.import_playbook: aorta.cluster.aorta_multinode
"""
# The inventory source (docs/awx.md): the cluster file's key path does not exist in the EE; the key
# comes from the Machine credential, so the plugin sets no connection variables.
INVENTORY_SOURCE = """---
plugin: aorta.cluster.cluster_json
path: /runner/cluster/cluster.json
connection_vars: false
"""


def private_data_dir(work: Path, results_root: Path, cluster_json: Path | None = None) -> Path:
    """The job's private data directory, made from the running stand-in cluster's files
    (``cluster_json``: another cluster file of its nodes, e.g. fewer of them)."""
    pdd = work / "pdd"
    shutil.rmtree(pdd, ignore_errors=True)
    for sub in ("env", "inventory", "project", "cluster"):
        (pdd / sub).mkdir(parents=True)
    shutil.copy(cluster_json or standin.OUT / "cluster.json", pdd / "cluster" / "cluster.json")
    (pdd / "inventory" / "aorta_cluster.yml").write_text(INVENTORY_SOURCE)
    shutil.copy(standin.OUT / "known_hosts", pdd / "known_hosts")  # /runner/known_hosts inside
    extravars = yaml.safe_load((standin.OUT / "vars.yml").read_text())
    extravars.update(
        ansible_ssh_common_args="-o UserKnownHostsFile=/runner/known_hosts -o StrictHostKeyChecking=yes",
        aorta_results_root=str(results_root),
        aorta_image_archive="",  # the stand-in nodes hold the workload image already
    )
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    (pdd / "env" / "ssh_key").write_text((standin.OUT / "id_ed25519").read_text())
    (pdd / "env" / "cmdline").write_text("-u root")
    (pdd / "project" / "aorta_multinode.yml").write_text(PROJECT_PLAYBOOK)
    return pdd


def run_job(
    image: str, work: Path, results_root: Path, ident: str = "ee-job", cluster_json: Path | None = None
) -> tuple[int, str, Path]:
    """(rc, stdout, private data dir) of one job run inside ``image``."""
    results_root.mkdir(parents=True, exist_ok=True)
    pdd = private_data_dir(work, results_root, cluster_json)
    runner = Path(sys.executable).parent / "ansible-runner"
    argv = [
        str(runner),
        "run",
        str(pdd),
        "-p",
        "aorta_multinode.yml",
        "--ident",
        ident,
        "--process-isolation",
        "--process-isolation-executable",
        "docker",
        "--container-image",
        image,
        "--container-option=--network=host",
        "--container-volume-mount",
        f"{results_root}:{results_root}:Z",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1200, env=dict(os.environ))
    return proc.returncode, proc.stdout + proc.stderr, pdd


def stats(pdd: Path, ident: str = "ee-job") -> dict:
    """What AWX reads back: the set_stats of the job's last playbook_on_stats event."""
    found: dict = {}
    for path in sorted((pdd / "artifacts" / ident / "job_events").glob("*.json")):
        event = json.loads(path.read_text())
        if event.get("event") == "playbook_on_stats":
            found = event["event_data"].get("artifact_data") or {}
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.rsplit("\n\n", 1)[1].strip(), file=sys.stderr)
        return 2
    image, results_root = argv[1], Path(argv[2]).resolve()
    rc, out, pdd = run_job(image, results_root.parent / "ee-job", results_root)
    print(out)
    data = stats(pdd)
    print(f"== inside {image}: {data.get('aorta_run_status', 'no status')} (rc {rc})")
    if data.get("aorta_run_json"):
        print(f"   run status:      {data['aorta_run_json']}")
    if data.get("aorta_report_html"):
        print(f"   report:          {data.get('aorta_report')}, {data['aorta_report_html']}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
