"""A large run writes its results from a process of its own (ini crucible_background_writes): the same rows,
the same faults, the same exit status as when the session writes them itself."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers import COMPONENT_RECORD, db_rows, write_golden, writers_in

import pytest_crucible.store.recorder
from pytest_crucible.store import Store
from pytest_crucible.store.recorder import usable_cores

# Every batch handed to the writing process is logged (its size) in handed.log, beside the conftest.
CONFTEST = """
import os
import pytest
import pytest_crucible.store.background as background

_send = background.BackgroundWriter.send


def _logged_send(self, run_id, scores):
    _send(self, run_id, scores)
    with open(os.path.join(os.path.dirname(__file__), "handed.log"), "a") as log:
        log.write(f"{len(scores)}\\n")


def pytest_configure(config):
    background.BackgroundWriter.send = _logged_send


def pytest_unconfigure(config):
    background.BackgroundWriter.send = _send


@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        return {"answer": None, "retrieved": [{"chunk_id": f"c-{n % 7}", "doc_id": f"d-{n % 5}", "text": "t" * (n % 9)},
                                              {"chunk_id": f"c-{n}", "doc_id": f"d-{n}"}]}
    return pipeline
"""

# What a run stored, without what differs between two runs by design (ids, times).
STORED = {
    "results": "SELECT item_id, question, (SELECT body FROM contents WHERE hash = retrieved_hash) AS retrieved, citations, outcome, failures, error, error_class, error_evidence, pool "
               "FROM results ORDER BY item_id",
    "golden_items": "SELECT item_id, source, line, item FROM golden_items ORDER BY item_id",
    "item_metrics": "SELECT item_id, metric, value FROM item_metrics ORDER BY item_id, metric",
    "qrels": "SELECT query_id, chunk_id, doc_id, grade, source, judge_model FROM qrels ORDER BY query_id, chunk_id, doc_id",
    "eval_feedback": "SELECT item_id, error_class, evidence FROM eval_feedback ORDER BY item_id",
    "runs": "SELECT status, n_items, n_scored, n_errored FROM runs",
}


@pytest.fixture(autouse=True)
def _batches_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 50 (FLUSH_ITEMS), never cut by the one-second timer: the tests count the batches handed over,
    and a loaded machine can take a second over 49 items. (In-process runs only; a subprocess keeps the timer.)"""
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_SECONDS", 1e9)


def _project(pytester: pytest.Pytester, n_items: int, writes: str | None) -> None:
    items = [{"id": f"b-{i:03d}", "question": f"question {i}?",
              "citations": [{"docId": f"d-{i % 5}", "chunkId": f"c-{i % 7}", "mode": "required" if i % 3 else "acceptable"}]}
             for i in range(n_items)]
    write_golden(pytester.path / "golden_bg.jsonl", items)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\n" + COMPONENT_RECORD + ("" if writes is None else f"\ncrucible_background_writes = {writes}") + "\n")


def _handed(pytester: pytest.Pytester) -> list[int]:
    log = pytester.path / "handed.log"
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def _database_with_trigger(path, action: str) -> None:
    """A new crucible database whose results table runs ``action`` (SQL) before it takes item b-070."""
    path.parent.mkdir(exist_ok=True)
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TRIGGER on_b070 BEFORE INSERT ON results WHEN NEW.item_id = 'b-070' BEGIN {action}; END")
    conn.commit()
    conn.close()


def _refusing_database(path) -> None:
    """A database whose results table refuses item b-070 (as a full disk refuses a batch)."""
    _database_with_trigger(path, "SELECT RAISE(ABORT, 'refused by the test''s trigger')")


