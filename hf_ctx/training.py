"""What the example scripts (`examples/*.py`) share, so that they stay thin: logging set-up, command-line config
overrides, data helpers, and the train / evaluate steps with their metric files.

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
from transformers import Trainer, TrainingArguments

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
