"""Benchmark: cost per golden item at 1,000, 10,000 and 100,000 items, and the readers at 100,000.

Run from the repository root:

    .venv/bin/python bench/bench_scale.py [--sizes 1000,10000,100000] [--no-bare-at-largest] [--keep DIR]
    .venv/bin/python bench/bench_scale.py --readers DIR      # the readers alone, on a folder --keep kept

Workload: the golden items and the in-memory pipeline of ``bench_overhead.py`` (1-2 citations per
item, 10 precomputed chunks per answer, a dict lookup), written into a temporary directory.

For every size, one after the other:

* plugin: ``pytest golden_bench.jsonl --crucible-mode=component --crucible-outcome=record`` into a
  fresh SQLite file;
* bare:   ``pytest test_bare.py -p no:crucible``, one test parametrized over the same items calling
  the same pipeline.

Reported per size: wall and CPU seconds (user + system) of each child, the plugin's cost per item,
the ratio plugin / bare, and each child's peak RSS (``ru_maxrss`` from ``os.wait4``).

At the largest size the plugin runs a second time with a different retriever (every ranking
rotated by one place, so the two runs differ) and then, on those two stored runs of N items each:
the session's terminal summary (``CrucibleSession.summary_lines`` on the stored run, as the session
calls it at its end, with -q and at the default verbosity), ``crucible show`` (the run summary),
``crucible report`` (the HTML report) and ``crucible compare`` (every metric, 10,000 bootstrap
resamples and 10,000 permutations), each a process of its own timed with its peak RSS. The terminal
summary at the end of the pytest run itself is timed by the phase probe of ``bench_overhead.py``.

``--keep DIR`` copies the largest size's folder (the project and ``runs.db`` with its two runs) to DIR;
``--readers DIR`` then times the readers alone on it, again and again (a minute instead of 15).

It reports, it never fails: the exit code is 0 whenever the runs succeeded. At 100,000 items the
whole script takes about 10-15 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead as overhead

ROTATE = '''

import os as _os

if _os.environ.get("BENCH_ROTATE"):  # a different retriever: every ranking rotated by one place
    RESULTS = {question: chunks[1:] + chunks[:1] for question, chunks in RESULTS.items()}
'''


def child(args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MB, exit code) of one child."""
    wall, rss, rc = overhead.run_child(args, cwd, log, env)
    return wall, overhead.LAST_CPU[0], rss, rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-bare-at-largest", action="store_true",
                        help="skip the bare module at the largest size (it needs about 1 GB at 100,000 items)")
    parser.add_argument("--keep", metavar="DIR", type=Path,
                        help="copy the largest size's folder (its project and runs.db with the two runs) to DIR")
    parser.add_argument("--readers", metavar="DIR", type=Path,
                        help="only time the readers on a folder kept by --keep (DIR/runs.db, DIR/plugin): the terminal "
                             "summary, show, report and compare")
    opts = parser.parse_args()
    if opts.readers:
        import pytest

        print(f"python {platform.python_version()}, pytest {pytest.__version__}, {os.cpu_count()} CPUs, {platform.machine()}")
        overhead.CHILD_ENV.update(os.environ)
        overhead.CHILD_ENV.pop("PYTEST_ADDOPTS", None)
        with tempfile.TemporaryDirectory(prefix="crucible-readers-") as name:
            time_readers(opts.readers / "plugin", opts.readers / "runs.db", Path(name))
        return 0
    sizes = [int(size) for size in opts.sizes.split(",")]

    import pytest

    print(f"python {platform.python_version()}, pytest {pytest.__version__}, {os.cpu_count()} CPUs, {platform.machine()}")
    with tempfile.TemporaryDirectory(prefix="crucible-scale-") as name:
        tmp = Path(name)
        overhead.prepare_child_env(tmp)
        probe_dir = tmp / "phaseprobe"
        probe_dir.mkdir()
        (probe_dir / "crucible_phaseprobe.py").write_text(overhead.PHASEPROBE)
        warm = tmp / "warm"
        warm.mkdir()
        warm_plugin, warm_bare = overhead.build(warm, 50)  # untimed: fills the bytecode cache
        overhead.run_child(overhead.plugin_cmd(warm_plugin, warm / "w.db"), warm_plugin, warm / "p.log")
        overhead.run_child(overhead.bare_cmd(), warm_bare, warm / "b.log")

        rows = []
        for size in sizes:
            base = tmp / f"n{size}"
            base.mkdir()
            plugin_dir, bare_dir = overhead.build(base, size)
            with open(plugin_dir / "conftest.py", "a") as conftest:
                conftest.write(ROTATE)
            db = base / "runs.db"
            phases = base / "plugin.phases"
            env = {"PYTHONPATH": str(probe_dir), "CRUCIBLE_BENCH_PHASES": str(phases), "CRUCIBLE_BENCH_T0": repr(time.time())}
            plugin = child([*overhead.plugin_cmd(plugin_dir, db), "-p", "crucible_phaseprobe"], plugin_dir, base / "plugin.log", env)
            summary_s = overhead.read_phases(phases, plugin[0]).get("terminal summary", float("nan")) if phases.exists() else float("nan")
            print(f"n={size:>7,}: plugin {plugin[0]:8.2f} s wall {plugin[1]:8.2f} s cpu  peak RSS {plugin[2]:7.1f} MB  rc={plugin[3]}"
                  f"  [{overhead.last_line(base / 'plugin.log')}]; terminal summary {summary_s:.2f} s")
            bare = None
            if not (opts.no_bare_at_largest and size == max(sizes)):
                bare = child(overhead.bare_cmd(), bare_dir, base / "bare.log")
                print(f"n={size:>7,}: bare   {bare[0]:8.2f} s wall {bare[1]:8.2f} s cpu  peak RSS {bare[2]:7.1f} MB  rc={bare[3]}"
                      f"  [{overhead.last_line(base / 'bare.log')}]")
            rows.append((size, plugin, bare, summary_s))
            if size == max(sizes):
                readers(plugin_dir, db, base, env)
                if opts.keep:
                    shutil.copytree(base, opts.keep, dirs_exist_ok=True)
                    print(f"  kept {base} in {opts.keep}")

    print()
    print(f"{'items':>8s} {'plugin s':>9s} {'bare s':>8s} {'ratio':>6s} {'cpu ratio':>9s} {'ms/item':>8s} {'extra ms/item':>13s}"
          f" {'extra cpu ms/item':>17s} {'plugin RSS MB':>13s} {'bare RSS MB':>11s}")
    for size, plugin, bare, _ in rows:
        if bare is None:
            print(f"{size:>8,} {plugin[0]:9.2f} {'-':>8s} {'-':>6s} {'-':>9s} {plugin[0] / size * 1000:8.3f} {'-':>13s} {'-':>17s}"
                  f" {plugin[2]:13.1f} {'-':>11s}")
            continue
        print(f"{size:>8,} {plugin[0]:9.2f} {bare[0]:8.2f} {plugin[0] / bare[0]:6.2f} {plugin[1] / bare[1]:9.2f}"
              f" {plugin[0] / size * 1000:8.3f} {(plugin[0] - bare[0]) / size * 1000:13.3f} {(plugin[1] - bare[1]) / size * 1000:17.3f}"
              f" {plugin[2]:13.1f} {bare[2]:11.1f}")
    return 0


