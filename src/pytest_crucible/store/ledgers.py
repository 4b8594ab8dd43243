"""Rows of the review loop and the judge cache: promoted corrections (an ``eval_feedback`` row
linked to its ``golden_drafts`` row) and the cached verdicts a session preloads.

Which requests may be promoted, and what the draft item holds, is decided in
``pytest_crucible.promote``; this module only writes and reads the rows.
This module never imports pytest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import Store, read_only_rows


def add_promoted_draft(store: Store, *, feedback_id: str, run_id: str, result_id: str | None, item_id: str | None,
                       error_class: str, evidence: str, corrected_by: str | None, note: str, draft_id: str,
                       draft_item: dict[str, Any], created_at: str) -> None:
    """Append the feedback row and create the draft golden item it links to, in ONE transaction:
    both rows or neither (a failure of either insert rolls back both and re-raises)."""
    conn = store.db.conn
    with conn:
        conn.execute(
            "INSERT INTO eval_feedback (id, run_id, result_id, item_id, error_class, evidence, corrected_by, note, golden_item_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [feedback_id, run_id, result_id, item_id, error_class, evidence, corrected_by, note, draft_id, created_at],
        )
        conn.execute(
            "INSERT INTO golden_drafts (id, status, item, feedback_id, created_by, created_at) VALUES (?, 'draft', ?, ?, ?, ?)",
            [draft_id, json.dumps(draft_item, sort_keys=True), feedback_id, corrected_by, created_at],
        )


def draft_golden_items(store: Store) -> list[dict[str, Any]]:
    """Every promoted draft golden item (as stored: the golden file format), oldest first."""
    return [json.loads(row[0]) for row in store.db.conn.execute("SELECT item FROM golden_drafts ORDER BY created_at, id")]


def read_judge_cache(db_path: str | Path, judge_model: str, prompt_version: str | None = None) -> list[dict[str, Any]]:
    """Cached verdicts (``key``, ``verdict``) of one judge model, of every prompt version unless one
    is given; read without writing (xdist workers call it). A missing file reads as no rows."""
    sql = "SELECT key, verdict FROM judge_cache WHERE judge_model = ?"
    params: list[Any] = [judge_model]
    if prompt_version is not None:
        sql += " AND prompt_version = ?"
        params.append(prompt_version)
    return read_only_rows(db_path, sql, params)
