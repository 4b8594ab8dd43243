"""End-to-end behaviour of the plugin, through pytest itself (pytester)."""

from __future__ import annotations

import gc
import json
import re
import sqlite3
import xml.etree.ElementTree as ET

import pytest
from helpers import RANKED_CONFTEST, db_rows, write_golden

GOLDEN = [
    {"id": "q-001", "question": "What is the return window?", "questionType": "simple",
     "citations": [{"docId": "returns", "chunkId": "returns#p1", "mode": "required"}]},
    {"id": "q-002", "question": "Which bikes share the battery?", "questionType": "multi_hop",
     "citations": [{"docId": "battery", "mode": "required"}, {"docId": "bikes", "mode": "acceptable"}]},
    {"id": "q-003", "question": "Is the warranty transferable?", "status": "draft",
     "citations": [{"docId": "warranty", "mode": "required"}]},
    {"id": "q-004", "question": "What does the moon cost?", "questionType": "false_premise", "answerable": False},
]

CONFTEST = RANKED_CONFTEST


def add_golden_file(pytester: pytest.Pytester, items=GOLDEN, name="golden_support.jsonl") -> None:
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    write_golden(path, items)



def test_golden_file_items_become_tests_in_file_order(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("--collect-only", "-q")
    lines = [line for line in result.outlines if "::" in line]
    assert lines == [f"golden_support.jsonl::{item['id']}" for item in GOLDEN]

    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=3, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*SKIPPED*draft golden item (run it with --crucible-include-drafts)*"])


def test_drafts_run_with_include_drafts(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("--crucible-include-drafts", "--crucible-outcome=record")
    result.assert_outcomes(passed=4)


def test_marker_parametrizes_golden_item_with_filters(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, name="golden/items.jsonl")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_marker="""
        import pytest
        import pytest_crucible as crucible

        @crucible.golden("golden/items.jsonl", questionType=["simple", "multi_hop"])
        def test_retrieval(golden_item, crucible_evaluate):
            score = crucible_evaluate()
            assert score.item_id == golden_item.id
            assert score.metrics["hitAtK"] == 1.0

        @pytest.mark.crucible_golden("golden/items.jsonl", answerable=False)
        def test_unanswerable(golden_item):
            assert golden_item.answerable is False
        """
    )
    # The golden file itself is not collected: it does not match golden_*.jsonl.
    result = pytester.runpytest("-v")
    result.stdout.fnmatch_lines([
        "*test_retrieval?q-001? PASSED*",
        "*test_retrieval?q-002? PASSED*",
        "*test_retrieval?q-003? SKIPPED (draft golden item*",
        "*test_unanswerable?q-004? PASSED*",
    ])
    result.assert_outcomes(passed=3, skipped=1)
    # Every marked test was evaluated and recorded, also the one that never asked for the score.
    assert sorted(row[0] for row in db_rows(pytester, "SELECT item_id FROM results")) == ["q-001", "q-002", "q-004"]


def test_marker_failure_stops_the_body_in_strict_mode(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, [{"id": "m-1", "question": "q", "citations": [{"docId": "absent", "mode": "required"}]}], name="data/g.jsonl")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_marker="""
        import pytest_crucible as crucible

        @crucible.golden("data/g.jsonl")
        def test_it(golden_item):
            raise AssertionError("the body must not run after a strict failure")
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "golden item m-1: retrieval_miss: Required citation absent not retrieved within K*",
        "retrieval_miss: required citation(s) absent not retrieved in the top 10*",
    ])
    result.stdout.no_fnmatch_line("*the body must not run*")


def test_marker_without_golden_item_argument_is_a_clear_collection_error(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, name="data/g.jsonl")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_marker="""
        import pytest_crucible as crucible

        @crucible.golden("data/g.jsonl", questionTyp="simple")
        def test_it(golden_item):
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*field 'questionTyp': unknown golden item field in a filter*", "HINT: did you mean 'questionType'?"])
    result.stdout.no_fnmatch_line("*Traceback*")


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"id": "a", "question": "q"}\n{"id": "b", "question": "q", "citations": [{"docId": "d", "mode": "must"}]}\n',
         ["golden_bad.jsonl:2: field 'citations[0].mode': Input should be 'required' or 'acceptable' (got \"must\")",
          "HINT: use one of the allowed values*"]),
        ('{"id": "a", "question": "q"}\n\n{"id": "a", "question": "again"}\n',
         ["golden_bad.jsonl:3: field 'id': duplicate id 'a' (first used on line 1, again on line 3)", "HINT: ids must be unique*"]),
        ('{"id": "a", "question": "q", "questionTyp": "simple"}\n',
         ["golden_bad.jsonl:1: field 'questionTyp': unknown field*", "HINT: did you mean 'questionType'?*"]),
        ('{"id": "a", "question": "q"}\n{"id": "b", "question": \n',
         ["golden_bad.jsonl:2: not valid JSON: Expecting value at column 25", "HINT: a .jsonl golden file holds exactly one JSON object per line."]),
        ('{"id": "a"}\n', ["golden_bad.jsonl:1: field 'question': Field required", "HINT: add the field*"]),
    ],
    ids=["bad-literal", "duplicate-id", "unknown-field", "bad-json", "missing-field"],
)
def test_bad_golden_file_is_one_clear_collection_error(pytester: pytest.Pytester, content: str, expected: list[str]) -> None:
    (pytester.path / "golden_bad.jsonl").write_text(content)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting golden_bad.jsonl*", *expected])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*pydantic*")


