"""Values stored once, whoever repeats them (schema 19): the ``contents`` table, keyed by the hash of a value's text.

A golden item as it ran (its canonical JSON) and a result's retrieved ranking (its JSON, the chunks' texts in
it) are the same text run after run: each is a row of ``contents`` (``hash``: the first 128 bits of the
SHA-256 of the text's UTF-8 bytes, in hex; ``body``: the text), written with INSERT OR IGNORE, and a run's rows
hold the hash (``golden_item_refs.item_hash``, ``results.retrieved_hash``). The view ``golden_items`` gives
the golden items back with their text, in the columns the table had; :func:`resolve_retrieved` is the one
reader of ``results.retrieved_hash``: every reader of a result's ranking calls it.

A text is hashed once where it is written (:class:`ContentHashes` remembers the hashes of the texts a
connection wrote last, for a text written again in the same run). The migration to schema 19 hashes the texts
already stored in SQL: :func:`register_sqlite` gives a SQLite connection the function ``content_hash``, and
``POSTGRES_CONTENT_HASH`` defines it in PostgreSQL (``pgcrypto`` is not needed: ``sha256`` is built in).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from .database import StoreError

#: Hex digits of the SHA-256 kept as a content's key: 128 bits.
HASH_DIGITS = 32

#: The same function in PostgreSQL (the schema 19 migration and a new database define it).
POSTGRES_CONTENT_HASH = (
    "CREATE OR REPLACE FUNCTION content_hash(body text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS "
    f"$$ SELECT substr(encode(sha256(convert_to(body, 'UTF8')), 'hex'), 1, {HASH_DIGITS}) $$")


def content_hash(body: str) -> str:
    """The key of ``body`` in ``contents``."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:HASH_DIGITS]


def register_sqlite(conn: sqlite3.Connection) -> None:
    """``content_hash(text)`` in this SQLite connection's SQL (what the schema 19 migration calls)."""
    conn.create_function("content_hash", 1, lambda body: None if body is None else content_hash(str(body)), deterministic=True)


class ContentHashes:
    """The hashes of the texts one connection wrote last (at most ``size``): a text written again (the same
    golden item re-recorded, the same ranking returned for another item, an empty ranking) is not hashed again.
    Looking a text up costs a dictionary probe, a fraction of SHA-256 of it; the texts it keeps are held in memory,
    so it keeps few (256 rankings of 10 chunks: about 1.2 MB)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._known: dict[str, str] = {}

    def __call__(self, body: str) -> str:
        known = self._known.get(body)
        if known is None:
            if len(self._known) >= self.size:
                self._known.clear()  # a new run's texts, mostly: start again rather than track an order
            known = self._known[body] = content_hash(body)
        return known


def write_contents(conn: Any, contents: Iterable[tuple[str, str]]) -> None:
    """Add ``(hash, body)`` rows to ``contents`` (inside the caller's transaction); a body already there is left
    as it is (its hash says it is the same text)."""
    rows = list(dict(contents).items())
    if rows:
        conn.executemany("INSERT OR IGNORE INTO contents (hash, body) VALUES (?, ?)", rows)


def content_bodies(conn: Any, hashes: Iterable[str]) -> dict[str, str]:
    """hash -> body of these contents; StoreError naming one that is missing (the database lost a row)."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    found = dict(conn.execute("SELECT hash, body FROM contents WHERE hash IN (SELECT value FROM json_each(?))",
                              [json.dumps(wanted)]).fetchall())
    missing = [key for key in wanted if key not in found]
    if missing:
        raise StoreError(f"the database has lost {len(missing)} stored value(s) its results refer to (contents {missing[0]})\n"
                         "HINT: restore the file from a copy; `crucible export` cannot write these runs whole")
    return found


def resolve_retrieved(conn: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (results' rows read with their ``retrieved_hash`` column) with ``retrieved``, the ranking's JSON
    text, in that column's place, in place: every reader of a stored ranking reads it through this."""
    bodies = content_bodies(conn, (row["retrieved_hash"] for row in rows if row.get("retrieved_hash") is not None))
    for index, row in enumerate(rows):
        if "retrieved_hash" in row:
            rows[index] = {("retrieved" if key == "retrieved_hash" else key): (bodies.get(value) if key == "retrieved_hash" else value)
                           for key, value in row.items()}
    return rows


def retrieved_column(columns: Iterable[str]) -> list[str]:
    """Result columns as a SELECT names them: ``retrieved`` is read as its hash (then :func:`resolve_retrieved`)."""
    return ["retrieved_hash" if column == "retrieved" else column for column in columns]
