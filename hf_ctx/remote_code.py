"""Checkpoints that carry their own source code, so that they load where hf_ctx is not installed.

transformers' remote-code mechanism: when an object whose class was registered with `register_for_auto_class`
is saved, the source file defining the class is copied next to the weights, with the files it imports through
single-dot relative imports (recursively), and the checkpoint's `auto_map` (in `config.json`, or in
`tokenizer_config.json` for tokenizers) names the class as `"<file>.<Class>"`. There
`AutoX.from_pretrained(path, trust_remote_code=True)` imports the class from the copy. Where hf_ctx is installed,
its registered classes take precedence and `trust_remote_code` is not needed.

transformers names only the class being saved, but a user may load a pretraining checkpoint with `AutoModel`
or `AutoModelForTokenClassification`: [`register_remote_code`] remembers every Auto class of each model family
and [`AutoMapMixin`], mixed into the family's `PreTrainedModel` base class, names them all when saving.

This module travels with the checkpoints of every model that imports it: it imports only the standard library.
"""

import fnmatch
import functools
import json
import os

from .atomic_files import damaged_files, write_into_folder
from .configuration_checks import check_model_type_of


def shareable_name(name_or_path) -> str | None:
    """How a checkpoint may name another one it came from (a config's `bilm_name_or_path`, a card's base model)
    without publishing the local file system: a Hub id (`user/name`) as it is, a local path as its folder's name.
    """
    if name_or_path is None:
        return None
    name = os.fspath(name_or_path).rstrip("/\\")
    is_local = os.path.isabs(name) or os.path.exists(name) or name.startswith((".", "~")) or name.count("/") > 1
    return os.path.basename(name) if is_local else name


# Weight files in transformers' pickled format (`torch.save`): reading a pickle can run any code it holds, so
# hf_ctx loads weights from safetensors only (`model.safetensors`, or its shards).
PICKLED_WEIGHT_FILES = ("pytorch_model*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")
SAFETENSORS_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors")


CONVERT_TO_SAFETENSORS = (
    "Convert it to safetensors with a tool you trust, on a machine where its code can do no harm, or use a "
    "copy saved as safetensors"
)


def pickle_refusal(path, what: str = "this file", way_on: str = CONVERT_TO_SAFETENSORS) -> str:
    """The one line that refuses to read the pickle at `path`: what it is, and the way on (by default a conversion
    by a tool the user trusts, where running the file's code can do no harm: right for weights, not for a
    training state, which has no safetensors form the Trainer reads)."""
    return (
        f"{os.fspath(path)} is a pickle ({what}); reading one can run any code it holds, so hf_ctx does not. {way_on}"
    )


def damaged_folder_error(folder: str | os.PathLike, damaged: list[str]) -> OSError:
    """The error for a checkpoint folder whose files `damaged` ("name (reason)", `damaged_files`) are truncated or
    corrupt."""
    return OSError(
        f"cannot load {os.fspath(folder)}: {', '.join(damaged)} is incomplete or corrupt (a save or copy that was "
        "cut short?); save or copy it again"
    )


def check_no_pickled_weights(folder) -> None:
    """An `OSError` when the local folder `folder` holds its weights only in pickles (`pytorch_model.bin`, ...)
    and none in safetensors: transformers would unpickle them (safely refused by `weights_only`, but in a
    traceback advising `weights_only=False`, the one thing not to do with a file from someone else)."""
    if not isinstance(folder, (str, os.PathLike)):
        return
    folder = os.path.expanduser(os.fspath(folder))
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []

    def matching(patterns):
        return [name for name in names if any(fnmatch.fnmatch(name, pattern) for pattern in patterns)]

    pickled = matching(PICKLED_WEIGHT_FILES)
    if pickled and not matching(SAFETENSORS_WEIGHT_FILES):
        raise OSError(pickle_refusal(os.path.join(folder, pickled[0]), "the folder's only weights"))


def check_config_file_type(config_class, folder) -> None:
    """`check_model_type_of(config_class, ...)` on the config.json of the local folder `folder`, read before
    transformers reads it (which warns "You are using a model of type ..." first, twice)."""
    if not isinstance(folder, (str, os.PathLike)):
        return
    config_file = os.path.join(os.path.expanduser(os.fspath(folder)), "config.json")
    try:
        with open(config_file, encoding="utf-8") as f:
            config_dict = json.load(f)
    except (OSError, ValueError):
        return  # none, or damaged: the loading says so
    check_model_type_of(config_class, config_dict, config_file)


