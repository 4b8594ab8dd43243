"""An unreachable judge fails fast: the real anthropic and openai SDKs, in a pytest subprocess, against a
port with nothing listening and against a local server that accepts connections and never answers.

Before, every request waited out its retries (a refused connection about 7 s of back-off each, a silent
server the whole read timeout per attempt): 32 items with no network still ran after 10 minutes. Now
the judge's circuit opens after a few attempts in a row that could not connect or got no answer, the
remaining requests fail at once with the same reason, the judged metrics of their items are errored,
the run is ``incomplete``, the gate refuses, and the summary says
``judge unreachable at HOST: N requests not sent``. The waits below are bounds on a hang (the
subprocess's timeout), never a measured duration.
"""

from __future__ import annotations

import socket
import threading

import pytest
from helpers import db_rows, free_port, write_golden

pytestmark = pytest.mark.slow

N = 32
ITEMS = [{"id": f"u-{i:02d}", "question": f"[u-{i:02d}] What is the return window?", "reference": "The return window is 30 days.",
          "citations": [{"docId": "returns", "chunkId": "returns#p1"}]} for i in range(N)]

# TIMEOUT: the judges' read timeout (seconds): short, so the silent server's first attempts time out soon.
CONFTEST = """
import os
import pytest
from pytest_crucible.judge import anthropic_judge, openai_judge

for judge in (anthropic_judge.AnthropicJudge, openai_judge.OpenAIJudge):
    judge.__init__.__kwdefaults__.update(timeout=float(os.environ.get("TIMEOUT", "60")))

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        chunks = [("returns#p1", "returns", "The return window is 30 days from delivery."),
                  ("ship#p1", "ship", "Bikes ship within five working days.")]
        return {"answer": "You can return it within 30 days [S1].", "confidence": 0.9,
                "retrieved": [{"chunk_id": c, "doc_id": d, "text": t} for c, d, t in chunks]}
    return pipeline
"""


class SilentServer:
    """Accepts every connection, reads what it is sent, never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent_server():
    server = SilentServer()
    try:
        yield server
    finally:
        server.close()


def project_for(pytester: pytest.Pytester, monkeypatch, judge: str, port: int) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    model = "\ncrucible_judge_model = gpt-4.1-mini\ncrucible_judge_price_per_mtok = 0.40,1.60" if judge == "openai" else ""
    pytester.makeini(f"[pytest]\ncrucible_outcome = record\ncrucible_judge = {judge}{model}\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-unreachable-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unreachable-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    return pytester


def assert_failed_fast(result: pytest.RunResult, project: pytest.Pytester, port: int, why: str) -> int:
    """Exit 3 (the gate refused an incomplete run), the summary's line, every item errored, the run incomplete.
    Returns how many requests were not sent."""
    output = result.stdout.str()
    assert result.ret == 3, output[-4000:]
    result.assert_outcomes(failed=N, errors=1)  # every item's judged metrics errored; the gate's case refused
    result.stdout.fnmatch_lines([f"WARNING judge unreachable at 127.0.0.1:{port}: * requests not sent *",
                                 "GATE REFUSED this run is incomplete*"])
    result.stdout.fnmatch_lines([f"*request not sent: judge unreachable at 127.0.0.1:{port} ({why}; * attempts in a row)*"])
    assert "Traceback" not in output and "INTERNALERROR" not in output
    [(run_id, status, stats)] = db_rows(project, "SELECT id, status, judge_stats FROM runs")
    assert status == "incomplete"
    errored = db_rows(project, "SELECT COUNT(*) FROM results WHERE run_id = ? AND judge_errors != '[]'", [run_id])
    assert errored == [(N,)]
    import json

    not_sent = json.loads(stats)["notSent"]
    assert int(output.split("requests not sent")[0].rsplit(": ", 1)[1]) == not_sent > 0
    return not_sent


@pytest.mark.parametrize("judge", ["anthropic", "openai"])
def test_a_judge_port_with_nothing_listening_fails_fast(pytester: pytest.Pytester, monkeypatch, judge: str) -> None:
    port = free_port()
    project = project_for(pytester, monkeypatch, judge, port)
    result = project.runpytest_subprocess("--crucible-fail-under=ndcgAt10=0.1", timeout=600)
    not_sent = assert_failed_fast(result, project, port, "could not connect: *")
    print(f"{judge}, nothing listening: {N} items, {not_sent} requests not sent")  # docs/reliability.md, with -rP


@pytest.mark.parametrize("judge", ["anthropic", "openai"])
def test_a_judge_that_accepts_and_never_answers_fails_fast(pytester: pytest.Pytester, monkeypatch, silent_server,
                                                          judge: str) -> None:
    project = project_for(pytester, monkeypatch, judge, silent_server.port)
    monkeypatch.setenv("TIMEOUT", "2")  # the read timeout: the first attempts give up after 2 s
    result = project.runpytest_subprocess("--crucible-fail-under=ndcgAt10=0.1", timeout=600)
    not_sent = assert_failed_fast(result, project, silent_server.port, "no answer within the timeout")
    # Only the attempts before the circuit opened reached the server: a few, not one per request and retry.
    assert 0 < silent_server.accepted <= 12, silent_server.accepted
    print(f"{judge}, a server that never answers: {N} items, {not_sent} requests not sent, "
          f"{silent_server.accepted} connections made")  # docs/reliability.md, with -rP
