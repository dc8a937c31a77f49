"""ArithGrader against tables of (response, reference, expected grade), from arith-v1-style outputs.

The rules under test are the module docstring of ``posttrainlab.grading.arith``: the last non-empty
line must be ``Answer: <integer>``; anything else that starts a line with ``answer:`` is malformed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.errors import BadInput
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.grading.base import OUTCOMES, Grade

GRADER = ArithGrader()

CORRECT = [
    ("349 - 209 = 140\nAnswer: 140", 140),
    ("Answer: 140", 140),
    ("17 * 3 = 51\n51 + 4 = 55\nAnswer: 55", 55),
    ("12 - 30 = -18\nAnswer: -18", -18),
    ("5 - 5 = 0\nAnswer: 0", 0),
    ("Answer: 0140", 140),  # leading zero: still a bare integer
    ("Answer: 123456789012", 123456789012),
]

WRONG = [
    ("349 - 209 = 130\nAnswer: 130", 140, 130),
    ("12 - 30 = 18\nAnswer: 18", -18, 18),
    ("Answer: -140", 140, -140),
    ("Answer: 0", 7, 0),
]


@pytest.mark.parametrize(("response", "answer"), CORRECT)
def test_correct(response, answer):
    assert GRADER.grade(response, answer) == Grade(True, "correct", answer)


@pytest.mark.parametrize(("response", "answer", "parsed"), WRONG)
def test_wrong_answer(response, answer, parsed):
    assert GRADER.grade(response, answer) == Grade(False, "wrong_answer", parsed)


@pytest.mark.parametrize(
    "response",
    [
        "",
        "   \n\n  ",
        "349 - 209 = 140",  # only calculation lines
        "349 - 209 = 140\n140",
        "The answer is 140.",  # "answer" not at the start of a line
        "So the final answer is: 140",
        "Final Answer: 140",  # the line starts with "Final", not "Answer:"
        "#### 140",  # GSM8K's marker, not arith-v1's
        "Answer 140",  # no colon
        "Answers: 140",
    ],
)
def test_missing_answer(response):
    assert GRADER.grade(response, 140) == Grade(False, "missing_answer", None)


@pytest.mark.parametrize(
    ("response", "parsed"),
    [
        # not on the last line
        ("Answer: 140\n349 - 209 = 140", 140),
        ("Answer: 140\nI hope this helps!", 140),
        # trailing or leading text on the answer line
        ("Answer: 140 apples", 140),
        ("Answer: 140 (349 - 209)", 140),
        ("Answer: The result is 140", 140),
        # not a bare integer
        ("Answer: 1,000", 1000),
        ("Answer: 140.", 140),
        ("Answer: +140", 140),
        ("Answer: 12.5", None),  # a decimal holds no integer to read
        ("Answer: 3/4", None),
        ("Answer: twelve", None),
        ("Answer:", None),
        ("Answer: ١٤٠", None),  # Arabic-Indic digits: int() reads them, the required form does not
        ("Answer: １４０", None),  # full-width digits
        # case and markdown
        ("answer: 140", 140),
        ("ANSWER: 140", 140),
        ("**Answer:** 140", 140),
        ("**Answer: 140**", 140),
        ("## Answer: 140", 140),
        ("349 - 209 = 140\n**Answer**: 140", 140),
        # whitespace other than spaces inside the line
        ("Answer:\t140", 140),
    ],
)
def test_malformed(response, parsed):
    assert GRADER.grade(response, 140) == Grade(False, "malformed", parsed)


@pytest.mark.parametrize(
    "response",
    [
        "Answer:140",  # no space after the colon
        "Answer:   140",
        "Answer: 140   ",
        "   Answer: 140",
        "349 - 209 = 140\n\nAnswer: 140\n\n\n",
        "  349 - 209 = 140  \n  Answer: 140  ",
        "349 - 209 = 140\r\nAnswer: 140\r\n",  # CRLF line ends
        "349 - 209 = 140\rAnswer: 140",  # old Mac line ends: splitlines() splits on a lone \r too
    ],
)
def test_whitespace_variants_are_correct(response):
    assert GRADER.grade(response, 140) == Grade(True, "correct", 140)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        # the last Answer line counts, and it must be the last line
        ("Answer: 130\n349 - 209 = 140\nAnswer: 140", Grade(True, "correct", 140)),
        ("Answer: 140\nWait, 349 - 219 = 130\nAnswer: 130", Grade(False, "wrong_answer", 130)),
        ("Answer: 140\nanswer: 140", Grade(False, "malformed", 140)),
        ("Answer: 140\nAnswer: 140 (checked)", Grade(False, "malformed", 140)),
        ("answer: 130\nAnswer: 140", Grade(True, "correct", 140)),
    ],
)
def test_multiple_answer_lines_last_counts(response, expected):
    assert GRADER.grade(response, 140) == expected


@pytest.mark.parametrize("answer", [140, "140", " 140 ", 140.0])
def test_reference_as_int_or_str(answer):
    assert GRADER.grade("Answer: 140", answer) == Grade(True, "correct", 140)
    assert GRADER.grade("Answer: 141", answer) == Grade(False, "wrong_answer", 141)


@pytest.mark.parametrize("answer", [-18, "-18"])
def test_negative_reference(answer):
    assert GRADER.grade("12 - 30 = -18\nAnswer: -18", answer).correct


@pytest.mark.parametrize(
    ("response", "well_formatted"),
    [
        ("Answer: 140", True),
        ("Answer: 130", True),  # wrong, but in the required form
        ("349 - 209 = 140", False),
        ("Answer: 1,000", False),
        ("answer: 140", False),
        ("", False),
    ],
)
def test_well_formatted(response, well_formatted):
    assert GRADER.grade(response, 140).well_formatted is well_formatted


def test_malformed_is_never_correct_even_when_the_number_matches():
    grade = GRADER.grade("**Answer:** 140", 140)
    assert grade.parsed == 140
    assert not grade.correct


# ---- every response gets an outcome -------------------------------------------------------------------------

#: 5,000 ones: past Python's default limit of 4,300 digits on converting between str and int (CVE-2020-10735).
HUGE = "1" * 5000
HUGE_INT = (10**5000 - 1) // 9  # the same number, built without a str -> int conversion


def test_an_answer_past_the_int_digit_limit_is_graded_on_its_digits():
    """int("1" * 5000) raises ValueError; the grade compares the digits exactly. ``parsed`` is None: an int
    that long could not be written to JSON (str() of it raises the same error)."""
    assert GRADER.grade(f"Answer: {HUGE}", 140) == Grade(False, "wrong_answer", None)
    assert GRADER.grade(f"Answer: {HUGE}", HUGE_INT) == Grade(True, "correct", None)
    assert GRADER.grade(f"Answer: 000{HUGE}", HUGE) == Grade(True, "correct", None)
    assert GRADER.grade(f"Answer: {HUGE}2", HUGE) == Grade(False, "wrong_answer", None)
    assert GRADER.grade(f"Answer: -{HUGE}", HUGE_INT) == Grade(False, "wrong_answer", None)
    assert GRADER.grade(f"Answer: {HUGE} apples", 140) == Grade(False, "malformed", None)
    assert GRADER.grade(f"Answer: 1,{HUGE}", 140) == Grade(False, "malformed", None)
    assert GRADER.grade("Answer: 140", HUGE_INT) == Grade(False, "wrong_answer", 140)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (None, Grade(False, "missing_answer", None)),  # a generation that produced nothing
        (b"Answer: 140", Grade(False, "malformed", None)),  # not text: never read as an answer
        (140, Grade(False, "malformed", None)),
        (["Answer: 140"], Grade(False, "malformed", None)),
    ],
)
def test_a_response_that_is_not_text_gets_an_outcome(response, expected):
    assert GRADER.grade(response, 140) == expected


@pytest.mark.parametrize("answer", [None, "", "abc", "12.5", 140.5, float("nan"), True, "1,000"])
def test_a_reference_that_is_not_an_integer_is_bad_input(answer):
    """A bad reference is the data's fault, not the response's: BadInput (exit 2) naming it, not a crash and
    not a silent int(140.5) == 140."""
    with pytest.raises(BadInput, match="reference answer"):
        GRADER.grade("Answer: 140", answer)


responses = st.one_of(
    st.none(),
    st.text(),
    st.text(alphabet="Answer: -0123456789,.\n*#_\t", max_size=60),
    st.builds(
        lambda d, n, tail: f"Answer: {d * n}{tail}",
        st.sampled_from("0159"),
        st.integers(1, 9000),
        st.sampled_from(["", " ", ".", "\nok", " apples", ",000"]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(responses, st.one_of(st.integers(-(10**6), 10**6), st.just(HUGE_INT)))
def test_every_response_gets_an_outcome(response, answer):
    grade = GRADER.grade(response, answer)
    assert grade.outcome in OUTCOMES
    assert grade.correct is (grade.outcome == "correct")
    assert grade.parsed is None or isinstance(grade.parsed, int)
