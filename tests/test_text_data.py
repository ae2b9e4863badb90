"""Raw text of real size (hf_ctx.data.text and the pretraining scripts): gzip shards, glob patterns, bad input
naming the file, the `datasets` cache reused by a second run, streaming against the cached path, and a tokenizer
trained on a seeded sample."""

import gzip
import importlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset, IterableDataset
from transformers import AutoTokenizer

from hf_ctx.data.bilm import count_words, load_text_lines, split_into_sentences
from hf_ctx.data.pretraining import build_pretraining_dataset, train_tokenizer_on_corpus
from hf_ctx.data.text import (
    iter_text_file_lines,
    load_text_documents,
    resolve_text_files,
    sample_texts,
)

WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()

# pretrain_bert.py's smallest model: BERT tiny on a 100-word vocabulary, sequences of 32 tokens.
TINY_BERT = ["--model_size", "tiny", "--vocab_size", "100", "--max_seq_length", "32"]


def tiny_elmo(output_dir) -> list[str]:
    """pretrain_elmo.py's arguments for a tiny biLM (2 filters, 1 highway, an LSTM of 8 projected to 4) saved in
    `output_dir`."""
    overrides = {"char_cnn": {"filters": [[1, 4], [2, 4]], "n_highway": 1}, "lstm": {"dim": 8, "projection_dim": 4}}
    return ["--config_overrides", json.dumps(overrides), "--vocab_min_count", "1", "--output_dir", str(output_dir)]


# A short training run on the CPU that prints no progress bar and reports nowhere.
QUIET_CPU_TRAINING = [
    "--per_device_train_batch_size",
    "4",
    "--use_cpu",
    "--disable_tqdm",
    "true",
    "--report_to",
    "none",
]


def corpus_text(num_documents, seed):
    """Documents of 2-5 lines of words, a blank line between documents."""
    rng = np.random.default_rng(seed)
    return (
        "\n\n".join(
            "\n".join(
                " ".join(rng.choice(WORDS, int(rng.integers(4, 12)))) + " ." for _ in range(int(rng.integers(2, 6)))
            )
            for _ in range(num_documents)
        )
        + "\n"
    )


@pytest.fixture
def shards(tmp_path):
    """Three gzip shards and the same text as one plain file."""
    texts = [corpus_text(40, seed) for seed in range(3)]
    for i, text in enumerate(texts):
        with gzip.open(tmp_path / f"part.{i}.txt.gz", "wt", encoding="utf-8") as f:
            f.write(text)
    (tmp_path / "all.txt").write_text("\n".join(texts))
    return tmp_path


def test_globs_expand_sorted_and_gzip_reads_as_plain_text(shards):
    files = resolve_text_files([str(shards / "part.*.txt.gz")])
    assert files == [str(shards / f"part.{i}.txt.gz") for i in range(3)]
    cache = str(shards / "cache")
    compressed = load_text_documents(str(shards / "part.*.txt.gz"), cache_dir=cache)
    plain = load_text_documents(shards / "all.txt", cache_dir=cache)
    assert len(compressed) == 120 and compressed["text"] == plain["text"]
    # A pattern and a file it also matches give each file once.
    assert resolve_text_files([str(shards / "part.1.txt.gz"), str(shards / "part.*.txt.gz")]) == [
        str(shards / "part.1.txt.gz"),
        str(shards / "part.0.txt.gz"),
        str(shards / "part.2.txt.gz"),
    ]
    # Two reading processes (one a file) give the same documents in the same order.
    assert load_text_documents(files, cache_dir=str(shards / "cache2"), num_proc=2)["text"] == plain["text"]


def test_bad_shards_are_clear_errors_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no file matches the pattern '.*nothing\.\*\.gz'"):
        load_text_documents(str(tmp_path / "nothing.*.gz"))
    good = tmp_path / "good.txt.gz"
    with gzip.open(good, "wt") as f:
        f.write(corpus_text(200, 0))
    truncated = tmp_path / "truncated.txt.gz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"truncated\.txt\.gz: corrupt or truncated gzip file after line \d+"):
        load_text_documents(truncated, cache_dir=str(tmp_path / "cache"))
    garbled = tmp_path / "garbled.txt.gz"
    data = bytearray(good.read_bytes())
    data[40:60] = bytes(20)  # inside the deflate stream
    garbled.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"garbled\.txt\.gz: corrupt or truncated gzip file"):
        list(iter_text_file_lines(garbled))
    not_gzip = tmp_path / "plain.txt.gz"
    not_gzip.write_text("just text\n")
    with pytest.raises(ValueError, match=r"plain\.txt\.gz: not a gzip file"):
        list(iter_text_file_lines(not_gzip))
    empty_shard = tmp_path / "empty.txt.gz"
    with gzip.open(empty_shard, "wt") as f:
        f.write("\n\n")
    zero_bytes = tmp_path / "zero.txt.gz"
    zero_bytes.write_bytes(b"")
    for shard in (empty_shard, zero_bytes):
        with pytest.raises(ValueError, match=re.escape(shard.name) + " holds no text"):
            load_text_documents([good, shard], cache_dir=str(tmp_path / "cache"))
        with pytest.raises(ValueError, match="holds no text"):
            list(load_text_documents([shard], streaming=True))


