"""The answer layer: RAGAS metrics for many items at once, through the one judge engine.

Work is done in two rounds so that a batching judge can send each round as one
Message Batch: round 1 extracts claims, generates questions and grades each chunk's
usefulness; round 2 checks claims against the context. Inputs and outputs are plain
data, so the same function scores an item inside its test or, with batching, every
item of a run at the end of the session.

What is scored when (an abstention is never a NaN):
- ``contextPrecision`` and ``contextRecall`` judge the *retrieved context* against
  the reference, so they are scored for every item with a reference, abstained or not;
- ``faithfulness``, ``responseRelevancy`` and ``noiseSensitivity`` judge the *answer*,
  so an abstained (or empty) answer is left out of them; the abstention layer counts it;
- ``knowledgeRetained`` (a golden conversation's turn 2 or later with an answer) asks whether the answer
  contradicts what the user stated in the earlier turns' questions; a judge that does not answer the
  ``retention`` kind is not asked, and the metric is left out (the session notes it once);
- when chunks were retrieved but none has text, the metrics that read the context
  (:data:`CONTEXT_METRICS`) are left out for the item (never 0): there is nothing to
  check the claims against. The CRAG grade (against the reference) and the rest still count.

This module never imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judge.engine import JudgeEngine
from ..judge.types import (
    ClaimsRequest,
    CorrectnessRequest,
    EntailmentRequest,
    EntailmentVerdict,
    JudgeFailure,
    JudgeRequest,
    QuestionsRequest,
    QuestionsVerdict,
    RetentionRequest,
    UsefulnessRequest,
)
from ..metrics import answer as formulas
from ..metrics.crag import crag_score
from ..metrics.properties import names

GENERATED_QUESTIONS = 3

#: The answer metrics that read the retrieved chunks' text: skipped for an item whose chunks have none.
CONTEXT_METRICS = names(needs_context=True)  # faithfulness, contextPrecision, contextRecall, noiseSensitivity


def _without_text(texts: Sequence[str]) -> bool:
    return bool(texts) and not any(text and text.strip() for text in texts)


def chunks_without_text(retrieved: Sequence[dict[str, Any]]) -> bool:
    """True when chunks were retrieved (plain dicts, as stored) and none of them has text."""
    return _without_text([chunk.get("text") or "" for chunk in retrieved])


@dataclass(frozen=True)
class AnswerInputs:
    """What the answer layer reads of one item (plain data)."""

    item_id: str
    question: str
    answer: str | None
    abstained: bool
    contexts: tuple[str, ...]
    reference: str | None
    # (text, kind, weight, conceptId) of each must/should assertion, and what the pipeline detected.
    assertions: tuple[tuple[str, str, float, str | None], ...] = ()
    detected_concepts: frozenset[str] = frozenset()
    chunk_ids: tuple[str, ...] = ()  # parallel to contexts
    answerable: bool = True
    false_premise: bool = False
    # The rubric metrics that apply to this item (custom_metrics.Rubric), each one judge request.
    rubrics: tuple[Any, ...] = ()
    # A golden conversation's turn: the user's earlier messages (the earlier turns' questions, in order; the
    # same under live and replay history). Empty for turn 1 and for an item that is not a turn.
    earlier_questions: tuple[str, ...] = ()

    @property
    def has_answer(self) -> bool:
        return bool(self.answer and self.answer.strip()) and not self.abstained

    @property
    def reads_context(self) -> bool:
        """False when chunks were retrieved but none has text: the metrics that read the context
        (:data:`CONTEXT_METRICS`) are then left out, never scored as 0."""
        return not _without_text(self.contexts)

    @classmethod
    def from_score(cls, score: dict[str, Any], rubrics: Sequence[Any] = ()) -> AnswerInputs:
        """``rubrics``: the session's rubric metrics; those whose appliesTo selects the item are kept."""
        item = score["item"]
        return cls(
            item_id=score["item_id"],
            question=score["question"],
            answer=score.get("answer"),
            abstained=bool(score.get("abstained")),
            contexts=tuple(chunk.get("text") or "" for chunk in score.get("retrieved") or []),
            reference=item.get("reference"),
            assertions=tuple(
                (a["text"], a.get("kind", "must"), float(a.get("weight", 1.0)), a.get("conceptId"))
                for a in item.get("assertions") or []
            ),
            detected_concepts=frozenset(score.get("detected_concepts") or ()),
            chunk_ids=tuple(chunk.get("chunk_id") or "" for chunk in score.get("retrieved") or []),
            answerable=bool(item.get("answerable", True)),
            false_premise=item.get("questionType") == "false_premise",
            rubrics=tuple(rubric for rubric in rubrics if rubric.applies(item)),
            earlier_questions=earlier_questions(item),
        )

    @property
    def must_assertions(self) -> tuple[str, ...]:
        return tuple(text for text, kind, *_ in self.assertions if kind == "must")

    @property
    def gradable(self) -> bool:
        """CRAG needs something to grade against: a reference, must-assertions, or a trap to spot."""
        return bool(self.reference or self.must_assertions or not self.answerable or self.false_premise)


