#!/usr/bin/env python
"""Fine-tune and evaluate an extractive question-answering model (SQuAD v1.1 or v2.0) with hf_ctx BERT.

From the official JSON files (offline) or the Hub (`--dataset_name squad` / `squad_v2`, for users online):

    python examples/run_qa.py --model_name_or_path runs/bert-mini \\
        --train_file train-v1.1.json --validation_file dev-v1.1.json \\
        --do_train --do_eval --output_dir runs/squad
    python examples/run_qa.py --model_type bert --config_name mini --tokenizer_name runs/wordpiece-8k ...  # random init
    python examples/run_qa.py --model_name_or_path runs/bert-mini --dataset_name squad_v2 \\
        --version_2_with_negative ...                                                            # SQuAD 2.0, Hub
    python examples/run_qa.py --model_name_or_path runs/squad --validation_file dev-v1.1.json \\
        --do_eval --output_dir runs/squad-eval                                                  # evaluate only

As transformers' `run_qa.py`: each question and its context become `[CLS] question [SEP] context [SEP]` windows
of `--max_seq_length` tokens overlapping by `--doc_stride` tokens; the model scores every token as the answer's
start and end, and the best span over the windows (`--n_best_size` starts by ends, at most `--max_answer_length`
tokens; with `--version_2_with_negative` the empty answer competes through the [CLS] scores and
`--null_score_diff_threshold`) is the answer. Evaluation writes `predictions.json` ({id: answer}, what the
official evaluation script reads) and `nbest_predictions.json` (and `null_odds.json` for v2.0) to
`--output_dir`, and reports exact match and F1 as the official scripts define them (`load_metric("squad")`).
`--do_predict` answers the questions of `--test_file` (a SQuAD JSON file; answers not needed) into
`predict_predictions.json` (and `predict_nbest_predictions.json`), scored where the file has answers.

`--model_name_or_path` is an hf_ctx BERT checkpoint (pretrained: a new QA head is added) or a QA checkpoint; a
transformers BERT folder evaluates as well (convert it with `hf-ctx convert-bert` to fine-tune it here).
Training on a question whose answer no window holds whole would teach "no answer": such questions are
dropped, and the log says how many.
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

import logging
from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding

from hf_ctx.data import squad
from hf_ctx.metrics import load_metric
from hf_ctx.tools import hub, scripts
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.families import check_tokenizer_fits, model_family
from hf_ctx.tools.question_answering import postprocess_predictions
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

logger = logging.getLogger(__name__)
# (argument, argument it makes the script ignore): refused together.
IGNORED_TOGETHER = [
    *scripts.MODEL_BUILDING_IGNORED_TOGETHER,
    ("train_file", "dataset_name"),
    ("validation_file", "dataset_name"),
]


@dataclass
class ModelArguments(scripts.ModelBuildingArguments):
    """How the model is built: the options every fine-tuning script shares (`ModelBuildingArguments`)."""

    model_type: str | None = scripts.model_type_field("question_answering")
    config_name: str | None = scripts.config_name_field("question_answering")


@dataclass
class DataArguments:
    train_file: str | None = field(
        default=None,
        metadata={"help": "SQuAD JSON training file", "kind": kinds.EXISTING_FILE, "read_by": ("do_train",)},
    )
    validation_file: str | None = field(
        default=None,
        metadata={"help": "SQuAD JSON evaluation file", "kind": kinds.EXISTING_FILE, "read_by": ("do_eval",)},
    )
    test_file: str | None = field(
        default=None,
        metadata={
            "help": "--do_predict: a SQuAD JSON file of questions to answer (answers not needed); writes "
            "predict_predictions.json",
            "kind": kinds.EXISTING_FILE,
            "read_by": ("do_predict",),
        },
    )
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "without files: a Hub dataset in the squad layout ('squad', 'squad_v2')",
            "kind": kinds.DATASET,
        },
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "its configuration", "kind": kinds.TEXT})
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD 2.0: some questions have no answer (the empty prediction)"}
    )
    max_seq_length: int = field(
        default=384, metadata={"help": "tokens per window: question, context and 3 specials", "kind": kinds.LENGTH}
    )
    doc_stride: int = field(
        default=128,
        metadata={
            "help": "tokens shared by consecutive windows of one context",
            "kind": kinds.count_or_zero("windows that do not overlap"),
        },
    )
    n_best_size: int = field(
        default=20, metadata={"help": "best starts and ends tried per window", "kind": kinds.COUNT}
    )
    max_answer_length: int = field(default=30, metadata={"help": "longest answer, in tokens", "kind": kinds.LENGTH})
    null_score_diff_threshold: float = field(
        default=0.0,
        metadata={
            "help": "v2.0: answer '' when the null score beats the best span by more than this",
            "kind": kinds.NUMBER,
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "use only the first N training questions", "kind": kinds.COUNT}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "use only the first N evaluation questions", "kind": kinds.COUNT}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "use only the first N questions of --test_file", "kind": kinds.COUNT}
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


class QuestionAnsweringTrainer(CtxTrainer):
    """`CtxTrainer` whose evaluation turns the windows' start and end logits into answers, writes them to
    `--output_dir` and scores them with the SQuAD metric where the questions have answers (transformers'
    `trainer_qa.py`). `questions` and `windows`: split -> the questions and their windows ("validation" for
    `evaluate`, "test" for `predict`); `options`: the script's `DataArguments`."""

    def __init__(self, *args, questions=None, windows=None, options: DataArguments | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.questions, self.windows, self.options = questions or {}, windows or {}, options
        self.metric = load_metric("squad_v2" if options.version_2_with_negative else "squad")

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None, **kwargs):
        output = super().evaluation_loop(dataloader, description, False, ignore_keys, **kwargs)
        prefix = kwargs.get("metric_key_prefix", "eval")
        scores = self.answer(output.predictions, "test" if prefix == "predict" else "validation")
        output.metrics.update({f"{prefix}_{name}": value for name, value in scores.items()})
        return output

    def answer(self, logits, split: str) -> dict[str, float]:
        """Answers to `split`'s questions from their windows' logits: written out (test answers as
        predict_predictions.json), then scored where the questions have answers."""
        examples, features, options = self.questions[split], self.windows[split], self.options
        index = {qid: i for i, qid in enumerate(examples["id"])}
        predictions, n_best, null_odds = postprocess_predictions(
            list(zip(examples["id"], examples["context"])),
            [(index[qid], offsets) for qid, offsets in zip(features["example_id"], features["offset_mapping"])],
            *logits[:2],
            n_best_size=options.n_best_size,
            max_answer_length=options.max_answer_length,
            version_2_with_negative=options.version_2_with_negative,
            null_score_diff_threshold=options.null_score_diff_threshold,
        )
        if self.is_world_process_zero():
            output_dir, file_prefix = Path(self.args.output_dir), "predict_" if split == "test" else ""
            squad.write_json(output_dir / f"{file_prefix}predictions.json", predictions)
            squad.write_json(output_dir / f"{file_prefix}nbest_predictions.json", n_best)
            if options.version_2_with_negative:
                squad.write_json(output_dir / f"{file_prefix}null_odds.json", null_odds)
        if split == "test" and not any(answers["text"] for answers in examples["answers"]):
            return {}  # questions without answers: nothing to score
        inputs = squad.metric_inputs(predictions, examples, options.version_2_with_negative)
        return self.metric.compute(**inputs)


