"""Exact step labels for arith-v1 solutions: every step is a claim a program can check.

An arith-v1 solution is one calculation line per step of the problem's program (``a op b = c``) and a
final ``Answer: <integer>`` line (see ``problems.py``). Because every question is rendered from a
template, the problem, and so its reference program, can be read back from the question text
(:func:`parse_question`); a step is then checked against the reference line at its position.

Rules (:func:`step_verdicts`), one verdict per non-empty line of the solution:

- line ``i`` < number of program steps must be a calculation ``x op y = z`` with the reference line's
  operator, its two operands (in either order for ``+`` and ``*``) and its result. A true equation
  with other operands (``63 + 11 = 74`` where the program multiplies first) is a wrong step: the
  solution has left the problem's computation. Solutions that compute in another valid order are
  marked wrong at the first line that differs; arith-v1's policies are trained on the reference
  order, so this is rare, and the rule stays exact and simple;
- the answer line (``Answer: N`` in the grader's required form) is right iff ``N`` is the answer,
  wherever it stands (skipping the calculation is not a false claim);
- any other line (extra calculations, prose, a malformed answer line) is wrong.

Step-view labels (:func:`step_labels`, docs/design.md "Step view") are 1 up to the first wrong step, which
gets the only 0 and ends the labelled steps; a solution whose steps are all right but that never
gives the answer line gets 0 on its last step ("0 from the first wrong claim or a wrong/missing
answer line"). :func:`first_error` is the ProcessBench index of that step (-1 when none). A
solution with ``first_error == -1`` is always graded correct by the arith grader; the converse does
not hold: a sampled solution can reach the right answer through a wrong step (``352 - 6 = 288`` on
an ``11 * 10 - 6`` problem), and keeps its 0 here.

Written by hand: the rules are arith-v1's own (no library knows its templates).
"""

from __future__ import annotations

import re
from functools import cache

from posttrainlab.data.arith.problems import TEMPLATES, Problem

CALC_LINE = re.compile(r"\s*(-?[0-9]+)\s*([-+*])\s*(-?[0-9]+)\s*=\s*(-?[0-9]+)\s*")
ANSWER_LINE = re.compile(r"Answer: *(-?[0-9]+) *")  # the grader's required form (grading/arith.py)


_FIELDS = {"a": "-?[0-9]+", "b": "-?[0-9]+", "c": "-?[0-9]+", "name": r"[A-Z][a-z]+", "item": r"[a-z]+"}


@cache
def _patterns() -> list[tuple[re.Pattern, str, str]]:
    """One regex per template: each field a named group, its repeats back-references."""
    out = []
    for category, templates in TEMPLATES.items():
        for t in templates:
            rx = re.escape(t.question)
            for field, body in _FIELDS.items():
                token = re.escape("{" + field + "}")
                rx = rx.replace(token, f"(?P<{field}>{body})", 1).replace(token, f"(?P={field})")
            out.append((re.compile(rx), category, t.id))
    return out


def problem_of(row: dict) -> Problem | None:
    """The arith-v1 problem a data row's question states (``data.problems.row_question``); ``None`` for another
    dataset's row."""
    from posttrainlab.data.problems import row_question

    question = row_question(row)
    return None if question is None else parse_question(question)


def parse_question(text: str) -> Problem | None:
    """The arith-v1 problem a question (or a whole prompt) states; None when no template matches.

    >>> parse_question("Solve ...\\n\\nWhat is 351 - 148 + 56?").solution
    '351 - 148 = 203\\n203 + 56 = 259\\nAnswer: 259'
    >>> parse_question("What is the capital of France?") is None
    True
    """
    question = text.strip().rsplit("\n\n", 1)[-1].strip()
    for rx, category, template in _patterns():
        m = rx.fullmatch(question)
        if m:
            g = m.groupdict()
            operands = tuple(int(g[k]) for k in "abc" if g.get(k) is not None)
            return Problem(category, template, operands, g.get("name") or "", g.get("item") or "")
    return None


def split_steps(solution: str) -> list[str]:
    """The steps of an arith-v1 solution: its non-empty lines, stripped."""
    return [line.strip() for line in solution.splitlines() if line.strip()]


def step_verdicts(problem: Problem, steps: list[str]) -> list[bool]:
    """Each step checked on its own against the reference program (rules in the module docstring)."""
    reference = problem.lines()
    verdicts = []
    for i, step in enumerate(steps):
        answer = ANSWER_LINE.fullmatch(step)
        if answer:
            verdicts.append(int(answer.group(1)) == problem.answer)
            continue
        calc = CALC_LINE.fullmatch(step)
        if not calc or i >= len(reference):
            verdicts.append(False)
            continue
        left, op, right, result = int(calc.group(1)), calc.group(2), int(calc.group(3)), int(calc.group(4))
        ref = reference[i]
        same = (left, right) == (ref.left, ref.right) or (op in "+*" and (right, left) == (ref.left, ref.right))
        verdicts.append(op == ref.op and same and result == ref.result)
    return verdicts


def first_error(problem: Problem, steps: list[str]) -> int:
    """Index of the first wrong step, the last step when no right answer line ends the solution; -1 if none.

    >>> p = parse_question("What is 156 * 7?")
    >>> first_error(p, ["156 * 7 = 1092", "Answer: 1092"]), first_error(p, ["156 * 7 = 1102", "Answer: 1102"])
    (-1, 0)
    >>> first_error(p, ["156 * 7 = 1092"]), first_error(p, [])
    (0, -1)
    """
    verdicts = step_verdicts(problem, steps)
    for i, ok in enumerate(verdicts):
        if not ok:
            return i
    if steps and not ANSWER_LINE.fullmatch(steps[-1]):
        return len(steps) - 1  # all claims true, but the answer line is missing
    return -1


def exact_trace(problem: Problem, response: str) -> bool:
    """Every step of ``response`` exactly right for ``problem`` and its answer line right (``first_error`` -1): the
    trace test of RFT's ``filter: process`` (``train.rft``) and of trace error (``eval.trace_error.wrong_step``).

    >>> p = parse_question("What is 351 - 148 + 56?")
    >>> exact_trace(p, "351 - 148 = 203\\n203 + 56 = 259\\nAnswer: 259"), exact_trace(p, "")
    (True, False)
    >>> exact_trace(p, "351 - 148 = 203\\n203 + 56 = 260\\nAnswer: 260")
    False
    """
    steps = split_steps(response)
    return bool(steps) and first_error(problem, steps) == -1


def step_labels(problem: Problem, steps: list[str]) -> tuple[list[str], list[int]]:
    """The step view of a solution: steps up to the first error, labels 1… then one 0 (docs/design.md).

    >>> p = parse_question("What is 351 - 148 + 56?")
    >>> step_labels(p, ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"])
    (['351 - 148 = 203', '203 + 56 = 260'], [1, 0])
    """
    k = first_error(problem, steps)
    if k < 0:
        return list(steps), [1] * len(steps)
    return list(steps[: k + 1]), [1] * k + [0]


__all__ = ["exact_trace", "first_error", "parse_question", "split_steps", "step_labels", "step_verdicts"]
