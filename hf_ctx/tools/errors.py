"""Errors for people: what the `hf-ctx` command and the example scripts print when the user's input is wrong.

hf_ctx raises `ValueError` (bad arguments, bad configs, bad file contents) and `OSError` (`FileNotFoundError`,
`IsADirectoryError`, ...: missing or unreadable files) with messages that name the problem. For a person at a
terminal the traceback around such a message is noise, so the entry points print the message alone,

    error: --train_file data/train.txt: no such file

and exit with status 1. A full disk is shown the same way whatever a library raised for it (safetensors'
`SafetensorError`, tokenizers' `Exception`, `datasets`' `DatasetGenerationError`): hf_ctx's writers name the file
(`hf_ctx.atomic_files.WriteFailed`), and this is the net for a writer that does not. What the Hub answered (a bad
token, a missing or gated repository, offline mode, a connection that failed), raised by huggingface_hub or by
transformers around it, is one line too (`hub_error_message`). `--debug` on the command
line, or `HF_CTX_DEBUG=1` in the environment, lets the exception through with its traceback. Every other exception
(a bug) keeps its traceback.

An interruption, Ctrl-C (SIGINT) or what a scheduler sends to stop a job (SIGTERM), ends in a few lines instead of
a traceback (`interruptions_as_messages`): which signal, where the work stopped and what is kept (the notes the
interrupted code added, e.g. `CtxTrainer.train`'s step and last checkpoint), and how to go on; the exit status is
128 + the signal's number (130, 143), as a shell reports a process that a signal stopped.

This module imports only the standard library and `hf_ctx.atomic_files` (standard library only), so that
`hf-ctx --help` stays instant.
"""

import dataclasses
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from ..atomic_files import full_disk_errno


class SameOnEveryRank(ValueError):
    """A refusal of the launch itself (the launcher's set-up, what the machine lacks), which every process a
    launcher started raises alike: rank 0 alone prints it, the others exit with the same status."""


DEBUG_FLAG = "--debug"
DEBUG_ENV = "HF_CTX_DEBUG"
# What hf_ctx raises for input a user can fix. OSError covers FileNotFoundError, IsADirectoryError,
# PermissionError and transformers' "not a local folder and not a valid model identifier".
USER_ERRORS = (ValueError, OSError)


def debug_from_environment() -> bool:
    """Whether `HF_CTX_DEBUG` asks for tracebacks (any value but "", "0", "false", "no")."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def error_message(error: BaseException) -> str:
    """The one line printed for `error`: `error: <message>`, the message's lines joined."""
    message = " ".join(str(error).split("\n")).strip() or type(error).__name__
    return f"error: {message}"


def hub_error_message(error: BaseException) -> str | None:
    """One line for an error that huggingface_hub raised, or that one it raised caused (transformers wraps them):
    what the Hub (`HF_ENDPOINT`) answered and the way on; `None` for any other error.

    huggingface_hub is looked up among the loaded modules, not imported: an error it raised means it is loaded.
    """
    hub_errors = sys.modules.get("huggingface_hub.errors")
    if hub_errors is None:
        return None
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        message = _hub_answer(error, hub_errors)
        if message is not None:
            return message
        # `raise ... from None` ends the chain: the error it raised says what it has to say.
        error = error.__cause__ if error.__cause__ is not None or error.__suppress_context__ else error.__context__
    return None


def _hub_answer(error: BaseException, hub_errors) -> str | None:
    endpoint = sys.modules["huggingface_hub.constants"].ENDPOINT
    if isinstance(error, hub_errors.OfflineModeIsEnabled):
        return (
            "the Hub is not reached offline (HF_HUB_OFFLINE is set): unset HF_HUB_OFFLINE to reach "
            f"{endpoint}, or use a local folder"
        )
    if any(cls.__name__ == "TransportError" for cls in type(error).__mro__):  # httpx's (1.x) or httpx2's (2.x)
        return (
            f"cannot reach the Hub at {endpoint} ({type(error).__name__}: {error}): check the network "
            "(and HF_ENDPOINT), or use a local folder"
        )
    response = getattr(error, "response", None)
    if not isinstance(error, hub_errors.HfHubHTTPError) or response is None:
        return None
    status, url = response.status_code, str(response.url)
    what = f"the Hub answered {status} {response.reason_phrase or ''}".rstrip() + f" for {url}"
    server = response.headers.get("X-Error-Message") or ""
    if isinstance(error, hub_errors.GatedRepoError):
        return (
            f"{what}: a gated repository; ask for access on its page and give a token of an account that has "
            "it (HF_TOKEN or `hf auth login`)"
        )
    if status == 401 and response.request is not None and "authorization" not in response.request.headers:
        return f"{what}: no token was given; give one (HF_TOKEN or `hf auth login`; --hub_token for --push_to_hub)"
    if status == 401:
        return (
            f"{what}: the token was refused{f' ({server})' if server else ''}; give a valid one (HF_TOKEN or "
            "`hf auth login`; --hub_token for --push_to_hub)"
        )
    if isinstance(error, hub_errors.RepositoryNotFoundError):
        return f"{what}: no such repository (or a private one the token cannot see)"
    if isinstance(error, hub_errors.RevisionNotFoundError):
        return f"{what}: the repository has no such revision (branch, tag or commit)"
    if isinstance(error, hub_errors.EntryNotFoundError):
        return f"{what}: the repository has no such file"
    if status == 403:
        return f"{what}: not allowed with this token{f' ({server})' if server else ''}; a write token is needed"
    return f"{what}{f': {server}' if server else ''}"


