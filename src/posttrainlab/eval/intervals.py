"""Uncertainty of an accuracy, and pass@k: pure functions of counts.

**Wilson score interval** (Wilson 1927; Brown, Cai & DasGupta 2001, "Interval Estimation for a
Binomial Proportion", who recommend it over the normal-approximation interval for small n or p near
0 or 1). For ``c`` successes in ``n`` trials, ``p = c / n`` and ``z`` the normal quantile
(1.959964 for 95%)::

    centre    = (p + z²/(2n)) / (1 + z²/n)
    halfwidth = z * sqrt(p(1-p)/n + z²/(4n²)) / (1 + z²/n)
    interval  = [centre - halfwidth, centre + halfwidth]     (always inside [0, 1])

Unlike ``p ± z sqrt(p(1-p)/n)`` it never has zero width at 0/n or n/n: ``0/20`` gives
``[0, 0.161]``, a fair statement that a model which got none of 20 right might still get 16% right.
With ``n = 0`` nothing is known and the interval is ``[0, 1]``.

**pass@k, unbiased** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1):
from ``n >= k`` samples of which ``c`` are correct, the probability that at least one of ``k``
samples drawn without replacement is correct::

    pass@k = 1 - C(n-c, k) / C(n, k)  =  1 - prod_{i=n-c+1}^{n} (1 - k/i)

computed in the product form (the paper's numerically stable version); it is 1 when ``n - c < k``.
Averaged over problems it estimates the pass@k of the policy without the bias of ``1-(1-c/n)^k``.
"""

from __future__ import annotations

import math

#: Two-sided 95% normal quantile, Phi^-1(0.975).
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` (95% by default).

    >>> lo, hi = wilson_interval(215, 500)
    >>> round(lo, 4), round(hi, 4)
    (0.3873, 0.4738)
    >>> wilson_interval(0, 0)
    (0.0, 1.0)
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At 0/n the lower bound is 0 and at n/n the upper bound is 1 exactly; floating point leaves ~1e-17.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def proportion(successes: int, n: int) -> dict:
    """A share with its 95% Wilson interval and counts, as written to metrics.json.

    >>> proportion(3, 4)["value"], proportion(3, 4)["correct"], proportion(0, 0)["value"]
    (0.75, 3, 0.0)
    """
    lo, hi = wilson_interval(successes, n)
    return {"value": successes / n if n else 0.0, "ci95": [lo, hi], "correct": successes, "n": n}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021).

    >>> pass_at_k(5, 2, 2)    # 1 - C(3,2)/C(5,2) = 1 - 3/10
    0.7
    >>> pass_at_k(4, 0, 2), pass_at_k(4, 3, 2)
    (0.0, 1.0)
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod
