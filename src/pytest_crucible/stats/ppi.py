"""Prediction-powered inference (PPI++) for a mean and for a paired difference of means.

Setting: an LLM judge scored every answer (``f``), people labelled only some
of them (``y``).  The judge mean is precise but biased; the mean of the human
labels is unbiased but, on few labels, imprecise.  PPI++ (Angelopoulos, Duchi
& Zrnic 2023, "PPI++: Efficient prediction-powered inference") combines them:
the judge mean over the unlabelled items, corrected by the judge's error
measured on the labelled items, with a tuning weight ``lam``.

With ``n`` labelled items ``(y_i, f_i)`` and ``N`` unlabelled items ``f~_j``::

    theta = lam * mean(f~) + mean(y - lam * f)
          = mean(y) + lam * (mean(f~) - mean(f))
    var   = lam**2 * var(f~) / N + var(y - lam * f) / n        (ddof = 1)
    interval: theta -+ z_{1 - alpha/2} * sqrt(var)

For every fixed ``lam`` the estimate is unbiased for the mean of ``y``
(``mean(f~) - mean(f)`` has expectation 0 when the labelled items are a
random sample of all items), so the interval is valid *whatever the judge's
bias*; only its width depends on how well the judge tracks the labels.
``lam = 0`` is the classical labelled-only mean, ``lam = 1`` the original
PPI estimator.

Power tuning.  ``var`` is a quadratic in ``lam``:
``(v_y - 2 lam c + lam**2 v_f) / n + lam**2 v~_f / N`` with ``c = Cov(y, f)``
and ``v_f = Var(f)`` on the labelled items and ``v~_f = Var(f~)`` on the
unlabelled ones.  Its minimiser is ::

    lam_hat = c / (v_f + (n / N) * v~_f)

which is the paper's ``Cov(y, f) / ((1 + n/N) * Var(f))`` when the judge's
spread is the same on both parts (the case in the limit); it is clipped to
``[0, 1]``.  Because ``lam = 0`` (the classical interval) is among the
candidates and a convex quadratic clipped to an interval containing 0 is
still no higher than at 0, the PPI++ standard error with ``lam_hat`` is
*never* larger than the classical one computed from the same labels (and the
asymptotic guarantee of the paper holds as well).  A judge uncorrelated
with the labels gets ``lam ~ 0``, i.e. it is ignored.

Edge cases: fewer than 2 labelled items -> ``ValueError``.  ``N = 0`` (every
judged item is labelled) -> ``lam = 0``: the estimate is the labelled mean
and the interval the classical one (an explicit ``lam`` other than 0 is then
a ``ValueError``).  ``N = 1``: ``var(f~)`` is taken from all judged items
pooled (one value has no spread).  A judge constant on the labelled items
(``Var(f) = 0``, so ``c = 0``) -> ``lam = 0``.

The interval is a normal (CLT) interval, as in the paper; it assumes the
labelled items are a uniformly random subset of the judged items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import stdtrit

__all__ = ["PPIEstimate", "ppi_mean", "ppi_paired_difference"]


@dataclass(frozen=True)
class PPIEstimate:
    """PPI++ estimate of a mean with its interval, and what it is built from.

    ``estimate``, ``ci_low``, ``ci_high``, ``se``: the corrected mean and its
    ``1 - alpha`` normal interval.  ``lam``: the weight given to the judge
    (0 = labels only, 1 = plain PPI).  ``judge_mean``: the judge's mean over
    all ``n_labelled + n_unlabelled`` items (what one would report without
    labels); ``bias``: ``mean(f - y)`` on the labelled items.
    ``classical`` / ``classical_ci`` / ``classical_se``: the labelled mean
    alone, for reference.
    """

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    lam: float
    n_labelled: int
    n_unlabelled: int
    judge_mean: float
    bias: float
    classical: float
    classical_ci: tuple[float, float]
    classical_se: float
    alpha: float

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["classical_ci"] = list(self.classical_ci)
        return out


def _vector(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _check_alpha(alpha: Any) -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return alpha


def _var(x: np.ndarray) -> float:
    return float(np.var(x, ddof=1))


def _cov(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.dot(x - x.mean(), y - y.mean())) / (x.shape[0] - 1)


def tuned_lambda(labelled_y: np.ndarray, labelled_f: np.ndarray, unlabelled_f: np.ndarray) -> float:
    """Power-tuned ``lam`` in ``[0, 1]`` (see the module docstring); 0 when ``N = 0``."""
    n = labelled_y.shape[0]
    big_n = unlabelled_f.shape[0]
    if big_n == 0:
        return 0.0
    c = _cov(labelled_y, labelled_f)
    v_f = _var(labelled_f)
    v_u = _var(unlabelled_f) if big_n >= 2 else _var(np.concatenate([labelled_f, unlabelled_f]))
    den = v_f + (n / big_n) * v_u
    if not den > 0.0 or not c > 0.0:
        return 0.0
    return min(1.0, c / den)


def no_variance(values: Sequence[float]) -> str | None:
    """Why labels with one value say nothing about the judge's error (None: they vary). Their variance is
    0, so the interval would have width 0: a certainty no sample gives. The one message for the run summary,
    ``crucible compare --ppi`` and this module's functions."""
    if len(set(values)) == 1:
        return (f"the labels have no variance (every one is {values[0]:g}): PPI cannot tell the judge's error from "
                "them; label a random sample of answers")
    return None


