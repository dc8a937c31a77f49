"""Math-Shepherd: list form <-> ки text (lossless), <-> step view (cut), and the Math-Shepherd-614 counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.data.formats.math_shepherd import (
    as_list_form,
    math_shepherd_stats,
    ms_to_step,
    parse_ki,
    step_to_ms,
    to_ki,
    validate_math_shepherd,
)
from posttrainlab.data.formats.schema import RowError

ASSETS = Path(__file__).parents[2] / "assets" / "formats"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_ki_text_reads_as_the_list_fixture_and_back():
    ki, lists = rows("ms_ki.jsonl"), rows("ms_list.jsonl")
    assert [parse_ki(r["input"], r["label"]) for r in ki] == lists
    assert [to_ki(r) for r in lists] == ki


def test_both_encodings_validate_and_give_the_same_stats():
    assert list(validate_math_shepherd(rows("ms_ki.jsonl"))) == []
    assert list(validate_math_shepherd(rows("ms_list.jsonl"))) == []
    assert math_shepherd_stats(rows("ms_ki.jsonl")) == math_shepherd_stats(rows("ms_list.jsonl"))


def test_to_step_cuts_at_the_first_false_and_keeps_the_rest_of_nothing():
    """Lossy: row 1 has [True, False, True]; the step view keeps two steps and drops the later True."""
    lists = rows("ms_list.jsonl")
    assert [ms_to_step(r) for r in lists] == rows("ms_step.jsonl")
    assert [ms_to_step(r) for r in rows("ms_ki.jsonl")] == rows("ms_step.jsonl")
    kept = ms_to_step(lists[1])
    assert kept["steps"] == lists[1]["completions"][:2] and kept["step_labels"] == [1, 0]


def test_step_to_math_shepherd_is_lossless():
    for step in rows("ms_step.jsonl") + rows("span_good_step.jsonl"):
        assert ms_to_step(step_to_ms(step)) == step


def test_bad_rows_each_give_their_reason():
    bad = rows("ms_bad.jsonl")
    assert list(validate_math_shepherd(bad)) == [(i, row["expect"]) for i, row in enumerate(bad)]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"prompt": "Q? ", "completions": ["Step 1: a"], "labels": [True]}, "would not read back"),
        ({"prompt": "Q?", "completions": ["First: a"], "labels": [True]}, "would not read back"),
        ({"prompt": "Q? Step 1: x", "completions": ["Step 1: a"], "labels": [True]}, "would not read back"),
        ({"prompt": "Q?", "completions": ["Step 1: a ки"], "labels": [True]}, "holds ки"),
        ({"prompt": "Q?", "completions": ["Step 1: a"], "labels": [1]}, "expected true or false"),
    ],
)
def test_to_ki_refuses_rows_it_cannot_write_exactly(row, reason):
    with pytest.raises(ValueError, match=reason):
        to_ki(row)


def test_lowercase_step_marker_is_read_like_trl():
    got = parse_ki("Q? step 1: a ки\nstep 2: b ки", "Q? step 1: a +\nstep 2: b -")
    assert got == {"prompt": "Q?", "completions": ["step 1: a", "step 2: b"], "labels": [True, False]}


STEP_TEXT = st.text(alphabet="abc xyz=+-?.0123456789", min_size=1, max_size=20).map(str.strip).filter(bool)


@settings(max_examples=100, deadline=None)
@given(
    st.text(alphabet="abc xyz?.0123", max_size=30).map(str.strip).filter(lambda s: "tep 1:" not in s),
    st.lists(st.tuples(STEP_TEXT, st.booleans()), min_size=1, max_size=6),
)
def test_list_to_ki_to_list_is_lossless(prompt, steps):
    row = {
        "prompt": prompt,
        "completions": [f"Step {i + 1}: {text}" for i, (text, _) in enumerate(steps)],
        "labels": [ok for _, ok in steps],
    }
    ki = to_ki(row)
    assert parse_ki(ki["input"], ki["label"]) == row
    assert as_list_form(ki) == row


def card_rows() -> list[dict]:
    """614 rows with the Math-Shepherd-614 card's counts: 1,794 correct and 1,395 incorrect steps,
    334 rows with at least one incorrect step and 280 with none."""
    out = []
    for i in range(280):  # 280 clean rows, 3 correct steps each: 840 correct steps
        out.append({"prompt": f"q{i}", "completions": ["s"] * 3, "labels": [True] * 3})
    # 334 rows with errors: 1,395 = 334 * 4 + 59 incorrect; 954 = 334 * 2 + 286 correct steps left
    for i in range(334):
        bad = 5 if i < 59 else 4
        good = 3 if i < 286 else 2
        labels = [True] * good + [False] * bad
        out.append({"prompt": f"e{i}", "completions": ["s"] * len(labels), "labels": labels})
    return out


def test_stats_report_the_math_shepherd_614_card_numbers():
    s = math_shepherd_stats(card_rows())
    assert s["rows"] == 614
    assert (s["steps_correct"], s["steps_incorrect"]) == (1794, 1395)
    assert (s["with_error"], s["without_error"]) == (334, 280)


def test_stats_on_the_tiny_fixture():
    s = math_shepherd_stats(rows("ms_list.jsonl"))
    assert (s["rows"], s["steps"], s["steps_correct"], s["steps_incorrect"]) == (3, 7, 4, 3)
    assert (s["with_error"], s["first_error_mean"]) == (2, 0.5)


def test_stats_refuse_a_bad_row():
    with pytest.raises(RowError) as e:
        math_shepherd_stats([*rows("ms_list.jsonl"), rows("ms_bad.jsonl")[0]])
    assert e.value.index == 3
