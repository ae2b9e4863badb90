"""LoRA (peft) on hf_ctx models with recipes written for transformers' BERT.

A recipe for transformers' `BertModel` names its linear layers: `target_modules=["query", "value"]`, or "key",
"dense". hf_ctx's BERT computes query, key and value in one fused layer, `qkv`, so those names match nothing and
peft stops with "No modules were targeted for adaptation". `lora_target_modules` translates them:

    from peft import LoraConfig, get_peft_model
    from hf_ctx import lora_target_modules

    config = LoraConfig(r=8, target_modules=lora_target_modules(model, ["query", "value"]), task_type="SEQ_CLS")
    model = get_peft_model(model, config)

or give hf_ctx's names directly (`target_modules=["qkv"]`). LoRA on `qkv` adapts query, key and value together:
one rank-r update of the fused (3H, H) weight, where the recipe meant a rank-r update of the query and of the
value weights each; both have 4 r H trainable parameters a layer.
"""

from torch import nn

# transformers' BERT names -> hf_ctx's BERT names (the last part of a module's name, which peft matches).
BERT_MODULE_NAMES = {
    "query": ["qkv"],
    "key": ["qkv"],
    "value": ["qkv"],
    # BertSelfOutput.dense, BertIntermediate.dense, BertOutput.dense and BertPooler.dense
    "dense": ["out_proj", "intermediate", "output", "dense"],
}


def lora_target_modules(model: nn.Module, names: list[str]) -> list[str]:
    """peft `target_modules` for `model` from `names`, a recipe's list: transformers' BERT names become
    hf_ctx's (`BERT_MODULE_NAMES`), names of `model`'s own modules are kept.

    A name that matches none of `model`'s linear layers is a `ValueError` naming the ones it has.
    """
    linear = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    targets = []
    for name in names:
        translated = [n for n in BERT_MODULE_NAMES.get(name, [name]) if n in linear]
        if not translated:
            raise ValueError(
                f"LoRA target module {name!r} matches no linear layer of {type(model).__name__}; its linear "
                f"layers are named {', '.join(sorted(linear))} (query, key and value are one layer, 'qkv')"
            )
        targets += [n for n in translated if n not in targets]
    return targets


__all__ = ["BERT_MODULE_NAMES", "lora_target_modules"]
