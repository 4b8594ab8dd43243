"""Paired test for a run-level statistic that is not a mean of per-item values: AURC.

The same two gates as for per-item metrics, for AURC(b) - AURC(a) over the paired items: a BCa bootstrap interval for ``stat(b) - stat(a)`` (item indices resampled
with Mulberry32, the same index stream as the mean bootstrap; jackknife acceleration;
ties with the observed value counted half) and a paired permutation test that swaps each
item's (a, b) observations with probability 1/2 (exact when 2^n <= n_permutations).

Pure numpy; never imports pytest.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


# Up to this many items the acceleration comes from the exact leave-one-out jackknife (n AURCs of
# n - 1 items: O(n^2)); above it, from a delete-a-group jackknife over JACKKNIFE_GROUPS groups.
JACKKNIFE_EXACT_MAX = 5_000
JACKKNIFE_GROUPS = 1_000
# Items x rows evaluated at once: bounds the (rows x n x 2) temporaries whatever n is.
_BLOCK_ELEMENTS = 1 << 21


def _jackknife(a: np.ndarray, b: np.ndarray, deltas) -> np.ndarray:
    """The jackknife values of AURC(b) - AURC(a): leave-one-out up to JACKKNIFE_EXACT_MAX items; above,
    delete-a-group with items grouped by position modulo JACKKNIFE_GROUPS (Efron & Tibshirani 1993,
    11.5), which estimates the same acceleration in O(groups x n log n) instead of O(n^2) time and memory."""
    n = a.shape[0]
    if n <= JACKKNIFE_EXACT_MAX:
        rows = max(1, _BLOCK_ELEMENTS // n)
        out = []
        for start in range(0, n, rows):
            leave_out = np.array([np.delete(np.arange(n), i) for i in range(start, min(n, start + rows))])
            out.append(deltas(a[leave_out], b[leave_out]))
        return np.concatenate(out)
    positions = np.arange(n)
    return np.array([deltas(a[None, keep], b[None, keep])[0]
                     for keep in (positions % JACKKNIFE_GROUPS != group for group in range(JACKKNIFE_GROUPS))])


def paired_aurc_test(a: Sequence[tuple[float, bool]], b: Sequence[tuple[float, bool]], *, seed: int = DEFAULT_SEED,
                     n_resamples: int = 10_000, n_permutations: int = 10_000, confidence: float = 0.95,
                     alpha: float = 0.05, chunk: int = 1000) -> RunLevelTest:
    """Two gates for AURC(b) - AURC(a) over paired items: (confidence, correct) per item and run.

    Resamples and permutations are drawn from the stream block by block (never a whole resamples x n
    matrix), so memory stays bounded on large golden sets; the time grows as n log n per resample."""
    pa, pb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if pa.shape != pb.shape or pa.ndim != 2 or pa.shape[1] != 2:
        raise ValueError("a and b must list (confidence, correct) per paired item, in the same item order")
    n = pa.shape[0]
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 paired items, got {n}")
    rows_at_once = max(1, min(chunk, _BLOCK_ELEMENTS // n))

    def deltas(rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
        # rows_*: (R x n x 2); each row's AURC depends on that row alone, so blocking never changes a value
        out = []
        for start in range(0, rows_a.shape[0], rows_at_once):
            ra, rb = rows_a[start:start + rows_at_once], rows_b[start:start + rows_at_once]
            out.append(aurc_rows(rb[..., 0], rb[..., 1]) - aurc_rows(ra[..., 0], ra[..., 1]))
        return np.concatenate(out)

    delta = float(deltas(pa[None], pb[None])[0])
    draws = Mulberry32(seed)  # the resample indices, row after row (the same stream as the mean bootstrap)
    boots = np.concatenate([deltas(pa[rows], pb[rows]) for rows in
                            (draws.integers(n, size=(min(rows_at_once, n_resamples - start), n))
                             for start in range(0, n_resamples, rows_at_once))])
    low, high = _bca(delta, boots, _jackknife(pa, pb, deltas), confidence)

    exact = 2**n <= n_permutations if n < 64 else False
    blocks: Iterable[np.ndarray]
    if exact:
        blocks = [np.array(list(itertools.product((False, True), repeat=n)), dtype=bool)]
        total = 2**n
    else:
        coin = Mulberry32(seed)
        blocks = (coin.random((min(rows_at_once, n_permutations - start), n)) < 0.5 for start in range(0, n_permutations, rows_at_once))
        total = n_permutations
    tol = 1e-12 * max(1.0, abs(delta))
    count = 0
    for part in blocks:
        mask = part[..., None]
        count += int(np.count_nonzero(np.abs(deltas(np.where(mask, pb, pa), np.where(mask, pa, pb))) >= abs(delta) - tol))
    p = count / total if exact else (count + 1) / (n_permutations + 1)
    if abs(delta) <= tol:
        p = 1.0
    excludes_zero = low > 0 or high < 0
    return RunLevelTest(delta=delta, ci_low=low, ci_high=high, p_value=float(min(p, 1.0)),
                        significant=bool(excludes_zero and p < alpha), n=n)
