"""Output folders as users have them: on another file system (a mount point, a symlink to one), under a parent they
cannot write, on a disk that fills up, with a second writer or a killed one, or already holding a damaged file.
Real file systems where the test may mount one (tests/filesystems.py), else skipped with the reason."""

import errno
import gc
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch
import transformers
from filesystems import other_filesystem, resize, tmpfs
from script_errors import one_error_line
from tiny_checkpoints import bert_sequence_classifier, elmo_bilm

from hf_ctx import ElmoForBiLM
from hf_ctx.atomic_files import TEMPORARY_PREFIX, remove_stale_temporaries, write_into_folder
from hf_ctx.data.atomic_write import atomic_write
from hf_ctx.tools.output_files import CommittedFile, lock_output

REPOSITORY = Path(__file__).resolve().parents[1]


def _temporaries(folder: Path) -> list[str]:
    """hf_ctx's temporary files and folders anywhere under `folder`."""
    return [str(p) for p in folder.rglob("*") if p.name.startswith(TEMPORARY_PREFIX) or p.name.endswith(".tmp")]


def _assert_same_weights(a, b):
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name


# hf_ctx's writing modules alone (standard library only), without the package's __init__: a second process starts
# in a fraction of a second, where importing hf_ctx (torch, transformers) would take seconds.
_LOAD_ATOMIC_FILES = f"""
import sys, types
package = types.ModuleType("hf_ctx")
package.__path__ = [{str(REPOSITORY / "hf_ctx")!r}]
sys.modules["hf_ctx"] = package
from hf_ctx import atomic_files
from hf_ctx.data import atomic_write
from hf_ctx.tools import output_files
"""


def _background(code: str, ready: Path) -> subprocess.Popen:
    """Run `code` (which creates `ready` when it has got where the test wants it) in another Python process, with
    hf_ctx's writing modules imported."""
    process = subprocess.Popen([sys.executable, "-c", _LOAD_ATOMIC_FILES + textwrap.dedent(code)])
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, "the background process ended early"
        assert time.monotonic() < deadline, "the background process never got ready"
        time.sleep(0.05)
    return process


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def _age(paths, seconds: float = 60) -> None:
    """Date `paths` back: temporaries are taken for stale only some seconds after their last change."""
    for path in paths:
        os.utime(path, (time.time() - seconds, time.time() - seconds))


def _classification_data(tokenizer) -> list[dict]:
    encoded = tokenizer(["red cat runs", "blue dog sleeps"] * 4, padding="max_length", max_length=8)
    pairs = zip(encoded["input_ids"], encoded["attention_mask"])
    return [{"input_ids": i, "attention_mask": m, "labels": n % 2} for n, (i, m) in enumerate(pairs)]


# --- 1. another file system ------------------------------------------------------------------------------------


def test_save_pretrained_into_a_symlink_to_another_filesystem_and_into_a_mount_point(tmp_path):
    model, _ = elmo_bilm(tmp_path)
    with other_filesystem(tmp_path) as elsewhere:
        (elsewhere / "models").mkdir()
        link = tmp_path / "output"
        link.symlink_to(elsewhere / "models")
        model.save_pretrained(link)
        _assert_same_weights(ElmoForBiLM.from_pretrained(link), model)
        model.save_pretrained(link)  # over the previous save
        model.save_pretrained(elsewhere)  # the mount point itself, its parent on another file system
        _assert_same_weights(ElmoForBiLM.from_pretrained(elsewhere), model)
        assert _temporaries(elsewhere) == [] and _temporaries(tmp_path / "mnt") == []


