"""A pytest process killed mid-run: the file stays sound, earlier runs stay intact, the run is marked interrupted."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers import write_golden, writers_in

from pytest_crucible.store import Store

CONFTEST = """
import os, time
import pytest

CALLS = [0]

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        if os.environ.get("SLOW") == "1":
            with open("progress.txt", "a") as fh:
                fh.write(item.id + "\\n")
            CALLS[0] += 1
            # Past the 120 items the test waits for, crawl: the signal must land mid-run however
            # long a loaded machine takes to notice them.
            time.sleep(0.05 if CALLS[0] <= 120 else 1.0)
        return {"answer": None, "retrieved": [{"chunk_id": item.id + "#1", "doc_id": item.id}]}
    return pipeline
"""


def start_slow_run(command: list[str], cwd, stdout) -> subprocess.Popen:
    """Start a slowed-down run (SLOW=1) and return once 120 items have gone through its pipeline."""
    # Ctrl-C must reach the child as it reaches a terminal's pytest: a job started in the background
    # (`cmd &`, nohup) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    process = subprocess.Popen(command, cwd=cwd, env={**os.environ, "SLOW": "1"}, stdout=stdout, stderr=subprocess.STDOUT,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    progress = cwd / "progress.txt"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not progress.exists() or len(progress.read_text().split()) < 120):
        time.sleep(0.02)
    return process


@pytest.mark.slow
@pytest.mark.parametrize("writes", ["never", "always"])
def test_sigkill_mid_run(pytester: pytest.Pytester, writes: str) -> None:
    items = [{"id": f"k-{i:03d}", "question": "q", "citations": [{"docId": f"k-{i:03d}"}]} for i in range(300)]
    write_golden(pytester.path / "golden_kill.jsonl", items)
    pytester.makeconftest(CONFTEST)
    pytester.makeini(f"[pytest]\ncrucible_mode = component\ncrucible_background_writes = {writes}\n")
    db = pytester.path / ".crucible" / "crucible.db"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    assert subprocess.run(command, cwd=pytester.path, capture_output=True, timeout=300).returncode == 0
    conn = sqlite3.connect(db)
    before = conn.execute("SELECT id, status, n_items FROM runs").fetchall()
    before_metrics = conn.execute("SELECT item_id, metric, value FROM item_metrics ORDER BY item_id, metric").fetchall()
    conn.close()
    assert before[0][1:] == ("complete", 300)

    process = start_slow_run(command, pytester.path, stdout=subprocess.DEVNULL)
    progress = pytester.path / "progress.txt"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert len(progress.read_text().split()) < 300  # killed in the middle
    # A writing process writes what it received, then stops on its own: the session's end of its input closed.
    deadline = time.monotonic() + 60
    while writers_in(pytester.path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writers_in(pytester.path) == []

    store = Store.open(db)  # detects the dead run
    conn = store.db.conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = conn.execute("SELECT id, status, n_items FROM runs ORDER BY rowid").fetchall()
    assert runs[0] == before[0]  # the earlier run is unchanged
    assert conn.execute("SELECT item_id, metric, value FROM item_metrics WHERE run_id = ? ORDER BY item_id, metric",
                        [before[0][0]]).fetchall() == before_metrics
    killed_id, killed_status, _ = runs[1]
    assert killed_status == "interrupted"
    kept = conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", [killed_id]).fetchone()[0]
    assert 50 <= kept < 300  # finished items were kept, up to the last unwritten batch
    store.close()


# -- Ctrl-C -----------------------------------------------------------------------------------------
CTRL_C_CONFTEST = """
import os, time
import pytest

CALLS = [0]

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        if item.id == os.environ.get("INTERRUPT_AT"):
            raise KeyboardInterrupt  # what Ctrl-C raises inside whatever is running
        if os.environ.get("SLOW") == "1":
            with open("progress.txt", "a") as fh:
                fh.write(item.id + "\\n")
            CALLS[0] += 1
            time.sleep(0.02 if CALLS[0] <= 120 else 1.0)  # past the 120 the test waits for, crawl (see CONFTEST)
        return {"answer": None, "retrieved": [{"chunk_id": item.id + "#1", "doc_id": item.id}, {"chunk_id": "x#1", "doc_id": "x"}]}
    return pipeline
