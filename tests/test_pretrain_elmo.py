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
    # words as CoNLL's (punctuation off words), unless the text is already tokenized
    assert sentences_of("It rained. Then it stopped! Why?  ok", 50) == [
        ["It", "rained", "."],
        ["Then", "it", "stopped", "!"],
        ["Why", "?", "ok"],
    ]
    assert sentences_of("It rained . Then it stopped! Why?  Ok", 50, splitter="whitespace") == [
        ["It", "rained", "."],
        ["Then", "it", "stopped!"],
        ["Why?"],
        ["Ok"],
    ]
    assert sentences_of("a b c d e.", 2) == [["a", "b"], ["c", "d"], ["e", "."]]
    assert sentences_of("a. B", 50, split_sentences=False) == [["a", ".", "B"]]
    assert sentences_of("   ", 5) == []
    dataset = split_into_sentences(Dataset.from_dict({"text": ["a b. C", "", "d e f"]}), max_words=2)
    assert dataset["words"] == [["a", "b"], ["."], ["C"], ["d", "e"], ["f"]]
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
    assert "".join(w for s in sentences["words"] for w in s) == "".join("".join(t.split()) for t in lines["text"])
    pretokenized = split_into_sentences(lines, max_words=30, splitter="whitespace")
    assert sum(len(w) for w in pretokenized["words"]) == sum(len(t.split()) for t in lines["text"])


def test_the_tokenizer_records_the_splitter_and_a_continued_run_must_split_alike(elmo_run, tmp_path):
    """The biLM's vocabulary is words as the splitter made them: the tokenizer says which (taggers split raw text
    the same way), and continuing with text split otherwise is refused before training."""
    assert AutoTokenizer.from_pretrained(elmo_run).word_splitter == "treebank"
    assert "split from raw text as CoNLL and the Penn Treebank split text" in (elmo_run / "README.md").read_text()
    with pytest.raises(ValueError, match=r"made by the 'treebank' splitter, but this run splits its text with "
                       r"'whitespace': drop --pretokenized"):  # fmt: skip
        continued_run(elmo_run, tmp_path, "--pretokenized")


# --- continued pretraining: a pretrain_elmo.py folder, a converted published ELMo -------------------------------


def continued_run(checkpoint, tmp_path, *extra):
    """pretrain_elmo.py continued from `checkpoint` for 3 steps on new text of WORDS; returns the output folder."""
    train = write_corpus(tmp_path / "task_text.txt", 60, np.random.default_rng(1))
    output = tmp_path / "continued"
    pretrain_elmo.main(
        ["--model_name_or_path", str(checkpoint), "--train_file", train, "--cache_dir", str(tmp_path / "cache")]
        + ["--do_train", "--max_steps", "3", "--per_device_train_batch_size", "16", "--learning_rate", "1e-2"]
        + ["--seed", "0", "--use_cpu", "--disable_tqdm", "true", "--report_to", "none", "--save_strategy", "no"]
        + ["--output_dir", str(output), *extra]
    )
    return output


def biLM_weights(folder) -> dict[str, torch.Tensor]:
    """The character CNN and LSTM weights of the biLM saved in `folder`, by their `ElmoModel` names."""
    return {name: value.detach().clone() for name, value in AutoModel.from_pretrained(folder).state_dict().items()}


def assert_loaded_unchanged_then_trained(checkpoint, output, model):
    """`model` (as the script built it, before training) holds the checkpoint's CNN and LSTM weights, and the
    trained model in `output` holds other ones."""
    before, loaded = biLM_weights(checkpoint), model.elmo.state_dict()
    assert before.keys() == loaded.keys() and all(torch.equal(before[n], loaded[n]) for n in before)
    after = biLM_weights(output)
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert any("convolutions" in n for n in changed) and any("forward_layers" in n for n in changed)
    assert any("backward_layers" in n for n in changed)


