"""The store on both backends: a SQLite file and a PostgreSQL database (a real server, tests/postgres_server.py).

The same Store, the same statements: runs and results read back the same, the ledgers refuse rewrites in the
database itself whoever connects, a fixed run id is taken once, and the plugin and the CLI write and read a
PostgreSQL database named by URL (``--crucible-db``, ``CRUCIBLE_DB``, ``--db``) without ever printing its password.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys

import pytest
from helpers import COMPONENT_RECORD, RANKED_CONFTEST, crucible_cli, write_golden

from pytest_crucible.store import RunIdTaken, RunNotFound, Store, StoreError, read_only_rows
from pytest_crucible.verdict.runs import metric_means

SCORE = {
    "item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?", "kind": "retrieval",
                                                "citations": [{"docId": "d", "chunkId": "d#1", "mode": "required"}]},
    "source": "golden_x.jsonl", "line": 1, "answer": "A", "retrieved": [{"chunk_id": "d#1", "doc_id": "d"}], "citations": ["d#1"],
    "confidence": 0.5, "abstained": False, "blocked": False, "detected_concepts": [], "latency_ms": 1.0,
    "metrics": {"ndcgAt10": 1.0, "recallAtK": 1.0}, "failures": [], "error": None, "outcome": "passed",
}


def new_run(store: Store, **fields) -> str:
    return store.start_run(config_hash="h" * 64, params={}, resolved={"retrievalLimit": 10}, mode="system",
                           outcome_mode="strict", **fields)


def raw_client(database):
    """A client of the database that is not the store (sqlite3 or psycopg, autocommit)."""
    if isinstance(database, str):
        import psycopg

        return psycopg.connect(database, autocommit=True)
    return sqlite3.connect(database, isolation_level=None)


def test_runs_results_and_metrics_read_back_the_same(database) -> None:
    store = Store.open(database)
    run_id = new_run(store, labels={"branch": "main"})
    store.record_score(run_id, SCORE)
    store.record_score(run_id, {**SCORE, "item_id": "q2", "item": {**SCORE["item"], "id": "q2"}, "metrics": {"ndcgAt10": 0.5},
                                "abstained": True})
    assert store.finish_run(run_id, status="complete", golden_hash="g") == "complete"
    run = store.get_run(run_id)
    assert (run["n_items"], run["n_scored"], run["status"], json.loads(run["labels"])) == (2, 2, "complete", {"branch": "main"})
    assert "rowid" not in run
    assert store.item_metrics(run_id) == {"ndcgAt10": {"q1": 1.0, "q2": 0.5}, "recallAtK": {"q1": 1.0}}
    view = {row["metric"]: (row["mean"], row["n"]) for row in store.db.query("SELECT * FROM run_metrics WHERE run_id = ?", [run_id])}
    assert view == metric_means(store.item_metrics(run_id)) == {"ndcgAt10": (0.75, 2), "recallAtK": (1.0, 1)}
    results = store.results(run_id)
    assert [row["item_id"] for row in results] == ["q1", "q2"]  # in the order they were recorded
    assert [row["abstained"] for row in results] == [0, 1]
    assert store.item_kinds(run_id) == {"q1": "retrieval", "q2": "retrieval"}
    # Recording an item again replaces its metrics instead of mixing old and new.
    store.record_score(run_id, {**SCORE, "metrics": {"ndcgAt10": 0.0}})
    assert store.item_metrics(run_id)["ndcgAt10"] == {"q1": 0.0, "q2": 0.5}
    assert [r["id"] for r in store.list_runs(labels={"branch": "main"})] == [run_id]
    assert store.list_runs(labels={"branch": "other"}) == []
    # Reading without the store's connection (xdist workers, the session's checks).
    assert read_only_rows(database, "SELECT id, status FROM runs") == [{"id": run_id, "status": "complete"}]
    store.close()


def test_latest_and_prefixes_resolve_alike(database) -> None:
    store = Store.open(database)
    with pytest.raises(RunNotFound, match="no complete run"):
        store.resolve_run("latest")
    first = new_run(store)
    store.record_score(first, SCORE)
    store.finish_run(first, status="complete", golden_hash=None)
    second = new_run(store)
    assert store.resolve_run("latest") == first  # the running one is not a baseline
    store.record_score(second, SCORE)
    store.finish_run(second, status="complete", golden_hash=None)
    assert store.resolve_run("latest") == second
    assert store.resolve_run("latest", exclude=second) == first
    assert store.resolve_run(second.lower()) == second  # ULID prefixes in either case
    with pytest.raises(StoreError, match="matches 2 runs"):
        store.resolve_run(first[:2])
    with pytest.raises(RunNotFound):
        store.resolve_run("ZZZZ")
    store.close()


def test_the_store_and_every_surface_resolve_a_reference_alike(database) -> None:
    """One resolver: ``Store.resolve_run`` and ``verdict.runs.resolve_run_ref`` give the same run and the
    same messages for ``latest``, ``latest:KEY=VALUE`` (labels, workspace=) and ids."""
    from pytest_crucible.verdict.runs import resolve_run_ref

    store = Store.open(database)
    runs = {}
    for name, labels, workspace in (("main", {"branch": "main"}, "default"), ("feature", {"branch": "feature"}, "default"),
                                    ("other", {"branch": "main"}, "team")):
        runs[name] = new_run(store, labels=labels, workspace=workspace)
        store.record_score(runs[name], SCORE)
        store.finish_run(runs[name], status="complete", golden_hash=None)
    for ref, workspace, expected in (("latest", None, "other"), ("latest", "default", "feature"),
                                     ("latest:branch=main", "default", "main"), ("latest:branch=main", None, "other"),
                                     ("latest:branch=main,workspace=default", None, "main"), (runs["feature"][:-2], "team", "feature")):
        assert store.resolve_run(ref, workspace=workspace) == resolve_run_ref(store, ref, workspace=workspace) == runs[expected]
    assert store.resolve_run("latest:branch=main", exclude=runs["other"]) == runs["main"]
    for ref, workspace, message in (("latest", "empty", r"no complete run in workspace 'empty' of .*\nHINT: run the whole golden set "
                                                        r"once to make a baseline .*--workspace NAME"),
                                    ("latest:branch=gone", None, r"no complete run labelled branch=gone in .*\nHINT: the complete "
                                                                 r"runs there carry branch: feature, main"),
                                    ("latest:branch", None, r"run reference 'latest:branch': expected latest:KEY=VALUE")):
        with pytest.raises(StoreError, match=message) as by_store:
            store.resolve_run(ref, workspace=workspace)
        with pytest.raises(StoreError) as by_surface:
            resolve_run_ref(store, ref, workspace=workspace)
        assert str(by_surface.value) == str(by_store.value)
    store.close()


def test_every_row_type_names_columns_of_its_table(database) -> None:
    """The write path's rows are NamedTuples whose fields are the INSERT's columns: each names real columns of its
    table, and the results row names every column a result is written with (none left to a default by mistake)."""
    from pytest_crucible.store.qrels import QrelRow
    from pytest_crucible.store.results import AttemptRow, ConceptRow, FeedbackRow, GoldenRow, MetricRow, RepeatRow, ResultRow

    store = Store.open(database)
    columns = {table: [row["column_name"] for row in store.db.query(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [table])]
        if store.db.dialect == "postgres" else [row["name"] for row in store.db.query(f"SELECT name FROM pragma_table_info('{table}')")]
        for table in ("golden_item_refs", "results", "item_metrics", "eval_feedback", "golden_concepts", "item_repeats",
                      "item_attempts", "qrels")}
    for table, row_type in (("golden_item_refs", GoldenRow), ("results", ResultRow), ("item_metrics", MetricRow),
                            ("eval_feedback", FeedbackRow), ("golden_concepts", ConceptRow), ("item_repeats", RepeatRow),
                            ("item_attempts", AttemptRow), ("qrels", QrelRow)):
        assert set(row_type._fields) <= set(columns[table]), (table, set(row_type._fields) - set(columns[table]))
    assert set(columns["results"]) - set(ResultRow._fields) <= {"rowid"}
    assert set(columns["qrels"]) - set(QrelRow._fields) == {"id"}  # the ledger numbers its own rows
    store.close()


def test_a_fixed_run_id_is_taken_once(database) -> None:
    store = Store.open(database)
    new_run(store, run_id="ci-42")
    with pytest.raises(RunIdTaken, match=r"--crucible-run-id=ci-42: .*is writing a run with this id right now"):
        new_run(store, run_id="ci-42")
    store.close()


@pytest.mark.parametrize("sql, refusal", [
    ("UPDATE qrels SET grade = 0", "qrels is an append-only ledger: UPDATE is refused"),
    ("DELETE FROM qrels", "qrels is an append-only ledger: DELETE is refused"),
    ("UPDATE eval_feedback SET error_class = 'correct'", "eval_feedback is an append-only queue: UPDATE is refused"),
    ("DELETE FROM eval_feedback", "eval_feedback is an append-only queue: DELETE is refused"),
    ("UPDATE human_labels SET value = 'x'", "human_labels is an append-only ledger: UPDATE is refused"),
])
def test_the_ledgers_refuse_rewrites_whoever_connects(database, sql: str, refusal: str) -> None:
    store = Store.open(database)
    run_id = new_run(store)
    store.record_score(run_id, SCORE)
    store.record_score(run_id, SCORE)  # idempotent: no duplicate provenance rows
    with store.db.conn:
        store.db.conn.execute("INSERT INTO eval_feedback (id, run_id, error_class, created_at) VALUES ('f1', ?, 'hallucination', 'now')",
                              [run_id])
        store.db.conn.execute("INSERT INTO human_labels (item_id, answer_hash, kind, value, source, created_at) "
                              "VALUES ('q1', 'h', 'crag', 'correct', 'ann', 'now')")
    snapshot = [store.db.conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
                for table in ("qrels", "eval_feedback", "human_labels")]
    assert [len(rows) for rows in snapshot] == [1, 1, 1]
    with pytest.raises(sqlite3.DatabaseError, match=refusal), store.db.conn:  # the store's own connection
        store.db.conn.execute(sql)
    client = raw_client(database)  # and any other client
    with pytest.raises(Exception, match=refusal):
        client.execute(sql)
    client.close()
    assert [store.db.conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
            for table in ("qrels", "eval_feedback", "human_labels")] == snapshot
    # The same pair judged by another source lives beside it.
    with store.db.conn:
        store.db.conn.execute("INSERT INTO qrels (query_id, doc_id, grade, source, judge_model, created_at) "
                              "VALUES ('q1', 'd', 1, 'human', '', 'now')")
    assert store.db.conn.execute("SELECT COUNT(*) FROM qrels").fetchone()[0] == 2
    # A second row with the id of a ledger row is dropped, never a replacement.
    with store.db.conn:
        store.db.conn.execute("INSERT INTO eval_feedback (id, run_id, error_class, created_at) VALUES ('f1', ?, 'correct', 'later')",
                              [run_id])
    assert store.db.conn.execute("SELECT error_class FROM eval_feedback").fetchall() == [("hallucination",)]
    store.close()


def test_postgres_truncate_is_refused_too(postgres_server) -> None:
    url = postgres_server.create_database()
    Store.open(url).close()
    client = raw_client(url)
    for table in ("qrels", "eval_feedback", "human_labels"):
        with pytest.raises(Exception, match=f"{table} is an append-only .*: TRUNCATE is refused"):
            client.execute(f"TRUNCATE {table} CASCADE")
    client.close()


# -- the plugin and the CLI on a PostgreSQL URL ------------------------------------------------------------
@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", [
        {"id": f"q-{n:02d}", "question": f"question {n}",
         "citations": [{"docId": d, "chunkId": c, "mode": "required"}]}
        for n, (c, d) in enumerate([("returns#p1", "returns"), ("bikes#p2", "bikes"), ("battery#p1", "battery"), ("faq#p9", "faq")] * 2)])
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\n")
    return pytester


def test_a_session_and_the_cli_on_postgres_never_show_the_password(project, postgres_server, monkeypatch) -> None:
    name = postgres_server.create_database().rsplit("/", 1)[1]
    url = postgres_server.url(name, password="s3cret-pw")  # the test cluster trusts local connections: any password works
    first = project.runpytest(f"--crucible-db={url}", "--junitxml=junit.xml", "--crucible-html=report.html")
    assert first.ret == pytest.ExitCode.OK, first.outlines
    monkeypatch.setenv("CRUCIBLE_DB", url)  # the same database, named by the environment (a CI secret)
    second = project.runpytest("--crucible-baseline=latest")
    assert second.ret == pytest.ExitCode.OK, second.outlines
    second.stdout.fnmatch_lines(["baseline * -> this run *", "gate passed: no significant regression"])
    second.stdout.fnmatch_lines([f"db postgresql://postgres:***@127.0.0.1:{postgres_server.port}/{name}"])

    monkeypatch.chdir(project.path)
    listed = crucible_cli("runs")  # CRUCIBLE_DB names the database for the CLI too
    assert listed.ret == 0 and len([line for line in listed.stdout.lines if line.startswith("01")]) == 2, listed.outlines
    assert not (project.path / ".crucible").exists()  # nothing went to the default file
    exported = crucible_cli("export", "latest", "--db", url, "-o", project.path / "export.json")
    assert exported.ret == 0
    store = Store.open(url)
    runs = store.list_runs()
    store.close()
    assert [run["status"] for run in runs] == ["complete", "complete"]
    seen = "\n".join([*first.outlines, *first.errlines, *second.outlines, *second.errlines, *listed.outlines, *exported.outlines,
                      (project.path / "junit.xml").read_text(), (project.path / "report.html").read_text(),
                      (project.path / "export.json").read_text(), json.dumps(runs)])
    assert "s3cret-pw" not in seen


def test_postgres_errors_are_one_line_and_a_hint(project, postgres_server, monkeypatch) -> None:
    closed = f"postgresql://postgres:s3cret-pw@127.0.0.1:{postgres_server.port + 1}/nowhere"  # no server there
    result = project.runpytest(f"--crucible-db={closed}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "cannot connect to the crucible database" in err and "HINT: check the URL" in err
    assert "s3cret-pw" not in err + result.stdout.str() and "Traceback" not in err
    cli = crucible_cli("runs", "--db", closed)
    assert cli.ret == 2 and "cannot connect" in cli.stderr.str() and "s3cret-pw" not in cli.stderr.str()
    # Without the driver: what to install.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    missing = crucible_cli("runs", "--db", postgres_server.url())
    assert missing.ret == 2
    assert "HINT: pip install 'pytest-crucible[postgres]' (psycopg 3)" in missing.stderr.str()


def test_the_http_api_serves_a_postgres_database(postgres_server) -> None:
    """`crucible serve` over a team's PostgreSQL database: keys, runs, metrics and a comparison read the same."""
    from api_server import add_run, client, new_key, serve_in_thread

    url = postgres_server.create_database()
    store = Store.open(url)
    first = add_run(store, workspace="team")
    second = add_run(store, workspace="team", shift=0.2)
    store.close()
    key = new_key(url, "team", "runs:read")
    with serve_in_thread(url) as base, client(base, key) as http:
        runs = http.get("/api/v1/evals/runs")
        assert runs.status_code == 200, runs.text
        assert {run["id"] for run in runs.json()["runs"]} == {first, second}
        metrics = http.get(f"/api/v1/evals/runs/{second}/metrics")
        assert metrics.status_code == 200, metrics.text
        assert metrics.json()["n"] == 12 and metrics.json()["byFacet"]["questionType"]["simple"]["n"] == 6
        compared = http.get("/api/v1/evals/runs/compare", params={"a": first, "b": second})
        assert compared.status_code == 200, compared.text
        ndcg = compared.json()["metrics"]["ndcgAt10"]
        assert ndcg["significant"] is True and ndcg["delta"] == pytest.approx(0.2)
        assert http.get("/api/v1/evals/runs", headers={"Authorization": "Bearer crk_wrong_key"}).status_code == 401


