"""A config key the pipeline never read is a real CrucibleWarning (pytest's warnings summary, -W and
filterwarnings apply to it), and under ``crucible_strict_config = true`` a usage error (exit 4)."""

from __future__ import annotations

import pytest
from helpers import write_golden

ITEMS = [{"id": f"k-{i}", "question": f"question {i}", "citations": [{"docId": f"doc{i}", "mode": "required"}]} for i in range(3)]

# Reads "myIndex" only when READ_INDEX is set in the conftest: the config's other key is never read.
CONFTEST = """
import pytest

READ_INDEX = {read}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        if READ_INDEX:
            config.get("myIndex")
        n = item.id.split("-")[1]
        return {{"answer": "a", "retrieved": [{{"chunk_id": f"doc{{n}}#1", "doc_id": f"doc{{n}}"}}]}}
    return pipeline
"""

UNREAD_LINE = 'WARNING CrucibleWarning: config key myIndex="v2" was never read by the pipeline: is the config applied?'


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST.format(read=False))
    (pytester.path / "index.json").write_text('{\n  "retrievalLimit": 10,\n  "myIndex": "v2"\n}\n')
    return pytester


def ini(pytester: pytest.Pytester, *lines: str) -> None:
    pytester.makeini("\n".join(["[pytest]", "crucible_mode = component", *lines]) + "\n")


def test_by_default_a_real_warning_in_the_warnings_summary(project: pytest.Pytester) -> None:
    ini(project)
    result = project.runpytest("--crucible-config=index.json")
    assert result.ret == pytest.ExitCode.OK
    # pytest's own warnings summary, pointing at the key in the config file...
    result.stdout.fnmatch_lines([
        "*= warnings summary =*",
        "index.json:3",
        '*index.json:3: CrucibleWarning: config key myIndex="v2" was never read by the pipeline: is the config applied?',
    ])
    result.assert_outcomes(passed=3, warnings=1)
    # ...and the crucible section's own line, as before.
    result.stdout.fnmatch_lines([UNREAD_LINE])


@pytest.mark.parametrize("how", ["-W", "filterwarnings"])
def test_a_filter_that_makes_it_an_error_fails_the_session(project: pytest.Pytester, how: str) -> None:
    if how == "-W":
        ini(project)
        result = project.runpytest("--crucible-config=index.json", "-W", "error::pytest_crucible.CrucibleWarning")
    else:
        ini(project, "filterwarnings = error::pytest_crucible.CrucibleWarning")
        result = project.runpytest("--crucible-config=index.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        'ERROR config key never read by the pipeline (a warning filter makes CrucibleWarning an error): myIndex="v2"',
        "HINT: make the pipeline apply each key (read it from its config argument), or remove it from *index.json",
    ])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*= warnings summary =*")  # it was an error, not a warning


def test_strict_config_makes_an_unread_key_a_usage_error(project: pytest.Pytester) -> None:
    ini(project, "crucible_strict_config = true")
    result = project.runpytest("--crucible-config=index.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        UNREAD_LINE,
        'ERROR config key never read by the pipeline (crucible_strict_config = true): myIndex="v2"',
        "HINT: make the pipeline apply each key (read it from its config argument), or remove it from *index.json",
    ])
    result.stdout.no_fnmatch_line("*Traceback*")
    # -q keeps the error and its HINT.
    quiet = project.runpytest("-q", "--crucible-config=index.json")
    assert quiet.ret == pytest.ExitCode.USAGE_ERROR
    quiet.stdout.fnmatch_lines(["ERROR config key never read by the pipeline (crucible_strict_config = true): *", "HINT: *"])
    # A pipeline that reads every changed key passes, strict or not.
    project.makeconftest(CONFTEST.format(read=True))
    applied = project.runpytest("--crucible-config=index.json")
    assert applied.ret == pytest.ExitCode.OK
    applied.stdout.no_fnmatch_line("*never read*")