def test_trainer_checkpoints_and_final_save_into_a_mount_point(tmp_path):
    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = _classification_data(tokenizer)
    with other_filesystem(tmp_path) as output_dir:
        args = transformers.TrainingArguments(
            output_dir=str(output_dir), max_steps=2, save_steps=1, per_device_train_batch_size=4, report_to=[]
        )
        trainer = CtxTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        trainer.train()
        trainer.save_model()
        trainer.save_state()
        trainer.save_metrics("train", {"loss": 1.0})
        for folder in (output_dir / "checkpoint-1", output_dir / "checkpoint-2", output_dir):
            assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(folder)), folder
        assert {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"} <= set(
            os.listdir(output_dir / "checkpoint-2")
        )
        assert (output_dir / "trainer_state.json").is_file() and _temporaries(output_dir) == []
        _assert_same_weights(type(model).from_pretrained(output_dir), model)


_SAVE_AS_ANOTHER_USER = """
    import os
    os.setgid(65534)
    os.setuid(65534)

    def write(folder):
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write("{{}}")

    atomic_files.write_into_folder({folder!r}, write)
    atomic_write.write_text(os.path.join({folder!r}, "all_results.json"), "{{}}")
    print(sorted(os.listdir({folder!r})))
"""


def test_an_output_folder_of_ones_own_under_a_parent_one_cannot_write():
    with tempfile.TemporaryDirectory() as base:  # the system's, which every user may enter (pytest's is 0700)
        os.chmod(base, 0o755)
        shared = Path(base) / "scratch"
        own = shared / "me"
        own.mkdir(parents=True)
        if os.geteuid() == 0:  # root writes anywhere: the save runs as a user who owns `own` only
            os.chown(own, 65534, 65534)
            code = _LOAD_ATOMIC_FILES + textwrap.dedent(_SAVE_AS_ANOTHER_USER.format(folder=str(own)))
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "['all_results.json', 'config.json']"
        else:
            os.chmod(shared, 0o555)
            try:
                write_into_folder(own, lambda folder: Path(folder, "config.json").write_text("{}"))
            finally:
                os.chmod(shared, 0o755)
            assert sorted(os.listdir(own)) == ["config.json"]


# --- 4. one writer at a time -------------------------------------------------------------------------------------

_HOLD_LOCK = """
    import pathlib, time
    output_files.lock_output({folder!r})
    pathlib.Path({ready!r}).touch()
    time.sleep(600)
"""


def test_a_second_run_into_one_output_dir_is_refused_and_a_killed_one_leaves_no_lock(tmp_path, capsys):
    import run_ner

    from hf_ctx.tools.errors import run_script

    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n")
    output_dir = tmp_path / "out"
    argv = ["--model_type", "bert", "--train_file", str(train), "--do_train", "--output_dir", str(output_dir)]
    argv += ["--report_to", "none"]
    holder = _background(_HOLD_LOCK.format(folder=str(output_dir), ready=str(tmp_path / "ready")), tmp_path / "ready")
    try:
        line = one_error_line(capsys, lambda: run_script(run_ner.main, argv))
        assert line == (
            f"error: --output_dir {output_dir} is being written by another run (process {holder.pid} on "
            f"{os.uname().nodename}); wait for it to finish, or choose another folder"
        )
    finally:
        _kill(holder)
    lock_output(output_dir)  # the kernel released the killed process's lock
    lock_output(output_dir)  # and this process taking it again is no error


_HOLD_COMMITTED_FILE = """
    import pathlib, time
    store = output_files.CommittedFile({path!r})
    store.write(b"written by the first run")
    pathlib.Path({ready!r}).touch()
    time.sleep(600)
"""


def test_a_second_embed_into_one_file_is_refused_and_leaves_the_file_alone(tmp_path, capsys):
    from hf_ctx.tools.cli import main as cli_main

    model, tokenizer = elmo_bilm(tmp_path)
    model.save_pretrained(tmp_path / "elmo")
    tokenizer.save_pretrained(tmp_path / "elmo")
    sentences = tmp_path / "input.txt"
    sentences.write_text("red cat runs\nblue dog\n")
    output = tmp_path / "vectors.hdf5"
    output.write_bytes(b"the first run's file")
    code = _HOLD_COMMITTED_FILE.format(path=str(output), ready=str(tmp_path / "ready"))
    holder = _background(code, tmp_path / "ready")
    embed = ["embed", str(tmp_path / "elmo"), str(sentences), str(output), "--overwrite"]
    try:
        line = one_error_line(capsys, lambda: cli_main(embed))
        assert (
            line == f"error: {output} is being written by another process; wait for it to finish, or write elsewhere"
        )
        assert output.read_bytes() == b"the first run's file"  # not truncated by the refused --overwrite
    finally:
        _kill(holder)
    cli_main(embed)  # the killed writer's lock is gone
    import h5py

    with h5py.File(output, "r") as f:
        assert sorted(f) == ["0", "1", "sentence_to_index"]


