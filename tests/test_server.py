"""`crucible serve`: the spec's HTTP API, driven over real HTTP on 127.0.0.1.

Every endpoint, every status it answers (200/201, 401, 403, 404, 409, 413, 422), cross-workspace
isolation (another workspace's run answers exactly as a missing one), read-only reads, the
promote transaction, the committed OpenAPI copy, and the command itself.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from api_server import add_run, client, new_key, serve_in_thread
from helpers import RANKED_CONFTEST, examples, write_golden

import pytest_crucible.server.app as server_app
from pytest_crucible.cli import main
from pytest_crucible.defaults import ServerLimits
from pytest_crucible.store import Store

REPO = Path(__file__).resolve().parents[1]
METRICS = "/api/v1/evals/runs/{}/metrics"
COMPARE = "/api/v1/evals/runs/compare"
RUNS = "/api/v1/evals/runs"
PROMOTE = "/api/w/{}/evals/feedback/promote"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api(tmp_path_factory, request):
    """One database with two workspaces, its keys, and a server on it: a SQLite file, then a PostgreSQL database."""
    db = (tmp_path_factory.mktemp("api") / "crucible.db" if request.param == "sqlite"
          else request.getfixturevalue("postgres_server").create_database())
    store = Store.open(db)
    runs = {
        "a": add_run(store, workspace="shop"),
        "b": add_run(store, workspace="shop", shift=0.2, labels={"model": "chat", "collection": "shop", "mode": "rerank"}),
        "other_judge": add_run(store, workspace="shop", judge="claude-sonnet-5", config_hash="77" * 32),
        "other_prompt": add_run(store, workspace="shop", prompt="crucible-v2"),
        "foreign": add_run(store, workspace="search-team"),
    }
    store.close()
    keys = {
        "runs": new_key(db, "shop", "runs:read"),
        "kb": new_key(db, "shop", "kb:read"),
        "write": new_key(db, "shop", "feedback:write"),
        "foreign": new_key(db, "search-team", "runs:read", "feedback:write"),
    }
    with serve_in_thread(db) as url:
        yield {"url": url, "db": db, "runs": runs, "keys": keys}


def connect(db):
    """The test's own connection to the database, on either backend (``execute``, ``close``)."""
    return Store.open(db).db.conn


def get(api, path, key="runs", **params):
    with client(api["url"], api["keys"].get(key, key) if key else None) as http:
        return http.get(path, params=params)


def promote_body(run_id, **overrides):
    body = {"runId": run_id, "question": "What is the approved retention period?",
            "correctedAssertions": ["Audit exports are retained for seven years."],
            "citations": [{"docId": "01KZDOC0000000000000000000", "mode": "required"}],
            "errorClass": "incomplete", "tags": ["topic:retention"]}
    body.update(overrides)
    return body


def cli_json(argv, capsys) -> dict:
    main(argv)
    return json.loads(capsys.readouterr().out)


# -- 200: the spec's shapes, the same documents as the CLI's --------------------------------------
@pytest.mark.parametrize("key", ["runs", "kb"])
def test_metrics_is_the_cli_document_for_either_read_scope(api, key, capsys) -> None:
    run_id = api["runs"]["a"]
    response = get(api, METRICS.format(run_id), key)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    document = response.json()
    assert document == cli_json(["metrics", run_id, "--json", "--db", str(api["db"])], capsys)
    assert {"runId", "configHash", "n", "retrieval", "ragas", "abstention", "judge"} <= set(document)
    assert document["runId"] == run_id and document["n"] == 12
    assert document["judge"] == {"model": "claude-haiku-5-5", "promptVersion": "crucible-v1"}
    assert "precisionAtK" not in document["retrieval"]  # not computed in this run: left out, never zero-filled
    assert document["byFacet"]["questionType"]["simple"]["n"] == 6


