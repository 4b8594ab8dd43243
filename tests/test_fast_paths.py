"""Faster paths pinned against the plain ones they replaced: same bytes, same hashes, same rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.golden_set.schema import canonical_item_json, golden_set_hash, hash_canonical_items
from pytest_crucible.store import Store
from pytest_crucible.store.contents import content_hash

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_items = st.dictionaries(st.text(alphabet="abcdefghij", min_size=1, max_size=4).filter(lambda s: s != "id"),
                         st.one_of(_text, st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                                   st.lists(_text, max_size=3)), max_size=5)


def reference_hash(items: list[dict]) -> str:
    """The golden-set hash as first defined: sha256 of the JSON array of the items in id order."""
    ordered = sorted(items, key=lambda item: item["id"])
    return hashlib.sha256(json.dumps(ordered, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest()


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(_text, _items), max_size=6, unique_by=lambda pair: pair[0]))
def test_the_streamed_golden_set_hash_equals_the_hash_of_the_whole_array(pairs) -> None:
    items = [{**fields, "id": item_id} for item_id, fields in pairs]
    assert golden_set_hash(items) == reference_hash(items)
    ordered = sorted((item["id"], canonical_item_json(item)) for item in items)
    assert hash_canonical_items(ordered) == reference_hash(items)


def _score(item_id: str, **item) -> dict:
    return {"item_id": item_id, "question": "Q?", "item": {"id": item_id, "question": "Q?", **item}, "outcome": "passed",
            "retrieved": [{"chunk_id": "d#1", "doc_id": "d", "text": "t", "score": 1.0}],
            "metrics": {"ndcgAt10": 0.5, "recallAtK": 1.0}}


def test_the_stored_hash_is_the_hash_of_the_stored_items_even_for_rows_stored_before_they_were_canonical(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
    store.record_scores(run_id, [_score("b", tags=["ü", "x"]), _score("a", citations=[{"docId": "d", "chunkId": "d#1", "mode": "required"}])])
    with store.db.conn:  # a row as an earlier version stored it: sorted keys, but spaces and ASCII escapes
        text = json.dumps({"id": "b", "question": "Q?", "tags": ["ü", "x"]}, sort_keys=True)
        store.db.conn.execute("INSERT INTO contents (hash, body) VALUES (?, ?)", [content_hash(text), text])
        store.db.conn.execute("UPDATE golden_item_refs SET item_hash = ? WHERE item_id = 'b'", [content_hash(text)])
    assert store.golden_set_hash(run_id) == reference_hash(store.golden_items(run_id))
    store.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_text, _items), min_size=1, max_size=5, unique_by=lambda pair: pair[0]))
def test_a_recorded_run_hashes_the_same_read_as_stored_or_recanonicalised(tmp_path_factory, pairs) -> None:
    """The session hashes its own run's rows as stored (record_scores wrote them canonical): the same hash as
    the items' own, whatever their text (non-ASCII, numbers, nesting)."""
    store = Store.open(tmp_path_factory.mktemp("hash") / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
    items = [{**fields, "id": item_id, "question": "Q?"} for item_id, fields in pairs]
    store.record_scores(run_id, [{"item_id": item["id"], "question": "Q?", "item": item, "outcome": "passed"} for item in items])
    assert store.golden_set_hash(run_id, written_canonical=True) == store.golden_set_hash(run_id) == reference_hash(items)
    store.close()


def test_a_batch_of_scores_is_stored_as_each_score_alone_would_be(tmp_path: Path) -> None:
    """record_scores writes one statement per table for a batch: the rows are those of one write per item."""
    scores = [_score(f"q{i}", citations=[{"docId": "d", "chunkId": f"d#{i}", "mode": "required" if i % 2 else "acceptable"}],
                     concepts=[{"id": f"c{i}", "grade": "required"}])
              for i in range(5)]
    scores[2]["error_class"], scores[2]["error_evidence"] = "retrieval_miss", "missed"
    scores[3]["qrels_rows"] = [{"query_id": "q3", "chunk_id": "x#1", "doc_id": "x", "grade": 2, "source": "llm", "judge_model": "m"}]

    def rows(path: Path, one_by_one: bool) -> dict[str, list]:
        store = Store.open(path)
        run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component",
                                 outcome_mode="record", run_id="RUN")
        for batch in ([[score] for score in scores] if one_by_one else [scores]):
            store.record_scores(run_id, batch)
        conn = store.db.conn
        out = {
            "golden": conn.execute("SELECT item_id, source, line, item FROM golden_items ORDER BY item_id").fetchall(),
            "metrics": conn.execute("SELECT item_id, metric, value FROM item_metrics ORDER BY item_id, metric").fetchall(),
            "results": conn.execute("SELECT item_id, question, (SELECT body FROM contents WHERE hash = retrieved_hash) AS retrieved, outcome, error_class FROM results ORDER BY item_id").fetchall(),
            "qrels": conn.execute("SELECT query_id, chunk_id, doc_id, grade, source, judge_model FROM qrels"
                                  " ORDER BY query_id, source, chunk_id").fetchall(),
            "concepts": conn.execute("SELECT item_id, concept_id, grade FROM golden_concepts ORDER BY item_id").fetchall(),
            "feedback": conn.execute("SELECT item_id, error_class, evidence FROM eval_feedback").fetchall(),
        }
        store.close()
        return out

    batched, single = rows(tmp_path / "batched.db", False), rows(tmp_path / "single.db", True)
    assert batched == single
    assert len(batched["qrels"]) == 6 and len(batched["feedback"]) == 1 and len(batched["metrics"]) == 10


_doc = st.sampled_from([f"d{i}" for i in range(12)])


