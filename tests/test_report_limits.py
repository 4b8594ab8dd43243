"""Large runs stay readable and whole: the HTML report embeds every item as compressed data, the ones a
reviewer needs first, and its script renders a page of rows at a time (``report/item_data.py``)."""

from __future__ import annotations

from pathlib import Path

from pytest_crucible.report import item_data
from pytest_crucible.report.html import render_report
from pytest_crucible.report.item_data import EXCERPT_CHARS
from pytest_crucible.report.item_data import decode_items as embedded_items
from pytest_crucible.store import Store, aggregates


def test_the_items_that_need_a_look_come_first_each_group_in_recording_order(tmp_path: Path) -> None:
    """The SQL's listing order (``aggregates.NEEDS_A_LOOK``): a failed, errored, judge-errored or not-correct item
    first; a skipped one, an empty error, no judge error and no error class are no reason to look."""
    changes = {97: {"outcome": "failed"}, 98: {"error_class": "hallucination"}, 99: {"judge_errors": ["timeout"]},
               60: {"outcome": "error", "error": "ValueError: boom"}, 10: {"outcome": "skipped"}, 11: {"error": ""},
               12: {"error_class": None}, 13: {"judge_errors": []}}
    store = Store.open(tmp_path / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={}, mode="component", outcome_mode="record")
    store.record_scores(run_id, [{"item_id": f"q{i:05d}", "question": "?", "item": {"id": f"q{i:05d}", "question": "?"}, "retrieved": [],
                                  "outcome": "passed", "error_class": "correct", "metrics": {}, **changes.get(i, {})} for i in range(100)])
    try:
        order = [row for batch in aggregates.results_in_listing_order(store, run_id, ("item_id",), 7) for row in batch]
    finally:
        store.close()
    assert [item_id for item_id, _ in order[:4]] == ["q00060", "q00097", "q00098", "q00099"]
    assert [look for _, look in order] == [1] * 4 + [0] * 96
    assert [item_id for item_id, _ in order[4:]] == [f"q{i:05d}" for i in range(100) if i not in (60, 97, 98, 99)]


def test_every_item_of_a_run_longer_than_a_page_is_in_the_page(tmp_path: Path, monkeypatch) -> None:
    """250 items (the page's script shows 100 rows at a time), read in batches of 40: every one is embedded,
    the failed one first although it was recorded last, each with its drill-down."""
    monkeypatch.setattr(item_data, "BATCH", 40)
    store = Store.open(tmp_path / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
    store.record_scores(run_id, [{
        "item_id": f"q{i:03d}", "question": f"Question {i}?", "item": {"id": f"q{i:03d}", "question": f"Question {i}?"},
        "retrieved": [{"chunk_id": f"d#{i % 7}", "doc_id": "d", "text": f"text {i % 7} " * 80, "score": 1.0}],
        "outcome": "failed" if i == 249 else "passed", "metrics": {"ndcgAt10": i / 250}} for i in range(250)])
    store.finish_run(run_id, status="complete", golden_hash="g")
    try:
        html = render_report(store, run_id)
    finally:
        store.close()
    data = embedded_items(html)
    assert data["n"] == 250 and data["rows"]["id"] == ["q249"] + [f"q{i:03d}" for i in range(249)]
    assert "Items (250)" in html and "The 1 item with an error" in html
    assert data["rows"]["question"][1:4] == ["Question 0?", "Question 1?", "Question 2?"]
    assert data["rows"]["ndcg"][2] == 0.004 and data["rows"]["look"][:2] == [1, 0] and set(data["rows"]["blocked"]) == {None}
    # A chunk's excerpt is cut as the page always cut it, and stored once however many items retrieved it.
    assert len(data["chunks"]) == 7 and all(len(excerpt) <= EXCERPT_CHARS + 1 for _, _, excerpt in data["chunks"])
    assert all(len(detail["chunks"]) == 1 for detail in data["detail"])
    assert [data["chunks"][detail["chunks"][0][0]][:2] for detail in data["detail"][1:3]] == [["d#0", "d"], ["d#1", "d"]]
    # Its metrics: a column per metric, the row's nDCG@10 from it.
    assert data["metrics"]["labels"] == ["ndcg@10"] and data["metrics"]["values"][0] == data["rows"]["ndcg"]



def test_a_stored_text_that_looks_like_the_writers_marker_is_written_as_it_is(tmp_path: Path) -> None:
    """Each batch's text takes a ranking's entries at a marker; an answer that holds such a marker is no place."""
    store = Store.open(tmp_path / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={}, mode="component", outcome_mode="record")
    store.record_scores(run_id, [{
        "item_id": f"q{i}", "question": "?", "item": {"id": f"q{i}", "question": "?"}, "answer": "\ue0000\ue000" if i == 1 else "a",
        "retrieved": [{"chunk_id": "d#1", "doc_id": "d", "text": "t", "score": 0.5}], "outcome": "passed", "metrics": {}} for i in range(3)])
    try:
        data = embedded_items(render_report(store, run_id))
    finally:
        store.close()
    assert [detail["answer"] for detail in data["detail"]] == ["a", "\ue0000\ue000", "a"]
    assert all(detail["chunks"] == [[0, 0.5, None, 0, None, 0]] for detail in data["detail"])
