"""Options, ini keys and the config file -> the frozen :class:`~pytest_crucible.settings.Settings`.

The only module that reads pytest's options. Every bad value is a ``pytest.UsageError`` naming the
option and what was expected, with a HINT, raised before any test runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .defaults import (
    CHANGED_ITEMS,
    CHANGED_ITEMS_CHOICES,
    CONVERSATION_CHOICES,
    DEFAULT_DB,
    DEFAULT_JUDGE,
    DEFAULT_K,
    DEFAULT_SEED,
    JUDGE_CHOICES,
    KINDS,
    MIN_PAIRS,
    MULTIPLE,
    MULTIPLE_CHOICES,
)

if TYPE_CHECKING:
    from .evaluation.custom_metrics import Rubric
    from .settings import Settings
    from .store.postgres import DatabaseURL

DEFAULT_GOLDEN_PATTERNS = ["golden_*.jsonl", "*.golden.jsonl"]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("crucible", "crucible: RAG golden sets as test suites")
    group.addoption("--crucible-config", dest="crucible_config", metavar="PATH", default=None,
                    help="JSON pipeline config the runner applies ({} = defaults); its hash identifies the run.")
    group.addoption("--crucible-db", dest="crucible_db", metavar="PATH|URL", default=None,
                    help="The results database: a SQLite file, or a PostgreSQL URL (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB; "
                         f"needs the postgres extra). Default: CRUCIBLE_DB, else ini crucible_db, else {DEFAULT_DB} under the rootdir.")
    group.addoption("--crucible-mode", dest="crucible_mode", choices=["system", "component"], default=None,
                    help="system: full answers (default); component: retrieval only, no generation.")
    group.addoption("--crucible-outcome", dest="crucible_outcome", choices=["strict", "record"], default=None,
                    help="strict: an item fails on a missed required citation (default); record: only on pipeline errors.")
    group.addoption("--crucible-include-drafts", dest="crucible_include_drafts", action="store_true", default=False,
                    help="Run golden items whose status is draft (skipped by default).")
    group.addoption("--crucible-baseline", dest="crucible_baseline", metavar="RUN|latest[:KEY=VALUE,...]|PATH.json", default=None,
                    help="Compare this run with a baseline at session end and fail on a significant regression: a run id, "
                         "latest (the newest complete run of the workspace), latest:KEY=VALUE[,KEY=VALUE...] (the newest "
                         "complete run with those labels, e.g. latest:branch=main; workspace=NAME reads that workspace), "
                         "or an exported run.")
    group.addoption("--crucible-gate", dest="crucible_gate", metavar="METRIC[,METRIC...]", default=None,
                    help="Metrics whose significant regression fails the session (default: every metric measured). "
                         "Needs --crucible-baseline: without one the session says the gate was not evaluated "
                         "(refused, exit 3, under ini crucible_strict_config).")
    group.addoption("--crucible-margin", dest="crucible_margin", metavar="METRIC=DROP", action="append", default=[],
                    help="Non-inferiority margin, e.g. ndcgAt10=0.02: the metric passes only when its interval rules out "
                         "a drop larger than DROP; otherwise it is inferior or inconclusive, and the gate fails "
                         "(repeatable; adds to ini crucible_margins).")
    group.addoption("--crucible-fail-under", dest="crucible_fail_under", metavar="METRIC=VALUE", action="append", default=[],
                    help="Absolute floor on a run mean, e.g. ndcgAt10=0.6 (repeatable; a ceiling for lower-is-better metrics).")
    group.addoption("--crucible-multiple", dest="crucible_multiple", choices=list(MULTIPLE_CHOICES), default=MULTIPLE,
                    help="Correction of the p-values across the gated metrics (the family): holm (default) keeps the "
                         "chance of a false regression anywhere in the family at or below 0.05; none tests each metric "
                         "at full alpha.")
    group.addoption("--crucible-seed", dest="crucible_seed", type=int, default=DEFAULT_SEED, metavar="N",
                    help=f"Seed of the bootstrap and permutation test (default {DEFAULT_SEED}).")
    group.addoption("--crucible-rescore", dest="crucible_rescore", action="store_true", default=False,
                    help="Score this run's and the baseline's retrieval metrics from their stored rankings against today's "
                         "relevance grades, so a judgment added between the runs does not move the ruler.")
    group.addoption("--crucible-changed-items", dest="crucible_changed_items", choices=list(CHANGED_ITEMS_CHOICES), default=None,
                    help="What the gate does with a golden item edited under its id since the baseline (its question, "
                         "reference, assertions, answerable, kind or expected tools differ): exclude leaves it out of the pairs and says "
                         "so (default), include compares it anyway with a note, refuse refuses the gate (exit 3). A change "
                         f"of citations alone keeps the item paired (see --crucible-rescore). Default: ini crucible_changed_items, else {CHANGED_ITEMS}.")
    group.addoption("--crucible-allow-incomplete", dest="crucible_allow_incomplete", action="store_true", default=False,
                    help="Let the gate compare an incomplete or interrupted run (this one or the baseline) on the items "
                         "it has, instead of refusing.")
    group.addoption("--crucible-judge", dest="crucible_judge", metavar="JUDGE", default=None,
                    help="Judge of the answer layer: anthropic (Claude), openai (any OpenAI-compatible server: OpenAI, "
                         "Azure, vLLM, Ollama; the openai extra), lexical (the offline heuristic, lexical-v3; lexical-v2 and "
                         "lexical-v1 are kept so that runs judged by them stay comparable), aligned:FILE (the offline judge aligned to "
                         "your labels by crucible judge align), a judge of your own (the name "
                         "it was registered under, or package.module:ClassName), or auto (anthropic when ANTHROPIC_API_KEY "
                         "is set, else lexical). Default: ini crucible_judge, else lexical: a key in the environment "
                         "never chooses the judge. See docs/judges.md.")
    group.addoption("--crucible-judge-model", dest="crucible_judge_model", metavar="MODEL", default=None,
                    help="Model of a model judge: for anthropic a Claude model (default: the current small model); for "
                         "openai the model the server serves (required). Default: ini crucible_judge_model.")
    group.addoption("--crucible-judge-batch", dest="crucible_judge_batch", action="store_true", default=False,
                    help="Send judge requests as Message Batches at session end (50%% cheaper, answer metrics arrive at the end).")
    group.addoption("--crucible-judge-cache", dest="crucible_judge_cache", choices=["readwrite", "read", "off"], default="readwrite",
                    help="Judge verdict cache in the database (default readwrite: a re-run of unchanged items makes no judge calls).")
    group.addoption("--crucible-label-pool", dest="crucible_label_pool", action="store_true", default=False,
                    help="Grade retrieved chunks nobody has judged yet (UMBRELA-style, 0-3) into the qrels ledger.")
    group.addoption("--crucible-concurrency", dest="crucible_concurrency", type=int, metavar="N", default=None,
                    help="Call the pipeline for up to N items at once ahead of their tests, and with a model judge "
                         "judge them there, up to N judge requests in flight (needs a session-scoped "
                         "crucible_pipeline; default: ini crucible_concurrency, else 1).")
    group.addoption("--crucible-html", dest="crucible_html", metavar="PATH", default=None,
                    help="Write the run as one self-contained HTML report (with the comparison when --crucible-baseline is given).")
    group.addoption("--crucible-markdown", dest="crucible_markdown", metavar="PATH", default=None,
                    help="Write the verdict as GitHub-flavoured Markdown (the verdict first, the comparison, the items "
                         "that changed most), for a pull-request comment; also on a refused or faulted run.")
    group.addoption("--crucible-mlflow", dest="crucible_mlflow", action="store_true", default=None,
                    help="Log the run to MLflow (the mlflow extra; MLFLOW_TRACKING_URI): params, metrics, the verdict, "
                         "the junit and HTML reports; a tracker that cannot be reached is a warning (ini crucible_mlflow).")
    group.addoption("--crucible-run-id", dest="crucible_run_id", metavar="ID", default=None,
                    help="Give this run a fixed id, so CI shards of one suite share it (join them with `crucible merge`).")
    group.addoption("--crucible-max-cost", dest="crucible_max_cost", type=_usd, metavar="USD", default=None,
                    help="Refuse to start a run whose estimated judge cost exceeds USD: the cost of the requests the "
                         "judge cache does not answer (the estimate prints both figures, cold and after the cache).")
    group.addoption("--crucible-kind", dest="crucible_kind", metavar="KIND[,KIND...]", action="append", default=[],
                    help="Run only golden items of these kinds: retrieval, aggregation, adversarial (repeatable; "
                         "default every kind). The others are deselected and never reach the pipeline.")
    group.addoption("--crucible-label", dest="crucible_label", metavar="KEY=VALUE", action="append", default=[],
                    help="Tag the run, e.g. model=claude-haiku, collection=helpdesk, mode=hybrid, or in CI "
                         "branch=$GITHUB_REF_NAME (repeatable; overrides the config's \"labels\"; never part of the "
                         "configHash). --crucible-baseline=latest:branch=main compares with the newest run so labelled.")
    group.addoption("--crucible-cluster", dest="crucible_cluster", choices=["field", "doc", "none"], default="field",
                    help="How the gate clusters items that move together: field (the golden item's cluster, default), doc "
                         "(the first required citation's document) or none; clustered items are resampled by cluster.")
    group.addoption("--crucible-conversation", dest="crucible_conversation", choices=list(CONVERSATION_CHOICES), default=None,
                    help="The history a golden conversation's turn is answered on: live (the pipeline's own answers to the "
                         "turns before, so a conversation's turns run in order) or replay (the assistant replies the golden "
                         "file writes: every turn on a fixed history). Default: ini crucible_conversation, else live.")
    group.addoption("--crucible-repeat", dest="crucible_repeat", type=int, metavar="N", default=None,
                    help="Call the pipeline N times per item and judge each answer; the item's value is its mean over "
                         "the repeats (default: ini crucible_repeat, else 1). For pipelines or judges that sample.")
    group.addoption("--crucible-judge-repeat", dest="crucible_judge_repeat", type=int, metavar="N", default=1,
                    help="Judge every judge request N times (the repeats past the cache) and report the judge's "
                         "self-agreement per request kind (default 1).")
    group.addoption("--crucible-k", dest="crucible_k", type=int, metavar="K", default=None,
                    help="Cutoff of the metrics at K (recall@K, precision@K, hit@K), part of the ruler and never of the "
                         "system: the pipeline's retrievalLimit may differ (default: ini crucible_k, else 10).")
    group.addoption("--crucible-workspace", dest="crucible_workspace", metavar="NAME", default=None,
                    help="Workspace the run belongs to (default: ini crucible_workspace, else the rootdir's name).")
    parser.addini("crucible_workspace", default="", help="Workspace of the runs (default: the rootdir's name).")
    parser.addini("crucible_concurrency", default="1", help="Pipeline calls (and a model judge's requests) in flight at once.")
    parser.addini("crucible_background_writes", default="auto",
                  help="auto, always or never: write the results from a process of their own, beside the tests "
                       "(auto: runs of 1,000 items or more on two cores or more).")
    parser.addini("crucible_k", default=str(DEFAULT_K),
                  help=f"Cutoff of the metrics at K (default {DEFAULT_K}); runs measured at different K are not compared.")
    parser.addini("crucible_judge", default="",
                  help="The judge when --crucible-judge names none (default lexical, the offline judge): auto (anthropic when "
                       "ANTHROPIC_API_KEY is set, else lexical), lexical, anthropic, openai, aligned:FILE (relative to the rootdir: "
                       "crucible judge align wrote it), a registered judge's name or package.module:ClassName.")
    parser.addini("crucible_judge_model", default="", help="Model of the anthropic or openai judge.")
    parser.addini("crucible_gate", default="",
                  help="The primary metrics the gate fails on, e.g. ndcgAt10, faithfulness (default every compared metric; "
                       "the Holm family is these metrics: the fewer, the more power).")
    parser.addini("crucible_margins", type="args", default=[],
                  help="Non-inferiority margins, e.g. ndcgAt10=0.02 mrr=0.03 (see --crucible-margin).")
    parser.addini("crucible_judge_price_per_mtok", default="",
                  help="USD per million input and output tokens of the judge model, e.g. 0.40,1.60 (0 for a self-hosted "
                       "model): replaces the price table in cost estimates, --crucible-max-cost and the run's cost.")
    parser.addini("crucible_golden_files", type="args", default=DEFAULT_GOLDEN_PATTERNS,
                  help="Glob patterns of golden files collected as tests: a file name (golden_*.jsonl), or with a / the end of its path (golden/golden_*.jsonl).")
    parser.addini("crucible_db", default="", help=f"The results database: a SQLite file relative to the rootdir (default {DEFAULT_DB}), "
                                                  "or a PostgreSQL URL (better passed as CRUCIBLE_DB: it keeps a password out of files).")
    parser.addini("crucible_config", default="", help="Default pipeline config file, relative to the rootdir.")
    parser.addini("crucible_mode", default="system", help="system or component.")
    parser.addini("crucible_min_pairs", default=str(MIN_PAIRS),
                  help=f"Fewest pairs a gated metric needs; with fewer the gate refuses (exit 3) instead of passing "
                       f"(default {MIN_PAIRS}: the fewest with which a sign-flip test can reach p < 0.05).")
    parser.addini("crucible_outcome", default="strict", help="strict or record: when an item fails.")
    parser.addini("crucible_changed_items", default=CHANGED_ITEMS,
                  help="exclude, include or refuse: golden items edited since the baseline (see --crucible-changed-items).")
    parser.addini("crucible_metrics", type="args", default=[],
                  help="Modules defining custom metrics with @crucible.metric (besides conftest.py files), e.g. "
                       "mypkg.metrics (importable: see pytest's pythonpath ini key).")
    parser.addini("crucible_rubrics", default="",
                  help="JSON file of rubric metrics (model-judged), relative to the rootdir; adds to the config's \"rubrics\".")
    parser.addini("crucible_thresholds", type="args", default=[],
                  help="Per-item thresholds in strict mode, e.g. faithfulness>=0.8 answerWords<=80: an item whose value "
                       "crosses one fails.")
    parser.addini("crucible_conversation", default="live",
                  help="live or replay: the history of a golden conversation's turns (see --crucible-conversation).")
    parser.addini("crucible_repeat", default="1", help="Pipeline calls per item (see --crucible-repeat).")
    parser.addini("crucible_repeat_pass", default="1.0",
                  help="With repeats, in strict mode: the share of an item's repeats that must pass for the item to "
                       "pass (default 1.0: every repeat).")
    parser.addini("crucible_mlflow", type="bool", default=False,
                  help="true: log every run to MLflow, as --crucible-mlflow does.")
    parser.addini("crucible_step_summary", type="bool", default=True,
                  help="Under GitHub Actions (GITHUB_STEP_SUMMARY set): append the verdict as Markdown to the job's "
                       "step summary and print annotations for regressions, refusals and faults; false turns both off.")
    parser.addini("crucible_strict_config", type="bool", default=False,
                  help="true: a changed config key the pipeline never read fails the session (exit 4, usage error) "
                       "instead of a CrucibleWarning, and --crucible-gate or --crucible-margin without a baseline "
                       "refuses the gate (exit 3).")


def _usd(text: str) -> float:
    """--crucible-max-cost: a finite amount of at least 0 (nan or inf would switch the cap off)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of US dollars, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite amount of at least 0, got {text!r}")
    return value


