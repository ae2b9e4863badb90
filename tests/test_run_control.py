"""How a run started from the command line ends when something other than its data decides: a launcher's process
count (honoured on CPUs, or refused in one line), a loss that diverges (stopped in one line naming the rate), and
an interruption (Ctrl-C, a scheduler's SIGTERM: a few lines, the step, what is kept, the command that resumes,
exit 130 / 143), with no spurious warning when the run resumes. The launches and interruptions are real
subprocesses of `examples/run_glue.py` on a tiny CSV task."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tiny_checkpoints import WORDS, bert_tokenizer
from transformers import Trainer, TrainerControl, TrainerState, TrainingArguments

from hf_ctx.tools import scripts
from hf_ctx.tools.errors import interruptions_as_messages, resume_command, run_script, stop_signals_held
from hf_ctx.tools.trainer import LOSS_RISE_LOGS, NonFiniteTrainingCallback, checkpoint_problems

REPO = Path(__file__).resolve().parents[1]
RUN_GLUE = REPO / "examples" / "run_glue.py"


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> dict[str, Path]:
    """A CSV task ("pos" iff the sentence holds "cat"), its tokenizer folder, and the files' folder."""
    root = tmp_path_factory.mktemp("task")
    bert_tokenizer(root).save_pretrained(root / "tokenizer")
    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("validation", 16)):
        rows = ["text,label"]
        for _ in range(n):
            words = " ".join(rng.choice(WORDS, 5))
            rows.append(f"{words},{'pos' if 'cat' in words else 'neg'}")
        (root / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return {"train": root / "train.csv", "validation": root / "validation.csv", "tokenizer": root / "tokenizer"}


def arguments(task, output_dir, *extra) -> list[str]:
    return [
        "--train_file", str(task["train"]), "--model_type", "bert",
        "--config_name", "tiny", "--tokenizer_name", str(task["tokenizer"]), "--max_seq_length", "16",
        "--do_train", "--per_device_train_batch_size", "8", "--report_to", "none", "--disable_tqdm", "true",
        "--seed", "0", "--output_dir", str(output_dir), *extra,
    ]  # fmt: skip


def environment(**extra) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path), **extra}


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


# --- divergence ----------------------------------------------------------------------------------------------


def log(callback, step, loss, history):
    """One training log of `loss` at `step`, as the Trainer makes it (into the history, then the callback)."""
    line = {"loss": loss, "step": step}
    history.append(line)
    state = TrainerState(global_step=step, log_history=history)
    callback.on_log(TrainingArguments("unused", report_to=[], learning_rate=0.5), state, TrainerControl(), logs=line)


def test_a_loss_far_above_its_start_for_three_logs_stops_and_noise_does_not():
    """Spikes (one log 10x the start), a near-zero loss that rises by 0.03 (13x its start) and a loss back below
    its start between rises pass; `LOSS_RISE_LOGS` logs in a row above 4x the start stop the run, naming both
    losses, the rate and a lower one."""
    callback, history = NonFiniteTrainingCallback(), []
    for step, loss in enumerate([0.7, 0.5, 7.0, 0.4, 3.0, 3.0, 0.3, 3.0, 3.0], start=1):
        log(callback, step, loss, history)
    near_zero, history = NonFiniteTrainingCallback(), []
    for step, loss in enumerate([0.003, 0.04, 0.04, 0.04, 0.04], start=1):
        log(near_zero, step, loss, history)
    callback, history = NonFiniteTrainingCallback(), []
    log(callback, 2, 0.69, history)
    for step in range(3, 3 + LOSS_RISE_LOGS - 1):
        log(callback, step, 314.0, history)
    with pytest.raises(ValueError) as stopped:
        log(callback, 3 + LOSS_RISE_LOGS - 1, 314.0, history)
    assert str(stopped.value).startswith(
        "training diverged: the training loss rose from 0.69 at step 2 to 314 at step 5 (above 4x its start for 3 "
        "logs in a row): the learning rate 0.5 is too high; try --learning_rate 0.001 or lower. Stopped, and no "
        "checkpoint was saved"
    )


