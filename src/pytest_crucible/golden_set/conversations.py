"""Golden conversations: a golden file's record with ``turns`` instead of ``question`` becomes one golden
item per turn, ``CONV:t1``, ``CONV:t2``, ... (docs/golden-format.md#conversations).

A turn sets its own ``question`` and any of the item fields in :data:`TURN_FIELDS` (a field added to
``GoldenItem`` is allowed on a turn by adding its name there), and may carry ``assistant``, the reply its
author wrote. Every other field of the record is the conversation's and applies to each turn; a field the
turn sets replaces the conversation's, except the tags, which add to them (:data:`MERGED_FIELDS`). Each
turn item carries ``conversation`` (``schema.TurnOf``): the conversation's id, its number, how many turns
there are and the turns before it as written, so it is a whole item on its own (stored, paired, compared,
and a changed earlier question makes it another question).

Errors name the file, the line, the turn (``turns[1].question``: 0-based like every field path, and the
problem says "turn 2") and the field, with a HINT. Pure: no pytest.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from ..json_input import shown as _printable
from .schema import GoldenFileError, GoldenItem, _validation_error

# The item fields a turn may set (GoldenItem's names; a file writes them camelCase).
TURN_FIELDS: tuple[str, ...] = ("question", "reference", "assertions", "citations", "answerable", "kind", "tags", "question_type",
                                "expected_tools", "tool_match")
# A turn's value of these joins the conversation's (in order, each once) instead of replacing it.
MERGED_FIELDS: tuple[str, ...] = ("tags",)
ASSISTANT = "assistant"  # the author's reply to a turn: a turn's own key, not an item field
DOCS = "docs/golden-format.md#conversations"


def _alias(name: str) -> str:
    return GoldenItem.model_fields[name].alias or name


def turn_keys() -> tuple[str, ...]:
    """The keys a turn may hold, as a file writes them."""
    return (*(_alias(name) for name in TURN_FIELDS), ASSISTANT)


def turn_id(conversation: str, number: int) -> str:
    """The id of a conversation's turn ``number`` (1-based): ``c01:t2``."""
    return f"{conversation}:t{number}"


def conversation_items(record: dict[str, Any], shown: str, line: int) -> list[GoldenItem]:
    """The turns of the conversation ``record`` (a golden file's object with ``turns``), one golden item
    each, in turn order; a :class:`GoldenFileError` naming ``shown``:``line`` and the field otherwise."""
    if "conversation" in record:
        raise GoldenFileError(shown, line, "conversation", "set by crucible on each turn of a conversation, never written in a golden file",
                              f"write the conversation's turns as a list under 'turns' ({DOCS})")
    if "question" in record:
        raise GoldenFileError(shown, line, "question", "an item has either 'question' (one question) or 'turns' (a conversation), not both",
                              'move the question into the first turn: "turns": [{"question": "..."}, {"question": "..."}]')
    conversation = record.get("id")
    if not isinstance(conversation, str) or not conversation.strip():
        got = "missing" if conversation is None else f"expected a non-blank string (got {_printable(repr(conversation))[:60]})"
        raise GoldenFileError(shown, line, "id", got, "a conversation has an id like an item's: its turns are ID:t1, ID:t2, ...")
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns:
        got = "an empty list" if isinstance(turns, list) else type(turns).__name__
        raise GoldenFileError(shown, line, "turns", f"expected a non-empty list of turns (got {got})",
                              '"turns": [{"question": "..."}, {"question": "And ...?"}], each turn asking its own question')
    for index, turn in enumerate(turns):
        _check_turn(turn, index, shown, line)
    shared = {key: value for key, value in record.items() if key != "turns"}
    items: list[GoldenItem] = []
    history: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        data = dict(shared)
        for key, value in turn.items():
            if key == ASSISTANT:
                continue
            mine = isinstance(value, list) and isinstance(shared.get(key), list) and key in _MERGED_KEYS
            data[key] = list(dict.fromkeys([*shared[key], *value])) if mine else value
        data["id"] = turn_id(conversation, index + 1)
        data["conversation"] = {"id": conversation, "turn": index + 1, "turns": len(turns), "history": list(history),
                                "assistant": turn.get(ASSISTANT)}
        try:
            items.append(GoldenItem.model_validate(data))
        except ValidationError as exc:
            raise _validation_error(shown, line, exc, relocate=functools.partial(_in_turn, index=index, keys=set(turn))) from None
        history.append({"question": turn["question"], "assistant": turn.get(ASSISTANT)})
    return items


