"""examples/run_ner.py end to end on tiny generated data: train, evaluate, predict, reload; and its errors."""

import json
import logging
import re
from pathlib import Path

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
pytest.importorskip("evaluate")
import run_ner
import torch
from seqeval.metrics import f1_score
from transformers import AutoModel, AutoModelForTokenClassification, HfArgumentParser

from hf_ctx import ElmoConfig, ElmoForBiLM, ElmoTokenizer
from hf_ctx.data.conll import read_conll
from hf_ctx.data.synthetic_ner import generate_ner_corpus
from hf_ctx.tag_schemes import convert_tags

COMMON = [
    "--report_to",
    "none",
    "--save_strategy",
    "no",
    "--per_device_train_batch_size",
    "16",
    "--per_device_eval_batch_size",
    "16",
    "--disable_tqdm",
    "true",
    "--seed",
    "0",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return generate_ner_corpus(
        tmp_path_factory.mktemp("ner"), num_train=120, num_validation=40, num_test=40, num_raw=200
    )


def check_prediction_file(path: Path, gold_file: Path, reported_f1: float):
    """The prediction file has every word of the gold file, in order, and conlleval's F1 is the reported one."""
    written = read_conll(path, num_columns=5)
    gold = read_conll(gold_file)
    assert [s["tokens"] for s in written] == [s["tokens"] for s in gold]
    assert [s["column_3"] for s in written] == [convert_tags(s["ner_tags"], "IOB1", "IOB2") for s in gold]
    # seqeval's default mode reads chunks as conlleval does: an independent recount of the F1.
    f1 = f1_score([s["column_3"] for s in written], [s["ner_tags"] for s in written])
    assert f1 == pytest.approx(reported_f1, abs=1e-6)


def test_bert_train_evaluate_predict_with_long_sentences_split(corpus, tmp_path, caplog):
    out = tmp_path / "bert"
    metrics = run_ner.main(
        [
            "--model_type",
            "bert",
            "--model_size",
            "tiny",
            "--vocab_size",
            "300",
            "--train_file",
            str(corpus["train"]),
            "--validation_file",
            str(corpus["validation"]),
            "--test_file",
            str(corpus["test"]),
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--max_seq_length",
            "12",
            "--num_train_epochs",
            "1",
            "--learning_rate",
            "1e-3",
            "--output_dir",
            str(out),
            *COMMON,
        ]
    )
    assert "sentences are longer than the model allows (10)" in caplog.text
    for key in ("eval_f1", "eval_precision", "eval_recall", "eval_PER_f1", "predict_f1"):
        assert 0.0 <= metrics[key] <= 1.0
    check_prediction_file(out / "predictions_test.txt", corpus["test"], metrics["predict_f1"])
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "hf_ctx_bert" and config["unpad_inputs"] is True
    card = (out / "README.md").read_text()
    assert f"Measured on {corpus['validation'].name} by the script" in card
    assert (
        f"## Training data\n\nthe local file {corpus['train'].name}" in card
        and str(corpus["train"].parent) not in card
    )


@pytest.fixture(scope="module")
def bilm(corpus, tmp_path_factory):
    """A tiny (untrained) hf_ctx biLM checkpoint whose tokenizer knows the training words."""
    words = sorted({word for sentence in read_conll(corpus["train"]) for word in sentence["tokens"]})
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *words])
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 8]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 16, "projection_dim": 8, "n_layers": 1},
        vocab_size=len(tokenizer.get_vocab()),
    )
    path = tmp_path_factory.mktemp("bilm")
    ElmoForBiLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize(
    "model_type,overrides,model_class",
    [
        ("taglm", "word_embedding_dim=8,rnn_hidden_size=8,char_cnn_filters=8", "TagLMForTokenClassification"),
        ("elmo", "task_hidden_size=8", "ElmoForTokenClassification"),
    ],
)
def test_word_level_taggers_train_on_a_frozen_bilm_evaluate_and_predict(
    corpus, bilm, tmp_path, model_type, overrides, model_class
):
    out = tmp_path / model_type
    metrics = run_ner.main(
        [
            "--model_type",
            model_type,
            "--bilm_name_or_path",
            str(bilm),
            "--config_overrides",
            overrides,
            "--train_file",
            str(corpus["train"]),
            "--validation_file",
            str(corpus["validation"]),
            "--test_file",
            str(corpus["test"]),
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--num_train_epochs",
            "1",
            "--learning_rate",
            "1e-2",
            "--output_dir",
            str(out),
            *COMMON,
        ]
    )
    for key in ("eval_f1", "eval_precision", "eval_recall", "predict_f1"):
        assert 0.0 <= metrics[key] <= 1.0
    check_prediction_file(out / "predictions_test.txt", corpus["test"], metrics["predict_f1"])
    # The frozen biLM's states were cached on disk by default, beside the output folder.
    assert list((tmp_path / "bilm_cache").glob("*/states-*.safetensors"))
    # The saved tagger reloads through the Auto class, with the overrides, and holds the biLM unchanged.
    tagger = AutoModelForTokenClassification.from_pretrained(out)
    assert type(tagger).__name__ == model_class
    name, value = overrides.split(",")[0].split("=")
    assert getattr(tagger.config, name) == int(value)
    frozen = (tagger.bilm if model_type == "taglm" else tagger.elmo).state_dict()
    for key, tensor in AutoModel.from_pretrained(bilm).state_dict().items():
        assert torch.equal(frozen[key], tensor), key


