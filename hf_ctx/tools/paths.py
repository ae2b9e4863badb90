"""Checks of the files and folders a user points hf_ctx at, shared by the converters, the CLI and the examples: local
paths that must exist (or Hub ids), the model type of a checkpoint folder, output folders. (Loading a tokenizer with
those checks is `hf_ctx.tools.loading.load_tokenizer`; the examples' other arguments are checked in
`hf_ctx.tools.argument_checks`.)

transformers 5 reads a missing local folder as a Hub id: `from_pretrained("runs/missing")`, offline, blames the
network ("We couldn't connect to 'https://huggingface.co'"), and `from_pretrained("/a/missing/folder")` says "Repo
id must be in the form ...", where a user wants to hear that the folder does not exist.
"""

import fnmatch
import logging
import os
import re
import shutil

from huggingface_hub import HfApi, constants
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import CONFIG_MAPPING

from ..configuration_checks import check_model_type_of
from ..configuration_elmo import ElmoConfig
from ..data.files import read_json_file
from ..data.glue_tasks import GLUE_TASKS
from ..remote_code import check_no_pickled_weights
from .errors import hub_error_message
from .output_files import check_no_other_writer

logger = logging.getLogger(__name__)


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
    (`HF_HUB_OFFLINE=1`) the Hub is not asked; online a Hub id costs one `auth_check` request, which also finds
    a refused token or a gated repository (`hf_ctx.tools.errors.hub_error_message` says what the Hub answered).
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
        HfApi().auth_check(text)  # the repository is there and the token may read it (a gated one: has access)
    except RepositoryNotFoundError as error:
        if isinstance(error, GatedRepoError):
            raise PermissionError(f"{text!r}: {hub_error_message(error)}; given for {what}") from None
        raise FileNotFoundError(
            f"{text!r} is neither a local folder nor a model on the Hub, given for {what}"
        ) from None
    except Exception as error:  # a refused token; the HTTP client's connection errors (they differ by version)
        answer = hub_error_message(error) or f"{type(error).__name__}: {error}"
        raise FileNotFoundError(f"no folder {text!r}, and on the Hub: {answer}; given for {what}") from None


def check_model_folder(name_or_path: str | os.PathLike, what: str = "checkpoint") -> None:
    """`check_local_path`, and a local folder must hold a config.json: transformers says "Should have a
    `model_type` key in its config.json" of a folder that holds none, where a user wants to hear that the folder
    is not a model's. `what` names the argument."""
    check_local_path(name_or_path, what)
    folder = os.path.expanduser(os.fspath(name_or_path))
    if os.path.isdir(folder) and not os.path.isfile(os.path.join(folder, "config.json")):
        names = sorted(os.listdir(folder))
        held = f"it holds {_listed(names)}" if names else "it is empty"
        raise ValueError(
            f"{what} {os.fspath(name_or_path)}: no config.json there, so it does not look like a model folder "
            f"({held}); give the folder a run saved its model into (config.json, model.safetensors)"
        )


def check_model_type(name_or_path: str | os.PathLike, what: str = "checkpoint") -> None:
    """A `ValueError` naming the type when the local folder `name_or_path` holds a config.json whose `model_type`
    neither transformers nor hf_ctx registers. transformers would instead ask whether to run the checkpoint's own
    code ("[y/N]"), or fail without naming the type; a Hub id is left to transformers."""
    config_file = os.path.join(os.path.expanduser(os.fspath(name_or_path)), "config.json")
    if not os.path.isfile(config_file):
        return
    try:
        check_no_pickled_weights(name_or_path)
    except OSError as error:
        raise ValueError(f"{what}: {error}") from None
    try:
        config = read_json_file(config_file, "a model's config, one JSON object")
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{what}: {config_file} holds a JSON {type(config).__name__}, not a config (one JSON object)")
    try:
        check_model_type_of(None, config, config_file)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None
    model_type = config.get("model_type")
    if model_type is not None and model_type not in CONFIG_MAPPING:
        ours = sorted(name for name in CONFIG_MAPPING if name.startswith("hf_ctx_"))  # registered by `import hf_ctx`
        raise ValueError(
            f"{what}: {config_file} has model_type {model_type!r}, which neither hf_ctx (its types: "
            f"{', '.join(ours)}) nor transformers knows; a checkpoint of another library or a newer hf_ctx?"
        )


