"""One sequence-classification loss for every head (hf_ctx.losses), checked against torch's losses computed
here by hand, and the same behaviour in BERT's and ELMo's heads (multi-output regression and -100 labels
included)."""

import pytest
import torch
from datasets import Dataset
from torch.nn import functional as F
from transformers import Trainer, TrainingArguments

from hf_ctx import (
    CtxBertConfig,
    CtxBertForSequenceClassification,
    ElmoConfig,
    ElmoForSequenceClassification,
    ElmoTokenizer,
    TagLMConfig,
    TagLMForTokenClassification,
)
from hf_ctx.input_checks import IGNORE_INDEX
from hf_ctx.losses import classification_loss, sequence_classification_loss

VOCAB = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", "a", "dog"]
SENTENCES = ["the cat sat on the mat", "a dog", "the dog sat", "a cat on a mat"]


class Config:  # the two fields the loss reads
    def __init__(self, num_labels, problem_type=None):
        self.num_labels, self.problem_type = num_labels, problem_type


def bert(num_labels):
    config = CtxBertConfig(
        vocab_size=20,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=num_labels,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = CtxBertForSequenceClassification(config).eval()
    inputs = {"input_ids": torch.randint(1, 20, (4, 6)), "attention_mask": torch.ones(4, 6, dtype=torch.long)}
    return model, inputs


def elmo(num_labels):
    # bilm_state_norm "none": "center" uses each batch's statistics (as batch norm does), so micro-batches could
    # not make the update of one whole batch; the loss's averaging is what these tests check
    config = ElmoConfig(
        bilm_state_norm="none",
        char_cnn={"filters": [[1, 4], [2, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=len(VOCAB),
        dropout=0.0,
        task_hidden_size=0,
        classifier_dropout=0.0,
        num_labels=num_labels,
    )
    model = ElmoForSequenceClassification(config).eval()
    inputs = ElmoTokenizer(vocab=VOCAB)(SENTENCES, padding=True, return_tensors="pt")
    return model, dict(inputs)


CASES = {
    # name: (num_labels, labels, problem type inferred, loss from the logits)
    "regression": (
        1,
        torch.tensor([0.5, -1.0, 2.0, 0.0]),
        "regression",
        lambda logits, labels: F.mse_loss(logits[:, 0], labels),
    ),
    "multi-output regression": (
        3,
        torch.tensor([[0.5, -1.0, 2.0], [0.0, 1.0, 1.0], [2.0, 2.0, 0.0], [1.0, 0.0, -1.0]]),
        "regression",
        lambda logits, labels: F.mse_loss(logits, labels),
    ),
    "single label": (
        3,
        torch.tensor([0, 2, 1, 2]),
        "single_label_classification",
        lambda logits, labels: F.cross_entropy(logits, labels),
    ),
    "single label with -100": (
        3,
        torch.tensor([0, -100, 1, -100]),
        "single_label_classification",
        lambda logits, labels: F.cross_entropy(logits[[0, 2]], labels[[0, 2]]),
    ),
    "multi-label": (
        3,
        torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]),
        "multi_label_classification",
        lambda logits, labels: F.binary_cross_entropy_with_logits(logits, labels),
    ),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("build", [bert, elmo], ids=["bert", "elmo"])
def test_bert_and_elmo_heads_compute_the_same_loss(build, case):
    num_labels, labels, problem_type, reference = CASES[case]
    if case == "multi-output regression":  # not inferable from the labels: regression needs saying
        model, inputs = build(num_labels)
        model.config.problem_type = "regression"
    else:
        model, inputs = build(num_labels)
    with torch.no_grad():
        out = model(**inputs, labels=labels)
    assert model.config.problem_type == problem_type
    torch.testing.assert_close(out.loss, reference(out.logits, labels))


@pytest.mark.parametrize("build", [bert, elmo], ids=["bert", "elmo"])
def test_bad_labels_are_the_same_clear_error_in_both_heads(build):
    model, inputs = build(3)
    with pytest.raises(ValueError, match=r"label 3 is outside \[0, num_labels=3\)"):
        model(**inputs, labels=torch.tensor([0, 3, 1, 2]))
    model.config.problem_type = "regression"
    with pytest.raises(ValueError, match=r"regression labels must have shape \(4, num_labels=3\)"):
        model(**inputs, labels=torch.zeros(4))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_integer_labels_of_any_dtype_are_single_label_class_ids(dtype):
    """transformers infers single-label classification for int64 and int32 labels only; hf_ctx for every integer
    dtype (before: int32 failed inside cross_entropy, int16 / int8 / uint8 were taken for multi-label targets,
    failed on their shape, and left multi_label_classification in the config)."""
    logits, labels = torch.randn(4, 3), torch.tensor([0, 2, 1, 2])
    config = Config(3)
    loss = sequence_classification_loss(config, logits, labels.to(dtype))
    assert config.problem_type == "single_label_classification"
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))
    model, inputs = bert(3)
    out = model(**inputs, labels=labels.to(dtype))
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))


