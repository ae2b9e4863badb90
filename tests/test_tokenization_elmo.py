"""ElmoTokenizer: the original character encoding (checked against hand-written ids and bilm-tf's algorithm
written out here), word ids, padding, truncation, collators, saving and loading, bad input."""

import json
import logging
import pickle
import re

import pytest
import torch
from transformers import AutoTokenizer, DataCollatorWithPadding

import hf_ctx  # noqa: F401  (registers the Auto classes)
from hf_ctx import ElmoConfig, ElmoTokenizer

VOCAB = ["</S>", "<S>", "<UNK>", "the", "cat", "sat"]  # bilm-tf's order: </S> first


def bilm_tf_char_ids(word, max_length=50):
    """bilm-tf's UnicodeCharsVocabulary + Batcher: bytes 0-255, <S> 256, </S> 257, begin-of-word 258,
    end-of-word 259, padding 260, then +1 for the mask."""
    if word in ("<S>", "</S>"):
        code = [258, 256 if word == "<S>" else 257, 259]
    else:
        code = [258, *word.encode("utf-8", "ignore")[: max_length - 2], 259]
    return [c + 1 for c in code + [260] * (max_length - len(code))]


def test_hand_written_encodings():
    tokenizer = ElmoTokenizer()
    assert tokenizer("a")["input_ids"] == [[259, 98, 260] + [261] * 47]
    assert tokenizer("<S> </S>")["input_ids"] == [[259, 257, 260] + [261] * 47, [259, 258, 260] + [261] * 47]
    assert tokenizer("é")["input_ids"][0][:4] == [259, 0xC3 + 1, 0xA9 + 1, 260]


@pytest.mark.parametrize("word", ["cat", "Zürich", "日本語", "x" * 48, "y" * 49, "z" * 80, "é" * 30, "a\ud800b", ""])
def test_words_encode_as_bilm_tf_does(word):
    """Long words keep their first 48 bytes (even mid-character); unencodable characters are dropped."""
    tokenizer = ElmoTokenizer()
    assert list(tokenizer.char_ids(word)) == bilm_tf_char_ids(word)
    assert len(tokenizer.char_ids(word)) == 50


def test_long_word_is_truncated_to_48_bytes_then_end_of_word():
    ids = ElmoTokenizer().char_ids("é" * 30)  # 60 bytes
    assert ids[0] == 259 and ids[49] == 260 and set(ids[1:49]) == {0xC3 + 1, 0xA9 + 1}


def test_batch_has_char_ids_mask_and_word_ids_padded_on_the_right():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    batch = tokenizer(["the cat sat", "", "the  dog\t"], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (3, 3, 50)
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 0], [1, 1, 0]]
    pad = tokenizer.pad_token_id
    assert pad == VOCAB.index("</S>")
    assert batch["input_word_ids"].tolist() == [[3, 4, 5], [pad, pad, pad], [3, 2, pad]]  # "dog" is <UNK>
    assert batch["input_ids"][2, 1].tolist() == bilm_tf_char_ids("dog")
    assert (batch["input_ids"][1] == 0).all() and (batch["input_ids"][2, 2] == 0).all()


def test_pre_split_words_and_single_sentences():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    single = tokenizer(["the", "New York"], is_split_into_words=True)
    assert single["input_word_ids"] == [3, 2]
    assert single["input_ids"][1] == bilm_tf_char_ids("New York")  # a given word is kept whole
    batch = tokenizer([["the", "cat"], []], is_split_into_words=True, padding=True, return_tensors="np")
    assert batch["input_ids"].shape == (2, 2, 50) and batch["attention_mask"].tolist() == [[1, 1], [0, 0]]
    with_tensors = tokenizer("the cat", return_tensors="pt")
    assert with_tensors["input_ids"].shape == (1, 2, 50)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"padding": True},
        {"padding": "max_length", "max_length": 5},
        {"truncation": True, "max_length": 2, "padding": True},
        {"padding": True, "return_tensors": "pt"},
    ],
)
def test_word_ids_are_what_a_fast_tokenizer_gives(tmp_path, options):
    """On words a BERT fast tokenizer keeps whole (one token per word, as ELMo's), without its special tokens,
    the two give the same word_ids: word i at token i, None at padding, the first words after truncation."""
    from hf_ctx.data.wordpiece import train_wordpiece_tokenizer

    text = tmp_path / "text.txt"
    text.write_text("the cat sat\n" * 20)
    bert = train_wordpiece_tokenizer([text], vocab_size=60, min_frequency=1, model_max_length=16)
    elmo = ElmoTokenizer(vocab=VOCAB)
    sentences = [["the", "cat", "sat"], ["cat"], []]
    ours = elmo(sentences, is_split_into_words=True, **options)
    theirs = bert(sentences, is_split_into_words=True, add_special_tokens=False, **options)
    assert bert.is_fast and [len(w) for w in theirs["input_ids"]] == [len(w) for w in ours["input_ids"]]
    for i in range(len(sentences)):
        assert ours.word_ids(i) == theirs.word_ids(i)
    widths = [len(row) for row in ours["input_ids"]]
    assert ours.word_ids(1) == [0, *[None] * (widths[1] - 1)] and ours.word_ids(2) == [None] * widths[2]
    # BERT's [CLS] and [SEP] are None too; ELMo adds no special tokens (its model adds <S> and </S>).
    assert bert(sentences[:1], is_split_into_words=True).word_ids(0) == [None, 0, 1, 2, None]
    # One sentence, unbatched; and the word ids survive pickling (as `datasets.map` pickles).
    assert elmo(["the", "cat"], is_split_into_words=True).word_ids() == [0, 1]
    assert pickle.loads(pickle.dumps(ours)).word_ids(0) == ours.word_ids(0)


