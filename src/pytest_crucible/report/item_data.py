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
judge error, an error class other than correct: ``store.aggregates.NEEDS_A_LOOK``), then the others, each in
recording order. The results are read in that order in one pass (``aggregates.results_in_listing_order``:
only the columns a drill-down shows, as tuples, in batches of ``BATCH``), beside the golden items' fields the
facet table reads too (``GOLDEN_FIELDS``); each item's drill-down is built straight from them
(:func:`item_detail`, the one place that decides what it shows), a stored ranking decoded and its chunks
interned once however many items retrieved it (:class:`Rankings`), and each batch is written into the
compressor (a thread of its own) as it goes. This module never imports pytest and runs no SQL of its own.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future

FORMAT = 1
BATCH = 5_000
# The columns of the list's rows (and its search and filters); everything else is in "detail".
ROW_COLUMNS = ("id", "outcome", "error_class", "crag_grade", "abstained", "confidence", "question", "kind", "look",
               "blocked", "ndcg", "truthfulness")
PLACES = 4  # floats kept to the 4 places the page shows at most
EXCERPT_CHARS = 400  # of a retrieved chunk's text in the drill-down
# A grade's source, as the drill-down names it, by code.
SOURCES = ("unjudged", "provenance", "human", "llm")
# What the drill-down shows of a stored assertion; a run stored before a key existed (weight) reads None: shown as "–".
ASSERTION_KEYS = ("text", "kind", "weight", "conceptId", "conceptDetected", "supported", "satisfied")
# The result columns the items are built from, and the golden items' fields (``GOLDEN_FIELDS``: the facet
# table reads the same ones, ``report.terminal.stored_facets``).
RESULT_COLUMNS = ("item_id", "question", "answer", "outcome", "error_class", "error_evidence", "crag_grade", "confidence",
                  "abstained", "blocked", "blocked_layer", "latency_ms", "error", "failures", "judge_errors", "metric_errors",
                  "verdicts", "retrieved", "citations", "assertions", "tool_calls")
GOLDEN_FIELDS = ("id", "questionType", "popularity", "dynamism", "answerable", "kind", "tags", "attack", "expect",
                 "reference", "expectedTools", "toolMatch", "citations")
# Rankings kept prepared (a ranking repeated by other items is decoded once), at most this many at a time.
RANKINGS_KEPT = 20_000


def _round(value: Any) -> Any:
    return round(value, PLACES) if isinstance(value, float) else value


def _empty(value: Any) -> bool:
    """A value the drill-down leaves out."""
    return value is None or value == "" or value == [] or value == {} or value is False


def _loads(value: Any, default: Any) -> Any:
    """A stored JSON column decoded (None, "" or text that is not JSON: ``default``)."""
    if value is None or value == "":
        return default
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return default
    return value


def _listed(value: Any) -> Any:
    """A stored JSON list column decoded (``[]`` when empty), without decoding the usual empty list."""
    return [] if value is None or value == "" or value == "[]" else (_loads(value, []) or [])


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None


class Chunks:
    """Retrieved chunks interned: a corpus's chunk is retrieved for many items, its id, document and excerpt
    are stored once (``[chunk_id, doc_id, excerpt]``), each item's ranking refers to them by index (``index``:
    each chunk's, in the order they were first shown; :meth:`Rankings._prepare` adds them)."""

    def __init__(self) -> None:
        self.index: dict[tuple[Any, Any, str], int] = {}

    def values(self) -> list[list[Any]]:
        return [list(key) for key in self.index]


class Prepared(list):
    """One ranking's chunks as :class:`Rankings` keeps them, with ``entries`` (each chunk's entry, as an item with
    no grade, usefulness or citation among them shows it) and ``units``, the grade units a chunk of it is looked
    up by (``chunk:<id>``, ``doc:<id>``)."""

    entries: list[list[Any]]
    units: set[str]
    _text: str | None = None

    @property
    def text(self) -> str:
        """``entries`` as JSON, written once however many items show them."""
        if self._text is None:
            self._text = _dumps(self.entries)
        return self._text


