"""Text classification and regression on a user's own files (CSV, TSV, JSON lines or a JSON array), with the
conventions of transformers' `run_glue.py`:

- the text is the `sentence1` / `sentence2` pair where a file has both columns, else its first text column (one
  with a cell that is not a number), or the columns `text_column_names` names (one, or two for a pair);
- the label is the `label` column (or `label_column_name`); labels that are numbers, one of them written with a
  fraction or exponent (`0.5`, `1.0`, `2e-1`), make the task a regression (as pandas and pyarrow read such a
  column as floats); others a classification whose label list is the training file's labels, sorted (numbers by
  value);
- a test file needs no label column (one it has is ignored).

The files are read by `data/tables.py` (every cell of a CSV or TSV file is the text as written: `None`, `NA` or
`42` in a text column are text) and checked here, where they enter, each error naming the file, the line and the
column: an empty text, a label that is missing, a list or an object; in a regression, a label that is not a
number; a classification whose training labels are all one class; a label the training file lacks.

`load_text_classification_files` returns the splits with the columns of a GLUE task from `data/glue.py` and a
`GlueTask` record for them, so encoding (`encode_glue_for_subwords`, `encode_glue_for_words`) and predictions
(`write_glue_predictions`: `index<TAB>prediction`, transformers' `predict_results.txt`) are GLUE's.
"""

import logging
import math
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict

from .glue_tasks import GlueTask
from .tables import Table, describe, read_table

logger = logging.getLogger(__name__)

PAIR_COLUMNS = ("sentence1", "sentence2")
# A training file of at least this many rows whose every label differs has no classes to learn.
DISTINCT_LABELS_REFUSED = 10
PREDICTIONS_FILE = "predict_results.txt"


def number_kind(value) -> str | None:
    """How a label cell is written as a number: "int" (`3`, "3"), "float" (`0.5`, "1.0", "2e-1", "nan"), or None
    for anything else (a word, true/false, a list)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return "int" if isinstance(value, int) else "float"
    if not isinstance(value, str):
        return None
    for kind, parse in (("int", int), ("float", float)):
        try:
            parse(value.strip())
            return kind
        except ValueError:
            pass
    return None


def is_text_column(cells: list) -> bool:
    """Whether a column holds text: a string that is not a number in some cell (a column of numbers is an id or
    a label; its cells that are no text are named where the text is read)."""
    return any(isinstance(cell, str) and cell.strip() and not number_kind(cell) for cell in cells)


def choose_text_columns(table: Table, label_column: str, text_column_names: str | None) -> tuple[str, ...]:
    """The text column(s) of `table`: `text_column_names` ("a" or "a,b"), else sentence1/sentence2, else the
    first text column (`is_text_column`) that is not the label."""
    if text_column_names is not None:
        names = tuple(name.strip() for name in text_column_names.split(","))
        if not 1 <= len(names) <= 2 or not all(names) or len(set(names)) < len(names):
            raise ValueError(f"--text_column_names names one column or two (a pair), got {text_column_names!r}")
        if label_column in names:
            raise ValueError(f"--text_column_names {text_column_names!r} names the label column {label_column!r}")
        return names
    if all(name in table.columns for name in PAIR_COLUMNS):
        return PAIR_COLUMNS
    text = [name for name, cells in table.columns.items() if name != label_column and is_text_column(cells)]
    if not text:
        raise ValueError(
            f"{table.path}:{table.header_line or 1}: no text column besides {label_column!r} (a column of numbers "
            f"only is not taken for text; name one with --text_column_names); it has {table.names}"
        )
    return (text[0],)


def label_string(value) -> str:
    """A classification label as the label list and `predict_results.txt` write it: 1.0 read from a CSV of ints
    is "1"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _labels(table: Table, column: str) -> list:
    """The cells of the label column: each present and one value (no list or object)."""
    cells = table.values(column)
    for row, value in enumerate(cells):
        if isinstance(value, (list, dict)):
            raise ValueError(
                f"{table.where(row, column)}: holds {describe(value)}, where one label belongs (a label a row; "
                "several labels per text are not supported)"
            )
    return cells


def _training_labels(train: Table, column: str) -> tuple[bool, tuple[str, ...]]:
    """(is a regression, the sorted label list) of the training file's label column; a regression column holding
    a value that is no number, and a classification with fewer than two classes, are `ValueError`s."""
    cells = _labels(train, column)
    kinds = [number_kind(value) for value in cells]
    if "float" in kinds:
        if None in kinds:
            bad, score = kinds.index(None), kinds.index("float")
            raise ValueError(
                f"{train.where(bad, column)}: the label {describe(cells[bad])} is not a number, but the column holds "
                f"scores ({cells[score]!r} on line {train.lines[score]}), which makes the task a regression; a "
                "regression needs a number in every row"
            )
        return True, ()
    labels = sorted({label_string(value) for value in cells}, key=lambda label: _label_order(label))
    if len(labels) < 2:
        raise ValueError(
            f"{train.path}: column {column!r} holds one label only ({labels[0]!r} in all {len(cells)} rows); a "
            "classifier needs two classes at least (is --label_column_name the right column?)"
        )
    if len(labels) == len(cells) >= DISTINCT_LABELS_REFUSED:
        raise ValueError(
            f"{train.path}: column {column!r} holds a different label in each of its {len(cells)} rows "
            f"({shown(labels)}): an id or a text, not classes (--label_column_name names the label column)"
        )
    if None in kinds and "int" in kinds:
        word = kinds.index(None)
        logger.warning(
            "%s: the labels mix numbers and words (%s); read as %d classes %s",
            train.where(word, column),
            describe(cells[word]),
            len(labels),
            shown(labels),
        )
    return False, tuple(labels)


