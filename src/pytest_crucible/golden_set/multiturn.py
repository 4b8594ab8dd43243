"""Other tools' multi-turn data as golden conversations (docs/golden-format.md#conversations), for
`crucible golden import` (``golden_set/sources.py`` reads the records, this module their messages).

* ragas: a ``MultiTurnSample`` (``user_input`` a list of messages ``{"type": "human" | "ai" | "tool",
  "content", "tool_calls"}``, ``reference``, ``reference_tool_calls``), as ``EvaluationDataset.to_jsonl``
  writes it, or as ``to_csv`` does (the list as Python's repr in one cell).
* DeepEval: a ``ConversationalGolden`` (``turns`` a list of ``{"role": "user" | "assistant", "content",
  "tools_called", "retrieval_context"}``, ``expected_outcome``, ``scenario``, ``context``), as
  ``EvaluationDataset.save_as`` writes it in JSON, JSONL or CSV (the turns as JSON in one cell).
* LangSmith: a chat example, its messages under ``inputs.messages`` (OpenAI's ``{"role", "content"}``) or
  ``inputs.input`` (``Client.create_chat_example``: LangChain's ``{"type", "data": {"content"}}``), the
  expected reply in ``outputs``.

A user message opens a turn, its ``question``; the assistant messages after it are the turn's
``assistant`` reply (what ``crucible_conversation = replay`` puts in the history). The conversation's
expected answer (ragas ``reference``, DeepEval ``expected_outcome``) is its last turn's ``reference``.
ragas' ``reference_tool_calls`` become ``expectedTools``: spread over the turns in the order the sample's
own assistant messages made them when their numbers agree, else all on the last turn. What the source
recorded of the assistant's own work (tool outputs, tools it called, what it retrieved) is a run's
result, not a golden item's, and a system prompt is the pipeline's: counted as not imported.

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


def _is_messages(value: Any) -> bool:
    value = parse_messages(value)
    return isinstance(value, list) and bool(value) and all(isinstance(message, Mapping) for message in value)


def is_ragas_conversation(record: Mapping[str, Any]) -> bool:
    """A ragas MultiTurnSample: ``user_input`` is a list of messages (not a question)."""
    return _is_messages(record.get("user_input"))


def is_deepeval_conversation(record: Mapping[str, Any]) -> bool:
    """A DeepEval ConversationalGolden: it has ``turns`` or a ``scenario``, and no single-turn ``input``."""
    return "input" not in record and ("turns" in record or "scenario" in record)


# Where a LangSmith chat example keeps its messages (``Client.create_chat_example``: ``inputs.input``; a
# dataset with the Message schema: ``inputs.messages``) and its expected reply.
LANGSMITH_MESSAGES = ("messages", "input")
LANGSMITH_REPLY = ("output", "message", "messages", "answer", "reference", "expected")


def langsmith_messages_key(record: Mapping[str, Any]) -> str | None:
    """The key of ``inputs`` holding a LangSmith chat example's messages, if it is one."""
    inputs = record.get("inputs")
    if not isinstance(inputs, Mapping):
        return None
    return next((key for key in LANGSMITH_MESSAGES if _is_messages(inputs.get(key))), None)


class _Style:
    """How a format writes a message: the key naming who speaks, its values, and what it calls a tool call's arguments."""

    def __init__(self, keys: tuple[str, ...], roles: dict[str, str], arguments: str, example: str):
        self.keys, self.roles, self.arguments, self.example = keys, roles, arguments, example

    def role(self, message: Mapping[str, Any], field: str) -> str:
        for key in self.keys:
            if key in message:
                role = self.roles.get(message[key]) if isinstance(message[key], str) else None
                if role is None:
                    allowed = ", ".join(f"'{name}'" for name in self.roles)
                    raise MultiTurnError(f"{field}.{key}", f"expected one of {allowed}, got {json.dumps(message[key], default=str)[:40]}",
                                         f"each message says who speaks: {self.example}")
                return role
        raise MultiTurnError(f"{field}.{self.keys[0]}", "missing: who speaks", f"each message says who speaks: {self.example}")


_RAGAS = _Style(("type",), {"human": "user", "ai": "assistant", "tool": "tool"}, "args", '{"type": "human", "content": "..."}')
_DEEPEVAL = _Style(("role",), {"user": "user", "assistant": "assistant"}, "input_parameters", '{"role": "user", "content": "..."}')
# OpenAI's messages ({"role", "content"}), or LangChain's serialised ones ({"type", "data": {"content"}})
_LANGSMITH = _Style(("role", "type"), {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant",
                                       "system": "system", "developer": "system", "tool": "tool", "function": "tool"},
                    "arguments", '{"role": "user", "content": "..."}')