class Rankings:
    """Retrieved rankings, each decoded and its chunks interned once (``RANKINGS_KEPT`` at a time): per chunk,
    in rank order, its drill-down entry as an ungraded, unused, uncited chunk ``[chunk ref, score, None, 0,
    None, 0]`` (see :func:`chunk_entries`), its chunk id, document id and their grade units."""

    def __init__(self, chunks: Chunks) -> None:
        self.chunks = chunks
        self.bodies: dict[str, str] = {}
        self.prepared: dict[Any, Prepared] = {}

    def read(self, conn: Any, hashes: set[Any]) -> None:
        """The texts of these rankings that are not prepared yet (a batch's)."""
        from ..store.contents import content_bodies

        if len(self.prepared) > RANKINGS_KEPT:
            self.prepared.clear()
        self.bodies = content_bodies(conn, [key for key in hashes if key is not None and key not in self.prepared])

    def __getitem__(self, key: Any) -> Prepared:
        prepared = self.prepared.get(key)
        if prepared is None:
            prepared = self.prepared[key] = self._prepare(self.bodies.get(key) if key is not None else None)
        return prepared

    def _prepare(self, body: str | None) -> Prepared:
        prepared, entries, units = Prepared(), [], set()
        index = self.chunks.index  # Chunks.ref, inlined: this runs for every chunk of every distinct ranking
        for hit in _loads(body, []) or []:
            get = hit.get if isinstance(hit, dict) else {}.get
            chunk_id, doc_id = get("chunk_id") or get("chunkId"), get("doc_id") or get("docId")
            text = get("text") or ""
            excerpt = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…"
            score = get("score")
            entry = [index.setdefault((chunk_id, doc_id, excerpt), len(index)), round(score, PLACES) if isinstance(score, float) else score,
                     None, 0, None, 0]
            chunk_unit, doc_unit = f"chunk:{chunk_id}", f"doc:{doc_id}"
            if chunk_id:
                units.add(chunk_unit)
            if doc_id:
                units.add(doc_unit)
            entries.append(entry)
            prepared.append((entry, chunk_id, doc_id, chunk_unit, doc_unit))
        prepared.entries, prepared.units = entries, units
        return prepared


def chunk_entries(prepared: Prepared, grades: dict[str, tuple[int, str]],
                  useful: list[Any], cited: set[Any]) -> list[list[Any]]:
    """An item's retrieved chunks as its drill-down shows them: [chunk ref, score, grade, source, useful, cited]
    (grade: the chunk's effective grade, else its document's; source: an index in SOURCES, or the name when it
    is another; useful: the context precision verdict at its rank; cited: 1 when the answer cites it, by id or
    as ``S<rank>``)."""
    if not useful and not cited and (not grades or grades.keys().isdisjoint(prepared.units)):
        return prepared.entries
    entries = []
    for index, (entry, chunk_id, doc_id, chunk_unit, doc_unit) in enumerate(prepared):
        grade = grades.get(chunk_unit) if chunk_id else None
        if grade is None and doc_id:
            grade = grades.get(doc_unit)
        used = useful[index] if index < len(useful) else None
        quoted = chunk_id in cited or f"S{index + 1}" in cited
        if grade is None and used is None and not quoted:
            entries.append(entry)
            continue
        source = grade[1] if grade else "unjudged"
        entries.append([entry[0], entry[1], grade[0] if grade else None, SOURCES.index(source) if source in SOURCES else source,
                        used, 1 if quoted else 0])
    return entries


