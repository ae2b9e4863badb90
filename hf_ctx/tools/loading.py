"""Loading the tokenizer a user names, refusing one that would train on nothing, one whose files are damaged or
disagree with themselves, and one that asks to run code of its own; and loading a checkpoint whose pretraining
continues, naming the heads it lacks.

transformers 5 is lenient where a user wants an error: `AutoTokenizer.from_pretrained` on a folder without tokenizer
files returns a tokenizer holding only its special tokens (BERT: 5), which maps every word to `[UNK]`: training on
it "works" and learns nothing.
"""

import logging
import os
import pickle

import torch
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoTokenizer
from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
from transformers.trainer_pt_utils import safe_globals

from ..atomic_files import damaged_files
from ..data.files import read_json_file
from ..remote_code import CONVERT_TO_SAFETENSORS, pickle_refusal
from .families import MODEL_FAMILIES, find_family
from .paths import check_local_path, check_model_type

logger = logging.getLogger(__name__)


# What a message about a tokenizer without vocabulary suggests, where the caller does not say.
TOKENIZER_WAY_ON = (
    "Point to a folder with the tokenizer files (e.g. --tokenizer_name), or train one with `hf-ctx train-tokenizer`"
)


def check_tokenizer_vocabulary(tokenizer, source: str | os.PathLike, way_on: str = TOKENIZER_WAY_ON):
    """Return `tokenizer` if its vocabulary holds more than its special tokens; else raise `ValueError` naming the
    vocabulary files missing from `source` (the folder or Hub id it was loaded from).

    Tokenizers that read characters (ELMo's, which says whether it has a word vocabulary) pass: their words need
    no vocabulary.
    """
    if getattr(tokenizer, "has_word_vocabulary", None) is not None:
        return tokenizer
    special = set(tokenizer.all_special_tokens)
    vocab = tokenizer.get_vocab()
    if any(token not in special for token in vocab):
        check_tokenizer_consistency(tokenizer, vocab, source)
        return tokenizer
    source = os.fspath(source)
    names = sorted(set(getattr(tokenizer, "vocab_files_names", {}).values()) | {"tokenizer.json"})
    where = (
        f"none of {', '.join(names)} is in {source}"
        if os.path.isdir(source)
        else f"{source} provides none of {', '.join(names)}"
    )
    raise ValueError(
        f"the tokenizer loaded from {source} has no vocabulary, only its {len(special)} special tokens, so every word "
        f"would become {tokenizer.unk_token}: {where}. {way_on}"
    )


def check_pickle_loads_safely(path: str | os.PathLike, what: str, way_on: str = CONVERT_TO_SAFETENSORS) -> None:
    """A `ValueError` (`pickle_refusal`: the file and the way on, in one line) when the pickle at `path` (a
    `torch.save` file: `what` says which, e.g. "the optimizer state") holds anything but tensors, numbers and
    plain containers: torch's weights-only unpickler refuses it and runs nothing. Its storages are memory-mapped,
    so a whole file costs no read of its tensors. torch itself would raise a 10-frame traceback advising
    `weights_only=False`, the one thing not to do with a file from someone else."""
    path = os.fspath(path)
    try:
        with safe_globals():  # the numpy types of the Trainer's RNG state, as transformers allows them
            try:
                torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as error:
                if "mmap" not in str(error):  # a pickle of the legacy format, which cannot be memory-mapped
                    raise
                torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(pickle_refusal(path, what, way_on)) from None


# The files a tokenizer folder may hold that are read as JSON.
TOKENIZER_JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


def check_tokenizer_folder(folder: str | os.PathLike, trust_remote_code: bool = False) -> None:
    """Refuse, naming the file, a local tokenizer folder whose JSON files are truncated or damaged (transformers
    says "EOF while parsing" or "Expecting value" without a name) or whose tokenizer.json has another structure
    than a `tokenizers` file (`KeyError: 'added_tokens'`), and one whose config asks for code of its own
    (`auto_map`) naming a tokenizer class neither transformers nor hf_ctx has, unless `trust_remote_code`:
    transformers would ask "[y/N]" on the terminal, or fail where there is none."""
    folder = os.path.expanduser(os.fspath(folder))
    if not os.path.isdir(folder):
        return
    damaged = damaged_files(folder, TOKENIZER_JSON_FILES)
    if damaged:
        raise ValueError(
            f"tokenizer: in {folder}, {', '.join(damaged)} is incomplete or corrupt; save or copy it again"
        )
    tokenizer_file = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(tokenizer_file):
        try:  # valid JSON of another structure: transformers failed with `KeyError: 'added_tokens'`
            Tokenizer.from_file(tokenizer_file)
        except Exception as error:  # tokenizers raises a bare Exception naming the field
            raise ValueError(
                f"tokenizer: {tokenizer_file} is not a tokenizer file of the `tokenizers` library ({error}); save "
                "or copy it again"
            ) from None
    for name in ("tokenizer_config.json", "config.json"):
        path = os.path.join(folder, name)
        config = read_json_file(path, "a JSON object") if os.path.isfile(path) else {}
        auto_map = config.get("auto_map") if isinstance(config, dict) else None
        wanted = config.get("tokenizer_class") if isinstance(config, dict) else None
        if not isinstance(auto_map, dict) or "AutoTokenizer" not in auto_map or trust_remote_code:
            continue
        if isinstance(wanted, str) and tokenizer_class_from_name(wanted) is not None:
            continue  # a class of transformers' or hf_ctx's own: it loads without the folder's code
        raise ValueError(
            f"tokenizer: {path} asks for code of its own (auto_map {auto_map['AutoTokenizer']!r}, tokenizer_class "
            f"{wanted!r}), which neither transformers nor hf_ctx provides; hf_ctx does not run a folder's code"
        )


