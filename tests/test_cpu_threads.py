"""The CPU-thread policy: one thread per core that other processes leave free, measured again as training goes."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

import hf_ctx.tools.cpu_threads as cpu_threads
from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_threads, "TORCH_DEFAULT_THREADS", 2)


def test_threads_are_the_cores_other_processes_leave_free(two_cores, monkeypatch):
    choose = cpu_threads.choose_num_threads
    assert choose(2, 0.0) == 2  # alone: every core
    assert choose(2, 0.4) == 2  # a little background work still leaves two cores
    assert choose(2, 0.6) == 1
    assert choose(2, 1.0) == 1  # another job on one core
    assert choose(2, 2.0) == 1  # never fewer than one
    assert choose(16, 0.0) == 2  # never more than torch's own default
    assert choose(16, 0.0, limit=1) == 1  # a container limited to one CPU (docker run --cpus 1)
    assert choose(2, None) is None  # the machine does not say: torch's default stays
    assert choose(2, 0.0, num_threads=3) == 3  # --num_threads wins
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert choose(2, 0.0) is None  # torch already follows the environment
    assert choose(2, 0.0, num_threads=2) == 2


def test_a_container_cpu_limit_is_read_from_its_cgroup(tmp_path):
    assert cpu_threads.cpu_limit(tmp_path) is None  # no cgroup files: no limit
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_threads.cpu_limit(tmp_path) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_threads.cpu_limit(tmp_path) == 2  # 1.5 CPUs: two threads can use them
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_threads.cpu_limit(tmp_path) is None  # cgroup v1 without a limit
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    assert cpu_threads.cpu_limit(tmp_path) == 1


def test_core_usage_subtracts_the_process_own_cpu_time():
    readings = iter([(0.0, 10.0, 100.0), (2.0, 11.0, 103.6), (4.0, 13.0, 106.0), (5.0, 13.0, 200.0)])
    state = {}

    def next_reading():
        state["now"] = next(readings)

    next_reading()
    usage = cpu_threads.CoreUsage(
        clock=lambda: state["now"][0], own_cpu=lambda: state["now"][1], busy=lambda cpus: state["now"][2]
    )
    usage.cpus = {0, 1}
    next_reading()
    assert usage.cores_busy_with_others() == pytest.approx((3.6 - 1.0) / 2)  # 1.3 cores of others
    next_reading()
    assert usage.cores_busy_with_others() == pytest.approx(0.2)  # own 2 s of 2.4 busy seconds
    next_reading()
    assert usage.cores_busy_with_others() == 2.0  # never more than the cores it may use


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc/stat")
def test_a_busy_process_beside_this_one_is_measured():
    usage = cpu_threads.CoreUsage()
    subprocess.run(
        [sys.executable, "-c", "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"],
        check=True,
    )
    assert 0.5 <= usage.cores_busy_with_others() <= len(usage.cpus)


class ScriptedUsage:
    """A `CoreUsage` whose other processes' load and elapsed time the test sets."""

    cpus, limit = {0, 1}, None

    def __init__(self):
        self.busy, self.since = 0.0, 0.0

    def seconds_since_reading(self):
        return self.since

    def cores_busy_with_others(self):
        self.since = 0.0
        return self.busy


def test_threads_follow_other_jobs_as_training_goes(two_cores, restore_threads):
    usage = ScriptedUsage()
    callback = cpu_threads.CpuThreadsCallback(usage=usage)
    torch.set_num_threads(1)
    usage.since = 1.0
    callback.on_train_begin(None, None, None)
    assert torch.get_num_threads() == 2  # alone
    usage.busy, usage.since = 1.0, cpu_threads.RECHECK_SECONDS - 1
    callback.on_step_end(None, None, None)
    assert torch.get_num_threads() == 2  # not measured again yet
    usage.since = cpu_threads.RECHECK_SECONDS
    callback.on_step_end(None, None, None)
    assert torch.get_num_threads() == 1  # another job started
    usage.busy, usage.since = 0.0, cpu_threads.RECHECK_SECONDS
    callback.on_step_end(None, None, None)
    assert torch.get_num_threads() == 2  # it ended

    fixed = cpu_threads.CpuThreadsCallback(num_threads=1, usage=usage)
    usage.since = 1.0
    fixed.on_train_begin(None, None, None)
    assert torch.get_num_threads() == 1
    usage.since = cpu_threads.RECHECK_SECONDS
    fixed.on_step_end(None, None, None)
    assert torch.get_num_threads() == 1  # --num_threads stays, however idle the cores


def test_the_trainer_applies_num_threads(tmp_path, restore_threads):
    (args,) = transformers.HfArgumentParser(CtxTrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", str(tmp_path), "--use_cpu", "--report_to", "none", "--num_threads", "2"]
    )
    trainer = CtxTrainer(model=torch.nn.Linear(10, 10), args=args)
    torch.set_num_threads(1)
    trainer.cpu_threads.update(wait=True)
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="--num_threads must be a positive integer, got 0"):
        CtxTrainingArguments(output_dir=str(tmp_path), num_threads=0)


def test_a_run_that_only_evaluates_or_predicts_does_not_say_it_trains(tmp_path, restore_threads, monkeypatch, caplog):
    """The threads' first message names what they are for: a predict-only run said "training with 1 CPU thread"."""
    monkeypatch.setattr(transformers.Trainer, "evaluate", lambda self, *a, **k: {})
    monkeypatch.setattr(transformers.Trainer, "predict", lambda self, *a, **k: None)
    for method, activity in (("predict", "predicting"), ("evaluate", "evaluating")):
        args = CtxTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", num_threads=2)
        trainer = CtxTrainer(model=torch.nn.Linear(10, 10), args=args)
        torch.set_num_threads(1)
        caplog.clear()
        with caplog.at_level("INFO", logger="hf_ctx.tools.cpu_threads"):
            getattr(trainer, method)(None)
        assert f"{activity} with 2 CPU thread(s) (--num_threads)" in caplog.text
        assert "training with" not in caplog.text
