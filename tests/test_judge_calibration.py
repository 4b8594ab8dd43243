"""`crucible judge calibrate`: the shared kappa, the labels loader, the CLI end to end (lexical and
Claude through the local mock), the cache, the stored calibration and where the summary shows it."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from helpers import RANKED_CONFTEST, crucible_cli, db_rows, examples, free_port, write_golden, write_project
from hypothesis import given, settings
from hypothesis import strategies as st
from mock_anthropic import MockAnthropic, mock_anthropic  # noqa: F401 - fixture

import pytest_crucible.evaluation.scoring  # noqa: F401 - one copy for pytester's in-process runs (below)
from pytest_crucible.cli import main as crucible
from pytest_crucible.judge.select import make_judge
from pytest_crucible.labels.calibration import read_labels_file
from pytest_crucible.metrics.crag import CRAG_GRADES
from pytest_crucible.report.terminal import calibration_line
from pytest_crucible.stats.agreement import cohen_kappa, confusion_matrix

# `crucible judge calibrate` in-process imports the evaluation package here. pytester's in-process runs
# drop the modules an inner session imported; with the package loaded but not its scoring module, a later
# in-process session (tests/test_docs.py's quickstart) scored differently. The import at the top keeps
# one copy of it, as conftest.py does for the plugin's core.


# -- the kappa, by hand and against the textbook formula ------------------------------------------
def textbook_kappa(pairs, categories):
    """Cohen (1960) from the contingency table: p_o = trace / n, p_e = sum(row_i * col_i) / n^2."""
    n = len(pairs)
    table = {(a, b): 0 for a in categories for b in categories}
    for pair in pairs:
        table[pair] += 1
    p_o = sum(table[c, c] for c in categories) / n
    rows = {c: sum(table[c, d] for d in categories) for c in categories}
    cols = {c: sum(table[d, c] for d in categories) for c in categories}
    p_e = sum(rows[c] * cols[c] for c in categories) / n ** 2
    if p_e == 1:
        return 1.0 if p_o == 1 else None
    return (p_o - p_e) / (1 - p_e)


def test_kappa_and_confusion_of_crag_grades_by_hand() -> None:
    # human, judge
    pairs = [("perfect", "perfect"), ("perfect", "acceptable"), ("acceptable", "acceptable"), ("missing", "missing"),
             ("incorrect", "perfect"), ("incorrect", "incorrect"), ("perfect", "perfect"), ("acceptable", "perfect")]
    # Diagonal: perfect 2, acceptable 1, missing 1, incorrect 1 -> p_o = 5/8.
    # Human marginals: perfect 3, acceptable 2, missing 1, incorrect 2; judge: perfect 4, acceptable 2, missing 1, incorrect 1.
    # p_e = (3*4 + 2*2 + 1*1 + 2*1) / 64 = 19/64; kappa = (40/64 - 19/64) / (45/64) = 21/45 = 7/15.
    kappa = cohen_kappa(pairs)
    assert (kappa.n, kappa.observed, kappa.expected) == (8, 5 / 8, 19 / 64)
    assert kappa.kappa == pytest.approx(7 / 15)
    assert confusion_matrix(pairs, CRAG_GRADES) == [[2, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1]]
    # Binarised, correct = perfect|acceptable: human C C C N N N C C, judge C C C N C N C C.
    # p_o = 7/8; human C 5 N 3, judge C 6 N 2; p_e = (30 + 6) / 64 = 36/64; kappa = (56 - 36) / (64 - 36) = 20/28 = 5/7.
    binary = cohen_kappa([(a in ("perfect", "acceptable"), b in ("perfect", "acceptable")) for a, b in pairs])
    assert binary.kappa == pytest.approx(5 / 7) and binary.observed == 7 / 8
    # Faithful labels: agreement no better than chance is kappa 0.
    assert cohen_kappa([(True, True), (True, False), (False, True), (False, False)]).kappa == 0.0
    assert cohen_kappa([]).kappa is None and cohen_kappa([("missing", "missing")] * 3).kappa == 1.0
    with pytest.raises(ValueError, match="not one of"):
        confusion_matrix([("perfect", "great")], CRAG_GRADES)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(CRAG_GRADES), st.sampled_from(CRAG_GRADES)), min_size=1, max_size=40))
def test_kappa_matches_the_textbook_formula(pairs) -> None:
    expected = textbook_kappa(pairs, CRAG_GRADES)
    got = cohen_kappa(pairs)
    assert got.kappa == (None if expected is None else pytest.approx(expected, abs=1e-12))
    matrix = confusion_matrix(pairs, CRAG_GRADES)
    assert sum(map(sum, matrix)) == len(pairs) and sum(matrix[i][i] for i in range(4)) / len(pairs) == pytest.approx(got.observed)


def test_qrels_agreement_uses_the_same_kappa() -> None:
    from pytest_crucible.qrels.grades import agreement

    rows = [{"query_id": "q", "chunk_id": f"c{i}", "doc_id": None, "grade": grade, "source": source, "id": n,
             "created_at": "t", "created_by": "ann" if source == "human" else None}
            for n, (i, grade, source) in enumerate([(1, 3, "llm"), (1, 3, "human"), (2, 0, "llm"), (2, 2, "human"),
                                                    (3, 1, "llm"), (3, 1, "human")])]
    report = agreement(rows)
    assert report["fourLevel"]["kappa"] == cohen_kappa([(3, 3), (0, 2), (1, 1)]).kappa


# -- the CLI end to end ------------------------------------------------------------------------------
OFFLINE = make_judge("lexical").model  # the current offline judge (`--judge lexical`, `--crucible-judge=lexical`)
RETURNS = "Items can be returned within 30 days of delivery for a full refund."
AUDIT = "Audit exports are retained for seven years in cold storage."
CASES = [
    {"id": "c001", "question": "How long is the return window?", "contexts": [RETURNS],
     "answer": "You can return items within 30 days of delivery.", "reference": "Returns are accepted within 30 days of delivery.",
     "labels": {"crag": "perfect", "faithful": True}},
    {"id": "c002", "question": "How long is the return window?", "contexts": [RETURNS],
     "answer": "You can return items within 90 days and get store credit on Mars.",
     "reference": "Returns are accepted within 30 days of delivery.", "labels": {"crag": "incorrect", "faithful": False}},
    {"id": "c003", "question": "Who founded the company?", "contexts": ["The shop ships worldwide."], "answer": "I don't know.",
     "reference": "Ada Lovelace founded the company in 1843.", "labels": {"crag": "missing"}},
    {"id": "c004", "question": "What is the retention period for audit exports?", "contexts": [AUDIT],
     "answer": "Audit exports are kept for seven years.", "reference": "Audit exports are retained for seven years.",
     "labels": {"crag": "acceptable", "faithful": True}},
    {"id": "c005", "question": "What is the retention period for audit exports?", "contexts": [AUDIT],
     "answer": "Audit exports are retained for seven years, and they are encrypted with quantum keys.",
     "reference": "Audit exports are retained for seven years.", "labels": {"faithful": False}},
]


def write_labels(path: Path, cases=CASES) -> Path:
    path.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    return path


def calibrate(capsys, *argv: str) -> dict:
    assert crucible(["judge", "calibrate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_calibrate_with_the_lexical_judge(tmp_path: Path, capsys) -> None:
    labels, db = write_labels(tmp_path / "labels.jsonl"), tmp_path / "c.db"
    document = calibrate(capsys, str(labels), "--db", str(db))
    assert document["judge"] == {"model": OFFLINE, "promptVersion": OFFLINE}
    assert [case["id"] for case in document["cases"]] == [case["id"] for case in CASES]
    assert set(document["cases"][0]) == {"id", "crag", "faithful"} and set(document["cases"][0]["crag"]) == {"label", "verdict"}
    by_id = {case["id"]: case for case in document["cases"]}
    assert by_id["c003"]["crag"] == {"label": "missing", "verdict": "missing"}  # an honest abstention needs no judge
    assert by_id["c003"]["faithful"] == {"label": None, "verdict": None}  # no claims: not compared
    assert by_id["c005"]["crag"]["label"] is None
    for kind, categories in (("crag", list(CRAG_GRADES)), ("faithful", ["true", "false"])):
        block = document[kind]
        assert {"n", "accuracy", "kappa", "confusion"} <= set(block)
        confusion = block["confusion"]
        assert list(confusion) == categories and all(list(row) == categories for row in confusion.values())
        # The figures are the confusion matrix's.
        pairs = [(human, judge) for human, row in confusion.items() for judge, count in row.items() for _ in range(count)]
        assert block["n"] == len(pairs) == sum(1 for case in document["cases"]
                                               if case[kind]["label"] is not None and case[kind]["verdict"] is not None)
        assert block["accuracy"] == pytest.approx(sum(confusion[c][c] for c in categories) / block["n"])
        assert block["kappa"] == pytest.approx(textbook_kappa(pairs, categories))
        shown = {True: "true", False: "false"}
        assert Counter((shown.get(c[kind]["label"], c[kind]["label"]), shown.get(c[kind]["verdict"], c[kind]["verdict"]))
                       for c in document["cases"] if c[kind]["label"] is not None and c[kind]["verdict"] is not None) \
            == Counter(pairs)
    assert document["crag"]["n"] == 4 and document["faithful"]["n"] == 4
    binary = [(h in ("perfect", "acceptable"), j in ("perfect", "acceptable"))
              for h, row in document["crag"]["confusion"].items() for j, count in row.items() for _ in range(count)]
    assert document["crag"]["kappaBinary"] == pytest.approx(textbook_kappa(binary, [True, False]))

    # Remembered in the store, one row per calibration.
    conn = sqlite3.connect(db)
    [(model, prompts, n_crag, kappa, n_faithful, figures)] = conn.execute(
        "SELECT judge_model, prompt_version, n_crag, kappa_crag, n_faithful, figures FROM judge_calibrations").fetchall()
    assert (model, prompts, n_crag, n_faithful) == (OFFLINE, OFFLINE, 4, 4)
    assert kappa == pytest.approx(document["crag"]["kappa"]) and json.loads(figures)["crag"] == document["crag"]
    assert conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0] > 0
    conn.close()

    # The text form: the figures, the confusion matrix and the disagreements.
    assert crucible(["judge", "calibrate", str(labels), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "crag: n 4" in out and "human / judge" in out and "disagreements (" in out
    assert max(len(line) for line in out.splitlines() if str(tmp_path) not in line) <= 100


def test_a_rerun_is_served_from_the_cache(tmp_path: Path, capsys) -> None:
    labels, db = write_labels(tmp_path / "labels.jsonl"), tmp_path / "c.db"
    first = calibrate(capsys, str(labels), "--db", str(db))
    assert first["stats"]["judged"] > 0
    second = calibrate(capsys, str(labels), "--db", str(db))
    assert second["stats"]["judged"] == 0 and second["stats"]["cache_hits"] == second["stats"]["requests"] > 0
    assert {key: second[key] for key in ("crag", "faithful", "cases")} == {key: first[key] for key in ("crag", "faithful", "cases")}


def test_calibrate_claude_through_the_mock_and_its_cache(tmp_path: Path, capsys, monkeypatch,
                                                         mock_anthropic: MockAnthropic) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_anthropic.base_url)
    labels, db = write_labels(tmp_path / "labels.jsonl"), tmp_path / "c.db"
    first = calibrate(capsys, str(labels), "--judge", "anthropic", "--judge-model", "claude-haiku-5-5", "--db", str(db))
    assert first["judge"]["model"] == "claude-haiku-5-5"
    sent = mock_anthropic.counts["messages"]
    assert sent == first["stats"]["judged"] > 0
    # The mock grades every answer perfect: c002 (human: incorrect) is a disagreement.
    assert {case["id"]: case["crag"]["verdict"] for case in first["cases"]}["c002"] == "perfect"
    second = calibrate(capsys, str(labels), "--judge", "anthropic", "--judge-model", "claude-haiku-5-5", "--db", str(db))
    assert mock_anthropic.counts["messages"] == sent  # nothing new sent: every verdict came from the database
    assert second["stats"]["judged"] == 0 and second["crag"] == first["crag"]


# -- bad files -------------------------------------------------------------------------------------
GOOD = json.dumps(CASES[0])


@pytest.mark.parametrize("lines, where, field, hint", [
    ([GOOD, "{not json"], 2, "json", "one JSON object per line"),
    ([GOOD, json.dumps({k: v for k, v in CASES[1].items() if k != "question"})], 2, "question", "a labels line looks like"),
    ([json.dumps({**CASES[0], "labels": {"crag": "great"}})], 1, "labels.crag", "CRAG grades"),
    ([json.dumps({**CASES[0], "labels": {"faithful": "yes"}})], 1, "labels.faithful", "JSON true/false"),
    ([json.dumps({**CASES[0], "labels": {}})], 1, "labels", '"labels": {'),
    ([json.dumps({**CASES[0], "contexts": "one passage"})], 1, "contexts", "list of strings"),
    ([json.dumps({**CASES[0], "refrence": "x"})], 1, "refrence", "did you mean 'reference'?"),
    ([GOOD, GOOD], 2, "id", "its own id"),
    (["[1, 2]"], 1, "json", "one labelled case per line"),
    ([json.dumps({**CASES[0], "assertions": "Says 30 days"})], 1, "assertions", "the golden item's assertions"),
    ([json.dumps({**CASES[0], "assertions": ["Says 30 days"]})], 1, "assertions[0]", "the golden item's assertions"),
    ([json.dumps({**CASES[0], "assertions": [{"text": "Says 30 days", "kind": "may"}]})], 1, "assertions[0].kind",
     "kind must or should"),
    ([json.dumps({**CASES[0], "assertions": [{"kind": "must"}]})], 1, "assertions[0].text", "text (required)"),
    ([json.dumps({**CASES[0], "assertions": [{"text": "x", "concept": "c1"}]})], 1, "assertions[0].concept",
     "did you mean 'conceptId'?"),
    ([json.dumps({**CASES[0], "assertion": []})], 1, "assertion", "did you mean 'assertions'?"),
    ([json.dumps({**CASES[0], "questionType": "false-premise"})], 1, "questionType", "did you mean 'false_premise'?"),
    ([json.dumps({**CASES[0], "abstained": "yes"})], 1, "abstained", "the pipeline said it abstained"),
])
def test_a_bad_labels_file_is_one_error_naming_file_line_and_field(tmp_path: Path, capsys, lines, where, field, hint) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert crucible(["judge", "calibrate", str(path), "--db", str(tmp_path / "c.db")]) == 2
    captured = capsys.readouterr()
    first, second = captured.err.rstrip("\n").split("\n")
    assert first.startswith(f"crucible: {path}:{where}: field '{field}': ")
    assert second.startswith("HINT: ") and hint in second
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "c.db").exists()  # nothing judged, nothing written


def test_a_missing_labels_file_and_a_missing_key(tmp_path: Path, capsys, monkeypatch) -> None:
    assert crucible(["judge", "calibrate", str(tmp_path / "none.jsonl"), "--db", str(tmp_path / "c.db")]) == 2
    assert "cannot read the labels file" in capsys.readouterr().err
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    labels = write_labels(tmp_path / "labels.jsonl")
    assert crucible(["judge", "calibrate", str(labels), "--judge", "anthropic", "--db", str(tmp_path / "c.db")]) == 2
    err = capsys.readouterr().err
    assert "ANTHROPIC_API_KEY is not set" in err and "HINT: " in err and "--judge lexical" in err


def test_an_answer_may_be_null_or_blank_and_the_reference_absent(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"id": "a", "question": "Q?", "contexts": [], "answer": None, "labels": {"crag": "missing"}}) + "\n"
                    + json.dumps({"id": "b", "question": "Q?", "contexts": [], "answer": "", "labels": {"crag": "missing"}}) + "\n")
    cases = read_labels_file(path)
    assert [(case.id, case.answer, case.reference) for case in cases] == [("a", None, None), ("b", "", None)]


# -- the summary line, the report and the labels export ---------------------------------------------
def test_the_calibration_line() -> None:
    assert calibration_line(None) == "  not calibrated: crucible judge calibrate LABELS.jsonl measures it"
    line = calibration_line({"n_crag": 150, "kappa_crag": 0.412, "kappa_crag_binary": 0.5249, "n_faithful": 140,
                             "kappa_faithful": 0.55, "figures": {"nLabels": 150}, "created_at": "2026-12-01T10:00:00Z"})
    assert line == "  calibrated: crag kappa 0.41 (binary 0.52), faithful kappa 0.55 on 150 labels (2026-12-01)"
    assert "faithful" not in calibration_line({"n_crag": 3, "kappa_crag": None, "kappa_crag_binary": 1.0, "n_faithful": 0,
                                               "figures": {"nLabels": 3}, "created_at": "2026-12-01"})
    one_category = calibration_line({"n_crag": 5, "kappa_crag": 0.7, "kappa_crag_binary": 0.6, "n_faithful": 3, "kappa_faithful": None,
                                     "figures": {"nLabels": 5, "faithful": {"kappaUndefined": "your labels have no 'false' cases"}},
                                     "created_at": "2026-12-02"})
    assert one_category == ("  calibrated: crag kappa 0.70 (binary 0.60), faithful kappa not measurable (your labels have no "
                            "'false' cases) on 5 labels (2026-12-02)")


GOLDEN = [{"id": "q-001", "question": "What is the return window?", "reference": "Bikes can be returned within 30 days.",
           "citations": [{"docId": "returns", "chunkId": "returns#p1", "mode": "required"}]},
          {"id": "q-002", "question": "Which bikes share the battery?", "reference": "The City and the Trek share it.",
           "citations": [{"docId": "battery", "mode": "required"}]}]


def test_the_summary_and_the_report_show_the_judges_calibration(pytester: pytest.Pytester, capsys) -> None:
    write_golden(pytester.path / "golden_support.jsonl", GOLDEN)
    pytester.makeconftest(RANKED_CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "--crucible-judge=lexical", "--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"judge {OFFLINE}*", "  not calibrated: crucible judge calibrate LABELS.jsonl measures it"])
    db = pytester.path / ".crucible" / "crucible.db"
    labels = write_labels(pytester.path / "labels.jsonl")
    assert crucible(["judge", "calibrate", str(labels), "--db", str(db)]) == 0
    capsys.readouterr()
    result = pytester.runpytest("-p", "no:cacheprovider", "--crucible-judge=lexical", "--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"judge {OFFLINE}*", "  calibrated: crag kappa * (binary *), faithful kappa * on 5 labels (20*)"])
    lines = result.stdout.lines
    assert lines[next(i for i, line in enumerate(lines) if line.startswith(f"judge {OFFLINE}")) + 1].startswith("  calibrated: ")
    assert all(len(line) <= 100 for line in lines if "calibrated" in line)
    # The HTML report shows the same line near its judge line.
    report = pytester.path / "report.html"
    assert crucible(["report", "latest", "-o", str(report), "--db", str(db), "--workspace", pytester.path.name]) == 0
    html = report.read_text(encoding="utf-8")
    assert '<dd id="judge-calibration">calibrated: crag kappa' in html and html.index("judge-calibration") > html.index("<dt>judge</dt>")

    # Reviewed failures become a labels file: promote a correction of the run's q-001, export, calibrate.
    conn = sqlite3.connect(db)
    run_id, result_id = conn.execute("SELECT run_id, result_id FROM results WHERE item_id = 'q-001' ORDER BY recorded_at DESC").fetchone()
    conn.close()
    capsys.readouterr()
    assert crucible(["promote", "--run", run_id, "--result", result_id, "--question", "What is the return window?",
                     "--assertion", "Bikes can be returned within 30 days.", "--error-class", "hallucination", "--by", "dana",
                     "--db", str(db)]) == 0
    exported = pytester.path / "reviewed.jsonl"
    assert crucible(["judge", "labels", "export", "-o", str(exported), "--db", str(db)]) == 0
    assert "wrote 1 labelled case(s)" in capsys.readouterr().out
    [case] = [json.loads(line) for line in exported.read_text().splitlines()]
    assert case["question"] == "What is the return window?" and case["reference"] == GOLDEN[0]["reference"]
    assert case["labels"] == {"crag": "incorrect", "faithful": False} and len(case["contexts"]) > 0
    document = calibrate(capsys, str(exported), "--db", str(db))
    assert [c["id"] for c in document["cases"]] == [case["id"]]


def test_metadata_keys_are_ignored_and_answerable_false_makes_an_abstention_right(tmp_path: Path, capsys) -> None:
    path = tmp_path / "labels.jsonl"
    case = {"id": "u1", "domain": "shop", "why": "abstention: the passages do not say", "question": "Who founded it?",
            "contexts": ["The shop ships worldwide."], "answer": "The documents do not say.", "answerable": False,
            "reference": "The information is not available.", "labels": {"crag": "perfect"}}
    write_labels(path, [case])
    document = calibrate(capsys, str(path), "--db", str(tmp_path / "c.db"))
    assert document["cases"] == [{"id": "u1", "crag": {"label": "perfect", "verdict": "perfect"},
                                  "faithful": {"label": None, "verdict": None}}]
    write_labels(path, [{**case, "answerable": "no"}])
    assert crucible(["judge", "calibrate", str(path), "--db", str(tmp_path / "c.db")]) == 2
    assert f"{path}:1: field 'answerable': expected true or false" in capsys.readouterr().err


# -- the gate says when it rests on a judge not shown to agree with people ----------------------------
def test_calibration_warnings_name_the_gated_judged_metrics_and_their_kappa() -> None:
    from pytest_crucible.verdict.gate import calibration_warnings

    assert calibration_warnings(None, "lexical-v2", ["ndcgAt10", "recallAtK"]) == []  # retrieval: no judge
    [never] = calibration_warnings(None, "lexical-v2", ["ndcgAt10", "truthfulness", "faithfulness"])
    assert never.startswith("WARNING the gate rests on judge lexical-v2 for truthfulness, faithfulness, and that judge "
                            "was never calibrated")
    calibration = {"kappa_crag": 0.71, "kappa_faithful": 0.22}
    [low] = calibration_warnings(calibration, "lexical-v2", ["truthfulness", "faithfulness", "contextRecall"])
    assert "gated metric faithfulness rests on judge lexical-v2, whose faithful agreement with people is kappa 0.22 (below 0.6)" in low
    assert calibration_warnings({"kappa_crag": None, "kappa_faithful": 0.9}, "m", ["aurc"])[0].count("kappa undefined") == 1


def test_a_gate_on_a_judged_metric_warns_until_the_judge_is_calibrated(pytester: pytest.Pytester) -> None:
    write_golden(pytester.path / "golden_support.jsonl", GOLDEN)
    pytester.makeconftest(RANKED_CONFTEST)
    args = ("-p", "no:cacheprovider", "--crucible-judge=lexical", "--crucible-outcome=record")
    result = pytester.runpytest(*args, "--crucible-fail-under=truthfulness=-1")
    assert result.ret == pytest.ExitCode.OK  # a warning never changes the verdict
    result.stdout.fnmatch_lines([f"WARNING the gate rests on judge {OFFLINE} for truthfulness, and that judge was never calibrated*"])
    # The HTML report's gate shows the same warning once, floors-only gate included.
    db, report = pytester.path / ".crucible" / "crucible.db", pytester.path / "report.html"
    assert crucible(["report", "latest", "-o", str(report), "--db", str(db), "--workspace", pytester.path.name,
                     "--fail-under", "truthfulness=-1"]) == 0
    html = report.read_text(encoding="utf-8")
    assert html.count(f"WARNING the gate rests on judge {OFFLINE} for truthfulness") == 1 and "WARNING WARNING" not in html
    result = pytester.runpytest(*args, "--crucible-fail-under=ndcgAt10=0")
    assert result.ret == pytest.ExitCode.OK and "never calibrated" not in result.stdout.str()  # retrieval needs no judge


# -- a run's items exported as cases: calibrating one gives the run's own verdict ---------------------
SYSTEM_RECORD = "crucible_mode = system\ncrucible_outcome = record"
RETURNS_REFERENCE = "Bikes can be returned within 30 days."
# The pipeline (RANKED_CONFTEST) answers "Bikes can be returned within 30 days [S1]." to every answerable
# question and "I don't know." (abstained) to the others.
RUN_ITEMS = [
    # The answer restates the reference, but misses the must-assertion: a run grades it against the assertion.
    {"id": "a-must", "question": "What do I need to return a bike?", "reference": RETURNS_REFERENCE,
     "assertions": [{"text": "Says the original receipt is required for every return", "kind": "must"},
                    {"text": "Mentions the 30 days", "kind": "should", "weight": 0.5}]},
    {"id": "b-plain", "question": "What is the return window?", "reference": RETURNS_REFERENCE},
    {"id": "c-premise", "question": "Why can bikes never be returned?", "reference": RETURNS_REFERENCE,
     "questionType": "false_premise"},
    {"id": "d-unanswerable", "question": "Who designed the shop's logo?", "answerable": False,
     "reference": "The documents do not say."},
]
LEXICAL_V2 = ("--judge", "lexical-v2")  # pinned: the default offline judge may move on; both sides name the same one


def _run_verdicts(db: Path, run_id: str) -> dict[str, tuple]:
    """item id -> (CRAG grade, faithful verdict) as the run stored them."""
    grades = dict(db_rows(db, "SELECT item_id, crag_grade FROM results WHERE run_id = ?", [run_id]))
    faithfulness = dict(db_rows(db, "SELECT item_id, value FROM item_metrics WHERE run_id = ? AND metric = 'faithfulness'",
                                [run_id]))
    return {item: (grade, None if item not in faithfulness else faithfulness[item] >= 1.0) for item, grade in grades.items()}


def test_a_runs_items_exported_as_cases_calibrate_to_the_runs_own_verdicts(pytester: pytest.Pytester, capsys) -> None:
    write_project(pytester, RUN_ITEMS, RANKED_CONFTEST, ini=SYSTEM_RECORD)
    result = pytester.runpytest("-p", "no:cacheprovider", "--crucible-judge=lexical-v2")
    assert result.ret == pytest.ExitCode.OK
    db = pytester.path / ".crucible" / "crucible.db"
    [(run_id,)] = db_rows(db, "SELECT id FROM runs")
    stored = _run_verdicts(db, run_id)
    assert stored["a-must"][0] == "incorrect" and stored["d-unanswerable"] == ("perfect", None)

    exported = pytester.path / "to_label.jsonl"
    done = crucible_cli("judge", "labels", "export", "--run", "latest", "-o", exported, "--db", db)
    assert done.ret == 0, done.errlines
    assert done.outlines[0] == f"wrote 4 case(s) of run {run_id} to {exported}"
    assert "their labels are the judge's own verdicts: check each one" in done.outlines[1]
    cases = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    by_id = {case["id"]: case for case in cases}
    assert [case["id"] for case in cases] == sorted(item["id"] for item in RUN_ITEMS)
    ranked = ["Bikes can be returned within 30 days.", "The Vela uses the PB500 battery.",
              "The PB500 battery charges in 4 hours.", "Opening hours are 9 to 5."]
    case = by_id["a-must"]
    assert (case["itemId"], case["question"], case["contexts"], case["answer"], case["reference"], case["answerable"]) == \
        ("a-must", RUN_ITEMS[0]["question"], ranked, "Bikes can be returned within 30 days [S1].", RETURNS_REFERENCE, True)
    assert [(a["text"], a["kind"], a["weight"]) for a in case["assertions"]] == \
        [(a["text"], a["kind"], a.get("weight", 1.0)) for a in RUN_ITEMS[0]["assertions"]]
    assert by_id["c-premise"]["questionType"] == "false_premise"
    assert (by_id["d-unanswerable"]["answerable"], by_id["d-unanswerable"]["abstained"]) == (False, True)
    assert "check each one" in case["note"]  # metadata: the labels are the judge's, until a person checks them
    # The labels to check start as the run's own verdicts.
    for item_id, (grade, faithful) in stored.items():
        assert by_id[item_id]["labels"] == {k: v for k, v in (("crag", grade), ("faithful", faithful)) if v is not None}

    # Calibrating the exported cases: the judge gives every case exactly the run's verdict.
    capsys.readouterr()  # (what the inner pytest session printed)
    document = calibrate(capsys, str(exported), *LEXICAL_V2, "--db", str(db))
    assert document["judge"]["model"] == "lexical-v2"
    assert {c["id"]: (c["crag"]["verdict"], c["faithful"]["verdict"]) for c in document["cases"]} == stored
    assert document["judgeFailed"] == [] and disagreements_of(document) == []

    # Without the assertions (what a labels file could hold before), the same answer grades otherwise: proof they are used.
    without = pytester.path / "without_assertions.jsonl"
    write_labels(without, [{k: v for k, v in case.items() if k != "assertions"} for case in cases])
    bare = calibrate(capsys, str(without), *LEXICAL_V2, "--db", str(db))
    verdicts = {c["id"]: c["crag"]["verdict"] for c in bare["cases"]}
    assert verdicts["a-must"] == "perfect" != stored["a-must"][0]
    assert {item: grade for item, grade in verdicts.items() if item != "a-must"} == \
        {item: grade for item, (grade, _) in stored.items() if item != "a-must"}


def disagreements_of(document: dict) -> list:
    return [(c["id"], kind) for c in document["cases"] for kind in ("crag", "faithful")
            if None not in (c[kind]["label"], c[kind]["verdict"]) and c[kind]["label"] != c[kind]["verdict"]]


def test_export_of_a_run_skips_what_has_no_verdict_and_names_bad_runs(pytester: pytest.Pytester) -> None:
    write_project(pytester, RUN_ITEMS[:2], RANKED_CONFTEST)  # component mode: no answer is judged
    assert pytester.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    db = pytester.path / ".crucible" / "crucible.db"
    done = crucible_cli("judge", "labels", "export", "--run", "latest", "-o", pytester.path / "none.jsonl", "--db", db)
    assert done.ret == 0
    assert "wrote 0 case(s)" in done.outlines[0]
    assert "skipped: 2 item(s) without a judge verdict" in done.outlines[0]
    assert any("--crucible-mode=system" in line for line in done.errlines)
    missing = crucible_cli("judge", "labels", "export", "--run", "ZZZZ", "-o", "-", "--db", db)
    assert missing.ret == 2 and missing.errlines[0].startswith("crucible: no run matches 'ZZZZ'")
    assert missing.errlines[1].startswith("HINT: ")


# -- kappa on labels that use one category only --------------------------------------------------
def test_a_reference_rater_with_one_category_makes_kappa_undefined() -> None:
    # People said true every time: a judge that always says true would score 1.0, one that ever says false 0.
    assert cohen_kappa([(True, True)] * 4 + [(True, False)], reference=0) == \
        type(cohen_kappa([]))(None, 0.8, 0.8, 5, single_category=True)
    assert cohen_kappa([(True, True)] * 3, reference=0).kappa is None
    assert cohen_kappa([(False, True), (True, True)], reference=1).single_category is True  # the reference is the second
    # The other rater constant is measurable: chance level, kappa 0.
    assert cohen_kappa([(True, True), (False, True)], reference=0).kappa == 0.0
    # Peers (qrels agreement): symmetric as before, one shared category reported as 1.0.
    assert cohen_kappa([(True, True)] * 3).kappa == 1.0 and cohen_kappa([(True, True), (True, False)]).kappa == 0.0
    with pytest.raises(ValueError, match="reference is 0 or 1"):
        cohen_kappa([(1, 1)], reference=2)


def test_labels_of_one_category_report_an_undefined_kappa_and_the_gate_says_why(pytester: pytest.Pytester, capsys) -> None:
    write_project(pytester, RUN_ITEMS[1:2], RANKED_CONFTEST, ini=SYSTEM_RECORD)
    gate = ("-p", "no:cacheprovider", "--crucible-judge=lexical-v2", "--crucible-fail-under=faithfulness=0")
    assert pytester.runpytest(*gate).ret == pytest.ExitCode.OK
    db = pytester.path / ".crucible" / "crucible.db"
    # Every faithful label is true (two crag categories, so the crag kappa is measurable).
    labels = write_labels(pytester.path / "labels.jsonl", [CASES[0], CASES[3]])
    capsys.readouterr()  # (what the inner pytest session printed)
    document = calibrate(capsys, str(labels), *LEXICAL_V2, "--db", str(db))
    assert document["faithful"]["n"] == 2 and document["faithful"]["kappa"] is None
    assert document["faithful"]["kappaUndefined"] == "your labels have no 'false' cases"
    assert document["crag"]["kappaUndefined"] is None
    assert document["crag"]["kappaBinary"] is None  # perfect and acceptable are both "correct"
    assert document["crag"]["kappaBinaryUndefined"] == "your labels use one category only: 'correct' (perfect or acceptable)"
    [(kappa_faithful, figures)] = db_rows(db, "SELECT kappa_faithful, figures FROM judge_calibrations")
    assert kappa_faithful is None and json.loads(figures)["faithful"]["kappaUndefined"] == "your labels have no 'false' cases"
    # The text form says undefined, and why.
    done = crucible_cli("judge", "calibrate", labels, *LEXICAL_V2, "--db", db)
    assert done.ret == 0 and "faithful: n 2  accuracy" in done.stdout.str() and "  kappa undefined" in done.stdout.str()
    done.stdout.fnmatch_lines(["faithful: n 2 *kappa undefined", "  kappa undefined: your labels have no 'false' cases"])

    # The gate's warning quotes the reason instead of a kappa of 0.00; the verdict is unchanged.
    result = pytester.runpytest(*gate)
    assert result.ret == pytest.ExitCode.OK
    text = " ".join(line.strip() for line in result.stdout.lines)
    assert ("WARNING gated metric faithfulness rests on judge lexical-v2, whose faithful agreement with people is not "
            "measurable: your labels have no 'false' cases (docs/judge-calibration.md)") in text
    assert "faithful agreement with people is kappa" not in text

    # A single crag category: the grades it names.
    capsys.readouterr()
    write_labels(labels, [{**CASES[0], "id": f"p{i}", "labels": {"crag": "perfect"}} for i in range(2)])
    assert calibrate(capsys, str(labels), *LEXICAL_V2, "--db", str(db))["crag"]["kappaUndefined"] == \
        "your labels use one category only: 'perfect'"


def test_calibration_warnings_quote_why_a_kappa_is_undefined() -> None:
    from pytest_crucible.verdict.gate import calibration_warnings

    calibration = {"kappa_crag": None, "kappa_faithful": None,
                   "figures": {"crag": {"kappaUndefined": "your labels use one category only: 'perfect'"},
                               "faithful": {"kappaUndefined": "no faithful label was compared"}}}
    crag, faithful = calibration_warnings(calibration, "m", ["truthfulness", "faithfulness"])
    assert crag == ("WARNING gated metric truthfulness rests on judge m, whose crag agreement with people is not measurable: "
                    "your labels use one category only: 'perfect' (docs/judge-calibration.md)")
    assert "not measurable: no faithful label was compared" in faithful
    # A calibration stored before the reason was (no figures): still "undefined".
    assert "kappa undefined (below 0.6)" in calibration_warnings({"kappa_crag": None}, "m", ["truthfulness"])[0]


def test_a_calibration_the_judge_failed_on_is_shown_never_remembered(tmp_path: Path, monkeypatch, capsys) -> None:
    port = free_port()  # nothing listens there: every request fails (the circuit opens)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000-calibrate-unreachable")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    labels = Path(__file__).resolve().parent / "data" / "calibration" / "labels_dev.jsonl"
    db = tmp_path / "c.db"
    assert crucible(["judge", "calibrate", str(labels), "--judge", "anthropic", "--db", str(db)]) == 3
    captured = capsys.readouterr()
    assert "judge failed on 80 case(s), not compared" in captured.out and "remembered as" not in captured.out
    assert f"judge unreachable at 127.0.0.1:{port}" in captured.err and "this calibration is not remembered" in captured.err
    assert db_rows(db, "SELECT COUNT(*) FROM judge_calibrations") == [(0,)]  # no run's summary calls the judge calibrated
    assert crucible(["judge", "calibrate", str(labels), "--judge", "anthropic", "--db", str(db), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["calibrationId"] is None
