"""Model cards for hf_ctx checkpoints: Hub metadata and a description filled in from the training run.

The templates are Jinja2 Markdown files shipped in the package (`hf_ctx/model_cards/<family>.md`, each extending
`_base.md`), the format of huggingface_hub's own card templates. The YAML header is built with huggingface_hub's
`ModelCardData` and `EvalResult`, so the `model-index` is the one the Hub parses.
"""

import importlib.metadata
import inspect
import logging
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

import datasets
import jinja2
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers.modelcard import TASK_TAG_TO_NAME_MAPPING, make_markdown_table

from ..atomic_files import write_text
from ..remote_code import registered_auto_class, shareable_name
from .families import MODEL_FAMILIES

logger = logging.getLogger(__name__)


# Hub pipeline tag of a model class, by the end of its name.
_PIPELINE_TAGS = {
    "ForSequenceClassification": "text-classification",
    "ForTokenClassification": "token-classification",
    "ForQuestionAnswering": "question-answering",
    "ForMaskedLM": "fill-mask",
    "ForPreTraining": "fill-mask",  # BERT's masked-LM (+ next-sentence) heads
    "ForBiLM": "feature-extraction",  # ELMo is used for its states
    "Model": "feature-extraction",
}
_LABELLED_TASKS = ("text-classification", "token-classification")
_TASK_NAMES = {**TASK_TAG_TO_NAME_MAPPING, "feature-extraction": "Feature Extraction"}

# Entries of `Trainer.evaluate()` results that describe the run, not the model.
_BOOKKEEPING = {"loss", "runtime", "samples_per_second", "steps_per_second", "epoch", "step", "total_flos"}
_SPLIT_PREFIXES = ("eval_", "test_", "predict_")
_METRIC_NAMES = {
    "f1": "F1",
    "accuracy": "Accuracy",
    "precision": "Precision",
    "recall": "Recall",
    "matthews_correlation": "Matthews correlation",
    "pearson": "Pearson correlation",
    "spearmanr": "Spearman correlation",
    "perplexity": "Perplexity",
    "mlm_accuracy": "Masked-LM accuracy",
    "mlm_perplexity": "Masked-LM perplexity",
    "nsp_accuracy": "Next-sentence accuracy",
}

# Config entries every transformers config has; the architecture table shows the family's own fields.
_GENERIC_CONFIG_FIELDS = {"self", "kwargs", "id2label", "label2id", "pad_token_id", "tie_word_embeddings"}

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("hf_ctx", "model_cards"),
    undefined=jinja2.StrictUndefined,  # a variable a template names but the code forgot is an error, not a blank
    keep_trailing_newline=True,
)


def eval_results_from_metrics(
    metrics_by_split: dict[str, dict[str, float]],
    *,
    task_type: str,
    task_name: str,
    dataset_type: str,
    dataset_name: str,
    dataset_config: str | None = None,
) -> list[EvalResult]:
    """One `EvalResult` per scalar metric of each split's `Trainer.evaluate()` output.

    Keys lose their `eval_`/`test_`/`predict_` prefix; the loss and timings are left out (put `perplexity` in
    the metrics of a language model). A NaN or infinite metric is left out with a logged warning.
    """
    results = []
    for split, metrics in metrics_by_split.items():
        for key, value in metrics.items():
            name = next((key[len(p) :] for p in _SPLIT_PREFIXES if key.startswith(p)), key)
            if name in _BOOKKEEPING or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value):  # e.g. a correlation of constant predictions; YAML has no place for it
                logger.warning(f"model card: leaving out metric {key!r} of split {split!r}, which is {value}")
                continue
            results.append(
                EvalResult(
                    task_type=task_type,
                    task_name=task_name,
                    dataset_type=dataset_type,
                    dataset_name=dataset_name,
                    dataset_config=dataset_config,
                    dataset_split=split,
                    metric_type=name,
                    metric_name=_METRIC_NAMES.get(name, name.replace("_", " ").capitalize()),
                    metric_value=round(float(value), 4),
                )
            )
    return results