def test_streaming_gives_the_cached_paths_examples(shards, tokenizer_on):
    """Packed MLM examples and biLM sentences: the stream yields the cached dataset's rows, in order."""
    pattern = str(shards / "part.*.txt.gz")
    tokenizer = tokenizer_on(shards / "all.txt")
    cached = build_pretraining_dataset(
        pattern, tokenizer, objective="mlm", max_seq_length=24, cache_dir=str(shards / "cache")
    )
    stream = build_pretraining_dataset(
        load_text_documents(pattern, streaming=True), tokenizer, objective="mlm", max_seq_length=24
    )
    assert isinstance(stream, IterableDataset) and len(cached) > 20
    assert list(stream) == cached.to_list()
    with pytest.raises(ValueError, match="streaming dataset cannot reach"):
        build_pretraining_dataset(load_text_documents(pattern, streaming=True), tokenizer, objective="mlm_nsp")

    cached_sentences = split_into_sentences(load_text_lines(pattern, cache_dir=str(shards / "cache")), max_words=5)
    streamed_sentences = split_into_sentences(load_text_lines(pattern, streaming=True), max_words=5)
    assert list(streamed_sentences) == cached_sentences.to_list()
    assert count_words(streamed_sentences) == count_words(cached_sentences)


@pytest.fixture
def tokenizer_on(tmp_path):
    from hf_ctx import train_wordpiece_tokenizer

    def train(path):
        return train_wordpiece_tokenizer([path], vocab_size=100, min_frequency=1)

    return train


def test_tokenizer_trains_on_a_seeded_sample(tmp_path):
    names = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    documents = Dataset.from_dict({"text": [f"{name} {name} {name}\n{name} {name}" for name in names]})
    first = list(sample_texts(documents, 3, seed=7))
    assert first == list(sample_texts(documents, 3, seed=7)) and len(set(first)) == 3
    assert any(list(sample_texts(documents, 3, seed=seed)) != first for seed in range(8, 12))
    assert list(sample_texts(documents, None, seed=0)) == documents["text"]
    assert list(sample_texts(documents, 50, seed=0)) == documents["text"]
    with pytest.raises(ValueError, match="at least 1"):
        list(sample_texts(documents, 0, seed=0))

    tokenizer = train_tokenizer_on_corpus(documents, 3, seed=7, vocab_size=200, min_frequency=1)
    sampled = {text.split()[0] for text in first}
    assert {name for name in names if name in tokenizer.get_vocab()} == sampled


def test_a_second_run_reads_the_cache_instead_of_preparing_again(tmp_path, shards, caplog):
    """pretrain_bert.py and pretrain_elmo.py run twice on gzip shards: the second run writes no Arrow file, loads
    the tokenizer trained by the first and reads the cached word counts, instead of tokenizing again."""
    cache = tmp_path / "cache"

    def arrow_files():
        return {path: path.stat().st_mtime_ns for path in cache.rglob("*.arrow")}

    common = [
        "--train_file",
        str(shards / "part.*.txt.gz"),
        "--cache_dir",
        str(cache),
        "--do_train",
        "--max_steps",
        "1",
        *QUIET_CPU_TRAINING,
        "--validation_split_percentage",
        "10",
        "--do_eval",
        "--max_eval_samples",
        "8",
    ]
    bert = common + [
        *TINY_BERT,
        "--tokenizer_train_samples",
        "60",
        "--output_dir",
        str(tmp_path / "bert"),
    ]
    elmo = common + tiny_elmo(tmp_path / "elmo")
    for name, args in (("pretrain_bert", bert), ("pretrain_elmo", elmo)):
        importlib.import_module(name).main(args)
        first = arrow_files()
        vocabulary = AutoTokenizer.from_pretrained(tmp_path / name.split("_")[1]).get_vocab()
        caplog.clear()
        with caplog.at_level("INFO"):
            importlib.import_module(name).main([*args, "--overwrite_output_dir"])  # into the first run's folder
        assert arrow_files() == first, f"{name}: the second run prepared the data again"
        assert AutoTokenizer.from_pretrained(tmp_path / name.split("_")[1]).get_vocab() == vocabulary
        cached_step = "loading the WordPiece tokenizer" if name == "pretrain_bert" else "reading the word counts"
        assert cached_step in caplog.text


