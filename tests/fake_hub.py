"""A stand-in for the Hugging Face Hub, for the tests that push checkpoints (test_hub, test_pretrain_bert): no
network, and every file an upload would have sent is kept for the test to look at.

`upload_folder` honours `allow_patterns`, `ignore_patterns`, `path_in_repo` and `delete_patterns` as the real one
does, and each upload is a commit on top of the repository's previous files, so a test sees every revision a
reader of the repository could have downloaded (`FakeHub.revisions`)."""

from concurrent.futures import Future
from pathlib import Path
from unittest import mock

from huggingface_hub import HfApi, RepoUrl
from huggingface_hub.utils import filter_repo_objects


def folder_files(folder) -> dict[str, bytes]:
    """Every file below `folder`: its path relative to `folder` -> its bytes."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class FakeHub:
    """Stands in for the Hub: records created repositories, the files of each upload, and each revision."""

    def __init__(self):
        self.created, self.uploads = [], []
        self.repos: dict[str, dict[str, bytes]] = {}  # repo id -> its files now
        self.revisions: list[tuple[str, dict[str, bytes]]] = []  # (repo id, its files after the commit), in order

    def create_repo(self, api, repo_id, **kwargs):
        self.created.append(repo_id)
        self.repos.setdefault(repo_id, {})
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(
        self,
        api,
        *,
        repo_id,
        folder_path,
        path_in_repo=None,
        allow_patterns=None,
        ignore_patterns=None,
        delete_patterns=None,
        run_as_future=False,
        **kwargs,
    ):
        files = folder_files(folder_path)
        kept = set(filter_repo_objects(files, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns))
        prefix = f"{path_in_repo.strip('/')}/" if path_in_repo else ""
        uploaded = {prefix + name: content for name, content in files.items() if name in kept}
        self.uploads.append({"repo_id": repo_id, "files": uploaded, **kwargs})
        repo = self.repos.setdefault(repo_id, {})
        for name in filter_repo_objects(list(repo), allow_patterns=delete_patterns) if delete_patterns else ():
            if name not in uploaded:
                del repo[name]
        repo.update(uploaded)
        self.revisions.append((repo_id, dict(repo)))
        if run_as_future:  # the upload is over already: a finished future
            future = Future()
            future.set_result(None)
            return future

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
