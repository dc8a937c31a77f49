"""Load a split of a manifest-backed dataset from a local folder or a Hub path, checksums checked.

A data path is one of:

- ``DIR`` with ``split=`` (and optionally ``config=``): a folder holding ``manifest.json``, such as
  an arith-v1 build; ``DIR:SPLIT`` says the same in one string;
- ``DIR/CONFIG/SPLIT.jsonl``: one file of such a folder (its manifest is found and used);
- ``hf://owner/name[/CONFIG][:SPLIT]`` or a plain ``owner/name`` Hub id: downloaded with
  huggingface_hub, then treated as a local folder (offline it fails at once, see ``hub``);
- any other ``.jsonl`` file: read as it is (no manifest, nothing to verify).

This is the one resolver of data paths: the verbs that read rows of any format (``posttrain
generate``, ``eval prm``, ``label mc``) ask :func:`row_source` where their rows are, the verbs that read
one split ask :func:`split_file`, and :func:`dataset_folder` names the dataset a path belongs to.

Every read of a manifest-backed file re-hashes it first and refuses a mismatch (``BadInput``
naming the file, expected and found hash), as the arith-v1 card requires of every loader.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.data import hub
from posttrainlab.data.jsonl import iter_jsonl
from posttrainlab.data.manifest import MANIFEST, has_manifest, load_manifest, verify_file
from posttrainlab.errors import BadInput, PosttrainError


@dataclass(frozen=True)
class DataRef:
    """A parsed data path: a local path or Hub repo id, and the config/split named in it."""

    location: str
    config: str | None = None
    split: str | None = None
    on_hub: bool = False
    plain_id: bool = False  # an ``owner/name`` that is no local path, tried on the Hub


def parse_data_path(spec: str) -> DataRef:
    """Split a data path into location, config and split.

    >>> parse_data_path("hf://M-amir1998/arith-v1/eval:test")
    DataRef(location='M-amir1998/arith-v1', config='eval', split='test', on_hub=True, plain_id=False)
    >>> parse_data_path("./data/arith-v1:test")
    DataRef(location='./data/arith-v1:test', config=None, split=None, on_hub=False, plain_id=False)
    """
    ref = hub.parse_hub_spec(spec)
    if ref is not None:
        return DataRef(ref.repo_id, ref.config, ref.split, on_hub=True)
    path = Path(spec)
    if not path.exists() and ":" in spec:
        head, _, split = spec.rpartition(":")
        if Path(head).exists() and split and "/" not in split:
            return DataRef(head, None, split)
    if not path.exists() and hub.looks_like_hub_id(spec):
        return DataRef(spec, None, None, on_hub=True, plain_id=True)
    return DataRef(spec)


def resolve(ref: DataRef) -> Path:
    """The local folder or file of a data path, downloading it from the Hub when needed."""
    if ref.on_hub and ref.plain_id:
        try:
            return hub.download_dataset(ref.location)
        except PosttrainError as e:
            raise BadInput(f"{ref.location}: no such local path, and not loadable as a Hub id ({e})") from None
    if ref.on_hub:
        return hub.download_dataset(ref.location)
    path = Path(ref.location)
    if not path.exists():
        raise BadInput(f"{path}: no such file or folder")
    return path


def manifest_root(path: Path) -> Path | None:
    """The dataset folder ``path`` is or lies in: itself when a folder with ``manifest.json``, else the
    nearest of its two parents that has one; ``None`` outside any dataset."""
    candidates = [path] if path.is_dir() else []
    for folder in [*candidates, *list(path.resolve().parents)[:2]]:
        if has_manifest(folder):
            return folder
    return None


def _listed(root: Path, file: Path) -> bool:
    """Whether the manifest of ``root`` lists ``file``."""
    return file.resolve().relative_to(root.resolve()).as_posix() in load_manifest(root)["files"]


def find_split(root: Path, split: str, config: str | None = None) -> str:
    """The manifest path (``config/split.jsonl``) of ``split`` in the dataset at ``root``."""
    manifest = load_manifest(root)
    files = list(manifest["files"])
    configs = sorted({rel.split("/", 1)[0] for rel in files if "/" in rel})
    if config is not None and config not in configs:
        raise BadInput(f"{root}: unknown config {config!r}; choose one of {', '.join(configs)}")
    matches = [
        rel for rel in files if Path(rel).stem == split and (config is None or Path(rel).parent.as_posix() == config)
    ]
    if not matches:
        known = ", ".join(Path(rel).stem for rel in files)
        where = f"config {config!r} of {root}" if config else str(root)
        raise BadInput(f"{where}: unknown split {split!r}; choose one of {known}")
    return matches[0]


def split_file(
    spec: str, split: str | None = None, config: str | None = None, *, default_split: str | None = None
) -> Path:
    """Resolve a data path to one verified file (see the module docstring for the forms).

    The split of a dataset is ``split``, else the one the path names (``DIR:SPLIT``), else
    ``default_split``; a path to a file ignores all three.
    """
    ref = parse_data_path(str(spec))
    split = split or ref.split or default_split
    config = config or ref.config
    path = resolve(ref)
    if path.is_dir():
        if not has_manifest(path):
            raise BadInput(f"{path}: folder has no {MANIFEST}; pass a .jsonl file or a dataset folder")
        if split is None:
            raise BadInput(f"{path}: name a split (DIR:SPLIT or --split)")
        rel = find_split(path, split, config)
        return verify_file(path, rel)
    root = manifest_root(path)
    if root is not None and _listed(root, path):
        verify_file(root, path.resolve().relative_to(root.resolve()).as_posix())
    return path


@dataclass(frozen=True)
class RowSource:
    """Where the rows of a data path are read from (:func:`row_source`).

    ``path``: what to give ``data.formats.readers.iter_rows`` (a verified split file, any other row
    file, or an ``hf://`` path); ``root``: the dataset folder whose manifest lists that file (its
    checksum was checked), else ``None``; ``split``: the file's split when ``root`` is set.
    """

    path: str
    root: Path | None = None
    split: str | None = None


def row_source(
    spec: str, split: str | None = None, config: str | None = None, *, default_split: str | None = None
) -> RowSource:
    """Where to read the rows of ``spec``, for the verbs that take rows of any format.

    - ``hf://owner/name[/CONFIG]:SPLIT``: read as it is (``iter_rows`` fetches and checks the repo);
    - a dataset folder (``DIR``, ``DIR:SPLIT``) or a plain ``owner/name`` Hub id: its verified split
      file (:func:`split_file`: ``split``, else the one the path names, else ``default_split``;
      ``config`` picks the config);
    - a file: the file, verified first when a dataset's manifest lists it.

    ``BadInput`` for a path that does not exist, a folder without ``manifest.json``, a missing split.
    """
    text = str(spec)
    if text.startswith(hub.PREFIX):
        return RowSource(text)
    file = split_file(text, split, config, default_split=default_split)
    root = manifest_root(file)
    if root is None or not _listed(root, file):
        return RowSource(str(file))
    return RowSource(str(file), root, file.stem)


def dataset_folder(spec: str) -> str | None:
    """The dataset a data path belongs to: the folder holding its ``manifest.json`` (the path itself or
    up to two levels up) or, for a Hub path, the dataset's Hub id (``owner/name`` as given, else
    ``hf://owner/name``); ``None`` for a file outside any dataset."""
    ref = parse_data_path(str(spec))
    if ref.on_hub:
        return ref.location if ref.plain_id else hub.PREFIX + ref.location
    root = manifest_root(resolve(ref))
    return None if root is None else str(root)


def iter_split(spec: str, split: str | None = None, config: str | None = None) -> Iterator[dict[str, Any]]:
    """Stream the records of a verified split."""
    yield from iter_jsonl(split_file(spec, split, config))


def load_split(
    spec: str, split: str | None = None, config: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """The records of a verified split; ``limit`` keeps the first N (nested subsets, as the card's 1k/2k/3k)."""
    records = []
    for record in iter_split(spec, split, config):
        if limit is not None and len(records) >= limit:
            break
        records.append(record)
    return records
