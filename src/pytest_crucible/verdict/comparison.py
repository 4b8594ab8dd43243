"""Paired comparison of two runs, metric by metric, behind two significance gates.

Items are paired by golden item id; only items present in both runs count, and a
metric missing on either side for an item drops that pair (the drop is counted,
never imputed). An item whose golden item was edited under its id since the baseline
(another question, reference, assertions: ``changed_content``) is left out of the pairs
by default. A difference is ``significant`` only when the BCa interval
excludes 0 *and* the permutation p-value is below alpha. A *regression* is a
significant change in the metric's bad direction.

Works on :class:`~pytest_crucible.verdict.runs.RunData` (plain data), whichever store or file it came
from; the statistics themselves are in :mod:`pytest_crucible.stats` (arrays only). The gate's
verdict on a comparison (floors, refusals, exit code) is decided in :mod:`pytest_crucible.verdict.gate`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import config_diff
from ..defaults import CHANGED_ITEMS, CHANGED_ITEMS_CHOICES, MULTIPLE, OFFLINE_JUDGES
from ..metrics import metric_direction, ordered_metrics
from ..stats import DEFAULT_SEED, PairedTest, holm_adjust, min_pairs_for_alpha, paired_tests
from .runs import RunData

ALPHA = 0.05
# The normal quantiles of the 95% interval and of 80% power (the comparison's mde is planned with them).
Z_TWO_SIDED, Z_POWER = 1.959963984540054, 0.8416212335729143

class ComparisonRefused(Exception):
    """Two runs that must not be compared (e.g. judged by different judge models)."""


@dataclass
class MetricComparison:
    metric: str
    a: float | None
    b: float | None
    delta: float | None
    ci: tuple[float, float] | None
    p: float | None
    significant: bool
    n: int
    dropped: int
    # "higher", "lower", or None: a metric with no better direction (abstainRate, a custom metric with
    # better=None) is reported as changed, never gated as a regression.
    direction: str | None
    mde: float | None = None
    required_n: int | None = None
    p_unadjusted: float | None = None
    note: str = ""
    # The kind of question the pairs are of, when the runs mix kinds (each kind is compared on its own).
    kind: str | None = None
    # With clustered items (some cluster holds two items or more): the clusters the pairs fall in, and the
    # design effect (the clustered variance of the delta over the independent-items one). None: no clusters.
    n_clusters: int | None = None
    design_effect: float | None = None
    # A non-inferiority margin (--crucible-margin): the largest drop that does not matter. With one, the
    # verdict asks whether the interval rules out a drop larger than it (see ``verdict``).
    margin: float | None = None

    @property
    def units(self) -> int:
        """What the gate counts against crucible_min_pairs: clusters when the items are clustered, else pairs."""
        return self.n if self.n_clusters is None else self.n_clusters

    @property
    def higher_is_better(self) -> bool:
        return self.direction != "lower"

    @property
    def drops(self) -> tuple[float, float] | None:
        """(smallest, largest) drop the interval allows, in the metric's worse direction (negative: a gain)."""
        if self.ci is None or self.direction is None:
            return None
        return (-self.ci[1], -self.ci[0]) if self.higher_is_better else (self.ci[0], self.ci[1])

    @property
    def verdict(self) -> str:
        drops = self.drops
        if self.margin is not None and drops is not None and self.delta is not None:
            if self.significant and (self.delta > 0) == self.higher_is_better:
                return "improved"
            if drops[1] <= self.margin:
                return "non-inferior"  # no drop larger than the margin is left possible
            return "inferior" if drops[0] > self.margin else "inconclusive"
        if not self.significant or self.delta is None:
            return "not significant"
        if self.direction is None:
            return "changed"
        improved = (self.delta > 0) == self.higher_is_better
        return "improved" if improved else "regressed"

    @property
    def regressed(self) -> bool:
        return self.verdict == "regressed"


