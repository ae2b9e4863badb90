"""BERT's tokenizer, trained from scratch on raw text.

hf_ctx BERT uses transformers' own `BertTokenizer` (WordPiece, backed by the `tokenizers` library): it is
registered for `CtxBertConfig`, so `AutoTokenizer` loads it from an hf_ctx checkpoint, and it also loads where
hf_ctx is not installed. This module adds training a WordPiece vocabulary from text files.
"""

import os
from collections.abc import Iterable, Iterator

from transformers import BertTokenizer

# BERT's special tokens; [PAD] first so that pad_token_id = 0 as CtxBertConfig expects.
SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}


def iter_text_lines(files: Iterable[str | os.PathLike]) -> Iterator[str]:
    """Yield the non-blank lines of text files, checking each file exists, is UTF-8 and has some text."""
    for path in files:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"text file not found: {path}")
        found_text = False
        with open(path, encoding="utf-8") as f:
            try:
                for line in f:
                    line = line.strip()
                    if line:
                        found_text = True
                        yield line
            except UnicodeDecodeError as err:
                raise ValueError(f"{path} is not valid UTF-8 ({err})") from err
        if not found_text:
            raise ValueError(f"{path} holds no text (empty or only blank lines)")


def train_wordpiece_tokenizer(
    files: Iterable[str | os.PathLike],
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    model_max_length: int = 512,
) -> BertTokenizer:
    """Train a BERT WordPiece tokenizer on raw text files (one sentence or paragraph a line).

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
    # An untrained tokenizer with BERT's normaliser, pre-tokeniser, post-processor and special tokens;
    # training keeps that pipeline and learns the WordPiece vocabulary.
    untrained = BertTokenizer(
        do_lower_case=lowercase,
        strip_accents=strip_accents,
        model_max_length=model_max_length,
        **SPECIAL_TOKENS,
    )
    tokenizer = untrained.train_new_from_iterator(
        iter_text_lines(files), vocab_size=vocab_size, min_frequency=min_frequency
    )
    if tokenizer.pad_token_id != 0:
        raise RuntimeError(f"trained tokenizer put [PAD] at id {tokenizer.pad_token_id}, expected 0")
    return tokenizer
