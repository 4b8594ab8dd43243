"""PPI++: the formulas by hand, coverage with a biased judge, the tuning of lambda, the
never-wider-than-classical guarantee, the paired difference and the edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri

from pytest_crucible.stats import PPIEstimate, ppi_mean, ppi_paired_difference
from pytest_crucible.stats.ppi import tuned_lambda

Z95 = float(ndtri(0.975))


def simulate(rng, n, big_n, *, p=0.6, bias=0.15, noise=0.2, useless=False):
    """Binary human labels (true mean ``p``) and a judge ``f = y + bias + noise``."""
    y_all = (rng.random(n + big_n) < p).astype(float)
    if useless:
        f_all = rng.random(n + big_n)
    else:
        f_all = y_all + bias + rng.normal(0.0, noise, n + big_n)
    return y_all[:n], f_all[:n], f_all[n:]


# ---------------------------------------------------------------------------
# formulas by hand
# ---------------------------------------------------------------------------
def test_small_case_by_hand_with_a_fixed_lambda():
    y = [1.0, 0.0, 1.0, 1.0]
    f = [0.9, 0.2, 0.7, 1.0]
    u = [0.8, 0.1, 0.6]
    res = ppi_mean(y, f, u, lam=0.5)
    # theta = 0.5 * mean(u) + mean(y - 0.5 f) = 0.5 * 0.5 + (0.75 - 0.5 * 0.7) = 0.65
    assert res.estimate == pytest.approx(0.65, abs=1e-15)
    resid = [1 - 0.45, 0 - 0.1, 1 - 0.35, 1 - 0.5]  # 0.55, -0.1, 0.65, 0.5; mean 0.4
    var_resid = sum((r - 0.4) ** 2 for r in resid) / 3  # (0.0225 + 0.25 + 0.0625 + 0.01) / 3 = 0.115
    var_u = ((0.3) ** 2 + (0.4) ** 2 + (0.1) ** 2) / 2  # 0.13
    se = math.sqrt(0.25 * var_u / 3 + var_resid / 4)
    assert res.se == pytest.approx(se, rel=1e-12)
    t3 = 3.182446305284263  # Student's t, 3 degrees of freedom (4 labels), 97.5%: the interval's quantile
    assert res.ci == pytest.approx((0.65 - t3 * se, 0.65 + t3 * se), rel=1e-12)
    assert res.lam == 0.5 and res.n_labelled == 4 and res.n_unlabelled == 3
    assert res.judge_mean == pytest.approx((2.8 + 1.5) / 7, rel=1e-12)
    assert res.bias == pytest.approx((0.9 - 1 + 0.2 + 0.7 - 1 + 1.0 - 1) / 4, rel=1e-12)  # -0.05
    assert res.classical == 0.75
    cse = math.sqrt(0.25 / 4)  # var([1, 0, 1, 1], ddof=1) = 0.25
    assert res.classical_se == pytest.approx(cse, rel=1e-12)
    assert res.classical_ci == pytest.approx((0.75 - t3 * cse, 0.75 + t3 * cse), rel=1e-12)


def test_tuned_lambda_formula():
    rng = np.random.default_rng(1)
    y, f, u = simulate(rng, 50, 200)
    c = np.cov(y, f, ddof=1)[0, 1]
    expected = c / (np.var(f, ddof=1) + 50 / 200 * np.var(u, ddof=1))
    assert 0 < expected < 1
    assert tuned_lambda(y, f, u) == pytest.approx(expected, rel=1e-12)
    assert ppi_mean(y, f, u).lam == pytest.approx(expected, rel=1e-12)
    # the paper's form, Cov / ((1 + n/N) Var(f)), with Var(f) pooled, is the same to first order
    pooled = np.var(np.concatenate([f, u]), ddof=1)
    assert tuned_lambda(y, f, u) == pytest.approx(c / ((1 + 50 / 200) * pooled), rel=0.15)


def test_tuned_lambda_minimises_the_estimated_variance():
    rng = np.random.default_rng(2)
    y, f, u = simulate(rng, 80, 400, noise=0.4)
    best = ppi_mean(y, f, u)
    assert 0 < best.lam < 1
    for lam in np.linspace(0.0, 1.0, 41):
        assert best.se <= ppi_mean(y, f, u, lam=float(lam)).se * (1 + 1e-12)


# ---------------------------------------------------------------------------
# coverage with a biased judge
# ---------------------------------------------------------------------------
def test_coverage_with_a_biased_judge():
    rng = np.random.default_rng(20231011)
    truth = 0.6
    ppi_cover = judge_cover = classical_cover = 0
    widths = []
    runs = 200
    for _ in range(runs):
        y, f, u = simulate(rng, 100, 900, p=truth, bias=0.15, noise=0.2)
        res = ppi_mean(y, f, u)
        ppi_cover += res.ci_low <= truth <= res.ci_high
        classical_cover += res.classical_ci[0] <= truth <= res.classical_ci[1]
        all_f = np.concatenate([f, u])  # the judge taken at its word, with a naive interval
        half = Z95 * math.sqrt(np.var(all_f, ddof=1) / all_f.shape[0])
        judge_cover += all_f.mean() - half <= truth <= all_f.mean() + half
        assert res.bias == pytest.approx(0.15, abs=0.08)
        assert res.judge_mean == pytest.approx(all_f.mean(), rel=1e-12)
        widths.append((res.ci_high - res.ci_low) / (res.classical_ci[1] - res.classical_ci[0]))
    assert ppi_cover / runs >= 0.90
    assert judge_cover / runs < 0.20
    assert classical_cover / runs >= 0.88
    assert np.mean(widths) < 0.6  # a good (if biased) judge buys a much narrower interval


def test_paired_difference_coverage_and_equivalence():
    rng = np.random.default_rng(99)
    truth = 0.1  # P(y_b = 1) - P(y_a = 1) = 0.6 - 0.5
    cover = 0
    for _ in range(200):
        n, big_n = 120, 600
        ya_all = (rng.random(n + big_n) < 0.5).astype(float)
        yb_all = np.where(rng.random(n + big_n) < 0.8, ya_all, (rng.random(n + big_n) < 0.5).astype(float))
        yb_all = np.where((yb_all == 0) & (rng.random(n + big_n) < 0.2), 1.0, yb_all)  # P(y_b) = 0.5 + 0.5*0.2 = 0.6
        fa_all = ya_all + 0.2 + rng.normal(0, 0.25, n + big_n)  # both runs judged leniently,
        fb_all = yb_all + 0.1 + rng.normal(0, 0.25, n + big_n)  # run b a little less so
        res = ppi_paired_difference(ya_all[:n], yb_all[:n], fa_all[:n], fb_all[:n], fa_all[n:], fb_all[n:])
        cover += res.ci_low <= truth <= res.ci_high
    assert cover / 200 >= 0.90
    same = ppi_mean(yb_all[:n] - ya_all[:n], fb_all[:n] - fa_all[:n], fb_all[n:] - fa_all[n:])
    assert res == same
    assert res.bias == pytest.approx(-0.1, abs=0.08)


# ---------------------------------------------------------------------------
# lambda and the width guarantee
# ---------------------------------------------------------------------------
def test_lambda_near_one_for_a_good_judge_near_zero_for_a_useless_one():
    rng = np.random.default_rng(4)
    y, f, u = simulate(rng, 200, 20_000, bias=0.05, noise=0.05)
    assert tuned_lambda(y, f, u) > 0.95
    # A judge unrelated to the labels: lam is the (clipped) sample regression slope of y on f,
    # 0 in the limit; its spread here is sd(y) / (sd(f) sqrt(n)) = 0.49 / (0.29 * 45) = 0.04.
    lams = []
    for _ in range(20):
        y, f, u = simulate(rng, 2000, 20_000, useless=True)
        res = ppi_mean(y, f, u)
        lams.append(res.lam)
        assert res.se <= res.classical_se * (1 + 1e-12)
        assert res.se == pytest.approx(res.classical_se, rel=0.01)  # so the judge changes ~nothing
    assert max(lams) < 0.15 and np.mean(lams) < 0.04


def test_never_wider_than_the_classical_interval():
    rng = np.random.default_rng(6)
    for case in range(300):
        kind = case % 3
        n = int(rng.integers(2, 60))
        big_n = int(rng.integers(1, 500))
        y, f, u = simulate(rng, n, big_n, noise=[0.05, 0.5, 1.0][kind], useless=kind == 2)
        if len(set(y.tolist())) == 1:  # a small sample of one value: refused, never a zero-width interval
            with pytest.raises(ValueError, match="the labels have no variance"):
                ppi_mean(y, f, u)
            continue
        res = ppi_mean(y, f, u)
        assert 0.0 <= res.lam <= 1.0
        assert res.se <= res.classical_se * (1 + 1e-9) + 1e-15
    # what the tuning protects against: plain PPI (lam = 1) with a useless judge is wider
    y, f, u = simulate(np.random.default_rng(8), 100, 100, useless=True)
    assert ppi_mean(y, f, u, lam=1.0).se > 1.2 * ppi_mean(y, f, u).se


# ---------------------------------------------------------------------------
# edge cases
# ---------------------------------------------------------------------------
def test_no_unlabelled_items_gives_the_labelled_mean():
    res = ppi_mean([1, 0, 1, 1, 0], [0.9, 0.1, 0.8, 0.7, 0.3], [])
    assert res.lam == 0.0 and res.n_unlabelled == 0
    assert res.estimate == res.classical == 0.6
    assert res.ci == res.classical_ci and res.se == res.classical_se
    assert ppi_mean([1, 0, 1], [1, 0, 1], [], lam=0.0).estimate == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="no unlabelled items"):
        ppi_mean([1, 0, 1], [1, 0, 1], [], lam=0.5)


def test_constant_judge_gets_lambda_zero():
    res = ppi_mean([1, 0, 1, 0], [0.5] * 4, [0.5] * 10)
    assert res.lam == 0.0 and res.estimate == 0.5 and res.se == res.classical_se
    # constant on the labelled items only: no covariance to use either
    assert ppi_mean([1, 0, 1, 0], [0.5] * 4, [0.1, 0.9, 0.4]).lam == 0.0


def test_one_unlabelled_item_uses_the_pooled_judge_variance():
    res = ppi_mean([1, 0, 1, 0, 1], [0.9, 0.2, 0.8, 0.1, 0.7], [0.6])
    assert 0 < res.lam <= 1 and math.isfinite(res.se) and res.se <= res.classical_se


def test_errors():
    with pytest.raises(ValueError, match="at least 2 labelled"):
        ppi_mean([1], [1], [0.5, 0.5])
    with pytest.raises(ValueError, match="paired"):
        ppi_mean([1, 0, 1], [1, 0], [0.5])
    with pytest.raises(ValueError, match="NaN"):
        ppi_mean([1, 0, float("nan")], [1, 0, 1], [0.5])
    with pytest.raises(ValueError, match="1-D"):
        ppi_mean([[1, 0]], [[1, 0]], [0.5])
    with pytest.raises(ValueError, match="alpha"):
        ppi_mean([1, 0], [1, 0], [0.5], alpha=0)
    with pytest.raises(ValueError, match="finite"):
        ppi_mean([1, 0], [1, 0], [0.5], lam=float("inf"))
    with pytest.raises(ValueError, match="must be paired"):
        ppi_paired_difference([1, 0], [1, 1], [1, 0], [1], [0.5], [0.5])
    with pytest.raises(ValueError, match="unlabelled_f_a and unlabelled_f_b"):
        ppi_paired_difference([1, 0], [1, 1], [1, 0], [1, 1], [0.5], [])


def test_result_interface():
    res = ppi_mean([1, 0, 1, 1], [0.9, 0.2, 0.7, 1.0], [0.8, 0.1, 0.6], alpha=0.1)
    assert isinstance(res, PPIEstimate)
    assert res.ci == (res.ci_low, res.ci_high) and res.alpha == 0.1
    d = res.to_dict()
    assert d["classical_ci"] == list(res.classical_ci) and d["estimate"] == res.estimate
    wider = ppi_mean([1, 0, 1, 1], [0.9, 0.2, 0.7, 1.0], [0.8, 0.1, 0.6], alpha=0.01)
    assert wider.ci_low < res.ci_low and wider.ci_high > res.ci_high


def test_the_public_ppi_mean_refuses_labels_with_no_variance_as_the_summary_does() -> None:
    from pytest_crucible.labels.human import no_variance
    from pytest_crucible.stats.ppi import ppi_mean, ppi_paired_difference

    with pytest.raises(ValueError) as raised:
        ppi_mean([1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0])
    assert str(raised.value) == no_variance([1.0, 1.0, 1.0])
    assert "the labels have no variance (every one is 1)" in str(raised.value)
    # paired: the same when every labelled difference is the same
    with pytest.raises(ValueError, match="no variance"):
        ppi_paired_difference([0, 1, 0], [1, 2, 1], [0, 1, 1], [1, 1, 1], [0, 1], [1, 1])
