"""GLUE readers: the real files' row counts, the official layout of every task, bad files, submission files."""

import csv

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import datasets
from datasets import ClassLabel, Value

from hf_ctx import train_wordpiece_tokenizer
from hf_ctx.data.glue import (
    encode_glue_for_subwords,
    load_glue,
    load_glue_files,
    read_glue_file,
    write_glue_predictions,
)
from hf_ctx.data.glue_tasks import GLUE_TASKS, glue_task

# Headers of the official glue_data files (CoLA's train/dev files have none).
OFFICIAL_HEADERS = {
    ("STS-B", "train"): "index genre filename year old_index source1 source2 sentence1 sentence2 score",
    ("STS-B", "test"): "index genre filename year old_index source1 source2 sentence1 sentence2",
    ("QQP", "train"): "id qid1 qid2 question1 question2 is_duplicate",
    ("QQP", "test"): "id question1 question2",
    ("MNLI", "train"): "index promptID pairID genre sentence1_binary_parse sentence2_binary_parse sentence1_parse "
    "sentence2_parse sentence1 sentence2 label1 gold_label",
    ("MNLI", "dev"): "index promptID pairID genre sentence1_binary_parse sentence2_binary_parse sentence1_parse "
    "sentence2_parse sentence1 sentence2 label1 label2 label3 label4 label5 gold_label",
    ("MNLI", "test"): "index promptID pairID genre sentence1_binary_parse sentence2_binary_parse sentence1_parse "
    "sentence2_parse sentence1 sentence2",
    ("QNLI", "train"): "index question sentence label",
    ("QNLI", "test"): "index question sentence",
    ("MRPC", "train"): "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
    ("MRPC", "test"): "index\t#1 ID\t#2 ID\t#1 String\t#2 String",
    ("RTE", "train"): "index sentence1 sentence2 label",
    ("RTE", "test"): "index sentence1 sentence2",
}