@settings(max_examples=examples(400), deadline=None)
@given(ranking=st.lists(_doc, max_size=25), qrels=st.dictionaries(_doc, st.integers(-2, 3), max_size=12),
       k=st.integers(1, 15), level=st.integers(-1, 3))
def test_all_retrieval_metrics_at_once_equal_each_metric_alone(ranking, qrels, k, level) -> None:
    """retrieval_metrics computes the five from one pass; each must be the float its own function gives."""
    from pytest_crucible.metrics.retrieval import NDCG_CUTOFF, hit_at_k, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank, retrieval_metrics

    got = retrieval_metrics(ranking, qrels, k, relevance_level=level)
    if not any(grade >= max(level, 0) for grade in qrels.values()):
        assert got == {}
        return
    assert got == {"recallAtK": recall_at_k(ranking, qrels, k, level), "precisionAtK": precision_at_k(ranking, qrels, k, level),
                   "mrr": reciprocal_rank(ranking, qrels, level), "ndcgAt10": ndcg_at_k(ranking, qrels, NDCG_CUTOFF, level),
                   "hitAtK": hit_at_k(ranking, qrels, k, level)}
    assert all(type(value) is float for value in got.values())


_LIST_COLUMNS = ("retrieved", "citations", "detected_concepts", "failures", "judge_errors", "metric_errors")
_OPTIONAL_COLUMNS = ("verdicts", "pool", "assertions")
RETRIEVED = "(SELECT body FROM contents WHERE hash = retrieved_hash)"  # since schema 19 the ranking's text is stored once
_column_values = st.one_of(st.none(), st.sampled_from([[], {}, "", 0, ()]), st.lists(_text, min_size=1, max_size=3),
                           st.dictionaries(_text, st.integers(), min_size=1, max_size=2))
_flag_values = st.sampled_from([None, False, True, 0, 1])


@settings(max_examples=60, deadline=None)
@given(values=st.fixed_dictionaries(dict.fromkeys(_LIST_COLUMNS + _OPTIONAL_COLUMNS, _column_values)),
       abstained=_flag_values, blocked=_flag_values, outcome=st.sampled_from([None, "", "passed"]))
def test_result_columns_hold_the_text_json_dumps_gives_their_values(tmp_path_factory, values, abstained, blocked, outcome) -> None:
    """Recording writes an empty column's text without calling the encoder: every column must still hold what
    json.dumps gives (an empty list column '[]', an empty optional one NULL), the text readers of the file parse."""
    store = Store.open(tmp_path_factory.mktemp("columns") / "c.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
    store.record_scores(run_id, [{"item_id": "q", "question": "Q?", "item": {"id": "q", "question": "Q?"}, "outcome": outcome,
                                  "abstained": abstained, "blocked": blocked, **values}])
    columns = [RETRIEVED if column == "retrieved" else column for column in _LIST_COLUMNS + _OPTIONAL_COLUMNS]
    stored = store.db.conn.execute(f"SELECT {', '.join(columns)}, abstained, blocked, outcome FROM results").fetchone()
    assert stored == (*[json.dumps(values[column] or []) for column in _LIST_COLUMNS],
                      *[json.dumps(values[column]) if values[column] else None for column in _OPTIONAL_COLUMNS],
                      int(bool(abstained)), int(bool(blocked)), outcome or "")
    store.close()


def test_an_exported_run_imports_to_the_rows_it_was_recorded_with(tmp_path: Path) -> None:
    """Recording and importing share the writer of a run's item rows: an export imported elsewhere holds the same bytes."""
    scores = [_score(f"q{i}", citations=[{"docId": "d", "chunkId": f"d#{i}", "mode": "required"}]) for i in range(4)]
    scores[1].update(failures=["missed d#1"], verdicts={"faithfulness": {"supported": [True]}}, pool={"provenance": 1, "unjudged": 0},
                     abstained=True, confidence=0.25, latency_ms=3.5, error_class="retrieval_miss", error_evidence="missed")
    scores[2].update(judge_errors=["timeout"], assertions=[{"kind": "contains", "passed": False}], outcome=None)
    recorded = Store.open(tmp_path / "recorded.db")
    run_id = recorded.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
    recorded.record_scores(run_id, scores)
    recorded.finish_run(run_id, status="complete", golden_hash=recorded.golden_set_hash(run_id))
    imported = Store.open(tmp_path / "imported.db")
    assert imported.import_run(recorded.export_run(run_id)) == (run_id, True)
    for sql in ("SELECT * FROM results ORDER BY item_id", "SELECT * FROM golden_items ORDER BY item_id",
                "SELECT * FROM item_metrics ORDER BY item_id, metric"):
        assert imported.db.conn.execute(sql).fetchall() == recorded.db.conn.execute(sql).fetchall()
    recorded.close()
    imported.close()


def test_ulids_spell_their_millisecond_in_crockford_base32_and_sort_in_the_order_made() -> None:
    """Run, result and feedback ids: 26 characters whose first 48 bits are the time in ms; ids made together
    (a batch of results) sort in the order they were handed out, after those of an earlier millisecond."""
    from pytest_crucible.store.ulid import new_ulid, new_ulids

    def value(ulid: str) -> int:
        number = 0
        for char in ulid:
            number = number * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".index(char)
        return number

    for ms in (0, 1, 1_767_225_600_000, 2**48 - 1):
        ids = new_ulids(20, ms)
        assert all(len(ulid) == 26 and value(ulid) >> 80 == ms for ulid in ids)
        assert ids == sorted(ids) and len(set(ids)) == 20
    assert new_ulids(3, 1_000)[-1] < new_ulids(3, 1_001)[0]
    assert value(new_ulid(5)) >> 80 == 5 and new_ulids(0) == []
