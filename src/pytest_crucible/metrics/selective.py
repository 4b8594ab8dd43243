"""Selective prediction: risk-coverage curve, AURC, E-AURC, coverage at a target risk.

The lens is the one of selective classification (Geifman & El-Yaniv,
"Selective Classification for Deep Neural Networks", NeurIPS 2017; AURC and
E-AURC from Geifman, Uziel & El-Yaniv, "Bias-Reduced Uncertainty Estimation
for Deep Neural Classifiers", ICLR 2019): every result has a confidence and is
either correct or not; a pipeline that answers only when its confidence is at
least a threshold t trades *coverage* (the share of questions it answers) for
*selective risk* (the error rate among the answered ones).

Definitions
-----------
Let there be n results with confidences c_i and correctness flags.  Group the
results by *equal* confidence (exact float equality) and order the groups by
confidence, highest first: g_1, ..., g_m with thresholds t_1 > ... > t_m.
Let N_j = |g_1| + ... + |g_j| and E_j the number of wrong results among them.

* **Risk-coverage curve** -- one point per group::

      coverage_j = N_j / n          (share of results with confidence >= t_j)
      risk_j     = E_j / N_j        (error rate among those results)
      threshold_j = t_j

  Results with tied confidence enter the curve *together*, as one step: no
  threshold can admit one of them without the others, so there is no point
  between them.  The last point always has coverage 1 and risk = overall
  error rate.

* **AURC** -- the coverage-weighted mean of the step risks::

      AURC = sum_j (|g_j| / n) * risk_j

  Equivalently: the mean over results of the selective risk at the coverage
  where that result is admitted, tied results sharing the risk of their group.
  It lies in [0, 1]; lower is better; all correct gives 0, all wrong gives 1.
  It depends only on the ordering of the confidences (any strictly increasing
  transform leaves it unchanged) and not on the order of the input.

  *Relation to Geifman et al.* Without ties every group has one result, so
  N_j = j and AURC = (1/n) sum_{i=1..n} risk@i, where risk@i is the error rate
  of the i most confident results: exactly the empirical AURC of Geifman et
  al. (the area under the step risk-coverage curve sampled at coverages
  1/n, 2/n, ..., 1).  With ties that formula depends on how the tie is broken
  (an arbitrary sort order); the definition here does not.  Geometrically it
  is the area under the step function that is constant on each coverage
  interval (N_{j-1}/n, N_j/n] at the risk of the achievable point at its right
  end -- the same right-end rule Geifman et al.'s sum uses, applied to the
  points a threshold can actually reach.  It is *not* the mean over
  tie-breaks, and it need not lie between the best and the worst tie-break:
  confidences (2, 1, 1) with correctness (yes, no, no) give 4/9 against 7/18
  for either tie-break (the tied errors are charged the group's final risk
  2/3), and (2, 1, 1) with (no, yes, yes) give 5/9 against 11/18 (the tied
  correct results are credited the group's final risk 1/3).

* **Optimal AURC** -- the AURC of a perfect ranking (every correct result
  more confident than every wrong one) with the same n and number of errors e.
  With c = n - e correct results, the first c positions have risk 0 and
  position c + k has risk k / (c + k), so::

      AURC* = (1/n) sum_{k=1..e} k / (c + k) = (e - c (H_n - H_c)) / n

  with H the harmonic numbers.  For large n it tends to the continuous form of
  Geifman et al., r + (1 - r) ln(1 - r) with r = e / n.  The finite form is
  used here so that E-AURC is exactly 0 for a perfect ranking.

* **E-AURC** = AURC - AURC* (excess AURC): the part of the AURC caused by the
  ranking, not by the error rate.  It is >= 0, ties included: risk_j >=
  f(N_j) with f(N) = max(0, N - c) / N (at most c of the first N results can
  be correct), f is non-decreasing, so |g_j| f(N_j) >= sum of f over the
  positions of g_j, and summing gives AURC >= AURC*.

* **Coverage at target risk** -- the largest coverage_j on the curve with
  risk_j <= target (0.0 when no point qualifies).  It is the share of
  questions a pipeline could answer with a confidence floor t_j and still keep
  its error rate at or below the target.  Risks are the exact float ratios
  E_j / N_j, compared with ``<=``, so target 0.25 admits a point with risk 1/4.

* **Abstain rate** = abstained results / results (``None`` when there are none).

Empty input raises ``ValueError`` for the curve, AURC, E-AURC and coverage at
target risk (a metric over nothing is not 0); NaN confidences raise
``ValueError``; correctness must be boolean (or 0/1).

Worked example
--------------
Five results, one tie::

    confidence  0.9   0.8   0.8   0.6   0.3
    correct     yes   no    yes   yes   no

Groups (highest first): {0.9}, {0.8, 0.8}, {0.6}, {0.3}::

    threshold  N_j  E_j  coverage  risk
    0.9         1    0    1/5 = 0.2   0/1 = 0
    0.8         3    1    3/5 = 0.6   1/3
    0.6         4    1    4/5 = 0.8   1/4
    0.3         5    2    5/5 = 1.0   2/5

    AURC   = (1/5)(1 * 0 + 2 * 1/3 + 1 * 1/4 + 1 * 2/5)
           = (1/5)(40/60 + 15/60 + 24/60) = (1/5)(79/60) = 79/300 = 0.26333...
    AURC*  (n = 5, e = 2, c = 3) = (1/5)(1/4 + 2/5) = (1/5)(13/20) = 13/100 = 0.13
    E-AURC = 79/300 - 39/300 = 40/300 = 2/15 = 0.13333...

Breaking the tie instead would give 59/300 (correct one first) or 89/300
(wrong one first); here the group rule happens to land between the two.  Coverage at target risk: 0.1 -> 0.2, 0.25 -> 0.8 (the
point at 0.6 has risk 1/3 > 0.25 but the point at 0.8 has risk exactly 1/4),
0.4 -> 1.0, and any negative target -> 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "RiskCoveragePoint",
    "abstain_rate",
    "aurc",
    "coverage_at_risk",
    "e_aurc",
    "optimal_aurc",
    "risk_coverage_curve",
]


@dataclass(frozen=True)
class RiskCoveragePoint:
    """One step of the risk-coverage curve: answer every result with confidence >= ``threshold``."""

    coverage: float
    risk: float
    threshold: float


def _groups(confidences, correct) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Distinct confidences (descending), results per group and wrong results per group."""
    conf = np.asarray(confidences, dtype=float)
    ok = np.asarray(correct)
    if conf.ndim != 1 or ok.ndim != 1:
        raise ValueError("confidences and correct must be one-dimensional sequences")
    if conf.shape != ok.shape:
        raise ValueError(f"confidences and correct differ in length ({conf.size} != {ok.size})")
    n = int(conf.size)
    if n == 0:
        raise ValueError("empty input: the risk-coverage curve needs at least one (confidence, correct) pair")
    if np.isnan(conf).any():
        raise ValueError("confidences contain NaN")
    if ok.dtype != bool:
        if not np.isin(ok, (0, 1)).all():
            raise ValueError("correct must hold booleans (or 0/1)")
        ok = ok.astype(bool)
    values, inverse, counts = np.unique(conf, return_inverse=True, return_counts=True)
    errors = np.bincount(inverse.reshape(-1)[~ok], minlength=values.size)
    # np.unique sorts ascending; the curve runs from the most confident group down.
    return values[::-1], counts[::-1], errors[::-1], n


