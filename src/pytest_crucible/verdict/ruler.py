"""The ruler of a comparison: the relevance grades both runs' retrieval metrics were measured against,
and the cutoff K of their metrics at K.

A judgment added to the qrels ledger between two runs (a human override, a pool label), or a golden
item whose citations changed, moves the ruler: a retrieval delta then mixes the system's change with
the ruler's. :func:`prepare_pair` says so, and with ``rescore`` recomputes both runs' retrieval
metrics from their stored rankings against today's grades (the candidate's golden items and the
whole ledger), so that only the system changed; runs measured at different K are rescored at the baseline's K. The grades come from ``qrels.item_grades`` and the
metrics from ``evaluation.scoring.score_ranking``: the same functions an item is scored with.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .runs import RunData

if TYPE_CHECKING:
    from ..store import Store

SHOWN = 5


def _as_of(rows: list[dict[str, Any]], run: RunData) -> list[dict[str, Any]]:
    """The ledger rows a run could have read: those written before it finished."""
    moment = run.run.get("finished_at") or run.run.get("started_at") or ""
    return [row for row in rows if (row.get("created_at") or "") <= moment]


def first_few(parts: Sequence[str]) -> str:
    """The first ``SHOWN`` of a list a line names, then ``...``: ``q-00, q-01, q-02, q-03, q-04, ...``."""
    return ", ".join(parts[:SHOWN]) + (", ..." if len(parts) > SHOWN else "")


def _same_citations(a: Any, b: Any) -> bool:
    """Whether two versions of a golden item cite the same units: their content fields' JSON texts when both
    were read from a store (``runs.StoredItem``: equal texts, equal values; nothing decoded), else the
    citations themselves."""
    from ..qrels.grades import item_citations

    text_a, text_b = getattr(a, "raw_json", None), getattr(b, "raw_json", None)
    if isinstance(text_a, str) and text_a == text_b:
        return True
    return item_citations(a) == item_citations(b)


def moved_items(a: RunData, b: RunData, ledger: dict[str, list[dict[str, Any]]], left_out: Collection[str] = ()) -> list[str]:
    """Paired items whose effective grades differ between the two runs' times (golden citations as each
    ran, ledger rows written before each finished). ``left_out``: items that will not be paired (golden items
    changed since the baseline, ``comparison.changed_content``)."""
    from ..qrels.grades import item_grades

    golden_a = {item.get("id"): item for item in a.golden}
    golden_b = {item.get("id"): item for item in b.golden}
    moved = []
    for item in sorted((set(a.item_ids) & set(b.item_ids)).difference(left_out)):
        rows = ledger.get(item, [])
        if not rows and _same_citations(golden_a.get(item), golden_b.get(item)):
            continue  # the usual case: the same citations and no judgment since: the same grades, not computed twice
        try:
            if item_grades(golden_a.get(item), _as_of(rows, a)) != item_grades(golden_b.get(item), _as_of(rows, b)):
                moved.append(item)
        except ValueError:  # a malformed citation: not this check's business (the item's own scoring reports it)
            continue
    return moved


def rescored(run: RunData, golden: dict[str, dict[str, Any]], ledger: dict[str, list[dict[str, Any]]],
             k: int | None = None) -> RunData:
    """The run with its retrieval metrics recomputed from its stored rankings against today's grades, at
    cutoff ``k`` (None: the run's own K); the run then records that K."""
    from ..evaluation.scoring import score_ranking
    from ..metrics import depends_on_k
    from ..metrics.retrieval import RETRIEVAL_METRICS
    from ..qrels.grades import item_grades

    k = k or run.k
    # A metric over the top K that rankings alone cannot recompute (nearMissRate reads chunk concepts)
    # is dropped at another K rather than compared across two cutoffs.
    metrics = {name: dict(values) for name, values in run.metrics.items()
               if name not in RETRIEVAL_METRICS and not (k != run.k and depends_on_k(name))}
    for item, ranking in run.rankings.items():
        if item in run.errored:
            continue
        values, _ = score_ranking(ranking, item_grades(golden.get(item), ledger.get(item, [])), k)
        for name, value in values.items():
            metrics.setdefault(name, {})[item] = value
    return replace(run, run={**run.run, "eval_k": k}, metrics={name: values for name, values in metrics.items() if values})


def prepare_pair(store: Store | None, current: RunData, baseline: RunData, *, rescore: bool,
                 left_out: Collection[str] = ()) -> tuple[RunData, RunData, list[str]]:
    """(current, baseline, warnings): warn when the ruler moved between the runs; with ``rescore``
    return both runs measured against today's grades. The runs must carry their golden items (and
    their rankings, to rescore). Without a store (two exported files) the ledger is empty. ``left_out``:
    items the comparison will not pair (see :func:`moved_items`)."""
    items = sorted(set(current.item_ids) | set(baseline.item_ids))
    ledger = store.judgment_ledger(items) if store is not None else {}
    moved = moved_items(baseline, current, ledger, left_out)
    if not rescore:
        if not moved:
            return current, baseline, []
        return current, baseline, [
            f"WARNING the relevance grades of {len(moved)} paired item(s) changed between the runs ({first_few(moved)}): "
            "their retrieval deltas mix the system's change with the ruler's; --crucible-rescore "
            "(crucible compare --rescore) scores both runs against today's grades"]
    # keyed by the ids as stored (an item without one would sit under None, never looked up)
    golden: dict[Any, dict[str, Any]] = {item.get("id"): item for item in baseline.golden}
    golden.update({item.get("id"): item for item in current.golden})  # the candidate's items are today's
    k = baseline.k  # the baseline's cutoff is the ruler the candidate is measured against
    note = "NOTE rescored: both runs' retrieval metrics recomputed from their stored rankings against today's grades"
    if moved:
        note += f" ({len(moved)} paired item(s) had changed)"
    if current.k != k:
        note += f" at the baseline's K = {k} (this run was measured at K = {current.k})"
    return rescored(current, golden, ledger, k), rescored(baseline, golden, ledger, k), [note]
