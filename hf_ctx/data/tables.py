"""A user's table (CSV, TSV, JSON lines or a JSON array), read strictly: the one reader of every table a task reads
(text classification and regression, tagged words, multiple choice, GLUE's TSV files).

- **CSV** (`.csv`): the first row is the header; fields as Python's `csv` module reads them (a field holding the
  delimiter, a quote or a line break is quoted, `""` is a quote inside it).
- **TSV** (`.tsv`): one row a line, fields split at tabs, quotes read as text (GLUE's MRPC and QQP hold bare `"`);
  a line ends at "\\n" only (a "\\r" before it is dropped, one inside a field is text). GLUE's header-less files
  are read with their columns given (`header=`).
- **JSON lines** (`.jsonl`, or a `.json` file that does not start with `[`): one JSON object a line.
- **JSON** (`.json` starting with `[`): an array of objects.

Every cell of a CSV or TSV file is the text as written: `None`, `NA`, `null`, `42` or an empty field are what the
user typed (pandas would read them as a missing value or a number). JSON cells keep their JSON types.

What is checked here names the file and the physical line where the row starts (`path:line`), and the column:

- bytes that are not UTF-8 (the line); a byte-order mark or another invisible prefix is dropped (`data/files.py`);
- a CSV or TSV row with more or fewer fields than the header: most often a comma (tab) inside an unquoted text,
  which pandas would silently turn into an index column, shifting every field of the file one column left;
- in CSV, a quote that never closes (Python's csv would read the rest of the file into its field) and text after
  a closing quote (`"hi" he said`, read as `hi he said`): quotes are read strictly;
- a header that names a column twice, and a JSON row that names a key twice; a JSON line that is not JSON or not
  an object; an empty file, a header without rows; a TSV header line holding a lone "\\r" (old Mac line ends);
- what a task reads (`Table.texts`, `Table.values`): a missing column, and a cell that is missing, `null`, empty
  or (for text) not a string.
"""

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .files import (
    INVISIBLE_PREFIXES,
    LONE_SURROGATE,
    DuplicateKeyError,
    invalid_utf8_error,
    strip_invisible_prefix,
    unique_keys,
    utf8_lines,
)

# File suffix -> how the file is read.
TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl"}
# The longest CSV field read (csv's default is 131,072 characters; 2**31 - 1 is the most every platform's C long holds).
FIELD_SIZE_LIMIT = 2**31 - 1
# The cell of a JSON row that lacks the column's key.
ABSENT = type("Absent", (), {"__repr__": lambda self: "<absent>"})()


def is_table(path: str | os.PathLike) -> bool:
    """Whether `path`'s suffix is one of `TABLE_FORMATS` (case ignored)."""
    return Path(path).suffix.lower() in TABLE_FORMATS


def describe(value) -> str:
    """A cell as an error message shows it: its value and, for JSON values other than text, their kind."""
    if value is ABSENT:
        return "nothing (the row has no such key)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{json.dumps(value)} (true/false)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, list):
        return f"{json.dumps(value)[:60]} (a list)"
    if isinstance(value, dict):
        return f"{json.dumps(value)[:60]} (an object)"
    return repr(value[:80] + "..." if len(value) > 80 else value)


@dataclass
class Table:
    """A table's columns and the physical line of each row.

    Attributes:
        path: the file.
        kind: "csv", "tsv", "jsonl" or "json".
        columns: column name -> its cells, one a row (strings in CSV and TSV; JSON values, or `ABSENT`, in JSON).
        lines: the line each row starts on (1-based, the header counted).
        header_line: the line that names the columns (the header, or a JSON file's first row); None when the
            columns were given (a header-less file).
    """

    path: Path
    kind: str
    columns: dict[str, list] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)
    header_line: int | None = 1

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def where(self, row: int, column: str | None = None) -> str:
        """`path:line` of row `row` (from 0), with the column when given: "train.csv:7, column 'text'"."""
        place = f"{self.path}:{self.lines[row]}"
        return place if column is None else f"{place}, column {column!r}"

    def require(self, names, what: str = "") -> None:
        """A `ValueError` naming the header line and the columns it has when one of `names` is not a column."""
        missing = [name for name in names if name not in self.columns]
        if missing:
            line = self.header_line or 1
            role = f" ({what})" if what else ""
            raise ValueError(f"{self.path}:{line}: no column(s) {missing}{role}; it has {self.names}")

    def values(self, column: str) -> list:
        """The cells of `column`; a `ValueError` naming the row and the column where one is missing or `null`, or
        an empty (or blank) text."""
        self.require([column])
        cells = self.columns[column]
        for row, value in enumerate(cells):
            if value is ABSENT or value is None or (isinstance(value, str) and not value.strip()):
                raise ValueError(f"{self.where(row, column)}: no value ({self._empty(value)})")
        return cells

    def texts(self, column: str, allow_empty: bool = False) -> list[str]:
        """The cells of `column` as text: each a non-blank string, else a `ValueError` naming the row and the
        column (a JSON number, list or `true` in a text column is refused: write it as a string). With
        `allow_empty`, a missing, `null` or blank cell is the empty text."""
        self.require([column])
        cells = self.columns[column]
        if allow_empty:
            cells = ["" if cell is ABSENT or cell is None else cell for cell in cells]
        else:
            self.values(column)
        for row, value in enumerate(cells):
            if not isinstance(value, str):
                raise ValueError(
                    f"{self.where(row, column)}: holds {describe(value)}, not text; a text column holds strings "
                    f'(write "{value}" if it is text)'
                )
            if LONE_SURROGATE.search(value):  # a JSON escape such as "\ud800" alone: no character, no token
                raise ValueError(
                    f"{self.where(row, column)}: the text {value[:40]!r} holds half of a UTF-16 surrogate pair (an "
                    "escape such as \\ud800 without its other half), which no tokenizer can encode"
                )
        return cells

    def _empty(self, value) -> str:
        if value is ABSENT:
            return "the row has no such key"
        if value is None:
            return "null" if self.kind in ("json", "jsonl") else "empty"
        return "an empty field" if not value else f"only blanks: {value!r}"


