"""Held-out cases, pipelines at their edges: texts no issue named (empty, blank, odd unicode, control characters,
one huge word, a text past the window), inputs of the wrong type, batches larger than the input, every aggregation
strategy, top_k of 0 and of more than there is. Each must give a correct result or one error naming the argument.
Each case is a function named after what it tries."""

import numpy as np
import pytest
import torch
from tiny_checkpoints import bert_crf_tagger, bert_tokenizer, elmo_bilm, elmo_token_classifier, taglm
from transformers import pipeline

import hf_ctx
from hf_ctx import CtxBertConfig, CtxBertForQuestionAnswering, QuestionAnsweringPipeline

ODD_TEXTS = {
    "combining mark": "cafe\u0301 red cat",
    "emoji": "red 🐱 cat 👍🏽",
    "right to left": "red \u05e9\u05dc\u05d5\u05dd cat",
    "zero width": "red\u200bcat \u200d dog",
    "control characters": "red\x00cat\x07 dog",
}


def _saved(root, build):
    model, tokenizer = build(root)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root / "model"


@pytest.fixture(scope="module")
def taggers(tmp_path_factory):
    """The word-level taggers (ELMo, TagLM) and BERT's CRF tagger over sub-words, as pipelines."""
    word = hf_ctx.WordTokenClassificationPipeline
    return {
        "elmo": pipeline(
            "token-classification",
            model=str(_saved(tmp_path_factory.mktemp("elmo"), elmo_token_classifier)),
            pipeline_class=word,
        ),
        "taglm": pipeline(
            "token-classification", model=str(_saved(tmp_path_factory.mktemp("taglm"), taglm)), pipeline_class=word
        ),
        "bert_crf": pipeline(
            "token-classification",
            model=str(_saved(tmp_path_factory.mktemp("crf"), bert_crf_tagger)),
            pipeline_class=hf_ctx.SubwordTokenClassificationPipeline,
        ),
    }


@pytest.fixture(scope="module")
def extractor(tmp_path_factory):
    folder = _saved(tmp_path_factory.mktemp("bilm"), elmo_bilm)
    return pipeline("feature-extraction", model=str(folder), pipeline_class=hf_ctx.WordFeatureExtractionPipeline)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """A question-answering pipeline over a tiny BERT whose window (32 positions) is shorter than the default
    stride of 128 tokens."""
    root = tmp_path_factory.mktemp("qa")
    tokenizer = bert_tokenizer(root)
    config = CtxBertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32)
    CtxBertForQuestionAnswering(config).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return QuestionAnsweringPipeline.from_pretrained(root / "model")


@pytest.mark.parametrize("name", ["elmo", "taglm", "bert_crf"])
@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_an_empty_or_blank_text_is_tagged_as_no_entity(taggers, name, text):
    assert taggers[name](text) == []


@pytest.mark.parametrize("name", ["elmo", "taglm", "bert_crf"])
def test_a_list_with_an_empty_item_gives_an_empty_result_in_its_place(taggers, name):
    tagger = taggers[name]
    results = tagger(["red cat runs", "", "blue dog"])
    assert len(results) == 3 and results[1] == []
    assert results[0] == tagger("red cat runs") and results[2] == tagger("blue dog")


@pytest.mark.parametrize("case", sorted(ODD_TEXTS))
def test_odd_unicode_and_control_characters_keep_the_offsets_pointing_at_the_words(taggers, case):
    """Every word an entity names is the text between its offsets, whatever the characters around it."""
    text = ODD_TEXTS[case]
    for name, tagger in taggers.items():
        for entity in tagger(text, aggregation_strategy="none" if name != "bert_crf" else "simple"):
            assert text[entity["start"] : entity["end"]] == entity["word"], (name, entity)


def test_a_bert_crf_entity_of_several_sub_words_names_the_words_as_the_text_has_them(tmp_path):
    """The entity's word is the text between its offsets, not the tokens decoded ("cafe" for "café" under the
    lower-casing, accent-stripping WordPiece tokenizer; control characters dropped). The tagger is made to tag
    every word as one entity (B, then I), so that the entity spans several sub-words whatever the random weights."""
    model, tokenizer = bert_crf_tagger(tmp_path)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 5.0, 10.0]))  # O, B-ANIMAL, I-ANIMAL
    tagger = hf_ctx.SubwordTokenClassificationPipeline(model=model.eval(), tokenizer=tokenizer)
    for text in ["Café red cat", "red\x00cat\x07 dog"]:
        (entity,) = tagger(text, aggregation_strategy="simple")
        assert entity["word"] == text[entity["start"] : entity["end"]] == text.rstrip(), entity