def test_compare_is_the_cli_document(api, capsys) -> None:
    a, b = api["runs"]["a"], api["runs"]["b"]
    response = get(api, COMPARE, a=a, b=b)
    assert response.status_code == 200
    document = response.json()
    assert document == cli_json(["compare", a, b, "--json", "--db", str(api["db"])], capsys)
    assert (document["a"], document["b"], document["pairedItems"], document["seed"]) == (a, b, 12, 1337)
    ndcg = document["metrics"]["ndcgAt10"]
    assert set(ndcg) == {"a", "b", "delta", "ci", "p", "significant"}
    assert ndcg["significant"] is True and ndcg["delta"] == pytest.approx(0.2)
    assert document["metrics"]["recallAtK"]["significant"] is False


def test_list_runs_of_the_key_workspace_with_filters(api) -> None:
    runs = api["runs"]
    listed = get(api, RUNS).json()["runs"]
    assert [run["id"] for run in listed] == [runs["other_prompt"], runs["other_judge"], runs["b"], runs["a"]]  # newest first
    assert set(listed[0]) >= {"id", "workspace", "status", "startedAt", "mode", "configHash", "n", "labels", "judge"}
    assert all(run["workspace"] == "shop" for run in listed)
    assert [r["id"] for r in get(api, RUNS, workspace="shop", limit=1).json()["runs"]] == [runs["other_prompt"]]
    assert [r["id"] for r in get(api, RUNS, configHash="7777").json()["runs"]] == [runs["other_judge"]]
    assert [r["id"] for r in get(api, RUNS, label="mode:rerank").json()["runs"]] == [runs["b"]]
    assert [r["id"] for r in get(api, RUNS, label=["mode:rerank", "collection:shop"]).json()["runs"]] == [runs["b"]]
    assert get(api, RUNS, label="mode:none").json() == {"runs": []}
    assert [r["id"] for r in get(api, RUNS, "foreign").json()["runs"]] == [runs["foreign"]]


