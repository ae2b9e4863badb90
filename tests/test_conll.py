"""CoNLL reading, tag schemes, label alignment, long-sentence splitting, prediction files, the seqeval metric."""

import json
import logging
import re

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
pytest.importorskip("evaluate")
from datasets import ClassLabel, Dataset, Features, Sequence, Value
from seqeval.metrics.sequence_labeling import get_entities
from transformers import EvalPrediction

from hf_ctx.data.conll import (
    align_labels,
    check_labels,
    encode_tagged_words,
    load_conll_dataset,
    load_hub_ner_dataset,
    merge_split_predictions,
    ner_metrics,
    read_conll,
    split_long_sentences,
    subword_counts,
    write_conll_predictions,
)
from hf_ctx.data.synthetic_ner import generate_ner_corpus
from hf_ctx.input_checks import IGNORE_INDEX
from hf_ctx.metrics import load_metric
from hf_ctx.tag_schemes import convert_tags, count_scheme_breaks, detect_tag_scheme, sort_labels

SAMPLE = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER


-DOCSTART- -X- -X- O

Kiev NNP I-NP I-LOC
Ukraine NNP I-NP B-LOC
"""


@pytest.fixture
def sample_file(tmp_path):
    path = tmp_path / "sample.conll"
    path.write_text(SAMPLE)
    return path


def test_read_conll_sentences_columns_and_lines(sample_file):
    sentences = read_conll(sample_file)
    assert [s["tokens"] for s in sentences] == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn"],
        ["Kiev", "Ukraine"],
    ]
    assert sentences[0]["pos_tags"] == ["NNP", "VBZ", "JJ", "NN", "."]
    assert sentences[0]["chunk_tags"] == ["I-NP", "I-VP", "I-NP", "I-NP", "O"]
    assert sentences[2]["ner_tags"] == ["I-LOC", "B-LOC"]
    assert [s["line"] for s in sentences] == [3, 9, 15]


def test_malformed_lines_name_file_and_line(tmp_path):
    path = tmp_path / "bad.conll"
    path.write_text("EU NNP I-NP I-ORG\nrejects VBZ O\n")
    with pytest.raises(ValueError, match=rf"{path}:2: expected 4 space-separated columns .* found 3"):
        read_conll(path)
    path.write_text("EU NNP I-NP I-ORG\n\nrejects VBZ I-VP ORG\n")
    with pytest.raises(ValueError, match=rf"{path}:3: NER tag 'ORG'"):
        read_conll(path)
    # Two-column files are fine when asked for (or inferred).
    path.write_text("EU B-ORG\nrejects O\n")
    assert read_conll(path, num_columns=None)[0]["ner_tags"] == ["B-ORG", "O"]


@pytest.mark.parametrize("content", ["", "\n\n", "-DOCSTART- -X- -X- O\n\n-DOCSTART- -X- -X- O\n"])
def test_a_file_without_sentences_is_refused_naming_it(tmp_path, content):
    """It read as zero sentences with a detected scheme."""
    from hf_ctx.data.conll import read_conll_file_with_scheme

    path = tmp_path / "empty.conll"
    path.write_text(content)
    with pytest.raises(ValueError, match=rf"{path} holds no sentences"):
        read_conll_file_with_scheme(path)


def test_scheme_detection():
    assert detect_tag_scheme([["I-PER", "I-PER", "O"], ["O"]]) == "IOB1"
    assert detect_tag_scheme([["B-PER", "I-PER", "B-PER"]]) == "IOB2"
    assert detect_tag_scheme([["B-PER", "E-PER", "S-LOC"]]) == "BIOES"
    # An I- after another type starts a new entity: only IOB1 allows that.
    assert detect_tag_scheme([["B-PER", "I-LOC"]]) == "IOB1"


IOB1 = ["I-ORG", "O", "I-PER", "I-PER", "B-PER", "I-LOC", "I-MISC", "I-MISC", "O", "I-LOC"]
IOB2 = ["B-ORG", "O", "B-PER", "I-PER", "B-PER", "B-LOC", "B-MISC", "I-MISC", "O", "B-LOC"]
BIOES = ["S-ORG", "O", "B-PER", "E-PER", "S-PER", "S-LOC", "B-MISC", "E-MISC", "O", "S-LOC"]


@pytest.mark.parametrize(
    "source,target", [(a, b) for a in ("IOB1", "IOB2", "BIOES") for b in ("IOB1", "IOB2", "BIOES")]
)
def test_conversion_between_schemes_by_hand(source, target):
    tags = {"IOB1": IOB1, "IOB2": IOB2, "BIOES": BIOES}
    assert convert_tags(tags[source], source, target) == tags[target]


def test_conversion_keeps_the_entities_seqeval_reads(sample_file):
    # seqeval's chunk reader (conlleval's rules) is the independent reference for which entities a sequence has.
    corpus = generate_ner_corpus(sample_file.parent / "syn", num_train=200, num_validation=1, num_test=1, num_raw=1)
    for sentence in read_conll(corpus["train"]):
        iob1 = sentence["ner_tags"]
        iob2 = convert_tags(iob1, "IOB1", "IOB2")
        assert get_entities(iob2) == get_entities(iob1)
        assert convert_tags(convert_tags(iob2, "IOB2", "BIOES"), "BIOES", "IOB1") == iob1


def test_real_conll2003_is_read_as_iob1_and_converted(shared_data):
    data = load_conll_dataset(
        {"train": shared_data / "conll2003" / "eng.train", "validation": shared_data / "conll2003" / "eng.testa"}
    )
    assert len(data["train"]) == 14041 and len(data["validation"]) == 3250
    assert sum(map(len, data["train"]["tokens"])) == 203621
    assert detect_tag_scheme(s["ner_tags"] for s in read_conll(shared_data / "conll2003" / "eng.testa")) == "IOB1"
    assert detect_tag_scheme(data["validation"]["ner_tags"]) == "IOB2"
    # The published entity counts of the dev set (Tjong Kim Sang & De Meulder, 2003, table 2).
    counts = {}
    for tags in data["validation"]["ner_tags"]:
        for entity_type, _, _ in get_entities(tags):
            counts[entity_type] = counts.get(entity_type, 0) + 1
    assert counts == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}


def test_unseen_label_at_evaluation_is_a_clear_error(tmp_path):
    (tmp_path / "train").write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n")
    (tmp_path / "dev").write_text("EU NNP I-NP I-ORG\n\nPeter NNP I-NP O\nBlackburn NNP I-NP I-PER\n")
    data = load_conll_dataset({"train": tmp_path / "train", "validation": tmp_path / "dev"})
    labels = sort_labels(t for tags in data["train"]["ner_tags"] for t in tags)
    assert labels == ["O", "B-ORG"]
    label2id = {label: i for i, label in enumerate(labels)}
    check_labels(data["train"], label2id, "train")
    with pytest.raises(ValueError, match=rf"label 'B-PER' \({tmp_path / 'dev'}:4\).*training data never has"):
        check_labels(data["validation"], label2id, "validation")


def test_hub_style_dataset_with_class_label_ids(tmp_path):
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    features = Features(
        {"id": Value("string"), "tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=names))}
    )
    Dataset.from_dict(
        {"id": ["0"], "tokens": [["Peter", "Blackburn", "in", "Kiev"]], "ner_tags": [[1, 2, 0, 3]]}, features=features
    ).to_parquet(tmp_path / "train.parquet")
    data = load_hub_ner_dataset(str(tmp_path))
    assert data["train"][0]["ner_tags"] == ["B-PER", "I-PER", "O", "B-LOC"]
    assert load_hub_ner_dataset(str(tmp_path), tag_scheme="IOB1")["train"][0]["ner_tags"] == [
        "I-PER",
        "I-PER",
        "O",
        "I-LOC",
    ]


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    from hf_ctx.data.wordpiece import train_wordpiece_tokenizer

    text = tmp_path_factory.mktemp("text") / "text.txt"
    text.write_text("the cat sat on the mat\nthe dog sat on the log\n" * 20)
    return train_wordpiece_tokenizer([text], vocab_size=60, min_frequency=1, model_max_length=16)


def test_first_subtoken_gets_the_label(wordpiece):
    label2id = {"O": 0, "B-PER": 1, "I-PER": 2}
    examples = {"tokens": [["the", "Thog", "dog"]], "ner_tags": [["O", "B-PER", "I-PER"]]}
    encoded = encode_tagged_words(examples, wordpiece, label2id, max_length=16)
    word_ids = wordpiece(examples["tokens"], is_split_into_words=True).word_ids(0)
    assert word_ids[0] is None and word_ids[-1] is None and word_ids.count(1) > 1
    expected, previous = [], None
    for w in word_ids:
        expected.append(-100 if w is None or w == previous else [0, 1, 2][w])
        previous = w
    assert encoded["labels"][0] == expected
    assert sorted(set(encoded["labels"][0])) == [-100, 0, 1, 2]


def test_one_label_alignment_serves_word_and_subword_tokenizers(wordpiece):
    """`align_labels` reads `word_ids()`: on ELMo's words it gives `encode_tagged_words`' labels (-100 at padding),
    on BERT's sub-tokens too (checked by hand above)."""
    from hf_ctx import ElmoTokenizer

    label2id = {"O": 0, "B-PER": 1, "I-PER": 2}
    examples = {"tokens": [["the", "Thog", "dog"], ["dog"]], "ner_tags": [["O", "B-PER", "I-PER"], ["B-PER"]]}
    for tokenizer, padding in ((ElmoTokenizer(), True), (wordpiece, False)):
        encodings = tokenizer(examples["tokens"], is_split_into_words=True, padding=padding)
        aligned = [align_labels(encodings.word_ids(i), tags, label2id) for i, tags in enumerate(examples["ner_tags"])]
        if tokenizer is wordpiece:
            assert aligned == encode_tagged_words(examples, wordpiece, label2id, max_length=16)["labels"]
        else:
            assert aligned == [[0, 1, 2], [1, IGNORE_INDEX, IGNORE_INDEX]]
            assert aligned[0] == encode_tagged_words(examples, tokenizer, label2id)["labels"][0]


