"""Which workspace a command run from a directory means, without importing pytest.

The plugin stamps every run with a workspace: ``--crucible-workspace``, else the ini value
``crucible_workspace``, else the name of pytest's rootdir. The CLI reads the same default
from the current directory, with pytest's rootdir rule simplified: the nearest ancestor
holding one of pytest's config files is the project, its ``crucible_workspace`` ini value
names the workspace, else the directory's name does. ``CRUCIBLE_WORKSPACE`` overrides both.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import Mapping

ENV_VAR = "CRUCIBLE_WORKSPACE"
INI_KEY = "crucible_workspace"
FALLBACK = "default"
# In the order pytest looks for them within one directory.
PROJECT_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def project_root(cwd: Path) -> Path | None:
    """The nearest directory, from ``cwd`` up, holding one of pytest's config files."""
    for directory in (cwd, *cwd.parents):
        if any((directory / name).is_file() for name in PROJECT_FILES):
            return directory
    return None


def ini_workspace(root: Path) -> str | None:
    """The ``crucible_workspace`` value of the first pytest config file in ``root`` that has a pytest section."""
    for name in PROJECT_FILES:
        path = root / name
        if not path.is_file():
            continue
        try:
            found, value = _read_pyproject(path) if name == "pyproject.toml" else _read_ini(path, name)
        except (OSError, ValueError, configparser.Error):
            continue  # pytest reports a broken config file itself; here it only means "no value"
        if found:
            return value or None
    return None


def default_workspace(cwd: str | Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The workspace of the project ``cwd`` belongs to (see the module docstring)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV_VAR, "").strip():
        return environ[ENV_VAR].strip()
    cwd = Path(cwd or os.getcwd()).absolute()
    root = project_root(cwd)
    if root is None:
        return cwd.name or FALLBACK
    return ini_workspace(root) or root.name or FALLBACK


def reading_workspace(current: str, run_counts: Mapping[str, int]) -> tuple[str, str | None]:
    """(workspace to read, note) for a local reader whose project is ``current``.

    A file whose runs all belong to one other workspace is unambiguous (a CI artifact read
    from a checkout with another directory name): read that one, and say so in the note.
    """
    if current in run_counts or len(run_counts) != 1:
        return current, None
    [only] = run_counts
    return only, f"workspace '{current}' has no runs here; reading '{only}', the only workspace in this file"


def _read_ini(path: Path, name: str) -> tuple[bool, str | None]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    if not parser.has_section(section):
        # pytest.ini marks the rootdir even without a [pytest] section.
        return name in ("pytest.ini", ".pytest.ini"), None
    return True, parser.get(section, INI_KEY, fallback=None)


def _read_pyproject(path: Path) -> tuple[bool, str | None]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest itself depends on tomli there
        import tomli as tomllib  # type: ignore[no-redef]

    tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {})
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest_table, dict):
        return False, None
    for table in (pytest_table.get("ini_options"), pytest_table):
        if isinstance(table, dict) and isinstance(table.get(INI_KEY), str):
            return True, table[INI_KEY]
    return True, None


def parse_label_filters(values: list[str], option: str = "label") -> dict[str, str]:
    """``key:value`` run-label filters (the CLI's ``--label`` and the API's ``label``) as a dict.

    Split at the first colon, so a value may hold colons (``label=model:claude:haiku``)."""
    from .config import parse_key_values

    return parse_key_values(values, separator=":", option=option,
                            example=f"{option} model:claude-haiku-5-5 (all given labels must match)")
