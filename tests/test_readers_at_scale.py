"""The readers at scale (issue 35, point 3): the terminal summary, `crucible show`, the HTML report and the trend
read a stored run through ``store.aggregates`` (counts in SQL, the metric values without their item ids, only the
columns and rows a view needs) instead of every result row. On both backends, each new path gives what the old
Python path gives on the same small run: the counts, the means to the last bit, the facets, the guardrails, the
summary's every line and the HTML page byte for byte.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers import needs_a_look

from pytest_crucible.store import Store, aggregates

# Values whose sum depends on the order of the additions (0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1): a mean read
# back in another order, or added by the database, would differ in its last bits.
AWKWARD = [0.1, 0.2, 0.3, 1e-16, 0.7, 1 / 3, 2 / 3, 0.9999999999999999, 1e-9, 0.15]


def _score(i: int, *, run_kind: str = "mixed") -> dict:
    item_id = f"q{i:03d}"
    kind = "adversarial" if run_kind == "mixed" and i % 5 == 4 else ("retrieval" if i % 3 else None)
    item = {"id": item_id, "question": f"question {i}?", "citations": [{"docId": f"d{i % 4}", "chunkId": f"d{i % 4}#{i % 3}",
                                                                       "mode": "required"}],
            "questionType": ["simple", "multi_hop", "comparison"][i % 3], "popularity": ["head", "tail", None][i % 3],
            "answerable": [True, False, None][i % 3], "tags": [f"topic:t{i % 2}"] + (["extra"] if i % 4 == 0 else []),
            "cluster": f"c{i % 6}" if i % 2 else None}
    if kind is not None:
        item["kind"] = kind
    if kind == "adversarial":
        item["attack"] = {"category": ["injection", "jailbreak"][i % 2]}
    metrics = {"ndcgAt10": AWKWARD[i % len(AWKWARD)], "recallAtK": AWKWARD[(i * 7) % len(AWKWARD)],
               "truthfulness": [1.0, 0.0, -1.0][i % 3] if i % 4 else None, "faithfulness": AWKWARD[(i * 3) % len(AWKWARD)],
               "myMetric": float(i % 2)}
    if kind == "adversarial":
        metrics = {"attackSuccessRate": float(i % 2)}
    elif i % 7 == 0:
        metrics["falsePositiveRate"] = float(i % 2)
    errored = i % 11 == 10
    return {
        "item_id": item_id, "question": item["question"], "item": item, "source": "golden_x.jsonl", "line": i + 1,
        "answer": None if errored else f"answer {i}",
        "retrieved": [{"chunk_id": f"d{i % 4}#{j}", "doc_id": f"d{i % 4}", "text": "" if i % 9 == 0 else f"text {j}"}
                      for j in range(3)],
        "citations": [], "confidence": None if i % 6 == 5 else (i % 10) / 10, "abstained": i % 8 == 0,
        "blocked": kind == "adversarial" and i % 2 == 0, "blocked_layer": ("input" if i % 4 else "output") if kind == "adversarial" and i % 2 == 0 else None,
        "detected_concepts": [], "latency_ms": 1.0,
        "metrics": {} if errored else {name: value for name, value in metrics.items() if value is not None},
        "failures": [], "error": "Boom: the pipeline fell over\nsecond line" if errored else ("" if i % 13 == 12 else None),
        "outcome": "failed" if errored or i % 9 == 1 else "passed",
        "error_class": None if errored else ["correct", "retrieval_miss", "hallucination", "correct"][i % 4],
        "crag_grade": None if errored or i % 5 == 3 else ["perfect", "acceptable", "missing", "incorrect"][i % 4],
        "pool": None if i % 10 == 9 else {"provenance": 1, "human": i % 2, "llm": 0, "unjudged": 2},
        "metric_errors": ["metric myMetric raised ZeroDivisionError"] if i % 12 == 7 else [],
        "judge_errors": ["judge timed out"] if i % 17 == 16 else [],
    }


def make_run(database, *, n: int = 40, mode: str = "system", run_kind: str = "mixed", labels=None) -> tuple[Store, str]:
    store = Store.open(database)
    run_id = store.start_run(config_hash="h" * 64, params={}, resolved={"retrievalLimit": 10}, mode=mode, outcome_mode="strict",
                             labels=labels, custom_metrics=[{"name": "myMetric", "kind": "python", "better": "higher",
                                                             "origin": "conftest.py", "fingerprint": "f"}])
    store.record_scores(run_id, [_score(i, run_kind=run_kind) for i in range(n)])
    store.finish_run(run_id, status="complete", golden_hash="g")
    return store, run_id


# -- the aggregates against the Python they replace ------------------------------------------------------------
def test_counts_come_from_sql_as_python_counted_them(database) -> None:
    from pytest_crucible.report.terminal import pool_line, pool_summary
    from pytest_crucible.report.views import error_class_counts, error_class_table

    store, run_id = make_run(database)
    results = store.results(run_id)
    tally = aggregates.result_tally(store, run_id)
    outcomes: dict[str, int] = {}
    for row in results:
        outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1
    assert tally["n"] == len(results) == 40
    assert tally["errored"] == sum(1 for row in results if row.get("error")) == 3  # an empty error is none
    assert tally["outcomes"] == outcomes
    assert error_class_table(tally["error_classes"]) == error_class_counts(results)
    assert pool_line(tally["pool"], 10) == pool_summary([row.get("pool") for row in results], 10)
    assert "provenance" in pool_line(tally["pool"], 10)
    store.close()


def test_a_run_without_results_counts_nothing(database) -> None:
    from pytest_crucible.report.terminal import pool_line

    store = Store.open(database)
    run_id = store.start_run(config_hash="h" * 64, params={}, resolved={}, mode="system", outcome_mode="strict")
    tally = aggregates.result_tally(store, run_id)
    assert tally == {"n": 0, "errored": 0, "outcomes": {}, "error_classes": {}, "pool": {}}
    assert pool_line(tally["pool"], 10) is None
    assert aggregates.metric_values(store, run_id) == {} and aggregates.golden_fields(store, run_id, ("id", "kind")) == []
    store.close()


@pytest.mark.parametrize("run_kind", ["mixed", "one"])
def test_means_are_the_same_bits_as_the_means_of_item_metrics(database, run_kind) -> None:
    from pytest_crucible.report.terminal import ONE_LINE_METRICS, kind_means
    from pytest_crucible.verdict.runs import metric_means, stored_means

    store, run_id = make_run(database, run_kind=run_kind)
    table = store.item_metrics(run_id)
    means, by_kind = stored_means(store, run_id)
    assert means == metric_means(table) and list(means) == list(metric_means(table))
    assert by_kind == kind_means(store.item_kinds(run_id), table)
    assert (len(by_kind) > 1) == (run_kind == "mixed")
    only = {name: values for name, values in table.items() if name in ONE_LINE_METRICS}
    assert stored_means(store, run_id, ONE_LINE_METRICS)[1] == kind_means(store.item_kinds(run_id), only)
    # The order matters: these values added in another order give other bits.
    values = list(table["ndcgAt10"].values())
    assert sum(values) != sum(sorted(values)) or sum(values) != sum(reversed(values))
    assert aggregates.metric_values(store, run_id) == {name: list(values.values()) for name, values in table.items()}
    assert aggregates.metric_table(store, run_id) == table
    assert aggregates.metric_table(store, run_id, ["recallAtK", "nope"]) == {"recallAtK": table["recallAtK"]}
    store.close()


def test_facets_read_from_the_golden_fields_match_the_whole_items(database) -> None:
    from pytest_crucible.metrics.facets import by_facet
    from pytest_crucible.report.terminal import stored_facets

    store, run_id = make_run(database)
    golden, table = store.golden_items(run_id), store.item_metrics(run_id)
    fields = aggregates.golden_fields(store, run_id, ("id", "answerable", "kind", "tags", "missing"))
    assert fields == [{"id": item["id"], "answerable": item.get("answerable"), "kind": item.get("kind"),
                       "tags": item.get("tags"), "missing": None} for item in golden]
    assert any(field["answerable"] is True for field in fields)  # true stays true (not 1) on both backends
    assert stored_facets(store, run_id) == by_facet(golden, table, counts=True)
    assert json.dumps(stored_facets(store, run_id, table)) == json.dumps(by_facet(golden, table, counts=True))
    with pytest.raises(ValueError):
        aggregates.golden_fields(store, run_id, ("id", "x'); DROP TABLE runs; --"))
    store.close()


def test_the_rows_a_view_reads_are_the_rows_it_kept(database) -> None:
    from pytest_crucible.report.views import run_guardrails, selective_summary
    from pytest_crucible.verdict.runs import selective_pairs

    store, run_id = make_run(database)
    results = store.results(run_id)
    selective = aggregates.result_columns(store, run_id, ("item_id", "confidence", "crag_grade"), where="selective")
    assert selective_pairs(selective) == selective_pairs(results)
    assert selective_summary(selective) == selective_summary(results)
    failed = aggregates.result_columns(store, run_id, ("item_id", "metric_errors"), where="metric_errors")
    assert [row["item_id"] for row in failed] == [row["item_id"] for row in results if row["metric_errors"] not in (None, "", "[]")]
    blocked = aggregates.result_columns(store, run_id, ("item_id", "blocked", "blocked_layer"), where="blocked")
    assert blocked and all(row["blocked"] for row in blocked)
    attacks = aggregates.golden_items_with_metric(store, run_id, "attackSuccessRate")
    assert attacks and {item["kind"] for item in attacks} == {"adversarial"}
    table = store.item_metrics(run_id)
    assert run_guardrails(attacks, table, blocked) == run_guardrails(store.golden_items(run_id), table, results)
    answered = aggregates.result_columns(store, run_id, ("item_id",), where="answered")
    assert [row["item_id"] for row in answered] == [row["item_id"] for row in results if not (row["error"] or row["blocked"])]
    chosen = ["q005", "q001", "q039"]
    assert aggregates.results_of(store, run_id, chosen) == [row for row in results if row["item_id"] in chosen]
    assert aggregates.golden_items_of(store, run_id, chosen) == [item for item in store.golden_items(run_id) if item["id"] in chosen]
    assert aggregates.results_of(store, run_id, []) == [] and aggregates.golden_items_of(store, run_id, []) == []
    assert not aggregates.has_human_labels(store, run_id)
    with pytest.raises(KeyError):
        aggregates.result_columns(store, run_id, ("item_id",), where="nope")
    store.close()


# -- the readers against their output before the change -----------------------------------------------------
def _summary_before(store, run_id: str, *, verbose: int = 0) -> list[str]:
    """``report.terminal.run_summary_lines`` as it read a run before issue 35 (every result row, every golden item)."""
    from pytest_crucible.labels.human import run_ppi_lines
    from pytest_crucible.metrics import run_cutoff
    from pytest_crucible.metrics.facets import by_facet, worst_facets
    from pytest_crucible.report.lines import texts
    from pytest_crucible.report.terminal import (
        SUMMARY_WIDTH,
        custom_metric_lines,
        facet_lines,
        guardrail_lines,
        kind_means,
        metric_table,
        pool_summary,
        run_header,
        textless_chunks_line,
    )
    from pytest_crucible.report.views import error_class_counts, selective_summary
    from pytest_crucible.verdict.runs import metric_means, unrecorded_items

    run = store.get_run(run_id)
    results = store.results(run_id)
    counts: dict[str, int] = {}
    for row in results:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    k = run_cutoff(run)
    outcome_text = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    lines = run_header(run)
    errored = sum(1 for row in results if row.get("error"))
    skipped = run.get("n_skipped") or 0
    lost = unrecorded_items(run)
    counts_text = (f": {len(results) - errored} scored, {errored} errored" + (f", {skipped} skipped" if skipped else "")
                   + (f", {lost} lost" if lost else "") if errored or skipped or lost else "")
    lines.append(f"items {len(results) + lost} ({outcome_text or 'none'}){counts_text}")
    items, item_metrics = store.golden_items(run_id), store.item_metrics(run_id)
    means = metric_means(item_metrics)
    by_kind = kind_means(store.item_kinds(run_id), item_metrics)
    if means and len(by_kind) > 1:
        lines.append("this run mixes kinds of question: every mean is of one kind (--crucible-kind=KIND runs one)")
        for kind, kind_table in by_kind:
            lines.append(f"{kind} questions:")
            lines.extend(metric_table(kind_table, k))
    elif means:
        lines.extend(metric_table(means, k))
    else:
        lines.append("  no retrieval metrics: no item had a relevant citation")
    lines.extend(texts(custom_metric_lines(run, results)))
    selective = selective_summary(results)
    if selective:
        truth = means.get("truthfulness", (None, 0))[0]
        abstain = means.get("abstainRate", (None, 0))[0]
        lines.append("abstention: " + ", ".join(part for part in (
            f"truthfulness {truth:+.4f}" if truth is not None else "",
            f"abstainRate {abstain:.4f}" if abstain is not None else "",
            f"aurc {selective['aurc']:.4f} (eAurc {selective['eAurc']:.4f})") if part))
        lines.append(f"  coverage at risk <= 10%: {selective['coverageAtRisk']:.2f} (n {selective['n']})")
    lines.extend(run_ppi_lines(store, results, item_metrics))
    classes = error_class_counts(results)
    if classes:
        lines.append("error classes: " + ", ".join(f"{name} {n}" for name, n in classes.items()))
    lines.extend(guardrail_lines(items, item_metrics, results, verbose=verbose))
    if "truthfulness" in means:
        worst = worst_facets(by_facet(items, item_metrics, counts=True), "truthfulness")
        if worst:
            line = "worst truthfulness by facet:"
            for index, (facet, value, mean, n) in enumerate(worst):
                entry = f" {facet}={value} {mean:+.2f} (n {n})"
                if index and len(line) + len(entry) + 1 > SUMMARY_WIDTH:
                    break
                line += ("," if index else "") + entry
            lines.append(line)
    if verbose > 0:
        lines.extend(facet_lines(items, item_metrics))
    pool_line = pool_summary([row.get("pool") for row in results], k)
    if pool_line:
        lines.extend(pool_line.splitlines())
    lines.append(f"db {store.path}")
    textless = textless_chunks_line(run, results)
    if textless:
        lines.append(textless)
    return lines


@pytest.mark.parametrize("run_kind", ["mixed", "one"])
def test_the_summary_reads_as_it_did(database, run_kind) -> None:
    from pytest_crucible.report.terminal import one_line_summary, run_summary_lines

    store, run_id = make_run(database, run_kind=run_kind)
    for verbose in (-1, 0, 1):
        lines = [line.text for line in run_summary_lines(store, run_id, verbose=verbose)]
        assert lines == _summary_before(store, run_id, verbose=verbose)
    text = "\n".join(lines)
    for seen in ("errored", "custom metric myMetric failed", "abstention:", "error classes:", "worst truthfulness",
                 "qrels for the retrieved pool", "without text"):
        assert seen in text
    assert "guardrails:" in text and ("by attack category" in text) == (run_kind == "mixed")
    # -q's line: the headline metrics per kind, as they were
    from pytest_crucible.metrics import display_name, run_cutoff
    from pytest_crucible.report.terminal import ONE_LINE_METRICS, kind_means

    k = run_cutoff(store.get_run(run_id))
    parts = []
    for kind, means in kind_means(store.item_kinds(run_id), store.item_metrics(run_id)):
        shown = " ".join(f"{display_name(name, k)} {means[name][0]:.3f}" for name in ONE_LINE_METRICS if name in means)
        parts.append(f"{kind} {shown}" if kind else shown)
    assert one_line_summary(store, run_id).endswith(": " + " | ".join(parts))
    store.close()


def test_the_summary_of_a_labelled_run_reads_the_labels(database) -> None:
    """PPI++ lines need the answers and the judged metrics: read only when people labelled an answer."""
    from pytest_crucible.labels.human import answer_hash
    from pytest_crucible.report.terminal import run_summary_lines

    store, run_id = make_run(database)
    rows = [{"item_id": row["item_id"], "answer_hash": answer_hash(row["answer"]), "kind": "crag",
             "value": ["perfect", "incorrect"][i % 2], "source": "test", "created_at": f"2026-01-01T00:00:{i:02d}Z"}
            for i, row in enumerate(store.results(run_id)[:36]) if row["answer"]]
    from pytest_crucible.store.ledgers import add_human_labels

    add_human_labels(store, rows)
    assert aggregates.has_human_labels(store, run_id)
    lines = [line.text for line in run_summary_lines(store, run_id)]
    assert lines == _summary_before(store, run_id)
    assert any("PPI" in line for line in lines)
    store.close()


def test_the_html_report_is_the_same_page(database, monkeypatch) -> None:
    """The page from the aggregates against the page from every row; its embedded items (read in batches,
    several batches here) against every item's drill-down built from every row."""
    from pytest_crucible.report import html, item_data

    first, _ = make_run(database, labels={"branch": "main"})
    first.close()
    store, run_b = make_run(database, labels={"branch": "main"})  # the second: a trend of two runs
    # The ledger's judgments beside the citations: a person's grade of a chunk, a judge's of a document, another query's.
    store.append_qrels([{"query_id": "q001", "chunk_id": "d1#0", "doc_id": "d1", "grade": 2, "source": "human", "created_by": "ann"},
                        {"query_id": "q002", "chunk_id": None, "doc_id": "d2", "grade": 1, "source": "llm", "judge_model": "m"},
                        {"query_id": "elsewhere", "chunk_id": "d3#1", "doc_id": "d3", "grade": 3, "source": "human", "created_by": "ann"}])
    for batch in (5_000, 7):
        monkeypatch.setattr(item_data, "BATCH", batch)
        page = html.render_report(store, run_b)
        context, expected_items = _context_before(store, run_b)
        before = html._environment().from_string(html._template_text()).render(**context)
        data = re.compile(r'(id="items-(?:rows|detail)"[^>]*>)([^<]*)(</script>)')
        assert data.sub(r"\1\3", page) == data.sub(r"\1\3", before)
        assert item_data.decode_items(page) == expected_items
    assert "injection" in page and "hallucination" in page
    sources = {chunk[3] for detail in item_data.decode_items(page)["detail"] for chunk in detail.get("chunks", [])}
    assert {item_data.SOURCES.index("human"), item_data.SOURCES.index("llm")} <= sources
    store.close()


