"""junit XML says what the log says: the gate is a test case of its own (``crucible.gate``), and the
testsuite carries the run id, the configHash, the baseline and the verdict as <properties>."""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET

import pytest
from helpers import write_project

N_ITEMS = 30
ITEMS = [{"id": f"g-{i:03d}", "question": f"question {i}", "citations": [{"docId": f"doc{i}", "mode": "required"}]}
         for i in range(N_ITEMS)]

# The relevant document comes first (second for every third item); {"degrade": true} sinks it to
# rank 4 for most items: still retrieved, so every item passes, but nDCG and MRR regress.
CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        rank = 3 if config.get("degrade") and n % 5 else (1 if n % 3 == 0 else 0)
        docs = [f"noise{j}" for j in range(5)]
        docs.insert(rank, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d} for d in docs]}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    # docs/ci.md recommends the record outcome: only the gate decides, so only the gate can be red.
    return write_project(pytester, ITEMS, CONFTEST, configs={"base.json": {}, "degraded.json": {"degrade": True}})


def run_ids(pytester: pytest.Pytester) -> list[tuple[str, str]]:
    conn = sqlite3.connect(pytester.path / ".crucible" / "crucible.db")
    try:
        return conn.execute("SELECT id, config_hash FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()


def read_junit(path) -> tuple[ET.Element, dict[str, str], ET.Element]:
    """The testsuite, its properties and the gate's test case."""
    suite = ET.parse(path).getroot().find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    [gate] = [case for case in suite.iter("testcase") if case.get("classname") == "crucible" and case.get("name") == "gate"]
    return suite, properties, gate


def test_a_failed_gate_is_a_failed_test_case_with_the_verdict_in_the_properties(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=degraded.json", "--crucible-baseline=latest", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (base, _), (current, config_hash) = run_ids(project)
    suite, properties, gate = read_junit(project.path / "junit.xml")
    # Every item passed (record outcome); the gate is the one failure, as the exit code says.
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (str(N_ITEMS + 1), "1", "0")
    [failure] = list(gate)
    gate_failed = [line for line in result.outlines if line.startswith("GATE FAILED ")]
    assert len(gate_failed) == 2 and gate_failed[0].startswith("GATE FAILED ndcgAt10 regressed")
    assert failure.tag == "failure" and failure.get("message") == gate_failed[0]
    assert failure.text.splitlines() == gate_failed
    assert properties == {"crucible.runId": current, "crucible.configHash": config_hash, "crucible.baseline": base,
                          "crucible.verdict": "failed"}
    # The terminal counts the gate the same way: one more failure, named in the short summary,
    # and no stray progress letter after the last item's line.
    result.assert_outcomes(passed=N_ITEMS, failed=1)
    result.stdout.fnmatch_lines(["FAILED crucible::gate - GATE FAILED ndcgAt10 regressed*"])
    result.stdout.no_fnmatch_line("*[[]100%[]]F*")
    result.stdout.no_fnmatch_line("*[[]10[1-9]%[]]*")


def test_a_failed_gate_does_not_count_towards_maxfail(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("-x", "--crucible-config=degraded.json", "--crucible-baseline=latest", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.no_fnmatch_line("*stopping after*")
    assert read_junit(project.path / "junit.xml")[0].get("failures") == "1"


def test_a_passed_gate_is_a_passed_test_case(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=base.json", "--crucible-baseline=latest", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    (base, _), (current, _) = run_ids(project)
    suite, properties, gate = read_junit(project.path / "junit.xml")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (str(N_ITEMS + 1), "0", "0", "0")
    assert list(gate) == []  # no failure, error or skipped element: passed
    assert properties["crucible.verdict"] == "passed"
    assert (properties["crucible.runId"], properties["crucible.baseline"]) == (current, base)
    result.assert_outcomes(passed=N_ITEMS + 1)


def test_floors_only_gate_has_no_baseline_property(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-fail-under=ndcgAt10=0.99", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    _suite, properties, gate = read_junit(project.path / "junit.xml")
    assert gate.find("failure").get("message").startswith("GATE FAILED ndcgAt10 = ")
    assert properties["crucible.verdict"] == "failed" and "crucible.baseline" not in properties


def test_without_a_gate_there_is_no_gate_test_case(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-config=base.json", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    suite = ET.parse(project.path / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == str(N_ITEMS)
    assert not [case for case in suite.iter("testcase") if case.get("classname") == "crucible"]
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    [(current, config_hash)] = run_ids(project)
    assert properties == {"crucible.runId": current, "crucible.configHash": config_hash}


@pytest.mark.slow
def test_a_refused_gate_is_an_error_with_its_hint(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    [(first, _)] = run_ids(project)
    conn = sqlite3.connect(project.path / ".crucible" / "crucible.db")
    conn.execute("UPDATE runs SET judge_model = 'claude-haiku-5-5', judge_prompt_version = 'ragas-v1' WHERE id = ?", [first])
    conn.commit()
    conn.close()
    # A judged run (the offline judge) against a baseline judged by another model: refused, exit 3.
    result = project.runpytest_subprocess(f"--crucible-baseline={first}", "--crucible-mode=system", "--crucible-judge=lexical",
                                          "--junitxml=junit.xml")
    assert result.ret == 3
    suite, properties, gate = read_junit(project.path / "junit.xml")
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    [error] = list(gate)
    assert error.tag == "error"
    assert "GATE REFUSED refusing to compare run" in error.get("message")
    assert error.text.startswith("GATE REFUSED refusing to compare run") and "\nHINT: " in error.text
    assert properties["crucible.verdict"] == "refused" and properties["crucible.baseline"] == first
    result.stdout.fnmatch_lines(["ERROR crucible::gate - *GATE REFUSED*"])


@pytest.mark.slow
def test_under_xdist_the_controller_writes_one_gate_test_case(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    assert project.runpytest_subprocess("-n", "2", "--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest_subprocess("-n", "2", "--crucible-config=degraded.json", "--crucible-baseline=latest",
                                          "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (base, _), (current, _) = run_ids(project)
    suite, properties, gate = read_junit(project.path / "junit.xml")  # exactly one gate test case
    assert (suite.get("tests"), suite.get("failures")) == (str(N_ITEMS + 1), "1")
    assert gate.find("failure").get("message").startswith("GATE FAILED ndcgAt10 regressed")
    assert properties == {"crucible.runId": current, "crucible.configHash": properties["crucible.configHash"],
                          "crucible.baseline": base, "crucible.verdict": "failed"}
    result.assert_outcomes(passed=N_ITEMS, failed=1)


def test_a_junit_consumer_reads_the_gate(project: pytest.Pytester) -> None:
    """junitparser, the junit reader many CI tools and actions are built on, sees what we wrote."""
    junitparser = pytest.importorskip("junitparser")
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    assert project.runpytest("--crucible-config=degraded.json", "--crucible-baseline=latest",
                             "--junitxml=junit.xml").ret == pytest.ExitCode.TESTS_FAILED
    [suite] = list(junitparser.JUnitXml.fromfile(str(project.path / "junit.xml")))
    assert (suite.tests, suite.failures, suite.errors) == (N_ITEMS + 1, 1, 0)
    assert {p.name: p.value for p in suite.properties()}["crucible.verdict"] == "failed"
    [gate] = [case for case in suite if case.classname == "crucible" and case.name == "gate"]
    assert not gate.is_passed
    [failure] = gate.result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message.startswith("GATE FAILED ndcgAt10 regressed")
    assert "GATE FAILED mrr regressed" in failure.text
