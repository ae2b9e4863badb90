"""Checks of the files and folders a user points hf_ctx at, shared by the converters, the CLI and the examples: local
paths that must exist (or Hub ids), the model type of a checkpoint folder, output folders. (Loading a tokenizer with
those checks is `hf_ctx.tools.loading.load_tokenizer`; the examples' other arguments are checked in
`hf_ctx.tools.argument_checks`.)

transformers 5 reads a missing local folder as a Hub id: `from_pretrained("runs/missing")`, offline, blames the
network ("We couldn't connect to 'https://huggingface.co'"), and `from_pretrained("/a/missing/folder")` says "Repo
id must be in the form ...", where a user wants to hear that the folder does not exist.
"""

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
