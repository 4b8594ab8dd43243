"""Relevance judgments: the append-only ledger, effective grades, agreement, qrels files,
and the round trip through trec_eval of a real plugin run."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import pytest
from helpers import examples, write_golden
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.cli import main
from pytest_crucible.metrics.retrieval import provenance_qrels, ranking_units, retrieval_metrics
from pytest_crucible.qrels.formats import (
    QrelsFormatError,
    format_effective_qrels,
    format_qrels,
    format_trec_run,
    read_qrels_file,
    run_rankings,
)
from pytest_crucible.qrels.grades import agreement, effective_grades, llm_human_pairs
from pytest_crucible.qrels.trec_eval import rank_run, read_qrels, read_run
from pytest_crucible.stats.agreement import cohen_kappa
from pytest_crucible.store import Store


# -- helpers -----------------------------------------------------------------------------------
def make_run(db: Path, items: dict[str, tuple[list[dict], list[tuple[str, str]]]], k: int = 10) -> str:
    """A complete run recorded through the Store API: item id -> (citations, retrieved (chunk, doc) pairs)."""
    store = Store.open(db)
    run_id = store.start_run(config_hash="cd" * 32, params={}, resolved={"retrievalLimit": k}, mode="component",
                             outcome_mode="record")
    for item_id, (citations, retrieved) in items.items():
        qrels = provenance_qrels(citations)
        ranking = ranking_units(retrieved, qrels)
        store.record_score(run_id, {
            "item_id": item_id, "question": f"question {item_id}", "outcome": "passed",
            "item": {"id": item_id, "question": f"question {item_id}", "citations": citations},
            "retrieved": [{"chunk_id": c, "doc_id": d, "text": "", "score": None, "metadata": {}} for c, d in retrieved],
            "metrics": retrieval_metrics(ranking, qrels, k),
        })
    store.finish_run(run_id, status="complete", golden_hash="g")
    store.close()
    return run_id


def run_metrics_now(store: Store, run_id: str, item_id: str, k: int = 10) -> dict[str, float]:
    """The item's retrieval metrics against the run's *current* effective qrels."""
    qrels = store.effective_qrels(run_id)[item_id]
    [result] = [row for row in store.results(run_id) if row["item_id"] == item_id]
    pairs = [(chunk["chunk_id"], chunk["doc_id"]) for chunk in json.loads(result["retrieved"])]
    return retrieval_metrics(ranking_units(pairs, qrels), qrels, k)


def row(query: str, unit: str, grade: int, source: str, *, id: int, created_at: str = "2025-01-01T00:00:00.000Z",
        doc: str | None = None) -> dict:
    kind, _, ident = unit.partition(":")
    return {"id": id, "query_id": query, "chunk_id": ident if kind == "chunk" else None,
            "doc_id": ident if kind == "doc" else doc, "grade": grade, "source": source, "created_at": created_at}


# -- the ledger at the SQLite level ------------------------------------------------------------
def test_ledger_refuses_update_and_delete_in_sqlite(tmp_path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    assert store.append_qrels([{"query_id": "q1", "chunk_id": "c1", "doc_id": "d1", "grade": 2, "source": "llm",
                                "judge_model": "m"}]) == 1
    # A machine judgment is keyed: the same one again is ignored, never rewritten.
    assert store.append_qrels([{"query_id": "q1", "chunk_id": "c1", "doc_id": "d1", "grade": 0, "source": "llm",
                                "judge_model": "m"}]) == 0
    store.close()
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError, match="append-only ledger: UPDATE is refused"):
        conn.execute("UPDATE qrels SET grade = 0")
    with pytest.raises(sqlite3.DatabaseError, match="append-only ledger: DELETE is refused"):
        conn.execute("DELETE FROM qrels WHERE source = 'llm'")
    assert conn.execute("SELECT grade, source FROM qrels").fetchall() == [(2, "llm")]
    conn.close()


def test_override_through_the_cli_appends_beside_the_old_judgments(database, capsys) -> None:
    db = database
    make_run(db, {"q1": ([{"docId": "d1", "chunkId": "c1", "mode": "required"}], [("c1", "d1"), ("c2", "d1")])})
    Store.open(db).append_qrels([{"query_id": "q1", "chunk_id": "c2", "doc_id": "d1", "grade": 1, "source": "llm",
                                  "judge_model": "m"}])

    assert main(["qrels", "override", "q1", "c1", "0", "--by", "ann", "--note", "wrong passage", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "q1 chunk:c1: effective grade 3 (provenance) -> 0 (human), by ann" in out
    assert main(["qrels", "override", "q1", "c1", "2", "--by", "bob", "--db", str(db)]) == 0
    assert "effective grade 0 (human) -> 2 (human), by bob" in capsys.readouterr().out
    assert main(["qrels", "override", "q1", "c2", "3", "--by", "ann", "--db", str(db)]) == 0
    assert "effective grade 1 (llm) -> 3 (human)" in capsys.readouterr().out

    store = Store.open(db)
    conn = store.db.conn  # sqlite3's or PostgreSQL's: the same rows, the same refusals
    rows = [tuple(row) for row in conn.execute("SELECT chunk_id, doc_id, grade, source, created_by, note FROM qrels ORDER BY id").fetchall()]
    # Every judgment is still readable, side by side: nothing was rewritten. The chunk's
    # document was filled in from the run's retrieved list.
    assert rows == [("c1", "d1", 3, "provenance", None, None), ("c2", "d1", 1, "llm", None, None),
                    ("c1", "d1", 0, "human", "ann", "wrong passage"), ("c1", "d1", 2, "human", "bob", None),
                    ("c2", "d1", 3, "human", "ann", None)]
    with pytest.raises(sqlite3.DatabaseError, match="append-only"), conn:
        conn.execute("UPDATE qrels SET grade = 3 WHERE source = 'human'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"), conn:
        conn.execute("DELETE FROM qrels WHERE source = 'human'")
    run_id = store.resolve_run("latest")
    assert store.effective_qrels(run_id) == {"q1": {"chunk:c1": 2, "chunk:c2": 3}}


def test_override_refuses_bad_grades_in_one_line(tmp_path, database, capsys) -> None:
    db = database
    make_run(db, {"q1": ([{"docId": "d1", "mode": "required"}], [("c1", "d1")])})
    for bad in ("4", "-1", "two", "2.5"):
        assert main(["qrels", "override", "q1", "c1", bad, "--by", "ann", "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"crucible: field 'GRADE': expected an integer grade 0..3, got '{bad}'\nHINT: ")
        assert "Traceback" not in err
    # A query no run has seen is refused (the ledger would keep the typo forever), unless forced.
    assert main(["qrels", "override", "q-typo", "d1", "1", "--doc", "--by", "ann", "--db", str(db)]) == 2
    assert capsys.readouterr().err.startswith("crucible: unknown query 'q-typo'")
    assert Store.open(db).qrels_rows(sources=["human"]) == []
    assert main(["qrels", "override", "q-typo", "d1", "1", "--doc", "--force", "--by", "ann", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "q-typo doc:d1: effective grade unjudged -> 1 (human)" in captured.out
    assert "warning: unknown query 'q-typo'" in captured.err and "judged anyway (--force)" in captured.err
    assert [r["grade"] for r in Store.open(db).qrels_rows(sources=["human"])] == [1]


# -- effective grades ----------------------------------------------------------------------
def test_effective_grade_precedence_newest_human_then_provenance_then_newest_llm() -> None:
    provenance = {"chunk:a": 3, "doc:D": 1}
    rows = [
        row("q", "chunk:a", 0, "llm", id=1),  # provenance beats llm
        row("q", "chunk:b", 1, "llm", id=2, created_at="2025-01-01T00:00:00.000Z"),
        row("q", "chunk:b", 2, "llm", id=3, created_at="2025-01-02T00:00:00.000Z"),  # newest llm
        row("q", "chunk:b", 3, "llm", id=4, created_at="2024-12-31T00:00:00.000Z"),  # older, appended later
        row("q", "doc:D", 3, "human", id=5, created_at="2025-01-01T00:00:00.000Z"),
        row("q", "doc:D", 0, "human", id=6, created_at="2025-01-03T00:00:00.000Z"),  # newest human beats provenance
        row("q", "chunk:c", 2, "human", id=7, created_at="2025-01-01T00:00:00.000Z"),
        row("q", "chunk:c", 1, "human", id=8, created_at="2025-01-01T00:00:00.000Z"),  # same time: later append wins
        row("q", "chunk:c", 3, "llm", id=9, created_at="2025-02-01T00:00:00.000Z"),  # a newer llm never beats a human
        row("q", "chunk:p", 1, "provenance", id=10),  # provenance rows come from the citations as run, not the ledger
    ]
    assert effective_grades(provenance, rows) == {
        "chunk:a": (3, "provenance"),
        "chunk:b": (2, "llm"),
        "doc:D": (0, "human"),
        "chunk:c": (1, "human"),
    }
    # Without ledger rows the citations as run are the judgments.
    assert effective_grades(provenance, []) == {"chunk:a": (3, "provenance"), "doc:D": (1, "provenance")}


def test_chunk_level_llm_grade_never_shadows_document_level_provenance() -> None:
    provenance = {"doc:D": 3}
    rows = [row("q", "chunk:D#2", 0, "llm", id=1, doc="D"), row("q", "chunk:E#1", 2, "llm", id=2, doc="E")]
    effective = effective_grades(provenance, rows)
    assert effective == {"doc:D": (3, "provenance"), "chunk:E#1": (2, "llm")}
    # So the chunk still counts for its document when a ranking is scored.
    qrels = {unit: grade for unit, (grade, _) in effective.items()}
    assert ranking_units([("D#2", "D"), ("E#1", "E")], qrels) == ["doc:D", "chunk:E#1"]
    # A human chunk judgment, unlike an llm one, is meant to override: it does shadow.
    human = effective_grades(provenance, [row("q", "chunk:D#2", 0, "human", id=3, doc="D")])
    assert human == {"doc:D": (3, "provenance"), "chunk:D#2": (0, "human")}
    assert ranking_units([("D#2", "D"), ("D#5", "D")], {u: g for u, (g, _) in human.items()}) == ["chunk:D#2", "doc:D"]


def test_human_override_changes_effective_grade_and_metrics_and_keeps_the_llm_row(database) -> None:
    db = database
    run_id = make_run(db, {"q1": ([{"docId": "d1", "chunkId": "c1", "mode": "required"}],
                                  [("c9", "d9"), ("c1", "d1"), ("c5", "d5")])})
    store = Store.open(db)
    store.append_qrels([{"query_id": "q1", "chunk_id": "c5", "doc_id": "d5", "grade": 0, "source": "llm", "judge_model": "m"}])
    assert store.effective_qrels(run_id) == {"q1": {"chunk:c1": 3, "chunk:c5": 0}}
    before = run_metrics_now(store, run_id, "q1")
    assert before == pytest.approx({"recallAtK": 1.0, "precisionAtK": 0.1, "mrr": 0.5,
                                    "ndcgAt10": 3 / 1.584962500721156 / 3, "hitAtK": 1.0})
    # What the plugin stored for the run (scored on the citations alone) is the same.
    assert before == pytest.approx({metric: values["q1"] for metric, values in store.item_metrics(run_id).items()})

    # A person says c5 is the exact answer (3): one appended human row.
    store.append_qrels([{"query_id": "q1", "chunk_id": "c5", "doc_id": "d5", "grade": 3, "source": "human", "created_by": "ann"}])
    assert store.effective_qrels(run_id) == {"q1": {"chunk:c1": 3, "chunk:c5": 3}}
    after = run_metrics_now(store, run_id, "q1")
    # Two relevant units now, at ranks 2 and 3: DCG = 3/log2(3) + 3/log2(4), ideal = 3 + 3/log2(3).
    ideal = 3 + 3 / 1.584962500721156
    assert after == pytest.approx({"recallAtK": 1.0, "precisionAtK": 0.2, "mrr": 0.5,
                                   "ndcgAt10": (3 / 1.584962500721156 + 1.5) / ideal, "hitAtK": 1.0})
    assert after["ndcgAt10"] != pytest.approx(before["ndcgAt10"])
    # The llm judgment is still there, beside the human one that now wins.
    c5 = [(r["source"], r["grade"]) for r in store.qrels_rows(query_ids=["q1"]) if r["chunk_id"] == "c5"]
    assert c5 == [("llm", 0), ("human", 3)]


# -- Cohen's kappa ----------------------------------------------------------------------------
def reference_kappa(pairs: list[tuple[int, int]], categories=(0, 1, 2, 3)) -> float | None:
    """Straight from the definition, via the confusion matrix."""
    n = len(pairs)
    index = {c: i for i, c in enumerate(categories)}
    matrix = [[0] * len(categories) for _ in categories]
    for a, b in pairs:
        matrix[index[a]][index[b]] += 1
    p_o = sum(matrix[i][i] for i in range(len(categories))) / n
    rows = [sum(matrix[i]) for i in range(len(categories))]
    cols = [sum(matrix[i][j] for i in range(len(categories))) for j in range(len(categories))]
    p_e = sum(rows[i] * cols[i] for i in range(len(categories))) / (n * n)
    if p_e == 1:
        return 1.0 if p_o == 1 else None
    return (p_o - p_e) / (1 - p_e)


def test_cohen_kappa_hand_computed() -> None:
    pairs = [(0, 0), (0, 0), (1, 1), (1, 0), (2, 2), (2, 3), (3, 3), (3, 3)]
    # n = 8; agreements on the diagonal: (0,0) x2, (1,1), (2,2), (3,3) x2 = 6, so p_o = 6/8 = 0.75.
    # Rater A's marginals: 0:2 1:2 2:2 3:2; rater B's: 0:3 1:1 2:1 3:3.
    # p_e = (2*3 + 2*1 + 2*1 + 2*3) / 8^2 = 16/64 = 0.25.
    # kappa = (0.75 - 0.25) / (1 - 0.25) = 0.5 / 0.75 = 2/3.
    kappa = cohen_kappa(pairs)
    assert (kappa.observed, kappa.expected, kappa.n) == (0.75, 0.25, 8)
    assert kappa.kappa == pytest.approx(2 / 3)
    # Binarized at grade >= 2: A = 0 0 0 0 1 1 1 1, B = 0 0 0 0 1 1 1 1 ((1,0) -> (0,0), (2,3) -> (1,1)).
    # p_o = 1; p_e = (4*4 + 4*4) / 64 = 0.5; kappa = (1 - 0.5) / (1 - 0.5) = 1.
    binary = cohen_kappa([(int(a >= 2), int(b >= 2)) for a, b in pairs])
    assert (binary.kappa, binary.observed, binary.expected) == (1.0, 1.0, 0.5)
    # A binarized case that is not perfect: (0,1) (1,1) (1,0) (1,1) (0,0) -> p_o = 3/5;
    # A: 0:2 1:3, B: 0:2 1:3 -> p_e = (2*2 + 3*3)/25 = 13/25; kappa = (15/25 - 13/25)/(12/25) = 1/6.
    assert cohen_kappa([(0, 1), (1, 1), (1, 0), (1, 1), (0, 0)]).kappa == pytest.approx(1 / 6)


grades = st.integers(min_value=0, max_value=3)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(grades, grades), min_size=1, max_size=60))
def test_cohen_kappa_matches_the_confusion_matrix_reference(pairs) -> None:
    kappa = cohen_kappa(pairs)
    expected = reference_kappa(pairs)
    if expected is None:
        assert kappa.kappa is None
    else:
        assert kappa.kappa == pytest.approx(expected, abs=1e-12)
        assert kappa.kappa <= 1.0 + 1e-12
    # Kappa does not care which rater is which.
    swapped = cohen_kappa([(b, a) for a, b in pairs]).kappa
    assert (swapped is None) == (kappa.kappa is None)
    if swapped is not None:
        assert swapped == pytest.approx(kappa.kappa, abs=1e-12)
    # Binarized at >= 2, against the same reference on two categories.
    binary = [(int(a >= 2), int(b >= 2)) for a, b in pairs]
    expected_binary = reference_kappa(binary, categories=(0, 1))
    got_binary = cohen_kappa(binary).kappa
    assert got_binary == (None if expected_binary is None else pytest.approx(expected_binary, abs=1e-12))


def test_cohen_kappa_degenerate_cases() -> None:
    # Both raters always say 2: p_o = p_e = 1; reported as perfect agreement.
    same = cohen_kappa([(2, 2)] * 5)
    assert (same.kappa, same.observed, same.expected, same.n) == (1.0, 1.0, 1.0, 5)
    # One rater constant, the other not: p_e = 1 * 1/2 = 0.5 = p_o, kappa 0 (chance level).
    assert cohen_kappa([(1, 0), (1, 1)]).kappa == 0.0
    # No pairs at all: nothing to measure.
    empty = cohen_kappa([])
    assert (empty.kappa, empty.observed, empty.expected, empty.n) == (None, 0.0, 0.0, 0)
    report = agreement([])
    assert report["pairs"] == 0 and report["fourLevel"]["kappa"] is None and report["binary"]["kappa"] is None


def test_llm_human_pairs_use_the_newest_judgment_of_each_side() -> None:
    rows = [
        row("q1", "chunk:a", 1, "llm", id=1), row("q1", "chunk:a", 3, "llm", id=2, created_at="2025-02-01T00:00:00.000Z"),
        row("q1", "chunk:a", 0, "human", id=3), row("q1", "chunk:a", 2, "human", id=4),
        row("q1", "chunk:b", 2, "llm", id=5),  # no human judgment: no pair
        row("q2", "doc:D", 0, "human", id=6), row("q2", "doc:D", 0, "llm", id=7),
        row("q2", "doc:D", 3, "provenance", id=8),  # provenance is not a rater here
    ]
    assert llm_human_pairs(rows) == [(3, 2), (0, 0)]


def test_agreement_command(tmp_path, database, capsys) -> None:
    db = database
    make_run(db, {"q1": ([{"docId": "d1", "mode": "required"}], [("c1", "d1")])})
    assert main(["qrels", "agreement", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "judgments in the ledger: provenance 1, llm 0, human 0" in out
    assert "no pairs: no (query, unit) is judged by both an llm and a human" in out
    assert main(["qrels", "agreement", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 0

    store = Store.open(db)
    llm = [(0, 0), (0, 0), (1, 1), (1, 0), (2, 2), (2, 3), (3, 3), (3, 3)]  # the hand-computed case above
    store.append_qrels([{"query_id": "q1", "chunk_id": f"c{i}", "grade": a, "source": "llm", "judge_model": "m"}
                        for i, (a, _) in enumerate(llm)])
    store.append_qrels([{"query_id": "q1", "chunk_id": f"c{i}", "grade": b, "source": "human", "created_by": "ann"}
                        for i, (_, b) in enumerate(llm)])
    assert main(["qrels", "agreement", "--json", "--db", str(db)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pairs"] == 8 and report["judgments"] == {"provenance": 1, "llm": 8, "human": 8}
    assert report["fourLevel"] == {"kappa": pytest.approx(2 / 3), "observed": 0.75, "expected": 0.25}
    assert report["binary"] == {"threshold": 2, "kappa": 1.0, "observed": 1.0, "expected": 0.5}
    assert main(["qrels", "agreement", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "llm vs human over 8 pair(s)" in out
    assert "4-level    kappa 0.6667  observed 0.7500  expected 0.2500" in out
    assert "binary >=2  kappa 1.0000  observed 1.0000  expected 0.5000" in out


# -- import / export ---------------------------------------------------------------------------
LEDGER = [
    {"query_id": "q1", "chunk_id": "returns#p1", "doc_id": None, "grade": 3},
    {"query_id": "q1", "chunk_id": None, "doc_id": "battery", "grade": 1},
    {"query_id": "q-2", "chunk_id": "doc:odd", "doc_id": None, "grade": 0},  # a chunk id that looks like a prefix
    {"query_id": "10", "chunk_id": "a:b#1", "doc_id": None, "grade": 2},
]


def test_trec_qrels_round_trip(tmp_path) -> None:
    rows = [{**r, "source": "human", "created_by": "ann"} for r in LEDGER]
    text = format_qrels(rows, "trec")
    assert text.splitlines() == ["q1 0 chunk:returns#p1 3", "q1 0 doc:battery 1", "q-2 0 chunk:doc:odd 0", "10 0 chunk:a:b#1 2"]
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    back = read_qrels_file(path, by="ann", note="batch 1")
    assert [(r["query_id"], r["chunk_id"], r["doc_id"], r["grade"]) for r in back] == \
        [(r["query_id"], r["chunk_id"], r["doc_id"], r["grade"]) for r in LEDGER]
    assert {(r["source"], r["created_by"], r["judge_model"], r["note"]) for r in back} == {("human", "ann", None, "batch 1")}
    # trec_eval's own reader accepts what we write.
    assert read_qrels(path) == {"q1": {"chunk:returns#p1": 3, "doc:battery": 1}, "q-2": {"chunk:doc:odd": 0}, "10": {"chunk:a:b#1": 2}}


def test_trec_qrels_from_elsewhere_bare_docnos_are_chunks(tmp_path) -> None:
    path = tmp_path / "qrels.msmarco"
    path.write_text("# judged by the assessors\n\n1 0 D1#3 1\n1\tQ0  doc:D7\t2\n")
    rows = read_qrels_file(path, source="llm", judge_model="gpt-x")
    assert [(r["query_id"], r["chunk_id"], r["doc_id"], r["grade"], r["source"], r["judge_model"]) for r in rows] == \
        [("1", "D1#3", None, 1, "llm", "gpt-x"), ("1", None, "D7", 2, "llm", "gpt-x")]


def test_jsonl_ledger_round_trip_through_the_cli(tmp_path, capsys) -> None:
    db, other = tmp_path / "a.db", tmp_path / "b.db"
    store = Store.open(db)
    store.append_qrels([
        {"query_id": "q1", "chunk_id": "c1", "doc_id": "d1", "grade": 2, "source": "llm", "judge_model": "m",
         "prompt_version": "umbrela-v1"},
        {"query_id": "q1", "chunk_id": "c1", "doc_id": "d1", "grade": 0, "source": "human", "created_by": "ann",
         "note": "wrong product, ünïcode ok"},
        {"query_id": "q1", "chunk_id": "c1", "doc_id": "d1", "grade": 1, "source": "human", "created_by": "bob"},
        {"query_id": "q2", "doc_id": "d2", "grade": 3, "source": "human", "created_by": "ann"},
    ])
    store.close()
    out = tmp_path / "ledger.jsonl"
    assert main(["qrels", "export", "--db", str(db), "-o", str(out)]) == 0  # jsonl is the ledger's default
    assert "exported the qrels ledger (4 lines, jsonl)" in capsys.readouterr().out
    first = json.loads(out.read_text().splitlines()[0])
    assert first == {"id": 1, "queryId": "q1", "chunkId": "c1", "docId": "d1", "grade": 2, "source": "llm",
                     "judgeModel": "m", "promptVersion": "umbrela-v1", "createdBy": None, "note": None, "runId": None,
                     "createdAt": first["createdAt"]}

    # The exported ledger imports into another database as the same judgments (each line keeps its source).
    assert main(["qrels", "import", str(out), "--db", str(other)]) == 0
    assert "read 4 judgment(s)" in capsys.readouterr().out

    def content(path):
        return [{k: v for k, v in r.items() if k != "id"} for r in Store.open(path).qrels_rows()]

    assert content(other) == content(db)
    # Again: the llm judgment is already present, human judgments append (they are a history).
    assert main(["qrels", "import", str(out), "--db", str(other)]) == 0
    assert "read 4 judgment(s)" in (out_text := capsys.readouterr().out) and "3 added" in out_text and "1 already present" in out_text
    # TREC cannot hold a unit judged three times: refused with a pointer to what can.
    assert main(["qrels", "export", "--format", "trec", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "judges chunk:c1 of query 'q1' more than once (human, llm)" in err and "HINT: --effective" in err


def test_jsonl_import_minimal_lines(tmp_path) -> None:
    path = tmp_path / "judgments.jsonl"
    path.write_text(
        '{"queryId": "q1", "chunkId": "c1", "grade": 3}\n'
        "\n"
        '{"queryId": "q1", "docId": "d2", "grade": 0, "note": "off topic", "by": "bob"}\n'
        '{"queryId": "q2", "chunkId": "c3", "docId": "d3", "grade": 1, "source": "llm", "judgeModel": "m2"}\n'
    )
    rows = read_qrels_file(path, by="ann", note="pass 1")
    assert [(r["query_id"], r["chunk_id"], r["doc_id"], r["grade"], r["source"], r["created_by"], r["judge_model"], r["note"])
            for r in rows] == [
        ("q1", "c1", None, 3, "human", "ann", None, "pass 1"),
        ("q1", None, "d2", 0, "human", "bob", None, "off topic"),
        ("q2", "c3", "d3", 1, "llm", "ann", "m2", "pass 1"),
    ]


BAD_INPUTS = [
    # (file name, content, line, field, something the message or hint must say)
    ("q.txt", "q1 0 c1 3\nq1 0 c2\n", 2, "columns", "expected 4 whitespace-separated fields, got 3"),
    ("q.txt", "q1 Q0 c1 1 0.5 run\n", 1, "columns", "looks like a run line"),
    ("q.txt", "q1 0 c1 two\n", 1, "grade", "expected an integer grade 0..3, got 'two'"),
    ("q.txt", "q1 0 c1 -1\n", 1, "grade", "use -1 for 'in the pool but not judged': drop those lines"),
    ("q.txt", "q1 0 c1 1\nq1 0 c2 4\n", 2, "grade", "map a wider scale onto 0..3"),
    ("q.txt", "q1 0 c1 1\nq1 0 chunk:c1 2\n", 2, "docno", "chunk:c1 is judged twice for query 'q1' (first on line 1)"),
    ("q.txt", "q1 0 doc: 1\n", 1, "docno", "expected a unit after the prefix"),
    ("q.txt", "q1 0 c1 1\n\xff\n", 2, "encoding", "not valid UTF-8"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": 1}\n{"queryId": "q1",\n', 2, "json", "not valid JSON"),
    ("q.jsonl", '["q1", "c1", 1]\n', 1, "json", "expected a JSON object, got list"),
    ("q.jsonl", '{"query_id": "q1", "chunkId": "c1", "grade": 1}\n', 1, "query_id", "did you mean 'queryId'?"),
    ("q.jsonl", '{"queryId": "q1", "chunkID": "c1", "grade": 1}\n', 1, "chunkID", "did you mean 'chunkId'?"),
    ("q.jsonl", '{"chunkId": "c1", "grade": 1}\n', 1, "queryId", "missing"),
    ("q.jsonl", '{"queryId": 7, "chunkId": "c1", "grade": 1}\n', 1, "queryId", "quote them"),
    ("q.jsonl", '{"queryId": "q1", "grade": 1}\n', 1, "chunkId", "needs a 'chunkId' or a 'docId'"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1"}\n', 1, "grade", "missing"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": "2"}\n', 1, "grade", "as a JSON number"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": 2.5}\n', 1, "grade", "expected an integer grade 0..3, got 2.5"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": true}\n', 1, "grade", "got true"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": 1, "note": 5}\n', 1, "note", "expected a string"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": 1, "source": "provenance"}\n', 1, "source",
     "provenance judgments cannot be imported"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": 1, "source": "llm"}\n', 1, "judgeModel", "needs the judge model"),
    ("q.jsonl", '{"queryId": "q1", "chunkId": "c1", "grade": 1, "judgeModel": "m"}\n', 1, "judgeModel",
     "a human judgment has no judge model"),
]


@pytest.mark.parametrize("name, content, line, field, says", BAD_INPUTS)
def test_bad_input_errors_name_file_line_and_field(tmp_path, capsys, name, content, line, field, says) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("latin-1") if "\xff" in content else content.encode("utf-8"))
    with pytest.raises(QrelsFormatError) as caught:
        read_qrels_file(path, by="ann")
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    message = str(error)
    assert message.startswith(f"{path}:{line}: field '{field}': ")
    assert says in message
    _first, hint = message.split("\n")
    assert hint.startswith("HINT: ") and len(hint) > len("HINT: ")

    # Through the CLI: one line and a hint on stderr, exit 2, nothing appended.
    db = tmp_path / "c.db"
    assert main(["qrels", "import", str(path), "--by", "ann", "--db", str(db)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"crucible: {message}\n" and "Traceback" not in captured.err
    assert not db.exists()


def test_who_judged_is_required_and_provenance_is_refused(tmp_path, database, capsys) -> None:
    path = tmp_path / "q.txt"
    path.write_text("# header\nq1 0 c1 2\n")
    with pytest.raises(QrelsFormatError, match=r"q.txt:2: field 'by': a human judgment needs the name of who made it\nHINT: pass --by NAME"):
        read_qrels_file(path)
    with pytest.raises(QrelsFormatError, match=r"q.txt:2: field 'judgeModel': an llm judgment needs the judge model"):
        read_qrels_file(path, source="llm")
    with pytest.raises(QrelsFormatError, match=r"q.txt: field 'source': provenance judgments cannot be imported: "
                                               r"they are the golden set's citations\nHINT: edit the citations"):
        read_qrels_file(path, source="provenance", by="ann")
    with pytest.raises(QrelsFormatError, match=r"field 'source': expected 'human' or 'llm', got 'robot'"):
        read_qrels_file(path, source="robot")
    with pytest.raises(QrelsFormatError, match=r"missing.txt: cannot read the qrels file"):
        read_qrels_file(tmp_path / "missing.txt", by="ann")

    db = database
    assert main(["qrels", "import", str(path), "--source", "provenance", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"crucible: {path}: field 'source': provenance judgments cannot be imported") and err.count("\n") == 2
    assert main(["qrels", "import", str(path), "--source", "llm", "--judge-model", "m", "--db", str(db)]) == 0
    assert "1 added" in capsys.readouterr().out
    assert [(r["source"], r["judge_model"], r["grade"]) for r in Store.open(db).qrels_rows()] == [("llm", "m", 2)]


def test_imported_llm_chunk_judgment_learns_its_document_and_does_not_shadow_it(tmp_path, database, capsys) -> None:
    db = database
    run_id = make_run(db, {"q1": ([{"docId": "D", "mode": "required"}], [("D#2", "D"), ("E#1", "E")])})
    path = tmp_path / "llm.txt"
    path.write_text("q1 0 chunk:D#2 0\nq1 0 E#1 2\n")  # TREC carries no doc ids
    assert main(["qrels", "import", str(path), "--source", "llm", "--judge-model", "m", "--db", str(db)]) == 0
    store = Store.open(db)
    assert [(r["chunk_id"], r["doc_id"]) for r in store.qrels_rows(sources=["llm"])] == [("D#2", "D"), ("E#1", "E")]
    assert store.effective_qrels(run_id) == {"q1": {"doc:D": 3, "chunk:E#1": 2}}


def test_effective_export_and_trec_run_format(tmp_path) -> None:
    effective = {"q10": {"doc:D": 3, "chunk:c1": 0}, "q9": {"chunk:x": 1}, "empty": {}}
    assert format_effective_qrels(effective, "trec").splitlines() == [
        "q10 0 chunk:c1 0", "q10 0 doc:D 3", "q9 0 chunk:x 1"]
    assert [json.loads(line) for line in format_effective_qrels(effective, "jsonl").splitlines()][:2] == [
        {"queryId": "q10", "chunkId": "c1", "docId": None, "grade": 0},
        {"queryId": "q10", "chunkId": None, "docId": "D", "grade": 3}]

    results = [{"item_id": "q10", "retrieved": json.dumps([{"chunk_id": "c1", "doc_id": "D"}, {"chunk_id": "c2", "doc_id": "D"},
                                                         {"chunk_id": "c2", "doc_id": "D"}, {"chunk_id": "z", "doc_id": "Z"}])},
               {"item_id": "q9", "retrieved": "[]"}]
    rankings = run_rankings(results, effective)
    assert rankings == {"q10": ["chunk:c1", "doc:D", "dup:3:c2", "chunk:z"]}
    assert run_rankings(results, effective, k=2) == {"q10": ["chunk:c1", "doc:D"]}
    path = tmp_path / "run.txt"
    path.write_text(format_trec_run(rankings, tag="t"))
    assert path.read_text().splitlines() == ["q10 Q0 chunk:c1 1 4 t", "q10 Q0 doc:D 2 3 t", "q10 Q0 dup:3:c2 3 2 t",
                                             "q10 Q0 chunk:z 4 1 t"]
    # trec_eval's ordering (score desc, docno desc on ties) gives back the rank order.
    assert rank_run(read_run(path)["q10"]) == rankings["q10"]

    with pytest.raises(QrelsFormatError, match=r"field 'queryId': 'a b' is empty or contains whitespace.*\nHINT: use --format jsonl"):
        format_effective_qrels({"a b": {"doc:D": 1}}, "trec")
    assert json.loads(format_effective_qrels({"a b": {"doc:D": 1}}, "jsonl"))["queryId"] == "a b"


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["D", "E"])), min_size=1, max_size=25))
@settings(max_examples=100, deadline=None)
def test_trec_run_order_reproduces_the_ranking_with_duplicates(pairs) -> None:
    qrels = {"chunk:a": 3, "doc:E": 1}
    units = ranking_units(pairs, qrels)
    with tempfile.TemporaryDirectory() as tmp:  # hypothesis and function-scoped tmp_path do not mix
        path = Path(tmp) / "run.txt"
        path.write_text(format_trec_run({"q": units}))
        assert rank_run(read_run(path)["q"]) == units


# -- the round trip: plugin run -> qrels + run files -> trec_eval == stored metrics ------------------
E2E_GOLDEN = [
    # chunk-level citation: another chunk of the same document is not relevant
    {"id": "g-chunk", "question": "What is the return window?",
     "citations": [{"docId": "returns", "chunkId": "returns#p1", "mode": "required"}]},
    # document-level required citation and an acceptable one; battery is retrieved as two chunks (a duplicate unit)
    {"id": "g-doc", "question": "Which bikes share the battery?",
     "citations": [{"docId": "battery", "mode": "required"}, {"docId": "bikes", "mode": "acceptable"}]},
    # the relevant chunk retrieved twice
    {"id": "g-dup", "question": "Where is the FAQ?", "citations": [{"docId": "faq", "chunkId": "faq#p9"}]},
    # the first relevant chunk at rank 12 of 14 (the pipeline returns more than retrievalLimit)
    {"id": "g-deep", "question": "What is deep down?", "citations": [{"docId": "deep", "chunkId": "deep#p1"}]},
    # a human override will re-grade this item's chunks
    {"id": "g-override", "question": "Which manual?", "citations": [{"docId": "a", "chunkId": "a#2"}]},
    # a human override will grade its only citation 0: no relevant judgment left
    {"id": "g-zero", "question": "Is z relevant?", "citations": [{"docId": "z", "chunkId": "z#1"}]},
    # unanswerable: no judgment at all
    {"id": "g-none", "question": "What does the moon cost?", "answerable": False, "questionType": "false_premise"},
    # the pipeline retrieves nothing
    {"id": "g-empty", "question": "Nothing?", "citations": [{"docId": "e", "chunkId": "e#1"}]},
]

E2E_CONFTEST = """
import pytest

