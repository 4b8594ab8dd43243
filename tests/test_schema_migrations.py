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
FIXTURES = {"v1": 1, "v2": 2, "v3": 3, "v4-42be2d4": 4, "v4": 4, "v5": 5, "v6": 6, "v7": 7, "v9": 9, "v10": 10, "v11": 11, "v12": 12, "v13": 13, "v14": 14, "v15": 15, "v16": 16, "v17": 17, "v18": 18}

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


# Since schema 19 a result's ranking is stored once, in contents (store/contents.py): read back with its text.
RETRIEVED_SINCE_19 = "(SELECT body FROM contents WHERE hash = retrieved_hash) AS retrieved"
#: Tables of an older file that are views of the same name and columns since (golden_items: schema 19).
NOW_VIEWS = {"golden_items"}


def snapshot(path: Path, tables: list[str] | None = None) -> dict:
    """Row counts of ``tables`` (default: the file's tables) and the CONTENT rows, as plain sqlite3 reads them."""
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        if tables is None:
            tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        content = {table: sql.replace(" retrieved,", f" {RETRIEVED_SINCE_19},") if version >= 19 else sql for table, sql in CONTENT.items()}
        return {
            "version": version,
            "tables": tables,
            "counts": {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables},
            "content": {table: conn.execute(sql).fetchall() for table, sql in content.items() if table in names},
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
    after = snapshot(path, before["tables"])
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
    exported = store.export_run(run_id)
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # back to what schema 14 had
        conn.execute("DROP VIEW golden_items")  # schema 19: values stored once, in contents
        conn.execute("CREATE TABLE golden_items (run_id TEXT NOT NULL REFERENCES runs(id), item_id TEXT NOT NULL, source TEXT, "
                     "line BIGINT, item TEXT NOT NULL, PRIMARY KEY (run_id, item_id))")
        conn.execute("INSERT INTO golden_items SELECT g.run_id, g.item_id, g.source, g.line, c.body FROM golden_item_refs g "
                     "JOIN contents c ON c.hash = g.item_hash")
        conn.execute("ALTER TABLE results RENAME COLUMN retrieved_hash TO retrieved")
        conn.execute("UPDATE results SET retrieved = (SELECT body FROM contents WHERE hash = retrieved)")
        conn.execute("DROP TABLE golden_item_refs")
        conn.execute("DROP TABLE contents")
        conn.execute("DROP FUNCTION content_hash")
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
        migrated = store.export_run(run_id)
        assert migrated["goldenItems"] == exported["goldenItems"] and migrated["results"] == [
            {**row, "tool_calls": None} for row in exported["results"]]  # the golden items and rankings, stored once, read back
        assert store.db.conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 2  # the item's text and its ranking's
    finally:
        store.close()


def test_a_file_of_schema_18_reads_and_exports_after_the_migration_exactly_as_before(tmp_path: Path) -> None:
    """Schema 19 stores golden items' texts and rankings once, in contents: every run of a file the code of schema 18
    wrote exports as that code exported it, byte for byte (tests/data/crucible-schema-v18-export.json, written by that
    code from that file), the stored texts come back unchanged, and each text is stored once for both runs."""
    path = tmp_path / "v18.db"
    shutil.copy(DATA / "crucible-schema-v18.db", path)
    conn = sqlite3.connect(path)
    texts = conn.execute("SELECT g.run_id, g.item_id, g.item, r.retrieved FROM golden_items g JOIN results r USING (run_id, item_id) "
                         "ORDER BY 1, 2").fetchall()
    conn.close()
    pinned = (DATA / "crucible-schema-v18-export.json").read_text(encoding="utf-8")
    store = Store.open(path)  # migrates
    try:
        run_ids = [run["id"] for run in sorted(store.list_runs(), key=lambda run: run["id"])]
        assert json.dumps({run_id: store.export_run(run_id) for run_id in run_ids}, indent=1, sort_keys=True) + "\n" == pinned
        conn = store.db.conn
        assert conn.execute("SELECT g.run_id, g.item_id, g.item, c.body FROM golden_items g JOIN results r USING (run_id, item_id) "
                            "JOIN contents c ON c.hash = r.retrieved_hash ORDER BY 1, 2").fetchall() == texts
        distinct = {text for _, _, item, retrieved in texts for text in (item, retrieved)}
        assert conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == len(distinct) < 2 * len(texts)
        assert [row["retrieved"] for row in store.results(run_ids[0], decoded=True)] == [
            json.loads(retrieved) for run_id, _, _, retrieved in texts if run_id == run_ids[0]]
    finally:
        store.close()
    documents = json.loads(pinned)
    for run_id in run_ids:  # and `crucible export` writes the same text it wrote
        out = tmp_path / f"{run_id}.json"
        assert crucible(["export", run_id, "--db", str(path), "-o", str(out)]) == 0
        assert out.read_text(encoding="utf-8") == json.dumps(documents[run_id], indent=1, sort_keys=True) + "\n"


def test_a_file_of_schema_18_shows_every_item_after_the_migration_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`crucible show --item` (text and --json) of every item, and the TREC and CSV exports of every run, print after
    the migration to schema 19 what the code of schema 18 printed of the same file
    (tests/data/crucible-schema-v18-readers.json, written by that code; the command's arguments, then its output)."""
    path = tmp_path / "v18.db"
    shutil.copy(DATA / "crucible-schema-v18.db", path)
    Store.open(path).close()  # migrates
    pinned = json.loads((DATA / "crucible-schema-v18-readers.json").read_text(encoding="utf-8"))
    assert len(pinned) == 14 and any("--json" in command for command in pinned)
    capsys.readouterr()
    for command, printed in pinned.items():
        assert crucible([*command.split(" "), "--db", str(path)]) == 0, command
        assert capsys.readouterr().out == printed, command


def test_a_migrated_file_copied_to_postgres_and_back_exports_as_before(postgres_server, tmp_path: Path) -> None:
    """`crucible copy` carries the values a run refers to (contents): the runs of a schema 18 file, migrated, copied
    into PostgreSQL and from there into a new file, export in both exactly as the code of schema 18 exported them."""
    path = tmp_path / "v18.db"
    shutil.copy(DATA / "crucible-schema-v18.db", path)
    url = postgres_server.create_database()
    back = tmp_path / "back.db"
    assert crucible(["copy", str(path), url]) == 0
    assert crucible(["copy", url, str(back)]) == 0
    pinned = (DATA / "crucible-schema-v18-export.json").read_text(encoding="utf-8")
    for database in (url, back):
        store = Store.open(database)
        try:
            run_ids = sorted(run["id"] for run in store.list_runs())
            assert json.dumps({run_id: store.export_run(run_id) for run_id in run_ids}, indent=1, sort_keys=True) + "\n" == pinned
            assert store.db.conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 6  # 3 golden items, 3 rankings
        finally:
            store.close()


@pytest.mark.parametrize("name", ["v15", "v16", "v17", "v18"])
def test_every_run_of_an_older_file_has_an_html_report_after_the_migration(tmp_path: Path, name: str) -> None:
    """A run stored before a field existed (an assertion without its weight) is reported, the field shown as unknown."""
    path = tmp_path / f"{name}.db"
    shutil.copy(DATA / f"crucible-schema-{name}.db", path)
    store = Store.open(path)  # migrates
    try:
        run_ids = [run["id"] for run in store.list_runs()]
    finally:
        store.close()
    assert run_ids
    for run_id in run_ids:
        out = tmp_path / f"{run_id}.html"
        assert crucible(["report", run_id, "-o", str(out), "--db", str(path)]) == 0, run_id
        assert "<html" in out.read_text(encoding="utf-8")
