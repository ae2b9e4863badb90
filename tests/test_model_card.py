"""Model cards: Hub metadata that huggingface_hub's own parsers accept, the run's facts in the text, and
loading snippets that work."""

import configparser
import fnmatch
import re
from importlib import resources
from pathlib import Path

import pytest
from huggingface_hub import EvalResult, ModelCard, metadata_eval_result, metadata_load
from huggingface_hub.repocard_data import model_index_to_eval_results
from tiny_checkpoints import (
    bert_crf_tagger,
    bert_pretraining,
    bert_token_classifier,
    elmo_bilm,
    elmo_crf_tagger,
    elmo_token_classifier,
    taglm,
)

from hf_ctx.tools.model_card import MODEL_FAMILIES, build_model_card, eval_results_from_metrics, write_model_card

REPO = Path(__file__).resolve().parents[1]
SECTIONS = [
    "## Intended use",
    "## How to load",
    "## Training data",
    "## Training procedure",
    "## Evaluation",
    "## Limitations and bias",
]
# (family, builder) of the kinds of checkpoint the examples publish.
CASES = [
    ("bert", bert_pretraining),
    ("bert", bert_token_classifier),
    ("elmo", elmo_bilm),
    ("elmo", elmo_token_classifier),
    ("taglm", taglm),
    ("bert", bert_crf_tagger),
    ("elmo", elmo_crf_tagger),
]
CASE_IDS = [build.__name__ for _, build in CASES]

NER_FACTS = dict(
    dataset_name="CoNLL-2003 (English)",
    dataset_id="eriktks/conll2003",
    training_data="the original `eng.train` file, IOB1 tags converted to IOB2",
    num_train_examples=14041,
    num_eval_examples=3250,
    eval_metrics={
        "validation": {
            "eval_loss": 0.1,
            "eval_f1": 0.91234567,
            "eval_precision": 0.9,
            "eval_recall": 0.92,
            "eval_accuracy": 0.98,
            "eval_runtime": 3.2,
            "eval_samples_per_second": 100.0,
            "epoch": 3.0,
        }
    },
    hyperparameters={"learning_rate": 5e-05, "train_batch_size": 32, "seed": 42},
    base_model="me/bert-mini-wiki",
)


@pytest.mark.parametrize("family,build", CASES, ids=CASE_IDS)
def test_card_metadata_parses_with_huggingface_hub(family, build, tmp_path):
    model, _ = build(tmp_path)
    card = write_model_card(tmp_path, family, model, model_id="me/tiny", **NER_FACTS)
    metadata = metadata_load(tmp_path / "README.md")
    loaded = ModelCard.load(tmp_path / "README.md")  # parses model-index into EvalResults, raising on bad ones

    assert metadata["library_name"] == "transformers"
    assert {"hf_ctx", family} <= set(metadata["tags"])
    assert metadata["datasets"] == ["eriktks/conll2003"]
    assert metadata["base_model"] == "me/bert-mini-wiki"
    assert metadata["language"] == "en" and metadata["license"] == "apache-2.0"
    assert sorted(metadata["metrics"]) == ["accuracy", "f1", "precision", "recall"]
    model_name, results = model_index_to_eval_results(metadata["model-index"])
    assert model_name == "me/tiny"
    assert {(r.metric_type, r.metric_value, r.dataset_split) for r in results} == {
        ("f1", 0.9123, "validation"),
        ("precision", 0.9, "validation"),
        ("recall", 0.92, "validation"),
        ("accuracy", 0.98, "validation"),
    }
    assert loaded.data.eval_results == results
    assert str(loaded) == str(card)
    for section in SECTIONS:
        assert section in card.text, section


def test_model_index_matches_huggingface_hubs_own_builder(tmp_path):
    """One metric, built independently by huggingface_hub's `metadata_eval_result`."""
    model, _ = bert_token_classifier(tmp_path)
    card = build_model_card(
        "bert",
        model,
        model_id="me/ner",
        dataset_name="CoNLL-2003",
        dataset_id="eriktks/conll2003",
        eval_metrics={"validation": {"eval_f1": 0.875, "eval_loss": 0.2}},
    )
    expected = metadata_eval_result(
        model_pretty_name="me/ner",
        task_pretty_name="Token Classification",
        task_id="token-classification",
        metrics_pretty_name="F1",
        metrics_id="f1",
        metrics_value=0.875,
        dataset_pretty_name="CoNLL-2003",
        dataset_id="eriktks/conll2003",
        dataset_split="validation",
    )
    # `verified` is the Hub's to set (huggingface_hub's builder writes False); everything else must agree.
    expected["model-index"][0]["results"][0]["metrics"][0].pop("verified")
    assert card.data.to_dict()["model-index"] == expected["model-index"]
    assert card.data.pipeline_tag == "token-classification"


