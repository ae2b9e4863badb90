"""`CtxTrainer`: transformers' `Trainer`, made safe to push and to resume (its checkpoints checked before a resume,
every file written atomically, the Trainer's pickled state never uploaded), with the CPU-thread policy it applies
to the model it trains.
"""

import contextlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from time import monotonic, process_time

import datasets
import torch
import transformers
from accelerate.data_loader import prepare_data_loader
from datasets.distributed import split_dataset_by_node
from huggingface_hub import HfApi
from packaging.version import Version
from torch.utils.data import DataLoader, SequentialSampler
from transformers import ProgressCallback, Trainer, TrainerCallback, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, HubStrategy
from transformers.utils.hub import PushInProgress

from ..atomic_files import damaged_file_reason, damaged_files, write_failed, write_into_folder
from ..data.atomic_write import write_text
from ..remote_code import check_finite_weights, nonfinite_tensors
from . import option_kinds as kinds
from .cpu_threads import CpuThreadsCallback
from .errors import SameOnEveryRank, stop_signals_held
from .loading import check_pickle_loads_safely

logger = logging.getLogger(__name__)
# The learning-rate schedules of transformers that take no warm-up (`get_scheduler` ignores the warm-up steps).
SCHEDULES_WITHOUT_WARM_UP = ("constant", "reduce_lr_on_plateau")

# transformers before 5.19 divides a resumed run's train_loss by the global step instead of by the steps the run
# trained (resumed at step 3 of 6, the loss of steps 4-6 over 6); CtxTrainer corrects it.
TRAIN_LOSS_OVER_GLOBAL_STEP = Version(transformers.__version__) < Version("5.19")


# What a checkpoint folder holds beside the model and its tokenizer: the Trainer's own state. None of it is ever
# uploaded: `training_args.bin` is a pickle holding `--hub_token` and local paths; the optimizer, scheduler and
# RNG states are pickles too; `trainer_state.json` names local checkpoint folders.
TRAINING_STATE_PATTERNS = ["training_args.bin", "trainer_state.json", "*.bin", "*.pt", "*.pth", "*.pkl"]


# Words that `--resume_from_checkpoint` accepts for "the latest complete checkpoint in --output_dir".
LATEST_CHECKPOINT = ("latest", "last", "true")


# --- resuming: which checkpoint, and is it complete ---------------------------------------------------------


def _expected_checkpoint_files(
    folder: str, *, world_size: int = 1, tokenizer_files=(), training_state: bool = True
) -> list[str]:
    """The files a `checkpoint-N` folder written by the Trainer should hold (see `missing_checkpoint_files`)."""
    expected = ["config.json", *tokenizer_files]
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        expected.append("model.safetensors.index.json")
        if damaged_file_reason(index) is None:
            with open(index, encoding="utf-8") as f:
                expected += sorted(set(json.load(f)["weight_map"].values()))
    else:
        expected.append("model.safetensors")
    if training_state:
        expected += ["trainer_state.json", "optimizer.pt", "scheduler.pt"]
        expected += ["rng_state.pth"] if world_size == 1 else [f"rng_state_{i}.pth" for i in range(world_size)]
    return expected


def missing_checkpoint_files(folder: str | os.PathLike, **check) -> list[str]:
    """The files a `checkpoint-N` folder written by the Trainer should hold but does not.

    A run killed while saving leaves a checkpoint with some files missing; resuming from it fails somewhere deep
    (or, without `scheduler.pt` or the RNG state, silently trains differently). Checked: `config.json`, the
    weights (`model.safetensors`, or the index and every shard it lists), `tokenizer_files` (the names the
    Trainer's tokenizer saves) and, with `training_state`, `trainer_state.json`, `optimizer.pt`, `scheduler.pt`
    and the RNG state of each of the `world_size` processes. `check`: `world_size`, `tokenizer_files`,
    `training_state`.
    """
    folder = os.fspath(folder)
    return [
        name for name in _expected_checkpoint_files(folder, **check) if not os.path.isfile(os.path.join(folder, name))
    ]


def checkpoint_problems(folder: str | os.PathLike, **check) -> list[str]:
    """What keeps a `checkpoint-N` folder from being resumed: "missing <files>" (`missing_checkpoint_files`) and
    "<file> (<why>) is incomplete or corrupt" for each expected file that `damaged_file_reason` finds truncated
    or damaged (checked without unpickling anything). Empty for a checkpoint that can be resumed."""
    folder = os.fspath(folder)
    missing = missing_checkpoint_files(folder, **check)
    problems = [f"missing {', '.join(missing)}"] if missing else []
    damaged = damaged_files(folder, _expected_checkpoint_files(folder, **check))
    return problems + [f"{file} is incomplete or corrupt" for file in damaged]