def checking_hf_ctx_folders(resolve_trust_remote_code):
    """transformers' `resolve_trust_remote_code` (as `AutoConfig.from_pretrained` calls it, for every config.json
    with an `auto_map`) that first checks a local folder's config.json (`check_config_file_type`): a folder saved
    by hf_ctx whose `model_type` was edited is named in one line, where transformers asked "Do you wish to run the
    custom code? [y/N]" (a type it does not know: the folder's code looked like the only way to load it) or built
    another library's model from it (a type it knows, e.g. "bert"). `import hf_ctx` installs it; other folders go
    to transformers' resolution unchanged."""
    if getattr(resolve_trust_remote_code, "checks_hf_ctx_folders", False):
        return resolve_trust_remote_code  # a second import

    @functools.wraps(resolve_trust_remote_code)
    def resolve(trust_remote_code, model_name, *args, **kwargs):
        check_config_file_type(None, model_name)
        return resolve_trust_remote_code(trust_remote_code, model_name, *args, **kwargs)

    resolve.checks_hf_ctx_folders = True
    return resolve


def tokenizer_mismatch(vocab_size, tokens: int, word_vocabulary: bool, source, files: str) -> str | None:
    """The one line that refuses a tokenizer of `tokens` ids (read from `files` of `source`) for a model of
    `vocab_size` embedding rows, or None where it fits: a word vocabulary (ELMo's and TagLM's, whose ids are the
    rows of the model's word embeddings) must have exactly as many words, a sub-word one no more ids than rows."""
    if vocab_size is None or tokens == vocab_size or (tokens < vocab_size and not word_vocabulary):
        return None
    source = os.fspath(source)
    if not word_vocabulary:
        return (
            f"the tokenizer of {source} has {tokens} tokens ({files}) but the model only {vocab_size} (config.json "
            f"vocab_size, its embedding rows): ids from {vocab_size} on have no row; use the tokenizer the model "
            "was trained with"
        )
    # A word's id is its row of the model's word embeddings: a vocabulary cut or replaced shifts every id after
    # the change, and the model tags differently without a word.
    return (
        f"the tokenizer of {source} has {tokens} words ({files}) but the model's word vocabulary has {vocab_size} "
        "(config.json vocab_size, its embedding rows): the vocabulary was cut or replaced; use the tokenizer files "
        "saved with the model"
    )


def check_tokenizer_fits_model(config, tokenizer, source) -> None:
    """`tokenizer_mismatch` of a tokenizer object against a model's config, as a `ValueError`: every entry that
    pairs a tokenizer with a model (the scripts, hf_ctx's pipelines) passes here."""
    files = ", ".join(sorted(set(getattr(tokenizer, "vocab_files_names", {}).values()))) or "its vocabulary"
    word_vocabulary = bool(getattr(tokenizer, "has_word_vocabulary", False))
    message = tokenizer_mismatch(getattr(config, "vocab_size", None), len(tokenizer), word_vocabulary, source, files)
    if message:
        raise ValueError(message)


def _saved_tokenizer_size(folder: str) -> tuple[int, bool, str] | None:
    """(ids, whether they are a word vocabulary, the file counted) of the tokenizer saved in the local `folder`,
    counted from its files without building it: ElmoTokenizer's vocab.txt (one word a line), else tokenizer.json's
    vocabulary and added tokens. None where the folder holds no tokenizer, or one that cannot be read (loading it
    names the damage)."""
    try:
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            tokenizer_config = json.load(f)
        added = [int(key) for key in (tokenizer_config.get("added_tokens_decoder") or {})]
        if tokenizer_config.get("tokenizer_class") == "ElmoTokenizer":
            with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
                words = sum(1 for line in f if line.strip() and line.strip() != "!!!MAXTERMID")
            return max([words - 1, *added]) + 1, True, "vocab.txt"
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            tokenizer_file = json.load(f)
        vocab = tokenizer_file["model"]["vocab"]
        ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
        ids += [token["id"] for token in tokenizer_file.get("added_tokens") or []]
        return max(ids) + 1, False, "tokenizer.json"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def check_saved_tokenizer_fits(config, folder) -> None:
    """`tokenizer_mismatch` of the tokenizer files saved in the local folder `folder` against the model loaded
    from it (its config), as a `ValueError`: a model and its tokenizer loaded from one folder, directly or by a
    pipeline, never disagree silently."""
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isdir(folder):
        return
    folder = os.fspath(folder)
    saved = _saved_tokenizer_size(folder)
    if saved is not None:
        tokens, word_vocabulary, file = saved
        message = tokenizer_mismatch(getattr(config, "vocab_size", None), tokens, word_vocabulary, folder, file)
        if message:
            raise ValueError(message)


# model_type -> {Auto class name: "<module file>.<Class>"} of every model class registered for that config.
_FAMILY_AUTO_MAPS: dict[str, dict[str, str]] = {}


