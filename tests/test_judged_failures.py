"""Strict mode and the judge: an item that fails on a judged verdict alone names the judge and how far it
agrees with people (or that it was never calibrated), and quotes the claim with the passage it was checked
against; a correct answer copied word for word from its passage is never a red test."""

from __future__ import annotations

import json

import pytest
from helpers import crucible_cli, write_project

PASSAGE = ("Items the libraries do not own can be requested. Each request costs 20 kroner, charged when the item "
           "arrives. Non-residents pay 100 kroner a year.")
ITEMS = [
    {"id": "copy", "question": "What does a request cost?", "reference": "Each request costs 20 kroner.",
     "citations": [{"docId": "rules", "chunkId": "rules#p1"}]},
    {"id": "invented", "question": "What does a request cost?", "reference": "Each request costs 20 kroner.",
     "citations": [{"docId": "rules", "chunkId": "rules#p1"}]},
]
CONFTEST = f'''
import pytest

PASSAGE = {PASSAGE!r}
ANSWERS = {{
    "copy": "Each request costs 20 kroner, charged when the item arrives. [S1]",
    "invented": "Requests are delivered by drone within one hour. [S1]",
}}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        return {{"answer": ANSWERS[item.id], "retrieved": [{{"chunk_id": "rules#p1", "doc_id": "rules", "text": PASSAGE}}]}}
    return pipeline
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_judge = lexical")


def failure_text(result: pytest.RunResult, item: str) -> str:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f"golden item {item}" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("_", "="))), len(lines))
    return "\n".join(lines[start:end])


def test_a_copied_answer_passes_and_an_invented_one_names_the_uncalibrated_judge(project: pytest.Pytester) -> None:
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)  # the copy passes though its neighbour says "not" and "Non-"
    text = failure_text(result, "invented")
    assert "hallucination" in text
    assert "judged by lexical-v3, never calibrated: crucible judge calibrate LABELS.jsonl measures" in text
    assert "claim 'Requests are delivered by drone within one hour.' checked against passage 1, sentence" in text
    assert "Each request costs 20 kroner" in text or "Items the libraries do not own" in text  # the passage quoted


def test_after_a_calibration_the_failure_quotes_the_judges_kappa(project: pytest.Pytester) -> None:
    labels = project.path / "labels.jsonl"
    cases = [{"id": f"c{i}", "question": "What does a request cost?", "contexts": [PASSAGE],
              "answer": answer, "reference": "Each request costs 20 kroner.", "labels": {"faithful": faithful}}
             for i, (answer, faithful) in enumerate([("Each request costs 20 kroner.", True),
                                                     ("Requests are free.", False),
                                                     ("Non-residents pay 100 kroner a year.", True),
                                                     ("Requests arrive by drone.", False)])]
    labels.write_text("".join(json.dumps(case) + "\n" for case in cases))
    calibrated = crucible_cli("judge", "calibrate", labels, "--db", project.path / ".crucible" / "crucible.db")
    assert calibrated.ret == 0, calibrated.errlines
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = failure_text(result, "invented")
    assert "judged by lexical-v3, faithful agreement with people kappa 1.00 (calibrated 20" in text
    assert "below 0.6" not in text



def test_a_judge_below_the_bar_is_named_with_its_kappa_and_one_that_decided_nothing_is_not() -> None:
    from types import SimpleNamespace

    from pytest_crucible.evaluation import judged_evidence

    score = SimpleNamespace(error_class="hallucination", retrieved=[{"text": PASSAGE}],
                            verdicts={"faithfulness": {"claims": ["Requests are free."], "supported": [False],
                                                       "reasons": ["negation differs in passage 1, sentences 2-3"]}})
    calibration = {"kappa_faithful": 0.25, "kappa_crag": 0.69, "created_at": "2026-12-02T10:00:00Z", "figures": {}}
    first, claim = judged_evidence(score, "lexical-v3", calibration)
    assert first == ("judged by lexical-v3, faithful agreement with people kappa 0.25, below 0.6: check the verdict "
                     "yourself (calibrated 2026-12-02) (docs/judge-calibration.md)")
    assert claim.startswith("  claim 'Requests are free.' checked against passage 1, sentences 2-3: 'Each request costs")
    undefined = {**calibration, "kappa_faithful": None,
                 "figures": {"faithful": {"kappaUndefined": "your labels have no 'false' cases"}}}
    assert "kappa not measurable (your labels have no 'false' cases)" in judged_evidence(score, "lexical-v3", undefined)[0]
    # A retrieval miss, or no judge at all: nothing to add.
    assert judged_evidence(SimpleNamespace(**{**vars(score), "error_class": "retrieval_miss"}), "lexical-v3", None) == []
    assert judged_evidence(score, None, None) == []


def test_the_run_records_its_embedder_and_a_baseline_with_another_one_leaves_relevancy_out(pytester: pytest.Pytester) -> None:
    conftest = CONFTEST + '''
import os
from pytest_crucible.judge.embed import HashingEmbedder, default_embedder

@pytest.fixture(scope="session")
def crucible_embedder():
    return HashingEmbedder() if os.environ.get("OLD_EMBEDDER") else default_embedder()
'''
    items = [{**ITEMS[0], "id": f"copy-{i}"} for i in range(8)]
    project = write_project(pytester, items, conftest.replace('ANSWERS[item.id]', 'ANSWERS["copy"]'),
                            ini="crucible_judge = lexical\ncrucible_outcome = record")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OLD_EMBEDDER", "1")
        assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*the ruler changed: responseRelevancy was measured with embedder hashing-v1 in * and "
                                 "wordllama-l2-supercat-256 in *"])
    from helpers import db_rows

    assert db_rows(project, "SELECT embedder FROM runs ORDER BY rowid") == [("hashing-v1",), ("wordllama-l2-supercat-256",)]
