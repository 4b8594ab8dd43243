"""The database deleted or replaced under a running session (a cleanup step, a cache restore, a database
dropped and created again, another server behind the address): the run is a FAULT, never a green build.

Before, SQLite went on writing into the file no path named any more: the session ended green and the run
was nowhere. Now the store compares, before every write batch and when the run closes, the file at the
path (device and inode) or the PostgreSQL database (system identifier, name, oid) with the one it opened.
When they differ, nothing more is written anywhere (never into the database now at the path), every item
of the run is counted lost, the run is not stored, the gate refuses (exit 3; exit 1 without a gate) and
junit's ``crucible::faults`` case fails with the FAULT line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import COMPONENT_RECORD, db_rows, numbered_items, write_golden

import pytest_crucible.store.recorder
from pytest_crucible.store import Store

N_ITEMS = 20

# After the Nth item's teardown (its score recorded), the database goes away under the session:
# DELETE_AFTER removes the file and its -wal and -shm (`rm -f crucible.db*`); REPLACE_AFTER moves REPLACEMENT
# over it (a restored cache: the folder's files are new ones). PG_SWAP_AFTER calls the test's own swap.
CONFTEST = """
import os
import pytest

from pytest_crucible.collection import SESSION_KEY

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        return {"answer": None, "retrieved": [{"chunk_id": f"doc{n}#1", "doc_id": f"doc{n}", "text": "t"}]}
    return pipeline

_done = []

