#!/usr/bin/env bash
# make demo: the whole pipeline on a local stand-in cluster, no GPU needed.
# Stand-in up -> aorta_multinode.yml -> where the results are -> stand-in down (always).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
nodes=${N:-2}
bin=.venv/bin
trap 'echo; echo "== stand-in down"; python3 tests/standin/standin.py down' EXIT

echo "== stand-in cluster: $nodes Docker-in-Docker nodes over SSH (a STAND-IN for GPU nodes)"
"$bin/python" tests/standin/standin.py up --nodes "$nodes" || exit 1

echo "== ansible-playbook aorta_multinode.yml -i build/standin/cluster.json -e @build/standin/vars.yml"
"$bin/ansible-playbook" aorta_multinode.yml -i build/standin/cluster.json -e @build/standin/vars.yml
rc=$?

latest=$(find build/results -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p/\n' 2>/dev/null | sort -n | tail -n1 | cut -d' ' -f2)
echo
echo "== results: ${latest:-none}"
if [[ -n $latest ]]; then
  echo "   run status:      ${latest}run.json ($("$bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "${latest}run.json"))"
  echo "   node logs:       ${latest}logs/"
  [[ -d ${latest}combined_traces ]] && echo "   combined traces: ${latest}combined_traces/ (manifest.json)"
  [[ -f ${latest}aorta_benchmark_report.json ]] && echo "   report:          ${latest}aorta_benchmark_report.json, ${latest}report.html"
  [[ -f ${latest}junit.xml ]] && echo "   junit:           ${latest}junit.xml (verdict: $("$bin/python" -c 'import json,sys; print((json.load(open(sys.argv[1])).get("verdict") or {}).get("verdict"))' "${latest}run.json"))"
  [[ -f build/results/index.html ]] && echo "   history:         build/results/index.html (every run of this checkout's stand-in)"
fi
exit $rc
