"""The HTTP API's response shapes, as pydantic models (they make the OpenAPI document).

The documents themselves come from the core functions the CLI prints (``run_metrics_json``,
``Comparison.to_json``, ``promote``); these models describe and check them. Models stay
open (``extra="allow"``) so a metric or field the core adds later passes through instead
of being dropped, and responses leave out what the core left out (``exclude_unset``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..metrics import METRIC_FAMILIES


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FieldProblem(BaseModel):
    location: str = Field(description="body, query, path or header")
    field: str = Field(description="the field as written in the request, e.g. citations[0].mode")
    message: str


class ErrorBody(BaseModel):
    """Every error answer: a machine code, one line for people, and a hint."""

    error: str = Field(description="unauthorized, forbidden, not_found, request_timeout, conflict, too_large, invalid_request, "
                                   "too_many_requests, busy, unavailable, internal")
    message: str
    hint: str | None = None
    fields: list[FieldProblem] | None = Field(default=None, description="422 only: each invalid field")


class JudgeInfo(_Open):
    model: str
    promptVersion: str | None = None


class CustomMetricInfo(_Open):
    name: str
    kind: str = Field(description="python (@crucible.metric) or rubric (model-judged)")
    better: str | None = Field(default=None, description="higher, lower, or null: reported, never gated")
    origin: str | None = Field(default=None, description="where it is defined: file:line (function), or the rubric's file:line")
    fingerprint: str | None = Field(default=None, description="sha256 of the function's code or of the rubric's text")
    judgeModel: str | None = None
    promptVersion: str | None = None


# Extra run-level numbers the metrics document adds to a family beside its per-item means.
_FAMILY_EXTRAS = {"abstention": ("eAurc", "coverageAtRisk10")}


def _family_model(family: str, names: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = dict.fromkeys((*names, *_FAMILY_EXTRAS.get(family, ())), (float | None, None))
    return create_model(f"{family[:1].upper()}{family[1:]}Metrics", __base__=_Open, **fields)


# One model per metric family, built from the same table the core uses, so a new metric
# shows up in the OpenAPI document (and the committed copy's test asks for a refresh).
_FAMILY_MODELS = {family: _family_model(family, names) for family, names in METRIC_FAMILIES.items()}

# The fields in the document's order (the families between n and errorClasses), as one mapping: create_model's
# signature cannot type a mix of named fields and an unpacked dict.
_RUN_METRICS_FIELDS: dict[str, Any] = {
    "runId": (str, ...),
    "configHash": (str, ...),
    "n": (int, Field(description="items in the run")),
    **{family: (model | None, None) for family, model in _FAMILY_MODELS.items()},
    "errorClasses": (dict[str, int] | None, Field(default=None, description="error class -> results")),
    "other": (dict[str, float] | None, Field(default=None, description="metrics outside the families")),
    "custom": (dict[str, float] | None, Field(default=None, description="the run's custom metrics (Python and rubric): name -> mean")),
    "customMetrics": (list[CustomMetricInfo] | None, Field(default=None, description="what the run recorded of its custom metrics")),
    "judge": (JudgeInfo | None, Field(default=None, description="the judge model and prompt version behind judge-based metrics")),
    "byFacet": (dict[str, dict[str, dict[str, int | float]]] | None,
                Field(default=None, description="facet -> value -> {n, metric: mean}")),
}
RunMetrics = create_model(
    "RunMetrics",
    __base__=_Open,
    __doc__="Retrieval, RAGAS and abstention metrics of one run, overall and by question facet. "
            "A family the run did not compute is left out, never zero-filled.",
    **_RUN_METRICS_FIELDS,
)


class MetricDelta(_Open):
    a: float | None = None
    b: float | None = None
    delta: float | None = None
    ci: list[float] | None = Field(default=None, description="95% BCa bootstrap interval of the delta")
    p: float | None = Field(default=None, description="paired permutation p-value")
    significant: bool = Field(description="both gates: the CI excludes 0 and p < 0.05")


class MetricPower(_Open):
    n: int
    dropped: int
    mde: float | None = None
    requiredN: int | None = None


class ConfigChange(_Open):
    a: Any = None
    b: Any = None


class GateVerdict(_Open):
    """The gate's verdict on the pair: the same one the plugin and `crucible compare` give."""

    verdict: str = Field(description="passed, failed or refused")
    exitCode: int = Field(description="0 passed, 1 failed (a significant regression), 3 refused")
    failures: list[str]
    refusal: str | None = None
    warnings: list[str]
    gated: list[str] | None = None
    baseline: str | None = None


class ComparisonDocument(_Open):
    """Paired comparison of two runs over their shared golden items, behind two seeded gates."""

    a: str
    b: str
    pairedItems: int
    seed: int
    metrics: dict[str, MetricDelta]
    verdicts: dict[str, str] | None = None
    power: dict[str, MetricPower] | None = None
    multiple: str | None = None
    configChanges: dict[str, ConfigChange] | None = None
    warnings: list[str] | None = None
    gate: GateVerdict | None = None


class RunSummary(_Open):
    id: str
    workspace: str
    status: str
    startedAt: str
    finishedAt: str | None = None
    mode: str
    configHash: str
    n: int
    labels: dict[str, Any]
    judge: JudgeInfo | None = None
    gitCommit: str | None = None


class RunList(_Open):
    runs: list[RunSummary]


class PromotedAssertion(_Open):
    text: str
    kind: str
    weight: int | float


class PromotedCitation(_Open):
    docId: str
    chunkId: str | None = None
    mode: str


class PromotedItem(_Open):
    id: str
    status: str
    question: str
    assertions: list[PromotedAssertion]
    citations: list[PromotedCitation]
    tags: list[str]


class FeedbackRow(_Open):
    id: str
    runId: str
    resultId: str | None = None
    errorClass: str
    correctedBy: str | None = Field(default=None, description="the reviewer the caller names (a claim; key:<id> when "
                                                                 "left out), NFKC-normalised and trimmed")
    promotedBy: str | None = Field(default=None, description="the API key that sent the promote, as key:<id>: who "
                                                                "really wrote it")
    note: str


class PromoteResponse(_Open):
    """The draft golden item and the eval_feedback row, written in one transaction."""

    item: PromotedItem
    feedback: FeedbackRow
