"""The losses hf_ctx's task heads share, and the label index they all ignore.

BERT's and ELMo's heads import them from here (single-dot relative imports, so this file travels with a
checkpoint's remote code). They compute in float32, so a head running in half precision gets a stable loss.
"""

import torch
from torch.nn import functional as F

# Label of a position that gets no loss and no metric (padding, special tokens, a word's later sub-tokens).
# PyTorch's cross-entropy, transformers' data collators and `Trainer` use the same value.
IGNORE_INDEX = -100


class BatchMeanLossMixin:
    """Mixed into hf_ctx's `PreTrainedModel` classes, whose losses are means over each batch.

    Their `forward` takes `**kwargs` (options for the base model), so `Trainer` would take them for models that
    normalise the loss by its `num_items_in_batch` argument, and then skip dividing the loss by the
    gradient-accumulation steps. Saying they do not keeps accumulated steps an average, as one larger batch.
    """

    accepts_loss_kwargs = False


def host_syncs_allowed(tensor: torch.Tensor) -> bool:
    """Whether a forward pass may read values of `tensor` back to the host (the input checks that cost one host
    sync, BERT's unpadding). Not while `torch.compile` traces (data-dependent control flow breaks the graph), and
    not on an XLA device (TPU): there each read runs the lazily built graph and waits for it, every step, and a
    data-dependent shape compiles a new graph."""
    return not torch.compiler.is_compiling() and tensor.device.type != "xla"


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


def classification_loss(logits: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Mean cross-entropy over the labels that are not `IGNORE_INDEX`; 0 when every label is ignored.

    Args:
        logits: (..., num_classes) unnormalised scores.
        labels: (...) class ids, one per row of `logits`, or `IGNORE_INDEX`.
    """
    labels = labels.reshape(-1)
    check_label_range(labels, num_classes)
    total = F.cross_entropy(
        logits.reshape(-1, num_classes).float(), labels, ignore_index=IGNORE_INDEX, reduction="sum"
    )
    # Dividing by the count ourselves (not reduction="mean") gives 0, not NaN, for a batch without labels.
    return total / (labels != IGNORE_INDEX).sum().clamp(min=1)


def sequence_classification_loss(config, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of a sequence-classification head, chosen by `config.problem_type` as in transformers.

    - "regression": mean squared error. `labels` are (B,) floats with one output (`num_labels == 1`), or
      (B, num_labels) floats for several outputs.
    - "single_label_classification": cross-entropy. `labels` are (B,) class ids; `IGNORE_INDEX` (-100) gives
      a sentence no loss.
    - "multi_label_classification": binary cross-entropy per label. `labels` are (B, num_labels) 0/1 values.

    An unset `problem_type` is inferred from the labels once and stored in the config, as transformers does:
    regression when `num_labels == 1`, single-label for integer labels, multi-label otherwise.

    Args:
        config: the model config (`num_labels`, `problem_type`).
        logits: (B, num_labels) scores.
        labels: as described above.
    """
    num_labels = config.num_labels
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    batch = logits.shape[0]
    if config.problem_type == "regression":
        if num_labels == 1:
            if labels.numel() != batch:
                raise ValueError(
                    f"regression labels must have shape ({batch},) (one value per sentence), got {tuple(labels.shape)}"
                )
            return F.mse_loss(logits.reshape(-1).float(), labels.reshape(-1).float())
        if tuple(labels.shape) != (batch, num_labels):
            raise ValueError(
                f"regression labels must have shape ({batch}, num_labels={num_labels}), got {tuple(labels.shape)}"
            )
        return F.mse_loss(logits.float(), labels.float())
    if config.problem_type == "single_label_classification":
        if labels.numel() != batch:
            raise ValueError(
                f"single-label classification labels must have shape ({batch},) (one class id per "
                f"sentence), got {tuple(labels.shape)}"
            )
        return classification_loss(logits, labels, num_labels)
    if config.problem_type == "multi_label_classification":
        if tuple(labels.shape) != (batch, num_labels):
            raise ValueError(
                f"multi-label classification labels must have shape ({batch}, num_labels="
                f"{num_labels}), got {tuple(labels.shape)}"
            )
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    raise ValueError(
        f"problem_type must be 'regression', 'single_label_classification' or "
        f"'multi_label_classification', got {config.problem_type!r}"
    )
