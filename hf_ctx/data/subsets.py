"""The part of a dataset a run uses: its first N examples (`--max_*_samples`), a validation share held out from
the training data (`--validation_split_percentage`), a shuffled stream (`--streaming`).
"""

import math

import datasets
from transformers import TrainingArguments


def first_examples(dataset: datasets.Dataset | datasets.IterableDataset, n: int | None):
    """The first `n` examples of `dataset` (all of them when `n` is None or larger): `--max_*_samples`."""
    if n is None:
        return dataset
    if isinstance(dataset, datasets.IterableDataset):
        return dataset.take(n)
    return dataset.select(range(min(n, len(dataset))))


def shuffled_stream(dataset: datasets.IterableDataset, training_args: TrainingArguments, buffer_size: int = 10_000):
    """A streaming training set for `Trainer`: shuffled within a buffer of `buffer_size` examples, seeded by
    `--seed` (the Trainer reseeds it every epoch). A stream has no length, so `--max_steps` must say how long to
    train. On several processes `CtxTrainer.get_train_dataloader` gives each process its own share of it."""
    if training_args.max_steps is None or training_args.max_steps <= 0:
        raise ValueError("--streaming needs --max_steps: a streamed corpus has no length to count epochs in")
    return dataset.shuffle(seed=training_args.seed, buffer_size=buffer_size)


def hold_out_validation(
    train: datasets.Dataset, validation: datasets.Dataset | None, percentage: float, seed: int, hint: str = ""
) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(train, validation), where data without a validation split gets one: `percentage` % of `train`, drawn
    with `seed` (`--validation_split_percentage`; 0 leaves the data without one).

    Too few examples to hold some out and still train on some is a `ValueError`, with `hint` (what may be wrong
    with the data) added to the message.
    """
    if validation is None and percentage > 0:
        held_out = math.ceil(len(train) * percentage / 100)
        if len(train) - held_out < 1:
            raise ValueError(
                f"--validation_split_percentage {percentage:g} holds out {held_out} of the {len(train)} training "
                f"example(s), leaving none to train on; give --validation_file, or more training data{hint}"
            )
        split = train.train_test_split(test_size=percentage / 100, seed=seed)
        train, validation = split["train"], split["test"]
    return train, validation
