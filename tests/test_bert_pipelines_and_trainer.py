"""hf_ctx BERT checkpoints in transformers' pipelines and the standard Trainer."""

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import torch
from datasets import Dataset
from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, pipeline

from hf_ctx import (
    CtxBertConfig,
    CtxBertForMaskedLM,
    CtxBertForSequenceClassification,
    CtxBertForTokenClassification,
    CtxBertModel,
    train_wordpiece_tokenizer,
)

WORDS = "red green blue cat dog bird runs sleeps eats fast slow".split()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    rng = np.random.default_rng(0)
    path.write_text("\n".join(" ".join(rng.choice(WORDS, 6)) for _ in range(300)))
    return train_wordpiece_tokenizer([path], vocab_size=60, min_frequency=1, model_max_length=32)


def tiny(tokenizer, **kwargs):
    return CtxBertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32, **kwargs)


def save(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("pad_vocab_size_to_multiple_of", [1, 64])
def test_fill_mask_pipeline_gives_the_models_top_predictions(tokenizer, tmp_path, pad_vocab_size_to_multiple_of):
    """Also with the vocabulary padded to 64 rows, the padding's decoder biases 1e4: never predicted."""
    model = CtxBertForMaskedLM(tiny(tokenizer, pad_vocab_size_to_multiple_of=pad_vocab_size_to_multiple_of)).eval()
    with torch.no_grad():
        model.cls.predictions.decoder.bias[len(tokenizer) :] = 1e4
    fill = pipeline("fill-mask", model=save(model, tokenizer, tmp_path))
    predictions = fill("red cat [MASK] fast", top_k=3)

    encoded = tokenizer("red cat [MASK] fast", return_tensors="pt")
    position = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    with torch.no_grad():
        probabilities = model(**encoded).logits[0, position].softmax(-1)
    scores, ids = probabilities.topk(3)
    assert [p["token"] for p in predictions] == ids.tolist()
    np.testing.assert_allclose([p["score"] for p in predictions], scores.numpy(), rtol=1e-5)
    assert [p["token_str"] for p in predictions] == [tokenizer.decode([i]) for i in ids.tolist()]
    assert max(ids.tolist()) < len(tokenizer) == model.config.vocab_size


def test_feature_extraction_pipeline_returns_the_model_states(tokenizer, tmp_path):
    model = CtxBertModel(tiny(tokenizer)).eval()
    path = save(model, tokenizer, tmp_path)
    features = np.array(pipeline("feature-extraction", model=path)("blue bird sleeps"))
    encoded = tokenizer("blue bird sleeps", return_tensors="pt")
    with torch.no_grad():
        expected = model(**encoded).last_hidden_state.numpy()
    np.testing.assert_allclose(features, expected, atol=1e-5)


def test_text_classification_pipeline_gives_the_models_softmax(tokenizer, tmp_path):
    labels = {0: "NEG", 1: "POS", 2: "MIXED"}
    model = CtxBertForSequenceClassification(
        tiny(tokenizer, id2label=labels, label2id={v: k for k, v in labels.items()})
    )
    model.eval()
    classify = pipeline("text-classification", model=save(model, tokenizer, tmp_path), top_k=None)
    (result,) = classify(["green dog runs"])  # a batch of one: every label's score
    with torch.no_grad():
        probabilities = model(**tokenizer("green dog runs", return_tensors="pt")).logits[0].softmax(-1)
    expected = sorted(((labels[i], p) for i, p in enumerate(probabilities.tolist())), key=lambda x: -x[1])
    assert [r["label"] for r in result] == [label for label, _ in expected]
    np.testing.assert_allclose([r["score"] for r in result], [p for _, p in expected], rtol=1e-5)


def test_token_classification_pipeline_gives_the_models_per_token_tags(tokenizer, tmp_path):
    tags = {0: "O", 1: "B-ANIMAL", 2: "I-ANIMAL"}
    model = CtxBertForTokenClassification(tiny(tokenizer, id2label=tags, label2id={v: k for k, v in tags.items()}))
    model.eval()
    tagger = pipeline(
        "token-classification", model=save(model, tokenizer, tmp_path), aggregation_strategy="none", ignore_labels=[]
    )
    sentence = "green dog runs fast"
    entities = tagger(sentence)

    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        probabilities = model(**encoded).logits[0].softmax(-1)
    tokens = encoded["input_ids"][0].tolist()
    real = [i for i, token in enumerate(tokens) if token not in tokenizer.all_special_ids]  # no [CLS], [SEP]
    assert [e["index"] for e in entities] == real
    assert [e["word"] for e in entities] == tokenizer.convert_ids_to_tokens([tokens[i] for i in real])
    assert [e["entity"] for e in entities] == [tags[int(probabilities[i].argmax())] for i in real]
    np.testing.assert_allclose(
        [e["score"] for e in entities], [float(probabilities[i].max()) for i in real], rtol=1e-5
    )


@pytest.mark.slow
def test_trainer_fine_tunes_a_tiny_bert_on_a_synthetic_task(tokenizer, tmp_path):
    # Label 1 iff the sentence mentions an animal: learnable from the words alone.
    rng = np.random.default_rng(1)
    animals, others = {"cat", "dog", "bird"}, [w for w in WORDS if w not in {"cat", "dog", "bird"}]
    texts, labels = [], []
    for i in range(256):
        words = list(rng.choice(others, 4))
        if i % 2:
            words[rng.integers(4)] = rng.choice(sorted(animals))
        texts.append(" ".join(words))
        labels.append(i % 2)
    dataset = Dataset.from_dict({"text": texts, "label": labels}).map(
        lambda batch: tokenizer(batch["text"], truncation=True), batched=True, remove_columns=["text"]
    )
    torch.manual_seed(0)
    model = CtxBertForSequenceClassification(tiny(tokenizer, num_labels=2))
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=32,
        num_train_epochs=6,
        learning_rate=2e-3,
        logging_steps=8,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=DataCollatorWithPadding(tokenizer))
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses[-1] < 0.5 * losses[0], losses
    predictions = trainer.predict(dataset)
    accuracy = (predictions.predictions.argmax(-1) == np.array(labels)).mean()
    assert accuracy > 0.9
