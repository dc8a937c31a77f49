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
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.errors import BadInput
from posttrainlab.grading import get_grader
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.grading.base import OUTCOMES, Grade
from posttrainlab.grading.math import MathGrader, MathGraderConfig, reference_text

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
        # plain text that LaTeX would misread stays bare (math-verify reads a bare gold as a number)
        ("1,22", "1,22"),  # in $...$ the set {1, 22}
        ("1 000", "1 000"),  # in $...$ 1*000 = 0
        ("18 dollars", "18 dollars"),  # in $...$ 18*d*o*l*l*a*r*s
        ("1, 2", "$1, 2$"),  # a list: bare, math-verify would read only the 2
        ("(1,2]", "$(1,2]$"),
        ("2x", "$2x$"),  # one letter is a variable
        ("sin 30", "$sin 30$"),  # a function, not a unit
        ("x = 3", "$x = 3$"),
        pytest.param(10**5000, f"${'1' + '0' * 5000}$", id="int-past-4300-digits"),  # str() of it raises
    ],
)
def test_reference_text(answer, text):
    assert reference_text(answer) == text


@pytest.mark.parametrize("response", [None, b"$\\boxed{1}$", 1, ["$\\boxed{1}$"]])
def test_a_response_that_is_not_text_gets_an_outcome(grader, response):
    """None is no answer; bytes, numbers or message lists are not text and never read as an answer."""
    expected = Grade(False, "missing_answer" if response is None else "malformed", None)
    assert grader.grade_many([response, "$\\boxed{1}$"], [1, 1]) == [expected, Grade(True, "correct", "1")]


def test_numbers_past_the_int_digit_limit_are_read():
    """Python refuses str <-> int conversions of more than 4,300 digits; inside the workers the limit is
    lifted (the pool's timeout bounds the cost), so a long number is graded, not missed."""
    with MathGrader(timeout=10.0, workers=1) as g:
        assert g.grade(f"The answer is {'9' * 5000}", "9" * 5000).outcome == "correct"
        assert g.grade(f"The answer is {'9' * 5000}", 5).outcome == "wrong_answer"
        assert g.grade("The answer is 5", 10**5000).outcome == "wrong_answer"


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


@pytest.mark.parametrize("answer", ["", "   ", "\\boxed{}", "\\text{}", None, True, float("nan"), float("inf")])
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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "timeout"),
        ({"workers": 0}, "workers"),
        ({"float_rounding": -1}, "float_rounding"),
        ({"float_rounding": 2.5}, "float_rounding"),
        ({"numeric_precision": 0}, "numeric_precision"),
        ({"strict": "yes please"}, "strict"),
        ({"extraction": ("latex", "sympy")}, "extraction"),
        ({"extraction": ()}, "extraction"),
        ({"precision": 4}, "unknown math grader setting 'precision'"),
    ],
)
def test_bad_arguments(kwargs, message):
    """A bad setting is the user's to fix (it comes from a config or --grader): BadInput, exit 2."""
    with pytest.raises(BadInput, match=message):
        MathGrader(**kwargs)


def test_config_object_and_keyword_settings():
    config = MathGraderConfig(float_rounding=2, strict=False)
    grader = MathGrader(config, workers=1, timeout=3.0)
    assert grader.config == MathGraderConfig(float_rounding=2, strict=False, timeout=3.0)
    assert (grader.timeout, grader.workers) == (3.0, 1)
    assert MathGrader().config == MathGraderConfig()  # math-verify's own defaults


def test_get_grader():
    assert isinstance(get_grader("arith"), ArithGrader)
    math_grader = get_grader("math", timeout=3.0, workers=1)
    assert isinstance(math_grader, MathGrader)
    assert (math_grader.timeout, math_grader.workers) == (3.0, 1)
    math_grader.close()


def test_get_grader_reads_settings_from_the_spec():
    """Where a recipe names its grader by a string (``posttrain label mc --grader``, ``MCConfig.grader``,
    ``evaluate_policy(grader=...)``), the string carries the settings: ``math:KEY=VALUE,...``."""
    grader = get_grader("math:float_rounding=2,strict=false,extraction=latex+expr", timeout=3.0)
    assert grader.config == MathGraderConfig(float_rounding=2, strict=False, extraction=("latex", "expr"), timeout=3.0)
    assert get_grader("math:allow_set_relation_comp=true").config.allow_set_relation_comp is True
    assert get_grader("math", float_rounding=4).config.float_rounding == 4


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("math:float_rounding=two", "float_rounding"),
        ("math:strict=maybe", "strict"),
        ("math:float_rounding", "KEY=VALUE"),
        ("math:workers=2", "unknown math grader setting 'workers'"),
        ("arith:strict=false", "arith grader takes no settings"),
    ],
)
def test_get_grader_bad_spec_is_bad_input(spec, message):
    with pytest.raises(BadInput, match=message):
        get_grader(spec)


def test_get_grader_unknown_name_is_bad_input():
    with pytest.raises(BadInput, match="unknown grader 'sympy'") as info:
        get_grader("sympy")
    assert info.value.exit_code == 2


any_response = st.one_of(
    st.none(),
    st.text(max_size=120),
    st.text(alphabet="$\\{}^_()[],.=+-*/0123456789 xboxedfrac", max_size=80),
    st.integers(1, 6000).map(lambda n: f"The answer is $\\boxed{{{'7' * n}}}$"),
)


@settings(max_examples=15, deadline=None)
@given(st.lists(any_response, min_size=1, max_size=12))
def test_every_response_gets_an_outcome(grader, responses):
    """Arbitrary text, None and very long numbers: a grade each, in order, never an exception."""
    grades = grader.grade_many(responses, ["7"] * len(responses))
    assert len(grades) == len(responses)
    for grade in grades:
        assert grade.outcome in OUTCOMES
        assert grade.correct is (grade.outcome == "correct")
        assert grade.parsed is None or isinstance(grade.parsed, str)
