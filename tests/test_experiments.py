"""examples/experiments/*.py at `--preset smoke` on tiny generated data in the real layout (wiki/ gzip shards,
conll2003/, glue/, a GloVe-like package): the tables hold the majority-class baseline, the control and a column
per seed with the values the runs reported, and the PNG plots are written."""

import gzip
import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hf_ctx.data.synthetic_ner import generate_ner_corpus

EXPERIMENTS = Path(__file__).resolve().parents[1] / "examples" / "experiments"
WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()
SEEDS = ["0", "1"]  # two seeds keep the test short; the scripts default to three


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    scores = load("elmo_taglm").main(
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
        ]
    )
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


def test_bert_glue_conll_smoke(data_dir, tmp_path, capsys):
    out = tmp_path / "bert"
    argv = ["--preset", "smoke", "--data_dir", str(data_dir), "--output_dir", str(out), "--tasks", "rte", "conll"]
    load("bert_glue_conll").main([*argv, "--seeds", *SEEDS])
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
    load("bert_glue_conll").main([*argv, "--seeds", *SEEDS])
    printed = capsys.readouterr().out
    assert printed.count("reusing the finished run") == 1 + 2 * 2 * len(SEEDS) - 1
    assert f"--output_dir {unfinished.parent}" in printed and "examples/pretrain_bert.py" not in printed
    assert unfinished.is_file() and (out / "results.md").read_text() == results


def test_verdicts_say_better_or_worse_than_the_control():
    """ "Loss" beside scores reads as the training loss (issue 26): the verdict says better or worse."""
    verdict = load("report").verdict
    assert verdict([0.61, 0.62], [0.3, 0.35]).startswith("better than the control (every seed above")
    assert verdict([0.1, 0.2], [0.3, 0.35]).startswith("worse than the control (every seed below")
    assert verdict([0.3, 0.4], [0.35, 0.36]) == "no clear difference (the seeds overlap)"
