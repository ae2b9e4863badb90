"""Property-based checks of every kind of entry point (docs/reliability.md#entry-points): config fields, model
inputs, the file readers. Hypothesis generates hostile values; each must be accepted or refused with a named
`ValueError` / `OSError` (the field, the input, the file and line), never another exception and never a partial
file. Few examples each, tiny models: the module runs in well under a minute on one core."""

import json
import math
import os
import re

import pytest
import torch
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from hf_ctx import (
    CtxBertConfig,
    CtxBertModel,
    ElmoConfig,
    ElmoModel,
    TagLMConfig,
)
from hf_ctx.tools.output_files import LOCK_FILE

# 25 examples a test keeps the suite fast; HF_CTX_HYPOTHESIS_EXAMPLES=500 searches harder.
FEW = settings(
    max_examples=int(os.environ.get("HF_CTX_HYPOTHESIS_EXAMPLES", 25)),
    deadline=None,
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# Values a config.json, a --config_overrides or a user's code may put in a field.
HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(-3, 3), max_size=2),
)

CONFIGS = {
    "bert": (
        CtxBertConfig,
        {"vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8},
    ),
    "elmo": (ElmoConfig, {"vocab_size": 20}),
    "taglm": (TagLMConfig, {"vocab_size": 20}),
}


def named_errors_only(function, *args, **kwargs):
    """Run `function`; a ValueError or OSError is what a user may get, anything else is a failure."""
    try:
        result = function(*args, **kwargs)
    except (ValueError, OSError) as error:
        assert str(error).strip(), f"{type(error).__name__} without a message"
        event("refused")  # --hypothesis-show-statistics: how often each outcome was tried
        return None, error
    event("accepted")
    return result, None


# --- config fields --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", CONFIGS)
@FEW
@given(data=st.data())
def test_a_hostile_config_value_is_refused_naming_the_field(family, data):
    config_class, sizes = CONFIGS[family]
    field = data.draw(st.sampled_from(sorted(config_class.field_checks)), label="field")
    value = data.draw(HOSTILE_VALUES, label="value")
    config, error = named_errors_only(config_class, **{**sizes, field: value})
    if error is not None:
        assert field in str(error) or field.split("_")[0] in str(error), str(error)
    else:  # accepted: the field's own check passes it, and the config round-trips through JSON
        config_class.field_checks[field](field, getattr(config, field))
        again, error = named_errors_only(config_class.from_dict, json.loads(config.to_json_string()))
        assert error is None, str(error)


@pytest.mark.parametrize("section", ["char_cnn", "lstm"])
@FEW
@given(data=st.data())
def test_a_hostile_value_inside_an_elmo_section_is_refused_naming_it(section, data):
    defaults = ElmoConfig().to_dict()[section]
    key = data.draw(st.sampled_from(sorted(defaults)), label="key")
    value = data.draw(HOSTILE_VALUES, label="value")
    config, error = named_errors_only(ElmoConfig, **{section: {key: value}})
    if error is not None:
        assert section in str(error) and (key in str(error) or key.split("_")[0] in str(error)), str(error)
    else:
        assert getattr(config, section)[key] == value


@pytest.mark.parametrize("family", CONFIGS)
@FEW
@given(data=st.data())
def test_a_hostile_config_json_names_the_file(family, data, tmp_path_factory):
    config_class, sizes = CONFIGS[family]
    folder = tmp_path_factory.mktemp("config")
    config_class(**sizes).save_pretrained(folder)
    content = json.loads((folder / "config.json").read_text())
    field = data.draw(st.sampled_from(sorted(config_class.field_checks)), label="field")
    content[field] = data.draw(HOSTILE_VALUES.filter(lambda v: not (isinstance(v, float) and not math.isfinite(v))))
    (folder / "config.json").write_text(json.dumps(content))
    _, error = named_errors_only(config_class.from_pretrained, folder)
    if error is not None:
        assert str(folder / "config.json") in str(error), str(error)


# --- model inputs ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    bert = CtxBertModel(CtxBertConfig(**CONFIGS["bert"][1], max_position_embeddings=16)).eval()  # "long": 24
    elmo_config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=20,
        max_sentence_words=16,
    )
    from tiny_checkpoints import taglm

    return {"bert": bert, "elmo": ElmoModel(elmo_config).eval(), "taglm": taglm(None)[0].eval()}


