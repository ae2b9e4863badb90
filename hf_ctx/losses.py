"""The losses hf_ctx's task heads share.

BERT's and ELMo's heads import them from here (single-dot relative imports, so this file travels with a
checkpoint's remote code). They compute in float32, so a head running in half precision gets a stable loss.
"""

import torch
from torch.nn import functional as F

from .input_checks import IGNORE_INDEX, check_label_range


class BatchMeanLossMixin:
    """Mixed into hf_ctx's `PreTrainedModel` classes, whose losses are means over each batch.

    Their `forward` takes `**kwargs` (options for the base model), so `Trainer` would take them for models that
    normalise the loss by its `num_items_in_batch` argument, and then skip dividing the loss by the
    gradient-accumulation steps. Saying they do not keeps accumulated steps an average, as one larger batch.
    """

    accepts_loss_kwargs = False


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
