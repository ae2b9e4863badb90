"""Sizes checked before anything is allocated: a model whose parameters cannot fit in memory is refused by name.

A config with `vocab_size` 1e12 or `hidden_size` 1e9 passes every field check (positive integers), and building the
model would try to allocate terabytes, or overflow. [`ParameterMemoryMixin`], mixed into each family's
`PreTrainedModel` base class, first builds the model on PyTorch's "meta" device (shapes without storage: exact
counts, no memory), and refuses a model whose parameters alone need more than the memory available.

This module travels with the checkpoints of every model that imports it (remote code): it imports only the
standard library and `torch`.
"""

import copy
import os

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


class ParameterMemoryMixin:
    """Mix into a model family's `PreTrainedModel` base class (after `AutoMapMixin`, which validates the config)
    to run `check_parameter_memory` before the model allocates anything. Skipped when the model is being built
    on the meta device (by this check, or by transformers' `from_pretrained`, whose weights file bounds the size).
    """

    def __init__(self, config, *args, **kwargs):
        if torch.get_default_device().type != "meta":
            check_parameter_memory(type(self), config, *args, **kwargs)
        super().__init__(config, *args, **kwargs)
