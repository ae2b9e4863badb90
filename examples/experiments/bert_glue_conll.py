#!/usr/bin/env python
"""Experiment (b), BERT -> GLUE and CoNLL, as one command: pretrain BERT (masked LM) on Wikipedia, then fine-tune
it on CoLA, SST-2, MRPC and RTE (dev sets) and CoNLL-2003 (eng.testa), each against the same architecture from
random initialisation (the control, with the same tokenizer), 3 seeds each, beside the majority-class baseline.
Results go to `--output_dir`: `results.md` (tables) and `bert_pretraining.png` (loss, MLM perplexity and
accuracy against steps).

    python examples/experiments/bert_glue_conll.py --preset cpu --data_dir ../shared/data --output_dir runs/bert
    python examples/experiments/bert_glue_conll.py --preset gpu --data_dir ../shared/data --output_dir runs/bert_gpu

`--data_dir` holds `wiki/` (gzip shards), `glue/` (glue_data layout) and `conll2003/`. `--bert DIR` reuses a BERT
pretrained before; `--tasks` picks a subset. `--preset smoke` runs every stage on the first lines of
each file of `--data_dir` (60 lines of each GLUE file, 25 sentences of eng.train, 10 of eng.testa) with two seeds,
to check the command, not as an experiment: 33 s on 2 idle cores, 171 s at a load average of 9 to 11.

On the CPU the fine-tuning runs go two at a time, on two processes of one CPU thread each, once pretraining is
done; each run's output goes to the `log.txt` of its folder and the console shows one line per run. The same
command again reuses every finished run.
"""

import argparse
import sys
from pathlib import Path

from experiment_lib import (
    RUN,
    Job,
    checkpoint_every,
    device_flags,
    final_metric,
    glue_majority_baseline,
    markdown_table,
    ner_majority_f1,
    plot_pretraining_curves,
    pretrain_on_wiki,
    run_example,
    run_jobs,
    seed_table,
    smoke_slice,
    write_results_json,
)

from hf_ctx.data.atomic_write import write_text
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script

TASKS = {
    "cola": ("CoLA", "matthews_correlation"),
    "sst2": ("SST-2", "accuracy"),
    "mrpc": ("MRPC", "f1"),
    "rte": ("RTE", "accuracy"),
    "conll": ("CoNLL-2003", "f1"),
}

PRESETS = {
    "smoke": {
        # every stage on the first lines of each file (the docstring says how many sentences: tested)
        "slice": {
            "wiki/wiki.train.0.txt.gz": 300,
            "wiki/wiki.valid.txt.gz": 40,
            "conll2003/eng.train": 600,
            "conll2003/eng.testa": 300,
            **{
                f"glue/{task}/{split}.tsv": 60
                for task in ("CoLA", "SST-2", "MRPC", "RTE")
                for split in ("train", "dev")
            },
        },
        "seeds": [0, 1],  # two show the tables' ranges; a third adds minutes
        "shards": ["wiki.train.0.txt.gz"],
        "size": "tiny",
        "pretrain": [
            # the objective and segmentation of the cpu and gpu presets, so that the smoke run checks their stage
            "--objective",
            "mlm",
            "--split_sentences",
            "--vocab_size",
            "200",
            "--max_seq_length",
            "32",
            "--max_steps",
            "4",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--logging_steps",
            "1",
            "--per_device_train_batch_size",
            "8",
            "--max_eval_samples",
            "16",
        ],
        "finetune": [
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "8",
            "--max_train_samples",
            "32",
            "--max_eval_samples",
            "16",
        ],
        "max_seq_length": "32",
    },
    # BERT tiny, MLM, one schedule of 7,000 steps of 64 x 128 tokens on shards 0 and 1 (about 2.8 passes). 3,000
    # steps left it on the plateau where masked LM predicts frequent words (MLM accuracy 0.157); 3,000 + 4,000
    # steps in two schedules got past it (0.248, docs/results.md), hence one schedule of that length.
    "cpu": {
        "shards": ["wiki.train.0.txt.gz", "wiki.train.1.txt.gz"],
        "size": "tiny",
        "pretrain": [
            "--objective",
            "mlm",
            "--vocab_size",
            "8000",
            "--tokenizer_train_samples",
            "2000",
            "--split_sentences",
            "--max_seq_length",
            "128",
            "--max_steps",
            "7000",
            *checkpoint_every(500),
            "--per_device_train_batch_size",
            "64",
            "--learning_rate",
            "1e-3",
            "--warmup_steps",
            "150",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "500",
            "--logging_steps",
            "100",
            "--max_eval_samples",
            "1000",
            "--preprocessing_num_workers",
            "2",
        ],
        "finetune": [
            "--num_train_epochs",
            "3",
            "--per_device_train_batch_size",
            "32",
            "--learning_rate",
            "5e-4",
            "--max_train_samples",
            "10000",
        ],
        "max_seq_length": "128",
    },
    # BERT small (4 layers of 512, BERT-Small of Turc et al. 2019), for one H100 held 30 minutes (a lent GPU window
    # runs benchmarks/gpu_window.py's items instead). Estimates until this preset runs: data about 3 min (WordPiece
    # on 5,000 articles, tokenizing 8 shards with 8 processes); BERT-base pretraining ran 300-440k tokens/s in bf16
    # on an H100 and BERT small does about a sixth of its work per token, so 8,000 steps of 256 x 128 tokens (262M
    # tokens, about 3 passes over the 8 shards) take at most 9 min; the 30 fine-tuning runs about 11 min
    # (SST-2 cut to 20,000 sentences). Checkpoints every 1,000 steps let the next command resume.
    "gpu": {
        "shards": [f"wiki.train.{i}.txt.gz" for i in range(8)],
        "size": "small",
        "pretrain": [
            "--objective",
            "mlm",
            "--vocab_size",
            "30522",
            "--tokenizer_train_samples",
            "5000",
            "--split_sentences",
            "--max_seq_length",
            "128",
            "--max_steps",
            "8000",
            "--per_device_train_batch_size",
            "256",
            "--learning_rate",
            "5e-4",
            "--warmup_steps",
            "800",
            "--bf16",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2000",
            "--max_eval_samples",
            "5000",
            "--logging_steps",
            "100",
            *checkpoint_every(1000),
            "--preprocessing_num_workers",
            "8",
            "--dataloader_num_workers",
            "4",
        ],
        "finetune": [
            "--num_train_epochs",
            "3",
            "--per_device_train_batch_size",
            "32",
            "--learning_rate",
            "1e-4",
            "--max_train_samples",
            "20000",
            "--bf16",
        ],
        "max_seq_length": "128",
    },
}


