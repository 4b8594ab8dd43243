"""The answer layer end to end through pytest, with the real anthropic SDK against a local server."""

from __future__ import annotations

import json

import pytest
from helpers import db_rows, point_anthropic_at, return_window_items, returns_conftest, write_project

FAKE_KEY = "sk-ant-test-0000-not-a-real-key-CRUCIBLE"

ITEMS = return_window_items("a", 4)

CONFTEST = returns_conftest("You can return it within 30 days [S1].")


@pytest.fixture
def project(pytester: pytest.Pytester, mock_anthropic, monkeypatch) -> pytest.Pytester:
    # These tests are about the judge's mechanics, not the verdicts: items fail only on errors.
    point_anthropic_at(monkeypatch, mock_anthropic, FAKE_KEY)
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_outcome = record\ncrucible_judge = anthropic")



@pytest.mark.slow
def test_claude_judge_scores_then_the_cache_serves_the_rerun(project: pytest.Pytester, mock_anthropic) -> None:
    result = project.runpytest_subprocess("--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    calls = mock_anthropic.counts["messages"]
    # The plan is 2k+7 = 11 requests per item (44); requests identical across items are judged once.
    judged = int(next(line for line in result.outlines if line.startswith("judge ")).split(" judged")[0].rsplit(" ", 1)[1])
    assert 0 < calls == judged < 44
    result.stdout.fnmatch_lines([
        # Estimated before any answer exists, for k = retrievalLimit = 10 chunks: 4 x (2*10 + 7) requests.
        "crucible: judge cost estimate: 108 requests, ~* input + ~16,200 output tokens, $0.0* with claude-haiku-5-5 (before cache hits)",
        "judge claude-haiku-5-5 via Anthropic API, prompts crucible-v1: 44 requests, * cached, * judged, 0 failed",
        "  cost $0.00* (* in / * out tokens), estimated $0.0*",
    ])
    [(model, prompt, cost, status)] = db_rows(project, "SELECT judge_model, judge_prompt_version, cost_usd, status FROM runs")
    assert (model, prompt, status) == ("claude-haiku-5-5", "crucible-v1", "complete") and cost > 0
    assert db_rows(project, "SELECT COUNT(DISTINCT metric) FROM item_metrics WHERE metric IN "
                         "('faithfulness','responseRelevancy','contextPrecision','contextRecall','noiseSensitivity')") == [(5,)]

    # Second run over unchanged items: zero judge requests reach the API.
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK
    assert mock_anthropic.counts["messages"] == calls
    result.stdout.fnmatch_lines(["judge claude-haiku-5-5 via Anthropic API, prompts crucible-v1: 44 requests, 44 cached, 0 judged, 0 failed*"])

    # The key went to the API and nowhere else.
    assert any(FAKE_KEY in json.dumps(headers) for headers in mock_anthropic.headers_received())
    db_bytes = b"".join(p.read_bytes() for p in (project.path / ".crucible").iterdir())
    assert FAKE_KEY.encode() not in db_bytes
    assert FAKE_KEY not in (project.path / "junit.xml").read_text()
    assert FAKE_KEY not in result.stdout.str() + result.stderr.str()


@pytest.mark.slow
def test_message_batches_judge_everything_at_session_end(project: pytest.Pytester, mock_anthropic) -> None:
    result = project.runpytest_subprocess("--crucible-judge-batch")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert mock_anthropic.counts["messages"] == 0
    assert mock_anthropic.counts["batches_create"] == 2  # one batch per round
    result.stdout.fnmatch_lines(["*(Message Batches, 50% off)*"])
    # Progress while the batches are processed, one line per poll at most every 10 s, and the end.
    result.stdout.fnmatch_lines(["crucible: Message Batch 1 for 4 items (msgbatch_*): 0/* judge requests (0%), elapsed *",
                                 "crucible: Message Batch 1 for 4 items (msgbatch_*): */* judge requests (100%), elapsed *",
                                 "crucible: Message Batch 2 for 4 items (msgbatch_*): */* judge requests (100%), elapsed *"])
    assert db_rows(project, "SELECT COUNT(*) FROM item_metrics WHERE metric = 'faithfulness'") == [(4,)]
    assert db_rows(project, "SELECT status FROM runs") == [("complete",)]


@pytest.mark.slow
def test_persistent_judge_failure_is_an_item_error_and_the_run_is_incomplete(project: pytest.Pytester, mock_anthropic) -> None:
    mock_anthropic.fail_status(500, times=10_000)
    result = project.runpytest_subprocess("--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(["*golden item a-0: judge failed after retries: *500*"])
    assert db_rows(project, "SELECT status FROM runs") == [("incomplete",)]
    assert db_rows(project, "SELECT COUNT(*) FROM results WHERE outcome = 'error' AND judge_errors != '[]'") == [(4,)]
    # Retrieval metrics were still measured; judge metrics of the failed items are absent, not zero.
    assert db_rows(project, "SELECT COUNT(*) FROM item_metrics WHERE metric = 'faithfulness'") == [(0,)]
    assert db_rows(project, "SELECT COUNT(*) FROM item_metrics WHERE metric = 'ndcgAt10'") == [(4,)]
    # Failures are not cached: once the API recovers, the next run judges everything.
    mock_anthropic.faults["messages"].clear()
    assert project.runpytest_subprocess().ret == pytest.ExitCode.OK


@pytest.mark.slow
def test_max_cost_refuses_to_start(project: pytest.Pytester, mock_anthropic) -> None:
    result = project.runpytest_subprocess("--crucible-max-cost=0.00001")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-max-cost=1e-05: the estimated judge cost $0.0* exceeds it; the run was not started"])
    assert mock_anthropic.counts["messages"] == 0
    assert not (project.path / ".crucible").exists()


def test_anthropic_judge_without_a_key_is_a_usage_error(project: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = project.runpytest("--crucible-judge=anthropic")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-judge=anthropic needs an API key: ANTHROPIC_API_KEY is not set"])


@pytest.mark.slow
def test_auto_without_a_key_uses_the_offline_judge_and_names_it(project: pytest.Pytester, monkeypatch, mock_anthropic) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = project.runpytest_subprocess("--crucible-judge=auto")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["judge lexical-v3 (offline heuristic): *"])
    assert mock_anthropic.counts["messages"] == 0
    assert db_rows(project, "SELECT judge_model FROM runs") == [("lexical-v3",)]


@pytest.mark.slow
def test_example_project_rerun_makes_zero_claude_requests(tmp_path, mock_anthropic, monkeypatch) -> None:
    pytest.importorskip("bm25s", reason="the example project needs the example extra")
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "example_project"
    point_anthropic_at(monkeypatch, mock_anthropic, FAKE_KEY)
    command = [sys.executable, "-m", "pytest", str(example), f"--crucible-db={tmp_path / 'e.db'}", "--crucible-judge=anthropic", "-p", "no:cacheprovider"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:]
    calls = mock_anthropic.counts["messages"]
    assert calls > 100
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:]
    assert mock_anthropic.counts["messages"] == calls  # nothing new reached the API
    line = next(line for line in second.stdout.splitlines() if line.startswith("judge "))
    requests = int(line.split(": ")[1].split(" requests")[0])
    assert f"{requests} requests, {requests} cached, 0 judged, 0 failed" in line
