"""The turns of a run's golden conversations as the per-conversation metrics read them, and those metrics
written on each conversation's last turn (``evaluation/conversations.py`` computes them when the run closes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .results import MetricRow

if TYPE_CHECKING:
    from . import Store


def run_turns(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Each turn of a golden conversation the run holds: ``{"item_id", "conversation" (its place: id, turn,
    turns, history), "crag_grade", "error", "knowledgeRetained" (its stored value, or None)}``; items that are
    not turns are left out."""
    rows = store.db.conn.execute(
        "SELECT g.item_id, json_extract(g.item, '$.conversation'), r.crag_grade, r.error, m.value FROM golden_items g"
        " JOIN results r ON r.run_id = g.run_id AND r.item_id = g.item_id"
        " LEFT JOIN item_metrics m ON m.run_id = g.run_id AND m.item_id = g.item_id AND m.metric = 'knowledgeRetained'"
        # A turn's id is CONV:tN: the ids select the few rows whose JSON is read (a run of 100,000 items reads none).
        " WHERE g.run_id = ? AND g.item_id LIKE '%:t%' AND json_extract(g.item, '$.conversation') IS NOT NULL", [run_id]).fetchall()
    return [{"item_id": item_id, "conversation": json.loads(turn) if isinstance(turn, str) else turn, "crag_grade": grade, "error": error,
             "knowledgeRetained": retained}
            for item_id, turn, grade, error, retained in rows]


def add_item_metrics(store: Store, run_id: str, values: Mapping[str, Mapping[str, float]]) -> None:
    """``{item id: {metric: value}}`` added to the run's item metrics in one transaction (a value already there
    is replaced: a run closed again computes them again)."""
    rows = [MetricRow(run_id, item_id, metric, float(value)) for item_id, metrics in values.items() for metric, value in metrics.items()]
    if rows:
        with store.db.conn:
            store._insert_values("item_metrics", MetricRow._fields, rows, replace=True)
