"""examples/run_glue.py end to end: a tiny random BERT on tiny GLUE-layout files written here.

Checks that a learnable task is learned (so labels are read from the right column), that the reported metrics
equal those recomputed from the saved model, and that the prediction files are in GLUE's submission format
and agree with the saved model.
"""

import json
import random
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import ModelCard
from tiny_checkpoints import QUICK_RUN, new_bert_arguments

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
pytest.importorskip("evaluate")
import run_glue
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from hf_ctx import CtxBertConfig, CtxBertForPreTraining, CtxBertForSequenceClassification, train_wordpiece_tokenizer
from hf_ctx.data.glue import load_glue
from hf_ctx.data.glue_tasks import GLUE_TASKS
from hf_ctx.metrics import load_metric

RUN_GLUE = Path(__file__).resolve().parents[1] / "examples" / "run_glue.py"
WORDS = "the a cat dog bird man woman park house river tree sat ran saw ate big small red old new".split()
MNLI_HEADER = [
    "index",
    "promptID",
    "pairID",
    "genre",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
]


def sentence(rng, extra=()):
    words = rng.sample(WORDS, rng.randint(3, 7)) + list(extra)
    rng.shuffle(words)
    return " ".join(words)


def write_lines(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in rows), encoding="utf-8")


def write_cola(folder: Path, rng):
    """Acceptable iff the sentence holds "good". The third column (the original mark) says the opposite, so
    a model reading the wrong column learns the wrong thing."""

    def rows(n):
        for _ in range(n):
            label = rng.randint(0, 1)
            yield ["src", label, "" if label == 0 else "*", sentence(rng, ["good"] if label else ["bad"])]

    write_lines(folder / "train.tsv", rows(192))
    write_lines(folder / "dev.tsv", rows(48))
    write_lines(folder / "test.tsv", [["index", "sentence"], *([i, sentence(rng)] for i in range(10))])


def write_mnli(folder: Path, rng):
    labels = ["entailment", "neutral", "contradiction"]

    def rows(n, dev):
        yield (
            MNLI_HEADER + (["label1", "label2", "label3", "label4", "label5"] if dev else ["label1"]) + ["gold_label"]
        )
        for i in range(n):
            label = rng.choice(labels)
            yield [
                i,
                0,
                0,
                "fiction",
                "-",
                "-",
                "-",
                "-",
                sentence(rng),
                sentence(rng, [label[:4]]),
                *(["neutral"] * (5 if dev else 1)),
                label,
            ]

    write_lines(folder / "train.tsv", rows(32, dev=False))
    write_lines(folder / "dev_matched.tsv", rows(12, dev=True))
    write_lines(folder / "dev_mismatched.tsv", rows(9, dev=True))
    for name, n in (("test_matched.tsv", 7), ("test_mismatched.tsv", 5)):
        write_lines(
            folder / name,
            [MNLI_HEADER, *([i, 0, 0, "g", "-", "-", "-", "-", sentence(rng), sentence(rng)] for i in range(n))],
        )


def write_stsb(folder: Path, rng):
    header = "index genre filename year old_index source1 source2 sentence1 sentence2".split()

    def rows(n, score=True):
        yield header + (["score"] if score else [])
        for i in range(n):
            yield [i, "main", "f", "2012", i, "s", "s", sentence(rng), sentence(rng)] + (
                [f"{rng.uniform(0, 5):.3f}"] if score else []
            )

    write_lines(folder / "train.tsv", rows(32))
    write_lines(folder / "dev.tsv", rows(16))
    write_lines(folder / "test.tsv", rows(6, score=False))