def test_eval_results_keep_only_model_metrics():
    results = eval_results_from_metrics(
        {
            "validation": {
                "eval_loss": 1.0,
                "eval_accuracy": 0.5,
                "eval_runtime": 2.0,
                "epoch": 1.0,
                "eval_matthews_correlation": 0.25,
                "eval_samples_per_second": 9.0,
            },
            "test": {"test_perplexity": 12.345678, "test_steps_per_second": 3.0},
        },
        task_type="text-classification",
        task_name="Text Classification",
        dataset_type="nyu-mll/glue",
        dataset_name="GLUE",
        dataset_config="cola",
    )
    assert [(r.dataset_split, r.metric_type, r.metric_value, r.metric_name) for r in results] == [
        ("validation", "accuracy", 0.5, "Accuracy"),
        ("validation", "matthews_correlation", 0.25, "Matthews correlation"),
        ("test", "perplexity", 12.3457, "Perplexity"),
    ]
    assert all(isinstance(r, EvalResult) and r.dataset_config == "cola" for r in results)


def test_a_nan_metric_is_left_out_with_a_warning(caplog):
    with caplog.at_level("WARNING", logger="hf_ctx.tools.model_card"):
        results = eval_results_from_metrics(
            {"validation": {"eval_pearson": float("nan"), "eval_f1": 0.5}},
            task_type="t",
            task_name="T",
            dataset_type="d",
            dataset_name="D",
        )
    assert [r.metric_type for r in results] == ["f1"]
    assert "'eval_pearson' of split 'validation', which is nan" in caplog.text


def test_run_facts_reach_the_card(tmp_path):
    model, _ = bert_token_classifier(tmp_path)
    card = build_model_card("bert", model, model_id="me/tiny", **NER_FACTS)
    text = card.text
    assert "Training examples: 14,041." in text and "Evaluation examples: 3,250." in text
    assert "| Starting point | `me/bert-mini-wiki` |" in text
    assert "(English) ([`eriktks/conll2003`](https://huggingface.co/datasets/eriktks/conll2003)): the original" in text
    assert "| learning_rate | 5e-05 |" in text
    assert "| validation | F1 | 0.9123 |" in text
    assert "Labels: O, B-ANIMAL, I-ANIMAL." in text
    assert f"| Parameters | {sum(p.numel() for p in model.parameters()):,} |" in text
    assert "| `num_hidden_layers` | 2 |" in text and "| `hidden_size` | 128 |" in text
    assert "`CtxBertForTokenClassification` (`AutoModelForTokenClassification`)" in text
    assert "starting from `me/bert-mini-wiki`" in text


def test_local_base_model_is_named_by_its_folder_in_text_but_not_in_metadata(tmp_path):
    model, _ = bert_token_classifier(tmp_path)
    card = build_model_card("bert", model, model_id="me/tiny", **{**NER_FACTS, "base_model": str(tmp_path)})
    assert card.data.base_model is None
    assert f"`{tmp_path.name}`" in card.text and str(tmp_path) not in str(card)


def test_card_names_the_evaluation_files_and_the_training_files(tmp_path):
    """A run trained on eng.train and evaluated on eng.testa says so, in the text and in the model-index."""
    model, _ = taglm(tmp_path)
    facts = {**NER_FACTS, "dataset_name": "eng.train", "dataset_id": None, "training_data": None}
    card = build_model_card("taglm", model, model_id="me/tagger", eval_dataset_name="eng.testa", **facts)
    assert "Measured on eng.testa by the script that trained the model." in card.text
    assert "## Training data\n\neng.train." in card.text and "Measured on eng.train" not in card.text
    assert {(r.dataset_name, r.dataset_type, r.dataset_config, r.dataset_split) for r in card.data.eval_results} == {
        ("eng.testa", "eng.testa", None, "validation")
    }
    assert card.data.datasets is None