RANKED = {
    "g-chunk": [("returns#p2", "returns"), ("returns#p1", "returns"), ("faq#p1", "faq")],
    "g-doc": [("misc#1", "misc"), ("battery#p3", "battery"), ("bikes#p1", "bikes"), ("battery#p1", "battery")],
    "g-dup": [("faq#p9", "faq"), ("faq#p9", "faq"), ("x#1", "x")],
    "g-deep": [("noise#%d" % i, "noise") for i in range(11)] + [("deep#p1", "deep"), ("deep#p1", "deep"), ("y#1", "y")],
    "g-override": [("a#1", "a"), ("a#2", "a"), ("a#3", "a")],
    "g-zero": [("z#1", "z"), ("z#2", "z")],
    "g-none": [("moon#1", "moon")],
    "g-empty": [],
}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        retrieved = [{"chunk_id": c, "doc_id": d, "text": "...", "score": 1.0 / (i + 1)} for i, (c, d) in enumerate(RANKED[item.id])]
        return {"answer": None, "retrieved": retrieved}
    return pipeline
"""

TREC_TO_METRIC = {"P_10": "precisionAtK", "recall_10": "recallAtK", "recip_rank": "mrr", "ndcg_cut_10": "ndcgAt10",
                  "success_10": "hitAtK"}


def trec_eval_per_query(capsys, db: Path, tmp: Path, run_ref: str, complete: bool = False) -> dict[str, dict[str, str]]:
    """Export the run's effective qrels and TREC run, run crucible trec-eval -q; qid -> metric -> printed value."""
    qrels_file, run_file = tmp / "q.txt", tmp / "run.txt"
    assert main(["qrels", "export", "--format", "trec", "--effective", "--run", run_ref, "-o", str(qrels_file), "--db", str(db)]) == 0
    assert main(["export", run_ref, "--format", "trec", "-o", str(run_file), "--db", str(db)]) == 0
    capsys.readouterr()
    args = ["trec-eval", "-q", "-m", "P_10", "-m", "recall_10", "-m", "recip_rank", "-m", "ndcg_cut_10", "-m", "success_10"]
    assert main([*args, *(["-c"] if complete else []), str(qrels_file), str(run_file)]) == 0
    table: dict[str, dict[str, str]] = {}
    for line in capsys.readouterr().out.splitlines():
        measure, qid, value = (part.strip() for part in line.split("\t"))
        if qid != "all":
            table.setdefault(qid, {})[TREC_TO_METRIC[measure]] = value
    return table


