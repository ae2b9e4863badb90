"""Real file systems for the tests of hf_ctx's writers: a tmpfs the test mounts (another file system than the
tests' temporary folder, or a small one that fills up), unmounted when the test ends. Mounting needs root (or
CAP_SYS_ADMIN); where it is refused, the test is skipped with the reason."""

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

NO_MOUNT = "needs to mount a tmpfs (root or CAP_SYS_ADMIN): a real second or full file system"


@contextlib.contextmanager
def tmpfs(folder: Path, size: str = "16m"):
    """A tmpfs of `size` mounted on `folder` (created) for the block; skips the test where it cannot mount."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip(NO_MOUNT)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"{NO_MOUNT}: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def resize(folder: Path, size: str) -> None:
    """Grow or shrink the tmpfs mounted on `folder` (what freeing space on a full disk looks like)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True, capture_output=True)


@contextlib.contextmanager
def other_filesystem(tmp_path: Path):
    """A folder on another file system than `tmp_path`: a tmpfs mounted for the test, else /dev/shm where it is one;
    skips the test where neither is."""
    with contextlib.ExitStack() as stack:
        folder = tmp_path / "mnt"
        folder.mkdir()
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(folder)], capture_output=True, text=True
        )
        if mounted.returncode == 0:
            stack.callback(subprocess.run, ["umount", "-l", str(folder)], capture_output=True)
        else:
            shm = Path("/dev/shm")
            if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
                pytest.skip(f"{NO_MOUNT}, and /dev/shm is not another file system")
            folder = Path(stack.enter_context(_temporary_folder(shm)))
        assert os.stat(folder).st_dev != os.stat(tmp_path).st_dev
        yield folder


@contextlib.contextmanager
def _temporary_folder(parent: Path):
    import tempfile

    with tempfile.TemporaryDirectory(dir=parent) as folder:
        yield folder
