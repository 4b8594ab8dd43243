"""A golden item edited under its id since the baseline (a reworded question, a corrected reference, other
assertions) is another question: the gate leaves it out of the pairs and says so (exclude, the default),
compares it anyway with a note (include), or refuses (refuse, exit 3). A change of its citations alone moves
the ruler instead: the item stays paired and the ruler warns (verdict/ruler.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from helpers import crucible_cli, db_rows, write_golden, write_project
from test_gate_e2e import CONFTEST as GATE_CONFTEST
from test_gate_e2e import ITEMS as GATE_ITEMS

from pytest_crucible.store import Store
from pytest_crucible.verdict.comparison import changed_content, compare_run_data
from pytest_crucible.verdict.gate import REFUSED, GateSettings, decide, decide_stored
from pytest_crucible.verdict.runs import RunData, load_run, run_data_from_export

IDS = [f"h{i:02d}" for i in range(12)]
VALUES = [0.9, 0.8, 0.85, 0.7, 0.95, 0.6, 0.75, 0.8, 0.9, 0.65, 0.7, 0.85]


def item(item_id: str, **fields) -> dict:
    return {"id": item_id, "question": f"question {item_id}?", "reference": f"answer {item_id}",
            "assertions": [{"text": f"says {item_id}"}], "citations": [{"docId": f"doc-{item_id}", "mode": "required"}], **fields}


def run(run_id: str, golden: list[dict]) -> RunData:
    values = dict(zip(IDS, VALUES))
    return RunData(run={"id": run_id, "config_hash": "h", "status": "complete", "resolved": "{}"},
                   metrics={"ndcgAt10": values, "mrr": dict(values)}, item_ids=list(IDS), golden=golden)


def pair(**edits: dict) -> tuple[RunData, RunData]:
    """The baseline A and the candidate B, whose items named in ``edits`` carry those fields instead."""
    baseline = [item(i) for i in IDS]
    current = [{**item(i), **edits.get(i, {})} for i in IDS]
    return run("A", baseline), run("B", current)


# -- the pairs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [("question", "how long is the warranty, reworded?"),
                                          ("reference", "a corrected answer"),
                                          ("assertions", [{"text": "says something else"}]),
                                          ("answerable", False)])
def test_an_edited_item_is_left_out_of_the_pairs_with_its_field(field, value) -> None:
    baseline, current = pair(h04={field: value})
    result = decide(current, baseline, GateSettings(baseline="A"))
    comparison = result.comparison
    assert result.verdict == "passed" and comparison is not None
    assert comparison.changed == {"h04": [field]}
    assert comparison.paired_items == 11 and comparison.metrics["ndcgAt10"].n == 11
    assert comparison.excluded == [{"id": "h04", "run": "B", "reason": f"changed since the baseline: {field}"}]
    line = f"1 golden item changed since the baseline and is not compared: h04 ({field})"
    assert comparison.changed_line() == line
    assert result.warnings == [f"WARNING {line}"]  # said once
    document = comparison.to_json()
    assert document["changedItems"] == {"mode": "exclude", "items": [{"id": "h04", "fields": [field]}]}
    assert {"id": "h04", "run": "B", "reason": f"changed since the baseline: {field}"} in document["excluded"]


def test_the_line_lists_the_first_few_items_with_every_changed_field() -> None:
    edits = {i: {"question": "new?"} for i in IDS[:7]}
    edits["h01"] = {"question": "new?", "reference": "new", "citations": [{"docId": "elsewhere"}]}
    baseline, current = pair(**edits)
    comparison = compare_run_data(baseline, current)
    assert comparison.changed["h01"] == ["question", "reference", "citations"]
    assert comparison.changed_line() == ("7 golden items changed since the baseline and are not compared: h00 (question), "
                                         "h01 (question, reference, citations), h02 (question), h03 (question), "
                                         "h04 (question), ...")
    assert comparison.paired_items == 5
    assert [entry["reason"] for entry in comparison.excluded][:2] == [
        "changed since the baseline: question", "changed since the baseline: question, reference, citations"]


def test_a_change_of_citations_alone_stays_paired_and_the_ruler_warns() -> None:
    baseline, current = pair(h04={"citations": [{"docId": "doc-other", "mode": "required"}]},
                             h05={"question": "reworded?", "citations": [{"docId": "doc-other", "mode": "required"}]})
    assert changed_content(baseline, current) == {"h05": ["question", "citations"]}
    result = decide_stored(None, current, baseline, GateSettings(baseline="A"))
    assert result.comparison is not None and result.comparison.paired_items == 11  # h04 paired, h05 left out
    # The ruler names h04 only: h05 is not a pair, whatever its citations did.
    assert result.warnings == [
        "WARNING the relevance grades of 1 paired item(s) changed between the runs (h04): their retrieval deltas mix the "
        "system's change with the ruler's; --crucible-rescore (crucible compare --rescore) scores both runs against "
        "today's grades",
        "WARNING 1 golden item changed since the baseline and is not compared: h05 (question, citations)"]


def test_an_item_written_with_or_without_its_defaults_is_unchanged() -> None:
    bare = [{"id": i, "question": f"question {i}?", "assertions": [{"text": "x", "weight": 1}],
             "citations": [{"docId": "d"}]} for i in IDS]
    filled = [{"id": i, "question": f"question {i}?", "reference": None, "answerable": True, "kind": "retrieval",
               "assertions": [{"text": "x", "weight": 1.0, "kind": "must", "conceptId": None}],
               "citations": [{"docId": "d", "chunkId": None, "mode": "required"}],
               "tags": ["new tag"], "metadata": {"owner": "dana"}, "status": "active", "questionType": "multi_hop"} for i in IDS]
    comparison = compare_run_data(run("A", bare), run("B", filled))
    assert comparison.changed == {} and comparison.paired_items == 12 and comparison.changed_line() is None
    assert comparison.to_json()["changedItems"] == {"mode": "exclude", "items": []}


def test_include_pairs_them_as_before_with_a_note() -> None:
    baseline, current = pair(h04={"question": "reworded?"}, h09={"reference": "corrected"})
    result = decide(current, baseline, GateSettings(baseline="A", changed_items="include"))
    assert result.verdict == "passed" and result.comparison is not None
    assert result.comparison.paired_items == 12 and result.comparison.excluded == []
    assert result.warnings == ["NOTE 2 golden items changed since the baseline and are compared anyway "
                               "(--crucible-changed-items=include): h04 (question), h09 (reference)"]


def test_refuse_refuses_naming_them_and_how_to_go_on() -> None:
    baseline, current = pair(h04={"question": "reworded?"})
    result = decide(current, baseline, GateSettings(baseline="A", changed_items="refuse"))
    assert result.verdict == REFUSED and result.exit_code == 3 and result.comparison is None
    first, hint = (result.refusal or "").splitlines()
    assert first == ("1 golden item changed since the baseline A: h04 (question); refusing to compare "
                     "(--crucible-changed-items=refuse)")
    assert hint.startswith("HINT: update the baseline") and "--crucible-changed-items=exclude" in hint
    assert result.summary().startswith("GATE REFUSED 1 golden item changed since the baseline A")
    # Nothing changed: refuse compares as ever.
    same = decide(current, run("A", current.golden), GateSettings(baseline="A", changed_items="refuse"))
    assert same.verdict == "passed" and same.comparison is not None and same.comparison.paired_items == 12


def test_runs_that_kept_no_golden_items_have_none_changed() -> None:
    baseline, current = pair(h04={"question": "reworded?"})
    baseline.golden = []
    assert changed_content(baseline, current) == {} and compare_run_data(baseline, current).paired_items == 12


# -- stored runs: read lazily, on both backends, and the same as their exports ------------------------
def _scores(reworded: dict[str, dict]) -> list[dict]:
    scores = []
    for i, item_id in enumerate(IDS):
        golden = {**item(item_id, tags=["t"]), **reworded.get(item_id, {})}
        scores.append({"item_id": item_id, "question": golden["question"], "item": golden, "outcome": "passed",
                       "answer": "a", "metrics": {"ndcgAt10": VALUES[i]}})
    return scores


def test_stored_runs_decode_only_the_items_whose_texts_differ(database) -> None:
    store = Store.open(database)
    try:
        ids = []
        for edits in ({}, {"h03": {"question": "reworded?"}, "h07": {"tags": ["other"]}, "h08": {"answerable": False}}):
            run_id = store.start_run(config_hash="h" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component",
                                     outcome_mode="record")
            store.record_scores(run_id, _scores(edits))
            store.finish_run(run_id, status="complete", golden_hash="g")
            ids.append(run_id)
        a, b = (load_run(store, run_id, golden=True) for run_id in ids)
        assert changed_content(a, b) == {"h03": ["question"], "h08": ["answerable"]}  # a tag is no content
        # Only the items whose content texts differ were decoded (h07's tags are not content: its text is the same).
        assert [entry["id"] for entry in b.golden if dict.__contains__(entry, "question")] == ["h03", "h08"]
        exported = [run_data_from_export(store.export_run(run_id)) for run_id in ids]
        assert changed_content(exported[0], b) == changed_content(a, exported[1]) == {"h03": ["question"], "h08": ["answerable"]}
    finally:
        store.close()


# -- end to end: a session, `crucible compare`, `crucible report` ---------------------------------------------
REWORDED = [{**entry, "question": "question 4, reworded"} if entry["id"] == "g-004" else entry for entry in GATE_ITEMS]
LINE = "1 golden item changed since the baseline and is not compared: g-004 (question)"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """The gate's project (tests/test_gate_e2e.py), run once as the baseline, then its golden file edited:
    one question reworded."""
    project = write_project(pytester, GATE_ITEMS, GATE_CONFTEST, ini="crucible_mode = component")
    assert project.runpytest().ret == pytest.ExitCode.OK
    write_golden(project.path / "golden_set.jsonl", REWORDED)
    return project


def _db(project: pytest.Pytester) -> str:
    return str(project.path / ".crucible" / "crucible.db")


def test_the_session_leaves_the_reworded_item_out_and_says_so(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-baseline=latest", "--junitxml=junit.xml", "--crucible-html=report.html")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"WARNING {LINE}", "baseline * -> this run *", "  29 paired items, seed 1337*",
                                 "  1 item left out of the pairs:", "    g-004: changed since the baseline: question",
                                 "gate passed: no significant regression"])
    assert sum(LINE in line for line in result.outlines) == 1  # once
    suite = ET.parse(project.path / "junit.xml").getroot().find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert properties["crucible.changedItems"] == LINE and properties["crucible.verdict"] == "passed"
    assert LINE in (project.path / "report.html").read_text()  # the page reads the same verdict
    # -q keeps the warning: fewer items were compared than ran.
    base = db_rows(project, "SELECT id FROM runs ORDER BY rowid")[0][0]
    quiet = project.runpytest("-q", f"--crucible-baseline={base}")
    assert quiet.ret == pytest.ExitCode.OK
    quiet.stdout.fnmatch_lines([f"WARNING {LINE}"])


def test_refuse_exits_3_naming_the_item_and_the_way_on(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-baseline=latest", "--crucible-changed-items=refuse")
    assert result.ret == 3
    result.stdout.fnmatch_lines(["GATE REFUSED 1 golden item changed since the baseline *: g-004 (question); refusing to "
                                 "compare (--crucible-changed-items=refuse)", "HINT: update the baseline*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    # The ini key says the same; the command line's option wins over it.
    project.makeini("[pytest]\ncrucible_mode = component\ncrucible_changed_items = refuse\n")
    base = db_rows(project, "SELECT id FROM runs ORDER BY rowid")[0][0]  # `latest` is now the run just refused
    assert project.runpytest(f"--crucible-baseline={base}").ret == 3
    assert project.runpytest(f"--crucible-baseline={base}", "--crucible-changed-items=exclude").ret == pytest.ExitCode.OK


def test_include_compares_the_item_as_before_with_a_note(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-baseline=latest", "--crucible-changed-items=include")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["NOTE 1 golden item changed since the baseline and is compared anyway",  # wrapped at 100
                                 "  (--crucible-changed-items=include): g-004 (question)", "baseline * -> this run *",
                                 "  30 paired items, seed 1337*"])
    result.stdout.no_fnmatch_line("*left out of the pairs*")


def test_a_bad_ini_value_is_one_usage_error(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ncrucible_mode = component\ncrucible_changed_items = skip\n")
    result = project.runpytest("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini option crucible_changed_items = 'skip': expected one of exclude, include, refuse",
                                 "HINT: *"])


def test_crucible_compare_shows_the_changed_items_from_the_store_and_from_exports(project: pytest.Pytester, tmp_path) -> None:
    assert project.runpytest().ret == pytest.ExitCode.OK  # the candidate, on the reworded golden set
    base, current = (row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY rowid"))
    stored = crucible_cli("compare", base, current, "--db", _db(project), "--format", "json")
    assert stored.ret == 0
    document = json.loads(stored.stdout.str())
    assert document["changedItems"] == {"mode": "exclude", "items": [{"id": "g-004", "fields": ["question"]}]}
    assert document["pairedItems"] == 29 and document["power"]["ndcgAt10"]["n"] == 29
    assert {"id": "g-004", "run": current, "reason": "changed since the baseline: question"} in document["excluded"]
    assert document["gate"]["warnings"] == [f"WARNING {LINE}"]
    assert json.loads(crucible_cli("compare", base, current, "--db", _db(project), "--json").stdout.str()) == document
    files = []
    for run_id in (base, current):
        files.append(tmp_path / f"{run_id}.json")
        assert crucible_cli("export", run_id, "--db", _db(project), "-o", files[-1]).ret == 0
    exported = json.loads(crucible_cli("compare", *files, "--db", _db(project), "--json").stdout.str())
    assert exported["changedItems"] == document["changedItems"] and exported["pairedItems"] == 29
    text = crucible_cli("compare", base, current, "--db", _db(project))
    assert text.ret == 0 and f"WARNING {LINE}" in text.stdout.lines
    refused = crucible_cli("compare", base, current, "--db", _db(project), "--changed-items", "refuse")
    assert refused.ret == 3
    assert refused.stderr.lines[0].startswith("GATE REFUSED 1 golden item changed since the baseline")
    assert refused.stderr.lines[1].startswith("HINT: update the baseline")
    included = json.loads(crucible_cli("compare", base, current, "--db", _db(project), "--json", "--changed-items", "include").stdout.str())
    assert included["pairedItems"] == 30 and included["changedItems"]["mode"] == "include"
    markdown = crucible_cli("compare", base, current, "--db", _db(project), "--format", "markdown").stdout.str()
    assert f"- WARNING {LINE}" in markdown
    report = crucible_cli("report", current, "--against", base, "--db", _db(project), "-o", tmp_path / "r.html",
                          "--changed-items", "refuse")
    assert report.ret == 3


def test_the_api_compare_takes_the_same_choice(tmp_path) -> None:
    pytest.importorskip("fastapi")
    from api_server import add_run, client, new_key, serve_in_thread

    db = tmp_path / "crucible.db"
    store = Store.open(db)
    a, b = add_run(store, workspace="shop"), add_run(store, workspace="shop", questions={3: "question 3, reworded?"})
    store.close()
    key = new_key(db, "shop", "runs:read")
    with serve_in_thread(db) as url, client(url, key) as http:
        answer = http.get("/api/v1/evals/runs/compare", params={"a": a, "b": b})
        assert answer.status_code == 200
        document = answer.json()
        assert document["changedItems"] == {"mode": "exclude", "items": [{"id": "q03", "fields": ["question"]}]}
        assert document["pairedItems"] == 11
        assert http.get("/api/v1/evals/runs/compare", params={"a": a, "b": b, "changedItems": "include"}).json()["pairedItems"] == 12
        refused = http.get("/api/v1/evals/runs/compare", params={"a": a, "b": b, "changedItems": "refuse"})
        assert refused.status_code == 409
        assert "1 golden item changed since the baseline" in refused.text and "update the baseline" in refused.text
