"""Per-solution statistics shared by the step, span, Math-Shepherd and ProcessBench formats.

One accumulator, fed one solution at a time, so stats over a few hundred thousand rows run in bounded
memory: first-error positions are kept as a histogram, not a list. Positions are 0-based step indices.
Stats refuse a bad row (``RowError``) rather than skip it: a number computed over silently dropped
rows would be wrong without saying so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrainlab.data.formats.schema import RowError


def ratio(num: float, den: float) -> float | None:
    """``num / den``, or ``None`` when ``den`` is 0 (an empty file has no shares).

    >>> ratio(1, 4), ratio(0, 0)
    (0.25, None)
    """
    return num / den if den else None


def histogram_median(hist: Counter) -> float | None:
    """Median of the values counted in ``hist`` (mean of the two middle ones for an even count).

    >>> histogram_median(Counter({0: 1, 2: 1, 5: 2}))
    3.5
    >>> histogram_median(Counter()) is None
    True
    """
    n = sum(hist.values())
    if n == 0:
        return None
    wanted = [(n - 1) // 2, n // 2]
    found: list[int] = []
    seen = 0
    for value in sorted(hist):
        seen += hist[value]
        while wanted and wanted[0] < seen:
            found.append(value)
            wanted.pop(0)
    return sum(found) / 2


@dataclass
class SolutionStats:
    """Accumulates rows, steps per solution, error share and first-error position.

    With ``labelled=True`` it also counts sound and faulty steps over *all* steps (``add_labels``),
    which is what the Math-Shepherd-614 card reports (1,794 correct and 1,395 incorrect steps).

    >>> acc = SolutionStats(labelled=True)
    >>> acc.add_labels([True, False, True]); acc.add_labels([True])
    >>> d = acc.as_dict()
    >>> d["rows"], d["steps"], d["with_error"], d["steps_incorrect"], d["first_error_mean"]
    (2, 4, 1, 1, 1.0)
    """

    labelled: bool = False
    rows: int = 0
    steps: int = 0
    steps_min: int | None = None
    steps_max: int | None = None
    with_error: int = 0
    steps_incorrect: int = 0
    first_errors: Counter = field(default_factory=Counter)

    def check(self, index: int, reason: str | None) -> None:
        """Raise ``RowError`` for a bad row (``reason`` from a ``check_*_row`` function)."""
        if reason is not None:
            raise RowError(index, reason)

    def add(self, num_steps: int, first_error: int | None) -> None:
        """Count one solution of ``num_steps`` steps whose first error is at ``first_error`` (or none)."""
        self.rows += 1
        self.steps += num_steps
        self.steps_min = num_steps if self.steps_min is None else min(self.steps_min, num_steps)
        self.steps_max = num_steps if self.steps_max is None else max(self.steps_max, num_steps)
        if first_error is not None:
            self.with_error += 1
            self.first_errors[first_error] += 1

    def add_labels(self, labels: Sequence[int | bool]) -> None:
        """Count one solution from its per-step labels (truthy = sound)."""
        bad = [i for i, label in enumerate(labels) if not label]
        self.steps_incorrect += len(bad)
        self.add(len(labels), bad[0] if bad else None)

    def as_dict(self) -> dict[str, Any]:
        """The statistics as one flat JSON-ready object."""
        n_first = sum(self.first_errors.values())
        out: dict[str, Any] = {
            "rows": self.rows,
            "steps": self.steps,
            "steps_mean": ratio(self.steps, self.rows),
            "steps_min": self.steps_min,
            "steps_max": self.steps_max,
        }
        if self.labelled:
            out["steps_correct"] = self.steps - self.steps_incorrect
            out["steps_incorrect"] = self.steps_incorrect
        out |= {
            "with_error": self.with_error,
            "without_error": self.rows - self.with_error,
            "error_share": ratio(self.with_error, self.rows),
            "first_error_mean": ratio(sum(k * v for k, v in self.first_errors.items()), n_first),
            "first_error_median": histogram_median(self.first_errors),
        }
        return out
