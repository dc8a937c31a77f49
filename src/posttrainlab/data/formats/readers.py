"""Stream rows from local ``.jsonl`` / ``.json`` / ``.parquet`` files and ``hf://`` paths.

Corpora of a few hundred thousand rows (Polaris MC has 126,987) must not be loaded whole to be
checked or converted, so every reader here is a generator: JSON Lines one line at a time, Parquet one
record batch at a time (``pyarrow``), a Hub dataset through ``datasets`` in streaming mode. A JSON
*array* (``.json``) is the one exception: the standard library can only parse it whole.

``hf://owner/name[/CONFIG][:SPLIT]`` goes through ``posttrainlab.data.hub``: the repo is fetched (or
found in the cache) and checked, then read from the local folder, so reading never needs the network
once the repo is there. A manifest-backed repo (arith-v1 layout) is read as
``CONFIG/SPLIT.jsonl``; any other repo through ``datasets.load_dataset(folder, CONFIG, split=SPLIT,
streaming=True)``, which understands the card's ``configs:`` header (``SHARP-Math/train-*``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from posttrainlab.data.jsonl import decode_line, iter_jsonl
from posttrainlab.errors import BadInput, one_line
from posttrainlab.run_layout import MANIFEST

SUFFIXES = (".jsonl", ".json", ".parquet")
BATCH_ROWS = 1024


def iter_rows(source: str | os.PathLike, *, batch_rows: int = BATCH_ROWS) -> Iterator[dict[str, Any]]:
    """Yield the rows of a local file or an ``hf://`` path, one dict at a time.

    Faults are ``BadInput`` naming the file: no such file, an unknown suffix, a bad line, a Parquet file
    that cannot be read. ``HubUnavailable`` when an ``hf://`` path cannot be reached.
    """
    if str(source).startswith("hf://"):
        yield from _iter_hub(str(source))
        return
    path = Path(source)
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from iter_jsonl(path)
    elif suffix == ".json":
        yield from _iter_json(path)
    elif suffix == ".parquet":
        yield from _iter_parquet(path, batch_rows)
    else:
        raise BadInput(f"{path}: unknown file type {suffix or '(none)'!r}; expected .jsonl, .json, .parquet or hf://")


def _iter_json(path: Path) -> Iterator[dict[str, Any]]:
    """A ``.json`` file: JSON Lines (as ``datasets`` reads it), an array of objects, or ``{"key": [rows]}``.

    A first line that is a whole JSON object means JSON Lines; anything else is parsed as one document.
    """
    with open(path, "rb") as f:
        first = decode_line(path, 1, f.readline()).strip()
    if first.startswith("{"):
        try:
            one = json.loads(first)
        except json.JSONDecodeError:
            one = None
        if isinstance(one, dict):
            yield from iter_jsonl(path)
            return
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not valid UTF-8 (byte 0x{e.object[e.start]:02x}); save the file as UTF-8") from None
    rows = data if isinstance(data, list) else _single_list_of_rows(data) if isinstance(data, dict) else None
    if rows is None:
        raise BadInput(f"{path}: expected JSON Lines, an array of objects or one key holding one")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BadInput(f"{path}: item {index} is {type(row).__name__}, expected an object")
        yield row


def _single_list_of_rows(data: dict[str, Any]) -> list[Any] | None:
    """``data[key]`` when ``data`` has exactly one key and it holds a list of objects."""
    if len(data) == 1:
        (value,) = data.values()
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
    return None


def _iter_parquet(path: Path, batch_rows: int) -> Iterator[dict[str, Any]]:
    """Rows of a Parquet file, one record batch in memory at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise BadInput(f"{path}: not a readable Parquet file ({one_line(e)})") from None
    try:
        for batch in parquet.iter_batches(batch_size=batch_rows):
            yield from batch.to_pylist()
    except (pa.ArrowException, OSError) as e:
        raise BadInput(f"{path}: Parquet read failed ({one_line(e)})") from None


def _iter_hub(spec: str) -> Iterator[dict[str, Any]]:
    """Rows of one split of a Hub dataset (see the module docstring)."""
    from posttrainlab.data import hub

    ref = hub.parse_hub_spec(spec)
    if ref is None:
        raise BadInput(f"{spec}: not a Hub path (expected hf://owner/name[/CONFIG][:SPLIT])")
    if ref.split is None:
        raise BadInput(f"{spec}: name a split, e.g. {spec}:train")
    folder = Path(hub.download_dataset(ref.repo_id))
    if (folder / MANIFEST).is_file():
        rel = f"{ref.config}/{ref.split}.jsonl" if ref.config else f"{ref.split}.jsonl"
        if not (folder / rel).is_file():
            raise BadInput(f"{spec}: the dataset has no file {rel}")
        yield from iter_jsonl(folder / rel)
        return
    yield from _iter_datasets(spec, folder, ref.config, ref.split)


def _iter_datasets(spec: str, folder: Path, config: str | None, split: str) -> Iterator[dict[str, Any]]:
    """A split of a local dataset folder through ``datasets`` (streaming: bounded memory)."""
    import datasets

    try:
        ds = datasets.load_dataset(str(folder), config, split=split, streaming=True)
        rows = iter(ds)
    except (ValueError, FileNotFoundError, KeyError) as e:
        raise BadInput(f"{spec}: cannot read config {config!r} split {split!r} ({one_line(e)})") from None
    yield from rows