def test_a_run_at_learning_rate_10_stops_in_one_line_keeping_its_checkpoint(task, tmp_path, capsys):
    """BERT tiny on the CSV task at --learning_rate 10: the loss goes from 0.7 to hundreds and the run exits 1 in
    one line (before this check: exit 0, and a model that learnt nothing), keeping the checkpoint saved before."""
    out = tmp_path / "run"
    extra = ["--learning_rate", "10", "--max_steps", "40", "--save_strategy", "steps", "--save_steps", "2"]
    with pytest.raises(SystemExit) as stopped:
        run_script(scripts_main(), arguments(task, out, *extra, "--logging_steps", "1"))
    assert stopped.value.code == 1
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith("error: training diverged: the training loss rose from 0.")
    assert "the learning rate 10 is too high; try --learning_rate 0.001 or lower" in line
    kept = sorted(path.name for path in out.glob("checkpoint-*"))
    assert kept and line.endswith(f"the last checkpoint, {kept[-1]} in {out}, is kept")
    assert not (out / "model.safetensors").exists()


def test_an_unknown_metric_for_best_model_and_another_models_checkpoint_are_one_line(task, tmp_path, capsys):
    """--metric_for_best_model that the evaluation does not report (before: transformers' KeyError traceback at
    the first evaluation), and --resume_from_checkpoint of a checkpoint of another shape (before: PyTorch's
    state-dict traceback): one line each, naming what the evaluation reports / the first mismatched weight."""
    best = ["--do_eval", "--validation_file", str(task["validation"]), "--eval_strategy", "steps", "--eval_steps", "1"]
    best += ["--load_best_model_at_end", "--metric_for_best_model", "bogus", "--max_steps", "2"]
    with pytest.raises(SystemExit):
        run_script(scripts_main(), arguments(task, tmp_path / "best", *best))
    [line] = error_lines(capsys.readouterr().err)
    assert line == (
        "error: --metric_for_best_model bogus: the evaluation at step 1 reports no eval_bogus; it reports accuracy, loss"
    )
    saved = ["--max_steps", "1", "--save_strategy", "steps", "--save_steps", "1"]
    run_script(scripts_main(), arguments(task, tmp_path / "tiny", *saved))
    wider = ["--config_overrides", "hidden_size=32,intermediate_size=64", "--max_steps", "2"]
    checkpoint = tmp_path / "tiny" / "checkpoint-1"
    with pytest.raises(SystemExit):
        run_script(
            scripts_main(), arguments(task, tmp_path / "wide", *wider, "--resume_from_checkpoint", str(checkpoint))
        )
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(
        f"error: --resume_from_checkpoint {checkpoint}: its weights do not fit this run's model (size"
    )
    assert line.endswith(
        "it was saved by another model or task. Resume from a checkpoint of this run, or start it without --resume_from_checkpoint"
    )


def scripts_main():
    import run_glue

    return run_glue.main


# --- interruptions -------------------------------------------------------------------------------------------


def test_a_signal_inside_the_block_ends_in_its_lines_and_exit_status(capsys):
    """SIGTERM sent to this very process inside `interruptions_as_messages`: the lines, exit 143, and the handlers
    of before put back."""
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped, interruptions_as_messages(lambda interrupted: "go on: again"):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at the next bytecode
    assert stopped.value.code == 143
    assert capsys.readouterr().err.splitlines() == ["interrupted by SIGTERM", "go on: again"]
    assert signal.getsignal(signal.SIGTERM) is before