def write_mrpc(folder: Path, rng):
    def rows(n, test=False):
        yield ["index" if test else "Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
        for i in range(n):
            # Bare quotes, as in the real files.
            yield [i if test else rng.randint(0, 1), 1, 2, f'"{sentence(rng)}', f'{sentence(rng)} 5"']

    write_lines(folder / "train.tsv", rows(32))
    write_lines(folder / "dev.tsv", rows(16))
    write_lines(folder / "test.tsv", rows(4, test=True))


def write_qqp(folder: Path, rng):
    """QQP's layout: `id qid1 qid2 question1 question2 is_duplicate`; the test file `id question1 question2`,
    with ids that are not row numbers (a submission is keyed by them)."""

    def rows(n):
        yield ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
        for i in range(n):
            yield [1000 + i, 2 * i, 2 * i + 1, f'{sentence(rng)} 5"?', f"{sentence(rng)}?", rng.randint(0, 1)]

    write_lines(folder / "train.tsv", rows(32))
    write_lines(folder / "dev.tsv", rows(16))
    write_lines(folder / "test.tsv", [["id", "question1", "question2"], *([50 + 3 * i, "a?", "b?"] for i in range(5))])


def write_qnli(folder: Path, rng):
    """QNLI's layout: `index question sentence label`, labels written as words."""

    def rows(n, test=False):
        yield ["index", "question", "sentence"] + ([] if test else ["label"])
        for i in range(n):
            label = [] if test else [rng.choice(["entailment", "not_entailment"])]
            yield [i, f"{sentence(rng)}?", sentence(rng)] + label

    write_lines(folder / "train.tsv", rows(32))
    write_lines(folder / "dev.tsv", rows(16))
    write_lines(folder / "test.tsv", rows(4, test=True))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    rng = random.Random(0)
    writers = [("CoLA", write_cola), ("MNLI", write_mnli), ("STS-B", write_stsb), ("MRPC", write_mrpc)]
    for folder, write in writers + [("QQP", write_qqp), ("QNLI", write_qnli)]:
        write(root / "glue_data" / folder, rng)
    corpus = root / "corpus.txt"
    corpus.write_text(
        "\n".join(" ".join(WORDS[i:] + WORDS[:i] + ["good", "bad", "enta", "neut", "cont"]) for i in range(len(WORDS)))
        * 5
    )
    tokenizer = train_wordpiece_tokenizer([corpus], vocab_size=120, min_frequency=1)
    tokenizer.save_pretrained(root / "tokenizer")
    config = CtxBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    config.save_pretrained(root / "config")
    return root, run_glue


def elmo_on_cola(pretrained) -> list[str]:
    """run_glue's arguments for 10 epochs of CoLA from the ELMo checkpoint `pretrained` at learning rate 1e-2."""
    return ["--model_name_or_path", str(pretrained), "--do_train", "--do_eval", "--num_train_epochs", "10"] + [
        "--learning_rate",
        "1e-2",
        "--max_seq_length",
        "12",
    ]


def fine_tune_on_mrpc(setup, output_dir, pretrained, steps: int, learning_rate: float, *extra) -> dict:
    """`steps` steps of MRPC from the checkpoint `pretrained`, then its evaluation."""
    arguments = ["--model_name_or_path", str(pretrained), "--do_train", "--do_eval", "--max_steps", str(steps)]
    return run(setup, "mrpc", "MRPC", output_dir, *arguments, "--learning_rate", str(learning_rate), *extra)


def run(setup, task, folder, output_dir, *extra):
    root, run_glue = setup
    args = [
        "--task_name",
        task,
        "--data_dir",
        str(root / "glue_data" / folder),
        "--output_dir",
        str(output_dir),
        "--max_seq_length",
        "32",
        *QUICK_RUN,
        "--dataloader_pin_memory",
        "false",
        "--seed",
        "0",
        *extra,
    ]
    if "--model_name_or_path" not in extra and "--model_type" not in extra:
        args += new_bert_arguments(root)
    return run_glue.main(args)


def saved_model_outputs(output_dir, texts: list[tuple[str, ...]]) -> np.ndarray:
    """Logits of the saved model, example by example (no padding), for an independent check."""
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    model = AutoModelForSequenceClassification.from_pretrained(output_dir).eval()
    with torch.no_grad():
        return np.stack(
            [
                model(**tokenizer(*text, truncation=True, max_length=32, return_tensors="pt")).logits[0].numpy()
                for text in texts
            ]
        )


def read_submission(path: Path) -> tuple[list[int], list[str]]:
    lines = path.read_text().splitlines()
    assert lines[0] == "index\tprediction"
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(row) == 2 for row in rows)
    return [int(index) for index, _ in rows], [prediction for _, prediction in rows]


@pytest.mark.slow
def test_cola_is_learned_from_the_label_column_and_predicted(setup, tmp_path):
    metrics = run(
        setup,
        "cola",
        "CoLA",
        tmp_path,
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--num_train_epochs",
        "8",
        "--learning_rate",
        "3e-3",
        "--warmup_steps",
        "5",
    )
    assert metrics["eval_matthews_correlation"] > 0.8
    assert json.loads((tmp_path / "eval_results.json").read_text())["eval_matthews_correlation"] == pytest.approx(
        metrics["eval_matthews_correlation"]
    )
    dev = load_glue("cola", setup[0] / "glue_data")["validation"]
    predictions = saved_model_outputs(tmp_path, [(s,) for s in dev["sentence"]]).argmax(-1)
    recomputed = load_metric("glue", "cola").compute(predictions=predictions, references=dev["label"])
    assert recomputed["matthews_correlation"] == pytest.approx(metrics["eval_matthews_correlation"], abs=1e-6)

    indices, labels = read_submission(tmp_path / "CoLA.tsv")
    test = load_glue("cola", setup[0] / "glue_data")["test"]
    assert indices == list(range(10))
    expected = saved_model_outputs(tmp_path, [(s,) for s in test["sentence"]]).argmax(-1)
    assert labels == [str(label) for label in expected]
    assert AutoModelForSequenceClassification.from_pretrained(tmp_path).config.id2label == {
        0: "unacceptable",
        1: "acceptable",
    }
    assert (tmp_path / "README.md").read_text().count("GLUE CoLA") >= 1


