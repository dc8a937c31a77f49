"""Hub paths: ``hf://owner/name[/CONFIG][:SPLIT]`` (or ``hf://datasets/owner/name…``, and plain ``owner/name`` ids).

Every loader takes a local folder or a Hub path (docs/design.md). This module fetches the dataset repo a
Hub path names, so that the loaders only ever read a local folder:

- ``parse_hub_spec("hf://ZaandaTeika/SHARP/SHARP-Math:test")`` gives
  ``HubRef("ZaandaTeika/SHARP", "SHARP-Math", "test")``; anything not starting with ``hf://`` gives
  ``None`` (a local path), a malformed ``hf://`` path raises ``BadInput`` (``data.hub_paths``, whose
  names are importable from here too).
- ``download_dataset("M-amir1998/arith-v1")`` returns the local folder that mirrors the repo. For a
  manifest-backed repo it fetches ``manifest.json``, then ``README.md`` and every file the manifest
  lists, and re-hashes each against the manifest (docs/design.md "Reliability conventions"): a mismatch is
  ``BadInput`` naming the file, the expected and the found hash. A repo without a manifest is
  fetched whole.

``huggingface_hub`` does the HTTP, the token, the cache and the downloads (``HfApi.repo_info``,
``hf_hub_download``, ``snapshot_download`` with ``allow_patterns`` and ``local_files_only``, whose cached
file listing tells a partial snapshot from a whole one). Written here, and why:

- **Path parsing and checksums.** The library knows neither the ``hf://owner/name/CONFIG:SPLIT`` form
  (``data.hub_paths``) nor ``manifest.json``, the hashes the dataset was released with, checked here
  on every load whatever the Hub (or the cache) holds.
- **Fail at once, in one line, when the Hub cannot be reached.** ``hf_hub_download`` answers a
  connection error with retries, a 60 s timeout and back-off (about half a minute on a refused port),
  then a multi-line error. So ``HfApi.repo_info`` (one GET of ``/api/datasets/{repo}/revision/{rev}``,
  no retries) goes first, with a short timeout (``HF_HUB_ETAG_TIMEOUT``, default 5 s); downloads start
  only once the Hub has answered. No network and no cached copy is ``HubUnavailable`` in one line; a
  404/401 is ``BadInput`` ("no such dataset"), not an outage. ``models.loading`` probes model ids the
  same way (``probe_repo``, ``refusal``).
- **Offline with a cached copy works, and is still verified.** When the Hub is unreachable (or
  ``HF_HUB_OFFLINE=1``), a copy already in the Hugging Face cache is used, as ``huggingface_hub``
  itself does, after re-hashing every file against the cached ``manifest.json``; a warning names
  the cached commit. Without a (complete) cached copy it is ``HubUnavailable``.
- **Environment read at call time.** ``huggingface_hub`` reads ``HF_ENDPOINT``, ``HF_HOME`` and
  ``HF_HUB_OFFLINE`` once, at import. Here they are read on every call and passed explicitly
  (``endpoint=``, ``cache_dir=``, ``local_files_only=``), so a variable set after import (a test, a
  notebook) takes effect.
- **Cheap to import.** ``huggingface_hub`` is imported inside the functions; the ``data`` layer never
  imports torch or transformers.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

# The loaders import the path parsing from here: data.hub is their one door to the Hub.
from posttrainlab.data.hub_paths import PREFIX, HubRef, looks_like_hub_id, parse_hub_spec, valid_name  # noqa: F401
from posttrainlab.data.manifest import MANIFEST, check_file
from posttrainlab.errors import BadInput, HubUnavailable, one_line

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_PROBE_TIMEOUT_S = 5.0
README = "README.md"
_TRUE = {"1", "on", "yes", "true"}


# --------------------------------------------------------------------------------------------------
# Environment, read at call time


def hub_endpoint() -> str:
    """The Hub base URL: ``HF_ENDPOINT`` as set now, else ``huggingface_hub``'s default."""
    value = os.environ.get("HF_ENDPOINT", "").strip()
    if not value:
        from huggingface_hub import constants

        value = constants.ENDPOINT or DEFAULT_ENDPOINT
    value = value.rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput(f"HF_ENDPOINT={value!r} is not an http(s) URL (e.g. https://huggingface.co)")
    return value