def test_character_only_tokenizer_returns_no_word_ids():
    batch = ElmoTokenizer()(["a b"], return_tensors="pt")
    assert set(batch) == {"input_ids", "attention_mask"}


def test_truncation_and_max_length_padding():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    batch = tokenizer(["the cat sat the cat", "cat"], truncation=True, max_length=3, padding="max_length")
    assert [len(ids) for ids in batch["input_ids"]] == [3, 3]
    assert batch["input_word_ids"][0] == [3, 4, 5]
    padded = tokenizer(["cat"], padding=True, pad_to_multiple_of=4)
    assert len(padded["input_ids"][0]) == 4
    with pytest.raises(ValueError, match="truncation"):
        tokenizer(["the cat sat"], padding="max_length", max_length=2)


def test_data_collator_pads_like_the_tokenizer():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    sentences = ["the cat sat", "cat", "sat the"]
    features = [tokenizer(s) for s in sentences]
    collated = DataCollatorWithPadding(tokenizer)(features)
    direct = tokenizer(sentences, padding=True, return_tensors="pt")
    for key in direct:
        assert torch.equal(collated[key], direct[key])
    labelled = tokenizer.pad([{**f, "labels": [1] * len(f["input_ids"])} for f in features], return_tensors="pt")
    assert labelled["labels"].tolist() == [[1, 1, 1], [1, -100, -100], [1, 1, -100]]


def test_save_and_load_round_trip(tmp_path):
    tokenizer = ElmoTokenizer(vocab=VOCAB, max_characters_per_token=20)
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "vocab.txt").read_text().split("\n")[:6] == VOCAB  # bilm-tf's vocabulary format
    ElmoConfig(
        char_cnn={"max_characters_per_token": 20, "filters": [[1, 4]]},
        lstm={"dim": 8, "projection_dim": 4},
        vocab_size=6,
    ).save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert isinstance(loaded, ElmoTokenizer)
    assert loaded.words == VOCAB and loaded.max_characters_per_token == 20
    assert loaded(["the dog"]) == tokenizer(["the dog"])
    assert len(loaded("the")["input_ids"][0]) == 20

    char_only = tmp_path / "chars"
    ElmoTokenizer().save_pretrained(char_only)
    reloaded = ElmoTokenizer.from_pretrained(char_only)
    assert not reloaded.has_word_vocabulary and "input_word_ids" not in reloaded("a b")