def build_model_card(
    model_family: str,
    model,
    *,
    model_id: str,
    dataset_name: str,
    dataset_id: str | None = None,
    dataset_config: str | None = None,
    training_data: str | None = None,
    eval_dataset_name: str | None = None,
    eval_dataset_id: str | None = None,
    num_train_examples: int | None = None,
    num_eval_examples: int | None = None,
    num_train_available: int | None = None,
    num_eval_available: int | None = None,
    train_steps: int | None = None,
    train_batch_size: int | None = None,
    eval_metrics: dict[str, dict[str, float]] | None = None,
    hyperparameters: dict | None = None,
    training_log: list[dict] | None = None,
    training_curves: str | None = None,
    base_model: str | None = None,
    pipeline_tag: str | None = None,
    task_name: str | None = None,
    language: str = "en",
    license: str = "apache-2.0",
    tags: tuple[str, ...] = (),
) -> ModelCard:
    """A model card for `model` (an hf_ctx `PreTrainedModel`) from the family's template and the run's facts.

    Args:
        model_family: `"bert"`, `"elmo"` or `"taglm"`: which template.
        model: the trained model; its class and config fill the description and architecture table.
        model_id: Hub repository id (or local name) used in the loading snippets and as the model-index name.
        dataset_name: human name of the training data, e.g. `"CoNLL-2003 (English)"`.
        dataset_id: Hub dataset id of that data (`"eriktks/conll2003"`), listed in the metadata; ignored when
            `None` or a local path.
        dataset_config: dataset configuration, e.g. the GLUE task `"sst2"`.
        training_data: which part of the data was used, as a phrase: `"the SST-2 training set (first 1,000
            examples)"`.
        eval_dataset_name: what `eval_metrics` were measured on, e.g. the validation file `"eng.testa"` or
            `"5% of corpus.txt held out from training"`; by default `dataset_name` (another split of the training
            dataset, named by the keys of `eval_metrics`).
        eval_dataset_id: Hub dataset id of the evaluation data (its configuration is `dataset_config`); by default
            `dataset_id` when `eval_dataset_name` is left out, else none.
        num_train_examples, num_eval_examples: how many examples were used.
        num_train_available, num_eval_available: how many the data had, where only the first
            `num_train_examples` / `num_eval_examples` were used (`--max_train_samples`, `--max_eval_samples`).
        train_steps, train_batch_size: optimizer steps taken and examples per step (all processes and gradient
            accumulation together): the card says how many examples training saw.
        eval_metrics: `{split: Trainer.evaluate() output}`, e.g. `{"validation": metrics}`.
        hyperparameters: name -> value table of the training settings.
        training_log: rows (dicts) of intermediate evaluation results, as `transformers.modelcard.parse_log_history`
            returns them.
        training_curves: the file name of the run's `training_curves.png` beside the card, shown in it; None: none.
        base_model: the checkpoint training started from; listed in the metadata when it is a Hub id. A local path
            is shown as its folder's name only. `None`: the card says the model started from random weights (a
            TagLM tagger: all but its biLM, named by `config.bilm_name_or_path`).
        pipeline_tag: Hub pipeline tag; by default derived from the model class.
        task_name: human task name for the model-index; by default that of the pipeline tag.
        language, license, tags: metadata.

    Returns:
        a `huggingface_hub.ModelCard` (`.save(path)` writes it, `.data` holds the parsed metadata).
    """
    if model_family not in MODEL_FAMILIES:
        raise ValueError(f"unknown model_family {model_family!r}; choose one of {tuple(MODEL_FAMILIES)}")
    model_class = type(model).__name__
    if not _is_hub_id(dataset_id):  # a local folder: the text names the data, the metadata cannot
        dataset_id = None
    if eval_dataset_name is None:  # evaluated on another split of the training data
        eval_dataset_name, eval_dataset_id = dataset_name, dataset_id
    elif not _is_hub_id(eval_dataset_id):
        eval_dataset_id = None
    base_model_id = base_model if _is_hub_id(base_model) else None
    base_model = shareable_name(base_model)  # no local paths in a card that may be published
    starting_point = _starting_point(base_model, model.config)
    amounts = _amounts_used(
        num_train_examples, num_train_available, num_eval_examples, num_eval_available, train_steps, train_batch_size
    )
    if pipeline_tag is None:
        pipeline_tag = next((tag for end, tag in _PIPELINE_TAGS.items() if model_class.endswith(end)), None)
    if task_name is None:
        task_name = _TASK_NAMES.get(pipeline_tag, pipeline_tag)
    eval_results = eval_results_from_metrics(
        eval_metrics or {},
        task_type=pipeline_tag or model_family,
        task_name=task_name,
        dataset_type=eval_dataset_id or eval_dataset_name,
        dataset_name=eval_dataset_name,
        dataset_config=dataset_config if eval_dataset_id else None,
    )
    hub_datasets = [d for d in dict.fromkeys([dataset_id, eval_dataset_id]) if d]
    card_data = ModelCardData(
        language=language,
        license=license,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=["hf_ctx", model_family, *tags],
        datasets=hub_datasets or None,
        metrics=sorted({r.metric_type for r in eval_results}) or None,
        base_model=base_model_id,
        model_name=model_id,
        eval_results=eval_results or None,
    )
    config = model.config
    parameters = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    content = _TEMPLATES.get_template(f"{model_family}.md").render(
        card_data=card_data.to_yaml(),
        model_id=model_id,
        model_class=model_class,
        auto_class=registered_auto_class(type(model)) or "AutoModel",
        model_type=config.model_type,
        config=config,
        config_class=type(config).__name__,
        architecture=_architecture(config),
        labels=[config.id2label[i] for i in sorted(config.id2label)] if pipeline_tag in _LABELLED_TASKS else [],
        parameters=f"{parameters:,}" + (f" ({trainable:,} trained)" if trainable != parameters else ""),
        pipeline_tag=pipeline_tag,
        task_name=task_name,
        dataset_name=dataset_name,
        dataset_id=dataset_id,
        dataset_config=dataset_config,
        training_data=training_data,
        eval_dataset_name=eval_dataset_name,
        eval_dataset_id=eval_dataset_id,
        num_train_examples=num_train_examples,
        num_eval_examples=num_eval_examples,
        hyperparameters=hyperparameters or {},
        training_log=make_markdown_table(training_log) if training_log else "",
        training_curves=training_curves,
        eval_results=eval_results,
        base_model=base_model,
        starting_point=starting_point,
        amounts_used=amounts,
        bilm_layers=_bilm_layer_words(model.config),
        versions=_versions(),
    )
    # Block tags on lines of their own leave runs of blank lines; Markdown needs at most one.
    return ModelCard(re.sub(r"\n{3,}", "\n\n", content))


