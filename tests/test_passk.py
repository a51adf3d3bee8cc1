"""The pass@k estimator (Chen et al. 2021) against hand-computed values and exact fractions."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from reward_service.rescore.passk import mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (10, 0, 1, 0.0),  # nothing passes
        (10, 10, 1, 1.0),  # everything passes
        (5, 2, 1, 0.4),  # pass@1 = c/n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # n - c = 3 < k: every draw of 4 holds a pass
        (5, 2, 5, 1.0),
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
        (200, 1, 100, 0.5),  # 1 - C(199,100)/C(200,100) = 1 - 100/200
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
    ],
)
def test_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n,k", [(0, 1), (3, 4), (1, 2), (9, 10)])
def test_k_above_n_is_undefined(n, k):
    assert pass_at_k(n, 0, k) is None
    assert pass_at_k(n, n, k) is None


@pytest.mark.parametrize("n,c,k", [(50, 7, 10), (100, 3, 1), (1000, 13, 100), (5000, 1, 2500), (3000, 2990, 5)])
def test_equals_exact_binomial_ratio(n, c, k):
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9, abs=1e-12)


def test_large_n_stays_finite():
    # C(20000, 10000) has over 6000 digits: the product form never builds it.
    value = pass_at_k(20000, 1, 10000)
    assert value == pytest.approx(0.5)


@pytest.mark.parametrize("n,c,k", [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, -3)])
def test_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_skips_undefined_problems():
    # (3,2): pass@2 = 1; (1,1): k > n, skipped; (5,0): 0
    assert mean_pass_at_k([(3, 2), (1, 1), (5, 0)], 2) == (pytest.approx(0.5), 2)
    assert mean_pass_at_k([(3, 2), (1, 1), (5, 0)], 1) == (pytest.approx((2 / 3 + 1 + 0) / 3), 3)
    assert mean_pass_at_k([(1, 1), (2, 0)], 5) == (None, 0)
    assert mean_pass_at_k([], 1) == (None, 0)
