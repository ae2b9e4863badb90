"""GLUE: reading the nine tasks from the official `glue_data` layout or the Hub, encoding, submission files.

`load_glue(task, data_dir)` reads a task folder of the layout that GLUE's download script writes (`CoLA/`,
`SST-2/`, `MRPC/`, `STS-B/`, `QQP/`, `MNLI/`, `QNLI/`, `RTE/`, `WNLI/`, `diagnostic/`, each with `train.tsv`,
`dev.tsv`, `test.tsv`; MNLI with `dev_matched.tsv`, `dev_mismatched.tsv`, `test_matched.tsv`,
`test_mismatched.tsv`) into a `DatasetDict` with the same splits, columns and features as the Hub copy
(`datasets.load_dataset("nyu-mll/glue", task)`), which `load_glue(task)` returns for users who are online.
So everything downstream works the same on either.

The files are tab-separated with quoting disabled: MRPC and QQP hold bare `"` characters, and a CSV reader that
honours quotes swallows the lines up to the next `"`. CoLA's train and dev files have no header. MRPC's files
start with a UTF-8 byte-order mark. They are read by the one table reader (`data/tables.py`, as TSV); a missing
column, a row with another field count than the header's, an unknown label or an empty file is a `ValueError`
naming the file and line.

`write_glue_predictions` writes test predictions in the GLUE submission format (`index<TAB>prediction`, with
the label as the task's files write it, e.g. `entailment` for MNLI, `1` for MRPC, a score for STS-B), to a
file named as the GLUE server expects (`MRPC.tsv`, `MNLI-m.tsv`, ...).
"""

import logging
import math
from pathlib import Path

from datasets import Dataset, DatasetDict

from .atomic_write import atomic_write
from .glue_tasks import GlueTask, glue_task
from .tables import read_table
from .words import split_words

logger = logging.getLogger(__name__)

HUB_DATASET = "nyu-mll/glue"


# --- reading the TSV files --------------------------------------------------------------------------------


def _parse_label(task: GlueTask, value: str, where: str):
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise ValueError(f"{where}: the {task.name} score {value!r} is not a finite number")
        return score
    if value not in task.label_values:
        raise ValueError(f"{where}: unknown {task.name} label {value!r}; expected one of {list(task.label_values)}")
    return task.label_values.index(value)


def read_glue_file(path: str | Path, task: str | GlueTask, split: str = "train") -> dict[str, list]:
    """Read one GLUE TSV file into columns.

    Args:
        path: the file, e.g. `glue_data/MRPC/dev.tsv`.
        task: the task (a name or a `GlueTask`), which fixes the columns and the labels.
        split: the split the file holds ("train", "validation", "test", "validation_matched", ...); CoLA's
            train and dev files have no header, its test file has one.

    Returns:
        `{text column: [str], "label": [class id, float score, or -1 where the file has no label column
        (test files)], "idx": [int]}`. "idx" is the row number (from 0) as on the Hub; in test files that have
        an `index` (or QQP's `id`) column, that column, which is what a GLUE submission is keyed by.

    Raises:
        ValueError naming the file and line of a missing column, a row with the wrong number of fields, an
        unknown label or a non-numeric score, and naming the file when it has no rows.
    """
    task = glue_task(task) if isinstance(task, str) else task
    headerless = split in task.headerless_splits
    header = task.headerless_columns if headerless else None
    table = read_table(path, header=header, what=f"{task.name} examples", kind="tsv")
    is_test = split.startswith("test")
    table.require(
        [*task.file_text_columns, *([] if is_test else [task.file_label_column])], f"of {task.name}'s {split} file"
    )
    columns = {name: table.columns[file_name] for name, file_name in zip(task.text_columns, task.file_text_columns)}
    if task.file_label_column in table.columns:
        labels = table.columns[task.file_label_column]
        columns["label"] = [_parse_label(task, label, table.where(row)) for row, label in enumerate(labels)]
    else:
        columns["label"] = [-1] * len(table)
    index_name = next((c for c in ("index", "id") if c in table.columns), None) if is_test else None
    columns["idx"] = list(range(len(table)))
    if index_name is not None:
        seen = {}  # index -> its row: the submission file is keyed by it
        for row, value in enumerate(table.columns[index_name]):
            try:
                columns["idx"][row] = int(value)
            except ValueError:
                raise ValueError(
                    f"{table.where(row)}: the {index_name} column holds {value!r}, not an integer"
                ) from None
            if columns["idx"][row] in seen:
                raise ValueError(
                    f"{table.where(row)}: the {index_name} {value!r} is also the index of line "
                    f"{table.lines[seen[columns['idx'][row]]]}; the predictions are keyed by it, one a row"
                )
            seen[columns["idx"][row]] = row
    return columns


