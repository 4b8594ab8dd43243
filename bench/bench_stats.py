"""Benchmark: pytest_crucible.stats vs scipy.stats on one run comparison.

Run from the repository root:

    .venv/bin/python bench/bench_stats.py

Workload: n = 1,000 golden-set items, 12 metrics in [0, 1] (continuous,
coarse-grid and binary; some with a real shift between the runs, some null),
10,000 bootstrap resamples and 10,000 permutations per metric.

* ours:  ``paired_test(a, b)`` per metric (BCa CI + sign-flip p + power),
  starting from empty caches, so the one-time generation of the Mulberry32
  index and sign matrices is included.
* scipy: ``stats.bootstrap((a, b), mean_diff, paired=True, vectorized=True,
  method="BCa")`` + ``stats.permutation_test((a, b), |mean_diff|,
  permutation_type="samples", vectorized=True, alternative="greater")`` per
  metric.  ``|mean(b - a)|`` with ``alternative="greater"`` is exactly our
  two-sided statistic.  No ``batch``: 10k x 1,000 fits in memory easily.

Both use different random streams, so CI endpoints and p-values differ by
Monte Carlo error only; the script prints the largest differences.

Large golden sets (issue 19): ``--n 100000`` (or a comma list such as
``--n 1000,10000,100000``) runs ours only on the same 12 kinds of metric at
that n, with 10,000 resamples and 10,000 permutations, as one batched
``paired_tests`` call from empty caches (what a run comparison does), and
reports wall time and the peak RSS of the whole process (``ru_maxrss``).
With a list, each n runs in a fresh subprocess so every peak is its own.
scipy is skipped there: its vectorized bootstrap and permutation test hold
10,000 x n float64 arrays (8 GB each at n = 100,000) and would take tens of
minutes; ``batch=`` bounds the memory but not the time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pytest_crucible.stats import paired_test, paired_tests
from pytest_crucible.stats.bootstrap import clear_caches as clear_boot
from pytest_crucible.stats.permutation import clear_caches as clear_perm

N_ITEMS = 1_000
N_RESAMPLES = 10_000
N_PERMUTATIONS = 10_000
DATA_SEED = 20240601


def make_metrics(rng: np.random.Generator, n: int = N_ITEMS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """12 metrics: 6 with a real shift between runs, 6 exactly null.

    Null metrics are exchangeable pairs: each item keeps its baseline score
    with some probability, else gets a fresh draw from the same
    distribution.  Shifted ones move scores (continuous) or flip outcomes
    (binary) preferentially in one direction.
    """
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def changed(keep: float) -> np.ndarray:
        return rng.random(n) >= keep

    def cont_shift(name: str, ab: tuple[float, float], shift: float, noise: float) -> None:
        a = rng.beta(*ab, n)
        b = np.clip(a + shift + rng.normal(0.0, noise, n), 0.0, 1.0)
        out[name] = (a, b)

    def cont_null(name: str, ab: tuple[float, float], keep: float) -> None:
        a = rng.beta(*ab, n)
        b = np.where(changed(keep), rng.beta(*ab, n), a)
        out[name] = (a, b)

    def grid(name: str, k: int, p_a: float, p_b: float, keep: float) -> None:
        a = rng.binomial(k, p_a, n) / k
        b = np.where(changed(keep), rng.binomial(k, p_b, n) / k, a)
        out[name] = (a, b)

    def binary(name: str, p_a: float, p_b: float, keep: float) -> None:
        a = (rng.random(n) < p_a).astype(np.float64)
        b = np.where(changed(keep), (rng.random(n) < p_b).astype(np.float64), a)
        out[name] = (a, b)

    cont_shift("mrr", (2, 2), 0.02, 0.15)  # improvement
    cont_null("ndcg@10", (3, 2), 0.5)
    cont_shift("faithfulness", (5, 1.5), -0.03, 0.10)  # regression
    cont_null("answer_relevance", (4, 2), 0.7)
    cont_shift("context_precision", (2, 3), 0.015, 0.2)  # small improvement
    grid("recall@5", 5, 0.60, 0.68, 0.5)  # grid of fifths, +0.04
    grid("recall@3", 3, 0.50, 0.50, 0.6)  # grid of thirds, null
    binary("hit@1", 0.45, 0.55, 0.6)  # binary, +0.04
    binary("hit@5", 0.80, 0.80, 0.8)  # binary, null
    binary("abstention_correct", 0.70, 0.78, 0.7)  # binary, +0.024 (borderline)
    binary("exact_match", 0.30, 0.30, 0.7)  # binary, null
    binary("refusal_rate", 0.10, 0.10, 0.8)  # rare binary, null
    return out


def mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(y - x, axis=axis)


def abs_mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.abs(np.mean(y - x, axis=axis))


def run_ours(metrics):
    clear_boot()
    clear_perm()
    t0 = time.perf_counter()
    res = {name: paired_test(a, b, seed=1337) for name, (a, b) in metrics.items()}
    cold = time.perf_counter() - t0
    warm = float("inf")
    for _ in range(3):  # caches filled: what every further comparison costs
        t0 = time.perf_counter()
        for a, b in metrics.values():
            paired_test(a, b, seed=1337)
        warm = min(warm, time.perf_counter() - t0)
    return res, cold, warm


def run_scipy(metrics):
    out = {}
    t_boot = t_perm = 0.0
    for i, (name, (a, b)) in enumerate(metrics.items()):
        t0 = time.perf_counter()
        bres = stats.bootstrap(
            (a, b),
            mean_diff,
            paired=True,
            vectorized=True,
            method="BCa",
            n_resamples=N_RESAMPLES,
            rng=np.random.default_rng(1000 + i),
        )
        t1 = time.perf_counter()
        pres = stats.permutation_test(
            (a, b),
            abs_mean_diff,
            permutation_type="samples",
            vectorized=True,
            alternative="greater",
            n_resamples=N_PERMUTATIONS,
            rng=np.random.default_rng(2000 + i),
        )
        t2 = time.perf_counter()
        t_boot += t1 - t0
        t_perm += t2 - t1
        ci = bres.confidence_interval
        out[name] = (float(ci.low), float(ci.high), float(pres.pvalue))
    return out, t_boot, t_perm


def rss_mb() -> float:
    """Peak RSS of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_large(n: int) -> None:
    """One batched comparison of 12 metrics at ``n`` items (ours only)."""
    metrics = make_metrics(np.random.default_rng(DATA_SEED), n)
    pairs = list(metrics.values())
    clear_boot()
    clear_perm()
    before = rss_mb()  # interpreter, numpy/scipy, the 12 x 2 score arrays
    t0 = time.perf_counter()
    res = paired_tests(pairs, seed=1337, n_resamples=N_RESAMPLES, n_permutations=N_PERMUTATIONS)
    wall = time.perf_counter() - t0
    peak = rss_mb()
    print(f"n={n}: 12 metrics, {N_RESAMPLES} resamples, {N_PERMUTATIONS} permutations, one paired_tests call")
    header = f"{'metric':<20}{'delta':>9}  {'CI':>19}  {'p':>8}  sig"
    print(header)
    print("-" * len(header))
    for name, r in zip(metrics, res):
        print(
            f"{name:<20}{r.delta:>+9.4f}  [{r.ci_low:+.4f}, {r.ci_high:+.4f}]  {r.p_value:>8.4f}  "
            f"{'yes' if r.significant else 'no'}"
        )
    # exact fingerprint of all results, to compare implementations bit for bit
    fields = [(r.delta, r.ci_low, r.ci_high, r.p_value, r.mde) for r in res]
    print("results sha256:", hashlib.sha256(repr([tuple(x.hex() for x in f) for f in fields]).encode()).hexdigest()[:16])
    print(f"wall time: {wall:.2f} s ({wall / 12:.2f} s per metric)")
    print(f"peak RSS, whole process: {peak:.0f} MB (before the comparison: {before:.0f} MB)")
    print(f"RESULT n={n} wall={wall:.3f} peak_rss_mb={peak:.1f} base_rss_mb={before:.1f}")


