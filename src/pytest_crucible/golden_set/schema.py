"""Golden set schema and loaders.

A golden set is a file of items, one per line in ``.jsonl`` (also a ``.json``
array, or YAML when PyYAML is installed). Every load error names the file, the
line, the field path and what was expected, with a hint, so a user never sees a
traceback for a typo in their data.

This module never imports pytest.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from ..defaults import KINDS
from ..json_input import MAX_DEPTH, MAX_VALUES, json_problem, value_problem
from ..json_input import shown as _printable

# CRAG's question types; the tuple is what code iterates (facets), the Literal what pydantic checks.
QuestionType = Literal[
    "simple",
    "conditional",
    "set",
    "comparison",
    "aggregation",
    "multi_hop",
    "post_processing",
    "false_premise",
]
QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)
# How an item's expected tool calls are matched (metrics/tools.py, whose MATCH_MODES is the same list).
ToolMatch = Literal["strict", "unordered", "subset", "superset"]


class _Model(BaseModel):
    # camelCase in files (the spec's spelling), snake_case in Python.
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class Assertion(_Model):
    text: str = Field(min_length=1)
    kind: Literal["must", "should"] = "must"
    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    concept_id: str | None = None


class Citation(_Model):
    doc_id: str = Field(min_length=1)
    chunk_id: str | None = None
    mode: Literal["required", "acceptable"] = "required"
    # How well an imported reference passage matched this chunk (`crucible golden import --corpus`): 1.0 for
    # the passage found in the chunk, a word overlap below that. Unset for a citation someone wrote.
    match_score: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)


class Concept(_Model):
    id: str = Field(min_length=1)
    grade: Literal["required", "acceptable", "irrelevant"] = "required"


class Attack(_Model):
    """What an adversarial item attacks with: an instruction in the question, or planted in a document."""

    category: str = Field(min_length=1)
    # question: the attack is the question itself; document: ``document`` is planted
    # in what the pipeline retrieves (the pipeline receives the item and plants it).
    vector: Literal["question", "document"] = "question"
    document: str | None = None

    @model_validator(mode="after")
    def _planted_document_given(self) -> Attack:
        if self.vector == "document" and not (self.document or "").strip():
            raise ValueError("a document attack needs the planted text in 'document'")
        return self


class EarlierTurn(_Model):
    """An earlier turn of a golden conversation as its author wrote it: the user's question and, when written,
    the assistant's reply (what ``crucible_conversation = replay`` puts in the history)."""

    question: str
    assistant: str | None = None


class TurnOf(_Model):
    """Where a turn of a golden conversation sits in it. Set by the loader on each turn it makes of a
    conversation (``turns`` in a golden file: golden_set/conversations.py), never written in a file."""

    id: str = Field(min_length=1)  # the conversation's id: the turn's cluster, its xdist group
    turn: int = Field(ge=1)  # 1-based: the item is ``{id}:t{turn}``
    turns: int = Field(ge=1)  # how many turns the conversation has
    history: list[EarlierTurn] = Field(default_factory=list)  # the turns before this one, in order
    assistant: str | None = None  # this turn's own reply as the author wrote it


