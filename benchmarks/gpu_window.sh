#!/usr/bin/env bash
# One GPU window: the next items of benchmarks/gpu_ledger.json in one command of at most 9 minutes, on a fresh GPU
# machine holding the repository and gpu_window_data/ (carried). The 9 minutes count from here.
#
#   bash benchmarks/gpu_window.sh --prepare     # on CPU, before: gpu_window_data/ (data, wheels), and its size
#   bash benchmarks/gpu_window.sh --plan        # the next item, its commands and budget ("budget: 9 min")
#   OUT=/path bash benchmarks/gpu_window.sh     # the window; its result files in $OUT
#   bash benchmarks/gpu_window.sh --record DIR  # on CPU, after: the ledger and docs/results/ from the returned files
#   bash benchmarks/gpu_window.sh --dry-run --out DIR   # the same path on CPU, scaled down to seconds
set -uo pipefail
started=$(date +%s)
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if [ "${1:-}" = "--prepare" ]; then
  shift
  exec $PYTHON benchmarks/gpu_window_data.py "$@"
fi
if [ $# -eq 0 ]; then
  # The install step: hf_ctx and the wheels gpu_window_data.py downloaded (its WHEELS; the machine reaches no
  # package index) into /tmp/site. The code imported is the repository's, first on the path.
  wheels=()
  compgen -G "gpu_window_data/wheels/*.whl" >/dev/null && wheels=(gpu_window_data/wheels/*.whl)
  $PYTHON -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
    --target /tmp/site . ${wheels[@]+"${wheels[@]}"} || { echo "could not install hf_ctx and the wheels"; exit 1; }
  export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  exec $PYTHON benchmarks/gpu_window.py --started_at "$started" --out "${OUT:-gpu_window_out}"
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
exec $PYTHON benchmarks/gpu_window.py "$@"
