"""A tiny `CtxTrainer` run for the multi-process tests of tests/test_distributed.py, launched by `torchrun` (or
imported, for the one-process reference): a tiny BERT sentence classifier without dropout, 64 generated
sentences (or, with `--task pretraining`, BERT's MLM + NSP on 8 sentences of 2 to 12 tokens, a varying number of
them masked), `TrainingArguments` from the command line, e.g.

    torchrun --nproc_per_node 2 tests/distributed_worker.py --output_dir out --per_device_train_batch_size 4
    torchrun --nproc_per_node 2 tests/distributed_worker.py --output_dir out --fsdp

Each process writes `rank<N>.json` to `--output_dir`: the logged training losses (the mean over all processes)
and how many parameter values it holds itself (`local_parameters`, fewer than `model_parameters` when sharded);
the first process writes the trained weights to `weights.safetensors`.
"""

import json
import os
import sys
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from datasets import Dataset
from safetensors.torch import save_file
from transformers import HfArgumentParser, TrainingArguments

from hf_ctx import CtxBertConfig, CtxBertForPreTraining, CtxBertForSequenceClassification
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


@dataclass
class WorkerArguments:
    task: str = field(default="classification", metadata={"help": "classification or pretraining"})


def pretraining_data() -> tuple[Dataset, callable]:
    """8 sentences of 2 to 12 tokens, every third token masked (its id the label) and a pair label each, and a
    collator that pads them: the micro-batches of a step hold unequal numbers of masked tokens."""
    generator = torch.Generator().manual_seed(1)
    rows = []
    for i, length in enumerate([2, 12, 3, 9, 5, 11, 4, 7]):
        ids = torch.randint(5, 50, (length,), generator=generator).tolist()
        labels = [token if j % 3 == 1 else -100 for j, token in enumerate(ids)]
        masked = [4 if j % 3 == 1 else token for j, token in enumerate(ids)]
        rows.append({"input_ids": masked, "labels": labels, "next_sentence_label": i % 2})

    def collate(features):
        width = max(len(f["input_ids"]) for f in features)
        return {
            "input_ids": torch.tensor([f["input_ids"] + [0] * (width - len(f["input_ids"])) for f in features]),
            "attention_mask": torch.tensor(
                [[1] * len(f["input_ids"]) + [0] * (width - len(f["input_ids"])) for f in features]
            ),
            "labels": torch.tensor([f["labels"] + [-100] * (width - len(f["labels"])) for f in features]),
            "next_sentence_label": torch.tensor([f["next_sentence_label"] for f in features]),
        }

    return Dataset.from_list(rows), collate


def run(args: TrainingArguments, worker_args: WorkerArguments | None = None) -> dict:
    torch.manual_seed(0)
    config = CtxBertConfig.from_preset(
        "tiny", vocab_size=50, max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    if worker_args is not None and worker_args.task == "pretraining":
        model = CtxBertForPreTraining(config)
        data, collate = pretraining_data()
    else:
        model = CtxBertForSequenceClassification(config)
        ids = torch.randint(5, 50, (64, 12), generator=torch.Generator().manual_seed(1))
        data, collate = Dataset.from_dict({"input_ids": ids.tolist(), "labels": (ids[:, 0] % 2).tolist()}), None
    model_parameters = sum(p.numel() for p in model.parameters())
    trainer = CtxTrainer(model=model, args=args, train_dataset=data, data_collator=collate)
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
    if args.process_index == 0 and not (args.fsdp or args.deepspeed):
        weights = {name: value.detach().clone().contiguous() for name, value in model.state_dict().items()}
        save_file(weights, os.path.join(args.output_dir, "weights.safetensors"))  # clones: the tied decoder
    return result


def parse(argv: list[str]) -> tuple[TrainingArguments, WorkerArguments]:
    parser = HfArgumentParser((TrainingArguments, WorkerArguments))
    parser.set_defaults(**DEFAULTS)
    return parser.parse_args_into_dataclasses(args=argv)


if __name__ == "__main__":
    run(*parse(sys.argv[1:]))
    if dist.is_initialized():
        # Every rank gets here before any tears gloo down: a rank that exits while the other still has a collective in
        # flight aborts it, and under torchrun --nnodes 2 the other node's agent then waits out its 300 s exit barrier.
        dist.barrier()
        dist.destroy_process_group()
