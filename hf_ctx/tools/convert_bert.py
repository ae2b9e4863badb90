"""Convert a checkpoint of transformers' `BertModel` / `BertFor*` into an hf_ctx BERT checkpoint.

The converted model computes the same function: the weights are renamed, and each layer's separate query, key
and value projections are concatenated into hf_ctx's fused QKV projection.

    hf-ctx convert-bert SRC_DIR OUT_DIR
"""

import fnmatch
import json
import logging
import os
import re
from pathlib import Path

import torch
import transformers
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import BertConfig

from .. import modeling_bert
from ..atomic_files import damaged_files
from ..configuration_bert import CtxBertConfig
from ..data.files import read_json_file
from ..remote_code import check_finite_weights, damaged_folder_error
from .loading import check_pickle_loads_safely, load_tokenizer
from .model_card import save_converted_checkpoint
from .paths import check_no_checkpoint_in, check_output_dir

logger = logging.getLogger(__name__)

# transformers BERT architecture -> hf_ctx class name.
ARCHITECTURES = {
    "BertModel": "CtxBertModel",
    "BertForPreTraining": "CtxBertForPreTraining",
    "BertForMaskedLM": "CtxBertForMaskedLM",
    "BertForNextSentencePrediction": "CtxBertForNextSentencePrediction",
    "BertForSequenceClassification": "CtxBertForSequenceClassification",
    "BertForTokenClassification": "CtxBertForTokenClassification",
    "BertForQuestionAnswering": "CtxBertForQuestionAnswering",
    "BertForMultipleChoice": "CtxBertForMultipleChoice",
}

# Config fields that mean the same in both models.
_SHARED_CONFIG_FIELDS = [
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
    "pad_token_id",
    "classifier_dropout",
    "id2label",
    "label2id",
    "problem_type",
]

# Renames applied to every key (regex, replacement), after the fused QKV has been built.
_RENAMES = [
    (r"\.attention\.output\.dense\.", ".attention.out_proj."),
    (r"\.attention\.output\.LayerNorm\.", ".attention_norm."),
    (r"\.intermediate\.dense\.", ".feed_forward.intermediate."),
    (r"\.output\.dense\.", ".feed_forward.output."),
    (r"\.output\.LayerNorm\.", ".feed_forward_norm."),
    (r"^cls\.predictions\.transform\.dense\.", "cls.predictions.dense."),
    (r"^cls\.predictions\.transform\.LayerNorm\.", "cls.predictions.LayerNorm."),
]


