"""Hub paths: ``hf://owner/name[/CONFIG][:SPLIT]`` (and plain ``owner/name`` ids).

Every loader takes a local folder or a Hub path (DESIGN.md). This module parses Hub paths and
downloads the dataset repo they name, so that the loaders only ever read a local folder:

- ``parse_hub_spec("hf://ZaandaTeika/SHARP/SHARP-Math:test")`` gives
  ``HubRef("ZaandaTeika/SHARP", "SHARP-Math", "test")``; anything not starting with ``hf://`` gives
  ``None`` (a local path), a malformed ``hf://`` path raises ``BadInput``.
- ``download_dataset("M-amir1998/arith-v1")`` returns the local folder that mirrors the repo. For a
  manifest-backed repo it fetches ``manifest.json``, ``README.md`` and every file the manifest lists,
  and re-hashes each against the manifest (DESIGN.md "Reliability conventions"): a mismatch is
  ``BadInput`` naming the file, the expected and the found hash. A repo without a manifest is
  fetched whole with ``snapshot_download``.

Why it is written this way:

- **Fail at once, in one line, when the Hub cannot be reached.** ``hf_hub_download`` answers a
  connection error by retrying with a 60 s timeout and exponential back-off (about half a minute on a
  refused port) and then raises a multi-line error. So one plain GET of the dataset's metadata
  (``/api/datasets/{repo}/revision/{rev}``) goes first, through ``huggingface_hub``'s own HTTP
  session (its proxies, certificates and ``HF_HUB_OFFLINE`` hook) but without retries and with a
  short timeout (``HF_HUB_ETAG_TIMEOUT``, default 5 s; DNS failures and refused connections return
  in milliseconds). If it fails for lack of a network, and the repo is not in the local cache,
  ``HubUnavailable`` says so in one line; ``huggingface_hub`` is only asked to download once the Hub
  has answered. A 404/401 is ``BadInput`` ("no such dataset"), not an outage.
- **Offline with a cached copy works, and is still verified.** When the Hub is unreachable (or
  ``HF_HUB_OFFLINE=1``), a copy already in the Hugging Face cache is used, as ``huggingface_hub``
  itself does, after re-hashing every file against the cached ``manifest.json``; a warning names
  the cached commit. Without a cached copy it is ``HubUnavailable``.
- **Environment read at call time.** ``huggingface_hub`` reads ``HF_ENDPOINT``, ``HF_HOME`` and
  ``HF_HUB_OFFLINE`` once, at import. Here they are read on every call and passed explicitly
  (``endpoint=``, ``cache_dir=``, ``local_files_only=``), so a variable set after import (a test, a
  notebook) takes effect.
- **Cheap to import.** ``huggingface_hub`` is imported inside the functions; the ``data`` layer never
  imports torch or transformers.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

from posttrainlab.data.manifest import MANIFEST, check_file
from posttrainlab.errors import BadInput, HubUnavailable, one_line

log = logging.getLogger(__name__)

PREFIX = "hf://"
DATASETS_NAMESPACE = "datasets/"  # hf://datasets/owner/name, the Hugging Face file-system form
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_PROBE_TIMEOUT_S = 5.0
README = "README.md"

# Hub repo ids: letters, digits, '-', '_', '.'; no leading/trailing '-' or '.', no '--' or '..'.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_CONFIG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SPLIT = re.compile(r"\w+(?:\.\w+)*")  # the split-name rule of `datasets`
# A missing local *file* should not be mistaken for a Hub id ("data/test.jsonl").
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".tsv", ".txt", ".arrow", ".yaml", ".yml", ".gz")
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True)
class HubRef:
    """A parsed Hub path: the dataset repo and, optionally, its configuration and split."""

    repo_id: str
    config: str | None = None
    split: str | None = None

    @property
    def spec(self) -> str:
        """The ``hf://`` path back: ``hf://owner/name[/CONFIG][:SPLIT]``."""
        text = PREFIX + self.repo_id
        if self.config is not None:
            text += "/" + self.config
        if self.split is not None:
            text += ":" + self.split
        return text