def build_as_the_script_does(checkpoint, tmp_path, *extra):
    """The model, tokenizer, created parts and the vocabulary in words that pretrain_elmo.py starts training
    with."""
    model_args = pretrain_elmo.ModelArguments(model_name_or_path=str(checkpoint), vocab_min_count=1)
    for name, value in zip(extra[::2], extra[1::2]):
        setattr(model_args, name.removeprefix("--"), value)
    sentences = Dataset.from_dict(
        {"words": [s.split() for s in (tmp_path / "task_text.txt").read_text().splitlines()]}
    )
    config = pretrain_elmo.load_pretraining_config(str(checkpoint), "elmo")
    return pretrain_elmo.build_model_and_tokenizer(model_args, sentences, "treebank", config)


@pytest.fixture(scope="module")
def elmo_run(tmp_path_factory):
    """A pretrain_elmo.py output folder: a tiny biLM trained 2 steps on WORDS."""
    root = tmp_path_factory.mktemp("elmo_run")
    train = write_corpus(root / "train.txt", 60, np.random.default_rng(0))
    overrides = {"char_cnn": {"filters": [[1, 8], [2, 8]], "n_highway": 1}, "lstm": {"dim": 16, "projection_dim": 8}}
    pretrain_elmo.main(
        ["--train_file", train, "--cache_dir", str(root / "cache"), "--config_overrides", json.dumps(overrides)]
        + ["--vocab_min_count", "1", "--do_train", "--max_steps", "2", "--per_device_train_batch_size", "16"]
        + ["--use_cpu", "--disable_tqdm", "true", "--report_to", "none", "--save_strategy", "no"]
        + ["--output_dir", str(root / "run")]
    )
    return root / "run"


def test_continuing_a_pretrain_elmo_folder_keeps_its_vocabulary_and_softmax(elmo_run, tmp_path, one_thread, caplog):
    output = continued_run(elmo_run, tmp_path)
    model, tokenizer, created, vocabulary = build_as_the_script_does(elmo_run, tmp_path)
    assert created == [] and "created with random weights" not in caplog.text
    assert vocabulary == f"{tokenizer.vocab_size} words, from `{elmo_run.name}` (the checkpoint continued)"
    assert_loaded_unchanged_then_trained(elmo_run, output, model)
    saved = AutoModelForPreTraining.from_pretrained(elmo_run)
    assert torch.equal(model.softmax.weight, saved.softmax.weight)  # the checkpoint's softmax, not a new one
    assert (output / "vocab.txt").read_bytes() == (elmo_run / "vocab.txt").read_bytes()
    assert AutoTokenizer.from_pretrained(output).words == AutoTokenizer.from_pretrained(elmo_run).words
    card = (output / "README.md").read_text()
    assert f"its pretraining continued with hf_ctx\nfrom `{elmo_run.name}` on the local file task_text.txt." in card
    assert f"| Starting point | `{elmo_run.name}`, trained by hf_ctx" in card and "Created here" not in card
    assert f"| word vocabulary | {vocabulary} |" in card


def converted_elmo(tmp_path, with_vocabulary: bool, max_characters_per_token: int = 50):
    """A tiny published-style ELMo (bilm-tf options + weights, as tests/test_convert_elmo.py writes them) converted
    with `hf-ctx convert-elmo`, with or without bilm-tf's vocab.txt."""
    from test_convert_elmo import options_for, write_weights

    from hf_ctx.tools.convert_elmo import convert_elmo_checkpoint

    options = options_for(projected=True)
    options["char_cnn"]["max_characters_per_token"] = max_characters_per_token
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(0))
    vocabulary = None
    if with_vocabulary:
        vocabulary = tmp_path / "vocab.txt"
        vocabulary.write_text("\n".join(["</S>", "<S>", "<UNK>", *WORDS[:12]]) + "\n")
    convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "converted", vocabulary)
    return tmp_path / "converted"


