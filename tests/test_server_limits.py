"""`crucible serve` under load and attack: what one client may cost it, and what it writes down.

Behaviour that depends on the server itself (deadlines, connections, threads, the access log) is
driven over real HTTP, or raw sockets, against uvicorn on 127.0.0.1; pure request handling goes
through FastAPI's TestClient. No assertion here depends on the machine's speed: the bounds are
generous (a list answered within 5 s while compares are held, a connection closed within 15 s of a
1 s deadline). The figures are in docs/reliability.md (scripts/serve_load.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx
from api_server import add_run, client, make_db, new_key, serve_in_thread
from fastapi.testclient import TestClient

import pytest_crucible.server.app as server_app
from pytest_crucible.cli import main
from pytest_crucible.defaults import ServerLimits
from pytest_crucible.server.keys import authenticate, parse_key
from pytest_crucible.store import Store

RUNS = "/api/v1/evals/runs"
COMPARE = "/api/v1/evals/runs/compare"
PROMOTE = "/api/w/{}/evals/feedback/promote"


def promote_body(run_id: str, **overrides) -> dict:
    body = {"runId": run_id, "question": "What is the approved retention period?",
            "correctedAssertions": ["Audit exports are retained for seven years."], "errorClass": "incomplete"}
    return {**body, **overrides}


def api_client(db: Path, key: str | None = None, limits: ServerLimits = ServerLimits()) -> TestClient:
    from pytest_crucible.server.app import create_app

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return TestClient(create_app(db, limits), headers=headers)


def raw_connection(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def closed_by_server(sock: socket.socket, within: float, trickle: bytes | None = None) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (reading, and sending ``trickle``
    every 0.2 s meanwhile when given): EOF or a reset, as opposed to still open at the end."""
    deadline = time.monotonic() + within
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            if trickle:
                try:
                    sock.sendall(trickle)
                except OSError:
                    return True
        except OSError:  # reset
            return True
    return False


def loopback_alias_available() -> bool:
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError:
        return False
    return True


# -- 6. compares: bounded, kept, and never in the way of other requests ------------------------------------
def test_compares_beyond_the_bound_are_turned_away_and_a_list_is_not_held_up(tmp_path, monkeypatch) -> None:
    db, runs = make_db(tmp_path)
    a, b = runs["shop"]
    key = new_key(db, "shop", "runs:read")
    release, entered = threading.Event(), []
    compute = server_app.decide_stored

    def held(*args, **kwargs):  # a compare that takes as long as the test says
        entered.append(1)
        release.wait(60)
        return compute(*args, **kwargs)

    monkeypatch.setattr(server_app, "decide_stored", held)

    def compare(seed: int) -> httpx.Response:
        with client(url, key) as http:
            return http.get(COMPARE, params={"a": a, "b": b, "seed": seed})  # a seed each: nothing kept to answer from

    # One key sends them all: its own bound on requests in flight is raised, so the compare bound is what is tested.
    with serve_in_thread(db, ServerLimits(max_compares=2, key_in_flight=64)) as url, ThreadPoolExecutor(45) as pool:
        futures = [pool.submit(compare, seed) for seed in range(45)]
        try:
            deadline = time.monotonic() + 30  # the ones turned away answer at once; wait for them, boundedly
            while sum(future.done() for future in futures) < 43 and time.monotonic() < deadline:
                time.sleep(0.05)
            # 45 compares in flight (40 filled the old shared thread pool): a run list still answers at once.
            with client(url, key) as http:
                listed = http.get(RUNS, timeout=5)
            assert listed.status_code == 200 and len(listed.json()["runs"]) == 2
        finally:
            release.set()
        responses = [future.result() for future in futures]
    assert Counter(response.status_code for response in responses) == {200: 2, 503: 43}
    assert len(entered) == 2  # the turned-away ones computed nothing
    busy = next(response for response in responses if response.status_code == 503)
    assert busy.json()["error"] == "busy" and int(busy.headers["retry-after"]) >= 1
    assert "--max-compares" in busy.json()["hint"]