def pytest_runtest_teardown(item):
    _done.append(item.nodeid)
    path = str(item.config.stash[SESSION_KEY].settings.db_path)
    if len(_done) == int(os.environ.get("DELETE_AFTER", 0)):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
    if len(_done) == int(os.environ.get("REPLACE_AFTER", 0)):
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        os.replace(os.environ["REPLACEMENT"], path)
    if len(_done) == int(os.environ.get("PG_SWAP_AFTER", 0)):
        import test_swap
        test_swap.swap()
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", numbered_items(N_ITEMS))
    pytester.makeconftest(CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\n")
    # Written every 5 items, never on a timer: which batches are written before the fault is the same everywhere.
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_ITEMS", 5)
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_SECONDS", 1e9)
    for name in ("DELETE_AFTER", "REPLACE_AFTER", "PG_SWAP_AFTER"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def junit_cases(path: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return suite, {case.get("name") or "": case for case in suite.iter("testcase")}


def assert_lost_run(result: pytest.RunResult, project: pytest.Pytester, fault: str, *, gate: bool, writes: str = "never") -> None:
    """The FAULT names the database, every item is counted lost, the run is not stored, junit fails."""
    assert result.ret == (3 if gate else 1), result.outlines[-30:]
    # Every item ran and passed: only the database fails the session (crucible::faults, and crucible::gate refused).
    result.assert_outcomes(passed=N_ITEMS, failed=1, errors=1 if gate else 0)
    # Written in line, the two batches before the fault went with the file; from a process of its own, the writes
    # lag behind the tests and fewer may have been written.
    written = "the 10 item(s) of this run written before went with it" if writes == "never" else "*"
    result.stdout.fnmatch_lines([f"FAULT {fault}: crucible writes nothing more (never into a database that is not the run's); {written}",
                                 f"WARNING {N_ITEMS} of {N_ITEMS} items lost: * the run was not stored"])
    if gate:
        result.stdout.fnmatch_lines([f"GATE REFUSED this run could not be stored in * ({N_ITEMS} items lost): refusing to compare it"])
    output = "\n".join(result.outlines)
    assert "gate passed" not in output and "Traceback" not in output and "INTERNALERROR" not in output
    suite, cases = junit_cases(project.path / "junit.xml")
    [failure] = list(cases["faults"])
    assert failure.tag == "failure" and fault.split(":")[0] in (failure.get("message") or "")
    if gate:
        [refused] = list(cases["gate"])
        assert refused.tag == "error"
        assert {p.get("name"): p.get("value") for p in suite.iter("property")}["crucible.verdict"] == "refused"


def db_of(project: pytest.Pytester) -> Path:
    return project.path / ".crucible" / "crucible.db"


@pytest.mark.parametrize("writes", ["never", "always"])
def test_a_database_file_deleted_mid_run_is_a_fault_and_nothing_is_written_after(project, monkeypatch, writes) -> None:
    assert project.runpytest().ret == 0  # a baseline
    monkeypatch.setenv("DELETE_AFTER", "12")  # two batches of 5 written, two items waiting
    result = project.runpytest("--crucible-baseline=latest", "--junitxml=junit.xml", "-o", f"crucible_background_writes={writes}")
    assert_lost_run(result, project, "the database file was deleted or replaced during the run: */crucible.db (it was deleted)",
                    gate=True, writes=writes)
    # Nothing was written after: no new file at the path, no run anywhere.
    assert not any(db_of(project).parent.glob("crucible.db*")), sorted(db_of(project).parent.iterdir())


def test_a_database_file_deleted_mid_run_without_a_gate_fails_the_session(project, monkeypatch) -> None:
    monkeypatch.setenv("DELETE_AFTER", "12")
    result = project.runpytest("--junitxml=junit.xml", "-q")
    assert_lost_run(result, project, "the database file was deleted or replaced during the run: */crucible.db (it was deleted)",
                    gate=False)


@pytest.mark.parametrize("writes", ["never", "always"])
def test_a_database_file_replaced_mid_run_is_a_fault_and_the_new_file_is_left_as_it_was(project, monkeypatch, writes) -> None:
    other = project.path / "other.db"
    assert project.runpytest(f"--crucible-db={other}").ret == 0  # the database a cache restore brings back
    assert project.runpytest().ret == 0  # the baseline, in the file the session opens
    [(kept_run, kept_items)] = db_rows(other, "SELECT id, n_items FROM runs")
    before = {table: db_rows(other, f"SELECT COUNT(*) FROM {table}") for table in ("runs", "results", "item_metrics", "qrels")}
    replacement = project.path / "restored.db"
    shutil.copyfile(other, replacement)
    monkeypatch.setenv("REPLACE_AFTER", "12")
    monkeypatch.setenv("REPLACEMENT", str(replacement))
    result = project.runpytest("--crucible-baseline=latest", "--junitxml=junit.xml", "-o", f"crucible_background_writes={writes}")
    assert_lost_run(result, project, "the database file was deleted or replaced during the run: */crucible.db "
                                     "(another file is there now)", gate=True, writes=writes)
    # The restored file is as it was: nothing of this run went into it, and it is sound.
    path = db_of(project)
    assert db_rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert db_rows(path, "SELECT id, n_items FROM runs") == [(kept_run, kept_items)]
    assert {table: db_rows(path, f"SELECT COUNT(*) FROM {table}") for table in before} == before


# -- PostgreSQL ----------------------------------------------------------------------------------------------
SWAP_MODULE = """
import json, os
import psycopg

def swap():
    spec = json.loads(os.environ["SWAP"])
    if spec["how"] == "recreate":  # dropped and created again (a restore): crucible's schema in it, so writes would succeed
        with psycopg.connect(spec["admin"], autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {spec['name']} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {spec['name']}")
        from pytest_crucible.store import Store
        Store.open(spec["url"]).close()
    else:  # the address now leads to another server
        with open(spec["switch"], "w") as fh:
            fh.write("b")
"""


class SwitchingProxy:
    """A TCP forwarder on 127.0.0.1: to server A until the switch file says "b", then to B. Switching drops the
    connections it holds, as a failover or a DNS change does."""

    def __init__(self, port_a: int, port_b: int, switch: Path):
        self.ports, self.switch = {"a": port_a, "b": port_b}, switch
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.target = "a"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _current(self) -> str:
        target = "b" if self.switch.exists() and self.switch.read_text() == "b" else "a"
        with self.lock:
            if target != self.target:
                self.target = target
                for sock in self.open:
                    sock.close()
                self.open.clear()
        return target

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.ports[self._current()]))
            with self.lock:
                self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                self._current()
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for sock in self.open:
                sock.close()


def _pg_project(project: pytest.Pytester, monkeypatch) -> None:
    project.makepyfile(test_swap=SWAP_MODULE)
    monkeypatch.syspath_prepend(str(project.path))  # the conftest imports the swap (the session runs in this process)


def _count(url: str, sql: str) -> int:
    store = Store.open(url)
    try:
        return int(store.db.conn.execute(sql).fetchone()[0])
    finally:
        store.close()


@pytest.mark.slow
def test_a_postgres_database_dropped_and_created_again_mid_run_is_a_fault(project, postgres_server, monkeypatch) -> None:
    import json

    _pg_project(project, monkeypatch)
    url = postgres_server.create_database()
    name = url.rsplit("/", 1)[1]
    assert project.runpytest(f"--crucible-db={url}").ret == 0  # the baseline
    monkeypatch.setenv("SWAP", json.dumps({"how": "recreate", "admin": postgres_server.url(), "name": name, "url": url}))
    monkeypatch.setenv("PG_SWAP_AFTER", "12")
    result = project.runpytest(f"--crucible-db={url}", "--crucible-baseline=latest", "--junitxml=junit.xml")
    assert_lost_run(result, project, f"the database was dropped or replaced during the run: {url} "
                                     f"(database {name} was dropped and created again)", gate=True)
    # The new database got nothing of this run: the session refused to write there.
    assert _count(url, "SELECT COUNT(*) FROM runs") == 0 and _count(url, "SELECT COUNT(*) FROM results") == 0


@pytest.mark.slow
def test_a_postgres_address_that_leads_to_another_server_mid_run_is_a_fault(project, postgres_server, own_server, monkeypatch,
                                                                          tmp_path) -> None:
    import json

    import psycopg

    _pg_project(project, monkeypatch)
    name = postgres_server.create_database().rsplit("/", 1)[1]
    with psycopg.connect(own_server.url(), autocommit=True) as admin:  # the same name on the other server, schema and all
        admin.execute(f"CREATE DATABASE {name}")
    Store.open(own_server.url(name)).close()
    switch = tmp_path / "switch"
    proxy = SwitchingProxy(postgres_server.port, own_server.port, switch)
    try:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/{name}"
        assert project.runpytest(f"--crucible-db={url}").ret == 0  # the baseline, on server A
        monkeypatch.setenv("SWAP", json.dumps({"how": "switch", "switch": str(switch)}))
        monkeypatch.setenv("PG_SWAP_AFTER", "12")
        result = project.runpytest(f"--crucible-db={url}", "--crucible-baseline=latest", "--junitxml=junit.xml")
        assert_lost_run(result, project, f"the database was dropped or replaced during the run: {url} "
                                         "(another server answers there *)", gate=True)
    finally:
        proxy.close()
    other = own_server.url(name)
    assert _count(other, "SELECT COUNT(*) FROM runs") == 0 and _count(other, "SELECT COUNT(*) FROM results") == 0
    # Server A keeps the baseline and the batches written before the switch, never closed (the next open there marks it).
    assert _count(postgres_server.url(name), "SELECT COUNT(*) FROM results") == N_ITEMS + 10


def test_the_store_tells_its_file_from_another_at_the_same_path(tmp_path) -> None:
    store = Store.open(tmp_path / "a.db")
    try:
        assert store.replaced() is None
        Store.open(tmp_path / "b.db").close()
        os.replace(tmp_path / "b.db", tmp_path / "a.db")
        assert store.replaced() == f"the database file was deleted or replaced during the run: {tmp_path / 'a.db'} (another file is there now)"
        os.remove(tmp_path / "a.db")
        assert store.replaced() == f"the database file was deleted or replaced during the run: {tmp_path / 'a.db'} (it was deleted)"
    finally:
        store.close()