def test_one_very_long_word_is_one_word_of_the_output(taggers, extractor):
    word = "a" * 5000
    (vector,) = extractor(f"{word}")
    assert vector["word"] == word and (vector["start"], vector["end"]) == (0, 5000)
    entities = taggers["elmo"](f"red {word} cat", aggregation_strategy="none", ignore_labels=[])
    assert [e["word"] for e in entities] == ["red", word, "cat"]


@pytest.mark.parametrize("name", ["elmo", "taglm", "bert_crf"])
@pytest.mark.parametrize("bad", [None, 5, 1.5, b"red cat", {"text": "red"}])
def test_an_input_that_is_no_text_is_one_type_error(taggers, name, bad):
    with pytest.raises(TypeError, match="the pipeline's input must be a text"):
        taggers[name](bad)


@pytest.mark.parametrize("name", ["elmo", "taglm", "bert_crf"])
def test_a_list_holding_a_number_is_one_error_naming_the_input(taggers, name):
    with pytest.raises(ValueError, match="must be an untokenized string"):
        taggers[name](["red cat", 3])


def test_a_batch_size_larger_than_the_inputs_equals_the_single_calls(taggers, extractor):
    texts = ["red cat runs", "blue dog"]
    for tagger in taggers.values():
        for result, alone in zip(tagger(texts, batch_size=16), [tagger(text) for text in texts]):
            assert [{**e, "score": 0} for e in result] == [{**e, "score": 0} for e in alone]
            np.testing.assert_allclose([e["score"] for e in result], [e["score"] for e in alone], atol=1e-5)
    batched = extractor(texts, batch_size=16)
    for text, result in zip(texts, batched):
        alone = extractor(text)
        assert [v["word"] for v in result] == [v["word"] for v in alone]
        np.testing.assert_allclose([v["vector"] for v in result], [v["vector"] for v in alone], atol=1e-5)


@pytest.mark.parametrize("strategy", ["none", "simple", "first", "average", "max"])
def test_every_aggregation_strategy_of_the_word_taggers_gives_whole_words(taggers, strategy):
    """Every position is a whole word, so "first", "average" and "max" group as "simple" does."""
    text = "red cat runs fast"
    grouped = taggers["elmo"](text, aggregation_strategy=strategy, ignore_labels=[])
    words = text.split()
    if strategy == "none":
        assert [e["word"] for e in grouped] == words
    else:
        assert grouped == taggers["elmo"](text, aggregation_strategy="simple", ignore_labels=[])
        assert " ".join(e["word"] for e in grouped) == text


@pytest.mark.parametrize("strategy", ["NONE", "Simple", "unknown", 3])
def test_an_aggregation_strategy_in_other_case_is_read_and_an_unknown_one_named(taggers, strategy):
    if isinstance(strategy, str) and strategy.lower() in ("none", "simple"):
        assert taggers["bert_crf"]("red cat", aggregation_strategy=strategy) is not None
    else:
        with pytest.raises(ValueError, match="aggregation_strategy must be one of"):
            taggers["bert_crf"]("red cat", aggregation_strategy=strategy)


def test_a_sentence_longer_than_the_bert_window_is_tagged_to_its_end_or_says_where_it_stops(taggers, caplog):
    text = "red cat runs " * 200  # 600 words: about 20 windows of 32 positions
    words = taggers["bert_crf"](text, aggregation_strategy="first", ignore_labels=[])
    assert " ".join(entity["word"] for entity in words) == text.rstrip()
    taggers["bert_crf"](text, aggregation_strategy="none", ignore_labels=[])  # transformers' windows need grouping
    assert "the rest is not tagged" in caplog.text


def test_a_word_pipeline_over_bert_is_refused_naming_the_subword_pipeline(tmp_path):
    """Before: WordTokenClassificationPipeline over BERT's WordPiece tokenizer read one position per word from
    positions that are [CLS] and sub-words, so its tags were silently shifted, and a long sentence ended in a
    message that told to truncate the tokenizer's input, which a pipeline's user cannot do."""
    folder = _saved(tmp_path, bert_crf_tagger)
    for task, cls in [
        ("token-classification", hf_ctx.WordTokenClassificationPipeline),
        ("feature-extraction", hf_ctx.WordFeatureExtractionPipeline),
    ]:
        with pytest.raises(ValueError, match="word-level tokenizer.*SubwordTokenClassificationPipeline"):
            pipeline(task, model=str(folder), pipeline_class=cls)