def test_a_compare_of_complete_runs_is_computed_once(tmp_path, monkeypatch) -> None:
    db, runs = make_db(tmp_path, "shop", "search-team")
    a, b = runs["shop"]
    store = Store.open(db)
    unfinished = add_run(store, workspace="shop", shift=0.1)
    store.close()
    conn = sqlite3.connect(db)
    with conn:  # a run that may still change: judging failed for some items
        conn.execute("UPDATE runs SET status = 'incomplete' WHERE id = ?", [unfinished])
    conn.close()
    key, foreign = new_key(db, "shop", "runs:read"), new_key(db, "search-team", "runs:read")
    calls = []
    compute = server_app.decide_stored
    monkeypatch.setattr(server_app, "decide_stored", lambda *args, **kwargs: calls.append(1) or compute(*args, **kwargs))
    with serve_in_thread(db) as url, client(url, key) as http:
        first, again = (http.get(COMPARE, params={"a": a, "b": b}) for _ in range(2))
        assert first.status_code == again.status_code == 200 and first.json() == again.json()
        assert len(calls) == 1
        assert http.get(COMPARE, params={"a": a, "b": b, "seed": 7}).status_code == 200  # other options: another answer
        assert len(calls) == 2
        for _ in range(2):  # an incomplete run is never kept
            assert http.get(COMPARE, params={"a": a, "b": unfinished, "allowIncomplete": "true"}).status_code == 200
        assert len(calls) == 4
        # A judgment appended since moves what a comparison reads (the ruler): computed again.
        store = Store.open(db)
        store.append_qrels([{"query_id": "q01", "doc_id": "doc1", "grade": 0, "source": "human", "created_by": "dana"}])
        store.close()
        assert http.get(COMPARE, params={"a": a, "b": b}).status_code == 200
        assert len(calls) == 5
        # What is kept is never another workspace's: its key gets the 404 of a run it cannot see.
        with client(url, foreign) as other:
            assert other.get(COMPARE, params={"a": a, "b": b}).status_code == 404


# -- 7. authentication: a wrong key is cheap, and a flood of them is cut short -------------------------------
def test_wrong_keys_from_one_address_are_answered_429_without_checking_any_key(tmp_path, monkeypatch) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    key_id, secret = parse_key(key)
    wrong = f"crk_{key_id}_{secret[::-1]}"
    checked = []
    check = server_app.authenticate
    monkeypatch.setattr(server_app, "authenticate", lambda *args: checked.append(1) or check(*args))
    with serve_in_thread(db, ServerLimits(auth_failures=5)) as url:
        with client(url, wrong) as http:
            assert [http.get(RUNS).status_code for _ in range(5)] == [401] * 5
            blocked = http.get(RUNS)
        assert blocked.status_code == 429 and blocked.json()["error"] == "too_many_requests"
        assert 1 <= int(blocked.headers["retry-after"]) <= 60
        assert len(checked) == 5
        with client(url, key) as http:  # from that address, not even the right key is looked up for now
            assert http.get(RUNS).status_code == 429
            assert http.get(RUNS, headers={"Authorization": ""}).status_code == 401  # no key: nothing to check
        assert len(checked) == 5
        if loopback_alias_available():  # another address is not held to this one's failures
            transport = httpx.HTTPTransport(local_address="127.0.0.2")
            with httpx.Client(base_url=url, transport=transport, headers={"Authorization": f"Bearer {key}"},
                              trust_env=False, timeout=60) as other:
                assert other.get(RUNS).status_code == 200


