"""Reading a user's text files: their lines as UTF-8, and errors that name the file and the line; the record
that marks generated data files as such."""

import json
import os
from pathlib import Path

from ..atomic_files import write_text


def utf8_lines(f, path: str | os.PathLike):
    """The lines of the open text file `f`; bytes that are not UTF-8 are a ValueError naming `path:line`."""
    try:
        yield from f
    except UnicodeDecodeError as error:
        raise invalid_utf8_error(path, error) from None


def invalid_utf8_error(path: str | os.PathLike, error: UnicodeDecodeError) -> ValueError:
    """A ValueError naming the file and the line of the first bytes that are not UTF-8 (`error` is what
    decoding raised, which knows neither)."""
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as line_error:
                return ValueError(
                    f"{os.fspath(path)}:{line_number}: not valid UTF-8 ({line_error.reason} at byte "
                    f"{line_error.start} of the line); save the file as UTF-8"
                )
    return ValueError(f"{os.fspath(path)}: not valid UTF-8 ({error}); save the file as UTF-8")


# Beside generated data files: {file name: how it was generated}, so a model card can say the data is not real.
GENERATED_FILES_RECORD = "generated_files.json"


def mark_generated(path: str | os.PathLike, how: str) -> None:
    """Record, in `GENERATED_FILES_RECORD` beside the file `path`, that it was generated and `how` (a phrase:
    "by hf_ctx.data.synthetic_ner, seed 42")."""
    record = Path(path).parent / GENERATED_FILES_RECORD
    entries = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
    entries[Path(path).name] = how
    write_text(record, json.dumps(entries, indent=2, sort_keys=True) + "\n")


def how_generated(path: str | os.PathLike) -> str | None:
    """How the file `path` was generated, as `mark_generated` recorded it; `None` for a file of real data (or
    a record that cannot be read, which leaves the data unmarked rather than the run failed)."""
    record = Path(path).parent / GENERATED_FILES_RECORD
    try:
        return json.loads(record.read_text(encoding="utf-8")).get(Path(path).name)
    except (OSError, ValueError, AttributeError):
        return None