def test_a_converted_elmo_gets_a_new_softmax_over_its_vocabulary_and_says_so(tmp_path, one_thread, caplog):
    checkpoint = converted_elmo(tmp_path, with_vocabulary=True)
    output = continued_run(checkpoint, tmp_path)
    model, tokenizer, created, vocabulary = build_as_the_script_does(checkpoint, tmp_path)
    assert_loaded_unchanged_then_trained(checkpoint, output, model)
    assert created == ["`softmax`: random initialisation over the 15 words"]
    assert (
        vocabulary == "15 words, from `converted` (the checkpoint continued)"
    )  # one softmax shared by both directions
    assert f"{checkpoint} has no weights for softmax: created with random weights" in caplog.text
    assert model.softmax.weight.shape == (15, 6)
    assert (output / "vocab.txt").read_bytes() == (checkpoint / "vocab.txt").read_bytes()  # bilm-tf's word order
    assert AutoTokenizer.from_pretrained(output).words[:3] == ["</S>", "<S>", "<UNK>"]
    card = (output / "README.md").read_text()
    assert "| Created here, not in the starting point | `softmax`: random initialisation over the 15 words |" in card
    assert "hf-ctx convert-elmo" in card  # the starting point's own origin, from the converted folder's card
    assert AutoModelForPreTraining.from_pretrained(output).softmax.weight.shape == (15, 6)


def test_a_converted_elmo_without_vocabulary_gets_one_from_the_training_text(tmp_path, one_thread, caplog):
    """The converted model reads 20 characters a word: the vocabulary is new, the character ids are the
    checkpoint's."""
    checkpoint = converted_elmo(tmp_path, with_vocabulary=False, max_characters_per_token=20)
    output = continued_run(checkpoint, tmp_path, "--vocab_min_count", "1")
    model, tokenizer, created, vocabulary = build_as_the_script_does(checkpoint, tmp_path)
    assert_loaded_unchanged_then_trained(checkpoint, output, model)
    words = 3 + len(set(WORDS) | {"."})
    assert vocabulary == f"{words} words, built here from the training text (the words seen at least once)"
    assert created == [
        f"the word vocabulary ({words} words, from the training text)",
        f"`softmax`: random initialisation over the {words} words",
    ]
    assert "has no word vocabulary for the softmax: built one of" in caplog.text
    continued, original = AutoTokenizer.from_pretrained(output), AutoTokenizer.from_pretrained(checkpoint)
    assert continued.vocab_size == words and continued.max_characters_per_token == 20
    sentence = ["the", "extraordinarily", "cat"]
    assert torch.equal(
        continued(sentence, is_split_into_words=True, return_tensors="pt")["input_ids"],
        original(sentence, is_split_into_words=True, return_tensors="pt")["input_ids"],
    )
    card = (output / "README.md").read_text()
    assert f"the word vocabulary ({words} words, from the training text); `softmax`" in card


def test_a_tokenizer_that_does_not_fit_the_checkpoint_is_one_line(elmo_run, tmp_path):
    other = tmp_path / "other_tokenizer"
    ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "cat"]).save_pretrained(other)
    with pytest.raises(ValueError, match=r"other_tokenizer has 4 words, but the softmax of .* predicts 24: drop --"):
        continued_run(elmo_run, tmp_path, "--tokenizer_name", str(other))
    narrow = tmp_path / "narrow_tokenizer"
    ElmoTokenizer(vocab=AutoTokenizer.from_pretrained(elmo_run).words, max_characters_per_token=20).save_pretrained(
        narrow
    )
    with pytest.raises(ValueError, match=r"narrow_tokenizer gives 20 characters a word, but the biLM of .* reads 50"):
        continued_run(elmo_run, tmp_path, "--tokenizer_name", str(narrow))


