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
``p = 1``.  The sign matrix depends only on ``(n, n_permutations, seed)``:
like the bootstrap counts it is cached up to 64 MiB (int8) and streamed in
blocks of rows above that (:mod:`.resampling`).  Its row ``r`` uses the same
draws as bootstrap row ``r`` (sign = top bit of the 32-bit output), so one
pass over the stream serves both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..defaults import DEFAULT_SEED
from .bootstrap import (
    TIE_RTOL,
    _check_positive_int,
    _check_seed,
    paired_differences,
)
from .resampling import clear_caches as _clear_caches
from .resampling import (
    permutation_signs,  # noqa: F401  (re-exported: callers, tests)
    resample_sums,
)

__all__ = ["paired_permutation_test"]

_EXACT_BLOCK = 1 << 14  # sign patterns per block in exact enumeration


def clear_caches() -> None:
    """Drop cached sign matrices (frees memory; results unchanged)."""
    _clear_caches("signs")


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


def needs_random_signs(d: np.ndarray, n_permutations: int) -> bool:
    """True when the p-value of ``d`` needs the Mulberry32 sign stream
    (not all differences zero, and not exact: ``2**n > n_permutations``)."""
    n = int(d.shape[0])
    exact = n < 62 and (1 << n) <= n_permutations
    return not exact and float(np.abs(d).sum()) != 0.0


def permutation_p_value(d: np.ndarray, n_permutations: int, sums: np.ndarray | None = None) -> float:
    """Two-sided p-value of validated differences ``d``.

    ``sums`` are the randomized statistics ``signs @ d`` (one per
    permutation), needed exactly when :func:`needs_random_signs` is true.
    """
    n = int(d.shape[0])
    scale = float(np.abs(d).sum())
    if scale == 0.0:  # all differences are zero: every pattern ties
        return 1.0
    observed = abs(float(d.sum()))
    threshold = observed - TIE_RTOL * scale

    if n < 62 and (1 << n) <= n_permutations:
        return _exact_count(d, threshold) / float(1 << n)

    assert sums is not None
    count = int(np.count_nonzero(np.abs(sums) >= threshold))
    return (count + 1) / (n_permutations + 1)


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
    seed = _check_seed(seed)
    sums = None
    if needs_random_signs(d, n_permutations):
        sums = resample_sums(int(d.shape[0]), seed, [], 0, [d], n_permutations)[1][0]
    return permutation_p_value(d, n_permutations, sums)
