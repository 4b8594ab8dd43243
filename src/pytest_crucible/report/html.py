"""The HTML report: one self-contained file (inline CSS, SVG and one script, no network).

``render_report(store, run_id, gate=...)`` reads a run from the store, takes the gate's verdict
(with its comparison) as it was decided, and renders ``templates/report.html.j2`` with autoescaping on: every string that came from
a golden set, a pipeline or a judge is escaped. Geometry for the SVG plots is computed here so the
template stays declarative. The item list is data (``report/item_data.py``): every item, compressed, which
the page's script (``templates/report_items.js``) renders on demand, inserting every string as text.
This module never imports pytest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .item_data import _loads  # a stored JSON column decoded: one rule for the page and its items
from .views import family_note, p_text, verdict_text

if TYPE_CHECKING:
    from ..verdict.gate import GateResult

__all__ = ["ci_scale", "render_report", "risk_coverage_plot", "write_report"]

VERDICT_CLASSES = {"improved": "improved", "regressed": "regressed", "changed": "changed", "not significant": "ns"}


def _environment():
    import jinja2

    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["pvalue"] = lambda value: p_text(value).strip().replace("-", "–")  # "<.001" as the terminal prints it
    env.filters["signed"] = _signed
    env.filters["pretty_json"] = lambda value: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return env


def _template_text() -> str:
    return resources.files("pytest_crucible.report").joinpath("templates/report.html.j2").read_text(encoding="utf-8")


def _items_script():
    """The page's one script (``templates/report_items.js``): it decodes the items and renders them on demand."""
    import markupsafe

    text = resources.files("pytest_crucible.report").joinpath("templates/report_items.js").read_text(encoding="utf-8")
    if "</script" in text.lower() or "<!--" in text:
        raise ValueError("templates/report_items.js must not hold '</script' or '<!--': it is inlined in a <script>")
    return markupsafe.Markup(text)


