"""BERT pretraining examples from raw text: document-aware sentence pairs (MLM + NSP) or packed sequences (MLM only).

Each step is a cached `datasets` pass that writes Arrow files to disk, so a corpus larger than memory streams
through and a second run with the same text and settings reads the cached files instead of tokenizing again;
`num_proc` spreads the work over processes and each pass shows a progress bar. Corpora larger than the disk cache
can stream instead (`load_text_documents(..., streaming=True)`): the packed MLM examples are then made on the fly.

    load_text_documents(files)     one row per document: {"text": its lines joined by "\\n"} (in `.text`)
    tokenize_documents(documents)  {"segments": [[token ids of line 1], [line 2], ...]}
    create_nsp_examples(...)       {"input_ids", "token_type_ids", "next_sentence_label"}   BERT (Devlin et al., 2019)
    create_packed_examples(...)    {"input_ids", "token_type_ids"}                          RoBERTa FULL-SENTENCES

`build_pretraining_dataset` chains them. Masking happens later, per batch, in `hf_ctx.data.masking`.
`save_pretokenized` / `load_pretokenized` keep packed examples as numpy token-id arrays beside their tokenizer, for
a machine that should train without tokenizing (`pretrain_bert.py --pretokenized_dir`).

Input, and how bad input is handled:
- A text file holds one sentence or paragraph per line. A blank (or whitespace-only) line ends a document, and so
  does the end of a file; with `document_boundary="line"` every line is a document (e.g. one article per line).
  A `datasets.Dataset` gives one document a row; the lines of a row's text are its segments.
- A missing file is a `FileNotFoundError`; an empty file, a file that is not valid UTF-8 (reported with file
  and line), or a corpus with no text is a `ValueError`.
- A file of many lines without a single blank line becomes one document, with a warning, since that usually
  means one document per line (`document_boundary="line"`).
- Next-sentence prediction needs at least two documents (a NotNext segment comes from another document) and some
  document of at least two segments (otherwise there is no IsNext pair); a corpus without them is a `ValueError`
  that suggests the fix.
- A line longer than the space a segment has (`max_seq_length - 3` tokens for pairs, `max_seq_length - 2` packed)
  is split into consecutive pieces of equal length (at most half that space for pairs, so that two pieces make
  a full example) which act as separate segments: no text is dropped, unlike truncating such a line.
"""

import json
import logging
import math
import os
import tempfile
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from datasets import Dataset, Features, IterableDataset, List, Value
from datasets.fingerprint import Hasher
from torch.nn import functional as F
from transformers import BertTokenizer, EvalPrediction, PreTrainedTokenizerBase

from ..atomic_files import write_into_folder
from ..input_checks import IGNORE_INDEX
from . import words
from .atomic_write import atomic_write, save_pretrained_atomically, write_text
from .text import load_text_documents, map_batches, sample_texts

logger = logging.getLogger(__name__)

# Documents tokenized per batch: a batch's token-id lists are Python objects until written out, and 100 Wikipedia
# articles (about 250k tokens) keep that small. The result does not depend on it.
TOKENIZE_BATCH_SIZE = 100
OBJECTIVES = ("mlm_nsp", "mlm")  # BERT's MLM + next-sentence prediction; RoBERTa-style packed MLM only
NOT_NEXT_PROBABILITY = 0.5  # BERT: half the pairs take segment B from another document


# --- Tokenizing ---------------------------------------------------------------------------------------------


def _tokenize_batch(batch, tokenizer, text_column, split_sentences):
    lines_per_document = []
    for text in batch[text_column]:
        if text is not None and not isinstance(text, str):
            raise ValueError(f"column {text_column!r} must hold strings, got {type(text).__name__}")
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if split_sentences:
            # the one splitter finds the sentences; each keeps its text as written, for the WordPiece tokenizer
            lines = [line[s[0][1] : s[-1][2]] for line in lines for s in words.split_sentences(line)]
        lines_per_document.append(lines)
    lines = [line for document in lines_per_document for line in document]
    ids = (
        tokenizer(
            lines, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
        )["input_ids"]
        if lines
        else []
    )
    documents, position = [], 0
    for document in lines_per_document:
        segments = [segment for segment in ids[position : position + len(document)] if segment]
        position += len(document)
        if segments:  # documents without a single token are dropped here, so later steps need not check
            documents.append(segments)
    return {"segments": documents}


