"""ProcessBench rows and PRM800K-style step ratings, and their conversion to the step view.

ProcessBench: ``problem, steps, label`` where ``label`` is the index of the earliest wrong step, -1 when
every step is right (docs/design.md "Data contracts"); extra fields (``id``, ``generator``,
``final_answer_correct``) are allowed and ``final_answer_correct`` must be a bool when present.

PRM800K-style ratings rate each step -1 (wrong), 0 (neutral) or +1 (good). Two encodings are read:
the flat ``problem, steps, ratings`` and PRM800K's own nested record (``question.problem`` and
``label.steps[].completions[chosen_completion]``), which ``flatten_prm800k`` turns into the flat one.
A neutral step is not an error by default (``neutral=1``), so the first error is the first -1; pass
``neutral=0`` to count neutral steps as errors.

Conversions: ProcessBench -> step view keeps the steps up to and including ``label`` (lossy: the later
steps are dropped; ``id``/``generator``/``final_answer_correct`` too); step view -> ProcessBench is
lossless and reads back to the same step row. Ratings -> step view cuts at the first error and maps
ratings to 0/1 (lossy: later steps, and the difference between 0 and +1, are gone).
``processbench_steps`` reads a row as every step that carries a label (ratings: all of them, not cut).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from posttrainlab.data.formats.schema import (
    Row,
    check_labelled_steps,
    check_str,
    check_str_list,
    first_reason,
    is_int,
    missing_keys,
    validate_rows,
)
from posttrainlab.data.formats.stats import SolutionStats
from posttrainlab.data.formats.step import StepRow, check_step_row, cut_at_first_error, first_error

KEYS = ("problem", "steps", "label")
RATING_KEYS = ("problem", "steps", "ratings")


def encoding(row: Row) -> str:
    """Which encoding a row uses: ``processbench``, ``ratings`` or ``prm800k`` (nested).

    >>> encoding({"problem": "p", "steps": [], "label": -1}), encoding({"ratings": []})
    ('processbench', 'ratings')
    """
    if isinstance(row, dict) and isinstance(row.get("label"), dict):
        return "prm800k"
    if isinstance(row, dict) and "ratings" in row and "label" not in row:
        return "ratings"
    return "processbench"


def check_pb_row(row: Row) -> str | None:
    """The first fault of a ProcessBench row, or ``None``.

    >>> check_pb_row({"problem": "p", "steps": ["a", "b"], "label": 2})
    'label 2 is outside -1..1 (2 steps)'
    """
    return first_reason(
        lambda: missing_keys(row, KEYS),
        lambda: check_str(row, "problem"),
        lambda: check_str_list(row, "steps"),
        lambda: None if is_int(row["label"]) else f"label is {row['label']!r}, expected an integer",
        lambda: (
            None
            if -1 <= row["label"] < len(row["steps"])
            else f"label {row['label']} is outside -1..{len(row['steps']) - 1} ({len(row['steps'])} steps)"
        ),
        lambda: (
            None
            if isinstance(row.get("final_answer_correct", False), bool)
            else f"final_answer_correct is {row['final_answer_correct']!r}, expected true or false"
        ),
    )


def check_ratings_row(row: Row) -> str | None:
    """The first fault of a flat ratings row, or ``None``.

    >>> check_ratings_row({"problem": "p", "steps": ["a"], "ratings": [2]})
    'ratings[0] is 2, expected -1, 0 or 1'
    """
    return check_labelled_steps(row, RATING_KEYS, *RATING_KEYS, lambda v: is_int(v) and v in (-1, 0, 1), "-1, 0 or 1")


def flatten_prm800k(record: Row) -> dict[str, Any]:
    """A nested PRM800K record as a flat ``problem, steps, ratings`` row (``ValueError`` if it can't be).

    Each step takes its ``chosen_completion``, else a rated ``human_completion``, else (the step where
    the labeller found the error and stopped) its first completion rated -1.

    >>> ok = {"completions": [{"text": "1+1=2", "rating": 1}], "chosen_completion": 0}
    >>> bad = {"completions": [{"text": "so 3", "rating": -1}], "chosen_completion": None}
    >>> flatten_prm800k({"question": {"problem": "1+1?"}, "label": {"steps": [ok, bad]}})
    {'problem': '1+1?', 'steps': ['1+1=2', 'so 3'], 'ratings': [1, -1]}
    """
    try:
        problem = record["question"]["problem"]
        raw_steps = record["label"]["steps"]
    except (KeyError, TypeError):
        raise ValueError("not a PRM800K record: expected question.problem and label.steps") from None
    if not isinstance(raw_steps, list):
        raise ValueError("label.steps is not a list")
    steps, ratings = [], []
    for k, step in enumerate(raw_steps):
        if not isinstance(step, dict):
            raise ValueError(f"label.steps[{k}] is not an object")
        completions = step.get("completions") or []
        chosen, human = step.get("chosen_completion"), step.get("human_completion")
        if is_int(chosen) and 0 <= chosen < len(completions):
            pick = completions[chosen]
        elif isinstance(human, dict) and human.get("rating") is not None:
            pick = human
        else:
            pick = next((c for c in completions if isinstance(c, dict) and c.get("rating") == -1), None)
            if pick is None:
                raise ValueError(f"label.steps[{k}] has no chosen, rated human or -1 completion")
            if k != len(raw_steps) - 1:
                raise ValueError(f"label.steps[{k}] has no chosen completion but is not the last step")
        if not isinstance(pick, dict):
            raise ValueError(f"label.steps[{k}]: the picked completion is not an object")
        steps.append(pick.get("text"))
        ratings.append(pick.get("rating"))
    flat = {"problem": problem, "steps": steps, "ratings": ratings}
    reason = check_ratings_row(flat)
    if reason is not None:
        raise ValueError(reason)
    return flat


def as_ratings(row: Row) -> dict[str, Any]:
    """A flat or nested ratings row in the flat encoding (``ValueError`` for a bad row)."""
    if encoding(row) == "prm800k":
        return flatten_prm800k(row)
    reason = check_ratings_row(row)
    if reason is not None:
        raise ValueError(reason)
    return {"problem": row["problem"], "steps": list(row["steps"]), "ratings": list(row["ratings"])}


def check_processbench_row(row: Row) -> str | None:
    """The first fault of a row in any of the three encodings, or ``None``."""
    if encoding(row) == "processbench":
        return check_pb_row(row)
    try:
        as_ratings(row)
    except ValueError as e:
        return str(e)
    return None


def validate_processbench(rows: Iterable[Row]) -> Iterator[tuple[int, str]]:
    """``(row_index, reason)`` for every bad row (the encoding is read per row)."""
    return validate_rows(rows, check_processbench_row)


def ratings_to_labels(ratings: Iterable[int], neutral: int = 1) -> list[int]:
    """Ratings -1/0/+1 as 0/1 step labels; a neutral 0 becomes ``neutral``.

    >>> ratings_to_labels([1, 0, -1, 1]), ratings_to_labels([1, 0], neutral=0)
    ([1, 1, 0, 1], [1, 0])
    """
    if neutral not in (0, 1):
        raise ValueError(f"neutral must be 0 or 1, got {neutral!r}")
    return [1 if r == 1 else 0 if r == -1 else neutral for r in ratings]


def pb_to_step(row: Row) -> dict[str, Any]:
    """ProcessBench -> step view: steps up to and including the earliest wrong one (all when -1).

    >>> pb_to_step({"problem": "p", "steps": ["a", "b", "c"], "label": 1})
    {'question': 'p', 'steps': ['a', 'b'], 'step_labels': [1, 0]}
    """
    if encoding(row) != "processbench":
        return ratings_to_step(row)
    reason = check_pb_row(row)
    if reason is not None:
        raise ValueError(reason)
    k, steps = row["label"], list(row["steps"])
    labels = [1] * len(steps) if k == -1 else [1] * k + [0]
    return {"question": row["problem"], "steps": steps[: len(labels)], "step_labels": labels}


def processbench_steps(row: Row) -> StepRow:
    """A row of any of the three encodings as a ``StepRow`` of every step that carries a label.

    ProcessBench: the steps up to and including ``label`` (the later ones carry none), as ``pb_to_step``;
    ratings (flat or PRM800K): every step, -1 -> 0, 0 and +1 -> 1 (``ratings_to_labels``), not cut.

    >>> processbench_steps({"problem": "p", "steps": ["a", "b", "c"], "label": 1})
    StepRow(question='p', steps=['a', 'b'], labels=[1, 0], spans=None, id=None)
    >>> processbench_steps({"problem": "p", "steps": ["a", "b", "c"], "ratings": [1, -1, 0]}).labels
    [1, 0, 1]
    """
    if encoding(row) == "processbench":
        step = pb_to_step(row)
        return StepRow(step["question"], step["steps"], step["step_labels"])
    flat = as_ratings(row)
    return StepRow(flat["problem"], flat["steps"], ratings_to_labels(flat["ratings"]))


def step_to_pb(row: Row) -> dict[str, Any]:
    """Step view -> ProcessBench (lossless: the label is the index of the 0, or -1).

    >>> step_to_pb({"question": "p", "steps": ["a", "b"], "step_labels": [1, 0]})
    {'problem': 'p', 'steps': ['a', 'b'], 'label': 1}
    """
    reason = check_step_row(row)
    if reason is not None:
        raise ValueError(reason)
    k = first_error(row["step_labels"])
    return {"problem": row["question"], "steps": list(row["steps"]), "label": -1 if k is None else k}


def ratings_to_step(row: Row, neutral: int = 1) -> dict[str, Any]:
    """Ratings (flat or nested) -> step view, cut at the first error.

    >>> ratings_to_step({"problem": "p", "steps": ["a", "b", "c", "d"], "ratings": [1, 0, -1, 1]})
    {'question': 'p', 'steps': ['a', 'b', 'c'], 'step_labels': [1, 1, 0]}
    """
    flat = as_ratings(row)
    steps, labels = cut_at_first_error(flat["steps"], ratings_to_labels(flat["ratings"], neutral))
    return {"question": flat["problem"], "steps": steps, "step_labels": labels}


def ratings_to_pb(row: Row, neutral: int = 1) -> dict[str, Any]:
    """Ratings (flat or nested) -> ProcessBench, keeping every step (the label is the first error).

    >>> ratings_to_pb({"problem": "p", "steps": ["a", "b"], "ratings": [0, 1]}, neutral=0)
    {'problem': 'p', 'steps': ['a', 'b'], 'label': 0}
    """
    flat = as_ratings(row)
    k = first_error(ratings_to_labels(flat["ratings"], neutral))
    return {"problem": flat["problem"], "steps": flat["steps"], "label": -1 if k is None else k}


def processbench_stats(rows: Iterable[Row]) -> dict[str, Any]:
    """Rows, steps per solution, share with an error (label != -1), position of the first error."""
    acc = SolutionStats()
    for index, row in enumerate(rows):
        acc.check(index, check_processbench_row(row))
        pb = row if encoding(row) == "processbench" else ratings_to_pb(row)
        acc.add(len(pb["steps"]), None if pb["label"] == -1 else pb["label"])
    return acc.as_dict()
