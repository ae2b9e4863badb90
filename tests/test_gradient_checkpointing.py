"""Gradient checkpointing (`activation_checkpointing_enable()`, `gradient_checkpointing_enable()` before
transformers 5.23: what `--gradient_checkpointing` calls) on ELMo's biLM and on TagLM: the checkpointed layers
really are recomputed, and the gradients equal those of a run without it, dropout included (the recomputation
replays the same random numbers)."""

import pytest
import torch
from tiny_checkpoints import WORDS, elmo_bilm, enable_activation_checkpointing, taglm


def _batch(tokenizer, with_labels):
    sentences = [WORDS[:5], WORDS[3:6], WORDS[6:10]]
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    if with_labels:
        batch["labels"] = torch.where(batch["attention_mask"].bool(), 1, -100)
    else:
        batch["input_word_ids"] = batch["input_word_ids"].masked_fill(~batch["attention_mask"].bool(), 0)
    return dict(batch)


def _gradients(model, batch, seed=0):
    model.zero_grad()
    torch.manual_seed(seed)
    model(**batch).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("build, checkpointed_module, calls", [(elmo_bilm, "elmo.encoder", 2), (taglm, None, 2)])
def test_checkpointed_gradients_equal_plain_ones(tmp_path, build, checkpointed_module, calls):
    model, tokenizer = build(tmp_path)
    model.config.dropout = 0.3
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.3  # dropout on, to see that the recomputation replays it
    model.train()
    batch = _batch(tokenizer, with_labels=build is taglm)
    plain = _gradients(model, batch)

    enable_activation_checkpointing(model)
    module = model.get_submodule(checkpointed_module) if checkpointed_module else model
    assert module.gradient_checkpointing
    replayed = []
    checkpoint = module._gradient_checkpointing_func
    module._gradient_checkpointing_func = lambda function, *args: (
        replayed.append(function) or checkpoint(function, *args)
    )
    checkpointed = _gradients(model, batch)

    assert len(replayed) == calls  # each biLSTM layer of the biLM; TagLM's two biRNNs
    assert plain.keys() == checkpointed.keys() and len(plain) > 0
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], msg=name)
    # Without gradients (evaluation) nothing is recomputed.
    replayed.clear()
    with torch.no_grad():
        model(**batch)
    assert replayed == []