def interrupted_while_saving(task, out, monkeypatch, capsys, save) -> tuple[int, list[str]]:
    """run_glue saving a checkpoint every 2 of 100 steps, with `Trainer._save_optimizer_and_scheduler` replaced by
    `save(trainer, folder, original)`: its exit status and the lines it printed from `interrupted by ...` on."""
    original = Trainer._save_optimizer_and_scheduler
    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", lambda self, folder: save(self, folder, original))
    extra = ["--max_steps", "100", "--save_strategy", "steps", "--save_steps", "2"]
    with pytest.raises(SystemExit) as stopped:
        run_script(scripts_main(), arguments(task, out, *extra))
    said = capsys.readouterr().err.splitlines()
    return stopped.value.code, said[next(i for i, line in enumerate(said) if line.startswith("interrupted by")) :]


def test_a_save_that_fails_after_a_stop_signal_arrived_stops_with_its_lines(task, tmp_path, capsys, monkeypatch):
    """Ctrl-C under torchrun: rank 0 is saving checkpoint-4 (the stop held), rank 1 was not and has exited, so
    rank 0's next collective fails. The run stops as interrupted, noting the error and keeping checkpoint-2
    (before: the collective's RuntimeError traceback, and no line saying what is kept; CI, 2026-12-03)."""

    def save_failing_after_a_sigint(self, output_dir, save):
        if self.state.global_step == 4:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)  # where the handler would have raised
            raise RuntimeError("[gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:36230")
        save(self, output_dir)

    out = tmp_path / "run"
    code, said = interrupted_while_saving(task, out, monkeypatch, capsys, save_failing_after_a_sigint)
    assert code == 130 and said[:4] == [
        "interrupted by SIGINT (Ctrl-C)",
        "the save under way did not finish (RuntimeError: [gloo/transport/tcp/pair.cc:547] Connection closed by "
        "peer [127.0.0.1]:36230)",
        "training stopped at step 4 of 100",
        f"kept: the last checkpoint, {out / 'checkpoint-2'}",
    ]
    assert said[4].startswith("resume: ") and said[4].endswith(" --resume_from_checkpoint latest")


def test_a_signal_inside_a_held_block_is_raised_when_the_block_ends(capsys):
    """SIGTERM inside `stop_signals_held` (nested): the block runs to its end, then the lines and exit 143; what
    follows the block does not run."""
    done = []
    with pytest.raises(SystemExit) as stopped, interruptions_as_messages(lambda interrupted: "go on: again"):
        with stop_signals_held():
            with stop_signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.5)
                done.append("inner")
            time.sleep(0.2)
            done.append("outer")
        done.append("after")
    assert done == ["inner", "outer"] and stopped.value.code == 143
    assert capsys.readouterr().err.splitlines() == ["interrupted by SIGTERM", "go on: again"]


def test_a_stop_signal_while_a_checkpoint_is_saved_keeps_that_checkpoint(task, tmp_path, capsys, monkeypatch):
    """SIGTERM arriving in the middle of saving checkpoint-2 (after the weights, before the optimizer's and the
    Trainer's states): the save is finished, then the run stops naming checkpoint-2 as kept (before: it was left
    half written, and the run said nothing was kept yet)."""

    def save_after_a_sigterm(self, output_dir, save):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # where the handler would have raised
        save(self, output_dir)

    out = tmp_path / "run"
    code, said = interrupted_while_saving(task, out, monkeypatch, capsys, save_after_a_sigterm)
    assert code == 143 and said[:3] == [
        "interrupted by SIGTERM",
        "training stopped at step 2 of 100",
        f"kept: the last checkpoint, {out / 'checkpoint-2'}",
    ]
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-2"] and not checkpoint_problems(
        out / "checkpoint-2"
    )


def test_an_interrupted_hf_ctx_command_says_what_is_kept(tmp_path, capsys, monkeypatch):
    """`hf-ctx train-tokenizer` stopped by Ctrl-C while training: two lines, exit 130, no traceback."""
    from hf_ctx.data import wordpiece
    from hf_ctx.tools import cli

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)

    monkeypatch.setattr(wordpiece, "train_wordpiece_tokenizer", interrupted)
    (tmp_path / "text.txt").write_text("red cat\n")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train-tokenizer", str(tmp_path / "text.txt"), "--output_dir", str(tmp_path / "tok")])
    assert stopped.value.code == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted by SIGINT (Ctrl-C)", cli.NOTHING_WRITTEN]


