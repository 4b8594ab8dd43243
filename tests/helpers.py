"""Small helpers shared by the end-to-end tests."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

# The ini of most end-to-end projects: retrieval only (no answers to judge), and only the gate
# (or a pipeline error) can turn a run red.
COMPONENT_RECORD = "crucible_mode = component\ncrucible_outcome = record"


def db_rows(project, sql: str, params=()) -> list[tuple]:
    """Rows of a query on a pytester project's default crucible database (or on a database path)."""
    path = Path(project) if isinstance(project, (str, Path)) else project.path / ".crucible" / "crucible.db"
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def crucible_cli(*args: str | Path) -> pytest.RunResult:
    """`crucible ARGS` in this process: its exit code and what it printed, as pytester's RunResult.

    The same ``main()`` that ``python -m pytest_crucible.cli`` runs, without starting Python and importing
    the package once more for each command (test_cli.py and test_server.py run the CLI as a process of its own).
    """
    from pytest_crucible.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(arg) for arg in args])
        except SystemExit as exc:  # argparse's usage errors exit 2, as the process would
            code = exc.code
    ret = 0 if code is None else code if isinstance(code, int) else 1  # what sys.exit(main()) makes of it
    return pytest.RunResult(ret, out.getvalue().splitlines(), err.getvalue().splitlines(), time.monotonic() - start)


def needs_a_look(row: Mapping[str, Any]) -> bool:
    """The items the HTML report lists first, as the tests state the rule (``store.aggregates.NEEDS_A_LOOK`` is
    its SQL): the item errored or failed, a judge errored, or its error class is not correct."""
    return (row.get("outcome") not in ("passed", "skipped") or bool(row.get("error"))
            or row.get("judge_errors") not in (None, "", "[]") or row.get("error_class") not in (None, "correct"))


# A deterministic pipeline: retrieves the same ranked list for every question, answers
# from the first chunk and cites it, and abstains on questions its corpus cannot answer.
RANKED_CONFTEST = """
import pytest

RANKED = [("returns#p1", "returns", "Bikes can be returned within 30 days."), ("bikes#p2", "bikes", "The Vela uses the PB500 battery."),
          ("battery#p1", "battery", "The PB500 battery charges in 4 hours."), ("faq#p9", "faq", "Opening hours are 9 to 5.")]

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        k = config["retrievalLimit"]
        retrieved = [{"chunk_id": c, "doc_id": d, "text": t, "score": 1.0 / (i + 1)} for i, (c, d, t) in enumerate(RANKED)][:k]
        if mode == "component":
            return {"answer": None, "retrieved": retrieved, "confidence": 0.8}
        if not item.answerable:
            return {"answer": "I don't know.", "retrieved": retrieved, "confidence": 0.2, "abstained": True}
        return {"answer": "Bikes can be returned within 30 days [S1].", "retrieved": retrieved, "confidence": 0.8}
    return pipeline
"""


def numbered_items(n: int) -> list[dict]:
    """Golden items q-00 .. q-(n-1), each citing its own document (doc0, doc1, ...)."""
    return [{"id": f"q-{i:02d}", "question": f"question {i}", "citations": [{"docId": f"doc{i}", "mode": "required"}]}
            for i in range(n)]


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now: connections to it are refused (or a server of a test binds it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def return_window_items(prefix: str, n: int) -> list[dict]:
    """``n`` items asking for the return window of a product each, citing returns#p1 (see RETURNS_CONFTEST)."""
    return [{"id": f"{prefix}-{i}", "question": f"What is the return window for product {i}?",
             "reference": "The return window is 30 days.", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}
            for i in range(n)]


# The pipeline for return_window_items: two chunks, the returns one first; ``{answer}`` is formatted with the
# item (``{item.id}`` makes every item's judge requests its own).
RETURNS_CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        chunks = [("returns#p1", "returns", "The return window is 30 days from delivery."),
                  ("ship#p1", "ship", "Bikes ship within five working days.")]
        retrieved = [{"chunk_id": c, "doc_id": d, "text": t} for c, d, t in chunks][: config["retrievalLimit"]]
        answer = None if mode == "component" else ANSWER.format(item=item)
        return {"answer": answer, "retrieved": retrieved, "confidence": 0.9}
    return pipeline
"""


def returns_conftest(answer: str) -> str:
    return f"ANSWER = {answer!r}\n" + RETURNS_CONFTEST


def write_golden(path: str | Path, items: Iterable[Mapping[str, Any]]) -> Path:
    """A golden file at ``path``: one JSON object per line."""
    path = Path(path)
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def write_project(pytester: pytest.Pytester, items: Iterable[Mapping[str, Any]], conftest: str, *,
                  ini: str = COMPONENT_RECORD, configs: Mapping[str, Mapping[str, Any]] | None = None,
                  golden: str = "golden_set.jsonl") -> pytest.Pytester:
    """A small end-to-end project in pytester's directory: the golden file ``golden`` holding ``items``,
    the ``conftest`` (its ``crucible_pipeline``), a pytest.ini whose [pytest] section is ``ini``, and one
    pipeline config file per entry of ``configs`` (file name -> the config). Returns pytester, ready to run."""
    write_golden(pytester.path / golden, items)
    pytester.makeconftest(conftest)
    pytester.makeini(f"[pytest]\n{ini}\n")
    for name, config in (configs or {}).items():
        (pytester.path / name).write_text(json.dumps(config))
    return pytester


def point_anthropic_at(monkeypatch: pytest.MonkeyPatch, server: Any, key: str) -> None:
    """The anthropic SDK of the runs that follow talks to the local Messages double ``server`` with a fake ``key``."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)


def writers_in(directory) -> list[int]:
    """The pids of the results-writing processes (crucible_background_writes) started from ``directory``."""
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if b"pytest_crucible.store.background" in cmdline.read() and os.readlink(f"/proc/{entry}/cwd") == str(directory):
                    pids.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return pids


# Set by tests/conftest.py: True in the fast loop (-m "not slow"), where every property runs a fifth of its examples.
FAST_LOOP = False


def examples(full: int) -> int:
    """A property's example count: ``full`` in the full suite (what CI runs), a fifth of it (at least 30) in the
    fast loop, the everyday run that should take a minute. The same properties, tried on fewer inputs."""
    return max(30, full // 5) if FAST_LOOP else full


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> tuple[Path, Any]:
    """An expensive fixture's work done once per test session, however many pytest-xdist workers need it.

    ``make(folder)`` writes what it makes into ``folder`` and returns what the tests read, as JSON. The first worker
    to ask makes it, under a lock the others wait on; the rest read it. (pytest-xdist's ``xdist_group`` would keep
    the tests on one worker instead, but under pytest 9.2 it is silently ignored: pytest-xdist issue #1386.)
    Without xdist it is made in this session's own temporary directory. Tests must only read what it made.
    """
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's directory, shared by its workers
    folder, done = root / f"made-once-{name}", root / f"made-once-{name}.json"
    with open(root / f"made-once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            folder.mkdir(exist_ok=True)
            done.write_text(json.dumps(make(folder)))
    return folder, json.loads(done.read_text())
