#!/usr/bin/env python
"""A GPU window: the next items of the ledger `benchmarks/gpu_ledger.json`, run as commands with deadlines within
9 minutes of wall time on a fresh GPU machine, and a few result files, so that successive windows move forward
instead of repeating.

    python benchmarks/gpu_window_data.py                 # on CPU, before: gpu_window_data/, what the items read
    python benchmarks/gpu_window.py --plan                # the next item, its commands and budget; runs nothing
    bash benchmarks/gpu_window.sh                         # on the GPU machine: the window (OUT=... for results)
    python benchmarks/gpu_window.py --record FILES_AT     # on CPU, after: the ledger and docs/results/
    python benchmarks/gpu_window.py --dry-run --out DIR   # the same code path on CPU, scaled down to seconds

Each step of an item is a command: an existing script (the examples, the benchmarks, pytest) and its budget. A
training step is given `--max_train_minutes` (it stops at the end of a step, then evaluates and saves as usual);
every step runs under a hard limit (its process group is stopped there, and what it printed is kept); a step that
no longer fits in what is left of the window is skipped, and so is one whose input step did not finish. An item
whose steps all finished is "done"; one cut short is "partial", run again by the next window once, then passed.
"""

import argparse
import contextlib
import datetime
import importlib.util
import io
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import gpu_table

REPO = Path(__file__).resolve().parents[1]
LEDGER = REPO / "benchmarks" / "gpu_ledger.json"
PREPARED = REPO / "gpu_window_data"  # written by gpu_window_data.py, ignored by git, carried to the GPU machine
WINDOW_MINUTES = 9.0
RESERVE_S = 15  # kept at the end of the window for writing the result files
MAX_TRIES = 2  # a partial item is run again once, then the ledger moves on
# What the device tool brings back of a window: at most 8 result files, each under 16 MiB, named in letters, digits
# and . _ - (the window writes summary.md, results.json, gpu_ledger.json, window.log, bert_pretraining.png).
RESULT_FILES_AT_MOST = 8
RESULT_FILE_BYTES_UNDER = 16 * 2**20
LOG_BYTES = 15 * 2**20  # window.log: the end of each step's output, within one result file