def test_one_encoding_for_every_family_gives_what_the_two_encoders_gave(wordpiece):
    """`encode_tagged_words` on a BERT and an ELMo tokenizer gives exactly what `encode_for_subwords` and
    `encode_for_words` gave before they were merged (values recorded from them on this batch)."""
    from hf_ctx import ElmoTokenizer

    label2id = {"O": 0, "B-PER": 1, "I-PER": 2}
    examples = {
        "tokens": [["the", "Thog", "dog"], ["dog"], ["mat", "on", "Thog", "sat", "the", "cat", "Log"]],
        "ner_tags": [["O", "B-PER", "I-PER"], ["B-PER"], ["O", "O", "B-PER", "O", "O", "O", "B-PER"]],
    }
    bert = encode_tagged_words(examples, wordpiece, label2id, max_length=8)  # the third sentence is truncated
    assert bert == {
        "input_ids": [[2, 26, 24, 29, 31, 3], [2, 31, 3], [2, 33, 27, 24, 29, 28, 26, 3]],
        "token_type_ids": [[0] * 6, [0] * 3, [0] * 8],
        "attention_mask": [[1] * 6, [1] * 3, [1] * 8],
        "labels": [[-100, 0, 1, -100, 2, -100], [-100, 1, -100], [-100, 0, 0, 1, -100, 0, 0, -100]],
    }
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the", "dog", "cat"])
    elmo = encode_tagged_words(examples, tokenizer, label2id)
    assert list(elmo) == ["input_ids", "input_word_ids", "attention_mask", "labels"]
    assert elmo["input_ids"] == tokenizer(examples["tokens"], is_split_into_words=True)["input_ids"]
    assert [[word[:6] for word in sentence] for sentence in elmo["input_ids"]][1] == [[259, 101, 112, 104, 260, 261]]
    assert elmo["input_word_ids"] == [[3, 2, 4], [4], [2, 2, 2, 2, 3, 5, 2]]
    assert elmo["attention_mask"] == [[1, 1, 1], [1], [1] * 7]
    assert elmo["labels"] == [[0, 1, 2], [1], [0, 0, 1, 0, 0, 0, 1]]


