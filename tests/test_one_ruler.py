"""One ruler: the cutoff K of the metrics at K belongs to the evaluation (ini crucible_k), not to the
pipeline. A pipeline that returns fewer chunks is measured at the same K (and its recall drop is a real
regression); runs measured at two different K are refused by the gate, or rescored from their stored
rankings at the baseline's K, through pytest itself and through `crucible compare`."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import COMPONENT_RECORD, crucible_cli, numbered_items, write_project

ITEMS = numbered_items(12)

# The relevant document at rank 1, 2 or 3 (by item number), then noise, cut at the config's retrievalLimit.
CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        docs = [f"noise{j}" for j in range(9)]
        docs.insert(n % 3, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d} for d in docs][:config["retrievalLimit"]]}
    return pipeline
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return write_project(pytester, ITEMS, CONFTEST, configs={"top1.json": {"retrievalLimit": 1}},
                         ini=COMPONENT_RECORD + "\ncrucible_gate = recallAtK, precisionAtK\n")


def recorded_k(project: pytest.Pytester) -> list[tuple[str, int]]:
    conn = sqlite3.connect(project.path / ".crucible" / "crucible.db")
    try:
        return conn.execute("SELECT id, eval_k FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()


def test_a_shorter_ranking_is_measured_with_the_same_ruler(project: pytest.Pytester) -> None:
    """retrievalLimit 10 -> 1 changes the system, not K: recall@10 drops for the two thirds of the items
    whose document was at rank 2 or 3, and the gate fails on it (before, precision@1 was set against
    precision@10 and called an improvement)."""
    assert project.runpytest().ret == pytest.ExitCode.OK
    result = project.runpytest("--crucible-config=top1.json", "--crucible-baseline=latest")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    result.stdout.fnmatch_lines(["  recall@10 * regressed", "  config retrievalLimit: 10 -> 1", "GATE FAILED recall@10 regressed: *"])
    assert "ruler changed" not in out and "precision@1 " not in out
    assert [k for _, k in recorded_k(project)] == [10, 10]


def test_two_cutoffs_are_refused_by_the_gate_or_rescored(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK  # the baseline, at K = 10
    refused = project.runpytest("--crucible-baseline=latest", "-o", "crucible_k=3")
    assert refused.ret == 3, refused.stdout.str()[-3000:]
    refused.stdout.fnmatch_lines(["*refusing to gate precisionAtK, recallAtK: the metrics at K were cut off at K = 10 in * "
                                  "and K = 3 in *", "*HINT: add --crucible-rescore (crucible compare --rescore) to score both runs at K = 10*"])
    rescored = project.runpytest("--crucible-baseline=" + recorded_k(project)[0][0], "-o", "crucible_k=3", "--crucible-rescore")
    assert rescored.ret == pytest.ExitCode.OK, rescored.stdout.str()[-3000:]
    out = " ".join(rescored.stdout.str().split())  # the note wraps at 100 columns
    assert "rescored" in out and "at the baseline's K = 10 (this run was measured at K = 3)" in out
    rescored.stdout.fnmatch_lines(["  recall@10 * ns (no item changed)", "gate passed*"])
    assert [k for _, k in recorded_k(project)] == [10, 3, 3]  # each run keeps the K it was measured at


def test_the_cli_names_the_cutoff_and_rescores(project: pytest.Pytester) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK
    assert project.runpytest("-o", "crucible_k=3").ret == pytest.ExitCode.OK
    (a, _), (b, _) = recorded_k(project)
    db = str(project.path / ".crucible" / "crucible.db")
    plain = crucible_cli("compare", a, b, "--json", "--db", db)
    document = json.loads(plain.stdout.str())
    assert "recallAtK" not in document["metrics"] and "ndcgAt10" in document["metrics"]
    assert any("K = 10 in " + a in w and "K = 3 in " + b in w for w in document["warnings"])
    gated = crucible_cli("compare", a, b, "--gate", "recall@3", "--db", db)
    assert gated.ret == 3
    gated.stderr.fnmatch_lines(["GATE REFUSED refusing to gate recallAtK: *", "HINT: add --crucible-rescore*"])
    rescored = json.loads(crucible_cli("compare", a, b, "--json", "--rescore", "--db", db).stdout.str())
    assert rescored["metrics"]["recallAtK"]["delta"] == 0.0
    shown = crucible_cli("show", b, "--db", db).stdout.str()
    assert "recall@3" in shown and "recall@10" not in shown