@pytest.mark.slow
def test_mnli_reports_both_dev_sets_and_writes_both_test_files(setup, tmp_path):
    metrics = run(setup, "mnli", "MNLI", tmp_path, "--do_train", "--do_eval", "--do_predict", "--max_steps", "3")
    glue = load_glue("mnli", setup[0] / "glue_data")
    for name in ("matched", "mismatched"):
        dev = glue[f"validation_{name}"]
        predictions = saved_model_outputs(tmp_path, list(zip(dev["premise"], dev["hypothesis"]))).argmax(-1)
        assert metrics[f"eval_{name}_accuracy"] == pytest.approx(float((predictions == np.array(dev["label"])).mean()))
    for split, file in (("test_matched", "MNLI-m.tsv"), ("test_mismatched", "MNLI-mm.tsv")):
        test = glue[split]
        indices, labels = read_submission(tmp_path / file)
        assert indices == test["idx"] and len(indices) == {"test_matched": 7, "test_mismatched": 5}[split]
        expected = saved_model_outputs(tmp_path, list(zip(test["premise"], test["hypothesis"]))).argmax(-1)
        assert labels == [["entailment", "neutral", "contradiction"][i] for i in expected]


def test_stsb_regression_metrics_and_scores(setup, tmp_path):
    metrics = run(setup, "stsb", "STS-B", tmp_path, "--do_train", "--do_eval", "--do_predict", "--max_steps", "3")
    glue = load_glue("stsb", setup[0] / "glue_data")
    dev = glue["validation"]
    scores = saved_model_outputs(tmp_path, list(zip(dev["sentence1"], dev["sentence2"])))[:, 0]
    recomputed = load_metric("glue", "stsb").compute(predictions=scores, references=dev["label"])
    assert metrics["eval_pearson"] == pytest.approx(recomputed["pearson"], abs=1e-4)
    assert metrics["eval_spearmanr"] == pytest.approx(recomputed["spearmanr"], abs=1e-4)
    indices, predictions = read_submission(tmp_path / "STS-B.tsv")
    test = glue["test"]
    assert indices == list(range(6))
    expected = saved_model_outputs(tmp_path, list(zip(test["sentence1"], test["sentence2"])))[:, 0]
    assert [float(p) for p in predictions] == pytest.approx(expected.tolist(), abs=1e-3)
    assert all(len(p.split(".")[1]) == 3 for p in predictions)


def test_the_card_of_a_run_on_local_files_from_random_weights_says_so(setup, tmp_path):
    """GLUE from local TSV files, a new BERT, the first 20 of 48 dev examples, 2 steps of 16: trained on
    train.tsv, evaluated on dev.tsv, and every sentence says which."""
    run(setup, "cola", "CoLA", tmp_path, "--do_train", "--do_eval", "--max_steps", "2", "--max_eval_samples", "20")
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.datasets is None and "nyu-mll/glue" not in card.text  # nothing came from the Hub
    assert "| Trained on | GLUE CoLA (the local file train.tsv) (`cola`) |" in card.text
    assert "| Starting point | random initialisation (no pretrained weights) |" in card.text
    assert "Training examples: all 192; 2 steps of 16 examples saw 32 examples (0.167 passes over them)." in card.text
    assert "Evaluation examples: the first 20 of 48." in card.text
    assert "Evaluated only on GLUE CoLA dev.tsv;" in card.text and "Measured on GLUE CoLA dev.tsv by" in card.text
    assert {r.dataset_name for r in card.data.eval_results} == {"GLUE CoLA dev.tsv"}


@pytest.mark.parametrize("task, folder", [("qqp", "QQP"), ("qnli", "QNLI")])
def test_qqp_and_qnli_report_the_saved_models_metrics_and_submit_by_index(setup, tmp_path, task, folder):
    metrics = run(setup, task, folder, tmp_path, "--do_train", "--do_eval", "--do_predict", "--max_steps", "3")
    record = GLUE_TASKS[task]
    glue = load_glue(task, setup[0] / "glue_data")
    dev = glue["validation"]
    predictions = saved_model_outputs(tmp_path, list(zip(*(dev[c] for c in record.text_columns)))).argmax(-1)
    references = np.array(dev["label"])
    assert metrics["eval_accuracy"] == pytest.approx(float((predictions == references).mean()))
    if task == "qqp":  # F1 of "duplicate", by hand
        tp = int(((predictions == 1) & (references == 1)).sum())
        wrong = int((predictions != references).sum())
        assert metrics["eval_f1"] == pytest.approx(2 * tp / (2 * tp + wrong))
        assert metrics["eval_combined_score"] == pytest.approx((metrics["eval_accuracy"] + metrics["eval_f1"]) / 2)
    else:
        assert "eval_f1" not in metrics
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.id2label == dict(enumerate(record.label_names))
    indices, labels = read_submission(tmp_path / f"{folder}.tsv")
    test = glue["test"]
    assert indices == test["idx"] == ([50, 53, 56, 59, 62] if task == "qqp" else [0, 1, 2, 3])
    expected = saved_model_outputs(tmp_path, list(zip(*(test[c] for c in record.text_columns)))).argmax(-1)
    assert labels == [record.label_values[i] for i in expected]


