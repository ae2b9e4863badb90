"""Atomic writing: the one home of how hf_ctx writes files, so that a crash or a full disk never leaves a broken one.

- [`atomic_write`] writes one file: a temporary name in the same folder, flush, fsync, rename over the target.
  A failure (an exception, `ENOSPC`, a kill) leaves the previous file (or none) and no temporary file behind.
- [`CommittedFile`] is a file updated in place (an HDF5 file that `hf-ctx embed` extends): writes are held in
  memory and reach the disk at each `flush()`, new space first; a full disk during a flush leaves the file as
  it was at the previous flush.
- [`damaged_file_reason`] says why a file that exists cannot be what its name says (a truncated safetensors,
  `torch.save` archive or JSON file), without loading (or unpickling) it; [`damaged_files`] checks a folder.
- [`write_into_folder`] runs a function that writes several files (`save_pretrained`) into a temporary sibling
  folder, then moves each file into the target folder (renames, which need no space; `config.json` last) and
  removes weight files of the previous save that the new one replaced (a sharded save over a single file). A
  failure while writing leaves the target folder as it was.

See docs/reliability.md for what each writer of hf_ctx guarantees. This module travels with the checkpoints of
every model and tokenizer that imports it (remote code): it imports only the standard library.
"""

import contextlib
import io
import json
import os
import shutil
import struct
import tempfile
import zipfile
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
    `damaged` is set; a kill at any other time leaves the last flushed state.

    Args:
        path: the file.
        create: start an empty file (truncating an existing one) instead of updating `path`.
    """

    def __init__(self, path: str | os.PathLike, create: bool = False):
        super().__init__()
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0), 0o666)
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
    "save_pretrained_atomically",
    "write_into_folder",
    "write_text",
]
