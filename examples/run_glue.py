#!/usr/bin/env python
"""Fine-tune and evaluate an hf_ctx model on a GLUE task; write test predictions for the GLUE server.

From the official `glue_data` folders (offline) or from the Hub (`nyu-mll/glue`, for users online):

    python examples/run_glue.py --task_name mrpc --data_dir glue_data/MRPC \\
        --model_name_or_path runs/bert-mini --do_train --do_eval --do_predict --output_dir runs/mrpc
    python examples/run_glue.py --task_name mrpc --model_name_or_path runs/bert-mini ...     # from the Hub
    python examples/run_glue.py --task_name rte --data_dir glue_data --model_type bert \\
        --config_name runs/bert-mini --tokenizer_name runs/bert-mini ...                   # random initialisation
    python examples/run_glue.py --task_name sst2 --data_dir glue_data/SST-2 \\
        --model_name_or_path runs/elmo ...                                                 # ELMo

`--model_name_or_path` is an hf_ctx checkpoint: a pretrained BERT (its encoder and pooler are loaded and a new
classifier is added) or ELMo biLM (an `ElmoForSequenceClassification`: the frozen biLM's layers, a learned
scalar mix, a biLSTM, max- and mean-pooling and a classifier; a sentence pair is read as one word sequence
`a </S> <S> b`; `--config_overrides task_word_embedding_size=256` adds trainable word vectors beside the ELMo
vectors, as in the paper's task models). `--model_type bert|elmo --config_name <config.json, folder or preset such as "mini">` starts
from random weights instead, with `--tokenizer_name` (ELMo's default: character ids only). Tasks: cola, sst2, mrpc, stsb, qqp, mnli (evaluated on
the matched and the mismatched dev set), qnli, rte, wnli, and ax (GLUE's diagnostic set: `--do_predict` with an
MNLI model). `--do_predict` writes `<output_dir>/<Task>.tsv` (`MNLI-m.tsv` and `MNLI-mm.tsv` for MNLI) in the
submission format `index<TAB>prediction`.

Your own text classification or regression task, from CSV, TSV or JSON-lines files (transformers' conventions):

    python examples/run_glue.py --train_file train.csv --validation_file dev.csv --test_file test.csv \
        --model_name_or_path runs/bert-mini --do_train --do_eval --do_predict --output_dir runs/reviews

The text is `sentence1`/`sentence2` where both columns exist, else the first text column (or
`--text_column_names a,b`); the label is `label` (`--label_column_name`): float labels are a regression, others
a classification over the training file's labels. `--do_predict` writes `predict_results.txt`
(`index<TAB>prediction`); without `--train_file` a fine-tuned checkpoint's own labels are used.
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

import logging
from dataclasses import dataclass, field
from pathlib import Path

from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
)

from hf_ctx.data.bilm_cache import BiLMCacheArguments, with_bilm_cache
from hf_ctx.data.glue import (
    HUB_DATASET,
    encode_glue_for_subwords,
    encode_glue_for_words,
    glue_compute_metrics,
    load_glue,
    write_glue_predictions,
)
from hf_ctx.data.glue_tasks import GLUE_TASKS, glue_task
from hf_ctx.data.text_classification import (
    PREDICTIONS_FILE,
    load_text_classification_files,
    text_classification_metrics,
)
from hf_ctx.tools import hub, scripts
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import MODEL_FAMILIES, check_tokenizer_fits, model_family
from hf_ctx.tools.model_card import DataPart
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    *scripts.MODEL_BUILDING_IGNORED_TOGETHER,
    ("task_name", "train_file"),
    ("task_name", "validation_file"),
    ("task_name", "test_file"),
    ("data_dir", "train_file"),
    ("data_dir", "validation_file"),
    ("data_dir", "test_file"),
    ("dataset_name", "train_file"),
    ("dataset_name", "validation_file"),
    ("dataset_name", "test_file"),
    ("data_dir", "dataset_name"),
]


@dataclass
class ModelArguments(BiLMCacheArguments, scripts.ModelBuildingArguments):
    """How the model is built (`ModelBuildingArguments`) and a frozen biLM's states cached (ELMo)."""

    model_type: str | None = scripts.model_type_field("sequence_classification")
    config_name: str | None = scripts.config_name_field("sequence_classification")