@contextmanager
def user_errors_as_messages(debug: bool = False):
    """Inside the block, an expected user error (`USER_ERRORS`), or any exception a full disk caused
    (`hf_ctx.atomic_files.full_disk_errno`), prints one line to stderr and exits with status 1, unless `debug` or
    `HF_CTX_DEBUG` asks for the traceback."""
    try:
        yield
    except Exception as error:
        hub_message = hub_error_message(error)
        full_disk = not isinstance(error, USER_ERRORS) and full_disk_errno(error) is not None
        if not (isinstance(error, USER_ERRORS) or full_disk or hub_message) or debug or debug_from_environment():
            raise
        # The Hub's answer, unless hf_ctx's own message (naming the option, what was saved) says it already.
        message = error_message(error) if hub_message is None or hub_message in str(error) else f"error: {hub_message}"
        if full_disk:
            message += f" ({type(error).__name__}: the disk is full; free space and run the same command again)"
        if not (isinstance(error, SameOnEveryRank) and process_rank() != 0):
            print(message, file=sys.stderr)
        raise SystemExit(1) from None


class Interrupted(KeyboardInterrupt):
    """A stop signal (SIGINT, SIGTERM) arriving while `interruptions_as_messages` watches: a `KeyboardInterrupt`,
    so that what cleans up after Ctrl-C cleans up after SIGTERM too. `checkpoint`: the folder a training run
    that it stopped can resume from, set by the trainer (None: nothing to resume from)."""

    def __init__(self, signal_number: int):
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number
        self.checkpoint = None


SIGNAL_NAMES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}
# A stop signal this soon after the first is the same stop arriving again: a launcher forwarding the Ctrl-C that
# its process group got (torchrun sends each worker SIGINT, later SIGTERM), or a second press. Raised again, it
# would cut the first one's clean-up and message short with a traceback; later, it ends the process at once.
REPEATED_SIGNAL_S = 10.0
# What launchers set to each process's rank (torchrun and accelerate: RANK; mpirun: the others).
_RANKS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")


def process_rank() -> int:
    """This process's rank among those a launcher started (0 for a process started alone)."""
    for name in _RANKS:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


# The stop signal that arrived inside `stop_signals_held` blocks (its number, or None), raised when the outermost
# one ends; and how deep they are nested. Signal handlers run in the main thread only, as these blocks do.
_held = {"depth": 0, "signal": None}


def _stop_signal_handler():
    """A signal handler that raises `Interrupted` at the first stop signal (inside `stop_signals_held`: when the
    block ends); a repeat within `REPEATED_SIGNAL_S` is ignored, a later one exits at once with 128 + its
    number (the way out of a save that hangs)."""
    first = []

    def handle(signal_number, frame):
        if not first:
            first.append(time.monotonic())
            if _held["depth"]:
                _held["signal"] = signal_number
                return
            raise Interrupted(signal_number)
        if time.monotonic() - first[0] > REPEATED_SIGNAL_S:
            os._exit(128 + signal_number)

    return handle


def _leave_held_block() -> int | None:
    """One `stop_signals_held` block less; the stop signal held for the outermost one as it ends (or None)."""
    _held["depth"] -= 1
    number = None if _held["depth"] else _held["signal"]
    if number is not None:
        _held["signal"] = None
    return number


