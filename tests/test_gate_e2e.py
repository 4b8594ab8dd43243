"""The session gate, end to end: baseline, regression, export, refusals."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import crucible_cli, db_rows, write_project

from pytest_crucible.cli import main as crucible_main

N_ITEMS = 30
ITEMS = [{"id": f"g-{i:03d}", "question": f"question {i}", "citations": [{"docId": f"doc{i}", "mode": "required"}]} for i in range(N_ITEMS)]

# The relevant document is ranked first, unless the config says "degrade": then, for
# most items, it sinks to rank 4 (still within K, so items pass but nDCG falls).
CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        rank = 3 if config.get("degrade") and n % 5 else 0
        if config.get("improve"):
            rank = 0
        elif not config.get("degrade") and n % 3 == 0:
            rank = 1
        docs = [f"noise{j}" for j in range(5)]
        docs.insert(rank, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d} for d in docs]}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    # The gate is about retrieval here: component mode, no answers to judge; strict outcomes.
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_mode = component",
                         configs={"base.json": {}, "degraded.json": {"degrade": True}, "improved.json": {"improve": True}})


def db(pytester: pytest.Pytester) -> str:
    return str(pytester.path / ".crucible" / "crucible.db")


def test_regression_fails_the_session_naming_the_metric(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=degraded.json", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=N_ITEMS, failed=1)  # every item passed; the gate (crucible::gate) failed the build
    result.stdout.fnmatch_lines([
        "baseline * -> this run *", "  30 paired items, seed 1337, p Holm-adjusted over *",
        "*ndcgAt10 * regressed*",
        "  config degrade: None -> True",
        "GATE FAILED ndcgAt10 regressed: * -> * (delta -0.*, 95% CI [[]-0.*, -0.*[]], p = 0.0*, n = 30)",
        "GATE FAILED mrr regressed:*",
    ])
    # recall did not move (the document is still retrieved): not significant, so not a failure.
    result.stdout.no_fnmatch_line("GATE FAILED recall@*")


def test_same_config_twice_passes_the_gate(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=base.json", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*ndcgAt10 * +0.0000 [[]+0.000, +0.000[]] 1.000  ns (no item changed)", "gate passed: no significant regression"])


def test_improvement_passes_and_gate_subset_ignores_other_metrics(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=improved.json", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*ndcgAt10 * improved*"])
    # Gating only recall: the nDCG regression is shown but does not fail the build.
    result = project.runpytest("--crucible-config=degraded.json", "--crucible-baseline=latest", "--crucible-gate=recallAtK")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["  ndcgAt10* * regressed", "  * * = not gated"])


def test_baseline_from_an_exported_file(project: pytest.Pytester, tmp_path) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    exported = tmp_path / "baseline-run.json"
    assert crucible_main(["export", "latest", "--db", db(project), "-o", str(exported)]) == 0
    # A fresh database (as on a CI machine) with only the committed export as baseline.
    result = project.runpytest("--crucible-config=degraded.json", f"--crucible-baseline={exported}", "--crucible-db=fresh.db")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["GATE FAILED ndcgAt10 regressed*"])
    result = project.runpytest("--crucible-config=base.json", f"--crucible-baseline={exported}", "--crucible-db=fresh.db")
    assert result.ret == pytest.ExitCode.OK


def test_floor_fails_without_a_baseline(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-fail-under=ndcgAt10=0.99")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["GATE FAILED ndcgAt10 = 0.8* is below the floor 0.99"])
    assert project.runpytest("--crucible-fail-under", "ndcgAt10=0.5,hitAtK=1").ret == pytest.ExitCode.OK


@pytest.mark.parametrize("args, message", [
    (["--crucible-baseline=latest"], "ERROR: --crucible-baseline=latest: *: no crucible database here"),
    (["--crucible-baseline=missing.json"], "ERROR: --crucible-baseline=missing.json: missing.json: cannot read the exported run*"),
    (["--crucible-fail-under=ndcgAt10"], "ERROR: --crucible-fail-under 'ndcgAt10': expected METRIC=VALUE"),
    # A CI variable that expands to nan or inf must not switch the floor, or the cost cap, off.
    (["--crucible-fail-under=ndcgAt10=nan"], "ERROR: --crucible-fail-under 'ndcgAt10=nan': the floor must be a finite number, got 'nan'"),
    (["--crucible-fail-under=ndcgAt10=-inf"], "ERROR: --crucible-fail-under 'ndcgAt10=-inf': the floor must be a finite number, got '-inf'"),
    (["--crucible-max-cost=nan"], "*--crucible-max-cost: expected a finite amount of at least 0, got 'nan'"),
])
def test_gate_usage_errors_come_before_tests(project: pytest.Pytester, args, message) -> None:
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_unknown_baseline_run_id_is_a_usage_error(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-baseline=ZZZZZZ")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-baseline=ZZZZZZ: no run matches 'ZZZZZZ'*"])


@pytest.mark.slow
def test_judge_mismatch_is_refused(project: pytest.Pytester, tmp_path, capsys) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert project.runpytest().ret == pytest.ExitCode.OK
    conn = sqlite3.connect(db(project))
    first, second = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY rowid")]
    conn.execute("UPDATE runs SET judge_model = 'claude-haiku-5-5', judge_prompt_version = 'ragas-v1' WHERE id = ?", [first])
    conn.execute("UPDATE runs SET judge_model = 'lexical-v1', judge_prompt_version = 'ragas-v1' WHERE id = ?", [second])
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert crucible_main(["compare", first, second, "--db", db(project)]) == 3
    err = capsys.readouterr().err
    assert f"refusing to compare run {first} with run {second}: different judge models (claude-haiku-5-5 vs lexical-v1)" in err
    # The same refusal at session end fails the run instead of passing it silently.
    exported = tmp_path / "judged.json"
    assert crucible_main(["export", first, "--db", db(project), "-o", str(exported)]) == 0
    document = json.loads(exported.read_text())
    assert document["run"]["judge_model"] == "claude-haiku-5-5"
    # (A component run has no judge, so only a judged run can disagree with the baseline's judge.)
    result = project.runpytest_subprocess(f"--crucible-baseline={exported}", "--crucible-mode=system", "--crucible-judge=lexical",
                                          "--crucible-outcome=record")
    assert result.ret == 3  # refused: never a pass, and not mistaken for a regression either
    result.stdout.fnmatch_lines([f"GATE REFUSED refusing to compare run {first} with run *: different judge models*",
                                 "HINT: judge-based metrics are only comparable under the same judge*"])
    result.stdout.no_fnmatch_line("gate passed*")


def test_the_session_compares_once_and_every_surface_reads_that_verdict(project: pytest.Pytester, monkeypatch) -> None:
    import pytest_crucible.verdict.comparison as comparison

    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    calls = []
    real = comparison.compare_run_data
    monkeypatch.setattr(comparison, "compare_run_data", lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))
    result = project.runpytest("--crucible-config=degraded.json", "--crucible-baseline=latest", "--crucible-html=report.html",
                               "--crucible-fail-under=ndcgAt10=0.6")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert len(calls) == 1  # the gate's comparison; the HTML report was handed it, not recomputed
    page = (project.path / "report.html").read_text()
    assert 'id="gate-verdict" data-verdict="failed"' in page
    gate_failures = [line[len("GATE FAILED "):] for line in result.stdout.lines if line.startswith("GATE FAILED ")]
    assert any(line.startswith("ndcgAt10 regressed") for line in gate_failures)
    assert "ndcgAt10 = 0.5445 is below the floor 0.6" in gate_failures
    for failure in gate_failures:
        assert f"GATE FAILED {failure}" in page.replace("&gt;", ">").replace("&#39;", "'")
    # `crucible compare` with the same options gives the same failures, in the same words, and exit code.
    monkeypatch.undo()
    conn = sqlite3.connect(db(project))
    base, degraded = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY rowid")]
    conn.close()
    cli = crucible_cli("compare", base, degraded, "--db", db(project), "--fail-under", "ndcgAt10=0.6")
    assert cli.ret == 1
    assert [line[len("GATE FAILED "):] for line in cli.errlines if line.startswith("GATE FAILED ")] == gate_failures


def test_cli_compare_takes_the_gates_options(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    assert project.runpytest("--crucible-config=degraded.json").ret == pytest.ExitCode.OK
    conn = sqlite3.connect(db(project))
    base, degraded = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY rowid")]
    conn.close()
    # Only recall is gated, and recall did not move: the regression of nDCG is reported, not gated.
    passed = crucible_cli("compare", base, degraded, "--db", db(project), "--gate", "recallAtK")
    assert passed.ret == 0
    passed.stdout.fnmatch_lines(["*ndcgAt10* regressed", "gate passed: no significant regression"])
    # A gated metric that neither run measured fails, as in the session gate.
    missing = crucible_cli("compare", base, degraded, "--db", db(project), "--gate", "faithfulness")
    assert missing.ret == 1
    missing.stderr.fnmatch_lines(["GATE FAILED gated metric faithfulness was not measured in either run"])
    bad = crucible_cli("compare", base, degraded, "--db", db(project), "--fail-under", "ndcgAt10")
    assert bad.ret == 2
    bad.stderr.fnmatch_lines(["crucible: --fail-under 'ndcgAt10': expected METRIC=VALUE", "HINT: *"])
    bad = crucible_cli("compare", base, degraded, "--db", db(project), "--fail-under", "ndcgAt10=NaN")
    assert bad.ret == 2
    bad.stderr.fnmatch_lines(["crucible: --fail-under 'ndcgAt10=NaN': the floor must be a finite number, got 'NaN'", "HINT: *"])


def test_non_inferiority_margins_pass_only_on_evidence(project: pytest.Pytester, tmp_path) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    # Unchanged: the interval is [0, 0], no drop beyond the margin is possible.
    same = project.runpytest("--crucible-config=base.json", "--crucible-baseline=latest", "--crucible-margin=ndcgAt10=0.02")
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["*ndcgAt10 * +0.0000 [[]+0.000, +0.000[]] 1.000  non-inferior", "*margins: ndcgAt10 0.02",
                               "gate passed: no significant regression"])
    base = db_rows(project, "SELECT id FROM runs ORDER BY rowid")[0][0]
    # Degraded by about 0.33: the whole interval is beyond a margin of 0.05 -> inferior, the build fails.
    worse = project.runpytest("--crucible-config=degraded.json", f"--crucible-baseline={base}", "--crucible-margin=ndcgAt10=0.05")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(["*ndcgAt10 * inferior",
                                "GATE FAILED ndcgAt10 is inferior: it dropped by more than the margin 0.05 (*)"])
    # A margin wider than anything these 30 items can rule out: neither shown -> inconclusive, with the items
    # that would tell; also a failure (a green build needs the evidence). The ini key works the same way.
    ini = (project.path / "tox.ini").read_text().rstrip("\n") + "\ncrucible_margins = ndcgAt10=0.4\n"
    (project.path / "tox.ini").write_text(ini)
    unsure = project.runpytest("--crucible-config=degraded.json", f"--crucible-baseline={base}")
    assert unsure.ret == pytest.ExitCode.TESTS_FAILED
    unsure.stdout.fnmatch_lines(["GATE FAILED ndcgAt10 is inconclusive against the margin 0.4: a drop of up to 0.* is not "
                                 "ruled out (*); about * items would tell"])
    # The same verdict from `crucible compare`, and a margin that is no number is a usage error.
    current = db_rows(project, "SELECT id FROM runs ORDER BY rowid")[-1][0]
    compared = crucible_cli("compare", base, current, "--db", db(project), "--margin", "ndcgAt10=0.4")
    assert compared.ret == 1
    compared.stderr.fnmatch_lines(["GATE FAILED ndcgAt10 is inconclusive against the margin 0.4*"])
    for bad, message in (("ndcgAt10=nan", "the margin must be a finite number, got 'nan'"),
                         ("ndcgAt10=0", "a margin is the largest drop that does not matter, above 0")):
        result = project.runpytest(f"--crucible-margin={bad}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --crucible-margin *{message}"])


RED, GREEN, RESET = "\x1b[31m", "\x1b[32m", "\x1b[0m"


def coloured(result: pytest.RunResult, start: str) -> str | None:
    """The colour code (or "" for none) of the first line of the output that starts with ``start`` once
    its colour is taken off; None when there is no such line."""
    for line in result.stdout.lines:
        for code in (RED, GREEN):
            if line.startswith(code) and line[len(code):].startswith(start):
                return code
        if line.startswith(start):
            return ""
    return None


def test_each_level_of_the_summary_gets_its_colour(project: pytest.Pytester) -> None:
    """--color=yes: alerts and a regressed row red, an improved row and a passed gate green, plain lines and
    the HINT under an alert uncoloured; under -q the one line ends with the verdict, in its colour."""
    (project.path / "golden_empty.jsonl").write_text("")  # a golden file without items: a WARNING and its HINT
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = project.runpytest("--color=yes", "--crucible-config=improved.json", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    assert coloured(result, "  ndcgAt10") == GREEN  # improved
    assert coloured(result, "gate passed: no significant regression") == GREEN
    assert coloured(result, "WARNING 1 golden file(s) hold no items") == RED
    assert coloured(result, "HINT: one JSON object per line") == ""
    assert coloured(result, "baseline ") == "" and coloured(result, "db ") == ""

    result = project.runpytest("--color=yes", "--crucible-config=degraded.json", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert coloured(result, "  ndcgAt10") == RED  # regressed
    assert coloured(result, "GATE FAILED ndcgAt10 regressed") == RED
    assert coloured(result, "  recall@") == ""  # not significant

    with sqlite3.connect(db(project)) as conn:  # the improved run: the latest is now the degraded one
        improved = conn.execute("SELECT id FROM runs ORDER BY rowid").fetchall()[1][0]
    result = project.runpytest("-q", "--color=yes", "--crucible-config=degraded.json", f"--crucible-baseline={improved}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    [one] = [line for line in result.stdout.lines if "crucible run " in line]
    assert one.startswith(RED) and one.endswith(f"; GATE FAILED{RESET}")
    assert coloured(result, "GATE FAILED ndcgAt10 regressed") == RED  # an alert: -q keeps it
    assert coloured(result, "HINT: one JSON object per line") == ""  # kept too, with its warning
    assert coloured(result, "  ndcgAt10") is None  # the table is not