def test_committed_files_lock_within_one_process_too(tmp_path):
    first = CommittedFile(tmp_path / "a.bin", create=True)
    with pytest.raises(OSError, match=r"a.bin is being written by another process"):
        CommittedFile(tmp_path / "a.bin", create=True)
    first.close()
    CommittedFile(tmp_path / "a.bin").close()


def test_a_refused_committed_file_never_closes_another_files_descriptor(tmp_path):
    """The refused object is half-made: its close at garbage collection closed its descriptor's number a second
    time, by then another file's (a save elsewhere failed with 'Bad file descriptor')."""
    first = CommittedFile(tmp_path / "a.bin", create=True)
    with pytest.raises(OSError, match="being written by another process") as refused:  # keeps the object alive
        CommittedFile(tmp_path / "a.bin", create=True)
    other = os.open(tmp_path / "b.bin", os.O_RDWR | os.O_CREAT)  # the number the refused file had, reused
    del refused
    gc.collect()
    try:
        os.fstat(other)  # raises EBADF where the collected object closed it
    finally:
        os.close(other)
        first.close()


# --- 6. a damaged file already in the output folder -------------------------------------------------------------


@pytest.mark.parametrize("content", ['{"eval_loss": 1.0, "f1"', "[1, 2]", "\udcff"])
def test_a_damaged_all_results_json_is_replaced_with_a_warning(tmp_path, caplog, content):
    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = elmo_bilm(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "all_results.json").write_bytes(content.encode("utf-8", "surrogateescape"))
    trainer = CtxTrainer(model=model, args=transformers.TrainingArguments(str(run), report_to=[]))
    with caplog.at_level("WARNING", logger="hf_ctx"):
        trainer.save_metrics("train", {"train_loss": 2.0})
    assert json.loads((run / "all_results.json").read_text()) == {"train_loss": 2.0}
    assert f"{run / 'all_results.json'} is " in caplog.text and "replacing it with this run's metrics" in caplog.text


# --- 7. converters and run_qa's predictions on a full disk -------------------------------------------------------


def _elmo_files(tmp_path):
    import numpy as np
    from test_convert_elmo import options_for, write_weights

    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(1))
    return [tmp_path / "options.json", tmp_path / "weights.hdf5"]


def test_convert_elmo_failing_at_the_tokenizer_writes_nothing_and_a_rerun_works(tmp_path, monkeypatch, capsys):
    from hf_ctx import ElmoTokenizer
    from hf_ctx.tools.cli import main as cli_main

    out = tmp_path / "out"
    command = ["convert-elmo", *map(str, _elmo_files(tmp_path)), str(out)]

    def disk_full(self, folder, *args, **kwargs):
        Path(folder, "tokenizer_config.json").write_text('{"tok')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ElmoTokenizer, "save_pretrained", disk_full)
    line = one_error_line(capsys, lambda: cli_main(command))
    assert line.startswith(f"error: [Errno 28] could not write {out / 'tokenizer_config.json'}: No space left")
    assert not out.exists() or os.listdir(out) == []  # no weights without a tokenizer
    monkeypatch.undo()
    cli_main(command)
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= set(os.listdir(out))


