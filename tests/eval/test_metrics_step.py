"""Step-level metrics against numbers worked out by hand (labels: 1 correct, 0 wrong)."""

from __future__ import annotations

import random

import pytest

from posttrainlab.eval.counts import Confusion, confusion, safe_div
from posttrainlab.eval.step_metrics import (
    auroc,
    calibration,
    first_error_f1,
    first_error_f1_at,
    first_error_from_labels,
    flatten_steps,
    per_position_rates,
    predict_labels,
    step_auroc,
    step_calibration,
    step_case_confusion,
    step_confusion,
    sweep_first_error_f1,
)
from posttrainlab.eval.step_metrics import predicted_first_error as first_error_index

# Five solutions shared by several tests. Gold first errors: A 1, B 0, C 2, D -1, E -1.
LABELS = [[1, 0, 0], [0, 0], [1, 1, 0], [1, 1], [1, 1, 1]]
SCORES = [[0.9, 0.4, 0.1], [0.6, 0.3], [0.7, 0.2, 0.1], [0.8, 0.9], [0.9, 0.45, 0.8]]


def test_counts_ratios_and_zero_division():
    """tp=3 fp=1 fn=2 tn=4: P = 3/4, R = 3/5, F1 = 6/(6+1+2) = 2/3, accuracy = 7/10.

    Zero denominators give 0.0: no predicted positive -> P = 0; no gold positive -> R = 0; neither -> F1 = 0.
    """
    c = Confusion(tp=3, fp=1, fn=2, tn=4)
    assert (c.precision, c.recall, c.accuracy) == (0.75, 0.6, 0.7)
    assert c.f1 == pytest.approx(2 / 3)
    assert c.f1 == pytest.approx(2 * c.precision * c.recall / (c.precision + c.recall))
    empty = Confusion(tn=5)
    assert (empty.precision, empty.recall, empty.f1, empty.accuracy) == (0.0, 0.0, 0.0, 1.0)
    assert Confusion().accuracy == 0.0
    only_fp = Confusion(fp=2)
    assert (only_fp.precision, only_fp.recall, only_fp.f1) == (0.0, 0.0, 0.0)
    assert safe_div(3, 0) == 0.0
    assert c.as_dict()["f1"] == c.f1
    with pytest.raises(ValueError):
        confusion([True], [True, False])


def test_step_confusion_counts_the_wrong_class():
    """3 solutions, 8 steps, threshold 0.5 (predicted wrong when score < 0.5).

    labels    [1 1 0] [1 0] [1 1 1]
    scores    [.9 .3 .2] [.8 .6] [.7 .9 .4]
    predicted [1 0 0] [1 1] [1 1 0]
    gold wrong: (0,2) (1,1) = 2; predicted wrong: (0,1) (0,2) (2,2) = 3.
    tp = (0,2) = 1; fp = (0,1) (2,2) = 2; fn = (1,1) = 1; tn = 8 - 4 = 4.
    P = 1/3, R = 1/2, F1 = 2*1 / (2*1 + 2 + 1) = 0.4.
    """
    labels = [[1, 1, 0], [1, 0], [1, 1, 1]]
    scores = [[0.9, 0.3, 0.2], [0.8, 0.6], [0.7, 0.9, 0.4]]
    predicted = predict_labels(scores, 0.5)
    assert predicted == [[1, 0, 0], [1, 1], [1, 1, 0]]
    c = step_confusion(labels, predicted)
    assert c == Confusion(tp=1, fp=2, fn=1, tn=4)
    assert c.precision == pytest.approx(1 / 3)
    assert c.recall == 0.5
    assert c.f1 == pytest.approx(0.4)


def test_step_confusion_all_correct_and_nothing_flagged():
    """No gold wrong step and no predicted wrong step: tn = 3, P = R = F1 = 0.0 (by convention), acc 1."""
    c = step_confusion([[1, 1], [1]], [[1, 1], [1]])
    assert c == Confusion(tn=3)
    assert (c.precision, c.recall, c.f1, c.accuracy) == (0.0, 0.0, 0.0, 1.0)


def test_shape_and_label_errors():
    with pytest.raises(ValueError, match="solution 1"):
        flatten_steps([[1], [1, 0]], [[0.5], [0.5]])
    with pytest.raises(ValueError):
        flatten_steps([[1]], [[0.5], [0.5]])
    with pytest.raises(ValueError, match="1 \\(correct\\) or 0"):
        step_confusion([[1, 2]], [[1, 1]])
    with pytest.raises(ValueError):
        auroc([1, 0], [0.5])


