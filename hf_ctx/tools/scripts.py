"""What the example scripts (`examples/*.py`) share between their arguments and their end, so that they stay thin:
parsing and set-up (logging, seed, argument checks), the arguments several scripts take (`--config_overrides`,
the model-building options, the text-corpus options of the pretraining scripts), GPU defaults, the examples a run
keeps, the tokenizer it reads with, and the train / evaluate steps with their metric files.

A training run saves its checkpoint and model card with `hf_ctx.tools.hub.save_run` before it predicts (errors
there pass through `after_saving`) and ends with `hf_ctx.tools.hub.finish_run` (the card's test scores,
`--push_to_hub`); both read the card's facts from the Trainer and the parsed arguments.
"""

import contextlib
import copy
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import datasets
import huggingface_hub.utils.logging
import torch
import transformers
from transformers import HfArgumentParser, Trainer, TrainingArguments

from ..data.subsets import first_examples
from . import option_kinds as kinds
from .argument_checks import (
    PATH_ARGUMENTS,
    check_bilm_argument,
    check_conflicting_arguments,
    check_mixed_precision,
    check_push_to_hub,
    check_training_arguments,
)
from .errors import USER_ERRORS, SameOnEveryRank
from .families import MODEL_FAMILIES, families_with, find_family, preset_names
from .loading import load_tokenizer
from .output_files import lock_output
from .paths import check_output_dir, prepare_output_dir
from .trainer import progress_to_terminal

logger = logging.getLogger(__name__)


def setup_logging(training_args: TrainingArguments, logger: logging.Logger) -> None:
    """Set up what an example script prints: log records to stdout and a short header.

    `logger` (the script's) and hf_ctx log at INFO on the processes that should log (`training_args.should_log`:
    the main one, unless `--log_on_each_node` and friends say otherwise) and at WARNING on the others;
    `--log_level` / `--log_level_replica` set another level. transformers and `datasets` keep their own default
    (WARNING), so the Trainer prints its progress bar and metrics but not its INFO chatter (every config it
    loads, every file it saves), unless `--log_level info` asks for it; huggingface_hub's warnings are printed
    once, by its own handler. Without an accelerator,
    `dataloader_pin_memory` is turned off: pinned memory only serves copies to a GPU, and the DataLoader warns
    about it on every run. Where the output goes to a file, not a terminal, it is made to read well there
    (`plain_output_for_files`). Then `logger` says which hf_ctx version and process this is.
    """
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", handlers=[logging.StreamHandler(sys.stdout)]
    )
    default_level = logging.INFO if training_args.should_log else logging.WARNING
    library_level = training_args.get_process_log_level()  # transformers' current level unless --log_level says
    asked = training_args.log_level if training_args.should_log else training_args.log_level_replica
    own_level = default_level if asked == "passive" else library_level
    for name in (logger.name, "hf_ctx"):
        logging.getLogger(name).setLevel(own_level)
    datasets.utils.logging.set_verbosity(logging.WARNING if asked == "passive" else library_level)
    transformers.utils.logging.set_verbosity(library_level)
    # huggingface_hub prints its warnings (an offline run's retries) with a handler of its own and also passes them
    # on to the root logger's: each came twice. transformers and datasets keep theirs to their own handler too.
    huggingface_hub.utils.logging.disable_propagation()
    if training_args.device.type == "cpu":
        training_args.dataloader_pin_memory = False
    if not progress_to_terminal():
        plain_output_for_files()
    logger.info(
        f"hf_ctx {importlib.metadata.version('hf_ctx')}, process {training_args.process_index} of {training_args.world_size} "
        f"on {training_args.device}"
    )


