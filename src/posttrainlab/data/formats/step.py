"""The step view: ``question, steps, step_labels`` with the SHARP invariant, and ``StepRow``.

SHARP-GSM8K and SHARP-Math (seed 000, "Step view") cut every solution after its first faulty step, so
a row has *either no 0 at all, or exactly one 0 as its last label*; a PRM trained on it only sees
prefixes that are sound up to their last step. Every other format converts *to* this view by cutting
at the first error (``cut_at_first_error``), which is the one lossy step in this package: the steps
after the first error, and their labels, are gone.

``StepRow`` is the one in-memory row every step-level reader returns: each format's ``*_steps``
function (``registry.FORMATS[name].to_steps``) reads a row of that format into one, and PRM training
(``prm.examples``) and PRM evaluation (``runners.prm_eval``) read nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from posttrainlab.data.formats.schema import (
    Row,
    check_labelled_steps,
    first_reason,
    is_int,
    validate_rows,
)
from posttrainlab.data.formats.stats import SolutionStats

KEYS = ("question", "steps", "step_labels")


@dataclass(frozen=True)
class StepRow:
    """One solution as a PRM reads it: the question, its steps, one label per step, and its ``<HAL>`` spans.

    ``labels[i]`` is 1 for a sound step and 0 for a faulty one (ints, as every ``*_steps`` reader
    returns them); a PRM training item holds float targets here instead (an MC value V in [0, 1], or
    ``prm.losses.IGNORE`` where a step has no target), and ``targets`` is the trainer's name for
    the same list. ``spans`` (span view only): per step, the ``<HAL>`` character spans as offsets into
    that step's own text. ``id``: the input row's ``id`` when it has one (``eval prm`` writes it back).
    """

    question: str
    steps: list[str]
    labels: list[float]
    spans: list[list[tuple[int, int]]] | None = None
    id: str | int | None = None

    @property
    def targets(self) -> list[float]:
        """``labels``, read as the PRM trainer's per-step targets."""
        return self.labels

    def cut_at_first_error(self) -> StepRow:
        """The row up to and including its first error (``cut_at_first_error``), spans cut alike.

        >>> StepRow("q", ["a", "b", "c"], [1, 0, 1], [[], [(0, 1)], []]).cut_at_first_error()
        StepRow(question='q', steps=['a', 'b'], labels=[1, 0], spans=[[], [(0, 1)]], id=None)
        """
        steps, labels = cut_at_first_error(self.steps, self.labels)
        spans = None if self.spans is None else self.spans[: len(steps)]
        return replace(self, steps=steps, labels=labels, spans=spans)


def first_error(labels: Sequence[int | bool]) -> int | None:
    """Index of the first falsy label (0 or ``False``), or ``None`` when there is none.

    >>> first_error([1, 1, 0]), first_error([True, False, True]), first_error([1, 1])
    (2, 1, None)
    """
    for i, label in enumerate(labels):
        if not label:
            return i
    return None


def cut_at_first_error(steps: Sequence[str], labels: Sequence[int | bool]) -> tuple[list[str], list[int]]:
    """Steps and 0/1 labels up to and including the first error (SHARP conversion, rule 3).

    This is lossy: the steps after the first error, and whatever their labels said, are dropped.

    >>> cut_at_first_error(["a", "b", "c", "d"], [True, False, True, False])
    (['a', 'b'], [1, 0])
    >>> cut_at_first_error(["a", "b"], [1, 1])
    (['a', 'b'], [1, 1])
    """
    if len(steps) != len(labels):
        raise ValueError(f"{len(steps)} steps but {len(labels)} labels")
    k = first_error(labels)
    end = len(steps) if k is None else k + 1
    return list(steps[:end]), [1 if label else 0 for label in labels[:end]]


def check_step_labels(labels: Sequence[int]) -> str | None:
    """The reason a list of 0/1 labels breaks "no 0, or exactly one 0 as the last label", or ``None``.

    >>> check_step_labels([1, 0, 1])
    'step_labels has a 0 at step 1 that is not the last step (3 steps)'
    >>> check_step_labels([1, 1, 0]) is None
    True
    """
    k = first_error(labels)
    if k is not None and k != len(labels) - 1:
        return f"step_labels has a 0 at step {k} that is not the last step ({len(labels)} steps)"
    return None


def check_step_row(row: Row) -> str | None:
    """The first fault of a step-view row, or ``None``.

    >>> check_step_row({"question": "q", "steps": ["a", "b"], "step_labels": [1]})
    '2 steps but 1 step_labels'
    """
    return first_reason(
        lambda: check_labelled_steps(row, KEYS, *KEYS, lambda v: is_int(v) and v in (0, 1), "0 or 1"),
        lambda: check_step_labels(row["step_labels"]),
    )


def validate_step(rows: Iterable[Row]) -> Iterator[tuple[int, str]]:
    """``(row_index, reason)`` for every bad step-view row."""
    return validate_rows(rows, check_step_row)


def step_steps(row: Row) -> StepRow:
    """A step-view row as a ``StepRow`` (already cut after its first error); ``ValueError`` for a bad row.

    >>> step_steps({"question": "q", "steps": ["a", "b"], "step_labels": [1, 0]}).labels
    [1, 0]
    """
    reason = check_step_row(row)
    if reason is not None:
        raise ValueError(reason)
    return StepRow(row["question"], list(row["steps"]), list(row["step_labels"]))


def step_stats(rows: Iterable[Row]) -> dict[str, Any]:
    """Rows, steps per solution, share with an error, position of the first error (0-based)."""
    acc = SolutionStats()
    for index, row in enumerate(rows):
        acc.check(index, check_step_row(row))
        acc.add(len(row["steps"]), first_error(row["step_labels"]))
    return acc.as_dict()