DTYPES = st.sampled_from([torch.int64, torch.int32, torch.int16, torch.uint8, torch.float32, torch.bool])


# In the order they are applied: values first, then shapes and dtypes.
FAULTS = [
    "id",
    "mask value",
    "sentence without words",
    "left padding",
    "long",
    "empty",
    "mask shape",
    "rank",
    "no mask",
    "dtype",
    "mask dtype",
]
WORD_VOCABULARY = 14  # tiny_checkpoints.taglm's


@st.composite
def hostile_inputs(draw, family: str):
    """The keyword arguments of a forward (input_ids, attention_mask, TagLM's input_word_ids): valid inputs (int64 ids in range, a right-padded 0/1 mask) with none,
    one or two `FAULTS`: another dtype or number of dimensions, an empty batch, a sentence without words, an id out
    of range, a mask of another shape, values or dtype, no mask, left padding, more tokens than the model takes."""
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    words = family != "bert"
    batch, length = draw(st.integers(1, 3)), draw(st.integers(1, 8))
    high = 262 if words else 20
    ids = torch.randint(
        1 if words else 0, high, (batch, length, 50) if words else (batch, length), generator=generator
    )
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    if words:
        ids = ids * mask[..., None]  # padding words hold no characters
    chosen = draw(st.sets(st.sampled_from(FAULTS), max_size=2))
    for fault in (fault for fault in FAULTS if fault in chosen):
        if fault == "dtype":
            ids = ids.to(draw(DTYPES))
        elif fault == "rank":
            ids = ids.reshape(-1) if draw(st.booleans()) else ids[None]
        elif fault == "empty":
            ids, mask = (ids[:0], mask[:0]) if draw(st.booleans()) else (ids[:, :0], mask[:, :0])
        elif fault == "id" and ids.numel():
            ids = ids.contiguous()
            ids.view(-1)[0] = draw(st.sampled_from([-1, high, high + 1000]))
        elif fault == "mask shape":
            mask = mask[:, :-1] if draw(st.booleans()) else mask[None]
        elif fault == "mask value" and mask.numel():
            mask = mask.contiguous()
            mask.view(-1)[0] = draw(st.sampled_from([-1, 2]))
        elif fault == "mask dtype" and mask is not None:
            mask = mask.to(draw(DTYPES))
        elif fault == "sentence without words":
            ids, mask = ids.clone(), mask.clone()
            ids[0], mask[0] = 0, 0
        elif fault == "no mask":
            mask = None
        elif fault == "left padding" and mask is not None and mask.dim() == 2:
            mask = mask.flip(1)
        elif fault == "long" and ids.dim() >= 2:
            ids = ids.repeat_interleave(3, dim=1)
            mask = mask.repeat_interleave(3, dim=1) if mask is not None and mask.dim() == 2 else mask
    inputs = {"input_ids": ids, "attention_mask": mask}
    if family == "taglm":
        word_ids = torch.randint(0, WORD_VOCABULARY, tuple(ids.shape[:2]), generator=generator)
        if draw(st.booleans()) and word_ids.numel():
            word_ids.view(-1)[0] = draw(st.sampled_from([-1, WORD_VOCABULARY]))
        inputs["input_word_ids"] = word_ids
    return inputs


@pytest.mark.parametrize("family", ["bert", "elmo", "taglm"])
@FEW
@given(data=st.data())
def test_hostile_model_inputs_are_refused_by_name(models, family, data):
    inputs = data.draw(hostile_inputs(family), label="inputs")
    with torch.no_grad():
        output, error = named_errors_only(models[family], **inputs)
    if error is not None:
        named = ("input_ids", "input_word_ids", "attention_mask", "batch", "sequence", "words", "word id")
        assert any(word in str(error) for word in named), str(error)
    else:
        assert torch.isfinite(output.logits if family == "taglm" else output.last_hidden_state).all()


# --- file readers ---------------------------------------------------------------------------------------------

