"""The masked-LM collator: BERT's proportions on ~100k tokens, what is never masked, whole words, seeded masks."""

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import torch
from datasets import Dataset
from transformers import BertTokenizer, TrainerControl, TrainerState, TrainingArguments

from hf_ctx.data.masking import DataCollatorForPretraining, MaskingEpochCallback, add_fixed_masks

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORD_STEMS = ["play", "walk", "jump", "talk", "read", "un", "re", "kind", "help", "paint"]
SUFFIXES = ["##ing", "##ed", "##er", "##s", "##ful", "##ness"]


def make_tokenizer(words):
    return BertTokenizer(vocab={token: i for i, token in enumerate(SPECIALS + words)})


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer([f"w{i}" for i in range(995)])  # 1000 ids, ids 5.. are ordinary words


@pytest.fixture(scope="module")
def subword_tokenizer():
    return make_tokenizer(WORD_STEMS + SUFFIXES)


def random_pairs(tokenizer, num_examples, rng, min_length=40, max_length=128):
    """[CLS] A [SEP] B [SEP] examples of ordinary-word ids, with next-sentence labels."""
    low = len(SPECIALS)
    examples = []
    for _ in range(num_examples):
        length = int(rng.integers(min_length, max_length - 2))
        split = int(rng.integers(1, length))
        ids = rng.integers(low, len(tokenizer), size=length).tolist()
        input_ids = [
            tokenizer.cls_token_id,
            *ids[:split],
            tokenizer.sep_token_id,
            *ids[split:],
            tokenizer.sep_token_id,
        ]
        examples.append(
            {
                "input_ids": input_ids,
                "token_type_ids": [0] * (split + 2) + [1] * (length - split + 1),
                "next_sentence_label": int(rng.integers(2)),
            }
        )
    return examples


def collate_all(collator, examples, batch_size=32):
    return [
        (examples[i : i + batch_size], collator(examples[i : i + batch_size]))
        for i in range(0, len(examples), batch_size)
    ]


@pytest.mark.parametrize("seed", [None, 1234])
def test_bert_proportions_on_100k_tokens(tokenizer, seed):
    examples = random_pairs(tokenizer, 1000, np.random.default_rng(0), min_length=80)
    collator = DataCollatorForPretraining(tokenizer, seed=seed)
    special = torch.tensor(tokenizer.all_special_ids)
    maskable = chosen = to_mask = unchanged = replaced = 0
    for features, batch in collate_all(collator, examples):
        original = tokenizer.pad([{"input_ids": f["input_ids"]} for f in features], return_tensors="pt")["input_ids"]
        inputs, labels = batch["input_ids"], batch["labels"]
        is_chosen = labels != -100
        can_mask = batch["attention_mask"].bool() & ~torch.isin(original, special)
        # Never special tokens or padding; labels are the original ids where chosen and -100 elsewhere.
        assert not (is_chosen & ~can_mask).any()
        assert torch.equal(labels[is_chosen], original[is_chosen])
        assert torch.equal(inputs[~is_chosen], original[~is_chosen])
        is_random = is_chosen & (inputs != tokenizer.mask_token_id) & (inputs != original)
        assert not torch.isin(inputs[is_random], special).any(), "a random replacement was a special token"
        maskable += int(can_mask.sum())
        chosen += int(is_chosen.sum())
        to_mask += int((inputs[is_chosen] == tokenizer.mask_token_id).sum())
        unchanged += int((inputs[is_chosen] == original[is_chosen]).sum())
        replaced += int(is_random.sum())
    assert maskable > 100_000
    # Tolerances are about 4.5 standard deviations of each share at these counts.
    assert abs(chosen / maskable - 0.15) < 0.005
    assert abs(to_mask / chosen - 0.8) < 0.015
    assert abs(replaced / chosen - 0.1) < 0.011
    assert abs(unchanged / chosen - 0.1) < 0.011
    assert to_mask + replaced + unchanged == chosen


def test_padding_extra_keys_and_multiple_of_8(tokenizer):
    examples = random_pairs(tokenizer, 3, np.random.default_rng(1), min_length=5, max_length=20)
    batch = DataCollatorForPretraining(tokenizer, pad_to_multiple_of=8)(examples)
    lengths = [len(e["input_ids"]) for e in examples]
    assert batch["input_ids"].shape[1] % 8 == 0 and batch["input_ids"].shape[1] >= max(lengths)
    assert batch["attention_mask"].sum(1).tolist() == lengths
    assert batch["next_sentence_label"].tolist() == [e["next_sentence_label"] for e in examples]
    for row, example in zip(batch["token_type_ids"], examples):
        assert row[: len(example["token_type_ids"])].tolist() == example["token_type_ids"]
        assert not row[len(example["token_type_ids"]) :].any()
    padding = batch["attention_mask"] == 0
    assert (batch["input_ids"][padding] == tokenizer.pad_token_id).all()
    assert (batch["labels"][padding] == -100).all()


def test_seeded_masks_depend_on_seed_epoch_and_example_only(tokenizer):
    examples = random_pairs(tokenizer, 3, np.random.default_rng(2), min_length=60)
    target, short, long = examples[0], {**examples[1], "input_ids": examples[1]["input_ids"][:10]}, examples[2]
    short["token_type_ids"] = short["token_type_ids"][:10]
    collator = DataCollatorForPretraining(tokenizer, seed=7, pad_to_multiple_of=8)
    length = len(target["input_ids"])

    def masked_row(batch, row):
        return batch["input_ids"][row, :length].tolist(), batch["labels"][row, :length].tolist()

    first = masked_row(collator([target, short]), 0)
    assert masked_row(collator([long, target]), 1) == first  # other batch, other padding: same mask
    assert masked_row(DataCollatorForPretraining(tokenizer, seed=7)([target]), 0) == first
    collator.set_epoch(1)
    assert masked_row(collator([target]), 0) != first  # a new epoch masks afresh
    assert masked_row(DataCollatorForPretraining(tokenizer, seed=8)([target]), 0) != first