def test_mrpc_from_a_pretrained_checkpoint_keeps_its_encoder(setup, tmp_path):
    root, _ = setup
    pretrained = CtxBertForPreTraining(CtxBertConfig.from_pretrained(root / "config", unpad_inputs=False))
    pretrained.save_pretrained(tmp_path / "pretrained")
    AutoTokenizer.from_pretrained(root / "tokenizer").save_pretrained(tmp_path / "pretrained")
    out = tmp_path / "out"
    overrides = ["--config_overrides", "unpad_inputs=true"]  # over the checkpoint's own setting
    # One step at learning rate 0, the first of a warm-up (--learning_rate 0 is refused as training nothing)
    metrics = fine_tune_on_mrpc(setup, out, tmp_path / "pretrained", 1, 1e-3, "--warmup_steps", "1", *overrides)
    assert AutoConfig.from_pretrained(out).unpad_inputs is True
    assert metrics["eval_combined_score"] == pytest.approx((metrics["eval_accuracy"] + metrics["eval_f1"]) / 2)
    before, after = load_file(tmp_path / "pretrained" / "model.safetensors"), load_file(out / "model.safetensors")
    encoder = [name for name in before if name.startswith("bert.")]
    assert len(encoder) > 10 and all(torch.equal(before[name], after[name]) for name in encoder)
    assert after["classifier.weight"].shape == (2, 32)


def test_bad_arguments(setup, tmp_path):
    write_lines(
        setup[0] / "glue_data" / "RTE" / "dev.tsv",
        [["index", "sentence1", "sentence2", "label"], [0, "a", "b", "entailment"]],
    )
    with pytest.raises(ValueError, match=r"has no \['test'\] split \(files \['test.tsv'\]\)"):
        run(setup, "rte", "RTE", tmp_path, "--do_predict")
    with pytest.raises(ValueError, match=r"MRPC/train.tsv:1: no column\(s\) \['sentence1'"):
        run(setup, "rte", "MRPC", tmp_path, "--do_eval")
    with pytest.raises(ValueError, match=r"--task_name must be one of \[.*\], got 'squad'"):
        run(setup, "squad", "MRPC", tmp_path, "--do_eval")