def write_model_card(output_dir: str | os.PathLike, model_family: str, model, **facts) -> ModelCard:
    """Build the card (see `build_model_card` for `facts`) and save it as `output_dir/README.md`."""
    card = build_model_card(model_family, model, **facts)
    write_text(Path(output_dir) / "README.md", str(card))
    return card


def _starting_point(base_model: str | None, config) -> str:
    """Where the weights started, in words: the named checkpoint, or random initialisation."""
    if base_model:
        return f"`{base_model}`"
    bilm = getattr(config, "bilm_name_or_path", None)
    if getattr(config, "bilm_config", None):
        source = f"`{shareable_name(bilm)}`" if bilm else "a pretrained biLM"
        return f"random initialisation, except the frozen biLM, loaded from {source}"
    return "random initialisation (no pretrained weights)"


def _count(used: int, available: int | None) -> str:
    """'1,000' or 'the first 100 of 277'."""
    if available is not None and available > used:
        return f"the first {used:,} of {available:,}"
    return f"{used:,}"


def _amounts_used(num_train, train_available, num_eval, eval_available, steps, batch_size) -> list[str]:
    """Sentences saying how much data the run used: N of M examples, and steps x batch = examples seen."""
    sentences = []
    if num_train is not None:
        sentence = f"Training examples: {_count(num_train, train_available)}"
        if steps is not None and batch_size:
            seen = steps * batch_size
            sentence += f"; {steps:,} steps of {batch_size:,} examples saw {seen:,} examples"
            if num_train:
                passes = float(f"{seen / num_train:.3g}")
                sentence += f" ({passes:g} pass{'' if passes == 1 else 'es'} over them)"
        sentences.append(sentence + ".")
    elif steps is not None and batch_size:
        sentences.append(
            f"Training: {steps:,} steps of {batch_size:,} examples, {steps * batch_size:,} examples seen."
        )
    if num_eval is not None:
        sentences.append(f"Evaluation examples: {_count(num_eval, eval_available)}.")
    return sentences


