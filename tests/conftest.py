"""Shared test setup.

pytester's in-process runs remove the modules an inner session imported; numpy
refuses to be imported twice in one process, so load it (and the plugin's lazily
imported core, the anthropic SDK and the judges) once, up front: an inner session
that imported them itself would import them again each time (seconds per run). A
preloaded package keeps the attribute of a submodule an inner session imported, while
the snapshot drops the module: the next session would then see two PipelineResult
classes. So a preloaded package's submodules that inner sessions use are preloaded too.
psycopg as well: imported a second time, its compiled part still raises the first import's
exception classes, which the second import's ``except psycopg.Error`` no longer catches.
"""

import contextlib
import functools

import anthropic  # noqa: F401
import hypothesis
import numpy  # noqa: F401
import openai  # noqa: F401
import pytest
import scipy.special  # noqa: F401

with contextlib.suppress(ImportError):  # optional: the PostgreSQL tests skip without it
    import psycopg  # noqa: F401
import forked
from mock_anthropic import mock_anthropic  # noqa: F401  (fixture: a local Messages API server)
from mock_openai import mock_openai  # noqa: F401  (fixture: a local OpenAI-compatible API server)

import pytest_crucible.evaluation.answers
import pytest_crucible.evaluation.concurrency
import pytest_crucible.evaluation.pipeline
import pytest_crucible.evaluation.scoring
import pytest_crucible.judge.anthropic_judge
import pytest_crucible.judge.custom_judge
import pytest_crucible.judge.lexical_v2
import pytest_crucible.judge.openai_judge
import pytest_crucible.report.html
import pytest_crucible.store
import pytest_crucible.verdict.comparison  # noqa: F401

# Hypothesis's per-example deadline is a timed assertion: on a shared two-core machine the first call of a
# property (imports, caches) can take longer than any deadline, and that says nothing about the code.
hypothesis.settings.register_profile("crucible", deadline=None)
hypothesis.settings.load_profile("crucible")


def pytest_configure(config: pytest.Config) -> None:
    """The fast loop (-m "not slow") runs each property on fewer examples (helpers.examples), read when the test
    modules are imported, after this hook."""
    import helpers

    helpers.FAST_LOOP = "not slow" in (config.option.markexpr or "")

# Plugins installed for tests/test_other_plugins.py that would change every inner run: pytest-randomly reorders and
# reseeds, pytest-asyncio warns about its unset loop scope, pytest-html and pytest-metadata add to the output.
# Hypothesis's and anyio's plugins change nothing in an inner run but cost each subprocess start about 0.3 s of
# imports (hypothesis itself is imported by its plugin). Inner runs (in process and in subprocesses) start without
# them; a test that combines one with crucible names it (`-p randomly`), which unblocks it.
INNER_RUNS_WITHOUT = ("-p no:randomly -p no:asyncio -p no:html -p no:html_fixtures -p no:metadata -p no:hypothesispytest "
                      "-p no:anyio")


@pytest.fixture(autouse=True)
def _inner_runs_without_other_plugins(request):
    if "pytester" not in request.fixturenames:
        yield
        return
    pytester = request.getfixturevalue("pytester")  # first: pytester clears PYTEST_ADDOPTS when it starts
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_ADDOPTS", INNER_RUNS_WITHOUT)
        if forked.wanted() and request.node.get_closest_marker("fresh_interpreter") is None:
            patch.setattr(pytester, "runpytest_subprocess", functools.partial(forked.runpytest_forked, pytester))
        yield


def _started_postgres():
    from postgres_server import start_or_skip

    server = start_or_skip()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster for this test session (tests/postgres_server.py); skipped without one."""
    yield from _started_postgres()


@pytest.fixture
def own_server():
    """A PostgreSQL server of this test's own, beside the session's: one a test may stop, or switch an address to."""
    yield from _started_postgres()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path):
    """A new, empty database on each backend: a SQLite file path, or a PostgreSQL URL of a database of its own."""
    if request.param == "sqlite":
        return tmp_path / "crucible.db"
    return request.getfixturevalue("postgres_server").create_database()
