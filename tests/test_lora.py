"""LoRA (peft) on hf_ctx's BERT with a recipe written for transformers' BERT: `lora_target_modules` turns its
`target_modules=["query", "value"]` into hf_ctx's fused `qkv`; the adapted model starts as the base model, trains
only the adapters, and merges back; a name that matches nothing is an error naming hf_ctx's layers."""

import pytest
import torch

peft = pytest.importorskip("peft")

from hf_ctx import CtxBertConfig, CtxBertForSequenceClassification, lora_target_modules  # noqa: E402


def tiny_bert():
    config = CtxBertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=16, num_labels=2)
    return CtxBertForSequenceClassification(config).eval()


def test_a_transformers_bert_recipe_trains_lora_on_the_fused_qkv_layer():
    model = tiny_bert()
    batch = {"input_ids": torch.randint(5, 50, (4, 10)), "labels": torch.tensor([0, 1, 1, 0])}
    with torch.no_grad():
        base_logits = model(**batch).logits
    targets = lora_target_modules(model, ["query", "value"])
    assert targets == ["qkv"]
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets, task_type="SEQ_CLS")
    lora_model = peft.get_peft_model(model, config)
    adapted = [name for name, module in lora_model.named_modules() if isinstance(module, peft.tuners.lora.Linear)]
    assert len(adapted) == model.config.num_hidden_layers and all(name.endswith(".qkv") for name in adapted)
    with torch.no_grad():
        torch.testing.assert_close(lora_model(**batch).logits, base_logits)  # LoRA's B starts at zero

    trainable = {name: p.detach().clone() for name, p in lora_model.named_parameters() if p.requires_grad}
    frozen = {name: p.detach().clone() for name, p in lora_model.named_parameters() if not p.requires_grad}
    assert all("lora_" in name or "classifier" in name for name in trainable)
    optimizer = torch.optim.AdamW([p for p in lora_model.parameters() if p.requires_grad], lr=1e-2)
    lora_model.train()
    for _ in range(3):
        lora_model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    lora_model.eval()
    after = dict(lora_model.named_parameters())
    assert all(torch.equal(after[name], value) for name, value in frozen.items())
    assert any(not torch.equal(after[name], value) for name, value in trainable.items() if "lora_B" in name)

    with torch.no_grad():
        adapted_logits = lora_model(**batch).logits
        merged = lora_model.merge_and_unload()
        assert type(merged) is CtxBertForSequenceClassification
        torch.testing.assert_close(merged(**batch).logits, adapted_logits)
    assert not torch.allclose(adapted_logits, base_logits)


def test_transformers_names_are_translated_and_unknown_ones_name_the_real_layers():
    model = tiny_bert()
    assert lora_target_modules(model, ["query", "key", "value", "dense"]) == [
        "qkv",
        "out_proj",
        "intermediate",
        "output",
        "dense",
    ]
    assert lora_target_modules(model, ["qkv", "out_proj"]) == ["qkv", "out_proj"]  # hf_ctx's own names
    with pytest.raises(ValueError, match=r"'q_proj' matches no linear layer of CtxBertForSequenceClassification.*qkv"):
        lora_target_modules(model, ["q_proj"])
