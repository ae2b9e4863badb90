"""Configuration of hf_ctx's from-scratch BERT."""

from transformers import PreTrainedConfig
from transformers.activations import ACT2FN

from .configuration_checks import CheckedConfig, boolean, one_of, optional, positive_int, positive_number, probability
from .tag_schemes import SCHEME_NAMES

# Sizes from the BERT papers (Devlin et al. 2019; Turc et al. 2019 for the compact models):
# layers L, hidden size H, heads H/64, feed-forward 4H.
BERT_PRESETS = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "mini": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "small": {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": 2048},
    "medium": {"num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": 2048},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
    "large": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096},
}

POSITION_EMBEDDING_TYPES = ("absolute", "sinusoidal")


class CtxBertConfig(CheckedConfig, PreTrainedConfig):
    r"""
    Configuration of a [`CtxBertModel`]. The defaults give BERT-base (uncased vocabulary size).

    Args:
        vocab_size (`int`, defaults to 30522): number of token ids the embeddings accept.
        hidden_size (`int`, defaults to 768): width of every layer; must be divisible by `num_attention_heads`.
        num_hidden_layers (`int`, defaults to 12): number of Transformer layers.
        num_attention_heads (`int`, defaults to 12): attention heads per layer.
        intermediate_size (`int`, defaults to 3072): width of the feed-forward layer.
        hidden_act (`str`, defaults to `"gelu"`): feed-forward activation, any key of `transformers.activations.ACT2FN`.
        hidden_dropout_prob (`float`, defaults to 0.1): dropout on embeddings and sub-layer outputs.
        attention_probs_dropout_prob (`float`, defaults to 0.1): dropout on attention probabilities.
        max_position_embeddings (`int`, defaults to 512): longest sequence the model accepts.
        type_vocab_size (`int`, defaults to 2): number of segment (token type) ids.
        initializer_range (`float`, defaults to 0.02): std of the truncated-normal-free normal init, as in BERT.
        layer_norm_eps (`float`, defaults to 1e-12): LayerNorm epsilon.
        pad_token_id (`int`, defaults to 0): id of `[PAD]`.
        classifier_dropout (`float`, *optional*): dropout before classification heads; `hidden_dropout_prob` if unset.
        position_embedding_type (`str`, defaults to `"absolute"`): `"absolute"` learns one vector per position as
            BERT does; `"sinusoidal"` uses the fixed sine/cosine table of Vaswani et al. (not trained, not saved).
        pre_layer_norm (`bool`, defaults to `False`): `False` is BERT's post-LN (`LN(x + f(x))`); `True` is pre-LN
            (`x + f(LN(x))`, plus a final LayerNorm), which trains more stably at depth without warm-up tuning.
        sparse_prediction (`bool`, defaults to `False`): when MLM `labels` are given, apply the MLM decoder only at
            the labelled positions (about 15% of tokens): the loss is unchanged, the (B, T, V) logits are never
            built, and `prediction_logits`/`logits` are returned as (number of labelled tokens, V), in row-major
            order of the labelled positions. Without labels the full logits are returned. (Same name and
            meaning as in transformers' ModernBERT.)
        unpad_inputs (`bool`, defaults to `True`): when the batch has padding, run the layers on the real tokens
            only (the padding costs no compute) and, on a GPU in fp16/bf16 without attention dropout, attention as
            variable-length flash attention. Outputs at real tokens are unchanged (to float rounding); outputs at
            padded positions are zeros instead of the meaningless values a padded run computes there. Off with
            `output_attentions`, and under `torch.compile` unless torch may trace value-dependent shapes
            (`TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS=1`); `False` always runs padded.
        pad_vocab_size_to_multiple_of (`int`, defaults to 1): give the word embeddings and the MLM decoder
            `vocab_size` rounded up to a multiple of this many rows (`padded_vocab_size`; MosaicBERT pads to 64, so
            that the decoder's matrix products have GPU-friendly sizes). The extra rows are never an input (ids stay
            below `vocab_size`) and never a prediction: the MLM logits, and so the loss, cover the `vocab_size` real
            tokens only, as without padding. 1, no padding, is the layout of transformers' BERT and of every
            checkpoint saved before the option.
        use_crf (`bool`, defaults to `False`): [`CtxBertForTokenClassification`] decodes with a linear-chain CRF
            over the words (each word's first sub-token) instead of tagging each token on its own; see that class.
        tag_scheme (`str`, *optional*): with `use_crf`, `"BIO"` (= `"IOB2"`), `"IOB1"`, `"BIOES"` or `"BIOUL"`
            (= `"BILOU"`) forbids the CRF transitions that scheme does not allow between the labels of `id2label`;
            `None` allows every transition.

    Example:
    ```python
    >>> from hf_ctx import CtxBertConfig, CtxBertModel
    >>> config = CtxBertConfig.from_preset("mini", vocab_size=8000)
    >>> model = CtxBertModel(config)
    ```
    """

    model_type = "hf_ctx_bert"

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        pad_token_id=0,
        classifier_dropout=None,
        position_embedding_type="absolute",
        pre_layer_norm=False,
        sparse_prediction=False,
        unpad_inputs=True,
        pad_vocab_size_to_multiple_of=1,
        use_crf=False,
        tag_scheme=None,
        tie_word_embeddings=True,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.classifier_dropout = classifier_dropout
        self.position_embedding_type = position_embedding_type
        self.pre_layer_norm = pre_layer_norm
        self.sparse_prediction = sparse_prediction
        self.unpad_inputs = unpad_inputs
        self.pad_vocab_size_to_multiple_of = pad_vocab_size_to_multiple_of
        self.use_crf = use_crf
        self.tag_scheme = tag_scheme
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        self.check_fields_together()

    # The sizes a checkpoint's weights show: field -> (tensor name pattern, axis of its shape, or None to count
    # the modules the pattern's number indexes). `from_pretrained` refuses a config.json asking for more
    # (`model_size.check_sizes_against_weights`) before building the model.
    sizes_in_weights = {
        "num_hidden_layers": (r"(?:^|\.)encoder\.layer\.(\d+)\.", None),
        "vocab_size": (r"(?:^|\.)embeddings\.word_embeddings\.weight$", 0),
        "hidden_size": (r"(?:^|\.)embeddings\.word_embeddings\.weight$", 1),
        "max_position_embeddings": (r"(?:^|\.)embeddings\.position_embeddings\.weight$", 0),
        "type_vocab_size": (r"(?:^|\.)embeddings\.token_type_embeddings\.weight$", 0),
        "intermediate_size": (r"(?:^|\.)encoder\.layer\.0\.feed_forward\.intermediate\.weight$", 0),
    }

    # Each field's own check, run on every assignment (see `configuration_checks`).
    field_checks = {
        **dict.fromkeys(
            [
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
                "max_position_embeddings",
                "type_vocab_size",
                "pad_vocab_size_to_multiple_of",
            ],
            positive_int,
        ),
        "hidden_act": one_of(sorted(ACT2FN)),
        "hidden_dropout_prob": probability,
        "attention_probs_dropout_prob": probability,
        "classifier_dropout": optional(probability, "hidden_dropout_prob is used"),
        "position_embedding_type": one_of(POSITION_EMBEDDING_TYPES),
        "initializer_range": positive_number,
        "layer_norm_eps": positive_number,
        "pre_layer_norm": boolean,
        "sparse_prediction": boolean,
        "unpad_inputs": boolean,
        "use_crf": boolean,
        "tag_scheme": optional(one_of(SCHEME_NAMES), "every transition allowed"),
    }

    def check_fields_together(self) -> None:
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if self.position_embedding_type == "sinusoidal" and self.hidden_size % 2 != 0:
            raise ValueError(f"sinusoidal positions need an even hidden_size, got {self.hidden_size}")
        if self.pad_token_id is not None and not (
            isinstance(self.pad_token_id, int) and 0 <= self.pad_token_id < self.vocab_size
        ):
            raise ValueError(f"pad_token_id ({self.pad_token_id!r}) must be in [0, vocab_size={self.vocab_size})")

    @property
    def padded_vocab_size(self) -> int:
        """The rows of the word embeddings and the MLM decoder: `vocab_size` rounded up to a multiple of
        `pad_vocab_size_to_multiple_of`."""
        return -(-self.vocab_size // self.pad_vocab_size_to_multiple_of) * self.pad_vocab_size_to_multiple_of

    @classmethod
    def from_preset(cls, name: str, **kwargs) -> "CtxBertConfig":
        """A config of one of the published sizes (`BERT_PRESETS`), with `kwargs` overriding any field."""
        if name not in BERT_PRESETS:
            raise ValueError(f"unknown BERT preset {name!r}; choose one of {list(BERT_PRESETS)}")
        return cls(**{**BERT_PRESETS[name], **kwargs})
