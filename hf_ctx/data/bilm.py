"""Training data for the ELMo biLM: sentences of words from raw text, a word vocabulary, batches, and the
perplexities `Trainer` reports.

    load_text_lines(files)                   one row per non-blank line: {"text"} (plain or .gz files, globs)
    split_into_sentences(dataset, ...)       one row per sentence: {"words": [...]}, at most `max_words` words
    count_words(dataset) / build_vocabulary  the LM vocabulary: <S>, </S>, <UNK>, then words by frequency
    BiLMDataCollator(tokenizer)              batches of character ids, attention mask and word ids
    preprocess_bilm_logits / compute_bilm_metrics   forward, backward and average perplexity for `Trainer`

Sentences: a line is split into words and sentences by the package's one splitter (`hf_ctx.data.words`:
punctuation off words as in CoNLL and the Penn Treebank, or on spaces only for text already tokenized), and
sentences longer than `max_words` are cut into consecutive pieces, so no word is dropped. bilm-tf instead
streams text through windows of 20 steps with LSTM states carried across batches; here each sentence is its own
example, with `<S>` and `</S>` around it, which is how ELMo is then used.
"""

import itertools
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterable

import torch
from datasets import Dataset, Features, IterableDataset, List, Value
from datasets.utils.tqdm import tqdm  # off where `datasets` progress bars are (output to a file)
from transformers import EvalPrediction

from ..tokenization_elmo import BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
from .atomic_write import atomic_write
from .text import load_text_documents, map_batches
from .words import check_word_splitter, sentence_words, split_words

logger = logging.getLogger(__name__)


def load_text_lines(
    files, cache_dir: str | None = None, streaming: bool = False, num_proc: int | None = None
) -> Dataset | IterableDataset:
    """Raw text files (plain or gzip-compressed; paths or glob patterns) -> a `Dataset` with one row per non-blank
    line, column "text", or a streaming `IterableDataset` of the same rows (see `hf_ctx.data.text`)."""
    return load_text_documents(
        files, document_boundary="line", cache_dir=cache_dir, streaming=streaming, num_proc=num_proc
    )


def sentences_of(
    text: str, max_words: int, split_sentences: bool = True, splitter: str = "treebank"
) -> list[list[str]]:
    """The sentences (lists of words, `hf_ctx.data.words` under `splitter`) of one line of text, each cut into
    pieces of at most `max_words` words; without `split_sentences` the line is one sentence."""
    if split_sentences:
        sentences = sentence_words(text, splitter)
    else:
        sentences = [words] if (words := split_words(text, splitter)) else []
    return [
        sentence[start : start + max_words] for sentence in sentences for start in range(0, len(sentence), max_words)
    ]


def _split_batch(batch, text_column, max_words, split_sentences, splitter):
    return {
        "words": [
            s for text in batch[text_column] if text for s in sentences_of(text, max_words, split_sentences, splitter)
        ]
    }


def split_into_sentences(
    dataset: Dataset | IterableDataset,
    max_words: int = 50,
    text_column: str = "text",
    split_sentences: bool = True,
    num_proc: int | None = None,
    splitter: str = "treebank",
) -> Dataset | IterableDataset:
    """One row per sentence: {"words": list of at most `max_words` words} (see the module docstring), words split
    by `hf_ctx.data.words` under `splitter` ("treebank": punctuation off words, as CoNLL data; "whitespace": text
    already tokenized). A streaming dataset gives a streaming dataset of the same sentences in the same order."""
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, got {max_words}")
    if dataset.column_names is not None and text_column not in dataset.column_names:
        raise ValueError(f"the dataset has no column {text_column!r}; its columns are {dataset.column_names}")
    return map_batches(
        dataset,
        _split_batch,
        num_proc=num_proc,
        desc="splitting sentences",
        fn_kwargs={
            "text_column": text_column,
            "max_words": max_words,
            "split_sentences": split_sentences,
            "splitter": check_word_splitter(splitter),
        },
        features=Features({"words": List(Value("string"))}),
    )


