"""Rows of the review loop and the judge cache: promoted corrections (an ``eval_feedback`` row
linked to its ``golden_drafts`` row) and the cached verdicts a session preloads.

Which requests may be promoted, and what the draft item holds, is decided in
``pytest_crucible.golden_set.promote``; this module only writes and reads the rows.
This module never imports pytest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import Store, read_only_rows

if TYPE_CHECKING:
    from .postgres import DatabaseURL


def add_promoted_draft(store: Store, *, feedback_id: str, run_id: str, result_id: str | None, item_id: str | None,
                       error_class: str, evidence: str, corrected_by: str | None, note: str, draft_id: str,
                       draft_item: dict[str, Any], created_at: str, api_key_id: str | None = None) -> None:
    """Append the feedback row and create the draft golden item it links to, in ONE transaction:
    both rows or neither (a failure of either insert rolls back both and re-raises). The draft
    belongs to the run's workspace; ``api_key_id``: the API key that wrote it (None: not over HTTP)."""
    conn = store.db.conn
    with conn:
        conn.execute(
            "INSERT INTO eval_feedback (id, run_id, result_id, item_id, error_class, evidence, corrected_by, note, golden_item_id,"
            " created_at, api_key_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [feedback_id, run_id, result_id, item_id, error_class, evidence, corrected_by, note, draft_id, created_at, api_key_id],
        )
        conn.execute(
            "INSERT INTO golden_drafts (id, status, item, feedback_id, created_by, created_at, workspace)"
            " VALUES (?, 'draft', ?, ?, ?, ?, (SELECT workspace FROM runs WHERE id = ?))",
            [draft_id, json.dumps(draft_item, sort_keys=True), feedback_id, corrected_by, created_at, run_id],
        )


def draft_golden_items(store: Store, *, workspace: str | None = None) -> list[dict[str, Any]]:
    """The promoted draft golden items of ``workspace`` (None: of every workspace), as stored (the
    golden file format), oldest first."""
    return [json.loads(row[0]) for row in store.db.conn.execute(
        "SELECT item FROM golden_drafts WHERE ? IS NULL OR workspace = ? ORDER BY created_at, id", [workspace, workspace])]


def read_judge_cache(db_path: str | Path | DatabaseURL, judge_model: str, prompt_version: str | None = None) -> list[dict[str, Any]]:
    """Cached verdicts (``key``, ``verdict``) of one judge model, of every prompt version unless one
    is given; read without writing (xdist workers call it). A missing file reads as no rows."""
    sql = "SELECT key, verdict FROM judge_cache WHERE judge_model = ?"
    params: list[Any] = [judge_model]
    if prompt_version is not None:
        sql += " AND prompt_version = ?"
        params.append(prompt_version)
    return read_only_rows(db_path, sql, params)


# -- judge calibrations (`crucible judge calibrate`) ------------------------------------------
_CALIBRATION_COLUMNS = ("id", "judge_model", "prompt_version", "label_set_hash", "n_crag", "kappa_crag",
                        "kappa_crag_binary", "n_faithful", "kappa_faithful", "figures", "created_at")


def add_judge_calibration(store: Store, row: dict[str, Any]) -> dict[str, Any]:
    """Remember one calibration (``figures`` as a JSON-able dict); returns the row as stored (with its id and time)."""
    from . import new_ulid, utc_now

    stored = {"id": new_ulid(), "created_at": utc_now(), **row}
    stored["figures"] = json.dumps(stored["figures"], sort_keys=True)
    conn = store.db.conn
    with conn:
        conn.execute(f"INSERT INTO judge_calibrations ({', '.join(_CALIBRATION_COLUMNS)}) "
                     f"VALUES ({', '.join('?' for _ in _CALIBRATION_COLUMNS)})",
                     [stored[column] for column in _CALIBRATION_COLUMNS])
    return {**stored, "figures": json.loads(stored["figures"])}


_LATEST_CALIBRATION = (f"SELECT {', '.join(_CALIBRATION_COLUMNS)} FROM judge_calibrations WHERE judge_model = ? "
                       "AND prompt_version = ? ORDER BY created_at DESC, id DESC LIMIT 1")