# What the commands below leave open ("{name}"): the sizes of a window's runs on a GPU, and of its dry run on CPU
# (tiny models, a few steps; a script reads the last of two equal options). "{data}" and "{work}" stand for the
# prepared folder and the steps' run folders.
GPU = {
    "bert_size": "small",  # BERT-Small, 4 layers of 512
    "device": "--bf16 --dataloader_num_workers 4",
    "run": "--report_to none --disable_tqdm true --save_strategy no --seed 0",
    # the files with gpu-marked tests (collecting all of tests/ took most of a window's 45 s); a test keeps the list
    "gpu_tests": "tests/test_benchmarks.py tests/test_distributed.py tests/test_layers.py tests/test_modeling_bert.py",
    "gpu_compile_tests": "tests/test_modeling_bert.py -k compile",
    "bert_speed": "--device cuda --dtype bf16 --preset base",
    "compile": "--compile",
    # CUDA graphs for the launch-bound fine-tuning step, both models; hf_ctx padded (--plain), as graphs need
    "graphs": "--plain --compile --compile_mode reduce-overhead",
    "fusion": "--device cuda --dtype bf16 --preset base",
    "elmo_speed": "--device cuda",
    "pretrain_bert": "--max_steps 6000 --per_device_train_batch_size 256 --learning_rate 5e-4 --warmup_steps 300 "
    "--logging_steps 100 --max_eval_samples 2000 --eval_strategy steps --eval_steps 2000",
    "finetune": "--num_train_epochs 3 --per_device_train_batch_size 32 --learning_rate 1e-4 --per_device_eval_batch_size 256",
    "max_seq_length": "--max_seq_length 128",  # GLUE's; run_ner.py splits CoNLL sentences by the model's length
    "pretrain_elmo": "--model_size small --vocab_min_count 5 --num_sampled 8192 --max_steps 20000 --config_overrides "
    "lstm.cell_clip=null,lstm.proj_clip=null --per_device_train_batch_size 128 --learning_rate 1e-3 "  # unclipped: cuDNN
    "--warmup_steps 300 --max_eval_samples 5000 --logging_steps 100 --preprocessing_num_workers 8",
    "tag": "--num_train_epochs 5 --per_device_train_batch_size 32 --learning_rate 5e-3",
    "tag_epoch": "--num_train_epochs 1 --bf16",
    "few_labels": "--max_train_samples 700 --train_sample_seed 0",  # 5% of eng.train, drawn with a seed
}
TINY_BILM = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16, "cell_clip": None, "proj_clip": None},
}
DRY = {
    **GPU,
    "bert_size": "tiny",
    "device": "--use_cpu",
    "gpu_tests": "tests/test_benchmarks.py",
    "gpu_compile_tests": "tests/test_benchmarks.py",
    "bert_speed": "--device cpu --preset tiny --steps 1 --warmup 1 --repeats 1 --batch 2 --seq 16",
    "compile": "",
    "graphs": "--plain",
    "fusion": "--device cpu --preset tiny --mode eval --tokens 128",
    "elmo_speed": "--device cpu --cell_size 8 --projection_size 4 --steps 3 --repeats 1 --no_compile",
    "pretrain_bert": "--max_steps 3 --per_device_train_batch_size 4 --max_eval_samples 8 --logging_steps 1 "
    "--eval_strategy steps --eval_steps 2",
    "finetune": "--max_steps 2 --per_device_train_batch_size 4 --max_train_samples 16 --max_eval_samples 8",
    "max_seq_length": "--max_seq_length 32",
    "pretrain_elmo": f"--model_size small --vocab_min_count 1 --max_steps 2 --config_overrides '{json.dumps(TINY_BILM)}' "
    "--per_device_train_batch_size 4 --max_eval_samples 8 --max_train_samples 64",
    "tag": "--max_steps 2 --per_device_train_batch_size 4",
    "tag_epoch": "--max_steps 2 --use_cpu",
    "few_labels": "--max_train_samples 30 --train_sample_seed 0",
}

# --- The items: each step a command and its budget in seconds ------------------------------------------------------


@dataclass
class Step:
    """One command of an item: `command`, a script of the repository (or "pytest") and its arguments, with the
    "{name}" options of GPU and DRY left open, run within `budget_s`. A training step (`train_overhead_s` given) trains
    for its budget less that overhead (start, data, evaluation, saving); it is skipped unless the step it `needs`
    finished, and reports `metric` from the eval_results.json of its --output_dir. `args`: the command filled in."""

    name: str
    budget_s: float
    command: str
    train_overhead_s: float | None = None
    needs: str | None = None
    metric: str | None = None
    args: list[str] = field(default_factory=list)

    @property
    def run_dir(self) -> Path | None:
        return Path(self.args[self.args.index("--output_dir") + 1]) if "--output_dir" in self.args else None


GLUE = {"sst2": ("SST-2", "eval_accuracy"), "rte": ("RTE", "eval_accuracy"), "mrpc": ("MRPC", "eval_f1")}
GLUE["cola"] = ("CoLA", "eval_matthews_correlation")  # task -> its folder, the metric run_glue.py reports
CONLL = "--train_file {data}/conll2003/eng.train --validation_file {data}/conll2003/eng.testa"
BUCKETED = "--bucket --pad_to_multiple_of 8"
PADDED_VOCABULARY = "--pad_vocab_size_to_multiple_of 64"  # bert_speed.py's hf_ctx+vocab64 arm (MosaicBERT's 64)


def bert_speed(name: str, budget_s: float, mode: str) -> Step:
    """A bert_speed.py run: hf_ctx's BERT against transformers' in one run, in `mode` (its options)."""
    return Step(name, budget_s, f"benchmarks/bert_speed.py --glue_dir {{data}}/glue --mode {mode} {{bert_speed}}")


