"""hf_ctx's model families, one registry: one `ModelFamily` record per family, which the Auto registration
(`hf_ctx/__init__.py`), the example scripts, the model cards and `paths.check_model_type` read.

A family is named by a short word ("bert", "elmo", "taglm") and recognised in a checkpoint by its config's
`model_type` ("hf_ctx_bert", ...). Its record names its config class, its model class per task, its tokenizer
class, and the few things that differ between families when a script builds a new model: how the tokenizer is
made when none is named, which config fields come from the tokenizer, which tokenizers the models can read, and
what a pretrained biLM is to it. Everything else (encoding, label alignment, collating) is one path for every
family, chosen at most by `words_are_tokens`.

This module is used from the installed package; it never travels with a checkpoint (the flat configuration,
modeling and tokenizer modules it imports must never import it).
"""

import inspect
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import transformers

from .. import (
    configuration_bert,
    configuration_elmo,
    configuration_taglm,
    modeling_bert,
    modeling_elmo,
    modeling_taglm,
)
from ..data.atomic_write import write_text
from ..data.wordpiece import train_wordpiece_tokenizer
from ..remote_code import check_tokenizer_fits_model
from ..tokenization_elmo import ElmoTokenizer

logger = logging.getLogger(__name__)

# Task -> the transformers Auto class that loads a model for it: the one table the registration reads.
AUTO_CLASSES = {
    task: getattr(transformers, auto_class)
    for task, auto_class in {
        "base": "AutoModel",
        "pretraining": "AutoModelForPreTraining",
        "masked_lm": "AutoModelForMaskedLM",
        "next_sentence": "AutoModelForNextSentencePrediction",
        "sequence_classification": "AutoModelForSequenceClassification",
        "token_classification": "AutoModelForTokenClassification",
        "question_answering": "AutoModelForQuestionAnswering",
        "multiple_choice": "AutoModelForMultipleChoice",
    }.items()
}


