"""The paired AURC test: vectorised AURC equals the reference definition; the gates behave."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.metrics.selective import aurc
from pytest_crucible.stats.run_level import aurc_rows, paired_aurc_test

pairs = st.lists(st.tuples(st.integers(0, 4).map(lambda x: x / 4), st.booleans()), min_size=1, max_size=25)


@settings(max_examples=examples(200), deadline=None)
@given(pairs)
def test_vectorised_aurc_equals_the_reference_with_ties(rows) -> None:
    conf = np.array([[c for c, _ in rows]])
    correct = np.array([[float(ok) for _, ok in rows]])
    assert aurc_rows(conf, correct)[0] == pytest.approx(aurc([c for c, _ in rows], [ok for _, ok in rows]), abs=1e-12)


def test_identical_runs_are_not_significant() -> None:
    rows = [(0.9, True), (0.8, False), (0.7, True), (0.6, True), (0.3, False), (0.2, True), (0.1, False)]
    result = paired_aurc_test(rows, rows)
    assert (result.delta, result.ci_low, result.ci_high, result.p_value, result.significant) == (0.0, 0.0, 0.0, 1.0, False)


def test_a_clearly_better_ranking_is_significant_and_swapping_negates() -> None:
    rng = np.random.default_rng(7)
    correct = rng.random(120) < 0.6
    noisy = [(float(c), bool(ok)) for c, ok in zip(rng.random(120), correct)]
    informed = [(float(ok) * 0.5 + 0.5 * c, bool(ok)) for c, ok in zip(rng.random(120), correct)]  # confidence tracks correctness
    better = paired_aurc_test(noisy, informed, n_resamples=2000, n_permutations=2000)
    assert better.delta < 0 and better.ci_high < 0 and better.p_value < 0.05 and better.significant
    worse = paired_aurc_test(informed, noisy, n_resamples=2000, n_permutations=2000)
    assert worse.delta == pytest.approx(-better.delta)
    assert worse.ci_low == pytest.approx(-better.ci_high, abs=1e-9) and worse.ci_high == pytest.approx(-better.ci_low, abs=1e-9)
    assert worse.p_value == pytest.approx(better.p_value)


def test_exact_permutation_on_few_items_and_errors() -> None:
    # 3 items: 2^3 = 8 swap patterns, enumerated exactly.
    result = paired_aurc_test([(0.9, False), (0.5, True), (0.1, True)], [(0.9, True), (0.5, True), (0.1, False)])
    assert result.p_value * 8 == pytest.approx(round(result.p_value * 8))
    with pytest.raises(ValueError, match="at least 2 paired items"):
        paired_aurc_test([(0.5, True)], [(0.5, False)])


def _selective_pairs(n: int, seed: int) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    a = list(zip(np.round(rng.random(n), 2), rng.random(n) < 0.7))
    b = list(zip(np.round(rng.random(n), 2), rng.random(n) < 0.8))
    return a, b


def test_the_test_is_pinned_to_the_whole_matrix_implementation() -> None:
    """Drawing resamples and permutations block by block gives exactly what the whole B x n matrices gave
    (recorded from that implementation: n = 300 with ties, 999 resamples, 4,097 permutations, seed 5)."""
    a, b = _selective_pairs(300, 11)
    result = paired_aurc_test(a, b, n_resamples=999, n_permutations=4097, seed=5)
    assert (result.delta.hex(), result.ci_low.hex(), result.ci_high.hex(), result.p_value) == PINNED_300


def test_a_large_golden_set_uses_a_grouped_jackknife_close_to_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past JACKKNIFE_EXACT_MAX items the acceleration comes from a delete-a-group jackknife (the
    leave-one-out one is O(n^2)); its interval stays close to the exact one."""
    from pytest_crucible.stats import run_level

    a, b = _selective_pairs(1_500, 3)
    exact = paired_aurc_test(a, b, n_resamples=400, n_permutations=400)
    monkeypatch.setattr(run_level, "JACKKNIFE_EXACT_MAX", 1_000)
    monkeypatch.setattr(run_level, "JACKKNIFE_GROUPS", 150)
    grouped = paired_aurc_test(a, b, n_resamples=400, n_permutations=400)
    width = exact.ci_high - exact.ci_low
    assert grouped.delta == exact.delta and grouped.p_value == exact.p_value  # only the acceleration differs
    assert abs(grouped.ci_low - exact.ci_low) < 0.05 * width and abs(grouped.ci_high - exact.ci_high) < 0.05 * width


# Recorded from the whole-matrix implementation (before resamples were drawn block by block).
PINNED_300 = ('-0x1.0c29d18d22798p-3', '-0x1.cf04784165cdep-3', '-0x1.e792088fea02fp-6', 0.010736944851146901)
