"""Paired bootstrap confidence interval (BCa) for a mean difference.

Method (Efron 1987, "Better bootstrap confidence intervals"; Efron &
Tibshirani 1993, ch. 14): for paired scores ``a`` (baseline run) and ``b``
(candidate run) over the same ``n`` items, let ``d = b - a`` and
``theta_hat = mean(d)``.

1. Resampling.  ``B = n_resamples`` bootstrap samples of item indices are
   drawn with replacement from one :class:`~.prng.Mulberry32` stream seeded
   with ``seed``: the ``B x n`` index matrix is filled row-major, index =
   ``floor(u * n)``.  ``theta*_b`` is the mean of ``d`` over row ``b``.
   (Internally ``theta* = counts @ d / n`` with ``counts`` the ``B x n``
   matrix of how often each item is drawn in each row; it depends only on
   ``(n, B, seed)``.  Up to 64 MiB (uint8, e.g. n = 1,000 and B = 10,000 is
   10 MB) it is cached, which makes repeated calls over many metrics of the
   same golden set cheap; above that it is streamed in blocks of rows and
   never held whole, and :func:`pytest_crucible.stats.paired_tests` draws
   the stream once for all metrics of a comparison.  Same bits either way;
   see :mod:`.resampling`.)
2. Bias correction.  ``z0 = Phi^-1(p0)`` with
   ``p0 = (#{theta* < theta_hat} + 0.5 * #{theta* == theta_hat}) / B``.
   Resample sums that differ from ``n * theta_hat`` by at most
   ``1e-12 * sum(|d|)`` count as ties, so metrics on a coarse grid (thirds,
   fifths...) are not split by float rounding noise.  ``p0`` is clipped to
   ``[0.5/B, 1 - 0.5/B]`` so ``z0`` stays finite.
3. Acceleration from the leave-one-out jackknife of the mean.  With
   ``theta_(i)`` the mean without item ``i`` and ``theta_(.)`` their average,
   ``a = sum((theta_(.) - theta_(i))**3) / (6 * sum((theta_(.) - theta_(i))**2)**1.5)``.
   For the mean ``theta_(.) - theta_(i) = (d_i - mean(d)) / (n - 1)``, so
   ``a = sum(c**3) / (6 * sum(c**2)**1.5)`` with ``c = d - mean(d)``.
4. Adjusted levels, with ``z_lo = Phi^-1((1 - confidence) / 2)``, ``z_hi = -z_lo``:
   ``alpha_k = Phi(z0 + (z0 + z_k) / (1 - a * (z0 + z_k)))``.  If the
   denominator is not positive (only possible for absurdly skewed data) the
   level is taken as its limit, 0 or 1.
5. The interval is the pair of ``alpha_1`` / ``alpha_2`` quantiles of the
   bootstrap means, with linear interpolation between order statistics
   (``numpy.quantile(method="linear")``, Hyndman & Fan type 7).  This is
   the choice scipy.stats.bootstrap(method="BCa") makes; with scipy's
   bootstrap distribution as input the formulas above reproduce its
   interval to rounding error (see tests/test_stats_bootstrap.py).

Degenerate input (all differences equal, e.g. identical runs) returns
``ci_low == ci_high == delta`` without warnings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from ..defaults import DEFAULT_SEED
from .resampling import clear_caches as _clear_caches
from .resampling import matvec, resample_counts, resample_sums  # noqa: F401  (re-exported: callers, tests)

__all__ = ["BootstrapResult", "paired_bootstrap_bca"]

#: Relative tolerance (w.r.t. ``sum(|d|)``) under which two sums are "equal".
TIE_RTOL = 1e-12


@dataclass(frozen=True)
class BootstrapResult:
    """BCa interval for the mean paired difference ``mean(b - a)``."""

    delta: float
    ci_low: float
    ci_high: float
    n: int
    n_resamples: int
    confidence: float
    seed: int

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "n_resamples": self.n_resamples,
            "confidence": self.confidence,
            "seed": self.seed,
        }


# ---------------------------------------------------------------------------
# input validation (shared with permutation.py)
# ---------------------------------------------------------------------------
def paired_differences(a: Any, b: Any) -> np.ndarray:
    """Validate paired scores and return ``d = b - a`` as float64.

    Raises ``ValueError`` for non-1-D input, mismatched lengths, fewer than
    two pairs, or NaN/infinite values.
    """
    a_arr = np.asarray(a, dtype=np.float64)
    b_arr = np.asarray(b, dtype=np.float64)
    if a_arr.ndim != 1 or b_arr.ndim != 1:
        raise ValueError(
            f"paired scores must be 1-D sequences, got shapes {a_arr.shape} and {b_arr.shape}"
        )
    if a_arr.shape[0] != b_arr.shape[0]:
        raise ValueError(
            f"paired scores must have the same length, got {a_arr.shape[0]} and {b_arr.shape[0]}"
        )
    if a_arr.shape[0] < 2:
        raise ValueError(f"need at least 2 paired scores, got {a_arr.shape[0]}")
    if not (np.isfinite(a_arr).all() and np.isfinite(b_arr).all()):
        raise ValueError("paired scores contain NaN or infinite values")
    d = b_arr - a_arr
    if not np.isfinite(d).all():  # e.g. 1e308 - (-1e308)
        raise ValueError("paired differences overflow to infinity")
    return d


def is_constant(d: np.ndarray) -> bool:
    """True when all differences are equal up to float noise (1e-12 relative)."""
    lo = float(d.min())
    hi = float(d.max())
    return hi - lo <= TIE_RTOL * max(abs(lo), abs(hi))


def _check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _check_confidence(confidence: Any) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return confidence


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    return int(seed)


# ---------------------------------------------------------------------------
# resampling matrices (see resampling.py): re-exported for callers and tests
# ---------------------------------------------------------------------------
def clear_caches() -> None:
    """Drop cached bootstrap count matrices (frees memory; results unchanged)."""
    _clear_caches("counts")


# ---------------------------------------------------------------------------
# BCa
# ---------------------------------------------------------------------------
def _bca_levels(z0: float, accel: float, confidence: float) -> tuple[float, float]:
    z_lo = float(ndtri((1.0 - confidence) / 2.0))
    levels = []
    for z in (z_lo, -z_lo):
        w = z0 + z
        den = 1.0 - accel * w
        if den <= 0.0:
            levels.append(0.0 if w < 0 else 1.0)
        else:
            levels.append(float(ndtr(z0 + w / den)))
    return levels[0], levels[1]


def jackknife_acceleration(d: np.ndarray) -> float:
    """Efron's acceleration for the mean, from the closed-form jackknife."""
    c = d - d.mean()
    scale = float(np.abs(c).max())
    if scale == 0.0:
        return 0.0
    c = c / scale  # a is scale free; this avoids overflow/underflow in c**3
    ss = float(np.dot(c, c))
    return float(np.sum(c * c * c)) / (6.0 * ss**1.5)


