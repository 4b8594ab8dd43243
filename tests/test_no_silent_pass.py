"""The gate never passes on nothing and nothing leaves the pairs silently: runs that scored no item,
gated metrics with too few pairs, errored items, metric names as the summary shows them, and
duplicate golden item ids."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import COMPONENT_RECORD, crucible_cli, numbered_items, write_project

N_ITEMS = 13
ITEMS = numbered_items(N_ITEMS)

# FAIL_ITEMS (a comma list of item numbers, or "all") makes those pipeline calls raise.
CONFTEST = """
import os
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        failing = os.environ.get("FAIL_ITEMS", "")
        if failing == "all" or str(n) in failing.split(","):
            raise ValueError(f"index not built for {item.id}")
        docs = [f"noise{j}" for j in range(4)]
        docs.insert(0 if n % 3 else 1, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d} for d in docs]}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return write_project(pytester, ITEMS, CONFTEST)


def runs(project: pytest.Pytester) -> list[tuple]:
    conn = sqlite3.connect(project.path / ".crucible" / "crucible.db")
    try:
        return conn.execute("SELECT id, status, n_items, n_scored, n_errored, n_skipped FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()


def cli(project: pytest.Pytester, *args: str):
    return crucible_cli(*args, "--db", str(project.path / ".crucible" / "crucible.db"))


def test_a_run_that_scored_nothing_is_failed_and_never_a_baseline(project: pytest.Pytester, monkeypatch) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    monkeypatch.setenv("FAIL_ITEMS", "all")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*status failed*", "items 13 (13 error): 0 scored, 13 errored",
                                 "  no metrics: every item's pipeline call errored (13 errored); this run is failed"])
    (good, *_), (errored, status, n, scored, n_errored, skipped) = runs(project)
    assert (status, n, scored, n_errored, skipped) == ("failed", 13, 0, 13, 0)
    monkeypatch.delenv("FAIL_ITEMS")
    # `latest` is the good run, never the failed one; naming the failed run as a baseline is refused.
    assert project.runpytest("--crucible-baseline=latest").ret == pytest.ExitCode.OK
    refused = project.runpytest(f"--crucible-baseline={errored}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: --crucible-baseline={errored}: run {errored} is failed (no item was scored: "
                                  "every pipeline call errored); refusing to compare against it", "HINT: *"])
    # The CLI gives the same verdict: a refusal, exit 3, never a pass.
    compared = cli(project, "compare", errored, good)
    assert compared.ret == 3
    compared.stderr.fnmatch_lines([f"GATE REFUSED run {errored} is failed*"])
    shown = cli(project, "show", errored)
    shown.stdout.fnmatch_lines(["  no metrics: every item's pipeline call errored (13 errored); this run is failed"])


def test_a_gate_with_too_few_pairs_refuses_and_names_the_items_left_out(project: pytest.Pytester, monkeypatch) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    monkeypatch.setenv("FAIL_ITEMS", ",".join(str(i) for i in range(9)))  # 9 of 13 raise: 4 pairs are left
    result = project.runpytest("--crucible-baseline=latest")
    assert result.ret == 3
    result.stdout.fnmatch_lines([
        "  4 paired items, seed 1337, no gated metric has a p-value to adjust",
        "  9 items left out of the pairs:",
        "    q-00: errored in B: ValueError: index not built for q-00",
        "*... and 4 more (crucible compare --json lists every one)",
        "GATE REFUSED no metric has 6 pairs (recall@10 4, *; 4 paired items, 9 left out): *",
        "HINT: *crucible_min_pairs*",
    ])
    result.stdout.no_fnmatch_line("gate passed*")
    good, bad = [row[0] for row in runs(project)]
    document = json.loads(cli(project, "compare", good, bad, "--json").stdout.str())
    assert document["gate"]["verdict"] == "refused" and document["pairedItems"] == 4
    assert [entry["id"] for entry in document["excluded"]] == [f"q-{i:02d}" for i in range(9)]
    assert {entry["reason"].split(":")[0] for entry in document["excluded"]} == {"errored in B"}
    # With enough pairs left, the items that errored are still named, and the gate gives a verdict.
    monkeypatch.setenv("FAIL_ITEMS", "3,7")
    result = project.runpytest(f"--crucible-baseline={good}", "--crucible-html=report.html")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the two items failed; the gate itself passed
    result.stdout.fnmatch_lines(["  11 paired items, seed 1337, p Holm-adjusted over *", "  2 items left out of the pairs:",
                                 "    q-03: errored in B: ValueError*", "    q-07: errored in B: ValueError*",
                                 "gate passed: no significant regression"])
    page = (project.path / "report.html").read_text()
    assert 'data-item="q-03"' in page and 'data-item="q-07"' in page and "errored in B: ValueError" in page


