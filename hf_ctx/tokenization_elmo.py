"""ELMo's tokenizer: whitespace-separated words to character ids exactly as the original ELMo encodes them, plus
word ids from an optional word vocabulary (the language model's targets).

Each word becomes `max_characters_per_token` (50) character ids; `elmo_characters` describes the encoding.
The tokenizer adds no sentence boundaries: the model adds `<S>` and `</S>` itself.

The word vocabulary file is bilm-tf's `vocab.txt`: one word per line, in id order, holding `<S>`, `</S>` and
`<UNK>`. bilm-tf's vocabularies are sorted by decreasing frequency and load as they are.
"""

import logging
import numbers
import os
import sys
from collections.abc import Iterable

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedTokenizer
from transformers.utils import to_py_obj

from .atomic_files import write_into_folder
from .configuration_checks import boolean, positive_int
from .elmo_characters import BOS_TOKEN, EOS_TOKEN, MAX_SENTENCE_WORDS, char_ids_to_word, word_to_char_ids
from .input_checks import IGNORE_INDEX

logger = logging.getLogger(__name__)

VOCAB_FILES_NAMES = {"vocab_file": "vocab.txt"}

UNK_TOKEN = "<UNK>"
# How raw text becomes words (`hf_ctx.data.words`): the splitters a tokenizer's `word_splitter` may name.
WORD_SPLITTERS = ("treebank", "whitespace")


def read_vocabulary_file(path: str | os.PathLike) -> list[str]:
    """The words of a bilm-tf vocabulary file, in id order (bilm-tf's `!!!MAXTERMID` line is skipped)."""
    words = []
    with open(path, "rb") as f:  # read as bytes, so that a line that is not UTF-8 is named
        for line_number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")  # a byte-order mark is no word
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{path}:{line_number}: not valid UTF-8 ({error.reason} at byte {error.start} of the line); "
                    "save the vocabulary as UTF-8"
                ) from None
            word = line.strip()
            if word == "!!!MAXTERMID":
                continue
            if not word or len(word.split()) != 1:
                raise ValueError(f"{path}:{line_number}: expected one word per line, got {line.rstrip(chr(10))!r}")
            words.append(word)
    return words


class WordBatchEncoding(BatchEncoding):
    """What `ElmoTokenizer` returns: a `BatchEncoding` whose `word_ids(i)` is, as a fast tokenizer's, the word
    of each token of sentence `i`: ELMo's tokens are the words, so `[0, 1, ..., n - 1]`, then `None` for padding.
    One label-alignment function (`data.conll.align_labels`) thus serves word and sub-word tokenizers alike."""

    def __init__(self, data=None, word_ids: list[list[int | None]] | None = None, tensor_type=None):
        super().__init__(data, tensor_type=tensor_type)
        self._word_ids = word_ids

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        if self._word_ids is None:
            return super().word_ids(batch_index)
        return list(self._word_ids[batch_index])

    def __getstate__(self):
        return {**super().__getstate__(), "word_ids": self._word_ids}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._word_ids = state.get("word_ids")


