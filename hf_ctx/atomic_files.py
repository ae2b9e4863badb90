"""Writing a checkpoint's folder atomically, and finding damaged files in one: what a model's `save_pretrained` and
`from_pretrained` need, so this module travels with every checkpoint (remote code) and imports only the standard
library.

- [`write_into_folder`] runs a function that writes several files (`save_pretrained`) into a temporary folder
  inside the target folder, then moves each file into the target folder (renames within one file system, which
  need no space; `config.json` last) and removes weight files of the previous save that the new one replaced (a
  sharded save over a single file). A failure while writing leaves the target folder as it was.
- [`damaged_file_reason`] says why a file that exists cannot be what its name says (a truncated safetensors,
  `torch.save` archive or JSON file), without loading (or unpickling) it; [`damaged_files`] checks a folder.
- Temporary files and folders are named `.hf_ctx-tmp.*.tmp` and locked (`flock`, [`try_lock`]) while they are
  written; [`remove_stale_temporaries`] removes those that no live process holds (what a kill -9 left).
- A full disk (`ENOSPC`, a quota, a file-size limit) while writing is an `OSError` naming the file, whichever
  library raised it ([`full_disk_errno`] recognises one, [`write_failed`] names the file).

Writing one file (`hf_ctx.data.atomic_write`) and what a run holds while it writes (`hf_ctx.tools.output_files`:
the output-folder lock, a file updated in place) build on these. docs/reliability.md says what each writer of
hf_ctx guarantees.
"""

import contextlib
import errno
import json
import os
import shutil
import struct
import tempfile
import time
import zipfile
from collections.abc import Callable

try:
    import fcntl
except ImportError:  # Windows: no flock; temporaries are then never taken for stale, and nothing is locked
    fcntl = None

# Moved last: a loader reads these first, so until they change the folder is read as the previous save. (Only a
# kill during the renames, which take milliseconds and need no disk space, could leave a mix.)
_WRITTEN_LAST = ("config.json", "tokenizer_config.json")
# Weight files a save replaces as a whole: a new save removes those of the previous save it did not write.
_WEIGHT_PREFIXES = ("model.safetensors", "model-", "pytorch_model")


# Every temporary file or folder hf_ctx writes is named so: `remove_stale_temporaries` recognises them.
TEMPORARY_PREFIX, TEMPORARY_SUFFIX = ".hf_ctx-tmp.", ".tmp"
# What a full disk looks like: errno values, and words of libraries that do not raise an OSError for it
# (safetensors' SafetensorError, tokenizers' Exception, torch's "file write failed", datasets' wrappers).
_FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_FULL_DISK_WORDS = ("no space left on device", "os error 28", "storagefull", "disk quota exceeded", "file too large")
_NEARLY_FULL_BYTES = 1 << 20  # a write that failed with less free space than this failed for the space
# A temporary is taken for stale only this long after its last change: a writer creates it a moment before it
# locks it.
_STALE_AFTER_SECONDS = 10


def full_disk_errno(error: BaseException, folder: str | None = None) -> int | None:
    """The errno of a full disk (`ENOSPC`, `EDQUOT`, `EFBIG`) behind `error` (it or its causes), or None.

    Recognised by errno, by the words of libraries that raise their own exceptions for it, or, for a
    `RuntimeError` without either (torch's "file write failed" or "unexpected pos"), by less than 1 MiB left free
    in `folder`."""
    seen, current = set(), error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL_DISK_ERRNOS:
            return current.errno
        if any(word in str(current).lower() for word in _FULL_DISK_WORDS):
            return errno.ENOSPC
        current = current.__cause__ or current.__context__
    if folder is not None and isinstance(error, RuntimeError):
        with contextlib.suppress(OSError, AttributeError):
            stat = os.statvfs(folder)
            if stat.f_bavail * stat.f_frsize < _NEARLY_FULL_BYTES:
                return errno.ENOSPC
    return None


class WriteFailed(OSError):
    """A write that failed (a full disk, a quota, a file-size limit, an I/O error), naming the file: `path`."""

    def __init__(self, code: int, path: str):
        super().__init__(code, f"could not write {path}: {os.strerror(code)}; what was there before is kept")
        self.path = path


