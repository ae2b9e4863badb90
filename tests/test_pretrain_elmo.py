"""biLM training data (sentences, vocabulary, batches, perplexity metrics) and examples/pretrain_elmo.py end to
end on a tiny generated corpus: perplexities reported and falling, checkpoint and card written, Auto reloads."""

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import pretrain_elmo
import torch
from datasets import Dataset
from transformers import AutoModel, AutoModelForPreTraining, AutoTokenizer, EvalPrediction

from hf_ctx import ElmoForBiLM, ElmoModel, ElmoTokenizer
from hf_ctx.data.bilm import (
    BiLMDataCollator,
    build_vocabulary,
    compute_bilm_metrics,
    count_words,
    load_text_lines,
    preprocess_bilm_logits,
    sentences_of,
    split_into_sentences,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pretrain_elmo.py"
WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()


@pytest.fixture
def one_thread():
    """Tiny per-step kernels: one thread avoids thread-pool overhead dominating on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sentences_are_split_after_sentence_ends_and_cut_to_max_words():
    assert sentences_of("It rained . Then it stopped! Why?  ok", 50) == [
        ["It", "rained", "."],
        ["Then", "it", "stopped!"],
        ["Why?"],
        ["ok"],
    ]
    assert sentences_of("a b c d e .", 2) == [["a", "b"], ["c", "d"], ["e", "."]]
    assert sentences_of("a . b", 50, split_sentences=False) == [["a", ".", "b"]]
    assert sentences_of("   ", 5) == []
    dataset = split_into_sentences(Dataset.from_dict({"text": ["a b . c", "", "d e f"]}), max_words=2)
    assert dataset["words"] == [["a", "b"], ["."], ["c"], ["d", "e"], ["f"]]
    with pytest.raises(ValueError, match="no column 'body'"):
        split_into_sentences(dataset, text_column="body")


def test_vocabulary_is_specials_then_words_by_frequency():
    counts = count_words(Dataset.from_dict({"words": [["b", "a", "b"], ["c", "b", "a", "<S>"]]}))
    assert counts == Counter({"b": 3, "a": 2, "c": 1, "<S>": 1})
    assert build_vocabulary(counts) == ["<S>", "</S>", "<UNK>", "b", "a", "c"]
    assert build_vocabulary(counts, min_count=2) == ["<S>", "</S>", "<UNK>", "b", "a"]
    assert build_vocabulary(counts, max_size=4) == ["<S>", "</S>", "<UNK>", "b"]
    with pytest.raises(ValueError, match="max_size"):
        build_vocabulary(counts, max_size=3)


def test_collator_batches_words_as_the_tokenizer_does():
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "a", "b"])
    batch = BiLMDataCollator(tokenizer, pad_to_multiple_of=4)([{"words": ["a", "b", "z"]}, {"words": ["b"]}])
    assert batch["input_ids"].shape == (2, 4, 50)
    assert batch["input_word_ids"].tolist() == [[3, 4, 2, 1], [4, 1, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    with pytest.raises(ValueError, match="word vocabulary"):
        BiLMDataCollator(ElmoTokenizer())


def test_perplexity_metrics():
    rows = preprocess_bilm_logits((torch.tensor(2.0), torch.tensor(3.0)), torch.zeros(4, 7))
    assert rows.tolist() == [[2.0, 3.0]] * 4
    predictions = np.concatenate([rows.numpy(), np.array([[4.0, 1.0]] * 4)])
    metrics = compute_bilm_metrics(EvalPrediction(predictions=predictions, label_ids=None))
    assert metrics["forward_perplexity"] == pytest.approx(math.exp(3.0))
    assert metrics["backward_perplexity"] == pytest.approx(math.exp(2.0))
    assert metrics["perplexity"] == pytest.approx(math.exp(2.5))


def write_corpus(path, lines, rng):
    path.write_text("".join(" ".join(rng.choice(WORDS, int(rng.integers(3, 9)))) + " .\n" for _ in range(lines)))
    return str(path)


def test_example_trains_reports_perplexities_and_saves(tmp_path, one_thread):
    rng = np.random.default_rng(0)
    train, valid = write_corpus(tmp_path / "train.txt", 200, rng), write_corpus(tmp_path / "valid.txt", 24, rng)
    output = tmp_path / "run"
    overrides = {
        "char_cnn": {"filters": [[1, 8], [2, 8], [3, 8]], "n_highway": 1},
        "lstm": {"dim": 24, "projection_dim": 12},
        "dropout": 0.0,
    }
    metrics = pretrain_elmo.main(
        [
            "--train_file",
            train,
            "--validation_file",
            valid,
            "--cache_dir",
            str(tmp_path / "cache"),
            "--config_overrides",
            json.dumps(overrides),
            "--vocab_min_count",
            "1",
            "--do_train",
            "--do_eval",
            "--max_steps",
            "16",
            "--per_device_train_batch_size",
            "16",
            "--learning_rate",
            "5e-3",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "8",
            "--logging_steps",
            "8",
            "--seed",
            "0",
            "--use_cpu",
            "--disable_tqdm",
            "true",
            "--report_to",
            "none",
            "--output_dir",
            str(output),
        ]
    )
    # Average perplexity is exp of the mean of the two directions' losses, i.e. exp(eval_loss).
    assert metrics["eval_perplexity"] == pytest.approx(math.exp(metrics["eval_loss"]), rel=1e-4)
    assert metrics["eval_perplexity"] == pytest.approx(
        math.sqrt(metrics["eval_forward_perplexity"] * metrics["eval_backward_perplexity"]), rel=1e-4
    )
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    evaluations = [entry["eval_perplexity"] for entry in history if "eval_perplexity" in entry]
    assert len(evaluations) >= 2 and evaluations[-1] < evaluations[0] < len(WORDS) + 3 + 5

    assert (output / "README.md").is_file() and (output / "vocab.txt").is_file()
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert isinstance(tokenizer, ElmoTokenizer) and tokenizer.words[:3] == ["<S>", "</S>", "<UNK>"]
    assert set(tokenizer.words[3:]) == set(WORDS) | {"."}
    assert isinstance(AutoModelForPreTraining.from_pretrained(output), ElmoForBiLM)
    bilm = AutoModel.from_pretrained(output)
    assert isinstance(bilm, ElmoModel)
    states = bilm(**tokenizer(["the cat runs ."], return_tensors="pt"), output_hidden_states=True).hidden_states
    assert len(states) == 3 and states[-1].shape == (1, 4, 24)


def test_real_corpus_lines_split_without_losing_words(shared_data):
    lines = load_text_lines(shared_data / "corpus" / "wikitext-2.valid.txt").select(range(300))
    sentences = split_into_sentences(lines, max_words=30)
    assert max(len(w) for w in sentences["words"]) <= 30
    assert sum(len(w) for w in sentences["words"]) == sum(len(t.split()) for t in lines["text"])
