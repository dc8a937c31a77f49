"""Paired comparison (eval/compare.py): McNemar's exact p and Newcombe's interval by hand, the per-category
breakdown, the refusals, and reading outcomes from eval, outcomes and best-of-N files.

Hand-computed values:

- McNemar, b = 10, c = 2: ``2 (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 (1 + 12 + 66) / 4096 = 0.0385742``;
  b = 0, c = 12: ``2 / 4096``; b = 1, c = 1: ``2 (1 + 2) / 4 = 1.5``, capped at 1.
- Newcombe, Cavo et al.'s table (both 59, A only 6, B only 16, neither 80): Fagerland, Lydersen & Laake
  (2017) and their R package contingencytables give [-0.1186, -0.0046] for A - B, so B - A is
  [0.0046, 0.1186]. Other tables are checked against ``newcombe_by_hand`` below, written from the paper's
  formulas with its own Wilson interval (not ``eval.intervals``), through each branch of the corrected phi.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.eval.best_of_n import Candidates, selections
from posttrainlab.eval.compare import (
    describe,
    mcnemar_exact,
    pair_stats,
    paired,
    paired_difference_ci,
    verdict,
)
from posttrainlab.runners.compare import best_of_n_outcomes, comparison, read_outcomes

Z = 1.959963984540054


def wilson_by_hand(x: int, n: int) -> tuple[float, float]:
    """Wilson (1927) from its textbook form: (2np + z² ± z sqrt(z² + 4np(1-p))) / (2(n + z²))."""
    p = x / n
    root = Z * math.sqrt(Z * Z + 4 * n * p * (1 - p))
    return ((2 * n * p + Z * Z - root) / (2 * (n + Z * Z)), (2 * n * p + Z * Z + root) / (2 * (n + Z * Z)))


def newcombe_by_hand(e: int, f: int, g: int, h: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 for p1 - p2, table (e both, f first only, g second only, h neither).

    phi = (eh - fg - n/2) / sqrt(...) if eh - fg > n/2; 0 if 0 <= eh - fg <= n/2; (eh - fg) / sqrt(...) if < 0.
    L = D - sqrt((p1-l1)² - 2 phi (p1-l1)(u2-p2) + (u2-p2)²), U = D + sqrt((p2-l2)² - 2 phi (p2-l2)(u1-p1) + (u1-p1)²).
    """
    n = e + f + g + h
    p1, p2 = (e + f) / n, (e + g) / n
    (l1, u1), (l2, u2) = wilson_by_hand(e + f, n), wilson_by_hand(e + g, n)
    a = e * h - f * g
    root = math.sqrt((e + f) * (g + h) * (e + g) * (f + h))
    phi = (a - n / 2) / root if a > n / 2 else 0.0 if a >= 0 else a / root
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    hi = d + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return lo, hi


# --- McNemar ------------------------------------------------------------------------------------------


def test_mcnemar_exact_by_hand():
    assert mcnemar_exact(10, 2) == pytest.approx(2 * 79 / 4096) and round(mcnemar_exact(10, 2), 5) == 0.03857
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)
    assert mcnemar_exact(0, 12) == pytest.approx(2 / 4096)
    assert mcnemar_exact(7, 7) == 1.0 and mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(1, 1) == 1.0
    assert mcnemar_exact(1, 0) == 1.0  # 2 * P[X <= 0], X ~ Bin(1, 1/2) = 1
    # b + c = 500: exact integers, no overflow; 200 vs 300 is far out in the tail
    assert 0 < mcnemar_exact(200, 300) < 1e-5
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


# --- Newcombe -----------------------------------------------------------------------------------------


def test_newcombe_matches_the_published_example():
    lo, hi = paired_difference_ci(59, 6, 16, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0046, 0.1186)
    lo, hi = paired_difference_ci(59, 16, 6, 80)  # the other way round: mirrored
    assert (round(lo, 4), round(hi, 4)) == (-0.1186, -0.0046)