def elmo_checkpoint(folder: Path, **config) -> Path:
    """A tiny pretrained-ELMo folder (random biLM weights) with its tokenizer."""
    from tiny_checkpoints import elmo_bilm

    torch.manual_seed(0)
    model, tokenizer = elmo_bilm(folder)
    model.config.update(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_elmo_learns_cola_and_reports_the_saved_models_metric(setup, tmp_path):
    from hf_ctx.data.words import split_words

    # Fine-tuned (freeze_bilm=False), the random biLM learns the task with it.
    pretrained = elmo_checkpoint(tmp_path / "elmo", freeze_bilm=False)
    out = tmp_path / "out"
    metrics = run(setup, "cola", "CoLA", out, *elmo_on_cola(pretrained))
    assert metrics["eval_matthews_correlation"] > 0.8
    # The reported metric is the saved model's, sentence by sentence and without padding.
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    dev = load_glue("cola", setup[0] / "glue_data")["validation"]
    with torch.no_grad():
        predictions = [
            model(**tokenizer([split_words(s)[:12]], is_split_into_words=True, return_tensors="pt"))
            .logits[0]
            .argmax()
            .item()
            for s in dev["sentence"]
        ]
    recomputed = load_metric("glue", "cola").compute(predictions=predictions, references=dev["label"])
    assert recomputed["matthews_correlation"] == pytest.approx(metrics["eval_matthews_correlation"], abs=1e-6)
    assert "ELMo" in (out / "README.md").read_text()


def test_elmo_reads_sentence_pairs_with_its_biLM_frozen(setup, tmp_path):
    pretrained = elmo_checkpoint(tmp_path / "elmo")
    out = tmp_path / "out"
    metrics = fine_tune_on_mrpc(setup, out, pretrained, steps=3, learning_rate=1e-2)
    assert metrics["eval_combined_score"] == pytest.approx((metrics["eval_accuracy"] + metrics["eval_f1"]) / 2)
    assert list((tmp_path / "bilm_cache").glob("*/states-*.safetensors"))  # the frozen biLM's states, by default
    before, after = load_file(pretrained / "model.safetensors"), load_file(out / "model.safetensors")
    bilm = [name for name in before if name.startswith("elmo.")]
    assert len(bilm) > 10 and all(torch.equal(before[name], after[name]) for name in bilm)
    initial = AutoModelForSequenceClassification.from_pretrained(pretrained, num_labels=2)
    assert not torch.equal(after["classifier.weight"], initial.classifier.weight)  # the task layers trained


def test_elmo_from_random_weights_and_its_tokenizer_check(setup, tmp_path):
    from tiny_checkpoints import elmo_bilm

    root, _ = setup
    config = tmp_path / "elmo_config"
    elmo_bilm(None)[0].config.save_pretrained(config)
    metrics = run(
        setup,
        "mrpc",
        "MRPC",
        tmp_path / "out",
        "--model_type",
        "elmo",
        "--config_name",
        str(config),
        "--do_train",
        "--do_eval",
        "--max_steps",
        "1",
    )
    assert "eval_accuracy" in metrics
    assert AutoModelForSequenceClassification.from_pretrained(tmp_path / "out").config.model_type == "hf_ctx_elmo"
    with pytest.raises(ValueError, match="ELMo model reads ElmoTokenizer"):
        run(
            setup,
            "mrpc",
            "MRPC",
            tmp_path / "bad",
            "--model_type",
            "elmo",
            "--config_name",
            str(config),
            "--tokenizer_name",
            str(root / "tokenizer"),
            "--do_eval",
        )


@pytest.mark.slow
def test_elmo_with_task_word_vectors_learns_with_its_biLM_frozen(setup, tmp_path):
    """The paper's recipe: ELMo beside the task's own (trainable) word vectors, which learn the task; the biLM stays
    as it was."""
    from tiny_checkpoints import _elmo_config

    from hf_ctx import ElmoForBiLM, ElmoTokenizer

    torch.manual_seed(0)
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *WORDS, "good", "bad"])
    pretrained = tmp_path / "elmo"
    ElmoForBiLM(_elmo_config(tokenizer)).save_pretrained(pretrained)
    tokenizer.save_pretrained(pretrained)
    out = tmp_path / "out"
    metrics = run(
        setup, "cola", "CoLA", out, *elmo_on_cola(pretrained), "--config_overrides", "task_word_embedding_size=8"
    )
    assert metrics["eval_matthews_correlation"] > 0.8
    before, after = load_file(pretrained / "model.safetensors"), load_file(out / "model.safetensors")
    assert after["word_embeddings.weight"].shape == (len(tokenizer.get_vocab()), 8)
    bilm = [name for name in before if name.startswith("elmo.")]
    assert len(bilm) > 10 and all(torch.equal(before[name], after[name]) for name in bilm)


def test_a_checkpoint_without_tokenizer_files_or_a_missing_path_is_refused(setup, tmp_path):
    """transformers 5 gives a 5-token BertTokenizer for a folder without tokenizer files: fine-tuning would read
    every word as [UNK] and exit 0. The error names the files; a missing folder is said to be missing."""
    root, _ = setup
    CtxBertForSequenceClassification(CtxBertConfig.from_pretrained(root / "config")).save_pretrained(tmp_path / "bare")
    with pytest.raises(ValueError, match=r"no vocabulary, only its 5 special tokens.*tokenizer\.json, vocab\.txt"):
        run(setup, "cola", "CoLA", tmp_path / "out", "--model_name_or_path", str(tmp_path / "bare"), "--do_eval")
    with pytest.raises(FileNotFoundError, match=r"^no folder '.*/no/such/folder', given for --model_name_or_path$"):
        run(
            setup,
            "cola",
            "CoLA",
            tmp_path / "out",
            "--model_name_or_path",
            str(tmp_path / "no/such/folder"),
            "--tokenizer_name",
            str(root / "tokenizer"),
            "--do_eval",
        )


def test_config_overrides_are_checked(setup, tmp_path):
    """--config_overrides reach the config through from_pretrained(path, **overrides): checked there too."""
    with pytest.raises(ValueError, match=r"hidden_dropout_prob must be in \[0, 1\), got 1.5"):
        run(setup, "cola", "CoLA", tmp_path, "--config_overrides", "hidden_dropout_prob=1.5", "--do_eval")
    with pytest.raises(ValueError, match=r"hidden_size \(32\) must be divisible by num_attention_heads \(3\)"):
        run(setup, "cola", "CoLA", tmp_path, "--config_overrides", "num_attention_heads=3", "--do_eval")


