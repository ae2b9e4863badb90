"""BERT's masked-LM inputs, drawn afresh for every batch by a data collator (dynamic masking, as in RoBERTa).

Of the maskable tokens (everything but special tokens and padding), `mlm_probability` (15%) are chosen; a chosen
token becomes [MASK] 80% of the time, a random token 10% of the time, and stays unchanged 10% of the time; the
labels hold its original id, and -100 everywhere else. With whole-word masking, whole words are chosen: a word
is a token and the WordPiece continuation pieces (`##...`) that follow it.

Why not transformers' `DataCollatorForLanguageModeling`: its whole-word masking needs character offsets (which
examples packed from several lines do not have) and turns the 80/10/10 replacement off; its random replacements
may be [PAD], [CLS], [SEP] or [MASK]; and its masks come from one random stream, so a run resumed from a
checkpoint, or split over several processes, does not see the masks the original run saw. Here, with a `seed`,
each example's mask is drawn from its own generator seeded by (seed, epoch, the example's tokens): masks change
every epoch, and are the same whatever the batch, padding, process count, or resumption point.
"""

import hashlib
from dataclasses import dataclass

import numpy as np
import torch
from datasets import Dataset
from torch.nn import functional as F
from transformers import PreTrainedTokenizerBase, TrainerCallback

from ..input_checks import IGNORE_INDEX
from .text import map_fingerprint


