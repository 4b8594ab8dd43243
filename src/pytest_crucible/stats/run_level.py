"""Paired test for a run-level statistic that is not a mean of per-item values: AURC.

The same two gates as for per-item metrics, for AURC(b) - AURC(a) over the paired items: a BCa bootstrap interval for ``stat(b) - stat(a)`` (item indices resampled
with Mulberry32, the same index stream as the mean bootstrap; jackknife acceleration;
ties with the observed value counted half) and a paired permutation test that swaps each
item's (a, b) observations with probability 1/2 (exact when 2^n <= n_permutations).

Pure numpy; never imports pytest.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.special import ndtr, ndtri

from ..defaults import DEFAULT_SEED
from .prng import Mulberry32



@dataclass(frozen=True)
class RunLevelTest:
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    n: int


def _bca(theta: float, boots: np.ndarray, jack: np.ndarray, confidence: float) -> tuple[float, float]:
    spread = np.abs(boots - theta).max() if boots.size else 0.0
    if spread <= 1e-12 * max(1.0, abs(theta)):
        return theta, theta
    tol = 1e-12 * max(1.0, abs(theta))
    below = np.count_nonzero(boots < theta - tol) + 0.5 * np.count_nonzero(np.abs(boots - theta) <= tol)
    share = min(max(below / boots.size, 0.5 / boots.size), 1.0 - 0.5 / boots.size)
    z0 = float(ndtri(share))
    centered = jack.mean() - jack
    den = 6.0 * float(np.sum(centered**2)) ** 1.5
    accel = float(np.sum(centered**3)) / den if den > 0 else 0.0
    z_alpha = float(ndtri((1.0 - confidence) / 2.0))
    levels = []
    for z in (z_alpha, -z_alpha):
        w = z0 + z
        d = 1.0 - accel * w
        levels.append((0.0 if w < 0 else 1.0) if d <= 0 else float(ndtr(z0 + w / d)))
    low, high = np.quantile(boots, levels, method="linear")
    return float(low), float(high)


def aurc_rows(confidence: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """AURC of every row of (B x n) confidence/correct arrays at once (same definition and tie
    rule as :func:`pytest_crucible.metrics.selective.aurc`: tied items share their group's risk)."""
    order = np.argsort(-confidence, axis=1, kind="stable")
    conf = np.take_along_axis(confidence, order, axis=1)
    errors = np.cumsum(1.0 - np.take_along_axis(correct, order, axis=1), axis=1)
    n = conf.shape[1]
    last = np.ones_like(conf, dtype=bool)
    last[:, :-1] = conf[:, :-1] != conf[:, 1:]
    # Index of the end of each item's tie group: the first group end at or after it.
    ends = np.where(last, np.arange(n), n)
    ends = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    risk = np.take_along_axis(errors, ends, axis=1) / (ends + 1.0)
    return risk.mean(axis=1)


def paired_aurc_test(a: Sequence[tuple[float, bool]], b: Sequence[tuple[float, bool]], *, seed: int = DEFAULT_SEED,
                     n_resamples: int = 10_000, n_permutations: int = 10_000, confidence: float = 0.95,
                     alpha: float = 0.05, chunk: int = 1000) -> RunLevelTest:
    """Two gates for AURC(b) - AURC(a) over paired items: (confidence, correct) per item and run."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != 2:
        raise ValueError("a and b must list (confidence, correct) per paired item, in the same item order")
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 paired items, got {n}")

    def deltas(rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
        # rows_*: (R x n x 2); evaluated in chunks to bound memory
        out = []
        for start in range(0, rows_a.shape[0], chunk):
            ra, rb = rows_a[start:start + chunk], rows_b[start:start + chunk]
            out.append(aurc_rows(rb[..., 0], rb[..., 1]) - aurc_rows(ra[..., 0], ra[..., 1]))
        return np.concatenate(out)

    delta = float(deltas(a[None], b[None])[0])
    indices = Mulberry32(seed).integers(n, size=(n_resamples, n))
    boots = np.concatenate([deltas(a[rows], b[rows]) for rows in np.array_split(indices, max(1, n_resamples // chunk))])
    leave_out = np.array([np.delete(np.arange(n), i) for i in range(n)])
    jack = deltas(a[leave_out], b[leave_out])
    low, high = _bca(delta, boots, jack, confidence)

    if 2**n <= n_permutations:
        swaps = np.array(list(itertools.product((False, True), repeat=n)), dtype=bool)
    else:
        swaps = Mulberry32(seed).random((n_permutations, n)) < 0.5
    tol = 1e-12 * max(1.0, abs(delta))
    count = 0
    for part in np.array_split(swaps, max(1, len(swaps) // chunk)):
        mask = part[..., None]
        count += int(np.count_nonzero(np.abs(deltas(np.where(mask, b, a), np.where(mask, a, b))) >= abs(delta) - tol))
    p = count / len(swaps) if 2**n <= n_permutations else (count + 1) / (n_permutations + 1)
    if abs(delta) <= tol:
        p = 1.0
    excludes_zero = low > 0 or high < 0
    return RunLevelTest(delta=delta, ci_low=low, ci_high=high, p_value=float(min(p, 1.0)),
                        significant=bool(excludes_zero and p < alpha), n=n)
