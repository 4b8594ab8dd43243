"""Latency-bound pipeline: 200 items, 100 ms per call, at concurrency 16 against concurrency 1.

The physical floor at concurrency 16 is 200 x 0.1 s / 16 = 1.25 s. Reported: pytest's own
session time (collection + tests + crucible's session end; interpreter start-up excluded),
best of 3 for concurrency 16, one run at concurrency 1 (20 s of sleeping).

    .venv/bin/python bench/bench_concurrency.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ITEMS, LATENCY, CONCURRENCY = 200, 0.1, 16
CONFTEST = """
import os, time
import pytest

LATENCY = float(os.environ["BENCH_LATENCY"])

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        time.sleep(LATENCY)
        return {"answer": None, "retrieved": [{"chunk_id": item.id + "#1", "doc_id": item.id}]}
    return pipeline
"""


def run(project: Path, concurrency: int, latency: float = LATENCY) -> tuple[float, float]:
    db = project / f"c{concurrency}-{time.monotonic_ns()}.db"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(project), "-q", "-p", "no:cacheprovider", "--crucible-mode=component",
         f"--crucible-concurrency={concurrency}", f"--crucible-db={db}"],
        capture_output=True, text=True, cwd=project, env={**os.environ, "BENCH_LATENCY": str(latency)},
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    session = float(re.search(r"passed in ([0-9.]+)s", done.stdout).group(1))
    return session, wall


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "conftest.py").write_text(CONFTEST)
        (project / "golden_latency.jsonl").write_text("".join(
            json.dumps({"id": f"q{i:03d}", "question": f"q {i}", "citations": [{"docId": f"q{i:03d}"}]}) + "\n" for i in range(ITEMS)))
        fast = min(run(project, CONCURRENCY) for _ in range(3))
        slow = run(project, 1)
        fixed = min(run(project, CONCURRENCY, latency=0.0) for _ in range(3))
    floor = ITEMS * LATENCY / CONCURRENCY
    print(f"items {ITEMS}, {LATENCY * 1000:.0f} ms per call")
    print(f"concurrency {CONCURRENCY}: session {fast[0]:.2f} s (process {fast[1]:.2f} s); floor {floor:.2f} s; "
          f"ratio to floor {fast[0] / floor:.2f}x (target <= 1.2x)")
    print(f"concurrency 1:  session {slow[0]:.2f} s (process {slow[1]:.2f} s)")
    print(f"speed-up {slow[0] / fast[0]:.1f}x (target >= 10x)")
    # The same session with a 0 ms pipeline: collection, scoring, SQLite writes, session end.
    base = fixed[0]
    print(f"fixed cost of the session (0 ms pipeline): {base:.2f} s")
    print(f"pipeline phase at concurrency {CONCURRENCY}: {fast[0] - base:.2f} s = {(fast[0] - base) / floor:.2f}x the floor; "
          f"speed-up of the pipeline phase {(slow[0] - base) / (fast[0] - base):.1f}x")


if __name__ == "__main__":
    main()
