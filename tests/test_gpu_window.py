"""benchmarks/gpu_window.py on CPU: gpu_window_data.py on tiny generated data in the real layout, --plan, the dry
run of the window end to end (the result files the device tool brings back, the ledger moving on), the deadline that
stops a step, and --record into a copy of the ledger and docs."""

import gzip
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("datasets")
import gpu_window
import gpu_window_data

from hf_ctx.data.synthetic_ner import generate_ner_corpus

WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()
GLUE = {  # folder -> (header or None, a row from its index), in the glue_data layouts
    "CoLA": (None, lambda i, s: f"src\t{i % 2}\t\t{s(5)}"),
    "SST-2": ("sentence\tlabel", lambda i, s: f"{s(6)}\t{i % 2}"),
    "MRPC": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", lambda i, s: f"{i % 2}\t{i}\t{i + 1}\t{s(5)}\t{s(5)}"),
    "RTE": (
        "index\tsentence1\tsentence2\tlabel",
        lambda i, s: f"{i}\t{s(5)}\t{s(4)}\t{('not_', '')[i % 2]}entailment",
    ),
}
NAME = re.compile(r"^[A-Za-z0-9._-]+$")  # what the device tool accepts in a returned file's name


def write_data(root: Path, rng) -> Path:
    """wiki/ shards, glue/ (four tasks), conll2003/ and a GloVe text file, tiny."""

    def sentence(n):
        return " ".join(rng.choice(WORDS, n))

    (root / "wiki").mkdir(parents=True)
    for name, size in (("wiki.train.0.txt.gz", 60), ("wiki.valid.txt.gz", 10)):
        with gzip.open(root / "wiki" / name, "wt") as f:
            f.write("\n\n".join("\n".join(sentence(6) + " ." for _ in range(3)) for _ in range(size)) + "\n")
    corpus = generate_ner_corpus(root / "ner", num_train=40, num_validation=16, num_test=4, num_raw=4)
    (root / "conll2003").mkdir()
    shutil.copy(corpus["train"], root / "conll2003" / "eng.train")
    shutil.copy(corpus["validation"], root / "conll2003" / "eng.testa")
    for folder, (header, row) in GLUE.items():
        (root / "glue" / folder).mkdir(parents=True)
        for name, size in (("train.tsv", 40), ("dev.tsv", 16)):
            rows = ([header] if header else []) + [row(i, sentence).replace("\t\t", "\t*\t") for i in range(size)]
            (root / "glue" / folder / name).write_text("\n".join(rows) + "\n")
    words = sorted({line.split()[0] for line in corpus["train"].read_text().splitlines() if line.strip()})
    vectors = "".join(f"{w.lower()} " + " ".join(f"{x:.3f}" for x in rng.normal(size=50)) + "\n" for w in words)
    (root / "glove.txt").write_text(vectors)
    return root


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("window")
    data = write_data(root / "data", np.random.default_rng(0))
    argv = ["--data_dir", str(data), "--prepared_dir", str(root / "prepared"), "--no_wheels"]
    argv += ["--bert_words", "2000", "--elmo_words", "800", "--valid_words", "300", "--tokenizer_samples", "40"]
    assert gpu_window_data.main([*argv, "--vocab_size", "200", "--word_vectors", str(data / "glove.txt")]) == 0
    return root / "prepared"


def ledger_with(tmp_path: Path, states: dict) -> Path:
    """The committed ledger's items, each pending unless `states` names it (whatever earlier windows recorded)."""
    ledger = json.loads(gpu_window.LEDGER.read_text())
    for item in ledger["items"]:
        item["state"] = states.get(item["name"], "pending")
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(ledger))
    return path


def budget_s(name: str) -> float:
    steps = gpu_window.item_steps(name, gpu_window.GPU, gpu_window.PREPARED, Path("work"))
    return sum(step.budget_s for step in steps)


