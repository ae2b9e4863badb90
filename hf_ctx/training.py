"""What the example scripts (`examples/*.py`) share, so that they stay thin: parsing and set-up (logging, seed),
command-line config overrides, data helpers, and the train / evaluate steps with their metric files.

The run ends with `hf_ctx.hub.finish_run` (checkpoint, model card, `--push_to_hub`).
"""

import json
import logging
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import torch
import transformers
from accelerate.data_loader import prepare_data_loader
from datasets.distributed import split_dataset_by_node
from huggingface_hub import HfApi
from torch.utils.data import DataLoader
from transformers import HfArgumentParser, Trainer, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, HubStrategy
from transformers.utils.hub import PushInProgress

from . import __version__
from .atomic_files import damaged_file_reason, damaged_files, write_into_folder, write_text
from .checks import check_conflicting_arguments, check_path_arguments, check_positive_arguments
from .remote_code import shareable_name

logger = logging.getLogger(__name__)

# What a checkpoint folder holds beside the model and its tokenizer: the Trainer's own state. None of it is ever
# uploaded: `training_args.bin` is a pickle holding `--hub_token` and local paths; the optimizer, scheduler and
# RNG states are pickles too; `trainer_state.json` names local checkpoint folders.
TRAINING_STATE_PATTERNS = ["training_args.bin", "trainer_state.json", "*.bin", "*.pt", "*.pth", "*.pkl"]
# Words that `--resume_from_checkpoint` accepts for "the latest complete checkpoint in --output_dir".
LATEST_CHECKPOINT = ("latest", "last", "true")


def unpad_inputs_field():
    """The examples' `--unpad_inputs` argument (BERT's `CtxBertConfig.unpad_inputs`, on by default)."""
    return field(
        default=True,
        metadata={
            "help": "BERT: run the layers on the real tokens only, so padding costs "
            "nothing (outputs at real tokens are unchanged)"
        },
    )


def apply_unpad_inputs(model, unpad_inputs: bool) -> None:
    """`--unpad_inputs` on a model whose config has the option (hf_ctx's BERT); other models (ELMo, TagLM, a
    transformers BERT) have no such path, and the argument leaves them as they are."""
    if hasattr(model.config, "unpad_inputs"):
        model.config.unpad_inputs = unpad_inputs