# A terminal's colour and style codes (transformers' LOAD REPORT writes them whatever the output is).
_ANSI_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _WithoutTerminalCodes(logging.Filter):
    """Removes terminal codes from each record a handler writes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "\x1b[" in message:
            record.msg, record.args = _ANSI_CODES.sub("", message), None
        return True


_WITHOUT_TERMINAL_CODES = _WithoutTerminalCodes()


def plain_output_for_files() -> None:
    """What a script prints, made to read well in a file: no progress bars of `datasets` (data preparation, the
    biLM cache) and transformers (loading weights), whose every redraw would be a line, and no terminal codes
    in the records of transformers' and the root logger's handlers. The Trainer's progress becomes a line every
    tenth of the steps (`hf_ctx.tools.trainer.ProgressLinesCallback`)."""
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    for handler in logging.getLogger("transformers").handlers + logging.getLogger().handlers:
        handler.addFilter(_WITHOUT_TERMINAL_CODES)  # once: a filter already there is not added again


class OptionParser(HfArgumentParser):
    """transformers' `HfArgumentParser` for the example scripts: every option is checked by the kind its field
    declares (`hf_ctx.tools.option_kinds`, the field's metadata "kind"; `TrainingArguments`' own fields by
    `TRAINING_OPTION_KINDS`) as soon as it is parsed, before any dataclass (and `TrainingArguments`' own checks)
    is built, and a parse error is one line (a `ValueError`: status 1), not 140 lines of usage."""

    # Metadata keys of hf_ctx's, which argparse's `add_argument` does not take.
    OWN_METADATA = ("kind", "read_by")

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, **kwargs)
        kinds.read_negative_numbers_as_values(self)  # `--bilm_layers -2,-1` a value, not an option
        self.option_kinds = {f"--{name}": kind for name, kind in kinds.option_kinds(self.dataclass_types).items()}

    @staticmethod
    def _parse_dataclass_field(parser, field):
        if any(key in field.metadata for key in OptionParser.OWN_METADATA):
            field = copy.copy(field)
            field.metadata = MappingProxyType(
                {key: value for key, value in field.metadata.items() if key not in OptionParser.OWN_METADATA}
            )
        HfArgumentParser._parse_dataclass_field(parser, field)

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        namespace, remaining = super().parse_known_args(args, namespace)
        defaults = {f"--{action.dest}": action.default for action in self._actions}
        values = {f"--{name}": value for name, value in vars(namespace).items()}
        kinds.check_options(self.option_kinds, values, defaults)
        return namespace, remaining

    def error(self, message):
        raise ValueError(kinds.parse_error_line(message, getattr(self, "_argv", sys.argv[1:])))


def parse_options(argument_classes: tuple, argv: list[str] | None) -> tuple:
    """The command line `argv` (`None`: `sys.argv`) parsed into one instance per class, each option checked by its
    kind (`OptionParser`)."""
    return tuple(OptionParser(argument_classes).parse_args_into_dataclasses(args=argv))


def parse_args_and_set_up(
    argument_classes: tuple,
    argv: list[str] | None,
    logger: logging.Logger,
    *,
    ignored_together: Iterable[tuple[str, str]] = (),
    steps: tuple[str, ...] = ("do_train", "do_eval", "do_predict"),
) -> tuple:
    """The start of every example script: parse the command line, each option checked by its kind
    (`OptionParser`), set up logging, seed everything, refuse arguments the run could not use or would ignore
    (see `hf_ctx.tools.argument_checks`), and make this run the one writer of
    `--output_dir` (`hf_ctx.tools.output_files.lock_output`: a second run into the same folder is an error; the
    temporaries a killed run left there are removed). A folder that holds an earlier run's model, checkpoints or
    results is refused unless `--overwrite_output_dir` or `--resume_from_checkpoint` says what to do with them
    (`hf_ctx.tools.paths.prepare_output_dir`). `--push_to_hub` creates its repository, so that a push the
    Hub would refuse is one line before training (`hf_ctx.tools.argument_checks.check_push_to_hub`): before the
    folder is made where there is none yet, else after its checks.

    Args:
        argument_classes: the script's argument dataclasses, `TrainingArguments` last.
        argv: the arguments (`None`: `sys.argv`).
        logger: the script's logger (see `setup_logging`).
        ignored_together: (argument, argument it makes the script ignore) pairs, refused together.
        steps: the script's `--do_*` steps; a run that asks for none of them is refused (it would exit having
            done nothing, or only part of its preparation).

    Returns:
        One instance per class, in order.
    """
    argv, launcher_note = launcher_arguments(argv)
    parsed = parse_options(argument_classes, argv)
    training_args = parsed[-1]
    if not any(getattr(training_args, step) for step in steps):
        raise ValueError(f"nothing to do: give {' and/or '.join('--' + step for step in steps)}")
    script_args = parsed[:-1]
    check_bilm_argument(*script_args)
    kinds.check_inputs_are_read(
        argument_classes[:-1],
        {name: value for group in script_args for name, value in vars(group).items()},
        {step: getattr(training_args, step, False) for step in steps},
    )
    setup_logging(training_args, logger)
    if launcher_note:
        logger.info(launcher_note)
    transformers.set_seed(training_args.seed)
    check_conflicting_arguments(ignored_together, *script_args)
    _warn_of_evaluation_on_training_data(script_args, training_args, logger)
    check_training_arguments(training_args)
    check_mixed_precision(training_args)
    # A run into a folder not made yet asks the Hub first, so that a refused push leaves no folder behind (only
    # the lock and an earlier run, which need the folder, can refuse a run before the Hub is asked).
    new_folder = not training_args.output_dir or not os.path.exists(training_args.output_dir)
    if new_folder:
        check_push_to_hub(training_args)
    # One process of a multi-process run saves (the main one, or each node's with --save_on_each_node), so that
    # one takes the lock: the others write only where it tells them to.
    if training_args.output_dir and training_args.should_save:
        for group in script_args:  # a run never writes over the model it reads
            for name in PATH_ARGUMENTS:
                if getattr(group, name, None) is not None and os.path.isdir(getattr(group, name)):
                    check_output_dir(training_args.output_dir, source_dir=getattr(group, name), what=f"--{name}")
        lock_output(training_args.output_dir, "--output_dir")
        prepare_output_dir(
            training_args.output_dir,
            overwrite=getattr(training_args, "overwrite_output_dir", False),
            resume=bool(training_args.resume_from_checkpoint),
        )
    if not new_folder:
        check_push_to_hub(training_args)  # after the folder's checks: a run refused there creates no repository
    return tuple(parsed)


def _warn_of_evaluation_on_training_data(script_args, training_args, logger: logging.Logger) -> None:
    """A warning where `--validation_file` is the `--train_file` of a run that trains: its scores would be of
    the text the model learnt, not of new text (a run that only evaluates reads no training file)."""
    given = {name: value for group in script_args for name, value in vars(group).items()}
    train, validation = given.get("train_file"), given.get("validation_file")
    if not (training_args.do_train and isinstance(train, str) and isinstance(validation, str)):
        return
    if os.path.isfile(train) and os.path.isfile(validation) and os.path.samefile(train, validation):
        logger.warning(
            f"--validation_file {validation} is the --train_file: the evaluation scores the text the model trains "
            "on, not new text; give a held-out file (or --validation_split_percentage, where the script takes it)"
        )


# --- launchers: the process count they ask for, honoured or refused in one line ------------------------------

# What mpirun sets in each process (accelerate reads them for its multi-CPU runs).
_MPI_WORLD_SIZES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "WORLD_SIZE")


def launcher_arguments(argv: list[str] | None) -> tuple[list[str] | None, str | None]:
    """(`argv` for the parser, a line to log or None): the process count a launcher asked for, honoured on CPUs
    or refused with a `ValueError` naming what to pass.

    - `torchrun --nproc_per_node N` (or `accelerate launch --multi_gpu --num_processes N`) on a machine without
      an accelerator: transformers sets up a gloo process group only with `--use_cpu`; without it each process
      would train alone, N separate runs into one folder. `--use_cpu` is added, and said.
    - `accelerate launch --cpu --num_processes N`: accelerate starts one process whatever N is (several CPU
      processes only through mpirun, `--mpirun_hostfile`), with `MASTER_ADDR` set and no `WORLD_SIZE`; the run
      would train one process. Refused, naming the forms that start N.
    """
    environ = os.environ
    _refuse_deepspeed_not_installed(argv)
    world_size = int(environ.get("WORLD_SIZE", "1") or 1)
    if (
        "ACCELERATE_USE_CPU" in environ
        and "MASTER_ADDR" in environ
        and not any(name in environ for name in _MPI_WORLD_SIZES)
    ):
        count, script = _launcher_option("--num_processes") or "N", sys.argv[0] or "<script>"
        raise SameOnEveryRank(
            f"accelerate launch --cpu starts one process whatever --num_processes says; for {count} CPU processes "
            f"run `accelerate launch --multi_gpu --num_processes {count} {script} ... --use_cpu` or `torchrun "
            f"--nproc_per_node {count} {script} ... --use_cpu` (docs/distributed.md)"
        )
    given = given_options(argv)
    if (
        world_size > 1
        and "use_cpu" not in given
        and "ACCELERATE_MIXED_PRECISION" in environ  # accelerate launch's multi-GPU set-up (a yaml or --multi_gpu)
        and not _accelerator_available()
    ):
        script = sys.argv[0] or "<script>"
        raise SameOnEveryRank(
            f"accelerate launch asks for multi-GPU training ({world_size} processes), but no CUDA device is present; "
            f"for {world_size} CPU processes add --use_cpu to the script's arguments: `accelerate launch --multi_gpu "
            f"--num_processes {world_size} {script} ... --use_cpu` (docs/distributed.md)"
        )
    if world_size > 1 and "use_cpu" not in given and not _accelerator_available():
        argv = [*(sys.argv[1:] if argv is None else argv), "--use_cpu"]
        return argv, f"{world_size} processes and no GPU: training on CPU processes (gloo), as --use_cpu asks"
    return argv, None


def _refuse_deepspeed_not_installed(argv: list[str] | None) -> None:
    """A ValueError when DeepSpeed is asked for (`--deepspeed CONFIG`, or an accelerate config with
    `distributed_type: DEEPSPEED`) and the deepspeed package is absent: transformers would stop with
    `PackageNotFoundError` from its `require_version` while building `TrainingArguments`."""
    if importlib.util.find_spec("deepspeed") is not None:
        return
    if "deepspeed" in given_options(argv):
        asked = "--deepspeed"
    elif os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true", "yes"):
        asked = "the accelerate config (distributed_type: DEEPSPEED)"
    else:
        return
    raise SameOnEveryRank(f"{asked} asks for DeepSpeed, but deepspeed is not installed: pip install deepspeed")


def _accelerator_available() -> bool:
    """Whether torch sees a GPU or another accelerator that transformers would train on."""
    return torch.accelerator.is_available()


def _launcher_option(option: str) -> str | None:
    """The value of `option` on the command line of the process that started this one (the launcher), where it
    can be read (Linux); else None."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            words = [word.decode(errors="replace") for word in f.read().split(b"\0")]
    except OSError:
        return None
    for i, word in enumerate(words):
        if word == option and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    return None


