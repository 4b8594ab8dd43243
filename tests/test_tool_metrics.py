"""The tool metrics by hand (metrics/tools.py): when a call matches an expectation, the one-to-one matching
(a maximum matching, where first fit is wrong), every metric's definition and its corners, the four trajectory
modes, the alignment a report shows; and properties that hold for any lists of calls."""

from __future__ import annotations

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.metrics.tools import (
    MATCH_MODES,
    aligned_calls,
    argument_differences,
    call_matches,
    maximum_matching,
    same_value,
    tool_metrics,
    trajectory_match,
)


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def expect(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments} if arguments else {"name": name}


# -- when one call matches one expectation ----------------------------------------------------------
@pytest.mark.parametrize("a, b, equal", [
    (1, 1.0, True), (1, True, False), (0, False, False), (True, True, True), ("Leeds", "leeds", False),
    (None, None, True), (None, "", False), ([1, 2], [1, 2.0], True), ([1, 2], [2, 1], False),
    ({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}, True), ({"a": 1}, {"a": 1, "b": 2}, False), ("1", 1, False),
])
def test_values_are_equal_as_json(a, b, equal) -> None:
    assert same_value(a, b) is equal and same_value(b, a) is equal


def test_a_call_matches_on_its_name_and_the_arguments_the_expectation_names() -> None:
    assert call_matches(expect("lookup"), call("lookup", city="Leeds"))  # no arguments named: any call of the name
    assert call_matches(expect("lookup", city="Leeds"), call("lookup", city="Leeds", limit=3))  # extra arguments allowed
    assert not call_matches(expect("lookup", city="Leeds"), call("lookup", city="York"))
    assert not call_matches(expect("lookup", city="Leeds"), call("lookup"))  # a named argument is required
    assert not call_matches(expect("lookup"), call("Lookup"))  # names are compared exactly
    assert not call_matches(expect("lookup", limit=1), call("lookup", limit=True))
    assert call_matches(expect("lookup", limit=3), call("lookup", limit=3.0))


def test_the_differences_name_each_argument_missing_or_different() -> None:
    assert argument_differences(expect("book", city="Leeds", day="Mon"), call("book", city="leeds", extra=1)) == [
        {"argument": "city", "expected": "Leeds", "actual": "leeds", "missing": False},
        {"argument": "day", "expected": "Mon", "actual": None, "missing": True}]
    assert argument_differences(expect("book", city="Leeds"), call("book", city="Leeds")) == []


# -- the matching is one to one and maximum -----------------------------------------------------------
def test_a_maximum_matching_where_first_fit_is_wrong() -> None:
    # First fit gives the Leeds call to the any-argument expectation and leaves the Leeds one unmatched.
    expected = [expect("lookup"), expect("lookup", city="Leeds")]
    actual = [call("lookup", city="Leeds"), call("lookup", city="York")]
    assert maximum_matching(expected, actual) == {0: 1, 1: 0}
    metrics = tool_metrics(expected, actual, "unordered")
    assert metrics["toolCallRecall"] == metrics["toolCallPrecision"] == metrics["trajectoryMatch"] == 1.0


def test_the_matching_is_one_to_one() -> None:
    # One call cannot meet two expectations of it, nor two calls one expectation.
    assert tool_metrics([expect("lookup"), expect("lookup")], [call("lookup")], "superset") == {
        "toolCallRecall": 0.5, "toolCallPrecision": 1.0, "trajectoryMatch": 0.0, "toolCalls": 1.0}
    assert tool_metrics([expect("lookup")], [call("lookup"), call("lookup")], "subset") == {
        "toolCallRecall": 1.0, "toolCallPrecision": 0.5, "trajectoryMatch": 0.0, "toolCalls": 2.0}


def test_lists_that_line_up_are_matched_in_place() -> None:
    calls = [call("a"), call("a"), call("a")]
    assert maximum_matching([expect("a")] * 3, calls) == {0: 0, 1: 1, 2: 2}
    assert all(row["status"] == "match" for row in aligned_calls([expect("a")] * 3, calls, "strict"))