def _context_before(store, run_id: str) -> tuple[dict, dict]:
    """``report.html._build_context`` as it read a run before issue 35, without a gate."""
    from pytest_crucible.evaluation.custom_metrics import read_definitions
    from pytest_crucible.metrics import METRIC_FAMILIES as FAMILIES
    from pytest_crucible.metrics import family_of, ordered_metrics, run_cutoff
    from pytest_crucible.metrics.facets import by_facet
    from pytest_crucible.report import html
    from pytest_crucible.report.terminal import ONE_LINE_METRICS, pool_summary
    from pytest_crucible.report.trend import report_trends, trend_plots
    from pytest_crucible.report.views import (
        TARGET_RISK,
        error_class_counts,
        run_labels,
        selective_summary,
    )
    from pytest_crucible.verdict.runs import metric_means, selective_pairs

    run = store.get_run(run_id)
    results = store.results(run_id)
    golden = store.golden_items(run_id)
    items_by_id = {item["id"]: item for item in golden}
    item_metrics = store.item_metrics(run_id)
    means = metric_means(item_metrics)
    k = run_cutoff(run)
    outcomes: dict[str, int] = {}
    for row in results:
        outcomes[row.get("outcome") or "unknown"] = outcomes.get(row.get("outcome") or "unknown", 0) + 1
    selective = selective_summary(results)
    families = []
    for family, names in FAMILIES.items():
        rows = [{"name": name, "label": html._metric_label(name, k), "mean": means[name][0], "n": means[name][1]}
                for name in names if name in means]
        if family == "abstention" and selective:
            rows.append({"name": "aurc", "label": "aurc (run level)", "mean": selective["aurc"], "n": selective["n"]})
            rows.append({"name": "eAurc", "label": "eAurc", "mean": selective["eAurc"], "n": selective["n"]})
            rows.append({"name": "coverageAtRisk", "label": f"coverage at risk ≤ {TARGET_RISK:g}",
                         "mean": selective["coverageAtRisk"], "n": selective["n"]})
        if rows:
            families.append({"name": family, "rows": rows})
    defined = read_definitions(run)
    custom = [{"name": name, "label": f"{name} ({row.get('kind')}, {row.get('origin')})", "mean": means[name][0],
               "n": means[name][1]} for name, row in sorted(defined.items()) if name in means]
    others = [{"name": name, "label": html._metric_label(name, k), "mean": means[name][0], "n": means[name][1]}
              for name in ordered_metrics(means) if family_of(name) is None and name not in defined]
    if others:
        families.append({"name": "other", "rows": others})
    if custom:
        families.append({"name": "custom", "rows": custom})
    classes = error_class_counts(results)
    class_total = sum(classes.values()) or 1
    facet_table = by_facet(golden, item_metrics, counts=True) if golden else {}
    facet_metrics = ordered_metrics({m for values in facet_table.values() for entry in values.values() for m in entry["counts"]})
    facets = [{"name": facet, "metrics": [{"name": m, "label": html._metric_label(m, k)} for m in facet_metrics],
               "rows": [{"value": value, "n": entry["n"],
                         "cells": [(entry.get(m), entry["counts"][m] if entry["counts"].get(m, entry["n"]) < entry["n"] else None)
                                   for m in facet_metrics]}
                        for value, entry in values.items()]}
              for facet, values in facet_table.items()]
    trends = trend_plots(report_trends(store, run, [name for name in ONE_LINE_METRICS if name in means]))
    plot = html.risk_coverage_plot(selective_pairs(results), None, TARGET_RISK)
    grades = _grades_before(store, items_by_id)
    per_item: dict[str, dict[str, float]] = {}
    for metric, values in item_metrics.items():
        for item_id, value in values.items():
            per_item.setdefault(item_id, {})[metric] = value
    from pytest_crucible.report import item_data

    order = [row for row in results if needs_a_look(row)] + [row for row in results if not needs_a_look(row)]
    contexts = [_item_context_before(row, items_by_id.get(row["item_id"]), grades.get(row["item_id"], {}),
                                   per_item.get(row["item_id"], {}), k, {}) for row in order]
    chunks = _Chunks()
    names = ordered_metrics(item_metrics)
    ids = [c["id"] for c in contexts]
    expected_items = {
        "format": item_data.FORMAT, "n": len(results), "detail": [_compact_detail_before(c, chunks) for c in contexts],
        "chunks": chunks.values(), "sources": list(item_data.SOURCES),
        "rows": {**{name: [int(c[name]) if isinstance(c[name], bool) else item_data._round(c[name]) for c in contexts]
                    for name in ("id", "outcome", "error_class", "crag_grade", "abstained", "confidence", "question")},
                 "kind": [(items_by_id.get(item_id) or {}).get("kind") for item_id in ids],
                 "look": [1 if needs_a_look(row) else 0 for row in order],
                 "blocked": [(c["blocked_layer"] or "") if c["blocked"] else None for c in contexts],
                 **{key: [item_data._round(per_item.get(item_id, {}).get(name)) for item_id in ids]
                    for name, key in (("ndcgAt10", "ndcg"), ("truthfulness", "truthfulness"))}},
        "metrics": {"labels": [html._metric_label(name, k) for name in names],
                    "values": [[item_data._round(per_item.get(item_id, {}).get(name)) for item_id in ids] for name in names]}}
    expected_items = json.loads(json.dumps(expected_items))
    items = {"rows": "", "detail": "", "n": len(results), "look": sum(expected_items["rows"]["look"]),
             "outcomes": sorted({row["outcome"] for row in results if row.get("outcome")}),
             "error_classes": sorted({row["error_class"] for row in results if row.get("error_class")}),
             "kinds": sorted({item["kind"] for item in golden if item.get("kind")})}
    return {
        "run": run, "resolved": html._loads(run.get("resolved"), {}) or {}, "params": html._loads(run.get("params"), {}),
        "config_path": run.get("config_path") or "(defaults)", "judge": None, "calibration": None, "cost": None,
        "n_items": len(results), "outcomes": sorted(outcomes.items()), "families": families, "selective": selective,
        "plot": plot, "trends": trends, "comparison": None, "facets": facets,
        "error_classes": [{"name": name, "n": n, "share": n / class_total} for name, n in classes.items()],
        "items": items, "items_script": html._items_script(), "k": k,
        "guardrails": html._guardrail_context(golden, item_metrics, results),
        "labels": run_labels(run), "kinds": html._loads(run.get("kinds"), None),
        "pool": pool_summary([row.get("pool") for row in results], k), "db": str(store.path),
    }, expected_items


