"""Golden conversations end to end: a golden item with ``turns`` is one test per turn (``CONV:tN``), each turn's
pipeline call gets the conversation so far (``history=``, live or replay), an errored turn breaks the turns after
it, turns stay in order under --crucible-concurrency and on one worker under pytest-xdist's --dist loadgroup, a
conversation is one cluster of the comparison, and each conversation gets conversationSuccess and
turnsToFirstFailure; the golden file's errors name file, line, turn and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import crucible_cli, db_rows, write_golden, write_project

from pytest_crucible.evaluation.conversations import conversation_metrics
from pytest_crucible.golden_set.schema import GoldenFileError, golden_set_hash, load_golden_file

SYSTEM_RECORD = "crucible_mode = system\ncrucible_outcome = record"
GOOD = "Bikes can be returned within 30 days [S1]."
WRONG = "Opening hours are 9 to 5."


def conversation(cid: str, turns: int = 3, *, written: bool = True, **fields) -> dict:
    """A conversation about the returns policy: each turn cites the returns passage, its author's reply written."""
    return {"id": cid, "citations": [{"docId": "returns", "chunkId": "returns#p1"}], "reference": "Bikes can be returned within 30 days.",
            **fields, "turns": [{"question": f"{cid} question {n}", **({"assistant": f"{cid} written reply {n}"} if written else {})}
                                for n in range(1, turns + 1)]}


# Logs every call (the item, the history it got, the xdist worker, when) to calls.jsonl in the project. config:
# "wrong": {item id: ...} answers those wrongly; "slow_first": the first turns take 0.4 s; "boom": questions that raise.
CONFTEST = '''
import json, os, time
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode, history=None):
        started = time.monotonic()
        if config.get("slow_first") and item.conversation is not None and item.conversation.turn == 1:
            time.sleep(0.4)
        with open("calls.jsonl", "a") as log:
            log.write(json.dumps({"item": item.id, "history": history, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                                  "start": started, "end": time.monotonic()}) + "\\n")
        if item.id in config.get("boom", []):
            raise ValueError("the model server went away")
        answer = "WRONG_ANSWER" if item.id in config.get("wrong", []) else "GOOD_ANSWER"
        return {"answer": answer, "retrieved": [{"chunk_id": "returns#p1", "doc_id": "returns", "text": "Bikes can be returned within 30 days."}]}
    return pipeline
'''.replace("WRONG_ANSWER", WRONG).replace("GOOD_ANSWER", GOOD)


# A reordering plugin, for the tests about order: the tests run last to first.
REVERSED = '''

def pytest_collection_modifyitems(items):
    items.reverse()
'''


def calls(project: pytest.Pytester) -> list[dict]:
    path = project.path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def history_of(project: pytest.Pytester) -> dict[str, list]:
    return {call["item"]: call["history"] for call in calls(project)}


def stored(project: pytest.Pytester, sql: str) -> list[tuple]:
    return db_rows(project, sql + " AND run_id = (SELECT id FROM runs ORDER BY rowid DESC LIMIT 1)")


