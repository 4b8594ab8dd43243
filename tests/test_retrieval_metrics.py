"""Unit and property tests for pytest_crucible.metrics.retrieval.

The formulas follow NIST's trec_eval (we acknowledge the National Institute
of Standards and Technology as the source of trec_eval and of the reference
outputs that tests/test_trec_eval.py checks these functions against).  Here
every expected value is computed by hand in a comment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.metrics.retrieval import (
    RETRIEVAL_METRICS,
    hit_at_k,
    ndcg_at_k,
    precision_at_k,
    provenance_qrels,
    ranking_units,
    recall_at_k,
    reciprocal_rank,
    retrieval_metrics,
)

AT_K = (recall_at_k, precision_at_k, ndcg_at_k, hit_at_k)

# --------------------------------------------------------------------------
# hand-computed examples

GRADED = {"a": 3, "b": 2, "c": 1, "d": 0}


def test_graded_ndcg_by_hand() -> None:
    # ranking c x a b (x unjudged), gain = grade, discount log2(rank + 1):
    #   DCG  = 1/log2(2) + 0/log2(3) + 3/log2(4) + 2/log2(5)
    #        = 1 + 0 + 1.5 + 0.8613531161 = 3.3613531161
    # ideal = a b c (all positive grades, sorted):
    #   IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)
    #        = 3 + 1.2618595071 + 0.5 = 4.7618595071
    #   nDCG = 3.3613531161 / 4.7618595071 = 0.7058908628
    assert ndcg_at_k(["c", "x", "a", "b"], GRADED, 10) == pytest.approx(0.7058908628)


def test_graded_ndcg_cut_also_cuts_the_ideal() -> None:
    # top 2 = c x: DCG@2 = 1/log2(2) = 1
    # ideal top 2 = a b: IDCG@2 = 3 + 2/log2(3) = 4.2618595071
    assert ndcg_at_k(["c", "x", "a", "b"], GRADED, 2) == pytest.approx(1 / 4.2618595071)


def test_ndcg_ignores_relevance_level_like_trec_eval() -> None:
    # trec_eval -l 2 still gives grade-1 documents their gain (checked against
    # out.test.aql in test_trec_eval.py), so the level changes nothing here.
    ranking = ["c", "x", "a", "b"]
    assert ndcg_at_k(ranking, GRADED, 10, relevance_level=2) == ndcg_at_k(ranking, GRADED, 10)
    # ... even when only grades below the level were retrieved: c (grade 1) alone
    # DCG = 1, IDCG = 4.7618595071
    assert ndcg_at_k(["c"], GRADED, 10, relevance_level=3) == pytest.approx(1 / 4.7618595071)


def test_ndcg_zero_without_positive_grades() -> None:
    assert ndcg_at_k(["d", "x"], {"d": 0, "e": -1}, 10) == 0.0
    assert ndcg_at_k([], GRADED, 10) == 0.0


def test_precision_divides_by_k_even_when_fewer_retrieved() -> None:
    # one relevant doc retrieved, k = 5: 1/5, not 1/1
    assert precision_at_k(["a"], {"a": 1}, 5) == 0.2
    assert precision_at_k([], {"a": 1}, 5) == 0.0
    # a x c d with level 1: a and c are relevant in the top 4 -> 2/4
    assert precision_at_k(["a", "x", "c", "d"], GRADED, 4) == 0.5


def test_recall() -> None:
    qrels = {"a": 1, "b": 1, "c": 1, "d": 0}
    # 3 relevant; top 2 of a d x c holds a -> 1/3; top 4 holds a, c -> 2/3
    assert recall_at_k(["a", "d", "x", "c"], qrels, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "d", "x", "c"], qrels, 4) == pytest.approx(2 / 3)
    # relevance level 2 on GRADED: relevant = a, b; a is in the top 1 -> 1/2
    assert recall_at_k(["a", "c"], GRADED, 1, relevance_level=2) == 0.5
    # no relevant id at all: trec_eval reports 0
    assert recall_at_k(["a"], {"a": 0}, 5) == 0.0


def test_reciprocal_rank() -> None:
    # nothing relevant retrieved -> 0
    assert reciprocal_rank(["x", "d", "y"], GRADED) == 0.0
    assert reciprocal_rank([], GRADED) == 0.0
    # first relevant (c) at rank 3 -> 1/3
    assert reciprocal_rank(["x", "d", "c", "a"], GRADED) == pytest.approx(1 / 3)
    # level 2 skips c (grade 1): first relevant is a at rank 4 -> 1/4
    assert reciprocal_rank(["x", "d", "c", "a"], GRADED, relevance_level=2) == 0.25
    # whole ranking, not cut at any k: rank 50 still counts
    assert reciprocal_rank([f"n{i}" for i in range(49)] + ["a"], GRADED) == 0.02


def test_hit_at_k() -> None:
    assert hit_at_k(["x", "a"], GRADED, 1) == 0.0
    assert hit_at_k(["x", "a"], GRADED, 2) == 1.0
    assert hit_at_k(["c"], GRADED, 1, relevance_level=2) == 0.0


def test_negative_grades_and_unjudged_are_not_relevant() -> None:
    qrels = {"p": -1, "q": 0, "r": 2}
    assert precision_at_k(["p", "q", "u"], qrels, 3) == 0.0
    # even with a (strange) level of 0, unjudged and negative stay non-relevant,
    # only the judged grade-0 doc q becomes relevant (trec_eval -l 0)
    assert precision_at_k(["p", "q", "u"], qrels, 3, relevance_level=0) == pytest.approx(1 / 3)


def test_duplicates_count_once() -> None:
    qrels = {"a": 1, "b": 1}
    ranking = ["a", "a", "a"]
    # only the first a counts: 1 relevant in the top 3
    assert precision_at_k(ranking, qrels, 3) == pytest.approx(1 / 3)
    assert recall_at_k(ranking, qrels, 3) == 0.5
    assert reciprocal_rank(ranking, qrels) == 1.0
    # DCG = 1; IDCG = 1 + 1/log2(3) = 1.6309297536 -> 0.6131471928 (never > 1)
    assert ndcg_at_k(ranking, qrels, 3) == pytest.approx(0.6131471928)
    # the repeats still occupy ranks 2 and 3: b at rank 4 is outside the top 3
    assert recall_at_k(["a", "a", "a", "b"], qrels, 3) == 0.5


@pytest.mark.parametrize("k", [0, -1, 1.5, True, None])
def test_bad_cutoff(k: object) -> None:
    with pytest.raises(ValueError, match="cutoff k"):
        precision_at_k(["a"], {"a": 1}, k)  # type: ignore[arg-type]


def test_retrieval_metrics_keys_and_cut() -> None:
    ranking = ["x", "c", "y", "a"]
    got = retrieval_metrics(ranking, GRADED, 2)
    assert tuple(got) == RETRIEVAL_METRICS
    # relevant (level 1) = a b c; top 2 = x c
    assert got["recallAtK"] == pytest.approx(1 / 3)
    assert got["precisionAtK"] == 0.5
    assert got["mrr"] == 0.5
    assert got["hitAtK"] == 1.0
    # nDCG is cut at 10 whatever k is: a at rank 4 counts
    assert got["ndcgAt10"] == ndcg_at_k(ranking, GRADED, 10)
    assert got["ndcgAt10"] != ndcg_at_k(ranking, GRADED, 2)


def test_retrieval_metrics_undefined_without_relevant() -> None:
    assert retrieval_metrics(["a"], {}, 5) == {}
    assert retrieval_metrics(["a"], {"a": 0, "b": -1}, 5) == {}
    # relevant only below the level -> undefined at that level
    assert retrieval_metrics(["c"], {"c": 1}, 5, relevance_level=2) == {}


# --------------------------------------------------------------------------
# provenance -> qrels, retrieved chunks -> units


@dataclass
class _Citation:  # stands in for the pydantic model: snake_case attributes
    doc_id: str
    chunk_id: str | None = None
    mode: str = "required"


def test_provenance_qrels_grades_and_keys() -> None:
    citations = [
        _Citation("D1"),  # required, whole document
        _Citation("D2", "D2#3", "acceptable"),  # chunk-level
        {"docId": "D3", "chunkId": "D3#0", "mode": "required"},  # camelCase dict
        {"doc_id": "D4", "mode": "acceptable"},  # snake_case dict
        SimpleNamespace(doc_id="D5", chunk_id=None, mode="acceptable"),
    ]
    assert provenance_qrels(citations) == {
        "doc:D1": 3,
        "chunk:D2#3": 1,
        "chunk:D3#0": 3,
        "doc:D4": 1,
        "doc:D5": 1,
    }


def test_provenance_qrels_duplicates_keep_max_grade() -> None:
    citations = [
        {"docId": "D1", "mode": "acceptable"},
        {"docId": "D1", "mode": "required"},
        {"docId": "D1", "mode": "acceptable"},
    ]
    assert provenance_qrels(citations) == {"doc:D1": 3}


def test_provenance_qrels_errors() -> None:
    with pytest.raises(ValueError, match="mode"):
        provenance_qrels([{"docId": "D1", "mode": "optional"}])
    with pytest.raises(ValueError, match="doc_id"):
        provenance_qrels([{"mode": "required"}])


def test_ranking_units_dedupes_a_document_retrieved_as_chunks() -> None:
    qrels = {"doc:D": 3, "chunk:E#2": 1}
    retrieved = [("D#0", "D"), ("D#1", "D"), ("E#1", "E"), ("E#2", "E"), ("D#5", "D")]
    units = ranking_units(retrieved, qrels)
    # D#0 credits doc:D; the other D chunks are unique unjudged keys;
    # E#1 is an unjudged chunk (only E#2 is judged, at chunk level)
    assert units == ["doc:D", "dup:2:D#1", "chunk:E#1", "chunk:E#2", "dup:5:D#5"]
    # so the document counts once: 2 relevant units, both in the top 4
    assert recall_at_k(units, qrels, 4) == 1.0
    assert precision_at_k(units, qrels, 4) == 0.5


def test_ranking_units_chunk_key_wins_over_doc_key() -> None:
    qrels = {"chunk:D#1": 3, "doc:D": 1}
    assert ranking_units([("D#1", "D"), ("D#2", "D"), ("D#1", "D")], qrels) == [
        "chunk:D#1",
        "doc:D",
        "dup:3:D#1",
    ]


def test_provenance_and_units_end_to_end() -> None:
    qrels = provenance_qrels(
        [{"docId": "D", "mode": "required"}, {"docId": "F", "chunkId": "F#1"}]
    )
    units = ranking_units([("X#0", "X"), ("D#4", "D"), ("D#5", "D"), ("F#1", "F")], qrels)
    got = retrieval_metrics(units, qrels, 3)
    # relevant units doc:D, chunk:F#1; top 3 = X#0, doc:D, dup -> 1 of 2
    assert got["recallAtK"] == 0.5
    assert got["precisionAtK"] == pytest.approx(1 / 3)
    assert got["mrr"] == 0.5
    # DCG@10 = 3/log2(3) + 3/log2(5); IDCG = 3 + 3/log2(3)
    expected = (3 / math.log2(3) + 3 / math.log2(5)) / (3 + 3 / math.log2(3))
    assert got["ndcgAt10"] == pytest.approx(expected)


# --------------------------------------------------------------------------
# properties

IDS = [f"d{i}" for i in range(8)]
ids = st.sampled_from(IDS)
qrels_st = st.dictionaries(ids, st.integers(min_value=-1, max_value=4), max_size=8)
rankings = st.lists(ids, max_size=14)
cutoffs = st.integers(min_value=1, max_value=16)
levels = st.integers(min_value=1, max_value=3)
# ids never judged: always non-relevant, zero gain
unjudged = st.lists(st.sampled_from([f"u{i}" for i in range(5)]), min_size=1, max_size=10)


def _all_values(ranking, qrels, k, level):  # type: ignore[no-untyped-def]
    values = [f(ranking, qrels, k, level) for f in AT_K]
    values.append(reciprocal_rank(ranking, qrels, level))
    values.extend(retrieval_metrics(ranking, qrels, k, level).values())
    return values


@given(rankings, qrels_st, cutoffs, levels)
def test_all_metrics_in_unit_interval(  # type: ignore[no-untyped-def]
    ranking, qrels, k, level
) -> None:
    for value in _all_values(ranking, qrels, k, level):
        assert 0.0 <= value <= 1.0


@given(rankings, qrels_st, cutoffs, levels, st.randoms())
def test_invariant_to_qrels_insertion_order(  # type: ignore[no-untyped-def]
    ranking, qrels, k, level, rnd
) -> None:
    items = list(qrels.items())
    rnd.shuffle(items)
    assert _all_values(ranking, dict(items), k, level) == _all_values(ranking, qrels, k, level)


@given(qrels_st, cutoffs, levels, unjudged)
def test_perfect_ranking(  # type: ignore[no-untyped-def]
    qrels, k, level, noise
) -> None:
    # every positive grade first, highest grade first, then noise
    positive = sorted((d for d, g in qrels.items() if g > 0), key=lambda d: -qrels[d])
    ranking = positive + noise
    num_relevant = sum(1 for g in qrels.values() if g >= level)
    if positive:
        assert ndcg_at_k(ranking, qrels, k, level) == pytest.approx(1.0)
    if num_relevant:
        assert reciprocal_rank(ranking, qrels, level) == 1.0
        assert hit_at_k(ranking, qrels, k, level) == 1.0
        # the relevant ids (grade >= level) are a prefix of `positive`
        if k >= num_relevant:
            assert recall_at_k(ranking, qrels, k, level) == 1.0


@given(rankings, qrels_st, cutoffs, levels, unjudged)
def test_appending_after_k_changes_nothing_at_k(  # type: ignore[no-untyped-def]
    ranking, qrels, k, level, tail
) -> None:
    # pad to k with unjudged ids so the tail lands after position k
    head = (ranking + [f"pad{i}" for i in range(k)])[:k]
    for f in AT_K:
        assert f(head + tail, qrels, k, level) == f(head, qrels, k, level)
    # ... and it does not matter what comes after k, relevant or not
    assert all(
        f(head + ranking, qrels, k, level) == f(head, qrels, k, level) for f in AT_K
    )


@given(rankings, qrels_st, cutoffs, levels, unjudged)
def test_appending_non_relevant_never_changes_anything(  # type: ignore[no-untyped-def]
    ranking, qrels, k, level, tail
) -> None:
    # even inside the top k: P@k divides by k, not by the number retrieved
    assert _all_values(ranking + tail, qrels, k, level) == _all_values(ranking, qrels, k, level)


@given(rankings, qrels_st, cutoffs, levels)
def test_repeating_ranked_ids_counts_as_non_relevant(  # type: ignore[no-untyped-def]
    ranking, qrels, k, level
) -> None:
    doubled = ranking + ranking
    assert _all_values(doubled, qrels, k, level) == _all_values(ranking, qrels, k, level)


chunk_pairs = st.lists(
    st.tuples(st.sampled_from([f"c{i}" for i in range(6)]), st.sampled_from(["A", "B", "C"])),
    max_size=12,
)
unit_qrels = st.dictionaries(
    st.sampled_from([f"chunk:c{i}" for i in range(6)] + ["doc:A", "doc:B", "doc:C"]),
    st.sampled_from([1, 3]),
    max_size=6,
)


@settings(max_examples=examples(200))
@given(chunk_pairs, unit_qrels)
def test_ranking_units_unique_and_each_judged_unit_credited_once(  # type: ignore[no-untyped-def]
    retrieved, qrels
) -> None:
    units = ranking_units(retrieved, qrels)
    assert len(units) == len(retrieved)
    assert len(set(units)) == len(units)
    assert all(not u.startswith("dup:") or u not in qrels for u in units)
    # no metric can exceed 1 after the mapping
    for value in _all_values(units, qrels, 5, 1):
        assert 0.0 <= value <= 1.0