# --- arguments several scripts take ------------------------------------------------------------------------


def padding_multiple(pad_to_multiple_of: int | None, training_args: TrainingArguments) -> int | None:
    """`--pad_to_multiple_of`, else 8 under mixed precision or on a GPU (tensor cores want dimensions divisible by
    8), else none: on a CPU padding only adds work."""
    if pad_to_multiple_of is None and (
        training_args.fp16 or training_args.bf16 or training_args.device.type == "cuda"
    ):
        return 8
    return pad_to_multiple_of


def keep_first_examples(raw: Mapping[str, datasets.Dataset], data_args) -> tuple[datasets.DatasetDict, dict[str, int]]:
    """(each split of `raw` cut to its first `--max_train_samples`, `--max_eval_samples` (validation splits) or
    `--max_predict_samples` (test splits) examples, the number each split had before: the model card's "N of M").

    Without `--max_predict_samples`, where `--test_file` is the `--validation_file` (one file scored as both), the
    test splits keep `--max_eval_samples`, said in one line, so that the one file is scored on the same examples
    both times."""
    test_limit = getattr(data_args, "max_predict_samples", None)
    test, validation = getattr(data_args, "test_file", None), getattr(data_args, "validation_file", None)
    one_file = bool(test and validation) and os.path.realpath(test) == os.path.realpath(validation)
    testing = any(split.startswith("test") for split in raw)
    if test_limit is None and one_file and testing and data_args.max_eval_samples is not None:
        test_limit = data_args.max_eval_samples
        logger.info(
            f"--test_file is the --validation_file: its test scores read its first {test_limit:,} examples "
            "(--max_eval_samples), as the validation scores do; --max_predict_samples sets another number"
        )
    available, kept = {split: len(dataset) for split, dataset in raw.items()}, {}
    for split, dataset in raw.items():
        if split == "train":
            limit = data_args.max_train_samples
        else:
            limit = test_limit if split.startswith("test") else data_args.max_eval_samples
        kept[split] = first_examples(dataset, limit)
    return datasets.DatasetDict(kept), available