class ExpectedTool(_Model):
    """A tool call the item expects: a call of this name whose arguments include these (none named: any call
    of the name). metrics/tools.py says how calls are matched."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class GoldenItem(_Model):
    """One golden item: a question, what a good answer must contain, and where it lives."""

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    # draft: collected, skipped unless --crucible-include-drafts; rejected: a reviewed draft kept in the file
    # (so it is not generated again) but never run: deselected, even with --crucible-include-drafts.
    status: Literal["active", "draft", "rejected"] = "active"
    assertions: list[Assertion] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    concepts: list[Concept] = Field(default_factory=list)
    reference: str | None = None
    answerable: bool = True
    question_type: QuestionType = "simple"
    popularity: Literal["head", "torso", "tail"] | None = None
    dynamism: Literal["static", "slow", "fast"] | None = None
    kind: Literal[KINDS] = "retrieval"  # type: ignore[valid-type]
    tags: list[str] = Field(default_factory=list)
    # Documents that disagree on this question: a good answer surfaces the conflict.
    conflicting_sources: list[str] = Field(default_factory=list)
    # Guardrail eval: what the input defences should do with this item. Unset: an
    # item with an attack expects "blocked", every other item "answered".
    attack: Attack | None = None
    expect: Literal["blocked", "answered"] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Items that move together (written from one source document, paraphrases of one question) share a
    # cluster: a comparison then resamples clusters, not items (docs/statistics.md). Unset: its own cluster.
    cluster: str | None = Field(default=None, min_length=1)
    # A turn of a golden conversation (docs/golden-format.md#conversations): its conversation, its place in it
    # and the turns before it. Unset for every other item (and then left out of the item's JSON).
    conversation: TurnOf | None = None
    # An agentic system's tool calls, in the order expected, and how they are matched (the tool metrics are
    # scored for items that have expectedTools; [] expects no call at all).
    expected_tools: list[ExpectedTool] | None = None
    tool_match: ToolMatch = "strict"

    # Where the item came from; not part of the data model (excluded from dumps). Read and written through
    # __pydantic_private__ itself: as attributes they go through BaseModel.__getattr__ and __setattr__, many
    # times slower, and collection reads them for every item.
    _source: str = PrivateAttr(default="")
    _line: int = PrivateAttr(default=0)
    _json: dict[str, Any] | None = PrivateAttr(default=None)
    # Every turn of this turn's conversation, in order (this one included): a turn run alone under live
    # history calls the pipeline for the turns before it (evaluation/conversations.py).
    _turns: tuple[GoldenItem, ...] = PrivateAttr(default=())

    @field_validator("id", "question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    def _private(self) -> dict[str, Any]:
        private = self.__pydantic_private__
        assert private is not None  # set by pydantic on every model that declares private attributes
        return private

    @property
    def source(self) -> str:
        return self._private()["_source"]

    @property
    def expected_guardrail(self) -> str:
        """"blocked" or "answered": what a correct guardrail does with this item."""
        return self.expect or ("blocked" if self.attack is not None else "answered")

    @property
    def line(self) -> int:
        return self._private()["_line"]

    def earlier_turn(self, number: int) -> GoldenItem | None:
        """Turn ``number`` (1-based) of this turn's conversation, as loaded with it (None: not a turn, or not
        loaded from a file)."""
        turns = self._private()["_turns"]
        return turns[number - 1] if 0 < number <= len(turns) else None

    def to_json(self) -> dict[str, Any]:
        """The item as it appears in a golden file (camelCase, defaults filled in).

        Computed once (the model is frozen); treat the result as read-only."""
        private = self._private()
        if private["_json"] is None:
            data = self.model_dump(by_alias=True, mode="json")
            for name in ("cluster", "conversation"):  # unset: left out, so items written before the field keep their hash
                if data.get(name) is None:
                    data.pop(name, None)
            for citation in data["citations"]:  # the same for a citation's match score
                if citation.get("matchScore") is None:
                    citation.pop("matchScore", None)
            if data.get("expectedTools") is None:  # and for the tool fields of an item that expects no tools
                data.pop("expectedTools", None)
                if data.get("toolMatch") == "strict":
                    data.pop("toolMatch", None)
            private["_json"] = data
        return private["_json"]

    def forget_json(self) -> None:
        """Drop the cached :meth:`to_json` once the item is scored: pytest keeps every collected item (and
        so this model) alive until the session ends, and on a large golden set the copies add up."""
        self._private()["_json"] = None


class GoldenFileError(Exception):
    """A golden file that cannot be loaded. ``str()`` is the whole user-facing message."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, problem: str, hint: str = ""):
        self.path = str(path)
        self.line = line
        self.field = field
        self.problem = problem
        self.hint = hint
        where = self.path if line is None else f"{self.path}:{line}"
        what = f"field '{_printable(field)}': {problem}" if field else problem
        message = f"{where}: {what}"
        if hint:
            message += f"\nHINT: {hint}"
        super().__init__(message)


_FIELD_NAMES = {
    name: sorted(
        (info.alias or name) for name, info in model.model_fields.items()
    )
    for name, model in dict[str, type[BaseModel]]({
        "item": GoldenItem,
        "assertions": Assertion,
        "citations": Citation,
        "concepts": Concept,
        "attack": Attack,
        "expectedTools": ExpectedTool,
    }).items()
}
# An item's fields as a file writes them: a turn's place in its conversation is set by the loader, and a
# conversation holds its turns.
_FIELD_NAMES["item"] = sorted([name for name in _FIELD_NAMES["item"] if name != "conversation"] + ["turns"])