# The drill-down of one item as the report built it before it was built from columns (per item, from the whole
# result row and golden item): the reference the page's data is held to.
def _grades_before(store, items: dict) -> dict:
    from pytest_crucible.qrels.grades import item_grades

    rows_by_query = store.judgment_ledger(list(items))
    grades = {}
    for item_id, item in items.items():
        try:
            grades[item_id] = item_grades(item, rows_by_query.get(item_id, []))
        except ValueError:
            grades[item_id] = {}
    return grades


def _at(values, index: int):
    return values[index] if isinstance(values, list) and index < len(values) else None


def _item_context_before(row: dict, item, grades: dict, metrics: dict, k, repeats) -> dict:
    from pytest_crucible.metrics import ordered_metrics
    from pytest_crucible.metrics.guardrail import expected_outcome
    from pytest_crucible.report.html import _loads, _metric_label
    from pytest_crucible.report.item_data import ASSERTION_KEYS, EXCERPT_CHARS, tool_context
    from pytest_crucible.report.item_view import retention_evidence

    verdicts = _loads(row.get("verdicts"), {}) or {}
    useful = (verdicts.get("contextPrecision") or {}).get("useful") or []
    cited = set(_loads(row.get("citations"), []) or [])
    chunks = []
    for rank, hit in enumerate(_loads(row.get("retrieved"), []) or [], start=1):
        hit = hit if isinstance(hit, dict) else {}
        chunk_id, doc_id = hit.get("chunk_id") or hit.get("chunkId"), hit.get("doc_id") or hit.get("docId")
        grade = grades.get(f"chunk:{chunk_id}") if chunk_id else None
        if grade is None and doc_id:
            grade = grades.get(f"doc:{doc_id}")
        text = hit.get("text") or ""
        chunks.append({
            "rank": rank, "chunk_id": chunk_id, "doc_id": doc_id, "score": hit.get("score"),
            "excerpt": text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…",
            "grade": grade[0] if grade else None, "source": grade[1] if grade else "unjudged",
            "useful": useful[rank - 1] if rank - 1 < len(useful) else None,
            "cited": chunk_id in cited or f"S{rank}" in cited,
        })
    faith = verdicts.get("faithfulness") or {}
    recall = verdicts.get("contextRecall") or {}
    relevancy = verdicts.get("responseRelevancy") or {}
    item = item or {}
    return {
        "id": row["item_id"], "question": row.get("question") or "", "answer": row.get("answer"),
        "outcome": row.get("outcome") or "", "error_class": row.get("error_class"), "error_evidence": row.get("error_evidence"),
        "crag_grade": row.get("crag_grade"), "confidence": row.get("confidence"), "abstained": bool(row.get("abstained")),
        "blocked": bool(row.get("blocked")), "blocked_layer": row.get("blocked_layer"),
        "attack": item.get("attack"), "expect": expected_outcome(item) or "answered", "latency_ms": row.get("latency_ms"),
        "error": row.get("error"), "failures": _loads(row.get("failures"), []) or [],
        "judge_errors": _loads(row.get("judge_errors"), []) or [], "metric_errors": _loads(row.get("metric_errors"), []) or [],
        "repeats": [{**repeat, "metrics": [{"label": _metric_label(name, k), "value": value}
                                          for name, value in sorted((repeat.get("metrics") or {}).items())]}
                    for repeat in (repeats or {}).get(row["item_id"], [])],
        "rubrics": [{"name": key[len("rubric:"):], **value} for key, value in sorted(verdicts.items())
                    if key.startswith("rubric:") and isinstance(value, dict)],
        "chunks": chunks,
        "claims": [{"text": claim, "supported": _at(faith.get("supported"), i), "reason": _at(faith.get("reasons"), i)}
                   for i, claim in enumerate(faith.get("claims") or [])],
        "reference_claims": [{"text": claim, "attributed": _at(recall.get("attributed"), i)}
                             for i, claim in enumerate(recall.get("referenceClaims") or [])],
        "questions": [{"text": q, "noncommittal": _at(relevancy.get("noncommittal"), i)}
                      for i, q in enumerate(relevancy.get("questions") or [])],
        "useful": useful, "correctness": verdicts.get("correctness"), "retention": retention_evidence(verdicts),
        "assertions": [{key: assertion.get(key) for key in ASSERTION_KEYS} for assertion in _loads(row.get("assertions"), []) or []
                       if isinstance(assertion, dict)],
        "reference": item.get("reference"),
        "facets": [(name, item.get(name)) for name in ("questionType", "popularity", "dynamism", "answerable", "kind")
                   if item.get(name) is not None],
        "tags": item.get("tags") or [], "tools": tool_context(item, _loads(row.get("tool_calls"), []) or []),
        "metrics": [{"name": name, "label": _metric_label(name, k), "value": metrics[name]} for name in ordered_metrics(metrics)],
        "ndcg": metrics.get("ndcgAt10"), "truthfulness": metrics.get("truthfulness"),
    }


