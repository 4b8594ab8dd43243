"""pytest glue: options, collection, fixtures, hooks. Thin on purpose.

Golden items become tests in two ways: golden files matching ``crucible_golden_files``
are collected directly, and ``@crucible.golden(path, **filters)`` parametrizes a
test's ``golden_item`` argument. Both routes evaluate an item through the same
:func:`_evaluate`. Heavy modules (pydantic, numpy, the store) are imported only
once a golden item or a crucible option is actually used.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .golden_set import GoldenItem
    from .scoring import ItemScore
    from .session import CrucibleSession

DEFAULT_GOLDEN_PATTERNS = ["golden_*.jsonl", "*.golden.jsonl"]
DEFAULT_DB = ".crucible/crucible.db"
DRAFT_REASON = "draft golden item (run it with --crucible-include-drafts)"

SESSION_KEY = pytest.StashKey["CrucibleSession"]()
GOLDEN_ITEM_KEY = pytest.StashKey["GoldenItem"]()
REQUEST_KEY = pytest.StashKey[pytest.FixtureRequest]()
SCORE_KEY = pytest.StashKey["ItemScore"]()


class CrucibleWarning(pytest.PytestWarning):
    """Warnings from pytest-crucible."""


# -- options -----------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("crucible", "crucible: RAG golden sets as test suites")
    group.addoption("--crucible-config", dest="crucible_config", metavar="PATH", default=None,
                    help="JSON pipeline config the runner applies ({} = defaults); its hash identifies the run.")
    group.addoption("--crucible-db", dest="crucible_db", metavar="PATH", default=None,
                    help=f"SQLite results file (default: ini crucible_db, else {DEFAULT_DB} under the rootdir).")
    group.addoption("--crucible-mode", dest="crucible_mode", choices=["system", "component"], default=None,
                    help="system: full answers (default); component: retrieval only, no generation.")
    group.addoption("--crucible-outcome", dest="crucible_outcome", choices=["strict", "record"], default=None,
                    help="strict: an item fails on a missed required citation (default); record: only on pipeline errors.")
    group.addoption("--crucible-include-drafts", dest="crucible_include_drafts", action="store_true", default=False,
                    help="Run golden items whose status is draft (skipped by default).")
    group.addoption("--crucible-baseline", dest="crucible_baseline", metavar="RUN|latest|PATH.json", default=None,
                    help="Compare this run with a baseline at session end and fail on a significant regression.")
    group.addoption("--crucible-gate", dest="crucible_gate", metavar="METRIC[,METRIC...]", default=None,
                    help="Metrics whose significant regression fails the session (default: every metric measured).")
    group.addoption("--crucible-fail-under", dest="crucible_fail_under", metavar="METRIC=VALUE", action="append", default=[],
                    help="Absolute floor on a run mean, e.g. ndcgAt10=0.6 (repeatable; a ceiling for lower-is-better metrics).")
    group.addoption("--crucible-multiple", dest="crucible_multiple", choices=["none", "holm"], default="none",
                    help="Correction across the gated metrics' p-values (default none).")
    group.addoption("--crucible-seed", dest="crucible_seed", type=int, default=1337, metavar="N",
                    help="Seed of the bootstrap and permutation test (default 1337).")
    group.addoption("--crucible-allow-incomplete", dest="crucible_allow_incomplete", action="store_true", default=False,
                    help="Let the gate compare an incomplete or interrupted run (this one or the baseline) on the items "
                         "it has, instead of refusing.")
    group.addoption("--crucible-judge", dest="crucible_judge", choices=["auto", "lexical", "anthropic"], default=None,
                    help="Judge of the answer layer: anthropic (Claude), lexical (offline heuristic), auto (default: "
                         "anthropic when ANTHROPIC_API_KEY is set, else lexical).")
    group.addoption("--crucible-judge-model", dest="crucible_judge_model", metavar="MODEL", default=None,
                    help="Claude model of the anthropic judge (default: ini crucible_judge_model, else the current small model).")
    group.addoption("--crucible-judge-batch", dest="crucible_judge_batch", action="store_true", default=False,
                    help="Send judge requests as Message Batches at session end (50%% cheaper, answer metrics arrive at the end).")
    group.addoption("--crucible-judge-cache", dest="crucible_judge_cache", choices=["readwrite", "read", "off"], default="readwrite",
                    help="Judge verdict cache in the database (default readwrite: a re-run of unchanged items makes no judge calls).")
    group.addoption("--crucible-label-pool", dest="crucible_label_pool", action="store_true", default=False,
                    help="Grade retrieved chunks nobody has judged yet (UMBRELA-style, 0-3) into the qrels ledger.")
    group.addoption("--crucible-concurrency", dest="crucible_concurrency", type=int, metavar="N", default=None,
                    help="Call the pipeline for up to N items at once ahead of their tests (needs a session-scoped "
                         "crucible_pipeline; default: ini crucible_concurrency, else 1).")
    group.addoption("--crucible-html", dest="crucible_html", metavar="PATH", default=None,
                    help="Write the run as one self-contained HTML report (with the comparison when --crucible-baseline is given).")
    group.addoption("--crucible-run-id", dest="crucible_run_id", metavar="ID", default=None,
                    help="Give this run a fixed id, so CI shards of one suite share it (join them with `crucible merge`).")
    group.addoption("--crucible-max-cost", dest="crucible_max_cost", type=float, metavar="USD", default=None,
                    help="Refuse to start a run whose estimated judge cost exceeds USD.")
    group.addoption("--crucible-kind", dest="crucible_kind", metavar="KIND[,KIND...]", action="append", default=[],
                    help="Run only golden items of these kinds: retrieval, aggregation, adversarial (repeatable; "
                         "default every kind). The others are deselected and never reach the pipeline.")
    group.addoption("--crucible-label", dest="crucible_label", metavar="KEY=VALUE", action="append", default=[],
                    help="Tag the run, e.g. model=claude-haiku, collection=helpdesk, mode=hybrid (repeatable; "
                         "overrides the config's \"labels\"; never part of the configHash).")
    group.addoption("--crucible-workspace", dest="crucible_workspace", metavar="NAME", default=None,
                    help="Workspace the run belongs to (default: ini crucible_workspace, else the rootdir's name).")
    parser.addini("crucible_workspace", default="", help="Workspace of the runs (default: the rootdir's name).")
    parser.addini("crucible_concurrency", default="1", help="Pipeline calls in flight at once.")
    parser.addini("crucible_judge", default="auto", help="auto, lexical or anthropic.")
    parser.addini("crucible_judge_model", default="", help="Claude model of the anthropic judge.")
    parser.addini("crucible_golden_files", type="args", default=DEFAULT_GOLDEN_PATTERNS,
                  help="Glob patterns of golden files collected as tests.")
    parser.addini("crucible_db", default="", help=f"SQLite results file, relative to the rootdir (default {DEFAULT_DB}).")
    parser.addini("crucible_config", default="", help="Default pipeline config file, relative to the rootdir.")
    parser.addini("crucible_mode", default="system", help="system or component.")
    parser.addini("crucible_outcome", default="strict", help="strict or record: when an item fails.")


def _choice(config: pytest.Config, option: str, ini: str, allowed: tuple[str, ...]) -> str:
    value = config.getoption(option) or config.getini(ini) or allowed[0]
    if value not in allowed:
        raise pytest.UsageError(f"ini option {ini} = {value!r}: expected one of {', '.join(allowed)}\nHINT: fix it in your pytest configuration file.")
    return value


def _build_session(config: pytest.Config) -> "CrucibleSession":
    from .config import ConfigError, config_hash, load_config_file, resolve_config
    from .session import CrucibleSession, Settings

    rootdir = config.rootpath
    config_path = config.getoption("crucible_config")
    if not config_path and config.getini("crucible_config"):
        config_path = str(rootdir / config.getini("crucible_config"))
    try:
        params, resolved = load_config_file(config_path) if config_path else ({}, resolve_config({}))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    db_option = config.getoption("crucible_db")
    db_path = Path(db_option) if db_option else rootdir / (config.getini("crucible_db") or DEFAULT_DB)
    settings = Settings(
        params=params,
        resolved=resolved,
        config_hash=config_hash(resolved),
        config_path=config_path,
        db_path=db_path.absolute(),
        mode=_choice(config, "crucible_mode", "crucible_mode", ("system", "component")),
        outcome_mode=_choice(config, "crucible_outcome", "crucible_outcome", ("strict", "record")),
        include_drafts=bool(config.getoption("crucible_include_drafts")),
        golden_patterns=tuple(config.getini("crucible_golden_files")),
        rootdir=rootdir,
        pytest_args=tuple(str(arg) for arg in config.invocation_params.args),
        judge=_choice(config, "crucible_judge", "crucible_judge", ("auto", "lexical", "anthropic")),
        judge_model=config.getoption("crucible_judge_model") or config.getini("crucible_judge_model") or None,
        judge_batch=bool(config.getoption("crucible_judge_batch")),
        judge_cache=config.getoption("crucible_judge_cache"),
        max_cost=config.getoption("crucible_max_cost"),
        label_pool=bool(config.getoption("crucible_label_pool")),
        run_id=_run_id_option(config, db_path.absolute()),
        concurrency=_concurrency(config),
        workspace=_workspace(config),
        labels=_labels(config, params, resolved),
        kinds=_kinds(config),
        **_gate_settings(config, db_path.absolute()),
    )
    if settings.mode == "system" and settings.judge == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        raise pytest.UsageError(
            "--crucible-judge=anthropic needs an API key: ANTHROPIC_API_KEY is not set\n"
            "HINT: export ANTHROPIC_API_KEY=..., or use the offline judge with --crucible-judge=lexical"
        )
    return CrucibleSession(settings=settings, is_worker=hasattr(config, "workerinput"))


KINDS = ("retrieval", "aggregation", "adversarial")


def _workspace(config: pytest.Config) -> str:
    """--crucible-workspace, else CRUCIBLE_WORKSPACE, else ini crucible_workspace, else the rootdir's name
    (the same order the CLI reads, see workspace.py)."""
    from .workspace import ENV_VAR, FALLBACK

    return (config.getoption("crucible_workspace") or os.environ.get(ENV_VAR, "").strip()
            or config.getini("crucible_workspace") or config.rootpath.name or FALLBACK)


def _kinds(config: pytest.Config) -> tuple[str, ...] | None:
    kinds = [part.strip() for value in config.getoption("crucible_kind") for part in value.split(",") if part.strip()]
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise pytest.UsageError(f"--crucible-kind={unknown[0]}: expected one of {', '.join(KINDS)}\n"
                                "HINT: e.g. --crucible-kind=retrieval,adversarial")
    return tuple(sorted(set(kinds))) if kinds else None


def _labels(config: pytest.Config, params: dict[str, Any], resolved: dict[str, Any]) -> dict[str, str]:
    """model, collection and mode always, then the config's labels, then --crucible-label."""
    from .config import parse_label_options, run_labels

    # "mode" is the retrieval mode under test (e.g. dense-only vs hybrid+rerank); only the user knows it.
    labels = {"model": str(resolved.get("chatModelSlot", "")), "collection": config.rootpath.name, "mode": "default"}
    labels.update(run_labels(params))
    try:
        labels.update(parse_label_options(config.getoption("crucible_label")))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    return labels