def test_the_committed_ledger_and_the_plan_fit_one_command_of_nine_minutes():
    """Every ledger item is known to the driver and its steps add up to the 9-minute window less the reserve
    (checks within 7 minutes: the first window on an H200 cut all four of its steps at 3); --plan names the next item, its steps and "budget: 9 min"."""
    ledger = gpu_window.read_ledger(gpu_window.LEDGER)
    assert [item["name"] for item in ledger["items"]] == list(gpu_window.ITEMS)
    for item in ledger["items"]:
        assert budget_s(item["name"]) <= 9 * 60 - gpu_window.RESERVE_S, item["name"]
    assert budget_s("checks") <= 7 * 60
    script = gpu_window.REPO / "benchmarks" / "gpu_window.sh"  # the command a GPU machine is given, here --plan
    printed = subprocess.run(["bash", str(script), "--plan"], capture_output=True, text=True, check=True).stdout
    assert "budget: 9 min" in printed and "next item: " in printed


def test_prepare_writes_token_ids_text_tasks_and_vectors_and_prints_the_size(prepared, capsys):
    info = json.loads((prepared / "wiki_bert" / "pretokenized.json").read_text())
    assert info["max_seq_length"] == 128 and info["splits"]["train"]["tokens"] > 0
    ids = np.load(prepared / "wiki_bert" / "train.input_ids.npy")
    assert ids.dtype == np.uint16 and ids.size == info["splits"]["train"]["tokens"]
    for path in ("wiki_elmo/train.txt.gz", "conll2003/eng.testa", "glue/MRPC/dev.tsv", "glove_conll.txt.gz"):
        assert (prepared / path).is_file(), path
    assert not (prepared.parent / "prepared.partial").exists()


def test_dry_run_writes_the_result_files_and_the_ledger_moves_on(prepared, tmp_path, capsys):
    """The window's code path on CPU (bert-speedrun: pretraining on the token ids, five fine-tunings): at most 8
    result files under 16 MiB with names the device tool accepts; in the returned ledger the item is done and
    --plan on it names the next one; --record writes the ledger and keeps the results in the docs given."""
    ledger = ledger_with(tmp_path, {"checks": "done", "checks-compile": "done"})
    out, work = tmp_path / "out", tmp_path / "work"
    argv = [
        "--dry-run",
        "--ledger",
        str(ledger),
        "--prepared_dir",
        str(prepared),
        "--work",
        str(work),
        "--max_items",
        "1",
    ]
    started = time.monotonic()
    assert gpu_window.main([*argv, "--out", str(out)]) == 0
    print(f"dry run: {time.monotonic() - started:.1f} s", file=sys.stderr)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert {p.name for p in files} == {
        "summary.md",
        "results.json",
        "window.log",
        "gpu_ledger.json",
        "bert_pretraining.png",
    }
    assert len(files) <= gpu_window.RESULT_FILES_AT_MOST == 8
    assert all(
        p.stat().st_size < gpu_window.RESULT_FILE_BYTES_UNDER == 16 * 2**20 and NAME.match(p.name) for p in files
    )

    results = json.loads((out / "results.json").read_text())
    assert results["dry_run"] and [item["name"] for item in results["items"]] == ["bert-speedrun"]
    steps = {step["name"]: step for step in results["items"][0]["steps"]}
    assert all(step["status"] == "done" for step in steps.values()), steps
    assert steps["pretrain_bert"]["metrics"]["global_step"] == 3  # the dry scale's --max_steps
    for task, metric in [("sst2", "eval_accuracy"), ("mrpc", "eval_f1"), ("conll", "eval_f1")]:
        assert 0 <= steps[f"{task}_pretrained"]["metrics"][metric] <= 1
    summary = (out / "summary.md").read_text()
    assert "CPU (dry run; no GPU figures)" in summary
    assert re.search(r"\| sst2_pretrained \| done \| \d+ \(45\) \| accuracy 0\.\d{4}, global_step 2 \|", summary)

    returned = json.loads((out / "gpu_ledger.json").read_text())
    item = next(i for i in returned["items"] if i["name"] == "bert-speedrun")
    assert item["state"] == "done" and item["tries"] == 1 and item["device"].startswith("CPU")
    assert gpu_window.plan(returned).startswith("next item: bert-control")

    docs = tmp_path / "docs"
    with pytest.raises(SystemExit, match="dry run's results"):
        gpu_window.record(out, gpu_window.LEDGER, docs)
    gpu_window.record(tmp_path, ledger, docs)  # the folder the files came back in, or one above it
    assert next(i for i in json.loads(ledger.read_text())["items"] if i["name"] == "bert-speedrun")["state"] == "done"
    kept = sorted(path.name for path in (docs / "results").glob("gpu_window_*_bert-speedrun.*"))
    assert [name.rsplit(".", 1)[1] for name in kept] == ["json", "md"]
    assert "bert-speedrun (done)" in next((docs / "results").glob("*.md")).read_text()


