"""The results store: one SQLite file (or a PostgreSQL database), written with plain SQL.

``Store`` is composed of one part per concern, all sharing one connection: opening, migrating and the
insert helpers (``database.py``: ``Connection``), the runs table (``runs.py``), a run's per-item rows
(``results.py``), the qrels ledger (``qrels.py``) and export and import (``export.py``). A run a user
names is resolved in ``refs.py``. This module only puts them together and names what the rest of the
package imports from ``pytest_crucible.store``. It never imports pytest.
"""

from __future__ import annotations

from .database import (
    Connection,
    Database,
    DatabaseError,
    RunIdTaken,
    RunNotFound,
    StoreError,
    is_file,
    is_locked,
    locate,
    read_only_rows,
    utc_now,
)
from .export import EXPORT_FORMAT, EXPORT_VERSION, ExportMixin, read_export, validate_export
from .files import check_before_writing, check_writable
from .qrels import QrelsMixin, read_judgment_ledger
from .results import ResultsMixin, attempt_of, last_attempts
from .runs import RunsMixin, run_id_taken
from .schema import SCHEMA_VERSION
from .ulid import new_ulid

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "SCHEMA_VERSION",
    "Database",
    "DatabaseError",
    "RunIdTaken",
    "RunNotFound",
    "Store",
    "StoreError",
    "attempt_of",
    "check_before_writing",
    "check_writable",
    "is_file",
    "is_locked",
    "last_attempts",
    "locate",
    "new_ulid",
    "read_export",
    "read_judgment_ledger",
    "read_only_rows",
    "run_id_taken",
    "utc_now",
    "validate_export",
]


class Store(RunsMixin, ResultsMixin, QrelsMixin, ExportMixin, Connection):
    """One open crucible database: ``Store.open(path)`` (migrated, for writing) or ``Store.open_read_only``;
    ``close()`` when done. Every write is one short transaction."""
