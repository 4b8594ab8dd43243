"""The gate: the one verdict on a run, read by every surface.

``decide(current, baseline, settings)`` compares the run with its baseline (through
:func:`~pytest_crucible.comparison.compare_run_data`), applies the refusals (runs that must not be
compared), the gated metrics, the absolute floors, and returns a :class:`GateResult`: its verdict,
its reasons and its exit code. The plugin's session gate, ``crucible compare``, ``crucible report``,
the HTML report and the HTTP API all call this function and only read what it returns, so they
cannot disagree about one pair of runs.

Pure: no pytest, no SQL. Runs come in as :class:`~pytest_crucible.runs.RunData`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .defaults import DEFAULT_SEED
from .runs import COMPLETE, RunData

if TYPE_CHECKING:
    from .comparison import Comparison

PASSED, FAILED, REFUSED, SKIPPED = "passed", "failed", "refused", "skipped"
# The exit code of each verdict, the same for pytest and for `crucible compare`: 1 is a regression or a
# missed floor, 3 a comparison that was refused (never a pass). A skipped gate leaves the code to pytest.
EXIT_CODES = {PASSED: 0, FAILED: 1, REFUSED: 3, SKIPPED: 0}

ALLOW_HINT = "pass --crucible-allow-incomplete (crucible compare --allow-incomplete) to compare the items it has"
_WHY_NOT_COMPLETE = {
    "incomplete": "some of its items have no judge-based metrics",
    "interrupted": "it stopped part way",
    "running": "it has not finished",
}


@dataclass(frozen=True)
class GateSettings:
    """What decides the verdict; the plugin builds it from --crucible-* options, the CLI from its flags."""

    baseline: str | None = None  # a run id, unique prefix, "latest", or an exported run (PATH.json)
    gate: tuple[str, ...] | None = None  # the gated metrics (None: every compared metric)
    floors: tuple[tuple[str, float], ...] = ()  # --crucible-fail-under METRIC=VALUE
    multiple: str = "none"  # "holm": adjust the p-values across the compared metrics
    seed: int = DEFAULT_SEED
    allow_incomplete: bool = False
    metrics: tuple[str, ...] | None = None  # compare only these metrics (crucible compare --metrics)

    @property
    def active(self) -> bool:
        return bool(self.baseline or self.floors)


@dataclass
class GateResult:
    """The gate's verdict and everything behind it; views read it, never recompute it."""

    verdict: str
    comparison: "Comparison | None" = None
    failures: list[str] = field(default_factory=list)
    refusal: str | None = None  # why the runs were not compared (with its HINT line)
    warnings: list[str] = field(default_factory=list)
    gated: tuple[str, ...] | None = None
    has_baseline: bool = False
    has_floors: bool = False
    # The baseline as compared (None: floors only, or it could not be read); ``baseline_ref`` as the user named it.
    baseline: RunData | None = None
    baseline_ref: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def summary(self) -> str:
        """One line: what the gate concluded."""
        if self.verdict == SKIPPED:
            return f"gate skipped: {self.refusal}"
        if self.verdict == REFUSED:
            return f"GATE REFUSED {self.refusal.splitlines()[0] if self.refusal else ''}"
        if self.verdict == FAILED:
            return f"GATE FAILED {len(self.failures)} reason{'s' if len(self.failures) != 1 else ''}"
        what = "no significant regression" if self.has_baseline else "all floors met"
        return f"gate passed: {what}" + (" and all floors met" if self.has_baseline and self.has_floors else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "exitCode": self.exit_code,
            "failures": list(self.failures),
            "refusal": self.refusal,
            "warnings": list(self.warnings),
            "gated": list(self.gated) if self.gated is not None else None,
            "baseline": self.baseline.run_id if self.baseline is not None else None,
        }


def parse_metric_list(value: str | None) -> tuple[str, ...] | None:
    """``ndcgAt10, mrr`` -> ("ndcgAt10", "mrr"); None or empty: every metric."""
    names = tuple(filter(None, (name.strip() for name in (value or "").split(","))))
    return names or None


