"""crucible among the pytest plugins and flags teams already use, each through pytest with the real plugin installed.

pytest-rerunfailures (every attempt kept, the last one is the result), a partial selection (-k, -m, --lf, -x: recorded,
never `latest`), the ``crucible`` marker, pytest-repeat (refused, naming --crucible-repeat), pytest-randomly (the same
numbers in any order), pytest-timeout (an item stopped is stored errored, the run incomplete), pytest-asyncio (an async
pipeline in both modes), pytest-html (crucible's column and the gate's row), and a provider key in the environment
(credentials, never the choice of judge). Inner runs start without the reordering plugins (tests/conftest.py): a test
that combines one with crucible names it with ``-p``.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
from helpers import crucible_cli, point_anthropic_at, write_golden

from pytest_crucible.store import Store

ITEMS = [{"id": f"h{i:02d}", "question": f"What does rule {i} say?", "citations": [{"docId": "d0", "mode": "required"}],
          "tags": ["topic:a"] if i % 2 else ["topic:b"], "kind": "adversarial" if i == 11 else "retrieval",
          **({"attack": {"category": "injection"}} if i == 11 else {})} for i in range(12)]

# Items named in the project's FLAKY file fail their first attempt (the required chunk is missing), and pass after:
# the marker file records the first attempt, so the behaviour holds across xdist workers.
CONFTEST = """
import os
from pathlib import Path

import pytest
import pytest_crucible as crucible

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def crucible_pipeline():
    flaky = set((HERE / "FLAKY").read_text().split()) if (HERE / "FLAKY").exists() else set()
    broken = set((HERE / "BROKEN").read_text().split()) if (HERE / "BROKEN").exists() else set()

    def pipeline(question, *, item, config, mode):
        hits = [crucible.Retrieved(chunk_id=f"d{i}#p1", doc_id=f"d{i}", text=f"rule text {i}") for i in range(3)]
        first = HERE / f"tried-{item.id}"
        if item.id in flaky and not first.exists():
            first.write_text("1")
            if item.id.endswith("5"):
                raise ConnectionError("the index was restarting")
            hits = hits[1:]
        if item.id in broken:
            hits = hits[1:]
        return crucible.PipelineResult(answer=None, retrieved=hits, blocked=item.kind == "adversarial")

    return pipeline
