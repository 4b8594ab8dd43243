"""How golden items become pytest items and how one runs: golden files collected directly, the
``@crucible.golden`` marker's parameters, which golden item a test runs, and the evaluation of a test's
item turned into pass or fail. pytest glue, used by plugin.py.
"""

from __future__ import annotations

import functools
import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .evaluation.scoring import ItemScore
    from .golden_set.schema import GoldenItem
    from .report.lines import SummaryLine
    from .session import CrucibleSession
    from .store.selection import Selection

DRAFT_REASON = "draft golden item (run it with --crucible-include-drafts)"

SESSION_KEY = pytest.StashKey["CrucibleSession"]()
GOLDEN_ITEM_KEY = pytest.StashKey["GoldenItem"]()
SCORE_KEY = pytest.StashKey["ItemScore"]()
# A usage error found while tests run (no pipeline fixture, a pipeline with the wrong signature).
USAGE_ERROR_KEY = pytest.StashKey[str]()
# A usage error an xdist worker found while collecting (no test failure shows it): the controller prints it.
UNSHOWN_USAGE_KEY = pytest.StashKey[str]()


def display_path(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


# -- golden files that match no pattern ------------------------------------------------------
# Files pytest walked past (only where it was pointed: its args or testpaths, never hidden dirs or
# virtualenvs) whose names look like golden files but match no crucible_golden_files pattern.
_NEAR_MISSES_KEY = pytest.StashKey[list]()
# Golden files that matched a pattern and hold no item (empty, or only blank lines): named in the summary.
_EMPTY_GOLDEN_KEY = pytest.StashKey[list]()
_GOLDEN_SEEN_KEY = pytest.StashKey[bool]()
NEAR_MISS_CAP = 20
NEAR_MISS_SHOWN = 5
GOLDEN_LIKE_SUFFIXES = (".jsonl", ".json", ".yaml", ".yml")


_ARG_PATHS_KEY = pytest.StashKey[tuple]()


def _asked_for(config: pytest.Config, path: Path) -> bool:
    """Is ``path`` under a path pytest was pointed at? (pytest also walks the directories above an
    argument, and offers their files to pytest_collect_file before it filters them out.)"""
    if _ARG_PATHS_KEY not in config.stash:
        base = config.invocation_params.dir
        config.stash[_ARG_PATHS_KEY] = tuple((base / str(arg).split("::")[0]).resolve() for arg in config.args)
    path = path.resolve()
    return any(path == arg or arg in path.parents for arg in config.stash[_ARG_PATHS_KEY])


def note_golden_source(config: pytest.Config, path: Path | None = None) -> None:
    """A golden file matched a pattern (where pytest was pointed), or a test uses @crucible.golden:
    no near-miss warning."""
    if path is None or _asked_for(config, path):
        config.stash[_GOLDEN_SEEN_KEY] = True


def note_unmatched_file(config: pytest.Config, path: Path) -> None:
    """pytest_collect_file saw a file no golden pattern matched: keep it if its name looks golden (capped)."""
    name = path.name.lower()
    if "golden" in name and name.endswith(GOLDEN_LIKE_SUFFIXES) and _asked_for(config, path):
        near = config.stash.setdefault(_NEAR_MISSES_KEY, [])
        if len(near) < NEAR_MISS_CAP:
            near.append(path)


def collection_lines(config: pytest.Config) -> list[SummaryLine]:
    """What collection noticed, said once at the end: golden files that hold no item, and files named
    like golden files that no pattern matched."""
    empty = config.stash.get(_EMPTY_GOLDEN_KEY, [])
    from .report.lines import alert

    lines: list[SummaryLine] = []
    if empty:
        shown = ", ".join(empty[:NEAR_MISS_SHOWN]) + (f" (+{len(empty) - NEAR_MISS_SHOWN} more)" if len(empty) > NEAR_MISS_SHOWN else "")
        lines = alert(f"WARNING {len(empty)} golden file(s) hold no items, so no test came from them: {shown}",
                      ['HINT: one JSON object per line, e.g. {"id": "q1", "question": "...", "citations": '
                       '[{"docId": "doc-1", "mode": "required"}]} (docs/golden-format.md)'])
    cancel = config.pluginmanager.get_plugin("crucible-sigterm")
    return lines + near_miss_lines(config) + (cancel.summary_lines() if isinstance(cancel, SigtermAsCancel) else [])


def golden_pattern_matches(path: Path, pattern: str) -> bool:
    """Whether a golden file pattern matches ``path``, as pytest's ``python_files`` patterns do: a pattern
    without a ``/`` matches the file's name, one with a ``/`` (``golden/golden_*.jsonl``) the end of its path."""
    import fnmatch

    if "/" not in pattern and os.sep not in pattern:
        return fnmatch.fnmatch(path.name, pattern)
    target = path.as_posix()
    pattern = pattern.replace(os.sep, "/")
    return fnmatch.fnmatch(target, pattern if pattern.startswith("/") else f"*/{pattern}")


def near_miss_lines(config: pytest.Config) -> list[SummaryLine]:
    """The warning when no golden file matched while files named like golden files were collected past."""
    import fnmatch
    import re

    near = config.stash.get(_NEAR_MISSES_KEY, [])
    if not near or config.stash.get(_GOLDEN_SEEN_KEY, False):
        return []
    patterns = list(config.getini("crucible_golden_files"))
    shown = [display_path(config, path) for path in near[:NEAR_MISS_SHOWN]]
    more = f" (+{len(near) - NEAR_MISS_SHOWN} more)" if len(near) > NEAR_MISS_SHOWN else ""
    suggested: list[str] = []
    rename = None
    for path in near:
        name = path.name
        start = name.lower().index("golden")
        suffix = next(s for s in GOLDEN_LIKE_SUFFIXES if name.lower().endswith(s))
        word = name[start:start + len("golden")]
        before, after = name[:start], name[start + len("golden"):len(name) - len(suffix)]
        pattern = (f"{word}{after[:1]}*{suffix}" if not before and after else f"*{before[-1:]}{word}{suffix}" if before and not after
                   else f"*{word}*{suffix}")
        if pattern not in suggested and pattern not in patterns:
            suggested.append(pattern)
        if rename is None and suffix == ".jsonl":
            rest = re.sub(r"[-_. ]*golden[-_. ]*", "_", name[:-len(suffix)], flags=re.IGNORECASE).strip("_") or "set"
            candidate = f"golden_{rest}.jsonl"
            if any(fnmatch.fnmatch(candidate, p) for p in patterns):
                rename = f"{name} -> {candidate}"
    example = f" (e.g. {rename})" if rename else ""
    from .report.lines import alert

    return alert(
        f"WARNING no golden items collected: {len(near)}{'+' if len(near) >= NEAR_MISS_CAP else ''} file(s) look like golden "
        f"files but match no crucible_golden_files pattern ({', '.join(patterns) or 'none set'}): {', '.join(shown)}{more}",
        [f"HINT: rename them to match a pattern{example}, or set the patterns in your pytest configuration: "
         f"crucible_golden_files = {' '.join(patterns + suggested)}"],
    )


class GoldenFile(pytest.File):
    """A golden file: one test per item, in file order."""

    def collect(self) -> list[GoldenItemTest]:
        # Built with the cyclic garbage collector paused: the golden items and their tests live until the
        # session ends, yet the collections their allocation triggers would walk them, and every object
        # pytest holds, again and again while they are built (at 10,000 items, a third of what collecting
        # a golden file adds to collection). Then frozen as settle_collector freezes them before the tests:
        # the first full collection after would walk them all once more (at 10,000 items 0.15 s).
        from .json_input import gc_paused

        with gc_paused():
            tests = self._tests()
            if tests:
                freeze_collected(self.config)
        return tests

    def _tests(self) -> list[GoldenItemTest]:
        """One test per item of the file, or CollectError naming the file, the line and the field."""
        from .golden_set.schema import GoldenFileError, load_golden_file

        shown = display_path(self.config, self.path)
        try:
            items = load_golden_file(self.path, display_path=shown)
        except GoldenFileError as exc:
            raise self.CollectError(str(exc)) from None
        include_drafts = self.config.stash[SESSION_KEY].settings.include_drafts
        if not items:
            self.config.stash.setdefault(_EMPTY_GOLDEN_KEY, []).append(shown)
        # Every item of the file runs the same function with the same fixtures: their closure is worked out
        # once (as pytest does for the instances of one parametrized test), not once per item.
        fixtureinfo = (self.session._fixturemanager.getfixtureinfo(node=self, func=golden_file_test, cls=None)  # type: ignore[arg-type]  # any node works; pytest annotates Item
                       if items else None)
        tests = []
        kinds = self.config.stash[SESSION_KEY].settings.kinds
        for golden in items:
            claim_item_id(self.config, golden, shown, self.CollectError)
            test = GoldenItemTest.from_parent(self, name=golden.id, callobj=golden_file_test, fixtureinfo=fixtureinfo)
            test.stash[GOLDEN_ITEM_KEY] = golden
            test.golden_line = golden.line
            for mark in golden_marks(golden):
                test.add_marker(mark)
            if golden.status == "draft" and not include_drafts:
                test.add_marker(pytest.mark.skip(reason=DRAFT_REASON))
            tests.append(test)
        note_held(self.config, items, kinds)
        return tests


# -- the cyclic garbage collector around the tests ------------------------------------------
# CPython's own thresholds: only a collector nobody tuned is tuned here.
_DEFAULT_THRESHOLDS = (700, 10, 10)
# Young collections once per this many new container objects while the tests run, not per 700.
TEST_LOOP_YOUNG_THRESHOLD = 5_000
# What settle_collector changed, for restore_collector: (froze, thresholds to put back or None).
_COLLECTOR_KEY = pytest.StashKey[tuple[bool, tuple[int, int, int] | None]]()


def freeze_collected(config: pytest.Config) -> None:
    """Move what is alive now into the collector's permanent generation (restore_collector gives it back)."""
    gc.freeze()
    config.stash[_COLLECTOR_KEY] = (True, config.stash.get(_COLLECTOR_KEY, (False, None))[1])


def settle_collector(config: pytest.Config) -> None:
    """Before the tests run. What collection built (the items, their golden items, fixtures) lives until the
    session ends: frozen, the collector's full passes no longer walk it (at 10,000 items, a third of the time
    each item took). And each item leaves some fifty container objects alive for a while (its reports, the
    batch waiting to be written): at CPython's default the young collection runs every dozen items or so
    and moves what is alive at that moment into the older generations, whose passes are the cost (at 10,000
    items 0.45 s of collections while the tests run, 0.14 s with this threshold). The young threshold is
    raised only when it is CPython's default; both are given back by restore_collector."""
    freeze_collected(config)
    thresholds = gc.get_threshold()
    if thresholds == _DEFAULT_THRESHOLDS:
        gc.set_threshold(TEST_LOOP_YOUNG_THRESHOLD, *thresholds[1:])
        config.stash[_COLLECTOR_KEY] = (True, thresholds)


def restore_collector(config: pytest.Config) -> None:
    """At unconfigure: the collector as settle_collector found it (a process running pytest again, as
    pytester's in-process runs do, must get its memory and its own settings back)."""
    froze, thresholds = config.stash.get(_COLLECTOR_KEY, (False, None))
    if froze:
        gc.unfreeze()
    if thresholds is not None and gc.get_threshold() == (TEST_LOOP_YOUNG_THRESHOLD, *thresholds[1:]):
        gc.set_threshold(*thresholds)  # unless someone else set other values since
    config.stash[_COLLECTOR_KEY] = (False, None)


# -- the run's row, before the first test ------------------------------------------------------------------
# Options under which pytest collects but calls no test (--co, --setup-only, --setup-plan, --fixtures,
# --fixtures-per-test): such a session records no run and creates no store.
NO_PIPELINE_CALLS = ("collectonly", "setuponly", "setupplan", "showfixtures", "show_fixtures_per_test")


def calls_pipelines(config: pytest.Config) -> bool:
    """Whether this session calls tests at all (not --co, --setup-only, --fixtures ...)."""
    return not any(getattr(config.option, name, False) for name in NO_PIPELINE_CALLS)


def reserve_run(session: pytest.Session) -> None:
    """As the test loop starts: the run's row written (``CrucibleSession.reserve_run``: a SIGKILL before the first
    write batch still leaves a run; a fixed --crucible-run-id another session holds is refused, exit 4). Not when
    collection failed or refused the session (nothing runs, and nothing is created), nor when no golden item runs.
    Under xdist the controller collects nothing: it reserves when a worker has collected (the plugin's
    pytest_xdist_node_collection_finished)."""
    crucible = session.config.stash.get(SESSION_KEY, None)
    if crucible is None or not crucible.recorder.planned or not calls_pipelines(session.config):
        return
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        return
    from .store import RunIdTaken

    try:
        crucible.reserve_run()
    except RunIdTaken as exc:
        raise pytest.UsageError(str(exc)) from None


# -- SIGTERM: a cancel, not a crash ---------------------------------------------------------------------
#: The exit status of a session that SIGTERM stopped (128 + its number, what the shell reports for a process
#: the signal killed), once what finished is stored and the summary and junit are written.
SIGTERM_EXIT = 128 + 15


class Cancelled(KeyboardInterrupt):
    """Raised by crucible's SIGTERM handler where Ctrl-C raises KeyboardInterrupt: pytest stops the same way."""


class SigtermAsCancel:
    """Registered at configure: CI sends SIGTERM when a job is cancelled or times out, and by default that kills
    the process (exit 143, no summary, the finished items of the last write batch lost, the run left
    ``running``). From session start, in the main thread of the process that records the run (never an xdist
    worker), and only while SIGTERM has its default action (a plugin or conftest.py that set its own keeps
    it), SIGTERM raises :class:`Cancelled` instead: the session stops as on Ctrl-C (the finished items
    written, the run ``interrupted``, the summary and junit written), and exits 143 after that. Another
    SIGTERM meanwhile is noted only; one once the session is finishing does not interrupt the finish. The
    default action is put back at unconfigure."""

    def __init__(self) -> None:
        self.received = self.finishing = False
        self.installed: object = None

    def _on_sigterm(self, signum: int, frame: object) -> None:
        first, self.received = not self.received, True
        if first and not self.finishing:
            raise Cancelled("SIGTERM: the job was cancelled or timed out; stopping as on Ctrl-C")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        import signal
        import threading

        if hasattr(session.config, "workerinput") or threading.current_thread() is not threading.main_thread():
            return
        if getattr(signal, "SIGTERM", None) is None or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else's handler (or SIGTERM ignored on purpose): theirs stays
        self.installed = self._on_sigterm
        signal.signal(signal.SIGTERM, self._on_sigterm)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        self.finishing = True
        try:
            return (yield)
        finally:  # after every other sessionfinish, crucible's exit status included
            if self.received and self.installed is not None:
                session.exitstatus = SIGTERM_EXIT

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        import signal

        if self.installed is not None and signal.getsignal(signal.SIGTERM) == self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.installed = None

    def summary_lines(self) -> list[SummaryLine]:
        if not (self.received and self.installed is not None):
            return []
        from .report.lines import alert

        return alert(f"WARNING SIGTERM received (the job was cancelled or timed out): stopped as on Ctrl-C, the finished "
                     f"items are stored and the run is interrupted; exit status {SIGTERM_EXIT}")


# Item ids seen so far in this session -> where ("file:line"): ids are the pairing key of every comparison.
_SEEN_IDS_KEY = pytest.StashKey[dict]()


def claim_item_id(config: pytest.Config, golden: GoldenItem, shown: str, error: type[Exception]) -> None:
    """Refuse a golden item id already collected from another place: the store keeps one result per id,
    so the second would silently replace the first."""
    seen = config.stash.setdefault(_SEEN_IDS_KEY, {})
    here = f"{shown}:{golden.line}"
    if seen.setdefault(golden.id, here) != here:
        raise error(f"{here}: field 'id': duplicate id '{golden.id}' (also at {seen[golden.id]})\n"
                    "HINT: golden item ids must be unique across every golden file and @crucible.golden marker of the "
                    "session: they pair items between runs")


class GoldenItemTest(pytest.Function):
    """A golden item collected from a file; failures point at the item's line."""

    golden_line = 1

    def reportinfo(self):
        return self.path, max(self.golden_line - 1, 0), f"golden item {self.name}"

    def runtest(self) -> None:
        # Evaluated here, not through a test function taking ``request``: that fixture is built anew for
        # every test, a cost a 100,000-item set pays 100,000 times.
        __tracebackhide__ = True
        evaluate_node(self, self.funcargs["crucible_pipeline"], self.funcargs["crucible_config"])


def release_golden(item: pytest.Item) -> None:
    """Forget a collected golden item once its test has run (reruns included): it was recorded with its
    result, and 100,000 of them kept to the session's end cost more memory than pytest's own items."""
    if isinstance(item, GoldenItemTest) and GOLDEN_ITEM_KEY in item.stash:
        del item.stash[GOLDEN_ITEM_KEY]


def golden_file_test(crucible_pipeline, crucible_config) -> None:
    """The fixtures a collected golden item's test takes (the session's own: no function-scoped fixture to
    set up and tear down per item); :meth:`GoldenItemTest.runtest` evaluates the item with them."""


def evaluate_node(node: pytest.Function, pipeline, config) -> ItemScore:
    """Evaluate the golden item of the test ``node`` once, attach its score, and fail the test if the
    item fails; returns the :class:`ItemScore` (what ``crucible_evaluate()`` returns)."""
    __tracebackhide__ = True
    if SCORE_KEY in node.stash:
        return node.stash[SCORE_KEY]
    golden = node.stash.get(GOLDEN_ITEM_KEY, None)
    if golden is None:
        raise pytest.UsageError("crucible_evaluate needs a golden item: use it in a test marked @crucible.golden(path)")
    crucible = node.config.stash[SESSION_KEY]
    # Only answers need embeddings: component runs never build (or import) an embedder.
    embedder = node._request.getfixturevalue("crucible_embedder") if crucible.settings.judges_answers else None
    from .evaluation.concurrency import PipelineSignatureError

    usage = None
    try:
        verdict = crucible.evaluate(node.nodeid, golden, pipeline, config, embedder)
    except PipelineSignatureError as exc:  # the same for every item: one usage error, not N failures
        usage = str(exc)
    except pytest.fail.Exception as exc:
        # Stopped from outside the pipeline's own code: pytest-timeout's signal, or pytest.fail() in the pipeline. The
        # item is stored errored, with the reason, and the run is incomplete; pytest reports the failure as raised.
        from .evaluation.scoring import score_error

        crucible.note_stopped(golden.id)
        _attach(node, crucible, score_error(golden, f"stopped: {exc.msg}", None))
        raise
    if usage is not None:  # outside the except block: no "during handling" chain in the output
        stop_with_usage_error(node, usage)
    golden.forget_json()  # the score holds the item's JSON until it is recorded
    _attach(node, crucible, verdict.score)
    if verdict.error is not None:
        raise verdict.error  # the pipeline's own traceback is the useful one
    if verdict.failure:
        _fail(verdict.failure)
    return verdict.score


def _attach(node: pytest.Item, crucible: CrucibleSession, score: ItemScore) -> None:
    node.stash[SCORE_KEY] = score
    # junit <properties>: plain str/float only (they cross xdist and go into XML as text). An attempt pytest makes
    # again (pytest-rerunfailures) replaces the properties of the one before, and says which attempt it is.
    node.user_properties[:] = [prop for prop in node.user_properties if not str(prop[0]).startswith("crucible.")]
    node.user_properties.append(("crucible.itemId", score.item_id))
    attempt = getattr(node, "execution_count", 1)
    if attempt > 1:
        node.user_properties.append(("crucible.attempt", str(attempt)))
    node.user_properties.append(("crucible.configHash", crucible.settings.config_hash))
    if crucible.settings.uses_judge:
        node.user_properties.append(("crucible.judge", crucible.engine.judge.label))
    if score.error_class:
        node.user_properties.append(("crucible.errorClass", score.error_class))
    for name, value in score.metrics.items():
        node.user_properties.append((_property_name(name), float(value)))


@functools.lru_cache(maxsize=1024)
def _property_name(metric: str) -> str:
    """One string per metric's junit property name, shared by every item (not one copy per item)."""
    return f"crucible.{metric}"


def stop_with_usage_error(request: pytest.FixtureRequest | pytest.Item, message: str) -> None:
    """Stop the whole session with one usage error (``ERROR: ...``, exit 4, no traceback): pytest.exit
    leaves the test loop at once (no report for this item) and pytest_runtestloop turns it into a
    UsageError. An xdist worker cannot exit that way (the controller would crash): its item fails with
    the message alone, the worker stops, and its workeroutput takes the message to the controller (exit 4)."""
    __tracebackhide__ = True
    config = request.config
    config.stash[USAGE_ERROR_KEY] = message
    if hasattr(config, "workerinput"):
        request.session.shouldstop = "crucible: usage error (see the failure above)"
        _fail(message)
    pytest.exit(message.splitlines()[0], returncode=pytest.ExitCode.USAGE_ERROR)


def _fail(message: str) -> None:
    """Fail the item with the message alone. Deliberately not hidden: when every frame of a failure is
    hidden, pytest appends "All traceback entries are hidden. Pass `--full-trace`..." to the message."""
    pytest.fail(message, pytrace=False)


# -- what a session selected of its golden set ---------------------------------------------------
# Golden items the collected golden files and markers hold (rejected ones and other --crucible-kind kinds aside):
# a session that runs fewer is a partial selection (store.selection).
_HELD_KEY = pytest.StashKey[int]()


def golden_marks(golden: GoldenItem) -> list[pytest.MarkDecorator]:
    """The registered ``crucible`` marks of a golden item's test: one with its id, kind and question type (``-m crucible``,
    ``-m "crucible(kind='adversarial')"``), and one per tag (``-m "crucible(tag='topic:returns')"``)."""
    keywords = {"id": golden.id, "kind": golden.kind}
    if golden.question_type:
        keywords["questionType"] = golden.question_type
    return [pytest.mark.crucible(**keywords), *(pytest.mark.crucible(tag=tag) for tag in golden.tags)]


def note_held(config: pytest.Config, items: list[GoldenItem], kinds: tuple[str, ...] | None) -> None:
    held = sum(1 for golden in items if golden.status != "rejected" and (not kinds or golden.kind in kinds))
    config.stash[_HELD_KEY] = config.stash.get(_HELD_KEY, 0) + held


def selection_of_session(config: pytest.Config, ran: int) -> Selection | None:
    """What this session selected when it runs ``ran`` golden items (drafts included) of those its golden files hold:
    None for the whole set (``--ff`` and pytest-randomly only reorder), else a Selection naming what selected it."""
    from .store.selection import Selection

    held = config.stash.get(_HELD_KEY, 0)
    option = config.option
    by = []
    if getattr(option, "keyword", ""):
        by.append(f"-k {option.keyword}")
    if getattr(option, "markexpr", ""):
        by.append(f"-m {option.markexpr}")
    if getattr(option, "deselect", None):
        by.append("--deselect")
    cache = getattr(config, "cache", None)
    # --lf skips whole files that hold no failure: they are never collected, so their items are not counted above.
    last_failed = bool(getattr(option, "lf", False) and cache is not None and cache.get("cache/lastfailed", {}))
    if last_failed:
        by.append("--lf")
    if getattr(option, "stepwise", False) and ran < held:
        by.append("--sw")
    if getattr(option, "splits", None) and getattr(option, "group", None):
        by.append(f"pytest-split group {option.group} of {option.splits}")
    if any("::" in str(arg) for arg in config.args):
        by.append("node ids")
    if ran >= held and not last_failed:
        return None
    if not by:
        by.append("deselected by a plugin")  # a shard of pytest-split, say
    return Selection(ran, max(held, ran), ", ".join(by))


# pytest-repeat's parameter on the copies it makes of a test (--count N, @pytest.mark.repeat(N)).
_REPEAT_PARAM = "__pytest_repeat_step_number"


def refuse_repeat_copies(config: pytest.Config, is_worker: bool, items: list[pytest.Item]) -> None:
    """:func:`repeat_copies_refusal` on the collected ``items``. An xdist worker cannot raise a usage error from
    collection (the controller crashes): it runs nothing, and its workeroutput takes the message to the controller
    (exit 4, as pytest_testnodedown reads it), which prints it."""
    golden = [item for item in items if golden_of(item) is not None]
    if not golden:
        return
    try:
        repeat_copies_refusal(config, golden)
    except pytest.UsageError as exc:
        if not is_worker:
            raise
        config.stash[USAGE_ERROR_KEY] = config.stash[UNSHOWN_USAGE_KEY] = str(exc)
        config.hook.pytest_deselected(items=list(items))
        items[:] = []


def repeat_copies_refusal(config: pytest.Config, golden_tests: list[pytest.Item]) -> None:
    """pytest-repeat's ``--count N`` would run golden items N times into one run, each copy replacing the last (or, for
    a golden file's items, which it does not copy, be silently ignored): refused before any call, naming the option
    that repeats items the way a comparison can pair them."""
    count = getattr(config.option, "count", None)
    copied = next((item for item in golden_tests if _REPEAT_PARAM in getattr(getattr(item, "callspec", None), "params", {})), None)
    if (count is None or count == 1) and copied is None:
        return
    if count is not None and count != 1:
        n, what = count, f"--count {count}"
    else:
        assert isinstance(copied, pytest.Function)  # a parametrized copy (returned above when there is none)
        index = copied.callspec.params.get(_REPEAT_PARAM, 0)
        assert isinstance(index, int)  # pytest-repeat numbers its copies
        n, what = index + 1, f"@pytest.mark.repeat on {copied.nodeid}"
    if count is not None and count < 1:
        raise pytest.UsageError(f"{what}: pytest-repeat runs every test at least once, so golden items cannot be run {count} times\n"
                                "HINT: leave --count out, or repeat golden items with --crucible-repeat N (N >= 2)")
    raise pytest.UsageError(
        f"{what} (pytest-repeat) would run golden items as copies of one another in one run, each replacing the last\n"
        f"HINT: use --crucible-repeat {max(int(n or 2), 2)} instead: each item is called that many times and its mean over the "
        "repeats is what the gate pairs (docs/statistics.md); pytest-repeat can still repeat your other tests by marker")


def check_judge_cost(config: pytest.Config, crucible: CrucibleSession, golden: list) -> None:
    """Show what a paid judge will cost on the items that will run; refuse past --crucible-max-cost."""
    from .evaluation import cost_refusal
    from .judge.select import JudgeSetupError

    try:
        estimate = crucible.estimate_judge_cost(golden)
    except JudgeSetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    if estimate is None:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        known = " (before cache hits)" if not estimate.cached_requests else ""  # else: both figures, cold and after the cache
        reporter.write_line(f"crucible: {estimate.describe(crucible.engine.judge.model, crucible.settings.judge_batch)}{known}")
    refusal = cost_refusal(estimate, crucible.settings)
    if refusal:
        raise pytest.UsageError(refusal)


def deselect_unwanted(config: pytest.Config, kinds: tuple[str, ...] | None, items: list[pytest.Item]) -> None:
    """Deselect the golden items that must never reach the pipeline: rejected items (status "rejected",
    even with --crucible-include-drafts) and, under --crucible-kind, items of other kinds.

    Rejected items are deselected rather than skipped: a person decided they are not part of the set, so
    they are neither run nor counted with the drafts a run skips (pytest reports them as "deselected",
    as it does -k and --crucible-kind)."""
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        golden = golden_of(item)
        unwanted = golden is not None and (golden.status == "rejected" or (kinds is not None and len(kinds) > 0 and golden.kind not in kinds))
        (drop if unwanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def golden_of(item: pytest.Item) -> GoldenItem | None:
    """The golden item a test runs (a collected golden item, or a marked test's parameter)."""
    golden = item.stash.get(GOLDEN_ITEM_KEY, None)
    if golden is None:
        callspec = getattr(item, "callspec", None)
        golden = callspec.params.get("golden_item") if callspec is not None and item.get_closest_marker("crucible_golden") else None
    return golden


def _marker_path(metafunc: pytest.Metafunc, raw: str) -> Path:
    path = Path(raw)
    if path.is_absolute():
        return path
    beside_test = Path(metafunc.definition.path).parent / path
    return beside_test if beside_test.exists() else metafunc.config.rootpath / path


def marker_params(metafunc: pytest.Metafunc, marker: pytest.Mark, include_drafts: bool) -> list:
    """One ``pytest.param`` per golden item of the marker's files (filtered); a bad file or marker is
    a collection error naming the file, the line and the field."""
    from .golden_set.schema import GoldenFileError, filter_items, load_golden_file

    where = f"{metafunc.definition.nodeid}: @crucible.golden"
    if "golden_item" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(f"{where} needs a 'golden_item' argument on the test function\nHINT: def {metafunc.function.__name__}(golden_item): ...")
    if not marker.args:
        raise pytest.Collector.CollectError(f"{where} needs at least one golden file path\nHINT: @crucible.golden(\"golden/faq.jsonl\")")
    params = []
    held: list[GoldenItem] = []
    try:
        seen: dict[str, str] = {}
        for raw in marker.args:
            path = _marker_path(metafunc, str(raw))
            shown = display_path(metafunc.config, path)
            for golden in filter_items(load_golden_file(path, display_path=shown), dict(marker.kwargs), where):
                if golden.id in seen:
                    raise GoldenFileError(shown, golden.line, "id", f"duplicate id '{golden.id}' (also in {seen[golden.id]})", "ids must be unique across the files of one marker.")
                seen[golden.id] = shown
                claim_item_id(metafunc.config, golden, shown, pytest.Collector.CollectError)
                marks = golden_marks(golden)
                if golden.status == "draft" and not include_drafts:
                    marks.append(pytest.mark.skip(reason=DRAFT_REASON))
                params.append(pytest.param(golden, id=golden.id, marks=marks))
                held.append(golden)
    except GoldenFileError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    note_held(metafunc.config, held, metafunc.config.stash[SESSION_KEY].settings.kinds)
    return params