@pytest.mark.slow  # three short TagLM runs
def test_biLM_cache_on_disk_is_reused_by_a_later_run_and_changes_no_result(corpus, bilm, tmp_path, caplog):
    def train(cache: str, output: str) -> dict:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_ctx.data.bilm_cache"):
            return run_ner.main(
                [
                    "--model_type",
                    "taglm",
                    "--bilm_name_or_path",
                    str(bilm),
                    "--config_overrides",
                    "word_embedding_dim=8,rnn_hidden_size=8,char_cnn_filters=8",
                    "--train_file",
                    str(corpus["train"]),
                    "--validation_file",
                    str(corpus["validation"]),
                    "--do_train",
                    "--do_eval",
                    "--num_train_epochs",
                    "2",
                    "--bilm_cache",
                    cache,
                    "--bilm_cache_dir",
                    str(tmp_path / "states"),
                    "--output_dir",
                    str(tmp_path / output),
                    *COMMON,
                ]
            )

    plain = train("none", "plain")
    assert not (tmp_path / "states").exists()
    first = train("disk", "first")
    computed = re.search(r"(\d+) sentences found, (\d+) computed", caplog.text).groups()
    assert computed[0] == "0" and int(computed[1]) > 0
    second = train("disk", "second")
    assert f"{computed[1]} sentences found, 0 computed" in caplog.text
    # The same training with the biLM run in every step: the states differ by float32 rounding at most.
    for metrics in (first, second):
        assert metrics["eval_f1"] == plain["eval_f1"]
        assert metrics["eval_loss"] == pytest.approx(plain["eval_loss"], rel=1e-4)


def test_unseen_label_at_evaluation_is_an_error(corpus, tmp_path):
    dev = tmp_path / "dev.txt"
    dev.write_text(Path(corpus["validation"]).read_text().replace("I-MISC", "I-EVENT", 1))
    with pytest.raises(ValueError, match=r"label 'B-EVENT' .*dev.txt:\d+\).*training data never has"):
        run_ner.main(
            [
                "--model_type",
                "bert",
                "--train_file",
                str(corpus["train"]),
                "--validation_file",
                str(dev),
                "--do_train",
                "--do_eval",
                "--output_dir",
                str(tmp_path / "out"),
                *COMMON,
            ]
        )


def test_malformed_training_file_names_file_and_line(corpus, tmp_path):
    bad = tmp_path / "bad.txt"
    lines = Path(corpus["train"]).read_text().split("\n")
    lines[5] = "Smith NNP I-PER"
    bad.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=rf"{bad}:6: expected 4 space-separated columns"):
        run_ner.main(
            [
                "--model_type",
                "bert",
                "--train_file",
                str(bad),
                "--do_train",
                "--output_dir",
                str(tmp_path / "out"),
                *COMMON,
            ]
        )


