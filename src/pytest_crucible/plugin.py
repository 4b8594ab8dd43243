"""pytest glue: hooks, collection and fixtures only.

Options become frozen Settings in :mod:`.options`; an item is evaluated by
:func:`pytest_crucible.evaluation.evaluate`; the run and the gate's verdict live in the
:class:`~pytest_crucible.session.CrucibleSession`. This module turns those into pytest's terms:
tests, pass or fail, junit properties, the exit status and the terminal section.

Golden items become tests in two ways: golden files matching ``crucible_golden_files``
are collected directly, and ``@crucible.golden(path, **filters)`` parametrizes a
test's ``golden_item`` argument. Heavy modules (pydantic, numpy, the store) are imported only
once a golden item or a crucible option is actually used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from . import collection
from .collection import GOLDEN_ITEM_KEY, SCORE_KEY, SESSION_KEY, UNSHOWN_USAGE_KEY, USAGE_ERROR_KEY, GoldenFile
from .options import add_options, build_settings, find_custom_metrics
from .report.junit import report_to_junit, restrict_junit_file
from .warning import warn

if TYPE_CHECKING:
    from .evaluation.scoring import ItemScore
    from .session import CrucibleSession

REQUEST_KEY = pytest.StashKey[pytest.FixtureRequest]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "crucible_golden(*paths, **filters): parametrize the test's golden_item argument with the items of "
        "golden files (paths relative to the test file), optionally filtered by item fields.",
    )
    config.addinivalue_line(
        "markers",
        "crucible(id, kind, questionType, tag): carried by every golden item's test (-m crucible selects them, "
        "-m \"crucible(kind='adversarial')\" one kind, -m \"crucible(tag='topic:returns')\" one tag).",
    )
    from .session import CrucibleSession

    crucible = CrucibleSession(settings=build_settings(config), is_worker=hasattr(config, "workerinput"))
    config.stash[SESSION_KEY] = crucible
    from .report import pytest_html

    pytest_html.register(config, crucible)
    config.pluginmanager.register(_Recorder(crucible), "crucible-recorder")
    config.pluginmanager.register(collection.SigtermAsCancel(), "crucible-sigterm")  # SIGTERM stops the run as Ctrl-C does


def pytest_unconfigure(config: pytest.Config) -> None:
    collection.restore_collector(config)
    crucible = config.stash.get(SESSION_KEY, None)
    if crucible is not None:
        crucible.close()
    for plugin in filter(None, map(config.pluginmanager.get_plugin, ("crucible-recorder", "crucible-marker-route",
                                                                      "crucible-pytest-html", "crucible-sigterm"))):
        config.pluginmanager.unregister(plugin)


def _crucible(config: pytest.Config) -> CrucibleSession:
    return config.stash[SESSION_KEY]


# -- collection: golden files ---------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("crucible_golden_files")
    if any(collection.golden_pattern_matches(file_path, pattern) for pattern in patterns):
        collection.note_golden_source(parent.config, file_path)
        return GoldenFile.from_parent(parent, path=file_path)
    collection.note_unmatched_file(parent.config, file_path)
    return None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    crucible = config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    collection.deselect_unwanted(config, crucible.settings.kinds, items)
    collection.refuse_repeat_copies(config, crucible.is_worker, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    # The final selection (after -k, -m, --crucible-kind and sharding plugins such as pytest-split, whose
    # modifyitems hooks run last): the cost estimate and the prefetcher both work on what will run.
    crucible = session.config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    # A conftest.py below the initial ones is imported during collection: its metrics count too.
    crucible.add_custom_metrics(find_custom_metrics(session.config, crucible.settings.rubrics, crucible.settings.custom_metrics))
    golden = [(item, golden) for item in session.items if (golden := collection.golden_of(item)) is not None]
    run = [(item.nodeid, golden) for item, golden in golden if item.get_closest_marker("skip") is None]
    if not crucible.is_worker and crucible.settings.uses_judge and run:
        collection.check_judge_cost(session.config, crucible, [golden for _, golden in run])
    crucible.plan(run, skipped=len(golden) - len(run), selection=collection.selection_of_session(session.config, len(golden)) if golden else None)
    if run and collection.calls_pipelines(session.config):
        collection.settle_collector(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    # The xdist controller collects nothing itself: a worker's collection is where it learns that tests
    # will run (none has started yet: the scheduler waits for every worker's collection).
    crucible = node.config.stash.get(SESSION_KEY, None)
    if crucible is None or not ids:
        return
    from .store import RunIdTaken

    try:
        crucible.reserve_run()
    except RunIdTaken as exc:
        node.config.stash[USAGE_ERROR_KEY] = str(exc)
        pytest.exit(str(exc).splitlines()[0], returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("crucible_golden")
    if marker is not None:
        collection.note_golden_source(metafunc.config)
        if not metafunc.config.pluginmanager.has_plugin("crucible-marker-route"):
            metafunc.config.pluginmanager.register(_MarkerRoute(), "crucible-marker-route")
        include_drafts = _crucible(metafunc.config).settings.include_drafts
        metafunc.parametrize("golden_item", collection.marker_params(metafunc, marker, include_drafts), indirect=True)


@pytest.fixture
def golden_item(request: pytest.FixtureRequest):
    """The golden item of this test (parametrized by ``@crucible.golden``)."""
    if not hasattr(request, "param"):
        raise pytest.UsageError("the golden_item fixture is only available on tests marked @crucible.golden(path)")
    request.node.stash[GOLDEN_ITEM_KEY] = request.param
    request.node.stash[REQUEST_KEY] = request
    return request.param


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    try:
        return (yield)
    finally:  # after every rerun a plugin may make of it
        collection.release_golden(item)


class _MarkerRoute:
    """Registered once a test uses @crucible.golden (pytest_generate_tests): the item is evaluated before the
    test body, which may read the score through crucible_evaluate(). Other sessions pay no hook call for it."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        __tracebackhide__ = True  # a raising pipeline shows its own frame first
        request = item.stash.get(REQUEST_KEY, None)
        if request is not None and SCORE_KEY not in item.stash:
            request.getfixturevalue("crucible_evaluate")()
        return (yield)