def test_arguments_that_would_be_ignored_or_meaningless_are_refused(setup, tmp_path):
    root, _ = setup
    with pytest.raises(ValueError, match="--max_seq_length must be a positive integer, got 0"):
        run(setup, "cola", "CoLA", tmp_path, "--max_seq_length", "0", "--do_eval")
    # --model_name_or_path brings its own config: --config_name was silently unused.
    with pytest.raises(ValueError, match="--model_name_or_path and --config_name cannot be used together"):
        run(
            setup,
            "cola",
            "CoLA",
            tmp_path,
            "--model_name_or_path",
            str(root / "config"),
            "--config_name",
            str(root / "config"),
            "--do_eval",
        )


def test_a_checkpoint_of_an_unknown_model_type_is_named_not_a_remote_code_prompt(tmp_path):
    """transformers asked "run the custom code? [y/N]" for a saved config with an unknown model_type."""
    folder = tmp_path / "future-model"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "hf_ctx_future", "auto_map": {"AutoConfig": "configuration_future.FutureConfig"}})
    )
    args = [
        "--model_name_or_path",
        str(folder),
        "--task_name",
        "rte",
        "--do_train",
        "--output_dir",
        str(tmp_path / "o"),
    ]
    with pytest.raises(ValueError, match=r"config.json has model_type 'hf_ctx_future', which neither hf_ctx"):
        run_glue.main(args)


# --- your own files (--train_file / --validation_file / --test_file) ----------------------------------------


def run_files(setup, output_dir, files: dict[str, Path], *extra):
    root, run_glue = setup
    args = [f"--{split}_file={path}" for split, path in files.items()]
    args += ["--output_dir", str(output_dir), "--max_seq_length", "32", "--save_strategy", "no"]
    args += ["--report_to", "none", "--seed", "0", "--per_device_train_batch_size", "16", *extra]
    if "--model_name_or_path" not in extra:
        args += new_bert_arguments(root)
    return run_glue.main(args)


def write_reviews(folder: Path, rng) -> dict[str, Path]:
    """A CSV classification task: "pos" iff the review holds "good"; an id column before the text, and a test
    file without labels."""
    folder.mkdir(parents=True, exist_ok=True)

    def rows(n, labelled=True):
        for i in range(n):
            label = rng.choice(["neg", "pos"])
            text = sentence(rng, ["good"] if label == "pos" else ["bad"])
            yield [i, text, label] if labelled else [i, text]

    files = {}
    for split, n in (("train", 160), ("validation", 40), ("test", 12)):
        labelled = split != "test"
        header = ["id", "review", "label"] if labelled else ["id", "review"]
        files[split] = folder / f"{split}.csv"
        files[split].write_text("\n".join(",".join(map(str, r)) for r in [header, *rows(n, labelled)]) + "\n")
    return files


def read_rows(path: Path) -> list[dict]:
    import csv

    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_your_own_csv_is_learned_and_predict_results_are_the_saved_models(setup, tmp_path):
    files = write_reviews(tmp_path / "data", random.Random(1))
    out = tmp_path / "out"
    metrics = run_files(
        setup, out, files, "--do_train", "--do_eval", "--do_predict", "--num_train_epochs", "6",
        "--learning_rate", "3e-3", "--warmup_steps", "5",
    )  # fmt: skip
    dev = read_rows(files["validation"])
    logits = saved_model_outputs(out, [(row["review"],) for row in dev])
    accuracy = float(np.mean([["neg", "pos"][i] == row["label"] for i, row in zip(logits.argmax(-1), dev)]))
    assert metrics["eval_accuracy"] == pytest.approx(accuracy) and accuracy > 0.9
    assert AutoConfig.from_pretrained(out).id2label == {0: "neg", 1: "pos"}
    indices, predictions = read_submission(out / "predict_results.txt")
    test = read_rows(files["test"])
    assert indices == list(range(12))
    assert predictions == [
        ["neg", "pos"][i] for i in saved_model_outputs(out, [(r["review"],) for r in test]).argmax(-1)
    ]
    # Predicting again from the fine-tuned model alone: its labels, no training file.
    again = tmp_path / "again"
    run_files(setup, again, {"test": files["test"]}, "--do_predict", "--model_name_or_path", str(out))
    assert read_submission(again / "predict_results.txt")[1] == predictions


