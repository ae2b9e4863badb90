"""Atomic writing: the one home of how hf_ctx writes files, so that a crash or a full disk never leaves a broken one.

- [`atomic_write`] writes one file: a temporary name in the same folder, flush, fsync, rename over the target.
  A failure (an exception, `ENOSPC`, a kill) leaves the previous file (or none) and no temporary file behind.
- [`write_into_folder`] runs a function that writes several files (`save_pretrained`) into a temporary sibling
  folder, then moves each file into the target folder (renames, which need no space; `config.json` last) and
  removes weight files of the previous save that the new one replaced (a sharded save over a single file). A
  failure while writing leaves the target folder as it was.

See docs/reliability.md for what each writer of hf_ctx guarantees. This module travels with the checkpoints of
every model and tokenizer that imports it (remote code): it imports only the standard library.
"""

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable

# Moved last: a loader reads these first, so until they change the folder is read as the previous save. (Only a
# kill during the renames, which take milliseconds and need no disk space, could leave a mix.)
_WRITTEN_LAST = ("config.json", "tokenizer_config.json")
# Weight files a save replaces as a whole: a new save removes those of the previous save it did not write.
_WEIGHT_PREFIXES = ("model.safetensors", "model-", "pytorch_model")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what `open(path, "w")` gives; mkstemp would give 0600


def _fsync_folder(folder: str) -> None:
    """Make a rename in `folder` durable (where the platform allows opening a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """`with atomic_write(path) as f: f.write(...)`: the file appears whole at `path` when the block ends, or
    not at all (the previous one stays) when it raises. `mode` is "w" (text, `encoding`) or "wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes with mode 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=encoding if mode == "w" else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_folder(folder)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_write(path) as f:
        f.write(text)


def _move_into(source: str, target: str, written: set[str]) -> None:
    """Move the files of `source` into `target` (renames), subfolders merged, `_WRITTEN_LAST` last."""
    os.makedirs(target, exist_ok=True)
    names = sorted(os.listdir(source), key=lambda name: (name in _WRITTEN_LAST, name))
    for name in names:
        from_path, to_path = os.path.join(source, name), os.path.join(target, name)
        if os.path.isdir(from_path) and os.path.isdir(to_path):
            _move_into(from_path, to_path, set())
        else:
            if os.path.isdir(to_path):
                shutil.rmtree(to_path)
            os.replace(from_path, to_path)
        written.add(name)
    _fsync_folder(target)


def write_into_folder(folder: str | os.PathLike, write: Callable[[str], object]):
    """Call `write(staging)` (e.g. `model.save_pretrained`) on an empty temporary folder beside `folder`, then
    move what it wrote into `folder` (created if needed). Returns what `write` returned.

    When `write` raises (a full disk, a bug, Ctrl-C), `folder` is untouched and the temporary folder is removed.
    Files of `folder` that the new save does not write are kept, except weight files it replaces.
    """
    folder = os.path.abspath(os.fspath(folder))
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(folder)}.", suffix=".tmp")
    try:
        result = write(staging)
        written: set[str] = set()
        _move_into(staging, folder, written)
        if any(name.startswith(_WEIGHT_PREFIXES) for name in written):
            for name in os.listdir(folder):
                if name.startswith(_WEIGHT_PREFIXES) and name not in written:
                    os.remove(os.path.join(folder, name))
        if isinstance(result, (tuple, list)):
            result = type(result)(
                folder + item[len(staging) :] if isinstance(item, str) and item.startswith(staging) else item
                for item in result
            )
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def save_pretrained_atomically(saveable, folder: str | os.PathLike, **kwargs):
    """`saveable.save_pretrained(folder, **kwargs)` through `write_into_folder`: for objects whose class is not
    hf_ctx's own (transformers' `BertTokenizer`); hf_ctx's models and tokenizers save atomically themselves."""
    return write_into_folder(folder, lambda staging: saveable.save_pretrained(staging, **kwargs))


__all__ = ["atomic_write", "save_pretrained_atomically", "write_into_folder", "write_text"]