def verdict_parts(verdicts: dict[str, Any]) -> dict[str, Any]:
    """What the drill-down shows of an item's stored judge verdicts, in its order (rubrics and chunks' usefulness
    first: the caller places them around the chunks)."""
    from .item_view import retention_evidence

    faith = verdicts.get("faithfulness") or {}
    recall = verdicts.get("contextRecall") or {}
    relevancy = verdicts.get("responseRelevancy") or {}
    return {
        "rubrics": [{"name": key[len("rubric:"):], **value} for key, value in sorted(verdicts.items())
                    if key.startswith("rubric:") and isinstance(value, dict)],
        "claims": [{"text": claim, "supported": _at(faith.get("supported"), i), "reason": _at(faith.get("reasons"), i)}
                   for i, claim in enumerate(faith.get("claims") or [])],
        "reference_claims": [{"text": claim, "attributed": _at(recall.get("attributed"), i)}
                             for i, claim in enumerate(recall.get("referenceClaims") or [])],
        "questions": [{"text": q, "noncommittal": _at(relevancy.get("noncommittal"), i)}
                      for i, q in enumerate(relevancy.get("questions") or [])],
        "useful": (verdicts.get("contextPrecision") or {}).get("useful") or [],
        "correctness": verdicts.get("correctness"), "retention": retention_evidence(verdicts),
    }


def tool_context(item: dict[str, Any], calls: list[Any]) -> dict[str, Any] | None:
    """The item's tool calls beside its expectedTools (``item_view.tool_view``, the view `crucible show --item`
    prints), each row with its label, both calls as text and the arguments that differ."""
    from .item_view import TOOL_STATUS, call_text, difference_text, tool_view

    view = tool_view(item, calls)
    if view is None:
        return None
    rows = [{"status": row["status"], "label": TOOL_STATUS[row["status"]], "position": row["position"],
             "expected": call_text(row["expected"], 120) if row["expected"] is not None else None,
             "made": call_text(row["actual"], 120) if row["actual"] is not None else None,
             "differences": [difference_text(difference) for difference in row["differences"]]} for row in view["rows"]]
    return {**view, "rows": rows}


_FACETS = ("questionType", "popularity", "dynamism", "answerable", "kind")


class _Compressor:
    """JSON text into gzip, chunk by chunk, compressed by a thread of its own while the next chunk is built
    (zlib lets go of the interpreter while it compresses); at most ``PENDING`` chunks wait for it."""

    PENDING = 4

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="crucible-gzip")
        self.pending: list[Future[bytes]] = []
        self.parts: list[bytes] = []

    def write(self, text: str) -> None:
        while len(self.pending) >= self.PENDING:
            self.parts.append(self.pending.pop(0).result())
        self.pending.append(self.worker.submit(self.gzip.compress, text.encode("utf-8")))

    def finish(self) -> bytes:
        try:
            self.parts.extend(future.result() for future in self.pending)
        finally:
            self.worker.shutdown()
        self.parts.append(self.gzip.flush())
        return b"".join(self.parts)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# Where a batch's text takes a ranking's entries written once (``Prepared.text``): a string of private-use
# characters around the place's number.
_PLACE = re.compile('"\ue000([0-9]+)\ue000"')


def _batch_text(details: list[dict[str, Any]], shown: list[tuple[dict[str, Any], Prepared]]) -> str:
    """A batch's drill-downs as the JSON text ``_dumps(details)[1:-1]``, each ranking shown as it is written
    once: in its place a marker, replaced by the ranking's text (were a marker in a stored text too, the batch
    is written whole again)."""
    for index, (detail, _) in enumerate(shown):
        detail["chunks"] = f"\ue000{index}\ue000"
    parts = _PLACE.split(_dumps(details)[1:-1])
    if parts[1::2] == [str(index) for index in range(len(shown))]:
        parts[1::2] = [prepared.text for _, prepared in shown]
        return "".join(parts)
    for detail, prepared in shown:
        detail["chunks"] = prepared.entries
    return _dumps(details)[1:-1]