def hub_cache_dir(cache_dir: str | os.PathLike | None = None) -> str:
    """The Hugging Face hub cache: ``cache_dir``, else ``HF_HUB_CACHE``, else ``HF_HOME/hub`` (now)."""
    if cache_dir is not None:
        return str(Path(cache_dir).expanduser())
    if os.environ.get("HF_HUB_CACHE"):
        return str(Path(os.environ["HF_HUB_CACHE"]).expanduser())
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]).expanduser() / "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def offline_env() -> bool:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in _TRUE:
            return True
    return False


def probe_timeout() -> float:
    try:
        value = float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or DEFAULT_PROBE_TIMEOUT_S)
    except ValueError:
        return DEFAULT_PROBE_TIMEOUT_S
    return value if value > 0 else DEFAULT_PROBE_TIMEOUT_S


# --------------------------------------------------------------------------------------------------
# The probe, and what the Hub's answers mean


class Unreachable(Exception):
    """The Hub did not answer usefully (no network, timeout, 5xx): try the cache, then give up."""


_NETWORK_ERROR_NAMES = {
    "TransportError",  # httpx / httpx2: connect, read, timeout, protocol, proxy, unsupported scheme
    "ConnectionError",  # requests and the builtin; huggingface_hub's OfflineModeIsEnabled derives from it
    "Timeout",  # requests
    "TimeoutError",
}


def is_network_error(exc: BaseException) -> bool:
    """Whether ``exc`` means "could not talk to the server" (independent of the HTTP library)."""
    return any(cls.__name__ in _NETWORK_ERROR_NAMES for cls in type(exc).__mro__)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a ``huggingface_hub`` HTTP error (``None`` for any other exception)."""
    return getattr(getattr(exc, "response", None), "status_code", None)


def refusal(exc: BaseException) -> str | None:
    """What an answer of the Hub refused: ``revision``, ``denied``, ``private``, ``missing``; ``None`` otherwise.

    ``denied``: 403 (gated, terms not accepted); ``private``: 401 (missing or private, the Hub does not say);
    ``missing``: 404 or ``RepoNotFound``.
    """
    from huggingface_hub import errors

    status = http_status(exc)
    if isinstance(exc, errors.RevisionNotFoundError):
        return "revision"
    if status == 403 or isinstance(exc, errors.GatedRepoError):
        return "denied"
    if status == 401:
        return "private"
    if status == 404 or isinstance(exc, errors.RepositoryNotFoundError):
        return "missing"
    return None


def probe_repo(repo_id: str, *, repo_type: str, revision: str, endpoint: str):
    """``HfApi.repo_info``: one GET of the repo's metadata with a short timeout (no retries), the user's token.

    Returns the info (``sha``: the commit ``revision`` names; ``siblings``: its files). ``Unreachable``, with a
    one-line reason, when no usable answer came back: no network, a timeout, an HTTP error that is not a
    ``refusal``, or an answer unlike a Hub's. A refusal is raised as ``huggingface_hub`` raised it.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    url = f"{endpoint}/api/{repo_type}s/{repo_id}/revision/{revision}"
    try:
        info = HfApi(endpoint=endpoint).repo_info(
            repo_id, repo_type=repo_type, revision=revision, timeout=probe_timeout()
        )
    except HfHubHTTPError as e:
        if refusal(e) is not None:
            raise
        raise Unreachable(f"HTTP {http_status(e)} from {url}") from None
    except (ValueError, TypeError, KeyError, AttributeError):  # a body that is not the Hub's JSON
        raise Unreachable(f"{url} did not answer like a Hugging Face Hub") from None
    except Exception as e:
        if is_network_error(e):
            raise Unreachable(one_line(e)) from None
        raise
    if not isinstance(getattr(info, "sha", None), str):
        raise Unreachable(f"{url} did not answer like a Hugging Face Hub")
    return info


_REFUSED = {  # refusal(...) -> the one-line message for a dataset
    "revision": "no revision {revision!r} of this dataset on {endpoint}",
    "denied": "access denied by {endpoint} (gated dataset? accept its terms, set HF_TOKEN)",
    "private": "no such dataset on {endpoint} (or it is private: log in or set HF_TOKEN)",
    "missing": "no such dataset on {endpoint}",
}


