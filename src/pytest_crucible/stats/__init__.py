"""Statistics core: paired bootstrap CIs, permutation tests, power, Holm.

Pure numpy (plus ``scipy.special`` for the normal cdf/quantile); never
imports pytest.  All randomness comes from :class:`Mulberry32`, so results
are reproducible from the seed alone, also outside Python.

Typical use, once per metric of a run comparison (``a`` = baseline scores,
``b`` = candidate scores over the same items)::

    res = paired_test(a, b, seed=DEFAULT_SEED)
    res.delta, res.ci, res.p_value, res.significant, res.mde, res.required_n
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np

from .bootstrap import BootstrapResult, paired_bootstrap_bca, paired_differences
from .permutation import paired_permutation_test
from .power import holm_adjust, minimum_detectable_effect, required_sample_size
from ..defaults import DEFAULT_SEED
from .prng import Mulberry32

__all__ = [
    "DEFAULT_SEED",
    "Mulberry32",
    "BootstrapResult",
    "paired_bootstrap_bca",
    "paired_permutation_test",
    "minimum_detectable_effect",
    "required_sample_size",
    "holm_adjust",
    "PairedTest",
    "paired_test",
    "min_pairs_for_alpha",
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


@dataclass(frozen=True)
class PairedTest:
    """Outcome of comparing one metric between two runs (``delta = b - a``).

    ``significant`` requires both gates: the BCa interval excludes 0 *and*
    the permutation p-value is below ``alpha``.  ``mde`` is the minimum
    detectable effect at this ``n`` (80% power by default); ``required_n``
    is, for a non-significant result with a non-zero ``delta``, how many
    items would be needed to detect an effect of the observed size with
    that power (normal approximation, see :mod:`.power`; never fewer than
    :func:`min_pairs_for_alpha`), and ``None`` otherwise.  ``sd_diff`` is the
    sample standard deviation (ddof=1) of the paired differences.
    """

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    mde: float
    required_n: Optional[int]
    sd_diff: float
    n: int
    confidence: float
    alpha: float
    power: float
    seed: int
    n_resamples: int
    n_permutations: int

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)

    @property
    def p(self) -> float:
        return self.p_value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    d = paired_differences(a, b)
    boot = paired_bootstrap_bca(
        a, b, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    p_value = paired_permutation_test(a, b, n_permutations=n_permutations, seed=seed)
    n = int(d.shape[0])
    sd_diff = float(np.std(d, ddof=1))
    if not math.isfinite(sd_diff):  # defensive; n >= 2 is guaranteed
        sd_diff = 0.0
    excludes_zero = boot.ci_low > 0.0 or boot.ci_high < 0.0
    significant = bool(excludes_zero and p_value < alpha)
    mde = minimum_detectable_effect(sd_diff, n, alpha=alpha, power=power)
    required_n: Optional[int] = None
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
        seed=int(seed),
        n_resamples=boot.n_resamples,
        n_permutations=int(n_permutations),
    )
