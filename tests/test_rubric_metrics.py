"""Rubric metrics (model-judged, declared as data) end to end: through pytest, the real anthropic SDK and
the local API double on 127.0.0.1 (tests/mock_anthropic.py), and under the offline judge, which cannot
grade a rubric and says so instead of inventing numbers."""

from __future__ import annotations

import json

import pytest
from helpers import db_rows, write_golden

FAKE_KEY = "sk-ant-test-0000-not-a-real-key-RUBRICS"

ITEMS = [{"id": f"r-{i}", "question": f"Can I return order {i}?", "reference": "Yes, within 30 days.",
          "citations": [{"docId": "returns", "chunkId": "returns#p1"}], "tags": ["returns"] if i < 4 else []}
         for i in range(6)]

CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        retrieved = [{"chunk_id": "returns#p1", "doc_id": "returns", "text": "Returns are accepted within 30 days."}]
        tone = config.get("tone", "kind")
        answer = "Yes, within 30 days [S1]." if tone == "kind" else "Read the policy, it is rude to ask [S1]."
        return {"answer": None if mode == "component" else answer, "retrieved": retrieved, "confidence": 0.9}
    return pipeline
"""

POLITENESS = {"name": "politeness", "criteria": "The answer is courteous and does not blame the customer."}
HELPFUL = {"name": "helpfulness", "criteria": "The answer tells the customer what to do next.", "scale": [1, 5],
           "steps": ["Find the action the answer proposes.", "Judge whether a customer could act on it."],
           "appliesTo": {"tags": ["returns"]}}


@pytest.fixture
def project(pytester: pytest.Pytester, mock_anthropic, monkeypatch) -> pytest.Pytester:

    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_outcome = record\ncrucible_rubrics = rubrics.json\n")
    write_rubrics(pytester, [POLITENESS, HELPFUL])
    (pytester.path / "rude.json").write_text(json.dumps({"tone": "rude"}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    return pytester


def write_rubrics(project: pytest.Pytester, rubrics: list[dict]) -> None:
    (project.path / "rubrics.json").write_text(json.dumps(rubrics, indent=1))


def rubric_requests(mock_anthropic) -> list[dict]:
    """The rubric requests the API received (direct or inside a batch)."""
    return [body for body in mock_anthropic.message_bodies() if "Judge task: rubric-v1/rubric" in str(body.get("system"))]


def values(project, metric: str, run: int = -1) -> dict[str, float]:
    runs = [row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY started_at")]
    return dict(db_rows(project, "SELECT item_id, value FROM item_metrics WHERE metric = ? AND run_id = ? ORDER BY item_id",
                        (metric, runs[run])))


@pytest.mark.slow
def test_claude_judges_each_rubric_once_and_the_rerun_is_served_from_the_cache(project: pytest.Pytester, mock_anthropic) -> None:
    result = project.runpytest("--crucible-judge=anthropic")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    # politeness on every item, helpfulness on the four tagged "returns": one request each.
    assert len(rubric_requests(mock_anthropic)) == 6 + 4
    assert values(project, "politeness") == {f"r-{i}": 1.0 for i in range(6)}
    assert values(project, "helpfulness") == {f"r-{i}": 1.0 for i in range(4)}  # 5 on [1, 5], normalised
    [(recorded, model)] = db_rows(project, "SELECT custom_metrics, judge_model FROM runs")
    rubrics = {row["name"]: row for row in json.loads(recorded)}
    assert rubrics["politeness"]["kind"] == "rubric" and rubrics["politeness"]["promptVersion"] == "rubric-v1"
    assert rubrics["politeness"]["judgeModel"] == model
    result.stdout.fnmatch_lines(["  helpfulness * 1.0000      4", "  politeness * 1.0000      6",
                                 "custom metrics: helpfulness (rubric judged by * (rubric-v1), rubrics.json:*); politeness *"])

    sent = mock_anthropic.counts["messages"]
    result = project.runpytest("--crucible-judge=anthropic")
    assert result.ret == pytest.ExitCode.OK
    assert mock_anthropic.counts["messages"] == sent  # every verdict came from the cache
    assert values(project, "politeness") == {f"r-{i}": 1.0 for i in range(6)}

    # A rude answer is judged (a new answer is a new request) and fails the rubric: 0, a regression the gate sees.
    result = project.runpytest("--crucible-judge=anthropic", "--crucible-config=rude.json", "--crucible-baseline=latest",
                               "--crucible-gate=politeness")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert values(project, "politeness") == {f"r-{i}": 0.0 for i in range(6)}
    result.stdout.fnmatch_lines(["GATE FAILED politeness regressed: 1.0000 -> 0.0000*"])


@pytest.mark.slow
def test_rubrics_go_into_the_message_batches(project: pytest.Pytester, mock_anthropic) -> None:
    mock_anthropic.polls_until_ended = 1  # each batch ends at its first poll
    result = project.runpytest("--crucible-judge=anthropic", "--crucible-judge-batch")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert mock_anthropic.counts["messages"] == 0
    assert len(rubric_requests(mock_anthropic)) == 10
    assert values(project, "politeness") == {f"r-{i}": 1.0 for i in range(6)}
    assert len(values(project, "helpfulness")) == 4


@pytest.mark.slow
def test_the_cost_estimate_counts_one_request_per_rubric_and_item(project: pytest.Pytester, mock_anthropic) -> None:
    def estimated_requests(result) -> int:
        line = next(line for line in result.outlines if line.startswith("crucible: judge cost estimate:"))
        return int(line.split("estimate: ")[1].split(" requests")[0])

    with_rubrics = estimated_requests(project.runpytest("--crucible-judge=anthropic", "--crucible-max-cost=1000"))
    write_rubrics(project, [])
    without = estimated_requests(project.runpytest("--crucible-judge=anthropic", "--crucible-max-cost=1000"))
    assert with_rubrics - without == 6 + 4


def test_the_offline_judge_says_once_that_it_cannot_grade_a_rubric_and_stores_nothing(project: pytest.Pytester, mock_anthropic) -> None:
    result = project.runpytest("--crucible-judge=lexical")
    assert result.ret == pytest.ExitCode.OK
    notes = [line for line in result.outlines if "rubric metrics need a model judge" in line]
    assert notes == ["NOTE rubric metrics need a model judge: politeness, helpfulness skipped"]
    result.stdout.fnmatch_lines([notes[0], "  (lexical-v3 cannot grade a rubric; --crucible-judge=anthropic can)"])
    assert db_rows(project, "SELECT COUNT(*) FROM item_metrics WHERE metric IN ('politeness', 'helpfulness')") == [(0,)]
    assert db_rows(project, "SELECT custom_metrics FROM runs") == [(None,)]
    assert mock_anthropic.counts["messages"] == 0
    # Component mode has no answers to grade: the same note, nothing stored.
    result = project.runpytest("--crucible-mode=component")
    result.stdout.fnmatch_lines(["NOTE rubric metrics grade answers, and component mode has none: politeness, helpfulness skipped"])


@pytest.mark.slow
def test_a_comparison_refuses_runs_whose_rubric_text_differs(project: pytest.Pytester, mock_anthropic) -> None:
    assert project.runpytest("--crucible-judge=anthropic").ret == pytest.ExitCode.OK
    write_rubrics(project, [{**POLITENESS, "criteria": "The answer is courteous."}, HELPFUL])
    result = project.runpytest("--crucible-judge=anthropic", "--crucible-baseline=latest")
    assert result.ret == 3  # refused, never a pass
    result.stdout.fnmatch_lines(["GATE REFUSED refusing to compare run * with run *: the rubric 'politeness' differs between them*",
                                 "HINT: give an edited rubric a new name (e.g. politenessV2)*"])
    # Comparing the other metrics only is allowed.
    runs = [row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY started_at")]
    from helpers import crucible_cli

    cli = crucible_cli("compare", runs[0], runs[1], "--metrics", "ndcgAt10,helpfulness", "--db", project.path / ".crucible" / "crucible.db")
    assert cli.ret == 0, cli.errlines


@pytest.mark.parametrize(("rubrics", "expected"), [
    ([{"name": "politeness"}], "ERROR: rubrics.json:3: field 'rubrics[0].criteria': expected the criteria the answer is graded on, as text"),
    ([POLITENESS, {**HELPFUL, "scale": [5, 1]}], "ERROR: rubrics.json:7: field 'rubrics[1].scale': expected \"pass_fail\" or [LOW, HIGH]"),
    ([{**POLITENESS, "critera": "x"}], "ERROR: rubrics.json:3: field 'rubrics[0].critera': unknown field (did you mean 'criteria'?)"),
    ([{**POLITENESS, "name": "faithfulness"}], "ERROR: rubrics.json:3: field 'rubrics[0].name': the name 'faithfulness' is the built-in metric"),
    ([POLITENESS, POLITENESS], "ERROR: rubrics.json:7: field 'rubrics[1].name': 'politeness' is declared twice"),
    ([{**POLITENESS, "appliesTo": {"kinds": ["retrieval"]}}], "ERROR: rubrics.json:3: field 'rubrics[0].appliesTo.kinds': unknown"),
], ids=["no-criteria", "bad-scale", "misspelt-field", "builtin-name", "twice", "bad-applies-to"])
def test_a_bad_rubric_is_one_usage_error_naming_file_line_and_field(project: pytest.Pytester, rubrics, expected) -> None:
    write_rubrics(project, rubrics)
    result = project.runpytest("--crucible-judge=lexical")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0].startswith(expected), result.errlines
    assert result.errlines[1].startswith("HINT: ")
    assert "Traceback" not in result.stderr.str()


def test_rubrics_in_the_config_file_stay_out_of_the_config_hash(project: pytest.Pytester) -> None:
    write_rubrics(project, [])
    (project.path / "with_rubric.json").write_text(json.dumps({"rubrics": [POLITENESS]}, indent=1))
    assert project.runpytest("--crucible-judge=lexical").ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-judge=lexical", "--crucible-config=with_rubric.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["NOTE rubric metrics need a model judge: politeness skipped*"])
    assert len({row[0] for row in db_rows(project, "SELECT config_hash FROM runs")}) == 1
    (project.path / "bad_rubric.json").write_text(json.dumps({"rubrics": [{"name": "politeness", "scale": "1-5"}]}, indent=1))
    result = project.runpytest("--crucible-config=bad_rubric.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0].startswith("ERROR: bad_rubric.json:4: field 'rubrics[0].criteria': "), result.errlines
