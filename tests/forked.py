"""``pytester.runpytest_subprocess`` in a forked copy of this test process, for tests that need a process of the
inner run's own but not a fresh interpreter.

A fresh ``python -m pytest`` spends most of its start importing what this process already holds: pytest and its
plugins, numpy, scipy, and above all the anthropic SDK (about 3 s of CPU for its 3,000 type modules). A fork starts
in milliseconds with all of that imported, and is still a process of its own: what the inner run changes (modules'
state, environment, signal handlers, threads, open files) dies with it, its exit code is its own, and what it
prints goes to files the parent reads, as ``Pytester.run`` does.

One difference to keep in mind: the child starts from this process's memory, so a monkeypatch the test applied to
an imported module (``pytest_crucible`` included) is in force in the inner run too, where a new interpreter would
not see it. Patch through the inner project's conftest.py instead, or mark the test.

What a forked run cannot show, a subprocess still does: the marker ``fresh_interpreter`` keeps a test on
``runpytest_subprocess``'s real subprocesses (import-time behaviour, a command line as typed, what a new Python
reads from its environment when it starts). Set ``CRUCIBLE_TEST_SUBPROCESS=1`` to run every inner run as a
subprocess again.

The child is made to look like a new ``python -m pytest`` in the directory the parent is in: the test suite's own
modules (this directory's, the inner runs' earlier projects') and paths are dropped so that the inner project
imports its own ``conftest`` and helpers, ``PYTHONPATH`` and ``sys.path`` start with the working directory,
``sys.argv`` is pytest's, the parent's exit handlers are cleared, and at the end the child runs its own exit
handlers and waits for its own non-daemon threads as an interpreter's shutdown would.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path

import pytest
from _pytest.pathlib import make_numbered_dir

SUITE = str(Path(__file__).resolve().parent)


def wanted() -> bool:
    return os.environ.get("CRUCIBLE_TEST_SUBPROCESS", "") in ("", "0")


def runpytest_forked(pytester: pytest.Pytester, *args: str | os.PathLike[str], timeout: float | None = None) -> pytest.RunResult:
    """What ``pytester.runpytest_subprocess(*args, timeout=timeout)`` returns, from a fork of this process."""
    __tracebackhide__ = True
    basetemp = make_numbered_dir(root=pytester.path, prefix="runpytest-", mode=0o700)
    argv = [f"--basetemp={basetemp}", *(os.fspath(arg) for arg in args)]
    for plugin in pytester.plugins:
        if not isinstance(plugin, str):
            raise ValueError(f"Specifying plugins as objects is not supported in pytester subprocess mode; specify by name instead: {plugin}")
        argv = ["-p", plugin, *argv]
    out_path, err_path = pytester.path / "stdout", pytester.path / "stderr"
    print("running (forked): python -m pytest", *argv)
    print("     in:", Path.cwd())
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    with warnings.catch_warnings():  # Python 3.12+ warns of fork() beside threads (the mock servers'): the child
        warnings.simplefilter("ignore", DeprecationWarning)  # never touches their locks, it only talks to their sockets
        pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            code = _child(argv, out_path, err_path)
        except BaseException:  # what a real interpreter would print before exiting 1
            with contextlib.suppress(BaseException):
                os.write(2, traceback.format_exc().encode("utf-8", "backslashreplace"))
        finally:
            os._exit(code)
    status = _wait(pid, timeout, argv)
    ret: int | pytest.ExitCode = os.waitstatus_to_exitcode(status)
    out = out_path.read_text(encoding="utf-8", errors="replace").splitlines()
    err = err_path.read_text(encoding="utf-8", errors="replace").splitlines()
    for lines, stream in ((out, sys.stdout), (err, sys.stderr)):
        for line in lines:
            print(line, file=stream)
    with contextlib.suppress(ValueError):
        ret = pytest.ExitCode(ret)
    return pytest.RunResult(ret, out, err, time.monotonic() - start)


def _wait(pid: int, timeout: float | None, argv: list[str]) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.001
    try:
        while True:
            done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
            if done:
                return status
            if deadline is not None and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise pytest.Pytester.TimeoutExpired(f"{timeout} second timeout expired running: python -m pytest {argv}")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
    except BaseException:  # Ctrl-C or a failed wait: the child never outlives the test
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise


def _child(argv: list[str], out_path: Path, err_path: Path) -> int:
    for fd, path in ((1, out_path), (2, err_path)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    null = os.open(os.devnull, os.O_RDONLY)  # Pytester.run closes the subprocess's stdin: reads see its end
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    atexit._clear()  # the parent's exit handlers are the parent's
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in (signal.SIGTERM, signal.SIGALRM, signal.SIGUSR1):
        signal.signal(name, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, 0)

    cwd = os.getcwd()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [cwd, os.environ.get("PYTHONPATH", "")]))
    for name, module in list(sys.modules.items()):  # the suite's modules and earlier projects' are not the child's
        where = getattr(module, "__file__", None)
        if name == "conftest" or (isinstance(where, str) and _suites(where)):
            del sys.modules[name]
    kept = [entry for entry in sys.path if entry and not _suites(os.path.abspath(entry))]
    sys.path[:] = [cwd, *os.environ["PYTHONPATH"].split(os.pathsep), *kept]
    sys.argv = [str(Path(pytest.__file__).with_name("__main__.py")), *argv]

    try:
        code: int | str | None = pytest.console_main()
    except SystemExit as exc:
        code = exc.code
    atexit._run_exitfuncs()
    for thread in threading.enumerate():  # an interpreter's shutdown waits for the threads that are not daemons
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    sys.stdout.flush()
    sys.stderr.flush()
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    sys.stderr.flush()
    return 1


def _suites(path: str) -> bool:
    """A path of this test suite's or of a pytester project (in pytest's temporary directories)."""
    return path == SUITE or path.startswith(SUITE + os.sep) or f"{os.sep}pytest-of-" in path