def test_your_own_json_lines_with_float_labels_are_a_regression(setup, tmp_path):
    rng = random.Random(2)
    files = {}
    for split, n in (("train", 24), ("validation", 8), ("test", 5)):
        files[split] = tmp_path / f"{split}.jsonl"
        rows = [{"sentence1": sentence(rng), "sentence2": sentence(rng), "label": rng.uniform(0, 5)} for _ in range(n)]
        files[split].write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    metrics = run_files(setup, out, files, "--do_train", "--do_eval", "--do_predict", "--max_steps", "3")
    dev = [json.loads(line) for line in files["validation"].read_text().splitlines()]
    scores = saved_model_outputs(out, [(r["sentence1"], r["sentence2"]) for r in dev])[:, 0]
    gold = np.array([r["label"] for r in dev])
    assert metrics["eval_mse"] == pytest.approx(float(((scores - gold) ** 2).mean()), rel=1e-4)
    assert AutoConfig.from_pretrained(out).problem_type == "regression"
    test = [json.loads(line) for line in files["test"].read_text().splitlines()]
    expected = saved_model_outputs(out, [(r["sentence1"], r["sentence2"]) for r in test])[:, 0]
    assert [float(p) for p in read_submission(out / "predict_results.txt")[1]] == pytest.approx(expected, abs=1e-3)


def test_your_own_files_bad_input_and_arguments(setup, tmp_path):
    files = write_reviews(tmp_path / "data", random.Random(3))
    dev = tmp_path / "dev.csv"
    dev.write_text("id,review,label\n0,a good one,pos\n1,so so,meh\n")
    with pytest.raises(ValueError, match=r"dev.csv:3: the label 'meh' in column 'label' is not one of the training"):
        run_files(setup, tmp_path / "o", {"train": files["train"], "validation": dev}, "--do_eval")
    with pytest.raises(ValueError, match=r"--do_eval needs --validation_file"):
        run_files(setup, tmp_path / "o", {"train": files["train"]}, "--do_eval")
    with pytest.raises(ValueError, match="give --task_name"):
        run_files(setup, tmp_path / "o", {}, "--do_eval")
    with pytest.raises(ValueError, match=r"train.csv:1: no column\(s\) \['stars'\]"):
        run_files(setup, tmp_path / "o", {"train": files["train"]}, "--do_train", "--label_column_name", "stars")
    with pytest.raises(ValueError, match=r"config is not fine-tuned for classification .* give --train_file"):
        run_files(
            setup,
            tmp_path / "o",
            {"test": files["test"]},
            "--do_predict",
            "--model_name_or_path",
            str(setup[0] / "config"),
        )
    with pytest.raises(ValueError, match="--task_name.*--train_file|--train_file.*--task_name"):
        run_files(setup, tmp_path / "o", {"train": files["train"]}, "--do_train", "--task_name", "sst2")


