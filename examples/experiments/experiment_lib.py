"""The library the experiment scripts (`elmo_taglm.py`, `bert_glue_conll.py`) share, and that tests import as a
module: running the example scripts in-process, seed tables with baselines, and the plots (pretraining curves from
`trainer_state.json`, ELMo scalar-mix weights from a task model's weights).

Tables give each cell as mean (min–max) over seeds, with every seed's value beside it, so that a reader can check
the claim "every seed of the pretrained model beats every seed of the control" directly.
"""

import gzip
import importlib.util
import json
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from hf_ctx.data.atomic_write import atomic_write, write_text
from hf_ctx.tools.errors import USER_ERRORS
from hf_ctx.tools.trainer import missing_checkpoint_files

EXAMPLES = Path(__file__).resolve().parents[1]


def load_example(name: str):
    """The module of `examples/<name>.py`, whose `main(argv)` runs it and returns its metrics. `examples/` goes on
    the import path first, as running the script puts it there: the scripts import their sibling `script_help`."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN = ["--report_to", "none", "--disable_tqdm", "true"]  # every run of the experiments


def device_flags(preset: str, parser) -> list[str]:
    """The device options of every job of a preset: none for "gpu" (the scripts then train on the GPU, in bf16),
    `--use_cpu` for the others. "gpu" on a machine without one is refused by `parser` now, not by the first job."""
    if preset != "gpu":
        return ["--use_cpu"]
    if not torch.cuda.is_available():
        parser.error(
            "--preset gpu trains on a GPU in bf16 and this machine has none (torch.cuda.is_available() is "
            "False); --preset cpu is the same experiment sized for CPUs"
        )
    return []


def checkpoint_every(steps: int) -> list[str]:
    """Arguments of a pretraining that saves a checkpoint every `steps` steps (the latest two kept), so that a
    command cut off by a time limit resumes from it when given again."""
    return ["--save_strategy", "steps", "--save_steps", str(steps), "--save_total_limit", "2"]


def checkpoints(run_dir: str | Path) -> list[Path]:
    """The Trainer's `checkpoint-N` folders in `run_dir`, oldest first."""
    found = Path(run_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")
    return sorted((p for p in found if p.name.split("-")[-1].isdigit()), key=lambda p: int(p.name.split("-")[-1]))


COMMAND_FILE = "experiment_command.json"  # the script and arguments a run directory's results came from


def _paths_resolved(command: dict) -> dict:
    """`command` with each argument that names an existing file or folder made absolute: the same experiment
    folder given as `runs/x` once and as `/abs/runs/x` later is the same command."""
    return {**command, "args": [str(Path(a).resolve()) if os.path.exists(a) else a for a in command["args"]]}


def _check_same_command(run_dir: Path, command: dict) -> None:
    """A finished run is reused only for the command that made it: results from another biLM, data or schedule
    under the same name would silently stand for this one. (Runs from before this file was written are reused.)"""
    path = run_dir / COMMAND_FILE
    if not path.is_file():
        return
    before = json.loads(path.read_text())
    if before == command or _paths_resolved(before) == _paths_resolved(command):
        return
    added = [a for a in command["args"] if a not in before["args"]]
    dropped = [a for a in before["args"] if a not in command["args"]]
    raise ValueError(
        f"{run_dir} holds a finished {before['script']} run of other arguments (now {added}, then {dropped}); "
        "delete that folder to run it again, or give the experiment another --output_dir"
    )


def run_example(name: str, args: Sequence[str], run_dir: str | Path, resume: bool = False) -> dict[str, float]:
    """Run `examples/<name>.py` with `args` (whose `--output_dir` is `run_dir`) and return its evaluation metrics
    (`eval_results.json`, and `predict_results.json` where `--do_predict` wrote one).

    A run that finished before (its `run_dir` holds the saved model and `eval_results.json`) is not run again, so an
    interrupted experiment goes on where it stopped when the same command is given again. A run that did not
    finish starts again from its beginning (`--overwrite_output_dir`), its stale checkpoints removed first, unless
    `resume` (pretraining, which `args` make save checkpoints with `--save_strategy steps`): then it continues from
    its latest complete checkpoint. Runs save no checkpoints unless `args` give `--save_strategy`; a finished run's
    checkpoints (early stopping's, or pretraining's) are deleted, as the model it kept is saved in `run_dir`. A
    finished run made by other arguments (`experiment_command.json`) is an error, never reused."""
    run_dir = Path(run_dir)
    finished = run_dir / "eval_results.json"
    command = {"script": name, "args": [str(a) for a in args]}
    if finished.is_file() and (run_dir / "model.safetensors").is_file():
        _check_same_command(run_dir, command)
        print(f"\nreusing the finished run {run_dir}", flush=True)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_text(run_dir / COMMAND_FILE, json.dumps(command, indent=1))
        args = [*args] if "--save_strategy" in map(str, args) else [*args, "--save_strategy", "no"]
        complete = [c for c in checkpoints(run_dir) if not missing_checkpoint_files(c)]
        if resume and complete:
            args += ["--resume_from_checkpoint", "latest"]
        else:
            for stale in checkpoints(run_dir):
                shutil.rmtree(stale)
            args += ["--overwrite_output_dir"]  # the results an unfinished run left go too
        print(f"\n$ python examples/{name}.py {' '.join(map(str, args))}", flush=True)
        load_example(name).main([str(a) for a in args])
    for done in checkpoints(run_dir):
        shutil.rmtree(done)
    metrics = json.loads(finished.read_text())
    predicted = run_dir / "predict_results.json"
    return {**metrics, **json.loads(predicted.read_text())} if predicted.is_file() else metrics


@dataclass
class Job:
    """One step of an experiment for `run_jobs`: `function(*args)`, once the jobs named in `after` are done.
    `log`: the file a job run in a worker process writes its output to."""

    name: str
    function: Callable
    args: tuple = ()
    after: tuple[str, ...] = ()
    log: Path | None = None


def _run_logged(job: Job):
    """In a worker process: `job`, its output (Python's and the libraries' own) into `job.log`."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with open(job.log, "a", encoding="utf-8") as log:
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            return job.function(*job.args)
        finally:
            for stream, fd in zip((1, 2), saved):
                os.dup2(fd, stream)
                os.close(fd)


def run_jobs(jobs: Sequence[Job], workers: int) -> dict[str, object]:
    """Run `jobs` (in list order, each once the jobs it comes `after` are done) on `workers` processes of one
    CPU thread each, and return their results by name. One job per core keeps both cores of a small machine busy
    at the full speed of each (two threads on one job go 1.0-1.6 times as fast as one), and a job's output goes to
    its log so that the console shows one progress line per job. `workers` 1 runs them here, one after the other,
    printing as they go."""
    results, started = {}, time.monotonic()
    if workers <= 1:
        for job in jobs:
            results[job.name] = job.function(*job.args)
        return results
    waiting, running = list(jobs), {}
    # one thread a worker: torch reads OMP_NUM_THREADS when the spawned worker imports it
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            while waiting or running:
                for job in [j for j in waiting if all(n in results for n in j.after)][: workers - len(running)]:
                    waiting.remove(job)
                    running[pool.submit(_run_logged, job)] = (job, time.monotonic())
                    print(f"[{time.monotonic() - started:7.0f} s] started {job.name} (log: {job.log})", flush=True)
                if not running:
                    raise ValueError(f"jobs wait for jobs that are not in the list: {[j.name for j in waiting]}")
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    job, start = running.pop(future)
                    try:
                        results[job.name] = future.result()
                    except USER_ERRORS as error:  # a job's one-line error stays one line, naming the job
                        raise ValueError(f"{job.name} failed: {error} (its output: {job.log})") from error
                    except Exception as error:  # a bug in a job stops the experiment with its traceback
                        raise RuntimeError(f"{job.name} failed ({error}); its output: {job.log}") from error
                    minutes = (time.monotonic() - start) / 60
                    print(
                        f"[{time.monotonic() - started:7.0f} s] finished {job.name} in {minutes:.1f} min "
                        f"({len(results)}/{len(jobs)} jobs done)",
                        flush=True,
                    )
    finally:
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = threads
    return results


def pretrain_on_wiki(script: str, data_dir: str | Path, preset: dict, device: list, run_dir: Path, extra=()) -> dict:
    """Run a pretraining example (`pretrain_bert` or `pretrain_elmo`) on the preset's wiki shards, validated on
    `wiki.valid.txt.gz`, with seed 0; its evaluation metrics."""
    wiki = Path(data_dir) / "wiki"
    return run_example(
        script,
        [
            "--train_file",
            *[wiki / shard for shard in preset["shards"]],
            "--validation_file",
            wiki / "wiki.valid.txt.gz",
            *extra,
            "--do_train",
            "--do_eval",
            "--seed",
            "0",
            "--output_dir",
            run_dir,
            *preset["pretrain"],
            *device,
            *RUN,
        ],
        run_dir,
        resume=True,
    )


def smoke_slice(data_dir: str | Path, out: Path, lines: dict[str, int]) -> str:
    """The folder `out/smoke_data` holding the first lines of each file of `data_dir` that `lines` names (its path
    in `data_dir` -> how many lines; a file of blank-line-separated blocks, CoNLL's sentences, goes on to the end of
    the block its last line is in), so that a smoke run does every stage on a tiny slice of the real data. Files
    `data_dir` lacks are left out (the stage that reads one names it); gzip files stay gzip files."""
    folder = Path(out) / "smoke_data"
    for name, count in lines.items():
        source, target = Path(data_dir) / name, folder / name
        if not source.is_file():
            continue
        kept, blocks = [], False
        with (
            gzip.open(source, "rt", encoding="utf-8") if name.endswith(".gz") else open(source, encoding="utf-8") as f
        ):
            for line in f:
                blocks = blocks or not line.strip()
                if len(kept) >= count and (not blocks or not line.strip()):
                    break
                kept.append(line)
        data = "".join(kept).encode("utf-8")
        data = gzip.compress(data, mtime=0) if name.endswith(".gz") else data
        if not target.is_file() or target.read_bytes() != data:  # an unchanged file keeps the scripts' data cache
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(target, "wb") as f:
                f.write(data)
    return str(folder)


def mean_min_max(values: Sequence[float], counts: bool = False) -> str:
    """ "0.812 (0.801–0.820)": the mean over seeds and its range ("1,194.0 (1,172–1,233)" for `counts`)."""
    if counts:
        return f"{statistics.mean(values):,.1f} ({min(values):,.0f}–{max(values):,.0f})"
    return f"{statistics.mean(values):.4f} ({min(values):.4f}–{max(values):.4f})"


def are_counts(rows: dict[str, Sequence[float]]) -> bool:
    """Whether a table's values are counts (whole numbers, some above 1), shown without decimals."""
    values = [v for seeds in rows.values() for v in seeds]
    return all(float(v).is_integer() for v in values) and any(v > 1 for v in values)


def verdict_word(pretrained: Sequence[float], control: Sequence[float]) -> str:
    """ "better" where every seed of the pretrained model beats every seed of the control (the only improvement
    claimed), "worse" where every seed trails every control seed, else "no clear difference". Said as better /
    worse, not "gain" / "loss", which a reader of training logs would take for the training loss."""
    if min(pretrained) > max(control):
        return "better"
    if max(pretrained) < min(control):
        return "worse"
    return "no clear difference"


VERDICT_REASONS = {
    "better": " than the control (every seed above every control seed)",
    "worse": " than the control (every seed below every control seed)",
    "no clear difference": " (the seeds overlap)",
}


def verdict(pretrained: Sequence[float], control: Sequence[float]) -> str:
    """`verdict_word` with its reason, as the tables' comparison lines say it."""
    word = verdict_word(pretrained, control)
    return word + VERDICT_REASONS[word]


def seed_table(
    title: str,
    metric: str,
    rows: dict[str, list[float]],
    seeds: Sequence[int],
    baseline: tuple[str, float],
    comparisons: Sequence[tuple[str, str]] = (),
) -> dict:
    """One table of an experiment's results as data: each model's value per seed (`rows`, in `seeds` order), the
    majority-class baseline (label, value), and the (pretrained, control) pairs it compares. The experiments
    write these to `results.json`; `markdown_table` and `render_results.py` draw them."""
    return {
        "title": title,
        "metric": metric,
        "seeds": list(seeds),
        "rows": {name: [float(v) for v in values] for name, values in rows.items()},
        "baseline": [baseline[0], float(baseline[1])],
        "comparisons": [list(pair) for pair in comparisons],
    }


def write_results_json(out: str | Path, experiment: str, argv: Sequence[str], tables: Sequence[dict], **more) -> Path:
    """`out/results.json`: the experiment, its command line, every table's per-seed values (`seed_table`) and
    `more` (other measurements, e.g. the biLM sweep), from which the tables of docs/results.md and the README are
    generated (copy it to docs/results/)."""
    record = {
        "experiment": experiment,
        "command": f"python examples/experiments/{experiment}.py " + " ".join(map(str, argv)),
        "tables": list(tables),
        **more,
    }
    path = Path(out) / "results.json"
    write_text(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def markdown_table(table: dict, heading: str = "###") -> str:
    """A `seed_table` in markdown under `heading` + its title: one row per model (mean (min–max), then each
    seed), the majority-class baseline row, then a line per (pretrained, control) comparison."""
    title, metric, rows, seeds = table["title"], table["metric"], table["rows"], table["seeds"]
    baseline, comparisons = table["baseline"], table["comparisons"]
    header = f"| model | {metric}: mean (min–max) | " + " | ".join(f"seed {s}" for s in seeds) + " |"
    lines = [f"{heading} {title}", "", header, "|" + " --- |" * (len(seeds) + 2)]
    counts = are_counts(rows)
    shown = "{:,.0f}" if counts else "{:.4f}"
    for name, values in rows.items():
        cells = " | ".join(shown.format(v) for v in values)
        lines.append(f"| {name} | {mean_min_max(values, counts)} | {cells} |")
    label, value = baseline
    lines.append(
        f"| majority-class baseline ({label}) | {shown.format(value)} | " + " | ".join("–" for _ in seeds) + " |"
    )
    lines.append("")
    for pretrained, control in comparisons:
        lines.append(f"- {pretrained} vs {control}: {verdict(rows[pretrained], rows[control])}")
    return "\n".join(lines) + "\n"


def perplexity_markdown(record: dict, heading: str = "###") -> str:
    """The perplexity table of `elmo_taglm.py` (its `perplexities` record) under `heading`: unigram models, then
    each biLM stage, and the last stage's perplexity as a multiple of the news unigram model's."""
    lines = [
        f"{heading} Perplexity on eng.testa's text (as the taggers read it)",
        "",
        f"{record['eng.testa words']:,} words; the biLM's vocabulary: {record['vocabulary']:,} words "
        f"({record['eng.testa words outside the vocabulary']:.1%} of eng.testa's words outside it, "
        "predicted as `<UNK>`).",
        "",
        "| model | forward | backward | average |",
        "| --- | --- | --- | --- |",
    ]
    for name, value in record["unigram"].items():
        lines.append(f"| unigram model of {name} | {value:,.1f} | {value:,.1f} | {value:,.1f} |")
    for name, values in record["bilm"].items():
        lines.append(
            f"| biLM: {name} | {values['forward']:,.1f} | {values['backward']:,.1f} | {values['average']:,.1f} |"
        )
    news = next(v for k, v in record["unigram"].items() if k.startswith("news"))
    last = list(record["bilm"].values())[-1]["average"]
    lines += ["", f"The taggers' biLM has {last / news:.2f} times the news unigram model's perplexity.", ""]
    return "\n".join(lines)


# --- Majority-class baselines -------------------------------------------------------------------------------------


def ner_majority_f1() -> tuple[str, float]:
    """Tagging every word with the most frequent tag, "O", finds no entity: entity-level F1 0."""
    return "every word O", 0.0


def glue_majority_baseline(task_name: str, data_dir: str | Path) -> tuple[str, dict[str, float]]:
    """The GLUE metrics of predicting the training set's most frequent label for every dev example."""
    from hf_ctx.data.glue import load_glue_files
    from hf_ctx.data.glue_tasks import glue_task
    from hf_ctx.metrics import load_metric

    task = glue_task(task_name)
    data = load_glue_files(task, data_dir, splits=["train", "validation"])
    majority = Counter(data["train"]["label"]).most_common(1)[0][0]
    references = data["validation"]["label"]
    metrics = load_metric("glue", task.name).compute(predictions=[majority] * len(references), references=references)
    return f"always {task.label_names[majority]!r}", {k: float(v) for k, v in metrics.items()}


# --- Plots ----------------------------------------------------------------------------------------------------------


def pyplot():
    """matplotlib's pyplot, drawing to files only (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_plot(figure, axis, png: str | Path, title: str, ylabel: str) -> Path:
    """Label `axis`, give it a legend, and write `figure` to `png`."""
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(png, dpi=100)
    pyplot().close(figure)
    return Path(png)


def plot_pretraining_curves(run_dirs: str | Path | Sequence[str | Path], png: str | Path, title: str) -> Path:
    """Training loss and every evaluation metric logged in `run_dir/trainer_state.json`, against steps. Several
    run folders are drawn one after the other: a pretraining continued with `--model_name_or_path`."""
    plt = pyplot()
    history, offset = [], 0
    for run_dir in [run_dirs] if isinstance(run_dirs, (str, Path)) else run_dirs:
        state = json.loads((Path(run_dir) / "trainer_state.json").read_text())
        history += [{**entry, "step": entry["step"] + offset} for entry in state["log_history"]]
        offset += state["global_step"]
    series = {"train loss": [(e["step"], e["loss"]) for e in history if "loss" in e]}
    for key in ("eval_loss", "eval_perplexity", "eval_mlm_perplexity", "eval_mlm_accuracy", "eval_nsp_accuracy"):
        points = [(e["step"], e[key]) for e in history if key in e]
        if points:
            series[key] = points
    if "eval_perplexity" in series or "eval_mlm_perplexity" in series:
        series.pop("eval_loss", None)  # the perplexity is its exponential
    figure, axes = plt.subplots(1, len(series), figsize=(4 * len(series), 3.2), squeeze=False)
    for axis, (name, points) in zip(axes[0], series.items()):
        steps, values = zip(*points)
        axis.plot(steps, values, marker="o" if len(points) < 30 else None)
        if "perplexity" in name and min(values) > 0 and max(values) / min(values) > 20:
            axis.set_yscale("log")
        axis.set_title(name)
        axis.set_xlabel("step")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(png, dpi=100)
    plt.close(figure)
    return Path(png)


def plot_learning_curves(curves: dict[str, dict[int, list[float]]], png: str | Path, title: str, metric: str) -> Path:
    """One line per model (label -> {number of labelled examples: a score per seed}): the mean over seeds, with
    the min–max band shaded, against the number of labelled examples on a log axis."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 4))
    for label, scores in curves.items():
        sizes = sorted(scores)
        axis.plot(sizes, [statistics.mean(scores[n]) for n in sizes], marker="o", label=label)
        axis.fill_between(sizes, [min(scores[n]) for n in sizes], [max(scores[n]) for n in sizes], alpha=0.2)
    axis.set_xscale("log")
    sizes = sorted({n for scores in curves.values() for n in scores})
    axis.set_xticks(sizes, [f"{n:,}" for n in sizes])  # the sample sizes, in place of powers of ten
    axis.xaxis.set_minor_formatter(pyplot().NullFormatter())
    axis.set_xlabel("labelled training sentences (log scale)")
    return save_plot(figure, axis, png, title, metric)


def plot_curves(curves: dict[str, list[tuple[float, float]]], png: str | Path, title: str, xlabel: str) -> Path:
    """One line per run (label -> (x, validation perplexity) points), perplexity on a log axis."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 4))
    for label, points in curves.items():
        if points:
            axis.plot(*zip(*points), marker="o", label=label)
    axis.set_yscale("log")
    axis.set_xlabel(xlabel)
    return save_plot(figure, axis, png, title, "validation perplexity")


def scalar_mix_weights(model_dir: str | Path) -> list[float]:
    """softmax of the scalar-mix parameters of an ELMo task model's checkpoint: the weight of each biLM layer."""
    weights = load_file(str(Path(model_dir) / "model.safetensors"))
    keys = [k for k in weights if k.endswith("scalar_mix.scalar_parameters")]
    if len(keys) != 1:
        raise ValueError(f"{model_dir}: expected one scalar mix in the checkpoint, found {keys}")
    return torch.softmax(weights[keys[0]].float(), dim=0).tolist()


def plot_scalar_mix(models: dict[str, str | Path], png: str | Path, title: str) -> Path:
    """Grouped bars: for each task model (label -> checkpoint folder), the weight it gives each biLM layer."""
    plt = pyplot()
    mixes = {label: scalar_mix_weights(path) for label, path in models.items()}
    num_layers = len(next(iter(mixes.values())))
    width = 0.8 / len(mixes)
    figure, axis = plt.subplots(figsize=(max(4, 1.5 * num_layers + len(mixes) * 0.3), 3.2))
    for i, (label, weights) in enumerate(mixes.items()):
        axis.bar([layer + i * width for layer in range(num_layers)], weights, width, label=label)
    axis.axhline(1 / num_layers, color="grey", linestyle=":", linewidth=1, label="uniform")
    axis.set_xticks([layer + width * (len(mixes) - 1) / 2 for layer in range(num_layers)])
    axis.set_xticklabels(["characters (0)"] + [f"LSTM {k}" for k in range(1, num_layers)])
    return save_plot(figure, axis, png, title, "softmax weight")


def final_metric(metrics: dict[str, float], key: str, run_dir: str | Path) -> float:
    """`metrics[key]` of the run in `run_dir` (what `run_example` returned), which must be a finite number."""
    value = metrics.get(key)
    if value is None or not math.isfinite(value):
        raise ValueError(f"{run_dir}: no finite {key} in its eval_results.json")
    return float(value)
