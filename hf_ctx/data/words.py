"""Raw text into words and sentences the way CoNLL and Penn Treebank data are split, with character offsets into
the text: the one splitter of the package (ELMo's GLUE inputs, `run_ner.py`'s plain-text input, the word-level
pipelines).

Punctuation comes off words ("Brussels." -> "Brussels", "."), numbers stay whole ("3.5", "1,000"), acronyms keep
their dots ("U.S."), and English clitics split as the treebank splits them ("it's" -> "it", "'s"; "don't" -> "do",
"n't"). A sentence ends at a line break or after ".", "!" or "?" (and any closing quotes or brackets) when the next
word starts with a capital letter, a digit or an opening quote, unless the word before the full stop is a common
abbreviation ("Mr.", "Dr.", "e.g.").

    >>> split_words("Peter flew to Brussels.")
    ['Peter', 'flew', 'to', 'Brussels', '.']
    >>> [[w for w, _, _ in s] for s in split_sentences("He left. She stayed!")]
    [['He', 'left', '.'], ['She', 'stayed', '!']]
"""

import re

WORD_PATTERN = re.compile(
    r"(?:[A-Za-z]\.){2,}"  # acronyms: U.S., e.g.
    r"|\w+(?=n't\b)|n't\b"  # don't -> do n't
    r"|'\w+"  # clitics: 's, 're, 'll
    r"|\w+(?:[.,]\w+)*"  # words and numbers: 3.5, 1,000
    r"|[^\w\s]"  # any other character on its own
)
SENTENCE_ENDS = {".", "!", "?"}
CLOSING = {'"', "'", ")", "]", "}", "''"}
OPENING = {'"', "'", "(", "[", "``", "`"}
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "no", "fig", "inc", "ltd", "co"}

Span = tuple[str, int, int]


def word_spans(text: str) -> list[Span]:
    """(word, start, end) of each word of `text`; `text[start:end] == word`."""
    return [(m.group(), m.start(), m.end()) for m in WORD_PATTERN.finditer(text)]


def split_words(text: str) -> list[str]:
    """`text` as a list of words and punctuation marks."""
    return WORD_PATTERN.findall(text)


def _starts_sentence(word: str) -> bool:
    return word[0].isupper() or word[0].isdigit() or word in OPENING


def split_sentences(text: str) -> list[list[Span]]:
    """The sentences of `text`, each a list of (word, start, end) with offsets into `text`; empty lines give no
    sentence."""
    sentences = []
    for line in re.finditer(r"[^\n]+", text):
        spans = [(word, start + line.start(), end + line.start()) for word, start, end in word_spans(line.group())]
        current = []
        for i, span in enumerate(spans):
            current.append(span)
            word = span[0]
            if word in CLOSING and len(current) > 1 and current[-2][0] in SENTENCE_ENDS:
                word = current[-2][0]  # a closing quote after the full stop belongs to the sentence
            elif word not in SENTENCE_ENDS:
                continue
            following = spans[i + 1][0] if i + 1 < len(spans) else None
            if following is None or following in CLOSING:
                continue
            before = current[-2][0].lower() if len(current) > 1 else ""
            if _starts_sentence(following) and not (span[0] == "." and before in ABBREVIATIONS):
                sentences.append(current)
                current = []
        if current:
            sentences.append(current)
    return sentences
