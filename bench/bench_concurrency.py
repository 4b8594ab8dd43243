"""Latency-bound pipeline: 200 items, 100 ms per call, at concurrency 16 against concurrency 1.

The physical floor at concurrency 16 is 200 x 0.1 s / 16 = 1.25 s. Reported: pytest's own
session time (collection + tests + crucible's session end; interpreter start-up excluded),
best of 3 for concurrency 16, one run at concurrency 1 (20 s of sleeping).

The fixed cost of a session is measured twice, interleaved: the plugin with a 0 ms pipeline, and
bare pytest (no plugin) running one parametrized no-op test over the same 200 items. The target is
a session within 1.2x of (floor + bare pytest's own session time): what pytest costs anyway is not
the plugin's to remove.

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


BARE_TEST = """
import json
from pathlib import Path

import pytest

ITEMS = [json.loads(line) for line in (Path(__file__).parent / "golden_latency.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("item", ITEMS, ids=[item["id"] for item in ITEMS])
def test_item(item):
    pass
"""


def run_bare(project: Path) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "test_bare.py", "-q", "-p", "no:cacheprovider", "-p", "no:crucible"],
                          capture_output=True, text=True, cwd=project)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    return float(re.search(r"passed in ([0-9.]+)s", done.stdout).group(1)), wall


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project, bare_dir = Path(tmp) / "plugin", Path(tmp) / "bare"  # siblings: neither collects the other
        project.mkdir()
        bare_dir.mkdir()
        (project / "conftest.py").write_text(CONFTEST)
        (project / "golden_latency.jsonl").write_text("".join(
            json.dumps({"id": f"q{i:03d}", "question": f"q {i}", "citations": [{"docId": f"q{i:03d}"}]}) + "\n" for i in range(ITEMS)))
        (bare_dir / "test_bare.py").write_text(BARE_TEST)
        (bare_dir / "golden_latency.jsonl").write_text((project / "golden_latency.jsonl").read_text())
        fast = min(run(project, CONCURRENCY) for _ in range(3))
        slow = run(project, 1)
        fixed_runs, bare_runs = [], []
        for _ in range(3):  # interleaved: both see the same machine load
            fixed_runs.append(run(project, CONCURRENCY, latency=0.0))
            bare_runs.append(run_bare(bare_dir))
        fixed, bare = min(fixed_runs), min(bare_runs)
    floor = ITEMS * LATENCY / CONCURRENCY
    print(f"items {ITEMS}, {LATENCY * 1000:.0f} ms per call")
    print(f"concurrency {CONCURRENCY}: session {fast[0]:.2f} s (process {fast[1]:.2f} s); floor {floor:.2f} s; "
          f"ratio to floor {fast[0] / floor:.2f}x (target <= 1.2x)")
    print(f"concurrency 1:  session {slow[0]:.2f} s (process {slow[1]:.2f} s)")
    print(f"speed-up {slow[0] / fast[0]:.1f}x (target >= 10x)")
    # The same session with a 0 ms pipeline: collection, scoring, SQLite writes, session end.
    base = fixed[0]
    print(f"fixed cost of the session (0 ms pipeline): {base:.2f} s")
    print(f"bare pytest, the same 200 items as a parametrized no-op: session {bare[0]:.2f} s (process {bare[1]:.2f} s)")
    print(f"fixed cost beyond bare pytest: session {base - bare[0]:+.2f} s, process {fixed[1] - bare[1]:+.2f} s")
    target = 1.2 * (floor + bare[0])
    print(f"session at concurrency {CONCURRENCY} / (floor + bare session) = {fast[0]:.2f} / {floor + bare[0]:.2f} = "
          f"{fast[0] / (floor + bare[0]):.2f}x (target <= 1.2x, i.e. <= {target:.2f} s)")
    print(f"pipeline phase at concurrency {CONCURRENCY}: {fast[0] - base:.2f} s = {(fast[0] - base) / floor:.2f}x the floor; "
          f"speed-up of the pipeline phase {(slow[0] - base) / (fast[0] - base):.1f}x")


if __name__ == "__main__":
    main()
