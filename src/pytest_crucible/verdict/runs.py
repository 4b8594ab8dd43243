"""The run model: what a comparison, a gate, a floor and a metrics document read of one run.

A :class:`RunData` is built from the store's rows (:func:`load_run`) or from an exported run
(:func:`run_data_from_export`); both go through :func:`run_data_from_rows`, so a run reads the
same whichever door it came in by. Pure data: no SQL here (that is ``store/``), no statistics
(that is ``stats/``).

A run a user names is parsed and found once, for every surface (the plugin's ``--crucible-baseline``,
``crucible compare/report/show``, the HTTP API's compare, ``Store.resolve_run``): :func:`parse_run_ref`
reads the reference (a run id or prefix, ``latest``, ``latest:KEY=VALUE,...``, an exported ``.json``) and
:func:`resolve_run_ref` finds the run it names. Both live in ``store/refs.py`` and are re-exported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..golden_set.changes import CONTENT_FIELDS

# A run a user names is read and found in the store (one resolver, which Store.resolve_run calls too);
# these names stay importable from here, beside the run model that reads the run.
from ..store.refs import (  # noqa: F401
    COMPLETE,
    HINT_VALUES,
    LATEST,
    REF_EXAMPLE,
    WORKSPACE_KEY,
    RunRef,
    carried_labels,
    find_runs,
    is_export_path,
    labels_of,
    parse_run_ref,
    resolve_run_ref,
    started_at,
)

if TYPE_CHECKING:
    from ..store import Store

#: Metric -> (mean, n), as :func:`metric_means` gives it.
Means = dict[str, tuple[float, int]]
#: What :func:`stored_means` returns: the means over every item, and the means kind by kind.
StoredMeans = tuple[Means, list[tuple[str | None, Means]]]


@dataclass
class RunData:
    """What a comparison needs of a run: its row and its per-item metrics."""

    run: dict[str, Any]
    metrics: dict[str, dict[str, float]]  # metric -> {item_id: value}
    item_ids: list[str]
    # item_id -> (confidence, correct) for run-level selective prediction (AURC).
    selective: dict[str, tuple[float, bool]] = field(default_factory=dict)
    # The run's golden items as run (facets, kinds); empty when the caller did not need them.
    golden: list[dict[str, Any]] = field(default_factory=list)
    # Items whose judging failed after retries (they lack judge-based metrics).
    judge_failed: list[str] = field(default_factory=list)
    # item_id -> the pipeline's error (the item was run and has no metrics).
    errored: dict[str, str] = field(default_factory=dict)
    # item_id -> its kind (retrieval, aggregation, adversarial) as it ran.
    kinds: dict[str, str] = field(default_factory=dict)
    # item_id -> the ranking it retrieved, as (chunk_id, doc_id); read only when a rescoring needs it.
    rankings: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.run["id"]

    @property
    def status(self) -> str | None:
        return self.run.get("status")

    @property
    def resolved(self) -> dict[str, Any]:
        value = self.run.get("resolved")
        if isinstance(value, str):
            return json.loads(value)
        return value or {}

    @property
    def k(self) -> int:
        """The cutoff its metrics at K were measured at (``metrics.run_cutoff``)."""
        from ..metrics import run_cutoff

        return run_cutoff(self.run)

    @property
    def directions(self) -> dict[str, str | None]:
        """The run's custom metrics and their directions ("higher", "lower", None), as it recorded them."""
        from ..evaluation.custom_metrics import directions

        return directions(self.run)

    def restricted(self, item_ids: set[str]) -> RunData:
        """The same run seen through a subset of its items (e.g. one facet value)."""
        kept = {metric: {i: v for i, v in values.items() if i in item_ids} for metric, values in self.metrics.items()}
        return RunData(
            run=self.run,
            metrics={metric: values for metric, values in kept.items() if values},  # a metric no kept item has is not measured
            item_ids=[i for i in self.item_ids if i in item_ids],
            selective={i: pair for i, pair in self.selective.items() if i in item_ids},
            golden=[item for item in self.golden if item.get("id") in item_ids],
            judge_failed=[i for i in self.judge_failed if i in item_ids],
            errored={i: e for i, e in self.errored.items() if i in item_ids},
            kinds={i: k for i, k in self.kinds.items() if i in item_ids},
            rankings={i: r for i, r in self.rankings.items() if i in item_ids},
        )

    @property
    def unrecorded(self) -> int:
        """Items that ran but were never recorded (see :func:`unrecorded_items`)."""
        return unrecorded_items(self.run)

    @property
    def scored(self) -> int:
        """Items the pipeline answered (errored items have no metrics)."""
        return len(self.item_ids) - len(self.errored)

    def means(self) -> dict[str, float]:
        """Every metric's run mean (see :func:`metric_means`)."""
        return {metric: mean for metric, (mean, _) in metric_means(self.metrics).items()}


