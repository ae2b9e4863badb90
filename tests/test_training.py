"""hf_ctx.training, the helpers the example scripts share (the scripts' own tests run them end to end)."""

import pytest
from datasets import Dataset

from hf_ctx.training import first_examples, hold_out_validation, parse_config_overrides, training_data_name


def test_config_overrides_are_read_as_json_where_they_parse():
    assert parse_config_overrides("a=1,b=True,c=gelu,d=0.5,e=null, f =false") == {
        "a": 1, "b": True, "c": "gelu", "d": 0.5, "e": None, "f": False}
    assert parse_config_overrides(None) == {} and parse_config_overrides("") == {}
    with pytest.raises(ValueError, match="key=value, got 'dropout'"):
        parse_config_overrides("dropout")


def test_first_examples_and_held_out_validation():
    data = Dataset.from_dict({"x": list(range(20))})
    assert first_examples(data, None) is data
    assert list(first_examples(data, 3)["x"]) == [0, 1, 2] and len(first_examples(data, 50)) == 20
    train, validation = hold_out_validation(data, None, 10.0, seed=0)
    assert (len(train), len(validation)) == (18, 2) and sorted(list(train["x"]) + list(validation["x"])) == list(range(20))
    assert hold_out_validation(data, None, 0, seed=0) == (data, None)
    given = first_examples(data, 2)
    assert hold_out_validation(data, given, 10.0, seed=0) == (data, given)


def test_training_data_is_named_by_dataset_or_file_names():
    assert training_data_name("wikitext", ["/data/a.txt"]) == "wikitext"
    assert training_data_name(None, ["/data/a.txt", "b.txt"]) == "a.txt, b.txt"
    assert training_data_name(None, "/data/eng.train") == "eng.train"


def test_the_examples_train_with_fused_adamw(tmp_path):
    """The examples keep `TrainingArguments`' default optimizer, PyTorch's fused AdamW (one kernel for the
    update of all parameters), on CPU as on GPU."""
    from torch import nn
    from transformers import HfArgumentParser, Trainer, TrainingArguments

    (training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", str(tmp_path), "--report_to", "none"])
    assert training_args.optim == "adamw_torch_fused"
    trainer = Trainer(model=nn.Linear(3, 2), args=training_args)
    assert trainer.create_optimizer().defaults["fused"] is True


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny run with checkpoints at steps 1 and 2 (model, tokenizer, optimizer, scheduler, RNG, state)."""
    import numpy as np
    from tiny_checkpoints import WORDS, bert_sequence_classifier
    from transformers import TrainingArguments

    from hf_ctx.training import CtxTrainer

    root = tmp_path_factory.mktemp("checkpoints")
    model, tokenizer = bert_sequence_classifier(root)
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(WORDS, 4)) for _ in range(8)]
    data = Dataset.from_dict({"text": sentences, "label": [int("cat" in s) for s in sentences]})
    data = data.map(lambda b: tokenizer(b["text"], padding="max_length", max_length=8), batched=True)
    args = TrainingArguments(output_dir=str(root / "run"), max_steps=2, per_device_train_batch_size=4, save_steps=1,
                             report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = CtxTrainer(model=model, args=args, train_dataset=data.remove_columns("text"),
                         processing_class=tokenizer)
    trainer.train()
    return trainer


@pytest.mark.parametrize("removed", ["scheduler.pt", "rng_state.pth", "trainer_state.json", "model.safetensors",
                                     "tokenizer.json"])
def test_resuming_from_an_incomplete_checkpoint_names_the_missing_file(checkpoints, tmp_path, removed):
    """A kill while saving leaves checkpoint-N with files missing; without scheduler.pt or the RNG state the
    Trainer resumed silently and trained differently, and other files failed with unrelated errors."""
    import shutil

    from hf_ctx.training import missing_checkpoint_files

    output_dir = tmp_path / "run"
    shutil.copytree(checkpoints.args.output_dir, output_dir)
    checkpoint = output_dir / "checkpoint-2"
    (checkpoint / removed).unlink()
    checks = checkpoints._checkpoint_checks()
    assert missing_checkpoint_files(checkpoint, **checks) == [removed]
    assert missing_checkpoint_files(output_dir / "checkpoint-1", **checks) == []
    with pytest.raises(ValueError, match=rf"checkpoint-2 is an incomplete checkpoint .*: missing {removed}\."):
        checkpoints.train(resume_from_checkpoint=str(checkpoint))


def test_resuming_from_the_latest_checkpoint_skips_an_incomplete_one(checkpoints, tmp_path, caplog):
    import shutil

    import dataclasses
    from pathlib import Path
    from unittest import mock

    from transformers import Trainer

    from hf_ctx.training import CtxTrainer, resolve_resume_checkpoint

    output_dir = tmp_path / "run"
    shutil.copytree(checkpoints.args.output_dir, output_dir)
    (output_dir / "checkpoint-2" / "optimizer.pt").unlink()
    checks = checkpoints._checkpoint_checks()
    with caplog.at_level("WARNING", logger="hf_ctx.training"):
        for latest in ("latest", True):
            assert resolve_resume_checkpoint(latest, output_dir, **checks) == str(output_dir / "checkpoint-1")
    assert "skipping the incomplete checkpoint" in caplog.text and "missing optimizer.pt" in caplog.text
    (output_dir / "checkpoint-1" / "rng_state.pth").unlink()
    with pytest.raises(ValueError, match=r"no complete checkpoint-N folder in .* \(found 2 incomplete ones\)"):
        resolve_resume_checkpoint("latest", output_dir, **checks)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_resume_checkpoint(output_dir / "checkpoint-7", output_dir, **checks)
    assert resolve_resume_checkpoint(None, output_dir) is None

    (output_dir / "checkpoint-1" / "rng_state.pth").write_bytes(
        (Path(checkpoints.args.output_dir) / "checkpoint-1" / "rng_state.pth").read_bytes())
    # The Trainer itself: resumes from checkpoint-1 and trains step 2 again.
    trainer = CtxTrainer(model=checkpoints.model, args=dataclasses.replace(checkpoints.args, output_dir=str(output_dir)),
                         train_dataset=checkpoints.train_dataset, processing_class=checkpoints.processing_class)
    with mock.patch.object(Trainer, "_load_from_checkpoint", wraps=trainer._load_from_checkpoint) as load:
        trainer.train(resume_from_checkpoint="latest")
    assert load.call_args.args[0] == str(output_dir / "checkpoint-1") and trainer.state.global_step == 2