# Parameters per intra-op thread. Below this, an op's work is too small for a second thread to pay for its
# start-up and barrier, and on a shared machine the threads of OpenMP's team spin at their barriers against each
# other and against other jobs: two copies of the main job side by side ran 14 times slower than one alone with
# torch's default of one thread per core (docs/performance.md#threads-for-small-models).
PARAMETERS_PER_THREAD = 20_000_000


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, as `taskset` or a container limits it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def choose_num_threads(num_parameters: int, num_threads: int | None = None) -> int | None:
    """How many intra-op threads to train a model of `num_parameters` with, or `None` to leave torch's setting.

    `num_threads` (`--num_threads`) wins; then `OMP_NUM_THREADS`, which torch already read at start-up; else one
    thread per `PARAMETERS_PER_THREAD` parameters, at least one and at most one per available core.
    """
    if num_threads is not None:
        return num_threads
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, min(available_cores(), num_parameters // PARAMETERS_PER_THREAD))


def set_num_threads(model, num_threads: int | None = None) -> None:
    """Set torch's intra-op threads for training `model` on the CPU (see `choose_num_threads`)."""
    chosen = choose_num_threads(sum(p.numel() for p in model.parameters()), num_threads)
    if chosen is not None and chosen != torch.get_num_threads():
        logger.info(f"training with {chosen} CPU thread(s) (--num_threads or OMP_NUM_THREADS sets another number)")
        torch.set_num_threads(chosen)


def setup_logging(training_args: TrainingArguments, logger: logging.Logger) -> None:
    """Set up what an example script prints: log records to stdout and a short header.

    `logger` (the script's) and hf_ctx log at INFO on the processes that should log (`training_args.should_log`:
    the main one, unless `--log_on_each_node` and friends say otherwise) and at WARNING on the others;
    `--log_level` / `--log_level_replica` set another level. transformers and `datasets` keep their own default
    (WARNING), so the Trainer prints its progress bar and metrics but not its INFO chatter (every config it
    loads, every file it saves), unless `--log_level info` asks for it. Without an accelerator,
    `dataloader_pin_memory` is turned off: pinned memory only serves copies to a GPU, and the DataLoader warns
    about it on every run. Then `logger` says which hf_ctx version and process this is.
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
    if training_args.device.type == "cpu":
        training_args.dataloader_pin_memory = False
    logger.info(
        f"hf_ctx {__version__}, process {training_args.process_index} of {training_args.world_size} "
        f"on {training_args.device}"
    )


def padding_multiple(pad_to_multiple_of: int | None, training_args: TrainingArguments) -> int | None:
    """`--pad_to_multiple_of`, else 8 under mixed precision or on a GPU (tensor cores want dimensions divisible by
    8), else none: on a CPU padding only adds work."""
    if pad_to_multiple_of is None and (
        training_args.fp16 or training_args.bf16 or training_args.device.type == "cuda"
    ):
        return 8
    return pad_to_multiple_of


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
    given = {
        arg.removeprefix("--").split("=", 1)[0]
        for arg in (sys.argv[1:] if argv is None else argv)
        if arg.startswith("--")
    }
    applied = {}
    for name, value in defaults.items():
        if name == "group_by_length" and hasattr(training_args, "train_sampling_strategy"):
            if value and "train_sampling_strategy" not in given and "group_by_length" not in given:
                training_args.train_sampling_strategy = applied["train_sampling_strategy"] = "group_by_length"
            continue
        if name not in given:
            setattr(training_args, name, value)
            applied[name] = value
    return applied


def parse_args_and_set_up(
    argument_classes: tuple,
    argv: list[str] | None,
    logger: logging.Logger,
    *,
    ignored_together: Iterable[tuple[str, str]] = (),
    positive: tuple[str, ...] = ("max_seq_length",),
    steps: tuple[str, ...] = ("do_train", "do_eval", "do_predict"),
) -> tuple:
    """The start of every example script: parse the command line, set up logging, seed everything, and refuse
    arguments the run could not use (see `hf_ctx.checks`).

    Args:
        argument_classes: the script's argument dataclasses, `TrainingArguments` last.
        argv: the arguments (`None`: `sys.argv`).
        logger: the script's logger (see `setup_logging`).
        ignored_together: (argument, argument it makes the script ignore) pairs, refused together.
        positive: size arguments that must be positive when given.
        steps: the script's `--do_*` steps; a run that asks for none of them is refused (it would exit having
            done nothing, or only part of its preparation).

    Returns:
        One instance per class, in order.
    """
    parsed = HfArgumentParser(argument_classes).parse_args_into_dataclasses(args=argv)
    training_args = parsed[-1]
    if not any(getattr(training_args, step) for step in steps):
        raise ValueError(f"nothing to do: give {' and/or '.join('--' + step for step in steps)}")
    setup_logging(training_args, logger)
    transformers.set_seed(training_args.seed)
    script_args = parsed[:-1]
    check_path_arguments(*script_args)
    check_conflicting_arguments(ignored_together, *script_args)
    check_positive_arguments(*script_args, names=positive)
    return tuple(parsed)


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


def parse_config_overrides(overrides: str | None) -> dict:
    """The value of `--config_overrides`, the same syntax in every example script, as a dict of config fields.

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
            return json.loads(text)  # text starting with "{" is an object or no JSON at all
        except json.JSONDecodeError as error:
            raise ValueError(f"--config_overrides is not valid JSON ({error}): {text!r}") from None
    parsed = {}
    for item in _split_top_level(text):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--config_overrides entries are key=value (or give a JSON object), got {item!r}")
        value = value.strip()
        try:
            # JSON spells booleans in lower case; "True" on a command line means the same.
            value = json.loads(value.lower() if value.lower() in ("true", "false") else value)
        except json.JSONDecodeError:
            pass
        *parents, name = key.split(".")
        target = parsed
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise ValueError(f"--config_overrides sets {key!r}, but {parent!r} is already given a value")
        target[name] = value
    return parsed


