"""What a new user sees first: quiet modes that keep the verdict whole, a gate with no baseline that says
so, empty golden files named, did-you-means for metric names and config keys, every problem of a bad
pipeline result, and the comparison's table in one piece. Each through pytest itself, with the exact text."""

from __future__ import annotations

import json

import pytest
from helpers import COMPONENT_RECORD, RANKED_CONFTEST, crucible_cli, db_rows, write_golden

RANKED = [("returns#p1", "returns"), ("bikes#p2", "bikes"), ("battery#p1", "battery"), ("faq#p9", "faq")]
# Twelve items whose cited chunk sits at rank 1..4: a run with "retrievalLimit": 2 loses half of them.
ITEMS = [{"id": f"q-{n:02d}", "question": f"question {n}", "answerable": n % 3 != 0,
          "citations": [{"docId": RANKED[n % 4][1], "chunkId": RANKED[n % 4][0], "mode": "required"}]}
         for n in range(12)]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\n")
    (pytester.path / "short.json").write_text(json.dumps({"retrievalLimit": 2}))
    return pytester


def run_ids(project: pytest.Pytester) -> list[str]:
    return [row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY started_at")]


def test_quiet_modes_keep_the_verdict_its_reasons_and_every_line_of_a_warning(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    [baseline] = run_ids(project)
    for quiet in ("-q", "-qq"):
        result = project.runpytest(quiet, "--crucible-config=short.json", f"--crucible-baseline={baseline}",
                                   "--crucible-gate=recallAtK", "--crucible-margin=mrr=0.01")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        out = result.stdout.str()
        # The pointer names lines this mode prints, and they are there, whole.
        assert "the gate failed (1 reason): see the GATE FAILED lines at the end" in out
        assert "see the crucible section below" not in out
        result.stdout.fnmatch_lines(["crucible run * complete, 12 items: *; GATE FAILED",
                                     "GATE FAILED recall@10 regressed: 1.0000 -> 0.5000 (delta -0.5000, 95% CI *, p = *, n = 12)"])
    # A warning wrapped over two lines keeps its second line under -q.
    result = project.runpytest("-q", "--crucible-margin=mrr=0.01", "--crucible-fail-under=mrr=0.1")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["WARNING --crucible-margin=mrr=0.01 asks for a comparison, but no baseline was given: the gate did",
                                 "  not compare this run"])


def test_a_gate_with_no_baseline_says_so_once_and_refuses_under_strict_config(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-gate=ndcgAt10", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    lines = ["gate skipped: --crucible-gate=ndcgAt10 asks for a comparison, but no baseline was given: the gate did not "
             "compare this run",
             "HINT: add --crucible-baseline=latest (the latest complete run of this workspace), a run id, or an exported run "
             "(`crucible export RUN -o baselines/main.json`)"]
    result.stdout.fnmatch_lines(lines)
    assert result.stdout.str().count("gate skipped: --crucible-gate=ndcgAt10") == 1
    assert '<skipped type="pytest.skip" message="gate skipped: --crucible-gate=ndcgAt10' in (project.path / "junit.xml").read_text()
    quiet = project.runpytest("-q", "--crucible-gate=ndcgAt10")
    quiet.stdout.fnmatch_lines(lines)
    # The ini file's gate only shapes a gate that runs: no word without a baseline.
    project.makeini(f"[pytest]\n{COMPONENT_RECORD}\ncrucible_gate = ndcgAt10\n")
    assert "gate skipped" not in project.runpytest().stdout.str()

    project.makeini(f"[pytest]\n{COMPONENT_RECORD}\ncrucible_strict_config = true\n")
    strict = project.runpytest("--crucible-gate=ndcgAt10")
    assert strict.ret == 3
    strict.stdout.fnmatch_lines(["GATE REFUSED --crucible-gate=ndcgAt10 asks for a comparison, but no baseline was given: "
                                 "the gate did not compare this run (crucible_strict_config = true: refused)", "HINT: *"])


def test_empty_golden_files_are_named(project: pytest.Pytester) -> None:
    (project.path / "golden_empty.jsonl").write_text("")
    (project.path / "golden_blank.jsonl").write_text("\n\n")
    result = project.runpytest("golden_empty.jsonl", "golden_blank.jsonl")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["WARNING 2 golden file(s) hold no items, so no test came from them: golden_empty.jsonl, "
                                 "golden_blank.jsonl", 'HINT: one JSON object per line, e.g. {"id": "q1", *'])
    # Beside a file with items, the empty one is still named.
    both = project.runpytest()
    assert both.ret == pytest.ExitCode.OK
    both.stdout.fnmatch_lines(["WARNING 2 golden file(s) hold no items, *"])


def test_a_config_key_typo_gets_a_did_you_mean(project: pytest.Pytester) -> None:
    (project.path / "typo.json").write_text(json.dumps({"retreivalLimit": 2, "retrieval": {"rernak": True}}))
    result = project.runpytest("--crucible-config=typo.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "WARNING CrucibleWarning: config key retreivalLimit=2 was never read by the pipeline: is the config applied? "
        "(did you mean retrievalLimit?)",
    ])
    result.stdout.fnmatch_lines(["*config key retrieval.rernak=true was never read by the pipeline: is the config applied? "
                                 "(did you mean retrieval.rerank?)"])
    # A key with nothing close gets no guess.
    (project.path / "other.json").write_text(json.dumps({"temperatureSchedule": 2}))
    other = project.runpytest("--crucible-config=other.json")
    other.stdout.fnmatch_lines(["WARNING CrucibleWarning: config key temperatureSchedule=2 was never read by the pipeline: "
                                "is the config applied?"])


