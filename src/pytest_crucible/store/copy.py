"""`crucible copy`: runs and ledgers from one store into another, SQLite or PostgreSQL either way.

A team that starts with files moves to a server without losing history, and a server's runs come back to a
file for a laptop. Every row is copied as it is (the run, its golden items, results, metrics, repeats and
concepts, and the stored values they refer to, ``contents``: a golden item's text, a ranking; the qrels and
feedback ledgers, human labels, promoted drafts, the judge cache and its calibrations, API keys), and copying
twice adds nothing:

- a run already in the destination is skipped when it is the same run (id, start and config hash), and
  refused when another run holds its id;
- rows keyed by an id of their own (feedback, drafts, the judge cache, calibrations, keys) are added once;
- the qrels and human-label ledgers number their rows per database, so a row is the same row when every
  column but its number agrees (a human who judged the same pair twice keeps both judgments: rows are
  counted, not only compared).

A run still running in the source is left out (its copy would be partial), and said so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import Store, StoreError
from .schema import RunStatus

#: A run's rows, table by table, in an order the foreign keys accept (the run first).
RUN_TABLES = ("golden_item_refs", "golden_concepts", "results", "item_metrics", "item_repeats", "item_attempts")
#: The stored values a run's rows refer to (``store/contents.py``): copied with the run, once per destination.
RUN_CONTENTS = ("SELECT hash, body FROM contents WHERE hash IN (SELECT item_hash FROM golden_item_refs WHERE run_id = ?"
                " UNION SELECT retrieved_hash FROM results WHERE run_id = ?) ORDER BY hash")
#: Ledgers whose rows carry an id of their own: copied once by it (feedback before the drafts that cite it).
KEYED_TABLES = (("eval_feedback", "id"), ("golden_drafts", "id"), ("judge_cache", "key"), ("judge_calibrations", "id"),
                ("api_keys", "id"))
#: Ledgers numbered per database: a row is identified by every other column.
NUMBERED_TABLES = ("qrels", "human_labels")


@dataclass
class CopyReport:
    runs_copied: list[str] = field(default_factory=list)
    runs_present: list[str] = field(default_factory=list)
    runs_running: list[str] = field(default_factory=list)
    rows_added: dict[str, int] = field(default_factory=dict)


def copy_store(source: Any, destination: Any, *, run_ids: Iterable[str] | None = None) -> CopyReport:
    """Copy ``source``'s runs (all, or ``run_ids``) and its ledgers into ``destination`` (created if missing)."""
    src = Store.open(source, create=False)
    try:
        dst = Store.open(destination)
        try:
            return _copy(src, dst, None if run_ids is None else [src.resolve_run(ref) for ref in run_ids])
        finally:
            dst.close()
    finally:
        src.close()


def _rows(store: Store, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    return list(store.db.query(sql, params))


def _insert(store: Store, table: str, rows: list[dict[str, Any]], *, ignore: bool) -> int:
    if not rows:
        return 0
    columns = list(rows[0])
    verb = "INSERT OR IGNORE" if ignore else "INSERT"
    cursor = store.db.conn.executemany(f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                                       [[row[column] for column in columns] for row in rows])
    return max(cursor.rowcount, 0)


def _copy(src: Store, dst: Store, wanted: list[str] | None) -> CopyReport:
    report = CopyReport()
    runs = sorted(_rows(src, "SELECT * FROM runs"), key=lambda run: (run["started_at"], run["id"]))
    for run in runs:
        if wanted is not None and run["id"] not in wanted:
            continue
        if run["status"] == RunStatus.RUNNING:
            report.runs_running.append(run["id"])
            continue
        present = dst.db.conn.execute("SELECT started_at, config_hash FROM runs WHERE id = ?", [run["id"]]).fetchone()
        if present is not None:
            if tuple(present) != (run["started_at"], run["config_hash"]):
                raise StoreError(f"run {run['id']}: {dst.path} holds another run with this id (started {present[0]}); "
                                 "nothing of it was copied\nHINT: copy into another database, or leave that run out with --run")
            report.runs_present.append(run["id"])
            continue
        with dst.db.conn:  # one run, whole or not at all
            _insert(dst, "runs", [run], ignore=False)
            _insert(dst, "contents", _rows(src, RUN_CONTENTS, [run["id"]] * 2), ignore=True)
            for table in RUN_TABLES:
                order = " ORDER BY rowid" if table == "results" else ""
                _insert(dst, table, _rows(src, f"SELECT * FROM {table} WHERE run_id = ?{order}", [run["id"]]), ignore=True)
        report.runs_copied.append(run["id"])
    with dst.db.conn:
        for table, key in KEYED_TABLES:
            rows = _rows(src, f"SELECT * FROM {table} ORDER BY {key}")
            if table == "eval_feedback":  # feedback on a run left out stays behind with it (it names the run)
                known = {row[0] for row in dst.db.conn.execute("SELECT id FROM runs").fetchall()}
                rows = [row for row in rows if row["run_id"] in known]
            if table == "golden_drafts":
                known = {row[0] for row in dst.db.conn.execute("SELECT id FROM eval_feedback").fetchall()}
                rows = [row for row in rows if row["feedback_id"] in known]
            report.rows_added[table] = _insert(dst, table, rows, ignore=True)
        for table in NUMBERED_TABLES:
            rows = [{column: value for column, value in row.items() if column != "id"}
                    for row in _rows(src, f"SELECT * FROM {table} ORDER BY id")]
            have = Counter(tuple(sorted(row.items())) for row in
                           ({column: value for column, value in found.items() if column != "id"}
                            for found in _rows(dst, f"SELECT * FROM {table}")))
            missing = []
            for row in rows:
                identity = tuple(sorted(row.items()))
                if have[identity]:
                    have[identity] -= 1
                else:
                    missing.append(row)
            report.rows_added[table] = _insert(dst, table, missing, ignore=False)
    return report