def first_examples(dataset: datasets.Dataset | datasets.IterableDataset, n: int | None):
    """The first `n` examples of `dataset` (all of them when `n` is None or larger): `--max_*_samples`."""
    if n is None:
        return dataset
    if isinstance(dataset, datasets.IterableDataset):
        return dataset.take(n)
    return dataset.select(range(min(n, len(dataset))))


@dataclass
class TextCorpusArguments:
    """The data options both pretraining examples share: where the raw text comes from (files, globs, gzip, or a
    `datasets` dataset), streaming, caching, the held-out share, and sample limits. Each script subclasses it
    with its own options."""

    train_file: list[str] | None = field(
        default=None, metadata={"help": "training text files or glob patterns (plain or .gz), e.g. 'wiki/*.txt.gz'"}
    )
    validation_file: list[str] | None = field(
        default=None, metadata={"help": "validation text files or glob patterns (plain or .gz)"}
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "read the training text as it trains (a `datasets` IterableDataset), for corpora larger than "
            "the disk cache; needs --max_steps"
        },
    )
    dataset_name: str | None = field(
        default=None, metadata={"help": "a `datasets` dataset (Hub name or local folder), one text a row"}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "its configuration"})
    text_column: str = field(default="text", metadata={"help": "the dataset's text column"})
    cache_dir: str | None = field(default=None, metadata={"help": "where `datasets` caches (default: its own cache)"})
    validation_split_percentage: float = field(
        default=5.0, metadata={"help": "without validation data, hold out this share of the training text"}
    )
    pad_to_multiple_of: int | None = field(default=None, metadata={"help": "pad batches to a multiple of this"})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "processes for data preparation"})
    max_train_samples: int | None = field(default=None, metadata={"help": "keep only the first N training examples"})
    max_eval_samples: int | None = field(default=None, metadata={"help": "keep only the first N validation examples"})


def shuffled_stream(dataset: datasets.IterableDataset, training_args: TrainingArguments, buffer_size: int = 10_000):
    """A streaming training set for `Trainer`: shuffled within a buffer of `buffer_size` examples, seeded by
    `--seed` (the Trainer reseeds it every epoch). A stream has no length, so `--max_steps` must say how long to
    train. On several processes `CtxTrainer.get_train_dataloader` gives each process its own share of it."""
    if training_args.max_steps is None or training_args.max_steps <= 0:
        raise ValueError("--streaming needs --max_steps: a streamed corpus has no length to count epochs in")
    return dataset.shuffle(seed=training_args.seed, buffer_size=buffer_size)


def hold_out_validation(
    train: datasets.Dataset, validation: datasets.Dataset | None, percentage: float, seed: int, hint: str = ""
) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(train, validation), where data without a validation split gets one: `percentage` % of `train`, drawn
    with `seed` (`--validation_split_percentage`; 0 leaves the data without one).

    Too few examples to hold some out and still train on some is a `ValueError`, with `hint` (what may be wrong
    with the data) added to the message.
    """
    if validation is None and percentage > 0:
        held_out = math.ceil(len(train) * percentage / 100)
        if len(train) - held_out < 1:
            raise ValueError(
                f"--validation_split_percentage {percentage:g} holds out {held_out} of the {len(train)} training "
                f"example(s), leaving none to train on; give --validation_file, or more training data{hint}"
            )
        split = train.train_test_split(test_size=percentage / 100, seed=seed)
        train, validation = split["train"], split["test"]
    return train, validation


def training_data_name(dataset_name: str | None, train_files: str | Iterable[str] | None) -> str:
    """How a model card names the training data: the `datasets` dataset, else "the local file(s) ..." with the
    training files' names (never their local paths), so that the card says where the data came from."""
    if dataset_name is not None:
        return shareable_name(dataset_name)  # a dataset saved to disk: its folder's name
    files = [train_files] if isinstance(train_files, str) else list(train_files or ())
    return f"the local file{'s' if len(files) > 1 else ''} {_file_names(files)}"


