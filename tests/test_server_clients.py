"""`crucible serve` against clients that lie about who they are, never read, flood one endpoint or
put keys where they do not belong: each behaviour checked against a real uvicorn on 127.0.0.1
(in a thread, or `crucible serve` itself when its log is what is checked).

- who the client is: the socket's peer; X-Forwarded-For only from a proxy the operator names
  (``--forwarded-allow-ips``), and only if it is an IP address;
- a client that reads none of its answers loses its connection at the write deadline;
- metrics are bounded per key and for the server, and one key's compares hold only a share of the
  compare cache;
- no key-shaped string and nothing that could pass for another entry reaches a log line.

No assertion depends on the machine's speed: deadlines are generous multiples of the limits set.
The figures: docs/reliability.md (``scripts/serve_load.py --only forwarded|unread|metrics|cache``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx
from api_server import client, make_db, new_key, serve_in_thread, server_in_thread

import pytest_crucible.server.app as server_app
from pytest_crucible.cli import main
from pytest_crucible.defaults import ServerLimits
from pytest_crucible.server.keys import parse_key

RUNS = "/api/v1/evals/runs"
COMPARE = "/api/v1/evals/runs/compare"
METRICS = "/api/v1/evals/runs/{}/metrics"
#: An X-Forwarded-For written as the rest of an access log line and a second, made-up entry.
FORGED_ENTRY = '10.0.0.1:0 - "GET /x HTTP/1.1" 200 OK | admin-console'


def loopback_alias_available() -> bool:
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError:
        return False
    return True


def from_address(url: str, key: str, address: str) -> httpx.Client:
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address=address),
                        headers={"Authorization": f"Bearer {key}"}, trust_env=False, timeout=60)


class Served:
    """`crucible serve` in a subprocess: its URL, and (once stopped) everything it wrote."""

    url: str
    output: str = ""


@contextmanager
def crucible_serve(db: Path, *options: str) -> Iterator[Served]:
    process = subprocess.Popen([sys.executable, "-m", "pytest_crucible.cli", "serve", "--db", str(db), "--port", "0", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    served = Served()
    try:
        match = re.search(r"on (http://127\.0\.0\.1:\d+) ", process.stdout.readline())
        assert match, "crucible serve did not start"
        served.url = match.group(1)
        yield served
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
        served.output = out + err


def access_lines(output: str, target: str) -> list[str]:
    return [line for line in output.splitlines() if f'"GET {target} HTTP/1.1"' in line]


# -- 1. who the client is ---------------------------------------------------------------------------------------
def test_a_new_x_forwarded_for_per_request_does_not_escape_the_wrong_key_limit(tmp_path) -> None:
    """200 wrong keys, each with another X-Forwarded-For, were 200 x 401 and not one 429: every local
    client passed for a proxy (uvicorn trusts 127.0.0.1 by default)."""
    db, _ = make_db(tmp_path)
    key_id, secret = parse_key(new_key(db, "shop", "runs:read"))
    with serve_in_thread(db, ServerLimits(auth_failures=5)) as url, client(url, f"crk_{key_id}_{secret[::-1]}") as http:
        statuses = [http.get(RUNS, headers={"X-Forwarded-For": f"10.0.0.{n + 1}"}).status_code for n in range(20)]
    assert statuses == [401] * 5 + [429] * 15


@pytest.mark.skipif(not loopback_alias_available(), reason="needs a second loopback address (127.0.0.2)")
def test_a_forged_x_forwarded_for_cannot_lock_out_the_address_it_names(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    key_id, secret = parse_key(key)
    with serve_in_thread(db, ServerLimits(auth_failures=3)) as url:
        with client(url, f"crk_{key_id}_{secret[::-1]}") as attacker:
            statuses = [attacker.get(RUNS, headers={"X-Forwarded-For": "127.0.0.2"}).status_code for _ in range(6)]
        with from_address(url, key, "127.0.0.2") as victim:
            assert victim.get(RUNS).status_code == 200
        with client(url, key) as http:  # the failures count against the address that sent them
            assert http.get(RUNS).status_code == 429
    assert statuses == [401] * 3 + [429] * 3


def test_the_access_log_shows_the_peer_whatever_x_forwarded_for_says(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    with crucible_serve(db) as served, client(served.url, key) as http:
        assert http.get(RUNS, headers={"X-Forwarded-For": FORGED_ENTRY}).status_code == 200
        assert http.get(RUNS, headers={"X-Forwarded-For": "10.9.9.9"}).status_code == 200
    lines = access_lines(served.output, RUNS)
    assert len(lines) == 2 and all(re.search(r"\s127\.0\.0\.1:\d+ - \"GET", line) for line in lines), served.output
    assert "admin-console" not in served.output and "10.9.9.9" not in served.output


def test_x_forwarded_for_from_a_named_proxy_is_the_client_if_it_is_an_ip_address(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    key_id, secret = parse_key(key)
    wrong = f"crk_{key_id}_{secret[::-1]}"
    with crucible_serve(db, "--forwarded-allow-ips=127.0.0.1", "--max-auth-failures", "2") as served:
        with client(served.url, wrong) as http:
            failures = [http.get(RUNS, headers={"X-Forwarded-For": "10.0.0.7"}).status_code for _ in range(3)]
        with client(served.url, key) as http:
            assert http.get(RUNS, headers={"X-Forwarded-For": "10.0.0.8"}).status_code == 200  # another client
            assert http.get(RUNS, headers={"X-Forwarded-For": "10.0.0.7"}).status_code == 429  # the one that failed
            assert http.get(f"{RUNS}?limit=3", headers={"X-Forwarded-For": FORGED_ENTRY}).status_code == 200
            assert http.get(f"{RUNS}?limit=4", headers={"X-Forwarded-For": "198.51.100.4, 127.0.0.1"}).status_code == 200
    assert failures == [401, 401, 429]
    assert any(line.split(" - ")[0].endswith(" 10.0.0.8:0") for line in access_lines(served.output, RUNS)), served.output
    forged, = access_lines(served.output, f"{RUNS}?limit=3")
    assert re.search(r"\sinvalid:0 - \"GET /api/v1/evals/runs\?limit=3 HTTP/1\.1\" 200", forged), forged
    assert "admin-console" not in served.output
    chained, = access_lines(served.output, f"{RUNS}?limit=4")
    assert " 198.51.100.4:0 - " in chained  # the proxy's own address in the chain is skipped


def test_forwarded_allow_ips_takes_ip_addresses_and_networks_only(tmp_path, capsys) -> None:
    db, _ = make_db(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--db", str(db), "--forwarded-allow-ips", "127.0.0.1,proxy.local"])
    assert exit_.value.code == 2
    assert "--forwarded-allow-ips: 'proxy.local' is not an IP address or network" in capsys.readouterr().err
    from pytest_crucible.server.serving import trusted_proxies

    assert trusted_proxies(["127.0.0.1", " 10.0.0.0/8", "::1"]) == ("127.0.0.1", "10.0.0.0/8", "::1")
    with pytest.raises(ValueError, match="'\\*' is not an IP address"):
        trusted_proxies(["*"])


# -- 2. a client that never reads --------------------------------------------------------------------------------
def test_a_client_that_reads_none_of_its_answers_is_disconnected_at_the_write_deadline(tmp_path) -> None:
    """Connections pipelining requests and reading nothing stayed open for ever: their answers wait on a full
    send buffer, which neither the read deadline nor the keep-alive timeout covers."""
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    request = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"  # ~26 KB answers: 1000 are more than any socket buffers
    with server_in_thread(db, ServerLimits(write_timeout=1)) as (url, server):
        connections = server.server_state.connections
        host, port = url.removeprefix("http://").split(":")
        silent = []
        try:
            for _ in range(2):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: little buffered for it
                sock.settimeout(10)
                sock.connect((host, int(port)))
                sock.sendall(request * 1000)
                silent.append(sock)
            # Bounds, not speed assertions: the deadline is 1 s.
            assert eventually(lambda: len(connections) == 2 and all(held.flow.write_paused for held in list(connections)))
            assert eventually(lambda: not connections), "the connections that read nothing are still open"
            with client(url, key) as http:
                assert http.get(RUNS).status_code == 200
            for sock in silent:  # reset: the server dropped the answers nobody read
                with pytest.raises(OSError):
                    while sock.recv(65536):
                        pass
                    raise AssertionError("closed politely: the answers were still queued for the client")
        finally:
            for sock in silent:
                sock.close()


def eventually(condition, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- 3. (issue point 10) metrics: bounded per key and for the server; the compare cache shared fairly -------------
def test_metrics_are_bounded_per_key_and_for_the_server_and_a_run_list_is_not_held_up(tmp_path, monkeypatch) -> None:
    db, runs = make_db(tmp_path)
    run_id = runs["shop"][0]
    flooder, second, lister = (new_key(db, "shop", "runs:read") for _ in range(3))
    release, entered = threading.Event(), []
    document = server_app.run_metrics_document

    def held(*args, **kwargs):  # a metrics document that takes as long as the test says
        entered.append(1)
        release.wait(60)
        return document(*args, **kwargs)

    monkeypatch.setattr(server_app, "run_metrics_document", held)

    def metrics(key: str) -> httpx.Response:
        with client(url, key) as http:
            return http.get(METRICS.format(run_id))

    def wait_for(futures, done: int) -> None:
        deadline = time.monotonic() + 30  # the turned-away ones answer at once; wait for them, boundedly
        while sum(future.done() for future in futures) < done and time.monotonic() < deadline:
            time.sleep(0.05)

    with serve_in_thread(db, ServerLimits(max_metrics=3, key_in_flight=2)) as url, ThreadPoolExecutor(8) as pool:
        try:
            flood = [pool.submit(metrics, flooder) for _ in range(5)]
            wait_for(flood, 3)
            other = [pool.submit(metrics, second) for _ in range(2)]
            wait_for(other, 1)
            with client(url, lister) as http:
                listed = http.get(RUNS, timeout=5)  # every metrics slot is held: a run list still answers at once
            assert listed.status_code == 200 and len(listed.json()["runs"]) == 2
        finally:
            release.set()
        flood_statuses = Counter(future.result().status_code for future in flood)
        other_responses = [future.result() for future in other]
    assert flood_statuses == {200: 2, 429: 3}  # the key's own bound: 2 in flight
    assert Counter(response.status_code for response in other_responses) == {200: 1, 503: 1}  # the server's: 3 at once
    assert len(entered) == 3  # the turned-away ones computed nothing
    busy = next(response for response in other_responses if response.status_code == 503)
    assert busy.json()["error"] == "busy" and busy.headers["retry-after"] == "1" and "--max-metrics" in busy.json()["hint"]
    limited = next(future.result() for future in flood if future.result().status_code == 429)
    assert limited.json()["error"] == "too_many_requests" and limited.headers["retry-after"] == "1"
    assert "--max-key-in-flight" in limited.json()["hint"]


def test_one_key_cannot_push_the_other_keys_compares_out_of_the_cache(tmp_path, monkeypatch) -> None:
    """Each distinct seed was a new entry of one 256-answer cache: one client asking new seeds pushed out
    every other client's answers. A key's answers now hold at most their share; the rest stays."""
    db, runs = make_db(tmp_path)
    a, b = runs["shop"]
    patient, flooder = new_key(db, "shop", "runs:read"), new_key(db, "shop", "runs:read")
    calls = []
    compute = server_app.decide_stored
    monkeypatch.setattr(server_app, "decide_stored", lambda *args, **kwargs: calls.append(1) or compute(*args, **kwargs))
    with serve_in_thread(db, ServerLimits(compare_cache=4, compare_cache_per_key=2)) as url:
        with client(url, patient) as http:
            kept = http.get(COMPARE, params={"a": a, "b": b})
            assert kept.status_code == 200 and len(calls) == 1
        with client(url, flooder) as http:
            assert http.get(COMPARE, params={"a": a, "b": b}).json() == kept.json()  # shared: answered from memory
            assert len(calls) == 1
            for seed in range(1, 9):  # 8 new entries into a cache of 4
                assert http.get(COMPARE, params={"a": a, "b": b, "seed": seed}).status_code == 200
            assert len(calls) == 9
            assert http.get(COMPARE, params={"a": a, "b": b, "seed": 8}).status_code == 200  # its newest: kept
            assert len(calls) == 9
        with client(url, patient) as http:
            again = http.get(COMPARE, params={"a": a, "b": b})
        assert again.json() == kept.json() and len(calls) == 9  # still there: answered from memory


# -- 4. (issue point 11) no key in any form, and no forged entry, in a log line ------------------------------------
def test_no_form_of_a_key_reaches_the_access_log(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    key_id, secret = parse_key(key)
    bare = f"{key_id}_{secret}"
    forms = {  # what the client sends -> what the log shows
        f"{RUNS}?token={bare}": f"{RUNS}?token=[REDACTED]",
        f"{RUNS}?token={secret}": f"{RUNS}?token=[REDACTED]",
        f"{RUNS}?token=crk+_{bare}": f"{RUNS}?token=[REDACTED]",
        f"{RUNS}?token=crk%2B_{bare}": f"{RUNS}?token=[REDACTED]",
        f"{RUNS}?{secret}": f"{RUNS}?[REDACTED]",
        f"{RUNS}?token={secret.replace('_', '%5F').replace('-', '%2D')}": f"{RUNS}?token=[REDACTED]",
        f"{RUNS}/{bare}/metrics": f"{RUNS}/[REDACTED]/metrics",
        f"{RUNS}/{secret}/metrics": f"{RUNS}/[REDACTED]/metrics",
        f"{RUNS}/crk+_{bare}/metrics": f"{RUNS}/[REDACTED]/metrics",
        f"{RUNS}?configHash={'9f2c' + '0' * 60}": f"{RUNS}?configHash={'9f2c' + '0' * 60}",  # a hex digest: no key
        f"{RUNS}/{key_id}/metrics": f"{RUNS}/{key_id}/metrics",  # an id alone is public (it names the key)
    }
    with crucible_serve(db) as served:
        host, port = served.url.removeprefix("http://").split(":")
        for target in forms:
            with socket.create_connection((host, int(port)), timeout=10) as sock:  # sent exactly as written
                sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n".encode())
                assert sock.recv(12).startswith(b"HTTP/1.1 ")
                while sock.recv(65536):
                    pass
        with client(served.url, key) as http:  # a key in a header other than Authorization is never logged either
            http.get(RUNS, params={"limit": 7}, headers={"X-Forwarded-For": key, "X-Api-Key": key})
    for target, logged in forms.items():
        assert access_lines(served.output, logged), (target, logged, served.output)
    for form in (secret, secret[:32], bare, secret.replace("_", "%5F")):
        assert form not in served.output


def test_nothing_a_client_sends_can_pass_for_another_log_entry(tmp_path) -> None:
    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    with crucible_serve(db) as served:
        host, port = served.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(f'GET {RUNS}?q=a|b"c\\d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n'.encode())
            while sock.recv(65536):
                pass
    logged, = access_lines(served.output, f"{RUNS}?q=a%7Cb%22c%5Cd")
    assert "|" not in logged


def test_log_records_quoting_a_client_are_one_printable_line_without_keys(tmp_path) -> None:
    from pytest_crucible.server.serving import RedactKeysFilter, SafeLogFilter

    db, _ = make_db(tmp_path)
    key = new_key(db, "shop", "runs:read")
    _, secret = parse_key(key)
    access = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               (FORGED_ENTRY + ":0", "GET", f"/x?a=1\r\nb|&t={secret}", "1.1", 200), None)
    RedactKeysFilter().filter(access)
    assert access.getMessage() == 'invalid - "GET /x?a=1%0D%0Ab%7C&t=[REDACTED] HTTP/1.1" 200'
    error = logging.LogRecord("pytest_crucible.server", logging.ERROR, __file__, 1, "unexpected error on %s %s",
                              ("GET", f"/x\n127.0.0.1 - fake\u2028entry {secret} crk_abc"), None)
    SafeLogFilter().filter(error)
    assert error.getMessage() == "unexpected error on GET /x\\n127.0.0.1 - fake\\u2028entry [REDACTED] [REDACTED]"


# -- the counters themselves --------------------------------------------------------------------------------------
def test_the_in_flight_bound_and_the_cache_shares() -> None:
    from pytest_crucible.server.limits import AnswerCache, InFlightPerSubject

    bound = InFlightPerSubject(2)
    assert bound.try_acquire("a") and bound.try_acquire("a") and not bound.try_acquire("a")
    assert bound.try_acquire("b")  # per subject
    bound.release("a")
    assert bound.try_acquire("a")
    bound.release("a"), bound.release("a"), bound.release("b")
    assert bound._in_flight == {}  # nothing remembered for subjects with nothing in flight
    cache: AnswerCache[str] = AnswerCache(4, per_owner=2)
    cache.put("x1", "x1", owner="x"), cache.put("x2", "x2", owner="x")
    for n in range(10):  # y's new answers replace y's own older ones
        cache.put(f"y{n}", f"y{n}", owner="y")
    assert [cache.get(key) for key in ("x1", "x2", "y8", "y9", "y7")] == ["x1", "x2", "y8", "y9", None]
    cache.put("z1", "z1", owner="z")  # the cache is full: the least recently used answer goes, whoever's
    assert cache.get("x1") is None and cache.get("z1") == "z1"
    assert json.dumps(sorted(cache._owned)) == '["x", "y", "z"]'
