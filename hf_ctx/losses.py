"""The losses hf_ctx's task heads share.

BERT's and ELMo's heads import them from here (single-dot relative imports, so this file travels with a
checkpoint's remote code). They compute in float32, so a head running in half precision gets a stable loss.
"""

import torch
from torch.nn import functional as F

from .input_checks import IGNORE_INDEX, check_integer_labels, check_label_range, check_target_values, check_tensors


class AccumulatedBatchLossMixin:
    """Mixed into hf_ctx's `PreTrainedModel` classes: their losses are means over the whole accumulated batch.

    Under gradient accumulation (and across processes), `Trainer` passes `forward` the count of an optimizer
    step's items as `num_items_in_batch`, and the heads divide their loss sums by it, so 2 micro-batches of 4
    examples give the loss and gradient of one batch of 8. What is counted:

    - transformers' `Trainer` counts only the `labels` that are not `IGNORE_INDEX` (in every micro-batch, and on
      every process with `average_tokens_across_devices`): exact for the losses that are means over those labels
      (tokens, classes, choices); a mean over something else (a CRF's sentences, next-sentence prediction's pairs)
      is weighted by its micro-batch's share of the labels, which is exact only when every micro-batch holds as
      many labels per sentence (docs/reliability.md gives the difference measured);
    - `CtxTrainer` passes a dict, the count of each loss term's items (`loss_items`: "labels", "sentences",
      "next_sentence_label", "start_positions", "end_positions", "predictions"), so every head's loss is exact.

    Without `num_items_in_batch` (a plain forward, or a batch that `Trainer` finds no `labels` in) the losses are
    means over the batch given, and `Trainer` divides them by the accumulation steps.
    """

    accepts_loss_kwargs = True

    def loss_items(self, inputs: dict) -> dict[str, torch.Tensor]:
        """The items each term of this batch's loss is a mean over, by term: the `labels` that are not
        `IGNORE_INDEX` (what `Trainer` counts) and the sentences (rows) that carry them. Heads with other terms
        add theirs."""
        labels = inputs.get("labels")
        if not torch.is_tensor(labels):
            return {}
        return {"labels": labels.ne(IGNORE_INDEX).sum(), "sentences": torch.tensor(labels.shape[0])}


def accumulated_count(num_items_in_batch, term: str = "labels"):
    """The accumulated batch's count of a loss term's items, from `num_items_in_batch` as `CtxTrainer` (a dict by
    term) or `Trainer` (the count of `labels`) passes it; None where it is not given or not known."""
    if isinstance(num_items_in_batch, dict):
        return num_items_in_batch[term]
    return num_items_in_batch if term == "labels" else None


def classification_loss(
    logits: torch.Tensor, labels: torch.Tensor, num_classes: int, num_items_in_batch=None, name: str = "labels"
) -> torch.Tensor:
    """Mean cross-entropy over the labels that are not `IGNORE_INDEX`; 0 when every label is ignored.

    Args:
        logits: (..., num_classes) unnormalised scores.
        labels: (...) class ids, one per row of `logits`, or `IGNORE_INDEX`.
        num_items_in_batch: the count of such labels in the whole accumulated batch (`Trainer` passes it; see
            `AccumulatedBatchLossMixin`): the sum is divided by it instead of by this batch's count.
        name: the argument `labels` came from, for the errors ("start_positions").
    """
    check_class_labels(logits, labels, name)
    count = accumulated_count(num_items_in_batch)
    labels = labels.reshape(-1).long()  # any integer dtype: cross_entropy takes int64 class ids
    check_label_range(labels, num_classes)
    total = F.cross_entropy(
        logits.reshape(-1, num_classes).float(), labels, ignore_index=IGNORE_INDEX, reduction="sum"
    )
    if count is not None:
        return total / count
    # Dividing by the count ourselves (not reduction="mean") gives 0, not NaN, for a batch without labels.
    return total / (labels != IGNORE_INDEX).sum().clamp(min=1)


def check_class_labels(logits: torch.Tensor, labels: torch.Tensor, name: str = "labels") -> None:
    """A `ValueError` unless `labels` are integer class ids, one per row of `logits` (...): a float label or one
    of another shape would fail inside `cross_entropy` without naming the argument (`name`)."""
    check_integer_labels(labels, name)
    # The shape itself, not the count: labels of another shape with as many ids would be reshaped onto the
    # wrong rows (a trailing dimension of 1, as some collators give a sentence's label, is the same rows).
    if tuple(labels.shape) not in (tuple(logits.shape[:-1]), (*logits.shape[:-1], 1)):
        raise ValueError(
            f"{name} has shape {tuple(labels.shape)}, expected {tuple(logits.shape[:-1])}: one class id per "
            f"{'token' if logits.dim() == 3 else 'example'}, or {IGNORE_INDEX} for none"
        )


