"""Paired sign-flip permutation test: hand cases, brute force, scipy."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_crucible.stats import Mulberry32, paired_permutation_test
from pytest_crucible.stats.permutation import permutation_signs


def abs_mean_diff(x, y, axis=-1):
    return np.abs(np.mean(y - x, axis=axis))


def scipy_p(a, b, n_resamples, seed):
    # Same statistic |mean(b - a)| and one-sided "greater" on it == our
    # two-sided test; "samples" swaps a_i <-> b_i within pairs == sign flips.
    return stats.permutation_test(
        (a, b),
        abs_mean_diff,
        permutation_type="samples",
        vectorized=True,
        alternative="greater",
        n_resamples=n_resamples,
        rng=np.random.default_rng(seed),
    ).pvalue


# ---------------------------------------------------------------------------
# hand-checkable cases
# ---------------------------------------------------------------------------
def test_three_pairs_by_hand():
    # d = [1, 2, 3], observed sum 6.  The 8 sign patterns give sums
    #   +++ 6, ++- 0, +-+ 2, -++ 4, +-- -4, -+- -2, --+ 0, --- -6
    # |sum| >= 6 for +++ and --- only: p = 2/8 = 0.25.
    assert paired_permutation_test([0, 0, 0], [1, 2, 3]) == 0.25


def test_small_cases_by_hand():
    # d = [1, 1]: sums 2, 0, 0, -2 -> 2 of 4 patterns reach |2|: p = 0.5
    assert paired_permutation_test([0, 0], [1, 1]) == 0.5
    # d = [1, -1]: observed 0, every pattern ties: p = 1
    assert paired_permutation_test([0, 1], [1, 0]) == 1.0
    # d = [1, 1, 1, 1, 1, 1]: only all-plus/all-minus reach 6: p = 2/64
    assert paired_permutation_test([0] * 6, [1] * 6) == 2 / 64
    # d = [0.1, 0.2, 0.3]: same pattern structure as [1, 2, 3], but
    # 0.1 + 0.2 - 0.3 != 0 in floats; the tie tolerance keeps p = 0.25
    assert paired_permutation_test([0, 0, 0], [0.1, 0.2, 0.3]) == 0.25


def test_all_zero_differences_give_one():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert paired_permutation_test([0.3, 0.5], [0.3, 0.5]) == 1.0
        assert paired_permutation_test(np.ones(500), np.ones(500)) == 1.0


@pytest.mark.parametrize(
    "a,b,match",
    [
        ([1.0], [2.0], "at least 2"),
        ([1.0, 2.0], [1.0], "same length"),
        ([1.0, 2.0], [np.nan, 1.0], "NaN"),
    ],
)
def test_invalid_input(a, b, match):
    with pytest.raises(ValueError, match=match):
        paired_permutation_test(a, b)


def test_invalid_parameters():
    with pytest.raises(ValueError, match="n_permutations"):
        paired_permutation_test([0, 1], [1, 1], n_permutations=0)


# ---------------------------------------------------------------------------
# exact mode == brute force == scipy's exact mode
# ---------------------------------------------------------------------------
def brute_force_p(d):
    obs = abs(sum(d))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        if abs(sum(s * x for s, x in zip(signs, d))) >= obs - 1e-9:
            hits += 1
    return hits / 2 ** len(d)


@pytest.mark.parametrize("n", [2, 5, 9, 13])
@pytest.mark.parametrize("kind", ["binary", "integer", "continuous"])
def test_exact_mode_matches_brute_force_and_scipy(n, kind):
    rng = np.random.default_rng(100 + n)
    if kind == "binary":
        a, b = (rng.random((2, n)) < 0.5).astype(float)
    elif kind == "integer":
        a, b = rng.integers(0, 5, (2, n)).astype(float)
    else:
        a, b = rng.random((2, n))
    p = paired_permutation_test(a, b, n_permutations=10_000)  # 2**13 = 8192 <= 10,000
    assert p == pytest.approx(brute_force_p(list(b - a)), abs=1e-15)
    assert p == pytest.approx(scipy_p(a, b, 10_000, 0), abs=1e-15)  # scipy is exact too


def test_exact_threshold():
    # 2**14 = 16384 > 10,000: randomized, so p is a multiple of 1/10,001
    a, b = np.random.default_rng(1).random((2, 14))
    p = paired_permutation_test(a, b)
    assert round(p * 10_001) == pytest.approx(p * 10_001, abs=1e-6)
    # and exact again once n_permutations allows it
    assert paired_permutation_test(a, b, n_permutations=2**14) == pytest.approx(
        brute_force_p(list(b - a)), abs=1e-15
    )


# ---------------------------------------------------------------------------
# randomized mode
# ---------------------------------------------------------------------------
def test_randomized_signs_come_from_mulberry32_row_major():
    n, N, seed = 20, 300, 77
    bits = Mulberry32(seed).integers(2, (N, n))
    np.testing.assert_array_equal(permutation_signs(n, N, seed), 1 - 2 * bits)
    rng = np.random.default_rng(3)
    a, b = rng.random((2, n))
    d = b - a
    stats_ = np.abs((1 - 2 * bits) @ d)
    expected = (np.count_nonzero(stats_ >= abs(d.sum()) - 1e-12) + 1) / (N + 1)
    assert paired_permutation_test(a, b, n_permutations=N, seed=seed) == expected


def make_case(kind, n, seed):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        a = rng.normal(0.6, 0.15, n)
        b = a + rng.normal(0.02, 0.1, n)
    elif kind == "skewed":
        a = rng.exponential(1.0, n)
        b = a + rng.exponential(0.5, n) ** 2 - 0.3
    else:
        a = (rng.random(n) < 0.6).astype(float)
        b = np.where(rng.random(n) < 0.2, 1.0 - a, a)
    return a, b


@pytest.mark.parametrize(
    "kind,n,seed",
    [
        ("normal", 20, 1),
        ("normal", 150, 2),
        ("skewed", 40, 3),
        ("skewed", 300, 4),
        ("binary", 60, 5),
        ("binary", 300, 6),
    ],
)
def test_randomized_agrees_with_scipy_within_monte_carlo_error(kind, n, seed):
    """Both p-values estimate the same exact p with N = 10,000 random patterns.

    Each is (count + 1) / (N + 1) with count ~ Binomial(N, p), so the
    difference has sd ~ sqrt(2 p (1 - p) / N) <= 0.0071; we allow 5 sd
    (plus 2/N for the +1 terms).
    """
    a, b = make_case(kind, n, seed)
    N = 10_000
    ours = paired_permutation_test(a, b, n_permutations=N, seed=seed)
    ref = scipy_p(a, b, N, seed)
    p = (ours + ref) / 2
    tol = 5 * np.sqrt(2 * max(p * (1 - p), 1 / N) / N) + 2 / N
    assert abs(ours - ref) <= tol


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.floats(0, 1, allow_nan=False)),
        min_size=2,
        max_size=40,
    ),
    st.integers(0, 2**32 - 1),
)
def test_p_value_in_unit_interval_and_symmetric(pairs, seed):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    p = paired_permutation_test(a, b, n_permutations=500, seed=seed)
    assert 0.0 < p <= 1.0
    # swapping the runs flips every sign: identical p
    assert paired_permutation_test(b, a, n_permutations=500, seed=seed) == p
    assert paired_permutation_test(a, a, n_permutations=500, seed=seed) == 1.0