def parse_floors(values: list[str], option: str) -> tuple[tuple[str, float], ...]:
    """``["ndcgAt10=0.6", "mrr=0.5,recallAtK=0.7"]`` -> ((metric, floor), ...); ValueError with a HINT."""
    floors = []
    for value in values:
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, number = part.partition("=")
            try:
                if not sep or not name.strip():
                    raise ValueError
                floors.append((name.strip(), float(number)))
            except ValueError:
                raise ValueError(f"{option} {part!r}: expected METRIC=VALUE\nHINT: e.g. {option} ndcgAt10=0.6") from None
    return tuple(floors)


def not_complete(run: RunData) -> str | None:
    """``incomplete (2 items without judge-based metrics)``: why a run is not complete (None: it is)."""
    status = run.status
    if status in (COMPLETE, None):
        return None
    n = len(run.judge_failed)
    detail = (f"{n} item{'s' if n != 1 else ''} without judge-based metrics" if status == "incomplete" and n
              else _WHY_NOT_COMPLETE.get(status, "it did not complete"))
    return f"{status} ({detail})"


def baseline_refusal(baseline: RunData) -> str | None:
    """Why a baseline must not be compared against without --crucible-allow-incomplete (None: it may be).
    The plugin asks this before any test runs; :func:`decide` asks it again at the end."""
    state = not_complete(baseline)
    if state is None:
        return None
    return (f"run {baseline.run_id} is {state}; refusing to compare against it\n"
            f"HINT: pick a complete run (`crucible runs`), or {ALLOW_HINT}")


def skipped(reason: str, settings: GateSettings) -> GateResult:
    """A gate that did not look at the run (an interrupted session: pytest's own exit code stands)."""
    return GateResult(SKIPPED, refusal=reason, has_baseline=bool(settings.baseline), has_floors=bool(settings.floors),
                      baseline_ref=settings.baseline)


def unreadable_baseline(reason: str, settings: GateSettings) -> GateResult:
    """The baseline could not be read (gone since the session started, unreadable file): refused, never a pass."""
    return GateResult(REFUSED, refusal=reason, has_baseline=True, has_floors=bool(settings.floors), baseline_ref=settings.baseline)


def decide(current: RunData, baseline: RunData | None, settings: GateSettings) -> GateResult:
    """The verdict on ``current`` (the candidate) against ``baseline`` (None: floors only)."""
    from .comparison import ComparisonRefused, compare_run_data, floor_failures, regression_reasons

    result = GateResult(PASSED, has_baseline=baseline is not None, has_floors=bool(settings.floors), gated=settings.gate,
                        baseline=baseline, baseline_ref=settings.baseline)
    state = not_complete(current)
    if state is not None:
        if not settings.allow_incomplete:
            result.verdict, result.refusal = REFUSED, f"this run is {state}: refusing to compare it\nHINT: {ALLOW_HINT}"
            return result
        result.warnings.append(f"WARNING comparing an incomplete run (--crucible-allow-incomplete): this run is {state}; "
                               "only the items and metrics it has are paired")
    if baseline is not None and not_complete(baseline) is not None:
        if not settings.allow_incomplete:
            result.verdict, result.refusal = REFUSED, baseline_refusal(baseline)
            return result
        result.warnings.append(f"WARNING comparing against a baseline that is {baseline.status} (--crucible-allow-incomplete): "
                               "only the items and metrics it has are paired")
    if baseline is not None:
        try:
            comparison = compare_run_data(baseline, current, seed=settings.seed, multiple=settings.multiple,
                                          metrics=settings.metrics)
        except ComparisonRefused as exc:
            result.verdict, result.refusal = REFUSED, str(exc)
            return result
        result.comparison = comparison
        gated = set(settings.gate) if settings.gate else set(comparison.metrics)
        result.failures.extend(f"gated metric {name} was not measured in either run" for name in sorted(gated - set(comparison.metrics)))
        result.failures.extend(regression_reasons(comparison, gated))
    result.failures.extend(floor_failures(current.means(), dict(settings.floors)))
    if result.failures:
        result.verdict = FAILED
    return result