@pytest.mark.parametrize("gc_enabled", [True, False])
def test_collecting_golden_files_leaves_the_garbage_collector_as_it_found_it(pytester: pytest.Pytester, gc_enabled: bool) -> None:
    add_golden_file(pytester)
    (pytester.path / "golden_bad.jsonl").write_text('{"id": "x", "question": "q"}\n{"id": "y"}\n')  # paused, then an error
    pytester.makeconftest(CONFTEST)
    if not gc_enabled:
        gc.disable()
    try:
        result = pytester.runpytest("--collect-only", "-q")
        enabled_after = gc.isenabled()
    finally:
        gc.enable()
    result.stdout.fnmatch_lines(["golden_support.jsonl::q-004", "*ERROR collecting golden_bad.jsonl*", "golden_bad.jsonl:2: field 'question': Field required"])
    assert enabled_after is gc_enabled


THRESHOLD_CONFTEST = """
import gc
import json
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        with open("seen.jsonl", "a") as seen:  # what the collector looked like while this item ran
            seen.write(json.dumps([gc.get_threshold(), gc.get_freeze_count() > 0]) + "\\n")
        return {"retrieved": [{"chunk_id": "returns#p1", "doc_id": "returns"}]}
    return pipeline
"""


@pytest.mark.parametrize("before", [(700, 10, 10), (1000, 20, 5)], ids=["default", "tuned-by-the-user"])
def test_the_collector_is_tuned_only_while_the_tests_run_and_only_if_nobody_tuned_it(pytester: pytest.Pytester, before) -> None:
    """While golden items run, the collected objects are frozen and a default young threshold is raised; afterwards
    the process has its collector back as it was (pytester runs in this process), and a user's own tuning is left alone."""
    from pytest_crucible.collection import TEST_LOOP_YOUNG_THRESHOLD

    add_golden_file(pytester, GOLDEN[:2])
    pytester.makeconftest(THRESHOLD_CONFTEST)
    saved = gc.get_threshold()
    gc.set_threshold(*before)
    try:
        result = pytester.runpytest("-p", "no:randomly", "--crucible-mode=component", "--crucible-outcome=record")
        after = gc.get_threshold(), gc.get_freeze_count()
    finally:
        gc.set_threshold(*saved)
    assert result.ret == pytest.ExitCode.OK
    expected = [TEST_LOOP_YOUNG_THRESHOLD, 10, 10] if before == (700, 10, 10) else list(before)
    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert seen == [[expected, True]] * 2
    assert after == (before, 0)


