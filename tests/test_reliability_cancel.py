"""SIGTERM is a cancel, not a crash; a SIGKILL leaves a run the next open marks interrupted.

CI sends SIGTERM when a job is cancelled or times out. Before, the session died of it: exit 143, no summary,
the finished items of the last write batch lost, and the run row left ``running``. Now the session stops
as on Ctrl-C (finished items written, the run ``interrupted``, the summary and junit written) and exits
143 after that. The run's row is written before the first test, so a SIGKILL before any write batch
still leaves a run, which the next open marks ``interrupted``, and ``crucible runs`` counts the stored
results of a run never closed, as ``crucible show`` does.

The signal is sent by a thread of this test once the pipeline, at a chosen item, says it waits for it
(``waiting.txt`` holds the pid): no race with the run's speed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import COMPONENT_RECORD, crucible_cli, db_rows, numbered_items, write_golden

N_ITEMS = 12

# WAIT_AT: the pipeline of that item writes its pid and waits (at most two minutes, then fails) for the signal.
# SLOW_AT: that item sleeps past pytest-timeout's limit. FLUSH_ITEMS: written every N items, never on a timer.
# THEIRS=1: conftest.py owns SIGTERM (a handler of its own, installed at configure) and lets the item go on.
CONFTEST = """
import os, signal, time
import pytest
import pytest_crucible.store.recorder as recorder

if os.environ.get("FLUSH_ITEMS"):
    recorder.FLUSH_ITEMS, recorder.FLUSH_SECONDS = int(os.environ["FLUSH_ITEMS"]), 1e9

