"""A judgment added between two runs moves the ruler: the comparison says so, and --rescore scores
both runs against today's grades so that only the system changed."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest
from helpers import write_project
from test_no_silent_pass import CONFTEST, ITEMS

from pytest_crucible.metrics.retrieval import RETRIEVAL_METRICS
from pytest_crucible.store import Store
from pytest_crucible.verdict.ruler import rescored
from pytest_crucible.verdict.runs import load_run


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return write_project(pytester, ITEMS, CONFTEST)


def db(project: pytest.Pytester) -> str:
    return str(project.path / ".crucible" / "crucible.db")


def run_ids(project: pytest.Pytester) -> list[str]:
    conn = sqlite3.connect(db(project))
    try:
        return [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY rowid")]
    finally:
        conn.close()


def override(project: pytest.Pytester, query: str, unit: str, grade: str) -> None:
    done = project.run(sys.executable, "-m", "pytest_crucible.cli", "qrels", "override", query, unit, grade, "--by", "dana",
                       "--db", db(project))
    assert done.ret == 0, done.stderr.str()


def test_rescoring_a_run_against_its_own_grades_reproduces_its_metrics(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == 0
    store = Store.open(db(project), create=False)
    try:
        run = load_run(store, run_ids(project)[0], golden=True, rankings=True)
        again = rescored(run, {item["id"]: item for item in run.golden}, store.judgment_ledger(run.item_ids))
    finally:
        store.close()
    assert {m: run.metrics[m] for m in RETRIEVAL_METRICS} == {m: again.metrics[m] for m in RETRIEVAL_METRICS}


@pytest.mark.slow
def test_a_judgment_between_two_runs_is_named_and_rescore_removes_it(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == 0
    # Between the runs, a reviewer grades a noise chunk that every second item retrieves as relevant.
    for item in ITEMS[:8]:
        override(project, item["id"], "noise0#1", "3")
    result = project.runpytest("--crucible-baseline=latest")
    # The warning, wrapped at 100 columns with its continuation lines indented, read back as one line.
    warning = "WARNING the relevance grades of 8 paired item(s) changed between the runs "
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith(warning.split(" (")[0]))
    end = next(i for i in range(start + 1, len(lines) + 1) if i == len(lines) or not lines[i].startswith("  "))
    assert " ".join(line.strip() for line in lines[start:end]) == (
        warning + "(q-00, q-01, q-02, q-03, q-04, ...): their retrieval deltas mix the system's change with the ruler's; "
        "--crucible-rescore (crucible compare --rescore) scores both runs against today's grades")
    assert all(len(line) <= 100 for line in lines[start:end])
    moved = [line for line in result.stdout.lines if line.strip().startswith("precision@10")]
    assert moved and "no item changed" not in moved[0]  # the ruler moved precision, not the system

    # The ruler alone made precision "improve" significantly; scored against today's grades, nothing changed.
    result.stdout.fnmatch_lines(["  precision@10  * improved"])
    first = run_ids(project)[0]
    rescored_run = project.runpytest(f"--crucible-baseline={first}", "--crucible-rescore")
    assert rescored_run.ret == 0
    rescored_run.stdout.fnmatch_lines(["NOTE rescored: both runs' retrieval metrics recomputed from their stored rankings*",
                                       "  *grades (8 paired item(s) had changed)",
                                       "  precision@10  * ns (no item changed)", "gate passed*"])
    third = run_ids(project)[2]
    cli = project.run(sys.executable, "-m", "pytest_crucible.cli", "compare", first, third, "--rescore", "--json", "--db", db(project))
    document = json.loads(cli.stdout.str())
    assert all(document["metrics"][m]["delta"] == 0.0 for m in RETRIEVAL_METRICS)
    assert document["gate"]["warnings"][0].startswith("NOTE rescored")