def test_checking_a_key_needs_no_slow_hash_and_stores_none_of_the_secret(tmp_path, monkeypatch) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    key_id, secret = parse_key(key)

    def no_pbkdf2(*args, **kwargs):
        raise AssertionError("a key was checked with PBKDF2")

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", no_pbkdf2)
    store = Store.open(db)
    assert authenticate(store.db.conn, key).id == key_id
    for wrong in (f"crk_{key_id}_{secret[::-1]}", f"crk_01NOSUCHKEY0000000000000000_{secret}", "nonsense"):
        assert authenticate(store.db.conn, wrong) is None
    salt, stored = store.db.conn.execute("SELECT salt, key_hash FROM api_keys").fetchone()
    store.close()
    assert secret not in stored and len(bytes.fromhex(salt)) == 16
    assert stored.removeprefix("hmac_sha256$") == __import__("hmac").new(bytes.fromhex(salt), secret.encode(), "sha256").hexdigest()


def test_a_key_hashed_with_pbkdf2_keeps_working_and_is_rehashed_on_first_use(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    # A key as schema 9 and earlier stored it: salted PBKDF2-SHA256, 50,000 rounds.
    key_id, secret, salt = "01KZLEGACYKEY0000000000000", secrets.token_urlsafe(32), secrets.token_bytes(16)
    legacy = f"pbkdf2_sha256$50000${hashlib.pbkdf2_hmac('sha256', secret.encode(), salt, 50_000).hex()}"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO api_keys (id, workspace, name, scopes, salt, key_hash, created_at)"
                     " VALUES (?, 'shop', 'old', ?, ?, ?, 'then')", [key_id, json.dumps(["runs:read"]), salt.hex(), legacy])
    conn.close()
    key, wrong = f"crk_{key_id}_{secret}", f"crk_{key_id}_{secret[::-1]}"
    with serve_in_thread(db) as url:
        with client(url, wrong) as http:
            assert http.get(RUNS).status_code == 401
        with client(url, key) as http:
            assert http.get(RUNS).status_code == 200
            conn = sqlite3.connect(db)
            stored = conn.execute("SELECT salt, key_hash FROM api_keys WHERE id = ?", [key_id]).fetchone()
            conn.close()
            assert stored[0] == salt.hex() and stored[1].startswith("hmac_sha256$")  # re-hashed, still no secret
            assert http.get(RUNS).status_code == 200
        with client(url, wrong) as http:
            assert http.get(RUNS).status_code == 401


# -- 8. slow clients: read deadlines and the connection limit --------------------------------------------------
def test_a_connection_that_sends_half_a_request_line_is_closed_within_the_deadline(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    with serve_in_thread(db, ServerLimits(read_timeout=1)) as url:
        half_line, trickled = raw_connection(url), raw_connection(url)
        half_line.sendall(b"GET /api/v1/evals/ru")
        trickled.sendall(b"GET /api/v1/evals/runs HTTP/1.1\r\nHost: x\r\n")
        try:
            assert closed_by_server(half_line, within=15)
            assert closed_by_server(trickled, within=15, trickle=b"X")  # a byte every 0.2 s: the deadline is for the whole head
        finally:
            half_line.close()
            trickled.close()


def test_a_trickled_body_is_answered_408_and_closed(tmp_path) -> None:
    db, runs = make_db(tmp_path)
    key = new_key(db, "shop", "feedback:write")
    body = json.dumps(promote_body(runs["shop"][0])).encode()
    with serve_in_thread(db, ServerLimits(read_timeout=1)) as url:
        sock = raw_connection(url)
        try:
            sock.sendall(b"POST " + PROMOTE.format("shop").encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                         + body[:10])
            received, deadline = b"", time.monotonic() + 15
            sock.settimeout(0.2)
            for byte in body[10:-1]:  # one byte every 0.2 s, never the last one
                if time.monotonic() > deadline:
                    break
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    chunk = None
                except OSError:  # reset
                    break
                if chunk == b"":  # closed
                    break
                if chunk:
                    received += chunk
                    continue
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    break
        finally:
            sock.close()
    head, _, answer = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), received[:200]
    assert b"connection: close" in head.lower()
    assert json.loads(answer)["error"] == "request_timeout"


