"""Polaris MC value rows: checks, traces (group/ungroup), split disjointness, and the card's value table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.data.formats.mc_value import (
    STATS_KEYS,
    check_mc_row,
    group_traces,
    mc_stats,
    split_overlap,
    ungroup_traces,
    validate_mc,
)
from posttrainlab.data.formats.schema import RowError

ASSETS = Path(__file__).parents[2] / "assets" / "formats"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_good_fixture_validates():
    assert list(validate_mc(rows("mc_value.jsonl"))) == []


def test_bad_rows_each_give_their_reason():
    """V out of range, correct != (V >= 0.5), step_idx > num_steps, and the cross-row trace checks."""
    bad = rows("mc_value_bad.jsonl")
    expected = [(i, row["expect"]) for i, row in enumerate(bad) if row["expect"] is not None]
    assert list(validate_mc(bad)) == expected


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        ({"correct": 1}, "correct is 1, expected true or false"),
        ({"reward": True}, "reward is True, expected a number"),
        ({"reward": float("nan")}, "reward is nan, expected a number"),
        ({"step_idx": 1.0}, "step_idx is 1.0, expected an integer"),
        ({"id": 3}, "id is int, expected a string"),
        ({"messages": [{"role": "user"}]}, "messages[0] is not an object with string role and content"),
        ({"messages": []}, "messages is not a non-empty list of chat turns"),
        ({"enable_thinking": "no"}, "enable_thinking is 'no', expected true or false"),
        ({"reward": 1, "correct": True}, None),  # an integer V is fine
        ({"step_idx": 2, "num_steps": 2}, None),  # the full trace is a prefix too
        ({"value_source": "measured"}, None),  # optional (posttrain label mc writes it)
        ({"value_source": "inferred"}, None),
        ({"value_source": None}, None),  # not recorded, like an absent column
        ({"value_source": "guessed"}, "value_source is 'guessed', expected 'measured' or 'inferred'"),
        ({"value_source": 1}, "value_source is 1, expected 'measured' or 'inferred'"),
    ],
)
def test_row_checks(edit, reason):
    row = rows("mc_value.jsonl")[0] | edit
    assert check_mc_row(row) == reason


def test_traces_hold_a_value_per_step():
    traces = list(group_traces(rows("mc_value.jsonl")))
    assert [(t["id"], t["sample_index"], t["step_idx"], t["values"]) for t in traces] == [
        ("p1", 0, [0, 1, 2], [0.75, 0.5, 1.0]),
        ("p1", 1, [0, 1], [0.25, 0.0]),
        ("p2", 0, [0, 1, 2], [0.125, 0.875, 0.0]),
    ]
    assert traces[0]["num_steps"] == 2 and traces[0]["source"] == "polaris"


def test_group_then_ungroup_is_the_same_file():
    original = rows("mc_value.jsonl")
    assert list(ungroup_traces(group_traces(original))) == original


def test_scattered_traces_need_unsorted_and_come_back_grouped():
    original = rows("mc_value.jsonl")
    scattered = [original[0], original[5], *original[1:5], *original[6:]]
    with pytest.raises(RowError) as e:
        list(group_traces(scattered))
    assert e.value.index == 2 and "not contiguous" in e.value.reason
    back = list(ungroup_traces(group_traces(scattered, contiguous=False)))
    # the same rows, grouped by trace in order of first appearance: (p1, 0), (p2, 0), (p1, 1)
    assert back == [original[i] for i in (0, 1, 2, 5, 6, 7, 3, 4)]


@pytest.mark.parametrize(
    ("edit_index", "edit", "reason"),
    [
        (1, {"num_steps": 3}, "num_steps 3 differs from 2 earlier in trace ('p1', 0)"),
        (1, {"step_idx": 0}, "step_idx 0 repeats within trace ('p1', 0)"),
        (1, {"source": "other"}, "source 'other' differs from 'polaris' earlier in trace ('p1', 0)"),
        (1, {"note": "x"}, "key(s) note are not Polaris MC columns: a trace would drop them"),
        (1, {"reward": 2.0}, "reward 2.0 is outside [0, 1]"),
    ],
)
def test_grouping_refuses_rather_than_drops(edit_index, edit, reason):
    data = rows("mc_value.jsonl")
    data[edit_index] = data[edit_index] | edit
    with pytest.raises(RowError) as e:
        list(group_traces(data))
    assert (e.value.index, e.value.reason) == (edit_index, reason)


def test_value_source_survives_grouping_and_must_be_on_every_row_of_a_trace():
    data = rows("mc_value.jsonl")
    for i, row in enumerate(data):
        row["value_source"] = "inferred" if i % 2 else "measured"
    traces = list(group_traces(data))
    assert traces[0]["value_source"] == ["measured", "inferred", "measured"]
    assert list(ungroup_traces(traces)) == data
    assert "value_source" not in next(group_traces(rows("mc_value.jsonl")))  # older files: no column
    data[1].pop("value_source")
    with pytest.raises(RowError) as e:
        list(group_traces(data))
    assert (e.value.index, e.value.reason) == (1, "value_source is missing here but present earlier in trace ('p1', 0)")


def test_splits_disjoint_by_id():
    train = rows("mc_value.jsonl")
    assert split_overlap({"train": train, "validation": rows("mc_value_val.jsonl")}) == {}
    assert split_overlap({"train": train, "validation": rows("mc_value_val_overlap.jsonl")}) == {
        "p2": ["train", "validation"]
    }


def test_stats_on_the_fixture():
    s = mc_stats(rows("mc_value.jsonl"))
    assert list(s) == list(STATS_KEYS)
    values = [0.75, 0.5, 1.0, 0.25, 0.0, 0.125, 0.875, 0.0]
    assert s["rows"] == 8
    assert s["v_eq_0"] == 2 / 8 and s["v_eq_1"] == 1 / 8 and s["v_mid"] == 5 / 8
    assert s["v_10_90"] == 5 / 8  # 0.75, 0.5, 0.25, 0.125, 0.875
    assert s["correct"] == 4 / 8  # 0.75, 0.5, 1.0, 0.875
    assert s["mean_v"] == pytest.approx(sum(values) / 8)


def card_rows() -> list[dict]:
    """1,000 rows with the Polaris MC card's value table.

    The card's buckets are rounded (16.6 + 53.9 + 29.4 = 99.9%); 166 + 539 + 295 rows give
    16.6 / 53.9 / 29.5%, V in [0.1, 0.9] 17.4% (95 + 79 rows), V >= 0.5 75.5% (539 + 121 + 95) and mean
    V 0.737 (hand-computed: 539 + 121 * 0.95 + 95 * 0.5 + 79 * 0.45 = 737).
    """
    base = rows("mc_value.jsonl")[0]
    values = [0.0] * 166 + [1.0] * 539 + [0.95] * 121 + [0.5] * 95 + [0.45] * 79
    return [base | {"reward": v, "correct": v >= 0.5, "id": f"p{i}"} for i, v in enumerate(values)]


def test_stats_reproduce_the_card_table():
    s = mc_stats(card_rows())
    assert s["rows"] == 1000
    assert (s["v_eq_0"], s["v_eq_1"], s["v_mid"]) == (0.166, 0.539, 0.295)
    assert (s["v_10_90"], s["correct"]) == (0.174, 0.755)
    assert s["mean_v"] == pytest.approx(0.737)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(1, 4), st.floats(0, 1)),
        min_size=1,
        max_size=12,
        unique_by=lambda t: (t[0], t[1]),
    )
)
def test_group_ungroup_round_trip_property(traces):
    base = rows("mc_value.jsonl")[0]
    data = []
    for pid, sample, n, v in traces:
        for idx in range(n + 1):
            data.append(base | {"id": f"p{pid}", "sample_index": sample, "num_steps": n, "step_idx": idx})
            data[-1] |= {"reward": v, "correct": v >= 0.5}
    assert list(validate_mc(data)) == []
    assert list(ungroup_traces(group_traces(data))) == data
