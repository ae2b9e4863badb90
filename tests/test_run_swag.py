"""examples/run_swag.py: multiple choice on generated files in SWAG's CSV layout and in a JSON layout of its own,
the files' checks, and parity with transformers' BertForMultipleChoice on the same weights."""

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest
from tiny_checkpoints import new_bert_arguments

pytest.importorskip("datasets")
import run_swag
import torch
from transformers import AutoConfig, AutoModelForMultipleChoice, AutoTokenizer, BertConfig, BertForMultipleChoice

from hf_ctx import BERT_PRESETS, CtxBertConfig, train_wordpiece_tokenizer
from hf_ctx.tools.cli import main as hf_ctx_cli

RUN_SWAG = Path(__file__).resolve().parents[1] / "examples" / "run_swag.py"
WORDS = "the a cat dog bird man woman park house river tree sat ran saw ate big small red old new".split()
SWAG_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source"]


def phrase(rng, extra=()):
    words = rng.sample(WORDS, rng.randint(2, 5)) + list(extra)
    rng.shuffle(words)
    return " ".join(words)


def swag_rows(rng, n):
    """SWAG's columns; the right ending says "good", the three others "bad"."""
    for i in range(n):
        label = rng.randrange(4)
        endings = [phrase(rng, ["good" if j == label else "bad"]) for j in range(4)]
        sent1, sent2 = phrase(rng), rng.choice(["The man", "A woman", "Someone"])
        yield {
            "": i,
            "video-id": f"lsmdc{i}",
            "fold-ind": i,
            "startphrase": f"{sent1} {sent2}",
            "sent1": sent1,
            "sent2": sent2,
            "gold-source": "gold",
            **{f"ending{j}": ending for j, ending in enumerate(endings)},
            "label": label,
        }


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("swag")
    rng = random.Random(0)
    write_csv(root / "train.csv", list(swag_rows(rng, 64)))
    write_csv(root / "val.csv", list(swag_rows(rng, 24)))
    corpus = root / "corpus.txt"
    corpus.write_text(
        "\n".join(" ".join(WORDS[i:] + WORDS[:i] + ["good", "bad", "The", "A", "Someone"]) for i in range(20))
    )
    tokenizer = train_wordpiece_tokenizer([corpus], vocab_size=100, min_frequency=1)
    tokenizer.save_pretrained(root / "tokenizer")
    size = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    CtxBertConfig(vocab_size=len(tokenizer), max_position_embeddings=64, **size).save_pretrained(root / "config")
    return root, run_swag


def run(setup, output_dir, *extra):
    root, run_swag = setup
    args = [
        "--output_dir", str(output_dir), "--max_seq_length", "32", "--per_device_train_batch_size", "16",
        "--per_device_eval_batch_size", "16", "--save_strategy", "no", "--report_to", "none", "--seed", "0",
        *extra,
    ]  # fmt: skip
    if "--model_name_or_path" not in extra:
        args += new_bert_arguments(root)
    return run_swag.main(args)