def test_the_next_window_measures_a_plain_compile_then_its_dry_run_runs_every_step(prepared, tmp_path):
    """The ledger's next item is checks-compile (a plain torch.compile, no --trace_unpadding or other flag: the
    compiled pretraining and fine-tuning ratios and the gpu compile test; pretraining also with the vocabulary
    padded to 64 rows; fine-tuning also as CUDA graphs, hf_ctx padded); its dry run finishes every step and its
    summary has each BERT run's row, the padded arm's too."""
    assert gpu_window.plan(gpu_window.read_ledger(gpu_window.LEDGER)).startswith("next item: checks-compile")
    steps = gpu_window.item_steps("checks-compile", gpu_window.GPU, gpu_window.PREPARED, Path("work"))
    speed = [step for step in steps if step.args[0] == "benchmarks/bert_speed.py"]
    assert {step.args[step.args.index("--mode") + 1] for step in speed} == {"pretrain", "finetune"}
    assert all("--compile" in step.args and "--trace_unpadding" not in step.args for step in speed)
    pretraining = next(step for step in speed if "pretrain" in step.args)
    assert pretraining.args[pretraining.args.index("--pad_vocab_size_to_multiple_of") + 1] == "64"
    graphs = next(step for step in speed if step.name == "bert_finetune_b32_bucketed_graphs")
    assert "--plain" in graphs.args and graphs.args[graphs.args.index("--compile_mode") + 1] == "reduce-overhead"
    assert steps[0].args[-5:] == ["-m", "gpu", "tests/test_modeling_bert.py", "-k", "compile"]
    ledger = ledger_with(tmp_path, {"checks": "done"})
    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["--dry-run", "--ledger", str(ledger), "--prepared_dir", str(prepared), "--work", str(work)]
    # budgets x3 (a 27-minute window): pytest starting on a loaded 2-core machine can take a minute
    assert gpu_window.main([*argv, "--max_items", "1", "--minutes", "27", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [item["name"] for item in results["items"]] == ["checks-compile"]
    assert [step["status"] for step in results["items"][0]["steps"]] == ["done"] * 4, results["items"][0]["steps"]
    summary = (out / "summary.md").read_text()
    for run in ("pretrain_b128_s128", "finetune_b32_bucketed", "finetune_b32_bucketed_graphs"):
        assert re.search(rf"\| BERT {run}, eager \| [\d,]+ \| [\d,]+ \| \*\*[\d.]+x\*\*", summary), run
    padded = r"\| BERT pretrain_b128_s128, eager, vocabulary padded to 64 \| [\d,]+ \| [\d,]+ \| \*\*[\d.]+x\*\* \("
    assert re.search(padded + r"[\d.]+x unpadded\)", summary)


def test_the_deadline_stops_a_step_and_keeps_what_it_wrote(prepared, tmp_path):
    """A step past its limit has its process group stopped (what it printed is kept in its log); a step that no
    longer fits in the window is skipped; an item cut short is "partial" and is tried once more, then passed."""
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    step = gpu_window.Step("slow", 1.5, "", args=[str(script)])
    started = time.monotonic()
    result = gpu_window.run_step(step, deadline=time.monotonic() + 60, logs=tmp_path)
    assert result["status"] == "cut at its deadline" and time.monotonic() - started < 15
    assert "started" in (tmp_path / "slow.txt").read_text()
    late = gpu_window.run_step(step, deadline=time.monotonic() + 0.5, logs=tmp_path)
    assert late["status"] == "skipped: not enough time left in the window"

    # A window far too short for the item: every step skipped, the item partial, the result files still written.
    ledger = ledger_with(tmp_path, {"checks": "done", "checks-compile": "done"})
    out = tmp_path / "out"
    argv = ["--dry-run", "--ledger", str(ledger), "--prepared_dir", str(prepared), "--work", str(tmp_path / "w")]
    assert gpu_window.main([*argv, "--out", str(out), "--minutes", "0.01"]) == 0
    returned = json.loads((out / "gpu_ledger.json").read_text())
    item = next(i for i in returned["items"] if i["name"] == "bert-speedrun")
    assert item["state"] == "partial" and item["tries"] == 1
    assert "next item: bert-speedrun (partial, tried 1 times)" in gpu_window.plan(returned)
    item["tries"] = gpu_window.MAX_TRIES
    assert gpu_window.plan(returned).startswith("next item: bert-control")


def test_a_window_runs_the_first_item_then_each_later_one_that_still_fits(tmp_path, monkeypatch):
    """With items standing in that take 0.9 s each, in a 3-second window (budgets scale with it: checks 1 s,
    bert-speedrun 2.9 s, bert-control 1.25 s, the others over 2 s): checks runs, bert-speedrun no longer fits and
    waits for a later window, bert-control fits and runs, nothing else fits."""
    ran = []

    def run_item(name, steps, work, deadline, in_process):
        ran.append(name)
        time.sleep(0.9)
        return {"name": name, "state": "done", "steps": []}

    monkeypatch.setattr(gpu_window, "run_item", run_item)
    ledger, out = ledger_with(tmp_path, {}), tmp_path / "out"
    gpu_window.main(
        ["--dry-run", "--minutes", "0.05", "--ledger", str(ledger), "--out", str(out), "--work", str(tmp_path / "w")]
    )
    assert ran == ["checks", "bert-control"]
    states = {i["name"]: i["state"] for i in json.loads((out / "gpu_ledger.json").read_text())["items"]}
    assert states == {**dict.fromkeys(gpu_window.ITEMS, "pending"), "checks": "done", "bert-control": "done"}


GPU_MARK = re.compile(r"^\s*@pytest\.mark\.gpu\b", re.MULTILINE)


def test_gpu_tests_step_names_every_file_with_gpu_tests():
    """The window collects only the files it names: a new file of gpu-marked tests must be added there."""
    tests = Path(__file__).parent
    marked = {f"tests/{p.name}" for p in tests.glob("test_*.py") if GPU_MARK.search(p.read_text(encoding="utf-8"))}
    assert set(gpu_window.GPU["gpu_tests"].split()) == marked


def test_untracked_files_that_travel_are_named_when_the_carried_size_is_over(monkeypatch):
    """Untracked files that git does not ignore travel with the repository: the over-the-limit message names the
    largest (a README snippet's model folder in the root once made a fresh clone's 51 MiB into 72)."""
    sizes = {"my-bert/model.safetensors": 21 * 2**20, "corpus.txt": 10, "a.png": 2**20, "b.png": 100}
    monkeypatch.setattr(gpu_window_data, "file_sizes", lambda *which: sizes)
    note = gpu_window_data.untracked_note()
    assert note.startswith("; 22.0 MiB of the repository is untracked files that git does not ignore (4)")
    assert "(largest: my-bert/model.safetensors, a.png, b.png)" in note and note.endswith("move them under runs/")
    monkeypatch.setattr(gpu_window_data, "file_sizes", lambda *which: {})
    assert gpu_window_data.untracked_note() == ""


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--minutes", "-1", "--minutes: must be a number above 0, got '-1'"),
        ("--minutes", "nan", "--minutes: must be a number above 0, got 'nan'"),
        ("--max_items", "0", "--max_items: must be a whole number above 0, got '0'"),
    ],
)
def test_a_window_of_no_minutes_or_items_is_refused_naming_the_option(option, value, message, tmp_path, capsys):
    """Before: `--minutes -1` or `--max_items 0` ran an empty window that said only that no item fitted."""
    with pytest.raises(SystemExit) as stopped:
        gpu_window.main(["--dry-run", "--out", str(tmp_path / "out"), option, value])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
