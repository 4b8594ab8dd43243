"""The offline judges side by side: lexical-v3, lexical-v2 and lexical-v1 on the same requests, in one run.

Both judge the 160 cases of tests/data/calibration (every request the answer layer makes for them:
claims, entailment, questions, usefulness, correctness), cold (fresh process caches) and warm (the
same requests again: the judges' own caches). The ratios v3 / v2 and v2 / v1 are the figures: what
the example project's and a keyless CI run's judge time grows by from one default to the next. The embedding table's one-off load
is timed apart.

    .venv/bin/python bench/bench_offline_judge.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import sys, time
from pathlib import Path
from pytest_crucible.labels.calibration import judge_cases, read_labels_file
from pytest_crucible.judge.embed import HashingEmbedder
from pytest_crucible.judge.engine import JudgeEngine
from pytest_crucible.judge.select import make_judge
root = Path(sys.argv[2])
cases = [c for half in ("dev", "test") for c in read_labels_file(root / "tests/data/calibration" / f"labels_{half}.jsonl")]
judge = make_judge(sys.argv[1])
load = 0.0
if sys.argv[1] in ("lexical-v2", "lexical-v3"):
    t = time.perf_counter()
    from pytest_crucible.judge.similarity import similarity
    similarity("warm", "up")
    load = time.perf_counter() - t
times = []
for _ in range(2):
    engine = JudgeEngine(judge, cache_mode="off")
    t = time.perf_counter()
    judge_cases(cases, engine, HashingEmbedder())
    times.append(time.perf_counter() - t)
print(f"{load} {times[0]} {times[1]} {engine.stats.as_dict()['judged']}")
"""


def run(judge: str) -> tuple[float, float, float, int]:
    done = subprocess.run([sys.executable, "-c", CHILD, judge, str(ROOT)], capture_output=True, text=True, check=True)
    load, cold, warm, judged = done.stdout.split()
    return float(load), float(cold), float(warm), int(judged)


def main() -> None:
    rounds = 3
    results: dict[str, list[tuple[float, float, float, int]]] = {"lexical-v1": [], "lexical-v2": [], "lexical-v3": []}
    for _ in range(rounds):  # interleaved, so both see the same machine load
        for judge in results:
            results[judge].append(run(judge))
    print(f"{'judge':<12} {'requests':>9} {'cold s':>8} {'warm s':>8} {'embeddings load s':>18}")
    medians = {}
    for judge, rows in results.items():
        cold = statistics.median(r[1] for r in rows)
        warm = statistics.median(r[2] for r in rows)
        load = statistics.median(r[0] for r in rows)
        medians[judge] = (cold, warm)
        print(f"{judge:<12} {rows[0][3]:>9} {cold:>8.3f} {warm:>8.3f} {load:>18.3f}")
    for new, old in (("lexical-v3", "lexical-v2"), ("lexical-v2", "lexical-v1")):
        print(f"ratio {new[-2:]}/{old[-2:]}: cold {medians[new][0] / medians[old][0]:.2f}x, "
              f"warm {medians[new][1] / medians[old][1]:.2f}x (median of {rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