def finetuning(init: str) -> list[Step]:
    """Fine-tuning on the GLUE dev sets and CoNLL-2003 eng.testa, from this window's pretrained BERT (`init`
    "pretrained") or from random weights of the same size and tokenizer ("random")."""
    model = "--model_name_or_path {work}/bert"
    if init == "random":
        model = "--model_type bert --config_name {bert_size} --tokenizer_name {data}/wiki_bert"
    needs = "pretrain_bert" if init == "pretrained" else None
    train = "--do_train --do_eval {finetune} {device} {run} --output_dir {work}/finetune/"
    steps = []
    for task, (folder, metric) in GLUE.items():
        data = f"--task_name {task} --data_dir {{data}}/glue/{folder} {{max_seq_length}}"
        command = f"examples/run_glue.py {model} {data} {train}{task}_{init}"
        steps.append(Step(f"{task}_{init}", 45, command, 25, needs, metric))
    command = f"examples/run_ner.py {model} {CONLL} {train}conll_{init}"
    return [*steps, Step(f"conll_{init}", 45, command, 25, needs, "eval_f1")]


def taggers() -> list[Step]:
    """TagLM + GloVe without a biLM, with the pretrained biLM and with a random one of its shape: on all of
    eng.train and on a few labels."""
    steps = []
    for arm, sample in (("full", ""), ("few_label", "{few_labels}")):
        for variant, bilm, needs in (
            ("no_bilm", "", None),
            ("pretrained_bilm", "--bilm_name_or_path {work}/bilm", "pretrain_elmo"),
            ("random_bilm", "--bilm_name_or_path {work}/random_bilm", "random_bilm"),
        ):
            command = f"examples/run_ner.py --model_type taglm --word_vectors {{data}}/glove_conll.txt.gz {bilm} "
            command += f"{CONLL} --do_train --do_eval {{tag}} {sample} {{device}} {{run}} "
            command += f"--output_dir {{work}}/taggers/{arm}_{variant}"
            steps.append(Step(f"taglm_{arm}_{variant}", 45, command, 25, needs, "eval_f1"))
    return steps


