"""Metric implementations for pytest-crucible: pure functions, never pytest (retrieval: standard library only)."""

# Metric families, in the order the spec's metrics JSON lists them, and the metrics
# where lower is better (every other metric is higher-is-better). One list for the
# comparison, the terminal and the JSON views.
METRIC_FAMILIES: dict[str, tuple[str, ...]] = {
    "retrieval": ("recallAtK", "precisionAtK", "ndcgAt10", "mrr", "hitAtK"),
    "ragas": ("faithfulness", "responseRelevancy", "contextPrecision", "contextRecall", "noiseSensitivity"),
    "abstention": ("truthfulness", "abstainRate", "aurc"),
    "guardrails": ("attackSuccessRate", "falsePositiveRate"),
}
# Metrics with no better direction: a significant change is reported, never gated as a regression.
NO_DIRECTION = frozenset({"abstainRate"})
LOWER_IS_BETTER = frozenset({"noiseSensitivity", "aurc", "eAurc", "nearMissRate", "attackSuccessRate", "falsePositiveRate"})


def ordered_metrics(names) -> list[str]:
    """Known metrics in family order, then the rest alphabetically."""
    names = set(names)
    known = [name for family in METRIC_FAMILIES.values() for name in family if name in names]
    return known + sorted(names - set(known))


def family_of(metric: str) -> str | None:
    """The family a metric is listed under (None: a metric outside the spec's families)."""
    return next((family for family, names in METRIC_FAMILIES.items() if metric in names), None)


def higher_is_better(metric: str) -> bool:
    return metric not in LOWER_IS_BETTER
