"""Load `crucible serve` the ways docs/reliability.md lists, and print the figures.

    .venv/bin/python scripts/serve_load.py                  # every scenario
    .venv/bin/python scripts/serve_load.py --only compares  # one of: keys, compares, flood, slow

It writes a database with two complete 169-item runs (temporary directory), starts
`crucible serve --port 0` on 127.0.0.1 as a subprocess (with the defaults, so the figures
are those a user gets), and measures:

- keys: what verifying one key costs in-process, wrong and right (the hashing);
- compares: the latency of a run list while 40 compares of the two runs are in flight;
- flood: a valid request's latency while 16 threads send wrong keys from another address (127.0.0.2);
- slow: 600 connections that send half a request line and stop: how many are still open later.

Nothing leaves 127.0.0.1. The figures depend on the machine; tests assert behaviour only.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from pytest_crucible.server.keys import authenticate, create_key
from pytest_crucible.store import Store

ITEMS = 169
FLOOD_SOURCE = "127.0.0.2"  # the wrong keys come from another loopback address than the valid client (Linux)
METRICS = ("ndcgAt10", "recallAtK", "precisionAtK", "mrr", "hitAtK", "faithfulness", "responseRelevancy",
           "contextPrecision", "contextRecall", "truthfulness")


def add_run(store: Store, shift: float) -> str:
    run_id = store.start_run(config_hash="ab" * 32, params={}, resolved={"retrievalLimit": 10}, mode="system",
                             outcome_mode="record", judge_model="claude-haiku-5-5", judge_prompt_version="crucible-v1",
                             workspace="shop", labels={"model": "chat"})
    scores = []
    for i in range(ITEMS):
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


def serve(db: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "pytest_crucible.cli", "serve", "--db", str(db), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    match = re.search(r"on (http://127\.0\.0\.1:\d+) ", process.stdout.readline())
    if not match:
        process.kill()
        raise SystemExit("the server did not start")
    # Drain the access log: a full pipe would block the server on its next log line.
    threading.Thread(target=process.stdout.read, daemon=True).start()
    return process, match.group(1)


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
        times = [timed(lambda: authenticate(store.db.conn, token))[0] for _ in range(50)]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["keys", "compares", "flood", "slow"], action="append")
    parser.add_argument("--slow-wait", type=float, default=20.0, help="seconds before counting open connections (default 20)")
    args = parser.parse_args(argv)
    chosen = args.only or ["keys", "compares", "flood", "slow"]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "crucible.db"
        store = Store.open(db)
        a, b = add_run(store, 0.0), add_run(store, 0.05)
        key = create_key(store.db.conn, workspace="shop", scopes=["runs:read"])[1]
        store.close()
        if "keys" in chosen:
            scenario_keys(db, key)
        for name in ("compares", "flood", "slow"):
            if name not in chosen:
                continue
            process, url = serve(db)  # a fresh server per scenario: no cache or counters carried over
            try:
                {"compares": lambda: scenario_compares(url, key, a, b), "flood": lambda: scenario_flood(url, key),
                 "slow": lambda: scenario_slow(url, key, args.slow_wait)}[name]()
            finally:
                process.terminate()
                process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