# Lines a user's file may hold: text with tabs and spaces, invisible characters, control characters, numbers.
LINE_TEXT = st.text(
    alphabet=st.sampled_from(list("ab ExO-BI\t0123456789.,:\"'{}[]\\\r") + ["\ufeff", "\u200b", "\x00", "\u00e9"]),
    max_size=30,
)
FILE_BYTES = st.one_of(
    st.lists(LINE_TEXT, max_size=8).map(lambda lines: "\n".join(lines).encode()),
    st.binary(max_size=64),
)
# Fields of a file in a reader's own format: mostly right (three in four), sometimes anything.
FIELD = st.one_of(
    st.sampled_from(["cat", "the", "O", "B-PER", "I-PER", "B-", "X", "0", "1", "2", "-1", ""]), LINE_TEXT
)


def mostly(*good: str):
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(good), FIELD)


def rows_of(header: list[str] | None, fields: list, separator: str):
    """Files of a header and rows of `fields` (strategies), with a row of one field more or less, or a blank line,
    now and then."""
    row = st.one_of(
        st.tuples(*fields).map(list),
        st.tuples(*fields).map(list),
        st.tuples(*fields, FIELD).map(list),
        st.tuples(*fields[:-1]).map(list),
        st.just([]),
    )
    head = [separator.join(header)] if header else []
    return st.lists(row.map(separator.join), max_size=6).map(lambda rows: "\n".join(head + rows).encode())


WORD = mostly("cat", "the", "EU", "Paris", ".")
FILES_IN_FORMAT = {
    "conll": rows_of(None, [WORD, mostly("NN"), mostly("B-NP"), mostly("O", "B-PER", "I-PER", "B-LOC")], " "),
    "glue-sst2": rows_of(["sentence", "label"], [WORD, mostly("0", "1")], "\t"),
    "glue-mrpc": rows_of(
        ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
        [mostly("0", "1"), mostly("7"), mostly("9"), WORD, WORD],
        "\t",
    ),
    "text": FILE_BYTES,
    "embed": FILE_BYTES,
    "elmo-vocabulary": rows_of(["<S>", "</S>", "<UNK>"], [WORD], "\n"),
}


def readers(tmp_path):
    """(name, reader of a path) for each reader of a user's text files."""
    from hf_ctx.data.conll import read_conll
    from hf_ctx.data.glue import read_glue_file
    from hf_ctx.data.text import iter_text_file_lines
    from hf_ctx.tools.embed import read_sentences

    return {
        "conll": read_conll,
        "glue-sst2": lambda path: read_glue_file(path, "sst2"),
        "glue-mrpc": lambda path: read_glue_file(path, "mrpc"),
        "text": lambda path: list(iter_text_file_lines(path)),
        "embed": read_sentences,
        "elmo-vocabulary": lambda path: __import__("hf_ctx.tokenization_elmo").tokenization_elmo.read_vocabulary_file(
            path
        ),
    }


@pytest.mark.parametrize("reader", ["conll", "glue-sst2", "glue-mrpc", "text", "embed", "elmo-vocabulary"])
@FEW
@given(data=st.data())
def test_a_hostile_text_file_is_read_or_refused_naming_the_file(reader, data, tmp_path_factory):
    content = data.draw(st.one_of(FILE_BYTES, FILES_IN_FORMAT[reader]), label="content")
    path = tmp_path_factory.mktemp("files") / "input.txt"
    path.write_bytes(content)
    _, error = named_errors_only(readers(path)[reader], path)
    if error is not None:
        assert str(path) in str(error), str(error)


@pytest.mark.parametrize("reader", ["conll", "glue-sst2", "text", "embed", "elmo-vocabulary"])
@pytest.mark.parametrize("prefix", ["\ufeff", "\u200b"], ids=["bom", "zero-width-space"])
def test_an_invisible_prefix_reads_as_the_file_without_it(reader, prefix, tmp_path):
    contents = {
        "conll": "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n",
        "glue-sst2": "sentence\tlabel\na fine film\t1\n",
        "text": "first line\nsecond line\n",
        "embed": "the cat\na dog\n",
        "elmo-vocabulary": "<S>\n</S>\n<UNK>\nthe\n",
    }
    if reader == "elmo-vocabulary" and prefix != "\ufeff":
        pytest.skip("ElmoTokenizer reads its vocabulary in layer 0 (remote code), without data/files.py: a BOM only")
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text(contents[reader], encoding="utf-8")
    marked.write_text(prefix + contents[reader], encoding="utf-8")
    read = readers(plain)[reader]
    assert read(marked) == read(plain)