def test_a_bert_checkpoint_is_refused_before_any_text_is_read(tmp_path):
    from tiny_checkpoints import bert_pretraining

    model, tokenizer = bert_pretraining(tmp_path)
    model.save_pretrained(tmp_path / "bert")
    (tmp_path / "unread.txt").write_text("junk\n")  # there, so that its kind holds; never read
    with pytest.raises(ValueError, match="is a 'hf_ctx_bert' checkpoint; this script continues the pretraining of hf"):
        pretrain_elmo.main(
            ["--model_name_or_path", str(tmp_path / "bert"), "--train_file", str(tmp_path / "unread.txt")]
            + ["--do_train", "--output_dir", str(tmp_path / "out")]
        )


def test_vocabulary_options_are_refused_where_the_vocabulary_is_kept(elmo_run, tmp_path):
    """--vocab_min_count and --vocab_max_size build the word vocabulary: continuing a biLM that has one (or starting
    from --tokenizer_name's) keeps that one, so they did nothing, silently; now refused, naming the words kept."""
    words = AutoTokenizer.from_pretrained(elmo_run).vocab_size
    kept = rf"would do nothing here: they build the word vocabulary, and this run keeps the {words:,} words of "
    with pytest.raises(ValueError, match=rf"^--vocab_min_count {kept}{elmo_run}; leave it out$"):
        continued_run(elmo_run, tmp_path, "--vocab_min_count", "2")
    with pytest.raises(ValueError, match=rf"^--vocab_min_count and --vocab_max_size {kept}"):
        continued_run(elmo_run, tmp_path, "--vocab_min_count", "2", "--vocab_max_size", "9")


def test_a_wordpiece_tokenizer_and_config_sections_that_are_not_objects_are_refused_in_one_line(tmp_path):
    """--tokenizer_name of a BERT tokenizer (before: AttributeError 'has_word_vocabulary'), and --config_overrides
    whose char_cnn or lstm is not an object (before: TypeError or AttributeError tracebacks)."""
    from tiny_checkpoints import bert_tokenizer

    train = write_corpus(tmp_path / "train.txt", 20, np.random.default_rng(0))
    bert_tokenizer(tmp_path).save_pretrained(tmp_path / "wordpiece")
    base = ["--train_file", train, "--cache_dir", str(tmp_path / "cache"), "--do_train", "--max_steps", "1"]
    base += ["--use_cpu", "--report_to", "none", "--output_dir", str(tmp_path / "run")]
    with pytest.raises(ValueError, match=r"holds a BertTokenizer, not an ElmoTokenizer: the biLM reads each word's"):
        pretrain_elmo.main([*base, "--tokenizer_name", str(tmp_path / "wordpiece")])
    for overrides, message in [
        ("lstm=5", r"^lstm must be a dict of options \(.*\), got 5$"),
        ('{"char_cnn": [1, 2]}', r"^char_cnn must be a dict of options \(.*\), got \[1, 2\]$"),
    ]:
        with pytest.raises(ValueError, match=message):
            pretrain_elmo.main([*base, "--vocab_min_count", "1", "--config_overrides", overrides])


def test_a_vocabulary_of_only_unk_and_more_samples_than_words_are_refused(tmp_path):
    """--vocab_min_count above every word's count trained a biLM of 3 words (<S>, </S>, <UNK>) that predicts <UNK>
    for every word, and --num_sampled at or above the vocabulary's size a sampled softmax dearer than the full one:
    both silently, exit 0; now one line each."""
    train = write_corpus(tmp_path / "train.txt", 20, np.random.default_rng(0))
    base = ["--train_file", train, "--cache_dir", str(tmp_path / "cache"), "--do_train", "--max_steps", "1"]
    base += ["--use_cpu", "--report_to", "none", "--output_dir", str(tmp_path / "run")]
    with pytest.raises(ValueError, match=r"^--vocab_min_count 1,000,000: no word of the training text is seen that"):
        pretrain_elmo.main([*base, "--vocab_min_count", "1000000"])
    with pytest.raises(ValueError, match=r"^--num_sampled 100,000 is not below the vocabulary's \d+ words"):
        pretrain_elmo.main([*base, "--vocab_min_count", "1", "--num_sampled", "100000"])