def _choice(config: pytest.Config, option: str | None, ini: str, allowed: tuple[str, ...]) -> str:
    """The command-line option's value (``option``: None when there is none), else the ini option's, else the default."""
    value = (option and config.getoption(option)) or config.getini(ini).strip() or allowed[0]
    if value not in allowed:
        raise pytest.UsageError(f"ini option {ini} = {value!r}: expected one of {', '.join(allowed)}\nHINT: fix it in your pytest configuration file.")
    return value


def _check_file_mode() -> None:
    """CRUCIBLE_FILE_MODE is read by every write; a bad value is one usage error before anything runs."""
    from .store.files import FileModeError, file_mode

    try:
        file_mode()
    except FileModeError as exc:
        raise pytest.UsageError(str(exc)) from None


def wants_mlflow(config: pytest.Config) -> bool:
    return bool(config.getoption("crucible_mlflow") or config.getini("crucible_mlflow"))


def build_settings(config: pytest.Config) -> Settings:
    from .config import ConfigError, config_hash, load_config_file, resolve_config
    from .settings import Settings

    rootdir = config.rootpath
    _check_file_mode()
    if wants_mlflow(config):  # said before any test runs, not after the run it was meant to log
        from .report.tracking import TrackerMissing, require_mlflow

        try:
            require_mlflow()
        except TrackerMissing as exc:
            raise pytest.UsageError(str(exc)) from None
    config_path = config.getoption("crucible_config")
    if not config_path and config.getini("crucible_config"):
        config_path = str(rootdir / config.getini("crucible_config"))
    try:
        params, resolved = load_config_file(config_path) if config_path else ({}, resolve_config({}))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    db_path = _database(config, rootdir)
    _check_database(config, db_path, named=bool(config.getoption("crucible_db") or os.environ.get("CRUCIBLE_DB", "").strip()
                                                 or config.getini("crucible_db")))
    rubrics = _rubrics(config, params, config_path)
    custom_metrics = find_custom_metrics(config, rubrics)
    custom_names = tuple(m.name for m in custom_metrics) + tuple(r.name for r in rubrics)
    registered_judges = find_registered_judges(config)
    k = _positive_int(config, "crucible_k", DEFAULT_K)
    gate, baseline_keys = _gate_settings(config, db_path, k, custom_names)
    settings = Settings(
        params=params,
        resolved=resolved,
        config_hash=config_hash(resolved),
        config_path=config_path,
        db_path=db_path,
        mode=_choice(config, "crucible_mode", "crucible_mode", ("system", "component")),
        outcome_mode=_choice(config, "crucible_outcome", "crucible_outcome", ("strict", "record")),
        include_drafts=bool(config.getoption("crucible_include_drafts")),
        rootdir=rootdir,
        pytest_args=tuple(_redacted(str(arg)) for arg in config.invocation_params.args),  # stored with the run: no password
        judge=_judge_name(config, registered_judges),
        judge_named=bool(config.getoption("crucible_judge") or config.getini("crucible_judge")),
        judge_price=_judge_price(config),
        registered_judges=registered_judges,
        judge_model=config.getoption("crucible_judge_model") or config.getini("crucible_judge_model") or None,
        judge_batch=bool(config.getoption("crucible_judge_batch")),
        judge_cache=config.getoption("crucible_judge_cache"),
        max_cost=config.getoption("crucible_max_cost"),
        label_pool=bool(config.getoption("crucible_label_pool")),
        run_id=_run_id_option(config, db_path),
        concurrency=_positive_int(config, "crucible_concurrency", 16),
        conversation=_choice(config, "crucible_conversation", "crucible_conversation", CONVERSATION_CHOICES),
        background_writes=_choice(config, None, "crucible_background_writes", ("auto", "always", "never")),
        workspace=_workspace(config),
        labels=_labels(config, params, resolved),
        kinds=_kinds(config),
        strict_config=bool(config.getini("crucible_strict_config")),
        gate=gate,
        baseline_config_keys=baseline_keys,
        custom_metrics=custom_metrics,
        rubrics=rubrics,
        thresholds=_thresholds(config, k, custom_names),
        k=k,
        **_repeats(config),
    )
    if settings.mode == "system" and settings.judge == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        raise pytest.UsageError(
            "--crucible-judge=anthropic needs an API key: ANTHROPIC_API_KEY is not set\n"
            "HINT: export ANTHROPIC_API_KEY=..., or use the offline judge with --crucible-judge=lexical"
        )
    return settings