def shown(labels, most: int = 10) -> str:
    """A label list for a message: the first `most` labels, and how many more there are."""
    more = f" and {len(labels) - most} more" if len(labels) > most else ""
    return f"{list(labels[:most])}{more}"


def _label_order(label: str):
    """Labels sort as numbers where they are integers (2 before 10), before the others, which sort as text."""
    return (0, int(label), "") if number_kind(label) == "int" else (1, 0, label)


def file_task(
    train: Table | None,
    text_columns: tuple[str, ...],
    label_column: str,
    data_files: dict[str, str],
    labels: list[str] | None = None,
    is_regression: bool | None = None,
) -> GlueTask:
    """The task's record: from the training file's labels (`_training_labels`), or, without a training file, a
    fine-tuned model's `labels` and `is_regression`."""
    if train is not None:
        is_regression, labels = _training_labels(train, label_column)
    elif is_regression is None and labels is None:
        raise ValueError("give --train_file: the label list comes from the training file")
    labels = tuple(labels or ())
    train_path = data_files.get("train")
    return GlueTask(
        name=Path(train_path).name if train_path else "your data",
        folder=str(Path(train_path or next(iter(data_files.values()))).parent),
        text_columns=text_columns,
        file_text_columns=text_columns,
        file_label_column=label_column,
        label_values=() if is_regression else labels,
        label_names=() if is_regression else labels,
        metrics=("mse", "pearson", "spearmanr") if is_regression else ("accuracy",),
        split_files=dict(data_files),
        submission_files={"test": PREDICTIONS_FILE} if "test" in data_files else {},
    )


def load_text_classification_files(
    data_files: dict[str, str],
    text_column_names: str | None = None,
    label_column_name: str = "label",
    labels: list[str] | None = None,
    is_regression: bool | None = None,
) -> tuple[DatasetDict, GlueTask]:
    """Read a user's classification (or regression) files into a GLUE-like `DatasetDict` and its task record.

    Args:
        data_files: split ("train", "validation", "test") -> a .csv, .tsv, .json or .jsonl file.
        text_column_names: "a" or "a,b"; default: sentence1/sentence2, else the first text column.
        label_column_name: the label column; the test file may lack it.
        labels, is_regression: without a training file, the label list (or regression) of the model that will
            predict (a fine-tuned checkpoint's `id2label` / `problem_type`).

    Returns:
        (splits with the text columns, "label" (class id, a float score, or -1 in the test split) and "idx" (the
        row), the task record).
    """
    tables = {split: read_table(path, what="examples") for split, path in data_files.items()}
    first = tables["train"] if "train" in tables else next(iter(tables.values()))
    text_columns = choose_text_columns(first, label_column_name, text_column_names)
    for split, table in tables.items():
        table.require(text_columns, "the text")
        if split != "test":
            table.require([label_column_name], "the label; --label_column_name names another")
    task = file_task(tables.get("train"), text_columns, label_column_name, data_files, labels, is_regression)
    splits = {}
    for split, table in tables.items():
        columns = {name: table.texts(name) for name in text_columns}
        if split == "test":
            columns["label"] = [-1 if not task.is_regression else math.nan] * len(table)
        else:
            columns["label"] = _label_ids(task, table)
        columns["idx"] = list(range(len(table)))
        splits[split] = Dataset.from_dict(columns, features=task.features())
        logger.info("%s: %d %s examples", table.path, len(table), split)
    return DatasetDict(splits), task


def _label_ids(task: GlueTask, table: Table) -> list:
    """The label column of `table` as the task's class ids, or as finite scores for a regression."""
    column = task.file_label_column
    values = _labels(table, column)
    if task.is_regression:
        scores = []
        for row, value in enumerate(values):
            score = float(value) if number_kind(value) else math.nan
            if not math.isfinite(score):
                raise ValueError(f"{table.where(row, column)}: the score {describe(value)} is not a finite number")
            scores.append(score)
        return scores
    index = {label: i for i, label in enumerate(task.label_values)}
    ids = []
    for row, value in enumerate(values):
        label = label_string(value)
        if label not in index and number_kind(value) and float(value).is_integer():
            label = label_string(float(value))  # "1.0" where the training labels are 0 and 1
        if label not in index:
            raise ValueError(
                f"{table.where(row)}: the label {label!r} in column {column!r} is not one of the training file's "
                f"labels {shown(task.label_values)}"
            )
        ids.append(index[label])
    return ids


def text_classification_metrics(task: GlueTask):
    """A `compute_metrics` for `Trainer`: accuracy for a classification; mean squared error, Pearson's and
    Spearman's correlation for a regression (as transformers' script reports "mse" for files)."""
    from scipy.stats import pearsonr, spearmanr

    def compute_metrics(eval_prediction) -> dict[str, float]:
        predictions = np.asarray(task.decode(eval_prediction.predictions))
        references = np.asarray(eval_prediction.label_ids)
        if not task.is_regression:
            return {"accuracy": float((predictions == references).mean())}
        return {
            "mse": float(((predictions - references) ** 2).mean()),
            "pearson": float(pearsonr(predictions, references)[0]),
            "spearmanr": float(spearmanr(predictions, references)[0]),
        }

    return compute_metrics
