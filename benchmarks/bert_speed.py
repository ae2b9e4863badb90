"""hf_ctx BERT against transformers' BERT: same config, same weights, same batches, one process.

Prints tokens/s for each implementation, the ratio hf_ctx / transformers, and peak GPU memory.

    python benchmarks/bert_speed.py --device cpu --mode inference --preset base --batch 8 --seq 128
    python benchmarks/bert_speed.py --device cuda --mode pretrain --dtype bf16 --batch 128 --seq 128 --compile
    python benchmarks/bert_speed.py --device cuda --mode finetune --dtype bf16 --glue_dir ../shared/data/glue
    python benchmarks/bert_speed.py --device cpu --mode inference --data sst2 --preset mini --batch 32

Modes: `inference` (encoder forward), `pretrain` (MLM+NSP forward, backward and AdamW step with 15% of tokens
masked), `finetune` (sequence classification, forward, backward and AdamW step). Data: `synthetic` (full-length
batches of --seq tokens; the default for inference and pretrain) or `sst2` (SST-2 sentences with dynamic
padding: real lengths, so padding cost shows; the default for finetune).

hf_ctx runs with its fast paths (`sparse_prediction`, `unpad_inputs`) unless `--plain` is given; the optimizer
is the fused AdamW the examples use (the `Trainer` default `adamw_torch_fused`) for both models. Under a plain
`torch.compile` hf_ctx still unpads (the number of real tokens is traced as a symbolic size, no flag needed).

    python benchmarks/bert_speed.py --device cpu --data sst2 --preset mini --batch 32 --compile

Fine-tuning steps of ~800 tokens are launch-bound on a GPU: `--compile_mode reduce-overhead` replays each step as
CUDA graphs (one per batch shape, so with `--bucket --pad_to_multiple_of 8`: a handful), for both models. The
graphs cannot hold a data-dependent size, so hf_ctx runs padded there (`--plain`):

    python benchmarks/bert_speed.py --device cuda --dtype bf16 --mode finetune --batch 32 --bucket \
        --pad_to_multiple_of 8 --plain --compile --compile_mode reduce-overhead

`--pad_vocab_size_to_multiple_of 64` (pretraining) adds a third model, alternated with the two others: hf_ctx with
the same weights and its vocabulary rows padded to a multiple of 64 (`hf_ctx+vocab64`), so the change's effect is
the ratio of two rows of one run.

    python benchmarks/bert_speed.py --device cpu --mode pretrain --preset mini --pad_vocab_size_to_multiple_of 64
"""

import argparse
import copy
import csv
import statistics
import time
from pathlib import Path

import torch
import transformers
from transformers import BertConfig

from hf_ctx import CtxBertForPreTraining, CtxBertForSequenceClassification, CtxBertModel
from hf_ctx.configuration_bert import BERT_PRESETS
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.convert_bert import convert_bert_config, convert_bert_state_dict
from hf_ctx.tools.errors import run_script

VOCAB_SIZE = 30522


def build_pair(mode, preset, attn_implementation, device, dtype, fast_paths=True, attention_dropout=0.1):
    """A transformers model and the hf_ctx model holding the same weights."""
    config = BertConfig(
        vocab_size=VOCAB_SIZE,
        attn_implementation=attn_implementation,
        num_labels=2,
        attention_probs_dropout_prob=attention_dropout,
        **BERT_PRESETS[preset],
    )
    reference_class, ours_class = {
        "inference": (transformers.BertModel, CtxBertModel),
        "pretrain": (transformers.BertForPreTraining, CtxBertForPreTraining),
        "finetune": (transformers.BertForSequenceClassification, CtxBertForSequenceClassification),
    }[mode]
    reference = reference_class(config)
    ours_config = convert_bert_config(config)
    ours_config.sparse_prediction = ours_config.unpad_inputs = fast_paths
    ours = ours_class(ours_config)
    ours.load_state_dict(convert_bert_state_dict(reference.state_dict()), strict=False)
    ours.tie_weights()
    ours.set_attn_implementation(attn_implementation)
    # Weights stay fp32 under autocast (as in mixed-precision training); inference casts them.
    weight_dtype = dtype if mode == "inference" else torch.float32
    return reference.to(device, weight_dtype), ours.to(device, weight_dtype)


def with_padded_vocabulary(model, multiple):
    """A copy of the hf_ctx `model` with its vocabulary rows padded to a multiple of `multiple`: the same weights
    on the real rows, so the same loss (`CtxBertConfig.pad_vocab_size_to_multiple_of`)."""
    padded = copy.deepcopy(model)
    padded.resize_token_embeddings(pad_to_multiple_of=multiple, mean_resizing=False)
    return padded


