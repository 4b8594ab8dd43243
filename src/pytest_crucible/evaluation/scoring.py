"""Score one golden item from one pipeline result.

The result is an :class:`ItemScore` made of plain data only (str, float, int,
lists, dicts), so it can cross process boundaries (xdist) and go straight into
the store. This module never imports pytest.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..golden_set.schema import GoldenItem
from ..metrics.guardrail import guardrail_failure, guardrail_item_metrics
from ..metrics.retrieval import ranking_units, retrieval_metrics
from ..metrics.tools import STEPS, tool_metrics
from ..qrels.grades import item_grades
from .pipeline import PipelineResult, cited_chunk_ids, ranking_of, result_data

if TYPE_CHECKING:
    from .repeats import RepeatRow


@dataclass(slots=True)  # one per item: its fields in slots, not a dict grown field by field
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
    blocked_layer: str | None = None
    # Guardrail eval: an attack let through or a clean question refused (fails in strict mode).
    guardrail_failure: str | None = None
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
    # Custom metrics that raised or returned something that is not a number: the item fails, naming each.
    metric_errors: list[str] = field(default_factory=list)
    # With --crucible-repeat: each repeat (repeat, outcome, answer, metrics, failure, error); the item's
    # metrics are their means (see evaluation/repeats.py).
    repeats: list[RepeatRow] = field(default_factory=list)
    # The verdicts behind the answer metrics (for reports), and new judge-cache rows for the store.
    verdicts: dict[str, Any] = field(default_factory=dict)
    cache_rows: list[dict[str, Any]] = field(default_factory=list)
    # Where the grades of the retrieved pool came from: {"provenance": n, "human": n, "llm": n, "unjudged": n}.
    pool: dict[str, int] = field(default_factory=dict)
    # New llm judgments from pool labelling, for the qrels ledger.
    qrels_rows: list[dict[str, Any]] = field(default_factory=list)
    # Per assertion: text, kind, weight, conceptId, conceptDetected, supported, satisfied.
    assertions: list[dict[str, Any]] = field(default_factory=list)
    # The abstention layer and the error class (one per result, see metrics/errors.py).
    missing_citations: list[str] = field(default_factory=list)
    crag_grade: str | None = None
    unsupported_claims: list[str] = field(default_factory=list)
    supporting_chunk_ids: list[str] = field(default_factory=list)
    error_class: str | None = None
    error_evidence: str | None = None
    # The tool calls the pipeline made, in order ({"name", "arguments"} each; see metrics/tools.py).
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def to_plain(self) -> dict[str, Any]:
        # Every field already holds plain data: a shallow copy is enough (asdict's deep copy
        # was the largest per-item cost of the plugin); the fields are read in one C call.
        return dict(zip(_SCORE_FIELDS, _read_score_fields(self)))


_SCORE_FIELDS = tuple(ItemScore.__dataclass_fields__)
_read_score_fields = operator.attrgetter(*_SCORE_FIELDS)


def missing_required_citations(item: GoldenItem | dict[str, Any], retrieved: Sequence[Any], k: int) -> list[str]:
    """Required citations with no matching chunk among the top ``k`` retrieved (models or plain dicts)."""
    top = [chunk if isinstance(chunk, dict) else chunk.model_dump() for chunk in retrieved[:k]]
    chunk_ids = {chunk["chunk_id"] for chunk in top}
    doc_ids = {chunk["doc_id"] for chunk in top}
    citations = (item.to_json() if isinstance(item, GoldenItem) else item).get("citations") or []
    missing = []
    for citation in citations:
        if citation.get("mode", "required") != "required":
            continue
        chunk_id = citation.get("chunkId")
        found = chunk_id in chunk_ids if chunk_id else citation["docId"] in doc_ids
        if not found:
            missing.append(chunk_id or citation["docId"])
    return missing


def _base(item: GoldenItem, item_json: dict[str, Any] | None = None) -> ItemScore:
    return ItemScore(item_id=item.id, question=item.question, item=item.to_json() if item_json is None else item_json,
                     source=item.source, line=item.line)


def score_error(item: GoldenItem, message: str, latency_ms: float | None = None) -> ItemScore:
    """The score of an item whose pipeline call failed: no metrics, just the error."""
    score = _base(item)
    score.error = message
    score.latency_ms = latency_ms
    return score


def item_judgments(item: GoldenItem | dict[str, Any], ledger_rows: Iterable[dict[str, Any]] = ()) -> dict[str, tuple[int, str]]:
    """unit -> (effective grade, source) for an item: its citations as run, human and llm rows."""
    return item_grades(item, ledger_rows)


def score_ranking(retrieved: Sequence[tuple[Any, Any]], judgments: dict[str, tuple[int, str]], k: int,
                  relevance_level: int = 1) -> tuple[dict[str, float], list[str]]:
    """(retrieval metrics, ranked units) of one ranking of ``(chunk_id, doc_id)`` against an item's
    effective grades: what an item scores when it runs, and what ``crucible compare --rescore``
    recomputes from a stored ranking. Items with no relevant judgment (e.g. unanswerable ones) have
    undefined retrieval metrics: they are left out, never scored as 0."""
    qrels = {unit: grade for unit, (grade, _) in judgments.items()}
    ranking = ranking_units(retrieved, qrels)
    return retrieval_metrics(ranking, qrels, k, relevance_level=relevance_level), ranking


def pool_sources(units: Sequence[str], judgments: dict[str, tuple[int, str]]) -> dict[str, int]:
    """How the retrieved pool (its scored units) was judged; unjudged units count as non-relevant."""
    counts = {"provenance": 0, "human": 0, "llm": 0, "unjudged": 0}
    for unit in units:
        counts[judgments[unit][1] if unit in judgments else "unjudged"] += 1
    return counts


def concept_metrics(item: GoldenItem, result: PipelineResult | dict[str, Any], k: int) -> dict[str, float]:
    """conceptRecall: required concepts detected / required concepts.
    nearMissRate: share of the top-k chunks whose concepts (chunk metadata ``concepts``)
    include one graded irrelevant for this item: the near misses a retriever should not pull.
    Each is left out when the item defines no concept of that grade. ``result``: a result, or its
    plain data (:func:`~pytest_crucible.evaluation.pipeline.result_data`)."""
    metrics: dict[str, float] = {}
    if not item.concepts:
        return metrics
    data = as_data(result)
    required = {c.id for c in item.concepts if c.grade == "required"}
    if required:
        metrics["conceptRecall"] = len(required & set(data["detected_concepts"])) / len(required)
    irrelevant = {c.id for c in item.concepts if c.grade == "irrelevant"}
    top = ranking_of(data)[:k]
    if irrelevant and top:
        near = sum(1 for chunk in top if irrelevant & set(chunk["metadata"].get("concepts") or ()))
        metrics["nearMissRate"] = near / len(top)
    return metrics


def agent_metrics(item: dict[str, Any], data: dict[str, Any]) -> dict[str, float]:
    """An agentic result's metrics (metrics/tools.py): ``retrievalSteps`` when it returned ``steps``, and the
    tool metrics when the item (``item``: its JSON) has ``expectedTools``, matched by its ``toolMatch``."""
    metrics: dict[str, float] = {}
    steps = data.get("steps")
    if steps is not None:
        metrics[STEPS] = float(len(steps))
    expected = item.get("expectedTools")
    if expected is not None:
        metrics.update(tool_metrics(expected, data.get("tool_calls") or [], item.get("toolMatch") or "strict"))
    return metrics


def as_data(result: PipelineResult | dict[str, Any]) -> dict[str, Any]:
    """A result as plain data (what :func:`~pytest_crucible.evaluation.pipeline.result_data` returns); plain
    data already is."""
    return result if isinstance(result, dict) else result_data(result)


def score_item(item: GoldenItem, result: PipelineResult | dict[str, Any], *, k: int, latency_ms: float | None = None,
               relevance_level: int = 1, ledger_rows: Iterable[dict[str, Any]] = ()) -> ItemScore:
    """Score one item: retrieval metrics against its effective grades, concept, guardrail and agent metrics,
    strict-mode checks.

    ``result``: the pipeline's result, or its plain data (:func:`~pytest_crucible.evaluation.pipeline.result_data`,
    what a run scores: the score keeps its lists). ``ledger_rows`` are the item's human and llm judgments (see
    :mod:`pytest_crucible.qrels.grades`); the citations as run are the provenance judgments.
    """
    data = as_data(result)
    item_json = item.to_json()  # read once: the score, the grades, the citation and guardrail checks all use it
    score = _base(item, item_json)
    retrieved = ranking_of(data)  # with steps, the merged ranking: what is scored, stored and judged
    chunk_ids = [chunk["chunk_id"] for chunk in retrieved]
    score.answer = data["answer"]
    score.retrieved = retrieved
    score.citations = cited_chunk_ids(data["answer"], data["citations"], chunk_ids)
    score.confidence = data["confidence"]
    score.abstained = data["abstained"]
    score.blocked = blocked = data["blocked"]
    score.blocked_layer = data["blocked_by"] if blocked else None
    score.detected_concepts = data["detected_concepts"]
    score.latency_ms = latency_ms

    judgments = item_judgments(item_json, ledger_rows)
    score.metrics, ranking = score_ranking([(chunk_id, chunk["doc_id"]) for chunk_id, chunk in zip(chunk_ids, retrieved)],
                                           judgments, k, relevance_level=relevance_level)
    score.metrics.update(concept_metrics(item, data, k))
    score.pool = pool_sources(ranking[:k], judgments)
    score.metrics.update(guardrail_item_metrics(item_json, blocked))
    score.tool_calls = data.get("tool_calls") or []
    score.metrics.update(agent_metrics(item_json, data))
    score.guardrail_failure = guardrail_failure(item_json, blocked, score.blocked_layer)

    missing = missing_required_citations(item_json, retrieved, k)
    score.missing_citations = missing
    if missing:
        shown = ", ".join(chunk_ids[:5]) or "nothing"
        more = " ..." if len(chunk_ids) > 5 else ""
        score.failures.append(
            f"retrieval_miss: required citation(s) {', '.join(missing)} not retrieved in the top {k} "
            f"(K, ini crucible_k); retrieved: {shown}{more}"
        )
    return score


CONFLICT_HEDGES = ("sources differ", "sources disagree", "conflicting", "conflict", "depending on", "differs between",
                   "according to one", "other document", "both documents")


def _stale_chunk(chunk: dict[str, Any], today: str) -> bool:
    meta = chunk.get("metadata") or {}
    valid_to = meta.get("valid_to") or meta.get("validTo")
    return bool(meta.get("superseded_by") or meta.get("supersededBy")) or bool(valid_to and str(valid_to) < today)


def item_error_class(score: dict[str, Any], *, mode: str, pending: bool = False) -> tuple[str | None, str | None]:
    """The one decision of an item's error class (and its evidence), for the test and for Message Batches
    at session end alike: none while its answer layer is ``pending`` (judged in batches later), when its
    judge failed (the item is an error, not a wrong answer) or when a guardrail blocked the question (its
    outcome is the guardrail metrics'); else :func:`classify_score`."""
    if pending or score.get("judge_errors") or score.get("blocked"):
        return None, None
    return classify_score(score, mode=mode)


def classify_score(score: dict[str, Any], *, mode: str, today: str | None = None) -> tuple[str, str]:
    """(error class, evidence) of one scored item (plain data), by the rules of metrics/errors.py.

    Stale sources are cited chunks (else the chunks that support the answer) whose metadata
    says ``superseded_by`` or a ``valid_to`` date before ``today``; a conflict is surfaced when
    the cited chunks span two of the item's ``conflictingSources`` or the answer says so.
    """
    item = score["item"]
    missing = tuple(score.get("missing_citations") or ())
    if mode == "component":  # (before the imports below: a component run never loads the answer layer)
        if missing and item.get("answerable", True):
            return "retrieval_miss", f"required citation(s) {', '.join(missing)} not retrieved"
        return "correct", "retrieval found every required citation"
    from datetime import date

    from ..metrics.errors import ClassificationInputs, StaleSource, classify
    from .answers import chunks_without_text, unsatisfied_must_assertions

    today = today or date.today().isoformat()
    retrieved = score.get("retrieved") or []
    by_id = {chunk["chunk_id"]: chunk for chunk in retrieved}
    cited = [c for c in score.get("citations") or [] if c in by_id]
    relied = cited or list(score.get("supporting_chunk_ids") or [])
    conflicting = tuple(item.get("conflictingSources") or ())
    cited_docs = {by_id[c]["doc_id"] for c in cited}
    answer = (score.get("answer") or "").lower()
    stale = tuple(c for c in relied if c in by_id and _stale_chunk(by_id[c], today))
    grade = score.get("crag_grade")
    # The retrieved chunks that are the item's required evidence: a chunk cited by id, or any chunk of a cited document.
    required = [(c.get("chunkId"), c.get("docId")) for c in item.get("citations") or [] if c.get("mode", "required") == "required"]
    required_retrieved = tuple(chunk_id for chunk_id, chunk in by_id.items()
                               if any(chunk_id == want if want else doc == chunk.get("doc_id") for want, doc in required))
    inputs = ClassificationInputs(
        answerable=bool(item.get("answerable", True)),
        question_type=item.get("questionType") or "simple",
        dynamism=item.get("dynamism"),
        abstained=bool(score.get("abstained")),
        missing_required_citations=missing,
        unsupported_claims=tuple(score.get("unsupported_claims") or ()),
        cited_chunk_ids=tuple(score.get("citations") or ()),
        supporting_chunk_ids=tuple(score.get("supporting_chunk_ids") or ()),
        stale_cited=stale,
        conflicting_docs=conflicting,
        answer_mentions_conflict=len(cited_docs & set(conflicting)) >= 2 or any(h in answer for h in CONFLICT_HEDGES),
        unsatisfied_must=tuple(unsatisfied_must_assertions(score.get("assertions") or [])),
        crag_grade=grade,
        # What the evidence shows (metrics/errors.py builds it):
        answer=score.get("answer"),
        confidence=score.get("confidence"),
        confidence_threshold=_confidence_threshold(item),
        retrieved_chunk_ids=tuple(by_id),
        stale_sources=tuple(StaleSource(*_stale_source(by_id[c])) for c in stale),
        judge_reason=_correctness_verdict(score).get("reason") or None,
        judge_contradicts=tuple((_correctness_verdict(score).get("contradicts") or {}).values()),
        correctness_targets=_correctness_targets(item) if grade in ("incorrect", "acceptable") else (),
        context_has_text=not chunks_without_text(retrieved),
        required_chunk_ids=required_retrieved,
    )
    verdict = classify(inputs)
    return verdict.error_class, verdict.text


def _stale_source(chunk: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(chunk id, validTo, supersededBy) of a stale chunk, for the evidence."""
    meta = chunk.get("metadata") or {}
    valid_to = meta.get("valid_to") or meta.get("validTo")
    superseded = meta.get("superseded_by") or meta.get("supersededBy")
    return chunk["chunk_id"], str(valid_to) if valid_to else None, str(superseded) if superseded else None


def _confidence_threshold(item: dict[str, Any]) -> float | None:
    """The item's own confidence threshold (``metadata.confidenceThreshold``), when it has one."""
    value = (item.get("metadata") or {}).get("confidenceThreshold")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _correctness_verdict(score: dict[str, Any]) -> dict[str, Any]:
    return (score.get("verdicts") or {}).get("correctness") or {}


def _correctness_targets(item: dict[str, Any]) -> tuple[str, ...]:
    """What the judge grades the answer against, in its order: the must-assertions, else the
    reference's sentences (so "reference sentence 2" in its reason can be quoted)."""
    musts = tuple(a["text"] for a in item.get("assertions") or [] if a.get("kind", "must") == "must" and a["text"].strip())
    if musts:
        return musts
    reference = (item.get("reference") or "").strip()
    if not reference:
        return ()
    from ..judge.lexical import extract_claims

    return tuple(extract_claims(reference)) or (reference,)
