"""Sizes are checked before anything is allocated (hf_ctx.model_size): a config whose model cannot fit, or whose
sizes overflow, is a named ValueError at once instead of an attempt to allocate terabytes."""

import pytest

from hf_ctx import (
    CtxBertConfig,
    CtxBertForPreTraining,
    ElmoConfig,
    ElmoForBiLM,
    TagLMConfig,
    TagLMForTokenClassification,
    model_size,
)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"vocab_size": 10**12},
            r"CtxBertForPreTraining with this config has [\d,]+ parameters.*vocab_size=1000000000000",
        ),
        ({"max_position_embeddings": 10**13}, r"max_position_embeddings=10000000000000"),
        (
            {"hidden_size": 10**9, "num_attention_heads": 1},
            r"too large to build a model at all .*hidden_size=1000000000",
        ),
    ],
)
def test_bert_configs_that_cannot_fit_are_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        CtxBertForPreTraining(CtxBertConfig.from_preset("tiny", **fields))


def test_elmo_and_taglm_are_checked_too():
    with pytest.raises(ValueError, match=r"ElmoForBiLM with this config .* vocab_size=100000000000"):
        ElmoForBiLM(ElmoConfig(vocab_size=10**11))
    with pytest.raises(ValueError, match=r"TagLMForTokenClassification .* vocab_size=100000000000"):
        TagLMForTokenClassification(TagLMConfig(vocab_size=10**11, id2label={0: "O", 1: "B-X", 2: "I-X"}))


def test_the_limit_is_the_memory_available(monkeypatch):
    config = CtxBertConfig.from_preset("tiny", vocab_size=1000)
    count = CtxBertForPreTraining(config).num_parameters()
    monkeypatch.setattr(model_size, "available_memory_bytes", lambda: 4 * count - 1)
    with pytest.raises(ValueError, match=rf"has {count:,} parameters, .* more than the"):
        CtxBertForPreTraining(config)
    monkeypatch.setattr(model_size, "available_memory_bytes", lambda: 4 * count)
    CtxBertForPreTraining(config)


def test_the_check_leaves_the_config_as_it_was_so_legacy_flags_reach_the_model():
    """The meta-device model is built from a copy: transformers' post_init consumes `gradient_checkpointing=True`
    from the config it is given, which left the real model without it."""
    from transformers import BertConfig, BertModel

    from hf_ctx import CtxBertModel

    sizes = {
        "vocab_size": 20,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 8,
    }
    config = CtxBertConfig(**sizes, gradient_checkpointing=True)
    before = config.to_dict()
    model_size.check_parameter_memory(CtxBertModel, config)
    assert config.to_dict() == before and config.gradient_checkpointing is True
    assert CtxBertModel(config).is_gradient_checkpointing
    assert BertModel(BertConfig(**sizes, gradient_checkpointing=True)).is_gradient_checkpointing  # the reference
