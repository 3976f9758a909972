#!/usr/bin/env bash
# make ee-demo: the demo's pipeline run INSIDE the execution environment image, the way AWX's
# execution nodes run a job (ansible-runner with a container engine; tests/standin/ee_job.py).
# make ee -> stand-in up -> the job in the EE -> where the report is on the host -> stand-in down.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
nodes=${N:-2}
bin=.venv/bin
trap 'echo; echo "== stand-in down"; python3 tests/standin/standin.py down' EXIT

echo "== make ee (cached by a hash of its inputs)"
image=$(tools/build_ee.sh | tail -n1 | sed -n 's/^EE_IMAGE=//p')
[[ -n $image ]] || { echo "make ee failed" >&2; exit 1; }
echo "   $image"

echo "== stand-in cluster: $nodes Docker-in-Docker nodes over SSH (a STAND-IN for GPU nodes)"
"$bin/python" tests/standin/standin.py up --nodes "$nodes" || exit 1

echo "== ansible-runner run ... --process-isolation-executable docker --container-image $image"
"$bin/python" tests/standin/ee_job.py "$image" "$PWD/build/ee-demo/results"
