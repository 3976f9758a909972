# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra, over SSH, on every stand-in node after converge."""


def test_node_runs_its_own_docker_daemon(host):
    assert host.run("docker info --format '{{.ServerVersion}}'").rc == 0


def test_no_run_container_is_left(host):
    assert host.check_output("docker ps -aq --filter label=aorta.cluster.run") == ""


def test_the_run_wrote_traces_on_this_node(host):
    traces = host.check_output("find /root/aorta/aorta_runs -path '*/torch_profiler/rank*' -name '*.json'").split()
    assert traces, "no trace written by the converge run"


def test_sshd_listens(host):
    assert host.socket("tcp://0.0.0.0:22").is_listening


def test_the_run_released_the_node_and_its_supervisor_finished(host):
    assert not host.file("/var/tmp/aorta-cluster/node.lease").exists
    # The supervisors' status files (runs/<id>.json), not what each kept for a re-attached watch (<id>.attach.json).
    listed = host.check_output("ls /var/tmp/aorta-cluster/runs/ | grep 'json$' || true").split()
    statuses = [name for name in listed if not name.endswith(".attach.json")]
    assert statuses, "no supervisor status file"
    assert all('"state": "finished"' in host.file(f"/var/tmp/aorta-cluster/runs/{s}").content_string for s in statuses)
