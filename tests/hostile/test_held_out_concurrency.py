"""Held-out cases, concurrent writers: a second writer into a folder or file another process is writing, two saves
into one folder at once, a save while another process reads. Each must refuse the second writer in one line
naming the folder and the process, or leave one writer's files whole, never a mix and never a reader's file cut.
Each case is a function named after what it tries."""

import os
import threading
import time

import pytest
from script_errors import one_error_line
from test_output_folders import _HOLD_COMMITTED_FILE, _HOLD_LOCK, _background, _kill
from tiny_checkpoints import bert_sequence_classifier, elmo_bilm

from hf_ctx.atomic_files import write_into_folder
from hf_ctx.tools.cli import main as cli_main
from hf_ctx.tools.errors import run_script


@pytest.fixture
def held_folder(tmp_path):
    """An output folder whose writer lock another process holds (a script's run in progress): (folder, process)."""
    folder = tmp_path / "out"
    holder = _background(_HOLD_LOCK.format(folder=str(folder), ready=str(tmp_path / "ready")), tmp_path / "ready")
    yield folder, holder
    _kill(holder)


def test_train_tokenizer_into_a_folder_a_run_is_writing_is_refused_naming_the_process(held_folder, tmp_path, capsys):
    """Before: the tokenizer's files were moved in beside the running script's, which took no notice."""
    folder, holder = held_folder
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("red cat runs\nblue dog sleeps\n" * 20)
    command = ["train-tokenizer", str(corpus), "--output_dir", str(folder), "--vocab_size", "60"]
    line = one_error_line(capsys, lambda: cli_main(command))
    assert line == (
        f"error: output folder {folder} is being written by another run (process {holder.pid} on "
        f"{os.uname().nodename}); wait for it to finish, or choose another folder"
    )
    assert sorted(os.listdir(folder)) == [".hf_ctx-lock"]


def test_a_folder_whose_run_has_ended_takes_a_new_writer(tmp_path):
    """The lock file an ended run leaves is no refusal: the check only tries the lock."""
    from hf_ctx.tools.paths import check_output_dir

    folder = tmp_path / "out"
    holder = _background(_HOLD_LOCK.format(folder=str(folder), ready=str(tmp_path / "ready")), tmp_path / "ready")
    _kill(holder)
    check_output_dir(folder)
    check_output_dir(folder)


@pytest.mark.parametrize("script", ["pretrain_elmo", "pretrain_bert"])
def test_a_second_run_of_another_script_into_a_busy_output_dir_is_one_line(script, held_folder, tmp_path, capsys):
    folder, holder = held_folder
    module = __import__(script)
    train = tmp_path / "train.txt"
    train.write_text("red cat runs\n" * 10)
    argv = ["--train_file", str(train), "--do_train", "--output_dir", str(folder), "--report_to", "none"]
    line = one_error_line(capsys, lambda: run_script(module.main, argv))
    assert f"--output_dir {folder} is being written by another run (process {holder.pid}" in line


def test_embed_overwrite_of_a_file_another_embed_is_writing_is_refused_and_keeps_it(tmp_path, capsys):
    root = tmp_path / "elmo"
    model, tokenizer = elmo_bilm(root)
    model.save_pretrained(root)
    tokenizer.save_pretrained(root)
    output = tmp_path / "vectors.hdf5"
    output.write_bytes(b"")
    holder = _background(
        _HOLD_COMMITTED_FILE.format(path=str(output), ready=str(tmp_path / "ready")), tmp_path / "ready"
    )
    try:
        text = tmp_path / "text.txt"
        text.write_text("red cat\n")
        command = ["embed", str(root), str(text), str(output), "--overwrite", "--no_progress"]
        line = one_error_line(capsys, lambda: cli_main(command))
        assert line.startswith(f"error: {output} is being written by another process")
        assert output.read_bytes() == b""  # as it was: the other writer has not committed, this one wrote nothing
    finally:
        _kill(holder)


_HOLD_FOLDER_MOVES = """
    import fcntl, os, pathlib, time
    fd = os.open({folder!r}, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    pathlib.Path({ready!r}).touch()
    time.sleep(600)
"""


def test_two_saves_into_one_folder_at_once_move_their_files_one_save_at_a_time(tmp_path):
    """Before: each save renamed its files in one by one, so two at once could leave one's vocab.txt beside the
    other's tokenizer.json. Now a save's renames wait while another save's are under way."""
    folder = tmp_path / "tok"
    folder.mkdir()
    holder = _background(
        _HOLD_FOLDER_MOVES.format(folder=str(folder), ready=str(tmp_path / "ready")), tmp_path / "ready"
    )

    def save(staging):
        for name in ("vocab.txt", "tokenizer.json"):
            with open(os.path.join(staging, name), "w") as f:
                f.write("second save")

    saving = threading.Thread(target=write_into_folder, args=(folder, save))
    try:
        saving.start()
        time.sleep(1.0)
        assert saving.is_alive() and not (folder / "vocab.txt").exists()  # waiting for the other save's moves
    finally:
        _kill(holder)
    saving.join(timeout=60)
    assert not saving.is_alive()
    assert (folder / "vocab.txt").read_text() == (folder / "tokenizer.json").read_text() == "second save"


_READ_WHILE_SAVED = """
    import pathlib, time
    path = pathlib.Path({path!r})
    with open(path, "rb") as f:
        pathlib.Path({ready!r}).touch()
        while not pathlib.Path({saved!r}).exists():
            time.sleep(0.05)
        pathlib.Path({out!r}).write_bytes(f.read())
"""


def test_a_reader_that_opened_the_weights_reads_the_old_file_whole_while_a_save_replaces_it(tmp_path):
    from safetensors.torch import load

    model, _ = bert_sequence_classifier(tmp_path)
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    weights = folder / "model.safetensors"
    before = weights.read_bytes()
    code = _READ_WHILE_SAVED.format(
        path=str(weights), ready=str(tmp_path / "ready"), saved=str(tmp_path / "saved"), out=str(tmp_path / "read")
    )
    reader = _background(code, tmp_path / "ready")
    for parameter in model.parameters():
        parameter.data.add_(1.0)
    model.save_pretrained(folder)
    (tmp_path / "saved").touch()
    assert reader.wait(timeout=60) == 0
    assert (tmp_path / "read").read_bytes() == before  # the reader's file was replaced, never written over
    assert load(weights.read_bytes()).keys() == load(before).keys() and weights.read_bytes() != before