"""


@pytest.fixture
def ctrl_c_project(pytester: pytest.Pytester) -> pytest.Pytester:
    items = [{"id": f"k-{i:03d}", "question": "q", "citations": [{"docId": f"k-{i:03d}"}]} for i in range(200)]
    write_golden(pytester.path / "golden_ctrl_c.jsonl", items)
    pytester.makeconftest(CTRL_C_CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\n")
    return pytester


def _runs(db) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT id, status, n_items FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()


def _kept(db, run_id: str) -> tuple[list[str], int]:
    conn = sqlite3.connect(db)
    try:
        items = [row[0] for row in conn.execute("SELECT item_id FROM results WHERE run_id = ? ORDER BY item_id", [run_id])]
        metrics = conn.execute("SELECT COUNT(DISTINCT item_id) FROM item_metrics WHERE run_id = ? AND metric = 'ndcgAt10'",
                               [run_id]).fetchone()[0]
        return items, metrics
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize(("concurrency", "writes"), [("1", "never"), ("4", "never"), ("1", "always")])
def test_keyboard_interrupt_keeps_every_finished_item_and_marks_the_run_interrupted(ctrl_c_project: pytest.Pytester,
                                                                                    monkeypatch, concurrency: str, writes: str) -> None:
    # Item 131 of 200 raises KeyboardInterrupt: past two full write batches (50 items), mid-way through a third.
    monkeypatch.setenv("INTERRUPT_AT", "k-130")
    result = ctrl_c_project.runpytest_subprocess(f"--crucible-concurrency={concurrency}", "-p", "no:cacheprovider",
                                                 "-o", f"crucible_background_writes={writes}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])
    db = ctrl_c_project.path / ".crucible" / "crucible.db"
    [(run_id, status, n_items)] = _runs(db)
    assert status == "interrupted"
    items, with_metrics = _kept(db, run_id)
    # Every item that finished before Ctrl-C is kept, with its metrics; nothing after it ran.
    assert items == [f"k-{i:03d}" for i in range(130)] and with_metrics == 130 and n_items == 130


@pytest.mark.slow
@pytest.mark.parametrize("writes", ["never", "always"])
def test_sigint_mid_run_exits_2_and_keeps_what_finished(ctrl_c_project: pytest.Pytester, writes: str) -> None:
    db = ctrl_c_project.path / ".crucible" / "crucible.db"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", f"crucible_background_writes={writes}"]
    assert subprocess.run(command, cwd=ctrl_c_project.path, capture_output=True, timeout=300).returncode == 0
    [earlier] = _runs(db)

    process = start_slow_run(command, ctrl_c_project.path, stdout=subprocess.PIPE)
    progress = ctrl_c_project.path / "progress.txt"
    process.send_signal(signal.SIGINT)  # Ctrl-C
    output, _ = process.communicate(timeout=120)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output.decode()[-2000:]
    assert writers_in(ctrl_c_project.path) == []  # the session stopped its writing process before it exited
    assert b"KeyboardInterrupt" in output
    started = progress.read_text().split()
    assert len(started) < 200

    runs = _runs(db)
    assert runs[0] == earlier and len(runs) == 2  # the earlier run is untouched
    run_id, status, n_items = runs[1]
    assert status == "interrupted"
    items, with_metrics = _kept(db, run_id)
    # The item Ctrl-C landed in did not finish; every item before it did and is kept.
    assert items == sorted(started)[: len(items)] and len(started) - 1 <= len(items) <= len(started)
    assert with_metrics == len(items) == n_items


def test_ctrl_c_in_the_middle_of_a_write_loses_no_finished_item(tmp_path, monkeypatch) -> None:
    from pytest_crucible.session import CrucibleSession, Settings
    from pytest_crucible.store.recorder import FLUSH_ITEMS

    settings = Settings(params={}, resolved={"retrievalLimit": 10}, config_hash="h" * 64, config_path=None,
                        db_path=tmp_path / "c.db", mode="component", outcome_mode="record")
    session = CrucibleSession(settings=settings)
    real_write = type(session.store).record_scores
    calls = []

    def interrupted_write(store, run_id, scores):  # the write starts, then Ctrl-C arrives inside its transaction
        calls.append(len(scores))
        with store.db.conn:
            store._write_items(run_id, results=[{**scores[0], "recorded_at": "now"}])  # a first row written
            if len(calls) == 1:
                raise KeyboardInterrupt
        real_write(store, run_id, scores)

    monkeypatch.setattr(type(session.store), "record_scores", interrupted_write)
    scores = [{"item_id": f"q{i}", "question": "Q?", "item": {"id": f"q{i}", "question": "Q?"}, "outcome": "passed",
               "metrics": {"ndcgAt10": 1.0}} for i in range(FLUSH_ITEMS)]
    with pytest.raises(KeyboardInterrupt):
        for score in scores:
            session.record(score)  # the 50th triggers the write
    session.end(interrupted=True)  # what pytest_sessionfinish does after Ctrl-C
    assert calls == [FLUSH_ITEMS, FLUSH_ITEMS]
    rows = session.store.db.conn.execute("SELECT COUNT(*), COUNT(DISTINCT item_id) FROM results").fetchone()
    assert rows == (FLUSH_ITEMS, FLUSH_ITEMS) and session.status == "interrupted"
    session.close()