def test_epoch_callback_follows_trainer_state(tokenizer, tmp_path):
    collator = DataCollatorForPretraining(tokenizer, seed=0)
    callback = MaskingEpochCallback(collator)
    args = TrainingArguments(output_dir=str(tmp_path))
    for epoch, expected in [(0.0, 0), (2.0, 2), (2.5, 2)]:  # 2.5: resuming in the middle of epoch 2
        callback.on_epoch_begin(args, TrainerState(epoch=epoch), TrainerControl())
        assert collator.epoch == expected


def words_of(tokens):
    """Group token positions into words: a word is a non-special token and the ## pieces right after it."""
    words, current = [], None
    for position, token in enumerate(tokens):
        if token in SPECIALS:
            current = None
        elif token.startswith("##") and current is not None:
            current.append(position)
        else:
            current = [position]
            words.append(current)
    return words


def test_whole_word_masking_masks_whole_words(subword_tokenizer):
    rng = np.random.default_rng(3)
    stems, suffixes = WORD_STEMS, [s[2:] for s in SUFFIXES]
    texts = [
        " ".join(rng.choice(stems) + "".join(rng.choice(suffixes, int(rng.integers(0, 3)))) for _ in range(30))
        for _ in range(400)
    ]
    examples = [{"input_ids": ids} for ids in subword_tokenizer(texts)["input_ids"]]
    # A segment may start inside a word (BERT truncates from the front): the ## piece after [CLS] is its own word.
    head = subword_tokenizer.convert_tokens_to_ids(["[CLS]", "##ing", "##s", "play", "##ing", "[SEP]"])
    examples += [{"input_ids": head} for _ in range(200)]
    collator = DataCollatorForPretraining(subword_tokenizer, whole_word_mask=True)
    chosen_tokens = maskable_tokens = to_mask = 0
    fragment_chosen = fragment_alone = 0
    for features, batch in collate_all(collator, examples):
        for feature, labels, inputs in zip(features, batch["labels"], batch["input_ids"]):
            tokens = subword_tokenizer.convert_ids_to_tokens(feature["input_ids"])
            is_chosen = (labels[: len(tokens)] != -100).tolist()
            for word in words_of(tokens):
                assert len({is_chosen[p] for p in word}) == 1, f"word {[tokens[p] for p in word]} partly masked"
            maskable_tokens += sum(len(word) for word in words_of(tokens))
            chosen_tokens += sum(is_chosen)
            to_mask += int((inputs[labels != -100] == subword_tokenizer.mask_token_id).sum())
            if feature["input_ids"] == head:
                fragment_chosen += is_chosen[1]
                fragment_alone += is_chosen[1] != is_chosen[3]
    assert abs(chosen_tokens / maskable_tokens - 0.15) < 0.02
    assert abs(to_mask / chosen_tokens - 0.8) < 0.03  # replacement still 80/10/10, token by token
    assert fragment_chosen > 0, "the leading ## fragment was never masked"
    assert fragment_alone > 0, "the leading ## fragment was always masked together with the next word"


def test_examples_with_labels_are_padded_not_masked_again(tokenizer):
    examples = [
        {"input_ids": [2, 4, 10, 3], "labels": [-100, 11, -100, -100]},
        {"input_ids": [2, 12, 3], "labels": [-100, -100, -100]},
    ]
    batch = DataCollatorForPretraining(tokenizer)(examples)
    assert batch["input_ids"].tolist() == [[2, 4, 10, 3], [2, 12, 3, 0]]
    assert batch["labels"].tolist() == [[-100, 11, -100, -100], [-100, -100, -100, -100]]
    with pytest.raises(ValueError, match="every example or none"):
        DataCollatorForPretraining(tokenizer)([examples[0], {"input_ids": [2, 12, 3]}])


def test_add_fixed_masks_masks_once(tokenizer):
    examples = random_pairs(tokenizer, 20, np.random.default_rng(4))
    dataset = Dataset.from_list(examples)
    collator = DataCollatorForPretraining(tokenizer, seed=5)
    fixed = add_fixed_masks(dataset, collator)
    again = add_fixed_masks(dataset, collator)
    assert fixed["labels"] == again["labels"] and fixed["input_ids"] == again["input_ids"]
    expected = collator(examples[:4])
    batch = collator([fixed[i] for i in range(4)])
    assert torch.equal(batch["input_ids"], expected["input_ids"]) and torch.equal(batch["labels"], expected["labels"])


def test_bad_input_is_a_clear_error(tokenizer):
    collator = DataCollatorForPretraining(tokenizer)
    with pytest.raises(ValueError, match="outside the tokenizer's vocabulary"):
        collator([{"input_ids": [2, len(tokenizer), 3]}])
    with pytest.raises(ValueError, match="mlm_probability"):
        DataCollatorForPretraining(tokenizer, mlm_probability=1.5)
    with pytest.raises(ValueError, match="must not exceed 1"):
        DataCollatorForPretraining(tokenizer, mask_replace_prob=0.8, random_replace_prob=0.3)
    no_mask = BertTokenizer(
        vocab={t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])}, mask_token=None
    )
    with pytest.raises(ValueError, match="mask token"):
        DataCollatorForPretraining(no_mask)


def test_mlm_probability_zero_is_refused():
    """With 0 no token is chosen: every batch has no labels and the loss is meaningless."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])}
    with pytest.raises(ValueError, match="mlm_probability must be above 0"):
        DataCollatorForPretraining(BertTokenizer(vocab=vocab), mlm_probability=0.0)
