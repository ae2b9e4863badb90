"""A frozen biLM's per-word layer states, computed once and reused (what flair calls the embeddings storage mode).

A frozen biLM (TagLM's, or an ELMo task model's with `freeze_bilm`) gives every sentence the same states in every
epoch, seed and variant that uses it, and its forward is most of a tagger's step. `BiLMStateCache` computes the
states of each distinct sentence once; `BiLMStatesCollator` adds them to each batch as `bilm_hidden_states`
(B, W, L + 1, 2P), which the task models take instead of running the biLM.

    mode "memory"   states kept in RAM for this run (epochs after the first reuse them)
    mode "disk"     also written under `<directory>/<fingerprint>/`, read back (memory-mapped) by later runs

The fingerprint hashes everything that decides the states: the biLM's class, its weights (names, dtypes, shapes,
values: the dtype it computes in), its config (every field, `char_cnn.activation`, `lstm.cell_clip` and the rest,
except the few that only a task head or saving reads, `CONFIG_FIELDS_NOT_IN_STATES`) and the tokenizer's character
encoding (its class and width; not its word vocabulary, which the biLM never reads), so a run with the same biLM
reuses the folder, whatever word vocabulary its tagger has, and any other biLM gets a folder of its own. Inside it, each sentence is keyed
by a hash of its character ids, exactly what the biLM reads, so a different text (or a differently truncated word)
is never mistaken for another.

Storage is float32, the dtype the biLM computes in: logits with the cache equal those without it to float32 rounding
(bitwise where the biLM ran on the same batch; batching can move the last bit). float16 would halve the size (small
biLM: 154 MB instead of 307 MB per 100k words) but round every state by up to 2^-11 (5e-4) relative, so the cache would no
longer be exact and could not be on by default.

Files are safetensors (never pickle), written under a temporary name in the same folder, flushed and renamed, so an
interrupted or disk-full write leaves no file a later run reads; a file that does not read back is an error naming
it and the way to rebuild.
"""

import errno
import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from datasets.utils.tqdm import tqdm  # off where `datasets` progress bars are (output to a file)
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as serialize

from ..atomic_files import remove_stale_temporaries
from .atomic_write import atomic_write

logger = logging.getLogger(__name__)

CACHE_MODES = ("none", "memory", "disk")
STORAGE_DTYPE = torch.float32
FORMAT = "hf_ctx-bilm-states-1"
SHARD_BYTES = 256 * 2**20  # a disk shard is written once it holds this much


@dataclass
class BiLMCacheArguments:
    """The examples' cache options (`run_ner.py`, `run_glue.py`); their ModelArguments inherit them."""

    bilm_cache: str | None = field(
        default=None,
        metadata={
            "choices": list(CACHE_MODES),
            "help": "a frozen biLM's states computed once: 'disk' (the default where a biLM is frozen: reused by "
            "later epochs and by other runs with the same biLM), 'memory' (this run only) or 'none'",
        },
    )
    bilm_cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "where the disk cache lives (default: bilm_cache/ beside --output_dir)",
            "kind": "OUTPUT_FOLDER",  # by name: hf_ctx.tools.option_kinds is a layer above
        },
    )


# Config fields that cannot change a biLM's states: what a task head on top of it reads (the task models share
# their config with their biLM), what saving and labelling read, and `dropout` (the states are computed in eval
# mode). Every other field, present or future, is part of the fingerprint.
CONFIG_FIELDS_NOT_IN_STATES = frozenset(
    {
        "architectures",
        "auto_map",
        "bilm_state_norm",
        "classifier_dropout",
        "dropout",
        "dtype",  # the weights' own dtypes are hashed instead
        "finetuning_task",
        "freeze_bilm",
        "id2label",
        "label2id",
        "num_sampled",
        "output_attentions",
        "output_hidden_states",
        "problem_type",
        "return_dict",
        "scalar_mix_layer_norm",
        "scalar_mix_parameters",
        "share_softmax",
        "task_hidden_size",
        "task_word_embedding_size",
        "transformers_version",
    }
)


def states_config(config) -> dict:
    """The fields of the biLM's `config` that its states depend on (all but `CONFIG_FIELDS_NOT_IN_STATES` and the
    private ones)."""
    return {
        key: value
        for key, value in config.to_dict().items()
        if key not in CONFIG_FIELDS_NOT_IN_STATES and not key.startswith("_")
    }


