"""Load `crucible serve` the ways docs/reliability.md lists, and print the figures.

    .venv/bin/python scripts/serve_load.py                  # every scenario
    .venv/bin/python scripts/serve_load.py --only compares  # one of: keys, compares, flood, slow,
                                                            # forwarded, unread, metrics, cache

It writes a database with two complete 169-item runs (and two 12-item ones, for the cache) in a
temporary directory, and two keys of its workspace; it starts
`crucible serve --port 0` on 127.0.0.1 as a subprocess (with the defaults, so the figures
are those a user gets), and measures:

- keys: what verifying one key costs in-process, wrong and right (the hashing);
- compares: the latency of a run list while 40 compares of the two runs are in flight;
- flood: a valid request's latency while 16 threads send wrong keys from another address (127.0.0.2);
- slow: 600 connections that send half a request line and stop: how many are still open later;
- forwarded: clients on 127.0.0.1 sending their own X-Forwarded-For: 200 wrong keys each with another
  header value (how many 401, how many 429), 40 wrong keys claiming 127.0.0.2 (is 127.0.0.2's valid key
  then served?), a header value written as a fake access log entry (what the log shows), and 200 wrong
  secrets of a legacy PBKDF2 key with a rotating header (the server's CPU seconds);
- unread: with --max-connections 10, 12 connections (a 4 KiB receive buffer each) that each pipeline
  250 metrics requests (then 250 /openapi.json requests, whose answers are more than the kernel
  buffers) and never read an answer: how many the server still holds (Linux /proc/net/tcp), and
  what a run list gets, every 5 s;
- metrics: a run list's latency (another key) while 60 threads ask for a run's metrics with one key;
- cache: a compare answered from memory, before and after another key asks 300 compares with
  distinct seeds (of two small runs).

Nothing leaves 127.0.0.1. The figures depend on the machine; tests assert behaviour only.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import secrets
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx

from pytest_crucible.server.keys import authenticate, create_key
from pytest_crucible.store import Store

ITEMS = 169
FLOOD_SOURCE = "127.0.0.2"  # the wrong keys come from another loopback address than the valid client (Linux)
FORGED_ENTRY = '10.0.0.1:0 - "GET /x HTTP/1.1" 200 OK | admin-console'  # an X-Forwarded-For shaped as a log entry
METRICS = ("ndcgAt10", "recallAtK", "precisionAtK", "mrr", "hitAtK", "faithfulness", "responseRelevancy",
           "contextPrecision", "contextRecall", "truthfulness")


def add_run(store: Store, shift: float, items: int = ITEMS) -> str:
    run_id = store.start_run(config_hash="ab" * 32, params={}, resolved={"retrievalLimit": 10}, mode="system",
                             outcome_mode="record", judge_model="claude-haiku-5-5", judge_prompt_version="crucible-v1",
                             workspace="shop", labels={"model": "chat"})
    scores = []
    for i in range(items):
        item = {"id": f"q{i:03d}", "question": f"question {i}?", "questionType": "multi_hop" if i % 2 else "simple",
                "tags": [f"topic:t{i % 7}"], "citations": [{"docId": f"doc{i}", "mode": "required"}]}
        wobble = ((i * 7919) % 100) / 400
        scores.append({"item_id": item["id"], "question": item["question"], "item": item, "outcome": "passed",
                       "answer": "an answer [S1]", "confidence": (i % 10) / 10, "crag_grade": "perfect",
                       "error_class": "correct",
                       "metrics": {name: min(1.0, 0.3 + wobble + shift * (n % 3)) for n, name in enumerate(METRICS)}})
    store.record_scores(run_id, scores)
    store.finish_run(run_id, status="complete", golden_hash="g" * 64)
    return run_id


def serve(db: Path, *options: str, log: list[str] | None = None) -> tuple[subprocess.Popen, str]:
    """`crucible serve --port 0 OPTIONS` over ``db``; its access log lines go to ``log`` when given."""
    process = subprocess.Popen([sys.executable, "-m", "pytest_crucible.cli", "serve", "--db", str(db), "--port", "0", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    match = re.search(r"on (http://127\.0\.0\.1:\d+) ", process.stdout.readline())
    if not match:
        process.kill()
        raise SystemExit("the server did not start")
    # Drain the access log: a full pipe would block the server on its next log line.
    kept = log if log is not None else []
    threading.Thread(target=lambda: kept.extend(process.stdout) if log is not None else process.stdout.read(),
                     daemon=True).start()
    return process, match.group(1)


@contextmanager
def serving(db: Path, *options: str, log: list[str] | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    process, url = serve(db, *options, log=log)
    try:
        yield process, url
    finally:
        process.terminate()
        process.wait(timeout=30)
        time.sleep(0.2)  # the last log lines


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def counted(statuses: list[int]) -> dict[int, int]:
    return {status: statuses.count(status) for status in sorted(set(statuses))}


def client(url: str, key: str | None = None, timeout: float = 120, source: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = httpx.HTTPTransport(local_address=source) if source else None
    return httpx.Client(base_url=url, headers=headers, timeout=timeout, trust_env=False, transport=transport)


def timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def scenario_keys(db: Path, key: str) -> None:
    store = Store.open(db)
    wrong = key[:-4] + "AAAA"
    for label, token in (("wrong key", wrong), ("right key", key)):
        times = [timed(functools.partial(authenticate, store.db.conn, token))[0] for _ in range(50)]
        print(f"keys: one {label} costs {statistics.median(times) * 1000:.2f} ms to verify (median of 50, in-process)")
    store.close()


def scenario_compares(url: str, key: str, a: str, b: str) -> None:
    with client(url, key) as http:
        single, response = timed(lambda: http.get("/api/v1/evals/runs/compare", params={"a": a, "b": b}))
        print(f"compares: one compare of two {ITEMS}-item runs: {single:.2f} s, HTTP {response.status_code}")
        again, response = timed(lambda: http.get("/api/v1/evals/runs/compare", params={"a": a, "b": b}))
        print(f"compares: the same compare again: {again:.3f} s, HTTP {response.status_code}")
    statuses: list[int] = []

    def one_compare(seed: int) -> None:
        with client(url, key) as http:  # a new seed each: no cached answer to hand back
            statuses.append(http.get("/api/v1/evals/runs/compare", params={"a": a, "b": b, "seed": seed}).status_code)

    with ThreadPoolExecutor(40) as pool:
        futures = [pool.submit(one_compare, 1000 + n) for n in range(40)]
        time.sleep(0.5)
        with client(url, key) as http:
            latency, listed = timed(lambda: http.get("/api/v1/evals/runs"))
        for future in futures:
            future.result()
    counts = {status: statuses.count(status) for status in sorted(set(statuses))}
    print(f"compares: run list during 40 concurrent compares: {latency:.2f} s (HTTP {listed.status_code}); "
          f"the compares answered {counts}")


def scenario_flood(url: str, key: str) -> None:
    stop = threading.Event()
    statuses: list[int] = []
    wrong = key[:-4] + "AAAA"

    def flood() -> None:
        with client(url, wrong, source=FLOOD_SOURCE) as http:
            while not stop.is_set():
                statuses.append(http.get("/api/v1/evals/runs").status_code)

    threads = [threading.Thread(target=flood) for _ in range(16)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    with client(url, key) as http:
        latencies = [timed(lambda: http.get("/api/v1/evals/runs"))[0] for _ in range(5)]
        valid = http.get("/api/v1/evals/runs").status_code
    stop.set()
    for thread in threads:
        thread.join()
    counts = {status: statuses.count(status) for status in sorted(set(statuses))}
    print(f"flood: a valid run list while 16 threads send wrong keys from {FLOOD_SOURCE}: median {statistics.median(latencies):.2f} s, "
          f"max {max(latencies):.2f} s (then HTTP {valid}); the wrong keys got {counts}")


def scenario_slow(url: str, key: str, wait: float) -> None:
    host, port = url.removeprefix("http://").split(":")
    sockets = []
    for _ in range(600):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"GET /api/v1/evals/ru")  # half a request line, then nothing
        sockets.append(sock)
    with client(url, key, timeout=30) as http:
        during = http.get("/api/v1/evals/runs").status_code
    time.sleep(wait)
    still_open = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            still_open += sock.recv(1) != b""  # data: an answer, not a close
        except BlockingIOError:
            still_open += 1  # nothing to read: the server still holds it open
        except OSError:
            pass  # reset: closed
    with client(url, key, timeout=30) as http:
        status = http.get("/api/v1/evals/runs").status_code
    for sock in sockets:
        sock.close()
    print(f"slow: 600 connections sending half a request line: a normal request meanwhile: HTTP {during}; "
          f"{still_open} still open after {wait:.0f} s; a normal request then: HTTP {status}")


def add_legacy_key(db: Path) -> tuple[str, str]:
    """A key as schema 9 and earlier stored it (PBKDF2-SHA256, 50,000 rounds): (the key, a wrong secret of its id)."""
    key_id, secret, salt = "01KZLEGACYKEY0000000000000", secrets.token_urlsafe(32), secrets.token_bytes(16)
    legacy = f"pbkdf2_sha256$50000${hashlib.pbkdf2_hmac('sha256', secret.encode(), salt, 50_000).hex()}"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO api_keys (id, workspace, name, scopes, salt, key_hash, created_at)"
                     " VALUES (?, 'shop', 'old', ?, ?, ?, 'then')", [key_id, json.dumps(["runs:read"]), salt.hex(), legacy])
    conn.close()
    return f"crk_{key_id}_{secret}", f"crk_{key_id}_{secret[::-1]}"


def scenario_forwarded(db: Path, key: str) -> None:
    wrong = key[:-4] + "AAAA"
    with serving(db) as (_, url), client(url, wrong) as http:  # 1. a new X-Forwarded-For per wrong key
        statuses = [http.get("/api/v1/evals/runs", headers={"X-Forwarded-For": f"10.0.{n // 250}.{n % 250 + 1}"}).status_code
                    for n in range(200)]
    print(f"forwarded: 200 wrong keys from 127.0.0.1, each with another X-Forwarded-For: {counted(statuses)}")
    with serving(db) as (_, url):  # 2. wrong keys in another address's name
        with client(url, wrong) as http:
            statuses = [http.get("/api/v1/evals/runs", headers={"X-Forwarded-For": FLOOD_SOURCE}).status_code for _ in range(40)]
        with client(url, key, source=FLOOD_SOURCE) as http:
            victim = http.get("/api/v1/evals/runs").status_code
    print(f"forwarded: 40 wrong keys from 127.0.0.1 with X-Forwarded-For: {FLOOD_SOURCE} ({counted(statuses)}); "
          f"then {FLOOD_SOURCE}'s valid key: HTTP {victim}")
    log: list[str] = []
    with serving(db, log=log) as (_, url), client(url, key) as http:  # 3. a header value shaped as a log entry
        status = http.get("/api/v1/evals/runs", headers={"X-Forwarded-For": FORGED_ENTRY}).status_code
    lines = [line.rstrip("\n") for line in log if "/api/v1/evals/runs " in line]
    print(f"forwarded: X-Forwarded-For: {FORGED_ENTRY} (HTTP {status}) is logged as: {lines[-1] if lines else '(nothing)'}")
    legacy, legacy_wrong = add_legacy_key(db)
    try:
        with serving(db) as (process, url), client(url, legacy_wrong) as http:  # 4. legacy hashes, one per new address
            http.get("/openapi.json")
            start = cpu_seconds(process.pid)
            elapsed, statuses = timed(lambda: [http.get("/api/v1/evals/runs", headers={"X-Forwarded-For": f"10.1.0.{n + 1}"}).status_code
                                               for n in range(200)])
            spent = cpu_seconds(process.pid) - start
    finally:
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("DELETE FROM api_keys WHERE id = ?", [legacy.split("_")[1]])
        conn.close()
    print(f"forwarded: 200 wrong secrets of a legacy (PBKDF2) key, each with another X-Forwarded-For: {counted(statuses)}; "
          f"{spent:.2f} s of server CPU, {elapsed:.2f} s in all")


def held_connections(port: int) -> int:
    """Connections the server on ``port`` holds open (established, its side; Linux /proc/net/tcp)."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "01" for line in lines)


