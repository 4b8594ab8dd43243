"""A run's per-item rows as their tables store them: each table's rows a ``NamedTuple`` whose fields are the
columns its INSERT names (a row and its statement cannot disagree about the order), a result in its decoded
shape encoded (:func:`result_row`), and the attempts of an item scored more than once in a batch
(:func:`last_attempts`). ``results.py`` writes and reads them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple


class GoldenRow(NamedTuple):
    """A golden item as it ran (``golden_item_refs``; the view ``golden_items`` reads it with its text)."""

    run_id: str
    item_id: str
    source: str | None
    line: int | None
    item_hash: str  # its canonical JSON's key in contents


class ResultRow(NamedTuple):
    """A result as the results table stores it: a list column '[]' when empty, an optional JSON column
    NULL when empty, a flag 0 or 1, an absent outcome "" (:func:`result_row` builds one)."""

    run_id: str
    item_id: str
    question: str
    answer: str | None
    retrieved_hash: str  # the ranking's JSON's key in contents
    citations: str
    confidence: float | None
    abstained: int
    blocked: int
    detected_concepts: str
    outcome: str
    failures: str
    error: str | None
    latency_ms: float | None
    recorded_at: str | None
    judge_errors: str
    verdicts: str | None
    pool: str | None
    assertions: str | None
    result_id: str | None
    error_class: str | None
    error_evidence: str | None
    crag_grade: str | None
    blocked_layer: str | None
    metric_errors: str
    tool_calls: str | None


class MetricRow(NamedTuple):
    run_id: str
    item_id: str
    metric: str
    value: float


class FeedbackRow(NamedTuple):
    """A classified result queued for review; ``id`` is drawn once the row is known to be queued."""

    run_id: str
    result_id: str | None
    item_id: str
    error_class: str | None
    evidence: str | None
    created_at: str
    id: str | None = None


class ConceptRow(NamedTuple):
    run_id: str
    item_id: str
    concept_id: str
    grade: str


class RepeatRow(NamedTuple):
    run_id: str
    item_id: str
    repeat: int
    outcome: str
    answer: str | None
    metrics: str  # JSON
    failure: str | None
    error: str | None


class AttemptRow(NamedTuple):
    run_id: str
    item_id: str
    attempt: int
    outcome: str
    answer: str | None
    metrics: str  # JSON
    failure: str | None
    error: str | None
    error_class: str | None
    recorded_at: str


_JSON_RESULT_COLUMNS = ("retrieved", "citations", "detected_concepts", "failures", "judge_errors", "metric_errors")  # lists, '[]' when empty
_JSON_OPTIONAL_COLUMNS = ("verdicts", "pool", "assertions", "tool_calls")  # JSON, NULL when empty


def _decode(rows: list[dict[str, Any]], column: str, empty: str) -> list[dict[str, Any]]:
    """``rows`` with one JSON column decoded in place (``empty``: the JSON of a NULL or empty cell)."""
    for row in rows:
        row[column] = json.loads(row[column] or empty)
    return rows


def _json_list(value: Any) -> str:
    return json.dumps(value) if value else "[]"  # most are empty: their text without a call to the encoder


def _json_or_null(value: Any) -> str | None:
    return json.dumps(value) if value else None


def result_row(run_id: str, row: dict[str, Any], result_id: str | None, recorded_at: str | None,
               contents: dict[str, str], hashes: Callable[[str], str]) -> ResultRow:
    """A result in its decoded shape (that of ``results(decoded=True)``, of an export, of a score) as the
    results table stores it; its ranking's text goes to ``contents`` (hash -> text, hashed by ``hashes``)."""
    get = row.get
    retrieved = _json_list(get("retrieved"))
    retrieved_hash = hashes(retrieved)
    contents[retrieved_hash] = retrieved
    return ResultRow(run_id, row["item_id"], row["question"], get("answer"), retrieved_hash, _json_list(get("citations")),
                     get("confidence"), 1 if get("abstained") else 0, 1 if get("blocked") else 0, _json_list(get("detected_concepts")),
                     get("outcome") or "", _json_list(get("failures")), get("error"), get("latency_ms"), recorded_at,
                     _json_list(get("judge_errors")), _json_or_null(get("verdicts")), _json_or_null(get("pool")), _json_or_null(get("assertions")),
                     result_id, get("error_class"), get("error_evidence"), get("crag_grade"), get("blocked_layer"),
                     _json_list(get("metric_errors")), _json_or_null(get("tool_calls")))


def attempt_of(score: dict[str, Any], number: int) -> dict[str, Any]:
    """What item_attempts keeps of one earlier attempt at an item (``number`` counts from 1)."""
    failures = score.get("failures") or []
    return {"attempt": number, "outcome": score.get("outcome") or "unknown", "answer": score.get("answer"),
            "metrics": dict(score.get("metrics") or {}), "failure": "; ".join(failures) or None, "error": score.get("error"),
            "error_class": score.get("error_class")}


def last_attempts(scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One score per item: an item scored twice in one batch (pytest ran it again) keeps its last score, and the
    earlier ones become its attempts, numbered after those it already carries."""
    if len({score["item_id"] for score in scores}) == len(scores):
        return scores  # the usual batch: nothing to fold
    last: dict[str, dict[str, Any]] = {}
    for score in scores:
        earlier = last.pop(score["item_id"], None)
        if earlier is not None:
            before = list(earlier.get("attempts") or [])
            before.append(attempt_of(earlier, len(before) + 1))
            after = [dict(row, attempt=len(before) + index + 1) for index, row in enumerate(score.get("attempts") or [])]
            score = {**score, "attempts": before + after, "supersedes": earlier.get("supersedes", False)}
        last[score["item_id"]] = score
    return list(last.values())