def saved_model_choices(folder, contexts, endings_per_example) -> np.ndarray:
    """The saved model's choice for each example, one example at a time and without padding."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMultipleChoice.from_pretrained(folder).eval()
    choices = []
    with torch.no_grad():
        for context, endings in zip(contexts, endings_per_example):
            encoded = tokenizer([context] * len(endings), endings, padding=True, return_tensors="pt")
            choices.append(model(**{k: v[None] for k, v in encoded.items()}).logits[0].argmax().item())
    return np.array(choices)


def test_swag_layout_is_learned_and_predictions_are_the_saved_models(setup, tmp_path):
    root, _ = setup
    metrics = run(
        setup, tmp_path, "--train_file", str(root / "train.csv"), "--validation_file", str(root / "val.csv"),
        "--test_file", str(root / "val.csv"), "--do_train", "--do_eval", "--do_predict",
        "--num_train_epochs", "6", "--learning_rate", "3e-3", "--warmup_steps", "3",
    )  # fmt: skip
    assert metrics["eval_accuracy"] > 0.9  # chance is 0.25: the label column was read as the right ending
    assert json.loads((tmp_path / "eval_results.json").read_text())["eval_accuracy"] == metrics["eval_accuracy"]
    with (root / "val.csv").open() as f:
        rows = list(csv.DictReader(f))
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    expected = saved_model_choices(
        tmp_path,
        [row["sent1"] for row in rows],
        [[f"{row['sent2']} {row[f'ending{j}']}" for j in range(4)] for row in rows],
    )
    assert predictions == expected.tolist()
    labels = np.array([int(row["label"]) for row in rows])
    assert metrics["predict_accuracy"] == metrics["eval_accuracy"] == pytest.approx((expected == labels).mean())
    card = (tmp_path / "README.md").read_text()
    assert "multiple-choice" in card and "train.csv" in card


def test_other_columns_from_json_lines_three_choices_no_shared_start(setup, tmp_path):
    rng = random.Random(1)
    rows = [
        {"id": i, "question": phrase(rng), "A": phrase(rng), "B": phrase(rng), "C": phrase(rng), "answer": i % 3}
        for i in range(10)
    ]
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    metrics = run(
        setup, out, "--validation_file", str(path), "--test_file", str(path), "--do_eval", "--do_predict",
        "--context_column", "question", "--ending_prefix_column", "", "--ending_columns", "A,B,C",
        "--label_column", "answer",
    )  # fmt: skip
    predictions = np.array(json.loads((out / "predictions.json").read_text()))
    assert len(predictions) == 10 and set(predictions) <= {0, 1, 2}
    assert metrics["eval_accuracy"] == pytest.approx((predictions == np.arange(10) % 3).mean())
    # A test file without labels (as SWAG's test.csv): predictions only.
    unlabelled = tmp_path / "test.jsonl"
    unlabelled.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "answer"}) + "\n" for row in rows))
    metrics = run(
        setup, tmp_path / "test_out", "--test_file", str(unlabelled), "--do_predict", "--context_column", "question",
        "--ending_prefix_column", "", "--ending_columns", "A,B,C", "--label_column", "answer",
    )  # fmt: skip
    assert "predict_accuracy" not in metrics
    assert json.loads((tmp_path / "test_out" / "predictions.json").read_text()) == predictions.tolist()
    # --max_predict_samples keeps the first N examples of --test_file.
    run(
        setup, tmp_path / "first_4", "--test_file", str(unlabelled), "--do_predict", "--context_column", "question",
        "--ending_prefix_column", "", "--ending_columns", "A,B,C", "--label_column", "answer",
        "--max_predict_samples", "4",
    )  # fmt: skip
    assert json.loads((tmp_path / "first_4" / "predictions.json").read_text()) == predictions.tolist()[:4]


def test_bad_files_name_the_file_line_and_column(setup, tmp_path):
    root, _ = setup
    rows = list(swag_rows(random.Random(2), 4))
    rows[2]["label"] = 4
    bad_label = write_csv(tmp_path / "bad_label.csv", rows)
    with pytest.raises(
        ValueError, match=rf"{bad_label}:4, column 'label': label '4' is not the index of one of the 4 endings"
    ):
        run(setup, tmp_path / "out", "--validation_file", str(bad_label), "--do_eval")
    rows[2]["label"] = 1
    rows[3]["ending1"] = ""
    empty_ending = write_csv(tmp_path / "empty_ending.csv", rows)
    with pytest.raises(ValueError, match=rf"{empty_ending}:5, column 'ending1': no value \(an empty field\)"):
        run(setup, tmp_path / "out", "--validation_file", str(empty_ending), "--do_eval")
    rows[3]["ending1"] = "fine"
    rows[1]["label"] = ""
    with pytest.raises(ValueError, match=r"empty.csv:3, column 'label': no value"):
        run(setup, tmp_path / "out", "--validation_file", str(write_csv(tmp_path / "empty.csv", rows)), "--do_eval")
    for row in rows:
        del row["ending3"]
    missing = write_csv(tmp_path / "missing.csv", rows)
    with pytest.raises(ValueError, match=rf"{missing}:1: no column\(s\) \['ending3'\]; it has \['video-id'"):
        run(setup, tmp_path / "out", "--validation_file", str(missing), "--do_eval")
    with pytest.raises(ValueError, match=r"no column\(s\) \['sentence'\]"):
        run(
            setup,
            tmp_path / "out",
            "--validation_file",
            str(root / "val.csv"),
            "--do_eval",
            "--context_column",
            "sentence",
        )
    broken = tmp_path / "broken.csv"
    broken.write_text("sent1,sent2,ending0,ending1,ending2,ending3,label\na,b,c,d,e,f,1\na,b,c,d,e,f,g,1\n")
    with pytest.raises(ValueError, match=rf"{broken}:3: 8 fields, but the header has 7 columns"):
        run(setup, tmp_path / "out", "--validation_file", str(broken), "--do_eval")
    with pytest.raises(ValueError, match="--do_train needs --train_file"):
        run(setup, tmp_path / "out", "--do_train")
    with pytest.raises(ValueError, match="--ending_columns names 1 column"):
        run(setup, tmp_path / "out", "--validation_file", str(missing), "--do_eval", "--ending_columns", "ending0")


def test_same_predictions_and_accuracy_as_transformers_bert(setup, tmp_path):
    """transformers' BertForMultipleChoice and the same weights converted with `hf-ctx convert-bert`, through the
    same script: the same choices, accuracy and loss."""
    root, _ = setup
    torch.manual_seed(0)
    size = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    tokenizer = AutoTokenizer.from_pretrained(root / "tokenizer")
    reference = BertForMultipleChoice(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=64, **size))
    reference.save_pretrained(tmp_path / "transformers")
    tokenizer.save_pretrained(tmp_path / "transformers")
    assert hf_ctx_cli(["convert-bert", str(tmp_path / "transformers"), str(tmp_path / "hf_ctx")]) in (None, 0)
    results = {}
    for name in ("transformers", "hf_ctx"):
        metrics = run(
            setup, tmp_path / f"out_{name}", "--model_name_or_path", str(tmp_path / name),
            "--validation_file", str(root / "val.csv"), "--test_file", str(root / "val.csv"),
            "--do_eval", "--do_predict",
        )  # fmt: skip
        results[name] = metrics, json.loads((tmp_path / f"out_{name}" / "predictions.json").read_text())
    (ours, our_choices), (theirs, their_choices) = results["hf_ctx"], results["transformers"]
    assert AutoModelForMultipleChoice.from_pretrained(tmp_path / "hf_ctx").config.model_type == "hf_ctx_bert"
    assert our_choices == their_choices and len(set(our_choices)) > 1  # a random model's choices still vary
    assert ours["eval_accuracy"] == theirs["eval_accuracy"]
    assert ours["eval_loss"] == pytest.approx(theirs["eval_loss"], abs=1e-5)


def test_a_new_model_from_a_size_preset_needs_no_hub_and_a_config_needs_a_model_type(setup, tmp_path):
    root, run_swag = setup
    common = ["--train_file", str(root / "train.csv"), "--do_train", "--max_steps", "1", "--report_to", "none"]
    common += ["--max_seq_length", "32", "--tokenizer_name", str(root / "tokenizer"), "--save_strategy", "no"]
    run_swag.main([*common, "--model_type", "bert", "--config_name", "tiny", "--output_dir", str(tmp_path / "tiny")])
    config = AutoConfig.from_pretrained(tmp_path / "tiny")
    assert (config.hidden_size, config.num_hidden_layers) == (
        BERT_PRESETS["tiny"]["hidden_size"],
        BERT_PRESETS["tiny"]["num_hidden_layers"],
    )
    with pytest.raises(ValueError, match=r"give --model_name_or_path, or --model_type \(one of \['bert'\]\)"):
        run_swag.main([*common, "--config_name", "tiny", "--output_dir", str(tmp_path / "x")])
    with pytest.raises(FileNotFoundError, match=r"no folder '.*tiny-typo', given for --config_name"):
        run_swag.main(
            [
                *common,
                "--model_type",
                "bert",
                "--config_name",
                str(tmp_path / "tiny-typo"),
                "--output_dir",
                str(tmp_path / "y"),
            ]
        )


def test_every_script_builds_its_model_from_the_same_arguments():
    """--model_name_or_path, --model_type, --config_name, --tokenizer_name, --config_overrides and --cache_dir
    are one definition (hf_ctx.tools.scripts.ModelBuildingArguments) in every task script, help text included."""
    import dataclasses

    import run_glue
    import run_ner
    import run_qa

    from hf_ctx.tools.families import families_with
    from hf_ctx.tools.scripts import ModelBuildingArguments

    # --model_type and --config_name name the families (and their presets) of the script's task
    per_task = ("model_type", "config_name")
    shared = {f.name: f.metadata["help"] for f in dataclasses.fields(ModelBuildingArguments) if f.name not in per_task}
    tasks = {run_glue: "sequence_classification", run_ner: "token_classification", run_qa: "question_answering"}
    for script in (run_glue, run_ner, run_qa, run_swag):
        assert issubclass(script.ModelArguments, ModelBuildingArguments)
        fields = {f.name: f.metadata.get("help") for f in dataclasses.fields(script.ModelArguments)}
        assert {name: fields[name] for name in shared} == shared, script.__name__
        # --model_type offers the families that have a model for the script's task (run_glue.py: no taglm)
        task = tasks.get(script, "multiple_choice")
        assert fields["model_type"].endswith(f"one of {families_with(task)}"), script.__name__
    assert "taglm" not in fields_of(run_glue)["model_type"] and "taglm" in fields_of(run_ner)["model_type"]


def fields_of(script) -> dict:
    import dataclasses

    return {f.name: f.metadata.get("help") for f in dataclasses.fields(script.ModelArguments)}
