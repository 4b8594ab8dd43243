"""Which project, workspace and database a command run from a directory means, without importing pytest.

The plugin stamps every run with a workspace: ``--crucible-workspace``, else the ini value
``crucible_workspace``, else the name of pytest's rootdir; it writes to ``--crucible-db``, else
the ini value ``crucible_db``, else ``.crucible/crucible.db``, relative to the rootdir. The CLI
reads the same defaults from the current directory: :func:`find_project` is the one finder of
the project (pytest's rootdir for a run without arguments) and of its ini values.
``CRUCIBLE_WORKSPACE`` overrides the workspace; ``--db`` the database.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .defaults import DEFAULT_DB

ENV_VAR = "CRUCIBLE_WORKSPACE"
INI_KEY = "crucible_workspace"
DB_INI_KEY = "crucible_db"
FALLBACK = "default"
# In the order pytest looks for them within one directory (pytest.toml and .pytest.toml: pytest 9).
PROJECT_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
# These mark the rootdir whatever they hold (pytest.ini even without a [pytest] section).
ALWAYS_CONFIG = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini")


@dataclass(frozen=True)
class Project:
    """The project a directory belongs to: pytest's rootdir and the pytest section of its config file."""

    root: Path
    config_file: Path | None  # None: a setup.py marks the root, no config file does
    ini: Mapping[str, str] = field(default_factory=dict)  # the section's text values ({} without a section)

    def value(self, key: str) -> str | None:
        """The ini value ``key``, None when unset or empty."""
        return (self.ini.get(key) or "").strip() or None


def find_project(cwd: str | Path) -> Project | None:
    """pytest's rootdir and inifile for a run without arguments from ``cwd`` (see pytest's
    "rootdir and configfile determination"): the nearest directory, from ``cwd`` up, holding
    ``pytest.toml``, ``.pytest.toml``, ``pytest.ini`` or ``.pytest.ini`` (any content), a
    ``pyproject.toml`` with a ``[tool.pytest]`` or ``[tool.pytest.ini_options]`` table, a ``tox.ini``
    with ``[pytest]`` or a ``setup.cfg`` with ``[tool:pytest]``, in that order within one directory;
    else the nearest ``pyproject.toml`` (no values); else the nearest ``setup.py``; else None
    (pytest then roots at ``cwd``). A config file that does not parse holds no values here (pytest
    reports it itself)."""
    cwd = Path(cwd).absolute()
    nearest_pyproject: Path | None = None
    for directory in (cwd, *cwd.parents):
        for name in PROJECT_FILES:
            path = directory / name
            if not path.is_file():
                continue
            if name == "pyproject.toml" and nearest_pyproject is None:
                nearest_pyproject = path
            try:
                section = _read_toml(path, name) if name.endswith(".toml") else _read_ini(path, name)
            except (OSError, ValueError, configparser.Error):
                section = {} if name in ALWAYS_CONFIG else None
            if section is not None:
                return Project(directory, path, section)
    if nearest_pyproject is not None:
        return Project(nearest_pyproject.parent, nearest_pyproject)
    for directory in (cwd, *cwd.parents):
        if (directory / "setup.py").is_file():
            return Project(directory, None)
    return None


def default_workspace(cwd: str | Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The workspace of the project ``cwd`` belongs to (see the module docstring)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV_VAR, "").strip():
        return environ[ENV_VAR].strip()
    cwd = Path(cwd or os.getcwd()).absolute()
    project = find_project(cwd)
    if project is None:
        return cwd.name or FALLBACK
    return project.value(INI_KEY) or project.root.name or FALLBACK


def default_db(cwd: str | Path | None = None) -> Path | str:
    """The database the plugin writes for the project ``cwd`` belongs to: its ini ``crucible_db``,
    else ``.crucible/crucible.db``, relative to the project's root; without a project, the nearest
    existing ``.crucible/crucible.db`` from ``cwd`` up, else the one in ``cwd``. Relative to ``cwd`` when it lies under it (so messages stay short), else absolute.
    ``CRUCIBLE_DB``, or an ini ``crucible_db`` that is a PostgreSQL URL, names it outright (as for the plugin)."""
    from .store.postgres import DB_ENV_VAR, is_database_url

    if os.environ.get(DB_ENV_VAR, "").strip():  # a team's database (a PostgreSQL URL), as the plugin reads it
        return os.environ[DB_ENV_VAR].strip()
    cwd = Path(cwd or os.getcwd()).absolute()
    project = find_project(cwd)
    configured = project.value(DB_INI_KEY) if project is not None else None
    if configured is not None and is_database_url(configured):
        return configured
    if project is None:
        # No pytest configuration up the tree: the nearest existing database from here up (pytest
        # rooted the run where it was started), else the default here.
        found = next((directory / DEFAULT_DB for directory in (cwd, *cwd.parents) if (directory / DEFAULT_DB).is_file()), None)
        if found is None:
            return Path(DEFAULT_DB)
        db = found
    else:
        db = project.root / (project.value(DB_INI_KEY) or DEFAULT_DB)
    try:
        return db.relative_to(cwd)
    except ValueError:
        return db


def reading_workspace(current: str, run_counts: Mapping[str, int]) -> tuple[str, str | None]:
    """(workspace to read, note) for a local reader whose project is ``current``.

    A file whose runs all belong to one other workspace is unambiguous (a CI artifact read
    from a checkout with another directory name): read that one, and say so in the note.
    """
    if current in run_counts or len(run_counts) != 1:
        return current, None
    [only] = run_counts
    return only, f"workspace '{current}' has no runs here; reading '{only}', the only workspace in this file"


def _read_ini(path: Path, name: str) -> dict[str, str] | None:
    """The pytest section of an ini-style file: ``[pytest]`` (``[tool:pytest]`` in setup.cfg), None without one."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    if not parser.has_section(section):
        # pytest.ini marks the rootdir even without a [pytest] section.
        return {} if name in ALWAYS_CONFIG else None
    return dict(parser.items(section))


def _read_toml(path: Path, name: str) -> dict[str, str] | None:
    """The pytest table of a TOML file: ``[pytest]`` in pytest.toml, ``[tool.pytest]`` or
    ``[tool.pytest.ini_options]`` in pyproject.toml; None without one."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest itself depends on tomli there
        import tomli as tomllib

    document = tomllib.loads(path.read_text(encoding="utf-8"))
    if name in ALWAYS_CONFIG:
        table = document.get("pytest")
        return _text_values(table) if isinstance(table, dict) else {}
    tool = document.get("tool")
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest_table, dict):
        return None
    native = {key: value for key, value in pytest_table.items() if key != "ini_options"}
    ini_options = pytest_table.get("ini_options")
    if native:
        return _text_values(native)
    return _text_values(ini_options) if isinstance(ini_options, dict) else None


def _text_values(table: Mapping[str, object]) -> dict[str, str]:
    return {key: value for key, value in table.items() if isinstance(value, str)}


def parse_label_filters(values: list[str], option: str = "label") -> dict[str, str]:
    """``key:value`` run-label filters (the CLI's ``--label`` and the API's ``label``) as a dict.

    Split at the first colon, so a value may hold colons (``label=model:claude:haiku``)."""
    from .config import parse_labels

    return parse_labels(values, separators=":", option=option,
                        example=f"{option} model:claude-haiku-5-5 (all given labels must match)")


def git_commit(directory: str | Path) -> str | None:
    """The checked-out commit of the project at ``directory``, kept with a run (None outside a git checkout)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None