def test_invalid_pipeline_result_fails_that_item_naming_the_field(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, GOLDEN[:2])
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def crucible_pipeline():
            def pipeline(question, *, item, config, mode):
                if item.id == "q-002":
                    return {"answer": "x", "retrieved": [{"doc_id": "battery", "text": "t"}]}
                return {"answer": "x", "retrieved": [{"chunk_id": "returns#p1", "doc_id": "returns"}]}
            return pipeline
        """
    )
    result = pytester.runpytest("--crucible-outcome=record")
    result.assert_outcomes(passed=1, failed=1)
    assert "golden item q-002: crucible_pipeline returned an invalid result: field 'retrieved[0].chunk_id': Field required" in result.stdout.lines
    assert db_rows(pytester, "SELECT item_id, outcome, error IS NOT NULL FROM results ORDER BY item_id") == [("q-001", "passed", 0), ("q-002", "error", 1)]


def test_missing_pipeline_fixture_says_what_to_define(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, GOLDEN[:1])
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: no crucible_pipeline fixture: define one in conftest.py*"])


def test_results_are_written_to_sqlite(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "rerank.json").write_text('{"retrieval": {"rerank": true}}')
    result = pytester.runpytest("--crucible-config=rerank.json")
    assert result.ret == pytest.ExitCode.OK

    [(run_id, status, n_items, config_hash, params, golden_hash, mode)] = db_rows(
        pytester, "SELECT id, status, n_items, config_hash, params, golden_hash, mode FROM runs")
    assert (status, n_items, mode) == ("complete", 3, "system")
    assert len(run_id) == 26 and len(config_hash) == 64 and len(golden_hash) == 64
    assert json.loads(params) == {"retrieval": {"rerank": True}}
    results = db_rows(pytester, "SELECT item_id, outcome, answer, json_array_length((SELECT body FROM contents WHERE hash = retrieved_hash)), error_class FROM results ORDER BY item_id")
    answer = "Bikes can be returned within 30 days [S1]."
    assert results == [("q-001", "passed", answer, 4, "correct"), ("q-002", "passed", answer, 4, "correct"),
                       ("q-004", "passed", "I don't know.", 4, "correct")]
    metrics = {(item, metric): value for item, metric, value in db_rows(pytester, "SELECT item_id, metric, value FROM item_metrics")}
    assert metrics[("q-001", "ndcgAt10")] == 1.0
    assert metrics[("q-001", "precisionAtK")] == pytest.approx(0.1)
    assert ("q-004", "ndcgAt10") not in metrics  # no relevant judgment: undefined, not zero
    qrels = db_rows(pytester, "SELECT query_id, chunk_id, doc_id, grade, source FROM qrels ORDER BY query_id, doc_id")
    assert qrels == [("q-001", "returns#p1", "returns", 3, "provenance"), ("q-002", None, "battery", 3, "provenance"),
                     ("q-002", None, "bikes", 1, "provenance")]
    assert [row[0] for row in db_rows(pytester, "SELECT item_id FROM golden_items ORDER BY item_id")] == ["q-001", "q-002", "q-004"]
    result.stdout.fnmatch_lines(["*= crucible =*", f"run {run_id}  status complete  mode system  outcome strict",
                                 f"config rerank.json  configHash {config_hash[:12]}", "*ndcg@10*", "db *crucible.db"])

    # The ledger refuses rewrites at the SQLite level.
    conn = sqlite3.connect(pytester.path / ".crucible" / "crucible.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE qrels SET grade = 0")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM qrels")
    conn.close()

    # A second run with the same config appends a run and no duplicate provenance judgments.
    assert pytester.runpytest("--crucible-config=rerank.json").ret == pytest.ExitCode.OK
    assert db_rows(pytester, "SELECT COUNT(*), COUNT(DISTINCT config_hash) FROM runs") == [(2, 1)]
    assert db_rows(pytester, "SELECT COUNT(*) FROM qrels") == [(3,)]


def test_junit_xml_carries_item_properties(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    tree = ET.parse(pytester.path / "junit.xml")
    cases = {case.get("name"): case for case in tree.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["q-002"].iter("property")}
    [(config_hash,)] = db_rows(pytester, "SELECT config_hash FROM runs")
    assert props["crucible.itemId"] == "q-002"
    assert props["crucible.configHash"] == config_hash
    assert float(props["crucible.recallAtK"]) == 1.0
    # ranks: bikes (1) at 2, battery (3) at 3 -> DCG = 1/log2(3) + 3/2; ideal = 3 + 1/log2(3)
    assert float(props["crucible.ndcgAt10"]) == pytest.approx((1 / 1.5849625 + 1.5) / (3 + 1 / 1.5849625), abs=1e-6)
    assert {"crucible.precisionAtK", "crucible.mrr", "crucible.hitAtK"} <= set(props)
    assert not list(cases["q-003"].iter("property"))  # skipped draft: nothing measured


def test_unread_config_key_warning(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, GOLDEN[:1])
    pytester.makeconftest(CONFTEST)
    (pytester.path / "rerank.json").write_text('{"retrieval": {"rerank": true}, "myIndex": "v2"}')
    result = pytester.runpytest("--crucible-config=rerank.json")
    result.stdout.fnmatch_lines([
        "WARNING CrucibleWarning: config key retrieval.rerank=true was never read by the pipeline: is the config applied?",
        'WARNING CrucibleWarning: config key myIndex="v2" was never read by the pipeline: is the config applied?',
    ])
    # A pipeline that applies the key: no warning for it.
    pytester.makeconftest(CONFTEST.replace('k = config["retrievalLimit"]', 'k = config["retrievalLimit"]; config["retrieval"].get("rerank")', 1))
    result = pytester.runpytest("--crucible-config=rerank.json")
    result.stdout.no_fnmatch_line("*retrieval.rerank=true was never read*")
    result.stdout.fnmatch_lines(["*myIndex=\"v2\" was never read*"])


@pytest.mark.parametrize("outcome_flag, ini, expected_ret, outcomes", [
    ([], None, pytest.ExitCode.TESTS_FAILED, {"passed": 1, "failed": 1}),
    (["--crucible-outcome=record"], None, pytest.ExitCode.OK, {"passed": 2}),
    ([], "record", pytest.ExitCode.OK, {"passed": 2}),
], ids=["strict-default", "record-option", "record-ini"])
def test_outcome_modes(pytester: pytest.Pytester, outcome_flag, ini, expected_ret, outcomes) -> None:
    items = [GOLDEN[0], {"id": "miss", "question": "q", "citations": [{"docId": "nowhere", "chunkId": "nowhere#p1"}]}]
    add_golden_file(pytester, items)
    pytester.makeconftest(CONFTEST)
    if ini:
        pytester.makeini(f"[pytest]\ncrucible_outcome = {ini}\n")
    result = pytester.runpytest(*outcome_flag)
    assert result.ret == expected_ret
    result.assert_outcomes(**outcomes)
    # Metrics are recorded either way.
    assert db_rows(pytester, "SELECT value FROM item_metrics WHERE item_id = 'miss' AND metric = 'recallAtK'") == [(0.0,)]
    if expected_ret == pytest.ExitCode.TESTS_FAILED:
        result.stdout.fnmatch_lines([
            "golden item miss: retrieval_miss: Required citation nowhere#p1 not retrieved within K*",
            "retrieval_miss: required citation(s) nowhere#p1 not retrieved in the top 10 (K, ini crucible_k); retrieved: returns#p1, bikes#p2, battery#p1, faq#p9",
        ])


def test_record_mode_still_fails_when_the_pipeline_raises(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, GOLDEN[:2])
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def crucible_pipeline():
            def pipeline(question, *, item, config, mode):
                raise ConnectionError("vector store unreachable")
            return pipeline
        """
    )
    result = pytester.runpytest("--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ConnectionError: vector store unreachable*"])
    assert db_rows(pytester, "SELECT outcome, error FROM results") == [("error", "ConnectionError: vector store unreachable")] * 2


