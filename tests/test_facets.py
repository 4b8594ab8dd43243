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
    counted = by_facet(ITEMS, METRICS, counts=True)
    assert worst_facets(counted, "truthfulness", count=2) == [("popularity", "tail", -0.5, 2), ("questionType", "multi_hop", -0.5, 2)]


def test_a_facet_mean_is_counted_by_the_items_that_have_the_metric() -> None:
    """An errored item is in the facet's n and not in a metric's mean: the worst-facet line says what the
    mean rests on, and a facet whose metric rests on one item is not ranked."""
    metrics = {"truthfulness": {"a": 1.0, "b": -1.0}, "ndcgAt10": {"a": 0.5, "b": 0.25, "c": 0.0}}  # c errored in answers
    table = by_facet(ITEMS, metrics, counts=True)
    assert table["answerable"]["true"]["counts"] == {"truthfulness": 2, "ndcgAt10": 2}
    assert table["questionType"]["multi_hop"] == {"n": 2, "truthfulness": -1.0, "ndcgAt10": 0.125,
                                                  "counts": {"truthfulness": 1, "ndcgAt10": 2}}
    # multi_hop (-1.0 on one item) is left out; kind=retrieval has 3 items but its mean rests on 2.
    assert worst_facets(table, "truthfulness", count=10) == [("answerable", "true", 0.0, 2), ("kind", "retrieval", 0.0, 2),
                                                             ("tag", "topic:returns", 0.0, 2)]


def test_facet_filters() -> None:
    assert items_in_facet(ITEMS, *parse_facet("questionType=multi_hop")) == {"b", "c"}
    assert items_in_facet(ITEMS, *parse_facet("tag=topic:returns")) == {"a", "b"}
    with pytest.raises(ValueError, match="expected FACET=VALUE"):
        parse_facet("color=red")


def test_a_facet_mean_is_the_items_values_added_in_order_as_python_adds_them() -> None:
    # Values of very different sizes, where the order of additions shows in the last bits: a facet's mean is
    # the sum of its items' values in item order over their count, the float a reader computing it by hand gets.
    import random

    rng = random.Random(7)
    items = [{"id": f"i{n:04d}", "questionType": rng.choice(["simple", "multi_hop", None]),
              "tags": rng.sample(["a", "b", "c"], rng.randint(0, 2))} for n in range(3000)]
    metrics = {name: {item["id"]: rng.random() * rng.choice([1.0, 1e-9, 1e9]) for item in items if rng.random() < 0.8}
               for name in ("x", "y")}
    table = by_facet(items, metrics, counts=True)
    for facet, value in (("questionType", "multi_hop"), ("tag", "b"), ("questionType", "unspecified")):
        ids = sorted(items_in_facet(items, facet, value))
        for name, values in metrics.items():
            present = [values[i] for i in ids if i in values]
            assert table[facet][value][name] == sum(present) / len(present)  # the same float, not approximately
            assert table[facet][value]["counts"][name] == len(present)
