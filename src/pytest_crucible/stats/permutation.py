"""Paired sign-flip permutation test for a mean difference.

Null hypothesis: for every item the two runs are exchangeable, i.e. each
paired difference ``d_i = b_i - a_i`` is as likely to be ``+d_i`` as
``-d_i``.  (Swapping ``a_i`` and ``b_i`` within a pair is what
``scipy.stats.permutation_test(..., permutation_type="samples")`` does for
two paired samples; it is the same as flipping the sign of ``d_i``.)

Statistic: ``|mean(d)|`` (two-sided).  Computed as ``|sum(s * d)|`` since
``n`` is fixed.

* Exact: when ``2**n <= n_permutations`` all ``2**n`` sign patterns are
  enumerated (the identity included) and
  ``p = #{patterns with |stat| >= |observed|} / 2**n``.
* Randomized otherwise: ``n_permutations`` sign patterns are drawn from one
  :class:`~.prng.Mulberry32` stream seeded with ``seed``, filled row-major
  into an ``n_permutations x n`` matrix; ``sign = +1`` when
  ``floor(2u) == 0`` and ``-1`` otherwise (``rng.integers(2)``).  Then
  ``p = (count + 1) / (n_permutations + 1)``, counting the observed data as
  one of the permutations, which keeps the test valid (never anti-
  conservative) and ``p > 0``.  scipy uses the same two conventions.

Float ties: a permuted statistic counts as ``>=`` the observed one when it is
at least ``|observed| - 1e-12 * sum(|d|)``, so patterns that are equal in
exact arithmetic are not lost to rounding noise (scipy uses a similar
relative tolerance).

If all differences are zero the statistic is 0 under every pattern and
``p = 1``.  The sign matrix depends only on ``(n, n_permutations, seed)`` and
is cached like the bootstrap counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .bootstrap import (
    TIE_RTOL,
    _check_positive_int,
    _MatrixCache,
    matvec,
    paired_differences,
)
from ..defaults import DEFAULT_SEED
from .prng import Mulberry32

__all__ = ["paired_permutation_test"]

_SIGNS_CACHE = _MatrixCache(maxsize=4)
_BLOCK_ELEMENTS = 1 << 18
_EXACT_BLOCK = 1 << 14  # sign patterns per block in exact enumeration


def _build_signs(n: int, n_permutations: int, seed: int) -> np.ndarray:
    rng = Mulberry32(seed)
    signs = np.empty((n_permutations, n), dtype=np.int8)
    rows = max(1, _BLOCK_ELEMENTS // n)
    for lo in range(0, n_permutations, rows):
        m = min(rows, n_permutations - lo)
        bits = rng.integers(2, (m, n))
        signs[lo : lo + m] = 1 - 2 * bits
    return signs


def permutation_signs(n: int, n_permutations: int, seed: int) -> np.ndarray:
    """Cached, read-only ``(n_permutations, n)`` int8 matrix of +-1 signs."""
    return _SIGNS_CACHE.get(
        ("signs", n, n_permutations, seed & 0xFFFFFFFF),
        lambda: _build_signs(n, n_permutations, seed),
    )


def clear_caches() -> None:
    _SIGNS_CACHE.clear()


def _exact_count(d: np.ndarray, threshold: float) -> int:
    """Number of the 2**n sign patterns with ``|sum(s*d)| >= threshold``."""
    n = d.shape[0]
    total = 1 << n
    bit_positions = np.arange(n, dtype=np.int64)
    count = 0
    for lo in range(0, total, _EXACT_BLOCK):
        k = np.arange(lo, min(total, lo + _EXACT_BLOCK), dtype=np.int64)
        bits = (k[:, None] >> bit_positions) & 1  # bit i set -> flip d_i
        signs = 1.0 - 2.0 * bits
        stats = np.abs(signs @ d)
        count += int(np.count_nonzero(stats >= threshold))
    return count


def paired_permutation_test(
    a: Any,
    b: Any,
    *,
    n_permutations: int = 10_000,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of the paired sign-flip test on ``d = b - a``.

    Exact when ``2**n <= n_permutations``, randomized (Mulberry32, ``seed``)
    otherwise; see the module docstring.  The result lies in ``(0, 1]``.
    """
    d = paired_differences(a, b)
    n_permutations = _check_positive_int("n_permutations", n_permutations)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    n = int(d.shape[0])

    scale = float(np.abs(d).sum())
    if scale == 0.0:  # all differences are zero: every pattern ties
        return 1.0
    observed = abs(float(d.sum()))
    threshold = observed - TIE_RTOL * scale

    if n < 62 and (1 << n) <= n_permutations:
        return _exact_count(d, threshold) / float(1 << n)

    signs = permutation_signs(n, n_permutations, int(seed))
    stats = np.abs(matvec(signs, d))
    count = int(np.count_nonzero(stats >= threshold))
    return (count + 1) / (n_permutations + 1)
