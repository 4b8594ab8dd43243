"""Views of runs and comparisons, shared by the pytest summary and the CLI (text and JSON)."""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING, Any

from ..metrics import METRIC_FAMILIES as FAMILIES
from ..metrics import family_of
from ..verdict.gate import FAILED, PASSED, REFUSED, SKIPPED
from .lines import Level, SummaryLine

# The colour of the line that states each verdict (-q's one line ends with it).
VERDICT_LEVELS = {PASSED: Level.GOOD, FAILED: Level.BAD, REFUSED: Level.BAD, SKIPPED: Level.PLAIN}
# The colour of a metric's row in the comparison table, by its verdict.
ROW_LEVELS = {"regressed": Level.BAD, "improved": Level.GOOD}
# How a warning of the gate begins (its other notes are facts: the subset compared, the ruler's checks).
WARNING = "WARNING"

if TYPE_CHECKING:  # the comparison engine (numpy) is imported only when a comparison is shown
    from ..verdict.comparison import Comparison
    from ..verdict.gate import GateResult
    from ..verdict.runs import RunData


def run_labels(run: dict[str, Any]) -> dict[str, str]:
    """The run's labels (model, collection, mode, ...); empty for runs stored before labels existed."""
    raw = run.get("labels")
    return json.loads(raw) if isinstance(raw, str) else dict(raw or {})


TARGET_RISK = 0.1


def selective_summary(results: list[dict[str, Any]]) -> dict[str, float] | None:
    """Run-level selective prediction from the results' (confidence, CRAG-correct) pairs.

    An item counts when it has a confidence and a CRAG grade; correct = perfect or acceptable
    (an honest abstention on an unanswerable item is perfect, on an answerable one missing).
    """
    from ..verdict.runs import selective_pairs

    pairs = list(selective_pairs(results).values())
    if not pairs:
        return None
    from ..metrics.selective import aurc, coverage_at_risk, e_aurc

    confidences, correct = [c for c, _ in pairs], [ok for _, ok in pairs]
    return {"aurc": aurc(confidences, correct), "eAurc": e_aurc(confidences, correct),
            "coverageAtRisk": coverage_at_risk(confidences, correct, TARGET_RISK), "n": len(pairs)}


def error_class_counts(results: list[dict[str, Any]]) -> dict[str, int]:
    from ..metrics.errors import ERROR_CLASSES

    counts = dict.fromkeys(ERROR_CLASSES, 0)
    for row in results:
        if row.get("error_class"):
            counts[row["error_class"]] += 1
    return {name: n for name, n in counts.items() if n}


def error_class_table(counts: dict[str, int]) -> dict[str, int]:
    """:func:`error_class_counts` of classes already counted (``store.aggregates.result_tally``)."""
    from ..metrics.errors import ERROR_CLASSES

    return {name: counts[name] for name in ERROR_CLASSES if counts.get(name)}


