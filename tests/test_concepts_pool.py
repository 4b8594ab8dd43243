"""Concept anchoring, assertion results and pool labelling, end to end and by hand."""

from __future__ import annotations

import json

import pytest
from helpers import db_rows

from pytest_crucible.evaluation.answers import AnswerInputs, assertion_results, assertion_satisfaction, unsatisfied_must_assertions
from pytest_crucible.evaluation.pipeline import PipelineResult
from pytest_crucible.evaluation.scoring import concept_metrics
from pytest_crucible.golden_set.schema import GoldenItem

ITEM = {
    "id": "vela-range", "question": "How far does the Vela E2 go on one charge?",
    "reference": "The Vela E2 has a range of 80 km.",
    "assertions": [{"text": "The range is 80 km.", "kind": "must", "conceptId": "concept:vela-e2"},
                   {"text": "Range drops in cold weather.", "kind": "should", "weight": 0.5}],
    "citations": [{"docId": "prod-vela-e2", "chunkId": "prod-vela-e2#p2"}],
    "concepts": [{"id": "concept:vela-e2", "grade": "required"}, {"id": "concept:vela-e3", "grade": "irrelevant"}],
}

CONFTEST = """
import os
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        detected = ["concept:vela-e2"] if os.environ.get("DETECT") == "1" else []
        retrieved = [
            {"chunk_id": "prod-vela-e2#p2", "doc_id": "prod-vela-e2", "text": "The range is 80 km on one charge.",
             "metadata": {"concepts": ["concept:vela-e2"]}},
            {"chunk_id": "prod-vela-e3#p2", "doc_id": "prod-vela-e3", "text": "The Vela E3 range is 110 km.",
             "metadata": {"concepts": ["concept:vela-e3"]}},
        ]
        answer = None if mode == "component" else "The range is 80 km [S1]."
        return {"answer": answer, "retrieved": retrieved, "detected_concepts": detected}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (pytester.path / "golden_cars.jsonl").write_text(json.dumps(ITEM) + "\n")
    pytester.makeconftest(CONFTEST)
    return pytester



@pytest.mark.slow
def test_stated_fact_without_its_concept_is_unsatisfied_and_says_which_concept(project, monkeypatch) -> None:
    monkeypatch.setenv("DETECT", "0")
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*golden item vela-range: incomplete: *must-assertion 'The range is 80 km.' is stated but its concept "
        "concept:vela-e2 was not detected by the pipeline (the answer is not grounded in it)*",
    ])
    [(stored,)] = db_rows(project, "SELECT assertions FROM results")
    must, should = json.loads(stored)
    assert (must["supported"], must["conceptDetected"], must["satisfied"]) == (True, False, False)
    assert should["conceptDetected"] is None and should["satisfied"] is False  # not stated by the answer
    metrics = dict(db_rows(project, "SELECT metric, value FROM item_metrics"))
    assert metrics["conceptRecall"] == 0.0
    assert metrics["nearMissRate"] == 0.5  # one of two retrieved chunks is about the irrelevant Vela E3
    assert metrics["assertionSatisfaction"] == 0.0
    assert db_rows(project, "SELECT concept_id, grade FROM golden_concepts ORDER BY concept_id") == [
        ("concept:vela-e2", "required"), ("concept:vela-e3", "irrelevant")]


@pytest.mark.slow
def test_detected_concept_satisfies_the_assertion(project, monkeypatch) -> None:
    monkeypatch.setenv("DETECT", "1")
    result = project.runpytest_subprocess("--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.OK
    [(stored,)] = db_rows(project, "SELECT assertions FROM results")
    assert json.loads(stored)[0]["satisfied"] is True
    metrics = dict(db_rows(project, "SELECT metric, value FROM item_metrics"))
    assert metrics["conceptRecall"] == 1.0
    assert metrics["assertionSatisfaction"] == pytest.approx(1.0 / 1.5)  # must (1.0) satisfied, should (0.5) not stated


@pytest.mark.slow
def test_pool_labelling_writes_llm_judgments_and_the_rerun_asks_nothing(project) -> None:
    result = project.runpytest_subprocess("--crucible-mode=component", "--crucible-label-pool")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "judge lexical-v3 (offline heuristic): 1 requests, 0 cached, 1 judged, 0 failed",
        "qrels for the retrieved pool (top 10): 1 provenance, 0 human, 1 llm; 0 unjudged (0%)",
    ])
    [(chunk, grade, model, prompt)] = db_rows(project, "SELECT chunk_id, grade, judge_model, prompt_version FROM qrels WHERE source = 'llm'")
    assert (chunk, model, prompt) == ("prod-vela-e3#p2", "lexical-v3", "lexical-v3") and 0 <= grade <= 3
    result = project.runpytest_subprocess("--crucible-mode=component", "--crucible-label-pool")
    result.stdout.fnmatch_lines(["judge lexical-v3 (offline heuristic): 0 requests, 0 cached, 0 judged, 0 failed"])
    assert db_rows(project, "SELECT COUNT(*) FROM qrels WHERE source = 'llm'") == [(1,)]


def test_without_labelling_the_pool_reports_what_is_unjudged(project) -> None:
    result = project.runpytest("--crucible-mode=component")
    result.stdout.fnmatch_lines(["qrels for the retrieved pool (top 10): 1 provenance, 0 human, 0 llm; 1 unjudged (50%)",
                                 "  unjudged chunks count as non-relevant, as trec_eval does (--crucible-label-pool grades them)"])


@pytest.mark.slow
def test_pool_labelling_through_claude_makes_zero_requests_the_second_time(project, mock_anthropic, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    claude = ("--crucible-mode=component", "--crucible-label-pool", "--crucible-judge=anthropic")
    assert project.runpytest_subprocess(*claude).ret == pytest.ExitCode.OK
    assert mock_anthropic.counts["messages"] == 1
    assert db_rows(project, "SELECT judge_model, prompt_version FROM qrels WHERE source = 'llm'") == [("claude-haiku-5-5", "umbrela-v1")]
    # A fresh cache cannot be what saves the second run: the ledger itself says the chunk is judged.
    assert project.runpytest_subprocess(*claude, "--crucible-judge-cache=off").ret == 0
    assert mock_anthropic.counts["messages"] == 1


def test_concept_metrics_by_hand() -> None:
    item = GoldenItem.model_validate(ITEM)
    result = PipelineResult.model_validate({
        "retrieved": [{"chunk_id": "a", "doc_id": "d", "metadata": {"concepts": ["concept:vela-e3"]}},
                      {"chunk_id": "b", "doc_id": "d"}, {"chunk_id": "c", "doc_id": "d", "metadata": {"concepts": ["concept:vela-e3"]}}],
        "detected_concepts": ["concept:vela-e2", "concept:other"]})
    assert concept_metrics(item, result, k=10) == {"conceptRecall": 1.0, "nearMissRate": 2 / 3}
    assert concept_metrics(item, result, k=1) == {"conceptRecall": 1.0, "nearMissRate": 1.0}
    plain = GoldenItem(id="x", question="q")
    assert concept_metrics(plain, result, k=10) == {}  # no concepts defined: nothing to score


def test_assertion_rules_by_hand() -> None:
    inputs = AnswerInputs(item_id="x", question="q", answer="a", abstained=False, contexts=(), reference=None,
                          assertions=(("A", "must", 1.0, "c1"), ("B", "must", 2.0, None), ("C", "should", 1.0, "c2")),
                          detected_concepts=frozenset({"c2"}))
    results = assertion_results(inputs, [True, False, True])
    assert [r["satisfied"] for r in results] == [False, False, True]
    assert assertion_satisfaction(results) == pytest.approx(1 / 4)
    reasons = unsatisfied_must_assertions(results)
    assert reasons == [
        "must-assertion 'A' is stated but its concept c1 was not detected by the pipeline (the answer is not grounded in it)",
        "must-assertion 'B' is not stated by the answer",
    ]


@pytest.mark.slow
def test_pool_labelling_in_batch_mode_asks_directly_while_the_test_runs(project, mock_anthropic, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    result = project.runpytest_subprocess("--crucible-mode=component", "--crucible-label-pool", "--crucible-judge=anthropic",
                                          "--crucible-judge-batch")
    assert result.ret == pytest.ExitCode.OK
    # One relevance grade, asked through the Messages API: no per-item Message Batch to wait for.
    assert (mock_anthropic.counts["messages"], mock_anthropic.counts["batches_create"]) == (1, 0)
    assert db_rows(project, "SELECT COUNT(*) FROM qrels WHERE source = 'llm'") == [(1,)]
