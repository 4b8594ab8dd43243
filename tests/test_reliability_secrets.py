"""The API key goes to the API and nowhere else: not into any file a run, a report or the CLI
produces (the SQLite file and its write-ahead log byte for byte included), not into any output.

One project runs everything that makes artifacts, with a recognisable fake key, against the
local mock API: a judged run, an authentication failure and a fault whose error bodies echo
the key back, Message Batches with errored requests, junit XML, the HTML report, pytest's own
log file at DEBUG level, and every read and export command of the CLI. Then every byte is grepped.
(tests/test_judge_e2e.py checks the plain judged run; this test supersedes it for every other path.)
"""

from __future__ import annotations

import base64
import contextlib
import gc
import io
import json
import sqlite3
from pathlib import Path

import pytest
from helpers import write_golden
from mock_anthropic import Fault, MockRequest

pytestmark = pytest.mark.slow

KEY = "sk-ant-api03-CRUCIBLE-CANARY-7f3a9c1e5b2d4a60-LEAKCHECK"
ITEMS = [
    {"id": f"s-{i}", "question": f"[s-{i}] What is the return window?", "reference": f"[s-{i}] Thirty days.",
     "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}
    for i in range(4)
]
CONFTEST = """
import pytest
from pytest_crucible.judge import anthropic_judge

anthropic_judge.AnthropicJudge.__init__.__kwdefaults__.update(timeout=0.5, max_retries=1, poll_interval=0.05)

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        retrieved = [{"chunk_id": "returns#p1", "doc_id": "returns", "text": "The return window is 30 days."}]
        return {"answer": f"[{item.id}] Within 30 days [S1].", "retrieved": retrieved, "confidence": 0.9}
    return pipeline
"""


def echo_error(kind: str, status: int) -> dict:
    """An error body that repeats the credentials back, as a misbehaving proxy might."""
    return {"type": "error", "error": {"type": kind, "message": f"invalid x-api-key: {KEY} (Authorization: Bearer {KEY})"}}


def forms(secret: str) -> list[bytes]:
    """The secret as it could land in a file: plain, JSON-escaped, UTF-16 (SQLite can store text so), base64."""
    return [secret.encode(), json.dumps(secret).encode(), secret.encode("utf-16-le"), base64.b64encode(secret.encode()),
            secret[7:].encode()]  # without the sk-ant- prefix a redaction regex would key on


def test_the_api_key_is_in_no_artifact_and_no_output(pytester: pytest.Pytester, mock_anthropic, monkeypatch) -> None:
    from pytest_crucible.cli import main as crucible

    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_outcome = record\ncrucible_judge = anthropic\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    outputs: list[str] = []
    db = pytester.path / ".crucible" / "crucible.db"
    common = ["-rA", "-vv", "-l", "--log-level=DEBUG", "--log-file-level=DEBUG"]

    def run(*args: str, log: str) -> pytest.RunResult:
        result = pytester.runpytest_subprocess(*common, f"--log-file={log}", *args)
        outputs.extend([result.stdout.str(), result.stderr.str()])
        return result

    # 1. A judged run with every report: junit XML and the HTML report.
    assert run("--junitxml=junit-1.xml", "--crucible-html=report-1.html", log="pytest-1.log").ret == pytest.ExitCode.OK
    # Hold the file open, so the later runs' write-ahead log stays on disk to be grepped too.
    holder = sqlite3.connect(db)
    holder.execute("SELECT COUNT(*) FROM runs").fetchall()

    # 2. The API refuses the key, and its error body echoes it.
    mock_anthropic.fail_status(401, times=10_000, body=echo_error("authentication_error", 401), headers={})
    result = run("--crucible-judge-cache=off", "--junitxml=junit-2.xml", "--crucible-html=report-2.html", log="pytest-2.log")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*HTTP 401 (authentication_error) not retried*[[]REDACTED[]]*"])
    mock_anthropic.faults["messages"].clear()

    # 3. Faults: an echoing 500 for one item, rate limits, a reply that repeats the key as its "verdict".
    def faults(request: MockRequest, attempt: int) -> Fault | None:
        if "[s-1]" in request.user:
            return Fault("status", status=500, headers={"retry-after-ms": "1"}, body=echo_error("api_error", 500))
        if "[s-2]" in request.user and request.kind == "correctness":
            return Fault("text", body=f"my key is {KEY}")
        return Fault("status", status=429, headers={"retry-after-ms": "1"}) if attempt == 0 else None

    mock_anthropic.rules.append(faults)
    result = run("--crucible-judge-cache=off", "--junitxml=junit-3.xml", "--crucible-html=report-3.html",
                 "--crucible-baseline=latest", "--crucible-allow-incomplete", log="pytest-3.log")
    assert result.ret == 3  # items failed, and four items are too few pairs for the gate: refused (outranks 1)
    mock_anthropic.rules.clear()

    # 4. Message Batches, one request errored.
    mock_anthropic.batch_outcomes = {0: "errored", 2: "expired"}
    assert run("--crucible-judge-cache=off", "--crucible-judge-batch", log="pytest-4.log").ret == pytest.ExitCode.TESTS_FAILED

    # 5. Every CLI command that reads or exports.
    wal = Path(f"{db}-wal")
    assert wal.exists() and wal.stat().st_size > 0
    wal_bytes = wal.read_bytes()  # as the runs left it (a CLI write below may checkpoint it)
    commands = [["runs"], ["runs", "--json"], ["show", "latest"], ["metrics", "latest", "--json"],
                ["compare", "latest", "latest", "--min-pairs", "2"], ["compare", "latest", "latest", "--json", "--min-pairs", "2"],
                ["export", "latest", "-o", "run.json"], ["export", "latest", "--format", "trec", "-o", "run.trec"],
                ["export", "latest", "-o", "-"], ["report", "latest", "-o", "report-cli.html"],
                ["qrels", "export", "-o", "ledger.jsonl"], ["qrels", "export", "--effective", "-o", "qrels.txt"],
                ["qrels", "agreement", "--json"], ["golden", "export", "-o", "drafts.jsonl"]]
    with monkeypatch.context() as patch:
        patch.chdir(pytester.path)
        for command in commands:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = crucible([*command, "--db", str(db)])
            assert code == 0, (command, err.getvalue())
            outputs.extend([out.getvalue(), err.getvalue()])
    holder.close()
    # The commands' stores close when the garbage collector finds them; the last connection to close
    # deletes -wal and -shm. Let that happen now, not between listing the files and reading them.
    gc.collect()

    # The key did reach the API, in its credential header (x-api-key, or Authorization: Bearer in
    # this SDK version): that header value is what to look for, with the key inside it.
    credential = {(name.lower(), value) for headers in mock_anthropic.headers_received() for name, value in headers.items()
                  if name.lower() in ("x-api-key", "authorization")}
    assert credential in ({("x-api-key", KEY)}, {("authorization", f"Bearer {KEY}")}), credential
    [(header, header_value)] = credential
    assert not [name for headers in mock_anthropic.headers_received() for name, value in headers.items()
                if KEY in value and name.lower() != header]
    secrets = {KEY, header_value}

    files = [path for path in pytester.path.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"crucible.db", "junit-1.xml", "junit-3.xml", "report-1.html", "report-3.html", "pytest-3.log", "run.json",
            "run.trec", "report-cli.html", "ledger.jsonl", "qrels.txt"} <= names
    patterns = [form for secret in secrets for form in forms(secret)]
    leaks = [str(path.relative_to(pytester.path)) for path in files for form in patterns if form in path.read_bytes()]
    leaks += ["crucible.db-wal (as the runs left it)" for form in patterns if form in wal_bytes]
    leaks += [f"output {index}" for index, text in enumerate(outputs) for form in patterns if form in text.encode()]
    assert leaks == []
    # The failures were real and were reported (redacted), not swallowed.
    joined = "\n".join(outputs)
    assert "[REDACTED]" in joined and "HTTP 500 (api_error)" in joined and "errored in Message Batch" in joined
    assert sum(path.stat().st_size for path in files) > 100_000  # there was plenty to grep
    assert b"Sending HTTP Request" in (pytester.path / "pytest-3.log").read_bytes()  # the SDK's own DEBUG log included
    print(f"grepped {len(files) + 1} files ({sum(path.stat().st_size for path in files) + len(wal_bytes):,} bytes) and "
          f"{len(outputs)} outputs ({sum(len(text) for text in outputs):,} characters) for {len(patterns)} forms of the key: 0 found")
