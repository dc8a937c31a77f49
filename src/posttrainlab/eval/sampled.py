"""Sampled metrics of a policy beside greedy accuracy: pass@1 at a temperature and maj@K, with paired tests.

Greedy accuracy sees one answer per problem. What RL does to the sampling distribution (sharpening it at
temperature 1.0, say) is invisible there, so ``posttrain eval policy --samples K`` also draws K samples per problem
at ``--sample-temperature`` (default 1.0) and reports, from the same samples:

- **pass@1** = ``mean_i c_i / K`` over problems, ``c_i`` the correct samples of problem i: the unbiased pass@1 of
  Chen et al. (2021) with n = K, k = 1, i.e. the policy's accuracy when it samples. Its 95% interval is
  ``mean ± t(0.975, n - 1) · s / sqrt(n)``, ``s`` the sample standard deviation of the per-problem ``c_i / K``
  (problems are the unit; the within-problem sampling noise is part of ``s``); ``[0, 1]`` with fewer than 2 problems.
- **maj@K**: self-consistency (Wang et al. 2023): the majority answer of the K samples, counting only answers in the
  required form, ties going to the answer seen first (``eval.best_of_n.vote``); the problem counts as solved when
  that answer's first sample is graded correct, and as unsolved when no sample gave an answer in the required form.
  A share with its Wilson interval (``eval.intervals``).
- **format_rate**: the share of all samples whose answer is in the required form.

Per problem, ``samples.jsonl`` keeps every sample (``samples``), ``n_correct``, ``maj_answer`` and ``maj_correct``
(``add_votes``), so two evaluations of the same problems can be paired (``eval.sampled_compare``):

- pass@1, B − A: the per-problem differences ``d_i = c_i^B / K_B - c_i^A / K_A``; their mean, the interval
  ``mean ± t(0.975, n - 1) · s_d / sqrt(n)`` and the two-sided **paired t-test** ``p = I_{ν/(ν+t²)}(ν/2, 1/2)``,
  ``t = mean / (s_d / sqrt(n))``, ``ν = n - 1`` (Student's t through the regularized incomplete beta function,
  Numerical Recipes §6.4; no scipy here). ``s_d = 0``: p is 1 when the mean is 0, else 0;
- maj@K, B − A: per-problem right/wrong pairs, so ``eval.compare.pair_stats``: Newcombe's paired interval and the
  exact McNemar test, as for greedy accuracy.

Pure functions of lists, as docs/design.md "Metric definitions" asks; formulas also in docs/metrics.md.
"""

from __future__ import annotations

import math
from typing import Any

from posttrainlab.errors import BadInput

# --- Student's t ---------------------------------------------------------------------------------------


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (Numerical Recipes ``betacf``, modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for aa in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):  # fmt: skip
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``.

    >>> round(incomplete_beta(2, 3, 0.4), 6)   # 1 - (1-x)^4 - 4x(1-x)^3 = 0.5248
    0.5248
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom: ``I_{df/(df+t²)}(df/2, 1/2)``.

    >>> round(t_two_sided_p(2.228139, 10), 4), round(t_two_sided_p(1.0, 1), 4)   # t(0.975, 10); Cauchy: 1/2
    (0.05, 0.5)
    """
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(df: float, level: float = 0.95) -> float:
    """The ``t`` with ``t_two_sided_p(t, df) = 1 - level`` (by bisection).

    >>> round(t_quantile(1), 3), round(t_quantile(10), 4), round(t_quantile(1e6), 3)
    (12.706, 2.2281, 1.96)
    """
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > 1 - level else (lo, mid)
    return (lo + hi) / 2


# --- one evaluation ------------------------------------------------------------------------------------


def mean_interval(values: list[float]) -> dict[str, Any]:
    """``{"value", "ci95", "n"}``: the mean of ``values`` (in [0, 1]) with its t interval, clipped to [0, 1].

    >>> m = mean_interval([0.0, 0.5, 1.0])   # mean 0.5, s = 0.5, t(0.975, 2) = 4.3027
    >>> m["value"], [round(x, 4) for x in m["ci95"]]
    (0.5, [0.0, 1.0])
    """
    n = len(values)
    mean = sum(values) / n if n else 0.0
    if n < 2:
        return {"value": mean, "ci95": [0.0, 1.0], "n": n}
    s = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(n - 1) * s / math.sqrt(n)
    return {"value": mean, "ci95": [max(0.0, mean - half), min(1.0, mean + half)], "n": n}


def add_votes(rows: list[dict]) -> list[dict]:
    """Each row with ``samples`` gets ``n_correct``, ``maj_answer`` and ``maj_correct`` (module docstring); in place."""
    from posttrainlab.eval.best_of_n import vote, vote_answer

    for row in rows:
        samples = row["samples"]
        chosen = vote([vote_answer(s) for s in samples])
        row["n_correct"] = sum(bool(s["correct"]) for s in samples)
        row["maj_answer"] = None if chosen is None else samples[chosen]["parsed"]
        row["maj_correct"] = chosen is not None and bool(samples[chosen]["correct"])
    return rows


def sampled_metrics(rows: list[dict], categories: list[str]) -> dict[str, Any]:
    """pass@1, maj@K and the samples' format rate, overall and per category (in ``categories``' order), of rows
    ``add_votes`` has seen."""
    from posttrainlab.eval.intervals import proportion

    ks = {len(r["samples"]) for r in rows}
    if len(ks) > 1 or 0 in ks:
        raise BadInput(f"sampled metrics need the same number of samples (> 0) for every problem, got {sorted(ks)}")
    k = ks.pop() if ks else 0

    def group(rs: list[dict]) -> tuple[dict, dict]:
        return mean_interval([r["n_correct"] / k for r in rs]), proportion(sum(r["maj_correct"] for r in rs), len(rs))

    by_cat = {c: group([r for r in rows if r["category"] == c]) for c in categories}
    pass1, maj = group(rows)
    formatted = sum(s["outcome"] in ("correct", "wrong_answer") for r in rows for s in r["samples"])
    return {
        "n_samples": k,
        "pass_at_1": {**pass1, "per_category": {c: p for c, (p, _) in by_cat.items()}},
        "maj_at_k": {"k": k, **maj, "per_category": {c: m for c, (_, m) in by_cat.items()}},
        "format_rate": formatted / (k * len(rows)) if rows else 0.0,
    }


__all__ = ["add_votes", "incomplete_beta", "mean_interval", "sampled_metrics", "t_quantile", "t_two_sided_p"]
