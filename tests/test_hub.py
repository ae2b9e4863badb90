"""save_run and finish_run save model, tokenizer and card, and with --push_to_hub upload exactly that; what was
pushed loads back.

The Hub is `hub_server.HubServer`, on 127.0.0.1 over HTTP, and the client is the real one (huggingface_hub, and
transformers through it): the server keeps every file a commit sent, so a test sees what a reader of the
repository downloads.
"""

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import torch
from datasets import Dataset
from hub_server import TOKEN, folder_files
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from tiny_checkpoints import (
    QUICK_RUN,
    bert_pretraining,
    bert_sequence_classifier,
    bert_tokenizer,
    cat_sentences,
    elmo_bilm,
    new_bert_arguments,
    taglm,
)
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments, pipeline

from hf_ctx import CtxBertConfig
from hf_ctx.tools.cli import main as cli_main
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.hub import finish_run, push_checkpoint, save_run
from hf_ctx.tools.model_card import RunFacts, build_model_card
from hf_ctx.tools.trainer import CtxTrainer

# A script's parsed arguments as `save_run` reads them: a model from random weights, data named by the card's facts.
NEW_MODEL = SimpleNamespace(model_name_or_path=None)
NO_DATA_ARGUMENTS = SimpleNamespace()


def test_push_checkpoint_uploads_what_save_pretrained_writes(tmp_path, hub):
    model, tokenizer = bert_sequence_classifier(tmp_path)
    card = build_model_card(model, RunFacts("bert", dataset="a toy corpus"), model_id="me/tiny")
    push_checkpoint(model, tokenizer, card, "me/tiny", token=TOKEN, revision="main")
    saved = tmp_path / "saved"
    model.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    (saved / "README.md").write_text(str(card))

    assert hub.created == ["me/tiny"]
    [upload] = hub.commits
    assert upload["repo_id"] == "me/tiny" and upload["revision"] == "main"
    assert upload["files"] == folder_files(saved)
    assert set(hub.files("me/tiny")) == {".gitattributes", *folder_files(saved)}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "README.md",
        "configuration_bert.py",
        "modeling_bert.py",
    } <= set(upload["files"])


@pytest.mark.parametrize("push_to_hub", [False, True])
def test_finish_run_saves_and_pushes_the_checkpoint_and_card(tmp_path, push_to_hub, caplog, hub):
    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = cat_sentences(tokenizer, 16, words=5, max_length=12)
    output_dir = tmp_path / "run"
    args = TrainingArguments(
        output_dir=str(output_dir),
        max_steps=2,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        push_to_hub=push_to_hub,
        hub_model_id="me/tiny-sst",
        hub_token=TOKEN,
        use_cpu=True,
    )

    def accuracy(prediction):
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=data,
        eval_dataset=data,
        processing_class=tokenizer,
        compute_metrics=accuracy,
    )
    trainer.train()
    metrics = trainer.evaluate()
    card_facts = {"dataset": "Toy sentences", "hyperparameters": {"max_seq_length": 12}}
    facts = save_run(trainer, NEW_MODEL, NO_DATA_ARGUMENTS, metrics, **card_facts)
    with caplog.at_level("INFO", logger="hf_ctx.tools.hub"):
        card = finish_run(trainer, facts, metrics)

    saved = folder_files(output_dir)
    # The output folder holds a checkpoint the Auto classes load, and the card.
    reloaded = AutoModelForSequenceClassification.from_pretrained(output_dir)
    for name, tensor in trainer.model.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor)
    assert saved["README.md"].decode() == str(card)
    loaded_card = ModelCard.load(output_dir / "README.md")
    [result] = loaded_card.data.eval_results
    assert (result.metric_type, result.dataset_split) == ("accuracy", "validation")
    assert result.metric_value == round(metrics["eval_accuracy"], 4)
    assert loaded_card.data.model_name == "me/tiny-sst"
    assert "| max_seq_length | 12 |" in loaded_card.text and "| learning_rate | 0.001 |" in loaded_card.text
    assert "Training examples: 16; 2 steps of 8 examples saw 16 examples (1 pass over them)." in loaded_card.text
    assert "Evaluation examples: 16." in loaded_card.text  # counted by save_run from the Trainer's eval_dataset
    assert f"scores validation: accuracy {metrics['eval_accuracy']:.4f}" in caplog.text
    # The picture beside the checkpoint, in the card: 3 panels of 400 x 300 pixels in a row (training loss,
    # eval_loss, eval_accuracy); without matplotlib (an optional dependency) neither.
    drawn = "![Training loss and evaluation metrics against steps](training_curves.png)" in loaded_card.text
    assert (
        drawn == (output_dir / "training_curves.png").is_file() == (importlib.util.find_spec("matplotlib") is not None)
    )
    if drawn:
        from matplotlib.image import imread

        assert imread(output_dir / "training_curves.png").shape[:2] == (300, 1200)

    if not push_to_hub:
        assert hub.requests == []
        return
    # The Trainer created the repository when it started; the end of the run uploads once, exactly what
    # save_pretrained wrote plus the card: no training state, no pickled training arguments.
    assert hub.created == ["me/tiny-sst"]
    [upload] = hub.commits
    assert upload["repo_id"] == "me/tiny-sst" and upload["summary"] == "End of training"
    assert "training_args.bin" in saved
    assert upload["files"] == {name: content for name, content in saved.items() if name != "training_args.bin"}