@pytest.mark.parametrize("top_k", [0, -1, 1.5, None, True])
def test_question_answering_top_k_that_is_no_positive_count_is_named(reader, top_k):
    """Before: top_k=0 gave [], top_k=-1 the n best but the last, top_k=None an error about --doc_stride."""
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        reader(question="what runs", context="red cat runs fast", top_k=top_k)


def test_question_answering_top_k_beyond_the_spans_gives_them_all_best_first(reader):
    answers = reader(question="what runs", context="red cat runs fast", top_k=10**6)
    scores = [answer["score"] for answer in answers]
    assert 1 < len(answers) < 10**6 and scores == sorted(scores, reverse=True)


def test_question_answering_over_a_model_with_a_short_window_reads_long_contexts(reader):
    """Before: the default doc_stride (128) was kept for a model of 32 positions, so every call was refused
    (its windows could not be longer than their overlap); now the overlap is a third of the window."""
    context = "blue dog sleeps . " * 30 + "red cat runs fast ."
    answer = reader(question="what runs", context=context)
    assert context[answer["start"] : answer["end"]] == answer["answer"] and answer["answer"]


@pytest.mark.parametrize(
    "question, context, match",
    [
        (None, "red cat", "question must be a text or a list of texts"),
        ([], [], "question is an empty list"),
        ("", "red cat", "question 0 is empty"),
        ("what", "  ", "context 0 is empty"),
        (["what", "who"], ["red cat"], "2 questions but 1 contexts"),
        ("what", "red \ud800 cat", "context 0 holds half of a UTF-16 surrogate pair"),
        (["what", "who\udfff"], "red cat", "question 1 holds half of a UTF-16 surrogate pair"),
    ],
)
def test_question_answering_inputs_that_are_no_texts_are_named(reader, question, context, match):
    with pytest.raises((TypeError, ValueError), match=match):
        reader(question=question, context=context)


@pytest.mark.parametrize("argument", ["max_seq_length", "batch_size", "n_best_size", "max_answer_length"])
def test_question_answering_pipeline_sizes_of_zero_are_named(reader, argument):
    with pytest.raises(ValueError, match=f"{argument} must be a positive integer, got 0"):
        QuestionAnsweringPipeline(reader.model, reader.tokenizer, **{argument: 0})


def test_question_answering_takes_the_call_forms_of_transformers_4(reader):
    """A dict, a list of dicts and two positional texts answer as question= and context= do; transformers 4's
    per-call max_answer_len, max_seq_len and doc_stride are taken (before: TypeError for each)."""
    question, context = "what runs", "red cat runs fast . blue dog sleeps"
    expected = reader(question=question, context=context)
    assert reader({"question": question, "context": context}) == expected
    assert reader(question, context) == expected
    assert reader([{"question": question, "context": context}] * 2) == [expected] * 2
    short = reader(question=question, context=context, max_answer_len=1, top_k=50)
    assert short and all(len(answer["answer"].split()) <= 1 for answer in short)
    long = reader(question=question, context=context, top_k=50)
    assert any(len(answer["answer"].split()) > 1 for answer in long)
    windowed = reader(question=question, context=context * 3, max_seq_len=16, doc_stride=2)
    assert windowed["answer"] == (context * 3)[windowed["start"] : windowed["end"]]
    # a window longer than the model's positions (32) is the model's
    assert reader(question=question, context=context, max_seq_len=10**6) == expected


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (({"question": "what runs"},), {}, "input 0 has no 'context'"),
        (([{"question": "what", "context": "red cat"}, "red cat"],), {}, "must be a .* dict or a list of them"),
        (({"question": "what", "context": "red cat"},), {"question": "what"}, "give the question and context once"),
        (("what", "red", "cat"), {}, "give one input"),
        ((), {"question": "what", "context": "red cat", "max_answer_len": 0}, "max_answer_len must be a positive"),
        ((), {"question": "what", "context": "red cat", "doc_stride": -1}, "doc_stride must be"),
    ],
)
def test_question_answering_call_forms_that_do_not_fit_are_named(reader, args, kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        reader(*args, **kwargs)
