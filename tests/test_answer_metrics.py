"""Unit and property tests for pytest_crucible.metrics.answer.

The formulas follow the ragas metric documentation (docs.ragas.io: faithfulness,
response relevancy, context precision, context recall, noise sensitivity); every
expected value below is worked out by hand in a comment.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.metrics.answer import (
    context_precision,
    context_recall,
    faithfulness,
    noise_sensitivity,
    response_relevancy,
)

# --------------------------------------------------------------------------
# faithfulness


def test_faithfulness_three_of_four() -> None:
    # 3 supported claims out of 4 -> 3 / 4 = 0.75
    assert faithfulness([True, True, False, True]) == 0.75


def test_faithfulness_extremes_and_undefined() -> None:
    assert faithfulness([True]) == 1.0  # 1 / 1
    assert faithfulness([False, False]) == 0.0  # 0 / 2
    assert faithfulness([]) is None  # no claims: undefined, never NaN


# --------------------------------------------------------------------------
# context precision


def test_context_precision_by_hand() -> None:
    # v = [1, 0, 1]: precision@1 = 1/1, precision@3 = 2/3; two useful chunks
    # -> (1/1 + 2/3) / 2 = 0.8333...
    assert context_precision([True, False, True]) == pytest.approx((1 + 2 / 3) / 2)
    assert context_precision([True, False, True]) == pytest.approx(0.833333, abs=1e-6)
    # v = [0, 1]: precision@2 = 1/2; one useful chunk -> 0.5 / 1 = 0.5
    assert context_precision([False, True]) == 0.5
    # v = [0, 0, 1, 1]: precision@3 = 1/3, precision@4 = 2/4 -> (1/3 + 1/2) / 2 = 0.41666...
    assert context_precision([False, False, True, True]) == pytest.approx((1 / 3 + 1 / 2) / 2)


def test_context_precision_denominator_is_useful_chunks_not_k() -> None:
    # v = [1, 0, 0, 0, 0]: precision@1 = 1, one useful chunk -> 1 / 1 = 1.0
    # (dividing by K = 5 would give 0.2)
    assert context_precision([True, False, False, False, False]) == 1.0
    # v = [1, 1, 0]: (1/1 + 2/2) / 2 = 1.0
    assert context_precision([True, True, False]) == 1.0


def test_context_precision_no_useful_chunk_and_no_chunk() -> None:
    # [0, 0, 0]: no useful chunk -> exactly 0.0 (ragas: 0 / (0 + epsilon))
    assert context_precision([False, False, False]) == 0.0
    # nothing retrieved -> undefined
    assert context_precision([]) is None


# --------------------------------------------------------------------------
# context recall


def test_context_recall_by_hand() -> None:
    # 2 of 3 reference sentences attributable -> 2 / 3
    assert context_recall([True, False, True]) == pytest.approx(2 / 3)
    assert context_recall([True, True]) == 1.0  # 2 / 2
    assert context_recall([False]) == 0.0  # 0 / 1
    assert context_recall([]) is None  # no reference sentence: undefined


# --------------------------------------------------------------------------
# response relevancy


def test_response_relevancy_identical_vectors() -> None:
    q = np.array([0.6, 0.8, 0.0])
    # cos(q, q) = 1 for each of 3 generations -> mean 1.0
    assert response_relevancy(q, np.vstack([q, q, q]), [False, False, False]) == pytest.approx(1.0)


def test_response_relevancy_mean_cosine_by_hand() -> None:
    q = np.array([1.0, 0.0])
    gens = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    # cosines: 1, 0, 1/sqrt(2) = 0.70710... -> mean (1 + 0 + 0.70710) / 3 = 0.56903...
    expected = (1 + 0 + 1 / math.sqrt(2)) / 3
    assert response_relevancy(q, gens, [False, False, False]) == pytest.approx(expected)


def test_response_relevancy_all_noncommittal_is_zero() -> None:
    q = np.array([0.6, 0.8])
    # every cosine is 1, but every generation is noncommittal -> 1 x 0 = 0
    assert response_relevancy(q, np.vstack([q, q, q]), [True, True, True]) == 0.0


def test_response_relevancy_some_noncommittal_keeps_mean_cosine() -> None:
    q = np.array([1.0, 0.0])
    gens = np.array([[1.0, 0.0], [0.0, 1.0]])
    # cosines 1 and 0; not all noncommittal -> plain mean (1 + 0) / 2 = 0.5
    assert response_relevancy(q, gens, [True, False]) == 0.5


def test_response_relevancy_zero_and_negative_vectors() -> None:
    q = np.array([1.0, 0.0])
    # a zero vector has cosine 0; a vector pointing away (cosine -1) is clipped to 0
    gens = np.array([[0.0, 0.0], [-1.0, 0.0], [2.0, 0.0]])
    # (0 + 0 + 1) / 3
    assert response_relevancy(q, gens, [False, False, False]) == pytest.approx(1 / 3)
    assert response_relevancy(np.zeros(2), gens, [False, False, False]) == 0.0
    # nothing generated -> 0.0 (never NaN)
    assert response_relevancy(q, np.zeros((0, 2)), []) == 0.0


def test_response_relevancy_rejects_mismatched_inputs() -> None:
    q = np.array([1.0, 0.0])
    with pytest.raises(ValueError):
        response_relevancy(q, np.array([[1.0, 0.0]]), [False, False])
    with pytest.raises(ValueError):
        response_relevancy(q, np.array([[1.0, 0.0, 0.0]]), [False])


# --------------------------------------------------------------------------
# noise sensitivity

# Answer with 4 claims, two retrieved chunks: A (relevant: it supports a
# reference claim) and B (irrelevant).
#   claim 0: correct,   entailed by A       -> never counted (it is correct)
#   claim 1: incorrect, entailed by A and B -> relevant mode; NOT irrelevant mode
#                                              (a relevant chunk also entails it)
#   claim 2: incorrect, entailed by B only  -> irrelevant mode
#   claim 3: incorrect, entailed by nothing -> neither mode (a pure hallucination)
CORRECT = [True, False, False, False]
SUPPORT = [
    [True, True, False, False],  # chunk A
    [False, True, True, False],  # chunk B
]
RELEVANT = [True, False]


def test_noise_sensitivity_relevant_by_hand() -> None:
    # incorrect AND entailed by a relevant chunk: claim 1 only -> 1 / 4
    assert noise_sensitivity(CORRECT, SUPPORT, RELEVANT, mode="relevant") == 0.25
    assert noise_sensitivity(CORRECT, SUPPORT, RELEVANT) == 0.25  # relevant is the default


def test_noise_sensitivity_irrelevant_by_hand() -> None:
    # incorrect AND entailed by an irrelevant chunk AND by no relevant chunk: claim 2 only -> 1 / 4
    assert noise_sensitivity(CORRECT, SUPPORT, RELEVANT, mode="irrelevant") == 0.25
    # if B were relevant too, claims 1 and 2 count in relevant mode (2 / 4) and none in irrelevant mode
    assert noise_sensitivity(CORRECT, SUPPORT, [True, True], mode="relevant") == 0.5
    assert noise_sensitivity(CORRECT, SUPPORT, [True, True], mode="irrelevant") == 0.0


def test_noise_sensitivity_edges() -> None:
    assert noise_sensitivity([], [[], []], [True, False]) is None  # no answer claims
    assert noise_sensitivity([False, False], [], []) == 0.0  # nothing retrieved: nothing entails
    assert noise_sensitivity([True, True], [[True, True]], [True]) == 0.0  # all correct
    with pytest.raises(ValueError):
        noise_sensitivity(CORRECT, SUPPORT, RELEVANT, mode="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        noise_sensitivity(CORRECT, SUPPORT, [True])  # one flag for two chunks
    with pytest.raises(ValueError):
        noise_sensitivity(CORRECT, [[True]], [True])  # one verdict for four claims


# --------------------------------------------------------------------------
# properties

flags = st.lists(st.booleans(), max_size=30)


@settings(max_examples=examples(200), deadline=None)
@given(flags)
def test_ratio_metrics_in_unit_interval(values: list[bool]) -> None:
    for metric in (faithfulness, context_precision, context_recall):
        score = metric(values)
        if not values:
            assert score is None
        else:
            assert score is not None and 0.0 <= score <= 1.0


@settings(max_examples=examples(200), deadline=None)
@given(flags, st.integers(min_value=1, max_value=10))
def test_context_precision_ignores_trailing_useless_chunks(values: list[bool], extra: int) -> None:
    before = context_precision(values)
    after = context_precision(values + [False] * extra)
    if not values:
        assert after == 0.0
    else:
        assert after == pytest.approx(before, abs=1e-12)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.data())
def test_faithfulness_monotone_in_supported_claims(values: list[bool], data: st.DataObject) -> None:
    unsupported = [i for i, v in enumerate(values) if not v]
    if not unsupported:
        return
    flipped = list(values)
    flipped[data.draw(st.sampled_from(unsupported))] = True
    assert faithfulness(flipped) > faithfulness(values)


vectors = st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=4, max_size=4)


@settings(max_examples=examples(200), deadline=None)
@given(vectors, st.lists(st.tuples(vectors, st.booleans()), min_size=0, max_size=5))
def test_response_relevancy_in_unit_interval(question: list[float], generations: list) -> None:
    rows = np.array([g for g, _ in generations], dtype=float).reshape(len(generations), 4)
    score = response_relevancy(np.array(question), rows, [n for _, n in generations])
    assert 0.0 <= score <= 1.0
    assert not math.isnan(score)


@st.composite
def noise_cases(draw: st.DrawFn) -> tuple[list[bool], list[list[bool]], list[bool]]:
    claims = draw(st.integers(min_value=0, max_value=6))
    chunks = draw(st.integers(min_value=0, max_value=5))
    correct = draw(st.lists(st.booleans(), min_size=claims, max_size=claims))
    support = [draw(st.lists(st.booleans(), min_size=claims, max_size=claims)) for _ in range(chunks)]
    relevant = draw(st.lists(st.booleans(), min_size=chunks, max_size=chunks))
    return correct, support, relevant


@settings(max_examples=examples(200), deadline=None)
@given(noise_cases())
def test_noise_sensitivity_in_unit_interval_and_modes_disjoint(case) -> None:
    correct, support, relevant = case
    rel = noise_sensitivity(correct, support, relevant, mode="relevant")
    irr = noise_sensitivity(correct, support, relevant, mode="irrelevant")
    if not correct:
        assert rel is None and irr is None
        return
    assert 0.0 <= rel <= 1.0 and 0.0 <= irr <= 1.0
    # a claim counts in at most one mode, and only incorrect claims count
    assert rel + irr <= 1.0 - sum(correct) / len(correct) + 1e-12
