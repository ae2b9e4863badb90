"""A tiny `CtxTrainer` run for the multi-process tests of tests/test_distributed.py, launched by `torchrun` (or
imported, for the one-process reference): a tiny BERT sentence classifier without dropout, 64 generated
sentences, `TrainingArguments` from the command line, e.g.

    torchrun --nproc_per_node 2 tests/distributed_worker.py --output_dir out --per_device_train_batch_size 4
    torchrun --nproc_per_node 2 tests/distributed_worker.py --output_dir out --fsdp

Each process writes `rank<N>.json` to `--output_dir`: the logged training losses (the mean over all processes)
and how many parameter values it holds itself (`local_parameters`, fewer than `model_parameters` when sharded).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from datasets import Dataset
from transformers import HfArgumentParser, TrainingArguments

from hf_ctx import CtxBertConfig, CtxBertForSequenceClassification
from hf_ctx.tools.trainer import CtxTrainer

DEFAULTS = {
    "max_steps": 3,
    "logging_steps": 1,
    "learning_rate": 1e-3,
    "report_to": [],
    "save_strategy": "no",
    "disable_tqdm": True,
    "seed": 0,
}


def local_size(parameter: torch.Tensor) -> int:
    """Values of `parameter` this process holds: its shard under FSDP2 (a DTensor) or ZeRO-3, else all."""
    if hasattr(parameter, "to_local"):
        return parameter.to_local().numel()
    if hasattr(parameter, "ds_tensor"):  # DeepSpeed ZeRO-3
        return parameter.ds_tensor.numel()
    return parameter.numel()


def run(args: TrainingArguments) -> dict:
    torch.manual_seed(0)
    config = CtxBertConfig.from_preset(
        "tiny", vocab_size=50, max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    model = CtxBertForSequenceClassification(config)
    model_parameters = sum(p.numel() for p in model.parameters())
    ids = torch.randint(5, 50, (64, 12), generator=torch.Generator().manual_seed(1))
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": (ids[:, 0] % 2).tolist()})
    trainer = CtxTrainer(model=model, args=args, train_dataset=data)
    trainer.train()
    result = {
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "local_parameters": sum(local_size(p) for p in trainer.model_wrapped.parameters()),
        "model_parameters": model_parameters,
        "world_size": args.world_size,
    }
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, f"rank{args.process_index}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    return result


def parse(argv: list[str]) -> TrainingArguments:
    parser = HfArgumentParser(TrainingArguments)
    parser.set_defaults(**DEFAULTS)
    (args,) = parser.parse_args_into_dataclasses(args=argv)
    return args


if __name__ == "__main__":
    run(parse(sys.argv[1:]))
    if dist.is_initialized():
        # Every rank gets here before any tears gloo down: a rank that exits while the other still has a collective in
        # flight aborts it, and under torchrun --nnodes 2 the other node's agent then waits out its 300 s exit barrier.
        dist.barrier()
        dist.destroy_process_group()