def _code_files_needed(files: dict[str, bytes]) -> set[str]:
    """The .py files a checkpoint's auto_map names, with the files they import with single-dot imports."""
    auto_map = json.loads(files["config.json"])["auto_map"]
    needed, todo = set(), [f"{ref.split('.')[0]}.py" for ref in auto_map.values()]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        if name in files:
            todo += [f"{module}.py" for module in re.findall(r"^from \.(\w+) import", files[name].decode(), re.M)]
    return needed


@pytest.mark.parametrize("hub_strategy", ["every_save", "end"])
def test_no_push_holds_the_token_or_a_local_path_and_every_revision_has_its_code(tmp_path, hub_strategy, hub):
    """--push_to_hub with checkpoints: the mid-run pushes and the final one send model files only (never the
    pickled training arguments, which hold the token and local paths), and each revision of the repository has
    the code files its config.json's auto_map needs for trust_remote_code."""
    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = Dataset.from_dict({"text": ["red cat runs", "blue dog sleeps"] * 4, "label": [1, 0] * 4})
    data = data.map(lambda b: tokenizer(b["text"], padding="max_length", max_length=8), batched=True)
    data = data.remove_columns("text")
    output_dir = tmp_path / "run"
    args = TrainingArguments(
        output_dir=str(output_dir),
        max_steps=2,
        per_device_train_batch_size=4,
        report_to=[],
        save_steps=1,
        push_to_hub=True,
        hub_model_id="me/tiny-safe",
        hub_token=TOKEN,
        hub_strategy=hub_strategy,
        use_cpu=True,
    )
    hub.add_repo("me/tiny-safe", {"training_args.bin": TOKEN.encode()})  # left by an earlier, unsafe push
    trainer = CtxTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    finish_run(trainer, save_run(trainer, NEW_MODEL, NO_DATA_ARGUMENTS, {}, dataset="Toy sentences"), {})

    assert (output_dir / "checkpoint-1" / "training_args.bin").is_file()  # the token is on disk, not on the Hub
    summaries = [upload["summary"] for upload in hub.commits]
    # every_save: a push per checkpoint (the Trainer skips one while the last is still uploading), then the end's.
    assert summaries[-1] == "End of training"
    assert any(s.startswith("Training in progress") for s in summaries[:-1]) == (hub_strategy == "every_save")
    local_paths = {str(tmp_path), str(tmp_path.resolve()), str(Path.home())}
    for upload in hub.commits:
        for name, content in upload["files"].items():
            assert TOKEN.encode() not in content, name
            assert not any(path.encode() in content for path in local_paths), name
            assert not name.endswith((".bin", ".pt", ".pth")) and name != "trainer_state.json", name
    assert "training_args.bin" not in hub.files("me/tiny-safe")  # the final push removed the old one
    revisions = hub.repos["me/tiny-safe"].commits[1:]  # after the unsafe push
    for _, files in revisions[-1:] if hub_strategy == "end" else revisions:
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(files)
        assert _code_files_needed(files) <= set(files), sorted(files)


@pytest.mark.parametrize("hub_strategy", ["checkpoint", "all_checkpoints"])
def test_hub_strategies_that_upload_the_training_state_are_refused(tmp_path, hub_strategy, hub):
    model, tokenizer = bert_sequence_classifier(tmp_path)
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        push_to_hub=True,
        hub_model_id="me/x",
        hub_strategy=hub_strategy,
        hub_token=TOKEN,
        report_to=[],
        use_cpu=True,
    )
    with pytest.raises(ValueError, match=f"hub_strategy={hub_strategy}.*training_args.bin"):
        CtxTrainer(model=model, args=args, processing_class=tokenizer)
    assert hub.commits == []


