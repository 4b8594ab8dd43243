"""Concurrent pipeline calls: results land on the right items, errors stay local, only selected items are called."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import write_golden

N = 24
ITEMS = [{"id": f"c-{i:02d}", "question": f"question {i}", "citations": [{"docId": f"doc{i}"}]} for i in range(N)]

CONFTEST = """
import asyncio, json, os, threading, time
import pytest

CALLS = os.path.join(os.path.dirname(__file__), "calls.jsonl")
lock = threading.Lock()
state = {"in_flight": 0, "max": 0}

class RateLimitError(Exception):
    status_code = 429

def record(item_id):
    with lock, open(CALLS, "a") as fh:
        fh.write(json.dumps({"id": item_id, "max": state["max"]}) + "\\n")

def result_for(item):
    n = int(item.id.split("-")[1])
    if n == 5:
        raise ValueError("boom on c-05 only")
    return {"answer": None, "retrieved": [{"chunk_id": f"doc{n}#1", "doc_id": f"doc{n}"}, {"chunk_id": "x#1", "doc_id": "x"}]}

@pytest.fixture(scope="session")
def crucible_pipeline():
    limited = {"left": int(os.environ.get("RATE_LIMITS", "0"))}
    if os.environ.get("ASYNC") == "1":
        async def pipeline(question, *, item, config, mode):
            with lock:
                state["in_flight"] += 1; state["max"] = max(state["max"], state["in_flight"])
            await asyncio.sleep(0.05)
            with lock:
                state["in_flight"] -= 1
            record(item.id)
            return result_for(item)
        return pipeline

    def pipeline(question, *, item, config, mode):
        with lock:
            if limited["left"] > 0:
                limited["left"] -= 1
                raise RateLimitError("slow down")
            state["in_flight"] += 1; state["max"] = max(state["max"], state["in_flight"])
        time.sleep(0.05)
        with lock:
            state["in_flight"] -= 1
        record(item.id)
        return result_for(item)
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    write_golden(pytester.path / "golden_many.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\n")
    return pytester


def calls(pytester) -> list[dict]:
    path = pytester.path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stored(pytester) -> dict[str, float]:
    conn = sqlite3.connect(pytester.path / ".crucible" / "crucible.db")
    try:
        return dict(conn.execute("SELECT item_id, value FROM item_metrics WHERE metric = 'mrr'"))
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("async_pipeline", ["0", "1"], ids=["sync", "async"])
def test_results_land_on_the_right_items_and_errors_stay_local(project, monkeypatch, async_pipeline) -> None:
    monkeypatch.setenv("ASYNC", async_pipeline)
    result = project.runpytest_subprocess("--crucible-concurrency=8", "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=N - 1, failed=1)
    result.stdout.fnmatch_lines(["*golden_many.jsonl::c-05 FAILED*", "*ValueError: boom on c-05 only*"])
    # Each item got its own result: every item's relevant doc is its own, at rank 1.
    metrics = stored(project)
    assert set(metrics) == {item["id"] for item in ITEMS} - {"c-05"} and set(metrics.values()) == {1.0}
    made = calls(project)
    assert sorted(c["id"] for c in made) == sorted(item["id"] for item in ITEMS)  # each item called exactly once
    assert max(c["max"] for c in made) > 1  # calls really overlapped
    assert max(c["max"] for c in made) <= 8


@pytest.mark.slow
def test_deselected_items_are_never_called(project) -> None:
    result = project.runpytest_subprocess("--crucible-concurrency=8", "-k", "c-1")
    result.assert_outcomes(passed=10)
    assert sorted(c["id"] for c in calls(project)) == [f"c-{i}" for i in range(10, 20)]


@pytest.mark.slow
def test_rate_limits_back_off_instead_of_failing(project, monkeypatch) -> None:
    monkeypatch.setenv("RATE_LIMITS", "6")
    result = project.runpytest_subprocess("--crucible-concurrency=4", "-k", "not c-05")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=N - 1)
    assert len(calls(project)) == N - 1


@pytest.mark.slow
def test_same_rows_as_one_at_a_time(project, pytester) -> None:
    project.runpytest_subprocess("-k", "not c-05")
    serial = stored(project)
    (project.path / ".crucible" / "crucible.db").unlink()
    project.runpytest_subprocess("-k", "not c-05", "--crucible-concurrency=6")
    assert stored(project) == serial


def test_bad_concurrency_is_a_usage_error(project) -> None:
    result = project.runpytest("--crucible-concurrency=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-concurrency=0: expected a positive integer", "HINT: --crucible-concurrency=16"])