def test_vocabulary_file_of_bilm_tf(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("</S>\n<S>\n<UNK>\nthe\n!!!MAXTERMID\n", encoding="utf-8")
    tokenizer = ElmoTokenizer(vocab_file=str(path))
    assert tokenizer.get_vocab() == {"</S>": 0, "<S>": 1, "<UNK>": 2, "the": 3}
    assert tokenizer.convert_ids_to_tokens([3, 1]) == ["the", "<S>"]
    path.write_text("the\ncat\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lacks the special words"):
        ElmoTokenizer(vocab_file=str(path))
    path.write_text("<S>\n</S>\n<UNK>\ntwo words\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.txt:4"):
        ElmoTokenizer(vocab_file=str(path))


def test_bad_input_is_a_clear_error():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    with pytest.raises(ValueError, match="appears twice"):
        ElmoTokenizer(vocab=VOCAB + ["cat"])
    with pytest.raises(ValueError, match="different numbers of words"):
        tokenizer(["the cat", "cat"], return_tensors="pt")
    with pytest.raises(ValueError, match="padded on the right"):
        tokenizer(["the cat", "cat"], padding=True, padding_side="left")
    with pytest.raises(ValueError, match="sentence pairs"):
        tokenizer("the", "cat")
    with pytest.raises(ValueError, match="is_split_into_words"):
        tokenizer([["the", "cat"]])
    with pytest.raises(ValueError, match="character ids"):
        tokenizer.pad([{"input_ids": [[1] * 49]}])


# transformers' tokenizer contract where it applies (transformers' own tests of it: test_tokenization_elmo_contract.py)


def test_left_truncation_keeps_the_last_words_set_on_the_tokenizer_or_in_the_call():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    sentences = ["the cat sat", "cat"]
    assert tokenizer(sentences, truncation=True, max_length=2)["input_word_ids"] == [[3, 4], [4]]
    in_the_call = tokenizer(sentences, truncation=True, max_length=2, truncation_side="left")
    assert in_the_call["input_word_ids"] == [[4, 5], [4]]
    assert in_the_call["input_ids"][0] == [bilm_tf_char_ids("cat"), bilm_tf_char_ids("sat")]
    tokenizer.truncation_side = "left"
    assert tokenizer(sentences, truncation=True, max_length=2)["input_word_ids"] == [[4, 5], [4]]
    left = ElmoTokenizer(vocab=VOCAB, truncation_side="left")
    assert left(["the cat sat"], truncation=True, max_length=1, padding="max_length")["input_word_ids"] == [[5]]
    with pytest.raises(ValueError, match="truncation_side must be 'left' or 'right'"):
        tokenizer("the cat", truncation=True, max_length=1, truncation_side="middle")


def test_added_words_are_encoded_counted_and_saved(tmp_path):
    """As a BERT tokenizer: add_tokens gives the new words the next ids, len() and get_vocab() count them, the
    text encodes to them, and they survive save/load (in tokenizer_config.json; vocab.txt stays bilm-tf's)."""
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    assert tokenizer.add_tokens(["bim", "bambam", "cat"]) == 2  # "cat" is a word already
    assert len(tokenizer) == len(VOCAB) + 2
    assert tokenizer.get_vocab() == {**{w: i for i, w in enumerate(VOCAB)}, "bim": 6, "bambam": 7}
    assert tokenizer("the bim bambam dog")["input_word_ids"] == [3, 6, 7, 2]
    assert tokenizer.convert_ids_to_tokens([6, 7]) == ["bim", "bambam"]
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "vocab.txt").read_text().split() == VOCAB
    loaded = ElmoTokenizer.from_pretrained(tmp_path)
    assert len(loaded) == len(VOCAB) + 2 and loaded.get_vocab() == tokenizer.get_vocab()
    assert loaded("the bim bambam dog")["input_word_ids"] == [3, 6, 7, 2]


@pytest.mark.parametrize("token", ["new york", " cat", "a\tb", "<a b>"])
@pytest.mark.parametrize("special", [False, True])
def test_a_token_holding_whitespace_is_refused_by_add_tokens(token, special):
    """Text is split on whitespace before words are looked up: such a token was added and never met, in silence."""
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    with pytest.raises(ValueError, match=rf"^cannot add {re.escape(repr(token))}: ElmoTokenizer's words hold no "):
        tokenizer.add_tokens([token], special_tokens=special)
    assert len(tokenizer) == len(VOCAB)


@pytest.mark.parametrize("text", [None, 5, ["the", "cat"]])
def test_tokenize_of_no_text_is_named(text):
    """Before: `'NoneType' object has no attribute 'split'` (BERT's tokenizer: a ValueError naming the types)."""
    with pytest.raises(ValueError, match=rf"^tokenize takes one text \(a string\), got {type(text).__name__}$"):
        ElmoTokenizer(vocab=VOCAB).tokenize(text)


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "big"])
def test_a_model_max_length_that_is_no_number_of_words_is_refused_where_it_is_given(value):
    """Before: accepted, and every call with truncation=True refused "max_length ... got 0", naming another option."""
    with pytest.raises(
        ValueError, match=rf"^model_max_length must be a positive integer, got {re.escape(repr(value))}$"
    ):
        ElmoTokenizer(vocab=VOCAB, model_max_length=value)


def test_a_saved_lowercase_words_of_another_kind_is_named(tmp_path):
    """Before: a tokenizer_config.json's `"lowercase_words": "no"` was read as True, and words were lower-cased."""
    ElmoTokenizer(vocab=VOCAB).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "lowercase_words": "no"}))
    with pytest.raises(ValueError, match=r"^lowercase_words must be true or false, got 'no'$"):
        AutoTokenizer.from_pretrained(tmp_path)