def synthetic_batches(mode, batch, seq, count, device):
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(count):
        input_ids = torch.randint(5, VOCAB_SIZE, (batch, seq), generator=generator)
        inputs = {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "token_type_ids": (torch.arange(seq) >= seq // 2).long().expand(batch, -1).contiguous(),
        }
        if mode == "pretrain":
            labels = torch.full_like(input_ids, -100)
            masked = torch.rand(batch, seq, generator=generator) < 0.15
            labels[masked] = input_ids[masked]
            inputs["labels"] = labels
            inputs["next_sentence_label"] = torch.randint(0, 2, (batch,), generator=generator)
        batches.append({k: v.to(device) for k, v in inputs.items()})
    return batches


def sst2_batches(glue_dir, batch, count, device, with_labels=True, bucket=False, pad_to_multiple_of=None):
    """Batches of real SST-2 sentences, padded to each batch's longest (word-piece lengths approximated by a
    whitespace split plus 20%, which keeps the length distribution without needing BERT's vocabulary).

    With `bucket`, sentences are grouped by length as `Trainer`'s length-grouped sampler does (sorted within
    mega-batches of 50 batches, batches in random order), and `pad_to_multiple_of` rounds each batch's length up,
    as the examples do on a GPU: less padding, and a handful of shapes for a compiled model.
    """
    path = Path(glue_dir) / "SST-2" / "train.tsv"
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    generator = torch.Generator().manual_seed(0)
    rows = rows[: count * batch]
    lengths = [min(128, 2 + int(1.2 * len(r["sentence"].split()))) for r in rows]
    order = list(range(len(rows)))
    if bucket:
        mega = 50 * batch
        order = [
            i
            for start in range(0, len(order), mega)
            for i in sorted(order[start : start + mega], key=lambda i: -lengths[i])
        ]
    chunks = [order[start : start + batch] for start in range(0, len(order), batch)]
    if bucket:
        chunks = [chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()]
    batches = []
    for chunk in chunks:
        longest = max(lengths[i] for i in chunk)
        if pad_to_multiple_of:
            longest = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
        input_ids = torch.zeros(len(chunk), longest, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, i in enumerate(chunk):
            input_ids[row, : lengths[i]] = torch.randint(5, VOCAB_SIZE, (lengths[i],), generator=generator)
            attention_mask[row, : lengths[i]] = 1
        labels = torch.tensor([int(rows[i]["label"]) for i in chunk])
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if with_labels:
            inputs["labels"] = labels
        batches.append({k: v.to(device) for k, v in inputs.items()})
    return batches


def real_tokens(batches):
    return sum(int(b["attention_mask"].sum()) for b in batches)


def distinct_shapes(batches):
    """The first batch of each input shape in `batches`, in order."""
    first = {}
    for batch in batches:
        first.setdefault(tuple(batch["input_ids"].shape), batch)
    return list(first.values())


def measure(model, batches, mode, device, dtype, compile_mode, warmup):
    """Seconds for the steps of `batches` after the first `warmup`, and the peak GPU memory in GiB. `compile_mode`:
    None (eager) or a `torch.compile` mode; compiled, each distinct batch shape is also run once before timing, so
    that compiling (and, under "reduce-overhead", recording a CUDA graph per shape) stays out of the timed steps."""
    model.train(mode != "inference")
    step_model = model if compile_mode is None else torch.compile(model, mode=compile_mode)
    optimizer = None
    if mode != "inference":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(batch):
        if compile_mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # the last step's graph outputs are no longer read
        with torch.autocast(device_type=device, dtype=dtype, enabled=dtype != torch.float32):
            if mode == "inference":
                with torch.inference_mode():
                    return step_model(**batch).last_hidden_state
            loss = step_model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for batch in batches[:warmup] + ([] if compile_mode is None else distinct_shapes(batches)):
        step(batch)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for batch in batches[warmup:]:
        start = time.perf_counter()
        step(batch)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    return sum(times), peak


def real_token_difference(reference, ours, batch, compiled):
    """Inference: the largest difference between the two models' last hidden states at the real tokens."""
    real = batch["attention_mask"].bool()
    with torch.inference_mode():
        expected = reference(**batch).last_hidden_state
        actual = (torch.compile(ours) if compiled else ours)(**batch).last_hidden_state
    return (actual[real].float() - expected[real].float()).abs().max().item()


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", type=kinds.TEXT, choices=["inference", "pretrain", "finetune"], default="inference")
    parser.add_argument("--device", type=kinds.TEXT, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", type=kinds.TEXT, choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--preset", type=kinds.TEXT, choices=list(BERT_PRESETS), default="base")
    parser.add_argument("--batch", type=kinds.BATCH_SIZE, default=8)
    parser.add_argument("--seq", type=kinds.LENGTH, default=128)
    parser.add_argument("--steps", type=kinds.COUNT, default=10)
    parser.add_argument("--warmup", type=kinds.count_or_zero("no warm-up"), default=3)
    parser.add_argument("--repeats", type=kinds.COUNT, default=3, help="alternate the two models this many times")
    parser.add_argument("--attn_implementation", type=kinds.TEXT, default="sdpa")
    parser.add_argument(
        "--data",
        type=kinds.TEXT,
        choices=["synthetic", "sst2"],
        default=None,
        help="synthetic full-length batches or SST-2 sentences (default: sst2 for finetune)",
    )
    parser.add_argument("--plain", action="store_true", help="hf_ctx without sparse_prediction and unpad_inputs")
    parser.add_argument(
        "--attention_dropout",
        type=kinds.PROBABILITY,
        default=0.1,
        help="both models (BERT's 0.1; 0 lets training use flash kernels: varlen for hf_ctx)",
    )
    parser.add_argument("--compile", action="store_true", help="also measure both under torch.compile")
    parser.add_argument(
        "--compile_mode",
        type=kinds.TEXT,
        choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
        default="default",
        help="--compile: torch.compile's mode for every model (reduce-overhead: CUDA graphs, one per batch shape; "
        "with --plain, as hf_ctx's unpadding has a data-dependent token count that the graphs cannot hold)",
    )
    parser.add_argument(
        "--bucket",
        action="store_true",
        help="sst2: length-grouped batches (the examples' GPU default, group_by_length)",
    )
    parser.add_argument(
        "--pad_to_multiple_of",
        type=kinds.COUNT,
        default=None,
        help="sst2: round each batch's length up to a multiple of this (the examples: 8 on GPU)",
    )
    parser.add_argument(
        "--pad_vocab_size_to_multiple_of",
        type=kinds.COUNT,
        default=None,
        help="pretrain: also hf_ctx with its vocabulary rows padded to a multiple of this (MosaicBERT: 64), same run",
    )
    parser.add_argument(
        "--glue_dir",
        type=kinds.EXISTING_FOLDER,
        default=str(Path(__file__).resolve().parents[1].parent / "shared/data/glue"),
    )
    args = parser.parse_args(argv)
    if args.compile_mode != "default" and not args.compile:
        parser.error(f"--compile_mode {args.compile_mode} is a mode of --compile: give both")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    torch.manual_seed(0)

    reference, ours = build_pair(
        args.mode,
        args.preset,
        args.attn_implementation,
        args.device,
        dtype,
        fast_paths=not args.plain,
        attention_dropout=args.attention_dropout,
    )
    models = {"transformers": reference, "hf_ctx": ours}
    if args.pad_vocab_size_to_multiple_of is not None:
        if args.mode != "pretrain" or args.pad_vocab_size_to_multiple_of < 1:
            parser.error("--pad_vocab_size_to_multiple_of takes a positive number, with --mode pretrain (the decoder)")
        padded_name = f"hf_ctx+vocab{args.pad_vocab_size_to_multiple_of}"
        models[padded_name] = with_padded_vocabulary(ours, args.pad_vocab_size_to_multiple_of)
    count = args.warmup + args.steps
    data = args.data or ("sst2" if args.mode == "finetune" else "synthetic")
    if args.mode == "pretrain" and data == "sst2":
        parser.error("--mode pretrain runs on synthetic full-length batches (as packed pretraining data is)")
    if data == "sst2":
        batches = sst2_batches(
            args.glue_dir,
            args.batch,
            count,
            args.device,
            with_labels=args.mode == "finetune",
            bucket=args.bucket,
            pad_to_multiple_of=args.pad_to_multiple_of,
        )
    else:
        batches = synthetic_batches(args.mode, args.batch, args.seq, count, args.device)
    tokens = real_tokens(batches[args.warmup :])
    print(
        f"mode={args.mode} device={args.device} dtype={args.dtype} preset={args.preset} batch={args.batch} "
        f"seq={args.seq if data == 'synthetic' else 'SST-2'}{' bucketed' if args.bucket else ''}"
        f"{f' pad_to={args.pad_to_multiple_of}' if args.pad_to_multiple_of else ''} attn={args.attn_implementation} "
        f"hf_ctx fast paths={'off' if args.plain else 'on'} attention dropout={args.attention_dropout} "
        f"{f'compile mode={args.compile_mode} ' if args.compile else ''}"
        f"torch={torch.__version__} transformers={transformers.__version__}"
    )
    for compiled in [False, True] if args.compile else [False]:
        results = {name: [] for name in models}
        peaks = {}
        for _ in range(args.repeats):  # alternate, so drift in machine speed hits every model alike
            for name, model in models.items():
                compile_mode = args.compile_mode if compiled else None
                seconds, peaks[name] = measure(
                    model, batches, args.mode, args.device, dtype, compile_mode, args.warmup
                )
                results[name].append(tokens / seconds)
        speed = {name: statistics.median(values) for name, values in results.items()}
        label = "compiled" if compiled else "eager"  # the mode is on the first line
        for name in models:
            print(f"  {label:8s} {name:16s} {speed[name]:12,.0f} tokens/s   peak {peaks[name]:.2f} GiB")
        for name in list(models)[1:]:
            print(f"  {label:8s} ratio {name}/transformers = {speed[name] / speed['transformers']:.3f}")
        if len(models) > 2:
            print(f"  {label:8s} ratio {padded_name}/hf_ctx = {speed[padded_name] / speed['hf_ctx']:.3f}")
        if args.mode == "inference":
            difference = real_token_difference(reference, ours, batches[-1], compiled)
            print(f"  {label:8s} largest difference at real tokens = {difference:.2e}")


if __name__ == "__main__":
    run_script(main)
