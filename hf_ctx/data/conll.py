"""CoNLL-2003 named-entity data: reading the column files, and encoding for word and subword models.

The CoNLL-2003 release has one word per line with four space-separated columns (word, POS tag, chunk tag, NER
tag), blank lines between sentences and `-DOCSTART- -X- -X- O` lines between documents. Its NER tags are IOB1
(`I-ORG` may start an entity; `B-` only separates two adjacent entities of the same type). The Hub copy and most
tools use IOB2 (every entity starts with `B-`). `read_conll_file_with_scheme` detects which one a file uses, and
`load_conll_dataset` converts every split to one scheme (IOB2 unless asked otherwise); the schemes themselves
live in `hf_ctx.tag_schemes`.

One encoding for every model family: `encode_tagged_words` labels the first token of each word (through
`word_ids()`: BERT's first sub-token, ELMo's and TagLM's one position per word) and gives -100 to a word's other
sub-tokens and to special tokens. A word the tokenizer maps to no token at all (a control character, a soft hyphen,
a lone variation selector) is read as the tokenizer's unknown token (`words_as_read`), so every word has a tag.
Sentences longer than a model allows are split into pieces that fit (with a warning), never dropped, and cut
outside entities where a piece fits one; `merge_split_predictions` puts the pieces' predictions back together.
"""

import logging
from collections import Counter, defaultdict
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Sequence

from ..input_checks import IGNORE_INDEX
from ..tag_schemes import (
    as_sentence,
    canonical_scheme,
    continues_entity,
    convert_tags,
    count_scheme_breaks,
    detect_tag_scheme,
    seqeval_arguments,
    split_tag,
    tag_set_kind,
)
from .atomic_write import atomic_write
from .files import utf8_lines
from .tables import describe, is_table, read_table
from .words import split_words

logger = logging.getLogger(__name__)

# Column names for a file's columns, in CoNLL-2003 order; the NER tag is always the last column.
CONLL2003_COLUMNS = ("tokens", "pos_tags", "chunk_tags", "ner_tags")
DOCSTART = "-DOCSTART-"
# What a tagger learns (`--task_name`) -> the column of its tags: CoNLL-2003's columns, transformers' names.
TASK_COLUMNS = {"ner": "ner_tags", "pos": "pos_tags", "chunk": "chunk_tags"}


# --- reading ------------------------------------------------------------------------------------------


def _column_names(num_columns: int, label_column: str = "ner_tags") -> tuple[str, ...]:
    if num_columns == 4:
        return CONLL2003_COLUMNS
    if num_columns == 1:
        return ("tokens",)  # words without tags, to be tagged
    # Other column layouts: the word first, the tags last, whatever sits between kept by position.
    return ("tokens", *(f"column_{i}" for i in range(1, num_columns - 1)), label_column)


def read_conll(path: str | Path, num_columns: int | None = 4, label_column: str = "ner_tags") -> list[dict]:
    """Read a CoNLL column file into a list of sentences.

    Args:
        path: the file (e.g. CoNLL-2003's `eng.train`).
        num_columns: columns every word line must have (4 for CoNLL-2003); `None` takes the count of the first
            word line (1: words only, without tags).
        label_column: the name of the last column in files of 2, 3 or 5 and more columns.

    Returns:
        One dict per sentence: "tokens", "pos_tags", "chunk_tags", "ner_tags" (lists of strings; with other
        column counts "tokens", "column_<i>", `label_column`; with one column "tokens" only) and "line", the
        1-based line of its first word.

    Raises:
        ValueError naming the file and line of a line with the wrong number of columns or an NER tag (the
        "ner_tags" column) that is neither `O` nor `<prefix>-<type>`; ValueError naming the file when it holds no
        sentence at all (empty, blank lines or `-DOCSTART-` lines only).
    """
    path = Path(path)
    sentences, current, first_line = [], [], None
    names = ner_position = None

    def flush():
        nonlocal current
        if current:
            columns = list(zip(*current))
            sentence = {name: list(values) for name, values in zip(names, columns)}
            sentence["line"] = first_line
            sentences.append(sentence)
        current = []

    # utf-8-sig: a byte-order mark is not part of the first word.
    with path.open(encoding="utf-8-sig") as f:
        for line_number, line in enumerate(utf8_lines(f, path), start=1):
            fields = line.split()
            if not fields:
                flush()
                continue
            if fields[0] == DOCSTART:
                flush()
                continue
            if num_columns is None:
                num_columns = len(fields)
            if names is None:
                names = _column_names(num_columns, label_column)
                ner_position = names.index("ner_tags") if "ner_tags" in names else None
            if len(fields) != num_columns:
                # On the first word line the file's own column count is likely another: say how to read it.
                hint = (
                    ""
                    if sentences or current
                    else f"; a file of {len(fields)} columns reads with --num_columns {len(fields)} (0: the first line's count)"
                )
                raise ValueError(
                    f"{path}:{line_number}: expected {num_columns} space-separated columns "
                    f"({' '.join(names)}), found {len(fields)}: {line.rstrip()!r}{hint}"
                )
            if ner_position is not None:
                try:
                    split_tag(fields[ner_position])
                except ValueError as error:
                    raise ValueError(f"{path}:{line_number}: {error}") from None
            if not current:
                first_line = line_number
            current.append(fields)
    flush()
    if not sentences:
        raise ValueError(
            f"{path} holds no sentences (it is empty, or has only blank and {DOCSTART} lines); give a CoNLL file "
            "with one word and its tag per line"
        )
    return sentences


