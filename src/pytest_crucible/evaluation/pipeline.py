"""The pipeline contract: what the user's ``crucible_pipeline`` callable returns.

The callable is invoked as ``pipeline(question, *, item, config, mode)`` and returns
a :class:`PipelineResult` or a dict with the same fields (camelCase or snake_case).

This module never imports pytest.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel, to_snake

from ..golden_set import field_path

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
    """The pipeline returned something that is not a valid result."""


def coerce_result(value: Any) -> PipelineResult:
    """Validate what the pipeline returned; the error names the first bad field."""
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
        first = errors[0]
        got = "" if first["type"] == "missing" else f" (got {str(first.get('input'))[:60]!r})"
        more = f"; {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
        raise PipelineResultError(
            f"crucible_pipeline returned an invalid result: field '{field_path(first['loc'], rename=to_snake)}': {first['msg']}{got}{more}"
        ) from None