def test_convert_elmo_and_convert_bert_on_a_real_full_disk(tmp_path, capsys):
    from test_convert_bert import _source_with_tokenizer

    from hf_ctx.tools.cli import main as cli_main

    _source_with_tokenizer(tmp_path / "bert")
    with tmpfs(tmp_path / "disk", size="32k") as disk:
        for command in (
            ["convert-elmo", *map(str, _elmo_files(tmp_path)), str(disk / "elmo")],
            ["convert-bert", str(tmp_path / "bert"), str(disk / "bert")],
        ):
            out = Path(command[-1])
            line = one_error_line(capsys, lambda command=command: cli_main(command))
            assert line.startswith(f"error: [Errno 28] could not write {out}{os.sep}"), line
            assert "No space left on device" in line
            assert not out.exists() and os.listdir(disk) == []
        resize(disk, "16m")  # space freed: the same commands now work
        for command in (
            ["convert-elmo", *map(str, _elmo_files(tmp_path)), str(disk / "elmo")],
            ["convert-bert", str(tmp_path / "bert"), str(disk / "bert")],
        ):
            cli_main(command)
            assert {"config.json", "model.safetensors"} <= set(os.listdir(command[-1]))
        assert (disk / "bert" / "tokenizer.json").is_file() and (disk / "elmo" / "tokenizer_config.json").is_file()


def test_qa_predictions_are_written_atomically_with_normal_permissions(tmp_path):
    from hf_ctx.data import squad

    mask = os.umask(0o022)
    try:
        path = squad.write_json(tmp_path / "predictions.json", {"q1": "Paris"})
    finally:
        os.umask(mask)
    assert json.loads(path.read_text()) == {"q1": "Paris"}
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    with tmpfs(tmp_path / "disk", size="8k") as disk:
        squad.write_json(disk / "predictions.json", {"q1": "Paris"})
        with pytest.raises(OSError, match=rf"could not write {disk / 'nbest_predictions.json'}: No space left"):
            squad.write_json(disk / "nbest_predictions.json", {"q1": ["Paris " * 1000] * 10})
        assert sorted(os.listdir(disk)) == ["predictions.json"]


# --- 8. what a kill -9 leaves is removed at the next start --------------------------------------------------------

_KILLED_WHILE_SAVING = """
    import pathlib, time

    def write(staging):
        pathlib.Path(staging, "model.safetensors").write_bytes(b"x" * 1000)
        with atomic_write.atomic_write(pathlib.Path({folder!r}) / "all_results.json") as f:
            f.write("{{")
            pathlib.Path({ready!r}).touch()
            time.sleep(600)

    atomic_files.write_into_folder(pathlib.Path({folder!r}) / "checkpoint-16", write)
"""


def test_temporaries_of_a_killed_run_are_removed_at_the_next_start_and_live_ones_are_not(tmp_path):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    code = _KILLED_WHILE_SAVING.format(folder=str(output_dir), ready=str(tmp_path / "ready"))
    writer = _background(code, tmp_path / "ready")
    try:
        left = _temporaries(output_dir)
        assert len(left) == 2, left  # the staged checkpoint folder, all_results.json's temporary
        _age(left)
        assert remove_stale_temporaries(output_dir) == []  # being written: kept
    finally:
        _kill(writer)
    assert len(_temporaries(output_dir)) == 2
    lock_output(output_dir)  # what every example script does when it starts
    assert _temporaries(output_dir) == [] and sorted(os.listdir(output_dir)) == [".hf_ctx-lock", "checkpoint-16"]


def test_the_atomic_writers_remove_stale_temporaries_of_their_folder(tmp_path):
    stale = tmp_path / f"{TEMPORARY_PREFIX}abc.tmp"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"x")
    fresh = tmp_path / f"{TEMPORARY_PREFIX}just-created.tmp"  # a moment before its writer locks it
    fresh.write_bytes(b"")
    _age([stale])
    write_into_folder(tmp_path, lambda folder: Path(folder, "config.json").write_text("{}"))
    assert sorted(os.listdir(tmp_path)) == [fresh.name, "config.json"]


# --- 9. real full disks: one line naming the file ----------------------------------------------------------------


