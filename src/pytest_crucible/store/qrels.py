"""The qrels ledger (``QrelsMixin``, a part of ``Store``): the one writer of its rows, append-only, with
the rule for a row already present; its reads (by query and source, the units a query knows, the judgment
ledger) and the effective grades of a run (``qrels/grades.py`` decides them).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .database import Connection, StoreError, read_only_rows, utc_now

if TYPE_CHECKING:
    from .postgres import DatabaseURL


class QrelRow(NamedTuple):
    """A qrels row as the ledger stores it; its fields are the columns written (the ledger numbers ``id``)."""

    query_id: str
    chunk_id: str | None
    doc_id: str | None
    grade: int
    source: str
    judge_model: str  # '' for none: part of a machine judgment's identity
    prompt_version: str | None
    created_by: str | None
    note: str | None
    run_id: str | None
    created_at: str


# What makes a copied human judgment the same one again (``_write_qrels``).
_HUMAN_QREL_IDENTITY = ("query_id", "chunk_id", "doc_id", "grade", "created_by", "created_at")


def qrel_row(row: dict[str, Any], now: str) -> QrelRow:
    """A qrels row as the ledger stores it (no judge model is '', no time is now)."""
    return QrelRow(row["query_id"], row.get("chunk_id"), row.get("doc_id"), int(row["grade"]), row["source"],
                   row.get("judge_model") or "", row.get("prompt_version"), row.get("created_by"), row.get("note"),
                   row.get("run_id"), row.get("created_at") or now)


class QrelsMixin(Connection):
    """The qrels ledger of ``Store``."""

    if TYPE_CHECKING:  # ResultsMixin's (store/results.py)
        def golden_items(self, run_id: str) -> list[dict[str, Any]]: ...

    def _append_qrels(self, rows: Iterable[dict[str, Any]], now: str) -> int:
        rows = list(rows)
        for row in rows:
            if row["source"] not in ("llm", "human"):
                raise StoreError(f"qrels source {row['source']!r} cannot be appended here (provenance comes from golden citations)")
        return self._write_qrels(rows, now)

    def _write_qrels(self, rows: Iterable[dict[str, Any]], now: str, *, copied: bool = False) -> int:
        """The one writer of the qrels ledger (with ``_write_qrel_values``), inside the caller's transaction
        (recording, ``append_qrels`` and ``merge_shards``); returns the rows added. The ledger is append-only,
        and a row already present is skipped, never rewritten:

        - an id already in the ledger: ignored (the schema-7 trigger). Ids are never written here: each
          ledger numbers its own rows, so a row's id from another database means nothing in this one.
        - a machine judgment (provenance, llm): one per (query, unit, source, judge_model); a repeat is ignored.
        - a human judgment is a history, and the newest one wins. A new one (an override, an imported
          file: ``copied=False``) is a person's word given again, so it is always appended, even when it
          repeats an earlier row. A human row copied from another crucible ledger (``copied=True``: a
          merged shard) is already present when a human row with the same query, unit (chunk and doc),
          grade, author and created_at is there: it is the same judgment, counted once however often
          that shard, or another carrying it, is merged.
        """
        return self._write_qrel_values([qrel_row(row, now) for row in rows], copied=copied)

    def _write_qrel_values(self, rows: list[QrelRow], *, copied: bool = False) -> int:
        """``_write_qrels`` from rows already normalised (as ``qrel_row`` makes them): how recording writes
        the provenance rows it builds."""
        conn = self.db.conn
        added = 0
        machine: list[QrelRow] = []  # consecutive machine rows go in one statement
        insert = f"INTO qrels ({', '.join(QrelRow._fields)}) VALUES ({', '.join('?' * len(QrelRow._fields))})"

        def write_machine_rows() -> int:
            count = max(conn.executemany("INSERT OR IGNORE " + insert, machine).rowcount, 0) if machine else 0
            machine.clear()
            return count

        for values in rows:
            if values.source != "human":
                machine.append(values)
                continue
            added += write_machine_rows()  # the ledger keeps the rows' order
            if copied and conn.execute(
                    "SELECT 1 FROM qrels WHERE source = 'human' AND query_id = ? AND chunk_id IS ? AND doc_id IS ?"
                    " AND grade = ? AND created_by IS ? AND created_at = ? LIMIT 1",
                    [getattr(values, field) for field in _HUMAN_QREL_IDENTITY]).fetchone():
                continue
            added += max(conn.execute("INSERT " + insert, values).rowcount, 0)
        return added + write_machine_rows()

    def append_qrels(self, rows: Iterable[dict[str, Any]]) -> int:
        """Append llm or human judgments (never rewrites; a repeated machine judgment is ignored). Returns rows added."""
        with self.db.conn:
            return self._append_qrels(rows, utc_now())

    def qrels_rows(self, *, query_ids: Iterable[str] | None = None, sources: Iterable[str] | None = None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM qrels", []
        clauses = []
        if query_ids is not None:
            ids = list(query_ids)
            clauses.append(f"query_id IN ({', '.join('?' for _ in ids)})")
            params.extend(ids)
        if sources is not None:
            wanted = list(sources)
            clauses.append(f"source IN ({', '.join('?' for _ in wanted)})")
            params.extend(wanted)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        return [dict(row) for row in self.db.query(sql + " ORDER BY id", params)]

    def known_query_ids(self) -> list[str]:
        """Every query id this database knows, sorted: a golden item that ran in any run (any
        workspace), or a query the qrels ledger judges."""
        return [row[0] for row in self.db.conn.execute(
            "SELECT item_id FROM golden_item_refs UNION SELECT item_id FROM results UNION SELECT query_id FROM qrels ORDER BY 1")]

    def known_units(self, query_id: str) -> set[str]:
        """The units (``chunk:<id>``, ``doc:<id>``) this database knows for one query, in any run or
        workspace: retrieved for its item, named by a citation of its golden item, or judged in the
        ledger. A known chunk makes its document known too."""
        pairs = self.db.conn.execute(
            "SELECT coalesce(json_extract(entry.value, '$.chunk_id'), json_extract(entry.value, '$.chunkId')),"
            "       coalesce(json_extract(entry.value, '$.doc_id'), json_extract(entry.value, '$.docId'))"
            "  FROM results JOIN contents ON contents.hash = results.retrieved_hash, json_each(contents.body) AS entry"
            " WHERE results.item_id = ? AND entry.type = 'object'"
            " UNION "
            "SELECT json_extract(citation.value, '$.chunkId'), json_extract(citation.value, '$.docId')"
            "  FROM golden_items, json_each(golden_items.item, '$.citations') AS citation"
            " WHERE golden_items.item_id = ? AND citation.type = 'object'"
            " UNION "
            "SELECT chunk_id, doc_id FROM qrels WHERE query_id = ?", [query_id] * 3).fetchall()
        units = {f"chunk:{chunk}" for chunk, _ in pairs if chunk}
        return units | {f"doc:{doc}" for _, doc in pairs if doc}

    def judgment_ledger(self, query_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """query id -> its human and llm judgments in ledger order, for these queries
        (the rows :func:`pytest_crucible.qrels.grades.item_grades` reads)."""
        return _by_query(self.qrels_rows(query_ids=query_ids, sources=("human", "llm")))

    def run_judgment_ledger(self, run_id: str) -> dict[str, list[dict[str, Any]]]:
        """:meth:`judgment_ledger` of every golden item of the run, in one statement (the ledger's human and llm
        rows, each checked against the run's items: not a look-up of the ledger per item)."""
        return _by_query(dict(row) for row in self.db.query(
            "SELECT * FROM qrels q WHERE q.source IN ('human', 'llm') AND EXISTS"
            " (SELECT 1 FROM golden_item_refs g WHERE g.run_id = ? AND g.item_id = q.query_id) ORDER BY q.id", [run_id]))

    def effective_qrels(self, run_id: str) -> dict[str, dict[str, int]]:
        """query -> unit -> effective grade for a run: its golden items' citations as run,
        overridden by human judgments, completed by llm judgments (see pytest_crucible.qrels.grades)."""
        from ..qrels.grades import item_grades

        items = {item["id"]: item for item in self.golden_items(run_id)}
        ledger = self.judgment_ledger(items)
        return {
            query: {unit: grade for unit, (grade, _) in item_grades(item, ledger.get(query, [])).items()}
            for query, item in items.items()
        }


def read_judgment_ledger(db_path: str | Path | DatabaseURL) -> dict[str, list[dict[str, Any]]]:
    """query id -> its human and llm judgments in ledger order (read-only: xdist workers call it too)."""
    return _by_query(read_only_rows(db_path, "SELECT * FROM qrels WHERE source IN ('human', 'llm') ORDER BY id"))


def _by_query(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Ledger rows grouped by query id, each group in the rows' order."""
    ledger: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        ledger.setdefault(row["query_id"], []).append(row)
    return ledger

