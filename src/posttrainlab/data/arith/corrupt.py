"""Controlled corruptions of a reference solution: arith-v1's rejected responses.

Each rejected response makes exactly one change to the chosen (reference) solution and, like a real
mistake, propagates it: later steps compute correctly from the wrong value, and the answer line
reports the wrong final value. The four types (the card's table, 25% each):

=====================  ==========================================================  ================
corruption             change                                                      expected outcome
=====================  ==========================================================  ================
arithmetic_slip        one step's result off by ±1, ±2 or ±10                      wrong_answer
operand_error          one operand misread (adjacent-digit swap, or ±1)            wrong_answer
inconsistent_answer    correct steps, wrong final answer line (±1, ±2 or ±10)      wrong_answer
missing_answer         correct steps, no answer line                               missing_answer
=====================  ==========================================================  ================

Every value in a rejected response stays a non-negative integer, and the final answer always
differs from the reference (a candidate change that would cancel out is skipped).
"""

from __future__ import annotations

import random

from posttrainlab.data.arith.problems import OPERATIONS, PREV, Line, Problem, render_solution

CORRUPTIONS = ("arithmetic_slip", "operand_error", "inconsistent_answer", "missing_answer")
EXPECTED_OUTCOME = {
    "arithmetic_slip": "wrong_answer",
    "operand_error": "wrong_answer",
    "inconsistent_answer": "wrong_answer",
    "missing_answer": "missing_answer",
}
DELTAS = (1, -1, 2, -2, 10, -10)


def propagate(problem: Problem, k: int, left: int | None = None, right: int | None = None,
               result: int | None = None) -> list[Line] | None:  # fmt: skip
    """Re-run the program with step ``k`` changed; ``None`` if any value turns negative."""
    lines: list[Line] = []
    for i, (op, a, b) in enumerate(problem.program):
        lv = lines[-1].result if a == PREV else int(a)
        rv = lines[-1].result if b == PREV else int(b)
        if i == k:
            lv = left if left is not None else lv
            rv = right if right is not None else rv
        value = OPERATIONS[op](lv, rv)
        if i == k and result is not None:
            value = result
        if min(lv, rv, value) < 0:
            return None
        lines.append(Line(op, lv, rv, value))
    return lines


def misreadings(value: int) -> list[int]:
    """Ways to misread an operand: each adjacent-digit swap that changes it (no leading zero), then ±1.

    >>> misreadings(209)
    [290, 210, 208]
    >>> misreadings(7)
    [8, 6]
    """
    digits = str(value)
    out: list[int] = []
    for i in range(len(digits) - 1):
        if digits[i] == digits[i + 1]:
            continue
        swapped = digits[:i] + digits[i + 1] + digits[i] + digits[i + 2 :]
        if swapped[0] == "0":
            continue
        if int(swapped) not in out:
            out.append(int(swapped))
    for v in (value + 1, value - 1):
        if v >= 0 and v not in out:
            out.append(v)
    return out


def corrupt(problem: Problem, kind: str, rng: random.Random) -> str:
    """The rejected response for ``problem`` under corruption ``kind`` (one of ``CORRUPTIONS``)."""
    answer = problem.answer
    correct = problem.lines()
    if kind == "missing_answer":
        return render_solution(correct, None)
    if kind == "inconsistent_answer":
        wrong = [answer + d for d in DELTAS if answer + d >= 0]
        return render_solution(correct, wrong[rng.randrange(len(wrong))])
    candidates: list[list[Line]] = []
    if kind == "arithmetic_slip":
        for k, line in enumerate(correct):
            for d in DELTAS:
                candidates.append(propagate(problem, k, result=line.result + d))
    elif kind == "operand_error":
        for k, (_op, a, b) in enumerate(problem.program):
            # only operands read from the problem text can be misread; a carried result cannot
            if a != PREV:
                candidates += [propagate(problem, k, left=v) for v in misreadings(int(a))]
            if b != PREV:
                candidates += [propagate(problem, k, right=v) for v in misreadings(int(b))]
    else:
        raise ValueError(f"unknown corruption {kind!r}")
    options = [lines for lines in candidates if lines is not None and lines[-1].result != answer]
    if not options:  # pragma: no cover - every arith-v1 problem has one; the build would abort
        raise RuntimeError(f"no {kind} corruption for {problem.key}")
    lines = options[rng.randrange(len(options))]
    return render_solution(lines, lines[-1].result)
