"""The run model: what a comparison, a gate, a floor and a metrics document read of one run.

A :class:`RunData` is built from the store's rows (:func:`load_run`) or from an exported run
(:func:`run_data_from_export`); both go through :func:`run_data_from_rows`, so a run reads the
same whichever door it came in by. Pure data: no SQL here (that is ``store/``), no statistics
(that is ``stats/``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from ..store import Store

# Run statuses a gate takes at face value; any other needs --crucible-allow-incomplete.
COMPLETE = "complete"


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

    def restricted(self, item_ids: set[str]) -> "RunData":
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
    return {metric: (sum(values.values()) / len(values), len(values)) for metric, values in item_metrics.items() if values}


def selective_pairs(results: Iterable[dict[str, Any]]) -> dict[str, tuple[float, bool]]:
    """item -> (confidence, correct) for the items with both a confidence and a CRAG grade."""
    from ..metrics.crag import is_correct

    return {row["item_id"]: (float(row["confidence"]), is_correct(row["crag_grade"]))
            for row in results if row.get("confidence") is not None and row.get("crag_grade")}


def run_data_from_rows(run: dict[str, Any], metrics: dict[str, dict[str, float]], results: Iterable[dict[str, Any]],
                       golden: list[dict[str, Any]] | None = None, kinds: dict[str, str] | None = None) -> RunData:
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


def load_run(store: "Store", run_id: str, *, golden: bool = False, rankings: bool = False) -> RunData:
    """A stored run (``run_id`` already resolved); ``golden`` also reads its golden items, ``rankings``
    what each item retrieved (for a rescoring)."""
    rows = store.results(run_id, decoded=True) if rankings else store.result_rows(run_id)
    return run_data_from_rows(store.get_run(run_id), store.item_metrics(run_id), rows,
                              store.golden_items(run_id) if golden else None, kinds=store.item_kinds(run_id))


def run_data_from_export(document: dict[str, Any]) -> RunData:
    """An exported run (already validated by ``store.read_export``)."""
    return run_data_from_rows(document["run"], document["itemMetrics"], document["results"],
                              [golden["item"] for golden in document.get("goldenItems", [])])


def is_export_path(ref: str) -> bool:
    """Whether a run reference names an exported run file rather than a stored run (the one test)."""
    return ref.endswith(".json") or Path(ref).is_file()


def read_run(ref: str, store: "Store | None", *, workspace: str | None = None, exclude: str | None = None,
             golden: bool = False, rankings: bool = False) -> RunData:
    """A run named by a user: an exported ``.json``, or a run id, unique prefix or ``latest`` of ``store``
    (``latest``: the newest complete run of ``workspace``, other than ``exclude``).

    Raises ``StoreError`` (file unreadable, no such run, ambiguous prefix) with a HINT."""
    from ..store import StoreError, read_export

    if is_export_path(ref):
        return run_data_from_export(read_export(ref))
    if store is None:
        raise StoreError(f"no run '{ref}': there is no crucible database yet\nHINT: run the golden set once, "
                         "or name an exported run .json")
    return load_run(store, store.resolve_run(ref, workspace=workspace if ref == "latest" else None, exclude=exclude),
                    golden=golden, rankings=rankings)