@dataclass
class Comparison:
    a: str
    b: str
    paired_items: int
    seed: int
    metrics: dict[str, MetricComparison]
    config_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    multiple: str = MULTIPLE
    # The rows whose p-values were corrected together (Holm): the gated metrics with enough pairs.
    family: tuple[str, ...] = ()
    # Every item of either run left out of the pairs, and why: {"id", "run", "reason"}.
    excluded: list[dict[str, str]] = field(default_factory=list)
    # How items were clustered (field, doc, none) and into how many clusters the paired items fall (None:
    # every item is its own cluster, the independent-items tests ran).
    cluster_by: str = "field"
    clusters: int | None = None
    # Golden conversations among the paired items (their turns cluster by conversation): (turns, conversations,
    # the clusters those turns fall in); None when no paired item is a turn.
    conversations: tuple[int, int, int] | None = None
    # The cutoff K both runs' metrics at K were measured at (None: two different K, and no such row).
    k: int | None = None
    # The golden items both runs ran whose content changed in more than their citations, with the fields
    # (``changed_content``), and what the comparison did with them (``changed_items``: exclude or include).
    changed: dict[str, list[str]] = field(default_factory=dict)
    changed_items: str = CHANGED_ITEMS

    def label(self, name: str) -> str:
        """A row as every surface names it: with its K (``recall@10``)."""
        from ..metrics import with_cutoff

        return with_cutoff(name, self.k)

    def to_json(self) -> dict[str, Any]:
        """The spec's compare shape, plus power, verdicts and the config difference beside it."""
        return {
            "a": self.a,
            "b": self.b,
            "pairedItems": self.paired_items,
            "seed": self.seed,
            "metrics": {
                name: {"a": m.a, "b": m.b, "delta": m.delta, "ci": list(m.ci) if m.ci else None, "p": m.p, "significant": m.significant,
                       **({"metric": m.metric, "kind": m.kind} if m.kind else {}),
                       **({"margin": m.margin} if m.margin is not None else {})}
                for name, m in self.metrics.items()
            },
            "verdicts": {name: m.verdict for name, m in self.metrics.items()},
            "power": {
                name: {"n": m.n, "dropped": m.dropped, "mde": m.mde, "requiredN": m.required_n,
                       **({"clusters": m.n_clusters, "designEffect": m.design_effect} if m.n_clusters is not None else {})}
                for name, m in self.metrics.items()
            },
            "clusterBy": self.cluster_by,
            "clusters": self.clusters,
            **({"conversations": dict(zip(("turns", "conversations", "clusters"), self.conversations))}
               if self.conversations is not None else {}),
            "multiple": self.multiple,
            "k": self.k,
            "family": list(self.family) if self.multiple == "holm" else None,
            "configChanges": {key: {"a": old, "b": new} for key, (old, new) in self.config_changes.items()},
            "warnings": list(self.warnings),
            "excluded": [dict(entry) for entry in self.excluded],
            "changedItems": {"mode": self.changed_items,
                             "items": [{"id": item, "fields": list(fields)} for item, fields in self.changed.items()]},
        }

    def changed_line(self) -> str | None:
        """The one line on the golden items changed since the baseline, as the terminal, junit, the JSON and
        the Markdown say it (None: none changed)."""
        if not self.changed:
            return None
        n = len(self.changed)
        head = f"{n} golden item{'s' if n != 1 else ''} changed since the baseline and {'are' if n != 1 else 'is'}"
        if self.changed_items == "include":
            return f"{head} compared anyway (--crucible-changed-items=include): {changed_listing(self.changed)}"
        return f"{head} not compared: {changed_listing(self.changed)}"


def check_comparable(a: RunData, b: RunData) -> None:
    """Refuse runs whose judge-based numbers come from different judges."""
    for column, label in (("judge_model", "judge models"), ("judge_prompt_version", "judge prompt versions")):
        left, right = a.run.get(column), b.run.get(column)
        if left and right and left != right:
            offline = [model for model in (right, left) if model in OFFLINE_JUDGES]
            how = (f" (for example --crucible-judge={offline[0]}; {OFFLINE_JUDGES[0]} is the offline default, "
                   f"{', '.join(OFFLINE_JUDGES[1:])} stay selectable)"
                   if offline and column == "judge_model" else "")
            if column == "judge_model" and any(str(model).startswith("aligned-") for model in (left, right)):
                how += (" (an aligned judge is named by its file's content: aligned-<hash> is one `crucible judge align` "
                        "file; a new alignment is a new judge)")
            elif column == "judge_prompt_version" and any("+aligned-" in str(version) for version in (left, right)):
                how += (" (a model judge aligned by few-shot examples is named in its prompt version: +aligned-<hash> is "
                        "one `crucible judge align` file; other examples, or none, are other prompts)")
            raise ComparisonRefused(
                f"refusing to compare run {a.run_id} with run {b.run_id}: different {label} ({left} vs {right})\n"
                f"HINT: judge-based metrics are only comparable under the same judge; re-run one side with the other's judge{how}."
            )


