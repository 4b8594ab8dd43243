"""Large runs stay readable: the HTML report drills down a bounded number of items, the ones a
reviewer needs first, and says how many it left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_crucible.report import html as report_html
from pytest_crucible.report.html import items_to_show, render_report
from pytest_crucible.store import Store


def _row(index: int, **changes) -> dict:
    return {"item_id": f"q{index:05d}", "outcome": "passed", "error": None, "judge_errors": "[]", "error_class": "correct", **changes}


def test_every_item_is_shown_up_to_the_limit() -> None:
    rows = [_row(i) for i in range(50)]
    assert items_to_show(rows, limit=50) == rows


def test_past_the_limit_the_items_that_need_a_look_come_first_in_recording_order() -> None:
    rows = [_row(i) for i in range(100)]
    rows[97] = _row(97, outcome="failed")
    rows[98] = _row(98, error_class="hallucination")
    rows[99] = _row(99, judge_errors='["timeout"]')
    rows[60] = _row(60, outcome="error", error="ValueError: boom")
    shown = items_to_show(rows, limit=10)
    ids = [row["item_id"] for row in shown]
    assert len(shown) == 10
    assert {"q00060", "q00097", "q00098", "q00099"} <= set(ids)
    assert ids == sorted(ids)  # recording order kept
    assert ids[:6] == [f"q{i:05d}" for i in range(6)]  # the rest filled from the start


def test_when_more_items_need_a_look_than_the_limit_allows_the_first_ones_are_shown() -> None:
    rows = [_row(i, outcome="failed") for i in range(30)]
    assert [row["item_id"] for row in items_to_show(rows, limit=5)] == [f"q{i:05d}" for i in range(5)]


def test_the_report_says_how_many_items_it_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
    store.record_scores(run_id, [{
        "item_id": f"q{i:02d}", "question": f"Question {i}?", "item": {"id": f"q{i:02d}", "question": f"Question {i}?"},
        "retrieved": [{"chunk_id": "d#1", "doc_id": "d", "text": "t", "score": 1.0}], "outcome": "failed" if i == 29 else "passed",
        "metrics": {"ndcgAt10": 1.0}} for i in range(30)])
    store.finish_run(run_id, status="complete", golden_hash="g")
    monkeypatch.setattr(report_html, "ITEM_DETAIL_LIMIT", 10)
    try:
        html = render_report(store, run_id)
    finally:
        store.close()
    assert html.count('<details class="item"') == 10
    assert "Items (10 of 30)" in html
    assert "20 more items are not drilled down here" in html
    assert 'id="item-q29"' in html  # the failed one, although it was recorded last
