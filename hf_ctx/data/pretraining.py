"""BERT pretraining examples from raw text: document-aware sentence pairs (MLM + NSP) or packed sequences (MLM only).

Each step is a cached `datasets` pass that writes Arrow files to disk, so a corpus larger than memory streams
through; `num_proc` spreads the work over processes and each pass shows a progress bar.

    load_text_documents(files)     one row per document: {"text": its lines joined by "\\n"}
    tokenize_documents(documents)  {"segments": [[token ids of line 1], [line 2], ...]}
    create_nsp_examples(...)       {"input_ids", "token_type_ids", "next_sentence_label"}   BERT (Devlin et al., 2019)
    create_packed_examples(...)    {"input_ids", "token_type_ids"}                          RoBERTa FULL-SENTENCES

`build_pretraining_dataset` chains them. Masking happens later, per batch, in `hf_ctx.data.masking`.

Input, and how bad input is handled:
- A text file holds one sentence or paragraph a line. A blank (or whitespace-only) line ends a document, and so
  does the end of a file; with `document_boundary="line"` every line is a document (e.g. one article a line).
  A `datasets.Dataset` gives one document a row; the lines of a row's text are its segments.
- A missing file is a `FileNotFoundError`; an empty file, a file that is not valid UTF-8 (reported with file
  and line), or a corpus with no text is a `ValueError`.
- A file of many lines without a single blank line becomes one document, with a warning, since that usually
  means one document a line (`document_boundary="line"`).
- Next-sentence prediction needs at least two documents (a NotNext segment comes from another document) and some
  document of at least two segments (otherwise there is no IsNext pair); a corpus without them is a `ValueError`
  that suggests the fix.
- A line longer than the space a segment has (`max_seq_length - 3` tokens for pairs, `max_seq_length - 2` packed)
  is split into consecutive pieces of equal length (at most half that space for pairs, so that two pieces make
  a full example) which act as separate segments: no text is dropped, unlike truncating such a line.
"""

import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow.compute as pc
import torch
from datasets import Dataset, Features, List, Value
from datasets.exceptions import DatasetGenerationError
from torch.nn import functional as F
from transformers import EvalPrediction, PreTrainedTokenizerBase

from ..losses import IGNORE_INDEX

logger = logging.getLogger(__name__)

DOCUMENT_BOUNDARIES = ("blank_line", "line")
OBJECTIVES = ("mlm_nsp", "mlm")  # BERT's MLM + next-sentence prediction; RoBERTa-style packed MLM only
NOT_NEXT_PROBABILITY = 0.5  # BERT: half the pairs take segment B from another document
SENTENCE_END = (".", "!", "?")


# --- Reading documents --------------------------------------------------------------------------------------


def _read_text_documents(files: list[str], document_boundary: str, file_stamps) -> Iterator[dict]:
    """Yield {"text": document} from text files, checking UTF-8 line by line. `file_stamps` only keys the cache."""
    for path in files:
        lines, lines_in_file, blank_lines = [], 0, 0
        with open(path, "rb") as f:
            for line_number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8").strip().lstrip("\ufeff")
                except UnicodeDecodeError as err:
                    raise ValueError(
                        f"{path}:{line_number}: not valid UTF-8 ({err.reason} at byte {err.start} of the line); "
                        "convert the file to UTF-8"
                    ) from None
                if not line:
                    blank_lines += 1
                    if lines:
                        yield {"text": "\n".join(lines)}
                        lines = []
                    continue
                lines_in_file += 1
                if document_boundary == "line":
                    yield {"text": line}
                else:
                    lines.append(line)
        if lines:
            yield {"text": "\n".join(lines)}
        if lines_in_file == 0:
            raise ValueError(f"{path} holds no text (empty or only blank lines)")
        if document_boundary == "blank_line" and blank_lines == 0 and lines_in_file > 1:
            logger.warning(
                f"{path} has no blank line, so its {lines_in_file} lines form one document; if each line is a "
                "document (e.g. one article a line), pass document_boundary='line'"
            )


def load_text_documents(
    files: str | os.PathLike | Sequence[str | os.PathLike],
    document_boundary: str = "blank_line",
    cache_dir: str | None = None,
) -> Dataset:
    """Read raw text files into a `Dataset` of documents, column "text" (a document's lines joined by newlines).

    Args:
        files: text files, one sentence or paragraph a line.
        document_boundary: "blank_line" (a blank line, or the end of a file, ends a document) or "line"
            (every line is a document).
        cache_dir: where `datasets` caches the Arrow file (default: its own cache). The cache is keyed by the
            files' paths, sizes and modification times, so an edited file is read again.
    """
    if document_boundary not in DOCUMENT_BOUNDARIES:
        raise ValueError(f"document_boundary must be one of {DOCUMENT_BOUNDARIES}, got {document_boundary!r}")
    files = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else [os.fspath(f) for f in files]
    if not files:
        raise ValueError("no text files given")
    for path in files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"text file not found: {path}")
    file_stamps = [(os.path.getsize(p), os.stat(p).st_mtime_ns) for p in files]
    try:
        return Dataset.from_generator(
            _read_text_documents,
            features=Features({"text": Value("string")}),
            gen_kwargs={"files": files, "document_boundary": document_boundary, "file_stamps": file_stamps},
            cache_dir=cache_dir,
        )
    except DatasetGenerationError as err:
        # datasets wraps errors raised while reading; surface ours (file and line) rather than its generic message.
        if isinstance(err.__cause__, ValueError):
            raise err.__cause__ from None
        raise


