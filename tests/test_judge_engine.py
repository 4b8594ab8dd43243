"""The judge engine (cache, stamps, counters) and the answer layer's request plan, with a scripted judge."""

from __future__ import annotations

import pytest

from pytest_crucible.evaluation.answers import AnswerInputs, estimate_answer_layer_cost, score_answers
from pytest_crucible.judge.engine import Judge, JudgeEngine
from pytest_crucible.judge.types import (
    ClaimsVerdict,
    CorrectnessVerdict,
    EntailmentRequest,
    EntailmentVerdict,
    JudgeFailure,
    QuestionsVerdict,
    RelevanceRequest,
    RelevanceVerdict,
    UsefulnessVerdict,
)


class ScriptedJudge(Judge):
    """Answers by rule; records every request it was asked; fails on request kinds listed in ``fail``."""

    model = "scripted-1"
    prompt_version = "test-v1"
    label = "scripted test judge"

    def __init__(self, fail=()):
        self.asked = []
        self.fail = set(fail)

    def judge(self, requests):
        out = []
        for request in requests:
            self.asked.append(request)
            if request.kind in self.fail:
                out.append(JudgeFailure(kind=request.kind, message="HTTP 500 after 3 attempts"))
            elif request.kind == "claims":
                out.append(ClaimsVerdict(claims=[s.strip() for s in request.text.split(".") if s.strip()]))
            elif request.kind == "questions":
                out.append(QuestionsVerdict(questions=[f"q{i}" for i in range(request.n)], noncommittal=[False] * request.n))
            elif request.kind == "usefulness":
                out.append(UsefulnessVerdict(useful="window" in request.chunk))
            elif request.kind == "correctness":
                out.append(CorrectnessVerdict(grade="perfect" if request.reference and request.reference in request.answer else "incorrect"))
            elif request.kind == "entailment":
                text = " ".join(request.context).lower()
                out.append(EntailmentVerdict(supported=[claim.lower() in text for claim in request.claims]))
            else:
                out.append(RelevanceVerdict(grade=len(request.chunk) % 4))
        return out


class ConstantEmbedder:
    name = "constant"

    def embed(self, texts):
        import numpy as np

        return np.ones((len(texts), 4)) / 2.0


def test_cache_serves_repeats_and_stamps_verdicts() -> None:
    judge = ScriptedJudge()
    engine = JudgeEngine(judge)
    request = RelevanceRequest(question="return window?", chunk="abc")
    [first] = engine.run([request])
    assert (first.judge_model, first.prompt_version) == ("scripted-1", "test-v1")
    [again] = engine.run([RelevanceRequest(question="return window?", chunk="abc")])
    assert again == first and len(judge.asked) == 1
    assert engine.stats.as_dict() == {"requests": 2, "cache_hits": 1, "judged": 1, "failures": 0}
    [row] = engine.drain_cache_rows()
    assert row["kind"] == "relevance" and row["key"] == request.cache_key("scripted-1", "test-v1")
    # A cache built from stored rows serves the next session without asking the judge.
    fresh = JudgeEngine(ScriptedJudge())
    fresh.load_cache([row])
    assert fresh.run([request])[0].grade == first.grade and fresh.judge.asked == []


def test_failures_are_never_cached() -> None:
    engine = JudgeEngine(ScriptedJudge(fail={"entailment"}))
    request = EntailmentRequest(context=("a",), claims=("a",))
    assert isinstance(engine.run([request])[0], JudgeFailure)
    assert isinstance(engine.run([request])[0], JudgeFailure)
    assert engine.stats.failures == 2 and engine.stats.cache_hits == 0 and engine.drain_cache_rows() == []


@pytest.mark.parametrize("mode, asked_twice, rows", [("readwrite", 1, 1), ("read", 1, 0), ("off", 2, 0)])
def test_cache_modes(mode, asked_twice, rows) -> None:
    judge = ScriptedJudge()
    engine = JudgeEngine(judge, cache_mode=mode)
    for _ in range(2):
        engine.run([RelevanceRequest(question="q", chunk="c")])
    assert len(judge.asked) == asked_twice
    assert len(engine.drain_cache_rows()) == rows