@pytest.mark.parametrize("reader", ["conll", "glue-sst2", "text", "embed", "table", "wordpiece"])
def test_utf16_without_a_byte_order_mark_is_refused_naming_the_file_and_line(reader, tmp_path):
    """UTF-16 saved without its byte-order mark is valid UTF-8 with a NUL after each ASCII letter: before, every
    reader but `hf-ctx embed` took it as text (a WordPiece vocabulary of letters and NULs)."""
    from hf_ctx.data.tables import read_table
    from hf_ctx.data.wordpiece import train_wordpiece_tokenizer

    contents = {
        "conll": "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n",
        "glue-sst2": "sentence\tlabel\na fine film\t1\n",
        "text": "first line\nsecond line\n",
        "embed": "the cat\na dog\n",
        "table": "sentence,label\na fine film,1\n",
        "wordpiece": "first line\nsecond line\n",
    }
    path = tmp_path / ("input.csv" if reader == "table" else "input.txt")
    path.write_bytes(contents[reader].encode("utf-16-le"))
    read = {
        **readers(path),
        "table": read_table,
        "wordpiece": lambda path: train_wordpiece_tokenizer([path], vocab_size=50),
    }[reader]
    with pytest.raises(
        ValueError, match=rf"^{path}:1: a NUL character in the text; is {path} a binary file, or UTF-16"
    ):
        read(path)


# --- a user's tables (data/tables.py) and the task readers on them ------------------------------------------------

# Words of many scripts: decomposed accents, emoji sequences, scripts without spaces, and the values pandas would
# read as missing or as numbers; beside the characters that make a table's structure.
UNICODE_WORDS = [
    "Zu\u0308rich",
    "\u2764\ufe0f",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "\u0939\u093f\u0928\u094d\u0926\u0940",
    "\u6771\u4eac\u90fd",
    "None",
    "NA",
    "null",
    "42",
    "nan",
    "-",
    "caf\u00e9",
    "\u00ad",
    "#N/A",
]
STRUCTURE = [",", "\t", '"', "'", "\n", "\r\n", " ", "\\", "{", "}", "[", "]"]
CELL = st.lists(st.sampled_from(UNICODE_WORDS + STRUCTURE + ["a", "b"]), max_size=4).map("".join)
COLUMN_NAMES = st.lists(
    st.sampled_from(["text", "label", "tokens", "id", "s1", "\u00e9t\u00e9"]), min_size=1, max_size=4, unique=True
)


def write_table(path, kind: str, header: list[str], rows: list[list[str]]) -> None:
    """A table as a well-behaved program writes it: Python's csv module, tab-joined lines, json.dumps."""
    import csv
    import io

    if kind == "csv":
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([header, *rows])
        path.write_text(out.getvalue(), encoding="utf-8")
    elif kind == "tsv":
        path.write_text("".join("\t".join(row) + "\n" for row in [header, *rows]), encoding="utf-8")
    else:
        objects = [json.dumps(dict(zip(header, row))) for row in rows]
        text = "\n".join(objects) if kind == "jsonl" else "[\n" + ",\n".join(objects) + "\n]"
        path.write_text(text + "\n", encoding="utf-8")


def tsv_cell(cell: str) -> str:
    """What TSV can hold: no tab or line break in a field (quotes are text)."""
    return cell.replace("\t", " ").replace("\r", " ").replace("\n", " ")


@st.composite
def tables(draw):
    kind = draw(st.sampled_from(["csv", "tsv", "jsonl", "json"]))
    header = draw(COLUMN_NAMES)
    rows = draw(st.lists(st.lists(CELL, min_size=len(header), max_size=len(header)), min_size=1, max_size=5))
    if kind == "tsv":
        rows = [[tsv_cell(cell) for cell in row] for row in rows]
        rows = [row if any(row) else ["x", *row[1:]] for row in rows]  # an empty line is no row
    return kind, header, rows


