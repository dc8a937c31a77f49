"""The arith-v1 grader: reads the final ``Answer: <integer>`` line.

arith-v1's prompt asks for "the final result on its own last line in the form "Answer: <integer>"".
The grader holds a response to exactly that form, and tells the ways of missing it apart:

- ``correct`` / ``wrong_answer``: the last non-empty line is ``Answer: <integer>`` (spaces around
  the integer allowed, an optional leading ``-``), equal / not equal to the reference;
- ``missing_answer``: no line starts with ``Answer:`` (any case, ``**`` bold allowed) at all;
- ``malformed``: an answer line exists but is not in the required form: not on the last line, not a
  bare integer (``12.5``, ``1,000``, ``twelve``, ``140.``), lower-case, or bold. ``parsed`` then holds
  the integer when one can still be read, for analysis; it is never counted correct.
"""

from __future__ import annotations

import re
from typing import Any

from posttrainlab.grading.base import Grade

# [0-9], not \d: \d also matches other scripts' digits ("１４０", "١٤٠"), which int() accepts.
_REQUIRED = re.compile(r"Answer: *(-?[0-9]+) *")
_ATTEMPT = re.compile(r"^[\s*_#]*answer[\s*_]*:", re.IGNORECASE)
_LOOSE_NUMBER = re.compile(r"-?[0-9][0-9,]*([./][0-9]+)?")


class ArithGrader:
    """Grade arith-v1 responses (see the module docstring for the exact rules).

    >>> ArithGrader().grade("349 - 209 = 140\\nAnswer: 140", 140)
    Grade(correct=True, outcome='correct', parsed=140)
    >>> ArithGrader().grade("349 - 209 = 140", 140).outcome
    'missing_answer'
    """

    def grade(self, response: str, answer: Any) -> Grade:
        lines = [line.strip() for line in response.strip().splitlines() if line.strip()]
        attempts = [i for i, line in enumerate(lines) if _ATTEMPT.match(line)]
        if not attempts:
            return Grade(False, "missing_answer", None)
        last = attempts[-1]
        line = lines[last]
        m = _REQUIRED.fullmatch(line)
        if m and last == len(lines) - 1:
            parsed = int(m.group(1))
            ok = parsed == int(answer)
            return Grade(ok, "correct" if ok else "wrong_answer", parsed)
        loose = _LOOSE_NUMBER.search(line.split(":", 1)[1])
        # "12.5" and "3/4" hold no integer to read (not 12, not 3); "140." does (the dot ends a sentence).
        parsed = int(loose.group(0).replace(",", "")) if loose and not loose.group(1) else None
        return Grade(False, "malformed", parsed)