@pytest.mark.parametrize("build", [bert_sequence_classifier, taglm])
def test_transformers_push_to_hub_sends_no_token_and_no_local_path(tmp_path, build, hub):
    """`model.push_to_hub(...)` and `tokenizer.push_to_hub(...)`, transformers' own calls (through
    `HfApi.create_commit`), on a model loaded from a local folder: every file sent holds neither the token nor a
    local path, and the repository holds what `trust_remote_code` needs to load it."""
    model, tokenizer = build(tmp_path)
    local = tmp_path / "trained"
    model.save_pretrained(local)
    tokenizer.save_pretrained(local)
    model = type(model).from_pretrained(local)
    model.push_to_hub("me/pushed", token=TOKEN)
    tokenizer.push_to_hub("me/pushed", token=TOKEN)

    assert hub.created == ["me/pushed"] and len(hub.commits) == 2
    local_paths = {str(tmp_path), str(tmp_path.resolve()), str(Path.home())}
    for upload in hub.commits:
        for name, content in upload["files"].items():
            assert TOKEN.encode() not in content, name
            assert not any(path.encode() in content for path in local_paths), name
    files = hub.files("me/pushed")
    assert {"config.json", "model.safetensors", "README.md"} <= set(files)
    assert _code_files_needed(files) <= set(files), sorted(files)


def test_what_was_pushed_loads_back_by_hub_id_at_each_revision_and_in_a_pipeline(tmp_path, hub):
    """Two pushes; `from_pretrained("me/tiny")` gets the second's weights, `revision=` the first's commit its
    weights, and a pipeline on the Hub id classifies as one on the model loaded at that revision. The second
    push sends only what changed (the server answered each file's id at preupload)."""
    model, tokenizer = bert_sequence_classifier(tmp_path)
    card = build_model_card(model, RunFacts("bert", dataset="a toy corpus"), model_id="me/tiny")
    first = push_checkpoint(model, tokenizer, card, "me/tiny", token=TOKEN)
    first_weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor([3.0, -3.0]))
    second = push_checkpoint(model, tokenizer, card, "me/tiny", token=TOKEN)

    assert first.oid != second.oid and set(hub.commits[1]["files"]) == {"model.safetensors"}
    latest = AutoModelForSequenceClassification.from_pretrained("me/tiny")
    older = AutoModelForSequenceClassification.from_pretrained("me/tiny", revision=first.oid)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(latest.state_dict()[name], tensor, rtol=0, atol=0)
        torch.testing.assert_close(older.state_dict()[name], first_weights[name], rtol=0, atol=0)
    sentences = ["red cat runs", "blue dog sleeps fast"]
    from_hub = pipeline("text-classification", model="me/tiny", revision=first.oid)(sentences)
    assert from_hub == pipeline("text-classification", model=older, tokenizer=tokenizer)(sentences)
    assert pipeline("text-classification", model="me/tiny")(sentences)[0]["label"] == latest.config.id2label[0]
    # The weights came as the Hub serves LFS files: a redirect to another host, followed.
    assert any(method == "GET" and path.startswith("/cdn/") for method, path, _ in hub.requests)