def test_one_collator_pads_word_and_subword_labels_as_the_two_did(wordpiece):
    """`DataCollatorForTokenClassification` pads ELMo's word-level batches exactly as `DataCollatorWithPadding`
    (through `ElmoTokenizer.pad`) did, so one collator serves every family."""
    import torch
    from transformers import DataCollatorForTokenClassification, DataCollatorWithPadding

    from hf_ctx import ElmoTokenizer

    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the", "dog"])
    examples = {"tokens": [["the", "dog", "ran"], ["dog"]], "ner_tags": [["O", "B-PER", "O"], ["B-PER"]]}
    encoded = encode_tagged_words(examples, tokenizer, {"O": 0, "B-PER": 1})
    features = [{key: values[i] for key, values in encoded.items()} for i in range(2)]
    one, before = DataCollatorForTokenClassification(tokenizer)(features), DataCollatorWithPadding(tokenizer)(features)
    assert sorted(one) == sorted(before) == ["attention_mask", "input_ids", "input_word_ids", "labels"]
    for key in before:
        assert one[key].dtype == before[key].dtype and torch.equal(one[key], before[key]), key
    assert one["labels"].tolist() == [[0, 1, 0], [1, IGNORE_INDEX, IGNORE_INDEX]]


def test_long_sentences_are_split_and_merged_back_not_dropped(wordpiece, caplog):
    long = ["the", "cat", "sat", "on", "the", "mat"] * 5  # 30 words, 1 sub-token each
    data = Dataset.from_dict({"tokens": [long, ["the", "dog"]], "ner_tags": [["O"] * 30, ["O", "B-PER"]]})
    with caplog.at_level(logging.WARNING):
        pieces = split_long_sentences(data, subword_counts(wordpiece), budget=16 - 2)
    assert "1 of 2 sentences are longer than the model allows" in caplog.text
    assert [len(t) for t in pieces["tokens"]] == [14, 14, 2, 2]
    assert pieces["sentence_id"] == [0, 0, 0, 1] and pieces["word_start"] == [0, 14, 28, 0]
    label2id = {"O": 0, "B-PER": 1}
    encoded = encode_tagged_words(pieces[:], wordpiece, label2id, max_length=16)
    assert all(len(ids) <= 16 for ids in encoded["input_ids"])
    merged = merge_split_predictions(pieces, pieces["ner_tags"])
    assert merged == data["ner_tags"]


