#!/usr/bin/env python
"""Fine-tune and evaluate a model on multiple choice: SWAG, or any CSV or JSON file of a context and endings.

    python examples/run_swag.py --model_name_or_path runs/bert-mini \\
        --train_file swag/train.csv --validation_file swag/val.csv --do_train --do_eval --output_dir runs/swag
    python examples/run_swag.py --model_name_or_path runs/bert-mini --train_file train.jsonl \\
        --validation_file dev.jsonl --context_column question --ending_prefix_column "" \\
        --ending_columns A,B,C,D,E --label_column answer ...                      # another layout
    python examples/run_swag.py --model_type bert --config_name mini --tokenizer_name runs/bert-mini ...  # random weights

The files are in SWAG's CSV layout by default (`sent1` the context, `sent2` the start every ending shares,
`ending0` ... `ending3`, `label` the index of the right ending); `--context_column`, `--ending_prefix_column`
(`""` for none), `--ending_columns` and `--label_column` name other columns. Each choice is encoded as the pair
(context, start + ending) and scored by an `AutoModelForMultipleChoice` (hf_ctx's `CtxBertForMultipleChoice`, or
a transformers BERT); the reported metric is accuracy. `--do_predict` writes `predictions.json`, the chosen
ending of each `--test_file` example in file order (and its accuracy, where the file has labels). As transformers' `examples/pytorch/multiple-choice/run_swag.py`.
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

import logging
from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoModelForMultipleChoice

from hf_ctx.data.multiple_choice import (
    MultipleChoiceCollator,
    MultipleChoiceColumns,
    decode_choices,
    encode_multiple_choice,
    multiple_choice_accuracy,
    read_multiple_choice_file,
    write_json_atomically,
)
from hf_ctx.tools import hub, scripts
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import check_tokenizer_fits
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
IGNORED_TOGETHER = scripts.MODEL_BUILDING_IGNORED_TOGETHER
SWAG = MultipleChoiceColumns()


@dataclass
class ModelArguments(scripts.ModelBuildingArguments):
    """How the model is built: the options every fine-tuning script shares (`ModelBuildingArguments`)."""

    model_type: str | None = scripts.model_type_field("multiple_choice")
    config_name: str | None = scripts.config_name_field("multiple_choice")


@dataclass
class DataArguments:
    train_file: str | None = field(
        default=None,
        metadata={"help": "training data, .csv or .json(l)", "kind": kinds.EXISTING_FILE, "read_by": ("do_train",)},
    )
    validation_file: str | None = field(
        default=None,
        metadata={"help": "evaluation data, .csv or .json(l)", "kind": kinds.EXISTING_FILE, "read_by": ("do_eval",)},
    )
    test_file: str | None = field(
        default=None,
        metadata={
            "help": "--do_predict: data to choose endings for, labelled or not",
            "kind": kinds.EXISTING_FILE,
            "read_by": ("do_predict",),
        },
    )
    context_column: str = field(
        default=SWAG.context, metadata={"help": "the context every choice starts from", "kind": kinds.TEXT}
    )
    ending_prefix_column: str = field(
        default=SWAG.ending_prefix,
        metadata={"help": 'the start every ending shares ("" for none)', "kind": kinds.TEXT_OR_EMPTY},
    )
    ending_columns: str = field(
        default=",".join(SWAG.endings),
        metadata={"help": "the endings' columns, comma-separated, in label order", "kind": kinds.TEXT},
    )
    label_column: str = field(
        default=SWAG.label, metadata={"help": "the index of the right ending", "kind": kinds.TEXT}
    )
    max_seq_length: int = field(
        default=128, metadata={"help": "longest (context, ending) pair in tokens", "kind": kinds.LENGTH}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "use only the first N training examples", "kind": kinds.COUNT}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "evaluate only the first N examples", "kind": kinds.COUNT}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "predict only the first N examples of --test_file", "kind": kinds.COUNT}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "processes for tokenization", "kind": kinds.WORKERS}
    )
    pad_to_multiple_of: int | None = field(
        default=None,
        metadata={
            "help": "pad each batch to a multiple of this many tokens (default: 8 on a GPU)",
            "kind": kinds.LENGTH,
        },
    )

    def columns(self) -> MultipleChoiceColumns:
        endings = tuple(name.strip() for name in self.ending_columns.split(",") if name.strip())
        if len(endings) < 2:
            raise ValueError(f"--ending_columns names {len(endings)} column(s); a choice needs at least 2")
        return MultipleChoiceColumns(
            self.context_column, endings, self.label_column, self.ending_prefix_column or None
        )


# The script's options, the training arguments last (as `--help` shows them).
ARGUMENT_CLASSES = (ModelArguments, DataArguments, CtxTrainingArguments)


def build_model(model_args: ModelArguments, tokenizer):
    if model_args.model_name_or_path is not None:
        return AutoModelForMultipleChoice.from_pretrained(
            model_args.model_name_or_path,
            cache_dir=model_args.cache_dir,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            **model_args.checkpoint_overrides(),
        )
    return AutoModelForMultipleChoice.from_config(scripts.new_model_config(model_args, "multiple_choice", tokenizer))


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = scripts.parse_args_and_set_up(
        ARGUMENT_CLASSES, argv, logger, ignored_together=IGNORED_TOGETHER
    )
    scripts.check_trained_for_the_task(model_args, training_args, "multiple choice", "ForMultipleChoice")
    columns = data_args.columns()
    files = {
        "train": data_args.train_file if training_args.do_train else None,
        "validation": data_args.validation_file if training_args.do_eval else None,
        "test": data_args.test_file if training_args.do_predict else None,
    }
    for split, step in (("train", "train"), ("validation", "eval"), ("test", "predict")):
        if getattr(training_args, f"do_{step}") and files[split] is None:
            raise ValueError(f"{scripts.step_option(training_args, split)} needs --{split}_file")
    raw = {
        split: read_multiple_choice_file(path, columns, labelled=None if split == "test" else True)
        for split, path in files.items()
        if path is not None
    }
    raw, available = scripts.keep_first_examples(raw, data_args)  # available: for the model card, N used of M

    tokenizer = scripts.fine_tuning_tokenizer(model_args)
    model = build_model(model_args, tokenizer)
    new_model = model_args.model_name_or_path is None  # random weights: the rate of a model from scratch
    scripts.apply_learning_rate_default(training_args, argv, model.config, "multiple_choice", new_model)
    tokenizer_source = model_args.tokenizer_name or model_args.model_name_or_path
    check_tokenizer_fits(model.config, tokenizer, data_args.max_seq_length, tokenizer_source, pair=True)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters, {len(columns.endings)} choices")

    with training_args.main_process_first(desc="tokenizing"):
        encoded = {
            split: encode_multiple_choice(
                data, columns, tokenizer, data_args.max_seq_length, data_args.preprocessing_num_workers, split
            )
            for split, data in raw.items()
        }
    pad_to = scripts.padding_multiple(data_args.pad_to_multiple_of, training_args)
    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("validation"),
        processing_class=tokenizer,
        data_collator=MultipleChoiceCollator(tokenizer, pad_to_multiple_of=pad_to),
        compute_metrics=multiple_choice_accuracy,
    )
    metrics = scripts.train_and_evaluate(trainer)
    if training_args.do_train:  # saved before predicting: nothing after training can lose the model
        card = {"pipeline_tag": "multiple-choice"}
        card["hyperparameters"] = {"max_seq_length": data_args.max_seq_length, "choices": len(columns.endings)}
        facts = hub.save_run(trainer, model_args, data_args, metrics, raw, available, **card)
    with scripts.after_saving(trainer, training_args.do_train):
        if training_args.do_predict:
            result = trainer.predict(encoded["test"], metric_key_prefix="predict")
            if "label" in encoded["test"].column_names:
                metrics.update(result.metrics)
                scripts.record_metrics(trainer, "predict", result.metrics)
            if trainer.is_world_process_zero():
                path = write_json_atomically(
                    Path(training_args.output_dir) / "predictions.json", decode_choices(result.predictions).tolist()
                )
                logger.info(f"wrote {len(encoded['test'])} predictions to {path}")
    if training_args.do_train:
        hub.finish_run(trainer, facts, metrics)
    return metrics


if __name__ == "__main__":
    run_script(main)
