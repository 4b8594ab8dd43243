"""Statistics core: paired bootstrap CIs, permutation tests, power, Holm.

Pure numpy (plus ``scipy.special`` for the normal cdf/quantile); never
imports pytest.  All randomness comes from :class:`Mulberry32`, so results
are reproducible from the seed alone, also outside Python.

Typical use, once per metric of a run comparison (``a`` = baseline scores,
``b`` = candidate scores over the same items)::

    res = paired_test(a, b, seed=DEFAULT_SEED)
    res.delta, res.ci, res.p_value, res.significant, res.mde, res.required_n

or, for all metrics of a comparison at once (same results, bit for bit; the
random stream is drawn once per distinct ``n`` instead of once per metric,
which is what keeps large golden sets fast and within bounded memory)::

    results = paired_tests([(a1, b1), (a2, b2), ...], seed=DEFAULT_SEED)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..defaults import DEFAULT_SEED
from .bootstrap import (
    BootstrapResult,
    bootstrap_result,
    is_constant,
    paired_bootstrap_bca,
    paired_differences,
)
from .clustered import ClusteredTest, paired_cluster_tests
from .paired_result import PairedTest, checked_options
from .permutation import needs_random_signs, paired_permutation_test, permutation_p_value
from .power import holm_adjust, minimum_detectable_effect, required_sample_size
from .ppi import PPIEstimate, ppi_mean, ppi_paired_difference
from .prng import Mulberry32
from .resampling import resample_sums

__all__ = [
    "DEFAULT_SEED",
    "BootstrapResult",
    "ClusteredTest",
    "Mulberry32",
    "PPIEstimate",
    "PairedTest",
    "holm_adjust",
    "min_pairs_for_alpha",
    "minimum_detectable_effect",
    "paired_bootstrap_bca",
    "paired_cluster_tests",
    "paired_permutation_test",
    "paired_test",
    "paired_tests",
    "ppi_mean",
    "ppi_paired_difference",
    "required_sample_size",
]


def min_pairs_for_alpha(alpha: float) -> int:
    """Fewest pairs for which the sign-flip test can give ``p < alpha``.

    With ``n`` pairs the smallest exact two-sided p-value is ``2 / 2**n``
    (all signs as observed, or all flipped), so ``n`` must exceed
    ``log2(2 / alpha)``: 6 pairs for ``alpha = 0.05``.  ``paired_test``
    never reports a ``required_n`` below this, whatever the normal
    approximation says.
    """
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = 2
    while 2.0 / 2.0**n >= alpha:
        n += 1
    return n


def paired_test(
    a: Any,
    b: Any,
    *,
    seed: int = DEFAULT_SEED,
    n_resamples: int = 10_000,
    n_permutations: int = 10_000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PairedTest:
    """BCa interval + sign-flip permutation test + power numbers for one metric."""
    return paired_tests(
        [(a, b)],
        seed=seed,
        n_resamples=n_resamples,
        n_permutations=n_permutations,
        confidence=confidence,
        alpha=alpha,
        power=power,
    )[0]


def paired_tests(
    pairs: Iterable[tuple[Any, Any]],
    *,
    seed: int = DEFAULT_SEED,
    n_resamples: int = 10_000,
    n_permutations: int = 10_000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    power: float = 0.8,
) -> list[PairedTest]:
    """:func:`paired_test` for many metrics of one comparison, in input order.

    ``pairs`` is a sequence of ``(a, b)`` score sequences, one per metric;
    their lengths may differ (a metric present on fewer items).  Each result
    is bit-identical to ``paired_test(a, b, ...)`` with the same options: the
    metrics with the same ``n`` share one pass over the Mulberry32 stream
    (bootstrap counts and permutation signs come from the same draws, see
    :mod:`.resampling`), so the stream is drawn once per distinct ``n``, and
    above the cache budget the ``B x n`` matrices are never held whole.
    """
    options = checked_options(seed=seed, n_resamples=n_resamples, n_permutations=n_permutations,
                              confidence=confidence, alpha=alpha, power=power)
    seed, n_resamples, n_permutations = options["seed"], options["n_resamples"], options["n_permutations"]
    confidence, alpha, power = options["confidence"], options["alpha"], options["power"]
    ds = [paired_differences(a, b) for a, b in pairs]

    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(ds):
        by_n.setdefault(int(d.shape[0]), []).append(i)
    boot_sums: dict[int, np.ndarray] = {}
    perm_sums: dict[int, np.ndarray] = {}
    for n, members in by_n.items():
        boot = [i for i in members if not is_constant(ds[i])]
        perm = [i for i in members if needs_random_signs(ds[i], n_permutations)]
        boot_out, perm_out = resample_sums(
            n, seed, [ds[i] for i in boot], n_resamples, [ds[i] for i in perm], n_permutations
        )
        boot_sums.update(zip(boot, boot_out))
        perm_sums.update(zip(perm, perm_out))

    return [
        _paired_result(
            d,
            bootstrap_result(d, boot_sums.get(i), n_resamples, confidence, seed),
            permutation_p_value(d, n_permutations, perm_sums.get(i)),
            alpha=alpha,
            power=power,
            seed=seed,
            n_permutations=n_permutations,
        )
        for i, d in enumerate(ds)
    ]


def _paired_result(
    d: np.ndarray,
    boot: BootstrapResult,
    p_value: float,
    *,
    alpha: float,
    power: float,
    seed: int,
    n_permutations: int,
) -> PairedTest:
    n = int(d.shape[0])
    sd_diff = float(np.std(d, ddof=1))
    if not math.isfinite(sd_diff):  # defensive; n >= 2 is guaranteed
        sd_diff = 0.0
    excludes_zero = boot.ci_low > 0.0 or boot.ci_high < 0.0
    significant = bool(excludes_zero and p_value < alpha)
    mde = minimum_detectable_effect(sd_diff, n, alpha=alpha, power=power)
    required_n: int | None = None
    if not significant:
        required_n = required_sample_size(boot.delta, sd_diff, alpha=alpha, power=power)
        if required_n is not None:
            required_n = max(required_n, min_pairs_for_alpha(alpha))
    return PairedTest(
        delta=boot.delta,
        ci_low=boot.ci_low,
        ci_high=boot.ci_high,
        p_value=float(p_value),
        significant=significant,
        mde=float(mde),
        required_n=required_n,
        sd_diff=sd_diff,
        n=n,
        confidence=boot.confidence,
        alpha=alpha,
        power=float(power),
        seed=seed,
        n_resamples=boot.n_resamples,
        n_permutations=n_permutations,
    )
