"""Sizes checked before anything is allocated or built: a model whose parameters cannot fit in memory is refused
by name, and so is a checkpoint whose config asks for more than its weights file holds.

A config with `vocab_size` 1e12 or `hidden_size` 1e9 passes every field check (positive integers), and building the
model would try to allocate terabytes, or overflow. [`ParameterMemoryMixin`], mixed into each family's
`PreTrainedModel` base class, first builds the model on PyTorch's "meta" device (shapes without storage: exact
counts, no memory), and refuses a model whose parameters alone need more than the memory available.

A config with `num_hidden_layers` 1e6 fits in memory by this count, and building it (even on the meta device) takes
minutes. A checkpoint's weights say how large its model is: each config declares, in `sizes_in_weights`, which of
its fields a tensor's name or shape shows (`check_sizes_against_weights`), and `from_pretrained` reads the
safetensors header (names and shapes, no tensor data) and refuses a config that asks for more, before anything is
built.

This module travels with the checkpoints of every model that imports it (remote code): it imports only the
standard library and `torch`.
"""

import copy
import json
import os
import re
import struct

import torch


def available_memory_bytes() -> int | None:
    """The memory a new allocation can use: Linux's MemAvailable, else the physical memory; None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _largest_sizes(config, count: int = 3) -> str:
    """ "vocab_size=1000000000000, hidden_size=768, ...": the config's largest integer fields, nested ones dotted."""
    found = []

    def walk(prefix, values):
        for key, value in values.items():
            if isinstance(value, dict):
                walk(f"{prefix}{key}.", value)
            elif isinstance(value, int) and not isinstance(value, bool):
                found.append((value, f"{prefix}{key}={value}"))

    walk("", config.to_diff_dict() if hasattr(config, "to_diff_dict") else vars(config))
    return ", ".join(text for _, text in sorted(found, reverse=True)[:count])


def check_parameter_memory(model_class: type, config, *args, limit_bytes: int | None = None, **kwargs) -> None:
    """A `ValueError` when `model_class(config)`'s parameters would need more than `limit_bytes` (default: the
    memory available now, see `available_memory_bytes`) in the default dtype, or cannot even be counted (sizes
    whose product overflows). Nothing is allocated: the model is built on the "meta" device. `args`, `kwargs`:
    the model's other constructor arguments. `config` itself is left as it is: the throwaway model is built from a
    copy, since building consumes legacy fields (`gradient_checkpointing=True`) that the real model must see."""
    dtype_bytes = torch.empty((), dtype=torch.get_default_dtype()).element_size()
    try:
        with torch.device("meta"):
            shadow = model_class(copy.deepcopy(config), *args, **kwargs)
        count = sum(parameter.numel() for parameter in shadow.parameters())
        count += sum(buffer.numel() for buffer in shadow.buffers())
    except (RuntimeError, OverflowError, MemoryError) as error:
        raise ValueError(
            f"{model_class.__name__}: the config's sizes are too large to build a model at all ({error}); check "
            f"{_largest_sizes(config)}"
        ) from None
    needed = count * dtype_bytes
    limit = available_memory_bytes() if limit_bytes is None else limit_bytes
    if limit is not None and needed > limit:
        raise ValueError(
            f"{model_class.__name__} with this config has {count:,} parameters, {needed / 2**30:,.1f} GiB in "
            f"{str(torch.get_default_dtype()).removeprefix('torch.')}, more than the {limit / 2**30:,.1f} GiB of "
            f"memory available; check {_largest_sizes(config)}"
        )


# The most of a safetensors header read (the JSON of names, shapes and offsets): a checkpoint of 10^6 tensors
# has about 100 MB; a longer one is damaged, and the loading that follows says so.
_MAX_HEADER_BYTES = 1 << 28