def test_auroc_with_ties_by_hand():
    """labels [1 1 0 0 1], scores [.8 .5 .5 .2 .5]. Correct steps score .8 .5 .5; wrong steps .5 .2.

    Pairwise (correct, wrong): (.8,.5)=1 (.8,.2)=1 (.5,.5)=.5 (.5,.2)=1 (.5,.5)=.5 (.5,.2)=1 -> 5 of 6.
    Ranks: .2 -> 1; the three .5 share (2+3+4)/3 = 3; .8 -> 5. R_1 = 5 + 3 + 3 = 11,
    U = 11 - 3*4/2 = 5, AUROC = 5 / (3*2) = 5/6.
    """
    assert auroc([1, 1, 0, 0, 1], [0.8, 0.5, 0.5, 0.2, 0.5]) == pytest.approx(5 / 6)


def test_auroc_extremes_and_undefined():
    """Perfect separation 1, reversed 0, all scores tied 0.5, one class only: undefined (None)."""
    assert auroc([1, 1, 0], [0.9, 0.8, 0.1]) == 1.0
    assert auroc([1, 1, 0], [0.1, 0.2, 0.9]) == 0.0
    assert auroc([1, 0, 1, 0], [0.3] * 4) == 0.5
    assert auroc([0, 0], [0.1, 0.2]) is None
    assert auroc([], []) is None


def _pairwise_auroc(labels: list[int], scores: list[float]) -> float:
    pos = [s for label, s in zip(labels, scores, strict=True) if label == 1]
    neg = [s for label, s in zip(labels, scores, strict=True) if label == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(20))
def test_auroc_matches_brute_force_pairwise_count(seed):
    """Rank formula == the O(n_1 n_0) pairwise count, on random data with many ties (one decimal)."""
    rng = random.Random(seed)
    n = rng.randint(2, 60)
    labels = [rng.randint(0, 1) for _ in range(n)]
    labels[0], labels[1] = 0, 1
    scores = [round(rng.random(), 1) for _ in range(n)]
    assert auroc(labels, scores) == pytest.approx(_pairwise_auroc(labels, scores))


def test_step_auroc_flattens_solutions():
    """[[1,0],[1,0]] with [[.9,.1],[.4,.4]]: pairs (.9,.1) (.9,.4) (.4,.1) win, (.4,.4) ties -> 3.5/4."""
    assert step_auroc([[1, 0], [1, 0]], [[0.9, 0.1], [0.4, 0.4]]) == 0.875


def test_first_error_indices():
    """Gold: first label 0. Predicted: first score strictly below the threshold."""
    assert [first_error_from_labels(ls) for ls in LABELS] == [1, 0, 2, -1, -1]
    assert first_error_index([0.9, 0.5, 0.2], 0.5) == 2  # 0.5 is not below 0.5
    assert first_error_index([], 0.5) == -1


def test_first_error_f1_at_threshold_by_hand():
    """Threshold 0.5 on the five solutions of LABELS / SCORES:

    A [.9 .4 .1] -> 1, gold 1 (right)    B [.6 .3] -> 1, gold 0 (wrong)    C [.7 .2 .1] -> 1, gold 2 (wrong)
    D [.8 .9] -> -1, gold -1 (right)      E [.9 .45 .8] -> 1, gold -1 (wrong)
    accuracy on erroneous = 1/3, on correct = 1/2, F1 = 2 (1/3)(1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 0.4.
    """
    r = first_error_f1_at(LABELS, SCORES, 0.5)
    assert r.accuracy_erroneous == pytest.approx(1 / 3)
    assert r.accuracy_correct == 0.5
    assert r.f1 == pytest.approx(0.4)
    assert (r.n_erroneous, r.n_correct) == (3, 2)


def test_threshold_sweep_by_hand():
    """t = 0.35: A -> 2 (x), B -> 1 (x), C -> 1 (x), D -> -1 (ok), E -> -1 (ok): a_err 0, a_cor 1, F1 0.
    t = 0.5: F1 0.4 (previous test).
    t = 0.65: A -> 1 (ok), B -> 0 (ok), C -> 1 (x), D -> -1 (ok), E -> 1 (x):
        a_err 2/3, a_cor 1/2, F1 = 2 (2/3)(1/2) / (2/3 + 1/2) = (2/3) / (7/6) = 4/7.
    Best: 0.65 with 4/7. Thresholds come back sorted.
    """
    s = sweep_first_error_f1(LABELS, SCORES, [0.65, 0.35, 0.5])
    assert s.thresholds == (0.35, 0.5, 0.65)
    assert s.f1 == pytest.approx((0.0, 0.4, 4 / 7))
    assert s.best_threshold == 0.65
    assert s.best_f1 == pytest.approx(4 / 7)


def test_sweep_ties_go_to_the_lowest_threshold_and_default_grid():
    """One erroneous solution [1 0] scored [.9 .2] and one correct [1 1] scored [.9 .9]: every threshold in
    (0.2, 0.9] gives F1 1.0; the best is the lowest of them on the 0.05 grid, 0.25."""
    s = sweep_first_error_f1([[1, 0], [1, 1]], [[0.9, 0.2], [0.9, 0.9]])
    assert len(s.thresholds) == 19
    assert s.best_f1 == 1.0
    assert s.best_threshold == 0.25


