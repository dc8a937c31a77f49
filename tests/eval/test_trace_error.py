"""Trace error (eval/trace_error.py, runners/compare.py's ``read_trace``): hand-made arith-v1 rows of known trace.

Responses come from tests/arith_traces.py: ``clean`` (right answer, every step right), ``wstep`` (right answer
through a wrong first step), ``wrong`` (wrong answer). Problems p0…p5: multiplication, multi_step, multi_step,
addition, subtraction, word_problem.

The pair A/B used below (tests/arith_traces.py's ``A_*``, ``B_*``; greedy, and K = 2 samples each):

    problem   A greedy  B greedy   A samples       B samples
    p0        wstep     clean      clean, wstep    clean, clean
    p1        wstep     clean      wrong, wrong    clean, wstep
    p2        wstep     clean      wstep, wrong    clean, wrong
    p3        clean     wstep      clean, clean    wstep, wstep
    p4        clean     clean      clean, clean    clean, clean
    p5        wrong     clean      clean, clean    clean, clean

Greedy: A 3 of 5 right answers through a wrong step (60%), B 1 of 6. Paired on the 5 problems both answer right
(p0…p4): A's trace wrong on p0, p1, p2, B's on p3: b = 3, c = 1, exact McNemar p = 2 (C(4,0) + C(4,1)) / 2^4 =
10/16 = 0.625; trace errors there 3/5 and 1/5, B − A = -0.4.
Sampled, pooled: A 2 of 9 right samples with a wrong step, B 3 of 11. Per problem (w/r) on the problems both sample
a right answer on (p1 has none in A): A 1/2, 1, 0, 0, 0 and B 0, 0, 1, 0, 0 (p0, p2, p3, p4, p5): d = -0.5, -1, 1,
0, 0, mean -0.1, s_d² = 2.2 / 4 = 0.55, t = -0.1 / sqrt(0.55 / 5), 4 degrees of freedom:
p = 1 − |t|(t² + 6)/(t² + 4)^{3/2} (the closed form tests/eval/test_sampled.py checks too).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from arith_traces import A_GREEDY, A_SAMPLES, B_GREEDY, B_SAMPLES, eval_rows, problem, wstep
from posttrainlab.errors import BadInput
from posttrainlab.eval.intervals import wilson_interval
from posttrainlab.eval.trace_error import (
    mark_rows,
    paired_sampled_trace,
    paired_trace,
    sampled_trace_metrics,
    trace_metrics,
    trace_share,
    wrong_step,
)
from posttrainlab.runners.compare import read_trace, trace_comparison

CATEGORIES = ["addition", "subtraction", "multiplication", "multi_step", "word_problem"]


def write_eval(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_the_three_kinds_of_response_are_what_the_tests_say():
    for i in range(6):
        p = problem(i)
        assert not wrong_step(p, p.solution)
        assert wrong_step(p, wstep(p))
    rows = eval_rows(["clean", "wstep", "wrong"])
    assert [r["correct"] for r in rows] == [True, True, False]
    assert mark_rows(rows) and [r["wrong_step"] for r in rows] == [False, True, True]


def test_greedy_trace_error_by_hand():
    """4 right answers, one through a wrong step: 1/4 = 0.25; the wrong answer (p4, wrong steps or not) never
    counts. Wilson (1, 4) = [0.0456, 0.6994]."""
    rows = eval_rows(["wstep", "clean", "clean", "clean", "wrong"])
    assert mark_rows(rows)
    m = trace_metrics(rows, CATEGORIES)
    assert (m["value"], m["trace_error_count"], m["right_answers"]) == (0.25, 1, 4)
    assert m["ci95"] == list(wilson_interval(1, 4))
    assert [round(x, 4) for x in m["ci95"]] == [0.0456, 0.6994]
    per = m["per_category"]
    assert (per["multiplication"]["value"], per["multi_step"]["value"], per["addition"]["value"]) == (1.0, 0.0, 0.0)
    assert per["multi_step"]["right_answers"] == 2
    # subtraction: its only answer is wrong, so no right answer: undefined, not 0
    assert per["subtraction"]["value"] is None and per["subtraction"]["right_answers"] == 0
    assert per["word_problem"]["right_answers"] == 0


def test_sampled_trace_error_is_pooled_over_every_sample():
    """A's samples: 9 right (p0 2, p2 1, p3…p5 2 each), 2 of them through a wrong step (p0, p2): 2/9."""
    rows = eval_rows(A_GREEDY, A_SAMPLES)
    assert mark_rows(rows)
    assert [r["n_trace_errors"] for r in rows] == [1, 0, 1, 0, 0, 0]
    assert [s["wrong_step"] for s in rows[0]["samples"]] == [False, True]
    m = sampled_trace_metrics(rows, CATEGORIES)
    assert (m["value"], m["trace_error_count"], m["right_answers"], m["samples"]) == (2 / 9, 2, 9, 12)
    assert "ci95" not in m and m["pooled"].startswith("over all K samples")
    assert m["per_category"]["multi_step"] == {"value": 1 / 1, "trace_error_count": 1, "right_answers": 1}
    greedy = trace_metrics(rows, CATEGORIES)
    assert (greedy["trace_error_count"], greedy["right_answers"]) == (3, 5)


def test_trace_share_without_right_answers():
    assert trace_share(0, 0) == {"value": None, "ci95": [0.0, 1.0], "trace_error_count": 0, "right_answers": 0}