def _calibration(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {**row, "figures": json.loads(row["figures"])}


def latest_judge_calibration(store: Store, judge_model: str, prompt_version: str | None) -> dict[str, Any] | None:
    """The newest calibration of this judge model and prompt version, or None."""
    found = store.db.conn.execute(_LATEST_CALIBRATION, [judge_model, prompt_version or judge_model]).fetchone()
    return _calibration(None if found is None else dict(zip(_CALIBRATION_COLUMNS, found)))


def read_latest_judge_calibration(db_path: str | Path | DatabaseURL, judge_model: str, prompt_version: str | None) -> dict[str, Any] | None:
    """:func:`latest_judge_calibration`, read without writing (xdist workers call it); a missing file: None."""
    rows = read_only_rows(db_path, _LATEST_CALIBRATION, [judge_model, prompt_version or judge_model])
    return _calibration(rows[0] if rows else None)


def ledger_marks(store: Store) -> tuple[Any, ...]:
    """Marks that move whenever what a comparison reads besides its two runs changes: the qrels ledger
    (append-only, so its newest row id and its size) and the judge calibrations (their number and newest)."""
    return tuple(store.db.conn.execute(
        "SELECT (SELECT coalesce(max(id), 0) FROM qrels), (SELECT count(*) FROM qrels),"
        " (SELECT count(*) FROM judge_calibrations), (SELECT max(created_at) FROM judge_calibrations)").fetchone())


def promoted_corrections(store: Store, *, workspace: str | None = None) -> list[dict[str, Any]]:
    """The promoted corrections (a feedback row linked to its draft golden item) of ``workspace`` (the
    workspace of the run corrected; None: of every workspace), oldest first, with the result it came from
    (question, answer, abstained, retrieved as stored JSON; None when the correction names no result),
    the golden item as that run ran it (JSON text, or None), who wrote it (``api_key_id``, the key that
    promoted it over HTTP, and that key's ``api_key_name``; None from the command line) and the
    ``workspace``. ``corrected_by`` is the reviewer the promote named: a claim, not an identity."""
    cursor = store.db.conn.execute(
        "SELECT f.id, f.run_id, f.item_id, f.error_class, f.corrected_by, f.api_key_id, k.name AS api_key_name,"
        " d.workspace, d.item AS draft_item, r.question, r.answer, r.abstained, r.retrieved_hash, g.item AS golden_item"
        " FROM eval_feedback f JOIN golden_drafts d ON d.id = f.golden_item_id"
        " LEFT JOIN api_keys k ON k.id = f.api_key_id"
        " LEFT JOIN results r ON r.result_id = f.result_id"
        " LEFT JOIN golden_items g ON g.run_id = r.run_id AND g.item_id = r.item_id"
        " WHERE ? IS NULL OR d.workspace = ?"
        " ORDER BY f.created_at, f.id", [workspace, workspace])
    from .contents import resolve_retrieved

    names = [column[0] for column in cursor.description]
    return resolve_retrieved(store.db.conn, [dict(zip(names, row)) for row in cursor.fetchall()])


# -- human labels of answers (`crucible judge labels import`; PPI++ reads them) -----------------
_LABEL_COLUMNS = ("item_id", "answer_hash", "kind", "value", "source", "created_by", "note", "created_at")


def add_human_labels(store: Store, rows: list[dict[str, Any]]) -> int:
    """Append labels (``item_id``, ``answer_hash``, ``kind``, ``value``, ``source``, optional ``created_by``,
    ``note``, ``created_at``) in one transaction; returns how many were new. A label already in the ledger
    (same item, answer, kind, value and source: the unique index) is ignored, never rewritten."""
    from . import utc_now

    now = utc_now()
    values = [[row.get(column) if column != "created_at" else row.get(column) or now for column in _LABEL_COLUMNS]
              for row in rows]
    if not values:
        return 0
    conn = store.db.conn
    with conn:
        cursor = conn.executemany(f"INSERT OR IGNORE INTO human_labels ({', '.join(_LABEL_COLUMNS)}) "
                                  f"VALUES ({', '.join('?' for _ in _LABEL_COLUMNS)})", values)
    return max(cursor.rowcount, 0)


def human_labels_for_items(store: Store, item_ids: Any) -> list[dict[str, Any]]:
    """Every label of an answer of these golden items, oldest first (newest last: a reader that keeps the
    last label per answer and kind keeps the newest), with its ``id``."""
    ids = sorted(set(item_ids))
    if not ids:
        return []
    cursor = store.db.conn.execute(
        f"SELECT id, {', '.join(_LABEL_COLUMNS)} FROM human_labels"
        " WHERE item_id IN (SELECT value FROM json_each(?)) ORDER BY created_at, id", [json.dumps(ids)])
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def run_answers(store: Store, run_id: str) -> dict[str, str | None]:
    """item id -> the answer the run recorded for it (None: no answer, e.g. an abstention or an error)."""
    return dict(store.db.conn.execute("SELECT item_id, answer FROM results WHERE run_id = ?", [run_id]).fetchall())


def stored_answers(store: Store, item_ids: Any) -> list[tuple[str, str | None]]:
    """(item id, answer) of every result of these golden items, in any run (each pair once)."""
    ids = sorted(set(item_ids))
    if not ids:
        return []
    return [tuple(row) for row in store.db.conn.execute(
        "SELECT DISTINCT item_id, answer FROM results WHERE item_id IN (SELECT value FROM json_each(?))", [json.dumps(ids)])]