def pretrain_bert(args, preset, out: Path) -> Path:
    run_dir = out / "bert"
    pretrain_on_wiki("pretrain_bert", args.data_dir, preset, args.device, run_dir, ["--model_size", preset["size"]])
    return run_dir


def finetune(args, preset, task: str, init: list, run_dir: Path, seed: int) -> float:
    data = Path(args.data_dir)
    common = [
        "--do_train",
        "--do_eval",
        "--seed",
        seed,
        "--output_dir",
        run_dir,
        *init,
        *preset["finetune"],
        *args.device,
        *RUN,
    ]
    if task == "conll":
        metrics = run_example(
            "run_ner",
            [
                "--train_file",
                data / "conll2003" / "eng.train",
                "--validation_file",
                data / "conll2003" / "eng.testa",
                *common,
            ],
            run_dir,
        )
        return final_metric(metrics, "eval_f1", run_dir)
    folder, metric = TASKS[task]
    metrics = run_example(
        "run_glue",
        [
            "--task_name",
            task,
            "--data_dir",
            data / "glue" / folder,
            "--max_seq_length",
            preset["max_seq_length"],
            *common,
        ],
        run_dir,
    )
    return final_metric(metrics, f"eval_{metric}", run_dir)


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=kinds.TEXT, choices=list(PRESETS), required=True)
    parser.add_argument(
        "--data_dir", type=kinds.EXISTING_FOLDER, required=True, help="folder with wiki/, glue/ and conll2003/"
    )
    parser.add_argument("--output_dir", type=kinds.OUTPUT_FOLDER, required=True)
    parser.add_argument(
        "--bert", type=kinds.MODEL, help="a BERT pretrained before (pretrain_bert.py output), instead of pretraining"
    )
    parser.add_argument("--tasks", type=kinds.TEXT, nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=kinds.SEED, nargs="+", help="default: 0 1 2 (the smoke preset: 0 1)")
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    args.seeds = args.seeds or preset.get("seeds", [0, 1, 2])
    args.device = device_flags(args.preset, parser)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if "slice" in preset:
        args.data_dir = smoke_slice(args.data_dir, out, preset["slice"])

    jobs, after = [], ()
    if args.bert is None:
        bert = out / "bert"
        jobs.append(Job("bert", pretrain_bert, (args, preset, out), (), bert / "log.txt"))
        after = ("bert",)
    else:
        bert = Path(args.bert)

    pretrained_name, control_name = "pretrained BERT", "random init, same architecture (control)"
    runs = {}  # task -> init name -> the job names of its seeds
    for task in args.tasks:
        size = preset["size"] if task == "conll" else bert
        inits = {
            pretrained_name: ["--model_name_or_path", bert],
            control_name: ["--model_type", "bert", "--config_name", size, "--tokenizer_name", bert],
        }
        for init_name, init in inits.items():
            for seed in args.seeds:
                run_dir = (
                    out / "finetune" / f"{task}_{'pretrained' if init_name == pretrained_name else 'random'}_{seed}"
                )
                jobs.append(
                    Job(run_dir.name, finetune, (args, preset, task, init, run_dir, seed), after, run_dir / "log.txt")
                )
                runs.setdefault(task, {}).setdefault(init_name, []).append(run_dir.name)
    # One worker per core on the CPU (the GPU preset's runs share the one device, one after the other)
    results = run_jobs(jobs, 1 if args.preset == "gpu" else 2)

    sections, tables = [], []
    if args.bert is None:
        plot_pretraining_curves(bert, out / "bert_pretraining.png", "BERT pretraining (wiki)")
        sections.append("Pretraining curves: `bert_pretraining.png`.\n")
    for task, by_init in runs.items():
        name, metric = TASKS[task]
        if task == "conll":
            baseline = ner_majority_f1()
        else:
            label, values = glue_majority_baseline(task, Path(args.data_dir) / "glue" / name)
            baseline = (label, values[metric])
        scores = {init_name: [results[job] for job in names] for init_name, names in by_init.items()}
        tables.append(
            seed_table(
                f"{name} (dev), {metric}",
                metric,
                scores,
                args.seeds,
                baseline,
                comparisons=[(pretrained_name, control_name)],
            )
        )
        sections.append(markdown_table(tables[-1]))

    report = f"## BERT -> GLUE and CoNLL (preset {args.preset})\n\n" + "\n".join(sections)
    write_text(out / "results.md", report)
    write_results_json(out, "bert_glue_conll", argv if argv is not None else sys.argv[1:], tables)
    print(report)


if __name__ == "__main__":
    run_script(main)