def ppi_mean(
    labelled_y: Any,
    labelled_f: Any,
    unlabelled_f: Any,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
) -> PPIEstimate:
    """PPI++ estimate and ``1 - alpha`` interval of the mean of the labels.

    ``labelled_y``: human labels on ``n`` items (any numeric scale, e.g.
    CRAG's -1/0/1 or faithful 0/1); ``labelled_f``: the judge's values on the
    same items, in the same order; ``unlabelled_f``: the judge's values on the
    ``N`` items nobody labelled.  ``lam=None`` tunes the weight
    (:func:`tuned_lambda`); a number fixes it (``1.0`` = original PPI).
    """
    alpha = _check_alpha(alpha)
    y = _vector("labelled_y", labelled_y)
    f = _vector("labelled_f", labelled_f)
    u = _vector("unlabelled_f", unlabelled_f)
    n = int(y.shape[0])
    big_n = int(u.shape[0])
    if f.shape[0] != n:
        raise ValueError(f"labelled_y and labelled_f must be paired, got {n} and {f.shape[0]} values")
    if n < 2:
        raise ValueError(f"PPI needs at least 2 labelled items, got {n}")
    constant = no_variance(y.tolist())
    if constant:  # the interval would have width 0: a certainty no sample gives
        raise ValueError(constant)
    if lam is None:
        lam = tuned_lambda(y, f, u)
    else:
        lam = float(lam)
        if not math.isfinite(lam):
            raise ValueError(f"lam must be finite, got {lam}")
        if big_n == 0 and lam != 0.0:
            raise ValueError("lam must be 0 when there are no unlabelled items (the estimate is the labelled mean)")

    # Student's t on n - 1 degrees of freedom: the labelled residuals' variance is estimated from n labels,
    # and with 20-30 of them the normal quantile under-covers (docs/statistics.md, the PPI rows).
    z = float(stdtrit(n - 1, 1.0 - alpha / 2.0))
    classical = float(y.mean())
    classical_se = math.sqrt(_var(y) / n)
    classical_ci = (classical - z * classical_se, classical + z * classical_se)

    if big_n == 0:
        estimate, se = classical, classical_se
    else:
        resid = y - lam * f
        estimate = lam * float(u.mean()) + float(resid.mean())
        v_u = _var(u) if big_n >= 2 else _var(np.concatenate([f, u]))
        se = math.sqrt(lam * lam * v_u / big_n + _var(resid) / n)
    judge_mean = (float(f.sum()) + float(u.sum())) / (n + big_n)
    return PPIEstimate(
        estimate=estimate,
        ci_low=estimate - z * se,
        ci_high=estimate + z * se,
        se=se,
        lam=float(lam),
        n_labelled=n,
        n_unlabelled=big_n,
        judge_mean=judge_mean,
        bias=float((f - y).mean()),
        classical=classical,
        classical_ci=classical_ci,
        classical_se=classical_se,
        alpha=alpha,
    )


def ppi_paired_difference(
    labelled_y_a: Any,
    labelled_y_b: Any,
    labelled_f_a: Any,
    labelled_f_b: Any,
    unlabelled_f_a: Any,
    unlabelled_f_b: Any,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
) -> PPIEstimate:
    """PPI++ for ``mean(y_b - y_a)``: :func:`ppi_mean` on paired differences.

    ``labelled_*``: the items labelled in *both* runs (same order in all four
    sequences); ``unlabelled_f_*``: the judge on the paired items labelled in
    neither run.  The estimate is the corrected mean of ``b - a``; ``judge_mean``
    and ``bias`` are those of the judged difference.
    """
    ya = _vector("labelled_y_a", labelled_y_a)
    yb = _vector("labelled_y_b", labelled_y_b)
    fa = _vector("labelled_f_a", labelled_f_a)
    fb = _vector("labelled_f_b", labelled_f_b)
    ua = _vector("unlabelled_f_a", unlabelled_f_a)
    ub = _vector("unlabelled_f_b", unlabelled_f_b)
    lengths = {ya.shape[0], yb.shape[0], fa.shape[0], fb.shape[0]}
    if len(lengths) != 1:
        raise ValueError(
            "labelled_y_a, labelled_y_b, labelled_f_a and labelled_f_b must be paired, "
            f"got lengths {ya.shape[0]}, {yb.shape[0]}, {fa.shape[0]}, {fb.shape[0]}"
        )
    if ua.shape[0] != ub.shape[0]:
        raise ValueError(f"unlabelled_f_a and unlabelled_f_b must be paired, got {ua.shape[0]} and {ub.shape[0]}")
    return ppi_mean(yb - ya, fb - fa, ub - ua, alpha=alpha, lam=lam)
