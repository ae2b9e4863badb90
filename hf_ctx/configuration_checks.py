"""The checks of hf_ctx's config values, declared once per config and run on every road a value takes in.

A config lists its fields' checks in `field_checks` (field name -> check, built from the validators below) and
puts the rules that tie several fields together in one method, `check_fields_together`. [`CheckedConfig`]
runs them:

- a field's own check on every assignment: in `__init__`, in `from_pretrained(path, field=value)` and
  `from_dict` (which set overrides one by one), and in plain `config.field = value`;
- the rules between fields when the config is complete: at the end of `__init__`, of `from_dict` and
  `from_pretrained` (after the overrides), in `validate()`, which transformers runs when it saves a config,
  and when one of hf_ctx's models is built from it. (Not on each assignment: changing `hidden_size` and then
  `num_attention_heads` passes through a state that breaks the rule between them.)

This is the design of transformers 5's own configs (`huggingface_hub.dataclasses.strict`: validators on
assignment, `validate_*` class validators at init and save), written for configs that keep their explicit
`__init__` and that travel as remote code. Every failure is a `ValueError` naming the field, the value and what
is allowed. This module travels with the checkpoints of every config that imports it: it imports only the
standard library.
"""

import math
import os
import sys
from collections.abc import Callable, Iterable

# A check takes the field's name and its value, and raises ValueError when the value is not allowed.
Check = Callable[[str, object], None]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(name: str, value) -> None:
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def non_negative_int(zero_means: str) -> Check:
    """An integer >= 0, where 0 means `zero_means` (e.g. "no task LSTM")."""

    def check(name: str, value) -> None:
        if not _is_int(value) or value < 0:
            raise ValueError(f"{name} must be 0 ({zero_means}) or a positive integer, got {value!r}")

    return check


def probability(name: str, value) -> None:
    """A dropout probability, in [0, 1) (NaN is not)."""
    if not _is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


def positive_number(name: str, value) -> None:
    """A finite number > 0 (NaN and infinity are not)."""
    if not _is_number(value) or not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def finite_numbers(how_many: str) -> Check:
    """A list (or tuple) of finite numbers (NaN and infinity are not), such as a scalar mix's layer weights;
    `how_many` says how many ("one per biLM layer"): the caller, who knows the count, checks it. The one check of
    such weights: `ElmoConfig.scalar_mix_parameters`, `layers.ScalarMix`, `hf_ctx.allennlp.Elmo` and `hf-ctx
    embed --scalar_mix_weights` use it."""

    def check(name: str, value) -> None:
        if not isinstance(value, (list, tuple)) or not all(_is_number(v) and math.isfinite(v) for v in value):
            raise ValueError(f"{name} must be a list of finite numbers, {how_many}, got {value!r}")

    return check


