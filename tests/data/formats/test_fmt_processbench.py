"""ProcessBench rows and PRM800K-style ratings: checks and conversions to and from the step view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.data.formats.processbench import (
    flatten_prm800k,
    pb_to_step,
    processbench_stats,
    ratings_to_pb,
    ratings_to_step,
    step_to_pb,
    validate_processbench,
)

ASSETS = Path(__file__).parents[2] / "assets" / "formats"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("name", ["pb.jsonl", "ratings.jsonl", "prm800k.jsonl"])
def test_good_fixtures_validate(name):
    assert list(validate_processbench(rows(name))) == []


def test_bad_rows_each_give_their_reason():
    bad = rows("pb_bad.jsonl")
    assert list(validate_processbench(bad)) == [(i, row["expect"]) for i, row in enumerate(bad)]


def test_to_step_keeps_steps_up_to_the_label():
    """Lossy: steps after the earliest wrong one, and id/generator/final_answer_correct, are dropped."""
    assert [pb_to_step(r) for r in rows("pb.jsonl")] == rows("pb_step.jsonl")


def test_step_to_processbench_is_lossless():
    for step in rows("pb_step.jsonl") + rows("span_good_step.jsonl") + rows("ms_step.jsonl"):
        assert pb_to_step(step_to_pb(step)) == step


def test_processbench_round_trip_keeps_the_label_and_the_kept_steps():
    for pb in rows("pb.jsonl"):
        back = step_to_pb(pb_to_step(pb))
        assert back["label"] == pb["label"] and back["problem"] == pb["problem"]
        kept = len(pb["steps"]) if pb["label"] == -1 else pb["label"] + 1
        assert back["steps"] == pb["steps"][:kept]


@pytest.mark.parametrize(
    ("neutral", "labels", "pb_label"),
    [(1, [1, 1, 0], 2), (0, [1, 0], 1)],
)
def test_ratings_with_neutral_as_sound_or_as_error(neutral, labels, pb_label):
    flat = rows("ratings.jsonl")[0]  # ratings [1, 0, -1, 1]
    step = ratings_to_step(flat, neutral)
    assert step["step_labels"] == labels and step["steps"] == flat["steps"][: len(labels)]
    assert ratings_to_pb(flat, neutral)["label"] == pb_label
    assert ratings_to_pb(flat, neutral)["steps"] == flat["steps"]  # ProcessBench keeps every step


def test_prm800k_records_flatten_to_the_flat_ratings():
    nested = rows("prm800k.jsonl")
    assert [flatten_prm800k(r) for r in nested] == [
        {
            "problem": "What is 9 - 4 + 2?",
            "steps": ["9 - 4 = 5.", "Now add 2.", "5 + 2 = 8."],
            "ratings": [1, 0, -1],
        },
        {"problem": "What is 3 + 3?", "steps": ["3 + 3 = 6.", "The answer is 6."], "ratings": [1, 1]},
    ]
    assert [pb_to_step(r) for r in nested] == [
        {
            "question": "What is 9 - 4 + 2?",
            "steps": ["9 - 4 = 5.", "Now add 2.", "5 + 2 = 8."],
            "step_labels": [1, 1, 0],
        },
        {"question": "What is 3 + 3?", "steps": ["3 + 3 = 6.", "The answer is 6."], "step_labels": [1, 1]},
    ]


def test_stats():
    s = processbench_stats(rows("pb.jsonl"))
    assert (s["rows"], s["steps"], s["with_error"], s["first_error_mean"]) == (3, 7, 2, 0.5)
    s = processbench_stats(rows("ratings.jsonl") + rows("prm800k.jsonl"))
    assert (s["rows"], s["with_error"], s["first_error_median"]) == (4, 2, 2.0)
