"""Near-miss wrong solutions of an arith-v1 problem: hard negatives shaped like a policy's own slips.

arith-v1's corruptions (``corrupt.py``) include operand misreadings, wrong answer lines and missing answers,
which a PRM can learn to spot by their look. The mistakes a small policy makes are mostly a calculation
line whose result is close to the right one: a units digit off, a tens digit off, a carry dropped
(``94 * 3 = 272`` for 282). Each near-miss changes ONE line's result by such an amount and, like a real
mistake and like ``corrupt``, propagates it: later lines compute correctly from the wrong value and the
answer line reports the wrong final value (``corrupt.propagate``). The labels of the rows built from
them are exact (``steps.step_verdicts``), as for every arith-prm row.

=============  =====================================================================================
kind           the changed line's result
=============  =====================================================================================
off_by_one     ±1
off_by_ten     ±10
carry          a dropped carry of ``+`` or of a one-digit ``*`` (−c·10^(k+1) for the carry c out of
               digit k, into a digit the result has), or a forgotten borrow of ``-`` (+10^(k+1))
=============  =====================================================================================

Every value stays a non-negative integer and the final answer always differs from the reference.

Written by hand: the carry arithmetic is schoolbook column arithmetic, small enough to check by hand.
"""

from __future__ import annotations

import random

from posttrainlab.data.arith.corrupt import propagate
from posttrainlab.data.arith.problems import Line, Problem, render_solution

NEAR_MISSES = ("off_by_one", "off_by_ten", "carry")


def _digits(value: int) -> list[int]:
    """Decimal digits, least significant first."""
    return [int(d) for d in reversed(str(value))]


def carry_deltas(op: str, left: int, right: int) -> list[int]:
    """How the result of ``left op right`` changes when one carry (or borrow) is forgotten, one per carry.

    Only carries into a digit the result already has count (a carry out of the top digit is written, not
    carried). ``*`` needs a one-digit operand; ``-`` needs ``left >= right >= 0``; otherwise there is none.

    >>> carry_deltas("+", 47, 38), carry_deltas("+", 95, 7), carry_deltas("+", 12, 34)
    ([-10], [-10], [])
    >>> carry_deltas("-", 503, 78), carry_deltas("*", 94, 3), carry_deltas("*", 3, 94)
    ([10, 100], [-10], [-10])
    """
    if min(left, right) < 0:
        return []
    out: list[int] = []
    if op == "+":
        a, b = _digits(left), _digits(right)
        width, carry = max(len(a), len(b)), 0
        for k in range(width - 1):
            carry = ((a[k] if k < len(a) else 0) + (b[k] if k < len(b) else 0) + carry) // 10
            if carry:
                out.append(-carry * 10 ** (k + 1))
    elif op == "-" and left >= right:
        a, b = _digits(left), _digits(right)
        borrow = 0
        for k in range(len(a) - 1):
            borrow = int(a[k] - (b[k] if k < len(b) else 0) - borrow < 0)
            if borrow:
                out.append(10 ** (k + 1))
    elif op == "*" and min(left, right) < 10:
        digit, other = (right, left) if right < 10 else (left, right)
        carry = 0
        digits = _digits(other)
        for k in range(len(digits) - 1):
            carry = (digits[k] * digit + carry) // 10
            if carry:
                out.append(-carry * 10 ** (k + 1))
    return list(dict.fromkeys(out))


def _deltas(kind: str, line: Line) -> list[int]:
    if kind == "off_by_one":
        return [1, -1]
    if kind == "off_by_ten":
        return [10, -10]
    if kind == "carry":
        return carry_deltas(line.op, line.left, line.right)
    raise ValueError(f"unknown near-miss kind {kind!r}; choose one of {', '.join(NEAR_MISSES)}")


def near_miss_options(problem: Problem, kind: str) -> list[list[Line]]:
    """Every propagated solution of ``kind`` (one line's result changed), in line then delta order."""
    options = []
    for k, line in enumerate(problem.lines()):
        for delta in _deltas(kind, line):
            lines = propagate(problem, k, result=line.result + delta)
            if lines is not None and lines[-1].result != problem.answer:
                options.append(lines)
    return options


def near_miss(problem: Problem, kind: str, rng: random.Random) -> str | None:
    """One near-miss solution of ``kind`` drawn with ``rng``; ``None`` when the problem has none (no carry).

    >>> from posttrainlab.data.arith.steps import parse_question
    >>> near_miss(parse_question("What is 94 * 3?"), "carry", random.Random(0))
    '94 * 3 = 272\\nAnswer: 272'
    """
    options = near_miss_options(problem, kind)
    if not options:
        return None
    lines = options[rng.randrange(len(options))]
    return render_solution(lines, lines[-1].result)


def near_misses(problem: Problem, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """Up to ``count`` distinct ``(kind, solution)`` near-misses, kinds taken in turn from a seeded start.

    A kind with nothing to offer (no carry) is skipped; fewer than ``count`` come back only when the problem
    has fewer distinct near-misses.
    """
    start = rng.randrange(len(NEAR_MISSES))
    order = [NEAR_MISSES[(start + i) % len(NEAR_MISSES)] for i in range(len(NEAR_MISSES))]
    pools = {kind: near_miss_options(problem, kind) for kind in order}
    for pool in pools.values():
        rng.shuffle(pool)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    while len(out) < count and any(pools.values()):
        for kind in order:
            if len(out) == count:
                break
            while pools[kind]:
                lines = pools[kind].pop()
                text = render_solution(lines, lines[-1].result)
                if text not in seen:
                    seen.add(text)
                    out.append((kind, text))
                    break
    return out


__all__ = ["NEAR_MISSES", "carry_deltas", "near_miss", "near_miss_options", "near_misses"]
