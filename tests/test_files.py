"""The files crucible writes: the database owner-only whatever the umask, the artifacts readable and never
writable by others, and every file whole or not at all.

The database holds every run, the ledgers and the API keys' hashes: it is 0600 (its folder 0700), even under
``umask 000``. The artifacts a CI step or a colleague reads (the HTML report, junit XML, the CLI's exports)
get what the umask leaves of 0666, never writable by the group or others, so an artifact upload running as
another user can read them. ``CRUCIBLE_FILE_MODE`` sets one mode for all of them on purpose. A report that
cannot be written whole (a full disk) leaves the previous one, never half a page.
"""

from __future__ import annotations

import os
import resource
import signal
import stat
from pathlib import Path

import pytest
from helpers import RANKED_CONFTEST, crucible_cli, numbered_items, write_golden

from pytest_crucible.store.files import FileModeError, artifact_mode, file_mode, folder_mode, write_output_file


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", numbered_items(6))
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\ncrucible_outcome = record\n")
    return pytester


@pytest.fixture
def open_umask():
    """umask 000, as on a machine that shares everything by default (restored after the test)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_database_is_owner_only_and_artifacts_are_readable_never_writable_by_others(project, open_umask) -> None:
    result = project.runpytest("--junitxml=ci/junit.xml", "--crucible-html=reports/report.html")
    assert result.ret == pytest.ExitCode.OK, result.outlines
    db = project.path / ".crucible" / "crucible.db"
    assert {name: oct(mode(project.path / name)) for name in (".crucible", "ci", "reports")} == {
        ".crucible": "0o700", "ci": "0o755", "reports": "0o755"}
    assert mode(db) == 0o600
    for path in (project.path / "ci" / "junit.xml", project.path / "reports" / "report.html"):
        assert mode(path) == 0o644, path  # umask 000: readable by all, and still writable by the owner only
    assert "<testsuite" in (project.path / "ci" / "junit.xml").read_text()  # junitxml still wrote it

    exported = crucible_cli("export", "latest", "--db", db, "-o", project.path / "out" / "export.json")
    assert exported.ret == 0, exported.errlines
    trec = crucible_cli("export", "latest", "--db", db, "--format", "trec", "-o", project.path / "run.trec")
    assert trec.ret == 0, trec.errlines
    report = crucible_cli("report", "latest", "--db", db, "-o", project.path / "report.html")
    assert report.ret == 0, report.errlines
    assert mode(project.path / "out") == 0o755
    for name in ("out/export.json", "run.trec", "report.html"):
        assert mode(project.path / name) == 0o644, name


def test_artifacts_follow_the_umask(project) -> None:
    old = os.umask(0o027)
    try:
        assert project.runpytest("--junitxml=junit.xml", "--crucible-html=report.html").ret == pytest.ExitCode.OK
    finally:
        os.umask(old)
    assert (mode(project.path / "junit.xml"), mode(project.path / "report.html")) == (0o640, 0o640)
    assert mode(project.path / ".crucible" / "crucible.db") == 0o600


def test_an_older_junit_file_writable_by_others_is_narrowed(project, open_umask) -> None:
    junit = project.path / "junit.xml"
    junit.write_text("<old/>")
    junit.chmod(0o666)
    assert project.runpytest("--junitxml=junit.xml").ret == pytest.ExitCode.OK
    assert mode(junit) == 0o644 and "<testsuite" in junit.read_text()


def test_crucible_file_mode_widens_on_purpose_and_a_bad_one_is_one_usage_error(project, open_umask, monkeypatch) -> None:
    monkeypatch.setenv("CRUCIBLE_FILE_MODE", "0640")
    assert project.runpytest("--crucible-html=reports/report.html").ret == pytest.ExitCode.OK
    assert (mode(project.path / ".crucible"), mode(project.path / ".crucible" / "crucible.db")) == (0o750, 0o640)
    assert (mode(project.path / "reports"), mode(project.path / "reports" / "report.html")) == (0o750, 0o640)

    for bad in ("0755", "644x", "0400", "4600"):
        monkeypatch.setenv("CRUCIBLE_FILE_MODE", bad)
        result = project.runpytest()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, bad
        result.stderr.fnmatch_lines([f"ERROR: CRUCIBLE_FILE_MODE='{bad}': expected an octal file mode *", "HINT: *0600*"])
        cli = crucible_cli("export", "latest", "--db", project.path / ".crucible" / "crucible.db", "-o", project.path / "x.json")
        assert cli.ret == 2 and f"CRUCIBLE_FILE_MODE='{bad}'" in cli.stderr.str()
        assert not (project.path / "x.json").exists()


def test_file_modes() -> None:
    assert file_mode({}) == 0o600
    assert file_mode({"CRUCIBLE_FILE_MODE": " 0640 "}) == 0o640
    assert file_mode({"CRUCIBLE_FILE_MODE": "644"}) == file_mode({"CRUCIBLE_FILE_MODE": "0o644"}) == 0o644
    assert (folder_mode(0o600), folder_mode(0o640), folder_mode(0o644), folder_mode(0o660)) == (0o700, 0o750, 0o755, 0o770)
    for bad in ("0700", "0200", "rw-------", "-1", "1000"):
        with pytest.raises(FileModeError, match="HINT"):
            file_mode({"CRUCIBLE_FILE_MODE": bad})


# Writes the report with the file-size limit at half the page (the SIGXFSZ signal ignored): the write fails
# part way as on a full disk. Restored after, since pytester runs the session in this process.
FULL_DISK_CONFTEST = RANKED_CONFTEST + """
import os, resource, signal
import pytest_crucible.report.html as html

_write_report = html.write_report

def write_report_on_a_full_disk(path, page):
    if not os.environ.get("REPORT_DISK_FULL"):
        return _write_report(path, page)
    limits, handler = resource.getrlimit(resource.RLIMIT_FSIZE), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(page) // 2, limits[1]))
    try:
        return _write_report(path, page)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)

html.write_report = write_report_on_a_full_disk
"""


def test_a_report_that_cannot_be_written_whole_leaves_the_previous_one_and_is_a_fault(project, monkeypatch) -> None:
    project.makeconftest(FULL_DISK_CONFTEST)
    assert project.runpytest("--crucible-html=report.html").ret == pytest.ExitCode.OK
    report = project.path / "report.html"
    previous = report.read_bytes()
    assert previous.rstrip().endswith(b"</html>")

    monkeypatch.setenv("REPORT_DISK_FULL", "1")
    result = project.runpytest("--crucible-html=report.html", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a fault, never green
    result.stdout.fnmatch_lines(["FAULT could not write the HTML report to report.html: OSError: *File too large*"])
    assert report.read_bytes() == previous  # not half of the new page
    assert sorted(path.name for path in project.path.iterdir() if path.name.startswith(".report.html")) == []
    assert 'name="faults"' in (project.path / "junit.xml").read_text()


def test_write_output_file_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "export.json"
    write_output_file(target, "first")
    assert target.read_text() == "first" and mode(target) == artifact_mode()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, limits[1]))
    try:
        with pytest.raises(OSError):
            write_output_file(target, "x" * 5000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert target.read_text() == "first"
    assert [path.name for path in tmp_path.iterdir()] == ["export.json"]
    write_output_file(target, b"second", mode=0o640)  # a user's own file keeps the mode it had (golden review)
    assert target.read_text() == "second" and mode(target) == 0o640
