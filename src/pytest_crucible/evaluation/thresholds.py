"""Per-metric thresholds on one item's outcome: ini ``crucible_thresholds = faithfulness>=0.8 answerWords<=80``.

In strict outcome mode an item whose value crosses a threshold fails, naming the metric, the value and
the threshold: this is how a metric (a custom one too) becomes a per-test assertion. The session gate
stays the statistical decision on the run. An item without a value for the metric (it does not apply)
is not held to its threshold. Pure: no pytest.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

OPERATORS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_THRESHOLD_RE = re.compile(r"^(?P<metric>[^<>=!\s]+)\s*(?P<op>>=|<=|>|<)\s*(?P<value>[^<>=\s]+)$")
HINT = "HINT: e.g. crucible_thresholds = faithfulness>=0.8 answerWords<=80 (METRIC>=VALUE, <=, > or <)"


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: str
    value: float

    @property
    def text(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"

    def holds(self, value: float) -> bool:
        return OPERATORS[self.op](value, self.value)


def parse_thresholds(words: Iterable[str], resolve: Callable[[str], str], source: str = "ini option crucible_thresholds") -> tuple[Threshold, ...]:
    """``["faithfulness>=0.8", "answerWords<=80"]`` -> thresholds; ``resolve`` turns a metric as written into its
    stored name (ValueError for an unknown one). ValueError naming the bad word, with a HINT."""
    thresholds = []
    for word in words:
        match = _THRESHOLD_RE.match(word.strip())
        if match is None:
            raise ValueError(f"{source}: {word!r} is not METRIC>=VALUE\n{HINT}")
        try:
            value = float(match["value"])
        except ValueError:
            raise ValueError(f"{source}: {word!r}: {match['value']!r} is not a number\n{HINT}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{source}: {word!r}: the threshold must be a finite number\n{HINT}")
        try:
            metric = resolve(match["metric"])
        except ValueError as exc:
            raise ValueError(f"{source}: {word!r}: {exc}") from None
        thresholds.append(Threshold(metric, match["op"], value))
    return tuple(thresholds)


def threshold_failures(thresholds: Iterable[Threshold], metrics: Mapping[str, float]) -> list[str]:
    """One line per threshold the item's values cross (a metric the item has no value for is not held to it)."""
    return [f"{t.metric} = {metrics[t.metric]:.4g} crosses the threshold {t.text} (crucible_thresholds)"
            for t in thresholds if t.metric in metrics and not t.holds(metrics[t.metric])]