def test_a_long_augmenting_path_is_found() -> None:
    # Expectation i (of 0..n-1) accepts calls i and i+1 and starts paired in place; the last one accepts only
    # call 0, so every pair moves one along a path through all of them (an iterative search: no recursion limit).
    n = 1100  # past Python's default recursion limit
    expected = [expect("g", **{f"x{i}": 1}) for i in range(n)] + [expect("g", y=1)]
    actual = [call("g", x0=1, y=1)] + [call("g", **{f"x{i}": 1, f"x{i - 1}": 1}) for i in range(1, n)] + [call("g", **{f"x{n - 1}": 1})]
    matching = maximum_matching(expected, actual)
    assert len(matching) == n + 1 and matching[n] == 0 and all(matching[i] == i + 1 for i in range(n))


# -- each metric and its corners -----------------------------------------------------------------------
@pytest.mark.parametrize("expected, actual, recall, precision", [
    ([], [], 1.0, 1.0),  # neither list has a call
    ([expect("a")], [], 0.0, 0.0),  # calls expected, none made
    ([], [call("a")], 1.0, 0.0),  # no call expected, calls made: nothing missed, every call unexpected
    ([expect("a"), expect("b")], [call("a"), call("c"), call("d")], 0.5, 1 / 3),
])
def test_recall_and_precision_and_their_corners(expected, actual, recall, precision) -> None:
    metrics = tool_metrics(expected, actual)
    assert metrics["toolCallRecall"] == pytest.approx(recall) and metrics["toolCallPrecision"] == pytest.approx(precision)
    assert metrics["toolCalls"] == len(actual)


@pytest.mark.parametrize("expected, actual, modes", [
    # (the modes in which the trajectory matches)
    ([expect("a"), expect("b")], [call("a"), call("b")], {"strict", "unordered", "subset", "superset"}),
    ([expect("a"), expect("b")], [call("b"), call("a")], {"unordered", "subset", "superset"}),
    ([expect("a"), expect("b")], [call("a")], {"subset"}),
    ([expect("a")], [call("a"), call("b")], {"superset"}),
    ([expect("a")], [call("b")], set()),
    ([], [], {"strict", "unordered", "subset", "superset"}),
    ([expect("a")], [], {"subset"}),  # no call at all is a subset of any expectation
    ([], [call("a")], {"superset"}),  # nothing expected: any calls are a superset of it
    ([expect("a", x=1)], [call("a", x=1, y=2)], {"strict", "unordered", "subset", "superset"}),
])
def test_the_four_trajectory_modes(expected, actual, modes) -> None:
    assert {mode for mode in MATCH_MODES if trajectory_match(expected, actual, mode)} == modes
    assert {mode for mode in MATCH_MODES if tool_metrics(expected, actual, mode)["trajectoryMatch"] == 1.0} == modes


def test_strict_compares_place_by_place() -> None:
    # A maximum matching exists ({0: 1, 1: 0}) but strict wants the i-th call to meet the i-th expectation.
    expected = [expect("lookup", city="Leeds"), expect("lookup")]
    assert not trajectory_match(expected, [call("lookup"), call("lookup", city="Leeds")], "strict")
    assert trajectory_match(expected, [call("lookup"), call("lookup", city="Leeds")], "unordered")
    assert trajectory_match(expected, [call("lookup", city="Leeds"), call("lookup", city="York")], "strict")


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown toolMatch 'exact'"):
        trajectory_match([], [], "exact")


# -- what a report shows --------------------------------------------------------------------------------
def test_the_alignment_marks_each_kind_of_mismatch() -> None:
    expected = [expect("find_store", city="Leeds"), expect("check_stock", product="Vela E3"), expect("book_service"),
                expect("send_summary")]
    actual = [call("check_stock", product="vela e3"), call("find_store", city="Leeds"), call("refund")]
    rows = aligned_calls(expected, actual, "strict")
    assert [(row["status"], row["position"]) for row in rows] == [
        ("match", 2), ("arguments_differ", 1), ("missing", None), ("missing", None), ("unexpected", 3)]
    assert rows[1]["differences"] == [{"argument": "product", "expected": "Vela E3", "actual": "vela e3", "missing": False}]


def test_out_of_order_is_strict_modes_and_marks_only_the_calls_that_break_the_order() -> None:
    expected = [expect("a"), expect("b"), expect("c")]
    actual = [call("a"), call("c"), call("b")]
    assert [row["status"] for row in aligned_calls(expected, actual, "strict")] == ["match", "match", "out_of_order"]
    assert [row["status"] for row in aligned_calls(expected, actual, "unordered")] == ["match"] * 3
    # A call left out shifts the others, which keep their order: only the missing one is marked.
    assert [row["status"] for row in aligned_calls(expected, [call("b"), call("c")], "strict")] == ["missing", "match", "match"]


