"""Every released schema version migrates to the current one without losing a row.

tests/data/crucible-schema-vN.db were each written by the code of schema N through its own
Store API (tests/data/make_schema_db.py; v1 by make_schema_v1_db.py). Each is read with
plain sqlite3, opened (and so migrated) by the current code, and read again.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from pytest_crucible.cli import main as crucible
from pytest_crucible.store import SCHEMA_VERSION, Store

DATA = Path(__file__).parent / "data"
FIXTURES = {"v1": 1, "v2": 2, "v3": 3, "v4-42be2d4": 4, "v4": 4, "v5": 5, "v6": 6, "v7": 7, "v9": 9, "v10": 10, "v11": 11, "v12": 12, "v13": 13, "v14": 14, "v15": 15, "v16": 16, "v17": 17}

# Compared before and after: every row of these, in columns every version has.
CONTENT = {
    "runs": "SELECT id, started_at, finished_at, status, mode, config_hash, params, resolved, n_items, golden_hash FROM runs ORDER BY id",
    "results": "SELECT run_id, item_id, question, answer, retrieved, citations, outcome, confidence, abstained, latency_ms "
               "FROM results ORDER BY run_id, item_id",
    "item_metrics": "SELECT run_id, item_id, metric, value FROM item_metrics ORDER BY run_id, item_id, metric",
    "golden_items": "SELECT run_id, item_id, source, line, item FROM golden_items ORDER BY run_id, item_id",
    "qrels": "SELECT id, query_id, chunk_id, doc_id, grade, source, judge_model, created_by, note, created_at FROM qrels ORDER BY id",
    "judge_cache": "SELECT * FROM judge_cache ORDER BY key",
    "golden_concepts": "SELECT * FROM golden_concepts ORDER BY 1, 2, 3",
    "eval_feedback": "SELECT id, run_id, result_id, item_id, error_class, evidence, corrected_by, note, golden_item_id, created_at "
                     "FROM eval_feedback ORDER BY id",
    "golden_drafts": "SELECT id, status, item, feedback_id, created_by, created_at FROM golden_drafts ORDER BY id",
}


def snapshot(path: Path) -> dict:
    conn = sqlite3.connect(path)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            "version": conn.execute("PRAGMA user_version").fetchone()[0],
            "counts": {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables},
            "content": {table: conn.execute(sql).fetchall() for table, sql in CONTENT.items() if table in tables},
        }
    finally:
        conn.close()


@pytest.fixture(params=list(FIXTURES))
def migrated(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path, dict]:
    name = request.param
    path = tmp_path / f"{name}.db"
    shutil.copy(DATA / f"crucible-schema-{name}.db", path)
    before = snapshot(path)
    assert before["version"] == FIXTURES[name]
    Store.open(path).close()  # migrates
    return name, path, before


def test_every_row_survives_the_migration(migrated: tuple[str, Path, dict]) -> None:
    name, path, before = migrated
    after = snapshot(path)
    assert after["version"] == SCHEMA_VERSION
    assert before["counts"]["results"] >= 4 and before["counts"]["item_metrics"] >= 4 and before["counts"]["qrels"] >= 1
    for table, count in before["counts"].items():
        assert after["counts"][table] == count, (name, table)
    for table, rows in before["content"].items():
        assert after["content"][table] == rows, (name, table)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


def test_the_views_read_the_migrated_rows(migrated: tuple[str, Path, dict]) -> None:
    _, path, _ = migrated
    conn = sqlite3.connect(path)
    by_hand = conn.execute("SELECT run_id, metric, AVG(value), COUNT(*) FROM item_metrics GROUP BY run_id, metric ORDER BY 1, 2").fetchall()
    assert conn.execute("SELECT run_id, metric, mean, n FROM run_metrics ORDER BY 1, 2").fetchall() == by_hand
    ndcg = {(run, item): value for run, item, value in conn.execute(
        "SELECT run_id, item_id, value FROM item_metrics WHERE metric = 'ndcgAt10'")}
    rows = conn.execute("SELECT run_id, item_id, ndcgAt10, outcome FROM item_results").fetchall()
    assert len(rows) == conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert {(run, item): value for run, item, value, _ in rows} == {key: ndcg.get(key) for key in ((r, i) for r, i, _, _ in rows)}
    assert conn.execute("SELECT COALESCE(SUM(n), 0) FROM run_error_classes").fetchone()[0] == \
        conn.execute("SELECT COUNT(*) FROM results WHERE error_class IS NOT NULL").fetchone()[0]
    conn.close()


def test_runs_before_schema_14_were_measured_at_their_retrieval_limit(migrated: tuple[str, Path, dict]) -> None:
    """Before ini crucible_k, the cutoff of the metrics at K was the pipeline's retrievalLimit: the migration
    records it as each old run's K, so a comparison with a run measured at crucible_k sees the ruler."""
    name, path, before = migrated
    conn = sqlite3.connect(path)
    recorded = dict(conn.execute("SELECT id, eval_k FROM runs").fetchall())
    conn.close()
    # (a file of schema 14 or later recorded the K it was measured at: the default, 10, in these files)
    expected = {run[0]: json.loads(run[7]).get("retrievalLimit", 10) if FIXTURES[name] < 14 else 10 for run in before["content"]["runs"]}
    assert recorded == expected, name
    store = Store.open(path)
    from pytest_crucible.verdict.runs import load_run

    assert {run_id: load_run(store, run_id).k for run_id in expected} == expected
    store.close()


