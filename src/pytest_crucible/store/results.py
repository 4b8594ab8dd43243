"""A run's per-item rows (``ResultsMixin``, a part of ``Store``): golden items, results, item metrics,
the review queue's feedback, concepts, repeats and attempts, written one statement per table for a batch
of items, and the provenance qrels the golden items' citations are; and their reads.

Each table's rows are a ``NamedTuple`` whose fields are the columns its INSERT names (``store/rows.py``). A
golden item's text and a result's ranking are written once into ``contents`` and referred to by their hash
(schema 19, ``store/contents.py``); the reads give them back as they were written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .contents import ContentHashes, resolve_retrieved, retrieved_column, write_contents
from .database import Connection, utc_now
from .qrels import QrelRow
from .rows import (  # noqa: F401 (the row types are imported from here too)
    _JSON_OPTIONAL_COLUMNS,
    _JSON_RESULT_COLUMNS,
    AttemptRow,
    ConceptRow,
    FeedbackRow,
    GoldenRow,
    MetricRow,
    RepeatRow,
    ResultRow,
    _decode,
    attempt_of,
    last_attempts,
    result_row,
)
from .ulid import new_ulids


class ResultsMixin(Connection):
    """The per-item rows of ``Store``."""

    if TYPE_CHECKING:  # QrelsMixin's (store/qrels.py): recording writes the provenance and judged qrels
        def _write_qrel_values(self, rows: list[QrelRow], *, copied: bool = False) -> int: ...
        def _append_qrels(self, rows: Iterable[dict[str, Any]], now: str) -> int: ...

    @property
    def content_hashes(self) -> ContentHashes:
        """This connection's hashes of the texts it wrote last (``store/contents.py``)."""
        hashes = self.__dict__.get("_content_hashes")
        if hashes is None:
            hashes = self.__dict__["_content_hashes"] = ContentHashes()
        return hashes

    def record_score(self, run_id: str, score: dict[str, Any]) -> None:
        """Write one item's result, metrics and provenance qrels in one transaction."""
        self.record_scores(run_id, [score])

    def record_scores(self, run_id: str, scores: list[dict[str, Any]]) -> None:
        """Write several items in one transaction (all or none), one statement per table for the batch."""
        from ..golden_set.schema import canonical_item_json

        now = utc_now()
        scores = last_attempts(scores)
        # A pass over the batch per table: each table's rows, then one statement for them.
        result_ids = [score.get("result_id") or new_id for score, new_id in zip(scores, new_ulids(len(scores)))]
        item_jsons = [canonical_item_json(score["item"]) for score in scores]  # dumped once: stored, and hashed for the provenance version
        hashes, contents = self.content_hashes, dict[str, str]()
        golden = [GoldenRow(run_id, score["item_id"], score.get("source"), score.get("line"), _content(contents, hashes, item_json))
                  for score, item_json in zip(scores, item_jsons)]
        results = [result_row(run_id, score, result_id, now, contents, hashes) for score, result_id in zip(scores, result_ids)]
        metrics = [MetricRow(run_id, score["item_id"], name, float(value))
                   for score in scores for name, value in (score.get("metrics") or {}).items()]
        feedback = [FeedbackRow(run_id, result_id, score["item_id"], score.get("error_class"), score.get("error_evidence"), now)
                    for score, result_id in zip(scores, result_ids)]
        provenance = _provenance_rows(run_id, scores, item_jsons, now)
        concepts = [ConceptRow(run_id, score["item_id"], concept["id"], concept.get("grade", "required"))
                    for score in scores for concept in score["item"].get("concepts") or []]
        repeats = [RepeatRow(run_id, score["item_id"], row["repeat"], row["outcome"], row.get("answer"),
                             json.dumps(row.get("metrics") or {}, sort_keys=True), row.get("failure"), row.get("error"))
                   for score in scores for row in score.get("repeats") or []]
        superseded = [score["item_id"] for score in scores if score.get("supersedes")]
        attempts = [AttemptRow(run_id, score["item_id"], row["attempt"], row["outcome"], row.get("answer"),
                               json.dumps(row.get("metrics") or {}, sort_keys=True), row.get("failure"), row.get("error"),
                               row.get("error_class"), now)
                    for score in scores for row in score.get("attempts") or []]
        with self.db.conn:
            if superseded:  # the item was recorded before in this run (a rerun after its teardown failed): kept as an attempt
                self._keep_as_attempts(run_id, superseded, now)
            # A re-recorded item (a re-run of the same run id) replaces its rows and its metrics.
            self._write_item_rows(run_id, golden, results, metrics, contents, replace=True)
            self._insert_values("item_attempts", AttemptRow._fields, attempts, replace=True)
            self._append_feedback(feedback)
            self._write_qrel_values(provenance)
            self._append_qrels([row for score in scores for row in score.get("qrels_rows") or []], now)
            self._add_cache_rows([row for score in scores for row in score.get("cache_rows") or []], now)
            self._insert_values("golden_concepts", ConceptRow._fields, concepts, replace=True)
            self._insert_values("item_repeats", RepeatRow._fields, repeats, replace=True)

    def _keep_as_attempts(self, run_id: str, item_ids: list[str], now: str) -> None:
        """Move the stored results of ``item_ids`` into item_attempts, each after the attempts it already has
        (inside the caller's transaction): a later attempt at the same item is about to replace them."""
        for item_id in item_ids:
            row = self.db.conn.execute("SELECT outcome, answer, failures, error, error_class FROM results "
                                       "WHERE run_id = ? AND item_id = ?", [run_id, item_id]).fetchone()
            if row is None:
                continue
            outcome, answer, failures, error, error_class = row
            metrics = dict(self.db.conn.execute(
                "SELECT metric, value FROM item_metrics WHERE run_id = ? AND item_id = ?", [run_id, item_id]))
            number = self.db.conn.execute("SELECT COALESCE(MAX(attempt), 0) + 1 FROM item_attempts WHERE run_id = ? AND item_id = ?",
                                          [run_id, item_id]).fetchone()[0]
            failure = "; ".join(json.loads(failures or "[]")) or None
            self._insert_values("item_attempts", AttemptRow._fields, [AttemptRow(
                run_id, item_id, number, outcome, answer, json.dumps(metrics, sort_keys=True), failure, error, error_class, now)])

    def _write_items(self, run_id: str, *, golden: Iterable[dict[str, Any]] = (), results: Iterable[dict[str, Any]] = (),
                     metrics: Iterable[tuple[str, str, Any]] = (), replace: bool = False) -> None:
        """The one writer of a run's per-item rows (golden_items, results, item_metrics), inside the
        caller's transaction: recording (``record_scores``), ``import_run`` and ``merge_shards`` all call it.

        ``golden``: ``{item_id, source, line, item}`` with the item as a dict (or as its canonical JSON text,
        :func:`canonical_item_json`). ``results``: result rows in their decoded shape (that of
        ``results(decoded=True)`` and of an export): the list/dict columns as Python values, encoded here;
        an absent flag is false (the columns' default 0), an absent outcome is "". ``metrics``:
        ``(item_id, metric, value)``. ``replace``: a re-recorded item replaces its golden and result rows and
        drops its old metrics; without it a row already there is an error.
        """
        from ..golden_set.schema import canonical_item_json

        hashes, contents = self.content_hashes, dict[str, str]()
        self._write_item_rows(
            run_id,
            [GoldenRow(run_id, row["item_id"], row.get("source"), row.get("line"), _content(
                contents, hashes, row["item"] if isinstance(row["item"], str) else canonical_item_json(row["item"]))) for row in golden],
            [result_row(run_id, row, row.get("result_id"), row.get("recorded_at"), contents, hashes) for row in results],
            [MetricRow(run_id, item_id, metric, float(value)) for item_id, metric, value in metrics], contents, replace=replace)

    def _write_item_rows(self, run_id: str, golden: list[GoldenRow], results: list[ResultRow], metrics: list[MetricRow],
                         contents: dict[str, str], *, replace: bool) -> None:
        """``_write_items`` from rows already encoded (what ``record_scores`` builds directly); ``contents``: the
        texts they refer to, by hash, written first."""
        write_contents(self.db.conn, contents.items())
        self._insert_values("golden_item_refs", GoldenRow._fields, golden, replace=replace)
        self._insert_values("results", ResultRow._fields, results, replace=replace)
        if replace and results:
            item_ids = json.dumps([row.item_id for row in results])
            self.db.conn.execute("DELETE FROM item_metrics WHERE run_id = ? AND item_id IN (SELECT value FROM json_each(?))",
                                 [run_id, item_ids])  # one statement for the batch
        self._insert_values("item_metrics", MetricRow._fields, metrics)

    def _append_feedback(self, rows: list[FeedbackRow]) -> None:
        """Every classified non-correct result joins the append-only review queue. ``rows``: one per result,
        without an id; each row queued gets a new one."""
        queued = [row for row in rows if row.error_class and row.error_class != "correct"]
        self._insert_values("eval_feedback", FeedbackRow._fields,
                            [row._replace(id=feedback_id) for row, feedback_id in zip(queued, new_ulids(len(queued)))])

    def _add_cache_rows(self, rows: Iterable[dict[str, Any]], now: str) -> None:
        self._insert_many("judge_cache", [{**row, "created_at": now} for row in rows], replace=True)

    def add_cache_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        with self.db.conn:
            self._add_cache_rows(rows, utc_now())

    def add_answer_scores(self, run_id: str, item_id: str, metrics: dict[str, float], judge_errors: list[str],
                          verdicts: dict[str, Any] | None, assertions: list[dict[str, Any]] | None = None, *,
                          error_class: str | None = None, error_evidence: str | None = None, crag_grade: str | None = None) -> None:
        """Judge-based metrics computed after the item ran (Message Batches at session end)."""
        with self.db.conn:
            if error_class:
                result_id = self.db.conn.execute("SELECT result_id FROM results WHERE run_id = ? AND item_id = ?", [run_id, item_id]).fetchone()
                self._append_feedback([FeedbackRow(run_id, result_id[0] if result_id else None, item_id, error_class, error_evidence, utc_now())])
            for name, value in metrics.items():
                self._insert("item_metrics", {"run_id": run_id, "item_id": item_id, "metric": name, "value": float(value)}, replace=True)
            updates: dict[str, Any] = {"judge_errors": json.dumps(judge_errors), "verdicts": json.dumps(verdicts) if verdicts else None,
                                       "assertions": json.dumps(assertions) if assertions else None,
                                       "error_class": error_class, "error_evidence": error_evidence, "crag_grade": crag_grade}
            if judge_errors:
                updates["outcome"] = "error"
            assignments = ", ".join(f"{column} = ?" for column in updates)
            self.db.conn.execute(f"UPDATE results SET {assignments} WHERE run_id = ? AND item_id = ?", [*updates.values(), run_id, item_id])

    def golden_set_hash(self, run_id: str, *, written_canonical: bool = False) -> str:
        """:func:`~pytest_crucible.golden_set.schema.golden_set_hash` of the run's golden items, streamed from the file.
        ``written_canonical``: every row of the run was written by ``record_scores`` (canonical JSON), as a
        session's own run is (a run id is never reused), so the texts are hashed as stored."""
        from ..golden_set.schema import canonical_item_json, hash_canonical_items

        rows = self.db.conn.execute("SELECT item_id, item FROM golden_items WHERE run_id = ? ORDER BY item_id", [run_id])
        if written_canonical:
            return hash_canonical_items(rows)
        # Rows written before the items were stored canonically are put in that form first.
        return hash_canonical_items((item_id, canonical_item_json(json.loads(text))) for item_id, text in rows)

    def result_origin(self, result_id: str) -> tuple[str, str] | None:
        """(run id, item id) of the result with this id, or None when there is none."""
        row = self.db.conn.execute("SELECT run_id, item_id FROM results WHERE result_id = ?", [result_id]).fetchone()
        return None if row is None else (row[0], row[1])

    def item_metrics(self, run_id: str) -> dict[str, dict[str, float]]:
        """metric -> {item_id: value}: what a paired comparison reads."""
        from itertools import groupby
        from operator import itemgetter

        rows = self.db.conn.execute(
            "SELECT metric, item_id, value FROM item_metrics WHERE run_id = ? ORDER BY metric, item_id", [run_id]).fetchall()
        return {metric: {item_id: value for _, item_id, value in group} for metric, group in groupby(rows, key=itemgetter(0))}

    def item_repeats(self, run_id: str) -> list[dict[str, Any]]:
        """The repeats of a run's items (``--crucible-repeat``), metrics decoded; empty for a run without repeats."""
        rows = [dict(row) for row in self.db.query(
            "SELECT item_id, repeat, outcome, answer, metrics, failure, error FROM item_repeats WHERE run_id = ? "
            "ORDER BY item_id, repeat", [run_id])]
        return _decode(rows, "metrics", "{}")

    def item_attempts(self, run_id: str, item_id: str | None = None) -> list[dict[str, Any]]:
        """The attempts pytest made at a run's items before the last one (pytest-rerunfailures), metrics decoded,
        with the item's final outcome (``final``); of one item when ``item_id`` is given. Empty without reruns."""
        rows = [dict(row) for row in self.db.query(
            "SELECT a.item_id, a.attempt, a.outcome, a.answer, a.metrics, a.failure, a.error, a.error_class, "
            "r.outcome AS final FROM item_attempts a LEFT JOIN results r ON r.run_id = a.run_id AND r.item_id = a.item_id "
            "WHERE a.run_id = ? AND (? IS NULL OR a.item_id = ?) ORDER BY a.item_id, a.attempt", [run_id, item_id, item_id])]
        return _decode(rows, "metrics", "{}")

    def golden_items(self, run_id: str) -> list[dict[str, Any]]:
        return [json.loads(row[0]) for row in self.db.conn.execute("SELECT item FROM golden_items WHERE run_id = ? ORDER BY item_id", [run_id])]

    def results(self, run_id: str, *, decoded: bool = False) -> list[dict[str, Any]]:
        """The run's result rows in recording order; ``decoded``: JSON columns as Python values (the export's shape)."""
        rows = resolve_retrieved(self.db.conn, [dict(row) for row in self.db.query(
            "SELECT * FROM results WHERE run_id = ? ORDER BY rowid", [run_id])])
        if decoded:
            for row in rows:
                for column in _JSON_RESULT_COLUMNS:
                    row[column] = json.loads(row[column])
                for column in _JSON_OPTIONAL_COLUMNS:
                    row[column] = json.loads(row[column]) if row.get(column) else None
        return rows

    def failed_items(self, run_id: str) -> list[dict[str, Any]]:
        """The run's failed and errored items, by id: failures (decoded), pipeline error, golden file and line."""
        rows = [dict(row) for row in self.db.query(
            "SELECT r.item_id, r.failures, r.error, g.source, g.line FROM results r LEFT JOIN golden_items g ON g.run_id = r.run_id"
            " AND g.item_id = r.item_id WHERE r.run_id = ? AND r.outcome IN ('failed', 'error') ORDER BY r.item_id", [run_id])]
        return _decode(rows, "failures", "[]")

    def count_judge_failed(self, run_id: str) -> int:
        """Items of the run whose judging failed after retries."""
        return self.db.conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ? AND judge_errors != '[]'", [run_id]).fetchone()[0]

    def item_kinds(self, run_id: str) -> dict[str, str]:
        """item id -> the kind of the golden item as it ran (retrieval when the item does not say)."""
        return {item_id: kind or "retrieval" for item_id, kind in self.db.conn.execute(
            "SELECT item_id, json_extract(item, '$.kind') FROM golden_items WHERE run_id = ?", [run_id])}

    def result_rows(self, run_id: str, *, rankings: bool = False) -> list[dict[str, Any]]:
        """Every result's item id, confidence, CRAG grade and failures (pipeline error, judge errors):
        what the run model reads besides the metrics, by item id; ``rankings``: and what it retrieved (decoded),
        in recording order."""
        columns = retrieved_column(["item_id", "confidence", "crag_grade", "error", "judge_errors", *(["retrieved"] if rankings else [])])
        rows = resolve_retrieved(self.db.conn, [dict(zip(columns, row)) for row in self.db.conn.execute(
            f"SELECT {', '.join(columns)} FROM results WHERE run_id = ? ORDER BY {'rowid' if rankings else 'item_id'}",
            [run_id]).fetchall()])
        for row in rows:
            errors = row["judge_errors"]
            row["judge_errors"] = json.loads(errors) if errors and errors != "[]" else []  # the common case: nothing to decode
            if rankings:
                row["retrieved"] = json.loads(row["retrieved"] or "[]")
        return rows


def _provenance_rows(run_id: str, scores: list[dict[str, Any]], item_jsons: list[str], now: str) -> list[QrelRow]:
    """The qrels the golden items' citations are: free, deterministic judgments
    (required = 3, acceptable = 1). judge_model names the golden item version that produced them (hashed from
    its canonical JSON, ``item_jsons``), so an edited citation appends a new judgment; INSERT OR IGNORE keeps a
    re-run of the same version idempotent."""
    from ..golden_set.schema import hash_canonical_items
    from ..metrics.retrieval import citation_grade

    rows = []
    for score, item_json in zip(scores, item_jsons):
        item_id, citations = score["item_id"], score["item"].get("citations")
        if citations:
            version = "golden@" + hash_canonical_items([(item_id, item_json)])[:12]
            rows.extend([QrelRow(item_id, citation.get("chunkId"), citation.get("docId"), citation_grade(citation.get("mode")),
                                 "provenance", version, None, None, None, run_id, now) for citation in citations])
    return rows


def _content(contents: dict[str, str], hashes: ContentHashes, text: str) -> str:
    """The hash of ``text``, which joins ``contents`` (hash -> text) to be written with the rows that refer to it."""
    key = hashes(text)
    contents[key] = text
    return key