@FEW
@given(table=tables())
def test_a_table_a_program_wrote_reads_back_cell_for_cell(table, tmp_path_factory):
    """Whatever its words (Unicode, "None", "NA", "42", delimiters inside quoted fields), each cell is read as written."""
    from hf_ctx.data.tables import read_table

    kind, header, rows = table
    path = tmp_path_factory.mktemp("table") / f"data.{kind}"
    write_table(path, kind, header, rows)
    read = read_table(path)
    assert read.names == header
    assert [[read.columns[name][i] for name in header] for i in range(len(read))] == rows


# How a table goes wrong: a stray delimiter or quote on one row, a byte that is not UTF-8, a line cut short.
DAMAGE = ["delimiter", "quote", "latin-1", "cut"]


@FEW
@given(table=tables(), damage=st.sampled_from(DAMAGE), data=st.data())
def test_a_damaged_table_is_read_right_or_refused_naming_the_file_and_line(table, damage, data, tmp_path_factory):
    from hf_ctx.data.tables import read_table

    kind, header, rows = table
    path = tmp_path_factory.mktemp("table") / f"data.{kind}"
    write_table(path, kind, header, rows)
    lines = path.read_bytes().split(b"\n")
    row_lines = [i for i, line in enumerate(lines) if line.strip() and line.strip() not in (b"[", b"]")][
        1 if kind in ("csv", "tsv") else 0 :
    ]
    target = data.draw(st.sampled_from(row_lines), label="line") if row_lines else 0
    line = lines[target]
    cut = data.draw(st.integers(0, len(line)), label="at")
    inserted = {"delimiter": b"\t" if kind == "tsv" else b",", "quote": b'"', "latin-1": b"\xe9"}.get(damage, b"")
    lines[target] = line[:cut] + inserted if damage == "cut" else line[:cut] + inserted + line[cut:]
    path.write_bytes(b"\n".join(lines))
    read, error = named_errors_only(read_table, path)
    if error is not None:
        named = re.search(rf"^{re.escape(str(path))}(:(\d+))?[:, ]", str(error))
        assert named, str(error)
        if named.group(2) is not None:
            assert 1 <= int(named.group(2)) <= len(lines), str(error)
        if damage == "latin-1":
            assert f"{path}:{target + 1}: not valid UTF-8" in str(error)
    else:  # read: every row whole, with the header's columns
        assert damage != "latin-1"
        assert all(len(cells) == len(read) for cells in read.columns.values())
        if kind == "tsv" and damage == "delimiter":
            raise AssertionError("a TSV row with a field more was read")


@FEW
@given(
    table=tables(),
    labels=st.lists(st.sampled_from(["pos", "neg", "0.5", "1", "2", "abc", "", "[1, 2]"]), min_size=1, max_size=5),
)
def test_a_classification_file_is_read_right_or_refused_naming_it(table, labels, tmp_path_factory):
    """The task reader on random tables: the texts and labels as written (a label list of the training file's
    labels, or a regression on numbers), or one error naming the file."""
    from hf_ctx.data.text_classification import load_text_classification_files

    kind, header, rows = table
    header = [name for name in header if name != "label"] + ["label"]
    rows = [[*row[: len(header) - 1], labels[i % len(labels)]] for i, row in enumerate(rows)]
    rows = [row + ["x"] * (len(header) - len(row)) for row in rows]
    path = tmp_path_factory.mktemp("classification") / f"train.{kind}"
    write_table(path, kind, header, rows)
    loaded, error = named_errors_only(load_text_classification_files, {"train": path})
    if error is not None:
        assert str(path) in str(error) or "--text_column_names" in str(error), str(error)
        return
    data, task = loaded
    (text_column,) = task.text_columns
    column = header.index(text_column)
    assert data["train"][text_column] == [row[column] for row in rows]
    written = [row[-1] for row in rows]
    if task.is_regression:
        assert data["train"]["label"] == pytest.approx([float(label) for label in written])
    else:
        assert [task.label_values[i] for i in data["train"]["label"]] == written


# --- words: Unicode text split whole, and every word a tag --------------------------------------------------------

# Text of many scripts and of the characters tokenizers delete or treat apart: combining marks, emoji with their
# joiners and selectors, Devanagari, CJK, Thai, Arabic, soft hyphens, zero-width characters, control characters.
UNICODE_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("aZ .,'-!?\n\t") + ["\u0308", "\u0301", "\u200d", "\ufe0f", "\u00ad", "\u200b", "\x01"]),
        st.sampled_from(
            ["\u2764", "\U0001f469", "\U0001f3fd", "\u0939", "\u093f", "\u094d", "\u6771", "\u0e01", "\u0627"]
        ),
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
    ),
    max_size=24,
)


