"""Raw text into words and sentences the way CoNLL-2003 and the Penn Treebank split text, with character offsets
into the text: the one word splitter of the package (biLM pretraining, `hf-ctx embed`, ELMo's GLUE inputs,
`run_ner.py`'s plain-text input, the word-level pipelines, the experiments).

| text | words |
| --- | --- |
| `Peter flew to Brussels.` | `Peter` `flew` `to` `Brussels` `.` |
| `"It's 3.5%," he said.` | `"` `It` `'s` `3.5` `%` `,` `"` `he` `said` `.` |
| `don't` / `can't` | `do` `n't` / `ca` `n't` |
| `(Reuters) - U.S. stocks` | `(` `Reuters` `)` `-` `U.S.` `stocks` |
| `1,000` `1996-08-22` `6-4` `10:30` `1996/97` | each one word (numbers keep their `.`, `,`, `:`) |
| `Anglo-Dutch` `O'Brien` `S&P` | each one word (hyphens, inner apostrophes and `&` join) |
| `Mr.` `Inc.` `vs.` `J.` | each one word (common abbreviations and single initials keep their full stop) |
| `US$5` `A$ 5` | `US$` `5` / `A$` `5` |
| `+44` `.500` `1. Michael Johnson` | `+44` / `.500` / `1.` `Michael` `Johnson` (a number starting a line keeps its full stop) |
| `Wait...` / `--` | `Wait` `...` / `--` (a run of one punctuation mark is one word) |
| `Zürich` (decomposed) `हिन्दी` `東京都` | each one word (combining marks stay with their letter; runs of letters in scripts without spaces stay whole) |
| `I ❤️ Paris` `👩‍👩‍👧` | `I` `❤️` `Paris` / one word (a symbol is one grapheme, emoji sequences included) |

Splitters by name (`WORD_SPLITTERS`, which an ELMo tokenizer's `word_splitter` records): `"treebank"` (the above, the default) and `"whitespace"` (the text's
space-separated pieces, for text that is already tokenized, such as the 1B Word Benchmark or CoNLL's words).

A sentence ends at a line break, or after ".", "!" or "?" (and any closing quotes or brackets) when the next word
starts with a capital letter, a digit or an opening quote.

    >>> split_words("Peter flew to Brussels.")
    ['Peter', 'flew', 'to', 'Brussels', '.']
    >>> [[w for w, _, _ in s] for s in split_sentences("He left. She stayed!")]
    [['He', 'left', '.'], ['She', 'stayed', '!']]
"""

import regex

from ..tokenization_elmo import WORD_SPLITTERS

# Characters inside a word: letters, combining marks, digits, connectors ("_"), and the invisible joiners that sit
# inside words (zero-width joiner / non-joiner, word joiner, soft hyphen), and the marks written before the letter
# or number they belong to (Arabic number sign).
_WORD_CHARACTER = r"[\p{L}\p{M}\p{N}\p{Pc}\u200c\u200d\u2060\u00ad\p{GCB=Prepend}]"
_CLITIC_SUFFIX = r"(?:[sSdDmM]|re|RE|ve|VE|ll|LL)(?![\p{L}\p{M}\p{N}])"  # 's 'd 'm 're 've 'll, then no letter
_ABBREVIATIONS = (
    "Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Mt|Ft|Gen|Col|Lt|Sgt|Capt|Gov|Sen|Rep|Rev|Inc|Corp|Co|Ltd|Bros|No|vs|etc|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|"
    "Ariz|Calif|Colo|Conn|Fla|Ill|Kan|Mass|Mich|Minn|Neb|Nev|Okla|Ore|Tenn|Tex|Wash|Wis"
)
_LETTER = r"\p{L}\p{M}*"  # a letter with its combining marks: the same in composed and decomposed text
_CAPITAL = r"\p{Lu}\p{M}*"
WORD_PATTERN = regex.compile(
    rf"(?:{_LETTER}\.){{2,}}(?:-{_WORD_CHARACTER}+)*(?!\p{{L}})"  # acronyms: U.S., a.m., e.g., U.S.-led
    r"|(?<=(?m:^)[ \t]*)\p{N}{1,3}\.(?=\s)"  # a numbered list item at the start of a line: 1. 2.
    r"|(?<![\p{L}\p{M}\p{N}.])[+.]\p{N}+(?:[.,]\p{N}+)*"  # numbers with a sign or no leading zero: +44 .500
    rf"|(?:{_ABBREVIATIONS})\.(?=[ \t]*[^\s\p{{L}}\p{{N}}]|[ \t]+\S)"  # Mr. Inc. vs. (not ending a line)
    rf"|{_CAPITAL}\.(?=\s)"  # a single initial: J. Smith
    rf"|(?:{_CAPITAL}){{1,3}}\$(?=\s?\p{{N}})"  # currencies: US$5 -> US$ 5, A$ 5
    rf"|(?:{_LETTER})+(?=[nN]['’][tT](?![\p{{L}}\p{{N}}]))|[nN]['’][tT](?![\p{{L}}\p{{N}}])"  # don't -> do n't
    + rf"|['’]{_CLITIC_SUFFIX}"
    + rf"|{_WORD_CHARACTER}+"  # a word: pieces joined by - & / , an inner apostrophe, or . , : between digits
    + rf"(?:(?:[-&/]|['’](?!{_CLITIC_SUFFIX})|(?<=\p{{N}})[.,:](?=\p{{N}})){_WORD_CHARACTER}+)*"
    + r"|([.\-*=~`'])\1+"  # a run of one of these marks: ... -- '' ``
    + r"|\X",  # any other grapheme on its own: punctuation, symbols, emoji (with their modifiers)
    regex.VERSION1,
)
# The characters that join a grapheme across the pattern's pieces: marks and joiners after a character (emoji skin
# tones included), and marks written before one. Text without them needs no grapheme pass.
_JOINS_A_GRAPHEME = regex.compile(r"[\p{GCB=Extend}\p{GCB=ZWJ}\p{GCB=SpacingMark}\p{GCB=Prepend}]")
SENTENCE_ENDS = {".", "!", "?"}
CLOSING = {'"', "'", ")", "]", "}", "''", "’", "”"}
OPENING = {'"', "'", "(", "[", "``", "`", "‘", "“"}