def find_registered_judges(config: pytest.Config) -> dict[str, Any]:
    """The judges plugins and conftest.py files register with ``pytest_crucible_register_judges``, by name."""
    returned = config.hook.pytest_crucible_register_judges(config=config)
    if not any(value is not None for value in returned):
        return {}  # a project that registers none loads nothing of the judge package here
    from .judge.select import JudgeSetupError, registered_judges

    try:
        return registered_judges(returned)
    except JudgeSetupError as exc:
        raise pytest.UsageError(str(exc)) from None


def _judge_name(config: pytest.Config, registered: dict[str, Any]) -> str:
    """The judge the option or ini names: a built-in one, a registered one, or package.module:ClassName."""
    name = (config.getoption("crucible_judge") or config.getini("crucible_judge") or DEFAULT_JUDGE).strip()
    if name == "aligned" or name.startswith("aligned:"):
        return _aligned_judge(config, name.partition(":")[2])
    if name in JUDGE_CHOICES or name in registered or ":" in name:
        return name
    import difflib

    where = "--crucible-judge" if config.getoption("crucible_judge") else "ini option crucible_judge"
    known = [*JUDGE_CHOICES, *sorted(registered)]
    close = difflib.get_close_matches(name, known, n=1)
    hint = (f"HINT: did you mean {close[0]!r}?" if close else
            "HINT: a judge of your own is named by its import path (mypackage.judges:MyJudge) or registered by the hook "
            "pytest_crucible_register_judges (docs/judges.md)")
    raise pytest.UsageError(f"{where} = {name!r}: expected one of {', '.join(known)}, or package.module:ClassName\n{hint}")


