"""What a run holds while it writes its outputs: the writer lock of an output folder, and a file updated in place.

- [`lock_output`] makes one process at a time the writer of an output folder (`--output_dir`).
- [`CommittedFile`] is a file updated in place (the HDF5 file that `hf-ctx embed` extends): writes are held in
  memory and reach the disk at each `flush()`, new space first; a full disk during a flush leaves the file as it
  was at the previous flush. It locks its file.

This module imports only the standard library and `hf_ctx.atomic_files`.
"""

import contextlib
import io
import os

from ..atomic_files import remove_stale_temporaries, try_lock

# The lock file of an output folder (`lock_output`); never removed, so that two processes always lock one inode.
LOCK_FILE = ".hf_ctx-lock"

# Output folders this process holds the writer lock of: real path -> the lock file's descriptor.
_HELD_LOCKS: dict[str, int] = {}


def open_no_link(path: str, flags: int) -> int:
    """`os.open(path, flags)` that never follows a symbolic link at `path`: one planted there (pointing at a
    file outside the output folder, which the writer would truncate or overwrite) is an `OSError` naming it."""
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as error:
        if os.path.islink(path):
            raise OSError(
                error.errno,
                f"{path} is a symbolic link (to {os.readlink(path)}); hf_ctx does not write through links. Remove "
                "it, or write elsewhere",
            ) from None
        raise


def lock_output(folder: str | os.PathLike, what: str = "the output folder") -> None:
    """Make this process the one writer of `folder` (created if needed) until it exits, and remove the stale
    temporaries a killed writer left there (`remove_stale_temporaries`).

    The lock is an `flock` on `folder/.hf_ctx-lock` (never a link planted there: `open_no_link`), which the kernel releases when the process ends, however it
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
    fd = open_no_link(path, os.O_RDWR | os.O_CREAT)
    if not try_lock(fd):
        error = _written_by_another_run(fd, folder, what)
        os.close(fd)
        raise error
    with contextlib.suppress(OSError, AttributeError):  # who holds it, for the message (not on Windows)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} on {os.uname().nodename}".encode(), 0)
    _HELD_LOCKS[key] = fd
    remove_stale_temporaries(folder)


def check_no_other_writer(folder: str | os.PathLike, what: str = "the output folder") -> None:
    """Refuse `folder` while another process holds its writer lock (`lock_output`: a script's run), for the
    writers that do not take the lock themselves (`hf-ctx train-tokenizer`, the converters): what they wrote would
    mix with that run's files. Takes nothing: the lock is only tried."""
    folder = os.path.abspath(os.fspath(folder))
    path = os.path.join(folder, LOCK_FILE)
    if os.path.realpath(folder) in _HELD_LOCKS or not os.path.isfile(path) or os.path.islink(path):
        return
    fd = open_no_link(path, os.O_RDONLY)
    try:
        if not try_lock(fd):
            raise _written_by_another_run(fd, folder, what)
    finally:
        os.close(fd)  # closing drops the lock just tried


def _written_by_another_run(fd: int, folder: str, what: str) -> OSError:
    """The error of a `folder` whose lock file `fd` another process holds, naming that process."""
    holder = ""
    with contextlib.suppress(OSError):
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    return OSError(
        f"{what} {folder} is being written by another run ({holder or 'a process'}); wait for it to finish, "
        "or choose another folder"
    )


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
        self._fd = open_no_link(self.path, os.O_RDWR | (os.O_CREAT if create else 0))
        if not try_lock(self._fd):
            # None first: this half-made object's close (at garbage collection) must not close the number again,
            # by then another file's
            fd, self._fd = self._fd, None
            os.close(fd)
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
        if self._fd is None or self.failed is not None or self.closed or not self._unflushed():
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

    def _unflushed(self) -> bool:
        return bool(self._pending) or self._size != self._committed_size

    def close(self) -> None:
        if not self.closed:
            try:
                self.flush()
            finally:
                if self._fd is not None:
                    fd, self._fd = self._fd, None
                    os.close(fd)
                super().close()