def valid_name(part: str) -> bool:
    return bool(_NAME.fullmatch(part)) and "--" not in part and ".." not in part


def parse_hub_spec(spec: str) -> HubRef | None:
    """Parse ``hf://owner/name[/CONFIG][:SPLIT]``; ``None`` when ``spec`` is not an ``hf://`` path.

    Hugging Face's own form for a dataset, ``hf://datasets/owner/name…`` (``huggingface_hub``'s file system), is the
    same path: ``datasets`` is a reserved namespace on the Hub, never an owner.

    >>> parse_hub_spec("hf://ZaandaTeika/SHARP/SHARP-Math:test")
    HubRef(repo_id='ZaandaTeika/SHARP', config='SHARP-Math', split='test')
    >>> parse_hub_spec("hf://datasets/ZaandaTeika/SHARP/SHARP-Math:test")
    HubRef(repo_id='ZaandaTeika/SHARP', config='SHARP-Math', split='test')
    >>> parse_hub_spec("hf://M-amir1998/arith-v1")
    HubRef(repo_id='M-amir1998/arith-v1', config=None, split=None)
    >>> parse_hub_spec("data/arith-v1") is None
    True
    """
    if not isinstance(spec, str) or not spec.startswith(PREFIX):
        return None
    body = spec[len(PREFIX) :]
    if body.startswith(DATASETS_NAMESPACE):
        body = body[len(DATASETS_NAMESPACE) :]
    path, sep, split = body.partition(":")
    if sep:
        if not split:
            raise BadInput(f"{spec}: empty split after ':' (expected hf://owner/name[/CONFIG][:SPLIT])")
        if not _SPLIT.fullmatch(split):
            raise BadInput(f"{spec}: bad split name {split!r} (letters, digits, '_' and '.' only)")
    parts = path.split("/")
    if len(parts) < 2:
        raise BadInput(f"{spec}: expected hf://owner/name[/CONFIG][:SPLIT], got no '/name'")
    if len(parts) > 3:
        raise BadInput(f"{spec}: too many '/' parts (expected hf://owner/name[/CONFIG][:SPLIT])")
    owner, name = parts[0], parts[1]
    for label, part in (("owner", owner), ("dataset name", name)):
        if not part:
            raise BadInput(f"{spec}: empty {label} (expected hf://owner/name[/CONFIG][:SPLIT])")
        if not valid_name(part):
            raise BadInput(
                f"{spec}: bad {label} {part!r} (letters, digits, '-', '_', '.'; "
                "no leading or trailing '-'/'.', no '--' or '..')"
            )
    config = parts[2] if len(parts) == 3 else None
    if config is not None and not _CONFIG.fullmatch(config):
        what = "empty configuration" if not config else f"bad configuration name {config!r}"
        raise BadInput(f"{spec}: {what} (expected hf://owner/name[/CONFIG][:SPLIT])")
    return HubRef(f"{owner}/{name}", config, split if sep else None)


def looks_like_hub_id(spec: str) -> bool:
    """True for a plain ``owner/name`` that could be a Hub dataset id.

    Call it only for a path that does not exist locally: ``"M-amir1998/arith-v1"`` could be a folder.
    Names ending in a data-file suffix (``.jsonl``, ``.json``, ``.parquet``, ...) are taken for
    missing local files, not Hub ids.

    >>> looks_like_hub_id("M-amir1998/arith-v1"), looks_like_hub_id("data/test.jsonl")
    (True, False)
    """
    if not isinstance(spec, str) or spec.startswith(PREFIX):
        return False
    parts = spec.split("/")
    if len(parts) != 2 or not all(valid_name(p) for p in parts):
        return False
    return not parts[1].lower().endswith(_FILE_SUFFIXES)


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
# Errors


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