def test_component_mode_reaches_the_pipeline(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, GOLDEN[:1])
    pytester.makeconftest(CONFTEST)
    assert pytester.runpytest("--crucible-mode=component").ret == pytest.ExitCode.OK
    assert db_rows(pytester, "SELECT r.mode, s.answer FROM runs r JOIN results s ON s.run_id = r.id") == [("component", None)]


@pytest.mark.slow
def test_interrupted_session_keeps_finished_items_and_marks_the_run(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, [GOLDEN[0], GOLDEN[1], {**GOLDEN[0], "id": "q-005"}])
    pytester.makeconftest(CONFTEST.replace("k = config", "k = config\n        if item.id == 'q-002': raise KeyboardInterrupt\n        k = config", 1))
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert db_rows(pytester, "SELECT status FROM runs") == [("interrupted",)]
    assert db_rows(pytester, "SELECT item_id FROM results") == [("q-001",)]


def test_bad_config_is_a_usage_error(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, GOLDEN[:1])
    pytester.makeconftest(CONFTEST)
    (pytester.path / "bad.json").write_text('{\n  "retrieval": {\n    "rerank": "yes"\n  }\n}\n')
    result = pytester.runpytest("--crucible-config=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: bad.json:3: field 'retrieval.rerank': expected boolean, got \"yes\"", "HINT: the default is false*"])


