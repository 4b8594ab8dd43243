"""Each error class, produced from a crafted golden item and pipeline result through the real
scoring path (retrieval scoring, the lexical judge's answer layer, the classifier)."""

from __future__ import annotations

import pytest

from pytest_crucible.evaluation.answers import AnswerInputs, score_answers
from pytest_crucible.evaluation.pipeline import PipelineResult
from pytest_crucible.evaluation.scoring import classify_score, score_item
from pytest_crucible.golden_set.schema import GoldenItem
from pytest_crucible.judge.embed import HashingEmbedder
from pytest_crucible.judge.engine import JudgeEngine
from pytest_crucible.judge.lexical import LexicalJudge

RETURNS = {"chunk_id": "returns#p1", "doc_id": "returns", "text": "Bikes can be returned within 30 days of delivery."}
RETURNS_OLD = {"chunk_id": "returns-2024#p1", "doc_id": "returns-2024", "text": "Bikes can be returned within 14 days of delivery.",
               "metadata": {"superseded_by": "returns"}}
RETURNS_EU = {"chunk_id": "returns-eu#p1", "doc_id": "returns-eu", "text": "In the EU, bikes can be returned within 60 days of delivery."}
SHIPPING = {"chunk_id": "ship#p1", "doc_id": "ship", "text": "Orders ship within five working days."}


def classify(item: dict, result: dict) -> tuple[str, str]:
    golden = GoldenItem.model_validate({"question": "How long do I have to return a bike?", **item})
    score = score_item(golden, PipelineResult.model_validate(result), k=10)
    plain = score.to_plain()
    [answer] = score_answers([AnswerInputs.from_score(plain)], JudgeEngine(LexicalJudge()), HashingEmbedder())
    plain.update(assertions=answer.assertions, crag_grade=answer.crag_grade, unsupported_claims=answer.unsupported_claims,
                 supporting_chunk_ids=answer.supporting_chunk_ids)
    return classify_score(plain, mode="system", today="2026-11-30")


REFERENCE = {"reference": "Bikes can be returned within 30 days of delivery.",
             "assertions": [{"text": "Bikes can be returned within 30 days.", "kind": "must"}]}


def test_correct() -> None:
    assert classify({"id": "c", **REFERENCE, "citations": [{"docId": "returns"}]},
                    {"answer": "Bikes can be returned within 30 days of delivery [S1].", "retrieved": [RETURNS, SHIPPING]})[0] == "correct"


def test_retrieval_miss_even_when_the_answer_is_also_wrong() -> None:
    error_class, evidence = classify({"id": "r", **REFERENCE, "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
                                     {"answer": "Orders ship within five working days [S1].", "retrieved": [SHIPPING]})
    assert error_class == "retrieval_miss" and "returns#p1" in evidence


def test_stale_source() -> None:
    error_class, evidence = classify({"id": "s", **REFERENCE, "dynamism": "slow", "citations": [{"docId": "returns", "mode": "acceptable"}]},
                                     {"answer": "Bikes can be returned within 14 days of delivery [S1].", "retrieved": [RETURNS_OLD, RETURNS]})
    assert error_class == "stale" and "returns-2024#p1" in evidence


def test_conflict_mishandled() -> None:
    error_class, evidence = classify({"id": "k", **REFERENCE, "conflictingSources": ["returns", "returns-eu"],
                                      "citations": [{"docId": "returns"}]},
                                     {"answer": "Bikes can be returned within 30 days of delivery [S1].", "retrieved": [RETURNS, RETURNS_EU]})
    assert error_class == "conflict_mishandled" and "returns-eu" in evidence
    # Surfacing both sources is the right answer.
    assert classify({"id": "k", **REFERENCE, "conflictingSources": ["returns", "returns-eu"], "citations": [{"docId": "returns"}]},
                    {"answer": "Bikes can be returned within 30 days of delivery [S1]. In the EU, bikes can be returned within 60 days of delivery [S2].",
                     "retrieved": [RETURNS, RETURNS_EU]})[0] != "conflict_mishandled"


def test_hallucination() -> None:
    error_class, evidence = classify({"id": "h", **REFERENCE, "citations": [{"docId": "returns"}]},
                                     {"answer": "Bikes can be returned within 90 days of delivery [S1].", "retrieved": [RETURNS]})
    assert error_class == "hallucination" and "90 days" in evidence


def test_citation_error() -> None:
    error_class, _evidence = classify({"id": "e", "citations": [{"docId": "returns"}]},
                                     {"answer": "Bikes can be returned within 30 days of delivery.", "retrieved": [RETURNS]})
    assert error_class == "citation_error"


def test_incomplete() -> None:
    item = {"id": "i", "reference": "Bikes can be returned within 30 days of delivery. Refunds take 5 days.",
            "assertions": [{"text": "Bikes can be returned within 30 days.", "kind": "must"},
                           {"text": "Refunds take 5 days.", "kind": "must"}], "citations": [{"docId": "returns"}]}
    error_class, evidence = classify(item, {"answer": "Bikes can be returned within 30 days of delivery [S1].", "retrieved": [RETURNS]})
    assert error_class == "incomplete" and "Refunds take 5 days." in evidence


@pytest.mark.parametrize("answerable, expected", [(False, "correct"), (True, "incomplete")])
def test_abstentions(answerable, expected) -> None:
    item = {"id": "a", "answerable": answerable, **({} if not answerable else REFERENCE)}
    assert classify(item, {"answer": "I don't know.", "abstained": True, "retrieved": [SHIPPING]})[0] == expected


def test_a_verbatim_sentence_of_the_wrong_retrieved_chunk_is_a_wrong_passage() -> None:
    # The answer copies another retrieved chunk word for word (faithful: every claim supported); the required chunk
    # was retrieved too. The fault is which passage was picked, not the generator's grounding.
    error_class, evidence = classify({"id": "w", **REFERENCE, "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
                                     {"answer": "Orders ship within five working days [S2].", "retrieved": [RETURNS, SHIPPING]})
    assert error_class == "wrong_passage"
    assert evidence.startswith("The answer is faithful to the retrieved context but wrong: it rests on ship#p1 [S2], "
                               "not on the required returns#p1 [S1], which was retrieved.")
    # a claim no chunk supports is still a hallucination
    assert classify({"id": "h", **REFERENCE, "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
                    {"answer": "Bikes can be returned within 90 days, and refunds are paid in gold [S1].",
                     "retrieved": [RETURNS, SHIPPING]})[0] == "hallucination"


def test_a_comparison_with_a_run_classed_by_the_first_class_set_says_so(pytester: pytest.Pytester) -> None:
    from helpers import COMPONENT_RECORD, RANKED_CONFTEST, db_rows, numbered_items, write_project

    project = write_project(pytester, numbered_items(8), RANKED_CONFTEST, ini=COMPONENT_RECORD)
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert db_rows(project, "SELECT error_classes FROM runs") == [(2,)]
    import sqlite3

    with sqlite3.connect(project.path / ".crucible" / "crucible.db") as conn:  # as a run recorded before schema 16 reads
        conn.execute("UPDATE runs SET error_classes = NULL")
    result = project.runpytest("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["WARNING the error classes changed between the runs (class set 1 in *, 2 in *): since set 2 an answer*"])
