"""Step-level metrics for PRMs and step judges (docs/design.md "Metric definitions").

Conventions (the step view of docs/design.md "Data contracts"):

- ``labels``: one list per solution, one label per step, **1 = correct, 0 = wrong**.
- ``scores``: the same shape, a score per step where **higher means more likely correct** (a PRM's
  reward, P(correct)). A step is *predicted wrong* when ``score < threshold``.
- The **positive class is the wrong step** (label 0) for precision, recall and F1: the detector's job is
  to find the wrong steps, and in correct-heavy data the correct class would flatter every detector.

Sources: ProcessBench (Zheng et al. 2024, arXiv:2412.06559, section 3) for the first-error F1; Guo et al.
2017 ("On Calibration of Modern Neural Networks", eq. 3) and Naeini et al. 2015 for the expected
calibration error; Mann and Whitney 1947 / Hanley and McNeil 1982 for AUROC as a rank statistic.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from posttrainlab.data.formats.step import first_error
from posttrainlab.eval.counts import Confusion, confusion, safe_div

DEFAULT_THRESHOLD = 0.5
# 0.05, 0.10, ..., 0.95: a grid as coarse as reported PRM thresholds; pass the scores' own values for an
# exhaustive sweep.
DEFAULT_SWEEP = tuple(i / 20 for i in range(1, 20))


def _check_labels(labels: Sequence[int]) -> None:
    for label in labels:
        if label not in (0, 1):
            raise ValueError(f"step labels must be 1 (correct) or 0 (wrong), got {label!r}")


def flatten_steps(labels: Sequence[Sequence[int]], values: Sequence[Sequence[float]]) -> tuple[list[int], list[float]]:
    """Flatten per-solution step labels and per-step values into two aligned lists.

    Raises ``ValueError`` when a solution's label and value lists differ in length.

    >>> flatten_steps([[1, 0], [1]], [[0.9, 0.2], [0.7]])
    ([1, 0, 1], [0.9, 0.2, 0.7])
    """
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} label lists but {len(values)} score lists")
    flat_labels: list[int] = []
    flat_values: list[float] = []
    for i, (ls, vs) in enumerate(zip(labels, values, strict=True)):
        if len(ls) != len(vs):
            raise ValueError(f"solution {i}: {len(ls)} step labels but {len(vs)} step scores")
        _check_labels(ls)
        flat_labels.extend(int(label) for label in ls)
        flat_values.extend(vs)
    return flat_labels, flat_values


def predict_labels(scores: Sequence[Sequence[float]], threshold: float = DEFAULT_THRESHOLD) -> list[list[int]]:
    """Turn step scores into predicted labels: 0 (wrong) when ``score < threshold``, else 1.

    >>> predict_labels([[0.9, 0.4], [0.5]], threshold=0.5)
    [[1, 0], [1]]
    """
    return [[0 if s < threshold else 1 for s in solution] for solution in scores]


def step_confusion(labels: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]]) -> Confusion:
    """Confusion counts of the **wrong** class over all labelled steps (micro: every step counts once).

    ``predicted`` uses the label convention (1 correct, 0 wrong); get it from scores with
    :func:`predict_labels`. precision = wrong steps caught / steps predicted wrong; recall = wrong steps
    caught / wrong steps.

    >>> c = step_confusion([[1, 1, 0], [1, 0]], [[1, 0, 0], [1, 1]])
    >>> c, c.precision, c.recall
    (Confusion(tp=1, fp=1, fn=1, tn=2), 0.5, 0.5)
    """
    gold, pred = flatten_steps(labels, predicted)
    _check_labels(pred)
    return confusion([g == 0 for g in gold], [p == 0 for p in pred])


def auroc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve of ``scores`` for separating correct (1) from wrong (0) steps.

    AUROC = P(score of a random correct step > score of a random wrong step) + 0.5 P(tie), computed from
    ranks (Mann-Whitney U): rank all scores ascending, tied scores share the mean of their ranks, and

        AUROC = (R_1 - n_1 (n_1 + 1) / 2) / (n_1 n_0)

    with R_1 the rank sum of the n_1 correct steps and n_0 the number of wrong steps. It is the same
    number whichever class is called positive, as long as the wrong class scores low. O(n log n).
    ``None`` when either class is empty (the area is undefined).

    >>> auroc([1, 0, 1, 0], [0.9, 0.1, 0.4, 0.4])
    0.875
    >>> auroc([1, 1], [0.2, 0.3]) is None
    True
    """
    if len(labels) != len(scores):
        raise ValueError(f"{len(labels)} labels but {len(scores)} scores")
    _check_labels(labels)
    n1 = sum(1 for label in labels if label == 1)
    n0 = len(labels) - n1
    if n1 == 0 or n0 == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1  # ranks are 1-based; positions i..j share their mean
        rank_sum += mean_rank * sum(1 for k in order[i : j + 1] if labels[k] == 1)
        i = j + 1
    return (rank_sum - n1 * (n1 + 1) / 2) / (n1 * n0)


