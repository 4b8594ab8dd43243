"""Judge faults through pytest itself: every item is scored or reported as an error, nothing is
dropped or silently passed, the run is marked incomplete when anything errored, and the gate
refuses to compare an incomplete run unless --crucible-allow-incomplete is given.

The real anthropic SDK in a pytest subprocess talks to tests/mock_anthropic.py on 127.0.0.1;
rules there decide, per request and per attempt, which fault it gets. (The judge's own unit
tests, tests/test_judge_anthropic.py, cover each fault kind against AnthropicJudge directly.)
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from helpers import db_rows, write_golden
from mock_anthropic import Fault, MockRequest, default_verdict

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-ant-test-reliability-0000-not-a-real-key"
N = 8
ITEMS = [
    {"id": f"a-{i}", "question": f"[a-{i}] What is the return window?", "reference": f"[a-{i}] The return window is 30 days.",
     "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}
    for i in range(N)
]
ANSWER_METRICS = ("faithfulness", "responseRelevancy", "contextPrecision", "contextRecall", "noiseSensitivity")

# Every answer names its item, so every judge request of an item is its own (the engine
# shares identical requests between items) and a rule can aim a fault at one item.
CONFTEST = """
import os
import pytest
from pytest_crucible.judge import anthropic_judge

# A short HTTP timeout, so a hung request times out in half a second; the retry budget is the
# judge's own (4) unless a test asks for the SDK's default (2) to make persistent faults quick.
anthropic_judge.AnthropicJudge.__init__.__kwdefaults__.update(timeout=0.5, max_retries=int(os.environ.get("JUDGE_RETRIES", "4")),
                                                        poll_interval=0.05)  # batches end at their second poll: no 2 s waits

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        if item.id == os.environ.get("INTERRUPT_AT"):
            raise KeyboardInterrupt
        chunks = [("returns#p1", "returns", "The return window is 30 days from delivery."),
                  ("ship#p1", "ship", "Bikes ship within five working days.")]
        retrieved = [{"chunk_id": c, "doc_id": d, "text": t} for c, d, t in chunks]
        return {"answer": f"[{item.id}] You can return it within 30 days [S1].", "retrieved": retrieved, "confidence": 0.9}
    return pipeline