def _steps(confidences, correct) -> tuple[list[tuple[float, int, int, int]], int]:
    """[(threshold, |g_j|, N_j, E_j)] per group, highest confidence first, and n."""
    values, counts, errors, n = _groups(confidences, correct)
    cum_n = np.cumsum(counts)
    cum_e = np.cumsum(errors)
    steps = [(float(t), int(g), int(N), int(E)) for t, g, N, E in zip(values, counts, cum_n, cum_e)]
    return steps, n


def risk_coverage_curve(confidences: Sequence[float], correct: Sequence[bool]) -> list[RiskCoveragePoint]:
    """One point per distinct confidence, highest first (tied results enter together).

    Point j: coverage = share of results with confidence >= t_j, risk = error
    rate among them, threshold = t_j.  Raises ``ValueError`` on empty input.
    """
    steps, n = _steps(confidences, correct)
    return [RiskCoveragePoint(coverage=N / n, risk=E / N, threshold=t) for t, _, N, E in steps]


def aurc(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    """Area under the risk-coverage curve: sum_j (|g_j| / n) * risk_j (lower is better).

    Equal to Geifman et al.'s (1/n) sum_i risk@i when no confidences tie.
    Raises ``ValueError`` on empty input.
    """
    steps, n = _steps(confidences, correct)
    return math.fsum(g * E / N for _, g, N, E in steps) / n


def optimal_aurc(n: int, n_errors: int) -> float:
    """AURC of a perfect ranking of n results with ``n_errors`` wrong ones.

    (1/n) sum_{k=1..e} k / (n - e + k), i.e. (e - c (H_n - H_c)) / n with c = n - e.
    """
    if isinstance(n, bool) or isinstance(n_errors, bool) or int(n) != n or int(n_errors) != n_errors:
        raise ValueError("n and n_errors must be integers")
    n, e = int(n), int(n_errors)
    if n <= 0:
        raise ValueError(f"optimal_aurc needs n >= 1, got {n}")
    if not 0 <= e <= n:
        raise ValueError(f"n_errors must be in [0, n]; got {e} with n = {n}")
    c = n - e
    return math.fsum(k / (c + k) for k in range(1, e + 1)) / n


def e_aurc(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    """Excess AURC: aurc - optimal_aurc(n, errors); >= 0 up to float error, 0 for a perfect ranking."""
    steps, n = _steps(confidences, correct)
    observed = math.fsum(g * E / N for _, g, N, E in steps) / n
    return observed - optimal_aurc(n, steps[-1][3])


def coverage_at_risk(confidences: Sequence[float], correct: Sequence[bool], target_risk: float) -> float:
    """Largest coverage on the curve whose selective risk is <= ``target_risk`` (0.0 if none)."""
    target = float(target_risk)
    if math.isnan(target):
        raise ValueError("target_risk is NaN")
    best = 0.0
    for point in risk_coverage_curve(confidences, correct):
        if point.risk <= target:
            best = max(best, point.coverage)
    return best


def abstain_rate(abstained: Sequence[bool]) -> float | None:
    """Share of results that abstained; ``None`` when there are no results."""
    flags = [bool(a) for a in abstained]
    if not flags:
        return None
    return sum(flags) / len(flags)