def one_cost_per_word(batch_tokens):
    return [[1] * len(words) for words in batch_tokens]


@pytest.mark.parametrize("scheme", ["IOB2", "BIOES", "BIOUL", "IOB1"])
def test_long_sentences_are_cut_outside_entities_and_each_piece_keeps_the_scheme(scheme):
    """A cut inside an entity left a piece starting with I-X, which a CRF's check of the gold tags rejects under
    IOB2 ("your tags are IOB1"). Pieces end before an entity where it fits; a 5-word ORG does not fit in a piece
    of 4 words, and is cut into two entities, each piece's tags written as a sentence of the scheme."""
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O", *["B-ORG", *["I-ORG"] * 4], "O"]
    words = [f"w{i}" for i in range(len(iob2))]
    data = Dataset.from_dict({"tokens": [words], "ner_tags": [convert_tags(iob2, "IOB2", scheme)]})
    pieces = split_long_sentences(data, one_cost_per_word, budget=4, tag_scheme=scheme)
    assert pieces["word_start"] == [0, 3, 7, 11]  # without the schemes: 0, 4, 8, 12 (inside LOC and ORG)
    iob2_pieces = [iob2[0:3], iob2[3:7], ["B-ORG", "I-ORG", "I-ORG", "I-ORG"], ["B-ORG", "O"]]
    assert pieces["ner_tags"] == [convert_tags(tags, "IOB2", scheme) for tags in iob2_pieces]
    assert count_scheme_breaks(pieces["ner_tags"], scheme) == 0
    assert merge_split_predictions(pieces, pieces["tokens"]) == [words]


def test_a_piece_cut_before_iob1s_b_tag_starts_with_i():
    """IOB1's B-X only follows an entity of the same type: a piece cut there starts its entity with I-X."""
    data = Dataset.from_dict({"tokens": [["a", "b", "c", "d"]], "ner_tags": [["I-LOC", "I-LOC", "B-LOC", "I-LOC"]]})
    pieces = split_long_sentences(data, one_cost_per_word, budget=2, tag_scheme="IOB1")
    assert pieces["ner_tags"] == [["I-LOC", "I-LOC"], ["I-LOC", "I-LOC"]]


