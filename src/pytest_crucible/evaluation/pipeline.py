"""The pipeline contract: what the user's ``crucible_pipeline`` callable returns.

The callable is invoked as ``pipeline(question, *, item, config, mode)`` and returns
a :class:`PipelineResult` or a dict with the same fields (camelCase or snake_case).

An agentic pipeline may also return the tool calls it made (``tool_calls``) and its retrieval steps
(``steps``, each with its own ``retrieved``): the ranking scored is then :func:`merged_ranking`.

This module never imports pytest.
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel, to_snake

from ..golden_set.schema import field_path

_MARKER = re.compile(r"\[S(\d+)\]")


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Retrieved(_Model):
    """One retrieved chunk. The position in ``PipelineResult.retrieved`` is its rank."""

    chunk_id: str = Field(min_length=1)
    doc_id: str = Field(min_length=1)
    text: str = ""
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolCall(_Model):
    """One tool call the pipeline made; ``PipelineResult.tool_calls`` lists them in the order made."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Step(_Model):
    """One retrieval step of an agentic pipeline: what that step retrieved, in its rank order."""

    retrieved: list[Retrieved] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class PipelineResult(_Model):
    """What one pipeline call produced for one golden question."""

    answer: str | None = None
    retrieved: list[Retrieved] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    abstained: bool = False
    detected_concepts: list[str] = Field(default_factory=list)
    # The input defences refused the question; blocked_by names the layer that did.
    blocked: bool = False
    blocked_by: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # An agentic pipeline's tool calls, in the order made (scored against the item's expectedTools).
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Its retrieval steps (None: a pipeline that retrieves once, in ``retrieved``): see merged_ranking.
    steps: list[Step] | None = None

    def ranking(self) -> list[Retrieved]:
        """The ranking the retrieval metrics score: ``retrieved``, or with ``steps`` :func:`merged_ranking`."""
        return merged_ranking(None if self.steps is None else [step.retrieved for step in self.steps], self.retrieved,
                              operator.attrgetter("chunk_id"))

    def cited_chunk_ids(self) -> list[str]:
        """Chunks the answer cites: explicit ``citations``, else its ``[Sn]`` markers.

        ``[Sn]`` refers to the n-th chunk of the ranking scored (1-based: :meth:`ranking`); markers pointing
        past it are ignored (they cite nothing that was retrieved).
        """
        return cited_chunk_ids(self.answer, self.citations, [chunk.chunk_id for chunk in self.ranking()])


_Chunk = TypeVar("_Chunk")


def merged_ranking(steps: Sequence[Sequence[_Chunk]] | None, retrieved: Sequence[_Chunk],
                   chunk_id: Callable[[_Chunk], str]) -> list[_Chunk]:
    """The ranking of a result: ``retrieved`` as returned when there are no ``steps`` (None); else every chunk
    of the steps in order of first appearance (step 1's in its order, then the chunks step 2 added, ...),
    then those of the top-level ``retrieved`` not already there. A chunk (by ``chunk_id``) retrieved again
    keeps its first place, the way an agent's second look at a passage is no new result."""
    if steps is None:
        return list(retrieved)
    seen: set[str] = set()
    merged = []
    for chunks in (*steps, retrieved):
        for chunk in chunks:
            key = chunk_id(chunk)
            if key not in seen:
                seen.add(key)
                merged.append(chunk)
    return merged


def ranking_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """:meth:`PipelineResult.ranking` of a result's plain data (:func:`result_data`)."""
    steps = data.get("steps")
    return merged_ranking(None if steps is None else [step["retrieved"] for step in steps], data["retrieved"],
                          operator.itemgetter("chunk_id"))


def cited_chunk_ids(answer: str | None, citations: list[str], retrieved_ids: list[str]) -> list[str]:
    """:meth:`PipelineResult.cited_chunk_ids` of a result's fields (``retrieved_ids``: its chunk ids, in rank order)."""
    if citations:
        return list(dict.fromkeys(citations))
    if not answer or "[S" not in answer:
        return []
    cited: list[str] = []
    for match in _MARKER.finditer(answer):
        index = int(match.group(1)) - 1
        if 0 <= index < len(retrieved_ids):
            cited.append(retrieved_ids[index])
    return list(dict.fromkeys(cited))


class PipelineResultError(Exception):
    """The pipeline returned something that is not a valid result.

    ``problem``: the problem in one line (what the store records for the item); ``unknown_keys``: the
    returned keys no field accepts, as paths (``retrieved[0].chunkid``)."""

    def __init__(self, message: str, *, problem: str | None = None, unknown_keys: tuple[str, ...] = ()):
        super().__init__(message)
        self.problem = problem or message
        self.unknown_keys = unknown_keys