def metric_names(runs: Iterable[RunData]) -> set[str]:
    """Every metric name the runs measured or declared (their custom metrics included): the names an option
    of a comparison (--gate, --fail-under, --metrics) may use once the runs are read."""
    return {name for run in runs for name in (*run.metrics, *run.directions)}


def unrecorded_items(run: dict[str, Any]) -> int:
    """Items of a run that ran but whose scores the store could not write (a full disk): the run row counts
    them in ``n_items`` and not in ``n_scored`` or ``n_errored`` (``Store.finish_run``). 0 for a run without
    those counts (running, killed, or stored before schema 8)."""
    if run.get("n_scored") is None or run.get("n_errored") is None:
        return 0
    return max(0, (run.get("n_items") or 0) - run["n_scored"] - run["n_errored"])


def metric_means(item_metrics: dict[str, dict[str, float]]) -> dict[str, tuple[float, int]]:
    """metric -> (mean over the items that have it, n): the one definition of a run's mean, read by the
    floors, the JSON documents, the terminal and the HTML report. A metric no item has is left out."""
    return means_of_values({metric: values.values() for metric, values in item_metrics.items()})


def means_of_values(values: dict[str, Any]) -> dict[str, tuple[float, int]]:
    """:func:`metric_means` of metric -> its values in item order (a list, or a dict's values): the same
    additions in the same order, so the same bits."""
    return {metric: (sum(numbers) / len(numbers), len(numbers)) for metric, numbers in values.items() if len(numbers)}


def kind_order(kinds: Iterable[str]) -> list[str]:
    """Kinds of question in KINDS order, then any other by name."""
    from ..defaults import KINDS

    return sorted(kinds, key=lambda kind: (KINDS.index(kind) if kind in KINDS else len(KINDS), kind))


def stored_means(store: Store, run_id: str, metrics: Iterable[str] | None = None) -> StoredMeans:
    """A stored run's :func:`metric_means` over every item, and its means kind by kind as
    ``report.terminal.kind_means`` takes them: ``[(None, means)]`` for a run of one kind, else one entry per
    kind of its golden items (an item without a golden row in none). Read as values in item order (no item
    id per value unless the run mixes kinds): the same numbers as the means of ``Store.item_metrics``."""
    from ..store.aggregates import kind_counts, metric_rows, metric_values

    kinds = {kind or "retrieval" for kind in kind_counts(store, run_id)}
    if len(kinds) < 2:
        means = means_of_values(metric_values(store, run_id, metrics))
        return means, [(None, means)]
    item_kinds = store.item_kinds(run_id)
    overall: dict[str, list[float]] = {}
    split: dict[str, dict[str, list[float]]] = {kind: {} for kind in kinds}
    for metric, item_id, value in metric_rows(store, run_id, metrics):
        overall.setdefault(metric, []).append(value)
        kind = item_kinds.get(item_id)
        if kind is not None:
            split[kind].setdefault(metric, []).append(value)
    return means_of_values(overall), [(kind, means_of_values(split[kind])) for kind in kind_order(kinds)]