def test_connections_beyond_the_limit_are_refused_until_the_slow_ones_are_dropped(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    with serve_in_thread(db, ServerLimits(max_connections=4, read_timeout=2)) as url:
        slow = [raw_connection(url) for _ in range(4)]
        try:
            for sock in slow:
                sock.sendall(b"GET /")
            time.sleep(0.5)  # let the server take them in
            with client(url, key) as http:
                refused = http.get(RUNS)
            assert refused.status_code == 503
            assert all(closed_by_server(sock, within=15) for sock in slow)
        finally:
            for sock in slow:
                sock.close()
        with client(url, key) as http:
            assert http.get(RUNS).status_code == 200


def test_serve_limits_are_options_of_the_command(tmp_path, capsys) -> None:
    db, _ = make_db(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--db", str(db), "--max-compares", "0"])
    assert exit_.value.code == 2
    assert "--max-compares: expected at least 1, got 0" in capsys.readouterr().err


# -- 9. promote: who wrote it, whose drafts, how many -----------------------------------------------------------
def test_promote_records_the_acting_key_apart_from_the_claimed_reviewer(tmp_path) -> None:
    db, runs = make_db(tmp_path)
    run_id = runs["shop"][0]
    writer, other = new_key(db, "shop", "feedback:write"), new_key(db, "shop", "feedback:write")
    writer_id, other_id = parse_key(writer)[0], parse_key(other)[0]
    with api_client(db, writer) as http:
        forged = http.post(PROMOTE.format("shop"), json=promote_body(run_id, correctedBy=f"key:{other_id}"))
        anonymous = http.post(PROMOTE.format("shop"), json=promote_body(run_id))
        named = http.post(PROMOTE.format("shop"), json=promote_body(run_id, correctedBy="dana"))
    assert forged.status_code == 422 and "names another API key" in forged.json()["message"]
    assert anonymous.status_code == named.status_code == 201
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT corrected_by, api_key_id FROM eval_feedback WHERE golden_item_id IS NOT NULL"
                        " ORDER BY created_at, id").fetchall()
    conn.close()
    assert rows == [(f"key:{writer_id}", writer_id), ("dana", writer_id)]  # the forged one wrote nothing


def test_a_correctedBy_that_passes_for_another_name_is_refused_and_the_sending_key_is_returned(tmp_path) -> None:
    """Issue 32 (4): another key's key:<id> in any case, spacing, width or look-alike letters, an empty name and
    a 10,000-character one were all stored; the response never said which key sent it."""
    db, runs = make_db(tmp_path)
    run_id = runs["shop"][0]
    writer, other = new_key(db, "shop", "feedback:write"), new_key(db, "shop", "feedback:write")
    writer_id, other_id = parse_key(writer)[0], parse_key(other)[0]
    dodges = {
        f"KEY:{other_id}": "names another API key", f"Key:{other_id}": "names another API key",
        f" key:{other_id}": "names another API key", f"key\uff1a{other_id}": "names another API key",  # full-width colon
        f"\u043a\u0435\u0443:{other_id.lower()}": "mixes Cyrillic and Latin letters",  # Cyrillic ka, ie, u
        "\u043a\u0435\u0443:12": "names another API key",  # all Cyrillic: one script, but it reads as key:
        "al\u0456ce": "mixes Cyrillic and Latin letters",  # a Cyrillic i in a Latin name
        "": "is empty", "   ": "is empty", "x" * 10_000: "at most 100",
        "dana\u200b": "invisible character U+200B",
    }
    with serve_in_thread(db) as url, client(url, writer) as http:
        refused = {name: http.post(PROMOTE.format("shop"), json=promote_body(run_id, correctedBy=name)) for name in dodges}
        own = http.post(PROMOTE.format("shop"), json=promote_body(run_id, correctedBy=f"kEy : {writer_id.lower()}"))
        wide = http.post(PROMOTE.format("shop"), json=promote_body(run_id, correctedBy=" \uff44\uff41\uff4e\uff41 "))
        left_out = http.post(PROMOTE.format("shop"), json=promote_body(run_id))
    for name, problem in dodges.items():
        response = refused[name]
        assert response.status_code == 422, (name[:20], response.text[:300])
        assert response.json()["message"].startswith("body: field 'correctedBy': ") and problem in response.json()["message"]
    assert [r.status_code for r in (own, wide, left_out)] == [201, 201, 201]
    assert [r.json()["feedback"]["correctedBy"] for r in (own, wide, left_out)] == [f"key:{writer_id}", "dana", f"key:{writer_id}"]
    assert {r.json()["feedback"]["promotedBy"] for r in (own, wide, left_out)} == {f"key:{writer_id}"}
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT corrected_by, api_key_id FROM eval_feedback WHERE golden_item_id IS NOT NULL"
                        " ORDER BY created_at, id").fetchall()
    conn.close()
    assert rows == [(f"key:{writer_id}", writer_id), ("dana", writer_id), (f"key:{writer_id}", writer_id)]  # no refused one


