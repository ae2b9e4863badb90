"""Atomic writing: the one home of how hf_ctx writes files, so that a crash or a full disk never leaves a broken one.

- [`atomic_write`] writes one file: a temporary name in the same folder, flush, fsync, rename over the target.
  A failure (an exception, `ENOSPC`, a kill) leaves the previous file (or none) and no temporary file behind.
- [`CommittedFile`] is a file updated in place (an HDF5 file that `hf-ctx embed` extends): writes are held in
  memory and reach the disk at each `flush()`, new space first; a full disk during a flush leaves the file as
  it was at the previous flush.
- [`damaged_file_reason`] says why a file that exists cannot be what its name says (a truncated safetensors,
  `torch.save` archive or JSON file), without loading (or unpickling) it; [`damaged_files`] checks a folder.
- [`write_into_folder`] runs a function that writes several files (`save_pretrained`) into a temporary folder
  inside the target folder, then moves each file into the target folder (renames within one file system, which
  need no space; `config.json` last) and removes weight files of the previous save that the new one replaced (a
  sharded save over a single file). A failure while writing leaves the target folder as it was.
- Temporary files and folders are named `.hf_ctx-tmp.*.tmp` and locked (`flock`) while they are written;
  [`remove_stale_temporaries`] removes those that no live process holds (what a kill -9 left).
- [`lock_output`] makes one process at a time the writer of an output folder; `CommittedFile` locks its file.
- A full disk (`ENOSPC`, a quota, a file-size limit) while writing is an `OSError` naming the file, whichever
  library raised it ([`full_disk_errno`] recognises one).

See docs/reliability.md for what each writer of hf_ctx guarantees. This module travels with the checkpoints of
every model and tokenizer that imports it (remote code): it imports only the standard library.
"""

import contextlib
import errno
import io
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
except ImportError:  # Windows: no flock; temporaries are then never taken for stale, and outputs are not locked
    fcntl = None

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

# Every temporary file or folder hf_ctx writes is named so: `remove_stale_temporaries` recognises them.
TEMPORARY_PREFIX, TEMPORARY_SUFFIX = ".hf_ctx-tmp.", ".tmp"
# The lock file of an output folder (`lock_output`); never removed, so that two processes always lock one inode.
LOCK_FILE = ".hf_ctx-lock"
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


def _try_lock(fd: int) -> bool:
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
                        if fcntl is None or not _try_lock(fd):
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
    fd, temporary = tempfile.mkstemp(
        dir=folder, prefix=f"{TEMPORARY_PREFIX}{os.path.basename(path)}.", suffix=TEMPORARY_SUFFIX
    )
    held = os.dup(fd)  # the flock that marks the temporary as live, held until it is renamed or removed
    try:
        _try_lock(held)
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
        _try_lock(held)
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


# Output folders this process holds the writer lock of: real path -> the lock file's descriptor.
_HELD_LOCKS: dict[str, int] = {}