class _CaseStatus:
    """Registered only while the gate's and the faults' test cases are reported: their status as sent."""

    def pytest_report_teststatus(self, report: pytest.TestReport):
        return getattr(report, "crucible_live_status", None)


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def crucible_pipeline(request: pytest.FixtureRequest):
    """Placeholder: the user's conftest.py must define this fixture. Reaching it stops the session
    with one usage error (exit 4), not one error per golden item."""
    collection.stop_with_usage_error(
        request,
        "no crucible_pipeline fixture: define one in conftest.py that returns a callable\n"
        "    pipeline(question, *, item, config, mode) -> crucible.PipelineResult | dict\n"
        "HINT: see the README quickstart.",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session):
    collection.reserve_run(session)  # the run's row, before the first test (after collection succeeded)
    try:
        return (yield)
    except pytest.exit.Exception:
        message = session.config.stash.get(USAGE_ERROR_KEY, None)
        if message is None:
            raise
        raise pytest.UsageError(message) from None


@pytest.fixture(scope="session")
def crucible_config(request: pytest.FixtureRequest):  # request: the one argument pytest resolves per test without a lookup
    """The resolved pipeline config (a dict that remembers which keys were read)."""
    return _crucible(request.config).tracked_config


@pytest.fixture(scope="session")
def crucible_embedder():
    """Embeddings for responseRelevancy. Override in conftest.py to plug in a real model:
    any object with ``embed(texts) -> numpy array`` (rows L2-normalised) and a ``name``."""
    from .judge.embed import default_embedder

    return default_embedder()


@pytest.fixture
def crucible_evaluate(request: pytest.FixtureRequest, crucible_pipeline, crucible_config):
    """Evaluate this test's golden item once; returns its :class:`ItemScore`."""

    def evaluate() -> ItemScore:
        __tracebackhide__ = True
        return collection.evaluate_node(request.node, crucible_pipeline, crucible_config)

    return evaluate


# -- reporting and recording -------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    score = item.stash.get(SCORE_KEY, None)
    if call.when == "call" and score is not None:
        plain = score.to_plain()
        plain["outcome"] = "error" if score.error or score.judge_errors or score.metric_errors else report.outcome
        # A plain dict on the report travels to the xdist controller with it.
        report.crucible_score = plain
        if item.config.pluginmanager.has_plugin("crucible-pytest-html"):  # pytest-html's row: a short text, kept
            from .report.pytest_html import cell_text

            report.crucible_html = cell_text(plain, item.config.stash[SESSION_KEY].settings.k)
        del item.stash[SCORE_KEY]
    return report