def test_elmo_on_your_own_tsv_predicts_the_saved_models_labels(setup, tmp_path):
    from hf_ctx.data.words import split_words

    rng = random.Random(4)
    files = {}
    for split, n in (("train", 24), ("test", 6)):
        files[split] = tmp_path / f"{split}.tsv"
        rows = [[sentence(rng), rng.choice(["neg", "pos", "mixed"])] for _ in range(n)]
        files[split].write_text("text\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows))
    out = tmp_path / "out"
    run_files(
        setup, out, files, "--model_name_or_path", str(elmo_checkpoint(tmp_path / "elmo")), "--do_train",
        "--do_predict", "--max_steps", "2", "--bilm_cache", "memory",
    )  # fmt: skip
    labels = ["mixed", "neg", "pos"]
    assert AutoConfig.from_pretrained(out).id2label == dict(enumerate(labels))
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    texts = [line.split("\t")[0] for line in files["test"].read_text().splitlines()[1:]]
    with torch.no_grad():
        expected = [
            labels[
                model(**tokenizer([split_words(t)], is_split_into_words=True, return_tensors="pt")).logits[0].argmax()
            ]
            for t in texts
        ]
    assert read_submission(out / "predict_results.txt") == (list(range(6)), expected)


def test_a_finished_model_is_never_replaced_by_accident_and_its_card_names_the_users_files(setup, tmp_path):
    """A second run into a folder holding a trained model is refused, naming the ways on; --overwrite_output_dir
    replaces it and leaves none of the earlier run's results behind. The card names the user's files, never the
    Hub's GLUE that the run did not read."""
    files = write_reviews(tmp_path / "data", random.Random(5))
    out = tmp_path / "out"
    run_files(setup, out, files, "--do_train", "--do_eval", "--do_predict", "--max_steps", "4")
    (out / "notes.txt").write_text("the user's own file\n")
    weights = (out / "model.safetensors").read_bytes()
    refusal = (
        rf"^--output_dir {out} holds a trained model \(model.safetensors, README.md\); pass --overwrite_output_dir "
        r"to replace it, --resume_from_checkpoint to continue from a checkpoint \(it has none\), or give another "
        r"--output_dir$"
    )
    with pytest.raises(ValueError, match=refusal):
        run_files(setup, out, {"train": files["train"]}, "--do_train", "--max_steps", "2")
    assert (out / "model.safetensors").read_bytes() == weights and (out / "predict_results.txt").exists()

    run_files(setup, out, {"train": files["train"]}, "--do_train", "--max_steps", "2", "--overwrite_output_dir")
    assert (out / "model.safetensors").read_bytes() != weights
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    # The first run's evaluation and predictions are gone, not presented as the second run's; the user's file stays.
    assert not (out / "predict_results.txt").exists() and not (out / "eval_results.json").exists()
    assert not any(key.startswith(("eval_", "predict_")) for key in json.loads((out / "all_results.json").read_text()))
    assert (out / "notes.txt").read_text() == "the user's own file\n"
    card = ModelCard.load(out / "README.md")
    assert card.data.datasets is None and "nyu-mll" not in str(card) and "glue" not in str(card).lower()
    assert "the local file train.csv" in card.text


def test_a_two_label_checkpoint_fine_tunes_on_three_labels_with_ignore_mismatched_sizes(setup, tmp_path):
    """A 2-label (SST-2-style) classifier fine-tuned on a 3-label task: refused naming the flag, then, with
    --ignore_mismatched_sizes, every weight but the classifier's kept from the checkpoint."""
    files = write_reviews(tmp_path / "data", random.Random(5))
    two_labels = tmp_path / "two_labels"
    run_files(setup, two_labels, {"train": files["train"]}, "--do_train", "--max_steps", "1")
    assert AutoConfig.from_pretrained(two_labels).num_labels == 2
    three = tmp_path / "three.csv"
    rng = random.Random(6)
    three.write_text("text,label\n" + "".join(f"{sentence(rng)},{rng.choice('abc')}\n" for _ in range(24)))
    checkpoint = ["--model_name_or_path", str(two_labels), "--do_train", "--max_steps", "1"]
    with pytest.raises(
        ValueError, match=r"your arguments describe \(num_labels=3\).*--ignore_mismatched_sizes"
    ) as error:
        run_files(setup, tmp_path / "refused", {"train": three}, *checkpoint)
    assert isinstance(error.value, RuntimeError)  # as transformers raises it
    # One step at learning rate 0 (the first of a warm-up): the saved model holds what was loaded.
    warm_up = ["--learning_rate", "1e-3", "--warmup_steps", "1"]
    run_files(setup, tmp_path / "three", {"train": three}, *checkpoint, "--ignore_mismatched_sizes", *warm_up)
    before, after = load_file(two_labels / "model.safetensors"), load_file(tmp_path / "three" / "model.safetensors")
    assert AutoConfig.from_pretrained(tmp_path / "three").id2label == {0: "a", 1: "b", 2: "c"}
    assert after["classifier.weight"].shape[0] == 3 and before["classifier.weight"].shape[0] == 2
    assert all(torch.equal(after[name], before[name]) for name in before if not name.startswith("classifier."))
    with pytest.raises(ValueError, match="--ignore_mismatched_sizes needs --model_name_or_path"):
        run_files(setup, tmp_path / "new", {"train": three}, "--do_train", "--ignore_mismatched_sizes")


def test_a_failure_while_evaluating_keeps_the_trained_model_and_says_so(setup, tmp_path, monkeypatch):
    """The trained model is saved before `--do_eval` evaluates it: an error there (a bug, memory) loses nothing."""
    files = write_reviews(tmp_path / "data", random.Random(7))

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory while evaluating")

    monkeypatch.setattr(run_glue.CtxTrainer, "evaluate", broken)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="out of memory") as error:
        run_files(setup, out, {"train": files["train"], "validation": files["validation"]}, "--do_train", "--do_eval")
    assert error.value.__notes__ == [f"the trained model is saved in {out}; predict with --model_name_or_path {out}"]
    assert AutoConfig.from_pretrained(out).id2label == {0: "neg", 1: "pos"} and (out / "model.safetensors").exists()


def test_a_failure_while_predicting_keeps_the_trained_model_and_says_so(setup, tmp_path, monkeypatch):
    files = write_reviews(tmp_path / "data", random.Random(7))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug while writing the predictions")

    monkeypatch.setattr(run_glue, "write_glue_predictions", broken)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="a bug while writing") as error:
        run_files(
            setup,
            out,
            {"train": files["train"], "test": files["test"]},
            "--do_train",
            "--do_predict",
            "--max_steps",
            "1",
        )
    assert error.value.__notes__ == [
        f"the trained model and its card are saved in {out}; predict with --model_name_or_path {out}"
    ]
    assert AutoConfig.from_pretrained(out).id2label == {0: "neg", 1: "pos"}
    assert (out / "README.md").exists() and (out / "model.safetensors").exists()