class _Items:
    """What one run's items are built from: its golden items (their ``GOLDEN_FIELDS``; a whole item where a
    field's key order shows: an attack, expected tools), its judgment ledger and each item's effective grades."""

    def __init__(self, store, run_id: str, golden: list[dict[str, Any]] | None) -> None:
        from ..store import aggregates

        golden = aggregates.golden_fields(store, run_id, GOLDEN_FIELDS) if golden is None else golden
        self.items = {item["id"]: item for item in golden if item.get("id") is not None}
        whole = [key for key, item in self.items.items() if item.get("attack") is not None or item.get("expectedTools") is not None]
        if whole:
            self.items.update({item["id"]: item for item in aggregates.golden_items_of(store, run_id, whole)
                               if isinstance(item, dict) and "id" in item})
        try:
            self.ledger = store.run_judgment_ledger(run_id)
        except Exception:  # an unreadable ledger must not cost the whole report
            self.ledger = {}

    def grades(self, item_id: str, item: dict[str, Any] | None) -> dict[str, tuple[int, str]]:
        """unit -> (effective grade, source) of one item: its golden citations, human and llm judgments."""
        from ..qrels.grades import item_grades

        if item is None:
            return {}
        try:
            return item_grades(item, self.ledger.get(item_id, []))
        except ValueError:
            return {}


def item_detail(row: tuple, item: dict[str, Any] | None, items: _Items, rankings: Rankings, k: int | None,
                repeats: dict[str, list[dict[str, Any]]] | None) -> dict[str, Any]:
    """An item's drill-down (``row``: its RESULT_COLUMNS), the one place that decides what it shows, without
    what its row holds, its metrics (columns of their own) and empty values."""
    from .html import _metric_label

    (item_id, _, answer, _, _, error_evidence, _, _, _, blocked, blocked_layer, latency_ms, error, failures, judge_errors,
     metric_errors, verdicts, retrieved, citations, assertions, tool_calls) = row[:21]
    item_fields = item or {}
    detail: dict[str, Any] = {}
    if not _empty(answer):
        detail["answer"] = answer
    if not _empty(error_evidence):
        detail["error_evidence"] = error_evidence
    if blocked:
        detail["blocked"] = True
    if not _empty(blocked_layer):
        detail["blocked_layer"] = blocked_layer
    attack = item_fields.get("attack")
    if not _empty(attack):
        from ..metrics.guardrail import expected_outcome

        detail["attack"] = attack
        detail["expect"] = expected_outcome(item_fields) or "answered"
    if not _empty(latency_ms):
        detail["latency_ms"] = _round(latency_ms)
    if not _empty(error):
        detail["error"] = error
    for key, value in (("failures", failures), ("judge_errors", judge_errors), ("metric_errors", metric_errors)):
        value = _listed(value)
        if not _empty(value):
            detail[key] = value
    if repeats and repeats.get(item_id):
        detail["repeats"] = [{**repeat, "metrics": [{"label": _metric_label(name, k), "value": value}
                                                    for name, value in sorted((repeat.get("metrics") or {}).items())]}
                             for repeat in repeats[item_id]]
    parts = verdict_parts(_loads(verdicts, {}) or {}) if not _empty(verdicts) else None
    if parts and parts["rubrics"]:
        detail["rubrics"] = parts["rubrics"]
    prepared = rankings[retrieved]
    if prepared:
        cited = _listed(citations)
        detail["chunks"] = chunk_entries(prepared, items.grades(item_id, item), parts["useful"] if parts else [],
                                         set(cited) if cited else set())
    if parts:
        for key in ("claims", "reference_claims", "questions", "useful", "correctness", "retention"):
            if not _empty(parts[key]):
                detail[key] = parts[key]
    shown = [{key: assertion.get(key) for key in ASSERTION_KEYS} for assertion in _listed(assertions) if isinstance(assertion, dict)]
    if shown:
        detail["assertions"] = shown
    reference = item_fields.get("reference")
    if not _empty(reference):
        detail["reference"] = reference
    facets = [(name, item_fields.get(name)) for name in _FACETS if item_fields.get(name) is not None]
    if facets:
        detail["facets"] = facets
    tags = item_fields.get("tags") or []
    if not _empty(tags):
        detail["tags"] = tags
    if item_fields.get("expectedTools") is not None or not _empty(_listed(tool_calls)):
        tools = tool_context(item_fields, _listed(tool_calls))
        if not _empty(tools):
            detail["tools"] = tools
    return detail