@pytest.fixture
def chat(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with an item and two conversations (c01 of 3 turns, c02 of 2)."""
    items = [{"id": "q1", "question": "How long is the return window?", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
             conversation("c01"), conversation("c02", 2)]
    return write_project(pytester, items, CONFTEST, ini=SYSTEM_RECORD, golden="golden_chat.jsonl",
                         configs={"boom.json": {"boom": ["c01:t1"]}, "slow.json": {"slow_first": True}})


# -- the golden file ------------------------------------------------------------------------------------
def _error(tmp_path: Path, *records: dict | str) -> str:
    path = tmp_path / "golden_chat.jsonl"
    path.write_text("".join((record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records))
    with pytest.raises(GoldenFileError) as caught:
        load_golden_file(path, display_path="golden_chat.jsonl")
    return str(caught.value)


@pytest.mark.parametrize(("records", "expected"), [
    ([{"id": "c01", "turns": [{"question": "a"}, {"reference": "b"}]}],
     "golden_chat.jsonl:1: field 'turns[1].question': missing (turn 2)\nHINT: every turn asks its own question"),
    ([{"id": "q0", "question": "fine"}, {"id": "c01", "turns": []}],
     "golden_chat.jsonl:2: field 'turns': expected a non-empty list of turns (got an empty list)\nHINT: "),
    ([{"id": "c01", "question": "a", "turns": [{"question": "b"}]}],
     "golden_chat.jsonl:1: field 'question': an item has either 'question' (one question) or 'turns' (a conversation), not both\nHINT: "),
    ([{"id": "c01", "turns": [{"question": "a", "refrence": "b"}]}],
     "golden_chat.jsonl:1: field 'turns[0].refrence': unknown field in a turn (turn 1)\nHINT: did you mean 'reference'?"),
    ([{"id": "c01", "turns": [{"question": "a"}, {"question": "b", "status": "draft"}]}],
     "golden_chat.jsonl:1: field 'turns[1].status': unknown field in a turn (turn 2)\nHINT: 'status' applies to the whole conversation"),
    ([{"id": "c01", "turns": [{"question": "a"}, {"question": "b", "kind": "chat"}]}],
     "golden_chat.jsonl:1: field 'turns[1].kind': Input should be 'retrieval', 'aggregation' or 'adversarial' (got \"chat\") (turn 2)\nHINT: "),
    ([{"id": "c01", "turns": [{"question": "a", "assistant": ""}]}],
     "golden_chat.jsonl:1: field 'turns[0].assistant': expected the assistant's reply as text (turn 1)\nHINT: "),
    ([{"id": "c01", "turns": [{"question": "a"}]}, {"id": "c01", "turns": [{"question": "b"}]}],
     "golden_chat.jsonl:2: field 'id': duplicate id 'c01' (first used on line 1 by a conversation, again on line 2 by a conversation)"),
    ([{"id": "c01:t2", "question": "an item named like a turn"}, {"id": "c01", "turns": [{"question": "a"}, {"question": "b"}]}],
     "golden_chat.jsonl:2: field 'id': duplicate id 'c01:t2' (first used on line 1 by an item, again on line 2 by turn 2 of "
     "conversation 'c01')\nHINT: ids must be unique within a golden set"),
    ([{"id": "c01", "question": "an item"}, {"id": "c01", "turns": [{"question": "a"}]}],
     "golden_chat.jsonl:2: field 'id': duplicate id 'c01' (first used on line 1 by an item, again on line 2 by a conversation)"),
    ([{"id": "c01", "conversation": {"id": "c01", "turn": 1, "turns": 1}, "turns": [{"question": "a"}]}],
     "golden_chat.jsonl:1: field 'conversation': set by crucible on each turn of a conversation, never written in a golden file\nHINT: "),
])
def test_a_bad_conversation_is_one_error_naming_file_line_turn_and_field(tmp_path, records, expected) -> None:
    message = _error(tmp_path, *records)
    assert message.startswith(expected), message
    assert "\nHINT: " in message and "Traceback" not in message


def test_turns_are_items_with_the_conversation_s_fields_and_old_items_keep_their_hash(tmp_path) -> None:
    plain = {"id": "q1", "question": "How long is the return window?", "cluster": None}
    path = write_golden(tmp_path / "golden_chat.jsonl", [
        {"id": "q1", "question": "How long is the return window?"},
        {"id": "c01", "tags": ["topic:returns"], "status": "draft", "citations": [{"docId": "returns"}], "metadata": {"owner": "cx"},
         "turns": [{"question": "Can I return a bike?", "assistant": "Yes, within 30 days.", "reference": "Yes."},
                   {"question": "And in which months?", "tags": ["follow-up"], "citations": [{"docId": "seasons"}]}]}])
    q1, t1, t2 = load_golden_file(path)
    assert [q1.id, t1.id, t2.id] == ["q1", "c01:t1", "c01:t2"] and t1.line == t2.line == 2
    # A turn's own value replaces the conversation's, but tags add up; everything else is the conversation's.
    assert t1.tags == ["topic:returns"] and t2.tags == ["topic:returns", "follow-up"]
    assert [c.doc_id for c in t1.citations] == ["returns"] and [c.doc_id for c in t2.citations] == ["seasons"]
    assert t1.reference == "Yes." and t2.reference is None and t1.status == t2.status == "draft" and t2.metadata == {"owner": "cx"}
    assert t2.to_json()["conversation"] == {"id": "c01", "turn": 2, "turns": 2, "assistant": None,
                                            "history": [{"question": "Can I return a bike?", "assistant": "Yes, within 30 days."}]}
    assert t2.earlier_turn(1) is t1
    # An item without turns is written exactly as before (no conversation key): its hash, and the set's, stay.
    assert "conversation" not in q1.to_json()
    alone = load_golden_file(write_golden(tmp_path / "golden_one.jsonl", [{k: v for k, v in plain.items() if v is not None}]))
    assert golden_set_hash([alone[0].to_json()]) == golden_set_hash([q1.to_json()])


def test_conversation_metrics_per_conversation() -> None:
    def turn(cid, n, of, grade=None, error=None):
        return {"item_id": f"{cid}:t{n}", "conversation": {"id": cid, "turn": n, "turns": of}, "crag_grade": grade, "error": error}

    values = conversation_metrics([
        turn("ok", 1, 2, "perfect"), turn("ok", 2, 2, "acceptable"),
        turn("late", 1, 3, "perfect"), turn("late", 2, 3, "perfect"), turn("late", 3, 3, "missing"),
        turn("first", 1, 2, "incorrect"), turn("first", 2, 2, "perfect"),
        turn("errored", 1, 2, error="ValueError: x"), turn("errored", 2, 2, error="turn 1 errored: ValueError: x"),
        turn("partial", 2, 2, "perfect"),  # turn 1 not in the run: no value
        turn("ungraded", 1, 2, "perfect"), turn("ungraded", 2, 2),  # a turn without a grade: no value
    ])
    assert values == {"ok:t2": {"conversationSuccess": 1.0, "turnsToFirstFailure": 3.0},
                      "late:t3": {"conversationSuccess": 0.0, "turnsToFirstFailure": 3.0},
                      "first:t2": {"conversationSuccess": 0.0, "turnsToFirstFailure": 1.0},
                      "errored:t2": {"conversationSuccess": 0.0, "turnsToFirstFailure": 1.0}}


# -- collection ------------------------------------------------------------------------------------------
def test_each_turn_is_a_test_named_conv_tn(chat: pytest.Pytester) -> None:
    result = chat.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["golden_chat.jsonl::q1", "golden_chat.jsonl::c01:t1", "golden_chat.jsonl::c01:t2",
                                 "golden_chat.jsonl::c01:t3", "golden_chat.jsonl::c02:t1", "golden_chat.jsonl::c02:t2"])
    # One conversation by its mark.
    marked = chat.runpytest("--collect-only", "-q", "-m", "crucible(conversation='c02')")
    marked.stdout.fnmatch_lines(["golden_chat.jsonl::c02:t1", "golden_chat.jsonl::c02:t2", "*4 deselected*"])


def test_a_bad_conversation_stops_collection_with_the_error(chat: pytest.Pytester) -> None:
    write_golden(chat.path / "golden_chat.jsonl", [{"id": "c01", "turns": [{"question": "a"}, {"reference": "b"}]}])
    result = chat.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["golden_chat.jsonl:1: field 'turns[1].question': missing (turn 2)",
                                 "HINT: every turn asks its own question*"])
    assert "Traceback" not in result.stdout.str() and not calls(chat)


def test_a_conversation_id_taken_in_another_file_is_refused(chat: pytest.Pytester) -> None:
    write_golden(chat.path / "golden_more.jsonl", [{"id": "c02", "question": "an item named like another file's conversation"}])
    result = chat.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*field 'id': duplicate id 'c02' (also at golden_*.jsonl:*)*"])


# -- the history -----------------------------------------------------------------------------------------
def test_live_history_holds_the_pipeline_s_own_earlier_answers(chat: pytest.Pytester) -> None:
    result = chat.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    history = history_of(chat)
    assert history["q1"] is None  # a single item is called as before: no history argument
    assert history["c01:t1"] == [] and history["c02:t1"] == []
    assert history["c01:t3"] == [{"role": "user", "content": "c01 question 1"}, {"role": "assistant", "content": GOOD},
                                 {"role": "user", "content": "c01 question 2"}, {"role": "assistant", "content": GOOD}]
    assert history["c02:t2"] == [{"role": "user", "content": "c02 question 1"}, {"role": "assistant", "content": GOOD}]
    assert len(calls(chat)) == 6  # one call per turn
    rows = stored(chat, "SELECT item_id, question, json_extract(i.item, '$.conversation.turn') FROM results JOIN golden_items i USING (run_id, item_id) WHERE 1")
    assert sorted(rows) == [("c01:t1", "c01 question 1", 1), ("c01:t2", "c01 question 2", 2), ("c01:t3", "c01 question 3", 3),
                            ("c02:t1", "c02 question 1", 1), ("c02:t2", "c02 question 2", 2), ("q1", "How long is the return window?", None)]


def test_replay_history_holds_the_replies_the_file_writes(chat: pytest.Pytester) -> None:
    result = chat.runpytest("--crucible-conversation=replay", "--crucible-config=boom.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    history = history_of(chat)
    assert history["c01:t3"] == [{"role": "user", "content": "c01 question 1"}, {"role": "assistant", "content": "c01 written reply 1"},
                                 {"role": "user", "content": "c01 question 2"}, {"role": "assistant", "content": "c01 written reply 2"}]
    # On a fixed history, turn 1's error does not touch the turns after it.
    outcomes = dict(stored(chat, "SELECT item_id, outcome FROM results WHERE 1"))
    assert outcomes["c01:t1"] == "error" and outcomes["c01:t2"] == outcomes["c01:t3"] == "passed"


def test_replay_needs_the_written_reply_of_every_earlier_turn(pytester: pytest.Pytester) -> None:
    write_project(pytester, [conversation("c01", written=False)], CONFTEST, ini=SYSTEM_RECORD + "\ncrucible_conversation = replay",
                  golden="golden_chat.jsonl")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["golden_chat.jsonl:1: field 'turns[0].assistant': missing (turn 1 of conversation 'c01'): "
                                 "crucible_conversation = replay puts the author's replies in the history of turn 2",
                                 "HINT: write the assistant's reply of every turn but the last*"])
    # Live needs no written reply.
    assert pytester.runpytest("-o", "crucible_conversation=live").ret == pytest.ExitCode.OK


def test_a_turn_after_an_errored_turn_is_stored_errored_and_never_called(chat: pytest.Pytester) -> None:
    result = chat.runpytest("--crucible-config=boom.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED golden_chat.jsonl::c01:t1 - ValueError: the model server went away",
                                 "FAILED golden_chat.jsonl::c01:t2 - Failed: golden item c01:t2: turn 1 errored*",
                                 "FAILED golden_chat.jsonl::c01:t3 - Failed: golden item c01:t3: turn 1 errored*"])
    errors = dict(stored(chat, "SELECT item_id, error FROM results WHERE outcome = 'error'"))
    assert errors == {"c01:t1": "ValueError: the model server went away",
                      "c01:t2": "turn 1 errored: ValueError: the model server went away",
                      "c01:t3": "turn 1 errored: ValueError: the model server went away"}
    assert [call["item"] for call in calls(chat) if call["item"].startswith("c01")] == ["c01:t1"]
    # The conversation failed at its first turn.
    assert dict(stored(chat, "SELECT metric, value FROM item_metrics WHERE item_id = 'c01:t3'")) == {
        "conversationSuccess": 0.0, "turnsToFirstFailure": 1.0}


def test_a_pipeline_without_history_still_runs_the_turns_and_is_told(pytester: pytest.Pytester) -> None:
    conftest = CONFTEST.replace("mode, history=None):", "mode):").replace('"history": history', '"history": "none"')
    write_project(pytester, [conversation("c01", 2)], conftest, ini=SYSTEM_RECORD, golden="golden_chat.jsonl")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*CrucibleWarning: the golden set holds conversations, and the pipeline takes no history parameter*"])
    assert len(calls(pytester)) == 2


def test_concurrent_conversations_keep_their_turns_in_order(chat: pytest.Pytester) -> None:
    items = [conversation(f"c{n:02d}", 3) for n in range(4)]
    write_golden(chat.path / "golden_chat.jsonl", items)
    chat.makeconftest(CONFTEST + REVERSED)  # every conversation's last turn is taken first: the prefetcher still calls in turn order
    result = chat.runpytest("--crucible-concurrency=4", "--crucible-config=slow.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    by_item = {call["item"]: call for call in calls(chat)}
    assert len(calls(chat)) == 12  # every turn called once, whatever order the tests ran in
    for n in range(4):
        first, second, third = (by_item[f"c{n:02d}:t{t}"] for t in (1, 2, 3))
        # Turn 2 starts once turn 1 has its answer, and gets it.
        assert second["start"] >= first["end"] and third["start"] >= second["end"]
        assert second["history"][1] == {"role": "assistant", "content": GOOD}
        assert len(third["history"]) == 4
    # Different conversations ran at once: the slow first turns overlap.
    firsts = sorted((by_item[f"c{n:02d}:t1"]["start"], by_item[f"c{n:02d}:t1"]["end"]) for n in range(4))
    assert firsts[1][0] < firsts[0][1]


def test_one_turn_alone_calls_the_turns_before_it_for_its_history(chat: pytest.Pytester) -> None:
    result = chat.runpytest("-k", "c01:t3")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*CrucibleWarning: golden conversation turn c01:t3: its earlier turns c01:t1, c01:t2 are not run by this process*",
                                 "*1 passed, 5 deselected*"])
    assert [call["item"] for call in calls(chat)] == ["c01:t1", "c01:t2", "c01:t3"]
    assert len(history_of(chat)["c01:t3"]) == 4
    # Only the selected turn is recorded; its conversation is not whole, so it has no per-conversation metrics.
    assert stored(chat, "SELECT item_id FROM results WHERE 1") == [("c01:t3",)]
    assert stored(chat, "SELECT metric FROM item_metrics WHERE metric = 'conversationSuccess'") == []


def test_a_later_turn_run_first_calls_the_turns_before_it_once(chat: pytest.Pytester) -> None:
    # A plugin that runs the tests in reverse: c01:t3 comes first and calls turns 1 and 2 for its history; their
    # own tests take those answers. One call per turn, and each recorded answer is the one in the later histories.
    chat.makeconftest(CONFTEST + REVERSED)
    result = chat.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert [call["item"] for call in calls(chat)] == ["c02:t1", "c02:t2", "c01:t1", "c01:t2", "c01:t3", "q1"]
    assert sorted(row[0] for row in stored(chat, "SELECT item_id FROM results WHERE 1")) == [
        "c01:t1", "c01:t2", "c01:t3", "c02:t1", "c02:t2", "q1"]
    assert "CrucibleWarning" not in result.stdout.str()  # nothing was lost: the earlier turns ran, later


# -- pytest-xdist ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_loadgroup_keeps_a_conversation_on_one_worker(chat: pytest.Pytester) -> None:
    write_golden(chat.path / "golden_chat.jsonl", [conversation(f"c{n:02d}", 3) for n in range(6)])
    result = chat.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    workers: dict[str, set] = {}
    for call in calls(chat):
        workers.setdefault(call["item"].split(":")[0], set()).add(call["worker"])
    assert len(calls(chat)) == 18 and all(len(found) == 1 for found in workers.values()), workers
    assert len(set().union(*workers.values())) == 2  # both workers had conversations
    assert "CrucibleWarning" not in result.stdout.str()  # no turn needed calls made for its history alone
    assert sorted(row[0] for row in stored(chat, "SELECT item_id FROM results WHERE 1")) == [
        f"c{n:02d}:t{t}" for n in range(6) for t in (1, 2, 3)]
    assert len(stored(chat, "SELECT item_id FROM item_metrics WHERE metric = 'conversationSuccess'")) == 6


# -- the comparison and the per-conversation metrics -----------------------------------------------------
def test_a_run_on_another_history_than_its_baseline_is_said_so(chat: pytest.Pytester) -> None:
    """The run records the history its turns were answered on; against a baseline answered on the other one, the
    comparison warns (the later turns' change may be the history's), and stays quiet between two live runs."""
    for options in ([], [], ["--crucible-conversation=replay"]):
        assert chat.runpytest(*options).ret == pytest.ExitCode.OK
    db = chat.path / ".crucible" / "crucible.db"
    live, live_again, replay = (row[0] for row in db_rows(chat, "SELECT id FROM runs ORDER BY rowid"))
    same = crucible_cli("compare", live, live_again, "--min-pairs", "2", "--db", db)
    assert same.ret == 0 and "different histories" not in same.stdout.str()
    other = crucible_cli("compare", live, replay, "--min-pairs", "2", "--db", db)
    other.stdout.fnmatch_lines([f"*the conversations' later turns were answered on different histories (live in {live}, replay in {replay}): "
                                "3 turn(s) after the first are compared as they are*"])
    assert [row[0] for row in db_rows(chat, "SELECT conversation_history FROM runs ORDER BY rowid")] == ["live", "live", "replay"]


def test_conversations_are_clusters_of_the_comparison(pytester: pytest.Pytester) -> None:
    items = [conversation(f"c{n:02d}", 3) for n in range(12)]
    wrong = [f"c{n:02d}:t{t}" for n in range(12) for t in (2, 3)]
    write_project(pytester, items, CONFTEST, ini=SYSTEM_RECORD, golden="golden_chat.jsonl",
                  configs={"base.json": {}, "worse.json": {"wrong": wrong}})
    assert pytester.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    result = pytester.runpytest("--crucible-config=worse.json", "--crucible-baseline=latest", "--crucible-html=report.html")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the gate: answers went wrong in every conversation
    result.stdout.fnmatch_lines([
        "  36 paired items, 12 clusters (--crucible-cluster=field: resampled by cluster), seed 1337, p",
        "*",
        "  36 turns in 12 conversations, compared as 12 clusters*",
        "  conversationSuccess * 1.0000  0.0000  -1.0000 *regressed",
        "  turnsToFirstFailure * 4.0000  2.0000  -2.0000 *regressed"])
    ids = [row[0] for row in db_rows(pytester, "SELECT id FROM runs ORDER BY rowid")]
    document = json.loads("\n".join(crucible_cli("compare", *ids, "--json", "--db", pytester.path / ".crucible" / "crucible.db").outlines))
    assert document["clusters"] == 12 and document["conversations"] == {"turns": 36, "conversations": 12, "clusters": 12}
    assert document["power"]["conversationSuccess"]["n"] == 12
    # Every item alone, on request: no clusters, and the line says how many turns the pairs hold.
    alone = crucible_cli("compare", *ids, "--cluster", "none", "--db", pytester.path / ".crucible" / "crucible.db")
    assert any("36 turns in 12 conversations, each turn its own item" in line for line in alone.outlines)
    page = (pytester.path / "report.html").read_text()
    assert page.count('class="turn"') == 36 and 'id="conversation-c00"' in page


def test_per_conversation_metrics_sit_on_the_last_turn(pytester: pytest.Pytester) -> None:
    items = [conversation("ok", 2), conversation("late", 3), conversation("first", 2)]
    write_project(pytester, items, CONFTEST, ini=SYSTEM_RECORD, golden="golden_chat.jsonl",
                  configs={"mixed.json": {"wrong": ["late:t3", "first:t1"]}})
    result = pytester.runpytest("--crucible-config=mixed.json")
    assert result.ret == pytest.ExitCode.OK
    values = {(item, metric): value for item, metric, value in stored(
        pytester, "SELECT item_id, metric, value FROM item_metrics WHERE metric IN ('conversationSuccess', 'turnsToFirstFailure')")}
    assert values == {("ok:t2", "conversationSuccess"): 1.0, ("ok:t2", "turnsToFirstFailure"): 3.0,
                      ("late:t3", "conversationSuccess"): 0.0, ("late:t3", "turnsToFirstFailure"): 3.0,
                      ("first:t2", "conversationSuccess"): 0.0, ("first:t2", "turnsToFirstFailure"): 1.0}
    result.stdout.fnmatch_lines(["  conversationSuccess      0.3333      3", "  turnsToFirstFailure      2.3333      3",
                                 "  conversationSuccess, turnsToFirstFailure: one value per conversation (3), on its last turn"])
    # crucible show: a turn with its conversation's transcript, and a conversation by its id.
    db = pytester.path / ".crucible" / "crucible.db"
    turn = crucible_cli("show", "latest", "--item", "late:t2", "--db", db)
    assert turn.ret == 0
    text = "\n".join(turn.outlines)
    assert "conversation late (3 turns): conversationSuccess 0, turnsToFirstFailure 3" in text
    assert "  turn 2 (late:t2)  <- this item" in text and f"    assistant {WRONG}" in text
    whole = crucible_cli("show", "latest", "--item", "late", "--json", "--db", db)
    document = json.loads("\n".join(whole.outlines))
    assert document["conversationId"] == "late" and [m["grade"] for m in document["conversation"]["messages"]] == [
        "perfect", "perfect", "incorrect"]
    assert document["conversation"]["messages"][0]["retrieved"] == ["returns#p1"]