@dataclass(frozen=True)
class ModelFamily:
    """One model family.

    Args:
        name: the short name ("bert"): `--model_type`, the model-card template `model_cards/<name>.md`.
        config_class: its `PretrainedConfig`; its `model_type` marks the family's checkpoints.
        models: task (a key of `AUTO_CLASSES`) -> the model class for it, for the tasks the family has.
        tokenizer_class: what `AutoTokenizer` loads for the family's checkpoints.
        words_are_tokens: the tokenizer gives one position per word (ELMo's characters, TagLM's words), so
            lengths count words; else sub-words (BERT), and a word may cost several positions.
        new_tokenizer: a new model's tokenizer where none is named (`make_tokenizer` calls it): a function of
            the options it uses of `words` (the training sentences), `vocab_size` and `min_count`.
        tokenizer_fields: `tokenizer -> dict`: the config fields a new model takes from its tokenizer.
        check_tokenizer: `(tokenizer, source) -> None`: raises a ValueError naming `source` when the family's
            models cannot read what `tokenizer` gives; None where any tokenizer does.
        bilm_use: what a pretrained biLM (`--bilm_name_or_path`) is to a new model: "none" (the family builds on
            no biLM: BERT), "starts_from" (the new model is the biLM checkpoint with a new head, and needs one:
            ELMo) or "may_build_on" (built on one with its model class's `from_bilm`, or without: TagLM).
        presets: size preset name -> config fields (`config_class.from_preset`).
        gpu_defaults: Trainer options a GPU run of the family's taggers gets unless given.
        title: the family's name in text ("TagLM").
        learning_rates: task (a key of `AUTO_CLASSES`) -> the learning rate the example scripts train the family's
            model for that task with when `--learning_rate` is not given, chosen by a measured sweep
            (docs/results.md#default-learning-rates); a task without one keeps transformers' 5e-5.
        learning_rates_up_to_width: the widest model (`config.hidden_size`) the sweeps measured those rates on;
            a wider pretrained checkpoint keeps transformers' 5e-5 (published checkpoints, wider, are fine-tuned at
            2e-5 to 5e-5, and a rate measured on a small model can wreck them). None: no limit.
    """

    name: str
    config_class: type
    models: dict[str, type]
    tokenizer_class: type
    words_are_tokens: bool
    new_tokenizer: Callable
    tokenizer_fields: Callable[[object], dict]
    check_tokenizer: Callable | None = None
    bilm_use: str = "none"
    presets: dict = field(default_factory=dict)
    gpu_defaults: dict = field(default_factory=dict)
    title: str = ""
    learning_rates: dict[str, float] = field(default_factory=dict)
    learning_rates_up_to_width: int | None = None

    def too_wide_for_learning_rates(self, config) -> bool:
        """Whether `config`'s model is wider than the models the family's learning rates were measured on."""
        width, limit = getattr(config, "hidden_size", None), self.learning_rates_up_to_width
        return limit is not None and width is not None and width > limit

    def config_has_field(self, name: str) -> bool:
        """Whether the family's config has the field `name` (e.g. TagLM's "tag_scheme")."""
        return name in inspect.signature(self.config_class.__init__).parameters

    def make_tokenizer(self, words=None, *, vocab_size: int | None = None, min_count: int | None = None, **options):
        """A new model's tokenizer where none is named: `new_tokenizer` given those of the training sentences'
        `words`, `vocab_size`, `min_count` and `options` it takes (`None`: its default). `None` when it needs the
        training words and there are none (a script must then be given a tokenizer)."""
        options = {"words": words, "vocab_size": vocab_size, "min_count": min_count, **options}
        takes = inspect.signature(self.new_tokenizer).parameters
        if "words" in takes and words is None:
            return None
        return self.new_tokenizer(**{k: v for k, v in options.items() if k in takes and v is not None})

    def new_config(self, preset: str | None, tokenizer, **fields):
        """A new model's config: the size `preset` (None, or a family without presets: the config class's
        defaults), sized to `tokenizer` (`tokenizer_fields`), with `fields` over both."""
        fields = {**self.tokenizer_fields(tokenizer), **fields}
        if preset is None or not self.presets:
            return self.config_class(**fields)
        return self.config_class.from_preset(preset, **fields)

    def load_config(self, name_or_path: str, tokenizer, **kwargs):
        """`--config_name`: a size preset of the family (sized to `tokenizer`) or a config.json / checkpoint
        folder, which must be of this family. `kwargs`: config fields, and `cache_dir`."""
        cache_dir = kwargs.pop("cache_dir", None)
        if name_or_path in self.presets:
            return self.new_config(name_or_path, tokenizer, **kwargs)
        config = transformers.AutoConfig.from_pretrained(name_or_path, cache_dir=cache_dir, **kwargs)
        expected = self.config_class.model_type
        if config.model_type != expected:
            raise ValueError(f"--config_name {name_or_path} is a {config.model_type!r} config, not {expected!r}")
        return config


# --- what differs between families ---------------------------------------------------------------------------


def _wordpiece_from_words(words, vocab_size=8000):
    """BERT: a cased WordPiece vocabulary of `vocab_size` trained on the training sentences."""
    with tempfile.TemporaryDirectory() as folder:
        text = os.path.join(folder, "wordpiece_training_text.txt")
        write_text(text, "".join(" ".join(tokens) + "\n" for tokens in words))
        logger.info("training a %d-token WordPiece vocabulary on the training sentences", vocab_size)
        return train_wordpiece_tokenizer([text], vocab_size=vocab_size, lowercase=False)


