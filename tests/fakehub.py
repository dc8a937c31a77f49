"""A tiny fake Hugging Face Hub on 127.0.0.1, for tests that must never touch the network.

It serves dataset repos from local folders with exactly the endpoints ``huggingface_hub`` (2.x)
uses for ``hf_hub_download`` and ``snapshot_download`` of a dataset:

- ``GET /api/datasets/{repo}`` and ``GET /api/datasets/{repo}/revision/{rev}``: metadata, with
  ``id``, ``sha`` (the commit) and ``siblings`` (``[{"rfilename": path}]``);
- ``GET /api/datasets/{repo}/tree/{rev}[/{path}]?recursive=...``: the file listing
  (``type``, ``oid``, ``size``, ``path``), one page, no ``Link`` header;
- ``HEAD`` and ``GET /datasets/{repo}/resolve/{rev}/{path}``: the file, with the headers the client
  checks: ``X-Repo-Commit`` (else "not a Hub endpoint"), ``ETag`` (the cache blob name; a git blob
  sha1 here) and ``Content-Length`` (the expected size). No ``X-Xet-Hash`` header, so the client
  takes the plain HTTP path, not Xet.

Errors are answered like the Hub: 404 with ``X-Error-Code: RepoNotFound`` for an unknown repo,
``RevisionNotFound`` for an unknown revision (anything but ``main`` and the commit),
``EntryNotFound`` (plus ``X-Repo-Commit``) for a missing file.

``tamper={"owner/name": {"path": b"other bytes"}}`` serves other bytes for a file (the listing and
the metadata agree with what is served, as a compromised mirror would), for checksum tests.
``requests`` records ``(method, path)`` of every request.

    with FakeHub({"owner/name": folder}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

MAIN = "main"


class _Repo:
    def __init__(self, folder: str | os.PathLike, tamper: dict[str, bytes] | None = None):
        folder = Path(folder)
        self.files: dict[str, bytes] = {}
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.files[path.relative_to(folder).as_posix()] = path.read_bytes()
        self.files.update(tamper or {})
        h = hashlib.sha1()
        for rel, data in sorted(self.files.items()):
            h.update(rel.encode() + b"\0" + hashlib.sha1(data).digest())
        self.sha = h.hexdigest()

    @staticmethod
    def blob_id(data: bytes) -> str:
        """The git blob id, which the Hub sends as the ETag of a non-LFS file."""
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def info(self, repo_id: str) -> dict:
        return {
            "_id": self.sha[:24],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": self.sha,
            "private": False,
            "gated": False,
            "disabled": False,
            "tags": [],
            "siblings": [{"rfilename": rel} for rel in self.files],
        }

    def tree(self, prefix: str, recursive: bool) -> list[dict]:
        """Entries under ``prefix``: folders first, then files (all levels when ``recursive``)."""
        base = prefix.strip("/") + "/" if prefix.strip("/") else ""
        files, folders = [], set()
        for rel, data in self.files.items():
            if not rel.startswith(base):
                continue
            parts = rel[len(base) :].split("/")
            if recursive or len(parts) == 1:
                files.append({"type": "file", "oid": self.blob_id(data), "size": len(data), "path": rel})
            depth = len(parts) - 1 if recursive else min(1, len(parts) - 1)
            folders.update(base + "/".join(parts[: i + 1]) for i in range(depth))
        dirs = [{"type": "directory", "oid": hashlib.sha1(f.encode()).hexdigest(), "path": f} for f in folders]
        return sorted(dirs, key=lambda d: d["path"]) + files


class FakeHub:
    """Serve ``{"owner/name": folder}`` as dataset repos; ``with FakeHub(...) as endpoint_url``."""

    def __init__(
        self,
        repos: dict[str, str | os.PathLike],
        tamper: dict[str, dict[str, bytes]] | None = None,
    ):
        tamper = tamper or {}
        self.repos = {repo_id: _Repo(folder, tamper.get(repo_id)) for repo_id, folder in repos.items()}
        self.requests: list[tuple[str, str]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                hub._handle(self, head=True)

            def do_GET(self) -> None:
                hub._handle(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fakehub", daemon=True
        )
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        return self.url

    def __exit__(self, *exc) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ----------------------------------------------------------------------------------------------

    def _handle(self, req: BaseHTTPRequestHandler, head: bool) -> None:
        url = urlsplit(req.path)
        path = unquote(url.path)
        self.requests.append((req.command, path))
        query = parse_qs(url.query)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
            repo_id = "/".join(parts[2:4])
            rest = parts[4:]
            repo = self._repo(req, repo_id)
            if repo is None:
                return
            if not rest:
                return self._json(req, repo.info(repo_id), head)
            if rest[0] == "revision" and len(rest) == 2:
                if self._rev_ok(req, repo, rest[1]):
                    self._json(req, repo.info(repo_id), head)
                return
            if rest[0] == "tree" and len(rest) >= 2:
                if self._rev_ok(req, repo, rest[1]):
                    recursive = query.get("recursive", ["False"])[0].lower() == "true"
                    self._json(req, repo.tree("/".join(rest[2:]), recursive), head)
                return
        elif parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
            repo_id = "/".join(parts[1:3])
            repo = self._repo(req, repo_id)
            if repo is None or not self._rev_ok(req, repo, parts[4]):
                return
            rel = "/".join(parts[5:])
            data = repo.files.get(rel)
            if data is None:
                return self._error(req, 404, "EntryNotFound", f"{rel} not found", {"X-Repo-Commit": repo.sha})
            headers = {
                "Content-Type": "application/octet-stream",
                "Content-Length": str(len(data)),
                "ETag": f'"{repo.blob_id(data)}"',
                "X-Repo-Commit": repo.sha,
                "Accept-Ranges": "bytes",
            }
            return self._send(req, 200, headers, data, head)
        self._error(req, 404, None, f"no route for {path}")

    def _repo(self, req: BaseHTTPRequestHandler, repo_id: str) -> _Repo | None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._error(req, 404, "RepoNotFound", "Repository not found")
        return repo

    def _rev_ok(self, req: BaseHTTPRequestHandler, repo: _Repo, rev: str) -> bool:
        if rev in (MAIN, repo.sha):
            return True
        self._error(req, 404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    def _json(self, req: BaseHTTPRequestHandler, payload, head: bool) -> None:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        self._send(req, 200, headers, body, head)

    def _error(self, req, status: int, code: str | None, message: str, extra: dict | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if code:
            headers["X-Error-Code"] = code
            headers["X-Error-Message"] = message
        headers.update(extra or {})
        self._send(req, status, headers, body, req.command == "HEAD")

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, headers: dict, body: bytes, head: bool) -> None:
        req.send_response(status)
        for key, value in headers.items():
            req.send_header(key, value)
        req.end_headers()
        if not head:
            req.wfile.write(body)