def _refused(spec: str, endpoint: str, exc: BaseException, revision: str) -> BadInput | None:
    kind = refusal(exc)
    return BadInput(f"{spec}: " + _REFUSED[kind].format(revision=revision, endpoint=endpoint)) if kind else None


def _unavailable(spec: str, endpoint: str, reason: str) -> HubUnavailable:
    return HubUnavailable(
        f"cannot reach the Hugging Face Hub at {endpoint} for {spec} (offline? {reason}) "
        "and it is not in the local Hugging Face cache: download it where the network works "
        "and pass the local folder, or set HF_ENDPOINT"
    )


def _map_hub_error(spec: str, endpoint: str, revision: str, exc: Exception) -> Exception:
    """Turn an error of a ``huggingface_hub`` download call into ``BadInput``/``HubUnavailable``."""
    from huggingface_hub import errors

    refused = _refused(spec, endpoint, exc, revision)
    if refused is not None:
        return refused
    if isinstance(exc, errors.LocalEntryNotFoundError) or is_network_error(exc):
        return _unavailable(spec, endpoint, one_line(exc))
    if isinstance(exc, errors.EntryNotFoundError):
        return BadInput(f"{spec}: a file is missing from the repo ({one_line(exc)})")
    if isinstance(exc, errors.FileMetadataError):
        return HubUnavailable(f"{spec}: {endpoint} did not answer like a Hugging Face Hub ({one_line(exc)})")
    if isinstance(exc, errors.HfHubHTTPError):
        return HubUnavailable(f"{spec}: the Hub at {endpoint} failed: {one_line(exc)}")
    return exc


# --------------------------------------------------------------------------------------------------
# The manifest


def _safe_rel(spec: str, rel: Any) -> str:
    """A manifest path must stay inside the repo: relative, '/'-separated, no '..'."""
    if not isinstance(rel, str) or not rel:
        raise BadInput(f"{spec}: {MANIFEST} lists a bad file name {rel!r}")
    p = PurePosixPath(rel)
    if p.is_absolute() or "\\" in rel or any(part in ("", ".", "..") for part in rel.split("/")):
        raise BadInput(f"{spec}: {MANIFEST} lists a file outside the repo: {rel!r}")
    return rel


