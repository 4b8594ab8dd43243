"""The files crucible writes: owner-only by default, and whole or not at all.

Every file crucible creates holds the golden set's questions and the pipeline's answers (the database,
the HTML report, junit XML, exports), so each one gets the same mode whatever the umask says: 0600
unless ``CRUCIBLE_FILE_MODE`` names another (``0640`` to let a group read them). A folder crucible
creates for them gets the matching folder mode (0700 for 0600, 0750 for 0640). Folders and files
that already exist and are not crucible's output keep their modes.

An output file is written beside itself under a temporary name, flushed and renamed over the old one,
so a full disk or a kill half way leaves the previous file (or none), never a truncated report.

Before a session's first test, :func:`check_before_writing` asks whether the database's file (and its
folder, for -wal and -shm) can be written, so a session never runs its tests only to lose their scores.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..defaults import DEFAULT_FILE_MODE

if TYPE_CHECKING:
    from .postgres import DatabaseURL

ENV_VAR = "CRUCIBLE_FILE_MODE"


class FileModeError(ValueError):
    """``CRUCIBLE_FILE_MODE`` is not a mode crucible can use; ``str()`` is the user-facing message."""


def file_mode(environ: Mapping[str, str] | None = None) -> int:
    """The mode of the files crucible creates: ``CRUCIBLE_FILE_MODE`` (octal, e.g. ``0640``) or 0600.
    The owner must be able to read and write (crucible reads its database back); nothing may be
    executable or set-id."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_FILE_MODE
    try:
        mode = int(raw, 8)
    except ValueError:
        mode = -1
    if mode < 0 or mode & ~0o666 or mode & 0o600 != 0o600:
        raise FileModeError(f"{ENV_VAR}={raw!r}: expected an octal file mode that the owner can read and write, "
                            "with no execute bits\nHINT: CRUCIBLE_FILE_MODE=0600 (the default, owner only) or 0640 (and the group)")
    return mode


def current_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux's /proc); elsewhere set
    and restored at once (``os.umask`` is the only portable reader)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def artifact_mode(environ: Mapping[str, str] | None = None) -> int:
    """The mode of the reports and exports crucible writes for others to read (the HTML report, junit XML, the
    CLI's outputs, a CI step's artifacts): ``CRUCIBLE_FILE_MODE`` when set, else what the umask leaves of 0666,
    never writable by the group or others. The database and its side files keep :func:`file_mode`."""
    if (os.environ if environ is None else environ).get(ENV_VAR, "").strip():
        return file_mode(environ)
    return 0o666 & ~current_umask() & ~0o022 | 0o600


def folder_mode(mode: int) -> int:
    """The mode of a folder holding files of ``mode``: whoever may read the files may enter it."""
    return mode | ((mode & 0o444) >> 2)


def make_folders(folder: Path, file_mode_of_contents: int | None = None) -> None:
    """Create ``folder`` and any missing parent with the folder mode of the files it will hold (default
    :func:`file_mode`; the umask does not widen it); folders that exist are left as they are."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    mode = folder_mode(file_mode() if file_mode_of_contents is None else file_mode_of_contents)
    for path in reversed(missing):
        try:
            path.mkdir(mode=mode)
        except FileExistsError:  # another process made it first: theirs, as they made it
            continue
        os.chmod(path, mode)  # mkdir's mode passes through the umask


def create_empty(path: Path, mode: int | None = None) -> None:
    """Create ``path`` empty with ``mode`` (default the file mode) if it does not exist yet (a file another
    process created first is left as it is)."""
    mode = file_mode() if mode is None else mode
    make_folders(path.parent, mode)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    except FileExistsError:
        return
    os.fchmod(fd, mode)  # os.open's mode passes through the umask too
    os.close(fd)


def restrict(path: Path) -> None:
    """Make sure the artifact that another program will write at ``path`` (pytest's junit XML) gets the
    artifact mode: create it empty, or set an older one's, so the writer's truncating open keeps it."""
    mode = artifact_mode()
    create_empty(path, mode)
    if path.stat().st_mode & 0o777 != mode:
        os.chmod(path, mode)


def write_output_file(path: str | Path, data: str | bytes, *, mode: int | None = None) -> Path:
    """Write an output file whole: a temporary file beside it, flushed and given the artifact mode (or
    ``mode``), then renamed over ``path``. On any failure (a full disk) the temporary file is removed
    and ``path`` is as it was."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with writing_output_file(path, mode=mode) as handle:
        handle.write(payload)
    return Path(path)


@contextlib.contextmanager
def writing_output_file(path: str | Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """:func:`write_output_file` for an output written piece by piece (a large import streamed): the
    pieces go to a temporary file beside ``path``, renamed over it when the block ends; an exception in
    the block (a bad record found halfway) removes the temporary file and leaves ``path`` as it was."""
    path = Path(path)
    mode = artifact_mode() if mode is None else mode
    make_folders(path.parent, mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- the database's file ------------------------------------------------------------------------------
def check_writable(path: str | Path | DatabaseURL) -> None:
    """Raise StoreError (the path, the cause, a HINT) when the database at ``path`` could not be written: the
    path is a directory or lies under a regular file, or the file or its folder cannot be written (SQLite
    writes its -wal and -shm files beside the database). Creates nothing: the checks open the file for
    writing without changing it, and an anonymous temporary file in the folder."""
    from .database import StoreError, is_file

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


def check_before_writing(path: str | Path | DatabaseURL) -> None:
    """What a session asks before its first test: the database at ``path`` can be written, and SQLite reads
    every page of it when it exists (``Store.open(verify=True)``; an empty file is a new database).
    Raises StoreError with the message the CLI gives for the same file."""
    from . import Store  # the whole store: opening for writing marks dead sessions' runs interrupted
    from .database import is_file

    check_writable(path)
    if not is_file(path) or Path(path).exists():
        Store.open(path, verify=True).close()