def read_table(
    path: str | os.PathLike,
    header: list[str] | tuple[str, ...] | None = None,
    what: str = "rows",
    kind: str | None = None,
) -> Table:
    """Read the table at `path` (its suffix says the format: `TABLE_FORMATS`), strictly.

    Args:
        path: a .csv, .tsv, .json or .jsonl file.
        kind: the format ("csv", "tsv", "json", "jsonl") of a file whatever its suffix (GLUE's files are TSV).
        header: the columns of a CSV/TSV file without a header line (its first line is then a row).
        what: what the rows are, for the error of a file without any ("SST-2 examples").

    Raises:
        FileNotFoundError for a missing file; ValueError naming the file (and the line) for another suffix, an
        empty file or one without rows, bytes that are not UTF-8, a row whose field count is not the header's, a
        header naming a column twice, a JSON line that is not a JSON object.
    """
    path = Path(path)
    kind = kind or TABLE_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: unknown file type {path.suffix!r}; give a .csv, .tsv, .json or .jsonl file")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; expected a .{kind} file")
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    with path.open("rb") as f:
        start = f.read(1 << 12).decode("utf-8", errors="ignore").lstrip(INVISIBLE_PREFIXES + " \t\r\n")
        f.seek(0)
        if not start:
            raise ValueError(f"{path} is empty; expected {what}")
        if kind == "json" and not start.startswith("["):
            kind = "jsonl"  # `datasets` and transformers' scripts read .json files of JSON lines too
        if kind == "json":
            table = _read_json_array(f, path)
        elif kind == "jsonl":
            table = _read_json_lines(f, path)
        else:
            table = _read_delimited(f, path, kind, header)
    if not table.lines:
        raise ValueError(f"{path} holds no {what}" + (" (a header only)" if table.columns else ""))
    return table


def _read_delimited(f, path: Path, kind: str, header) -> Table:
    """CSV or TSV rows, each with the header's number of fields."""
    table = Table(path, kind, header_line=None if header else 1)
    lines = utf8_lines(f, path)
    rows = _tsv_rows(lines) if kind == "tsv" else _csv_rows(lines, path)
    if header is None:
        first = next(rows, None)
        if first is None:
            return table
        table.header_line, _, header = first
    names = list(header)
    if kind == "tsv" and any("\r" in name for name in names):  # else read as one line: a header, no rows
        raise ValueError(
            f'{path}:1: the header line holds a "\\r" that ends no line: saved with old Mac line ends? Save the file '
            'with "\\n" ones'
        )
    repeated = sorted({name for name in names if name and names.count(name) > 1})
    if repeated:
        raise ValueError(f"{path}:1: the header names the column(s) {repeated} more than once: {names}")
    # Columns without a name (a trailing delimiter in every line of a spreadsheet export) are read and never used.
    positions = [(name, i) for i, name in enumerate(names) if name]
    table.columns = {name: [] for name, _ in positions}
    for start, end, fields in rows:
        if len(fields) != len(names):
            raise ValueError(_field_count_error(path, kind, start, end, fields, names))
        for name, i in positions:
            table.columns[name].append(fields[i])
        table.lines.append(start)
    return table


def _tsv_rows(lines):
    """(line, line, fields) of each non-blank line of a TSV file."""
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\n").removesuffix("\r")
        if line:  # a blank line (one at the end of a hand-edited file is common) is no row, as in csv readers
            yield number, number, line.split("\t")


def _csv_rows(lines, path: Path):
    """(line the row starts on, line it ends on, fields) of each row of a CSV file; a quoted field may span
    lines."""
    # strict: a quote that never closes, or text after a closing quote, is an error. Python's csv would read the
    # first as one field holding the rest of the file (its rows gone, in silence, where that field is a row's last)
    # and drop the quotes of the second ('"hi" he said' read as 'hi he said').
    # A text may be longer than csv's default field limit (131,072 characters): the table is in memory anyway.
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_SIZE_LIMIT))
    reader = csv.reader(lines, strict=True)
    end = 0  # the last line read
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise ValueError(_csv_error(path, error, end + 1, reader.line_num)) from None
        start, end = end + 1, reader.line_num
        if fields:  # a blank line is no row
            yield start, end, fields


