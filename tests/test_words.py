"""hf_ctx.data.words: raw text into CoNLL/PTB-style words and sentences with offsets into the text."""

import pytest

from hf_ctx.data.words import split_sentences, split_words, word_spans


@pytest.mark.parametrize(
    "text, words",
    [
        ("Peter flew to Brussels.", ["Peter", "flew", "to", "Brussels", "."]),
        ("It's 3.5 stars, isn't it?", ["It", "'s", "3.5", "stars", ",", "is", "n't", "it", "?"]),
        ("(1,000 people) in the U.S.", ["(", "1,000", "people", ")", "in", "the", "U.S."]),
        ('He said "no"', ["He", "said", '"', "no", '"']),
        ("", []),
    ],
)
def test_words_are_split_as_conll_data_is(text, words):
    assert split_words(text) == words
    assert [text[start:end] for _, start, end in word_spans(text)] == words


def test_sentences_end_at_stops_before_a_capital_and_at_line_breaks():
    text = 'Mr. Smith flew to Brussels. He said "no." Then 3 left!\nno stop here\n\nE.g. this'
    sentences = split_sentences(text)
    assert [[w for w, _, _ in s] for s in sentences] == [
        ["Mr", ".", "Smith", "flew", "to", "Brussels", "."],
        ["He", "said", '"', "no", ".", '"'],
        ["Then", "3", "left", "!"],
        ["no", "stop", "here"],
        ["E.g.", "this"],
    ]
    assert all(text[start:end] == word for s in sentences for word, start, end in s)