def stored_retrieval(store: Store, run_id: str) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for metric, values in store.item_metrics(run_id).items():
        if metric in TREC_TO_METRIC.values():
            for item_id, value in values.items():
                table.setdefault(item_id, {})[metric] = value
    return table


def check_trec_eval_reproduces(capsys, db: Path, tmp: Path, run_id: str, *, no_relevant: set[str]) -> dict[str, dict[str, float]]:
    store = Store.open(db)
    stored = stored_retrieval(store, run_id)
    printed = trec_eval_per_query(capsys, db, tmp, run_id)
    # Every item the plugin scored and that retrieved something: the same five numbers, to 4 decimals.
    retrieved_something = {row["item_id"] for row in store.results(run_id) if json.loads(row["retrieved"])}
    for item_id in sorted(set(stored) & retrieved_something):
        assert printed[item_id] == {metric: f"{value:.4f}" for metric, value in stored[item_id].items()}, item_id
    # trec_eval evaluates a judged query even when none of its judgments is relevant (all zeros);
    # the plugin leaves such an item's retrieval metrics undefined (not stored).
    assert set(printed) - set(stored) == no_relevant
    for item_id in no_relevant:
        assert set(printed[item_id].values()) == {"0.0000"}
    # An item that retrieved nothing has no run lines, so trec_eval skips it; with -c it scores 0,
    # as the plugin stored.
    assert set(stored) - set(printed) == {"g-empty"}
    assert stored["g-empty"] == dict.fromkeys(TREC_TO_METRIC.values(), 0.0)
    assert trec_eval_per_query(capsys, db, tmp, run_id, complete=True)["g-empty"] == \
        dict.fromkeys(TREC_TO_METRIC.values(), "0.0000")
    # The unanswerable item has no judgment: in neither.
    assert "g-none" not in printed and "g-none" not in stored
    store.close()
    return stored


