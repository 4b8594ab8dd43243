"""The results database on a sick CI machine: full, unwritable or corrupt. Each fails loudly, never green.

- **Disk full**: SQLite's own "database or disk is full" (``PRAGMA max_page_count`` caps the file once
  10 of 20 items are written). The run is stored ``incomplete`` with the items it lost counted, is
  never ``latest``, the gate refuses it (exit 3), and junit carries the failure.
- **Unwritable**: a read-only file or folder, a path under a regular file, a directory: one usage error
  (exit 4) naming the path and the cause, before any pipeline call. A database that breaks later
  still gets every fault in the summary.
- **Corrupt**: truncated, random bytes, a damaged page only ``PRAGMA quick_check`` sees: one usage error
  (exit 4) naming the file and SQLite's finding, before any pipeline call. An empty file is a new
  database.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import crucible_cli, db_rows, numbered_items, write_golden

import pytest_crucible.store.recorder

N_ITEMS = 20
ITEMS = numbered_items(N_ITEMS)

# Every pipeline call is logged to calls.log, so a test can say none happened. Each retrieved chunk's
# text is 6 KB: every item needs pages of its own, so a capped file cannot take one more item.
# DISK_FULL_AFTER=N: after the Nth item (its score written), cap the file at its size (SQLite: "database or disk is full").
CONFTEST = """
import os
import pytest

from pytest_crucible.collection import SESSION_KEY

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        with open(os.path.join(os.path.dirname(__file__), "calls.log"), "a") as log:
            log.write(item.id + "\\n")
        n = int(item.id.split("-")[1])
        docs = [f"noise{j}" for j in range(4)]
        docs.insert(0 if n % 3 else 1, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d, "text": "x" * 6000} for d in docs]}
    return pipeline

_done = []

