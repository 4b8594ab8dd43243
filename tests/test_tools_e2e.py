"""Tool calls and retrieval steps end to end, through pytest: a pipeline that returns ``tool_calls`` and
``steps``, golden items with ``expectedTools``; the metrics stored, shown (terminal, `crucible show --item`,
junit, HTML), held to a threshold in strict mode, and gated against a baseline; an invalid tool call is one
errored item, a bad ``toolMatch`` one golden-file error."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from helpers import crucible_cli, db_rows, write_project

# The pipeline makes the calls an item's metadata says it makes ("calls"), or with the config "forget" the
# last of them; it retrieves in steps when the item asks for it ("steps": lists of chunk ids).
CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        calls = [dict(entry) for entry in item.metadata.get("calls", [])]
        if config.get("forget") and calls:
            calls = calls[:-1]
        result = {"answer": None, "retrieved": [{"chunk_id": "faq#p1", "doc_id": "faq"}], "tool_calls": calls}
        if "steps" in item.metadata:
            result["steps"] = [{"retrieved": [{"chunk_id": chunk, "doc_id": chunk.split("#")[0]} for chunk in step]}
                               for step in item.metadata["steps"]]
        return result
    return pipeline
"""

ORDER = {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}
STOCK = {"name": "check_stock", "arguments": {"product": "Vela E3", "store": "Leeds"}}
ITEMS = [
    # The calls expected, made in order: every metric 1.
    {"id": "t-ok", "question": "Where is order NW-1, and is the Vela E3 in stock in Leeds?",
     "expectedTools": [ORDER, {"name": "check_stock", "arguments": {"store": "Leeds"}}],
     "metadata": {"calls": [ORDER, STOCK]}},
    # The same calls in the other order: strict says no, unordered would say yes.
    {"id": "t-order", "question": "Is the Vela E3 in stock in Leeds, and where is order NW-1?",
     "expectedTools": [ORDER, STOCK], "metadata": {"calls": [STOCK, ORDER]}},
    {"id": "t-unordered", "question": "Stock and order, in any order?", "expectedTools": [ORDER, STOCK], "toolMatch": "unordered",
     "metadata": {"calls": [STOCK, ORDER]}},
    # A call with the wrong store, and one no expectation names.
    {"id": "t-wrong", "question": "Is the Vela E3 in stock in Leeds?", "expectedTools": [STOCK],
     "metadata": {"calls": [{"name": "check_stock", "arguments": {"product": "Vela E3", "store": "York"}},
                            {"name": "send_email", "arguments": {"to": "me"}}]}},
    # No tools expected: none made is perfect.
    {"id": "t-none", "question": "What are the opening hours?", "expectedTools": [], "citations": [{"docId": "faq"}]},
    # Agentic retrieval: two steps, the relevant chunk found by the second; no tool expectations at all.
    {"id": "t-steps", "question": "What does the battery warranty cover?", "citations": [{"docId": "war", "chunkId": "war#p2"}],
     "metadata": {"steps": [["faq#p1", "war#p1"], ["war#p1", "war#p2"]]}},
]


def run_metrics(pytester: pytest.Pytester) -> dict[tuple[str, str], float]:
    return {(item, metric): value for item, metric, value in db_rows(pytester, "SELECT item_id, metric, value FROM item_metrics")}