def write_tsv(path, header: str | None, rows: list[dict] | list[list]):
    """Write a GLUE-style TSV; `header` is space- or tab-separated names, dict rows fill the named columns
    (others get a placeholder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = header.split("\t") if "\t" in (header or "") else (header or "").split()
    lines = [] if header is None else ["\t".join(names)]
    for row in rows:
        fields = row if isinstance(row, list) else [str(row.get(name, f"x{i}")) for i, name in enumerate(names)]
        lines.append("\t".join(fields))
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


# --- the real files ---------------------------------------------------------------------------------------

REAL_ROWS = {"cola": (8551, 1043), "sst2": (67349, 872), "mrpc": (3668, 408), "rte": (2490, 277), "wnli": (635, 71)}


@pytest.mark.data
@pytest.mark.parametrize("task", list(REAL_ROWS))
def test_real_glue_row_counts_and_labels(shared_data, task):
    glue = load_glue(task, shared_data / "glue")
    assert {split: len(glue[split]) for split in ("train", "validation")} == dict(
        zip(("train", "validation"), REAL_ROWS[task])
    )
    assert glue["train"].features == GLUE_TASKS[task].features()
    for split in glue.values():
        assert set(split["label"]) == {0, 1}
        assert split["idx"] == list(range(len(split)))
        for column in GLUE_TASKS[task].text_columns:
            assert all(text.strip() for text in split[column]), f"an empty {column} in {task}"


@pytest.mark.data
def test_real_mrpc_keeps_bare_quotes(shared_data):
    path = shared_data / "glue" / "MRPC" / "dev.tsv"
    dev = read_glue_file(path, "mrpc", "validation")
    assert len(dev["idx"]) == 408
    # The first pair's second sentence opens a quote it never closes.
    assert dev["sentence2"][0] == '"The foodservice pie business does not fit our long-term growth strategy.'
    assert dev["label"][:2] == [1, 0]
    # Why quoting must be off: a reader that honours quotes merges lines and loses pairs.
    with path.open(encoding="utf-8-sig") as f:
        assert sum(1 for _ in csv.reader(f, delimiter="\t")) - 1 < 408


@pytest.mark.data
def test_real_cola_has_no_header_and_string_labels_map(shared_data):
    cola = read_glue_file(shared_data / "glue" / "CoLA" / "dev.tsv", "cola", "validation")
    assert cola["sentence"][0] == "The sailors rode the breeze clear of the rocks."
    assert cola["label"][0] == 1
    rte = load_glue("rte", shared_data / "glue" / "RTE")["validation"]
    assert rte[0]["sentence2"] == "Christopher Reeve had an accident."
    assert rte.features["label"].int2str(rte[0]["label"]) == "not_entailment"


# --- every task's layout (synthetic files in the official format) -----------------------------------------


def test_hub_features_match_the_hub_copy():
    # Columns and label names of `datasets.load_dataset("nyu-mll/glue", task)`, from its dataset card.
    hub = {
        "cola": (["sentence"], ["unacceptable", "acceptable"]),
        "sst2": (["sentence"], ["negative", "positive"]),
        "mrpc": (["sentence1", "sentence2"], ["not_equivalent", "equivalent"]),
        "qqp": (["question1", "question2"], ["not_duplicate", "duplicate"]),
        "stsb": (["sentence1", "sentence2"], None),
        "mnli": (["premise", "hypothesis"], ["entailment", "neutral", "contradiction"]),
        "qnli": (["question", "sentence"], ["entailment", "not_entailment"]),
        "rte": (["sentence1", "sentence2"], ["entailment", "not_entailment"]),
        "wnli": (["sentence1", "sentence2"], ["not_entailment", "entailment"]),
        "ax": (["premise", "hypothesis"], ["entailment", "neutral", "contradiction"]),
    }
    assert set(hub) == set(GLUE_TASKS)
    for name, (columns, labels) in hub.items():
        features = GLUE_TASKS[name].features()
        assert list(features) == [*columns, "label", "idx"]
        assert features["idx"] == Value("int32")
        assert features["label"] == (Value("float32") if labels is None else ClassLabel(names=labels))


def test_task_names_resolve_in_any_spelling():
    assert glue_task("SST-2").name == "sst2"
    assert glue_task("sts-b").name == "stsb"
    assert glue_task("MNLI").name == "mnli"
    assert glue_task("diagnostic").name == "ax"
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        glue_task("squad")


def test_stsb_scores_and_test_index(tmp_path):
    folder = tmp_path / "STS-B"
    write_tsv(
        folder / "train.tsv",
        OFFICIAL_HEADERS[("STS-B", "train")],
        [
            {
                "index": 0,
                "sentence1": "A plane is taking off.",
                "sentence2": "An air plane is taking off.",
                "score": "5.000",
            },
            {"index": 1, "sentence1": "A man plays a flute.", "sentence2": "A man is eating.", "score": "0.250"},
        ],
    )
    write_tsv(
        folder / "dev.tsv",
        OFFICIAL_HEADERS[("STS-B", "train")],
        [
            {"index": 0, "sentence1": "a", "sentence2": "b", "score": "3.8"},
        ],
    )
    write_tsv(
        folder / "test.tsv",
        OFFICIAL_HEADERS[("STS-B", "test")],
        [
            {"index": 7, "sentence1": "c", "sentence2": "d"},
            {"index": 8, "sentence1": "e", "sentence2": "f"},
        ],
    )
    glue = load_glue("stsb", tmp_path)
    assert list(glue) == ["train", "validation", "test"]
    assert glue["train"]["label"] == pytest.approx([5.0, 0.25])
    assert glue["train"]["sentence2"] == ["An air plane is taking off.", "A man is eating."]
    assert glue["validation"]["label"] == pytest.approx([3.8])
    assert glue["test"]["label"] == [-1, -1]
    assert glue["test"]["idx"] == [7, 8]  # a submission is keyed by the test file's index column


def test_qqp_columns_and_quotes(tmp_path):
    folder = tmp_path / "QQP"
    rows = [
        {"id": 402555, "question1": 'How do I say "hello"?', "question2": 'What does "hi" mean?', "is_duplicate": 0},
        {"id": 360472, "question1": 'Is 5" tall?', "question2": 'How tall is 5"?', "is_duplicate": 1},
    ]
    write_tsv(folder / "train.tsv", OFFICIAL_HEADERS[("QQP", "train")], rows)
    write_tsv(folder / "dev.tsv", OFFICIAL_HEADERS[("QQP", "train")], rows[::-1])
    write_tsv(folder / "test.tsv", OFFICIAL_HEADERS[("QQP", "test")], [{"id": 0, "question1": "a", "question2": "b"}])
    glue = load_glue_files("qqp", folder)
    assert glue["train"]["question1"] == ['How do I say "hello"?', 'Is 5" tall?']
    assert glue["train"]["label"] == [0, 1]
    assert glue["train"]["idx"] == [0, 1]  # row numbers, as on the Hub, not QQP's pair ids
    assert glue["validation"]["label"] == [1, 0]
    assert glue["test"]["idx"] == [0]


def test_mnli_has_matched_and_mismatched_splits(tmp_path):
    folder = tmp_path / "MNLI"
    write_tsv(
        folder / "train.tsv",
        OFFICIAL_HEADERS[("MNLI", "train")],
        [
            {"sentence1": "The cat sat.", "sentence2": "A cat sat.", "label1": "neutral", "gold_label": "entailment"},
            {
                "sentence1": "It rained.",
                "sentence2": "It was dry.",
                "label1": "contradiction",
                "gold_label": "contradiction",
            },
        ],
    )
    write_tsv(
        folder / "dev_matched.tsv",
        OFFICIAL_HEADERS[("MNLI", "dev")],
        [{"sentence1": "p", "sentence2": "h", "label1": "entailment", "gold_label": "neutral"}],
    )
    write_tsv(
        folder / "dev_mismatched.tsv",
        OFFICIAL_HEADERS[("MNLI", "dev")],
        [{"sentence1": "p2", "sentence2": "h2", "gold_label": "contradiction"}] * 2,
    )
    write_tsv(
        folder / "test_matched.tsv",
        OFFICIAL_HEADERS[("MNLI", "test")],
        [{"index": 0, "sentence1": "a", "sentence2": "b"}],
    )
    write_tsv(
        folder / "test_mismatched.tsv",
        OFFICIAL_HEADERS[("MNLI", "test")],
        [{"index": 0, "sentence1": "c", "sentence2": "d"}],
    )
    glue = load_glue("MNLI", tmp_path)
    assert list(glue) == ["train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"]
    # The label is gold_label (the annotators' majority), not label1 (the writer's).
    assert glue["train"]["label"] == [0, 2]
    assert glue["train"]["premise"] == ["The cat sat.", "It rained."]
    assert glue["train"]["hypothesis"] == ["A cat sat.", "It was dry."]
    assert glue["validation_matched"]["label"] == [1]
    assert glue["validation_mismatched"]["label"] == [2, 2]
    assert glue["test_mismatched"]["premise"] == ["c"]
    # Only some splits, and a missing file named.
    assert list(load_glue_files("mnli", folder, splits=["validation_mismatched"])) == ["validation_mismatched"]
    (folder / "dev_matched.tsv").unlink()
    with pytest.raises(FileNotFoundError, match="dev_matched.tsv"):
        load_glue_files("mnli", folder, splits=["validation_matched"])


def test_qnli_labels_and_cola_test_header(tmp_path):
    write_tsv(
        tmp_path / "QNLI" / "train.tsv",
        OFFICIAL_HEADERS[("QNLI", "train")],
        [
            {"index": 0, "question": "Who?", "sentence": "Him.", "label": "entailment"},
            {"index": 1, "question": "When?", "sentence": "Blue.", "label": "not_entailment"},
        ],
    )
    write_tsv(
        tmp_path / "QNLI" / "test.tsv",
        OFFICIAL_HEADERS[("QNLI", "test")],
        [{"index": 0, "question": "q", "sentence": "s"}],
    )
    qnli = load_glue("qnli", tmp_path)
    assert qnli["train"]["label"] == [0, 1] and qnli["train"]["question"] == ["Who?", "When?"]
    assert qnli["test"]["sentence"] == ["s"]
    # CoLA: train/dev without a header (source, label, original mark, sentence), test with `index sentence`.
    write_tsv(tmp_path / "CoLA" / "train.tsv", None, [["gj04", "1", "", "Good one."], ["gj04", "0", "*", "One good."]])
    write_tsv(tmp_path / "CoLA" / "test.tsv", "index sentence", [["0", "Test one."], ["1", "Test two."]])
    cola = load_glue("cola", tmp_path)
    assert cola["train"]["sentence"] == ["Good one.", "One good."] and cola["train"]["label"] == [1, 0]
    assert cola["test"]["sentence"] == ["Test one.", "Test two."] and cola["test"]["idx"] == [0, 1]


def test_crlf_line_ends_and_trailing_blank_line(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_bytes(b"index\tsentence1\tsentence2\tlabel\r\n0\ta\tb\tentailment\r\n1\tc\td\tnot_entailment\r\n\r\n")
    rte = read_glue_file(path, "rte", "validation")
    assert rte["sentence2"] == ["b", "d"] and rte["label"] == [0, 1]


# --- bad files -----------------------------------------------------------------------------------------


def test_missing_header_column_names_file_and_column(tmp_path):
    path = write_tsv(tmp_path / "train.tsv", "index sentence1 label", [["0", "a", "entailment"]])
    with pytest.raises(ValueError, match=rf"{path}:1: .*\['sentence2'\]"):
        read_glue_file(path, "rte")
    path = write_tsv(tmp_path / "dev.tsv", OFFICIAL_HEADERS[("RTE", "test")], [["0", "a", "b"]])
    with pytest.raises(ValueError, match=r"dev.tsv:1: .*\['label'\]"):
        read_glue_file(path, "rte", "validation")


def test_row_with_missing_field_names_line(tmp_path):
    path = write_tsv(
        tmp_path / "train.tsv",
        OFFICIAL_HEADERS[("RTE", "train")],
        [["0", "a", "b", "entailment"], ["1", "only one sentence", "entailment"]],
    )
    with pytest.raises(ValueError, match=rf"{path}:3: 3 fields, but the header has 4 columns"):
        read_glue_file(path, "rte")


def test_unknown_label_names_value_and_line(tmp_path):
    path = write_tsv(
        tmp_path / "dev_matched.tsv",
        OFFICIAL_HEADERS[("MNLI", "dev")],
        [{"gold_label": "neutral"}, {"gold_label": "neutral"}, {"gold_label": "-"}],
    )
    with pytest.raises(ValueError, match=rf"{path}:4: unknown mnli label '-'"):
        read_glue_file(path, "mnli", "validation_matched")
    path = write_tsv(tmp_path / "train.tsv", None, [["gj04", "2", "", "Bad label."]])
    with pytest.raises(ValueError, match=rf"{path}:1: unknown cola label '2'"):
        read_glue_file(path, "cola")
    path = write_tsv(tmp_path / "sts.tsv", OFFICIAL_HEADERS[("STS-B", "train")], [{"score": "high"}])
    with pytest.raises(ValueError, match=rf"{path}:2: the stsb score 'high' is not a finite number"):
        read_glue_file(path, "stsb")


def test_empty_files_are_errors(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(ValueError, match=rf"{empty} is empty"):
        read_glue_file(empty, "sst2")
    with pytest.raises(ValueError, match=rf"{empty} is empty; expected cola examples"):
        read_glue_file(empty, "cola")  # no header expected, so nothing at all
    header_only = write_tsv(tmp_path / "header.tsv", "sentence label", [])
    with pytest.raises(ValueError, match=rf"{header_only} holds no sst2 examples"):
        read_glue_file(header_only, "sst2")
    with pytest.raises(FileNotFoundError, match="no wnli files"):
        load_glue_files("wnli", tmp_path)


def test_hub_path_checks_columns(monkeypatch):
    calls = []

    def fake_load_dataset(name, config, cache_dir=None):
        calls.append((name, config))
        return datasets.DatasetDict(
            {"train": datasets.Dataset.from_dict({"sentence": ["a"], "label": [0], "idx": [0]})}
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert load_glue("SST-2")["train"]["sentence"] == ["a"]
    with pytest.raises(ValueError, match=r"split 'train' lacks the column\(s\) \['premise', 'hypothesis'\]"):
        load_glue("mnli", dataset_name="someone/glue-copy")
    assert calls == [("nyu-mll/glue", "sst2"), ("someone/glue-copy", "mnli")]


# --- submission files and encoding ------------------------------------------------------------------------


def test_write_predictions_in_submission_format(tmp_path):
    path = write_glue_predictions(tmp_path, "rte", [0, 1, 2], [1, 0, 1])
    assert path.name == "RTE.tsv"
    assert path.read_text() == "index\tprediction\n0\tnot_entailment\n1\tentailment\n2\tnot_entailment\n"
    path = write_glue_predictions(tmp_path / "STS-B.tsv", "stsb", [5, 6], [4.12345, -0.5])
    assert path.read_text() == "index\tprediction\n5\t4.123\n6\t-0.500\n"
    assert write_glue_predictions(tmp_path, "cola", [0], [1]).read_text().splitlines()[1] == "0\t1"
    with pytest.raises(ValueError, match="several test files"):
        write_glue_predictions(tmp_path, "mnli", [0], [0])
    with pytest.raises(ValueError, match="2 indices but 1 predictions"):
        write_glue_predictions(tmp_path, "rte", [0, 1], [0])


def test_encode_pairs_for_bert(tmp_path):
    corpus = tmp_path / "text.txt"
    corpus.write_text("the cat sat on the mat\na dog ran in the park\n" * 20)
    tokenizer = train_wordpiece_tokenizer([corpus], vocab_size=100, min_frequency=1)
    data = datasets.Dataset.from_dict(
        {
            "sentence1": ["the cat sat", "the cat sat on the mat " * 10],
            "sentence2": ["a dog", "a dog ran"],
            "label": [0, 1],
            "idx": [0, 1],
        },
        features=GLUE_TASKS["rte"].features(),
    )
    encoded = encode_glue_for_subwords(data, "rte", tokenizer, max_seq_length=16)
    assert encoded.column_names == ["label", "idx", "input_ids", "token_type_ids", "attention_mask"]
    tokens = tokenizer.convert_ids_to_tokens(encoded[0]["input_ids"])
    assert tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "[SEP]"]
    assert encoded[0]["token_type_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]
    # The long first sentence is cut, the short second one kept whole.
    long = tokenizer.convert_ids_to_tokens(encoded[1]["input_ids"])
    assert len(long) == 16 and long[-5:] == ["[SEP]", "a", "dog", "ran", "[SEP]"]


def test_word_encoding_for_elmo_joins_pairs_and_cuts_the_longer_sentence(caplog):
    from datasets import Dataset

    from hf_ctx import ElmoTokenizer
    from hf_ctx.data.glue import encode_glue_for_words
    from hf_ctx.data.words import split_words

    assert split_words("It's 3.5 stars, isn't it?") == ["It", "'s", "3.5", "stars", ",", "is", "n't", "it", "?"]
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "a", "b", "c"])
    pairs = Dataset.from_dict(
        {"sentence1": ["a b", "a a a a a a"], "sentence2": ["c", "b b"], "label": [1, 0], "idx": [0, 1]}
    )
    with caplog.at_level("WARNING"):
        encoded = encode_glue_for_words(pairs, "mrpc", tokenizer, max_words=7)
    assert encoded.column_names == ["label", "idx", "input_ids", "input_word_ids", "attention_mask"]
    # a b </S> <S> c; and the six a's cut to three so that a a a </S> <S> b b fits in 7 words
    assert encoded["input_word_ids"][0] == [3, 4, 1, 0, 5]
    assert encoded["input_word_ids"][1] == [3, 3, 3, 1, 0, 4, 4]
    assert encoded["input_ids"][0][2] == list(tokenizer.char_ids("</S>"))
    assert "1 of 2 examples are longer than max_words=7" in caplog.text
    single = Dataset.from_dict({"sentence": ["", "c a"], "label": [0, 1], "idx": [0, 1]})
    encoded = encode_glue_for_words(single, "sst2", tokenizer, max_words=5)
    assert encoded["input_word_ids"] == [[1], [5, 3]]  # an empty text reads as a lone </S>


def test_invalid_utf8_in_a_glue_file_names_file_and_line(tmp_path):
    from hf_ctx.data.glue import read_glue_file

    path = tmp_path / "train.tsv"
    path.write_bytes(b"sentence\tlabel\ngood film\t1\nna\xefve plot\t0\n")
    with pytest.raises(ValueError, match=rf"{path}:3: not valid UTF-8"):
        read_glue_file(path, "sst2", "train")


def test_a_test_file_index_given_twice_and_a_gzip_file_are_named(tmp_path):
    """Before: two rows of index 0 gave a submission file with index 0 twice, in silence; a gzip-compressed TSV was
    "not valid UTF-8" only."""
    import gzip

    from hf_ctx.data.glue import read_glue_file

    path = tmp_path / "test.tsv"
    path.write_text("index\tsentence\n0\ta film\n1\tanother\n0\ta third\n")
    with pytest.raises(ValueError, match=rf"^{path}:4: the index '0' is also the index of line 2; the predictions"):
        read_glue_file(path, "sst2", "test")
    path.write_bytes(gzip.compress(b"sentence\tlabel\ngood film\t1\n"))
    with pytest.raises(ValueError, match=rf"^{path}:1: not valid UTF-8 .*\(it is gzip-compressed: decompress it"):
        read_glue_file(path, "sst2", "train")


# --- the task records: what run_glue and the metric module read -------------------------------------------


def test_records_of_the_tasks_not_yet_run_elsewhere():
    """STS-B, MNLI, QQP and QNLI: labels in class-id order as the files write them, the metrics GLUE reports,
    the metric configurations (one per MNLI dev set), and how model outputs become predictions."""
    import numpy as np

    expected = {
        "stsb": ((), 1, ("pearson", "spearmanr"), ["stsb"]),
        "mnli": (
            ("entailment", "neutral", "contradiction"),
            3,
            ("accuracy",),
            ["mnli", "mnli_matched", "mnli_mismatched"],
        ),
        "qqp": (("0", "1"), 2, ("accuracy", "f1"), ["qqp"]),
        "qnli": (("entailment", "not_entailment"), 2, ("accuracy",), ["qnli"]),
    }
    for name, (values, num_labels, metrics, configurations) in expected.items():
        task = GLUE_TASKS[name]
        assert (task.label_values, task.num_labels, task.metrics) == (values, num_labels, metrics)
        assert task.metric_configurations == configurations
    logits = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5]])
    assert GLUE_TASKS["mnli"].decode(logits).tolist() == [1, 0]
    assert GLUE_TASKS["mnli"].decode((logits, np.zeros((2, 4, 3)))).tolist() == [1, 0]  # hidden states beside
    assert GLUE_TASKS["stsb"].decode(np.array([[4.25], [0.5]])).tolist() == [4.25, 0.5]
    assert GLUE_TASKS["mnli"].validation_splits == ["validation_matched", "validation_mismatched"]
    assert GLUE_TASKS["mnli"].submission_files == {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}


def test_every_record_is_scored_by_the_metric_module():
    """The metric module's configurations and result keys come from the same records."""
    from hf_ctx.metrics import load_metric

    for task in GLUE_TASKS.values():
        for configuration in task.metric_configurations:
            predictions = [0.5, 2.0, 4.0] if task.is_regression else [0, 1, 1]
            references = [1.0, 2.5, 3.0] if task.is_regression else [0, 1, 0]
            result = load_metric("glue", configuration).compute(predictions=predictions, references=references)
            assert tuple(result) == task.metrics
