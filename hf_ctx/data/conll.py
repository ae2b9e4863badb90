"""CoNLL-2003 named-entity data: reading the column files, and encoding for word and subword models.

The CoNLL-2003 release has one word per line with four space-separated columns (word, POS tag, chunk tag, NER
tag), blank lines between sentences and `-DOCSTART- -X- -X- O` lines between documents. Its NER tags are IOB1
(`I-ORG` may start an entity; `B-` only separates two adjacent entities of the same type). The Hub copy and most
tools use IOB2 (every entity starts with `B-`). `read_conll_file_with_scheme` detects which one a file uses, and
`load_conll_dataset` converts every split to one scheme (IOB2 unless asked otherwise); the schemes themselves
live in `hf_ctx.tag_schemes`.

One encoding for every model family: `encode_tagged_words` labels the first token of each word (through
`word_ids()`: BERT's first sub-token, ELMo's and TagLM's one position per word) and gives -100 to a word's other
sub-tokens and to special tokens.
Sentences longer than a model allows are split into pieces that fit (with a warning), never dropped;
`merge_split_predictions` puts the pieces' predictions back together.
"""

import logging
from collections import Counter, defaultdict
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Sequence

from ..atomic_files import atomic_write
from ..losses import IGNORE_INDEX
from ..tag_schemes import (
    canonical_scheme,
    convert_tags,
    count_scheme_breaks,
    detect_tag_scheme,
    seqeval_arguments,
    split_tag,
)
from .files import utf8_lines

logger = logging.getLogger(__name__)

# Column names for a file's columns, in CoNLL-2003 order; the NER tag is always the last column.
CONLL2003_COLUMNS = ("tokens", "pos_tags", "chunk_tags", "ner_tags")
DOCSTART = "-DOCSTART-"


# --- reading ------------------------------------------------------------------------------------------


def _column_names(num_columns: int) -> tuple[str, ...]:
    if num_columns == 4:
        return CONLL2003_COLUMNS
    # Other column layouts: the word first, the NER tag last, whatever sits between kept by position.
    return ("tokens", *(f"column_{i}" for i in range(1, num_columns - 1)), "ner_tags")


def read_conll(path: str | Path, num_columns: int | None = 4) -> list[dict]:
    """Read a CoNLL column file into a list of sentences.

    Args:
        path: the file (e.g. CoNLL-2003's `eng.train`).
        num_columns: columns every word line must have (4 for CoNLL-2003); `None` takes the count of the first
            word line (at least 2: word and tag).

    Returns:
        One dict per sentence: "tokens", "pos_tags", "chunk_tags", "ner_tags" (lists of strings; with other
        column counts "tokens", "column_<i>", "ner_tags") and "line", the 1-based line of its first word.

    Raises:
        ValueError naming the file and line of a line with the wrong number of columns or an NER tag that is
        neither `O` nor `<prefix>-<type>`; ValueError naming the file when it holds no sentence at all (empty,
        blank lines or `-DOCSTART-` lines only).
    """
    path = Path(path)
    sentences, current, first_line = [], [], None

    def flush():
        nonlocal current
        if current:
            columns = list(zip(*current))
            sentence = {name: list(values) for name, values in zip(_column_names(num_columns), columns)}
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
                if len(fields) < 2:
                    raise ValueError(f"{path}:{line_number}: expected at least 2 columns (word and tag), got {line!r}")
                num_columns = len(fields)
            if len(fields) != num_columns:
                raise ValueError(
                    f"{path}:{line_number}: expected {num_columns} space-separated columns "
                    f"({' '.join(_column_names(num_columns))}), found {len(fields)}: {line.rstrip()!r}"
                )
            try:
                split_tag(fields[-1])
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


def read_conll_file_with_scheme(path: str | Path, num_columns: int | None = 4) -> tuple[list[dict], str]:
    """`read_conll` plus the tag scheme detected in the file; logs both."""
    sentences = read_conll(path, num_columns)
    scheme = detect_tag_scheme(s["ner_tags"] for s in sentences)
    words = sum(len(s["tokens"]) for s in sentences)
    logger.info("%s: %d sentences, %d words, %s tags", path, len(sentences), words, scheme)
    return sentences, scheme


# --- datasets -----------------------------------------------------------------------------------------


