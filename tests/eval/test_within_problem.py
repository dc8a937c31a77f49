"""Within-problem ranking (eval/within_problem.py): hand-computed values, and where eval prm and best-of-N report it."""

from __future__ import annotations

import json

import pytest

from posttrainlab.eval.best_of_n import Candidates, best_of_n_metrics
from posttrainlab.eval.within_problem import by_problem_id, within_problem, within_problem_by_aggregation
from posttrainlab.runners.prm_eval import run as eval_prm
from prm_eval_fakes import FakeBackend, OracleScorer


def test_by_hand():
    """P: right [0.8, 0.8], wrong [0.9, 0.5, 0.8] -> per right sample 0 + 1 + 1/2: 3 of 6 pairs.
    Q: right [0.4], wrong [0.1, 0.2] -> 2 of 2. R all wrong, S all right: no pair.
    micro = 5/8, macro = (1/2 + 1)/2 = 3/4. Pooled over all nine: 0.8 wins 4.5 twice, 0.4 wins 3, 0.7 wins 4: 16/24."""
    groups = ["P", "P", "P", "P", "P", "Q", "Q", "Q", "R", "S"]
    correct = [True, True, False, False, False, True, False, False, False, True]
    scores = [0.8, 0.8, 0.9, 0.5, 0.8, 0.4, 0.1, 0.2, 0.3, 0.7]
    m = within_problem(groups, correct, scores)
    assert (m.problems, m.pairs, m.only_wrong, m.only_right) == (2, 8, 1, 1)
    assert m.pairwise_accuracy == pytest.approx(5 / 8) and m.per_problem_auroc == pytest.approx(3 / 4)
    assert m.pooled_auroc == pytest.approx(16 / 24)


def test_a_problem_blind_scorer_ranks_nothing_within_a_problem():
    """Scores that only say how hard a problem is: A (easy) 0.9 for all, B (hard) 0.1 for all. Pooled AUROC:
    A's rights tie A's wrong (1.5) and beat B's wrongs (9), B's right ties B's wrongs (1.5): 12/16 = 0.75.
    Within each problem every pair is a tie: 0.5."""
    groups = ["A"] * 4 + ["B"] * 4
    correct = [True, True, True, False, True, False, False, False]
    scores = [0.9] * 4 + [0.1] * 4
    m = within_problem(groups, correct, scores)
    assert m.pooled_auroc == pytest.approx(0.75)
    assert m.pairwise_accuracy == 0.5 and m.per_problem_auroc == 0.5


def test_undefined_is_none_never_nan():
    m = within_problem(["a", "b"], [True, False], [0.9, 0.1])
    assert m.problems == 0 and m.pairwise_accuracy is None and m.per_problem_auroc is None and m.pooled_auroc == 1.0
    e = within_problem([], [], [])
    assert e.pairs == 0 and e.pooled_auroc is None
    with pytest.raises(ValueError, match="one each"):
        within_problem(["a"], [True, False], [0.1])


def test_by_aggregation_and_by_problem_id():
    """The best-of-N hand case (test_best_of_n.CASE): the right sample has min 0.6, last 0.6, product 0.216,
    mean 0.6 against wrong samples (min, last, product, mean) (0.3, 0.3, 0.243, 0.7), (0.2, 0.99, 0.1881, 0.7133),
    (0.5, 0.5, 0.5, 0.5): it beats 3, 2, 1 and 1 of them."""
    steps = [[0.9, 0.9, 0.3], [0.6, 0.6, 0.6], [0.95, 0.2, 0.99], [0.5]]
    got = within_problem_by_aggregation(["p"] * 4, [False, True, False, False], steps)
    assert {a: got[a]["pairwise_accuracy"] for a in got} == pytest.approx(
        {"min": 1.0, "last": 2 / 3, "product": 1 / 3, "mean": 1 / 3}
    )
    bon = best_of_n_metrics([Candidates([False, True, False, False], [12, 10, 12, None], steps)], [4])
    assert bon["within_problem"] == got
    # eval prm: right = every step labelled 1; no repeated id, or a row without one: nothing to group
    labels = [[1, 1, 0], [1, 1, 1], [1, 0], [0]]
    assert by_problem_id(["p"] * 4, labels, steps) == got
    assert by_problem_id(["p", "q", "r", "s"], labels, steps) is None
    assert by_problem_id(["p", "p", None, "s"], labels, steps) is None


def test_eval_prm_reports_it_for_arith_prm(arith_dir, tmp_path):
    """arith-prm rows carry the problem id: K samples, the reference and a corruption of each problem group together;
    the oracle scorer ranks every right solution above every wrong one of its problem."""
    from posttrainlab.label.arith_prm import ArithPRMBuild, build

    aprm = tmp_path / "aprm"
    build("fake", arith_dir, aprm, ArithPRMBuild(k=4, limit=2), backend=FakeBackend())
    m = eval_prm("fake-prm", aprm, tmp_path / "e", scorer=OracleScorer(), progress=False)
    assert m["within_problem"]["min"]["problems"] == 4 and m["within_problem"]["min"]["pairwise_accuracy"] == 1.0
    assert json.loads((tmp_path / "e" / "metrics.json").read_text())["within_problem"] == m["within_problem"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"question": "What is 2 + 3?", "steps": ["2 + 3 = 5"], "step_labels": [1]}) + "\n")
    assert eval_prm("p", rows, tmp_path / "e2", scorer=OracleScorer(), progress=False)["within_problem"] is None