def selective_pairs(results: Iterable[dict[str, Any]]) -> dict[str, tuple[float, bool]]:
    """item -> (confidence, correct) for the items with both a confidence and a CRAG grade."""
    from ..metrics.crag import is_correct

    return {row["item_id"]: (float(row["confidence"]), is_correct(row["crag_grade"]))
            for row in results if row.get("confidence") is not None and row.get("crag_grade")}


def run_data_from_rows(run: dict[str, Any], metrics: dict[str, dict[str, float]], results: Iterable[dict[str, Any]],
                       golden: Sequence[dict[str, Any]] | None = None, kinds: dict[str, str] | None = None) -> RunData:
    rows = list(results)
    golden = list(golden or [])
    if kinds is None:
        kinds = {item["id"]: item.get("kind") or "retrieval" for item in golden if isinstance(item, dict) and "id" in item}
    return RunData(run=run, metrics=metrics, item_ids=sorted(row["item_id"] for row in rows),
                   selective=selective_pairs(rows), golden=golden,
                   judge_failed=sorted(row["item_id"] for row in rows if row.get("judge_errors")),
                   errored={row["item_id"]: row["error"] for row in rows if row.get("error")}, kinds=kinds,
                   rankings={row["item_id"]: [(chunk.get("chunk_id"), chunk.get("doc_id")) for chunk in row["retrieved"]]
                             for row in rows if isinstance(row.get("retrieved"), list)})


# What a comparison reads of a golden item (the ruler: its citations; the clusters: ``cluster``, the first
# required citation's document or a turn's conversation; the kinds; the changed items: every content field): a stored run's golden items
# are read with these fields only (a 100,000-item run decodes a fraction of each item). FACET_FIELDS: and what
# ``--facet`` reads.
COMPARISON_FIELDS = ("id", "kind", "cluster", "citations", "conversation")
FACET_FIELDS = (*COMPARISON_FIELDS, "questionType", "popularity", "dynamism", "answerable", "tags")
# The content fields (golden_set.changes.CONTENT_FIELDS) but the kind, citations first: read as the text of one
# JSON array beside each stored item's fields, and decoded only when two runs' texts differ.
RAW_FIELDS = ("citations", *(name for name in CONTENT_FIELDS if name not in ("citations", "kind")))


class StoredItem(dict[str, Any]):
    """A stored golden item as a comparison reads it (the fields it was read with), its content fields
    (``RAW_FIELDS``) decoded on first use from the JSON text kept beside (``raw_json``): the ruler and the
    changed items' check compare two runs' texts, and decode an item only when they differ (or, for the
    ruler, a judgment was added since)."""

    __slots__ = ("_decoded", "_read", "raw_json")

    def __init__(self, fields: dict[str, Any], raw_json: Any, read: frozenset[str] = frozenset()) -> None:
        super().__init__(fields)
        for name in CONTENT_FIELDS:  # a content field the item does not say (a kind left out) is absent, as in the item
            if dict.get(self, name, False) is None:
                dict.__delitem__(self, name)
        self.raw_json = raw_json
        # The fields read with the item (absent: the item does not say them): never a reason to decode the rest.
        self._read = read
        self._decoded = False

    def _decode(self) -> None:
        if self._decoded:
            return
        self._decoded = True
        text = self.raw_json
        values = json.loads(text) if isinstance(text, str) else text
        for name, value in zip(RAW_FIELDS, values if isinstance(values, list) else []):
            # null: the item does not say (a reader's default applies); a field read with the item stays as read
            if value is not None and not dict.__contains__(self, name):
                dict.__setitem__(self, name, value)

    def get(self, key: Any, default: Any = None) -> Any:
        if key in RAW_FIELDS and key not in self._read:
            self._decode()
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        if key in RAW_FIELDS and key not in self._read:
            self._decode()
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        if key in RAW_FIELDS and key not in self._read:
            self._decode()
        return dict.__contains__(self, key)


def same_content(a: Any, b: Any) -> bool:
    """Whether two versions of a golden item surely hold one content without decoding either: both read from a
    store (:class:`StoredItem`) with equal texts of their content fields, and one kind. False: decode to tell."""
    text = getattr(a, "raw_json", None)
    return isinstance(text, str) and text == getattr(b, "raw_json", None) and dict.get(a, "kind") == dict.get(b, "kind")


