"""The step view: its invariant, the cut at the first error, and its stats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.data.formats.schema import RowError
from posttrainlab.data.formats.stats import histogram_median
from posttrainlab.data.formats.step import (
    check_step_labels,
    cut_at_first_error,
    first_error,
    step_stats,
    validate_step,
)

ASSETS = Path(__file__).parents[2] / "assets" / "formats"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_bad_step_rows_each_give_their_reason():
    bad = rows("step_bad.jsonl")
    assert list(validate_step(bad)) == [(i, row["expect"]) for i, row in enumerate(bad)]


@pytest.mark.parametrize("name", ["span_good_step.jsonl", "ms_step.jsonl", "pb_step.jsonl"])
def test_good_step_fixtures_validate(name):
    assert list(validate_step(rows(name))) == []


@pytest.mark.parametrize(
    ("labels", "ok"),
    [([1], True), ([0], True), ([1, 1, 0], True), ([1, 1, 1], True), ([1, 0, 1], False), ([0, 0], False)],
)
def test_no_zero_or_one_zero_last(labels, ok):
    assert (check_step_labels(labels) is None) is ok


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_cut_keeps_a_prefix_that_satisfies_the_invariant(labels):
    steps = [f"s{i}" for i in range(len(labels))]
    kept_steps, kept = cut_at_first_error(steps, labels)
    assert check_step_labels(kept) is None
    assert kept_steps == steps[: len(kept)]
    assert kept == [int(x) for x in labels[: len(kept)]]
    k = first_error(labels)
    assert len(kept) == (len(labels) if k is None else k + 1)
    assert cut_at_first_error(kept_steps, kept) == (kept_steps, kept)  # idempotent: a step row is already cut


def test_cut_needs_one_label_per_step():
    with pytest.raises(ValueError, match="2 steps but 1 labels"):
        cut_at_first_error(["a", "b"], [1])


def test_step_stats_on_the_fixture():
    s = step_stats(rows("span_good_step.jsonl"))
    assert (s["rows"], s["steps"], s["steps_min"], s["steps_max"]) == (7, 14, 1, 3)
    assert (s["with_error"], s["without_error"]) == (5, 2)
    assert s["error_share"] == pytest.approx(5 / 7)
    assert s["first_error_mean"] == pytest.approx((2 + 1 + 0 + 1 + 0) / 5)
    assert s["first_error_median"] == 1


def test_step_stats_of_an_empty_file():
    s = step_stats([])
    assert s["rows"] == 0 and s["error_share"] is None and s["first_error_median"] is None


def test_step_stats_refuses_a_zero_in_the_middle():
    with pytest.raises(RowError) as e:
        step_stats(rows("step_bad.jsonl"))
    assert e.value.index == 0 and "not the last step" in e.value.reason


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=30))
def test_histogram_median_is_the_median(values):
    from collections import Counter
    from statistics import median

    assert histogram_median(Counter(values)) == median(values)
