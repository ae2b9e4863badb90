"""BERT's tokenizer, trained from scratch on raw text.

hf_ctx BERT uses transformers' own `BertTokenizer` (WordPiece, backed by the `tokenizers` library): it is
registered for `CtxBertConfig`, so `AutoTokenizer` loads it from an hf_ctx checkpoint, and it also loads where
hf_ctx is not installed. This module adds training a WordPiece vocabulary from text files.
"""

import logging
import os
import threading
from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import BertTokenizer

from .files import check_regular_file, unique_files
from .text import iter_text_file_lines

logger = logging.getLogger(__name__)

# BERT's special tokens; [PAD] first so that pad_token_id = 0 as CtxBertConfig expects.
SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}


def iter_text_lines(files: Iterable[str | os.PathLike]) -> Iterator[str]:
    """Yield the non-blank lines of text files (plain or gzip-compressed), checking each file exists, is UTF-8 (a
    corrupt or truncated gzip named as such, `text.iter_text_file_lines`) and has some text."""
    files = unique_files(files)
    for path in files:
        check_regular_file(path)
        found_text = False
        for _, line in iter_text_file_lines(path):
            if line:
                found_text = True
                yield line
        if not found_text:
            raise ValueError(f"{path} holds no text (empty or only blank lines)")


def _train_interruptibly(bpe, lines: Iterator[str], trainer) -> None:
    """`bpe.train_from_iterator(lines, trainer)` in a thread of its own, the main thread waiting on it: the
    merges are learnt in Rust, where a Ctrl-C or SIGTERM was not seen until the end (minutes on a big corpus);
    waiting here, the main thread runs the signal's handler at once and the KeyboardInterrupt stops the command.
    The thread cannot be stopped from outside: while it still reads the text, the next line it asks for raises
    and ends it; learning merges, it runs on until they are learnt (the command's process exits at once; a
    Python session keeps the thread busy that long, its result thrown away)."""
    failure, stop = [], threading.Event()

    def lines_until_stopped():
        for line in lines:
            if stop.is_set():
                raise RuntimeError("tokenizer training was interrupted")
            yield line

    def train():
        try:
            bpe.train_from_iterator(lines_until_stopped(), trainer)
        except BaseException as error:  # handed to the main thread
            failure.append(error)

    worker = threading.Thread(target=train, name="wordpiece-training", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except BaseException:
        stop.set()
        raise
    if failure:
        raise failure[0]


# Private-use planes 15 and 16: where continuing characters are written while the vocabulary is learnt.
_FIRST_MARK, _LAST_MARK = 0xF0000, 0x10FFFD


class _ContinuationMarks(dict):
    """Writes the characters after a word's first one as private-use characters (one per character, numbered
    in order of first appearance), so that "##x" and "x" are different characters to a plain BPE trainer.

    A `str.translate` table: a character met for the first time gets the next mark.
    """

    def __missing__(self, code: int) -> str:
        if code >= _FIRST_MARK:
            raise ValueError(
                f"the text holds the private-use character U+{code:X}, which tokenizer training "
                "uses internally; remove it from the text"
            )
        if _FIRST_MARK + len(self) > _LAST_MARK:
            raise ValueError("the text holds too many distinct characters to train a WordPiece vocabulary")
        self[code] = chr(_FIRST_MARK + len(self))
        return self[code]

    def mark(self, word: str) -> str:
        if ord(word[0]) >= _FIRST_MARK:
            self.__missing__(ord(word[0]))  # raises
        return word[0] + word[1:].translate(self)

    def continuing_characters(self) -> list[str]:
        """The characters met after a word's first one, in code-point order."""
        return sorted(chr(code) for code in self)

    def unmark(self, vocab: dict[str, int]) -> dict[str, int]:
        """The learnt vocabulary with "##" names: marks back to characters, "##" before a token that starts
        with one."""
        characters = {ord(mark): chr(code) for code, mark in self.items()}
        return {
            ("##" if ord(token[0]) >= _FIRST_MARK else "") + token.translate(characters): index
            for token, index in vocab.items()
        }


def train_wordpiece_tokenizer(
    files: Iterable[str | os.PathLike],
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    model_max_length: int = 512,
) -> BertTokenizer:
    """Train a BERT WordPiece tokenizer on raw text files (one sentence or paragraph per line).

    Args:
        files: text files to learn the vocabulary from.
        vocab_size: size of the vocabulary, special tokens included.
        min_frequency: a merge must occur at least this often to enter the vocabulary.
        lowercase: lower-case the text (uncased BERT); with `strip_accents=None`, accents are stripped iff lower-cased.
        strip_accents: force accent stripping on or off.
        model_max_length: the longest input (in tokens) the tokenizer lets through with `truncation=True`.

    Returns:
        A `BertTokenizer` with `[PAD]`=0, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`; `save_pretrained` writes files
        `AutoTokenizer` reloads.
    """
    files = list(files)
    if not files:
        raise ValueError("train_wordpiece_tokenizer needs at least one text file")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size ({vocab_size}) must exceed the {len(SPECIAL_TOKENS)} special tokens")
    # An untrained tokenizer gives BERT's normaliser and pre-tokeniser (and, below, its post-processor).
    untrained = BertTokenizer(
        do_lower_case=lowercase,
        strip_accents=strip_accents,
        model_max_length=model_max_length,
        **SPECIAL_TOKENS,
    )
    backend = untrained.backend_tokenizer
    # The vocabulary is learnt as `tokenizers`' WordPiece trainer learns it (BPE merges over the words, a word
    # starting with its first character and continuing with "##" pieces), but deterministically. That trainer
    # numbers the "##" characters in hash-map order, which differs from run to run, and breaks ties between
    # merges of equal count by those numbers: the same text gave different vocabularies
    # (huggingface/tokenizers#1794). Here each continuing character is written as a private-use character of
    # its own, numbered in order of first appearance, and a plain BPE trainer (whose alphabet is sorted) learns
    # the merges; the "##" names are restored afterwards.
    marks = _ContinuationMarks()

    def marked_words() -> Iterator[str]:
        for line in iter_text_lines(files):
            words = backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(line))
            yield " ".join(marks.mark(word) for word, _ in words)
        # As the WordPiece trainer does, every character also enters the alphabet on its own (as a word of one
        # character: no pair, so no merge changes).
        yield " ".join(marks.continuing_characters())

    bpe = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS.values()),
        show_progress=False,
    )
    _train_interruptibly(bpe, marked_words(), trainer)
    vocab = marks.unmark(bpe.get_vocab(with_added_tokens=True))
    tokenizer = BertTokenizer(
        vocab=vocab,
        do_lower_case=lowercase,
        strip_accents=strip_accents,
        model_max_length=model_max_length,
        **SPECIAL_TOKENS,
    )
    if tokenizer.pad_token_id != 0:
        raise RuntimeError(f"trained tokenizer put [PAD] at id {tokenizer.pad_token_id}, expected 0")
    shortfall = vocabulary_shortfall(len(tokenizer), vocab_size, min_frequency)
    if shortfall:
        logger.info(f"the WordPiece vocabulary has {len(tokenizer):,} tokens, {shortfall}")
    return tokenizer


def vocabulary_shortfall(size: int, vocab_size: int, min_frequency: int) -> str | None:
    """Why a trained vocabulary of `size` tokens is smaller than the `vocab_size` asked, in words ("fewer than the
    8,000 asked: ..."); None when it is not."""
    if size >= vocab_size:
        return None
    times = "once" if min_frequency == 1 else f"{min_frequency} times"
    return f"fewer than the {vocab_size:,} asked: the text has no more distinct pieces seen at least {times}"