def step_auroc(labels: Sequence[Sequence[int]], scores: Sequence[Sequence[float]]) -> float | None:
    """:func:`auroc` over all steps of all solutions.

    >>> step_auroc([[1, 0], [1, 0]], [[0.9, 0.1], [0.4, 0.4]])
    0.875
    """
    return auroc(*flatten_steps(labels, scores))


# ---- ProcessBench first error ---------------------------------------------------------------------


def first_error_from_labels(labels: Sequence[int]) -> int:
    """Gold first-error index of one solution: the first step labelled 0, or -1 when all are correct.

    >>> first_error_from_labels([1, 1, 0, 0]), first_error_from_labels([1, 1])
    (2, -1)
    """
    _check_labels(labels)
    k = first_error(labels)
    return -1 if k is None else k


def predicted_first_error(scores: Sequence[float], threshold: float = DEFAULT_THRESHOLD) -> int:
    """Predicted first-error index of one solution: the first step with ``score < threshold``, else -1.

    >>> predicted_first_error([0.9, 0.6, 0.3, 0.8], 0.5), predicted_first_error([0.9, 0.6], 0.5)
    (2, -1)
    """
    return next((i for i, s in enumerate(scores) if s < threshold), -1)


@dataclass(frozen=True)
class FirstErrorResult:
    """ProcessBench accuracies and their harmonic mean; ``None`` where a subset is empty."""

    accuracy_erroneous: float | None
    accuracy_correct: float | None
    f1: float | None
    n_erroneous: int
    n_correct: int


