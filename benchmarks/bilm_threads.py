#!/usr/bin/env python
"""Training speed of a small ELMo biLM alone and with copies of itself running beside it, by thread setting.

    python benchmarks/bilm_threads.py --threads default --copies 1   # torch's default: one thread per core
    python benchmarks/bilm_threads.py --threads default --copies 2   # two copies side by side
    python benchmarks/bilm_threads.py --threads auto --copies 2      # hf_ctx's choice (hf_ctx.tools.trainer)

The model is small enough that torch's default threads slow it down: `ElmoForBiLM` with LSTMs of 128 cells projected to 64, batches of 32 sentences of
20 words, Adam. Each copy is a separate process started at the same time; each prints its steps per second over
`--steps` steps after `--warmup` steps. See docs/performance.md#threads-for-small-models.
"""

import argparse
import subprocess
import sys
import time

import torch

from hf_ctx import ElmoConfig, ElmoForBiLM
from hf_ctx.tools.trainer import set_num_threads


def run_one(args) -> float:
    torch.manual_seed(0)
    config = ElmoConfig(
        char_cnn={"filters": [[1, 16], [2, 16], [3, 32], [4, 32]], "embedding": {"dim": 16}, "n_highway": 1},
        lstm={"dim": args.lstm_dim, "projection_dim": args.projection_dim, "cell_clip": None, "proj_clip": None},
        vocab_size=2000,
    )
    model = ElmoForBiLM(config).train()
    if args.threads == "auto":
        set_num_threads(model)
    elif args.threads != "default":
        torch.set_num_threads(int(args.threads))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    input_ids = torch.randint(1, 260, (32, 20, config.max_characters_per_token))
    word_ids = torch.randint(3, config.vocab_size, (32, 20))
    mask = torch.ones(32, 20, dtype=torch.long)
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            start = time.perf_counter()
        loss = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return args.steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="auto", help="'default' (torch's), 'auto' (hf_ctx's) or a number")
    parser.add_argument("--copies", type=int, default=1, help="processes started side by side")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--lstm_dim", type=int, default=128)
    parser.add_argument("--projection_dim", type=int, default=64)
    args = parser.parse_args()
    if args.copies == 1:
        print(f"{run_one(args):.2f} steps/s with {torch.get_num_threads()} thread(s)", flush=True)
        return
    argv = [f"--{name}={value}" for name, value in vars(args).items() if name != "copies"]
    started = time.perf_counter()
    copies = [
        subprocess.Popen([sys.executable, __file__, *argv, "--copies", "1"], stdout=subprocess.PIPE, text=True)
        for _ in range(args.copies)
    ]
    for i, copy in enumerate(copies):
        print(f"copy {i + 1}: {copy.communicate()[0].strip()}")
    print(f"all {args.copies} copies: {time.perf_counter() - started:.1f} s wall-clock")


if __name__ == "__main__":
    main()