def test_shard_files_merge_into_a_team_database(project, postgres_server) -> None:
    """CI shards write files of their own (one --crucible-run-id); the merge goes into the team's database."""
    first_half = "q-00 or q-01 or q-02 or q-03"
    for db, selection in (("shard-1.db", first_half), ("shard-2.db", f"not ({first_half})")):
        assert project.runpytest("--crucible-run-id=ci-9", f"--crucible-db={db}", "-k", selection).ret == pytest.ExitCode.OK
    name = postgres_server.create_database().rsplit("/", 1)[1]
    url = postgres_server.url(name, password="s3cret-pw")
    merged = crucible_cli("merge", project.path / "shard-1.db", project.path / "shard-2.db", "-o", url)
    assert merged.ret == 0, merged.errlines
    assert merged.stdout.lines[0].startswith(f"merged run ci-9 from 2 shard(s) into postgresql://postgres:***@127.0.0.1:"
                                             f"{postgres_server.port}/{name}: 8 items, status complete")
    assert "s3cret-pw" not in merged.stdout.str() + merged.stderr.str()
    store = Store.open(url)
    try:
        run = store.get_run("ci-9")
        assert (run["status"], run["n_items"]) == ("complete", 8) and len(store.results("ci-9")) == 8
    finally:
        store.close()
    again = crucible_cli("merge", project.path / "shard-1.db", project.path / "shard-2.db", "-o", url)
    assert again.ret == 0 and "run ci-9 was already in" in again.stderr.str()
    # A shard is a file of its own.
    shard_url = crucible_cli("merge", url, project.path / "shard-2.db", "-o", project.path / "run.db")
    assert shard_url.ret == 2
    assert "crucible merge joins SQLite shard files (each shard's --crucible-db)" in shard_url.stderr.lines[0]