def resolve_resume_checkpoint(
    checkpoint: str | os.PathLike | bool | None, output_dir: str | os.PathLike, **check
) -> str | None:
    """The checkpoint folder `--resume_from_checkpoint` means, checked to be complete and undamaged.

    `checkpoint` is a folder, or `True` / "latest" / "last" for the `checkpoint-N` of `output_dir` with the
    highest N among the complete ones: an incomplete or damaged one (a run killed while saving it, a full disk)
    is skipped with a warning naming its files. A folder given by name must be complete: the error names what is
    missing or damaged. `None` / `False` / "" give `None` (train from the start). `check`: the keyword arguments
    of `missing_checkpoint_files`.
    """
    if checkpoint is None or checkpoint is False or checkpoint == "":
        return None
    if checkpoint is True or str(checkpoint).lower() in LATEST_CHECKPOINT:
        pattern = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")
        found = os.listdir(output_dir) if os.path.isdir(output_dir) else []
        steps = sorted((int(m.group(1)) for m in map(pattern.match, found) if m), reverse=True)
        for step in steps:
            folder = os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")
            problems = checkpoint_problems(folder, **check)
            if not problems:
                return check_training_state_pickles(folder)
            logger.warning(
                f"skipping the incomplete checkpoint {folder} ({'; '.join(problems)}); it was "
                "probably being saved when the run stopped"
            )
        raise ValueError(
            f"--resume_from_checkpoint {checkpoint}: no complete {PREFIX_CHECKPOINT_DIR}-N folder in "
            f"{output_dir} (found {len(steps)} incomplete ones)"
        )
    folder = os.fspath(checkpoint)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"--resume_from_checkpoint: {folder} does not exist or is not a folder")
    problems = checkpoint_problems(folder, **check)
    if problems:
        raise ValueError(
            f"--resume_from_checkpoint: {folder} is an incomplete checkpoint (the run probably stopped "
            f"while saving it): {'; '.join(problems)}. Resume from an earlier checkpoint, or "
            f"pass 'latest' to use the latest complete one in {output_dir}"
        )
    return check_training_state_pickles(folder)


def check_training_state_pickles(folder: str) -> str:
    """`folder` once every pickle the Trainer reads when it resumes from it (the optimizer, scheduler, gradient
    scaler and RNG states: `*.pt`, `*.pth`) holds only tensors and plain values (`check_pickle_loads_safely`,
    which runs nothing); else a `ValueError` naming the first that holds more. `training_args.bin` is never
    read."""
    # A training state has no safetensors form the Trainer resumes from: the way on is another start.
    way_on = (
        f"Resume from a checkpoint your own run saved, or start a new run from {folder}'s weights without "
        "--resume_from_checkpoint (--model_name_or_path reads model.safetensors only)"
    )
    for name in sorted(os.listdir(folder)):
        if name.endswith((".pt", ".pth")):
            path = os.path.join(folder, name)
            check_pickle_loads_safely(path, "training state --resume_from_checkpoint reads", way_on)
    return folder


def _steps_as_resumed(args: TrainingArguments, checkpoint: str | None) -> dict[str, int]:
    """{"logging_steps": 40, ...}: the `--logging_steps`, `--eval_steps` and `--save_steps` given as shares of the
    run (0.02) that the resumed `checkpoint`'s trainer state holds as the number of steps they came to (40 of its
    `max_steps`), for the resumed run to use while `Trainer.train` compares them: given as shares, transformers
    warns that "logging_steps: 0.02 (from args) != 40 (from trainer_state.json)" on every resume of a run of the
    same length. A run resumed with another length (`--max_steps`, `--num_train_epochs`) keeps its shares, and
    transformers' warning."""
    state_file = os.path.join(checkpoint, "trainer_state.json") if checkpoint is not None else None
    if state_file is None or damaged_file_reason(state_file) is not None:
        return {}
    state = TrainerState.load_from_json(state_file)
    if args.max_steps > 0:
        same_length = args.max_steps == state.max_steps
    else:
        same_length = args.num_train_epochs == state.num_train_epochs
    if not same_length:
        return {}
    resolved = {}
    for name in ("logging_steps", "eval_steps", "save_steps"):
        share, saved = getattr(args, name, None), getattr(state, name, None)
        if share is not None and 0 < share < 1 and saved == math.ceil(state.max_steps * share):
            resolved[name] = saved
    return resolved


def _earlier_metrics(path: str) -> dict:
    """The metrics an earlier step or run saved in `path` (`all_results.json`), to merge the new ones into; {}
    when there is none. A file that is damaged or not a JSON object is replaced, with a warning naming it: a run
    that has trained must not fail over it."""
    if not os.path.exists(path):
        return {}
    reason = damaged_file_reason(path)
    if reason is None:
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
        if isinstance(earlier, dict):
            return earlier
        reason = f"a JSON {type(earlier).__name__}, not an object"
    logger.warning(f"{path} is {reason}; replacing it with this run's metrics")
    return {}


# --- divergence: training stops, and no checkpoint of non-finite weights is written -------------------------

# Logged steps in a row whose loss or gradient norm may be NaN or infinite while the weights stay finite before
# training stops. Under fp16 loss scaling, a step whose gradients overflow is skipped (the weights do not change)
# and logs an infinite gradient norm; a few such steps in a row are normal while the scale settles, more mean the
# loss itself is not finite and nothing is being learnt. Non-finite weights stop training at the first such log.
NONFINITE_LOGS_TOLERATED = 5

# A finite loss that diverges: logged losses above LOSS_RISE_FACTOR times the run's first logged loss (and at least
# LOSS_RISE_MARGIN above it) for LOSS_RISE_LOGS logs in a row. A run that learns logs losses below its first one
# (its first log is the loss of random or pretrained weights, averaged over the first steps); a noisy batch or
# the warm-up can lift one log above it, but not to 4 times it for three logs in a row (none of the runs of
# tests/test_run_glue.py, test_training.py or test_run_ner.py's divergence test trips it), while --learning_rate 10
# on a tiny BERT classifier goes from 0.71 to 489 in 4 steps. The margin keeps a loss near zero from tripping the
# factor: a tiny BERT memorising 128 sentences logged 0.0003 and then 0.0038 (13x) at step ~1500 of 2000.
LOSS_RISE_FACTOR = 4.0
LOSS_RISE_MARGIN = 1.0
LOSS_RISE_LOGS = 3


