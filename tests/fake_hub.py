"""A stand-in for the Hugging Face Hub, for the tests that push checkpoints (test_hub, test_pretrain_bert): no
network, and every file an upload would have sent is kept for the test to look at."""

from pathlib import Path
from unittest import mock

from huggingface_hub import HfApi, RepoUrl


def folder_files(folder) -> dict[str, bytes]:
    """Every file below `folder`: its path relative to `folder` -> its bytes."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class FakeHub:
    """Stands in for the Hub: records created repositories and the files of each upload."""

    def __init__(self):
        self.created, self.uploads = [], []

    def create_repo(self, api, repo_id, **kwargs):
        self.created.append(repo_id)
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, api, *, repo_id, folder_path, **kwargs):
        self.uploads.append({"repo_id": repo_id, "files": folder_files(folder_path), **kwargs})

    def __enter__(self):
        self._patches = [
            mock.patch.object(HfApi, "create_repo", autospec=True, side_effect=self.create_repo),
            mock.patch.object(HfApi, "upload_folder", autospec=True, side_effect=self.upload_folder),
        ]
        for patch in self._patches:
            patch.start()
        return self

    def __exit__(self, *exc):
        for patch in self._patches:
            patch.stop()