ITEMS = {  # name -> (what it does, its steps)
    "checks": (
        "the gpu tests and the speed ratios against the reference, same run",
        [
            Step("gpu_tests", 90, "pytest -q -p no:cacheprovider --continue-on-collection-errors -m gpu {gpu_tests}"),
            bert_speed("bert_pretrain_b128_s128", 130, "pretrain --batch 128 --seq 128 {compile}"),
            bert_speed("bert_finetune_b32_bucketed", 110, f"finetune --batch 32 {BUCKETED} {{compile}}"),
            Step("elmo_bf16", 60, "benchmarks/elmo_lstm_speed.py {elmo_speed} --autocast bf16 --no_compile"),
        ],
    ),
    "checks-compile": (
        "a plain torch.compile keeping hf_ctx's unpadding (no flag): the compiled ratios and the gpu compile test; "
        "pretraining also with the vocabulary padded to 64 rows, alternated in the same run; fine-tuning also as CUDA "
        "graphs (reduce-overhead)",
        [
            Step("gpu_tests_compile", 90, "pytest -q -p no:cacheprovider -m gpu {gpu_compile_tests}"),
            # a third model (eager rows printed before compiling: a cut step still reports them)
            bert_speed(
                "bert_pretrain_b128_s128", 160, f"pretrain --batch 128 --seq 128 {PADDED_VOCABULARY} {{compile}}"
            ),
            bert_speed("bert_finetune_b32_bucketed", 160, f"finetune --batch 32 {BUCKETED} {{compile}}"),
            # (unbucketed fine-tuning, compiled, is checks-bert's bert_finetune_b32)
            bert_speed("bert_finetune_b32_bucketed_graphs", 110, f"finetune --batch 32 {BUCKETED} {{graphs}}"),
        ],
    ),
    "bert-speedrun": (
        "BERT-Small pretrained ~4 min on pre-tokenized wiki, fine-tuned on 4 GLUE tasks + CoNLL",
        [
            Step(
                "pretrain_bert",
                300,
                "examples/pretrain_bert.py --pretokenized_dir {data}/wiki_bert --objective mlm --max_seq_length 128 "
                "--model_size {bert_size} --do_train --do_eval {pretrain_bert} {device} {run} --output_dir {work}/bert",
                train_overhead_s=55,
                metric="eval_mlm_accuracy",
            ),
            *finetuning("pretrained"),
        ],
    ),
    "bert-control": ("the same fine-tuning from random weights (BERT-Small, same tokenizer)", finetuning("random")),
    "elmo-speedrun": (
        "the biLM (bf16, sampled softmax), then TagLM full and few-label arms with a random biLM",
        [
            Step(
                "pretrain_elmo",
                210,
                "examples/pretrain_elmo.py --train_file {data}/wiki_elmo/train.txt.gz --validation_file "
                "{data}/wiki_elmo/valid.txt.gz --do_train --do_eval {pretrain_elmo} {device} {run} --output_dir "
                "{work}/bilm",
                train_overhead_s=60,
                metric="eval_perplexity",
            ),
            Step(
                "random_bilm",
                30,
                "benchmarks/gpu_window.py --random_bilm {work}/bilm {work}/random_bilm",
                None,
                "pretrain_elmo",
            ),
            *taggers(),
        ],
    ),
    "checks-bert": (
        "the rest of the BERT speed table: pretraining at 512, fine-tuning variants, inference; which BERT-layer "
        "fusions inductor makes on the GPU",
        [
            bert_speed("bert_pretrain_b32_s512", 90, "pretrain --batch 32 --seq 512 {compile}"),
            bert_speed("bert_finetune_b32", 90, "finetune --batch 32 {compile}"),
            bert_speed("bert_finetune_b32_dropout0", 60, "finetune --batch 32 --attention_dropout 0"),
            bert_speed(
                "bert_finetune_b32_bucketed_dropout0", 60, f"finetune --batch 32 {BUCKETED} --attention_dropout 0"
            ),
            bert_speed("bert_inference_b128_s128", 50, "inference --batch 128 --seq 128"),
            bert_speed("bert_inference_sst2_b128", 50, "inference --data sst2 --batch 128"),
            Step("inductor_fusion", 60, "benchmarks/inductor_fusion.py {fusion}"),  # bias + GELU, residual + LN
        ],
    ),
    "checks-lstm": (
        "the ELMo LSTM in fp32 and a TagLM CoNLL epoch at batch 8 and at the GPU default",
        [
            Step("elmo_fp32", 120, "benchmarks/elmo_lstm_speed.py {elmo_speed}"),
            *(  # their --output_dir is where gpu_table.py reads the epoch time
                Step(
                    f"taglm_epoch_{batch}",
                    budget,
                    "examples/run_ner.py --model_type taglm --train_file {data}/conll2003/eng.train --do_train "
                    f"{size} {{tag_epoch}} {{run}} --output_dir {{work}}/logs/checks-lstm/taglm_{batch}",
                )
                for batch, budget, size in (("default", 90, ""), ("8", 240, "--per_device_train_batch_size 8"))
            ),
        ],
    ),
}


def item_steps(name: str, sizes: dict, prepared: Path, work: Path, minutes: float = WINDOW_MINUTES) -> list[Step]:
    """An item's steps with their commands filled in from `sizes` and the folders, and their budgets scaled to a
    window of `minutes` (so that a short dry run cuts steps as a window does)."""
    values = {**sizes, "data": shlex.quote(str(prepared)), "work": shlex.quote(str(work))}
    scale = minutes / WINDOW_MINUTES
    steps = []
    for step in ITEMS[name][1]:
        args = shlex.split(step.command.format(**values))
        overhead = step.train_overhead_s and step.train_overhead_s * scale
        steps.append(replace(step, budget_s=step.budget_s * scale, train_overhead_s=overhead, args=args))
    return steps


