"""A Hugging Face Hub on 127.0.0.1, over HTTP, for the tests that push and load checkpoints with the real client.

`HubServer` is a standard-library `ThreadingHTTPServer` in a thread. It speaks the routes huggingface_hub's
client (and transformers through it) calls:

- `GET /api/whoami-v2` (who the token is),
- `POST /api/repos/create` (409 when it exists: `exist_ok`), `POST /api/validate-yaml` (a card's metadata),
- `GET /api/models/{repo}` and `.../revision/{rev}` (model info: `sha`, `siblings`),
- `GET /api/models/{repo}/tree/{rev}` (the files, for `delete_patterns`), `.../auth-check` (may the token read it),
- `POST /api/models/{repo}/preupload/{rev}` (every file "regular": the payload carries the bytes, so no LFS or
  Xet storage is needed; a file the repository has already gets its `oid`, and the client skips it unchanged),
- `POST /api/models/{repo}/commit/{rev}` (the NDJSON commit: `header`, `file`, `deletedFile`, `deletedFolder`),
- `POST /api/models/{repo}/branch/{branch}`,
- `HEAD`/`GET /{repo}/resolve/{rev}/{path}` with the headers the client checks (`X-Repo-Commit`, `ETag`,
  `Content-Length`); `*.safetensors` files are answered as the Hub answers LFS files: a 302 to a content URL
  (`/cdn/{sha256}`, on `localhost`: another host) with `X-Linked-Etag` and `X-Linked-Size`.

The Hub's failures: a token not in `tokens` is a 401 on any route, a write without a token a 401, a missing
repository a 404 `RepoNotFound`, a missing revision `RevisionNotFound`, a missing file `EntryNotFound`, a file of a
repository in `gated` a 403 `GatedRepo`, and `drop_commits` commits are read and then answered by a closed
connection.
Everything received is kept: `requests` (method, path, whether a token came), `commits` (repo, the files sent).
A route it does not know is a 404 recorded in `unknown`, for the test to assert there is none.
"""

import base64
import hashlib
import json
import os
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

TOKEN = "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"
USER = "me"
_MODELS = r"/api/models/(?P<repo>[^/]+/[^/]+)"