def test_first_error_f1_empty_subsets():
    """No correct solution: its accuracy and the F1 are undefined (None); both accuracies 0 -> F1 0.0."""
    r = first_error_f1([0, 1], [0, 1])
    assert (r.accuracy_erroneous, r.accuracy_correct, r.f1) == (1.0, None, None)
    r = first_error_f1([0, -1], [1, 0])
    assert (r.accuracy_erroneous, r.accuracy_correct, r.f1) == (0.0, 0.0, 0.0)
    r = first_error_f1([], [])
    assert r.f1 is None
    with pytest.raises(ValueError):
        first_error_f1([0], [])


def test_ece_by_hand():
    """5 bins of width 0.2; probabilities (P(correct)) and outcomes:

    bin [0, .2):  .1 .15 -> outcomes 0 0: conf .125, acc 0   -> |0 - .125| * 2 = .25
    bin [.4, .6): .5 .55 -> outcomes 1 0: conf .525, acc .5  -> |.5 - .525| * 2 = .05
    bin [.8, 1]:  .9 1.0 -> outcomes 1 1: conf .95, acc 1    -> |1 - .95| * 2  = .10
    ECE = (.25 + .05 + .10) / 6 = 1/15.
    """
    c = calibration([0, 0, 1, 0, 1, 1], [0.1, 0.15, 0.5, 0.55, 0.9, 1.0], n_bins=5)
    assert c.ece == pytest.approx(1 / 15)
    assert [b.count for b in c.bins] == [2, 0, 2, 0, 2]
    assert [(b.lower, b.upper) for b in c.bins][:2] == [(0.0, 0.2), (0.2, 0.4)]
    assert c.bins[1].mean_confidence is None and c.bins[1].accuracy is None
    xs, ys = zip(*c.curve, strict=True)
    assert xs == pytest.approx((0.125, 0.525, 0.95))
    assert ys == (0.0, 0.5, 1.0)


def test_ece_bin_edges_and_edge_cases():
    """Edges: b/n <= p < (b+1)/n, so 0.2 opens bin 1, 0.6 bin 3, and 1.0 falls in the last bin.
    Perfectly calibrated bins give 0; no input gives None; p outside [0, 1] is an error."""
    c = calibration([1, 1, 1, 1, 1], [0.0, 0.2, 0.6, 0.8, 1.0], n_bins=5)
    assert [b.count for b in c.bins] == [1, 1, 0, 1, 2]
    perfect = calibration([1, 0, 1, 1], [0.5, 0.5, 1.0, 1.0], n_bins=2)
    assert perfect.ece == 0.0
    assert calibration([], []).ece is None
    assert calibration([], []).curve == []
    with pytest.raises(ValueError, match="outside"):
        calibration([1], [1.5])
    with pytest.raises(ValueError):
        calibration([1], [0.5], n_bins=0)
    assert step_calibration([[1, 0], [1]], [[0.5, 0.5], [1.0]], n_bins=2).ece == 0.0


def test_per_position_rates_by_hand():
    """labels [1 0 0] [1 1] [0], predicted [1 1 0] [1 0] [0]:

    position 0: 3 steps, gold wrong 1 (sol 3) -> 1/3; predicted wrong 1 -> 1/3; mismatches 0 -> 0
    position 1: 2 steps, gold wrong 1 -> 1/2; predicted wrong 1 -> 1/2; mismatches 2 (both) -> 1
    position 2: 1 step,  gold wrong 1 -> 1;   predicted wrong 1 -> 1;   mismatches 0 -> 0
    """
    rates = per_position_rates([[1, 0, 0], [1, 1], [0]], [[1, 1, 0], [1, 0], [0]])
    assert [r.n_steps for r in rates] == [3, 2, 1]
    assert [r.gold_wrong_rate for r in rates] == pytest.approx([1 / 3, 0.5, 1.0])
    assert [r.predicted_wrong_rate for r in rates] == pytest.approx([1 / 3, 0.5, 1.0])
    assert [r.misclassification_rate for r in rates] == [0.0, 1.0, 0.0]
    gold_only = per_position_rates([[1, 0]])
    assert gold_only[1].predicted_wrong_rate is None and gold_only[1].gold_wrong_rate == 1.0
    assert per_position_rates([]) == []


def test_step_case_confusion_by_hand():
    """Flawed = any 0 label; flagged = any 0 prediction. Rows: (flawed, flagged) = (T,T) (T,F) (F,T) (F,F)."""
    c = step_case_confusion([[1, 0], [0], [1, 1], [1]], [[0, 1], [1], [1, 0], [1]])
    assert c == Confusion(tp=1, fp=1, fn=1, tn=1)
    assert (c.precision, c.recall, c.f1, c.accuracy) == (0.5, 0.5, 0.5, 0.5)
