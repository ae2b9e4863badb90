"""The end of a training run: save the checkpoint with its model card, and publish it on the Hub.

What is published is exactly what `save_pretrained` writes (config with `auto_map`, safetensors weights, the
source files of hf_ctx's classes, tokenizer files) plus the card, in one commit. `Trainer.push_to_hub` would
upload the whole output folder (training state, `training_args.bin`) and replace the card with its own.
"""

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, ModelCard
from huggingface_hub.errors import HfHubHTTPError
from transformers import Trainer
from transformers.modelcard import extract_hyperparameters_from_trainer

from ..data.atomic_write import write_text
from .errors import hub_error_message
from .families import model_family
from .model_card import RunFacts, build_model_card, optimizer_in_words, training_results
from .plots import training_curves, write_training_curves

logger = logging.getLogger(__name__)

# The metrics a run's one-line summary shows, of each split's Trainer output.
_SUMMARY_METRICS = ("f1", "accuracy", "exact_match", "matthews_correlation", "pearson", "perplexity", "mlm_accuracy")
# The picture of a run's loss and metrics that `finish_run` writes beside the checkpoint (and the card shows).
TRAINING_CURVES_FILE = "training_curves.png"


def push_checkpoint(
    model,
    tokenizer,
    card: ModelCard,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str = "Upload hf_ctx checkpoint",
    extra_files=(),
):
    """Upload `model` and `tokenizer` as `save_pretrained` writes them, with `card` as README.md and the files
    `extra_files` (paths; the card's pictures), in one commit.

    Creates the repository if needed. Returns the `CommitInfo` of the upload.
    """
    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    with tempfile.TemporaryDirectory() as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        card.save(Path(staging) / "README.md")
        for extra in extra_files:
            shutil.copyfile(extra, Path(staging) / Path(extra).name)
        # `delete_patterns`: a training_args.bin that an earlier push (transformers' own Trainer) left in the
        # repository holds a Hub token; it goes.
        try:
            return api.upload_folder(
                repo_id=repo_id,
                folder_path=staging,
                commit_message=commit_message,
                revision=revision,
                delete_patterns=["training_args.bin"],
            )
        except Exception as error:
            answer = hub_error_message(error)
            if answer is None:
                raise
            files = sorted(path.name for path in Path(staging).iterdir())
            # A commit lands whole or not at all; an answer the connection lost leaves which one unknown.
            landed = (
                "none of them was uploaded: the repository is as it was"
                if isinstance(error, HfHubHTTPError)
                else f"the Hub did not confirm the commit: the repository holds all of them or none ({repo_id}'s "
                "commits on the Hub say which)"
            )
            raise OSError(
                f"pushing {len(files)} files ({', '.join(files)}) to {repo_id} failed: {answer}; {landed}"
            ) from None


def save_run(
    trainer: Trainer,
    model_args,
    data_args,
    metrics: Mapping[str, float],
    data: Mapping[str, Any] | None = None,
    available: Mapping[str, int | None] | None = None,
    **card,
) -> RunFacts:
    """Save the trained model, its tokenizer, its training curves and its model card in `output_dir` (no push);
    returns what the card says, for `finish_run` to complete.

    An example script calls it as soon as training (and evaluation) is over, before it predicts or scores a test
    file, so that nothing after training can lose the trained model. Call it on every process (saving may need
    all of them); the tokenizer is the Trainer's `processing_class`. The card reads its facts from the run:

    - the family of the Trainer's model, and `model_args.model_name_or_path` as the starting point (`None`: random
      weights);
    - the data named from `data_args` (`RunFacts.name_data`: `--dataset_name`, `--dataset_config_name`, the
      files, the held-out share) with `data["validation"]` as loaded;
    - `data`: split -> the examples the run used ("train", "validation*", "test*"; MNLI's two dev sets add up),
      each counted as so many of `available[split]`;
    - `metrics`: the script's Trainer metrics, `eval_*` the validation scores and `predict_*` the test scores;
    - `card`: `RunFacts` fields only the script knows (`hyperparameters`, `created`, `data_format`, a
      `base_model` other than `--model_name_or_path`, a GLUE task's names), over what the arguments gave;
    - what the Trainer knows: steps, batch size, the training log (`complete_from_trainer`).
    """
    if trainer.processing_class is None:
        raise ValueError("save_run saves the Trainer's processing_class with the model; the Trainer has none")
    model = trainer.accelerator.unwrap_model(trainer.model)
    facts = RunFacts(
        model_family(model.config),
        base_model=model_args.model_name_or_path,
        dataset_config=getattr(data_args, "dataset_config_name", None),
        data_format=card.pop("data_format", None),  # named beside the files' names
    )
    unknown = sorted(set(card) - {f.name for f in dataclasses.fields(RunFacts)})
    if unknown:
        raise TypeError(f"save_run: {unknown} are not RunFacts fields (hf_ctx.tools.model_card.RunFacts)")
    data, available = data or {}, available or {}
    facts.name_data(data_args, data.get("validation"))
    for name, value in card.items():
        setattr(facts, name, value)
    for split, examples in data.items():
        part = "train" if split == "train" else "test" if split.startswith("test") else "validation"
        facts.count(part, dataset_size(examples), available.get(split))
    add_scores(facts, metrics)
    # `_internal_call=True` is how the Trainer saves without calling its own `push_to_hub`, which would upload
    # the whole output folder with a card of its own.
    trainer.save_model(trainer.args.output_dir, _internal_call=True)
    if trainer.is_world_process_zero():
        _write_card(trainer, facts)
    return facts