def _accepted(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _did_you_mean(key: str, model: type[BaseModel]) -> str | None:
    """The field an unknown key most likely meant (snake_case or camelCase spellings), or None."""
    spellings = {name: name for name in model.model_fields} | {to_camel(name): name for name in model.model_fields}
    match = difflib.get_close_matches(key, spellings, n=1, cutoff=0.6)
    return spellings[match[0]] if match else None


# Which model holds a field of another: (model, field) -> the model of its entries.
_NESTED: dict[tuple[type[BaseModel], str], type[BaseModel]] = {
    (PipelineResult, "retrieved"): Retrieved, (PipelineResult, "tool_calls"): ToolCall, (PipelineResult, "steps"): Step,
    (Step, "retrieved"): Retrieved}


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model an error's location (less its key) points into: ``()`` the result, ``("retrieved", 0)`` a
    chunk, ``("steps", 1, "retrieved", 0)`` a step's chunk; None inside a dict of free values (metadata)."""
    model: type[BaseModel] | None = PipelineResult
    for part in loc:
        if model is None:
            return None
        if not isinstance(part, int):
            model = _NESTED.get((model, to_snake(str(part))))
    return model


def _unknown_keys(errors: list[Any]) -> tuple[list[str], list[str]]:
    """The extra keys of a validation error: their paths, and each with its did-you-mean."""
    paths, described = [], []
    for error in errors:
        loc = error["loc"]
        if error["type"] != "extra_forbidden" or not loc:
            continue
        model = _model_at(loc[:-1])
        key = str(loc[-1])
        path = ".".join(filter(None, [field_path(loc[:-1], rename=to_snake), key]))
        guess = _did_you_mean(key, model) if model is not None else None
        paths.append(path)
        described.append(f"'{path}'" + (f" (did you mean '{guess}'?)" if guess else ""))
    return paths, described


#: The most problems of one result listed (a result with a bad field in each of 500 chunks lists these and a count).
MAX_PROBLEMS_SHOWN = 10


def _problem_lines(errors: list[Any]) -> list[str]:
    """Each validation problem as ``field 'path': message (got ...)``, at most MAX_PROBLEMS_SHOWN and a count."""
    lines = []
    for error in errors[:MAX_PROBLEMS_SHOWN]:
        shown = repr(error.get("input"))
        got = "" if error["type"] == "missing" else f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        lines.append(f"field '{field_path(error['loc'], rename=to_snake)}': {error['msg']}{got}")
    if len(errors) > MAX_PROBLEMS_SHOWN:
        lines.append(f"... and {len(errors) - MAX_PROBLEMS_SHOWN} more")
    return lines


def coerce_result(value: Any, *, explain_keys: bool = True) -> PipelineResult:
    """Validate what the pipeline returned; the error names every bad field, one per line (at most
    MAX_PROBLEMS_SHOWN). Unknown keys come first, with a did-you-mean; ``explain_keys`` adds the accepted
    keys (else a one-line reference to the first failure that listed them)."""
    if isinstance(value, PipelineResult):
        return value
    if value is None:
        raise PipelineResultError("crucible_pipeline returned None; expected a PipelineResult or a dict with at least 'retrieved' (and 'answer' in system mode)")
    if not isinstance(value, dict):
        raise PipelineResultError(f"crucible_pipeline returned {type(value).__name__}; expected a PipelineResult or a dict")
    try:
        return PipelineResult.model_validate(value)
    except ValidationError as exc:
        # Python users write snake_case: name fields that way, whatever spelling came in.
        errors = exc.errors(include_url=False)
        unknown, described = _unknown_keys(errors)
        others = [error for error in errors if error["type"] != "extra_forbidden" or not error["loc"]]
        listed = _problem_lines(others)
        if unknown:
            more = f"; {len(others)} more problem(s)" if others else ""
            word = "key" if len(unknown) == 1 else "keys"
            problem = f"crucible_pipeline returned an invalid result: unknown {word} {', '.join(described)}{more}"
            shown = problem + (":" if others else "")
            if not explain_keys:
                raise PipelineResultError("\n    ".join([f"{problem}; the accepted keys are listed at the first such failure"
                                                       + (":" if others else ""), *listed]),
                                          problem=problem, unknown_keys=tuple(unknown)) from None
            raise PipelineResultError(
                "\n    ".join([shown, *listed]) + "\n"
                f"    a result accepts: {_accepted(PipelineResult)} (snake_case or camelCase)\n"
                f"    a retrieved chunk accepts: {_accepted(Retrieved)}\n"
                f"    a tool call accepts: {_accepted(ToolCall)}; a step accepts: {_accepted(Step)}\n"
                "HINT: build the result as crucible.PipelineResult(...) to have its keys checked where you write them",
                problem=problem, unknown_keys=tuple(unknown)) from None
        head = "crucible_pipeline returned an invalid result: "
        hint = _hint(others)
        if len(others) == 1:
            raise PipelineResultError(head + listed[0] + hint, problem=head + listed[0]) from None
        # Every problem, one per line (a user fixes them all at once); the stored problem stays one line.
        problem = head + f"{len(others)} problems: " + "; ".join(listed[:2]) + ("; ..." if len(others) > 2 else "")
        raise PipelineResultError("\n    ".join([f"{head}{len(others)} problems:", *listed]) + hint, problem=problem) from None


def _hint(errors: list[Any]) -> str:
    """A HINT line for a mistake worth one ("" for the others): a tool call's arguments given as JSON text."""
    if any(error["loc"][-1:] == ("arguments",) and isinstance(error.get("input"), str) for error in errors):
        return ("\nHINT: a tool call's arguments are an object of the values it was called with; an API that returns "
                "them as JSON text (OpenAI's function.arguments) needs json.loads(...) first")
    return ""


# -- results as plain data -------------------------------------------------------------------
# A result's keys, all in snake_case or all in camelCase (one-word fields are both); never changed.
_SNAKE_RESULT_KEYS = frozenset(PipelineResult.model_fields)
_CAMEL_RESULT_KEYS = frozenset(to_camel(name) for name in PipelineResult.model_fields)
_SNAKE_CHUNK_KEYS = frozenset(Retrieved.model_fields)
_CAMEL_CHUNK_KEYS = frozenset(to_camel(name) for name in Retrieved.model_fields)
_CALL_KEYS = frozenset(ToolCall.model_fields)  # one-word fields: one spelling
_STEP_KEYS = frozenset(Step.model_fields)
_EMPTY: dict[str, Any] = {}
_EMPTY_LIST: list[Any] = []


def result_data(value: Any, *, explain_keys: bool = True) -> dict[str, Any]:
    """What the pipeline returned, validated, as plain data: exactly ``PipelineResult.model_dump(mode="json")``
    of the validated result (every field, in the model's order; new containers, so the pipeline may reuse its own).

    A dict whose every value already has its field's exact type (str, bool, float, lists of str, chunks made of
    those, metadata of JSON values) is checked and copied here, without building a model: the per-item path of
    a large run. Anything else (a PipelineResult, a value pydantic would convert, an invalid one) goes through
    :func:`coerce_result`, so the errors are the model's, naming every bad field."""
    if type(value) is dict:
        data = _exact_data(value)
        if data is not None:
            return data
    result = coerce_result(value, explain_keys=explain_keys)
    try:
        return result.model_dump(mode="json")
    except (ValueError, RecursionError) as exc:  # e.g. a numpy array in metadata, or metadata nested too deep
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problem = f"crucible_pipeline returned a result that cannot be stored as JSON: {reason}"
        raise PipelineResultError(problem + "\nHINT: metadata takes JSON values (str, numbers, booleans, None, "
                                  "lists, dicts with str keys): convert numpy values with .tolist() or float()",
                                  problem=problem) from None


def _exact_data(value: dict[str, Any]) -> dict[str, Any] | None:
    """``result_data`` of a dict that needs no conversion, or None: the model must decide."""
    keys = value.keys()
    if keys <= _SNAKE_RESULT_KEYS:
        concepts, blocked_by, calls = value.get("detected_concepts", _EMPTY_LIST), value.get("blocked_by"), value.get("tool_calls", _EMPTY_LIST)
    elif keys <= _CAMEL_RESULT_KEYS:
        concepts, blocked_by, calls = value.get("detectedConcepts", _EMPTY_LIST), value.get("blockedBy"), value.get("toolCalls", _EMPTY_LIST)
    else:  # an unknown key, both spellings of one field, or the two spellings mixed: the model decides
        return None
    get = value.get
    answer, confidence = get("answer"), get("confidence")
    abstained, blocked = get("abstained", False), get("blocked", False)
    if ((answer is not None and type(answer) is not str) or (blocked_by is not None and type(blocked_by) is not str)
            or (confidence is not None and (type(confidence) is not float or not 0.0 <= confidence <= 1.0))
            or type(abstained) is not bool or type(blocked) is not bool):
        return None
    retrieved = _exact_chunks(get("retrieved", _EMPTY_LIST))
    if retrieved is None:
        return None
    citations, concepts = _strings(get("citations", _EMPTY_LIST)), _strings(concepts)
    metadata = _json_copy(get("metadata", _EMPTY))
    if citations is None or concepts is None or type(metadata) is not dict:
        return None
    tool_calls = _exact_calls(calls) if calls else [] if type(calls) is list else None
    steps = get("steps")
    if tool_calls is None or (steps is not None and (steps := _exact_steps(steps)) is None):
        return None
    return {"answer": answer, "retrieved": retrieved, "citations": citations, "confidence": confidence,
            "abstained": abstained, "detected_concepts": concepts, "blocked": blocked, "blocked_by": blocked_by,
            "metadata": metadata, "tool_calls": tool_calls, "steps": steps}


def _exact_chunks(chunks: Any) -> list[dict[str, Any]] | None:
    """A list of exact chunks copied (:func:`_exact_chunk`), or None."""
    if type(chunks) is not list:  # (a generator must not be consumed here: the model reads it then)
        return None
    retrieved = []
    for chunk in chunks:
        plain = _exact_chunk(chunk)
        if plain is None:
            return None
        retrieved.append(plain)
    return retrieved


def _exact_calls(calls: Any) -> list[dict[str, Any]] | None:
    """A list of tool calls of exact types (a non-empty str name, arguments of JSON values) copied, or None."""
    if type(calls) is not list:
        return None
    copied = []
    for call in calls:
        if type(call) is not dict or not call.keys() <= _CALL_KEYS:
            return None
        name, arguments = call.get("name"), _json_copy(call.get("arguments", _EMPTY))
        if type(name) is not str or not name or type(arguments) is not dict:
            return None
        copied.append({"name": name, "arguments": arguments})
    return copied


def _exact_steps(steps: Any) -> list[dict[str, Any]] | None:
    """A list of steps of exact types (their chunks :func:`_exact_chunk`'s, metadata of JSON values) copied, or None."""
    if type(steps) is not list:
        return None
    copied = []
    for step in steps:
        if type(step) is not dict or not step.keys() <= _STEP_KEYS:
            return None
        retrieved, metadata = _exact_chunks(step.get("retrieved", _EMPTY_LIST)), _json_copy(step.get("metadata", _EMPTY))
        if retrieved is None or type(metadata) is not dict:
            return None
        copied.append({"retrieved": retrieved, "metadata": metadata})
    return copied


def _exact_chunk(chunk: Any) -> dict[str, Any] | None:
    # Called for every retrieved chunk: the keys are matched as a set, then read directly.
    if type(chunk) is not dict:
        return None
    keys = chunk.keys()
    if keys <= _SNAKE_CHUNK_KEYS:
        chunk_id, doc_id = chunk.get("chunk_id"), chunk.get("doc_id")
    elif keys <= _CAMEL_CHUNK_KEYS:
        chunk_id, doc_id = chunk.get("chunkId"), chunk.get("docId")
    else:  # an unknown key, both spellings of one field, or the two spellings mixed: the model decides
        return None
    text, score, metadata = chunk.get("text", ""), chunk.get("score"), chunk.get("metadata", _EMPTY)
    if (type(chunk_id) is not str or not chunk_id or type(doc_id) is not str or not doc_id or type(text) is not str
            or (score is not None and type(score) is not float)):
        return None
    if type(metadata) is dict and not metadata:
        metadata = {}
    else:
        metadata = _json_copy(metadata)
        if type(metadata) is not dict:
            return None
    return {"chunk_id": chunk_id, "doc_id": doc_id, "text": text, "score": score, "metadata": metadata}


def _strings(value: Any) -> list[str] | None:
    """A copy of a list of str, or None (anything else is the model's to convert or refuse)."""
    if type(value) is not list:
        return None
    for entry in value:
        if type(entry) is not str:
            return None
    return list(value)


_NOT_JSON = object()


def _json_copy(value: Any, depth: int = 0) -> Any:
    """A deep copy of a value made of JSON types only (str keys, finite floats), else _NOT_JSON: pydantic
    converts the rest when it dumps (a tuple to a list, NaN to None, an int key to str), and decides what
    is nested deeper than _JSON_DEPTH."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else _NOT_JSON
    if depth >= _JSON_DEPTH:
        return _NOT_JSON
    if kind is dict:
        if not value:
            return {}
        copy = {}
        for key, entry in value.items():
            if type(key) is not str:
                return _NOT_JSON
            copied = _json_copy(entry, depth + 1)
            if copied is _NOT_JSON:
                return _NOT_JSON
            copy[key] = copied
        return copy
    if kind is list:
        items = [_json_copy(entry, depth + 1) for entry in value]
        return _NOT_JSON if any(entry is _NOT_JSON for entry in items) else items
    return _NOT_JSON


_JSON_DEPTH = 64
