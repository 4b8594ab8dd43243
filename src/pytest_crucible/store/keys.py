"""The ``api_keys`` table: the rows of ``crucible serve``'s API keys, and nothing else.

What a key may do, how its secret is hashed and what counts as a live key is decided in
``pytest_crucible.server.keys``; this module only writes and reads the rows. Each function takes
an open ``Store`` or a plain SQLite connection to a crucible database.
This module never imports pytest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from . import Store

KEY_COLUMNS = ("id", "workspace", "name", "scopes", "salt", "key_hash", "created_at", "revoked_at")
_SELECT = f"SELECT {', '.join(KEY_COLUMNS)} FROM api_keys"
# What every function here takes: an open Store or a plain connection (named here, so that the
# modules above the store never import sqlite3).
KeyDatabase = Store | sqlite3.Connection


def _connection(db: Store | sqlite3.Connection) -> sqlite3.Connection:
    return db.db.conn if isinstance(db, Store) else db


def _row(values: Iterable[Any]) -> dict[str, Any]:
    return dict(zip(KEY_COLUMNS, values))


def insert_key_row(db: Store | sqlite3.Connection, row: dict[str, Any]) -> None:
    """Store one key row (every column of ``KEY_COLUMNS``) in its own transaction."""
    conn = _connection(db)
    with conn:
        conn.execute(f"INSERT INTO api_keys ({', '.join(KEY_COLUMNS)}) VALUES ({', '.join('?' for _ in KEY_COLUMNS)})",
                     [row[column] for column in KEY_COLUMNS])


def key_rows(db: Store | sqlite3.Connection, *, workspace: str | None = None) -> list[dict[str, Any]]:
    """Every key row (of ``workspace`` when given), oldest first."""
    sql, params = _SELECT, []
    if workspace is not None:
        sql, params = sql + " WHERE workspace = ?", [workspace]
    return [_row(values) for values in _connection(db).execute(sql + " ORDER BY created_at, id", params).fetchall()]


def key_row(db: Store | sqlite3.Connection, key_id: str) -> dict[str, Any] | None:
    """The row of the key with this id, revoked or not; None when there is none."""
    found = _connection(db).execute(f"{_SELECT} WHERE id = ?", [key_id]).fetchone()
    return None if found is None else _row(found)


def set_key_revoked(db: Store | sqlite3.Connection, key_id: str, revoked_at: str) -> None:
    """Record the key's revocation time in its own transaction."""
    conn = _connection(db)
    with conn:
        conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [revoked_at, key_id])


def replace_key_hash(db: Store | sqlite3.Connection, key_id: str, *, old: str, new: str) -> bool:
    """Set the key's hash to ``new`` if it still is ``old`` (in its own transaction); whether it was set."""
    conn = _connection(db)
    with conn:
        return conn.execute("UPDATE api_keys SET key_hash = ? WHERE id = ? AND key_hash = ?", [new, key_id, old]).rowcount == 1


def count_active_keys(db: Store | sqlite3.Connection) -> int:
    """Keys not revoked."""
    return _connection(db).execute("SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0]
