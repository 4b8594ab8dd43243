"""Benchmark: the results store on PostgreSQL against SQLite, on the same machine, in one run.

Run from the repository root (needs PostgreSQL's server binaries and the postgres extra):

    .venv/bin/python bench/bench_postgres.py [--items N] [--repeat R]

It starts a throwaway PostgreSQL cluster on 127.0.0.1 (tests/postgres_server.py, as the tests do), then,
interleaved, best of R (default 3):

* (a) recording: a run of N items (default 10,000) written as a session writes them (``record_scores`` in
  batches of 50, then ``finish_run``), into a new SQLite file and into a new PostgreSQL database;
* (b) comparing: ``crucible compare A B --json`` of two such runs (the second a little better), as a
  subprocess, on each backend.

* (c) eight writers at once: eight processes each record a run of N/8 items into one PostgreSQL database
  at the same moment (CI shards and pull requests on one server); the slowest and the fastest against
  one process writing N/8 items alone, and whether every row arrived.

It prints the times side by side and the ratios PostgreSQL / SQLite. The cluster runs with fsync off (a
test cluster), so the writes measure the protocol and the statements, not the disk. It reports, it never fails.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from postgres_server import start_or_skip  # noqa: E402  (the tests' throwaway cluster)

from pytest_crucible.store import Store  # noqa: E402

BATCH = 50  # what a session writes at once (store.recorder.FLUSH_ITEMS)


def scores(n: int, shift: float, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        item = {"id": f"q{i:05d}", "question": f"question {i}?", "questionType": "simple" if i % 2 else "multi_hop",
                "citations": [{"docId": f"doc{i % 997}", "chunkId": f"doc{i % 997}#p1", "mode": "required"}]}
        retrieved = [{"chunk_id": f"doc{(i + j) % 997}#p1", "doc_id": f"doc{(i + j) % 997}", "text": "x" * 200} for j in range(10)]
        metrics = {"ndcgAt10": min(1.0, rng.random() * 0.8 + shift), "recallAtK": rng.random(), "mrr": rng.random(),
                   "precisionAtK": rng.random() / 10, "hitAtK": float(rng.random() < 0.7)}
        out.append({"item_id": item["id"], "question": item["question"], "item": item, "source": "golden.jsonl", "line": i + 1,
                    "answer": "an answer [S1]", "retrieved": retrieved, "citations": [retrieved[0]["chunk_id"]],
                    "confidence": rng.random(), "outcome": "passed", "metrics": metrics})
    return out


def record(database, rows: list[dict]) -> tuple[float, str]:
    started = time.perf_counter()
    store = Store.open(database)
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component",
                             outcome_mode="record")
    for start in range(0, len(rows), BATCH):
        store.record_scores(run_id, rows[start:start + BATCH])
    store.finish_run(run_id, status="complete", golden_hash="g" * 64)
    store.close()
    return time.perf_counter() - started, run_id


def compare(database, a: str, b: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest_crucible.cli", "compare", a, b, "--json", "--db", str(database)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        print(f"  compare failed ({done.returncode}): {done.stderr.strip()[:300]}")
    return elapsed


WRITER = """
import sys, time
sys.path.insert(0, {tests!r})
sys.path.insert(0, {bench!r})
from bench_postgres import record, scores
rows = scores({n}, 0.0, {seed})
for row in rows:
    row["item_id"] = row["item"]["id"] = f"w{seed}-" + row["item_id"]
print(record({url!r}, rows)[0])
"""


def eight_writers(server, items: int) -> tuple[float, float, float, int]:
    """(alone, fastest, slowest) seconds of writing ``items`` items, and the result rows that arrived."""
    url = server.create_database()
    Store.open(url).close()  # the schema, before the clock starts
    def writer(seed: int) -> subprocess.Popen:
        code = WRITER.format(tests=str(ROOT / "tests"), bench=str(ROOT / "bench"), n=items, seed=seed, url=url)
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    alone = float(writer(99).communicate()[0])
    procs = [writer(seed) for seed in range(8)]
    walls = [float(proc.communicate()[0]) for proc in procs]
    store = Store.open(url)
    arrived = store.db.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    store.close()
    return alone, min(walls), max(walls), arrived


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    try:
        server = start_or_skip()
    except BaseException as exc:  # pytest's skip: no PostgreSQL here
        print(f"bench_postgres: cannot start PostgreSQL: {exc}")
        return 0
    try:
        base, better = scores(args.items, 0.0, 1), scores(args.items, 0.02, 2)
        times: dict[str, list[float]] = {"record sqlite": [], "record postgres": [], "compare sqlite": [], "compare postgres": []}
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeat):
                databases = {"sqlite": Path(tmp) / f"run-{rep}.db", "postgres": server.create_database()}
                for backend, database in databases.items():  # interleaved: sqlite, postgres, sqlite, ...
                    seconds, a = record(database, base)
                    times[f"record {backend}"].append(seconds)
                    _, b = record(database, better)
                    times[f"compare {backend}"].append(compare(database, a, b))
                    print(f"  rep {rep + 1} {backend:<8} record {seconds:6.2f} s   compare {times[f'compare {backend}'][-1]:6.2f} s",
                          flush=True)
        print(f"\n{args.items} items, batches of {BATCH}, best of {args.repeat}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        for what in ("record", "compare"):
            sqlite, postgres = min(times[f"{what} sqlite"]), min(times[f"{what} postgres"])
            print(f"{what:<8} sqlite {sqlite:6.2f} s   postgres {postgres:6.2f} s   ratio postgres / sqlite {postgres / sqlite:.2f}x")
        per = args.items // 8
        alone, fastest, slowest, arrived = eight_writers(server, per)
        print(f"8 writers of {per} items each into one PostgreSQL database: alone {alone:.2f} s; at once fastest "
              f"{fastest:.2f} s, slowest {slowest:.2f} s ({slowest / alone:.1f}x alone on {os.cpu_count()} CPUs); "
              f"{arrived} of {9 * per} result rows arrived")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