@pytest.mark.slow
def test_eight_sessions_write_one_new_postgres_database_at_once(project, postgres_server) -> None:
    """Eight pytest processes meet one empty database: one creates the schema while the others wait for it,
    then all eight write their runs side by side; every row is there, every run complete, and the provenance
    judgments of the shared golden items are appended once."""
    import os
    import subprocess

    url = postgres_server.create_database()
    env = {**os.environ, "CRUCIBLE_DB": url}
    sessions = [subprocess.Popen([*project._getpytestargs(), "-p", "no:cacheprovider", "-q", f"--crucible-label=shard={n}"],
                                 cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for n in range(8)]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0] * 8, "\n".join(outputs)
    store = Store.open(url)
    try:
        runs = store.list_runs()
        assert sorted(json.loads(run["labels"])["shard"] for run in runs) == [str(n) for n in range(8)]
        assert {(run["status"], run["n_items"], run["n_scored"]) for run in runs} == {("complete", 8, 8)}
        assert store.db.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 64
        assert store.db.conn.execute("SELECT COUNT(*) FROM item_metrics").fetchone()[0] == 64 * 5
        assert store.db.conn.execute("SELECT COUNT(*) FROM qrels").fetchone()[0] == 8  # one per golden citation
    finally:
        store.close()


# The pipeline stops the database server after item STOP_AT and starts it again after item START_AT (0: never):
# a server that goes away mid-run, for good or for a restart.
FLAKY_SERVER_CONFTEST = RANKED_CONFTEST.replace(
    "    def pipeline(question, *, item, config, mode):\n",
    "    def pipeline(question, *, item, config, mode):\n"
    "        import json, os, subprocess\n"
    "        n = int(item.id.split('-')[1]) + 1\n"
    "        if n == int(os.environ.get('STOP_AT', 0)):\n"
    "            subprocess.run(json.loads(os.environ['STOP_COMMAND']), check=True, capture_output=True)\n"
    "        if n == int(os.environ.get('START_AT', 0)):\n"
    "            subprocess.run(json.loads(os.environ['START_COMMAND']), check=True, capture_output=True)\n")