# -- 401: no key, or not a live one -----------------------------------------------------------------
def test_every_endpoint_answers_401_without_a_valid_key(api) -> None:
    run_id, key = api["runs"]["a"], api["keys"]["runs"]
    key_id = key.split("_")[1]
    requests = [("GET", METRICS.format(run_id), None), ("GET", COMPARE + f"?a={run_id}&b={run_id}", None),
                ("GET", RUNS, None), ("POST", PROMOTE.format("shop"), promote_body(run_id)),
                ("POST", PROMOTE.format("shop"), "{not json")]  # authentication comes before parsing
    credentials = [None, "Basic dXNlcjpwYXNz", "Bearer", "Bearer nonsense", f"Bearer crk_{key_id}_wrong-secret",
                   "Bearer crk_01NOSUCHKEY0000000000000000_secret", f"Bearer {key}x"]
    bodies = set()
    for method, path, body in requests:
        for header in credentials:
            headers = {"Authorization": header} if header else {}
            content = body if isinstance(body, str) else json.dumps(body) if body else None
            with client(api["url"]) as http:
                response = http.request(method, path, headers={**headers, "content-type": "application/json"}, content=content)
            assert response.status_code == 401, (method, path, header, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["error"] == "unauthorized"
            bodies.add((header is None or header == "Bearer" or header.startswith("Basic"), response.text))
    # One body for "no key", one for "a key that is not a live one": neither says which part was wrong.
    assert len(bodies) == 2


# -- 403: the key lacks the scope -------------------------------------------------------------------
def test_wrong_scope_is_403_naming_the_scope(api) -> None:
    run_id = api["runs"]["a"]
    for path, params in ((METRICS.format(run_id), {}), (COMPARE, {"a": run_id, "b": run_id}), (RUNS, {})):
        response = get(api, path, "write", **params)
        assert response.status_code == 403, path
        assert response.json()["message"] == "this key lacks the scope kb:read or runs:read"
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
    with client(api["url"], api["keys"]["runs"]) as http:
        response = http.post(PROMOTE.format("shop"), json=promote_body(run_id))
    assert response.status_code == 403 and "feedback:write" in response.json()["message"]


def test_a_key_lists_only_its_own_workspace(api) -> None:
    response = get(api, RUNS, workspace="search-team")
    assert response.status_code == 403 and response.json()["message"] == "this key reads workspace 'shop' only"
    # The same answer for a workspace that does not exist: nothing to learn about others.
    assert get(api, RUNS, workspace="no-such-team").text == response.text


# -- 404: another workspace's run is indistinguishable from a missing one -------------------------
def _same_answer(foreign, missing, foreign_id, missing_id) -> None:
    assert foreign.status_code == missing.status_code == 404
    assert foreign.text.replace(foreign_id, "ID") == missing.text.replace(missing_id, "ID")
    drop = {"date", "content-length"}
    assert {k: v for k, v in foreign.headers.items() if k not in drop} == {k: v for k, v in missing.headers.items() if k not in drop}


def test_another_workspace_run_answers_exactly_as_a_missing_run(api) -> None:
    foreign, a = api["runs"]["foreign"], api["runs"]["a"]
    missing = "01NOSUCHRUN0000000000000000"[: len(foreign)]
    _same_answer(get(api, METRICS.format(foreign)), get(api, METRICS.format(missing)), foreign, missing)
    assert get(api, METRICS.format(foreign)).json() == {"error": "not_found", "message": f"no run {foreign}",
                                                      "hint": "GET /api/v1/evals/runs lists the runs this key can read"}
    for side in ("a", "b"):
        other = "b" if side == "a" else "a"
        _same_answer(get(api, COMPARE, **{side: foreign, other: a}), get(api, COMPARE, **{side: missing, other: a}), foreign, missing)
    # And the other way round: the foreign key cannot see shop's runs.
    assert get(api, METRICS.format(a), "foreign").status_code == 404
    with client(api["url"], api["keys"]["write"]) as http:
        _same_answer(http.post(PROMOTE.format("shop"), json=promote_body(foreign)),
                     http.post(PROMOTE.format("shop"), json=promote_body(missing)), foreign, missing)


def test_promote_result_of_another_workspace_is_as_a_missing_result(api) -> None:
    conn = connect(api["db"])
    foreign_result = conn.execute("SELECT result_id FROM results WHERE run_id = ? LIMIT 1", [api["runs"]["foreign"]]).fetchone()[0]
    conn.close()
    missing_result = "01NOSUCHRESULT00000000000000"[: len(foreign_result)]
    a = api["runs"]["a"]
    with client(api["url"], api["keys"]["write"]) as http:
        foreign = http.post(PROMOTE.format("shop"), json=promote_body(a, resultId=foreign_result))
        missing = http.post(PROMOTE.format("shop"), json=promote_body(a, resultId=missing_result))
    _same_answer(foreign, missing, foreign_result, missing_result)
    assert "is not a result of this run" in foreign.json()["message"]


# -- 409: runs judged differently are refused --------------------------------------------------------
@pytest.mark.parametrize("other, what", [("other_judge", "judge models"), ("other_prompt", "judge prompt versions")])
def test_comparing_runs_of_different_judges_is_409(api, other, what) -> None:
    response = get(api, COMPARE, a=api["runs"]["a"], b=api["runs"][other])
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "conflict" and f"different {what}" in body["message"]
    assert body["hint"].startswith("judge-based metrics are only comparable under the same judge")


# -- 422: invalid parameters and bodies name the field ----------------------------------------------
def test_invalid_requests_are_422_naming_the_field(api) -> None:
    a = api["runs"]["a"]
    response = get(api, COMPARE, a=a)
    assert response.status_code == 422
    assert response.json()["fields"] == [{"location": "query", "field": "b", "message": "Field required"}]
    assert get(api, RUNS, limit=0).json()["fields"][0]["field"] == "limit"
    bad_label = get(api, RUNS, label="no-colon")
    assert bad_label.status_code == 422 and bad_label.json()["fields"][0]["field"] == "label"
    # A floor that is not a finite number would switch the gate off: refused, naming the field.
    for floor in ("ndcgAt10=NaN", "ndcgAt10=inf"):
        bad_floor = get(api, COMPARE, a=a, b=api["runs"]["b"], failUnder=floor)
        assert bad_floor.status_code == 422 and bad_floor.json()["fields"][0]["field"] == "failUnder", bad_floor.text
    for field, value in (("margin", "ndcgAt10=NaN"), ("margin", "ndcgAt10=0")):
        bad = get(api, COMPARE, a=a, b=api["runs"]["b"], **{field: value})
        assert bad.status_code == 422 and bad.json()["fields"][0]["field"] == field, bad.text
    # A margin reaches the verdict of every metric it names, as in the session and `crucible compare`.
    judged = get(api, COMPARE, a=a, b=api["runs"]["b"], margin="ndcgAt10=0.5").json()
    assert judged["metrics"]["ndcgAt10"]["margin"] == 0.5
    assert judged["verdicts"]["ndcgAt10"] in ("improved", "non-inferior", "inferior", "inconclusive")
    cases = {
        "correctedAssertions": promote_body(a, correctedAssertions=[]),
        "errorClass": promote_body(a, errorClass="vibes"),
        "citations[0].mode": promote_body(a, citations=[{"docId": "d", "mode": "must"}]),
        "colour": promote_body(a, colour="red"),
        "runId": {key: value for key, value in promote_body(a).items() if key != "runId"},
    }
    with client(api["url"], api["keys"]["write"]) as http:
        for field, body in cases.items():
            response = http.post(PROMOTE.format("shop"), json=body)
            assert response.status_code == 422, field
            assert response.json()["message"].startswith(f"body: field '{field}': "), response.json()
            assert response.json()["fields"][0] == {"location": "body", "field": field, "message": response.json()["fields"][0]["message"]}
        response = http.post(PROMOTE.format("shop"), content=b'{"runId": ', headers={"content-type": "application/json"})
        assert response.status_code == 422 and response.json()["message"].startswith("body: not valid JSON")
        response = http.post(PROMOTE.format("shop"), json=[1, 2])
        assert response.status_code == 422
        # What the JSON reader gives up on, and text SQLite cannot store: the same checks as `crucible promote`.
        for raw, problem in ((b"[" * 3000 + b"]" * 3000, "body: not valid JSON: nested too deeply"),
                             (b'{"runId": 1' + b"0" * 5000 + b"}", "body: not valid JSON: a number has too many digits"),
                             (json.dumps(promote_body(a, tags=["ok", "\udfff"])).encode(), "body: field 'tags[1]': not valid Unicode")):
            response = http.post(PROMOTE.format("shop"), content=raw, headers={"content-type": "application/json"})
            assert response.status_code == 422 and response.json()["message"].startswith(problem), response.text


# -- 413: bodies are size-limited -------------------------------------------------------------------
def test_request_bodies_over_64_kib_are_413(api) -> None:
    a = api["runs"]["a"]
    big = promote_body(a, correctedAssertions=["x" * 70_000])
    with client(api["url"], api["keys"]["write"]) as http:
        declared = http.post(PROMOTE.format("shop"), json=big)
        streamed = http.post(PROMOTE.format("shop"), content=(chunk for chunk in [json.dumps(big).encode()]),
                             headers={"content-type": "application/json"})  # chunked: no Content-Length
        fits = http.post(PROMOTE.format("shop"), json=promote_body(a, correctedAssertions=["x" * 60_000]))
    for response in (declared, streamed):
        assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert "transfer-encoding" not in declared.request.headers and streamed.request.headers["transfer-encoding"] == "chunked"
    assert fits.status_code == 201


# -- promote: 201, the spec's shape, one transaction ---------------------------------------------------
def test_promote_writes_the_draft_and_its_feedback_row(api, capsys) -> None:
    a = api["runs"]["a"]
    conn = connect(api["db"])
    result_id = conn.execute("SELECT result_id FROM results WHERE run_id = ? ORDER BY item_id LIMIT 1", [a]).fetchone()[0]
    conn.close()
    with client(api["url"], api["keys"]["write"]) as http:
        response = http.post(PROMOTE.format("shop"), json=promote_body(a, resultId=result_id, correctedBy="user_01KZ"))
        anonymous = http.post(PROMOTE.format("shop"), json=promote_body(a))
    assert response.status_code == 201
    item, feedback = response.json()["item"], response.json()["feedback"]
    assert item == {"id": item["id"], "status": "draft", "question": "What is the approved retention period?",
                    "assertions": [{"text": "Audit exports are retained for seven years.", "kind": "must", "weight": 1}],
                    "citations": [{"docId": "01KZDOC0000000000000000000", "mode": "required"}], "tags": ["topic:retention"]}
    key_id = api["keys"]["write"].split("_")[1]
    assert feedback == {"id": feedback["id"], "runId": a, "resultId": result_id, "errorClass": "incomplete",
                        "correctedBy": "user_01KZ", "promotedBy": f"key:{key_id}",
                        "note": f"Correction promoted to golden item {item['id']}."}
    # Without a reviewer's name, the key that wrote it is on the audit row.
    assert anonymous.json()["feedback"]["correctedBy"] == f"key:{key_id}"
    conn = connect(api["db"])
    assert conn.execute("SELECT golden_item_id, run_id, result_id, corrected_by FROM eval_feedback WHERE id = ?",
                        [feedback["id"]]).fetchone() == (item["id"], a, result_id, "user_01KZ")
    conn.close()
    main(["golden", "export", "-o", "-", "--workspace", "shop", "--db", str(api["db"])])
    drafts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert item["id"] in {draft["id"] for draft in drafts}


def test_promote_to_another_workspace_path_is_403_whether_or_not_it_exists(api) -> None:
    a = api["runs"]["a"]
    with client(api["url"], api["keys"]["write"]) as http:
        existing = http.post(PROMOTE.format("search-team"), json=promote_body(a))
        unknown = http.post(PROMOTE.format("no-such-team"), json=promote_body(a))
    assert existing.status_code == unknown.status_code == 403
    assert existing.text == unknown.text
    assert existing.json()["message"] == "this key writes to workspace 'shop' only"


def test_a_failed_promote_write_rolls_back_both_rows(tmp_path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    run_id = add_run(store, workspace="shop")
    # The second insert of the transaction fails after the first succeeded.
    store.db.conn.execute("CREATE TRIGGER fail_drafts BEFORE INSERT ON golden_drafts BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    store.db.conn.commit()
    store.close()
    key = new_key(db, "shop", "feedback:write")
    conn = sqlite3.connect(db)
    before = [line for line in conn.iterdump() if "api_keys" not in line]
    conn.close()
    with serve_in_thread(db) as url, client(url, key) as http:
        response = http.post(PROMOTE.format("shop"), json=promote_body(run_id))
    assert response.status_code == 500
    assert response.json()["error"] == "write_failed" and "nothing was written" in response.json()["message"]
    conn = sqlite3.connect(db)
    assert [line for line in conn.iterdump() if "api_keys" not in line] == before
    assert conn.execute("SELECT COUNT(*) FROM eval_feedback WHERE golden_item_id IS NOT NULL").fetchone() == (0,)
    conn.close()


# -- reads never write ---------------------------------------------------------------------------------
def test_read_endpoints_open_the_database_read_only(api, monkeypatch) -> None:
    def no_writing_open(*args, **kwargs):
        raise AssertionError("a read endpoint opened the database for writing")

    monkeypatch.setattr(server_app.Store, "open", no_writing_open)
    a, b = api["runs"]["a"], api["runs"]["b"]
    assert get(api, METRICS.format(a)).status_code == 200
    assert get(api, COMPARE, a=a, b=b).status_code == 200
    assert get(api, RUNS).status_code == 200
    monkeypatch.undo()
    reader = Store.open_read_only(api["db"])
    with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only"):  # SQLite's words, PostgreSQL's
        reader.db.conn.execute("DELETE FROM runs")
    reader.close()


# -- the OpenAPI document ----------------------------------------------------------------------------
def test_the_committed_openapi_copy_is_what_the_server_serves(api) -> None:
    with client(api["url"]) as http:  # public: no key needed to read the contract
        served = http.get("/openapi.json")
    assert served.status_code == 200
    committed = json.loads((REPO / "docs" / "openapi.json").read_text(encoding="utf-8"))
    assert served.json() == committed, "docs/openapi.json is stale: crucible serve --openapi > docs/openapi.json"
    paths = served.json()["paths"]
    assert set(paths) == {RUNS, COMPARE, "/api/v1/evals/runs/{id}/metrics", "/api/w/{workspaceId}/evals/feedback/promote"}
    parameters = paths[COMPARE]["get"]["parameters"]
    # The spec's two required parameters, then the gate's options (the same as crucible compare's).
    assert [p["name"] for p in parameters if p["required"]] == ["a", "b"]
    assert [p["name"] for p in parameters if not p["required"]] == ["gate", "failUnder", "margin", "seed", "multiple", "allowIncomplete", "rescore", "minPairs", "changedItems"]
    assert served.json()["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


# -- end to end: runs made by the plugin, the key made by the CLI --------------------------------------
GOLDEN = [
    {"id": f"q-{i:03d}", "question": f"What is the return window {i}?", "questionType": "simple" if i % 2 else "multi_hop",
     "citations": [{"docId": "returns", "chunkId": "returns#p1", "mode": "required"}] if i % 3 else
     [{"docId": "battery", "mode": "required"}]}
    for i in range(8)
]


def test_runs_made_by_the_plugin_read_over_http(pytester: pytest.Pytester, capsys) -> None:
    write_golden(pytester.path / "golden_support.jsonl", GOLDEN)
    pytester.makeconftest(RANKED_CONFTEST)
    (pytester.path / "wide.json").write_text('{"retrievalLimit": 3}')
    for argv in ([], ["--crucible-config=wide.json"]):
        result = pytester.runpytest("--crucible-workspace=shop", "--crucible-mode=component", *argv)
        assert result.ret == pytest.ExitCode.OK
    db = pytester.path / ".crucible" / "crucible.db"
    capsys.readouterr()  # the inner pytest runs' output
    assert main(["keys", "create", "--workspace", "shop", "--scope", "runs:read", "--db", str(db)]) == 0
    key = capsys.readouterr().out.strip()
    listed = cli_json(["runs", "--json", "--workspace", "shop", "--db", str(db)], capsys)
    first, second = listed[1]["id"], listed[0]["id"]
    with serve_in_thread(db) as url, client(url, key) as http:
        runs = http.get(RUNS).json()["runs"]
        metrics = http.get(METRICS.format(second)).json()
        comparison = http.get(COMPARE, params={"a": first, "b": second}).json()
    assert [run["id"] for run in runs] == [second, first]
    assert runs[0]["labels"]["collection"] == pytester.path.name and runs[0]["workspace"] == "shop"
    assert metrics == cli_json(["metrics", second, "--json", "--db", str(db)], capsys)
    assert metrics["n"] == 8 and "retrieval" in metrics
    assert comparison == cli_json(["compare", first, second, "--json", "--db", str(db)], capsys)
    assert comparison["pairedItems"] == 8


# -- the command ---------------------------------------------------------------------------------------
def test_crucible_serve_command_serves_until_stopped(tmp_path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    run_id = add_run(store, workspace="shop")
    store.close()
    key = new_key(db, "shop", "kb:read")
    process = subprocess.Popen([sys.executable, "-m", "pytest_crucible.cli", "serve", "--db", str(db), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        first_line = process.stdout.readline()  # "serving DB on http://127.0.0.1:PORT (...)"
        match = re.search(r"on (http://127\.0\.0\.1:\d+) ", first_line)
        assert match, first_line
        with client(match.group(1), key) as http:
            assert http.get(METRICS.format(run_id)).json()["runId"] == run_id
            assert http.get("/openapi.json").status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_refuses_an_open_address_without_any_key(tmp_path, capsys) -> None:
    db = tmp_path / "c.db"
    Store.open(db).close()
    for host in ("0.0.0.0", "::"):
        assert main(["serve", "--db", str(db), "--host", host, "--port", "0"]) == 2
        lines = capsys.readouterr().err.rstrip("\n").split("\n")
        assert len(lines) == 2 and lines[0].startswith(f"crucible: refusing to serve {db} on {host}"), lines
        assert lines[1].startswith("HINT: create a key first (crucible keys create")


def test_serve_port_in_use_is_one_line_and_a_hint(tmp_path, capsys) -> None:
    import socket

    db = tmp_path / "c.db"
    Store.open(db).close()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        assert main(["serve", "--db", str(db), "--port", str(taken.getsockname()[1])]) == 2
    finally:
        taken.close()
    lines = capsys.readouterr().err.rstrip("\n").split("\n")
    assert len(lines) == 2 and lines[0].startswith("crucible: cannot listen on 127.0.0.1:") and lines[1].startswith("HINT: ")


def test_serve_without_the_extra_says_what_to_install(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi now fails as if not installed
    monkeypatch.delitem(sys.modules, "pytest_crucible.server.app")
    assert main(["serve", "--db", str(tmp_path / "c.db")]) == 2
    err = capsys.readouterr().err
    assert err == "crucible: `crucible serve` needs the server extra: pip install 'pytest-crucible[server]'\n"


# -- property: generated requests never make the server fail ------------------------------------------
from urllib.parse import quote  # noqa: E402

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ALLOWED = {"metrics": {200, 401, 403, 404, 422}, "compare": {200, 401, 403, 404, 409, 422},
           "list": {200, 401, 403, 422}, "promote": {201, 401, 403, 404, 413, 422}}


@pytest.fixture(scope="module")
def fuzz_api(tmp_path_factory):
    db = tmp_path_factory.mktemp("fuzz") / "crucible.db"
    store = Store.open(db)
    runs = [add_run(store, workspace="shop"), add_run(store, workspace="shop", shift=0.1),
            add_run(store, workspace="shop", judge="claude-sonnet-5"), add_run(store, workspace="search-team")]
    store.close()
    keys = [new_key(db, "shop", "runs:read"), new_key(db, "shop", "kb:read", "feedback:write"),
            new_key(db, "search-team", "runs:read", "feedback:write"), new_key(db, "shop", "runs:read", "feedback:write")]
    main(["keys", "revoke", keys[3].split("_")[1], "--db", str(db)])
    # Generated requests, not a flood: the per-address and per-key rate limits (tests/test_server_limits.py) stay out of the way.
    limits = ServerLimits(auth_failures=100_000, promotes_per_minute=100_000)
    with serve_in_thread(db, limits) as url, client(url) as http:
        yield {"http": http, "runs": runs, "keys": keys, "valid": set(keys[:3])}


def _text(max_size=30):
    return st.text(st.characters(exclude_categories=["Cs"]), max_size=max_size)


_header_text = st.text("abcdefXYZ0123456789_-.=+/: crk", max_size=60).map(str.strip)
# Bodies may hold any code point, lone surrogates too (json.dumps sends them as \ud800 escapes).
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
# Bodies no JSON encoder writes: too deep for the reader, a 5000-digit number, not UTF-8, anything.
_raw_bodies = st.sampled_from([b"[" * 3000 + b"]" * 3000, b'{"runId": 1' + b"0" * 5000 + b"}", b"\xff\xfe{}", b"", b"null"]) | st.binary(max_size=200)


@st.composite
def api_requests(draw, runs, keys):
    """(endpoint, method, path, params, headers, body) with real and made-up ids, keys and bodies."""
    def mostly(likely, other):  # the likely strategy three times in four, so valid requests get deep
        return st.integers(0, 3).flatmap(lambda n: other if n == 3 else likely)

    run_id = mostly(st.sampled_from(runs), st.sampled_from(["latest", runs[0][:6]]) | _text())
    header = draw(mostly(st.sampled_from(keys[:3]).map(lambda key: f"Bearer {key}"),
                         st.none() | st.just(f"Bearer {keys[3]}") | _header_text | _header_text.map(lambda text: f"Bearer {text}".strip())))
    headers = {} if header is None else {"Authorization": header}
    endpoint = draw(st.sampled_from(sorted(ALLOWED)))
    if endpoint == "metrics":
        return endpoint, "GET", METRICS.format(quote(draw(run_id), safe="")), {}, headers, None
    if endpoint == "compare":
        params = {name: draw(run_id) for name in draw(st.sets(st.sampled_from(["a", "b"])))}
        return endpoint, "GET", COMPARE, params, headers, None
    if endpoint == "list":
        params = draw(st.fixed_dictionaries({}, optional={
            "workspace": st.sampled_from(["shop", "search-team"]) | _text(), "configHash": _text(70),
            "label": st.lists(st.sampled_from(["collection:shop", "mode:x", "nocolon"]) | _text(), max_size=3),
            "limit": st.integers(-5, 2000).map(str) | _text(5)}))
        return endpoint, "GET", RUNS, params, headers, None
    workspace = draw(mostly(st.just("shop"), st.just("search-team") | _text()))
    valid = promote_body(draw(run_id))
    body = draw(mostly(st.just(valid), st.one_of(
        _json,
        _raw_bodies,
        st.builds(lambda key, value: {**valid, key: value}, st.sampled_from([*valid, "resultId", "extra"]), _json),
        st.builds(lambda key: {k: v for k, v in valid.items() if k != key}, st.sampled_from(list(valid))),
    )))
    return endpoint, "POST", PROMOTE.format(quote(workspace, safe="")), {}, headers, body


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(data=st.data())
def test_generated_requests_never_fail_the_server(fuzz_api, data) -> None:
    http, runs, keys = fuzz_api["http"], fuzz_api["runs"], fuzz_api["keys"]
    request = data.draw(api_requests(runs, keys))
    endpoint, method, path, params, headers, body = request
    if body is not None:
        headers = {**headers, "content-type": "application/json"}
    response = http.request(method, path, params=params, headers=headers,
                            content=body if body is None or isinstance(body, bytes) else json.dumps(body))
    event(f"{endpoint} {response.status_code}")  # the mix of answers: --hypothesis-show-statistics
    allowed = ALLOWED[endpoint] | ({404} if "//" in path or path.endswith("/runs/metrics") else set())
    assert response.status_code in allowed, (request, response.status_code, response.text)
    document = response.json()
    if response.status_code >= 400:
        assert set(document) >= {"error", "message"}
    authenticated = headers.get("Authorization", "").startswith("Bearer ") and \
        headers["Authorization"].removeprefix("Bearer ") in fuzz_api["valid"]
    if not authenticated:
        assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    if response.status_code in (200, 201):  # only ever the key's own workspace
        own_runs = runs[3:] if headers["Authorization"].endswith(keys[2]) else runs[:3]
        if endpoint == "metrics":
            assert document["runId"] in own_runs
        elif endpoint == "compare":
            assert {document["a"], document["b"]} <= set(own_runs)
        elif endpoint == "list":
            assert {run["id"] for run in document["runs"]} <= set(own_runs)
        else:
            assert document["feedback"]["runId"] in own_runs