def test_rows_of_another_dataset_are_left_alone():
    rows = eval_rows(["clean", "wstep"])
    rows[1]["prompt"] = "What is the capital of France?"
    assert not mark_rows(rows)
    assert all("wrong_step" not in r for r in rows)
    assert not mark_rows([])


def test_paired_greedy_by_hand():
    a = {f"p{i}": (c, right, ws) for i, (c, right, ws) in enumerate(
        [("addition", True, True), ("addition", True, True), ("addition", True, True), ("subtraction", True, False),
         ("subtraction", True, False), ("subtraction", False, True)])}  # fmt: skip
    b = {f"p{i}": (c, right, ws) for i, (c, right, ws) in enumerate(
        [("addition", True, False), ("addition", True, False), ("addition", True, False), ("subtraction", True, True),
         ("subtraction", True, False), ("subtraction", True, False)])}  # fmt: skip
    r = paired_trace(a, b)
    o = r["overall"]
    assert (r["right_a"], r["right_b"]) == (5, 6)
    assert (o["n"], o["b"], o["c"]) == (5, 3, 1)
    assert o["mcnemar_p"] == 10 / 16 and not o["significant"]
    assert (o["trace_error_a"], o["trace_error_b"]) == (3 / 5, 1 / 5) and o["diff"] == pytest.approx(-0.4)
    assert "acc_a" not in o
    add, sub = r["categories"]["addition"], r["categories"]["subtraction"]
    assert (add["n"], add["b"], add["c"], add["mcnemar_p"]) == (3, 3, 0, 2 / 8)
    assert (sub["n"], sub["b"], sub["c"], sub["mcnemar_p"]) == (2, 0, 1, 1.0)


def test_paired_greedy_significant():
    """Six problems both answer right, A's trace wrong on all, B's on none: p = 2 / 2^6 = 0.03125."""
    a = {f"p{i}": ("addition", True, True) for i in range(6)}
    b = {f"p{i}": ("addition", True, False) for i in range(6)}
    o = paired_trace(a, b)["overall"]
    assert (o["b"], o["c"], o["mcnemar_p"], o["significant"]) == (6, 0, 2 / 64, True)


def test_pairing_refuses_different_problems():
    a = {"p0": ("addition", True, True), "p1": ("addition", True, False)}
    with pytest.raises(BadInput, match="cover different problems"):
        paired_trace(a, {"p0": ("addition", True, True)})
    with pytest.raises(BadInput, match="cover different problems"):
        paired_sampled_trace({"p0": ("addition", 1, 0)}, {"p9": ("addition", 1, 0)})


def test_paired_sampled_by_hand():
    a = {"p0": ("addition", 2, 1), "p1": ("addition", 0, 0), "p2": ("addition", 1, 1), "p3": ("addition", 2, 0)}
    b = {"p0": ("addition", 2, 0), "p1": ("addition", 2, 1), "p2": ("addition", 1, 0), "p3": ("addition", 2, 2)}
    r = paired_sampled_trace(a, b)
    # p1 left out (A has no right sample); d = -0.5, -1, 1: mean -1/6
    assert r["overall"]["n"] == 3 and r["overall"]["diff"] == pytest.approx(-1 / 6)
    assert (r["pooled_a"], r["pooled_b"]) == (2 / 5, 3 / 7)


def test_folders_paired_by_hand(tmp_path):
    """Old-format eval folders (rows without wrong_step): read_trace works the flags out; the module docstring's
    numbers."""
    a = write_eval(tmp_path / "a", eval_rows(A_GREEDY, A_SAMPLES))
    b = write_eval(tmp_path / "b", eval_rows(B_GREEDY, B_SAMPLES))
    assert "wrong_step" not in (a / "samples.jsonl").read_text()
    greedy_a, sampled_a = read_trace(a)
    assert greedy_a["p0"] == ("multiplication", True, True) and greedy_a["p5"] == ("word_problem", False, True)
    assert sampled_a["p1"] == ("multi_step", 0, 0) and sampled_a["p0"] == ("multiplication", 2, 1)
    r = trace_comparison(a, b)
    g = r["greedy"]["overall"]
    assert (g["n"], g["b"], g["c"], g["mcnemar_p"]) == (5, 3, 1, 0.625)
    assert g["diff"] == pytest.approx(-0.4)
    s = r["sampled"]
    assert (s["pooled_a"], s["pooled_b"]) == (2 / 9, 3 / 11)
    o = s["overall"]
    t = 0.1 / math.sqrt(0.55 / 5)
    assert o["n"] == 5 and o["diff"] == pytest.approx(-0.1)
    assert o["p"] == pytest.approx(1 - t * (t * t + 6) / (t * t + 4) ** 1.5, abs=1e-9)


def test_greedy_only_folders_have_no_sampled_pairing(tmp_path):
    a = write_eval(tmp_path / "a", eval_rows(A_GREEDY))
    b = write_eval(tmp_path / "b", eval_rows(B_GREEDY, B_SAMPLES))
    assert read_trace(a)[1] is None
    assert trace_comparison(a, b)["sampled"] is None


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda rows: rows[2].update(prompt="What is the capital of France?"), "not every row is an arith-v1"),
        (lambda rows: rows[1].pop("response"), ":2: row has no id, response or correct"),
    ],
)
def test_bad_folders_name_the_file(tmp_path, edit, message):
    rows = eval_rows(A_GREEDY)
    edit(rows)
    folder = write_eval(tmp_path / "a", rows)
    with pytest.raises(BadInput, match=message):
        read_trace(folder)