def read_conll_file_with_scheme(
    path: str | Path, num_columns: int | None = 4, label_column: str = "ner_tags"
) -> tuple[list[dict], str | None]:
    """`read_conll` plus the tag scheme of the `label_column` tags (`tag_scheme_of`); logs both."""
    sentences = read_conll(path, num_columns, label_column)
    scheme = tag_scheme_of(sentences, label_column, path) if label_column in sentences[0] else None
    words = sum(len(s["tokens"]) for s in sentences)
    logger.info(
        "%s: %d sentences, %d words, %s", path, len(sentences), words, f"{scheme} tags" if scheme else "no tags"
    )
    return sentences, scheme


def tag_scheme_of(sentences: list[dict], label_column: str, path) -> str:
    """The scheme of the sentences' `label_column` tags (`tag_schemes.detect_tag_scheme`), or "plain" for tags
    without an entity scheme (POS tags). Tags of both kinds, or of two schemes, are a `ValueError` naming the file,
    the line and the column where the tags first stop fitting the ones before."""
    kind, first_tag, prefixes = None, [], set()  # first_tag: the first tag other than O, of the kind found
    for sentence in sentences:
        tags = sentence[label_column]
        try:
            kind = tag_set_kind([*first_tag, *tags]) or kind
            first_tag = first_tag or [tag for tag in tags if tag != "O"][:1]
            if kind == "entity":
                prefixes |= {split_tag(tag)[0] for tag in tags} - {"O", "I"}
                detect_tag_scheme([[f"{prefix}-X"] for prefix in prefixes])
        except ValueError as error:
            raise ValueError(f"{path}:{sentence.get('line', '?')}: {error} (column {label_column!r})") from None
    if kind == "plain":
        return "plain"
    return detect_tag_scheme(sentence[label_column] for sentence in sentences)


# --- datasets -----------------------------------------------------------------------------------------


def load_conll_dataset(
    data_files: dict[str, str | Path],
    tag_scheme: str = "IOB2",
    num_columns: int | None = 4,
    label_column: str = "ner_tags",
) -> DatasetDict:
    """Read CoNLL files into a `DatasetDict` whose `label_column` tags are strings in `tag_scheme` (tags without an
    entity scheme, such as POS tags, as they are).

    Args:
        data_files: split name -> path, e.g. {"train": "eng.train", "validation": "eng.testa"}.
        tag_scheme: the scheme every split's entity tags are converted to (one of `tag_schemes.SCHEME_NAMES`).
        num_columns: see `read_conll`; a file whose first word line has one column (words without tags) is read
            as such.
        label_column: the tags to learn: "ner_tags", "pos_tags" or "chunk_tags" (`TASK_COLUMNS`).

    Each split keeps the file's columns, "line" (where each sentence starts) and "file".
    """
    tag_scheme = canonical_scheme(tag_scheme)
    splits = {}
    for split, path in data_files.items():
        columns = 1 if _first_word_line_fields(path) == 1 else num_columns
        sentences, scheme = read_conll_file_with_scheme(path, columns, label_column)
        if scheme not in (None, "plain", tag_scheme):
            logger.info("%s: converting %s tags to %s", path, scheme, tag_scheme)
        for sentence in sentences:
            if scheme not in (None, "plain"):
                sentence[label_column] = convert_tags(sentence[label_column], scheme, tag_scheme)
            sentence["file"] = str(path)
        splits[split] = Dataset.from_list(sentences)
    return DatasetDict(splits)


