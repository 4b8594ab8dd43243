"""Score one golden item from one pipeline result.

The result is an :class:`ItemScore` made of plain data only (str, float, int,
lists, dicts), so it can cross process boundaries (xdist) and go straight into
the store. This module never imports pytest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .golden_set import GoldenItem
from .metrics.retrieval import provenance_qrels, ranking_units, retrieval_metrics
from .pipeline import PipelineResult

OUTCOME_STRICT = "strict"
OUTCOME_RECORD = "record"
OUTCOMES = (OUTCOME_STRICT, OUTCOME_RECORD)


@dataclass
class ItemScore:
    """Everything recorded about one golden item in one run."""

    item_id: str
    question: str
    item: dict[str, Any]
    source: str = ""
    line: int = 0
    answer: str | None = None
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    confidence: float | None = None
    abstained: bool = False
    blocked: bool = False
    detected_concepts: list[str] = field(default_factory=list)
    latency_ms: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    # Reasons this item fails in strict outcome mode (empty: the item passes).
    failures: list[str] = field(default_factory=list)
    # The pipeline raised or returned an invalid result: the item fails in every mode.
    error: str | None = None
    outcome: str = ""
    # Judge requests that failed after retries: the item's judge-based metrics are void.
    judge_errors: list[str] = field(default_factory=list)
    # The verdicts behind the answer metrics (for reports), and new judge-cache rows for the store.
    verdicts: dict[str, Any] = field(default_factory=dict)
    cache_rows: list[dict[str, Any]] = field(default_factory=list)

    def to_plain(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_plain(cls, data: dict[str, Any]) -> "ItemScore":
        return cls(**data)


def missing_required_citations(item: GoldenItem, result: PipelineResult, k: int) -> list[str]:
    """Required citations with no matching chunk among the top ``k`` retrieved."""
    top = result.retrieved[:k]
    chunk_ids = {chunk.chunk_id for chunk in top}
    doc_ids = {chunk.doc_id for chunk in top}
    missing = []
    for citation in item.citations:
        if citation.mode != "required":
            continue
        found = citation.chunk_id in chunk_ids if citation.chunk_id else citation.doc_id in doc_ids
        if not found:
            missing.append(citation.chunk_id or citation.doc_id)
    return missing


def _base(item: GoldenItem) -> ItemScore:
    return ItemScore(item_id=item.id, question=item.question, item=item.to_json(), source=item.source, line=item.line)


def score_error(item: GoldenItem, message: str, latency_ms: float | None = None) -> ItemScore:
    """The score of an item whose pipeline call failed: no metrics, just the error."""
    score = _base(item)
    score.error = message
    score.latency_ms = latency_ms
    return score


def score_item(item: GoldenItem, result: PipelineResult, *, k: int, latency_ms: float | None = None, relevance_level: int = 1) -> ItemScore:
    """Score one item: retrieval metrics against its provenance qrels, plus strict-mode checks."""
    score = _base(item)
    score.answer = result.answer
    score.retrieved = [chunk.model_dump(mode="json") for chunk in result.retrieved]
    score.citations = result.cited_chunk_ids()
    score.confidence = result.confidence
    score.abstained = result.abstained
    score.blocked = result.blocked
    score.detected_concepts = list(result.detected_concepts)
    score.latency_ms = latency_ms

    qrels = provenance_qrels(item.citations)
    ranking = ranking_units([(chunk.chunk_id, chunk.doc_id) for chunk in result.retrieved], qrels)
    # Items with no relevant judgment (e.g. unanswerable ones) have undefined
    # retrieval metrics: they are left out, never scored as 0.
    score.metrics = retrieval_metrics(ranking, qrels, k, relevance_level=relevance_level)

    missing = missing_required_citations(item, result, k)
    if missing:
        shown = ", ".join(chunk.chunk_id for chunk in result.retrieved[:5]) or "nothing"
        more = " ..." if len(result.retrieved) > 5 else ""
        score.failures.append(
            f"retrieval_miss: required citation(s) {', '.join(missing)} not retrieved in the top {k} "
            f"(retrievalLimit); retrieved: {shown}{more}"
        )
    return score