@dataclass
class DataArguments:
    task_name: str | None = field(
        default=None,
        metadata={
            "help": f"the GLUE task, one of {list(GLUE_TASKS)} (or give your own files)",
            "kind": kinds.one_of(GLUE_TASKS),
        },
    )
    train_file: str | None = field(
        default=None,
        metadata={
            "help": "your own training data: a .csv, .tsv or .json(l) file with text and label columns",
            "kind": kinds.EXISTING_FILE,  # read by every step: its labels are the label set
        },
    )
    validation_file: str | None = field(
        default=None,
        metadata={
            "help": "your own validation data (as --train_file)",
            "kind": kinds.EXISTING_FILE,
            "read_by": ("do_eval",),
        },
    )
    test_file: str | None = field(
        default=None,
        metadata={
            "help": f"your own data to predict (--do_predict writes {PREDICTIONS_FILE})",
            "kind": kinds.EXISTING_FILE,
            "read_by": ("do_predict",),
        },
    )
    text_column_names: str | None = field(
        default=None,
        metadata={
            "help": "your files' text column, or two for a pair ('question,passage'); default: sentence1 and "
            "sentence2 where both exist, else the first text column",
            "kind": kinds.TEXT,
        },
    )
    label_column_name: str = field(
        default="label",
        metadata={
            "help": "your files' label column: float labels make a regression, others a label list",
            "kind": kinds.TEXT,
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "the task's glue_data folder (e.g. glue_data/MRPC) or glue_data itself",
            "kind": kinds.EXISTING_FOLDER,
        },
    )
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": f"with --task_name, without --data_dir: the Hub dataset with GLUE's configurations and columns "
            f"(default {HUB_DATASET})",
            "kind": kinds.DATASET,
        },
    )
    max_seq_length: int = field(
        default=128,
        metadata={
            "help": "longest input in tokens (BERT) or words (ELMo); longer ones are truncated",
            "kind": kinds.LENGTH,
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "use only the first N training examples", "kind": kinds.COUNT}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "use only the first N examples of each dev set", "kind": kinds.COUNT}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "predict only the first N test examples", "kind": kinds.COUNT}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "processes for tokenization", "kind": kinds.WORKERS}
    )
    pad_to_multiple_of: int | None = field(
        default=None,
        metadata={
            "help": "pad each batch to a multiple of this many tokens (default: 8 on a GPU or "
            "in half precision, else none; 64 gives a compiled model fewer shapes)",
            "kind": kinds.LENGTH,
        },
    )


# The script's options, the training arguments last (as `--help` shows them).
ARGUMENT_CLASSES = (ModelArguments, DataArguments, CtxTrainingArguments)


def eval_prefix(split: str) -> str:
    """ "validation" -> "eval"; MNLI's "validation_matched" -> "eval_matched"."""
    return "eval" + split.removeprefix("validation")


def load_task_data(data_args: DataArguments, training_args, model_args: ModelArguments):
    """(task record, raw splits): a GLUE task (--task_name), or a user's own files with their own labels (the
    training file's, else a fine-tuned checkpoint's). A split the run's steps need and the data lacks is an error."""
    if data_args.task_name is not None:
        task = glue_task(data_args.task_name)
        hub_dataset = data_args.dataset_name or HUB_DATASET
        raw = load_glue(task, data_args.data_dir, hub_dataset, cache_dir=model_args.cache_dir)
        missing = [split for split in used_splits(task, training_args) if split not in raw]
        if missing:
            raise ValueError(
                f"{task.name} from {data_args.data_dir or hub_dataset} has no {missing} split (files "
                f"{[task.split_files[s] for s in missing]}); it has {list(raw)}"
            )
        return task, raw
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    if not any(files.values()):
        raise ValueError("give --task_name (a GLUE task) or your own --train_file/--validation_file/--test_file")
    for split, step in (("train", "do_train"), ("validation", "do_eval"), ("test", "do_predict")):
        if getattr(training_args, step) and files[split] is None:
            option = scripts.step_option(training_args, split)
            raise ValueError(f"{option} needs --{split}_file (or a GLUE task: --task_name)")
    labels, is_regression = None, None
    if files["train"] is None and model_args.model_name_or_path is not None:
        config = AutoConfig.from_pretrained(model_args.model_name_or_path, cache_dir=model_args.cache_dir)
        is_regression = config.problem_type == "regression"
        labels = [config.id2label[i] for i in sorted(config.id2label)]
        if config.problem_type is None:  # a pretrained model: no task head, no labels of its own
            raise ValueError(
                f"{model_args.model_name_or_path} is not fine-tuned for classification (no labels of its own); give "
                "--train_file, whose labels the model learns"
            )
    raw, task = load_text_classification_files(
        {split: path for split, path in files.items() if path is not None},
        data_args.text_column_names,
        data_args.label_column_name,
        labels,
        is_regression,
    )
    return task, raw


def used_splits(task, training_args) -> list[str]:
    """The splits the run's steps read: training, the dev sets (MNLI's two), the test sets."""
    return (
        ["train"] * training_args.do_train
        + task.validation_splits * training_args.do_eval
        + task.test_splits * training_args.do_predict
    )


