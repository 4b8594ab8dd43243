"""Typed judge requests and verdicts: the one vocabulary every judge speaks.

A request is a frozen pydantic model with a ``kind``; its verdict type is fixed by
the kind. Verdicts are what a judge returns, validated (for a model judge, the
structured JSON output is parsed into the verdict model, so a malformed answer is
an error, not a silent default). Every verdict is stamped with the judge model and
prompt version that produced it. What a judge is asked to do with them, and what it
says about itself, is the ``Judge`` protocol (:class:`pytest_crucible.judge.engine.Judge`).

This module never imports pytest.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class JudgeRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ClassVar[str]

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def cache_key(self, judge_model: str, prompt_version: str) -> str:
        """sha256 of (judge model, prompt version, request kind, canonical request)."""
        canonical = json.dumps(
            [judge_model, prompt_version, self.kind, self.payload()], sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Stamped by the engine after the judge answered (not part of what a model is asked to write).
    judge_model: str = ""
    prompt_version: str = ""


# -- the request kinds ------------------------------------------------------------------------
class ClaimsRequest(JudgeRequest):
    """Break a text (an answer or a reference) into standalone factual claims."""

    kind: ClassVar[str] = "claims"
    question: str
    text: str


class ClaimsVerdict(Verdict):
    claims: list[str]


class EntailmentRequest(JudgeRequest):
    """For each claim: can it be inferred from the context passages alone?"""

    kind: ClassVar[str] = "entailment"
    context: tuple[str, ...]
    claims: tuple[str, ...]


class EntailmentVerdict(Verdict):
    supported: list[bool]  # one per claim, in order
    reasons: list[str] = Field(default_factory=list)


class QuestionsRequest(JudgeRequest):
    """Questions the answer would answer, and whether the answer is noncommittal."""

    kind: ClassVar[str] = "questions"
    answer: str
    n: int = 3


class QuestionsVerdict(Verdict):
    questions: list[str]
    noncommittal: list[bool]  # one per question (ragas asks for each generation)


class UsefulnessRequest(JudgeRequest):
    """Was this retrieved chunk useful for arriving at the reference (or the answer)?"""

    kind: ClassVar[str] = "usefulness"
    question: str
    reference: str
    chunk: str


class UsefulnessVerdict(Verdict):
    useful: bool
    reason: str = ""


class RelevanceRequest(JudgeRequest):
    """Graded relevance of a chunk to a question (0 unrelated .. 3 dedicated, exact answer)."""

    kind: ClassVar[str] = "relevance"
    question: str
    chunk: str


class RelevanceVerdict(Verdict):
    grade: int = Field(ge=0, le=3)
    reason: str = ""


class CorrectnessRequest(JudgeRequest):
    """CRAG-style grade of an answer against the reference and must-assertions."""

    kind: ClassVar[str] = "correctness"
    question: str
    answer: str
    reference: str | None = None
    assertions: tuple[str, ...] = ()
    answerable: bool = True
    false_premise: bool = False


class CorrectnessVerdict(Verdict):
    grade: Literal["perfect", "acceptable", "missing", "incorrect"]
    reason: str = ""
    # The target a contradiction decided the grade on, for the failure evidence to quote:
    # its text and what it is ("assertion" or "reference sentence"); empty otherwise.
    contradicts: str = ""
    contradicts_source: str = ""


class RubricRequest(JudgeRequest):
    """Grade an answer against one user-written rubric (a rubric metric, docs/custom-metrics.md).

    The rubric's own text (name, criteria, steps, scale) is part of the request, so the cache is
    keyed by it: an edited rubric is judged again. ``pass_fail``: the score is 1 (meets the
    criteria) or 0; otherwise an integer from ``scale_min`` to ``scale_max``."""

    kind: ClassVar[str] = "rubric"
    name: str
    criteria: str
    steps: tuple[str, ...] = ()
    pass_fail: bool = True
    scale_min: int = 0
    scale_max: int = 1
    question: str
    answer: str
    reference: str | None = None


class RubricVerdict(Verdict):
    score: int  # on the request's scale (pass_fail: 1 pass, 0 fail); checked against it when parsed
    reason: str = ""


class RetentionRequest(JudgeRequest):
    """Knowledge retention in a golden conversation: does this turn's answer contradict something the user
    stated earlier in the conversation?

    ``earlier``: the user's own earlier messages, in order (the earlier turns' questions: the same whichever
    history the pipeline was called with, live or replay, so the request and its cache key are too)."""

    kind: ClassVar[str] = "retention"
    earlier: tuple[str, ...]
    question: str
    answer: str


class RetentionVerdict(Verdict):
    # The earlier user statements the answer contradicts, quoted (empty: it contradicts none).
    contradicted: list[str]
    reason: str = ""


# -- golden set generation (`crucible golden generate`, golden_set/generate.py) ---------------------
#: What a generated question asks for; "unanswerable" is near the corpus but answered by none of it.
GenerateQuestionType = Literal["simple", "multi_hop", "comparison", "false_premise", "unanswerable"]


class GenerateQuestionRequest(JudgeRequest):
    """Write one golden item (question, reference, must-assertions) from source passages.

    ``passages``/``passage_ids``: the source chunk(s) (two for multi_hop and comparison). For an
    unanswerable question, ``topics`` lists what the corpus covers (document titles) and the passage
    is only the neighbourhood: the question must sit near it but be answered by nothing in the corpus.
    ``variant`` > 0 asks for a different question from passages already used for this type."""

    kind: ClassVar[str] = "generate"
    question_type: GenerateQuestionType
    passages: tuple[str, ...]
    passage_ids: tuple[str, ...]
    topics: tuple[str, ...] = ()
    variant: int = 0


class GenerateQuestionVerdict(Verdict):
    question: str
    reference: str
    assertions: list[str]
    answerable: bool
    altered_fact: str = ""  # false_premise: the fact the question's premise gets wrong; else empty


class AnswerCheckRequest(JudgeRequest):
    """Answer a question from the given passages only (the generator's round-trip filter)."""

    kind: ClassVar[str] = "answer_check"
    question: str
    passages: tuple[str, ...]


class AnswerCheckVerdict(Verdict):
    found: bool
    answer: str  # the answer the passages give; "not found" when found is false


VERDICT_TYPES: dict[str, type[Verdict]] = {
    "claims": ClaimsVerdict,
    "entailment": EntailmentVerdict,
    "questions": QuestionsVerdict,
    "usefulness": UsefulnessVerdict,
    "relevance": RelevanceVerdict,
    "correctness": CorrectnessVerdict,
    "rubric": RubricVerdict,
    "retention": RetentionVerdict,
    "generate": GenerateQuestionVerdict,
    "answer_check": AnswerCheckVerdict,
}
REQUEST_TYPES: dict[str, type[JudgeRequest]] = {
    cls.kind: cls
    for cls in (ClaimsRequest, EntailmentRequest, QuestionsRequest, UsefulnessRequest, RelevanceRequest, CorrectnessRequest,
                RubricRequest, RetentionRequest, GenerateQuestionRequest, AnswerCheckRequest)
}
# The generator's kinds (their own prompt version, generate-v1): only `crucible golden generate` sends them.
GENERATION_REQUEST_TYPES: dict[str, type[JudgeRequest]] = {
    kind: REQUEST_TYPES[kind] for kind in ("generate", "answer_check")
}


class JudgeFailure(BaseModel):
    """A request that could not be judged (after retries). Never cached, never a silent default."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    message: str


class Usage(BaseModel):
    """Tokens a judge spent; cost is computed from the price table."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "requests"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost_usd += other.cost_usd
