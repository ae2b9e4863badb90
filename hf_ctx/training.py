"""What the example scripts (`examples/*.py`) share, so that they stay thin: parsing and set-up (logging, seed),
command-line config overrides, data helpers, and the train / evaluate steps with their metric files.

The run ends with `hf_ctx.hub.finish_run` (checkpoint, model card, `--push_to_hub`).
"""

import json
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path

import datasets
import transformers
from transformers import HfArgumentParser, Trainer, TrainingArguments

from . import __version__


def unpad_inputs_field():
    """The examples' `--unpad_inputs` argument (BERT's `CtxBertConfig.unpad_inputs`, on by default)."""
    return field(default=True, metadata={"help": "BERT: run the layers on the real tokens only, so padding costs "
                                                 "nothing (outputs at real tokens are unchanged)"})


def setup_logging(training_args: TrainingArguments, logger: logging.Logger) -> None:
    """Send log records to stdout, then log hf_ctx's version and which process this is with `logger`.

    `logger` (the script's), hf_ctx and transformers log at INFO on the processes that should log
    (`training_args.should_log`: the main one, unless `--log_on_each_node` and friends say otherwise) and at
    WARNING on the others; `datasets` logs at WARNING.
    """
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", handlers=[logging.StreamHandler(sys.stdout)]
    )
    log_level = logging.INFO if training_args.should_log else logging.WARNING
    for name in (logger.name, "hf_ctx"):
        logging.getLogger(name).setLevel(log_level)
    datasets.utils.logging.set_verbosity_warning()  # its INFO lines would repeat through the root handler
    transformers.utils.logging.set_verbosity(log_level)
    logger.info(
        f"hf_ctx {__version__}, process {training_args.process_index} of {training_args.world_size} "
        f"on {training_args.device}"
    )


def parse_args_and_set_up(argument_classes: tuple, argv: list[str] | None, logger: logging.Logger) -> tuple:
    """The start of every example script: parse the command line, set up logging, seed everything.

    Args:
        argument_classes: the script's argument dataclasses, `TrainingArguments` last.
        argv: the arguments (`None`: `sys.argv`).
        logger: the script's logger (see `setup_logging`).

    Returns:
        One instance per class, in order.
    """
    parsed = HfArgumentParser(argument_classes).parse_args_into_dataclasses(args=argv)
    training_args = parsed[-1]
    setup_logging(training_args, logger)
    transformers.set_seed(training_args.seed)
    return tuple(parsed)


# What `--config_overrides` says in every example script (its help text).
CONFIG_OVERRIDES_HELP = (
    "config fields of a new model: a JSON object ('{\"lstm\": {\"dim\": 512}, \"dropout\": 0.1}') or "
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


def first_examples(dataset: datasets.Dataset, n: int | None) -> datasets.Dataset:
    """The first `n` examples of `dataset` (all of them when `n` is None or larger): `--max_*_samples`."""
    return dataset if n is None else dataset.select(range(min(n, len(dataset))))


def hold_out_validation(
    train: datasets.Dataset, validation: datasets.Dataset | None, percentage: float, seed: int
) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(train, validation), where data without a validation split gets one: `percentage` % of `train`, drawn
    with `seed` (`--validation_split_percentage`; 0 leaves the data without one)."""
    if validation is None and percentage > 0:
        split = train.train_test_split(test_size=percentage / 100, seed=seed)
        train, validation = split["train"], split["test"]
    return train, validation


def training_data_name(dataset_name: str | None, train_files: str | Iterable[str] | None) -> str:
    """How a model card names the training data: the `datasets` dataset, else the training files' names."""
    if dataset_name is not None:
        return dataset_name
    files = [train_files] if isinstance(train_files, str) else list(train_files or ())
    return ", ".join(Path(f).name for f in files)


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