def test_refused_labels_leave_the_problem_type_unset():
    """Inferred, the problem type is stored only with a loss: labels that a check refuses do not decide it."""
    logits = torch.randn(2, 3)
    config = Config(3)
    with pytest.raises(ValueError, match=r"^labels of dtype torch.bool are neither class ids nor multi-label"):
        sequence_classification_loss(config, logits, torch.tensor([True, False]))
    with pytest.raises(ValueError, match=r"single-label classification labels must have shape \(2,\)"):
        sequence_classification_loss(config, logits, torch.ones(2, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"label 3 is outside"):
        sequence_classification_loss(config, logits, torch.tensor([0, 3]))
    assert config.problem_type is None
    # Said outright, boolean multi-hot targets are 0/1 targets.
    multi_label = Config(3, "multi_label_classification")
    targets = torch.tensor([[True, False, True], [False, False, True]])
    torch.testing.assert_close(
        sequence_classification_loss(multi_label, logits, targets),
        F.binary_cross_entropy_with_logits(logits, targets.float()),
    )


@pytest.mark.parametrize(
    "num_labels, problem_type, labels, message",
    [
        (1, None, [float("nan"), 1.0], r"^regression labels hold NaN or infinite values"),
        (2, "regression", [[0.0, float("inf")], [1.0, 2.0]], r"^regression labels hold NaN or infinite values"),
        (2, None, [[1.0, 2.0], [0.0, 1.0]], r"^multi-label classification labels must lie in \[0, 1\]"),
        (2, None, [[1.0, -1.0], [0.0, 1.0]], r"^multi-label classification labels must lie in \[0, 1\]"),
        (2, None, [[1.0, float("nan")], [0.0, 1.0]], r"^multi-label classification labels must lie in \[0, 1\]"),
    ],
)
def test_targets_that_would_give_a_nan_or_meaningless_loss_are_refused(num_labels, problem_type, labels, message):
    """Before: a NaN loss, or a binary cross-entropy against a target of 2 or -1, in silence."""
    with pytest.raises(ValueError, match=message):
        sequence_classification_loss(
            Config(num_labels, problem_type), torch.randn(2, num_labels), torch.tensor(labels)
        )


@pytest.mark.parametrize(
    "num_labels, problem_type",
    [(1, None), (3, None), (3, "single_label_classification"), (3, "multi_label_classification"), (3, "regression")],
)
def test_labels_that_are_no_tensor_are_named_whatever_the_problem_type(num_labels, problem_type):
    """Before: only an unset problem type (with several labels) checked; a saved classifier (its problem type
    stored by its first loss) or a regression failed on `'list' object has no attribute 'numel'`."""
    with pytest.raises(
        TypeError, match=r"^labels must be a torch.Tensor \(tokenizer\(..., return_tensors='pt'\)\), got list$"
    ):
        sequence_classification_loss(Config(num_labels, problem_type), torch.randn(2, num_labels), [0, 1])


def test_sequence_classification_loss_edge_cases():
    logits = torch.randn(2, 3)
    # Every label ignored: no loss rather than NaN.
    assert classification_loss(logits, torch.tensor([IGNORE_INDEX, IGNORE_INDEX]), 3).item() == 0.0
    # Half precision logits give a float32 loss.
    loss = sequence_classification_loss(Config(3), logits.half(), torch.tensor([0, 2]))
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(logits.half().float(), torch.tensor([0, 2])))
    with pytest.raises(ValueError, match="problem_type must be"):
        sequence_classification_loss(Config(3, "ranking"), logits, torch.tensor([0, 2]))
    with pytest.raises(ValueError, match=r"multi-label classification labels must have shape \(2, num_labels=3\)"):
        sequence_classification_loss(Config(3, "multi_label_classification"), logits, torch.ones(2, 2))