# --- The ledger ---------------------------------------------------------------------------------------------------


def read_ledger(path: Path) -> dict:
    """The ledger, checked: every item one of ITEMS, in state pending, partial or done."""
    try:
        ledger = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"{path}: not a readable ledger ({err})") from None
    for item in ledger.get("items", []):
        if item.get("name") not in ITEMS:
            raise SystemExit(f"{path}: item {item.get('name')!r} is not one of {list(ITEMS)}")
        if item.get("state") not in ("pending", "partial", "done"):
            raise SystemExit(f"{path}: item {item['name']}: state {item.get('state')!r} is not pending/partial/done")
    return ledger


def next_items(ledger: dict) -> list[dict]:
    """The items still to run, in order: pending ones, and partial ones tried fewer than MAX_TRIES times."""
    return [
        i for i in ledger["items"] if i["state"] == "pending" or (i["state"] == "partial" and i["tries"] < MAX_TRIES)
    ]


def plan(ledger: dict, sizes: dict = GPU) -> str:
    """The next item, its commands with their limits, and the window's budget."""
    items = next_items(ledger)
    if not items:
        return "every item of the ledger is done or was tried twice: add items to benchmarks/gpu_ledger.json"
    item, steps = items[0], item_steps(items[0]["name"], sizes, PREPARED, Path("$WORK"))
    lines = [
        f"next item: {item['name']} ({item['state']}, tried {item['tries']} times): {ITEMS[item['name']][0]}",
        f"budget: {WINDOW_MINUTES:.0f} min (one command; the item's steps add up to "
        f"{sum(s.budget_s for s in steps) / 60:.1f} min, {RESERVE_S} s kept for the results)",
    ]
    for step in steps:
        training = (
            f", training stops at {(step.budget_s - step.train_overhead_s) / 60:.1f} min"
            if step.train_overhead_s
            else ""
        )
        lines.append(f"  {step.name}: at most {step.budget_s:.0f} s{training}: {' '.join(step.args)}")
    lines.append(f"then each of these that still fits whole: {', '.join(i['name'] for i in items[1:]) or 'none'}")
    return "\n".join(lines)


# --- Running: commands with deadlines -----------------------------------------------------------------------------


def run_command(command: list[str], limit_s: float, log) -> str:
    """Run `command` in its own process group; past `limit_s` the group is stopped (TERM, then KILL after 10 s)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env, start_new_session=True
    )
    try:
        code = process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return "cut at its deadline"
    return "done" if code == 0 else f"failed (exit {code})"


def run_in_process(command: list[str], log) -> str:
    """The dry run's way: the script's `main()` in this process (seconds instead of an interpreter start each)."""
    spec = importlib.util.spec_from_file_location(Path(command[0]).stem, REPO / command[0])
    module, saved_argv, output = importlib.util.module_from_spec(spec), sys.argv, io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            spec.loader.exec_module(module)
            sys.argv = command
            module.main()
        return "done"
    except SystemExit as stop:
        return "done" if stop.code in (0, None) else f"failed (exit {stop.code})"
    except Exception as error:  # a failed step is reported, and the window goes on
        return f"failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    finally:
        sys.argv = saved_argv
        log.write(output.getvalue().encode("utf-8", "replace"))


def run_step(step: Step, deadline: float, logs: Path, in_process: bool = False) -> dict:
    """Run one step within its budget and what is left of the window: its entry in results.json."""
    available = min(step.budget_s, deadline - time.monotonic())
    if available < 0.5 * step.budget_s:
        return step_result(step, "skipped: not enough time left in the window")
    command = list(step.args)
    if step.train_overhead_s is not None:
        command += ["--max_train_minutes", f"{max(available - step.train_overhead_s, 1.0) / 60:.4f}"]
    started = time.monotonic()
    with open(logs / f"{step.name}.txt", "wb") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        if in_process and command[0] != "pytest":
            status = run_in_process(command, log)
        else:
            command = [sys.executable, *(["-m", "pytest"] if command[0] == "pytest" else command[:1]), *command[1:]]
            # a training step stops itself; the hard limit is its backstop, with room for evaluation and saving
            backstop = 1.5 * available if step.train_overhead_s is not None else available
            status = run_command(command, min(deadline - time.monotonic(), backstop), log)
    return step_result(step, status, time.monotonic() - started, step_metrics(step, logs))


def step_result(step: Step, status: str, seconds: float = 0.0, metrics: dict | None = None) -> dict:
    return {
        "name": step.name,
        "status": status,
        "seconds": round(seconds, 1),
        "budget_s": round(step.budget_s, 1),
        "metric": step.metric,
        "metrics": metrics or {},
    }


def step_metrics(step: Step, logs: Path) -> dict:
    """What a step measured: a training run's evaluation and steps trained, or the pytest summary line."""
    if step.run_dir is not None and (step.run_dir / "eval_results.json").is_file():
        metrics = json.loads((step.run_dir / "eval_results.json").read_text())
        if (step.run_dir / "trainer_state.json").is_file():
            metrics["global_step"] = json.loads((step.run_dir / "trainer_state.json").read_text())["global_step"]
        return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    if step.args[0] == "pytest":
        lines = [line for line in (logs / f"{step.name}.txt").read_text(errors="replace").splitlines() if line.strip()]
        return {"summary": lines[-1] if lines else "no output"}
    return {}


