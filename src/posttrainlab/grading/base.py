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
#: ``timeout``: the checker ran out of time (math grader only); never counted correct.
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
    """Anything that grades one response against one reference answer."""

    def grade(self, response: str, answer: Any) -> Grade: ...