def _word_vocabulary_from_words(words, min_count=1, word_vectors=None, max_vector_words=None, characters=None):
    """TagLM: an `ElmoTokenizer` whose word vocabulary is the training words seen `min_count` times. With
    `word_vectors`, the vectors' first `max_vector_words` words (None: all) join them and words are looked up
    lower-cased, as lower-cased vectors such as GloVe are, so that a word the training sentences lack still gets
    its vector. `characters`: the tokenizer of the biLM the tagger reads, whose character width and word splitter
    the new tokenizer keeps."""
    from ..data.bilm import build_vocabulary, count_words  # data/ needs `datasets`, which `import hf_ctx` does not
    from ..data.word_vectors import vector_words

    lowercase = word_vectors is not None
    counts = count_words([[w.lower() for w in sentence] for sentence in words] if lowercase else words)
    vocabulary = build_vocabulary(counts, min_count)
    training_words = len(vocabulary) - 3
    if word_vectors is not None:
        known = set(vocabulary)
        vocabulary += [w for w in vector_words(word_vectors, max_vector_words) if w not in known]
    reads = {}
    if characters is not None:
        reads = {"max_characters_per_token": characters.max_characters_per_token}
        reads["word_splitter"] = characters.word_splitter
    tokenizer = ElmoTokenizer(vocab=vocabulary, lowercase_words=lowercase, **reads)
    logger.info(
        f"word vocabulary: {training_words:,} of the {len(counts):,} training words"
        + (f", then {len(vocabulary) - 3 - training_words:,} more of {word_vectors}" if lowercase else "")
        + (" (looked up lower-cased)" if lowercase else "")
    )
    return tokenizer


def _characters_only():
    """ELMo: the biLM reads characters, so a new model needs no vocabulary."""
    return ElmoTokenizer()


def is_elmo_tokenizer(tokenizer) -> bool:
    """Whether `tokenizer` is an ElmoTokenizer: hf_ctx's class, or the copy a checkpoint's remote code loaded
    (`trust_remote_code=True`), which is another class of the same name."""
    return any(cls.__name__ == ElmoTokenizer.__name__ for cls in type(tokenizer).__mro__)


def _check_reads_characters(tokenizer, source) -> None:
    if not is_elmo_tokenizer(tokenizer):
        raise ValueError(
            f"an ELMo model reads ElmoTokenizer's character ids; {source} holds a {type(tokenizer).__name__}"
        )


def _check_word_vocabulary(tokenizer, source) -> None:
    if not is_elmo_tokenizer(tokenizer) or not tokenizer.has_word_vocabulary:
        raise ValueError(
            "TagLM needs an ElmoTokenizer with a word vocabulary (the biLM's, or built from the "
            f"training words); got {type(tokenizer).__name__}"
        )


BERT = ModelFamily(
    name="bert",
    config_class=configuration_bert.CtxBertConfig,
    models={
        "base": modeling_bert.CtxBertModel,
        "pretraining": modeling_bert.CtxBertForPreTraining,
        "masked_lm": modeling_bert.CtxBertForMaskedLM,
        "next_sentence": modeling_bert.CtxBertForNextSentencePrediction,
        "sequence_classification": modeling_bert.CtxBertForSequenceClassification,
        "token_classification": modeling_bert.CtxBertForTokenClassification,
        "question_answering": modeling_bert.CtxBertForQuestionAnswering,
        "multiple_choice": modeling_bert.CtxBertForMultipleChoice,
    },
    tokenizer_class=transformers.BertTokenizer,  # transformers' WordPiece tokenizer as it is
    words_are_tokens=False,
    new_tokenizer=_wordpiece_from_words,
    tokenizer_fields=lambda tokenizer: {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id},
    presets=configuration_bert.BERT_PRESETS,
    title="BERT",
    learning_rates={"pretraining": 3e-4, "token_classification": 1e-3},
    learning_rates_up_to_width=256,  # BERT mini, the size of the sweeps
)
ELMO = ModelFamily(
    name="elmo",
    config_class=configuration_elmo.ElmoConfig,
    models={
        "base": modeling_elmo.ElmoModel,
        "pretraining": modeling_elmo.ElmoForBiLM,
        "sequence_classification": modeling_elmo.ElmoForSequenceClassification,
        "token_classification": modeling_elmo.ElmoForTokenClassification,
    },
    tokenizer_class=ElmoTokenizer,
    words_are_tokens=True,
    new_tokenizer=_characters_only,
    tokenizer_fields=lambda tokenizer: {},
    check_tokenizer=_check_reads_characters,
    bilm_use="starts_from",
    presets=configuration_elmo.ELMO_PRESETS,
    title="ELMo",
    learning_rates={"pretraining": 1e-3, "token_classification": 3e-3},
)
TAGLM = ModelFamily(
    name="taglm",
    config_class=configuration_taglm.TagLMConfig,
    models={"base": modeling_taglm.TagLMModel, "token_classification": modeling_taglm.TagLMForTokenClassification},
    tokenizer_class=ElmoTokenizer,  # TagLM reads the biLM's characters and word ids
    words_are_tokens=True,
    new_tokenizer=_word_vocabulary_from_words,
    tokenizer_fields=lambda tokenizer: {
        "vocab_size": tokenizer.vocab_size,
        "max_characters_per_token": tokenizer.max_characters_per_token,
    },
    check_tokenizer=_check_word_vocabulary,
    bilm_use="may_build_on",
    # TagLM's steps are small: batches of 32 instead of 8 keep a GPU busy.
    gpu_defaults={"per_device_train_batch_size": 32, "per_device_eval_batch_size": 32},
    title="TagLM",
    learning_rates={"token_classification": 1e-2},
)