class _Chunks:
    def __init__(self) -> None:
        self.index: dict = {}

    def ref(self, chunk_id, doc_id, excerpt: str) -> int:
        return self.index.setdefault((chunk_id, doc_id, excerpt), len(self.index))

    def values(self) -> list:
        return [list(key) for key in self.index]


_ROW_KEYS = {"id", "outcome", "error_class", "crag_grade", "abstained", "confidence", "ndcg", "truthfulness", "question"}


def _compact_detail_before(context: dict, chunks: _Chunks) -> dict:
    from pytest_crucible.report.item_data import SOURCES, _round

    detail = {}
    for key, value in context.items():
        if key in _ROW_KEYS or key == "metrics" or value is None or value == "" or value == [] or value == {} or value is False:
            continue
        if key == "expect" and not context.get("attack"):
            continue
        if key == "chunks":
            value = [[chunks.ref(c["chunk_id"], c["doc_id"], c["excerpt"]), _round(c["score"]), c["grade"],
                      SOURCES.index(c["source"]) if c["source"] in SOURCES else c["source"], c["useful"], 1 if c["cited"] else 0]
                     for c in value]
        elif key == "latency_ms":
            value = _round(value)
        detail[key] = value
    return detail


# -- the comparison's resampling at scale --------------------------------------------------------------------
@pytest.mark.parametrize(("n", "shared"), [(70_001, False), (100_000, True)])
def test_streamed_sums_are_the_matrix_products(monkeypatch, n, shared) -> None:
    """Above 2**16 items the stream stages 8 rows for one product with every metric at once, computes the
    bootstrap indices in integers and the permutation sums from the sign bits: the same bits as the count and
    sign matrices multiplied row by row (the path a cached matrix takes)."""
    import numpy as np

    from pytest_crucible.stats import resampling

    rng = np.random.default_rng(n)
    vectors = [rng.normal(0.0, 0.3, n), np.round(rng.normal(0.0, 0.3, n), 2), np.where(rng.random(n) < 0.9, 0.0, 1.0)]
    rows = 37  # a last staged product of 5 rows
    tested = vectors if shared else vectors[:2]  # shared: one product serves both sides
    resampling.clear_caches()
    for cache in (resampling._COUNTS_CACHE, resampling._SIGNS_CACHE):
        monkeypatch.setattr(cache, "max_bytes", 0)  # streamed, never kept
    boot, perm = resampling.resample_sums(n, 11, vectors, rows, tested, rows - 4)
    monkeypatch.setattr(resampling, "_THREADED_DRAWS", 0)  # the rows split over two threads: the same bits
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    threaded = resampling.resample_sums(n, 11, vectors, rows, tested, rows - 4)
    assert threaded[0].tobytes() == boot.tobytes() and threaded[1].tobytes() == perm.tobytes()
    monkeypatch.undo()
    resampling.clear_caches()
    counts, signs = resampling.resample_counts(n, rows, 11), resampling.permutation_signs(n, rows - 4, 11)
    assert counts.sum() == rows * n and set(np.unique(signs)) == {-1, 1}
    for j, vector in enumerate(vectors):
        assert boot[j].tobytes() == resampling.matvec(counts, vector).tobytes()
    for j, vector in enumerate(tested):
        assert perm[j].tobytes() == resampling.matvec(signs, vector).tobytes()
    resampling.clear_caches()


