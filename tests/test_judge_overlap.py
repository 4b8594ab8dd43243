"""A judge-bound run keeps --crucible-concurrency judge requests in flight: the items are judged ahead of
their tests, several at a time, by the real anthropic SDK against the local Messages double. What the
user relies on: the same scores and verdicts as a run judged one item after the other, the provider
never asked for more than N requests at once, and a judge outage still failing every item."""

from __future__ import annotations

import json
import re

import pytest
from helpers import db_rows, point_anthropic_at, write_project

FAKE_KEY = "sk-ant-test-0000-not-a-real-key-OVERLAP"

ITEMS = [
    {"id": f"o-{i:02d}", "question": f"How long does item {i} take to ship?", "reference": f"Item {i} ships in {i % 5 + 1} days.",
     "citations": [{"docId": f"doc{i}", "chunkId": f"doc{i}#1"}]}
    for i in range(16)
]

CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        text = f"Item {n} ships in {n % 5 + 1} days from the central warehouse."
        return {"answer": text + " [S1]", "retrieved": [{"chunk_id": f"doc{n}#1", "doc_id": f"doc{n}", "text": text}],
                "confidence": 0.8}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester, mock_anthropic, monkeypatch) -> pytest.Pytester:
    point_anthropic_at(monkeypatch, mock_anthropic, FAKE_KEY)
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_outcome = record\ncrucible_judge = anthropic")


def stored_scores(project: pytest.Pytester, db: str) -> list[tuple]:
    return db_rows(project.path / db, "SELECT item_id, metric, value FROM item_metrics ORDER BY item_id, metric")


def which_item(body) -> str:
    found = re.search(r"[Ii]tem (\d+)", json.dumps(body))
    return found.group(1) if found else "?"


def test_items_are_judged_together_with_the_same_scores_as_one_at_a_time(project: pytest.Pytester, mock_anthropic) -> None:
    mock_anthropic.response_delay = 0.02  # long enough for requests to wait together
    mock_anthropic.flight_key = which_item
    serial = project.runpytest_subprocess("--crucible-db=serial.db")
    assert serial.ret == pytest.ExitCode.OK
    assert mock_anthropic.max_labels_in_flight == 1  # one item after the other
    assert mock_anthropic.max_in_flight <= 4  # the judge's default requests in flight

    mock_anthropic.max_in_flight = mock_anthropic.max_labels_in_flight = 0
    overlapped = project.runpytest_subprocess("--crucible-db=overlap.db", "--crucible-concurrency=8")
    assert overlapped.ret == pytest.ExitCode.OK
    overlapped.assert_outcomes(passed=len(ITEMS))
    # Several items' requests waited on the provider together, never more than --crucible-concurrency.
    assert mock_anthropic.max_labels_in_flight > 1
    assert 4 < mock_anthropic.max_in_flight <= 8
    scores = stored_scores(project, "overlap.db")
    assert {metric for _, metric, _ in scores} >= {"faithfulness", "contextRecall", "responseRelevancy"}
    assert scores == stored_scores(project, "serial.db")
    outcomes = "SELECT item_id, outcome, error_class FROM results ORDER BY item_id"
    assert db_rows(project.path / "overlap.db", outcomes) == db_rows(project.path / "serial.db", outcomes)


def test_a_judge_outage_still_fails_every_item_when_judged_ahead(project: pytest.Pytester, mock_anthropic) -> None:
    mock_anthropic.fail_status(500, times=100_000)
    result = project.runpytest_subprocess("--crucible-concurrency=8", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=len(ITEMS))
    result.stdout.fnmatch_lines(["*golden item o-00: judge failed after retries: *500*"])
    assert db_rows(project, "SELECT status FROM runs") == [("incomplete",)]
    assert db_rows(project, "SELECT COUNT(*) FROM item_metrics WHERE metric = 'faithfulness'") == [(0,)]


def test_concurrency_sets_a_model_judges_requests_in_flight(monkeypatch) -> None:
    pytest.importorskip("anthropic")
    from pytest_crucible.defaults import JUDGE_REQUESTS_IN_FLIGHT
    from pytest_crucible.judge.select import make_judge

    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    assert make_judge("anthropic", concurrency=32).max_concurrency == 32
    assert make_judge("anthropic").max_concurrency == JUDGE_REQUESTS_IN_FLIGHT
    assert make_judge("anthropic", concurrency=2).max_concurrency == JUDGE_REQUESTS_IN_FLIGHT
    assert make_judge("anthropic").overlaps is True
    # The offline judges compute on this machine's cores: threads would not make them faster.
    assert make_judge("lexical", concurrency=32).overlaps is False
