"""Every number ``posttrain eval prm`` reports, as one pure function of step labels and step scores.

Inputs follow ``eval/step_metrics.py``: ``labels`` one list per solution (1 = correct step, 0 = wrong),
``scores`` the same shape, a PRM's P(correct) per step. The definitions live in ``step_metrics`` (each
with its formula and source); this module only puts them together into the ``metrics.json`` object:

- ``step``: precision / recall / F1 / accuracy of the **wrong** class over all labelled steps, a step
  predicted wrong when ``score < threshold``; ``auroc`` of the scores (rank statistic, ties halved);
  ``mean_score_correct`` / ``mean_score_wrong``;
- ``first_error``: ProcessBench at ``threshold``: the predicted first error is the first step with
  ``score < threshold`` (-1 if none); F1 = harmonic mean of the accuracy on erroneous solutions (exact
  index) and on correct ones (predicted -1);
- ``first_error_sweep``: the same F1 at thresholds 0.05, 0.10, ..., 0.95 and the best (lowest threshold
  on ties). ``tuned_on_evaluated_data`` is always true: the best threshold is chosen on the very rows it
  is scored on, so ``best_f1`` is optimistic; choose a threshold on a held-out split instead;
- ``calibration``: expected calibration error over all steps with ``n_bins`` (10) equal-width bins of
  P(correct) (bin b holds b/10 <= p < (b+1)/10, the last also p = 1):
  ECE = sum_b |B_b|/N * |acc(B_b) - conf(B_b)|, and every bin for the reliability plot;
- ``per_position``: at each 0-based step index, over the solutions that have a step there: the gold
  wrong rate, the predicted wrong rate (at ``threshold``) and the misclassification rate;
- ``case``: a solution is flagged when any step is predicted wrong; P/R/F1 of the flawed class.

Written by hand: the metric definitions are docs/design.md's ("Metric definitions"), with hand-computed tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrainlab.eval.step_metrics import (
    DEFAULT_SWEEP,
    DEFAULT_THRESHOLD,
    first_error_f1_at,
    flatten_steps,
    per_position_rates,
    predict_labels,
    step_auroc,
    step_calibration,
    step_case_confusion,
    step_confusion,
    sweep_first_error_f1,
)

N_BINS = 10


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def prm_metrics(
    labels: Sequence[Sequence[int]],
    scores: Sequence[Sequence[float]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    sweep: Sequence[float] = DEFAULT_SWEEP,
    n_bins: int = N_BINS,
) -> dict[str, Any]:
    """The PRM metrics of step ``scores`` against step ``labels`` (see the module docstring).

    ``ValueError`` when the shapes differ, a label is not 0/1 or a score is outside [0, 1].

    >>> m = prm_metrics([[1, 0], [1, 1]], [[0.9, 0.2], [0.8, 0.4]], threshold=0.5, sweep=[0.3, 0.5])
    >>> m["step"]["precision"], m["step"]["recall"], m["step"]["auroc"]
    (0.5, 1.0, 1.0)
    >>> m["first_error"]["f1"], m["first_error_sweep"]["best_threshold"], m["first_error_sweep"]["best_f1"]
    (0.0, 0.3, 1.0)
    """
    flat_labels, flat_scores = flatten_steps(labels, scores)
    predicted = predict_labels(scores, threshold)
    fe = first_error_f1_at(labels, scores, threshold)
    sw = sweep_first_error_f1(labels, scores, sweep)
    cal = step_calibration(labels, scores, n_bins)
    step = step_confusion(labels, predicted).as_dict()
    step["auroc"] = step_auroc(labels, scores)
    step["mean_score_correct"] = _mean([s for lab, s in zip(flat_labels, flat_scores, strict=True) if lab == 1])
    step["mean_score_wrong"] = _mean([s for lab, s in zip(flat_labels, flat_scores, strict=True) if lab == 0])
    return {
        "solutions": len(labels),
        "steps": len(flat_labels),
        "wrong_steps": flat_labels.count(0),
        "threshold": threshold,
        "step": step,
        "first_error": {
            "threshold": threshold,
            "accuracy_erroneous": fe.accuracy_erroneous,
            "accuracy_correct": fe.accuracy_correct,
            "f1": fe.f1,
            "n_erroneous": fe.n_erroneous,
            "n_correct": fe.n_correct,
        },
        "first_error_sweep": {
            "thresholds": list(sw.thresholds),
            "f1": list(sw.f1),
            "best_threshold": sw.best_threshold,
            "best_f1": sw.best_f1,
            "tuned_on_evaluated_data": True,
        },
        "calibration": {
            "ece": cal.ece,
            "n_bins": n_bins,
            "bins": [
                {
                    "lower": b.lower,
                    "upper": b.upper,
                    "count": b.count,
                    "mean_confidence": b.mean_confidence,
                    "accuracy": b.accuracy,
                }
                for b in cal.bins
            ],
        },
        "per_position": [
            {
                "position": r.position,
                "n_steps": r.n_steps,
                "gold_wrong_rate": r.gold_wrong_rate,
                "predicted_wrong_rate": r.predicted_wrong_rate,
                "misclassification_rate": r.misclassification_rate,
            }
            for r in per_position_rates(labels, predicted)
        ],
        "case": step_case_confusion(labels, predicted).as_dict(),
    }


__all__ = ["N_BINS", "prm_metrics"]