class NonFiniteTrainingCallback(TrainerCallback):
    """Stops training with a `ValueError` when it diverges: at a logged non-finite `loss` or `grad_norm` whose
    step left the weights non-finite (checked then, one pass over them), after `NONFINITE_LOGS_TOLERATED`
    such logs in a row, or after `LOSS_RISE_LOGS` logged losses in a row far above the run's first one
    (`LOSS_RISE_FACTOR`, `LOSS_RISE_MARGIN`). Raised from `on_log`, which the Trainer calls before it saves that
    step, so the last checkpoint on disk is the last one saved before the run was stopped. Costs nothing while the
    logged values are finite. (`--logging_nan_inf_filter`, on by default, keeps NaN losses out of the logged loss;
    the gradient norm, logged wherever gradients are clipped, still shows them.)"""

    def __init__(self):
        self.nonfinite_logs = 0
        self.risen_logs = 0
        self.last_saved_step = None

    def on_save(self, args, state, control, **kwargs):
        self.last_saved_step = state.global_step

    def _kept(self, args) -> str:
        if self.last_saved_step is None:
            return "no checkpoint was saved"
        return f"the last checkpoint, {PREFIX_CHECKPOINT_DIR}-{self.last_saved_step} in {args.output_dir}, is kept"

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        bad = {
            key: value
            for key, value in (logs or {}).items()
            if key in ("loss", "grad_norm") and isinstance(value, (int, float)) and not math.isfinite(value)
        }
        if not bad:
            self.nonfinite_logs = 0
            self._check_loss_rise(args, state, logs or {})
            return
        self.nonfinite_logs += 1
        weights = nonfinite_tensors(model.state_dict()) if model is not None else []
        if not weights and self.nonfinite_logs < NONFINITE_LOGS_TOLERATED:
            return
        logged = ", ".join(f"{key} {value}" for key, value in bad.items())
        if weights:
            why = f"{len(weights)} weight tensor(s) hold NaN or infinite values (first: {weights[0][0]})"
        else:
            why = f"{self.nonfinite_logs} logged steps in a row were not finite"
        raise ValueError(
            f"training diverged at step {state.global_step} ({logged}; {why}); stopped, and {self._kept(args)}. "
            f"Lower --learning_rate (now {args.learning_rate:g}), or check the data and --max_grad_norm"
        )

    def _check_loss_rise(self, args, state, logs: dict) -> None:
        """The finite half: `LOSS_RISE_LOGS` logged losses in a row far above the run's first logged loss (that of
        the first line of `state.log_history` holding one: a resumed run keeps its start)."""
        loss = logs.get("loss")
        if not _is_training_log(logs) or not isinstance(loss, (int, float)):
            return
        first = next(
            (line for line in state.log_history if isinstance(line.get("loss"), (int, float)) and "step" in line),
            None,
        )
        if first is None or first["step"] >= state.global_step:
            return
        start = first["loss"]
        if not loss > max(LOSS_RISE_FACTOR * start, start + LOSS_RISE_MARGIN):
            self.risen_logs = 0
            return
        self.risen_logs += 1
        if self.risen_logs < LOSS_RISE_LOGS:
            return
        rate = args.learning_rate
        lower = getattr(args, "suggested_learning_rate", None)
        if lower is not None and lower < rate:
            suggestion = f"{lower:g} (hf_ctx's default for this model)"
        else:  # a tenth, and no higher than the rates hf_ctx measured its models from scratch at
            suggestion = f"{min(rate / 10, 1e-3):g}"
        raise ValueError(
            f"training diverged: the training loss rose from {start:.4g} at step {first['step']} to {loss:.4g} at "
            f"step {state.global_step} (above {LOSS_RISE_FACTOR:g}x its start for {LOSS_RISE_LOGS} logs in a row): "
            f"the learning rate {rate:g} is too high; try --learning_rate {suggestion} or lower. Stopped, and "
            f"{self._kept(args)}"
        )


@contextlib.contextmanager
def transformers_progress_bars_off():
    """No progress bars of transformers while the block runs (as before it, after). `save_pretrained` draws a
    "Writing model shards" bar even for one file, and `from_pretrained` a "Loading weights" one: lines of noise
    where a save or a load takes a second."""
    shown = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers.utils.logging.enable_progress_bar()


def progress_to_terminal() -> bool:
    """Whether progress bars reach a person at a terminal (stderr, where tqdm draws them); else they go to a file
    or a pipe, where each redraw would be one more line."""
    return sys.stderr is not None and sys.stderr.isatty()


def _is_training_log(logs: dict) -> bool:
    """Whether a Trainer log line is the periodic training log (loss, learning rate, gradient norm), not an
    evaluation's metrics or the end-of-training summary."""
    return "loss" in logs and not any(key.startswith("eval_") for key in logs)


