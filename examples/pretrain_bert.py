#!/usr/bin/env python
"""Pretrain an hf_ctx BERT from raw text with masked-LM + next-sentence prediction (or packed MLM only).

One process (CPU or GPU), or many with no change to the script:

    python examples/pretrain_bert.py --train_file corpus.txt --validation_file valid.txt \\
        --model_size mini --max_seq_length 128 --do_train --do_eval --output_dir runs/bert-mini
    torchrun --nproc_per_node 2 examples/pretrain_bert.py ...                  # DDP: NCCL on GPUs
    accelerate launch --config_file examples/accelerate/fsdp.yaml examples/pretrain_bert.py ...
    torchrun --nproc_per_node 2 examples/pretrain_bert.py ... --use_cpu        # DDP on CPU (gloo); or
    accelerate launch --multi_gpu --num_processes 2 examples/pretrain_bert.py ... --use_cpu

(On CPU, `--use_cpu` is what makes transformers set up the gloo process group.) With a seed, masks depend only on
the seed, the epoch and each example, so N processes with per-device batch B/N train like one process with batch
B, and `--resume_from_checkpoint` continues exactly.

Text files (plain or gzip-compressed; several files or glob patterns, e.g. `--train_file 'wiki/wiki.train.*.txt.gz'`)
hold one sentence or paragraph per line with a blank line between documents (`--document_boundary line` when each
line is a document). Preparation runs as cached `datasets` passes (`--preprocessing_num_workers` processes,
`--cache_dir`): a second run with the same files, tokenizer and settings reads the cache instead of tokenizing
again. `--streaming` (with `--max_steps`, packed `--objective mlm`) reads the training text as it trains instead;
`--pretokenized_dir` trains on packed MLM examples saved before as token-id arrays with their tokenizer
(`hf_ctx.data.pretraining.save_pretokenized`), tokenizing nothing.
Without `--tokenizer_name`, a WordPiece vocabulary of `--vocab_size` is trained on the training text first, or on
`--tokenizer_train_samples` documents of it drawn with `--seed` (by the main process; the others load it from
`--output_dir`, which must then be on a shared filesystem). Evaluation reports MLM accuracy, MLM perplexity and NSP accuracy; the validation
set is masked once so that every evaluation scores the same tokens. The final model and tokenizer in
`--output_dir` load with `AutoModelForPreTraining` / `AutoTokenizer` (after `import hf_ctx`); the model card
(`README.md`) beside them reports the evaluation, and `--push_to_hub` (with `--hub_model_id`) publishes the
checkpoint and its card.
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

import logging
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
from datasets import load_dataset

from hf_ctx import BERT_PRESETS, CtxBertConfig, CtxBertForPreTraining
from hf_ctx.data.atomic_write import save_pretrained_atomically
from hf_ctx.data.masking import DataCollatorForPretraining, MaskingEpochCallback, add_fixed_masks
from hf_ctx.data.pretraining import (
    OBJECTIVES,
    build_pretraining_dataset,
    compute_pretraining_metrics,
    load_pretokenized,
    preprocess_pretraining_logits,
    pretokenized_info_file,
    train_tokenizer_on_corpus,
)
from hf_ctx.data.subsets import first_examples, hold_out_validation, shuffled_stream
from hf_ctx.data.text import DOCUMENT_BOUNDARIES, load_text_documents
from hf_ctx.tools import hub, scripts
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import check_tokenizer_fits
from hf_ctx.tools.loading import load_pretraining_config, load_pretraining_model, load_tokenizer
from hf_ctx.tools.model_card import vocabulary_origin
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments, resolve_resume_checkpoint

logger = logging.getLogger(__name__)
# The options of the WordPiece tokenizer trained here: refused where the tokenizer comes from elsewhere (a resumed
# run's command gives them again, and its checkpoint holds the tokenizer they made: not refused).
TOKENIZER_TRAINING_OPTIONS = ("vocab_size", "lowercase", "tokenizer_train_samples")
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    ("model_name_or_path", "config_name"),
    ("model_name_or_path", "config_overrides"),
    ("dataset_name", "train_file"),
]


@dataclass
class ModelArguments:
    model_size: str = field(
        default="mini",
        metadata={
            "help": f"size preset, one of {list(BERT_PRESETS)} (unless --config_name is given)",
            "kind": kinds.one_of(BERT_PRESETS),
        },
    )
    config_name: str | None = field(
        default=None,
        metadata={
            "help": f"a size preset ({list(BERT_PRESETS)}, as --model_size) or a CtxBertConfig config.json or folder",
            "kind": kinds.CONFIG,
        },
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": scripts.CONFIG_OVERRIDES_HELP + "; e.g. hidden_dropout_prob=0,pre_layer_norm=true",
            "kind": kinds.TEXT,
        },
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "continue pretraining this checkpoint folder instead of starting from scratch",
            "kind": kinds.MODEL,
        },
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "a tokenizer folder; by default one is trained on the training text",
            "kind": kinds.TOKENIZER,
        },
    )
    vocab_size: int = field(
        default=8000, metadata={"help": "vocabulary size of the tokenizer trained here", "kind": kinds.VOCABULARY_SIZE}
    )
    lowercase: bool = field(default=True, metadata={"help": "lower-case (uncased BERT) the tokenizer trained here"})
    tokenizer_train_samples: int | None = field(
        default=None,
        metadata={
            "help": "train the tokenizer on this many training documents drawn at random with --seed (default: "
            "all of them; needed with --streaming)",
            "kind": kinds.COUNT,
        },
    )
    sparse_prediction: bool = field(
        default=True, metadata={"help": "run the MLM decoder only on masked tokens (same loss, less compute)"}
    )


@dataclass
class DataArguments(scripts.TextCorpusArguments):
    document_boundary: str = field(
        default="blank_line",
        metadata={"help": f"for text files, one of {DOCUMENT_BOUNDARIES}", "kind": kinds.one_of(DOCUMENT_BOUNDARIES)},
    )
    objective: str = field(
        default="mlm_nsp",
        metadata={
            "help": f"one of {OBJECTIVES}: BERT's MLM + NSP pairs, or packed MLM only",
            "kind": kinds.one_of(OBJECTIVES),
        },
    )
    split_sentences: bool = field(
        default=False,
        metadata={
            "help": "cut lines into sentences after . ! ? first (text with a paragraph per line: sentence-sized "
            "NSP segments)"
        },
    )
    max_seq_length: int = field(
        default=128, metadata={"help": "tokens per example, special tokens included", "kind": kinds.LENGTH}
    )
    short_seq_probability: float = field(
        default=0.1, metadata={"help": "BERT's share of shorter pair targets", "kind": kinds.PROBABILITY}
    )
    mlm_probability: float = field(
        default=0.15, metadata={"help": "share of tokens to predict", "kind": kinds.OPEN_PROBABILITY}
    )
    whole_word_mask: bool = field(default=False, metadata={"help": "mask whole words rather than WordPiece tokens"})
    pretokenized_dir: str | None = field(
        default=None,
        metadata={
            "help": "train on packed MLM examples tokenized before (hf_ctx.data.pretraining.save_pretokenized: "
            "token-id arrays of splits 'train' and 'validation', and their tokenizer) instead of text files",
            "kind": kinds.EXISTING_FOLDER,
        },
    )


# The script's options, the training arguments last (as `--help` shows them).
ARGUMENT_CLASSES = (ModelArguments, DataArguments, CtxTrainingArguments)


def load_documents(data_args: DataArguments, seed: int, num_proc: int | None = None):
    """(training documents, validation documents or None, text column), one document a row. With --streaming the
    training documents are a `datasets.IterableDataset` read as training goes; validation data stays cached."""
    if data_args.dataset_name is not None:
        raw = load_dataset(
            data_args.dataset_name,
            data_args.dataset_config_name,
            cache_dir=data_args.cache_dir,
            streaming=data_args.streaming,
        )
        train, validation, text_column = raw["train"], raw.get("validation"), data_args.text_column
    elif data_args.train_file:

        def read(files, streaming=False):
            return load_text_documents(files, data_args.document_boundary, data_args.cache_dir, streaming, num_proc)

        train, text_column = read(data_args.train_file, data_args.streaming), "text"
        validation = read(data_args.validation_file) if data_args.validation_file else None
    else:
        raise ValueError("give --train_file or --dataset_name")
    if not data_args.streaming:  # a stream has no rows to hold out: validation data must be given
        one_document = (
            ". A text file without blank lines is one document: if each line is a document, pass "
            "--document_boundary line"
            if data_args.document_boundary == "blank_line"
            else ""
        )
        train, validation = hold_out_validation(
            train, validation, data_args.validation_split_percentage, seed, hint=one_document
        )
    return train, validation, text_column


def load_or_train_tokenizer(model_args, training_args, train_documents, text_column):
    source = training_args.resume_from_checkpoint or model_args.tokenizer_name or model_args.model_name_or_path
    if source is not None:
        return load_tokenizer(source)
    # The main process trains the vocabulary and saves it; the others then load that one.
    with training_args.main_process_first(desc="training the WordPiece tokenizer", local=False):
        if training_args.process_index != 0:
            return load_tokenizer(training_args.output_dir)
        tokenizer = train_tokenizer_on_corpus(
            train_documents,
            model_args.tokenizer_train_samples,
            seed=training_args.seed,
            text_column=text_column,
            vocab_size=model_args.vocab_size,
            lowercase=model_args.lowercase,
        )
        save_pretrained_atomically(tokenizer, training_args.output_dir)
        return tokenizer


def build_model(model_args, tokenizer, continued_config=None):
    """(the model, what the run created that a continued checkpoint lacked: modules that start from random
    weights, see `load_pretraining_model`). `continued_config`: the config of --model_name_or_path."""
    if model_args.model_name_or_path is not None:
        source = model_args.model_name_or_path
        model, created = load_pretraining_model(source, continued_config)
        check_tokenizer_fits(model.config, tokenizer, None, model_args.tokenizer_name or source)
        return model, [f"`{name}`: random initialisation" for name in created]
    fields = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "sparse_prediction": model_args.sparse_prediction,
    }
    fields.update(scripts.parse_config_overrides(model_args.config_overrides, CtxBertConfig))
    if model_args.config_name in BERT_PRESETS:  # the preset names every script's --config_name takes
        config = CtxBertConfig.from_preset(model_args.config_name, **fields)
    elif model_args.config_name is not None:
        config = CtxBertConfig.from_dict({**CtxBertConfig.from_pretrained(model_args.config_name).to_dict(), **fields})
    else:
        config = CtxBertConfig.from_preset(model_args.model_size, **fields)
    return CtxBertForPreTraining(config), []


def card_hyperparameters(model_args: ModelArguments, data_args: DataArguments, tokenizer, resumed: str | None) -> dict:
    """The settings of the run that `TrainingArguments` does not hold, for the model card; `resumed`: the
    checkpoint the run resumed from (its tokenizer is the run's)."""
    settings = {}
    if model_args.model_name_or_path is None and model_args.config_name is None:
        settings["model_size"] = model_args.model_size  # otherwise the card's architecture table says it all
    settings.update(
        objective=data_args.objective,
        max_seq_length=data_args.max_seq_length,
        mlm_probability=data_args.mlm_probability,
        whole_word_mask=data_args.whole_word_mask,
    )
    if data_args.objective == "mlm_nsp":
        settings["short_seq_probability"] = data_args.short_seq_probability
    size, source, role = f"{len(tokenizer):,} WordPiece tokens", None, ""
    if resumed or data_args.pretokenized_dir:
        source, role = (
            resumed or data_args.pretokenized_dir,
            "the checkpoint resumed" if resumed else "saved with the pre-tokenized text",
        )
    elif model_args.tokenizer_name or model_args.model_name_or_path:
        source = model_args.tokenizer_name or model_args.model_name_or_path
        role = "--tokenizer_name" if model_args.tokenizer_name else "the checkpoint continued"
    asked = f"--vocab_size {model_args.vocab_size}: the text has fewer distinct pieces"
    settings["tokenizer"] = vocabulary_origin(
        size, source, role, asked if len(tokenizer) < model_args.vocab_size else ""
    )
    return settings


def documents_and_tokenizer(model_args, data_args, training_args):
    """(training documents, validation documents, text column, tokenizer); no documents with --pretokenized_dir,
    whose examples are read as they were saved."""
    if data_args.pretokenized_dir is not None:
        check_pretokenized_arguments(model_args, data_args)
        pretokenized_info_file(data_args.pretokenized_dir)  # before its tokenizer, whose error would not say so
        return None, None, None, load_tokenizer(data_args.pretokenized_dir)
    train_documents, validation_documents, text_column = load_documents(
        data_args, training_args.seed, data_args.preprocessing_num_workers
    )
    if training_args.do_eval and validation_documents is None:
        raise ValueError(
            f"{scripts.step_option(training_args, 'validation')} needs validation data: --validation_file, "
            "a validation split or --validation_split_percentage"
        )
    tokenizer = load_or_train_tokenizer(model_args, training_args, train_documents, text_column)
    return train_documents, validation_documents, text_column, tokenizer


def check_pretokenized_arguments(model_args: ModelArguments, data_args: DataArguments) -> None:
    """--pretokenized_dir brings packed MLM examples and their tokenizer: text and tokenizer options are refused."""
    if data_args.objective != "mlm":
        raise ValueError(
            f"--pretokenized_dir holds packed MLM examples: give --objective mlm, not {data_args.objective}"
        )
    given = [
        f"--{name}"
        for name, value in (
            ("train_file", data_args.train_file),
            ("validation_file", data_args.validation_file),
            ("dataset_name", data_args.dataset_name),
            ("tokenizer_name", model_args.tokenizer_name),
        )
        if value
    ]
    if given:
        raise ValueError(f"--pretokenized_dir brings the text and its tokenizer: drop {', '.join(given)}")


def named_data(data_args: DataArguments):
    """The data arguments as the model card names the data: the text files, or the pre-tokenized id arrays."""
    if data_args.pretokenized_dir is None:
        return data_args
    arrays = {
        f"{split}_file": [f"{data_args.pretokenized_dir}/{split}.input_ids.npy"] for split in ("train", "validation")
    }
    return SimpleNamespace(**{**vars(data_args), **arrays})


def pretraining_sets(data_args: DataArguments, training_args, documents: dict, tokenizer, text_column, collator):
    """(the examples of each split the run reads: "train" and/or "validation", read from --pretokenized_dir or built
    from the documents and cut to --max_*_samples; the number each had before). The validation examples are
    masked once (every evaluation scores the same tokens); a streamed training set is shuffled in a buffer."""
    build = {
        "tokenizer": tokenizer,
        "objective": data_args.objective,
        "max_seq_length": data_args.max_seq_length,
        "short_seq_prob": data_args.short_seq_probability,
        "seed": training_args.seed,
        "text_column": text_column,
        "num_proc": data_args.preprocessing_num_workers,
        "split_sentences": data_args.split_sentences,
    }
    wanted = {"train": training_args.do_train, "validation": training_args.do_eval}
    sets, available = {}, {}
    with training_args.main_process_first(desc="building pretraining examples"):
        for split in (split for split, asked in wanted.items() if asked):
            if data_args.pretokenized_dir is not None:
                dataset = load_pretokenized(data_args.pretokenized_dir, split, data_args.max_seq_length)
            else:
                dataset = build_pretraining_dataset(documents[split], **build)
            available[split] = hub.dataset_size(dataset)  # for the model card: N used of M
            limit = data_args.max_train_samples if split == "train" else data_args.max_eval_samples
            sets[split] = first_examples(dataset, limit)
        if "train" in sets and data_args.objective == "mlm_nsp":
            warn_if_few_is_next_pairs(sets["train"], data_args.split_sentences)
        if "train" in sets and data_args.streaming:
            sets["train"] = shuffled_stream(sets["train"], training_args)
        if "validation" in sets:
            sets["validation"] = add_fixed_masks(
                sets["validation"], collator, num_proc=data_args.preprocessing_num_workers
            )
    return sets, available


# BERT makes half of its NSP pairs IsNext; well below that, NSP accuracy mostly measures the majority class.
MIN_IS_NEXT_SHARE = 0.4


def warn_if_few_is_next_pairs(dataset, split_sentences: bool) -> float:
    """Warn when fewer than `MIN_IS_NEXT_SHARE` of the NSP pairs are IsNext (label 0); returns the share.

    A document of one segment (one line, or one paragraph) only makes NotNext pairs: raw text with a paragraph a
    line, or corpora of one-sentence documents, give mostly NotNext. The advice depends on whether the lines were
    already cut into sentences (`--split_sentences`).
    """
    labels = np.asarray(dataset.with_format("numpy")["next_sentence_label"])
    share = float((labels == 0).mean()) if len(labels) else 1.0
    if share < MIN_IS_NEXT_SHARE:
        if split_sentences:
            advice = (
                "The lines are already cut into sentences (--split_sentences), so many documents are a single "
                "sentence (in WikiText, each heading between blank lines is one): put blank lines between "
                "documents only, not around headings and paragraphs, or pretrain with --objective mlm"
            )
        else:
            advice = (
                "For text with a paragraph per line, --split_sentences cuts it into sentence segments; for "
                "one-sentence documents, --objective mlm"
            )
        logger.warning(
            f"only {share:.1%} of the {len(labels):,} next-sentence training pairs are IsNext (BERT's recipe makes "
            f"half): most documents have one segment, so the NSP accuracy will mostly show the majority class. "
            + advice
        )
    return share


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = scripts.parse_args_and_set_up(
        ARGUMENT_CLASSES,
        argv,
        logger,
        ignored_together=IGNORED_TOGETHER,
        steps=("do_train", "do_eval"),
    )
    brought = data_args.pretokenized_dir or model_args.tokenizer_name or model_args.model_name_or_path
    if brought is not None:
        why = f"they shape the tokenizer trained here, and this run's tokenizer is {brought}'s"
        scripts.refuse_unused_options(argv, TOKENIZER_TRAINING_OPTIONS, why)
    # The checkpoint ("latest": the latest complete one) is resolved now: its tokenizer is the run's.
    training_args.resume_from_checkpoint = resolve_resume_checkpoint(
        training_args.resume_from_checkpoint, training_args.output_dir
    )

    # A checkpoint to continue is checked before any text is read.
    continued_config = (
        load_pretraining_config(model_args.model_name_or_path, "bert") if model_args.model_name_or_path else None
    )
    train_documents, validation_documents, text_column, tokenizer = documents_and_tokenizer(
        model_args, data_args, training_args
    )
    model, created = build_model(model_args, tokenizer, continued_config)
    new_model = model_args.model_name_or_path is None  # from scratch (a resumed run too, as it started)
    scripts.apply_learning_rate_default(training_args, argv, model.config, "pretraining", new_model)
    config = model.config
    tokenizer.model_max_length = config.max_position_embeddings
    if data_args.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length {data_args.max_seq_length} exceeds the model's max_position_embeddings "
            f"({config.max_position_embeddings})"
        )
    logger.info(
        f"model: {model.num_parameters():,} parameters, {config.num_hidden_layers} layers of "
        f"{config.hidden_size} (config.json has the rest)"
    )

    collator = DataCollatorForPretraining(
        tokenizer,
        mlm_probability=data_args.mlm_probability,
        whole_word_mask=data_args.whole_word_mask,
        pad_to_multiple_of=data_args.pad_to_multiple_of,
        seed=training_args.seed,
    )
    documents = {"train": train_documents, "validation": validation_documents}
    data, available = pretraining_sets(data_args, training_args, documents, tokenizer, text_column, collator)
    if training_args.label_names is None:
        with_nsp = data_args.objective == "mlm_nsp"
        training_args.label_names = ["labels", "next_sentence_label"] if with_nsp else ["labels"]
    evaluating = "validation" in data
    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=data.get("train"),
        eval_dataset=data.get("validation"),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=compute_pretraining_metrics if evaluating else None,
        preprocess_logits_for_metrics=preprocess_pretraining_logits if evaluating else None,
        callbacks=[MaskingEpochCallback(collator)],
    )

    metrics = scripts.train_and_evaluate(trainer)
    if training_args.do_train:
        # Model (safetensors), config, tokenizer and card in --output_dir; with --push_to_hub, on the Hub.
        resumed = training_args.resume_from_checkpoint
        hyperparameters = card_hyperparameters(model_args, data_args, tokenizer, resumed)
        facts = hub.save_run(
            trainer,
            model_args,
            named_data(data_args),
            metrics,
            data,
            available,
            created=created,
            hyperparameters=hyperparameters,
        )
        hub.finish_run(trainer, facts, metrics)
    return metrics


if __name__ == "__main__":
    run_script(main)
