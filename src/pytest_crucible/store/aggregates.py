"""What the readers of one stored run read of it at scale (the session's terminal summary, `crucible show`,
the HTML report, `crucible compare`): counts aggregated in SQL, and only the columns a view needs, instead of
every result row with every column.

Counts (outcomes, errored items, error classes, the retrieved pool's grades) are exact integers, so SQL adds
them. A metric's mean is not computed here: a float sum depends on the order of its additions and on the
database (SQLite adds in ``long double``, or compensated since 3.43; PostgreSQL in ``double``), so the values
are read in the order ``Store.item_metrics`` reads them and the caller adds them as it always did
(``verdict.runs.metric_means``): the same bits on every backend and every version.

This module never imports pytest, and never ``stats/`` or ``verdict/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import Store

# The grades of a retrieved pool (``evaluation.scoring``: where each scored unit's grade came from).
POOL_SOURCES = ("provenance", "human", "llm", "unjudged")
_FIELD = re.compile(r"\w+")


def result_tally(store: Store, run_id: str) -> dict[str, Any]:
    """The run's results counted: ``n``, ``errored`` (a non-empty ``error``), ``outcomes`` {outcome: n},
    ``error_classes`` {class: n} (rows without a class left out) and ``pool`` {source: units} summed over the
    results' retrieved pools (empty when no result has one)."""
    tally: dict[str, Any] = {"n": 0, "errored": 0, "outcomes": {}, "error_classes": {}, "pool": {}}
    for outcome, error_class, errored, n in store.db.conn.execute(
            "SELECT outcome, error_class, CASE WHEN error IS NULL OR error = '' THEN 0 ELSE 1 END, COUNT(*) FROM results"
            " WHERE run_id = ? GROUP BY outcome, error_class, CASE WHEN error IS NULL OR error = '' THEN 0 ELSE 1 END",
            [run_id]):
        tally["n"] += n
        tally["errored"] += n if errored else 0
        tally["outcomes"][outcome] = tally["outcomes"].get(outcome, 0) + n
        if error_class:
            tally["error_classes"][error_class] = tally["error_classes"].get(error_class, 0) + n
    sums = ", ".join(f"SUM(CAST(json_extract(pool, '$.{source}') AS INTEGER))" for source in POOL_SOURCES)
    row = store.db.conn.execute(
        f"SELECT {sums} FROM results WHERE run_id = ? AND pool IS NOT NULL AND pool != ''", [run_id]).fetchone()
    if row is not None and any(value is not None for value in row):
        tally["pool"] = {source: int(value or 0) for source, value in zip(POOL_SOURCES, row)}
    return tally


def _only(metrics: Iterable[str] | None) -> tuple[str, list[Any]]:
    """The condition (and its parameter) that keeps these metrics (None: every one)."""
    if metrics is None:
        return "", []
    return " AND metric IN (SELECT value FROM json_each(?))", [json.dumps(sorted(set(metrics)))]


def metric_values(store: Store, run_id: str, metrics: Iterable[str] | None = None) -> dict[str, list[float]]:
    """metric -> its values, in the order ``Store.item_metrics`` holds them (metric, then item id): what a
    mean adds up, without an item id per value. ``metrics``: these only (None: every one)."""
    condition, params = _only(metrics)
    rows = store.db.conn.execute(f"SELECT metric, value FROM item_metrics WHERE run_id = ?{condition} ORDER BY metric, item_id",
                                 [run_id, *params]).fetchall()
    return {metric: [value for _, value in group] for metric, group in groupby(rows, key=itemgetter(0))}


def metric_rows(store: Store, run_id: str, metrics: Iterable[str] | None = None) -> list[tuple[str, str, float]]:
    """Every (metric, item id, value) of the run, in ``Store.item_metrics``'s order; ``metrics``: these only."""
    condition, params = _only(metrics)
    return store.db.conn.execute(
        f"SELECT metric, item_id, value FROM item_metrics WHERE run_id = ?{condition} ORDER BY metric, item_id",
        [run_id, *params]).fetchall()