def class_reference(cls: type) -> str:
    """How `auto_map` names a class: `"<module file>.<Class>"`, e.g. `"modeling_bert.CtxBertModel"`."""
    return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"


def registered_auto_class(model_class: type) -> str | None:
    """The name of the Auto class hf_ctx registers `model_class` with (e.g. `"AutoModelForPreTraining"`)."""
    family = _FAMILY_AUTO_MAPS.get(model_class.config_class.model_type, {})
    return next((auto for auto, ref in family.items() if ref == class_reference(model_class)), None)


def register_remote_code(auto_configs, auto_models, auto_tokenizers) -> None:
    """Make hf_ctx's configs, models and tokenizers save their source with their checkpoints.

    Takes the registration tables of `hf_ctx/__init__.py`: config classes, (Auto class, model class) pairs and
    (config class, tokenizer class) pairs. Tokenizer classes of transformers itself (BERT's `BertTokenizer`)
    load everywhere from `tokenizer_class` and are left alone. Calling it again is harmless.
    """
    for config_class in auto_configs:
        config_class.register_for_auto_class("AutoConfig")
    for auto_class, model_class in auto_models:
        # A class has a single `_auto_class`; the family table below covers classes listed twice.
        model_class.register_for_auto_class(auto_class)
        family = _FAMILY_AUTO_MAPS.setdefault(model_class.config_class.model_type, {})
        family[auto_class.__name__] = class_reference(model_class)
    for _, tokenizer_class in auto_tokenizers:
        if not tokenizer_class.__module__.startswith("transformers."):
            tokenizer_class.register_for_auto_class("AutoTokenizer")


def nonfinite_tensors(named_tensors) -> list[tuple[str, int]]:
    """(name, number of NaN or infinite values) of each floating-point tensor of `named_tensors` (name -> tensor,
    e.g. a state dict) that holds any; tensors without storage (the meta device) are skipped. One pass over the
    values; tensor methods only, so this module needs no torch import."""
    found = []
    for name, tensor in named_tensors.items():
        if not tensor.is_floating_point() or tensor.device.type == "meta":
            continue
        finite = tensor.detach().isfinite()
        if not finite.all():
            found.append((name, int(finite.numel() - finite.sum())))
    return found


def check_finite_weights(
    named_tensors, source, consequence: str = "the checkpoint is damaged or comes from a run that diverged"
) -> None:
    """A `ValueError` naming `source` (a file, folder or model) and the tensors of `named_tensors` (name -> tensor)
    that hold NaN or infinite values, then `consequence`: weights that are damaged or come from a run that
    diverged would only give NaN outputs."""
    found = nonfinite_tensors(named_tensors)
    if not found:
        return
    (name, count), more = found[0], [name for name, _ in found[1:]]
    others = ""
    if more:
        shown = ", ".join(more[:5]) + (f" and {len(more) - 5} more" if len(more) > 5 else "")
        others = f", and {len(more)} more of the {len(named_tensors)} tensors do too ({shown})"
    raise ValueError(
        f"{os.fspath(source) if isinstance(source, (str, os.PathLike)) else source}: the weights {name} hold "
        f"{count} NaN or infinite value(s){others}; {consequence}"
    )


def _mismatched_shapes(error: BaseException) -> list[tuple]:
    """(name, shape in the weights, shape in the model) of each tensor whose shapes differ, where `error` is
    transformers' "You set `ignore_mismatched_sizes` to `False`" (which names none: they are in its load report,
    whose `loading_info` the raising frame holds); else empty."""
    if not isinstance(error, RuntimeError) or "ignore_mismatched_sizes" not in str(error):
        return []
    traceback = error.__traceback__
    while traceback is not None:
        info = traceback.tb_frame.f_locals.get("loading_info")
        if info is not None and getattr(info, "mismatched_keys", None):
            return sorted(info.mismatched_keys)
        traceback = traceback.tb_next
    return []


class MismatchedSizesError(RuntimeError, ValueError):
    """Weights of a checkpoint whose shapes differ from the model's. A `RuntimeError`, as transformers raises it
    (`ignore_mismatched_sizes=False`), and a `ValueError`, hf_ctx's error for what a user can fix."""


# `from_pretrained` options that are also config attributes and change no weight's shape.
_LOADING_OPTIONS = {"dtype", "torch_dtype", "attn_implementation", "output_attentions", "output_hidden_states"}
# Config entries that say where a config came from, not what model it describes.
_PROVENANCE = {"transformers_version", "architectures", "auto_map", "_name_or_path", "dtype", "torch_dtype"}
_HUB_OPTIONS = ("cache_dir", "revision", "token", "local_files_only", "subfolder", "force_download")


