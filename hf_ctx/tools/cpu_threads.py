"""CPU threads for training: the cores no other process is using, measured again as training goes.

PyTorch's CPU build gives a process one OpenMP thread per core. Alone on idle cores that was the fastest choice
for every model measured here, from the main job's 0.46M-parameter biLM to MiniLM's 22.7M. Beside another busy
process it is the slowest: the threads of OpenMP's team wait for each other at the end of every op by spinning,
and a spinning thread holds the core that the thread it waits for needs (two copies of the main job ran 14 times
slower side by side than one alone). So a training job takes as many threads as there are cores that other
processes leave free, read from the kernel's CPU counters, and reads them again every `RECHECK_SECONDS`: it gives
cores back when another job starts and takes them again when it ends. Measurements:
docs/performance.md#cpu-threads.
"""

import logging
import math
import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

# How often a training job measures again how busy the other processes keep the cores.
RECHECK_SECONDS = 10.0
# The shortest window a measurement averages over: shorter ones see one scheduler tick more or less.
MIN_WINDOW_SECONDS = 0.2
# torch's own choice at start-up (one thread per core, or OMP_NUM_THREADS), the most threads ever chosen.
TORCH_DEFAULT_THREADS = torch.get_num_threads()


def available_cores() -> set[int]:
    """The CPUs this process may run on (its affinity mask, as `taskset` or a container's cpuset limits it)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def busy_cpu_seconds(cpus: set[int]) -> float | None:
    """Seconds the CPUs `cpus` have spent busy (not idle or waiting for I/O) since boot, from Linux's
    /proc/stat; `None` where there is no such file."""
    try:
        with open("/proc/stat") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return None
    ticks = 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            # user nice system idle iowait irq softirq steal (guest time is already counted in user)
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
            ticks += user + nice + system + irq + softirq + steal
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_limit(cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The CPUs a container's CPU limit allows this process (the cgroup's quota over its period, as `docker run
    --cpus` sets it; v2's `cpu.max`, else v1's `cpu.cfs_quota_us`), rounded up; `None` without a limit."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()
    except (OSError, ValueError):
        try:
            quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    if quota in ("max", "-1"):
        return None
    return max(1, math.ceil(int(quota) / int(period)))


class CoreUsage:
    """How many of this process's cores other processes kept busy since the last reading.

    Each reading takes the busy time of the cores this process may use (`busy_cpu_seconds`) and this process's
    own CPU time (`time.process_time`, every thread); the other processes' share is the difference over the wall
    time between readings. `clock`, `own_cpu` and `busy` are injectable for tests.
    """

    def __init__(self, clock=time.monotonic, own_cpu=time.process_time, busy=busy_cpu_seconds):
        self.cpus = available_cores()
        self.limit = cpu_limit()
        self.clock, self.own_cpu, self.busy = clock, own_cpu, busy
        self.last = self._read()

    def _read(self) -> tuple[float, float, float | None]:
        return self.clock(), self.own_cpu(), self.busy(self.cpus)

    def seconds_since_reading(self) -> float:
        return self.clock() - self.last[0]

    def cores_busy_with_others(self) -> float | None:
        """Cores the other processes used on average since the last reading (0 to the number of cores), or `None`
        where the machine does not say (no /proc/stat)."""
        now = self._read()
        (wall0, own0, busy0), (wall1, own1, busy1) = self.last, now
        self.last = now
        if busy0 is None or busy1 is None or wall1 <= wall0:
            return None
        others = ((busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)
        return min(max(others, 0.0), float(len(self.cpus)))


def choose_num_threads(
    cores: int, busy_with_others: float | None, num_threads: int | None = None, limit: int | None = None
) -> int | None:
    """How many intra-op threads to train with, or `None` to leave torch's setting.

    `num_threads` (`--num_threads`) wins; then `OMP_NUM_THREADS`, which torch already read at start-up; then one
    thread per core that other processes leave free (`cores` minus `busy_with_others`, rounded), at least one and
    at most torch's own default and the container's CPU limit (`limit`, `cpu_limit`). Where the machine does not
    say how busy it is, torch's default stays.
    """
    if num_threads is not None:
        return num_threads
    if os.environ.get("OMP_NUM_THREADS") or busy_with_others is None:
        return None
    free = int(cores - busy_with_others + 0.5)
    return max(1, min(free, limit or cores, TORCH_DEFAULT_THREADS))


class CpuThreadsCallback(TrainerCallback):
    """Sets torch's intra-op threads when training (or an evaluation outside training) starts, by
    `choose_num_threads` from the cores other processes leave free, and again every `RECHECK_SECONDS`, so that jobs
    sharing the cores settle on a thread each and a job left alone takes every core. With `--num_threads` or
    `OMP_NUM_THREADS` the number is fixed."""

    def __init__(self, num_threads: int | None = None, usage: CoreUsage | None = None):
        self.num_threads = num_threads
        self.usage = usage or CoreUsage()
        self.decided = False

    def update(self, wait: bool = False, activity: str = "training") -> None:
        """Measure and set the threads where none were set yet, or `RECHECK_SECONDS` have passed; with `wait`,
        first wait for a window of `MIN_WINDOW_SECONDS` to measure over. `activity` ("training", "evaluating",
        "predicting") is what the first message says the threads are for: a run that only predicts trains nothing."""
        since = self.usage.seconds_since_reading()
        if self.decided and (self.num_threads is not None or since < RECHECK_SECONDS):
            return
        if since < MIN_WINDOW_SECONDS and self.num_threads is None:  # a fixed number needs no measurement
            if not wait:
                return
            time.sleep(MIN_WINDOW_SECONDS - since)
        busy = self.usage.cores_busy_with_others()
        cores = len(self.usage.cpus)
        chosen = choose_num_threads(cores, busy, self.num_threads, self.usage.limit)
        first, self.decided = not self.decided, True
        if chosen is None or chosen == torch.get_num_threads():
            return
        torch.set_num_threads(chosen)
        if self.num_threads is not None:
            logger.info(f"{activity} with {chosen} CPU thread(s) (--num_threads)")
        elif first:
            logger.info(
                f"{activity} with {chosen} CPU thread(s): {busy:.1f} of {cores} cores are busy with other processes "
                f"(checked again every {RECHECK_SECONDS:.0f} s; --num_threads fixes the number)"
            )
        else:
            logger.info(f"now {chosen} CPU thread(s): {busy:.1f} of {cores} cores busy with other processes")

    def on_train_begin(self, args, state, control, **kwargs):
        self.update(wait=True)

    def on_step_end(self, args, state, control, **kwargs):
        self.update()
