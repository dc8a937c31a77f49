"""Paired comparison of two evaluations of the same problems: is B really better than A?

Two methods evaluated on the same problems give **paired** outcomes (right or wrong per problem), and a
paired test is far more sensitive than comparing the two accuracies' separate intervals: the problems
both get right or both get wrong say nothing about the difference; only the discordant ones do. For
each group (overall, then each category in arith-v1's order) ``paired(a, b)`` returns

- ``n``, ``acc_a``, ``acc_b`` and ``diff = acc_b - acc_a`` (fractions; the report prints points);
- ``b`` (A right, B wrong) and ``c`` (A wrong, B right): the discordant counts, ``diff = (c - b) / n``;
- ``ci``: a 95% interval for ``diff``, **Newcombe's (1998) method 10** for paired proportions
  ("Improved confidence intervals for the difference between binomial proportions based on paired
  data", Statistics in Medicine 17:2635-2650; also Fagerland, Lydersen & Laake 2017, "Statistical
  Analysis of Contingency Tables", §8.5, the "Newcombe square-and-add" interval). With ``(la, ua)`` and
  ``(lb, ub)`` the Wilson intervals of ``acc_a`` and ``acc_b`` (``eval.intervals``)::

      lower = diff - sqrt((acc_b - lb)² + (ua - acc_a)² - 2 ψ (acc_b - lb)(ua - acc_a))
      upper = diff + sqrt((ub - acc_b)² + (acc_a - la)² - 2 ψ (ub - acc_b)(acc_a - la))

  where ψ is the phi correlation of the 2×2 table, corrected for continuity as Newcombe does: with
  ``D = both · neither - b · c`` and ``M`` the product of the four margins, ``ψ = (D - n/2) / sqrt(M)``
  when ``D > n/2``, ``0`` when ``0 <= D <= n/2``, ``D / sqrt(M)`` when ``D < 0``, and ``0`` when a
  margin is 0. Like Wilson's, it stays inside [-1, 1] and is sensible at 0/n or n/n; with ``n = 0``
  nothing is known and it is ``[-1, 1]``;
- ``mcnemar_p``: **McNemar's exact test**, the two-sided binomial test of the discordant pairs:
  under "no difference" each discordant problem is B's win with probability 1/2, so with
  ``X ~ Bin(b + c, 1/2)``, ``p = min(1, 2 · P[X <= min(b, c)])``, and ``p = 1`` when ``b + c = 0``.
  It is summed exactly with ``math.comb`` (the environment has no scipy, and the sum is four lines);
- ``significant``: ``mcnemar_p < 0.05``. The interval and the test are different procedures and can
  disagree at the margin; the test decides the word "significant".

Outcomes are read by ``runners.compare`` (an ``eval policy`` folder, a JSON Lines file of ``id``, ``category``,
``correct`` rows, a beam-search or best-of-N folder). docs/metrics.md "Paired comparison" has the formulas;
docs/design.md "Metric definitions" the conventions (pure functions, hand-computed tests).
"""

from __future__ import annotations

import math
from typing import Any

from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.errors import BadInput
from posttrainlab.eval.intervals import Z95, wilson_interval
from posttrainlab.eval.policy import ordered_groups

#: ``{problem id: (category, correct)}``, in the order the file lists them
Outcomes = dict[str, tuple[str, bool]]

#: significance level of ``significant``
ALPHA = 0.05

#: ids named in a refusal; the rest are counted
SHOWN = 3

FIELDS = ("id", "category", "correct")


# --- the statistics -----------------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` and ``c`` discordant pairs: ``min(1, 2 P[X <= min(b, c)])``.

    >>> round(mcnemar_exact(10, 2), 5)    # 2 (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 * 79 / 4096
    0.03857
    >>> mcnemar_exact(5, 5), mcnemar_exact(0, 0)
    (1.0, 1.0)
    """
    if b < 0 or c < 0:
        raise ValueError(f"need counts >= 0, got b={b}, c={c}")
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**m)  # exact integers; one rounding in the division


def _phi(both: int, b: int, c: int, neither: int) -> float:
    """Newcombe's continuity-corrected phi of the paired 2×2 table (module docstring); 0 with an empty margin."""
    n = both + b + c + neither
    margins = (both + b) * (c + neither) * (both + c) * (b + neither)
    if margins == 0:
        return 0.0
    d = both * neither - b * c
    if d > n / 2:
        return (d - n / 2) / math.sqrt(margins)
    return 0.0 if d >= 0 else d / math.sqrt(margins)