class ProgressLinesCallback(TrainerCallback):
    """The Trainer's progress for a log file: a line each time a tenth of the steps, or `every_seconds`, passes,
    saying how far training is and the latest training loss ("step 50/669 (7%), 18 s, about 160 s left, loss
    2.314"), and a line for each evaluation with its metrics. No line per step, no evaluation bars, and no line per
    logged loss (the run's curves and its card show them all); the end-of-training summary (`train_runtime`, ...)
    is left to the scripts' "train metrics" block, and what an evaluation after training logs to their metrics."""

    def __init__(self, every_seconds: float = 300.0):
        self.every_seconds = every_seconds
        self.training = False
        self.loss = None
        self.line_due = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.training = True
        self.started = self.last_time = time.perf_counter()
        self.last_step = state.global_step

    def _progress(self, state) -> str:
        """Where training is, when it should end at the pace so far, and the latest training loss."""
        self.last_time, self.last_step = time.perf_counter(), state.global_step
        elapsed = self.last_time - self.started
        left = elapsed * (state.max_steps - state.global_step) / max(state.global_step, 1)
        share = 100 * state.global_step / state.max_steps
        loss = f", loss {self.loss:.4g}" if self.loss is not None else ""
        return (
            f"step {state.global_step}/{state.max_steps} ({share:.0f}%), {elapsed:.0f} s, about {left:.0f} s left"
            + loss
        )

    def on_step_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not state.max_steps:
            return
        tenth_passed = (state.global_step - self.last_step) * 10 >= state.max_steps
        if tenth_passed or time.perf_counter() - self.last_time >= self.every_seconds:
            # This step's loss is about to be logged, or an evaluation's line to say how far training is: wait.
            if control.should_log or control.should_evaluate:
                self.line_due = True
            else:
                print(self._progress(state), flush=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not self.training or not logs or "train_runtime" in logs:
            return
        if _is_training_log(logs):
            self.loss = logs["loss"] if isinstance(logs["loss"], (int, float)) else self.loss
            if self.line_due and state.max_steps and not (control and control.should_evaluate):
                self.line_due = False
                print(self._progress(state), flush=True)
            return
        self.line_due = False  # the evaluation's line says how far training is
        shown = {k: f"{v:.4g}" if isinstance(v, float) else v for k, v in logs.items() if k != "total_flos"}
        print(f"{self._progress(state)}: {shown}" if state.max_steps else shown, flush=True)

    def on_train_end(self, args, state, control, **kwargs):
        self.training = False


class ProgressBarCallback(ProgressCallback):
    """transformers' progress bar for a terminal, with the latest training loss beside the bar instead of a line
    per logged loss; evaluations are written as lines, as `ProgressCallback` writes them."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and _is_training_log(logs):
            if state.is_world_process_zero and self.training_bar is not None:
                self.training_bar.set_postfix(loss=f"{logs['loss']:.4g}", refresh=False)
            return
        super().on_log(args, state, control, logs=logs, **kwargs)


# Without --logging_steps, the training loss is logged this many times a run, whatever its length, so that every
# run's curve has its shape (transformers' 500 steps log nothing in a shorter run); without --eval_steps, a run
# with --eval_strategy steps evaluates this many times (an evaluation costs far more than a log line).
LOGGED_POINTS = 50
EVALUATIONS = 10


@dataclass
class CtxTrainingArguments(TrainingArguments):
    """`TrainingArguments` with the examples' defaults (at most 2 checkpoints kept; logging and evaluation steps
    that scale with the run's length) and the settings of their training that it lacks: CPU threads, time
    limits, and writing over an earlier run's output folder."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "write into an --output_dir that holds an earlier run (a trained model, checkpoints, results), "
            "removing its weights, checkpoints, results and card first; without it such a folder is refused, "
            "unless --resume_from_checkpoint continues its training"
        },
    )

    logging_steps: float | None = field(
        default=None,
        metadata={
            "help": f"log the training loss every N steps (below 1: that share of the run); default: {LOGGED_POINTS} "
            "times a run, whatever its length"
        },
    )

    eval_steps: float | None = field(
        default=None,
        metadata={
            "help": f"with --eval_strategy steps, evaluate every N steps (below 1: that share of the run); default: "
            f"{EVALUATIONS} times a run"
        },
    )

    save_steps: float | None = field(
        default=None,
        metadata={
            "help": "with --save_strategy steps, save a checkpoint every N steps (below 1: that share of the run); "
            "default: 500, or with --load_best_model_at_end at each evaluation"
        },
    )

    save_total_limit: int | None = field(
        default=2,
        metadata={
            "help": "keep at most this many checkpoint-N folders in --output_dir, deleting the oldest; the best one "
            "of --load_best_model_at_end is always kept (default 2, where transformers keeps every one and a long "
            "run fills the disk; 0 keeps every one)"
        },
    )

    num_threads: int | None = field(
        default=None,
        metadata={
            "help": "CPU threads for training (default: OMP_NUM_THREADS when set, else one per core that other "
            "processes leave free, measured again every 10 s: alone, a job uses every core; beside other jobs, "
            "threads that share a core wait for each other)"
        },
    )

    max_train_minutes: float | None = field(
        default=None,
        metadata={
            "help": "stop training after this many minutes of wall time, at the end of a step, as if --max_steps "
            "had been reached: the model is saved and evaluated as usual (for a run that must fit a time window)"
        },
    )

    max_train_cpu_minutes: float | None = field(
        default=None,
        metadata={
            "help": "stop training after this many minutes of this process's CPU time spent training (validation "
            "excluded), at the end of a step: runs compared at equal compute stay comparable on a shared machine, "
            "where wall time depends on the other jobs"
        },
    )

    def __post_init__(self):
        kinds.check_declared_options(self)  # as the scripts' parser does, for arguments built in Python
        # Shares of the run (transformers reads a number below 1 as one), resolved when training starts.
        if self.logging_steps is None:
            self.logging_steps = 1 / LOGGED_POINTS
        if self.eval_steps is None and str(getattr(self.eval_strategy, "value", self.eval_strategy)) == "steps":
            self.eval_steps = 1 / EVALUATIONS
        if self.save_steps is None:
            # --load_best_model_at_end keeps the best of the saved checkpoints: one is saved at each evaluation.
            self.save_steps = self.eval_steps if self.load_best_model_at_end and self.eval_steps else 500
        super().__post_init__()