_MERGED_KEYS = frozenset(_alias(name) for name in MERGED_FIELDS)


def _in_turn(loc: tuple[Any, ...], index: int, keys: set[str]) -> tuple[Any, ...]:
    """A validation error's location in the merged turn -> where the file says it: in the turn when the turn set
    that field, else on the conversation."""
    return ("turns", index, *loc) if loc and loc[0] in keys else loc


def _check_turn(turn: Any, index: int, shown: str, line: int) -> None:
    where = f"turns[{index}]"
    if not isinstance(turn, dict):
        raise GoldenFileError(shown, line, where, f"expected an object with a question (turn {index + 1}), got {type(turn).__name__}",
                              '"turns": [{"question": "..."}, ...]')
    allowed = turn_keys()
    for key in turn:
        if key in allowed:
            continue
        if key in _ITEM_KEYS:
            hint = (f"'{_printable(key)}' applies to the whole conversation: write it beside 'turns', not in a turn "
                    f"(a turn may set {', '.join(allowed)})")
        else:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"a turn may set {', '.join(allowed)}; free-form data goes under the conversation's 'metadata'"
        raise GoldenFileError(shown, line, f"{where}.{key}", f"unknown field in a turn (turn {index + 1})", hint)
    if "question" not in turn:
        raise GoldenFileError(shown, line, f"{where}.question", f"missing (turn {index + 1})",
                              "every turn asks its own question: {\"question\": \"...\"}")
    assistant = turn.get(ASSISTANT)
    if assistant is not None and not (isinstance(assistant, str) and assistant.strip()):
        raise GoldenFileError(shown, line, f"{where}.{ASSISTANT}", f"expected the assistant's reply as text (turn {index + 1})",
                              "leave 'assistant' out when the reply is not written")


_ITEM_KEYS = frozenset((info.alias or name) for name, info in GoldenItem.model_fields.items())


def check_replay(items: Iterable[GoldenItem]) -> None:
    """Under ``crucible_conversation = replay`` every turn's history is its author's replies: an earlier turn
    of a turn that will run without one is a :class:`GoldenFileError` naming it (rejected items aside)."""
    for item in items:
        turn = item.conversation
        if turn is None or item.status == "rejected":
            continue
        for index, earlier in enumerate(turn.history):
            if earlier.assistant is None:
                raise GoldenFileError(
                    item.source, item.line or None, f"turns[{index}].{ASSISTANT}",
                    f"missing (turn {index + 1} of conversation '{_printable(turn.id)}'): crucible_conversation = replay puts "
                    f"the author's replies in the history of turn {turn.turn}",
                    "write the assistant's reply of every turn but the last, or run the conversation on the pipeline's own "
                    f"answers (crucible_conversation = live) ({DOCS})")


def conversation_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The golden item's JSON Schema (``GoldenItem``'s) as a file writes an item: ``question`` or ``turns``,
    never the ``conversation`` the loader sets."""
    properties = schema["properties"]
    defs = schema.setdefault("$defs", {})
    properties.pop("conversation", None)
    for name in ("TurnOf", "EarlierTurn"):
        defs.pop(name, None)
    turn_properties = {_alias(name): properties[_alias(name)] for name in TURN_FIELDS}
    turn_properties[ASSISTANT] = {"type": "string", "minLength": 1, "title": "Assistant",
                                  "description": "The assistant's reply to this turn as the author wrote it (the history under "
                                                 "crucible_conversation = replay)."}
    defs["GoldenTurn"] = {"type": "object", "title": "GoldenTurn", "additionalProperties": False, "required": ["question"],
                          "properties": turn_properties,
                          "description": "One turn of a golden conversation: its own question and the item fields it sets."}
    properties["turns"] = {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/GoldenTurn"}, "title": "Turns",
                           "description": "A golden conversation instead of one question: each turn is a test of its own, "
                                          "ID:t1, ID:t2, ...; the other fields apply to every turn."}
    schema["required"] = [name for name in schema.get("required", []) if name != "question"]
    schema["oneOf"] = [{"required": ["question"]}, {"required": ["turns"]}]
    return schema