@FEW
@given(text=UNICODE_TEXT)
@example(text="a\U0001f3fd")  # a skin tone after a letter: one grapheme
@example(text="U\u0300+0")  # a number sign after a decomposed letter
@example(text="x\u0600y 1\u06dd2")  # Arabic number sign and end of ayah: one grapheme with what follows
def test_words_are_whole_graphemes_at_their_offsets_in_either_normal_form(text):
    """No word starts or ends inside a grapheme (a letter and its combining marks, an emoji sequence); each word
    is the text at its offsets; the composed and decomposed spellings of a text give the same words."""
    import unicodedata

    import regex

    from hf_ctx.data.words import split_words, word_spans

    boundaries = {0, len(text)} | {m.end() for m in regex.finditer(r"\X", text)}
    for word, start, end in word_spans(text):
        assert text[start:end] == word and start in boundaries and end in boundaries, (word, start, end)
    composed = [unicodedata.normalize("NFC", w) for w in split_words(unicodedata.normalize("NFC", text))]
    decomposed = [unicodedata.normalize("NFC", w) for w in split_words(unicodedata.normalize("NFD", text))]
    assert composed == decomposed


@pytest.fixture(scope="module")
def bert_wordpiece(tmp_path_factory):
    from tiny_checkpoints import bert_tokenizer

    return bert_tokenizer(tmp_path_factory.mktemp("wordpiece"))


@FEW
@given(text=UNICODE_TEXT)
def test_every_word_of_any_text_gets_one_label_from_a_bert_tokenizer(bert_wordpiece, text):
    """The words of any text, as run_ner.py reads them: one labelled position each, whatever the tokenizer deletes."""
    from hf_ctx.data.conll import encode_tagged_words
    from hf_ctx.data.words import split_words

    words = split_words(text)
    assume(words)
    tags = ["B-X" if i % 2 else "O" for i in range(len(words))]
    encoded = encode_tagged_words({"tokens": [words], "ner_tags": [tags]}, bert_wordpiece, {"O": 0, "B-X": 1})
    assert [label for label in encoded["labels"][0] if label != -100] == [i % 2 for i in range(len(words))]


SQUAD_VALUES = st.recursive(
    # "caf\udce9": half a surrogate pair, which JSON can escape and no tokenizer can encode.
    st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.text(max_size=6), st.just("caf\udce9")),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def hostile_squad(draw):
    """A SQuAD file whose fields, any of them, may be of another type."""
    answer = {"text": "cat", "answer_start": 4}
    qa = {"id": "q1", "question": "who?", "answers": [answer]}
    paragraph = {"context": "the cat sat", "qas": [qa]}
    article = {"title": "t", "paragraphs": [paragraph]}
    content = {"data": [article], "version": "1.1"}
    node = draw(st.sampled_from([content, article, paragraph, qa, answer]))
    key = draw(st.sampled_from(sorted(node)))
    node[key] = draw(SQUAD_VALUES)
    return content


@FEW
@given(content=hostile_squad())
def test_a_squad_file_with_fields_of_other_types_is_refused_naming_the_field(content, tmp_path_factory):
    from hf_ctx.data.squad import read_squad_file

    path = tmp_path_factory.mktemp("squad") / "train.json"
    path.write_text(json.dumps(content))
    rows, error = named_errors_only(read_squad_file, path)
    if error is not None:
        assert str(path) in str(error), str(error)
    else:
        for column in ("id", "context", "question"):
            assert all(isinstance(value, str) for value in rows[column])
        assert all(
            isinstance(start, int) and not isinstance(start, bool)
            for a in rows["answers"]
            for start in a["answer_start"]
        )


SWAG_ROW = {
    "sent1": "A man",
    "sent2": "He",
    "ending0": "runs.",
    "ending1": "sits.",
    "ending2": "eats.",
    "ending3": "sleeps.",
    "label": 1,
}


