"""ELMo's character ids: how a word becomes `max_characters_per_token` (50) ids, as bilm-tf and AllenNLP encode it.

A word is begin-of-word, its UTF-8 bytes (cut to `max_characters - 2` bytes, possibly inside a character), then
end-of-word, then padding characters up to the width. Every id is shifted by one, so that 0 means "no word" (the
padding words of a batch). The sentence boundaries `<S>` and `</S>` have encodings of their own, which the model
adds around each sentence.

The tokenizer (`tokenization_elmo`) and the model (`modeling_elmo`) both import this module, so it travels
with either one's remote code; it imports only the standard library.
"""

from functools import lru_cache

# Character ids before the +1 shift (bilm-tf's UnicodeCharsVocabulary): 0-255 are UTF-8 bytes.
BEGIN_OF_SENTENCE = 256
END_OF_SENTENCE = 257
BEGIN_OF_WORD = 258
END_OF_WORD = 259
PADDING_CHARACTER = 260
# After the shift: ids 1-256 are bytes, 257-261 the five marks above, and 0 the padding word.
N_CHARACTERS = PADDING_CHARACTER + 2
PADDING_CHARACTER_ID = PADDING_CHARACTER + 1

# The longest sentence, in words, that ELMo's tokenizer (`model_max_length`: what `truncation=True` keeps) and
# model (`ElmoConfig.max_sentence_words`) accept by default: a 100,000-word "sentence" (a file without line
# breaks) would need gigabytes and run for many minutes. Both can be raised.
MAX_SENTENCE_WORDS = 1024

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _marked(character_ids: list[int], max_characters: int) -> tuple[int, ...]:
    """Begin-of-word, `character_ids`, end-of-word, padding to `max_characters`, all shifted by one."""
    ids = [BEGIN_OF_WORD, *character_ids, END_OF_WORD]
    ids += [PADDING_CHARACTER] * (max_characters - len(ids))
    return tuple(i + 1 for i in ids)


def sentence_boundary_char_ids(max_characters: int = 50) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The character ids of `<S>` and `</S>`: ((max_characters,), (max_characters,))."""
    return _marked([BEGIN_OF_SENTENCE], max_characters), _marked([END_OF_SENTENCE], max_characters)


@lru_cache(maxsize=2**17)
def word_to_char_ids(word: str, max_characters: int = 50) -> tuple[int, ...]:
    """ELMo's `max_characters` character ids of one word (bytes beyond `max_characters - 2` are dropped)."""
    if word == BOS_TOKEN:
        return sentence_boundary_char_ids(max_characters)[0]
    if word == EOS_TOKEN:
        return sentence_boundary_char_ids(max_characters)[1]
    # "ignore" drops what UTF-8 cannot encode (lone surrogates), as the original does.
    return _marked(list(word.encode("utf-8", "ignore")[: max_characters - 2]), max_characters)


def char_ids_to_word(char_ids: list[int]) -> str | None:
    """The word that `word_to_char_ids` encoded as `char_ids` (`<S>` and `</S>` too), or None for the padding word
    (all 0). A word cut inside a character (past `max_characters - 2` bytes) ends in U+FFFD. Ids that no word
    encodes to (a sentence's word ids, say) are a ValueError."""
    if not any(char_ids):
        return None
    shifted = [i - 1 for i in char_ids]
    end = shifted.index(END_OF_WORD) if END_OF_WORD in shifted else None
    content = shifted[1:end] if end is not None else None
    if (
        shifted[0] != BEGIN_OF_WORD
        or content is None
        or any(i != PADDING_CHARACTER for i in shifted[end + 1 :])
        or not (content in ([BEGIN_OF_SENTENCE], [END_OF_SENTENCE]) or all(0 <= i < 256 for i in content))
    ):
        raise ValueError(
            f"not the character ids of a word: {BEGIN_OF_WORD + 1}, bytes + 1, {END_OF_WORD + 1}, then "
            f"{PADDING_CHARACTER_ID}s, got {list(char_ids)[:8]}..."
        )
    if content == [BEGIN_OF_SENTENCE]:
        return BOS_TOKEN
    if content == [END_OF_SENTENCE]:
        return EOS_TOKEN
    return bytes(content).decode("utf-8", "replace")