# The script's options, the training arguments last (as `--help` shows them).
ARGUMENT_CLASSES = (ModelArguments, DataArguments, CtxTrainingArguments)


def encode_windows(raw: dict, sources: dict, tokenizer, data_args: DataArguments, training_args) -> dict:
    """Each split's questions as token windows: training windows (without the unanswerable ones) and
    evaluation windows with their context offsets."""
    windows = {}
    window_args = {
        "tokenizer": tokenizer,
        "max_seq_length": data_args.max_seq_length,
        "doc_stride": data_args.doc_stride,
    }
    with training_args.main_process_first(desc="tokenizing"):
        splits = [("train", squad.encode_for_training), ("validation", squad.encode_for_evaluation)]
        for split, encode in [*splits, ("test", squad.encode_for_evaluation)]:
            if split in raw:
                windows[split] = raw[split].map(
                    encode,
                    batched=True,
                    remove_columns=raw[split].column_names,
                    num_proc=data_args.preprocessing_num_workers,
                    fn_kwargs={**window_args, "source": sources[split]},
                    desc=f"{split} windows",
                )
        if "train" in windows:
            windows["train"] = squad.drop_unanswerable_windows(windows["train"], len(raw["train"]), sources["train"])
    return windows


def build_model(model_args: ModelArguments, tokenizer):
    if model_args.model_name_or_path is not None:
        return AutoModelForQuestionAnswering.from_pretrained(
            model_args.model_name_or_path,
            cache_dir=model_args.cache_dir,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            **model_args.checkpoint_overrides(),
        )
    return AutoModelForQuestionAnswering.from_config(
        scripts.new_model_config(model_args, "question_answering", tokenizer)
    )