# -- properties ------------------------------------------------------------------------------------------
names = st.sampled_from(["a", "b", "c"])
values = st.one_of(st.integers(0, 2), st.sampled_from([1.0, True, "x", None]))
arguments = st.dictionaries(st.sampled_from(["p", "q"]), values, max_size=2)
calls = st.lists(st.builds(lambda name, args: {"name": name, "arguments": args}, names, arguments), max_size=5)
expectations = st.lists(st.builds(lambda name, args: {"name": name, "arguments": args} if args else {"name": name}, names,
                                  st.dictionaries(st.sampled_from(["p", "q"]), values, max_size=1)), max_size=5)


def _first_fit(expected, actual) -> int:
    free, matched = list(range(len(actual))), 0
    for wanted in expected:
        j = next((j for j in free if call_matches(wanted, actual[j])), None)
        if j is not None:
            free.remove(j)
            matched += 1
    return matched


@settings(max_examples=examples(400), deadline=None)
@given(expectations, calls)
def test_the_metrics_stay_in_range_and_the_modes_agree(expected, actual) -> None:
    metrics = {mode: tool_metrics(expected, actual, mode) for mode in MATCH_MODES}
    base = metrics["strict"]
    assert 0.0 <= base["toolCallRecall"] <= 1.0 and 0.0 <= base["toolCallPrecision"] <= 1.0
    assert all(m["toolCallRecall"] == base["toolCallRecall"] and m["toolCallPrecision"] == base["toolCallPrecision"]
               for m in metrics.values())  # the mode decides the trajectory only
    match = {mode: m["trajectoryMatch"] == 1.0 for mode, m in metrics.items()}
    assert match["unordered"] == (match["subset"] and match["superset"])
    assert not match["strict"] or match["unordered"]
    assert match["superset"] == (base["toolCallRecall"] == 1.0)
    assert match["unordered"] == (base["toolCallRecall"] == base["toolCallPrecision"] == 1.0)


@settings(max_examples=examples(400), deadline=None)
@given(expectations, calls, st.randoms(use_true_random=False))
def test_the_matching_is_maximum_and_ignores_order(expected, actual, random) -> None:
    matching = maximum_matching(expected, actual)
    assert len(set(matching.values())) == len(matching)  # one to one
    assert all(call_matches(expected[i], actual[j]) for i, j in matching.items())
    assert len(matching) >= _first_fit(expected, actual)
    shuffled_expected, shuffled_actual = random.sample(expected, len(expected)), random.sample(actual, len(actual))
    assert len(maximum_matching(shuffled_expected, shuffled_actual)) == len(matching)
    for mode in ("unordered", "subset", "superset"):
        assert trajectory_match(shuffled_expected, shuffled_actual, mode) == trajectory_match(expected, actual, mode)
    rows = aligned_calls(expected, actual, "strict")
    assert sum(row["status"] in ("match", "out_of_order") for row in rows) == len(matching)
    assert sorted(row["position"] for row in rows if row["actual"] is not None) == list(range(1, len(actual) + 1))


def test_the_worked_example_of_metrics_md() -> None:
    expected = [expect("lookup_order", order_id="NW-1"), expect("check_stock", store="Leeds")]
    made = [call("check_stock", product="Vela E3", store="Leeds"), call("lookup_order", order_id="NW-1"), call("send_email", to="me")]
    by_mode = {mode: tool_metrics(expected, made, mode) for mode in MATCH_MODES}
    assert {mode: m["trajectoryMatch"] for mode, m in by_mode.items()} == {"strict": 0, "unordered": 0, "subset": 0, "superset": 1}
    assert by_mode["strict"]["toolCallRecall"] == 1 and by_mode["strict"]["toolCallPrecision"] == pytest.approx(2 / 3)
    made[0] = call("check_stock", product="Vela E3", store="York")
    by_mode = {mode: tool_metrics(expected, made, mode) for mode in MATCH_MODES}
    assert all(m["trajectoryMatch"] == 0 and m["toolCallRecall"] == 0.5 and m["toolCallPrecision"] == pytest.approx(1 / 3)
               for m in by_mode.values())
