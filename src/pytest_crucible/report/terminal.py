"""Plain-text views of a run, shared by the pytest summary and the ``crucible`` CLI."""

from __future__ import annotations

import json
from typing import Any

# Display order of metric families; metrics not listed here follow alphabetically.
METRIC_ORDER = ("recallAtK", "precisionAtK", "mrr", "ndcgAt10", "hitAtK")


def ordered_metrics(names) -> list[str]:
    known = [name for name in METRIC_ORDER if name in names]
    return known + sorted(name for name in names if name not in METRIC_ORDER)


def metric_table(means: dict[str, tuple[float, int]], k: int | None = None) -> list[str]:
    lines = [f"  {'metric':<14} {'mean':>8} {'n':>6}"]
    for name in ordered_metrics(means):
        mean, n = means[name]
        label = name.replace("AtK", f"@{k}") if k and name.endswith("AtK") else name.replace("At10", "@10")
        lines.append(f"  {label:<14} {mean:>8.4f} {n:>6}")
    return lines


def run_header(run: dict[str, Any]) -> list[str]:
    config = run.get("config_path") or "(defaults)"
    return [
        f"run {run['id']}  status {run['status']}  mode {run['mode']}  outcome {run['outcome_mode']}",
        f"config {config}  configHash {run['config_hash'][:12]}",
    ]


def run_summary_lines(store, run_id: str, *, unread_keys: list[str] = (), faults: list[str] = ()) -> list[str]:
    run = store.get_run(run_id)
    results = store.results(run_id)
    counts: dict[str, int] = {}
    for row in results:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    k = json.loads(run["resolved"]).get("retrievalLimit")
    outcome_text = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    lines = run_header(run)
    lines.append(f"items {len(results)} ({outcome_text or 'none'})")
    means = store.metric_means(run_id)
    if means:
        lines.extend(metric_table(means, k))
    else:
        lines.append("  no retrieval metrics: no item had a relevant citation")
    lines.append(f"db {store.path}")
    for key in unread_keys:
        lines.append(f"WARNING CrucibleWarning: config key {key} was never read by the pipeline: is the config applied?")
    for fault in faults:
        lines.append(f"FAULT {fault}")
    return lines
