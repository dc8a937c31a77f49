"""One solution score from its step scores (best-of-N's PRM selectors, beam search, the within-problem metrics).

Apart from ``eval.best_of_n`` (which re-exports both names) so that the metric modules can use it without
importing the best-of-N run. Written by hand: four one-line rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

AGGREGATIONS = ("min", "last", "product", "mean")


def aggregate(scores: Sequence[float], how: str) -> float:
    """One solution score from its step scores; 0.0 for a solution without steps.

    >>> [aggregate([0.9, 0.5, 0.8], h) for h in AGGREGATIONS]
    [0.5, 0.8, 0.36000000000000004, 0.7333333333333334]
    >>> aggregate([], "min")
    0.0
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {how!r}; choose one of {', '.join(AGGREGATIONS)}")
    if not scores:
        return 0.0
    if how == "min":
        return min(scores)
    if how == "last":
        return scores[-1]
    if how == "product":
        return math.prod(scores)
    return sum(scores) / len(scores)


__all__ = ["AGGREGATIONS", "aggregate"]