# --- Tokenizing ---------------------------------------------------------------------------------------------


def sentence_words(line: str) -> list[list[str]]:
    """The sentences of a line of whitespace-separated words, as word lists: a sentence ends after each word that
    ends with `.`, `!` or `?` (a simple rule: abbreviations such as "Mr." end a sentence too)."""
    sentences, current = [], []
    for word in line.split():
        current.append(word)
        if word.endswith(SENTENCE_END):
            sentences.append(current)
            current = []
    return sentences + [current] if current else sentences


def _tokenize_batch(batch, tokenizer, text_column, split_sentences):
    lines_per_document = []
    for text in batch[text_column]:
        if text is not None and not isinstance(text, str):
            raise ValueError(f"column {text_column!r} must hold strings, got {type(text).__name__}")
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if split_sentences:
            lines = [" ".join(words) for line in lines for words in sentence_words(line)]
        lines_per_document.append(lines)
    lines = [line for document in lines_per_document for line in document]
    ids = tokenizer(
        lines, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
    )["input_ids"] if lines else []
    documents, position = [], 0
    for document in lines_per_document:
        segments = [segment for segment in ids[position : position + len(document)] if segment]
        position += len(document)
        if segments:  # documents without a single token are dropped here, so later steps need not check
            documents.append(segments)
    return {"segments": documents}


def tokenize_documents(
    documents: Dataset, tokenizer: PreTrainedTokenizerBase, text_column: str = "text", num_proc: int | None = None,
    split_sentences: bool = False,
) -> Dataset:
    """Tokenize every line of every document (no special tokens): column "segments", one token-id list a line.

    With `split_sentences`, each line is first cut into sentences (`sentence_words`), so that text with a
    paragraph a line gives BERT's sentence pairs sentence-sized segments. Documents with no tokens are dropped; a
    dataset left with no document is a `ValueError`.
    """
    if text_column not in documents.column_names:
        raise ValueError(f"no column {text_column!r} in the dataset (columns: {documents.column_names})")
    tokenized = documents.map(
        _tokenize_batch,
        batched=True,
        num_proc=num_proc,
        remove_columns=documents.column_names,
        fn_kwargs={"tokenizer": tokenizer, "text_column": text_column, "split_sentences": split_sentences},
        features=Features({"segments": List(List(Value("int32")))}),
        desc="Tokenizing documents",
    )
    if len(tokenized) == 0:
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
    for document_index, segments in zip(indices, batch["segments"]):

        def random_document(rng, document_index=document_index):
            # Uniform over the other documents; random access into the memory-mapped dataset.
            other = int(rng.integers(len(documents) - 1))
            other += other >= document_index
            return split(documents[other]["segments"])

        # One generator per document, seeded by its index: the output does not depend on batching or num_proc.
        rng = np.random.default_rng([seed, document_index])
        for tokens_a, tokens_b, is_random_next in create_pairs_from_document(
            split(segments), random_document, max_num_tokens, short_seq_prob, rng
        ):
            out["input_ids"].append([cls_id, *tokens_a, sep_id, *tokens_b, sep_id])
            out["token_type_ids"].append([0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1))
            out["next_sentence_label"].append(int(is_random_next))
    return out


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
    examples = tokenized.map(
        _nsp_examples_batch,
        batched=True,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=tokenized.column_names,
        fn_kwargs={
            "documents": tokenized,
            "max_seq_length": max_seq_length,
            "short_seq_prob": short_seq_prob,
            "seed": seed,
            "cls_id": cls_id,
            "sep_id": sep_id,
        },
        features=Features({
            "input_ids": List(Value("int32")),
            "token_type_ids": List(Value("int8")),
            "next_sentence_label": Value("int8"),
        }),
        desc="Creating sentence pairs",
    )
    num_not_next = pc.sum(examples.data.column("next_sentence_label")).as_py() or 0
    if num_not_next == len(examples):
        raise ValueError(
            "every document has a single segment, so there is no IsNext pair for next-sentence prediction: put "
            "one sentence or paragraph a line with several lines per document, or use the MLM-only objective"
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
    return tokenized.map(
        _packed_examples_batch,
        batched=True,
        num_proc=num_proc,
        remove_columns=tokenized.column_names,
        fn_kwargs={"max_seq_length": max_seq_length, "cls_id": cls_id, "sep_id": sep_id},
        features=Features(
            {"input_ids": List(Value("int32")), "token_type_ids": List(Value("int8"))}
        ),
        desc="Packing sequences",
    )


def build_pretraining_dataset(
    documents: Dataset | str | os.PathLike | Sequence[str | os.PathLike],
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
    if not isinstance(documents, Dataset):
        documents = load_text_documents(documents, document_boundary=document_boundary, cache_dir=cache_dir)
    tokenized = tokenize_documents(documents, tokenizer, text_column=text_column, num_proc=num_proc,
                                   split_sentences=split_sentences)
    if objective == "mlm_nsp":
        return create_nsp_examples(tokenized, tokenizer, max_seq_length, short_seq_prob, seed, num_proc)
    return create_packed_examples(tokenized, tokenizer, max_seq_length, num_proc)


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
