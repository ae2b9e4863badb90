"""Writes never follow a planted link and never leave the output folder (issue 51, item 3): a symbolic link planted
where hf_ctx writes a file (an output, the lock, a checkpoint's files, a card, predictions, the HDF5 output) is
refused or replaced, never written through; the file it points at is left as it was. Each case is a function
named after what it tries."""

import os
from pathlib import Path

import pytest


@pytest.fixture
def outside(tmp_path):
    """A file and a folder outside the output folder, which a planted link points at."""
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("keep me\n")
    return victim


def plant_link(path, target):
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def test_a_link_planted_where_a_file_is_written_atomically_is_replaced_not_written_through(tmp_path, outside):
    """Predictions, metrics, cards, vocabularies: written by `atomic_write`, whose rename replaces the link."""
    from hf_ctx.data.atomic_write import write_text

    output = tmp_path / "run" / "predictions.txt"
    plant_link(output, outside)
    write_text(output, "new\n")
    assert not output.is_symlink() and output.read_text() == "new\n"
    assert outside.read_text() == "keep me\n"


@pytest.mark.parametrize("planted", ["config.json", "model.safetensors", "README.md"])
def test_a_link_planted_where_a_checkpoint_file_goes_is_replaced_not_written_through(tmp_path, outside, planted):
    from hf_ctx.atomic_files import write_into_folder

    folder = tmp_path / "run"
    plant_link(folder / planted, outside)
    write_into_folder(folder, lambda staging: Path(staging, planted).write_text("saved"))
    assert not (folder / planted).is_symlink() and (folder / planted).read_text() == "saved"
    assert outside.read_text() == "keep me\n"


def test_a_link_to_an_outside_folder_planted_where_a_subfolder_is_saved_is_replaced_not_merged_into(tmp_path, outside):
    """A save with a subfolder (a tokenizer's, a checkpoint-N) merged its files into an existing subfolder, and
    so into the folder a planted link points at."""
    from hf_ctx.atomic_files import write_into_folder

    folder = tmp_path / "run"
    plant_link(folder / "sub", outside.parent)

    def save(staging):
        os.makedirs(os.path.join(staging, "sub"))
        with open(os.path.join(staging, "sub", "victim.txt"), "w") as f:
            f.write("saved")

    write_into_folder(folder, save)
    assert not (folder / "sub").is_symlink() and (folder / "sub" / "victim.txt").read_text() == "saved"
    assert outside.read_text() == "keep me\n" and sorted(os.listdir(outside.parent)) == ["victim.txt"]


def test_a_link_planted_as_the_output_folders_lock_file_is_refused_and_its_target_kept(tmp_path, outside):
    """`lock_output` opened `.hf_ctx-lock` following links, then truncated it and wrote its process line there."""
    from hf_ctx.tools.output_files import LOCK_FILE, lock_output

    folder = tmp_path / "run"
    plant_link(folder / LOCK_FILE, outside)
    with pytest.raises(OSError, match=rf"{LOCK_FILE} is a symbolic link \(to {outside}\); hf_ctx does not write"):
        lock_output(folder, "--output_dir")
    assert outside.read_text() == "keep me\n"


@pytest.mark.parametrize("create", [True, False], ids=["new", "resumed"])
def test_a_link_planted_where_hf_ctx_embed_writes_its_hdf5_file_is_refused_and_its_target_kept(
    tmp_path, outside, create
):
    """`hf-ctx embed`'s output file (a CommittedFile) was opened following links and truncated."""
    from hf_ctx.tools.output_files import CommittedFile

    output = tmp_path / "vectors.hdf5"
    plant_link(output, outside)
    with pytest.raises(OSError, match="vectors.hdf5 is a symbolic link"):
        CommittedFile(output, create=create)
    assert outside.read_text() == "keep me\n"


def test_a_checkpoint_folder_planted_as_a_link_is_refused_before_the_trainer_writes(tmp_path, outside):
    """The Trainer writes checkpoint-N inside --output_dir: one planted as a link to another folder would take
    the checkpoint (weights, optimizer state) there."""
    from tiny_checkpoints import bert_sequence_classifier
    from transformers import TrainingArguments

    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = bert_sequence_classifier(tmp_path)
    run = tmp_path / "run"
    args = TrainingArguments(output_dir=str(run), report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = CtxTrainer(model=model, args=args, processing_class=tokenizer)
    plant_link(run / "checkpoint-1", outside.parent)
    with pytest.raises(OSError, match=r"checkpoint-1 is a symbolic link .*does not write a checkpoint through"):
        trainer.save_model(str(run / "checkpoint-1"))
    assert sorted(os.listdir(outside.parent)) == ["victim.txt"]
    trainer.save_model()  # --output_dir itself may be a link (another disk): it is the user's
    assert (run / "model.safetensors").is_file()