def compare_run_data(
    a: RunData,
    b: RunData,
    *,
    metrics: Iterable[str] | None = None,
    seed: int = DEFAULT_SEED,
    n_resamples: int = 10_000,
    n_permutations: int = 10_000,
    multiple: str = MULTIPLE,
    alpha: float = ALPHA,
    cluster: str = "field",
    family: Iterable[str] | None = None,
    family_min_units: int = 0,
    margins: Mapping[str, float] | None = None,
    changed_items: str = CHANGED_ITEMS,
    changed: Mapping[str, list[str]] | None = None,
) -> Comparison:
    """Both significance gates per metric over the paired items. ``cluster``: how items are grouped
    (:func:`item_clusters`); when some cluster holds two items or more, each metric is tested by resampling
    clusters and flipping signs per cluster (``stats.clustered``), else by the independent-items tests.

    ``multiple="holm"``: the p-values of the *family* are adjusted together (Holm), so that the chance of
    calling any of them a regression when none moved stays at or below ``alpha``. The family is the rows the
    gate can fail on: a metric with a better direction, named in ``family`` (None: every such metric), with
    at least ``family_min_units`` pairs (clusters). The other rows keep their own p-values: they are shown,
    never gated.

    ``changed_items``: what becomes of the golden items edited since the baseline (:func:`changed_content`):
    ``exclude`` leaves them out of the pairs (listed in ``excluded`` with their fields), ``include`` pairs them
    as before, ``refuse`` raises :class:`ComparisonRefused` naming them. ``changed``: those items, when the
    caller found them already (``gate.decide_stored``)."""
    if changed_items not in CHANGED_ITEMS_CHOICES:
        raise ValueError(f"changed items {changed_items!r}: expected one of {', '.join(CHANGED_ITEMS_CHOICES)}")
    check_comparable(a, b)
    from ..evaluation.custom_metrics import directions, ruler_changes

    ruler_warnings, refusal = ruler_changes(a.run, b.run, metrics)
    if refusal:
        raise ComparisonRefused(refusal)
    changed = dict(changed_content(a, b) if changed is None else changed)
    if changed and changed_items == "refuse":
        raise ComparisonRefused(changed_refusal(changed, a))
    custom = {**directions(a.run), **directions(b.run)}  # the candidate's (b) direction when they differ
    excluded = excluded_items(a, b, changed if changed_items == "exclude" else {})
    left_out = {entry["id"] for entry in excluded}
    shared = sorted((set(a.item_ids) & set(b.item_ids)) - left_out)
    names = ordered_metrics(set(a.metrics) | set(b.metrics)) if metrics is None else list(metrics)
    other_ruler = embedder_change(a, b) if "responseRelevancy" in names else None
    if other_ruler:
        names = [name for name in names if name != "responseRelevancy"]
        ruler_warnings = [*ruler_warnings, other_ruler]
    other_retention = retention_prompt_change(a, b, names)
    if other_retention:
        names = [name for name in names if name not in RETENTION_METRICS]
        ruler_warnings = [*ruler_warnings, other_retention]
    classes = error_classes_change(a, b)
    if classes:
        ruler_warnings = [*ruler_warnings, classes]
    histories = history_change(a, b, shared)
    if histories:
        ruler_warnings = [*ruler_warnings, histories]
    cutoff = cutoff_change(a, b, names)
    if cutoff:
        from ..metrics import depends_on_k

        names = [name for name in names if not depends_on_k(name)]
        ruler_warnings = [*ruler_warnings, cutoff]
    options = {"seed": seed, "n_resamples": n_resamples, "n_permutations": n_permutations, "alpha": alpha}
    results: dict[str, MetricComparison] = {}
    # A run that mixes kinds of question is compared kind by kind: no delta averages a retrieval
    # question with an attack (the pairs are of one kind: an item that changed kind is left out).
    groups = kind_groups(shared, b)
    to_test: list[tuple[MetricComparison, tuple[list[float], list[float], list[str]]]] = []
    for kind, items in groups:
        for name in names:
            left, right = a.metrics.get(name, {}), b.metrics.get(name, {})
            if kind is not None and not any(item in left or item in right for item in items):
                continue  # a metric no item of this kind has (attack rates of retrieval questions)
            entry, pairs = _compare_metric(name, left, right, items, alpha=alpha, direction=metric_direction(name, custom))
            _refuse_non_finite(name, a, b, left, right, items)
            entry.kind = kind
            results[metric_key(name, kind)] = entry
            if pairs is not None:
                to_test.append((entry, pairs))
        if ((metrics is None or "aurc" in metrics) and a.selective and b.selective
                and (kind is None or any(item in a.selective for item in items))):
            entry = _compare_aurc(a, b, items, **options)
            entry.kind = kind
            results[metric_key("aurc", kind)] = entry

    labels = item_clusters(shared, a, b, cluster)
    clustered = len(set(labels.values())) < len(labels)
    if clustered:
        from ..stats.clustered import ClusteredTest, paired_cluster_tests

        groups_of = [[labels[i] for i in items] for _, (_, _, items) in to_test]
        testable = []
        for index, ((entry, _), group) in enumerate(zip(to_test, groups_of)):
            entry.n_clusters = len(set(group))
            if entry.n_clusters < 2:  # one cluster: nothing to resample, no sign to flip
                entry.note = "not tested: 1 cluster"
            else:
                testable.append(index)
        tests: Sequence[PairedTest] = paired_cluster_tests([to_test[i][1][:2] for i in testable], [groups_of[i] for i in testable],
                                     seed=seed, n_resamples=n_resamples, n_permutations=n_permutations, alpha=alpha)
        tested = [to_test[i] for i in testable]
    else:
        # Every metric in one call: metrics over the same number of pairs share one pass over the random
        # stream (the same bits as one paired_test each; memory bounded on large golden sets).
        tests = paired_tests([(xs, ys) for _, (xs, ys, _) in to_test], seed=seed, n_resamples=n_resamples,
                             n_permutations=n_permutations, alpha=alpha)
        tested = to_test
    for (entry, _), test in zip(tested, tests):
        entry.delta, entry.ci, entry.p = test.delta, (test.ci_low, test.ci_high), test.p_value
        entry.significant, entry.mde, entry.required_n = test.significant, test.mde, test.required_n
        if clustered:
            assert isinstance(test, ClusteredTest)  # paired_cluster_tests' results
            entry.n_clusters, entry.design_effect = test.n_clusters, test.design_effect
            if test.n_clusters < min_pairs_for_alpha(alpha):  # k clusters: no p below 2 / 2**k
                entry.note = f"ns: {test.n_clusters} clusters (need {min_pairs_for_alpha(alpha)})"

    for m in results.values():
        if margins and m.metric in margins:
            m.margin = float(margins[m.metric])
    wanted = set(family) if family else None
    members = [key for key, m in results.items() if m.p is not None and m.direction is not None
               and (wanted is None or m.metric in wanted) and m.units >= family_min_units]
    if multiple == "holm":
        family_rows = [results[key] for key in members]
        for m, adjusted in zip(family_rows, holm_adjust([m.p for m in family_rows if m.p is not None])):
            m.p_unadjusted, m.p = m.p, adjusted
            excludes_zero = m.ci is not None and (m.ci[0] > 0 or m.ci[1] < 0)
            m.significant = bool(excludes_zero and adjusted < alpha)

    changes = config_diff(a.resolved, b.resolved)
    warnings = list(ruler_warnings)
    if len(changes) > 1:
        warnings.append(
            f"{len(changes)} config keys changed ({', '.join(changes)}): isolate one variable, "
            "or a significant difference cannot say which change caused it"
        )
    return Comparison(a=a.run_id, b=b.run_id, paired_items=len(shared), seed=seed, metrics=results,
                      config_changes=changes, warnings=warnings, multiple=multiple, excluded=excluded, cluster_by=cluster,
                      family=tuple(members), k=a.k if a.k == b.k else None,
                      clusters=len(set(labels.values())) if clustered else None, changed=changed, changed_items=changed_items,
                      conversations=conversation_counts(shared, a, b, labels))