def run_item(name: str, steps: list[Step], work: Path, deadline: float, in_process: bool) -> dict:
    """Every step of an item in order (one whose input step did not finish is skipped); the item's results."""
    logs = work / "logs" / name
    logs.mkdir(parents=True, exist_ok=True)
    results, finished = [], set()
    for step in steps:
        if step.needs is not None and step.needs not in finished:
            results.append(step_result(step, f"skipped: {step.needs} did not finish"))
        else:
            results.append(run_step(step, deadline, logs, in_process))
        print(f"{step.name}: {results[-1]['status']} ({results[-1]['seconds']} s)", flush=True)
        if results[-1]["status"] == "done":
            finished.add(step.name)
    return {"name": name, "state": "done" if len(finished) == len(steps) else "partial", "steps": results}


def run_window(args) -> dict:
    """The first item still to run, then each later one that fits whole in what is left; then the result files."""
    started = args.started_at if args.started_at is not None else time.time()
    window_s = args.minutes * 60 - RESERVE_S * args.minutes / WINDOW_MINUTES
    deadline = time.monotonic() - (time.time() - started) + window_s
    ledger, device, work = read_ledger(args.ledger), device_name(args.dry_run), Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    done = []
    for item in next_items(ledger)[: args.max_items]:
        steps = item_steps(item["name"], DRY if args.dry_run else GPU, Path(args.prepared_dir), work, args.minutes)
        budget = sum(step.budget_s for step in steps)
        if budget > deadline - time.monotonic() and done:
            continue  # a later window starts it whole; a shorter item after it may still fit
        print(
            f"== {item['name']}: budget {budget / 60:.1f} min, {(deadline - time.monotonic()) / 60:.1f} left",
            flush=True,
        )
        done.append(run_item(item["name"], steps, work, deadline, args.dry_run and not args.subprocesses))
    return write_result_files(Path(args.out), ledger, done, device, args, work, time.time() - started)


def device_name(dry_run: bool) -> str:
    if dry_run:
        return "CPU (dry run; no GPU figures)"
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: the window runs on a GPU machine (--dry-run runs it on CPU)")
    return torch.cuda.get_device_name(0)


# --- The result files ---------------------------------------------------------------------------------------------