def recognised_format(dataset: Dataset) -> str | None:
    """ "CoNLL-2003" for sentences with CoNLL-2003's columns (word, POS, chunk and NER tags, as `read_conll` reads
    its four-column files), for a model card to name beside the file; None for other layouts."""
    return "CoNLL-2003" if set(CONLL2003_COLUMNS) <= set(dataset.column_names) else None


def _first_word_line_fields(path) -> int | None:
    """How many columns the first word line of a CoNLL file has (None: no word line)."""
    with Path(path).open(encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] != DOCSTART:
                return len(fields)
    return None


def read_plain_text(path: str | Path, splitter: str = "treebank") -> Dataset:
    """A plain-text file, one sentence a line, as sentences of words to tag ("tokens", split by `hf_ctx.data.words`
    under `splitter`: "treebank" as CoNLL data is, "whitespace" for text already tokenized), with "line" and "file";
    blank lines (no words) are skipped, with a warning naming them: the predictions' sentences are the other lines,
    in order."""
    path = Path(path)
    sentences, blank = [], []
    with path.open(encoding="utf-8-sig") as f:
        for line_number, line in enumerate(utf8_lines(f, path), start=1):
            words = split_words(line, splitter)
            if words:
                sentences.append({"tokens": words, "line": line_number, "file": str(path)})
            else:
                blank.append(line_number)
    if not sentences:
        raise ValueError(f"{path} holds no text; give one sentence a line")
    if blank:
        shown = ", ".join(map(str, blank[:10])) + (f" and {len(blank) - 10} more" if len(blank) > 10 else "")
        logger.warning(
            "%s: line%s %s hold%s no words and get no sentence in the predictions: its %d sentences are the "
            "file's other lines, in order",
            path,
            "s" if len(blank) > 1 else "",
            shown,
            "" if len(blank) > 1 else "s",
            len(sentences),
        )
    logger.info("%s: %d sentences to tag", path, len(sentences))
    return Dataset.from_list(sentences)


def load_tagged_table(
    path: str | Path,
    text_column: str = "tokens",
    label_column: str = "ner_tags",
    tag_scheme: str = "IOB2",
    output_label_column: str = "ner_tags",
) -> Dataset:
    """A JSON-lines, JSON, CSV or TSV file of tagged sentences as transformers' run_ner.py reads them: a column
    of words (`text_column`: a list of strings, or a string of words separated by spaces, as in a CSV file) and one
    of tags (`label_column`, likewise; class ids (integers) are kept as their strings). Returns "tokens",
    `output_label_column` (entity tags converted to `tag_scheme`; absent when the file has no tag column: words to
    tag), "line" (where the row starts) and "file".

    The file is read by `data/tables.py` (a row with another field count than the header's, bytes that are not
    UTF-8, a line that is not JSON: named by line). Raises a `ValueError` naming the file, line and column of a
    missing column or value, a word that is empty or not a string, a tag that is not a string or an integer, a
    word or tag holding whitespace, or a row whose words and tags differ in number.
    """
    table = read_table(path, what="sentences")
    table.require([text_column], "the words; --text_column_name names another")
    columns = {text_column: _word_list} | ({label_column: _tag_list} if label_column in table.columns else {})
    rows = {
        name: [read(value, table.where(row, name)) for row, value in enumerate(table.values(name))]
        for name, read in columns.items()
    }
    lines = table.lines
    for i, words in enumerate(rows[text_column]):
        tags = rows[label_column][i] if label_column in rows else words
        if len(tags) != len(words):
            raise ValueError(
                f"{table.where(i)}: {len(words)} words in column {text_column!r} but {len(tags)} tags in "
                f"{label_column!r}"
            )
    data = {"tokens": rows[text_column], "line": lines, "file": [str(path)] * len(lines)}
    if label_column in rows:
        sentences = [{output_label_column: tags, "line": line} for tags, line in zip(rows[label_column], lines)]
        scheme = tag_scheme_of(sentences, output_label_column, path)
        if scheme != "plain":
            rows[label_column] = [convert_tags(tags, scheme, tag_scheme) for tags in rows[label_column]]
        data[output_label_column] = rows[label_column]
    logger.info("%s: %d sentences", path, len(lines))
    return Dataset.from_dict(data)


