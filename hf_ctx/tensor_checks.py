"""What every layer-0 module checks its tensors against: the label index that gets no loss, whether a forward
pass may read tensor values back to the host for its input checks (or trace value-dependent shapes), and the
check of label ids.

Configs, models, layers, the CRF and ELMo's tokenizer import them from here (single-dot relative imports, so
this file travels with a checkpoint's remote code).
"""

import torch

# Label of a position that gets no loss and no metric (padding, special tokens, a word's later sub-tokens).
# PyTorch's cross-entropy, transformers' data collators and `Trainer` use the same value.
IGNORE_INDEX = -100


def host_syncs_allowed(tensor: torch.Tensor) -> bool:
    """Whether a forward pass may read values of `tensor` back to the host (the input checks that cost one host
    sync, BERT's unpadding). Not while `torch.compile` traces (data-dependent control flow breaks the graph), and
    not on an XLA device (TPU): there each read runs the lazily built graph and waits for it, every step, and a
    data-dependent shape compiles a new graph."""
    return not torch.compiler.is_compiling() and tensor.device.type != "xla"


def traces_dynamic_output_shapes() -> bool:
    """Whether `torch.compile` is tracing with torch's `capture_dynamic_output_shape_ops` (set by the environment
    variable `TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS=1` or `torch._dynamo.config`): an op whose output shape
    depends on tensor values (`nonzero`) is then traced with a symbolic size instead of breaking the graph, so
    BERT's unpadding can run inside one compiled graph."""
    return torch.compiler.is_compiling() and bool(torch._dynamo.config.capture_dynamic_output_shape_ops)


def check_label_range(labels: torch.Tensor, num_classes: int) -> None:
    """A `ValueError` unless every label is a class id in [0, num_classes) or `IGNORE_INDEX`.

    An out-of-range id would otherwise be an opaque index error on CPU or a device-side assert on CUDA. The
    check costs one host sync and is skipped where `host_syncs_allowed` says no (under `torch.compile`, on XLA).
    """
    if not host_syncs_allowed(labels) or labels.numel() == 0:
        return
    used = labels.masked_fill(labels == IGNORE_INDEX, 0)  # 0 is a class id: ignored labels pass
    low, high = torch.stack([used.min(), used.max()]).tolist()
    if low < 0 or high >= num_classes:
        raise label_range_error(low if low < 0 else high, num_classes)


def label_range_error(label: int, num_classes: int) -> ValueError:
    """The error of a label outside [0, num_classes) (`check_label_range`'s, and TagLM's one-read label check)."""
    return ValueError(
        f"label {label} is outside [0, num_labels={num_classes}); a label is a class id, or {IGNORE_INDEX} for no loss"
    )
