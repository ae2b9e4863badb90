"""Text classification and regression on a user's own files (CSV, TSV or JSON lines), with the conventions of
transformers' `run_glue.py`:

- the text is the `sentence1` / `sentence2` pair where a file has both columns, else its first text column, or
  the columns `text_column_names` names (one, or two for a pair);
- the label is the `label` column (or `label_column_name`); float labels make the task a regression, others a
  classification whose label list is the training file's labels, sorted;
- a test file needs no label column (one it has is ignored).

The files are read by `datasets` (`load_dataset("csv" | "json", data_files=...)`; TSV is CSV split on tabs, quotes
read as text) and checked here, where they enter: a missing column, an empty text or label, a label the training
file lacks, an empty file are `ValueError`s naming the file, the line and the column. Lines are counted as a file
without line breaks inside its fields has them (a CSV header is line 1, its first row line 2).

`load_text_classification_files` returns the splits with the columns of a GLUE task from `data/glue.py` and a
`GlueTask` record for them, so encoding (`encode_glue_for_subwords`, `encode_glue_for_words`) and predictions
(`write_glue_predictions`: `index<TAB>prediction`, transformers' `predict_results.txt`) are GLUE's.
"""

import csv
import logging
import math
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict

from .glue_tasks import GlueTask

logger = logging.getLogger(__name__)

# File suffix -> (the `datasets` builder, its options, the line of the first row).
FORMATS = {
    ".csv": ("csv", {}, 2),
    ".tsv": ("csv", {"sep": "\t", "quoting": csv.QUOTE_NONE}, 2),
    ".json": ("json", {}, 1),
    ".jsonl": ("json", {}, 1),
}
PAIR_COLUMNS = ("sentence1", "sentence2")
PREDICTIONS_FILE = "predict_results.txt"


def read_table(path: str | Path, cache_dir: str | None = None) -> tuple[Dataset, int]:
    """One CSV, TSV or JSON-lines file as a `Dataset`, and the line of its first row (2 below a CSV header).

    Raises a `ValueError` naming the file for an unknown suffix, an empty file, one `datasets` cannot parse, or one
    without rows; a `FileNotFoundError` for a missing file.
    """
    from datasets import load_dataset

    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: unknown file type {path.suffix!r}; give a .csv, .tsv, .json or .jsonl file")
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    builder, options, first_line = FORMATS[path.suffix.lower()]
    with path.open("rb") as f:
        start = f.read(1 << 16)
    if not start.strip():
        raise ValueError(f"{path} is empty; expected examples (a CSV or TSV file: a header line first)")
    if builder == "csv" and len(start) < 1 << 16 and len([line for line in start.splitlines() if line.strip()]) < 2:
        raise ValueError(f"{path} holds no examples (a header only)")
    try:
        table = load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **options)
    except Exception as error:  # pandas' and pyarrow's parse errors have many classes
        cause = error.__cause__ or error
        raise ValueError(f"{path}: not readable as {path.suffix[1:].upper()} ({str(cause).splitlines()[0]})") from None
    if len(table) == 0:
        raise ValueError(f"{path} holds no examples (a header only)")
    return table, first_line


def choose_text_columns(columns: dict[str, str], label_column: str, text_column_names: str | None, where: str):
    """The text column(s) of a file with `columns` (name -> dtype): `text_column_names` ("a" or "a,b"), else
    sentence1/sentence2, else the first string column that is not the label."""
    if text_column_names:
        names = tuple(name.strip() for name in text_column_names.split(","))
        if not 1 <= len(names) <= 2 or not all(names):
            raise ValueError(f"--text_column_names names one column or two (a pair), got {text_column_names!r}")
        return names
    if all(name in columns for name in PAIR_COLUMNS):
        return PAIR_COLUMNS
    text = [name for name, dtype in columns.items() if name != label_column and dtype in ("string", "large_string")]
    if not text:
        raise ValueError(f"{where}: no text column besides {label_column!r}; it has {list(columns)}")
    return (text[0],)