def test_prediction_file_reads_back_as_conlleval_input(sample_file, tmp_path):
    sentences = Dataset.from_list(read_conll(sample_file))
    predicted = [["B-ORG", "O", "O", "O", "O"], ["B-PER", "I-PER"], ["B-LOC", "O"]]
    out = tmp_path / "predictions.txt"
    write_conll_predictions(out, sentences, predicted)
    lines = out.read_text().split("\n")
    assert lines[0] == "EU NNP I-NP I-ORG B-ORG"
    assert lines[5] == "" and lines[6] == "Peter NNP I-NP I-PER B-PER"
    back = read_conll(out, num_columns=5)
    assert [s["ner_tags"] for s in back] == predicted
    assert [s["column_3"] for s in back] == sentences["ner_tags"]
    with pytest.raises(ValueError, match="sentence 1 has 2 words but 1 predictions"):
        write_conll_predictions(out, sentences, [predicted[0], ["O"], predicted[2]])


# --- the seqeval metric module --------------------------------------------------------------------------


def test_seqeval_metric_by_hand():
    metric = load_metric("seqeval")
    references = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-PER"]]
    predictions = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "B-PER"]]
    # Gold entities: PER x2, LOC, ORG; predicted: PER x2 (right), ORG x2 (one right). 3 of 4 right each way.
    scores = metric.compute(predictions=predictions, references=references)
    assert scores["overall_precision"] == pytest.approx(3 / 4)
    assert scores["overall_recall"] == pytest.approx(3 / 4)
    assert scores["overall_f1"] == pytest.approx(3 / 4)
    assert scores["overall_accuracy"] == pytest.approx(6 / 7)
    assert scores["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 2}
    assert scores["ORG"]["precision"] == pytest.approx(0.5) and scores["ORG"]["recall"] == 1.0
    assert scores["LOC"]["recall"] == 0.0 and scores["LOC"]["number"] == 1
    # A boundary error is a miss, and IOB1 input is read like conlleval reads it.
    scores = metric.compute(predictions=[["I-PER", "I-PER", "O"]], references=[["B-PER", "O", "O"]])
    assert scores["overall_f1"] == 0.0
    assert metric.compute(predictions=[["I-PER", "B-PER"]], references=[["B-PER", "B-PER"]])["overall_f1"] == 1.0


def test_seqeval_metric_rejects_mismatched_lengths():
    metric = load_metric("seqeval")
    with pytest.raises(ValueError, match="sentence 0 has 1 predicted tags but 2 gold tags"):
        metric.compute(predictions=[["O"]], references=[["O", "O"]])


def test_every_module_takes_the_same_scheme_names():
    """ "BIO" and "IOB2" name one scheme in the data readers, the CRF constraints and TagLM's config alike."""
    from hf_ctx import TagLMConfig
    from hf_ctx.tag_schemes import SCHEME_NAMES, allowed_transitions

    assert convert_tags(IOB2, "BIO", "BIOES") == BIOES and convert_tags(BIOES, "BIOES", "BIO") == IOB2
    labels = dict(enumerate(["O", "B-PER", "I-PER"]))
    assert allowed_transitions("BIO", labels) == allowed_transitions("IOB2", labels)
    for name in SCHEME_NAMES:
        assert TagLMConfig(tag_scheme=name).tag_scheme == name
    for bad in (lambda: convert_tags(IOB2, "BILOU2", "IOB2"), lambda: allowed_transitions("BILOU2", labels)):
        with pytest.raises(ValueError, match=r"unknown tag scheme 'BILOU2'; expected one of \('BIO', 'IOB1'"):
            bad()


def test_a_dev_set_may_use_a_prefix_the_training_data_lacks():
    """Training saw only I-LOC (IOB1 style), the dev set has B-LOC: the labels hold every prefix of the scheme
    for each type seen, so the dev set is read; an unseen type is still an error."""
    from datasets import Dataset

    from hf_ctx.data.conll import check_labels
    from hf_ctx.tag_schemes import scheme_labels

    labels = scheme_labels(["O", "I-LOC", "B-PER", "I-PER"], "IOB2")
    assert labels == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert scheme_labels(["S-LOC"], "BIOES") == ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    label2id = {label: i for i, label in enumerate(labels)}
    check_labels(Dataset.from_dict({"ner_tags": [["B-LOC", "I-LOC", "O"]]}), label2id, "validation")
    with pytest.raises(ValueError, match="label 'B-ORG'"):
        check_labels(Dataset.from_dict({"ner_tags": [["B-ORG"]]}), label2id, "validation")


def test_invalid_utf8_names_file_and_line_and_a_byte_order_mark_is_not_a_word(tmp_path):
    from hf_ctx.data.conll import read_conll

    path = tmp_path / "train.txt"
    path.write_bytes(b"EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n" + b"Caf\xe9 NNP B-NP B-LOC\n")
    with pytest.raises(ValueError, match=rf"{path}:4: not valid UTF-8"):
        read_conll(path)
    path.write_bytes("\ufeffEU NNP B-NP B-ORG\n".encode())
    assert read_conll(path)[0]["tokens"] == ["EU"]


def test_label_all_tokens_labels_later_subtokens_with_the_inside_tag():
    label2id = {"O": 0, "B-PER": 1, "I-PER": 2, "NN": 3}
    word_ids = [None, 0, 0, 0, 1, 2, 2, None]
    tags = ["B-PER", "O", "NN"]
    assert align_labels(word_ids, tags, label2id) == [-100, 1, -100, -100, 0, 3, -100, -100]
    assert align_labels(word_ids, tags, label2id, label_all_tokens=True) == [-100, 1, 2, 2, 0, 3, 3, -100]


def test_a_file_mixing_two_schemes_is_named_at_the_sentence(tmp_path):
    path = tmp_path / "mixed.conll"
    path.write_text("a B-PER\nb E-PER\n\nc U-LOC\n")
    with pytest.raises(ValueError, match=r"mixed.conll:4: the tags mix the prefixes of BIOES and BIOUL"):
        load_conll_dataset({"train": path}, num_columns=2)


def test_plain_tags_of_any_column_are_kept_and_words_only_files_have_no_tags(tmp_path, sample_file):
    data = load_conll_dataset({"train": sample_file, "test": sample_file}, label_column="pos_tags")
    assert data["train"][0]["pos_tags"] == ["NNP", "VBZ", "JJ", "NN", "."]
    assert data["train"][0]["ner_tags"] == ["I-ORG", "O", "I-MISC", "O", "O"]  # other columns as the file has them
    words = tmp_path / "words.conll"
    words.write_text("EU\nrejects\n\nPeter\n")
    data = load_conll_dataset({"test": words})
    assert data["test"]["tokens"] == [["EU", "rejects"], ["Peter"]] and "ner_tags" not in data["test"].column_names


def test_plain_text_and_csv_tables_of_tagged_words(tmp_path):
    from hf_ctx.data.conll import load_tagged_table, read_plain_text

    text = tmp_path / "raw.txt"
    text.write_text("Peter flew to Brussels.\n\nHe's back!\n")
    data = read_plain_text(text)
    assert data["tokens"] == [["Peter", "flew", "to", "Brussels", "."], ["He", "'s", "back", "!"]]
    assert data["line"] == [1, 3]
    table = tmp_path / "train.csv"
    table.write_text("words,tags\nPeter Blackburn,I-PER I-PER\nsaid,O\n")
    data = load_tagged_table(table, "words", "tags", "IOB2")
    assert data["tokens"] == [["Peter", "Blackburn"], ["said"]]
    assert data["ner_tags"] == [["B-PER", "I-PER"], ["O"]]  # IOB1 read and converted


@pytest.mark.parametrize("word", ["New York", "big\tcity", "a\u00a0b"], ids=["space", "tab", "no-break-space"])
def test_a_word_or_tag_of_a_table_holding_whitespace_is_refused_naming_its_line(tmp_path, word):
    """A JSON-lines word "New York" was read, then written to predictions_*.txt as two columns (a row of four
    fields that no CoNLL reader, hf_ctx's included, reads back)."""
    from hf_ctx.data.conll import load_tagged_table

    table = tmp_path / "train.jsonl"
    table.write_text(json.dumps({"tokens": ["in", "a"], "ner_tags": ["O", "O"]}) + "\n"
                     + json.dumps({"tokens": ["in", word], "ner_tags": ["O", "B-LOC"]}) + "\n")  # fmt: skip
    with pytest.raises(ValueError, match=re.escape(f"{table}:2, column 'tokens': word 2 is {word!r}, which holds")):
        load_tagged_table(table)
    table.write_text(json.dumps({"tokens": ["in", "York"], "ner_tags": ["O", "B LOC"]}) + "\n")
    with pytest.raises(
        ValueError, match=r"train.jsonl:1, column 'ner_tags': tag 2 is 'B LOC', which holds whitespace"
    ):
        load_tagged_table(table)


def test_plain_tags_are_scored_by_token_accuracy():
    from transformers import EvalPrediction

    from hf_ctx.data.conll import ner_metrics

    compute = ner_metrics({0: "NN", 1: "VB"}, "plain")
    scores = compute(EvalPrediction(predictions=[[0, 1, 1, 0]], label_ids=[[0, 0, 1, -100]]))
    assert scores == {"accuracy": pytest.approx(2 / 3)}


def test_ner_metrics_count_the_predicted_transitions_the_scheme_forbids():
    id2label = {0: "O", 1: "B-PER", 2: "I-PER"}
    # Sentence 0 predicts O -> I-PER at its second word (a break under IOB2, not under IOB1); -100 positions are
    # not words (a sub-word model's later sub-tokens) and are not read.
    predictions = [[0, 2, 1, 2, 0], [0, 0, 0, 0, 0]]
    labels = [[0, 1, -100, 2, 0], [1, 2, 0, -100, -100]]
    prediction = EvalPrediction(predictions=predictions, label_ids=labels)
    assert ner_metrics(id2label, "IOB2")(prediction)["scheme_breaks"] == 1
    assert ner_metrics(id2label, "IOB1")(prediction)["scheme_breaks"] == 0
    assert "scheme_breaks" not in ner_metrics(id2label)(prediction)


# Words a BERT tokenizer's normalizer deletes whole: a soft hyphen, a control character, a variation selector
# (a combining mark, which accent stripping removes), a zero-width joiner.
DELETED_WORDS = ["\u00ad", "\x01", "\ufe0f", "\u200d"]


@pytest.mark.parametrize("deleted", DELETED_WORDS, ids=["soft-hyphen", "control", "variation-selector", "zwj"])
def test_a_word_the_tokenizer_maps_to_nothing_is_read_as_the_unknown_token_and_keeps_its_label(wordpiece, deleted):
    from hf_ctx.data.conll import encode_tagged_words, words_as_read

    words = ["the", deleted, "cat", "sat"]
    assert wordpiece(words, is_split_into_words=True, add_special_tokens=False).word_ids().count(1) == 0
    assert words_as_read(wordpiece, [words]) == [["the", wordpiece.unk_token, "cat", "sat"]]
    label2id = {"O": 0, "B-X": 1}
    encoded = encode_tagged_words({"tokens": [words], "ner_tags": [["O", "B-X", "O", "O"]]}, wordpiece, label2id)
    labels = [label for label in encoded["labels"][0] if label != IGNORE_INDEX]
    assert labels == [0, 1, 0, 0]  # one label a word, the deleted word's at the unknown token
    unknown = encoded["input_ids"][0][encoded["labels"][0].index(1)]
    assert unknown == wordpiece.unk_token_id
    clean = [["the", "cat", "sat"]]
    assert words_as_read(wordpiece, clean) is clean  # nothing to replace: the same list


def test_words_cut_off_by_truncation_are_not_read_as_unknown(wordpiece):
    from hf_ctx.data.conll import words_as_read

    words = ["the", "cat", "sat", "on", "the", "mat", "\u00ad"]
    encodings = wordpiece([words], is_split_into_words=True, truncation=True, max_length=4)
    assert words_as_read(wordpiece, [words], encodings, max_length=4) == [words]
    assert words_as_read(wordpiece, [words]) == [[*words[:-1], wordpiece.unk_token]]
