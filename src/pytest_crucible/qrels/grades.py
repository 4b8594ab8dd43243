"""Relevance judgments (qrels): units, effective grades, and agreement between judges.

A judgment grades a *unit* for a query: a chunk (``chunk:<id>``) or a whole document
(``doc:<id>``, which any chunk of that document matches, counted once). Judgments come
from three sources, kept side by side in an append-only ledger:

- ``provenance``: the golden item's citations (required = 3, acceptable = 1), free and
  deterministic; for a run, the citations *as run* are the provenance judgments;
- ``llm``: a graded-relevance judge (UMBRELA-style, 0-3), stamped with model and prompt;
- ``human``: a person's override, stamped with who made it; never replaces a row, appends one.

The **effective grade** of a unit, which every metric reads, follows this precedence:
the newest human judgment, else the provenance judgment, else the newest llm judgment.
A unit with no judgment at all is *unjudged* and counts as non-relevant, exactly as
trec_eval treats unjudged documents.

This module never imports pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..metrics.retrieval import provenance_qrels


def unit_key(row: Mapping[str, Any]) -> str:
    """The unit a ledger row judges: its chunk when it names one, else its document."""
    chunk = row.get("chunk_id")
    return f"chunk:{chunk}" if chunk else f"doc:{row.get('doc_id')}"


def _newest(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    newest: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        key = unit_key(row)
        seen = newest.get(key)
        # Ties on the timestamp go to the later row id (the later append).
        if seen is None or (row.get("created_at") or "", row.get("id") or 0) >= (seen.get("created_at") or "", seen.get("id") or 0):
            newest[key] = row
    return newest


def effective_grades(provenance: Mapping[str, int], rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, str]]:
    """unit -> (effective grade, source) for one query.

    ``provenance`` is the item's citation qrels (unit -> grade, as run); ``rows`` are the
    query's ledger rows of the other sources (human, llm; provenance rows are ignored here).
    """
    rows = list(rows)
    if not rows:  # the usual case: no one has judged this query beyond its citations
        return {unit: (int(grade), "provenance") for unit, grade in provenance.items()}
    human = _newest(r for r in rows if r["source"] == "human")
    stronger = set(provenance) | set(human)
    effective: dict[str, tuple[int, str]] = {
        unit: (int(row["grade"]), "llm")
        for unit, row in _newest(r for r in rows if r["source"] == "llm").items()
        # A chunk-level llm grade must not shadow a document-level human or provenance grade
        # (chunk units are looked up before document units when a ranking is scored).
        if f"doc:{row.get('doc_id')}" not in stronger
    }
    effective.update({unit: (int(grade), "provenance") for unit, grade in provenance.items()})
    effective.update({unit: (int(row["grade"]), "human") for unit, row in human.items()})
    return effective


def item_citations(item: Any) -> list[Any]:
    """A golden item's citations, whatever shape the item has: a ``GoldenItem`` (its
    ``citations`` models), a plain dict (a stored or exported item: its ``"citations"``
    list of camelCase dicts), or None (no item known: no citations)."""
    if item is None:
        return []
    if isinstance(item, Mapping):
        return list(item.get("citations") or [])
    return list(getattr(item, "citations", None) or [])


def item_grades(item: Any, rows: Iterable[Mapping[str, Any]] = ()) -> dict[str, tuple[int, str]]:
    """unit -> (effective grade, source) for one golden item: the one place that assembles it.

    ``item`` is a ``GoldenItem``, a plain item dict or None (see :func:`item_citations`); its
    citations (as run) are the provenance judgments. ``rows`` are that item's human and llm
    ledger rows (the caller fetches them; this module never reads the store). A citation
    with a bad mode or no unit raises ValueError (see ``provenance_qrels``).
    """
    return effective_grades(provenance_qrels(item_citations(item)), rows)


def llm_human_pairs(rows: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """(llm grade, human grade) for every (query, unit) judged by both: newest of each side."""
    rows = list(rows)
    by_query: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_query.setdefault(row["query_id"], []).append(row)
    pairs = []
    for query in sorted(by_query):
        llm = _newest(r for r in by_query[query] if r["source"] == "llm")
        human = _newest(r for r in by_query[query] if r["source"] == "human")
        for unit in sorted(set(llm) & set(human)):
            pairs.append((int(llm[unit]["grade"]), int(human[unit]["grade"])))
    return pairs


def agreement(rows: Iterable[Mapping[str, Any]], binary_threshold: int = 2) -> dict[str, Any]:
    """Judge audit: kappa between llm and human judgments, on 4 levels and binarized
    (:func:`pytest_crucible.stats.agreement.cohen_kappa`, the kappa `crucible judge calibrate` uses too)."""
    from ..stats.agreement import cohen_kappa  # lazy: the stats package imports numpy and scipy

    pairs = llm_human_pairs(rows)
    four = cohen_kappa(pairs)
    binary = cohen_kappa([(int(a >= binary_threshold), int(b >= binary_threshold)) for a, b in pairs])
    return {
        "pairs": len(pairs),
        "fourLevel": {"kappa": four.kappa, "observed": four.observed, "expected": four.expected},
        "binary": {"threshold": binary_threshold, "kappa": binary.kappa, "observed": binary.observed, "expected": binary.expected},
    }