def write_failed(path: str, error: BaseException, folder: str | None = None) -> OSError | None:
    """A `WriteFailed` naming `path` for `error` when it is a full disk (`full_disk_errno`) or an `OSError` that
    names no file; None for other errors (raise those as they are)."""
    if isinstance(error, WriteFailed):
        return None
    code = full_disk_errno(error, folder)
    if code is None and not (isinstance(error, OSError) and error.errno and not error.filename):
        return None
    return WriteFailed(code or error.errno, path)


def try_lock(fd: int) -> bool:
    """Take an exclusive `flock` on `fd` without waiting: False when another open file holds one. Where the
    platform or file system has no flock, True (nothing is locked)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
    return True


def _is_temporary(name: str) -> bool:
    return name.startswith(TEMPORARY_PREFIX) and name.endswith(TEMPORARY_SUFFIX)


def remove_stale_temporaries(folder: str | os.PathLike, depth: int = 1) -> list[str]:
    """Remove the temporary files and folders of hf_ctx's writers (`.hf_ctx-tmp.*.tmp`) in `folder` and, `depth`
    levels down, its subfolders (a `checkpoint-N`) that no live process is writing: what a kill -9 or a power cut
    left. A writer holds a `flock` on its temporary until it is renamed or removed, and the kernel releases it
    when the process dies, so one that can be locked (and has not changed for 10 s) is stale. Returns the paths
    removed."""
    folder = os.fspath(folder)
    removed = []
    with contextlib.suppress(OSError):
        with os.scandir(folder) as entries:
            entries = list(entries)
        for entry in entries:
            if _is_temporary(entry.name):
                with contextlib.suppress(OSError):
                    if time.time() - entry.stat(follow_symlinks=False).st_mtime < _STALE_AFTER_SECONDS:
                        continue
                    fd = os.open(entry.path, os.O_RDONLY)
                    try:
                        if fcntl is None or not try_lock(fd):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            shutil.rmtree(entry.path)
                        else:
                            os.unlink(entry.path)
                        removed.append(entry.path)
                    finally:
                        os.close(fd)
            elif depth > 0 and entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                removed += remove_stale_temporaries(entry.path, depth - 1)
    return removed


def fsync_folder(folder: str) -> None:
    """Make a rename in `folder` durable (where the platform allows opening a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _move_into(source: str, target: str, written: set[str]) -> None:
    """Move the files of `source` into `target` (renames), subfolders merged, `_WRITTEN_LAST` last. A symbolic
    link in `target` where a file or subfolder goes is replaced: nothing is written through it."""
    os.makedirs(target, exist_ok=True)
    names = sorted(os.listdir(source), key=lambda name: (name in _WRITTEN_LAST, name))
    for name in names:
        from_path, to_path = os.path.join(source, name), os.path.join(target, name)
        if os.path.islink(to_path):  # planted: replaced, never written through (nor merged into its target)
            os.unlink(to_path)
        if os.path.isdir(from_path) and os.path.isdir(to_path):
            _move_into(from_path, to_path, set())
        else:
            if os.path.isdir(to_path):
                shutil.rmtree(to_path)
            os.replace(from_path, to_path)
        written.add(name)
    fsync_folder(target)


@contextlib.contextmanager
def _moves_locked(folder: str):
    """One save's files move into `folder` at a time (a blocking `flock` on the folder itself, held for the
    renames only): two processes saving into one folder at once leave the files of one save, not a mix of both.
    A staging folder is one writer's already (and that writer holds its lock: locking it again would wait on
    ourselves), so a save nested in another's moves unlocked."""
    if os.path.basename(folder).startswith(TEMPORARY_PREFIX):
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        if fcntl is not None:
            with contextlib.suppress(OSError):  # a file system without flock: nothing is locked
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _newest_file(folder: str) -> str | None:
    """The path, relative to `folder`, of the file under it modified last (the one a failed save was writing)."""
    newest, newest_time = None, -1.0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                modified = os.stat(os.path.join(root, name)).st_mtime
                if modified >= newest_time:
                    newest, newest_time = os.path.relpath(os.path.join(root, name), folder), modified
    return newest


def write_into_folder(folder: str | os.PathLike, write: Callable[[str], object]):
    """Call `write(staging)` (e.g. `model.save_pretrained`) on an empty temporary folder inside `folder`
    (`.hf_ctx-tmp.*.tmp`), then move what it wrote into `folder` (created if needed). Returns what `write`
    returned.

    The temporary folder is inside `folder`, so the moves are renames within one file system whatever `folder`
    is (a mount point, a symlink to another disk) and its parent need not be writable. When `write` raises (a
    full disk, a bug, Ctrl-C), `folder` is untouched (removed again if this call created it) and the temporary
    folder is removed; a full disk is an `OSError` naming the file that did not fit. Files of `folder` that the
    new save does not write are kept, except weight files it replaces. Stale temporaries that a killed process
    left in `folder` are removed first (`remove_stale_temporaries`).
    """
    folder = os.path.abspath(os.fspath(folder))
    created = not os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    remove_stale_temporaries(folder)
    staging = tempfile.mkdtemp(dir=folder, prefix=TEMPORARY_PREFIX, suffix=TEMPORARY_SUFFIX)
    held = os.open(staging, os.O_RDONLY)
    try:
        try_lock(held)
        try:
            result = write(staging)
        except Exception as error:
            if isinstance(error, WriteFailed) and error.path.startswith(staging + os.sep):
                # A writer inside the staging folder named its file: name where it was going.
                raise WriteFailed(error.errno, folder + error.path[len(staging) :]) from error
            failed_file = _newest_file(staging)
            named = write_failed(os.path.join(folder, failed_file) if failed_file else folder, error, staging)
            if named is not None:
                raise named from error
            raise
        written: set[str] = set()
        with _moves_locked(folder):
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
        created = False
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(held)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def _safetensors_reason(path: str) -> str | None:
    """The safetensors layout: an 8-byte little-endian header length, a JSON header, then the tensors' bytes."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < 8:
            return f"{size} bytes, shorter than a safetensors header"
        (header_length,) = struct.unpack("<Q", f.read(8))
        if 8 + header_length > size:
            return f"its header says {header_length} bytes of metadata, the file has {size - 8} after the length"
        try:
            header = json.loads(f.read(header_length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return "its header is not valid JSON"
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    if 8 + header_length + max(ends, default=0) != size:
        return f"its tensors need {8 + header_length + max(ends, default=0)} bytes, the file has {size}"
    return None


def damaged_file_reason(path: str | os.PathLike) -> str | None:
    """Why the file at `path` is incomplete or corrupt, or None when it looks whole. Checked without loading it:
    `.safetensors` (header and length), `.json` (parses), `.pt`/`.pth`/`.bin` written by `torch.save` (a zip
    archive whose members' checksums match). Other files: None."""
    path = os.fspath(path)
    try:
        if path.endswith(".safetensors"):
            return _safetensors_reason(path)
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                json.load(f)
        elif path.endswith((".pt", ".pth", ".bin")):
            if not zipfile.is_zipfile(path):
                return "not a complete torch.save archive"
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            if bad is not None:
                return f"its member {bad} fails its checksum"
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"not valid JSON ({error})"
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        return f"unreadable ({error})"
    return None


def damaged_files(folder: str | os.PathLike, names=None) -> list[str]:
    """ "name (reason)" for each file of `folder` (or each of `names` that exists there) that
    `damaged_file_reason` finds incomplete or corrupt."""
    folder = os.fspath(folder)
    names = sorted(os.listdir(folder)) if names is None else names
    found = []
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            reason = damaged_file_reason(path)
            if reason is not None:
                found.append(f"{name} ({reason})")
    return found


__all__ = [
    "TEMPORARY_PREFIX",
    "TEMPORARY_SUFFIX",
    "WriteFailed",
    "damaged_file_reason",
    "damaged_files",
    "fsync_folder",
    "full_disk_errno",
    "remove_stale_temporaries",
    "try_lock",
    "write_failed",
    "write_into_folder",
]