def check_trained_for_the_task(model_args: "ModelBuildingArguments", training_args, task: str, head: str) -> None:
    """A run that evaluates or predicts without training (no --do_train) needs a --model_name_or_path fine-tuned
    for this `task` (its config.json names an architecture ending in `head`, e.g. "ForQuestionAnswering"); a
    pretrained model would get a head of random weights, whose scores would be reported as the model's."""
    if training_args.do_train or model_args.model_name_or_path is None:
        return
    config = transformers.AutoConfig.from_pretrained(model_args.model_name_or_path, cache_dir=model_args.cache_dir)
    architectures = config.architectures or []
    if not any(name.endswith(head) for name in architectures):
        raise ValueError(
            f"{model_args.model_name_or_path} is not fine-tuned for {task} (its config.json names "
            f"{', '.join(architectures) or 'no architecture'}): without --do_train its answers would come from a "
            "head of random weights. Add --do_train and --train_file to train one, or give a fine-tuned model"
        )


def fine_tuning_tokenizer(model_args: "ModelBuildingArguments"):
    """The tokenizer a fine-tuning script reads with: `--tokenizer_name`, else `--model_name_or_path`'s; else (a
    new model) its family's own where it needs no training text (ELMo's character ids)."""
    source = model_args.tokenizer_name or model_args.model_name_or_path
    if source is not None:
        return load_tokenizer(source, cache_dir=model_args.cache_dir)
    family = MODEL_FAMILIES.get(model_args.model_type)
    tokenizer = family.make_tokenizer() if family is not None else None
    if tokenizer is None:
        raise ValueError("give --tokenizer_name (or a --model_name_or_path that holds a tokenizer)")
    return tokenizer


