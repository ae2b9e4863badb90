"""A stand-in for the Hugging Face Hub, for the tests that push checkpoints (test_hub, test_pretrain_bert): no
network, and every file an upload would have sent is kept for the test to look at.

`upload_folder` honours `allow_patterns`, `ignore_patterns`, `path_in_repo` and `delete_patterns` as the real one
does; `create_commit` (what transformers' own `push_to_hub` calls) applies its `CommitOperationAdd` and
`CommitOperationDelete` operations. Each upload is a commit on top of the repository's previous files, so a test
sees every revision a reader of the repository could have downloaded (`FakeHub.revisions`). `ModelCard.load` reads
the fake repository's README.md (transformers reads the card before it pushes)."""

from concurrent.futures import Future
from pathlib import Path
from unittest import mock

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, ModelCard, RepoUrl
from huggingface_hub.errors import EntryNotFoundError
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
        repo = self.repos.setdefault(repo_id, {})
        deleted = filter_repo_objects(list(repo), allow_patterns=delete_patterns) if delete_patterns else []
        return self._commit(
            repo_id, uploaded, [name for name in deleted if name not in uploaded], run_as_future, kwargs
        )

    def create_commit(self, api, repo_id, operations, *, run_as_future=False, **kwargs):
        uploaded, deleted = {}, []
        for operation in operations:
            if isinstance(operation, CommitOperationAdd):
                with operation.as_file() as f:
                    uploaded[operation.path_in_repo] = f.read()
            elif isinstance(operation, CommitOperationDelete):
                folder = operation.path_in_repo.rstrip("/") + "/"
                deleted += [
                    n for n in self.repos.get(repo_id, {}) if n == operation.path_in_repo or n.startswith(folder)
                ]
            else:
                raise NotImplementedError(f"FakeHub.create_commit: {type(operation).__name__}")
        return self._commit(repo_id, uploaded, deleted, run_as_future, kwargs)

    def _commit(self, repo_id, uploaded, deleted, run_as_future, kwargs):
        """Record an upload of `uploaded` (path in the repository -> bytes) removing `deleted`, as a new revision."""
        self.uploads.append({"repo_id": repo_id, "files": uploaded, **kwargs})
        repo = self.repos.setdefault(repo_id, {})
        for name in deleted:
            del repo[name]
        repo.update(uploaded)
        self.revisions.append((repo_id, dict(repo)))
        if run_as_future:  # the upload is over already: a finished future
            future = Future()
            future.set_result(None)
            return future

    def load_model_card(self, repo_id, **kwargs):
        card = self.repos.get(repo_id, {}).get("README.md")
        if card is None:
            raise EntryNotFoundError(f"{repo_id} has no README.md")
        return ModelCard(card.decode())

    def __enter__(self):
        self._patches = [
            mock.patch.object(HfApi, "create_repo", autospec=True, side_effect=self.create_repo),
            mock.patch.object(HfApi, "upload_folder", autospec=True, side_effect=self.upload_folder),
            mock.patch.object(HfApi, "create_commit", autospec=True, side_effect=self.create_commit),
            mock.patch.object(HfApi, "create_branch", autospec=True),
            mock.patch.object(ModelCard, "load", side_effect=self.load_model_card),
        ]
        for patch in self._patches:
            patch.start()
        return self

    def __exit__(self, *exc):
        for patch in self._patches:
            patch.stop()
