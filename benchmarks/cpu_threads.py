#!/usr/bin/env python
"""hf_ctx's CPU-thread policy (`hf_ctx.tools.cpu_threads`: one thread per core other processes leave free, measured
again every 10 s of training), measured in the three cases it is for. Each prints its ratio beside its goal.

    python benchmarks/cpu_threads.py alone         # MiniLM-size fine-tuning on idle cores: hf_ctx's threads vs one
    python benchmarks/cpu_threads.py alone --data squad  # the same on run_qa.py's 384-token windows
    python benchmarks/cpu_threads.py side_by_side  # the README main job alone, then two copies started together
    python benchmarks/cpu_threads.py busy          # hf_ctx vs transformers fine-tuning, another process on a core

Run it on a machine with nothing else busy: `alone` measures the cores free, and `busy` starts its own busy process
(a Python loop on one core). `alone` and `busy` fine-tune on SST-2 sentences in batches of 32 (`bert_speed.py`'s
batches and timing), alternating the two settings so that drift in the machine's speed hits both alike.
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bert_speed import build_pair, measure, real_tokens, sst2_batches

from hf_ctx import CtxBertConfig, CtxBertForQuestionAnswering, CtxBertForSequenceClassification
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.cpu_threads import CpuThreadsCallback, available_cores
from hf_ctx.tools.errors import run_script

ROOT = Path(__file__).resolve().parents[1]
# all-MiniLM-L6-v2's shape (22.7M parameters), the size of model people fine-tune on a CPU.
MINILM = {"num_hidden_layers": 6, "hidden_size": 384, "num_attention_heads": 12, "intermediate_size": 1536}


def policy_threads() -> int:
    """Apply hf_ctx's policy as `CtxTrainer` does when training starts; the threads it chose."""
    CpuThreadsCallback().update(wait=True)
    return torch.get_num_threads()


def tokens_per_second(model, batches, warmup) -> float:
    seconds, _ = measure(model, batches, "finetune", "cpu", torch.float32, False, warmup)
    return real_tokens(batches[warmup:]) / seconds


def squad_windows(batch: int, count: int) -> list[dict]:
    """Full windows of 384 tokens, as `run_qa.py` cuts SQuAD contexts, with answer positions."""
    generator = torch.Generator().manual_seed(0)
    return [
        {
            "input_ids": torch.randint(5, 30522, (batch, 384), generator=generator),
            "attention_mask": torch.ones(batch, 384, dtype=torch.long),
            "start_positions": torch.randint(20, 384, (batch,), generator=generator),
            "end_positions": torch.randint(20, 384, (batch,), generator=generator),
        }
        for _ in range(count)
    ]


def alone(args) -> None:
    torch.manual_seed(0)
    config = CtxBertConfig(vocab_size=30522, num_labels=2, unpad_inputs=True, **MINILM)
    if args.data == "squad":
        model = CtxBertForQuestionAnswering(config)
        batches, what = squad_windows(8, args.warmup + args.steps), "SQuAD-length windows (8 x 384 tokens)"
    else:
        model = CtxBertForSequenceClassification(config)
        batches, what = sst2_batches(args.glue_dir, 32, args.warmup + args.steps, "cpu"), "SST-2 batches of 32"
    chosen = policy_threads()
    speeds = {1: [], chosen: []}
    for _ in range(args.repeats):
        for threads in speeds:
            torch.set_num_threads(threads)
            speeds[threads].append(tokens_per_second(model, batches, args.warmup))
    one, policy = statistics.median(speeds[1]), statistics.median(speeds[chosen])
    print(f"MiniLM-size fine-tuning (22.7M parameters), {what}, {len(available_cores())} cores:")
    print(f"  1 thread:                   {one:8,.0f} tokens/s")
    print(f"  hf_ctx's choice, {chosen} thread(s): {policy:8,.0f} tokens/s")
    print(f"  ratio {policy / one:.2f} (goal >= 1.6)")


def run_main_job(output_dir: Path) -> subprocess.Popen:
    command = [sys.executable, str(ROOT / "examples" / "end_to_end.py"), "--output_dir", str(output_dir)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(job: subprocess.Popen, started: float) -> tuple[float, str]:
    """(seconds the job ran, its validation F1) once it ends; an error with its output's tail if it failed."""
    output, _ = job.communicate()
    seconds = time.perf_counter() - started
    if job.returncode != 0:
        raise SystemExit(f"the main job failed:\n{output[-2000:]}")
    f1 = re.search(r"validation (\d\.\d+)", output)
    return seconds, f1.group(1) if f1 else "?"


def side_by_side(args) -> None:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        one, f1 = finish(run_main_job(Path(folder) / "alone"), started)
        print(f"the main job alone: {one:.0f} s (validation F1 {f1})")
        started = time.perf_counter()
        jobs = [run_main_job(Path(folder) / f"copy_{i}") for i in (1, 2)]
        copies = [finish(job, started) for job in jobs]
    for i, (seconds, f1) in enumerate(copies, 1):
        print(f"copy {i} of two started together: {seconds:.0f} s (validation F1 {f1})")
    print(f"  ratio {max(seconds for seconds, _ in copies) / one:.2f} (slower copy / alone; goal <= 2.2)")


def busy(args) -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        reference, ours = build_pair("finetune", "mini", "sdpa", "cpu", torch.float32)
        batches = sst2_batches(args.glue_dir, 32, args.warmup + args.steps, "cpu")
        chosen = policy_threads()
        speeds = {"transformers": [], "hf_ctx": []}
        for _ in range(args.repeats):
            for name, model in (("transformers", reference), ("hf_ctx", ours)):
                speeds[name].append(tokens_per_second(model, batches, args.warmup))
    finally:
        spinner.kill()
    transformers_speed, ours_speed = (statistics.median(speeds[name]) for name in ("transformers", "hf_ctx"))
    print(
        f"BERT mini fine-tuning, one core busy with another process; hf_ctx's choice: {chosen} thread(s), both models"
    )
    print(f"  transformers: {transformers_speed:8,.0f} tokens/s")
    print(f"  hf_ctx:       {ours_speed:8,.0f} tokens/s")
    print(f"  ratio {ours_speed / transformers_speed:.2f} (goal >= 1.5)")


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", type=kinds.TEXT, choices=["alone", "side_by_side", "busy"])
    parser.add_argument("--steps", type=kinds.COUNT, default=8, help="timed fine-tuning steps per measurement")
    parser.add_argument("--warmup", type=kinds.count_or_zero("no warm-up"), default=2)
    parser.add_argument("--repeats", type=kinds.COUNT, default=3, help="alternate the two settings this many times")
    parser.add_argument(
        "--data",
        type=kinds.TEXT,
        choices=["sst2", "squad"],
        default="sst2",
        help="alone: SST-2 sentences (short) or full 384-token windows as run_qa.py's",
    )
    parser.add_argument(
        "--glue_dir", type=kinds.EXISTING_FOLDER, default=str(ROOT.parent / "shared" / "data" / "glue")
    )
    args = parser.parse_args(argv)
    {"alone": alone, "side_by_side": side_by_side, "busy": busy}[args.case](args)


if __name__ == "__main__":
    run_script(main)
