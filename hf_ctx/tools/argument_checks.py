"""Checks of the example scripts' arguments, before anything is loaded: the paths they name, sizes, options that
override each other, mixed precision the device cannot run."""

from .families import MODEL_FAMILIES
from .paths import check_local_path

# The examples' arguments that name a checkpoint, config or tokenizer: a Hub id or a local path.
PATH_ARGUMENTS = ("model_name_or_path", "config_name", "tokenizer_name", "bilm_name_or_path")


def check_path_arguments(*argument_groups) -> None:
    """`check_local_path` on each of `PATH_ARGUMENTS` the examples' argument dataclasses set, except a
    `--config_name` that names a size preset ("mini")."""
    presets = {name for family in MODEL_FAMILIES.values() for name in family.presets}
    for group in argument_groups:
        for name in PATH_ARGUMENTS:
            value = getattr(group, name, None)
            if value is not None and not (name == "config_name" and value in presets):
                check_local_path(value, f"--{name}")


def check_positive_arguments(*argument_groups, names=("max_seq_length",)) -> None:
    """Refuse 0 or a negative value for the examples' size arguments `names` (0 would silently mean "the
    model's limit" or give empty examples)."""
    for group in argument_groups:
        for name in names:
            value = getattr(group, name, None)
            if value is not None and value <= 0:
                raise ValueError(f"--{name} must be a positive number, got {value}")


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
