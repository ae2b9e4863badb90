#!/usr/bin/env python
"""Pretrain an hf_ctx ELMo biLM (forward + backward language model over character-CNN word vectors) on raw text.

    python examples/pretrain_elmo.py --train_file corpus.txt --validation_file valid.txt \\
        --model_size small --vocab_min_count 3 --do_train --do_eval --output_dir runs/elmo-small
    # a smaller model, e.g. for a CPU
    python examples/pretrain_elmo.py ... --config_overrides \\
        '{"char_cnn": {"filters": [[1, 32], [2, 32], [3, 64], [4, 128]], "n_highway": 1}, "lstm": {"dim": 512, "projection_dim": 128}}'
    # the same as key=value pairs (dotted keys for the fields inside char_cnn and lstm)
    python examples/pretrain_elmo.py ... --config_overrides lstm.dim=512,lstm.projection_dim=128,char_cnn.n_highway=1
    torchrun --nproc_per_node 4 examples/pretrain_elmo.py ...        # or accelerate launch: DDP, no change

Data: text files (`--train_file`, `--validation_file`: plain or gzip-compressed, several files or glob patterns such
as `'wiki/wiki.train.*.txt.gz'`; one paragraph or sentence per line), split into words as CoNLL and the Penn
Treebank split text (`hf_ctx.data.words`: "Brussels." -> "Brussels", "."), or on spaces only with `--pretokenized`
(text already tokenized, such as the 1B Word Benchmark); the tokenizer records which, so that taggers and
pipelines split raw text the same way. Or a `datasets` dataset (`--dataset_name`, text column `--text_column`). Lines are split into sentences of at most `--max_words`
words (see `hf_ctx.data.bilm`) in cached `datasets` passes (`--preprocessing_num_workers`, `--cache_dir`), so a
second run reads the cache, word counts included. `--streaming` (with `--max_steps`) reads the training text as it
trains instead; its vocabulary then takes one pass over the stream unless `--tokenizer_name` brings one. The word
vocabulary the softmax predicts is built from the training sentences (`--vocab_min_count`, `--vocab_max_size`),
unless `--tokenizer_name` or `--model_name_or_path` brings one.
With a large vocabulary, `--num_sampled 8192` trains with the original's sampled softmax.

Evaluation reports the forward, backward and average perplexity (`eval_forward_perplexity`,
`eval_backward_perplexity`, `eval_perplexity` = exp of the mean of the two losses, as bilm-tf reports). The model,
tokenizer and model card are written to `--output_dir`; `AutoModelForPreTraining` loads the biLM with its softmax,
`AutoModel` the biLM alone (after `import hf_ctx`).
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

import logging
from dataclasses import dataclass, field

from datasets import load_dataset

from hf_ctx import ELMO_PRESETS, ElmoConfig, ElmoForBiLM, ElmoTokenizer
from hf_ctx.data.bilm import (
    BiLMDataCollator,
    build_vocabulary,
    compute_bilm_metrics,
    count_words,
    load_text_lines,
    preprocess_bilm_logits,
    split_into_sentences,
)
from hf_ctx.data.subsets import first_examples, hold_out_validation, shuffled_stream
from hf_ctx.tools import hub, scripts
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import is_elmo_tokenizer
from hf_ctx.tools.loading import load_pretraining_config, load_pretraining_model, load_tokenizer
from hf_ctx.tools.model_card import vocabulary_origin
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    ("model_name_or_path", "config_overrides"),
    ("dataset_name", "train_file"),
]


@dataclass
class ModelArguments:
    model_size: str = field(
        default="small",
        metadata={"help": f"size preset, one of {list(ELMO_PRESETS)}", "kind": kinds.one_of(ELMO_PRESETS)},
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": scripts.CONFIG_OVERRIDES_HELP + "; char_cnn and lstm are merged key by key into the preset's",
            "kind": kinds.TEXT,
        },
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "continue pretraining this ELMo checkpoint (with its tokenizer)", "kind": kinds.MODEL},
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "an ElmoTokenizer folder with a word vocabulary, instead of building one",
            "kind": kinds.TOKENIZER,
        },
    )
    vocab_min_count: int = field(
        default=3, metadata={"help": "keep training words seen at least this often", "kind": kinds.COUNT}
    )
    vocab_max_size: int | None = field(
        default=None, metadata={"help": "at most this many words (specials included)", "kind": kinds.VOCABULARY_SIZE}
    )
    num_sampled: int = field(
        default=0,
        metadata={
            "help": "0: full softmax; N: sampled softmax over N words while training (original: 8192)",
            "kind": kinds.count_or_zero("a full softmax"),
        },
    )


@dataclass
class DataArguments(scripts.TextCorpusArguments):
    max_words: int = field(
        default=50, metadata={"help": "longest sentence; longer ones are cut into pieces", "kind": kinds.LENGTH}
    )
    split_sentences: bool = field(default=True, metadata={"help": "split lines after . ! ? (else one line = one)"})
    pretokenized: bool = field(
        default=False,
        metadata={
            "help": "the text is already tokenized (e.g. the 1B Word Benchmark): split words on spaces only, not "
            "as CoNLL and the Penn Treebank do (punctuation off words); the tokenizer records which"
        },
    )

    @property
    def word_splitter(self) -> str:
        return "whitespace" if self.pretokenized else "treebank"


# The script's options, the training arguments last (as `--help` shows them).
ARGUMENT_CLASSES = (ModelArguments, DataArguments, CtxTrainingArguments)


def load_lines(data_args: DataArguments, seed: int):
    """(training lines, validation lines or None), column `text_column`. With --streaming the training lines are a
    `datasets.IterableDataset` read as training goes; validation data stays cached."""
    if data_args.dataset_name is not None:
        raw = load_dataset(
            data_args.dataset_name,
            data_args.dataset_config_name,
            cache_dir=data_args.cache_dir,
            streaming=data_args.streaming,
        )
        train, validation = raw["train"], raw.get("validation")
    elif data_args.train_file:
        num_proc = data_args.preprocessing_num_workers
        train = load_text_lines(data_args.train_file, data_args.cache_dir, data_args.streaming, num_proc)
        validation = (
            load_text_lines(data_args.validation_file, data_args.cache_dir, num_proc=num_proc)
            if data_args.validation_file
            else None
        )
        data_args.text_column = "text"
    else:
        raise ValueError("give --train_file or --dataset_name")
    if data_args.streaming:  # a stream has no rows to hold out: validation data must be given
        return train, validation
    return hold_out_validation(train, validation, data_args.validation_split_percentage, seed)


def sentences(lines, data_args: DataArguments, limit: int | None):
    """(the first `limit` sentences of `lines`, how many there were: None when streamed)."""
    dataset = split_into_sentences(
        lines,
        data_args.max_words,
        data_args.text_column,
        data_args.split_sentences,
        num_proc=data_args.preprocessing_num_workers,
        splitter=data_args.word_splitter,
    )
    return first_examples(dataset, limit), hub.dataset_size(dataset)


def vocabulary_of(train_sentences, model_args: ModelArguments, word_splitter: str, max_characters_per_token: int = 50):
    """An ElmoTokenizer whose word vocabulary is built from the training sentences (--vocab_min_count,
    --vocab_max_size), which records the splitter that made their words."""
    counts = count_words(train_sentences)
    vocabulary = build_vocabulary(counts, model_args.vocab_min_count, model_args.vocab_max_size)
    if len(vocabulary) == 3:  # <S>, </S>, <UNK> only: a biLM that predicts <UNK> for every word
        raise ValueError(
            f"--vocab_min_count {model_args.vocab_min_count:,}: no word of the training text is seen that often (the "
            f"most frequent, {max(counts.values(), default=0):,} times), so every word would be <UNK>; lower it"
        )
    return ElmoTokenizer(
        vocab=vocabulary, max_characters_per_token=max_characters_per_token, word_splitter=word_splitter
    )


def vocabulary_in_words(model_args: ModelArguments, tokenizer, source: str | None) -> str:
    """The card's words for the word vocabulary: its size and where it came from (`source`; None: built here)."""
    role = "--tokenizer_name" if model_args.tokenizer_name else "the checkpoint continued"
    count = model_args.vocab_min_count
    asked = f"the words seen at least {'once' if count == 1 else f'{count} times'}" + (
        f", at most {model_args.vocab_max_size:,}" if model_args.vocab_max_size else ""
    )
    return vocabulary_origin(f"{tokenizer.vocab_size:,} words", source, role, asked, made="built")