@contextmanager
def stop_signals_held():
    """A stop signal arriving inside the block (under `interruptions_as_messages`) is raised as `Interrupted`
    once the block ends, not in the middle of it: a checkpoint being saved when Ctrl-C or SIGTERM comes is
    finished, so the run stops with it kept rather than half written. An error in a block that held a stop is
    raised as that stop, noting the error: under a launcher the Ctrl-C reaches every process, and one that was
    outside such a block has exited, so the collective of this one's save fails for want of it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held["depth"] += 1
    try:
        yield
    except BaseException as error:
        number = _leave_held_block()
        if number is None or not isinstance(error, Exception):
            raise
        interrupted = Interrupted(number)
        first_line = (str(error).strip().splitlines() or [""])[0]
        interrupted.add_note(f"the save under way did not finish ({type(error).__name__}: {first_line})")
        raise interrupted from error
    number = _leave_held_block()
    if number is not None:
        raise Interrupted(number)


@contextmanager
def interruptions_as_messages(go_on: Callable[[Interrupted], str | None] = lambda interrupted: None):
    """Inside the block, SIGINT and SIGTERM raise `Interrupted`; one that reaches the end of the block prints a
    few lines to stderr, `interrupted by SIGINT (Ctrl-C)`, the notes added on its way (where the work stopped,
    what is kept), and `go_on(interrupted)` (the command that resumes, or None), and exits with 128 + the
    signal's number. The handlers are those of the main thread only (Python's rule); elsewhere the block runs
    as is. Of the processes a launcher started (torchrun, accelerate, mpirun), which a Ctrl-C stops all at once,
    rank 0 alone prints; the others exit with the same status."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handle = _stop_signal_handler()
        handlers = {number: signal.signal(number, handle) for number in SIGNAL_NAMES}
    try:
        yield
    except KeyboardInterrupt as error:
        number = getattr(error, "signal_number", signal.SIGINT)
        if process_rank() != 0:
            raise SystemExit(128 + number) from None
        lines = [f"interrupted by {SIGNAL_NAMES.get(number, signal.Signals(number).name)}"]
        lines += getattr(error, "__notes__", [])
        hint = go_on(error)
        if hint:
            lines.append(hint)
        print("\n".join(lines), file=sys.stderr, flush=True)
        raise SystemExit(128 + number) from None
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)


def resume_command(argv: Sequence[str]) -> str:
    """The command line that resumes an interrupted training run of this script: `argv` without
    `--overwrite_output_dir` (which would delete the checkpoints) and with `--resume_from_checkpoint latest`."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            if arg.lower() in ("true", "false", "yes", "no", "1", "0") or not arg.startswith("--"):
                continue
        name = arg.split("=", 1)[0]
        if name in ("--overwrite_output_dir", "--overwrite-output-dir", "--resume_from_checkpoint"):
            skip = "=" not in arg
            continue
        kept.append(arg)
    script = os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0] else "<script>"
    return shlex.join([*_launcher_words(), script, *kept, "--resume_from_checkpoint", "latest"])


def _launcher_words() -> list[str]:
    """How the command that resumes starts: `python`, or for processes a launcher started on one machine
    (WORLD_SIZE = LOCAL_WORLD_SIZE > 1, as torchrun and accelerate set them) `torchrun --nproc_per_node N`, so
    that it resumes with as many processes (the checkpoint holds one RNG state per process)."""
    world_size, local = (os.environ.get(name, "").strip() for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE"))
    if world_size.isdigit() and int(world_size) > 1 and world_size == local:
        return ["torchrun", "--nproc_per_node", world_size]
    return ["python"]


def takes_resume_option(main: Callable) -> bool:
    """Whether the script of `main` takes `--resume_from_checkpoint`: one of its `ARGUMENT_CLASSES` (the
    dataclasses its parser reads) has the field."""
    classes = getattr(sys.modules.get(getattr(main, "__module__", ""), None), "ARGUMENT_CLASSES", ())
    return any(
        dataclasses.is_dataclass(cls) and "resume_from_checkpoint" in {f.name for f in dataclasses.fields(cls)}
        for cls in classes
    )


def run_script(main: Callable[[list[str]], Any], argv: Sequence[str] | None = None) -> Any:
    """Run an example script's `main(argv)` for a person at a terminal: `if __name__ == "__main__": run_script(main)`.

    `--debug` is taken out of the arguments (the script's own parser does not know it) and turns the one-line
    error messages off; see `user_errors_as_messages`. Ctrl-C and SIGTERM end in a few lines
    (`interruptions_as_messages`): where training stopped, its last checkpoint, and, where the script takes
    `--resume_from_checkpoint` (`takes_resume_option`), the command that resumes from it.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv
    argv = [arg for arg in argv if arg != DEBUG_FLAG]

    def go_on(interrupted) -> str | None:
        if getattr(interrupted, "checkpoint", None) is None:
            return None
        if takes_resume_option(main):
            return f"resume: {resume_command(argv)}"
        return "run the same command again with --overwrite_output_dir to start over"

    with interruptions_as_messages(go_on) if not debug else nullcontext(), user_errors_as_messages(debug):
        return main(argv)