@pytest.mark.parametrize(
    "table",
    [
        (59, 6, 16, 80),  # eh - fg = 4624 > n/2: the corrected phi
        (30, 5, 15, 50),  # eh - fg = 1425 > n/2
        (3, 1, 1, 2),  # eh - fg = 5 > n/2 = 3.5: corrected, just
        (2, 3, 3, 5),  # 0 < eh - fg = 1 <= n/2 = 6.5: phi = 0
        (5, 5, 5, 5),  # eh - fg = 0: phi = 0
        (2, 10, 12, 1),  # eh - fg = -118 < 0: negative phi
        (1, 2, 2, 3),  # eh - fg = -1 < 0
    ],
)
def test_newcombe_matches_an_independent_computation(table):
    e, f, g, h = table
    # paired_difference_ci(both, b=A only, c=B only, neither) is acc_b - acc_a = -(p1 - p2) with A first
    lo, hi = newcombe_by_hand(e, f, g, h)
    assert paired_difference_ci(e, f, g, h) == pytest.approx((-hi, -lo), abs=1e-12)


def test_newcombe_at_the_edges():
    assert paired_difference_ci(0, 0, 0, 0) == (-1.0, 1.0)  # n = 0: nothing known
    lo, hi = paired_difference_ci(20, 0, 0, 0)  # both always right: no difference seen, an interval around 0
    low20, _ = wilson_by_hand(20, 20)
    assert lo == pytest.approx(-(1 - low20)) and hi == pytest.approx(1 - low20) and lo < 0 < hi
    lo, hi = paired_difference_ci(0, 0, 30, 0)  # A never, B always right: diff 1, interval inside [-1, 1]
    assert hi == 1.0 and 0.8 < lo < 1.0


# --- paired -------------------------------------------------------------------------------------------


def outcomes(rows: list[tuple[str, str, bool]]) -> dict:
    return {i: (cat, ok) for i, cat, ok in rows}


# Seven problems. A and B per problem (1 = right):
#   id  category      A B
#   w1  word_problem  1 0      b
#   w2  word_problem  0 1      c
#   w3  word_problem  0 1      c
#   a1  addition      1 1
#   a2  addition      0 1      c
#   a3  addition      0 0
#   x1  xcat          1 1
TABLE = [("w1", "word_problem", 1, 0), ("w2", "word_problem", 0, 1), ("w3", "word_problem", 0, 1),
         ("a1", "addition", 1, 1), ("a2", "addition", 0, 1), ("a3", "addition", 0, 0),
         ("x1", "xcat", 1, 1)]  # fmt: skip
A = outcomes([(i, cat, bool(a)) for i, cat, a, _ in TABLE])
B = outcomes([(i, cat, bool(b)) for i, cat, _, b in reversed(TABLE)])  # another order: ids are matched, not lines


def test_paired_overall_and_per_category_by_hand():
    r = paired(A, B)
    # categories in arith-v1's order, then the unknown one
    assert list(r["categories"]) == ["addition", "word_problem", "xcat"]
    o = r["overall"]
    assert (o["n"], o["b"], o["c"]) == (7, 1, 3)
    assert o["acc_a"] == pytest.approx(3 / 7) and o["acc_b"] == pytest.approx(5 / 7)
    assert o["diff"] == pytest.approx(2 / 7)
    assert o["mcnemar_p"] == pytest.approx(2 * (1 + 4) / 16)  # Bin(4, 1/2): P[X <= 1] = 5/16
    assert o["significant"] is False
    assert o["ci"] == pytest.approx(paired_difference_ci(2, 1, 3, 1))  # both a1, x1; neither a3
    w = r["categories"]["word_problem"]
    assert (w["n"], w["b"], w["c"], w["acc_a"], w["acc_b"]) == (3, 1, 2, 1 / 3, 2 / 3)
    assert w["mcnemar_p"] == 1.0  # 2 * P[X <= 1], X ~ Bin(3, 1/2) = 2 * 4/8
    a = r["categories"]["addition"]
    assert (a["n"], a["b"], a["c"], a["acc_a"], a["acc_b"]) == (3, 0, 1, 1 / 3, 2 / 3)
    x = r["categories"]["xcat"]
    assert (x["b"], x["c"], x["diff"], x["mcnemar_p"]) == (0, 0, 0.0, 1.0)
    assert json.loads(json.dumps(r)) == r  # JSON as it is (lists, not tuples)


