"""Benchmark: how much the results store grows per item, on a first run and on a second run of the same items.

Run from the repository root, with a checkout of the code to compare with (read-only use of git):

    git worktree add /tmp/crucible-main main
    .venv/bin/python bench/bench_store_growth.py --reference-src /tmp/crucible-main/src [--items 10000]
    git worktree remove /tmp/crucible-main

Workload (written into a temporary directory): the golden items of ``bench_overhead.py`` (1-2 citations per
item, a question type, tags) and its in-memory pipeline, except that each of the 10 retrieved chunks per item
carries a text of about 400 characters (``--chars``), the same text wherever the same chunk is retrieved.

For each code, the reference's (``--reference-src``, put first on the children's PYTHONPATH, so pytest's entry
point loads that pytest_crucible) and this checkout's, one after the other, into a fresh SQLite file:

* ``pytest golden_bench.jsonl --crucible-mode=component --crucible-outcome=record`` twice, the same items and the
  same pipeline both times (a CI job re-running an unchanged golden set);
* after each run, the file's size (the session moves its -wal into the file when the run closes; a -wal
  left beside it is counted too) and the CPU seconds of the run.

Reported: the store's growth per item on the first and on the second run (bytes of the file divided by the
number of items), the file sizes side by side, the runs' CPU seconds, the CPU time the writes themselves
take (``Store.record_scores`` in batches of 50 on the same scores, in a child process of each code, best of 3):
what hashing the stored values costs; and the readers on the two runs, each code on its own file (``crucible
show B``, ``show B --item``, ``report B``, ``compare A B``, ``export B``; CPU seconds, best of 2): what reading
the values back through their references costs. It reports, it never fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead as overhead

ROOT = Path(__file__).resolve().parents[1]

# Each chunk's text: about --chars characters, a function of the chunk's id alone (the same chunk retrieved for
# another item carries the same text, as a real index returns it).
TEXT = '''

_WORDS = ("warranty", "battery", "returns", "frame", "invoice", "shipping", "refund", "repair", "policy", "customer")


def _text(chunk):
    words, n = [], sum(map(ord, chunk))
    while sum(len(word) + 1 for word in words) < {chars}:
        n = (n * 1103515245 + 12345) % 2147483648
        words.append(_WORDS[n % len(_WORDS)])
    return ("passage " + chunk + ": " + " ".join(words))[:{chars}]


for _chunks in RESULTS.values():
    for _chunk in _chunks:
        _chunk["text"] = _text(_chunk["chunk_id"])
'''

# The writes alone, in a child of the code under test: the scores a session writes for these items and chunks
# (plain data, as the workers hand them over), written by Store.record_scores in batches of 50; CPU seconds.
WRITES = '''
import json, sys, time
from pathlib import Path
namespace = {}
exec(compile(Path(sys.argv[1]).read_text(), "conftest", "exec"), namespace)
from pytest_crucible.store import Store
items = [namespace["make_item"](i) for i in range(int(sys.argv[3]))]
scores = [{"item_id": item["id"], "question": item["question"], "item": item, "source": "golden_bench.jsonl", "line": i + 1,
           "answer": None, "retrieved": namespace["RESULTS"][item["question"]], "citations": [], "outcome": "passed",
           "metrics": {"ndcgAt10": 0.5, "recallAtK": 1.0, "mrr": 0.5, "precisionAtK": 0.1, "hitAtK": 1.0}}
          for i, item in enumerate(items)]
best = []
for attempt in range(3):
    store = Store.open(Path(sys.argv[2] + f".{attempt}"))
    runs = []
    for _ in range(2):  # a first run and a second of the same items
        run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
        started = time.process_time()
        for start in range(0, len(scores), 50):
            store.record_scores(run_id, scores[start:start + 50])
        runs.append(time.process_time() - started)
        store.finish_run(run_id, status="complete", golden_hash=None)
    store.close()
    best.append(runs)
print(json.dumps([min(run[0] for run in best), min(run[1] for run in best)]))
'''


def file_size(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def schema_of(db: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def readers(label: str, env: dict[str, str], db: Path, plugin_dir: Path, base: Path) -> dict[str, float]:
    """CPU seconds (best of 2) of each reader on the file's two runs (A the first, B the second)."""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        run_a, run_b = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY started_at")]
        item = conn.execute("SELECT item_id FROM results WHERE run_id = ? ORDER BY item_id LIMIT 1 OFFSET 7", [run_b]).fetchone()[0]
    finally:
        conn.close()
    times = {}
    for what, args in (("show B", ["show", run_b]), ("show B --item", ["show", run_b, "--item", item]),
                       ("report B", ["report", run_b, "-o", str(base / f"{label}.html")]), ("compare A B", ["compare", run_a, run_b]),
                       ("export B", ["export", run_b, "-o", str(base / f"{label}.json")])):
        best = []
        for _ in range(2):
            _, _, rc = overhead.run_child(["-m", "pytest_crucible.cli", *args, "--db", str(db)], plugin_dir, base / f"{label}-reader.log", env)
            best.append(overhead.LAST_CPU[0] if rc == 0 else float("nan"))
        times[what] = min(best)
    return times


