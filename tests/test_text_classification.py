"""hf_ctx.data.text_classification: a user's CSV/TSV/JSON-lines files read with transformers' run_glue.py
conventions, and every bad input named by file, line and column."""

import json

import pytest

pytest.importorskip("datasets")
from hf_ctx.data.text_classification import load_text_classification_files


def write_csv(path, header, rows, sep=","):
    path.write_text(sep.join(header) + "\n" + "".join(sep.join(map(str, row)) + "\n" for row in rows))
    return path


def test_first_text_column_and_sorted_label_list_from_the_training_file(tmp_path):
    train = write_csv(tmp_path / "train.csv", ["id", "review", "label"], [[7, "good film", "pos"], [8, "bad", "neg"]])
    dev = write_csv(tmp_path / "dev.csv", ["review", "label"], [["fine", "pos"]])
    test = write_csv(tmp_path / "test.csv", ["review"], [["meh"], ["ok"]])
    data, task = load_text_classification_files({"train": train, "validation": dev, "test": test})
    assert task.text_columns == ("review",)  # "id" holds numbers, so it is no text column
    assert task.label_values == ("neg", "pos") and not task.is_regression
    assert data["train"]["review"] == ["good film", "bad"]
    assert data["train"]["label"] == [1, 0] and data["validation"]["label"] == [1]
    assert data["test"]["label"] == [-1, -1] and data["test"]["idx"] == [0, 1]


def test_sentence_pairs_tsv_and_integer_labels(tmp_path):
    # Quotes in a TSV are text, as in GLUE's files.
    rows = [['a "quoted', "b", 1], ["c", "d", 0], ["e", "f", 2]]
    train = write_csv(
        tmp_path / "train.tsv", ["label_", "sentence1", "sentence2", "label"], [["x", *r] for r in rows], "\t"
    )
    data, task = load_text_classification_files({"train": train})
    assert task.text_columns == ("sentence1", "sentence2")
    assert task.label_values == ("0", "1", "2")
    assert data["train"]["sentence1"][0] == 'a "quoted' and data["train"]["label"] == [1, 0, 2]


def test_float_labels_are_a_regression_and_json_lines_are_read(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": t, "score": s}) + "\n" for t, s in [("a", 0.5), ("b", 4.0)]))
    data, task = load_text_classification_files({"train": train}, label_column_name="score")
    assert task.is_regression and task.num_labels == 1
    assert data["train"]["label"] == [0.5, 4.0]


def test_named_text_columns(tmp_path):
    train = write_csv(tmp_path / "train.csv", ["q", "p", "other", "label"], [["x", "y", "z", 1], ["u", "v", "w", 0]])
    _, task = load_text_classification_files({"train": train}, text_column_names="p,q")
    assert task.text_columns == ("p", "q")


@pytest.mark.parametrize(
    "files, kwargs, error",
    [
        (
            {"train": ("train.csv", "text,label\na,1\n")},
            {"label_column_name": "y"},
            r"train.csv:1: no column\(s\) \['y'\]",
        ),
        (
            {"train": ("train.csv", "text,label\na,x\nb,y\n"), "validation": ("dev.csv", "text,label\nc,x\nd,z\n")},
            {},
            r"dev.csv:3: the label 'z' in column 'label' is not one of the training file's labels \['x', 'y'\]",
        ),
        ({"train": ("train.csv", "")}, {}, r"train.csv is empty"),
        ({"train": ("train.csv", "text,label\n")}, {}, r"train.csv holds no examples"),
        (
            {"train": ("train.csv", "text,label\na,x\n,y\n")},
            {},
            r"train.csv:3, column 'text': no value \(an empty field\)",
        ),
        (
            {"train": ("train.csv", "text,label\na,1\nb,\n")},
            {},
            r"train.csv:3, column 'label': no value \(an empty field\)",
        ),
        ({"train": ("train.txt", "a\n")}, {}, r"unknown file type '.txt'"),
        ({"train": ("train.csv", "label\n1\n")}, {}, r"train.csv:1: no text column besides 'label'"),
        ({"train": ("train.csv", "a,b,label\nx,y,1\n")}, {"text_column_names": "a,b,c"}, r"one column or two"),
    ],
)
def test_bad_files_are_named_with_line_and_column(tmp_path, files, kwargs, error):
    paths = {}
    for split, (name, text) in files.items():
        paths[split] = tmp_path / name
        paths[split].write_text(text)
    with pytest.raises(ValueError, match=error):
        load_text_classification_files(paths, **kwargs)


def test_a_stray_delimiter_in_every_row_is_named_not_swallowed_as_an_index(tmp_path):
    # pandas reads a CSV whose every row has one field more than its header with the first field as the index:
    # the model would learn from " world" and "was good".
    rows = "".join(f"hello, world {i},{i % 2}\n" for i in range(4))
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + rows)
    with pytest.raises(ValueError, match=r"train.csv:2: 3 fields, but the header has 2 columns .*quote a text"):
        load_text_classification_files({"train": train})
    tsv = tmp_path / "train.tsv"
    tsv.write_text("text\tlabel\n" + "".join(f"it\twas good {i}\t{i % 2}\n" for i in range(4)))
    with pytest.raises(ValueError, match=r"train.tsv:2: 3 fields, but the header has 2 columns"):
        load_text_classification_files({"train": tsv})


@pytest.mark.parametrize("suffix, sep", [(".csv", ","), (".tsv", "\t")])
def test_none_na_null_and_numbers_in_a_text_column_are_text(tmp_path, suffix, sep):
    texts = ["None", "NA", "null", "42", "nan", "N/A", "#N/A", "-", "True"]
    train = write_csv(tmp_path / f"train{suffix}", ["text", "label"], [[t, i % 2] for i, t in enumerate(texts)], sep)
    data, task = load_text_classification_files({"train": train})
    assert task.text_columns == ("text",)
    assert data["train"]["text"] == texts


