"""Evaluate one golden item: the way from a pipeline's outcome to the item's verdict.

:func:`evaluate` scores retrieval (with pool labelling when asked), judges the answer layer,
classifies the result and applies the outcome rule; the plugin only turns the returned
:class:`ItemVerdict` into pass or fail. Where the judging happens is the session's route
(``route``): in the test, ahead of it in the prefetch worker (:func:`judge_ahead`), or for the
whole run in Message Batches at session end (:func:`judge_run_in_batch`). No pytest here.

Modules: ``pipeline`` (what a pipeline returns), ``concurrency`` (calling it, sync or async, ahead of
the tests), ``scoring`` (retrieval metrics, the error class), ``answers`` (the answer layer through
the judge engine, the cost estimate), ``pool`` (UMBRELA-style labelling of unjudged chunks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..golden_set.schema import GoldenItem
    from ..settings import Settings
    from ..store import Store
    from .answers import AnswerScore, CostEstimate
    from .concurrency import Outcome
    from .custom_metrics import Rubric
    from .route import AnswerRoute
    from .scoring import ItemScore
    from .thresholds import Threshold


@dataclass
class ItemVerdict:
    """What one item produced, and why it fails (if it does)."""

    score: ItemScore
    # The pipeline's own exception: re-raised by the plugin, so the user sees the pipeline's traceback.
    error: BaseException | None = None
    # Why the item fails: an invalid result, a judge that failed after retries, the strict outcome.
    failure: str | None = None
    # The failure explained the accepted result keys in full (the session does it once, then one line per item).
    explained_keys: bool = False
    # What the strict outcome rule says of the item, in every outcome mode (repeats: a flaky item is one whose
    # strict outcome differs across its repeats, whether or not this run fails items on it).
    strict_failure: str | None = None


def evaluate(golden: GoldenItem, outcome: Outcome, *, settings: Settings, ledger: Sequence[dict[str, Any]],
             engine: Any = None, embedder: Any = None, explain_keys: bool = True, rubrics: Sequence[Rubric] = (),
             calibration: dict[str, Any] | None = None, route: AnswerRoute | None = None) -> ItemVerdict:
    """Score one item from its pipeline outcome. ``route``: the session's (``evaluation.route``; None: judged
    now, or left pending with Message Batches); ``ledger``: the item's human and llm judgments;
    ``engine``: the judge engine (None when the run uses no judge); ``explain_keys``: an unknown key in
    a returned dict lists every accepted key (else a one-line reference to the first such failure);
    ``rubrics``: the rubric metrics the judge grades (none when it cannot); ``calibration``: the judge's
    newest `crucible judge calibrate` row (None: never calibrated), which a failure on a judged verdict
    names. The Python custom metrics (``settings.custom_metrics``) run on every item the pipeline answered.
    An outcome judged ahead (``outcome.ahead``, from :func:`judge_ahead`) is not judged again."""
    from .pipeline import PipelineResultError, result_data
    from .scoring import item_error_class, score_error

    route = route or _route(settings)
    latency = round(outcome.latency_ms, 3)
    if outcome.error is not None:
        from .concurrency import error_text
        from .conversations import EarlierTurnError

        if isinstance(outcome.error, EarlierTurnError):  # not called: stored errored with the reason, no traceback of ours
            return ItemVerdict(score_error(golden, str(outcome.error), latency), failure=f"golden item {golden.id}: {outcome.error}")
        return ItemVerdict(score_error(golden, error_text(outcome.error), latency), error=outcome.error)
    if outcome.ahead is not None:
        score = outcome.ahead
    else:
        try:
            data = result_data(outcome.value, explain_keys=explain_keys)
        except PipelineResultError as exc:
            return ItemVerdict(score_error(golden, exc.problem, latency), failure=f"golden item {golden.id}: {exc}",
                               explained_keys=explain_keys and bool(exc.unknown_keys))
        score = score_result(golden, data, latency, settings=settings, ledger=ledger, engine=engine, embedder=embedder,
                             rubrics=rubrics, route=route)
    if settings.custom_metrics:
        from .custom_metrics import read_only, run_python_metrics
        from .pipeline import coerce_result

        # The user's metric reads the result as a model (it validated above, or ahead: no error here).
        result = coerce_result(outcome.value)
        values, score.metric_errors = run_python_metrics(settings.custom_metrics, golden, result, read_only(settings.resolved))
        score.metrics.update(values)
    if engine is not None:
        score.cache_rows = engine.drain_cache_rows()
    score.error_class, score.error_evidence = item_error_class(score.to_plain(), mode=settings.mode,
                                                               pending=route.answers_pending)
    if score.judge_errors:
        # In every outcome mode: an item whose judging failed is an error, never a silent pass.
        return ItemVerdict(score, failure=f"golden item {golden.id}: judge failed after retries: " + "; ".join(score.judge_errors))
    if score.metric_errors:  # the user's metric code failed on this item: an error in every outcome mode
        return ItemVerdict(score, failure=f"golden item {golden.id}: " + "\n".join(score.metric_errors))
    judge = engine.judge.model if engine is not None else None
    strict = strict_failure(golden.id, score, settings.thresholds, judged_evidence(score, judge, calibration))
    return ItemVerdict(score, failure=strict if settings.strict else None, strict_failure=strict)


def _route(settings: Settings) -> AnswerRoute:
    """The route of a caller that names none: now, or pending with Message Batches (never ahead: only the
    session's prefetcher judges ahead)."""
    from .route import choose_route

    return choose_route(settings, overlaps=lambda: False)


def score_result(golden: GoldenItem, data: dict[str, Any], latency: float, *, settings: Settings,
                 ledger: Sequence[dict[str, Any]], engine: Any, embedder: Any, rubrics: Sequence[Rubric],
                 route: AnswerRoute | None = None) -> ItemScore:
    """The item's retrieval and answer layers (pool labelling and the judge included): the part of
    :func:`evaluate` that reads nothing but the item, its result (``data``: ``pipeline.result_data``) and the
    judge, so it may run ahead of the test."""
    from .scoring import score_item

    labelled: list[dict[str, Any]] = []
    label_errors: list[str] = []
    if settings.label_pool:
        from .pool import label_pool
        from .scoring import item_judgments

        labelled, label_errors = label_pool(golden, data, settings.k, item_judgments(golden, ledger), engine)
    score = score_item(golden, data, k=settings.k, latency_ms=latency, ledger_rows=[*ledger, *labelled])
    score.qrels_rows, score.judge_errors = labelled, label_errors
    # A blocked question has no answer to judge: its outcome is the guardrail metrics' business.
    if settings.judges_answers and not score.blocked:
        from ..metrics.crag import is_abstention
        from .answers import AnswerInputs, score_answers

        score.abstained = score.abstained or is_abstention(score.answer)
        if (route or _route(settings)).answers_in_test:  # else Message Batches judge it at session end
            [answer] = score_answers([AnswerInputs.from_score(score.to_plain(), rubrics)], engine, embedder)
            apply_answer_score(score, answer)
    return score


def judge_ahead(golden: GoldenItem, outcome: Outcome, *, settings: Settings, ledger: Sequence[dict[str, Any]],
                engine: Any, embedder: Any, rubrics: Sequence[Rubric], route: AnswerRoute | None = None) -> None:
    """Judge one item in a prefetch worker, ahead of its test (``outcome.ahead``), so that the judge's requests
    of many items wait on the provider together. Anything unusual (a pipeline error, a result that does not
    validate, an exception) is left to :func:`evaluate` in the test, which meets it as it always did."""
    from .pipeline import result_data

    if outcome.error is not None:
        return
    try:
        outcome.ahead = score_result(golden, result_data(outcome.value), round(outcome.latency_ms, 3), settings=settings,
                                     ledger=ledger, engine=engine, embedder=embedder, rubrics=rubrics, route=route)
    except Exception:
        outcome.ahead = None


# The error classes a judge's verdict alone decides (an unsupported claim, a CRAG grade).
JUDGED_CLASSES = ("hallucination", "incomplete")
_WHERE = re.compile(r"passage (\d+), sentences? (\d+)(?:-(\d+))?")


def judged_evidence(score: ItemScore, judge: str | None, calibration: dict[str, Any] | None) -> list[str]:
    """What a failure on a judged verdict adds: which judge decided it and how far it agrees with people
    (its calibration's kappa for the verdict's kind, or "never calibrated"), and each unsupported claim
    with the passage sentences it was checked against. Nothing when no judge decided the failure."""
    if judge is None or score.error_class not in JUDGED_CLASSES:
        return []
    from ..defaults import CALIBRATED_KAPPA
    from ..judge.lexical import split_sentences

    faithfulness = score.verdicts.get("faithfulness") or {}
    claims = [(claim, reason) for claim, ok, reason in zip(faithfulness.get("claims") or [], faithfulness.get("supported") or [],
                                                           faithfulness.get("reasons") or [""] * 99) if not ok]
    kind = "faithful" if claims and score.error_class == "hallucination" else "crag"
    if calibration is None:
        agreement = "never calibrated: crucible judge calibrate LABELS.jsonl measures how far it agrees with people"
    else:
        from ..labels.calibration import stored_kappa

        kappa, why = stored_kappa(calibration, kind)
        shown = f"not measurable ({why})" if why else "undefined" if kappa is None else f"{kappa:.2f}"
        bar = "" if kappa is not None and kappa >= CALIBRATED_KAPPA else f", below {CALIBRATED_KAPPA}: check the verdict yourself"
        agreement = f"{kind} agreement with people kappa {shown}{bar} (calibrated {str(calibration.get('created_at', ''))[:10]})"
    lines = [f"judged by {judge}, {agreement} (docs/judge-calibration.md)"]
    passages = [chunk.get("text") or "" for chunk in score.retrieved]
    for claim, reason in claims[:3]:
        quoted = ""
        where = _WHERE.search(reason or "")
        if where and int(where.group(1)) <= len(passages):
            sentences = split_sentences(passages[int(where.group(1)) - 1])
            first, last = int(where.group(2)), int(where.group(3) or where.group(2))
            text = " ".join(sentences[first - 1:last])
            quoted = f" against {where.group(0)}: {text!r}" if text else ""
        lines.append(f"  claim {claim!r} checked{quoted}: {reason or 'not supported'}")
    return lines


def apply_answer_score(score: ItemScore, answer: AnswerScore) -> None:
    """Put the answer layer's result into the item's score (the one place the two shapes meet)."""
    score.metrics.update(answer.metrics)
    score.judge_errors.extend(answer.errors)
    score.verdicts = answer.verdicts
    score.assertions = answer.assertions
    score.crag_grade = answer.crag_grade
    score.unsupported_claims = answer.unsupported_claims
    score.supporting_chunk_ids = answer.supporting_chunk_ids


def strict_failure(item_id: str, score: ItemScore, thresholds: Sequence[Threshold] = (),
                   judged: Sequence[str] = ()) -> str | None:
    """Strict outcome: why a non-correct item fails, headline first (None: it passes). ``thresholds``:
    crucible_thresholds, each crossed one a reason (the headline when nothing else fails); ``judged``:
    the judge's lines (:func:`judged_evidence`), shown after the headline of a judged failure."""
    from .thresholds import threshold_failures

    details = list(score.failures)
    if score.assertions:  # (only then: a component run never loads the answer layer)
        from .answers import unsatisfied_must_assertions

        details += unsatisfied_must_assertions(score.assertions)
    if score.guardrail_failure:  # the guardrail outcome is judged on its own, whatever the answer layer says
        headline = [score.guardrail_failure]
    elif score.error_class is None:  # answer classes arrive at session end (batches): judge retrieval now
        headline = details[:1]
    elif score.error_class != "correct":
        headline = [f"{score.error_class}: {score.error_evidence}"]
        details += list(judged)
    else:
        headline = []
    crossed = threshold_failures(thresholds, score.metrics)
    if not headline and crossed:
        headline, crossed = crossed[:1], crossed[1:]
    details += crossed
    if not headline:
        return None
    # The evidence (metrics/errors.py) already quotes what it names: a reason it quotes is not repeated.
    return f"golden item {item_id}: " + "\n".join(headline + [detail for detail in details if detail not in headline[0]])


def judge_run_in_batch(store: Store, run_id: str, engine: Any, embedder: Any, settings: Settings,
                       on_start: Callable[[int], None] | None = None, rubrics: Sequence[Rubric] = ()) -> list[str]:
    """Message Batches: judge every recorded item of the run at once, at session end, and store the
    answer layer (``rubrics`` included) and the error classes. ``on_start(n)``: told how many items go to
    the judge. Returns one line per item whose judging failed."""
    from .answers import AnswerInputs, score_answers
    from .scoring import item_error_class, missing_required_citations

    items = {item["id"]: item for item in store.golden_items(run_id)}
    rows = [{**row, "item": items[row["item_id"]]} for row in store.results(run_id, decoded=True)
            if not row.get("error") and not row.get("blocked")]
    if on_start is not None:
        on_start(len(rows))
    results = score_answers([AnswerInputs.from_score(row, rubrics) for row in rows], engine, embedder)
    errors: list[str] = []
    for row, result in zip(rows, results):
        row.update(assertions=result.assertions, crag_grade=result.crag_grade, unsupported_claims=result.unsupported_claims,
                   supporting_chunk_ids=result.supporting_chunk_ids, verdicts=result.verdicts,
                   missing_citations=missing_required_citations(row["item"], row["retrieved"], settings.k))
        error_class, evidence = item_error_class({**row, "judge_errors": result.errors}, mode=settings.mode)
        store.add_answer_scores(run_id, row["item_id"], result.metrics, result.errors, result.verdicts, result.assertions,
                                error_class=error_class, error_evidence=evidence, crag_grade=result.crag_grade)
        errors.extend(f"golden item {row['item_id']}: judge failed: {error}" for error in result.errors)
    store.add_cache_rows(engine.drain_cache_rows())
    return errors


def estimate_cost(golden: Sequence[GoldenItem], settings: Settings, judge: Any, rubrics: Sequence[Rubric] = (),
                  engine: Any = None) -> CostEstimate:
    """What a paid judge will cost on these items (``rubrics``: the rubric metrics it grades), before any is run.
    Repeats multiply it: each repeat's answer is judged, and each request is judged ``judge_repeat`` times.
    ``engine``: the session's judge engine, its cache loaded: what the cache answers is taken off the cold
    figure (``evaluation.cost``; both are kept)."""
    from dataclasses import replace

    from ..judge.prices import cache_min_tokens, estimate_tokens
    from .answers import PROMPT_OVERHEAD_TOKENS, estimate_answer_layer_cost

    # A few-shot alignment's examples lengthen the prefix (the longest kind's, on every request: high-side); where
    # the API bills prompt-cache writes, a prefix that may be cached is priced as a write, and no read is counted.
    overhead = PROMPT_OVERHEAD_TOKENS + max((estimate_tokens(text) for text in (getattr(judge, "examples", None) or {}).values()),
                                            default=0)
    writes = bool(getattr(judge, "cache_writes_billed", False) and getattr(judge, "prompt_cache", False)
                  and overhead >= cache_min_tokens(judge.price_model()))

    def price(tokens_in: int, tokens_out: int, prefix: int) -> float | None:
        if writes:
            return judge.cost(tokens_in, tokens_out, batch=settings.judge_batch, requests=None, cache_write_tokens=prefix)
        return judge.cost(tokens_in + prefix, tokens_out, batch=settings.judge_batch, requests=None)

    def cold(items: Sequence[GoldenItem]) -> CostEstimate:
        estimate = estimate_answer_layer_cost(items, k=settings.retrieval_limit, token_budget=int(settings.resolved["retrieval"]["tokenBudget"]),
                                              price=lambda tokens_in, tokens_out: price(tokens_in, tokens_out, 0),
                                              price_prefix=price, overhead=overhead,
                                              answers=settings.judges_answers,
                                              label_pool=settings.label_pool, rubrics=rubrics,
                                              retention=bool(getattr(judge, "judges_retention", False)))
        times = settings.repeat * settings.judge_repeat
        if times == 1:
            return estimate
        return replace(estimate, requests=estimate.requests * times, input_tokens=estimate.input_tokens * times,
                       output_tokens=estimate.output_tokens * times,
                       cost_usd=None if estimate.cost_usd is None else estimate.cost_usd * times)

    if engine is None:
        return cold(golden)
    from .cost import after_cache

    return after_cache(cold(golden), golden, settings, engine, cold, rubrics)


def cost_refusal(estimate: CostEstimate, settings: Settings) -> str | None:
    """Why the run must not start (--crucible-max-cost): what it will spend, the requests not in the judge cache; or None."""
    spend = estimate.to_spend
    if settings.max_cost is None or (spend is not None and spend <= settings.max_cost):
        return None
    from .answers import PRICE_HINT

    if spend is None:
        return (f"--crucible-max-cost={settings.max_cost}: the judge model has no price, so the run's cost is unknown; "
                f"the run was not started\nHINT: {PRICE_HINT} (USD per million input and output tokens, e.g. 0.40,1.60; "
                "0 for a self-hosted model)")
    cached = f" (${estimate.cost_usd:.2f} cold, {estimate.cached_requests:,} requests cached)" if estimate.cached_requests else ""
    return (f"--crucible-max-cost={settings.max_cost}: the estimated judge cost ${spend:.2f}{cached} exceeds it; the run "
            "was not started\nHINT: select fewer items (-k, a marker filter), use --crucible-judge-batch (50% off), "
            "--crucible-mode=component (no judge), or raise the limit")