"""

ITEM_ID = re.compile(r"\[(a-\d+)\]")


def item_of(request: MockRequest) -> str | None:
    match = ITEM_ID.search(request.user)
    return match.group(1) if match else None


def responder(request: MockRequest) -> dict:
    if request.kind == "claims":
        return {"claims": [f"[{item_of(request)}] The window is 30 days."]}
    return default_verdict(request)


@pytest.fixture
def project(pytester: pytest.Pytester, mock_anthropic, monkeypatch) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_outcome = record\ncrucible_judge = anthropic\n")  # items fail only on errors
    mock_anthropic.responder = responder
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    monkeypatch.delenv("INTERRUPT_AT", raising=False)
    monkeypatch.delenv("JUDGE_RETRIES", raising=False)
    return pytester


def run_status(project: pytest.Pytester) -> list[tuple[str, str]]:
    return db_rows(project, "SELECT id, status FROM runs ORDER BY rowid")


def assert_nothing_dropped(project: pytest.Pytester, run_id: str, errored: set[str]) -> None:
    """Every item has a result row; errored items say so and have no answer metrics; the others have all of them."""
    rows = db_rows(project, "SELECT item_id, outcome, judge_errors FROM results WHERE run_id = ? ORDER BY item_id", [run_id])
    assert [row[0] for row in rows] == sorted(item["id"] for item in ITEMS)
    for item_id, outcome, judge_errors in rows:
        if item_id in errored:
            assert outcome == "error" and json.loads(judge_errors), (item_id, outcome, judge_errors)
        else:
            assert outcome == "passed" and json.loads(judge_errors) == [], (item_id, outcome, judge_errors)
    metrics = Counter(row[0] for row in db_rows(
        project, f"SELECT item_id FROM item_metrics WHERE run_id = ? AND metric IN ({','.join('?' * len(ANSWER_METRICS))})",
        [run_id, *ANSWER_METRICS]))
    for item in ITEMS:
        expected = 0 if item["id"] in errored else len(ANSWER_METRICS)
        assert metrics[item["id"]] == expected, (item["id"], metrics)
    # Retrieval is measured for every item, judge or no judge.
    assert db_rows(project, "SELECT COUNT(*) FROM item_metrics WHERE run_id = ? AND metric = 'ndcgAt10'", [run_id]) == [(N,)]


def test_bursts_of_429_529_500_resets_and_timeouts_all_recover(project: pytest.Pytester, mock_anthropic) -> None:
    def bursts(request: MockRequest, attempt: int) -> Fault | None:
        item = item_of(request)
        if attempt == 0:
            return Fault("status", status=429, headers={"retry-after": "0.01"})  # seconds form
        if attempt == 1:
            return Fault("status", status=529, headers={"retry-after-ms": "5"})
        if attempt == 2 and request.kind == "correctness":
            if item == "a-1":
                return Fault("status", status=500, headers={})  # no retry-after: the SDK's own back-off
            if item == "a-2":
                return Fault("reset")
            if item == "a-3":
                return Fault("delay", body=2.0)  # past the 0.5 s timeout
        return None

    mock_anthropic.rules.append(bursts)
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=N)
    [(run_id, status)] = run_status(project)
    assert status == "complete"
    assert_nothing_dropped(project, run_id, errored=set())
    served = mock_anthropic.faults_served
    distinct = len({json.dumps(b, sort_keys=True) for b in mock_anthropic.message_bodies()})
    assert served["status:429"] == served["status:529"] == distinct > 4 * N  # every request went through both bursts
    assert (served["status:500"], served["reset"], served["delay"]) == (1, 1, 1)
    # Every call the judge made ended in exactly one success after its faults: nothing failed, nothing was asked twice.
    judged = int(re.search(r"(\d+) judged, 0 failed", result.stdout.str()).group(1))
    assert mock_anthropic.counts["messages"] == sum(served.values()) + judged
    print(f"faults injected (all recovered): {dict(served)}; requests judged: {judged}")  # docs/reliability.md, with -rP


def persistent_faults(request: MockRequest, attempt: int) -> Fault | None:
    """One fault kind per item, on every attempt; a-0 stays healthy."""
    item, kind = item_of(request), request.kind
    if item == "a-1":
        return Fault("status", status=429, headers={"retry-after-ms": "1"})
    if item == "a-2":
        return Fault("status", status=529, headers={"retry-after-ms": "1"})
    if item == "a-3":
        return Fault("status", status=500, headers={"retry-after-ms": "1"})
    if item == "a-4" and kind == "correctness":
        return Fault("reset")
    if item == "a-5" and kind == "correctness":
        return Fault("delay", body=1.5)
    if item == "a-6" and kind == "claims":
        return Fault("text", body='{"claims": ["[a-6] The window is')  # truncated JSON
    if item == "a-7" and kind == "correctness":
        return Fault("json", body={"grade": "excellent", "reason": 3})  # violates the schema
    return None


FAILED_ITEMS = {f"a-{i}" for i in range(1, 8)}


def test_faults_that_outlast_the_retries_are_item_errors_and_the_run_is_incomplete(project: pytest.Pytester, mock_anthropic,
                                                                                  monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_RETRIES", "2")
    mock_anthropic.rules.append(persistent_faults)
    result = project.runpytest_subprocess("--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=7)  # nothing skipped, nothing silently passed
    result.stdout.fnmatch_lines_random([
        "*golden item a-1: judge failed after retries: *HTTP 429 (rate_limit_error) after 2 retries*",
        "*golden item a-2: judge failed after retries: *HTTP 529 (overloaded_error) after 2 retries*",
        "*golden item a-3: judge failed after retries: *HTTP 500 (api_error) after 2 retries*",
        "*golden item a-4: judge failed after retries: *correctness request failed: could not connect*",
        "*golden item a-5: judge failed after retries: *correctness request failed: timed out*",
        "*golden item a-6: judge failed after retries: *judge returned invalid JSON: not JSON*",
        "*golden item a-7: judge failed after retries: *correctness verdict does not fit the schema*",
        "WARNING run incomplete: *",
    ])
    [(run_id, status)] = run_status(project)
    assert status == "incomplete"
    assert_nothing_dropped(project, run_id, errored=FAILED_ITEMS)
    junit = (project.path / "junit.xml").read_text()
    assert junit.count("<testcase ") == N and junit.count("<failure ") == 7
    assert mock_anthropic.faults_served["reset"] >= 3 and mock_anthropic.faults_served["delay"] >= 3
    print(f"faults injected (7 items errored, 1 scored): {dict(mock_anthropic.faults_served)}")  # docs/reliability.md, with -rP


def test_a_batch_that_ends_with_errored_expired_canceled_and_missing_requests(project: pytest.Pytester, mock_anthropic) -> None:
    # Requests 1, 4, 9 and 16 of the first batch do not succeed; the rest do.
    mock_anthropic.batch_outcomes = {1: "errored", 4: "expired", 9: "canceled", 16: "missing"}
    result = project.runpytest_subprocess("--crucible-judge-batch")
    # The items ran and passed before the batch ended: the session itself must fail.
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=N)
    result.stdout.fnmatch_lines_random([
        "JUDGE ERROR golden item a-*: judge failed: *errored in Message Batch*",
        "JUDGE ERROR golden item a-*: judge failed: *expired in Message Batch*",
        "JUDGE ERROR golden item a-*: judge failed: *canceled in Message Batch*",
        "JUDGE ERROR golden item a-*: judge failed: *has no result in Message Batch*",
        "WARNING run incomplete: *",
    ])
    [(run_id, status)] = run_status(project)
    assert status == "incomplete"
    errored = {row[0] for row in db_rows(project, "SELECT item_id FROM results WHERE run_id = ? AND judge_errors != '[]'", [run_id])}
    assert 1 <= len(errored) <= 4
    named = set(re.findall(r"JUDGE ERROR golden item (a-\d+)", result.stdout.str()))
    assert named == errored  # every errored item is reported, and only those
    assert_nothing_dropped(project, run_id, errored=errored)
    print(f"batch outcomes injected: errored, expired, canceled, missing; items errored: {sorted(errored)}")


# -- the gate and incomplete or interrupted runs --------------------------------------------------------
def one_item_fails(request: MockRequest, attempt: int) -> Fault | None:
    return Fault("status", status=500, headers={"retry-after-ms": "1"}) if item_of(request) == "a-3" else None


def test_gate_refuses_an_incomplete_run_unless_allowed(project: pytest.Pytester, mock_anthropic) -> None:
    assert project.runpytest_subprocess().ret == pytest.ExitCode.OK  # a complete baseline
    mock_anthropic.rules.append(one_item_fails)
    # The cache holds a-3's verdicts from the baseline: judge again, so the fault is met.
    result = project.runpytest_subprocess("--crucible-baseline=latest", "--crucible-judge-cache=off", "--crucible-html=report.html")
    assert result.ret == 3  # refused: the gate could not give a verdict, which is never a pass
    result.stdout.fnmatch_lines(["GATE REFUSED this run is incomplete (1 item without judge-based metrics): refusing to compare it",
                                 "HINT: pass --crucible-allow-incomplete*"])
    result.stdout.no_fnmatch_line("baseline * -> this run *")  # no comparison was made
    page = (project.path / "report.html").read_text()  # ... and the report says the same, not a comparison
    assert '<pre class="regressed">this run is incomplete' in page and "svg class=\"ci\"" not in page

    result = project.runpytest_subprocess("--crucible-baseline=latest", "--crucible-allow-incomplete", "--crucible-judge-cache=off")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a-3 still failed: allowing the comparison passes nothing
    result.stdout.fnmatch_lines([
        "WARNING comparing an incomplete run (--crucible-allow-incomplete)*",
        "baseline * -> this run *", "  8 paired items, seed 1337, p Holm-adjusted over *",
        "gate passed: no significant regression",
    ])


def test_an_incomplete_or_interrupted_baseline_is_refused_unless_allowed(project: pytest.Pytester, mock_anthropic, monkeypatch) -> None:
    from pytest_crucible.cli import main as crucible

    db = str(project.path / ".crucible" / "crucible.db")
    mock_anthropic.rules.append(one_item_fails)
    assert project.runpytest_subprocess().ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.setenv("INTERRUPT_AT", "a-5")
    assert project.runpytest_subprocess().ret == pytest.ExitCode.INTERRUPTED
    monkeypatch.delenv("INTERRUPT_AT")
    mock_anthropic.rules.clear()
    (incomplete, s1), (interrupted, s2) = run_status(project)
    assert (s1, s2) == ("incomplete", "interrupted")
    assert crucible(["export", incomplete, "-o", str(project.path / "incomplete.json"), "--db", db]) == 0

    # Refused before any test runs (and before any judge call is paid for).
    calls = mock_anthropic.counts["messages"]
    for baseline, status in ((incomplete, "incomplete"), (interrupted, "interrupted"), ("incomplete.json", "incomplete")):
        result = project.runpytest_subprocess(f"--crucible-baseline={baseline}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, baseline
        result.stderr.fnmatch_lines([f"ERROR: --crucible-baseline={baseline}: run * is {status}*refusing to compare against it",
                                     "HINT: *--crucible-allow-incomplete*"])
    assert mock_anthropic.counts["messages"] == calls
    # "latest" never means an incomplete or interrupted run.
    result = project.runpytest_subprocess("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-baseline=latest: no complete run in *"])
    # Allowed, the comparison pairs what the baseline has.
    for baseline, status in (("incomplete.json", "incomplete"), (interrupted, "interrupted")):
        # (eight items: -o crucible_min_pairs=2 lets the gate judge the pairs the baseline has)
        result = project.runpytest_subprocess(f"--crucible-baseline={baseline}", "--crucible-allow-incomplete",
                                              "-o", "crucible_min_pairs=2")
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
        result.stdout.fnmatch_lines([f"WARNING comparing against a baseline that is {status} (--crucible-allow-incomplete)*",
                                     "baseline * -> this run *", "gate passed: no significant regression"])


def test_an_interrupted_run_is_never_gated(project: pytest.Pytester, monkeypatch) -> None:
    assert project.runpytest_subprocess().ret == pytest.ExitCode.OK
    monkeypatch.setenv("INTERRUPT_AT", "a-4")
    result = project.runpytest_subprocess("--crucible-baseline=latest", "--crucible-allow-incomplete")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["gate skipped: this run was interrupted*"])
    result.stdout.no_fnmatch_line("baseline * -> this run *")
    assert [status for _, status in run_status(project)] == ["complete", "interrupted"]