def add_scores(facts: RunFacts, metrics: Mapping[str, float]) -> None:
    """The validation (`eval_*`) and test (`predict_*`) scores of a script's Trainer `metrics` into `facts`; a
    prediction on the validation split (`predict_validation_*`) is neither."""
    facts.add_metrics("validation", {k: v for k, v in metrics.items() if k.startswith("eval_")})
    test = {k: v for k, v in metrics.items() if k.startswith("predict_") and not k.startswith("predict_validation_")}
    facts.add_metrics("test", test)


def _write_card(trainer: Trainer, facts: RunFacts) -> ModelCard:
    """`training_curves.png` and the card (README.md) in `output_dir`, from `facts` and the Trainer."""
    args = trainer.args
    model = trainer.accelerator.unwrap_model(trainer.model)
    curves_file = os.path.join(args.output_dir, TRAINING_CURVES_FILE)
    # Metrics a script measured without logging them (evaluated while predicting) end their curves.
    evaluated = dict(facts.parts["validation"].metrics) if "validation" in facts.parts else {}
    drawn = write_training_curves(
        curves_file, training_curves(trainer.state.log_history, evaluated, trainer.state.global_step)
    )
    facts.training_curves = TRAINING_CURVES_FILE if drawn else None
    card = build_model_card(model, complete_from_trainer(facts, trainer), model_id=hub_repo_id(trainer))
    write_text(os.path.join(args.output_dir, "README.md"), str(card))
    return card


def hub_repo_id(trainer: Trainer) -> str:
    """The Hub repository of a run: `--hub_model_id`, else the output folder's name."""
    return trainer.hub_model_id or trainer.args.hub_model_id or Path(trainer.args.output_dir).absolute().name


def finish_run(trainer: Trainer, facts: RunFacts, metrics: Mapping[str, float]) -> ModelCard | None:
    """Complete the model card that `save_run` wrote with the scores the script measured since (`metrics`: the
    test scores, a validation split evaluated while predicting) and push the checkpoint with `--push_to_hub`.

    Call it at the end of an example script, on every process, with the `RunFacts` that `save_run` returned.
    The Hub repository is `--hub_model_id` (default: the output folder's name), with `--hub_token`,
    `--hub_private_repo` and `--hub_revision`. `training_curves.png` (the training loss and each evaluation metric
    against steps, `hf_ctx.tools.plots`) is written beside the checkpoint, shown in the card and pushed with it.

    Returns the card on the main process, `None` on the others.
    """
    add_scores(facts, metrics)
    if not trainer.is_world_process_zero():
        return None
    card = _write_card(trainer, facts)
    logger.info(run_summary(facts))
    args = trainer.args
    if args.push_to_hub:
        # Checkpoint pushes still running would otherwise land after, and over, the final one.
        if trainer.push_in_progress is not None:
            trainer.push_in_progress.wait_until_done()
        curves_file = os.path.join(args.output_dir, TRAINING_CURVES_FILE)
        repo_id = hub_repo_id(trainer)
        try:
            push_checkpoint(
                trainer.accelerator.unwrap_model(trainer.model),
                trainer.processing_class,
                card,
                repo_id,
                token=args.hub_token,
                private=args.hub_private_repo,
                revision=args.hub_revision,
                commit_message="End of training",
                extra_files=[curves_file] if facts.training_curves else (),
            )
        except OSError as error:
            # The upload, not the model, is lost: say where the model is and how to publish it later, without
            # the training state (training_args.bin holds the token).
            raise OSError(
                f"{error}. The trained model and its card are saved in {args.output_dir}; publish them with `hf "
                f"upload {repo_id} {args.output_dir} --exclude 'checkpoint-*' --exclude training_args.bin`"
            ) from error
    return card


def complete_from_trainer(facts: RunFacts, trainer: Trainer) -> RunFacts:
    """`facts` with what the Trainer knows added: steps, examples per step (all processes and gradient
    accumulation together), the training log (`training_results`), its hyperparameters (the optimizer in words;
    the script's own keep precedence), and the sizes of its datasets where the script counted none itself."""
    args = trainer.args
    facts.training_log = training_results(trainer.state.log_history)
    facts.train_steps = trainer.state.global_step or None
    facts.train_batch_size = args.train_batch_size * args.gradient_accumulation_steps * args.world_size
    from_trainer = {**extract_hyperparameters_from_trainer(trainer), "optimizer": optimizer_in_words(args)}
    facts.hyperparameters = {**from_trainer, **facts.hyperparameters}
    for split, dataset in (("train", trainer.train_dataset), ("validation", trainer.eval_dataset)):
        part = facts.parts.get(split)
        if (part is None or part.used is None) and dataset_size(dataset) is not None:
            facts.part(split).used = dataset_size(dataset)
    return facts


def run_summary(facts: RunFacts) -> str:
    """One line of the run's scores by split, e.g. "validation (dev.tsv): accuracy 0.9102; test (test.txt): f1
    0.8841", and whether the data was generated."""
    scores = []
    for split, part in facts.parts.items():
        shown = [
            f"{name} {value:.4f}"
            for name, value in ((key.partition("_")[2], value) for key, value in part.metrics.items())
            # MNLI's two dev sets: eval_matched_accuracy, eval_mismatched_accuracy
            if name.removeprefix("matched_").removeprefix("mismatched_") in _SUMMARY_METRICS
            and isinstance(value, float)
        ]
        if shown:
            scores.append(f"{split}{f' ({part.name})' if part.name else ''}: {', '.join(shown)}")
    generated = f"; the data is generated ({facts.generated})" if facts.generated else ""
    return f"scores {'; '.join(scores) or 'none (no evaluation)'}{generated}"


def dataset_size(dataset) -> int | None:
    """Number of examples; None for no dataset, a streamed one (no length) or several (a dict of them)."""
    if dataset is None or isinstance(dataset, dict):
        return None
    try:
        return len(dataset)
    except TypeError:
        return None