@pytest.mark.fresh_interpreter  # what a new Python imports: a fork of this process has it all imported already
def test_plugin_stays_out_of_the_way_of_unrelated_projects(pytester: pytest.Pytester) -> None:
    """Loading the plugin in a project that does not use it imports nothing heavy and writes nothing."""
    pytester.makeconftest(
        """
        import json, sys

        def pytest_sessionfinish(session):
            heavy = [m for m in ("numpy", "scipy", "pydantic", "sqlite_utils", "anthropic") if m in sys.modules]
            with open("imported.json", "w") as fh:
                json.dump(heavy, fh)
        """
    )
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "crucible")
    assert result.ret == pytest.ExitCode.OK
    assert json.loads((pytester.path / "imported.json").read_text()) == []
    assert not (pytester.path / ".crucible").exists()
    result.stdout.no_fnmatch_line("*= crucible =*")


@pytest.mark.slow
def test_under_xdist_the_controller_records_everything_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    items = [{**GOLDEN[0], "id": f"x-{i:02d}"} for i in range(12)]
    add_golden_file(pytester, items)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "rerank.json").write_text('{"retrieval": {"rerank": true}}')
    result = pytester.runpytest_subprocess("-n", "2", "--crucible-config=rerank.json")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=12)
    assert db_rows(pytester, "SELECT status, n_items FROM runs") == [("complete", 12)]
    assert db_rows(pytester, "SELECT COUNT(*), COUNT(DISTINCT item_id) FROM item_metrics WHERE metric = 'ndcgAt10'") == [(12, 12)]
    # The same rows as a run without xdist (answer metrics and error classes included).
    assert pytester.runpytest_subprocess("-p", "no:xdist", "--crucible-config=rerank.json").ret == pytest.ExitCode.OK
    runs = [row[0] for row in db_rows(pytester, "SELECT id FROM runs ORDER BY rowid")]
    per_run = [db_rows(pytester, "SELECT item_id, metric, value FROM item_metrics WHERE run_id = ? ORDER BY item_id, metric", [r]) for r in runs]
    classes = [db_rows(pytester, "SELECT item_id, error_class FROM results WHERE run_id = ? ORDER BY item_id", [r]) for r in runs]
    assert per_run[0] == per_run[1] and len(per_run[0]) > 12 * 5
    assert classes[0] == classes[1]
    # The workers' config reads reach the controller: the unread key is still reported.
    result.stdout.fnmatch_lines(["WARNING CrucibleWarning: config key retrieval.rerank=true was never read*"])


def test_verbose_summary_adds_facet_rows(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("-v", "--crucible-mode=component")
    result.stdout.fnmatch_lines(["  facet * n * ndcgAt10 * recallAtK", "  questionType=multi_hop * 1 * 0.5869 * 1.0000"])
    plain = pytester.runpytest("--crucible-mode=component")
    plain.stdout.no_fnmatch_line("  facet *")


def test_quiet_keeps_one_summary_line_and_every_alert(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(CONFTEST)
    full = pytester.runpytest("-p", "no:cacheprovider", "--crucible-mode=component")
    assert full.ret == pytest.ExitCode.OK
    assert any(line.startswith("=") and " crucible " in line for line in full.outlines)
    # Three items are too few pairs for the default gate (it would refuse); -o crucible_min_pairs=2 lets it judge.
    refused = pytester.runpytest("-q", "-p", "no:cacheprovider", "--crucible-mode=component", "--crucible-baseline=latest")
    assert refused.ret == 3
    refused.stdout.fnmatch_lines(["crucible run * complete, 3 items: *; GATE REFUSED", "GATE REFUSED no metric has 6 pairs*"])
    quiet = pytester.runpytest("-q", "-p", "no:cacheprovider", "--crucible-mode=component", "--crucible-baseline=latest",
                               "-o", "crucible_min_pairs=2")
    assert quiet.ret == pytest.ExitCode.OK
    crucible_lines = [line for line in quiet.outlines if "crucible" in line]
    assert len(crucible_lines) == 1, quiet.outlines
    assert re.fullmatch(r"crucible run \w{10} complete, 3 items: ndcg@10 \d\.\d{3} recall@10 \d\.\d{3}; gate passed",
                        crucible_lines[0]), crucible_lines
    # A failed gate is never reduced to a word: its reason line stays, and the exit code says so.
    failing = pytester.runpytest("-q", "-p", "no:cacheprovider", "--crucible-mode=component", "--crucible-fail-under=mrr=1.01")
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    failing.stdout.fnmatch_lines(["crucible run * complete, 3 items: *; GATE FAILED", "GATE FAILED mrr = * is below the floor 1.01"])
