"""A recording session's write batches, written by a process of its own beside the tests.

Writing a batch (JSON encoding, inserts into five tables, the commit, the periodic checkpoint) is about
a third of what the plugin adds to each test (docs/benchmarks.md). On a machine with a core to spare the
session hands each batch to this process instead (pickled: about a twentieth of the cost of writing it)
and goes on with the next test. The process writes through the same :meth:`Store.record_scores` and
answers every batch with whether it was written, so the session keeps every promise it makes when it
writes itself: a batch this process could not write, or never confirmed, is given back and written by the
session (only a failure there is a fault naming its items), and what reached this process before the
session's own process died is written.

The session decides when to use it (``CrucibleSession.flush``); nothing here knows about pytest.
Frames on both pipes: a 4-byte length, then a pickle.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .postgres import DatabaseURL

_LENGTH = struct.Struct("!I")
# The pipe to the process holds this much (Linux: F_SETPIPE_SZ), about twenty 50-item batches: a test
# rarely waits for the writer to catch up.
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031
# What the reading thread queues when the process's output ends.
_ENDED = object()
# The writing process's program (python -c), run by the session's own interpreter with the session's
# import path (its first argument, JSON): it imports the same modules the session did.
SERVE = "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from pytest_crucible.store.background import serve; serve()"


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    """The next frame's value; ``_ENDED`` at the end of the stream, or on a frame cut short (its sender
    stopped half way: the frame is not a batch)."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        return _ENDED
    (size,) = _LENGTH.unpack(header)
    data = stream.read(size)
    return _ENDED if len(data) < size else pickle.loads(data)


def serve() -> None:
    """The writing process: opens the database, writes each ``(run_id, scores)`` batch it receives, answers
    ``(fault, checkpoint)`` for each, and stops at the end of its input. ``fault``: why the batch was not
    written (None: it was); ``checkpoint``: None when none ran after the batch, else ``("note", what
    Store.checkpoint returned)`` or ``("fault", why it failed)``."""
    # Ctrl-C, a terminal's hangup and a CI job's SIGTERM reach the whole process group: the session handles
    # them (or dies of them). This process stops only at the end of its input, having written what it got.
    for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            signal.signal(signum, signal.SIG_IGN)
    source, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the answers' pipe
    path, checkpoint_seconds, identity = _receive(source)
    from . import Store, StoreError

    store = Store.open(path, create=False)  # a Path, or a postgres.DatabaseURL (its password came through the pipe)
    store.checkpoint_only_when_asked()
    checkpointed = time.monotonic()
    # The session's database, as the session opened it: a file deleted or replaced since is another database,
    # never written here (each batch is answered with why, and the session finds the same).
    moved = None if identity is None or store.identity == identity else f"{path}: not the database the session opened"
    try:
        while (batch := _receive(source)) is not _ENDED:
            run_id, scores = batch
            fault = checkpoint = None
            moved = moved or store.replaced()
            try:
                if moved is not None:
                    raise StoreError(moved)
                store.record_scores(run_id, scores)
            except Exception as exc:
                fault = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if time.monotonic() - checkpointed >= checkpoint_seconds:
                checkpointed = time.monotonic()
                try:
                    checkpoint = ("note", store.checkpoint())
                except StoreError as exc:
                    checkpoint = ("fault", str(exc).splitlines()[0])
            if answers is not None:
                try:
                    _send(answers, (fault, checkpoint))
                except OSError:  # the session's process is gone: nobody to answer, the rest is still written
                    answers = None
    finally:
        store.close()  # the last connection to close moves the log into the file (a session killed meanwhile)


class BackgroundWriter:
    """The session's side: hands batches over (:meth:`send`), collects the answers (:meth:`answers`), and
    stops the process once every batch it got is written (:meth:`stop`). ``identity``: the session's
    ``Store.identity``, which the process's own connection must match."""

    def __init__(self, path: Path | DatabaseURL, checkpoint_seconds: float, identity: tuple | None = None):
        # Its stderr goes nowhere: whatever stops it, the session writes the batches it did not confirm.
        self._process = subprocess.Popen([sys.executable, "-c", SERVE, json.dumps(sys.path)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None  # both are pipes (PIPE above)
        self._stdin, self._stdout = stdin, stdout
        try:
            import fcntl

            fcntl.fcntl(self._stdin.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
        except (ImportError, OSError):  # a smaller pipe only makes a test wait for the writer sooner
            pass
        self._answers: queue.SimpleQueue = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_answers, name="crucible-writer-answers", daemon=True)
        self._reader.start()
        try:
            _send(self._stdin, (path, checkpoint_seconds, identity))  # never on its command line: a URL's password
        except OSError:  # it stopped at once: nothing to write there
            self.stop()
            raise

    def _read_answers(self) -> None:
        while (answer := _receive(self._stdout)) is not _ENDED:
            self._answers.put(answer)
        self._answers.put(_ENDED)

    def send(self, run_id: str, scores: list[dict[str, Any]]) -> None:
        """Hand one batch over; raises OSError when the process is gone (the batch did not reach it whole)."""
        _send(self._stdin, (run_id, scores))

    def answers(self) -> list[tuple[str | None, tuple[str, str | None] | None]]:
        """The answers that arrived since the last call, in the order of the batches."""
        out: list[tuple[str | None, tuple[str, str | None] | None]] = []
        while True:
            try:
                answer = self._answers.get_nowait()
            except queue.Empty:
                return out
            if answer is _ENDED:
                self._answers.put(_ENDED)  # seen again by stop()
                return out
            out.append(answer)

    def stop(self, timeout: float = 300.0) -> list[tuple[str | None, tuple[str, str | None] | None]]:
        """Close the input, wait until the process has written what it received and stopped (at most
        ``timeout`` seconds, then it is killed). Returns the answers not read yet."""
        with contextlib.suppress(OSError):  # the process is gone already: closing its pipe cannot flush
            self._stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join()
        answers = []
        while (answer := self._answers.get()) is not _ENDED:
            answers.append(answer)
        self._stdout.close()
        return answers