def changed_content(a: RunData, b: RunData) -> dict[str, list[str]]:
    """item -> the content fields (``golden_set.changes.CONTENT_FIELDS``) its golden item differs in between
    the baseline ``a`` and the candidate ``b``, for every item both runs ran whose content changed in more than
    its citations, in item order. A change of citations alone keeps the item a pair: it moves the ruler
    (``ruler.prepare_pair`` warns, ``--crucible-rescore`` measures both runs against today's grades). Nothing
    when a run did not keep its golden items. Two stored items with equal texts are not decoded."""
    from ..golden_set.changes import CONTENT_FIELDS, changed_fields
    from .runs import same_content

    if not a.golden or not b.golden:
        return {}
    shared = set(a.item_ids) & set(b.item_ids)
    golden_a = {dict.get(item, "id"): item for item in a.golden}  # dict.get: an id is never decoded (StoredItem)
    changed: dict[str, list[str]] = {}
    for after in b.golden:
        item_id = dict.get(after, "id")
        before = golden_a.get(item_id) if item_id in shared else None
        if before is None or same_content(before, after):
            continue
        if all(before.get(name) == after.get(name) for name in CONTENT_FIELDS):
            continue  # equal as they are (an exported run's items): no defaults to fill in
        fields = changed_fields(before, after)
        if fields and fields != ["citations"]:
            changed[str(item_id)] = fields
    return dict(sorted(changed.items()))


def changed_listing(changed: Mapping[str, Sequence[str]]) -> str:
    """``h04 (question), h09 (reference, citations), ...``: the first few changed items with their fields."""
    from .ruler import first_few

    return first_few([f"{item} ({', '.join(fields)})" for item, fields in changed.items()])


def changed_refusal(changed: Mapping[str, Sequence[str]], baseline: RunData) -> str:
    """Why the gate refuses under ``--crucible-changed-items=refuse``, and how to go on."""
    n = len(changed)
    return (f"{n} golden item{'s' if n != 1 else ''} changed since the baseline {baseline.run_id}: {changed_listing(changed)}; "
            "refusing to compare (--crucible-changed-items=refuse)\n"
            "HINT: update the baseline (run the golden set as it is now, and compare against that run), or pass "
            "--crucible-changed-items=exclude to leave the changed items out of the pairs, or =include to compare them "
            "anyway (crucible compare and crucible report: --changed-items)")