def pytest_runtest_teardown(item):
    _done.append(item.nodeid)
    if len(_done) == int(os.environ.get("DISK_FULL_AFTER", 0)):
        conn = item.config.stash[SESSION_KEY].store.db.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
    if len(_done) == int(os.environ.get("IMMUTABLE_AFTER", 0)):  # the file turns unwritable under the run
        import subprocess
        subprocess.run(["chattr", "+i", str(item.config.stash[SESSION_KEY].settings.db_path)], check=True)
    if len(_done) == int(os.environ.get("TRUNCATE_AFTER", 0)):  # the file loses its second half under the run
        path = item.config.stash[SESSION_KEY].settings.db_path
        os.truncate(path, os.path.getsize(path) // 2)
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\ncrucible_outcome = record\n")
    # Scores are written every 5 items (never on a timer), so which items are lost is the same on every machine.
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_ITEMS", 5)
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_SECONDS", 1e9)
    return pytester


def db_path(project: pytest.Pytester) -> Path:
    return project.path / ".crucible" / "crucible.db"


def pipeline_calls(project: pytest.Pytester) -> list[str]:
    log = project.path / "calls.log"
    return log.read_text().split() if log.exists() else []


def good_run(project: pytest.Pytester) -> str:
    """A complete run to be the baseline; the call log starts empty again."""
    assert project.runpytest().ret == pytest.ExitCode.OK
    (project.path / "calls.log").unlink()
    [(run_id,)] = db_rows(project, "SELECT id FROM runs WHERE status = 'complete'")
    return run_id


def cli(project: pytest.Pytester, *args: str):
    return crucible_cli(*args, "--db", str(db_path(project)))


def junit_cases(path: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    """The testsuite and its crucible test cases by name (gate, faults)."""
    suite = ET.parse(path).getroot().find("testsuite")
    return suite, {case.get("name"): case for case in suite.iter("testcase") if case.get("classname") == "crucible"}


def assert_one_clean_error(result: pytest.RunResult, first_line: str) -> None:
    """Exit 4, the error on stderr as exactly two lines (the problem, then a HINT), no traceback, no test ran."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines + result.errlines
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 2, errors
    result.stderr.fnmatch_lines([f"ERROR: {first_line}", "HINT: *"])
    output = "\n".join(result.outlines + result.errlines)
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert not re.search(r"\d+ (passed|failed)", output)


# -- 1. disk full -------------------------------------------------------------------------------------
def lost_counts(result: pytest.RunResult) -> list[int]:
    return [int(n) for n in re.findall(r"^FAULT could not record (\d+) item\(s\) .*database or disk is full$",
                                       "\n".join(result.outlines), re.MULTILINE)]


def test_disk_full_run_is_incomplete_never_latest_and_the_gate_refuses_it(project: pytest.Pytester, monkeypatch) -> None:
    baseline = good_run(project)
    monkeypatch.setenv("DISK_FULL_AFTER", "10")
    result = project.runpytest("--crucible-baseline=latest", "--junitxml=junit.xml")
    # Items 1-10 were written before the cap; the batches of 11-15 and 16-20 were not. The 10 pairs
    # left would have passed the gate: the run must not be compared at all.
    assert lost_counts(result) == [5, 5], result.outlines
    assert result.ret == 3  # the gate's refusal, never a pass
    result.stdout.fnmatch_lines([
        "run * status incomplete *",
        "items 20 (10 passed): 10 scored, 0 errored, 10 lost",
        "WARNING 10 of 20 items lost: * could not record them (see the FAULT lines); this run is incomplete*",
        "GATE REFUSED this run is incomplete (10 items lost: never recorded in the database): refusing to compare it",
        "HINT: *",
    ])
    result.stdout.no_fnmatch_line("*gate passed*")
    [(partial, status, n_items, n_scored, n_errored)] = db_rows(
        project, "SELECT id, status, n_items, n_scored, n_errored FROM runs WHERE id != ?", [baseline])
    assert (status, n_items, n_scored, n_errored) == ("incomplete", 20, 10, 0)
    assert db_rows(project, "SELECT COUNT(*) FROM results WHERE run_id = ?", [partial]) == [(10,)]
    # junit: the gate is an error, and the lost items are a failure of their own.
    suite, cases = junit_cases(project.path / "junit.xml")
    assert (suite.get("failures"), suite.get("errors")) == ("1", "1")
    [refused] = list(cases["gate"])
    assert refused.tag == "error" and "GATE REFUSED this run is incomplete (10 items lost" in refused.get("message")
    [failure] = list(cases["faults"])
    assert failure.tag == "failure" and failure.get("message").startswith("FAULT could not record 5 item(s)")
    assert len(failure.text.splitlines()) == 2 and "database or disk is full" in failure.text
    # `latest` is still the complete run: the export and the next gate never read the partial one.
    exported = cli(project, "export", "latest", "-o", "latest.json")
    assert exported.ret == 0, exported.errlines
    assert json.loads((project.path / "latest.json").read_text())["run"]["id"] == baseline
    # Named as a candidate, the CLI's gate refuses it too.
    compared = cli(project, "compare", baseline, partial)
    assert compared.ret == 3
    compared.stderr.fnmatch_lines(["GATE REFUSED this run is incomplete (10 items lost*"])


def test_disk_full_without_a_gate_fails_the_session_and_its_junit(project: pytest.Pytester, monkeypatch) -> None:
    good_run(project)
    monkeypatch.setenv("DISK_FULL_AFTER", "10")
    result = project.runpytest("--junitxml=junit.xml", "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert lost_counts(result) == [5, 5]
    # -q keeps the one line and every alert: the status and the count lost are among them.
    result.stdout.fnmatch_lines(["crucible run * incomplete, 20 items*", "FAULT *", "FAULT *", "WARNING 10 of 20 items lost: *"])
    suite, cases = junit_cases(project.path / "junit.xml")
    assert "gate" not in cases and suite.get("failures") == "1"
    assert [child.tag for child in cases["faults"]] == ["failure"]


def test_a_database_corrupted_mid_run_still_gives_a_refused_verdict_in_the_terminal_and_junit(project, monkeypatch) -> None:
    """The file is truncated under the running session: whichever step meets the damage (closing the run,
    reading it back, the comparison), the gate is refused (exit 3) with its own line, its junit test case
    and its junit property, never only a FAULT line and exit 1."""
    good_run(project)
    monkeypatch.setenv("TRUNCATE_AFTER", "12")
    result = project.runpytest("--crucible-baseline=latest", "--junitxml=junit.xml")
    assert result.ret == 3, result.outlines[-30:]
    output = "\n".join(result.outlines)
    assert "GATE REFUSED " in output and "malformed" in output and "Traceback" not in output
    result.stdout.no_fnmatch_line("*gate passed*")
    suite, cases = junit_cases(project.path / "junit.xml")
    [refused] = list(cases["gate"])
    # Which step meets the damage depends on where the truncation falls in the file's layout: closing the run (it
    # could not be stored) or reading the runs back (could not compare); either is the gate refused.
    assert refused.tag == "error" and any(f"GATE REFUSED {why}" in refused.get("message") for why in (
        "could not compare with the baseline", "this run could not be stored"))
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["crucible.verdict"] == "refused"


def _can_make_immutable(tmp_path: Path) -> bool:
    import shutil
    import subprocess

    probe = tmp_path / "probe"
    probe.write_text("x")
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode:
        return False
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    return True


@pytest.mark.parametrize("writes", ["never", "always"])
def test_a_file_that_turns_unwritable_mid_run_is_a_fault_and_the_wal_keeps_the_run(project, monkeypatch, tmp_path, writes) -> None:
    """The database file cannot be written any more (here: made immutable) while the session runs: SQLite
    keeps writing into -wal, so the run is whole only with its -wal file. The session says so (FAULT, exit
    1, never green); a copy that keeps both files holds every item. A normal session leaves the file alone
    complete (its -wal emptied into it)."""
    import shutil
    import subprocess

    if not _can_make_immutable(tmp_path):
        pytest.skip("needs chattr +i (root with CAP_LINUX_IMMUTABLE on a file system that supports it)")
    good_run(project)
    copy = project.path / "copy.db"
    shutil.copy(db_path(project), copy)  # the normal session: the file alone has the complete run
    assert sqlite3.connect(copy).execute("SELECT COUNT(*) FROM results").fetchone() == (N_ITEMS,)
    monkeypatch.setenv("IMMUTABLE_AFTER", "7")  # after the first write (every 5 items)
    # Written from a process of its own, checkpointed after every batch there: the fault comes back from it.
    monkeypatch.setattr(pytest_crucible.store.recorder, "CHECKPOINT_SECONDS", 0.0 if writes == "always" else 5.0)
    try:
        result = project.runpytest("-o", f"crucible_background_writes={writes}")
    finally:
        subprocess.run(["chattr", "-i", str(db_path(project))], check=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    faults = [line for line in result.outlines if line.startswith("FAULT")]
    assert len(faults) == 1, faults  # said once, however many checkpoints met it
    result.stdout.fnmatch_lines(["FAULT */crucible.db: the latest writes are only in crucible.db-wal, the database file "
                                 "cannot take them (disk I/O error): keep crucible.db-wal with the database (copy or upload both)"])
    both = project.path / "both"
    both.mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(str(db_path(project)) + suffix, both / ("crucible.db" + suffix))
    assert sqlite3.connect(both / "crucible.db").execute("SELECT COUNT(*) FROM results").fetchone() == (2 * N_ITEMS,)


# -- 2. unwritable database ---------------------------------------------------------------------------
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ROOT_IGNORES_PERMISSIONS = pytest.mark.skipif(AS_ROOT, reason="root writes read-only files and folders")


def _read_only_file(project: pytest.Pytester) -> tuple[list[str], str]:
    good_run(project)
    db_path(project).chmod(0o444)
    return [], "*/.crucible/crucible.db: cannot write the crucible database: the file is not writable (Permission denied)"


def _read_only_folder(project: pytest.Pytester) -> tuple[list[str], str]:
    good_run(project)
    db_path(project).parent.chmod(0o555)  # SQLite writes its journal (-wal, -shm) beside the file
    return [], "*/.crucible/crucible.db: cannot write the crucible database: its folder */.crucible is not writable (Permission denied)"


def _under_a_file(project: pytest.Pytester) -> tuple[list[str], str]:
    (project.path / "results").write_text("a regular file where a folder should be\n")
    return ["--crucible-db=results/run.db"], "*/results/run.db: cannot write the crucible database: */results is a file, not a folder"


def _a_directory(project: pytest.Pytester) -> tuple[list[str], str]:
    (project.path / "results").mkdir()
    return ["--crucible-db=results"], "*/results: cannot write the crucible database: it is a directory, not a file"


@pytest.mark.parametrize("make", [
    pytest.param(_read_only_file, marks=ROOT_IGNORES_PERMISSIONS, id="read-only file"),
    pytest.param(_read_only_folder, marks=ROOT_IGNORES_PERMISSIONS, id="read-only folder"),
    pytest.param(_under_a_file, id="path under a regular file"),
    pytest.param(_a_directory, id="path is a directory"),
])
def test_unwritable_database_is_one_usage_error_before_any_test_runs(project: pytest.Pytester, make) -> None:
    args, expected = make(project)
    try:
        result = project.runpytest(*args)
    finally:  # let pytester clean up
        for path in (db_path(project), db_path(project).parent):
            if path.exists():
                path.chmod(0o755 if path.is_dir() else 0o644)
    assert_one_clean_error(result, expected)
    assert pipeline_calls(project) == []


def test_a_database_that_breaks_during_the_run_still_reports_every_fault(project: pytest.Pytester) -> None:
    # The path is fine when the session starts; a directory takes its place before the first write.
    project.makeconftest(CONFTEST + """
def pytest_sessionstart(session):
    os.mkdir("late.db")
""")
    result = project.runpytest("--crucible-db=late.db", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert len(pipeline_calls(project)) == N_ITEMS
    faults = [line for line in result.outlines if line.startswith("FAULT ")]
    lost = [int(n) for line in faults for n in re.findall(r"^FAULT could not record (\d+) item\(s\)", line)]
    assert lost == [5, 5, 5, 5] and all("late.db: cannot open the crucible database" in line for line in faults)
    result.stdout.fnmatch_lines(["*= crucible =*", "WARNING 20 of 20 items lost: * could not record them*"])
    _, cases = junit_cases(project.path / "junit.xml")
    assert [child.tag for child in cases["faults"]] == ["failure"]


# -- 3. corrupt database ------------------------------------------------------------------------------
def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def _damaged_page(path: Path) -> None:
    """An invalid page type on the root page of the results' index by result id: opening the file (and the run
    before this fix) never reads that page until the first write; PRAGMA quick_check does. (An index: since
    schema 19 the results table's own root page is a leaf at this size, and quick_check raises on a damaged leaf
    rather than report it; it reports a damaged index page whatever the table's size.)"""
    conn = sqlite3.connect(path)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        [(root,)] = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'results_by_result_id'").fetchall()
    finally:
        conn.close()
    with open(path, "r+b") as db:
        db.seek((root - 1) * page_size)
        db.write(b"\x07")


@pytest.mark.parametrize("damage, finding", [
    (_truncated, "cannot open the crucible database: database disk image is malformed"),
    (_random_bytes, "cannot open the crucible database: file is not a database"),
    (_damaged_page, "the crucible database is damaged: PRAGMA quick_check: *"),
], ids=["truncated to half", "random bytes", "a damaged page"])
def test_corrupt_database_is_one_usage_error_before_any_test_runs(project: pytest.Pytester, damage, finding: str) -> None:
    good_run(project)
    damage(db_path(project))
    for suffix in ("-wal", "-shm"):  # the file alone, as a copied or restored database is
        Path(f"{db_path(project)}{suffix}").unlink(missing_ok=True)
    result = project.runpytest("--junitxml=junit.xml")
    assert_one_clean_error(result, f"*/.crucible/crucible.db: {finding}")
    result.stderr.fnmatch_lines(["HINT: *move it aside*--crucible-db*"])
    assert pipeline_calls(project) == []


def test_an_empty_file_is_a_new_database(project: pytest.Pytester) -> None:
    db_path(project).parent.mkdir()
    db_path(project).write_bytes(b"")
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert db_rows(project, "SELECT status, n_items FROM runs") == [("complete", N_ITEMS)]


def test_the_file_alone_holds_what_the_session_checkpointed_and_nothing_moves_on_its_own(tmp_path, monkeypatch) -> None:
    """A copy of the .db file alone (a CI upload without its -wal) holds the run as of the session's last
    checkpoint: every batch when the session checkpoints after each, none while it has not checkpointed yet,
    even past SQLite's own threshold of 1,000 pages of log (those automatic copies are the session's to make)."""
    from pytest_crucible.session import CrucibleSession, Settings

    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_ITEMS", 100)
    chunk_text = "x" * 2000  # ~20 KB of results per item: 600 items write well over 1,000 pages of log

    def record(name: str, checkpoint_seconds: float) -> tuple[int, int]:
        monkeypatch.setattr(pytest_crucible.store.recorder, "CHECKPOINT_SECONDS", checkpoint_seconds)
        db = tmp_path / f"{name}.db"
        settings = Settings(params={}, resolved={"retrievalLimit": 10}, config_hash="h" * 64, config_path=None,
                            db_path=db, mode="component", outcome_mode="record")
        session = CrucibleSession(settings=settings)
        for i in range(600):
            session.record({"item_id": f"q{i:03d}", "question": "Q?", "item": {"id": f"q{i:03d}", "question": "Q?"},
                            "outcome": "passed", "metrics": {"ndcgAt10": 1.0},
                            "retrieved": [{"chunk_id": f"c{n}", "doc_id": "d", "text": chunk_text} for n in range(10)]})
        copy = tmp_path / f"{name}-copy.db"
        copy.write_bytes(db.read_bytes())  # the file alone, while the session still has it open
        with sqlite3.connect(copy) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            in_copy = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] if "results" in tables else 0
        in_db = session.store.db.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        session.close()
        return in_copy, in_db

    assert record("every-batch", 0.0) == (600, 600)
    assert record("not-yet", 1e9) == (0, 600)
