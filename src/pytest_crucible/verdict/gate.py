"""The gate: the one verdict on a run, read by every surface.

``decide(current, baseline, settings)`` compares the run with its baseline (through
:func:`~pytest_crucible.verdict.comparison.compare_run_data`), applies the refusals (runs that must not be
compared), the gated metrics, the absolute floors, and returns a :class:`GateResult`: its verdict,
its reasons and its exit code. The plugin's session gate, ``crucible compare``, ``crucible report``,
the HTML report and the HTTP API all call this function and only read what it returns, so they
cannot disagree about one pair of runs.

``decide`` is pure (no pytest, no store): runs come in as :class:`~pytest_crucible.verdict.runs.RunData`.
``decide_stored`` first asks ``ruler.prepare_pair`` whether the relevance grades moved between the
runs, which reads the judgment ledger through the store (its SQL stays in ``store/``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..defaults import CALIBRATED_KAPPA, CHANGED_ITEMS, DEFAULT_SEED, MIN_PAIRS, MULTIPLE
from ..metrics import JUDGED_METRICS
from ..store.schema import RunStatus
from .runs import COMPLETE, RunData

if TYPE_CHECKING:
    from ..store import Store
    from .comparison import Comparison



class Verdict(str, Enum):
    """What the gate concluded; the value is what junit's ``crucible.verdict`` and the JSON documents say."""

    PASSED = "passed"
    FAILED = "failed"  # a regression that passed both tests, or a missed floor: exit 1
    REFUSED = "refused"  # the runs could not be compared fairly: exit 3, never a pass
    SKIPPED = "skipped"  # nothing to judge by (an interrupted run, a subset too small): pytest's code stands

    def __str__(self) -> str:
        return self.value

    @property
    def headline(self) -> str:
        """How the terminal's one-line summary ends (its colour follows the verdict)."""
        return HEADLINES[self]


PASSED, FAILED, REFUSED, SKIPPED = Verdict.PASSED, Verdict.FAILED, Verdict.REFUSED, Verdict.SKIPPED
# The verdict's first words wherever it is shown: the terminal, junit's failure messages, `crucible compare`.
HEADLINES = {PASSED: "gate passed", FAILED: "GATE FAILED", REFUSED: "GATE REFUSED", SKIPPED: "gate skipped"}
# How a skipped gate of a partial selection too small to gate begins (``not gated: subset of 1 item``).
NOT_GATED = "not gated:"
# The exit code of each verdict, the same for pytest and for `crucible compare`: 1 is a regression or a
# missed floor, 3 a comparison that was refused (never a pass). A skipped gate leaves the code to pytest.
EXIT_CODES = {PASSED: 0, FAILED: 1, REFUSED: 3, SKIPPED: 0}

ALLOW_HINT = "pass --crucible-allow-incomplete (crucible compare --allow-incomplete) to compare the items it has"
# A run that lost items (a full disk): what was lost cannot be compared, only measured again.
LOST_HINT = ("the database could not record every item (the session's FAULT lines say why): make room on the disk, "
             "or point --crucible-db elsewhere, and run again")
_WHY_NOT_COMPLETE: dict[str, str] = {
    RunStatus.FAILED: "no item was scored: every pipeline call errored",
    RunStatus.INCOMPLETE: "some of its items were not recorded or have no judge-based metrics",
    RunStatus.INTERRUPTED: "it stopped part way",
    RunStatus.RUNNING: "it has not finished",
}