def test_the_resume_command_drops_overwrite_and_asks_for_the_latest_checkpoint(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(RUN_GLUE)])
    argv = ["--do_train", "--overwrite_output_dir", "--output_dir", "a b", "--resume_from_checkpoint", "x"]
    assert resume_command(argv).endswith(" --do_train --output_dir 'a b' --resume_from_checkpoint latest")
    assert resume_command(["--overwrite_output_dir", "true", "--seed", "1"]).endswith(
        " --seed 1 --resume_from_checkpoint latest"
    )


def complete_checkpoint_steps(output_dir: Path) -> list[int]:
    """The steps of the checkpoints in `output_dir` whose last files (the trainer and RNG states: rng_state.pth, or
    one rng_state_<rank>.pth per process) are written."""
    return [
        int(folder.name.split("-")[1])
        for folder in output_dir.glob("checkpoint-*")
        if folder.name[11:].isdigit()
        and (folder / "trainer_state.json").exists()
        and any(folder.glob("rng_state*.pth"))
    ]


def interrupt_when_saved(command: list[str], output_dir: Path, sent: signal.Signals, after_step: int):
    """Run `command`, send it `sent` once a complete checkpoint past `after_step` is in `output_dir`; (exit
    status, stdout + stderr)."""
    log = output_dir.parent / f"{output_dir.name}-{sent.name}.log"
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=environment(), stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        try:
            while time.monotonic() < deadline and process.poll() is None:
                if max(complete_checkpoint_steps(output_dir), default=0) > after_step:
                    time.sleep(0.2)  # the Trainer's state written, the checkpoint moved into place
                    process.send_signal(sent)
                    break
                time.sleep(0.05)
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return process.returncode, log.read_text()


@pytest.mark.slow
def test_ctrl_c_and_sigterm_end_in_a_few_lines_and_the_named_command_resumes(task, tmp_path):
    """A real run of examples/run_glue.py, interrupted by SIGINT once a checkpoint is saved: exit 130, no
    traceback, lines naming the step, the kept checkpoint and the command that resumes; that command, run and
    stopped by SIGTERM, exit 143, goes on from the checkpoint (its next checkpoint's history starts with the first
    run's logs) without transformers' warning that `logging_steps: 0.02 != N`."""
    out = tmp_path / "run"
    extra = ["--max_steps", "100000", "--save_strategy", "steps", "--save_steps", "3", "--save_total_limit", "0"]
    extra += ["--logging_steps", "0.00002"]  # a share of the run, as the scripts' default: every 2 or 3 steps
    command = [sys.executable, str(RUN_GLUE), *arguments(task, out, *extra)]
    code, output = interrupt_when_saved(command, out, signal.SIGINT, after_step=0)
    assert code == 130, output[-3000:]
    assert "Traceback" not in output
    lines = output.splitlines()
    start = lines.index("interrupted by SIGINT (Ctrl-C)")
    said = lines[start:]
    assert len(said) == 4, said
    assert said[1].startswith("training stopped at step ") and said[1].endswith(" of 100000")
    kept = said[2].removeprefix("kept: the last checkpoint, ")
    assert Path(kept).parent == out and (Path(kept) / "model.safetensors").exists(), said
    resume = said[3].removeprefix("resume: ").split()
    assert resume[:2] == ["python", os.path.relpath(RUN_GLUE)] and resume[-2:] == [
        "--resume_from_checkpoint",
        "latest",
    ]

    kept_step = int(Path(kept).name.split("-")[1])
    code, output = interrupt_when_saved([sys.executable, *resume[1:]], out, signal.SIGTERM, after_step=kept_step + 3)
    assert code == 143, output[-3000:]
    assert "Traceback" not in output and "(from trainer_state.json)" not in output, output[-3000:]
    assert "interrupted by SIGTERM" in output
    latest = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    history = json.loads((latest / "trainer_state.json").read_text())["log_history"]
    first_run = json.loads((Path(kept) / "trainer_state.json").read_text())["log_history"]
    assert history[: len(first_run)] == first_run and len(history) > len(first_run)


