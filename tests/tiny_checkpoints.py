"""Tiny models of each hf_ctx family with their tokenizers, for the tests that save, load, describe and push
checkpoints (test_remote_code, test_model_card, test_hub). Each builder returns `(model, tokenizer)`."""

import numpy as np

from hf_ctx import (
    CtxBertConfig,
    CtxBertForPreTraining,
    CtxBertForSequenceClassification,
    CtxBertForTokenClassification,
    ElmoConfig,
    ElmoForBiLM,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoTokenizer,
    TagLMConfig,
    TagLMForTokenClassification,
    train_wordpiece_tokenizer,
)

WORDS = "red green blue cat dog bird runs sleeps eats fast slow".split()
# A task script's run in batches of 16 that saves no checkpoint and reports nowhere.
QUICK_RUN = ["--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "16", "--save_strategy", "no"] + [
    "--report_to",
    "none",
]
NER_LABELS = ["O", "B-ANIMAL", "I-ANIMAL"]


def bert_tokenizer(folder):
    """A WordPiece tokenizer trained on 200 random sentences of WORDS (written to `folder`)."""
    corpus = folder / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text("\n".join(" ".join(rng.choice(WORDS, 6)) for _ in range(200)))
    return train_wordpiece_tokenizer([corpus], vocab_size=60, min_frequency=1, model_max_length=32)


def _bert_config(tokenizer, **kwargs):
    return CtxBertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32, **kwargs)


def bert_pretraining(folder):
    tokenizer = bert_tokenizer(folder)
    return CtxBertForPreTraining(_bert_config(tokenizer)), tokenizer


def bert_token_classifier(folder):
    tokenizer = bert_tokenizer(folder)
    return CtxBertForTokenClassification(_bert_config(tokenizer, id2label=dict(enumerate(NER_LABELS)))), tokenizer


def bert_crf_tagger(folder):
    """A BERT tagger with a CRF over the words (`use_crf`), under BIO."""
    tokenizer = bert_tokenizer(folder)
    labels = dict(enumerate(NER_LABELS))
    return CtxBertForTokenClassification(_bert_config(tokenizer, id2label=labels, use_crf=True, tag_scheme="BIO")), (
        tokenizer
    )


def bert_sequence_classifier(folder):
    tokenizer = bert_tokenizer(folder)
    return CtxBertForSequenceClassification(_bert_config(tokenizer, id2label={0: "NEG", 1: "POS"})), tokenizer


def cat_sentences(tokenizer, count: int, words: int = 4, max_length: int = 8):
    """`count` random sentences of `words` WORDS, labelled 1 where they hold "cat", tokenized to `max_length`
    (without the text column): a task a tiny classifier learns in a few steps."""
    from datasets import Dataset

    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(WORDS, words)) for _ in range(count)]
    data = Dataset.from_dict({"text": sentences, "label": [int("cat" in s) for s in sentences]})
    data = data.map(lambda b: tokenizer(b["text"], padding="max_length", max_length=max_length), batched=True)
    return data.remove_columns("text")


def run_with_two_checkpoints(root):
    """A tiny CtxTrainer run of `bert_sequence_classifier` in `root`/"run" with checkpoints at steps 1 and 2
    (model, tokenizer, optimizer, scheduler, RNG, state); returns the trainer."""
    from transformers import TrainingArguments

    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = bert_sequence_classifier(root)
    args = TrainingArguments(
        output_dir=str(root / "run"),
        max_steps=2,
        per_device_train_batch_size=4,
        save_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = CtxTrainer(model=model, args=args, train_dataset=cat_sentences(tokenizer, 8), processing_class=tokenizer)
    trainer.train()
    return trainer


def new_bert_arguments(root) -> list[str]:
    """A task script's arguments for a new BERT from the config and tokenizer saved in `root` ("config",
    "tokenizer")."""
    return ["--model_type", "bert", "--config_name", str(root / "config"), "--tokenizer_name", str(root / "tokenizer")]


def elmo_tokenizer():
    return ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *WORDS])


def _elmo_config(tokenizer, **kwargs):
    return ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 8], [3, 8]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 16, "projection_dim": 8, "n_layers": 2},
        vocab_size=len(tokenizer.get_vocab()),
        task_hidden_size=4,
        **kwargs,
    )


def elmo_bilm(folder):
    tokenizer = elmo_tokenizer()
    return ElmoForBiLM(_elmo_config(tokenizer)), tokenizer


def elmo_token_classifier(folder):
    tokenizer = elmo_tokenizer()
    return ElmoForTokenClassification(_elmo_config(tokenizer, id2label=dict(enumerate(NER_LABELS)))), tokenizer


def elmo_crf_tagger(folder):
    """An ELMo tagger with a CRF (`use_crf`, under BIO) and two scalar mixes."""
    tokenizer = elmo_tokenizer()
    config = _elmo_config(
        tokenizer, id2label=dict(enumerate(NER_LABELS)), use_crf=True, tag_scheme="BIO", num_output_representations=2
    )
    return ElmoForTokenClassification(config), tokenizer


def taglm(folder):
    """A TagLM tagger on a tiny frozen biLM."""
    tokenizer = elmo_tokenizer()
    config = TagLMConfig(
        vocab_size=len(tokenizer.get_vocab()),
        word_embedding_dim=8,
        char_cnn_filters=6,
        rnn_hidden_size=6,
        id2label=dict(enumerate(NER_LABELS)),
        tag_scheme="BIO",
    )
    return TagLMForTokenClassification.from_bilm(ElmoModel(_elmo_config(tokenizer)), config), tokenizer


def enable_activation_checkpointing(model) -> None:
    """What `--gradient_checkpointing` calls, by the name of the installed transformers:
    `activation_checkpointing_enable` from 5.23, `gradient_checkpointing_enable` before (deprecated since)."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()