@dataclass(frozen=True)
class GateSettings:
    """What decides the verdict; the plugin builds it from --crucible-* options, the CLI from its flags."""

    baseline: str | None = None  # a run id, unique prefix, "latest", "latest:KEY=VALUE,...", or an exported run (PATH.json)
    gate: tuple[str, ...] | None = None  # the gated metrics (None: every compared metric)
    floors: tuple[tuple[str, float], ...] = ()  # --crucible-fail-under METRIC=VALUE
    margins: tuple[tuple[str, float], ...] = ()  # --crucible-margin METRIC=DROP: non-inferiority margins
    multiple: str = MULTIPLE  # "holm": adjust the p-values across the gated metrics (the family); "none": full alpha each
    seed: int = DEFAULT_SEED
    allow_incomplete: bool = False
    metrics: tuple[str, ...] | None = None  # compare only these metrics (crucible compare --metrics)
    min_pairs: int = MIN_PAIRS  # a gated metric with fewer pairs refuses the gate (it could not see a regression)
    rescore: bool = False  # score both runs' retrieval against today's grades (see verdict/ruler.py)
    cluster: str = "field"  # how items are clustered for the comparison: field, doc or none (comparison.item_clusters)
    # Golden items edited since the baseline (comparison.changed_content): exclude (left out of the pairs),
    # include (paired anyway, with a note) or refuse (the gate refuses, exit 3).
    changed_items: str = CHANGED_ITEMS
    # The command line's comparison options given with no baseline (e.g. "--crucible-gate=ndcgAt10"): said once
    # (see no_baseline), never silently ignored. The ini file's gate and margins only shape a gate that runs.
    asked_without_baseline: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.baseline or self.floors)


@dataclass
class GateResult:
    """The gate's verdict and everything behind it; views read it, never recompute it."""

    verdict: Verdict
    comparison: Comparison | None = None
    failures: list[str] = field(default_factory=list)
    refusal: str | None = None  # why the runs were not compared (with its HINT line)
    warnings: list[str] = field(default_factory=list)
    gated: tuple[str, ...] | None = None
    has_baseline: bool = False
    has_floors: bool = False
    # The baseline as compared (None: floors only, or it could not be read); ``baseline_ref`` as the user named it.
    baseline: RunData | None = None
    baseline_ref: str | None = None
    current: RunData | None = None  # the run judged, as compared (views of the items that changed read it)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def summary(self) -> str:
        """One line: what the gate concluded."""
        if self.verdict == SKIPPED:
            return self.refusal or "" if (self.refusal or "").startswith(NOT_GATED) else f"{SKIPPED.headline}: {self.refusal}"
        if self.verdict == REFUSED:
            return f"{REFUSED.headline} {self.refusal.splitlines()[0] if self.refusal else ''}"
        if self.verdict == FAILED:
            return f"{FAILED.headline} {len(self.failures)} reason{'s' if len(self.failures) != 1 else ''}"
        what = "no significant regression" if self.has_baseline else "all floors met"
        return f"{PASSED.headline}: {what}" + (" and all floors met" if self.has_baseline and self.has_floors else "")

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


def parse_metric_list(value: str | None, option: str = "--crucible-gate", k: int | None = None,
                      custom: Iterable[str] = ()) -> tuple[str, ...] | None:
    """``ndcg@10, mrr`` -> ("ndcgAt10", "mrr"): stored names or the names the terminal shows (``k``: the
    run's cutoff K; ``custom``: the custom metrics' names); None or empty: every metric. ValueError
    with a did-you-mean for an unknown name."""
    from ..metrics import resolve_metric

    names = []
    for name in filter(None, (name.strip() for name in (value or "").split(","))):
        try:
            names.append(resolve_metric(name, k, custom))
        except ValueError as exc:
            raise type(exc)(f"{option}: {exc}") from None  # UnknownMetric stays one: a caller may wait for the runs
    return tuple(dict.fromkeys(names)) or None


def parse_margins(values: list[str], option: str, k: int | None = None, custom: Iterable[str] = ()) -> tuple[tuple[str, float], ...]:
    """``["ndcgAt10=0.02"]`` -> ((metric, margin), ...): the largest drop that does not matter, in the metric's
    own units (a finite number above 0); ValueError with a HINT."""
    margins = parse_floors(values, option, k, custom, what="margin", example="ndcgAt10=0.02")
    for name, margin in margins:
        if not margin > 0:
            raise ValueError(f"{option} {name}={margin:g}: a margin is the largest drop that does not matter, above 0\n"
                             f"HINT: e.g. {option} {name}=0.02")
    return margins


