"""A large golden set is judged in as many Message Batches as the API's limits per batch need, through the
real SDK against the local server; the verdicts come back in request order whatever the split."""

from __future__ import annotations

import json

import pytest
from mock_anthropic import mock_anthropic  # noqa: F401 - fixture
from test_judge_anthropic import grade_by_number, make_judge, relevance

from pytest_crucible.judge import anthropic_judge
from pytest_crucible.judge.types import RelevanceVerdict


@pytest.mark.parametrize("limit", ["requests", "bytes"])
def test_requests_past_a_batch_limit_go_in_further_batches(mock_anthropic, monkeypatch, limit):
    mock_anthropic.responder = grade_by_number
    if limit == "requests":
        monkeypatch.setattr(anthropic_judge, "MAX_BATCH_REQUESTS", 2)
    else:  # room for three request bodies (as the judge counts them: their JSON plus 64 bytes) per batch
        body = make_judge(mock_anthropic, batch=True)._params(relevance(0))
        monkeypatch.setattr(anthropic_judge, "MAX_BATCH_BYTES", 3 * (len(json.dumps(body)) + 64))
    verdicts = make_judge(mock_anthropic, batch=True).judge([relevance(i) for i in range(5)])

    assert mock_anthropic.counts["batches_create"] == (3 if limit == "requests" else 2)
    assert mock_anthropic.counts["messages"] == 0
    sizes = sorted(len(batch["lines"]) for batch in mock_anthropic.batches.values())
    assert sum(sizes) == 5 and max(sizes) <= (2 if limit == "requests" else 3)
    assert all(isinstance(verdict, RelevanceVerdict) for verdict in verdicts)
    assert [(verdict.grade, verdict.reason) for verdict in verdicts] == [(i % 4, f"request {i}") for i in range(5)]