def _file_names(files: str | Iterable[str]) -> str:
    """'a.txt, b.txt': the names of files, never their local paths."""
    return ", ".join(Path(f).name for f in ([files] if isinstance(files, str) else files))


def evaluation_data(
    dataset_name: str | None,
    validation_files: str | Iterable[str] | None,
    train_files: str | Iterable[str] | None = None,
    validation: datasets.Dataset | None = None,
    validation_split_percentage: float | None = None,
) -> dict[str, str]:
    """How a model card names the data a run was evaluated on: `finish_run`'s `eval_dataset_name` (and
    `eval_dataset_id` for a split of a Hub dataset).

    The validation files' names when there are some; else, when `validation` (the validation data as loaded) is
    a part of the training data that `hold_out_validation` set aside, that part ("5% of corpus.txt held out from
    training"); else the `datasets` dataset's own validation split. Empty when there is no evaluation data.
    """
    if validation_files:
        return {"eval_dataset_name": _file_names(validation_files)}
    held_out = validation is not None and str(getattr(validation, "split", None)) != "validation"
    if held_out:
        source = shareable_name(dataset_name) if dataset_name is not None else _file_names(train_files or ())
        return {"eval_dataset_name": f"{validation_split_percentage:g}% of {source} held out from training"}
    if dataset_name is not None:  # the card lists `eval_dataset_id` only when it is a Hub id
        return {"eval_dataset_name": shareable_name(dataset_name), "eval_dataset_id": dataset_name}
    return {}  # no evaluation data


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
    trainer: Trainer, eval_datasets: Mapping[str, datasets.Dataset] | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    """The `--do_train` and `--do_eval` steps of an example script, each as its arguments ask.

    Training resumes from `--resume_from_checkpoint` when that is given; its metrics are logged and saved
    ("train") with the Trainer state. Evaluation runs on the Trainer's `eval_dataset`, or on each of
    `eval_datasets` (metric-key prefix -> dataset, e.g. MNLI's matched and mismatched dev sets); the metrics are
    logged and saved ("eval"). The model itself is saved by `hf_ctx.hub.finish_run` at the end of the script.

    Returns (every metric, the evaluation metrics alone); the latter is empty without `--do_eval`.
    """
    args = trainer.args
    metrics, eval_metrics = {}, {}
    if args.do_train:
        match_special_tokens(trainer.model, trainer.processing_class)
        result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
        metrics.update(result.metrics)
        record_metrics(trainer, "train", result.metrics)
        trainer.save_state()
    if args.do_eval:
        if eval_datasets is None:
            eval_metrics = trainer.evaluate()
        else:
            for prefix, dataset in eval_datasets.items():
                eval_metrics.update(trainer.evaluate(eval_dataset=dataset, metric_key_prefix=prefix))
        metrics.update(eval_metrics)
        record_metrics(trainer, "eval", eval_metrics)
    return metrics, eval_metrics


def _expected_checkpoint_files(
    folder: str, *, world_size: int = 1, tokenizer_files=(), training_state: bool = True
) -> list[str]:
    """The files a `checkpoint-N` folder written by the Trainer should hold (see `missing_checkpoint_files`)."""
    expected = ["config.json", *tokenizer_files]
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        expected.append("model.safetensors.index.json")
        if damaged_file_reason(index) is None:
            with open(index, encoding="utf-8") as f:
                expected += sorted(set(json.load(f)["weight_map"].values()))
    else:
        expected.append("model.safetensors")
    if training_state:
        expected += ["trainer_state.json", "optimizer.pt", "scheduler.pt"]
        expected += ["rng_state.pth"] if world_size == 1 else [f"rng_state_{i}.pth" for i in range(world_size)]
    return expected