def test_decode_reads_back_input_ids_and_input_word_ids():
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    sentences = ["the cat sat", "Zürich", "", "<S> 日本語"]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    assert tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=True) == [
        "the cat sat",
        "Zürich",
        "",
        "日本語",
    ]
    assert tokenizer.decode(batch["input_ids"]) == tokenizer.batch_decode(batch["input_ids"])
    assert tokenizer.decode(batch["input_ids"][1]) == "Zürich </S> </S>"  # padding words are pad_token, as ids
    assert tokenizer.decode(batch["input_word_ids"][1]) == "<UNK> </S> </S>"
    assert tokenizer.decode(tokenizer("the dog")["input_ids"]) == "the dog"
    assert tokenizer.decode(tokenizer("the dog")["input_word_ids"]) == "the <UNK>"
    # A word longer than 48 bytes keeps its first 48, cut here inside a character.
    assert tokenizer.decode(tokenizer("a" + "é" * 30)["input_ids"]) == "a" + "é" * 23 + "\ufffd"
    not_a_word = [259] + [300] * 49
    with pytest.raises(ValueError, match="not the character ids of a word"):
        tokenizer.decode([not_a_word])


def test_special_tokens_mask_and_token_type_ids_are_a_fast_tokenizers(tmp_path):
    """On words a BERT fast tokenizer keeps whole, without its special tokens, both give the same masks and types:
    0 at every word, and the mask 1 at padding."""
    from hf_ctx.data.wordpiece import train_wordpiece_tokenizer

    text = tmp_path / "text.txt"
    text.write_text("the cat sat\n" * 20)
    bert = train_wordpiece_tokenizer([text], vocab_size=60, min_frequency=1, model_max_length=16)
    options = {"return_special_tokens_mask": True, "return_token_type_ids": True, "padding": True}
    sentences = [["the", "cat", "sat"], ["cat"]]
    ours = ElmoTokenizer(vocab=VOCAB)(sentences, is_split_into_words=True, return_tensors="pt", **options)
    theirs = bert(sentences, is_split_into_words=True, add_special_tokens=False, return_tensors="pt", **options)
    assert ours["special_tokens_mask"].tolist() == theirs["special_tokens_mask"].tolist() == [[0, 0, 0], [0, 1, 1]]
    assert ours["token_type_ids"].tolist() == theirs["token_type_ids"].tolist() == [[0, 0, 0], [0, 0, 0]]
    single = ElmoTokenizer()("the cat", return_special_tokens_mask=True)
    assert single["special_tokens_mask"] == [0, 0] and "token_type_ids" not in single


def test_a_sentence_longer_than_model_max_length_is_a_warning(caplog):
    tokenizer = ElmoTokenizer(vocab=VOCAB, model_max_length=3)
    with caplog.at_level(logging.WARNING):
        tokenizer("the cat sat")
        assert caplog.text == ""
        tokenizer(["the cat", "the cat sat the cat"])
        tokenizer("the cat sat the cat sat")  # once per tokenizer, as transformers' tokenizers warn
    assert caplog.text.count("a sentence has 5 words, more than this tokenizer's model_max_length=3") == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ElmoTokenizer(vocab=VOCAB, model_max_length=3)("the cat sat the cat", truncation=True)
    assert caplog.text == ""


@pytest.mark.parametrize(
    "option, message",
    [
        ({"return_overflowing_tokens": True}, r"no overflowing tokens \(return_overflowing_tokens\)"),
        ({"return_offsets_mapping": True}, r"no character offsets \(return_offsets_mapping\)"),
    ],
)
def test_options_it_cannot_honour_are_refused_by_name(option, message):
    with pytest.raises(ValueError, match=message):
        ElmoTokenizer(vocab=VOCAB)(["the cat sat"], truncation=True, max_length=2, **option)


@pytest.mark.parametrize(
    "options",
    [
        {"truncation": True, "max_length": 0},
        {"truncation": True, "max_length": -1},
        {"padding": "max_length", "max_length": -1},
        {"padding": True, "pad_to_multiple_of": 0},
        {"padding": True, "pad_to_multiple_of": -2},
        {"padding": True, "pad_to_multiple_of": 2.5},
    ],
)
def test_lengths_that_are_no_number_of_words_are_refused_by_name(options):
    """Before: max_length=0 gave sentences of no words, -1 cut the last word, pad_to_multiple_of=0 did nothing."""
    name = "max_length" if "max_length" in options else "pad_to_multiple_of"
    value = options[name]
    tokenizer = ElmoTokenizer(vocab=VOCAB)
    message = rf"^{name} must be a positive number of words \(or None\), got {value}$"
    with pytest.raises(ValueError, match=message):
        tokenizer(["the cat sat"], **options)
    with pytest.raises(ValueError, match=message):
        tokenizer.pad([tokenizer("the cat")], **{key: v for key, v in options.items() if key != "truncation"})