def _concurrency(config: pytest.Config) -> int:
    raw = config.getoption("crucible_concurrency")
    if raw is None:
        raw = config.getini("crucible_concurrency") or 1
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise pytest.UsageError(f"crucible concurrency {raw!r}: expected a positive integer\nHINT: --crucible-concurrency=16")
    return value


def _run_id_option(config: pytest.Config, db_path: Path) -> str | None:
    run_id = config.getoption("crucible_run_id")
    if not run_id or hasattr(config, "workerinput"):
        return run_id
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", run_id):
        raise pytest.UsageError(f"--crucible-run-id={run_id!r}: use letters, digits and . _ : - (at most 64)\n"
                                "HINT: e.g. --crucible-run-id=$CI_PIPELINE_ID")
    from .store import read_only_rows

    if read_only_rows(db_path, "SELECT id FROM runs WHERE id = ?", [run_id]):
        raise pytest.UsageError(f"--crucible-run-id={run_id}: {db_path} already has a run with this id\n"
                                "HINT: each shard writes its own database; join them with `crucible merge SHARD.db ... -o RUN.db`")
    return run_id


def _parse_floors(values: list[str]) -> tuple[tuple[str, float], ...]:
    floors = []
    for value in values:
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, number = part.partition("=")
            try:
                if not sep or not name:
                    raise ValueError
                floors.append((name.strip(), float(number)))
            except ValueError:
                raise pytest.UsageError(f"--crucible-fail-under {part!r}: expected METRIC=VALUE\nHINT: e.g. --crucible-fail-under ndcgAt10=0.6") from None
    return tuple(floors)


