"""A real PostgreSQL server for the tests: a throwaway cluster from the distribution's binaries
(`initdb`, `pg_ctl`), on 127.0.0.1 and a free port, started once per test session and removed after.

Each test gets a database of its own (`fresh_database`). Without PostgreSQL on the machine the tests
that need it skip, naming what to install; with ``CRUCIBLE_REQUIRE_POSTGRES=1`` (set by `.ci/run`,
which installs it) they fail instead, so CI never passes on a skipped backend.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from helpers import free_port


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


class PostgresServer:
    """One cluster; ``url(name)`` names a database in it."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="crucible-pg-"))
        self.data = self.root / "data"
        # PostgreSQL refuses to run as root: as root, the cluster belongs to the distribution's postgres user.
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.root, "postgres")

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        subprocess.run(self.command("start"), check=True, capture_output=True, timeout=120)

    def command(self, action: str) -> list[str]:
        """The command line that stops or starts this cluster (``action``: stop or start), as a pipeline runs it."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
        if action == "stop":
            return [*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
        return [*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l",
                str(self.root / "log"), "-w", "start"]

    def start_again(self) -> None:
        subprocess.run(self.command("start"), check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        user = "postgres" + (f":{password}" if password else "")
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def start_or_skip() -> PostgresServer:
    required = os.environ.get("CRUCIBLE_REQUIRE_POSTGRES") == "1"
    missing = None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing = "psycopg is not installed (pip install 'pytest-crucible[postgres]')"
    bindir = _bindir()
    if missing is None and bindir is None:
        missing = "PostgreSQL's server binaries are not installed (Debian: apt-get install postgresql)"
    if missing is None and os.geteuid() == 0 and not shutil.which("runuser"):
        missing = "running as root without runuser, and PostgreSQL refuses to run as root"
    if missing:
        if required:
            pytest.fail(f"CRUCIBLE_REQUIRE_POSTGRES=1 but {missing}")
        pytest.skip(missing)
    server = PostgresServer(bindir)
    server.start()
    return server