def check_length_options(max_length, pad_to_multiple_of) -> None:
    """A `ValueError` unless `max_length` and `pad_to_multiple_of` are each None or a positive number of words:
    `max_length=0` truncated every sentence to no words, -1 cut its last word, and `pad_to_multiple_of=0`
    padded nothing, all in silence."""
    for name, value in (("max_length", max_length), ("pad_to_multiple_of", pad_to_multiple_of)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
            raise ValueError(f"{name} must be a positive number of words (or None), got {value!r}")


class ElmoTokenizer(PreTrainedTokenizer):
    r"""
    Tokenizer of hf_ctx's ELMo: sentences to character ids (and word ids).

    Called on one sentence or a batch (raw strings are split on whitespace; lists of words need
    `is_split_into_words=True`), it returns:
        - `input_ids`: (words, max_characters_per_token) character ids per sentence (batch axis first when
          batched); padding words are all 0;
        - `attention_mask`: (words,) 1 for words, 0 for padding;
        - `input_word_ids`: (words,) word ids, only when the tokenizer has a word vocabulary; unknown words get
          `<UNK>`'s id, words added by `add_tokens` theirs; padding gets the id of `pad_token` (`</S>`: ELMo has no
          padding word, and the attention mask tells padding apart);
        - on request, as transformers' tokenizers: `special_tokens_mask` (0 for every word: the model adds `<S>`
          and `</S>` itself; 1 at padding), `token_type_ids` (0: one sentence), `length`.
    `padding=True` pads to the longest sentence, `padding="max_length"` to `max_length`;
    `truncation=True, max_length=N` keeps a sentence's first N words (its last N with `truncation_side="left"`,
    on the tokenizer or in the call), `truncation=True` alone `model_max_length` words (default 1024, the model's
    `max_sentence_words`); a longer sentence without truncation is a warning. Padding is always on the right.
    `word_ids(i)` maps each position to its word, as a fast tokenizer's does (see `WordBatchEncoding`).
    `decode` reads `input_ids` (character ids) back to words, as it reads `input_word_ids`. There are no sentence
    pairs, overflowing windows or character offsets: those options are refused by name.

    Args:
        vocab_file (`str`, *optional*): a word vocabulary file (one word per line, in id order, with `<S>`, `</S>`
            and `<UNK>`), e.g. bilm-tf's vocab.txt.
        vocab (`list[str]`, *optional*): the same words as a list, instead of a file (see
            [`hf_ctx.data.bilm.build_vocabulary`]).
        max_characters_per_token (`int`, defaults to 50): width of the character ids; must be the model's.
        word_splitter (`str`, defaults to `"treebank"`): how raw text is to become this tokenizer's words, the
            splitter its word vocabulary was made with: `"treebank"` (punctuation off words, as CoNLL and the Penn
            Treebank) or `"whitespace"` (text that was already tokenized). The scripts and pipelines that take raw
            text split it so (`hf_ctx.data.words`); the tokenizer itself splits a string on whitespace.
        lowercase_words (`bool`, defaults to `False`): look words up in the word vocabulary lower-cased (the
            character ids keep their case): a tagger's vocabulary of lower-cased word vectors such as GloVe.
        pad_token (`str`, defaults to `"</S>"`): the word whose id pads `input_word_ids`.

    Without `vocab_file` and `vocab` the tokenizer gives character ids only (enough to compute ELMo vectors).

    Example:
    ```python
    >>> from hf_ctx import ElmoTokenizer
    >>> tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the", "cat"])
    >>> batch = tokenizer(["the cat sat", "the cat"], padding=True, return_tensors="pt")
    >>> batch["input_ids"].shape, batch["input_word_ids"].tolist()
    (torch.Size([2, 3, 50]), [[3, 4, 2], [3, 4, 1]])
    ```
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask", "input_word_ids"]
    padding_side = "right"

    def __init__(
        self,
        vocab_file: str | None = None,
        vocab: Iterable[str] | None = None,
        max_characters_per_token: int = 50,
        bos_token: str = BOS_TOKEN,
        eos_token: str = EOS_TOKEN,
        unk_token: str = UNK_TOKEN,
        pad_token: str = EOS_TOKEN,
        word_splitter: str = "treebank",
        lowercase_words: bool = False,
        **kwargs,
    ):
        if vocab_file is not None and vocab is not None:
            raise ValueError("give the word vocabulary as vocab_file or as vocab, not both")
        # The model's default limit (`ElmoConfig.max_sentence_words`): what `truncation=True` keeps.
        kwargs.setdefault("model_max_length", MAX_SENTENCE_WORDS)
        positive_int("model_max_length", kwargs["model_max_length"])  # else truncation=True refused max_length
        boolean("lowercase_words", lowercase_words)  # a tokenizer_config.json's "no" read as True
        if not isinstance(max_characters_per_token, int) or max_characters_per_token < 3:
            raise ValueError(f"max_characters_per_token must be an integer >= 3, got {max_characters_per_token!r}")
        if (str(bos_token), str(eos_token)) != (BOS_TOKEN, EOS_TOKEN):
            raise ValueError(
                f"ELMo's sentence boundaries are {BOS_TOKEN!r} and {EOS_TOKEN!r}; they have fixed "
                f"character encodings, got {bos_token!r} and {eos_token!r}"
            )
        words = read_vocabulary_file(vocab_file) if vocab_file is not None else vocab
        self.has_word_vocabulary = words is not None
        self.words = list(words) if words is not None else [BOS_TOKEN, EOS_TOKEN, str(unk_token)]
        self.vocab = {}
        for index, word in enumerate(self.words):
            if not isinstance(word, str) or not word or len(word.split()) != 1:
                raise ValueError(f"vocabulary entry {index} must be one word without spaces, got {word!r}")
            if word in self.vocab:
                raise ValueError(f"word {word!r} appears twice in the vocabulary (ids {self.vocab[word]} and {index})")
            self.vocab[word] = index
        missing = [token for token in (BOS_TOKEN, EOS_TOKEN, str(unk_token)) if token not in self.vocab]
        if missing:
            source = vocab_file if vocab_file is not None else "the vocabulary"
            raise ValueError(
                f"{source} lacks the special words {missing}; an ELMo vocabulary needs "
                f"{BOS_TOKEN}, {EOS_TOKEN} and {unk_token}"
            )
        self.max_characters_per_token = max_characters_per_token
        if word_splitter not in WORD_SPLITTERS:
            raise ValueError(f"word_splitter must be one of {list(WORD_SPLITTERS)}, got {word_splitter!r}")
        self.word_splitter = word_splitter
        self.lowercase_words = lowercase_words
        if str(pad_token) not in self.vocab:
            raise ValueError(f"pad_token {pad_token!r} must be a word of the vocabulary")
        super().__init__(
            bos_token=bos_token,
            eos_token=eos_token,
            unk_token=unk_token,
            pad_token=pad_token,
            max_characters_per_token=max_characters_per_token,
            word_splitter=word_splitter,
            lowercase_words=self.lowercase_words,
            **kwargs,
        )

    # --- vocabulary -----------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.words)

    def get_vocab(self) -> dict[str, int]:
        """The word vocabulary and the words `add_tokens` added after it (transformers keeps those apart)."""
        return {**self.vocab, **getattr(self, "_added_tokens_encoder", {})}

    def _add_tokens(self, new_tokens, special_tokens: bool = False) -> int:
        """transformers' `_add_tokens`, refusing a token that is not one word: text is split on whitespace before
        words are looked up, so "new york" or " x" would not be met in text (before: added, and used nowhere, in
        silence)."""
        for token in new_tokens or ():
            word = str(token)
            if word and word.split() != [word]:  # "" is skipped by transformers
                raise ValueError(
                    f"cannot add {word!r}: ElmoTokenizer's words hold no whitespace (text is split on it, and a "
                    "vocabulary holds none), so this token would not be met in text; add its words one by one"
                )
        return super()._add_tokens(new_tokens, special_tokens)

    def _convert_token_to_id(self, token: str) -> int:
        if self.lowercase_words and token not in (BOS_TOKEN, EOS_TOKEN, str(self.unk_token)):
            token = token.lower()
        return self.vocab.get(token, self.vocab[str(self.unk_token)])

    def _convert_id_to_token(self, index: int) -> str:
        if not 0 <= index < len(self.words):  # a negative id would silently read a word from the end
            raise ValueError(f"word id {index} is outside this tokenizer's vocabulary [0, {len(self.words)})")
        return self.words[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    def decode(self, token_ids, skip_special_tokens: bool = False, **kwargs) -> str | list[str]:
        """transformers' `decode`, which also reads what `__call__` returns as `input_ids`: a sentence's character
        ids (words, max_characters_per_token) decode to its words joined by spaces (a padding word to `pad_token`),
        a batch of them to a list of strings. Word ids (`input_word_ids`) decode as any tokenizer's ids."""
        ids = to_py_obj(token_ids)
        if self._are_character_ids_of_a_sentence(ids):
            words = [char_ids_to_word(row) for row in ids]
            if skip_special_tokens:
                return " ".join(w for w in words if w is not None and w not in self.all_special_tokens)
            return " ".join(str(self.pad_token) if w is None else w for w in words)
        if isinstance(ids, list) and any(self._are_character_ids_of_a_sentence(s) and s for s in ids):
            return [self.decode(sentence, skip_special_tokens, **kwargs) for sentence in ids]
        return super().decode(ids, skip_special_tokens=skip_special_tokens, **kwargs)

    def _are_character_ids_of_a_sentence(self, ids) -> bool:
        """Whether `ids` is one sentence's character ids: rows of max_characters_per_token ids, each a word's
        (beginning with begin-of-word) or the padding word (all 0); a sentence's word ids are ints."""
        begin_of_word = self.char_ids("")[0]
        return isinstance(ids, list) and all(
            isinstance(row, list) and len(row) == self.max_characters_per_token and row[0] in (begin_of_word, 0)
            for row in ids
        )

    def tokenize(self, text: str, **kwargs) -> list[str]:
        """ELMo's words are the whitespace-separated pieces of the text."""
        if not isinstance(text, str):  # None: "'NoneType' object has no attribute 'split'"
            raise ValueError(f"tokenize takes one text (a string), got {type(text).__name__}")
        return text.split()

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return text.split()

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' `save_pretrained`, written atomically: a failed save leaves the folder as it was."""
        save = super().save_pretrained
        if kwargs.get("push_to_hub"):  # the Hub repository is named after save_directory
            return save(save_directory, *args, **kwargs)
        return write_into_folder(save_directory, lambda staging: save(staging, *args, **kwargs))

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        if not self.has_word_vocabulary:
            return ()
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(word + "\n" for word in self.words)
        return (path,)

    # --- encoding -------------------------------------------------------------------------------------------

    def char_ids(self, word: str) -> tuple[int, ...]:
        """The character ids of one word: (max_characters_per_token,)."""
        return word_to_char_ids(word, self.max_characters_per_token)

    def _encode_plus(
        self,
        text,
        text_pair=None,
        add_special_tokens: bool = True,
        padding_strategy="do_not_pad",
        truncation_strategy="do_not_truncate",
        max_length: int | None = None,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors=None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        truncation_side: str | None = None,
        **kwargs,
    ) -> BatchEncoding:
        # `add_special_tokens` is accepted and has no effect: ELMo adds <S> and </S> inside the model.
        if text_pair is not None:
            raise ValueError("ElmoTokenizer encodes single sentences; sentence pairs (text_pair) are not supported")
        if return_overflowing_tokens:
            raise ValueError(
                "ElmoTokenizer returns no overflowing tokens (return_overflowing_tokens): the model reads a sentence "
                "whole; split long text into sentences, or cut them with truncation=True, max_length=N"
            )
        if return_offsets_mapping:
            raise ValueError(
                "ElmoTokenizer returns no character offsets (return_offsets_mapping): its words are the text's "
                "whitespace-separated pieces, and word_ids(i) maps each position to its word"
            )
        if return_special_tokens_mask and _called_by_sub_word_tagging_pipeline():
            # It would read each position's id as one vocabulary id (a word's are max_characters_per_token ids).
            raise ValueError(
                "transformers' token-classification pipeline works on sub-word ids, not on ElmoTokenizer's "
                "character ids. For ELMo and TagLM taggers, pass "
                'pipeline_class=hf_ctx.WordTokenClassificationPipeline to pipeline("token-classification", ...)'
            )
        check_length_options(max_length, pad_to_multiple_of)
        side = truncation_side or self.truncation_side
        if side not in ("left", "right"):
            raise ValueError(f"truncation_side must be 'left' or 'right', got {side!r}")
        batched, sentences = self._as_batch(text, is_split_into_words)
        if getattr(truncation_strategy, "value", truncation_strategy) != "do_not_truncate" and max_length is not None:
            if side == "left":
                sentences = [words[max(len(words) - max_length, 0) :] for words in sentences]
            else:
                sentences = [words[:max_length] for words in sentences]
        elif max_length is None and verbose:
            self._warn_about_a_too_long_sentence(max(map(len, sentences), default=0))
        lengths = [len(words) for words in sentences]
        encoded = {"input_ids": [[list(self.char_ids(word)) for word in words] for words in sentences]}
        if self.has_word_vocabulary:
            encoded["input_word_ids"] = [
                [self._convert_token_to_id_with_added_voc(word) for word in words] for words in sentences
            ]
        if return_attention_mask is not False:
            encoded["attention_mask"] = [[1] * n for n in lengths]
        if return_token_type_ids:
            encoded["token_type_ids"] = [[0] * n for n in lengths]
        if return_special_tokens_mask:
            encoded["special_tokens_mask"] = [[0] * n for n in lengths]
        if return_length:
            encoded["length"] = lengths
        padding = getattr(padding_strategy, "value", padding_strategy)
        if padding != "do_not_pad" or return_tensors is not None:
            encoded = self._pad_batch(
                encoded, padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask, return_tensors
            )
        # One token per word: word i is token i, and padding belongs to no word.
        word_ids = [[*range(n), *[None] * (len(row) - n)] for n, row in zip(lengths, encoded["input_ids"])]
        if not batched and return_tensors is None:
            encoded = {key: value[0] for key, value in encoded.items()}
        return WordBatchEncoding(encoded, word_ids=word_ids, tensor_type=return_tensors)

    def _warn_about_a_too_long_sentence(self, words: int) -> None:
        """Once per tokenizer, as transformers' tokenizers warn of a sequence longer than `model_max_length`."""
        key = "sequence-length-is-longer-than-the-specified-maximum"
        if words > self.model_max_length > 0 and not self.deprecation_warnings.get(key):
            logger.warning(
                f"a sentence has {words} words, more than this tokenizer's model_max_length="
                f"{self.model_max_length}, the longest the model reads (its max_sentence_words); pass "
                "truncation=True to cut it"
            )
            self.deprecation_warnings[key] = True

    @staticmethod
    def _as_batch(text, is_split_into_words: bool) -> tuple[bool, list[list[str]]]:
        """(whether `text` is a batch, its sentences as lists of words)."""

        def words_of(sentence, where: str) -> list[str]:
            if is_split_into_words:
                if not isinstance(sentence, (list, tuple)) or not all(isinstance(w, str) for w in sentence):
                    raise ValueError(
                        f"with is_split_into_words=True, {where} must be a list of words (strings), "
                        f"got {type(sentence).__name__}"
                    )
                return list(sentence)
            if not isinstance(sentence, str):
                raise ValueError(
                    f"{where} must be a string (or pass is_split_into_words=True for lists of "
                    f"words), got {type(sentence).__name__}"
                )
            return sentence.split()

        if isinstance(text, str):
            if is_split_into_words:
                raise ValueError("with is_split_into_words=True, pass a list of words (or a list of such lists)")
            return False, [text.split()]
        if not isinstance(text, (list, tuple)):
            raise ValueError(
                f"text must be a string, a list of strings or a list of lists of words, got {type(text).__name__}"
            )
        if is_split_into_words and (not text or isinstance(text[0], str)):
            return False, [words_of(text, "the sentence")]
        return True, [words_of(sentence, f"sentence {i}") for i, sentence in enumerate(text)]

    def pad(
        self,
        encoded_inputs,
        padding=True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
        return_tensors=None,
        verbose: bool = True,
    ) -> BatchEncoding:
        """Pad encoded sentences to the same number of words.

        `encoded_inputs` is a list of examples (dicts, as a `DataCollator` gets them), a dict of batched lists, or
        one example. `input_ids` is padded with all-zero words, `attention_mask` with 0, `input_word_ids` with 0
        and word-level `labels` with -100; other entries are kept as they are. `padding`: `True`/"longest" pads to
        the longest sentence (rounded up to `pad_to_multiple_of`), "max_length" to `max_length`, `False` not at
        all (then tensors need sentences of one length).
        """
        check_length_options(max_length, pad_to_multiple_of)
        if isinstance(encoded_inputs, (list, tuple)):
            if not encoded_inputs:
                raise ValueError("nothing to pad: got an empty list of examples")
            encoded_inputs = {key: [example[key] for example in encoded_inputs] for key in encoded_inputs[0]}
        if "input_ids" not in encoded_inputs:
            raise ValueError(f"pad needs input_ids (character ids); got the keys {sorted(encoded_inputs)}")
        batch = {key: _to_list(value) for key, value in encoded_inputs.items()}
        single = _is_single_sentence(batch["input_ids"])
        if single:
            batch = {key: [value] for key, value in batch.items()}
        padded = self._pad_batch(
            batch, padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask, return_tensors
        )
        if single and return_tensors is None:
            padded = {key: value[0] for key, value in padded.items()}
        return BatchEncoding(padded, tensor_type=return_tensors)

    def _pad_batch(
        self, batch: dict, padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask, return_tensors
    ) -> dict:
        """`pad` on a dict of batched lists; returns a dict of padded lists, numpy arrays or tensors."""
        if (padding_side or self.padding_side) != "right":
            raise ValueError("ELMo inputs are padded on the right (words first); padding_side='left' is not supported")
        lengths = [len(sentence) for sentence in batch["input_ids"]]
        longest = max(lengths, default=0)
        padding = getattr(padding, "value", padding)
        if padding is True or padding == "longest":
            target = longest
        elif padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            target = max_length
        elif padding is False or padding == "do_not_pad":
            if return_tensors is not None and len(set(lengths)) > 1:
                raise ValueError(
                    f"sentences have different numbers of words ({sorted(set(lengths))}); pass "
                    "padding=True to return tensors"
                )
            target = longest
        else:
            raise ValueError(f"padding must be True, False, 'longest', 'max_length' or 'do_not_pad', got {padding!r}")
        if pad_to_multiple_of:
            target = -(-target // pad_to_multiple_of) * pad_to_multiple_of
        if longest > target:
            raise ValueError(f"a sentence has {longest} words, more than max_length={target}; pass truncation=True")
        if return_attention_mask is False:
            batch.pop("attention_mask", None)
        elif "attention_mask" not in batch:
            batch["attention_mask"] = [[1] * n for n in lengths]

        width = self.max_characters_per_token
        padded = {"input_ids": np.zeros((len(lengths), target, width), dtype=np.int64)}
        for i, sentence in enumerate(batch["input_ids"]):
            if any(len(word) != width for word in sentence):
                bad = next(len(word) for word in sentence if len(word) != width)
                raise ValueError(
                    f"sentence {i} has a word of {bad} character ids; this tokenizer uses {width} "
                    "(max_characters_per_token)"
                )
            if sentence:
                padded["input_ids"][i, : len(sentence)] = sentence
        for key, pad_value in {
            "attention_mask": 0,
            "input_word_ids": self.pad_token_id,
            "token_type_ids": self.pad_token_type_id,
            "special_tokens_mask": 1,
            "labels": IGNORE_INDEX,
        }.items():
            if key not in batch or not all(isinstance(row, list) for row in batch[key]):
                continue  # absent, or one label per sentence
            padded[key] = np.full((len(lengths), target), pad_value, dtype=np.int64)
            for i, row in enumerate(batch[key]):
                if len(row) != lengths[i]:
                    raise ValueError(f"sentence {i} has {lengths[i]} words but {len(row)} entries in {key}")
                padded[key][i, : len(row)] = row
        for key, value in batch.items():
            padded.setdefault(key, value)

        kind = getattr(return_tensors, "value", return_tensors)
        if kind not in (None, "pt", "np"):
            raise ValueError(f"return_tensors must be 'pt', 'np' or None, got {return_tensors!r}")
        convert = {None: lambda a: a.tolist(), "np": lambda a: a, "pt": torch.from_numpy}[kind]
        return {key: convert(value) if isinstance(value, np.ndarray) else value for key, value in padded.items()}


def _called_by_sub_word_tagging_pipeline() -> bool:
    """Whether transformers' TokenClassificationPipeline (or a subclass) is encoding the text: it asks for a
    special_tokens_mask, then reads every position as one vocabulary id. Its caller is looked up on the stack
    (the pipeline calls __call__, which calls _encode_plus) because nothing in the call tells it apart."""
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            break
        caller = frame.f_locals.get("self")
        if any(cls.__name__ == "TokenClassificationPipeline" for cls in type(caller).__mro__):
            return True
        frame = frame.f_back
    return False


def _to_list(value):
    """Tensors and arrays (from `datasets` formats) as nested lists. A list of numbers (a word's characters) is
    copied as it is, not number by number: that took 1.4 s of a tiny tagger's 5.5 s of training (7.5x faster)."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple, torch.Tensor, np.ndarray)):
            return [_to_list(v) for v in value]
        return list(value)
    return value


def _is_single_sentence(input_ids: list) -> bool:
    """True for one sentence's character ids (words x characters), False for a batch of them."""
    if not input_ids:
        return True  # one sentence of no words
    first = input_ids[0]
    return bool(first) and isinstance(first[0], int)


__all__ = ["ElmoTokenizer", "WordBatchEncoding", "read_vocabulary_file"]
