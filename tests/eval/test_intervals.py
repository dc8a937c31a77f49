"""Wilson score intervals and unbiased pass@k against numbers worked out by hand."""

from __future__ import annotations

from math import comb

import pytest

from posttrainlab.eval.intervals import Z95, pass_at_k, proportion, wilson_interval


def test_wilson_215_of_500():
    """p = 0.43, z² = 3.841459, denom = 1 + z²/n = 1.007682918.

    centre = (0.43 + z²/1000) / denom = 0.433841459 / 1.007682918 = 0.4305337
    half   = z sqrt(0.43 * 0.57 / 500 + z²/1e6) / denom = 1.959964 * sqrt(0.0004940415) / denom
           = 1.959964 * 0.02222704 / 1.007682918 = 0.0432321
    interval = [0.3873016, 0.4737658]
    """
    lo, hi = wilson_interval(215, 500)
    assert lo == pytest.approx(0.3873016, abs=1e-6)
    assert hi == pytest.approx(0.4737658, abs=1e-6)


def test_wilson_half_of_eight():
    """p = 0.5, n = 8: centre 0.5; half = z sqrt(1/32 + z²/256) / (1 + z²/8)
    = 1.959964 * sqrt(0.03125 + 0.01500570) / 1.48018237 = 1.959964 * 0.2150715 / 1.48018237 = 0.2847838.
    """
    lo, hi = wilson_interval(4, 8)
    assert (lo, hi) == (pytest.approx(0.2152162, abs=1e-6), pytest.approx(0.7847838, abs=1e-6))


def test_wilson_at_the_ends():
    """0/20: centre = half = (z²/40) / (1 + z²/20), so lo = 0 and hi = z² / (n + z²) = 3.841459 / 23.841459."""
    assert wilson_interval(0, 20) == (0.0, pytest.approx(0.1611252, abs=1e-6))
    lo, hi = wilson_interval(20, 20)
    assert (lo, hi) == (pytest.approx(1 - 0.1611252, abs=1e-6), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize("c,n", [(1, 3), (7, 10), (50, 100), (999, 1000), (1, 1)])
def test_wilson_contains_the_estimate_and_stays_in_unit_interval(c, n):
    lo, hi = wilson_interval(c, n)
    assert 0.0 <= lo <= c / n <= hi <= 1.0


def test_wilson_narrows_with_more_data():
    def width(c: int, n: int) -> float:
        lo, hi = wilson_interval(c, n)
        return hi - lo

    assert width(500, 1000) < width(50, 100) < width(5, 10)


@pytest.mark.parametrize("c,n", [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(c, n):
    with pytest.raises(ValueError):
        wilson_interval(c, n)


def test_z95_is_the_975_quantile():
    from statistics import NormalDist

    assert NormalDist().inv_cdf(0.975) == pytest.approx(Z95, abs=1e-12)


def test_proportion_shape():
    assert proportion(2, 8) == {"value": 0.25, "ci95": list(wilson_interval(2, 8)), "correct": 2, "n": 8}
    assert proportion(0, 0) == {"value": 0.0, "ci95": [0.0, 1.0], "correct": 0, "n": 0}


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 1, 0.3),  # pass@1 = c/n
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 0, 2, 0.0),  # nothing correct
        (4, 3, 2, 1.0),  # n - c = 1 < k: every 2-subset holds a correct one
        (3, 1, 3, 1.0),  # k = n: any correct sample is drawn
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
    ],
)
def test_pass_at_k_by_hand(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_the_combinatorial_form():
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


@pytest.mark.parametrize("n,c,k", [(3, 1, 4), (3, 4, 1), (3, 1, 0)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