def run_large_many(ns: list[int]) -> None:
    """Each n in a fresh interpreter (ru_maxrss is a per-process high-water mark)."""
    rows = []
    for n in ns:
        proc = subprocess.run(
            [sys.executable, __file__, "--n", str(n)], capture_output=True, text=True, check=True
        )
        print(proc.stdout.split("\n", 2)[2], end="")  # minus the child's version + threads lines
        last = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1]
        kv = dict(item.split("=") for item in last.split()[1:])
        rows.append((n, float(kv["wall"]), float(kv["peak_rss_mb"]), float(kv["base_rss_mb"])))
        print()
    base_n, base_t = rows[0][0], rows[0][1]
    print(f"{'n':>8}  {'wall s':>8}  {'s per 1k items':>14}  {'x time vs n=' + str(base_n):>16}  {'peak RSS MB':>11}  {'before MB':>9}")
    for n, wall, peak, before in rows:
        print(
            f"{n:>8}  {wall:>8.2f}  {wall / (n / 1000):>14.3f}  {wall / base_t:>16.1f}  {peak:>11.0f}  {before:>9.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", help="large-n mode: items per metric, or a comma list (ours only)")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )
    if args.n:
        # at n > 65,536 the time (and the last bits, see stats/resampling.py) depend on it
        print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
        ns = [int(x.replace("_", "")) for x in args.n.split(",")]
        if len(ns) == 1:
            run_large(ns[0])
        else:
            run_large_many(ns)
        return
    metrics = make_metrics(np.random.default_rng(DATA_SEED))
    print(
        f"workload: n={N_ITEMS} items x {len(metrics)} metrics, "
        f"{N_RESAMPLES} resamples, {N_PERMUTATIONS} permutations"
    )
    ours, cold, warm = run_ours(metrics)
    ref, t_boot, t_perm = run_scipy(metrics)
    t_scipy = t_boot + t_perm

    print()
    header = f"{'metric':<20}{'delta':>9}  {'ours CI':>19}  {'scipy CI':>19}  {'ours p':>8}  {'scipy p':>8}  sig"
    print(header)
    print("-" * len(header))
    max_ci = max_p = max_pz = 0.0
    for name, r in ours.items():
        lo, hi, p = ref[name]
        max_ci = max(max_ci, abs(r.ci_low - lo), abs(r.ci_high - hi))
        max_p = max(max_p, abs(r.p_value - p))
        # Monte Carlo sd of the difference of two independent estimates of
        # the same p from 10k random sign patterns each
        p_bar = (r.p_value + p) / 2
        sd = np.sqrt(2 * max(p_bar * (1 - p_bar), 1e-4) / N_PERMUTATIONS)
        max_pz = max(max_pz, abs(r.p_value - p) / sd)
        print(
            f"{name:<20}{r.delta:>+9.4f}  [{r.ci_low:+.4f}, {r.ci_high:+.4f}]  "
            f"[{lo:+.4f}, {hi:+.4f}]  {r.p_value:>8.4f}  {p:>8.4f}  {'yes' if r.significant else 'no'}"
        )
    print()
    print(f"ours  (12 x paired_test, cold caches): {cold:8.3f} s")
    print(f"ours  (12 x paired_test, warm caches): {warm:8.3f} s")
    print(f"scipy (bootstrap BCa {t_boot:.2f} s + permutation_test {t_perm:.2f} s): {t_scipy:8.3f} s")
    print(f"speed-up, cold: {t_scipy / cold:6.1f}x   (target >= 20x)")
    print(f"speed-up, warm: {t_scipy / warm:6.1f}x")
    print(f"max |CI endpoint difference|: {max_ci:.5f}   (target <= 0.005)")
    print(f"max |p-value difference|:     {max_p:.5f}   (target <= 0.01)")
    print(
        f"max |p-value difference| / its Monte Carlo sd: {max_pz:.2f} "
        f"(sd = sqrt(2 p (1 - p) / {N_PERMUTATIONS}), 0.0071 at p = 0.5)"
    )


if __name__ == "__main__":
    main()
