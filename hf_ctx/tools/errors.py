"""Errors for people: what the `hf-ctx` command and the example scripts print when the user's input is wrong.

hf_ctx raises `ValueError` (bad arguments, bad configs, bad file contents) and `OSError` (`FileNotFoundError`,
`IsADirectoryError`, ...: missing or unreadable files) with messages that name the problem. For a person at a
terminal the traceback around such a message is noise, so the entry points print the message alone,

    error: --train_file data/train.txt: no such file

and exit with status 1. A full disk is shown the same way whatever a library raised for it (safetensors'
`SafetensorError`, tokenizers' `Exception`, `datasets`' `DatasetGenerationError`): hf_ctx's writers name the file
(`hf_ctx.atomic_files.WriteFailed`), and this is the net for a writer that does not. `--debug` on the command
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
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from ..atomic_files import full_disk_errno

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


@contextmanager
def user_errors_as_messages(debug: bool = False):
    """Inside the block, an expected user error (`USER_ERRORS`), or any exception a full disk caused
    (`hf_ctx.atomic_files.full_disk_errno`), prints one line to stderr and exits with status 1, unless `debug` or
    `HF_CTX_DEBUG` asks for the traceback."""
    try:
        yield
    except Exception as error:
        full_disk = not isinstance(error, USER_ERRORS) and full_disk_errno(error) is not None
        if not (isinstance(error, USER_ERRORS) or full_disk) or debug or debug_from_environment():
            raise
        message = error_message(error)
        if full_disk:
            message += f" ({type(error).__name__}: the disk is full; free space and run the same command again)"
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


def _raise_interrupted(signal_number, frame):
    raise Interrupted(signal_number)


SIGNAL_NAMES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


@contextmanager
def interruptions_as_messages(go_on: Callable[[Interrupted], str | None] = lambda interrupted: None):
    """Inside the block, SIGINT and SIGTERM raise `Interrupted`; one that reaches the end of the block prints a
    few lines to stderr, `interrupted by SIGINT (Ctrl-C)`, the notes added on its way (where the work stopped,
    what is kept), and `go_on(interrupted)` (the command that resumes, or None), and exits with 128 + the
    signal's number. The handlers are those of the main thread only (Python's rule); elsewhere the block runs
    as is."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {number: signal.signal(number, _raise_interrupted) for number in SIGNAL_NAMES}
    try:
        yield
    except KeyboardInterrupt as error:
        number = getattr(error, "signal_number", signal.SIGINT)
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
    return shlex.join(["python", script, *kept, "--resume_from_checkpoint", "latest"])


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