def accumulated_mean(
    mean: torch.Tensor, items, term: str, num_items_in_batch=None, labels: torch.Tensor | None = None
) -> torch.Tensor:
    """A loss term that is a mean over this micro-batch's `items` (a count: its sentences, say) as its part of the
    accumulated batch's mean over the `term`'s items: `mean * items / count`, so the parts of an optimizer step add
    up to the big batch's mean; `mean` itself without `num_items_in_batch`. Where `num_items_in_batch` counts only
    the `labels` (transformers' `Trainer`), the micro-batch's share of those (an approximation; see
    `AccumulatedBatchLossMixin`)."""
    if num_items_in_batch is None:
        return mean
    count = accumulated_count(num_items_in_batch, term)
    if count is not None:
        return mean * items / count
    return mean * labels.ne(IGNORE_INDEX).sum() / num_items_in_batch


def _element_mean(per_element: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
    """The mean of a loss given per label value: over this batch, or over the `num_items_in_batch` values of the
    accumulated batch (`Trainer` counts every value of float or multi-hot labels)."""
    count = accumulated_count(num_items_in_batch)
    return per_element.mean() if count is None else per_element.sum() / count


def infer_problem_type(num_labels: int, labels: torch.Tensor) -> str:
    """The problem type of a sequence classifier without one, from its labels, as transformers infers it:
    regression when `num_labels == 1`, single-label classification for integer class ids, multi-label for float
    targets. Integer labels of any dtype are class ids (transformers names int64 and int32 only, and reads int16,
    int8 or uint8 ids as multi-label targets, then fails on their shape); boolean labels, neither class ids nor
    float targets, are refused rather than guessed."""
    if num_labels == 1:
        return "regression"
    if labels.dtype == torch.bool:
        raise ValueError(
            "labels of dtype torch.bool are neither class ids nor multi-label targets: pass labels.long() (one "
            "class id per sentence) or labels.float() (multi-hot, num_labels per sentence), or set "
            "config.problem_type"
        )
    if labels.dtype.is_floating_point or labels.dtype.is_complex:
        return "multi_label_classification"
    return "single_label_classification"


def sequence_classification_loss(
    config, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch=None
) -> torch.Tensor:
    """The loss of a sequence-classification head, chosen by `config.problem_type` as in transformers.

    - "regression": mean squared error. `labels` are (B,) floats with one output (`num_labels == 1`), or
      (B, num_labels) floats for several outputs; NaN or infinite targets are refused.
    - "single_label_classification": cross-entropy. `labels` are (B,) class ids of any integer dtype;
      `IGNORE_INDEX` (-100) gives a sentence no loss.
    - "multi_label_classification": binary cross-entropy per label. `labels` are (B, num_labels) targets in
      [0, 1] (floats, or booleans); others are refused.

    An unset `problem_type` is inferred from the labels (`infer_problem_type`) and stored in the config, as
    transformers does, once a loss has been computed: labels refused by a check leave it unset.

    Args:
        config: the model config (`num_labels`, `problem_type`).
        logits: (B, num_labels) scores.
        labels: as described above.
        num_items_in_batch: the labels' count in the whole accumulated batch (see `AccumulatedBatchLossMixin`).
    """
    check_tensors(labels=labels)  # whatever the problem type: a list would fail on .numel()
    problem_type = config.problem_type or infer_problem_type(config.num_labels, labels)
    loss = _sequence_classification_loss(problem_type, config.num_labels, logits, labels, num_items_in_batch)
    if config.problem_type is None:
        config.problem_type = problem_type
    return loss


def _sequence_classification_loss(problem_type, num_labels, logits, labels, num_items_in_batch):
    batch = logits.shape[0]
    if problem_type == "regression":
        if num_labels == 1:
            if labels.numel() != batch:
                raise ValueError(
                    f"regression labels must have shape ({batch},) (one value per sentence), got {tuple(labels.shape)}"
                )
            check_target_values(labels, problem_type)
            squared = F.mse_loss(logits.reshape(-1).float(), labels.reshape(-1).float(), reduction="none")
            return _element_mean(squared, num_items_in_batch)
        if tuple(labels.shape) != (batch, num_labels):
            raise ValueError(
                f"regression labels must have shape ({batch}, num_labels={num_labels}), got {tuple(labels.shape)}"
            )
        check_target_values(labels, problem_type)
        return _element_mean(F.mse_loss(logits.float(), labels.float(), reduction="none"), num_items_in_batch)
    if problem_type == "single_label_classification":
        if labels.numel() != batch:
            raise ValueError(
                f"single-label classification labels must have shape ({batch},) (one class id per "
                f"sentence), got {tuple(labels.shape)}; multi-hot labels (batch, num_labels) are floats "
                "(labels.float()) or problem_type='multi_label_classification'"
            )
        return classification_loss(logits, labels, num_labels, num_items_in_batch)
    if problem_type == "multi_label_classification":
        if tuple(labels.shape) != (batch, num_labels):
            raise ValueError(
                f"multi-label classification labels must have shape ({batch}, num_labels="
                f"{num_labels}), got {tuple(labels.shape)}"
            )
        check_target_values(labels, problem_type)
        binary = F.binary_cross_entropy_with_logits(logits.float(), labels.float(), reduction="none")
        return _element_mean(binary, num_items_in_batch)
    raise ValueError(
        f"problem_type must be 'regression', 'single_label_classification' or "
        f"'multi_label_classification', got {problem_type!r}"
    )
