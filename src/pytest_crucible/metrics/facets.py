"""Facets: every metric of a run broken down by question facet.

A golden item belongs to one value of each CRAG facet (``questionType``, ``popularity``,
``dynamism``, ``answerable``, ``kind``) and to one ``tag`` facet per tag it carries
(``topic:retention`` style tags give a business-unit view). Unset facets read
``unspecified``. This module never imports pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FACETS = ("questionType", "popularity", "dynamism", "answerable", "kind")


def facet_values(item: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(facet, value) pairs of one golden item (as its JSON, camelCase)."""
    pairs = []
    for facet in FACETS:
        value = item.get(facet)
        if isinstance(value, bool):
            value = "true" if value else "false"
        pairs.append((facet, "unspecified" if value is None else str(value)))
    pairs.extend(("tag", str(tag)) for tag in item.get("tags") or ())
    return pairs


def parse_facet(text: str) -> tuple[str, str]:
    """``questionType=multi_hop`` -> ("questionType", "multi_hop"); ValueError with a hint otherwise."""
    facet, sep, value = text.partition("=")
    if not sep or not value or facet not in (*FACETS, "tag"):
        raise ValueError(f"facet {text!r}: expected FACET=VALUE with FACET one of {', '.join((*FACETS, 'tag'))}\n"
                         "HINT: e.g. questionType=multi_hop or tag=topic:returns")
    return facet, value


def items_in_facet(items: Iterable[Mapping[str, Any]], facet: str, value: str) -> set[str]:
    return {item["id"] for item in items if (facet, value) in facet_values(item)}


def by_facet(items: Iterable[Mapping[str, Any]], metrics: Mapping[str, Mapping[str, float]], *,
             counts: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
    """facet -> value -> {"n": items, metric: mean over the items that have it}; with ``counts``, also
    "counts": {metric: how many items have it} (an errored item, or one the metric does not apply to, is
    in "n" and not in the metric's mean: its count is what the mean rests on)."""
    import numpy as np

    groups: dict[tuple[str, str], list[int]] = {}
    ids: list[str] = []
    for item in items:
        for pair in facet_values(item):
            groups.setdefault(pair, []).append(len(ids))
        ids.append(item["id"])
    # One column of values per metric over the items (NaN: the item has none), read once: a group's mean is then
    # a selection, not a dict lookup per item, facet value and metric. cumsum adds in the items' order, one after
    # the other, as sum() did: the means are the same floats.
    columns = {metric: np.array([values.get(item_id, np.nan) for item_id in ids], dtype=float)
               for metric, values in metrics.items()}
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for (facet, value), rows in sorted(groups.items()):
        entry: dict[str, Any] = {"n": len(rows)}
        having: dict[str, int] = {}
        selection = np.asarray(rows)
        for metric, column in columns.items():
            chosen = column[selection]
            present = chosen[~np.isnan(chosen)]
            if present.size:
                entry[metric] = float(np.cumsum(present)[-1]) / present.size
                having[metric] = int(present.size)
        if counts:
            entry["counts"] = having
        table.setdefault(facet, {})[value] = entry
    return table


def worst_facets(table: Mapping[str, Mapping[str, Mapping[str, Any]]], metric: str, count: int = 3, min_items: int = 2) -> list[tuple[str, str, float, int]]:
    """The facet values with the lowest mean ``metric`` (at least ``min_items`` items having it each), as
    (facet, value, mean, the items it rests on). ``table``: :func:`by_facet` with ``counts``."""
    rows = [
        (facet, value, entry[metric], entry["counts"][metric])
        for facet, values in table.items()
        for value, entry in values.items()
        if metric in entry and entry["counts"][metric] >= min_items
    ]
    return sorted(rows, key=lambda row: (row[2], row[0], row[1]))[:count]