def load_run(store: Store, run_id: str, *, golden: bool | tuple[str, ...] = False, rankings: bool = False) -> RunData:
    """A stored run (``run_id`` already resolved); ``golden`` also reads its golden items (True: the fields of
    COMPARISON_FIELDS; or these fields; and their content fields, decoded on first use) as :class:`StoredItem`,
    ``rankings`` what each item retrieved (for a rescoring)."""
    from ..json_input import gc_paused
    from ..store.aggregates import golden_fields_and_json

    # A run of 100,000 items is half a million rows, items and values that cannot form a cycle: the
    # collections their allocation triggers would walk them again and again while they are read.
    with gc_paused():
        rows = store.result_rows(run_id, rankings=rankings)
        items = None
        if golden:
            fields = [field for field in (COMPARISON_FIELDS if isinstance(golden, bool) else golden) if field != "citations"]
            read = frozenset(fields)
            items = [StoredItem(values, text, read) for values, text in golden_fields_and_json(store, run_id, fields, RAW_FIELDS)]
        # the kinds as Store.item_kinds reads them (from the golden items just read, when they were)
        kinds = {item["id"]: item.get("kind") or "retrieval" for item in items} if items is not None else store.item_kinds(run_id)
        return run_data_from_rows(store.get_run(run_id), store.item_metrics(run_id), rows, items, kinds=kinds)


def run_data_from_export(document: dict[str, Any]) -> RunData:
    """An exported run (already validated by ``store.read_export``)."""
    return run_data_from_rows(document["run"], document["itemMetrics"], document["results"],
                              [golden["item"] for golden in document.get("goldenItems", [])])



def read_run(ref: str, store: Store | None, *, workspace: str | None = None, exclude: str | None = None,
             golden: bool | tuple[str, ...] = False, rankings: bool = False) -> RunData:
    """A run named by a user (:func:`parse_run_ref`): an exported ``.json``, or a run of ``store`` found by
    :func:`resolve_run_ref` (``latest``: the newest complete run of ``workspace``, other than ``exclude``).

    Raises ``StoreError`` (a malformed reference, file unreadable, no such run, ambiguous prefix) with a HINT."""
    from ..store import StoreError, read_export

    parsed = parse_run_ref(ref)
    if parsed.export:
        return run_data_from_export(read_export(ref))
    if store is None:
        raise StoreError(f"no run '{ref}': there is no crucible database yet\nHINT: run the golden set once, "
                         "or name an exported run .json")
    return load_run(store, resolve_run_ref(store, parsed, workspace=workspace, exclude=exclude),
                    golden=golden, rankings=rankings)


# -- runs named by a user: parse_label_args, parse_since (the rest is store/refs.py) ---------------

def parse_label_args(values: Iterable[str], option: str = "--label") -> dict[str, str]:
    """``--label`` filters of a command: ``KEY=VALUE`` (as ``--crucible-label`` writes them) or ``KEY:VALUE``,
    split at the first ``=`` or ``:`` (a value may hold either). ValueError with an example."""
    from ..config import parse_labels

    return parse_labels(values, separators="=:", option=option, expected="KEY:VALUE or KEY=VALUE",
                        example=f"{option} branch=main (repeatable: every label must match)")


def parse_since(text: str, option: str = "--since", now: datetime | None = None) -> datetime:
    """``30d`` (days), ``12h`` (hours) before ``now``, or an ISO date or time (UTC unless it says otherwise)."""
    now = now or datetime.now(timezone.utc)
    match = re.fullmatch(r"\s*(\d+)\s*([dh])\s*", text.lower())
    try:
        if match:
            amount = int(match.group(1))
            return now - (timedelta(days=amount) if match.group(2) == "d" else timedelta(hours=amount))
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        raise ValueError(f"{option} {text!r}: expected Nd (days), Nh (hours) or an ISO date\n"
                         f"HINT: e.g. {option} 30d, {option} 12h or {option} 2025-06-01") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
