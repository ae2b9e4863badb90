"""Configuration of hf_ctx's ELMo biLM (Peters et al., 2018, "Deep contextualized word representations")."""

import copy

from transformers import PreTrainedConfig

from .configuration_checks import (
    CheckedConfig,
    boolean,
    finite_numbers,
    non_negative_int,
    one_of,
    optional,
    positive_int,
    positive_number,
    probability,
)
from .elmo_characters import MAX_SENTENCE_WORDS, N_CHARACTERS
from .tag_schemes import SCHEME_NAMES

# How the task models normalise each frozen biLM layer's features (`ElmoConfig.bilm_state_norm`).
BILM_STATE_NORMS = ("none", "center", "standardize")

# The `char_cnn` and `lstm` sections of bilm-tf's options.json, with the values of the original model.
DEFAULT_CHAR_CNN = {
    "activation": "relu",
    "embedding": {"dim": 16},
    "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
    "max_characters_per_token": 50,
    "n_characters": 262,
    "n_highway": 2,
}
DEFAULT_LSTM = {
    "dim": 4096,
    "projection_dim": 512,
    "n_layers": 2,
    "cell_clip": 3.0,
    "proj_clip": 3.0,
    "use_skip_connections": True,
}

# The published English models (allennlp.org/elmo), named as their files are. All use the 2048-filter character
# CNN above and clip cells and projections at 3; they differ in LSTM size, projection size and highway layers.
ELMO_PRESETS = {
    "original": {
        "char_cnn": {"n_highway": 2},
        "lstm": {"dim": 4096, "projection_dim": 512},
    },  # 2x4096_512_2048cnn_2xhighway
    "medium": {
        "char_cnn": {"n_highway": 1},
        "lstm": {"dim": 2048, "projection_dim": 256},
    },  # 2x2048_256_2048cnn_1xhighway
    "small": {
        "char_cnn": {"n_highway": 1},
        "lstm": {"dim": 1024, "projection_dim": 128},
    },  # 2x1024_128_2048cnn_1xhighway
}

ACTIVATIONS = ("relu", "tanh")


def _merge(defaults: dict, given: dict | None, section: str) -> dict:
    """`given` over a copy of `defaults`, one level deep; unknown keys are an error naming them."""
    merged = copy.deepcopy(defaults)
    if given is not None and not isinstance(given, dict):
        raise ValueError(f"{section} must be a dict of options ({sorted(defaults)}), got {given!r}")
    for key, value in (given or {}).items():
        if key not in defaults:
            raise ValueError(f"unknown {section} option {key!r}; known options: {sorted(defaults)}")
        merged[key] = copy.deepcopy(value)
    return merged


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_word_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_section_keys(name: str, section, defaults: dict) -> None:
    if not isinstance(section, dict):
        raise ValueError(f"{name} must be a dict of options ({sorted(defaults)}), got {section!r}")
    unknown, missing = sorted(set(section) - set(defaults)), sorted(set(defaults) - set(section))
    if unknown or missing:
        raise ValueError(f"{name} options: unknown {unknown}, missing {missing}; known options: {sorted(defaults)}")


def _check_char_cnn(name: str, char_cnn) -> None:
    """The `char_cnn` section: every key of `DEFAULT_CHAR_CNN`, each valid."""
    _check_section_keys(name, char_cnn, DEFAULT_CHAR_CNN)
    if char_cnn["activation"] not in ACTIVATIONS:
        raise ValueError(f"char_cnn activation must be one of {ACTIVATIONS}, got {char_cnn['activation']!r}")
    embedding = char_cnn["embedding"]
    if not isinstance(embedding, dict) or not _is_positive_int(embedding.get("dim")):
        raise ValueError(f"char_cnn embedding must be {{'dim': positive int}}, got {embedding!r}")
    if char_cnn["n_characters"] != N_CHARACTERS:
        raise ValueError(
            f"char_cnn n_characters must be {N_CHARACTERS} (256 bytes, 5 marks and the padding id 0), got "
            f"{char_cnn['n_characters']!r}; bilm-tf's training options say 261 because they have no padding id"
        )
    max_chars = char_cnn["max_characters_per_token"]
    if not _is_positive_int(max_chars) or max_chars < 3:
        raise ValueError(f"char_cnn max_characters_per_token must be an integer >= 3, got {max_chars!r}")
    filters = char_cnn["filters"]
    if (
        not isinstance(filters, (list, tuple))
        or not filters
        or not all(
            isinstance(f, (list, tuple)) and len(f) == 2 and all(_is_positive_int(v) for v in f) for f in filters
        )
    ):
        raise ValueError(
            f"char_cnn filters must be a non-empty list of [width, count] positive pairs, got {filters!r}"
        )
    widest = max(width for width, _ in filters)
    if widest > max_chars:
        raise ValueError(f"char_cnn filter width {widest} is wider than max_characters_per_token={max_chars}")
    n_highway = char_cnn["n_highway"]
    if not isinstance(n_highway, int) or isinstance(n_highway, bool) or n_highway < 0:
        raise ValueError(f"char_cnn n_highway must be a non-negative integer, got {n_highway!r}")


