"""examples/experiments/*.py at `--preset smoke` on tiny generated data in the real layout (wiki/ gzip shards,
conll2003/, glue/, a GloVe-like package): the tables hold the majority-class baseline, the control and a column
per seed with the values the runs reported, and the PNG plots are written."""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import bert_glue_conll
import elmo_taglm
import experiment_lib
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hf_ctx.data.synthetic_ner import generate_ner_corpus

WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()
SEEDS = ["0", "1"]  # two seeds keep the test short; the scripts default to three


def text(num_documents, rng):
    return (
        "\n\n".join(
            "\n".join(" ".join(rng.choice(WORDS, int(rng.integers(4, 10)))) + " ." for _ in range(3))
            for _ in range(num_documents)
        )
        + "\n"
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    (root / "wiki").mkdir()
    for name, size in (("wiki.train.0.txt.gz", 60), ("wiki.valid.txt.gz", 10)):
        with gzip.open(root / "wiki" / name, "wt") as f:
            f.write(text(size, rng))
    corpus = generate_ner_corpus(root / "ner", num_train=40, num_validation=16, num_test=4, num_raw=4)
    (root / "conll2003").mkdir()
    shutil.copy(corpus["train"], root / "conll2003" / "eng.train")
    shutil.copy(corpus["validation"], root / "conll2003" / "eng.testa")
    rte = root / "glue" / "RTE"
    rte.mkdir(parents=True)
    for name, size in (("train.tsv", 40), ("dev.tsv", 16)):
        rows = ["index\tsentence1\tsentence2\tlabel"] + [
            f"{i}\t{' '.join(rng.choice(WORDS, 5))}\t{' '.join(rng.choice(WORDS, 4))}\t"
            f"{'entailment' if i % 3 == 0 else 'not_entailment'}"
            for i in range(size)
        ]
        (rte / name).write_text("\n".join(rows) + "\n")
    words = sorted({line.split()[0].lower() for line in corpus["train"].read_text().splitlines() if line.strip()})
    glove = root / "glove" / "data"
    glove.mkdir(parents=True)
    np.save(glove / "glove_6B_50d_emb.npy", rng.normal(size=(len(words), 50)).astype(np.float32))
    pq.write_table(pa.table({"index": words}), glove / "glove_6B_index.parquet")
    return root


def table_rows(markdown: str, title: str) -> dict[str, list[str]]:
    """{model: [mean (min–max), seed values...]} of the table under `### title`."""
    section = markdown.split(f"### {title}")[1].split("###")[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and not line.startswith("| model") and "---" not in line:
            rows[cells[0]] = cells[1:]
    return rows


def check_row(cells, values):
    """A row: 'mean (min–max)' of the seeds' values, then each seed's value."""
    mean, low, high = map(float, re.match(r"([\d.-]+) \(([\d.-]+)–([\d.-]+)\)", cells[0]).groups())
    assert [float(c) for c in cells[1:]] == pytest.approx(values, abs=1e-4)
    assert mean == pytest.approx(np.mean(values), abs=1e-4) and (low, high) == pytest.approx(
        (min(values), max(values)), abs=1e-4
    )


def test_elmo_taglm_smoke(data_dir, tmp_path):
    out = tmp_path / "elmo"
    scores = elmo_taglm.main(
        [
            "--preset",
            "smoke",
            "--data_dir",
            str(data_dir),
            "--output_dir",
            str(out),
            "--word_vectors",
            str(data_dir / "glove"),
            "--seeds",
            *SEEDS,
            "--arms",
            "full",
        ]
    )["full"]
    results = (out / "results.md").read_text()
    assert len(list((out / "taggers").iterdir())) == 5 * len(SEEDS)  # a folder per variant and seed
    assert "Perplexity on wiki.valid.txt.gz" in results
    rows = table_rows(results, "CoNLL-2003 eng.testa, entity F1")
    assert "| seed 0 | seed 1 |" in results
    assert rows["majority-class baseline (every word O)"][0] == "0.0000"
    for name in (
        "TagLM + GloVe, no biLM",
        "TagLM + GloVe + pretrained biLM",
        "TagLM + GloVe + random frozen biLM (control)",
        "ELMo tagger (scalar mix), random biLM (control)",
    ):
        check_row(rows[name], scores[name])
    for seed, value in zip(SEEDS, scores["TagLM + GloVe + pretrained biLM"]):
        reported = json.loads((out / "taggers" / f"taglm_glove_bilm_{seed}" / "eval_results.json").read_text())
        assert reported["eval_f1"] == pytest.approx(value)
    assert "TagLM + GloVe + pretrained biLM vs TagLM + GloVe + random frozen biLM (control):" in results
    for png in ("bilm_pretraining.png", "scalar_mix.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_elmo_taglm_few_label_arm_smoke(data_dir, tmp_path, capsys):
    """The few-label arm alone, on a biLM given with --bilm: a table per fraction whose values are the eng.testa
    (test-file) F1 of runs that selected their checkpoint on a slice held out of eng.train, the learning curve, no
    checkpoint folders left behind, and finished runs reused by the same command."""
    bilm = tmp_path / "bilm"
    elmo_taglm.pretrain_bilm(
        type("Args", (), {"data_dir": str(data_dir), "device": ["--use_cpu"]}),
        elmo_taglm.PRESETS["smoke"],
        tmp_path,
    )
    out = tmp_path / "few"
    argv = ["--preset", "smoke", "--data_dir", str(data_dir), "--output_dir", str(out), "--bilm", str(bilm)]
    argv += ["--word_vectors", str(data_dir / "glove"), "--seeds", *SEEDS, "--arms", "few_label"]
    scores = elmo_taglm.main(argv)["few_label"]
    results = (out / "results.md").read_text()
    assert "Perplexity" not in results and not (out / "taggers").exists()  # neither pretraining nor the full arm
    runs = sorted((out / "few_label").iterdir())
    assert len(runs) == 3 * 2 * len(SEEDS) and not list((out / "few_label").glob("*/checkpoint-*"))
    for fraction, size in ((0.25, 10), (0.5, 20)):  # of the 40 sentences of eng.train
        rows = table_rows(results, f"Few labels: {fraction:.0%} of eng.train ({size} sentences)")
        assert rows["majority-class baseline (every word O)"][0] == "0.0000"
        for name, values in scores[fraction].items():
            check_row(rows[name], values)
        for seed, value in zip(SEEDS, scores[fraction]["TagLM + GloVe + pretrained biLM"]):
            run = out / "few_label" / f"taglm_glove_bilm_{fraction:g}_{seed}"
            assert json.loads((run / "predict_results.json").read_text())["predict_f1"] == pytest.approx(value)
            state = json.loads((run / "trainer_state.json").read_text())
            assert state["best_metric"] == json.loads((run / "eval_results.json").read_text())["eval_f1"]
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert elmo_taglm.main(argv)["few_label"] == scores
    assert capsys.readouterr().out.count("reusing the finished run") == len(runs)


class Interrupt(Exception):
    """A command cut off by its time limit."""


def test_cut_pretraining_resumes_from_its_latest_checkpoint_and_ends_as_an_uninterrupted_run(
    data_dir, tmp_path, monkeypatch
):
    """The slicing of benchmarks/gpu_window.sh, on CPU with the smoke preset (4 steps, a checkpoint every 2): a
    pretraining cut off at step 3 leaves checkpoint-2; the same call again resumes from it (not from step 0) and
    ends with the weights of a run that was never cut (the Trainer restores optimizer, scheduler and RNG states)."""
    import transformers.trainer
    from safetensors.torch import load_file

    preset, args = elmo_taglm.PRESETS["smoke"], type("Args", (), {"data_dir": str(data_dir), "device": ["--use_cpu"]})
    whole = tmp_path / "whole"
    elmo_taglm.pretrain_bilm(args, preset, whole)

    class CutAtStep3(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise Interrupt

    callbacks = transformers.trainer.DEFAULT_CALLBACKS
    monkeypatch.setattr(transformers.trainer, "DEFAULT_CALLBACKS", [*callbacks, CutAtStep3])
    cut = tmp_path / "cut"
    with pytest.raises(Interrupt):
        elmo_taglm.pretrain_bilm(args, preset, cut)
    assert [c.name for c in sorted((cut / "bilm").glob("checkpoint-*"))] == ["checkpoint-2"]
    assert not (cut / "bilm" / "model.safetensors").exists()
    monkeypatch.setattr(transformers.trainer, "DEFAULT_CALLBACKS", callbacks)
    resumed_from = []
    monkeypatch.setattr(
        transformers.Trainer,
        "_load_from_checkpoint",
        lambda self, folder, *a, _load=transformers.Trainer._load_from_checkpoint, **k: (
            resumed_from.append(Path(folder).name),
            _load(self, folder, *a, **k),
        )[1],
    )
    elmo_taglm.pretrain_bilm(args, preset, cut)
    assert resumed_from == ["checkpoint-2"]
    state = json.loads((cut / "bilm" / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and not list((cut / "bilm").glob("checkpoint-*"))  # deleted once finished
    expected, got = (
        load_file(str(whole / "bilm" / "model.safetensors")),
        load_file(str(cut / "bilm" / "model.safetensors")),
    )
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.allclose(got[key], expected[key], atol=1e-6), key


def test_bert_glue_conll_smoke(data_dir, tmp_path, capsys):
    out = tmp_path / "bert"
    argv = ["--preset", "smoke", "--data_dir", str(data_dir), "--output_dir", str(out), "--tasks", "rte", "conll"]
    bert_glue_conll.main([*argv, "--seeds", *SEEDS])
    results = (out / "results.md").read_text()
    capsys.readouterr()
    rte = table_rows(results, "RTE (dev), accuracy")
    # The dev set has labels entailment for i % 3 == 0 (6 of 16); training's majority is not_entailment: 10/16.
    assert rte["majority-class baseline (always 'not_entailment')"][0] == "0.6250"
    for init in ("pretrained BERT", "random init, same architecture (control)"):
        values = [
            json.loads(
                (
                    out
                    / "finetune"
                    / f"rte_{'pretrained' if init.startswith('pre') else 'random'}_{s}"
                    / "eval_results.json"
                ).read_text()
            )["eval_accuracy"]
            for s in SEEDS
        ]
        check_row(rte[init], values)
    conll = table_rows(results, "CoNLL-2003 (dev), f1")
    assert set(conll) == {
        "pretrained BERT",
        "random init, same architecture (control)",
        "majority-class baseline (every word O)",
    }
    assert (out / "bert_pretraining.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The same command again reuses every finished run (pretraining included) and re-runs only an unfinished one.
    unfinished = out / "finetune" / "rte_random_1" / "eval_results.json"
    unfinished.unlink()
    bert_glue_conll.main([*argv, "--seeds", *SEEDS])
    printed = capsys.readouterr().out
    assert printed.count("reusing the finished run") == 1 + 2 * 2 * len(SEEDS) - 1
    assert f"--output_dir {unfinished.parent}" in printed and "examples/pretrain_bert.py" not in printed
    assert unfinished.is_file() and (out / "results.md").read_text() == results


def test_gpu_window_plan_lists_every_slice_within_its_budget_and_runs_nothing(tmp_path):
    """`gpu_window.sh --plan`: the GPU checks within 8 minutes, each experiment's gpu preset within 30, commands of
    at most 9 minutes, enough of them to use the budget; it prints the commands and creates nothing."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_window.sh"
    out = tmp_path / "window"
    env = {**os.environ, "OUT": str(out), "DATA": str(tmp_path / "data")}
    plan = subprocess.run(["bash", str(script), "--plan"], env=env, capture_output=True, text=True, check=True).stdout
    slices = re.findall(
        r"slice \d+ (\w+): budget (\d+) min, commands of at most (\d+) min, at most (\d+) of them", plan
    )
    budgets = {name: int(budget) for name, budget, _, _ in slices}
    assert list(budgets) == ["setup", "checks", "elmo_taglm", "bert_glue_conll", "summary"]
    assert budgets["setup"] <= 1 and budgets["checks"] <= 8
    assert budgets["elmo_taglm"] <= 30 and budgets["bert_glue_conll"] <= 30
    for name, budget, limit, commands in slices:
        assert int(limit) <= 9 and int(commands) * int(limit) >= int(budget), name
    for preset in ("elmo_taglm.py --preset gpu", "bert_glue_conll.py --preset gpu", "gpu_checks.sh"):
        assert preset in plan
    assert f"--output_dir {out}/elmo_taglm" in plan and not out.exists()

    # The summary before anything ran: every slice listed as not finished, no results yet.
    (out / "logs").mkdir(parents=True)
    summary = subprocess.run(["bash", str(script), "--summary"], env=env, capture_output=True, text=True, check=True)
    assert "| elmo_taglm | 30 | 0.0 | not finished |" in summary.stdout
    assert (out / "summary.md").read_text() == summary.stdout


@pytest.mark.parametrize("resume", [False, True])
def test_run_example_restarts_or_resumes_an_unfinished_run_and_deletes_a_finished_runs_checkpoints(
    tmp_path, monkeypatch, resume
):
    """A cut run's stale checkpoints are removed before it starts again (taggers), or it resumes from its latest
    complete checkpoint (pretraining); an incomplete checkpoint is never resumed from; once finished, the
    checkpoint folders are gone and the metrics (evaluation and test) are returned."""
    run_dir = tmp_path / "run"
    for step, files in (
        (
            2,
            [
                "config.json",
                "model.safetensors",
                "trainer_state.json",
                "optimizer.pt",
                "scheduler.pt",
                "rng_state.pth",
            ],
        ),
        (4, ["config.json"]),
    ):
        (run_dir / f"checkpoint-{step}").mkdir(parents=True)
        for name in files:
            (run_dir / f"checkpoint-{step}" / name).write_text("")
    calls = []

    class Example:
        @staticmethod
        def main(argv):
            calls.append((argv, sorted(p.name for p in run_dir.glob("checkpoint-*"))))
            (run_dir / "checkpoint-6").mkdir()  # what the finished run leaves
            for split, value in (("eval", {"eval_f1": 0.5}), ("predict", {"predict_f1": 0.25})):
                (run_dir / f"{split}_results.json").write_text(json.dumps(value))
            (run_dir / "model.safetensors").write_text("")

    monkeypatch.setattr(experiment_lib, "load_example", lambda name: Example)
    args = ["--output_dir", str(run_dir), "--save_strategy", "steps"]
    metrics = experiment_lib.run_example("run_ner", args, run_dir, resume=resume)
    argv, checkpoints_at_start = calls[0]
    if resume:
        assert argv[-2:] == ["--resume_from_checkpoint", "latest"] and checkpoints_at_start == [
            "checkpoint-2",
            "checkpoint-4",
        ]
    else:
        assert "--resume_from_checkpoint" not in argv and checkpoints_at_start == []
    assert metrics == {"eval_f1": 0.5, "predict_f1": 0.25} and not list(run_dir.glob("checkpoint-*"))
    assert experiment_lib.run_example("run_ner", args, run_dir, resume=resume) == metrics and len(calls) == 1  # reused
    # ... but only for the same command: another biLM's results must not stand for this one's.
    with pytest.raises(ValueError, match=r"run of other arguments \(now \['--bilm', 'b'\], then \[\]\); delete"):
        experiment_lib.run_example("run_ner", [*args, "--bilm", "b"], run_dir, resume=resume)
    assert len(calls) == 1

    # Without --save_strategy a run saves no checkpoints; with only an incomplete checkpoint it starts afresh.
    (run_dir / "model.safetensors").unlink()
    (run_dir / "checkpoint-8").mkdir()
    experiment_lib.run_example("run_ner", ["--output_dir", str(run_dir)], run_dir, resume=resume)
    assert calls[1][0][-2:] == ["--save_strategy", "no"] and calls[1][1] == []


STUB_EXPERIMENT = """import pathlib, sys, time
out = pathlib.Path(sys.argv[sys.argv.index("--output_dir") + 1])
out.mkdir(parents=True, exist_ok=True)
calls = out / "calls"
count = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(count + 1))
if count == 0:
    time.sleep(60)  # the first command is cut off by the command limit
(out / "results.md").write_text("## " + pathlib.Path(sys.argv[0]).stem + " results\\n")
"""


def test_gpu_window_runs_one_command_a_call_and_a_cut_slice_continues_on_the_next_call(tmp_path):
    """gpu_window.sh's driver on CPU, in a copy of the repository's layout whose experiments are stubs that need two
    commands (the first is cut off by a 2-second command limit): each call runs one command and returns; a cut
    slice is run again by the next call; the summary lists every slice as done with the experiments' tables."""
    repo = Path(__file__).resolve().parents[1]
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    (root / "examples" / "experiments").mkdir(parents=True)
    shutil.copy(repo / "benchmarks" / "gpu_window.sh", root / "benchmarks")
    (root / "benchmarks" / "gpu_checks.sh").write_text('mkdir -p "$OUT" && echo "quick=$QUICK" > "$OUT/ran"\n')
    (root / "benchmarks" / "gpu_table.py").write_text('print("| benchmark | ratio |")\n')
    for name in ("elmo_taglm", "bert_glue_conll"):
        (root / "examples" / "experiments" / f"{name}.py").write_text(STUB_EXPERIMENT)
    data, bin_dir = tmp_path / "data", tmp_path / "bin"
    for folder in ("wiki", "conll2003", "glue"):
        (data / folder).mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'Fake GPU, 80 GiB'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "window"
    env = {
        **os.environ,
        "OUT": str(out),
        "DATA": str(data),
        "PYTHON": sys.executable,
        "COMMAND_S": "2",
        "REQUIRED_MODULES": "torch",  # the stub experiments need nothing else; the GloVe package is not a test extra
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }

    def call():
        result = subprocess.run(
            ["bash", str(root / "benchmarks" / "gpu_window.sh")], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    printed = [call() for _ in range(8)]
    started = [re.search(r"== slice (\w+)", p).group(1) if "== slice" in p else None for p in printed]
    assert started == [
        "setup",
        "checks",
        "elmo_taglm",
        "elmo_taglm",
        "bert_glue_conll",
        "bert_glue_conll",
        "summary",
        None,
    ]
    assert "set-up complete" in printed[0] and (out / "checks" / "ran").read_text() == "quick=1\n"
    assert "stopped at its 2 s command limit; run the same command again" in printed[2]
    assert "all done" in printed[7]
    summary = (out / "summary.md").read_text()
    for name in ("setup", "checks", "elmo_taglm", "bert_glue_conll"):
        assert re.search(rf"\| {name} \| \d+ \| [\d.]+ \| done \|", summary), name
    assert (
        "## elmo_taglm results" in summary and "## bert_glue_conll results" in summary and "| benchmark |" in summary
    )

    # --all: every command in turn, the cut ones again, in one call.
    env["OUT"] = str(tmp_path / "window_all")
    result = subprocess.run(
        ["bash", str(root / "benchmarks" / "gpu_window.sh"), "--all"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout.count("run the same command again") == 2
    assert (tmp_path / "window_all" / "summary.md").read_text().count("| done |") == 4


def test_verdicts_say_better_or_worse_than_the_control():
    """ "Loss" beside scores reads as the training loss: the verdict says better or worse."""
    verdict = experiment_lib.verdict
    assert verdict([0.61, 0.62], [0.3, 0.35]).startswith("better than the control (every seed above")
    assert verdict([0.1, 0.2], [0.3, 0.35]).startswith("worse than the control (every seed below")
    assert verdict([0.3, 0.4], [0.35, 0.36]) == "no clear difference (the seeds overlap)"
