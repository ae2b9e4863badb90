"""FSDP2 (`torch.distributed.fsdp.fully_shard`) on CPU processes (gloo), for tests/test_distributed.py: each hf_ctx
family sharded as the Trainer's `--fsdp` shards it (accelerate's FSDP2 preparation): one unit per class of its
`_no_split_modules`, tied input and output embeddings in one group, then the root. Each process trains on its half
of a batch; the gradients, gathered, must equal one unsharded model's on the whole batch (every loss here is a
mean over equal halves: sentences, tokens or predicted words).

    torchrun --nproc_per_node 2 tests/fsdp2_worker.py OUTPUT_DIR

writes `fsdp2_rank<N>.json`: per family, the shard units, the parameter values this process holds and the
model's, and the largest gradient difference from the unsharded model (relative where a gradient is over 1).
"""

import copy
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from tiny_checkpoints import WORDS, bert_pretraining, elmo_bilm, taglm
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

# Two halves of 2 sentences: 5 + 3 words and 4 + 4 words (the biLM predicts as many words in each).
SENTENCES = [WORDS[:5], WORDS[3:6], WORDS[6:10], WORDS[1:5]]


def batch_for(build, tokenizer):
    if build is bert_pretraining:  # every position predicted, padding too: as many tokens in each half
        batch = tokenizer(
            [" ".join(s) for s in SENTENCES], padding="max_length", max_length=12, truncation=True, return_tensors="pt"
        )
        return {**batch, "labels": batch["input_ids"].clone(), "next_sentence_label": torch.tensor([0, 1, 1, 0])}
    batch = dict(tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt"))
    if build is taglm:
        batch["labels"] = torch.where(batch["attention_mask"].bool(), 1, -100)
    return batch


def shard(model, mesh) -> list[str]:
    """Wrap `model` as accelerate's `fsdp2_prepare_model` does; returns the unit classes."""
    units = sorted(model._no_split_modules)
    for module in model.modules():
        if type(module).__name__ in units:
            fully_shard(module, mesh=mesh)
    try:
        tied = [model.get_input_embeddings(), model.get_output_embeddings()]
    except NotImplementedError:  # ELMo and TagLM have no vocabulary-to-vector input embedding to tie
        tied = []
    if tied and tied[1] is not None and tied[0].weight is tied[1].weight:
        fully_shard(tied, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh)
    return units


def run(output_dir: str) -> None:
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world_size,))
    results = {}
    for build in (bert_pretraining, elmo_bilm, taglm):
        torch.manual_seed(0)
        folder = Path(output_dir) / f"rank{rank}"  # the BERT tokenizer writes its corpus there
        folder.mkdir(parents=True, exist_ok=True)
        model, tokenizer = build(folder)
        model.eval()  # no dropout: both runs compute the same function
        batch = batch_for(build, tokenizer)
        reference = copy.deepcopy(model)
        reference(**batch).loss.backward()

        units = shard(model, mesh)
        share = len(SENTENCES) // world_size
        model(**{k: v[rank * share : (rank + 1) * share] for k, v in batch.items()}).loss.backward()

        expected = dict(reference.named_parameters())
        # Relative to the gradient's size where it is over 1: float32 rounding is relative. BERT labels its padding
        # here, and unpadded (the default) the padding's states are zeros, which put the MLM head's LayerNorm at
        # its eps: cls.predictions.dense.bias gets a gradient near 1e3, and the sharded sum differs from the
        # whole batch's by 1.2e-4 (1.3e-7 of it) in float32, by 2.3e-13 in float64 (a summation order, not a bug).
        difference = max(
            ((p.grad.full_tensor() - expected[name].grad).abs() / expected[name].grad.abs().clamp(min=1)).max().item()
            for name, p in model.named_parameters()
            if p.grad is not None
        )
        results[build.__name__] = {
            "units": units,
            "local_parameters": sum(p.to_local().numel() for p in model.parameters()),
            "model_parameters": sum(p.numel() for p in reference.parameters()),
            "max_gradient_difference": difference,
            "trained_parameters": sum(p.grad is not None for p in model.parameters()),
        }
    with open(os.path.join(output_dir, f"fsdp2_rank{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(results, f)
    # Both ranks reach this point before either tears gloo down: a rank that exits while the other still has a
    # collective in flight aborts it ("terminate called without an active exception", seen on a loaded machine).
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    run(sys.argv[1])
    # The results are written and gloo is torn down. Skip the interpreter's teardown: a gloo thread object still
    # joinable when C++ static destructors run calls std::terminate ("terminate called without an active
    # exception", SIGABRT after a finished run, seen once in about ten runs on a loaded machine).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