def load_elmo_tokenizer(source: str):
    """The tokenizer of `source`; a ValueError unless it is an ElmoTokenizer (the biLM reads each word's
    characters and predicts words of a word vocabulary: a WordPiece tokenizer has neither)."""
    tokenizer = load_tokenizer(source)
    if not is_elmo_tokenizer(tokenizer):
        raise ValueError(
            f"{source} holds a {type(tokenizer).__name__}, not an ElmoTokenizer: the biLM reads each word's "
            "characters and predicts words. Give an ElmoTokenizer folder (a pretrain_elmo.py output), or leave "
            "out --tokenizer_name to build the vocabulary from the training text"
        )
    return tokenizer


def check_same_splitter(tokenizer, source: str, word_splitter: str) -> None:
    """A ValueError when the word vocabulary of `tokenizer` (from `source`) was made by another splitter than
    the one this run splits its text with: its words would not be the text's."""
    if tokenizer.has_word_vocabulary and tokenizer.word_splitter != word_splitter:
        raise ValueError(
            f"the word vocabulary of {source} was made by the {tokenizer.word_splitter!r} splitter, but this run "
            f"splits its text with {word_splitter!r}: "
            + ("drop --pretokenized" if word_splitter == "whitespace" else "add --pretokenized")
            + " so that the text's words are the vocabulary's"
        )


