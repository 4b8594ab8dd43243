"""PostgreSQL behind the same Store: one team's results in one database.

The store's SQL is written once, in SQLite's dialect. This module is the one place that says how it reads
in PostgreSQL:

- :func:`translate` rewrites a statement: ``?`` placeholders, ``INSERT OR IGNORE`` / ``INSERT OR REPLACE``
  (``ON CONFLICT``), the JSON functions, ``LIKE`` (case-insensitive in SQLite), ``ifnull``;
- :class:`PgConnection` gives a psycopg connection the shape of the ``sqlite3`` connection the store uses
  (``execute``, ``executemany``, one transaction per ``with``), and raises the ``sqlite3`` exception classes
  the store already handles (a unique violation is an ``IntegrityError`` on either backend);
- ``postgres_schema.py`` builds the same schema (``schema_statements``): ``schema.MIGRATIONS`` run in an
  in-memory SQLite database, read back and translated, with the ledgers' triggers written in PL/pgSQL. A
  PostgreSQL database starts at the current schema version; one from version ``POSTGRES_MIGRATES_FROM`` on
  is moved forward by the same migrations as a file (``migration_statements``).

``runs`` and ``results`` get a hidden ``rowid`` column (an identity): the store orders by insertion, as
SQLite's rowid does. Reads never show it.

psycopg (3) is an optional dependency: ``pip install 'pytest-crucible[postgres]'``.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

URL_SCHEMES = ("postgresql://", "postgres://")
#: Names the database when no option does (the plugin's --crucible-db, the CLI's --db): a CI secret.
DB_ENV_VAR = "CRUCIBLE_DB"
#: Tables the store reads in insertion order (``ORDER BY rowid``): they get an identity column of that name.
ROWID_TABLES = ("runs", "results")
#: The primary key of each table an ``INSERT OR REPLACE`` writes (its conflict target in PostgreSQL).
PRIMARY_KEYS = {
    "runs": ("id",), "results": ("run_id", "item_id"), "item_metrics": ("run_id", "item_id", "metric"),
    "golden_item_refs": ("run_id", "item_id"), "contents": ("hash",), "golden_concepts": ("run_id", "item_id", "concept_id"),
    "item_repeats": ("run_id", "item_id", "repeat"), "item_attempts": ("run_id", "item_id", "attempt"), "judge_cache": ("key",), "api_keys": ("id",),
    "judge_calibrations": ("id",), "golden_drafts": ("id",),
}
INSTALL_HINT = "pip install 'pytest-crucible[postgres]' (psycopg 3)"


def is_database_url(text: Any) -> bool:
    return isinstance(text, str) and text.startswith(URL_SCHEMES)


@dataclass(frozen=True)
class DatabaseURL:
    """A PostgreSQL database named by URL. ``str()`` never shows the password: it is what every message,
    log line and stored field holds."""

    url: str

    def __str__(self) -> str:
        return redact_url(self.url)


def redact_url(url: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db`` (no password: unchanged)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"//([^/@:]*):[^/@]*@", r"//\1:***@", url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_urls(text: str) -> str:
    """Every database URL in ``text`` without its password (a command line, an error message)."""
    return re.sub(r"postgres(?:ql)?://[^\s'\"]+", lambda match: redact_url(match.group()), text)


# -- statements ------------------------------------------------------------------------------------------
_JSON_PATH = re.compile(r"json_extract\(([\w.]+), '\$\.(\w+)'\)")
# Two paths or more: SQLite returns one JSON array of their values (``store.aggregates.golden_fields``).
_JSON_PATHS = re.compile(r"json_extract\(([\w.]+)((?:, '\$\.\w+'){2,})\)")
_JSON_DYNAMIC = re.compile(r"json_extract\((\w+), '\$\.' \|\| json_quote\(\?\)\)")
_JSON_EACH_PATH = re.compile(r"json_each\(([\w.]+), '\$\.(\w+)'\) AS (\w+)")
_JSON_EACH = re.compile(r"json_each\(([\w.]+)\) AS (\w+)")
_JSON_EACH_PARAM = re.compile(r"FROM json_each\(\?\)")
_JSON_TYPE = re.compile(r"\b(\w+)\.type =")
_REPLACE = re.compile(r"^\s*INSERT OR REPLACE INTO (\w+) \(([^)]*)\)", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """One SQLite statement of the store as PostgreSQL reads it (psycopg's ``%s`` placeholders)."""
    suffix = ""
    replace = _REPLACE.match(sql)
    if replace:
        table, columns = replace.group(1), [c.strip() for c in replace.group(2).split(",")]
        keys = PRIMARY_KEYS[table]
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in keys)
        suffix = f" ON CONFLICT ({', '.join(keys)}) " + (f"DO UPDATE SET {updates}" if updates else "DO NOTHING")
        sql = re.sub(r"INSERT OR REPLACE INTO", "INSERT INTO", sql, count=1, flags=re.IGNORECASE)
    elif re.match(r"^\s*INSERT OR IGNORE INTO", sql, re.IGNORECASE):
        suffix = " ON CONFLICT DO NOTHING"
        sql = re.sub(r"INSERT OR IGNORE INTO", "INSERT INTO", sql, count=1, flags=re.IGNORECASE)
    sql = _JSON_DYNAMIC.sub(r"((\1)::jsonb ->> ?)", sql)
    sql = _JSON_EACH_PATH.sub(r"jsonb_array_elements((\1)::jsonb -> '\2') AS \3(value)", sql)
    sql = _JSON_EACH.sub(r"jsonb_array_elements((\1)::jsonb) AS \2(value)", sql)
    sql = _JSON_EACH_PARAM.sub("FROM jsonb_array_elements_text(?::jsonb) AS listed(value)", sql)
    sql = _JSON_PATHS.sub(_json_array, sql)
    sql = _JSON_PATH.sub(r"((\1)::jsonb ->> '\2')", sql)
    sql = _JSON_TYPE.sub(r"jsonb_typeof(\1.value) =", sql)  # json_each's type column
    sql = re.sub(r"\bifnull\(", "coalesce(", sql, flags=re.IGNORECASE)
    sql = re.sub(r" LIKE ", " ILIKE ", sql)
    return _placeholders(sql.rstrip().rstrip(";") + suffix)


