"""One run being recorded: open it, queue each item's score (and its earlier attempts), write them in
batches, and close it with a status.

The session decides *what* happens (which status, when to stop); the :class:`RunRecorder` owns how a run
reaches the store: the batches, the process that may write them (:mod:`.background`), the checkpoints of the
-wal file, and the faults of a write that failed. A failed write is never raised and never lost silently: it
is appended to ``faults`` and counted in ``unrecorded``, and the run can then never be ``complete``. A database
file deleted or replaced during the run (``Store.replaced``, checked before every batch and when the run closes)
takes every item with it: the recorder then writes nothing more, anywhere, and the run is not stored (``lost``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import Store
    from .background import BackgroundWriter

# Scores are written in batches of this many items, or once the last write is this old (checked as each
# item is recorded: a kill loses at most the items recorded in the last second, and the one it lands in).
FLUSH_ITEMS = 50
FLUSH_SECONDS = 1.0
# The written batches are moved from -wal into the database file at most this often (and when the run
# closes): each move syncs the file, about 7 ms here, which after every 50-item batch cost 0.1-0.2x of a
# bare pytest run (bench/bench_overhead.py); a copy of the file alone after a SIGKILL misses at most this much.
CHECKPOINT_SECONDS = 5.0
# A run of at least this many items writes its batches from a process of its own (ini crucible_background_writes
# = auto, on two cores or more): at 10,000 items the writes were about a third of the plugin's per-item cost.
BACKGROUND_FROM_ITEMS = 1_000


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class RunRecorder:
    """The run of one session in the store at ``db_path``.

    ``run_fields()`` is what the run's row says when it is opened (asked once, at the first write: the judge
    is known by then); ``fixed_id`` a ``--crucible-run-id``; ``background_writes`` ``never``/``auto``/``always``
    (see ``_writer_for_this_run``); ``faults`` the session's list of faults, which a failed write joins.
    """

    def __init__(self, db_path: Any, *, run_fields: Callable[[], dict[str, Any]], faults: list[str],
                 fixed_id: str | None = None, background_writes: str = "auto") -> None:
        self.db_path = db_path
        self.faults = faults
        self.run_id: str | None = None
        self.reserved_run_id: str | None = None
        self.unrecorded = 0  # items handed to record() whose write failed (see faults)
        self.lost: str | None = None  # why the database went away under the run (deleted, replaced): nothing is written
        self.wal_note: str | None = None
        self.planned = 0  # how many items the session will run (a large run may write from a process)
        self._run_fields, self._fixed_id, self._background = run_fields, fixed_id, background_writes
        self._store: Store | None = None
        self._pending: list[dict[str, Any]] = []
        self._flushed_at = self._checkpointed_at = time.monotonic()
        self._writer: BackgroundWriter | None = None
        self._writer_decided = False
        self._in_flight: deque[list[dict[str, Any]]] = deque()
        self._taken_back: list[list[dict[str, Any]]] = []
        self._attempts: dict[str, list[dict[str, Any]]] = {}  # item id -> its attempts pytest will run again
        self._recorded: set[str] = set()
        self._stored = 0  # items whose batch was written (here, or confirmed by the writing process)

    @property
    def store(self) -> Store:
        if self._store is None:
            from . import Store

            self._store = Store.open(self.db_path)
            self._store.checkpoint_only_when_asked()  # flush() checkpoints every CHECKPOINT_SECONDS, close_run() at the end
        return self._store

    # -- opening the run -------------------------------------------------------------------------------
    def reserve(self, fields: dict[str, Any]) -> None:
        """Write the run's row (``running``) before any test runs: a session killed before its first write
        batch still leaves a run, which the next session to open the store marks ``interrupted``. Two sessions
        given one fixed id at once meet here, and the second is refused up front (``store.RunIdTaken``)
        instead of losing every result at its first write. Released again if the session records nothing
        (see ``close``)."""
        from . import DatabaseError, RunIdTaken, StoreError

        if self.run_id or self.reserved_run_id:
            return
        try:
            self.reserved_run_id = self.store.start_run(run_id=self._fixed_id, **fields)
        except RunIdTaken:
            raise
        except (StoreError, DatabaseError):
            pass  # a database that cannot be written: the first flush reports it as a fault, as without an id

    def ensure_run(self, late_fields: Callable[[], dict[str, Any]]) -> str:
        """The run's id, its row written first when it is not yet (``late_fields``: what only collection knew)."""
        if self.run_id is None:
            if self.reserved_run_id is not None:
                self.store.complete_run_start(self.reserved_run_id, **late_fields())
                self.run_id = self.reserved_run_id
            else:
                self.run_id = self.store.start_run(run_id=self._fixed_id, **self._run_fields(), **late_fields())
        return self.run_id

    # -- the items -------------------------------------------------------------------------------------
    def record(self, score: dict[str, Any], *, rerun: bool = False) -> bool:
        """Queue one item's score; written in batches (see ``flush``). ``rerun``: pytest will run the item
        again (pytest-rerunfailures): this attempt is held, and written with the item's last one. True when a
        batch is due (the caller flushes: it knows what the run's row needs)."""
        from . import attempt_of

        item_id = score["item_id"]
        if rerun:
            self._attempts.setdefault(item_id, []).append(score)
            return False
        earlier = self._attempts.pop(item_id, None)
        if earlier:
            score["attempts"] = [attempt_of(attempt, number) for number, attempt in enumerate(earlier, 1)]
        if item_id in self._recorded:  # recorded once already (a rerun after a failed teardown): the store keeps both
            score["supersedes"] = True
        self._recorded.add(item_id)
        if self.lost is not None:  # the database went away: counted with the rest, written nowhere
            self.unrecorded = len(self._recorded)
            return False
        self._pending.append(score)
        return len(self._pending) >= FLUSH_ITEMS or time.monotonic() - self._flushed_at >= FLUSH_SECONDS

    def held_attempts(self) -> list[dict[str, Any]]:
        """The items stopped before their next attempt ran: the latest attempt of each is its result (the
        earlier ones stay held as its attempts). The caller records each as an ordinary score."""
        latest = []
        for item_id in list(self._attempts):
            latest.append(self._attempts[item_id].pop())
            if not self._attempts[item_id]:
                del self._attempts[item_id]
        return latest

    def flush(self, late_fields: Callable[[], dict[str, Any]]) -> None:
        """Write the queued scores in one transaction. A store failure is kept as a fault, never lost silently.

        Batching keeps SQLite commits off the per-item path; a killed process loses at most
        the last FLUSH_ITEMS items (or FLUSH_SECONDS) of its own run, never an earlier run.
        A large run on a machine with a core to spare hands the batch to a writing process instead
        (:mod:`.background`, see ``_writer_for_this_run``); the batches it gives back are written here.
        """
        self._flushed_at = time.monotonic()
        if self.lost is not None or ((self._pending or self._taken_back) and self._check_database()):
            self._pending, self._taken_back = [], []  # counted in unrecorded: nothing more is written
            return
        if self._pending and self._writer_for_this_run(late_fields) is not None:
            pending, self._pending = self._pending, []
            if self._hand_over(pending):
                return
        batches, self._taken_back = self._taken_back + ([self._pending] if self._pending else []), []
        self._pending = []
        for index, batch in enumerate(batches):
            try:
                self.store.record_scores(self.ensure_run(late_fields), batch)
                self._stored += len(batch)
            except Exception as exc:
                if self._check_database():  # the batch met a database other than the run's: every item is lost
                    return
                self._record_fault(batch, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)  # one line per fault
            except BaseException:
                # Ctrl-C landed in the write: its transaction rolled back, so keep the batch (and those after it)
                # for the run's close to write.
                self._pending = [score for later in batches[index:] for score in later] + self._pending
                raise
        if batches and time.monotonic() - self._checkpointed_at >= CHECKPOINT_SECONDS:
            self.checkpoint()

    def write_everything(self, late_fields: Callable[[], dict[str, Any]]) -> None:
        """Every queued batch written, the writing process stopped once it wrote what it received."""
        self.flush(late_fields)
        if self._writer is not None:
            self.stop_writer()
            self.flush(late_fields)  # what it never confirmed
        if self.run_id is not None:
            self._check_database()  # before a Message Batch is paid for, or the run closed, in a file gone

    def _writer_for_this_run(self, late_fields: Callable[[], dict[str, Any]]) -> BackgroundWriter | None:
        """The writing process of this run, started at its first batch when ``background_writes`` allows it:
        "always", or "auto" for a run of at least BACKGROUND_FROM_ITEMS items on a machine with two cores or
        more (a smaller run would not win back the process's start). A SQLite file or a PostgreSQL database."""
        if self._writer is None and not self._writer_decided:
            self._writer_decided = True
            if self._background == "never":
                return None
            if self._background == "auto" and (self.planned < BACKGROUND_FROM_ITEMS or usable_cores() < 2):
                return None
            from .background import BackgroundWriter

            try:
                self.ensure_run(late_fields)  # the run's row first: the writer's rows point at it
                self._writer = BackgroundWriter(self.db_path, CHECKPOINT_SECONDS, self.store.identity)
            except Exception:
                return None
        return self._writer

    def _hand_over(self, pending: list[dict[str, Any]]) -> bool:
        """Give one batch to the writing process. False: the process is gone, or could not write a batch; it is
        stopped, and what it did not write (this batch included) is in ``_taken_back``, for this process."""
        assert self._writer is not None and self.run_id is not None  # the writer starts once the run is recorded
        self._in_flight.append(pending)
        try:
            self._writer.send(self.run_id, pending)
        except Exception:
            self.stop_writer()
            return False
        except BaseException:
            # Ctrl-C while handing over: the batch may or may not have reached the process; stopping it
            # tells which (a batch it never confirmed is taken back, for the run's close to write here).
            self.stop_writer()
            raise
        self._take_answers(self._writer.answers())
        if self._taken_back:
            self.stop_writer()
            return False
        return True

    def _take_answers(self, answers: list[tuple[str | None, tuple[str, str | None] | None]]) -> None:
        """The writing process's answers, one per batch in the order they were handed over (what each means:
        ``store.background.serve``); its checkpoints count as this process's own (see ``checkpoint``). A batch
        it could not write is taken back: written here, and only a failure here is a fault (the process's
        connection may fail where this one does not, e.g. on a file that turned read-only after the session
        opened it and before the process did)."""
        for fault, checkpoint in answers:
            batch = self._in_flight.popleft()
            if fault is not None:
                self._taken_back.append(batch)
            else:
                self._stored += len(batch)
            if checkpoint is None:
                continue
            self._checkpointed_at = time.monotonic()
            kind, value = checkpoint
            if kind == "note":
                self.wal_note = value
            elif value not in self.faults:
                assert value is not None  # a fault always says why (store.background.serve)
                self.faults.append(value)

    def stop_writer(self) -> None:
        """Stop the writing process once it has written every batch it received. A batch it never confirmed
        (handed over as Ctrl-C came, or it stopped on its own) is taken back: written here."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        self._take_answers(writer.stop())
        self._taken_back.extend(self._in_flight)
        self._in_flight.clear()

    def _check_database(self) -> bool:
        """True when the database the run writes was deleted or replaced since it was opened (see
        ``Store.replaced``): said once as a fault, every item of the run counted lost (those written went
        with the file; the rest are written nowhere, never into the database now at the path), the run
        forgotten (``run_id`` None: no status, no gate, no report reads it)."""
        if self.lost is None:
            if self._store is None or (reason := self._store.replaced()) is None:
                return False
            self.lost = reason
            self.stop_writer()
            went = f"the {self._stored} item(s) of this run written before went with it" if self._stored else \
                "no item of this run had been written to it yet"
            self.faults.append(f"{reason}: crucible writes nothing more (never into a database that is not the run's); {went}")
        self.unrecorded = len(self._recorded)
        self.run_id = self.reserved_run_id = None
        return True

    def _record_fault(self, batch: list[dict[str, Any]], reason: str) -> None:
        ids = ", ".join(repr(score.get("item_id")) for score in batch[:5])
        self.faults.append(f"could not record {len(batch)} item(s) ({ids}...) in {self.db_path}: {reason}")
        self.unrecorded += len(batch)  # lost, not retried: the run must say so (see close_run)

    def checkpoint(self) -> None:
        """Move what was written into the database file itself (a copy or CI upload of the file alone then
        holds it; after a SIGKILL, all but the last CHECKPOINT_SECONDS). A file that cannot take it is a fault,
        said once: the run then lives in the -wal file too, and a session must never end green on a file that lost it."""
        from . import StoreError

        self._checkpointed_at = time.monotonic()
        try:
            self.wal_note = self.store.checkpoint()
        except StoreError as exc:
            reason = str(exc).splitlines()[0]
            if reason not in self.faults:
                self.faults.append(reason)

    # -- closing the run -------------------------------------------------------------------------------
    def close_run(self, status: str, **fields: Any) -> str | None:
        """Close the run with ``status`` (the store's ``finish_run`` fields beside it; a run that lost items is
        never complete) and move it into the file itself. Returns the status stored (None: the database was
        deleted or replaced, and the run is not stored)."""
        assert self.run_id is not None
        store = self.store
        if self._check_database():
            return None
        stored = store.finish_run(self.run_id, status=status,
                                  golden_hash=store.golden_set_hash(self.run_id, written_canonical=True),
                                  unrecorded=self.unrecorded, **fields)
        self.checkpoint()  # the closed run, status included, in the file itself
        return None if self._check_database() else stored

    def close(self) -> None:
        """Release the writing process (what it received is still written), an unused reservation, the store."""
        self.stop_writer()
        if self.reserved_run_id is not None and self.run_id is None:
            with contextlib.suppress(Exception):  # nothing recorded (a usage error, an empty selection): the id is free again
                self.store.release_run(self.reserved_run_id)
            self.reserved_run_id = None
        if self._store is not None:
            self._store.close()
            self._store = None
