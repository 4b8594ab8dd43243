"""Tests for pytest_crucible.metrics.crag and pytest_crucible.metrics.selective.

Every expected value is worked out by hand in a comment; fractions are kept
exact with ``fractions.Fraction`` where the arithmetic has thirds.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.metrics.crag import (
    CRAG_SCORES,
    crag_score,
    is_abstention,
    is_correct,
    truthfulness,
)
from pytest_crucible.metrics.selective import (
    RiskCoveragePoint,
    abstain_rate,
    aurc,
    coverage_at_risk,
    e_aurc,
    optimal_aurc,
    risk_coverage_curve,
)

# --------------------------------------------------------------------------
# CRAG scores and truthfulness


def test_crag_scores_table() -> None:
    assert CRAG_SCORES == {"perfect": 1.0, "acceptable": 0.5, "missing": 0.0, "incorrect": -1.0}
    assert [crag_score(g) for g in ("perfect", "acceptable", "missing", "incorrect")] == [1.0, 0.5, 0.0, -1.0]


def test_crag_score_is_case_insensitive_and_strips() -> None:
    assert crag_score(" Perfect ") == 1.0
    assert crag_score("INCORRECT") == -1.0


@pytest.mark.parametrize("bad", ["wrong", "", "correct", None, 1])
def test_crag_score_rejects_unknown_grades_naming_the_allowed_ones(bad) -> None:
    with pytest.raises(ValueError, match="perfect, acceptable, missing, incorrect"):
        crag_score(bad)


def test_is_correct() -> None:
    assert is_correct("perfect") and is_correct("acceptable")
    assert not is_correct("missing") and not is_correct("incorrect")
    with pytest.raises(ValueError):
        is_correct("great")


def test_truthfulness_hand_checked() -> None:
    # (1 + 0.5 + 0 - 1 - 1) / 5 = -0.5 / 5 = -0.1
    assert truthfulness(["perfect", "acceptable", "missing", "incorrect", "incorrect"]) == pytest.approx(-0.1)
    # (1 + 1 + 0.5 + 0) / 4 = 2.5 / 4 = 0.625 (exact in binary)
    assert truthfulness(["perfect", "perfect", "acceptable", "missing"]) == 0.625
    assert truthfulness(["missing"] * 3) == 0.0
    assert truthfulness(["incorrect"]) == -1.0
    assert truthfulness(["perfect"]) == 1.0


def test_truthfulness_empty_is_none() -> None:
    assert truthfulness([]) is None


def test_hallucination_costs_more_than_abstention() -> None:
    assert truthfulness(["perfect", "missing"]) > truthfulness(["perfect", "incorrect"])


@given(st.lists(st.sampled_from(list(CRAG_SCORES)), min_size=1, max_size=50))
def test_truthfulness_in_range(grades) -> None:
    value = truthfulness(grades)
    assert -1.0 <= value <= 1.0


# --------------------------------------------------------------------------
# abstention detection


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "",
        "   \n ",
        "I don't know.",
        "I DO NOT KNOW",
        "I\u2019m sorry, but I don\u2019t have enough information to answer that question.",
        "Unfortunately, based on the provided documents, I cannot find the retention period for audit exports.",
        "The documents do not say.",
        "I don't know; the documents do not say.",
        "I cannot find this in the documents. Could you rephrase the question?",
        "There is no information about this in the provided context.",
        "I am unable to answer this question based on the available sources.",
    ],
)
def test_abstentions(answer) -> None:
    assert is_abstention(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "The retention period is seven years.",
        "unknown",
        # the phrase sits in a subordinate clause of a long answer
        "The policy covers flights; there is no information about hotel stays, which are reimbursed at cost up to 200 EUR.",
        # content before the phrase
        "Seven years; no information on exports.",
        # the answer goes on after a sentence break ...
        "I don't know. The policy says seven years.",
        # ... or after a contrast word
        "I don't know the exact date, but it was probably in 2021 after the merger.",
        # too many content words restated after the phrase
        "I cannot find the annual travel budget approval thresholds for regional sales managers in EMEA offices.",
    ],
)
def test_not_abstentions(answer) -> None:
    assert not is_abstention(answer)


# --------------------------------------------------------------------------
# risk-coverage curve, AURC, E-AURC: the worked example of the module docstring

CONF = [0.9, 0.8, 0.8, 0.6, 0.3]
OK = [True, False, True, True, False]


def test_worked_example_curve() -> None:
    assert risk_coverage_curve(CONF, OK) == [
        RiskCoveragePoint(coverage=1 / 5, risk=0 / 1, threshold=0.9),
        RiskCoveragePoint(coverage=3 / 5, risk=1 / 3, threshold=0.8),
        RiskCoveragePoint(coverage=4 / 5, risk=1 / 4, threshold=0.6),
        RiskCoveragePoint(coverage=5 / 5, risk=2 / 5, threshold=0.3),
    ]


def test_worked_example_aurc_and_e_aurc() -> None:
    # AURC = (1/5)(1*0 + 2*(1/3) + 1*(1/4) + 1*(2/5)) = 79/300
    expected = Fraction(1, 5) * (0 + 2 * Fraction(1, 3) + Fraction(1, 4) + Fraction(2, 5))
    assert expected == Fraction(79, 300)
    assert aurc(CONF, OK) == float(Fraction(79, 300))
    # AURC* (n=5, e=2, c=3) = (1/5)(1/4 + 2/5) = 13/100
    assert optimal_aurc(5, 2) == float(Fraction(13, 100))
    # E-AURC = 79/300 - 39/300 = 2/15 (one subtraction of two correctly rounded floats)
    assert e_aurc(CONF, OK) == pytest.approx(float(Fraction(2, 15)), abs=1e-15)


def test_worked_example_tie_lies_between_tie_breaks() -> None:
    # correct one of the tie first: (0 + 0 + 1/3 + 1/4 + 2/5)/5 = 59/300
    best = aurc([0.9, 0.8, 0.79, 0.6, 0.3], [True, True, False, True, False])
    # wrong one first: (0 + 1/2 + 1/3 + 1/4 + 2/5)/5 = 89/300
    worst = aurc([0.9, 0.8, 0.79, 0.6, 0.3], [True, False, True, True, False])
    assert best == pytest.approx(59 / 300, abs=1e-15)
    assert worst == pytest.approx(89 / 300, abs=1e-15)
    assert best < aurc(CONF, OK) < worst


def test_worked_example_coverage_at_risk() -> None:
    assert coverage_at_risk(CONF, OK, 0.1) == 0.2
    # the 0.6 point has risk 1/3 > 0.25, the 0.8 point has risk exactly 1/4
    assert coverage_at_risk(CONF, OK, 0.25) == 0.8
    assert coverage_at_risk(CONF, OK, 0.3) == 0.8
    assert coverage_at_risk(CONF, OK, 0.4) == 1.0
    assert coverage_at_risk(CONF, OK, 0.0) == 0.2
    assert coverage_at_risk(CONF, OK, -0.5) == 0.0


# --------------------------------------------------------------------------
# more hand-checked cases


def test_all_tied_aurc_is_error_rate() -> None:
    # one group of 4 with 1 error: AURC = (4/4) * 1/4 = 0.25
    assert risk_coverage_curve([0.5] * 4, [True, False, True, True]) == [RiskCoveragePoint(1.0, 0.25, 0.5)]
    assert aurc([0.5] * 4, [True, False, True, True]) == 0.25
    # AURC* (n=4, e=1, c=3) = (1/4)(1/4) = 1/16; E-AURC = 1/4 - 1/16 = 3/16
    assert e_aurc([0.5] * 4, [True, False, True, True]) == 3 / 16


def test_tie_at_the_bottom() -> None:
    # conf 3, 2, 2 (ranks only matter); correct: F, T, T
    # groups {3}: N=1, E=1, risk 1; {2,2}: N=3, E=1, risk 1/3
    # AURC = (1/3)(1*1 + 2*(1/3)) = (1/3)(5/3) = 5/9
    assert aurc([3, 2, 2], [False, True, True]) == pytest.approx(5 / 9, abs=1e-15)
    # AURC* (n=3, e=1, c=2) = (1/3)(1/3) = 1/9; E-AURC = 4/9
    assert e_aurc([3, 2, 2], [False, True, True]) == pytest.approx(4 / 9, abs=1e-15)


def test_all_correct_and_all_wrong() -> None:
    conf = [0.9, 0.4, 0.4, 0.1]
    assert aurc(conf, [True] * 4) == 0.0
    assert e_aurc(conf, [True] * 4) == 0.0
    assert aurc(conf, [False] * 4) == 1.0
    # a perfect ranking is all that is possible when everything is wrong
    assert optimal_aurc(4, 4) == pytest.approx((1 / 1 + 2 / 2 + 3 / 3 + 4 / 4) / 4)
    assert e_aurc(conf, [False] * 4) == pytest.approx(0.0, abs=1e-15)
    assert coverage_at_risk(conf, [True] * 4, 0.0) == 1.0
    assert coverage_at_risk(conf, [False] * 4, 0.5) == 0.0


def test_single_item() -> None:
    assert risk_coverage_curve([0.7], [True]) == [RiskCoveragePoint(1.0, 0.0, 0.7)]
    assert aurc([0.7], [True]) == 0.0
    assert aurc([0.7], [False]) == 1.0
    assert optimal_aurc(1, 1) == 1.0
    assert e_aurc([0.7], [False]) == 0.0
    assert e_aurc([0.7], [True]) == 0.0


def test_perfect_ranking_has_zero_e_aurc() -> None:
    assert e_aurc([5, 4, 3, 2, 1], [True, True, True, False, False]) == 0.0


def test_optimal_aurc_closed_forms() -> None:
    # (e - c (H_n - H_c)) / n with n=10, e=4, c=6
    h = lambda m: sum(1 / k for k in range(1, m + 1))  # noqa: E731
    assert optimal_aurc(10, 4) == pytest.approx((4 - 6 * (h(10) - h(6))) / 10, abs=1e-14)
    assert optimal_aurc(10, 0) == 0.0
    # large n approaches Geifman et al.'s r + (1 - r) ln(1 - r)
    r = 0.3
    assert optimal_aurc(100_000, 30_000) == pytest.approx(r + (1 - r) * math.log(1 - r), abs=1e-4)


def test_optimal_aurc_rejects_bad_counts() -> None:
    for n, e in [(0, 0), (3, 4), (3, -1), (2.5, 1)]:
        with pytest.raises(ValueError):
            optimal_aurc(n, e)


def test_no_ties_equals_geifman_direct_formula() -> None:
    # (1/n) sum_{i=1..n} risk@i, risk@i = errors among the i most confident / i
    conf = [0.95, 0.1, 0.7, 0.42, 0.33, 0.8, 0.05, 0.6]
    ok = [True, False, True, False, True, False, False, True]
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    errors = 0
    direct = Fraction(0)
    for i, idx in enumerate(order, start=1):
        errors += not ok[idx]
        direct += Fraction(errors, i)
    direct /= len(conf)
    assert aurc(conf, ok) == pytest.approx(float(direct), abs=1e-15)


@given(st.lists(st.tuples(st.floats(0, 1, allow_nan=False), st.booleans()), min_size=1, max_size=40, unique_by=lambda t: t[0]))
def test_no_ties_equals_geifman_direct_formula_property(pairs) -> None:
    conf, ok = zip(*pairs)
    ranked = sorted(pairs, key=lambda p: -p[0])
    errors, direct = 0, Fraction(0)
    for i, (_, correct) in enumerate(ranked, start=1):
        errors += not correct
        direct += Fraction(errors, i)
    direct /= len(pairs)
    assert aurc(conf, ok) == pytest.approx(float(direct), abs=1e-12)


def test_input_validation() -> None:
    for fn in (risk_coverage_curve, aurc, e_aurc):
        with pytest.raises(ValueError, match="empty"):
            fn([], [])
        with pytest.raises(ValueError, match="length"):
            fn([0.1, 0.2], [True])
        with pytest.raises(ValueError, match="NaN"):
            fn([float("nan")], [True])
        with pytest.raises(ValueError, match="booleans"):
            fn([0.1], [2])
    with pytest.raises(ValueError, match="empty"):
        coverage_at_risk([], [], 0.1)
    with pytest.raises(ValueError, match="NaN"):
        coverage_at_risk([0.1], [True], float("nan"))


def test_accepts_numpy_and_zero_one() -> None:
    assert aurc(np.array(CONF), np.array([1, 0, 1, 1, 0])) == aurc(CONF, OK)


def test_abstain_rate() -> None:
    assert abstain_rate([True, False, False, True]) == 0.5
    assert abstain_rate([False] * 3) == 0.0
    assert abstain_rate([True]) == 1.0
    assert abstain_rate([]) is None


# --------------------------------------------------------------------------
# properties

# Confidences drawn from a small integer grid so ties are common.
pairs_strategy = st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=40)


@settings(max_examples=examples(300))
@given(pairs_strategy)
def test_aurc_in_unit_interval_and_e_aurc_nonnegative(pairs) -> None:
    conf, ok = zip(*pairs)
    value = aurc(conf, ok)
    assert 0.0 <= value <= 1.0
    assert e_aurc(conf, ok) >= -1e-12


@settings(max_examples=examples(200))
@given(pairs_strategy, st.sampled_from(["cube", "exp", "affine", "logistic"]))
def test_aurc_invariant_to_monotone_transform(pairs, name) -> None:
    conf, ok = zip(*pairs)
    transform = {
        "cube": lambda x: x**3 - 2.0,
        "exp": math.exp,
        "affine": lambda x: 0.5 * x + 0.25,
        "logistic": lambda x: 1 / (1 + math.exp(-(x - 3))),
    }[name]
    moved = [transform(c) for c in conf]
    assert aurc(moved, ok) == aurc(conf, ok)
    assert e_aurc(moved, ok) == e_aurc(conf, ok)
    assert [(p.coverage, p.risk) for p in risk_coverage_curve(moved, ok)] == [
        (p.coverage, p.risk) for p in risk_coverage_curve(conf, ok)
    ]


@settings(max_examples=examples(200))
@given(pairs_strategy, st.randoms(use_true_random=False))
def test_permuting_input_changes_nothing(pairs, rng) -> None:
    shuffled = list(pairs)
    rng.shuffle(shuffled)
    conf, ok = zip(*pairs)
    conf2, ok2 = zip(*shuffled)
    assert risk_coverage_curve(conf2, ok2) == risk_coverage_curve(conf, ok)
    assert aurc(conf2, ok2) == aurc(conf, ok)
    assert e_aurc(conf2, ok2) == e_aurc(conf, ok)
    for target in (0.0, 0.2, 0.5, 1.0):
        assert coverage_at_risk(conf2, ok2, target) == coverage_at_risk(conf, ok, target)


@settings(max_examples=examples(200))
@given(pairs_strategy, st.floats(-0.5, 1.5, allow_nan=False), st.floats(-0.5, 1.5, allow_nan=False))
def test_coverage_at_risk_monotone_in_target(pairs, t1, t2) -> None:
    conf, ok = zip(*pairs)
    lo, hi = sorted((t1, t2))
    assert coverage_at_risk(conf, ok, lo) <= coverage_at_risk(conf, ok, hi)
    assert coverage_at_risk(conf, ok, 1.0) == 1.0


@settings(max_examples=examples(200))
@given(pairs_strategy)
def test_curve_shape(pairs) -> None:
    conf, ok = zip(*pairs)
    curve = risk_coverage_curve(conf, ok)
    assert len(curve) == len(set(conf))
    assert [p.threshold for p in curve] == sorted({float(c) for c in conf}, reverse=True)
    assert all(a.coverage < b.coverage for a, b in itertools.pairwise(curve))
    assert curve[-1].coverage == 1.0
    assert curve[-1].risk == pytest.approx(ok.count(False) / len(ok))


def test_tie_rule_is_not_a_tie_break_average() -> None:
    # Documented in the module docstring: the group rule charges every tied
    # result the risk at the end of its group, which can sit outside the range
    # of the tie-breaks.
    # (2, 1, 1) / (yes, no, no): group rule (1/3)(0 + 2 * 2/3) = 4/9;
    # either tie-break (1/3)(0 + 1/2 + 2/3) = 7/18.
    assert aurc([2, 1, 1], [True, False, False]) == pytest.approx(4 / 9, abs=1e-15)
    assert aurc([2, 1.5, 1], [True, False, False]) == pytest.approx(7 / 18, abs=1e-15)
    # (2, 1, 1) / (no, yes, yes): group rule (1/3)(1 + 2 * 1/3) = 5/9;
    # either tie-break (1/3)(1 + 1/2 + 1/3) = 11/18.
    assert aurc([2, 1, 1], [False, True, True]) == pytest.approx(5 / 9, abs=1e-15)
    assert aurc([2, 1.5, 1], [False, True, True]) == pytest.approx(11 / 18, abs=1e-15)
