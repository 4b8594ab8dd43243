"""The crucible command finds the project it runs in, as pytest does, and refuses judgments of
ids the database has never seen (the qrels ledger is append-only: a typo would stay forever)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pytest_crucible.cli import main
from pytest_crucible.store import Store
from pytest_crucible.workspace import default_db, find_project


@pytest.fixture(autouse=True)
def no_workspace_from_the_environment(monkeypatch):
    monkeypatch.delenv("CRUCIBLE_WORKSPACE", raising=False)


def record_run(db: Path, items: dict[str, tuple[list[dict], list[tuple[str, str]]]], workspace: str = "default") -> str:
    """A complete run: item id -> (golden citations, retrieved (chunk, doc) pairs)."""
    store = Store.open(db)
    run_id = store.start_run(config_hash="ab" * 32, params={}, resolved={"retrievalLimit": 10}, mode="component",
                             outcome_mode="record", workspace=workspace)
    for item_id, (citations, retrieved) in items.items():
        store.record_score(run_id, {
            "item_id": item_id, "question": f"question {item_id}", "outcome": "passed",
            "item": {"id": item_id, "question": f"question {item_id}", "citations": citations},
            "retrieved": [{"chunk_id": c, "doc_id": d, "text": "", "score": None, "metadata": {}} for c, d in retrieved],
            "metrics": {"mrr": 1.0},
        })
    store.finish_run(run_id, status="complete", golden_hash="g")
    store.close()
    return run_id


def human_rows(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT query_id, chunk_id, doc_id, grade, created_by FROM qrels"
                            " WHERE source = 'human' ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.fixture
def hours_db(tmp_path) -> Path:
    db = tmp_path / "c.db"
    record_run(db, {
        "sunday-hours": ([{"docId": "hours", "chunkId": "hours#p2", "mode": "required"}],
                         [("hours#p1", "hours"), ("hours#p2", "hours"), ("faq#p4", "faq")]),
        "monday-hours": ([{"docId": "hours", "chunkId": "hours#p1", "mode": "required"}], [("hours#p1", "hours")]),
        "returns-window": ([{"docId": "returns", "chunkId": "returns#p2", "mode": "required"}], [("returns#p2", "returns")]),
    })
    return db


def override(db: Path, *argv: str) -> int:
    return main(["qrels", "override", *argv, "--by", "dana", "--db", str(db)])


# -- Task A: an append-only ledger refuses typos -------------------------------------------------------
def test_override_of_an_unknown_query_is_refused_with_a_did_you_mean_and_nothing_written(hours_db, capsys) -> None:
    assert override(hours_db, "sunday-hourz", "hours#p2", "3") == 2
    captured = capsys.readouterr()
    lines = captured.err.rstrip("\n").split("\n")
    assert lines == [
        f"crucible: unknown query 'sunday-hourz': no run of {hours_db} has a golden item with this id and no judgment "
        "names it; did you mean 'sunday-hours' or 'monday-hours'?",
        "HINT: check the id against your golden set, or pass --force to judge it anyway "
        "(the ledger is append-only: a judgment stays forever)",
    ]
    assert captured.out == ""
    assert human_rows(hours_db) == []
    # Nothing close: no suggestion, still refused.
    assert override(hours_db, "zzz", "hours#p2", "3") == 2
    err = capsys.readouterr().err
    assert err.startswith("crucible: unknown query 'zzz': ") and "did you mean" not in err
    assert human_rows(hours_db) == []


def test_override_of_an_unknown_unit_is_refused_with_the_units_known_for_that_query(hours_db, capsys) -> None:
    assert override(hours_db, "sunday-hours", "hours#p9", "1") == 2
    lines = capsys.readouterr().err.rstrip("\n").split("\n")
    assert lines[0] == ("crucible: unknown chunk 'hours#p9' for query 'sunday-hours': no run retrieved it for this item, "
                        "no golden citation names it and no judgment does; did you mean 'hours#p2' or 'hours#p1'?")
    assert lines[1].startswith("HINT: check the chunk id (with --doc it is a document id), or pass --force")
    assert len(lines) == 2
    # returns#p2 is known, but for another query: not accepted for this one.
    assert override(hours_db, "sunday-hours", "returns#p2", "1") == 2
    assert capsys.readouterr().err.startswith("crucible: unknown chunk 'returns#p2' for query 'sunday-hours'")
    # Nothing close: the chunks known for the query are listed instead.
    assert override(hours_db, "sunday-hours", "zz-9", "1") == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "; its known chunks: faq#p4, hours#p1, hours#p2\nHINT: " in err
    # A document with --doc: the documents known for the query.
    assert override(hours_db, "sunday-hours", "hourz", "1", "--doc") == 2
    assert "crucible: unknown document 'hourz' for query 'sunday-hours'" in (err := capsys.readouterr().err)
    assert "did you mean 'hours'?" in err
    assert human_rows(hours_db) == []


def test_force_writes_what_would_be_refused(hours_db, capsys) -> None:
    assert override(hours_db, "sunday-hours", "hours#p9", "1", "--force") == 0
    captured = capsys.readouterr()
    assert "sunday-hours chunk:hours#p9: effective grade unjudged -> 1 (human), by dana" in captured.out
    assert "crucible: warning: unknown chunk 'hours#p9' for query 'sunday-hours'" in captured.err
    assert "judged anyway (--force)" in captured.err
    assert override(hours_db, "new-query", "x#1", "2", "--force") == 0
    capsys.readouterr()
    assert human_rows(hours_db) == [("sunday-hours", "hours#p9", None, 1, "dana"), ("new-query", "x#1", None, 2, "dana")]
    # Once judged, the query and the unit are known: no --force needed any more.
    assert override(hours_db, "new-query", "x#1", "0") == 0
    assert capsys.readouterr().err == ""


def test_known_units_still_write_without_force(hours_db, capsys) -> None:
    # hours#p7 was never retrieved for monday-hours nor cited: refused, until a judgment names it.
    assert override(hours_db, "monday-hours", "hours#p7", "3") == 2
    assert capsys.readouterr().err.startswith("crucible: unknown chunk 'hours#p7' for query 'monday-hours'")
    assert human_rows(hours_db) == []
    # retrieved (not cited), cited, a document of a retrieved chunk, and a unit only the ledger knows
    Store.open(hours_db).append_qrels([{"query_id": "monday-hours", "chunk_id": "hours#p7", "doc_id": None, "grade": 2,
                                        "source": "llm", "judge_model": "m"}])
    assert override(hours_db, "sunday-hours", "faq#p4", "0") == 0
    assert override(hours_db, "sunday-hours", "hours#p2", "2") == 0
    assert override(hours_db, "sunday-hours", "faq", "0", "--doc") == 0
    assert override(hours_db, "monday-hours", "hours#p7", "3") == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "sunday-hours chunk:hours#p2: effective grade 3 (provenance) -> 2 (human), by dana" in captured.out
    assert [row[:4] for row in human_rows(hours_db)] == [
        ("sunday-hours", "faq#p4", "faq", 0), ("sunday-hours", "hours#p2", "hours", 2),
        ("sunday-hours", None, "faq", 0), ("monday-hours", "hours#p7", None, 3)]


def test_the_store_knows_queries_and_units_from_runs_citations_and_the_ledger(hours_db) -> None:
    store = Store.open(hours_db)
    store.append_qrels([{"query_id": "only-judged", "chunk_id": "j#1", "doc_id": "j", "grade": 1, "source": "human",
                         "created_by": "ann"}])
    assert store.known_query_ids() == ["monday-hours", "only-judged", "returns-window", "sunday-hours"]
    assert store.known_units("sunday-hours") == {"chunk:hours#p1", "chunk:hours#p2", "chunk:faq#p4", "doc:hours", "doc:faq"}
    assert store.known_units("only-judged") == {"chunk:j#1", "doc:j"}
    assert store.known_units("nobody") == set()
    store.close()


# -- Task B: the project's database, from any of its subdirectories ----------------------------------
def test_runs_from_a_subdirectory_finds_the_database_named_in_pytest_ini_and_db_wins(tmp_path, monkeypatch, capsys) -> None:
    project = tmp_path / "shop"
    (project / "tests" / "unit").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\ncrucible_db = custom/path.db\n")
    run_id = record_run(project / "custom" / "path.db", {"q1": ([], [("c1", "d1")])}, workspace="shop")
    # a tox.ini without [pytest] in between is not pytest's config: the walk goes on up
    (project / "tests" / "tox.ini").write_text("[tox]\nenvlist = py312\n")
    monkeypatch.chdir(project / "tests" / "unit")

    assert main(["runs", "--json"]) == 0
    assert [run["id"] for run in json.loads(capsys.readouterr().out)] == [run_id]
    assert main(["metrics", "latest", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runId"] == run_id

    # An explicit --db always wins, relative to the current directory.
    other = project / "tests" / "unit" / "other.db"
    other_id = record_run(other, {"q1": ([], [("c1", "d1")])}, workspace="shop")
    assert main(["runs", "--json", "--db", "other.db"]) == 0
    assert [run["id"] for run in json.loads(capsys.readouterr().out)] == [other_id]
    assert main(["runs", "--db", "missing.db"]) == 2
    assert capsys.readouterr().err.startswith("crucible: missing.db: no crucible database here")


def test_the_default_database_follows_pytests_rootdir(tmp_path, monkeypatch) -> None:
    project = tmp_path / "proj"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (project / "src" / "setup.cfg").write_text("[metadata]\nname = x\n")  # no [tool:pytest]: not a config file
    assert find_project(deep).root == project
    assert default_db(deep) == project / ".crucible" / "crucible.db"
    assert default_db(project) == Path(".crucible/crucible.db")  # from the root itself: as short as before
    # the ini value is relative to the project's root; an absolute one stays as it is
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ncrucible_db = "var/results.db"\n')
    assert default_db(deep) == project / "var" / "results.db"
    (project / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\ncrucible_db = "{tmp_path / "abs.db"}"\n')
    assert default_db(deep) == tmp_path / "abs.db"
    # a nearer directory with its own pytest config is its own project
    (project / "src" / "tox.ini").write_text("[pytest]\ncrucible_db = tox.db\n")
    assert default_db(deep) == project / "src" / "tox.db"
    (project / "src" / "pkg" / "setup.cfg").write_text("[tool:pytest]\n")
    assert default_db(deep) == Path(".crucible/crucible.db")
    # without any config file up the tree: the current directory, as before
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert find_project(lonely) is None
    assert default_db(lonely) == Path(".crucible/crucible.db")
    monkeypatch.chdir(deep)
    assert default_db() == Path(".crucible/crucible.db")


def test_db_help_says_where_the_default_comes_from(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["runs", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "ini crucible_db, else .crucible/crucible.db, under pytest's rootdir" in text
    assert "without one, .crucible/crucible.db here" in text