# --- launchers -----------------------------------------------------------------------------------------------


def test_launcher_environments(monkeypatch):
    """What each launcher sets, read by `launcher_arguments`: torchrun's WORLD_SIZE without a GPU adds --use_cpu;
    accelerate's one-process --cpu launch of N (MASTER_ADDR, no WORLD_SIZE) is refused; one process is left
    alone."""
    for name in (
        "WORLD_SIZE",
        "ACCELERATE_USE_CPU",
        "MASTER_ADDR",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "ACCELERATE_MIXED_PRECISION",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(scripts, "_accelerator_available", lambda: False)
    assert scripts.launcher_arguments(["--do_train"]) == (["--do_train"], None)
    monkeypatch.setenv("WORLD_SIZE", "2")
    argv, note = scripts.launcher_arguments(["--do_train"])
    assert argv == ["--do_train", "--use_cpu"] and note.startswith("2 processes and no GPU")
    assert scripts.launcher_arguments(["--use_cpu", "false"]) == (["--use_cpu", "false"], None)
    monkeypatch.setattr(scripts, "_accelerator_available", lambda: True)
    assert scripts.launcher_arguments(["--do_train"]) == (["--do_train"], None)
    monkeypatch.setattr(scripts, "_accelerator_available", lambda: False)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # accelerate launch of multi_gpu.yaml
    with pytest.raises(
        ValueError, match=r"^accelerate launch asks for multi-GPU training \(2 processes\), but no CUDA"
    ):
        scripts.launcher_arguments(["--do_train"])
    assert scripts.launcher_arguments(["--use_cpu"]) == (["--use_cpu"], None)
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION")
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    assert scripts.launcher_arguments([]) == ([], None)  # one process: no MASTER_ADDR
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(ValueError, match=r"^accelerate launch --cpu starts one process whatever --num_processes"):
        scripts.launcher_arguments([])


@pytest.mark.slow
def test_launchers_train_two_cpu_processes_or_refuse_in_one_line(task, tmp_path):
    """torchrun --nproc_per_node 2 without --use_cpu trains 2 gloo processes into one folder (before: two
    separate runs, one dying on the other's lock); accelerate launch --cpu --num_processes 2 exits 1 naming the
    forms that start 2 (before: one process trained, exit 0)."""
    if scripts._accelerator_available():
        pytest.skip("the no-GPU case: with a GPU torchrun trains on it")
    out = tmp_path / "torchrun"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command = [*launcher, str(RUN_GLUE), *arguments(task, out, "--max_steps", "4", "--save_strategy", "no")]
    process = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "process 0 of 2 on cpu" in process.stdout
    assert "2 processes and no GPU: training on CPU processes (gloo)" in process.stdout
    assert "being written by another run" not in process.stderr
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 4
    assert json.loads((out / "trainer_state.json").read_text())["train_batch_size"] == 8  # per process

    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--cpu"]
    launcher += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    command = [*launcher, str(RUN_GLUE), *arguments(task, tmp_path / "accelerate", "--max_steps", "4")]
    process = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=600)
    assert process.returncode != 0
    [line] = error_lines(process.stderr)
    assert line == (
        "error: accelerate launch --cpu starts one process whatever --num_processes says; for 2 CPU processes run "
        f"`accelerate launch --multi_gpu --num_processes 2 {RUN_GLUE} ... --use_cpu` or `torchrun --nproc_per_node "
        f"2 {RUN_GLUE} ... --use_cpu` (docs/distributed.md)"
    )
    assert not (tmp_path / "accelerate" / "trainer_state.json").exists()


# --- interruptions under a launcher --------------------------------------------------------------------------