def earlier_questions(item: dict[str, Any]) -> tuple[str, ...]:
    """The user's earlier messages of a golden conversation's turn (``item["conversation"]["history"]``'s
    questions), or () for turn 1 and an item that is not a turn."""
    turn = item.get("conversation") or {}
    return tuple(str(earlier.get("question") or "") for earlier in turn.get("history") or [] if earlier.get("question"))


@dataclass
class AnswerScore:
    metrics: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # The verdicts behind the numbers, kept for the report (plain JSON).
    verdicts: dict[str, Any] = field(default_factory=dict)
    # One entry per golden assertion: text, kind, weight, conceptId, conceptDetected, supported, satisfied.
    assertions: list[dict[str, Any]] = field(default_factory=list)
    # CRAG grade (perfect/acceptable/missing/incorrect) or None when nothing can grade it.
    crag_grade: str | None = None
    # Answer claims no retrieved chunk supports, and the chunks that support at least one claim.
    unsupported_claims: list[str] = field(default_factory=list)
    supporting_chunk_ids: list[str] = field(default_factory=list)


class _Plan:
    """The requests of one item, and where their verdicts go."""

    def __init__(self, inputs: AnswerInputs):
        self.inputs = inputs
        self.score = AnswerScore()
        self.answer_claims: list[str] | None = None
        self.reference_claims: list[str] | None = None
        self.questions: QuestionsVerdict | None = None
        self.useful: list[bool] | None = None
        self.rubric_scores: dict[str, float] = {}
        self.retained: bool | None = None  # the retention verdict: None when not asked

    def fail(self, what: str, failure: JudgeFailure) -> None:
        self.score.errors.append(f"{what}: {failure.message}")


def _run_round(engine: JudgeEngine, wanted: list[tuple[_Plan, str, JudgeRequest]]) -> list[Any]:
    return engine.run([request for _, _, request in wanted]) if wanted else []