def _server_gone_project(project, own_server, monkeypatch, *, stop_at: int, start_at: int = 0):
    import pytest_crucible.store.recorder

    project.makeconftest(FLAKY_SERVER_CONFTEST)
    write_golden(project.path / "golden_set.jsonl", [
        {"id": f"q-{n:02d}", "question": f"question {n}", "citations": [{"docId": "returns", "chunkId": "returns#p1", "mode": "required"}]}
        for n in range(20)])
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_ITEMS", 5)  # written every 5 items, never on a timer
    monkeypatch.setattr(pytest_crucible.store.recorder, "FLUSH_SECONDS", 1e9)
    monkeypatch.setenv("STOP_AT", str(stop_at))
    monkeypatch.setenv("START_AT", str(start_at))
    monkeypatch.setenv("STOP_COMMAND", json.dumps(own_server.command("stop")))
    monkeypatch.setenv("START_COMMAND", json.dumps(own_server.command("start")))
    return own_server.create_database()


@pytest.mark.slow
@pytest.mark.parametrize("writes", ["never", "always"])
def test_a_database_server_that_goes_away_mid_run_never_gives_a_pass(project, own_server, monkeypatch, writes) -> None:
    url = _server_gone_project(project, own_server, monkeypatch, stop_at=0)
    assert project.runpytest(f"--crucible-db={url}").ret == pytest.ExitCode.OK  # the baseline, before any fault
    monkeypatch.setenv("STOP_AT", "12")  # after two batches are in: gone for good
    result = project.runpytest(f"--crucible-db={url}", "--crucible-baseline=latest", "--junitxml=junit.xml",
                               "-o", f"crucible_background_writes={writes}")
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == 3, output  # the gate is refused: never a pass on a run the database did not get
    assert "FAULT could not record 5 item(s)" in output and "GATE REFUSED" in output and "gate passed" not in output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert 'name="crucible.verdict" value="refused"' in (project.path / "junit.xml").read_text()
    own_server.start_again()
    store = Store.open(url)
    try:
        runs = {run["id"]: run for run in store.list_runs()}
        statuses = sorted(run["status"] for run in runs.values())
        assert statuses in (["complete", "running"], ["complete", "interrupted"]), statuses  # never complete twice
        [partial] = [run_id for run_id, run in runs.items() if run["status"] != "complete"]
        stored = store.db.conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", [partial]).fetchone()[0]
        # Written in line, the two batches before the server went away are in. Written from a process of its own,
        # the writes lag behind the tests: fewer may be (here, the process was still connecting). Either way every
        # item is stored or counted lost, never both, never neither.
        assert stored == 10 if writes == "never" else stored <= 10
        [lost] = re.findall(r"WARNING (\d+) of 20 items lost", output)
        assert stored + int(lost) == 20
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("writes", ["never", "always"])
def test_a_database_server_that_restarts_mid_run_is_reached_again(project, own_server, monkeypatch, writes) -> None:
    url = _server_gone_project(project, own_server, monkeypatch, stop_at=7, start_at=8)  # down between two batches
    result = project.runpytest(f"--crucible-db={url}", "-o", f"crucible_background_writes={writes}")
    assert result.ret == pytest.ExitCode.OK, result.outlines
    store = Store.open(url)
    try:
        [run] = store.list_runs()
        assert (run["status"], run["n_items"], run["n_scored"]) == ("complete", 20, 20)
    finally:
        store.close()