def check_tokenizer_consistency(tokenizer, vocab: dict, source: str | os.PathLike) -> None:
    """Refuse a tokenizer whose files disagree with themselves, naming `source`: two tokens with one id (a
    `tokenizer.json` whose `[UNK]` is missing gets it added over the last word's id; a hand-edited vocabulary).
    The model's embeddings could not tell them apart, nor decoding."""
    if len(set(vocab.values())) == len(vocab):
        return
    by_id = {}
    for token, token_id in sorted(vocab.items(), key=lambda item: item[1]):
        by_id.setdefault(token_id, []).append(token)
    token_id, tokens = next((i, t) for i, t in by_id.items() if len(t) > 1)
    raise ValueError(
        f"the tokenizer loaded from {os.fspath(source)} gives id {token_id} to {len(tokens)} tokens "
        f"({', '.join(map(repr, tokens[:3]))}): its vocabulary is damaged, or its files disagree"
    )


# Options of transformers' loading that it keeps in a tokenizer's `init_kwargs` and so writes into every
# tokenizer_config.json saved from it: they say how this machine loaded the files, not what the tokenizer is.
LOADING_OPTIONS = ("is_local", "local_files_only")


def load_tokenizer(name_or_path: str | os.PathLike, way_on: str = TOKENIZER_WAY_ON, **kwargs):
    """`AutoTokenizer.from_pretrained(name_or_path, **kwargs)`, refusing a missing local path, a local folder with
    damaged files or code of its own (`check_tokenizer_folder`) and a tokenizer without a real vocabulary
    (`check_tokenizer_vocabulary`; `way_on`: what its message suggests). Saved again, it writes the files it was loaded from (`LOADING_OPTIONS` left
    out), so a run that keeps a checkpoint's tokenizer keeps its files."""
    check_local_path(name_or_path, "tokenizer")
    check_tokenizer_folder(name_or_path, kwargs.get("trust_remote_code", False))
    tokenizer = check_tokenizer_vocabulary(AutoTokenizer.from_pretrained(name_or_path, **kwargs), name_or_path, way_on)
    for option in LOADING_OPTIONS:
        tokenizer.init_kwargs.pop(option, None)
    return tokenizer


def load_pretraining_config(name_or_path: str | os.PathLike, family_name: str):
    """The config of the checkpoint `name_or_path` whose pretraining continues; a `ValueError` naming its type when it is not a checkpoint of hf_ctx's family `family_name` ("bert", "elmo"),
    the only models a pretraining script can train. Any model of the family continues: a pretraining checkpoint,
    one with a masked-LM head only, a task model or a converted encoder (`load_pretraining_model` creates the
    heads it lacks)."""
    check_model_type(name_or_path, "--model_name_or_path")
    config = AutoConfig.from_pretrained(name_or_path)
    family, wanted = find_family(config), MODEL_FAMILIES[family_name]
    if family is not wanted:
        hint = "; a transformers BERT converts with `hf-ctx convert-bert`" if family is None else ""
        raise ValueError(
            f"--model_name_or_path {os.fspath(name_or_path)} is a {config.model_type!r} checkpoint; this script "
            f"continues the pretraining of hf_ctx {wanted.title} checkpoints ({wanted.config_class.model_type!r})"
            + hint
        )
    return config


def load_pretraining_model(name_or_path: str | os.PathLike, config) -> tuple:
    """(the pretraining model of `config`'s family with the weights of `name_or_path`, the modules whose weights
    the checkpoint did not hold). Those modules (BERT's `cls.predictions` of a task model, ELMo's `softmax` of a
    converted biLM) start from random weights: this says so in the log, and the caller's model card repeats it."""
    model_class = find_family(config).models["pretraining"]
    model, loading_info = model_class.from_pretrained(name_or_path, config=config, output_loading_info=True)
    created = sorted({name.rsplit(".", 1)[0] for name in loading_info["missing_keys"]})
    if created:
        logger.warning(
            f"{os.fspath(name_or_path)} has no weights for {', '.join(created)}: created with random weights "
            "(the rest of the model is the checkpoint's)"
        )
    return model, created
