"""Configuration of TagLM (Peters et al., 2017): a biRNN-CRF sequence tagger fed with a frozen biLM's states."""

from transformers import PreTrainedConfig

from .configuration_checks import CheckedConfig, one_of, optional, positive_int, positive_number, probability
from .configuration_elmo import ElmoConfig
from .elmo_characters import N_CHARACTERS, PADDING_CHARACTER_ID
from .tag_schemes import SCHEME_NAMES

CHAR_REPRESENTATIONS = ("cnn", "gru")
RNN_TYPES = ("gru", "lstm")


def _check_bilm_config(name: str, value) -> None:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict (an ElmoConfig's to_dict()) or None, got {type(value)}")


def _check_bilm_layers(name: str, value) -> None:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    ):
        raise ValueError(f"{name} must be a non-empty list of layer indices, got {value!r}")


def check_bilm_layers_of(bilm_layers: list[int], num_layers: int) -> None:
    """`bilm_layers` as indices into a biLM's `num_layers` = L + 1 layers: each in range, negatives counting from
    the top, and no layer named twice (the same states concatenated twice: more weights for no new input)."""
    top = num_layers - 1
    for layer in bilm_layers:
        if not -num_layers <= layer < num_layers:
            raise ValueError(
                f"bilm_layers contains {layer}, but the biLM has {num_layers} layers (0 = token layer, {top} = top)"
            )
    spellings = {}  # layer -> the first index that names it
    for layer in bilm_layers:
        resolved = layer % num_layers
        if resolved in spellings:
            negative = min(spellings[resolved], layer)
            named = {top: f"the top layer, {top},", 0: "the token layer, 0,"}.get(resolved, f"layer {resolved}")
            how = f" ({negative} is {named} of this {top}-layer biLM)" if negative < 0 else ""
            raise ValueError(f"bilm_layers {bilm_layers} names layer {resolved} twice{how}")
        spellings[resolved] = layer