def test_a_significant_difference_and_the_words():
    s = pair_stats([(True, False)] * 10 + [(False, True)] * 2 + [(True, True)] * 30 + [(False, False)] * 8)
    assert s["n"] == 50 and s["diff"] == pytest.approx(-8 / 50)
    assert s["mcnemar_p"] == pytest.approx(0.0385742, abs=1e-7) and s["significant"] is True
    assert s["ci"][1] < 0  # the interval agrees here: B is worse
    text = describe("GRPO − SFT", s)
    lo, hi = s["ci"]
    assert text == f"GRPO − SFT = -16.0 points [{100 * lo:+.1f}, {100 * hi:+.1f}], p = 0.039: significant at 0.05"
    none = pair_stats([(True, True)] * 4)
    assert describe("x", none).endswith("p = 1.000: not significant at 0.05")
    r = {"overall": s, "categories": {"addition": none, "multiplication": s}}
    assert verdict(r) == "Significant at 0.05: overall, multiplication. Not significant: addition."
    assert verdict({"overall": none, "categories": {}}) == "No difference is significant at 0.05."


def test_different_problems_are_refused_with_counts():
    b = {k: v for k, v in B.items() if k not in ("w1", "w2")} | {"z9": ("addition", True)}
    with pytest.raises(BadInput, match=r"2 only in SFT \(w1, w2\); 1 only in GRPO \(z9\)"):
        paired(A, b, names=("SFT", "GRPO"))
    many = {f"q{i}": ("addition", True) for i in range(5)}
    with pytest.raises(BadInput, match=r"5 only in A \(q0, q1, q2 and 2 more\); 0 only in B"):
        paired(many | A, B)


def test_one_problem_with_two_categories_is_refused():
    b = dict(B) | {"a1": ("subtraction", True)}
    with pytest.raises(BadInput, match=r"1 problems have different categories.*a1: 'addition' vs 'subtraction'"):
        paired(A, b)


def test_empty_outcomes_fall_back():
    r = paired({}, {})
    assert r["overall"] == {"n": 0, "acc_a": 0.0, "acc_b": 0.0, "diff": 0.0, "ci": [-1.0, 1.0], "b": 0, "c": 0,
                            "mcnemar_p": 1.0, "significant": False}  # fmt: skip
    assert r["categories"] == {}


# --- reading ------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_read_outcomes_from_an_eval_folder_and_a_file(tmp_path):
    rows = [{"id": "t-1", "category": "addition", "prompt": "p", "response": "r", "correct": True, "outcome": "x"},
            {"id": 2, "category": None, "correct": False}]  # fmt: skip
    write_jsonl(tmp_path / "eval" / "samples.jsonl", rows)
    assert read_outcomes(tmp_path / "eval") == {"t-1": ("addition", True), "2": ("uncategorised", False)}
    assert read_outcomes(tmp_path / "eval" / "samples.jsonl") == read_outcomes(tmp_path / "eval")
    # a folder with outcomes.jsonl (beam search) reads that file, even beside a samples.jsonl
    write_jsonl(tmp_path / "eval" / "outcomes.jsonl", [{"id": "t-1", "category": "addition", "correct": False}])
    assert read_outcomes(tmp_path / "eval") == {"t-1": ("addition", False)}


@pytest.mark.parametrize(
    "rows, fragment",
    [
        ([{"id": "a", "correct": True}], r"rows\.jsonl:1: row has no category field"),
        ([{"id": "a", "category": "x", "correct": True}, {"category": "x"}], r"rows\.jsonl:2: row has no id, correct"),
        ([{"id": "a", "category": "x", "correct": 1}], r"rows\.jsonl:1: correct is 1, not true or false"),
        ([{"id": "a", "category": "x", "correct": True}] * 2, r"rows\.jsonl:2: id 'a' appears twice"),
        ([], r"rows\.jsonl: no rows to compare"),
        ([{"id": "a", "category": "x", "samples": []}], r"no correct field \(a best-of-N samples\.jsonl"),
    ],
)
def test_bad_outcome_files_name_the_file(tmp_path, rows, fragment):
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    with pytest.raises(BadInput, match=fragment):
        read_outcomes(path)


def test_missing_inputs_are_named(tmp_path):
    with pytest.raises(BadInput, match=r"nowhere: no such file or folder"):
        read_outcomes(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match=r"empty: holds no outcomes\.jsonl or samples\.jsonl"):
        read_outcomes(tmp_path / "empty")


