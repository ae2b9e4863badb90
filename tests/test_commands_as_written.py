"""The scripts started as a user starts them: `python examples/...` from the repository's root, in a process whose
import path is the one Python gives a script (its own folder first), not the test runner's (pyproject.toml's
`pythonpath` puts examples/, examples/experiments/ and benchmarks/ on it, which hid that the experiments could not
import the example scripts' sibling `script_help`)."""

import csv
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import bert_glue_conll
import elmo_taglm
import numpy as np
import pytest
import script_help
from test_experiments import check_row, glove_like_package, table_rows
from transformers import AutoTokenizer

REPO = Path(__file__).resolve().parents[1]
# Scripts with a command line of their own (an argparse parser) that `--help` answers; the libraries beside them
# (experiment_lib.py) and gpu_table.py (no options: it prints a table) are not commands of this kind.
COMMANDS = sorted(
    path.relative_to(REPO).as_posix()
    for folder in ("examples/experiments", "benchmarks")
    for path in (REPO / folder).glob("*.py")
    if "ArgumentParser(" in path.read_text(encoding="utf-8")
)


def user_environment() -> dict[str, str]:
    """The environment of a user's shell: nothing that puts the repository's folders on the import path."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def run_from_root(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=user_environment(), capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("name", script_help.SCRIPTS)
def test_every_example_scripts_help_answers_from_the_repo_root(name):
    result = run_from_root(f"examples/{name}.py", "--help", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"usage: python {name}.py [options]"


# One interpreter for the commands that import torch before they parse their options (20-60 s each on a busy
# 2-core machine): each is run as `python <script> --help` runs it, its own folder alone first on the path and the
# repository's modules that an earlier one imported forgotten; then the example scripts the experiments run in-process
# are loaded as experiment_lib loads them.
PROBE = """
import contextlib, io, json, runpy, sys
from pathlib import Path
repo, commands = Path.cwd(), json.loads(sys.argv[1])
base = [p for p in sys.path[1:] if not Path(p or ".").resolve().is_relative_to(repo)]
answers = {}
for command in commands:
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").resolve().is_relative_to(repo / "examples") or Path(
            getattr(module, "__file__", None) or "/").resolve().is_relative_to(repo / "benchmarks"):
            del sys.modules[name]
    sys.path[:] = [str(repo / Path(command).parent), *base]
    sys.argv = [command, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(command, run_name="__main__")
        answers[command] = ["returned", out.getvalue()]
    except SystemExit as exit:
        answers[command] = [exit.code, out.getvalue()]
    except Exception as error:
        answers[command] = [f"{type(error).__name__}: {error}", out.getvalue()]
sys.path[:] = [str(repo / "examples" / "experiments"), *base]
import experiment_lib
loaded = {}
for name in ("pretrain_elmo", "pretrain_bert", "run_ner", "run_glue"):
    try:
        loaded[name] = callable(experiment_lib.load_example(name).main)
    except Exception as error:
        loaded[name] = f"{type(error).__name__}: {error}"
print(json.dumps({"answers": answers, "loaded": loaded}))
"""


def test_every_experiment_and_benchmark_answers_help_and_loads_the_scripts_it_runs():
    result = run_from_root("-c", PROBE, json.dumps(COMMANDS))
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert set(found["answers"]) == set(COMMANDS) and "examples/experiments/elmo_taglm.py" in COMMANDS
    for command, (code, text) in found["answers"].items():
        assert code == 0 and text.startswith("usage: "), (command, code, text[-500:])
    assert found["loaded"] == dict.fromkeys(("pretrain_elmo", "pretrain_bert", "run_ner", "run_glue"), True)


def run_smoke(name: str, *args: str) -> subprocess.CompletedProcess:
    """The README's smoke command of an experiment, as written but for the output folder: exits 0."""
    result = run_from_root(f"examples/experiments/{name}.py", "--preset", "smoke", *args, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result


def check_smoke_outputs(out: Path) -> None:
    """Every table holds rows; the data are the preset's slices of ../shared/data (`smoke_slice`), not the files."""
    results = json.loads((out / "results.json").read_text())
    assert results["tables"] and all(table["rows"] for table in results["tables"])
    assert (out / "smoke_data" / "conll2003" / "eng.train").stat().st_size < 100_000  # a slice, not the file


def conll_sentences(path: Path) -> int:
    """The sentences of a CoNLL file, counted by hand: blank-line-separated blocks other than -DOCSTART-."""
    blocks = [block for block in path.read_text().split("\n\n") if block.strip()]
    return sum(not block.lstrip().startswith("-DOCSTART-") for block in blocks)


EXPERIMENTS = ("elmo_taglm", "bert_glue_conll")  # each tested below by its smoke command

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_readme_shows_each_experiments_smoke_command_that_the_next_test_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = re.findall(
        r"`python examples/experiments/(\w+)\.py --preset smoke --data_dir \.\./shared/data --output_dir ", readme
    )
    assert sorted(shown) == sorted(EXPERIMENTS)


@pytest.mark.data
@pytest.mark.slow
def test_elmo_taglm_smoke_preset_runs_from_the_repo_root_on_the_shared_data(shared_data, tmp_path):
    """The whole command at the smoke preset on slices of ../shared/data, TagLM reading GloVe-like vectors (the
    glove extra not needed): both pretraining stages, the perplexity table beside the unigram models, the few-label
    tables (each cell the F1 its run reported, the best held-out epoch kept), the plots; every job on two worker
    processes with one progress line each; the same command again reuses every run, and re-runs from its beginning a
    job cut off before its model was saved."""
    out = tmp_path / "elmo_taglm"
    vectors = tmp_path / "glove"
    conll_lines = (shared_data / "conll2003" / "eng.train").read_text().splitlines()[:2000]
    glove_like_package(vectors, conll_lines, np.random.default_rng(0))
    command = ["--data_dir", str(shared_data), "--output_dir", str(out), "--word_vectors", str(vectors)]
    seeds = elmo_taglm.PRESETS["smoke"]["seeds"]  # the preset's, none given
    console = run_smoke("elmo_taglm", *command).stdout
    check_smoke_outputs(out)
    assert console.count("finished taglm_glove_bilm_0.25_0 in") == 1 and "(log: " in console
    results = (out / "results.md").read_text()
    assert "Perplexity on wiki.valid.txt.gz after Wikipedia" in results
    assert "| unigram model of news (AG News + eng.train's sentences) |" in results
    assert "| biLM: Wikipedia, then in-domain text |" in results
    # AG News' lost "&" of its HTML entities ("It #39;s") restored in the in-domain text
    assert "#39;" in (out / "smoke_data" / "corpus" / "agnews.dev.txt").read_text()
    assert "#39;" not in (out / "in_domain" / "agnews.dev.txt").read_text()
    total = conll_sentences(out / "smoke_data" / "conll2003" / "eng.train")
    assert (out / "in_domain" / "eng.train.sentences.txt").read_text().count("\n") == total
    runs = sorted((out / "few_label").iterdir())
    assert len(runs) == 2 * 5 * len(seeds) and not list((out / "few_label").glob("*/checkpoint-*"))
    folders = {
        elmo_taglm.NO_BILM: "taglm_glove",
        elmo_taglm.TAGLM_RANDOM: "taglm_glove_random_bilm",
        elmo_taglm.TAGLM_PRETRAINED: "taglm_glove_bilm",
        elmo_taglm.ELMO_RANDOM: "elmo_random_bilm",
        elmo_taglm.ELMO_PRETRAINED: "elmo_bilm",
    }
    for fraction in (0.25, 0.5):
        rows = table_rows(results, f"Few labels: {fraction:.0%} of eng.train ({round(fraction * total):,} sentences)")
        assert rows["majority-class baseline (every word O)"][0] == "0.0000"
        assert list(rows)[:5] == list(folders)
        for name, folder in folders.items():
            runs_of_row = [out / "few_label" / f"{folder}_{fraction:g}_{seed}" for seed in seeds]
            f1s = [json.loads((run / "predict_results.json").read_text())["predict_f1"] for run in runs_of_row]
            check_row(rows[name], f1s)
            for run in runs_of_row:
                state = json.loads((run / "trainer_state.json").read_text())  # kept its best held-out epoch
                assert state["best_metric"] == json.loads((run / "eval_results.json").read_text())["eval_f1"]
    # TagLM with and without a biLM reads the same word ids (the sample's words and the vectors', lower-cased), so
    # the arms differ in the biLM alone; the frozen biLMs' states were all computed before the taggers ran.
    vocabularies = [
        AutoTokenizer.from_pretrained(out / "few_label" / f"{folder}_0.25_0").get_vocab()
        for folder in ("taglm_glove", "taglm_glove_random_bilm", "taglm_glove_bilm")
    ]
    assert vocabularies[0] == vocabularies[1] == vocabularies[2] and "the" in vocabularies[0]
    for run in runs:
        if "bilm" in run.name:
            assert re.search(r"biLM cache in .*: \d+ sentences found, 0 computed", (run / "log.txt").read_text()), run
    recorded = json.loads((out / "results.json").read_text())
    assert set(recorded["perplexity"]["bilm"]) == {"Wikipedia", "Wikipedia, then in-domain text"}
    for png in ("bilm_pretraining.png", "scalar_mix.png", "learning_curve.png"):
        assert (out / png).read_bytes()[:8] == PNG

    # The same command again: every finished job is reused (its log says so); a job cut off before its model was
    # saved (its earlier results still in the folder) runs again from its beginning into the same folder.
    cut = out / "few_label" / "taglm_glove_bilm_0.25_0"
    f1 = json.loads((cut / "predict_results.json").read_text())["predict_f1"]
    (cut / "model.safetensors").unlink()
    run_smoke("elmo_taglm", *command)
    assert json.loads((out / "results.json").read_text())["tables"] == recorded["tables"]
    assert json.loads((cut / "predict_results.json").read_text())["predict_f1"] == pytest.approx(f1, abs=1e-6)
    assert (cut / "model.safetensors").is_file()
    assert re.search(r"\$ python examples/run_ner.py .*--overwrite_output_dir\n", (cut / "log.txt").read_text())
    for folder in [*runs, out / "bilm_wiki", out / "bilm"]:
        assert (folder / "log.txt").read_text().count("reusing the finished run") == (folder != cut), folder


@pytest.mark.data
@pytest.mark.slow
def test_bert_glue_conll_smoke_preset_runs_from_the_repo_root_on_the_shared_data(shared_data, tmp_path):
    """The command at the smoke preset on slices of ../shared/data: the RTE table holds the majority-class baseline
    and each run's accuracy, the CoNLL table its three rows, the plot is written; the same command again reuses every
    finished run (pretraining included) and re-runs only an unfinished one."""
    out = tmp_path / "bert_glue_conll"
    command = ["--data_dir", str(shared_data), "--output_dir", str(out), "--tasks", "rte", "conll"]
    seeds = bert_glue_conll.PRESETS["smoke"]["seeds"]  # the preset's, none given
    printed = run_smoke("bert_glue_conll", *command).stdout
    check_smoke_outputs(out)
    results = (out / "results.md").read_text()
    rte = table_rows(results, "RTE (dev), accuracy")
    labels = {
        split: [row[-1] for row in csv.reader(
            (out / "smoke_data" / "glue" / "RTE" / f"{split}.tsv").open(), delimiter="\t", quoting=csv.QUOTE_NONE
        )][1:]
        for split in ("train", "dev")
    }  # fmt: skip
    majority = max(set(labels["train"]), key=labels["train"].count)  # the training slice's most frequent label
    row = rte[f"majority-class baseline (always {majority!r})"]
    assert float(row[0]) == pytest.approx(labels["dev"].count(majority) / len(labels["dev"]), abs=5e-5)
    for init, kind in (("pretrained BERT", "pretrained"), ("random init, same architecture (control)", "random")):
        runs = [out / "finetune" / f"rte_{kind}_{seed}" for seed in seeds]
        check_row(rte[init], [json.loads((run / "eval_results.json").read_text())["eval_accuracy"] for run in runs])
    conll = table_rows(results, "CoNLL-2003 (dev), f1")
    assert set(conll) == {
        "pretrained BERT",
        "random init, same architecture (control)",
        "majority-class baseline (every word O)",
    }
    assert (out / "bert_pretraining.png").read_bytes()[:8] == PNG

    # Each run's output is in its folder's log.txt; the console has one line per run (not their logs)
    logs = [out / "bert" / "log.txt", *sorted((out / "finetune").glob("*/log.txt"))]
    assert len(logs) == 1 + 2 * 2 * len(seeds)
    assert printed.count("finished rte_pretrained_0 in") == 1 and "eval_accuracy" not in printed
    assert "examples/pretrain_bert.py" in logs[0].read_text()

    unfinished = out / "finetune" / "rte_random_1" / "eval_results.json"
    unfinished.unlink()
    before = {log: log.read_text() for log in logs}
    run_smoke("bert_glue_conll", *command)
    added = {log: log.read_text()[len(text) :] for log, text in before.items()}
    for log, text in added.items():  # every finished run reused, pretraining included; the unfinished one redone
        redone = log.parent == unfinished.parent
        assert ("reusing the finished run" in text) != redone and "examples/pretrain_bert.py" not in text, log
    assert f"--output_dir {unfinished.parent}" in added[unfinished.parent / "log.txt"]
    assert unfinished.is_file() and (out / "results.md").read_text() == results


@pytest.mark.data
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiments_help_counts_the_sentences_its_smoke_preset_keeps(name, shared_data, tmp_path):
    """`--help` says how many sentences of eng.train and eng.testa `--preset smoke` keeps: what the preset's slice of
    ../shared/data holds, read as the taggers read it."""
    from experiment_lib import smoke_slice

    from hf_ctx.data.conll import read_conll

    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    said = re.search(r"([\d,]+) sentences of eng\.train, ([\d,]+) of eng\.testa", " ".join(module.__doc__.split()))
    assert said, f"{name}.py's docstring does not count the smoke preset's sentences"
    folder = Path(smoke_slice(shared_data, tmp_path, module.PRESETS["smoke"]["slice"])) / "conll2003"
    kept = [len(read_conll(folder / split)) for split in ("eng.train", "eng.testa")]
    assert kept == [int(count.replace(",", "")) for count in said.groups()]