def given_options(argv: list[str] | None) -> set[str]:
    """The names of the options on the command line `argv` (`None`: `sys.argv[1:]`): {"learning_rate", ...}."""
    return {
        arg.removeprefix("--").split("=", 1)[0].replace("-", "_")  # the parser takes --learning-rate too
        for arg in (sys.argv[1:] if argv is None else argv)
        if arg.startswith("--")
    }


def refuse_unused_options(argv: list[str] | None, names: Sequence[str], why: str) -> None:
    """A ValueError when any of the options `names` is on the command line `argv` (`None`: `sys.argv[1:]`)
    although this run does not use them, `why` saying why: a setting given and silently ignored."""
    unused = [f"--{name}" for name in names if name in given_options(argv)]
    if unused:
        them = "them" if len(unused) > 1 else "it"
        raise ValueError(f"{' and '.join(unused)} would do nothing here: {why}; leave {them} out")


def apply_learning_rate_default(
    training_args: TrainingArguments, argv: list[str] | None, config, task: str, new_model: bool = False
) -> None:
    """Unless `--learning_rate` is on the command line `argv`, train with the learning rate that hf_ctx's family
    registry gives the model of `config` for `task` (a key of `AUTO_CLASSES`, e.g. "token_classification"), and
    say which one once. transformers' 5e-5 stays for a model of another library, a task without a measured
    default, and a pretrained checkpoint (not a `new_model` from random weights) wider than the models the rate
    was measured on (`ModelFamily.learning_rates_up_to_width`). A run that does not train says nothing. A measured
    rate is kept as `training_args.suggested_learning_rate` either way: what a diverging run's message suggests."""
    if not training_args.do_train:
        return
    family, what = find_family(config), task.replace("_", " ")
    rate = family.learning_rates.get(task) if family is not None else None
    measured = rate is not None and (new_model or not family.too_wide_for_learning_rates(config))
    if measured:  # not an option: what a diverging run's message suggests (`trainer.NonFiniteTrainingCallback`)
        training_args.suggested_learning_rate = rate
    if "learning_rate" in given_options(argv):
        return
    if not measured:
        whose = f"{family.title} {what}" if family is not None else f"a {config.model_type} model"
        why = f"hf_ctx has none for {whose}"
        if rate is not None:
            why = (
                f"hf_ctx's {_short(rate)} for {whose} was measured on models up to {family.learning_rates_up_to_width} "
                f"wide, and this one is {config.hidden_size}"
            )
        logger.info(
            f"learning rate {_short(training_args.learning_rate)}: transformers' default ({why}); --learning_rate "
            "sets another"
        )
        return
    training_args.learning_rate = rate
    logger.info(
        f"learning rate {_short(rate)}: hf_ctx's default for {family.title} {what}; --learning_rate sets another"
    )


def _short(number: float) -> str:
    """A number as a command line spells it: 0.001 -> "1e-3", 2.5e-05 -> "2.5e-5"."""
    mantissa, exponent = f"{number:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def apply_gpu_defaults(training_args: TrainingArguments, argv: list[str] | None, **defaults) -> dict:
    """On a CUDA device, set `TrainingArguments` fields to the examples' GPU defaults where the command line did
    not set them; returns what was set. On a GPU small steps are bound by kernel launches, not arithmetic:

    - `per_device_train_batch_size` / `per_device_eval_batch_size` larger than the CPU default of 8;
    - `group_by_length=True` batches sentences of similar length together (`LengthGroupedSampler`; the
      `train_sampling_strategy="group_by_length"` of newer transformers), so that little padding is computed
      and a compiled model sees few shapes.

    `argv` is what `HfArgumentParser` parsed (`None`: `sys.argv[1:]`).
    """
    if training_args.device.type != "cuda":
        return {}
    given = given_options(argv)
    applied = {}
    for name, value in defaults.items():
        if name == "group_by_length" and hasattr(training_args, "train_sampling_strategy"):
            if value and "train_sampling_strategy" not in given and "group_by_length" not in given:
                training_args.train_sampling_strategy = applied["train_sampling_strategy"] = "group_by_length"
            continue
        if name not in given:
            setattr(training_args, name, value)
            applied[name] = value
    if applied:
        logger.info(f"GPU defaults (give the options to override them): {applied}")
    return applied


