"""PRM metrics against numbers computed by hand (each test's docstring shows the arithmetic)."""

from __future__ import annotations

import pytest

from posttrainlab.eval.prm_metrics import prm_metrics

# Three solutions, 7 steps, 2 wrong (labels: 1 correct, 0 wrong).
LABELS = [[1, 1, 0], [1, 1], [1, 0]]
SCORES = [[0.95, 0.6, 0.3], [0.85, 0.45], [0.7, 0.05]]


def test_step_precision_recall_f1_auroc():
    """Threshold 0.5: predicted wrong = 0.3, 0.45, 0.05 -> tp 2 (0.3, 0.05), fp 1 (0.45), fn 0, tn 4.

    precision 2/3, recall 1, F1 = 2*2/(2*2+1+0) = 0.8, accuracy 6/7.
    AUROC: correct scores {0.95, 0.6, 0.85, 0.45, 0.7}, wrong {0.3, 0.05}: every correct step scores
    above every wrong one -> 1.0. Mean score correct = 3.55/5 = 0.71, wrong = 0.35/2 = 0.175.
    """
    m = prm_metrics(LABELS, SCORES)
    s = m["step"]
    assert (s["tp"], s["fp"], s["fn"], s["tn"]) == (2, 1, 0, 4)
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == 1.0 and s["f1"] == pytest.approx(0.8)
    assert s["accuracy"] == pytest.approx(6 / 7) and s["auroc"] == 1.0
    assert s["mean_score_correct"] == pytest.approx(0.71) and s["mean_score_wrong"] == pytest.approx(0.175)
    assert (m["solutions"], m["steps"], m["wrong_steps"]) == (3, 7, 2)


def test_auroc_with_a_tie_and_an_inversion():
    """Correct {0.8, 0.4}, wrong {0.4, 0.6}: pairs (c > w): 0.8>0.4, 0.8>0.6 = 2; 0.4 vs 0.4 tie = 0.5;
    0.4 < 0.6 = 0 -> (2 + 0.5) / 4 = 0.625."""
    m = prm_metrics([[1, 0], [1, 0]], [[0.8, 0.4], [0.4, 0.6]])
    assert m["step"]["auroc"] == pytest.approx(0.625)


def test_first_error_f1_at_the_threshold():
    """Gold first errors: 2, -1, 1. At 0.5 predicted: 2 (0.3), 1 (0.45), 1 (0.05).
    Erroneous: 2 of 2 exact -> 1.0; correct: 0 of 1 predicted -1 -> 0.0; F1 = 0.0."""
    fe = prm_metrics(LABELS, SCORES)["first_error"]
    assert (fe["accuracy_erroneous"], fe["accuracy_correct"], fe["f1"]) == (1.0, 0.0, 0.0)
    assert (fe["n_erroneous"], fe["n_correct"]) == (2, 1)


def test_threshold_sweep():
    """Thresholds 0.04, 0.2, 0.4, 0.5:
    0.04: nothing flagged -> erroneous 0/2, correct 1/1 -> F1 0;
    0.2:  flags 0.05 only -> erroneous: sol 3 right (1), sol 1 predicted -1 (wrong) -> 1/2; correct 1/1 -> F1 2/3;
    0.4:  flags 0.3, 0.05 -> erroneous 2/2, correct 1/1 (0.45 >= 0.4) -> F1 1.0;
    0.5:  0.45 flagged too -> correct 0/1 -> F1 0.
    Best 0.4 (F1 1.0), reported as tuned on the evaluated data."""
    sw = prm_metrics(LABELS, SCORES, sweep=[0.5, 0.04, 0.4, 0.2])["first_error_sweep"]
    assert sw["thresholds"] == [0.04, 0.2, 0.4, 0.5]
    assert sw["f1"] == [0.0, pytest.approx(2 / 3), 1.0, 0.0]
    assert (sw["best_threshold"], sw["best_f1"], sw["tuned_on_evaluated_data"]) == (0.4, 1.0, True)


def test_sweep_ties_take_the_lowest_threshold():
    """One erroneous solution [0.9, 0.1] and one correct [0.8]: any threshold in (0.1, 0.8] gives F1 1."""
    sw = prm_metrics([[1, 0], [1]], [[0.9, 0.1], [0.8]], sweep=[0.7, 0.3, 0.5])["first_error_sweep"]
    assert sw["f1"] == [1.0, 1.0, 1.0] and sw["best_threshold"] == 0.3


def test_expected_calibration_error_ten_bins():
    """Bins of width 0.1. Steps (p, label): (0.05, 0) -> bin 0; (0.15, 1) -> bin 1; (0.95, 1), (0.95, 0),
    (1.0, 1) -> bin 9 (p = 1 belongs to the last bin); (0.1, 1) -> bin 1 (lower edge inclusive).
    bin 0: acc 0, conf 0.05 -> |gap| 0.05, weight 1
    bin 1: acc 1, conf 0.125 -> 0.875, weight 2
    bin 9: acc 2/3, conf 2.9/3 -> 0.3, weight 3
    ECE = (0.05 + 2*0.875 + 3*0.3) / 6 = 2.7 / 6 = 0.45."""
    labels = [[0], [1, 1], [1, 0, 1]]
    scores = [[0.05], [0.15, 0.1], [0.95, 0.95, 1.0]]
    cal = prm_metrics(labels, scores)["calibration"]
    assert cal["n_bins"] == 10 and len(cal["bins"]) == 10
    assert cal["ece"] == pytest.approx(0.45)
    counts = [b["count"] for b in cal["bins"]]
    assert counts == [1, 2, 0, 0, 0, 0, 0, 0, 0, 3]
    assert cal["bins"][1]["mean_confidence"] == pytest.approx(0.125) and cal["bins"][1]["accuracy"] == 1.0
    assert cal["bins"][9]["accuracy"] == pytest.approx(2 / 3) and cal["bins"][4]["accuracy"] is None


def test_per_position_rates():
    """Position 0: 3 steps, none wrong, none predicted wrong (0.95, 0.85, 0.7) -> 0, 0, 0.
    Position 1: 3 steps (0.6 c, 0.45 c, 0.05 w): gold wrong 1/3, predicted wrong 2/3, misclassified 1/3.
    Position 2: 1 step (0.3 w): gold 1, predicted 1, misclassified 0."""
    rows = prm_metrics(LABELS, SCORES)["per_position"]
    got = [(r["position"], r["n_steps"], r["gold_wrong_rate"], r["predicted_wrong_rate"], r["misclassification_rate"])
           for r in rows]  # fmt: skip
    assert got == [
        (0, 3, 0.0, 0.0, 0.0),
        (1, 3, pytest.approx(1 / 3), pytest.approx(2 / 3), pytest.approx(1 / 3)),
        (2, 1, 1.0, 1.0, 0.0),
    ]


def test_case_level():
    """Solutions flawed: 1, 3; flagged at 0.5: 1, 2, 3 -> tp 2, fp 1, fn 0, tn 0."""
    c = prm_metrics(LABELS, SCORES)["case"]
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (2, 1, 0, 0)


def test_bad_shapes_and_scores():
    with pytest.raises(ValueError, match="2 step labels but 1 step scores"):
        prm_metrics([[1, 0]], [[0.5]])
    with pytest.raises(ValueError, match="outside"):
        prm_metrics([[1]], [[1.5]])


def test_one_class_has_no_auroc():
    m = prm_metrics([[1, 1]], [[0.9, 0.8]])
    assert m["step"]["auroc"] is None and m["step"]["mean_score_wrong"] is None
    assert m["first_error"]["f1"] is None  # no erroneous solution: the harmonic mean is undefined