@FEW
@given(data=st.data())
def test_a_swag_file_with_fields_of_other_types_is_refused_naming_the_file(data, tmp_path_factory):
    from hf_ctx.data.multiple_choice import MultipleChoiceColumns, read_multiple_choice_file

    rows = [dict(SWAG_ROW) for _ in range(3)]
    row = data.draw(st.integers(0, 2), label="row")
    key = data.draw(st.sampled_from(sorted(SWAG_ROW)), label="key")
    rows[row][key] = data.draw(SQUAD_VALUES, label="value")
    folder = tmp_path_factory.mktemp("swag")
    path = folder / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dataset, error = named_errors_only(read_multiple_choice_file, path, MultipleChoiceColumns())
    if error is not None:
        assert str(path) in str(error), str(error)
    else:
        for column in MultipleChoiceColumns().text_columns:
            assert all(isinstance(text, str) for text in dataset[column])
        assert all(type(label) is int and 0 <= label < 4 for label in dataset["label"])
        assert not any(isinstance(row.get("label"), bool) for row in rows)  # true is no index


# --- paths the scripts take, and what they write --------------------------------------------------------------


@FEW
@given(content=FILE_BYTES, name=st.sampled_from(["config.json", "tokenizer_config.json", "tokenizer.json"]))
def test_a_checkpoint_option_pointing_at_a_hostile_folder_is_refused_naming_the_file(content, name, tmp_path_factory):
    """--model_name_or_path, --config_name, --tokenizer_name, --bilm_name_or_path and `hf-ctx embed`'s model:
    a folder whose JSON files hold anything at all."""
    from hf_ctx.tools.loading import check_tokenizer_folder
    from hf_ctx.tools.paths import check_local_path

    folder = tmp_path_factory.mktemp("checkpoint")
    (folder / name).write_bytes(content)
    for check in (check_local_path, check_tokenizer_folder):
        _, error = named_errors_only(check, folder)
        if error is not None:
            assert str(folder) in str(error), str(error)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    from hf_ctx import ElmoForBiLM, ElmoTokenizer
    from hf_ctx.tools.embed import ElmoEmbedder

    folder = tmp_path_factory.mktemp("elmo")
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=4,
    )
    ElmoForBiLM(config).save_pretrained(folder)
    ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "a"]).save_pretrained(folder)
    return ElmoEmbedder(folder, device="cpu")


@FEW
@given(content=FILE_BYTES)
def test_hf_ctx_embed_of_a_hostile_input_writes_nothing_or_a_whole_file(embedder, content, tmp_path_factory):
    import h5py

    folder = tmp_path_factory.mktemp("embed")
    (folder / "input.txt").write_bytes(content)
    summary, error = named_errors_only(
        embedder.embed_file, folder / "input.txt", folder / "vectors.hdf5", progress=False
    )
    if error is not None:
        assert str(folder / "input.txt") in str(error), str(error)
        assert sorted(p.name for p in folder.iterdir()) == ["input.txt"]  # no output, no temporary file
    else:
        with h5py.File(folder / "vectors.hdf5", "r") as f:
            assert len(json.loads(f["sentence_to_index"][0])) <= summary["sentences"] == len(f) - 1


@settings(FEW, max_examples=min(FEW.max_examples, 10))  # each example starts a whole script
@given(content=FILES_IN_FORMAT["conll"])
def test_run_ner_on_a_hostile_training_file_names_it_and_writes_nothing(content, tmp_path_factory):
    """A script's `--train_file`: the error names the file (and line), and the output folder gets no file."""
    import run_ner

    from hf_ctx.data.conll import read_conll

    folder = tmp_path_factory.mktemp("run_ner")
    (folder / "train.txt").write_bytes(content)
    _, reader_error = named_errors_only(read_conll, folder / "train.txt")
    assume(reader_error is not None)  # a readable file would train: the scripts' own tests cover that
    arguments = ["--model_type", "bert", "--config_name", "tiny", "--train_file", str(folder / "train.txt")]
    arguments += ["--do_train", "--output_dir", str(folder / "out"), "--report_to", "none"]
    _, error = named_errors_only(run_ner.main, arguments)
    assert error is not None and str(folder / "train.txt") in str(error), error
    # Nothing but the lock that says which run owns the folder.
    written = (
        [path.name for path in (folder / "out").rglob("*") if path.is_file()] if (folder / "out").exists() else []
    )
    assert set(written) <= {LOCK_FILE}, written