# What `--config_overrides` says in every example script (its help text).
CONFIG_OVERRIDES_HELP = (
    'config fields of a new model: a JSON object (\'{"lstm": {"dim": 512}, "dropout": 0.1}\') or '
    "comma-separated key=value pairs, values read as JSON where they parse and a dotted key for a nested field "
    "(lstm.dim=512,dropout=0.1)"
)


def _split_top_level(text: str) -> list[str]:
    """Split at the commas that are not inside brackets or quotes: "a=[1,2],b=3" -> ["a=[1,2]", "b=3"]."""
    items, depth, quote, start = [], 0, None, 0
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]


def parse_config_overrides(overrides: str | None, config_class=None, option: str = "--config_overrides") -> dict:
    """The value of `--config_overrides` (or of `option`, a script's other name for it), the same syntax in every
    example script, as a dict of config fields; with `config_class`, a field that config has not (a typo, which a
    config would keep as an unused attribute) is a `ValueError` naming it.

    Two spellings:
    - a JSON object: '{"lstm": {"dim": 512}, "dropout": 0.1}';
    - comma-separated key=value pairs: "lstm.dim=512,dropout=0.1,hidden_act=gelu". Values are read as JSON where
      they parse (numbers, true/false/null, lists such as [[1,32],[2,32]]), else kept as strings. A dotted key
      sets a field inside a dict-valued field (ELMo's `char_cnn` and `lstm`).
    `None` or "" gives {}.
    """
    text = (overrides or "").strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)  # text starting with "{" is an object or no JSON at all
        except json.JSONDecodeError as error:
            raise ValueError(f"{option} is not valid JSON ({error}): {text!r}") from None
    else:
        parsed = _key_value_pairs(text)
    if config_class is not None:
        check_config_fields(parsed, config_class)
    return parsed


def _key_value_pairs(text: str) -> dict:
    """`--config_overrides` spelled as key=value pairs (`parse_config_overrides`)."""
    parsed = {}
    for item in _split_top_level(text):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--config_overrides entries are key=value (or give a JSON object), got {item!r}")
        value = value.strip()
        # JSON spells booleans in lower case; "True" on a command line means the same. Not JSON: a string.
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value.lower() if value.lower() in ("true", "false") else value)
        *parents, name = key.split(".")
        target = parsed
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise ValueError(f"--config_overrides sets {key!r}, but {parent!r} is already given a value")
        target[name] = value
    return parsed


def check_config_fields(fields: dict, config_class) -> None:
    """Refuse `--config_overrides` fields that `config_class` does not have, naming them (nested sections, such as
    ELMo's `lstm.dim`, are checked by the config itself)."""
    defaults = config_class()
    unknown = sorted(name for name in fields if not hasattr(defaults, name))
    if unknown:
        known = sorted(name for name in defaults.to_dict() if not name.startswith("_"))
        raise ValueError(
            f"--config_overrides sets {unknown}, which {config_class.__name__} has no field for; its fields: {known}"
        )


# --- building a model: one way in every script ----------------------------------------------------------------


def model_type_field(task: str | None = None):
    """The `--model_type` option of a script whose models do `task` (a key of `AUTO_CLASSES`): its help offers,
    and its kind takes, the families that have a model for it (`None`: every family)."""
    names = families_with(task) if task is not None else list(MODEL_FAMILIES)
    return field(
        default=None,
        metadata={
            "help": f"without --model_name_or_path: a new model from random weights, one of {names}",
            "kind": kinds.one_of(names),
        },
    )


def config_name_field(task: str | None = None):
    """The `--config_name` option beside `model_type_field(task)`: its help names the size presets of the families
    that `--model_type` offers there, those that have presets (TagLM has none)."""
    names = families_with(task) if task is not None else list(MODEL_FAMILIES)
    presets = preset_names(name for name in names if MODEL_FAMILIES[name].presets)
    return field(
        default=None,
        metadata={
            "help": f"with --model_type: a size preset ({presets}) or a config.json or checkpoint folder of that "
            "family; default: the family's default config",
            "kind": kinds.CONFIG,
        },
    )


