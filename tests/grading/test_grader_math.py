"""MathGrader against tables of (model output, reference, expected outcome), plus its pool and timeout.

One grader (one pool of two workers) serves the whole module; starting a pool costs about a second.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import threading
import time

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.grading import get_grader
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.grading.base import Grade
from posttrainlab.grading.math import MathGrader, reference_text

#: Graded against ``5`` this makes math-verify's numeric check evaluate 9**(9**9) = 9**387420489
#: (sympy ``Integer._eval_power``, in ``math_verify.grader.sympy_numeric_eq``): still running after
#: 600 s on one core with math-verify's own timeouts off, as they must be off outside the main thread.
POWER_TOWER = "Each step multiplies the exponent, so the answer is $\\boxed{9^{9^{9}}}$."

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def grader():
    with MathGrader(timeout=TIMEOUT_S, workers=2) as g:
        yield g


def grade_table(grader, table):
    grades = grader.grade_many([row[0] for row in table], [row[1] for row in table])
    return [(row, g) for row, g in zip(table, grades, strict=True)]


CORRECT = [
    # (model output, reference, what math-verify extracted)
    ("The probability is $\\frac{1}{2}$.", "\\frac{1}{2}", "\\frac{1}{2}"),
    ("Therefore, the final answer is $\\boxed{\\dfrac{3}{4}}$.", "\\frac{3}{4}", "\\frac{3}{4}"),
    ("Adding up: $12 + 30 = 42$. The final answer is $\\boxed{42}$.", 42, "42"),
    ("Adding up: $12 + 30 = 42$. The final answer is $\\boxed{42}$.", "42", "42"),
    ("Final Answer: The final answer is $5$. I hope it is correct.", 5, "5"),
    ("The answer is 7", 7, "7"),
    ("The answer is \\boxed{1,000}", "1000", "1,000"),
    # decimals against fractions, both ways
    ("So we get $x = 0.75$, i.e. $\\boxed{0.75}$", "\\frac{3}{4}", "0.75"),
    ("So $x = \\boxed{-\\frac{5}{2}}$", "-2.5", "-\\frac{5}{2}"),
    ("The answer is $\\boxed{0.3333333}$", "\\frac{1}{3}", "0.3333333"),
    ("So the probability is $\\boxed{\\dfrac{1}{2}}$.", 0.5, "\\frac{1}{2}"),
    ("The final answer is $\\boxed{50\\%}$", "\\frac{1}{2}", "50\\%"),
    # the reference already marked up
    ("The answer is $\\boxed{\\frac{1}{2}}$", "$\\frac{1}{2}$", "\\frac{1}{2}"),
    ("The answer is $\\boxed{\\frac{1}{2}}$", "\\boxed{0.5}", "\\frac{1}{2}"),
    # symbolic equality
    ("\\boxed{\\sqrt{12}}", "2\\sqrt{3}", "\\sqrt{12}"),
    ("The final answer is $\\boxed{x^2 + 2x + 1}$", "(x+1)^2", "x^2 + 2x + 1"),
    ("The final answer is $\\boxed{\\pi}$", "\\pi", "\\pi"),
    ("The area is $\\boxed{12\\text{ cm}^2}$", "12", "12"),
    ("\\[ \\boxed{\\text{Monday}} \\]", "\\text{Monday}", "\\text{Monday}"),
    # sets, intervals, tuples
    ("The solutions are $x \\in \\boxed{(1, 2]}$", "(1,2]", "(1, 2]"),
    ("The roots are $\\boxed{\\{1, 2\\}}$", "\\{2, 1\\}", "\\{1, 2\\}"),
    ("The roots are $\\boxed{1, 2}$", "\\{1,2\\}", "1, 2"),
    ("The intersection point is $\\boxed{(3, -1)}$", "(3,-1)", "(3, -1)"),
]

WRONG = [
    ("The final answer is $\\boxed{41}$.", 42, "41"),
    ("Final Answer: The final answer is $6$. I hope it is correct.", 5, "6"),
    ("\\boxed{2\\sqrt{2}}", "2\\sqrt{3}", "2\\sqrt{2}"),
    ("The final answer is $\\boxed{3.14}$", "\\pi", "3.14"),
    # math-verify rounds to the reference's precision: 1/3 is not 0.333
    ("The answer is $\\boxed{\\frac{1}{3}}$", "0.333", "\\frac{1}{3}"),
    ("The solutions are $x \\in \\boxed{[1, 2]}$", "(1,2]", "[1, 2]"),
    ("The roots are $\\boxed{1, 3}$", "\\{1,2\\}", "1, 3"),
    ("The intersection point is $\\boxed{(-1, 3)}$", "(3,-1)", "(-1, 3)"),  # tuples are ordered
    ("\\boxed{B}", "C", "B"),
]

MISSING = [
    ("", "1"),
    ("   \n", "1"),
    ("I don't know.", "1"),
    ("I'm not sure how to solve this problem.", "\\frac{1}{2}"),
    ("The answer is $\\boxed{}$", "1"),
]


def test_correct(grader):
    for (response, answer, parsed), grade in grade_table(grader, CORRECT):
        assert grade == Grade(True, "correct", parsed), (response, answer)


def test_wrong_answer(grader):
    for (response, answer, parsed), grade in grade_table(grader, WRONG):
        assert grade == Grade(False, "wrong_answer", parsed), (response, answer)


def test_missing_answer(grader):
    for (response, answer), grade in grade_table(grader, MISSING):
        assert grade == Grade(False, "missing_answer", None), (response, answer)


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ("0.5", "$0.5$"),
        (0.5, "$0.5$"),
        (42, "$42$"),
        (" (1, 2] ", "$(1, 2]$"),
        ("2\\sqrt{3}", "$2\\sqrt{3}$"),
        ("\\$5", "$\\$5$"),  # an escaped dollar is not markup
        ("$\\frac{1}{2}$", "$\\frac{1}{2}$"),
        ("\\boxed{3}", "\\boxed{3}"),
        ("\\(x+1\\)", "\\(x+1\\)"),
    ],
)
def test_reference_text(answer, text):
    assert reference_text(answer) == text


def test_grade_single_item(grader):
    assert grader.grade("So $x = \\boxed{4}$.", "4") == Grade(True, "correct", "4")


def test_grade_is_plain_data(grader):
    grade = grader.grade("The answer is $\\boxed{\\frac{1}{2}}$", "0.5")
    assert isinstance(grade.parsed, str)
    assert pickle.loads(pickle.dumps(grade)) == grade
    assert json.loads(json.dumps(dataclasses.asdict(grade))) == dataclasses.asdict(grade)


def test_grade_many_keeps_input_order(grader):
    # A slower item first (a factorial with ~450k digits), so later items finish before it.
    responses = ["$\\boxed{100000!}$"] + [f"The answer is $\\boxed{{{i}}}$." for i in range(1, 16)]
    answers = [1] + [i if i % 3 else i + 1 for i in range(1, 16)]
    grades = grader.grade_many(responses, answers)
    assert grades[0] == Grade(False, "wrong_answer", "100000!")
    for i, grade in enumerate(grades[1:], start=1):
        assert grade.parsed == str(i)
        assert grade.correct is bool(i % 3)


def test_grade_many_empty(grader):
    assert grader.grade_many([], []) == []


def test_grade_many_length_mismatch(grader):
    with pytest.raises(ValueError, match="2 responses but 1 answers"):
        grader.grade_many(["1", "2"], ["1"])


@pytest.mark.parametrize("answer", ["", "   ", "\\boxed{}", "\\text{}"])
def test_unparseable_reference_is_bad_input(grader, answer):
    with pytest.raises(BadInput, match="reference answer"):
        grader.grade("The answer is $\\boxed{1}$", answer)


def test_pathological_item_times_out_and_the_pool_keeps_working(grader):
    responses = [
        POWER_TOWER,
        "The answer is $\\boxed{\\frac{1}{2}}$",
        POWER_TOWER,  # two at once: both workers are killed and replaced
        "So $x = 3$.",
        "The final answer is $\\boxed{41}$.",
    ]
    answers = [5, "0.5", 5, "3", 42]
    start = time.monotonic()
    grades = grader.grade_many(responses, answers)
    elapsed = time.monotonic() - start
    assert grades == [
        Grade(False, "timeout", None),
        Grade(True, "correct", "\\frac{1}{2}"),
        Grade(False, "timeout", None),
        Grade(True, "correct", "x = 3"),
        Grade(False, "wrong_answer", "41"),
    ]
    # A hang check, not a benchmark: each killed item would otherwise run for over ten minutes.
    assert elapsed < 15 * TIMEOUT_S
    # the replacement workers grade as before
    assert grader.grade("$\\boxed{7}$", 7) == Grade(True, "correct", "7")


def test_grades_from_a_non_main_thread(grader):
    # math-verify's own signal.alarm timeouts raise ValueError here; the pool's do not.
    results = []
    thread = threading.Thread(target=lambda: results.append(grader.grade("$\\boxed{2}$", 2)))
    thread.start()
    thread.join(timeout=60)
    assert results == [Grade(True, "correct", "2")]


def test_close_then_reuse_starts_a_new_pool():
    grader = MathGrader(timeout=TIMEOUT_S, workers=1)
    assert grader._pool is None  # lazy: constructing a grader starts nothing
    assert grader.grade("$\\boxed{2}$", 2).correct
    grader.close()
    grader.close()  # twice is fine
    assert grader._pool is None
    assert grader.grade("$\\boxed{2}$", 3).outcome == "wrong_answer"
    grader.close()


@pytest.mark.parametrize(("kwargs", "message"), [({"timeout": 0}, "timeout"), ({"workers": 0}, "workers")])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MathGrader(**kwargs)


def test_get_grader():
    assert isinstance(get_grader("arith"), ArithGrader)
    math_grader = get_grader("math", timeout=3.0, workers=1)
    assert isinstance(math_grader, MathGrader)
    assert (math_grader.timeout, math_grader.workers) == (3.0, 1)
    math_grader.close()


def test_get_grader_unknown_name_is_bad_input():
    with pytest.raises(BadInput, match="unknown grader 'sympy'") as info:
        get_grader("sympy")
    assert info.value.exit_code == 2