def test_few_label_run_selects_on_a_held_out_slice_of_the_training_file_and_scores_the_test_file(corpus, tmp_path):
    """--validation_split_percentage holds sentences out of the training file, --train_sample_seed draws the
    training sample from the rest (nested: a smaller sample is part of a larger one), early stopping selects on the
    held-out slice, and --test_file is scored only at the end."""

    def split(max_train_samples, seed):
        argv = ["--train_file", str(corpus["train"]), "--validation_split_percentage", "25", "--seed", "0"]
        argv += ["--max_train_samples", str(max_train_samples), "--train_sample_seed", str(seed)]
        args = HfArgumentParser((run_ner.DataArguments, run_ner.TrainingArguments)).parse_args_into_dataclasses(
            [*argv, "--do_train", "--do_eval", "--output_dir", str(tmp_path / "unused")]
        )
        data, _ = run_ner.load_data(*args)
        return [" ".join(s) for s in data["train"]["tokens"]], [" ".join(s) for s in data["validation"]["tokens"]]

    small, held_out = split(10, seed=1)
    large, held_out_again = split(40, seed=1)
    other, _ = split(10, seed=2)
    assert len(held_out) == 30 and held_out == held_out_again  # ceil(25% of 120), drawn with --seed
    assert len(small) == 10 and len(large) == 40 and small == large[:10] and small != other
    assert not set(large) & set(held_out)

    out = tmp_path / "few"
    patience, max_steps = 2, 40
    metrics = run_ner.main(
        [
            "--model_type",
            "taglm",
            "--config_overrides",
            "word_embedding_dim=8,rnn_hidden_size=8,char_cnn_filters=8",
            "--train_file",
            str(corpus["train"]),
            "--validation_split_percentage",
            "25",
            "--max_train_samples",
            "32",
            "--train_sample_seed",
            "1",
            "--test_file",
            str(corpus["test"]),
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--max_steps",
            str(max_steps),
            "--learning_rate",
            "1e-2",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            "--save_total_limit",
            "1",
            "--load_best_model_at_end",
            "--metric_for_best_model",
            "f1",
            "--early_stopping_patience",
            str(patience),
            "--output_dir",
            str(out),
            *[a for a in COMMON if a not in ("--save_strategy", "no")],
        ]
    )
    state = json.loads((out / "trainer_state.json").read_text())
    curve = [entry["eval_f1"] for entry in state["log_history"] if "eval_f1" in entry]  # during training
    best = curve.index(max(curve))
    # Stopped after `patience` evaluations without a better F1 (or at the step cap), kept the best model.
    assert len(curve) - 1 - best == patience or state["global_step"] == max_steps
    assert metrics["eval_f1"] == pytest.approx(max(curve)) == pytest.approx(state["best_metric"])
    check_prediction_file(out / "predictions_test.txt", corpus["test"], metrics["predict_f1"])
    assert len(list(out.glob("checkpoint-*"))) <= 2  # --save_total_limit 1 keeps the best and the latest


def test_validation_file_and_split_percentage_are_refused_together(corpus, tmp_path):
    with pytest.raises(ValueError, match="--validation_file and --validation_split_percentage cannot be used"):
        run_ner.main(
            [
                "--model_type",
                "taglm",
                "--train_file",
                str(corpus["train"]),
                "--validation_file",
                str(corpus["validation"]),
                "--validation_split_percentage",
                "10",
                "--do_train",
                "--output_dir",
                str(tmp_path / "out"),
                *COMMON,
            ]
        )


@pytest.mark.parametrize(
    "options, error",
    [
        (["--bilm_name_or_path", "."], "--model_type bert builds on no biLM; leave out --bilm_name_or_path"),
        (["--word_vectors", "vectors.txt"], "--word_vectors: a bert tagger has no word embeddings to load them into"),
        (["--max_seq_length", "600"], r"--max_seq_length 600 exceeds the model's max_position_embeddings \(512\)"),
    ],
)
def test_a_new_bert_tagger_refuses_what_it_cannot_use(corpus, tmp_path, options, error):
    """Options its family's record says a new BERT tagger has no use for are errors, not silently ignored."""
    with pytest.raises(ValueError, match=error):
        run_ner.main(
            ["--model_type", "bert", "--vocab_size", "100", "--train_file", str(corpus["train"]), "--do_train"]
            + [*options, "--output_dir", str(tmp_path / "out"), *COMMON]
        )
