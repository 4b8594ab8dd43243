"""Small helpers shared by the end-to-end tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def db_rows(project, sql: str, params=()) -> list[tuple]:
    """Rows of a query on a pytester project's default crucible database (or on a database path)."""
    path = Path(project) if isinstance(project, (str, Path)) else project.path / ".crucible" / "crucible.db"
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