def metric_table(store: Store, run_id: str, metrics: Iterable[str] | None = None) -> dict[str, dict[str, float]]:
    """``Store.item_metrics`` (metric -> {item id: value}), of these metrics only when given."""
    return {metric: {item_id: value for _, item_id, value in group}
            for metric, group in groupby(metric_rows(store, run_id, metrics), key=itemgetter(0))}


def kind_counts(store: Store, run_id: str) -> dict[str | None, int]:
    """The golden items of the run counted by their ``kind`` as stored (None: the item does not say)."""
    return dict(store.db.conn.execute(
        "SELECT json_extract(item, '$.kind'), COUNT(*) FROM golden_items WHERE run_id = ? GROUP BY json_extract(item, '$.kind')",
        [run_id]))


def golden_fields(store: Store, run_id: str, fields: Sequence[str]) -> list[dict[str, Any]]:
    """These top-level fields of each golden item of the run (a field the item lacks reads None), in item id
    order: what a facet breakdown reads, without decoding whole items."""
    if not fields or not all(_FIELD.fullmatch(field) for field in fields):
        raise ValueError(f"golden item fields: expected names, got {list(fields)!r}")
    paths = ", ".join(f"'$.{field}'" for field in fields)
    # Two paths or more: one JSON array of their values, whatever their types (true stays true).
    sql = f"SELECT json_extract(item, {paths}, '$.__none__') FROM golden_items WHERE run_id = ? ORDER BY item_id"
    rows = store.db.conn.execute(sql, [run_id]).fetchall()
    # every item's fields decoded in one parse (a third of the time of one parse each)
    return [dict(zip(fields, values)) for values in json.loads("[" + ",".join([text for (text,) in rows]) + "]")]


def golden_fields_and_json(store: Store, run_id: str, fields: Sequence[str], raw: str | tuple[str, ...]) -> list[tuple[dict[str, Any], Any]]:
    """:func:`golden_fields` and, beside each item's fields, its ``raw`` field as JSON text (None: absent), or
    with several ``raw`` names their values as the text of one JSON array (an absent one: null), for a reader
    that decodes it only when it needs it (equal texts are equal values)."""
    raws = (raw,) if isinstance(raw, str) else tuple(raw)
    if not raws or not all(_FIELD.fullmatch(name) for name in raws):
        raise ValueError(f"golden item field: expected a name, got {raw!r}")
    names = list(fields) or ["id"]
    if not all(_FIELD.fullmatch(field) for field in names):
        raise ValueError(f"golden item fields: expected names, got {list(fields)!r}")
    paths = ", ".join(f"'$.{field}'" for field in names)
    raw_paths = ", ".join(f"'$.{name}'" for name in raws)
    sql = (f"SELECT json_extract(item, {paths}, '$.__none__'), json_extract(item, {raw_paths}) FROM golden_items"
           " WHERE run_id = ? ORDER BY item_id")
    rows = store.db.conn.execute(sql, [run_id]).fetchall()
    # every item's fields decoded in one parse (100,000 items: a third of the time of one parse each)
    fields_of = json.loads("[" + ",".join([text for text, _ in rows]) + "]")
    return [(dict(zip(names, values)), value) for values, (_, value) in zip(fields_of, rows)]


def golden_items_with_metric(store: Store, run_id: str, metric: str) -> list[dict[str, Any]]:
    """The golden items (as run) of the run's items that have a value of ``metric``, in item id order."""
    return [json.loads(text) for (text,) in store.db.conn.execute(
        "SELECT item FROM golden_items WHERE run_id = ? AND item_id IN"
        " (SELECT item_id FROM item_metrics WHERE run_id = ? AND metric = ?) ORDER BY item_id", [run_id, run_id, metric])]