def test_train_tokenizer_on_a_full_disk_is_one_line_naming_the_file(tmp_path, capsys):
    from hf_ctx.tools.cli import main as cli_main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"word{i} other{i % 7} more{i % 13}" for i in range(3000)))
    with tmpfs(tmp_path / "disk", size="8k") as disk:
        command = ["train-tokenizer", str(corpus), "--output_dir", str(disk / "tok"), "--vocab_size", "3000"]
        line = one_error_line(capsys, lambda: cli_main(command))
        assert line.startswith(f"error: [Errno 28] could not write {disk / 'tok'}{os.sep}") and "No space" in line
        assert os.listdir(disk) == []


def test_a_checkpoint_save_on_a_full_disk_is_one_error_naming_the_file_and_keeps_the_last(tmp_path):
    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = _classification_data(tokenizer)
    with tmpfs(tmp_path / "disk", size="16m") as disk:
        args = transformers.TrainingArguments(
            output_dir=str(disk), max_steps=1, save_steps=1, per_device_train_batch_size=4, report_to=[]
        )
        trainer = CtxTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        trainer.train()
        before = sorted(os.listdir(disk / "checkpoint-1"))
        weights = (disk / "checkpoint-1" / "model.safetensors").read_bytes()
        used = sum(p.stat().st_size for p in disk.rglob("*") if p.is_file())
        resize(disk, f"{(used + (used // 2)) // 1024 + 4}k")  # room for about half a checkpoint more
        with pytest.raises(
            OSError, match=rf"\[Errno 28\] could not write {disk / 'checkpoint-1'}{os.sep}\S+: No space"
        ):
            trainer._save_checkpoint(trainer.model, trial=None)
        assert sorted(os.listdir(disk / "checkpoint-1")) == before
        assert (disk / "checkpoint-1" / "model.safetensors").read_bytes() == weights
        assert _temporaries(disk) == []


def test_optimizer_state_on_a_full_disk_is_named(tmp_path):
    """torch.save says only "file write failed" for a full disk; the writer names the file."""
    from hf_ctx.atomic_files import write_into_folder

    with tmpfs(tmp_path / "disk", size="64k") as disk:
        state = {"exp_avg": torch.zeros(100_000)}
        with pytest.raises(OSError, match=rf"could not write {disk / 'ckpt' / 'optimizer.pt'}: No space"):
            write_into_folder(disk / "ckpt", lambda folder: torch.save(state, os.path.join(folder, "optimizer.pt")))
        assert os.listdir(disk) == []


def test_the_bilm_cache_on_a_full_disk_is_one_error_naming_the_file(tmp_path):
    from test_bilm_cache import SENTENCES, taglm

    from hf_ctx import ElmoTokenizer
    from hf_ctx.data.bilm_cache import BiLMStateCache

    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *{w for s in SENTENCES for w in s}])
    features = [dict(tokenizer(s, is_split_into_words=True)) for s in SENTENCES]
    model = taglm(tokenizer)
    with tmpfs(tmp_path / "disk", size="4k") as disk:  # a page: less than the 4.8 kB of the states
        with pytest.raises(OSError, match=rf"could not write the biLM cache {disk}{os.sep}\S+states-\S+ \(the disk"):
            BiLMStateCache(model.bilm, tokenizer, "disk", disk).compute(features, progress=False)
        assert _temporaries(disk) == [] and not list(disk.rglob("*.safetensors"))
        resize(disk, "16m")
        cache = BiLMStateCache(model.bilm, tokenizer, "disk", disk)
        assert len(cache) == 0 and cache.compute(features, progress=False) == len(SENTENCES)


def _doubled(batch):
    return {"text": [text + text for text in batch["text"]]}