def run_guardrails(items: list[dict[str, Any]], metrics: dict[str, dict[str, float]],
                   results: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """Guardrail rates with Wilson intervals, attacks by category, blocks by layer (None: no guardrail eval)."""
    from ..metrics.guardrail import guardrail_summary

    layers = {row["item_id"]: row.get("blocked_layer") for row in results or [] if row.get("blocked")}
    return guardrail_summary(items, metrics, layers)


def run_metrics_json(data: RunData, items: list[dict[str, Any]] | None = None,
                     results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The spec's metrics shape; families not computed in this run are left out, never zero-filled.

    With the run's golden items, a ``byFacet`` block breaks every metric down by facet value."""
    means = data.means()
    document: dict[str, Any] = {"runId": data.run_id, "configHash": data.run["config_hash"], "n": len(data.item_ids)}
    labels = run_labels(data.run)
    if labels:
        document["labels"] = labels
    if data.run.get("kinds"):
        document["kinds"] = json.loads(data.run["kinds"])
    for family, names in FAMILIES.items():
        values = {name: means[name] for name in names if name in means}
        if values:
            document[family] = values
    selective = selective_summary(results) if results else None
    if selective:
        document.setdefault("abstention", {}).update(aurc=selective["aurc"], eAurc=selective["eAurc"],
                                                    coverageAtRisk10=selective["coverageAtRisk"])
    if results:
        classes = error_class_counts(results)
        if classes:
            document["errorClasses"] = classes
    if items:
        detail = run_guardrails(items, data.metrics, results)
        if detail:
            document["guardrailDetail"] = detail
    from ..evaluation.custom_metrics import read_definitions

    defined = read_definitions(data.run)  # the run's own metrics (docs/custom-metrics.md): their own block
    custom = {name: means[name] for name in sorted(defined) if name in means}
    if custom:
        document["custom"] = custom
    if defined:
        document["customMetrics"] = [{key: row.get(key) for key in ("name", "kind", "better", "origin", "fingerprint",
                                                                     "judgeModel", "promptVersion") if row.get(key) is not None
                                      or key == "better"} for row in defined.values()]
    others = {name: value for name, value in means.items() if family_of(name) is None and name not in defined}
    if others:
        document["other"] = dict(sorted(others.items()))
    if data.run.get("judge_model"):
        document["judge"] = {"model": data.run["judge_model"], "promptVersion": data.run.get("judge_prompt_version")}
    if items:
        from ..metrics.facets import by_facet

        document["byFacet"] = by_facet(items, data.metrics)
    return document


def run_metrics_document(store, run_id: str) -> dict[str, Any]:
    """The metrics document of one stored run: what `crucible metrics --json` prints and the API serves."""
    from ..verdict.runs import load_run

    return run_metrics_json(load_run(store, run_id), store.golden_items(run_id), store.results(run_id))


def run_summary_json(run: dict[str, Any]) -> dict[str, Any]:
    """One row of a run listing (the API's shape): camelCase, labels as an object, no local paths."""
    return {
        "id": run["id"], "workspace": run.get("workspace") or "default", "status": run["status"],
        "startedAt": run["started_at"], "finishedAt": run.get("finished_at"), "mode": run["mode"],
        "configHash": run["config_hash"], "n": run.get("n_items") or 0,
        "labels": run_labels(run),
        "judge": {"model": run["judge_model"], "promptVersion": run.get("judge_prompt_version")} if run.get("judge_model") else None,
        "gitCommit": run.get("git_commit"),
    }


def _fmt(value: float | None, width: int = 7, places: int = 4) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{places}f}"


def verdict_text(m, *, compact: bool = False) -> str:
    """A metric's verdict; a null comes with its power, so it reads as a number: the smallest change
    these pairs can detect (mde) and the items needed to detect the observed delta.

    ``compact`` (the terminal's 26-character column): ``ns, mde 0.077, need n 151``."""
    if m.note or m.verdict != "not significant" or m.mde is None:
        return m.note or m.verdict
    if m.mde == 0.0:
        return "ns (no item changed)" if compact else "not significant (no item changed)"
    if compact:  # the terminal's column: 12372 items read "need n 12k"
        need = m.required_n if not m.required_n or m.required_n < 10_000 else f"{m.required_n / 1000:.0f}k"
        return f"ns, mde {m.mde:.3f}" + (f", need n {need}" if m.required_n else "")
    return f"not significant (detectable: {m.mde:.3f}" + (f"; n for this delta: {m.required_n})" if m.required_n else ")")


def p_text(value: float | None) -> str:
    if value is None:
        return f"{'-':>5}"
    return "<.001" if value < 0.001 else f"{value:5.3f}"


MARGIN_LEGEND = ("  with a margin: non-inferior = the CI rules out a drop larger than the margin; inferior = the",
                 "  whole CI is beyond it; inconclusive = neither (the gate fails on both: more items tell)")
COMPARISON_LEGEND = ("  ns = not significant (the CI holds 0 or p >= 0.05); mde = the smallest change these pairs",
                     "  can detect; need n = items needed to detect this delta; * = not gated")


EXCLUDED_SHOWN = 5


def excluded_lines(excluded: list[dict[str, str]], width: int = 100) -> list[str]:
    """The items left out of the pairs and why (the first few; the JSON and the HTML list them all)."""
    if not excluded:
        return []
    lines = [f"  {len(excluded)} item{'s' if len(excluded) != 1 else ''} left out of the pairs:"]
    for entry in excluded[:EXCLUDED_SHOWN]:
        line = f"    {entry['id']}: {entry['reason']}"
        lines.append(line if len(line) <= width else line[:width - 3] + "...")
    if len(excluded) > EXCLUDED_SHOWN:
        lines.append(f"    ... and {len(excluded) - EXCLUDED_SHOWN} more (crucible compare --json lists every one)")
    return lines


def list_lines(head: str, parts: list[str], width: int = 100) -> list[str]:
    """``head`` then ``parts`` joined by commas, in lines of at most ``width`` columns, never breaking a part
    ("ndcgAt10 1.39", "entailment 1.00 (n 118)"): the first line indented two spaces, the others four."""
    lines, line = [], "  " + head
    for index, part in enumerate(parts):
        piece = part + ("," if index < len(parts) - 1 else "")
        if line.strip() != head.strip() and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = "    " + piece
        else:
            line += ("" if line.endswith(" ") else " ") + piece
    return [*lines, line]


def family_note(comparison: Comparison) -> str:
    """How the p-values were corrected: ", p Holm-adjusted over 12 gated metrics" (or at full alpha)."""
    if comparison.multiple != "holm":
        return ", p not adjusted across metrics (--crucible-multiple=none)"
    size = len(comparison.family)
    if not size:
        return ", no gated metric has a p-value to adjust"  # too few pairs, or none measured
    return f", p Holm-adjusted over {size} gated metric{'s' if size != 1 else ''}"


def conversations_line(comparison: Comparison) -> str:
    """"  36 turns in 12 conversations, compared as 12 clusters; design effect 1.10-1.80": the golden conversations
    among the paired items, whose turns the comparison resamples together (each conversation a cluster)."""
    assert comparison.conversations is not None
    turns, conversations, clusters = comparison.conversations
    text = f"  {turns} turn{'s' if turns != 1 else ''} in {conversations} conversation{'s' if conversations != 1 else ''}"
    if comparison.clusters is None:  # every conversation of one turn: nothing moves together
        return text + ", each turn its own item (no conversation has two turns among the pairs)"
    effects = sorted(m.design_effect for m in comparison.metrics.values() if m.design_effect is not None)
    effect = "" if not effects else f"; design effect {effects[0]:.2f}" if effects[0] == effects[-1] \
        else f"; design effect {effects[0]:.2f}-{effects[-1]:.2f}"
    return text + f", compared as {clusters} cluster{'s' if clusters != 1 else ''}" + effect


def comparison_lines(comparison: Comparison, gated: set[str] | None = None) -> list[SummaryLine]:
    """An aligned table that fits 100 columns: metric, a, b, delta, CI, p, verdict (a row is red when
    its metric regressed, green when it improved)."""
    from .lines import plain

    clusters = (f", {comparison.clusters} cluster{'s' if comparison.clusters != 1 else ''} "
                f"(--crucible-cluster={comparison.cluster_by}: resampled by cluster)"
                if comparison.clusters is not None else "")
    about = f"  {comparison.paired_items} paired items{clusters}, seed {comparison.seed}" + family_note(comparison)
    lines = plain([
        f"baseline {comparison.a} -> this run {comparison.b}",
        *textwrap.wrap(about, width=100, subsequent_indent="    ", break_on_hyphens=False),
        *([conversations_line(comparison)] if comparison.conversations is not None else []),
        f"  {'metric':<22} {'a':>7} {'b':>7} {'delta':>8} {'95% CI':>16} {'p':>5}  verdict",
    ])
    legend = False
    kind = None
    for name, m in comparison.metrics.items():
        if m.kind != kind:  # runs that mix kinds are compared kind by kind: one block each
            kind = m.kind
            lines.append(SummaryLine(f"  {kind} questions:"))
        ci = f"[{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]" if m.ci else "-"
        delta = f"{m.delta:+8.4f}" if m.delta is not None else f"{'-':>8}"
        verdict = verdict_text(m, compact=True)
        label = comparison.label(m.metric) + ("*" if gated is not None and name not in gated else "")
        legend = legend or verdict.startswith("ns") or label.endswith("*")
        lines.append(SummaryLine(f"  {label:<22} {_fmt(m.a)} {_fmt(m.b)} {delta} {ci:>16} {p_text(m.p)}  {verdict}",
                                 ROW_LEVELS.get(verdict, Level.PLAIN)))
    text = list(COMPARISON_LEGEND) if legend else []
    text.extend(excluded_lines(comparison.excluded))  # after the table: the header stays over its rows
    margins = [f"{comparison.label(m.metric)} {m.margin:g}" for m in comparison.metrics.values() if m.margin is not None]
    if margins:
        text.extend(MARGIN_LEGEND)
        text.extend(list_lines("margins:", sorted(set(margins))))
    effects = [f"{comparison.label(name)} {m.design_effect:.2f}" for name, m in comparison.metrics.items() if m.design_effect is not None]
    if effects:  # how much wider the clustered intervals are than independent items would make them (squared)
        text.extend(list_lines("design effect (clustered / independent-items variance):", effects))
    for key, (old, new) in comparison.config_changes.items():
        text.append(f"  config {key}: {old!r} -> {new!r}")
    lines.extend(plain(text))
    lines.extend(SummaryLine(f"WARNING {warning}", Level.ALERT) for warning in comparison.warnings)
    return lines


def chosen_baseline(result: GateResult) -> str | None:
    """"baseline latest:branch=main is run 01J...": which run a baseline named by its labels turned out to be
    (None for a baseline named by id, file or plain ``latest``, or none read)."""
    ref, baseline = result.baseline_ref, result.baseline
    if ref and baseline is not None and ref.startswith("latest:"):
        return f"baseline {ref} is run {baseline.run_id}"
    return None


def gate_lines(result: GateResult) -> list[SummaryLine]:
    """The gate as the terminal and `crucible compare` print it: warnings, the comparison table,
    one line per failure (or the refusal with its HINT), then the conclusion."""
    from .lines import alert, alerts

    lines = []
    for warning in result.warnings:
        wrapped = textwrap.wrap(warning, width=100, subsequent_indent="  ", break_on_hyphens=False)
        lines.extend(alert(wrapped[0], wrapped[1:]) if warning.startswith(WARNING) else
                     [SummaryLine(line) for line in wrapped])
    chosen = chosen_baseline(result)
    if chosen and result.baseline is not None:  # chosen_baseline names a baseline that was read, never None
        lines.append(SummaryLine(f"{chosen} (started {result.baseline.run.get('started_at')})"))
    if result.comparison is not None:
        lines.extend(comparison_lines(result.comparison, set(result.gated) if result.gated else None))
    if result.verdict == REFUSED and result.refusal:
        first, *rest = result.refusal.splitlines()
        lines.extend(alert(f"{REFUSED.headline} {first}", rest))
    elif result.verdict == SKIPPED:
        lines.append(SummaryLine(result.summary()))
    else:
        lines.extend(alerts(f"{FAILED.headline} {reason}" for reason in result.failures))
        if result.passed:
            lines.append(SummaryLine(result.summary(), VERDICT_LEVELS[PASSED]))
    return lines