def _json_array(match: re.Match) -> str:
    """``json_extract(x, '$.a', '$.b')`` -> the JSON array of both values, as text (a missing one: null)."""
    column, keys = match.group(1), re.findall(r"'\$\.(\w+)'", match.group(2))
    return "jsonb_build_array(" + ", ".join(f"({column})::jsonb -> '{key}'" for key in keys) + ")::text"


_CAMEL = re.compile(r'(?<![\w".])([a-z]+[A-Z]\w*)\b')


def _quote_names(sql: str, placeholders: bool = False) -> str:
    """Outside string literals: a camelCase name (a view's metric column, ``ndcgAt10``) quoted, since
    PostgreSQL folds unquoted names to lower case; with ``placeholders``, ``?`` -> ``%s`` and every ``%``
    doubled (psycopg reads ``%`` everywhere, literals included)."""
    parts = re.split(r"('(?:[^']|'')*')", sql)  # odd parts are string literals
    out = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            part = _CAMEL.sub(r'"\1"', part.replace("?", "\0") if placeholders else part)
        out.append(part.replace("%", "%%").replace("\0", "%s") if placeholders else part)
    return "".join(out)


def _placeholders(sql: str) -> str:
    return _quote_names(sql, placeholders=True)


def _value(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value  # booleans are INTEGER columns, as in SQLite


def _params(params: Iterable[Any]) -> list[Any]:
    return [_value(value) for value in params]


# -- the connection --------------------------------------------------------------------------------------
def _mapped(exc: Exception) -> sqlite3.Error:
    """The sqlite3 exception the store already handles for a psycopg error (its message kept, URLs redacted)."""
    import psycopg

    message = redact_urls(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(message)
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.QueryCanceled, psycopg.errors.ReadOnlySqlTransaction)):
        return sqlite3.OperationalError(message)
    return sqlite3.DatabaseError(message)


