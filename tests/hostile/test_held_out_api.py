"""Held-out cases, API misuse: labels of the wrong shape, dtype or range, ids outside the vocabulary, a list where a
tensor goes, a tokenizer of another model, saving to a file, loading a file, both input_ids and inputs_embeds,
layers that do not fit together. Each must be one error naming the argument and the way on, raised where the
input enters, never an IndexError or a shape error deep inside torch. Each case is a function named after what it
tries."""

import pytest
import torch
from tiny_checkpoints import (
    bert_crf_tagger,
    bert_pretraining,
    bert_sequence_classifier,
    bert_token_classifier,
)
from transformers import AutoModelForTokenClassification, AutoTokenizer

from hf_ctx import CtxBertConfig, CtxBertForQuestionAnswering, ElmoTokenizer, ScalarMix

IDS = torch.tensor([[2, 10, 11, 3]])


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(1, 3, dtype=torch.long), torch.zeros(4, dtype=torch.long)[:2], torch.zeros(4, dtype=torch.long)],
)
def test_token_labels_of_the_wrong_shape_name_both_shapes(bert, labels):
    """Before: torch's "Expected input batch_size (4) to match target batch_size (3)" from inside cross_entropy;
    and labels of another shape with as many ids, (4,) here, were reshaped onto the tokens in silence."""
    model, _ = bert
    with pytest.raises(ValueError, match=r"labels has shape .*, expected \(1, 4\): one class id per token"):
        model(input_ids=IDS, labels=labels)


@pytest.mark.parametrize("shape", [(1, 3), (2, 2), (4,)])
def test_sparse_mlm_labels_of_the_wrong_shape_are_named(tmp_path, shape):
    """Before: the sparse head indexed the flattened states with the flattened labels' positions, so every target
    fell on another token (or past the batch), and a loss came back."""
    model, _ = bert_pretraining(tmp_path)
    model.config.sparse_prediction = True
    with pytest.raises(ValueError, match=r"labels has shape .*, expected \(1, 4\): one class id per token"):
        model(input_ids=IDS, labels=torch.full(shape, 5))
    assert model(input_ids=IDS, labels=torch.full((1, 4), 5)).loss.isfinite()


@pytest.mark.parametrize("build", [bert_token_classifier, bert_sequence_classifier], ids=["tokens", "sentences"])
def test_float_labels_of_a_classifier_are_named(build, tmp_path):
    """Before: torch's "expected target dtype to be Long or Byte, but got Float"."""
    model, _ = build(tmp_path)
    labels = torch.zeros(1, 4) if build is bert_token_classifier else torch.tensor([0.5])
    model.config.problem_type = "single_label_classification" if build is bert_sequence_classifier else None
    with pytest.raises(ValueError, match="labels must be a tensor of integer class ids"):
        model(input_ids=IDS, labels=labels)


def test_float_answer_positions_are_named_as_start_positions(tmp_path):
    from tiny_checkpoints import bert_tokenizer

    tokenizer = bert_tokenizer(tmp_path)
    model = CtxBertForQuestionAnswering(CtxBertConfig.from_preset("tiny", vocab_size=len(tokenizer)))
    with pytest.raises(ValueError, match="start_positions must be a tensor of integer class ids"):
        model(input_ids=IDS, start_positions=torch.tensor([1.0]), end_positions=torch.tensor([2]))


@pytest.mark.parametrize("label", [3, 7, -2])
def test_a_label_outside_the_classes_is_named_with_the_range(bert, label):
    model, _ = bert
    with pytest.raises(ValueError, match=rf"label {label} is outside \[0, num_labels=3\)"):
        model(input_ids=IDS, labels=torch.full_like(IDS, label))


def test_masked_lm_labels_of_the_wrong_shape_are_named(tmp_path):
    model, _ = bert_pretraining(tmp_path)
    with pytest.raises(ValueError, match="labels has shape"):
        model(input_ids=IDS, labels=torch.zeros(1, 3, dtype=torch.long), next_sentence_label=torch.tensor([0]))


@pytest.mark.parametrize("bad_id", [60, 10**6, -1])
def test_input_ids_outside_the_vocabulary_are_one_line_not_an_index_error(bert, bad_id):
    model, _ = bert
    with pytest.raises(ValueError, match=rf"input_ids contains {bad_id}, outside \[0, 60\)"):
        model(input_ids=torch.tensor([[2, bad_id, 3]]))


def test_input_ids_as_a_list_are_a_type_error_naming_them(bert, elmo):
    """Before: AttributeError: 'list' object has no attribute 'dim'."""
    model, _ = bert
    with pytest.raises(TypeError, match="input_ids must be a torch.Tensor"):
        model(input_ids=[[2, 10, 3]])
    with pytest.raises(TypeError, match="attention_mask must be a torch.Tensor"):
        model(input_ids=IDS, attention_mask=[[1, 1, 1, 1]])
    model, _ = elmo
    with pytest.raises(TypeError, match="input_ids must be a torch.Tensor"):
        model(input_ids=[[[259, 100, 260]]])


