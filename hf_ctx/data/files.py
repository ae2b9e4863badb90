"""Reading a user's text files: their lines as UTF-8 without invisible prefixes, and errors that name the file and
the line; JSON files read the same way; the record that marks generated data files as such."""

import gzip
import json
import os
import re
import zlib
from pathlib import Path

from .atomic_write import write_text

# Characters that show as nothing yet would become part of a line's first word: the byte-order mark that editors
# put at the start of a UTF-8 file (U+FEFF, also read as the "zero-width no-break space"), and the zero-width space
# (U+200B) and word joiner (U+2060) left in text pasted from web pages. Nothing a user wrote starts with them.
INVISIBLE_PREFIXES = "\ufeff\u200b\u2060"


def check_regular_file(path: str | os.PathLike, what: str = "text file") -> None:
    """An error naming `path` unless it is a regular file: FileNotFoundError when nothing is there,
    IsADirectoryError for a folder, ValueError for a pipe, a process substitution `<(...)`, a device such as
    /dev/null or a socket (read twice or sized by hf_ctx, a stream would be read empty the second time)."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"{what} {path} is a folder; give a file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    raise ValueError(
        f"{what} {path} is not a regular file (a pipe, a process substitution, a device such as /dev/null); "
        "save the text to a file and give that"
    )


def unique_files(paths) -> list[str]:
    """`paths` without a file given again (the same file under another name included): a file listed twice is a
    ValueError naming both, so that it is not read (trained on) twice without the user knowing."""
    seen = {}
    for path in map(os.fspath, paths):
        key = os.path.realpath(path)
        if key in seen:
            also = "" if seen[key] == path else f" (also as {seen[key]})"
            raise ValueError(f"the file {path} is given twice{also}; give each file once")
        seen[key] = path
    return list(seen.values())


def strip_invisible_prefix(line: str) -> str:
    """`line` without the `INVISIBLE_PREFIXES` characters at its start."""
    return line.lstrip(INVISIBLE_PREFIXES)


def utf8_lines(f, path: str | os.PathLike):
    """The lines of the open file `f` (binary, or text opened as UTF-8), each without the invisible characters
    at its start (`INVISIBLE_PREFIXES`: a byte-order mark, a zero-width space); line endings are kept. Bytes that
    are not UTF-8, and a NUL character, are a ValueError naming `path:line`."""
    try:
        for line_number, line in enumerate(f, start=1):
            if isinstance(line, bytes):
                try:
                    line = line.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise _line_error(path, line_number, error) from None
            if "\x00" in line:  # valid UTF-8, but no text holds it: UTF-16 without its byte-order mark does
                raise ValueError(
                    f"{os.fspath(path)}:{line_number}: a NUL character in the text; is {os.fspath(path)} a binary "
                    "file, or UTF-16 without a byte-order mark? Save it as UTF-8 text"
                )
            yield strip_invisible_prefix(line)
    except UnicodeDecodeError as error:  # a text file's reader decodes ahead of the lines it gives
        raise invalid_utf8_error(path, error) from None


GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | os.PathLike) -> bool:
    """Whether the file `path` starts with gzip's header (whatever its name)."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def text_file_lines(path: str | os.PathLike):
    """The lines of the text file `path` as `utf8_lines` gives them (line endings kept; lines end at "\\n"),
    decompressed where the file is gzip-compressed (recognised by its first bytes, whatever its name).

    Raises a ValueError naming the file: bytes that are not UTF-8 or a NUL character (with the line), a name
    ending in .gz on a file that is not gzip-compressed, a corrupt or truncated gzip file (with the last line
    read whole)."""
    path = os.fspath(path)
    compressed = is_gzip(path)
    if path.endswith(".gz") and not compressed and os.path.getsize(path) > 0:
        raise ValueError(f"{path}: not a gzip file (its name ends in .gz but it does not start with gzip's header)")
    line_number = 0
    with gzip.open(path, "rb") if compressed else open(path, "rb") as f:
        try:
            for line in utf8_lines(f, path):
                yield line
                line_number += 1
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise ValueError(
                f"{path}: corrupt or truncated gzip file after line {line_number} ({err}); download or compress it "
                "again"
            ) from None


