"""The HTML report's items as data: every item of a run, packed for the page to render on demand.

The page cannot hold a 100,000-item run as HTML (a few kB of markup per item), so the item list is data:
two JSON documents, each gzip-compressed and base64-encoded into a ``<script type="application/octet-stream">``
block (``items-rows``: the list's rows, small, decoded and drawn first; ``items-detail``: the drill-downs),
which ``templates/report_items.js`` decodes with the browser's ``DecompressionStream('gzip')`` and
renders a page of rows at a time (search, filters, paging), building an item's drill-down only when it is
opened. The document (``FORMAT``)::

    rows:   {"format": 1, "n": N, "rows": {"id": [...], "outcome": [...], ...}}   # ROW_COLUMNS, one list each
    detail: {"chunks": [[chunk_id, doc_id, excerpt], ...],   # retrieved chunks, each stored once
     "sources": [...],                               # grade sources, by code
     "metrics": {"labels": [...], "values": [[...], ...]},   # a column per metric, null where none
     "detail": [{...}, ...]}                         # per item, in row order: the rest of its drill-down

Rows come in the order the page lists them: the items that need a look first (an error, a failure, a
judge error, an error class other than correct), then the others, each in recording order. The run is
read in batches of ``BATCH`` items and written into the compressor as it goes: at no time are two
copies of every item in memory. This module never imports pytest and runs no SQL of its own.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

FORMAT = 1
BATCH = 5_000
# The columns of the list's rows (and its search and filters); everything else is in "detail".
ROW_COLUMNS = ("id", "outcome", "error_class", "crag_grade", "abstained", "confidence", "question", "kind", "look",
               "blocked", "ndcg", "truthfulness")
_ROW_KEYS = {"id", "outcome", "error_class", "crag_grade", "abstained", "confidence", "ndcg", "truthfulness", "question"}
PLACES = 4  # floats kept to the 4 places the page shows at most


def needs_a_look(row: dict[str, Any]) -> bool:
    """An item a reviewer wants first: it errored or failed, a judge errored, or its error class is not correct."""
    return (row.get("outcome") not in ("passed", "skipped") or bool(row.get("error"))
            or row.get("judge_errors") not in (None, "", "[]") or row.get("error_class") not in (None, "correct"))


def listing_order(rows: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """(item id, needs a look) in the order the page lists them: the items that need a look first, then
    the others, each in recording order (``rows``: the results' item_id, outcome, error, judge_errors,
    error_class in recording order)."""
    marked = [(row["item_id"], needs_a_look(row)) for row in rows]
    return [entry for entry in marked if entry[1]] + [entry for entry in marked if not entry[1]]


def _round(value: Any) -> Any:
    return round(value, PLACES) if isinstance(value, float) else value


class Chunks:
    """Retrieved chunks interned: a corpus's chunk is retrieved for many items, its id, document and excerpt
    are stored once (``[chunk_id, doc_id, excerpt]``), each item's ranking refers to them by index."""

    def __init__(self) -> None:
        self.index: dict[tuple[Any, Any, str], int] = {}

    def ref(self, chunk_id: Any, doc_id: Any, excerpt: str) -> int:
        return self.index.setdefault((chunk_id, doc_id, excerpt), len(self.index))

    def values(self) -> list[list[Any]]:
        return [list(key) for key in self.index]


# A grade's source, as the drill-down names it, by code.
SOURCES = ("unjudged", "provenance", "human", "llm")


def compact_detail(context: dict[str, Any], chunks: Chunks) -> dict[str, Any]:
    """An item's drill-down (``html._item_context``) without what its row holds, its metrics (columns of
    their own) and empty values; chunks as [chunk ref, score, grade, source, useful, cited] (source: an
    index in SOURCES, or the name when it is another)."""
    detail: dict[str, Any] = {}
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


