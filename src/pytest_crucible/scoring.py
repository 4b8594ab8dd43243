"""Score one golden item from one pipeline result.

The result is an :class:`ItemScore` made of plain data only (str, float, int,
lists, dicts), so it can cross process boundaries (xdist) and go straight into
the store. This module never imports pytest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from .golden_set import GoldenItem
from .metrics.retrieval import provenance_qrels, ranking_units, retrieval_metrics
from .pipeline import PipelineResult
from .qrels import effective_grades

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
    # Where the grades of the retrieved pool came from: {"provenance": n, "human": n, "llm": n, "unjudged": n}.
    pool: dict[str, int] = field(default_factory=dict)
    # New llm judgments from pool labelling, for the qrels ledger.
    qrels_rows: list[dict[str, Any]] = field(default_factory=list)
    # Per assertion: text, kind, weight, conceptId, conceptDetected, supported, satisfied.
    assertions: list[dict[str, Any]] = field(default_factory=list)

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


def item_judgments(item: GoldenItem, ledger_rows: Iterable[dict[str, Any]] = ()) -> dict[str, tuple[int, str]]:
    """unit -> (effective grade, source) for an item: its citations as run, human and llm rows."""
    return effective_grades(provenance_qrels(item.citations), ledger_rows)


def pool_sources(units: Sequence[str], judgments: dict[str, tuple[int, str]]) -> dict[str, int]:
    """How the retrieved pool (its scored units) was judged; unjudged units count as non-relevant."""
    counts = {"provenance": 0, "human": 0, "llm": 0, "unjudged": 0}
    for unit in units:
        counts[judgments[unit][1] if unit in judgments else "unjudged"] += 1
    return counts


def concept_metrics(item: GoldenItem, result: PipelineResult, k: int) -> dict[str, float]:
    """conceptRecall: required concepts detected / required concepts.
    nearMissRate: share of the top-k chunks whose concepts (chunk metadata ``concepts``)
    include one graded irrelevant for this item: the near misses a retriever should not pull.
    Each is left out when the item defines no concept of that grade."""
    metrics: dict[str, float] = {}
    required = {c.id for c in item.concepts if c.grade == "required"}
    if required:
        metrics["conceptRecall"] = len(required & set(result.detected_concepts)) / len(required)
    irrelevant = {c.id for c in item.concepts if c.grade == "irrelevant"}
    top = result.retrieved[:k]
    if irrelevant and top:
        near = sum(1 for chunk in top if irrelevant & set(chunk.metadata.get("concepts") or ()))
        metrics["nearMissRate"] = near / len(top)
    return metrics


def score_item(item: GoldenItem, result: PipelineResult, *, k: int, latency_ms: float | None = None, relevance_level: int = 1,
               ledger_rows: Iterable[dict[str, Any]] = ()) -> ItemScore:
    """Score one item: retrieval metrics against its effective grades, concept metrics, strict-mode checks.

    ``ledger_rows`` are the item's human and llm judgments (see :mod:`pytest_crucible.qrels`);
    the citations as run are the provenance judgments.
    """
    score = _base(item)
    score.answer = result.answer
    score.retrieved = [chunk.model_dump(mode="json") for chunk in result.retrieved]
    score.citations = result.cited_chunk_ids()
    score.confidence = result.confidence
    score.abstained = result.abstained
    score.blocked = result.blocked
    score.detected_concepts = list(result.detected_concepts)
    score.latency_ms = latency_ms

    judgments = item_judgments(item, ledger_rows)
    qrels = {unit: grade for unit, (grade, _) in judgments.items()}
    ranking = ranking_units([(chunk.chunk_id, chunk.doc_id) for chunk in result.retrieved], qrels)
    # Items with no relevant judgment (e.g. unanswerable ones) have undefined
    # retrieval metrics: they are left out, never scored as 0.
    score.metrics = retrieval_metrics(ranking, qrels, k, relevance_level=relevance_level)
    score.metrics.update(concept_metrics(item, result, k))
    score.pool = pool_sources(ranking[:k], judgments)

    missing = missing_required_citations(item, result, k)
    if missing:
        shown = ", ".join(chunk.chunk_id for chunk in result.retrieved[:5]) or "nothing"
        more = " ..." if len(result.retrieved) > 5 else ""
        score.failures.append(
            f"retrieval_miss: required citation(s) {', '.join(missing)} not retrieved in the top {k} "
            f"(retrievalLimit); retrieved: {shown}{more}"
        )
    return score