def _caller_changes(cls, folder, args, kwargs) -> list[str]:
    """The config fields that the caller of `from_pretrained` gave other values than the checkpoint's config.json
    (`num_labels=3`, or the fields of a `config=` that differ); empty when the model is the one config.json
    describes, or that config cannot be read."""
    try:
        saved = cls.config_class.from_pretrained(folder, **{k: kwargs[k] for k in _HUB_OPTIONS if k in kwargs})
    except Exception:  # a config.json that does not load: say nothing of the caller's part
        return []
    given = kwargs.get("config", args[0] if args else None)
    if hasattr(given, "to_dict"):
        wanted = given.to_dict()
    else:
        wanted = {key: value for key, value in kwargs.items() if hasattr(saved, key) and key not in _LOADING_OPTIONS}
    changed = {
        key: value for key, value in wanted.items() if key not in _PROVENANCE and getattr(saved, key, None) != value
    }
    if "id2label" in changed and len(changed["id2label"]) != saved.num_labels:  # a label set of another size
        changed = {"num_labels": len(changed.pop("id2label")), **changed}
        changed.pop("label2id", None)
    shown = {key: repr(value) for key, value in changed.items()}
    return [f"{key}={text if len(text) <= 40 else text[:37] + '...'}" for key, text in shown.items()]


def _mismatch_message(folder, mismatched: list[tuple], changes: list[str]) -> str:
    (name, in_file, in_model), more = mismatched[0], len(mismatched) - 1
    shapes = (
        f"{name} is {list(in_file)} in the weights, {list(in_model)} in the model"
        f"{f' (and {more} more tensors differ)' if more else ''}"
    )
    if changes:
        return (
            f"cannot load {os.fspath(folder)} into the model your arguments describe ({', '.join(changes)}): {shapes}. "
            "To keep the other weights and start these anew (a new head for a new label set), pass "
            "ignore_mismatched_sizes=True (the example scripts: --ignore_mismatched_sizes)"
        )
    return (
        f"cannot load {os.fspath(folder)}: its weights do not fit the model its config.json describes: {shapes}; "
        "config.json and the weights come from different models?"
    )


class AutoMapMixin:
    """Mix into a model family's `PreTrainedModel` base class (before `PreTrainedModel`) so that
    `save_pretrained` writes an `auto_map` naming the family's model class for every Auto class it is registered
    with, all pointing into the copied modeling file.

    Where hf_ctx is not installed (a checkpoint loaded as remote code and saved again) the family is unknown
    here, and the `auto_map` the checkpoint was loaded with is kept.

    As the base of every hf_ctx model it also checks the config a model is built from (`config.validate()`:
    a config changed by assignment since it was made, e.g. `config.num_attention_heads = 5`, is checked whole).
    """

    def __init__(self, config, *args, **kwargs):
        if hasattr(config, "validate"):
            config.validate()
        super().__init__(config, *args, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' `from_pretrained`; a local folder that fails to load because one of its files is truncated
        or damaged gets an `OSError` naming the file (transformers' own error, e.g. safetensors' "incomplete
        metadata", names none), and weights holding NaN or infinite values a `ValueError` naming the tensors
        (`check_finite_weights`: one pass over the loaded values); tokenizer files saved beside it that do not
        fit its vocabulary a `ValueError` naming them (`check_saved_tokenizer_fits`)."""
        check_no_pickled_weights(pretrained_model_name_or_path)
        check_config_file_type(cls.config_class, pretrained_model_name_or_path)
        try:
            loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except Exception as error:
            folder = pretrained_model_name_or_path
            damaged = damaged_files(folder) if isinstance(folder, (str, os.PathLike)) and os.path.isdir(folder) else []
            mismatched = _mismatched_shapes(error)
            if mismatched:
                changes = _caller_changes(cls, folder, args, kwargs)
                raise MismatchedSizesError(_mismatch_message(folder, mismatched, changes)) from error
            if not damaged:
                raise
            raise damaged_folder_error(folder, damaged) from error
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # a tuple with output_loading_info
        check_finite_weights(model.state_dict(), pretrained_model_name_or_path)
        check_saved_tokenizer_fits(model.config, pretrained_model_name_or_path)
        return loaded

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' `save_pretrained`, written atomically (`write_into_folder`): a save that fails (a full
        disk) leaves the previous checkpoint in `save_directory` as it was."""
        family = _FAMILY_AUTO_MAPS.get(self.config.model_type)
        if family:
            # transformers adds "AutoConfig" when it saves the config.
            self.config.auto_map = dict(family)
        save = super().save_pretrained
        if kwargs.get("push_to_hub"):  # the Hub repository is named after save_directory
            return save(save_directory, *args, **kwargs)
        return write_into_folder(save_directory, lambda staging: save(staging, *args, **kwargs))