def lock_output(folder: str | os.PathLike, what: str = "the output folder") -> None:
    """Make this process the one writer of `folder` (created if needed) until it exits, and remove the stale
    temporaries a killed writer left there (`remove_stale_temporaries`).

    The lock is an `flock` on `folder/.hf_ctx-lock`, which the kernel releases when the process ends, however it
    ends: a run killed with kill -9 leaves nothing to clean up. A second process asking for it gets an `OSError`
    naming the folder and the process that holds it; this process asking again is a no-op. `what` names the
    folder in that message (e.g. "--output_dir").
    """
    folder = os.path.abspath(os.fspath(folder))
    os.makedirs(folder, exist_ok=True)
    key = os.path.realpath(folder)
    if key in _HELD_LOCKS:
        return
    path = os.path.join(folder, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    if not _try_lock(fd):
        holder = ""
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
        os.close(fd)
        raise OSError(
            f"{what} {folder} is being written by another run ({holder or 'a process'}); wait for it to finish, "
            "or choose another folder"
        )
    with contextlib.suppress(OSError, AttributeError):  # who holds it, for the message (not on Windows)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} on {os.uname().nodename}".encode(), 0)
    _HELD_LOCKS[key] = fd
    remove_stale_temporaries(folder)


class CommittedFile(io.RawIOBase):
    """A binary file opened for update (h5py's file-object driver writes through it), whose writes reach the disk
    only at `flush()`, and then so that a full disk cannot damage it.

    Between flushes, writes are held in memory (reads see them). A flush first writes every byte that lies
    beyond the file's committed end, and fsyncs: this is where space is allocated, so this is where `ENOSPC`
    happens, while the committed bytes are untouched. The file is then cut back to its committed size and the
    error raised; later writes are dropped (the writer's own close then changes nothing), so the file stays as
    it was at the last successful flush. Only then are the bytes inside the committed end overwritten (space
    that is already allocated) and the file fsynced again. A kill during that second step (milliseconds) is the
    one case this does not cover, with an error there (an I/O error: the space is already allocated), where
    `damaged` is set; a kill at any other time leaves the last flushed state. The file is locked (`flock`) while
    open: a second `CommittedFile` on it, in any process, is an `OSError` naming it.

    Args:
        path: the file.
        create: start an empty file (truncating an existing one) instead of updating `path`.
    """

    def __init__(self, path: str | os.PathLike, create: bool = False):
        super().__init__()
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o666)
        if not _try_lock(self._fd):
            os.close(self._fd)
            raise OSError(
                f"{self.path} is being written by another process; wait for it to finish, or write elsewhere"
            )
        if create:  # truncated only once locked: another writer's file is never cut
            os.ftruncate(self._fd, 0)
        self._committed_size = self._size = os.fstat(self._fd).st_size
        self._pending: list[tuple[int, bytes]] = []  # (offset, bytes) written since the last flush, in order
        self._position = 0
        self.failed: OSError | None = None  # the error of the flush that failed; nothing is written after it
        self.damaged = False  # whether it failed while overwriting committed bytes (not a full disk: an I/O error)

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        start, end = self._position, min(self._position + len(view), self._size)
        if end <= start:
            return 0
        on_disk = os.pread(self._fd, max(0, min(end, self._committed_size) - start), start) if start < end else b""
        data = bytearray(on_disk.ljust(end - start, b"\0"))
        for offset, chunk in self._pending:
            low, high = max(start, offset), min(end, offset + len(chunk))
            if low < high:
                data[low - start : high - start] = chunk[low - offset : high - offset]
        view[: end - start] = data
        self._position = end
        return end - start

    def write(self, data) -> int:
        data = bytes(data)
        if self.failed is None:
            self._pending.append((self._position, data))
            self._size = max(self._size, self._position + len(data))
        self._position += len(data)
        return len(data)

    def truncate(self, size: int | None = None) -> int:
        size = self._position if size is None else size
        if self.failed is None:
            self._pending = [
                (offset, chunk[: max(0, size - offset)]) for offset, chunk in self._pending if offset < size
            ]
            self._size = size
        return size

    def flush(self) -> None:
        """Write what was written since the last flush (see the class docstring); an `OSError` leaves the file as
        it was after the last flush."""
        if self.failed is not None or self.closed or (not self._pending and self._size == self._committed_size):
            return
        committed = self._committed_size
        try:  # 1. new space: may run out, while the committed bytes stay as they are
            for offset, chunk in self._pending:
                if offset + len(chunk) > committed:
                    cut = max(0, committed - offset)
                    os.pwrite(self._fd, chunk[cut:], offset + cut)
            if self._size > committed:
                os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)
        except OSError as error:
            self.failed = error
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, committed)
            raise
        try:  # 2. in place: space that is already allocated
            for offset, chunk in self._pending:
                if offset < committed:
                    os.pwrite(self._fd, chunk[: committed - offset], offset)
            if self._size < committed:
                os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)
        except OSError as error:
            self.failed, self.damaged = error, True
            raise
        self._committed_size, self._pending = self._size, []

    def close(self) -> None:
        if not self.closed:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                super().close()


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


def save_pretrained_atomically(saveable, folder: str | os.PathLike, **kwargs):
    """`saveable.save_pretrained(folder, **kwargs)` through `write_into_folder`: for objects whose class is not
    hf_ctx's own (transformers' `BertTokenizer`); hf_ctx's models and tokenizers save atomically themselves."""
    return write_into_folder(folder, lambda staging: saveable.save_pretrained(staging, **kwargs))


__all__ = [
    "CommittedFile",
    "atomic_write",
    "damaged_file_reason",
    "damaged_files",
    "WriteFailed",
    "full_disk_errno",
    "lock_output",
    "remove_stale_temporaries",
    "save_pretrained_atomically",
    "write_into_folder",
    "write_failed",
    "write_text",
]