def _load_manifest(spec: str, path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadInput(f"{spec}: {MANIFEST} is not valid JSON ({one_line(e)})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise BadInput(f"{spec}: {MANIFEST} is not a manifest (no 'files' mapping)")
    for rel, entry in manifest["files"].items():
        _safe_rel(spec, rel)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise BadInput(f"{spec}: {MANIFEST} has no sha256 for {rel}")
    return manifest


def _verify(spec: str, root: Path, manifest: dict[str, Any]) -> None:
    """Re-hash every manifest file under ``root``; ``BadInput`` naming the first that differs."""
    for rel, entry in manifest["files"].items():
        problem = check_file(root, rel, entry)
        if problem is not None:
            raise BadInput(f"{spec}: {rel}: {problem.fault} (local copy {problem.path})")


# --------------------------------------------------------------------------------------------------
# Download


def _fetch_manifest_backed(
    spec: str, repo_id: str, revision: str, endpoint: str, cache: str, siblings: set[str] | None
) -> Path:
    from huggingface_hub import hf_hub_download, snapshot_download

    # The manifest by branch name (this records refs/<revision> in the cache, for offline use);
    # the files it lists by the commit it came from, so a push in between cannot mix two versions.
    manifest_path = Path(
        hf_hub_download(repo_id, MANIFEST, repo_type="dataset", revision=revision, cache_dir=cache, endpoint=endpoint)
    )
    manifest = _load_manifest(spec, manifest_path)
    for rel in manifest["files"]:
        if siblings is not None and rel not in siblings:
            raise BadInput(f"{spec}: {MANIFEST} lists {rel}, which the repo on {endpoint} does not have")
    wanted = [README, *manifest["files"]]  # exact names: glob.escape keeps '*', '?', '[' literal
    folder = snapshot_download(
        repo_id,
        repo_type="dataset",
        revision=manifest_path.parent.name,
        cache_dir=cache,
        endpoint=endpoint,
        allow_patterns=[glob.escape(rel) for rel in wanted],
    )
    root = Path(folder)
    _verify(spec, root, manifest)
    return root


def _from_cache(spec: str, repo_id: str, revision: str, cache: str, why: str) -> Path | None:
    """The cached copy of the repo at ``revision``, verified; ``None`` when it is not (fully) cached."""
    from huggingface_hub import errors, snapshot_download

    def cached(patterns: list[str] | None) -> Path:
        return Path(
            snapshot_download(
                repo_id,
                repo_type="dataset",
                revision=revision,
                cache_dir=cache,
                local_files_only=True,
                allow_patterns=patterns,
            )
        )

    try:
        root = cached([MANIFEST])
        if not (root / MANIFEST).is_file():  # a repo without a manifest: the whole snapshot
            root = cached(None)
            log.warning("%s: %s; using the cached snapshot %s", spec, why, root.name)
            return root
    except errors.LocalEntryNotFoundError:  # not cached, or in part only (IncompleteSnapshotError)
        return None
    manifest = _load_manifest(spec, root / MANIFEST)
    if not all((root / rel).is_file() for rel in manifest["files"]):
        return None
    _verify(spec, root, manifest)
    log.warning("%s: %s; using the cached copy at commit %s (checksums verified)", spec, why, root.name)
    return root


def download_dataset(repo_id: str, revision: str | None = None, cache_dir: str | os.PathLike | None = None) -> Path:
    """Download the dataset repo ``repo_id`` and return the local folder that mirrors it.

    With a ``manifest.json``: fetch it, ``README.md`` and every file it lists, and verify each
    file's SHA-256 (``BadInput`` on a mismatch). Without: fetch the whole snapshot. Files live in the
    Hugging Face cache (``cache_dir``, else ``HF_HUB_CACHE``/``HF_HOME``); the returned folder is the
    cached snapshot of the commit. ``HubUnavailable`` when the Hub cannot be reached and no complete
    copy is cached; ``BadInput`` when the repo or revision does not exist.
    """
    spec = PREFIX + repo_id
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if len(parts) != 2 or not all(valid_name(p) for p in parts):
        raise BadInput(f"{spec}: not a Hub dataset id (expected owner/name)")
    rev = revision or "main"
    cache = hub_cache_dir(cache_dir)

    if offline_env():
        cached = _from_cache(spec, repo_id, rev, cache, "HF_HUB_OFFLINE is set")
        if cached is None:
            raise HubUnavailable(
                f"HF_HUB_OFFLINE is set and {spec} is not in the local Hugging Face cache ({cache}): "
                "unset HF_HUB_OFFLINE where the network works, or pass a local folder"
            )
        return cached

    endpoint = hub_endpoint()
    try:
        info = probe_repo(repo_id, repo_type="dataset", revision=rev, endpoint=endpoint)
    except Unreachable as e:
        cached = _from_cache(spec, repo_id, rev, cache, f"Hub unreachable ({e})")
        if cached is None:
            raise _unavailable(spec, endpoint, str(e)) from None
        return cached
    except Exception as e:
        refused = _refused(spec, endpoint, e, rev)
        if refused is None:
            raise
        raise refused from None

    from huggingface_hub import errors, snapshot_download

    raw = info.siblings
    siblings = {s.rfilename for s in raw} if isinstance(raw, list) else None
    try:
        if siblings is None or MANIFEST in siblings:
            try:
                return _fetch_manifest_backed(spec, repo_id, rev, endpoint, cache, siblings)
            except errors.RemoteEntryNotFoundError:
                if siblings is not None:  # with no file list, a missing manifest.json means a plain snapshot
                    raise
        return Path(snapshot_download(repo_id, repo_type="dataset", revision=rev, cache_dir=cache, endpoint=endpoint))
    except (BadInput, HubUnavailable):
        raise
    except Exception as e:
        mapped = _map_hub_error(spec, endpoint, rev, e)
        if mapped is e:
            raise
        raise mapped from None
