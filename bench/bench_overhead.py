"""Benchmark: pytest-crucible's per-item overhead over a bare parametrized pytest module.

Run from the repository root:

    .venv/bin/python bench/bench_overhead.py [--items N] [--repeat R] [--no-profile]

Workload (written into a temporary directory):

* 10,000 golden items in ``golden_bench.jsonl``, each with 1-2 citations
  (chunk-level, required or acceptable), a question type, tags.
* One trivial in-memory pipeline: a dict lookup from the question to one of
  10,000 precomputed results of 10 retrieved chunks (no I/O, no scoring); about
  two thirds of the items have a cited chunk among their 10.

Timed, interleaved, in this one invocation (subprocesses of this python):

* (a) plugin: ``pytest golden_bench.jsonl --crucible-mode=component
  --crucible-outcome=record --crucible-db=<tmp>/run-N.db -p no:cacheprovider -q``
  (a fresh SQLite file per repetition, so every repetition does the same work);
* (b) bare:   ``pytest test_bare.py -p no:crucible -p no:cacheprovider -q``, a
  module that parametrizes one test over the same 10,000 items (read from the
  same file at import) and calls the same pipeline, and nothing else.

Best of R (default 3) wall time per variant and the ratio (target: plugin <=
1.3x bare).  Peak RSS of each child comes from ``os.wait4`` (ru_maxrss of that
child alone; target: < 300 MB for the plugin run).  When the time target is
missed the script profiles one run of each variant with cProfile and prints
where the plugin's extra time goes (by package and top functions).

It reports, it never fails: the exit code is 0 whenever the runs themselves
succeeded.
"""

from __future__ import annotations

import argparse
import cProfile  # noqa: F401 - imported to fail early if unavailable
import json
import os
import platform
import pstats
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TIME_TARGET = 1.3
RSS_TARGET_MB = 300.0

# The pipeline and the item generator, shared verbatim by both conftests.
PIPELINE_SOURCE = '''
import pytest

N_ITEMS = {n_items}
N_DOCS = 2000


def make_item(i):
    doc = "doc-%04d" % (i % N_DOCS)
    citations = [{{"docId": doc, "chunkId": "%s#p%d" % (doc, i % 7), "mode": "required"}}]
    if i % 2:
        citations.append({{"docId": doc, "chunkId": "%s#p%d" % (doc, (i + 3) % 7), "mode": "acceptable"}})
    return {{
        "id": "item-%05d" % i,
        "question": "question %d: what does section %d of %s say about topic %d?" % (i, i % 7, doc, i % 13),
        "citations": citations,
        "questionType": ("simple", "comparison", "multi_hop")[i % 3],
        "popularity": ("head", "torso", "tail")[i % 3],
        "tags": ["topic:t%d" % (i % 13)],
    }}


def _retrieved(i):
    # 10 chunks; the cited chunk is at rank (i % 15) + 1 when that is <= 10, else absent.
    doc = "doc-%04d" % (i % N_DOCS)
    hit_rank = i % 15
    chunks = []
    for rank in range(10):
        if rank == hit_rank:
            chunk, chunk_doc = "%s#p%d" % (doc, i % 7), doc
        else:
            other = "doc-%04d" % ((i * 31 + rank * 17 + 1) % N_DOCS)
            chunk, chunk_doc = "%s#p%d" % (other, (rank + 5) % 7), other
        chunks.append({{"chunk_id": chunk, "doc_id": chunk_doc, "text": "text of " + chunk, "score": 10.0 - rank}})
    return chunks


RESULTS = {{make_item(i)["question"]: _retrieved(i) for i in range(N_ITEMS)}}


def pipeline(question, *, item, config, mode):
    return {{"answer": None, "retrieved": RESULTS[question][: config["retrievalLimit"]]}}


@pytest.fixture(scope="session")
def crucible_pipeline():
    return pipeline
'''

BARE_TEST = '''
import json
from pathlib import Path

import pytest

CONFIG = {"retrievalLimit": 10}
ITEMS = [json.loads(line) for line in (Path(__file__).parent / "golden_bench.jsonl").read_text().splitlines() if line]


@pytest.mark.parametrize("item", ITEMS, ids=[item["id"] for item in ITEMS])
def test_item(item, crucible_pipeline):
    crucible_pipeline(item["question"], item=item, config=CONFIG, mode="component")
'''


