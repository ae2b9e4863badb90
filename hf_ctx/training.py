"""What the example scripts (`examples/*.py`) share, so that they stay thin: logging set-up, command-line config
overrides, data helpers, and the train / evaluate steps with their metric files.

The run ends with `hf_ctx.hub.finish_run` (checkpoint, model card, `--push_to_hub`).
"""

import json
import logging
import math
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path

import datasets
import transformers
from transformers import Trainer, TrainingArguments

from . import __version__
from .remote_code import shareable_name


def unpad_inputs_field():
    """The examples' `--unpad_inputs` argument (BERT's `CtxBertConfig.unpad_inputs`, on by default)."""
    return field(default=True, metadata={"help": "BERT: run the layers on the real tokens only, so padding costs "
                                                 "nothing (outputs at real tokens are unchanged)"})


# Warnings a user of the examples can do nothing about, by their message. PyTorch's CPU build tries oneDNN for every
# LSTM and falls back to its own kernel for ELMo's LSTMs with projections, which is the kernel wanted anyway.
_UNACTIONABLE_WARNINGS = [(UserWarning, r"LSTM with projections is not supported with oneDNN")]


def setup_logging(training_args: TrainingArguments, logger: logging.Logger) -> None:
    """Set up what an example script prints: log records to stdout, warnings worth reading, a short header.

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
    for category, message in _UNACTIONABLE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    if training_args.device.type == "cpu":
        training_args.dataloader_pin_memory = False
    logger.info(
        f"hf_ctx {__version__}, process {training_args.process_index} of {training_args.world_size} "
        f"on {training_args.device}"
    )


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
    given = {arg.removeprefix("--").split("=", 1)[0] for arg in (sys.argv[1:] if argv is None else argv)
             if arg.startswith("--")}
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


def parse_config_overrides(overrides: str | None) -> dict:
    """"a=1,b=true,c=gelu" -> {"a": 1, "b": True, "c": "gelu"} (values read as JSON where they parse).

    The format of `--config_overrides` in `examples/pretrain_bert.py` and `examples/run_ner.py`; `None` or ""
    gives {}.
    """
    parsed = {}
    for item in filter(None, (overrides or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--config_overrides entries are key=value, got {item!r}")
        try:
            # JSON spells booleans in lower case; "True" on a command line means the same.
            parsed[key.strip()] = json.loads(value.lower() if value.lower() in ("true", "false") else value)
        except json.JSONDecodeError:
            parsed[key.strip()] = value
    return parsed


def first_examples(dataset: datasets.Dataset, n: int | None) -> datasets.Dataset:
    """The first `n` examples of `dataset` (all of them when `n` is None or larger): `--max_*_samples`."""
    return dataset if n is None else dataset.select(range(min(n, len(dataset))))


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
    """How a model card names the training data: the `datasets` dataset, else the training files' names (never
    their local paths)."""
    if dataset_name is not None:
        return shareable_name(dataset_name)  # a dataset saved to disk: its folder's name
    files = [train_files] if isinstance(train_files, str) else list(train_files or ())
    return ", ".join(Path(f).name for f in files)


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
        return {"eval_dataset_name": training_data_name(None, validation_files)}
    held_out = validation is not None and str(getattr(validation, "split", None)) != "validation"
    if held_out:
        source = training_data_name(dataset_name, train_files)
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
