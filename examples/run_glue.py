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
"""

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from transformers import (
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
from hf_ctx.data.subsets import first_examples
from hf_ctx.tools.checks import load_tokenizer
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import MODEL_FAMILIES, check_tokenizer_fits, families_with, model_family, preset_names
from hf_ctx.tools.hub import finish_run
from hf_ctx.tools.scripts import (
    CONFIG_OVERRIDES_HELP,
    apply_gpu_defaults,
    apply_learning_rate_default,
    apply_unpad_inputs,
    padding_multiple,
    parse_args_and_set_up,
    parse_config_overrides,
    train_and_evaluate,
    unpad_inputs_field,
)
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    ("model_name_or_path", "config_name"),
    ("model_name_or_path", "model_type"),
]

# The model families with a sequence-classification head (--model_type).
MODEL_TYPES = tuple(families_with("sequence_classification"))


@dataclass
class ModelArguments(BiLMCacheArguments):
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "an hf_ctx checkpoint folder to fine-tune (e.g. a pretrained BERT)"}
    )
    model_type: str | None = field(
        default=None,
        metadata={"help": f"without --model_name_or_path: start from random weights, one of {list(MODEL_TYPES)}"},
    )
    config_name: str | None = field(
        default=None,
        metadata={
            "help": "with --model_type: a config.json or checkpoint folder, or a size preset: "
            + preset_names(MODEL_TYPES)
        },
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "tokenizer folder (default: the checkpoint's)"})
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": CONFIG_OVERRIDES_HELP + "; e.g. classifier_dropout=0.2 or, for ELMo, task_word_embedding_size=256"
        },
    )
    cache_dir: str | None = field(default=None, metadata={"help": "where Hub downloads are cached"})
    unpad_inputs: bool = unpad_inputs_field()


@dataclass
class DataArguments:
    task_name: str = field(metadata={"help": f"the GLUE task, one of {list(GLUE_TASKS)}"})
    data_dir: str | None = field(
        default=None, metadata={"help": "the task's glue_data folder (e.g. glue_data/MRPC) or glue_data itself"}
    )
    dataset_name: str = field(
        default=HUB_DATASET,
        metadata={"help": "without --data_dir: the Hub dataset with GLUE's configurations and columns"},
    )
    max_seq_length: int = field(
        default=128, metadata={"help": "longest input in tokens (BERT) or words (ELMo); longer ones are truncated"}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "use only the first N training examples"})
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "use only the first N examples of each dev set"}
    )
    max_predict_samples: int | None = field(default=None, metadata={"help": "predict only the first N test examples"})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "processes for tokenization"})
    pad_to_multiple_of: int | None = field(
        default=None,
        metadata={
            "help": "pad each batch to a multiple of this many tokens (default: 8 on a GPU or "
            "in half precision, else none; 64 gives a compiled model fewer shapes)"
        },
    )


def eval_prefix(split: str) -> str:
    """ "validation" -> "eval"; MNLI's "validation_matched" -> "eval_matched"."""
    return "eval" + split.removeprefix("validation")