def _word_list(value, where: str) -> list[str]:
    """A cell of words: a list of non-empty strings, or one string of words separated by spaces."""
    words = value.split() if isinstance(value, str) else value
    if not isinstance(words, list) or not words:
        raise ValueError(f"{where}: holds {describe(value)}; give a list of words or a string of them")
    for position, word in enumerate(words, start=1):
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"{where}: word {position} is {describe(word)}, not a word (a non-empty string)")
        _check_one_token(word, f"{where}: word {position}")
    return words


def _check_one_token(text: str, what: str) -> None:
    """A word or tag of a table holding whitespace (a space, tab or no-break space inside) is refused: the
    predictions files (`write_conll_predictions`, CoNLL's layout) separate columns by whitespace, so it would
    become two columns there."""
    if len(text.split()) != 1:
        raise ValueError(
            f"{what} is {text!r}, which holds whitespace: each word and tag is one token (the predictions are "
            "written in CoNLL's layout, whitespace between columns); split it into words or join it with '_'"
        )


def _tag_list(value, where: str) -> list[str]:
    """A cell of tags: strings or class ids (integers, kept as their strings), or one string of them."""
    tags = value.split() if isinstance(value, str) else value
    if not isinstance(tags, list):
        raise ValueError(f"{where}: holds {describe(value)}; give a list of tags or a string of them")
    for position, tag in enumerate(tags, start=1):
        if isinstance(tag, bool) or not isinstance(tag, (str, int)) or not str(tag).strip():
            raise ValueError(f"{where}: tag {position} is {describe(tag)}, not a tag (a string or a class id)")
        _check_one_token(str(tag), f"{where}: tag {position}")
    return [str(tag) for tag in tags]


def load_tagged_files(
    data_files: dict[str, str | Path],
    label_column: str = "ner_tags",
    tag_scheme: str = "IOB2",
    num_columns: int | None = 4,
    text_column_name: str = "tokens",
    label_column_name: str | None = None,
    plain_text_splits: tuple[str, ...] = (),
    plain_text_splitter: str = "treebank",
) -> DatasetDict:
    """Each split from its file, read by its kind: JSON(-lines)/CSV/TSV tables (`load_tagged_table`, columns
    `text_column_name` and `label_column_name`, default `label_column`), plain text with one sentence a line for
    the splits in `plain_text_splits` (`read_plain_text`, words split by `plain_text_splitter`), else CoNLL column files (`load_conll_dataset`). Every
    split has "tokens" and, where its file has tags, `label_column`."""
    splits = {}
    for split, path in data_files.items():
        if split in plain_text_splits:
            splits[split] = read_plain_text(path, plain_text_splitter)
        elif is_table(path):
            splits[split] = load_tagged_table(
                path, text_column_name, label_column_name or label_column, tag_scheme, label_column
            )
        else:
            splits[split] = load_conll_dataset({split: path}, tag_scheme, num_columns, label_column)[split]
    return DatasetDict(splits)


def load_hub_ner_dataset(
    dataset_name: str,
    dataset_config_name: str | None = None,
    tag_scheme: str = "IOB2",
    cache_dir: str | None = None,
    label_column: str = "ner_tags",
    text_column_name: str = "tokens",
    label_column_name: str | None = None,
) -> DatasetDict:
    """A Hub (or local `datasets`) tagging dataset with words (`text_column_name`) and tags (`label_column_name`,
    default `label_column`, e.g. CoNLL-2003's "ner_tags" or "pos_tags"), as "tokens" and `label_column` with string
    tags: entity tags in `tag_scheme`, others as they are."""
    from datasets import load_dataset

    tag_scheme = canonical_scheme(tag_scheme)
    source_column = label_column_name or label_column
    raw = load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir)
    splits = {}
    for split, dataset in raw.items():
        for column in (text_column_name, source_column):
            if column not in dataset.column_names:
                raise ValueError(
                    f"dataset {dataset_name!r} split {split!r} has no {column!r} column "
                    f"(columns: {dataset.column_names})"
                )
        feature = dataset.features[source_column]
        tags = dataset[source_column]
        if isinstance(feature, Sequence) and isinstance(feature.feature, ClassLabel):
            tags = [[feature.feature.names[t] for t in row] for row in tags]
        else:
            tags = [[str(t) for t in row] for row in tags]
        where = f"{dataset_name}/{split}"
        scheme = tag_scheme_of(
            [{label_column: row, "line": f"row {i}"} for i, row in enumerate(tags)], label_column, where
        )
        logger.info("%s: %d sentences, %s tags", where, len(dataset), scheme)
        if scheme not in ("plain", tag_scheme):
            logger.info("%s: converting %s tags to %s", where, scheme, tag_scheme)
            tags = [convert_tags(row, scheme, tag_scheme) for row in tags]
        # Only words and the tags learnt: other columns are class ids whose names differ per dataset.
        splits[split] = Dataset.from_dict({"tokens": dataset[text_column_name], label_column: tags})
    return DatasetDict(splits)


