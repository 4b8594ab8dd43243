"""Power analysis helpers and multiple-comparison adjustment.

The power formulas use the normal approximation for a paired, two-sided test
of ``mean(d) = 0`` with known standard deviation ``sd_diff`` of the paired
differences:

    MDE = (z_{1 - alpha/2} + z_{power}) * sd_diff / sqrt(n)
    n   = ceil(((z_{1 - alpha/2} + z_{power}) * sd_diff / delta)**2)

(``z_q`` is the standard normal ``q`` quantile.)  This ignores the t
correction (it slightly understates ``n`` for very small samples, by about
two items) and the tiny probability of rejecting in the wrong direction.
It is meant as a planning aid: "with this golden set, shifts smaller than
MDE are unlikely to be detected".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import ndtri

__all__ = ["holm_adjust", "minimum_detectable_effect", "required_sample_size"]


def _check_level(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value}")
    return value


def _z_sum(alpha: float, power: float) -> float:
    alpha = _check_level("alpha", alpha)
    power = _check_level("power", power)
    return float(ndtri(1.0 - alpha / 2.0)) + float(ndtri(power))


def _check_sd(sd_diff: float) -> float:
    sd = float(sd_diff)
    if not math.isfinite(sd) or sd < 0.0:
        raise ValueError(f"sd_diff must be finite and >= 0, got {sd_diff}")
    return sd


def minimum_detectable_effect(
    sd_diff: float, n: int, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true mean difference detected with probability ``power``.

    Paired two-sided test at level ``alpha``, normal approximation:
    ``(z_{1-alpha/2} + z_power) * sd_diff / sqrt(n)``.
    E.g. ``sd_diff=1, n=100`` gives ``(1.95996 + 0.84162) / 10 = 0.28016``.
    """
    sd = _check_sd(sd_diff)
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    return _z_sum(alpha, power) * sd / math.sqrt(int(n))


def required_sample_size(
    delta: float, sd_diff: float, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """Number of paired items needed to detect a true difference ``delta``.

    ``ceil(((z_{1-alpha/2} + z_power) * sd_diff / |delta|)**2)``, at least 2
    (no paired test runs on fewer).  Returns ``None`` when ``delta == 0``
    (no finite sample detects a zero effect) or when ``|delta|`` is so small
    next to ``sd_diff`` that ``n`` would exceed the float range.
    """
    sd = _check_sd(sd_diff)
    delta = float(delta)
    if not math.isfinite(delta):
        raise ValueError(f"delta must be finite, got {delta}")
    z = _z_sum(alpha, power)
    if delta == 0.0:
        return None
    ratio = z * sd / abs(delta)
    if not ratio < 1e150:  # |delta| negligible next to sd: n beyond float range
        return None
    raw = ratio * ratio
    # Guard against e.g. 100.00000000000003 from rounding when delta is an
    # exact MDE: shave a relative 1e-9 before ceil.
    return max(2, math.ceil(raw * (1.0 - 1e-9)))


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the input order.

    With ``p_(1) <= ... <= p_(m)`` sorted ascending,
    ``adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j))``.  Rejecting the
    hypotheses with ``adj <= alpha`` controls the family-wise error rate at
    ``alpha``.  The adjusted values are monotone in the raw ones and capped
    at 1.  Ties keep their input order (stable sort), which does not change
    the values.
    """
    p = np.asarray(list(pvalues), dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("pvalues must be a flat sequence")
    m = p.shape[0]
    if m == 0:
        return []
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must be in [0, 1] and not NaN")
    order = np.argsort(p, kind="stable")
    multipliers = m - np.arange(m, dtype=np.float64)  # m, m-1, ..., 1
    stepped = np.maximum.accumulate(multipliers * p[order])
    stepped = np.minimum(stepped, 1.0)
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = stepped
    return [float(x) for x in adjusted]