def tokenize_documents(
    documents: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    text_column: str = "text",
    num_proc: int | None = None,
    split_sentences: bool = False,
) -> Dataset:
    """Tokenize every line of every document (no special tokens): column "segments", one token-id list per line.

    With `split_sentences`, each line is first cut into sentences (`hf_ctx.data.words.split_sentences`), so that text with a
    paragraph per line gives BERT's sentence pairs sentence-sized segments. Documents with no tokens are dropped; a
    dataset left with no document is a `ValueError`.
    """
    if documents.column_names is not None and text_column not in documents.column_names:
        raise ValueError(f"no column {text_column!r} in the dataset (columns: {documents.column_names})")
    tokenized = map_batches(
        documents,
        _tokenize_batch,
        num_proc=num_proc,
        batch_size=TOKENIZE_BATCH_SIZE,
        fn_kwargs={"tokenizer": tokenizer, "text_column": text_column, "split_sentences": split_sentences},
        features=Features({"segments": List(List(Value("int32")))}),
        desc="Tokenizing documents",
    )
    if isinstance(tokenized, Dataset) and len(tokenized) == 0:
        raise ValueError("the corpus holds no text: every document is empty")
    return tokenized


def split_long_segments(segments: Sequence[Sequence[int]], max_length: int, piece_length: int) -> list[list[int]]:
    """Segments longer than `max_length` become consecutive pieces of equal length, each at most `piece_length`."""
    out = []
    for segment in segments:
        segment = list(segment)
        if len(segment) <= max_length:
            out.append(segment)
            continue
        num_pieces = math.ceil(len(segment) / piece_length)
        bounds = [len(segment) * k // num_pieces for k in range(num_pieces + 1)]  # lengths differ by at most 1
        out.extend(segment[start:end] for start, end in zip(bounds, bounds[1:]))
    return out


# --- Sentence pairs for MLM + NSP (BERT) ------------------------------------------------------------------------


def truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: np.random.Generator) -> None:
    """Shorten the pair in place to `max_num_tokens` as BERT does: one token at a time from the longer segment,
    from its front or back at random (so that the model does not learn that segments always end or start whole)."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def create_pairs_from_document(
    segments: Sequence[list[int]],
    random_document: Callable[[np.random.Generator], list[list[int]]],
    max_num_tokens: int,
    short_seq_prob: float,
    rng: np.random.Generator,
) -> list[tuple[list[int], list[int], bool]]:
    """BERT's `create_instances_from_document`: (tokens_a, tokens_b, is_random_next) triples from one document.

    Segments are gathered into a chunk until it reaches the target length (`max_num_tokens`, or with probability
    `short_seq_prob` a random length in [2, max_num_tokens], drawn once per document as BERT does). A random
    prefix of the chunk is A. B is the rest of the chunk (IsNext) or, half the time and always when the chunk
    has one segment, a run of segments from `random_document(rng)` (NotNext), in which case the unused rest of
    the chunk is put back for the next pair. The pair is then truncated to `max_num_tokens`.
    """
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = int(rng.integers(2, max_num_tokens + 1))
    pairs = []
    chunk, chunk_length, i = [], 0, 0
    while i < len(segments):
        chunk.append(segments[i])
        chunk_length += len(segments[i])
        if i == len(segments) - 1 or chunk_length >= target_length:
            a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
            tokens_a = [token for segment in chunk[:a_end] for token in segment]
            is_random_next = len(chunk) == 1 or rng.random() < NOT_NEXT_PROBABILITY
            if is_random_next:
                other = random_document(rng)
                tokens_b = []
                for segment in other[int(rng.integers(len(other))) :]:
                    tokens_b.extend(segment)
                    if len(tokens_b) >= target_length - len(tokens_a):
                        break
                i -= len(chunk) - a_end  # the unused segments start the next chunk
            else:
                tokens_b = [token for segment in chunk[a_end:] for token in segment]
            truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            pairs.append((tokens_a, tokens_b, is_random_next))
            chunk, chunk_length = [], 0
        i += 1
    return pairs


def _nsp_examples_batch(batch, indices, documents, max_seq_length, short_seq_prob, seed, cls_id, sep_id):
    max_num_tokens = max_seq_length - 3  # [CLS] A [SEP] B [SEP]
    piece_length = max_num_tokens // 2

    def split(segments):
        return split_long_segments(segments, max_num_tokens, piece_length)

    out = {"input_ids": [], "token_type_ids": [], "next_sentence_label": []}
    arrow_documents = documents.with_format("arrow")
    for document_index, segments in zip(indices, batch["segments"]):

        def random_document(rng, document_index=document_index):
            # Uniform over the other documents; random access into the memory-mapped dataset.
            other = int(rng.integers(len(documents) - 1))
            other += other >= document_index
            return _LazySplitSegments(arrow_documents[other]["segments"][0].values, max_num_tokens, piece_length)

        # One generator per document, seeded by its index: the output does not depend on batching or num_proc.
        rng = np.random.default_rng([seed, document_index])
        for tokens_a, tokens_b, is_random_next in create_pairs_from_document(
            split(segments), random_document, max_num_tokens, short_seq_prob, rng
        ):
            out["input_ids"].append([cls_id, *tokens_a, sep_id, *tokens_b, sep_id])
            out["token_type_ids"].append([0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1))
            out["next_sentence_label"].append(int(is_random_next))
    return out


class _LazySplitSegments:
    """`split_long_segments(segments, max_length, piece_length)` of one document held as an Arrow list array,
    converting to Python only the segments that are read: NotNext pairs read a few segments of a random
    document, and converting whole documents (Wikipedia articles of thousands of tokens) made pair creation
    the slowest step of preparing a corpus.

    Supports `len()` (the number of pieces) and `[start:]`, which iterates over the pieces from `start` on.
    """

    def __init__(self, segments, max_length: int, piece_length: int):
        self.segments = segments  # pyarrow ListArray: one list of token ids per segment
        self.max_length, self.piece_length = max_length, piece_length
        lengths = pc.list_value_length(segments).to_numpy(zero_copy_only=False)
        self.pieces = np.where(lengths <= max_length, 1, -(-lengths // piece_length))  # ceil for long segments
        self.first_piece = np.concatenate([[0], np.cumsum(self.pieces)])

    def __len__(self) -> int:
        return int(self.first_piece[-1])

    def __getitem__(self, key: slice):
        if not isinstance(key, slice) or key.stop is not None or key.step is not None:
            raise TypeError("only [start:] slices are supported")
        return self._pieces_from(key.start or 0)

    def _pieces_from(self, start: int):
        segment = int(np.searchsorted(self.first_piece, start, side="right")) - 1
        skip = start - int(self.first_piece[segment])
        for index in range(segment, len(self.pieces)):
            pieces = split_long_segments([self.segments[index].as_py()], self.max_length, self.piece_length)
            yield from pieces[skip:]
            skip = 0


def _special_ids(tokenizer):
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError("the tokenizer needs [CLS] and [SEP] tokens (cls_token and sep_token)")
    return tokenizer.cls_token_id, tokenizer.sep_token_id


def create_nsp_examples(
    tokenized: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    seed: int = 0,
    num_proc: int | None = None,
) -> Dataset:
    """BERT's pretraining pairs `[CLS] A [SEP] B [SEP]` from tokenized documents (see `create_pairs_from_document`).

    Returns columns `input_ids`, `token_type_ids` (0 for [CLS] A [SEP], 1 for B [SEP]) and `next_sentence_label`
    (0 = IsNext, 1 = NotNext, as `CtxBertForPreTraining` expects). The result depends only on the documents and
    `seed`, not on `num_proc` or batching.
    """
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length must be at least 5 for [CLS] A [SEP] B [SEP], got {max_seq_length}")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
    if len(tokenized) < 2:
        raise ValueError(
            f"next-sentence prediction needs at least 2 documents (NotNext segments come from another document), "
            f"found {len(tokenized)}: separate documents by blank lines, pass document_boundary='line' if each "
            "line is a document, or pretrain with the MLM-only objective"
        )
    cls_id, sep_id = _special_ids(tokenizer)
    examples = map_batches(
        tokenized,
        _nsp_examples_batch,
        with_indices=True,
        num_proc=num_proc,
        fn_kwargs={
            "documents": tokenized,
            "max_seq_length": max_seq_length,
            "short_seq_prob": short_seq_prob,
            "seed": seed,
            "cls_id": cls_id,
            "sep_id": sep_id,
        },
        features=Features(
            {
                "input_ids": List(Value("int32")),
                "token_type_ids": List(Value("int8")),
                "next_sentence_label": Value("int8"),
            }
        ),
        desc="Creating sentence pairs",
    )
    num_not_next = pc.sum(examples.data.column("next_sentence_label")).as_py() or 0
    if num_not_next == len(examples):
        raise ValueError(
            "every document has a single segment, so there is no IsNext pair for next-sentence prediction: put "
            "one sentence or paragraph per line with several lines per document, or use the MLM-only objective"
        )
    logger.info(
        f"{len(examples)} sentence pairs from {len(tokenized)} documents, "
        f"{1 - num_not_next / len(examples):.1%} IsNext"
    )
    return examples


# --- Packed sequences for MLM only (RoBERTa) ---------------------------------------------------------------------


def _packed_examples_batch(batch, max_seq_length, cls_id, sep_id):
    block = max_seq_length - 2  # [CLS] ... [SEP]
    sequences, current, boundary_pending = [], [], False
    for segments in batch["segments"]:
        boundary_pending = bool(current)  # RoBERTa marks a document boundary inside a sequence with a separator
        for segment in split_long_segments(segments, block, block):
            if len(current) + boundary_pending + len(segment) > block:
                sequences.append(current)
                current, boundary_pending = [], False
            if boundary_pending:
                current.append(sep_id)
                boundary_pending = False
            current.extend(segment)
    if current:
        sequences.append(current)
    return {
        "input_ids": [[cls_id, *sequence, sep_id] for sequence in sequences],
        "token_type_ids": [[0] * (len(sequence) + 2) for sequence in sequences],
    }


def create_packed_examples(
    tokenized: Dataset, tokenizer: PreTrainedTokenizerBase, max_seq_length: int = 128, num_proc: int | None = None
) -> Dataset:
    """RoBERTa's FULL-SENTENCES inputs: whole lines packed in order into `[CLS] ... [SEP]` sequences of at most
    `max_seq_length` tokens, crossing document boundaries (marked by [SEP]). No NSP labels.

    Every token of the corpus appears exactly once. Packing runs within each `map` batch of 1000 documents, so
    only the last sequence of a batch may be short.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 for [CLS] x [SEP], got {max_seq_length}")
    cls_id, sep_id = _special_ids(tokenizer)
    return map_batches(
        tokenized,
        _packed_examples_batch,
        num_proc=num_proc,
        fn_kwargs={"max_seq_length": max_seq_length, "cls_id": cls_id, "sep_id": sep_id},
        features=Features({"input_ids": List(Value("int32")), "token_type_ids": List(Value("int8"))}),
        desc="Packing sequences",
    )