def write_result_files(out: Path, ledger: dict, done: list[dict], device: str, args, work: Path, seconds: float):
    """results.json (every step's status, seconds, metrics), gpu_ledger.json (the ledger after this window),
    summary.md (each item's steps, and the speed table of the checks), window.log (the end of each step's output)
    and, after BERT pretraining, its curves; each written atomically."""
    from hf_ctx.data.atomic_write import atomic_write, write_text

    date = datetime.date.today().isoformat()
    for result in done:
        entry = next(i for i in ledger["items"] if i["name"] == result["name"])
        entry.update(state=result["state"], tries=entry["tries"] + 1, device=device, date=date)
        entry["produced"] = f"{sum(s['status'] == 'done' for s in result['steps'])}/{len(result['steps'])} steps done"
    out.mkdir(parents=True, exist_ok=True)
    versions = package_versions()
    results = {"device": device, "versions": versions, "dry_run": args.dry_run, "date": date}
    results.update(window_s=args.minutes * 60, seconds=round(seconds, 1), items=done)
    write_text(out / "results.json", json.dumps(results, indent=1))
    write_text(out / "gpu_ledger.json", json.dumps(ledger, indent=1) + "\n")
    packages = ", ".join(f"{name} {version}" for name, version in versions.items())
    sections = [item_section(item, device, date, work) for item in done] or ["(no item fitted in the window)\n"]
    write_text(out / "summary.md", f"# GPU window, {date}, {device}\n\n{packages}\n\n" + "\n".join(sections))
    with atomic_write(out / "window.log", "wb") as log:
        paths = sorted((work / "logs").glob("*/*.txt"), key=os.path.getmtime)
        for path in paths:
            log.write(
                f"\n==== {path.parent.name}: {path.stem}\n".encode() + path.read_bytes()[-LOG_BYTES // len(paths) :]
            )
    if (work / "bert" / "trainer_state.json").is_file():
        sys.path.insert(0, str(REPO / "examples" / "experiments"))
        try:
            from experiment_lib import plot_pretraining_curves

            plot_pretraining_curves(work / "bert", out / "bert_pretraining.png", f"BERT pretraining, {device}")
        except (ImportError, ValueError) as error:  # no matplotlib, or nothing logged: the tables still stand
            print(f"no pretraining plot: {error}")
    check_result_files(out)
    print((out / "summary.md").read_text())
    return results


def check_result_files(out: Path) -> None:
    """A `SystemExit` unless the device tool brings all of `out` back: RESULT_FILES_AT_MOST files, each under
    RESULT_FILE_BYTES_UNDER, named in letters, digits and . _ -."""
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > RESULT_FILES_AT_MOST:
        raise SystemExit(f"{out}: {len(files)} result files, more than the {RESULT_FILES_AT_MOST} that come back")
    for path in files:
        if path.stat().st_size >= RESULT_FILE_BYTES_UNDER or not all(c.isalnum() or c in "._-" for c in path.name):
            raise SystemExit(f"{path}: {RESULT_FILE_BYTES_UNDER // 2**20} MiB or more, or named with other characters")


def item_section(item: dict, device: str, date: str, work: Path) -> str:
    """An item's part of summary.md: its steps (status, seconds against budget, what they measured), and for the
    checks the speed table of their outputs (gpu_table.py)."""
    lines = [f"### GPU window {date}, {device}: {item['name']} ({item['state']})", ""]
    lines += ["| step | status | seconds (budget) | result |", "| --- | --- | --- | --- |"]
    for step in item["steps"]:
        measured = [
            (k, step["metrics"][k]) for k in (step["metric"], "global_step", "summary") if k in step["metrics"]
        ]
        result = ", ".join(
            f"{k.removeprefix('eval_')} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in measured
        )
        lines.append(
            f"| {step['name']} | {step['status']} | {step['seconds']:.0f} ({step['budget_s']:.0f}) | {result} |"
        )
    if item["name"].startswith("checks"):
        lines += ["", *gpu_table.table(work / "logs" / item["name"])]
    return "\n".join(lines) + "\n"


def package_versions() -> dict[str, str]:
    """The versions the window ran with: the first thing to read when a step fails on a machine never seen before."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in "torch transformers accelerate datasets evaluate seqeval pyarrow fsspec numpy".split():
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


# --- After the window, on CPU -------------------------------------------------------------------------------------


def record(files_at: Path, ledger_path: Path = LEDGER, docs: Path = REPO / "docs") -> list[str]:
    """Apply a window's returned files: the items it ran take their new state in `ledger_path`, and its results.json
    and summary.md are kept as docs/results/gpu_window_<date>_<items>.json and .md. A dry run's results never reach
    the repository's own ledger or docs."""
    from hf_ctx.data.atomic_write import write_text

    found = sorted(Path(files_at).rglob("results.json"))  # the tool may return $OUT's files one folder down
    if len(found) != 1:
        raise SystemExit(f"{files_at}: expected one results.json of a window, found {len(found)}")
    folder, results = found[0].parent, json.loads(found[0].read_text())
    if results["dry_run"] and (Path(ledger_path) == LEDGER or Path(docs) == REPO / "docs"):
        raise SystemExit(f"{folder} holds a dry run's results (no GPU): they are not recorded in the repository")
    ran = [item["name"] for item in results["items"]]
    returned = {item["name"]: item for item in read_ledger(folder / "gpu_ledger.json")["items"] if item["name"] in ran}
    ledger = read_ledger(ledger_path)
    ledger["items"] = [returned.get(item["name"], item) for item in ledger["items"]]
    write_text(ledger_path, json.dumps(ledger, indent=1) + "\n")
    kept = Path(docs) / "results" / f"gpu_window_{results['date']}_{'_'.join(ran) or 'none'}"
    kept.parent.mkdir(parents=True, exist_ok=True)
    write_text(f"{kept}.json", json.dumps(results, indent=1) + "\n")
    write_text(f"{kept}.md", (folder / "summary.md").read_text())
    return [str(ledger_path), f"{kept}.json", f"{kept}.md"]


def save_random_bilm(pretrained: str, out: str) -> None:
    """A biLM of the pretrained one's shape and vocabulary with random weights (seed 0): the control."""
    sys.path.insert(0, str(REPO / "examples" / "experiments"))
    from elmo_taglm import random_bilm

    random_bilm(Path(pretrained), Path(out), 0)


def _positive(read, noun: str):
    """An argparse `type=`: a finite `noun` above 0, read by `read` (int, float); 0 minutes or items would run
    an empty window and say only that no item fitted."""

    def positive(text: str):
        try:
            value = read(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be a {noun} above 0, got {text!r}")
        return value

    positive.__name__ = f"positive {noun}"
    return positive


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--plan", action="store_true", help="print the next item, its commands and budget")
    mode.add_argument("--record", metavar="FILES_AT", help="apply a window's returned files (on CPU, after)")
    mode.add_argument("--random_bilm", nargs=2, metavar=("PRETRAINED", "OUT"), help=argparse.SUPPRESS)  # a step
    parser.add_argument("--dry-run", dest="dry_run", action="store_true", help="the window on CPU, scaled down")
    parser.add_argument("--subprocesses", action="store_true", help="--dry-run: each step in its own interpreter")
    parser.add_argument("--ledger", default=str(LEDGER))
    parser.add_argument("--prepared_dir", default=str(PREPARED))
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu_window_out"), help="the window's result files")
    parser.add_argument("--work", default="/tmp/gpu_window_work", help="the steps' run folders (not brought back)")
    parser.add_argument("--docs", default=str(REPO / "docs"), help="--record: the docs folder")
    parser.add_argument(
        "--minutes", type=_positive(float, "number"), default=WINDOW_MINUTES, help="the window's wall time"
    )
    parser.add_argument(
        "--max_items", type=_positive(int, "whole number"), help="run at most this many items (default: all that fit)"
    )
    parser.add_argument("--started_at", type=float, help="unix time the window began (gpu_window.sh's start)")
    args = parser.parse_args(argv)
    if args.plan:
        print(plan(read_ledger(args.ledger), DRY if args.dry_run else GPU))
    elif args.record:
        print("updated: " + ", ".join(record(Path(args.record), Path(args.ledger), Path(args.docs))))
    elif args.random_bilm:
        save_random_bilm(*args.random_bilm)
    else:
        run_window(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
