"""Benchmark: the test suite's inner pytest runs forked (tests/forked.py) against new interpreters, side by side.

Run from the repository root:

    .venv/bin/python bench/bench_inner_runs.py [--rounds R] [PYTEST ARGS ...]

The same selection of the suite (default: the files whose inner runs use a model judge through the mock servers,
``-m "not slow"`` left to the caller) is run R times in each mode, interleaved (forked, subprocess, forked, ...),
each in one process (``-n 0``, so that the figures are the selection's own and not the scheduling of two workers).
Printed per mode: the best wall time, and the CPU time of the run and every process it started (user + system,
children included, from ``resource.getrusage``).

It reports, it never fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["tests/test_judge_overlap.py", "tests/test_cost_cap.py", "tests/test_reliability_secrets.py",
           "tests/test_concepts_pool.py", "tests/test_judge_e2e.py", "tests/test_prompt_cache.py"]


def run(args: list[str], subprocesses: bool) -> tuple[float, float, int]:
    env = dict(os.environ, CRUCIBLE_TEST_SUBPROCESS="1" if subprocesses else "0")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    options, rest = parser.parse_known_args()
    args = rest or DEFAULT
    best: dict[str, tuple[float, float]] = {}
    for round_ in range(options.rounds):
        for mode, subprocesses in (("forked", False), ("subprocess", True)):
            wall, cpu, code = run(args, subprocesses)
            print(f"round {round_ + 1} {mode:10} wall {wall:7.1f} s  cpu {cpu:7.1f} s  exit {code}", flush=True)
            old = best.get(mode)
            best[mode] = (min(wall, old[0]), min(cpu, old[1])) if old else (wall, cpu)
    print(f"selection: {' '.join(args)}")
    print(f"{'mode':10} {'wall s':>8} {'cpu s':>8}")
    for mode, (wall, cpu) in best.items():
        print(f"{mode:10} {wall:8.1f} {cpu:8.1f}")
    forked, fresh = best["forked"], best["subprocess"]
    print(f"forked / subprocess: wall {forked[0] / fresh[0]:.2f}x, cpu {forked[1] / fresh[1]:.2f}x")


if __name__ == "__main__":
    main()