def invalid_utf8_error(path: str | os.PathLike, error: UnicodeDecodeError) -> ValueError:
    """A ValueError naming the file and the line of the first bytes that are not UTF-8 (`error` is what
    decoding raised, which knows neither)."""
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as line_error:
                return _line_error(path, line_number, line_error)
    return ValueError(f"{os.fspath(path)}: not valid UTF-8 ({error}); save the file as UTF-8")


def _line_error(path: str | os.PathLike, line_number: int, error: UnicodeDecodeError) -> ValueError:
    # A UTF-16 file (what some editors save as "Unicode") starts with its byte-order mark, FF FE or FE FF.
    is_utf16 = line_number == 1 and error.object[:2] in (b"\xff\xfe", b"\xfe\xff")
    utf16 = " (it is UTF-16: its byte-order mark starts the file)" if is_utf16 else ""
    if line_number == 1 and error.object[:2] == GZIP_MAGIC:  # a reader of plain text only (a table, CoNLL, GLUE)
        utf16 = " (it is gzip-compressed: decompress it, gunzip -k)"
    return ValueError(
        f"{os.fspath(path)}:{line_number}: not valid UTF-8 ({error.reason} at byte {error.start} of the line){utf16}; "
        "save the file as UTF-8"
    )


# Half of a UTF-16 surrogate pair: JSON can write one as an escape ("\ud800"), but it is no character, so no UTF-8
# text (and no tokenizer) can hold it. (Raw UTF-8 cannot hold one at all: decoding refuses it.)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate_text(value) -> str | None:
    """The first string in the JSON `value` (strings, keys, lists, objects) holding half a surrogate pair."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


class DuplicateKeyError(ValueError):
    """A JSON object that names a key twice (`json` keeps the last value, in silence)."""

    def __init__(self, key: str, pairs):
        self.key = key
        values = ", then ".join(json.dumps(value, ensure_ascii=False)[:40] for name, value in pairs if name == key)
        super().__init__(f"an object names the key {key!r} twice ({values}): which value is meant? Give it once")


def unique_keys(pairs):
    """`object_pairs_hook` for `json`: the object of `pairs`, or a `DuplicateKeyError` for a key given twice."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise DuplicateKeyError(key, pairs)
        seen.add(key)
    return dict(pairs)


def read_json_file(path: str | os.PathLike, what: str = "a JSON file", refuse_duplicate_keys: bool = False):
    """The value in the JSON file `path` (UTF-8, a byte-order mark allowed). A file that is not UTF-8 or not JSON
    is a ValueError naming it, `what` it should be, and where it goes wrong; one that cannot be read an OSError
    naming it. With `refuse_duplicate_keys`, an object naming a key twice is a ValueError too (`json` would keep
    the last value)."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            value = json.load(f, object_pairs_hook=unique_keys if refuse_duplicate_keys else None)
    except DuplicateKeyError as error:
        raise ValueError(f"{os.fspath(path)}: {error}; expected {what}") from None
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{os.fspath(path)}: not valid UTF-8 ({error.reason} at byte {error.start}); {what} is UTF-8 JSON"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{os.fspath(path)}: not JSON ({error}); expected {what}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{os.fspath(path)} is a folder; expected {what}") from None
    except OSError as error:
        raise OSError(f"cannot read {os.fspath(path)}: {error.strerror or error}") from None
    damaged = _lone_surrogate_text(value)
    if damaged is not None:
        raise ValueError(
            f"{os.fspath(path)}: the text {damaged[:40]!r} holds half of a UTF-16 surrogate pair (an escape such as "
            "\\ud800 without its other half), which is no character and no tokenizer can encode; the file was "
            "written from damaged text"
        )
    return value


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