def test_card_names_the_hub_dataset_configuration_and_split(tmp_path):
    model, _ = bert_token_classifier(tmp_path)
    facts = {**NER_FACTS, "dataset_name": "GLUE SST-2", "dataset_id": "nyu-mll/glue", "dataset_config": "sst2"}
    card = build_model_card("bert", model, model_id="me/sst2", **facts)  # evaluated on a split of the same dataset
    assert (
        "Measured on GLUE SST-2 ([`nyu-mll/glue`](https://huggingface.co/datasets/nyu-mll/glue), configuration "
        "`sst2`, split validation) by the script"
    ) in card.text
    assert {(r.dataset_name, r.dataset_type, r.dataset_config, r.dataset_split) for r in card.data.eval_results} == {
        ("GLUE SST-2", "nyu-mll/glue", "sst2", "validation")
    }
    # Trained on a Hub dataset, evaluated on local files: both named, only the Hub one in `datasets`.
    card = build_model_card("bert", model, model_id="me/sst2", eval_dataset_name="GLUE SST-2 dev.tsv", **facts)
    assert "Measured on GLUE SST-2 dev.tsv by the script" in card.text
    assert {(r.dataset_type, r.dataset_config) for r in card.data.eval_results} == {("GLUE SST-2 dev.tsv", None)}
    assert card.data.datasets == ["nyu-mll/glue"]


def test_unknown_family_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown model_family 'gpt'"):
        build_model_card("gpt", bert_pretraining(tmp_path)[0], model_id="x", dataset_name="y")


@pytest.mark.parametrize("family,build", CASES, ids=CASE_IDS)
def test_loading_snippets_of_the_card_run(family, build, tmp_path):
    """The card's Python blocks, run in order against the saved checkpoint, load it and run it."""
    model, tokenizer = build(tmp_path)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    card = build_model_card(family, model, model_id=str(tmp_path), **NER_FACTS)
    how_to_load = card.text[card.text.index("## How to load") : card.text.index("## Training data")]
    blocks = re.findall(r"```python\n(.*?)```", how_to_load, flags=re.S)
    assert len(blocks) >= 3  # without hf_ctx, with hf_ctx, running the model
    namespace = {}
    for block in blocks:
        exec(block, namespace)  # noqa: S102 - the card's own example code
        assert type(namespace["model"]) is type(model)
    assert namespace["outputs"] is not None


def test_templates_ship_as_package_data():
    """A non-editable install has the templates: each is under hf_ctx/ and matched by setup.cfg's package_data."""
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    patterns = [p.strip() for p in setup["options.package_data"]["hf_ctx"].split(",")]
    templates = resources.files("hf_ctx") / "model_cards"
    for name in [f"{family}.md" for family in MODEL_FAMILIES] + ["_base.md"]:
        assert (templates / name).is_file(), name
        assert any(fnmatch.fnmatch(f"model_cards/{name}", p) for p in patterns), name


# The three cards of issue 26, each made as the run that wrote it was: they must say what happened.


def test_a_card_says_how_much_of_the_data_was_used_and_seen(tmp_path):
    """A pretraining run of 6 steps of 8 on 3,734 examples saw 48 of them; an evaluation on the first 100 of 277
    says "of 277"."""
    model, _ = bert_pretraining(tmp_path)
    facts = {**NER_FACTS, "base_model": None, "num_train_examples": 3734, "num_eval_examples": 100}
    card = build_model_card(
        "bert", model, model_id="me/bert", **facts, train_steps=6, train_batch_size=8, num_eval_available=277
    )
    assert "Training examples: 3,734; 6 steps of 8 examples saw 48 examples (0.0129 passes over them)." in card.text
    assert "Evaluation examples: the first 100 of 277." in card.text
    card = build_model_card("bert", model, model_id="me/bert", **facts, num_train_available=10_000)
    assert "Training examples: the first 3,734 of 10,000." in card.text


def test_a_card_says_the_model_started_from_random_weights(tmp_path):
    model, _ = bert_token_classifier(tmp_path)
    card = build_model_card("bert", model, model_id="me/rte", **{**NER_FACTS, "base_model": None})
    assert "| Starting point | random initialisation (no pretrained weights) |" in card.text
    assert "starting from random initialisation (no pretrained weights)." in card.text


def test_a_taglm_card_names_the_biLM_layers_in_words(tmp_path):
    model, _ = taglm(tmp_path)
    facts = {**NER_FACTS, "base_model": None}
    model.config.bilm_layers = [-1]
    card = build_model_card("taglm", model, model_id="me/tagger", **facts)
    assert "the states of a frozen ELMo biLM (LSTM layer 2 of 2, the top one) concatenated" in card.text
    assert "layers -1" not in card.text
    assert "random initialisation, except the frozen biLM" in card.text
    model.config.bilm_layers = [0, 1]
    card = build_model_card("taglm", model, model_id="me/tagger", **facts)
    assert "(the character-CNN layer below the LSTMs and LSTM layer 1 of 2)" in card.text