def refuse_vocabulary_options(argv, tokenizer, source: str) -> None:
    """--vocab_min_count and --vocab_max_size build a vocabulary: refused on the command line `argv` where the run
    takes `tokenizer`'s, from `source`."""
    why = f"they build the word vocabulary, and this run keeps the {tokenizer.vocab_size:,} words of {source}"
    scripts.refuse_unused_options(argv, ("vocab_min_count", "vocab_max_size"), why)


def continued_checkpoint(model_args: ModelArguments, config, train_sentences, word_splitter: str, argv=None):
    """(the biLM of --model_name_or_path with its softmax, its tokenizer, what the run created that the checkpoint
    lacked, the vocabulary in words): the checkpoint's word vocabulary and character ids are kept. A checkpoint
    without a word vocabulary (a converted published ELMo, a task model) gets --tokenizer_name's, or one built from
    the training text; a checkpoint without a softmax (bilm-tf's files hold none) gets a new one over that
    vocabulary."""
    source, created = model_args.model_name_or_path, []
    tokenizer_source = vocabulary_source = model_args.tokenizer_name or source
    tokenizer = load_elmo_tokenizer(tokenizer_source)
    check_same_splitter(tokenizer, tokenizer_source, word_splitter)
    if tokenizer.has_word_vocabulary:
        refuse_vocabulary_options(argv, tokenizer, tokenizer_source)
    else:
        tokenizer = vocabulary_of(train_sentences, model_args, word_splitter, tokenizer.max_characters_per_token)
        vocabulary_source = None
        created.append(f"the word vocabulary ({tokenizer.vocab_size:,} words, from the training text)")
        logger.warning(
            f"{tokenizer_source} has no word vocabulary for the softmax: built one of "
            f"{tokenizer.vocab_size:,} words from the training text (--vocab_min_count {model_args.vocab_min_count}); "
            "--tokenizer_name names an ElmoTokenizer folder with another"
        )
    if tokenizer.max_characters_per_token != config.max_characters_per_token:
        raise ValueError(
            f"the tokenizer of {tokenizer_source} gives {tokenizer.max_characters_per_token} characters a word, but "
            f"the biLM of {source} reads {config.max_characters_per_token}"
        )
    if config.vocab_size is None:  # no softmax to keep: it is created over the tokenizer's vocabulary
        config.vocab_size = tokenizer.vocab_size
        config.bos_token_id, config.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
        config.unk_token_id = tokenizer.unk_token_id
    elif config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"the tokenizer of {tokenizer_source} has {tokenizer.vocab_size:,} words, but the softmax of {source} "
            f"predicts {config.vocab_size:,}"
            + (": drop --tokenizer_name to keep the checkpoint's vocabulary" if model_args.tokenizer_name else "")
        )
    model, new_modules = load_pretraining_model(source, config)
    created += [f"`{name}`: random initialisation over the {tokenizer.vocab_size:,} words" for name in new_modules]
    return model, tokenizer, created, vocabulary_in_words(model_args, tokenizer, vocabulary_source)