def test_tool_calls_are_scored_stored_and_shown(pytester: pytest.Pytester) -> None:
    write_project(pytester, ITEMS, CONFTEST)
    result = pytester.runpytest("--junitxml=junit.xml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    metrics = run_metrics(pytester)
    assert {name: metrics[("t-ok", name)] for name in ("toolCallRecall", "toolCallPrecision", "trajectoryMatch", "toolCalls")} == {
        "toolCallRecall": 1.0, "toolCallPrecision": 1.0, "trajectoryMatch": 1.0, "toolCalls": 2.0}
    assert metrics["t-order", "trajectoryMatch"] == 0.0 and metrics["t-order", "toolCallRecall"] == 1.0
    assert metrics["t-unordered", "trajectoryMatch"] == 1.0
    assert (metrics["t-wrong", "toolCallRecall"], metrics["t-wrong", "toolCallPrecision"], metrics["t-wrong", "trajectoryMatch"]) == (0, 0, 0)
    assert (metrics["t-none", "toolCallRecall"], metrics["t-none", "toolCallPrecision"], metrics["t-none", "toolCalls"]) == (1, 1, 0)
    # Tool metrics only where expectedTools is; retrievalSteps only where steps were returned.
    assert not any(item == "t-steps" and name.startswith(("tool", "trajectory")) for item, name in metrics)
    assert [item for item, name in metrics if name == "retrievalSteps"] == ["t-steps"]
    assert metrics["t-steps", "retrievalSteps"] == 2.0
    # The merged ranking (faq#p1, war#p1, war#p2, then the top level's faq#p1 already there) is scored and stored.
    assert metrics["t-steps", "mrr"] == pytest.approx(1 / 3)
    [(retrieved, calls)] = db_rows(pytester, "SELECT (SELECT body FROM contents WHERE hash = retrieved_hash), tool_calls FROM results WHERE item_id = 't-steps'")
    assert [chunk["chunk_id"] for chunk in json.loads(retrieved)] == ["faq#p1", "war#p1", "war#p2"] and calls is None
    [(calls,)] = db_rows(pytester, "SELECT tool_calls FROM results WHERE item_id = 't-wrong'")
    assert [call["name"] for call in json.loads(calls)] == ["check_stock", "send_email"]

    # The terminal summary lists the agent metrics with the others.
    out = result.stdout.str()
    assert "toolCallRecall" in out and "trajectoryMatch" in out and "retrievalSteps" in out
    # junit: each test case carries its metrics as properties.
    case = next(case for case in ET.parse(pytester.path / "junit.xml").iter("testcase") if "t-wrong" in case.get("name", ""))
    properties = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
    assert properties["crucible.trajectoryMatch"] == "0.0" and properties["crucible.toolCalls"] == "2.0"

    # crucible show --item: the calls beside the expected ones, each mismatch marked.
    db = pytester.path / ".crucible" / "crucible.db"
    shown = crucible_cli("show", "latest", "--item", "t-wrong", "--db", db)
    assert shown.ret == 0, shown.outlines
    text = "\n".join(shown.outlines)
    assert "tool calls (toolMatch strict; 1 expected, 2 made):" in text
    assert ('  arguments differ  expected check_stock(product="Vela E3", store="Leeds")\n'
            '                    made     #1 check_stock(product="Vela E3", store="York")\n'
            '                    store: expected "Leeds", got "York"\n'
            '  unexpected        made     #2 send_email(to="me")\n') in text
    order = "\n".join(crucible_cli("show", "latest", "--item", "t-order", "--db", db).outlines)
    assert "out of order" in order
    document = json.loads("\n".join(crucible_cli("show", "latest", "--item", "t-wrong", "--json", "--db", db).outlines))
    assert [row["status"] for row in document["tools"]["rows"]] == ["arguments_differ", "unexpected"]
    assert document["metrics"]["toolCallRecall"] == 0.0
    steps = json.loads("\n".join(crucible_cli("show", "latest", "--item", "t-steps", "--json", "--db", db).outlines))
    assert steps["tools"] is None and [chunk["chunkId"] for chunk in steps["retrieved"]] == ["faq#p1", "war#p1", "war#p2"]

    # The HTML report's item view holds the same rows.
    assert crucible_cli("report", "latest", "-o", pytester.path / "report.html", "--db", db).ret == 0
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    from pytest_crucible.report.item_data import decode_items

    rows = [row for detail in decode_items(html)["detail"] for row in (detail.get("tools") or {}).get("rows", [])]
    assert {"arguments_differ", "unexpected"} <= {row["status"] for row in rows}
    assert 'store: expected "Leeds", got "York"' in [difference for row in rows for difference in row["differences"]]


def test_a_trajectory_threshold_fails_the_right_item_in_strict_mode(pytester: pytest.Pytester) -> None:
    write_project(pytester, ITEMS, CONFTEST, ini="crucible_mode = component\ncrucible_outcome = strict\n"
                                               "crucible_thresholds = trajectoryMatch>=1")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    failed = {line.split("::")[-1].split(" ")[0] for line in result.stdout.lines if line.startswith("FAILED")}
    assert failed == {"t-order", "t-wrong"}, result.stdout.str()
    result.stdout.fnmatch_lines(["*trajectoryMatch = 0 crosses the threshold trajectoryMatch>=1 (crucible_thresholds)*"])
    # The items without the metric (t-steps has no expectedTools) are not held to it.
    outcomes = dict(db_rows(pytester, "SELECT item_id, outcome FROM results"))
    assert outcomes == {"t-ok": "passed", "t-order": "failed", "t-unordered": "passed", "t-wrong": "failed", "t-none": "passed",
                        "t-steps": "passed"}


GATED = [{"id": f"g-{i}", "question": f"Order NW-{i}: where is it, and is its bike in stock?",
          "expectedTools": [{"name": "lookup_order", "arguments": {"order_id": f"NW-{i}"}}, {"name": "check_stock"}],
          "toolMatch": "unordered",
          "metadata": {"calls": [{"name": "lookup_order", "arguments": {"order_id": f"NW-{i}"}},
                                 {"name": "check_stock", "arguments": {"product": "Vela E3"}}]}} for i in range(8)]


def test_the_gate_fails_on_a_tool_call_recall_regression(pytester: pytest.Pytester) -> None:
    write_project(pytester, GATED, CONFTEST, configs={"base.json": {}, "forget.json": {"forget": True}})
    assert pytester.runpytest("--crucible-config=base.json", "-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    # Every item forgets its stock check: recall 1 -> 0.5, the gate fails on it (exit 1) and names it.
    result = pytester.runpytest("--crucible-config=forget.json", "--crucible-baseline=latest", "--crucible-gate=toolCallRecall",
                                "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*GATE FAILED toolCallRecall regressed*"])
    # Unnamed, the gate judges the tool metrics too, but not the count of calls (fewer calls, shown, not gated).
    result = pytester.runpytest("--crucible-config=forget.json", "--crucible-baseline=latest", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out  # the baseline is now the forgetful run: nothing moved
    db = pytester.path / ".crucible" / "crucible.db"
    runs = [run_id for (run_id,) in db_rows(pytester, "SELECT id FROM runs ORDER BY rowid")]
    compared = crucible_cli("compare", runs[0], runs[1], "--json", "--db", db)
    document = json.loads("\n".join(compared.outlines))
    assert compared.ret == 1, compared.outlines
    gated = set(document["gate"]["gated"])
    assert {"toolCallRecall", "trajectoryMatch"} <= gated and "toolCalls" not in gated
    assert document["metrics"]["toolCalls"]["delta"] == -1.0


def test_an_invalid_tool_call_is_one_errored_item_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    items = [{"id": "bad", "question": "q1", "expectedTools": [ORDER], "metadata": {"calls": [ORDER, {"arguments": {"x": 1}}]}},
             {"id": "bad-args", "question": "q2", "expectedTools": [ORDER],
              "metadata": {"calls": [{"name": "lookup_order", "arguments": "{\"order_id\": \"NW-1\"}"}]}},
             {"id": "good", "question": "q3", "expectedTools": [ORDER], "metadata": {"calls": [ORDER]}}]
    write_project(pytester, items, CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    out = result.stdout.str()
    assert "golden item bad: crucible_pipeline returned an invalid result: field 'tool_calls[1].name': Field required" in out
    assert ("golden item bad-args: crucible_pipeline returned an invalid result: field 'tool_calls[0].arguments': Input should "
            "be a valid dictionary (got '{\"order_id\": \"NW-1\"}')\nHINT: a tool call's arguments are an object") in out
    result.stdout.no_fnmatch_line("*Traceback*")
    rows = {item: (outcome, error) for item, outcome, error in db_rows(pytester, "SELECT item_id, outcome, error FROM results")}
    assert rows["good"] == ("passed", None)
    assert rows["bad"][0] == "error" and "tool_calls[1].name" in rows["bad"][1]
    assert rows["bad-args"][0] == "error" and "tool_calls[0].arguments" in rows["bad-args"][1]


def test_a_tool_match_outside_the_four_is_a_golden_file_error(pytester: pytest.Pytester) -> None:
    items = [{"id": "a", "question": "q", "expectedTools": [ORDER], "toolMatch": "unorderd"}]
    write_project(pytester, items, CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*golden_set.jsonl:1: field 'toolMatch': Input should be 'strict', 'unordered', 'subset' or "
                                 "'superset' (got \"unorderd\")", "HINT: did you mean 'unordered'?*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_tool_calls_travel_with_an_exported_run(pytester: pytest.Pytester) -> None:
    write_project(pytester, ITEMS[:4], CONFTEST)
    assert pytester.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    db, other = pytester.path / ".crucible" / "crucible.db", pytester.path / "other.db"
    assert crucible_cli("export", "latest", "-o", pytester.path / "run.json", "--db", db).ret == 0
    assert crucible_cli("import", pytester.path / "run.json", "--db", other).ret == 0
    query = "SELECT item_id, tool_calls FROM results ORDER BY item_id"
    def decoded(rows):
        return [(item, json.loads(calls)) for item, calls in rows]

    assert decoded(db_rows(other, query)) == decoded(db_rows(pytester, query)) and all(calls for _, calls in db_rows(other, query))
    # An exported tool call that is not an object is refused, naming the field.
    document = json.loads((pytester.path / "run.json").read_text())
    document["results"][0]["tool_calls"] = ["lookup_order"]
    (pytester.path / "bad.json").write_text(json.dumps(document))
    refused = crucible_cli("import", pytester.path / "bad.json", "--db", pytester.path / "third.db")
    assert refused.ret != 0 and "field 'results[0].tool_calls': expected a list of objects" in "\n".join(refused.errlines)


CONVERSATION_CONFTEST = """
import pytest

CALLS = {
    "Where is order NW-1?": [{"name": "lookup_order", "arguments": {"order_id": "NW-1"}}],
    "Can I collect it in Leeds?": [{"name": "find_store", "arguments": {"city": "Leeds"}},
                                   {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}],
}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode, history=None):
        # The follow-up only knows the order from the history: without it, the lookup is not made.
        calls = [dict(call) for call in CALLS[question]]
        if not any("NW-1" in message["content"] for message in history or []):
            calls = [call for call in calls if call["name"] != "lookup_order" or question == "Where is order NW-1?"]
        return {"answer": "ok", "retrieved": [{"chunk_id": "faq#p1", "doc_id": "faq"}], "tool_calls": calls}
    return pipeline
"""


def test_a_conversations_turns_are_checked_for_their_own_tool_calls(pytester: pytest.Pytester) -> None:
    """expectedTools and toolMatch are turn fields: the conversation's toolMatch applies to each turn, a turn's
    expectedTools are its own, and each turn is scored on the calls it made with its history."""
    conversation = {"id": "c-order", "toolMatch": "unordered", "turns": [
        {"question": "Where is order NW-1?", "expectedTools": [{"name": "lookup_order", "arguments": {"order_id": "NW-1"}}]},
        {"question": "Can I collect it in Leeds?", "expectedTools": [
            {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}, {"name": "find_store", "arguments": {"city": "Leeds"}}]}]}
    write_project(pytester, [conversation], CONVERSATION_CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    metrics = run_metrics(pytester)
    # Turn 2's calls come in the other order than expected: unordered (the conversation's) matches them.
    assert metrics["c-order:t1", "trajectoryMatch"] == 1.0 and metrics["c-order:t2", "trajectoryMatch"] == 1.0
    assert metrics["c-order:t2", "toolCalls"] == 2.0
    # A turn that cannot set expectedTools to a wrong shape: the error names the turn's field.
    broken = {**conversation, "id": "c-bad", "turns": [{"question": "Where is order NW-1?", "expectedTools": [{"arguments": {}}]}]}
    write_project(pytester, [broken], CONVERSATION_CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*turns[[]0[]].expectedTools[[]0[]].name*"])
