"""Agreement between two raters: Cohen's kappa and the confusion matrix.

The one kappa of the package: ``crucible qrels agreement`` (llm vs human relevance grades)
and ``crucible judge calibrate`` (the judge's CRAG grades and faithful verdicts vs human
labels) both call :func:`cohen_kappa`. Pure Python on (rater A, rater B) pairs of any
hashable, sortable categories; knows nothing of runs, stores or judges.

The one rule about a reference rater lives here too: when one rater is the truth (people's labels,
``reference=``) and uses a single category, agreement beyond chance is not measurable, and kappa
is undefined (None, with that category in :attr:`Kappa.single_category`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = ["Kappa", "cohen_kappa", "confusion_matrix"]


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