def _column_types(table: Dataset) -> dict[str, str]:
    return {name: getattr(feature, "dtype", "") for name, feature in table.features.items()}


def _check_columns(table: Dataset, path, first_line: int, wanted: list[str]) -> None:
    missing = [name for name in wanted if name not in table.column_names]
    if missing:
        where = f"{path}:1" if first_line == 2 else f"{path}:{first_line}"
        raise ValueError(f"{where}: no column(s) {missing}; it has {table.column_names}")


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _texts(table: Dataset, path, first_line: int, column: str) -> list[str]:
    values = table[column]
    for row, value in enumerate(values):
        if _is_missing(value):
            raise ValueError(f"{path}:{first_line + row}: column {column!r} is empty")
    return [str(value) for value in values]


def _label_string(value) -> str:
    """A label as `predict_results.txt` writes it: 1.0 read from a CSV of ints is "1"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _labels(table: Dataset, path, first_line: int, column: str) -> list:
    values = table[column]
    for row, value in enumerate(values):
        if _is_missing(value):
            raise ValueError(f"{path}:{first_line + row}: column {column!r} has no label")
    return values


def file_task(
    train: Dataset | None,
    train_path,
    train_first_line: int,
    text_columns: tuple[str, ...],
    label_column: str,
    data_files: dict[str, str],
    labels: list[str] | None = None,
    is_regression: bool | None = None,
) -> GlueTask:
    """The task's record: regression when the training labels are floats (or `is_regression`), else the sorted
    label list of the training file (or `labels`, a fine-tuned model's, when there is no training file)."""
    if train is not None:
        is_regression = _column_types(train)[label_column] in ("float32", "float64", "float16")
        values = _labels(train, train_path, train_first_line, label_column)
        if not is_regression:
            labels = [_label_string(v) for v in sorted(set(values), key=lambda v: (isinstance(v, str), v))]
    elif is_regression is None and labels is None:
        raise ValueError("give --train_file: the label list comes from the training file")
    labels = tuple(labels or ())
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
    cache_dir: str | None = None,
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
    tables = {split: read_table(path, cache_dir) for split, path in data_files.items()}
    first_split = "train" if "train" in tables else next(iter(tables))
    first_table, first_line = tables[first_split]
    text_columns = choose_text_columns(
        _column_types(first_table), label_column_name, text_column_names, f"{data_files[first_split]}:1"
    )
    for split, (table, line) in tables.items():
        label_column = [] if split == "test" else [label_column_name]
        _check_columns(table, data_files[split], line, [*text_columns, *label_column])
    train, train_line = tables.get("train", (None, 0))
    task = file_task(
        train, data_files.get("train"), train_line, text_columns, label_column_name, data_files, labels, is_regression
    )
    splits = {}
    for split, (table, line) in tables.items():
        path = data_files[split]
        columns = {name: _texts(table, path, line, name) for name in text_columns}
        if split == "test":
            columns["label"] = [-1 if not task.is_regression else math.nan] * len(table)
        else:
            columns["label"] = _label_ids(task, _labels(table, path, line, label_column_name), path, line)
        columns["idx"] = list(range(len(table)))
        splits[split] = Dataset.from_dict(columns, features=task.features())
        logger.info("%s: %d %s examples", path, len(table), split)
    return DatasetDict(splits), task


def _label_ids(task: GlueTask, values: list, path, first_line: int) -> list:
    label_column = task.file_label_column
    if task.is_regression:
        scores = []
        for row, value in enumerate(values):
            try:
                score = float(value)
            except (TypeError, ValueError):
                score = math.nan
            if not math.isfinite(score):
                raise ValueError(
                    f"{path}:{first_line + row}: the score {value!r} in column {label_column!r} is not a finite number"
                )
            scores.append(score)
        return scores
    index = {label: i for i, label in enumerate(task.label_values)}
    ids = []
    for row, value in enumerate(values):
        label = _label_string(value)
        if label not in index:
            raise ValueError(
                f"{path}:{first_line + row}: the label {label!r} in column {label_column!r} is not one of the "
                f"training file's labels {list(task.label_values)}"
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
