#!/usr/bin/env bash
# Everything that needs a GPU, in one go (about 30 minutes on one H100): the GPU tests, then every speed figure
# of docs/performance.md's GPU tables: BERT against transformers (pretraining, fine-tuning with and without length-grouped
# batches, inference), the ELMo LSTM against AllenNLP's per-step layout (fp32 and bf16 autocast), and a TagLM
# CoNLL epoch at batch 8 and at the GPU default of 32. Each command's output goes to $OUT (default
# ./gpu_results); benchmarks/gpu_table.py then writes them all as one markdown table, $OUT/results.md.
# QUICK=1 runs one of each kind only (GPU tests, ELMo bf16, BERT pretraining / bucketed fine-tuning / inference,
# TagLM at the GPU default), for benchmarks/gpu_window.sh's 8-minute slice.
#   bash benchmarks/gpu_checks.sh
#   DATA=/path/to/shared/data OUT=gpu_results bash benchmarks/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_results}
DATA=${DATA:-../shared/data}
QUICK=${QUICK:-0}
full() { [ "$QUICK" = 1 ] || "$@"; }  # a command only the full run makes
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python -m pytest -q -m gpu tests 2>&1 | tail -20 | tee "$OUT/gpu_tests.txt"

# ELMo LSTM, original size (4096 cell / 512 projection, 2 layers x 2 directions, batch 128 x 20), fp32, TF32 off.
[ "$QUICK" = 1 ] || python benchmarks/elmo_lstm_speed.py 2>&1 | tee "$OUT/elmo_fp32.txt"
python benchmarks/elmo_lstm_speed.py --autocast bf16 --no_compile 2>&1 | tee "$OUT/elmo_bf16.txt"

# BERT base, bf16 autocast, against transformers in the same run.
bert() {
  local name=$1; shift
  python benchmarks/bert_speed.py --device cuda --dtype bf16 --preset base --glue_dir "$DATA/glue" "$@" 2>&1 \
    | grep -v Warning | tee "$OUT/bert_$name.txt"
}
bert pretrain_b128_s128 --mode pretrain --batch 128 --seq 128 --compile
full bert pretrain_b32_s512 --mode pretrain --batch 32 --seq 512 --compile
full bert finetune_b32 --mode finetune --batch 32 --compile
full bert finetune_b32_dropout0 --mode finetune --batch 32 --attention_dropout 0
bert finetune_b32_bucketed --mode finetune --batch 32 --bucket --pad_to_multiple_of 8 --compile
full bert finetune_b32_bucketed_dropout0 --mode finetune --batch 32 --bucket --pad_to_multiple_of 8 --attention_dropout 0
bert inference_b128_s128 --mode inference --batch 128 --seq 128
full bert inference_sst2_b128 --mode inference --data sst2 --batch 128

# TagLM (no biLM), one CoNLL-2003 epoch: batch 8 (the CPU default) and the GPU default (32).
if [ -f "$DATA/conll2003/eng.train" ]; then
  batches=(8 default)
  [ "$QUICK" = 1 ] && batches=(default)
  for batch in "${batches[@]}"; do
    args=()
    [ "$batch" = 8 ] && args=(--per_device_train_batch_size 8)
    python examples/run_ner.py --model_type taglm --train_file "$DATA/conll2003/eng.train" --do_train \
      --num_train_epochs 1 --save_strategy no --report_to none --output_dir "$OUT/taglm_$batch" ${args[@]+"${args[@]}"} \
      2>&1 | tail -5 | tee "$OUT/taglm_$batch.txt"
  done
else
  echo "no CoNLL-2003 data at $DATA/conll2003: TagLM epochs not measured" | tee "$OUT/taglm_missing.txt"
fi

python benchmarks/gpu_table.py "$OUT" | tee "$OUT/results.md"