def readers(plugin_dir: Path, db: Path, base: Path, env: dict[str, str]) -> None:
    """A second run of the largest size (rotated rankings), then the readers on the two runs."""
    second = child([*overhead.plugin_cmd(plugin_dir, db), "-p", "crucible_phaseprobe"], plugin_dir, base / "plugin2.log",
                   {**env, "BENCH_ROTATE": "1"})
    print(f"  second run (rotated rankings): {second[0]:.2f} s wall, peak RSS {second[2]:.1f} MB, rc={second[3]}")
    time_readers(plugin_dir, db, base)


# The session's terminal summary on a stored run, as CrucibleSession.summary_lines builds it at session end
# (the phase probe times it inside a whole pytest run; this times it alone): -q (one line, alerts, as the
# benchmark's runs print it) and the default verbosity, each from a fresh session object.
SUMMARY = """
import sys, time
from pathlib import Path
from pytest_crucible.session import CrucibleSession
from pytest_crucible.settings import Settings
db, run_id, verbose = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
session = CrucibleSession(Settings(params={}, resolved={}, config_hash="", config_path=None, db_path=db))
session.adopt_run(run_id, "complete")
started = time.perf_counter()
lines = session.summary_lines(verbose=verbose)
print("\\n".join(getattr(line, "text", line) for line in lines))
print(f"summary_lines {time.perf_counter() - started:.2f} s")
"""


def time_readers(plugin_dir: Path, db: Path, base: Path) -> None:
    """The readers on the two runs of ``db`` (A the first, B the second): the session's terminal summary
    (-q and default), ``crucible show``, ``crucible report`` (HTML) and ``crucible compare``."""
    with sqlite3.connect(db) as conn:
        run_a, run_b = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY started_at")]
    crucible = ["-m", "pytest_crucible.cli"]  # run_child runs them with this python
    for label, args in (
        ("summary -q B", ["-c", SUMMARY, str(db), run_b, "-1"]),
        ("summary B", ["-c", SUMMARY, str(db), run_b, "0"]),
        ("crucible show B", [*crucible, "show", run_b, "--db", str(db)]),
        ("crucible report B (HTML)", [*crucible, "report", run_b, "--db", str(db), "-o", str(base / "report.html")]),
        ("crucible compare A B", [*crucible, "compare", run_a, run_b, "--db", str(db)]),
    ):
        log = base / (label.replace(" ", "_") + ".log")
        wall, cpu, rss, rc = child(args, plugin_dir, log)
        tail = " | ".join(line.strip() for line in log.read_text(errors="replace").splitlines()[-3:])
        print(f"  {label:26s} {wall:7.2f} s wall {cpu:7.2f} s cpu  peak RSS {rss:7.1f} MB  rc={rc}  [{tail[:160]}]")
    size = (base / "report.html").stat().st_size / 1e6 if (base / "report.html").exists() else float("nan")
    print(f"  HTML report: {size:.1f} MB")


if __name__ == "__main__":
    sys.exit(main())