def _aligned_judge(config: pytest.Config, path: str) -> str:
    """``aligned:PATH``, its file checked before any test runs: a path in the ini file is relative to the rootdir,
    one on the command line to the directory pytest was started in (every xdist worker reads the same file)."""
    from .judge.select import JudgeSetupError, make_judge

    if path.strip():
        base = config.invocation_params.dir if config.getoption("crucible_judge") else config.rootpath
        path = str(base / os.path.expanduser(path.strip()))
    name = f"aligned:{path}"
    try:
        make_judge(name).close()
    except JudgeSetupError as exc:
        where = "--crucible-judge" if config.getoption("crucible_judge") else "ini option crucible_judge"
        raise pytest.UsageError(f"{where}: {exc}") from None
    return name


def _judge_price(config: pytest.Config) -> tuple[float, float] | None:
    text = config.getini("crucible_judge_price_per_mtok")
    if not text.strip():
        return None
    from .judge.select import JudgeSetupError, parse_price

    try:
        return parse_price(text, "ini option crucible_judge_price_per_mtok")
    except JudgeSetupError as exc:
        raise pytest.UsageError(f"{exc}, in your pytest configuration file") from None


def _rubrics(config: pytest.Config, params: dict[str, Any], config_path: str | None) -> tuple:
    """The rubric metrics: the config's "rubrics", then the ini crucible_rubrics file's (names must not repeat)."""
    from .evaluation.custom_metrics import CustomMetricError, load_rubrics_file, parse_rubrics
    from .metrics import KNOWN_METRICS

    try:
        rubrics: tuple[Rubric, ...] = ()
        if params.get("rubrics") is not None:
            text = Path(config_path).read_text(encoding="utf-8-sig") if config_path else ""
            rubrics = parse_rubrics(params["rubrics"], source=config_path or "<config>", text=text, builtins=KNOWN_METRICS)
        if config.getini("crucible_rubrics"):
            more = load_rubrics_file(str(config.rootpath / config.getini("crucible_rubrics")), KNOWN_METRICS)
            twice = sorted({r.name for r in rubrics} & {r.name for r in more})
            if twice:
                raise CustomMetricError(f"rubric {twice[0]!r} is declared in {config_path} and in {more[0].origin.split(':')[0]}\n"
                                        "HINT: declare each rubric once")
            rubrics += more
    except CustomMetricError as exc:
        raise pytest.UsageError(str(exc)) from None
    return rubrics