def build(tmp: Path, n_items: int) -> tuple[Path, Path]:
    source = PIPELINE_SOURCE.format(n_items=n_items)
    namespace: dict = {}
    exec(compile(source, "pipeline", "exec"), namespace)  # only to generate the items
    lines = "".join(json.dumps(namespace["make_item"](i)) + "\n" for i in range(n_items))
    plugin_dir, bare_dir = tmp / "plugin", tmp / "bare"
    for directory in (plugin_dir, bare_dir):
        directory.mkdir()
        (directory / "pytest.ini").write_text("[pytest]\n")  # own rootdir: no repository ini
        (directory / "conftest.py").write_text(source)
        (directory / "golden_bench.jsonl").write_text(lines)
    (bare_dir / "test_bare.py").write_text(BARE_TEST)
    return plugin_dir, bare_dir


def plugin_cmd(plugin_dir: Path, db: Path) -> list[str]:
    return ["-m", "pytest", "golden_bench.jsonl", "--crucible-mode=component", "--crucible-outcome=record",
            f"--crucible-db={db}", "-p", "no:cacheprovider", "-q"]


def bare_cmd() -> list[str]:
    return ["-m", "pytest", "test_bare.py", "-p", "no:crucible", "-p", "no:cacheprovider", "-q"]


def run_child(args: list[str], cwd: Path, log: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) of this child alone, exit code."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen([PY, *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode  # ru_maxrss is in KiB on Linux


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    summary = [line for line in lines if re.search(r"\d+ (passed|failed|error)", line)]
    return (summary or lines or ["(no output)"])[-1].strip("= ")


