"""Clustered questions end to end: items written from one source move together, so the gate resamples
clusters (--crucible-cluster), counts clusters against crucible_min_pairs, and reports the clusters and
each metric's design effect in the terminal, the JSON and the HTML report."""

from __future__ import annotations

import json

import pytest
from helpers import crucible_cli, db_rows, write_project

# 12 source documents, 5 paraphrases each. The candidate config breaks the retrieval of 3 sources:
# 15 items move, but they are 3 independent events, not 15.
ITEMS = [{"id": f"s{s:02d}-p{p}", "question": f"Question {p} about source {s}?", "cluster": f"src-{s:02d}",
          "citations": [{"docId": f"doc-{s:02d}", "chunkId": f"doc-{s:02d}#1"}]} for s in range(12) for p in range(5)]

CONFTEST = '''
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        source = int(item.id[1:3])
        cited = item.citations[0]
        good = [{"chunk_id": cited.chunk_id, "doc_id": cited.doc_id, "text": "x"}]
        noise = [{"chunk_id": f"noise#{i}", "doc_id": "noise", "text": "y"} for i in range(3)]
        broken = config.get("broken", False) and source % 4 == 0
        return {"answer": None, "retrieved": noise + good if broken else noise[: source % 3] + good}
    return pipeline
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_project(pytester, ITEMS, CONFTEST, configs={"broken.json": {"broken": True}})
    assert pytester.runpytest().ret == pytest.ExitCode.OK
    return pytester


def runs(project) -> list[str]:
    return [row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY started_at")]


def compare_json(project, *args: str) -> dict:
    ids = runs(project)
    result = crucible_cli("compare", ids[0], ids[1], "--json", "--db", project.path / ".crucible" / "crucible.db", *args)
    return json.loads("\n".join(result.outlines))


def test_a_shift_in_three_sources_is_three_events_not_fifteen(project: pytest.Pytester) -> None:
    clustered = project.runpytest("--crucible-config=broken.json", "--crucible-baseline=latest", "--crucible-gate=ndcgAt10",
                                  "--crucible-html=report.html")
    # Independent items would call it: 15 pairs all moved the same way.
    naive = crucible_cli("compare", *runs(project), "--gate", "ndcgAt10", "--cluster", "none",
                         "--db", project.path / ".crucible" / "crucible.db")
    assert naive.ret == 1 and any(line.startswith("GATE FAILED ndcgAt10 regressed") for line in naive.errlines)
    # By source there are 3 changed clusters of 12: the smallest sign-flip p is 2/2**3 = 0.25.
    assert clustered.ret == pytest.ExitCode.OK, clustered.stdout.str()
    clustered.stdout.fnmatch_lines([
        "  60 paired items, 12 clusters (--crucible-cluster=field: resampled by cluster), seed 1337, p",
        "    Holm-adjusted over 1 gated metric",
        "  ndcgAt10 * 0.250  ns*",
        "  design effect (clustered / independent-items variance): *ndcgAt10 *",
        "gate passed: no significant regression"])
    document = compare_json(project)
    assert document["clusterBy"] == "field" and document["clusters"] == 12
    power = document["power"]["ndcgAt10"]
    assert power["clusters"] == 12 and 4.0 < power["designEffect"] < 6.0
    naive_ci = compare_json(project, "--cluster", "none")["metrics"]["ndcgAt10"]["ci"]
    clustered_ci = document["metrics"]["ndcgAt10"]["ci"]
    assert clustered_ci[1] - clustered_ci[0] > 1.5 * (naive_ci[1] - naive_ci[0])
    assert "clusters" not in compare_json(project, "--cluster", "none")["power"]["ndcgAt10"]
    page = (project.path / "report.html").read_text()
    assert "in 12 clusters (--crucible-cluster=field" in page and "design effect" in page


def test_clusters_count_against_crucible_min_pairs(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-config=broken.json", "--crucible-baseline=latest", "-o", "crucible_min_pairs=13")
    assert result.ret == 3  # 12 clusters cannot meet 13, though there are 60 pairs
    result.stdout.fnmatch_lines(["GATE REFUSED no metric has 13 clusters of pairs*"])
    # By document of the first required citation: the same 12 groups as the cluster field.
    by_doc = compare_json(project, "--cluster", "doc")
    assert by_doc["clusterBy"] == "doc" and by_doc["clusters"] == 12
    assert by_doc["metrics"]["ndcgAt10"] == compare_json(project)["metrics"]["ndcgAt10"]


def test_items_without_a_cluster_give_the_independent_items_result_bit_for_bit(pytester: pytest.Pytester) -> None:
    items = [{key: value for key, value in item.items() if key != "cluster"} for item in ITEMS]
    write_project(pytester, items, CONFTEST, configs={"broken.json": {"broken": True}})
    assert pytester.runpytest().ret == 0
    assert pytester.runpytest("--crucible-config=broken.json").ret == 0
    field, none = compare_json(pytester), compare_json(pytester, "--cluster", "none")
    assert field["clusters"] is None and field["metrics"] == none["metrics"]


def test_an_unset_cluster_leaves_the_item_hash_as_it_was() -> None:
    from pytest_crucible.golden_set.schema import GoldenItem

    plain = GoldenItem.model_validate({"id": "a", "question": "q?"}).to_json()
    assert "cluster" not in plain
    assert GoldenItem.model_validate({"id": "a", "question": "q?", "cluster": "src-1"}).to_json()["cluster"] == "src-1"