def find_custom_metrics(config: pytest.Config, rubrics: tuple = (), known: tuple | None = None) -> tuple:
    """The session's Python metrics: ``@crucible.metric`` functions at the top level of a conftest.py (or any
    plugin module pytest loaded), of the modules the ini key crucible_metrics names, and those plugins return
    from ``pytest_crucible_register_metrics``. A bad one is a usage error naming its file and line.
    ``known``: the metrics found at startup; given, only the plugin modules are scanned again (for a
    conftest.py imported during collection) and the hook is not called a second time."""
    import importlib

    from .evaluation.custom_metrics import CustomMetricError, check_metrics, metrics_in
    from .metrics import KNOWN_METRICS

    if known is not None:
        try:
            return check_metrics([*known, *metrics_in(config.pluginmanager.get_plugins())], KNOWN_METRICS, rubrics)
        except CustomMetricError as exc:
            raise pytest.UsageError(str(exc)) from None
    modules = []
    for name in config.getini("crucible_metrics"):
        try:
            modules.append(importlib.import_module(name))
        except Exception as exc:
            raise pytest.UsageError(f"ini option crucible_metrics: cannot import {name}: {type(exc).__name__}: {exc}\n"
                                    f"HINT: name a module importable from the rootdir (pytest's pythonpath ini key adds "
                                    f"a folder to sys.path), e.g. crucible_metrics = mypkg.metrics") from None
    found = metrics_in([*config.pluginmanager.get_plugins(), *modules])
    for returned in config.hook.pytest_crucible_register_metrics(config=config):
        found.extend(returned if isinstance(returned, (list, tuple)) else [returned])
    try:
        return check_metrics(found, KNOWN_METRICS, rubrics)
    except CustomMetricError as exc:
        raise pytest.UsageError(str(exc)) from None