def cutoff_change(a: RunData, b: RunData, names: Iterable[str]) -> str | None:
    """Why the metrics at K cannot be compared between the runs (they were cut off at different K), or None.
    K is each run's recorded cutoff (ini crucible_k): precision at 10 against precision at 1 measures two
    different things, so those rows are left out (a gate on one of them refuses: ``gate.decide``)."""
    from ..metrics import depends_on_k

    at_k = sorted(name for name in names if depends_on_k(name))
    k_a, k_b = a.k, b.k
    if not at_k or k_a == k_b:
        return None
    from ..metrics import display_name

    pairs = ", ".join(f"{display_name(name, k_a)} vs {display_name(name, k_b)}" for name in at_k)
    return (f"the ruler changed: the metrics at K were cut off at K = {k_a} in {a.run_id} and K = {k_b} in {b.run_id} "
            f"(ini crucible_k): {pairs}; left out of the comparison. Compare them at one K: rescore both runs from their "
            f"stored rankings at K = {k_a} (--crucible-rescore, crucible compare --rescore), or measure both with "
            f"crucible_k = {k_a}")


def embedder_change(a: RunData, b: RunData) -> str | None:
    """Why responseRelevancy cannot be compared between the runs (their embedders differ), or None.
    A run that records none was measured before runs recorded their embedder: the hashing stand-in,
    unless its project's crucible_embedder fixture said otherwise."""
    left, right = a.run.get("embedder"), b.run.get("embedder")
    if left == right or not (a.metrics.get("responseRelevancy") and b.metrics.get("responseRelevancy")):
        return None
    shown = lambda name: name or "not recorded (hashing-v1 unless crucible_embedder was overridden)"  # noqa: E731
    return (f"the ruler changed: responseRelevancy was measured with embedder {shown(left)} in {a.run_id} and "
            f"{shown(right)} in {b.run_id}, so it is left out of the comparison; re-run the baseline to compare it")


RETENTION_METRICS = ("knowledgeRetained", "knowledgeRetention")


def _retention_prompt(run: RunData) -> str | None:
    stats = run.run.get("judge_stats")
    if isinstance(stats, str):
        try:
            stats = json.loads(stats)
        except ValueError:
            return None
    return stats.get("retentionPrompt") if isinstance(stats, dict) else None


def retention_prompt_change(a: RunData, b: RunData, names: Iterable[str]) -> str | None:
    """Why the knowledge retention metrics cannot be compared (the retention prompt, or the offline judge's
    retention rule, is versioned apart from the judge's other prompts and differs between the runs), or None.
    A run that records none (judged before the version was recorded, a merge of shards that disagree) is compared."""
    left, right = _retention_prompt(a), _retention_prompt(b)
    if not left or not right or left == right or not any(name in RETENTION_METRICS for name in names):
        return None
    return (f"the ruler changed: knowledgeRetained and knowledgeRetention were judged with retention prompt {left} in "
            f"{a.run_id} and {right} in {b.run_id}, so they are left out of the comparison; re-run the baseline to compare them")


def error_classes_change(a: RunData, b: RunData) -> str | None:
    """A note when the runs' items were classed by different error class sets (``defaults.ERROR_CLASSES_VERSION``;
    a run that records none was classed by the first), or None. The metrics compare as they are; the class counts
    do not mean the same."""
    left, right = a.run.get("error_classes") or 1, b.run.get("error_classes") or 1
    if left == right:
        return None
    return (f"the error classes changed between the runs (class set {left} in {a.run_id}, {right} in {b.run_id}): "
            "since set 2 an answer faithful to its context but wrong is wrong_passage, not hallucination, so the "
            "class counts differ for that reason too; the metrics are compared as before")


def history_change(a: RunData, b: RunData, shared: Sequence[str]) -> str | None:
    """A note when the runs answered the later turns of golden conversations on different histories
    (``crucible_conversation``: live, the pipeline's own earlier answers; replay, the author's), or None. A
    run that records none answered live. Only turns after the first differ: the first has no history."""
    left, right = a.run.get("conversation_history") or "live", b.run.get("conversation_history") or "live"
    if left == right:
        return None
    golden = _golden_by_id(a, b)
    later = [item_id for item_id in shared if ((golden.get(item_id) or {}).get("conversation") or {}).get("turn", 1) > 1]
    if not later:
        return None
    return (f"the conversations' later turns were answered on different histories ({left} in {a.run_id}, {right} in "
            f"{b.run_id}): {len(later)} turn(s) after the first are compared as they are, but a change there may be the "
            "history's, not the system's; run both with the same --crucible-conversation to compare them")


