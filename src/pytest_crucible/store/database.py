"""The store's connection to its database: the errors, where a database lives (a SQLite file or a
PostgreSQL database, ``locate``), opening and migrating it, the -wal checkpoints, the insert helpers every
table's writer shares, and the read-only path xdist workers take (``read_only_rows``).

Only one process writes during a pytest session (the controller); every write is a short transaction,
so an interrupted session leaves earlier runs intact. This module never imports pytest.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from .files import create_empty
from .schema import LATE_COLUMNS, MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from .postgres import DatabaseURL

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
    return DatabaseURL(str(database)) if is_database_url(database) else Path(database)


def is_file(database: Any) -> TypeGuard[str | Path]:
    """Whether ``database`` names a SQLite file (else a PostgreSQL database: a URL, or its text)."""
    return isinstance(locate(database), Path)


def _scalar(cursor: Any) -> Any:
    """The one value of a query that always returns one row."""
    return cursor.fetchone()[0]


# The Store, or a part of it: the opening classmethods return an instance of the class they are called on.
S = TypeVar("S", bound="Connection")


class Connection:
    """The part of ``Store`` every other part shares: the open database (``db``), where it lives (``path``),
    opening, migrating and closing it, and the insert helpers (``store/runs.py``, ``results.py``, ``qrels.py``
    and ``export.py`` hold the rest)."""

    def __init__(self, db: Database, path: Path | DatabaseURL):
        self.db = db
        self.path = path  # str() of a PostgreSQL URL never shows its password
        # Which database this connection writes, as found when it was opened (see ``replaced``): the file's
        # device and inode, or the PostgreSQL server's system identifier, the database's name and oid.
        self.identity: tuple | None = _file_identity(path) if isinstance(path, Path) else getattr(db.conn, "identity", None)

    if TYPE_CHECKING:  # RunsMixin's (store/runs.py): opening a database for writing marks dead sessions' runs
        def mark_dead_runs_interrupted(self) -> int: ...

    # -- opening ---------------------------------------------------------------
    @classmethod
    def open(cls: type[S], path: str | Path | DatabaseURL, *, create: bool = True, verify: bool = False) -> S:
        """Open (and migrate) the database; ``create``: a missing file is a new database. ``verify``: read
        every page first (``PRAGMA quick_check``, about 0.15 s per 100 MB), so damage that opening alone
        does not reach is refused up front rather than found by a write half way through a run."""
        where = locate(path)
        if not isinstance(where, Path):
            return cls._open_postgres(where)
        path = where
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
    def _open_postgres(cls: type[S], url: DatabaseURL, *, read_only: bool = False) -> S:
        """Open a PostgreSQL database, creating the schema in an empty one (one session at a time: an
        advisory lock serialises processes that meet an empty database at once)."""
        from .postgres import connect
        from .postgres_schema import POSTGRES_MIGRATES_FROM, migratable, migration_statements, schema_statements

        conn = connect(url, read_only=read_only)
        try:
            store = cls(Database(conn), url)
            with conn:
                if not read_only:
                    conn.execute("SELECT pg_advisory_xact_lock(7310437)")  # any constant: crucible's schema lock
                exists = _scalar(conn.execute("SELECT to_regclass('crucible_schema') IS NOT NULL"))
                if not exists and read_only:
                    raise StoreError(f"{url}: no crucible database here\nHINT: run the golden set once first, or point at the database")
                if not exists:
                    conn.execute_script([*schema_statements(), "CREATE TABLE crucible_schema (version INTEGER NOT NULL)",
                                         f"INSERT INTO crucible_schema VALUES ({SCHEMA_VERSION})"])
                version = _scalar(conn.execute("SELECT version FROM crucible_schema"))
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
    def _connect(cls: type[S], path: Path, verify: bool) -> S:
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

    def replaced(self) -> str | None:
        """Why the database ``path`` names is no longer the one this connection opened, or None while it is. A
        SQLite file deleted or replaced while open (a cleanup step, a cache restore) takes every later write with
        it, into a file no path names: the path's device and inode are compared with the file's. A PostgreSQL
        connection that reconnected compares the server's system identifier, the database's name and oid (a
        database dropped and created again, another server at the address: ``postgres.PgConnection``)."""
        if not isinstance(self.path, Path):
            return getattr(self.db.conn, "moved", None)
        now = _file_identity(self.path)
        if self.identity is None or now == self.identity:
            return None
        what = "it was deleted" if now is None else "another file is there now"
        return f"the database file was deleted or replaced during the run: {self.path} ({what})"

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
        from .contents import register_sqlite  # schema 19 hashes the stored texts in SQL (content_hash)
        register_sqlite(conn)
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
    def open_read_only(cls: type[S], path: str | Path | DatabaseURL) -> S:
        """Open an existing database for reading only (SQLite ``mode=ro``): nothing is migrated,
        no run is marked interrupted, and any write fails. The schema must be this version's."""
        where = locate(path)
        if not isinstance(where, Path):
            return cls._open_postgres(where, read_only=True)
        path = where
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

    def _insert_values(self, table: str, columns: tuple[str, ...], rows: Sequence[tuple], *, replace: bool = False) -> None:
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


def _file_identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (None: there is none)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def read_only_rows(db_path: str | Path | DatabaseURL, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """Query a crucible database without writing to it (xdist workers read, only the controller writes).

    A missing file, or an older file without the table, reads as no rows.
    """
    where = locate(db_path)
    if not isinstance(where, Path):
        try:
            store = Connection.open_read_only(where)
        except StoreError:
            return []
        try:
            return list(store.db.query(sql, params))
        except sqlite3.Error:
            return []
        finally:
            store.close()
    if not where.exists():
        return []
    try:
        conn = sqlite3.connect(f"{where.absolute().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error:
        return []
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, list(params))]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