class TagLMConfig(CheckedConfig, PreTrainedConfig):
    r"""
    Configuration of a [`TagLMForTokenClassification`]. The defaults follow the CoNLL-2003 NER tagger of
    Peters et al. (2017): 50-dimensional word embeddings, a character CNN, two bidirectional GRU layers of 80
    units per direction, the biLM's top layer between them, and a CRF.

    Args:
        vocab_size (`int`, defaults to 10000): size of the word vocabulary (`input_word_ids` range), that of
            the `ElmoTokenizer` the tagger is used with.
        word_embedding_dim (`int`, defaults to 50): width of the word embeddings (that of the word vectors file
            when they are initialised from one).
        char_representation (`str`, defaults to `"cnn"`): `"cnn"` (convolution + max-pooling over each word's
            characters) or `"gru"` (bidirectional GRU over them, final states concatenated).
        n_characters (`int`, defaults to 262): character-id range, ELMo's (256 bytes + 5 special, + 1 for padding).
        max_characters_per_token (`int`, defaults to 50): width of the character ids, ELMo's.
        char_padding_id (`int`, defaults to 261): id that pads a word's characters after its end-of-word mark
            (ELMo's); the character GRU stops before it.
        char_embedding_dim (`int`, defaults to 25): width of the character embeddings.
        char_cnn_filters (`int`, defaults to 30): number of convolution filters (the CNN's output width).
        char_cnn_width (`int`, defaults to 3): convolution width in characters.
        char_rnn_hidden_size (`int`, defaults to 25): character GRU units per direction (output 2x this).
        rnn_type (`str`, defaults to `"gru"`): `"gru"` or `"lstm"` for both word-level bidirectional layers.
        rnn_hidden_size (`int`, defaults to 80): units per direction of each word-level layer.
        dropout (`float`, defaults to 0.5): dropout on the token representation and on each layer's output.
        bilm_config (`dict`, *optional*): the frozen biLM's `ElmoConfig` as a dict; `None` for a tagger without
            biLM states. Set by [`TagLMForTokenClassification.from_bilm`].
        bilm_name_or_path (`str`, *optional*): where the biLM was loaded from (provenance only: the biLM's
            weights are saved inside the TagLM checkpoint).
        bilm_layers (`list[int]`, defaults to `[-1]`): which biLM layers to concatenate after the first RNN:
            indices into the biLM's L+1 layers (0 = token layer, -1 = top layer, TagLM's choice).
        tag_scheme (`str`, *optional*): `"BIO"` (= `"IOB2"`), `"IOB1"`, `"BIOES"` or `"BIOUL"` (= `"BILOU"`)
            forbids the CRF transitions that scheme does not allow between the labels of `id2label`; `None`
            allows every transition.
        initializer_range (`float`, defaults to 0.1): std of the normal init of word and character embeddings.

    Example:
    ```python
    >>> from hf_ctx import TagLMConfig, TagLMForTokenClassification
    >>> labels = ["O", "B-PER", "I-PER"]
    >>> config = TagLMConfig(vocab_size=5000, id2label=dict(enumerate(labels)), tag_scheme="BIO")
    >>> model = TagLMForTokenClassification(config)  # no biLM; TagLMForTokenClassification.from_bilm adds one
    ```
    """

    model_type = "hf_ctx_taglm"

    def __init__(
        self,
        vocab_size=10000,
        word_embedding_dim=50,
        char_representation="cnn",
        n_characters=N_CHARACTERS,
        max_characters_per_token=50,
        char_padding_id=PADDING_CHARACTER_ID,
        char_embedding_dim=25,
        char_cnn_filters=30,
        char_cnn_width=3,
        char_rnn_hidden_size=25,
        rnn_type="gru",
        rnn_hidden_size=80,
        dropout=0.5,
        bilm_config=None,
        bilm_name_or_path=None,
        bilm_layers=(-1,),
        tag_scheme=None,
        initializer_range=0.1,
        **kwargs,
    ):
        bilm_layers = list(bilm_layers) if isinstance(bilm_layers, tuple) else bilm_layers
        self.vocab_size = vocab_size
        self.word_embedding_dim = word_embedding_dim
        self.char_representation = char_representation
        self.n_characters = n_characters
        self.max_characters_per_token = max_characters_per_token
        self.char_padding_id = char_padding_id
        self.char_embedding_dim = char_embedding_dim
        self.char_cnn_filters = char_cnn_filters
        self.char_cnn_width = char_cnn_width
        self.char_rnn_hidden_size = char_rnn_hidden_size
        self.rnn_type = rnn_type
        self.rnn_hidden_size = rnn_hidden_size
        self.dropout = dropout
        self.bilm_config = bilm_config
        self.bilm_name_or_path = bilm_name_or_path
        self.bilm_layers = bilm_layers
        self.tag_scheme = tag_scheme
        self.initializer_range = initializer_range
        super().__init__(**kwargs)
        self.check_fields_together()

    # The sizes a checkpoint's weights show (see `CtxBertConfig.sizes_in_weights`), the biLM's included.
    sizes_in_weights = {
        "vocab_size": (r"^word_embeddings\.weight$", 0),
        "word_embedding_dim": (r"^word_embeddings\.weight$", 1),
        "char_embedding_dim": (r"^char_encoder\.embeddings\.weight$", 1),
        "char_cnn_filters": (r"^char_encoder\.conv\.weight$", 0),
        "rnn_hidden_size": (r"^first_rnn\.weight_hh_l0$", 1),
        "bilm_config.char_cnn.n_highway": (r"^bilm\.char_cnn\.highway\.layers\.(\d+)\.", None),
        "bilm_config.char_cnn.filters": (r"^bilm\.char_cnn\.convolutions\.(\d+)\.", None),
        "bilm_config.lstm.n_layers": (r"^bilm\.encoder\.forward_layers\.(\d+)\.", None),
        "bilm_config.lstm.dim": (r"^bilm\.encoder\.forward_layers\.0\.weight_hr$", 1),
    }

    # Each field's own check, run on every assignment (see `configuration_checks`).
    field_checks = {
        **dict.fromkeys(
            [
                "vocab_size",
                "word_embedding_dim",
                "n_characters",
                "max_characters_per_token",
                "char_embedding_dim",
                "char_cnn_filters",
                "char_cnn_width",
                "char_rnn_hidden_size",
                "rnn_hidden_size",
            ],
            positive_int,
        ),
        "char_representation": one_of(CHAR_REPRESENTATIONS),
        "rnn_type": one_of(RNN_TYPES),
        "dropout": probability,
        "bilm_config": _check_bilm_config,
        "bilm_layers": _check_bilm_layers,
        "tag_scheme": optional(one_of(SCHEME_NAMES), "every transition allowed"),
        "initializer_range": positive_number,
    }

    def check_fields_together(self) -> None:
        if self.bilm_config is not None:  # the layers are known once the biLM is (`from_bilm` sets it)
            check_bilm_layers_of(self.bilm_layers, ElmoConfig.from_dict(self.bilm_config).num_output_layers)
        if self.char_cnn_width > self.max_characters_per_token:
            raise ValueError(
                f"char_cnn_width={self.char_cnn_width} is wider than max_characters_per_token="
                f"{self.max_characters_per_token}"
            )
        if not (isinstance(self.char_padding_id, int) and 0 <= self.char_padding_id < self.n_characters):
            raise ValueError(
                f"char_padding_id must be in [0, n_characters={self.n_characters}), got {self.char_padding_id!r}"
            )
