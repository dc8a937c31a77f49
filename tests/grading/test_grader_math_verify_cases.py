"""MathGrader against Math-Verify's own test cases: it must agree with math-verify on every one.

``math_verify_cases.jsonl`` holds the 270 (gold, prediction, expected) cases of Math-Verify's test suite
(github.com/huggingface/Math-Verify, MIT licence, commit 5d148cf, version 0.8.0; the installed 0.9.0
passes all of them): every parametrized case of ``tests/test_all.py``, ``test_boxed.py``,
``test_numina_cases.py``, ``test_open_thoughts.py``, ``test_strict.py`` and ``test_yujianll.py``, plus the
one string case of ``test_all.py::test_precision``. Left out: the multiple-choice letter cases
(``test_string_extraction.py``, ``StringExtractionConfig``) and the tests of parse/verify internals.

Each row carries the settings its test ran with, as MathGraderConfig fields: ``compare_strings`` in
``test_all.py`` parses both sides with ``match_types`` (``extraction``) and ``boxed_match_priority=0`` and
verifies with ``precision`` (``float_rounding``), ``strict`` and ``allow_set_relation_comp``;
``test_yujianll.py`` calls ``parse`` / ``verify`` with their defaults. The gold is the grader's reference
and the prediction its response. Before the grader exposed these settings (and while it wrapped every
bare reference in ``$...$``) it agreed on 262 of the 270.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from posttrainlab.grading.math import MathGrader, MathGraderConfig

CASES = [json.loads(line) for line in (Path(__file__).parent / "math_verify_cases.jsonl").read_text().splitlines()]


def _config(settings: dict) -> MathGraderConfig:
    return MathGraderConfig(**{**settings, "extraction": tuple(settings["extraction"])}, timeout=20.0)


@pytest.fixture(scope="module")
def verdicts():
    """The grader's verdict on every case, grading each group of cases that share settings in one call."""
    groups: dict[MathGraderConfig, list[int]] = defaultdict(list)
    for i, case in enumerate(CASES):
        groups[_config(case["settings"])].append(i)
    got: dict[int, bool] = {}
    for config, rows in groups.items():
        with MathGrader(config, workers=2) as grader:
            grades = grader.grade_many([CASES[i]["pred"] for i in rows], [CASES[i]["gold"] for i in rows])
        got.update({i: g.correct for i, g in zip(rows, grades, strict=True)})
    return got


def test_the_table_is_math_verifys_suite():
    assert len(CASES) == 270
    assert {c["expected"] for c in CASES} == {True, False}
    assert all(c["source"].startswith("tests/test_") for c in CASES)


def test_agrees_with_math_verify_on_all_its_cases(verdicts):
    misses = [
        (c["source"], c["gold"], c["pred"][-80:], c["expected"])
        for i, c in enumerate(CASES)
        if verdicts[i] != c["expected"]
    ]
    assert not misses, f"{len(CASES) - len(misses)} of {len(CASES)} agree; misses: {misses}"


@pytest.mark.parametrize(
    ("gold", "pred", "settings", "expected"),
    [
        # a bare reference with a decimal comma is a number, not the set {1, 22}
        ("1,22", "1.22", {"extraction": ("expr",)}, True),
        # precision: 1/3 against 0.3333 is right to 4 decimals, not to 6
        ("$\\frac{1}{3}$", "0.3333$", {"float_rounding": 4}, True),
        ("$\\frac{1}{3}$", "0.3333$", {"float_rounding": 6}, False),
        # strict: variables matter; not strict: matched by position
        ("$f(x)$", "$f(y)$", {"strict": True}, False),
        ("$f(x)$", "$f(y)$", {"strict": False}, True),
        # a set against a relation only when allowed
        ("$x \\in [-2,7]$", "$-2 \\\\le x \\\\le 7$", {"allow_set_relation_comp": False}, False),
        ("$x \\in [-2,7]$", "$-2 \\\\le x \\\\le 7$", {"allow_set_relation_comp": True}, True),
        # LaTeX extraction alone does not read a number split over lines
        ("$9$", "Answer $ \n 9 \n $", {"extraction": ("latex",)}, False),
        ("$9$", "Answer $ \n 9 \n $", {"extraction": ("latex", "expr")}, True),
    ],
)
def test_each_setting_changes_the_verdict_it_names(gold, pred, settings, expected):
    with MathGrader(MathGraderConfig(**settings), workers=1) as grader:
        assert grader.grade(pred, gold).correct is expected