def _unavailable(spec: str, endpoint: str, reason: str) -> HubUnavailable:
    return HubUnavailable(
        f"cannot reach the Hugging Face Hub at {endpoint} for {spec} (offline? {reason}) "
        "and it is not in the local Hugging Face cache: download it where the network works "
        "and pass the local folder, or set HF_ENDPOINT"
    )


# --------------------------------------------------------------------------------------------------
# Download


def probe_get(url: str):
    """One GET of Hub metadata with the user's token, a short timeout and no retries.

    ``Unreachable`` (with a one-line reason) when the request never got an answer for lack of a network;
    huggingface_hub's own downloads retry with long timeouts, which is the hang this avoids.
    """
    import huggingface_hub
    from huggingface_hub.utils import get_session

    headers = {"user-agent": f"posttrainlab; hf_hub/{huggingface_hub.__version__}"}
    token = huggingface_hub.get_token()
    if token:
        headers["authorization"] = f"Bearer {token}"
    try:
        return get_session().get(url, headers=headers, timeout=probe_timeout())
    except Exception as e:
        if is_network_error(e):
            raise Unreachable(one_line(e)) from None
        raise


def _probe(repo_id: str, revision: str, endpoint: str) -> dict[str, Any]:
    """One GET of the dataset's metadata, no retries: the repo's ``sha`` and ``siblings``.

    ``BadInput`` for a missing repo or revision; ``Unreachable`` when the Hub did not answer.
    """
    spec = PREFIX + repo_id
    url = f"{endpoint}/api/datasets/{repo_id}/revision/{quote(revision, safe='')}"
    response = probe_get(url)
    status = response.status_code
    code = response.headers.get("X-Error-Code", "")
    if code == "RevisionNotFound":
        raise BadInput(f"{spec}: no revision {revision!r} of this dataset on {endpoint}")
    if status == 404 or code == "RepoNotFound":
        raise BadInput(f"{spec}: no such dataset on {endpoint}")
    if status == 401:
        raise BadInput(f"{spec}: no such dataset on {endpoint} (or it is private: log in or set HF_TOKEN)")
    if status == 403:
        raise BadInput(f"{spec}: access denied by {endpoint} (gated dataset? accept its terms, set HF_TOKEN)")
    if status >= 400:
        raise Unreachable(f"HTTP {status} from {url}")
    try:
        info = response.json()
    except (ValueError, UnicodeDecodeError):
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("sha"), str):
        raise Unreachable(f"{url} did not answer like a Hugging Face Hub")
    return info


def _safe_rel(spec: str, rel: Any) -> str:
    """A manifest path must stay inside the repo: relative, '/'-separated, no '..'."""
    if not isinstance(rel, str) or not rel:
        raise BadInput(f"{spec}: {MANIFEST} lists a bad file name {rel!r}")
    p = PurePosixPath(rel)
    if p.is_absolute() or "\\" in rel or any(part in ("", ".", "..") for part in rel.split("/")):
        raise BadInput(f"{spec}: {MANIFEST} lists a file outside the repo: {rel!r}")
    return rel


def _verify(spec: str, root: Path, manifest: dict[str, Any]) -> None:
    """Re-hash every manifest file under ``root``; ``BadInput`` naming the first that differs."""
    for rel, entry in manifest["files"].items():
        problem = check_file(root, rel, entry)
        if problem is not None:
            raise BadInput(f"{spec}: {rel}: {problem.fault} (local copy {problem.path})")


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


def _map_hub_error(spec: str, endpoint: str, exc: Exception) -> Exception:
    """Turn an error of a ``huggingface_hub`` download call into ``BadInput``/``HubUnavailable``."""
    from huggingface_hub import errors

    if isinstance(exc, errors.RevisionNotFoundError):
        return BadInput(f"{spec}: revision not found on {endpoint}")
    if isinstance(exc, errors.GatedRepoError):
        return BadInput(f"{spec}: access denied by {endpoint} (gated dataset? accept its terms, set HF_TOKEN)")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return BadInput(f"{spec}: no such dataset on {endpoint}")
    if isinstance(exc, errors.LocalEntryNotFoundError) or is_network_error(exc):
        return _unavailable(spec, endpoint, one_line(exc))
    if isinstance(exc, errors.EntryNotFoundError):
        return BadInput(f"{spec}: a file is missing from the repo ({one_line(exc)})")
    if isinstance(exc, errors.FileMetadataError):
        return HubUnavailable(f"{spec}: {endpoint} did not answer like a Hugging Face Hub ({one_line(exc)})")
    if isinstance(exc, errors.HfHubHTTPError):
        return HubUnavailable(f"{spec}: the Hub at {endpoint} failed: {one_line(exc)}")
    return exc