def parse_floors(values: list[str], option: str, k: int | None = None, custom: Iterable[str] = (), *,
                 what: str = "floor", example: str = "ndcgAt10=0.6") -> tuple[tuple[str, float], ...]:
    """``["ndcgAt10=0.6", "recall@10=0.7"]`` -> ((metric, floor), ...); ValueError with a HINT."""
    from ..metrics import resolve_metric

    floors = []
    for value in values:
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, number = part.partition("=")
            try:
                if not sep or not name.strip():
                    raise ValueError
                floor = float(number)
            except ValueError:
                raise ValueError(f"{option} {part!r}: expected METRIC=VALUE\nHINT: e.g. {option} {example}") from None
            if not math.isfinite(floor):  # a CI variable that expands to nan must not switch the check off
                raise ValueError(f"{option} {part!r}: the {what} must be a finite number, got {number.strip()!r}\n"
                                 f"HINT: e.g. {option} {example}; check the variable that set it")
            try:
                floors.append((resolve_metric(name, k, custom), floor))
            except ValueError as exc:
                raise type(exc)(f"{option} {part!r}: {exc}") from None
    return tuple(floors)


def _items(n: int) -> str:
    return f"{n} item{'s' if n != 1 else ''}"


def not_complete(run: RunData) -> str | None:
    """``incomplete (2 items without judge-based metrics)``: why a run is not complete (None: it is)."""
    status = run.status
    if status in (COMPLETE, None):
        return None
    judge_failed = len(run.judge_failed) if status == RunStatus.INCOMPLETE else 0
    details = [f"{_items(run.unrecorded)} lost: never recorded in the database"] if run.unrecorded else []
    details += [f"{_items(judge_failed)} without judge-based metrics"] if judge_failed else []
    return f"{status} ({'; '.join(details) or _WHY_NOT_COMPLETE.get(status, 'it did not complete')})"


def baseline_refusal(baseline: RunData) -> str | None:
    """Why a baseline must not be compared against without --crucible-allow-incomplete (None: it may be).
    The plugin asks this before any test runs; :func:`decide` asks it again at the end."""
    state = not_complete(baseline)
    if state is None:
        return None
    return (f"run {baseline.run_id} is {state}; refusing to compare against it\n"
            f"HINT: pick a complete run (`crucible runs`), or {ALLOW_HINT}")


def kind_floor_failures(run: RunData, floors: dict[str, float]) -> list[str]:
    """The absolute floors on the run's means; a run that mixes kinds is held to them kind by kind
    (a floor on nDCG judges the retrieval questions' nDCG, not an average with the attacks')."""
    from ..evaluation.custom_metrics import directions
    from .comparison import floor_failures, kind_groups, metric_key

    if not floors:
        return []
    custom = directions(run.run)
    groups = kind_groups([item for item in run.item_ids if item not in run.errored], run)
    if len(groups) < 2:
        return floor_failures(run.means(), floors, custom)
    reasons, measured = [], set()
    for kind, items in groups:
        means = run.restricted(set(items)).means()
        measured |= set(means)
        reasons.extend(floor_failures({metric_key(name, kind): value for name, value in means.items()},
                                      {metric_key(name, kind): floor for name, floor in floors.items() if name in means}, custom))
    reasons.extend(floor_failures({}, {name: floor for name, floor in floors.items() if name not in measured}, custom))
    return reasons


def _blind_gate(comparison: Comparison, blind: list[str], settings: GateSettings) -> str | None:
    """Why the gate cannot see a regression: a gated metric (or, when none was named, every metric)
    has fewer pairs than ``min_pairs`` (None: the gate can see)."""
    if not blind:
        return None
    counts = ", ".join(f"{comparison.label(name)} {comparison.metrics[name].units}" if name in comparison.metrics else name
                       for name in blind[:6]) + (", ..." if len(blind) > 6 else "")
    left_out = len(comparison.excluded)
    unit = "clusters of pairs" if any(m.n_clusters is not None for m in comparison.metrics.values()) else "pairs"
    what = f"a gated metric has fewer than {settings.min_pairs} {unit}" if settings.gate else f"no metric has {settings.min_pairs} {unit}"
    return (f"{what} ({counts}; {comparison.paired_items} paired items, "
            f"{left_out} left out): with so few pairs no regression can be significant, so the gate cannot pass\n"
            f"HINT: see why items were left out (errored, missing from a run); fix the pipeline or compare runs "
            f"that share more items; crucible_min_pairs sets the minimum ({MIN_PAIRS} is the fewest for p < 0.05)")