"""
INI = "[pytest]\ncrucible_mode = component\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_golden(pytester.path / "golden_rules.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    return pytester


def runs(db: Path | str) -> list[dict]:
    store = Store.open(db)
    try:
        return list(reversed(store.list_runs()))  # oldest first
    finally:
        store.close()


def selection(run: dict) -> dict | None:
    return json.loads(run["selection"]) if run.get("selection") else None


def said(result: pytest.RunResult, text: str) -> bool:
    """Whether the output says ``text``, whatever the 100-column wrapping of the summary did to it."""
    return text in " ".join(line.strip() for line in result.stdout.lines)


def db_arg(database) -> str:
    return f"--crucible-db={database}"


# -- pytest-rerunfailures -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_rerun_keeps_every_attempt_and_stores_the_last_as_the_result(project: pytest.Pytester, database, workers) -> None:
    (project.path / "FLAKY").write_text("h03 h05")  # h03 misses its chunk once, h05 raises once: both pass on rerun
    result = project.runpytest_subprocess("--reruns", "2", db_arg(database), "--junitxml=junit.xml", *workers)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*12 passed, 2 rerun*"])
    result.stdout.fnmatch_lines(["2 items passed on rerun: h03, h05 (their earlier attempts are kept*"])
    assert "FAULT" not in result.stdout.str() and "lost" not in result.stdout.str()
    (run,) = runs(database)
    assert (run["status"], run["n_items"], run["n_errored"], selection(run)) == ("complete", 12, 0, None)
    store = Store.open(database)
    try:
        outcomes = {row["item_id"]: row["outcome"] for row in store.results(run["id"])}
        attempts = store.item_attempts(run["id"])
    finally:
        store.close()
    assert set(outcomes.values()) == {"passed"} and len(outcomes) == 12  # the transient error did not stay an error
    assert [(a["item_id"], a["attempt"], a["outcome"], a["final"]) for a in attempts] == [
        ("h03", 1, "failed", "passed"), ("h05", 1, "error", "passed")]
    assert attempts[0]["error_class"] == "retrieval_miss" and attempts[0]["metrics"]["recallAtK"] == 0.0
    assert "ConnectionError: the index was restarting" in attempts[1]["error"]
    # junit has a test case per attempt (pytest-rerunfailures reports each), each with its own properties once.
    cases = ElementTree.parse(project.path / "junit.xml").getroot().iter("testcase")
    properties = [[(p.get("name"), p.get("value")) for p in case.iter("property")] for case in cases if case.get("name") == "h03"]
    assert [dict(props).get("crucible.attempt") for props in properties] == [None, "2"]
    assert [sum(name == "crucible.itemId" for name, _ in props) for props in properties] == [1, 1]
    assert [dict(props)["crucible.errorClass"] for props in properties] == ["retrieval_miss", "correct"]

    shown = crucible_cli("show", run["id"], "--item", "h03", "--db", str(database))
    assert shown.ret == 0
    shown.stdout.fnmatch_lines(["outcome    passed, error class correct", "attempt 1  failed (retrieval_miss): *"])
    detail = json.loads(crucible_cli("show", run["id"], "--item", "h05", "--db", str(database), "--json").stdout.str())
    assert [(a["attempt"], a["outcome"]) for a in detail["attempts"]] == [(1, "error")]


def test_an_item_that_fails_every_attempt_fails_and_is_stored_once(project: pytest.Pytester) -> None:
    (project.path / "BROKEN").write_text("h04")
    result = project.runpytest("--reruns", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["1 item failed on every attempt: h04"])
    (run,) = runs(project.path / ".crucible/crucible.db")
    store = Store.open(project.path / ".crucible/crucible.db")
    try:
        assert [(a["attempt"], a["outcome"]) for a in store.item_attempts(run["id"], "h04")] == [(1, "failed"), (2, "failed")]
        assert {row["item_id"]: row["outcome"] for row in store.results(run["id"])}["h04"] == "failed"
    finally:
        store.close()
    assert (run["status"], run["n_items"]) == ("complete", 12)


def test_the_flaky_marker_on_a_golden_test_keeps_its_attempts(project: pytest.Pytester) -> None:
    (project.path / "FLAKY").write_text("h02")
    (project.path / "golden_rules.jsonl").rename(project.path / "rules.jsonl")
    project.makepyfile(test_rules="""
        import pytest
        import pytest_crucible as crucible

        @pytest.mark.flaky(reruns=1)
        @crucible.golden("rules.jsonl")
        def test_rule(golden_item, crucible_evaluate):
            assert crucible_evaluate().metrics["recallAtK"] == 1.0
    """)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["1 item passed on rerun: h02*"])


# -- partial selections -------------------------------------------------------------------------------------------
def test_a_k_selection_is_recorded_never_latest_and_compared_on_its_items(project: pytest.Pytester, database) -> None:
    assert project.runpytest(db_arg(database)).ret == pytest.ExitCode.OK
    full = runs(database)[0]
    result = project.runpytest(db_arg(database), "-k", "h0", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([
        "subset: 10 of 12 golden items selected (-k h0): never `latest`*",
        "subset: 10 of 12 golden items selected (-k h0); only the selected items were compared",
        f"baseline {full['id']} -> this run *", "  10 paired items, *"])
    assert "missing from B" not in result.stdout.str()
    partial = runs(database)[1]
    assert selection(partial) == {"ran": 10, "held": 12, "by": "-k h0"} and partial["status"] == "complete"
    # The next run's `latest` is still the full run; the partial one can be named by its id, with a warning.
    again = project.runpytest(db_arg(database), "--crucible-baseline=latest")
    again.stdout.fnmatch_lines([f"baseline {full['id']} -> this run *"])
    named = project.runpytest(db_arg(database), f"--crucible-baseline={partial['id']}", "-o", "crucible_min_pairs=2")
    assert said(named, f"WARNING the baseline {partial['id']} is a subset (10 of 12 golden items selected (-k h0)): "
                       "only the items both runs have are compared")
    assert named.ret == pytest.ExitCode.OK
    exported = crucible_cli("export", "latest", "--db", str(database), "-o", str(project.path / "base.json"))
    assert exported.ret == 0
    assert json.loads((project.path / "base.json").read_text())["run"]["id"] != partial["id"]


def test_a_last_failed_loop_with_the_baseline_in_addopts_stays_usable(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    (project.path / "BROKEN").write_text("h03")
    project.makeini(INI + "addopts = --crucible-baseline=latest\n")
    failing = project.runpytest()
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    loop = project.runpytest("--lf")
    assert loop.ret == pytest.ExitCode.TESTS_FAILED  # the item still fails; the gate does not refuse
    loop.stdout.fnmatch_lines(["not gated: subset of 1 item (the gate needs 6 pairs; run the whole golden set to gate)"])
    assert "GATE REFUSED" not in loop.stdout.str()
    lf_run = runs(project.path / ".crucible/crucible.db")[-1]
    assert selection(lf_run) == {"ran": 1, "held": 12, "by": "--lf"}


def test_a_significant_regression_among_the_selected_items_still_fails(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    (project.path / "BROKEN").write_text(" ".join(f"h0{i}" for i in range(10)))
    result = project.runpytest("-k", "h0", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["subset: 10 of 12 golden items selected (-k h0); only the selected items were compared",
                                 "GATE FAILED recall@10 regressed*"])


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail=1"], ["-x", "-n", "2"]], ids=["x", "maxfail", "x-xdist"])
def test_a_session_stopped_early_is_interrupted_and_never_latest(project: pytest.Pytester, stop) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    (project.path / "BROKEN").write_text("h02")
    result = project.runpytest_subprocess(*stop)
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    stopped = runs(project.path / ".crucible/crucible.db")[-1]
    assert stopped["status"] == "interrupted" and stopped["n_items"] < 12
    later = project.runpytest("--crucible-baseline=latest", "-p", "no:cacheprovider")
    later.stdout.fnmatch_lines([f"baseline {runs(project.path / '.crucible/crucible.db')[0]['id']} -> this run *"])


def test_shards_are_partial_until_merged(project: pytest.Pytester) -> None:
    for group in (1, 2):
        assert project.runpytest("--splits", "2", "--group", str(group), "--crucible-run-id=shared",
                                 f"--crucible-db=shard-{group}.db").ret == pytest.ExitCode.OK
    shard = runs(project.path / "shard-1.db")[0]
    assert selection(shard)["by"] == "pytest-split group 1 of 2" and selection(shard)["held"] == 12
    merged = crucible_cli("merge", project.path / "shard-1.db", project.path / "shard-2.db", "-o", project.path / "merged.db")
    assert merged.ret == 0, merged.stderr.str()
    (run,) = runs(project.path / "merged.db")
    assert (run["n_items"], run["selection"]) == (12, None)


def test_reordering_only_is_a_full_run(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert project.runpytest("--ff").ret == pytest.ExitCode.OK
    assert [selection(run) for run in runs(project.path / ".crucible/crucible.db")] == [None, None]


# -- the crucible marker ------------------------------------------------------------------------------------------
def test_golden_items_carry_the_crucible_marker(project: pytest.Pytester) -> None:
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    only = project.runpytest("-m", "crucible", "--co", "-q")
    assert "test_plain.py::test_plain" not in only.stdout.str() and "golden_rules.jsonl::h07" in only.stdout.str()
    none = project.runpytest("-m", "not crucible")
    none.assert_outcomes(passed=1, deselected=12)
    assert not (project.path / ".crucible").exists()  # no golden item ran: no run, no store
    kind = project.runpytest("-m", "crucible(kind='adversarial')", "--co", "-q")
    kind.stdout.fnmatch_lines(["golden_rules.jsonl::h11", "*1/13 tests collected (12 deselected)*"])
    tag = project.runpytest("-m", "crucible(tag='topic:a')")
    tag.assert_outcomes(passed=6, deselected=7)
    assert "-m crucible(tag='topic:a')" in runs(project.path / ".crucible/crucible.db")[0]["selection"]


def test_marked_golden_tests_carry_the_crucible_marker_too(project: pytest.Pytester) -> None:
    (project.path / "golden_rules.jsonl").rename(project.path / "rules.jsonl")
    project.makepyfile(test_rules="""
        import pytest_crucible as crucible

        @crucible.golden("rules.jsonl", kind="retrieval")
        def test_rule(golden_item, crucible_evaluate):
            crucible_evaluate()
    """)
    project.runpytest("-m", "crucible(tag='topic:b')").assert_outcomes(passed=6, deselected=5)


# -- pytest-repeat --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_pytest_repeat_count_is_refused_before_any_call(project: pytest.Pytester, workers) -> None:
    result = project.runpytest_subprocess("--count", "3", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --count 3 (pytest-repeat) would run golden items as copies of one another" in result.stdout.str() + result.stderr.str()
    assert "HINT: use --crucible-repeat 3 instead" in result.stdout.str() + result.stderr.str()
    assert not list(project.path.glob("tried-*")) and not (project.path / ".crucible").exists()


def test_pytest_repeat_count_zero_is_a_clear_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--count", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --count 0: pytest-repeat runs every test at least once*", "HINT: *--crucible-repeat N*"])


def test_repeat_count_leaves_a_project_without_golden_items_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    pytester.runpytest("--count", "2").assert_outcomes(passed=2)


# -- pytest-randomly --------------------------------------------------------------------------------------------------
def test_a_random_order_stores_the_same_numbers_and_p_values(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    (project.path / "BROKEN").write_text("h01 h04 h08")
    ordered = project.runpytest("--crucible-baseline=latest", "-p", "no:cacheprovider")
    shuffled = project.runpytest("-p", "randomly", "-p", "randomly_seed=1234", "--crucible-baseline=" + runs(project.path / ".crucible/crucible.db")[0]["id"])
    if "randomly_seed" in shuffled.stderr.str():  # older pytest-randomly: the seed is an option
        shuffled = project.runpytest("-p", "randomly", "-p", "no:cacheprovider", "--randomly-seed=1234",
                                     "--crucible-baseline=" + runs(project.path / ".crucible/crucible.db")[0]["id"])
    assert "Using --randomly-seed=1234" in shuffled.stdout.str()
    table = [line for line in ordered.stdout.lines if line.startswith(("  recall@10", "  ndcgAt10"))]
    assert table and table == [line for line in shuffled.stdout.lines if line.startswith(("  recall@10", "  ndcgAt10"))]
    store = Store.open(project.path / ".crucible/crucible.db")
    try:
        first, second = runs(project.path / ".crucible/crucible.db")[1:3]
        assert store.item_metrics(first["id"]) == store.item_metrics(second["id"])
    finally:
        store.close()
    assert ordered.ret == shuffled.ret


# -- pytest-timeout --------------------------------------------------------------------------------------------------
def test_an_item_stopped_by_pytest_timeout_is_stored_errored_and_the_run_incomplete(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST.replace("        hits = [crucible", "        if item.id == 'h06':\n            import time; time.sleep(30)\n        hits = [crucible"))
    result = project.runpytest_subprocess("--timeout", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["WARNING 1 item stopped before its evaluation ended (pytest-timeout): h06;*incomplete"])
    (run,) = runs(project.path / ".crucible/crucible.db")
    assert (run["status"], run["n_items"], run["n_errored"]) == ("incomplete", 12, 1)
    store = Store.open(project.path / ".crucible/crucible.db")
    try:
        row = next(row for row in store.results(run["id"]) if row["item_id"] == "h06")
    finally:
        store.close()
    assert row["outcome"] == "error" and row["error"].startswith("stopped: Timeout (>2.0s) from pytest-timeout")


# -- pytest-asyncio ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "fixture"), [("auto", "pytest.fixture"), ("strict", "pytest.fixture"),
                                              ("auto", "pytest_asyncio.fixture"), ("strict", "pytest_asyncio.fixture")],
                         ids=["auto", "strict", "auto-async-fixture", "strict-async-fixture"])
def test_an_async_pipeline_works_with_pytest_asyncio(project: pytest.Pytester, mode: str, fixture: str) -> None:
    # The pipeline is a coroutine function; its fixture is either a plain one or an async one of pytest-asyncio's.
    project.makeconftest(f"""
        import asyncio
        import pytest
        import pytest_asyncio

        @{fixture}(scope="session"{', loop_scope="session"' if fixture.startswith("pytest_asyncio") else ""})
        {"async " if fixture.startswith("pytest_asyncio") else ""}def crucible_pipeline():
            async def pipeline(question, *, item, config, mode):
                await asyncio.sleep(0)
                return {{"retrieved": [{{"chunk_id": "d0#p1", "doc_id": "d0", "text": "rule text"}}],
                        "blocked": item.kind == "adversarial"}}
            return pipeline
    """)
    result = project.runpytest_subprocess("-p", "asyncio", "-o", f"asyncio_mode={mode}", "-o", "asyncio_default_fixture_loop_scope=function")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"asyncio: mode=*{mode.upper()}*"])
    assert runs(project.path / ".crucible/crucible.db")[0]["n_scored"] == 12


# -- pytest-html ------------------------------------------------------------------------------------------------------
def test_pytest_html_rows_show_crucible_and_the_gate(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("-p", "html", "-p", "metadata", "--html=report.html", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    page = (project.path / "report.html").read_text()
    import html as html_module
    import re

    blob = json.loads(html_module.unescape(re.search(r'data-jsonblob="([^"]*)"', page).group(1)))
    rows = {nodeid: report[0]["resultsTableRow"] for nodeid, report in blob["tests"].items()}
    assert "<td>passed, correct: ndcg@10 1.000 recall@10 1.000 mrr 1.000</td>" in rows["golden_rules.jsonl::h00"]
    assert "<td>gate passed: no significant regression</td>" in rows["crucible::gate"]
    assert '<th class="sortable" data-column-type="crucible">crucible</th>' in html_module.unescape(page) or "crucible</th>" in page


# -- what runs no test records no run ----------------------------------------------------------------------------------
@pytest.mark.parametrize("flags", [["--co"], ["--setup-plan"], ["--setup-only"], ["--fixtures"], ["--co", "-p", "no:cacheprovider"]])
def test_a_session_that_calls_no_pipeline_creates_no_store(project: pytest.Pytester, flags) -> None:
    result = project.runpytest("--crucible-run-id=fixed", *flags)
    assert result.ret == pytest.ExitCode.OK
    assert not (project.path / ".crucible").exists() and not list(project.path.glob("tried-*"))


def test_without_the_cache_plugin_a_run_is_recorded_as_usual(project: pytest.Pytester) -> None:
    assert project.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    assert [(run["status"], run["selection"]) for run in runs(project.path / ".crucible/crucible.db")] == [("complete", None)]


# -- a provider key in the environment ------------------------------------------------------------------------------
SYSTEM_CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        text = "Rule text says what it says."
        return {"answer": text + " [S1]", "retrieved": [{"chunk_id": "d0#p1", "doc_id": "d0", "text": text}]}
    return pipeline
"""