def convert_bert_config(config: BertConfig) -> CtxBertConfig:
    """The `CtxBertConfig` equivalent to a transformers `BertConfig`; refuses what hf_ctx BERT does not model."""
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        raise ValueError("cannot convert a decoder BERT (is_decoder/add_cross_attention): hf_ctx BERT is an encoder")
    position_type = getattr(config, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(f"cannot convert position_embedding_type={position_type!r}; only 'absolute' is supported")
    kwargs = {name: getattr(config, name) for name in _SHARED_CONFIG_FIELDS if getattr(config, name, None) is not None}
    return CtxBertConfig(**kwargs)


def convert_bert_state_dict(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a transformers BERT state dict to hf_ctx's names and fuse query/key/value.

    Prefixes are kept: a bare `BertModel`'s keys stay unprefixed, a head model's keep `bert.`.
    """
    converted = {}
    for key, tensor in state_dict.items():
        if key.endswith(("position_ids", "token_type_ids")):  # buffers, not weights
            continue
        if key == "cls.predictions.bias":  # the same tensor as cls.predictions.decoder.bias
            continue
        match = re.match(r"^(.*)\.attention\.self\.(query|key|value)\.(weight|bias)$", key)
        if match:
            prefix, part, kind = match.groups()
            if part != "query":  # fused when the query is met
                continue
            parts = [state_dict[f"{prefix}.attention.self.{p}.{kind}"] for p in ("query", "key", "value")]
            converted[f"{prefix}.attention.qkv.{kind}"] = torch.cat(parts, dim=0)
            continue
        for pattern, replacement in _RENAMES:
            key = re.sub(pattern, replacement, key)
        converted[key] = tensor
    return converted


def _load_source(src_dir: str, architecture: str):
    """The transformers `architecture` model of `src_dir`, refusing weights the architecture needs that the files
    lack or hold with another shape (transformers would initialise them at random), by name; weights it does not
    need are left out with a warning."""
    # transformers reads safetensors, or a .bin with torch.load(weights_only=True): nothing is unpickled. A .bin
    # that holds more than tensors is refused first, in one line. transformers initialises weights missing from
    # the files at random and, with `ignore_mismatched_sizes`, those of another shape: both are refused here, by
    # name.
    for name in sorted(os.listdir(src_dir)) if os.path.isdir(src_dir) else []:
        if fnmatch.fnmatch(name, "pytorch_model*.bin"):
            check_pickle_loads_safely(os.path.join(src_dir, name), "the weights to convert")
    source, loading = getattr(transformers, architecture).from_pretrained(
        src_dir, output_loading_info=True, ignore_mismatched_sizes=True
    )
    mismatched = [
        f"{key} (file {tuple(found)}, model {tuple(wanted)})"
        for key, found, wanted in sorted(loading.get("mismatched_keys", ()))
    ]
    missing = sorted(loading.get("missing_keys", ()))
    if missing or mismatched:
        raise ValueError(
            f"{src_dir} does not hold the weights of a {architecture} with its config.json: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"wrong shape {', '.join(mismatched)}" if mismatched else "",
                )
                if part
            )
        )
    if loading.get("unexpected_keys"):
        logger.warning(
            f"{src_dir}: weights not part of a {architecture}, left out: "
            f"{', '.join(sorted(loading['unexpected_keys']))}"
        )
    return source


def checkpoint_name(src_dir: str | os.PathLike) -> str:
    """How a card names a checkpoint folder: the Hub id of a Hub cache snapshot (`.../models--nreimers--MiniLM-
    L6-H384-uncased/snapshots/<hash>`) or of config.json's `_name_or_path`, else the folder's name."""
    folder = Path(src_dir).absolute()
    cached = [part for part in folder.parts if part.startswith("models--")]
    if cached:
        return cached[-1].removeprefix("models--").replace("--", "/")
    try:
        named = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        named = None
    if isinstance(named, str) and named.count("/") == 1 and not os.path.exists(named):
        return named
    return folder.name


def convert_bert_checkpoint(
    src_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    weights_only: bool = False,
    source_name: str | None = None,
):
    """Convert the transformers BERT checkpoint folder `src_dir` (config.json, model.safetensors or
    pytorch_model.bin, tokenizer files) into an hf_ctx checkpoint in `out_dir`.

    Refused, before anything is written: `out_dir` being `src_dir` or a file, or holding a checkpoint already
    (unless `weights_only`); weights with NaN or infinite values; weights the architecture needs
    that the source lacks or holds with another shape (transformers would initialise them at random); a source
    without tokenizer files (transformers 5 would give a tokenizer of 5 special tokens). `weights_only=True`
    converts the model alone and leaves any tokenizer in `out_dir` as it is. The folder gets a model card
    (README.md) naming the source: `source_name` (a Hub id, e.g. `nreimers/MiniLM-L6-H384-uncased`), by
    default what `checkpoint_name` reads from `src_dir`.

    Returns the converted hf_ctx model (in eval mode).
    """
    src_dir, out_dir = os.fspath(src_dir), os.fspath(out_dir)
    if not os.path.isdir(src_dir):
        raise FileNotFoundError(f"no folder {src_dir!r}: convert-bert converts a local transformers BERT folder")
    if not os.path.isfile(os.path.join(src_dir, "config.json")):
        raise FileNotFoundError(f"{src_dir} has no config.json; expected a transformers BERT checkpoint folder")
    check_output_dir(out_dir, source_dir=src_dir)
    config_file = os.path.join(src_dir, "config.json")
    # The type first: BertConfig reads any config.json, and another model's (an hf_ctx ELMo's, `{}`) fails on
    # its fields, or on a missing tokenizer, naming neither the type nor the file.
    fields = read_json_file(config_file, "a transformers BERT's config.json")
    model_type = fields.get("model_type") if isinstance(fields, dict) else None
    if model_type != "bert":
        held = f"a {model_type!r} model" if model_type else "a config.json without a model_type"
        raise ValueError(f"{src_dir} holds {held}, not a transformers BERT (model_type 'bert')")
    try:
        source_config = BertConfig.from_pretrained(src_dir)
    except (ValueError, TypeError, StrictDataclassFieldValidationError) as error:  # a field of the wrong kind
        raise ValueError(f"{config_file}: {' '.join(str(error).split())}") from None
    try:
        target_config = convert_bert_config(source_config)
    except ValueError as error:
        raise ValueError(f"{config_file}: {error}") from None
    damaged = damaged_files(src_dir)
    if damaged:
        raise damaged_folder_error(src_dir, damaged)
    architecture = (source_config.architectures or ["BertModel"])[0]
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unsupported architecture {architecture!r}; supported: {sorted(ARCHITECTURES)}")
    tokenizer = None
    if not weights_only:
        # raises, naming the files, when there is no real vocabulary
        tokenizer = load_tokenizer(
            src_dir, way_on="Copy the tokenizer files into it, or pass --weights_only to convert the model alone"
        )
    source = _load_source(src_dir, architecture)
    target_class = getattr(modeling_bert, ARCHITECTURES[architecture])
    target = target_class(target_config).eval()
    state_dict = convert_bert_state_dict(source.state_dict())
    check_finite_weights(state_dict, src_dir)
    if not weights_only:
        check_no_checkpoint_in(out_dir)
    expected = target.state_dict()
    # The MLM decoder weight is tied to the word embeddings, so it need not come from the source.
    missing = [k for k in expected if k not in state_dict and k != "cls.predictions.decoder.weight"]
    unexpected = [k for k in state_dict if k not in expected]
    if missing or unexpected:
        raise ValueError(f"weights do not match: missing {missing}, unexpected {unexpected}")
    target.load_state_dict(state_dict, strict=False)
    target.tie_weights()

    save_converted_checkpoint(
        out_dir,
        target,
        tokenizer,
        converter="hf-ctx convert-bert",
        source=f"the transformers `{architecture}` checkpoint `{source_name or checkpoint_name(src_dir)}`",
        how="The weights are the source's, renamed, with each layer's query, key and value projections fused "
        "into one: the model computes the same function.",
    )
    return target
