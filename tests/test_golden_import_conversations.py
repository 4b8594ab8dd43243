"""`crucible golden import` of multi-turn data: ragas MultiTurnSamples and DeepEval ConversationalGoldens become
golden conversations (docs/golden-format.md#conversations), one test per turn.

The sources are written here as each tool writes them: ragas' ``EvaluationDataset.to_jsonl`` (each message
``model_dump(exclude_none=True)``: ``content``, ``type``, an AI message's ``tool_calls`` of ``name`` and
``args``) and ``to_csv`` (the message list as Python's repr in one cell); DeepEval's ``save_as`` (JSON: every
key written, nulls included; CSV: the turns as one JSON cell).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from helpers import crucible_cli

RAGAS_SAMPLES = [
    {"user_input": [
        {"content": "Can I return a bike I rode 80 km?", "type": "human"},
        {"content": "Yes, with a 10% usage fee.", "type": "ai"},
        {"content": "And what is the weather in Paris?", "type": "human"},
        {"content": "", "type": "ai", "tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
        {"content": "18C, sunny", "type": "tool"},
        {"content": "It is 18C and sunny in Paris.", "type": "ai"}],
     "reference": "18 degrees and sunny.", "reference_tool_calls": [{"name": "weather", "args": {"city": "Paris"}}],
     "reference_topics": ["returns", "weather"]},
    {"user_input": [{"content": "Hello", "type": "human"}], "reference": "Hi, how can I help?"},
]

DEEPEVAL_GOLDENS = [
    {"scenario": "A customer asks about returning a ridden bike", "turns": [
        {"role": "user", "content": "Can I return a bike I rode 80 km?", "user_id": None, "retrieval_context": None, "tools_called": None},
        {"role": "assistant", "content": "Yes, a 10% fee applies.", "retrieval_context": ["Returns between 50 and 150 km: 10% fee."],
         "tools_called": [{"name": "policy_lookup", "input_parameters": {"topic": "returns"}}]},
        {"role": "user", "content": "Up to how many kilometres?"}],
     "expected_outcome": "Up to 150 km.", "user_description": None, "persona": None,
     "context": ["Returns between 50 and 150 km carry a 10% usage fee."], "name": "returns", "comments": None,
     "additional_metadata": {"id": "conv-returns"}, "custom_column_key_values": None},
]

CONFTEST = '''
import pytest

def pipeline(question, *, item, config, mode, history=None):
    return {"answer": f"{len(history or [])} messages before: {question}", "retrieved": [], "citations": []}

@pytest.fixture
def crucible_pipeline():
    return pipeline
'''


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    return path


def _import(source: Path, fmt: str, output: Path, *extra: str) -> tuple[pytest.RunResult, list[dict]]:
    result = crucible_cli("golden", "import", source, "--from", fmt, "-o", output, *extra)
    items = [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
    return result, items


def test_a_ragas_multi_turn_sample_becomes_a_conversation_whose_turns_each_run_as_a_test(pytester: pytest.Pytester) -> None:
    source = _jsonl(pytester.path / "multi_turn.jsonl", RAGAS_SAMPLES)
    golden = pytester.path / "golden_chat.jsonl"
    result, items = _import(source, "ragas", golden, "--accept")
    assert result.ret == 0, result.stderr
    first = items[0]
    assert first["turns"] == [
        {"question": "Can I return a bike I rode 80 km?", "assistant": "Yes, with a 10% usage fee."},
        # the expected call lands on the turn whose assistant made the sample's call; the reference on the last turn
        {"question": "And what is the weather in Paris?", "assistant": "It is 18C and sunny in Paris.",
         "reference": "18 degrees and sunny.", "expectedTools": [{"name": "weather", "arguments": {"city": "Paris"}}]}]
    assert "question" not in first and first["status"] == "active"
    assert first["metadata"]["sourceFields"] == {"reference_topics": ["returns", "weather"]}  # kept for the way back
    assert items[1]["turns"] == [{"question": "Hello", "reference": "Hi, how can I help?"}]
    out = "\n".join(result.outlines)
    assert "conversations: 2 of them, 3 turn(s)" in out
    assert "not imported: a tool call the source's assistant made (1), a tool message (1)" in out

    review = crucible_cli("golden", "review", golden, "--status", "active")
    assert review.ret == 0, review.stderr
    assert "  assistant: Yes, with a 10% usage fee." in review.outlines  # the reply replay gives the next turn

    pytester.makeconftest(CONFTEST)
    run = pytester.runpytest(golden, "-p", "no:randomly", "-p", "no:cacheprovider", f"--crucible-db={pytester.path / 'runs.db'}",
                             "--crucible-mode=component", "--collect-only", "-q")
    assert run.ret == pytest.ExitCode.OK, run.outlines
    ids = [line.split("::")[1] for line in run.outlines if "::" in line]
    assert ids == [f"{first['id']}:t1", f"{first['id']}:t2", f"{items[1]['id']}:t1"]
    # replay: the second turn is answered on the history the sample wrote
    run = pytester.runpytest(golden, "-p", "no:randomly", "-p", "no:cacheprovider", f"--crucible-db={pytester.path / 'runs.db'}",
                             "--crucible-conversation=replay", "-k", f"{first['id']}:t2", "-q")
    assert run.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), run.outlines
    [run_id] = [line.split()[2] for line in run.outlines if line.startswith("crucible run ")]
    show = crucible_cli("show", run_id, "--db", pytester.path / "runs.db", "--item", f"{first['id']}:t2")
    assert show.ret == 0, show.stderr
    assert "2 messages before: And what is the weather in Paris?" in "\n".join(show.outlines)


def test_ragas_csv_holds_the_messages_as_pythons_repr_in_one_cell(tmp_path: Path) -> None:
    source = tmp_path / "multi_turn.csv"
    with source.open("w", newline="") as handle:  # as EvaluationDataset.to_csv writes a multi-turn dataset
        writer = csv.DictWriter(handle, fieldnames=["user_input", "reference"])
        writer.writeheader()
        writer.writerow({"user_input": str(RAGAS_SAMPLES[1]["user_input"] + [{"content": "Bye", "type": "human"}]),
                         "reference": "Goodbye"})
    result, items = _import(source, "ragas", tmp_path / "golden_csv.jsonl")
    assert result.ret == 0, result.stderr
    assert items[0]["turns"] == [{"question": "Hello\nBye", "reference": "Goodbye"}]  # no reply between them: one question
    assert items[0]["metadata"]["importedFrom"]["row"] == 2


def test_expected_tool_calls_go_on_the_last_turn_when_the_samples_own_calls_do_not_add_up(tmp_path: Path) -> None:
    sample = {"user_input": [{"content": "Weather in Paris?", "type": "human"}, {"content": "Sunny.", "type": "ai"},
                             {"content": "And in Rome?", "type": "human"}],
              "reference_tool_calls": [{"name": "weather", "args": {"city": "Paris"}}, {"name": "weather", "args": {"city": "Rome"}}]}
    result, items = _import(_jsonl(tmp_path / "s.jsonl", [sample]), "ragas", tmp_path / "golden_s.jsonl")
    assert result.ret == 0, result.stderr
    assert "expectedTools" not in items[0]["turns"][0]
    assert [call["arguments"]["city"] for call in items[0]["turns"][1]["expectedTools"]] == ["Paris", "Rome"]


@pytest.mark.parametrize("suffix", ["json", "csv"])
def test_a_deepeval_conversational_golden_becomes_a_conversation(tmp_path: Path, suffix: str) -> None:
    source = tmp_path / f"goldens.{suffix}"
    if suffix == "json":
        source.write_text(json.dumps(DEEPEVAL_GOLDENS, indent=4))
    else:  # save_as("csv"): the turns as JSON in one cell, the context joined, empty cells for nulls
        with source.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["scenario", "turns", "expected_outcome", "user_description", "context", "name", "comments",
                             "additional_metadata", "custom_column_key_values"])
            golden = DEEPEVAL_GOLDENS[0]
            writer.writerow([golden["scenario"], json.dumps(golden["turns"]), golden["expected_outcome"], "",
                             "|".join(golden["context"]), golden["name"], "", json.dumps(golden["additional_metadata"]), ""])
    result, items = _import(source, "deepeval", tmp_path / "golden_de.jsonl")
    assert result.ret == 0, result.stderr
    [item] = items
    assert item["id"] == "conv-returns"
    assert item["turns"] == [{"question": "Can I return a bike I rode 80 km?", "assistant": "Yes, a 10% fee applies."},
                             {"question": "Up to how many kilometres?", "reference": "Up to 150 km."}]
    assert item["metadata"]["referenceContexts"] == ["Returns between 50 and 150 km carry a 10% usage fee."]
    assert item["metadata"]["sourceFields"]["scenario"] == "A customer asks about returning a ridden bike"
    out = "\n".join(result.outlines)
    assert "a passage the source's assistant retrieved (1), a tool call the source's assistant made (1)" in out
    check = crucible_cli("golden", "check", tmp_path / "golden_de.jsonl")
    assert check.ret == 0, check.outlines


def test_multi_turn_mistakes_name_file_line_and_field_and_nothing_is_written(tmp_path: Path) -> None:
    bad = _jsonl(tmp_path / "bad.jsonl", [
        {"user_input": [{"content": "Hi", "type": "person"}]},
        {"user_input": [{"content": "How can I help?", "type": "ai"}]},
        {"user_input": [{"type": "human"}]},
        {"user_input": [{"content": "Hi", "type": "human"}], "reference_tool_calls": [{"args": {}}]},
    ])
    result, items = _import(bad, "ragas", tmp_path / "golden_out.jsonl")
    assert result.ret == 2 and items == []
    err = result.stderr.str()
    assert "bad.jsonl:1: field 'user_input[0].type': expected one of 'human', 'ai', 'tool', got \"person\"" in err
    assert "bad.jsonl:2: field 'user_input': no user message" in err
    assert "bad.jsonl:3: field 'user_input[0].content': expected the message's text" in err
    assert "bad.jsonl:4: field 'reference_tool_calls[0].name': tool call 1 has no name" in err
    assert err.count("HINT:") == 4 and "Traceback" not in err

    scenario_only = tmp_path / "scenarios.json"
    scenario_only.write_text(json.dumps([DEEPEVAL_GOLDENS[0], {"scenario": "A refund", "turns": None, "expected_outcome": "x"}]))
    result, items = _import(scenario_only, "deepeval", tmp_path / "golden_sc.jsonl")
    assert result.ret == 2 and items == []
    assert "field 'turns': no turns: a ConversationalGolden with only a scenario has no question to ask" in result.stderr.str()
    result, items = _import(scenario_only, "deepeval", tmp_path / "golden_sc.jsonl", "--skip-invalid")
    assert result.ret == 0 and [item["id"] for item in items] == ["conv-returns"]
    assert "skipped 1 invalid record(s)" in "\n".join(result.outlines)

    # the usual mistake: the right file, the wrong --from; the hint names the format the record is in
    for source, wrong, right in ((scenario_only, "ragas", "deepeval"), (bad, "deepeval", "ragas")):
        result, items = _import(source, wrong, tmp_path / "golden_wrong.jsonl")
        assert result.ret == 2 and items == []
        assert f"(it looks like --from {right})" in result.stderr.str()


# -- the way back: golden conversations written whole ------------------------------------------------------------
@pytest.mark.parametrize("target, name", [("ragas", "back.jsonl"), ("deepeval", "back.json"), ("deepeval", "back.csv")])
def test_conversations_go_back_out_whole_and_come_in_again_the_same(tmp_path: Path, target: str, name: str) -> None:
    source = tmp_path / ("source.jsonl" if target == "ragas" else "source.json")
    if target == "ragas":
        _jsonl(source, RAGAS_SAMPLES)
    else:
        source.write_text(json.dumps(DEEPEVAL_GOLDENS))
    _, items = _import(source, target, tmp_path / "golden_in.jsonl", "--accept")
    result = crucible_cli("golden", "convert", tmp_path / "golden_in.jsonl", "--to", target, "-o", tmp_path / name)
    assert result.ret == 0, result.stderr
    turns = sum(len(item["turns"]) for item in items)
    assert result.outlines[0] == f"wrote {len(items)} conversation(s) ({turns} turns) as {target} multi-turn samples to {tmp_path / name}"
    again, round_trip = _import(tmp_path / name, target, tmp_path / "golden_again.jsonl", "--accept")
    assert again.ret == 0, again.stderr
    assert [item["turns"] for item in round_trip] == [item["turns"] for item in items]
    if target == "ragas":  # the sample's own fields restored, the expected calls as reference_tool_calls
        written = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        assert written[0]["reference_topics"] == ["returns", "weather"]
        assert written[0]["reference_tool_calls"] == [{"name": "weather", "args": {"city": "Paris"}}]
        assert [message["type"] for message in written[0]["user_input"]] == ["human", "ai", "human", "ai"]
    else:  # the id, the scenario and the passages back where DeepEval keeps them
        assert [item["id"] for item in round_trip] == ["conv-returns"]
        assert round_trip[0]["metadata"]["sourceFields"]["scenario"] == DEEPEVAL_GOLDENS[0]["scenario"]
        assert round_trip[0]["metadata"]["referenceContexts"] == DEEPEVAL_GOLDENS[0]["context"]


def test_a_conversation_written_for_deepeval_says_what_a_conversational_golden_cannot_hold(tmp_path: Path) -> None:
    golden = tmp_path / "golden_chat.jsonl"
    golden.write_text(json.dumps({"id": "c01", "tags": ["support"], "turns": [
        {"question": "Where is order 7?", "reference": "On its way.", "expectedTools": [{"name": "lookup_order"}]},
        {"question": "When will it arrive?", "reference": "Tomorrow."}]}) + "\n")
    result = crucible_cli("golden", "convert", golden, "--to", "deepeval", "-o", tmp_path / "back.json")
    assert result.ret == 0, result.stderr
    [golden_written] = json.loads((tmp_path / "back.json").read_text())
    assert golden_written["scenario"] == "Where is order 7?"  # DeepEval requires one: the first question
    assert golden_written["expected_outcome"] == "Tomorrow." and golden_written["additional_metadata"] == {"id": "c01"}
    lost = result.outlines[1]
    for what in ("expectedTools (1 item(s))", "tags (1 item(s))", "references of turns before the last"):
        assert what in lost, lost


# -- LangSmith chat examples -------------------------------------------------------------------------------------
LANGSMITH_CHATS = [
    # Client.create_chat_example: LangChain's serialised messages under inputs.input, the reply under outputs.output
    {"id": "5f0c2a9e-0000-4000-8000-000000000001", "inputs": {"input": [
        {"type": "system", "data": {"content": "You are the shop's assistant."}},
        {"type": "human", "data": {"content": "Can I return a bike I rode 80 km?"}},
        {"type": "ai", "data": {"content": "Yes, with a 10% usage fee."}},
        {"type": "human", "data": {"content": "Up to how many km?"}}]},
     "outputs": {"output": {"type": "ai", "data": {"content": "Up to 150 km."}}}, "metadata": {"dataset_split": ["test"]}},
    # a dataset with the Message schema: OpenAI messages under inputs.messages, content parts, a tool call
    {"id": "5f0c2a9e-0000-4000-8000-000000000002", "inputs": {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "18C in Paris."},
        {"role": "user", "content": "And tomorrow?"}]},
     "outputs": {"message": {"role": "assistant", "content": "Tomorrow 21C."}}, "metadata": {"dataset_split": ["train"]}},
]


def test_langsmith_chat_examples_become_conversations(tmp_path: Path) -> None:
    result, items = _import(_jsonl(tmp_path / "chat.jsonl", LANGSMITH_CHATS), "langsmith", tmp_path / "golden_ls.jsonl")
    assert result.ret == 0, result.stderr
    assert [item["id"] for item in items] == [chat["id"] for chat in LANGSMITH_CHATS]
    assert items[0]["turns"] == [{"question": "Can I return a bike I rode 80 km?", "assistant": "Yes, with a 10% usage fee."},
                                 {"question": "Up to how many km?", "reference": "Up to 150 km."}]
    assert items[1]["turns"] == [{"question": "What is the weather in Paris?", "assistant": "18C in Paris."},
                                 {"question": "And tomorrow?", "reference": "Tomorrow 21C."}]
    assert items[0]["metadata"]["importedFrom"]["fields"]["turns"] == "inputs.input"
    assert items[0]["metadata"]["sourceFields"] == {"metadata": {"dataset_split": ["test"]}}
    out = "\n".join(result.outlines)
    assert "a system message (1)" in out and "a tool call the source's assistant made (1)" in out and "a tool message (1)" in out
    result, items = _import(tmp_path / "chat.jsonl", "langsmith", tmp_path / "golden_test.jsonl", "--split", "test")
    assert result.ret == 0 and [item["id"] for item in items] == [LANGSMITH_CHATS[0]["id"]]
    bad = _jsonl(tmp_path / "bad.jsonl", [{"inputs": {"messages": [{"role": "customer", "content": "Hi"}]}}])
    result, items = _import(bad, "langsmith", tmp_path / "golden_bad.jsonl")
    assert result.ret == 2 and items == []
    assert "bad.jsonl:1: field 'inputs.messages[0].role': expected one of 'user', 'human'" in result.stderr.str()