def test_the_pretraining_text_cache_on_a_full_disk_is_one_error_naming_the_folder(tmp_path):
    from hf_ctx.data.text import load_text_documents, map_batches

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"Sentence number {i} of a document that fills the cache." for i in range(20000)))
    with tmpfs(tmp_path / "disk", size="64k") as disk:
        with pytest.raises(OSError, match=rf"could not write the datasets cache in {disk}: No space left on device"):
            load_text_documents([corpus], cache_dir=str(disk))
        resize(disk, "16m")
        documents = load_text_documents([corpus], cache_dir=str(disk))
        assert len(documents) == 20000
        stat = os.statvfs(disk)
        resize(disk, f"{(stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024 + 8}k")  # 8 kB left
        cache = os.path.dirname(documents.cache_files[0]["filename"])
        with pytest.raises(OSError, match=rf"could not write the datasets cache in {cache}: No space left on device"):
            map_batches(documents, _doubled)


# --- 13. every writer goes through hf_ctx.atomic_files -------------------------------------------------------------


def test_the_json_writers_of_multiple_choice_and_squad_leave_nothing_on_a_failure(tmp_path, monkeypatch):
    from hf_ctx import atomic_files
    from hf_ctx.data import squad
    from hf_ctx.data.multiple_choice import write_json_atomically

    write_json_atomically(tmp_path / "predictions.json", {"a": 1})
    squad.write_json(tmp_path / "nbest.json", {"a": 1})

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "fsync", disk_full)
    for write, name in ((write_json_atomically, "predictions.json"), (squad.write_json, "nbest.json")):
        with pytest.raises(OSError, match=rf"could not write {tmp_path / name}: No space"):
            write(tmp_path / name, {"a": 2})
        assert json.loads((tmp_path / name).read_text()) == {"a": 1}
    assert sorted(os.listdir(tmp_path)) == ["nbest.json", "predictions.json"]


def test_the_cached_wordpiece_tokenizer_is_written_atomically(tmp_path, monkeypatch):
    from datasets import Dataset

    from hf_ctx.data import pretraining

    cache_dir = tmp_path / "cache"
    documents = Dataset.from_dict({"text": ["red cat runs fast", "blue dog sleeps"] * 50}).map(
        lambda x: x, cache_file_name=str(tmp_path / "cache" / "documents.arrow")
    )
    assert documents.cache_files

    def disk_full(self, folder, *args, **kwargs):
        Path(folder, "vocab.txt").write_text("[PAD]\n")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transformers.BertTokenizer, "save_pretrained", disk_full)
    with pytest.raises(OSError, match=r"could not write .*wordpiece-\w+/vocab.txt: No space"):
        pretraining.train_tokenizer_on_corpus(documents, vocab_size=40, min_frequency=1)
    assert sorted(os.listdir(cache_dir)) == ["documents.arrow"]
    monkeypatch.undo()
    first = pretraining.train_tokenizer_on_corpus(documents, vocab_size=40, min_frequency=1)
    again = pretraining.train_tokenizer_on_corpus(documents, vocab_size=40, min_frequency=1)
    assert first.get_vocab() == again.get_vocab() and _temporaries(cache_dir) == []


def test_atomic_write_names_the_file_of_any_failing_write(tmp_path):
    with (
        pytest.raises(OSError, match=rf"could not write {tmp_path / 'x.json'}: No space"),
        atomic_write(tmp_path / "x.json") as f,
    ):
        f.write("{")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert os.listdir(tmp_path) == []


_RANK = """
    import logging, sys
    import torch.distributed as dist
    from transformers import TrainingArguments
    from hf_ctx.tools.scripts import parse_args_and_set_up

    (args,) = parse_args_and_set_up((TrainingArguments,), sys.argv[1:], logging.getLogger("rank"))
    dist.barrier()  # every rank got past the lock
    print(f"rank {args.process_index} of {args.world_size} started", flush=True)
"""


@pytest.mark.slow  # two processes under torchrun
def test_the_processes_of_one_torchrun_do_not_lock_each_other_out(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(_RANK))
    output_dir = tmp_path / "out"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
    command += ["--output_dir", str(output_dir), "--do_train", "--use_cpu", "--report_to", "none"]
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert sorted(re.findall(r"rank \d of 2 started", done.stdout)) == ["rank 0 of 2 started", "rank 1 of 2 started"]
    assert (output_dir / ".hf_ctx-lock").is_file()


