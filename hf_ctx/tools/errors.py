"""Errors for people: what the `hf-ctx` command and the example scripts print when the user's input is wrong.

hf_ctx raises `ValueError` (bad arguments, bad configs, bad file contents) and `OSError` (`FileNotFoundError`,
`IsADirectoryError`, ...: missing or unreadable files) with messages that name the problem. For a person at a
terminal the traceback around such a message is noise, so the entry points print the message alone,

    error: --train_file data/train.txt: no such file

and exit with status 1. A full disk is shown the same way whatever a library raised for it (safetensors'
`SafetensorError`, tokenizers' `Exception`, `datasets`' `DatasetGenerationError`): hf_ctx's writers name the file
(`hf_ctx.atomic_files.WriteFailed`), and this is the net for a writer that does not. `--debug` on the command
line, or `HF_CTX_DEBUG=1` in the environment, lets the exception through with its traceback. Every other exception
(a bug, an interrupted run) keeps its traceback.

This module imports only the standard library and `hf_ctx.atomic_files` (standard library only), so that
`hf-ctx --help` stays instant.
"""

import os
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager
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


def run_script(main: Callable[[list[str]], Any], argv: Sequence[str] | None = None) -> Any:
    """Run an example script's `main(argv)` for a person at a terminal: `if __name__ == "__main__": run_script(main)`.

    `--debug` is taken out of the arguments (the script's own parser does not know it) and turns the one-line
    error messages off; see `user_errors_as_messages`.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv
    argv = [arg for arg in argv if arg != DEBUG_FLAG]
    with user_errors_as_messages(debug):
        return main(argv)