def test_word_counts_are_cached_beside_the_dataset(shards):
    sentences = split_into_sentences(load_text_lines(shards / "all.txt", cache_dir=str(shards / "cache")))
    counts = count_words(sentences)
    assert counts == Counter(word for words in sentences["words"] for word in words)
    cache_file = next(Path(sentences.cache_files[0]["filename"]).parent.glob("word-counts-*.json"))
    cache_file.write_text(json.dumps({"only": 1}))  # proves the second call reads the file
    assert count_words(sentences) == Counter({"only": 1})


def test_streaming_runs_train_for_max_steps(tmp_path, shards):
    common = [
        "--train_file",
        str(shards / "part.*.txt.gz"),
        "--streaming",
        "--do_train",
        "--max_steps",
        "2",
        *QUIET_CPU_TRAINING,
        "--logging_steps",
        "1",
    ]
    importlib.import_module("pretrain_bert").main(
        common
        + [
            "--objective",
            "mlm",
            *TINY_BERT,
            "--tokenizer_train_samples",
            "50",
            "--output_dir",
            str(tmp_path / "bert"),
        ]
    )
    importlib.import_module("pretrain_elmo").main(common + tiny_elmo(tmp_path / "elmo"))
    for name in ("bert", "elmo"):
        history = json.loads((tmp_path / name / "trainer_state.json").read_text())["log_history"]
        assert [entry["step"] for entry in history if "loss" in entry] == [1, 2]
    with pytest.raises(ValueError, match="--streaming needs --max_steps"):
        importlib.import_module("pretrain_elmo").main(
            [a for a in common if a not in ("--max_steps", "2")] + tiny_elmo(tmp_path / "elmo2")
        )


def test_resolve_text_files_refuses_a_file_named_twice_and_a_device(tmp_path):
    from hf_ctx.data.text import resolve_text_files

    text = tmp_path / "a.txt"
    text.write_text("hello\n", encoding="utf-8")
    with pytest.raises(ValueError, match="given twice"):
        resolve_text_files([str(text), str(text)])
    with pytest.raises(ValueError, match="not a regular file"):
        resolve_text_files(["/dev/null"])
    assert resolve_text_files([str(text), str(tmp_path / "*.txt")]) == [str(text)]  # a pattern's overlap is fine


@pytest.mark.parametrize("option, value", [("--num_train", "0"), ("--num_test", "-5"), ("--seed", "-1")])
def test_synthetic_ner_refuses_sizes_below_one_and_bad_seeds(tmp_path, capsys, option, value):
    from hf_ctx.data.synthetic_ner import main as synthetic_ner_main

    with pytest.raises(SystemExit) as raised:
        synthetic_ner_main([str(tmp_path / "out"), option, value])
    assert raised.value.code == 2
    assert option in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_generate_ner_corpus_refuses_sizes_below_one_before_writing(tmp_path):
    from hf_ctx.data.synthetic_ner import generate_ner_corpus

    with pytest.raises(ValueError, match=r"^num_validation must be a whole number of sentences, at least 1, got 0$"):
        generate_ner_corpus(tmp_path / "out", num_validation=0)
    with pytest.raises(ValueError, match=r"^seed must be"):
        generate_ner_corpus(tmp_path / "out", seed=2.5)
    assert not (tmp_path / "out").exists()


def test_synthetic_ner_keeps_a_users_own_files_and_regenerates_its_own(tmp_path, capsys):
    """A folder holding the user's own train.txt is refused before anything is written (it used to be
    replaced without a word); a corpus synthetic_ner wrote itself is written again."""
    from hf_ctx.data.synthetic_ner import generate_ner_corpus
    from hf_ctx.data.synthetic_ner import main as synthetic_ner_main

    generated = generate_ner_corpus(tmp_path / "generated", num_train=3, num_validation=2, num_test=2, num_raw=4)
    first = generated["train"].read_text(encoding="utf-8")
    again = generate_ner_corpus(tmp_path / "generated", num_train=5, num_validation=2, num_test=2, num_raw=4, seed=1)
    assert again == generated and again["train"].read_text(encoding="utf-8") != first
    own = tmp_path / "own"
    own.mkdir()
    (own / "raw.txt").write_text("my own text\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match="raw.txt exists and is not a corpus synthetic_ner generated"):
        generate_ner_corpus(own)
    with pytest.raises(SystemExit) as raised:
        synthetic_ner_main([str(own)])
    assert raised.value.code == 2
    assert "raw.txt exists" in capsys.readouterr().err.strip().splitlines()[-1]
    assert (own / "raw.txt").read_text(encoding="utf-8") == "my own text\n"
    assert sorted(p.name for p in own.iterdir()) == ["raw.txt"]
