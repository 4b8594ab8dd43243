"""Metric implementations for pytest-crucible: pure functions, never pytest (retrieval: standard library only)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..defaults import DEFAULT_K
from . import properties as _properties

# Metric families, in the order the spec's metrics JSON lists them, and the metrics where lower is
# better (every other metric is higher-is-better): views of the one table, metrics/properties.py.
METRIC_FAMILIES: dict[str, tuple[str, ...]] = _properties.families()
# Metrics a judge decides, and the human label kind (`crucible judge calibrate`) that measures the
# judge on them: the CRAG grade behind truthfulness and the risk-coverage curve, faithfulness itself;
# None for a judged metric no label kind measures.
JUDGED_METRICS: dict[str, str | None] = {m.name: m.label_kind for m in _properties.BUILTIN if m.judged}
# Metrics with no better direction: a significant change is reported, never gated as a regression.
NO_DIRECTION = frozenset(m.name for m in _properties.BUILTIN if m.better is None)
LOWER_IS_BETTER = frozenset(_properties.names(better=_properties.LOWER))
# Metrics the gate judges only when they are named (--crucible-gate, ini crucible_gate): shown, compared, not
# gated by default (the counts of an agent's work: toolCalls, retrievalSteps).
UNGATED_BY_DEFAULT = frozenset(_properties.names(gated_by_default=False))


def ordered_metrics(names) -> list[str]:
    """Known metrics in family order, then the rest alphabetically."""
    names = set(names)
    known = [name for family in METRIC_FAMILIES.values() for name in family if name in names]
    return known + sorted(names - set(known))


def family_of(metric: str) -> str | None:
    """The family a metric is listed under (None: a metric outside the spec's families)."""
    return next((family for family, names in METRIC_FAMILIES.items() if metric in names), None)


def metric_direction(metric: str, custom: Mapping[str, str | None] | None = None) -> str | None:
    """"higher", "lower", or None (a change is reported, never gated) for a built-in metric, or for a
    custom one as its run recorded it (``custom``: name -> better, see ``custom_metrics.directions``)."""
    return _properties.properties_of(metric, custom).better


def higher_is_better(metric: str, custom: Mapping[str, str | None] | None = None) -> bool:
    return metric_direction(metric, custom) != "lower"


# Per-item metrics outside the spec's families (reported under "other").
OTHER_METRICS = tuple(m.name for m in _properties.BUILTIN if m.family is None and m.per_item)
# Every metric name the plugin can measure, compare or gate (run-level ones included).
KNOWN_METRICS = tuple(_properties.REGISTRY)


def depends_on_k(metric: str) -> bool:
    """Whether a metric is measured over the top K of the ranking (the @K metrics, and nearMissRate: the
    share of the top K that are near misses), so that two runs at different K measured it differently."""
    return metric.endswith("AtK") or metric == "nearMissRate"


def run_cutoff(run: Mapping) -> int:
    """The cutoff K a run's metrics at K were measured at: its recorded ``eval_k``; a run recorded
    before the cutoff was its own setting was measured at its pipeline's retrievalLimit."""
    if run.get("eval_k"):
        return int(run["eval_k"])
    resolved = run.get("resolved") or {}
    if isinstance(resolved, str):
        import json

        resolved = json.loads(resolved)
    return int(resolved.get("retrievalLimit") or DEFAULT_K)


def with_cutoff(name: str, k: int | None) -> str:
    """A comparison row's name with its K: ``recallAtK`` -> ``recall@10`` (also ``recallAtK [retrieval]``,
    a row of one kind); every other name as stored (``ndcgAt10`` carries its cutoff already)."""
    metric, space, kind = name.partition(" ")
    if not k or not metric.endswith("AtK"):
        return name
    return metric.removesuffix("AtK") + f"@{k}" + space + kind


def display_name(metric: str, k: int | None = None) -> str:
    """How the terminal shows a metric: ``recall@10`` for recallAtK at k = 10, ``ndcg@10``."""
    if k and metric.endswith("AtK"):
        return metric.replace("AtK", f"@{k}")
    return metric.replace("At10", "@10")


class UnknownMetric(ValueError):
    """A metric name nothing defines (yet: a custom metric is known once its run or definition is read)."""


def resolve_metric(name: str, k: int | None = None, custom: Iterable[str] = ()) -> str:
    """The metric a user named, by its stored name (``ndcgAt10``) or as the terminal shows it
    (``ndcg@10``, ``recall@10``, ``recall@k``); ``custom``: the custom metrics' names. ValueError with a
    did-you-mean for an unknown name, and for ``recall@5`` when the run's K is 10."""
    text = name.strip()
    known = tuple(dict.fromkeys(KNOWN_METRICS + tuple(custom)))  # a caller may pass a run's metrics, built-ins included
    if text in known:
        return text
    lowered = {metric.lower(): metric for metric in known}
    if text.lower() in lowered:
        return lowered[text.lower()]
    base, at, cutoff = text.partition("@")
    if at:
        if base.lower() == "ndcg" and cutoff == "10":
            return "ndcgAt10"
        metric = lowered.get(base.lower() + "atk")
        if metric is not None and (cutoff.lower() == "k" or k is None or cutoff == str(k)):
            return metric
        if metric is not None and cutoff.isdigit():
            raise ValueError(f"metric {name!r}: this run's K is {k} (ini crucible_k), so it measures {display_name(metric, k)}"
                             f"\nHINT: name it {metric} or {display_name(metric, k)}, or set crucible_k = {cutoff}")
    import difflib

    shown = list(dict.fromkeys(list(known) + [display_name(metric, k or 10) for metric in KNOWN_METRICS
                                              if metric.endswith(("AtK", "At10"))]))
    by_lower = {metric.lower(): metric for metric in reversed(shown)}  # the first spelling of each wins
    close = difflib.get_close_matches(text, shown, n=3, cutoff=0.5) or [
        by_lower[match] for match in difflib.get_close_matches(text.lower(), list(by_lower), n=3)]
    close = list(dict.fromkeys(close))
    hint = f"did you mean {', '.join(close)}?" if close else "the metrics are " + ", ".join(known)
    if not close and text[:1].isalpha():
        hint += " (a custom metric is known once it is defined: docs/custom-metrics.md)"
    raise UnknownMetric(f"unknown metric {name!r}\nHINT: {hint}")
