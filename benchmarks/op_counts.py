#!/usr/bin/env python
"""Host-overhead proxies measurable on a CPU: ATen ops per training step and step time, in one process.

On a GPU each ATen op is at least one kernel launch plus Python and dispatcher time on the host, so when the
GPU waits for the host (small batches, BERT fine-tuning, the per-word loops of the ELMo LSTM and the CRF) the
number of ops per step is what sets the speed. This script counts them with `torch.profiler` for one
forward + backward pass (no optimizer step: it is the same for both sides) and times the passes:

- BERT pretraining (MLM + NSP) and fine-tuning (sequence classification, padded batches): hf_ctx against
  transformers' `BertForPreTraining` / `BertForSequenceClassification` on the same config and weights;
- ELMo biLM training (`ElmoForBiLM`, clipped LSTM with projection, as ELMo is trained);
- TagLM training (`TagLMForTokenClassification`: character CNN, two biGRUs, CRF loss and max-marginals; on a
  CPU the GRUs run one step at a time in ATen ops, on a GPU cuDNN runs each in one op), and the CRF alone.

With `--baseline REV` (a git revision of this repository, e.g. `main` or a commit), the ELMo and TagLM rows are
also measured with the LSTM layers (`hf_ctx/layers.py`) and the CRF (`hf_ctx/crf.py`) of that revision swapped
into the same model objects (same weights, same batches), alternating with the current code, and the ratios
printed. The swap needs those classes to have the same attributes in both revisions.

Three counts per step: top-level ops (dispatched from Python or autograd: host time), kernels (innermost ops
that are not views: about one GPU launch each) and all ATen ops.

    python benchmarks/op_counts.py
    OMP_NUM_THREADS=1 python benchmarks/op_counts.py --baseline main --repeats 5
"""

import argparse
import importlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import transformers
from torch.profiler import ProfilerActivity, profile

from hf_ctx import (
    CtxBertForPreTraining,
    CtxBertForSequenceClassification,
    ElmoConfig,
    ElmoForBiLM,
    TagLMConfig,
    TagLMForTokenClassification,
)
from hf_ctx import crf as crf_module
from hf_ctx import layers as layers_module
from hf_ctx.configuration_bert import BERT_PRESETS
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.convert_bert import convert_bert_config, convert_bert_state_dict
from hf_ctx.tools.errors import run_script

REPOSITORY = Path(__file__).resolve().parents[1]


# ATen ops that only make a view (or do nothing) and so launch no kernel on a GPU.
VIEW_OPS = {
    "aten::" + name
    for name in (
        "view",
        "_unsafe_view",
        "reshape",
        "as_strided",
        "unsqueeze",
        "squeeze",
        "select",
        "slice",
        "narrow",
        "t",
        "transpose",
        "permute",
        "expand",
        "detach",
        "alias",
        "unbind",
        "split",
        "split_with_sizes",
        "chunk",
        "lift_fresh",
        "_reshape_alias",
        "numpy_T",
        "contiguous",
        "resolve_conj",
        "resolve_neg",
        "is_nonzero",
        "item",
        "_local_scalar_dense",
        "empty",
        "empty_like",
        "empty_strided",
        "result_type",
        "to",
        "_to_copy_if_needed",
    )
}


def count_ops(step) -> tuple[int, int, int]:
    """ATen ops recorded while `step()` runs: (top-level, kernels, all). Top-level ops are those not called by
    another ATen op (what Python and autograd dispatch: host time); kernels are the innermost ops that are not
    views (about one GPU kernel launch each); all includes the ops in between."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    top = [e for e in events if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    leaves = [
        e
        for e in events
        if e.name not in VIEW_OPS and not any(child.name.startswith("aten::") for child in e.cpu_children)
    ]
    return len(top), len(leaves), len(events)


def step_seconds(step, repeats: int) -> float:
    """Median wall time of `repeats` calls of `step()`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def training_step(model, batch):
    def step():
        model.zero_grad(set_to_none=True)
        model(**batch).loss.backward()

    return step


