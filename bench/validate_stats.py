"""Validation by simulation: do the intervals cover, does the gate hold its false-positive rate,
how much power does it have?

Run from the repository root:

    .venv/bin/python bench/validate_stats.py            # 1,000 data sets per scenario
    .venv/bin/python bench/validate_stats.py --quick    # 200, a fast check

Everything is simulated with numpy's Generator from a fixed data seed (the statistics themselves
draw from Mulberry32 with the package's default seed, as a comparison does). Scenarios:

* differences ``d = b - a`` per item, sd 0.25 (independent items), or
  ``d = mu + u_cluster + e_item`` with ``var(u) = var(e)`` (intra-cluster correlation 0.5);
* (a) coverage of the 95% intervals of ``paired_tests`` (naive BCa) and ``paired_cluster_tests``
  (cluster BCa), and of ``ppi_mean`` (PPI++) with human labels ``y`` in {0, 1} (P = 0.6) on
  100 items and a judge ``f = y + bias + N(0, 0.3)`` on those and 900 more;
* (b) the gate's false-positive rate under a true null (``significant``: the interval excludes 0
  *and* p < 0.05), for one metric and, for five independent null metrics, the rate at which *any*
  of them passes after Holm (interval excludes 0 and the Holm-adjusted p < 0.05, as
  ``crucible compare --multiple holm`` does);
* (c) power against a known shift: the MDE at 80% power that ``stats.power`` predicts;
* (d) the family-wise false-positive rate of the default gate: 12 null metrics, independent or
  correlated (a shared item effect, rho 0.7), with and without Holm;
* (e) non-inferiority margins: the rate at which a drop of exactly the margin passes, and the
  rate at which no change passes;
* (f) PPI++ coverage at its minimum of 30 labelled answers, with t quantiles;
* (g) paired PPI++ (``crucible compare --ppi``) under its sampling design: the same items labelled in
  both runs (30, the minimum, and 60 of 300 paired items), for graded scores (``b = a + 0.15 + noise``)
  and for correct/incorrect answers of which 15% flip to correct (sparse differences).

Prints the command, the settings and a markdown table; the last column is the Monte Carlo
standard error of the rate (``sqrt(p (1 - p) / data sets)``). About 35 s for 1,000 data sets on
2 cores; ``--datasets 5000`` (about three minutes) is what docs/statistics.md shows.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pytest_crucible.stats import (
    DEFAULT_SEED,
    holm_adjust,
    minimum_detectable_effect,
    paired_cluster_tests,
    paired_tests,
    ppi_mean,
    ppi_paired_difference,
)

DATA_SEED = 20250101
SD = 0.25  # sd of one item's difference
N_ITEMS = 100
FAMILY = 12  # gated metrics in the family-wise rows: about what a run with retrieval and answers gates


def independent(rng: np.random.Generator, mu: float, n: int = N_ITEMS) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) with b - a = mu + N(0, SD^2) per item; a itself is irrelevant to the tests."""
    a = rng.random(n)
    return a, a + mu + rng.normal(0.0, SD, n)


def clustered(rng: np.random.Generator, mu: float, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, labels) with b - a = mu + u_c + e_i, var(u) = var(e) = SD^2 / 2 (ICC 0.5)."""
    k = sizes.shape[0]
    labels = np.repeat(np.arange(k), sizes)
    u = rng.normal(0.0, SD / math.sqrt(2.0), k)
    n = labels.shape[0]
    a = rng.random(n)
    return a, a + mu + u[labels] + rng.normal(0.0, SD / math.sqrt(2.0), n), labels


def paired_answers(rng: np.random.Generator, scenario: str, truth_graded: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-item scores of one answer in run A and one in run B for 300 paired items, and the true mean
    difference: graded scores (b = a + 0.15 + noise, clipped to [0, 1]) or correct/incorrect answers
    where B answers correctly wherever A did, and 15% more (differences of 0 or 1)."""
    if scenario == "graded":
        a = rng.beta(3, 2, 300)
        return a, np.clip(a + 0.15 + rng.normal(0.0, 0.2, 300), 0.0, 1.0), truth_graded
    u = rng.random(300)
    return (u < 0.55).astype(float), (u < 0.70).astype(float), 0.15


def graded_difference_truth() -> float:
    """The true mean difference of the graded scenario (the clipping moves it off 0.15), from 2 million items."""
    rng = np.random.default_rng(1)
    a = rng.beta(3, 2, 2_000_000)
    return float(np.mean(np.clip(a + 0.15 + rng.normal(0.0, 0.2, a.size), 0.0, 1.0) - a))