@dataclass
class ModelBuildingArguments:
    """How every example script builds its model: `--model_name_or_path` a checkpoint to fine-tune (or a
    fine-tuned one to evaluate and predict with), or `--model_type` a family with `--config_name` (a size preset or
    a config) and `--config_overrides` for random weights. The same names and help text in every script; each
    script's `ModelArguments` subclasses this and adds its own options."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "a checkpoint folder to fine-tune (a pretrained hf_ctx model), or a fine-tuned one to evaluate "
            "and predict with",
            "kind": kinds.MODEL,
        },
    )
    model_type: str | None = model_type_field()  # each script's ModelArguments narrows it to its task
    config_name: str | None = config_name_field()  # narrowed with model_type
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "a tokenizer folder (default: the checkpoint's, or the script's own)",
            "kind": kinds.TOKENIZER,
        },
    )
    config_overrides: str | None = field(default=None, metadata={"help": CONFIG_OVERRIDES_HELP, "kind": kinds.TEXT})
    cache_dir: str | None = field(
        default=None, metadata={"help": "where Hub downloads are cached", "kind": kinds.OUTPUT_FOLDER}
    )
    ignore_mismatched_sizes: bool = field(
        default=False,
        metadata={
            "help": "with --model_name_or_path: start anew the weights whose shapes differ from the checkpoint's "
            "(a fine-tuned classifier's head, for a new label set) and keep the others"
        },
    )

    def checkpoint_overrides(self) -> dict:
        """`--config_overrides` for loading `--model_name_or_path`: fields its config has (`parse_config_overrides`)."""
        if not self.config_overrides:
            return {}
        config = transformers.AutoConfig.from_pretrained(self.model_name_or_path, cache_dir=self.cache_dir)
        return parse_config_overrides(self.config_overrides, type(config))

    def __post_init__(self):
        if self.ignore_mismatched_sizes and self.model_name_or_path is None:
            raise ValueError(
                "--ignore_mismatched_sizes needs --model_name_or_path: it keeps a checkpoint's weights except those "
                "whose shapes differ; a new model has none"
            )


# (argument, argument it makes the script ignore) for `ModelBuildingArguments`: a checkpoint brings its own config.
MODEL_BUILDING_IGNORED_TOGETHER = [("model_name_or_path", "config_name"), ("model_name_or_path", "model_type")]


def new_model_family(model_args: ModelBuildingArguments, task: str):
    """The family record of `--model_type` for a new model of `task` (a key of `AUTO_CLASSES`); a `ValueError`
    naming the families that have the task when it is missing or has none."""
    names = families_with(task)
    if model_args.model_type not in names:
        raise ValueError(
            f"give --model_name_or_path, or --model_type (one of {names}) for a model from random weights; got "
            f"{model_args.model_type!r}"
        )
    return MODEL_FAMILIES[model_args.model_type]


def new_model_config(model_args: ModelBuildingArguments, task: str, tokenizer, **fields):
    """A new model's config: `--model_type`'s family, `--config_name` (a preset sized to `tokenizer`, a config
    folder of the family, or None: the family's default config), `fields` and `--config_overrides` over it."""
    family = new_model_family(model_args, task)
    fields = {**fields, **parse_config_overrides(model_args.config_overrides, family.config_class)}
    if model_args.config_name is None:
        return family.new_config(None, tokenizer, **fields)
    return family.load_config(model_args.config_name, tokenizer, cache_dir=model_args.cache_dir, **fields)


@dataclass
class TextCorpusArguments:
    """The data options both pretraining examples share: where the raw text comes from (files, globs, gzip, or a
    `datasets` dataset), streaming, caching, the held-out share, and sample limits. Each script subclasses it
    with its own options."""

    train_file: list[str] | None = field(
        default=None,
        metadata={
            "help": "training text files or glob patterns (plain or .gz), e.g. 'wiki/*.txt.gz'",
            "kind": kinds.FILES_OR_PATTERNS,
            "read_by": ("do_train",),
        },
    )
    validation_file: list[str] | None = field(
        default=None,
        metadata={
            "help": "validation text files or glob patterns (plain or .gz)",
            "kind": kinds.FILES_OR_PATTERNS,
            "read_by": ("do_eval",),
        },
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "read the training text as it trains (a `datasets` IterableDataset), for corpora larger than "
            "the disk cache; needs --max_steps"
        },
    )
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "a `datasets` dataset (Hub name or local folder), one text a row", "kind": kinds.DATASET},
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "its configuration", "kind": kinds.TEXT})
    text_column: str = field(default="text", metadata={"help": "the dataset's text column", "kind": kinds.TEXT})
    cache_dir: str | None = field(
        default=None,
        metadata={"help": "where `datasets` caches (default: its own cache)", "kind": kinds.OUTPUT_FOLDER},
    )
    validation_split_percentage: float = field(
        default=5.0,
        metadata={
            "help": "without validation data, hold out this share of the training text",
            "kind": kinds.PERCENTAGE,
        },
    )
    pad_to_multiple_of: int | None = field(
        default=None, metadata={"help": "pad batches to a multiple of this", "kind": kinds.LENGTH}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "processes for data preparation", "kind": kinds.WORKERS}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "keep only the first N training examples", "kind": kinds.COUNT}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "keep only the first N validation examples", "kind": kinds.COUNT}
    )