Span = tuple[str, int, int]


def check_word_splitter(splitter: str) -> str:
    """`splitter` if it names a splitter of `WORD_SPLITTERS`, else a ValueError naming the choices."""
    if splitter not in WORD_SPLITTERS:
        raise ValueError(f"unknown word splitter {splitter!r}; choose one of {list(WORD_SPLITTERS)}")
    return splitter


def word_spans(text: str, splitter: str = "treebank") -> list[Span]:
    """(word, start, end) of each word of `text`; `text[start:end] == word`."""
    if check_word_splitter(splitter) == "whitespace":
        return [(m.group(), m.start(), m.end()) for m in regex.finditer(r"\S+", text)]
    spans = [(m.group(), m.start(), m.end()) for m in WORD_PATTERN.finditer(text)]
    if not text.isascii() and _JOINS_A_GRAPHEME.search(text):
        spans = _whole_graphemes(text, spans)
    return [span for span in spans if not span[0].isspace()]


def _whole_graphemes(text: str, spans: list[Span]) -> list[Span]:
    """`spans` (which tile `text`) with each span that starts inside a grapheme joined to the one before it. The
    pattern's letter runs stop before characters that still belong to their grapheme: an emoji skin tone after a
    letter (`a🏽`)."""
    boundaries = {m.end() for m in regex.finditer(r"\X", text)}
    whole = spans[:1]
    for word, start, end in spans[1:]:
        if start in boundaries:
            whole.append((word, start, end))
        else:
            whole[-1] = (whole[-1][0] + word, whole[-1][1], end)
    return whole


def split_words(text: str, splitter: str = "treebank") -> list[str]:
    """`text` as a list of words and punctuation marks (see the module docstring)."""
    return [word for word, _, _ in word_spans(text, splitter)]


def _starts_sentence(word: str) -> bool:
    return word[0].isupper() or word[0].isdigit() or word in OPENING or word[0] in OPENING


def split_sentences(text: str, splitter: str = "treebank") -> list[list[Span]]:
    """The sentences of `text`, each a list of (word, start, end) with offsets into `text`; empty lines give no
    sentence. A sentence ends after ".", "!" or "?" (with the "whitespace" splitter, a word ending in one) and the
    closing quotes or brackets written right after it, when the next word starts with a capital letter, a digit or
    an opening quote."""
    sentences = []
    for line in regex.finditer(r"[^\n]+", text):
        spans = [
            (word, start + line.start(), end + line.start()) for word, start, end in word_spans(line.group(), splitter)
        ]
        begin, i = 0, 0
        while i < len(spans):
            word = spans[i][0]
            i += 1
            if (word.rstrip("".join(CLOSING))[-1:] if splitter == "whitespace" else word) not in SENTENCE_ENDS:
                continue
            while i < len(spans) and spans[i][0] in CLOSING and spans[i][1] == spans[i - 1][2]:
                i += 1  # a quote or bracket written against the full stop closes this sentence
            if i < len(spans) and _starts_sentence(spans[i][0]):
                sentences.append(spans[begin:i])
                begin = i
        if begin < len(spans):
            sentences.append(spans[begin:])
    return sentences


def sentence_words(text: str, splitter: str = "treebank") -> list[list[str]]:
    """The sentences of `text` as lists of words (`split_sentences` without the offsets)."""
    return [[word for word, _, _ in sentence] for sentence in split_sentences(text, splitter)]
