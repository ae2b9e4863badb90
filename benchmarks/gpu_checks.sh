#!/usr/bin/env bash
# Everything that needs a GPU, in one go (about 15-20 minutes on one H100): the GPU tests, then the speed figures
# issues #4 (ELMo LSTM) and #8 (BERT against transformers) ask for. Writes each result to $OUT (default ./gpu_results).
#   bash benchmarks/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_results}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python -m pytest -q -m gpu tests 2>&1 | tail -20 | tee "$OUT/gpu_tests.txt"
python benchmarks/elmo_lstm_speed.py 2>&1 | tee "$OUT/elmo_lstm_speed.txt"
bert() { python benchmarks/bert_speed.py --device cuda --dtype bf16 --preset base "$@" 2>&1 | grep -v Warning; }
{
  bert --mode pretrain --batch 128 --seq 128 --compile
  bert --mode pretrain --batch 32 --seq 512 --compile
  bert --mode finetune --batch 32 --compile
  bert --mode finetune --batch 32 --attention_dropout 0
  bert --mode inference --data sst2 --batch 128
  bert --mode inference --batch 128 --seq 128
} | tee "$OUT/bert_speed.txt"