# Family name -> its record.
MODEL_FAMILIES: dict[str, ModelFamily] = {family.name: family for family in (BERT, ELMO, TAGLM)}


def families_with(task: str) -> list[str]:
    """The names of the families that have a model for `task` (a key of `AUTO_CLASSES`)."""
    return [name for name, family in MODEL_FAMILIES.items() if task in family.models]


def preset_names(names) -> str:
    """The size presets of the families `names`, for a script's help: "bert's ['tiny', ...], elmo's [...]"."""
    return ", ".join(f"{name}'s {list(MODEL_FAMILIES[name].presets)}" for name in names)


def find_family(config) -> ModelFamily | None:
    """The record of an hf_ctx config's family; None for a config of another library (a transformers BERT)."""
    return next((f for f in MODEL_FAMILIES.values() if config.model_type == f.config_class.model_type), None)


def model_family(config) -> str:
    """The family of an hf_ctx config: "bert", "elmo" or "taglm".

    Raises a `ValueError` naming the `model_type` for a config of another library's model.
    """
    family = find_family(config)
    if family is not None:
        return family.name
    model_types = [family.config_class.model_type for family in MODEL_FAMILIES.values()]
    raise ValueError(
        f"{config.model_type!r} is not an hf_ctx model type (hf_ctx's are {model_types}); a transformers "
        "BERT checkpoint converts with `hf-ctx convert-bert`"
    )


def check_tokenizer_fits(config, tokenizer, max_seq_length: int | None, source, pair: bool = False) -> None:
    """The one check of a tokenizer (loaded from `source`) and `--max_seq_length` against a model's config, for a
    model of any library: the family's own check of what its models read, then the limits the config states
    (`max_position_embeddings`, `vocab_size`; a config without them has none), and room for text beside the special
    tokens the tokenizer adds to one text (or, with `pair`, to a pair of texts)."""
    family = find_family(config)
    if family is not None and family.check_tokenizer is not None:
        family.check_tokenizer(tokenizer, source)
    max_positions = getattr(config, "max_position_embeddings", None)
    if max_seq_length is not None and max_positions is not None and max_seq_length > max_positions:
        raise ValueError(
            f"--max_seq_length {max_seq_length} exceeds the model's max_position_embeddings ({max_positions})"
        )
    specials = tokenizer.num_special_tokens_to_add(pair=pair) if max_seq_length is not None else 0
    if max_seq_length is not None and max_seq_length <= specials + pair:
        raise ValueError(
            f"--max_seq_length {max_seq_length} leaves no room for the text: the tokenizer adds {specials} special "
            f"tokens to {'a pair of texts' if pair else 'a text'}, so give more than {specials + pair}"
        )
    check_tokenizer_fits_model(config, tokenizer, source)