def boolean(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


def one_of(choices: Iterable) -> Check:
    choices = tuple(choices)

    def check(name: str, value) -> None:
        if value not in choices:
            raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")

    return check


def optional(check: Check, none_means: str) -> Check:
    """`check`, or None, which means `none_means`."""

    def check_or_none(name: str, value) -> None:
        if value is None:
            return
        try:
            check(name, value)
        except ValueError as error:
            raise ValueError(f"{error} (or None: {none_means})") from None

    return check_or_none


def _is_label_id(value) -> bool:
    """A label id: an integer, or its digits (config.json's keys are strings)."""
    return _is_int(value) and value >= 0 or isinstance(value, str) and value.isdigit()


def id_to_label(name: str, value) -> None:
    """`PreTrainedConfig.id2label`: None, or label id -> label name."""
    if value is not None and not (
        isinstance(value, dict) and all(_is_label_id(i) and isinstance(label, str) for i, label in value.items())
    ):
        raise ValueError(f"{name} must map label ids to label names, e.g. {{0: 'O', 1: 'B-PER'}}, got {value!r}")


def label_to_id(name: str, value) -> None:
    """`PreTrainedConfig.label2id`: None, or label name -> label id."""
    if value is not None and not (
        isinstance(value, dict) and all(isinstance(label, str) and _is_label_id(i) for label, i in value.items())
    ):
        raise ValueError(f"{name} must map label names to label ids, e.g. {{'O': 0, 'B-PER': 1}}, got {value!r}")


# The checks of `PreTrainedConfig`'s own fields that every hf_ctx config shares.
SHARED_FIELD_CHECKS = {"id2label": id_to_label, "label2id": label_to_id}


def _strict_dataclass_errors() -> tuple:
    """huggingface_hub's error for a config field of the wrong type, which subclasses only Exception (transformers
    before 5.18 checks PreTrainedConfig's own fields with it). Taken from the loaded modules, not imported: where
    transformers can raise it, it has loaded it."""
    error = getattr(sys.modules.get("huggingface_hub.errors"), "StrictDataclassError", None)
    return () if error is None else (error,)


# Class name -> each config class that mixes in CheckedConfig (hf_ctx's own), for `check_model_type_of`.
_CHECKED_CONFIGS: dict[str, type] = {}


def _config_file_being_read() -> str:
    """ "<folder>/config.json" of the `from_pretrained` call (transformers' AutoConfig or a config class's) that is
    reading the config now, found in its frame, as `remote_code._mismatched_shapes` finds a load report; "config.json"
    when none is found."""
    frame = sys._getframe(1)
    while frame is not None:
        source = frame.f_locals.get("pretrained_model_name_or_path")
        if isinstance(source, (str, os.PathLike)):
            source = os.fspath(source)
            return os.path.join(source, "config.json") if os.path.isdir(source) else f"config.json of {source}"
        frame = frame.f_back
    return "config.json"


def check_model_type_of(config_class: type | None, config_dict: dict, config_file: str | None = None) -> None:
    """A `ValueError` naming the config file when `config_dict` (a config.json) lies about its type, or is read
    as another class than its own: its `auto_map` (which hf_ctx writes into every checkpoint) names an hf_ctx
    config class of another `model_type` than the file's (a `model_type` edited by hand or by an attacker), or
    its `model_type` is not `config_class`'s (None: only the first check). Read as the wrong class, its fields
    failed with errors naming neither the file nor the type (`classifier_dropout must be in [0, 1), got None`),
    or transformers asked whether to run the folder's code. `config_file` names the file (default: that of the
    `from_pretrained` reading it)."""
    if not isinstance(config_dict, dict):
        return
    config_file = config_file or _config_file_being_read()
    model_type = config_dict.get("model_type")
    auto_map = config_dict.get("auto_map")
    saved_by = auto_map.get("AutoConfig") if isinstance(auto_map, dict) else None
    saved_class = _CHECKED_CONFIGS.get(saved_by.rsplit(".", 1)[-1]) if isinstance(saved_by, str) else None
    if saved_class is not None and saved_class.model_type != model_type:
        raise ValueError(
            f"{config_file} has model_type {model_type!r}, but was saved by {saved_class.__name__} "
            f"(its auto_map), whose model_type is {saved_class.model_type!r}: the file was edited, or mixes two "
            "models' configs; restore its model_type, or copy the checkpoint again"
        )
    if config_class is not None and model_type is not None and model_type != config_class.model_type:
        raise ValueError(
            f"{config_file} has model_type {model_type!r}, not {config_class.model_type!r}: it is "
            f"not a {config_class.__name__} config; load it with the classes of its own model type (or AutoModel)"
        )


class CheckedConfig:
    """Mix into a config class (before `PreTrainedConfig`) to run its `field_checks` and its
    `check_fields_together` on every road in (see the module docstring).

    `__init__` assigns every field (so each is checked) and calls `check_fields_together()` at its end.
    """

    # field name -> check; each config declares its own (SHARED_FIELD_CHECKS are added to them).
    field_checks: dict = {}

    def check_fields_together(self) -> None:
        """The rules between fields; a config overrides this. Raise ValueError naming the fields and values."""

    def __setattr__(self, name, value):
        check = type(self).field_checks.get(name) or SHARED_FIELD_CHECKS.get(name)
        if check is not None:
            check(name, value)
        super().__setattr__(name, value)

    def validate(self) -> None:
        """Every field's check, then the rules between fields (and transformers' own checks)."""
        super().validate()
        for name, check in {**SHARED_FIELD_CHECKS, **type(self).field_checks}.items():
            check(name, getattr(self, name))
        self.check_fields_together()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' `from_pretrained`; a value of the wrong kind in a local folder's config.json (a string
        where a size belongs, a list where a mapping belongs) is a `ValueError` naming the file."""
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except (ValueError, TypeError, AttributeError, KeyError, *_strict_dataclass_errors()) as error:
            source = (
                os.fspath(pretrained_model_name_or_path)
                if isinstance(pretrained_model_name_or_path, (str, os.PathLike))
                else None
            )
            config_file = os.path.join(source, "config.json") if source and os.path.isdir(source) else source
            if config_file is None or not os.path.isfile(config_file):
                raise
            reason = " ".join(str(error).split())  # one line (huggingface_hub's message spans several)
            if reason.startswith(config_file):  # named already (`check_model_type_of`)
                raise
            reason = reason if isinstance(error, ValueError) else f"a value of the wrong kind ({reason})"
            raise ValueError(f"{config_file}: {reason}") from error

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _CHECKED_CONFIGS[cls.__name__] = cls

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        check_model_type_of(cls, config_dict)
        result = super().from_dict(config_dict, **kwargs)
        # transformers sets the keyword overrides one by one after `__init__`: check the whole again.
        (result[0] if isinstance(result, tuple) else result).validate()
        return result