def pytest_configure(config):
    if os.environ.get("THEIRS") == "1":
        signal.signal(signal.SIGTERM, lambda signum, frame: open("theirs.txt", "w").write("SIGTERM"))

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        if n == int(os.environ.get("SLOW_AT", -1)):
            time.sleep(30)
        if n == int(os.environ.get("WAIT_AT", -1)):
            if hasattr(signal, "setitimer"):
                signal.setitimer(signal.ITIMER_REAL, 0)  # this item waits for the test's signal: no pytest-timeout alarm
            with open("waiting.tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.replace("waiting.tmp", "waiting.txt")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not os.path.exists("theirs.txt"):
                time.sleep(0.05)
            if not os.path.exists("theirs.txt"):
                raise RuntimeError("no signal came")
        return {"answer": None, "retrieved": [{"chunk_id": f"doc{n}#1", "doc_id": f"doc{n}", "text": "t"}]}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", numbered_items(N_ITEMS))
    pytester.makeconftest(CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\naddopts = -p no:randomly\n")
    for name in ("WAIT_AT", "SLOW_AT", "FLUSH_ITEMS", "THEIRS"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def signal_when_waiting(project: pytest.Pytester, signum: int) -> threading.Thread:
    """A thread that sends ``signum`` to the pytest process once its pipeline waits for it (bounded: 5 minutes)."""
    waiting = project.path / "waiting.txt"

    def send() -> None:
        deadline = time.monotonic() + 300
        while not waiting.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if waiting.exists():
            os.kill(int(waiting.read_text()), signum)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def db_of(project: pytest.Pytester) -> Path:
    return project.path / ".crucible" / "crucible.db"


@pytest.mark.slow
def test_sigterm_mid_run_stops_as_ctrl_c_does_and_exits_143(project, monkeypatch) -> None:
    monkeypatch.setenv("WAIT_AT", "7")  # q-00 .. q-06 finished, q-07 waiting when SIGTERM comes
    monkeypatch.setenv("FLUSH_ITEMS", "50")  # nothing written before the signal: the interrupt path writes it all
    sender = signal_when_waiting(project, signal.SIGTERM)
    result = project.runpytest_subprocess("--junitxml=junit.xml", timeout=300)
    sender.join(timeout=60)
    assert result.ret == 143, result.outlines[-30:]
    result.stdout.fnmatch_lines([
        "*= crucible =*",
        "WARNING SIGTERM received (the job was cancelled or timed out): stopped as on Ctrl-C, the finished items are "
        "stored and the run is interrupted; exit status 143",
        "run * status interrupted *",
        "items 7 (7 passed)",
    ])
    result.stdout.fnmatch_lines(["*Cancelled: SIGTERM: the job was cancelled or timed out; stopping as on Ctrl-C*"])
    assert "Traceback" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()
    # junit was written, with the seven items that ran (and, as pytest writes it on Ctrl-C, the item interrupted as an empty case).
    suite = ET.parse(project.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert [case.get("name") for case in suite.iter("testcase") if case.get("name")] == [f"q-{n:02d}" for n in range(7)]
    [(run_id, status, n_items)] = db_rows(project, "SELECT id, status, n_items FROM runs")
    assert (status, n_items) == ("interrupted", 7)
    stored = [row[0] for row in db_rows(project, "SELECT item_id FROM results WHERE run_id = ? ORDER BY item_id", [run_id])]
    assert stored == [f"q-{n:02d}" for n in range(7)]


@pytest.mark.slow
def test_sigkill_before_the_first_batch_leaves_a_run_the_next_open_marks_interrupted(project, monkeypatch) -> None:
    monkeypatch.setenv("WAIT_AT", "0")  # the first item's pipeline: nothing recorded, nothing written but the run's row
    sender = signal_when_waiting(project, signal.SIGKILL)
    result = project.runpytest_subprocess(timeout=300)
    sender.join(timeout=60)
    assert result.ret == -signal.SIGKILL
    assert db_rows(project, "SELECT status, n_items FROM runs") == [("running", 0)]  # reserved before any test ran
    listed = crucible_cli("runs", "--db", db_of(project))  # the next open marks it
    assert listed.ret == 0, listed.errlines
    [line] = [line for line in listed.stdout.lines if line.startswith("01")]
    assert line.split()[2:4] == ["interrupted", "component"] and line.split()[4] == "0"
    assert db_rows(project, "SELECT status FROM runs") == [("interrupted",)]


@pytest.mark.slow
def test_crucible_runs_and_show_count_the_same_items_of_a_killed_run(project, monkeypatch) -> None:
    monkeypatch.setenv("WAIT_AT", "7")
    monkeypatch.setenv("FLUSH_ITEMS", "5")  # q-00 .. q-04 written, q-05 and q-06 waiting in memory
    sender = signal_when_waiting(project, signal.SIGKILL)
    result = project.runpytest_subprocess(timeout=300)
    sender.join(timeout=60)
    assert result.ret == -signal.SIGKILL
    db = db_of(project)
    listed = crucible_cli("runs", "--db", db)
    [line] = [line for line in listed.stdout.lines if line.startswith("01")]
    run_id, items = line.split()[0], int(line.split()[4])
    shown = crucible_cli("show", run_id, "--db", db)
    assert shown.ret == 0, shown.errlines
    shown.stdout.fnmatch_lines(["run * status interrupted *", "items 5 *"])
    assert items == 5
    assert db_rows(project, "SELECT status, n_items, n_scored, n_errored FROM runs") == [("interrupted", 5, 5, 0)]


@pytest.mark.slow
def test_a_plugin_that_owns_sigterm_keeps_it(project, monkeypatch) -> None:
    monkeypatch.setenv("THEIRS", "1")  # their handler notes the signal and lets the item go on
    monkeypatch.setenv("WAIT_AT", "3")
    sender = signal_when_waiting(project, signal.SIGTERM)
    result = project.runpytest_subprocess(timeout=300)
    sender.join(timeout=60)
    assert result.ret == 0, result.outlines[-20:]
    assert (project.path / "theirs.txt").read_text() == "SIGTERM"  # their handler ran, not crucible's
    result.stdout.no_fnmatch_line("*SIGTERM received*")
    assert db_rows(project, "SELECT status, n_items FROM runs") == [("complete", N_ITEMS)]


@pytest.mark.slow
def test_sigterm_with_pytest_timeouts_signal_method(project, monkeypatch) -> None:
    """pytest-timeout's signal method uses SIGALRM, never SIGTERM: both work in one session. An item it stops is
    stored errored, and a SIGTERM later still stops the session as a cancel."""
    monkeypatch.setenv("SLOW_AT", "2")
    monkeypatch.setenv("WAIT_AT", "5")
    sender = signal_when_waiting(project, signal.SIGTERM)
    result = project.runpytest_subprocess("-p", "timeout", "--timeout=1", "--timeout-method=signal", timeout=300)
    sender.join(timeout=60)
    assert result.ret == 143, result.outlines[-30:]
    result.stdout.fnmatch_lines(["WARNING SIGTERM received *", "run * status interrupted *",
                                 "WARNING 1 item stopped before its evaluation ended (pytest-timeout): q-02*"])
    [(run_id, status)] = db_rows(project, "SELECT id, status FROM runs")
    assert status == "interrupted"
    rows = db_rows(project, "SELECT item_id, error IS NOT NULL FROM results WHERE run_id = ? ORDER BY item_id", [run_id])
    assert rows == [(f"q-{n:02d}", n == 2) for n in range(5)]


def test_the_handler_is_installed_only_over_the_default_and_given_back(project) -> None:
    """In this process (pytester's in-process run): the session's handler while it runs, and SIGTERM's handler
    as it was found afterwards."""
    project.makepyfile(test_seen="""
import signal

def test_seen():
    handler = signal.getsignal(signal.SIGTERM)
    open("seen.txt", "w").write(repr(handler))
""")
    before = signal.getsignal(signal.SIGTERM)
    assert project.runpytest("test_seen.py").ret == 0
    assert signal.getsignal(signal.SIGTERM) is before
    seen = (project.path / "seen.txt").read_text()
    if before is signal.SIG_DFL:
        assert "SigtermAsCancel" in seen, seen
    else:  # the outer session (this one) installed its own: the inner session left it alone
        assert "SigtermAsCancel" in seen and seen == repr(before)