def check_labels(dataset: Dataset, label2id: dict[str, int], split: str, label_column: str = "ner_tags"):
    """Raise a ValueError naming the first tag of `dataset` that is not in `label2id` (unseen in training)."""
    for index, tags in enumerate(dataset[label_column]):
        for position, tag in enumerate(tags):
            if tag not in label2id:
                if "file" in dataset.column_names:
                    row = dataset[index]
                    if is_table(row["file"]):
                        where = f"{row['file']}:{row['line']}, column {label_column!r}, word {position + 1}"
                    else:
                        where = f"{row['file']}:{row['line'] + position}"
                else:
                    where = f"sentence {index}, word {position}"
                raise ValueError(
                    f"the {split} data has the label {tag!r} ({where}), which the training data never has; "
                    f"the model only knows {list(label2id)}"
                )


# --- long sentences ------------------------------------------------------------------------------------


def split_long_sentences(
    dataset: Dataset,
    word_costs,
    budget: int,
    desc: str = "splitting long sentences",
    label_column: str = "ner_tags",
    tag_scheme: str | None = None,
) -> Dataset:
    """Split sentences whose words cost more than `budget` into consecutive pieces that fit.

    Args:
        dataset: with "tokens", the tags `label_column` (string tags; absent for words to tag) and any other
            per-word list columns.
        word_costs: function from a batch of token lists to a list of per-word cost lists (e.g. sub-token counts).
        budget: the most a piece may cost (e.g. the model's maximum length minus its special tokens).
        label_column: the tags a tagger learns from the pieces.
        tag_scheme: the scheme of those tags (`tag_schemes.SCHEME_NAMES`); None for tags without one (POS tags),
            which are cut anywhere.

    Returns:
        The pieces, each with "sentence_id" (index of its sentence in `dataset`) and "word_start" (index of its
        first word there). With a `tag_scheme`, a piece ends before a word that starts an entity or is outside one
        where one fits, not inside an entity. An entity longer than a piece is cut: its pieces' `label_column`
        tags are rewritten to make each piece a sentence of its own in the scheme (`tag_schemes.as_sentence`:
        IOB2 `I-X` -> `B-X` at a piece's start; BIOES `E-X` -> `S-X` there too and `I-X` -> `E-X`, `B-X` -> `S-X`
        at a piece's end), so the tagger learns and predicts it as two entities, and the predictions joined back
        (`merge_split_predictions`) hold two. The gold tags written beside the predictions are the sentence's own,
        from `dataset`. A single word costing more than `budget` gets a piece of its own (the encoder then
        truncates it). Logs a warning with the number of sentences split.
    """
    word_columns = [
        c
        for c in dataset.column_names
        if c == "tokens" or c == "ner_tags" or c in CONLL2003_COLUMNS or c.startswith("column_")
    ]
    other_columns = [c for c in dataset.column_names if c not in word_columns]
    tagged = tag_scheme is not None and label_column in word_columns

    def split_batch(batch, indices):
        out = defaultdict(list)
        for row, (index, costs) in enumerate(zip(indices, word_costs(batch["tokens"]))):
            tags = batch[label_column][row] if tagged else None
            for start, end in _pieces(costs, budget, tags, tag_scheme):
                for column in word_columns:
                    out[column].append(batch[column][row][start:end])
                if tagged:
                    out[label_column][-1] = as_sentence(out[label_column][-1], tag_scheme)
                for column in other_columns:
                    out[column].append(batch[column][row])
                out["sentence_id"].append(index)
                out["word_start"].append(start)
        return out

    pieces = dataset.map(split_batch, batched=True, with_indices=True, remove_columns=dataset.column_names, desc=desc)
    if len(pieces) > len(dataset):
        split_count = len({i for i, start in zip(pieces["sentence_id"], pieces["word_start"]) if start > 0})
        logger.warning(
            "%d of %d sentences are longer than the model allows (%d); each was split into pieces that fit "
            "(predictions are joined back per sentence)",
            split_count,
            len(dataset),
            budget,
        )
    return pieces


