"""Benchmark: pytest_crucible.qrels.trec_eval vs pytrec_eval on the same TREC files.

Run from the repository root:

    .venv/bin/python bench/bench_retrieval_metrics.py [--queries N] [--repeat R] [--no-profile]

Workload, written as TREC files into a temporary directory:

* run:   10,000 queries x 100 ranked documents (``qid Q0 docno rank score tag``,
  scores with 6 decimals; about 5% of the queries have tied scores, so
  trec_eval's tie-break by docno is exercised), plus 50 queries that have no
  judgments (both tools ignore them);
* qrels: graded judgments 0-3 for about 15 documents per query (10 among the
  retrieved, 5 not retrieved), about 1% of the queries judged with grade 0
  only (no relevant document), plus 50 judged queries the run did not answer
  (ignored without -c).

Timed in this one process, alternating, best of R (default 3), file parsing included:

* ours:        ``read_qrels`` + ``read_run`` + ``evaluate(qrels, run, [P_10, recall_10,
  recip_rank, ndcg_cut_10])`` (per-query values and the means); the readers and the evaluation
  take the numpy paths of ``pytest_crucible.qrels.trec_fast`` (the script says whether both files did);
* pytrec_eval: ``parse_qrel`` + ``parse_run`` + ``RelevanceEvaluator(qrels, {P.10,
  recall.10, recip_rank, ndcg_cut.10}).evaluate(run)`` + the means (numpy).

pytrec_eval is not a dependency of the project; install it into the venv for
this benchmark (``.venv/bin/pip install pytrec-eval-terrier``, a wheel of the
same package; the ``pytrec_eval`` sdist downloads trec_eval from GitHub while
building). Without it the script prints a skip message and times ours alone.

The values must be identical: every per-query value and every mean is compared
and the largest absolute difference printed (checked to 1e-12).  Exit code 0
whatever the outcome: it reports, it does not fail.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import platform
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pytest_crucible.qrels import trec_fast  # noqa: E402
from pytest_crucible.qrels.trec_eval import evaluate, read_qrels, read_run  # noqa: E402

try:
    import pytrec_eval
except ImportError:  # not a project dependency
    pytrec_eval = None

OURS_MEASURES = ["P_10", "recall_10", "recip_rank", "ndcg_cut_10"]
PYTREC_MEASURES = {"P.10", "recall.10", "recip_rank", "ndcg_cut.10"}
TOLERANCE = 1e-12
SEED = 20240607


def write_files(tmp: Path, n_queries: int, depth: int) -> tuple[Path, Path, dict[str, int]]:
    rng = random.Random(SEED)
    qrels_lines: list[str] = []
    run_lines: list[str] = []
    counts = {"ties": 0, "no_relevant": 0}
    for q in range(n_queries):
        qid = f"q{q:05d}"
        docs = rng.sample(range(5_000_000), depth + 5)
        retrieved, unretrieved = docs[:depth], docs[depth:]
        score = 30.0 + rng.random()
        tie = rng.random() < 0.05
        counts["ties"] += tie
        for rank, doc in enumerate(retrieved, start=1):
            # Strictly decreasing in 6-decimal steps, except one tied pair in ~5% of the queries.
            if not (tie and rank == 6):
                score -= 0.000001 * rng.randint(1, 20_000)
            run_lines.append(f"{qid} Q0 D{doc} {rank} {score:.6f} bench\n")
        judged = rng.sample(retrieved, 10) + unretrieved
        no_relevant = rng.random() < 0.01
        counts["no_relevant"] += no_relevant
        for doc in judged:
            grade = 0 if no_relevant else rng.choices((0, 1, 2, 3), weights=(5, 3, 2, 1))[0]
            qrels_lines.append(f"{qid} 0 D{doc} {grade}\n")
    for extra in range(50):  # run queries without judgments, judged queries without results
        run_lines.append(f"x{extra:03d} Q0 D{extra} 1 1.000000 bench\n")
        qrels_lines.append(f"y{extra:03d} 0 D{extra} 1\n")
    qrels_path, run_path = tmp / "bench.qrels", tmp / "bench.run"
    qrels_path.write_text("".join(qrels_lines))
    run_path.write_text("".join(run_lines))
    return qrels_path, run_path, counts


def ours(qrels_path: Path, run_path: Path, phases: list[float]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    t0 = time.perf_counter()
    qrels = read_qrels(qrels_path)
    t1 = time.perf_counter()
    run = read_run(run_path)
    t2 = time.perf_counter()
    result = evaluate(qrels, run, OURS_MEASURES)
    phases[:] = [t1 - t0, t2 - t1, time.perf_counter() - t2]
    return result


def theirs(qrels_path: Path, run_path: Path, phases: list[float]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    t0 = time.perf_counter()
    with open(qrels_path) as handle:
        qrels = pytrec_eval.parse_qrel(handle)
    t1 = time.perf_counter()
    with open(run_path) as handle:
        run = pytrec_eval.parse_run(handle)
    t2 = time.perf_counter()
    per_query = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
    names = sorted(next(iter(per_query.values())))
    means = {name: pytrec_eval.compute_aggregated_measure(name, [values[name] for values in per_query.values()])
             for name in names}
    phases[:] = [t1 - t0, t2 - t1, time.perf_counter() - t2]
    return per_query, means


def timed(fn, *args) -> tuple[float, object, list[float]]:
    gc.collect()
    phases: list[float] = []
    started = time.perf_counter()
    result = fn(*args, phases)
    return time.perf_counter() - started, result, phases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-profile", action="store_true", help="skip the profile even if ours is slower")
    parser.add_argument("--profile", action="store_true", help="profile ours even if it is faster")
    opts = parser.parse_args()

    version = getattr(pytrec_eval, "__version__", "?") if pytrec_eval else "absent"
    print(f"python {platform.python_version()}, pytrec_eval {version}, {platform.machine()}")
    with tempfile.TemporaryDirectory(prefix="crucible-trec-bench-") as name:
        qrels_path, run_path, counts = write_files(Path(name), opts.queries, opts.depth)
        print(f"workload: {opts.queries} queries x {opts.depth} ranked docs ({run_path.stat().st_size / 2**20:.1f} MB run file), "
              f"~15 graded judgments per query ({qrels_path.stat().st_size / 2**20:.1f} MB qrels); "
              f"{counts['ties']} queries with a score tie, {counts['no_relevant']} with no relevant document; "
              f"measures {', '.join(OURS_MEASURES)}; parsing included; best of {opts.repeat}")
        fast = [parse(path.read_bytes()) is not None
                for parse, path in ((trec_fast.parse_qrels, qrels_path), (trec_fast.parse_run, run_path))]
        print(f"numpy fast path taken: qrels {'yes' if fast[0] else 'NO'}, run {'yes' if fast[1] else 'NO'}")
        if pytrec_eval is None:
            print("SKIP pytrec_eval comparison: pytrec_eval is not installed in this environment "
                  "(it is not a project dependency; try `.venv/bin/pip install pytrec-eval-terrier`)")
        ours_times, theirs_times = [], []
        ours_result = theirs_result = None
        for rep in range(1, opts.repeat + 1):
            # Alternate which goes first so neither always runs on a warmer cache.
            order = ("ours", "theirs") if rep % 2 else ("theirs", "ours")
            for which in order:
                if which == "ours":
                    seconds, ours_result, phases = timed(ours, qrels_path, run_path)
                    ours_times.append((seconds, phases))
                elif pytrec_eval is not None:
                    seconds, theirs_result, phases = timed(theirs, qrels_path, run_path)
                    theirs_times.append((seconds, phases))
            line = f"  rep {rep}: ours {ours_times[-1][0]:6.3f} s"
            if theirs_times:
                line += f", pytrec_eval {theirs_times[-1][0]:6.3f} s"
            print(line)

        best_ours, ours_phases = min(ours_times)
        per_query, summary = ours_result
        print(f"\nours:        best {best_ours:6.3f} s  ({len(per_query)} queries evaluated; "
              + ", ".join(f"{name} {summary[name]:.4f}" for name in OURS_MEASURES) + ")")
        slower = False
        if theirs_times:
            best_theirs, theirs_phases = min(theirs_times)
            their_per_query, their_summary = theirs_result
            print(f"pytrec_eval: best {best_theirs:6.3f} s  ({len(their_per_query)} queries evaluated; "
                  + ", ".join(f"{name} {their_summary[name]:.4f}" for name in OURS_MEASURES) + ")")
            ratio = best_ours / best_theirs
            slower = ratio > 1.0
            print(f"time ratio ours / pytrec_eval: {ratio:.2f}x   (target <= 1.00x, ours no slower: "
                  f"{'met' if not slower else 'NOT met'})")
            print("by phase (best run of each):")
            print(f"  {'phase':28s} {'ours s':>8s} {'pytrec_eval s':>14s} {'ratio':>7s}")
            for label, a, b in zip(("read qrels (2.8 MB)", "read run (1M lines)", "evaluate + means"), ours_phases, theirs_phases):
                print(f"  {label:28s} {a:8.3f} {b:14.3f} {a / b:6.2f}x")

            same_queries = set(per_query) == set(their_per_query)
            max_diff, worst = 0.0, None
            for qid, values in per_query.items():
                for name in OURS_MEASURES:
                    diff = abs(values[name] - their_per_query.get(qid, {}).get(name, float("nan")))
                    if not diff <= max_diff:  # also catches NaN (a query missing on their side)
                        max_diff, worst = diff, (qid, name)
            max_mean_diff = max(abs(summary[name] - their_summary[name]) for name in OURS_MEASURES)
            printed_same = all(f"{summary[n]:.4f}" == f"{their_summary[n]:.4f}" for n in OURS_MEASURES) and all(
                f"{per_query[q][n]:.4f}" == f"{their_per_query[q][n]:.4f}" for q in per_query for n in OURS_MEASURES
                if q in their_per_query)
            identical = same_queries and max_diff <= TOLERANCE and max_mean_diff <= TOLERANCE
            print(f"same evaluated queries: {same_queries}; max |per-query difference| {max_diff:.3g}"
                  + (f" ({worst[1]} of {worst[0]})" if worst and max_diff > 0 else "")
                  + f"; max |mean difference| {max_mean_diff:.3g}")
            print(f"values identical to {TOLERANCE:g}: {'yes' if identical else 'NO'}; "
                  f"identical at trec_eval's 4 printed decimals: {'yes' if printed_same else 'NO'}")
        if (slower and not opts.no_profile) or opts.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            ours(qrels_path, run_path, [])
            profiler.disable()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            print(f"\nprofile of ours (cProfile, one call; profiled total {stats.total_tt:.2f} s, cProfile inflates call-heavy code):")
            stats.sort_stats("tottime").print_stats(12)
            stats.sort_stats("cumulative").print_stats("pytest_crucible", 12)
            keep = [line for line in out.getvalue().splitlines()
                    if line.strip() and not line.startswith(("   Ordered by", "   List reduced")) and "function calls" not in line]
            print("\n".join(line.replace(str(ROOT) + "/", "") for line in keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