def missing_checkpoint_files(folder: str | os.PathLike, **check) -> list[str]:
    """The files a `checkpoint-N` folder written by the Trainer should hold but does not.

    A run killed while saving leaves a checkpoint with some files missing; resuming from it fails somewhere deep
    (or, without `scheduler.pt` or the RNG state, silently trains differently). Checked: `config.json`, the
    weights (`model.safetensors`, or the index and every shard it lists), `tokenizer_files` (the names the
    Trainer's tokenizer saves) and, with `training_state`, `trainer_state.json`, `optimizer.pt`, `scheduler.pt`
    and the RNG state of each of the `world_size` processes. `check`: `world_size`, `tokenizer_files`,
    `training_state`.
    """
    folder = os.fspath(folder)
    return [
        name for name in _expected_checkpoint_files(folder, **check) if not os.path.isfile(os.path.join(folder, name))
    ]


def checkpoint_problems(folder: str | os.PathLike, **check) -> list[str]:
    """What keeps a `checkpoint-N` folder from being resumed: "missing <files>" (`missing_checkpoint_files`) and
    "<file> (<why>) is incomplete or corrupt" for each expected file that `damaged_file_reason` finds truncated
    or damaged (checked without unpickling anything). Empty for a checkpoint that can be resumed."""
    folder = os.fspath(folder)
    missing = missing_checkpoint_files(folder, **check)
    problems = [f"missing {', '.join(missing)}"] if missing else []
    damaged = damaged_files(folder, _expected_checkpoint_files(folder, **check))
    return problems + [f"{file} is incomplete or corrupt" for file in damaged]


def resolve_resume_checkpoint(
    checkpoint: str | os.PathLike | bool | None, output_dir: str | os.PathLike, **check
) -> str | None:
    """The checkpoint folder `--resume_from_checkpoint` means, checked to be complete and undamaged.

    `checkpoint` is a folder, or `True` / "latest" / "last" for the `checkpoint-N` of `output_dir` with the
    highest N among the complete ones: an incomplete or damaged one (a run killed while saving it, a full disk)
    is skipped with a warning naming its files. A folder given by name must be complete: the error names what is
    missing or damaged. `None` / `False` / "" give `None` (train from the start). `check`: the keyword arguments
    of `missing_checkpoint_files`.
    """
    if checkpoint is None or checkpoint is False or checkpoint == "":
        return None
    if checkpoint is True or str(checkpoint).lower() in LATEST_CHECKPOINT:
        pattern = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")
        found = os.listdir(output_dir) if os.path.isdir(output_dir) else []
        steps = sorted((int(m.group(1)) for m in map(pattern.match, found) if m), reverse=True)
        for step in steps:
            folder = os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")
            problems = checkpoint_problems(folder, **check)
            if not problems:
                return folder
            logger.warning(
                f"skipping the incomplete checkpoint {folder} ({'; '.join(problems)}); it was "
                "probably being saved when the run stopped"
            )
        raise ValueError(
            f"--resume_from_checkpoint {checkpoint}: no complete {PREFIX_CHECKPOINT_DIR}-N folder in "
            f"{output_dir} (found {len(steps)} incomplete ones)"
        )
    folder = os.fspath(checkpoint)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"--resume_from_checkpoint: {folder} does not exist or is not a folder")
    problems = checkpoint_problems(folder, **check)
    if problems:
        raise ValueError(
            f"--resume_from_checkpoint: {folder} is an incomplete checkpoint (the run probably stopped "
            f"while saving it): {'; '.join(problems)}. Resume from an earlier checkpoint, or "
            f"pass 'latest' to use the latest complete one in {output_dir}"
        )
    return folder


