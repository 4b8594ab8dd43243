"""Benchmark: a judge-bound run against its floor (issue 35, point 4).

A system-mode session judged by Claude through the real ``anthropic`` SDK, against the local Messages API
double of the tests (tests/mock_anthropic.py) answering every request after ``--latency`` seconds (default
0.2). The pipeline itself answers at once, so the judge's requests are the run's cost:

    floor = judge requests x latency / concurrency + bare pytest's own session time

Reported: the session's wall time (best of ``--repeat``), the requests the double served and the most it
had in flight at once, the floor, and the ratio (target: within 1.2x). Bare pytest is one parametrized
no-op test over the same items.

    .venv/bin/python bench/bench_judge_bound.py [--items 1000] [--concurrency 32] [--latency 0.2] [--repeat 1]

It reports, it never fails. At 1,000 items it takes about a minute (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mock_anthropic import MockAnthropic  # noqa: E402  (the tests' Messages API double)

CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = item.id.split("-")[1]
        text = f"Item {n} ships in {int(n) % 7 + 1} days from the central warehouse."
        return {"answer": text + " [S1]", "retrieved": [{"chunk_id": f"doc{n}#1", "doc_id": f"doc{n}", "text": text}],
                "confidence": 0.8}
    return pipeline
"""
BARE = """
import json, pathlib, pytest
ITEMS = [json.loads(line) for line in pathlib.Path(__file__).with_name("golden_bench.jsonl").read_text().splitlines()]

@pytest.mark.parametrize("item", ITEMS, ids=[item["id"] for item in ITEMS])
def test_item(item):
    pass
"""


def write_project(folder: Path, items: int) -> None:
    lines = [json.dumps({"id": f"q-{n:05d}", "question": f"How long does item {n} take to ship?",
                         "reference": f"Item {n} ships in {n % 7 + 1} days.",
                         "citations": [{"docId": f"doc{n}", "mode": "required"}]}) for n in range(items)]
    (folder / "golden_bench.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_bare.py").write_text(BARE)
    (folder / "pytest.ini").write_text("[pytest]\ncrucible_outcome = record\ncrucible_golden_files = golden_*.jsonl\n")


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    tail = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode not in (0, 1):
        print(f"  rc={done.returncode}: {done.stdout[-600:]}{done.stderr[-600:]}")
    return elapsed, tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    mock = MockAnthropic().start()
    mock.response_delay = args.latency
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            write_project(folder, args.items)
            env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-bench-0000", "ANTHROPIC_BASE_URL": mock.base_url,
                   "PYTHONDONTWRITEBYTECODE": "1"}
            bare = min(timed(["test_bare.py", "-p", "no:crucible"], folder, env)[0] for _ in range(args.repeat))
            runs = []
            for rep in range(args.repeat):
                before = mock.counts["messages"]
                mock.max_in_flight = 0
                seconds, tail = timed(["golden_bench.jsonl", f"--crucible-concurrency={args.concurrency}",
                                       "--crucible-judge=anthropic", "--crucible-judge-cache=off",
                                       f"--crucible-db={folder / f'run-{rep}.db'}"], folder, env)
                requests = mock.counts["messages"] - before
                runs.append((seconds, requests, mock.max_in_flight))
                print(f"  rep {rep + 1}: {seconds:.2f} s, {requests} judge requests, at most {mock.max_in_flight} in flight [{tail}]")
            seconds, requests, in_flight = min(runs)
            floor = requests * args.latency / args.concurrency + bare
            print(f"\n{args.items} items, judge latency {args.latency} s, --crucible-concurrency={args.concurrency}")
            print(f"bare pytest over the items: {bare:.2f} s")
            print(f"judged session: {seconds:.2f} s; {requests} requests, at most {in_flight} in flight")
            print(f"floor (requests x latency / concurrency + bare): {floor:.2f} s; ratio {seconds / floor:.2f}x (target <= 1.2x)")
    finally:
        mock.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
