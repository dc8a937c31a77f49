"""Agreement between two annotations (eval/agreement.py, posttrain data agree): hand-computed numbers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from posttrainlab.cli import app
from posttrainlab.data.jsonl import write_jsonl
from posttrainlab.eval.agreement import MisalignedRows, agreement, cohen_kappa, span_overlap


def test_kappa_by_hand():
    # 10 pairs: a = 1 on 6, b = 1 on 5, agree on 7 (4 ones, 3 zeros)
    a = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 0, 1, 0, 0, 0]
    # p_o = 0.7; p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5; kappa = 0.2 / 0.5 = 0.4
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == 1.0
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([0, 0], [0, 0]) is None and cohen_kappa([], []) is None


def test_span_overlap_by_hand():
    r = span_overlap([[(0, 10)], [(3, 5)]], [[(5, 15)], []])  # |A| 12, |B| 10, both 5
    assert (r["chars_a"], r["chars_b"], r["chars_both"]) == (12, 10, 5)
    assert r["f1"] == pytest.approx(10 / 22) and r["precision"] == 0.5 and r["recall"] == pytest.approx(5 / 12)
    assert span_overlap([[]], [[]])["f1"] is None


def span(answer, annotation, q="q"):
    return {"question": q, "model_answer": answer, "hallucination_annotation": annotation}


ROWS_A = [
    span(["1 + 2 = 3", "3 * 4 = 13", "Answer: 13"], ["1 + 2 = 3", "3 * 4 = <HAL>13</HAL>", "Answer: <HAL>13</HAL>"]),
    span(["5 - 1 = 4", "Answer: 4"], ["No hallucinations"]),
]
ROWS_B = [
    span(["1 + 2 = 3", "3 * 4 = 13", "Answer: 13"], ["1 + 2 = 3", "<HAL>3 * 4 = 13</HAL>", "Answer: 13"]),
    span(["5 - 1 = 4", "Answer: 4"], ["<HAL>5 - 1 = 4</HAL>", "Answer: 4"]),
]


def test_span_files_by_hand():
    r = agreement(ROWS_A, ROWS_B)
    # piece labels: A [1,0,0 | 1,1], B [1,0,1 | 0,1]; agree on 3 of 5
    # p_o = 0.6; A ones 3/5, B ones 3/5: p_e = 0.36 + 0.16 = 0.52; kappa = 0.08 / 0.48
    assert r["mode"] == "span" and r["steps_compared"] == 5
    assert r["step_kappa"] == pytest.approx(0.08 / 0.48)
    # chars: A marks "13" (2) + "13" (2) = 4; B marks "3 * 4 = 13" (10) + "5 - 1 = 4" (9) = 19; both: 2
    assert (r["span"]["chars_a"], r["span"]["chars_b"], r["span"]["chars_both"]) == (4, 19, 2)
    assert r["span"]["f1"] == pytest.approx(4 / 23)
    # solutions: both flag row 0; only B flags row 1 -> flawed a [0,1], b [0,0] -> p_e = 1/2*1 ... kappa 0
    assert r["solution_kappa"] == pytest.approx(0.0)
    assert r["first_error_match"] == 0.5


def test_step_files_compare_the_steps_both_labelled():
    a = [
        {"question": "q", "steps": ["s0", "s1"], "step_labels": [1, 0]},
        {"question": "p", "steps": ["t0"], "step_labels": [1]},
    ]
    b = [
        {"question": "q", "steps": ["s0", "s1", "s2"], "step_labels": [1, 1, 0]},
        {"question": "p", "steps": ["t0"], "step_labels": [0]},
    ]
    r = agreement(a, b)
    # compared: row 0 steps s0, s1 (a [1,0], b [1,1]); row 1 t0 (a [1], b [0]) -> a [1,0,1], b [1,1,0]
    # p_o = 1/3; a ones 2/3, b ones 2/3: p_e = 4/9 + 1/9 = 5/9; kappa = (3/9 - 5/9) / (4/9) = -0.5
    assert r["steps_compared"] == 3 and r["step_kappa"] == pytest.approx(-0.5)
    # chars: a marks "s1" (2), b marks "t0" (2), none shared
    assert r["span"]["f1"] == 0.0
    # a span file against its own step view agrees perfectly
    from posttrainlab.data.formats.sharp import span_to_step

    mixed = agreement(ROWS_A, [span_to_step(r) for r in ROWS_A])
    assert mixed["mode"] == "step (span file converted)" and mixed["step_kappa"] == 1.0 and mixed["span"]["f1"] == 1.0


@pytest.mark.parametrize(
    ("b", "fault"),
    [
        (ROWS_B[:1], "one file ends here"),
        ([ROWS_B[0], span(["5 - 1 = 4"], ["5 - 1 = 4"])], "model_answer differs"),
        ([ROWS_B[0], span(["5 - 1 = 4", "Answer: 4"], ["5 - 1 = 4", "Answer: 4"], q="other")], "questions differ"),
    ],
)
def test_misaligned_rows_are_refused(b, fault):
    with pytest.raises(MisalignedRows, match=fault):
        agreement(ROWS_A, b)


def test_step_rows_that_are_not_prefixes_are_refused():
    a = [{"question": "q", "steps": ["s0", "s1"], "step_labels": [1, 1]}]
    b = [{"question": "q", "steps": ["s0"], "step_labels": [1]}]  # shorter yet without an error
    with pytest.raises(MisalignedRows, match="no error"):
        agreement(a, b)


def test_cli_agree(tmp_path):
    fa, fb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(fa, ROWS_A)
    write_jsonl(fb, ROWS_B)
    runner = CliRunner()
    res = runner.invoke(app, ["data", "agree", str(fa), str(fb), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["step_kappa"] == pytest.approx(0.08 / 0.48)
    res = runner.invoke(app, ["data", "agree", str(fa), str(fb)])
    assert "step kappa 0.167" in res.output and "span F1 0.174" in res.output
    write_jsonl(fb, ROWS_B[:1])
    from posttrainlab.cli import main

    with pytest.raises(SystemExit) as e:
        main(["data", "agree", str(fa), str(fb)])
    assert e.value.code == 2