def _bilm_layer_words(config) -> str:
    """TagLM's `bilm_layers` in words: [-1] -> "LSTM layer 2 of 2, the top one"."""
    layers, bilm = getattr(config, "bilm_layers", None), getattr(config, "bilm_config", None)
    if not layers or not bilm:
        return ""
    num_lstm = bilm.get("lstm", {}).get("n_layers", 2) if isinstance(bilm, dict) else bilm.lstm["n_layers"]
    words = []
    for layer in layers:
        index = layer % (num_lstm + 1)
        if index == 0:
            words.append("the character-CNN layer below the LSTMs")
        else:
            words.append(f"LSTM layer {index} of {num_lstm}" + (", the top one" if index == num_lstm else ""))
    return " and ".join(words)


def _is_hub_id(name: str | None) -> bool:
    if name is None or os.path.exists(name):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _architecture(config) -> list[tuple[str, str]]:
    """(field, value) of the config's own constructor arguments, option groups (dicts) one row per option;
    nested configs (dicts with a `model_type`) are left to config.json."""
    rows = []
    for name in inspect.signature(type(config).__init__).parameters:
        value = getattr(config, name, None)
        if name in _GENERIC_CONFIG_FIELDS or (isinstance(value, dict) and "model_type" in value):
            continue
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for key, item in items:
            shown = "`None`" if item is None else str(list(item) if isinstance(item, tuple) else item)
            rows.append((name if key is None else f"{name}.{key}", shown))
    return rows


def _versions() -> dict[str, str]:
    packages = ("hf_ctx", "transformers", "torch", "tokenizers", "huggingface_hub")
    return {package: importlib.metadata.version(package) for package in packages}


# --- how a card names the data (never by local paths) ---------------------------------------------------------


def training_data_name(dataset_name: str | None, train_files: str | Iterable[str] | None) -> str:
    """How a model card names the training data: the `datasets` dataset, else "the local file(s) ..." with the
    training files' names (never their local paths), so that the card says where the data came from."""
    if dataset_name is not None:
        return shareable_name(dataset_name)  # a dataset saved to disk: its folder's name
    files = [train_files] if isinstance(train_files, str) else list(train_files or ())
    return f"the local file{'s' if len(files) > 1 else ''} {_file_names(files)}"


def _file_names(files: str | Iterable[str]) -> str:
    """'a.txt, b.txt': the names of files, never their local paths."""
    return ", ".join(Path(f).name for f in ([files] if isinstance(files, str) else files))


def evaluation_data(
    dataset_name: str | None,
    validation_files: str | Iterable[str] | None,
    train_files: str | Iterable[str] | None = None,
    validation: datasets.Dataset | None = None,
    validation_split_percentage: float | None = None,
) -> dict[str, str]:
    """How a model card names the data a run was evaluated on: `finish_run`'s `eval_dataset_name` (and
    `eval_dataset_id` for a split of a Hub dataset).

    The validation files' names when there are some; else, when `validation` (the validation data as loaded) is
    a part of the training data that `hold_out_validation` set aside, that part ("5% of corpus.txt held out from
    training"); else the `datasets` dataset's own validation split. Empty when there is no evaluation data.
    """
    if validation_files:
        return {"eval_dataset_name": _file_names(validation_files)}
    held_out = validation is not None and str(getattr(validation, "split", None)) != "validation"
    if held_out:
        source = shareable_name(dataset_name) if dataset_name is not None else _file_names(train_files or ())
        return {"eval_dataset_name": f"{validation_split_percentage:g}% of {source} held out from training"}
    if dataset_name is not None:  # the card lists `eval_dataset_id` only when it is a Hub id
        return {"eval_dataset_name": shareable_name(dataset_name), "eval_dataset_id": dataset_name}
    return {}  # no evaluation data
