"""Promoting a reviewed correction: one transaction, the spec's response shape, nothing written on refusal."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pytest_crucible.cli import main
from pytest_crucible.golden_set.promote import PromoteError, draft_items, promote
from pytest_crucible.store import Store


def make_store(database):
    """Two runs with one failed item each, on either backend (``database``: a SQLite path or a PostgreSQL URL)."""
    store = Store.open(database)
    runs = []
    for _ in range(2):
        run_id = store.start_run(config_hash="h", params={}, resolved={"retrievalLimit": 10}, mode="system", outcome_mode="record")
        store.record_score(run_id, {"item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?"}, "outcome": "failed",
                                    "error_class": "incomplete", "error_evidence": "must-assertion missing"})
        store.finish_run(run_id, status="complete", golden_hash=None)
        runs.append(run_id)
    result_ids = [store.db.conn.execute("SELECT result_id FROM results WHERE run_id = ?", [r]).fetchone()[0] for r in runs]
    return store, runs, result_ids


TABLES = ("runs", "results", "item_metrics", "golden_items", "qrels", "eval_feedback", "golden_drafts", "human_labels")


def snapshot(store: Store) -> list[list[tuple]]:
    """Every row of every table a promote could touch (on either backend)."""
    return [sorted(map(repr, store.db.conn.execute(f"SELECT * FROM {table}").fetchall())) for table in TABLES]


def body(run_id, result_id=None, **overrides):
    data = {
        "runId": run_id, "resultId": result_id, "question": "What is the approved retention period?",
        "correctedAssertions": ["Audit exports are retained for seven years."],
        "citations": [{"docId": "01KZDOC0000000000000000000", "mode": "required"}],
        "errorClass": "incomplete", "tags": ["topic:retention"], "correctedBy": "user_01KZ",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_success_matches_the_spec_shape_and_writes_both_rows(database) -> None:
    store, runs, results = make_store(database)
    response = promote(store, body(runs[0], results[0]))
    item, feedback = response["item"], response["feedback"]
    assert set(response) == {"item", "feedback"}
    assert item == {
        "id": item["id"], "status": "draft", "question": "What is the approved retention period?",
        "assertions": [{"text": "Audit exports are retained for seven years.", "kind": "must", "weight": 1}],
        "citations": [{"docId": "01KZDOC0000000000000000000", "mode": "required"}], "tags": ["topic:retention"],
    }
    assert feedback == {"id": feedback["id"], "runId": runs[0], "resultId": results[0], "errorClass": "incomplete",
                        "correctedBy": "user_01KZ", "promotedBy": None,  # no API key: the command line
                        "note": f"Correction promoted to golden item {item['id']}."}
    assert len(item["id"]) == 26 and len(feedback["id"]) == 26
    [draft] = draft_items(store)
    assert draft["id"] == item["id"] and draft["status"] == "draft"
    conn = store.db.conn
    assert conn.execute("SELECT golden_item_id, result_id FROM eval_feedback WHERE golden_item_id IS NOT NULL").fetchall() == [
        (item["id"], results[0])]
    # The classified failures of both runs were queued when they were recorded.
    assert conn.execute("SELECT error_class, evidence FROM eval_feedback WHERE golden_item_id IS NULL").fetchall() == [
        ("incomplete", "must-assertion missing")] * 2
    # The feedback queue is append-only.
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE eval_feedback SET note = 'x'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM eval_feedback")


@pytest.mark.parametrize("case, message", [
    ("wrong-run", "field 'runId': no run ZZZ"),
    ("result-of-another-run", "field 'resultId': result * belongs to another run"),
    ("unknown-result", "field 'resultId': result 01NOPE does not exist"),
    ("blank-assertion", "field 'correctedAssertions': Value error, assertion 0 is blank"),
    ("no-assertion", "field 'correctedAssertions'"),
    ("bad-class", "field 'errorClass': Value error, must be one of"),
    ("bad-citation", "field 'citations[[]0[]].mode'"),
])
def test_refusals_leave_the_database_exactly_as_before(database, case, message) -> None:
    import fnmatch

    store, runs, results = make_store(database)
    request = {
        "wrong-run": body("ZZZ"),
        "result-of-another-run": body(runs[0], results[1]),
        "unknown-result": body(runs[0], "01NOPE"),
        "blank-assertion": body(runs[0], correctedAssertions=["  "]),
        "no-assertion": body(runs[0], correctedAssertions=[]),
        "bad-class": body(runs[0], errorClass="vibes"),
        "bad-citation": body(runs[0], citations=[{"docId": "d", "mode": "must"}]),
    }[case]
    before = snapshot(store)
    with pytest.raises(PromoteError) as info:
        promote(store, request)
    assert fnmatch.fnmatch(str(info.value).splitlines()[0], f"*{message}*"), str(info.value)
    assert "HINT" in str(info.value)
    assert snapshot(store) == before


def test_a_write_failure_rolls_back_both_rows(tmp_path, monkeypatch) -> None:
    store, runs, _ = make_store(tmp_path / "c.db")
    before = snapshot(store)
    # Make the second insert fail after the first succeeded: the feedback row must go too.
    store.db.conn.execute("CREATE TRIGGER fail_drafts BEFORE INSERT ON golden_drafts BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    before = snapshot(store)
    with pytest.raises(sqlite3.DatabaseError, match="disk full"):
        promote(store, body(runs[0]))
    assert snapshot(store) == before


def test_cli_promote_flags_and_json_body_then_export_drafts(tmp_path, capsys, monkeypatch) -> None:
    store, runs, results = make_store(tmp_path / "c.db")
    store.close()
    db = str(tmp_path / "c.db")
    assert main(["promote", "--db", db, "--run", runs[0], "--result", results[0], "--question", "How long?",
                 "--assertion", "Seven years.", "--citation", "pol-retention#p2:required", "--citation", "pol-audit:acceptable",
                 "--error-class", "incomplete", "--tag", "topic:retention", "--by", "dana"]) == 0
    response = json.loads(capsys.readouterr().out)
    assert response["item"]["citations"] == [{"docId": "pol-retention", "chunkId": "pol-retention#p2", "mode": "required"},
                                             {"docId": "pol-audit", "mode": "acceptable"}]
    assert response["feedback"]["correctedBy"] == "dana"
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(json.dumps(body(runs[1]))))
    assert main(["promote", "--db", db, "--json", "-"]) == 0
    capsys.readouterr()
    out = tmp_path / "drafts.jsonl"
    assert main(["golden", "export", "--status", "draft", "-o", str(out), "--db", db]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [item["question"] for item in lines] == ["How long?", "What is the approved retention period?"]
    # The exported drafts load as a golden file.
    from pytest_crucible.golden_set.schema import load_golden_file

    target = tmp_path / "golden_promoted.jsonl"
    target.write_text(out.read_text())
    assert [item.status for item in load_golden_file(target)] == ["draft", "draft"]
    assert main(["promote", "--db", db, "--run", "ZZZ", "--question", "q", "--assertion", "a", "--error-class", "incomplete"]) == 2
    assert "no run ZZZ" in capsys.readouterr().err


def test_reviewer_names_that_pass_for_another_are_refused_on_the_command_line_too(tmp_path, capsys, monkeypatch) -> None:
    """Issue 32 (4): the checks of the HTTP API's correctedBy hold wherever a reviewer is named: `crucible promote`
    (--by and a --json body), `crucible judge labels import --by` and `crucible qrels import|override --by`."""
    store, runs, _ = make_store(tmp_path / "c.db")
    store.close()
    db = str(tmp_path / "c.db")
    flags = ["promote", "--db", db, "--run", runs[0], "--question", "q", "--assertion", "a", "--error-class", "incomplete"]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "q1", "question": "Q?", "contexts": [], "answer": "A.",
                                  "labels": {"crag": "perfect"}}) + "\n")
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 c1 2\n")
    for name, problem in [("KEY:01ABC", "names an API key"), ("Key:01ABC", "names an API key"),
                          (" key:01ABC", "names an API key"), ("key\uff1a01ABC", "names an API key"),
                          ("k\u0435y:01ABC", "mixes Cyrillic and Latin letters"), ("", "is empty"), ("  ", "is empty"),
                          ("x" * 10_000, "at most 100")]:
        assert main([*flags, "--by", name]) == 2
        assert "promote: field 'correctedBy': " in (err := capsys.readouterr().err) and problem in err, (name[:20], err)
        monkeypatch.setattr("sys.stdin", __import__("io").StringIO(json.dumps(body(runs[0], correctedBy=name))))
        assert main(["promote", "--db", db, "--json", "-"]) == 2
        assert "stdin: field 'correctedBy': " in (err := capsys.readouterr().err) and problem in err
        assert main(["judge", "labels", "import", str(labels), "--by", name, "--db", db]) == 2
        assert "--by: " in (err := capsys.readouterr().err) and problem in err
        assert main(["qrels", "import", str(qrels), "--by", name, "--db", db]) == 2
        err = capsys.readouterr().err
        assert ("field 'by': the name " in err and problem in err) if name else "field 'by': a human judgment needs" in err
        assert main(["qrels", "override", "q1", "c1", "2", "--by", name, "--force", "--db", db]) == 2
        assert "field '--by': the name " in (err := capsys.readouterr().err) and problem in err
    conn = sqlite3.connect(db)
    try:
        written = [conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                   for table in ("golden_drafts", "human_labels", "qrels")]
    finally:
        conn.close()
    assert written == [0, 0, 0]  # nothing of any refused name
    # A name is kept NFKC-normalised and trimmed; a local promote has no key (promotedBy null).
    assert main([*flags, "--by", " \uff44\uff41\uff4e\uff41 "]) == 0
    feedback = json.loads(capsys.readouterr().out)["feedback"]
    assert (feedback["correctedBy"], feedback["promotedBy"]) == ("dana", None)
