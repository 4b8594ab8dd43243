"""Every public entry of ``pytest_crucible`` refuses a bad argument with one clear error: the argument, the
bad value, what it accepts. Unit tests first, then the same errors as a user meets them in a session."""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_crucible as crucible
from pytest_crucible.evaluation.custom_metrics import CustomMetricError, argument_problem


def words(item, result, *, config):
    return 1.0


# -- crucible.metric ---------------------------------------------------------------------------------
@pytest.mark.parametrize("better", ["sideways", "Higher", 1, ["lower"]])
def test_a_bad_direction_is_refused_naming_the_value_and_the_choices(better: object) -> None:
    measured = crucible.metric("answerWords", better=better)(words)
    with pytest.raises(CustomMetricError) as caught:
        measured(None, None, config={})
    message = str(caught.value)
    assert f"better={better!r}" in message and 'expected "higher", "lower" or None' in message
    assert "test_public_entries.py" in message  # where the metric was written


def test_a_good_metric_is_called_as_the_function_it_wraps() -> None:
    for better in ("higher", "lower", None):
        assert crucible.metric("answerWords", better=better)(words)(None, None, config={}) == 1.0
    assert argument_problem("answerWords", "lower") is None


@pytest.mark.parametrize(("name", "expected"), [
    (42, "the name 42 is not usable"),
    ("has space", "the name 'has space' is not usable"),
    ("NDCGat10", "the name 'NDCGat10' is the built-in metric ndcgAt10"),
])
def test_a_bad_name_is_refused_naming_it(name: object, expected: str) -> None:
    problem = argument_problem(name, "higher")
    assert problem is not None and problem.startswith(expected)
    with pytest.raises(CustomMetricError, match=expected):
        crucible.metric(name)(words)(None, None, config={})


# -- crucible.golden ---------------------------------------------------------------------------------
def test_a_golden_marker_with_good_arguments_is_the_plugin_marker() -> None:
    mark = crucible.golden("golden/faq.jsonl", Path("golden/more.jsonl"), questionType=["simple", "multi_hop"])
    assert mark.mark.name == "crucible_golden"
    assert mark.mark.args == ("golden/faq.jsonl", Path("golden/more.jsonl"))
    assert mark.mark.kwargs == {"questionType": ["simple", "multi_hop"]}


@pytest.mark.parametrize(("args", "filters", "expected"), [
    ((), {}, r"test_public_entries\.py:\d+: @crucible\.golden: needs at least one golden file path\nHINT: e\.g\."),
    ((42,), {}, r"@crucible\.golden: path 1 is 42 \(int\): expected a golden file path \(str or pathlib\.Path\)"),
    (("a.jsonl", ""), {}, r"path 2 is '' \(str\)"),
    (("a.jsonl",), {"questionTyp": "simple"},
     r"field 'questionTyp': unknown golden item field in a filter\nHINT: did you mean 'questionType'\?"),
    (("a.jsonl",), {"zzzz": "red"}, r"field 'zzzz': unknown golden item field in a filter\nHINT: filter on one of: .*questionType"),
])
def test_a_bad_golden_marker_is_refused_where_it_is_written(args: tuple, filters: dict, expected: str) -> None:
    with pytest.raises(pytest.Collector.CollectError, match=expected):
        crucible.golden(*args, **filters)


# -- as a user meets them ------------------------------------------------------------------------------
def test_a_bad_metric_in_a_conftest_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('''
        import pytest_crucible as crucible

        @crucible.metric(better="sideways")
        def answer_words(item, result, *, config):
            return 1.0
        ''')
    pytester.makepyfile(test_plain="def test_it():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert errors == ["ERROR: @crucible.metric at conftest.py:3 (answer_words): better='sideways': expected \"higher\", "
                      "\"lower\" or None (a change is reported, never a regression)"]
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    result.stdout.no_fnmatch_line("*passed*")


def test_a_bad_golden_marker_is_one_collection_error_naming_its_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_marker='''
        import pytest_crucible as crucible

        @crucible.golden(42)
        def test_it(golden_item):
            pass

        def test_other():
            pass
        ''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["test_marker.py:3: @crucible.golden: path 1 is 42 (int): expected a golden file path "
                                 "(str or pathlib.Path)", "HINT: e.g. @crucible.golden(\"golden/faq.jsonl\")"])
    assert "Traceback" not in result.stdout.str() and result.stdout.str().count("path 1 is 42") == 1
