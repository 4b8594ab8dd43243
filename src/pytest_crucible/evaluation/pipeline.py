"""The pipeline contract: what the user's ``crucible_pipeline`` callable returns.

The callable is invoked as ``pipeline(question, *, item, config, mode)`` and returns
a :class:`PipelineResult` or a dict with the same fields (camelCase or snake_case).

This module never imports pytest.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

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

    def cited_chunk_ids(self) -> list[str]:
        """Chunks the answer cites: explicit ``citations``, else its ``[Sn]`` markers.

        ``[Sn]`` refers to the n-th retrieved chunk (1-based); markers pointing past
        the retrieved list are ignored (they cite nothing that was retrieved).
        """
        if self.citations:
            return list(dict.fromkeys(self.citations))
        cited: list[str] = []
        for match in _MARKER.finditer(self.answer or ""):
            index = int(match.group(1)) - 1
            if 0 <= index < len(self.retrieved):
                cited.append(self.retrieved[index].chunk_id)
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


def _unknown_keys(errors: list[Any]) -> tuple[list[str], list[str]]:
    """The extra keys of a validation error: their paths, and each with its did-you-mean."""
    paths, described = [], []
    for error in errors:
        loc = error["loc"]
        if error["type"] != "extra_forbidden" or not loc:
            continue
        model = PipelineResult if len(loc) == 1 else Retrieved if len(loc) == 3 and loc[0] == "retrieved" else None
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
                "HINT: build the result as crucible.PipelineResult(...) to have its keys checked where you write them",
                problem=problem, unknown_keys=tuple(unknown)) from None
        head = "crucible_pipeline returned an invalid result: "
        if len(others) == 1:
            raise PipelineResultError(head + listed[0]) from None
        # Every problem, one per line (a user fixes them all at once); the stored problem stays one line.
        problem = head + f"{len(others)} problems: " + "; ".join(listed[:2]) + ("; ..." if len(others) > 2 else "")
        raise PipelineResultError("\n    ".join([f"{head}{len(others)} problems:", *listed]), problem=problem) from None