def skipped(reason: str, settings: GateSettings) -> GateResult:
    """A gate that did not look at the run (an interrupted session: pytest's own exit code stands)."""
    return GateResult(SKIPPED, refusal=reason, has_baseline=bool(settings.baseline), has_floors=bool(settings.floors),
                      baseline_ref=settings.baseline)


def decide_stored(store: Store | None, current: RunData, baseline: RunData | None, settings: GateSettings) -> GateResult:
    """:func:`decide` after the ruler check (``ruler.prepare_pair``): the entry point of every surface
    that has a store (the session, the CLI, the HTTP API). The runs carry their golden items
    (and their rankings when ``settings.rescore``)."""
    notes: list[str] = []
    changed = None
    if baseline is not None:
        from ..store.selection import selection_of, subset_line
        from .ruler import prepare_pair

        chosen = selection_of(current.run)
        if chosen is not None:  # a -k / --lf run: compared on the items it selected, not held against the rest
            notes.append(subset_line(chosen))
            baseline = baseline.restricted(set(current.item_ids))
        partial_baseline = selection_of(baseline.run)
        if partial_baseline is not None:
            notes.append(f"WARNING the baseline {baseline.run_id} is a subset ({partial_baseline.describe()}): "
                         "only the items both runs have are compared")

        from .comparison import changed_content

        # A golden item edited since the baseline is not a pair (unless included): not the ruler's business either.
        changed = changed_content(baseline, current)
        left_out = () if settings.changed_items == "include" else changed
        current, baseline, ruler_notes = prepare_pair(store, current, baseline, rescore=settings.rescore, left_out=left_out)
        notes += ruler_notes
    result = decide(current, baseline, settings, notes, changed=changed)
    judge = current.run.get("judge_model")
    if store is not None and judge and result.verdict in (PASSED, FAILED):
        from ..store.ledgers import latest_judge_calibration

        calibration = latest_judge_calibration(store, judge, current.run.get("judge_prompt_version"))
        result.warnings.extend(calibration_warnings(calibration, judge, _gated_metrics(result, settings)))
    return result


def _gated_metrics(result: GateResult, settings: GateSettings) -> list[str]:
    rows = result.comparison.metrics if result.comparison is not None else {}
    names = [rows[name].metric if name in rows else name for name in result.gated or ()]
    names += [metric for metric, _ in settings.floors]
    return list(dict.fromkeys(names))


def calibration_warnings(calibration: dict[str, Any] | None, judge: str, gated: Sequence[str]) -> list[str]:
    """Warnings for gated metrics that rest on a judge not shown to agree with people: never
    calibrated, calibrated below CALIBRATED_KAPPA on the label kind that measures the metric, or
    calibrated on labels that cannot measure it (its kappa undefined: the reason the calibration's
    ``figures`` stored, e.g. the labels use one category only). They do not change the verdict;
    they say how far to trust it (docs/judge-calibration.md)."""
    judged = [metric for metric in gated if metric in JUDGED_METRICS]
    if not judged:
        return []
    from ..labels.calibration import stored_kappa

    if calibration is None:
        return [f"WARNING the gate rests on judge {judge} for {', '.join(judged)}, and that judge was never calibrated: "
                "crucible judge calibrate LABELS.jsonl measures how far it agrees with people (docs/judge-calibration.md)"]
    warnings = []
    for metric in judged:
        kind = JUDGED_METRICS[metric]
        kappa, why = stored_kappa(calibration, kind) if kind else (None, None)
        if why:
            warnings.append(f"WARNING gated metric {metric} rests on judge {judge}, whose {kind} agreement with people is "
                            f"not measurable: {why} (docs/judge-calibration.md)")
        elif kind and (kappa is None or kappa < CALIBRATED_KAPPA):
            agreement = "undefined" if kappa is None else f"{kappa:.2f}"
            warnings.append(f"WARNING gated metric {metric} rests on judge {judge}, whose {kind} agreement with people is "
                            f"kappa {agreement} (below {CALIBRATED_KAPPA}): read its verdict as a trend (docs/judge-calibration.md)")
    return warnings


