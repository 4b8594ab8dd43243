"""Clustered paired comparison: hand cases, an independent plain-loop implementation, the
singleton == item-level invariant, the design effect, relabelling and the cluster count floor."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from pytest_crucible.stats import (
    ClusteredTest,
    Mulberry32,
    min_pairs_for_alpha,
    paired_cluster_tests,
    paired_tests,
)
from pytest_crucible.stats.clustered import cluster_codes, design_effect
from pytest_crucible.stats.power import minimum_detectable_effect

SEED = 20240917


def one(a, b, labels, **kw):
    return paired_cluster_tests([(a, b)], [labels], **{"seed": SEED, **kw})[0]


# ---------------------------------------------------------------------------
# hand-checked small case: 3 clusters of sizes 1, 2, 3, items interleaved
# ---------------------------------------------------------------------------
# item:     0    1    2    3    4    5
LABELS = ["x", "y", "z", "y", "z", "z"]
D_HAND = [3.0, 0.5, 0.25, -1.5, 0.5, 0.25]  # cluster sums: x 3, y -1, z 1; n = 6, mean = 0.5


def test_hand_case_permutation_p_from_the_eight_sign_patterns():
    sums = {"x": 0.0, "y": 0.0, "z": 0.0}
    for label, d in zip(LABELS, D_HAND):
        sums[label] += d
    assert sums == {"x": 3.0, "y": -1.0, "z": 1.0}
    observed = abs(sum(sums.values()))  # 3
    reach = 0
    for signs in itertools.product((1, -1), repeat=3):
        flipped = sum(s * v for s, v in zip(signs, sums.values()))
        reach += abs(flipped) >= observed
    # |+3-1+1|=3 |+3-1-1|=1 |+3+1+1|=5 |+3+1-1|=3 |-3-1+1|=3 |-3-1-1|=5 |-3+1+1|=1 |-3+1-1|=3
    assert reach == 6
    res = one([0.0] * 6, D_HAND, LABELS)
    assert res.p_value == reach / 8 == 0.75
    assert res.n == 6 and res.n_clusters == 3
    assert res.delta == 0.5  # the item mean, not the mean of cluster means
    assert not res.significant  # 3 clusters: the smallest possible p is 2/8


def test_hand_case_design_effect():
    # naive: var(d, ddof=1) / n
    d = D_HAND
    n, mean = 6, 0.5
    ss = sum((x - mean) ** 2 for x in d)  # 6.25 + 0 + 0.0625 + 4 + 0 + 0.0625 = 10.375
    assert ss == 10.375
    naive = ss / (n - 1) / n
    # clustered: k/(k-1) * sum_c (sum_{i in c} (d_i - mean))**2 / n**2
    # x: 3 - 0.5 = 2.5; y: -1 - 2*0.5 = -2; z: 1 - 3*0.5 = -0.5
    clustered = 3 / 2 * (2.5**2 + 2.0**2 + 0.5**2) / n**2
    expected = clustered / naive  # (1.5 * 10.5 / 36) / (10.375 / 30)
    assert expected == pytest.approx(1.2650602409638554, rel=1e-15)
    res = one([0.0] * 6, D_HAND, LABELS)
    assert res.design_effect == pytest.approx(expected, rel=1e-12)
    assert design_effect(D_HAND, LABELS) == pytest.approx(expected, rel=1e-12)
    # planning numbers: the item formulas with sd * sqrt(design effect)
    sd = math.sqrt(ss / (n - 1))
    assert res.sd_diff == pytest.approx(sd, rel=1e-12)
    assert res.mde == pytest.approx(minimum_detectable_effect(sd * math.sqrt(expected), 6), rel=1e-12)
    # not significant -> required items, at least 6 clusters of the mean size (2 items)
    assert res.required_n is not None and res.required_n >= 12


def test_cluster_codes_are_by_first_appearance_and_none_is_its_own_cluster():
    codes, k = cluster_codes(["b", "a", "b", None, "c", None, "a"])
    assert codes.tolist() == [0, 1, 0, 2, 3, 4, 1] and k == 5


# ---------------------------------------------------------------------------
# an independent implementation, written plainly, on the same Mulberry32 draws
# ---------------------------------------------------------------------------
def plain_cluster_test(d, labels, seed, n_resamples, n_permutations, confidence=0.95):
    order = []
    members = {}
    for i, label in enumerate(labels):
        if label not in members:
            members[label] = []
            order.append(label)
        members[label].append(i)
    k, n = len(order), len(d)
    sums = [sum(d[i] for i in members[c]) for c in order]
    sizes = [len(members[c]) for c in order]
    delta = sum(d) / n

    # bootstrap: row r takes draws r*k .. r*k + k - 1, cluster = floor(u * k)
    u = Mulberry32(seed).random((n_resamples, k))
    thetas = []
    for r in range(n_resamples):
        num = den = 0.0
        for j in range(k):
            c = math.floor(u[r, j] * k)
            num += sums[c]
            den += sizes[c]
        thetas.append(num / den)
    less = sum(t < delta - 1e-9 for t in thetas)
    ties = sum(abs(t - delta) <= 1e-9 for t in thetas)
    z0 = float(ndtri((less + 0.5 * ties) / n_resamples))
    # acceleration: leave one cluster out, the same ratio statistic
    jack = []
    for c in range(k):
        num = sum(sums[j] for j in range(k) if j != c)
        den = sum(sizes[j] for j in range(k) if j != c)
        jack.append(num / den)
    jbar = sum(jack) / k
    num3 = sum((jbar - t) ** 3 for t in jack)
    den2 = sum((jbar - t) ** 2 for t in jack)
    accel = num3 / (6.0 * den2**1.5)
    z = float(ndtri((1 - confidence) / 2))
    levels = [float(ndtr(z0 + (z0 + zz) / (1 - accel * (z0 + zz)))) for zz in (z, -z)]
    lo, hi = np.quantile(np.array(thetas), levels, method="linear")
    # small-sample correction: the bootstrap's plug-in variance times k / (k - 1), Student's t on k - 1
    # degrees of freedom in place of the normal (scipy.stats, not the code's own special functions)
    from scipy import stats as scipy_stats

    widen = math.sqrt(k / (k - 1)) * scipy_stats.t.ppf(0.5 + confidence / 2, k - 1) / scipy_stats.norm.ppf(0.5 + confidence / 2)
    lo, hi = delta + widen * (lo - delta), delta + widen * (hi - delta)

    # permutation: the same stream from draw 0, sign -1 when u >= 1/2, whole clusters flip
    v = Mulberry32(seed).random((n_permutations, k))
    observed = abs(sum(sums))
    count = 0
    for r in range(n_permutations):
        s = sum(-x if v[r, j] >= 0.5 else x for j, x in enumerate(sums))
        count += abs(s) >= observed - 1e-9
    p = (count + 1) / (n_permutations + 1)
    return delta, float(lo), float(hi), p, thetas


def test_against_an_independent_plain_implementation():
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 6, size=20)  # 20 clusters of 1..5 items: 2**20 > n_permutations
    labels = [f"doc{c}" for c, m in enumerate(sizes) for _ in range(m)]
    perm = rng.permutation(len(labels))
    labels = [labels[i] for i in perm]  # interleaved
    effect = rng.normal(0.0, 0.3, size=20)
    d = np.array([effect[int(lab[3:])] + rng.normal(0.05, 0.2) for lab in labels])
    a = rng.random(len(d))
    b = a + d
    d_used = (b - a).tolist()  # the differences the code sees

    res = one(a, b, labels, n_resamples=2000, n_permutations=2000)
    delta, lo, hi, p, thetas = plain_cluster_test(d_used, labels, SEED, 2000, 2000)
    assert res.delta == pytest.approx(delta, rel=1e-12)
    assert res.ci_low == pytest.approx(lo, rel=1e-9, abs=1e-12)
    assert res.ci_high == pytest.approx(hi, rel=1e-9, abs=1e-12)
    assert res.p_value == p
    assert res.n_clusters == 20 and res.n == len(d)
    # the bootstrap distribution has the spread of the cluster-robust standard error
    se = math.sqrt(res.design_effect * np.var(d_used, ddof=1) / len(d_used))
    assert np.std(thetas) == pytest.approx(se, rel=0.2)


def test_exact_enumeration_matches_brute_force_for_small_k():
    rng = np.random.default_rng(3)
    labels = [c for c in range(8) for _ in range(c % 3 + 1)]
    d = rng.normal(0.1, 1.0, size=len(labels))
    res = one(np.zeros_like(d), d, labels)  # 2**8 = 256 <= 10,000 patterns: exact
    sums = [sum(d[i] for i in range(len(d)) if labels[i] == c) for c in range(8)]
    observed = abs(sum(sums))
    reach = sum(abs(sum(s * x for s, x in zip(signs, sums))) >= observed - 1e-9
                for signs in itertools.product((1, -1), repeat=8))
    assert res.p_value == reach / 256


# ---------------------------------------------------------------------------
# singleton clusters: exactly the item-level test
# ---------------------------------------------------------------------------
def test_singleton_clusters_equal_paired_tests_bit_for_bit():
    rng = np.random.default_rng(11)
    n = 150
    a1, b1 = rng.random(n), rng.random(n)
    a2 = (rng.random(n) < 0.5).astype(float)
    b2 = np.where(rng.random(n) < 0.7, a2, 1 - a2)
    a3 = rng.binomial(3, 0.5, 12) / 3
    b3 = rng.binomial(3, 0.6, 12) / 3
    pairs = [(a1, b1), (a2, b2), (a3, b3), (a2, a2), (a3, a3 + 0.25)]
    labels = [[f"q{i}" for i in range(n)], [None] * n, list(range(100, 112)), list(range(n)), [None] * 12]
    for kw in ({}, {"n_resamples": 999, "n_permutations": 100, "confidence": 0.9, "alpha": 0.1}):
        clustered = paired_cluster_tests(pairs, labels, seed=SEED, **kw)
        plain = paired_tests(pairs, seed=SEED, **kw)
        for c, p, constant in zip(clustered, plain, [False, False, False, True, True]):
            got = c.to_dict()
            assert got.pop("n_clusters") == p.n
            deff = got.pop("design_effect")
            assert got == p.to_dict()  # every float identical
            assert deff == (None if constant else 1.0)  # None: no variance (float noise aside)
        # the formula gives 1 too
        assert design_effect(b1 - a1, range(n)) == pytest.approx(1.0, rel=1e-12)


# ---------------------------------------------------------------------------
# copied items: the design effect and the interval width
# ---------------------------------------------------------------------------
def test_items_copied_five_times_have_design_effect_near_five_and_wider_ci():
    rng = np.random.default_rng(5)
    base_a = rng.random(40)
    base_b = np.clip(base_a + rng.normal(0.05, 0.25, 40), 0, 1)
    a = np.repeat(base_a, 5)
    b = np.repeat(base_b, 5)
    labels = np.repeat([f"doc{i}" for i in range(40)], 5)
    res = one(a, b, labels)
    naive = paired_tests([(a, b)], seed=SEED)[0]
    # exact copies: clustered = 40/39 * 25 * SS / 200**2, naive = 5 * SS / 199 / 200, with SS the
    # sum of squared deviations of the 40 originals: ratio = 40/39 * 199/40 = 199/39 = 5.10
    assert 4.0 <= res.design_effect <= 6.0
    assert res.design_effect == pytest.approx(199 / 39, rel=1e-12)
    ratio = (res.ci_high - res.ci_low) / (naive.ci_high - naive.ci_low)
    assert ratio == pytest.approx(math.sqrt(5), rel=0.25)
    assert res.delta == pytest.approx(naive.delta, rel=1e-12)
    assert res.mde == pytest.approx(naive.mde * math.sqrt(res.design_effect), rel=1e-12)
    # the copies are one item each: the cluster test equals the item test on the 40 originals
    originals = paired_tests([(base_a, base_b)], seed=SEED, n_permutations=10_000)[0]
    assert res.p_value == originals.p_value  # same 40-entry sign stream, same cluster sums x 5


def test_clustering_matters_for_significance():
    # A shift carried by a few documents: significant item-wise, not cluster-wise.
    rng = np.random.default_rng(9)
    shifts = np.array([0.5, 0.4, -0.3, 0.3, -0.2, 0.35, -0.25, 0.2])  # mean 0.125, sd 0.33
    labels = np.repeat(np.arange(8), 25)
    d = shifts[labels] + rng.normal(0.0, 0.02, 200)
    naive = paired_tests([(np.zeros(200), d)], seed=SEED)[0]
    res = one(np.zeros(200), d, labels)
    assert naive.significant
    assert not res.significant
    assert res.design_effect > 15
    assert res.ci_high - res.ci_low > 4 * (naive.ci_high - naive.ci_low)


# ---------------------------------------------------------------------------
# relabelling, determinism, the cluster floor
# ---------------------------------------------------------------------------
def test_relabelling_the_same_partition_changes_nothing():
    rng = np.random.default_rng(13)
    m = rng.integers(1, 5, 30)
    labels = [c for c, size in enumerate(m) for _ in range(size)]
    order = rng.permutation(len(labels))
    labels = [labels[i] for i in order]
    a = rng.random(len(labels))
    b = a + rng.normal(0.03, 0.2, len(labels))
    names = {c: f"source/{(c * 7919) % 1000}.pdf" for c in range(30)}
    first = one(a, b, labels)
    again = one(a, b, [names[c] for c in labels])
    tupled = one(a, b, [("doc", -c) for c in labels])
    assert first == again == tupled
    assert first.to_dict() == again.to_dict()


def test_deterministic_for_a_seed_and_seed_matters():
    rng = np.random.default_rng(17)
    labels = np.repeat(np.arange(30), 3)
    a = rng.random(90)
    b = a + rng.normal(0.02, 0.2, 90)
    first = one(a, b, labels)
    assert one(a, b, labels) == first  # second call: cached matrices, same bits
    other = paired_cluster_tests([(a, b)], [labels], seed=SEED + 1)[0]
    assert other.delta == first.delta and other.ci != first.ci


@pytest.mark.parametrize("k", [2, 3, 4, 5])
@pytest.mark.parametrize("n_permutations", [10, 20, 10_000])
def test_fewer_than_six_clusters_is_never_significant(k, n_permutations):
    labels = np.repeat(np.arange(k), 4)
    d = 1.0 + 0.01 * np.arange(4 * k)  # a huge, consistent improvement
    res = one(np.zeros(4 * k), d, labels, n_permutations=n_permutations)
    assert res.ci_low > 0  # the interval alone would pass
    assert not res.significant
    assert res.required_n is not None and res.required_n >= 4 * min_pairs_for_alpha(0.05)


def test_six_clusters_can_be_significant():
    labels = np.repeat(np.arange(6), 4)
    d = 1.0 + 0.01 * np.arange(24)
    res = one(np.zeros(24), d, labels)
    assert res.p_value == 2 / 64 and res.significant and res.required_n is None


def test_constant_and_zero_differences():
    labels = np.repeat(np.arange(10), 3)
    zero = one(np.ones(30), np.ones(30), labels)
    assert (zero.delta, zero.ci_low, zero.ci_high, zero.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert zero.design_effect is None and not zero.significant
    shifted = one(np.zeros(30), np.full(30, 0.25), labels)
    assert shifted.ci == (0.25, 0.25) and shifted.design_effect is None
    assert shifted.p_value == 2 / 1024 and shifted.significant
    # cluster means all equal, items vary: every resample gives the same ratio
    even = one(np.zeros(30), np.tile([0.5, -0.5, 0.0], 10), labels)
    assert even.ci == (0.0, 0.0) and even.p_value == 1.0


def test_result_interface():
    res = one([0, 0, 0, 0], [1, 2, 1, 3], ["p", "p", "q", "q"])
    assert isinstance(res, ClusteredTest)
    assert res.ci == (res.ci_low, res.ci_high) and res.p == res.p_value
    d = res.to_dict()
    assert d["n_clusters"] == 2 and "design_effect" in d and d["n"] == 4


def test_bad_input():
    with pytest.raises(ValueError, match="labels for 3 paired items"):
        one([0, 0, 0], [1, 2, 3], ["a", "b"])
    with pytest.raises(ValueError, match="at least 2 clusters"):
        one([0, 0, 0], [1, 2, 3], ["a", "a", "a"])
    with pytest.raises(ValueError, match="cluster label sequences for 1 metrics"):
        paired_cluster_tests([([0, 0], [1, 2])], [], seed=1)
    with pytest.raises(TypeError, match="hashable"):
        one([0, 0], [1, 2], [["a"], ["b"]])
    with pytest.raises(TypeError, match="not a string"):
        one([0, 0], [1, 2], "ab")
    with pytest.raises(ValueError, match="same length"):
        one([0, 0, 0], [1, 2], ["a", "b"])
    with pytest.raises(ValueError, match="alpha"):
        one([0, 0], [1, 2], ["a", "b"], alpha=1.5)


@pytest.mark.parametrize("k", [2, 10, 20, 30, 200])
def test_the_small_sample_factor_is_the_cluster_robust_t_correction(k):
    from scipy import stats as scipy_stats

    from pytest_crucible.stats.clustered import small_sample_factor

    expected = math.sqrt(k / (k - 1)) * scipy_stats.t.ppf(0.975, k - 1) / scipy_stats.norm.ppf(0.975)
    assert small_sample_factor(k, 0.95) == pytest.approx(expected, rel=1e-9)
    assert small_sample_factor(k, 0.95) > 1.0  # never narrower than the bootstrap's own interval
