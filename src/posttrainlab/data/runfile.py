"""Resumable run files: one JSON line per finished record, read back on restart to skip what is done.

docs/design.md "Reliability conventions": every run that calls a model (``posttrain eval judge``,
``posttrain annotate``, ``posttrain generate``, ``posttrain label mc``) appends one flushed line per
finished record (:func:`posttrainlab.data.jsonl.append_jsonl`) and, when started again, skips the
finished records. This module is the one reader of such files.

Written by hand because the rules are the project's, not a library's: a last line without its newline
is the trace of a killed write, so it is dropped (its record runs again) and, when told to ``repair``,
the file is rewritten without it; a bad line anywhere else is not ours to fix (``BadInput``). A
record must point at the row it was made for (its ``index`` and the row's ``key`` hash) and come from
the same model, or it is refused rather than scored against the wrong row.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from posttrainlab.data.atomic import atomic_path
from posttrainlab.data.jsonl import append_jsonl, dumps, loads_record
from posttrainlab.errors import BadInput

#: what a bad line's message tells the user to do
RESUME_HINT = "; fix or remove the line to resume"


def read_run_file(
    path: str | Path, *, repair: bool = True, hint: str = RESUME_HINT
) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a run file (``[]`` when it does not exist), and notes on what was dropped.

    A last line without its newline is dropped; with ``repair`` the file is rewritten (atomically)
    without it, so the next append starts on a line of its own. Blank lines are skipped. Any other
    line that is not a JSON object raises ``BadInput`` naming the file and the line, ending in ``hint``.
    """
    path = Path(path)
    if not path.exists():
        return [], []
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()
    records = []
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            records.append(loads_record(path, lineno, line, hint=hint))
    notes = []
    if tail.strip():
        if repair:
            with atomic_path(path) as tmp:
                tmp.write_bytes(data[: len(data) - len(tail)])
        notes.append(f"{path}: dropped an unfinished last line ({len(tail)} bytes) left by an interrupted run")
    return records, notes


def has_row_index(rec: dict[str, Any]) -> bool:
    """Whether a run-file record carries a usable row index (an int >= 0).

    >>> has_row_index({"index": 0}), has_row_index({"index": -1}), has_row_index({"index": "0"})
    (True, False, False)
    """
    index = rec.get("index")
    return isinstance(index, int) and index >= 0


def finished_records(
    path: str | Path,
    rows: list[dict[str, Any]],
    *,
    check: Callable[[dict[str, Any]], str | None],
    key_of: Callable[[dict[str, Any]], str],
    model_name: str,
    is_failed: Callable[[dict[str, Any]], bool],
    retry_failed: bool,
    mismatch: str,
    hint: str,
    again: str,
) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Finished records of a resumable run file by row index, checked against ``rows``.

    Used by ``posttrain eval judge`` and ``posttrain annotate``. Each record must pass ``check`` (its
    own fields; a record without a usable row index must fail it, see :func:`has_row_index`), point at
    an existing row whose ``key_of`` matches the record's ``key`` and come from ``model_name``; anything
    else is ``BadInput`` (``mismatch`` names a row that does not match, ``hint`` says what to do).
    Repeated indices keep the first record. With ``retry_failed`` the records ``is_failed`` picks are
    removed from the file and from the result (``again``: "judged", "annotated"), so they run again.
    """
    path = Path(path)
    records, notes = read_run_file(path)
    done: dict[int, dict[str, Any]] = {}
    duplicates = 0
    for n, rec in enumerate(records, start=1):
        index = rec.get("index")
        fault = check(rec)
        if fault is None and not has_row_index(rec):
            fault = "no row index"
        if fault is None and index >= len(rows):
            fault = f"row index {index} but the data has {len(rows)} rows"
        if fault is None and rec.get("key") != key_of(rows[index]):
            fault = f"row {index} does not match {mismatch}"
        if fault is None and rec.get("model") != model_name:
            fault = f"made by model {rec.get('model')!r}, not {model_name!r}"
        if fault is not None:
            raise BadInput(f"{path}: record {n}: {fault}; {hint}")
        if index in done:
            duplicates += 1
            continue
        done[index] = rec
    if duplicates:
        notes.append(f"{path}: {duplicates} duplicate records ignored (the first of each index is kept)")
    failed = [i for i, r in done.items() if is_failed(r)]
    if retry_failed and failed:
        kept = [r for _, r in sorted(done.items()) if not is_failed(r)]
        with atomic_path(path) as tmp:
            tmp.write_text("".join(dumps(r) + "\n" for r in kept), encoding="utf-8")
        for i in failed:
            del done[i]
        notes.append(f"{path}: {len(failed)} failed rows will be {again} again")
    return done, notes


__all__ = ["RESUME_HINT", "append_jsonl", "finished_records", "has_row_index", "read_run_file"]