CLUSTER_MODES = ("field", "doc", "none")


def _golden_by_id(a: RunData, b: RunData) -> dict[str, Any]:
    """Both runs' golden items by id, the baseline's version where both kept one."""
    return {item["id"]: item for run in (b, a) for item in run.golden if isinstance(item, dict) and "id" in item}


def _conversation_of(item: Any) -> str | None:
    turn = item.get("conversation") if isinstance(item, dict) else None
    return turn.get("id") if isinstance(turn, dict) and isinstance(turn.get("id"), str) else None


def item_clusters(items: list[str], a: RunData, b: RunData, mode: str = "field") -> dict[str, str]:
    """item -> its cluster label. ``field``: the golden item's ``cluster`` (unset: the item is its own);
    ``doc``: the document of its first required citation (none: its own); ``none``: every item its own.
    A turn of a golden conversation is in its conversation's cluster under ``field`` (unless the conversation
    sets a ``cluster``, which holds whole conversations) and ``doc``: turns of one conversation never move
    independently. The baseline's version of an item decides (items are paired by id), the candidate's when
    the baseline did not keep its golden items."""
    if mode not in CLUSTER_MODES:
        raise ValueError(f"cluster mode {mode!r}: expected one of {', '.join(CLUSTER_MODES)}")
    golden = _golden_by_id(a, b)
    labels = {}
    for item_id in items:
        item = golden.get(item_id) or {}
        label = None
        conversation = _conversation_of(item) if mode != "none" else None
        if mode == "field":
            label = item.get("cluster")
        elif mode == "doc" and conversation is None:
            label = next((c.get("docId") for c in item.get("citations") or [] if c.get("mode", "required") == "required"
                          and c.get("docId")), None)
        if label is None and conversation is not None:
            labels[item_id] = f"conversation:{conversation}"
            continue
        labels[item_id] = f"cluster:{label}" if label else f"item:{item_id}"  # an item alone never meets a cluster's name
    return labels


def conversation_counts(items: list[str], a: RunData, b: RunData, labels: dict[str, str]) -> tuple[int, int, int] | None:
    """(turns, conversations, the clusters of ``labels`` the turns fall in) of the golden conversations among
    ``items``; None when none is a turn."""
    golden = _golden_by_id(a, b)
    turns = {item: conversation for item in items if (conversation := _conversation_of(golden.get(item))) is not None}
    return (len(turns), len(set(turns.values())), len({labels[item] for item in turns})) if turns else None


def metric_key(metric: str, kind: str | None) -> str:
    """A comparison row's name: the metric, qualified by its kind when the runs mix kinds (``ndcgAt10 [retrieval]``)."""
    return metric if kind is None else f"{metric} [{kind}]"


def kind_groups(items: list[str], run: RunData) -> list[tuple[str | None, list[str]]]:
    """[(None, items)] when the items are of one kind, else one group per kind (in KINDS order)."""
    from ..defaults import KINDS

    by_kind: dict[str, list[str]] = {}
    for item in items:
        by_kind.setdefault(run.kinds.get(item) or "retrieval", []).append(item)
    if len(by_kind) < 2:
        return [(None, list(items))]
    order = {kind: index for index, kind in enumerate(KINDS)}
    return [(kind, by_kind[kind]) for kind in sorted(by_kind, key=lambda k: (order.get(k, len(order)), k))]


def _refuse_non_finite(name: str, a: RunData, b: RunData, left: Mapping[str, float], right: Mapping[str, float],
                       items: list[str]) -> None:
    """A NaN or an infinity among the values to compare is no number a mean or a resample can hold: refuse,
    naming the metric, the item and the run, instead of a ValueError deep in the statistics."""
    for run, values in ((a, left), (b, right)):
        if math.isfinite(sum(values.values())):  # the usual case, in one pass (a huge finite sum may overflow: then look)
            continue
        for item in items:
            value = values.get(item)
            if value is not None and not math.isfinite(value):
                raise ComparisonRefused(
                    f"{name} of item {item} is {value!r} in run {run.run_id}: a comparison needs finite numbers\n"
                    "HINT: a custom metric (or an imported run) produced it; fix it to return a number in its range, "
                    "or leave the item out")