def _text(message: Mapping[str, Any], field: str) -> str:
    """A message's text: ``content`` (a text, or OpenAI's list of parts), or LangChain's ``data.content``."""
    data = message.get("data")
    if "content" not in message and isinstance(data, Mapping):
        message, field = data, field + ".data"
    content = message.get("content")
    if isinstance(content, list) and all(isinstance(part, Mapping) for part in content):  # [{"type": "text", "text": ...}]
        content = "\n".join(str(part["text"]) for part in content if part.get("type") == "text" and "text" in part)
    if content is None and message.get("tool_calls"):  # an assistant message that only called tools
        content = ""
    if isinstance(content, (int, float)) and not isinstance(content, bool):
        content = str(content)
    if not isinstance(content, str):
        raise MultiTurnError(field + ".content", f"expected the message's text, got {type(content).__name__}",
                             'a message holds its text in "content"')
    return content


def _tool_calls(calls: Any, field: str, arguments_key: str) -> list[dict[str, Any]]:
    """Tool calls as written (``{"name", ARGUMENTS_KEY}``, or OpenAI's ``{"function": {"name", "arguments"}}``
    with the arguments as JSON text) as crucible's ``{"name", "arguments"}``."""
    if calls in (None, ""):
        return []
    if not isinstance(calls, list):
        raise MultiTurnError(field, f"expected a list of tool calls, got {type(calls).__name__}",
                             f'[{{"name": "search", "{arguments_key}": {{"query": "..."}}}}]')
    out = []
    for number, call in enumerate(calls):
        if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
            call = call["function"]
        name = call.get("name") if isinstance(call, Mapping) else None
        if not isinstance(name, str) or not name.strip():
            raise MultiTurnError(f"{field}[{number}].name", f"tool call {number + 1} has no name",
                                 f'a tool call is {{"name": "search", "{arguments_key}": {{...}}}}')
        arguments = call.get(arguments_key, call.get("args", call.get("arguments"))) or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
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


# What a source recorded of its assistant's own work: a run's result, not a golden item's.
_RECORDED = {"tool_calls": "a tool call the source's assistant made", "tools_called": "a tool call the source's assistant made",
             "retrieval_context": "a passage the source's assistant retrieved"}


def _built(messages: list[Any], field: str, style: _Style) -> _Turns:
    """The messages (a list already) read into turns, in ``style``."""
    built = _Turns(field)
    for index, message in enumerate(messages):
        where = f"{field}[{index}]"
        if not isinstance(message, Mapping):
            raise MultiTurnError(where, f"expected a message object, got {type(message).__name__}", style.example)
        role, text = style.role(message, where), _text(message, where)
        calls = _tool_calls(message.get("tool_calls"), where + ".tool_calls", style.arguments) if role == "assistant" else []
        if role == "user":
            built.user(text)
        elif role == "assistant":
            built.assistant(text, len(calls))
        else:
            built.not_imported.append(f"a {role} message")
        for key, what in _RECORDED.items():
            value = message.get(key)
            if isinstance(value, list) and value:
                built.not_imported.extend([what] * len(value))
    return built


def ragas_turns(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the turns of a ragas MultiTurnSample, what it held that became nothing). MultiTurnError on a bad message."""
    built = _built(parse_messages(record.get("user_input")), "user_input", _RAGAS)
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
    built = _built(raw, "turns", _DEEPEVAL)
    outcome = record.get("expected_outcome")
    return built.finish(outcome if isinstance(outcome, str) else None), built.not_imported


def langsmith_turns(record: Mapping[str, Any], key: str) -> tuple[list[dict[str, Any]], list[str], str | None]:
    """(the turns of a LangSmith chat example, what became nothing, the ``outputs`` key its reference came from):
    ``inputs.KEY`` the conversation so far, its last user message the last turn; ``outputs`` the expected reply
    (a message, a list of them: the last, or a text)."""
    built = _built(parse_messages(record["inputs"][key]), f"inputs.{key}", _LANGSMITH)
    outputs = record.get("outputs")
    outputs = outputs if isinstance(outputs, Mapping) else {}
    reference, source = None, None
    for name in LANGSMITH_REPLY:
        value = outputs.get(name)
        if isinstance(value, list) and value:
            value = value[-1]
        if isinstance(value, Mapping):
            value = _text(value, f"outputs.{name}")
        if isinstance(value, str) and value.strip():
            reference, source = value, name
            break
    return built.finish(reference), built.not_imported, source


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
