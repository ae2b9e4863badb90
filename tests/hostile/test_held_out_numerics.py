"""Held-out cases, numerics: NaN and infinity in the inputs, half precision on a CPU, a learning rate of 0, labels
that are all ignored, one token, one word, a mask of zeros. Each must give a finite, correct result or one error
naming the problem, never a silent NaN or a run that trains nothing. Each case is a function named after what it
tries."""

import pytest
import torch
from tiny_checkpoints import bert_crf_tagger, bert_token_classifier, elmo_token_classifier, taglm

from hf_ctx import ConditionalRandomField, ScalarMix


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_or_infinity_in_inputs_embeds_is_one_error_not_nan_logits(bert, value):
    """Before: every logit came out NaN, silently."""
    model, _ = bert
    embeds = torch.zeros(1, 4, model.config.hidden_size)
    embeds[0, 2, 5] = value
    with pytest.raises(ValueError, match="inputs_embeds holds NaN or infinite values"):
        model(inputs_embeds=embeds)


def test_finite_inputs_embeds_give_the_logits_of_the_ids_they_embed(bert):
    model, _ = bert
    ids = torch.tensor([[2, 10, 11, 3]])
    embeds = model.bert.embeddings.word_embeddings(ids)
    torch.testing.assert_close(model(inputs_embeds=embeds).logits, model(input_ids=ids).logits)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_on_the_cpu_gives_finite_logits_close_to_float32(bert, dtype):
    model, _ = bert
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    expected = model(input_ids=ids).logits
    half = model.to(dtype)
    try:
        logits = half(input_ids=ids).logits
    finally:
        model.float()
    assert logits.dtype == dtype and torch.isfinite(logits).all()
    torch.testing.assert_close(logits.float(), expected, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("build", [bert_token_classifier, elmo_token_classifier], ids=["bert", "elmo"])
def test_labels_all_ignored_give_a_zero_loss_and_zero_gradients_not_nan(build, tmp_path):
    model, tokenizer = build(tmp_path)
    if build is bert_token_classifier:
        inputs = {"input_ids": torch.tensor([[2, 10, 11, 3]])}
        labels = torch.full((1, 4), -100)
    else:
        inputs = dict(tokenizer([["red", "cat", "runs"]], is_split_into_words=True, return_tensors="pt"))
        labels = torch.full((1, 3), -100)
    loss = model(**inputs, labels=labels).loss
    loss.backward()
    assert loss.item() == 0.0
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_a_crf_tagger_whose_labels_are_all_ignored_has_a_zero_loss(tmp_path):
    model, _ = bert_crf_tagger(tmp_path)
    loss = model(input_ids=torch.tensor([[2, 10, 11, 3]]), labels=torch.full((1, 4), -100)).loss
    assert torch.isfinite(loss) and loss.item() == 0.0


def test_a_taglm_tagger_given_ignored_labels_on_its_words_says_so(tmp_path):
    """TagLM's CRF scores whole sentences: a word without a tag is an error that says so, not a NaN."""
    model, tokenizer = taglm(tmp_path)
    inputs = tokenizer([["red", "cat", "runs"]], is_split_into_words=True, return_tensors="pt")
    with pytest.raises(ValueError, match="labels must give every word a tag id"):
        model(**inputs, labels=torch.full((1, 3), -100))


def test_a_sequence_of_one_token_and_a_sentence_of_one_word_are_tagged(bert, elmo):
    model, _ = bert
    assert model(input_ids=torch.tensor([[2]])).logits.shape == (1, 1, 3)
    model, tokenizer = elmo
    logits = model(**tokenizer([["cat"]], is_split_into_words=True, return_tensors="pt")).logits
    assert logits.shape == (1, 1, 3) and torch.isfinite(logits).all()


def test_an_attention_mask_of_zeros_gives_finite_outputs(bert, elmo):
    model, _ = bert
    ids = torch.tensor([[2, 10, 11, 3]])
    assert torch.isfinite(model(input_ids=ids, attention_mask=torch.zeros_like(ids)).logits).all()
    model, tokenizer = elmo
    inputs = tokenizer([["red", "cat"]], is_split_into_words=True, return_tensors="pt")
    logits = model(input_ids=inputs["input_ids"], attention_mask=torch.zeros(1, 2, dtype=torch.long)).logits
    assert torch.isfinite(logits).all()


def test_scalar_mix_with_layer_norm_over_a_mask_of_zeros_is_zero_not_nan():
    mixed = ScalarMix(3, do_layer_norm=True)([torch.randn(2, 3, 4)] * 3, torch.zeros(2, 3))
    assert torch.equal(mixed, torch.zeros(2, 3, 4))


def test_crf_viterbi_of_a_one_word_sentence_is_its_best_allowed_tag():
    crf = ConditionalRandomField(3)
    emissions = torch.tensor([[[0.0, 5.0, 1.0]]])
    tags, scores = crf.viterbi_decode(emissions, torch.ones(1, 1, dtype=torch.bool))
    best = int((emissions[0, 0] + crf.start_transitions + crf.end_transitions).argmax())
    assert tags.tolist() == [[best]] and torch.isfinite(scores).all()


def test_crf_viterbi_of_a_sentence_without_words_is_all_ignored_with_score_zero():
    tags, scores = ConditionalRandomField(3).viterbi_decode(torch.randn(2, 4, 3), torch.zeros(2, 4, dtype=torch.bool))
    assert (tags == -100).all() and scores.tolist() == [0.0, 0.0]


def test_learning_rate_zero_is_refused_as_training_nothing(tmp_path, capsys):
    """Before: --learning_rate 0 trained to the end and saved the model it started from."""
    import run_ner

    from hf_ctx.tools.errors import run_script

    train = tmp_path / "train.txt"
    train.write_text("red B-ANIMAL\ncat I-ANIMAL\n\nblue O\n\n")
    arguments = ["--model_type", "bert", "--config_name", "tiny", "--vocab_size", "60", "--num_columns", "2"]
    arguments += ["--train_file", str(train), "--do_train", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_info:
        run_script(run_ner.main, [*arguments, "--learning_rate", "0", "--use_cpu", "--report_to", "none"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "error: --learning_rate 0 trains nothing" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_max_grad_norm_zero_means_no_clipping_as_in_transformers():
    """0 turns clipping off in transformers' Trainer; its kind allows it (a negative norm is refused)."""
    from hf_ctx.tools.option_kinds import TRAINING_OPTION_KINDS

    kind = TRAINING_OPTION_KINDS["max_grad_norm"]
    kind.check("--max_grad_norm", 0.0)
    with pytest.raises(ValueError, match="--max_grad_norm must be a finite number of at least 0"):
        kind.check("--max_grad_norm", -1.0)