def test_written_from_its_own_process_the_run_stores_the_same_rows_and_the_same_faults(pytester: pytest.Pytester) -> None:
    # 120 items: batches of 50; the second holds the refused item, so 50 items are lost either way.
    _project(pytester, 120, None)
    outputs, stored = {}, {}
    for writes in ("never", "always"):
        db = pytester.path / f"{writes}.db"
        _refusing_database(db)
        result = pytester.runpytest(f"--crucible-db={db}", "-o", f"crucible_background_writes={writes}", "-p", "no:randomly")
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.outlines  # a lost batch fails the session
        outputs[writes] = [line.replace(str(db), "DB") for line in result.outlines if line.startswith(("FAULT", "WARNING"))]
        stored[writes] = {table: db_rows(db, sql) for table, sql in STORED.items()}
        # The process could not write the second batch: it gave it back (the third, handed over before its
        # answer came or written by the session, depends on timing).
        assert _handed(pytester)[:2] == ([] if writes == "never" else [50, 50])
    assert outputs["always"] == outputs["never"]
    assert outputs["always"][0] == ("FAULT could not record 50 item(s) ('b-050', 'b-051', 'b-052', 'b-053', 'b-054'...) in DB: "
                                    "refused by the test's trigger")
    assert stored["always"] == stored["never"]
    assert stored["always"]["runs"] == [("incomplete", 120, 70, 0)]
    assert len(stored["always"]["results"]) == 70 and len(stored["always"]["item_metrics"]) > 70


@pytest.mark.slow
@pytest.mark.parametrize("n_items", [999, 1_000])
def test_auto_writes_from_its_own_process_from_1000_items_on_two_cores(pytester: pytest.Pytester, n_items: int) -> None:
    _project(pytester, n_items, None)  # the default: auto
    result = pytester.runpytest("-p", "no:randomly", "-q")
    assert result.ret == pytest.ExitCode.OK, result.outlines[-5:]
    two_cores = usable_cores() >= 2
    assert sum(_handed(pytester)) == (n_items if n_items >= 1_000 and two_cores else 0)
    assert db_rows(pytester, "SELECT status, n_items FROM runs") == [("complete", n_items)]
    assert db_rows(pytester, "SELECT COUNT(*) FROM results") == [(n_items,)]


def test_a_bad_crucible_background_writes_value_is_one_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester, 3, "sometimes")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini option crucible_background_writes = 'sometimes': expected one of auto, always, never",
                                 "HINT: fix it in your pytest configuration file."])


KILL_THE_WRITER = """
import os, signal
from pytest_crucible.collection import SESSION_KEY


def pytest_runtest_setup(item):
    if item.name == os.environ.get("KILL_WRITER_AT"):  # the writing process dies between two batches
        process = item.config.stash[SESSION_KEY].recorder._writer._process
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)  # gone before the next batch (a process inside an fsync dies only when it returns)
"""


def _every_item_stored_once(pytester: pytest.Pytester, n_items: int) -> None:
    assert db_rows(pytester, "SELECT status, n_items, n_scored FROM runs") == [("complete", n_items, n_items)]
    assert db_rows(pytester, "SELECT COUNT(*), COUNT(DISTINCT result_id) FROM results") == [(n_items, n_items)]
    # One review-queue row per non-correct result, none written twice.
    assert db_rows(pytester, "SELECT COUNT(*) FROM eval_feedback") == db_rows(
        pytester, "SELECT COUNT(*) FROM results WHERE error_class != 'correct'")


def test_a_writing_process_that_never_starts_leaves_the_writes_to_the_session(pytester: pytest.Pytester, monkeypatch) -> None:
    import pytest_crucible.store.background as background

    monkeypatch.setattr(background, "SERVE", "import sys; sys.exit(3)")
    _project(pytester, 120, "always")
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.outlines[-10:]
    assert not [line for line in result.outlines if line.startswith("FAULT")]
    _every_item_stored_once(pytester, 120)


def test_a_writing_process_killed_mid_run_leaves_the_rest_to_the_session(pytester: pytest.Pytester, monkeypatch) -> None:
    _project(pytester, 120, "always")
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + KILL_THE_WRITER)
    monkeypatch.setenv("KILL_WRITER_AT", "b-075")  # after the first batch was written, before the second
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.outlines[-10:]
    assert not [line for line in result.outlines if line.startswith("FAULT")]
    assert _handed(pytester) == [50]  # the second batch found the process gone: the session wrote it, and the third
    _every_item_stored_once(pytester, 120)


# The session's own connection knows a function the writing process's does not: a trigger calling it refuses
# item b-070 there only.
SESSION_ONLY_FUNCTION = """
from pytest_crucible.collection import SESSION_KEY


def pytest_collection_finish(session):
    session.config.stash[SESSION_KEY].store.db.conn.create_function("session_connection", 0, lambda: 1)
"""