def test_both_input_ids_and_inputs_embeds_or_neither_are_named(bert):
    model, _ = bert
    embeds = torch.zeros(1, 4, model.config.hidden_size)
    for arguments in [{"input_ids": IDS, "inputs_embeds": embeds}, {}]:
        with pytest.raises(ValueError, match="pass exactly one of input_ids or inputs_embeds"):
            model(**arguments)


@pytest.mark.parametrize(
    "embeds, match",
    [
        (torch.zeros(1, 4, dtype=torch.long), r"inputs_embeds must have shape \(batch, tokens, 128\)"),
        (torch.zeros(1, 4, 128, dtype=torch.long), "inputs_embeds must be floating-point vectors"),
    ],
)
def test_inputs_embeds_of_the_wrong_shape_or_dtype_are_named(bert, embeds, match):
    """Before: integer inputs_embeds were added to the position embeddings as if they were vectors."""
    model, _ = bert
    with pytest.raises(ValueError, match=match):
        model(inputs_embeds=embeds)


def test_ids_of_another_models_tokenizer_are_named_by_shape(bert, elmo):
    """BERT's token ids given to ELMo, and ELMo's character ids given to BERT."""
    (bert_model, bert_tok), (elmo_model, elmo_tok) = bert, elmo
    with pytest.raises(ValueError, match=r"input_ids must be character ids of shape \(batch, words, 50\)"):
        elmo_model(**bert_tok(["red cat"], return_tensors="pt"))
    chars = elmo_tok([["red", "cat"]], is_split_into_words=True, return_tensors="pt")
    with pytest.raises(ValueError, match=r"input_ids must have shape \(batch, tokens\)"):
        bert_model(input_ids=chars["input_ids"])


def test_a_model_saved_to_a_file_path_is_refused_and_the_file_kept(bert, tmp_path):
    model, tokenizer = bert
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    with pytest.raises((ValueError, OSError), match="notes.txt"):
        model.save_pretrained(target)
    with pytest.raises((ValueError, OSError), match="notes.txt"):
        ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "cat"]).save_pretrained(target)
    assert target.read_text() == "keep me"


def test_from_pretrained_on_a_file_names_the_file(bert, tmp_path):
    model, _ = bert
    model.save_pretrained(tmp_path / "model")
    weights = tmp_path / "model" / "model.safetensors"
    with pytest.raises((OSError, ValueError), match="model.safetensors"):
        AutoModelForTokenClassification.from_pretrained(weights)
    with pytest.raises((OSError, ValueError), match="model.safetensors"):
        AutoTokenizer.from_pretrained(weights)


def test_a_crf_tagger_called_without_word_starts_names_them_and_the_pipeline(tmp_path):
    model, _ = bert_crf_tagger(tmp_path)
    with pytest.raises(ValueError, match="pass word_mask.*SubwordTokenClassificationPipeline"):
        model(input_ids=IDS)


def test_scalar_mix_of_layers_of_different_shapes_names_the_shapes():
    """Before: torch's "The size of tensor a (3) must match the size of tensor b (4)" inside the sum."""
    with pytest.raises(ValueError, match=r"ScalarMix mixes layers of one shape, got \[\(2, 3\), \(2, 4\)\]"):
        ScalarMix(2)([torch.zeros(2, 3), torch.zeros(2, 4)])


def test_scalar_mix_mask_of_another_shape_is_named():
    with pytest.raises(ValueError, match=r"mask has shape \(2, 5\), expected \(2, 3\)"):
        ScalarMix(2, do_layer_norm=True)([torch.zeros(2, 3, 4)] * 2, torch.ones(2, 5))


@pytest.mark.parametrize("layers", [0, -1, 1.5])
def test_scalar_mix_of_no_layers_is_refused_when_built(layers):
    """Before: ScalarMix(0) was built, and softmax over no weights mixed nothing."""
    with pytest.raises(ValueError, match="ScalarMix needs num_layers of at least 1"):
        ScalarMix(layers)


def test_elmo_labels_of_the_wrong_shape_name_the_words(elmo):
    model, tokenizer = elmo
    inputs = tokenizer([["red", "cat", "runs"]], is_split_into_words=True, return_tensors="pt")
    with pytest.raises(ValueError, match=r"labels has shape \(1, 2\), expected \(batch, words\) = \(1, 3\)"):
        model(**inputs, labels=torch.zeros(1, 2, dtype=torch.long))


@pytest.mark.parametrize("bad_id", [-1, 10**6])
def test_elmo_tokenizer_decoding_an_id_outside_its_vocabulary_names_it(bad_id):
    """Before: -1 silently decoded as the last word, 10**6 was an IndexError inside the tokenizer."""
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "red", "cat"])
    assert tokenizer.convert_ids_to_tokens([3, 4]) == ["red", "cat"]
    with pytest.raises(ValueError, match=rf"word id {bad_id} is outside this tokenizer's vocabulary \[0, 5\)"):
        tokenizer.convert_ids_to_tokens([3, bad_id])