def _csv_error(path: Path, error: csv.Error, start: int, line: int) -> str:
    """The message for what Python's csv module refuses in the row that starts on line `start` (it stopped on
    `line`)."""
    reason = str(error)
    if "new-line character" in reason:  # a lone "\r", which csv reads as a line break
        reason = 'a line break ("\\r") inside a field that is not quoted; quote the field or remove the "\\r"'
    elif reason == "unexpected end of data":
        return (
            f'{path}:{start}: a quote (") opens a field in this row that never closes: the rest of the file, to line '
            f'{line}, would be one field; close the quote, or quote a field with a quote in it as "...""..."'
        )
    elif "expected after" in reason:  # ',' expected after '"'
        lines = f"the row runs from line {start} to line {line}: " if line > start else ""
        return (
            f'{path}:{start}: text follows the closing quote (") of a quoted field ({lines}a quote closes a field '
            'there before its end, as in "hi" he said); quote the whole field and double each quote inside it: '
            '"""hi"" he said"'
        )
    return f"{path}:{line}: not readable as CSV ({reason})"


def _field_count_error(path: Path, kind: str, start: int, end: int, fields: list[str], names: list[str]) -> str:
    separator = {"csv": "comma", "tsv": "tab"}[kind]
    text = {"csv": ",", "tsv": "\t"}[kind].join(fields)
    message = (
        f"{path}:{start}: {len(fields)} field{'s' * (len(fields) != 1)}, but the header has {len(names)} columns "
        f"{names}: {text[:120]!r}"
    )
    if any("\r" in text for text in [*names, *fields]):
        return message + ' (a "\\r" that ends no line: saved with old Mac line ends? Save the file with "\\n" ones)'
    if end > start:
        return message + (
            f' (this row runs from line {start} to line {end}: a quote (") opens a field there that closes only '
            f'on line {end}; quote a field with a quote in it as "...""...")'
        )
    if len(fields) > len(names):
        how = 'quote a text that holds a comma ("hello, world")' if kind == "csv" else "remove the tab from the text"
        return message + f"; a {separator} inside a text makes another field: {how}"
    return message


def _read_json_lines(f, path: Path) -> Table:
    """One JSON object a line (blank lines skipped)."""
    table = Table(path, "jsonl", header_line=None)
    for number, line in enumerate(utf8_lines(f, path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.rstrip("\r\n"), object_pairs_hook=unique_keys)  # a column past the end: none of it
        except DuplicateKeyError as error:
            raise ValueError(f"{path}:{number}: {error}") from None
        except json.JSONDecodeError as error:
            if not table.lines and path.suffix.lower() == ".json":
                _refuse_single_object(f, path)
            raise ValueError(f"{path}:{number}: not JSON ({error.msg}, column {error.colno})") from None
        _add_json_row(table, row, number)
    return table


def _refuse_single_object(f, path: Path) -> None:
    """A `.json` file that holds one object (pretty-printed, as {"data": [...]}) is no table: say so."""
    f.seek(0)
    try:
        value = json.loads(strip_invisible_prefix(f.read().decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return
    if isinstance(value, dict):
        raise ValueError(
            f"{path}: one JSON object (keys {list(value)[:5]}); a table is JSON lines (one object a line) or a JSON "
            "array of objects"
        )


def _read_json_array(f, path: Path) -> Table:
    """A JSON array of objects, each row's line being the line its object starts on."""
    try:
        text = strip_invisible_prefix(f.read().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise invalid_utf8_error(path, error) from None
    decoder, table = json.JSONDecoder(object_pairs_hook=unique_keys), Table(path, "json", header_line=None)
    position, line = _skip_blanks(text, text.index("[") + 1), 1 + text.count("\n", 0, text.index("["))
    counted = 0  # `line` is the line of text[counted]
    try:
        while text[position : position + 1] != "]":
            if table.lines:  # after the first object: a comma, then the next one
                if text[position : position + 1] != ",":
                    raise json.JSONDecodeError("expected ',' or ']' after an object", text, position)
                position = _skip_blanks(text, position + 1)
            line += text.count("\n", counted, position)
            counted = position
            try:
                row, position = decoder.raw_decode(text, position)
            except DuplicateKeyError as error:
                raise ValueError(f"{path}:{line}: {error}") from None
            _add_json_row(table, row, line)
            position = _skip_blanks(text, position)
        if text[position + 1 :].strip():
            raise json.JSONDecodeError("more text after the array's closing ']'", text, position + 1)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not JSON ({error.msg}, column {error.colno})") from None
    return table


def _skip_blanks(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _add_json_row(table: Table, row, line: int) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"{table.path}:{line}: {describe(row)} is no row; each row is a JSON object of columns")
    if table.header_line is None:
        table.header_line = line
    for name in [name for name in row if name not in table.columns]:  # first seen here: absent from the rows before
        table.columns[name] = [ABSENT] * len(table.lines)
    for name, cells in table.columns.items():
        cells.append(row.get(name, ABSENT))
    table.lines.append(line)