def test_a_quoted_field_over_several_lines_keeps_its_text_and_later_rows_their_lines(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text('text,label\n"one\nfield, two lines",a\nfine,b\n"x",\n')
    with pytest.raises(ValueError, match=r"train.csv:5, column 'label': no value"):
        load_text_classification_files({"train": train})
    train.write_text('text,label\n"one\nfield, two lines",a\nfine,b\n')
    data, _ = load_text_classification_files({"train": train})
    assert data["train"]["text"] == ["one\nfield, two lines", "fine"]


@pytest.mark.parametrize(
    "name, content, error",
    [
        # Scores with one word: a regression that cannot be, not a classifier over 5 "classes".
        (
            "train.csv",
            "text,label\na,0.5\nb,1.5\nc,abc\nd,2.5\ne,0.1\n",
            r"train.csv:4, column 'label': the label 'abc' is not a number, but the column holds scores "
            r"\('0.5' on line 2\)",
        ),
        (
            "train.jsonl",
            '{"text": "a", "label": 1}\n{"text": "b", "label": [0, 1]}\n',
            r"train.jsonl:2, column 'label': holds \[0, 1\] \(a list\), where one label belongs",
        ),
        ("train.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1\n', r"train.jsonl:2: not JSON"),
        ("train.json", '[\n{"text": "a", "label": 1},\n{"text": "b" "label": 0}\n]', r"train.json:3: not JSON"),
        (
            "train.jsonl",
            '{"text": "a", "label": 1}\n{"text": 42, "label": 0}\n',
            r"train.jsonl:2, column 'text': holds 42 \(a number\), not text",
        ),
        ("train.jsonl", '{"text": "a", "label": 1}\n{"label": 0}\n', r"train.jsonl:2, column 'text': no value"),
        ("train.jsonl", '{"text": "a", "label": 1}\n{"text": null, "label": 0}\n', r"train.jsonl:2, .*null"),
        (
            "train.csv",
            "text,label\na,pos\nb,pos\nc,pos\n",
            r"train.csv: column 'label' holds one label only \('pos' in all 3 rows\); a classifier needs two",
        ),
        ("train.csv", "text,text,label\na,b,1\n", r"train.csv:1: the header names the column\(s\) \['text'\] more"),
        ("train.json", '{\n  "data": [{"text": "a", "label": 1}]\n}\n', r"train.json: one JSON object"),
        ("train.jsonl", '{"text": "a", "label": 0}\n["b", 1]\n', r"train.jsonl:2: .*is no row"),
    ],
)
def test_labels_and_cells_that_do_not_fit_the_task_are_named(tmp_path, name, content, error):
    (tmp_path / name).write_text(content)
    with pytest.raises(ValueError, match=error):
        load_text_classification_files({"train": tmp_path / name})


def test_a_byte_that_is_not_utf8_is_named_by_its_line(tmp_path):
    train = tmp_path / "train.csv"
    rows = "".join(f"text {i},{i % 2}\n" for i in range(3000))
    train.write_bytes(b"text,label\n" + rows.encode() + b"caf\xe9 au lait,1\n")
    with pytest.raises(ValueError, match=r"train.csv:3002: not valid UTF-8"):
        load_text_classification_files({"train": train})


def test_a_json_array_and_number_labels_sorted_by_value(tmp_path):
    train = tmp_path / "train.json"
    rows = [{"text": t, "label": label} for t, label in [("a", 10), ("b", 2), ("c", 2), ("d", 1)]]
    train.write_text("[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n")
    data, task = load_text_classification_files({"train": train})
    assert task.label_values == ("1", "2", "10")
    assert data["train"]["label"] == [2, 1, 1, 0]
    # "1.0" in a CSV is written as a float: a regression, as pandas and transformers read it.
    floats = write_csv(tmp_path / "floats.csv", ["text", "label"], [["a", "1.0"], ["b", "0.0"]])
    assert load_text_classification_files({"train": floats})[1].is_regression


def test_a_label_column_that_is_an_id_or_a_text_and_a_text_column_that_is_the_label_are_refused(tmp_path):
    rows = [[i, f"review number {i}", "pos" if i % 2 else "neg"] for i in range(12)]
    train = write_csv(tmp_path / "train.csv", ["id", "review", "label"], rows)
    for column in ("id", "review"):
        with pytest.raises(
            ValueError, match=rf"column '{column}' holds a different label in each of its 12 rows .*and 2 more"
        ):
            load_text_classification_files({"train": train}, label_column_name=column)
    with pytest.raises(ValueError, match=r"--text_column_names 'review,label' names the label column 'label'"):
        load_text_classification_files({"train": train}, text_column_names="review,label")
    with pytest.raises(ValueError, match=r"names one column or two \(a pair\), got 'review,review'"):
        load_text_classification_files({"train": train}, text_column_names="review,review")


def test_a_utf16_file_and_old_mac_line_ends_are_named_for_what_they_are(tmp_path):
    utf16 = tmp_path / "train.csv"
    utf16.write_bytes("text,label\na,0\nb,1\n".encode("utf-16"))
    with pytest.raises(ValueError, match=r"train.csv:1: not valid UTF-8 .*\(it is UTF-16: its byte-order mark"):
        load_text_classification_files({"train": utf16})
    mac = tmp_path / "train.tsv"
    mac.write_bytes(b"text\tlabel\ra\t0\rb\t1\nc\t0\n")
    with pytest.raises(ValueError, match=r'train.tsv:1: .*a "\\r" that ends no line: saved with old Mac line ends'):
        load_text_classification_files({"train": mac})
