#!/usr/bin/env bash
# STAND-IN for Aorta's scripts/launch_rocm.sh (single node, CVS "script" launch mode): same
# contract - the config is the only argument, no --override passes through, torchrun --standalone.
# Aorta derives NPROC from the GPUs; the stand-in has none, so NPROC defaults to 2.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
config=${1:-$repo/config/standin.yaml}
cd "$repo"
exec torchrun --nproc_per_node "${NPROC:-2}" --standalone "$repo/train.py" --config "$config" --enable-rocm-metrics