def _check_lstm(name: str, lstm) -> None:
    """The `lstm` section: every key of `DEFAULT_LSTM`, each valid."""
    _check_section_keys(name, lstm, DEFAULT_LSTM)
    for key in ("dim", "projection_dim", "n_layers"):
        positive_int(f"lstm {key}", lstm[key])
    if lstm["projection_dim"] > lstm["dim"]:
        raise ValueError(f"lstm projection_dim ({lstm['projection_dim']}) must not be larger than dim ({lstm['dim']})")
    for key in ("cell_clip", "proj_clip"):  # NaN is refused: it would make every LSTM output NaN
        optional(positive_number, "no clipping")(f"lstm {key}", lstm[key])
    boolean("lstm use_skip_connections", lstm["use_skip_connections"])


def _check_num_output_representations(name: str, value) -> None:
    positive_int(name, value)
    one_of((1, 2))(name, value)


class ElmoConfig(CheckedConfig, PreTrainedConfig):
    r"""
    Configuration of the ELMo biLM ([`ElmoModel`], [`ElmoForBiLM`]) and of the task models built on it
    ([`ElmoForSequenceClassification`], [`ElmoForTokenClassification`]). The defaults give the original ELMo
    (2x4096_512_2048cnn_2xhighway); [`ElmoConfig.from_preset`] gives the published sizes.

    `char_cnn` and `lstm` are the sections of the options.json file that bilm-tf writes and AllenNLP reads, with the
    same keys, so that a published options file maps onto this config unchanged (see `hf_ctx.tools.convert_elmo`).
    Keys left out take the original model's values.

    Args:
        char_cnn (`dict`): the context-independent token representation.
            - `activation` (`"relu"` or `"tanh"`): applied after max-pooling each filter.
            - `embedding` (`{"dim": int}`): size of the learned character embeddings.
            - `filters` (`[[width, count], ...]`): convolution widths (in characters) and filter counts; their
              outputs are concatenated (2048 filters in the published models).
            - `n_highway` (`int`): highway layers after the convolutions (0 for none).
            - `max_characters_per_token` (`int`, 50): characters per word, begin/end-of-word marks included.
            - `n_characters` (`int`, 262): size of the character vocabulary (must be 262: 256 bytes, 5 marks,
              1 padding id).
        lstm (`dict`): the bidirectional LSTM stack.
            - `dim` (`int`): LSTM memory cell size.
            - `projection_dim` (`int`): size of the projected hidden state, which is also the size of the token
              representation and of each direction's output; `dim` == `projection_dim` means no projection.
            - `n_layers` (`int`): LSTM layers per direction.
            - `cell_clip`, `proj_clip` (`float` or `None`): clip memory cells / projected states to
              [-clip, clip]; `None` turns clipping off (and lets the model use cuDNN's LSTM).
            - `use_skip_connections` (`bool`): add each layer's input to its output (from the second layer on).
        vocab_size (`int`, *optional*): size of the word vocabulary the language-model softmax predicts
            (the tokenizer's); needed by [`ElmoForBiLM`] only.
        dropout (`float`, defaults to 0.1): dropout on each LSTM layer's input and on the states the softmax reads,
            while pretraining (bilm-tf's `dropout`).
        share_softmax (`bool`, defaults to `True`): one softmax for the forward and the backward LM, as in ELMo;
            `False` gives each direction its own.
        num_sampled (`int`, defaults to 0): 0 trains with the full softmax; N > 0 trains with a sampled softmax over
            N words drawn from a log-uniform (Zipfian) distribution, which assumes word ids sorted by decreasing
            frequency (the original used 8192). Evaluation always uses the full softmax.
        bos_token_id, eos_token_id, unk_token_id (`int`): ids of `<S>`, `</S>`, `<UNK>` in the word vocabulary.
        freeze_bilm (`bool`, defaults to `True`): task models keep the biLM fixed (no gradients, no dropout) and
            train only the scalar mix and the task layers, as in the paper.
        scalar_mix_layer_norm (`bool`, defaults to `False`): layer-normalise each biLM layer (over the words of the
            batch) before the task's scalar mix.
        scalar_mix_parameters (`list[float]`, *optional*): fixed pre-softmax weights of the L + 1 biLM layers in
            the task models' scalar mixes (AllenNLP's `Elmo(scalar_mix_parameters=...)`): the mixes are not
            trained then (their weights nor their scale gamma, which stays 1); e.g. `[-1e4, 1, -1e4]` takes
            the middle layer alone. `None` (the default): the weights are learned, from equal ones.
        bilm_state_norm (`str`, defaults to `"center"`): what the task models do to each biLM layer's features
            before the scalar mix, with batch statistics in training and running averages in evaluation:
            `"center"` subtracts each feature's mean over the words, `"standardize"` also divides by its standard
            deviation, `"none"` leaves them. A biLM's layers share a large component across all words (its ReLU
            character features are all positive); uncentred, a task LSTM on them barely learns. Running
            statistics start as the identity, so a task checkpoint saved without the field predicts as before.
            As with batch normalisation, training depends on the batch: micro-batches of gradient accumulation
            are centred each on its own words, and a batch should hold more than a sentence or two.
        task_hidden_size (`int`, defaults to 256): units per direction of the task models' bidirectional LSTM over
            the mixed ELMo vectors; 0 puts the classifier directly on them.
        task_word_embedding_size (`int`, defaults to 0): task models also look up each word of the word vocabulary
            (`input_word_ids`, which the tokenizer gives when it has a vocabulary) in a trainable table of this
            size and concatenate it to the ELMo vectors: the paper's recipe, which adds ELMo to a task model's own
            word vectors. 0: ELMo vectors only. Needs `vocab_size`.
        classifier_dropout (`float`, defaults to 0.5): dropout on the ELMo vectors and before the classifier.
        max_sentence_words (`int`, defaults to 1024): the longest input, in words, the model accepts; a longer one
            is an error naming its length (memory and time grow with it). The tokenizer's `model_max_length` is
            the same limit: `truncation=True` keeps a sentence's first `model_max_length` words.
        num_output_representations (`int`, defaults to 1): scalar mixes of the biLM layers in the task models, as
            AllenNLP's `Elmo` module: 1 feeds one mix to the task LSTM; 2 adds a second, separately learned mix
            concatenated to the task LSTM's output (to the first mix when there is no task LSTM), ELMo "at the
            input and the output of the task RNN" (Peters et al., 2018, section 3.3).
        use_crf (`bool`, defaults to `False`): [`ElmoForTokenClassification`] decodes with a linear-chain CRF
            over the words instead of tagging each word on its own; see that class.
        tag_scheme (`str`, *optional*): with `use_crf`, `"BIO"` (= `"IOB2"`), `"IOB1"`, `"BIOES"` or `"BIOUL"`
            (= `"BILOU"`) forbids the CRF transitions that scheme does not allow between the labels of `id2label`;
            `None` allows every transition.

    Example:
    ```python
    >>> from hf_ctx import ElmoConfig, ElmoForBiLM
    >>> config = ElmoConfig.from_preset("small", vocab_size=50000)
    >>> model = ElmoForBiLM(config)
    ```
    """

    model_type = "hf_ctx_elmo"

    def __init__(
        self,
        char_cnn=None,
        lstm=None,
        vocab_size=None,
        dropout=0.1,
        share_softmax=True,
        num_sampled=0,
        bos_token_id=0,
        eos_token_id=1,
        unk_token_id=2,
        freeze_bilm=True,
        scalar_mix_layer_norm=False,
        scalar_mix_parameters=None,
        bilm_state_norm="center",
        task_hidden_size=256,
        task_word_embedding_size=0,
        classifier_dropout=0.5,
        max_sentence_words=MAX_SENTENCE_WORDS,
        num_output_representations=1,
        use_crf=False,
        tag_scheme=None,
        **kwargs,
    ):
        # Sections given in part take the original model's values for the keys left out.
        char_cnn = _merge(DEFAULT_CHAR_CNN, char_cnn, "char_cnn")
        lstm = _merge(DEFAULT_LSTM, lstm, "lstm")
        self.char_cnn = char_cnn
        self.lstm = lstm
        self.vocab_size = vocab_size
        self.dropout = dropout
        self.share_softmax = share_softmax
        self.num_sampled = num_sampled
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.unk_token_id = unk_token_id
        self.freeze_bilm = freeze_bilm
        self.scalar_mix_layer_norm = scalar_mix_layer_norm
        self.scalar_mix_parameters = (
            list(scalar_mix_parameters) if isinstance(scalar_mix_parameters, tuple) else scalar_mix_parameters
        )
        self.bilm_state_norm = bilm_state_norm
        self.task_hidden_size = task_hidden_size
        self.task_word_embedding_size = task_word_embedding_size
        self.classifier_dropout = classifier_dropout
        self.max_sentence_words = max_sentence_words
        self.num_output_representations = num_output_representations
        self.use_crf = use_crf
        self.tag_scheme = tag_scheme
        kwargs.setdefault("tie_word_embeddings", False)  # nothing to tie: the input is characters
        super().__init__(**kwargs)
        self.check_fields_together()

    # The sizes a checkpoint's weights show (see `CtxBertConfig.sizes_in_weights`); "char_cnn.filters" counts
    # the convolutions.
    sizes_in_weights = {
        "char_cnn.n_highway": (r"(?:^|\.)char_cnn\.highway\.layers\.(\d+)\.", None),
        "char_cnn.filters": (r"(?:^|\.)char_cnn\.convolutions\.(\d+)\.", None),
        "char_cnn.embedding.dim": (r"(?:^|\.)char_cnn\.char_embeddings\.weight$", 1),
        "lstm.n_layers": (r"(?:^|\.)encoder\.forward_layers\.(\d+)\.", None),
        "lstm.dim": (r"(?:^|\.)encoder\.forward_layers\.0\.weight_hr$", 1),
        "lstm.projection_dim": (r"(?:^|\.)encoder\.forward_layers\.0\.weight_hr$", 0),
        "vocab_size": (r"^softmax\.weight$", 0),
        "task_hidden_size": (r"^task_encoder\.weight_hh_l0$", 1),
    }

    # Each field's own check, run on every assignment (see `configuration_checks`).
    field_checks = {
        "char_cnn": _check_char_cnn,
        "lstm": _check_lstm,
        "vocab_size": optional(positive_int, "no word vocabulary"),
        "dropout": probability,
        "classifier_dropout": probability,
        "share_softmax": boolean,
        "num_sampled": non_negative_int("full softmax"),
        "freeze_bilm": boolean,
        "scalar_mix_layer_norm": boolean,
        # The count is checked against the layers in `check_fields_together`.
        "scalar_mix_parameters": optional(finite_numbers("one per biLM layer"), "learned"),
        "bilm_state_norm": one_of(BILM_STATE_NORMS),
        "task_hidden_size": non_negative_int("no task LSTM"),
        "task_word_embedding_size": non_negative_int("ELMo vectors only"),
        "max_sentence_words": positive_int,
        "num_output_representations": _check_num_output_representations,
        "use_crf": boolean,
        "tag_scheme": optional(one_of(SCHEME_NAMES), "every transition allowed"),
    }

    def check_fields_together(self) -> None:
        for name in ("bos_token_id", "eos_token_id", "unk_token_id"):
            value, vocab_size = getattr(self, name), self.vocab_size
            if not _is_word_id(value) or (vocab_size is not None and value >= vocab_size):
                raise ValueError(f"{name} must be a word id in [0, vocab_size={vocab_size}), got {value!r}")
        if self.task_word_embedding_size and self.vocab_size is None:
            raise ValueError("task_word_embedding_size needs vocab_size (the word vocabulary the task embeds)")
        weights = self.scalar_mix_parameters
        if weights is not None and len(weights) != self.num_output_layers:
            raise ValueError(
                f"scalar_mix_parameters has {len(weights)} values; this ELMo has {self.num_output_layers} layers "
                f"(the token layer and lstm n_layers={self.lstm['n_layers']}), one weight each"
            )

    @property
    def projection_dim(self) -> int:
        """Size of the token representation and of each direction's LSTM output."""
        return self.lstm["projection_dim"]

    @property
    def hidden_size(self) -> int:
        """Size of every output layer: forward and backward concatenated, 2 * projection_dim."""
        return 2 * self.lstm["projection_dim"]

    @property
    def num_output_layers(self) -> int:
        """L + 1: the token layer and the L biLSTM layers."""
        return self.lstm["n_layers"] + 1

    @property
    def max_characters_per_token(self) -> int:
        return self.char_cnn["max_characters_per_token"]

    @classmethod
    def from_preset(cls, name: str, **kwargs) -> "ElmoConfig":
        """A config of a published size (`ELMO_PRESETS`: "original", "medium", "small").

        `kwargs` override any field; `char_cnn` and `lstm` override the preset's sections key by key, e.g.
        `ElmoConfig.from_preset("small", lstm={"n_layers": 1}, vocab_size=10000)`.
        """
        if name not in ELMO_PRESETS:
            raise ValueError(f"unknown ELMo preset {name!r}; choose one of {list(ELMO_PRESETS)}")
        preset = copy.deepcopy(ELMO_PRESETS[name])
        for section, defaults in (("char_cnn", DEFAULT_CHAR_CNN), ("lstm", DEFAULT_LSTM)):
            preset[section] = _merge(_merge(defaults, preset[section], section), kwargs.pop(section, None), section)
        return cls(**preset, **kwargs)