def test_pushed_checkpoints_load_with_trust_remote_code_where_hf_ctx_is_not_importable(tmp_path, hub):
    """A BERT, an ELMo biLM and a TagLM tagger pushed with `push_to_hub`, loaded by Hub id with
    `trust_remote_code=True` through each Auto class of their family in a fresh Python that cannot import hf_ctx
    (test_remote_code's loader), give the pushed models' outputs."""
    from test_remote_code import LOADER, SENTENCES, extra_inputs, loaded_auto_classes

    jobs, pushed = [], {}
    for name, build in {"bert": bert_pretraining, "elmo": elmo_bilm, "taglm": taglm}.items():
        model, tokenizer = build(tmp_path)
        model.eval()
        model.push_to_hub(f"me/{name}", token=TOKEN)
        tokenizer.push_to_hub(f"me/{name}", token=TOKEN)
        pushed[name] = model, tokenizer
        auto_classes = loaded_auto_classes(name, model)
        jobs.append({"name": name, "path": f"me/{name}", "text": SENTENCES, "auto_classes": auto_classes})
        jobs[-1]["extra_inputs"] = extra_inputs(model, tokenizer)
    script = tmp_path / "load_checkpoints.py"
    script.write_text(LOADER)
    env = hub.client_environment(tmp_path / "fresh_home")
    done = subprocess.run(
        [sys.executable, str(script), "remote", json.dumps(jobs), str(tmp_path / "remote")],
        cwd=tmp_path,  # the repository is not on the path
        env={**env, "TRANSFORMERS_VERBOSITY": "error"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tensors, classes = load_file(tmp_path / "remote.safetensors"), json.loads((tmp_path / "remote.json").read_text())
    for job in jobs:
        name = job["name"]
        model, tokenizer = pushed[name]
        assert "error" not in classes[name], classes[name].get("error")
        assert classes[name][job["auto_classes"][0]].startswith("transformers_modules.")
        own_auto = next(auto for auto in job["auto_classes"] if classes[name][auto].endswith(type(model).__name__))
        with torch.no_grad():
            expected = model(**tokenizer(SENTENCES, padding=True, return_tensors="pt"))
        compared = [key for key, value in expected.items() if isinstance(value, torch.Tensor)]
        assert compared, name
        for key in compared:
            torch.testing.assert_close(tensors[f"{name}/{own_auto}/{key}"], expected[key], rtol=1e-5, atol=1e-5)
    # The loader downloaded the code from the server: each repository's auto_map source files.
    for job in jobs:
        assert _code_files_needed(hub.files(job["path"])) <= set(hub.files(job["path"]))
        assert any(path.startswith(f"/{job['path']}/resolve/") and path.endswith(".py") for _, path, _ in hub.requests)


def test_save_run_refuses_a_card_fact_runfacts_has_not(tmp_path):
    """A misspelt card fact is an error naming it, not an attribute the card never reads."""
    model, tokenizer = bert_sequence_classifier(tmp_path)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    trainer = Trainer(model=model, args=args, processing_class=tokenizer)
    with pytest.raises(TypeError, match=r"\['hyperparameter'\] are not RunFacts fields"):
        save_run(trainer, NEW_MODEL, NO_DATA_ARGUMENTS, {}, hyperparameter={"max_seq_length": 12})
    assert not (tmp_path / "out" / "model.safetensors").exists()


# --- what the Hub refuses: one line at each entry point, before anything is trained --------------------------

RUN_GLUE = Path(__file__).resolve().parents[1] / "examples" / "run_glue.py"


@pytest.fixture
def pushed(tmp_path, hub):
    """`me/tiny` on the Hub (a BERT classifier) and `me/gated`, the same behind a gate; the local folder."""
    model, tokenizer = bert_sequence_classifier(tmp_path)
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    hub.add_repo("me/tiny", folder_files(folder))
    hub.add_repo("me/gated", folder_files(folder))
    hub.gated.add("me/gated")
    return folder


def _one_line_error(run, capsys) -> str:
    """What `run()` printed on stderr, where it exits with status 1 printing one line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def new_bert_arguments_for(tmp_path) -> list[str]:
    """run_glue's arguments for a new tiny BERT (a config and a tokenizer saved in `tmp_path`)."""
    tokenizer = bert_tokenizer(tmp_path)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    CtxBertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32).save_pretrained(
        tmp_path / "config"
    )
    return new_bert_arguments(tmp_path)


def _run_glue(tmp_path, *arguments):
    import runpy

    csv = tmp_path / "train.csv"
    csv.write_text("sentence,label\n" + "red cat runs,1\nblue dog sleeps,0\n" * 4)
    run_glue = runpy.run_path(str(RUN_GLUE), run_name="run_glue")
    args = ["--train_file", str(csv), "--do_train", "--max_steps", "1", "--max_seq_length", "16", *QUICK_RUN]
    return lambda: run_script(run_glue["main"], args + ["--output_dir", str(tmp_path / "run"), *arguments])


# What each entry point says of a Hub id the Hub refuses: (what run_glue's check of --model_name_or_path says,
# what every entry point's line says).
REFUSED = {
    "missing": (
        r"'me/missing' is neither a local folder nor a model on the Hub, given for --model_name_or_path",
        r"answered 404 .*me/missing.*no such repository",
    ),
    "bad token": (
        r"^error: no folder 'me/tiny', and on the Hub: .*given for --model_name_or_path",
        r"answered 401 .*the token was refused.*HF_TOKEN",
    ),
    "gated": (
        r"^error: 'me/gated': .*given for --model_name_or_path",
        r"answered 403 .*/me/gated/.*: a gated repository; ask for access",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_hub_model_the_hub_refuses_is_one_line_at_each_entry_point(tmp_path, capsys, monkeypatch, pushed, case):
    """run_glue's --model_name_or_path and `hf-ctx embed` given a Hub id that is missing, asked with a token
    the Hub refuses, or gated: one line saying what the Hub answered, before any data is read or anything
    written."""
    name = {"missing": "me/missing", "bad token": "me/tiny", "gated": "me/gated"}[case]
    if case == "bad token":
        monkeypatch.setenv("HF_TOKEN", "hf_NotAToken")
    text = tmp_path / "text.txt"
    text.write_text("red cat runs\n")
    run_glue_says, every_line_says = REFUSED[case]
    glue_line = _one_line_error(_run_glue(tmp_path, "--model_name_or_path", name), capsys)
    assert re.search(run_glue_says, glue_line) and (case == "missing" or re.search(every_line_says, glue_line)), (
        glue_line
    )
    embed_line = _one_line_error(lambda: cli_main(["embed", name, str(text), str(tmp_path / "out.hdf5")]), capsys)
    # A missing id is named by the model argument's own check (its kind), before anything else asks the Hub.
    missing_model = "'me/missing' is neither a local folder nor a model on the Hub, given for model"
    assert re.search(every_line_says, embed_line) or (case == "missing" and missing_model in embed_line), embed_line
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.hdf5").exists()


@pytest.mark.parametrize("case", ["offline", "no token", "bad token"])
def test_push_to_hub_that_cannot_push_is_one_line_before_training(tmp_path, capsys, monkeypatch, hub, case):
    """--push_to_hub offline, without a token, or with a refused one: one line naming --push_to_hub and the way
    on, before the model is built and trained (there was an 85-line traceback offline)."""
    from huggingface_hub import constants

    token = []
    if case == "offline":
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        token = ["--hub_token", TOKEN]
    elif case == "bad token":
        token = ["--hub_token", "hf_NotAToken"]
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")  # no token of the machine's own
    monkeypatch.delenv("HF_TOKEN", raising=False)
    model_args = new_bert_arguments_for(tmp_path)
    line = _one_line_error(
        _run_glue(tmp_path, *model_args, "--push_to_hub", "--hub_model_id", "me/run", *token), capsys
    )
    expected = {
        "offline": r"--push_to_hub me/run: the Hub is not reached offline \(HF_HUB_OFFLINE is set\)",
        "no token": r"--push_to_hub me/run: .* answered 401 .*: no token was given; give one \(HF_TOKEN.*--hub_token",
        "bad token": r"--push_to_hub me/run: .* answered 401 .*: the token was refused",
    }[case]
    assert re.search(expected, line), line
    # Before, the refused run left a folder holding only its lock file.
    assert not (tmp_path / "run").exists() and hub.created == []


def test_a_push_the_connection_drops_keeps_the_model_and_says_what_was_not_uploaded(tmp_path, hub, monkeypatch):
    """The server drops the connection of the end of training's commit: finish_run's error names the files,
    says the Hub did not confirm them, where the model is saved and how to publish it; the repository is as it
    was, the saved model loads."""
    model, tokenizer = bert_sequence_classifier(tmp_path)
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        push_to_hub=True,
        hub_model_id="me/dropped",
        hub_token=TOKEN,
        use_cpu=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=cat_sentences(tokenizer, 8), processing_class=tokenizer)
    trainer.train()
    facts = save_run(trainer, NEW_MODEL, NO_DATA_ARGUMENTS, {}, dataset="Toy sentences")
    # huggingface_hub 2 retries a commit whose connection dropped, 5 times in 23 s: every try is dropped here,
    # and the waits are skipped.
    hub.drop_commits = 100
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    with pytest.raises(OSError) as error:
        finish_run(trainer, facts, {})
    assert 1 <= 100 - hub.drop_commits <= 6
    message = str(error.value)
    assert "\n" not in message
    assert re.search(
        r"pushing \d+ files \(.*config\.json.*model\.safetensors.*\) to me/dropped failed: cannot reach", message
    )
    assert "the Hub did not confirm the commit" in message
    assert f"saved in {tmp_path / 'run'}; publish them with `hf upload me/dropped {tmp_path / 'run'}" in message
    assert set(hub.files("me/dropped")) == {".gitattributes"} and hub.commits == []
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run")
    for name, tensor in trainer.model.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor)
