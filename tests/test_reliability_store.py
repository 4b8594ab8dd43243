"""The store under concurrent writers (no lost rows, never "database is locked") and its
append-only ledgers (UPDATE and DELETE refused by SQLite itself, whichever door is used)."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import write_golden

from pytest_crucible.cli import main as crucible
from pytest_crucible.store import SCHEMA_VERSION, Store

N_ITEMS = 150

CONFTEST = """
import time
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        time.sleep(0.01)  # spread each session's writes over its run, so they interleave
        n = int(item.id.split("-")[1])
        return {"answer": None, "retrieved": [{"chunk_id": f"d{n}#1", "doc_id": f"d{n}"}, {"chunk_id": "x#1", "doc_id": "x"}]}
    return pipeline
"""


def _quiet_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = crucible(argv)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.slow
def test_concurrent_sessions_and_xdist_write_one_new_database_without_losing_a_row(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    items = [{"id": f"c-{i:03d}", "question": f"question {i}", "citations": [{"docId": f"d{i}"}]} for i in range(N_ITEMS)]
    write_golden(pytester.path / "golden_set.jsonl", items)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\n")
    db = pytester.path / "shared" / "crucible.db"  # does not exist yet: the sessions race to create it
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--crucible-db={db}"]
    commands = [[*base, "-p", "no:xdist"], [*base, "-n", "2"], [*base, "-p", "no:xdist", "--crucible-concurrency=4"]]
    processes = [subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for command in commands]
    # Read the file the whole time it is being written, the way `crucible runs` does.
    reads, failed_reads = 0, []
    while any(process.poll() is None for process in processes):
        if db.exists():
            code, output = _quiet_cli(["runs", "--json", "--db", str(db)])
            reads += 1
            if code != 0:
                failed_reads.append(output)
        time.sleep(0.05)
    outputs = [process.communicate(timeout=300)[0].decode() for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
        assert "database is locked" not in output and "could not record" not in output
    assert failed_reads == [], failed_reads[:2]

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    runs = conn.execute("SELECT id, status, n_items FROM runs").fetchall()
    assert sorted(status for _, status, _ in runs) == ["complete"] * 3
    for run_id, _, n_items in runs:
        results = conn.execute("SELECT COUNT(*), COUNT(DISTINCT item_id) FROM results WHERE run_id = ?", [run_id]).fetchone()
        metrics = conn.execute("SELECT COUNT(*) FROM item_metrics WHERE run_id = ? AND metric = 'ndcgAt10'", [run_id]).fetchone()[0]
        assert results == (N_ITEMS, N_ITEMS) and metrics == N_ITEMS and n_items == N_ITEMS  # no lost rows
    # The provenance judgments were appended once, however many sessions wrote them.
    assert conn.execute("SELECT COUNT(*) FROM qrels").fetchone()[0] == N_ITEMS
    conn.close()
    print(f"3 sessions x {N_ITEMS} items, {len(runs) * N_ITEMS} result rows, 0 lost; {reads} concurrent `crucible runs` reads, 0 failed")


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    # Before the fix, the second opener re-ran the migrations ("table runs already exists").
    db = tmp_path / "new.db"
    code = f"from pytest_crucible.store import Store\nStore.open({str(db)!r}).close()\n"
    processes = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) for _ in range(4)]
    errors = [process.communicate(timeout=120)[1].decode() for process in processes]
    assert [process.returncode for process in processes] == [0] * 4, errors
    store = Store.open(db)
    assert store.db.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


# -- append-only ledgers ----------------------------------------------------------------------------
def _make_db(tmp_path: Path) -> tuple[Path, str, str]:
    """A run whose one item failed (so the review queue has a row), a human judgment, a promoted correction."""
    from pytest_crucible.golden_set.promote import promote

    db = tmp_path / "c.db"
    store = Store.open(db)
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={}, mode="system", outcome_mode="record")
    store.record_score(run_id, {"item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?",
                                "citations": [{"docId": "d1", "chunkId": "c1"}]}, "outcome": "failed",
                                "retrieved": [{"chunk_id": "c1", "doc_id": "d1"}], "result_id": "R1",
                                "error_class": "hallucination", "error_evidence": "claim X unsupported", "metrics": {"ndcgAt10": 1.0}})
    store.finish_run(run_id, status="complete", golden_hash=None)
    store.append_qrels([{"query_id": "q1", "chunk_id": "c1", "doc_id": "d1", "grade": 2, "source": "human", "created_by": "ann"},
                        {"query_id": "q1", "chunk_id": "c2", "doc_id": "d1", "grade": 1, "source": "llm", "judge_model": "m"}])
    promote(store, {"runId": run_id, "resultId": "R1", "question": "Q?", "correctedAssertions": ["A"],
                    "errorClass": "hallucination", "correctedBy": "dana"})
    store.close()
    return db, run_id, "R1"


def _snapshot(db: Path) -> tuple[list, list]:
    """Every row of both ledgers, every column."""
    conn = sqlite3.connect(db)
    try:
        return (conn.execute("SELECT * FROM qrels ORDER BY id").fetchall(),
                conn.execute("SELECT * FROM eval_feedback ORDER BY id").fetchall())
    finally:
        conn.close()


LEDGER_WRITES = [
    ("UPDATE qrels SET grade = 0", "qrels is an append-only ledger: UPDATE is refused"),
    ("UPDATE qrels SET note = 'x' WHERE source = 'provenance'", "qrels is an append-only ledger: UPDATE is refused"),
    ("DELETE FROM qrels", "qrels is an append-only ledger: DELETE is refused"),
    ("DELETE FROM qrels WHERE source = 'human'", "qrels is an append-only ledger: DELETE is refused"),
    ("UPDATE eval_feedback SET error_class = 'correct'", "eval_feedback is an append-only queue: UPDATE is refused"),
    ("DELETE FROM eval_feedback", "eval_feedback is an append-only queue: DELETE is refused"),
]


@pytest.mark.parametrize("sql, refusal", LEDGER_WRITES)
def test_sqlite_refuses_rewriting_the_ledgers_whoever_connects(tmp_path: Path, sql: str, refusal: str) -> None:
    db, _, _ = _make_db(tmp_path)
    before = _snapshot(db)
    assert before[0] and before[1]
    # Any SQLite client (here the sqlite3 module)...
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError, match=refusal):
        conn.execute(sql)
    conn.rollback()
    conn.close()
    # ...and the Python API's own connection.
    store = Store.open(db)
    with pytest.raises(sqlite3.DatabaseError, match=refusal), store.db.conn:
        store.db.conn.execute(sql)
    store.close()
    assert _snapshot(db) == before  # nothing changed


def test_the_ledgers_only_grow_through_the_cli_and_the_api(tmp_path: Path) -> None:
    db, run_id, result_id = _make_db(tmp_path)
    qrels_before, feedback_before = _snapshot(db)
    # A human override appends beside the judgment it disputes; it rewrites nothing.
    code, output = _quiet_cli(["qrels", "override", "q1", "c1", "0", "--by", "ann", "--note", "wrong", "--db", str(db)])
    assert code == 0, output
    assert "effective grade 2 (human) -> 0 (human)" in output
    # An import of the same human judgment again appends again (human judgments are a history).
    (tmp_path / "again.jsonl").write_text('{"queryId": "q1", "chunkId": "c1", "grade": 0, "by": "ann"}\n')
    assert _quiet_cli(["qrels", "import", str(tmp_path / "again.jsonl"), "--db", str(db)])[0] == 0
    # A second promote appends a second feedback row.
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"runId": run_id, "resultId": result_id, "question": "Q?", "correctedAssertions": ["B"],
                                "errorClass": "hallucination", "correctedBy": "bob"}))
    assert _quiet_cli(["promote", "--json", str(body), "--db", str(db)])[0] == 0
    # Re-recording an item (a re-run of the same run id) appends nothing it already has and deletes nothing.
    store = Store.open(db)
    store.record_score(run_id, {"item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?",
                                "citations": [{"docId": "d1", "chunkId": "c1"}]}, "outcome": "failed", "metrics": {}})
    store.close()

    qrels_after, feedback_after = _snapshot(db)
    assert qrels_after[: len(qrels_before)] == qrels_before  # every old row, every column, unchanged
    conn = sqlite3.connect(db)
    added = conn.execute("SELECT query_id, chunk_id, grade, source, created_by FROM qrels WHERE id > ? ORDER BY id",
                         [qrels_before[-1][0]]).fetchall()
    conn.close()
    assert added == [("q1", "c1", 0, "human", "ann"), ("q1", "c1", 0, "human", "ann")]
    assert feedback_after[: len(feedback_before)] == feedback_before
    assert len(feedback_after) == len(feedback_before) + 1


@pytest.mark.parametrize("sql", [
    "INSERT OR REPLACE INTO qrels SELECT * FROM qrels",  # same ids
    "INSERT OR REPLACE INTO qrels (query_id, chunk_id, doc_id, grade, source, judge_model, prompt_version, run_id, created_at)"
    " SELECT query_id, chunk_id, doc_id, 0, source, judge_model, prompt_version, run_id, created_at FROM qrels WHERE source = 'llm'",
    "REPLACE INTO eval_feedback SELECT * FROM eval_feedback",
])
def test_insert_or_replace_cannot_rewrite_a_ledger_row(tmp_path: Path, sql: str) -> None:
    # A replace deletes the conflicting row without firing DELETE triggers: the insert trigger drops it instead.
    db, _, _ = _make_db(tmp_path)
    before = _snapshot(db)
    assert any(row for row in before[0])
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql)
    conn.close()
    assert _snapshot(db) == before


@pytest.mark.slow
def test_processes_opening_one_new_file_at_once_all_migrate_it(tmp_path) -> None:
    """Each migration step reads the schema version again under the write lock, so a step another
    process did meanwhile is skipped, never run twice (before: "duplicate column name" in a third of
    the processes)."""
    import sqlite3
    import subprocess
    import sys

    from pytest_crucible.store.schema import SCHEMA_VERSION

    for trial in range(2):
        db = tmp_path / f"new-{trial}.db"
        code = "import sys; from pytest_crucible.store import Store; Store.open(sys.argv[1]).close()"
        processes = [subprocess.Popen([sys.executable, "-c", code, str(db)], stderr=subprocess.PIPE, text=True)
                     for _ in range(12)]
        errors = [process.communicate(timeout=120)[1] for process in processes]
        assert [process.returncode for process in processes] == [0] * 12, [e for e in errors if e][:2]
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()