def safetensors_shapes(folder) -> tuple[str, dict[str, list[int]]] | None:
    """(the weights file's name with its verb, for a message: "model.safetensors holds"; tensor name -> shape)
    of the local checkpoint `folder`, read from the headers
    of its safetensors files (`model.safetensors`, or the shards `model.safetensors.index.json` lists) without
    reading a tensor; None when it has none, or one cannot be read (the loading says why)."""
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isdir(folder):
        return None
    single, index = os.path.join(folder, "model.safetensors"), os.path.join(folder, "model.safetensors.index.json")
    try:
        if os.path.isfile(single):
            name, files = "model.safetensors holds", [single]
        elif os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
            name, files = "the shards of model.safetensors.index.json hold", [os.path.join(folder, s) for s in shards]
        else:
            return None
        shapes = {}
        for path in files:
            with open(path, "rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                if length > _MAX_HEADER_BYTES:
                    return None
                header = json.loads(f.read(length))
            shapes.update({key: entry["shape"] for key, entry in header.items() if key != "__metadata__"})
        return name, shapes
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def _config_value(config, field: str):
    """The value of `field` in `config` ("char_cnn.n_highway": a key of a dict field); a list counts its items."""
    value = config
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return len(value) if isinstance(value, (list, tuple)) else value


def size_in_weights(shapes: dict[str, list[int]], pattern: str, axis: int | None) -> tuple[int, str] | None:
    """(what the tensors `shapes` hold of one size, where it shows), or None when no tensor's name matches
    `pattern`. With `axis` None, the number of modules the pattern's group indexes (`encoder\\.layer\\.(\\d+)`:
    the largest N of `encoder.layer.N` plus one); else the size along `axis` of the first matching tensor."""
    regex = re.compile(pattern)
    if axis is None:
        found = [
            (int(match.group(1)), name[: match.start(1)])
            for name, match in zip(shapes, map(regex.search, shapes))
            if match
        ]
        if not found:
            return None
        last, prefix = max(found)
        return last + 1, f"{prefix}0 to {prefix}{last}"
    name = next((name for name in shapes if regex.search(name)), None)
    if name is None or len(shapes[name]) <= axis:
        return None
    return shapes[name][axis], f"{name} has shape {list(shapes[name])}"


def check_sizes_against_weights(config, folder) -> None:
    """A `ValueError` when a size of `config` (a field of its class's `sizes_in_weights`: field -> (tensor
    name pattern, axis), see `size_in_weights`) is larger than what the safetensors weights of the local folder
    `folder` hold: such a model would be built (minutes for 10^6 layers) and then fail to load, or be filled with
    random weights. Only the weights' header is read. The message names the folder's config.json where the value
    is the one it holds, else the config passed."""
    declared = getattr(type(config), "sizes_in_weights", None)
    found = safetensors_shapes(folder) if declared else None
    if found is None:
        return
    weights_file, shapes = found
    for field, (pattern, axis) in declared.items():
        value, held = _config_value(config, field), size_in_weights(shapes, pattern, axis)
        if not isinstance(value, int) or isinstance(value, bool) or held is None or value <= held[0]:
            continue
        config_file = os.path.join(os.fspath(folder), "config.json")
        try:
            with open(config_file, encoding="utf-8") as f:
                in_file = _config_value(json.load(f), field)
        except (OSError, ValueError):
            in_file = None
        source = config_file if in_file == value else "the config passed to from_pretrained"
        raise ValueError(
            f"cannot load {os.fspath(folder)}: {source} has {field}={value}, but {weights_file} {held[0]} "
            f"({held[1]}); config.json and the weights come from different models, or config.json was edited"
        )


class ParameterMemoryMixin:
    """Mix into a model family's `PreTrainedModel` base class (after `AutoMapMixin`, which validates the config)
    to run `check_parameter_memory` before the model allocates anything. Skipped when the model is being built
    on the meta device (by this check, or by transformers' `from_pretrained`, whose weights file bounds the size:
    `from_pretrained` checks the config against it first).
    """

    def __init__(self, config, *args, **kwargs):
        if torch.get_default_device().type != "meta":
            check_parameter_memory(type(self), config, *args, **kwargs)
        super().__init__(config, *args, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' `from_pretrained`, after `check_sizes_against_weights` on the config the model would be
        built from (the caller's `config=`, else the folder's config.json) against a local folder's weights."""
        config = kwargs.get("config", args[0] if args else None)
        if not hasattr(config, "to_dict") and isinstance(pretrained_model_name_or_path, (str, os.PathLike)):
            config = None
            if os.path.isfile(os.path.join(pretrained_model_name_or_path, "config.json")):
                try:
                    config = cls.config_class.from_pretrained(pretrained_model_name_or_path)
                except Exception:  # a config.json that does not load: transformers' loading below says why
                    config = None
        if config is not None:
            check_sizes_against_weights(config, pretrained_model_name_or_path)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
