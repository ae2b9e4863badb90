"""Raw text for pretraining: finding the files, reading them (plain or gzip-compressed), and splitting sentences.

The one home of the text helpers that BERT's pretraining data (`hf_ctx.data.pretraining`) and the ELMo biLM's
(`hf_ctx.data.bilm`) share:

    resolve_text_files(patterns)         files and glob patterns -> a sorted list of existing files
    iter_text_file_lines(path)           (line number, stripped line) of one file, plain text or .gz
    load_text_documents(files)           a cached `datasets.Dataset` (or a streaming `IterableDataset`) of documents
    sample_texts(dataset, n, seed)       a seeded random sample of rows, e.g. to train a tokenizer on
    map_batches(dataset, function)       a batched `map` that works alike on cached and streaming datasets, with
                                         a fingerprint that a second run finds again (`map_fingerprint`)

Bad input gets an error naming the file: a glob pattern that matches nothing or a missing file is a
`FileNotFoundError`; a corrupt or truncated gzip file, text that is not UTF-8 (with its line), and a file without
text (an empty shard) are `ValueError`s. A full disk while `datasets` writes its cache is an `OSError` naming the
cache folder.
"""

import dataclasses
import glob
import inspect
import logging
import os
from collections.abc import Iterator, Sequence

import datasets
import numpy as np
from datasets import Dataset, Features, IterableDataset, Value
from datasets.exceptions import DatasetGenerationError
from datasets.fingerprint import Hasher

from ..atomic_files import full_disk_errno
from .files import check_regular_file, strip_invisible_prefix, text_file_lines, unique_files

logger = logging.getLogger(__name__)

DOCUMENT_BOUNDARIES = ("blank_line", "line")
STREAM_SHUFFLE_BUFFER = 10_000  # rows a streaming dataset is shuffled within (datasets' own default is 1000)


# --- Finding and reading files ------------------------------------------------------------------------------------


