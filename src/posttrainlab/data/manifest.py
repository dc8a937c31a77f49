"""``manifest.json``: the SHA-256 and record count of every file of a dataset folder.

Every load of a manifest-backed dataset re-hashes the file it reads and refuses one whose hash
differs (docs/design.md "Reliability conventions"); ``posttrain data verify DIR`` checks them all, record counts
too. A manifest is read only with every path inside its folder: an absolute path or one with ``..`` is refused
(``load_manifest``), so a manifest cannot make the lab hash, read or card a file outside the dataset (issue #42).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.run_layout import MANIFEST  # the name's one place; data modules import it from here


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def count_records(path: str | os.PathLike) -> int:
    """Number of non-empty lines of a JSON Lines file."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def file_entry(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest entry of one file: ``{"sha256": ..., "records": N}``."""
    return {"sha256": sha256_file(path), "records": count_records(path)}


def manifest_text(manifest: dict[str, Any]) -> str:
    """The canonical byte form of a manifest (indent 2, keys in insertion order, final newline)."""
    from posttrainlab.data.jsonl import strict_json

    return strict_json(manifest, indent=2, ensure_ascii=False) + "\n"


def has_manifest(root: str | os.PathLike) -> bool:
    return (Path(root) / MANIFEST).is_file()


def load_manifest(root: str | os.PathLike) -> dict[str, Any]:
    """Read ``root/manifest.json``; ``BadInput`` when it is missing or not a manifest."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise BadInput(f"{path}: no manifest.json in {root}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise BadInput(f"{path}: not a manifest (no 'files' mapping)")
    outside = [rel for rel in manifest["files"] if not inside(rel)]
    if outside:
        raise BadInput(f"{path}: file {outside[0]!r} is outside {root} (an absolute path or one with '..'); refused")
    return manifest


def inside(rel: str) -> bool:
    """Whether a manifest's path stays inside its folder: relative, no ``..``, not empty.

    >>> inside("eval/test.jsonl"), inside("../../etc/hostname"), inside("/etc/hostname"), inside("a/../../b")
    (True, False, False, False)
    """
    from pathlib import PurePosixPath, PureWindowsPath

    if not isinstance(rel, str) or not rel.strip() or PureWindowsPath(rel).drive:
        return False
    path = PurePosixPath(rel.replace("\\", "/"))
    return not path.is_absolute() and ".." not in path.parts


@dataclass(frozen=True)
class FileProblem:
    """One way a file disagrees with its manifest."""

    path: Path
    fault: str

    def __str__(self) -> str:
        return f"{self.path}: {self.fault}"


def check_file(root: str | os.PathLike, rel: str, entry: dict[str, Any], records: bool = False) -> FileProblem | None:
    """Compare one file with its manifest entry; ``None`` when its hash matches (and with ``records``, its count of
    records: ``data verify`` reads each file once more for it, a load does not)."""
    path = Path(root) / rel
    if not path.is_file():
        return FileProblem(path, "listed in manifest.json but missing")
    found = sha256_file(path)
    if found != entry.get("sha256"):
        return FileProblem(path, f"checksum mismatch: expected sha256 {entry.get('sha256')}, found {found}")
    if records and "records" in entry and (counted := count_records(path)) != entry["records"]:
        return FileProblem(path, f"record count mismatch: {MANIFEST} says {entry['records']}, the file holds {counted}")
    return None


def verify_file(root: str | os.PathLike, rel: str, manifest: dict[str, Any] | None = None) -> Path:
    """Re-hash ``root/rel`` against the manifest and return its path; ``BadInput`` on any fault."""
    manifest = manifest if manifest is not None else load_manifest(root)
    entry = manifest["files"].get(rel)
    if entry is None:
        raise BadInput(f"{Path(root) / rel}: not listed in {Path(root) / MANIFEST}")
    problem = check_file(root, rel, entry)
    if problem is not None:
        raise BadInput(str(problem))
    return Path(root) / rel


def verify_dir(root: str | os.PathLike) -> list[FileProblem]:
    """Every file listed in ``root/manifest.json`` that is missing or differs in hash or record count (empty when all
    match)."""
    manifest = load_manifest(root)
    problems = []
    for rel, entry in manifest["files"].items():
        problem = check_file(root, rel, entry, records=True)
        if problem is not None:
            problems.append(problem)
    return problems
