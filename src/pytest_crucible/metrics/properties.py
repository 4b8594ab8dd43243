"""What each metric is, written once: its family, its better direction, its range, whether a judge decides
it, whether it waits for the answer layer. Every list of metric names elsewhere (the families of the
metrics document, the lower-is-better set, the judged metrics, the guardrail and context metrics, the
ranges PPI++ clips to) is read from :data:`BUILTIN`; a custom metric joins through :func:`properties_of`
with the direction its run recorded."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"
# The accepted values of a metric's better direction: None means a change is reported, never gated.
BETTER = (HIGHER, LOWER, None)
CUSTOM = "custom"


@dataclass(frozen=True)
class MetricProperties:
    """One metric. ``family``: the metrics document's group (None: reported under "other", or a run-level
    number outside every group); ``better``: "higher", "lower" or None; ``low``/``high``: the values it
    can take; ``label_kind``: the human label kind (``crucible judge calibrate``) that measures the judge
    on it; ``answer_layer``: its value comes from judging the answer (Message Batches: after the tests);
    ``needs_context``: it reads the retrieved chunks' text; ``per_item``: False for a run-level number;
    ``gated_by_default``: False for a metric the gate judges only when named (``--crucible-gate``), such as a
    count of the work a system did."""

    name: str
    family: str | None
    better: str | None = HIGHER
    low: float = 0.0
    high: float = 1.0
    judged: bool = False
    label_kind: str | None = None
    answer_layer: bool = False
    needs_context: bool = False
    per_item: bool = True
    gated_by_default: bool = True

    @property
    def range(self) -> tuple[float, float]:
        return self.low, self.high


def _judged(name: str, family: str | None, *, better: str | None = HIGHER, low: float = 0.0, high: float = 1.0,
            label_kind: str | None = None, needs_context: bool = False, per_item: bool = True) -> MetricProperties:
    """A metric a judge decides: it waits for the answer layer."""
    return MetricProperties(name, family, better=better, low=low, high=high, judged=True, label_kind=label_kind,
                            answer_layer=True, needs_context=needs_context, per_item=per_item)


# In the spec's order (families as its metrics JSON lists them, then the metrics outside them): the order
# every view lists metrics in.
BUILTIN: tuple[MetricProperties, ...] = (
    MetricProperties("recallAtK", "retrieval"),
    MetricProperties("precisionAtK", "retrieval"),
    MetricProperties("ndcgAt10", "retrieval"),
    MetricProperties("mrr", "retrieval"),
    MetricProperties("hitAtK", "retrieval"),
    _judged("faithfulness", "ragas", label_kind="faithful", needs_context=True),
    _judged("responseRelevancy", "ragas"),
    _judged("contextPrecision", "ragas", needs_context=True),
    _judged("contextRecall", "ragas", needs_context=True),
    _judged("noiseSensitivity", "ragas", better=LOWER, needs_context=True),
    _judged("truthfulness", "abstention", low=-1.0, label_kind="crag"),
    # Abstaining more is neither better nor worse by itself: a change is reported, never gated.
    MetricProperties("abstainRate", "abstention", better=None, answer_layer=True),
    _judged("aurc", "abstention", better=LOWER, label_kind="crag"),
    MetricProperties("attackSuccessRate", "guardrails", better=LOWER),
    MetricProperties("falsePositiveRate", "guardrails", better=LOWER),
    # One value per golden conversation, on its last turn, from its turns' CRAG grades (evaluation/conversations.py):
    # every turn correct (1) or not (0), and the number of the first turn that is not (turns + 1 when none fails).
    _judged("conversationSuccess", "conversation"),
    _judged("turnsToFirstFailure", "conversation", low=1.0, high=float("inf")),
    # Knowledge retention (the judge's retention request): per turn from turn 2, 1 when the answer contradicts
    # nothing the user stated in the earlier turns; per conversation, on its last turn, the share of its judged
    # turns that did.
    _judged("knowledgeRetained", "conversation"),
    _judged("knowledgeRetention", "conversation"),
    # An agentic system's trajectory (metrics/tools.py): its tool calls against the item's expectedTools, and
    # the counts of its work (fewer is cheaper, reported, and gated only when named).
    MetricProperties("toolCallRecall", "agent"),
    MetricProperties("toolCallPrecision", "agent"),
    MetricProperties("trajectoryMatch", "agent"),
    MetricProperties("toolCalls", "agent", better=LOWER, high=math.inf, gated_by_default=False),
    MetricProperties("retrievalSteps", "agent", better=LOWER, high=math.inf, gated_by_default=False),
    MetricProperties("conceptRecall", None),
    MetricProperties("nearMissRate", None, better=LOWER),
    MetricProperties("assertionSatisfaction", None, answer_layer=True),
    _judged("eAurc", None, better=LOWER, label_kind="crag", per_item=False),
)
REGISTRY: dict[str, MetricProperties] = {m.name: m for m in BUILTIN}


def builtin(name: str) -> MetricProperties | None:
    """The built-in metric of that name (None: a custom metric or an unknown name)."""
    return REGISTRY.get(name)


def properties_of(name: str, custom: Mapping[str, str | None] | None = None) -> MetricProperties:
    """A built-in metric, or a custom one as its run recorded it (``custom``: name -> better, see
    ``custom_metrics.directions``; it wins over a built-in of the same name, as a run's definitions do).
    An unknown name is higher-is-better, as the comparison always read one."""
    if custom and name in custom:
        return MetricProperties(name, CUSTOM, better=custom[name])
    return REGISTRY.get(name) or MetricProperties(name, None)


def names(**wanted: object) -> tuple[str, ...]:
    """The built-in metrics (in :data:`BUILTIN` order) with every property in ``wanted`` equal, e.g.
    ``names(family="guardrails")``, ``names(needs_context=True)``."""
    return tuple(m.name for m in BUILTIN if all(getattr(m, key) == value for key, value in wanted.items()))


def families() -> dict[str, tuple[str, ...]]:
    """family -> its metrics, families in the order they first appear."""
    found: dict[str, list[str]] = {}
    for m in BUILTIN:
        if m.family is not None:
            found.setdefault(m.family, []).append(m.name)
    return {family: tuple(members) for family, members in found.items()}
