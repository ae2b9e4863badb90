"""Writing one file atomically: the file appears whole, or not at all, and a failure leaves what was there before.

- [`atomic_write`] writes a file under a temporary name in the same folder, flushes, fsyncs and renames it over the
  target. A failure (an exception, `ENOSPC`, a kill) leaves the previous file (or none) and no temporary file
  behind: the temporary is named and locked as `hf_ctx.atomic_files` says, so a killed writer's is removed later.
- [`write_text`] writes a string so; [`save_pretrained_atomically`] saves a folder of files (a transformers
  tokenizer) through `hf_ctx.atomic_files.write_into_folder`.

Every writer of hf_ctx outside a checkpoint's own code writes through these (docs/reliability.md). This module
imports only the standard library and `hf_ctx.atomic_files`.
"""

import contextlib
import os
import tempfile

from ..atomic_files import TEMPORARY_PREFIX, TEMPORARY_SUFFIX, fsync_folder, try_lock, write_failed, write_into_folder


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what `open(path, "w")` gives; mkstemp would give 0600


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """`with atomic_write(path) as f: f.write(...)`: the file appears whole at `path` when the block ends, or
    not at all (the previous one stays) when it raises. `mode` is "w" (text, `encoding`) or "wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes with mode 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(
        dir=folder, prefix=f"{TEMPORARY_PREFIX}{os.path.basename(path)}.", suffix=TEMPORARY_SUFFIX
    )
    held = os.dup(fd)  # the flock that marks the temporary as live, held until it is renamed or removed
    try:
        try_lock(held)
        with os.fdopen(fd, mode, encoding=encoding if mode == "w" else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        named = write_failed(path, error) if isinstance(error, Exception) else None
        if named is not None:
            raise named from error
        raise
    finally:
        os.close(held)
    fsync_folder(folder)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_write(path) as f:
        f.write(text)


def save_pretrained_atomically(saveable, folder: str | os.PathLike, **kwargs):
    """`saveable.save_pretrained(folder, **kwargs)` through `write_into_folder`: for objects whose class is not
    hf_ctx's own (transformers' `BertTokenizer`); hf_ctx's models and tokenizers save atomically themselves."""
    return write_into_folder(folder, lambda staging: saveable.save_pretrained(staging, **kwargs))