class PgCursor:
    """The rows of one statement, read as the store reads a sqlite3 cursor."""

    def __init__(self, cursor: Any):
        self._cursor = cursor
        self.rowcount = cursor.rowcount
        self._hidden = [i for i, column in enumerate(cursor.description or ()) if column.name == "rowid"]
        self.description = ([(column.name,) for i, column in enumerate(cursor.description) if i not in self._hidden]
                            if cursor.description else None)

    def _row(self, row: Sequence[Any] | None) -> tuple | None:
        return None if row is None else self._values(row)

    def _values(self, row: Sequence[Any]) -> tuple:
        if not self._hidden:
            return tuple(row)
        return tuple(value for i, value in enumerate(row) if i not in self._hidden)

    def fetchone(self) -> tuple | None:
        return self._row(self._cursor.fetchone()) if self.description else None

    def fetchall(self) -> list[tuple]:
        return [self._values(row) for row in self._cursor.fetchall()] if self.description else []

    def fetchmany(self, size: int) -> list[tuple]:
        return [self._values(row) for row in self._cursor.fetchmany(size)] if self.description else []

    def __iter__(self):
        return iter(self.fetchall())


#: Waits (seconds) between attempts to reach a server that went away, before a statement gives up: about
#: 7 s in all, enough for a restart or a failover; once they are spent, the next statement tries once.
RECONNECT_WAITS = (0.2, 0.5, 1.0, 2.0, 3.5)


class PgConnection:
    """A psycopg connection with the sqlite3 connection's shape: statements outside a ``with`` commit on
    their own; ``with conn:`` is one transaction (nested: a savepoint).

    A server that goes away is reached again with backoff (RECONNECT_WAITS) before a statement or a
    transaction begins; a transaction it interrupts fails whole (its rows were never committed), and
    the caller reports it as it reports a full disk."""

    dialect = "postgres"

    def __init__(self, raw: Any, url: DatabaseURL, *, read_only: bool = False):
        self.raw, self.url, self.read_only = raw, url, read_only
        self._transactions: list[Any] = []
        self._gave_up = False  # the last reconnection failed: try once, not with the whole backoff
        self.identity = database_identity(raw)  # which database this is (see Connection.replaced)
        self.moved: str | None = None  # set when a reconnection reached another database: nothing is sent to it

    def _reachable(self) -> None:
        """Reconnect when the connection is gone (outside a transaction only: one cannot resume). A new
        connection that reaches another database (dropped and created again, another server behind the
        address) is refused, now and for every later statement: the rows written before are in the first."""
        if self.moved is not None:
            raise sqlite3.OperationalError(self.moved)
        if not (self.raw.broken or self.raw.closed) or self._transactions:
            return
        import time

        waits = (0.0,) if self._gave_up else (0.0, *RECONNECT_WAITS)
        failure: Exception | None = None
        for wait in waits:
            time.sleep(wait)
            try:
                self.raw = _raw_connection(self.url, read_only=self.read_only)
                self._gave_up = False
            except Exception as exc:
                failure = exc
                continue
            self._same_database()
            return
        self._gave_up = True
        raise _mapped(failure) if failure is not None else sqlite3.OperationalError("the database server went away")

    def _same_database(self) -> None:
        """After a reconnection: refuse a database other than the one first connected to."""
        found = database_identity(self.raw)
        if self.identity is None or found == self.identity:
            return
        was_server, was_name, _ = self.identity
        server, name, _ = found if found is not None else (None, None, None)
        what = (f"another server answers there (system identifier {server}, was {was_server})" if server != was_server
                else f"database {name or was_name} was dropped and created again")
        self.moved = f"the database was dropped or replaced during the run: {self.url} ({what})"
        raise sqlite3.OperationalError(self.moved)

    def _run(self, action, *, server_side: bool = False) -> PgCursor:
        """``action(cursor)`` on a client-side binding cursor (the connection's), or one the server binds."""
        import psycopg

        def cursor() -> Any:
            return psycopg.Cursor(self.raw) if server_side else self.raw.cursor()

        self._reachable()
        current = cursor()
        try:
            action(current)
        except psycopg.OperationalError as exc:
            if self._transactions or not (self.raw.broken or self.raw.closed):
                raise _mapped(exc) from None
            self._reachable()  # lost between statements: once more on a new connection
            current = cursor()
            try:
                action(current)
            except psycopg.Error as again:
                raise _mapped(again) from None
        except psycopg.Error as exc:
            raise _mapped(exc) from None
        return PgCursor(current)

    def execute(self, sql: str, params: Iterable[Any] = ()) -> PgCursor:
        statement, values = translate(sql), _params(params)
        return self._run(lambda cursor: cursor.execute(statement, values))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> PgCursor:
        statement, values = translate(sql), [_params(row) for row in rows]
        # The server binds these (psycopg pipelines them: no round trip per row, no client-side parsing of
        # the statement per row); a row's types come from its columns. (10,000 items: 7.1 s row by row with
        # client-side binding, against 1.7 s for SQLite: docs/benchmarks.md.)
        return self._run(lambda cursor: cursor.executemany(statement, values), server_side=True)

    def execute_script(self, statements: Iterable[str]) -> None:
        """Statements as written (the schema's DDL: no placeholders, no translation)."""
        import psycopg

        for statement in statements:
            try:
                self.raw.execute(statement)
            except psycopg.Error as exc:
                raise _mapped(exc) from None

    @property
    def in_transaction(self) -> bool:
        return bool(self._transactions)

    def __enter__(self) -> PgConnection:
        import psycopg

        for attempt in range(2):
            self._reachable()
            transaction = self.raw.transaction()
            try:
                transaction.__enter__()
                break
            except psycopg.OperationalError as exc:  # the server went away since the last statement: nothing begun
                if attempt or not (self.raw.broken or self.raw.closed):
                    raise _mapped(exc) from None
            except psycopg.Error as exc:
                raise _mapped(exc) from None
        self._transactions.append(transaction)
        return self

    def __exit__(self, kind, exc, traceback) -> Literal[False]:
        import psycopg

        transaction = self._transactions.pop()
        try:
            transaction.__exit__(kind, exc, traceback)
        except psycopg.Error as error:  # the commit itself failed (the server went away)
            raise _mapped(error) from None
        return False

    def close(self) -> None:
        self.raw.close()