class _Compressor:
    """JSON text into gzip, chunk by chunk."""

    def __init__(self) -> None:
        self.gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
        self.parts: list[bytes] = []

    def write(self, text: str) -> None:
        self.parts.append(self.gzip.compress(text.encode("utf-8")))

    def finish(self) -> bytes:
        self.parts.append(self.gzip.flush())
        return b"".join(self.parts)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_items(store, run_id: str, item_metrics: dict[str, dict[str, float]], k: int | None,
                 repeats: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Every item of the run packed for the page: ``{"rows", "detail": the two blocks' base64 text, "n",
    "look": items that need a look, "outcomes", "error_classes", "kinds": the filters' values}``."""
    from ..metrics import ordered_metrics
    from ..store import aggregates
    from .html import _grades_by_item, _item_context, _metric_label

    order = listing_order(aggregates.result_columns(store, run_id, ("item_id", "outcome", "error", "judge_errors", "error_class")))
    columns: dict[str, list[Any]] = {name: [] for name in ROW_COLUMNS}
    chunks = Chunks()
    out = _Compressor()  # the drill-downs; the rows go into a block of their own, decoded (and drawn) first
    out.write('{"detail":[')
    first = True
    for start in range(0, len(order), BATCH):
        batch = order[start:start + BATCH]
        ids = [item_id for item_id, _ in batch]
        rows = {row["item_id"]: row for row in aggregates.results_of(store, run_id, ids)}
        items = {item["id"]: item for item in aggregates.golden_items_of(store, run_id, ids) if isinstance(item, dict) and "id" in item}
        grades = _grades_by_item(store, run_id, items)
        for item_id, look in batch:
            row = rows.get(item_id)
            if row is None:
                continue
            context = _item_context(row, items.get(item_id), grades.get(item_id, {}), {}, k, repeats)
            context.pop("ndcg"), context.pop("truthfulness")
            for name in ROW_COLUMNS[:7]:  # id ... question: as the drill-down's context has them
                value = context[name]
                columns[name].append(int(value) if isinstance(value, bool) else _round(value))
            columns["kind"].append((items.get(item_id) or {}).get("kind"))
            columns["look"].append(1 if look else 0)
            columns["blocked"].append((context.get("blocked_layer") or "") if context.get("blocked") else None)
            out.write(("" if first else ",") + _dumps(compact_detail(context, chunks)))
            first = False
        del rows, items, grades
    # An item's metrics: one column per metric, in the drill-down's order (null where the item has none).
    ids = columns["id"]
    names = ordered_metrics(item_metrics)
    metric_columns = [[_round(values.get(item_id)) for item_id in ids] for values in (item_metrics[name] for name in names)]
    for name, key in (("ndcgAt10", "ndcg"), ("truthfulness", "truthfulness")):
        columns[key] = metric_columns[names.index(name)] if name in names else [None] * len(ids)
    out.write('],"chunks":' + _dumps(chunks.values()) + ',"sources":' + _dumps(SOURCES)
              + ',"metrics":{"labels":' + _dumps([_metric_label(name, k) for name in names]) + ',"values":')
    out.write(_dumps(metric_columns) + "}}")
    detail = base64.b64encode(out.finish()).decode("ascii")
    head = _Compressor()
    head.write(f'{{"format":{FORMAT},"n":{len(ids)},"rows":' + _dumps(columns) + "}")
    return {"rows": base64.b64encode(head.finish()).decode("ascii"), "detail": detail, "n": len(ids), "look": sum(columns["look"]),
            "outcomes": sorted({value for value in columns["outcome"] if value}),
            "error_classes": sorted({value for value in columns["error_class"] if value}),
            "kinds": sorted({value for value in columns["kind"] if value})}


def decode_items(html: str) -> dict[str, Any]:
    """The document ``encode_items`` packed, read back from a page (its two blocks, as the page's script
    decodes them: base64, gzip, JSON), merged into one dict: for tests and tools."""
    import gzip
    import re

    document: dict[str, Any] = {}
    for block in ("items-rows", "items-detail"):
        [data] = re.findall(rf'<script type="application/octet-stream" id="{block}"[^>]*>([^<]*)</script>', html)
        document.update(json.loads(gzip.decompress(base64.b64decode(data)).decode("utf-8")))
    return document