def test_every_problem_of_a_bad_pipeline_result_is_listed(project: pytest.Pytester) -> None:
    project.makeconftest("""
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        return {"retrieved": ["membership#p1", {"chunk_id": 3}], "confidence": 80}
    return pipeline
""")
    result = project.runpytest("golden_set.jsonl::q-00")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "golden item q-00: crucible_pipeline returned an invalid result: 4 problems:",
        "    field 'retrieved[0]': Input should be a valid dictionary or instance of Retrieved (got 'membership#p1')",
        "    field 'retrieved[1].chunk_id': Input should be a valid string (got 3)",
        "    field 'retrieved[1].doc_id': Field required",
        "    field 'confidence': Input should be less than or equal to 1 (got 80)",
    ])
    # The store keeps one line.
    [(error,)] = db_rows(project, "SELECT error FROM results")
    assert error.startswith("crucible_pipeline returned an invalid result: 4 problems: field 'retrieved[0]'") and "\n" not in error


def test_metric_did_you_mean_lists_each_name_once(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert project.runpytest().ret == pytest.ExitCode.OK
    a, b = run_ids(project)
    db = project.path / ".crucible" / "crucible.db"
    for typo, hint in (("recal", "HINT: did you mean recallAtK, recall@10?"), ("faithfullness", "HINT: did you mean faithfulness, truthfulness?")):
        result = crucible_cli("compare", a, b, "--gate", typo, "--db", db)
        assert result.ret == 2
        assert hint in result.stderr.lines, result.stderr.lines


def test_the_items_left_out_come_after_the_comparison_table(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    write_golden(project.path / "golden_set.jsonl", ITEMS[:9])  # three items fewer in the candidate
    assert project.runpytest().ret == pytest.ExitCode.OK
    a, b = run_ids(project)
    lines = crucible_cli("compare", a, b, "--db", project.path / ".crucible" / "crucible.db").stdout.lines
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("metric "))
    rows = [i for i, line in enumerate(lines) if line.lstrip().startswith(("recall@10", "ndcgAt10", "mrr "))]
    left_out = next(i for i, line in enumerate(lines) if "3 items left out of the pairs:" in line)
    assert header < min(rows) and max(rows) < left_out, "\n".join(lines)


def test_a_facet_mean_says_how_many_items_it_rests_on_in_the_terminal_and_the_report(project: pytest.Pytester) -> None:
    project.makeconftest(RANKED_CONFTEST.replace(
        "    def pipeline(question, *, item, config, mode):\n",
        "    def pipeline(question, *, item, config, mode):\n"
        "        if item.id == 'q-05':\n"
        "            raise RuntimeError('index not built')\n"))
    result = project.runpytest("-v", "--crucible-html=report.html")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # answerable=true holds 8 items; q-05 errored, so its means rest on 7.
    result.stdout.re_match_lines([r"  answerable=true\s+8\s+\d\.\d{4} \(7\)\s+.*"])
    result.stdout.re_match_lines([r"  answerable=false\s+4\s+\d\.\d{4}\s+\d\.\d{4}.*"])  # all 4 have it: no count
    page = (project.path / "report.html").read_text()
    table = page[page.index('data-facet="answerable"'):]
    table = table[:table.index("</table>")]
    assert '<small title="the mean rests on 7 of the 8 items">(7)</small>' in table
    assert "of the 4 items" not in table


def test_a_golden_file_pattern_with_a_folder_matches_the_path_as_pytest_patterns_do(pytester: pytest.Pytester) -> None:
    (pytester.path / "golden").mkdir()
    (pytester.path / "other").mkdir()
    write_golden(pytester.path / "golden" / "golden_imported.jsonl", ITEMS[:2])
    write_golden(pytester.path / "other" / "golden_elsewhere.jsonl", ITEMS[2:5])
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\ncrucible_golden_files = golden/golden_*.jsonl\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*2 passed*"])  # golden/ only: other/golden_elsewhere.jsonl is not under golden/


def test_a_red_build_with_a_passed_gate_says_what_made_it_red(pytester: pytest.Pytester) -> None:
    # strict outcome (the default) and answers judged: items whose answer is wrong fail, whatever the gate says
    items = [{**item, "reference": "Bikes can be returned within 30 days." if n % 2 else "The PB500 battery charges in 4 hours."}
             for n, item in enumerate(ITEMS)]
    write_golden(pytester.path / "golden_set.jsonl", items)
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini("[pytest]\ncrucible_judge = lexical\n")
    assert pytester.runpytest("-p", "no:randomly").ret == pytest.ExitCode.TESTS_FAILED
    for quiet in ([], ["-q"]):
        result = pytester.runpytest("-p", "no:randomly", "--crucible-baseline=latest", *quiet)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        out = result.stdout.lines
        crucible_lines = [line for line in out if line.startswith(("crucible run", "build failed", "gate passed"))]
        assert crucible_lines[-1].startswith("build failed: ") and "failed their checks (strict outcome); the gate passed: " \
            "--crucible-outcome=record lets the gate decide" in crucible_lines[-1], out[-12:]
    result = pytester.runpytest("-p", "no:randomly", "--crucible-baseline=latest", "--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.OK and "build failed" not in result.stdout.str()
