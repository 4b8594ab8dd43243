"""Repeats: one golden item evaluated N times (``--crucible-repeat``) becomes one item.

A pipeline or a judge that samples makes one run one draw. With repeats, each call is evaluated on
its own and :func:`combine` folds them: the item's metric values are their means over the repeats
that have them (so every comparison, gate and floor reads item means, unchanged), each repeat is
kept (``ItemScore.repeats``, stored in ``item_repeats``), and in strict mode the item passes when at
least ``repeat_pass`` of its repeats pass. The summary's wiggle figures (:func:`wiggle`) come from
the stored repeats. No pytest here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from . import ItemVerdict

# A share computed from integers compared with a user's share (0.67 for two of three) must not fail
# on the last bit.
_SHARE_TOLERANCE = 1e-9


class RepeatRow(TypedDict):
    """One repeat of an item, as the item keeps it (``ItemScore.repeats``) and the store writes it."""

    repeat: int  # 0-based, in call order
    outcome: str  # passed | failed | error (the strict rule: see _outcome)
    answer: str | None
    metrics: dict[str, float]
    failure: str | None
    error: str | None


def needed(repeat: int, repeat_pass: float) -> int:
    """How many of ``repeat`` repeats must pass for the item to pass."""
    return max(1, math.ceil(repeat * repeat_pass - _SHARE_TOLERANCE))


def _outcome(verdict: ItemVerdict) -> str:
    """The repeat's outcome under the strict rule (so record mode still sees a flaky item)."""
    score = verdict.score
    if verdict.error is not None or score.error or score.judge_errors or score.metric_errors:
        return "error"
    return "failed" if verdict.failure or verdict.strict_failure else "passed"


def combine(item_id: str, verdicts: Sequence[ItemVerdict], repeat_pass: float) -> ItemVerdict:
    """One verdict for an item from the verdicts of its repeats (in order, at least one)."""
    from . import ItemVerdict

    first = verdicts[0]
    rows: list[RepeatRow] = [{"repeat": index, "outcome": _outcome(v), "answer": v.score.answer, "metrics": dict(v.score.metrics),
                              "failure": v.failure or v.strict_failure, "error": v.score.error} for index, v in enumerate(verdicts)]
    errored = next((v for v in verdicts if v.error is not None), None)
    if errored is not None:  # the pipeline raised: the item is an error, with that exception, whatever the others did
        errored.score.repeats = rows
        return errored
    score = first.score
    sums: dict[str, list[float]] = {}
    for verdict in verdicts:
        for name, value in verdict.score.metrics.items():
            sums.setdefault(name, []).append(value)
    score.metrics = {name: sum(values) / len(values) for name, values in sums.items()}
    score.judge_errors = [error for v in verdicts for error in v.score.judge_errors]
    score.metric_errors = [error for v in verdicts for error in v.score.metric_errors]
    score.cache_rows = [row for v in verdicts for row in v.score.cache_rows]
    score.qrels_rows = [row for v in verdicts for row in v.score.qrels_rows]
    score.repeats = rows
    failed = [v for v in verdicts if v.failure]
    if failed and failed[0].score.error_class:  # the item's class: that of its first failing repeat
        score.error_class, score.error_evidence = failed[0].score.error_class, failed[0].score.error_evidence
    if any(v.failure and (v.score.judge_errors or v.score.metric_errors) for v in verdicts):
        # a judge or a metric that failed on any repeat is an error of the item, in every outcome mode
        reasons = [f"repeat {row['repeat'] + 1}: {(verdicts[row['repeat']].failure or '').removeprefix(f'golden item {item_id}: ')}"
                   for row in rows if row["outcome"] == "error"]
        return ItemVerdict(score, failure=f"golden item {item_id}: " + "\n".join(reasons))
    passed = sum(1 for row in rows if row["outcome"] == "passed")
    need = needed(len(verdicts), repeat_pass)
    if not any(v.failure for v in verdicts) or passed >= need:  # record mode fails no item on its outcome
        return ItemVerdict(score, explained_keys=any(v.explained_keys for v in verdicts))
    prefix = f"golden item {item_id}: "
    lines = [f"repeat {row['repeat'] + 1}: {(row['failure'] or '').splitlines()[0].removeprefix(prefix)}"
             for row in rows if row["outcome"] != "passed"]
    return ItemVerdict(score, failure=(f"golden item {item_id}: {len(verdicts) - passed} of {len(verdicts)} repeats failed "
                                       f"(crucible_repeat_pass = {repeat_pass:g} needs {need} to pass)\n" + "\n".join(lines)),
                       explained_keys=any(v.explained_keys for v in verdicts))