def test_a_key_in_the_environment_never_chooses_the_judge(project: pytest.Pytester, mock_anthropic, monkeypatch) -> None:
    point_anthropic_at(monkeypatch, mock_anthropic, "sk-ant-test-environment-only")
    project.makeconftest(SYSTEM_CONFTEST)
    project.makeini("[pytest]\ncrucible_outcome = record\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["judge lexical-v3 (offline heuristic)*",
                                 "NOTE ANTHROPIC_API_KEY is set: --crucible-judge=anthropic uses it (estimate before the first call)*"])
    assert mock_anthropic.received == []
    assert runs(project.path / ".crucible/crucible.db")[0]["judge_model"] == "lexical-v3"
    # The one ini line that keeps the earlier behaviour: auto picks Claude when the key is set.
    project.makeini("[pytest]\ncrucible_outcome = record\ncrucible_judge = auto\n")
    claude = project.runpytest()
    assert claude.ret == pytest.ExitCode.OK, claude.stdout.str()
    claude.stdout.fnmatch_lines(["crucible: * (before cache hits)"])  # the estimate, before the first request
    assert "NOTE ANTHROPIC_API_KEY is set" not in claude.stdout.str()
    assert runs(project.path / ".crucible/crucible.db")[1]["judge_model"].startswith("claude-")
