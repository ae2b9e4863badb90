"""Checks of the example scripts' arguments, before anything is loaded: the paths they name, sizes, shares,
training options transformers lets through, options that override each other, mixed precision the device cannot
run, and a `--push_to_hub` the Hub would refuse."""

import math
from pathlib import Path

from .errors import hub_error_message
from .families import MODEL_FAMILIES
from .paths import check_elmo_checkpoint, check_local_path, check_model_folder

# The examples' arguments that name a checkpoint, config or tokenizer: a Hub id or a local path.
PATH_ARGUMENTS = ("model_name_or_path", "config_name", "tokenizer_name", "bilm_name_or_path")
# Those that name a model, whose local folder must hold a config.json (`check_model_folder`).
MODEL_PATH_ARGUMENTS = ("model_name_or_path", "bilm_name_or_path")


def check_path_arguments(*argument_groups) -> None:
    """`check_local_path` on each of `PATH_ARGUMENTS` the examples' argument dataclasses set, except a
    `--config_name` that names a size preset ("mini"); `--bilm_name_or_path` must hold an ELMo biLM."""
    presets = {name for family in MODEL_FAMILIES.values() for name in family.presets}
    for group in argument_groups:
        for name in PATH_ARGUMENTS:
            value = getattr(group, name, None)
            if value is not None and not (name == "config_name" and value in presets):
                check = check_model_folder if name in MODEL_PATH_ARGUMENTS else check_local_path
                check(value, f"--{name}")
        if getattr(group, "bilm_name_or_path", None) is not None:
            check_elmo_checkpoint(group.bilm_name_or_path, "--bilm_name_or_path", "a biLM to build on")


# Options every example script that has them takes as positive numbers: a `--max_*_samples` of 0 or less would
# leave a split empty, a `--pad_to_multiple_of` of 0 divides by zero, `--preprocessing_num_workers` counts processes.
ALWAYS_POSITIVE = (
    "max_train_samples",
    "max_eval_samples",
    "max_predict_samples",
    "pad_to_multiple_of",
    "preprocessing_num_workers",
)


def check_positive_arguments(*argument_groups, names=("max_seq_length",)) -> None:
    """Refuse 0 or a negative value for the examples' size arguments `names` (0 would silently mean "the
    model's limit" or give empty examples)."""
    for group in argument_groups:
        for name in names:
            value = getattr(group, name, None)
            if value is not None and value <= 0:
                raise ValueError(f"--{name} must be a positive number, got {value}")


def check_percentage_arguments(*argument_groups, names=("validation_split_percentage",)) -> None:
    """Refuse a share outside [0, 100) (or NaN, which no comparison holds for: nothing would be held out)."""
    for group in argument_groups:
        for name in names:
            value = getattr(group, name, None)
            if value is not None and not 0 <= value < 100:
                raise ValueError(f"--{name} must be a percentage in [0, 100), got {value}")


def check_training_arguments(training_args) -> None:
    """Refuse `TrainingArguments` values that transformers lets through and that fail late (a division by zero, an
    optimizer's "Invalid learning rate"), or that would train nothing without a word (`--num_train_epochs 0`)."""
    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
        value = getattr(training_args, name)
        if value < 1:
            raise ValueError(f"--{name} must be at least 1, got {value}")
    for name in ("learning_rate", "weight_decay", "max_grad_norm", "adam_epsilon", "num_train_epochs"):
        value = getattr(training_args, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"--{name} must be a finite number of at least 0, got {value}")
    for name in ("adam_beta1", "adam_beta2"):
        value = getattr(training_args, name)
        if not 0 <= value < 1:
            raise ValueError(f"--{name} must be in [0, 1), got {value}")
    if training_args.do_train and training_args.max_steps <= 0 and training_args.num_train_epochs == 0:
        raise ValueError("--num_train_epochs 0 trains nothing; give a number of epochs above 0, or --max_steps")


def check_conflicting_arguments(pairs, *argument_groups) -> None:
    """Refuse two arguments given together when the first makes the script ignore the second (e.g.
    `--model_name_or_path` loads a finished config, so `--config_name` would be silently unused). `pairs`:
    (argument, argument it overrides) names of the examples' argument dataclasses, both defaulting to None."""
    given = {}
    for group in argument_groups:
        given.update({name: value for name, value in vars(group).items() if value is not None})
    for first, second in pairs:
        if first in given and second in given:
            raise ValueError(
                f"--{first} and --{second} cannot be used together: with --{first} the run ignores "
                f"--{second}; give one of them"
            )


def check_mixed_precision(training_args) -> None:
    """Refuse `--fp16` on a CPU, where it has no effect: accelerate's float16 autocast and loss scaling run on
    GPUs and other accelerators only, so the run would train in float32, bitwise as without the option.
    (`--bf16` does take effect on a CPU: bfloat16 autocast.)"""
    if training_args.fp16 and training_args.device.type == "cpu":
        raise ValueError(
            "--fp16 has no effect on a CPU (float16 mixed precision needs a GPU): the run would train in float32 "
            "all the same. Leave out --fp16, or pass --bf16 for bfloat16 mixed precision on the CPU"
        )


def check_push_to_hub(training_args) -> None:
    """`--push_to_hub`: the Hub reached and the token allowed to write the repository (`--hub_model_id`, else the
    output folder's name), before anything is loaded. The repository is created here, as the Trainer creates it
    when it starts, so that an offline machine, a refused or missing token, or a repository the token cannot
    write is one line now rather than a traceback before training (or a lost upload after it)."""
    if not training_args.push_to_hub or training_args.process_index != 0:
        return
    from huggingface_hub import HfApi, constants

    repo_id = training_args.hub_model_id or Path(training_args.output_dir).absolute().name
    if constants.HF_HUB_OFFLINE:
        raise OSError(
            f"--push_to_hub {repo_id}: the Hub is not reached offline (HF_HUB_OFFLINE is set): unset HF_HUB_OFFLINE, "
            f"or drop --push_to_hub (the run saves its model in --output_dir, and `hf upload {repo_id} OUTPUT_DIR` "
            "publishes it later)"
        )
    try:
        HfApi(token=training_args.hub_token).create_repo(
            repo_id, private=training_args.hub_private_repo, exist_ok=True
        )
    except Exception as error:
        answer = hub_error_message(error)
        if answer is None:
            raise
        raise OSError(f"--push_to_hub {repo_id}: {answer}") from None