def bert_rows(preset: str, batch: int, seq: int, repeats: int):
    """Pretraining and padded fine-tuning steps, transformers and hf_ctx on the same weights."""
    rows = []
    generator = torch.Generator().manual_seed(0)
    for mode in ("pretrain", "finetune"):
        config = transformers.BertConfig(
            vocab_size=30522, num_labels=2, attn_implementation="sdpa", **BERT_PRESETS[preset]
        )
        reference_class, ours_class = {
            "pretrain": (transformers.BertForPreTraining, CtxBertForPreTraining),
            "finetune": (transformers.BertForSequenceClassification, CtxBertForSequenceClassification),
        }[mode]
        reference = reference_class(config).train()
        ours_config = convert_bert_config(config)
        ours_config.sparse_prediction = ours_config.unpad_inputs = True
        ours = ours_class(ours_config)
        ours.load_state_dict(convert_bert_state_dict(reference.state_dict()), strict=False)
        ours.tie_weights()
        ours.train()
        input_ids = torch.randint(5, 30522, (batch, seq), generator=generator)
        if mode == "pretrain":
            attention_mask = torch.ones_like(input_ids)
            labels = torch.full_like(input_ids, -100)
            masked = torch.rand(batch, seq, generator=generator) < 0.15
            labels[masked] = input_ids[masked]
            inputs = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "labels": labels,
                "next_sentence_label": torch.randint(0, 2, (batch,), generator=generator),
            }
        else:  # sentence lengths spread over the batch, as dynamic padding gives
            lengths = torch.linspace(seq // 4, seq, batch).long()
            attention_mask = (torch.arange(seq)[None] < lengths[:, None]).long()
            inputs = {
                "input_ids": input_ids * attention_mask,
                "attention_mask": attention_mask,
                "labels": torch.randint(0, 2, (batch,), generator=generator),
            }
        label = f"BERT {preset} {mode} {batch}x{seq}"
        for name, model in (("transformers", reference), ("hf_ctx", ours)):
            step = training_step(model, inputs)
            step()  # warm-up
            rows.append((f"{label}, {name}", *count_ops(step), step_seconds(step, repeats)))
    return rows


def elmo_model():
    config = ElmoConfig(
        char_cnn={"filters": [[1, 32], [2, 32], [3, 64]], "embedding": {"dim": 16}, "n_highway": 1},
        lstm={"dim": 512, "projection_dim": 128, "n_layers": 2},
        vocab_size=2000,
    )
    model = ElmoForBiLM(config).train()
    generator = torch.Generator().manual_seed(0)
    batch, words = 16, 20
    input_ids = torch.randint(1, 262, (batch, words, 50), generator=generator)
    attention_mask = torch.ones(batch, words, dtype=torch.long)
    input_word_ids = torch.randint(3, 2000, (batch, words), generator=generator)
    return model, {"input_ids": input_ids, "attention_mask": attention_mask, "input_word_ids": input_word_ids}


def taglm_model():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
    config = TagLMConfig(vocab_size=5000, id2label=dict(enumerate(labels)), tag_scheme="BIO")
    model = TagLMForTokenClassification(config).train()
    generator = torch.Generator().manual_seed(0)
    batch, words = 8, 30  # the examples' CPU batch size; CoNLL sentences are 14 words on average
    lengths = torch.linspace(5, words, batch).long()
    mask = torch.arange(words)[None] < lengths[:, None]
    input_ids = torch.randint(1, 262, (batch, words, 50), generator=generator) * mask[..., None]
    return model, {
        "input_ids": input_ids,
        "attention_mask": mask.long(),
        "input_word_ids": torch.randint(1, 5000, (batch, words), generator=generator) * mask,
        # O and B- tags in any order follow the BIO scheme the CRF checks; padding gets no label
        "labels": torch.tensor([0, 1, 3, 5, 7])[torch.randint(0, 5, (batch, words), generator=generator)].masked_fill(
            ~mask, -100
        ),
    }


class CrfStep(torch.nn.Module):
    """What a TagLM training step asks of its CRF: the loss (forward algorithm) and the max-marginals."""

    def __init__(self, crf):
        super().__init__()
        self.crf = crf

    def forward(self, emissions, tags, mask):
        # As TagLM does: the logits are the max-marginals, the loss is the CRF's alone.
        return SimpleNamespace(
            loss=-self.crf(emissions, tags, mask).mean(), logits=self.crf.max_marginals(emissions, mask)
        )


def crf_model():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
    model = CrfStep(
        crf_module.ConditionalRandomField(len(labels), crf_module.allowed_transitions("BIO", dict(enumerate(labels))))
    )
    generator = torch.Generator().manual_seed(0)
    batch, words = 32, 30
    lengths = torch.linspace(5, words, batch).long()
    mask = torch.arange(words)[None] < lengths[:, None]
    emissions = torch.randn(batch, words, len(labels), generator=generator).requires_grad_()
    return model, {
        "emissions": emissions,
        "tags": torch.randint(0, len(labels), (batch, words), generator=generator),
        "mask": mask,
    }


def modules_from_revision(revision: str) -> str:
    """Make the model modules of `hf_ctx` as they are at git `revision` (the flat `hf_ctx/*.py` files, which import
    each other with single-dot imports only) importable as a package of their own; returns its name, e.g.
    `importlib.import_module(name + ".layers")`."""
    name = "hf_ctx_at_" + re.sub(r"\W", "_", revision)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPOSITORY), *args], check=True, capture_output=True, text=True).stdout

    folder = Path(tempfile.mkdtemp()) / name
    folder.mkdir()
    for file in git("ls-tree", "--name-only", f"{revision}:hf_ctx").split():
        if file.endswith(".py") and file != "__init__.py":  # the package's __init__ imports the upper layers
            (folder / file).write_text(git("show", f"{revision}:hf_ctx/{file}"))
    (folder / "__init__.py").write_text("")
    sys.path.insert(0, str(folder.parent))
    return name