def test_cache_key_depends_on_model_prompt_and_request() -> None:
    request = RelevanceRequest(question="q", chunk="c")
    keys = {request.cache_key("m", "v1"), request.cache_key("m", "v2"), request.cache_key("n", "v1"),
            RelevanceRequest(question="q", chunk="c2").cache_key("m", "v1")}
    assert len(keys) == 4
    assert request.cache_key("m", "v1") == RelevanceRequest(chunk="c", question="q").cache_key("m", "v1")


CONTEXTS = ("The return window is 30 days", "Bikes ship in 5 days", "Our window cleaning team is great")


def test_answer_layer_request_plan_and_metrics() -> None:
    judge = ScriptedJudge()
    inputs = AnswerInputs(item_id="q1", question="How long is the return window?", answer="The return window is 30 days. Shipping is free",
                          abstained=False, contexts=CONTEXTS, reference="The return window is 30 days")
    [score] = score_answers([inputs], JudgeEngine(judge), ConstantEmbedder())
    k = len(CONTEXTS)
    assert len(judge.asked) == 2 * k + 7  # as the cost estimate assumes
    assert score.errors == []
    assert score.metrics["faithfulness"] == 0.5           # 1 of 2 answer claims is in the context
    assert score.metrics["contextRecall"] == 1.0          # the reference claim is in the context
    assert score.metrics["contextPrecision"] == pytest.approx((1 / 1 + 2 / 3) / 2)  # useful at ranks 1 and 3
    assert score.metrics["responseRelevancy"] == pytest.approx(1.0)
    # "Shipping is free" is incorrect (not in the reference) but no chunk entails it: no noise.
    assert score.metrics["noiseSensitivity"] == 0.0
    assert score.verdicts["faithfulness"]["supported"] == [True, False]
    assert score.crag_grade == "perfect" and score.metrics["truthfulness"] == 1.0 and score.metrics["abstainRate"] == 0.0
    assert score.unsupported_claims == ["Shipping is free"]


def test_abstained_answer_is_scored_only_on_its_context() -> None:
    judge = ScriptedJudge()
    inputs = AnswerInputs(item_id="q1", question="q", answer="I don't know.", abstained=True, contexts=CONTEXTS,
                          reference="The return window is 30 days")
    [score] = score_answers([inputs], JudgeEngine(judge), ConstantEmbedder())
    assert set(score.metrics) == {"contextPrecision", "contextRecall", "truthfulness", "abstainRate"}
    assert score.crag_grade == "missing" and score.metrics["truthfulness"] == 0.0 and score.metrics["abstainRate"] == 1.0
    assert {request.kind for request in judge.asked} == {"claims", "usefulness", "entailment"}  # no judge call for the grade


def test_a_failed_request_voids_the_items_judge_metrics_and_only_that_item() -> None:
    judge = ScriptedJudge(fail={"questions"})
    good = AnswerInputs(item_id="a", question="q", answer=None, abstained=False, contexts=CONTEXTS, reference="The return window is 30 days")
    bad = AnswerInputs(item_id="b", question="q", answer="The return window is 30 days", abstained=False, contexts=CONTEXTS, reference=None)
    scored_good, scored_bad = score_answers([good, bad], JudgeEngine(judge), ConstantEmbedder())
    assert scored_bad.metrics == {} and scored_bad.errors == ["questions: HTTP 500 after 3 attempts"]
    assert scored_good.errors == [] and "contextRecall" in scored_good.metrics