class TrainingTimeLimit(TrainerCallback):
    """Ends training at the first step that finishes after `minutes` of wall time from the start of training;
    the Trainer then stops as at `max_steps` (the state it logs says how many steps were done)."""

    flag = "--max_train_minutes"

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.started = None

    def elapsed(self) -> float:
        return monotonic() - self.started

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if self.elapsed() >= self.seconds:
            logger.warning(f"{self.flag} {self.seconds / 60:g} reached at step {state.global_step}: stopping")
            control.should_training_stop = True
        return control


class TrainingCPUTimeLimit(TrainingTimeLimit):
    """`TrainingTimeLimit` on this process's CPU time (all its threads), less the time spent validating: the
    clock of runs compared at equal compute. Every log line gets `train_cpu_minutes`, the x axis of such a
    comparison."""

    flag = "--max_train_cpu_minutes"

    def __init__(self, minutes: float):
        super().__init__(minutes)
        self.validating = 0.0
        self.last_step_end = None

    def elapsed(self) -> float:
        return process_time() - self.started - self.validating

    def on_train_begin(self, args, state, control, **kwargs):
        # a resumed run goes on from the training CPU time of its checkpoint's last log line
        spent = next((e["train_cpu_minutes"] for e in reversed(state.log_history) if "train_cpu_minutes" in e), 0)
        self.started = self.last_step_end = process_time() - spent * 60

    def on_step_end(self, args, state, control, **kwargs):
        self.last_step_end = process_time()
        return super().on_step_end(args, state, control, **kwargs)

    def on_evaluate(self, args, state, control, **kwargs):
        # the Trainer validates between a step's end and the next step: that span is not training
        self.validating += process_time() - self.last_step_end
        self.last_step_end = process_time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or self.started is None:
            return
        # a validation's line is logged before `on_evaluate`: its minutes are those of the step it validated
        validation = any(key.startswith("eval_") for key in logs)
        seconds = self.last_step_end - self.started - self.validating if validation else self.elapsed()
        # the Trainer has put this line into `state.log_history` (the line kept) before calling back
        for line in (logs, state.log_history[-1] if state.log_history else None):
            if line is not None:
                line["train_cpu_minutes"] = round(seconds / 60, 3)