def folder_files(folder) -> dict[str, bytes]:
    """Every file below `folder`: its path relative to `folder` -> its bytes."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class _Repo:
    def __init__(self):
        self.commits: list[tuple[str, dict[str, bytes]]] = []  # (sha, the files after it), oldest first
        self.branches: dict[str, str] = {}  # name -> commit sha

    def files(self, revision: str) -> dict[str, bytes] | None:
        """The files at `revision` (a branch or a commit sha); None for a revision the repository has not."""
        sha = self.branches.get(revision, revision)
        return next((files for commit, files in self.commits if commit == sha), None)

    def commit(self, files: dict[str, bytes], branch: str) -> str:
        sha = hashlib.sha1(f"{len(self.commits)}{sorted(files)}".encode()).hexdigest()
        self.commits.append((sha, files))
        self.branches[branch] = sha
        return sha


class HubServer:
    """`with HubServer() as hub:` a Hub at `hub.endpoint`; see the module's docstring."""

    def __init__(self, tokens=(TOKEN,)):
        self.tokens = set(tokens)
        self.reset()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        # Another host, as the Hub's content (LFS, Xet) is: the client follows only the redirects within a host.
        self.content_endpoint = f"http://localhost:{self._server.server_address[1]}"

    def reset(self):
        """No repository, nothing received: a test's own Hub, on a server a module shares."""
        self.repos: dict[str, _Repo] = {}
        self.created: list[str] = []
        self.gated: set[str] = set()
        self.drop_commits = 0
        self.requests: list[tuple[str, str, bool]] = []
        self.commits: list[dict] = []  # {"repo_id", "revision", "summary", "files": {path: bytes}, "deleted"}
        self.unknown: list[str] = []

    def __enter__(self):
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def client_environment(self, home) -> dict[str, str]:
        """The environment of a process whose client uses this Hub, online, with its caches in `home`."""
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        return {**env, "HF_ENDPOINT": self.endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """A repository's files at `revision`."""
        return self.repos[repo_id].files(revision)

    def add_repo(self, repo_id: str, files: dict[str, bytes]) -> str:
        """A repository holding `files` on main; returns the commit's sha."""
        return self.repos.setdefault(repo_id, _Repo()).commit(dict(files), "main")


def _handler(hub: HubServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            self._route("GET")

        def do_HEAD(self):
            self._route("HEAD")

        def do_POST(self):
            self._route("POST")

        def _route(self, method):
            path = unquote(urlsplit(self.path).path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
            token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip() or None
            with hub._lock:
                hub.requests.append((method, path, token is not None))
            if token is not None and token not in hub.tokens:
                return self._error(401, "Invalid credentials in Authorization header")
            routes = [
                ("GET", r"/api/whoami-v2", self._whoami),
                ("GET", r"/api/agent-harnesses", self._agent_harnesses),
                ("POST", r"/api/repos/create", self._create),
                ("POST", r"/api/validate-yaml", self._validate_yaml),
                ("GET", _MODELS + r"(?:/revision/(?P<revision>.+))?", self._info),
                ("GET", _MODELS + r"/auth-check", self._auth_check),
                ("GET", _MODELS + r"/tree/(?P<revision>[^/]+)(?P<folder>/.*)?", self._tree),
                ("POST", _MODELS + r"/preupload/(?P<revision>.+)", self._preupload),
                ("POST", _MODELS + r"/commit/(?P<revision>.+)", self._commit),
                ("POST", _MODELS + r"/branch/(?P<branch>.+)", self._branch),
                ("HEAD", r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>.+)", self._resolve),
                ("GET", r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>.+)", self._resolve),
                ("HEAD", r"/cdn/(?P<sha256>\w+)", self._cdn),
                ("GET", r"/cdn/(?P<sha256>\w+)", self._cdn),
            ]
            for route_method, pattern, answer in routes:
                match = re.fullmatch(pattern, path)
                if route_method == method and match:
                    writes = answer in (self._whoami, self._create, self._preupload, self._commit, self._branch)
                    if writes and token is None:
                        return self._error(401, "You must be authenticated to access this route")
                    if "repo" in match.groupdict() and answer != self._create:
                        repo_id = match["repo"]
                        if repo_id not in hub.repos:
                            return self._error(404, "Repository not found", "RepoNotFound")
                        if repo_id in hub.gated and answer in (self._resolve, self._auth_check):  # info is public
                            return self._error(403, f"Access to model {repo_id} is restricted", "GatedRepo")
                    return answer(method=method, body=body, **match.groupdict())
            with hub._lock:
                hub.unknown.append(f"{method} {path}")
            return self._error(404, f"hub_server: no route {method} {path}")

        # Answers

        def _whoami(self, **_):
            self._json({"type": "user", "name": USER, "auth": {"accessToken": {"role": "write"}}, "orgs": []})

        def _agent_harnesses(self, **_):  # huggingface_hub 2's registry of coding agents: none
            self._json({"standardEnvVars": [], "harnesses": {}})

        def _create(self, body, **_):
            request = json.loads(body)
            repo_id = f"{request.get('organization') or USER}/{request['name']}"
            url = f"{hub.endpoint}/{repo_id}"
            if repo_id in hub.repos:
                return self._json({"error": "You already created this model repo", "url": url}, status=409)
            with hub._lock:
                hub.created.append(repo_id)
                hub.repos[repo_id] = repo = _Repo()
                repo.commit({".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"}, "main")
            self._json({"url": url, "name": repo_id, "id": repo_id})

        def _validate_yaml(self, body, **_):
            """The card's metadata (its YAML header) must be a mapping, as the Hub requires."""
            content = json.loads(body)["content"]
            header = re.match(r"---\n(.*?)\n---\n", content, re.S)
            try:
                metadata = yaml.safe_load(header[1]) if header else {}
            except yaml.YAMLError as error:
                return self._json({"errors": [{"message": str(error)}]}, status=400)
            if not isinstance(metadata, dict):
                return self._json({"errors": [{"message": "metadata is not a mapping"}]}, status=400)
            self._json({"errors": [], "warnings": []})

        def _info(self, repo, revision=None, **_):
            files = self._files(repo, revision or "main")
            if files is None:
                return
            sha = hub.repos[repo].branches.get(revision or "main", revision)
            self._json(
                {
                    "id": repo,
                    "_id": sha[:24],
                    "modelId": repo,
                    "sha": sha,
                    "private": False,
                    "gated": "auto" if repo in hub.gated else False,
                    "disabled": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": [],
                    "siblings": [{"rfilename": name} for name in sorted(files)],
                    "lastModified": "2026-12-02T00:00:00.000Z",
                    "createdAt": "2026-12-02T00:00:00.000Z",
                }
            )

        def _auth_check(self, **_):
            self._json({})

        def _tree(self, repo, revision, folder=None, **_):
            files = self._files(repo, revision)
            if files is not None:
                prefix = (folder or "").strip("/")
                listed = [
                    {"type": "file", "path": name, "oid": git_blob_sha1(content), "size": len(content)}
                    for name, content in sorted(files.items())
                    if not prefix or name.startswith(prefix + "/")
                ]
                self._json(listed)

        def _preupload(self, repo, revision, body, **_):
            files = self._files(repo, revision) or {}
            self._json(
                {
                    "files": [
                        {
                            "path": file["path"],
                            "uploadMode": "regular",
                            "shouldIgnore": False,
                            "oid": git_blob_sha1(files[file["path"]]) if file["path"] in files else None,
                        }
                        for file in json.loads(body)["files"]
                    ]
                }
            )

        def _commit(self, repo, revision, body, **_):
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
            if hub.drop_commits:
                hub.drop_commits -= 1
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            files = self._files(repo, revision)
            if files is None:
                return
            files, sent, deleted = dict(files), {}, []
            for line in lines:
                key, value = line["key"], line["value"]
                if key == "file":
                    sent[value["path"]] = base64.b64decode(value["content"])
                elif key in ("deletedFile", "deletedFolder"):
                    folder = value["path"].rstrip("/") + "/"
                    deleted += [
                        n for n in files if n == value["path"] or (key == "deletedFolder" and n.startswith(folder))
                    ]
                elif key != "header":
                    return self._error(400, f"hub_server: commit line {key!r} is not served")
            for name in deleted:
                del files[name]
            files.update(sent)
            header = lines[0]["value"]
            with hub._lock:
                sha = hub.repos[repo].commit(files, revision)
                hub.commits.append(
                    {
                        "repo_id": repo,
                        "revision": revision,
                        "summary": header.get("summary"),
                        "files": sent,
                        "deleted": deleted,
                    }
                )
            self._json({"commitUrl": f"{hub.endpoint}/{repo}/commit/{sha}", "commitOid": sha, "success": True})

        def _branch(self, repo, branch, body, **_):
            source = hub.repos[repo].branches.get(json.loads(body or b"{}").get("startingPoint") or "main")
            if branch in hub.repos[repo].branches:
                return self._error(409, "Reference already exists")
            hub.repos[repo].branches[branch] = source
            self._json({})

        def _resolve(self, method, repo, revision, file, **_):
            files = self._files(repo, revision)
            if files is None:
                return
            if file not in files:
                return self._error(404, "Entry not found", "EntryNotFound", head=method == "HEAD")
            content, sha = files[file], hub.repos[repo].branches.get(revision, revision)
            headers = {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha1(content)}"'}
            if file.endswith(".safetensors"):  # an LFS file: a redirect to its content
                sha256 = hashlib.sha256(content).hexdigest()
                headers.update(
                    {
                        "Location": f"{hub.content_endpoint}/cdn/{sha256}",
                        "X-Linked-Etag": f'"{sha256}"',
                        "X-Linked-Size": str(len(content)),
                    }
                )
                return self._send(302, b"", headers, method)
            self._send(200, content, headers, method)

        def _cdn(self, method, sha256, **_):
            for repo in hub.repos.values():
                for _, files in repo.commits:
                    for content in files.values():
                        if hashlib.sha256(content).hexdigest() == sha256:
                            return self._send(200, content, {"ETag": f'"{sha256}"'}, method)
            self._error(404, "no such object")

        # Helpers

        def _files(self, repo, revision):
            files = hub.repos[repo].files(revision)
            if files is None:
                self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound", head=self.command == "HEAD")
            return files

        def _json(self, value, status=200):
            self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"}, self.command)

        def _error(self, status, message, code=None, head=False):
            headers = {"Content-Type": "application/json", "X-Error-Message": message}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, json.dumps({"error": message}).encode(), headers, self.command)

        def _send(self, status, content, headers, method):
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(content)

    return Handler


def point_client_at(monkeypatch, hub: HubServer, home) -> None:
    """This process's huggingface_hub (and transformers through it) online and talking to `hub`, with its cache
    in `home`: the constants the client read from the environment when it was imported, and the environment
    itself for the processes a test starts."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)
    # huggingface_hub's module-level client (`create_repo`, `upload_folder` ... as functions, which transformers'
    # Trainer calls) took the endpoint when it was imported, perhaps under another module's server.
    from huggingface_hub import hf_api

    monkeypatch.setattr(hf_api.api, "endpoint", hub.endpoint)
    # transformers >= 5.2x keeps one HfApi of its own (`transformers.utils.hub.hf_api()`), made on first use: made
    # again for this server.
    import transformers.utils.hub

    monkeypatch.setattr(transformers.utils.hub, "_hf_api", None, raising=False)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    for name, value in hub.client_environment(home).items():
        monkeypatch.setenv(name, value)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
