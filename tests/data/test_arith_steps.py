"""Exact step labels of arith-v1 solutions (data/arith/steps.py)."""

from __future__ import annotations

import random

import pytest

from posttrainlab.data.arith.corrupt import CORRUPTIONS, corrupt
from posttrainlab.data.arith.problems import CATEGORIES, draw
from posttrainlab.data.arith.steps import first_error, parse_question, split_steps, step_labels, step_verdicts
from posttrainlab.grading.arith import ArithGrader


def _problems(n_per_category: int = 40):
    rng, taken = random.Random(7), set()
    return [draw(c, rng, taken) for c in CATEGORIES for _ in range(n_per_category)]


def test_every_template_reads_back_from_its_question():
    for p in _problems():
        q = parse_question(p.prompt)
        assert q == p  # name and item included
        assert first_error(q, split_steps(p.solution)) == -1


def test_first_error_agrees_with_the_grader_on_corruptions():
    grader, rng = ArithGrader(), random.Random(3)
    checked = 0
    for p in _problems(10):
        for kind in CORRUPTIONS:
            try:
                bad = corrupt(p, kind, rng)
            except ValueError:
                continue
            k = first_error(p, split_steps(bad))
            assert (k == -1) == grader.grade(bad, p.answer).correct, (kind, bad)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    ("steps", "verdicts", "first"),
    [
        (["12 * 23 = 276", "276 + 6 = 282", "Answer: 282"], [True, True, True], -1),
        (["23 * 12 = 276", "6 + 276 = 282", "Answer: 282"], [True, True, True], -1),  # + and * commute
        (["12 * 23 = 276", "276 + 6 = 283", "Answer: 283"], [True, False, False], 1),
        (["12 + 6 = 18", "18 * 23 = 414", "Answer: 414"], [False, False, False], 0),  # true claim, wrong operands
        (["12 * 23 = 276", "276 + 6 = 282"], [True, True], 1),  # missing answer line: last step gets the 0
        (["Answer: 282"], [True], -1),
        (["12 * 23 = 276", "276 + 6 = 282", "Answer: 282", "done"], [True, True, True, False], 3),
        (["12 * 23 = 276", "276 + 6 = 282", "Answer: 282.0"], [True, True, False], 2),
    ],
)
def test_hand_checked_verdicts(steps, verdicts, first):
    p = parse_question(
        "Finley packs 12 boxes with 23 cookies in each box and has 6 cookies left over. "
        "How many cookies does Finley have in total?"
    )
    assert p is not None and p.answer == 282
    assert step_verdicts(p, steps) == verdicts
    assert first_error(p, steps) == first
    kept, labels = step_labels(p, steps)
    assert labels == ([1] * len(steps) if first < 0 else [1] * first + [0])
    assert kept == steps[: len(labels)]


def test_subtraction_does_not_commute():
    p = parse_question("What is 375 - 260?")
    assert step_verdicts(p, ["260 - 375 = -115"]) == [False]
