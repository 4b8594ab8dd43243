"""Bring your own judge, end to end through pytest: an OpenAI-compatible model (the real ``openai`` SDK
against a local server) and a judge written in Python (named in the ini file, or registered by a hook)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import db_rows, write_golden
from test_judge_e2e import CONFTEST, ITEMS  # the same small project as the Claude judge's tests

OPENAI_KEY = "sk-proj-test-0000-not-a-real-key-CRUCIBLE"
# A judge of the team's own: every claim supported, every answer perfect; it counts its calls in a file.
MY_JUDGE = '''
import json, pathlib

CALLS = pathlib.Path(__file__).with_name("judge_calls.txt")


class KindJudge:
    name = "kind-judge"
    version = "2026-12-01"

    def judge(self, requests):
        with CALLS.open("a") as log:
            log.write(f"{len(requests)}\\n")
        return [self.one(r) for r in requests]

    def one(self, request):
        kind = request.kind
        if kind == "claims":
            return {"claims": [request.text]}
        if kind == "entailment":
            return {"supported": [True] * len(request.claims), "reasons": ["ok"] * len(request.claims)}
        if kind == "questions":
            return {"questions": [request.answer] * request.n, "noncommittal": [False] * request.n}
        if kind == "usefulness":
            return {"useful": True, "reason": "ok"}
        if kind == "correctness":
            return {"grade": "perfect", "reason": "ok"}
        if kind == "relevance":
            return {"grade": 2, "reason": "ok"}
        raise ValueError(f"no verdict for {kind}")
'''


@pytest.fixture
def project(pytester: pytest.Pytester, mock_openai, monkeypatch) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    # These tests are about the judges' mechanics, not the verdicts: items fail only on errors.
    pytester.makeini("[pytest]\ncrucible_outcome = record\ncrucible_judge = openai\ncrucible_judge_model = gpt-4.1-mini\n")
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", mock_openai.base_url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return pytester


@pytest.mark.slow
def test_openai_judge_scores_the_run_and_the_cache_serves_the_rerun(project: pytest.Pytester, mock_openai) -> None:
    result = project.runpytest_subprocess("--junitxml=junit.xml", "--crucible-html=report.html")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    calls = mock_openai.counts["chat"]
    assert calls > 0
    result.stdout.fnmatch_lines([
        "crucible: judge cost estimate: 108 requests, * $0.0* with openai:gpt-4.1-mini@127.0.0.1 (before cache hits)",
        "judge gpt-4.1-mini via OpenAI-compatible API at 127.0.0.1, prompts crucible-v1: 44 requests, * cached, * judged, 0 failed",
    ])
    [(model, prompt, cost, status)] = db_rows(project, "SELECT judge_model, judge_prompt_version, cost_usd, status FROM runs")
    assert (model, prompt, status) == ("openai:gpt-4.1-mini@127.0.0.1", "crucible-v1", "complete") and cost > 0
    assert all(body["response_format"]["type"] == "json_schema" for body in mock_openai.chat_bodies())

    result = project.runpytest_subprocess()  # unchanged items: nothing reaches the server
    assert result.ret == pytest.ExitCode.OK
    assert mock_openai.counts["chat"] == calls
    result.stdout.fnmatch_lines(["judge gpt-4.1-mini via OpenAI-compatible API at 127.0.0.1, prompts crucible-v1: "
                                 "44 requests, 44 cached, 0 judged, 0 failed*"])

    # The key went to the server, in its header, and nowhere else.
    assert any(OPENAI_KEY in json.dumps(headers) for headers in mock_openai.headers_received())
    db_bytes = b"".join(p.read_bytes() for p in (project.path / ".crucible").iterdir())
    assert OPENAI_KEY.encode() not in db_bytes
    for written in ("junit.xml", "report.html"):
        assert OPENAI_KEY not in (project.path / written).read_text()
    assert OPENAI_KEY not in result.stdout.str() + result.stderr.str()


@pytest.mark.slow
def test_a_server_without_json_schema_support_is_judged_in_json_mode_and_says_so(project: pytest.Pytester, mock_openai) -> None:
    mock_openai.schema_support = False
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["judge gpt-4.1-mini via OpenAI-compatible API at 127.0.0.1, prompts crucible-v1: "
                                 "44 requests, * judged, 0 failed, * in JSON mode (the server takes no schema)"])
    [(stats,)] = db_rows(project, "SELECT judge_stats FROM runs")
    assert json.loads(stats)["jsonMode"] > 0
    assert db_rows(project, "SELECT COUNT(*) FROM results WHERE error IS NOT NULL") == [(0,)]


@pytest.mark.slow
def test_malformed_replies_are_item_errors_never_passes(project: pytest.Pytester, mock_openai) -> None:
    mock_openai.responder = lambda request: "Sure! The verdict is: perfect."
    result = project.runpytest_subprocess()
    assert result.ret != pytest.ExitCode.OK  # a judge that cannot be read never turns into a pass
    [(status,)] = db_rows(project, "SELECT status FROM runs")
    assert status in ("incomplete", "failed")
    errors = db_rows(project, "SELECT judge_errors FROM results")
    assert errors and all("judge returned invalid JSON" in row[0] for row in errors)


@pytest.mark.slow
def test_the_batch_api_judges_at_session_end(project: pytest.Pytester, mock_openai) -> None:
    mock_openai.polls_until_ended = 1
    result = project.runpytest_subprocess("--crucible-judge-batch")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert mock_openai.counts["batches_create"] >= 1 and mock_openai.counts["chat"] == 0
    result.stdout.fnmatch_lines(["crucible: batch 1 for 4 items (batch_*): */* judge requests (100%), elapsed *"])
    assert db_rows(project, "SELECT status FROM runs") == [("complete",)]


@pytest.mark.slow
def test_a_server_without_a_batch_api_is_judged_directly_and_says_so(project: pytest.Pytester, mock_openai) -> None:
    mock_openai.batch_support = False
    result = project.runpytest_subprocess("--crucible-judge-batch")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert mock_openai.counts["chat"] > 0
    result.stdout.fnmatch_lines(["judge gpt-4.1-mini via OpenAI-compatible API at 127.0.0.1, Batch API, prompts crucible-v1: "
                                 "*, * direct (the server has no Batch API)"])


def test_an_unpriced_model_under_a_cost_cap_is_refused_with_the_price_key(project: pytest.Pytester, mock_openai) -> None:
    result = project.runpytest("--crucible-judge-model=llama3.1:8b", "--crucible-max-cost=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-max-cost=1.0: the judge model has no price, so the run's cost is unknown; *",
                                 "HINT: set crucible_judge_price_per_mtok *"])
    assert mock_openai.counts["chat"] == 0
    # With a price for it, the same run is estimated and starts.
    ini = (project.path / "tox.ini").read_text().rstrip("\n") + "\ncrucible_judge_price_per_mtok = 0.20,0.60\n"
    (project.path / "tox.ini").write_text(ini)
    result = project.runpytest_subprocess("--crucible-judge-model=llama3.1:8b", "--crucible-max-cost=1")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["crucible: judge cost estimate: 108 requests, * $0.0* with openai:llama3.1:8b@127.0.0.1 *"])


def test_openai_judge_without_a_model_or_key_is_a_usage_error(project: pytest.Pytester, monkeypatch) -> None:
    (project.path / "tox.ini").write_text("[pytest]\ncrucible_judge = openai\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-judge=openai needs a model: *", "HINT: --crucible-judge-model=*"])
    monkeypatch.delenv("OPENAI_API_KEY")
    result = project.runpytest("--crucible-judge-model=gpt-4.1-mini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-judge=openai needs an API key: OPENAI_API_KEY is not set"])


def test_an_unknown_judge_name_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-judge=claude")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-judge = 'claude': expected one of auto, lexical, *, openai, or package.module:ClassName",
                                 "HINT: a judge of your own *"])
    result = project.runpytest("--crucible-judge=opneai")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-judge = 'opneai': expected one of *", "HINT: did you mean 'openai'?"])


# -- a judge written in Python ---------------------------------------------------------------------
@pytest.mark.slow
def test_a_python_judge_runs_is_cached_and_is_the_runs_identity(project: pytest.Pytester, mock_openai) -> None:
    project.makepyfile(my_judges=MY_JUDGE)
    (project.path / "tox.ini").write_text("[pytest]\ncrucible_outcome = record\ncrucible_judge = my_judges:KindJudge\n")
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["judge kind-judge (your judge, my_judges:KindJudge), prompts 2026-12-01: "
                                 "44 requests, * judged, 0 failed"])
    assert db_rows(project, "SELECT judge_model, judge_prompt_version, status FROM runs") == [("kind-judge", "2026-12-01", "complete")]
    assert db_rows(project, "SELECT ROUND(AVG(value), 4) FROM item_metrics WHERE metric = 'faithfulness'") == [(1.0,)]
    calls = (project.path / "judge_calls.txt").read_text()
    assert mock_openai.counts["chat"] == 0

    result = project.runpytest_subprocess()  # the engine's cache serves the re-run: the judge is not called
    assert result.ret == pytest.ExitCode.OK
    assert (project.path / "judge_calls.txt").read_text() == calls
    result.stdout.fnmatch_lines(["judge kind-judge *: 44 requests, 44 cached, 0 judged, 0 failed*"])


@pytest.mark.slow
def test_a_registered_judge_is_refused_against_a_claude_judged_baseline(project: pytest.Pytester, mock_anthropic,
                                                                        monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    project.makepyfile(my_judges=MY_JUDGE)
    project.makeconftest(CONFTEST + "\nimport my_judges\n\ndef pytest_crucible_register_judges(config):\n"
                         "    return [my_judges.KindJudge]\n")
    (project.path / "tox.ini").write_text("[pytest]\ncrucible_outcome = record\n")
    assert project.runpytest_subprocess("--crucible-judge=anthropic").ret == pytest.ExitCode.OK
    [(claude_run,)] = db_rows(project, "SELECT id FROM runs")
    result = project.runpytest_subprocess("--crucible-judge=kind-judge", f"--crucible-baseline={claude_run}")
    assert result.ret == 3  # refused: two judges are two rulers, never compared as one
    result.stdout.fnmatch_lines([f"GATE REFUSED refusing to compare run {claude_run} with run *: different judge models "
                                 "(claude-haiku-5-5 vs kind-judge)"])


def test_a_python_judge_that_cannot_be_used_is_one_clear_error(project: pytest.Pytester) -> None:
    project.makepyfile(my_judges="class NoVersion:\n    name = 'x'\n    def judge(self, requests):\n        return []\n")
    result = project.runpytest("--crucible-judge=my_judges:NoVersion")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: judge my_judges:NoVersion: 'version' must be a non-empty string, got None",
                                 "HINT: set it on the class*"])
    result = project.runpytest("--crucible-judge=my_judges:Missing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: judge 'my_judges:Missing': module 'my_judges' has no 'Missing'"])


@pytest.mark.slow
def test_example_project_judged_by_an_openai_compatible_model_then_rerun_from_the_cache(tmp_path, mock_openai, monkeypatch) -> None:
    pytest.importorskip("bm25s", reason="the example project needs the example extra")
    example = Path(__file__).resolve().parents[1] / "example_project"
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", mock_openai.base_url)
    command = [sys.executable, "-m", "pytest", str(example), f"--crucible-db={tmp_path / 'e.db'}", "-p", "no:cacheprovider",
               "--crucible-judge=openai", "--crucible-judge-model=gpt-4.1-mini", "--crucible-outcome=record"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:]
    calls = mock_openai.counts["chat"]
    assert calls > 100
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:]
    assert mock_openai.counts["chat"] == calls  # nothing new reached the server
    line = next(line for line in second.stdout.splitlines() if line.startswith("judge "))
    requests = int(line.split(": ")[1].split(" requests")[0])
    assert f"{requests} requests, {requests} cached, 0 judged, 0 failed" in line
    conn = sqlite3.connect(tmp_path / "e.db")
    models = {row[0] for row in conn.execute("SELECT judge_model FROM runs")}
    # The example's rubric metric (rubrics.json) is graded by the same model judge.
    [(rubric_scores,)] = conn.execute("SELECT COUNT(*) FROM item_metrics WHERE metric = 'humanHandoff'").fetchall()
    conn.close()
    assert models == {"openai:gpt-4.1-mini@127.0.0.1"}
    assert rubric_scores > 0
    assert any(body["response_format"]["json_schema"]["name"] == "rubric_verdict" for body in mock_openai.chat_bodies())


# -- every judge calibrates the same way ----------------------------------------------------------
LABELS = Path(__file__).parent / "data" / "calibration" / "labels_dev.jsonl"


def test_an_openai_compatible_model_and_a_python_judge_calibrate_like_any_judge(tmp_path, mock_openai, monkeypatch) -> None:
    from helpers import crucible_cli

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", mock_openai.base_url)
    db = tmp_path / "cal.db"
    result = crucible_cli("judge", "calibrate", LABELS, "--judge", "openai", "--judge-model", "gpt-4.1-mini", "--db", db, "--json")
    assert result.ret == 0, result.errlines
    figures = json.loads(result.stdout.str())
    assert figures["judge"]["model"] == "openai:gpt-4.1-mini@127.0.0.1"
    assert figures["crag"]["n"] == 80 and figures["faithful"]["n"] > 0 and mock_openai.counts["chat"] > 0
    # A Python judge, by its import path: its name and version are what the calibration is stored under.
    (tmp_path / "my_judges.py").write_text(MY_JUDGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = crucible_cli("judge", "calibrate", LABELS, "--judge", "my_judges:KindJudge", "--db", db)
    assert result.ret == 0, result.errlines
    result.stdout.fnmatch_lines(["judge kind-judge (your judge, my_judges:KindJudge), prompts 2026-12-01: "
                                 "80 labelled case(s) from *", "crag: n 80 *"])
    conn = sqlite3.connect(db)
    stored = sorted(row[0] for row in conn.execute("SELECT judge_model FROM judge_calibrations"))
    conn.close()
    assert stored == ["kind-judge", "openai:gpt-4.1-mini@127.0.0.1"]