def wiggle(rows: Iterable[dict[str, Any]]) -> tuple[list[tuple[str, int, int]], dict[str, tuple[float, int]]]:
    """From stored repeats (``item_id``, ``outcome``, ``metrics`` dicts): the flaky items, as (item, passed,
    repeats) for each item whose outcomes differ across its repeats, and per metric the mean within-item
    standard deviation over the items with two values or more, with that number of items."""
    by_item: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_item.setdefault(row["item_id"], []).append(row)
    flaky = []
    spreads: dict[str, list[float]] = {}
    for item_id, repeats in by_item.items():
        outcomes = {row["outcome"] for row in repeats}
        if len(outcomes) > 1:
            flaky.append((item_id, sum(1 for row in repeats if row["outcome"] == "passed"), len(repeats)))
        values: dict[str, list[float]] = {}
        for row in repeats:
            for name, value in (row.get("metrics") or {}).items():
                values.setdefault(name, []).append(float(value))
        for name, series in values.items():
            if len(series) >= 2:
                mean = sum(series) / len(series)
                spreads.setdefault(name, []).append(math.sqrt(sum((v - mean) ** 2 for v in series) / (len(series) - 1)))
    return flaky, {name: (sum(sds) / len(sds), len(sds)) for name, sds in spreads.items()}


def pass_rates(rows: Iterable[dict[str, Any]]) -> list[tuple[int, float, float, int]]:
    """(k, pass^k, pass@k, items) under the strict outcomes of stored repeats, one entry per number of repeats
    an item has: the share of items whose every repeat passed (how reliably the pipeline gets an item right, as
    tau-bench reads it) and the share with at least one passing repeat (what it can do at all). pass^3 and
    pass^2 are different measures, so items with different numbers of stored repeats (a run stopped between
    an item's repeats) are never mixed: each count is its own entry, most repeats first. Empty without repeats."""
    by_item: dict[str, list[bool]] = {}
    for row in rows:
        by_item.setdefault(row["item_id"], []).append(row["outcome"] == "passed")
    by_count: dict[int, list[list[bool]]] = {}
    for passed in by_item.values():
        by_count.setdefault(len(passed), []).append(passed)
    return [(k, sum(all(p) for p in items) / len(items), sum(any(p) for p in items) / len(items), len(items))
            for k, items in sorted(by_count.items(), reverse=True)]


def variance_components(rows: Iterable[dict[str, Any]], repeats: int) -> dict[str, tuple[float, float, int | None]]:
    """Per metric: (between-item variance, within-item variance, repeats that would halve the variance of
    the run's mean; None when repeats cannot).

    With k repeats an item's value is its mean, whose variance across items is ``between + within / k``
    (one-way random effects, method of moments: ``within`` is the mean within-item variance, ``between``
    the variance of the item means minus ``within / k``, at least 0). Repeats shrink only the second
    part, so halving the total needs ``within / (total / 2 - between)`` repeats, and is out of reach
    when the items themselves vary more than half the total: then only more items help."""
    values: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        for name, value in (row.get("metrics") or {}).items():
            values.setdefault(name, {}).setdefault(row["item_id"], []).append(float(value))
    out: dict[str, tuple[float, float, int | None]] = {}
    for name, items in values.items():
        series = [vs for vs in items.values() if len(vs) >= 2]
        if len(series) < 2:
            continue
        within = sum(sum((v - sum(vs) / len(vs)) ** 2 for v in vs) / (len(vs) - 1) for vs in series) / len(series)
        means = [sum(vs) / len(vs) for vs in series]
        grand = sum(means) / len(means)
        between = max(0.0, sum((m - grand) ** 2 for m in means) / (len(means) - 1) - within / repeats)
        total = between + within / repeats
        needed = None
        if within > 0 and total / 2 > between:
            needed = math.ceil(within / (total / 2 - between))
        out[name] = (between, within, needed)
    return out
