"""JSON Lines: one UTF-8 record a line, keys in insertion order, read as a stream.

``dumps`` fixes the byte form (``json.dumps`` defaults, ``ensure_ascii=False``) so a rebuild is
byte-identical; ``iter_jsonl`` reads one line at a time (bounded memory on files of 100k+ rows) and
turns a bad line into a ``BadInput`` that names the file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from posttrainlab.data.atomic import atomic_path
from posttrainlab.errors import BadInput


def dumps(record: dict[str, Any]) -> str:
    """The canonical one-line form of a record.

    >>> dumps({"id": "a-0", "answer": 3, "text": "é"})
    '{"id": "a-0", "answer": 3, "text": "é"}'
    """
    return json.dumps(record, ensure_ascii=False)


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
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                yield loads_record(path, lineno, line)


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
