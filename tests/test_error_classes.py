"""Tests for pytest_crucible.metrics.errors: one crafted input per class, precedence, edges."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_crucible.metrics.errors import (
    ERROR_CLASSES,
    ClassificationInputs,
    ErrorVerdict,
    classify,
)

# A clean, answerable, correctly answered and cited result; each test changes what it needs.
CLEAN = ClassificationInputs(
    answerable=True,
    question_type="simple",
    dynamism="static",
    abstained=False,
    missing_required_citations=(),
    unsupported_claims=(),
    cited_chunk_ids=("c1",),
    supporting_chunk_ids=("c1", "c2"),
    stale_cited=(),
    conflicting_docs=(),
    answer_mentions_conflict=False,
    unsatisfied_must=(),
    crag_grade="perfect",
)


def make(**changes) -> ClassificationInputs:
    return dataclasses.replace(CLEAN, **changes)


def test_error_classes_in_precedence_order() -> None:
    assert ERROR_CLASSES == (
        "retrieval_miss",
        "stale",
        "conflict_mishandled",
        "wrong_passage",
        "hallucination",
        "citation_error",
        "incomplete",
        "correct",
    )


# --------------------------------------------------------------------------
# each class from a crafted input


def test_correct() -> None:
    verdict = classify(CLEAN)
    assert verdict == ErrorVerdict("correct", verdict.evidence)
    assert "perfect" in verdict.evidence


def test_correct_without_judge_grade() -> None:
    assert classify(make(crag_grade=None)).error_class == "correct"


def test_retrieval_miss() -> None:
    verdict = classify(make(missing_required_citations=("doc-7",)))
    assert verdict.error_class == "retrieval_miss"
    assert "doc-7" in verdict.evidence


def test_stale() -> None:
    verdict = classify(make(dynamism="fast", stale_cited=("c1",)))
    assert verdict.error_class == "stale"
    assert "c1" in verdict.evidence and "fast" in verdict.evidence


def test_stale_needs_a_changing_item() -> None:
    for dynamism in ("static", None, "weird"):
        assert classify(make(dynamism=dynamism, stale_cited=("c1",))).error_class == "correct"
    assert classify(make(dynamism="Slow", stale_cited=("c1",))).error_class == "stale"


def test_conflict_mishandled() -> None:
    verdict = classify(make(conflicting_docs=("doc-a", "doc-b")))
    assert verdict.error_class == "conflict_mishandled"
    assert "doc-a" in verdict.evidence and "doc-b" in verdict.evidence


def test_conflict_surfaced_is_fine() -> None:
    inputs = make(conflicting_docs=("doc-a", "doc-b"), answer_mentions_conflict=True)
    assert classify(inputs).error_class == "correct"


def test_hallucination_from_unsupported_claim() -> None:
    verdict = classify(make(unsupported_claims=("Exports are kept for ten years.",), crag_grade=None))
    assert verdict.error_class == "hallucination"
    assert "Exports are kept for ten years." in verdict.evidence


def test_hallucination_from_judge_grade() -> None:
    # graded incorrect, and no per-chunk verdict says the claims are supported: nothing explains it but the answer
    verdict = classify(make(crag_grade="incorrect", supporting_chunk_ids=()))
    assert verdict.error_class == "hallucination"
    assert "incorrect" in verdict.evidence


def test_a_faithful_wrong_answer_is_a_wrong_passage_never_a_hallucination() -> None:
    # every claim supported by a retrieved chunk (c2), the required chunk (c1) retrieved too, and the answer wrong
    verdict = classify(make(crag_grade="incorrect", supporting_chunk_ids=("c2",), cited_chunk_ids=("c2",),
                            retrieved_chunk_ids=("c1", "c2"), required_chunk_ids=("c1",)))
    assert verdict.error_class == "wrong_passage"
    assert verdict.evidence == ("The answer is faithful to the retrieved context but wrong: it rests on c2 [S2], "
                                "not on the required c1 [S1], which was retrieved.")
    # resting on the required chunk itself and graded incorrect: the passage and the reference disagree; the grade decides
    verdict = classify(make(crag_grade="incorrect", supporting_chunk_ids=("c1",), required_chunk_ids=("c1",)))
    assert verdict.error_class == "hallucination" and "incorrect" in verdict.evidence
    # no required citation to tell the right passage from another: the grade decides too
    assert classify(make(crag_grade="incorrect", supporting_chunk_ids=("c2",))).error_class == "hallucination"
    # the required chunk not retrieved: the evidence never reached the answer
    assert classify(make(crag_grade="incorrect", missing_required_citations=("c1",))).error_class == "retrieval_miss"
    # an unsupported claim: a hallucination, whatever supports the others
    assert classify(make(crag_grade="incorrect", unsupported_claims=("x",))).error_class == "hallucination"
    # a false premise answered as if it held is the answer's fault, supported or not
    assert classify(make(crag_grade="incorrect", question_type="false_premise")).error_class == "hallucination"


def test_wrong_passage_beats_citation_and_incomplete() -> None:
    inputs = make(crag_grade="incorrect", cited_chunk_ids=(), unsatisfied_must=("m",), required_chunk_ids=("c9",))
    assert classify(inputs).error_class == "wrong_passage"


def test_false_premise_answered_as_if_it_held() -> None:
    verdict = classify(make(question_type="false_premise", crag_grade="incorrect"))
    assert verdict.error_class == "hallucination"
    assert "false-premise" in verdict.evidence


def test_unanswerable_answered_without_judge_is_hallucination() -> None:
    verdict = classify(make(answerable=False, cited_chunk_ids=(), crag_grade=None))
    assert verdict.error_class == "hallucination"
    assert "unanswerable" in verdict.evidence


def test_unanswerable_answered_and_judged_incorrect() -> None:
    verdict = classify(make(answerable=False, crag_grade="incorrect"))
    assert verdict.error_class == "hallucination"
    assert "unanswerable" in verdict.evidence


def test_citation_error_cites_nothing() -> None:
    verdict = classify(make(cited_chunk_ids=()))
    assert verdict.error_class == "citation_error"
    assert "cites nothing" in verdict.evidence


def test_citation_error_wrong_marker() -> None:
    verdict = classify(make(cited_chunk_ids=("c1", "c9")))
    assert verdict.error_class == "citation_error"
    assert "c9" in verdict.evidence and "c1, c2" in verdict.evidence


def test_unknown_support_only_checks_missing_citations() -> None:
    assert classify(make(cited_chunk_ids=("c9",), supporting_chunk_ids=())).error_class == "correct"


def test_incomplete_unsatisfied_must() -> None:
    verdict = classify(make(unsatisfied_must=("mentions the seven-year period",)))
    assert verdict.error_class == "incomplete"
    assert "mentions the seven-year period" in verdict.evidence


@pytest.mark.parametrize("grade", ["acceptable", "missing"])
def test_incomplete_from_judge_grade(grade) -> None:
    verdict = classify(make(crag_grade=grade))
    assert verdict.error_class == "incomplete"
    assert grade in verdict.evidence


def test_incomplete_abstained_on_answerable() -> None:
    verdict = classify(make(abstained=True, cited_chunk_ids=(), crag_grade="missing"))
    assert verdict.error_class == "incomplete"
    assert "abstained" in verdict.evidence


def test_every_class_is_reachable() -> None:
    produced = {
        classify(x).error_class
        for x in (
            CLEAN,
            make(missing_required_citations=("d",)),
            make(dynamism="slow", stale_cited=("c1",)),
            make(conflicting_docs=("a", "b")),
            make(unsupported_claims=("x",)),
            make(crag_grade="incorrect", required_chunk_ids=("c9",)),
            make(cited_chunk_ids=()),
            make(unsatisfied_must=("m",)),
        )
    }
    assert produced == set(ERROR_CLASSES)


# --------------------------------------------------------------------------
# precedence


def test_retrieval_miss_beats_wrong_answer() -> None:
    inputs = make(
        missing_required_citations=("doc-7",),
        unsupported_claims=("ten years",),
        crag_grade="incorrect",
        cited_chunk_ids=(),
    )
    verdict = classify(inputs)
    assert verdict.error_class == "retrieval_miss"
    assert "doc-7" in verdict.evidence


def test_retrieval_miss_even_when_right() -> None:
    assert classify(make(missing_required_citations=("doc-7",))).error_class == "retrieval_miss"


def test_stale_beats_unsupported() -> None:
    inputs = make(dynamism="fast", stale_cited=("old-3",), unsupported_claims=("the fee is 10 EUR",))
    verdict = classify(inputs)
    assert verdict.error_class == "stale"
    assert "old-3" in verdict.evidence


def test_stale_beats_conflict() -> None:
    inputs = make(dynamism="slow", stale_cited=("old-3",), conflicting_docs=("a", "b"))
    assert classify(inputs).error_class == "stale"


def test_conflict_beats_hallucination() -> None:
    inputs = make(conflicting_docs=("a", "b"), unsupported_claims=("x",))
    assert classify(inputs).error_class == "conflict_mishandled"


def test_hallucination_beats_citation_and_incomplete() -> None:
    inputs = make(unsupported_claims=("x",), cited_chunk_ids=(), unsatisfied_must=("m",), crag_grade="acceptable")
    assert classify(inputs).error_class == "hallucination"


def test_citation_beats_incomplete() -> None:
    assert classify(make(cited_chunk_ids=(), unsatisfied_must=("m",))).error_class == "citation_error"


def test_each_class_beats_all_later_ones() -> None:
    # Turn on every trigger, then switch them off one class at a time.
    triggers = {
        "retrieval_miss": {"missing_required_citations": ("doc-7",)},
        "stale": {"dynamism": "fast", "stale_cited": ("old-3",)},
        "conflict_mishandled": {"conflicting_docs": ("a", "b")},
        "hallucination": {"unsupported_claims": ("x",)},
        "citation_error": {"cited_chunk_ids": ()},
        "incomplete": {"unsatisfied_must": ("m",)},
    }
    switched_off = {
        "retrieval_miss": {"missing_required_citations": ()},
        "stale": {"stale_cited": ()},
        "conflict_mishandled": {"answer_mentions_conflict": True},
        "hallucination": {"unsupported_claims": ()},
        "citation_error": {"cited_chunk_ids": ("c1",)},
        "incomplete": {"unsatisfied_must": ()},
    }
    state: dict = {}
    for changes in triggers.values():
        state.update(changes)
    # wrong_passage needs every claim supported and hallucination's trigger is an unsupported claim: the two never
    # fire together (test_a_faithful_wrong_answer_is_a_wrong_passage_never_a_hallucination covers it)
    for name in [c for c in ERROR_CLASSES[:-1] if c != "wrong_passage"]:
        assert classify(make(**state)).error_class == name
        state.update(switched_off[name])
    assert classify(make(**state)).error_class == "correct"


# --------------------------------------------------------------------------
# abstention edges


def test_abstained_on_unanswerable_is_correct() -> None:
    inputs = make(answerable=False, abstained=True, cited_chunk_ids=(), crag_grade="missing")
    verdict = classify(inputs)
    assert verdict.error_class == "correct"
    assert "unanswerable" in verdict.evidence


def test_abstained_on_unanswerable_ignores_everything_else() -> None:
    inputs = make(
        answerable=False,
        abstained=True,
        missing_required_citations=("doc-1",),
        unsupported_claims=("restated question",),
        stale_cited=("old",),
        dynamism="fast",
        conflicting_docs=("a", "b"),
        unsatisfied_must=("m",),
        cited_chunk_ids=(),
        crag_grade="incorrect",
    )
    assert classify(inputs).error_class == "correct"


def test_abstained_on_answerable_with_missing_evidence_is_retrieval_miss() -> None:
    inputs = make(abstained=True, missing_required_citations=("doc-7",), cited_chunk_ids=(), crag_grade="missing")
    assert classify(inputs).error_class == "retrieval_miss"


def test_abstention_asserts_nothing() -> None:
    # claims, stale sources, conflicts, a missing citation or an 'incorrect' grade on an
    # abstention do not turn it into stale / conflict / hallucination / citation_error
    inputs = make(
        abstained=True,
        unsupported_claims=("the retention period is not in the documents",),
        dynamism="fast",
        stale_cited=("old",),
        conflicting_docs=("a", "b"),
        cited_chunk_ids=(),
        crag_grade="incorrect",
    )
    verdict = classify(inputs)
    assert verdict.error_class == "incomplete"
    assert "abstained" in verdict.evidence


def test_unanswerable_item_ignores_required_citations() -> None:
    inputs = make(answerable=False, abstained=True, missing_required_citations=("doc-7",), crag_grade=None)
    assert classify(inputs).error_class == "correct"


def test_unanswerable_premise_rejected_is_correct_without_citations() -> None:
    inputs = make(answerable=False, question_type="false_premise", cited_chunk_ids=(), crag_grade="perfect")
    assert classify(inputs).error_class == "correct"


def test_unanswerable_judged_missing_or_acceptable_is_correct() -> None:
    for grade in ("missing", "acceptable"):
        assert classify(make(answerable=False, crag_grade=grade)).error_class == "correct"


def test_unanswerable_answer_with_unsatisfied_must_is_incomplete() -> None:
    inputs = make(answerable=False, crag_grade="perfect", unsatisfied_must=("says the corpus does not cover it",))
    assert classify(inputs).error_class == "incomplete"


def test_false_premise_abstained_on_answerable_item_is_incomplete() -> None:
    # the corpus can refute the premise, so abstaining leaves the trap unexposed
    inputs = make(question_type="false_premise", abstained=True, cited_chunk_ids=(), crag_grade="missing")
    assert classify(inputs).error_class == "incomplete"


# --------------------------------------------------------------------------
# inputs and verdicts


def test_inputs_accept_lists_and_normalise_grade() -> None:
    inputs = ClassificationInputs(answerable=True, cited_chunk_ids=["c1"], supporting_chunk_ids=["c1"], crag_grade=" Perfect")
    assert inputs.cited_chunk_ids == ("c1",)
    assert inputs.crag_grade == "perfect"
    assert classify(inputs).error_class == "correct"


def test_inputs_reject_bare_strings_and_unknown_grades() -> None:
    with pytest.raises(TypeError, match="cited_chunk_ids"):
        ClassificationInputs(answerable=True, cited_chunk_ids="c1")
    with pytest.raises(ValueError, match="perfect, acceptable, missing, incorrect"):
        ClassificationInputs(answerable=True, crag_grade="great")


def test_inputs_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CLEAN.abstained = True  # type: ignore[misc]


def test_verdict_rejects_unknown_class() -> None:
    with pytest.raises(ValueError):
        ErrorVerdict("typo", "x")


def test_evidence_truncates_long_lists() -> None:
    verdict = classify(make(missing_required_citations=("d1", "d2", "d3", "d4", "d5")))
    assert "d1, d2, d3 (+2 more)" in verdict.evidence


def test_evidence_is_one_sentence() -> None:
    cases = [
        CLEAN,
        make(missing_required_citations=("doc-7",)),
        make(dynamism="fast", stale_cited=("c1",)),
        make(conflicting_docs=("a", "b")),
        make(unsupported_claims=("x",)),
        make(cited_chunk_ids=()),
        make(unsatisfied_must=("m",)),
        make(answerable=False, abstained=True),
    ]
    for inputs in cases:
        evidence = classify(inputs).evidence
        assert evidence.endswith(".") and evidence[0].isupper()
        assert ". " not in evidence.rstrip(".")