def _thresholds(config: pytest.Config, k: int, custom: tuple[str, ...]) -> tuple:
    from .evaluation.thresholds import parse_thresholds
    from .metrics import resolve_metric

    try:
        return parse_thresholds(config.getini("crucible_thresholds"), lambda name: resolve_metric(name, k, custom))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _repeats(config: pytest.Config) -> dict[str, Any]:
    """--crucible-repeat / crucible_repeat, crucible_repeat_pass, --crucible-judge-repeat, checked."""
    repeat = _positive_int(config, "crucible_repeat", 3)
    judge_repeat = config.getoption("crucible_judge_repeat")
    if judge_repeat < 1:
        raise pytest.UsageError(f"--crucible-judge-repeat={judge_repeat}: expected a positive integer\nHINT: --crucible-judge-repeat=3")
    share = config.getini("crucible_repeat_pass")
    try:
        repeat_pass = float(share)
    except (TypeError, ValueError):
        repeat_pass = -1.0
    if not 0.0 < repeat_pass <= 1.0:
        raise pytest.UsageError(f"ini option crucible_repeat_pass = {share!r}: expected a share in (0, 1]\n"
                                "HINT: 1.0 (every repeat must pass, the default) or e.g. 0.66 (two of three: passed / repeats >= 0.66)")
    if (repeat > 1 or judge_repeat > 1) and config.getoption("crucible_judge_batch"):
        raise pytest.UsageError("--crucible-repeat / --crucible-judge-repeat cannot be combined with --crucible-judge-batch: "
                                "each repeat is judged inside its test\nHINT: drop --crucible-judge-batch for a run with repeats")
    return {"repeat": repeat, "repeat_pass": repeat_pass, "judge_repeat": judge_repeat}