def _table(database, sql: str) -> list[tuple]:
    store = Store.open(database, create=False)
    try:
        return sorted(tuple(row) for row in store.db.conn.execute(sql).fetchall())
    finally:
        store.close()


def test_copy_moves_history_between_a_file_and_a_server_and_twice_adds_nothing(project, postgres_server, tmp_path) -> None:
    file_db = project.path / ".crucible" / "crucible.db"
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert crucible_cli("qrels", "override", "q-01", "bikes#p2", "0", "--by", "ann", "--db", file_db).ret == 0
    assert crucible_cli("qrels", "override", "q-01", "bikes#p2", "0", "--by", "ann", "--db", file_db).ret == 0  # twice: history
    url = postgres_server.create_database()

    first = crucible_cli("copy", file_db, url)
    assert first.ret == 0, first.errlines
    assert first.stdout.lines == [f"copied 2 run(s) from {file_db} to {url}; ledger rows added: qrels 10"]
    again = crucible_cli("copy", file_db, url)
    assert again.stdout.lines == [f"copied 0 run(s) from {file_db} to {url} (2 already there); ledger rows added: none"]
    for sql in ("SELECT id, status, n_items, config_hash, labels FROM runs", "SELECT run_id, item_id, metric, value FROM item_metrics",
                "SELECT run_id, item_id, answer, (SELECT body FROM contents WHERE hash = retrieved_hash) AS retrieved, outcome FROM results", "SELECT query_id, chunk_id, doc_id, grade, source FROM qrels"):
        assert _table(file_db, sql) == _table(url, sql), sql
    # And back into a new file: the same, item order included.
    back = tmp_path / "back.db"
    assert crucible_cli("copy", url, back).ret == 0
    assert _table(back, "SELECT query_id, chunk_id, grade, source, created_by FROM qrels") == _table(
        file_db, "SELECT query_id, chunk_id, grade, source, created_by FROM qrels")
    store = Store.open(back)
    [newest, _] = store.list_runs()
    assert [row["item_id"] for row in store.results(newest["id"])] == [f"q-{n:02d}" for n in range(8)]
    # The values the runs refer to (golden items' texts, rankings: schema 19's contents) travel with them, once:
    # the two runs of the same items share theirs, and every run exports as it did from the file it came from.
    exports = {run["id"]: store.export_run(run["id"]) for run in store.list_runs()}
    n_contents = store.db.conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0]
    referred, refs = store.db.conn.execute("SELECT COUNT(DISTINCT ref), COUNT(*) FROM (SELECT item_hash AS ref FROM golden_item_refs"
                                           " UNION ALL SELECT retrieved_hash FROM results) AS refs").fetchone()
    store.close()
    assert n_contents == referred and refs == 2 * 2 * 8  # each value once, whichever run stored it first
    for database in (file_db, url):
        store = Store.open(database)
        assert {run_id: store.export_run(run_id) for run_id in exports} == exports
        assert store.db.conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == n_contents
        store.close()
    # A run already there under another identity is refused, naming it.
    other = Store.open(tmp_path / "other.db")
    new_run(other, run_id=newest["id"])
    other.close()
    clash = crucible_cli("copy", url, tmp_path / "other.db")
    assert clash.ret == 2 and f"run {newest['id']}: " in clash.stderr.str() and "holds another run with this id" in clash.stderr.str()


