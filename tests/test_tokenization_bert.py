"""WordPiece tokenizer trained from raw text, and the `hf-ctx train-tokenizer` command."""

import pytest
from transformers import AutoTokenizer, BertTokenizer

from hf_ctx import CtxBertConfig, CtxBertModel, train_wordpiece_tokenizer
from hf_ctx.tools.cli import main as cli_main

CORPUS = [
    "The Quick brown fox jumps over the lazy dog.",
    "A quick brown dog outpaces a quick red fox.",
    "Foxes and dogs are not the best of friends.",
    "Jumping is what foxes do best; sleeping is what dogs do best.",
    "Café owners in Zürich serve coffee.",
] * 20


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


def test_trained_tokenizer_has_bert_special_tokens_and_template(corpus_file):
    tokenizer = train_wordpiece_tokenizer([corpus_file], vocab_size=200, min_frequency=1)
    assert isinstance(tokenizer, BertTokenizer)
    assert [
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.mask_token_id,
    ] == [0, 1, 2, 3, 4]
    encoded = tokenizer("quick fox", "lazy dog")
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and tokens[-1] == "[SEP]"
    first_sep = tokens.index("[SEP]")
    assert encoded["token_type_ids"] == [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)
    # Frequent words are whole tokens; an unseen word is split into known pieces, not [UNK].
    assert tokenizer.tokenize("quick fox") == ["quick", "fox"]
    assert "[UNK]" not in tokenizer.tokenize("foxdog")


def test_lowercasing_is_configurable(corpus_file):
    uncased = train_wordpiece_tokenizer([corpus_file], vocab_size=200, min_frequency=1)
    cased = train_wordpiece_tokenizer([corpus_file], vocab_size=200, min_frequency=1, lowercase=False)
    assert uncased.tokenize("Quick") == ["quick"]
    assert uncased.tokenize("Zürich") == ["zurich"]  # uncased BERT strips accents too
    assert cased.tokenize("Quick")[0].startswith("Q")


def test_saved_tokenizer_loads_with_auto_tokenizer_next_to_a_model(corpus_file, tmp_path):
    tokenizer = train_wordpiece_tokenizer([corpus_file], vocab_size=200, min_frequency=1, model_max_length=16)
    model = CtxBertModel(CtxBertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=16))
    tokenizer.save_pretrained(tmp_path / "ckpt")
    model.save_pretrained(tmp_path / "ckpt")
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "ckpt")
    assert reloaded("the lazy dog")["input_ids"] == tokenizer("the lazy dog")["input_ids"]
    assert len(reloaded("fox " * 40, truncation=True)["input_ids"]) == 16


def test_bad_inputs(tmp_path, corpus_file):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        train_wordpiece_tokenizer([tmp_path / "missing.txt"])
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    with pytest.raises(ValueError, match="blank.txt holds no text"):
        train_wordpiece_tokenizer([tmp_path / "blank.txt"])
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt:\d+: not valid UTF-8"):
        train_wordpiece_tokenizer([tmp_path / "latin1.txt"])
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece_tokenizer([corpus_file], vocab_size=3)


def test_cli_train_tokenizer(corpus_file, tmp_path, capsys):
    cli_main(
        [
            "train-tokenizer",
            str(corpus_file),
            "--output_dir",
            str(tmp_path / "tok"),
            "--vocab_size",
            "150",
            "--min_frequency",
            "1",
        ]
    )
    assert "WordPiece tokenizer" in capsys.readouterr().out
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert tokenizer.tokenize("Quick fox") == ["quick", "fox"]


def test_train_tokenizer_refuses_an_output_path_that_is_a_file(corpus_file, tmp_path):
    """transformers' save_pretrained logs and writes nothing when given a file; the command said "wrote"."""
    target = tmp_path / "a_file"
    target.write_text("keep me")
    with pytest.raises(ValueError, match="--output_dir .*a_file is a file"):
        cli_main(["train-tokenizer", str(corpus_file), "--output_dir", str(target), "--vocab_size", "100", "--debug"])
    assert target.read_text() == "keep me"


def test_training_is_deterministic_and_learns_what_the_wordpiece_trainer_learns(tmp_path):
    """Same text, same arguments: byte-identical files. `tokenizers`' WordPiece trainer numbered the "##"
    characters in hash-map order and broke ties between merges by those numbers (3 runs, 3 vocabularies).
    The vocabulary learnt is the one that trainer learns where no tie decides: this corpus of random words has
    many merges of equal count at the end, where two runs of that trainer also differ by about 10%."""
    import random

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzéß") for _ in range(rng.randint(2, 8))) for _ in range(400)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words) for _ in range(10)) for _ in range(400)), encoding="utf-8")
    saved = []
    for run in range(3):
        train_wordpiece_tokenizer([corpus], vocab_size=300, min_frequency=2).save_pretrained(tmp_path / str(run))
        saved.append(
            {name: (tmp_path / str(run) / name).read_bytes() for name in ("tokenizer.json", "tokenizer_config.json")}
        )
    assert saved[0] == saved[1] == saved[2]

    reference = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    reference.normalizer = normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    reference.train(
        [str(corpus)],
        trainers.WordPieceTrainer(
            vocab_size=300,
            min_frequency=2,
            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False,
        ),
    )
    ours = AutoTokenizer.from_pretrained(tmp_path / "0").get_vocab()
    assert len(ours) == 300
    # Every token but those a tie decided: the last merges, of the smallest count.
    assert len(set(ours) & set(reference.get_vocab())) >= 270
    assert {t for t in reference.get_vocab() if len(t.removeprefix("##")) == 1} <= set(ours)  # the alphabet


def test_a_byte_order_mark_is_not_a_training_word(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_text("\ufeff" + "\n".join(CORPUS), encoding="utf-8")
    tokenizer = train_wordpiece_tokenizer([path], vocab_size=200, min_frequency=1)
    assert not any("\ufeff" in token for token in tokenizer.get_vocab())