def build_model(model_args: ModelArguments, task, tokenizer):
    fields = {"num_labels": task.num_labels, **parse_config_overrides(model_args.config_overrides)}
    if task.is_regression:
        fields["problem_type"] = "regression"
    else:
        fields["problem_type"] = "single_label_classification"
        fields["id2label"] = dict(enumerate(task.label_names))
        fields["label2id"] = {name: i for i, name in enumerate(task.label_names)}
    if model_args.model_name_or_path is not None:
        return AutoModelForSequenceClassification.from_pretrained(
            model_args.model_name_or_path, cache_dir=model_args.cache_dir, **fields
        )
    if model_args.model_type not in MODEL_TYPES or model_args.config_name is None:
        raise ValueError(
            "give --model_name_or_path, or --model_type (one of "
            f"{list(MODEL_TYPES)}) with --config_name for a randomly initialised model"
        )
    family = MODEL_FAMILIES[model_args.model_type]
    config = family.load_config(model_args.config_name, tokenizer, cache_dir=model_args.cache_dir, **fields)
    return AutoModelForSequenceClassification.from_config(config)


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = parse_args_and_set_up(
        (ModelArguments, DataArguments, CtxTrainingArguments), argv, logger, ignored_together=IGNORED_TOGETHER
    )
    applied = apply_gpu_defaults(training_args, argv, group_by_length=True)
    if applied:
        logger.info(f"GPU defaults (give the options to override them): {applied}")

    task = glue_task(data_args.task_name)
    raw = load_glue(task, data_args.data_dir, data_args.dataset_name, cache_dir=model_args.cache_dir)
    for wanted, splits in [
        (training_args.do_train, ["train"]),
        (training_args.do_eval, task.validation_splits),
        (training_args.do_predict, task.test_splits),
    ]:
        missing = [s for s in splits if wanted and s not in raw]
        if missing:
            raise ValueError(
                f"{task.name} from {data_args.data_dir or data_args.dataset_name} has no {missing} split "
                f"(files {[task.split_files[s] for s in missing]}); it has {list(raw)}"
            )

    tokenizer_source = model_args.tokenizer_name or model_args.model_name_or_path
    if tokenizer_source is not None:
        tokenizer = load_tokenizer(tokenizer_source, cache_dir=model_args.cache_dir)
    else:  # a new model's own tokenizer, where it needs no training text (ELMo's character ids)
        family = MODEL_FAMILIES.get(model_args.model_type)
        tokenizer = family.new_tokenizer() if family is not None else None
        if tokenizer is None:
            raise ValueError("give --tokenizer_name (or a --model_name_or_path that holds a tokenizer)")
    model = build_model(model_args, task, tokenizer)
    family = MODEL_FAMILIES[model_family(model.config)]
    apply_learning_rate_default(training_args, argv, model.config, "sequence_classification")
    apply_unpad_inputs(model, model_args.unpad_inputs)
    check_tokenizer_fits(model.config, tokenizer, data_args.max_seq_length, tokenizer_source)
    logger.info(f"{task.name}: {type(model).__name__} with {model.num_parameters():,} parameters")

    def limit(split: str) -> int | None:
        if split == "train":
            return data_args.max_train_samples
        return data_args.max_predict_samples if split.startswith("test") else data_args.max_eval_samples

    available = {split: len(dataset) for split, dataset in raw.items()}  # for the model card: N used of M
    raw = datasets.DatasetDict({split: first_examples(dataset, limit(split)) for split, dataset in raw.items()})
    with training_args.main_process_first(desc="tokenizing"):
        encode = encode_glue_for_words if family.words_are_tokens else encode_glue_for_subwords
        encoded = encode(raw, task, tokenizer, data_args.max_seq_length, num_proc=data_args.preprocessing_num_workers)
    # Multiples of 8 use tensor cores on a GPU; with length-grouped batches they also keep the shapes few.
    pad_to = padding_multiple(data_args.pad_to_multiple_of, training_args)
    collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to)
    eval_sets = {split: encoded[split] for split in task.validation_splits if split in encoded}
    # A frozen biLM's states are computed once for every sentence the run reads (and, on disk, for later runs).
    used = {"train": training_args.do_train, **dict.fromkeys(eval_sets, training_args.do_eval)}
    used.update(dict.fromkeys(task.test_splits, training_args.do_predict))
    collator = with_bilm_cache(
        model,
        tokenizer,
        collator,
        {split: encoded[split] for split, wanted in used.items() if wanted and split in encoded},
        model_args,
        training_args.output_dir,
        training_args.device,
    )
    # Evaluations during training: one dev set is reported as eval_*, MNLI's two as eval_matched_* and
    # eval_mismatched_*, as the final evaluation below does.
    eval_during_training = {eval_prefix(split).removeprefix("eval_"): data for split, data in eval_sets.items()}
    if "validation" in eval_sets:
        eval_during_training = eval_sets["validation"]
    trainer = CtxTrainer(
        model=model,
        args=training_args,
        train_dataset=encoded["train"] if training_args.do_train else None,
        eval_dataset=eval_during_training or None,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=glue_compute_metrics(task),
    )

    metrics, eval_metrics = train_and_evaluate(
        trainer, eval_datasets={eval_prefix(split): dataset for split, dataset in eval_sets.items()}
    )
    if training_args.do_predict:
        for split in task.test_splits:
            test_set = encoded[split].remove_columns("label")  # GLUE's test labels are hidden (-1)
            predictions = task.decode(trainer.predict(test_set, metric_key_prefix="predict").predictions)
            if trainer.is_world_process_zero():
                path = write_glue_predictions(
                    Path(training_args.output_dir) / task.submission_files[split], task, test_set["idx"], predictions
                )
                logger.info(f"wrote {len(predictions)} {split} predictions to {path}")
    if training_args.do_train:
        finite = {k: v for k, v in eval_metrics.items() if not isinstance(v, float) or math.isfinite(v)}
        if len(finite) < len(eval_metrics):
            logger.warning(f"left out of the model card (not finite): {sorted(set(eval_metrics) - set(finite))}")
        finish_run(
            trainer,
            family.name,
            # Local files are named as such; only data that came from the Hub gets a Hub id.
            dataset_name=f"GLUE {task.folder}"
            + (f" (the local file {task.split_files['train']})" if data_args.data_dir else ""),
            dataset_id=None if data_args.data_dir else data_args.dataset_name,
            dataset_config=task.name,
            training_data=f"the {task.folder} training set",
            num_train_available=available.get("train"),
            num_eval_available=sum(available.get(split, 0) for split in task.validation_splits) or None,
            # Evaluated on the task's dev set: its files (--data_dir) or the Hub dataset's validation split(s).
            eval_dataset_name=(
                f"GLUE {task.folder} " + ", ".join(task.split_files[s] for s in task.validation_splits)
                if data_args.data_dir
                else data_args.dataset_name
            ),
            eval_dataset_id=None if data_args.data_dir else data_args.dataset_name,
            eval_metrics={"validation": finite} if finite else None,
            base_model=model_args.model_name_or_path,
            hyperparameters={"max_seq_length": data_args.max_seq_length},
        )
    return metrics


if __name__ == "__main__":
    run_script(main)