def test_a_verdict_judged_on_one_runner_is_free_on_the_next(project, postgres_server, tmp_path) -> None:
    """The judge cache lives in the team's database: a second session elsewhere (another checkout, same
    items and answers) judges nothing again."""
    import shutil

    url = postgres_server.create_database()
    first = project.runpytest("--crucible-mode=system", f"--crucible-db={url}")
    assert first.ret == pytest.ExitCode.OK, first.outlines
    first.stdout.re_match_lines([r"judge lexical-v\d \(offline heuristic\): \d+ requests, \d+ cached, [1-9]\d* judged, 0 failed"])
    other_runner = tmp_path / "runner-2"
    shutil.copytree(project.path, other_runner, ignore=shutil.ignore_patterns(".crucible", "__pycache__"))
    second = project.runpytest("--crucible-mode=system", f"--crucible-db={url}", f"--rootdir={other_runner}", other_runner)
    assert second.ret == pytest.ExitCode.OK, second.outlines
    second.stdout.re_match_lines([r"judge lexical-v\d \(offline heuristic\): (\d+) requests, \1 cached, 0 judged, 0 failed"])


def test_a_second_run_of_the_same_items_stores_their_texts_once(database) -> None:
    """Schema 19: a golden item's text and a ranking are stored once (contents, keyed by the hash of the text) on
    either backend, however many runs and items repeat them; each run reads its own back whole, and a changed
    ranking is one new value."""
    from pytest_crucible.store.contents import content_hash

    store = Store.open(database)
    try:
        chunks = [{"chunk_id": f"d#{n}", "doc_id": "d", "text": f"passage {n} " * 40, "score": 10.0 - n} for n in range(10)]
        scores = [{**SCORE, "item_id": f"q{n}", "item": {**SCORE["item"], "id": f"q{n}"}, "retrieved": chunks if n else []}
                  for n in range(3)]
        runs = []
        for _ in range(2):
            runs.append(new_run(store))
            store.record_scores(runs[-1], scores)
        count = store.db.conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0]
        assert count == 3 + 2  # three golden items; one ranking for q1 and q2, one empty one for q0
        for run_id in runs:
            assert [row["retrieved"] for row in store.results(run_id, decoded=True)] == [[], chunks, chunks]
            assert store.golden_items(run_id) == [score["item"] for score in scores]
        store.record_scores(new_run(store), [{**scores[1], "retrieved": chunks[::-1]}])
        assert store.db.conn.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == count + 1
        # The key is the hash of the text, the same on every backend (a migration hashes in SQL: content_hash()).
        [(body, key, in_sql)] = store.db.conn.execute(
            "SELECT body, hash, content_hash(body) FROM contents WHERE body = '[]'").fetchall()
        assert key == in_sql == content_hash(body) == content_hash("[]")
    finally:
        store.close()