def _compare_metric(name: str, left: Mapping[str, float], right: Mapping[str, float], items: list[str], *,
                    alpha: float, direction: str | None) -> tuple[MetricComparison, tuple[list[float], list[float], list[str]] | None]:
    """One metric over the paired items that have it on both sides: its row, and the pairs its test
    (both significance gates) runs on, None below 2 pairs; ``compare_run_data`` tests them all at once."""
    if list(left) == items == list(right):  # the usual case: every item has it in both runs (read in item order)
        both, dropped, xs, ys = items, 0, list(left.values()), list(right.values())
    else:
        both = [item for item in items if item in left and item in right]
        dropped = sum(1 for item in items if (item in left) != (item in right))
        xs = [left[item] for item in both]
        ys = [right[item] for item in both]
    entry = MetricComparison(
        metric=name,
        a=sum(xs) / len(xs) if xs else None,
        b=sum(ys) / len(ys) if ys else None,
        delta=None, ci=None, p=None, significant=False,
        n=len(both), dropped=dropped, direction=direction,
    )
    if len(both) < 2:
        entry.note = f"not tested: {len(both)} pair{'s' if len(both) != 1 else ''}"
        return entry, None
    if len(both) < min_pairs_for_alpha(alpha):
        # With so few pairs even a sign-flip test where every pair agrees cannot reach p < alpha.
        entry.note = f"ns: {len(both)} pairs (need {min_pairs_for_alpha(alpha)})"
    return entry, (xs, ys, both)


def excluded_items(a: RunData, b: RunData, changed: Mapping[str, Sequence[str]] | None = None) -> list[dict[str, str]]:
    """Every item of either run that cannot be a pair, with the reason: its golden item changed since the
    baseline (``changed``: item -> its changed fields, left out), it errored in a run, ran in only one of them,
    changed kind, or has no metric value in a run. Nothing leaves the pairs silently."""
    changed = changed or {}
    excluded = []
    in_a, in_b = set(a.item_ids), set(b.item_ids)  # membership in O(1): item_ids is a list (O(n^2) at 100k items)
    unmeasured = {id(run): _unmeasured(run, present) for run, present in ((a, in_a), (b, in_b))}
    # Only these items can have a reason (missing from a run, errored, another kind, no metric value); the
    # others, usually all of them, are pairs: found with set operations rather than item by item.
    changed_kind = set() if a.kinds == b.kinds else {
        item for item in in_a & in_b if a.kinds.get(item, "retrieval") != b.kinds.get(item, "retrieval")}
    suspects = ((in_a ^ in_b) | (a.errored.keys() & in_a) | (b.errored.keys() & in_b) | changed_kind
                | unmeasured[id(a)] | unmeasured[id(b)] | set(changed))
    for item in sorted(suspects):
        if item in changed:  # ran in both: whatever else befell it, it is another question now
            excluded.append({"id": item, "run": b.run_id, "reason": f"changed since the baseline: {', '.join(changed[item])}"})
            continue
        reasons = []
        for side, run, other, present in (("A", a, b, in_a), ("B", b, a, in_b)):
            if item not in present:
                kind = other.kinds.get(item)
                selected = run.run.get("kinds")
                if isinstance(selected, str):
                    selected = json.loads(selected)
                why = f" (kind {kind} not selected)" if kind and selected and kind not in selected else ""
                reasons.append((side, f"missing from {side}{why}"))
            elif item in run.errored:
                first = str(run.errored[item]).splitlines()[0] if run.errored[item] else ""
                reasons.append((side, f"errored in {side}: {first[:120]}"))
        if not reasons and a.kinds.get(item, "retrieval") != b.kinds.get(item, "retrieval"):
            reasons.append(("A", f"different kind ({a.kinds.get(item)} in A, {b.kinds.get(item)} in B)"))
        if not reasons:
            for side, run in (("A", a), ("B", b)):
                if item in unmeasured[id(run)]:
                    reasons.append((side, f"no metric value in {side}"))
        for side, reason in reasons[:1]:
            excluded.append({"id": item, "run": (a if side == "A" else b).run_id, "reason": reason})
    return excluded


def _unmeasured(run: RunData, present: set[str]) -> set[str]:
    """The items of ``present`` with no metric value in ``run``: each metric in turn removes the items it has
    (usually the first one leaves none, and the others are not looked at)."""
    left = present
    for values in run.metrics.values():
        if not left:
            break
        left = {item for item in left if item not in values}
    return left


def _compare_aurc(a: RunData, b: RunData, shared: list[str], **options: Any) -> MetricComparison:
    """AURC is a statistic of the whole run, not a mean of items: tested by resampling items (see run_level)."""
    from ..metrics.selective import aurc
    from ..stats.run_level import paired_aurc_test

    both = [item for item in shared if item in a.selective and item in b.selective]
    dropped = sum(1 for item in shared if (item in a.selective) != (item in b.selective))  # shared: the group's items
    xs, ys = [a.selective[i] for i in both], [b.selective[i] for i in both]
    entry = MetricComparison(
        metric="aurc",
        a=aurc([c for c, _ in xs], [ok for _, ok in xs]) if xs else None,
        b=aurc([c for c, _ in ys], [ok for _, ok in ys]) if ys else None,
        delta=None, ci=None, p=None, significant=False, n=len(both), dropped=dropped, direction="lower",
    )
    if len(both) < 2:
        entry.note = f"not tested: {len(both)} pair{'s' if len(both) != 1 else ''}"
        return entry
    test = paired_aurc_test(xs, ys, **options)
    entry.delta, entry.ci, entry.p, entry.significant = test.delta, (test.ci_low, test.ci_high), test.p_value, test.significant
    return entry


