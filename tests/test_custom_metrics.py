"""Your own metrics end to end through pytest: Python metrics (@crucible.metric) and crucible_thresholds.

Each test runs a small project through pytester and checks what a user relies on: the exit code,
what the store holds, what the terminal, junit and the CLI show, and what the gate decides.
Rubric (model-judged) metrics are in test_rubric_metrics.py.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import crucible_cli, db_rows, write_golden

ITEMS = [{"id": f"q-{i:02d}", "question": f"How long is the return window for order {i}?", "reference": "30 days.",
          "citations": [{"docId": "returns", "chunkId": "returns#p1"}], "tags": ["long"] if i % 3 == 0 else []}
         for i in range(12)]

PIPELINE = '''
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        padding = " Thank you for asking." * int(config.get("padding", 0))
        retrieved = [{"chunk_id": "returns#p1", "doc_id": "returns", "text": "You can return it within 30 days."}]
        answer = "You can return it within 30 days [S1]." + padding
        if "long" in item.tags:
            answer += " Extra words for the long ones."
        return {"answer": answer, "retrieved": retrieved, "confidence": 0.9}
    return pipeline
'''

WORDS_METRIC = '''
import pytest_crucible as crucible

@crucible.metric("answerWords", better="lower")
def answer_words(item, result, *, config):
    return None if result.answer is None else len(result.answer.split())
'''


def make_project(pytester: pytest.Pytester, metrics: str = WORDS_METRIC, ini: str = "", items=ITEMS, extra: str = "") -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", items)
    pytester.makeconftest(PIPELINE + textwrap.dedent(metrics) + textwrap.dedent(extra))
    pytester.makeini("[pytest]\ncrucible_outcome = record\n" + ini)
    (pytester.path / "padded.json").write_text(json.dumps({"padding": 3}))
    return pytester


def item_values(project, metric: str) -> dict[str, float]:
    return dict(db_rows(project, "SELECT item_id, value FROM item_metrics WHERE metric = ? ORDER BY item_id", (metric,)))


def test_a_conftest_metric_is_stored_shown_and_in_junit(pytester: pytest.Pytester) -> None:
    project = make_project(pytester)
    result = project.runpytest("--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK
    values = item_values(project, "answerWords")
    assert values["q-01"] == 8 and values["q-00"] == 14 and len(values) == 12
    result.stdout.fnmatch_lines(["  answerWords *10.0000     12",
                                 "custom metrics: answerWords (better lower, conftest.py:* (answer_words))"])
    assert 'name="crucible.answerWords" value="8.0"' in (project.path / "junit.xml").read_text()
    [(recorded,)] = db_rows(project, "SELECT custom_metrics FROM runs")
    [definition] = json.loads(recorded)
    assert definition["name"] == "answerWords" and definition["kind"] == "python" and definition["better"] == "lower"
    assert len(definition["fingerprint"]) == 64

    document = json.loads("\n".join(crucible_cli("metrics", "latest", "--json", "--db", project.path / ".crucible" / "crucible.db").outlines))
    assert document["custom"] == {"answerWords": pytest.approx(10.0)}
    assert "answerWords" not in document.get("other", {})
    assert document["customMetrics"][0]["name"] == "answerWords"


def test_a_regression_of_a_custom_metric_fails_the_gate_naming_it(pytester: pytest.Pytester) -> None:
    project = make_project(pytester)
    assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=padded.json", "--crucible-baseline=latest", "--crucible-gate=answerWords")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["GATE FAILED answerWords regressed: 10.0000 -> 22.0000 (delta +12.0000*"])
    # The same verdict from the CLI, on the same pair of runs.
    runs = [row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY started_at")]
    cli = crucible_cli("compare", runs[0], runs[1], "--gate", "answerWords", "--db", project.path / ".crucible" / "crucible.db")
    assert cli.ret == 1
    assert any(line.startswith("GATE FAILED answerWords regressed") for line in cli.errlines)
    # The padded config back as the candidate: lower is better, so fewer words improved.
    cli = crucible_cli("compare", runs[1], runs[0], "--gate", "answerWords", "--db", project.path / ".crucible" / "crucible.db")
    assert cli.ret == 0 and any("answerWords" in line and line.rstrip().endswith("improved") for line in cli.outlines)


def test_a_floor_on_a_lower_is_better_custom_metric_is_a_ceiling(pytester: pytest.Pytester) -> None:
    project = make_project(pytester)
    result = project.runpytest("--crucible-fail-under=answerWords=9")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*answerWords = 10.0000 is above the floor 9.0*"])
    assert project.runpytest("--crucible-fail-under=answerWords=11").ret == pytest.ExitCode.OK


def test_none_leaves_the_item_out_of_the_metric(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, metrics='''
        import pytest_crucible as crucible

        @crucible.metric("longOnly")
        def long_only(item, result, *, config):
            return 1.0 if "long" in item.tags else None
        ''')
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert sorted(item_values(project, "longOnly")) == ["q-00", "q-03", "q-06", "q-09"]


def test_a_raising_metric_fails_only_its_item_and_the_other_metrics_still_count(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, extra='''
        @crucible.metric("fragile")
        def fragile(item, result, *, config):
            if item.id == "q-04":
                raise KeyError("policyId")
            return 1.0

        @crucible.metric("chatty")
        def chatty(item, result, *, config):
            return "many" if item.id == "q-05" else 0.5
        ''')
    result = project.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=10, failed=2)
    result.stdout.fnmatch_lines([
        "*golden item q-04: metric fragile (conftest.py:* (fragile)) raised KeyError: 'policyId'*",
        "*golden item q-05: metric chatty (conftest.py:* (chatty)) returned str 'many': return a number, or None*",
        "WARNING custom metric chatty failed on 1 item (q-05): those items have no value for it",
        "WARNING custom metric fragile failed on 1 item (q-04): those items have no value for it",
    ])
    assert "q-04" not in item_values(project, "fragile") and len(item_values(project, "fragile")) == 11
    assert item_values(project, "answerWords")["q-04"] == 8  # the other metrics of the failed item are kept
    errors = dict(db_rows(project, "SELECT item_id, metric_errors FROM results WHERE metric_errors != '[]'"))
    assert sorted(errors) == ["q-04", "q-05"] and "fragile" in errors["q-04"]
    assert dict(db_rows(project, "SELECT item_id, outcome FROM results"))["q-04"] == "error"


def test_nan_is_refused_and_a_bool_counts_as_one_or_zero(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, metrics='''
        import pytest_crucible as crucible

        @crucible.metric("citesSource")
        def cites(item, result, *, config):
            return "[S1]" in result.answer and item.id != "q-02"

        @crucible.metric("broken")
        def broken(item, result, *, config):
            return float("nan") if item.id == "q-03" else 0.0
        ''')
    result = project.runpytest()
    result.assert_outcomes(passed=11, failed=1)
    result.stdout.fnmatch_lines(["*metric broken (conftest.py:*) returned nan: return a number, or None when the metric "
                                 "does not apply to the item (never NaN)*"])
    values = item_values(project, "citesSource")
    assert values["q-02"] == 0.0 and values["q-01"] == 1.0


@pytest.mark.parametrize(("metrics", "expected"), [
    ('''
     import pytest_crucible as crucible

     @crucible.metric("faithfulness")
     def mine(item, result, *, config):
         return 1.0
     ''', "ERROR: @crucible.metric at conftest.py:* (mine): the name 'faithfulness' is the built-in metric faithfulness*"),
    ('''
     import pytest_crucible as crucible

     @crucible.metric("NDCGat10")
     def mine(item, result, *, config):
         return 1.0
     ''', "ERROR: @crucible.metric at conftest.py:* (mine): the name 'NDCGat10' is the built-in metric ndcgAt10*"),
    ('''
     import pytest_crucible as crucible

     @crucible.metric("short", better="down")
     def mine(item, result, *, config):
         return 1.0
     ''', "ERROR: @crucible.metric at conftest.py:* (mine): better='down': expected \"higher\", \"lower\" or None*"),
    ('''
     import pytest_crucible as crucible

     @crucible.metric("short")
     def mine(item, result):
         return 1.0
     ''', "ERROR: @crucible.metric at conftest.py:* (mine): the function must accept (item, result, *, config)*"),
    ('''
     import pytest_crucible as crucible

     @crucible.metric("has space")
     def mine(item, result, *, config):
         return 1.0
     ''', "ERROR: @crucible.metric at conftest.py:* (mine): the name 'has space' is not usable*"),
], ids=["builtin", "builtin-other-case", "bad-better", "bad-signature", "bad-name"])
def test_a_bad_metric_is_one_usage_error_naming_the_function_and_file(pytester: pytest.Pytester, metrics: str, expected: str) -> None:
    project = make_project(pytester, metrics=metrics)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stderr.str()


def test_two_metrics_of_one_name_are_a_usage_error(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, extra='''
        @crucible.metric("answerWords")
        def again(item, result, *, config):
            return 1.0
        ''')
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: two custom metrics are named 'answerWords': conftest.py:* (answer_words) and conftest.py:* (again)"])


def test_an_unknown_gate_metric_names_the_custom_ones(pytester: pytest.Pytester) -> None:
    project = make_project(pytester)
    result = project.runpytest("--crucible-gate=answerWord")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-gate: unknown metric 'answerWord'", "HINT: did you mean answerWords*"])


def test_the_same_values_under_xdist(pytester: pytest.Pytester) -> None:
    project = make_project(pytester)
    assert project.runpytest("-p", "no:xdist").ret == pytest.ExitCode.OK
    alone = item_values(project, "answerWords")
    result = project.runpytest_subprocess("-n", "2")
    assert result.ret == pytest.ExitCode.OK
    rows = db_rows(project, "SELECT id FROM runs ORDER BY started_at")
    assert len(rows) == 2
    on_workers = dict(db_rows(project, "SELECT item_id, value FROM item_metrics WHERE metric = 'answerWords' AND run_id = ?", (rows[1][0],)))
    assert on_workers == alone and len(alone) == 12
    assert db_rows(project, "SELECT COUNT(DISTINCT custom_metrics) FROM runs") == [(1,)]


def test_a_metric_from_a_module_named_in_the_ini(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, metrics="", ini="pythonpath = .\ncrucible_metrics = helpdesk_metrics\n")
    (project.path / "helpdesk_metrics.py").write_text(textwrap.dedent(WORDS_METRIC))
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert len(item_values(project, "answerWords")) == 12
    result.stdout.fnmatch_lines(["custom metrics: answerWords (better lower, helpdesk_metrics.py:* (answer_words))"])


def test_a_module_that_cannot_be_imported_is_a_usage_error(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, metrics="", ini="crucible_metrics = no_such_metrics_module\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini option crucible_metrics: cannot import no_such_metrics_module: ModuleNotFoundError*",
                                 "HINT: name a module importable from the rootdir*"])


def test_a_metric_registered_by_a_plugin_hook(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, metrics="")
    (project.path / "shared_metrics_plugin.py").write_text(textwrap.dedent('''
        import pytest_crucible as crucible

        def _words(item, result, *, config):
            return len((result.answer or "").split())

        def pytest_crucible_register_metrics(config):
            return [crucible.metric("answerWords", better="lower")(_words)]
        '''))
    project.syspathinsert()
    result = project.runpytest("-p", "shared_metrics_plugin")
    assert result.ret == pytest.ExitCode.OK
    assert item_values(project, "answerWords")["q-01"] == 8


def test_a_changed_metric_body_warns_that_the_ruler_changed(pytester: pytest.Pytester) -> None:
    project = make_project(pytester)
    assert project.runpytest().ret == pytest.ExitCode.OK
    # Reformatting and comments are not a change of the ruler ...
    project.makeconftest(PIPELINE + textwrap.dedent(WORDS_METRIC).replace("    return None", "    # words, not tokens\n    return None"))
    result = project.runpytest("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    assert "ruler changed" not in result.stdout.str()
    # ... a different body is.
    project.makeconftest(PIPELINE + textwrap.dedent(WORDS_METRIC).replace("result.answer.split()", "result.answer.split(' ')"))
    result = project.runpytest("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["WARNING the ruler changed: custom metric answerWords's code differs between the runs*"])


def test_a_metric_without_direction_is_reported_and_never_gated(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, metrics=WORDS_METRIC.replace('better="lower"', "better=None"))
    assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=padded.json", "--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["  answerWords* 10.0000 22.0000 *changed", "gate passed*"])


def test_thresholds_fail_items_in_strict_mode_only(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, ini="crucible_thresholds = answerWords<=10 recall@10>=0.5\n")
    # Component mode: no judge, so the thresholds are the only way these items can fail.
    result = project.runpytest("--crucible-outcome=strict", "--crucible-mode=component")
    long_items = ["q-00", "q-03", "q-06", "q-09"]
    failed = sorted(row[0] for row in db_rows(project, "SELECT item_id FROM results WHERE outcome = 'failed'"))
    assert failed == long_items, result.stdout.str()
    result.stdout.fnmatch_lines(["*golden item q-00: answerWords = 14 crosses the threshold answerWords<=10 (crucible_thresholds)*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Record mode measures; it never fails an item on a threshold.
    assert project.runpytest("--crucible-outcome=record", "--crucible-mode=component").ret == pytest.ExitCode.OK


@pytest.mark.parametrize(("words", "expected"), [
    ("answerWords=<10", "ERROR: ini option crucible_thresholds: 'answerWords=<10' is not METRIC>=VALUE"),
    ("answerWords<=ten", "ERROR: ini option crucible_thresholds: 'answerWords<=ten': 'ten' is not a number"),
    ("answerWord<=10", "ERROR: ini option crucible_thresholds: 'answerWord<=10': unknown metric 'answerWord'"),
])
def test_a_bad_threshold_is_a_usage_error(pytester: pytest.Pytester, words: str, expected: str) -> None:
    project = make_project(pytester, ini=f"crucible_thresholds = {words}\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected + "*"])


def test_with_message_batches_thresholds_on_judged_metrics_say_they_cannot_fail_an_item(pytester: pytest.Pytester) -> None:
    project = make_project(pytester, ini="crucible_thresholds = faithfulness>=0.99 answerWords<=10\n")
    result = project.runpytest("--crucible-outcome=strict", "--crucible-judge=lexical", "--crucible-judge-batch")
    result.stdout.fnmatch_lines(["NOTE crucible_thresholds on faithfulness did not fail any item:",
                                 "  with --crucible-judge-batch their values arrive after the tests*"])
    # answerWords is measured inside each test: its threshold still fails the long answers.
    failed = sorted(row[0] for row in db_rows(project, "SELECT item_id FROM results WHERE outcome = 'failed'"))
    assert failed == ["q-00", "q-03", "q-06", "q-09"]