def test_trec_eval_on_exported_qrels_and_run_reproduces_the_stored_metrics(pytester: pytest.Pytester, capsys) -> None:
    write_golden(pytester.path / "golden_support.jsonl", E2E_GOLDEN)
    pytester.makeconftest(E2E_CONFTEST)
    db = pytester.path / ".crucible" / "crucible.db"
    first_dir = pytester.path / "first"
    second_dir = pytester.path / "second"
    first_dir.mkdir()
    second_dir.mkdir()

    result = pytester.runpytest("--crucible-mode=component", "--crucible-outcome=record", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(E2E_GOLDEN))
    store = Store.open(db)
    first = store.resolve_run("latest")
    store.close()

    stored = check_trec_eval_reproduces(capsys, db, first_dir, first, no_relevant=set())
    # Spot checks of the conventions the file round trip has to carry.
    assert stored["g-chunk"]["mrr"] == 0.5  # returns#p2 is not the cited chunk
    assert stored["g-doc"]["recallAtK"] == 1.0 and stored["g-doc"]["precisionAtK"] == pytest.approx(0.2)  # battery once
    assert stored["g-dup"]["precisionAtK"] == pytest.approx(0.1)  # faq#p9 counted once
    assert stored["g-deep"]["mrr"] == pytest.approx(1 / 12) and stored["g-deep"]["hitAtK"] == 0.0
    run_lines = (first_dir / "run.txt").read_text().splitlines()
    assert f"g-dup Q0 dup:2:faq#p9 2 2 crucible-{first}" in run_lines
    assert f"g-doc Q0 dup:4:battery#p1 4 1 crucible-{first}" in run_lines
    assert "g-doc 0 doc:bikes 1" in (first_dir / "q.txt").read_text().splitlines()

    # Judgments arrive: an llm grade for a chunk (its document is learned from the run), and two human overrides.
    llm = pytester.path / "llm.txt"
    llm.write_text("g-chunk 0 returns#p2 2\ng-doc 0 battery#p3 0\n")
    assert main(["qrels", "import", str(llm), "--source", "llm", "--judge-model", "judge-x", "--db", str(db)]) == 0
    assert main(["qrels", "override", "g-override", "a#2", "1", "--by", "ann", "--db", str(db)]) == 0
    assert main(["qrels", "override", "g-override", "a#3", "3", "--by", "ann", "--note", "the exact answer", "--db", str(db)]) == 0
    assert main(["qrels", "override", "g-zero", "z#1", "0", "--by", "bob", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "g-override chunk:a#2: effective grade 3 (provenance) -> 1 (human), by ann" in out
    assert "g-zero chunk:z#1: effective grade 3 (provenance) -> 0 (human), by bob" in out

    result = pytester.runpytest("--crucible-mode=component", "--crucible-outcome=record", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(E2E_GOLDEN))
    store = Store.open(db)
    second = store.resolve_run("latest")
    assert second != first
    store.close()

    after = check_trec_eval_reproduces(capsys, db, second_dir, second, no_relevant={"g-zero"})
    # The second run's stored metrics reflect the overrides: a#2 graded 1 and a#3 graded 3 at ranks 2 and 3.
    assert stored["g-override"] == pytest.approx(
        retrieval_metrics(["chunk:a#1", "chunk:a#2", "chunk:a#3"], {"chunk:a#2": 3}, 10))
    assert after["g-override"] == pytest.approx(
        retrieval_metrics(["chunk:a#1", "chunk:a#2", "chunk:a#3"], {"chunk:a#2": 1, "chunk:a#3": 3}, 10))
    assert after["g-override"]["precisionAtK"] == pytest.approx(0.2) != stored["g-override"]["precisionAtK"]
    # g-zero has no relevant judgment left: its retrieval metrics are undefined, no longer stored.
    assert "g-zero" in stored and "g-zero" not in after
    # The llm grade 2 of returns#p2 makes it relevant (rank 1); the llm grade 0 of battery#p3
    # does not shadow the document-level citation of battery.
    assert after["g-chunk"]["mrr"] == 1.0 and after["g-chunk"]["precisionAtK"] == pytest.approx(0.2)
    assert after["g-doc"] == stored["g-doc"]
    assert "g-chunk 0 chunk:returns#p2 2" in (second_dir / "q.txt").read_text().splitlines()
    assert "battery#p3" not in (second_dir / "q.txt").read_text()
    # Nothing was rewritten: the provenance judgments sit beside the human ones.
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT source, grade FROM qrels WHERE query_id = 'g-zero' ORDER BY id").fetchall() == \
        [("provenance", 3), ("human", 0)]
    conn.close()
