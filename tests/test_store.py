"""The SQLite store: schema, migrations, run lifecycle (the views and a dead process's run on PostgreSQL too;
the rest of the store on both backends: tests/test_store_backends.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from pytest_crucible.store import SCHEMA_VERSION, Store, StoreError

SCORE = {
    "item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?", "citations": [{"docId": "d", "mode": "required"}]},
    "source": "golden_x.jsonl", "line": 1, "answer": "A", "retrieved": [{"chunk_id": "d#1", "doc_id": "d"}], "citations": ["d#1"],
    "confidence": 0.5, "abstained": False, "blocked": False, "detected_concepts": [], "latency_ms": 1.0,
    "metrics": {"ndcgAt10": 1.0, "recallAtK": 1.0}, "failures": [], "error": None, "outcome": "passed",
}


def new_run(store: Store) -> str:
    return store.start_run(config_hash="h" * 64, params={}, resolved={"retrievalLimit": 10}, mode="system", outcome_mode="strict")


def test_new_file_gets_schema_version_and_wal(tmp_path) -> None:
    store = Store.open(tmp_path / "sub" / "c.db")
    conn = store.db.conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
    # Reopening does not migrate twice.
    Store.open(tmp_path / "sub" / "c.db").close()


def test_newer_schema_is_refused_not_downgraded(tmp_path) -> None:
    path = tmp_path / "c.db"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer pytest-crucible"):
        Store.open(path)


def test_not_a_database_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "c.db"
    path.write_text("this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open the crucible database"):
        Store.open(path)


def test_run_of_a_dead_process_is_marked_interrupted_on_next_open(database) -> None:
    path = database
    code = (
        "from pytest_crucible.store import Store\n"
        f"s = Store.open({str(path)!r})\n"
        "s.start_run(config_hash='h', params={}, resolved={}, mode='system', outcome_mode='strict')\n"
        "import os; os._exit(0)\n"  # dies without finishing the run, like a SIGKILL
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    store = Store.open(path)
    [run] = store.list_runs()
    assert run["status"] == "interrupted"
    if store.db.dialect == "sqlite":
        assert store.db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_schema_v1_file_migrates_forward_without_loss(tmp_path) -> None:
    import shutil
    from pathlib import Path

    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "data" / "crucible-schema-v1.db", path)
    store = Store.open(path)
    conn = store.db.conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert [(r["id"], r["status"], r["mode"]) for r in reversed(store.list_runs())] == [
        ("01KZRUNA00000000000000000", "complete", "system"), ("01KZRUNB00000000000000000", "interrupted", "component")]
    assert store.item_metrics("01KZRUNA00000000000000000") == {"ndcgAt10": {"q1": 1.0, "q2": 0.5}}
    assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # The ledger's triggers survived, and the new status value is accepted.
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM qrels")
    store.finish_run("01KZRUNB00000000000000000", status="incomplete", golden_hash="g")
    assert store.get_run("01KZRUNB00000000000000000")["status"] == "incomplete"


def test_views_read_like_tables(database) -> None:
    store = Store.open(database)
    run_id = new_run(store)
    store.record_score(run_id, {**SCORE, "error_class": "hallucination", "error_evidence": "claim X unsupported"})
    [row] = list(store.db.query("SELECT item_id, error_class, ndcgAt10, recallAtK, faithfulness FROM item_results"))
    assert row == {"item_id": "q1", "error_class": "hallucination", "ndcgAt10": 1.0, "recallAtK": 1.0, "faithfulness": None}
    assert list(store.db.query("SELECT error_class, n FROM run_error_classes")) == [{"error_class": "hallucination", "n": 1}]
    assert list(store.db.query("SELECT metric, mean, n FROM run_metrics ORDER BY metric")) == [
        {"metric": "ndcgAt10", "mean": 1.0, "n": 1}, {"metric": "recallAtK", "mean": 1.0, "n": 1}]