def _fetch_manifest_backed(
    spec: str, repo_id: str, revision: str, endpoint: str, cache: str, siblings: set[str] | None
) -> Path:
    from huggingface_hub import errors, hf_hub_download

    def get(filename: str, rev: str) -> Path:
        return Path(
            hf_hub_download(repo_id, filename, repo_type="dataset", revision=rev, cache_dir=cache, endpoint=endpoint)
        )

    # The manifest by branch name (this records refs/<revision> in the cache, for offline use);
    # every other file by the commit it came from, so a push in between cannot mix two versions.
    manifest_path = get(MANIFEST, revision)
    root = manifest_path.parent
    commit = root.name
    manifest = _load_manifest(spec, manifest_path)
    if siblings is None or README in siblings:
        try:
            get(README, commit)
        except errors.RemoteEntryNotFoundError:
            if siblings is not None:
                raise
    for rel in manifest["files"]:
        if siblings is not None and rel not in siblings:
            raise BadInput(f"{spec}: {MANIFEST} lists {rel}, which the repo on {endpoint} does not have")
        get(rel, commit)
    _verify(spec, root, manifest)
    return root


def _from_cache(spec: str, repo_id: str, revision: str, cache: str, why: str) -> Path | None:
    """The cached copy of the repo at ``revision``, verified; ``None`` when it is not (fully) cached."""
    from huggingface_hub import errors, hf_hub_download, snapshot_download

    def get(filename: str) -> Path:
        return Path(
            hf_hub_download(
                repo_id,
                filename,
                repo_type="dataset",
                revision=revision,
                cache_dir=cache,
                local_files_only=True,
            )
        )

    try:
        manifest_path = get(MANIFEST)
    except errors.EntryNotFoundError:  # not cached, or cached as absent: try a manifest-less snapshot
        try:
            folder = snapshot_download(
                repo_id, repo_type="dataset", revision=revision, cache_dir=cache, local_files_only=True
            )
        except (errors.EntryNotFoundError, OSError, ValueError):
            return None
        root = Path(folder)
        log.warning("%s: %s; using the cached snapshot %s", spec, why, root.name)
        return root
    root = manifest_path.parent
    manifest = _load_manifest(spec, manifest_path)
    for rel in manifest["files"]:
        try:
            get(rel)
        except errors.EntryNotFoundError:
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
        info = _probe(repo_id, rev, endpoint)
    except Unreachable as e:
        cached = _from_cache(spec, repo_id, rev, cache, f"Hub unreachable ({e})")
        if cached is None:
            raise _unavailable(spec, endpoint, str(e)) from None
        return cached

    raw = info.get("siblings")
    siblings = {s.get("rfilename") for s in raw if isinstance(s, dict)} if isinstance(raw, list) else None
    try:
        if siblings is None or MANIFEST in siblings:
            try:
                return _fetch_manifest_backed(spec, repo_id, rev, endpoint, cache, siblings)
            except Exception as e:
                from huggingface_hub import errors

                # Metadata without a file list: a repo without manifest.json is a plain snapshot.
                if siblings is not None or not isinstance(e, errors.RemoteEntryNotFoundError):
                    raise
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, repo_type="dataset", revision=rev, cache_dir=cache, endpoint=endpoint))
    except (BadInput, HubUnavailable):
        raise
    except Exception as e:
        mapped = _map_hub_error(spec, endpoint, e)
        if mapped is e:
            raise
        raise mapped from None