def test_labels_from_feedback_are_the_workspaces_own_and_authored_by_the_promoting_key(tmp_path, monkeypatch, capsys) -> None:
    """Issue 32 (3): a wsB key promoted a correction claiming a wsA reviewer, and `crucible judge labels import
    --from-feedback` in a wsA project turned it into labels of wsA's identical answer, authored by that claim."""
    db, runs = make_db(tmp_path, "wsA", "wsB")
    intruder, reviewer = new_key(db, "wsB", "feedback:write", name="intruder"), new_key(db, "wsA", "feedback:write")
    conn = sqlite3.connect(db)
    result_of = {workspace: conn.execute("SELECT result_id FROM results WHERE run_id = ? AND item_id = 'q00'",
                                         [runs[workspace][0]]).fetchone()[0] for workspace in ("wsA", "wsB")}
    conn.close()
    with serve_in_thread(db) as url:
        with client(url, intruder) as http:
            forged = http.post(PROMOTE.format("wsB"), json=promote_body(
                runs["wsB"][0], resultId=result_of["wsB"], errorClass="hallucination", correctedBy="alice (wsA reviewer)"))
        with client(url, reviewer) as http:
            own = http.post(PROMOTE.format("wsA"), json=promote_body(
                runs["wsA"][0], resultId=result_of["wsA"], errorClass="incomplete", correctedBy="bob"))
    assert forged.status_code == own.status_code == 201
    intruder_id, reviewer_id = parse_key(intruder)[0], parse_key(reviewer)[0]

    def labels() -> list[tuple]:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT kind, value, created_by, note FROM human_labels ORDER BY id").fetchall()
        finally:
            conn.close()

    monkeypatch.setenv("CRUCIBLE_WORKSPACE", "wsA")  # a wsA project
    assert main(["judge", "labels", "import", "--from-feedback", "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "promoted corrections read: 1, of workspace 'wsA'; 1 of other workspaces left out (--all-workspaces reads them)")
    # Only wsA's own correction: an incomplete answer is crag incorrect (no faithful label), by the key that sent it.
    assert labels() == [("crag", "incorrect", f"key:{reviewer_id}", f"feedback {own.json()['feedback']['id']}; claimed by bob")]
    assert main(["judge", "labels", "import", "--from-feedback", "--all-workspaces", "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "promoted corrections read: 2, of every workspace (--all-workspaces): 'wsA' 1, 'wsB' 1")
    added = labels()[1:]
    # Its crag label (incorrect, of the same item and answer text) is already in the ledger: only faithful is new.
    assert [(kind, value, by) for kind, value, by, _ in added] == [("faithful", "false", f"key:{intruder_id}")]
    assert added[0][3] == (f"feedback {forged.json()['feedback']['id']}; promoted by key:{intruder_id} (intruder); "
                           "claimed by alice (wsA reviewer)")
    assert not [row for row in labels() if "alice" in (row[2] or "")]  # the claim never became an author
    # The labels export reads the same workspace's corrections.
    assert main(["judge", "labels", "export", "-o", "-", "--db", str(db)]) == 0
    exported = capsys.readouterr()
    assert [json.loads(line)["id"] for line in exported.out.splitlines()] == [own.json()["feedback"]["id"]]
    assert "1 of other workspaces left out" in exported.err


def test_golden_export_writes_the_drafts_of_one_workspace(tmp_path, monkeypatch, capsys) -> None:
    db, runs = make_db(tmp_path, "alpha", "beta")
    questions = {}
    for workspace in ("alpha", "beta"):
        with api_client(db, new_key(db, workspace, "feedback:write")) as http:
            response = http.post(PROMOTE.format(workspace), json=promote_body(runs[workspace][0], question=f"{workspace}?"))
        assert response.status_code == 201
        questions[workspace] = response.json()["item"]["question"]

    def exported(*argv: str) -> list[str]:
        assert main(["golden", "export", "-o", "-", "--db", str(db), *argv]) == 0
        return [json.loads(line)["question"] for line in capsys.readouterr().out.splitlines()]

    monkeypatch.setenv("CRUCIBLE_WORKSPACE", "alpha")
    assert exported() == ["alpha?"]
    assert exported("--workspace", "beta") == ["beta?"]
    assert sorted(exported("--all-workspaces")) == ["alpha?", "beta?"]


def test_promotes_per_key_are_capped_per_minute(tmp_path) -> None:
    db, runs = make_db(tmp_path)
    run_id = runs["shop"][0]
    busy, quiet = new_key(db, "shop", "feedback:write"), new_key(db, "shop", "feedback:write")
    limits = ServerLimits(promotes_per_minute=3)
    with api_client(db, busy, limits) as http:
        statuses = [http.post(PROMOTE.format("shop"), json=promote_body(run_id)).status_code for _ in range(3)]
        capped = http.post(PROMOTE.format("shop"), json=promote_body(run_id))
        other_key = http.post(PROMOTE.format("shop"), json=promote_body(run_id), headers={"Authorization": f"Bearer {quiet}"})
        assert other_key.status_code == 201  # the cap is per key
    assert statuses == [201] * 3
    assert capped.status_code == 429 and capped.json()["error"] == "too_many_requests"
    assert 1 <= int(capped.headers["retry-after"]) <= 60


# -- 10. smaller holes ------------------------------------------------------------------------------------------
def test_too_many_label_filters_is_422_not_a_database_error(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    with api_client(db, new_key(db, "shop", "runs:read")) as http:
        flood = http.get(RUNS, params={"label": [f"key{n}:value" for n in range(999)]})  # distinct: one SQL term each
        assert http.get(RUNS, params={"label": ["model:chat", *(f"key{n}:value" for n in range(19))]}).json() == {"runs": []}
    assert flood.status_code == 422 and flood.json()["fields"][0]["field"] == "label"
    assert "at most 20 items" in flood.json()["message"]


def test_config_hash_is_a_literal_prefix(tmp_path) -> None:
    db, runs = make_db(tmp_path)
    with api_client(db, new_key(db, "shop", "runs:read")) as http:
        def listed(config_hash: str) -> list[str]:
            response = http.get(RUNS, params={"configHash": config_hash})
            assert response.status_code == 200
            return [run["id"] for run in response.json()["runs"]]

        assert listed("%") == listed("_") == listed("9f2c%") == listed("9f2_") == []  # no wildcards
        assert sorted(listed("9f2c")) == sorted(listed("9F2C")) == sorted(runs["shop"])  # a prefix, in either case


def test_control_characters_in_a_promoted_text_are_422_and_nothing_is_written(tmp_path) -> None:
    db, runs = make_db(tmp_path)
    run_id = runs["shop"][0]
    with api_client(db, new_key(db, "shop", "feedback:write")) as http:
        refused = {field: http.post(PROMOTE.format("shop"), json=promote_body(run_id, **{field: value}))
                   for field, value in (("question", "What\x00 is it?"), ("tags", ["ok", "red\x1b[31m"]),
                                        ("note", "bell\x07"), ("correctedAssertions", ["C1 \x85 control"]))}
        plain = http.post(PROMOTE.format("shop"), json=promote_body(run_id, correctedAssertions=["Line one,\n\tline two."]))
    for field, response in refused.items():
        assert response.status_code == 422, field
        assert re.match(rf"body: field '{re.escape(field)}(\[\d\])?': control character \\u00", response.json()["message"]), response.json()
    assert plain.status_code == 201  # tabs and newlines are text
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM golden_drafts").fetchone() == (1,)
    conn.close()


def test_a_trailing_slash_is_not_redirected_to_the_clients_host(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    with api_client(db, new_key(db, "shop", "runs:read")) as http:
        response = http.get(RUNS + "/", headers={"Host": "attacker.example"}, follow_redirects=False)
    assert response.status_code == 404 and "location" not in response.headers
    assert response.json()["message"] == "no endpoint GET /api/v1/evals/runs/"


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_the_database_is_created_readable_by_its_owner_only(tmp_path) -> None:
    path = tmp_path / "new" / "crucible.db"
    store = Store.open(path)
    add_run(store, workspace="shop")  # a write: the -wal file exists now
    assert (path.stat().st_mode & 0o777) == 0o600
    assert (Path(f"{path}-wal").stat().st_mode & 0o777) == 0o600
    store.close()


def test_a_key_in_the_query_string_stays_out_of_the_access_log(tmp_path) -> None:
    db, _runs = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    secret = parse_key(key)[1]
    process = subprocess.Popen([sys.executable, "-m", "pytest_crucible.cli", "serve", "--db", str(db), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        match = re.search(r"on (http://127\.0\.0\.1:\d+) ", process.stdout.readline())
        assert match
        with client(match.group(1), key) as http:
            assert http.get(RUNS, params={"limit": 5, "key": key}).status_code == 200
            assert http.get(f"{RUNS}/{key}/metrics").status_code == 404
            encoded = key.replace("_", "%5F")
            assert http.get(f"{RUNS}?token={encoded}").status_code == 200  # sent encoded
            assert http.get(RUNS, params={"token": encoded}).status_code == 200  # encoded twice (%255F)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    logged = out + err
    assert '"GET /api/v1/evals/runs?limit=5&key=[REDACTED] HTTP/1.1" 200' in logged, logged
    assert '"GET /api/v1/evals/runs/[REDACTED]/metrics HTTP/1.1" 404' in logged
    assert secret not in logged and secret.replace("_", "%5F") not in logged


# -- the counters themselves ------------------------------------------------------------------------------------
def test_the_window_limit_slides_and_forgets_old_subjects() -> None:
    from pytest_crucible.server.limits import AnswerCache, ConcurrencyBound, WindowLimit

    now = [1000.0]
    limit = WindowLimit(2, window=60, max_subjects=2, clock=lambda: now[0])
    assert limit.take("a") is None and limit.take("a") is None
    assert limit.take("a") == 60 and limit.retry_after("a") == 60  # refused events are not recorded
    now[0] += 59.5
    assert limit.retry_after("a") == 1
    now[0] += 0.5
    assert limit.retry_after("a") is None  # the first event left the window
    limit.record("b"), limit.record("c")  # a third subject: the least recently seen ("a") is forgotten
    assert set(limit._events) == {"b", "c"}
    bound = ConcurrencyBound(1)
    assert bound.try_acquire() and not bound.try_acquire()
    bound.release()
    assert bound.try_acquire()
    cache: AnswerCache[str] = AnswerCache(2)
    cache.put(1, "one"), cache.put(2, "two"), cache.get(1), cache.put(3, "three")
    assert (cache.get(1), cache.get(2), cache.get(3)) == ("one", None, "three")
