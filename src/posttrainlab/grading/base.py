"""The grader interface: ``grade(response, answer) -> Grade(correct, outcome, parsed)``.

Shaped after open-instruct's verifier interface (one call, one small result object), with the
outcome types arith-v1's card and its preference-pair checks need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

#: Outcome types, in report order.
#: ``correct``: answer found in the required form and equal to the reference.
#: ``wrong_answer``: answer found in the required form, not equal.
#: ``missing_answer``: no answer at all.
#: ``malformed``: an answer was attempted but not in the required form (unparseable, not last, ...).
#: ``timeout``: the checker ran out of time, or its worker died or failed (math grader only): no
#: verdict, never counted correct.
OUTCOMES = ("correct", "wrong_answer", "missing_answer", "malformed", "timeout")


@dataclass(frozen=True)
class Grade:
    """The result of grading one response."""

    correct: bool
    outcome: str
    parsed: Any = None

    @property
    def well_formatted(self) -> bool:
        """True when the answer was given in the required form, right or wrong."""
        return self.outcome in ("correct", "wrong_answer")


class Grader(Protocol):
    """Anything that grades one response against one reference answer.

    Every response gets a grade, never an exception (a reward function must not crash a training step):
    see :func:`grade_of_non_text`. Only a reference the grader cannot read raises ``BadInput``: that is the
    data's fault, not the response's.
    """

    def grade(self, response: str, answer: Any) -> Grade: ...


def grade_of_non_text(response: Any) -> Grade | None:
    """The grade of a response that is not a ``str``, or ``None`` for text (which the grader reads).

    ``None`` (a generation that produced nothing, a chat message with no content) is ``missing_answer``;
    anything else (bytes, a number, a list of messages) is ``malformed``: never read as an answer, and
    counted where a report shows it rather than guessed at.

    >>> grade_of_non_text(None), grade_of_non_text(b"Answer: 1").outcome, grade_of_non_text("Answer: 1")
    (Grade(correct=False, outcome='missing_answer', parsed=None), 'malformed', None)
    """
    if isinstance(response, str):
        return None
    return Grade(False, "missing_answer" if response is None else "malformed", None)
