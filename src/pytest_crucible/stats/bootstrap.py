"""Paired bootstrap confidence interval (BCa) for a mean difference.

Method (Efron 1987, "Better bootstrap confidence intervals"; Efron &
Tibshirani 1993, ch. 14): for paired scores ``a`` (baseline run) and ``b``
(candidate run) over the same ``n`` items, let ``d = b - a`` and
``theta_hat = mean(d)``.

1. Resampling.  ``B = n_resamples`` bootstrap samples of item indices are
   drawn with replacement from one :class:`~.prng.Mulberry32` stream seeded
   with ``seed``: the ``B x n`` index matrix is filled row-major, index =
   ``floor(u * n)``.  ``theta*_b`` is the mean of ``d`` over row ``b``.
   (Internally the rows are stored as a ``B x n`` matrix of counts, so that
   ``theta* = counts @ d / n``; the matrix depends only on ``(n, B, seed)``
   and is cached, which makes repeated calls over many metrics of the same
   golden set cheap.)
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
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from ..defaults import DEFAULT_SEED
from .prng import Mulberry32

__all__ = ["BootstrapResult", "paired_bootstrap_bca"]

#: Relative tolerance (w.r.t. ``sum(|d|)``) under which two sums are "equal".
TIE_RTOL = 1e-12

# Elements per block when streaming resample rows (keeps temporaries in cache).
_BLOCK_ELEMENTS = 1 << 18
# Elements per block for the float64 matrix-vector products.
_MATVEC_ELEMENTS = 1 << 17


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


# ---------------------------------------------------------------------------
# cached compact matrices + blocked matrix-vector product
# ---------------------------------------------------------------------------
class _MatrixCache:
    """Tiny thread-safe LRU cache for compact resampling matrices."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], build: Any) -> np.ndarray:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
                return hit
        value = build()
        value.setflags(write=False)
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_COUNTS_CACHE = _MatrixCache(maxsize=4)


def _build_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """``counts[r, i]`` = how often item ``i`` appears in resample ``r``.

    Index draws are ``Mulberry32(seed).integers(n, (n_resamples, n))``
    (row-major), generated in blocks of rows; the count matrix uses the
    smallest unsigned dtype that holds it (uint8 in practice).
    """
    rng = Mulberry32(seed)
    counts: np.ndarray = np.empty((n_resamples, n), dtype=np.uint8)
    rows = max(1, _BLOCK_ELEMENTS // n)
    offsets = (np.arange(rows, dtype=np.int64) * n)[:, None]
    for lo in range(0, n_resamples, rows):
        m = min(rows, n_resamples - lo)
        idx = rng.integers(n, (m, n))
        idx += offsets[:m]
        block = np.bincount(idx.ravel(), minlength=m * n)
        top = int(block.max())
        if top > np.iinfo(counts.dtype).max:
            counts = counts.astype(np.min_scalar_type(max(top, n)))
        counts[lo : lo + m] = block.reshape(m, n)
    return counts


def resample_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Cached, read-only ``(n_resamples, n)`` bootstrap count matrix."""
    return _COUNTS_CACHE.get(
        ("counts", n, n_resamples, seed & 0xFFFFFFFF),
        lambda: _build_counts(n, n_resamples, seed),
    )


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` in float64 for a compact integer ``matrix``.

    Rows are converted to float64 in small blocks (which stay in cache) and
    multiplied with BLAS, so the compact matrix never needs a full float64
    copy.  Integer matrix entries and float64 accumulation: for integer
    valued ``vector`` (binary metrics) the result is exact.
    """
    rows_total, n = matrix.shape
    out = np.empty(rows_total, dtype=np.float64)
    rows = max(1, min(rows_total, _MATVEC_ELEMENTS // max(n, 1)))
    buf = np.empty((rows, n), dtype=np.float64)
    for lo in range(0, rows_total, rows):
        m = min(rows, rows_total - lo)
        blk = buf[:m]
        blk[...] = matrix[lo : lo + m]
        np.matmul(blk, vector, out=out[lo : lo + m])
    return out


def clear_caches() -> None:
    """Drop cached resampling matrices (frees memory; results unchanged)."""
    _COUNTS_CACHE.clear()


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
    samples (as a paired design should).
    """
    d = paired_differences(a, b)
    n_resamples = _check_positive_int("n_resamples", n_resamples)
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    n = int(d.shape[0])

    if is_constant(d):
        delta = float(d[0]) if bool(np.all(d == d[0])) else float(d.mean())
        return BootstrapResult(delta, delta, delta, n, n_resamples, confidence, int(seed))

    delta = float(d.mean())
    counts = resample_counts(n, n_resamples, int(seed))
    boot_sums = matvec(counts, d)
    sum_hat = math.fsum(d.tolist())
    tol = TIE_RTOL * float(np.abs(d).sum())
    lo, hi = _bca_from_sums(boot_sums, sum_hat, tol, d, confidence)
    return BootstrapResult(delta, lo, hi, n, n_resamples, confidence, int(seed))
