"""One table of metric properties: every list of metric names the plugin reads is a view of it."""

from __future__ import annotations

import pytest

from pytest_crucible.evaluation.answers import CONTEXT_METRICS
from pytest_crucible.labels.human import METRIC_OF_KIND, METRIC_RANGES
from pytest_crucible.metrics import (
    JUDGED_METRICS,
    KNOWN_METRICS,
    LOWER_IS_BETTER,
    METRIC_FAMILIES,
    NO_DIRECTION,
    OTHER_METRICS,
    UNGATED_BY_DEFAULT,
    family_of,
    higher_is_better,
    metric_direction,
)
from pytest_crucible.metrics.guardrail import ATTACK_SUCCESS, FALSE_POSITIVE, GUARDRAIL_METRICS
from pytest_crucible.metrics.properties import BUILTIN, REGISTRY, MetricProperties, builtin, names, properties_of
from pytest_crucible.metrics.retrieval import RETRIEVAL_METRICS


def test_the_views_keep_the_spec_order_and_membership() -> None:
    assert METRIC_FAMILIES == {
        "retrieval": ("recallAtK", "precisionAtK", "ndcgAt10", "mrr", "hitAtK"),
        "ragas": ("faithfulness", "responseRelevancy", "contextPrecision", "contextRecall", "noiseSensitivity"),
        "abstention": ("truthfulness", "abstainRate", "aurc"),
        "guardrails": ("attackSuccessRate", "falsePositiveRate"),
        "conversation": ("conversationSuccess", "turnsToFirstFailure", "knowledgeRetained", "knowledgeRetention"),
        "agent": ("toolCallRecall", "toolCallPrecision", "trajectoryMatch", "toolCalls", "retrievalSteps"),
    }
    assert OTHER_METRICS == ("conceptRecall", "nearMissRate", "assertionSatisfaction")
    assert KNOWN_METRICS[-1] == "eAurc" and len(KNOWN_METRICS) == len(set(KNOWN_METRICS)) == len(BUILTIN)
    assert {"noiseSensitivity", "aurc", "eAurc", "nearMissRate", "attackSuccessRate", "falsePositiveRate", "toolCalls",
            "retrievalSteps"} == LOWER_IS_BETTER
    assert {"toolCalls", "retrievalSteps"} == UNGATED_BY_DEFAULT  # counts of an agent's work: gated only when named
    assert {"abstainRate"} == NO_DIRECTION
    assert JUDGED_METRICS == {"faithfulness": "faithful", "responseRelevancy": None, "contextPrecision": None,
                              "contextRecall": None, "noiseSensitivity": None, "truthfulness": "crag", "aurc": "crag",
                              "eAurc": "crag", "conversationSuccess": None, "turnsToFirstFailure": None,
                              "knowledgeRetained": None, "knowledgeRetention": None}
    assert CONTEXT_METRICS == ("faithfulness", "contextPrecision", "contextRecall", "noiseSensitivity")
    assert GUARDRAIL_METRICS == (ATTACK_SUCCESS, FALSE_POSITIVE)
    # retrieval_metrics' dict keeps its own key order; the metrics are the family's.
    assert set(RETRIEVAL_METRICS) == set(names(family="retrieval"))
    assert METRIC_OF_KIND == {"crag": "truthfulness", "faithful": "faithfulness"}
    assert METRIC_RANGES == {"truthfulness": (-1.0, 1.0), "faithfulness": (0.0, 1.0)}


def test_a_metric_is_written_once_and_frozen() -> None:
    assert set(REGISTRY) == set(KNOWN_METRICS)
    truthfulness = builtin("truthfulness")
    assert truthfulness is not None and truthfulness.range == (-1.0, 1.0) and truthfulness.judged
    with pytest.raises(AttributeError):
        truthfulness.better = "lower"  # type: ignore[misc]
    assert builtin("answerWords") is None
    assert family_of("eAurc") is None and family_of("mrr") == "retrieval"
    # Waiting for the answer layer: every judged metric, and abstention and assertions, never retrieval.
    assert {m.name for m in BUILTIN if m.judged} <= set(names(answer_layer=True))
    assert not set(names(answer_layer=True)) & set(METRIC_FAMILIES["retrieval"] + METRIC_FAMILIES["guardrails"])


def test_a_custom_metric_joins_with_its_recorded_direction() -> None:
    custom = {"answerWords": "lower", "tone": None}
    assert properties_of("answerWords", custom) == MetricProperties("answerWords", "custom", better="lower")
    assert metric_direction("answerWords", custom) == "lower" and not higher_is_better("answerWords", custom)
    assert metric_direction("tone", custom) is None
    assert metric_direction("noiseSensitivity") == "lower" and metric_direction("abstainRate") is None
    assert metric_direction("neverHeardOf") == "higher"