def check_elmo_checkpoint(name_or_path: str | os.PathLike, what: str, needed: str) -> None:
    """A `ValueError` when `name_or_path` (a checkpoint `check_local_path` let through) holds a model other than
    an ELMo, naming what it holds: a BERT folder given as a biLM is named as such, not blamed on its tokenizer
    later. `what` names the argument, `needed` what the ELMo is for."""
    from transformers import AutoConfig

    local = os.path.expanduser(os.fspath(name_or_path))
    if os.path.exists(local) and not os.path.isfile(os.path.join(local, "config.json")):
        return  # no model at all: what reads it says so
    model_type = AutoConfig.from_pretrained(name_or_path).model_type
    if model_type != ElmoConfig.model_type:
        raise ValueError(
            f"{what} {os.fspath(name_or_path)} holds a {model_type!r} model, not an ELMo ({ElmoConfig.model_type!r}); "
            f"{needed} is an ELMo biLM checkpoint (examples/pretrain_elmo.py or hf-ctx convert-elmo writes one)"
        )


# Files whose presence makes a folder a checkpoint (a model's or a tokenizer's).
CHECKPOINT_MARKERS = ("config.json", "tokenizer_config.json", "model.safetensors", "model.safetensors.index.json")


def check_output_dir(
    out_dir: str | os.PathLike, *, source_dir: str | os.PathLike | None = None, what: str = "the source folder"
) -> None:
    """Refuse an output folder that is a file, that is the source folder (writing would overwrite it; `what`
    names the source in the message), or that another run is writing (`output_files.check_no_other_writer`)."""
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"output folder {out_dir} is a file; give a folder (it is created if needed)")
    check_no_other_writer(out_dir, "output folder")
    if source_dir is not None and os.path.realpath(out_dir) == os.path.realpath(os.fspath(source_dir)):
        raise ValueError(
            f"output folder {out_dir} is {what}; writing there would overwrite the source. Give another output folder"
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


def check_no_model_in(out_dir: str | os.PathLike, what: str = "--output_dir") -> None:
    """Refuse to write a new tokenizer into a folder that holds a model: the new vocabulary's ids would not fit
    the model's embeddings, and the finished model would be lost to a mismatch that loads without a word."""
    out_dir = os.fspath(out_dir)
    config = ["config.json"] if os.path.isfile(os.path.join(out_dir, "config.json")) else []
    found = config + [name for name in earlier_run_outputs(out_dir)["model"] if name != "README.md"]
    if found:
        raise ValueError(
            f"{what} {out_dir} holds a model ({', '.join(found)}); a new tokenizer written there would not fit its "
            f"weights. Give another {what}"
        )


# --- an output folder that holds an earlier run ------------------------------------------------------------

# What a run of the example scripts leaves in --output_dir that makes it that run's: the trained weights, the
# Trainer's checkpoint-N folders, and the results (metrics, predictions, submission files, the curves). Tokenizer
# and config files are not in the lists: a run writes them before it trains (pretrain_bert.py's new vocabulary),
# and the next run writes them again.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors")
CHECKPOINT_FOLDER = re.compile(r"^checkpoint-\d+$")
RESULT_FILES = (
    "*_results.json",  # the Trainer's metrics: train_, eval_, predict_, all_results.json
    "predictions*.txt",  # run_ner.py
    "*predictions.json",  # run_qa.py, run_swag.py
    "*null_odds.json",  # run_qa.py, SQuAD 2.0
    "predict_results.txt",  # run_glue.py on a user's files
    "training_curves.png",
    *sorted({name for task in GLUE_TASKS.values() for name in task.submission_files.values()}),  # CoLA.tsv, ...
)


def earlier_run_outputs(folder: str | os.PathLike) -> dict[str, list[str]]:
    """What an earlier run left in `folder`, by kind: {"model": weight files and hf_ctx's model card, "checkpoints":
    checkpoint-N folders, "results": metrics, predictions and pictures}; empty lists for a new or empty folder."""
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    files = [name for name in names if os.path.isfile(os.path.join(folder, name))]

    def matching(patterns):
        return [name for name in files if any(fnmatch.fnmatch(name, pattern) for pattern in patterns)]

    model = matching(WEIGHT_FILES)
    if model and is_hf_ctx_card(os.path.join(folder, "README.md")):
        model.append("README.md")
    checkpoints = [
        name for name in names if CHECKPOINT_FOLDER.match(name) and os.path.isdir(os.path.join(folder, name))
    ]
    checkpoints.sort(key=lambda name: int(name.partition("-")[2]))
    return {"model": model, "checkpoints": checkpoints, "results": matching(RESULT_FILES)}


def is_hf_ctx_card(path: str) -> bool:
    """Whether `path` is a model card that hf_ctx wrote (its metadata's tags name hf_ctx), not a user's README."""
    if not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.read(4096)
    metadata = head.split("\n---", 1)[0] if head.startswith("---") else ""
    return bool(re.search(r"^- hf_ctx$", metadata, re.MULTILINE))


def prepare_output_dir(
    output_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    resume: bool = False,
    what: str = "--output_dir",
    resumable: bool = True,
) -> None:
    """Make `output_dir` ready for a new run without losing an earlier one by accident.

    A folder that holds an earlier run's trained model, checkpoints or results is refused with one line naming it
    and the ways on, unless the run says what it means: `overwrite` (`--overwrite_output_dir`) removes that run's
    weights, checkpoints, results and card first, so that nothing left in the folder is taken for this run's;
    `resume` (`--resume_from_checkpoint`) keeps its checkpoints and weights to continue from and removes its
    results, which this run writes anew. Other files (a tokenizer, the user's own) are left alone. `what` names
    the folder's option in the message; `resumable`: whether the run could take `--resume_from_checkpoint`.
    """
    output_dir = os.fspath(output_dir)
    found = earlier_run_outputs(output_dir)
    if not any(found.values()):
        return
    if overwrite:
        remove = [*found["model"], *found["checkpoints"], *found["results"]]
    elif resume:
        remove = found["results"]
    else:
        raise ValueError(_earlier_run_refusal(output_dir, found, what, resumable))
    for name in remove:
        path = os.path.join(output_dir, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    if remove:
        logger.info(f"removed what an earlier run left in {output_dir}: {_listed(remove)}")


def _earlier_run_refusal(output_dir: str, found: dict[str, list[str]], what: str, resumable: bool) -> str:
    """The one line that refuses a new run into a folder holding an earlier one, naming what it holds and the
    ways on."""
    if found["model"]:
        held = f"a trained model ({_listed(found['model'])})"
    elif found["checkpoints"]:
        held = f"the checkpoints of an unfinished run ({_listed(found['checkpoints'])})"
    else:
        held = f"the results of an earlier run ({_listed(found['results'])})"
    if not resumable:
        resume = ""
    elif found["checkpoints"]:
        resume = f"--resume_from_checkpoint latest to continue its training from {found['checkpoints'][-1]}, "
    else:
        resume = "--resume_from_checkpoint to continue from a checkpoint (it has none), "
    return (
        f"{what} {output_dir} holds {held}; pass --overwrite_output_dir to replace it, {resume}or give another {what}"
    )


def _listed(names: list[str], shown: int = 4) -> str:
    """'a, b, c' or 'a, b, c, d and 3 more'."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"
