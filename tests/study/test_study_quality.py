"""The study's pure numbers (study.quality), checked against values worked out by hand."""

from __future__ import annotations

import pytest

from posttrainlab.data.arith.prm_labels import label_steps
from posttrainlab.data.arith.steps import parse_question, step_verdicts
from posttrainlab.study.quality import bon_row, cost_table, every_step_labels, label_quality, prm_row

SOLUTIONS = [
    ["351 - 148 = 203", "203 + 56 = 259", "Answer: 259"],  # right
    ["351 - 148 = 204", "204 + 56 = 260", "Answer: 259"],  # a right answer through wrong steps
    ["351 - 148 = 203", "203 + 56 = 259"],  # no answer line
    ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"],  # wrong from the second line
    ["351 - 148 = 204", "203 + 56 = 259", "Answer: 259"],  # a right line after an error
]


@pytest.mark.parametrize("steps", SOLUTIONS)
def test_the_exact_verdicts_give_arith_prms_every_step_labels(steps):
    problem = parse_question("What is 351 - 148 + 56?")
    assert every_step_labels(steps, step_verdicts(problem, steps)) == label_steps(problem, steps, "every-step")[1]


def test_every_step_labels_by_hand():
    assert every_step_labels(["a", "b", "Answer: 3"], [True, False, True]) == [1, 0, 1]
    assert every_step_labels(["a", "b", "c"], [False, True, True]) == [0, 0, 0]  # no answer line: last 0 too
    assert every_step_labels(["Answer: 3"], [False]) == [0]
    assert every_step_labels([], []) == []
    with pytest.raises(ValueError, match="2 steps but 1 verdicts"):
        every_step_labels(["a", "b"], [True])


def test_label_quality_by_hand():
    exact = [[1, 1, 0], [1, 0], [1, 1], [0]]
    targets = [[1.0, 0.0, 0.0], [1.0, 1.0], [1.0, 1.0], None]
    q = label_quality(exact, targets, ["addition", "multi_step", "addition", "addition"])
    # 7 steps compared: (1,1) (1,0)* (0,0) | (1,1) (0,1)* | (1,1) (1,1); one false wrong, one missed
    assert (q["steps"], q["exact_wrong"], q["false_wrong"], q["missed"]) == (7, 2, 1, 1)
    assert q["accuracy"] == pytest.approx(5 / 7)
    # kappa: gold 1,1,0,1,0,1,1 (5 ones), hard 1,0,0,1,1,1,1 (5 ones); p_o = 5/7, p_e = (25 + 4) / 49
    assert q["kappa"] == pytest.approx((5 / 7 - 29 / 49) / (1 - 29 / 49))
    assert q["mean_abs_error"] == pytest.approx(2 / 7)
    assert (q["solutions"], q["labelled"], q["missing"]) == (4, 3, 1)
    # first errors: 1 vs 2 (no), none vs 1 (no), none vs none (yes)
    assert q["first_error_agreement"] == pytest.approx(1 / 3)
    assert list(q["by_category"]) == ["addition", "multi_step"]  # arith-v1's order
    assert q["by_category"]["addition"] == {"steps": 5, "errors": 1, "error_rate": 0.2, "false_wrong": 1, "missed": 0}
    assert q["by_category"]["multi_step"]["missed"] == 1
    assert q["by_position"]["1"] == {"steps": 3, "errors": 2, "error_rate": pytest.approx(2 / 3), "false_wrong": 1,
                                     "missed": 1}  # fmt: skip
    assert q["by_position"]["2"]["errors"] == 0


def test_soft_targets_count_by_their_hard_label_and_their_distance():
    q = label_quality([[1, 0]], [[0.75, 0.25]], ["addition"])
    assert q["accuracy"] == 0.5 and q["missed"] == 1  # V > 0 is the hard label: 0.25 says right
    assert q["mean_abs_error"] == pytest.approx(0.25)


def test_label_quality_refuses_misaligned_rows():
    with pytest.raises(ValueError, match="2 exact labels but 1 targets"):
        label_quality([[1, 0]], [[1.0]], ["addition"])
    with pytest.raises(ValueError, match="1 exact rows, 2 target rows"):
        label_quality([[1]], [[1.0], [1.0]], ["addition"])


def test_cost_table_by_hand():
    t = cost_table({"mc-16": {"continuations": 4800, "seconds": 60.0, "n": 16},
                    "judge-0": {"judge_calls": 300, "seconds": 1.5, "failed": 0}}, 300)  # fmt: skip
    assert t["mc-16"]["per_solution"] == {"continuations": 16.0, "judge_calls": 0.0, "seconds": 0.2}
    assert t["mc-16"]["n"] == 16 and t["mc-16"]["judge_calls"] == 0
    assert t["judge-0"]["per_solution"]["judge_calls"] == 1.0 and t["judge-0"]["failed"] == 0
    with pytest.raises(ValueError):
        cost_table({}, 0)


def test_prm_row_reads_each_metric():
    metrics = {"step": {"auroc": 0.8}, "first_error": {"f1": 0.5}, "calibration": {"ece": 0.1},
               "within_problem": {"min": {"pairwise_accuracy": 0.6}, "last": {"pairwise_accuracy": 0.7}}}  # fmt: skip
    assert prm_row(metrics) == {"auroc": 0.8, "pairwise_min": 0.6, "pairwise_last": 0.7, "first_error_f1": 0.5,
                                "ece": 0.1}  # fmt: skip


def test_bon_row_pairs_every_selector_with_majority_and_the_vote_with_the_exact_vote():
    ids = ["p1", "p2", "p3", "p4"]

    def outcomes(*correct):
        return {i: ("addition", c) for i, c in zip(ids, correct, strict=True)}

    o = {"majority": outcomes(True, False, False, True), "prm_vote": outcomes(True, True, True, True),
         "prm_min": outcomes(False, False, False, True), "prm_last": outcomes(True, False, False, True)}  # fmt: skip
    r = bon_row(o, reference=outcomes(True, True, False, False))
    assert r["problems"] == 4 and r["majority"] == 0.5
    assert (r["prm_vote"]["b"], r["prm_vote"]["c"], r["prm_vote"]["diff"]) == (0, 2, 0.5)
    assert r["prm_vote"]["mcnemar_p"] == 0.5  # 2 discordant, both the vote's: 2 * (1/2)^2
    assert (r["prm_min"]["b"], r["prm_min"]["c"]) == (1, 0) and r["prm_last"]["mcnemar_p"] == 1.0
    assert (r["vote_vs_exact"]["b"], r["vote_vs_exact"]["c"]) == (0, 2)
