"""Facet breakdowns of a run's metrics."""

from __future__ import annotations

import pytest

from pytest_crucible.metrics.facets import by_facet, facet_values, items_in_facet, parse_facet, worst_facets

ITEMS = [
    {"id": "a", "questionType": "simple", "popularity": "head", "dynamism": "static", "answerable": True, "kind": "retrieval", "tags": ["topic:returns"]},
    {"id": "b", "questionType": "multi_hop", "popularity": "tail", "dynamism": None, "answerable": True, "kind": "retrieval", "tags": ["topic:returns", "hard"]},
    {"id": "c", "questionType": "multi_hop", "popularity": "tail", "dynamism": "fast", "answerable": False, "kind": "retrieval", "tags": []},
]
METRICS = {"truthfulness": {"a": 1.0, "b": -1.0, "c": 0.0}, "ndcgAt10": {"a": 0.5, "b": 0.25}}


def test_facet_values_cover_crag_facets_and_tags() -> None:
    assert facet_values(ITEMS[1]) == [("questionType", "multi_hop"), ("popularity", "tail"), ("dynamism", "unspecified"),
                                      ("answerable", "true"), ("kind", "retrieval"), ("tag", "topic:returns"), ("tag", "hard")]


def test_by_facet_means_and_counts() -> None:
    table = by_facet(ITEMS, METRICS)
    assert table["questionType"]["multi_hop"] == {"n": 2, "truthfulness": -0.5, "ndcgAt10": 0.25}
    assert table["answerable"]["false"] == {"n": 1, "truthfulness": 0.0}
    assert table["tag"]["topic:returns"] == {"n": 2, "truthfulness": 0.0, "ndcgAt10": 0.375}
    # ties on the mean are ordered by facet name, then value
    assert worst_facets(table, "truthfulness", count=2) == [("popularity", "tail", -0.5, 2), ("questionType", "multi_hop", -0.5, 2)]


def test_facet_filters() -> None:
    assert items_in_facet(ITEMS, *parse_facet("questionType=multi_hop")) == {"b", "c"}
    assert items_in_facet(ITEMS, *parse_facet("tag=topic:returns")) == {"a", "b"}
    with pytest.raises(ValueError, match="expected FACET=VALUE"):
        parse_facet("color=red")