def swap_classes(model, modules_from, modules_to):
    """Give every submodule whose class is defined in one of `modules_from` the same-named class of the
    corresponding module in `modules_to` (same attributes, other code). A class whose counterpart lacks one of its
    public methods (an interface that changed between the revisions) is kept."""
    for module in model.modules():
        for source, target in zip(modules_from, modules_to):
            name = type(module).__name__
            if type(module).__module__ != source.__name__ or not hasattr(target, name):
                continue
            methods = [attribute for attribute in vars(type(module)) if not attribute.startswith("_")]
            if all(hasattr(getattr(target, name), method) for method in methods):
                module.__class__ = getattr(target, name)


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=kinds.TEXT, default="mini", choices=list(BERT_PRESETS), help="BERT size")
    parser.add_argument("--batch", type=kinds.BATCH_SIZE, default=8, help="BERT batch size")
    parser.add_argument("--seq", type=kinds.LENGTH, default=128, help="BERT sequence length")
    parser.add_argument("--repeats", type=kinds.COUNT, default=5, help="timed steps per measurement")
    parser.add_argument(
        "--baseline", type=kinds.TEXT, default=None, help="git revision whose layers.py and crf.py to compare with"
    )
    parser.add_argument("--skip_bert", action="store_true")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads; "
        f"ops and seconds per forward + backward step (median of {args.repeats})"
    )

    rows = [] if args.skip_bert else bert_rows(args.preset, args.batch, args.seq, args.repeats)
    ratios = []
    baseline = None
    if args.baseline:
        package = modules_from_revision(args.baseline)
        baseline = (importlib.import_module(f"{package}.layers"), importlib.import_module(f"{package}.crf"))
    current = (layers_module, crf_module)
    for label, build in (
        ("ELMo biLM 16x20 (LSTM 512/128, clipped)", elmo_model),
        ("TagLM 8x30 (CRF, 9 BIO tags)", taglm_model),
        ("CRF alone 32x30 (loss + max-marginals)", crf_model),
    ):
        model, batch = build()
        step = training_step(model, batch)
        step()
        if baseline is None:
            rows.append((label, *count_ops(step), step_seconds(step, args.repeats)))
            continue
        counts, seconds = {}, {"current": [], args.baseline: []}
        for name, (source, target) in (("current", (baseline, current)), (args.baseline, (current, baseline))):
            swap_classes(model, source, target)
            step()
            counts[name] = count_ops(step)
        swap_classes(model, baseline, current)
        for _ in range(3):  # alternate, so that drift in machine speed hits both alike
            for name, (source, target) in (("current", (baseline, current)), (args.baseline, (current, baseline))):
                swap_classes(model, source, target)
                seconds[name].append(step_seconds(step, args.repeats))
        swap_classes(model, baseline, current)
        for name in (args.baseline, "current"):
            rows.append((f"{label}, {name}", *counts[name], statistics.median(seconds[name])))
        ratios.append(
            (
                label,
                counts[args.baseline][0] / counts["current"][0],
                counts[args.baseline][1] / counts["current"][1],
                statistics.median(seconds[args.baseline]) / statistics.median(seconds["current"]),
            )
        )

    print(f"{'':58s} {'top-level':>10s} {'kernels':>8s} {'all ops':>8s} {'ms/step':>9s}")
    for label, top, kernels, total, secs in rows:
        print(f"{label:58s} {top:10d} {kernels:8d} {total:8d} {1000 * secs:9.1f}")
    for index in range(0, len(rows) if not args.skip_bert else 0, 2):
        if rows[index][0].startswith("BERT"):
            (_, ref_top, ref_kernels, _, ref_secs), (label, top, kernels, _, secs) = rows[index], rows[index + 1]
            print(
                f"{label.rsplit(',', 1)[0]}: hf_ctx/transformers top-level ops {top / ref_top:.2f}, kernels "
                f"{kernels / ref_kernels:.2f}, time {secs / ref_secs:.2f}"
            )
    for label, top_ratio, kernel_ratio, time_ratio in ratios:
        print(
            f"{label}: {args.baseline}/current top-level ops {top_ratio:.2f}x, kernels {kernel_ratio:.2f}x, "
            f"step time {time_ratio:.2f}x"
        )


if __name__ == "__main__":
    run_script(main)