def build_pretraining_dataset(
    documents: Dataset | IterableDataset | str | os.PathLike | Sequence[str | os.PathLike],
    tokenizer: PreTrainedTokenizerBase,
    objective: str = "mlm_nsp",
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    seed: int = 0,
    document_boundary: str = "blank_line",
    text_column: str = "text",
    num_proc: int | None = None,
    cache_dir: str | None = None,
    split_sentences: bool = False,
) -> Dataset:
    """Pretraining examples from text files or a `Dataset` of documents (one a row, in `text_column`).

    A streaming `IterableDataset` of documents gives a streaming dataset of examples, the same ones in the same
    order as the cached path would give (for the "mlm" objective; pairs for "mlm_nsp" need random access).

    Args:
        objective: "mlm_nsp" for BERT's sentence pairs with `next_sentence_label`, "mlm" for packed sequences.
        max_seq_length: longest example, special tokens included.
        short_seq_prob: for "mlm_nsp", how often a document's target length is drawn shorter (BERT: 0.1), so that
            the model also sees short inputs.
        seed: for "mlm_nsp", seeds the pair sampling.
        document_boundary, cache_dir: for files, see `load_text_documents`.
        num_proc: processes for the `map` passes.
        split_sentences: cut lines into sentences first (see `tokenize_documents`).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if not isinstance(documents, (Dataset, IterableDataset)):
        documents = load_text_documents(
            documents, document_boundary=document_boundary, cache_dir=cache_dir, num_proc=num_proc
        )
    if isinstance(documents, IterableDataset) and objective == "mlm_nsp":
        raise ValueError(
            "next-sentence pairs draw NotNext segments from random documents of the whole corpus, which a streaming "
            "dataset cannot reach: stream with the MLM-only objective ('mlm'), or prepare the corpus without "
            "streaming"
        )
    tokenized = tokenize_documents(
        documents, tokenizer, text_column=text_column, num_proc=num_proc, split_sentences=split_sentences
    )
    if objective == "mlm_nsp":
        return create_nsp_examples(tokenized, tokenizer, max_seq_length, short_seq_prob, seed, num_proc)
    return create_packed_examples(tokenized, tokenizer, max_seq_length, num_proc)


# --- Packed examples as plain token-id arrays, for a machine that should not tokenize -----------------------------

PRETOKENIZED_INFO = "pretokenized.json"  # beside the tokenizer: what the arrays hold


def _ids_paths(folder: str | os.PathLike, split: str) -> tuple[str, str]:
    return os.path.join(folder, f"{split}.input_ids.npy"), os.path.join(folder, f"{split}.offsets.npy")


def _save_example_ids(examples: Dataset, folder: str | os.PathLike, split: str) -> dict[str, int]:
    """Write packed MLM examples (`create_packed_examples`) as two numpy arrays in `folder`: `<split>.input_ids.npy`
    (every example's ids end to end; uint16 when every id fits) and `<split>.offsets.npy` (int64, examples + 1:
    example i is `input_ids[offsets[i]:offsets[i + 1]]`). Numpy reads them back with no `datasets` and no tokenizer
    run, and they take about as much space as gzip-compressed text. Returns {"examples", "tokens"}."""
    if "next_sentence_label" in examples.column_names:
        raise ValueError("save_pretokenized stores packed MLM examples (objective 'mlm'), not next-sentence pairs")
    lengths = np.zeros(len(examples) + 1, dtype=np.int64)
    chunks = []
    for start in range(0, len(examples), 10_000):  # arrow slices, not Python lists of every id
        column = examples.data.column("input_ids").slice(start, 10_000).combine_chunks()
        chunks.append(column.flatten().to_numpy())
        lengths[start + 1 : start + 1 + len(column)] = pc.list_value_length(column).to_numpy()
    ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    ids = ids.astype(np.uint16 if ids.size == 0 or ids.max() < 2**16 else np.int32)
    ids_path, offsets_path = _ids_paths(folder, split)
    for path, array in ((ids_path, ids), (offsets_path, np.cumsum(lengths))):
        with atomic_write(path, "wb") as f:
            np.save(f, array)
    return {"examples": len(examples), "tokens": int(ids.size)}


def _load_example_ids(folder: str | os.PathLike, split: str) -> Dataset:
    """The packed MLM examples `_save_example_ids` wrote: a `Dataset` of "input_ids" and "token_type_ids" (all 0),
    as `create_packed_examples` gives, built from the arrays without copying them into Python lists."""
    ids_path, offsets_path = _ids_paths(folder, split)
    for path in (ids_path, offsets_path):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no pre-tokenized {split} examples (save_pretokenized writes them)")
    ids, offsets = np.load(ids_path), np.load(offsets_path)
    if (
        offsets.ndim != 1
        or offsets.size < 1
        or offsets[0] != 0
        or offsets[-1] != ids.size
        or (np.diff(offsets) < 0).any()
    ):
        raise ValueError(f"{offsets_path}: offsets must rise from 0 to the {ids.size:,} ids of {ids_path}")
    arrow_offsets = pa.array(offsets.astype(np.int32))
    input_ids = pa.ListArray.from_arrays(arrow_offsets, pa.array(ids.astype(np.int32)))
    token_type_ids = pa.ListArray.from_arrays(arrow_offsets, pa.array(np.zeros(ids.size, dtype=np.int8)))
    return Dataset(pa.table({"input_ids": input_ids, "token_type_ids": token_type_ids}))


def save_pretokenized(
    folder: str | os.PathLike, tokenizer, splits: dict[str, Dataset], max_seq_length: int, **info
) -> dict:
    """A pre-tokenized corpus in `folder`: the tokenizer, each split's packed MLM examples (`splits`: name ->
    `create_packed_examples` output) as token-id arrays, and `pretokenized.json` (max_seq_length, examples and tokens
    per split, and `info`, e.g. the source files). `pretrain_bert.py --pretokenized_dir` trains on it. Returns what
    `pretokenized.json` holds."""
    os.makedirs(folder, exist_ok=True)
    save_pretrained_atomically(tokenizer, folder)
    summary = {"max_seq_length": max_seq_length, **info, "splits": {}}
    for split, examples in splits.items():
        summary["splits"][split] = _save_example_ids(examples, folder, split)
    write_text(os.path.join(folder, PRETOKENIZED_INFO), json.dumps(summary, indent=1))
    return summary


def pretokenized_info_file(folder: str | os.PathLike) -> str:
    """The `pretokenized.json` of `folder`; a FileNotFoundError when there is none (not a pre-tokenized corpus)."""
    path = os.path.join(folder, PRETOKENIZED_INFO)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: {folder} is not a pre-tokenized corpus (save_pretokenized)")
    return path


def load_pretokenized(folder: str | os.PathLike, split: str, max_seq_length: int) -> Dataset:
    """One split of a corpus `save_pretokenized` wrote, checked to be packed to `max_seq_length`."""
    path = pretokenized_info_file(folder)
    with open(path, encoding="utf-8") as f:
        info = json.load(f)
    if info.get("max_seq_length") != max_seq_length:
        raise ValueError(
            f"{path}: the examples are packed to max_seq_length {info.get('max_seq_length')}, not the "
            f"--max_seq_length {max_seq_length} asked for"
        )
    return _load_example_ids(folder, split)


# --- A WordPiece vocabulary from (a sample of) the corpus -------------------------------------------------------


def train_tokenizer_on_corpus(
    documents: Dataset | IterableDataset,
    num_samples: int | None = None,
    seed: int = 0,
    text_column: str = "text",
    **tokenizer_kwargs,
):
    """Train a WordPiece tokenizer (`hf_ctx.train_wordpiece_tokenizer`, which takes `tokenizer_kwargs`) on the
    text of `num_samples` documents drawn with `seed` (all documents when None): `--tokenizer_train_samples`.

    A few thousand Wikipedia articles (millions of words) give a vocabulary close to one trained on all of them, in
    a fraction of the time. For a cached `Dataset`, the trained tokenizer is saved beside its Arrow files, keyed by
    the documents' fingerprint and these arguments, and a second run loads it: it then tokenizes nothing again,
    since the tokenized corpus is cached under the same tokenizer.
    """
    from .wordpiece import train_wordpiece_tokenizer

    cache = None
    if isinstance(documents, Dataset) and documents.cache_files:
        key = Hasher.hash([documents._fingerprint, num_samples, seed, text_column, sorted(tokenizer_kwargs.items())])
        cache = os.path.join(os.path.dirname(documents.cache_files[0]["filename"]), f"wordpiece-{key}")
        if os.path.isfile(os.path.join(cache, "tokenizer_config.json")):
            logger.info(f"loading the WordPiece tokenizer trained on this corpus before: {cache}")
            return BertTokenizer.from_pretrained(cache)
    with tempfile.TemporaryDirectory() as tmp:
        # The trainer reads files; the sample is written out once (documents' lines, blank lines dropped).
        path = os.path.join(tmp, "tokenizer_sample.txt")
        num_texts = 0
        with open(path, "w", encoding="utf-8") as f:
            for text in sample_texts(documents, num_samples, seed, text_column):
                f.write(text + "\n")
                num_texts += 1
        if num_texts == 0:
            raise ValueError("no text to train the tokenizer on: the sampled documents are empty")
        logger.info(f"training a WordPiece tokenizer on {num_texts} documents ({os.path.getsize(path):,} bytes)")
        tokenizer = train_wordpiece_tokenizer([path], **tokenizer_kwargs)
    if cache is not None:
        # Atomic: an interrupted run or a full disk leaves no partial tokenizer behind (`tokenizer_config.json`,
        # which marks it complete, is moved in last); a process saving it at the same time writes the same files.
        write_into_folder(cache, tokenizer.save_pretrained)
    return tokenizer


# --- Evaluation: MLM accuracy and perplexity, NSP accuracy with the Trainer --------------------------------------


def preprocess_pretraining_logits(logits, labels):
    """`Trainer(preprocess_logits_for_metrics=...)`: reduce the MLM logits to what the metrics need, per batch, so
    that evaluation never holds (examples, tokens, vocabulary) logits.

    Args:
        logits: `(prediction_logits, seq_relationship_logits)`; prediction logits are (B, T, V), or (N, V) for the
            N labelled tokens when the model was built with `sparse_prediction`.
        labels: MLM labels (B, T) with -100 where nothing is predicted, or `(labels, next_sentence_label)`.

    Returns:
        `(predictions, nll, seq_relationship_logits)`: argmax ids (B, T) with -100 at unlabelled positions, summed
        negative log-likelihood of the labelled tokens per sequence (B,), and the NSP logits (B, 2).
    """
    prediction_logits, seq_relationship_logits = logits[0], logits[1]
    mlm_labels = labels[0] if isinstance(labels, (tuple, list)) else labels
    labelled = mlm_labels != IGNORE_INDEX
    if prediction_logits.dim() == 3:
        prediction_logits = prediction_logits[labelled]  # sparse logits are already these rows, in this order
    predictions = torch.full_like(mlm_labels, IGNORE_INDEX)
    predictions[labelled] = prediction_logits.argmax(-1)
    token_nll = F.cross_entropy(prediction_logits.float(), mlm_labels[labelled], reduction="none")
    rows = labelled.nonzero()[:, 0]
    nll = torch.zeros(mlm_labels.shape[0], device=token_nll.device).index_add_(0, rows, token_nll)
    return predictions, nll, seq_relationship_logits


def compute_pretraining_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """`Trainer(compute_metrics=...)` after `preprocess_pretraining_logits`: MLM accuracy and perplexity over the
    masked tokens, and NSP accuracy when next-sentence labels were given."""
    predictions, nll, seq_relationship_logits = eval_prediction.predictions
    label_ids = eval_prediction.label_ids
    mlm_labels, nsp_labels = label_ids if isinstance(label_ids, (tuple, list)) else (label_ids, None)
    labelled = mlm_labels != IGNORE_INDEX
    num_labelled = int(labelled.sum())
    if num_labelled == 0:
        raise ValueError("no masked token in the evaluation set, so MLM metrics are undefined")
    metrics = {
        "mlm_accuracy": float((predictions[labelled] == mlm_labels[labelled]).mean()),
        "mlm_perplexity": float(math.exp(float(nll.sum()) / num_labelled)),
    }
    if nsp_labels is not None:
        metrics["nsp_accuracy"] = float((seq_relationship_logits.argmax(-1) == nsp_labels).mean())
    return metrics