def bilm_fingerprint(bilm: torch.nn.Module, tokenizer) -> str:
    """A hex digest of what decides the biLM's states: its class, its state dict (names, dtypes, shapes, values),
    its config (`states_config`) and the tokenizer's character encoding (class and width)."""
    digest = hashlib.sha256(FORMAT.encode())
    digest.update(type(bilm).__name__.encode())
    config = getattr(bilm, "config", None)
    if config is not None:
        digest.update(json.dumps(states_config(config), sort_keys=True, default=repr).encode())
    for name, tensor in sorted(bilm.state_dict().items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    width = getattr(tokenizer, "max_characters_per_token", None)
    digest.update(f"{type(tokenizer).__name__}:{width}".encode())
    return digest.hexdigest()[:32]


def sentence_key(input_ids, attention_mask=None) -> tuple[str, int]:
    """(a hex key of the sentence's character ids, its number of words) for one example's (W, C) `input_ids`."""
    ids = np.asarray(input_ids, dtype=np.int16)
    words = len(ids) if attention_mask is None else int(np.asarray(attention_mask).sum())
    ids = np.ascontiguousarray(ids[:words])
    return hashlib.blake2b(ids.tobytes() + str(ids.shape).encode(), digest_size=16).hexdigest(), words


def _rebuild_hint(folder: Path) -> str:
    return f"delete {folder} to rebuild it, or pass --bilm_cache none"


class BiLMStateCache:
    """The frozen `bilm`'s (an `ElmoModel`) per-word layer states, one (words, L + 1, 2P) float32 tensor per
    distinct sentence; `mode` "memory" or "disk" (`directory` needed)."""

    def __init__(self, bilm: torch.nn.Module, tokenizer, mode: str, directory: str | Path | None = None):
        if mode not in ("memory", "disk"):
            raise ValueError(f"bilm cache mode must be 'memory' or 'disk', got {mode!r}")
        if mode == "disk" and directory is None:
            raise ValueError("a disk biLM cache needs a directory (--bilm_cache_dir)")
        self.bilm, self.mode = bilm, mode
        self.layers, self.width = bilm.config.num_output_layers, bilm.config.hidden_size
        self.fingerprint = bilm_fingerprint(bilm, tokenizer)
        self.folder = Path(directory) / self.fingerprint if mode == "disk" else None
        self._memory: dict[str, torch.Tensor] = {}
        self._on_disk: dict[str, Path] = {}  # key -> the shard file holding it
        self._shards: dict[Path, object] = {}  # shard file -> its open (memory-mapped) reader, per process
        self.computed = 0  # sentences this process ran through the biLM
        if self.folder is not None:
            self._read_shards()

    def __len__(self) -> int:
        return len(self._memory.keys() | self._on_disk.keys())

    def __contains__(self, key: str) -> bool:
        return key in self._memory or key in self._on_disk

    def _read_shards(self):
        remove_stale_temporaries(self.folder, depth=0)  # shards a killed run was writing
        for path in sorted(self.folder.glob("states-*.safetensors")):
            self._open_shard(path)

    def __getstate__(self) -> dict:
        # For data-loader worker processes: open readers do not pickle; each process opens its own.
        return {**self.__dict__, "_shards": {}}

    def _shard(self, path: Path):
        if path not in self._shards:
            self._shards[path] = safe_open(str(path), framework="pt")
        return self._shards[path]

    def _open_shard(self, path: Path):
        try:
            shard = self._shard(path)
            metadata = shard.metadata() or {}
            keys = list(shard.keys())
        except (SafetensorError, OSError, ValueError) as error:
            raise ValueError(f"{path}: corrupt biLM cache file ({error}); {_rebuild_hint(self.folder)}") from error
        if metadata.get("format") != FORMAT or metadata.get("fingerprint") != self.fingerprint:
            raise ValueError(f"{path}: not a biLM cache file of this biLM; {_rebuild_hint(self.folder)}")
        for key in keys:
            self._on_disk.setdefault(key, path)

    def get(self, key: str, words: int) -> torch.Tensor:
        """The states (words, L + 1, 2P) of the sentence with this key."""
        if key in self._memory:
            return self._memory[key]
        try:
            states = self._shard(self._on_disk[key]).get_tensor(key)
        except (SafetensorError, OSError) as error:
            raise ValueError(f"corrupt biLM cache in {self.folder} ({error}); {_rebuild_hint(self.folder)}") from error
        if tuple(states.shape) != (words, self.layers, self.width) or states.dtype != STORAGE_DTYPE:
            raise ValueError(
                f"corrupt biLM cache in {self.folder}: a sentence of {words} words has states of shape "
                f"{tuple(states.shape)} {states.dtype}; {_rebuild_hint(self.folder)}"
            )
        return states

    @torch.no_grad()
    def compute(self, sentences: Iterable, batch_size: int = 32, progress: bool = True, write: bool = True) -> int:
        """Run the biLM on the sentences not cached yet: `sentences` are examples with `input_ids` (W, C) and
        optionally `attention_mask`; batches of similar length. With `write` (disk mode) the new states are
        written to disk; otherwise they are kept in memory. Returns the number of sentences computed."""
        todo = {}
        for example in sentences:
            key, words = sentence_key(example["input_ids"], example.get("attention_mask"))
            if key not in self and key not in todo and words > 0:
                todo[key] = np.asarray(example["input_ids"], dtype=np.int64)[:words]
        order = sorted(todo, key=lambda k: len(todo[k]))
        device = next(self.bilm.parameters()).device
        was_training = self.bilm.training
        self.bilm.eval()
        pending, pending_bytes = {}, 0
        batches = range(0, len(order), batch_size)
        for start in tqdm(batches, desc="biLM states (computed once)", disable=not progress or not batches):
            keys = order[start : start + batch_size]
            lengths = [len(todo[k]) for k in keys]
            input_ids = torch.zeros(len(keys), max(lengths), todo[keys[0]].shape[1], dtype=torch.long)
            for row, key in enumerate(keys):
                input_ids[row, : lengths[row]] = torch.from_numpy(todo[key])
            mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
            states = self.bilm(
                input_ids=input_ids.to(device), attention_mask=mask.to(device), output_hidden_states=True
            ).hidden_states
            states = torch.stack(states, dim=2).to("cpu", STORAGE_DTYPE)  # (B, W, L + 1, 2P)
            for row, key in enumerate(keys):
                sentence = states[row, : lengths[row]].clone()
                if self.folder is not None and write:
                    pending[key] = sentence
                    pending_bytes += sentence.numel() * sentence.element_size()
                else:
                    self._memory[key] = sentence
            if pending_bytes >= SHARD_BYTES:
                self._write_shard(pending)
                pending, pending_bytes = {}, 0
        if pending:
            self._write_shard(pending)
        self.bilm.train(was_training)
        self.computed += len(order)
        return len(order)

    def _write_shard(self, states: dict[str, torch.Tensor]):
        """Write one shard atomically (`hf_ctx.data.atomic_write.atomic_write`) and read it back."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.blake2b("".join(sorted(states)).encode(), digest_size=16).hexdigest()
        path = self.folder / f"states-{name}.safetensors"
        try:
            with atomic_write(path, "wb") as f:
                f.write(serialize(states, metadata={"format": FORMAT, "fingerprint": self.fingerprint}))
        except OSError as error:
            full = " (the disk is full)" if error.errno == errno.ENOSPC else ""
            raise OSError(
                error.errno,
                f"could not write the biLM cache {path}{full}: {os.strerror(error.errno) if error.errno else error}; "
                "free space or pass --bilm_cache memory",
            ) from error
        self._open_shard(path)


class BiLMStatesCollator:
    """Wraps a data collator: each batch also gets `bilm_hidden_states` (B, W, L + 1, 2P) from the cache, zero at
    padding as the biLM gives them. A sentence the cache lacks is computed and kept in memory."""

    def __init__(self, collator, cache: BiLMStateCache):
        self.collator, self.cache = collator, cache

    def __call__(self, features: list[dict]) -> dict:
        keys = [sentence_key(f["input_ids"], f.get("attention_mask")) for f in features]
        missing = [f for f, (key, words) in zip(features, keys) if key not in self.cache and words > 0]
        if missing:
            self.cache.compute(missing, progress=False, write=False)
        batch = self.collator(features)
        padded_words = batch["input_ids"].shape[1]
        states = torch.zeros(len(features), padded_words, self.cache.layers, self.cache.width, dtype=STORAGE_DTYPE)
        for row, (key, words) in enumerate(keys):
            if words > 0:
                states[row, :words] = self.cache.get(key, words)
        batch["bilm_hidden_states"] = states
        return batch


def with_bilm_cache(model, tokenizer, collator, datasets: dict, args: BiLMCacheArguments, output_dir: str, device):
    """The examples' entry point: the collator, wrapped with a cache of the model's frozen biLM's states for the
    sentences of `datasets` (computed now, on `device`), or unchanged where there is nothing exact to cache."""
    frozen = model.frozen_bilm() if hasattr(model, "frozen_bilm") else None
    has_bilm = getattr(model, "bilm", None) is not None or hasattr(model, "elmo")
    if frozen is None:
        if args.bilm_cache not in (None, "none") and has_bilm:
            raise ValueError(
                f"--bilm_cache {args.bilm_cache} needs a frozen biLM, but this model trains its biLM "
                "(freeze_bilm=False), so its states change every step"
            )
        return collator  # nothing to cache: no biLM (BERT, TagLM without one) or a trained one
    mode = args.bilm_cache or "disk"
    if mode == "none":
        return collator
    directory = args.bilm_cache_dir or Path(output_dir).resolve().parent / "bilm_cache"
    cache = BiLMStateCache(frozen.to(device), tokenizer, mode, directory)
    found = len(cache)
    for name, dataset in datasets.items():
        if dataset is not None:
            logger.info(f"biLM states of the {name} sentences")
            if hasattr(dataset, "select_columns"):  # a `datasets.Dataset`: read only what the keys need
                dataset = dataset.select_columns(
                    [c for c in ("input_ids", "attention_mask") if c in dataset.column_names]
                )
            cache.compute(dataset)
    where = f" in {cache.folder}" if cache.folder else " in memory"
    logger.info(f"biLM cache{where}: {found} sentences found, {cache.computed} computed")
    return BiLMStatesCollator(collator, cache)


__all__ = [
    "BiLMCacheArguments",
    "BiLMStateCache",
    "BiLMStatesCollator",
    "CACHE_MODES",
    "CONFIG_FIELDS_NOT_IN_STATES",
    "STORAGE_DTYPE",
    "bilm_fingerprint",
    "sentence_key",
    "with_bilm_cache",
]