def _pieces(costs: list[int], budget: int, tags: list[str] | None, tag_scheme: str | None) -> list[tuple[int, int]]:
    """(start, end) of the pieces of one sentence of words costing `costs`: each as long as fits in `budget`, but
    ended earlier, where that keeps an entity of `tags` whole, before the entity's first word."""

    def cuts_entity(position: int) -> bool:
        return tags is not None and continues_entity(tags[position - 1], tags[position], tag_scheme)

    pieces, start, total = [], 0, 0
    for position, cost in enumerate(costs):
        # A loop: after a cut back at an entity's start, the entity with this word may still not fit in a piece.
        while total + cost > budget and position > start:
            cut = next((p for p in range(position, start, -1) if not cuts_entity(p)), position)
            pieces.append((start, cut))
            total -= sum(costs[start:cut])
            start = cut
        total += cost
    pieces.append((start, len(costs)))
    return pieces


def merge_split_predictions(pieces: Dataset, piece_predictions: list[list[str]]) -> list[list[str]]:
    """Join the per-piece word predictions of `split_long_sentences` back into one list per sentence.

    `pieces` without a "sentence_id" column were never split: the predictions are returned as they are.
    """
    if "sentence_id" not in pieces.column_names:
        return list(piece_predictions)
    merged = defaultdict(list)
    for sentence_id, word_start, predictions in sorted(
        zip(pieces["sentence_id"], pieces["word_start"], piece_predictions), key=lambda x: (x[0], x[1])
    ):
        if len(merged[sentence_id]) != word_start:
            raise ValueError(
                f"piece of sentence {sentence_id} starting at word {word_start} does not follow "
                f"the previous piece (which ended at word {len(merged[sentence_id])})"
            )
        merged[sentence_id].extend(predictions)
    return [merged[i] for i in range(len(merged))]


# --- encoding ------------------------------------------------------------------------------------------


def subword_counts(tokenizer):
    """`word_costs` for `split_long_sentences`: how many sub-tokens a fast tokenizer makes of each word."""

    def costs(batch_tokens):
        encodings = tokenizer(batch_tokens, is_split_into_words=True, add_special_tokens=False)
        out = []
        for i, words in enumerate(batch_tokens):
            counts = Counter(w for w in encodings.word_ids(i) if w is not None)
            # A word the tokenizer drops (e.g. a lone control character) still needs a position for its label.
            out.append([max(counts[w], 1) for w in range(len(words))])
        return out

    return costs


def encode_tagged_words(
    examples,
    tokenizer,
    label2id: dict[str, int],
    max_length: int | None = None,
    label_column: str = "ner_tags",
    label_all_tokens: bool = False,
):
    """Tokenize pre-split words and align the word labels to the tokens, for every model family.

    `word_ids()` (of a fast tokenizer, or of `ElmoTokenizer`, which gives one position per word) says which word
    each token is: the first token of each word gets the word's label id; the word's other sub-tokens -100, or
    with `label_all_tokens` a label too (`align_labels`); special tokens -100. A word the tokenizer maps to no
    token is read as its unknown token (`words_as_read`), so that every word has a label and a prediction. `max_length` truncates (in tokens);
    None keeps every word. For `datasets.Dataset.map(batched=True)`; batches are padded later (labels with -100,
    by `DataCollatorForTokenClassification`).
    """
    options = {"is_split_into_words": True, "truncation": max_length is not None, "max_length": max_length}
    encodings = tokenizer(examples["tokens"], **options)
    readable = words_as_read(tokenizer, examples["tokens"], encodings, max_length)
    if readable is not examples["tokens"]:  # a word the tokenizer maps to nothing is read as its unknown token
        encodings = tokenizer(readable, **options)
    word_ids = [encodings.word_ids(i) for i in range(len(examples["tokens"]))]
    encodings["labels"] = [
        align_labels(ids, tags, label2id, label_all_tokens) for ids, tags in zip(word_ids, examples[label_column])
    ]
    return dict(encodings)