def regression_reasons(comparison: Comparison, gated: Iterable[str] | None = None) -> list[str]:
    """One line per gated metric (default: every compared one) that regressed significantly."""
    names = set(comparison.metrics) if gated is None else set(gated)
    lines = []
    for name, m in comparison.metrics.items():
        if name not in names or not m.regressed:
            continue
        assert m.ci is not None  # a significant row was tested: it has its interval
        lines.append(f"{comparison.label(name)} regressed: {m.a:.4f} -> {m.b:.4f} (delta {m.delta:+.4f}, "
                     f"95% CI [{m.ci[0]:+.4f}, {m.ci[1]:+.4f}], p = {m.p:.4f}, n = {m.n})")
    return lines


def margin_reasons(comparison: Comparison, gated: Iterable[str] | None = None) -> list[str]:
    """One line per gated metric with a margin whose interval does not rule out a drop larger than it:
    ``inferior`` (the whole interval is beyond the margin) or ``inconclusive`` (it straddles the margin),
    with the items that would tell. Both fail the gate: with a margin, a pass needs the evidence."""
    names = set(comparison.metrics) if gated is None else set(gated)
    lines = []
    for name, m in comparison.metrics.items():
        if name not in names or m.verdict not in ("inferior", "inconclusive"):
            continue
        # these verdicts are given with a margin to a tested row (see MetricComparison.verdict)
        assert m.margin is not None and m.delta is not None and m.ci is not None and m.drops is not None
        where = f"({m.a:.4f} -> {m.b:.4f}, delta {m.delta:+.4f}, 95% CI [{m.ci[0]:+.4f}, {m.ci[1]:+.4f}], n = {m.n})"
        if m.verdict == "inferior":
            lines.append(f"{comparison.label(name)} is inferior: it dropped by more than the margin {m.margin:g} {where}")
            continue
        estimate = -m.delta if m.higher_is_better else m.delta  # the estimated drop
        need = ""
        if m.mde and estimate < m.margin:
            # the items whose interval would clear the margin at this estimate and spread (the spread
            # read back from the mde, which carries the design effect with clusters)
            spread = m.mde * math.sqrt(m.n) / (Z_TWO_SIDED + Z_POWER)
            need = f"; about {math.ceil((Z_TWO_SIDED * spread / (m.margin - estimate)) ** 2)} items would tell"
        elif estimate >= m.margin:
            need = "; the estimate itself is beyond the margin"
        lines.append(f"{comparison.label(name)} is inconclusive against the margin {m.margin:g}: a drop of up to {m.drops[1]:.4f} is "
                     f"not ruled out {where}{need}")
    return lines


def undetected_drops(comparison: Comparison, gated: Iterable[str] | None = None) -> list[str]:
    """A pass that is only a lack of power: one line per gated metric that is not significant while its
    interval still allows a drop larger than the smallest change these pairs can detect (its mde).
    "Not significant" there is no evidence that nothing regressed."""
    names = set(comparison.metrics) if gated is None else set(gated)
    lines = []
    for name, m in comparison.metrics.items():
        if name not in names or m.significant or m.ci is None or m.mde is None or m.direction is None or m.margin is not None:
            continue
        drop = -m.ci[0] if m.higher_is_better else m.ci[1]  # the worst change the interval allows
        if drop > m.mde:
            more = f"; about {m.required_n} items would tell" if m.required_n else ""
            lines.append(f"underpowered: {comparison.label(name)} is not significant, but a drop of up to {drop:.3f} is not ruled out "
                         f"(these {m.units} {'clusters' if m.n_clusters is not None else 'pairs'} detect {m.mde:.3f}{more})")
    return lines


def floor_failures(means: Mapping[str, float], floors: Mapping[str, float],
                   custom: Mapping[str, str | None] | None = None) -> list[str]:
    """Absolute floors (``--crucible-fail-under``): one reason per metric below its floor (above it, for a
    lower-is-better metric). ``custom``: the run's custom metrics' directions."""
    reasons = []
    for metric, floor in floors.items():
        value = means.get(metric)
        lower = metric_direction(metric.split(" [")[0], custom) == "lower"  # a row name may carry its kind
        if value is None:
            reasons.append(f"{metric}: no value in this run (floor {floor})")
        elif (value > floor) if lower else (value < floor):
            word = "above" if lower else "below"
            reasons.append(f"{metric} = {value:.4f} is {word} the floor {floor}")
    return reasons
