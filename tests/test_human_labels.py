"""Human labels of answers and the judge's bias corrected with them (PPI++): the answer hash, the
append-only ledger and `crucible judge labels import`, the run summary's lines, `crucible compare --ppi`."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest
from helpers import crucible_cli

from pytest_crucible.labels.human import answer_hash, compare_ppi, compare_ppi_lines, label_number, ppi_for_run, ppi_summary_lines
from pytest_crucible.report.lines import texts
from pytest_crucible.report.terminal import run_summary_lines
from pytest_crucible.store import Store
from pytest_crucible.store.ledgers import add_human_labels, human_labels_for_items

HEADER = "judge bias corrected with human labels (PPI++):"


# -- the answer hash and the label scale ------------------------------------------------------------
def test_answer_hash_ignores_surrounding_and_repeated_whitespace() -> None:
    assert answer_hash("Within 30 days.") == hashlib.sha256(b"Within 30 days.").hexdigest()
    assert answer_hash("  Within\t30\n\n days. \r\n") == answer_hash("Within 30 days.")
    assert answer_hash(None) == answer_hash("") == answer_hash(" \n\t ") == hashlib.sha256(b"").hexdigest()
    assert answer_hash("Within 30days.") != answer_hash("Within 30 days.")  # whitespace between words still counts
    assert answer_hash("within 30 days.") != answer_hash("Within 30 days.")  # and so does case


def test_labels_are_numbers_on_their_metrics_scale() -> None:
    assert [label_number("crag", grade) for grade in ("perfect", "acceptable", "missing", "incorrect")] == [1.0, 0.5, 0.0, -1.0]
    assert (label_number("faithful", "true"), label_number("faithful", "false")) == (1.0, 0.0)
    with pytest.raises(ValueError):
        label_number("faithful", "yes")


# -- the ledger and `crucible judge labels import` ----------------------------------------------------
def write_labels(path: Path, cases: list[dict]) -> Path:
    path.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    return path


CASES = [
    {"id": "c1", "itemId": "q-001", "question": "Return window?", "contexts": ["30 days."], "answer": "Within  30 days.",
     "labels": {"crag": "perfect", "faithful": True}},
    {"id": "q-002", "question": "Battery?", "contexts": [], "answer": "The PB500.", "labels": {"crag": "incorrect"}},
    {"id": "c3", "itemId": "q-003", "question": "Hours?", "contexts": ["9 to 5."], "answer": None,
     "labels": {"crag": "missing", "faithful": False}},
]


def test_import_appends_to_an_append_only_ledger(tmp_path: Path, database) -> None:
    db, labels = database, write_labels(tmp_path / "labels.jsonl", CASES)
    first = crucible_cli("judge", "labels", "import", labels, "--db", db, "--by", "dana")
    assert first.ret == 0, first.errlines
    assert first.outlines == ["imported 5 labels (0 already there) for 3 answers"]
    # No run of this database gave these answers yet: said, not refused.
    assert first.errlines[0].startswith("crucible: warning: 3 of the 3 labelled answers match no result in ")
    again = crucible_cli("judge", "labels", "import", labels, "--db", db, "--by", "dana")
    assert again.ret == 0 and again.outlines == ["imported 0 labels (5 already there) for 3 answers"]

    store = Store.open(db)
    rows = human_labels_for_items(store, ["q-001", "q-002", "q-003", "c1"])
    assert [(row["item_id"], row["kind"], row["value"]) for row in rows] == [
        ("q-001", "crag", "perfect"), ("q-001", "faithful", "true"), ("q-002", "crag", "incorrect"),
        ("q-003", "crag", "missing"), ("q-003", "faithful", "false")]  # keyed by itemId, else by id; file order
    assert {(row["source"], row["created_by"]) for row in rows} == {("import", "dana")}
    assert rows[0]["answer_hash"] == answer_hash("Within 30 days.") and rows[3]["answer_hash"] == answer_hash("")
    # A relabelling is a new row (the newest counts); the same label again adds nothing.
    assert add_human_labels(store, [{**rows[0], "value": "acceptable", "created_at": None},
                                    {**rows[1], "created_at": None}]) == 1
    conn = store.db.conn  # sqlite3's or PostgreSQL's, the same refusals
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"), conn:
            conn.execute("UPDATE human_labels SET value = 'incorrect'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"), conn:
            conn.execute("DELETE FROM human_labels")
        assert conn.execute("SELECT count(*) FROM human_labels").fetchone()[0] == 6
    finally:
        store.close()


def test_a_bad_labels_file_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    labels = write_labels(tmp_path / "labels.jsonl", [CASES[0], {**CASES[1], "labels": {"crag": "great"}}])
    result = crucible_cli("judge", "labels", "import", labels, "--db", db)
    assert result.ret == 2
    assert len(result.errlines) == 2, result.errlines
    assert result.errlines[0].startswith(f"crucible: {labels}:2: field 'labels.crag': expected one of perfect")
    assert result.errlines[1].startswith("HINT: ")
    assert not db.exists()  # nothing written, not even the file
    bad_item = write_labels(tmp_path / "item.jsonl", [{**CASES[0], "itemId": 7}])
    result = crucible_cli("judge", "labels", "import", bad_item, "--db", db)
    assert result.ret == 2 and result.errlines[0].startswith(f"crucible: {bad_item}:1: field 'itemId': expected a non-empty string")
    neither = crucible_cli("judge", "labels", "import", "--db", db)
    assert neither.ret == 2 and neither.errlines[1].startswith("HINT: crucible judge labels import LABELS.jsonl")


# -- a run whose judge over-grades ------------------------------------------------------------------
N_ITEMS, N_LABELLED = 60, 30
TRUTH = ["acceptable", "missing", "perfect"]  # the grade people give item i: TRUTH[i % 3]
SCORE = {"acceptable": 0.5, "missing": 0.0, "perfect": 1.0}


def record_run(store: Store, *, answer: str, truthfulness, faithfulness, config_hash: str = "h") -> str:
    run_id = store.start_run(config_hash=config_hash, params={}, resolved={"retrievalLimit": 10}, mode="system",
                             outcome_mode="record")
    store.record_scores(run_id, [
        {"item_id": f"q-{i:03d}", "question": f"question {i}", "item": {"id": f"q-{i:03d}", "question": f"question {i}"},
         "answer": f"{answer} {i}", "outcome": "passed",
         "metrics": {"truthfulness": truthfulness(i), "faithfulness": faithfulness(i)}} for i in range(N_ITEMS)])
    assert store.finish_run(run_id, status="complete", golden_hash=None) == "complete"
    return run_id


def label_items(store: Store, answer: str, items, *, vary: bool = False) -> None:
    """People's labels of each item's answer; ``vary``: every fifth item is graded differently (another answer
    of the same question is not graded the same by people every time)."""
    rows = []
    for i in items:
        other = vary and i % 5 == 0
        digest = answer_hash(f"  {answer} {i}\n")  # the labeller's copy of the answer: whitespace aside, the same
        rows.append({"item_id": f"q-{i:03d}", "answer_hash": digest, "kind": "crag", "value": TRUTH[(i + other) % 3],
                     "source": "import"})
        rows.append({"item_id": f"q-{i:03d}", "answer_hash": digest, "kind": "faithful",
                     "value": "true" if (i + other) % 2 else "false", "source": "import"})
    assert add_human_labels(store, rows) == 2 * len(items)


def over_graded(i: int) -> float:
    return SCORE[TRUTH[i % 3]] + 0.5  # the judge gives every answer half a grade more than people do


def under_faithful(i: int) -> float:
    return 0.7 if i % 2 else 0.0  # a faithful answer gets 0.7 from the judge: it under-grades by 0.15 on average


def test_the_summary_shows_the_judges_bias_and_the_corrected_mean(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "c.db")
    run_id = record_run(store, answer="answer", truthfulness=over_graded, faithfulness=under_faithful)
    assert HEADER not in texts(run_summary_lines(store, run_id))  # nobody labelled an answer: no line at all
    label_items(store, "answer", range(N_LABELLED))
    lines = texts(run_summary_lines(store, run_id))
    start = lines.index(HEADER)
    truth, faith = lines[start + 1], lines[start + 2]
    # People's mean over all 60 answers is 0.50; the judge says 1.00.
    match = re.fullmatch(r"  truthfulness  judge 1\.00  ppi (\S+) \[(\S+), (\S+)\]  \(30 labelled, bias \+0\.50\)", truth)
    assert match, truth
    estimate, low, high = map(float, match.groups())
    labels_mean = sum(SCORE[TRUTH[i % 3]] for i in range(N_LABELLED)) / N_LABELLED
    assert abs(estimate - labels_mean) <= 0.05 and low <= 0.5 <= high
    assert high < 0.9  # the judge's mean is far outside the corrected interval
    assert re.fullmatch(r"  faithfulness  judge 0\.35  ppi 0\.50 \[\S+, \S+\]  \(30 labelled, bias -0\.15\)", faith), faith
    assert all(len(line) <= 100 for line in lines)
    # The lines sit after the abstention lines and before the error classes (when there are any).
    assert lines.index("items 60 (60 passed)") < start

    # A label of another answer of the same item does not count: labels follow the answer.
    other = record_run(store, answer="a different answer", truthfulness=over_graded, faithfulness=under_faithful,
                       config_hash="h2")
    assert HEADER not in texts(run_summary_lines(store, other))


def test_one_labelled_answer_says_how_many_more_are_needed_and_the_newest_label_counts() -> None:
    results = [{"item_id": "a", "answer": "x"}, {"item_id": "b", "answer": "y"}, {"item_id": "c", "answer": None}]
    metrics = {"truthfulness": {"a": 1.0, "b": 0.5, "c": 0.0}, "ndcgAt10": {"a": 1.0}}
    one = [{"item_id": "a", "answer_hash": answer_hash("x"), "kind": "crag", "value": "incorrect"}]
    assert ppi_summary_lines(results, metrics, one) == [
        HEADER, "  truthfulness  1 labelled answer; PPI needs at least 30 (label 29 more)"]
    assert ppi_summary_lines(results, metrics, []) == []
    # A faithful label of an item without a judged faithfulness (an abstention) is not a labelled answer.
    assert ppi_summary_lines(results, metrics, [{**one[0], "kind": "faithful", "value": "true"}]) == []
    relabelled = [*one, {"item_id": "b", "answer_hash": answer_hash("y"), "kind": "crag", "value": "perfect"},
                        {"item_id": "a", "answer_hash": answer_hash("x"), "kind": "crag", "value": "perfect"}]  # newest last
    [line] = ppi_for_run(results, metrics, relabelled)
    assert (line.metric, line.n_labelled, line.n_unlabelled, line.estimate) == ("truthfulness", 2, 1, None)
    # With 30 labelled answers, the newest label of "a" is the one read: perfect (1.0), not incorrect (-1.0).
    many = [{"item_id": f"i{k}", "answer": f"answer {k}"} for k in range(40)]
    judged = {"truthfulness": {f"i{k}": 1.0 for k in range(40)}}
    labels = [{"item_id": f"i{k}", "answer_hash": answer_hash(f"answer {k}"), "kind": "crag",
               "value": "perfect" if k % 2 else "incorrect"} for k in range(30)]
    labels.append({"item_id": "i0", "answer_hash": answer_hash("answer 0"), "kind": "crag", "value": "perfect"})  # newest
    [line] = ppi_for_run(many, judged, labels)
    assert line.n_labelled == 30 and line.estimate.bias == pytest.approx(1.0 - (16 * 1.0 + 14 * -1.0) / 30)


# -- crucible compare --ppi ---------------------------------------------------------------------------
def test_compare_ppi_prints_the_corrected_delta_and_never_changes_the_verdict(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    # B answers differently and just as well, but its judge grades exactly: the judged truthfulness
    # drops by 0.5 (a significant regression to the gate), while people see no difference at all.
    base = record_run(store, answer="old", truthfulness=over_graded, faithfulness=under_faithful)
    cand = record_run(store, answer="new", truthfulness=lambda i: SCORE[TRUTH[i % 3]], faithfulness=under_faithful,
                      config_hash="h2")
    label_items(store, "old", range(N_LABELLED))
    label_items(store, "new", range(N_LABELLED), vary=True)
    store.close()

    plain = crucible_cli("compare", base, cand, "--db", db)
    ppi = crucible_cli("compare", base, cand, "--db", db, "--ppi")
    assert plain.ret == ppi.ret == 1  # the gate's verdict, with and without --ppi
    assert ppi.errlines == plain.errlines and any(line.startswith("GATE FAILED truthfulness") for line in ppi.errlines)
    assert ppi.outlines[:len(plain.outlines)] == plain.outlines  # printed after the gate's lines
    extra = ppi.outlines[len(plain.outlines):]
    assert extra[0] == "judge bias corrected with human labels (PPI++), B - A (never changes the gate's verdict):"
    match = re.fullmatch(r"  truthfulness  judge delta -0\.50  ppi delta ([+-]\d\.\d\d) \[([+-]\d\.\d\d), ([+-]\d\.\d\d)\]  "
                         r"\(30 labelled pairs\)", extra[1])
    assert match, extra[1]
    delta, low, high = map(float, match.groups())
    assert abs(delta) <= 0.05 and low <= 0.0 <= high
    assert re.fullmatch(r"  faithfulness  judge delta \+0\.00  ppi delta [+-]0\.00 \[\S+, \S+\]  \(30 labelled pairs\)",
                        extra[2]), extra[2]

    plain_json = crucible_cli("compare", base, cand, "--db", db, "--json")
    ppi_json = crucible_cli("compare", base, cand, "--db", db, "--json", "--ppi")
    assert plain_json.ret == ppi_json.ret == 1
    document = json.loads("\n".join(ppi_json.outlines))
    entry = document.pop("ppi")["metrics"]["truthfulness"]
    assert document == json.loads("\n".join(plain_json.outlines))  # the comparison and the gate are untouched
    assert (entry["labelledPairs"], entry["unlabelledPairs"], entry["labelledInOneRun"], entry["inheritedLabels"]) == (30, 30, 0, 0)
    assert entry["judgeDelta"] == pytest.approx(-0.5) and entry["delta"] == pytest.approx(delta, abs=0.005)
    assert entry["ci"][0] <= 0.0 <= entry["ci"][1] and entry["bias"] == pytest.approx(-0.5)
    assert compare_ppi_lines({"metrics": {"truthfulness": entry}})[1] == extra[1]

    # An exported baseline reads its answers from its file: the same pairs.
    exported = tmp_path / "base.json"
    assert crucible_cli("export", base, "-o", exported, "--db", db).ret == 0
    from_file = crucible_cli("compare", exported, cand, "--db", db, "--ppi")
    assert from_file.ret == 1 and extra[1] in from_file.outlines

    # Items labelled in B only: their answers changed, so leaving them out would keep a sample chosen by
    # the change itself. PPI refuses until both runs' answers of those items are labelled.
    store = Store.open(db)
    label_items(store, "new", range(N_LABELLED, N_LABELLED + 5))
    store.close()
    refused = crucible_cli("compare", base, cand, "--db", db, "--ppi")
    assert refused.ret == 1
    assert ("  truthfulness  judge delta -0.50  5 items labelled in one run only: label the other run's answer of each "
            "(the same items must be labelled in both runs)") in refused.outlines


def test_compare_ppi_without_enough_labelled_pairs_says_so() -> None:
    answers = {"a": "x", "b": "y", "c": "z"}
    metrics = {"truthfulness": {"a": 1.0, "b": 0.5, "c": 0.0}}
    labels = [{"item_id": "a", "answer_hash": answer_hash("x"), "kind": "crag", "value": "perfect"}]
    document = compare_ppi(answers, metrics, answers, {"truthfulness": {"a": 0.5, "b": 0.5, "c": 0.0}}, labels)
    assert document["metrics"]["truthfulness"]["delta"] is None
    assert document["metrics"]["faithfulness"]["note"] == "not judged in both runs"
    lines = compare_ppi_lines(document)
    assert lines[1] == ("  truthfulness  judge delta -0.17  1 labelled pair; PPI needs at least 30 "
                        "(label 29 more, the answers of both runs: crucible judge labels import)")
    assert document["metrics"]["truthfulness"]["inheritedLabels"] == 1  # one label, read through the unchanged answer
    assert lines[2] == "  faithfulness  not judged in both runs"


# -- labels from promoted corrections -----------------------------------------------------------------
def test_import_from_feedback_labels_the_corrected_answers(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    run_id = record_run(store, answer="answer", truthfulness=over_graded, faithfulness=under_faithful)
    result_id = next(row["result_id"] for row in store.results(run_id) if row["item_id"] == "q-004")
    store.close()
    promoted = crucible_cli("promote", "--run", run_id, "--result", result_id, "--question", "question 4",
                            "--assertion", "The right answer.", "--error-class", "hallucination", "--by", "dana", "--db", db)
    assert promoted.ret == 0, promoted.errlines
    first = crucible_cli("judge", "labels", "import", "--from-feedback", "--db", db)
    assert first.ret == 0 and first.outlines == ["promoted corrections read: 1, of workspace 'default'",
                                                 "imported 2 labels (0 already there) for 1 answers"]
    assert first.errlines == []  # the labelled answer is the run's own
    assert crucible_cli("judge", "labels", "import", "--from-feedback", "--db", db).outlines[1:] == [
        "imported 0 labels (2 already there) for 1 answers"]
    store = Store.open(db)
    rows = human_labels_for_items(store, ["q-004"])
    assert [(row["kind"], row["value"], row["source"], row["created_by"]) for row in rows] == [
        ("crag", "incorrect", "feedback", "dana"), ("faithful", "false", "feedback", "dana")]
    assert rows[0]["answer_hash"] == answer_hash("answer 4")
    # The export names the item too, so a checked export imports onto the same answer.
    exported = tmp_path / "reviewed.jsonl"
    assert crucible_cli("judge", "labels", "export", "-o", exported, "--db", db).ret == 0
    assert json.loads(exported.read_text().splitlines()[0])["itemId"] == "q-004"
    store.close()
    assert crucible_cli("judge", "labels", "import", "--from-feedback", "--db", tmp_path / "none.db").ret == 2


def test_the_shown_interval_stops_at_the_metric_bounds() -> None:
    from pytest_crucible.labels.human import PPILine
    from pytest_crucible.stats.ppi import ppi_mean

    estimate = ppi_mean([1.0, -1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0])  # three labels: a wide normal interval
    assert estimate.ci_low < -1.0 or estimate.ci_high > 1.0
    text = PPILine("truthfulness", "crag", 3, 2, estimate).text()
    low, high = (float(x) for x in text.split("[")[1].split("]")[0].split(", "))
    assert -1.0 <= low < high <= 1.0


def test_labels_without_variance_give_no_interval() -> None:
    """Every label equal: the residuals' variance is 0 and the interval would have width 0, a certainty
    no sample gives. PPI says why instead of printing ``1.0 [1.0, 1.0]``."""
    results = [{"item_id": f"i{k}", "answer": f"answer {k}"} for k in range(40)]
    judged = {"truthfulness": {f"i{k}": 0.5 + 0.01 * (k % 7) for k in range(40)}}
    labels = [{"item_id": f"i{k}", "answer_hash": answer_hash(f"answer {k}"), "kind": "crag", "value": "perfect"}
              for k in range(30)]
    [line] = ppi_for_run(results, judged, labels)
    assert line.estimate is None
    assert line.text() == ("truthfulness  30 labelled answers; the labels have no variance (every one is 1): PPI cannot "
                           "tell the judge's error from them; label a random sample of answers")