def build_model_and_tokenizer(
    model_args: ModelArguments, train_sentences, word_splitter: str, continued_config=None, argv=None
):
    """(model, tokenizer, what the run created that a continued checkpoint lacked, the vocabulary in words).
    `continued_config`: the config of --model_name_or_path; `argv`: the command line (options it gives that the
    run would not use are refused)."""
    if model_args.model_name_or_path is not None:
        return continued_checkpoint(model_args, continued_config, train_sentences, word_splitter, argv)
    if model_args.tokenizer_name is not None:
        tokenizer = load_elmo_tokenizer(model_args.tokenizer_name)
        check_same_splitter(tokenizer, model_args.tokenizer_name, word_splitter)
        refuse_vocabulary_options(argv, tokenizer, model_args.tokenizer_name)
    else:
        tokenizer = vocabulary_of(train_sentences, model_args, word_splitter)
    overrides = scripts.parse_config_overrides(model_args.config_overrides, ElmoConfig)
    char_cnn = overrides.get("char_cnn")
    if char_cnn is None or isinstance(char_cnn, dict):  # anything else: refused by the config, naming it
        overrides["char_cnn"] = {"max_characters_per_token": tokenizer.max_characters_per_token, **(char_cnn or {})}
    config = ElmoConfig.from_preset(
        model_args.model_size,
        vocab_size=tokenizer.vocab_size,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        unk_token_id=tokenizer.unk_token_id,
        num_sampled=model_args.num_sampled,
        **overrides,
    )
    vocabulary = vocabulary_in_words(model_args, tokenizer, model_args.tokenizer_name)
    return ElmoForBiLM(config), tokenizer, [], vocabulary


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = scripts.parse_args_and_set_up(
        ARGUMENT_CLASSES,
        argv,
        logger,
        ignored_together=IGNORED_TOGETHER,
        steps=("do_train", "do_eval"),
    )

    # A checkpoint to continue is checked before any text is read.
    continued_config = (
        load_pretraining_config(model_args.model_name_or_path, "elmo") if model_args.model_name_or_path else None
    )
    train_lines, validation_lines = load_lines(data_args, training_args.seed)
    if training_args.do_eval and validation_lines is None:
        raise ValueError(
            f"{scripts.step_option(training_args, 'validation')} needs validation data: --validation_file, "
            "a validation split, or --validation_split_percentage"
        )
    with training_args.main_process_first(desc="splitting sentences"):
        train_sentences, train_available = sentences(train_lines, data_args, data_args.max_train_samples)
        eval_sentences, eval_available = (
            sentences(validation_lines, data_args, data_args.max_eval_samples)
            if training_args.do_eval
            else (None, None)
        )
    model, tokenizer, created, vocabulary = build_model_and_tokenizer(
        model_args, train_sentences, data_args.word_splitter, continued_config, argv
    )
    sampled = model.config.num_sampled
    if sampled and sampled >= tokenizer.vocab_size:
        raise ValueError(
            f"--num_sampled {sampled:,} is not below the vocabulary's {tokenizer.vocab_size:,} words: the sampled "
            "softmax would cost more than the full one it approximates; give fewer, or 0 for the full softmax"
        )
    new_model = model_args.model_name_or_path is None  # from scratch (a resumed run too, as it started)
    scripts.apply_learning_rate_default(training_args, argv, model.config, "pretraining", new_model)
    if data_args.streaming and training_args.do_train:
        train_sentences = shuffled_stream(train_sentences, training_args)
    lstm = model.config.lstm
    logger.info(
        f"biLM: {model.num_parameters():,} parameters, {tokenizer.vocab_size:,} words, {lstm['n_layers']} "
        f"LSTM layers of {lstm['dim']} cells projected to {lstm['projection_dim']} (config.json has the rest)"
    )

    # The examples keep their words (the collator encodes them), and the word ids are the labels.
    training_args.remove_unused_columns = False
    if training_args.label_names is None:
        training_args.label_names = ["input_word_ids"]
    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=train_sentences if training_args.do_train else None,
        eval_dataset=eval_sentences,
        processing_class=tokenizer,
        data_collator=BiLMDataCollator(tokenizer, data_args.pad_to_multiple_of),
        compute_metrics=compute_bilm_metrics if eval_sentences is not None else None,
        preprocess_logits_for_metrics=preprocess_bilm_logits if eval_sentences is not None else None,
    )

    metrics = scripts.train_and_evaluate(trainer)
    if training_args.do_train:
        hyperparameters = {
            "word vocabulary": vocabulary,
            "max_words": data_args.max_words,
            "num_sampled": model_args.num_sampled,
            "word_splitter": data_args.word_splitter,
        }
        data = {"train": train_sentences, "validation": eval_sentences}
        available = {"train": train_available, "validation": eval_available}
        card = {"created": created, "hyperparameters": hyperparameters}
        facts = hub.save_run(trainer, model_args, data_args, metrics, data, available, **card)
        hub.finish_run(trainer, facts, metrics)
    return metrics


if __name__ == "__main__":
    run_script(main)