def test_a_full_disk_at_the_checkpoints_trainer_state_names_it(tmp_path, monkeypatch):
    """`Trainer` writes a checkpoint's trainer_state.json itself; a full disk there names it too."""
    from transformers.trainer_callback import TrainerState

    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = bert_sequence_classifier(tmp_path)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=1, save_steps=1, per_device_train_batch_size=4, report_to=[]
    )
    trainer = CtxTrainer(model=model, args=args, train_dataset=_classification_data(tokenizer))

    def disk_full(self, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(TrainerState, "save_to_json", disk_full)
    state = tmp_path / "out" / "checkpoint-1" / "trainer_state.json"
    with pytest.raises(OSError, match=rf"\[Errno 28\] could not write {state}: No space left on device"):
        trainer.train()


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"),
        Exception("No space left on device (os error 28)"),
    ],
)
def test_any_full_disk_error_a_library_raises_is_one_line(capsys, error):
    from hf_ctx.tools.errors import user_errors_as_messages

    def fail():
        with user_errors_as_messages():
            raise error

    line = one_error_line(capsys, fail)
    assert line.startswith(f"error: {error} ({type(error).__name__}: the disk is full; free space and run")
    with pytest.raises(type(error)), user_errors_as_messages(debug=True):
        raise error
    with pytest.raises(ZeroDivisionError), user_errors_as_messages():  # a bug keeps its traceback
        raise ZeroDivisionError


def test_run_ner_into_a_symlink_to_another_filesystem_holding_a_damaged_file_and_a_killed_runs_leftovers(
    tmp_path, caplog
):
    """The whole script: checkpoints, the final model, its card and metrics land on the other file system; what a
    killed run left there (a checkpoint holding a writer's temporary, a damaged all_results.json) is refused by
    name, then removed with --overwrite_output_dir, through the symlink."""
    import run_ner

    from hf_ctx.data.synthetic_ner import generate_ner_corpus

    corpus = generate_ner_corpus(tmp_path / "data", num_train=32, num_validation=8, num_test=8, num_raw=16)
    with other_filesystem(tmp_path) as elsewhere:
        (elsewhere / "runs").mkdir()
        (elsewhere / "runs" / "all_results.json").write_text('{"eval_f1": 0.5, "eval')
        leftover = elsewhere / "runs" / "checkpoint-4" / f"{TEMPORARY_PREFIX}abc.tmp"
        leftover.mkdir(parents=True)
        (leftover / "optimizer.pt").write_bytes(b"x" * 1000)
        _age([leftover])
        output_dir = tmp_path / "out"
        output_dir.symlink_to(elsewhere / "runs")
        arguments = (
            ["--model_type", "bert", "--config_name", "tiny", "--vocab_size", "300", "--max_seq_length", "16"]
            + ["--train_file", str(corpus["train"]), "--validation_file", str(corpus["validation"])]
            + ["--do_train", "--do_eval", "--max_steps", "2", "--save_steps", "1", "--output_dir", str(output_dir)]
            + ["--report_to", "none", "--per_device_train_batch_size", "16", "--disable_tqdm", "true"]
        )
        with pytest.raises(ValueError, match=r"holds the checkpoints of an unfinished run \(checkpoint-4\)"):
            run_ner.main(arguments)
        with caplog.at_level(logging.INFO, logger="hf_ctx.tools.paths"):
            run_ner.main([*arguments, "--overwrite_output_dir"])
        assert "removed what an earlier run left in" in caplog.text and "checkpoint-4" in caplog.text
        saved = set(os.listdir(elsewhere / "runs"))
        assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "trainer_state.json"} <= saved
        assert {name for name in saved if name.startswith("checkpoint-")} == {"checkpoint-1", "checkpoint-2"}
        assert "optimizer.pt" in os.listdir(elsewhere / "runs" / "checkpoint-2")
        results = json.loads((elsewhere / "runs" / "all_results.json").read_text())
        assert "eval_f1" in results and "train_loss" in results and results["eval_f1"] != 0.5
        assert _temporaries(elsewhere) == []