# --- the --do_train / --do_eval steps -----------------------------------------------------------------------


def step_option(training_args: TrainingArguments, split: str) -> str:
    """The option that asked for the step reading `split` ("train", "validation", "test"), for messages: for
    evaluation `--eval_strategy X` where one is set (transformers then sets `do_eval` itself), else `--do_eval`."""
    if split != "validation":
        return {"train": "--do_train", "test": "--do_predict"}[split]
    strategy = str(getattr(training_args.eval_strategy, "value", training_args.eval_strategy))
    return "--do_eval" if strategy == "no" else f"--eval_strategy {strategy}"


def match_special_tokens(model, tokenizer) -> None:
    """Give `model`'s config (and generation config) the pad, bos and eos ids of `tokenizer`.

    `Trainer.train` does the same, with a warning ("The tokenizer has new PAD/BOS/EOS tokens ...") that a user of
    the examples cannot act on: the scripts build model and tokenizer together, and the tokenizer's ids are the
    right ones.
    """
    configs = [model.config, getattr(model, "generation_config", None)]
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        for config in filter(None, configs):
            if value is not None and getattr(config, name, None) != value:
                setattr(config, name, value)


def record_metrics(trainer: Trainer, split: str, metrics: dict[str, float]) -> None:
    """Log `metrics` and save them as `<split>_results.json` (and into `all_results.json`) in `--output_dir`."""
    trainer.log_metrics(split, metrics)
    trainer.save_metrics(split, metrics)


def train_and_evaluate(
    trainer: Trainer, eval_datasets: Mapping[str, datasets.Dataset] | None = None, *, evaluate: bool | None = None
) -> dict[str, float]:
    """The `--do_train` and `--do_eval` steps of an example script, each as its arguments ask; returns their
    metrics (`train_*`, `eval_*`).

    Training resumes from `--resume_from_checkpoint` when that is given; its metrics are logged and saved
    ("train") with the Trainer state. Evaluation runs on the Trainer's `eval_dataset`, or on each of
    `eval_datasets` (metric-key prefix -> dataset, e.g. MNLI's matched and mismatched dev sets); the metrics are
    logged and saved ("eval"), after the trained model is saved into `--output_dir` (an error while evaluating then
    says where it is). `evaluate=False` leaves evaluation to the script (which evaluates while predicting on the
    same split, so that it evaluates once); None: `--do_eval`. The script saves the model and its card itself
    (`hf_ctx.tools.hub.save_run` before it predicts, `finish_run` at its end).
    """
    args = trainer.args
    metrics = {}
    if args.do_train:
        match_special_tokens(trainer.model, trainer.processing_class)
        result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
        metrics.update(result.metrics)
        record_metrics(trainer, "train", result.metrics)
        trainer.save_state()
    if args.do_eval if evaluate is None else evaluate:
        if args.do_train:  # saved before it is evaluated: an error there (a bug, memory) cannot lose the model
            trainer.save_model(args.output_dir, _internal_call=True)
        eval_metrics = {}
        with after_saving(trainer, args.do_train, card=False):
            if eval_datasets is None:
                eval_metrics = trainer.evaluate()
            else:
                for prefix, dataset in eval_datasets.items():
                    eval_metrics.update(trainer.evaluate(eval_dataset=dataset, metric_key_prefix=prefix))
        metrics.update(eval_metrics)
        record_metrics(trainer, "eval", eval_metrics)
    return metrics


@contextlib.contextmanager
def after_saving(trainer: Trainer, saved: bool, card: bool = True):
    """Around what a script does after it saved the trained model (`hub.save_run` before predicting or scoring a
    test file; `train_and_evaluate` before evaluating): an error there says that the model (and its `card`) is
    saved and where, so that the user fixes the input and predicts with the saved model instead of training
    again. A user error stays one line; any other error keeps its traceback, with the same note. `saved`: whether
    this run trained and saved a model (else errors pass unchanged)."""
    try:
        yield
    except Exception as error:
        if not saved:
            raise
        folder = trainer.args.output_dir
        saved_what = "the trained model and its card are" if card else "the trained model is"
        note = f"{saved_what} saved in {folder}; predict with --model_name_or_path {folder}"
        if isinstance(error, USER_ERRORS):
            raise (OSError if isinstance(error, OSError) else ValueError)(f"{error} ({note})") from error
        error.add_note(note)
        raise
