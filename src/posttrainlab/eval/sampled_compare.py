"""Two evaluations' sampled outcomes paired problem by problem: pass@1 and maj@K, B − A (``eval.sampled``'s formulas).

``paired_sampled(a, b)`` takes two evaluations' per-problem sampled outcomes (``samples``, ``n_correct``,
``maj_correct`` of each ``samples.jsonl`` row; ``runners.compare.read_sampled`` reads them) and returns pass@1's
paired difference with its t interval and paired t-test, and maj@K's with Newcombe's interval and the exact McNemar
test (``eval.compare.pair_stats``), overall and per category. ``posttrain eval compare A B`` adds it when both sides
hold samples.
"""

from __future__ import annotations

import math
from typing import Any

from posttrainlab.eval.compare import ALPHA, paired
from posttrainlab.eval.sampled import t_quantile, t_two_sided_p

#: ``{problem id: (category, correct samples, samples, majority vote correct)}``
Sampled = dict[str, tuple[str, int, int, bool]]


def paired_means(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    """``n, mean_a, mean_b, diff, ci, t, p, significant`` of per-problem ``(a, b)`` values (module docstring).

    >>> s = paired_means([(0.0, 0.5), (0.25, 0.25), (0.5, 1.0), (0.25, 0.5)])  # d = .5, 0, .5, .25: s_d = .2394
    >>> s["diff"], round(s["t"], 4), round(s["p"], 4)
    (0.3125, 2.6112, 0.0796)
    """
    n = len(pairs)
    if n == 0:
        return {"n": 0, "mean_a": 0.0, "mean_b": 0.0, "diff": 0.0, "ci": [-1.0, 1.0], "t": None, "p": 1.0,
                "significant": False}  # fmt: skip
    d = [b - a for a, b in pairs]
    diff = sum(d) / n
    out = {"n": n, "mean_a": sum(a for a, _ in pairs) / n, "mean_b": sum(b for _, b in pairs) / n, "diff": diff}
    s = math.sqrt(sum((x - diff) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    if n < 2:
        t, p, ci = None, 1.0, [-1.0, 1.0]
    elif s == 0.0:
        t, p, ci = None, 1.0 if diff == 0 else 0.0, [diff, diff]
    else:
        se = s / math.sqrt(n)
        t, half = diff / se, t_quantile(n - 1) * se
        p, ci = t_two_sided_p(t, n - 1), [max(-1.0, diff - half), min(1.0, diff + half)]
    return {**out, "ci": ci, "t": t, "p": p, "significant": p < ALPHA}


def paired_sampled(a: Sampled, b: Sampled, names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """B against A: ``{"pass_at_1": {"overall", "categories"}, "maj_at_k": eval.compare.paired(...) | None}``.

    The problems must be the same (``eval.compare.paired``'s refusal); maj@K is compared only when both drew the
    same K (``None`` otherwise: a majority of 4 and one of 16 are different measures).
    """
    maj = paired({i: (v[0], v[3]) for i, v in a.items()}, {i: (v[0], v[3]) for i, v in b.items()}, names)
    cats = list(maj["categories"])

    def stats(ids: list[str]) -> dict[str, Any]:
        return paired_means([(a[i][1] / a[i][2], b[i][1] / b[i][2]) for i in ids])

    same_k = {v[2] for v in a.values()} == {v[2] for v in b.values()} and len({v[2] for v in a.values()}) == 1
    return {
        "pass_at_1": {
            "overall": stats(list(a)),
            "categories": {c: stats([i for i in a if a[i][0] == c]) for c in cats},
        },
        "maj_at_k": maj if same_k else None,
    }


__all__ = ["Sampled", "paired_means", "paired_sampled"]
