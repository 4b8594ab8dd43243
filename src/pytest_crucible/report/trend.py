"""A metric over runs: its run mean in each matching complete run, oldest first (``crucible trend``,
and the trend of a run's headline metrics in its HTML report).

:func:`metric_trends` reads the runs (``verdict.runs.find_runs``) and their means (``verdict.runs.metric_means``,
the one definition of a run's mean); :func:`trend_lines` is the terminal's table and sparkline,
:func:`trend_document` the ``--json`` document, :func:`trend_plot` the report's SVG geometry. As everywhere,
a mean is never taken across kinds of question: runs that mix kinds get one trend per kind. No SQL here,
no statistics: a trend shows the means as measured and decides nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store import Store

# The runs a trend reads by default (each costs one read of its item metrics), and the report's plot.
TREND_LIMIT = 50
REPORT_TREND_RUNS = 20
SPARK = "▁▂▃▄▅▆▇█"


@dataclass
class TrendPoint:
    """One run of a trend: its mean of the metric (None: it did not measure it) over ``n`` items."""

    run_id: str
    started_at: str
    mean: float | None
    n: int
    config_hash: str
    labels: dict[str, str]
    k: int
    other_k: bool = False  # measured at another K than the newest run, and the metric depends on K
    changes: dict[str, Any] = field(default_factory=dict)  # what differs from the run before it

    def to_json(self) -> dict[str, Any]:
        return {"runId": self.run_id, "startedAt": self.started_at, "mean": self.mean, "n": self.n,
                "configHash": self.config_hash, "labels": self.labels, "k": self.k, "otherK": self.other_k,
                "changed": self.changes}


@dataclass
class Trend:
    metric: str  # as stored (ndcgAt10, recallAtK)
    shown: str  # as the terminal shows it at the newest run's K (ndcg@10, recall@10)
    k: int | None  # the newest run's K
    workspace: str | None
    labels: dict[str, str]
    since: datetime | None
    points: list[TrendPoint]  # oldest first
    direction: str | None = "higher"
    kind: str | None = None  # the kind of question its means are of (None: the runs hold one kind)


def _changes(before: TrendPoint | None, run: TrendPoint) -> dict[str, Any]:
    """What changed from the run before: the configHash, each label (None: absent), K."""
    if before is None:
        return {}
    changes: dict[str, Any] = {}
    if before.config_hash != run.config_hash:
        changes["configHash"] = [before.config_hash, run.config_hash]
    labels = {key: [before.labels.get(key), run.labels.get(key)] for key in sorted(set(before.labels) | set(run.labels))
              if before.labels.get(key) != run.labels.get(key)}
    if labels:
        changes["labels"] = labels
    if before.k != run.k:
        changes["k"] = [before.k, run.k]
    return changes


def metric_trends(store: Store, metric: str, *, workspace: str | None = None, labels: dict[str, str] | None = None,
                  since: datetime | None = None, kind: str | None = None, limit: int | None = TREND_LIMIT) -> list[Trend]:
    """``metric`` (as stored, or as the terminal shows it: ``ndcg@10``) over the newest ``limit`` complete runs
    of ``workspace`` with every one of ``labels`` started since ``since``, oldest first: one trend, or one per
    kind of question when the runs mix kinds (``kind``: that kind's only). Raises ``ValueError`` (an unknown
    metric, with a did-you-mean; recall@5 when the newest run's K is 10)."""
    from ..evaluation.custom_metrics import directions
    from ..metrics import resolve_metric, run_cutoff
    from ..verdict.runs import find_runs

    rows = find_runs(store, workspace=workspace, labels=labels, since=since, complete=True, limit=limit)[::-1]
    custom: dict[str, str | None] = {}
    for row in rows:
        custom.update(directions(row))
    name = resolve_metric(metric, run_cutoff(rows[-1]), custom) if rows else metric
    return _trends(store, rows, [name], workspace=workspace, labels=labels, since=since, kind=kind)


def _trends(store: Store, rows: list[dict[str, Any]], names: list[str], *, workspace: str | None,
            labels: dict[str, str] | None, since: datetime | None = None, kind: str | None = None,
            known: RunRead | None = None) -> list[Trend]:
    """One trend per kind of question (when the runs mix kinds; ``kind``: that one) and metric of ``names``,
    over ``rows`` (oldest first); each run's item metrics and kinds are read once (``known``: one run's, as
    its caller read them already)."""
    from ..defaults import KINDS
    from ..evaluation.custom_metrics import directions
    from ..metrics import depends_on_k, display_name, metric_direction, run_cutoff
    from ..store.aggregates import kind_counts, metric_rows, metric_values
    from ..verdict.runs import labels_of, means_of_values

    k = run_cutoff(rows[-1]) if rows else None
    custom: dict[str, str | None] = {}
    seen: set[str] = set()
    for row in rows:
        custom.update(directions(row))
        # the kinds a run's items have, counted in SQL (Store.item_kinds' values: retrieval when an item does not say)
        seen |= (set(known.kinds.values()) if known is not None and known.run_id == row["id"]
                 else {item_kind or "retrieval" for item_kind in kind_counts(store, row["id"])})
    groups: list[str | None] = [kind] if kind else [None] if len(seen) < 2 else sorted(
        seen, key=lambda item_kind: (KINDS.index(item_kind) if item_kind in KINDS else len(KINDS), item_kind))
    # each run's item kinds, read once and only when the values are split by kind (a pass over its items)
    kinds_of = {row["id"]: known.kinds if known is not None and known.run_id == row["id"] else store.item_kinds(row["id"])
                for row in rows} if groups != [None] else {}
    # Each run's values of these metrics, in item order, per group (an item without a golden row counts as
    # retrieval): read once per run, item ids only when the runs mix kinds.
    read: list[dict[str | None, dict[str, list[float]]]] = []
    for row in rows:
        mine = known is not None and known.run_id == row["id"]
        if groups == [None]:
            read.append({None: known.values(names) if known is not None and mine else metric_values(store, row["id"], names)})
            continue
        kinds = kinds_of[row["id"]]
        split: dict[str | None, dict[str, list[float]]] = {group: {} for group in groups}
        for metric, item, value in (known.rows(names) if known is not None and mine else metric_rows(store, row["id"], names)):
            item_group = kinds.get(item, "retrieval")
            if item_group in split:
                split[item_group].setdefault(metric, []).append(value)
        read.append(split)
    trends = []
    for group in groups:
        for name in names:
            points: list[TrendPoint] = []
            for row, values_of in zip(rows, read):
                mean, n = means_of_values({name: values_of[group].get(name, [])}).get(name, (None, 0))
                run_k = run_cutoff(row)
                point = TrendPoint(row["id"], str(row.get("started_at")), mean, n, str(row.get("config_hash") or ""),
                                   labels_of(row), run_k, other_k=run_k != k and depends_on_k(name))
                point.changes = _changes(points[-1] if points else None, point)
                points.append(point)
            trends.append(Trend(name, display_name(name, k), k, workspace, dict(labels or {}), since, points,
                                metric_direction(name, custom), group))
    if len(groups) > 1:  # a kind no run measured the metric on (attackSuccessRate of retrieval questions) is left out
        measured = [trend for trend in trends if any(point.mean is not None for point in trend.points)]
        trends = measured or trends[:len(names)]
    return trends


def trend_document(trends: list[Trend], kind: str | None = None) -> dict[str, Any]:
    """The ``--json`` document: the metric, what was read, and the runs oldest first, each with its ``mean`` and
    ``n``, or, when the runs mix kinds of question and no ``kind`` was asked for, ``byKind`` instead (a mean is
    never taken across kinds)."""
    first = trends[0]
    document: dict[str, Any] = {"metric": first.metric, "shown": first.shown, "direction": first.direction, "k": first.k,
                                "workspace": first.workspace, "labels": first.labels,
                                "since": first.since.isoformat() if first.since is not None else None, "kind": kind, "runs": []}
    mixed = kind is None and first.kind is not None
    for index, point in enumerate(first.points):
        entry = point.to_json()
        if mixed:
            del entry["mean"], entry["n"]
            entry["byKind"] = {trend.kind: {"mean": trend.points[index].mean, "n": trend.points[index].n} for trend in trends}
        document["runs"].append(entry)
    return document


def sparkline(values: list[float | None]) -> str:
    """One block character per value, scaled between their minimum and maximum (a space: no value)."""
    known = [value for value in values if value is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    return "".join(" " if value is None else SPARK[3] if span == 0 else SPARK[round((value - low) / span * (len(SPARK) - 1))]
                   for value in values)


def _change_text(changes: dict[str, Any]) -> str:
    parts = []
    if "configHash" in changes:
        old, new = changes["configHash"]
        parts.append(f"configHash {old[:8]} -> {new[:8]}")
    for key, (old, new) in changes.get("labels", {}).items():
        parts.append(f"+{key}={new}" if old is None else f"-{key}={old}" if new is None else f"{key} {old} -> {new}")
    if "k" in changes:
        parts.append(f"K {changes['k'][0]} -> {changes['k'][1]}")
    return "; ".join(parts)


def describe(trend: Trend) -> str:
    """Which runs a trend reads: "complete runs of workspace 'shop' labelled branch=main since 2025-06-01T00:00+00:00"."""
    where = f" of workspace '{trend.workspace}'" if trend.workspace is not None else " of every workspace"
    labelled = " labelled " + ",".join(f"{key}={value}" for key, value in trend.labels.items()) if trend.labels else ""
    since = f" since {trend.since.isoformat(timespec='minutes')}" if trend.since is not None else ""
    return f"complete run{'s' if len(trend.points) != 1 else ''}{where}{labelled}{since}"


def trend_lines(trends: list[Trend], kind: str | None = None) -> list[str]:
    """The terminal's trend: a header, then per kind of question (when the runs mix them) one line per run
    (started, run id prefix, mean, n, what changed from the run before), a legend for runs measured at another
    K, and a sparkline."""
    first = trends[0]
    direction = {"lower": ", lower is better", None: ", no better direction"}.get(first.direction, "")
    only = f", {kind} questions only" if kind else ""
    lines = [f"{first.shown} over {len(first.points)} {describe(first)}{only}, oldest first{direction}"]
    if kind is None and first.kind is not None:
        lines.append("these runs mix kinds of question: one table per kind, never a mean across them (--kind KIND shows one)")
    for trend in trends:
        if kind is None and trend.kind is not None:
            lines.append(f"{trend.kind} questions:")
        lines.extend(_table(trend))
    return lines


def _table(trend: Trend) -> list[str]:
    width = max(12, len(trend.shown))
    lines = [f"{'started':<19}  {'run':<10}  {trend.shown:>{width}}  {'n':>6}  changed from the run before"]
    for point in trend.points:
        mean = f"{point.mean:.4f}" if point.mean is not None else "-"
        mark = "*" if point.other_k else " "
        lines.append(f"{point.started_at[:19].replace('T', ' '):<19}  {point.run_id[:10]:<10}  {mean:>{width - 1}}{mark}  "
                     f"{point.n:>6}  {_change_text(point.changes)}".rstrip())
    marked = sorted({point.k for point in trend.points if point.other_k})
    if marked:
        from ..metrics import display_name

        lines.append(f"* measured at K = {', '.join(map(str, marked))}, not K = {trend.k} as the newest run: a different "
                     f"ruler ({', '.join(display_name(trend.metric, k) for k in marked)}, not {trend.shown})")
    values = [point.mean for point in trend.points]
    known = [value for value in values if value is not None]
    if known:
        lines.append(f"trend {sparkline(values)}  min {min(known):.4f}  max {max(known):.4f}  "
                     f"last - first {known[-1] - known[0]:+.4f}")
    missing = sum(value is None for value in values)
    if missing:
        lines.append(f"{missing} run{'s' if missing != 1 else ''} did not measure {trend.shown} (- above, a gap in the trend)")
    return lines


# -- the HTML report's plot ----------------------------------------------------------------------
@dataclass
class RunRead:
    """What a caller read of one run already, which a trend over it need not read again: its item kinds
    (``Store.item_kinds``) and item metrics (``Store.item_metrics``)."""

    run_id: str
    kinds: dict[str, str]
    metrics: dict[str, dict[str, float]]

    def values(self, names: Iterable[str]) -> dict[str, list[float]]:
        """``store.aggregates.metric_values`` of these metrics."""
        wanted = set(names)
        return {name: list(values.values()) for name, values in self.metrics.items() if name in wanted}

    def rows(self, names: Iterable[str]) -> list[tuple[str, str, float]]:
        """``store.aggregates.metric_rows`` of these metrics."""
        wanted = set(names)
        return [(name, item_id, value) for name, values in self.metrics.items() if name in wanted for item_id, value in values.items()]


def report_trends(store: Store, run: dict[str, Any], metrics: Iterable[str], known: RunRead | None = None) -> list[Trend]:
    """The trend of ``metrics`` over the complete runs of ``run``'s workspace that carry exactly its labels,
    up to it (the newest ``REPORT_TREND_RUNS``; ``run`` itself the last point, complete or not), per kind of
    question when the runs mix kinds. Only the metrics measured in two runs or more; empty when the run has
    no labels or no earlier such run. ``known``: what the caller read of ``run`` already."""
    from ..verdict.runs import find_runs, labels_of, started_at

    labels = labels_of(run)
    if not labels:
        return []
    mine = started_at(run)
    rows = [row for row in find_runs(store, workspace=run.get("workspace"), labels=labels, complete=True, exclude=run["id"])
            if labels_of(row) == labels and started_at(row) <= mine][:REPORT_TREND_RUNS - 1]
    if not rows:
        return []
    trends = _trends(store, [*rows[::-1], run], list(metrics), workspace=run.get("workspace"), labels=labels, known=known)
    return [trend for trend in trends if sum(point.mean is not None for point in trend.points) >= 2]


def trend_plots(trends: list[Trend]) -> list[dict[str, Any]]:
    """One plot per kind of question (:func:`trend_plot`), in the order the trends come."""
    kinds = list(dict.fromkeys(trend.kind for trend in trends))
    return [plot for plot in (trend_plot([trend for trend in trends if trend.kind == kind]) for kind in kinds) if plot]


def trend_plot(trends: list[Trend], width: int = 600, height: int = 200) -> dict[str, Any] | None:
    """SVG geometry of one trend plot: a polyline per metric over the runs (x: the run's place, oldest left;
    y: the mean on [0, 1], or the values' own range when one falls outside it)."""
    from ..metrics import display_name

    if not trends:
        return None
    left, right, top, bottom = 48, 170, 22, 28
    points = trends[0].points
    values = [point.mean for trend in trends for point in trend.points if point.mean is not None]
    # [0, 1], widened in steps of 0.25 to take a value outside it (truthfulness runs from -1 to 1).
    low, high = math.floor(min(0.0, *values) * 4) / 4, math.ceil(max(1.0, *values) * 4) / 4
    span = (high - low) or 1.0

    def x(index: int) -> float:
        return round(left + (index / max(1, len(points) - 1)) * (width - left - right), 2)

    def y(value: float) -> float:
        return round(height - bottom - (value - low) / span * (height - top - bottom), 2)

    lines: list[dict[str, Any]] = []
    for index, trend in enumerate(trends):
        dots: list[dict[str, Any]] = [{"cx": x(i), "cy": y(point.mean), "other_k": point.other_k,
                                       "title": f"{display_name(trend.metric, point.k)} {point.mean:.4f} (n {point.n}), "
                                                f"run {point.run_id} started {point.started_at}"}
                                      for i, point in enumerate(trend.points) if point.mean is not None]
        last = [point.mean for point in trend.points if point.mean is not None][-1]
        lines.append({"name": trend.shown, "series": index % 6, "d": " ".join(
            f"{'M' if j == 0 else 'L'}{dot['cx']},{dot['cy']}" for j, dot in enumerate(dots)), "dots": dots,
            "label_x": width - right + 8, "label_y": dots[-1]["cy"] + 4, "last": f"{last:.3f}"})
    previous = None
    for line in sorted(lines, key=lambda line: line["label_y"]):  # names at the right end, never on top of each other
        if previous is not None and line["label_y"] < previous + 12:
            line["label_y"] = previous + 12
        previous = line["label_y"]
    ticks = [low + 0.25 * i for i in range(round(span * 4) + 1)] if span <= 2 else [low + span * i / 4 for i in range(5)]
    return {"kind": trends[0].kind, "width": width, "height": height, "x0": left, "x1": width - right, "y0": y(low),
            "y1": y(high), "yticks": [{"pos": y(t), "label": f"{t:.2f}"} for t in ticks], "lines": lines, "n": len(points),
            "first": points[0].started_at[:10], "last": points[-1].started_at[:10],
            "other_k": any(point.other_k for trend in trends for point in trend.points)}
