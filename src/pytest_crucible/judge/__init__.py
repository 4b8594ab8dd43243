"""The judge engine: typed requests in, stamped verdicts out, one cache in front.

Judges: the offline heuristics (``lexical-v3``, the default; ``lexical-v2``, ``lexical-v1``), Claude
through the Anthropic SDK, any OpenAI-compatible model through the ``openai`` SDK, and a judge of your
own (docs/judges.md). What a judge of your own needs is importable from here: the request and verdict
types, the versioned prompt of a request (:func:`prompt_for`), the JSON schema of its verdict
(:func:`verdict_schema`), and the parser a model's JSON reply goes through (:func:`parse_verdict`).
"""

from .model_judge import InvalidVerdict, parse_verdict, prompt_for, verdict_schema
from .types import (
    VERDICT_TYPES,
    AnswerCheckRequest,
    AnswerCheckVerdict,
    ClaimsRequest,
    ClaimsVerdict,
    CorrectnessRequest,
    CorrectnessVerdict,
    EntailmentRequest,
    EntailmentVerdict,
    GenerateQuestionRequest,
    GenerateQuestionVerdict,
    JudgeFailure,
    JudgeRequest,
    QuestionsRequest,
    QuestionsVerdict,
    RelevanceRequest,
    RelevanceVerdict,
    RetentionRequest,
    RetentionVerdict,
    RubricRequest,
    RubricVerdict,
    Usage,
    UsefulnessRequest,
    UsefulnessVerdict,
    Verdict,
)

__all__ = [
    "VERDICT_TYPES",
    "AnswerCheckRequest",
    "AnswerCheckVerdict",
    "ClaimsRequest",
    "ClaimsVerdict",
    "CorrectnessRequest",
    "CorrectnessVerdict",
    "EntailmentRequest",
    "EntailmentVerdict",
    "GenerateQuestionRequest",
    "GenerateQuestionVerdict",
    "InvalidVerdict",
    "JudgeFailure",
    "JudgeRequest",
    "QuestionsRequest",
    "QuestionsVerdict",
    "RelevanceRequest",
    "RelevanceVerdict",
    "RetentionRequest",
    "RetentionVerdict",
    "RubricRequest",
    "RubricVerdict",
    "Usage",
    "UsefulnessRequest",
    "UsefulnessVerdict",
    "Verdict",
    "parse_verdict",
    "prompt_for",
    "verdict_schema",
]
