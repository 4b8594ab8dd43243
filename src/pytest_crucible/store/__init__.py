"""The results store: one SQLite file, written with plain SQL through the standard ``sqlite3`` module.

Only one process writes during a pytest session (the controller); every write is
a short transaction, so an interrupted session leaves earlier runs intact and its
own run marked ``interrupted``. This module never imports pytest.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..defaults import DEFAULT_K
from .files import create_empty
from .schema import LATE_COLUMNS, MIGRATIONS, SCHEMA_VERSION
from .ulid import new_ulid, new_ulids

if TYPE_CHECKING:
    from .postgres import DatabaseURL

__all__ = ["SCHEMA_VERSION", "RunNotFound", "Store", "StoreError", "new_ulid"]


class StoreError(Exception):
    """The store cannot do what was asked; ``str()`` is the user-facing message."""


# The database's own errors, for the modules above the store (which never import sqlite3): a write the
# database refused (DatabaseError), and whether it refused because another connection holds the lock.
DatabaseError = sqlite3.Error


def is_locked(exc: BaseException) -> bool:
    """The database refused because another connection holds its lock: worth a retry, nothing was written."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


class RunNotFound(StoreError):
    pass


class RunIdTaken(StoreError):
    """A fixed run id (``--crucible-run-id``) that the database already holds, or that another session holds."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _statements(script: str) -> Iterator[str]:
    """The SQL statements of a migration script, one at a time (a trigger's BEGIN ... END is one)."""
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            yield current
            current = ""
    if current.strip() and not all(part.strip().startswith("--") for part in current.splitlines() if part.strip()):
        raise ValueError(f"migration script ends in an incomplete statement: {current.strip()[:80]!r}")


# A file SQLite cannot read: its runs are lost to crucible either way, and writing into it would only bury that.
_OPEN_ATTEMPTS = 5
_DAMAGED_HINT = "move it aside (`sqlite3 FILE .recover` may save its rows) or point --crucible-db (crucible: --db) elsewhere"


class Database:
    """The store's handle on its SQLite file: the connection and a query returning dict rows. All the store
    needs, in a few lines of its own: a wrapper library cost 0.4-0.8 s of imports (numpy among them) at
    the start of every session."""

    def __init__(self, conn: Any):
        self.conn = conn  # sqlite3.Connection, or postgres.PgConnection (the same shape)
        self.dialect = getattr(conn, "dialect", "sqlite")

    def query(self, sql: str, params: Iterable[Any] = ()) -> Iterator[dict[str, Any]]:
        cursor = self.conn.execute(sql, list(params))
        columns = [description[0] for description in cursor.description]
        for row in cursor:
            yield dict(zip(columns, row))


def locate(database: str | Path | DatabaseURL) -> Path | DatabaseURL:
    """Where a database lives: a SQLite file (a path), or a PostgreSQL database (``postgresql://...``)."""
    from .postgres import DatabaseURL, is_database_url

    if isinstance(database, DatabaseURL):
        return database
    return DatabaseURL(database) if is_database_url(database) else Path(database)


def is_file(database: Any) -> bool:
    """Whether ``database`` names a SQLite file (else a PostgreSQL database)."""
    return isinstance(locate(database), Path)


class Store:
    def __init__(self, db: Database, path: Path | DatabaseURL):
        self.db = db
        self.path = path  # str() of a PostgreSQL URL never shows its password

    # -- opening ---------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, create: bool = True, verify: bool = False) -> Store:
        """Open (and migrate) the database; ``create``: a missing file is a new database. ``verify``: read
        every page first (``PRAGMA quick_check``, about 0.15 s per 100 MB), so damage that opening alone
        does not reach is refused up front rather than found by a write half way through a run."""
        path = locate(path)
        if not isinstance(path, Path):
            return cls._open_postgres(path)
        if not path.exists():
            if not create:
                raise StoreError(f"{path}: no crucible database here\nHINT: run the golden set once first, or point at the database (pytest: --crucible-db, crucible: --db)")
            create_empty(path)  # 0600 (CRUCIBLE_FILE_MODE) in a 0700 folder: SQLite gives -wal and -shm its mode
        for attempt in range(_OPEN_ATTEMPTS):
            started = time.monotonic()
            try:
                store = cls._connect(path, verify)
                break
            except sqlite3.OperationalError as exc:
                # Processes opening one new file at the same moment can meet a lock SQLite reports at once,
                # without waiting (switching to WAL, WAL recovery): try again, a little later, a few times.
                # A lock that outlasted the 30 s busy timeout is held for real: that one is reported.
                quick = time.monotonic() - started < 1.0
                if quick and attempt + 1 < _OPEN_ATTEMPTS and any(word in str(exc) for word in ("locked", "busy")):
                    time.sleep(0.05 * 2**attempt)
                    continue
                raise StoreError(f"{path}: cannot open the crucible database: {exc}\nHINT: is it a crucible SQLite file? To start a new one, {_DAMAGED_HINT}") from None
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{path}: cannot open the crucible database: {exc}\nHINT: is it a crucible SQLite file? To start a new one, {_DAMAGED_HINT}") from None
        store.mark_dead_runs_interrupted()
        return store

    @classmethod
    def _open_postgres(cls, url: DatabaseURL, *, read_only: bool = False) -> Store:
        """Open a PostgreSQL database, creating the schema in an empty one (one session at a time: an
        advisory lock serialises processes that meet an empty database at once)."""
        from .postgres import POSTGRES_MIGRATES_FROM, connect, migratable, migration_statements, schema_statements

        conn = connect(url, read_only=read_only)
        try:
            store = cls(Database(conn), url)
            with conn:
                if not read_only:
                    conn.execute("SELECT pg_advisory_xact_lock(7310437)")  # any constant: crucible's schema lock
                exists = conn.execute("SELECT to_regclass('crucible_schema') IS NOT NULL").fetchone()[0]
                if not exists and read_only:
                    raise StoreError(f"{url}: no crucible database here\nHINT: run the golden set once first, or point at the database")
                if not exists:
                    conn.execute_script([*schema_statements(), "CREATE TABLE crucible_schema (version INTEGER NOT NULL)",
                                         f"INSERT INTO crucible_schema VALUES ({SCHEMA_VERSION})"])
                version = conn.execute("SELECT version FROM crucible_schema").fetchone()[0]
                if not read_only and migratable(version):  # under the schema lock: one session migrates, the others see it done
                    conn.execute_script(migration_statements(version))
                    conn.execute("UPDATE crucible_schema SET version = ?", [SCHEMA_VERSION])
                    version = SCHEMA_VERSION
            if version != SCHEMA_VERSION:
                newer = version > SCHEMA_VERSION
                raise StoreError(f"{url}: schema {version}, this pytest-crucible knows {SCHEMA_VERSION}\nHINT: "
                                 + ("upgrade pytest-crucible; databases are never migrated backwards" if newer else
                                    f"this version migrates PostgreSQL databases from schema {POSTGRES_MIGRATES_FROM} on; copy the runs into a new database (`crucible copy`)"))
            if not read_only:
                store.mark_dead_runs_interrupted()
            return store
        except BaseException:
            conn.close()
            raise

    @classmethod
    def _connect(cls, path: Path, verify: bool) -> Store:
        conn = sqlite3.connect(str(path), timeout=30.0)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            if verify:
                findings = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
                if findings != ["ok"]:
                    found = "; ".join(" ".join(finding.split()) for finding in findings)
                    raise StoreError(f"{path}: the crucible database is damaged: PRAGMA quick_check: {found}\nHINT: to start a new one, {_DAMAGED_HINT}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                with conn:
                    conn.execute("PRAGMA journal_mode = wal")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            store = cls(Database(conn), path)
            store._migrate()
            return store
        except BaseException:
            conn.close()
            raise

    def checkpoint_only_when_asked(self) -> None:
        """Leave checkpoints to :meth:`checkpoint` alone on this connection (a recording session calls it every
        few seconds and at close). SQLite's own, every 1,000 pages of log, come on top and copy again the pages
        every write batch rewrites (the last page of each table and index); at 10,000 items without them
        the whole run took about 2-3% less time (docs/benchmarks.md)."""
        if isinstance(self.path, Path):  # PostgreSQL has no write-ahead log file to move
            self.db.conn.execute("PRAGMA wal_autocheckpoint = 0")

    def checkpoint(self) -> str | None:
        """Copy the write-ahead log's pages into the database file, so that the file alone (a copy of it, a CI
        upload of it) holds every run written so far. Never waits: None when every page is in the file; a
        reason when another connection's read keeps some in ``-wal`` for now (the last connection to close
        moves them). StoreError when the file cannot take them (it turned unwritable, the disk failed):
        then the runs live only in ``-wal``, which must travel with the file."""
        if not isinstance(self.path, Path):
            return None  # PostgreSQL: a commit is in the database
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            busy, pages, copied = self.db.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: the latest writes are only in {wal.name}, the database file cannot take them "
                             f"({exc}): keep {wal.name} with the database (copy or upload both)\nHINT: make the file "
                             "writable again, then open it once (e.g. `crucible runs --db FILE`) to move them in") from None
        if busy or copied < pages:
            return (f"{pages - max(copied, 0)} page(s) of {self.path.name} are still only in {wal.name} (another connection "
                    f"is reading it): copy or upload both files, or `crucible export` the run")
        return None

    def _migrate(self) -> None:
        conn = self.db.conn
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer pytest-crucible (schema {version}, this one knows {SCHEMA_VERSION})\n"
                "HINT: upgrade pytest-crucible; files are never migrated backwards."
            )
        if version == SCHEMA_VERSION:
            self._add_late_columns()
            return
        # A file of an early build of its version first gains the columns that version has (a later
        # migration's table rebuild re-checks every view, and a view may name such a column).
        self._add_late_columns(up_to=version)
        # Table rebuilds need foreign keys off, and that PRAGMA only works outside a transaction.
        conn.execute("PRAGMA foreign_keys = OFF")
        try:
            while version < SCHEMA_VERSION:
                target = version + 1
                # One step per transaction, the write lock taken up front (BEGIN IMMEDIATE) and the version
                # read again under it: processes opening one file at once take turns, and a step another
                # process has done meanwhile is skipped, never run twice (an ALTER TABLE cannot be).
                conn.execute("BEGIN IMMEDIATE")
                try:
                    if conn.execute("PRAGMA user_version").fetchone()[0] < target:
                        for statement in _statements(MIGRATIONS[target - 1]):
                            conn.execute(statement)
                        conn.execute(f"PRAGMA user_version = {target}")
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            problems = conn.execute("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise StoreError(f"{self.path}: migration left {len(problems)} broken references; the file was not changed past them")
        finally:
            conn.execute("PRAGMA foreign_keys = ON")
        self._add_late_columns()

    def _add_late_columns(self, up_to: int | None = None) -> None:
        """Add the columns a file of an early build of its schema version lacks (schema.LATE_COLUMNS);
        ``up_to``: only those of versions up to this one (the file's, before it is migrated)."""
        conn = self.db.conn
        for since, table, column, kind in LATE_COLUMNS:
            if up_to is not None and since > up_to:
                continue
            if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                try:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                except sqlite3.OperationalError:
                    # Another process added it first.
                    if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                        raise

    @classmethod
    def open_read_only(cls, path: str | Path) -> Store:
        """Open an existing database for reading only (SQLite ``mode=ro``): nothing is migrated,
        no run is marked interrupted, and any write fails. The schema must be this version's."""
        path = locate(path)
        if not isinstance(path, Path):
            return cls._open_postgres(path, read_only=True)
        if not path.is_file():
            raise StoreError(f"{path}: no crucible database here\nHINT: run the golden set once first, or point at the database")
        # check_same_thread off: a web request may hand the connection between worker threads, never share it.
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=30.0, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path}: cannot read the crucible database: {exc}\nHINT: is it a crucible SQLite file?") from None
        if version != SCHEMA_VERSION:
            conn.close()
            raise StoreError(f"{path}: schema {version}, this pytest-crucible reads schema {SCHEMA_VERSION}\n"
                             "HINT: open it once with a writing command of this version (e.g. `crucible runs`) to migrate it")
        return cls(Database(conn), path)

    def close(self) -> None:
        self.db.conn.close()

    def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False) -> None:
        # Inside the caller's transaction: one logical write is never split in two.
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        self.db.conn.execute(f"{verb} INTO {table} ({columns}) VALUES ({marks})", list(row.values()))

    def _update_run(self, run_id: str, values: dict[str, Any]) -> None:
        assignments = ", ".join(f"{column} = ?" for column in values)
        self.db.conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*values.values(), run_id])

    # -- runs ------------------------------------------------------------------
    def start_run(self, *, config_hash: str, params: dict, resolved: dict, mode: str, outcome_mode: str,
                  config_path: str | None = None, git_commit: str | None = None, pytest_args: list[str] | None = None,
                  run_id: str | None = None, judge_model: str | None = None, judge_prompt_version: str | None = None,
                  judge_label: str | None = None, cost_estimate_usd: float | None = None,
                  workspace: str = "default", labels: dict[str, str] | None = None,
                  kinds: list[str] | None = None, custom_metrics: list[dict[str, Any]] | None = None, repeats: int = 1,
                  eval_k: int | None = None) -> str:
        """Open a run. ``eval_k``: the cutoff its metrics at K are measured at (ini crucible_k). ``custom_metrics``: the definitions of the custom metrics it measures (see
        ``custom_metrics.definitions``), kept with the run so a comparison sees a changed ruler."""
        fixed_id = run_id
        run_id = run_id or new_ulid()
        try:
            with self.db.conn:
                self._insert("runs", {
                    "id": run_id,
                    "started_at": utc_now(),
                    "status": "running",
                    "config_hash": config_hash,
                    "config_path": config_path,
                    "params": json.dumps(params, sort_keys=True),
                    "resolved": json.dumps(resolved, sort_keys=True),
                    "mode": mode,
                    "outcome_mode": outcome_mode,
                    "git_commit": git_commit,
                    "pytest_args": json.dumps(pytest_args or []),
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "judge_model": judge_model,
                    "judge_prompt_version": judge_prompt_version,
                    "judge_label": judge_label,
                    "cost_estimate_usd": cost_estimate_usd,
                    "workspace": workspace,
                    "labels": json.dumps(labels or {}, sort_keys=True),
                    "kinds": json.dumps(sorted(kinds)) if kinds else None,
                    "custom_metrics": json.dumps(custom_metrics, sort_keys=True) if custom_metrics else None,
                    "repeats": repeats,
                    "eval_k": int(eval_k or DEFAULT_K),
                })
        except sqlite3.IntegrityError:
            if fixed_id is None:
                raise
            raise RunIdTaken(self._taken_message(fixed_id)) from None
        return run_id

    def _taken_message(self, run_id: str) -> str:
        row = self.db.conn.execute("SELECT status, host, pid, started_at FROM runs WHERE id = ?", [run_id]).fetchone()
        return _run_id_taken_message(self.path, run_id, row)

    def complete_run_start(self, run_id: str, *, judge_model: str | None = None, judge_prompt_version: str | None = None,
                           judge_label: str | None = None, cost_estimate_usd: float | None = None,
                           custom_metrics: list[dict[str, Any]] | None = None) -> None:
        """Fill in what a reserved run (``start_run`` before collection) learns only once its tests are
        collected: the judge, the cost estimate, the custom metrics of conftest files below the root."""
        with self.db.conn:
            self._update_run(run_id, {
                "judge_model": judge_model,
                "judge_prompt_version": judge_prompt_version,
                "judge_label": judge_label,
                "cost_estimate_usd": cost_estimate_usd,
                "custom_metrics": json.dumps(custom_metrics, sort_keys=True) if custom_metrics else None,
            })

    def release_run(self, run_id: str) -> bool:
        """Delete a reserved run that recorded nothing (its session stopped before its first result), so
        its id can be used again. Only this process's own row, still running and empty, is ever deleted."""
        with self.db.conn:
            deleted = self.db.conn.execute(
                "DELETE FROM runs WHERE id = ? AND status = 'running' AND host = ? AND pid = ? "
                "AND NOT EXISTS (SELECT 1 FROM results WHERE run_id = ?)",
                [run_id, socket.gethostname(), os.getpid(), run_id]).rowcount
        return bool(deleted)

    def finish_run(self, run_id: str, *, status: str, golden_hash: str | None, judge: dict[str, Any] | None = None,
                   unread_keys: list[str] | None = None, skipped: int = 0, unrecorded: int = 0,
                   embedder: str | None = None, selection: str | None = None) -> str:
        """Close a run and return its status. ``selection``: what it selected of its golden set, as
        ``store.selection.Selection.to_json`` (None: all of it). ``judge``: stats (requests, cache hits, ...), tokens and cost
        to keep with it; ``unread_keys``: changed config keys the pipeline never read (``crucible ablate``
        reads them); ``skipped``: golden items not run (drafts); ``unrecorded``: items that ran but whose
        scores could not be written (a full disk). A run that would be complete but scored no item is
        ``failed``: it measured nothing, so it is never a baseline and never ``latest``. A run that lost
        items is at best ``incomplete``, and counts them in ``n_items`` but not in ``n_scored`` or
        ``n_errored`` (see ``runs.unrecorded_items``): its means would silently leave them out."""
        values: dict[str, Any] = {"status": status, "finished_at": utc_now(), "golden_hash": golden_hash,
                                  "unread_keys": json.dumps(unread_keys or []), "n_skipped": skipped, "selection": selection}
        if embedder:  # the embedder responseRelevancy was measured with (``embedder``: its name)
            values["embedder"] = embedder
        if judge:
            values.update(
                judge_stats=json.dumps(judge.get("stats") or {}, sort_keys=True),
                cost_usd=judge.get("cost_usd"),
                input_tokens=judge.get("input_tokens"),
                output_tokens=judge.get("output_tokens"),
            )
        with self.db.conn:
            n_items, n_errored = self.db.conn.execute(
                "SELECT COUNT(*), COUNT(error) FROM results WHERE run_id = ?", [run_id]).fetchone()
            values.update(n_items=n_items + unrecorded, n_errored=n_errored, n_scored=n_items - n_errored)
            if unrecorded and status == "complete":
                values["status"] = "incomplete"
            if n_items - n_errored == 0 and values["status"] in ("complete", "incomplete"):
                values["status"] = "failed"
            self._update_run(run_id, values)
        return values["status"]

    def mark_dead_runs_interrupted(self) -> int:
        """A run still 'running' whose process is gone (killed, crashed) was interrupted."""
        host = socket.gethostname()
        rows = self.db.conn.execute("SELECT id, pid FROM runs WHERE status = 'running' AND host = ?", [host]).fetchall()
        dead = [run_id for run_id, pid in rows if pid is not None and pid != os.getpid() and not _pid_alive(pid)]
        if dead:
            with self.db.conn:
                for run_id in dead:
                    self._update_run(run_id, {"status": "interrupted"})
        return len(dead)

    # -- results ---------------------------------------------------------------
    def record_score(self, run_id: str, score: dict[str, Any]) -> None:
        """Write one item's result, metrics and provenance qrels in one transaction."""
        self.record_scores(run_id, [score])

    def record_scores(self, run_id: str, scores: list[dict[str, Any]]) -> None:
        """Write several items in one transaction (all or none), one statement per table for the batch."""
        from ..golden_set.schema import canonical_item_json

        now = utc_now()
        scores = last_attempts(scores)
        # Rows are built as value tuples in their statements' column order, a pass over the batch per table.
        result_ids = [score.get("result_id") or new_id for score, new_id in zip(scores, new_ulids(len(scores)))]
        item_jsons = [canonical_item_json(score["item"]) for score in scores]  # dumped once: stored, and hashed for the provenance version
        golden = [(run_id, score["item_id"], score.get("source"), score.get("line"), item_json) for score, item_json in zip(scores, item_jsons)]
        results = [_result_row(run_id, score, result_id, now) for score, result_id in zip(scores, result_ids)]
        metrics = [(run_id, score["item_id"], name, float(value)) for score in scores for name, value in (score.get("metrics") or {}).items()]
        feedback = [(run_id, result_id, score["item_id"], score.get("error_class"), score.get("error_evidence"), now)
                    for score, result_id in zip(scores, result_ids)]
        provenance = _provenance_rows(run_id, scores, item_jsons, now)
        concepts = [(run_id, score["item_id"], concept["id"], concept.get("grade", "required"))
                    for score in scores for concept in score["item"].get("concepts") or []]
        repeats = [(run_id, score["item_id"], row["repeat"], row["outcome"], row.get("answer"),
                    json.dumps(row.get("metrics") or {}, sort_keys=True), row.get("failure"), row.get("error"))
                   for score in scores for row in score.get("repeats") or []]
        superseded = [score["item_id"] for score in scores if score.get("supersedes")]
        attempts = [(run_id, score["item_id"], row["attempt"], row["outcome"], row.get("answer"),
                     json.dumps(row.get("metrics") or {}, sort_keys=True), row.get("failure"), row.get("error"),
                     row.get("error_class"), now)
                    for score in scores for row in score.get("attempts") or []]
        with self.db.conn:
            if superseded:  # the item was recorded before in this run (a rerun after its teardown failed): kept as an attempt
                self._keep_as_attempts(run_id, superseded, now)
            # A re-recorded item (a re-run of the same run id) replaces its rows and its metrics.
            self._write_item_rows(run_id, golden, results, metrics, replace=True)
            self._insert_values("item_attempts", _ATTEMPT_COLUMNS, attempts, replace=True)
            self._append_feedback(feedback)
            self._write_qrel_values(provenance)
            self._append_qrels([row for score in scores for row in score.get("qrels_rows") or []], now)
            self._add_cache_rows([row for score in scores for row in score.get("cache_rows") or []], now)
            self._insert_values("golden_concepts", _CONCEPT_COLUMNS, concepts, replace=True)
            self._insert_values("item_repeats", _REPEAT_COLUMNS, repeats, replace=True)

    def _keep_as_attempts(self, run_id: str, item_ids: list[str], now: str) -> None:
        """Move the stored results of ``item_ids`` into item_attempts, each after the attempts it already has
        (inside the caller's transaction): a later attempt at the same item is about to replace them."""
        for item_id in item_ids:
            row = self.db.conn.execute("SELECT outcome, answer, failures, error, error_class FROM results "
                                       "WHERE run_id = ? AND item_id = ?", [run_id, item_id]).fetchone()
            if row is None:
                continue
            outcome, answer, failures, error, error_class = row
            metrics = {metric: value for metric, value in self.db.conn.execute(
                "SELECT metric, value FROM item_metrics WHERE run_id = ? AND item_id = ?", [run_id, item_id])}
            number = self.db.conn.execute("SELECT COALESCE(MAX(attempt), 0) + 1 FROM item_attempts WHERE run_id = ? AND item_id = ?",
                                          [run_id, item_id]).fetchone()[0]
            failure = "; ".join(json.loads(failures or "[]")) or None
            self._insert_values("item_attempts", _ATTEMPT_COLUMNS, [(run_id, item_id, number, outcome, answer,
                                                                     json.dumps(metrics, sort_keys=True), failure, error, error_class, now)])

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

        self._write_item_rows(
            run_id,
            [(run_id, row["item_id"], row.get("source"), row.get("line"),
              row["item"] if isinstance(row["item"], str) else canonical_item_json(row["item"])) for row in golden],
            [_result_row(run_id, row, row.get("result_id"), row.get("recorded_at")) for row in results],
            [(run_id, item_id, metric, float(value)) for item_id, metric, value in metrics], replace=replace)

    def _write_item_rows(self, run_id: str, golden: list[tuple], results: list[tuple], metrics: list[tuple], *,
                         replace: bool) -> None:
        """``_write_items`` from rows already encoded: tuples in ``_GOLDEN_COLUMNS``, ``_RESULT_COLUMNS`` and
        ``_METRIC_COLUMNS`` order (what ``record_scores`` builds directly)."""
        self._insert_values("golden_items", _GOLDEN_COLUMNS, golden, replace=replace)
        self._insert_values("results", _RESULT_COLUMNS, results, replace=replace)
        if replace and results:
            item_ids = json.dumps([row[_RESULT_ITEM_ID] for row in results])
            self.db.conn.execute("DELETE FROM item_metrics WHERE run_id = ? AND item_id IN (SELECT value FROM json_each(?))",
                                 [run_id, item_ids])  # one statement for the batch
        self._insert_values("item_metrics", _METRIC_COLUMNS, metrics)

    def _insert_values(self, table: str, columns: tuple[str, ...], rows: list[tuple], *, replace: bool = False) -> None:
        """Rows of values in ``columns`` order, in one prepared statement (none for no rows)."""
        if rows:
            verb = "INSERT OR REPLACE" if replace else "INSERT"
            self.db.conn.executemany(f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)

    def _insert_many(self, table: str, rows: list[dict[str, Any]], *, replace: bool = False) -> None:
        """``_insert`` for many rows: one prepared statement per set of columns (rows of a table usually share theirs)."""
        by_columns: dict[tuple[str, ...], list[tuple]] = {}
        for row in rows:
            by_columns.setdefault(tuple(row), []).append(tuple(row.values()))
        for columns, values in by_columns.items():
            self._insert_values(table, columns, values, replace=replace)

    def _append_feedback(self, rows: list[tuple]) -> None:
        """Every classified non-correct result joins the append-only review queue. ``rows``: one per result,
        ``(run_id, result_id, item_id, error_class, evidence, created_at)``; each row queued gets a new id."""
        queued = [row for row in rows if row[_FEEDBACK_CLASS] and row[_FEEDBACK_CLASS] != "correct"]
        self._insert_values("eval_feedback", _FEEDBACK_COLUMNS,
                            [(*row, feedback_id) for row, feedback_id in zip(queued, new_ulids(len(queued)))])

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
                self._append_feedback([(run_id, result_id[0] if result_id else None, item_id, error_class, error_evidence, utc_now())])
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
        return self._write_qrel_values([_qrel_values(row, now) for row in rows], copied=copied)

    def _write_qrel_values(self, rows: list[tuple], *, copied: bool = False) -> int:
        """``_write_qrels`` from rows already normalised (``_QREL_COLUMNS`` tuples, as ``_qrel_values`` makes them):
        how recording writes the provenance rows it builds."""
        conn = self.db.conn
        added = 0
        machine: list[tuple] = []  # consecutive machine rows go in one statement
        insert = f"INTO qrels ({', '.join(_QREL_COLUMNS)}) VALUES ({', '.join('?' * len(_QREL_COLUMNS))})"

        def write_machine_rows() -> int:
            count = max(conn.executemany("INSERT OR IGNORE " + insert, machine).rowcount, 0) if machine else 0
            machine.clear()
            return count

        for values in rows:
            if values[_QREL_SOURCE] != "human":
                machine.append(values)
                continue
            added += write_machine_rows()  # the ledger keeps the rows' order
            if copied and conn.execute(
                    "SELECT 1 FROM qrels WHERE source = 'human' AND query_id = ? AND chunk_id IS ? AND doc_id IS ?"
                    " AND grade = ? AND created_by IS ? AND created_at = ? LIMIT 1",
                    [values[index] for index in _HUMAN_QREL_IDENTITY]).fetchone():
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
            "SELECT item_id FROM golden_items UNION SELECT item_id FROM results UNION SELECT query_id FROM qrels ORDER BY 1")]

    def known_units(self, query_id: str) -> set[str]:
        """The units (``chunk:<id>``, ``doc:<id>``) this database knows for one query, in any run or
        workspace: retrieved for its item, named by a citation of its golden item, or judged in the
        ledger. A known chunk makes its document known too."""
        pairs = self.db.conn.execute(
            "SELECT coalesce(json_extract(entry.value, '$.chunk_id'), json_extract(entry.value, '$.chunkId')),"
            "       coalesce(json_extract(entry.value, '$.doc_id'), json_extract(entry.value, '$.docId'))"
            "  FROM results, json_each(results.retrieved) AS entry"
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

    # -- reading ---------------------------------------------------------------
    def list_runs(self, limit: int | None = None, *, workspace: str | None = None, config_hash: str | None = None,
                  labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Newest first; ``workspace=None`` means every workspace, ``labels`` must all match."""
        where, params = [], []
        if workspace is not None:
            where.append("workspace = ?")
            params.append(workspace)
        if config_hash:
            # A prefix, taken literally: % and _ in it are not wildcards. (LIKE: either case of hex digits.)
            where.append("config_hash LIKE ? ESCAPE '\\'")
            params.append(config_hash.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        for key, value in (labels or {}).items():
            where.append("json_extract(labels, '$.' || json_quote(?)) = ?")
            params.extend([key, value])
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY started_at DESC, rowid DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [dict(row) for row in self.db.query(sql, params)]

    def workspaces(self) -> dict[str, int]:
        """workspace -> number of runs, by name."""
        return dict(self.db.conn.execute("SELECT workspace, COUNT(*) FROM runs GROUP BY workspace ORDER BY workspace").fetchall())

    def get_run(self, run_id: str) -> dict[str, Any]:
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        if not rows:
            raise RunNotFound(f"no run with id {run_id} in {self.path}\nHINT: `crucible runs` lists the runs")
        return rows[0]

    def has_run(self, run_id: str, *, workspace: str | None = None) -> bool:
        """Whether the run exists (in ``workspace`` when given; ``None`` means any workspace)."""
        return self.db.conn.execute("SELECT 1 FROM runs WHERE id = ? AND (? IS NULL OR workspace = ?)",
                                    [run_id, workspace, workspace]).fetchone() is not None

    def result_origin(self, result_id: str) -> tuple[str, str] | None:
        """(run id, item id) of the result with this id, or None when there is none."""
        row = self.db.conn.execute("SELECT run_id, item_id FROM results WHERE result_id = ?", [result_id]).fetchone()
        return None if row is None else (row[0], row[1])

    def resolve_run(self, ref: str, *, exclude: str | None = None, workspace: str | None = None) -> str:
        """A run id from 'latest' (newest complete run of the whole golden set, of ``workspace`` when given: a partial
        selection, ``-k`` or ``--lf``, is never 'latest') or a unique id prefix.

        Ids and prefixes resolve in every workspace: the workspace only says which run is 'latest'."""
        if ref == "latest":
            row = self.db.conn.execute(
                "SELECT id FROM runs WHERE status = 'complete' AND selection IS NULL AND id != ? AND (? IS NULL OR workspace = ?)"
                " ORDER BY started_at DESC, rowid DESC LIMIT 1",
                [exclude or "", workspace, workspace],
            ).fetchone()
            if row is None:
                where = f"workspace '{workspace}' of {self.path}" if workspace is not None else str(self.path)
                raise RunNotFound(f"no complete run in {where}\nHINT: run the whole golden set once to make a baseline "
                                  "(a run of a selection, -k, -m or --lf, is never `latest`: name it by its id)"
                                  + (", or pick another workspace (--workspace NAME; `crucible runs --all-workspaces` lists them)"
                                     if workspace is not None else ""))
            return row[0]
        if self.db.conn.execute("SELECT 1 FROM runs WHERE id = ?", [ref]).fetchone():
            return ref
        # LIKE is case-insensitive in SQLite: ULID prefixes work in either case.
        matches = [row[0] for row in self.db.conn.execute("SELECT id FROM runs WHERE id LIKE ? || '%' ORDER BY id", [ref])]
        if not matches:
            raise RunNotFound(f"no run matches '{ref}' in {self.path}\nHINT: `crucible runs` lists the runs")
        if len(matches) > 1:
            raise StoreError(f"'{ref}' matches {len(matches)} runs ({', '.join(matches[:3])}...)\nHINT: give more characters of the run id")
        return matches[0]

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
        for row in rows:
            row["metrics"] = json.loads(row["metrics"] or "{}")
        return rows

    def item_attempts(self, run_id: str, item_id: str | None = None) -> list[dict[str, Any]]:
        """The attempts pytest made at a run's items before the last one (pytest-rerunfailures), metrics decoded,
        with the item's final outcome (``final``); of one item when ``item_id`` is given. Empty without reruns."""
        rows = [dict(row) for row in self.db.query(
            "SELECT a.item_id, a.attempt, a.outcome, a.answer, a.metrics, a.failure, a.error, a.error_class, "
            "r.outcome AS final FROM item_attempts a LEFT JOIN results r ON r.run_id = a.run_id AND r.item_id = a.item_id "
            "WHERE a.run_id = ? AND (? IS NULL OR a.item_id = ?) ORDER BY a.item_id, a.attempt", [run_id, item_id, item_id])]
        for row in rows:
            row["metrics"] = json.loads(row["metrics"] or "{}")
        return rows

    def golden_items(self, run_id: str) -> list[dict[str, Any]]:
        return [json.loads(row[0]) for row in self.db.conn.execute("SELECT item FROM golden_items WHERE run_id = ? ORDER BY item_id", [run_id])]

    def results(self, run_id: str, *, decoded: bool = False) -> list[dict[str, Any]]:
        """The run's result rows in recording order; ``decoded``: JSON columns as Python values (the export's shape)."""
        rows = [dict(row) for row in self.db.query("SELECT * FROM results WHERE run_id = ? ORDER BY rowid", [run_id])]
        if decoded:
            for row in rows:
                for column in _JSON_RESULT_COLUMNS:
                    row[column] = json.loads(row[column])
                for column in _JSON_OPTIONAL_COLUMNS:
                    row[column] = json.loads(row[column]) if row.get(column) else None
        return rows

    # -- comparison input, export and import ---------------------------------------------
    def count_judge_failed(self, run_id: str) -> int:
        """Items of the run whose judging failed after retries."""
        return self.db.conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ? AND judge_errors != '[]'", [run_id]).fetchone()[0]

    def unread_keys(self, run_id: str) -> list[str]:
        """The changed config keys the pipeline never read in this run (empty for runs stored before schema 8)."""
        row = self.db.conn.execute("SELECT unread_keys FROM runs WHERE id = ?", [run_id]).fetchone()
        return json.loads(row[0]) if row and row[0] else []

    def item_kinds(self, run_id: str) -> dict[str, str]:
        """item id -> the kind of the golden item as it ran (retrieval when the item does not say)."""
        return {item_id: kind or "retrieval" for item_id, kind in self.db.conn.execute(
            "SELECT item_id, json_extract(item, '$.kind') FROM golden_items WHERE run_id = ?", [run_id])}

    def result_rows(self, run_id: str, *, rankings: bool = False) -> list[dict[str, Any]]:
        """Every result's item id, confidence, CRAG grade and failures (pipeline error, judge errors):
        what the run model reads besides the metrics, by item id; ``rankings``: and what it retrieved (decoded),
        in recording order."""
        columns = ["item_id", "confidence", "crag_grade", "error", "judge_errors", *(["retrieved"] if rankings else [])]
        rows = [dict(zip(columns, row)) for row in self.db.conn.execute(
            f"SELECT {', '.join(columns)} FROM results WHERE run_id = ? ORDER BY {'rowid' if rankings else 'item_id'}",
            [run_id]).fetchall()]
        for row in rows:
            errors = row["judge_errors"]
            row["judge_errors"] = json.loads(errors) if errors and errors != "[]" else []  # the common case: nothing to decode
            if rankings:
                row["retrieved"] = json.loads(row["retrieved"] or "[]")
        return rows

    def export_run(self, run_id: str) -> dict[str, Any]:
        """One run as a self-contained JSON document (commit it to use as a CI baseline)."""
        run = self.get_run(run_id)
        results = self.results(run_id, decoded=True)
        golden = [
            {"item_id": item_id, "source": source, "line": line, "item": json.loads(item)}
            for item_id, source, line, item in self.db.conn.execute(
                "SELECT item_id, source, line, item FROM golden_items WHERE run_id = ? ORDER BY item_id", [run_id])
        ]
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "run": run,
            "goldenItems": golden,
            "results": results,
            "itemMetrics": self.item_metrics(run_id),
        }

    def import_run(self, document: dict[str, Any], source: str = "<export>") -> tuple[str, bool]:
        """Add an exported run; returns (run id, whether it was new). Same id, same data: no-op."""
        document = validate_export(document, source)
        run = document["run"]
        run_id = run["id"]
        existing = self.db.conn.execute("SELECT config_hash, started_at FROM runs WHERE id = ?", [run_id]).fetchone()
        if existing is not None:
            if tuple(existing) == (run["config_hash"], run["started_at"]):
                return run_id, False
            raise StoreError(f"{source}: run {run_id} already exists in {self.path} with different content\nHINT: import into another --db")
        try:
            with self.db.conn:
                # Exports older than schema 6 carry no workspace or labels: the columns' defaults apply.
                self._insert("runs", {key: run[key] for key in _RUN_COLUMNS if run.get(key) is not None})
                self._write_items(run_id, golden=document["goldenItems"], results=document["results"],
                                  metrics=[(item_id, metric, value) for metric, values in document["itemMetrics"].items()
                                           for item_id, value in values.items()])
        except (sqlite3.Error, OverflowError) as exc:  # validate_export checks the columns; this is the last line of defence
            raise StoreError(f"{source}: cannot import run {run_id}: {exc}; nothing was written\n"
                             "HINT: make the file with `crucible export RUN -o FILE`") from None
        return run_id, True


EXPORT_FORMAT = "pytest-crucible-run"
EXPORT_VERSION = 1
_RUN_COLUMNS = ("id", "started_at", "finished_at", "status", "config_hash", "config_path", "params", "resolved", "mode",
                "outcome_mode", "golden_hash", "n_items", "git_commit", "pytest_args", "judge_model", "judge_prompt_version",
                "host", "pid", "judge_label", "judge_stats", "cost_estimate_usd", "cost_usd", "input_tokens", "output_tokens",
                "workspace", "labels", "kinds", "unread_keys", "n_scored", "n_errored", "n_skipped", "custom_metrics", "repeats",
                "embedder", "eval_k", "selection")
def _provenance_rows(run_id: str, scores: list[dict[str, Any]], item_jsons: list[str], now: str) -> list[tuple]:
    """The qrels the golden items' citations are (``_QREL_COLUMNS`` tuples): free, deterministic judgments
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
            rows.extend([(item_id, citation.get("chunkId"), citation.get("docId"), citation_grade(citation.get("mode")),
                          "provenance", version, None, None, None, run_id, now) for citation in citations])
    return rows


def _qrel_values(row: dict[str, Any], now: str) -> tuple:
    """A qrels row as the ledger stores it, in ``_QREL_COLUMNS`` order (no judge model is '', no time is now)."""
    return (row["query_id"], row.get("chunk_id"), row.get("doc_id"), int(row["grade"]), row["source"], row.get("judge_model") or "",
            row.get("prompt_version"), row.get("created_by"), row.get("note"), row.get("run_id"), row.get("created_at") or now)


def _json_list(value: Any) -> str:
    return json.dumps(value) if value else "[]"  # most are empty: their text without a call to the encoder


def _json_or_null(value: Any) -> str | None:
    return json.dumps(value) if value else None


def _result_row(run_id: str, row: dict[str, Any], result_id: str | None, recorded_at: str | None) -> tuple:
    """A result in its decoded shape as the results table stores it, in ``_RESULT_COLUMNS`` order: a list
    column '[]' when empty, an optional JSON column NULL when empty, a flag 0 or 1, an absent outcome ""."""
    get = row.get
    return (run_id, row["item_id"], row["question"], get("answer"), _json_list(get("retrieved")), _json_list(get("citations")),
            get("confidence"), 1 if get("abstained") else 0, 1 if get("blocked") else 0, _json_list(get("detected_concepts")),
            get("outcome") or "", _json_list(get("failures")), get("error"), get("latency_ms"), recorded_at,
            _json_list(get("judge_errors")), _json_or_null(get("verdicts")), _json_or_null(get("pool")), _json_or_null(get("assertions")),
            result_id, get("error_class"), get("error_evidence"), get("crag_grade"), get("blocked_layer"), _json_list(get("metric_errors")))


# Column orders of the value tuples the write path builds (each matches its builder above).
_RESULT_COLUMNS = ("run_id", "item_id", "question", "answer", "retrieved", "citations", "confidence", "abstained", "blocked",
                   "detected_concepts", "outcome", "failures", "error", "latency_ms", "recorded_at", "judge_errors", "verdicts",
                   "pool", "assertions", "result_id", "error_class", "error_evidence", "crag_grade", "blocked_layer", "metric_errors")
_RESULT_ITEM_ID = _RESULT_COLUMNS.index("item_id")
_GOLDEN_COLUMNS = ("run_id", "item_id", "source", "line", "item")
_METRIC_COLUMNS = ("run_id", "item_id", "metric", "value")
_FEEDBACK_COLUMNS = ("run_id", "result_id", "item_id", "error_class", "evidence", "created_at", "id")  # the id is added last
_FEEDBACK_CLASS = _FEEDBACK_COLUMNS.index("error_class")
_CONCEPT_COLUMNS = ("run_id", "item_id", "concept_id", "grade")
_REPEAT_COLUMNS = ("run_id", "item_id", "repeat", "outcome", "answer", "metrics", "failure", "error")
_ATTEMPT_COLUMNS = ("run_id", "item_id", "attempt", "outcome", "answer", "metrics", "failure", "error", "error_class", "recorded_at")


def attempt_of(score: dict[str, Any], number: int) -> dict[str, Any]:
    """What item_attempts keeps of one earlier attempt at an item (``number`` counts from 1)."""
    failures = score.get("failures") or []
    return {"attempt": number, "outcome": score.get("outcome") or "unknown", "answer": score.get("answer"),
            "metrics": dict(score.get("metrics") or {}), "failure": "; ".join(failures) or None, "error": score.get("error"),
            "error_class": score.get("error_class")}


def last_attempts(scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One score per item: an item scored twice in one batch (pytest ran it again) keeps its last score, and the
    earlier ones become its attempts, numbered after those it already carries."""
    if len({score["item_id"] for score in scores}) == len(scores):
        return scores  # the usual batch: nothing to fold
    last: dict[str, dict[str, Any]] = {}
    for score in scores:
        earlier = last.pop(score["item_id"], None)
        if earlier is not None:
            before = list(earlier.get("attempts") or [])
            before.append(attempt_of(earlier, len(before) + 1))
            after = [dict(row, attempt=len(before) + index + 1) for index, row in enumerate(score.get("attempts") or [])]
            score = {**score, "attempts": before + after, "supersedes": earlier.get("supersedes", False)}
        last[score["item_id"]] = score
    return list(last.values())
_QREL_COLUMNS = ("query_id", "chunk_id", "doc_id", "grade", "source", "judge_model", "prompt_version", "created_by", "note",
                 "run_id", "created_at")
_QREL_SOURCE = _QREL_COLUMNS.index("source")
# What makes a copied human judgment the same one again (``_write_qrels``).
_HUMAN_QREL_IDENTITY = tuple(_QREL_COLUMNS.index(column) for column in ("query_id", "chunk_id", "doc_id", "grade", "created_by", "created_at"))
_JSON_RESULT_COLUMNS = ("retrieved", "citations", "detected_concepts", "failures", "judge_errors", "metric_errors")  # lists, '[]' when empty
_JSON_OPTIONAL_COLUMNS = ("verdicts", "pool", "assertions")  # JSON, NULL when empty


# What each exported column may hold (None/absent is allowed unless the column is required).
_TEXT, _INT, _NUMBER, _FLAG, _LIST, _JSON_TEXT = "a string", "an integer", "a finite number", "true/false or 0/1", "a list", "JSON text"
_RUN_TYPES = {
    **dict.fromkeys(("finished_at", "config_path", "golden_hash", "git_commit", "judge_model", "judge_prompt_version", "host",
                     "judge_label", "workspace", "embedder"), _TEXT),
    **dict.fromkeys(("params", "resolved", "pytest_args", "judge_stats", "labels", "kinds", "unread_keys", "custom_metrics",
                     "selection"), _JSON_TEXT),
    **dict.fromkeys(("n_items", "pid", "input_tokens", "output_tokens", "n_scored", "n_errored", "n_skipped", "repeats", "eval_k"), _INT),
    **dict.fromkeys(("cost_estimate_usd", "cost_usd"), _NUMBER),
}
_RESULT_TYPES = {
    **dict.fromkeys(("answer", "error", "result_id", "error_class", "error_evidence", "blocked_layer"), _TEXT),
    **dict.fromkeys(_JSON_RESULT_COLUMNS, _LIST),
    **dict.fromkeys(("confidence", "latency_ms"), _NUMBER),
    **dict.fromkeys(("abstained", "blocked"), _FLAG),
}
_RUN_CHOICES = {"status": ("running", "complete", "incomplete", "interrupted", "failed"), "mode": ("system", "component")}


def _fits(value: Any, kind: str) -> bool:
    import math

    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    if kind == _NUMBER:  # SQLite binds a Python int only within 64 bits
        if isinstance(value, int) and not isinstance(value, bool):
            return abs(value) < 2**63
        return isinstance(value, float) and math.isfinite(value)
    if kind == _FLAG:
        return isinstance(value, bool) or value in (0, 1)
    if kind == _LIST:
        return isinstance(value, list)
    if kind == _JSON_TEXT:
        if not isinstance(value, str):
            return False
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            return False
        return True
    raise AssertionError(kind)


def validate_export(document: Any, source: str) -> dict[str, Any]:
    """Check an exported run's shape and every value it puts in a column; the error names the file and the field."""
    from ..golden_set.schema import field_path
    from ..json_input import shown, value_problem

    def bad(field: str, expected: str, *, got: Any = None, show: bool = False) -> StoreError:
        also = f", got {json.dumps(got, default=str)[:60]}" if show else ""
        return StoreError(f"{source}: field '{shown(field)}': expected {expected}{also}\n"
                          "HINT: make the file with `crucible export RUN -o FILE`")

    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise bad("format", f"'{EXPORT_FORMAT}' (this is not an exported crucible run)")
    if document.get("version") != EXPORT_VERSION:
        raise bad("version", f"{EXPORT_VERSION}, got {json.dumps(document.get('version'), default=str)[:40]}")
    unusable = value_problem(document, max_values=None)
    if unusable is not None:
        loc, problem = unusable
        raise StoreError(f"{source}: field '{shown(field_path(loc))}': {problem}\nHINT: make the file with `crucible export RUN -o FILE`")
    run = document.get("run")
    if not isinstance(run, dict):
        raise bad("run", "an object")
    for key in ("id", "started_at", "config_hash", "resolved", "params", "mode", "outcome_mode", "status"):
        if not isinstance(run.get(key), str):
            raise bad(f"run.{key}", "a string")
    for key, choices in _RUN_CHOICES.items():
        if run[key] not in choices:
            raise bad(f"run.{key}", " or ".join(choices), got=run[key], show=True)
    for key, kind in _RUN_TYPES.items():
        if run.get(key) is not None and not _fits(run[key], kind):
            raise bad(f"run.{key}", kind, got=run[key], show=True)
    if not isinstance(json.loads(run["resolved"]), dict):
        raise bad("run.resolved", "the JSON text of an object")
    for key, kind in (("goldenItems", list), ("results", list), ("itemMetrics", dict)):
        if not isinstance(document.get(key), kind):
            raise bad(key, "a list" if kind is list else "an object")
    seen: set[str] = set()
    for index, golden in enumerate(document["goldenItems"]):
        if not isinstance(golden, dict) or not isinstance(golden.get("item_id"), str) or not isinstance(golden.get("item"), dict):
            raise bad(f"goldenItems[{index}]", "an object with item_id (a string) and item (an object)")
        if golden["item_id"] in seen:
            raise bad(f"goldenItems[{index}].item_id", "an item id used once", got=golden["item_id"], show=True)
        seen.add(golden["item_id"])
        if golden["item"].get("id", golden["item_id"]) != golden["item_id"]:  # the pairing and the kinds read item.id
            raise bad(f"goldenItems[{index}].item.id", "the same id as item_id", got=golden["item"]["id"], show=True)
        for key, kind in (("source", _TEXT), ("line", _INT)):
            if golden.get(key) is not None and not _fits(golden[key], kind):
                raise bad(f"goldenItems[{index}].{key}", kind, got=golden[key], show=True)
    seen, result_ids = set(), set()
    for index, row in enumerate(document["results"]):
        if not isinstance(row, dict) or not isinstance(row.get("item_id"), str) or not isinstance(row.get("question"), str):
            raise bad(f"results[{index}]", "an object with item_id and question")
        if row["item_id"] in seen:
            raise bad(f"results[{index}].item_id", "an item id used once", got=row["item_id"], show=True)
        seen.add(row["item_id"])
        for key in ("outcome", "recorded_at"):
            if not isinstance(row.get(key), str):
                raise bad(f"results[{index}].{key}", "a string", got=row.get(key), show=True)
        for key, kind in _RESULT_TYPES.items():
            if row.get(key) is not None and not _fits(row[key], kind):
                raise bad(f"results[{index}].{key}", kind, got=row[key], show=True)
        if not all(isinstance(chunk, dict) for chunk in row.get("retrieved") or []):
            raise bad(f"results[{index}].retrieved", "a list of objects")
        if row.get("crag_grade") is not None and row["crag_grade"] not in ("perfect", "acceptable", "missing", "incorrect"):
            raise bad(f"results[{index}].crag_grade", "perfect, acceptable, missing or incorrect", got=row["crag_grade"], show=True)
        if row.get("result_id") is not None:
            if row["result_id"] in result_ids:
                raise bad(f"results[{index}].result_id", "a result id used once", got=row["result_id"], show=True)
            result_ids.add(row["result_id"])
    for metric, values in document["itemMetrics"].items():
        if not isinstance(values, dict) or not all(_fits(v, _NUMBER) for v in values.values()):
            raise bad(f"itemMetrics.{metric}", "an object of item id -> finite number")
    return document


def read_only_rows(db_path: str | Path, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """Query a crucible database without writing to it (xdist workers read, only the controller writes).

    A missing file, or an older file without the table, reads as no rows.
    """
    db_path = locate(db_path)
    if not isinstance(db_path, Path):
        try:
            store = Store.open_read_only(db_path)
        except StoreError:
            return []
        try:
            return list(store.db.query(sql, params))
        except sqlite3.Error:
            return []
        finally:
            store.close()
    if not db_path.exists():
        return []
    try:
        conn = sqlite3.connect(f"{db_path.absolute().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error:
        return []
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, list(params))]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def check_writable(path: str | Path) -> None:
    """Raise StoreError (the path, the cause, a HINT) when the database at ``path`` could not be written: the
    path is a directory or lies under a regular file, or the file or its folder cannot be written (SQLite
    writes its -wal and -shm files beside the database). Creates nothing: the checks open the file for
    writing without changing it, and an anonymous temporary file in the folder."""
    import tempfile

    if not is_file(path):
        return  # PostgreSQL: opening it (check_before_writing) is the check
    path = Path(path).absolute()

    def refuse(cause: str) -> StoreError:
        return StoreError(f"{path}: cannot write the crucible database: {cause}\n"
                          "HINT: make it writable, or point --crucible-db (crucible: --db) at a file in a writable folder")

    if path.is_dir():
        raise refuse("it is a directory, not a file")
    if path.exists():
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            try:
                if file.exists():
                    os.close(os.open(file, os.O_WRONLY))
            except OSError as exc:
                raise refuse(f"{'the file' if file == path else file.name + ' beside it'} is not writable ({exc.strerror})") from None
        folder = path.parent
    else:
        folder = next(parent for parent in path.parents if parent.exists())  # the first folder Store.open would not create
        if not folder.is_dir():
            raise refuse(f"{folder} is a file, not a folder")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise refuse(f"its folder {folder} is not writable ({exc.strerror})") from None


def check_before_writing(path: str | Path) -> None:
    """What a session asks before its first test: the database at ``path`` can be written, and SQLite reads
    every page of it when it exists (``Store.open(verify=True)``; an empty file is a new database).
    Raises StoreError with the message the CLI gives for the same file."""
    check_writable(path)
    if not is_file(path) or Path(path).exists():
        Store.open(path, verify=True).close()


def run_id_taken(db_path: str | Path, run_id: str) -> str | None:
    """Why the database (if it exists yet) cannot take a run with this fixed id, or None; never writes."""
    rows = read_only_rows(db_path, "SELECT status, host, pid, started_at FROM runs WHERE id = ?", [run_id])
    return _run_id_taken_message(locate(db_path), run_id, rows[0]) if rows else None


def _run_id_taken_message(path: Path, run_id: str, row: Any) -> str:
    """One message for a fixed run id the database holds: a finished run, or a session writing it now."""
    if row is None:
        return f"--crucible-run-id={run_id}: {path} refused the run id"
    status, host, pid, started = (row[key] for key in ("status", "host", "pid", "started_at")) if isinstance(row, dict) else row
    if status == "running" and host == socket.gethostname() and pid is not None and _pid_alive(pid):
        who = f"another session (pid {pid}, started {started}) is writing a run with this id right now"
    elif status == "running":
        who = f"a session on {host} (pid {pid}, started {started}) is writing a run with this id"
    else:
        who = f"it already has a run with this id ({status}, started {started})"
    return (f"--crucible-run-id={run_id}: {path}: {who}\n"
            "HINT: give each session its own id, or its own database (one per shard; join them with "
            "`crucible merge SHARD.db ... -o RUN.db`)")


def read_judgment_ledger(db_path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """query id -> its human and llm judgments in ledger order (read-only: xdist workers call it too)."""
    return _by_query(read_only_rows(db_path, "SELECT * FROM qrels WHERE source IN ('human', 'llm') ORDER BY id"))


def _by_query(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Ledger rows grouped by query id, each group in the rows' order."""
    ledger: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        ledger.setdefault(row["query_id"], []).append(row)
    return ledger


def read_export(path: str | Path) -> dict[str, Any]:
    from ..json_input import json_problem

    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the exported run: {exc.strerror}\nHINT: make one with `crucible export RUN -o FILE`") from None
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})\nHINT: make the file with `crucible export RUN -o FILE`") from None
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"{path}: not valid JSON ({json_problem(exc)})\nHINT: make the file with `crucible export RUN -o FILE`") from None
    return validate_export(document, str(path))