def score_answers(batch: Sequence[AnswerInputs], engine: JudgeEngine, embedder) -> list[AnswerScore]:
    """Score the answer layer of many items; one AnswerScore per input, in order."""
    plans = [_Plan(inputs) for inputs in batch]

    # Round 1: claims of the answer and of the reference, generated questions, chunk usefulness.
    round1: list[tuple[_Plan, str, JudgeRequest]] = []
    for plan in plans:
        inputs = plan.inputs
        if inputs.has_answer:
            round1.append((plan, "answer_claims", ClaimsRequest(question=inputs.question, text=inputs.answer or "")))
            round1.append((plan, "questions", QuestionsRequest(answer=inputs.answer or "", n=GENERATED_QUESTIONS)))
            if inputs.gradable:
                round1.append((plan, "correctness", CorrectnessRequest(
                    question=inputs.question, answer=inputs.answer or "", reference=inputs.reference,
                    assertions=inputs.must_assertions, answerable=inputs.answerable, false_premise=inputs.false_premise)))
            if inputs.earlier_questions and engine.answers_kind("retention"):
                round1.append((plan, "retention", RetentionRequest(
                    earlier=inputs.earlier_questions, question=inputs.question, answer=inputs.answer or "")))
        elif inputs.abstained:
            # An honest abstention needs no judge: it is right exactly when the corpus cannot answer.
            plan.score.crag_grade = "missing" if inputs.answerable else "perfect"
        # A rubric grades the answer's text, an abstention's too ("the refusal points to a human agent"):
        # with no text there is nothing to grade, and the rubric does not apply (None, never 0).
        if inputs.answer and inputs.answer.strip():
            for rubric in inputs.rubrics:
                round1.append((plan, "rubric:" + rubric.name, rubric.request(inputs.question, inputs.answer, inputs.reference)))
        if inputs.reference and inputs.reads_context:
            round1.append((plan, "reference_claims", ClaimsRequest(question=inputs.question, text=inputs.reference)))
            for chunk in inputs.contexts:
                round1.append((plan, "useful", UsefulnessRequest(question=inputs.question, reference=inputs.reference, chunk=chunk)))
    for (plan, slot, _), verdict in zip(round1, _run_round(engine, round1)):
        if isinstance(verdict, JudgeFailure):
            plan.fail(slot.replace("_", " ").replace("rubric:", "rubric "), verdict)
        elif slot.startswith("rubric:"):
            rubric = next(r for r in plan.inputs.rubrics if r.name == slot[len("rubric:"):])
            plan.rubric_scores[rubric.name] = rubric.normalise(verdict.score)
            plan.score.verdicts[slot] = {"score": verdict.score, "reason": verdict.reason}
        elif slot == "answer_claims":
            plan.answer_claims = list(verdict.claims)
        elif slot == "reference_claims":
            plan.reference_claims = list(verdict.claims)
        elif slot == "questions":
            plan.questions = verdict
        elif slot == "retention":
            plan.retained = not verdict.contradicted
            if verdict.contradicted:  # what `crucible show --item` quotes: the statements and why
                plan.score.verdicts["knowledgeRetained"] = {"contradicted": list(verdict.contradicted), "reason": verdict.reason}
        elif slot == "correctness":
            plan.score.crag_grade = verdict.grade
            plan.score.verdicts["correctness"] = {"grade": verdict.grade, "reason": verdict.reason}
            if verdict.contradicts:
                plan.score.verdicts["correctness"]["contradicts"] = {"source": verdict.contradicts_source,
                                                                     "text": verdict.contradicts}
        else:
            plan.useful = (plan.useful or []) + [bool(verdict.useful)]

    # Round 2: claims against the context (faithfulness, context recall), against the
    # reference, and against each chunk (noise sensitivity).
    round2: list[tuple[_Plan, str, JudgeRequest]] = []
    for plan in plans:
        inputs = plan.inputs
        contexts = inputs.contexts if inputs.reads_context else ()  # chunks without text: nothing to check against
        if plan.answer_claims and contexts:
            round2.append((plan, "faithfulness", EntailmentRequest(context=contexts, claims=tuple(plan.answer_claims))))
        if plan.reference_claims and contexts:
            round2.append((plan, "recall", EntailmentRequest(context=contexts, claims=tuple(plan.reference_claims))))
        if plan.answer_claims and plan.reference_claims and contexts:
            round2.append((plan, "correct", EntailmentRequest(context=(inputs.reference or "",), claims=tuple(plan.answer_claims))))
            both = tuple(plan.answer_claims) + tuple(plan.reference_claims)
            for chunk in contexts:
                round2.append((plan, "per_chunk", EntailmentRequest(context=(chunk,), claims=both)))
        if inputs.has_answer and inputs.assertions:
            # Does the answer state each assertion? (Concept anchoring is checked below.)
            texts = tuple(text for text, *_ in inputs.assertions)
            round2.append((plan, "assertions", EntailmentRequest(context=(inputs.answer or "",), claims=texts)))
    per_chunk: dict[int, list[EntailmentVerdict]] = {}
    correct: dict[int, list[bool]] = {}
    for (plan, slot, _), verdict in zip(round2, _run_round(engine, round2)):
        if isinstance(verdict, JudgeFailure):
            plan.fail(slot.replace("_", " "), verdict)
            continue
        if slot == "faithfulness":
            _put(plan, "faithfulness", formulas.faithfulness(verdict.supported))
            plan.score.unsupported_claims = [c for c, ok in zip(plan.answer_claims or [], verdict.supported) if not ok]
            plan.score.verdicts["faithfulness"] = {"claims": plan.answer_claims, "supported": verdict.supported, "reasons": verdict.reasons}
        elif slot == "recall":
            _put(plan, "contextRecall", formulas.context_recall(verdict.supported))
            plan.score.verdicts["contextRecall"] = {"referenceClaims": plan.reference_claims, "attributed": verdict.supported}
        elif slot == "correct":
            correct[id(plan)] = list(verdict.supported)
        elif slot == "assertions":
            plan.score.assertions = assertion_results(plan.inputs, verdict.supported)
        else:
            per_chunk.setdefault(id(plan), []).append(verdict)

    for plan in plans:
        if plan.score.errors:
            # Any failed request voids the item's judge-based metrics: reported, never half-scored.
            plan.score.metrics.clear()
            plan.score.crag_grade = None
            continue
        for name, value in plan.rubric_scores.items():
            _put(plan, name, value)
        if plan.score.crag_grade is not None:
            _put(plan, "truthfulness", crag_score(plan.score.crag_grade))
        _put(plan, "abstainRate", 1.0 if inputs_abstained(plan.inputs) else 0.0)
        if plan.retained is not None:
            _put(plan, "knowledgeRetained", 1.0 if plan.retained else 0.0)
        inputs = plan.inputs
        if plan.answer_claims and not inputs.contexts:
            _put(plan, "faithfulness", 0.0)  # claims with nothing retrieved to support them
        if plan.useful is not None:
            _put(plan, "contextPrecision", formulas.context_precision(plan.useful))
            plan.score.verdicts["contextPrecision"] = {"useful": plan.useful}
        if plan.questions is not None:
            vectors = embedder.embed([inputs.question, *plan.questions.questions])
            _put(plan, "responseRelevancy", formulas.response_relevancy(vectors[0], vectors[1:], plan.questions.noncommittal))
            plan.score.verdicts["responseRelevancy"] = {"questions": plan.questions.questions, "noncommittal": plan.questions.noncommittal,
                                                        "embedder": getattr(embedder, "name", type(embedder).__name__)}
        if plan.score.assertions:
            _put(plan, "assertionSatisfaction", assertion_satisfaction(plan.score.assertions))
        chunks = per_chunk.get(id(plan))
        if chunks is not None and id(plan) in correct and plan.answer_claims and plan.reference_claims is not None:
            n_answer = len(plan.answer_claims)
            supported = [verdict.supported[:n_answer] for verdict in chunks]
            plan.score.supporting_chunk_ids = [cid for cid, row in zip(inputs.chunk_ids, supported) if any(row)]
            relevant = [any(verdict.supported[n_answer:]) for verdict in chunks]
            _put(plan, "noiseSensitivity", formulas.noise_sensitivity(correct[id(plan)], supported, relevant, mode="relevant"))
    return [plan.score for plan in plans]