def test_a_stop_signal_repeated_during_clean_up_is_the_same_stop(capsys):
    """SIGINT, then the SIGTERM a launcher sends while the run cleans up (torchrun forwards the Ctrl-C its process
    group got, then escalates): the first signal's lines and status (before: the second replaced the first, or
    cut its message short with a traceback)."""
    with pytest.raises(SystemExit) as stopped, interruptions_as_messages(lambda interrupted: "go on: again"):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
    assert stopped.value.code == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted by SIGINT (Ctrl-C)", "go on: again"]


@pytest.mark.parametrize("rank", ["0", "1"])
def test_of_the_processes_a_launcher_started_rank_0_alone_says_how_it_was_stopped(rank, capsys, monkeypatch):
    """Under torchrun every process gets the Ctrl-C: rank 0 prints the lines, the others exit with the same
    status in silence (before: each process printed them all)."""
    monkeypatch.setenv("RANK", rank)
    with pytest.raises(SystemExit) as stopped, interruptions_as_messages(lambda interrupted: "go on: again"):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert stopped.value.code == 143
    said = capsys.readouterr().err.splitlines()
    assert said == (["interrupted by SIGTERM", "go on: again"] if rank == "0" else [])


def test_the_resume_command_of_a_launched_run_starts_as_many_processes(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(RUN_GLUE)])
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert resume_command(["--do_train"]) == (
        f"torchrun --nproc_per_node 2 {os.path.relpath(RUN_GLUE)} --do_train --resume_from_checkpoint latest"
    )


@pytest.mark.slow
def test_ctrl_c_under_torchrun_is_said_once(task, tmp_path):
    """torchrun --nproc_per_node 2 on CPUs, Ctrl-C to the whole process group once a checkpoint is saved: the
    lines once (before: once per process), naming the step, the checkpoint and a torchrun command that resumes.
    torchrun itself then ends in its own `SignalException` traceback and status 1 (torchrun's, not the script's)."""
    if scripts._accelerator_available():
        pytest.skip("the no-GPU case")
    out = tmp_path / "run"
    extra = ["--max_steps", "100000", "--save_strategy", "steps", "--save_steps", "3"]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command = [*launcher, str(RUN_GLUE), *arguments(task, out, *extra)]
    log = tmp_path / "torchrun.log"
    with open(log, "w") as written:
        process = subprocess.Popen(
            command, env=environment(), stdout=written, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and process.poll() is None and not complete_checkpoint_steps(out):
                time.sleep(0.05)
            time.sleep(0.2)
            os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    output = log.read_text()
    assert output.count("interrupted by SIGINT (Ctrl-C)") == 1, output[-3000:]
    assert output.count("training stopped at step ") == 1 and output.count("kept: the last checkpoint, ") == 1
    [resume] = [line for line in output.splitlines() if line.startswith("resume: ")]
    assert resume.startswith("resume: torchrun --nproc_per_node 2 ") and resume.endswith(" latest")
    assert output.count("skipping the incomplete checkpoint") <= 1


def test_deepspeed_without_deepspeed_installed_is_one_line(monkeypatch):
    """`--deepspeed CONFIG` or accelerate's DeepSpeed config without the deepspeed package: one line saying to
    install it (transformers' `require_version` would raise `PackageNotFoundError` inside argument parsing)."""
    for name in ("WORLD_SIZE", "ACCELERATE_USE_CPU", "MASTER_ADDR", "ACCELERATE_USE_DEEPSPEED"):
        monkeypatch.delenv(name, raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real_find_spec(name, *a)
    )
    with pytest.raises(ValueError, match=r"^--deepspeed asks for DeepSpeed, but deepspeed is not installed: pip"):
        scripts.launcher_arguments(["--deepspeed", "examples/accelerate/ds_zero2.json"])
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(ValueError, match=r"^the accelerate config \(distributed_type: DEEPSPEED\) asks"):
        scripts.launcher_arguments([])