@dataclass
class CtxTrainingArguments(TrainingArguments):
    """`TrainingArguments` and the one setting of the examples' training that it lacks: CPU threads."""

    num_threads: int | None = field(
        default=None,
        metadata={
            "help": "CPU threads for training (default: OMP_NUM_THREADS when set, else one per 20M parameters, "
            "at most one per core: small models train fastest on one thread, and alone beside other jobs)"
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"--num_threads must be at least 1, got {self.num_threads}")


class CtxTrainer(Trainer):
    """transformers' `Trainer`, made safe to push and to resume; the examples train with it.

    - `--push_to_hub` with checkpoints (`--hub_strategy every_save`, the default): each save uploads the model
      files of the new checkpoint folder (config with `auto_map`, weights, the source files the `auto_map`
      names, tokenizer), so every revision of the repository loads with `trust_remote_code`. The Trainer's own
      state never goes: `Trainer` would upload `training_args.bin`, a pickle holding `--hub_token` and local
      paths. `--hub_strategy checkpoint` / `all_checkpoints` upload that state by design and are refused.
    - On the CPU, torch's intra-op threads are set for the model's size (`set_num_threads`; `--num_threads`
      of `CtxTrainingArguments` or `OMP_NUM_THREADS` overrides).
    - `train(resume_from_checkpoint=...)` checks the checkpoint is complete (`resolve_resume_checkpoint`):
      "latest" or `True` skips an incomplete one with a warning; a named incomplete one is an error naming the
      missing files.
    """

    def __init__(self, model=None, args: TrainingArguments | None = None, *rest, **kwargs):
        if (
            args is not None
            and args.push_to_hub
            and args.hub_strategy in (HubStrategy.CHECKPOINT, HubStrategy.ALL_CHECKPOINTS)
        ):
            raise ValueError(
                f"--hub_strategy={args.hub_strategy.value} would upload the training state (training_args.bin holds "
                "--hub_token and local paths); use every_save or end"
            )
        super().__init__(model, args, *rest, **kwargs)
        if self.args.device.type == "cpu":
            set_num_threads(self.model, getattr(self.args, "num_threads", None))
        self._refuse_unsharded_fsdp()

    def _refuse_unsharded_fsdp(self) -> None:
        """FSDP asked for (`--fsdp`, or `accelerate launch` with an FSDP config) but not set up is an error:
        accelerate shards only on GPUs and other accelerators; on CPU processes (gloo) it falls back to plain DDP,
        each process holding the whole model, and says nothing."""
        asked = bool(self.args.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
        if asked and not self.is_fsdp_enabled:
            raise ValueError(
                f"FSDP was asked for, but accelerate set up {self.accelerator.distributed_type.value} on "
                f"{self.args.device.type}: it shards only on GPUs or other accelerators, so these processes would "
                "each hold the whole model (plain DDP). Leave out --fsdp (DDP) or run on GPUs"
            )

    def get_train_dataloader(self):
        """As `Trainer`'s, except for a streamed training set (`datasets.IterableDataset`) on several processes:
        each process reads its own share of the stream (`datasets.distributed.split_dataset_by_node`: its own
        files when the stream has a multiple of the process count of them, else every N-th example), so no
        example is read twice and none is left out. `Trainer` would have the main process read every batch and
        send each process its part (accelerate's `dispatch_batches`)."""
        dataset = self.train_dataset
        if not isinstance(dataset, datasets.IterableDataset) or self.args.world_size == 1:
            return super().get_train_dataloader()
        own_share = split_dataset_by_node(dataset, rank=self.args.process_index, world_size=self.args.world_size)
        loader = DataLoader(
            own_share,
            batch_size=self._train_batch_size,
            collate_fn=self._get_collator_with_removed_columns(self.data_collator, description="training"),
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
        )
        # Already split: accelerate only moves the batches to the device (one process's view, no second split).
        return prepare_data_loader(
            loader, self.args.device, num_processes=1, process_index=0, put_on_device=True, dispatch_batches=False
        )

    # --- writing: every file the Trainer writes appears whole or not at all (hf_ctx.atomic_files) ---------

    def _write_atomically(self, write, output_dir: str | None):
        """Run `write(folder)` on a temporary folder and move its files into `output_dir` (`write_into_folder`);
        directly where several processes write into the same folder (sharded saves)."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if self.args.world_size > 1 or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return write(output_dir)
        return write_into_folder(output_dir, write)

    def _save(self, output_dir: str | None = None, state_dict=None) -> None:
        # save_pretrained draws a "Writing model shards" bar even for one file: three lines of noise per checkpoint.
        shown = transformers.utils.logging.is_progress_bar_enabled()
        transformers.utils.logging.disable_progress_bar()
        try:
            self._write_atomically(lambda folder: Trainer._save(self, folder, state_dict), output_dir)
        finally:
            if shown:
                transformers.utils.logging.enable_progress_bar()

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        self._write_atomically(lambda folder: Trainer._save_optimizer_and_scheduler(self, folder), output_dir)

    def _save_scaler(self, output_dir: str) -> None:
        self._write_atomically(lambda folder: Trainer._save_scaler(self, folder), output_dir)

    def _save_rng_state(self, output_dir: str) -> None:
        self._write_atomically(lambda folder: Trainer._save_rng_state(self, folder), output_dir)

    def save_state(self) -> None:
        if self.is_world_process_zero():
            self._write_atomically(
                lambda folder: self.state.save_to_json(os.path.join(folder, "trainer_state.json")), None
            )

    def save_metrics(self, split: str, metrics: dict, combined: bool = True) -> None:
        """`<split>_results.json` and, with `combined`, the metrics merged into `all_results.json`, each written
        atomically (a full disk leaves the previous file)."""
        if not self.is_world_process_zero():
            return
        write_text(
            os.path.join(self.args.output_dir, f"{split}_results.json"), json.dumps(metrics, indent=4, sort_keys=True)
        )
        if combined:
            path = os.path.join(self.args.output_dir, "all_results.json")
            all_metrics = {}
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    all_metrics = json.load(f)
            write_text(path, json.dumps({**all_metrics, **metrics}, indent=4, sort_keys=True))

    def _checkpoint_checks(self) -> dict:
        """Keyword arguments of `missing_checkpoint_files` for this Trainer's checkpoints."""
        tokenizer_files = ()
        if self.processing_class is not None and hasattr(self.processing_class, "save_pretrained"):
            with tempfile.TemporaryDirectory() as folder:  # the names this tokenizer saves, e.g. tokenizer.json
                self.processing_class.save_pretrained(folder)
                # Not the remote-code copies (*.py): resuming runs the installed code, and a checkpoint saved by
                # an earlier hf_ctx lacks the modules added since.
                tokenizer_files = tuple(sorted(name for name in os.listdir(folder) if not name.endswith(".py")))
        # DeepSpeed and FSDP save weights and optimizer states in files of their own.
        sharded = self.is_deepspeed_enabled or self.is_fsdp_enabled
        return {"world_size": self.args.world_size, "tokenizer_files": tokenizer_files, "training_state": not sharded}

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        resume_from_checkpoint = resolve_resume_checkpoint(
            resume_from_checkpoint, self.args.output_dir, **self._checkpoint_checks()
        )
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Upload the model files of the checkpoint just saved (not the Trainer's state), without waiting."""
        if not self.is_world_process_zero() or self.args.hub_strategy == HubStrategy.END:
            return
        # As `Trainer`: skip this save's push while the last one is still uploading, unless --hub_always_push.
        if not self.args.hub_always_push and self.push_in_progress is not None and not self.push_in_progress.is_done():
            return
        self.callback_handler.on_push_begin(self.args, self.state, self.control)
        job = HfApi(token=self.args.hub_token).upload_folder(
            repo_id=self.hub_model_id,
            folder_path=checkpoint_folder,
            commit_message=f"Training in progress, step {self.state.global_step}",
            ignore_patterns=TRAINING_STATE_PATTERNS,
            revision=self.args.hub_revision,
            run_as_future=True,
        )
        if self.push_in_progress is None or self.push_in_progress.is_done():
            self.push_in_progress = PushInProgress([job])
        else:
            self.push_in_progress.jobs.append(job)