def load_glue_files(task: str | GlueTask, data_dir: str | Path, splits: list[str] | None = None) -> DatasetDict:
    """Read a task from the official `glue_data` layout into a `DatasetDict` with the Hub's splits and features.

    Args:
        task: the task name ("mrpc", "SST-2", ...) or a `GlueTask`.
        data_dir: the task's folder (`glue_data/MRPC`) or the folder above it (`glue_data`).
        splits: the splits to read; by default every split whose file exists (GLUE's test files are often
            left out). A split asked for whose file is missing is a `FileNotFoundError`.
    """
    task = glue_task(task) if isinstance(task, str) else task
    data_dir = Path(data_dir)
    if (data_dir / task.folder).is_dir():
        data_dir = data_dir / task.folder
    unknown = set(splits or ()) - set(task.split_files)
    if unknown:
        raise ValueError(f"{task.name} has no split(s) {sorted(unknown)}; it has {list(task.split_files)}")
    wanted = splits or [s for s, name in task.split_files.items() if (data_dir / name).is_file()]
    if not wanted:
        raise FileNotFoundError(
            f"no {task.name} files in {data_dir}; expected some of {list(task.split_files.values())}"
        )
    datasets = {}
    for split in wanted:
        path = data_dir / task.split_files[split]
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (the {split} split of {task.name})")
        datasets[split] = Dataset.from_dict(read_glue_file(path, task, split), features=task.features())
        logger.info("%s: %d %s examples", path, len(datasets[split]), split)
    return DatasetDict(datasets)


def load_glue(
    task: str | GlueTask,
    data_dir: str | Path | None = None,
    dataset_name: str = HUB_DATASET,
    cache_dir: str | None = None,
) -> DatasetDict:
    """A GLUE task from local files (`data_dir`, see `load_glue_files`) or else from the Hub (`dataset_name`).

    The Hub copy (or a `datasets` dataset saved to disk and named by its folder) must have the task's text
    columns and "label"; the datasets from either source have the same columns.
    """
    task = glue_task(task) if isinstance(task, str) else task
    if data_dir is not None:
        return load_glue_files(task, data_dir)
    from datasets import load_dataset

    raw = load_dataset(dataset_name, task.name, cache_dir=cache_dir)
    for split, dataset in raw.items():
        missing = [c for c in (*task.text_columns, "label") if c not in dataset.column_names]
        if missing:
            raise ValueError(
                f"{dataset_name} ({task.name}) split {split!r} lacks the column(s) {missing}; "
                f"it has {dataset.column_names}"
            )
    return raw


# --- submission -----------------------------------------------------------------------------------------


def write_glue_predictions(path: str | Path, task: str | GlueTask, indices, predictions) -> Path:
    """Write test predictions as GLUE's server wants them: a header `index<TAB>prediction`, then one row per
    example with the label as the task's files write it (class ids -> `label_values`; STS-B scores with three
    decimals).

    Args:
        path: the file to write, or a folder to write `task.submission_files[...]` in (for tasks with one test
            split).
        indices: the examples' "idx".
        predictions: class ids (ints) or, for STS-B, scores.
    """
    task = glue_task(task) if isinstance(task, str) else task
    path = Path(path)
    if path.is_dir():
        if len(task.submission_files) != 1:
            raise ValueError(f"{task.name} has several test files {task.submission_files}; give the file name")
        path = path / next(iter(task.submission_files.values()))
    indices, predictions = list(indices), list(predictions)
    if len(indices) != len(predictions):
        raise ValueError(f"{len(indices)} indices but {len(predictions)} predictions")
    with atomic_write(path) as f:
        f.write("index\tprediction\n")
        for index, prediction in zip(indices, predictions):
            value = f"{float(prediction):.3f}" if task.is_regression else task.label_values[int(prediction)]
            f.write(f"{int(index)}\t{value}\n")
    return path


# --- encoding and scoring -----------------------------------------------------------------------------------


def _encode_splits(
    dataset: DatasetDict | Dataset, task: GlueTask, encode, num_proc, desc: str, count_cut, cut_warning
):
    """Apply the batched `encode` to every split of `dataset` (or to one `Dataset`), dropping the text columns.

    `desc` is the progress label, formatted with `task` and `split`; `count_cut(encoded)` returns how many
    examples were cut to fit and the encoded split without any helper column; when some were, `cut_warning` is
    logged with the task's name, the split's name, that count and the split's size.
    """

    def encode_split(split: Dataset, name: str) -> Dataset:
        encoded = split.map(
            encode,
            batched=True,
            num_proc=num_proc,
            remove_columns=list(task.text_columns),
            desc=desc.format(task=task.name, split=name),
        )
        cut, encoded = count_cut(encoded)
        if cut:
            logger.warning(cut_warning, task.name, name, cut, len(encoded))
        return encoded

    if isinstance(dataset, Dataset):
        return encode_split(dataset, "data")
    return DatasetDict({name: encode_split(split, name) for name, split in dataset.items()})


