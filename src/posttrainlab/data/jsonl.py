"""JSON Lines: one UTF-8 record a line, keys in insertion order, read as a stream.

``dumps`` fixes the byte form (``json.dumps`` defaults, ``ensure_ascii=False``) so a rebuild is
byte-identical; ``iter_jsonl`` reads one line at a time (bounded memory on files of 100k+ rows) and
turns a bad line into a ``BadInput`` that names the file and the line: bytes that are not UTF-8 too (they were a
``UnicodeDecodeError`` traceback in ``data validate``, ``data stats``, ``eval compare``, ``train prm``; issue #42).

Every JSON the lab writes is strict JSON (RFC 8259: no ``NaN``, ``Infinity``), which ``json.dumps`` does not ensure:
``strict_json`` writes a NaN or an infinity as ``null`` (a value that was not measured), and ``dumps`` does the same
for a record. A run summary used to hold ``"train_loss": Infinity``, which other JSON readers refuse.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from posttrainlab.data.atomic import atomic_path
from posttrainlab.errors import BadInput


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by ``None`` (in dicts, lists and tuples, recursively).

    >>> finite_or_null({"loss": float("nan"), "steps": [1.5, float("inf")], "n": 3})
    {'loss': None, 'steps': [1.5, None], 'n': 3}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` as strict JSON: a NaN or infinite float is written ``null`` (module docstring).

    >>> strict_json({"train_loss": float("inf"), "global_step": 3})
    '{"train_loss": null, "global_step": 3}'
    """
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:  # a non-finite float: the slow path only where one is (no walk over every record)
        return json.dumps(finite_or_null(obj), allow_nan=False, **kwargs)


def write_json(path: str | os.PathLike, obj: Any, **kwargs: Any) -> None:
    """Write ``obj`` as strict JSON (indent 2, a final newline) to ``path`` atomically (``atomic.write_text``)."""
    from posttrainlab.data.atomic import write_text

    write_text(path, strict_json(obj, indent=2, **kwargs) + "\n")


def dumps(record: dict[str, Any]) -> str:
    """The canonical one-line form of a record (strict JSON: NaN and infinities as ``null``).

    >>> dumps({"id": "a-0", "answer": 3, "text": "é"})
    '{"id": "a-0", "answer": 3, "text": "é"}'
    """
    return strict_json(record, ensure_ascii=False)


def loads_record(path: str | os.PathLike, lineno: int, line: str | bytes, hint: str = "") -> dict[str, Any]:
    """One JSON Lines record; a line that is not a JSON object raises ``BadInput`` naming file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno}){hint}") from None
    if not isinstance(record, dict):
        raise BadInput(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}{hint}")
    return record


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSON Lines file; a bad line raises ``BadInput`` naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            line = decode_line(path, lineno, raw)
            if line.strip():
                yield loads_record(path, lineno, line)


def decode_line(path: str | os.PathLike, lineno: int, raw: bytes) -> str:
    """One line of a file as UTF-8 text; bytes that are not UTF-8 raise ``BadInput`` naming file, line and column.

    >>> decode_line("rows.jsonl", 7, b'{"a": "caf\\xe9"}')
    Traceback (most recent call last):
    ...
    posttrainlab.errors.BadInput: rows.jsonl:7: not valid UTF-8 (byte 0xe9 at column 11); save the file as UTF-8
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        byte = raw[e.start : e.start + 1].hex()
        raise BadInput(f"{path}:{lineno}: not valid UTF-8 (byte 0x{byte} at column {e.start + 1}); save the file as "
                       "UTF-8") from None  # fmt: skip


def json_object_or_empty(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON file's object; ``{}`` when it is absent, unreadable or not an object (for optional records an earlier
    run may have left: the report's numbers, a run folder's ``run.json``)."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of a JSON Lines file (see ``iter_jsonl``)."""
    return list(iter_jsonl(path))


def write_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> int:
    """Write records atomically (temporary file, then rename); return how many were written."""
    n = 0
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for record in records:
                f.write(dumps(record))
                f.write("\n")
                n += 1
            f.flush()
            os.fsync(f.fileno())
    return n


def append_jsonl(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one record and flush it to disk (resumable runs write one line per finished record)."""
    with open(path, "a", encoding="utf-8", newline="\n") as f:
        f.write(dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