def count_words(sentences: Dataset | IterableDataset | Iterable[list[str]]) -> Counter:
    """How often each word occurs in a dataset of {"words"} rows (or any iterable of word lists).

    For a cached `Dataset`, the counts are saved beside its Arrow files, keyed by its fingerprint, so a second run
    on the same sentences reads them instead of counting again.
    """
    cache_file = _word_counts_cache_file(sentences)
    if cache_file is not None and os.path.isfile(cache_file):
        logger.info(f"reading the word counts from the cache: {cache_file}")
        with open(cache_file, encoding="utf-8") as f:
            return Counter(json.load(f))
    counts = Counter()
    if isinstance(sentences, (Dataset, IterableDataset)):
        total = math.ceil(len(sentences) / 10_000) if isinstance(sentences, Dataset) else None
        for batch in tqdm(sentences.iter(batch_size=10_000), total=total, desc="counting words"):
            counts.update(itertools.chain.from_iterable(batch["words"]))
    else:
        for words in sentences:
            counts.update(words)
    if cache_file is not None:
        with atomic_write(cache_file) as f:  # an interrupted run leaves no partial file behind
            json.dump(counts, f, ensure_ascii=False)
    return counts


def _word_counts_cache_file(sentences) -> str | None:
    """Where `count_words` caches the counts of a `Dataset` backed by Arrow cache files (None otherwise)."""
    if not isinstance(sentences, Dataset) or not sentences.cache_files:
        return None
    directory = os.path.dirname(sentences.cache_files[0]["filename"])
    return os.path.join(directory, f"word-counts-{sentences._fingerprint}.json")


def build_vocabulary(counts: Counter, min_count: int = 1, max_size: int | None = None) -> list[str]:
    """The biLM's word vocabulary: `<S>`, `</S>`, `<UNK>`, then the words seen at least `min_count` times, most
    frequent first (ties alphabetically), at most `max_size` entries in all.

    Frequency order is what the sampled softmax's log-uniform sampler assumes.
    """
    if min_count < 1:
        raise ValueError(f"min_count must be at least 1, got {min_count}")
    specials = [BOS_TOKEN, EOS_TOKEN, UNK_TOKEN]
    if max_size is not None and max_size <= len(specials):
        raise ValueError(f"max_size must leave room for words besides {specials}, got {max_size}")
    words = sorted(
        (w for w, n in counts.items() if n >= min_count and w not in specials), key=lambda w: (-counts[w], w)
    )
    if max_size is not None:
        words = words[: max_size - len(specials)]
    return specials + words


class BiLMDataCollator:
    """Turns {"words": [...]} examples into a biLM batch: `input_ids` (B, W, C), `attention_mask` (B, W),
    `input_word_ids` (B, W), padded to the longest sentence (rounded up to `pad_to_multiple_of`).

    Keeping words (not character ids) in the dataset keeps it small; the tokenizer caches frequent words' ids.
    `Trainer` must then keep the "words" column: `remove_unused_columns=False`.
    """

    def __init__(self, tokenizer, pad_to_multiple_of: int | None = None):
        if not tokenizer.has_word_vocabulary:
            raise ValueError("the biLM's targets need a tokenizer with a word vocabulary (ElmoTokenizer(vocab=...))")
        self.tokenizer = tokenizer
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        sentences = [feature["words"] for feature in features]
        return dict(
            self.tokenizer(
                sentences,
                is_split_into_words=True,
                padding=True,
                return_tensors="pt",
                pad_to_multiple_of=self.pad_to_multiple_of,
            )
        )


def preprocess_bilm_logits(logits, labels) -> torch.Tensor:
    """`Trainer(preprocess_logits_for_metrics=...)` for `ElmoForBiLM`, which gives its forward and backward
    losses as the "logits" of a batch: one (forward, backward) row per sentence, so that batches concatenate and
    their mean weighs batches as `Trainer`'s eval loss does."""
    forward_loss, backward_loss = logits[0], logits[1]
    batch_size = labels.shape[0] if labels is not None else 1
    return torch.stack([forward_loss, backward_loss]).reshape(1, 2).expand(batch_size, 2)


def compute_bilm_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Forward, backward and average perplexity (exp of the mean of the two losses, bilm-tf's) of an evaluation."""
    losses = torch.as_tensor(eval_prediction.predictions).double().mean(dim=0)
    forward, backward = losses.tolist()
    return {
        "forward_perplexity": math.exp(forward),
        "backward_perplexity": math.exp(backward),
        "perplexity": math.exp((forward + backward) / 2),
    }
