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
    train = write_csv(tmp_path / "train.csv", ["q", "p", "other", "label"], [["x", "y", "z", 1]])
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
        ({"train": ("train.csv", "text,label\na,x\n,y\n")}, {}, r"train.csv:3: column 'text' is empty"),
        ({"train": ("train.csv", "text,label\na,1\nb,\n")}, {}, r"train.csv:3: column 'label' has no label"),
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