def words_as_read(tokenizer, sentences: list[list[str]], encodings=None, max_length: int | None = None):
    """The sentences (lists of words) as a sub-word tokenizer reads them: a word it maps to no token at all is
    replaced by its unknown token (BERT's `[UNK]`), so that every word keeps a position, a label and a predicted
    tag. A tokenizer's normalizer deletes a control character, a soft hyphen, a zero-width joiner, a variation
    selector or (where it strips accents) a lone combining mark; a word of nothing else would vanish, and with it
    its tag, shifting the words after it against the predictions.

    `encodings`: the tokenizer's encoding of `sentences` (`is_split_into_words=True`, truncated to `max_length`
    tokens) where the caller has it; words cut off by that truncation are not counted as unread. Returns
    `sentences` itself when every word is read, else a new list.
    """
    if encodings is None:
        encodings = tokenizer(sentences, is_split_into_words=True, add_special_tokens=False)
    replaced = list(sentences)
    for i, words in enumerate(sentences):
        try:
            ids = encodings.word_ids(i)
        except ValueError:  # transformers' slow tokenizers cannot say which word a token is
            raise ValueError(
                f"encoding tagged words needs a tokenizer with word_ids() (a fast one, or ElmoTokenizer); got "
                f"{type(tokenizer).__name__}"
            ) from None
        present = {word for word in ids if word is not None}
        # After a truncation, the words past the last one read were cut off, not deleted.
        last = len(words) if max_length is None or len(ids) < max_length else max(present, default=-1)
        unread = [position for position in range(len(words)) if position not in present and position < last]
        if unread:
            if getattr(tokenizer, "unk_token", None) is None:
                raise ValueError(
                    f"the tokenizer maps the word {words[unread[0]]!r} to no token and has no unknown token to read "
                    "it as"
                )
            replaced[i] = [tokenizer.unk_token if p in unread else word for p, word in enumerate(words)]
    return sentences if replaced == list(sentences) else replaced


def continuation_tag(tag: str, label2id: dict[str, int]) -> str:
    """The label of a word's later sub-tokens under `label_all_tokens`: `I-X` for a word tagged `B-X` (where `I-X`
    is a label, as transformers' run_ner.py does), else the word's own tag."""
    if tag.startswith("B-") and "I-" + tag[2:] in label2id:
        return "I-" + tag[2:]
    return tag


def align_labels(word_ids, tags: list[str], label2id: dict[str, int], label_all_tokens: bool = False) -> list[int]:
    """One sentence's word tags as label ids per token, from its `word_ids` (`BatchEncoding.word_ids(i)`, of a fast
    tokenizer or of `ElmoTokenizer`): the first token of each word gets the word's label id, special tokens and
    padding (`None`) -100, and the word's other tokens -100 or, with `label_all_tokens`, the id of
    `continuation_tag`. (Predictions are read at the first tokens, one per word: encode evaluation data without
    `label_all_tokens`.)"""
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE_INDEX)
        elif word == previous:
            labels.append(label2id[continuation_tag(tags[word], label2id)] if label_all_tokens else IGNORE_INDEX)
        else:
            labels.append(label2id[tags[word]])
        previous = word
    return labels


# --- predictions ---------------------------------------------------------------------------------------


def predictions_to_tags(predictions, label_ids, id2label: dict[int, str]) -> tuple[list[list[str]], list[list[str]]]:
    """Per-position predicted ids and gold label ids (-100 = skip) -> (predicted tags, gold tags) per row."""
    predicted, gold = [], []
    for prediction_row, label_row in zip(predictions, label_ids):
        keep = [(p, l) for p, l in zip(prediction_row, label_row) if l != IGNORE_INDEX]
        predicted.append([id2label[int(p)] for p, _ in keep])
        gold.append([id2label[int(l)] for _, l in keep])
    return predicted, gold


def logits_to_tags(logits, labels):
    """`Trainer(preprocess_logits_for_metrics=...)`: keep only the argmax tag ids, not (B, S, T) scores.

    For TagLM the logits are CRF max-marginals, so this is the Viterbi decoding.
    """
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(-1)


