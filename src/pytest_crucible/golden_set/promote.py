"""Promote a reviewed correction into a draft golden item: the loop that turns a caught
regression into a permanent test.

The body follows the spec's contract (``runId``, optional ``resultId``, ``question``,
``correctedAssertions``, ``citations``, ``errorClass``, ``tags``). It takes assertions a
reviewer has already corrected and calls no model. The run must exist and, when given,
the result must belong to that run; then one transaction creates the draft golden item
(must-assertions, citation anchors, tags) and appends the linked ``eval_feedback`` row.
A validation or write failure leaves the database exactly as it was.

This module never imports pytest.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from ..store import Store, StoreError, new_ulid, utc_now
from ..store.ledgers import add_promoted_draft, draft_golden_items
from .schema import Assertion, Citation, GoldenItem, field_path


class PromoteError(StoreError):
    """A promote request that was refused; nothing was written."""


class PromoteNotFound(PromoteError):
    """The run (or result) the request names is not there for this caller."""


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PromoteRequest(_Body):
    run_id: str = Field(min_length=1)
    result_id: str | None = None
    question: str = Field(min_length=1)
    corrected_assertions: list[str] = Field(min_length=1)
    citations: list[Citation] = Field(default_factory=list)
    error_class: str
    tags: list[str] = Field(default_factory=list)
    corrected_by: str | None = None
    note: str | None = None
    status: Literal["draft"] = "draft"

    @field_validator("corrected_assertions")
    @classmethod
    def _assertions_not_blank(cls, value: list[str]) -> list[str]:
        for index, text in enumerate(value):
            if not text.strip():
                raise ValueError(f"assertion {index} is blank")
        return value

    @field_validator("error_class")
    @classmethod
    def _known_class(cls, value: str) -> str:
        from ..metrics.errors import ERROR_CLASSES

        if value not in ERROR_CLASSES:
            raise ValueError(f"must be one of {', '.join(ERROR_CLASSES)}")
        return value


_BODY_HINT = ("HINT: the body needs runId, question, correctedAssertions (at least one) and errorClass; "
              "citations are {docId, chunkId?, mode}")


def parse_request(data: Any, source: str = "request") -> PromoteRequest:
    from ..json_input import control_character_problem, shown, value_problem

    unusable = value_problem(data) or control_character_problem(data)
    if unusable is not None:  # text SQLite cannot store or a control character, or absurd nesting
        loc, problem = unusable
        raise PromoteError(f"{source}: field '{shown(field_path(loc)) or '(body)'}': {problem}\n{_BODY_HINT}")
    try:
        return PromoteRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        problem = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise PromoteError(f"{source}: field '{shown(field_path(first['loc'])) or '(body)'}': {problem}\n{_BODY_HINT}") from None


def promote(store: Store, request: PromoteRequest | dict[str, Any], *, source: str = "request",
            workspace: str | None = None, api_key_id: str | None = None) -> dict[str, Any]:
    """Create the draft golden item and its feedback row in one transaction; returns the spec's response.

    ``workspace``: the caller may only promote from runs of this workspace (the HTTP API passes
    the key's). A run of another workspace is then refused exactly as a run that does not
    exist, and a result of another run exactly as one that does not exist, so ids of other
    workspaces cannot be probed. ``api_key_id``: the key that is writing (the HTTP API's), kept on
    the feedback row apart from ``correctedBy``, the reviewer the body names, and returned as
    ``promotedBy`` (``key:<id>``; None without a key: the command line). ``correctedBy`` is checked
    and kept as ``json_input.reviewer_name`` says: a name that reads as an API key's is refused unless
    it is the writing key's own. The draft belongs to the run's workspace."""
    from ..json_input import key_author, reviewer_name

    if not isinstance(request, PromoteRequest):
        request = parse_request(request, source)
    if request.corrected_by is not None:
        try:
            name = reviewer_name(request.corrected_by, acting_key_id=api_key_id)
        except ValueError as exc:
            hint = ("name the reviewer, or leave correctedBy out: the key that sends the request is recorded"
                    if api_key_id is not None else "name the reviewer (--by NAME, or correctedBy in the body)")
            raise PromoteError(f"{source}: field 'correctedBy': {exc}\nHINT: {hint}") from None
        request = request.model_copy(update={"corrected_by": name})
    if not store.has_run(request.run_id, workspace=workspace):
        where = f"workspace '{workspace}'" if workspace is not None else str(store.path)
        raise PromoteNotFound(f"{source}: field 'runId': no run {request.run_id} in {where}\nHINT: `crucible runs` lists the runs")
    item_id_of_result = None
    if request.result_id is not None:
        row = store.result_origin(request.result_id)
        if row is None or row[0] != request.run_id:
            where = "belongs to another run" if row is not None else "does not exist"
            if workspace is not None:
                where = "is not a result of this run"
            raise PromoteNotFound(f"{source}: field 'resultId': result {request.result_id} {where} (run {request.run_id})\n"
                                  "HINT: take resultId from that run's results (`crucible export RUN`)")
        item_id_of_result = row[1]

    golden_id, feedback_id, now = new_ulid(), new_ulid(), utc_now()
    item = GoldenItem(
        id=golden_id,
        question=request.question,
        status="draft",
        assertions=[Assertion(text=text, kind="must", weight=1.0) for text in request.corrected_assertions],
        citations=request.citations,
        tags=request.tags,
        metadata={"promotedFrom": {"runId": request.run_id, "resultId": request.result_id, "itemId": item_id_of_result}},
    )
    note = request.note or f"Correction promoted to golden item {golden_id}."
    # One transaction: both rows or neither.
    add_promoted_draft(store, feedback_id=feedback_id, run_id=request.run_id, result_id=request.result_id,
                       item_id=item_id_of_result, error_class=request.error_class, evidence="reviewed correction",
                       corrected_by=request.corrected_by, note=note, draft_id=golden_id, draft_item=item.to_json(),
                       created_at=now, api_key_id=api_key_id)
    shown = item.to_json()
    return {
        "item": {
            "id": golden_id,
            "status": "draft",
            "question": shown["question"],
            "assertions": [{"text": a["text"], "kind": a["kind"], "weight": _number(a["weight"])} for a in shown["assertions"]],
            "citations": [{k: v for k, v in c.items() if v is not None} for c in shown["citations"]],
            "tags": shown["tags"],
        },
        "feedback": {
            "id": feedback_id,
            "runId": request.run_id,
            "resultId": request.result_id,
            "errorClass": request.error_class,
            "correctedBy": request.corrected_by,
            "promotedBy": None if api_key_id is None else key_author(api_key_id),
            "note": note,
        },
    }


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def draft_items(store: Store, workspace: str | None = None) -> list[dict[str, Any]]:
    """Promoted draft items of ``workspace`` (None: every workspace) in the golden file format, oldest first."""
    return draft_golden_items(store, workspace=workspace)
