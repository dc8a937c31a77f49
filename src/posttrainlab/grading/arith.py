"""The arith-v1 grader: reads the final ``Answer: <integer>`` line.

arith-v1's prompt asks for "the final result on its own last line in the form "Answer: <integer>"".
The grader holds a response to exactly that form, and tells the ways of missing it apart:

- ``correct`` / ``wrong_answer``: the last non-empty line is ``Answer: <integer>`` (spaces around
  the integer allowed, an optional leading ``-``), equal / not equal to the reference;
- ``missing_answer``: no line starts with ``Answer:`` (any case, ``**`` bold allowed) at all, or the
  response is ``None``;
- ``malformed``: an answer line exists but is not in the required form: not on the last line, not a
  bare integer (``12.5``, ``1,000``, ``twelve``, ``140.``), lower-case, or bold; or the response is not
  a ``str`` at all. ``parsed`` then holds the integer when one can still be read, for analysis; it is
  never counted correct.

Every response gets one of these, never an exception (it runs inside GRPO's reward function). The
integer is compared by its digits (as a :class:`~decimal.Decimal`, exact at any length), not through
``int()``, which refuses more than ``sys.get_int_max_str_digits()`` digits (4,300 by default); past that
limit ``parsed`` is ``None``, since such an int could not be written to JSON either. The reference must
be an integer: an ``int``, an integral float (``140.0``) or a string of digits; anything else
(``None``, ``"abc"``, ``140.5``) is ``BadInput``, never rounded or guessed.
"""

from __future__ import annotations

import math
import operator
import re
from decimal import Decimal
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.grading.base import Grade, grade_of_non_text

# [0-9], not \d: \d also matches other scripts' digits ("１４０", "١٤٠"), which int() accepts.
_REQUIRED = re.compile(r"Answer: *(-?[0-9]+) *")
_ATTEMPT = re.compile(r"^[\s*_#]*answer[\s*_]*:", re.IGNORECASE)
_LOOSE_NUMBER = re.compile(r"-?[0-9][0-9,]*([./][0-9]+)?")
_REFERENCE = re.compile(r"[+-]?[0-9]+")


def _to_int(digits: str) -> int | None:
    """``int(digits)``, or ``None`` past Python's limit on int-string conversion (module docstring)."""
    try:
        return int(digits)
    except ValueError:
        return None


def reference_value(answer: Any) -> Decimal:
    """The reference integer, exact at any length; ``BadInput`` for anything that is not an integer.

    >>> reference_value(140), reference_value(" -18 "), reference_value(140.0)
    (Decimal('140'), Decimal('-18'), Decimal('140'))
    """
    if not isinstance(answer, bool):  # True is an int to Python, never an arith-v1 answer
        if isinstance(answer, float):
            if math.isfinite(answer) and answer.is_integer():
                return Decimal(answer)
        elif isinstance(answer, str):
            if _REFERENCE.fullmatch(answer.strip()):
                return Decimal(answer.strip())
        else:
            try:
                return Decimal(operator.index(answer))  # int, numpy integers
            except TypeError:
                pass
    raise BadInput(f"arith grader: reference answer {answer!r} is not an integer")


class ArithGrader:
    """Grade arith-v1 responses (see the module docstring for the exact rules).

    >>> ArithGrader().grade("349 - 209 = 140\\nAnswer: 140", 140)
    Grade(correct=True, outcome='correct', parsed=140)
    >>> ArithGrader().grade("349 - 209 = 140", 140).outcome
    'missing_answer'
    """

    def grade(self, response: str, answer: Any) -> Grade:
        reference = reference_value(answer)
        not_text = grade_of_non_text(response)
        if not_text is not None:
            return not_text
        lines = [line.strip() for line in response.strip().splitlines() if line.strip()]
        attempts = [i for i, line in enumerate(lines) if _ATTEMPT.match(line)]
        if not attempts:
            return Grade(False, "missing_answer", None)
        last = attempts[-1]
        line = lines[last]
        m = _REQUIRED.fullmatch(line)
        if m and last == len(lines) - 1:
            ok = Decimal(m.group(1)) == reference
            return Grade(ok, "correct" if ok else "wrong_answer", _to_int(m.group(1)))
        loose = _LOOSE_NUMBER.search(line.split(":", 1)[1])
        # "12.5" and "3/4" hold no integer to read (not 12, not 3); "140." does (the dot ends a sentence).
        parsed = _to_int(loose.group(0).replace(",", "")) if loose and not loose.group(1) else None
        return Grade(False, "malformed", parsed)


def graded_answers(texts: list[str], answer: Any) -> list[dict[str, Any]]:
    """Each response with its arith grade, as sampled answers are kept: ``{"response", "correct", "outcome",
    "parsed"}`` (best-of-N's samples, a training run's policy samples).

    >>> [(s["outcome"], s["parsed"]) for s in graded_answers(["Answer: 3", "three", "Answer: 4"], 3)]
    [('correct', 3), ('missing_answer', None), ('wrong_answer', 4)]
    """
    grader = ArithGrader()
    grades = [grader.grade(t, answer) for t in texts]
    return [{"response": t, "correct": g.correct, "outcome": g.outcome, "parsed": g.parsed}
            for t, g in zip(texts, grades, strict=True)]  # fmt: skip