def ner_metrics(
    id2label: dict[int, str],
    tag_scheme: str | None = None,
    entity_level: bool = False,
    pieces: Dataset | None = None,
    gold_tags: list[list[str]] | None = None,
):
    """`Trainer(compute_metrics=...)` for tag ids from `logits_to_tags`: entity-level scores from the shipped
    seqeval metric ("precision", "recall", "f1", "accuracy" overall, and "<TYPE>_f1" per entity type; with
    `entity_level` also "<TYPE>_precision", "<TYPE>_recall" and "<TYPE>_support", the entities of the type in
    the gold tags), or for tags without an entity scheme (`tag_scheme="plain"`, e.g. POS) the token accuracy. With an
    entity `tag_scheme`, "scheme_breaks": how many predicted transitions the scheme forbids (`count_scheme_breaks`;
    0 for a tagger with a CRF under the scheme).

    `tag_scheme` scores the way `tag_schemes.seqeval_arguments` says: BIOES and BIOUL in seqeval's strict mode
    (only well-formed entities count, and L-/U- are read), IOB1 and IOB2 (and `None`) as conlleval reads them.

    With `pieces` (a split as `split_long_sentences` cut it, in the order evaluated) and `gold_tags` (the split's
    sentences' own tags), the pieces' predictions are joined back per sentence and scored against `gold_tags`: as
    the predictions file shows them, not with the pieces' tags, rewritten where an entity was cut.
    """

    def tags_of(eval_prediction) -> tuple[list[list[str]], list[list[str]]]:
        predicted, gold = predictions_to_tags(eval_prediction.predictions, eval_prediction.label_ids, id2label)
        if pieces is not None and "sentence_id" in pieces.column_names:
            return merge_split_predictions(pieces, predicted), gold_tags
        return predicted, gold

    if tag_scheme == "plain":

        def token_accuracy(eval_prediction) -> dict[str, float]:
            predicted, gold = tags_of(eval_prediction)
            pairs = [(p, g) for row_p, row_g in zip(predicted, gold) for p, g in zip(row_p, row_g)]
            return {"accuracy": sum(p == g for p, g in pairs) / max(len(pairs), 1)}

        return token_accuracy

    from ..metrics import load_metric

    seqeval = load_metric("seqeval")
    scheme_arguments = seqeval_arguments(tag_scheme) if tag_scheme is not None else {}
    per_type = {"precision": "precision", "recall": "recall", "f1": "f1", "number": "support"}

    def compute(eval_prediction) -> dict[str, float]:
        predicted, gold = tags_of(eval_prediction)
        scores = seqeval.compute(predictions=predicted, references=gold, zero_division=0, **scheme_arguments)
        metrics = {name: scores[f"overall_{name}"] for name in ("precision", "recall", "f1", "accuracy")}
        for entity, value in scores.items():
            if isinstance(value, dict):
                for name, key in per_type.items() if entity_level else [("f1", "f1")]:
                    metrics[f"{entity}_{key}"] = value[name]
        if tag_scheme is not None:
            metrics["scheme_breaks"] = count_scheme_breaks(predicted, tag_scheme)
        return metrics

    return compute


def write_conll_predictions(
    path: str | Path, sentences: Dataset | list[dict], predictions: list[list[str]], label_column: str = "ner_tags"
):
    """Write sentences with their predicted tags as a column file that the `conlleval` script reads.

    Each word line holds the word, the input's other columns (POS, chunk, NER when present, in CoNLL-2003 order),
    the gold `label_column` tag then the predicted tag; `conlleval` takes the last two columns as gold and
    predicted. Sentences without gold tags (words to tag) get the word and the predicted tag. Sentences are
    separated by blank lines.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        for index, (sentence, predicted) in enumerate(zip(sentences, predictions)):
            if len(predicted) != len(sentence["tokens"]):
                raise ValueError(
                    f"sentence {index} has {len(sentence['tokens'])} words but {len(predicted)} predictions"
                )
            columns = [c for c in CONLL2003_COLUMNS[1:] if c in sentence and c != label_column]
            columns += sorted(c for c in sentence if c.startswith("column_"))
            columns += [label_column] if label_column in sentence else []
            for position, tag in enumerate(predicted):
                fields = [sentence["tokens"][position], *(sentence[c][position] for c in columns), tag]
                f.write(" ".join(fields) + "\n")
            f.write("\n")
