"""The package as a user gets it: `python -m build` makes the sdist and the wheel a release publishes (the wheel is
built from the sdist, so the sdist holds everything a build needs), both carry every file of the package (the
templates, the prompts, the prices, py.typed), and the wheel installed into a clean virtual environment runs the
quickstart's first steps: pytest lists the plugin, `crucible --help` answers, and the quickstart's golden set runs
through the plugin and renders its HTML report.

The build and pip fetch setuptools and the dependencies from the package index; nothing else reaches the network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "pytest_crucible"
#: What `python -m build` reads: the project's metadata, the files it names, the package.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE")


def _package_files() -> set[str]:
    """Every file of the package in the source tree, relative to src/ (compiled bytecode left out)."""
    return {path.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}


def _run(args: list[str | Path], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _clean_env(venv: Path | None = None) -> dict[str, str]:
    """This environment without what would leak into the child: the test session's Python and pytest settings,
    crucible's, and any judge's key. pip's own settings (which index to use) stay."""
    leaks = ("PYTHON", "PYTEST_", "CRUCIBLE_", "ANTHROPIC_", "OPENAI_", "VIRTUAL_ENV", "COLUMNS")
    env = {key: value for key, value in os.environ.items() if not key.startswith(leaks)}
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _quickstart_files() -> dict[str, str]:
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- file: (\S+) -->\n```[a-z]*\n(.*?)```", page, flags=re.S))


@pytest.mark.slow
def test_the_built_wheel_installs_into_a_clean_venv_and_runs_the_quickstart(tmp_path: Path) -> None:
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), flags=re.M)[1]
    expected = _package_files()
    assert {"pytest_crucible/py.typed", "pytest_crucible/report/templates/report.html.j2",
            "pytest_crucible/judge/prices.json", "pytest_crucible/judge/prompts/crucible-v1/claims.md"} <= expected

    # Build from a copy of the build inputs: the working tree (its egg-info, a build/ folder) is left alone.
    source = tmp_path / "source"
    for name in BUILD_INPUTS:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "src" / "pytest_crucible", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "build", "--outdir", dist, source], cwd=tmp_path, env=_clean_env())
    assert built.returncode == 0, f"python -m build failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    assert sorted(path.name for path in dist.iterdir()) == [f"pytest_crucible-{version}-py3-none-any.whl",
                                                             f"pytest_crucible-{version}.tar.gz"]
    wheel, sdist = dist / f"pytest_crucible-{version}-py3-none-any.whl", dist / f"pytest_crucible-{version}.tar.gz"

    # The sdist: the build inputs and every file of the package (the wheel above was built from it).
    top = f"pytest_crucible-{version}/"
    with tarfile.open(sdist) as archive:
        in_sdist = {member.name.removeprefix(top) for member in archive.getmembers() if member.isfile()}
    assert set(BUILD_INPUTS) <= in_sdist
    assert {name.removeprefix("src/") for name in in_sdist if name.startswith("src/pytest_crucible/")} == expected
    # The wheel: every file of the package, the entry points of the plugin and of the command.
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        entry_points = archive.read(f"pytest_crucible-{version}.dist-info/entry_points.txt").decode("utf-8")
    assert {name for name in in_wheel if name.startswith("pytest_crucible/")} == expected
    assert "[pytest11]\ncrucible = pytest_crucible.plugin" in entry_points
    assert "[console_scripts]\ncrucible = pytest_crucible.cli:main" in entry_points

    # A clean virtual environment; pip installs the wheel and its dependencies from the package index.
    venv = tmp_path / "venv"
    try:
        made = _run([sys.executable, "-m", "venv", venv], cwd=tmp_path, env=_clean_env())
        assert made.returncode == 0, made.stderr
        env = _clean_env(venv)
        installed = _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", wheel], cwd=tmp_path, env=env)
        assert installed.returncode == 0, f"pip install of the wheel failed:\n{installed.stdout[-3000:]}\n{installed.stderr[-3000:]}"

        # pytest lists the plugin, loaded from the installed wheel (not from this checkout).
        project = tmp_path / "qs"
        project.mkdir()
        listed = _run([venv / "bin" / "pytest", "-VV"], cwd=project, env=env)
        assert listed.returncode == 0, listed.stderr
        site = next((venv / "lib").glob("python3*/site-packages"))
        assert f"  pytest-crucible-{version} at {site / 'pytest_crucible' / 'plugin.py'}" in listed.stdout.splitlines(), listed.stdout
        helped = _run([venv / "bin" / "crucible", "--help"], cwd=project, env=env)
        assert helped.returncode == 0 and helped.stdout.startswith("usage: crucible "), helped.stdout + helped.stderr

        # The quickstart's files, run through the installed plugin: 4 passed, 1 failed, as docs/quickstart.md shows.
        files = _quickstart_files()
        assert {"conftest.py", "golden_shop.jsonl"} <= set(files)
        for name, body in files.items():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            (project / name).write_text(body, encoding="utf-8")
        session = _run([venv / "bin" / "pytest", "-p", "no:cacheprovider"], cwd=project, env=env)
        lines = session.stdout.splitlines()
        assert session.returncode == 1, session.stdout[-3000:] + session.stderr[-3000:]
        assert "golden_shop.jsonl ...F." in session.stdout and "items 5 (1 failed, 4 passed)" in lines, session.stdout
        assert f"db {project / '.crucible' / 'crucible.db'}" in lines
        # The HTML report needs the template shipped in the wheel.
        report = _run([venv / "bin" / "crucible", "report", "latest", "-o", "report.html"], cwd=project, env=env)
        assert report.returncode == 0, report.stdout + report.stderr
        assert re.fullmatch(r"wrote the report of run [0-9A-Z]{26} to report\.html", report.stdout.strip()), report.stdout
        assert (project / "report.html").read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html>")
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # about 280 MB: not kept among pytest's last three temporary folders