def bca_interval_from_distribution(
    boot_means: np.ndarray,
    d: np.ndarray,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """BCa interval given bootstrap means of ``d`` (any resampling source).

    Exposed so the formulas can be checked against scipy's own bootstrap
    distribution; :func:`paired_bootstrap_bca` uses the same code.
    """
    d = np.asarray(d, dtype=np.float64)
    boot_means = np.asarray(boot_means, dtype=np.float64)
    n = d.shape[0]
    sums_hat = math.fsum(d.tolist())
    tol = TIE_RTOL * float(np.abs(d).sum())
    return _bca_from_sums(boot_means * n, sums_hat, tol, d, confidence)


def _bca_from_sums(
    boot_sums: np.ndarray,
    sum_hat: float,
    tol: float,
    d: np.ndarray,
    confidence: float,
) -> tuple[float, float]:
    n = d.shape[0]
    B = boot_sums.shape[0]
    less = int(np.count_nonzero(boot_sums < sum_hat - tol))
    ties = int(np.count_nonzero(np.abs(boot_sums - sum_hat) <= tol))
    p0 = (less + 0.5 * ties) / B
    p0 = min(max(p0, 0.5 / B), 1.0 - 0.5 / B)
    z0 = float(ndtri(p0))
    accel = jackknife_acceleration(d)
    lev_lo, lev_hi = _bca_levels(z0, accel, confidence)
    q = np.quantile(boot_sums, [lev_lo, lev_hi], method="linear") / n
    return float(q[0]), float(q[1])


def bootstrap_result(
    d: np.ndarray,
    boot_sums: np.ndarray | None,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> BootstrapResult:
    """BCa result for validated differences ``d`` given their bootstrap sums.

    ``boot_sums`` (``counts @ d`` per resample) may be ``None`` when ``d``
    is constant (:func:`is_constant`): the interval is then the point.
    """
    n = int(d.shape[0])
    if is_constant(d):
        delta = float(d[0]) if bool(np.all(d == d[0])) else float(d.mean())
        return BootstrapResult(delta, delta, delta, n, n_resamples, confidence, seed)
    assert boot_sums is not None
    delta = float(d.mean())
    sum_hat = math.fsum(d.tolist())
    tol = TIE_RTOL * float(np.abs(d).sum())
    lo, hi = _bca_from_sums(boot_sums, sum_hat, tol, d, confidence)
    return BootstrapResult(delta, lo, hi, n, n_resamples, confidence, seed)


def paired_bootstrap_bca(
    a: Any,
    b: Any,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> BootstrapResult:
    """BCa bootstrap CI of the mean paired difference ``mean(b - a)``.

    See the module docstring for the exact algorithm.  Deterministic for a
    given ``seed``; the same ``(n, n_resamples, seed)`` reuses the same
    resamples, so metrics of one run comparison share their bootstrap
    samples (as a paired design should).  For many metrics at once,
    :func:`pytest_crucible.stats.paired_tests` draws the stream only once.
    """
    d = paired_differences(a, b)
    n_resamples = _check_positive_int("n_resamples", n_resamples)
    confidence = _check_confidence(confidence)
    seed = _check_seed(seed)
    boot_sums = None
    if not is_constant(d):
        boot_sums = resample_sums(int(d.shape[0]), seed, [d], n_resamples, [], 0)[0][0]
    return bootstrap_result(d, boot_sums, n_resamples, confidence, seed)