def test_a_batch_the_writing_process_cannot_write_is_written_by_the_session(pytester: pytest.Pytester) -> None:
    _project(pytester, 120, "always")
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + SESSION_ONLY_FUNCTION)
    _database_with_trigger(pytester.path / ".crucible" / "crucible.db", "SELECT session_connection()")
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.outlines[-10:]
    assert not [line for line in result.outlines if line.startswith("FAULT")]
    assert _handed(pytester)[:2] == [50, 50]  # the second came back (no such function there), and was written here
    _every_item_stored_once(pytester, 120)


SLOW = """
import time


def pytest_runtest_teardown(item):
    with open(os.path.join(os.path.dirname(__file__), "progress.txt"), "a") as progress:
        progress.write(item.name + "\\n")
    time.sleep(0.005 if int(item.name.split("-")[1]) < 160 else 1.0)  # past 160 items, crawl until the signal
"""


def _wait_for_progress(path, n: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not path.exists() or len(path.read_text().split()) < n):
        time.sleep(0.02)


@pytest.mark.slow
def test_a_terminated_session_s_writing_process_writes_what_it_got_and_stops(pytester: pytest.Pytester) -> None:
    """SIGTERM to the whole process group (a CI job cancelled): the writing process ignores it, and the session
    stops as on Ctrl-C (tests/test_reliability_cancel.py): it waits for the process to write every batch it
    received, writes the rest itself, and exits 143 with every finished item stored."""
    _project(pytester, 300, "always")
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + SLOW)
    process = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                               cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    progress = pytester.path / "progress.txt"
    _wait_for_progress(progress, 60)  # the first batch handed over
    # The test holds the database's write lock: the process waits on it with the second and third batches.
    lock = sqlite3.connect(pytester.path / ".crucible" / "crucible.db", timeout=60)
    lock.execute("BEGIN IMMEDIATE")
    _wait_for_progress(progress, 160)
    assert writers_in(pytester.path), "no writing process while the run was going"
    os.killpg(process.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert writers_in(pytester.path), "the writing process died of the signal"
    lock.rollback()
    lock.close()
    assert process.wait(timeout=120) == 143
    deadline = time.monotonic() + 60
    while writers_in(pytester.path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writers_in(pytester.path) == []
    assert sum(_handed(pytester)) >= 150  # three full batches before the signal
    # Every item that finished is stored (the last one may have finished without reaching its teardown's log line).
    finished = len(progress.read_text().split())
    [(status, stored)] = db_rows(pytester, "SELECT status, (SELECT COUNT(*) FROM results) FROM runs")
    assert status == "interrupted" and finished <= stored <= finished + 1


def test_a_postgres_database_is_written_from_its_own_process_too_and_its_password_stays_off_the_command_line(
        pytester: pytest.Pytester, postgres_server) -> None:
    _project(pytester, 120, None)
    conftest = pytester.path / "conftest.py"
    # While a batch is handed over, the writing processes' command lines are what `ps` shows anyone on the machine.
    conftest.write_text(conftest.read_text() + '''

_log_the_batch = _logged_send


def _logged_send(self, run_id, scores):  # what pytest_configure installs: the batch logged, then the command line
    _log_the_batch(self, run_id, scores)
    with open(f"/proc/{self._process.pid}/cmdline", "rb") as cmdline, \\
            open(os.path.join(os.path.dirname(__file__), "cmdlines.log"), "ab") as log:
        log.write(cmdline.read() + b"\\n")
''')
    stored = {}
    for writes in ("never", "always"):
        name = postgres_server.create_database().rsplit("/", 1)[1]
        url = postgres_server.url(name, password="s3cret-pw")  # the test cluster trusts local connections
        result = pytester.runpytest(f"--crucible-db={url}", "-o", f"crucible_background_writes={writes}", "-p", "no:randomly")
        assert result.ret == pytest.ExitCode.OK, result.outlines[-10:]
        store = Store.open(url)
        try:
            [run] = store.list_runs()
            stored[writes] = (run["status"], run["n_items"], store.item_metrics(run["id"]),
                              [{key: row[key] for key in ("item_id", "retrieved", "outcome", "error_class")}
                               for row in store.results(run["id"])])
        finally:
            store.close()
    assert stored["always"] == stored["never"]
    assert stored["always"][:2] == ("complete", 120)
    assert _handed(pytester) == [50, 50, 20]
    cmdlines = (pytester.path / "cmdlines.log").read_bytes()
    assert b"pytest_crucible.store.background" in cmdlines and b"s3cret-pw" not in cmdlines