def assertion_results(inputs: AnswerInputs, supported: Sequence[bool]) -> list[dict[str, Any]]:
    """An assertion is satisfied when the answer states it AND, if it names a concept, the
    pipeline detected that concept: grounding is rewarded, a lucky paraphrase is not."""
    results = []
    for (text, kind, weight, concept), said in zip(inputs.assertions, supported):
        detected = None if concept is None else concept in inputs.detected_concepts
        results.append({
            "text": text, "kind": kind, "weight": weight, "conceptId": concept, "conceptDetected": detected,
            "supported": bool(said), "satisfied": bool(said) and detected is not False,
        })
    return results


def assertion_satisfaction(results: Sequence[dict[str, Any]]) -> float | None:
    """Weighted share of satisfied assertions (must and should alike, by their weights)."""
    total = sum(r["weight"] for r in results)
    return None if total <= 0 else sum(r["weight"] for r in results if r["satisfied"]) / total


def unsatisfied_must_assertions(results: Sequence[dict[str, Any]]) -> list[str]:
    """One reason per must-assertion not satisfied, naming the missing concept when that is why."""
    reasons = []
    for r in results:
        if r["kind"] != "must" or r["satisfied"]:
            continue
        if r["supported"] and r["conceptDetected"] is False:
            reasons.append(f"must-assertion {r['text']!r} is stated but its concept {r['conceptId']} was not "
                           "detected by the pipeline (the answer is not grounded in it)")
        else:
            missing = f" (concept {r['conceptId']} not detected either)" if r["conceptDetected"] is False else ""
            reasons.append(f"must-assertion {r['text']!r} is not stated by the answer{missing}")
    return reasons


def inputs_abstained(inputs: AnswerInputs) -> bool:
    return inputs.abstained or not (inputs.answer and inputs.answer.strip())


def _put(plan: _Plan, name: str, value: float | None) -> None:
    if value is not None:
        plan.score.metrics[name] = float(value)


# -- cost before spending ---------------------------------------------------------------------
PROMPT_OVERHEAD_TOKENS = 400  # instructions + JSON schema per request (measured on the crucible-v1 prompts, rounded up)
OUTPUT_TOKENS_PER_REQUEST = 150
DEFAULT_ANSWER_TOKENS = 80