def measure(label: str, src: Path | None, plugin_dir: Path, base: Path, n_items: int) -> dict:
    env = {"PYTHONPATH": str(src)} if src else {}
    db = base / f"{label}.db"
    sizes, cpus = [], []
    for run in (1, 2):
        wall, rss, rc = overhead.run_child(overhead.plugin_cmd(plugin_dir, db), plugin_dir, base / f"{label}-{run}.log", env)
        sizes.append(file_size(db))
        cpus.append(overhead.LAST_CPU[0])
        print(f"  {label}: run {run}: {wall:6.2f} s wall {overhead.LAST_CPU[0]:6.2f} s cpu  peak RSS {rss:6.1f} MB  rc={rc}  "
              f"file {sizes[-1] / 1e6:7.2f} MB  [{overhead.last_line(base / f'{label}-{run}.log')}]")
    log = base / f"{label}-writes.log"
    _, _, rc = overhead.run_child(["-c", WRITES, str(plugin_dir / "conftest.py"), str(base / f"{label}-writes.db"), str(n_items)],
                                  plugin_dir, log, env)
    import json

    writes = json.loads(log.read_text().splitlines()[-1]) if rc == 0 else [float("nan")] * 2
    return {"schema": schema_of(db), "sizes": sizes, "cpus": cpus, "writes": writes,
            "readers": readers(label, env, db, plugin_dir, base)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--chars", type=int, default=400, help="characters of each retrieved chunk's text (default 400)")
    parser.add_argument("--reference-src", type=Path, help="the src folder of a checkout of the code to compare with (e.g. main's)")
    opts = parser.parse_args()
    import pytest

    print(f"python {platform.python_version()}, pytest {pytest.__version__}, {os.cpu_count()} CPUs, {platform.machine()}; "
          f"{opts.items:,} items, 10 chunks of {opts.chars} characters each")
    codes: list[tuple[str, Path | None]] = []
    if opts.reference_src:
        if not (opts.reference_src / "pytest_crucible" / "__init__.py").is_file():
            print(f"{opts.reference_src}: no pytest_crucible package here (give a checkout's src folder)", file=sys.stderr)
            return 2
        codes.append(("reference", opts.reference_src.resolve()))
    codes.append(("this checkout", None))
    results = {}
    with tempfile.TemporaryDirectory(prefix="crucible-growth-") as name:
        tmp = Path(name)
        overhead.prepare_child_env(tmp)
        overhead.CHILD_ENV.pop("PYTHONPATH", None)
        plugin_dir, _ = overhead.build(tmp, opts.items)
        with open(plugin_dir / "conftest.py", "a") as conftest:
            conftest.write(TEXT.format(chars=opts.chars))
        warm = tmp / "warm"
        warm.mkdir()
        for label, src in codes:  # untimed: fills the bytecode cache of each code
            env = {"PYTHONPATH": str(src)} if src else {}
            overhead.run_child(overhead.plugin_cmd(plugin_dir, warm / f"{label}.db"), plugin_dir, warm / "w.log", env)
        for label, src in codes:
            results[label] = measure(label.replace(" ", "-"), src, plugin_dir, tmp, opts.items)
    print()
    n = opts.items
    print(f"{'code':14s} {'schema':>6s} {'1st run B/item':>14s} {'2nd run B/item':>14s} {'file after 1st':>14s} {'after 2nd':>10s}"
          f" {'run cpu s 1st/2nd':>17s} {'writes cpu s 1st/2nd':>20s}")
    for label, found in results.items():
        first, second = found["sizes"][0], found["sizes"][1] - found["sizes"][0]
        print(f"{label:14s} {found['schema']:6d} {first / n:14,.0f} {second / n:14,.0f} {found['sizes'][0] / 1e6:11.1f} MB"
              f" {found['sizes'][1] / 1e6:7.1f} MB {found['cpus'][0]:8.2f}/{found['cpus'][1]:<8.2f}"
              f" {found['writes'][0]:10.2f}/{found['writes'][1]:<9.2f}")
    print()
    names = list(next(iter(results.values()))["readers"])
    print(f"{'readers, cpu s':14s} " + " ".join(f"{name:>14s}" for name in names))
    for label, found in results.items():
        print(f"{label:14s} " + " ".join(f"{found['readers'][name]:14.2f}" for name in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
