"""Binary confusion counts, the one place precision, recall, F1 and accuracy are computed.

For a positive class chosen by the caller (a wrong step, a gold-wrong character, a flawed solution):

    precision = tp / (tp + fp)      recall = tp / (tp + fn)
    F1 = 2 tp / (2 tp + fp + fn)    (= 2 P R / (P + R) whenever P + R > 0)
    accuracy = (tp + tn) / (tp + fp + fn + tn)

Zero division: a ratio whose denominator is 0 is 0.0 (scikit-learn's ``zero_division=0``). So a set with
no gold positive has recall 0.0 and one with no predicted positive has precision 0.0; with neither, F1 is
0.0 too, although nothing was missed. Report the counts beside the ratios when that case can occur.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def safe_div(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, or 0.0 when the denominator is 0.

    >>> safe_div(1, 4), safe_div(0, 0)
    (0.25, 0.0)
    """
    return numerator / denominator if denominator else 0.0


@dataclass(frozen=True)
class Confusion:
    """Counts of one binary decision: true/false positives, false/true negatives.

    >>> c = Confusion(tp=2, fp=1, fn=2, tn=5)
    >>> round(c.precision, 4), c.recall, round(c.f1, 4), c.accuracy
    (0.6667, 0.5, 0.5714, 0.7)
    >>> (c + Confusion(tp=1)).tp
    3
    """

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def __add__(self, other: Confusion) -> Confusion:
        return Confusion(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn)

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float:
        return safe_div(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return safe_div(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        return safe_div(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    @property
    def accuracy(self) -> float:
        return safe_div(self.tp + self.tn, self.total)

    def as_dict(self) -> dict[str, float]:
        """Ratios and counts, ready for a metrics JSON file."""
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "accuracy": self.accuracy,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
        }


def confusion(gold: Sequence[bool], predicted: Sequence[bool]) -> Confusion:
    """Count a binary decision over paired items; ``True`` marks the positive class on both sides.

    >>> confusion([True, True, False, False], [True, False, True, False])
    Confusion(tp=1, fp=1, fn=1, tn=1)
    """
    if len(gold) != len(predicted):
        raise ValueError(f"gold has {len(gold)} items but predicted has {len(predicted)}")
    tp = fp = fn = tn = 0
    for g, p in zip(gold, predicted, strict=True):
        if g and p:
            tp += 1
        elif p:
            fp += 1
        elif g:
            fn += 1
        else:
            tn += 1
    return Confusion(tp, fp, fn, tn)
