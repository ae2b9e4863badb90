"""hf_ctx's model families, one registry: the names the examples, the model cards and the Hub code use.

A family is named by a short word ("bert", "elmo", "taglm") and recognised in a checkpoint by its config's
`model_type` ("hf_ctx_bert", ...). This module is used from the installed package; it never travels with a
checkpoint.
"""

from .configuration_bert import CtxBertConfig
from .configuration_elmo import ElmoConfig
from .configuration_taglm import TagLMConfig

# Family name -> its config class.
MODEL_FAMILIES = {"bert": CtxBertConfig, "elmo": ElmoConfig, "taglm": TagLMConfig}


def model_family(config) -> str:
    """The family of an hf_ctx config: "bert", "elmo" or "taglm".

    Raises a `ValueError` naming the `model_type` for a config of another library's model.
    """
    for family, config_class in MODEL_FAMILIES.items():
        if config.model_type == config_class.model_type:
            return family
    model_types = [config_class.model_type for config_class in MODEL_FAMILIES.values()]
    raise ValueError(
        f"{config.model_type!r} is not an hf_ctx model type (hf_ctx's are {model_types}); a transformers "
        "BERT checkpoint converts with `hf-ctx convert-bert`"
    )