def encode_items(store, run_id: str, item_metrics: dict[str, dict[str, float]], k: int | None,
                 repeats: dict[str, list[dict[str, Any]]] | None = None,
                 golden: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Every item of the run packed for the page: ``{"rows", "detail": the two blocks' base64 text, "n",
    "look": items that need a look, "outcomes", "error_classes", "kinds": the filters' values}``. ``golden``:
    the run's golden items' GOLDEN_FIELDS (``aggregates.golden_fields``), when the caller read them already."""
    from ..metrics import ordered_metrics
    from ..store import aggregates
    from .html import _metric_label

    items = _Items(store, run_id, golden)
    columns: dict[str, list[Any]] = {name: [] for name in ROW_COLUMNS}
    ids, outcomes, error_classes, crag_grades = columns["id"], columns["outcome"], columns["error_class"], columns["crag_grade"]
    abstained, confidences, questions, kinds = columns["abstained"], columns["confidence"], columns["question"], columns["kind"]
    looks, blocked = columns["look"], columns["blocked"]
    rankings = Rankings(Chunks())
    out = _Compressor()  # the drill-downs; the rows go into a block of their own, decoded (and drawn) first
    out.write('{"detail":[')
    first = True
    shown: list[tuple[dict[str, Any], Prepared]] = []  # the batch's items that show a ranking's entries as they are
    for batch in aggregates.results_in_listing_order(store, run_id, RESULT_COLUMNS, BATCH):
        rankings.read(store.db.conn, {row[17] for row in batch})
        details = []
        for row in batch:
            item_id = row[0]
            item = items.items.get(item_id)
            ids.append(item_id)
            questions.append(row[1] or "")
            outcomes.append(row[3] or "")
            error_classes.append(row[4])
            crag_grades.append(row[6])
            abstained.append(1 if row[8] else 0)
            confidences.append(round(row[7], PLACES) if isinstance(row[7], float) else row[7])
            kinds.append(item.get("kind") if item else None)
            looks.append(row[21])
            blocked.append((row[10] or "") if row[9] else None)
            detail = item_detail(row, item, items, rankings, k, repeats)
            details.append(detail)
            if "chunks" in detail and detail["chunks"] is (prepared := rankings[row[17]]).entries:
                shown.append((detail, prepared))
        if details:
            out.write(("" if first else ",") + _batch_text(details, shown))
            first = False
            shown.clear()
    # An item's metrics: one column per metric, in the drill-down's order (null where the item has none).
    names = ordered_metrics(item_metrics)
    metric_columns = [[None if (value := values.get(item_id)) is None else round(value, PLACES) for item_id in ids]
                      for values in (item_metrics[name] for name in names)]
    for name, key in (("ndcgAt10", "ndcg"), ("truthfulness", "truthfulness")):
        columns[key] = metric_columns[names.index(name)] if name in names else [None] * len(ids)
    out.write('],"chunks":' + _dumps(rankings.chunks.values()) + ',"sources":' + _dumps(SOURCES)
              + ',"metrics":{"labels":' + _dumps([_metric_label(name, k) for name in names]) + ',"values":')
    out.write(_dumps(metric_columns) + "}}")
    detail_block = base64.b64encode(out.finish()).decode("ascii")
    head = _Compressor()
    head.write(f'{{"format":{FORMAT},"n":{len(ids)},"rows":' + _dumps(columns) + "}")
    return {"rows": base64.b64encode(head.finish()).decode("ascii"), "detail": detail_block, "n": len(ids), "look": sum(looks),
            "outcomes": sorted({value for value in outcomes if value}),
            "error_classes": sorted({value for value in error_classes if value}),
            "kinds": sorted({value for value in kinds if value})}


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