def test_a_compared_run_reads_its_golden_items_lazily(database) -> None:
    """load_run(golden=True): the fields a comparison reads, the content fields (citations among them) decoded on
    first use, the ruler comparing two runs' texts; a changed citation still moves the ruler."""
    from pytest_crucible.verdict.ruler import moved_items
    from pytest_crucible.verdict.runs import FACET_FIELDS, StoredItem, load_run

    store, run_a = make_run(database, n=12)
    scores = [_score(i) for i in range(12)]
    scores[3]["item"]["citations"] = [{"docId": "other", "chunkId": "other#1", "mode": "required"}]
    run_b = store.start_run(config_hash="h" * 64, params={}, resolved={"retrievalLimit": 10}, mode="system", outcome_mode="strict")
    store.record_scores(run_b, scores)
    a, b = load_run(store, run_a, golden=True), load_run(store, run_b, golden=FACET_FIELDS)
    full = {item["id"]: item for item in store.golden_items(run_a)}
    for item in a.golden:
        said = {"kind"} if "kind" in full[item["id"]] else set()  # a kind the item leaves out stays out
        assert isinstance(item, StoredItem) and set(item) == {"id", "cluster", *said}  # nothing decoded yet
        assert item.get("citations") == item["citations"] == full[item["id"]]["citations"] and "citations" in item
    assert all(item.get("questionType") == full[item["id"]]["questionType"] for item in b.golden)
    assert a.kinds == store.item_kinds(run_a)
    assert moved_items(load_run(store, run_a, golden=True), b, {}) == ["q003"]
    store.close()