def encode_glue_for_subwords(
    dataset: DatasetDict | Dataset, task: str | GlueTask, tokenizer, max_seq_length: int, num_proc: int | None = None
) -> DatasetDict | Dataset:
    """Tokenize a task's sentences (or sentence pairs, as `[CLS] a [SEP] b [SEP]` with segment ids) for BERT.

    Inputs longer than `max_seq_length` tokens are truncated, the longer sentence of a pair first, as BERT's
    GLUE code does; a warning says how many reached the limit. Batches are padded later, per batch
    (`DataCollatorWithPadding`). Keeps "label" and "idx"; drops the text columns.
    """
    task = glue_task(task) if isinstance(task, str) else task

    def encode(batch):
        return tokenizer(*(batch[c] for c in task.text_columns), truncation=True, max_length=max_seq_length)

    def count_cut(encoded: Dataset) -> tuple[int, Dataset]:
        return sum(length >= max_seq_length for length in map(len, encoded["input_ids"])), encoded

    return _encode_splits(
        dataset,
        task,
        encode,
        num_proc,
        "tokenizing {task} {split}",
        count_cut,
        f"%s %s: %d of %d examples reach max_seq_length={max_seq_length} tokens (longer ones are truncated)",
    )


# Between the two sentences of a pair: the end of one sentence and the start of the next, as the biLM knows them.
PAIR_SEPARATOR = ("</S>", "<S>")


def encode_glue_for_words(
    dataset: DatasetDict | Dataset, task: str | GlueTask, tokenizer, max_words: int, num_proc: int | None = None
) -> DatasetDict | Dataset:
    """Encode a task's sentences for a word-level model (ELMo) with its `ElmoTokenizer`.

    Text is split into words and punctuation (`split_words`). A pair becomes one word sequence `a </S> <S> b`:
    the biLM reads the end of the first sentence and the start of the second as it does between sentences of its
    training text. Inputs longer than `max_words` words (separator included) are cut, the longer sentence of a pair
    first; a warning says how many. Keeps "label" and "idx"; drops the text columns. Batches are padded later
    (`DataCollatorWithPadding` calls the tokenizer's `pad`).
    """
    task = glue_task(task) if isinstance(task, str) else task
    if max_words < 1 + 2 * (len(task.text_columns) - 1):
        raise ValueError(f"max_words={max_words} leaves no room for the words of {task.name}")

    def words_of(example_texts: tuple[str, ...]) -> tuple[list[str], bool]:
        sentences = [split_words(text) for text in example_texts]
        budget = max_words - len(PAIR_SEPARATOR) * (len(sentences) - 1)
        cut = sum(map(len, sentences)) > budget
        while sum(map(len, sentences)) > budget:
            longest = max(sentences, key=len)
            longest.pop()
        words = sentences[0]
        for sentence in sentences[1:]:
            words = words + list(PAIR_SEPARATOR) + sentence
        return words, cut

    def encode(batch):
        encoded = [words_of(texts) for texts in zip(*(batch[c] for c in task.text_columns))]
        # An empty text still needs one word for the model to read: a lone separator mark.
        words = [w or ["</S>"] for w, _ in encoded]
        out = dict(tokenizer(words, is_split_into_words=True))
        out["was_cut"] = [cut for _, cut in encoded]
        return out

    def count_cut(encoded: Dataset) -> tuple[int, Dataset]:
        return sum(encoded["was_cut"]), encoded.remove_columns("was_cut")

    return _encode_splits(
        dataset,
        task,
        encode,
        num_proc,
        "encoding {task} {split} words",
        count_cut,
        f"%s %s: %d of %d examples are longer than max_words={max_words} and were cut",
    )


def glue_compute_metrics(task: str | GlueTask):
    """A `compute_metrics` for `Trainer`: GLUE's metric of `task` (from `hf_ctx.metrics`) on its predictions.

    Predictions are decoded as the task's record says (`GlueTask.decode`). For tasks with two metrics (MRPC,
    QQP, STS-B) "combined_score" is their mean, as GLUE's leaderboard averages.
    """
    from ..metrics import load_metric

    task = glue_task(task) if isinstance(task, str) else task
    metric = load_metric("glue", task.name)

    def compute_metrics(eval_prediction) -> dict[str, float]:
        predictions = task.decode(eval_prediction.predictions)
        result = metric.compute(predictions=predictions, references=eval_prediction.label_ids)
        if len(result) > 1:
            result["combined_score"] = sum(result.values()) / len(result)
        return result

    return compute_metrics