def _gate_settings(config: pytest.Config, db_path: Path) -> dict[str, Any]:
    """The gate options, with the baseline checked before any test runs."""
    baseline = config.getoption("crucible_baseline")
    gate = config.getoption("crucible_gate")
    allow_incomplete = bool(config.getoption("crucible_allow_incomplete"))
    export = None
    if baseline and not hasattr(config, "workerinput"):
        from .store import Store, StoreError, read_export

        shown = baseline
        try:
            if baseline.endswith(".json") or Path(baseline).is_file():
                export = read_export(baseline)
                run = export["run"]
            else:
                store = Store.open(db_path, create=False)
                try:
                    resolved = store.resolve_run(baseline, workspace=_workspace(config))  # "latest": of this workspace
                    run = store.get_run(resolved)
                finally:
                    store.close()
                # "latest" is resolved again at session end, excluding this run.
                baseline = baseline if baseline == "latest" else resolved
        except StoreError as exc:
            raise pytest.UsageError(f"--crucible-baseline={shown}: {exc}") from None
        if run["status"] != "complete" and not allow_incomplete:
            why = {"incomplete": "some of its items have no judge-based metrics", "interrupted": "it stopped part way",
                   "running": "it has not finished"}.get(run["status"], "it did not complete")
            raise pytest.UsageError(
                f"--crucible-baseline={shown}: run {run['id']} is {run['status']} ({why}); refusing to compare against it\n"
                "HINT: pick a complete run (`crucible runs`), or pass --crucible-allow-incomplete to compare the items it has")
    return {
        "baseline": baseline,
        "baseline_export": export,
        "gate": tuple(filter(None, (name.strip() for name in gate.split(",")))) if gate else None,
        "floors": _parse_floors(config.getoption("crucible_fail_under")),
        "multiple": config.getoption("crucible_multiple"),
        "seed": config.getoption("crucible_seed"),
        "allow_incomplete": allow_incomplete,
    }


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "crucible_golden(*paths, **filters): parametrize the test's golden_item argument with the items of "
        "golden files (paths relative to the test file), optionally filtered by item fields.",
    )
    crucible = _build_session(config)
    config.stash[SESSION_KEY] = crucible
    config.pluginmanager.register(_Recorder(crucible), "crucible-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    crucible = config.stash.get(SESSION_KEY, None)
    if crucible is not None:
        crucible.close()
    recorder = config.pluginmanager.get_plugin("crucible-recorder")
    if recorder is not None:
        config.pluginmanager.unregister(recorder)


def _crucible(config: pytest.Config) -> "CrucibleSession":
    return config.stash[SESSION_KEY]


# -- collection: golden files ---------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("crucible_golden_files")
    if any(fnmatch.fnmatch(file_path.name, pattern) for pattern in patterns):
        return GoldenFile.from_parent(parent, path=file_path)
    return None


def _display_path(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


class GoldenFile(pytest.File):
    """A golden file: one test per item, in file order."""

    def collect(self):
        from .golden_set import GoldenFileError, load_golden_file

        try:
            items = load_golden_file(self.path, display_path=_display_path(self.config, self.path))
        except GoldenFileError as exc:
            raise self.CollectError(str(exc)) from None
        include_drafts = _crucible(self.config).settings.include_drafts
        for golden in items:
            test = GoldenItemTest.from_parent(self, name=golden.id, callobj=_golden_file_test)
            test.stash[GOLDEN_ITEM_KEY] = golden
            if golden.status == "draft" and not include_drafts:
                test.add_marker(pytest.mark.skip(reason=DRAFT_REASON))
            yield test


class GoldenItemTest(pytest.Function):
    """A golden item collected from a file; failures point at the item's line."""

    def reportinfo(self):
        golden = self.stash[GOLDEN_ITEM_KEY]
        return self.path, max(golden.line - 1, 0), f"golden item {golden.id}"


def _golden_file_test(crucible_evaluate) -> None:
    __tracebackhide__ = True
    crucible_evaluate()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    crucible = config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    _deselect_kinds(config, crucible.settings.kinds, items)
    if crucible.is_worker or not crucible.uses_judge:
        return
    golden = [_golden_of(item) for item in items]
    golden = [g for g in golden if g is not None and (g.status != "draft" or crucible.settings.include_drafts)]
    if not golden:
        return
    from .judge.select import JudgeSetupError

    try:
        judge = crucible.engine.judge
    except JudgeSetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not judge.paid:
        return
    from .answers import estimate_answer_layer_cost

    s = crucible.settings
    estimate = estimate_answer_layer_cost(golden, k=s.retrieval_limit, token_budget=int(s.resolved["retrieval"]["tokenBudget"]),
                                          model=judge.model, batch=s.judge_batch, answers=crucible.judges_answers,
                                          label_pool=s.label_pool)
    crucible.cost_estimate = estimate
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"crucible: {estimate.describe(judge.model, s.judge_batch)} (before cache hits)")
    if s.max_cost is not None and (estimate.cost_usd is None or estimate.cost_usd > s.max_cost):
        shown = "unknown (no price for this model)" if estimate.cost_usd is None else f"${estimate.cost_usd:.2f}"
        raise pytest.UsageError(
            f"--crucible-max-cost={s.max_cost}: the estimated judge cost {shown} exceeds it; the run was not started\n"
            "HINT: select fewer items (-k, a marker filter), use --crucible-judge-batch (50% off), "
            "--crucible-mode=component (no judge), or raise the limit"
        )


def _deselect_kinds(config: pytest.Config, kinds: tuple[str, ...] | None, items: list[pytest.Item]) -> None:
    """--crucible-kind: golden items of other kinds are deselected, so their pipeline is never called."""
    if not kinds:
        return
    keep, drop = [], []
    for item in items:
        golden = _golden_of(item)
        (drop if golden is not None and golden.kind not in kinds else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _golden_of(item: pytest.Item):
    golden = item.stash.get(GOLDEN_ITEM_KEY, None)
    if golden is None:
        callspec = getattr(item, "callspec", None)
        golden = callspec.params.get("golden_item") if callspec is not None and item.get_closest_marker("crucible_golden") else None
    return golden


# -- collection: the marker -----------------------------------------------------------------
def _marker_paths(metafunc: pytest.Metafunc, raw: str) -> Path:
    path = Path(raw)
    if path.is_absolute():
        return path
    beside_test = Path(metafunc.definition.path).parent / path
    return beside_test if beside_test.exists() else metafunc.config.rootpath / path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("crucible_golden")
    if marker is None:
        return
    from .golden_set import GoldenFileError, filter_items, load_golden_file

    where = f"{metafunc.definition.nodeid}: @crucible.golden"
    if "golden_item" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(f"{where} needs a 'golden_item' argument on the test function\nHINT: def {metafunc.function.__name__}(golden_item): ...")
    if not marker.args:
        raise pytest.Collector.CollectError(f"{where} needs at least one golden file path\nHINT: @crucible.golden(\"golden/faq.jsonl\")")
    include_drafts = _crucible(metafunc.config).settings.include_drafts
    params = []
    try:
        seen: dict[str, str] = {}
        for raw in marker.args:
            path = _marker_paths(metafunc, str(raw))
            shown = _display_path(metafunc.config, path)
            for golden in filter_items(load_golden_file(path, display_path=shown), marker.kwargs, where):
                if golden.id in seen:
                    raise GoldenFileError(shown, golden.line, "id", f"duplicate id '{golden.id}' (also in {seen[golden.id]})", "ids must be unique across the files of one marker.")
                seen[golden.id] = shown
                marks = [pytest.mark.skip(reason=DRAFT_REASON)] if golden.status == "draft" and not include_drafts else []
                params.append(pytest.param(golden, id=golden.id, marks=marks))
    except GoldenFileError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    metafunc.parametrize("golden_item", params, indirect=True)


@pytest.fixture
def golden_item(request: pytest.FixtureRequest):
    """The golden item of this test (parametrized by ``@crucible.golden``)."""
    if not hasattr(request, "param"):
        raise pytest.UsageError("the golden_item fixture is only available on tests marked @crucible.golden(path)")
    request.node.stash[GOLDEN_ITEM_KEY] = request.param
    request.node.stash[REQUEST_KEY] = request
    return request.param


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    # Marker route: the item is evaluated before the test body, which may then read
    # the score through crucible_evaluate() and add its own assertions.
    request = item.stash.get(REQUEST_KEY, None)
    if request is not None and SCORE_KEY not in item.stash:
        request.getfixturevalue("crucible_evaluate")()
    return (yield)


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def crucible_pipeline():
    """Placeholder: the user's conftest.py must define this fixture."""
    raise pytest.UsageError(
        "no crucible_pipeline fixture: define one in conftest.py that returns a callable\n"
        "    pipeline(question, *, item, config, mode) -> crucible.PipelineResult | dict\n"
        "HINT: see the README quickstart."
    )


@pytest.fixture(scope="session")
def crucible_config(pytestconfig: pytest.Config):
    """The resolved pipeline config (a dict that remembers which keys were read)."""
    return _crucible(pytestconfig).tracked_config


@pytest.fixture(scope="session")
def crucible_embedder():
    """Embeddings for responseRelevancy. Override in conftest.py to plug in a real model:
    any object with ``embed(texts) -> numpy array`` (rows L2-normalised) and a ``name``."""
    from .embed import HashingEmbedder

    return HashingEmbedder()


@pytest.fixture
def crucible_evaluate(request: pytest.FixtureRequest, crucible_pipeline, crucible_config):
    """Evaluate this test's golden item once; returns its :class:`ItemScore`."""
    node = request.node

    def evaluate() -> "ItemScore":
        __tracebackhide__ = True
        if SCORE_KEY in node.stash:
            return node.stash[SCORE_KEY]
        golden = node.stash.get(GOLDEN_ITEM_KEY, None)
        if golden is None:
            raise pytest.UsageError("crucible_evaluate needs a golden item: use it in a test marked @crucible.golden(path)")
        crucible = _crucible(request.config)
        # Only answers need embeddings: component runs never build (or import) an embedder.
        embedder = request.getfixturevalue("crucible_embedder") if crucible.judges_answers else None
        return _evaluate(crucible, node, golden, crucible_pipeline, crucible_config, embedder)

    return evaluate


def _evaluate(crucible: "CrucibleSession", node: pytest.Item, golden: "GoldenItem", pipeline, config, embedder) -> "ItemScore":
    """Run the pipeline on one golden item, score it, and decide the item's outcome."""
    from .pipeline import PipelineResultError, coerce_result
    from .scoring import OUTCOME_STRICT, classify_score, score_error, score_item

    settings = crucible.settings
    crucible.evaluated += 1
    outcome = crucible.run_pipeline(node.nodeid, golden, pipeline, config, selected=lambda: _selected_golden(node.session))
    latency = round(outcome.latency_ms, 3)
    if outcome.error is not None:
        _attach(node, crucible, score_error(golden, f"{type(outcome.error).__name__}: {outcome.error}", latency))
        raise outcome.error  # the pipeline's own traceback is the useful one
    raw = outcome.value
    try:
        result = coerce_result(raw)
    except PipelineResultError as exc:
        result, invalid = None, str(exc)
    if result is None:
        _attach(node, crucible, score_error(golden, invalid, latency))
        pytest.fail(f"golden item {golden.id}: {invalid}", pytrace=False)
    ledger = crucible.ledger_rows(golden.id)
    labelled, label_errors = [], []
    if settings.label_pool:
        from .pool import label_pool
        from .scoring import item_judgments

        labelled, label_errors = label_pool(golden, result, settings.retrieval_limit, item_judgments(golden, ledger), crucible.engine)
    score = score_item(golden, result, k=settings.retrieval_limit, latency_ms=latency, ledger_rows=[*ledger, *labelled])
    score.qrels_rows, score.judge_errors = labelled, label_errors
    # A blocked question has no answer to judge: its outcome is the guardrail metrics' business.
    if crucible.judges_answers and not score.blocked:
        from .metrics.crag import is_abstention

        score.abstained = score.abstained or is_abstention(score.answer)
        if not settings.judge_batch:
            crucible.score_answer_layer(score, embedder)
    if crucible.uses_judge:
        score.cache_rows = crucible.engine.drain_cache_rows()
    if not score.blocked and not score.judge_errors and not (crucible.judges_answers and settings.judge_batch):
        score.error_class, score.error_evidence = classify_score(score.to_plain(), mode=settings.mode)
    _attach(node, crucible, score)
    if score.judge_errors:
        # In every outcome mode: an item whose judging failed is an error, never a silent pass.
        pytest.fail(f"golden item {golden.id}: judge failed after retries: " + "; ".join(score.judge_errors), pytrace=False)
    if settings.outcome_mode == OUTCOME_STRICT:
        _fail_strict(golden, score)
    return score


def _fail_strict(golden: "GoldenItem", score: "ItemScore") -> None:
    """Strict outcome: a non-correct item fails with its error class and the evidence."""
    from .answers import unsatisfied_must_assertions

    details = [*score.failures, *unsatisfied_must_assertions(score.assertions)]
    if score.guardrail_failure:  # the guardrail outcome is judged on its own, whatever the answer layer says
        headline = [score.guardrail_failure]
    elif score.error_class is None:  # answer classes arrive at session end (batches): judge retrieval now
        headline = details[:1]
    elif score.error_class != "correct":
        headline = [f"{score.error_class}: {score.error_evidence}"]
    else:
        headline = []
    if headline:
        lines = headline + [detail for detail in details if detail not in headline]
        pytest.fail(f"golden item {golden.id}: " + "\n".join(lines), pytrace=False)


def _selected_golden(session: pytest.Session) -> list[tuple[str, "GoldenItem"]]:
    """The golden items this session will run, in run order (deselected and skipped ones left out)."""
    selected = []
    for item in session.items:
        golden = _golden_of(item)
        if golden is not None and item.get_closest_marker("skip") is None:
            selected.append((item.nodeid, golden))
    return selected


def _attach(node: pytest.Item, crucible: "CrucibleSession", score: "ItemScore") -> None:
    node.stash[SCORE_KEY] = score
    # junit <properties>: plain str/float only (they cross xdist and go into XML as text).
    node.user_properties.append(("crucible.itemId", score.item_id))
    node.user_properties.append(("crucible.configHash", crucible.settings.config_hash))
    if crucible.uses_judge:
        node.user_properties.append(("crucible.judge", crucible.engine.judge.label))
    if score.error_class:
        node.user_properties.append(("crucible.errorClass", score.error_class))
    for name, value in score.metrics.items():
        node.user_properties.append((f"crucible.{name}", float(value)))


# -- reporting and recording -------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    score = item.stash.get(SCORE_KEY, None)
    if call.when == "call" and score is not None:
        plain = score.to_plain()
        plain["outcome"] = "error" if score.error or score.judge_errors else report.outcome
        # A plain dict on the report travels to the xdist controller with it.
        report.crucible_score = plain
        del item.stash[SCORE_KEY]
    return report


class _Recorder:
    """Per-config hook object: pytest_runtest_logreport receives no config, so the
    session is bound here (as pytest's own junitxml does)."""

    def __init__(self, crucible: "CrucibleSession"):
        self.crucible = crucible

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        score = getattr(report, "crucible_score", None)
        if score is not None and report.when == "call":
            self.crucible.record(score)
            if not self.crucible.is_worker:
                # The terminal reporter keeps every report for the whole session: once stored,
                # the score need not ride along (memory on large sets). A worker must keep it:
                # the report still has to travel to the controller.
                del report.crucible_score


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    # xdist controller: the pipeline ran on the workers, so their config reads and
    # evaluation counts come back here (plain types only) for the unread-key warning.
    crucible = node.config.stash.get(SESSION_KEY, None)
    output = getattr(node, "workeroutput", {}).get("crucible")
    if crucible is not None and output:
        crucible.config_reads.update(output["reads"])
        crucible.evaluated += output["evaluated"]
        for name, value in output.get("judge", {}).items():
            crucible.worker_judge[name] = crucible.worker_judge.get(name, 0) + value


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    crucible = session.config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    crucible.stop_pipeline_calls()
    if crucible.is_worker:
        session.config.workeroutput["crucible"] = {
            "reads": sorted(crucible.config_reads),
            "evaluated": crucible.evaluated,
            "judge": {name: float(value) for name, value in crucible.judge_summary().items()},
        }
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and crucible.progress_writer is None:
        crucible.progress_writer = lambda line: (reporter.ensure_newline(), reporter.write_line(line))
    try:
        crucible.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - never raise out of sessionfinish
        crucible.faults.append(f"could not finish the run in {crucible.settings.db_path}: {exc}")
    try:
        if crucible.apply_gate() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    except Exception as exc:  # noqa: BLE001 - a comparison that cannot run is a fault, not a pass
        crucible.faults.append(f"could not compare with the baseline: {type(exc).__name__}: {exc}")
    html_path = session.config.getoption("crucible_html")
    if html_path and crucible.run_id is not None:
        try:
            from .report.html import render_report, write_report

            s = crucible.settings
            # The same baseline, seed and refusal as the gate, so the page and the exit code agree.
            refusal = crucible.gate_refusal or crucible.gate_skipped
            write_report(html_path, render_report(crucible.store, crucible.run_id, against=s.baseline, seed=s.seed,
                                                  multiple=s.multiple, workspace=s.workspace, refusal=refusal))
        except Exception as exc:  # noqa: BLE001 - a report that cannot be written is a fault, not a crash
            crucible.faults.append(f"could not write the HTML report to {html_path}: {type(exc).__name__}: {exc}")
    # An incomplete run never passes: with Message Batches its items passed before the judge failed them.
    if (crucible.faults or crucible.status == "incomplete") and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _markup(line: str) -> dict[str, bool]:
    """Colour where the terminal supports it: red for regressions and faults, green for improvements."""
    if line.startswith(("WARNING", "FAULT", "GATE FAILED", "JUDGE ERROR")) or line.rstrip().endswith(("regressed", "regressed [not gated]", "GATE FAILED")):
        return {"red": True}
    if line.rstrip().endswith(("improved", "improved [not gated]", "gate passed")) or line.startswith("gate passed"):  # -q ends with it
        return {"green": True}
    return {}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    crucible = config.stash.get(SESSION_KEY, None)
    if crucible is None:
        return
    try:
        lines = crucible.summary_lines(verbose=config.get_verbosity())
    except Exception as exc:  # noqa: BLE001 - the summary must never crash pytest
        lines = [f"crucible: could not read the run back from {crucible.settings.db_path}: {exc}"]
    if not lines:
        return
    if config.get_verbosity() >= 0:
        terminalreporter.write_sep("=", "crucible")
    for line in lines:
        markup = _markup(line)
        terminalreporter.write_line(line, **markup)