class _Recorder:
    """Per-config hook object: pytest_runtest_logreport receives no config, so the
    session is bound here (as pytest's own junitxml does)."""

    def __init__(self, crucible: CrucibleSession):
        self.crucible = crucible

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        score = getattr(report, "crucible_score", None)
        if score is not None and report.when == "call":
            # pytest-rerunfailures marks an attempt it will run again "rerun": kept as an attempt of the item.
            self.crucible.record(score, rerun=report.outcome == "rerun")
            if not self.crucible.is_worker:
                # The terminal reporter keeps every report for the whole session: once stored,
                # the score need not ride along (memory on large sets). A worker must keep it:
                # the report still has to travel to the controller.
                del report.crucible_score



@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    # xdist controller: the pipeline ran on the workers, so their config reads and
    # evaluation counts come back here (plain types only) for the unread-key warning.
    crucible, output = node.config.stash.get(SESSION_KEY, None), getattr(node, "workeroutput", {})
    if crucible is not None and output.get("crucible"):
        crucible.add_worker_output(output["crucible"])
    usage = output.get("crucible_usage_error")
    if usage:  # a worker stopped on a usage error: the session exits 4 (pytest_sessionfinish)
        node.config.stash[USAGE_ERROR_KEY] = usage
        if output.get("crucible_usage_unshown"):
            node.config.stash[UNSHOWN_USAGE_KEY] = usage


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    crucible = session.config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    crucible.stop_pipeline_calls()
    if crucible.is_worker:
        output = session.config.workeroutput  # type: ignore[attr-defined]  # xdist sets it on a worker's config
        output["crucible"] = crucible.worker_output()
        output["crucible_usage_error"] = session.config.stash.get(USAGE_ERROR_KEY, None)
        output["crucible_usage_unshown"] = UNSHOWN_USAGE_KEY in session.config.stash
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    progress = (lambda line: (reporter.ensure_newline(), reporter.write_line(line))) if reporter is not None else None
    # Stopped early: Ctrl-C, or -x / --maxfail / --sw stopping the test loop (a usage error exits 4 on its own).
    stopped = exitstatus == pytest.ExitCode.INTERRUPTED or (bool(session.shouldfail or session.shouldstop)
                                                             and USAGE_ERROR_KEY not in session.config.stash)
    crucible.end(interrupted=stopped, html_path=session.config.getoption("crucible_html"),
                 progress=progress, warn=warn)  # warn: a CrucibleWarning, inside pytest's warning capture
    session.exitstatus = crucible.exit_status(int(session.exitstatus))
    if USAGE_ERROR_KEY in session.config.stash:  # under xdist: a worker stopped on a usage error
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
    session.config.pluginmanager.register(case_status := _CaseStatus(), "crucible-case-status")
    try:
        report_to_junit(session, crucible)  # the gate's test case and the properties, before junitxml writes its file
    finally:
        session.config.pluginmanager.unregister(case_status)
    restrict_junit_file(session.config)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    crucible = config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    from .report.lines import SummaryLine, alert, alerts
    from .report.publish import publish_session

    try:
        lines = crucible.summary_lines(verbose=config.get_verbosity())
    except Exception as exc:
        lines = [SummaryLine(f"crucible: could not read the run back from {crucible.settings.db_path}: {exc}")]
    lines = collection.collection_lines(config) + lines
    if UNSHOWN_USAGE_KEY in config.stash and not crucible.is_worker:
        usage = config.stash[UNSHOWN_USAGE_KEY].splitlines()
        lines += alert(f"ERROR: {usage[0]}", usage[1:]) if usage else []
    published = publish_session(config, crucible)
    lines += alerts(f"WARNING {warning}" for warning in published.warnings)
    for command in published.commands:  # GitHub Actions reads these lines from the log as annotations
        terminalreporter.write_line(command)
    if not lines:
        return
    if config.get_verbosity() >= 0:
        terminalreporter.write_sep("=", "crucible")
    for line in lines:  # each line's colour is its level, set where the line was made
        terminalreporter.write_line(line.text, **line.level.markup)