def first_error_f1(gold: Sequence[int], predicted: Sequence[int]) -> FirstErrorResult:
    """ProcessBench first-error F1 from gold and predicted first-error indices (-1 = no error).

    accuracy_erroneous = share of solutions with gold index >= 0 whose predicted index is exactly it;
    accuracy_correct = share of solutions with gold index -1 predicted -1;
    F1 = 2 a_err a_cor / (a_err + a_cor) (0.0 when both are 0). An empty subset makes its accuracy and
    the F1 ``None``: the harmonic mean needs both (ProcessBench, Zheng et al. 2024, section 3).

    >>> r = first_error_f1([2, 0, -1, -1], [2, 1, -1, 0])
    >>> r.accuracy_erroneous, r.accuracy_correct, r.f1
    (0.5, 0.5, 0.5)
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold indices but {len(predicted)} predicted")
    err = [(g, p) for g, p in zip(gold, predicted, strict=True) if g >= 0]
    cor = [p for g, p in zip(gold, predicted, strict=True) if g < 0]
    acc_err = sum(1 for g, p in err if p == g) / len(err) if err else None
    acc_cor = sum(1 for p in cor if p < 0) / len(cor) if cor else None
    f1 = None if acc_err is None or acc_cor is None else safe_div(2 * acc_err * acc_cor, acc_err + acc_cor)
    return FirstErrorResult(acc_err, acc_cor, f1, len(err), len(cor))


def first_error_f1_at(
    labels: Sequence[Sequence[int]], scores: Sequence[Sequence[float]], threshold: float = DEFAULT_THRESHOLD
) -> FirstErrorResult:
    """:func:`first_error_f1` of step scores at one threshold, gold indices taken from step labels.

    >>> first_error_f1_at([[1, 0], [1, 1]], [[0.9, 0.2], [0.8, 0.7]], 0.5).f1
    1.0
    """
    flatten_steps(labels, scores)  # shape check
    gold = [first_error_from_labels(ls) for ls in labels]
    return first_error_f1(gold, [predicted_first_error(ss, threshold) for ss in scores])


@dataclass(frozen=True)
class ThresholdSweep:
    """First-error F1 per threshold (ascending) and the best: highest F1, the lowest threshold on ties.

    Picking the threshold on the evaluation set itself is optimistic; report it as such, or pick it on a
    held-out split and use :func:`first_error_f1_at` on the test split.
    """

    thresholds: tuple[float, ...]
    f1: tuple[float | None, ...]
    best_threshold: float | None
    best_f1: float | None


def sweep_first_error_f1(
    labels: Sequence[Sequence[int]],
    scores: Sequence[Sequence[float]],
    thresholds: Sequence[float] = DEFAULT_SWEEP,
) -> ThresholdSweep:
    """First-error F1 at every threshold, and the best one.

    >>> s = sweep_first_error_f1([[1, 0], [1, 1]], [[0.9, 0.2], [0.8, 0.4]], [0.1, 0.3, 0.5])
    >>> s.f1, s.best_threshold, s.best_f1   # at 0.5 the correct solution is flagged at step 1
    ((0.0, 1.0, 0.0), 0.3, 1.0)
    """
    ts = tuple(sorted(thresholds))
    f1s = tuple(first_error_f1_at(labels, scores, t).f1 for t in ts)
    best_threshold: float | None = None
    best_f1: float | None = None
    for t, f in zip(ts, f1s, strict=True):
        if f is not None and (best_f1 is None or f > best_f1):
            best_threshold, best_f1 = t, f
    return ThresholdSweep(ts, f1s, best_threshold, best_f1)


# ---- calibration ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReliabilityBin:
    """One equal-width bin: ``lower <= p < upper`` (the last bin also holds p = 1)."""

    lower: float
    upper: float
    count: int
    mean_confidence: float | None  # mean predicted P(correct) in the bin; None when empty
    accuracy: float | None  # share of correct steps in the bin; None when empty


@dataclass(frozen=True)
class Calibration:
    """Expected calibration error and the reliability curve (points of the non-empty bins)."""

    ece: float | None
    bins: tuple[ReliabilityBin, ...]

    @property
    def curve(self) -> list[tuple[float, float]]:
        """(mean confidence, accuracy) of each non-empty bin, for a reliability plot."""
        return [(b.mean_confidence, b.accuracy) for b in self.bins if b.count]  # type: ignore[misc]


def calibration(outcomes: Sequence[int], probs: Sequence[float], n_bins: int = 10) -> Calibration:
    """Expected calibration error of predicted P(correct) against 0/1 outcomes, equal-width bins.

    The interval [0, 1] is cut into ``n_bins`` bins of width 1/n_bins; bin b holds b/n <= p < (b+1)/n and
    the last bin also p = 1. With B_b the steps in bin b and N all steps (Guo et al. 2017, eq. 3):

        ECE = sum_b |B_b| / N * | acc(B_b) - conf(B_b) |

    acc = share of outcomes equal to 1, conf = mean probability. ``ece`` is ``None`` for no input.

    >>> c = calibration([1, 0, 1, 1], [0.75, 0.75, 0.25, 0.25], n_bins=2)
    >>> c.ece, c.curve   # (2 |1 - 0.25| + 2 |0.5 - 0.75|) / 4
    (0.5, [(0.25, 1.0), (0.75, 0.5)])
    """
    if len(outcomes) != len(probs):
        raise ValueError(f"{len(outcomes)} outcomes but {len(probs)} probabilities")
    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, got {n_bins}")
    _check_labels(outcomes)
    edges = [b / n_bins for b in range(n_bins + 1)]
    members: list[list[int]] = [[] for _ in range(n_bins)]
    for i, p in enumerate(probs):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"probability {p!r} at index {i} is outside [0, 1]")
        members[min(bisect_right(edges, p) - 1, n_bins - 1)].append(i)
    bins = []
    gap = 0.0
    for b, idx in enumerate(members):
        conf = sum(probs[i] for i in idx) / len(idx) if idx else None
        acc = sum(outcomes[i] for i in idx) / len(idx) if idx else None
        if idx:
            gap += len(idx) * abs(acc - conf)  # type: ignore[operator]
        bins.append(ReliabilityBin(edges[b], edges[b + 1], len(idx), conf, acc))
    return Calibration(gap / len(probs) if probs else None, tuple(bins))


def step_calibration(
    labels: Sequence[Sequence[int]], probs: Sequence[Sequence[float]], n_bins: int = 10
) -> Calibration:
    """:func:`calibration` over all steps; ``probs`` is each step's predicted P(correct).

    >>> step_calibration([[1, 0], [1, 1]], [[0.75, 0.75], [0.25, 0.25]], n_bins=2).ece
    0.5
    """
    flat_labels, flat_probs = flatten_steps(labels, probs)
    return calibration(flat_labels, flat_probs, n_bins)


# ---- per position and per solution ----------------------------------------------------------------


@dataclass(frozen=True)
class PositionRates:
    """Rates at one step position (0-based) over the solutions that have a step there."""

    position: int
    n_steps: int
    gold_wrong_rate: float  # share of these steps labelled wrong
    predicted_wrong_rate: float | None  # share predicted wrong (None without predictions)
    misclassification_rate: float | None  # share where prediction and label differ


def per_position_rates(
    labels: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]] | None = None
) -> list[PositionRates]:
    """Gold wrong rate, predicted wrong rate and misclassification rate at each step position.

    At position k, over the n_k solutions with more than k steps: gold_wrong_rate = (labels 0 at k) / n_k,
    predicted_wrong_rate = (predictions 0 at k) / n_k, misclassification_rate = (prediction != label at
    k) / n_k. Shows where in a solution errors sit and where a detector fails.

    >>> [(r.position, r.n_steps, r.gold_wrong_rate, r.misclassification_rate)
    ...  for r in per_position_rates([[1, 0], [1, 1, 0]], [[1, 1], [1, 1, 0]])]
    [(0, 2, 0.0, 0.0), (1, 2, 0.5, 0.5), (2, 1, 1.0, 0.0)]
    """
    if predicted is not None:
        flatten_steps(labels, predicted)  # shape and label check
    for ls in labels:
        _check_labels(ls)
    longest = max((len(ls) for ls in labels), default=0)
    rates = []
    for k in range(longest):
        rows = [i for i, ls in enumerate(labels) if len(ls) > k]
        n = len(rows)
        gold_wrong = sum(1 for i in rows if labels[i][k] == 0) / n
        pred_wrong = miss = None
        if predicted is not None:
            pred_wrong = sum(1 for i in rows if predicted[i][k] == 0) / n
            miss = sum(1 for i in rows if predicted[i][k] != labels[i][k]) / n
        rates.append(PositionRates(k, n, gold_wrong, pred_wrong, miss))
    return rates


def step_case_confusion(labels: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]]) -> Confusion:
    """Case level: a solution is flawed when any step is labelled 0, flagged when any is predicted 0.

    The positive class is the flawed solution.

    >>> step_case_confusion([[1, 0], [1, 1], [1, 1]], [[0, 1], [1, 0], [1, 1]])
    Confusion(tp=1, fp=1, fn=0, tn=1)
    """
    flatten_steps(labels, predicted)
    return confusion([0 in ls for ls in labels], [0 in ps for ps in predicted])