def test_comparison_of_two_files(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": k, "category": c, "correct": ok} for k, (c, ok) in A.items()])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": k, "category": c, "correct": ok} for k, (c, ok) in B.items()])
    r = comparison(a, b)
    assert r["a"] == str(a) and r["b"] == str(b) and r["overall"] == paired(A, B)["overall"]


# --- best-of-N ----------------------------------------------------------------------------------------

# Two problems, four samples each, as eval/best_of_n.py writes them. The selected indices come from the
# real selectors (eval.best_of_n.selections), so the files have the exact shape of a run.
#   p0 (addition): correct [F, T, F, F], answers [12, 10, 12, None]; step scores: prm_min picks 1
#   p1 (word_problem): correct [T, F, F, F], answers [3, 4, 4, None]: majority picks 1 (4 twice), wrong
PROBLEMS = {
    "p0": ("addition", Candidates([False, True, False, False], [12, 10, 12, None],
                                  [[0.9, 0.3], [0.6, 0.6], [0.95, 0.2], [0.5]])),
    "p1": ("word_problem", Candidates([True, False, False, False], [3, 4, 4, None],
                                      [[0.8], [0.4], [0.3], [0.1]])),
}  # fmt: skip


def bon_folder(root: Path, ns=(1, 2, 4)) -> Path:
    outcome = {True: "correct", False: "wrong_answer"}
    samples, scores = [], []
    for pid, (cat, c) in PROBLEMS.items():
        graded = zip(c.correct, c.answers, strict=True)
        rows = [{"response": "r", "correct": ok, "outcome": outcome[ok], "parsed": a} for ok, a in graded]
        samples.append({"id": pid, "category": cat, "answer": 0, "prompt": "q", "samples": rows})
        scores.append({"id": pid, "samples": [], "selected": selections(c, list(ns))})
    write_jsonl(root / "samples.jsonl", samples)
    write_jsonl(root / "scores.jsonl", scores)
    return root


def test_best_of_n_selectors_as_outcomes(tmp_path):
    folder = bon_folder(tmp_path / "best-of-n")
    n, per = best_of_n_outcomes(folder)
    assert n == 4 and list(per) == ["prm_min", "prm_last", "prm_product", "prm_mean", "majority", "prm_vote"]
    # majority: p0 -> 12 twice (sample 0, wrong); p1 -> 4 twice (sample 1, wrong)
    assert per["majority"] == {"p0": ("addition", False), "p1": ("word_problem", False)}
    # prm_min: p0 -> sample 1 (min 0.6, right); p1 -> sample 0 (0.8, right)
    assert per["prm_min"] == {"p0": ("addition", True), "p1": ("word_problem", True)}
    r = paired(per["majority"], per["prm_min"])
    assert (r["overall"]["b"], r["overall"]["c"], r["overall"]["mcnemar_p"]) == (0, 2, 0.5)
    # at n' = 1 every selector takes sample 0: p0 wrong, p1 right
    n, per = best_of_n_outcomes(folder, n=1)
    assert n == 1 and all(o == {"p0": ("addition", False), "p1": ("word_problem", True)} for o in per.values())
    with pytest.raises(BadInput, match=r"n=3 is not one of this run's n' \(1, 2, 4\)"):
        best_of_n_outcomes(folder, n=3)


def test_best_of_n_folder_faults(tmp_path):
    with pytest.raises(BadInput, match=r"no samples\.jsonl \(expected a best-of-N output folder\)"):
        best_of_n_outcomes(tmp_path)
    folder = bon_folder(tmp_path / "bon")
    write_jsonl(folder / "scores.jsonl", [{"id": "zz", "selected": {"majority": {"1": 0}}}])
    with pytest.raises(BadInput, match=r"scores\.jsonl:1: id 'zz' is not in samples\.jsonl"):
        best_of_n_outcomes(folder)
    write_jsonl(folder / "scores.jsonl", [{"id": "p0", "selected": {"majority": {"1": 9}}}])
    with pytest.raises(BadInput, match=r"problem p0: no valid majority choice at n=1"):
        best_of_n_outcomes(folder)