def paired_difference_ci(both: int, b: int, c: int, neither: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's (1998) method-10 interval for ``acc_b - acc_a`` from the paired 2×2 counts.

    ``both``: A and B right; ``b``: A right, B wrong; ``c``: A wrong, B right; ``neither``: both wrong.
    Fagerland et al. (2017, chapter 8) give [-0.1186, -0.0046] for ``acc_a - acc_b`` of Cavo et al.'s
    table (59, 6, 16, 80); this is the same interval for the difference the other way round:

    >>> [round(x, 4) for x in paired_difference_ci(59, 6, 16, 80)]
    [0.0046, 0.1186]
    >>> paired_difference_ci(0, 0, 0, 0)
    (-1.0, 1.0)
    """
    if min(both, b, c, neither) < 0:
        raise ValueError(f"need counts >= 0, got {both}, {b}, {c}, {neither}")
    n = both + b + c + neither
    if n == 0:
        return (-1.0, 1.0)
    pa, pb = (both + b) / n, (both + c) / n
    la, ua = wilson_interval(both + b, n, z)
    lb, ub = wilson_interval(both + c, n, z)
    psi = _phi(both, b, c, neither)
    diff = pb - pa

    def half(x: float, y: float) -> float:  # |psi| <= 1 keeps this >= 0; max() absorbs rounding
        return math.sqrt(max(0.0, x * x + y * y - 2 * psi * x * y))

    return (max(-1.0, diff - half(pb - lb, ua - pa)), min(1.0, diff + half(ub - pb, pa - la)))


def pair_stats(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """``n, acc_a, acc_b, diff, ci, b, c, mcnemar_p, significant`` of ``(A right, B right)`` pairs.

    >>> s = pair_stats([(True, True)] * 3 + [(True, False)] + [(False, True)] * 4)
    >>> s["n"], s["acc_a"], s["acc_b"], s["diff"], s["b"], s["c"], round(s["mcnemar_p"], 4)
    (8, 0.5, 0.875, 0.375, 1, 4, 0.375)
    """
    n = len(pairs)
    both = sum(1 for x, y in pairs if x and y)
    b = sum(1 for x, y in pairs if x and not y)
    c = sum(1 for x, y in pairs if y and not x)
    acc_a, acc_b = ((both + b) / n, (both + c) / n) if n else (0.0, 0.0)
    p = mcnemar_exact(b, c)
    return {
        "n": n,
        "acc_a": acc_a,
        "acc_b": acc_b,
        "diff": acc_b - acc_a,
        "ci": list(paired_difference_ci(both, b, c, n - both - b - c)),
        "b": b,
        "c": c,
        "mcnemar_p": p,
        "significant": p < ALPHA,
    }


def _shown(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def paired(a: Outcomes, b: Outcomes, names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """``{"overall": stats, "categories": {name: stats}}`` of B against A (``pair_stats``; module docstring).

    Refused (``BadInput``) when the two cover different problems or give one problem two categories:
    a paired comparison needs the same problems on both sides. ``names`` label A and B in the refusal.
    """
    only_a = [i for i in a if i not in b]
    only_b = [i for i in b if i not in a]
    if only_a or only_b:
        parts = [f"{len(ids)} only in {name}" + (f" ({_shown(ids)})" if ids else "")
                 for ids, name in ((only_a, names[0]), (only_b, names[1]))]  # fmt: skip
        raise BadInput(f"{names[0]} and {names[1]} cover different problems: {'; '.join(parts)}; a paired "
                       "comparison needs evaluations of the same problems")  # fmt: skip
    moved = [i for i in a if a[i][0] != b[i][0]]
    if moved:
        i = moved[0]
        raise BadInput(f"{len(moved)} problems have different categories in {names[0]} and {names[1]} "
                       f"(first: {i}: {a[i][0]!r} vs {b[i][0]!r})")  # fmt: skip
    cats = ordered_groups([cat for cat, _ in a.values()], CATEGORIES)
    pairs = {i: (a[i][1], b[i][1]) for i in a}
    return {
        "overall": pair_stats(list(pairs.values())),
        "categories": {cat: pair_stats([pairs[i] for i in a if a[i][0] == cat]) for cat in cats},
    }


# --- the words ----------------------------------------------------------------------------------------


def p_value(p: float) -> str:
    """A p-value in three decimals, or ``< 0.001``.

    >>> p_value(0.038574), p_value(0.0004), p_value(1.0)
    ('0.039', '< 0.001', '1.000')
    """
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def points(diff: float, ci: list[float] | tuple[float, float]) -> str:
    """A difference of two shares in percentage points, signed, with its interval.

    >>> points(0.042, [0.011, 0.073]), points(-0.1, (-0.2, 0.0))
    ('+4.2 [+1.1, +7.3]', '-10.0 [-20.0, +0.0]')
    """
    return f"{100 * diff:+.1f} [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def describe(label: str, s: dict[str, Any]) -> str:
    """One sentence: difference in points, its interval, the p-value and the verdict at 0.05.

    >>> describe("GRPO − SFT", {"diff": 0.042, "ci": [0.011, 0.073], "mcnemar_p": 0.008, "significant": True})
    'GRPO − SFT = +4.2 points [+1.1, +7.3], p = 0.008: significant at 0.05'
    """
    diff, ci = points(s["diff"], s["ci"]).split(" ", 1)
    p = p_value(s["mcnemar_p"])
    p = p if p.startswith("<") else f"= {p}"
    word = "significant" if s["significant"] else "not significant"
    return f"{label} = {diff} points {ci}, p {p}: {word} at {ALPHA:g}"


def verdict(result: dict[str, Any]) -> str:
    """Which groups of a ``paired`` result differ significantly at 0.05 and which do not, in one sentence.

    >>> verdict({"overall": {"significant": True}, "categories": {"addition": {"significant": False}}})
    'Significant at 0.05: overall. Not significant: addition.'
    """
    groups = {"overall": result["overall"], **result["categories"]}
    yes = [g for g, s in groups.items() if s["significant"]]
    no = [g for g, s in groups.items() if not s["significant"]]
    out = [f"Significant at {ALPHA:g}: {', '.join(yes)}." if yes else f"No difference is significant at {ALPHA:g}."]
    if yes and no:
        out.append(f"Not significant: {', '.join(no)}.")
    return " ".join(out)


__all__ = [
    "ALPHA",
    "FIELDS",
    "Outcomes",
    "describe",
    "mcnemar_exact",
    "pair_stats",
    "paired",
    "p_value",
    "paired_difference_ci",
    "points",
    "verdict",
]