def connect(url: DatabaseURL, *, read_only: bool = False) -> PgConnection:
    """A connection to the database at ``url``; StoreError (no traceback, no password) when it cannot be had."""
    from . import StoreError

    try:
        import psycopg
    except ImportError:
        raise StoreError(f"{url}: a PostgreSQL database needs the psycopg driver, which is not installed\n"
                         f"HINT: {INSTALL_HINT}") from None
    try:
        raw = _raw_connection(url, read_only=read_only)
    except psycopg.Error as exc:
        reason = redact_urls(" ".join(str(exc).split()))
        raise StoreError(f"{url}: cannot connect to the crucible database: {reason}\n"
                         "HINT: check the URL (postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE), that the server "
                         "runs and takes connections from here, and the credentials") from None
    return PgConnection(raw, url, read_only=read_only)


def database_identity(raw: Any) -> tuple | None:
    """(the server's system identifier, the database's name, its oid): what tells one database from another
    of the same name on the same address. The identifier is None where the server does not show it (a managed
    service may revoke ``pg_control_system``); None when the query fails."""
    import psycopg

    try:
        name, oid = raw.execute("SELECT current_database(), (SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
    except psycopg.Error:
        return None
    try:
        server = raw.execute("SELECT system_identifier FROM pg_control_system()").fetchone()[0]
    except psycopg.Error:
        server = None
    return (None if server is None else int(server), name, int(oid))


def _raw_connection(url: DatabaseURL, *, read_only: bool) -> Any:
    import psycopg

    raw = psycopg.connect(url.url, autocommit=True, cursor_factory=psycopg.ClientCursor, connect_timeout=10,
                          application_name="pytest-crucible")
    if read_only:
        raw.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    return raw