def load_conll_dataset(
    data_files: dict[str, str | Path], tag_scheme: str = "IOB2", num_columns: int | None = 4
) -> DatasetDict:
    """Read CoNLL files into a `DatasetDict` whose "ner_tags" are strings in `tag_scheme`.

    Args:
        data_files: split name -> path, e.g. {"train": "eng.train", "validation": "eng.testa"}.
        tag_scheme: the scheme every split is converted to (one of `tag_schemes.SCHEME_NAMES`).
        num_columns: see `read_conll`.

    Each split keeps the file's columns, "line" (where each sentence starts) and "file".
    """
    tag_scheme = canonical_scheme(tag_scheme)
    splits = {}
    for split, path in data_files.items():
        sentences, scheme = read_conll_file_with_scheme(path, num_columns)
        if scheme != tag_scheme:
            logger.info("%s: converting %s tags to %s", path, scheme, tag_scheme)
        for sentence in sentences:
            sentence["ner_tags"] = convert_tags(sentence["ner_tags"], scheme, tag_scheme)
            sentence["file"] = str(path)
        splits[split] = Dataset.from_list(sentences)
    return DatasetDict(splits)


def load_hub_ner_dataset(
    dataset_name: str, dataset_config_name: str | None = None, tag_scheme: str = "IOB2", cache_dir: str | None = None
) -> DatasetDict:
    """A Hub (or local `datasets`) NER dataset with "tokens" and "ner_tags", with string tags in `tag_scheme`."""
    from datasets import load_dataset

    tag_scheme = canonical_scheme(tag_scheme)
    raw = load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir)
    splits = {}
    for split, dataset in raw.items():
        for column in ("tokens", "ner_tags"):
            if column not in dataset.column_names:
                raise ValueError(
                    f"dataset {dataset_name!r} split {split!r} has no {column!r} column "
                    f"(columns: {dataset.column_names})"
                )
        feature = dataset.features["ner_tags"]
        tags = dataset["ner_tags"]
        if isinstance(feature, Sequence) and isinstance(feature.feature, ClassLabel):
            tags = [[feature.feature.names[t] for t in row] for row in tags]
        scheme = detect_tag_scheme(tags)
        logger.info("%s/%s: %d sentences, %s tags", dataset_name, split, len(dataset), scheme)
        if scheme != tag_scheme:
            logger.info("%s/%s: converting %s tags to %s", dataset_name, split, scheme, tag_scheme)
        # Only words and NER tags: other columns (POS, chunk) are class ids whose names differ per dataset.
        splits[split] = Dataset.from_dict(
            {
                "tokens": dataset["tokens"],
                "ner_tags": [convert_tags(row, scheme, tag_scheme) for row in tags],
            }
        )
    return DatasetDict(splits)


def check_labels(dataset: Dataset, label2id: dict[str, int], split: str):
    """Raise a ValueError naming the first tag of `dataset` that is not in `label2id` (unseen in training)."""
    for index, tags in enumerate(dataset["ner_tags"]):
        for position, tag in enumerate(tags):
            if tag not in label2id:
                if "file" in dataset.column_names:
                    where = f"{dataset[index]['file']}:{dataset[index]['line'] + position}"
                else:
                    where = f"sentence {index}, word {position}"
                raise ValueError(
                    f"the {split} data has the label {tag!r} ({where}), which the training data never has; "
                    f"the model only knows {list(label2id)}"
                )


# --- long sentences ------------------------------------------------------------------------------------


def split_long_sentences(dataset: Dataset, word_costs, budget: int, desc: str = "splitting long sentences") -> Dataset:
    """Split sentences whose words cost more than `budget` into consecutive pieces that fit.

    Args:
        dataset: with "tokens", "ner_tags" and any other per-word list columns.
        word_costs: function from a batch of token lists to a list of per-word cost lists (e.g. sub-token counts).
        budget: the most a piece may cost (e.g. the model's maximum length minus its special tokens).

    Returns:
        The pieces, each with "sentence_id" (index of its sentence in `dataset`) and "word_start" (index of its
        first word there). A single word costing more than `budget` gets a piece of its own (the encoder then
        truncates it). Logs a warning with the number of sentences split.
    """
    word_columns = [
        c
        for c in dataset.column_names
        if c == "tokens" or c == "ner_tags" or c in CONLL2003_COLUMNS or c.startswith("column_")
    ]
    other_columns = [c for c in dataset.column_names if c not in word_columns]

    def split_batch(batch, indices):
        out = defaultdict(list)
        for row, (index, costs) in enumerate(zip(indices, word_costs(batch["tokens"]))):
            start, total = 0, 0
            pieces = []
            for position, cost in enumerate(costs):
                if total + cost > budget and position > start:
                    pieces.append((start, position))
                    start, total = position, 0
                total += cost
            pieces.append((start, len(costs)))
            for start, end in pieces:
                for column in word_columns:
                    out[column].append(batch[column][row][start:end])
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