class CtxTrainer(Trainer):
    """transformers' `Trainer`, made safe to push and to resume; the examples train with it.

    - `--push_to_hub` with checkpoints (`--hub_strategy every_save`, the default): each save uploads the model
      files of the new checkpoint folder (config with `auto_map`, weights, the source files the `auto_map`
      names, tokenizer), so every revision of the repository loads with `trust_remote_code`. The Trainer's own
      state never goes: `Trainer` would upload `training_args.bin`, a pickle holding `--hub_token` and local
      paths. `--hub_strategy checkpoint` / `all_checkpoints` upload that state by design and are refused.
    - Where stderr is no terminal (a log file), progress is `ProgressLinesCallback`'s line every tenth of the
      steps instead of a tqdm bar redrawn at every step; at a terminal, the bar shows the latest training loss
      (`ProgressBarCallback`) instead of a line per logged loss.
    - On the CPU, torch's intra-op threads follow the cores other processes leave free, measured when training or
      an evaluation starts and every 10 s of training (`CpuThreadsCallback`; `--num_threads` of
      `CtxTrainingArguments` or `OMP_NUM_THREADS` fixes the number).
    - `train(resume_from_checkpoint=...)` checks the checkpoint is complete (`resolve_resume_checkpoint`):
      "latest" or `True` skips an incomplete one with a warning; a named incomplete one is an error naming the
      missing files.
    - A run that diverges (non-finite values, or a loss far above its start) stops with a `ValueError`
      (`NonFiniteTrainingCallback`), and weights holding NaN or infinite values are never saved (`save_model`):
      the last checkpoint written is the last finite one.
    - Evaluation and prediction keep the examples' order, `group_by_length` or not (`_get_eval_sampler`).
    - An interruption of `train` (Ctrl-C; SIGTERM under `hf_ctx.tools.errors.run_script`) gets the step reached
      and the last complete checkpoint as notes, which the scripts print in a few lines with the command that
      resumes. Resumed, the logging, evaluation and save steps given as shares of the run are compared with the
      checkpoint's as the numbers they came to (`_steps_as_resumed`): no warning that 0.02 != 40.
    """

    def __init__(self, model=None, args: TrainingArguments | None = None, *rest, **kwargs):
        if (
            args is not None
            and args.push_to_hub
            and args.hub_strategy in (HubStrategy.CHECKPOINT, HubStrategy.ALL_CHECKPOINTS)
        ):
            raise ValueError(
                f"--hub_strategy={args.hub_strategy.value} would upload the training state (training_args.bin holds "
                "--hub_token and local paths); use every_save or end"
            )
        super().__init__(model, args, *rest, **kwargs)
        if getattr(self.args, "max_train_minutes", None) is not None:
            self.add_callback(TrainingTimeLimit(self.args.max_train_minutes))
        if getattr(self.args, "max_train_cpu_minutes", None) is not None:
            self.add_callback(TrainingCPUTimeLimit(self.args.max_train_cpu_minutes))

        self.add_callback(NonFiniteTrainingCallback())
        if not self.args.disable_tqdm:
            self.callback_handler.remove_callback(ProgressCallback)
            to_terminal = progress_to_terminal()
            self.callback_handler.add_callback(ProgressBarCallback() if to_terminal else ProgressLinesCallback())
        self.cpu_threads = None
        if self.args.device.type == "cpu":
            self.cpu_threads = CpuThreadsCallback(getattr(self.args, "num_threads", None))
            self.add_callback(self.cpu_threads)
        self._refuse_unsharded_fsdp()
        self._resumed_at_step = 0  # set by `train` where TRAIN_LOSS_OVER_GLOBAL_STEP

    def _refuse_unsharded_fsdp(self) -> None:
        """FSDP asked for (`--fsdp`, or `accelerate launch` with an FSDP config) but not set up is an error:
        accelerate shards only on GPUs and other accelerators; on CPU processes (gloo) it falls back to plain DDP,
        each process holding the whole model, and says nothing."""
        asked = bool(self.args.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
        if asked and not self.is_fsdp_enabled:
            given, advice = (
                ("--fsdp", "Leave out --fsdp")
                if self.args.fsdp
                else ("accelerate config distributed_type: FSDP", "Launch without the FSDP config")
            )
            raise SameOnEveryRank(
                f"FSDP was asked for ({given}), but accelerate set up {self.accelerator.distributed_type.value} on "
                f"{self.args.device.type}: it shards only on GPUs or other accelerators, so these processes would "
                f"each hold the whole model (plain DDP). {advice} (DDP) or run on GPUs"
            )

    def _get_num_items_in_batch(self, batch_samples: list, device: torch.device):
        """The count of an optimizer step's items that the model's loss is normalised by, summed over its
        micro-batches (and processes, with `average_tokens_across_devices`). For hf_ctx's models, a dict: the count
        of each loss term's items (`loss_items`: sentences for a CRF, pairs for next-sentence prediction, spans for
        QA, predictions for the biLM, whose batches have no `labels`), where `Trainer` counts only the `labels`, so
        that every head's accumulated loss is the big batch's (`losses.AccumulatedBatchLossMixin`)."""
        loss_items = getattr(self.accelerator.unwrap_model(self.model), "loss_items", None)
        # Evaluation keeps each batch's mean: the biLM's per-direction losses are its perplexity metrics. A label
        # smoother or `compute_loss_func` computes the loss outside the model, from `Trainer`'s count of the labels.
        outside = self.label_smoother is not None or self.compute_loss_func is not None
        if loss_items is None or outside or not self.model_accepts_loss_kwargs or not self.model.training:
            return super()._get_num_items_in_batch(batch_samples, device)
        per_batch = [loss_items(batch) for batch in batch_samples]
        terms = sorted(per_batch[0]) if per_batch else []
        if not terms:
            return super()._get_num_items_in_batch(batch_samples, device)
        counts = torch.stack([sum(items[term] for items in per_batch) for term in terms]).to(device)
        if self.args.average_tokens_across_devices and self.args.world_size > 1:
            counts = self.accelerator.gather(counts).view(-1, len(terms)).sum(0)  # one collective for every term
        if self.args.n_gpu > 1:  # DataParallel scatters the counts along dim 0 as `Trainer`'s: one row per GPU
            return {term: count.expand(self.args.n_gpu, 1) for term, count in zip(terms, counts)}
        return dict(zip(terms, counts))

    def get_train_dataloader(self):
        """As `Trainer`'s, except for a streamed training set (`datasets.IterableDataset`) on several processes:
        each process reads its own share of the stream (`datasets.distributed.split_dataset_by_node`: its own
        files when the stream has a multiple of the process count of them, else every N-th example), so no
        example is read twice and none is left out. `Trainer` would have the main process read every batch and
        send each process its part (accelerate's `dispatch_batches`)."""
        dataset = self.train_dataset
        if not isinstance(dataset, datasets.IterableDataset) or self.args.world_size == 1:
            return super().get_train_dataloader()
        own_share = split_dataset_by_node(dataset, rank=self.args.process_index, world_size=self.args.world_size)
        loader = DataLoader(
            own_share,
            batch_size=self._train_batch_size,
            collate_fn=self._get_collator_with_removed_columns(self.data_collator, description="training"),
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
        )
        # Already split: accelerate only moves the batches to the device (one process's view, no second split).
        return prepare_data_loader(
            loader, self.args.device, num_processes=1, process_index=0, put_on_device=True, dispatch_batches=False
        )

    def _get_eval_sampler(self, eval_dataset):
        """Evaluation and prediction read the examples in their order, as `Trainer`'s does without
        `group_by_length`: with it (the scripts' GPU default) `Trainer` batches them by length there too, and the
        predictions came back in that order, which the scripts write beside their examples by index (run_ner
        stopped with "13 words but 16 predictions"; run_glue's test predictions went to other rows)."""
        if eval_dataset is None or not hasattr(eval_dataset, "__len__"):
            return None
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

    # --- writing: every file the Trainer writes appears whole or not at all (hf_ctx.atomic_files) ---------

    def _write_atomically(self, write, output_dir: str | None):
        """Run `write(folder)` on a temporary folder and move its files into `output_dir` (`write_into_folder`);
        directly where several processes write into the same folder (sharded saves). A subfolder of --output_dir
        (a checkpoint) that is a symbolic link is refused."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if os.path.islink(output_dir) and os.path.abspath(output_dir) != os.path.abspath(self.args.output_dir):
            # A `checkpoint-N` planted as a link would take the checkpoint out of --output_dir.
            raise OSError(
                f"{output_dir} is a symbolic link (to {os.readlink(output_dir)}); hf_ctx does not write a "
                "checkpoint through a link. Remove it, or give another --output_dir"
            )
        if self.args.world_size > 1 or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return write(output_dir)
        return write_into_folder(output_dir, write)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """`Trainer.save_model`, refusing weights that hold NaN or infinite values (`check_finite_weights`, one
        pass over them) before anything is written. Sharded models (DeepSpeed, FSDP) are left to their engines:
        no process holds all their weights."""
        if not (self.is_deepspeed_enabled or self.is_fsdp_enabled):
            check_finite_weights(
                self.accelerator.unwrap_model(self.model).state_dict(),
                f"step {self.state.global_step}",
                f"training diverged, so {output_dir or self.args.output_dir} is not written (any checkpoint saved "
                f"before is kept). Lower --learning_rate (now {self.args.learning_rate:g}), or check the data",
            )
        super().save_model(output_dir, _internal_call)

    def _save(self, output_dir: str | None = None, state_dict=None) -> None:
        with transformers_progress_bars_off():  # three lines of noise per checkpoint
            self._write_atomically(lambda folder: Trainer._save(self, folder, state_dict), output_dir)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        self._write_atomically(lambda folder: Trainer._save_optimizer_and_scheduler(self, folder), output_dir)

    def _save_scaler(self, output_dir: str) -> None:
        self._write_atomically(lambda folder: Trainer._save_scaler(self, folder), output_dir)

    def _save_rng_state(self, output_dir: str) -> None:
        self._write_atomically(lambda folder: Trainer._save_rng_state(self, folder), output_dir)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """`Trainer.create_scheduler`, with a warning where the warm-up lasts the whole run: the learning rate would
        never reach `--learning_rate` (a `--warmup_steps` of a long recipe in a short run, in silence before)."""
        warmup = self.args.get_warmup_steps(num_training_steps)
        warms_up = self.args.lr_scheduler_type not in SCHEDULES_WITHOUT_WARM_UP
        if self.lr_scheduler is None and warms_up and warmup >= num_training_steps:
            logger.warning(
                f"--warmup_steps {self.args.warmup_steps:g} warms up over {warmup} steps, the run has "
                f"{num_training_steps}: the learning rate never reaches --learning_rate {self.args.learning_rate:g}; "
                "give fewer warm-up steps (a number below 1 is a share of the run, e.g. 0.1)"
            )
        return super().create_scheduler(num_training_steps, optimizer)

    def _save_checkpoint(self, model, trial) -> None:
        """`Trainer._save_checkpoint`; a full disk while writing the checkpoint's `trainer_state.json` (which
        `Trainer` writes itself; every other file goes through `_write_atomically` and names itself) is an
        `OSError` naming it. A stop signal during the save is raised once the checkpoint is complete
        (`stop_signals_held`), so that an interrupted run keeps the checkpoint it was saving."""
        try:
            with stop_signals_held():
                super()._save_checkpoint(model, trial)
        except Exception as error:
            folder = os.path.join(self._get_output_dir(trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            named = write_failed(os.path.join(folder, "trainer_state.json"), error)
            if named is not None:
                raise named from error
            raise

    def save_state(self) -> None:
        if self.is_world_process_zero():
            self._write_atomically(
                lambda folder: self.state.save_to_json(os.path.join(folder, "trainer_state.json")), None
            )

    def save_metrics(self, split: str, metrics: dict, combined: bool = True) -> None:
        """`<split>_results.json` and, with `combined`, the metrics merged into `all_results.json`, each written
        atomically (a full disk leaves the previous file)."""
        if not self.is_world_process_zero():
            return
        write_text(
            os.path.join(self.args.output_dir, f"{split}_results.json"), json.dumps(metrics, indent=4, sort_keys=True)
        )
        if combined:
            path = os.path.join(self.args.output_dir, "all_results.json")
            all_metrics = _earlier_metrics(path)
            write_text(path, json.dumps({**all_metrics, **metrics}, indent=4, sort_keys=True))

    def _checkpoint_checks(self) -> dict:
        """Keyword arguments of `missing_checkpoint_files` for this Trainer's checkpoints."""
        tokenizer_files = ()
        if self.processing_class is not None and hasattr(self.processing_class, "save_pretrained"):
            with tempfile.TemporaryDirectory() as folder:  # the names this tokenizer saves, e.g. tokenizer.json
                self.processing_class.save_pretrained(folder)
                # Not the remote-code copies (*.py): resuming runs the installed code, and a checkpoint saved by
                # an earlier hf_ctx lacks the modules added since.
                tokenizer_files = tuple(sorted(name for name in os.listdir(folder) if not name.endswith(".py")))
        # DeepSpeed and FSDP save weights and optimizer states in files of their own.
        sharded = self.is_deepspeed_enabled or self.is_fsdp_enabled
        return {"world_size": self.args.world_size, "tokenizer_files": tokenizer_files, "training_state": not sharded}

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        resume_from_checkpoint = resolve_resume_checkpoint(
            resume_from_checkpoint, self.args.output_dir, **self._checkpoint_checks()
        )
        self._resumed_at_step = 0
        if resume_from_checkpoint is not None and TRAIN_LOSS_OVER_GLOBAL_STEP:
            state_file = os.path.join(resume_from_checkpoint, "trainer_state.json")
            self._resumed_at_step = TrainerState.load_from_json(state_file).global_step
        resolved = _steps_as_resumed(self.args, resume_from_checkpoint)
        given = {name: getattr(self.args, name) for name in resolved}
        try:
            for name, steps in resolved.items():
                setattr(self.args, name, steps)
            output = super().train(resume_from_checkpoint, *args, **kwargs)
        except KeyboardInterrupt as interrupted:  # Ctrl-C, or SIGTERM under `hf_ctx.tools.errors.run_script`
            self._note_interruption(interrupted)
            raise
        finally:
            for name, steps in given.items():
                setattr(self.args, name, steps)
        if self._resumed_at_step:
            output = output._replace(training_loss=output.metrics["train_loss"])  # as `log` corrected it
        return output

    def _note_interruption(self, interrupted: KeyboardInterrupt) -> None:
        """Add to an interruption of training the step it reached and what is kept (the latest complete
        checkpoint, set as `interrupted.checkpoint` for the command that resumes), as notes that
        `hf_ctx.tools.errors.interruptions_as_messages` prints (on rank 0 only: the other processes say nothing)."""
        if self.args.process_index != 0:
            return
        interrupted.add_note(f"training stopped at step {self.state.global_step} of {self.state.max_steps}")
        try:
            checkpoint = resolve_resume_checkpoint("latest", self.args.output_dir, **self._checkpoint_checks())
        except ValueError:
            checkpoint = None
        interrupted.checkpoint = checkpoint
        if checkpoint is not None:
            interrupted.add_note(f"kept: the last checkpoint, {checkpoint}")
        elif self.args.save_strategy == "no":
            interrupted.add_note("kept: nothing (--save_strategy no saves no checkpoint to resume from)")
        else:
            interrupted.add_note(
                f"kept: nothing yet (a checkpoint is saved every {self.state.save_steps} steps; --save_steps sets "
                "another number)"
            )

    def log(self, logs: dict, *args, **kwargs) -> None:
        """`Trainer.log`; the end of a resumed run's training logs its `train_loss` over the steps it trained
        (see TRAIN_LOSS_OVER_GLOBAL_STEP), into the metrics `train()` returns too."""
        trained = self.state.global_step - self._resumed_at_step
        if "train_loss" in logs and self._resumed_at_step and trained > 0:
            logs["train_loss"] *= self.state.global_step / trained
        super().log(logs, *args, **kwargs)

    def _determine_best_metric(self, metrics: dict, trial) -> bool:
        """`Trainer._determine_best_metric`; a --metric_for_best_model that the evaluation does not report is a
        ValueError naming the ones it does (transformers raises a KeyError, which ends in a traceback)."""
        name = self.args.metric_for_best_model
        key = name and f"eval_{name.removeprefix('eval_')}"  # as transformers looks it up
        if key and key not in metrics:
            timings = ("runtime", "samples_per_second", "steps_per_second")
            reported = ", ".join(
                sorted(k.removeprefix("eval_") for k in metrics if k.startswith("eval_") and not k.endswith(timings))
            )
            raise ValueError(
                f"--metric_for_best_model {name}: the evaluation at step {self.state.global_step} reports no {key}; "
                f"it reports {reported}"
            )
        return super()._determine_best_metric(metrics, trial)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        """`Trainer._load_from_checkpoint`; weights of another shape than this run's model (a checkpoint of another
        model or task) are a ValueError naming the first, not PyTorch's state-dict traceback."""
        try:
            super()._load_from_checkpoint(resume_from_checkpoint, model)
        except RuntimeError as error:
            mismatch = next((line.strip() for line in str(error).splitlines() if "size mismatch" in line), None)
            if mismatch is None:
                raise
            raise ValueError(
                f"--resume_from_checkpoint {resume_from_checkpoint}: its weights do not fit this run's model "
                f"({mismatch}): it was saved by another model or task. Resume from a checkpoint of this run, or "
                "start it without --resume_from_checkpoint"
            ) from None

    def evaluate(self, *args, **kwargs):
        if self.cpu_threads is not None:
            self.cpu_threads.update(wait=True, activity="evaluating")
        return super().evaluate(*args, **kwargs)

    def predict(self, *args, **kwargs):
        if self.cpu_threads is not None:
            self.cpu_threads.update(wait=True, activity="predicting")
        return super().predict(*args, **kwargs)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Upload the model files of the checkpoint just saved (not the Trainer's state), without waiting."""
        if not self.is_world_process_zero() or self.args.hub_strategy == HubStrategy.END:
            return
        # As `Trainer`: skip this save's push while the last one is still uploading, unless --hub_always_push.
        if not self.args.hub_always_push and self.push_in_progress is not None and not self.push_in_progress.is_done():
            return
        self.callback_handler.on_push_begin(self.args, self.state, self.control)
        job = HfApi(token=self.args.hub_token).upload_folder(
            repo_id=self.hub_model_id,
            folder_path=checkpoint_folder,
            commit_message=f"Training in progress, step {self.state.global_step}",
            ignore_patterns=TRAINING_STATE_PATTERNS,
            revision=self.args.hub_revision,
            run_as_future=True,
        )
        if self.push_in_progress is None or self.push_in_progress.is_done():
            self.push_in_progress = PushInProgress([job])
        else:
            self.push_in_progress.jobs.append(job)
