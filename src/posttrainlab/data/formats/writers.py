"""Write a stream of rows to ``.jsonl`` or ``.parquet``, atomically and in bounded memory.

docs/design.md "Reliability conventions": an output is written to a temporary file beside the target and
renamed into place only when every row was written, so a conversion that stops at a bad row leaves
the earlier good output (or nothing) in place. Rows are consumed as they come: JSON Lines line by
line, Parquet one record batch at a time with the schema of the first batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import Any

from posttrainlab.data.atomic import atomic_path
from posttrainlab.data.jsonl import write_jsonl
from posttrainlab.errors import BadInput

SUFFIXES = (".jsonl", ".parquet")
BATCH_ROWS = 1024


def write_rows(path: str | os.PathLike, rows: Iterable[dict[str, Any]], *, batch_rows: int = BATCH_ROWS) -> int:
    """Write ``rows`` to ``path`` (by suffix) atomically; return how many were written."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return write_jsonl(path, rows)
    if suffix == ".parquet":
        return _write_parquet(path, rows, batch_rows)
    raise BadInput(f"{path}: cannot write {suffix or 'a file without suffix'!r}; use .jsonl or .parquet")


def _write_parquet(path: Path, rows: Iterable[dict[str, Any]], batch_rows: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    it = iter(rows)
    n = 0
    with atomic_path(path) as tmp:
        writer = None
        try:
            while batch := list(islice(it, batch_rows)):
                try:
                    table = pa.Table.from_pylist(batch, schema=writer.schema if writer else None)
                except (pa.ArrowException, TypeError) as e:
                    raise BadInput(
                        f"{path}: rows {n}..{n + len(batch) - 1} do not fit one Parquet schema ({e})"
                    ) from None
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
                n += len(batch)
            if writer is None:
                pq.write_table(pa.table({}), tmp)
        finally:
            if writer is not None:
                writer.close()
    return n