def _num(value: Any, places: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{float(value):.{places}f}"


def _signed(value: Any, places: int = 4) -> str:
    return "–" if value is None else f"{float(value):+.{places}f}"


def _metric_label(name: str, k: int | None) -> str:
    from ..metrics import display_name

    return display_name(name, k)


# -- plots -------------------------------------------------------------------------------------
@dataclass
class Plot:
    """Pixel geometry of one x-y plot; values map from [0, 1] x [y_min, y_max]."""

    width: int = 560
    height: int = 360
    left: int = 64
    right: int = 20
    top: int = 20
    bottom: int = 52
    y_min: float = 0.0
    y_max: float = 1.0

    def x(self, value: float) -> float:
        return round(self.left + value * (self.width - self.left - self.right), 2)

    def y(self, value: float) -> float:
        span = (self.y_max - self.y_min) or 1.0
        return round(self.height - self.bottom - (value - self.y_min) / span * (self.height - self.top - self.bottom), 2)


def _curve(confidences: list[float], correct: list[bool], plot: Plot) -> dict[str, Any] | None:
    from ..metrics.selective import risk_coverage_curve

    if not confidences:
        return None
    points = risk_coverage_curve(confidences, correct)
    # A step function: risk_j holds on the coverage interval that ends at point j.
    d = []
    previous = 0.0
    for index, point in enumerate(points):
        d.append(f"{'M' if index == 0 else 'L'}{plot.x(previous)},{plot.y(point.risk)}")
        d.append(f"L{plot.x(point.coverage)},{plot.y(point.risk)}")
        previous = point.coverage
    return {
        "d": " ".join(d),
        "points": [{"cx": plot.x(p.coverage), "cy": plot.y(p.risk), "coverage": p.coverage, "risk": p.risk,
                    "threshold": p.threshold} for p in points],
        "n": len(confidences),
    }


def risk_coverage_plot(pairs: dict[str, tuple[float, bool]], baseline: dict[str, tuple[float, bool]] | None = None,
                       target_risk: float = 0.1) -> dict[str, Any] | None:
    """SVG geometry of the risk-coverage curve (and the baseline's, when given); None without data."""
    plot = Plot()
    values = list(pairs.values())
    curve = _curve([c for c, _ in values], [ok for _, ok in values], plot)
    if curve is None:
        return None
    base_values = list((baseline or {}).values())
    base = _curve([c for c, _ in base_values], [ok for _, ok in base_values], plot) if base_values else None
    ticks = [i / 4 for i in range(5)]
    return {
        "width": plot.width, "height": plot.height,
        "x0": plot.x(0), "x1": plot.x(1), "y0": plot.y(0), "y1": plot.y(1),
        "xticks": [{"pos": plot.x(t), "label": f"{t:.2f}"} for t in ticks],
        "yticks": [{"pos": plot.y(t), "label": f"{t:.2f}"} for t in ticks],
        "target": {"y": plot.y(target_risk), "label": f"target risk {target_risk:g}"},
        "curve": curve, "baseline": base,
        "x_label_x": round((plot.x(0) + plot.x(1)) / 2, 2), "x_label_y": plot.height - 10,
        "y_label_x": 16, "y_label_y": round((plot.y(0) + plot.y(1)) / 2, 2),
    }


def ci_scale(comparisons) -> float:
    """Half-width of the shared delta axis of the CI plots: every interval and delta fits."""
    extent = 0.0
    for m in comparisons:
        for value in (*(m.ci or ()), m.delta):
            if value is not None:
                extent = max(extent, abs(float(value)))
    return extent * 1.1 if extent > 0 else 1.0


def _ci_row(m, scale: float, width: int = 240, height: int = 26) -> dict[str, Any]:
    pad = 8

    def x(value: float) -> float:
        return round(pad + (value + scale) / (2 * scale) * (width - 2 * pad), 2)

    row = {"width": width, "height": height, "zero": x(0.0), "mid": height / 2, "lo": None, "hi": None, "delta": None}
    if m.ci is not None:
        row["lo"], row["hi"] = x(m.ci[0]), x(m.ci[1])
    if m.delta is not None:
        row["delta"] = x(m.delta)
    return row


# -- data --------------------------------------------------------------------------------------
def _warnings(warnings: list[str]) -> list[str]:
    """Warnings as the page shows them, each after one "WARNING" label (the gate's carry it already)."""
    return [warning.removeprefix("WARNING ") for warning in warnings]


def _gate_context(gate: GateResult, run_id: str, k: int | None) -> dict[str, Any]:
    """The gate's verdict as the page shows it: the same object that set the exit code."""
    from ..verdict.gate import FAILED, PASSED, REFUSED, SKIPPED

    context: dict[str, Any] = {
        "verdict": gate.verdict, "summary": gate.summary(), "failures": list(gate.failures),
        # the class of the line that states the verdict: a refusal reads as a failure
        "css": {PASSED: "improved", SKIPPED: "ns"}.get(gate.verdict, "regressed"), "failed_headline": FAILED.headline,
        "refused": gate.refusal if gate.verdict in (REFUSED, SKIPPED) else None,
        "baseline_id": gate.baseline.run_id if gate.baseline is not None else (gate.baseline_ref or ""),
        "label": gate.baseline_ref or "", "rows": [], "warnings": _warnings(gate.warnings),
        "baseline_selective": gate.baseline.selective if gate.baseline is not None else None,
        "has_baseline": gate.has_baseline,
    }
    comparison = gate.comparison
    if comparison is None:
        return context
    scale = ci_scale(comparison.metrics.values())
    gated = set(gate.gated) if gate.gated else None
    # Rows at K were measured at the baseline's K in both runs (at two K they are left out; rescored, at its K).
    k = gate.baseline.k if gate.baseline is not None else k
    for name, m in comparison.metrics.items():
        context["rows"].append({
            "metric": m.metric, "kind": m.kind or "",
            "label": _metric_label(name, k) + ("*" if gated is not None and name not in gated else ""),
            "a": m.a, "b": m.b, "delta": m.delta, "ci": m.ci, "p": m.p,
            "n": m.n, "dropped": m.dropped, "verdict": m.verdict, "verdict_text": verdict_text(m),
            "css": VERDICT_CLASSES.get(m.verdict, "ns"), "lower_is_better": not m.higher_is_better,
            "plot": _ci_row(m, scale), "clusters": m.n_clusters, "design_effect": m.design_effect,
        })
    context.update(clusters=comparison.clusters, cluster_by=comparison.cluster_by)
    context.update(paired=comparison.paired_items, seed=comparison.seed, scale=scale, multiple=comparison.multiple,
                   family_note=family_note(comparison),
                   config_changes=[{"key": key, "a": json.dumps(old), "b": json.dumps(new)}
                                   for key, (old, new) in comparison.config_changes.items()],
                   warnings=_warnings(list(gate.warnings) + list(comparison.warnings)), excluded=list(comparison.excluded))
    return context


def _guardrail_context(golden, item_metrics, results) -> dict[str, Any] | None:
    from .views import run_guardrails

    summary = run_guardrails(golden, item_metrics, results)
    if not summary:
        return None
    rows = [{"name": name, "label": name, **summary[name]} for name in ("attackSuccessRate", "falsePositiveRate") if name in summary]
    rows += [{"name": f"attackSuccessRate.{category}", "label": f"attackSuccessRate, {category}", **entry}
             for category, entry in (summary.get("byCategory") or {}).items()]
    return {"rows": rows, "layers": list((summary.get("blockedByLayer") or {}).items())}


# Conversations drilled down as transcripts: those with a turn that errored, failed or is not correct first.
CONVERSATIONS_SHOWN = 20


def _conversations_context(store, run_id: str, item_metrics: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """The golden conversations of the run as transcripts (``report/transcript.py``): at most CONVERSATIONS_SHOWN,
    read whole alone (None: the run holds no turn)."""
    from ..store import aggregates
    from ..store.conversations import run_turns
    from .transcript import failed_first, transcripts

    turns = run_turns(store, run_id)
    if not turns:
        return None
    every = transcripts([{"id": t["item_id"], "conversation": t["conversation"]} for t in turns], {t["item_id"]: t for t in turns},
                        item_metrics)
    ids = [message["itemId"] for conversation in failed_first(every, CONVERSATIONS_SHOWN) for message in conversation["messages"]]
    rows = {row["item_id"]: row for row in aggregates.results_of(store, run_id, ids)}
    return {"shown": transcripts(aggregates.golden_items_of(store, run_id, ids), rows, item_metrics), "total": len(every)}


def _build_context(store, run_id: str, gate: GateResult | None) -> dict[str, Any]:
    from ..metrics import METRIC_FAMILIES as FAMILIES
    from ..metrics import family_of, ordered_metrics, run_cutoff
    from ..store import aggregates
    from ..store.ledgers import latest_judge_calibration
    from ..verdict.runs import metric_means, selective_pairs
    from .terminal import calibration_line, cost_text, judge_line, pool_line, stored_facets
    from .views import TARGET_RISK, error_class_table, run_labels, selective_summary

    # At scale (100,000 items) the page never holds every result row: the counts come from SQL, the views read
    # the columns they need, and only the items drilled down are read whole.
    run = store.get_run(run_id)
    tally = aggregates.result_tally(store, run_id)
    item_metrics = store.item_metrics(run_id)
    means = metric_means(item_metrics)
    resolved = _loads(run.get("resolved"), {}) or {}
    k = run_cutoff(run)

    outcomes: dict[str, int] = {}
    for outcome, n in tally["outcomes"].items():
        outcomes[outcome or "unknown"] = outcomes.get(outcome or "unknown", 0) + n

    selective_rows = aggregates.result_columns(store, run_id, ("item_id", "confidence", "crag_grade"), where="selective")
    selective = selective_summary(selective_rows)
    families = []
    for family, names in FAMILIES.items():
        rows = [{"name": name, "label": _metric_label(name, k), "mean": means[name][0], "n": means[name][1]}
                for name in names if name in means]
        if family == "abstention" and selective:
            rows.append({"name": "aurc", "label": "aurc (run level)", "mean": selective["aurc"], "n": selective["n"]})
            rows.append({"name": "eAurc", "label": "eAurc", "mean": selective["eAurc"], "n": selective["n"]})
            rows.append({"name": "coverageAtRisk", "label": f"coverage at risk ≤ {TARGET_RISK:g}",
                         "mean": selective["coverageAtRisk"], "n": selective["n"]})
        if rows:
            families.append({"name": family, "rows": rows})
    from ..evaluation.custom_metrics import read_definitions

    defined = read_definitions(run)  # the run's own metrics: a family of their own, with where each is defined
    custom = [{"name": name, "label": f"{name} ({row.get('kind')}, {row.get('origin')})", "mean": means[name][0],
               "n": means[name][1]} for name, row in sorted(defined.items()) if name in means]
    others = [{"name": name, "label": _metric_label(name, k), "mean": means[name][0], "n": means[name][1]}
              for name in ordered_metrics(means) if family_of(name) is None and name not in defined]
    if others:
        families.append({"name": "other", "rows": others})
    if custom:
        families.append({"name": "custom", "rows": custom})

    classes = error_class_table(tally["error_classes"])
    class_total = sum(classes.values()) or 1
    error_classes = [{"name": name, "n": n, "share": n / class_total} for name, n in classes.items()]

    from .item_data import GOLDEN_FIELDS

    golden = aggregates.golden_fields(store, run_id, GOLDEN_FIELDS)  # the facets' fields and the drill-downs', read once
    facet_table = stored_facets(store, run_id, item_metrics, golden)
    facet_metrics = ordered_metrics({m for values in facet_table.values() for entry in values.values() for m in entry["counts"]})
    # A cell's count is shown when its mean rests on fewer items than the facet has (errored ones, or items
    # the metric does not apply to): (mean, count or None).
    facets = [{"name": facet, "metrics": [{"name": m, "label": _metric_label(m, k)} for m in facet_metrics],
               "rows": [{"value": value, "n": entry["n"],
                         "cells": [(entry.get(m), entry["counts"][m] if entry["counts"].get(m, entry["n"]) < entry["n"] else None)
                                   for m in facet_metrics]}
                        for value, entry in values.items()]}
              for facet, values in facet_table.items()]

    from .terminal import ONE_LINE_METRICS
    from .trend import RunRead, report_trends, trend_plots

    # The headline metrics over the earlier runs with exactly these labels, a plot per kind (none without such runs);
    # this run's kinds and metrics as read above.
    known = RunRead(run_id, {item["id"]: item.get("kind") or "retrieval" for item in golden}, item_metrics)
    trends = trend_plots(report_trends(store, run, [name for name in ONE_LINE_METRICS if name in means], known))

    comparison = _gate_context(gate, run_id, k) if gate is not None else None
    plot = risk_coverage_plot(selective_pairs(selective_rows), comparison["baseline_selective"] if comparison else None,
                              TARGET_RISK)

    # Every item, as data the page renders on demand (``report/item_data.py``): read in batches, packed compactly.
    from .item_data import encode_items

    repeats: dict[str, list[dict[str, Any]]] = {}
    if (run.get("repeats") or 1) > 1:
        for repeat in store.item_repeats(run_id):
            repeats.setdefault(repeat["item_id"], []).append(repeat)
    items = encode_items(store, run_id, item_metrics, k, repeats, golden)
    del golden

    from ..metrics.guardrail import ATTACK_SUCCESS, GUARDRAIL_METRICS

    guardrails = None
    if any(name in item_metrics for name in GUARDRAIL_METRICS):
        guardrails = _guardrail_context(aggregates.golden_items_with_metric(store, run_id, ATTACK_SUCCESS), item_metrics,
                                        aggregates.result_columns(store, run_id, ("item_id", "blocked", "blocked_layer"),
                                                                  where="blocked"))

    return {
        "run": run, "resolved": resolved, "params": _loads(run.get("params"), {}),
        "config_path": run.get("config_path") or "(defaults)",
        "judge": judge_line(run) if run.get("judge_model") else None,
        "calibration": calibration_line(latest_judge_calibration(store, run["judge_model"], run.get("judge_prompt_version"))).strip()
        if run.get("judge_model") else None,
        "cost": cost_text(run), "n_items": tally["n"], "outcomes": sorted(outcomes.items()),
        "families": families, "selective": selective, "plot": plot, "trends": trends, "comparison": comparison,
        "facets": facets, "error_classes": error_classes, "items": items, "items_script": _items_script(),
        "k": k, "guardrails": guardrails, "conversations": _conversations_context(store, run_id, item_metrics),
        "labels": run_labels(run), "kinds": _loads(run.get("kinds"), None),
        "pool": pool_line(tally["pool"], k), "db": str(store.path),
    }


def render_report(store, run_id: str, *, gate: GateResult | None = None) -> str:
    """One self-contained HTML page for a run (``run_id``: id, unique prefix or ``latest``).

    ``gate``: the verdict that was reached on this run (:func:`pytest_crucible.verdict.gate.decide`: the
    session's own, or the one `crucible report --against` decided); the page shows it and its
    comparison as they are and never compares again.
    """
    from ..json_input import gc_paused

    run_id = store.resolve_run(run_id)
    env = _environment()
    # What the page is built from holds no cycles and lives until the page is written: walked by no collection
    # while it grows (at 100,000 items the collections cost more than a third of the report's time).
    with gc_paused():
        return env.from_string(_template_text()).render(**_build_context(store, run_id, gate))


def write_report(path: str | Path, html: str) -> Path:
    """The report, written whole (a full disk leaves the previous one, never half a page) and owner-only."""
    from ..store.files import write_output_file

    return write_output_file(path, html)
