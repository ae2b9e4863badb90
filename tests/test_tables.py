"""hf_ctx.data.tables: a user's CSV, TSV, JSON-lines or JSON table read strictly, every refusal naming the file and
the physical line (tables of any content, and damaged ones, are in tests/test_entry_points.py)."""

import pytest

from hf_ctx.data.tables import ABSENT, read_table


def table(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def test_csv_cells_are_the_text_as_written_and_rows_keep_their_physical_lines(tmp_path):
    path = table(tmp_path, "t.csv", 'text,label\n"a, b",1\n\n"two\nlines",NA\nNone,\n')
    read = read_table(path)
    assert read.columns == {"text": ["a, b", "two\nlines", "None"], "label": ["1", "NA", ""]}
    assert read.lines == [2, 4, 6] and read.header_line == 1
    assert read.where(2, "label") == f"{path}:6, column 'label'"
    with pytest.raises(ValueError, match=rf"^{path}:6, column 'label': no value \(an empty field\)$"):
        read.values("label")


def test_tsv_reads_quotes_as_text_and_a_headerless_file_takes_its_columns(tmp_path):
    path = table(tmp_path, "t.txt", 'src\t1\the said "hi\r\n\nsrc\t0\tok\n')
    read = read_table(path, header=["source", "label", "sentence"], kind="tsv")
    assert read.columns["sentence"] == ['he said "hi', "ok"] and read.lines == [1, 3] and read.header_line is None


def test_json_lines_and_a_json_array_name_each_rows_line(tmp_path):
    lines = read_table(table(tmp_path, "t.jsonl", '{"a": 1}\n\n{"a": 2, "b": "x"}\n'))
    assert lines.columns == {"a": [1, 2], "b": [ABSENT, "x"]} and lines.lines == [1, 3]
    with pytest.raises(ValueError, match=r"t.jsonl:1, column 'b': no value \(the row has no such key\)"):
        lines.texts("b")
    array = read_table(table(tmp_path, "t.json", '[\n  {"a": 1},\n\n  {"a":\n 2}\n]\n'))
    assert array.columns == {"a": [1, 2]} and array.lines == [2, 4]
    assert read_table(table(tmp_path, "lines.json", '{"a": 1}\n{"a": 2}\n')).lines == [1, 2]  # .json of JSON lines


@pytest.mark.parametrize(
    "name, content, error",
    [
        (
            "t.csv",
            "a,b\n1,2\n3,4,5\n",
            r"t.csv:3: 3 fields, but the header has 2 columns \['a', 'b'\]: '3,4,5'; a comma",
        ),
        (
            "t.csv",
            'a,b\n"1,2\n3,4\n',
            r"t.csv:2: a quote \(\"\) opens a field in this row that never closes: .*to line 3",
        ),
        ("t.csv", 'a,b\n"1\n2"\n', r"t.csv:2: 1 field, .*this row runs from line 2 to line 3: a quote"),
        # Before: the quote's field took the rest of the file, and rows 3 and 4 were gone, in silence.
        ("t.csv", 'a,b\n1,"2\n3,4\n5,6\n', r"t.csv:2: a quote .* never closes: the rest of the file, to line 4"),
        # Before: read as 'hi he said' (the quotes dropped), or, where a quote closes a later line's field, that
        # line and those between read into one field, in silence.
        ("t.csv", 'a,b\n"hi" he said,1\n', r"t.csv:2: text follows the closing quote \(\"\) of a quoted field \(a"),
        ("t.csv", 'a,b\n1,"2\n3,4\n5,"6\n7,8\n', r"t.csv:2: text follows the closing .*runs from line 2 to line 4"),
        # Before: one line, "holds no rows (a header only)".
        ("t.tsv", "a\tb\r1\t2\r", r't.tsv:1: the header line holds a "\\r" that ends no line: saved with old Mac'),
        # Before: the last value kept, in silence (a CSV header naming a column twice is refused, above).
        ("t.jsonl", '{"a": 1}\n{"a": 1, "a": 2}\n', r"t.jsonl:2: an object names the key 'a' twice \(1, then 2\)"),
        ("t.json", '[\n{"a": 1},\n{"a": {"b": 1, "b": 2}}]', r"t.json:3: an object names the key 'b' twice"),
        ("t.csv", "a,b\n1\r2,3\n", r"t.csv:2: not readable as CSV \(a line break \(\"\\r\"\) inside a field"),
        ("t.tsv", "a\tb\n1\t2\t3\n", r"t.tsv:2: 3 fields, .*a tab inside a text makes another field"),
        ("t.csv", "a,a\n1,2\n", r"t.csv:1: the header names the column\(s\) \['a'\] more than once"),
        ("t.csv", b"a,b\n1,2\n3,caf\xe9\n", r"t.csv:3: not valid UTF-8"),
        ("t.jsonl", '{"a": 1}\n{"a": 1\n', r"t.jsonl:2: not JSON \(Expecting ',' delimiter, column 8\)"),
        ("t.jsonl", '{"a": 1}\n[1]\n', r"t.jsonl:2: \[1\] \(a list\) is no row; each row is a JSON object"),
        (
            "t.json",
            '[\n{"a": 1}\n{"a": 2}\n]',
            r"t.json:3: not JSON \(expected ',' or ']' after an object, column 1\)",
        ),
        ("t.json", '[{"a": 1}] {}', r"t.json:1: not JSON \(more text after the array's closing"),
        ("t.json", '{\n "data": []\n}', r"t.json: one JSON object \(keys \['data'\]\); a table is JSON lines"),
        ("t.csv", "", r"t.csv is empty; expected rows"),
        ("t.csv", "a,b\n\n", r"t.csv holds no rows \(a header only\)"),
        ("t.xlsx", "a", r"t.xlsx: unknown file type '.xlsx'; give a .csv, .tsv, .json or .jsonl file"),
    ],
)
def test_a_table_that_is_not_one_is_named_by_file_and_line(tmp_path, name, content, error):
    with pytest.raises(ValueError, match=error):
        read_table(table(tmp_path, name, content))


def test_a_csv_field_longer_than_csv_modules_limit_is_read(tmp_path):
    """Before: refused as "not readable as CSV (field larger than field limit (131072))"."""
    text = "word " * 40_000
    read = read_table(table(tmp_path, "t.csv", f'text,label\n"{text}",1\nshort,0\n'))
    assert read.columns["text"] == [text, "short"] and read.lines == [2, 3]


def test_columns_without_a_name_are_read_and_never_used_and_cells_are_checked_as_text(tmp_path):
    read = read_table(table(tmp_path, "t.csv", ",text,\n0,a,\n1,b,\n"))  # a spreadsheet's index and trailing comma
    assert read.names == ["text"]
    numbers = read_table(table(tmp_path, "n.jsonl", '{"t": "a"}\n{"t": 7}\n{"t": "\\ud800"}\n'))
    with pytest.raises(ValueError, match=r"n.jsonl:2, column 't': holds 7 \(a number\), not text"):
        numbers.texts("t")
    numbers.columns["t"][1] = "b"
    with pytest.raises(ValueError, match=r"n.jsonl:3, column 't': the text .* half of a UTF-16 surrogate pair"):
        numbers.texts("t")
    with pytest.raises(FileNotFoundError, match="missing.csv not found"):
        read_table(tmp_path / "missing.csv")