def answer_test_questions(trainer, windows, source) -> dict[str, float]:
    """--do_predict: answer the test questions (the trainer's evaluation loop writes predict_predictions.json);
    their scores, recorded, where the questions have answers to score against, else {}."""
    metrics = trainer.predict(windows, metric_key_prefix="predict").metrics
    logger.info("wrote the answers to %s's questions to predict_predictions.json", source)
    if "predict_f1" not in metrics:  # questions without answers: nothing scored
        return {}
    scripts.record_metrics(trainer, "predict", metrics)
    return metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = scripts.parse_args_and_set_up(
        ARGUMENT_CLASSES,
        argv,
        logger,
        ignored_together=IGNORED_TOGETHER,
    )
    scripts.apply_gpu_defaults(training_args, argv)
    scripts.check_trained_for_the_task(model_args, training_args, "question answering", "ForQuestionAnswering")

    wanted = {"train": training_args.do_train, "validation": training_args.do_eval, "test": training_args.do_predict}
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    if wanted["test"] and not files["test"]:
        raise ValueError("--do_predict needs --test_file, a SQuAD JSON file of questions to answer")
    raw = squad.load_squad(
        {split: path for split, path in files.items() if wanted[split]},
        data_args.dataset_name,
        data_args.dataset_config_name,
        data_args.version_2_with_negative,
        cache_dir=model_args.cache_dir,
    )
    for split in ("train", "validation"):
        if wanted[split] and split not in raw:
            raise ValueError(
                f"{scripts.step_option(training_args, split)} needs {split} data: --{split}_file, or a "
                f"--dataset_name with a {split} split"
            )
    raw, available = scripts.keep_first_examples({split: raw[split] for split in wanted if wanted[split]}, data_args)

    tokenizer = scripts.fine_tuning_tokenizer(model_args)
    model = build_model(model_args, tokenizer)
    if training_args.do_train:
        model_family(model.config)  # the card describes hf_ctx models; a transformers BERT only evaluates here
    new_model = model_args.model_name_or_path is None  # random weights: the rate of a model from scratch
    scripts.apply_learning_rate_default(training_args, argv, model.config, "question_answering", new_model)
    tokenizer_source = model_args.tokenizer_name or model_args.model_name_or_path
    check_tokenizer_fits(model.config, tokenizer, data_args.max_seq_length, tokenizer_source)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters")

    sources = {split: files[split] or f"{data_args.dataset_name} ({split})" for split in wanted}
    windows = encode_windows(raw, sources, tokenizer, data_args, training_args)
    pad_to = scripts.padding_multiple(data_args.pad_to_multiple_of, training_args)
    trainer = QuestionAnsweringTrainer(
        model=model,
        args=training_args,
        train_dataset=windows.get("train"),
        eval_dataset=windows.get("validation"),
        processing_class=tokenizer,
        # The Trainer drops the columns the model does not take (example_id, offset_mapping) before collating.
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to),
        questions=raw,
        windows=windows,
        options=data_args,
    )
    metrics = scripts.train_and_evaluate(trainer)
    if training_args.do_train:  # saved before answering the test questions: nothing after training can lose it
        settings = ("max_seq_length", "doc_stride", "version_2_with_negative")
        facts = hub.save_run(
            trainer,
            model_args,
            data_args,
            metrics,
            raw,  # questions, not the windows the Trainer saw
            available,
            data_format="SQuAD v2.0" if data_args.version_2_with_negative else "SQuAD v1.1",
            hyperparameters={name: getattr(data_args, name) for name in settings},
        )
    with scripts.after_saving(trainer, training_args.do_train):
        if "test" in windows:
            metrics.update(answer_test_questions(trainer, windows["test"], data_args.test_file))
    if training_args.do_train:
        hub.finish_run(trainer, facts, metrics)
    return metrics


if __name__ == "__main__":
    run_script(main)
