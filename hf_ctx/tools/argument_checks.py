"""Checks of the example scripts' arguments that tie several together or need more than the option's own value
(each option's value is checked by its kind, `hf_ctx.tools.option_kinds`): a biLM that must be an ELMo, options
that override each other, a run that would train nothing, mixed precision the device cannot run, and a
`--push_to_hub` the Hub would refuse."""

from pathlib import Path

from .errors import hub_error_message
from .paths import check_elmo_checkpoint

# The examples' arguments that name a checkpoint, config or tokenizer: a Hub id or a local path.
PATH_ARGUMENTS = ("model_name_or_path", "config_name", "tokenizer_name", "bilm_name_or_path")


def check_bilm_argument(*argument_groups) -> None:
    """`--bilm_name_or_path` (its kind checked that it exists) must hold an ELMo biLM, not another model."""
    for group in argument_groups:
        if getattr(group, "bilm_name_or_path", None) is not None:
            check_elmo_checkpoint(group.bilm_name_or_path, "--bilm_name_or_path", "a biLM to build on")


def check_training_arguments(training_args) -> None:
    """Refuse `TrainingArguments` that would train nothing without a word (`--num_train_epochs 0`, `--learning_rate
    0`: every step leaves the weights as they were), and `--batch_eval_metrics`, which the scripts' metrics do not
    take (before: transformers' error about a `compute_result` argument, once the model was built). (Each
    option's own values are checked by its kind, `hf_ctx.tools.option_kinds.TRAINING_OPTION_KINDS`.)"""
    if training_args.batch_eval_metrics:
        raise ValueError(
            "--batch_eval_metrics: the example scripts score the whole evaluation set at once (entity F1, SQuAD's "
            "exact match, MCC need every prediction); leave it out (--eval_accumulation_steps N moves predictions "
            "to the CPU every N steps instead)"
        )
    if training_args.do_train and training_args.max_steps <= 0 and training_args.num_train_epochs == 0:
        raise ValueError("--num_train_epochs 0 trains nothing; give a number of epochs above 0, or --max_steps")
    if training_args.do_train and training_args.learning_rate == 0:
        raise ValueError(
            "--learning_rate 0 trains nothing (every step leaves the weights as they were); give a rate above 0, "
            "or leave --do_train out to evaluate the model as it is"
        )


def check_conflicting_arguments(pairs, *argument_groups) -> None:
    """Refuse two arguments given together when the first makes the script ignore the second (e.g.
    `--model_name_or_path` loads a finished config, so `--config_name` would be silently unused). `pairs`:
    (argument, argument it overrides) names of the examples' argument dataclasses, both defaulting to None."""
    given = {}
    for group in argument_groups:
        given.update({name: value for name, value in vars(group).items() if value is not None})
    for first, second in pairs:
        if first in given and second in given:
            raise ValueError(
                f"--{first} and --{second} cannot be used together: with --{first} the run ignores "
                f"--{second}; give one of them"
            )


def check_mixed_precision(training_args) -> None:
    """Refuse `--fp16` on a CPU, where it has no effect: accelerate's float16 autocast and loss scaling run on
    GPUs and other accelerators only, so the run would train in float32, bitwise as without the option.
    (`--bf16` does take effect on a CPU: bfloat16 autocast.)"""
    if training_args.fp16 and training_args.device.type == "cpu":
        raise ValueError(
            "--fp16 has no effect on a CPU (float16 mixed precision needs a GPU): the run would train in float32 "
            "all the same. Leave out --fp16, or pass --bf16 for bfloat16 mixed precision on the CPU"
        )


def check_push_to_hub(training_args) -> None:
    """`--push_to_hub`: the Hub reached and the token allowed to write the repository (`--hub_model_id`, else the
    output folder's name), before anything is loaded. The repository is created here, as the Trainer creates it
    when it starts, so that an offline machine, a refused or missing token, or a repository the token cannot
    write is one line now rather than a traceback before training (or a lost upload after it)."""
    if not training_args.push_to_hub or training_args.process_index != 0:
        return
    from huggingface_hub import HfApi, constants

    repo_id = training_args.hub_model_id or Path(training_args.output_dir).absolute().name
    if constants.HF_HUB_OFFLINE:
        raise OSError(
            f"--push_to_hub {repo_id}: the Hub is not reached offline (HF_HUB_OFFLINE is set): unset HF_HUB_OFFLINE, "
            f"or drop --push_to_hub (the run saves its model in --output_dir, and `hf upload {repo_id} OUTPUT_DIR` "
            "publishes it later)"
        )
    try:
        HfApi(token=training_args.hub_token).create_repo(
            repo_id, private=training_args.hub_private_repo, exist_ok=True
        )
    except Exception as error:
        answer = hub_error_message(error)
        if answer is None:
            raise
        raise OSError(f"--push_to_hub {repo_id}: {answer}") from None