def test_min_pairs_is_an_ini_option(project: pytest.Pytester, monkeypatch) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    monkeypatch.setenv("FAIL_ITEMS", ",".join(str(i) for i in range(9)))
    project.makeini(f"[pytest]\n{COMPONENT_RECORD}\ncrucible_min_pairs = 4\n")
    result = project.runpytest("--crucible-baseline=latest")
    result.stdout.fnmatch_lines(["gate passed: no significant regression"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # only the errored items fail


@pytest.mark.parametrize("option", ["--crucible-gate=ndcg@10,recall@10", "--crucible-fail-under=recall@10=0.5"])
def test_metric_names_as_the_summary_shows_them_are_accepted(project: pytest.Pytester, option: str) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-baseline=latest", option)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["gate passed*"])


@pytest.mark.parametrize("option, message", [
    ("--crucible-gate=ndcg", "ERROR: --crucible-gate: unknown metric 'ndcg'"),
    ("--crucible-fail-under=recal@5=0.9", "ERROR: --crucible-fail-under 'recal@5=0.9': unknown metric 'recal@5'"),
    ("--crucible-gate=recall@10", "ERROR: --crucible-gate: metric 'recall@10': this run's K is 5 (ini crucible_k)*"),
])
def test_an_unknown_metric_name_is_a_usage_error_before_any_pipeline_call(project: pytest.Pytester, option, message) -> None:
    (project.path / "k5.json").write_text('{"retrievalLimit": 5}')
    result = project.runpytest("--crucible-config=k5.json", "--crucible-k=5", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message, "HINT: *"])
    assert not (project.path / ".crucible" / "crucible.db").exists()  # nothing ran


def test_cli_compare_takes_display_names_and_refuses_unknown_ones(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert project.runpytest().ret == pytest.ExitCode.OK
    a, b = [row[0] for row in runs(project)]
    assert cli(project, "compare", a, b, "--gate", "ndcg@10", "--fail-under", "recall@10=0.5").ret == 0
    bad = cli(project, "compare", a, b, "--gate", "nDCG")
    assert bad.ret == 2
    bad.stderr.fnmatch_lines(["crucible: --gate: unknown metric 'nDCG'", "HINT: did you mean *ndcg*"])


def test_the_same_id_in_two_golden_files_is_a_collection_error(project: pytest.Pytester) -> None:
    (project.path / "golden_more.jsonl").write_text(json.dumps({"id": "extra", "question": "x"}) + "\n"
                                                    + json.dumps(ITEMS[4]) + "\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's own code for collection errors
    result.stdout.fnmatch_lines(["*golden_set.jsonl:5: field 'id': duplicate id 'q-04' (also at golden_more.jsonl:2)*",
                                 "*HINT: golden item ids must be unique across every golden file*"])
    assert not (project.path / ".crucible" / "crucible.db").exists()


MIXED_CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        rank = 3 if config.get("degrade") and item.kind == "retrieval" else 0  # only the retrieval questions sink
        docs = [f"noise{j}" for j in range(5)]
        docs.insert(rank, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d} for d in docs]}
    return pipeline
"""


def test_a_run_that_mixes_kinds_is_measured_and_gated_kind_by_kind(pytester: pytest.Pytester) -> None:
    items = [{"id": f"r-{i:02d}", "question": f"question {i}", "citations": [{"docId": f"doc{i}", "mode": "required"}]}
             for i in range(8)]
    items += [{"id": f"a-{i:02d}", "question": f"look-alike {i}", "kind": "adversarial",
               "citations": [{"docId": f"doc{i}", "mode": "required"}]} for i in range(20, 50)]
    write_project(pytester, items, MIXED_CONFTEST, configs={"degrade.json": {"degrade": True}})
    first = pytester.runpytest()
    assert first.ret == pytest.ExitCode.OK
    first.stdout.fnmatch_lines(["this run mixes kinds of question: every mean is of one kind*",
                                "retrieval questions:", "  metric *", "  recall@10 * 8", "adversarial questions:",
                                "  metric *", "  recall@10 * 30"])
    # Only the 8 retrieval questions regress: pooled with 30 look-alikes their nDCG drop is diluted;
    # compared kind by kind it is a regression of the retrieval questions, named so.
    # (nDCG is the gated metric: 8 pairs reach p = 0.008 at best, which Holm over every metric would not keep.)
    result = pytester.runpytest("--crucible-config=degrade.json", "--crucible-baseline=latest", "--crucible-gate=ndcgAt10")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["  retrieval questions:", "  ndcgAt10 * regressed", "  adversarial questions:",
                                 "  ndcgAt10 * ns (no item changed)",
                                 "GATE FAILED ndcgAt10 [[]retrieval[]] regressed: 1.0000 -> 0.4307 *"])
    result.stdout.no_fnmatch_line("GATE FAILED ndcgAt10 [[]adversarial[]]*")
    # A floor holds each kind to it: the retrieval questions miss it, the look-alikes do not.
    floor = pytester.runpytest("--crucible-config=degrade.json", "--crucible-fail-under=ndcgAt10=0.9")
    floor.stdout.fnmatch_lines(["GATE FAILED ndcgAt10 [[]retrieval[]] = 0.4307 is below the floor 0.9"])
    floor.stdout.no_fnmatch_line("GATE FAILED ndcgAt10 [[]adversarial[]]*")


def test_the_default_minimum_of_pairs_is_the_fewest_with_which_p_can_fall_below_005() -> None:
    from pytest_crucible.defaults import MIN_PAIRS
    from pytest_crucible.stats import min_pairs_for_alpha

    assert MIN_PAIRS == min_pairs_for_alpha(0.05) == 6
