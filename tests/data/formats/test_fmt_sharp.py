"""SHARP: span view checks, the card's span -> step conversion, the join by position, the PRM prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.data.formats.schema import RowError
from posttrainlab.data.formats.sharp import (
    build_prm_prompt,
    check_join,
    convert_span_rows,
    join_step_span,
    span_piece_labels,
    span_stats,
    span_to_step,
    validate_span,
)
from posttrainlab.data.formats.step import validate_step

ASSETS = Path(__file__).parents[2] / "assets" / "formats"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_span_fixture_converts_to_the_hand_written_step_rows():
    got = list(convert_span_rows(rows("span_good.jsonl")))
    assert got == rows("span_good_step.jsonl")
    assert list(validate_step(got)) == []  # every output row keeps the step-view invariant


@pytest.mark.parametrize(
    ("index", "full_labels", "note"),
    [
        (0, [1, 1, 1], "no tags"),
        (1, [1, 1, 0, 1], "the card's chocolate-bar example"),
        (2, [1, 0, 0, 1], "a span from piece 1 across the blank line into piece 2"),
        (3, [0, 0, 1], "opening tag at the very end of piece 0 marks piece 0 too"),
        (4, [1, 1], "the literal No hallucinations"),
        (5, [1, 0], "error in the last step"),
        (6, [0, 0], "two spans in one step, another in the next"),
    ],
)
def test_piece_labels_over_the_whole_solution(index, full_labels, note):
    labels, _ = span_piece_labels(rows("span_good.jsonl")[index])
    assert labels == full_labels, note


def test_conversion_is_the_cut_of_the_whole_labels():
    """What the lossy conversion keeps: row alignment, question, verbatim pieces up to the first 0."""
    for span_row, step_row in zip(rows("span_good.jsonl"), rows("span_good_step.jsonl"), strict=True):
        labels, _ = span_piece_labels(span_row)
        k = labels.index(0) + 1 if 0 in labels else len(labels)
        assert step_row["question"] == span_row["question"]
        assert step_row["steps"] == span_row["model_answer"][:k]
        assert step_row["step_labels"] == labels[:k]


def test_bad_span_rows_each_give_their_reason():
    bad = rows("span_bad.jsonl")
    assert list(validate_span(bad)) == [(i, row["expect"]) for i, row in enumerate(bad)]


def test_conversion_stops_at_the_first_bad_row():
    good = rows("span_good.jsonl")
    with pytest.raises(RowError) as e:
        list(convert_span_rows([*good[:2], rows("span_bad.jsonl")[0], good[0]]))
    assert (e.value.index, e.value.reason) == (2, "unclosed <HAL> at char 2 of piece 0")


def test_span_to_step_rejects_a_row_without_reproducing_text():
    with pytest.raises(ValueError, match="differs from model_answer"):
        span_to_step({"question": "q", "model_answer": ["x = 5"], "hallucination_annotation": ["x = <HAL>6</HAL>"]})


def test_join_by_position_accepts_the_matching_files():
    joined = list(join_step_span(rows("span_good_step.jsonl"), rows("span_good.jsonl")))
    assert [(i, reason) for i, _, _, reason in joined] == [(i, None) for i in range(7)]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda r: r.update(question="Another question?"), "the questions differ"),
        (
            lambda r: r["steps"].__setitem__(0, "Tom starts with 4 apples."),
            "steps[0] differs from model_answer[0]",
        ),
        (lambda r: r.update(steps=r["steps"][:2], step_labels=[1, 1]), "step_labels [1, 1] differ"),
        (lambda r: r.update(step_labels=[1, 1, 0]), "step_labels [1, 1, 0] differ"),
        (lambda r: r.update(steps=[*r["steps"], "x"], step_labels=[1, 1, 1, 1]), "4 steps but only 3"),
        (lambda r: r.update(step_labels=[1, 0, 1]), "step row: step_labels has a 0 at step 1"),
    ],
)
def test_join_names_how_a_pair_differs(edit, reason):
    step, span = rows("span_good_step.jsonl")[0], rows("span_good.jsonl")[0]
    edit(step)
    assert reason in check_join(step, span)


def test_join_text_only_skips_the_labels_but_still_needs_uncut_rows_whole():
    step, span = rows("span_good_step.jsonl")[1], rows("span_good.jsonl")[1]
    assert check_join(step, span, check_labels=False) is None
    step["step_labels"] = [1, 1, 1]
    assert check_join(step, span, check_labels=False) == "no faulty step, yet 3 steps of 4 model_answer pieces"


def test_join_reports_files_of_different_length():
    with pytest.raises(RowError, match="the span file ends here"):
        list(join_step_span(rows("span_good_step.jsonl"), rows("span_good.jsonl")[:5]))
    with pytest.raises(RowError) as e:
        list(join_step_span(rows("span_good_step.jsonl")[:3], rows("span_good.jsonl")))
    assert e.value.index == 3 and "the step file ends here" in e.value.reason


def test_prm_prompt_is_the_card_template():
    row = rows("span_good_step.jsonl")[2]
    assert build_prm_prompt(row["question"], row["steps"]) == (
        "Question: What is 12 / 4 + 1?\n\nSolution:\nWe compute 12 / 4 first.<extra_0>\n\n12 / 4 = 4.<extra_0>"
    )
    assert build_prm_prompt("q", ["  a \n"], step_token="<sep>") == "Question: q\n\nSolution:\na<sep>"


def test_span_stats_on_the_fixture():
    s = span_stats(rows("span_good.jsonl"))
    assert s["rows"] == 7
    assert s["steps"] == 3 + 4 + 4 + 3 + 2 + 2 + 2
    assert s["with_error"] == 5 and s["without_error"] == 2
    assert s["steps_incorrect"] == 1 + 2 + 2 + 1 + 2
    assert s["spans"] == 1 + 1 + 1 + 1 + 3
    assert s["spans_cross_step"] == 2
    assert s["no_hallucinations_literal"] == 1
    # first errors at steps 2, 1, 0, 1, 0 -> mean 0.8, median 1
    assert s["first_error_mean"] == pytest.approx(0.8) and s["first_error_median"] == 1


def test_span_stats_refuses_a_bad_row():
    with pytest.raises(RowError) as e:
        span_stats([*rows("span_good.jsonl"), rows("span_bad.jsonl")[2]])
    assert e.value.index == 7