def field_path(loc: Sequence[str | int], rename: Callable[[str], str] = str) -> str:
    """A pydantic error location as users write it: ``citations[0].mode``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + rename(str(part))
    return path


def _hint_for(error: ErrorDetails) -> str:
    kind = error["type"]
    loc = error["loc"]
    if kind == "extra_forbidden":
        parent = next((p for p in reversed(loc[:-1]) if isinstance(p, str)), "item")
        known = _FIELD_NAMES.get(parent, _FIELD_NAMES["item"])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        if close:
            return f"did you mean '{close[0]}'? Free-form data goes under 'metadata'."
        return f"known fields are {', '.join(known)}. Free-form data goes under 'metadata'."
    if kind == "missing":
        return "add the field; `crucible schema golden` prints the full JSON Schema."
    if kind == "literal_error":
        hint = "use one of the allowed values exactly as written (they are case-sensitive)."
        allowed = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
        given = error.get("input")
        if isinstance(given, str) and allowed:
            lowered = {value.lower(): value for value in allowed}
            close = [lowered[given.lower()]] if given.lower() in lowered else difflib.get_close_matches(given, allowed, n=1)
            if close:
                return f"did you mean '{close[0]}'? Use one of the allowed values exactly as written (they are case-sensitive)."
        return hint
    return "`crucible schema golden` prints the JSON Schema, which editors can use to check golden files."


def _validation_error(path: str | Path, line: int, exc: ValidationError,
                      relocate: Callable[[tuple[Any, ...]], tuple[Any, ...]] = tuple) -> GoldenFileError:
    """The first of pydantic's errors as a :class:`GoldenFileError`; ``relocate``: an error's location -> where
    the file says it (a conversation's turn: ``turns[1].question``)."""
    errors = exc.errors(include_url=False)
    # A misspelt key is an unknown field beside a missing one in the same object: named first, its
    # did-you-mean fixes both.
    missing_in = {error["loc"][:-1] for error in errors if error["type"] == "missing"}
    errors.sort(key=lambda error: error["type"] != "extra_forbidden" or error["loc"][:-1] not in missing_in)
    first = errors[0]
    problem = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
    if first["type"] not in ("missing", "extra_forbidden") and "input" in first:
        problem += f" (got {json.dumps(first['input'], default=str)[:80]})"
    if len(errors) > 1:
        others = ", ".join(_printable(field_path(relocate(tuple(e["loc"])))) for e in errors[1:4])
        problem += f"; also wrong: {others}" + (" ..." if len(errors) > 4 else "")
    where = relocate(tuple(first["loc"]))
    if where[:1] == ("turns",) and len(where) > 1 and isinstance(where[1], int):
        problem += f" (turn {where[1] + 1})"
    return GoldenFileError(path, line, field_path(where), problem, _hint_for(first))


def _not_utf8(path: str, line: int, exc: UnicodeDecodeError, offset: int = 0) -> GoldenFileError:
    return GoldenFileError(path, line, None, f"not UTF-8 text ({exc.reason} at byte {offset + exc.start})", "save the file as UTF-8")


# Each reader yields (line, record, vetted): vetted when the record's JSON text shows that
# value_problem would find nothing in it (see _surely_usable), so the loader skips that walk. A .jsonl line
# that is not JSON is yielded as its GoldenFileError (the lines after it are records of their own); a
# problem that leaves the rest of the file unreadable (a .json array broken halfway) is raised.
_Records = Iterable[tuple[int, Any, bool]]

# The text was decoded from UTF-8, which holds no surrogate: a lone one can only come from an escape,
# \uD800 to \uDFFF.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _surely_usable(text: str) -> bool:
    """Whether the values parsed from the JSON ``text`` pass :func:`value_problem`, judged from the text
    alone (a few scans in C instead of a walk of every value): no escaped surrogate, no more brackets
    than the nesting limit, no more characters than the value limit (each value takes one at least).
    False means only that the values must be walked."""
    return (len(text) <= MAX_VALUES
            and text.count("{") + text.count("[") <= MAX_DEPTH
            and ("\\u" not in text or _SURROGATE_ESCAPE.search(text) is None))


def _records_jsonl(path: str, data: bytes) -> _Records:
    # Lines end at "\n" only (U+2028, U+0085 and the like may stand raw inside JSON
    # strings), and each is decoded on its own, so the first bad line is the one named.
    offset = 0
    for number, raw_bytes in enumerate(data.split(b"\n"), start=1):
        try:
            raw = raw_bytes.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            offset += len(raw_bytes) + 1
            yield number, _not_utf8(path, number, exc, offset - len(raw_bytes) - 1), False
            continue
        offset += len(raw_bytes) + 1
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            # one line's problem: the next line is a record of its own, so the reading goes on
            yield number, GoldenFileError(path, number, None, f"not valid JSON: {json_problem(exc)}",
                                          "a .jsonl golden file holds exactly one JSON object per line."), False
            continue
        yield number, record, _surely_usable(raw)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _records_json(path: str, text: str) -> _Records:
    # Walk the top-level array element by element so each item keeps its line number.
    decoder = json.JSONDecoder()
    length = len(text)

    def skip_ws(pos: int) -> int:
        while pos < length and text[pos] in " \t\r\n":
            pos += 1
        return pos

    def fail(pos: int, problem: str) -> GoldenFileError:
        return GoldenFileError(path, _line_of(text, pos), None, problem, "a .json golden file holds one JSON array of item objects.")

    pos = skip_ws(0)
    if pos >= length or text[pos] != "[":
        raise fail(pos, "expected a JSON array of items")
    pos = skip_ws(pos + 1)
    if pos < length and text[pos] == "]":
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise fail(exc.pos, f"not valid JSON: {exc.msg}") from None
        except (ValueError, RecursionError) as exc:
            raise fail(pos, f"not valid JSON: {json_problem(exc)}") from None
        yield _line_of(text, pos), value, _surely_usable(text[pos:end])
        pos = skip_ws(end)
        if pos < length and text[pos] == ",":
            pos = skip_ws(pos + 1)
            continue
        if pos < length and text[pos] == "]":
            return
        raise fail(pos, "expected ',' or ']' after an item")


def _records_yaml(path: str, text: str) -> _Records:
    try:
        import yaml
    except ImportError:
        raise GoldenFileError(path, None, None, "YAML golden files need PyYAML", "pip install pyyaml, or use .jsonl") from None

    def fail(exc: Exception, line: int | None) -> GoldenFileError:
        mark = getattr(exc, "problem_mark", None)
        # YAML also breaks lines at \r, U+0085, U+2028: keep the line within the file's "\n" lines.
        line = min(mark.line + 1, text.count("\n") + 1) if mark is not None else line
        problem = getattr(exc, "problem", None) or (str(exc).split("\n")[0] if not isinstance(exc, RecursionError) else "nested too deeply")
        return GoldenFileError(path, line, None, f"not valid YAML: {_printable(problem)}", "check indentation and quoting")

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise fail(exc, None) from None
    if node is None or (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"):
        return
    if not isinstance(node, yaml.SequenceNode):
        raise GoldenFileError(path, 1, None, "expected a YAML list of items", "start each item with '- id: ...'")
    for child in node.value:
        # Built item by item, so a value YAML cannot construct (a date like 2024-13-45,
        # '!!int 12a') names the item it is in.
        line = child.start_mark.line + 1
        loader = yaml.SafeLoader("")
        try:
            value = loader.construct_document(child)
        except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
            raise fail(exc, line) from None
        finally:
            loader.dispose()
        yield line, value, False  # aliases may expand a short text into many values


def _records(path: Path, shown: str) -> _Records:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GoldenFileError(shown, None, None, f"cannot read the file: {exc.strerror}", "check the path in the marker or ini option") from None
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        return _records_jsonl(shown, data)
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (as some editors write) is not part of the data
    except UnicodeDecodeError as exc:
        raise _not_utf8(shown, data.count(b"\n", 0, exc.start) + 1, exc) from None
    return _records_json(shown, text) if suffix == ".json" else _records_yaml(shown, text)


def read_records(path: Path, shown: str) -> _Records:
    """``(line, record, vetted)`` of a .jsonl, .json (an array) or YAML (a list) file, each record as parsed
    (not yet an item): what the golden loader and the importers of other tools' files read. A record may be
    the :class:`GoldenFileError` of its line (see ``_Records``)."""
    return _records(path, shown)


#: At most this many problems of one golden file are listed; the others are counted.
MAX_PROBLEMS = 20


class GoldenFileErrors(GoldenFileError):
    """Every problem of one golden file (at least one); the attributes are the first's, ``str()`` lists up to
    :data:`MAX_PROBLEMS` of them and counts the rest, so a file with five mistakes is fixed in one round."""

    def __init__(self, problems: Sequence[GoldenFileError]):
        first = problems[0]
        super().__init__(first.path, first.line, first.field, first.problem, first.hint)
        self.problems = list(problems)
        if len(problems) > 1:
            shown = "\n".join(str(problem) for problem in problems[:MAX_PROBLEMS])
            more = f"\n... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
            self.args = (f"{len(problems)} problems in {first.path}:\n{shown}{more}",)

    def __str__(self) -> str:
        return str(self.args[0])


def _items_or_problem(shown: str, line: int, record: Any, vetted: bool,
                      first_line: dict[str, tuple[int, str]]) -> list[GoldenItem] | GoldenFileError:
    """One record of a golden file as its items (one; a conversation's ``turns``: one per turn, in turn order,
    golden_set/conversations.py), or the problem that stops it being them."""
    if isinstance(record, GoldenFileError):
        return record
    if not isinstance(record, dict):
        return GoldenFileError(shown, line, None, f"expected a JSON object for an item, got {type(record).__name__}", "each item is an object like {\"id\": \"q-001\", \"question\": \"...\"}")
    unusable = None if vetted else value_problem(record)
    if unusable is not None:
        loc, problem = unusable
        return GoldenFileError(shown, line, field_path(loc) or None, problem,
                               "golden items hold text, numbers, lists and objects (metadata a few levels deep)")
    claims: list[tuple[str, str]] = []  # (id, what holds it): items, turns and conversations share one space
    if "turns" in record or "conversation" in record:
        from .conversations import conversation_items

        try:
            made = conversation_items(record, shown, line)
        except GoldenFileError as exc:
            return exc
        claims.append((record["id"], "a conversation"))
    else:
        try:
            made = [GoldenItem.model_validate(record)]
        except ValidationError as exc:
            return _validation_error(shown, line, exc)
    claims += [(item.id, f"turn {item.conversation.turn} of conversation '{_printable(item.conversation.id)}'"
                if item.conversation is not None else "an item") for item in made]
    duplicate = next((clash for item_id, what in claims if (clash := _duplicate_id(first_line, item_id, shown, line, what))), None)
    if duplicate is not None:
        return duplicate
    turns = tuple(made) if made[0].conversation is not None else ()
    for item_id, what in claims:
        first_line[item_id] = (line, what)
    for item in made:
        item._private().update(_source=shown, _line=line, _turns=turns)
    return made


def _duplicate_id(first_line: dict[str, tuple[int, str]], item_id: str, shown: str, line: int, what: str) -> GoldenFileError | None:
    """The problem of an id (an item's, a turn's ``CONV:tN``, a conversation's) that the file uses already."""
    if item_id not in first_line:
        return None
    before, holder = first_line[item_id]
    hint = "ids must be unique within a golden set: they are the test ids and the keys that pair runs."
    if holder == what == "an item":  # two plain items: said as it always was
        where = f"first used on line {before}, again on line {line}"
    else:
        where = f"first used on line {before} by {holder}, again on line {line} by {what}"
        hint += " A conversation's turns are named CONV:t1, CONV:t2, ... (docs/golden-format.md#conversations)."
    return GoldenFileError(shown, line, "id", f"duplicate id '{_printable(item_id)}' ({where})", hint)


def golden_file_problems(path: str | Path, display_path: str | None = None) -> tuple[list[GoldenItem], list[GoldenFileError]]:
    """(the valid items, every problem) of one golden file, read whole: each record's problem, in file order,
    and a problem that makes the rest unreadable last. ``crucible golden check`` and the loader read it. A
    conversation (``turns``) is one item per turn, in turn order."""
    path = Path(path)
    shown = display_path or str(path)
    items: list[GoldenItem] = []
    problems: list[GoldenFileError] = []
    first_line: dict[str, tuple[int, str]] = {}
    try:
        for line, record, vetted in _records(path, shown):
            entry = _items_or_problem(shown, line, record, vetted, first_line)
            if isinstance(entry, GoldenFileError):
                problems.append(entry)
            else:
                items.extend(entry)
    except GoldenFileError as exc:  # the file cannot be read further
        problems.append(exc)
    return items, problems


def load_golden_file(path: str | Path, display_path: str | None = None) -> list[GoldenItem]:
    """Load and validate every item of one golden file, in file order (a conversation: one item per turn).

    ``display_path`` is the name used in error messages (e.g. relative to the rootdir).
    Raises :class:`GoldenFileErrors` naming every problem of the file (file:line, field, HINT), not the first only.
    """
    items, problems = golden_file_problems(path, display_path)
    if problems:
        raise GoldenFileErrors(problems)
    return items


def check_filters(filters: dict[str, Any], where: str = "") -> dict[str, tuple[Any, ...]]:
    """A marker's filters by field name, each as the tuple of values it accepts; a filter on a field golden
    items do not have is a ``GoldenFileError`` naming it, with a did-you-mean or the fields there are."""
    by_alias = {info.alias or name: name for name, info in GoldenItem.model_fields.items()}
    resolved: dict[str, tuple[Any, ...]] = {}
    for key, value in filters.items():
        name = by_alias.get(key, key)
        if name not in GoldenItem.model_fields:
            close = difflib.get_close_matches(key, sorted(by_alias), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"filter on one of: {', '.join(sorted(by_alias))}"
            raise GoldenFileError(where or "crucible_golden marker", None, key, "unknown golden item field in a filter", hint)
        resolved[name] = tuple(value) if isinstance(value, (list, tuple, set, frozenset)) else (value,)
    return resolved


def check_marker_arguments(paths: Sequence[Any], filters: dict[str, Any], where: str) -> None:
    """``@crucible.golden(*paths, **filters)`` checked where it is written: at least one path, each a str or
    a path object, and filters on fields golden items have. Raises ``GoldenFileError`` naming the argument."""
    if not paths:
        raise GoldenFileError(where, None, None, "needs at least one golden file path", 'e.g. @crucible.golden("golden/faq.jsonl")')
    for position, path in enumerate(paths, 1):
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise GoldenFileError(where, None, None, f"path {position} is {path!r} ({type(path).__name__}): expected a "
                                  "golden file path (str or pathlib.Path)", 'e.g. @crucible.golden("golden/faq.jsonl")')
    check_filters(filters, where)


def filter_items(items: Sequence[GoldenItem], filters: dict[str, Any], where: str = "") -> list[GoldenItem]:
    """Keep items whose fields match every filter.

    A filter value may be one value or a list/tuple of accepted values; ``tags``
    matches when the item carries any of the given tags. Filter names use either
    spelling (``questionType`` or ``question_type``).
    """
    resolved = check_filters(filters, where)
    kept = []
    for item in items:
        ok = True
        for name, accepted in resolved.items():
            actual = getattr(item, name)
            if name == "tags":
                ok = any(tag in actual for tag in accepted)
            else:
                ok = actual in accepted
            if not ok:
                break
        if ok:
            kept.append(item)
    return kept


def canonical_item_json(item: dict[str, Any]) -> str:
    """One item's canonical JSON (sorted keys, no spaces, UTF-8 text): what the store keeps and hashes."""
    return _CANONICAL_ENCODER.encode(item)


# json.dumps with these options, without building an encoder for every item (this runs once per recorded item).
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def golden_set_hash(items: Iterable[dict[str, Any]]) -> str:
    """sha256 of the canonical JSON of items (as dicts), in id order: same items, same hash."""
    return hash_canonical_items(sorted((item["id"], canonical_item_json(item)) for item in items))


def hash_canonical_items(ordered: Iterable[tuple[str, str]]) -> str:
    """:func:`golden_set_hash` from ``(id, canonical JSON)`` pairs already in id order, streamed: the
    sha256 of the JSON array of the items, fed one item at a time (nothing else held in memory)."""
    digest = hashlib.sha256(b"[")
    for index, (_, text) in enumerate(ordered):
        digest.update(b"," + text.encode("utf-8") if index else text.encode("utf-8"))
    digest.update(b"]")
    return digest.hexdigest()


def golden_json_schema() -> dict[str, Any]:
    """The JSON Schema of one golden item, for editors and validators."""
    from .conversations import conversation_json_schema

    schema = conversation_json_schema(GoldenItem.model_json_schema(by_alias=True))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pytest-crucible golden item"
    schema["description"] = "One item of a golden set: one JSON object per line of a .jsonl file."
    return schema