def golden_items_of(store: Store, run_id: str, item_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The golden items (as run) of these items of the run, in item id order."""
    ids = sorted(set(item_ids))
    if not ids:
        return []
    return [json.loads(text) for (text,) in store.db.conn.execute(
        "SELECT item FROM golden_items WHERE run_id = ? AND item_id IN (SELECT value FROM json_each(?)) ORDER BY item_id",
        [run_id, json.dumps(ids)])]


def result_columns(store: Store, run_id: str, columns: Sequence[str], *, where: str = "") -> list[dict[str, Any]]:
    """These columns of the run's results, in recording order; ``where``: one of WHERE_CLAUSES' names
    (rows that matter to one view only)."""
    if not columns or not all(_FIELD.fullmatch(column) for column in columns):
        raise ValueError(f"result columns: expected names, got {list(columns)!r}")
    from .contents import resolve_retrieved, retrieved_column

    condition = WHERE_CLAUSES[where]
    names = retrieved_column(columns)  # a ranking is read by its hash, then resolved
    cursor = store.db.conn.execute(
        f"SELECT {', '.join(names)} FROM results WHERE run_id = ?{condition} ORDER BY rowid", [run_id])
    rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    return resolve_retrieved(store.db.conn, rows) if names != list(columns) else rows


# Which results a view reads (``result_columns``'s ``where``), each as the Python views test them.
WHERE_CLAUSES = {
    "": "",
    # selective prediction: a confidence and a CRAG grade (``verdict.runs.selective_pairs``)
    "selective": " AND confidence IS NOT NULL AND crag_grade IS NOT NULL AND crag_grade != ''",
    # a custom metric failed on the item (``report.terminal.custom_metric_lines``)
    "metric_errors": " AND metric_errors IS NOT NULL AND metric_errors != '' AND metric_errors != '[]'",
    # blocked by a guardrail (``report.views.run_guardrails``)
    "blocked": " AND blocked != 0",
    # answered: neither errored nor blocked (``report.terminal.textless_chunks_line``)
    "answered": " AND (error IS NULL OR error = '') AND blocked = 0",
}


# The items a reviewer wants first, which the HTML report lists first (``report.item_data``): the item errored, did
# not pass (nor was skipped), a judge errored on it, or its error class is not correct.
NEEDS_A_LOOK = ("(outcome IS NULL OR outcome NOT IN ('passed', 'skipped') OR (error IS NOT NULL AND error != '')"
                " OR (judge_errors IS NOT NULL AND judge_errors NOT IN ('', '[]'))"
                " OR (error_class IS NOT NULL AND error_class != 'correct'))")


def results_in_listing_order(store: Store, run_id: str, columns: Sequence[str], size: int) -> Iterator[list[tuple]]:
    """These columns of the run's results and, after them, whether the item needs a look (1 or 0:
    ``NEEDS_A_LOOK``), as tuples in batches of at most ``size``: the items that need a look first, then the
    others, each in recording order. One pass; ``retrieved`` is its hash (:func:`contents.content_bodies`)."""
    if not columns or not all(_FIELD.fullmatch(column) for column in columns):
        raise ValueError(f"result columns: expected names, got {list(columns)!r}")
    from .contents import retrieved_column

    cursor = store.db.conn.execute(
        f"SELECT {', '.join(retrieved_column(columns))}, CASE WHEN {NEEDS_A_LOOK} THEN 1 ELSE 0 END AS look"
        " FROM results WHERE run_id = ? ORDER BY look DESC, rowid", [run_id])
    while batch := cursor.fetchmany(size):
        yield batch


def results_of(store: Store, run_id: str, item_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Every column of these items' results (``Store.results``' rows), in recording order."""
    if not item_ids:
        return []
    from .contents import resolve_retrieved

    rows = store.db.query("SELECT * FROM results WHERE run_id = ? AND item_id IN (SELECT value FROM json_each(?)) ORDER BY rowid",
                          [run_id, json.dumps(sorted(set(item_ids)))])
    return resolve_retrieved(store.db.conn, [dict(row) for row in rows])


def has_human_labels(store: Store, run_id: str) -> bool:
    """Whether people labelled an answer of any item of the run (``human_labels``, any answer)."""
    return store.db.conn.execute(
        "SELECT 1 FROM human_labels WHERE item_id IN (SELECT item_id FROM results WHERE run_id = ?) LIMIT 1",
        [run_id]).fetchone() is not None