@dataclass(frozen=True)
class CostEstimate:
    """``requests`` and the tokens and ``cost_usd`` of a cold run (nothing cached); ``cached_requests``: the
    requests the judge cache answers, ``uncached_cost_usd`` what the others cost (``evaluation.cost``)."""

    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cached_requests: int = 0
    uncached_cost_usd: float | None = None

    @property
    def to_spend(self) -> float | None:
        """What the run is expected to spend: the requests not in the cache (what --crucible-max-cost compares)."""
        return self.uncached_cost_usd if self.cached_requests else self.cost_usd

    def describe(self, model: str, batch: bool) -> str:
        cost = f"price unknown ({PRICE_HINT})" if self.cost_usd is None else f"${self.cost_usd:.2f}"
        if self.cached_requests and self.cost_usd is not None and self.uncached_cost_usd is not None:
            cost = f"${self.cost_usd:.2f} cold, ${self.uncached_cost_usd:.2f} after {self.cached_requests:,} cached"
        return (f"judge cost estimate: {self.requests} requests, ~{self.input_tokens:,} input + ~{self.output_tokens:,} output tokens, "
                f"{cost} with {model}" + (" (Message Batches, 50% off)" if batch else ""))


#: What to do when a judge model has no price (a self-hosted model, a model newer than the price table).
PRICE_HINT = "set crucible_judge_price_per_mtok"


def estimate_answer_layer_cost(items: Sequence[Any], *, k: int, token_budget: int, price: Callable[[int, int], float | None],
                               answers: bool = True, label_pool: bool = False, rubrics: Sequence[Any] = (),
                               retention: bool = True, overhead: int = PROMPT_OVERHEAD_TOKENS,
                               price_prefix: Callable[[int, int, int], float | None] | None = None) -> CostEstimate:
    """Requests and tokens the judge will spend on these golden items, before any answer exists.

    Retrieved chunks are assumed to fill the config's ``tokenBudget`` evenly over ``k``
    chunks, answers to be as long as the reference (or 80 tokens). The request plan is
    exactly :func:`score_answers`' (2k + 7 requests per item with a reference, 4 without,
    one more with assertions; the CRAG grade is counted even where an item turns out not
    gradable, so the estimate errs high; one more per rubric metric that applies to the item, and one
    more (``retention``) for a golden conversation's turn 2 or later when ``retention`` is true, i.e. the
    judge answers that kind);
    pool labelling adds at most k relevance requests. ``price(input_tokens, output_tokens)``: what the
    judge bills for them (None: unknown). ``overhead``: the stable prefix of every request (instructions, schema, a
    judge's few-shot examples); ``price_prefix(other_input, output, prefix_tokens)``, when given, prices the
    prefixes apart (a prompt cache's writes) instead of ``price``.
    """
    from ..judge.prices import estimate_tokens

    requests = input_tokens = 0
    chunk = max(1, token_budget // max(1, k))
    p = overhead
    for item in items:
        q = estimate_tokens(item.question)
        r = estimate_tokens(item.reference) if item.reference else 0
        a = r or DEFAULT_ANSWER_TOKENS
        tokens = n = 0
        if answers:
            tokens += (p + q + a) + (p + a) + (p + k * chunk + a) + (p + q + a + r)  # claims, questions, faithfulness, CRAG grade
            n += 4
            if item.reference:
                tokens += (p + q + r) + k * (p + q + r + chunk) + (p + k * chunk + r) + (p + r + a) + k * (p + chunk + a + r)
                n += 2 * k + 3
            if item.assertions:
                tokens += p + a + sum(estimate_tokens(x.text) for x in item.assertions)
                n += 1
            earlier = [turn.question for turn in item.conversation.history] if item.conversation is not None else []
            if retention and earlier:
                tokens += p + q + a + sum(estimate_tokens(text) for text in earlier)
                n += 1
            if rubrics:
                item_json = item.to_json()
                for rubric in rubrics:
                    if rubric.applies(item_json):
                        tokens += p + q + a + r + estimate_tokens(rubric.criteria + " ".join(rubric.steps))
                        n += 1
        if label_pool:
            tokens += k * (p + q + chunk)
            n += k
        requests += n
        input_tokens += tokens
    output_tokens = requests * OUTPUT_TOKENS_PER_REQUEST
    if price_prefix is not None:
        prefixes = requests * p
        return CostEstimate(requests, input_tokens, output_tokens, price_prefix(input_tokens - prefixes, output_tokens, prefixes))
    return CostEstimate(requests, input_tokens, output_tokens, price(input_tokens, output_tokens))