def _redacted(arg: str) -> str:
    """A command-line argument as a run stores it: a database URL without its password."""
    if "://" not in arg:
        return arg
    from .store.postgres import redact_urls

    return redact_urls(arg)


def _database(config: pytest.Config, rootdir: Path) -> Path | DatabaseURL:
    """Where the session writes: --crucible-db, else CRUCIBLE_DB (a CI secret: a PostgreSQL URL with its
    password), else ini crucible_db (relative to the rootdir), else the default file under the rootdir."""
    from .store import locate
    from .store.postgres import DB_ENV_VAR, is_database_url

    named = config.getoption("crucible_db") or os.environ.get(DB_ENV_VAR, "").strip()
    ini = config.getini("crucible_db")
    db = locate(named) if named else locate(ini) if is_database_url(ini) else rootdir / (ini or DEFAULT_DB)
    return db.absolute() if isinstance(db, Path) else db


def _check_database(config: pytest.Config, db_path: Path | DatabaseURL, *, named: bool) -> None:
    """A database that cannot be written, or that SQLite cannot read, is one usage error before any test runs,
    not a run that records nothing (or part of it) and a build that looks green. Only the process that writes
    checks (the controller under xdist). The default path whose folder does not exist yet is left alone: the
    project may not use crucible at all, and a session that does not must import and create nothing."""
    if hasattr(config, "workerinput") or not (named or not isinstance(db_path, Path) or db_path.parent.exists()):
        return
    from .store import StoreError, check_before_writing

    try:
        check_before_writing(db_path)
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None


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