def covers(results, truth: float) -> float:
    return float(np.mean([r.ci_low <= truth <= r.ci_high for r in results]))


def rate(flags) -> float:
    return float(np.mean(list(flags)))


def mc_se(p: float, runs: int) -> float:
    return math.sqrt(max(p * (1.0 - p), 1.0 / runs) / runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 data sets per scenario instead of 1,000")
    parser.add_argument("--datasets", type=int, default=None, help="data sets per scenario (default 1,000; 200 with --quick)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples and permutations (default 2,000)")
    args = parser.parse_args()
    runs = args.datasets or (200 if args.quick else 1000)
    B = args.resamples
    opts = {"seed": DEFAULT_SEED, "n_resamples": B, "n_permutations": B}
    rng = np.random.default_rng(DATA_SEED)

    print("command: .venv/bin/python bench/validate_stats.py " + " ".join(sys.argv[1:]))
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print(f"settings: {runs} data sets per scenario, {B} resamples, {B} permutations, stats seed {DEFAULT_SEED}, "
          f"data seed {DATA_SEED}, item sd {SD}, alpha 0.05, 95% intervals")
    print()
    started = time.perf_counter()
    rows: list[tuple[str, str, str, str, float]] = []

    def row(check: str, scenario: str, method: str, target: str, value: float) -> None:
        rows.append((check, scenario, method, target, value))

    equal20 = np.full(20, 5)
    equal10 = np.full(10, 10)
    equal30 = np.full(30, 4)
    unequal = np.array([1, 9, 2, 8, 3, 7, 4, 6, 5, 5] * 2)  # 20 clusters, 100 items, sizes 1..9
    arbitrary = np.repeat(np.arange(20), 5)  # an arbitrary grouping of independent items

    # (a) coverage of the mean-difference intervals, true delta 0.05
    mu = 0.05
    data = [independent(rng, mu) for _ in range(runs)]
    row("coverage", "independent, 100 items", "naive BCa", "0.95", covers(paired_tests(data, **opts), mu))
    row("coverage", "independent, 100 items (20 arbitrary clusters of 5)", "cluster BCa", "0.95",
        covers(paired_cluster_tests(data, [arbitrary] * runs, **opts), mu))
    for name, sizes in (("20 clusters x 5, ICC 0.5", equal20), ("20 clusters of 1-9 items, ICC 0.5", unequal),
                        ("10 clusters x 10, ICC 0.5", equal10), ("30 clusters x 4, ICC 0.5", equal30)):
        sets = [clustered(rng, mu, sizes) for _ in range(runs)]
        pairs = [(a, b) for a, b, _ in sets]
        naive = paired_tests(pairs, **opts)
        cluster = paired_cluster_tests(pairs, [labels for _, _, labels in sets], **opts)
        row("coverage", name, "naive BCa", "0.95", covers(naive, mu))
        row("coverage", name, "cluster BCa", "0.95", covers(cluster, mu))
        if sizes is equal20:
            deffs = [c.design_effect for c in cluster]
            print(f"mean design effect, 20 clusters x 5, ICC 0.5: {np.mean(deffs):.2f} (expected 1 + 4 * 0.5 = 3)")

    # (a) PPI++ coverage
    p_true, n_lab, n_unl = 0.6, 100, 900
    for bias in (0.0, 0.15):
        ppi_cover, classical_cover, judge_cover, width = [], [], [], []
        for _ in range(runs):
            y = (rng.random(n_lab + n_unl) < p_true).astype(float)
            f = y + bias + rng.normal(0.0, 0.3, n_lab + n_unl)
            res = ppi_mean(y[:n_lab], f[:n_lab], f[n_lab:])
            ppi_cover.append(res.ci_low <= p_true <= res.ci_high)
            classical_cover.append(res.classical_ci[0] <= p_true <= res.classical_ci[1])
            half = 1.959964 * math.sqrt(np.var(f, ddof=1) / f.shape[0])
            judge_cover.append(abs(f.mean() - p_true) <= half)
            width.append((res.ci_high - res.ci_low) / (res.classical_ci[1] - res.classical_ci[0]))
        scen = f"judge {'unbiased' if bias == 0 else f'biased +{bias}'}, {n_lab} labelled + {n_unl}"
        row("coverage", scen, "PPI++", "0.95", rate(ppi_cover))
        row("coverage", scen, "labelled mean only", "0.95", rate(classical_cover))
        row("coverage", scen, "judge mean, naive", "(shows the bias)", rate(judge_cover))
        print(f"PPI++ interval width / labelled-only width, {scen}: {np.mean(width):.2f}")

    # (b) false-positive rate under a true null
    null = [independent(rng, 0.0) for _ in range(runs)]
    row("false positives", "null, independent, 1 metric", "naive gate", "<= 0.05",
        rate(r.significant for r in paired_tests(null, **opts)))
    null_cl = [clustered(rng, 0.0, equal20) for _ in range(runs)]
    pairs = [(a, b) for a, b, _ in null_cl]
    row("false positives", "null, 20 clusters x 5, ICC 0.5, 1 metric", "naive gate", "(ignores clusters)",
        rate(r.significant for r in paired_tests(pairs, **opts)))
    row("false positives", "null, 20 clusters x 5, ICC 0.5, 1 metric", "cluster gate", "<= 0.05",
        rate(r.significant for r in paired_cluster_tests(pairs, [groups for _, _, groups in null_cl], **opts)))
    null_10 = [clustered(rng, 0.0, equal10) for _ in range(runs)]
    row("false positives", "null, 10 clusters x 10, ICC 0.5, 1 metric", "cluster gate", "<= 0.05",
        rate(r.significant for r in paired_cluster_tests([(a, b) for a, b, _ in null_10], [groups for _, _, groups in null_10], **opts)))
    five = [independent(rng, 0.0) for _ in range(5 * runs)]
    tests = paired_tests(five, **opts)
    any_raw, any_holm = [], []
    for i in range(runs):
        group = tests[5 * i: 5 * i + 5]
        adjusted = holm_adjust([t.p_value for t in group])
        excl = [t.ci_low > 0 or t.ci_high < 0 for t in group]
        any_raw.append(any(t.significant for t in group))
        any_holm.append(any(e and p < 0.05 for e, p in zip(excl, adjusted)))
    row("false positives", "null, independent, 5 metrics (any passes)", "naive gate, no correction", "(5 tests)", rate(any_raw))
    row("false positives", "null, independent, 5 metrics (any passes)", "naive gate + Holm", "<= 0.05", rate(any_holm))

    # (c) power at the predicted MDE (80%)
    mde = minimum_detectable_effect(SD, N_ITEMS)
    shifted = [independent(rng, mde) for _ in range(runs)]
    row("power", f"independent, 100 items, shift = MDE {mde:.3f}", "naive gate", "~0.80",
        rate(r.significant for r in paired_tests(shifted, **opts)))
    mde_cl = mde * math.sqrt(3.0)  # design effect 1 + (5 - 1) * 0.5 = 3
    shifted_cl = [clustered(rng, mde_cl, equal20) for _ in range(runs)]
    pairs = [(a, b) for a, b, _ in shifted_cl]
    row("power", f"20 clusters x 5, ICC 0.5, shift = MDE x sqrt(3) = {mde_cl:.3f}", "cluster gate", "~0.80",
        rate(r.significant for r in paired_cluster_tests(pairs, [groups for _, _, groups in shifted_cl], **opts)))
    shifted_cl = [clustered(rng, mde, equal20) for _ in range(runs)]
    pairs = [(a, b) for a, b, _ in shifted_cl]
    row("power", f"20 clusters x 5, ICC 0.5, shift = {mde:.3f}", "cluster gate", "(below 0.80)",
        rate(r.significant for r in paired_cluster_tests(pairs, [groups for _, _, groups in shifted_cl], **opts)))

    # (d) the gate's family: 12 gated metrics that do not move, independent or correlated through a shared
    # item effect (one question hard for every metric). Its own data stream, so the rows above keep theirs.
    family_rng = np.random.default_rng(DATA_SEED + 1)
    for rho, label in ((0.0, "independent"), (0.7, "correlated, rho 0.7")):
        sets = []
        for _ in range(runs):
            a, shared = family_rng.random(N_ITEMS), family_rng.normal(0.0, SD, N_ITEMS)
            sets.extend((a, a + math.sqrt(rho) * shared + math.sqrt(1 - rho) * family_rng.normal(0.0, SD, N_ITEMS))
                        for _ in range(FAMILY))
        tests = paired_tests(sets, **opts)
        any_raw, any_holm = [], []
        for i in range(runs):
            group = tests[FAMILY * i: FAMILY * (i + 1)]
            adjusted = holm_adjust([t.p_value for t in group])
            any_raw.append(any(t.significant for t in group))
            any_holm.append(any((t.ci_low > 0 or t.ci_high < 0) and p < 0.05 for t, p in zip(group, adjusted)))
        scenario = f"null, {FAMILY} metrics, {label} (any passes)"
        row("false positives", scenario, "gate, --crucible-multiple=none", f"({FAMILY} tests)", rate(any_raw))
        row("false positives", scenario, "gate + Holm (the default)", "<= 0.05", rate(any_holm))

    # (e) non-inferiority (--crucible-margin): how often the gate passes a metric that truly dropped by exactly
    # the margin (the worst case: any larger drop passes less often), and how often it passes one that did
    # not move at all (its power at these 100 items).
    margin_rng = np.random.default_rng(DATA_SEED + 2)
    margin = 0.05
    for shift, label, target in ((-margin, "true drop = the margin 0.05", "<= 0.05"), (0.0, "no change, margin 0.05", "(power)")):
        results = paired_tests([independent(margin_rng, shift) for _ in range(runs)], **opts)
        row("non-inferiority", f"independent, 100 items, {label}", "margin gate passes", target,
            rate(r.ci_low >= -margin for r in results))

    # (f) PPI++ at the fewest labels it gives an interval from (labels.human.MIN_LABELLED = 30), with t quantiles:
    # 30 labelled answers and 900 judged ones, an informative judge and a weak one.
    ppi_rng = np.random.default_rng(DATA_SEED + 3)
    for weight, noise, label in ((1.0, 0.3, "informative judge"), (0.5, 0.4, "weak judge")):
        cover = []
        for _ in range(runs):
            y = (ppi_rng.random(30 + 900) < p_true).astype(float)
            f = weight * y + 0.15 + ppi_rng.normal(0.0, noise, 30 + 900)
            if np.var(y[:30]) == 0:  # refused (no variance): not an interval
                continue
            res = ppi_mean(y[:30], f[:30], f[30:])
            cover.append(res.ci_low <= p_true <= res.ci_high)
        row("coverage", f"PPI++ at its minimum: 30 labelled + 900, {label}", "PPI++ (t quantiles)", "0.94-0.96", rate(cover))

    # (g) Paired PPI++ under its design: a random sample of the 300 paired items is labelled in both runs,
    # the judge scores every answer of both runs. Labels of one run only are refused by crucible (an answer
    # inherited only where it did not change would pair exactly the items that did not move).
    paired_rng = np.random.default_rng(DATA_SEED + 4)
    truth_graded = graded_difference_truth()
    for n_labelled in (30, 60):
        for scenario in ("graded", "binary"):
            cover = []
            for _ in range(runs):
                a, b, truth = paired_answers(paired_rng, scenario, truth_graded)
                fa = a + 0.1 + paired_rng.normal(0.0, 0.15 if scenario == "graded" else 0.3, a.size)
                fb = b + 0.1 + paired_rng.normal(0.0, 0.15 if scenario == "graded" else 0.3, b.size)
                labelled = paired_rng.choice(a.size, n_labelled, replace=False)
                rest = np.setdiff1d(np.arange(a.size), labelled)
                if np.var(b[labelled] - a[labelled]) == 0:  # refused (no variance): not an interval
                    continue
                res = ppi_paired_difference(a[labelled], b[labelled], fa[labelled], fb[labelled], fa[rest], fb[rest])
                cover.append(res.ci_low <= truth <= res.ci_high)
            what = "graded scores" if scenario == "graded" else "correct/incorrect, 15% flip"
            row("coverage", f"paired PPI++: {n_labelled} of 300 items labelled in both runs, {what}",
                "PPI++ difference", "0.94-0.96", rate(cover))

    elapsed = time.perf_counter() - started
    print()
    print("| check | scenario | method | target | observed | count | MC se |")
    print("|---|---|---|---|---|---|---|")
    for check, scenario, method, target, value in rows:
        print(f"| {check} | {scenario} | {method} | {target} | {value:.3f} | {round(value * runs)}/{runs} "
              f"| {mc_se(value, runs):.3f} |")
    print()
    print(f"{runs} data sets per row; wall time {elapsed:.1f} s")


if __name__ == "__main__":
    main()
