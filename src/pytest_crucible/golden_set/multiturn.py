"""Other tools' multi-turn data as golden conversations (docs/golden-format.md#conversations), for
`crucible golden import` (``golden_set/sources.py`` reads the records, this module their messages).

* ragas: a ``MultiTurnSample`` (``user_input`` a list of messages ``{"type": "human" | "ai" | "tool",
  "content", "tool_calls"}``, ``reference``, ``reference_tool_calls``), as ``EvaluationDataset.to_jsonl``
  writes it, or as ``to_csv`` does (the list as Python's repr in one cell).
* DeepEval: a ``ConversationalGolden`` (``turns`` a list of ``{"role": "user" | "assistant", "content",
  "tools_called", "retrieval_context"}``, ``expected_outcome``, ``scenario``, ``context``), as
  ``EvaluationDataset.save_as`` writes it in JSON, JSONL or CSV (the turns as JSON in one cell).

A user message opens a turn, its ``question``; the assistant messages after it are the turn's
``assistant`` reply (what ``crucible_conversation = replay`` puts in the history). The conversation's
expected answer (ragas ``reference``, DeepEval ``expected_outcome``) is its last turn's ``reference``.
ragas' ``reference_tool_calls`` become ``expectedTools``: spread over the turns in the order the sample's
own assistant messages made them when their numbers agree, else all on the last turn. What the source
recorded of the assistant's own work (tool outputs, tools it called, what it retrieved) is a run's
result, not a golden item's: counted as not imported.

Pure: no pytest, no store.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MultiTurnError", "deepeval_golden", "deepeval_turns", "is_deepeval_conversation", "is_ragas_conversation", "parse_messages", "ragas_sample",
           "ragas_turns"]


class MultiTurnError(ValueError):
    """A message list that cannot be a conversation: ``field`` (the record's field, with its index) and a hint."""

    def __init__(self, field: str, problem: str, hint: str):
        super().__init__(problem)
        self.field, self.problem, self.hint = field, problem, hint


def parse_messages(value: Any) -> Any:
    """A list of messages as written: a list, or one CSV cell holding it as JSON or as Python's repr (ragas'
    ``to_csv``). Anything else is returned as it is (the caller says what it expected)."""
    if isinstance(value, str) and value.strip().startswith("["):
        for parse in (json.loads, ast.literal_eval):
            try:
                return parse(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
    return value


def is_ragas_conversation(record: Mapping[str, Any]) -> bool:
    """A ragas MultiTurnSample: ``user_input`` is a list of messages (not a question)."""
    messages = parse_messages(record.get("user_input"))
    return isinstance(messages, list) and bool(messages) and all(isinstance(m, Mapping) for m in messages)


def is_deepeval_conversation(record: Mapping[str, Any]) -> bool:
    """A DeepEval ConversationalGolden: it has ``turns`` or a ``scenario``, and no single-turn ``input``."""
    return "input" not in record and ("turns" in record or "scenario" in record)


def _text(message: Mapping[str, Any], field: str) -> str:
    content = message.get("content")
    if isinstance(content, (int, float)) and not isinstance(content, bool):
        content = str(content)
    if not isinstance(content, str):
        raise MultiTurnError(field + ".content", f"expected the message's text, got {type(content).__name__}",
                             'a message is {"type": "human", "content": "..."}')
    return content


def _tool_calls(calls: Any, field: str, arguments_key: str) -> list[dict[str, Any]]:
    """Tool calls as written (``{"name", ARGUMENTS_KEY}``) as crucible's ``{"name", "arguments"}``."""
    if calls in (None, ""):
        return []
    if not isinstance(calls, list):
        raise MultiTurnError(field, f"expected a list of tool calls, got {type(calls).__name__}",
                             f'[{{"name": "search", "{arguments_key}": {{"query": "..."}}}}]')
    out = []
    for number, call in enumerate(calls):
        name = call.get("name") if isinstance(call, Mapping) else None
        if not isinstance(name, str) or not name.strip():
            raise MultiTurnError(f"{field}[{number}].name", f"tool call {number + 1} has no name",
                                 f'a tool call is {{"name": "search", "{arguments_key}": {{...}}}}')
        arguments = call.get(arguments_key) or {}
        if not isinstance(arguments, Mapping):
            raise MultiTurnError(f"{field}[{number}].{arguments_key}", f"tool call {number + 1} ('{name}'): not an object",
                                 f'"{arguments_key}": {{"query": "..."}}')
        out.append({"name": name, "arguments": dict(arguments)} if arguments else {"name": name})
    return out


class _Turns:
    """The turns being built: a user message opens one, the assistant's messages join it."""

    def __init__(self, field: str):
        self.field = field
        self.turns: list[dict[str, Any]] = []
        self.made: list[int] = []  # per turn: how many tool calls the source's assistant made in it
        self.not_imported: list[str] = []

    def user(self, text: str) -> None:
        if self.turns and "assistant" not in self.turns[-1] and not self.made[-1]:
            # two user messages without a reply between them: one question
            self.turns[-1]["question"] = (self.turns[-1]["question"] + "\n" + text).strip()
            return
        self.turns.append({"question": text})
        self.made.append(0)

    def assistant(self, text: str, calls: int) -> None:
        if not self.turns:
            self.not_imported.append("an assistant message before the first question")
            return
        if text.strip():
            previous = self.turns[-1].get("assistant")
            self.turns[-1]["assistant"] = f"{previous}\n{text}" if previous else text
        self.made[-1] += calls

    def finish(self, reference: str | None) -> list[dict[str, Any]]:
        turns = [turn for turn in self.turns if turn["question"].strip()]
        if not turns:
            raise MultiTurnError(self.field, "no user message: a conversation needs at least one question",
                                 "a golden conversation is what the user asks, turn by turn; write the user's messages")
        if reference is not None and reference.strip():
            turns[-1]["reference"] = reference
        return turns


def ragas_turns(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the turns of a ragas MultiTurnSample, what it held that became nothing). MultiTurnError on a bad message."""
    messages = parse_messages(record.get("user_input"))
    built = _Turns("user_input")
    for index, message in enumerate(messages):
        field = f"user_input[{index}]"
        kind = message.get("type")
        if kind == "human":
            built.user(_text(message, field))
        elif kind == "ai":
            calls = _tool_calls(message.get("tool_calls"), field + ".tool_calls", "args")
            built.assistant(_text(message, field), len(calls))
            if calls:
                built.not_imported.extend(["a tool call the sample's assistant made"] * len(calls))
        elif kind == "tool":
            _text(message, field)
            built.not_imported.append("a tool's output message")
        else:
            raise MultiTurnError(field + ".type", f"expected 'human', 'ai' or 'tool', got {json.dumps(kind, default=str)[:40]}",
                                 'ragas writes each message with its type: {"type": "human", "content": "..."}')
    reference = record.get("reference")
    turns = built.finish(reference if isinstance(reference, str) else None)
    expected = _tool_calls(parse_messages(record.get("reference_tool_calls")), "reference_tool_calls", "args")
    if expected:
        _spread_tools(turns, built.made, expected)
    return turns, built.not_imported


def _spread_tools(turns: list[dict[str, Any]], made: list[int], expected: list[dict[str, Any]]) -> None:
    """The expected calls onto the turns: as many per turn as the sample's assistant made there when the
    numbers add up (ragas checks the whole conversation's calls in order), else all on the last turn."""
    counts = made[:len(turns)]
    if sum(counts) != len(expected):
        counts = [0] * (len(turns) - 1) + [len(expected)]
    start = 0
    for turn, count in zip(turns, counts):
        if count:
            turn["expectedTools"] = expected[start:start + count]
            start += count


def deepeval_turns(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the turns of a DeepEval ConversationalGolden, what it held that became nothing). MultiTurnError on a
    bad turn, or a golden without turns (a scenario for DeepEval's simulator has nothing to ask yet)."""
    raw = parse_messages(record.get("turns"))
    if raw in (None, "", []):
        raise MultiTurnError("turns", "no turns: a ConversationalGolden with only a scenario has no question to ask",
                             "simulate the conversation first (DeepEval's ConversationSimulator), or write its turns")
    if not isinstance(raw, list):
        raise MultiTurnError("turns", f"expected a list of turns, got {type(raw).__name__}",
                             '[{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]')
    built = _Turns("turns")
    for index, turn in enumerate(raw):
        field = f"turns[{index}]"
        if not isinstance(turn, Mapping):
            raise MultiTurnError(field, f"expected an object, got {type(turn).__name__}", '{"role": "user", "content": "..."}')
        role = turn.get("role")
        if role == "user":
            built.user(_text(turn, field))
        elif role == "assistant":
            built.assistant(_text(turn, field), 0)
        else:
            raise MultiTurnError(field + ".role", f"expected 'user' or 'assistant', got {json.dumps(role, default=str)[:40]}",
                                 'DeepEval writes each turn with its role: {"role": "user", "content": "..."}')
        for key, what in (("tools_called", "a tool call the golden's assistant made"),
                          ("retrieval_context", "a passage the golden's assistant retrieved")):
            value = turn.get(key)
            if isinstance(value, list) and value:
                built.not_imported.extend([what] * len(value))
    outcome = record.get("expected_outcome")
    return built.finish(outcome if isinstance(outcome, str) else None), built.not_imported


# -- the way back: a golden conversation as a ragas MultiTurnSample or a DeepEval ConversationalGolden ------------
def _exchanges(turns: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """(question, the author's reply) of each turn of a conversation (its turns as loaded, in order)."""
    return [(turn["question"], (turn.get("conversation") or {}).get("assistant")) for turn in turns]


def ragas_sample(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """A conversation's turns as a MultiTurnSample's fields (without the source's kept fields): the questions
    and replies as messages, the last turn's reference, every turn's expected calls in order."""
    messages: list[dict[str, Any]] = []
    for question, reply in _exchanges(turns):
        messages.append({"content": question, "type": "human"})
        if reply:
            messages.append({"content": reply, "type": "ai"})
    sample: dict[str, Any] = {"user_input": messages}
    if turns[-1].get("reference"):
        sample["reference"] = turns[-1]["reference"]
    calls = [call for turn in turns for call in turn.get("expectedTools") or []]
    if calls:
        sample["reference_tool_calls"] = [{"name": call["name"], "args": call.get("arguments") or {}} for call in calls]
    return sample


def deepeval_golden(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """A conversation's turns as a ConversationalGolden's fields (without the source's kept fields; its
    required ``scenario`` is the first question until the caller restores the imported one)."""
    written: list[dict[str, Any]] = []
    for question, reply in _exchanges(turns):
        written.append({"role": "user", "content": question})
        if reply:
            written.append({"role": "assistant", "content": reply})
    golden: dict[str, Any] = {"scenario": turns[0]["question"], "turns": written}
    if turns[-1].get("reference"):
        golden["expected_outcome"] = turns[-1]["reference"]
    return golden
