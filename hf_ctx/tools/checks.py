"""Checks of what a user points hf_ctx at, shared by the converters, the CLI and the examples: local paths that
must exist, output folders, finite weights, the examples' arguments. (Loading a tokenizer with those checks is
`hf_ctx.tools.loading.load_tokenizer`.)

transformers 5 reads a missing local folder as a Hub id: `from_pretrained("runs/missing")`, offline, blames the
network ("We couldn't connect to 'https://huggingface.co'"), and `from_pretrained("/a/missing/folder")` says "Repo
id must be in the form ...", where a user wants to hear that the folder does not exist.
"""

import math
import os

from huggingface_hub import HfApi, constants
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import CONFIG_MAPPING

from ..data.files import read_json_file


def looks_like_local_path(name_or_path: str | os.PathLike) -> bool:
    """Whether `name_or_path` can only be a local path: absolute, relative to "." or "~", or not a valid Hub id
    ("name" or "owner/name")."""
    text = os.fspath(name_or_path)
    if os.path.isabs(text) or text.startswith((".", "~")):
        return True
    try:
        validate_repo_id(text)
    except HFValidationError:
        return True
    return False


def check_local_path(name_or_path: str | os.PathLike, what: str = "checkpoint") -> None:
    """Refuse, with one line that says so first, a `name_or_path` that is no local file or folder and no model the
    Hub has (or the Hub cache holds); refuse a local checkpoint whose config names an unknown `model_type`
    (`check_model_type`).

    transformers would read such a name as a Hub id and fail later, after the data are loaded, blaming the
    network ("We couldn't connect to 'https://huggingface.co'") or the id's form. Offline
    (`HF_HUB_OFFLINE=1`) the Hub is not asked; online a missing name costs one `repo_info` request.
    """
    text = os.fspath(name_or_path)
    if os.path.exists(os.path.expanduser(text)):
        check_model_type(name_or_path, what)
        return
    if looks_like_local_path(text):
        raise FileNotFoundError(f"no folder {text!r}, given for {what}")
    if os.path.isdir(os.path.join(constants.HF_HUB_CACHE, repo_folder_name(repo_id=text, repo_type="model"))):
        return  # downloaded before: transformers loads it from the cache, online or not
    if constants.HF_HUB_OFFLINE:
        raise FileNotFoundError(f"no folder {text!r} (and the Hub is not tried offline), given for {what}")
    try:
        found = HfApi().repo_exists(text)
    except Exception as error:  # the HTTP client's connection errors, which differ between huggingface_hub versions
        raise FileNotFoundError(
            f"no folder {text!r} (and the Hub could not be reached: {error}), given for {what}"
        ) from None
    if not found:
        raise FileNotFoundError(f"{text!r} is neither a local folder nor a model on the Hub, given for {what}")


def check_model_type(name_or_path: str | os.PathLike, what: str = "checkpoint") -> None:
    """A `ValueError` naming the type when the local folder `name_or_path` holds a config.json whose `model_type`
    neither transformers nor hf_ctx registers. transformers would instead ask whether to run the checkpoint's own
    code ("[y/N]"), or fail without naming the type; a Hub id is left to transformers."""
    config_file = os.path.join(os.path.expanduser(os.fspath(name_or_path)), "config.json")
    if not os.path.isfile(config_file):
        return
    try:
        config = read_json_file(config_file, "a model's config, one JSON object")
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{what}: {config_file} holds a JSON {type(config).__name__}, not a config (one JSON object)")
    model_type = config.get("model_type")
    if model_type is not None and model_type not in CONFIG_MAPPING:
        ours = sorted(name for name in CONFIG_MAPPING if name.startswith("hf_ctx_"))  # registered by `import hf_ctx`
        raise ValueError(
            f"{what}: {config_file} has model_type {model_type!r}, which neither hf_ctx (its types: "
            f"{', '.join(ours)}) nor transformers knows; a checkpoint of another library or a newer hf_ctx?"
        )


# The examples' arguments that name a checkpoint, config or tokenizer: a Hub id or a local path.
PATH_ARGUMENTS = ("model_name_or_path", "config_name", "tokenizer_name", "bilm_name_or_path")


def check_path_arguments(*argument_groups) -> None:
    """`check_local_path` on each of `PATH_ARGUMENTS` the examples' argument dataclasses set, except a
    `--config_name` that names a size preset ("mini")."""
    from .families import MODEL_FAMILIES

    presets = {name for family in MODEL_FAMILIES.values() for name in family.presets}
    for group in argument_groups:
        for name in PATH_ARGUMENTS:
            value = getattr(group, name, None)
            if value is not None and not (name == "config_name" and value in presets):
                check_local_path(value, f"--{name}")


# Files whose presence makes a folder a checkpoint (a model's or a tokenizer's).
CHECKPOINT_MARKERS = ("config.json", "tokenizer_config.json", "model.safetensors", "model.safetensors.index.json")


def check_output_dir(out_dir: str | os.PathLike, *, source_dir: str | os.PathLike | None = None) -> None:
    """Refuse an output folder that is a file, or that is the source folder (writing would overwrite it)."""
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"output folder {out_dir} is a file; give a folder (it is created if needed)")
    if source_dir is not None and os.path.realpath(out_dir) == os.path.realpath(os.fspath(source_dir)):
        raise ValueError(
            f"output folder {out_dir} is the source folder; writing there would overwrite the source. "
            "Give another output folder"
        )


def check_no_checkpoint_in(out_dir: str | os.PathLike) -> None:
    """Refuse to write a whole new checkpoint (a converter's) into a folder that holds one already: the new files
    would sit beside the old model's other files (its tokenizer, its code), and the folder would load a mix."""
    out_dir = os.fspath(out_dir)
    found = [name for name in CHECKPOINT_MARKERS if os.path.isfile(os.path.join(out_dir, name))]
    if found:
        raise ValueError(
            f"output folder {out_dir} already holds a checkpoint ({', '.join(found)}); writing another one into it "
            "would leave a mix of the two. Give a new or empty folder, or delete that one first"
        )


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
