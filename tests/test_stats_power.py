"""Power helpers, Holm adjustment and the paired_test convenience wrapper."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_crucible.stats import (
    PairedTest,
    holm_adjust,
    min_pairs_for_alpha,
    minimum_detectable_effect,
    paired_test,
    required_sample_size,
)


# ---------------------------------------------------------------------------
# minimum detectable effect / sample size
# ---------------------------------------------------------------------------
def test_mde_hand_number():
    # z_{0.975} = 1.959964, z_{0.8} = 0.841621 -> (1.95996 + 0.84162) / sqrt(100)
    assert minimum_detectable_effect(1.0, 100) == pytest.approx(0.28016, abs=1e-5)
    assert minimum_detectable_effect(1.0, 100) == pytest.approx(
        (1.959963984540054 + 0.8416212335729143) / 10, rel=1e-12
    )


def test_mde_other_levels_against_scipy_norm():
    for sd, n, alpha, power in [(0.3, 1000, 0.05, 0.8), (2.0, 50, 0.01, 0.9), (0.5, 7, 0.1, 0.5)]:
        z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
        assert minimum_detectable_effect(sd, n, alpha, power) == pytest.approx(
            z * sd / math.sqrt(n), rel=1e-12
        )
    # alpha=0.1, power=0.5: z_{0.95} + 0 = 1.644854 -> 1.644854 * 0.5 / sqrt(7) = 0.310848
    assert minimum_detectable_effect(0.5, 7, 0.1, 0.5) == pytest.approx(0.310848, abs=1e-6)
    assert minimum_detectable_effect(0.0, 10) == 0.0


def test_required_sample_size_hand_numbers():
    # n = ((1.95996 + 0.84162) * sd / delta)**2
    assert required_sample_size(0.28016, 1.0) == 100  # 99.9997 -> 100
    assert required_sample_size(0.1, 1.0) == 785  # 784.886 -> 785
    assert required_sample_size(-0.1, 1.0) == 785  # direction does not matter
    assert required_sample_size(0.05, 0.2) == 126  # (2.80158 * 4)**2 = 125.58
    # exact inverse of the MDE is not pushed up by float noise
    assert required_sample_size(minimum_detectable_effect(0.37, 400), 0.37) == 400


def test_required_sample_size_edge_cases():
    assert required_sample_size(0.0, 1.0) is None
    assert required_sample_size(0.0, 0.0) is None
    assert required_sample_size(0.5, 0.0) == 2  # no noise: the minimum of 2 pairs
    assert required_sample_size(1e-300, 1.0) is None  # beyond any finite n
    with pytest.raises(ValueError):
        required_sample_size(0.1, -1.0)
    with pytest.raises(ValueError):
        required_sample_size(0.1, 1.0, alpha=0.0)
    with pytest.raises(ValueError):
        minimum_detectable_effect(1.0, 0)
    with pytest.raises(ValueError):
        minimum_detectable_effect(1.0, 10, power=1.0)


@settings(max_examples=100, deadline=None)
@given(
    st.floats(0.01, 5.0),
    st.integers(2, 100_000),
)
def test_required_n_inverts_mde(sd, n):
    assert required_sample_size(minimum_detectable_effect(sd, n), sd) == n


# ---------------------------------------------------------------------------
# Holm
# ---------------------------------------------------------------------------
def test_holm_hand_example():
    # m = 4, sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06,
    # 0.04*1 = 0.04 -> running max 0.06; back in input order:
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_and_edge_cases():
    # 0.5*2 = 1.0, then max(1.0, 0.6*1) = 1.0
    assert holm_adjust([0.5, 0.6]) == [1.0, 1.0]
    assert holm_adjust([0.7, 0.2, 0.9]) == pytest.approx([1.0, 0.6, 1.0])  # 0.6, 1.4, 0.9
    assert holm_adjust([]) == []
    assert holm_adjust([0.02]) == [0.02]
    assert holm_adjust((0.01, 0.01)) == [0.02, 0.02]
    with pytest.raises(ValueError):
        holm_adjust([0.1, float("nan")])
    with pytest.raises(ValueError):
        holm_adjust([1.2])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), max_size=30))
def test_holm_properties(ps):
    adj = holm_adjust(ps)
    assert len(adj) == len(ps)
    m = len(ps)
    for p, q in zip(ps, adj):
        assert p <= q + 1e-15 and q <= 1.0
        assert q <= min(1.0, m * p) + 1e-15  # never worse than Bonferroni
    order = np.argsort(ps, kind="stable")
    sorted_adj = [adj[i] for i in order]
    assert all(x <= y for x, y in itertools.pairwise(sorted_adj))  # monotone


# ---------------------------------------------------------------------------
# paired_test
# ---------------------------------------------------------------------------
def test_paired_test_detects_real_shift():
    rng = np.random.default_rng(8)
    a = rng.random(400)
    b = np.clip(a + rng.normal(0.05, 0.1, 400), 0, 1)
    t = paired_test(a, b, n_resamples=4000, n_permutations=4000)
    assert isinstance(t, PairedTest)
    assert t.significant and t.ci_low > 0 and t.p_value < 0.05
    assert t.required_n is None
    assert t.sd_diff == pytest.approx(np.std(b - a, ddof=1))
    assert t.mde == pytest.approx(minimum_detectable_effect(t.sd_diff, 400))
    assert t.ci == (t.ci_low, t.ci_high) and t.p == t.p_value
    assert t.to_dict()["delta"] == t.delta


def test_paired_test_null_reports_required_n():
    rng = np.random.default_rng(9)
    a = rng.random(60)
    b = np.clip(a + rng.normal(0.0, 0.2, 60), 0, 1)
    t = paired_test(a, b, n_resamples=4000, n_permutations=4000)
    assert not t.significant
    assert t.required_n == required_sample_size(t.delta, t.sd_diff)
    assert t.required_n > 60


def test_paired_test_needs_both_gates():
    # 5 pairs all improved by 1: the CI is [1, 1] (excludes 0) but the exact
    # permutation p is 2/32 = 0.0625 >= 0.05, so not significant.
    t = paired_test([0] * 5, [1] * 5)
    assert t.ci == (1.0, 1.0) and t.p_value == 2 / 32
    assert not t.significant
    # sd = 0 would give required_n = 2, but the sign-flip test needs
    # 2 / 2**n < 0.05, i.e. at least 6 pairs
    assert min_pairs_for_alpha(0.05) == 6
    assert min_pairs_for_alpha(0.01) == 8  # 2/128 = 0.0156 >= 0.01, 2/256 < 0.01
    with pytest.raises(ValueError):
        min_pairs_for_alpha(0.0)
    assert t.required_n == 6
    t6 = paired_test([0] * 6, [1] * 6)
    assert t6.significant and t6.p_value == 2 / 64


def test_paired_test_identical_runs():
    t = paired_test([0.1, 0.5, 0.9], [0.1, 0.5, 0.9])
    assert (t.delta, t.ci, t.p_value, t.significant) == (0.0, (0.0, 0.0), 1.0, False)
    assert t.required_n is None and t.sd_diff == 0.0 and t.mde == 0.0


def test_paired_test_validates():
    with pytest.raises(ValueError):
        paired_test([1.0], [1.0])
    with pytest.raises(ValueError):
        paired_test([0, 1], [1, 0], alpha=1.5)
