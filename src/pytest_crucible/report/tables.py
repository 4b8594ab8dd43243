"""A run and a comparison as flat tables: CSV for spreadsheets, the same rows for a dataframe.

One row per item (``crucible export RUN --format csv``) or per item and metric (``crucible compare A B
--format csv``). Text is data, never a formula: a spreadsheet runs a cell that starts with ``=``, ``+``,
``-`` or ``@`` (and some read a leading tab or CR the same way), so such a text cell gets a leading
apostrophe, the mark spreadsheets themselves use for "this is text". Numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store import Store
    from ..verdict.comparison import Comparison
    from ..verdict.runs import RunData

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ITEM_COLUMNS = ("id", "kind", "question", "outcome", "error_class")


def cell(value: Any) -> Any:
    """A value as a CSV cell: None empty, a number as it is, a text that a spreadsheet would run as a formula
    behind an apostrophe."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def to_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """RFC 4180: comma-separated, a field quoted when it holds a comma, quote or line break, CRLF line ends."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([cell(name) for name in header])
    writer.writerows([cell(value) for value in row] for row in rows)
    return out.getvalue()


def item_table(store: Store, run_id: str) -> tuple[list[str], list[list[Any]]]:
    """One row per item of a stored run: its id, kind, question, outcome, error class, every metric (a column
    each, sorted by name), and its latency."""
    from ..store.aggregates import golden_fields_and_json, result_columns

    golden = {str(fields.get("id")): fields for fields, _ in golden_fields_and_json(store, run_id, ("id", "kind", "question"), "citations")}
    results = result_columns(store, run_id, ("item_id", "outcome", "error_class", "latency_ms"))
    metrics = store.item_metrics(run_id)  # metric -> {item_id: value}
    names = sorted(metrics)
    header = [*ITEM_COLUMNS, *names, "latency_ms"]
    rows = []
    for result in sorted(results, key=lambda row: str(row["item_id"])):
        item_id = str(result["item_id"])
        item = golden.get(item_id, {})
        rows.append([item_id, item.get("kind") or "retrieval", item.get("question"), result.get("outcome"),
                     result.get("error_class"), *(metrics[name].get(item_id) for name in names), result.get("latency_ms")])
    return header, rows


COMPARISON_COLUMNS = ("item", "kind", "metric", "baseline", "this_run", "delta", "worse")


def comparison_table(comparison: Comparison, baseline: RunData, current: RunData) -> tuple[list[str], list[list[Any]]]:
    """One row per item and compared metric, with both runs' values (empty where a run has none), the delta,
    and whether it moved in the metric's worse direction."""
    rows: list[list[Any]] = []
    seen: set[tuple[str, str]] = set()
    for m in comparison.metrics.values():
        before, after = baseline.metrics.get(m.metric), current.metrics.get(m.metric)
        if before is None and after is None:
            continue  # a run-level row (AURC) has no per-item values
        before, after = before or {}, after or {}
        for item_id in sorted(set(before) | set(after)):
            kind = current.kinds.get(item_id) or baseline.kinds.get(item_id) or "retrieval"
            if (m.kind is not None and kind != m.kind) or (item_id, m.metric) in seen:
                continue
            seen.add((item_id, m.metric))
            a, b = before.get(item_id), after.get(item_id)
            delta = b - a if a is not None and b is not None else None
            worse = None if delta is None or m.direction is None else (delta < 0 if m.higher_is_better else delta > 0)
            rows.append([item_id, kind, comparison.label(m.metric), a, b, delta, worse])
    return list(COMPARISON_COLUMNS), rows


PARQUET_HINT = "pip install 'pytest-crucible[parquet]' (pyarrow) in this environment, or use --format csv"


class ParquetUnavailable(Exception):
    """``--format parquet`` without pyarrow."""


def to_parquet(header: Sequence[str], rows: Sequence[Sequence[Any]], path: str) -> None:
    """The same table as a Parquet file (one column per header name; text stays text, no formula guard needed)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetUnavailable(f"--format parquet needs pyarrow, which is not installed\nHINT: {PARQUET_HINT}") from None
    columns = {name: [row[index] for row in rows] for index, name in enumerate(header)}
    pq.write_table(pa.table(columns), path)


_NOT_IN_A_METRIC_NAME = re.compile(r"[^a-zA-Z0-9_]")


def openmetrics_name(name: str) -> str:
    """A crucible metric as an OpenMetrics metric name: ``recall@10`` -> ``crucible_recall_at_10``."""
    return "crucible_" + _NOT_IN_A_METRIC_NAME.sub("_", name.replace("@", "_at_"))


def openmetrics(means: dict[str, float]) -> str:
    """Run means as the ``name value`` text that GitLab's metrics report reads (OpenMetrics text, ``# EOF`` last)."""
    lines = [f"{openmetrics_name(name)} {value:.6g}" for name, value in sorted(means.items()) if value == value]
    return "\n".join([*lines, "# EOF"]) + "\n"