def package_of(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins/C (sqlite3, json, ...)" if filename.startswith("~") else filename
    for marker, name in (("pytest_crucible", "pytest_crucible"), ("_pytest", "_pytest"), ("pluggy", "pluggy"),
                         ("pydantic_core", "pydantic"), ("pydantic", "pydantic"), ("sqlite_utils", "sqlite_utils"),
                         ("sqlite3", "sqlite3 (py)"), ("conftest", "conftest (pipeline)"), ("test_bare", "test_bare"),
                         ("xdist", "xdist")):
        if marker in filename:
            if name == "pytest_crucible":
                rest = filename.split("pytest_crucible/", 1)[-1]
                return "pytest_crucible/" + rest
            return name
    if "/lib/python3" in filename:
        return "stdlib"
    return filename


def profile(plugin_dir: Path, bare_dir: Path, tmp: Path) -> None:
    prof_plugin, prof_bare = tmp / "plugin.prof", tmp / "bare.prof"
    db = tmp / "profile.db"
    w_p, _, rc_p = run_child(["-m", "cProfile", "-o", str(prof_plugin), *plugin_cmd(plugin_dir, db)], plugin_dir,
                             tmp / "prof-plugin.log")
    w_b, _, rc_b = run_child(["-m", "cProfile", "-o", str(prof_bare), *bare_cmd()], bare_dir, tmp / "prof-bare.log")
    print(f"\nprofile (cProfile, one run each; profiling inflates both): plugin {w_p:.2f} s (rc {rc_p}), bare {w_b:.2f} s (rc {rc_b})")

    def by_package(path: Path) -> tuple[dict[str, float], float, pstats.Stats]:
        stats = pstats.Stats(str(path))
        totals: dict[str, float] = {}
        for (filename, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():
            key = package_of(filename)
            totals[key] = totals.get(key, 0.0) + tt
        return totals, stats.total_tt, stats

    plugin_pkgs, plugin_total, plugin_stats = by_package(prof_plugin)
    bare_pkgs, bare_total, _ = by_package(prof_bare)
    print(f"profiled total: plugin {plugin_total:.2f} s, bare {bare_total:.2f} s, extra {plugin_total - bare_total:+.2f} s")
    print("\nown time (tottime) by package/module, plugin vs bare, largest extra first:")
    print(f"  {'where':48s} {'plugin s':>9s} {'bare s':>8s} {'extra s':>8s}")
    keys = sorted(set(plugin_pkgs) | set(bare_pkgs), key=lambda k: plugin_pkgs.get(k, 0) - bare_pkgs.get(k, 0), reverse=True)
    for key in keys[:16]:
        p, b = plugin_pkgs.get(key, 0.0), bare_pkgs.get(key, 0.0)
        if max(p, b) < 0.05:
            continue
        print(f"  {key[:48]:48s} {p:9.2f} {b:8.2f} {p - b:+8.2f}")

    def rows(sort: str, limit: int) -> list[tuple]:
        items = []
        for (filename, line, name), (cc, nc, tt, ct, _callers) in plugin_stats.stats.items():
            items.append((tt if sort == "tottime" else ct, nc, tt, ct, f"{package_of(filename)}:{line}({name})"))
        items.sort(reverse=True)
        return items[:limit]

    print("\nplugin run, top functions by own time (tottime):")
    print(f"  {'ncalls':>9s} {'tottime':>8s} {'cumtime':>8s}  function")
    for _key, nc, tt, ct, where in rows("tottime", 15):
        print(f"  {nc:9d} {tt:8.2f} {ct:8.2f}  {where[:100]}")
    print("\nplugin run, top crucible functions by cumulative time:")
    print(f"  {'ncalls':>9s} {'tottime':>8s} {'cumtime':>8s}  function")
    shown = 0
    for _key, nc, tt, ct, where in rows("cumtime", 400):
        if where.startswith("pytest_crucible/") and shown < 15:
            print(f"  {nc:9d} {tt:8.2f} {ct:8.2f}  {where[:100]}")
            shown += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-profile", action="store_true", help="skip the profile even if the target is missed")
    parser.add_argument("--profile", action="store_true", help="profile even if the target is met")
    opts = parser.parse_args()

    import pytest  # noqa: PLC0415 - versions for the report only

    print(f"python {platform.python_version()}, pytest {pytest.__version__}, {os.cpu_count()} CPUs, {platform.machine()}")
    print(f"workload: {opts.items} golden items (1-2 citations each), in-memory pipeline returning 10 chunks, "
          f"best of {opts.repeat}, interleaved")
    with tempfile.TemporaryDirectory(prefix="crucible-bench-") as name:
        tmp = Path(name)
        plugin_dir, bare_dir = build(tmp, opts.items)
        plugin_runs, bare_runs = [], []
        ok = True
        for rep in range(1, opts.repeat + 1):
            db = tmp / f"run-{rep}.db"
            wall, rss, rc = run_child(plugin_cmd(plugin_dir, db), plugin_dir, tmp / f"plugin-{rep}.log")
            plugin_runs.append((wall, rss))
            print(f"  rep {rep} plugin: {wall:7.2f} s  peak RSS {rss:6.1f} MB  rc={rc}  [{last_line(tmp / f'plugin-{rep}.log')}]")
            ok &= rc == 0
            wall, rss, rc = run_child(bare_cmd(), bare_dir, tmp / f"bare-{rep}.log")
            bare_runs.append((wall, rss))
            print(f"  rep {rep} bare:   {wall:7.2f} s  peak RSS {rss:6.1f} MB  rc={rc}  [{last_line(tmp / f'bare-{rep}.log')}]")
            ok &= rc == 0
        if not ok:
            print("a run failed; its log:")
            for log in sorted(tmp.glob("*.log")):
                print(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:]))
            return 0

        with sqlite3.connect(tmp / "run-1.db") as conn:
            results = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            means = conn.execute("SELECT metric, AVG(value), COUNT(*) FROM item_metrics GROUP BY metric ORDER BY metric").fetchall()
        print(f"stored (run 1): {results} results; " + ", ".join(f"{m} {v:.3f} (n={n})" for m, v, n in means))

        best_plugin = min(w for w, _ in plugin_runs)
        best_bare = min(w for w, _ in bare_runs)
        ratio = best_plugin / best_bare
        peak = max(r for _, r in plugin_runs)
        per_item_ms = (best_plugin - best_bare) / opts.items * 1000
        print()
        print(f"plugin (component, record, SQLite): best {best_plugin:6.2f} s")
        print(f"bare parametrized module:           best {best_bare:6.2f} s")
        print(f"ratio plugin / bare: {ratio:.2f}x   (target <= {TIME_TARGET}x: {'met' if ratio <= TIME_TARGET else 'NOT met'})"
              f"; extra {per_item_ms:.3f} ms per item")
        print(f"plugin peak RSS:     {peak:.1f} MB (target < {RSS_TARGET_MB:.0f} MB: {'met' if peak < RSS_TARGET_MB else 'NOT met'})"
              f"; bare peak RSS {max(r for _, r in bare_runs):.1f} MB")
        if (ratio > TIME_TARGET and not opts.no_profile) or opts.profile:
            profile(plugin_dir, bare_dir, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
