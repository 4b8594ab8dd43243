"""Plain-text views of a run, shared by the pytest summary and the ``crucible`` CLI."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..metrics import display_name, ordered_metrics, run_cutoff
from .lines import Level, SummaryLine, alerts, plain

if TYPE_CHECKING:
    from ..verdict.runs import StoredMeans


def metric_table(means: dict[str, tuple[float, int]], k: int | None = None) -> list[str]:
    lines = [f"  {'metric':<22} {'mean':>8} {'n':>6}"]
    for name in ordered_metrics(means):
        mean, n = means[name]
        label = display_name(name, k)
        lines.append(f"  {label:<22} {mean:>8.4f} {n:>6}")
    return lines


def run_header(run: dict[str, Any]) -> list[str]:
    config = run.get("config_path") or "(defaults)"
    lines = [
        f"run {run['id']}  status {run['status']}  mode {run['mode']}  outcome {run['outcome_mode']}",
        f"config {config}  configHash {run['config_hash'][:12]}",
    ]
    from .views import run_labels

    labels = run_labels(run)
    if labels or run.get("kinds"):
        tags = " ".join(f"{key}={value}" for key, value in labels.items())
        kinds = f"  kinds {','.join(json.loads(run['kinds']))}" if run.get("kinds") else ""
        lines.append(f"workspace {run.get('workspace', 'default')}  labels {tags or '-'}{kinds}")
    if run.get("judge_model"):
        lines.extend(judge_lines(run))
    return lines


def judge_line(run: dict[str, Any]) -> str:
    """e.g. ``judge claude-haiku-5-5 via Anthropic API, prompts crucible-v1: 310 requests, 300 cached,
    10 judged, 0 failed, $0.0123 (...)``; the prompts are left out when they are the judge's own
    name (the offline judge's heuristics)."""
    return ", ".join(line.strip() for line in judge_lines(run))


def cost_text(run: dict[str, Any]) -> str | None:
    """What the run's judge cost: ``$0.0123 (1,200 in / 300 out tokens; cache 900 read, 100 written)``, and the
    estimate made before it ran, or None (the terminal's judge lines and the HTML report both say it)."""
    stats = json.loads(run["judge_stats"]) if run.get("judge_stats") else None
    cost = []
    if run.get("cost_usd"):
        cached = (f"; cache {stats.get('cacheReadTokens', 0):,} read, {stats.get('cacheWriteTokens', 0):,} written"
                  if stats and (stats.get("cacheReadTokens") or stats.get("cacheWriteTokens")) else "")
        cost.append(f"${run['cost_usd']:.4f} ({run.get('input_tokens') or 0:,} in / {run.get('output_tokens') or 0:,} "
                    f"out tokens{cached})")
    if run.get("cost_estimate_usd") is not None:
        cost.append(f"estimated ${run['cost_estimate_usd']:.2f}")
    return ", ".join(cost) or None


def judge_lines(run: dict[str, Any]) -> list[str]:
    """The judge line and, when money was spent or estimated, a second line with the cost (each fits 100 columns)."""
    line = f"judge {run.get('judge_label') or run['judge_model']}"
    if run.get("judge_prompt_version") and run.get("judge_prompt_version") != run.get("judge_model"):
        line += f", prompts {run['judge_prompt_version']}"
    stats = json.loads(run["judge_stats"]) if run.get("judge_stats") else None
    if stats:
        line += (f": {stats.get('requests', 0)} requests, {stats.get('cache_hits', 0)} cached, "
                 f"{stats.get('judged', 0)} judged, {stats.get('failures', 0)} failed")
        if stats.get("jsonMode"):  # an OpenAI-compatible server that takes no JSON schema
            line += f", {stats['jsonMode']} in JSON mode (the server takes no schema)"
        if stats.get("directInsteadOfBatch"):
            line += f", {stats['directInsteadOfBatch']} direct (the server has no Batch API)"
    cost = cost_text(run)
    lines = [line] + ([f"  cost {cost}"] if cost else [])
    agreement = (stats or {}).get("selfAgreement")
    if agreement:  # --crucible-judge-repeat
        parts = [f"{kind} {agreed / total:.2f} (n {total})" for kind, (agreed, total) in sorted(agreement["kinds"].items()) if total]
        from .views import list_lines

        lines.extend(list_lines(f"self-agreement over {agreement['judgings']} judgings:", parts or ["no request"]))
    return lines


def calibration_line(calibration: dict[str, Any] | None) -> str:
    """How far the run's judge agrees with human labels: its newest `crucible judge calibrate`
    (a ``judge_calibrations`` row, or None), e.g. ``  calibrated: crag kappa 0.41 (binary 0.52),
    faithful kappa 0.55 on 150 labels (2026-12-01)``."""
    if calibration is None:
        return "  not calibrated: crucible judge calibrate LABELS.jsonl measures it"

    from ..labels.calibration import stored_kappa

    figures = calibration.get("figures") or {}

    def kappa(kind: str, binary: bool = False) -> str:
        value, why = stored_kappa(calibration, kind, binary=binary)  # why: labels of one category, not measurable
        return f"not measurable ({why})" if why else "undefined" if value is None else f"{value:.2f}"

    parts = []
    if calibration.get("n_crag"):
        parts.append(f"crag kappa {kappa('crag')} (binary {kappa('crag', binary=True)})")
    if calibration.get("n_faithful"):
        parts.append(f"faithful kappa {kappa('faithful')}")
    n = figures.get("nLabels", (calibration.get("n_crag") or 0) + (calibration.get("n_faithful") or 0))
    when = str(calibration.get("created_at") or "")[:10]
    return f"  calibrated: {', '.join(parts) or 'no label compared'} on {n} labels ({when})"


def pool_summary(pools, k) -> str | None:
    """Where the grades of the retrieved pool came from, and how much of it nobody judged."""
    totals = {"provenance": 0, "human": 0, "llm": 0, "unjudged": 0}
    for pool in pools:
        if pool:
            for name, count in (json.loads(pool) if isinstance(pool, str) else pool).items():
                totals[name] = totals.get(name, 0) + count
    return pool_line(totals, k)


def pool_line(totals: dict[str, int], k) -> str | None:
    """:func:`pool_summary` of the pool's units already summed by source (``store.aggregates.result_tally``)."""
    totals = {"provenance": 0, "human": 0, "llm": 0, "unjudged": 0, **totals}
    size = sum(totals.values())
    if not size:
        return None
    share = totals["unjudged"] / size
    line = (f"qrels for the retrieved pool (top {k}): {totals['provenance']} provenance, {totals['human']} human, "
            f"{totals['llm']} llm; {totals['unjudged']} unjudged ({share:.0%})")
    if totals["unjudged"]:
        line += "\n  unjudged chunks count as non-relevant, as trec_eval does (--crucible-label-pool grades them)"
    return line


FACET_COLUMNS = ("ndcgAt10", "recallAtK", "faithfulness", "truthfulness")


def facet_lines(items, metrics) -> list[str]:
    """One row per facet value (the ``-v`` view): n (the facet's items) and the headline metrics; a mean
    that rests on fewer items (errored ones, items a metric does not apply to) shows how many, ``0.5000 (4)``."""
    from ..metrics.facets import by_facet

    return facet_table_lines(by_facet(items, metrics, counts=True))


def facet_table_lines(table: dict) -> list[str]:
    """:func:`facet_lines` of a ``by_facet(..., counts=True)`` table."""
    columns = [c for c in FACET_COLUMNS if any(c in entry for values in table.values() for entry in values.values())]
    lines = [f"  {'facet':<34} {'n':>4} " + " ".join(f"{c:>13}" for c in columns)]
    for facet, values in table.items():
        for value, entry in values.items():
            cells = " ".join(_facet_cell(entry, c) for c in columns)
            lines.append(f"  {(facet + '=' + value)[:34]:<34} {entry['n']:>4} {cells}")
    return lines



def _facet_cell(entry: dict, metric: str) -> str:
    if metric not in entry:
        return f"{'-':>13}"
    having = entry["counts"][metric]
    text = f"{entry[metric]:.4f}" + ("" if having == entry["n"] else f" ({having})")
    return f"{text:>13}"


def kind_means(item_kinds: dict[str, str], item_metrics: dict[str, dict[str, float]]) -> list[tuple[str | None, dict]]:
    """[(None, means)] for a run of one kind, else [(kind, that kind's means)] in KINDS order:
    a mean is never taken across kinds (a retrieval question and an attack are not averaged).
    ``item_kinds``: item id -> kind (``Store.item_kinds``)."""
    from ..defaults import KINDS
    from ..verdict.runs import metric_means

    kinds: dict[str, set[str]] = {}
    for item_id, kind in item_kinds.items():
        kinds.setdefault(kind or "retrieval", set()).add(item_id)
    if len(kinds) < 2:
        return [(None, metric_means(item_metrics))]
    order = sorted(kinds, key=lambda kind: (KINDS.index(kind) if kind in KINDS else len(KINDS), kind))
    return [(kind, metric_means({m: {i: v for i, v in values.items() if i in kinds[kind]} for m, values in item_metrics.items()}))
            for kind in order]


def guardrail_lines(items, metrics, results, *, verbose: int = 0) -> list[str]:
    """The guardrail eval in one line (``-v``: one row per attack category)."""
    from ..metrics.guardrail import describe_rate
    from .views import run_guardrails

    summary = run_guardrails(items, metrics, results)
    if not summary:
        return []
    rates = [describe_rate(name, summary[name]) for name in ("attackSuccessRate", "falsePositiveRate") if name in summary]
    lines = ["guardrails: " + rates[0], *(f"            {rate}" for rate in rates[1:])]
    if summary.get("blockedByLayer"):
        lines.append("  blocked by layer: " + ", ".join(f"{layer} {n}" for layer, n in summary["blockedByLayer"].items()))
    if verbose > 0:
        if summary.get("byCategory"):
            lines.append("  by attack category:")
        for category, entry in (summary.get("byCategory") or {}).items():
            lines.append(f"  {category[:26]:<26} " + describe_rate("attackSuccessRate", entry))
    return lines


# Every line of the summary fits this many columns (tests/test_plugin_e2e.py holds it to that).
SUMMARY_WIDTH = 100

# The headline numbers of the one-line (-q) summary, one per layer, when measured.
ONE_LINE_METRICS = ("ndcgAt10", "recallAtK", "faithfulness", "truthfulness", "attackSuccessRate", "falsePositiveRate")


def alerts_only(lines: list[SummaryLine]) -> list[SummaryLine]:
    """What -q keeps of the summary: every alert whole, with the lines that continue it (a wrapped
    warning's indented rest, a refusal's HINT), and nothing else."""
    return [line for line in lines if line.level.alert]


def one_line_summary(store, run_id: str, *, gate: str | None = None, means: StoredMeans | None = None) -> str:
    """The run in one line: id, status, items, the headline metrics (per kind) and the gate's result.
    ``means``: the run's ``verdict.runs.stored_means`` when the caller has read them already."""
    from ..verdict.runs import stored_means

    run = store.get_run(run_id)
    k = run_cutoff(run)
    parts = []
    for kind, kind_means in (means or stored_means(store, run_id, ONE_LINE_METRICS))[1]:
        shown = " ".join(f"{display_name(name, k)} {kind_means[name][0]:.3f}" for name in ONE_LINE_METRICS if name in kind_means)
        if shown:
            parts.append(f"{kind} {shown}" if kind else shown)
    shown = " | ".join(parts)
    from ..store.selection import selection_of

    selection = selection_of(run)
    subset = f" (subset: {selection.ran} of {selection.held})" if selection is not None else ""
    line = f"crucible run {run['id'][:10]} {run['status']}{subset}, {run['n_items']} items" + (f": {shown}" if shown else "")
    return line + (f"; {gate}" if gate else "")


def selection_lines(run: dict[str, Any]) -> list[str]:
    """What a partial selection means for the run: it is stored, and never a baseline by default."""
    from ..store.selection import selection_of

    selection = selection_of(run)
    if selection is None:
        return []
    return [f"subset: {selection.describe()}: never `latest` (name it by its id to compare with it)"]


# Item ids a line of reruns names before it says how many more there are.
RERUN_IDS_SHOWN = 10


def rerun_lines(attempts: list[dict[str, Any]]) -> list[str]:
    """The items pytest ran more than once (pytest-rerunfailures): ``2 items passed on rerun: h03, h07`` and those
    that failed every attempt. ``attempts``: ``store.item_attempts`` rows."""
    final: dict[str, str] = {}
    for row in attempts:
        final[row["item_id"]] = row.get("final") or "unknown"
    if not final:
        return []

    def named(ids: list[str]) -> str:
        more = len(ids) - RERUN_IDS_SHOWN
        return ", ".join(ids[:RERUN_IDS_SHOWN]) + (f" (+{more} more)" if more > 0 else "")

    passed = sorted(item for item, outcome in final.items() if outcome == "passed")
    other = sorted(item for item, outcome in final.items() if outcome != "passed")
    lines = []
    if passed:
        lines.append(f"{len(passed)} item{'s' if len(passed) != 1 else ''} passed on rerun: {named(passed)} "
                     "(their earlier attempts are kept: crucible show RUN --item ID)")
    if other:
        lines.append(f"{len(other)} item{'s' if len(other) != 1 else ''} failed on every attempt: {named(other)}")
    return lines


def textless_chunks_line(run: dict[str, Any], results: list[dict[str, Any]]) -> str | None:
    """The WARNING for the items of a system-mode run whose retrieved chunks all came back without
    text (the answer metrics that read the context were skipped for them), from the stored rows."""
    if run.get("mode") != "system":
        return None
    from ..evaluation.answers import CONTEXT_METRICS, chunks_without_text

    n = 0
    for row in results:
        if row.get("error") or row.get("blocked"):
            continue
        retrieved = row.get("retrieved") or []
        if chunks_without_text(json.loads(retrieved) if isinstance(retrieved, str) else retrieved):
            n += 1
    if not n:
        return None
    return (f"WARNING {n} item(s) returned retrieved chunks without text: the answer metrics that read the context "
            f"({', '.join(CONTEXT_METRICS)}) were skipped for them; return each chunk's text in `retrieved` "
            "to measure them")


def repeat_lines(repeats: int, rows: list[dict], k: int | None) -> list[str]:
    """With --crucible-repeat: the flaky items (their outcome differs across repeats) and each metric's mean
    within-item standard deviation (how much one item's value wiggles from call to call)."""
    import textwrap

    from ..evaluation.repeats import pass_rates, variance_components, wiggle
    from ..metrics import display_name, ordered_metrics

    flaky, spread = wiggle(rows)
    shown = ", ".join(f"{item} {passed}/{n} passed" for item, passed, n in flaky[:6]) + (f", and {len(flaky) - 6} more" if len(flaky) > 6 else "")
    head = f"repeats {repeats} per item (item values are their means): "
    head += f"{len(flaky)} flaky item{'s' if len(flaky) != 1 else ''} ({shown})" if flaky else "no flaky item"
    lines = textwrap.wrap(head, width=100, subsequent_indent="  ")
    from .views import list_lines

    if spread:
        parts = [f"{display_name(name, k)} {spread[name][0]:.4f}" for name in ordered_metrics(spread)]
        lines.extend(list_lines("within-item sd:", parts))
    rates = pass_rates(rows)
    for k, every, some, n in rates:
        fewer = f" (stored with {k} of the {repeats} repeats: not mixed with the others)" if len(rates) > 1 and k != repeats else ""
        lines.append(f"  pass^{k} {every:.2f} (every repeat passed), pass@{k} {some:.2f} (at least one passed), "
                     f"of {n} items{fewer}")
    components = variance_components(rows, repeats)
    if components:
        parts = [f"{display_name(name, k)} {between:.4f} / {within:.4f} "
                 f"({'x2 with ' + str(needed) + ' repeats' if needed else 'not by repeats: more items'})"
                 for name in ordered_metrics(components) for between, within, needed in [components[name]]
                 if between or within]
        if parts:
            lines.extend(list_lines("variance between items / within an item (halving the mean's variance):", parts))
    return lines


def custom_metric_lines(run: dict, results: list[dict]) -> list[SummaryLine]:
    """Where the run's custom metrics come from (the ruler), and how many items a metric failed on."""
    from ..evaluation.custom_metrics import RUBRIC, read_definitions

    defined = read_definitions(run)
    if not defined:
        return []
    parts = []
    for name, row in sorted(defined.items()):
        how = (f"rubric judged by {row.get('judgeModel')} ({row.get('promptVersion')})" if row.get("kind") == RUBRIC
               else f"better {row.get('better') or 'none: never a regression'}")
        parts.append(f"{name} ({how}, {row.get('origin')})")
    lines = [SummaryLine("custom metrics: " + "; ".join(parts))]
    failed: dict[str, list[str]] = {}  # metric -> the items it failed on
    for row in results:
        errors = row.get("metric_errors")
        if not errors or errors == "[]":  # the common case: nothing to decode
            continue
        for error in (json.loads(errors) if isinstance(errors, str) else errors):
            failed.setdefault(error.split(" ")[1] if error.startswith("metric ") else "?", []).append(row["item_id"])
    for name, items in sorted(failed.items()):
        shown = ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")
        lines.append(SummaryLine(f"WARNING custom metric {name} failed on {len(items)} item{'s' if len(items) != 1 else ''} "
                                 f"({shown}): those items have no value for it", Level.ALERT))
    return lines


def run_summary_lines(store, run_id: str, *, unread_keys: Iterable[str] = (), faults: Iterable[str] = (), verbose: int = 0,
                      known_keys: Iterable[str] = (), means: StoredMeans | None = None) -> list[SummaryLine]:
    """The run's summary (the session's crucible section, `crucible show`); ``known_keys``: config keys an
    unread key may be a typo of (see ``config.unread_key_message``); ``means``: the run's
    ``verdict.runs.stored_means`` when the caller has read them already.

    At scale (100,000 items) it never reads every result row: the counts come from SQL, the means from the
    metric values alone, and a view reads the rows it needs (``store.aggregates``)."""
    from ..store import aggregates

    run = store.get_run(run_id)
    tally = aggregates.result_tally(store, run_id)
    n_results, errored = tally["n"], tally["errored"]
    k = run_cutoff(run)
    outcome_text = ", ".join(f"{n} {name}" for name, n in sorted(tally["outcomes"].items()))
    text = run_header(run)
    if run.get("judge_model"):  # right under the judge lines: how far to trust its judged metrics
        from ..store.ledgers import latest_judge_calibration

        text.append(calibration_line(latest_judge_calibration(store, run["judge_model"], run.get("judge_prompt_version"))))
    from ..verdict.runs import stored_means, unrecorded_items

    skipped = run.get("n_skipped") or 0
    lost = unrecorded_items(run)  # ran, but the database could not record them: no outcome to show
    counts_text = (f": {n_results - errored} scored, {errored} errored" + (f", {skipped} skipped" if skipped else "")
                   + (f", {lost} lost" if lost else "") if errored or skipped or lost else "")
    text.append(f"items {n_results + lost} ({outcome_text or 'none'}){counts_text}")
    text.extend(selection_lines(run))
    text.extend(rerun_lines(store.item_attempts(run_id)))

    overall, by_kind = means or stored_means(store, run_id)
    if overall and len(by_kind) > 1:
        # A run that mixes kinds shows each kind's means: none is taken across them.
        text.append("this run mixes kinds of question: every mean is of one kind (--crucible-kind=KIND runs one)")
        for kind, kind_table in by_kind:
            text.append(f"{kind} questions:")
            text.extend(metric_table(kind_table, k))
    elif overall:
        text.extend(metric_table(overall, k))
    elif lost and not n_results:
        text.append(f"  no metrics: no item could be recorded ({lost} lost); this run is {run['status']}")
    elif n_results and errored == n_results:
        text.append(f"  no metrics: every item's pipeline call errored ({n_results} errored); this run is {run['status']}")
    else:
        text.append("  no retrieval metrics: no item had a relevant citation")
    if "conversationSuccess" in overall:  # the golden conversations' own metrics: said once what their n counts
        n = overall["conversationSuccess"][1]
        text.append(f"  conversationSuccess, turnsToFirstFailure: one value per conversation ({n}), on its last turn")
    if "knowledgeRetention" in overall:
        text.append(f"  knowledgeRetention: one value per conversation with a judged turn ({overall['knowledgeRetention'][1]});")
        text.append("    knowledgeRetained: one per answered turn from turn 2")
    lines = plain(text)
    from ..evaluation.custom_metrics import read_definitions

    if read_definitions(run):
        lines.extend(custom_metric_lines(run, aggregates.result_columns(store, run_id, ("item_id", "metric_errors"),
                                                                        where="metric_errors")))
    text = repeat_lines(run["repeats"], store.item_repeats(run_id), k) if (run.get("repeats") or 1) > 1 else []
    from .views import error_class_table, selective_summary

    selective = selective_summary(aggregates.result_columns(store, run_id, ("item_id", "confidence", "crag_grade"),
                                                            where="selective"))
    if selective:
        truth = overall.get("truthfulness", (None, 0))[0]
        abstain = overall.get("abstainRate", (None, 0))[0]
        text.append(
            "abstention: " + ", ".join(part for part in (
                f"truthfulness {truth:+.4f}" if truth is not None else "",
                f"abstainRate {abstain:.4f}" if abstain is not None else "",
                f"aurc {selective['aurc']:.4f} (eAurc {selective['eAurc']:.4f})") if part)
        )
        text.append(f"  coverage at risk <= 10%: {selective['coverageAtRisk']:.2f} (n {selective['n']})")
    from ..labels.human import ppi_lines, stored_run_ppi

    text.extend(ppi_lines(stored_run_ppi(store, run_id, overall)))  # when people labelled some of its answers
    classes = error_class_table(tally["error_classes"])
    if classes:
        text.append("error classes: " + ", ".join(f"{name} {n}" for name, n in classes.items()))
    text.extend(stored_guardrail_lines(store, run_id, overall, verbose=verbose))
    if "truthfulness" in overall or verbose > 0:
        table = stored_facets(store, run_id)
        if "truthfulness" in overall:
            worst = worst_facet_line(table)
            if worst:
                text.append(worst)
        if verbose > 0:
            text.extend(facet_table_lines(table))
    pool_text = pool_line(tally["pool"], k)
    if pool_text:
        text.extend(pool_text.splitlines())
    text.append(f"db {store.path}")
    lines.extend(plain(text))
    from ..config import unread_key_message

    lines.extend(alerts(f"WARNING CrucibleWarning: {unread_key_message(key, known_keys)}" for key in unread_keys))
    if run.get("mode") == "system":
        textless = textless_chunks_line(run, aggregates.result_columns(store, run_id, ("error", "blocked", "retrieved"),
                                                                       where="answered"))
        if textless:
            lines.append(SummaryLine(textless, Level.ALERT))
    lines.extend(alerts(fault_lines(faults)))
    return lines


def worst_facet_line(table: dict) -> str | None:
    """``worst truthfulness by facet: difficulty=hard -0.50 (n 4), ...``, as many facets as fit the summary's width."""
    from ..metrics.facets import worst_facets

    worst = worst_facets(table, "truthfulness")
    if not worst:
        return None
    line = "worst truthfulness by facet:"
    for index, (facet, value, mean, n) in enumerate(worst):
        entry = f" {facet}={value} {mean:+.2f} (n {n})"
        if index and len(line) + len(entry) + 1 > SUMMARY_WIDTH:
            break
        line += ("," if index else "") + entry
    return line


def stored_facets(store, run_id: str, item_metrics: dict[str, dict[str, float]] | None = None,
                  items: list[dict[str, Any]] | None = None) -> dict:
    """``metrics.facets.by_facet(golden items, item metrics, counts=True)`` of a stored run, reading of its
    golden items only the fields a facet is (not the whole items); ``items``: those fields (and any others) as
    ``store.aggregates.golden_fields`` read them, when the caller has them."""
    from ..metrics.facets import FACETS, by_facet
    from ..store.aggregates import golden_fields

    items = golden_fields(store, run_id, ("id", *FACETS, "tags")) if items is None else items
    return by_facet(items, store.item_metrics(run_id) if item_metrics is None else item_metrics, counts=True)


def stored_guardrail_lines(store, run_id: str, means: dict, *, verbose: int = 0) -> list[str]:
    """:func:`guardrail_lines` of a stored run, reading only the guardrail metrics, the attacks' golden
    items and the blocked results (nothing when the run measured no guardrail metric)."""
    from ..metrics.guardrail import ATTACK_SUCCESS, GUARDRAIL_METRICS
    from ..store import aggregates

    names = [name for name in GUARDRAIL_METRICS if name in means]
    if not names:
        return []
    metrics = aggregates.metric_table(store, run_id, names)
    items = aggregates.golden_items_with_metric(store, run_id, ATTACK_SUCCESS)
    blocked = aggregates.result_columns(store, run_id, ("item_id", "blocked", "blocked_layer"), where="blocked")
    return guardrail_lines(items, metrics, blocked, verbose=verbose)


def fault_lines(faults) -> list[str]:
    """One ``FAULT`` line per fault of the session (a write, a report or a comparison that failed)."""
    return [f"FAULT {fault}" for fault in faults]
