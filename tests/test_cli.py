"""The crucible command: schema, runs, show, and its error handling."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_crucible.cli import main
from pytest_crucible.store import Store


def test_schema_golden_prints_the_json_schema(capsys) -> None:
    assert main(["schema", "golden"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "pytest-crucible golden item"
    assert "questionType" in schema["properties"]


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("crucible")
    if not exe.exists():
        pytest.skip("the crucible console script is not installed beside this Python (pip install -e . first)")
    done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "trec-eval" in done.stdout and "schema" in done.stdout


def test_runs_and_show_read_the_store(tmp_path, capsys) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    run_id = store.start_run(config_hash="ab" * 32, params={}, resolved={"retrievalLimit": 10}, mode="component",
                             outcome_mode="record", config_path="configs/base.json")
    store.record_score(run_id, {"item_id": "q1", "question": "Q", "item": {"id": "q1", "question": "Q"}, "outcome": "passed",
                                "metrics": {"ndcgAt10": 0.5, "recallAtK": 1.0}})
    store.finish_run(run_id, status="complete", golden_hash="g")
    store.close()

    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert run_id in out and "component" in out and "configs/base.json" in out

    assert main(["runs", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == run_id

    assert main(["show", "latest", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id}  status complete  mode component  outcome record" in out
    assert re.search(r"recall@10 +1\.0000 +1", out) and re.search(r"ndcg@10 +0\.5000 +1", out)


def test_missing_database_is_one_line_error(tmp_path, capsys) -> None:
    assert main(["runs", "--db", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err
    assert "no crucible database here" in err and "Traceback" not in err
    assert not (tmp_path / "none.db").exists()  # reading never creates files


def test_metrics_by_facet_and_compare_restricted_to_a_facet(tmp_path, capsys) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    ids = []
    for shift in (0.0, 0.5):
        run_id = store.start_run(config_hash="h", params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
        for i in range(8):
            kind = "multi_hop" if i % 2 else "simple"
            item = {"id": f"q{i}", "question": "Q", "questionType": kind, "tags": ["topic:x"]}
            value = 0.2 + 0.01 * i + (shift if kind == "multi_hop" else 0.0)
            store.record_score(run_id, {"item_id": item["id"], "question": "Q", "item": item, "outcome": "passed",
                                        "metrics": {"ndcgAt10": value}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        ids.append(run_id)
    store.close()
    assert main(["metrics", "latest", "--json", "--db", str(db)]) == 0
    by_facet = json.loads(capsys.readouterr().out)["byFacet"]
    assert by_facet["questionType"]["simple"] == {"n": 4, "ndcgAt10": pytest.approx(0.23)}
    assert by_facet["tag"]["topic:x"]["n"] == 8
    assert main(["compare", ids[0], ids[1], "--facet", "questionType=simple", "--json", "--db", str(db)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["facet"] == "questionType=simple" and document["pairedItems"] == 4
    assert document["metrics"]["ndcgAt10"]["delta"] == 0.0
    assert main(["compare", ids[0], ids[1], "--facet", "questionType=multi_hop", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["ndcgAt10"]["delta"] == pytest.approx(0.5)
    assert main(["compare", ids[0], ids[1], "--facet", "colour=red", "--db", str(db)]) == 2
    assert "expected FACET=VALUE" in capsys.readouterr().err