def encode_tagged_words(examples, tokenizer, label2id: dict[str, int], max_length: int | None = None):
    """Tokenize pre-split words and align the word labels to the tokens, for every model family.

    `word_ids()` (of a fast tokenizer, or of `ElmoTokenizer`, which gives one position per word) says which word
    each token is: the first token of each word gets the word's label id; the word's other sub-tokens and special
    tokens -100 (`align_labels`). `max_length` truncates (in tokens); None keeps every word. For
    `datasets.Dataset.map(batched=True)`; batches are padded later (labels with -100, by
    `DataCollatorForTokenClassification`).
    """
    encodings = tokenizer(
        examples["tokens"], is_split_into_words=True, truncation=max_length is not None, max_length=max_length
    )
    try:
        word_ids = [encodings.word_ids(i) for i in range(len(examples["tokens"]))]
    except ValueError:  # transformers' slow tokenizers cannot say which word a token is
        raise ValueError(
            f"encoding tagged words needs a tokenizer with word_ids() (a fast one, or ElmoTokenizer); got "
            f"{type(tokenizer).__name__}"
        ) from None
    encodings["labels"] = [align_labels(ids, tags, label2id) for ids, tags in zip(word_ids, examples["ner_tags"])]
    return dict(encodings)


def align_labels(word_ids, tags: list[str], label2id: dict[str, int]) -> list[int]:
    """One sentence's word tags as label ids per token, from its `word_ids` (`BatchEncoding.word_ids(i)`, of a fast
    tokenizer or of `ElmoTokenizer`): the first token of each word gets the word's label id, the word's other
    tokens, special tokens and padding (`None`) -100. (Predictions are read at the same first tokens, one per word.)"""
    labels, previous = [], None
    for word in word_ids:
        if word is None or word == previous:
            labels.append(IGNORE_INDEX)
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


def ner_metrics(id2label: dict[int, str], tag_scheme: str | None = None):
    """`Trainer(compute_metrics=...)` for tag ids from `logits_to_tags`: entity-level scores from the shipped
    seqeval metric ("precision", "recall", "f1", "accuracy" overall, and "<TYPE>_f1" per entity type), and with
    `tag_scheme` "scheme_breaks": how many predicted transitions the scheme forbids (`count_scheme_breaks`; 0 for a
    tagger with a CRF under the scheme).

    `tag_scheme` scores the way `tag_schemes.seqeval_arguments` says: BIOES and BIOUL in seqeval's strict mode
    (only well-formed entities count, and L-/U- are read), IOB1 and IOB2 (and `None`) as conlleval reads them.
    """
    from ..metrics import load_metric

    seqeval = load_metric("seqeval")
    scheme_arguments = seqeval_arguments(tag_scheme) if tag_scheme is not None else {}

    def compute(eval_prediction) -> dict[str, float]:
        predicted, gold = predictions_to_tags(eval_prediction.predictions, eval_prediction.label_ids, id2label)
        scores = seqeval.compute(predictions=predicted, references=gold, zero_division=0, **scheme_arguments)
        metrics = {name: scores[f"overall_{name}"] for name in ("precision", "recall", "f1", "accuracy")}
        metrics.update({f"{entity}_f1": value["f1"] for entity, value in scores.items() if isinstance(value, dict)})
        if tag_scheme is not None:
            metrics["scheme_breaks"] = count_scheme_breaks(predicted, tag_scheme)
        return metrics

    return compute


def write_conll_predictions(path: str | Path, sentences: Dataset | list[dict], predictions: list[list[str]]):
    """Write sentences with their predicted tags as a column file that the `conlleval` script reads.

    Each word line holds the input's columns (word, POS, chunk when present, gold tag) then the predicted tag;
    `conlleval` takes the last two columns as gold and predicted. Sentences are separated by blank lines.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        for index, (sentence, predicted) in enumerate(zip(sentences, predictions)):
            if len(predicted) != len(sentence["tokens"]):
                raise ValueError(
                    f"sentence {index} has {len(sentence['tokens'])} words but {len(predicted)} predictions"
                )
            middle = [c for c in CONLL2003_COLUMNS[1:3] if c in sentence] + sorted(
                c for c in sentence if c.startswith("column_")
            )
            for position, tag in enumerate(predicted):
                fields = [
                    sentence["tokens"][position],
                    *(sentence[c][position] for c in middle),
                    sentence["ner_tags"][position],
                    tag,
                ]
                f.write(" ".join(fields) + "\n")
            f.write("\n")