def refused_by_fault(reason: str, settings: GateSettings) -> GateResult:
    """A fault kept the gate from comparing (the run could not be stored, the database failed while the
    comparison read it): refused, never a pass, and still a verdict in the terminal and in junit."""
    return GateResult(REFUSED, refusal=reason, has_baseline=bool(settings.baseline), has_floors=bool(settings.floors),
                      baseline_ref=settings.baseline)


def no_baseline(settings: GateSettings, *, strict: bool) -> GateResult:
    """A comparison asked for on the command line with no baseline to compare with: the gate did not look
    at the run, and says so once (skipped); under crucible_strict_config that is a refusal (exit 3)."""
    reason = (f"{settings.asked_without_baseline} asks for a comparison, but no baseline was given: the gate "
              "did not compare this run" + (" (crucible_strict_config = true: refused)" if strict else "") +
              "\nHINT: add --crucible-baseline=latest (the latest complete run of this workspace), a run id, or an "
              "exported run (`crucible export RUN -o baselines/main.json`)")
    result = GateResult(REFUSED if strict else SKIPPED, refusal=reason, has_floors=bool(settings.floors))
    return result


def unreadable_baseline(reason: str, settings: GateSettings) -> GateResult:
    """The baseline could not be read (gone since the session started, unreadable file): refused, never a pass."""
    return GateResult(REFUSED, refusal=reason, has_baseline=True, has_floors=bool(settings.floors), baseline_ref=settings.baseline)


def decide(current: RunData, baseline: RunData | None, settings: GateSettings, notes: Sequence[str] = (),
           changed: Mapping[str, list[str]] | None = None) -> GateResult:
    """The verdict on ``current`` (the candidate) against ``baseline`` (None: floors only). ``notes``:
    what the caller learnt preparing the pair (``ruler.prepare_pair``), shown with the verdict; ``changed``:
    the golden items it found changed since the baseline (``comparison.changed_content``; None: found here)."""
    from ..store.selection import selection_of
    from .comparison import ComparisonRefused, compare_run_data, cutoff_change, margin_reasons, regression_reasons, undetected_drops

    result = GateResult(PASSED, has_baseline=baseline is not None, has_floors=bool(settings.floors), gated=settings.gate,
                        baseline=baseline, baseline_ref=settings.baseline, current=current)
    result.warnings.extend(notes)
    state = not_complete(current)
    if state is not None:
        if not settings.allow_incomplete:
            hint = f"{LOST_HINT}; or {ALLOW_HINT}" if current.unrecorded else ALLOW_HINT
            result.verdict, result.refusal = REFUSED, f"this run is {state}: refusing to compare it\nHINT: {hint}"
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
                                          metrics=settings.metrics, cluster=settings.cluster,
                                          family=settings.gate, family_min_units=settings.min_pairs,
                                          margins=dict(settings.margins), changed_items=settings.changed_items,
                                          changed=changed)
        except ComparisonRefused as exc:
            result.verdict, result.refusal = REFUSED, str(exc)
            return result
        result.comparison = comparison
        changed_line = comparison.changed_line()
        if changed_line:  # said once: left out is a warning (-q keeps it), included on request a note
            result.warnings.append(("NOTE " if comparison.changed_items == "include" else "WARNING ") + changed_line)
        # A gated metric at K (named, or every measured metric by default) measured at two different K:
        # the gate cannot judge it, and passing without it would be a pass nobody measured.
        from ..metrics import UNGATED_BY_DEFAULT, depends_on_k

        wanted_at_k = sorted(m for m in (settings.gate or set(baseline.metrics) | set(current.metrics)) if depends_on_k(m))
        if cutoff_change(baseline, current, wanted_at_k):
            result.verdict = REFUSED
            result.refusal = (f"refusing to gate {', '.join(wanted_at_k)}: the metrics at K were cut off at K = {baseline.k} "
                              f"in {baseline.run_id} and K = {current.k} in {current.run_id} (ini crucible_k)\n"
                              f"HINT: add --crucible-rescore (crucible compare --rescore) to score both runs at K = "
                              f"{baseline.k} from their stored rankings; or gate only metrics that do not depend on K "
                              f"(ndcgAt10, mrr)")
            return result
        measured = comparison.metrics  # row name (a metric, per kind when the runs mix kinds) -> comparison
        # Unnamed, every compared metric is gated but the ones gated only when named (metrics.UNGATED_BY_DEFAULT).
        wanted = set(settings.gate) if settings.gate else {m.metric for m in measured.values() if m.metric not in UNGATED_BY_DEFAULT}
        # A row is gated when its metric is wanted and it has enough pairs to see a regression; the
        # others are shown and marked not gated. A wanted metric with no such row blinds the gate.
        # With clusters, the pairs that count are clusters: k clusters can reach no smaller p than k pairs.
        gated = {name for name, m in measured.items() if m.metric in wanted and m.units >= settings.min_pairs}
        seen = {m.metric for m in measured.values()}
        if settings.gate:
            blind = [name for name, m in measured.items()
                     if m.metric in wanted and not any(measured[key].metric == m.metric for key in gated)]
        else:
            blind = [] if gated else list(measured) or ["(no metric measured in both runs)"]
        refusal = _blind_gate(comparison, blind, settings)
        if refusal and selection_of(current.run) is not None:
            # A -k or --lf loop on a few items: too few pairs to gate is what was asked for, not a broken comparison.
            result.verdict = SKIPPED
            result.refusal = (f"{NOT_GATED} subset of {_items(comparison.paired_items)} (the gate needs {settings.min_pairs} "
                              "pairs; run the whole golden set to gate)")
            return result
        if refusal:
            result.verdict, result.refusal = REFUSED, refusal
            return result
        result.gated = tuple(name for name in measured if name in gated) + tuple(sorted(wanted - seen))
        result.failures.extend(f"gated metric {name} was not measured in either run" for name in sorted(wanted - seen))
        result.failures.extend(regression_reasons(comparison, gated))
        result.failures.extend(margin_reasons(comparison, gated))
        result.warnings.extend(f"WARNING {line}" for line in undetected_drops(comparison, gated))
    result.failures.extend(kind_floor_failures(current, dict(settings.floors)))
    if result.failures:
        result.verdict = FAILED
    return result