def test_the_ledgers_stay_append_only(migrated: tuple[str, Path, dict]) -> None:
    _, path, _ = migrated
    store = Store.open(path)
    conn = store.db.conn
    run_id = conn.execute("SELECT id FROM runs ORDER BY id LIMIT 1").fetchone()[0]
    with conn:  # appending still works, on both ledgers
        conn.execute("INSERT INTO qrels (query_id, chunk_id, grade, source, created_by, created_at) VALUES ('q1', 'c9', 1, 'human', 'ann', 'now')")
        conn.execute("INSERT INTO eval_feedback (id, run_id, error_class, created_at) VALUES ('fb-new', ?, 'incomplete', 'now')", [run_id])
    before = snapshot(path)["content"]
    for sql in ("UPDATE qrels SET grade = 0", "DELETE FROM qrels", "UPDATE eval_feedback SET error_class = 'correct'",
                "DELETE FROM eval_feedback"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"), conn:
            conn.execute(sql)
    store.close()
    after = snapshot(path)["content"]
    assert (after["qrels"], after["eval_feedback"]) == (before["qrels"], before["eval_feedback"])


def test_the_current_code_writes_and_compares_a_migrated_run(migrated: tuple[str, Path, dict], capsys: pytest.CaptureFixture[str]) -> None:
    _name, path, before = migrated
    old_run = before["content"]["runs"][0][0]
    # Compare an old run with itself: every metric paired, nothing changed.
    # (a fixture holds a handful of items: --min-pairs 2 lets the gate judge them instead of refusing)
    assert crucible(["compare", old_run, old_run, "--json", "--db", str(path), "--min-pairs", "2"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["pairedItems"] == before["counts"]["results"] - sum(1 for row in before["content"]["results"] if row[0] != old_run)
    assert "ndcgAt10" in document["metrics"] and all(m["delta"] in (0, 0.0, None) for m in document["metrics"].values())
    assert crucible(["compare", old_run, old_run, "--db", str(path), "--min-pairs", "2"]) == 0
    assert "not significant" in capsys.readouterr().out
    # Every column the current code writes exists (a v4 file of the first v4 build lacked crag_grade).
    store = Store.open(path)
    run_id = store.start_run(config_hash="n" * 64, params={}, resolved={"retrievalLimit": 5}, mode="system", outcome_mode="record",
                             workspace="w", labels={"model": "m"}, kinds=["retrieval"])
    store.record_score(run_id, {"item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?"}, "outcome": "passed",
                                "metrics": {"ndcgAt10": 0.5}, "crag_grade": "perfect", "error_class": "correct",
                                "blocked_layer": None, "verdicts": {"x": 1}, "pool": {"judged": 1}, "assertions": [{"text": "a"}]})
    store.finish_run(run_id, status="complete", golden_hash=None)
    assert store.results(run_id)[0]["crag_grade"] == "perfect"
    exported = store.export_run(old_run)  # an old run exports and re-imports through the current format
    store.close()
    fresh = Store.open(path.with_name("fresh.db"))
    assert fresh.import_run(exported) == (old_run, True)
    assert fresh.item_metrics(old_run) == Store.open(path).item_metrics(old_run)
    fresh.close()


def test_drafts_promoted_before_schema_10_take_their_runs_workspace(tmp_path: Path) -> None:
    """Schema 10 files drafts by workspace (`crucible golden export` reads one workspace's): a draft
    promoted before it belongs to the workspace of the run it came from. Its feedback row gains an
    empty api_key_id: it was not written over HTTP by a key the file remembers."""
    from pytest_crucible.golden_set.promote import draft_items

    path = tmp_path / "v9.db"
    shutil.copy(DATA / "crucible-schema-v9.db", path)
    conn = sqlite3.connect(path)
    with conn:  # the fixture's runs are all in 'default'; move the promoted one's so the backfill shows
        conn.execute("UPDATE runs SET workspace = 'alpha' WHERE id IN (SELECT run_id FROM eval_feedback WHERE golden_item_id IS NOT NULL)")
    [(draft_id,)] = conn.execute("SELECT id FROM golden_drafts").fetchall()
    conn.close()
    store = Store.open(path)
    assert store.db.conn.execute("SELECT id, workspace FROM golden_drafts").fetchall() == [(draft_id, "alpha")]
    assert store.db.conn.execute("SELECT COUNT(*) FROM eval_feedback WHERE api_key_id IS NOT NULL").fetchone() == (0,)
    assert [item["id"] for item in draft_items(store, workspace="alpha")] == [draft_id]
    assert draft_items(store, workspace="default") == []
    store.close()


def test_a_migrated_file_records_selections_and_attempts(tmp_path: Path) -> None:
    """Schema 15: a file of the version before gains the runs' selection and the items' attempts, and its runs stay
    full selections (NULL), so `latest` still finds them."""
    path = tmp_path / "v14.db"
    shutil.copy(DATA / "crucible-schema-v14.db", path)
    store = Store.open(path)
    try:
        complete = [run["id"] for run in store.list_runs() if run["status"] == "complete"]
        assert complete and all(run["selection"] is None for run in store.list_runs())
        assert store.resolve_run("latest") == complete[0]
        assert store.item_attempts(complete[0]) == []
    finally:
        store.close()


def test_a_migrated_file_keeps_tool_calls(tmp_path: Path) -> None:
    """Schema 17: a file of the version before gains the results' tool calls (NULL for its results: no call
    recorded), and a result recorded after the migration keeps its calls."""
    path = tmp_path / "v16.db"
    shutil.copy(DATA / "crucible-schema-v16.db", path)
    store = Store.open(path)
    try:
        run_id = next(run["id"] for run in store.list_runs() if run["status"] == "complete")
        assert all(row["tool_calls"] is None for row in store.results(run_id, decoded=True))
        calls = [{"name": "lookup_order", "arguments": {"order": "NW-1"}}]
        store.record_score(run_id, {"item_id": "tools-1", "question": "Where is order NW-1?", "item": {"id": "tools-1"},
                                    "retrieved": [], "tool_calls": calls, "metrics": {"toolCalls": 1.0}})
        row = next(row for row in store.results(run_id, decoded=True) if row["item_id"] == "tools-1")
        assert row["tool_calls"] == calls
    finally:
        store.close()


def test_a_migrated_file_says_its_runs_answered_live(tmp_path: Path) -> None:
    """Schema 18: the runs of a file of the version before record no history (NULL: live, the only one there was),
    and a run opened after the migration records the one it is answered on."""
    path = tmp_path / "v17.db"
    shutil.copy(DATA / "crucible-schema-v17.db", path)
    store = Store.open(path)
    try:
        assert [run["conversation_history"] for run in store.list_runs()] == [None, None]
        run_id = store.start_run(config_hash="h", params={}, resolved={}, mode="system", outcome_mode="record",
                                 conversation_history="replay")
        assert store.get_run(run_id)["conversation_history"] == "replay"
    finally:
        store.close()


def test_a_postgres_database_of_the_version_before_is_migrated(postgres_server) -> None:
    """A team's PostgreSQL database written by an older version (schema 14) moves to this one on first open: the
    same migrations as a file, translated; its runs are kept and full selections, classed by the first error class
    set, and their results gain the tool calls column."""
    import psycopg
    from test_store_backends import SCORE, new_run

    url = postgres_server.create_database()
    store = Store.open(url)
    run_id = new_run(store)
    store.record_score(run_id, SCORE)
    assert store.finish_run(run_id, status="complete", golden_hash=None) == "complete"
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # back to what schema 14 had
        conn.execute("DROP TABLE item_attempts")
        conn.execute("ALTER TABLE runs DROP COLUMN selection")
        conn.execute("ALTER TABLE runs DROP COLUMN error_classes")
        conn.execute("ALTER TABLE results DROP COLUMN tool_calls")
        conn.execute("ALTER TABLE runs DROP COLUMN conversation_history")
        conn.execute("UPDATE crucible_schema SET version = 14")
    store = Store.open(url)
    try:
        assert store.db.conn.execute("SELECT version FROM crucible_schema").fetchone()[0] == SCHEMA_VERSION
        assert store.get_run(run_id)["selection"] is None and store.resolve_run("latest") == run_id
        assert store.get_run(run_id)["error_classes"] is None  # classed by the first set, as far as anyone can tell
        assert store.item_attempts(run_id) == []
        [row] = store.results(run_id, decoded=True)
        assert row["tool_calls"] is None
        assert store.get_run(run_id)["conversation_history"] is None  # answered live: the only history there was
    finally:
        store.close()
