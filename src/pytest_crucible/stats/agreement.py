"""Agreement between two raters: Cohen's kappa and the confusion matrix.

The one kappa of the package: ``crucible qrels agreement`` (llm vs human relevance grades)
and ``crucible judge calibrate`` (the judge's CRAG grades and faithful verdicts vs human
labels) both call :func:`cohen_kappa`. Pure Python on (rater A, rater B) pairs of any
hashable, sortable categories; knows nothing of runs, stores or judges. :func:`kappa_intervals` (numpy)
bootstraps two raters' kappas against one reference, and their difference (`crucible judge align`).

The one rule about a reference rater lives here too: when one rater is the truth (people's labels,
``reference=``) and uses a single category, agreement beyond chance is not measurable, and kappa
is undefined (None, with that category in :attr:`Kappa.single_category`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..defaults import DEFAULT_SEED

__all__ = ["Kappa", "KappaIntervals", "cohen_kappa", "confusion_matrix", "kappa_intervals"]


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of two raters over the same items."""

    kappa: float | None  # None: undefined (no pairs; chance agreement 1 without perfect agreement; see single_category)
    observed: float
    expected: float
    n: int
    # With ``reference=``: the reference rater's only category when that made kappa undefined, else None.
    single_category: Hashable | None = None


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]], *, reference: int | None = None) -> Kappa:
    """kappa = (p_o - p_e) / (1 - p_e), with p_e from each rater's marginal distribution.

    ``observed`` (p_o) is the share of pairs on which the raters agree: the accuracy when one
    rater is the reference. No pairs: kappa None, n 0.

    ``reference`` (0 or 1): which rater of each pair is the truth (people's labels against a judge).
    When that rater uses one category for every item, kappa is None and ``single_category`` names
    the category: p_e then equals p_o whatever the other rater says (kappa 0), or both are 1 (0/0),
    so a rater that always answers that category would look perfect and one that ever differs no
    better than chance. Nothing about agreement beyond chance can be measured.

    Without ``reference`` (two peers, as ``crucible qrels agreement``), the formula is symmetric:
    one rater constant and the other not is kappa 0 (chance level); both raters using one and the
    same category for every item is p_e = p_o = 1, reported as 1.0 (perfect, if uninformative).
    """
    n = len(pairs)
    if n == 0:
        return Kappa(None, 0.0, 0.0, 0)
    first: dict[Hashable, int] = {}
    second: dict[Hashable, int] = {}
    agree = 0
    for a, b in pairs:
        first[a] = first.get(a, 0) + 1
        second[b] = second.get(b, 0) + 1
        agree += a == b
    observed = agree / n
    expected = sum((first[c] / n) * (second.get(c, 0) / n) for c in first)
    if reference is not None:
        if reference not in (0, 1):
            raise ValueError(f"reference is 0 or 1 (the rater of each pair that is the truth), got {reference!r}")
        used = first if reference == 0 else second
        if len(used) == 1:
            return Kappa(None, observed, expected, n, single_category=next(iter(used)))
    if expected >= 1.0:
        return Kappa(1.0 if observed >= 1.0 else None, observed, expected, n)
    return Kappa((observed - expected) / (1.0 - expected), observed, expected, n)


def confusion_matrix(pairs: Sequence[tuple[Hashable, Hashable]], categories: Sequence[Hashable]) -> list[list[int]]:
    """``matrix[i][j]``: pairs whose first rater said ``categories[i]`` and second ``categories[j]``.
    A pair naming a category not in ``categories`` raises ValueError."""
    index = {category: position for position, category in enumerate(categories)}
    matrix = [[0] * len(categories) for _ in categories]
    for a, b in pairs:
        if a not in index or b not in index:
            raise ValueError(f"category {a if a not in index else b!r} is not one of {list(categories)}")
        matrix[index[a]][index[b]] += 1
    return matrix


@dataclass(frozen=True)
class KappaIntervals:
    """Bootstrap intervals of two raters' kappas against one reference over the same items, and of
    their difference (``second - first``), from the same resamples (a paired design)."""

    first: tuple[float, float] | None  # None: no resample had a defined kappa
    second: tuple[float, float] | None
    difference: tuple[float, float] | None
    n_resamples: int
    undefined: int  # resamples in which the reference used one category (kappa undefined), left out
    confidence: float
    seed: int


def kappa_intervals(reference: Sequence[Hashable], first: Sequence[Hashable], second: Sequence[Hashable], *,
                    categories: Sequence[Hashable], n_resamples: int = 2000, confidence: float = 0.95,
                    seed: int = DEFAULT_SEED) -> KappaIntervals:
    """Percentile bootstrap intervals of ``cohen_kappa(reference=0)`` of two raters against ``reference``.

    The items are resampled with replacement (:func:`pytest_crucible.stats.resampling.resample_counts`:
    the Mulberry32 index stream every bootstrap of the package draws, seeded with ``seed``); each resample's
    confusion tables are counted exactly, its kappas computed with the formula of :func:`cohen_kappa`, and
    a resample whose reference labels use one category (kappa undefined) is left out and counted. The
    interval holds the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles (linear
    interpolation). Deterministic for a seed: the counts are integers and the sums exact.
    """
    import numpy as np

    from .resampling import resample_counts

    n = len(reference)
    if not (len(first) == len(second) == n) or n == 0:
        raise ValueError(f"expected three non-empty sequences of one length, got {n}, {len(first)}, {len(second)}")
    index = {category: position for position, category in enumerate(categories)}
    k = len(categories)
    counts = np.asarray(resample_counts(n, n_resamples, seed), dtype=np.float64)  # (B, n), integer-valued
    truth = np.array([index[c] for c in reference])
    rows = counts @ np.eye(k)[truth]  # (B, k): the reference's categories in each resample
    single = (rows > 0).sum(axis=1) <= 1

    def kappas(rater: Sequence[Hashable]) -> np.ndarray:
        said = np.array([index[c] for c in rater])
        agree = counts @ (truth == said).astype(np.float64)
        cols = counts @ np.eye(k)[said]
        expected = (rows * cols).sum(axis=1) / (n * n)
        observed = agree / n
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(expected < 1.0, (observed - expected) / (1.0 - expected), np.nan)
        value[single] = np.nan
        return value

    a, b = kappas(first), kappas(second)
    levels = [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0]

    def interval(values: np.ndarray) -> tuple[float, float] | None:
        kept = values[~np.isnan(values)]
        if not kept.size:
            return None
        low, high = np.quantile(kept, levels, method="linear")
        return float(low), float(high)

    return KappaIntervals(interval(a), interval(b), interval(b - a), n_resamples, int(single.sum()), confidence, seed)
