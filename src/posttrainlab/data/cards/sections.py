"""The tables of the seeds' cards, recounted from the rows: step labels, first errors, spans, MC values, columns.

Each function reads rows (``data.formats.readers.iter_rows``) and returns numbers or a Markdown section;
none trusts a writer's summary. Written by hand: the tables are the seeds' (SHARP: rows, steps and
first-error positions per view; Math-Shepherd-614: correctly and incorrectly labelled steps, examples
with and without an error; Polaris MC: the value distribution and the columns).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from posttrainlab.data.cards.render import fmt_int, table
from posttrainlab.data.formats.hal import parse_hal

NO_HALLUCINATIONS = "No hallucinations"


def rows_of(path: str | os.PathLike) -> Iterable[dict[str, Any]]:
    from posttrainlab.data.formats.readers import iter_rows

    return iter_rows(path)


def json_object(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object in a side file (``manifest.json``, ``summary.json``…); ``{}`` when it is missing, unreadable or
    not an object (a kind's ``is_<kind>`` then says no)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def step_counts(rows: Iterable[dict[str, Any]], labels_key: str = "step_labels", steps_key: str = "steps") -> dict:
    """Rows, steps, steps labelled correct / wrong, rows with / without a wrong step, first-error histogram.

    Labels are 1/0 (step view) or true/false (Math-Shepherd); the first error is the 0-based index of
    the first wrong step.

    >>> c = step_counts([{"steps": ["a", "b"], "step_labels": [1, 0]}, {"steps": ["a"], "step_labels": [1]}])
    >>> c["steps_correct"], c["steps_wrong"], c["with_error"], c["first_error"]
    (2, 1, 1, {1: 1})
    """
    n = steps = right = wrong = with_error = 0
    first: Counter[int] = Counter()
    for row in rows:
        labels = [int(x) for x in row[labels_key]]
        n += 1
        steps += len(row[steps_key])
        right += sum(1 for x in labels if x == 1)
        wrong += sum(1 for x in labels if x == 0)
        if 0 in labels:
            with_error += 1
            first[labels.index(0)] += 1
    return {
        "rows": n,
        "steps": steps,
        "steps_correct": right,
        "steps_wrong": wrong,
        "with_error": with_error,
        "without_error": n - with_error,
        "first_error": dict(sorted(first.items())),
    }


def step_table(counts: dict[str, dict]) -> str:
    """One row per split: rows, steps, steps labelled 1 and 0, rows with and without an error."""
    rows = [
        [
            name,
            fmt_int(c["rows"]),
            fmt_int(c["steps"]),
            fmt_int(c["steps_correct"]),
            fmt_int(c["steps_wrong"]),
            fmt_int(c["with_error"]),
            fmt_int(c["without_error"]),
        ]
        for name, c in counts.items()
    ]
    head = ["split", "rows", "steps", "steps correct", "steps wrong", "rows with an error", "rows without"]
    return table(head, rows, right=range(1, 7))


def first_error_table(counts: dict[str, dict]) -> str:
    """The first-error histogram: one column per split, one row per position of the first wrong step."""
    positions = sorted({p for c in counts.values() for p in c["first_error"]})
    rows = [[f"step {p}", *(fmt_int(c["first_error"].get(p, 0)) for c in counts.values())] for p in positions]
    rows.append(["no error", *(fmt_int(c["without_error"]) for c in counts.values())])
    return table(["first wrong step (0-based)", *counts], rows, right=range(1, len(counts) + 1))


def span_counts(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Span view: rows, pieces, ``<HAL>`` spans, rows with a span, rows holding the literal ``No hallucinations``.

    >>> span_counts([{"model_answer": ["a b"], "hallucination_annotation": ["a <HAL>b</HAL>"]}])["spans"]
    1
    """
    n = pieces = spans = tagged = literal = 0
    for row in rows:
        n += 1
        pieces += len(row["model_answer"])
        annotation = row["hallucination_annotation"]
        if annotation == [NO_HALLUCINATIONS]:
            literal += 1
            continue
        found = len(parse_hal("\n\n".join(annotation))[1])
        spans += found
        tagged += found > 0
    return {"rows": n, "pieces": pieces, "spans": spans, "rows_with_spans": tagged, "no_hallucinations": literal}


def value_table(stats: dict[str, dict[str, Any]]) -> str:
    """The Polaris MC card's value distribution, one column per split (``data.formats.mc_value.mc_stats``)."""
    from posttrainlab.data.formats.mc_value import STATS_BUCKETS

    def cell(key: str, value: Any) -> str:
        if value is None:
            return "-"
        if key == "rows":
            return fmt_int(value)
        return f"{value:.3f}" if key == "mean_v" else f"{100 * value:.1f}%"

    rows = [[label, *(cell(key, s.get(key)) for s in stats.values())] for key, label in STATS_BUCKETS]
    return table(["bucket", *stats], rows, right=range(1, len(stats) + 1))


def columns_table(columns: Iterable[str], meanings: dict[str, tuple[str, str]]) -> str:
    """The columns table: ``column | type | meaning`` for each column (its meaning when known)."""
    rows = [[f"`{c}`", *meanings.get(c, ("-", "-"))] for c in columns]
    return table(["column", "type", "meaning"], rows)


def counter_table(head: tuple[str, str], counts: dict[str, int]) -> str:
    """A two-column table of counts (status -> rows…)."""
    return table(list(head), [[f"`{k}`", fmt_int(v)] for k, v in counts.items()], right=[1])


__all__ = [
    "columns_table",
    "counter_table",
    "first_error_table",
    "json_object",
    "rows_of",
    "span_counts",
    "step_counts",
    "step_table",
    "value_table",
]