def _positive_int(config: pytest.Config, name: str, example: int) -> int:
    """A positive integer from the option ``--NAME`` (dashes), else the ini key ``name``, with one usage
    error naming where the value came from."""
    flag = "--" + name.replace("_", "-")
    raw = config.getoption(name)
    where = f"{flag}={raw}"
    if raw is None:
        raw = config.getini(name) or 1
        where = f"ini option {name} = {raw!r}"
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise pytest.UsageError(f"{where}: expected a positive integer\nHINT: {flag}={example}")
    return value


def _run_id_option(config: pytest.Config, db_path: Path | DatabaseURL) -> str | None:
    run_id = config.getoption("crucible_run_id")
    if not run_id or hasattr(config, "workerinput"):
        return run_id
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", run_id):
        raise pytest.UsageError(f"--crucible-run-id={run_id!r}: use letters, digits and . _ : - (at most 64)\n"
                                "HINT: e.g. --crucible-run-id=$CI_PIPELINE_ID")
    from .store import run_id_taken

    taken = run_id_taken(db_path, run_id)  # a session writing it right now is refused again at sessionstart
    if taken:
        raise pytest.UsageError(taken)
    return run_id


def _gate_settings(config: pytest.Config, db_path: Path | DatabaseURL, k: int, custom: tuple[str, ...] = ()):
    """The gate options, with the baseline checked before any test runs (and before any judge call is paid
    for), and the baseline's config keys (a did-you-mean for a config key the pipeline never read)."""
    from .verdict.gate import GateSettings, baseline_refusal, parse_floors, parse_margins, parse_metric_list

    baseline = config.getoption("crucible_baseline")
    try:
        floors = parse_floors(config.getoption("crucible_fail_under"), "--crucible-fail-under", k, custom)
        margins = parse_margins(list(config.getini("crucible_margins")), "ini option crucible_margins", k, custom)
        margins += parse_margins(config.getoption("crucible_margin"), "--crucible-margin", k, custom)
        gate = parse_metric_list(config.getoption("crucible_gate") or config.getini("crucible_gate"),
                                 "--crucible-gate" if config.getoption("crucible_gate") else "ini option crucible_gate", k, custom)
        min_pairs = int(config.getini("crucible_min_pairs") or MIN_PAIRS)
        if min_pairs < 2:
            raise ValueError(f"ini option crucible_min_pairs = {min_pairs}: a paired test needs at least 2 pairs\n"
                             f"HINT: leave it out (default {MIN_PAIRS}, the fewest with which p < 0.05 is possible)")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    settings = GateSettings(
        baseline=baseline,
        gate=gate,
        min_pairs=min_pairs,
        floors=floors,
        margins=tuple(dict(margins).items()),  # the command line's margin of a metric over the ini file's
        multiple=config.getoption("crucible_multiple"),
        seed=config.getoption("crucible_seed"),
        allow_incomplete=bool(config.getoption("crucible_allow_incomplete")),
        rescore=bool(config.getoption("crucible_rescore")),
        cluster=config.getoption("crucible_cluster"),
        changed_items=_choice(config, "crucible_changed_items", "crucible_changed_items", CHANGED_ITEMS_CHOICES),
        asked_without_baseline=None if baseline else ", ".join(
            [f"--crucible-gate={config.getoption('crucible_gate')}"] * bool(config.getoption("crucible_gate"))
            + [f"--crucible-margin={margin}" for margin in config.getoption("crucible_margin") or ()]) or None,
    )
    if baseline and not hasattr(config, "workerinput"):
        from .store import Store, StoreError
        from .verdict.runs import parse_run_ref, read_run

        try:
            store = None if parse_run_ref(baseline).export else Store.open(db_path, create=False)
            try:
                run = read_run(baseline, store, workspace=_workspace(config))  # "latest": of this workspace
            finally:
                if store is not None:
                    store.close()
        except StoreError as exc:
            raise pytest.UsageError(f"--crucible-baseline={baseline}: {exc}") from None
        refusal = None if settings.allow_incomplete else baseline_refusal(run)
        if refusal:
            raise pytest.UsageError(f"--crucible-baseline={baseline}: {refusal}")
        from .config import leaf_paths

        return settings, tuple(key for key, _ in leaf_paths(run.resolved))
    return settings, ()