def resolve_text_files(patterns: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """Expand glob patterns (`wiki/wiki.train.*.txt.gz`) into their files, sorted, and check plain paths exist.

    Args:
        patterns: one path or pattern, or several; their files are listed in the order given (each pattern's in
            sorted order), without duplicates.

    Raises:
        ValueError: no file or pattern was given.
        FileNotFoundError: a pattern matches no file, or a path is not a file.
    """
    patterns = [patterns] if isinstance(patterns, (str, os.PathLike)) else list(patterns)
    if not patterns:
        raise ValueError("no text files given")
    files = []
    for pattern in map(os.fspath, patterns):
        if glob.has_magic(pattern):
            matches = sorted(path for path in glob.glob(pattern) if os.path.isfile(path))
            if not matches:
                raise FileNotFoundError(f"no file matches the pattern {pattern!r}")
        else:
            check_regular_file(pattern)
            matches = [pattern]
            if os.path.realpath(pattern) in map(os.path.realpath, files):
                unique_files([*files, pattern])  # a file named twice: an error naming both
        files.extend(path for path in matches if path not in files)
    return files


def iter_text_file_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield (line number, line stripped of surrounding whitespace and invisible prefixes such as a byte-order mark,
    `files.utf8_lines`) for every line of a text file, decompressing it when it is gzip-compressed (recognised by its
    first bytes, whatever its name: `files.text_file_lines`).

    Raises:
        ValueError: the file is not valid UTF-8 (with file and line), or is a corrupt or truncated gzip file (with
            the line reached), or ends in a `.gz` name without being gzip-compressed.
    """
    for line_number, line in enumerate(text_file_lines(path), start=1):
        yield line_number, strip_invisible_prefix(line.strip())


def _read_text_documents(files: list[str], document_boundary: str, file_stamps=None) -> Iterator[dict]:
    """Yield {"text": document} from text files. `file_stamps` is unused: it only keys the `datasets` cache."""
    for path in files:
        lines, lines_in_file, blank_lines = [], 0, 0
        for _, line in iter_text_file_lines(path):
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
                "document (e.g. one article per line), pass document_boundary='line'"
            )


def load_text_documents(
    files: str | os.PathLike | Sequence[str | os.PathLike],
    document_boundary: str = "blank_line",
    cache_dir: str | None = None,
    streaming: bool = False,
    num_proc: int | None = None,
) -> Dataset | IterableDataset:
    """Read raw text files (plain or gzip-compressed; paths or glob patterns) into documents, column "text" (a
    document's lines joined by newlines).

    Args:
        files: text files or glob patterns, one sentence or paragraph per line (see `resolve_text_files`).
        document_boundary: "blank_line" (a blank line, or the end of a file, ends a document) or "line"
            (every line is a document).
        cache_dir: where `datasets` caches the Arrow file (default: its own cache). The cache is keyed by the
            files' paths, sizes and modification times, so an edited file is read again and an unchanged one is
            not.
        streaming: return an `IterableDataset` that reads the files as it is iterated, in order, and writes
            nothing to disk (for corpora larger than the disk cache).
        num_proc: processes reading the files (at most one a file), for the cached dataset.
    """
    if document_boundary not in DOCUMENT_BOUNDARIES:
        raise ValueError(f"document_boundary must be one of {DOCUMENT_BOUNDARIES}, got {document_boundary!r}")
    files = resolve_text_files(files)
    # Each process reads whole files; `datasets` shards list arguments of equal length across processes.
    gen_kwargs = {
        "files": files,
        "document_boundary": document_boundary,
        "file_stamps": [(os.path.getsize(p), os.stat(p).st_mtime_ns) for p in files],
    }
    features = Features({"text": Value("string")})
    if streaming:
        return IterableDataset.from_generator(_read_text_documents, features=features, gen_kwargs=gen_kwargs)
    num_proc = min(num_proc, len(files)) if num_proc and num_proc > 1 else None
    try:
        return Dataset.from_generator(
            _read_text_documents, features=features, gen_kwargs=gen_kwargs, cache_dir=cache_dir, num_proc=num_proc
        )
    except DatasetGenerationError as err:
        # datasets wraps errors raised while reading; surface ours (file and line) rather than its generic message.
        if isinstance(err.__cause__, ValueError):
            raise err.__cause__ from None
        _raise_if_full_disk(err, cache_dir or datasets.config.HF_DATASETS_CACHE)
        raise
    except OSError as err:
        _raise_if_full_disk(err, cache_dir or datasets.config.HF_DATASETS_CACHE)
        raise


def _raise_if_full_disk(error: BaseException, cache_folder: str | os.PathLike) -> None:
    """An `OSError` naming `cache_folder` when `error` (raised while `datasets` wrote its cache there) is a full
    disk (`hf_ctx.atomic_files.full_disk_errno`); `datasets` raises its own wrappers for it, naming nothing."""
    code = full_disk_errno(error)
    if code is not None:
        raise OSError(
            code,
            f"could not write the datasets cache in {os.fspath(cache_folder)}: {os.strerror(code)}; free space "
            "there, or give another --cache_dir (or --streaming, which writes no cache)",
        ) from error


def sample_texts(
    dataset: Dataset | IterableDataset, num_samples: int | None, seed: int, text_column: str = "text"
) -> Iterator[str]:
    """The non-empty texts of `num_samples` rows of `dataset` drawn at random without replacement (all rows, in
    order, when `num_samples` is None or not smaller than the dataset). The same seed gives the same sample.

    Used to train a tokenizer on part of a large corpus (`--tokenizer_train_samples`). A streaming dataset is
    sampled from a shuffle buffer of `STREAM_SHUFFLE_BUFFER` rows (so the sample leans towards its start) and
    needs `num_samples`, since reading all of it is what streaming avoids.
    """
    if num_samples is not None and num_samples < 1:
        raise ValueError(f"the number of samples must be at least 1, got {num_samples}")
    if isinstance(dataset, IterableDataset):
        if num_samples is None:
            raise ValueError("a sample of a streaming dataset needs its size (e.g. --tokenizer_train_samples)")
        dataset = dataset.shuffle(seed=seed, buffer_size=STREAM_SHUFFLE_BUFFER).take(num_samples)
    elif num_samples is not None and num_samples < len(dataset):
        # Sorted indices read the memory-mapped Arrow file front to back.
        rng = np.random.default_rng(seed)
        indices = sorted(rng.choice(len(dataset), size=num_samples, replace=False).tolist())
        dataset = dataset.select(indices)
    for batch in dataset.iter(batch_size=1000):
        yield from (text for text in batch[text_column] if text)


def map_batches(dataset: Dataset | IterableDataset, function, num_proc=None, desc=None, fn_kwargs=None, **kwargs):
    """`dataset.map(function, batched=True)` replacing its columns, for a cached `Dataset` (with `num_proc`
    processes and a progress bar titled `desc`) or a streaming `IterableDataset` (mapped lazily as it is read).
    Batches hold 1000 rows either way, so both give the same rows.

    The cached result is keyed by a fingerprint of the input's fingerprint, the function and its arguments, in
    which a tokenizer counts by its content: `datasets`' own hash of a tokenizer object changes from one run to
    the next, which would make every run tokenize the corpus again.
    """
    fn_kwargs = fn_kwargs or {}
    if isinstance(dataset, IterableDataset):
        return dataset.map(function, batched=True, remove_columns=dataset.column_names, fn_kwargs=fn_kwargs, **kwargs)
    try:
        return dataset.map(
            function,
            batched=True,
            remove_columns=dataset.column_names,
            num_proc=num_proc,
            desc=desc,
            fn_kwargs=fn_kwargs,
            new_fingerprint=map_fingerprint(dataset, function, fn_kwargs, kwargs),
            **kwargs,
        )
    except Exception as error:
        if dataset.cache_files:
            _raise_if_full_disk(error, os.path.dirname(dataset.cache_files[0]["filename"]))
        raise


def map_fingerprint(dataset: Dataset, function, fn_kwargs: dict, map_kwargs: dict | None = None) -> str:
    """The fingerprint of `dataset.map(function, fn_kwargs=fn_kwargs, **map_kwargs)`, the same in every run for
    the same input, function and arguments (pass it as `new_fingerprint`, so that the cached result is found)."""
    return Hasher.hash(
        [
            dataset._fingerprint,
            # By its source: `datasets` hashes a module-level function by name, so an edited one would reuse stale files.
            function.__module__,
            function.__qualname__,
            inspect.getsource(function),
            {name: _stable_hash(value) for name, value in sorted(fn_kwargs.items())},
            {name: _stable_hash(value) for name, value in sorted((map_kwargs or {}).items())},
        ]
    )


def _stable_hash(value) -> str:
    """A hash of `value` that is the same in every run: a dataset by its fingerprint, a fast tokenizer by its
    serialised pipeline and vocabulary, a dataclass (e.g. a data collator) attribute by attribute, anything else by
    `datasets`' hasher."""
    if isinstance(value, Dataset):
        return value._fingerprint
    backend = getattr(value, "backend_tokenizer", None)
    if backend is not None:
        return Hasher.hash([type(value).__name__, backend.to_str(), value.model_max_length])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        attributes = {name: _stable_hash(attribute) for name, attribute in sorted(vars(value).items())}
        return Hasher.hash([type(value).__qualname__, attributes])
    return Hasher.hash(value)
