"""Multiple choice (SWAG and its like): reading CSV or JSON files, checking them, encoding the choices.

A file holds one example a row: a context, optionally a start of the ending that every choice shares, the
candidate endings (one column each) and the index of the right one. SWAG's CSV layout (Zellers et al., 2018) is
the default: `sent1` the context, `sent2` the shared start, `ending0` ... `ending3`, `label`. Each choice is
read as the pair (context, shared start + " " + ending), as transformers' `run_swag.py` reads it.

The files are checked where they are read: a named column the file lacks, an empty text, or a label that is not
the index of an ending is a `ValueError` naming the file and the row (counted from 1, the header not counted).
"""

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import datasets
from transformers import DataCollatorForMultipleChoice

from .atomic_write import write_text

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MultipleChoiceColumns:
    """Which columns of a file hold what.

    Args:
        context: the text every choice starts from (SWAG's `sent1`).
        endings: one column per candidate ending, in label order.
        label: the index of the right ending in `endings` (absent from unlabelled files).
        ending_prefix: a column with the start of the ending shared by every choice (SWAG's `sent2`), or None.
    """

    context: str = "sent1"
    endings: tuple[str, ...] = ("ending0", "ending1", "ending2", "ending3")
    label: str = "label"
    ending_prefix: str | None = "sent2"

    @property
    def text_columns(self) -> list[str]:
        return [self.context, *([self.ending_prefix] if self.ending_prefix else []), *self.endings]


def read_multiple_choice_file(
    path: str | Path, columns: MultipleChoiceColumns, *, labelled: bool | None = True, cache_dir: str | None = None
) -> datasets.Dataset:
    """A CSV (`.csv`) or JSON / JSON-lines (`.json`, `.jsonl`) file as a `Dataset` with the text columns and an
    int "label" (the other columns dropped), every row checked. `labelled=None`: a label where the file has the
    label column (SWAG's test file has none).

    Raises:
        FileNotFoundError for a missing file; ValueError for another extension, a file the parser cannot read
        (with the parser's line or row), a named column the file lacks
        (naming the file and the columns it has), a row whose text is missing, and a label that is not an integer
        in `range(len(columns.endings))` (naming the file and the row).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    builder = {".csv": "csv", ".json": "json", ".jsonl": "json"}.get(path.suffix)
    if builder is None:
        raise ValueError(f"{path}: expected a .csv, .json or .jsonl file")
    try:
        data = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir)
    # DatasetGenerationError says only "An error occurred" (its cause says where); a ValueError (pyarrow's
    # ArrowInvalid, a UnicodeEncodeError of half a surrogate pair) comes from the first rows, read to infer types.
    except (datasets.exceptions.DatasetGenerationError, ValueError) as error:
        reason = " ".join(str(error.__cause__ or error).split())
        raise ValueError(f"{path}: not a readable {builder.upper()} file: {reason}") from None
    if labelled is None:
        labelled = columns.label in data.column_names
    wanted = columns.text_columns + ([columns.label] if labelled else [])
    missing = [name for name in wanted if name not in data.column_names]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing}; the file has {data.column_names}")
    data = data.select_columns(wanted)
    if columns.ending_prefix:  # an empty shared start (read as None from a CSV) is no start
        prefix = columns.ending_prefix
        data = data.map(lambda row: {prefix: row[prefix] if isinstance(row[prefix], str) else ""})
    for name in columns.text_columns:
        empty = next((row for row, text in enumerate(data[name], start=1) if not isinstance(text, str)), None)
        if empty is not None:
            raise ValueError(f"{path}, row {empty}: no text in column {name!r}")
    if labelled:
        labels = [
            _label(value, len(columns.endings), f"{path}, row {row}")
            for row, value in enumerate(data[columns.label], start=1)
        ]
        data = data.remove_columns(columns.label).add_column("label", labels)
    logger.info("%s: %d examples with %d choices each", path, len(data), len(columns.endings))
    return data


def _label(value, num_choices: int, where: str) -> int:
    """The ending index `value` (an int, or a float or string that holds one) as an int, or a ValueError."""
    try:
        number = math.nan if isinstance(value, bool) else float(value)  # JSON's true is no index
    except (TypeError, ValueError):
        number = math.nan
    if not (number.is_integer() and 0 <= number < num_choices):
        raise ValueError(
            f"{where}: label {value!r} is not the index of one of the {num_choices} endings (0 to {num_choices - 1})"
        )
    return int(number)


def encode_multiple_choice(
    dataset: datasets.Dataset,
    columns: MultipleChoiceColumns,
    tokenizer,
    max_seq_length: int,
    num_proc: int | None = None,
    name: str = "data",
) -> datasets.Dataset:
    """Tokenize each example's choices as pairs (context, [shared start] ending): every field becomes a list
    with one entry per choice, shape (choices, tokens), for `DataCollatorForMultipleChoice`.

    Pairs longer than `max_seq_length` tokens are truncated, the longer text first; a warning says how many
    examples had a choice at the limit. Keeps "label"; drops the text columns.
    """
    num_choices = len(columns.endings)

    def encode(batch):
        first = [context for context in batch[columns.context] for _ in range(num_choices)]
        prefixes = batch[columns.ending_prefix] if columns.ending_prefix else [""] * len(batch[columns.context])
        second = [
            f"{prefix} {ending}".strip()
            for i, prefix in enumerate(prefixes)
            for ending in (batch[column][i] for column in columns.endings)
        ]
        flat = tokenizer(first, second, truncation=True, max_length=max_seq_length)
        return {
            key: [values[i : i + num_choices] for i in range(0, len(values), num_choices)]
            for key, values in flat.items()
        }

    encoded = dataset.map(
        encode, batched=True, num_proc=num_proc, remove_columns=columns.text_columns, desc=f"tokenizing {name}"
    )
    at_limit = sum(max(map(len, choices)) >= max_seq_length for choices in encoded["input_ids"])
    if at_limit:
        logger.warning(
            "%s: %d of %d examples have a choice of max_seq_length=%d tokens (longer ones are truncated)",
            name,
            at_limit,
            len(encoded),
            max_seq_length,
        )
    return encoded


def multiple_choice_accuracy(eval_prediction) -> dict[str, float]:
    """A `compute_metrics` for `Trainer`: the share of examples whose highest-scoring choice is the right one."""
    predictions = decode_choices(eval_prediction.predictions)
    return {"accuracy": float((predictions == eval_prediction.label_ids).mean())}


def decode_choices(logits):
    """The chosen ending of each example: the argmax of the logits (examples, choices), or of a tuple's first."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    return logits.argmax(-1)


class MultipleChoiceCollator(DataCollatorForMultipleChoice):
    """transformers' collator (pads every choice of a batch to one length: (batch, choices, tokens)), which also
    takes examples without a label (a test file's)."""

    def torch_call(self, examples):
        if "label" in examples[0] or "labels" in examples[0]:
            return super().torch_call(examples)
        batch = super().torch_call([{**example, "label": 0} for example in examples])
        del batch["labels"]
        return batch


def write_json_atomically(path: Path, value) -> Path:
    """Write `value` as JSON to `path` atomically (`hf_ctx.data.atomic_write.write_text`): whole or absent."""
    write_text(path, json.dumps(value))
    return path