def taglm():
    labels = ["O", "B-PER", "I-PER"]
    config = TagLMConfig(
        vocab_size=len(VOCAB),
        word_embedding_dim=4,
        char_embedding_dim=4,
        char_cnn_filters=4,
        rnn_hidden_size=4,
        dropout=0.0,
        id2label=dict(enumerate(labels)),
    )
    return TagLMForTokenClassification(config), torch.tensor([[0, 1, 2, 0, 0, 0]] * 4)


@pytest.mark.parametrize("build", [lambda: bert(2), lambda: elmo(2), taglm], ids=["bert", "elmo", "taglm"])
def test_gradient_accumulation_averages_the_micro_batches(build, tmp_path):
    """Two micro-batches of 2 accumulated make the same update as one batch of 4: `Trainer` passes the heads
    `num_items_in_batch` (`accepts_loss_kwargs`) and they divide by it (tests/hostile/test_outputs.py checks
    token losses over micro-batches of unequal token counts)."""
    if build is taglm:
        model, labels = taglm()
        encoded = ElmoTokenizer(vocab=VOCAB)(SENTENCES, padding=True)
        rows = [{**{k: encoded[k][i] for k in encoded}, "labels": labels[i].tolist()} for i in range(4)]
    else:
        model, inputs = build()
        rows = [{**{k: v[i].tolist() for k, v in inputs.items()}, "labels": i % 2} for i in range(4)]
    initial = {k: v.clone() for k, v in model.state_dict().items()}

    def one_step(batch_size, accumulation):
        model.load_state_dict(initial)
        args = TrainingArguments(
            output_dir=str(tmp_path),
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=accumulation,
            max_steps=1,
            learning_rate=0.5,
            optim="sgd",
            lr_scheduler_type="constant",
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(model=model, args=args, train_dataset=Dataset.from_list(rows))
        assert trainer.model_accepts_loss_kwargs is True
        trainer.train()
        return {k: v.clone() for k, v in model.state_dict().items()}

    accumulated, whole = one_step(2, 2), one_step(4, 1)
    changed = [k for k in initial if not torch.equal(initial[k], whole[k])]
    assert changed
    for key in changed:
        torch.testing.assert_close(accumulated[key], whole[key], atol=1e-6, rtol=1e-5, msg=key)


@pytest.mark.parametrize("sparse_prediction", [False, True])
def test_every_head_gives_loss_zero_when_every_label_is_ignored(sparse_prediction):
    """A batch without a labelled position has loss 0.0 in every head (masked LM gave NaN, token classification
    0.0): the value documented in docs/models.md."""
    from hf_ctx import (
        CtxBertForMaskedLM,
        CtxBertForPreTraining,
        CtxBertForQuestionAnswering,
        CtxBertForTokenClassification,
    )

    config = bert(2)[0].config
    config.sparse_prediction = sparse_prediction
    input_ids = torch.randint(5, 20, (2, 6))
    ignored = torch.full((2, 6), IGNORE_INDEX)
    for model_class in (CtxBertForMaskedLM, CtxBertForPreTraining, CtxBertForTokenClassification):
        model = model_class(config).eval()
        assert model(input_ids=input_ids, labels=ignored).loss.item() == 0.0, model_class.__name__
    outside = torch.tensor([50, 60])  # spans cut off by truncation
    qa = CtxBertForQuestionAnswering(config).eval()
    assert qa(input_ids=input_ids, start_positions=outside, end_positions=outside).loss.item() == 0.0
    # With one label, the loss is that position's cross-entropy.
    labels = ignored.clone()
    labels[0, 2] = 7
    model = CtxBertForMaskedLM(config).eval()
    config.sparse_prediction = False
    logits = model(input_ids=input_ids).logits
    config.sparse_prediction = sparse_prediction
    expected = F.cross_entropy(logits[0, 2:3].float(), torch.tensor([7]))
    torch.testing.assert_close(model(input_ids=input_ids, labels=labels).loss, expected)


def test_label_range_check_reads_the_device_once(count_host_syncs):
    """`check_label_range` promises one host sync: no boolean indexing (a second sync) to drop ignored labels."""
    from hf_ctx.input_checks import check_label_range

    with count_host_syncs() as counter:
        check_label_range(torch.tensor([0, 3, IGNORE_INDEX]), 5)
        check_label_range(torch.tensor([IGNORE_INDEX, IGNORE_INDEX]), 5)  # nothing to check, and no error
    assert counter.syncs == ["tolist", "tolist"]
    with pytest.raises(ValueError, match=r"label 5 is outside \[0, num_labels=5\)"):
        check_label_range(torch.tensor([0, 5, IGNORE_INDEX]), 5)
    with pytest.raises(ValueError, match=r"label -3 is outside \[0, num_labels=5\)"):
        check_label_range(torch.tensor([-3, 1, IGNORE_INDEX]), 5)


def test_losses_divide_by_the_accumulated_batch_count_when_given():
    """With `num_items_in_batch` (the labels of every micro-batch of an optimizer step), a token loss is its sum
    over that count, and a mean over sentences (`accumulated_mean`) is weighted by the micro-batch's share of the
    sentences (`CtxTrainer`'s count by term) or, where only the labels are counted (`Trainer`), of the labels: the
    parts of a step add up to the mean over the step."""
    from hf_ctx.losses import accumulated_mean

    logits, labels = torch.randn(2, 5, 3), torch.tensor([[0, 1, -100, 2, -100], [1, -100, -100, -100, -100]])
    first, second = (logits[:1], labels[:1]), (logits[1:], labels[1:])
    count = (labels != IGNORE_INDEX).sum()
    whole = classification_loss(logits, labels, 3)
    parts = sum(classification_loss(x, y, 3, num_items_in_batch=count) for x, y in (first, second))
    torch.testing.assert_close(parts, whole)
    means = torch.tensor([2.0, 5.0])
    by_labels = sum(accumulated_mean(m, 1, "sentences", count, y) for m, (_, y) in zip(means, (first, second)))
    torch.testing.assert_close(by_labels, (3 * means[0] + 1 * means[1]) / 4)
    counts = {"labels": count, "sentences": torch.tensor(2)}
    by_sentences = sum(accumulated_mean(m, 1, "sentences", counts) for m in means)
    torch.testing.assert_close(by_sentences, means.mean())
    assert accumulated_mean(means[0], 1, "sentences").item() == 2.0  # no count: the mean itself
    regression = Config(1, "regression")
    scores, targets = torch.randn(4, 1), torch.randn(4)
    halves = sum(
        sequence_classification_loss(regression, scores[i : i + 2], targets[i : i + 2], num_items_in_batch=4)
        for i in (0, 2)
    )
    torch.testing.assert_close(halves, F.mse_loss(scores[:, 0], targets))