def build_model(model_args: ModelArguments, task, tokenizer):
    fields = {"num_labels": task.num_labels}
    if task.is_regression:
        fields["problem_type"] = "regression"
    else:
        fields["problem_type"] = "single_label_classification"
        fields["id2label"] = dict(enumerate(task.label_names))
        fields["label2id"] = {name: i for i, name in enumerate(task.label_names)}
    if model_args.model_name_or_path is not None:
        fields.update(model_args.checkpoint_overrides())
        return AutoModelForSequenceClassification.from_pretrained(
            model_args.model_name_or_path,
            cache_dir=model_args.cache_dir,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            **fields,
        )
    config = scripts.new_model_config(model_args, "sequence_classification", tokenizer, **fields)
    return AutoModelForSequenceClassification.from_config(config)


def glue_data_names(task, data_args: DataArguments) -> dict:
    """How the model card names a GLUE task's data (`RunFacts` fields): its local files (`--data_dir`) by name,
    or the Hub dataset. The user's own files are named from the arguments (none here)."""
    if data_args.task_name is None:
        return {}
    names = {"dataset_config": task.name, "training_data": f"the {task.folder} training set"}
    if data_args.data_dir:
        validation_files = ", ".join(task.split_files[s] for s in task.validation_splits)
        names["dataset"] = f"GLUE {task.folder} (the local file {task.split_files['train']})"
        names["parts"] = {"validation": DataPart(name=f"GLUE {task.folder} {validation_files}")}
    else:
        hub_dataset = data_args.dataset_name or HUB_DATASET
        names.update(dataset=f"GLUE {task.folder}", dataset_id=hub_dataset)
        names["parts"] = {"validation": DataPart(name=hub_dataset, hub_id=hub_dataset)}
    return names


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = scripts.parse_args_and_set_up(
        ARGUMENT_CLASSES, argv, logger, ignored_together=IGNORED_TOGETHER
    )
    scripts.apply_gpu_defaults(training_args, argv, group_by_length=True)
    task, raw = load_task_data(data_args, training_args, model_args)
    raw, available = scripts.keep_first_examples(raw, data_args)  # available: for the model card, N used of M

    tokenizer = scripts.fine_tuning_tokenizer(model_args)
    model = build_model(model_args, task, tokenizer)
    family = MODEL_FAMILIES[model_family(model.config)]
    new_model = model_args.model_name_or_path is None  # random weights: the rate of a model from scratch
    scripts.apply_learning_rate_default(training_args, argv, model.config, "sequence_classification", new_model)
    tokenizer_source = model_args.tokenizer_name or model_args.model_name_or_path
    pair = len(task.text_columns) == 2
    check_tokenizer_fits(model.config, tokenizer, data_args.max_seq_length, tokenizer_source, pair=pair)
    logger.info(f"{task.name}: {type(model).__name__} with {model.num_parameters():,} parameters")

    with training_args.main_process_first(desc="tokenizing"):
        encode = encode_glue_for_words if family.words_are_tokens else encode_glue_for_subwords
        encoded = encode(raw, task, tokenizer, data_args.max_seq_length, num_proc=data_args.preprocessing_num_workers)
    # Multiples of 8 use tensor cores on a GPU; with length-grouped batches they also keep the shapes few.
    pad_to = scripts.padding_multiple(data_args.pad_to_multiple_of, training_args)
    collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to)
    used = {split: encoded[split] for split in used_splits(task, training_args)}
    # A frozen biLM's states are computed once for every sentence the run reads (and, on disk, for later runs).
    collator = with_bilm_cache(
        model, tokenizer, collator, used, model_args, training_args.output_dir, training_args.device
    )
    # One dev set is evaluated as eval_*, MNLI's two as eval_matched_* and eval_mismatched_*, during training too.
    eval_sets = {eval_prefix(split): encoded[split] for split in task.validation_splits if split in encoded}
    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=encoded["train"] if training_args.do_train else None,
        eval_dataset=eval_sets.get("eval") or {p.removeprefix("eval_"): d for p, d in eval_sets.items()} or None,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=glue_compute_metrics(task) if data_args.task_name else text_classification_metrics(task),
    )

    metrics = scripts.train_and_evaluate(trainer, eval_datasets=eval_sets)
    if training_args.do_train:  # saved before predicting: nothing after training can lose the model
        facts = hub.save_run(
            trainer,
            model_args,
            data_args,
            metrics,
            data={split: raw[split] for split in used},
            available=available,
            hyperparameters={"max_seq_length": data_args.max_seq_length},
            **glue_data_names(task, data_args),
        )
    with scripts.after_saving(trainer, training_args.do_train):
        for split in task.test_splits if training_args.do_predict else ():
            test_set = encoded[split].remove_columns("label")  # test labels are hidden (-1) or ignored
            predictions = task.decode(trainer.predict(test_set, metric_key_prefix="predict").predictions)
            if trainer.is_world_process_zero():
                path = write_glue_predictions(
                    Path(training_args.output_dir) / task.submission_files[split], task, test_set["idx"], predictions
                )
                logger.info(f"wrote {len(predictions)} {split} predictions to {path}")
    if training_args.do_train:
        hub.finish_run(trainer, facts, metrics)
    return metrics


if __name__ == "__main__":
    run_script(main)