def gate_of_session_run(store: Any, run_id: str | None, status: str | None, settings: GateSettings, *, db_path: Any,
                        workspace: str, unrecorded: int = 0, strict_config: bool = False) -> GateResult | None:
    """The verdict on the run a pytest session just closed (``status`` None: it was never stored or never
    closed) by ``settings``: compared with its baseline, its floors judged, or refused; None when there is
    nothing to judge by. The summary, the HTML report and the exit status all read the one result."""
    from ..store import StoreError
    from .runs import load_run, read_run

    if not settings.active:  # no baseline and no floor: nothing to judge by
        if settings.asked_without_baseline and status not in (None, RunStatus.INTERRUPTED):
            return no_baseline(settings, strict=strict_config)
        return None
    if status is None or run_id is None:  # nothing to judge it by, never a pass
        lost = f" ({unrecorded} items lost)" if unrecorded else ""
        return refused_by_fault(f"this run could not be stored in {db_path}{lost}: refusing to compare it\n"
                                f"HINT: {LOST_HINT}", settings)
    if status == RunStatus.INTERRUPTED:  # the session already exits 2 (interrupted); nothing to judge by
        return skipped("this run was interrupted: the gate did not compare it", settings)
    rankings = settings.rescore
    current = load_run(store, run_id, golden=True, rankings=rankings)
    baseline = None
    if settings.baseline:
        try:
            baseline = read_run(settings.baseline, store, workspace=workspace, exclude=run_id, golden=True, rankings=rankings)
        except StoreError as exc:
            return unreadable_baseline(str(exc), settings)
    result = decide_stored(store, current, baseline, settings)
    if settings.asked_without_baseline:  # the floors were judged; the comparison asked for was not
        refusal = no_baseline(settings, strict=False).refusal or ""
        result.warnings.append("WARNING " + refusal.splitlines()[0])
    return result