@dataclass
class DataCollatorForPretraining:
    """Pads a list of examples (`input_ids`, optional `token_type_ids`, `next_sentence_label`, ...) into a batch and
    masks it for masked-LM training.

    Args:
        tokenizer: gives the special tokens, [MASK], padding and the vocabulary size.
        mlm_probability: share of maskable tokens chosen for prediction.
        mask_replace_prob: share of chosen tokens replaced by [MASK].
        random_replace_prob: share of chosen tokens replaced by a random non-special token; the rest stay unchanged.
        whole_word_mask: choose whole words (a token plus its following `##` pieces) rather than single tokens; the
            replacement is still decided token by token, as in BERT's whole-word-masking models.
        pad_to_multiple_of: pad the length to a multiple of this (8 helps tensor cores).
        seed: make masks a function of (seed, epoch, example tokens) (see the module docstring); `None` draws from
            torch's global generator. Call `set_epoch` (or add `MaskingEpochCallback` to the Trainer) each epoch.

    Returns (from `__call__`): the padded batch as tensors, with masked `input_ids` (B, T), `attention_mask` (B, T),
    `labels` (B, T) and every other key of the examples. Examples that already carry `labels` (see
    `add_fixed_masks`) are padded, not masked again.
    """

    tokenizer: PreTrainedTokenizerBase
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    whole_word_mask: bool = False
    pad_to_multiple_of: int | None = None
    seed: int | None = None

    def __post_init__(self):
        for name in ("mlm_probability", "mask_replace_prob", "random_replace_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.mlm_probability == 0:
            raise ValueError(
                "mlm_probability must be above 0: with 0 no token is predicted and the loss means nothing"
            )
        if self.mask_replace_prob + self.random_replace_prob > 1.0:
            raise ValueError(
                f"mask_replace_prob + random_replace_prob must not exceed 1, got "
                f"{self.mask_replace_prob} + {self.random_replace_prob}"
            )
        if self.tokenizer.mask_token_id is None or self.tokenizer.pad_token_id is None:
            raise ValueError("masked-LM batches need a tokenizer with a mask token and a pad token")
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed}")
        self.vocab_size = len(self.tokenizer)
        self.epoch = 0
        self._is_special = torch.zeros(self.vocab_size, dtype=torch.bool)
        self._is_special[self.tokenizer.all_special_ids] = True
        self._replacement_ids = torch.nonzero(~self._is_special).squeeze(1)
        self._continues_word = torch.zeros(self.vocab_size, dtype=torch.bool)
        for token, token_id in self.tokenizer.get_vocab().items():
            if token.startswith("##") and token_id < self.vocab_size:
                self._continues_word[token_id] = True

    def set_epoch(self, epoch: int):
        """Masks of a seeded collator change with the epoch."""
        self.epoch = int(epoch)

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        features = [dict(feature) for feature in features]  # never modify the dataset's rows
        with_labels = ["labels" in feature for feature in features]
        if any(with_labels) and not all(with_labels):
            raise ValueError("either every example or none carries `labels` (pre-masked examples)")
        fixed_labels = [feature.pop("labels") for feature in features] if all(with_labels) else None
        batch = self.tokenizer.pad(features, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        special_tokens_mask = batch.pop("special_tokens_mask", None)
        if fixed_labels is None:
            batch["input_ids"], batch["labels"] = self.mask_tokens(
                batch["input_ids"], batch["attention_mask"], special_tokens_mask
            )
        else:
            batch["labels"] = self._pad_labels(fixed_labels, batch["input_ids"].shape[1])
        return batch

    def _pad_labels(self, labels, length):
        padded = torch.full((len(labels), length), IGNORE_INDEX, dtype=torch.long)
        for row, row_labels in enumerate(labels):
            if self.tokenizer.padding_side == "left":
                padded[row, length - len(row_labels) :] = torch.as_tensor(row_labels)
            else:
                padded[row, : len(row_labels)] = torch.as_tensor(row_labels)
        return padded

    def mask_tokens(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        special_tokens_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mask a padded batch.

        Args:
            input_ids: (B, T) token ids.
            attention_mask: (B, T), 1 for real tokens; defaults to `input_ids != pad_token_id`.
            special_tokens_mask: (B, T), 1 for further tokens never to mask (the tokenizer's special tokens and
                padding never are).

        Returns:
            `(masked_input_ids, labels)`, both (B, T); labels are the original ids at chosen positions, -100 elsewhere.
        """
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= self.vocab_size):
            bad = int(input_ids.min()) if int(input_ids.min()) < 0 else int(input_ids.max())
            raise ValueError(f"input_ids contains {bad}, outside the tokenizer's vocabulary [0, {self.vocab_size})")
        if attention_mask is None:
            attention_mask = input_ids != self.tokenizer.pad_token_id
        real = attention_mask.bool()
        maskable = real & ~self._is_special[input_ids]
        if special_tokens_mask is not None:
            maskable &= ~special_tokens_mask.bool()
        draws = self._uniform_draws(input_ids, real)  # (B, T, 3): choose, replace how, which random token
        chosen = draws[..., 0] < self.mlm_probability
        if self.whole_word_mask:
            chosen = self._whole_words(input_ids, maskable, chosen)
        chosen &= maskable

        to_mask = chosen & (draws[..., 1] < self.mask_replace_prob)
        to_random = chosen & ~to_mask & (draws[..., 1] < self.mask_replace_prob + self.random_replace_prob)
        random_index = (draws[..., 2] * len(self._replacement_ids)).long().clamp_(max=len(self._replacement_ids) - 1)
        masked = input_ids.clone()
        masked[to_mask] = self.tokenizer.mask_token_id
        masked[to_random] = self._replacement_ids[random_index[to_random]]
        labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
        return masked, labels

    def _uniform_draws(self, input_ids, real):
        """(B, T, 3) uniform numbers: from the global generator, or per example from (seed, epoch, its tokens)."""
        if self.seed is None:
            return torch.rand(*input_ids.shape, 3)
        draws = torch.zeros(*input_ids.shape, 3, dtype=torch.float64)
        for row in range(input_ids.shape[0]):
            tokens = input_ids[row][real[row]].numpy().astype(np.int64)
            content = int.from_bytes(hashlib.blake2b(tokens.tobytes(), digest_size=8).digest(), "little")
            rng = np.random.default_rng([self.seed, self.epoch, content])
            draws[row, real[row]] = torch.from_numpy(rng.random((len(tokens), 3)))
        return draws

    def _whole_words(self, input_ids, maskable, chosen):
        """Spread the choice made at each word's first token over the whole word. (B, T) bools in and out."""
        previous_maskable = F.pad(maskable[:, :-1], (1, 0), value=False)
        # A word starts at a maskable token unless it is a ## piece right after another maskable token (a ## piece
        # after [CLS]/[SEP] starts a segment cut inside a word, and is a word of its own there).
        word_start = maskable & ~(self._continues_word[input_ids] & previous_maskable)
        word_index = torch.cumsum(word_start.long(), dim=1)  # (B, T): 1 + index of the word the token is in
        chosen_words = torch.zeros(input_ids.shape[0], input_ids.shape[1] + 1, dtype=torch.bool)
        rows, columns = torch.nonzero(chosen & word_start, as_tuple=True)
        chosen_words[rows, word_index[rows, columns]] = True
        return chosen_words.gather(1, word_index) & maskable


class MaskingEpochCallback(TrainerCallback):
    """Tells a seeded `DataCollatorForPretraining` which epoch starts, so that masks change every epoch while a
    resumed run (the Trainer restores `state.epoch`) masks every batch as the interrupted run did."""

    def __init__(self, collator: DataCollatorForPretraining):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is exactly the epoch number at an epoch's start, and inside it when resuming mid-epoch.
        self.collator.set_epoch(int(state.epoch or 0))


def _fixed_masks_batch(batch, collator):
    padded = collator.tokenizer.pad({"input_ids": batch["input_ids"]}, return_tensors="pt")
    masked, labels = collator.mask_tokens(padded["input_ids"], padded["attention_mask"])
    real = padded["attention_mask"].bool()
    return {
        "input_ids": [row[keep].tolist() for row, keep in zip(masked, real)],
        "labels": [row[keep].tolist() for row, keep in zip(labels, real)],
    }


def add_fixed_masks(dataset: Dataset, collator: DataCollatorForPretraining, num_proc: int | None = None) -> Dataset:
    """Mask every example once and store the masked `input_ids` and their `labels`, so that each evaluation scores
    the same positions (the collator pads such examples without masking them again)."""
    fn_kwargs = {"collator": collator}
    return dataset.map(
        _fixed_masks_batch,
        batched=True,
        num_proc=num_proc,
        fn_kwargs=fn_kwargs,
        desc="Masking",
        new_fingerprint=map_fingerprint(dataset, _fixed_masks_batch, fn_kwargs),  # found again by a second run
    )