def scenario_unread(db: Path, key: str, path: str, what: str, wait: float) -> None:
    request = f"GET {path} HTTP/1.1\r\nHost: load\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
    with serving(db, "--max-connections", "10") as (_, url):
        host, port = url.removeprefix("http://").split(":")
        sockets = []
        for _ in range(12):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the kernel buffers little for it
            sock.settimeout(10)
            sock.connect((host, int(port)))
            sock.sendall(request * 250)  # 250 pipelined requests; not one answer is ever read
            sockets.append(sock)
            time.sleep(0.5)
        started, timeline = time.monotonic(), []
        while True:
            elapsed = time.monotonic() - started
            held = held_connections(int(port))
            try:
                with client(url, key, timeout=10) as http:
                    status = str(http.get("/api/v1/evals/runs").status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            timeline.append((elapsed, held, status))
            if elapsed >= wait:
                break
            time.sleep(min(5.0, wait - elapsed))
        for sock in sockets:
            sock.close()
    shown = "; ".join(f"{elapsed:.0f} s: {held} held, a run list {status}" for elapsed, held, status in timeline)
    print(f"unread: 12 connections (--max-connections 10; each with a 4 KiB receive buffer, opened 0.5 s apart), each "
          f"pipelining 250 {what} requests and never reading; then {shown}")


def scenario_metrics(url: str, flooder: str, key: str, run_id: str, seconds: float) -> None:
    with client(url, key) as http:
        quiet = [timed(lambda: http.get("/api/v1/evals/runs"))[0] for _ in range(10)]
    stop = threading.Event()
    statuses: list[int] = []

    def flood() -> None:
        with client(url, flooder) as http:
            while not stop.is_set():
                statuses.append(http.get(f"/api/v1/evals/runs/{run_id}/metrics").status_code)

    threads = [threading.Thread(target=flood) for _ in range(60)]
    for thread in threads:
        thread.start()
    latencies, listed = [], []
    deadline = time.monotonic() + seconds
    time.sleep(min(2.0, seconds / 4))
    with client(url, key) as http:
        while time.monotonic() < deadline:
            latency, response = timed(lambda: http.get("/api/v1/evals/runs"))
            latencies.append(latency)
            listed.append(response.status_code)
            time.sleep(0.25)
    stop.set()
    for thread in threads:
        thread.join()
    print(f"metrics: a run list alone: median {statistics.median(quiet):.3f} s; while 60 threads ask for metrics with "
          f"another key for {seconds:.0f} s: median {statistics.median(latencies):.3f} s, max {max(latencies):.2f} s "
          f"({len(latencies)} lists, {counted(listed)}); the metrics requests got {counted(statuses)}")


def scenario_cache(url: str, key: str, flooder: str, a: str, b: str, small: tuple[str, str]) -> None:
    compare = "/api/v1/evals/runs/compare"
    with client(url, key) as http:
        first, response = timed(lambda: http.get(compare, params={"a": a, "b": b}))
        again, _ = timed(lambda: http.get(compare, params={"a": a, "b": b}))
    statuses: list[int] = []

    def one_seed(seed: int) -> None:
        with client(url, flooder) as http:
            while True:
                answer = http.get(compare, params={"a": small[0], "b": small[1], "seed": seed})
                if answer.status_code not in (429, 503):
                    break
                time.sleep(0.05)  # turned away: the server computes a bounded number at once
            statuses.append(answer.status_code)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one_seed, range(5000, 5300)))
    with client(url, key) as http:
        after, response = timed(lambda: http.get(compare, params={"a": a, "b": b}))
    print(f"cache: a compare of two {ITEMS}-item runs: {first:.2f} s, again {again:.3f} s; after another key's 300 compares "
          f"with distinct seeds ({counted(statuses)}): {after:.3f} s (HTTP {response.status_code}, "
          f"{'answered from memory' if after < first / 5 else 'computed again'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    scenarios = ["keys", "compares", "flood", "slow", "forwarded", "unread", "metrics", "cache"]
    parser.add_argument("--only", choices=scenarios, action="append")
    parser.add_argument("--slow-wait", type=float, default=20.0, help="seconds before counting open connections (default 20)")
    parser.add_argument("--unread-wait", type=float, default=30.0,
                        help="seconds to watch the connections that never read (default 30)")
    parser.add_argument("--metrics-seconds", type=float, default=25.0, help="seconds of the metrics flood (default 25)")
    args = parser.parse_args(argv)
    chosen = args.only or scenarios
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "crucible.db"
        store = Store.open(db)
        a, b = add_run(store, 0.0), add_run(store, 0.05)
        small = add_run(store, 0.0, items=12), add_run(store, 0.05, items=12)
        key = create_key(store.db.conn, workspace="shop", scopes=["runs:read"])[1]
        other = create_key(store.db.conn, workspace="shop", scopes=["runs:read"])[1]  # a second client
        store.close()
        if "keys" in chosen:
            scenario_keys(db, key)
        if "forwarded" in chosen:
            scenario_forwarded(db, key)
        if "unread" in chosen:
            scenario_unread(db, key, f"/api/v1/evals/runs/{a}/metrics", "metrics (5.5 KB answers)", args.unread_wait)
            scenario_unread(db, key, "/openapi.json", "/openapi.json (26 KB answers: more than the kernel buffers)",
                            args.unread_wait)
        for name in ("compares", "flood", "slow", "metrics", "cache"):
            if name not in chosen:
                continue
            with serving(db) as (_, url):  # a fresh server per scenario: no cache or counters carried over
                {"compares": lambda: scenario_compares(url, key, a, b), "flood": lambda: scenario_flood(url, key),
                 "slow": lambda: scenario_slow(url, key, args.slow_wait),
                 "metrics": lambda: scenario_metrics(url, other, key, a, args.metrics_seconds),
                 "cache": lambda: scenario_cache(url, key, other, a, b, small)}[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