def test_cost_estimate_counts_the_same_requests_as_the_plan() -> None:
    from pytest_crucible.golden_set.schema import GoldenItem

    items = [GoldenItem(id="a", question="q?", reference="r."), GoldenItem(id="b", question="q?")]
    estimate = estimate_answer_layer_cost(items, k=10, token_budget=3000, price=lambda tokens_in, tokens_out: None)
    assert estimate.requests == (2 * 10 + 7) + 4
    assert estimate.cost_usd is None  # no price for an unknown model: said, not guessed
    assert estimate.input_tokens > 10 * 300  # the context dominates


def test_identical_requests_in_one_call_are_sent_once() -> None:
    judge = ScriptedJudge()
    engine = JudgeEngine(judge, cache_mode="off")
    same = RelevanceRequest(question="How long is the warranty?", chunk="Two years.")
    other = RelevanceRequest(question="How long is the warranty?", chunk="Three years, parts only.")
    verdicts = engine.run([same, other, same, same])
    assert judge.asked == [same, other]  # each distinct request once, even with the cache off
    assert [v.grade for v in verdicts] == [verdicts[0].grade, verdicts[1].grade, verdicts[0].grade, verdicts[0].grade]
    assert verdicts[2] is not verdicts[0]  # copies: a caller may annotate one without touching the others
    stats = engine.stats.as_dict()
    assert (stats["requests"], stats["judged"], stats["cache_hits"], stats["failures"]) == (4, 2, 2, 0)
    failing = JudgeEngine(ScriptedJudge(fail={"relevance"}), cache_mode="off")
    results = failing.run([same, same])
    assert all(isinstance(r, JudgeFailure) for r in results) and failing.stats.failures == 2


# -- the one judge protocol (Judge): what the engine calls ---------------------------------------------------
class BatchJudge(ScriptedJudge):
    """Sends batches unless told ``now``; records how it was called."""

    batch = True

    def __init__(self):
        super().__init__()
        self.calls = []

    def judge(self, requests, *, now=False):
        self.calls.append(now)
        return super().judge(requests)


def test_a_batch_judge_is_told_now_when_the_caller_cannot_wait() -> None:
    judge = BatchJudge()
    engine = JudgeEngine(judge, cache_mode="off", judge_repeat=2)
    request = RelevanceRequest(question="How long is the warranty?", chunk="Two years.")
    engine.run([request], now=True)
    engine.run([request])
    assert judge.calls == [True, True, False, False]  # the repeat of --crucible-judge-repeat too


def test_a_judge_without_batches_is_called_without_now() -> None:
    """A Judge subclass whose judge() takes only the requests (a plugin's, written before ``now``) keeps working."""
    judge = ScriptedJudge()  # def judge(self, requests)
    request = RelevanceRequest(question="How long is the warranty?", chunk="Two years.")
    [verdict] = JudgeEngine(judge, cache_mode="off").run([request], now=True)
    assert isinstance(verdict, RelevanceVerdict) and verdict.judge_model == "scripted-1"


def test_every_built_in_judge_speaks_the_protocol() -> None:
    import inspect

    from pytest_crucible.judge.anthropic_judge import AnthropicJudge
    from pytest_crucible.judge.custom_judge import CustomJudge
    from pytest_crucible.judge.lexical import LexicalJudge
    from pytest_crucible.judge.lexical_v2 import LexicalJudgeV2
    from pytest_crucible.judge.lexical_v3 import LexicalJudgeV3
    from pytest_crucible.judge.model_judge import ModelJudge
    from pytest_crucible.judge.openai_judge import OpenAIJudge

    for cls in (LexicalJudge, LexicalJudgeV2, LexicalJudgeV3, ModelJudge, AnthropicJudge, OpenAIJudge, CustomJudge):
        assert issubclass(cls, Judge), cls
        now = inspect.signature(cls.judge).parameters.get("now")
        assert now is not None and now.kind is inspect.Parameter.KEYWORD_ONLY and now.default is False, cls
    for judge in (LexicalJudge(), LexicalJudgeV3()):
        assert judge.batch is False and judge.on_progress is None and judge.model == judge.prompt_version
        assert judge.judge([], now=True) == []
