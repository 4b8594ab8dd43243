"""The one stateful object of a pytest session, kept in ``config.stash``.

It is built from frozen :class:`~pytest_crucible.settings.Settings` and knows nothing about pytest:
the plugin hands it each item's score and asks it for the run, the gate's verdict and the summary.
It holds the run and one :class:`~pytest_crucible.verdict.gate.GateResult`; it never calls back into the
plugin. Only the process that owns the run (the controller under xdist) opens the store.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .config import TrackedConfig, key_line, unread_changed_keys, unread_key_message, unread_keys_error
from .settings import Settings

if TYPE_CHECKING:
    from .evaluation import ItemVerdict
    from .evaluation.answers import CostEstimate
    from .evaluation.concurrency import AsyncRunner, Outcome, Prefetcher
    from .verdict.gate import GateResult
    from .golden_set.schema import GoldenItem
    from .judge.engine import JudgeEngine
    from .store import Store
    from .store.background import BackgroundWriter

# pytest's exit code for a usage error (the session is pure: no pytest import).
USAGE_ERROR = 4

# Scores are written in batches of this many items, or at least this often.
FLUSH_ITEMS = 50
FLUSH_SECONDS = 2.0
# The written batches are moved from -wal into the database file at most this often (and when the run
# closes): each move syncs the file, about 7 ms here, which after every 50-item batch cost 0.1-0.2x of a
# bare pytest run (bench/bench_overhead.py); a copy of the file alone after a SIGKILL misses at most this much.
CHECKPOINT_SECONDS = 5.0
# A run of at least this many items writes its batches from a process of its own (ini crucible_background_writes
# = auto, on two cores or more): at 10,000 items the writes were about a third of the plugin's per-item cost.
BACKGROUND_FROM_ITEMS = 1_000


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def git_commit(directory) -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


_UNREAD = object()  # a lazily read value not read yet (None is a value: "never calibrated")


@dataclass
class CrucibleSession:
    settings: Settings
    is_worker: bool = False
    run_id: str | None = None
    status: str | None = None
    # The gate's verdict (None: no gate asked for, or no run to judge).
    gate: "GateResult | None" = None
    evaluated: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    # Faults (a store that could not be written, a report that could not be rendered): each fails the session.
    faults: list[str] = field(default_factory=list)
    # Items whose scores the store could not write (a full disk): the run is at best incomplete.
    unrecorded: int = 0
    # Items whose judging failed after retries (counted when the run closes).
    judge_failed: int = 0
    # Usage errors found at session end (changed config keys the pipeline never read, under
    # crucible_strict_config or a filter that makes CrucibleWarning an error): the session exits 4.
    usage_errors: list[str] = field(default_factory=list)
    # Items whose Message Batch judging failed, one line each.
    batch_errors: list[str] = field(default_factory=list)
    config_reads: set[str] = field(default_factory=set)
    # Judge counters reported by xdist workers (their engines ran the judge), and their self-agreement counts.
    worker_judge: dict[str, float] = field(default_factory=dict)
    worker_agreement: dict[str, list[int]] = field(default_factory=dict)
    cost_estimate: "CostEstimate | None" = None
    # Golden items collected but not run (drafts), counted with the run.
    skipped: int = 0
    embedder: Any = None
    # The name of the embedder responseRelevancy was measured with (recorded with the run).
    embedder_name: str | None = None
    # Why the database file alone does not hold the run yet (another connection reading), or None.
    wal_note: str | None = None
    # A fixed --crucible-run-id's row, written before any test runs (see reserve_run), until the first result.
    reserved_run_id: str | None = None
    _run_order: list[tuple[str, "GoldenItem"]] = field(default_factory=list)
    _store: "Store | None" = None
    _tracked: TrackedConfig | None = None
    _engine: "JudgeEngine | None" = None
    _ledger: dict[str, list[dict[str, Any]]] | None = None
    _prefetcher: "Prefetcher | None" = None
    # The pipeline whose signature was checked (the fixture's value: checked once, not per item).
    _checked_pipeline: Any = None
    # An unknown key in a returned dict is explained in full once; later items get one line.
    _result_keys_explained: bool = False
    _async_runner: "AsyncRunner | None" = None
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _flushed_at: float = field(default_factory=time.monotonic)
    _checkpointed_at: float = field(default_factory=time.monotonic)
    # The judge's newest calibration row (None: never calibrated), read on first use.
    _calibration: Any = _UNREAD
    # Items this session will run (plan), the writing process of a large run, and the batches it has not
    # confirmed yet (oldest first).
    _planned: int = 0
    _writer: "BackgroundWriter | None" = None
    _writer_decided: bool = False
    _in_flight: deque = field(default_factory=deque)
    # Batches the writing process gave back (not written there), oldest first: the session writes them itself.
    _taken_back: list[list[dict[str, Any]]] = field(default_factory=list)

    # -- calling the pipeline --------------------------------------------------------------
    def plan(self, selected: list[tuple[str, "GoldenItem"]], skipped: int) -> None:
        """The golden items this session will run, in run order (the prefetcher calls ahead along it),
        and how many it collected but skips (drafts), counted with the run."""
        # Only the prefetcher reads the order: without it, the golden items are not held here too.
        self._run_order, self.skipped = (selected if self.settings.concurrency > 1 else []), skipped
        self._planned = len(selected)

    @property
    def async_runner(self) -> "AsyncRunner":
        if self._async_runner is None:
            from .evaluation.concurrency import AsyncRunner

            self._async_runner = AsyncRunner()
        return self._async_runner

    def run_pipeline(self, key: str, golden: "GoldenItem", pipeline, config) -> "Outcome":
        """Call the pipeline for one item (or take the result the prefetcher already has).
        Raises PipelineSignatureError (before any call) when the pipeline cannot take its arguments."""
        __tracebackhide__ = True  # the user's pipeline frame comes first in a failure
        from .evaluation.concurrency import Outcome, Prefetcher, call_pipeline, check_signature

        if pipeline is not self._checked_pipeline:  # once per pipeline object, not once per item
            check_signature(pipeline)
            self._checked_pipeline = pipeline
        self.evaluated += 1
        kwargs = {"config": config, "mode": self.settings.mode}
        if self.settings.concurrency > 1:
            if self._prefetcher is None and self._run_order:
                self._prefetcher = Prefetcher(pipeline, self._run_order, concurrency=self.settings.concurrency,
                                              kwargs=kwargs, runner=self.async_runner, then=self._judging_ahead())
                self._run_order = []  # the prefetcher holds each golden item until its test takes it
            if self._prefetcher is not None and key in self._prefetcher:
                return self._prefetcher.take(key)
        started = time.perf_counter()
        try:
            value = call_pipeline(pipeline, self.async_runner, golden.question, item=golden, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the item's own error
            return Outcome(error=exc, latency_ms=(time.perf_counter() - started) * 1000.0)
        return Outcome(value=value, latency_ms=(time.perf_counter() - started) * 1000.0)

    def _judging_ahead(self) -> Callable[[Any, "Outcome"], None] | None:
        """What the prefetcher runs after each pipeline call: the item's judging, when the judge waits on a
        network (Judge.overlaps) and answers now (Message Batches judge at session end); else None."""
        s = self.settings
        if not s.uses_judge or s.judge_batch or not self.engine.judge.overlaps:
            return None
        from .evaluation import judge_ahead

        self.ledger_rows("")  # loaded here, once, not by two workers at once
        engine, embedder, rubrics = self.engine, self.embedder, self.graded_rubrics
        return lambda golden, outcome: judge_ahead(golden, outcome, settings=s, ledger=self.ledger_rows(golden.id),
                                                   engine=engine, embedder=embedder, rubrics=rubrics)

    def evaluate(self, key: str, golden: "GoldenItem", pipeline, config, embedder) -> "ItemVerdict":
        """Run one item's pipeline (or take the prefetched result) and evaluate it."""
        __tracebackhide__ = True
        from .evaluation import evaluate

        if embedder is not None:
            self.embedder = embedder  # Message Batches judge at session end with the same embedder
        s = self.settings
        verdicts = []
        for repeat in range(s.repeat):  # the first call may come from the prefetcher; repeats are called here
            outcome = self.run_pipeline(key if repeat == 0 else "", golden, pipeline, config)
            verdicts.append(evaluate(golden, outcome, settings=s, ledger=self.ledger_rows(golden.id),
                                     engine=self.engine if s.uses_judge else None, embedder=embedder,
                                     explain_keys=not self._result_keys_explained, rubrics=self.graded_rubrics,
                                     calibration=self.judge_calibration))
            self._result_keys_explained = self._result_keys_explained or verdicts[-1].explained_keys
        if s.repeat == 1:
            return verdicts[0]
        from .evaluation.repeats import combine

        return combine(golden.id, verdicts, s.repeat_pass)

    @property
    def judge_calibration(self) -> dict[str, Any] | None:
        """The judge's newest `crucible judge calibrate` row (None: never calibrated), read once: a failure
        on a judged verdict names it."""
        if self._calibration is _UNREAD:
            from .store.ledgers import read_latest_judge_calibration

            judge = self.engine.judge if self.settings.uses_judge else None
            self._calibration = None if judge is None else read_latest_judge_calibration(
                self.settings.db_path, judge.model, getattr(judge, "prompt_version", None))
        return self._calibration

    def stop_pipeline_calls(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()

    # -- the config handed to the pipeline ---------------------------------------
    @property
    def tracked_config(self) -> TrackedConfig:
        if self._tracked is None:
            self._tracked = TrackedConfig(self.settings.resolved, self.config_reads)
        return self._tracked

    def unread_config_keys(self) -> list[str]:
        if not self.evaluated:
            return []
        return unread_changed_keys(self.settings.resolved, self.config_reads)

    def known_config_keys(self) -> set[str]:
        """Config keys an unread key may be a typo of: what the pipeline read, and the baseline's keys."""
        return set(self.config_reads) | set(self.settings.baseline_config_keys)

    def check_unread_keys(self, warn: Callable[[str, str | None, int], bool] | None) -> None:
        """Changed config keys the pipeline never read: a usage error (exit 4) under crucible_strict_config;
        else each one goes through ``warn(message, config file, line)`` (the plugin's CrucibleWarning, under
        pytest's warning filters), which returns False when a filter made it an error: those keys are then
        a usage error too. (The summary lists them either way.)"""
        if self.is_worker or (warn is None and not self.settings.strict_config):
            return
        keys, path = self.unread_config_keys(), self.settings.config_path
        if self.settings.strict_config:
            why = "crucible_strict_config = true"
        else:
            why = "a warning filter makes CrucibleWarning an error"
            keys = [key for key in keys if not warn(unread_key_message(key, self.known_config_keys()), path, key_line(path, key))]
        if keys:
            self.usage_errors.append(unread_keys_error(keys, why, path))

    # -- custom metrics -----------------------------------------------------------------------------
    def add_custom_metrics(self, found: tuple) -> None:
        """Python metrics found after configure (a conftest.py imported during collection) join the session's."""
        known = {m.name for m in self.settings.custom_metrics}
        late = tuple(m for m in found if m.name not in known)
        if late:
            from dataclasses import replace

            merged = tuple(sorted(self.settings.custom_metrics + late, key=lambda m: m.name))
            self.settings = replace(self.settings, custom_metrics=merged)

    @property
    def graded_rubrics(self) -> tuple:
        """The rubric metrics this session judges: none without answers to judge (component mode) or
        without a judge that can grade a rubric (the offline judges cannot: see ``rubric_note``)."""
        s = self.settings
        if not s.rubrics or not s.judges_answers or not self.engine.judge.grades_rubrics:
            return ()
        return s.rubrics

    def rubric_note(self) -> list[str]:
        """Said once when rubric metrics are declared but not judged; nothing is stored for them."""
        s = self.settings
        if not s.rubrics or self.graded_rubrics:
            return []
        names = ", ".join(r.name for r in s.rubrics)
        if not s.judges_answers:
            return [f"NOTE rubric metrics grade answers, and component mode has none: {names} skipped"]
        return [f"NOTE rubric metrics need a model judge: {names} skipped",
                f"  ({self.engine.judge.model} cannot grade a rubric; --crucible-judge=anthropic can)"]

    def threshold_note(self) -> list[str]:
        """With Message Batches the judged metrics arrive after the tests: thresholds on them cannot fail an item."""
        s = self.settings
        if not (s.judge_batch and s.judges_answers and s.strict and s.thresholds):
            return []
        from .metrics import METRIC_FAMILIES, OTHER_METRICS

        at_test_time = {*METRIC_FAMILIES["retrieval"], *METRIC_FAMILIES["guardrails"], *OTHER_METRICS, *(m.name for m in s.custom_metrics)}
        late = sorted({t.metric for t in s.thresholds if t.metric not in at_test_time or t.metric == "assertionSatisfaction"})
        if not late:
            return []
        return [f"NOTE crucible_thresholds on {', '.join(late)} did not fail any item:",
                "  with --crucible-judge-batch their values arrive after the tests (the gate and floors still read them)"]

    # -- the judge ---------------------------------------------------------------------------------
    def ledger_rows(self, query_id: str) -> list[dict[str, Any]]:
        """The human and llm judgments of one query, loaded once per session (read-only)."""
        if self._ledger is None:
            from .store import read_judgment_ledger

            self._ledger = read_judgment_ledger(self.settings.db_path)
        return self._ledger.get(query_id, [])

    @property
    def engine(self) -> "JudgeEngine":
        """The session's judge engine, its cache preloaded from the database (read-only)."""
        if self._engine is None:
            from .judge.engine import JudgeEngine
            from .judge.select import make_judge, read_cache_rows

            s = self.settings
            judge = make_judge(s.judge, model=s.judge_model, batch=s.judge_batch, price_per_mtok=s.judge_price, concurrency=s.concurrency,
                               registered=s.registered_judges)
            engine = JudgeEngine(judge, cache_mode=s.judge_cache,
                                 judge_repeat=s.judge_repeat)
            if s.judge_cache != "off":
                engine.load_cache(read_cache_rows(s.db_path, engine.model))
            self._engine = engine
        return self._engine

    def estimate_judge_cost(self, golden: list["GoldenItem"]) -> "CostEstimate | None":
        """What a paid judge will cost on the selected items (None: the judge is free), kept for the run row.
        Raises JudgeSetupError when the judge cannot be set up (e.g. the anthropic SDK is missing)."""
        judge = self.engine.judge
        if not judge.paid:
            return None
        from .evaluation import estimate_cost

        self.cost_estimate = estimate_cost(golden, self.settings, judge, self.graded_rubrics)
        return self.cost_estimate

    def _watch_batches(self, n_items: int, write: Callable[[str], None] | None) -> None:
        """Progress lines while Message Batches are processed (one Progress per batch)."""
        if write is None or not hasattr(self.engine.judge, "on_progress"):
            return
        from .progress import Progress

        watched: dict[str, Progress] = {}

        def on_progress(batch_id: str, done: int, total: int) -> None:
            if batch_id not in watched:
                label = f"{self.engine.judge.batch_name} {len(watched) + 1} for {n_items} items ({batch_id})"
                watched[batch_id] = Progress(label, total, write, unit="judge requests")
            watched[batch_id].update(done, total)

        self.engine.judge.on_progress = on_progress

    def judge_summary(self) -> dict[str, Any]:
        """Requests, cache hits, tokens and cost of this session's judging (all processes)."""
        totals = dict(self.worker_judge)
        if self._engine is not None:
            for name, value in self._engine.stats.as_dict().items():
                totals[name] = totals.get(name, 0) + value
            usage = self._engine.judge.usage()
            for name in ("input_tokens", "output_tokens", "cost_usd"):
                totals[name] = totals.get(name, 0) + getattr(usage, name)
            for name, value in self._engine.judge.counters().items():  # e.g. jsonMode: how requests were judged
                totals[name] = totals.get(name, 0) + value
        return totals

    def add_worker_output(self, output: dict[str, Any]) -> None:
        """What an xdist worker reports at its end: config reads, evaluations, judge counters (plain types)."""
        self.config_reads.update(output["reads"])
        self.evaluated += output["evaluated"]
        for name, value in output.get("judge", {}).items():
            self.worker_judge[name] = self.worker_judge.get(name, 0) + value
        for kind, (agreed, total) in output.get("agreement", {}).items():
            counts = self.worker_agreement.setdefault(kind, [0, 0])
            counts[0], counts[1] = counts[0] + agreed, counts[1] + total

    def worker_output(self) -> dict[str, Any]:
        return {"reads": sorted(self.config_reads), "evaluated": self.evaluated,
                "judge": {name: float(value) for name, value in self.judge_summary().items()},
                "agreement": self._engine.agreement if self._engine is not None else {}}

    def self_agreement(self) -> dict[str, Any] | None:
        """--crucible-judge-repeat: per request kind, how many requests got the same verdict every time (all processes)."""
        if self.settings.judge_repeat < 2:
            return None
        kinds = {kind: list(counts) for kind, counts in self.worker_agreement.items()}
        for kind, (agreed, total) in (self._engine.agreement if self._engine is not None else {}).items():
            counts = kinds.setdefault(kind, [0, 0])
            counts[0], counts[1] = counts[0] + agreed, counts[1] + total
        return {"judgings": self.settings.judge_repeat, "kinds": kinds}

    # -- the run in the store ------------------------------------------------------
    @property
    def store(self) -> "Store":
        if self._store is None:
            from .store import Store

            self._store = Store.open(self.settings.db_path)
            self._store.checkpoint_only_when_asked()  # flush() checkpoints every CHECKPOINT_SECONDS, finish() at the end
        return self._store

    def _run_fields(self) -> dict[str, Any]:
        """What a run's row says of its settings (known before any test is collected)."""
        s = self.settings
        return dict(workspace=s.workspace, labels=s.labels, kinds=list(s.kinds) if s.kinds else None,
                    config_hash=s.config_hash, params=s.params, resolved=s.resolved, mode=s.mode,
                    outcome_mode=s.outcome_mode, config_path=s.config_path, git_commit=git_commit(s.rootdir),
                    pytest_args=list(s.pytest_args), repeats=s.repeat, eval_k=s.k)

    def _late_run_fields(self) -> dict[str, Any]:
        """What a run's row learns once its tests are collected: the judge, the cost estimate, the custom metrics."""
        from .evaluation.custom_metrics import definitions

        s = self.settings
        judge = self.engine.judge if s.uses_judge else None
        rubrics = self.graded_rubrics
        return dict(judge_model=judge.model if judge else None,
                    judge_prompt_version=judge.prompt_version if judge else None,
                    judge_label=judge.label if judge else None,
                    cost_estimate_usd=self.cost_estimate.cost_usd if self.cost_estimate else None,
                    custom_metrics=definitions(s.custom_metrics, rubrics, judge_model=judge.model if rubrics else None,
                                               rubric_prompt_version=judge.prompt_version_for("rubric") if rubrics else None))

    def reserve_run(self) -> None:
        """Write a fixed ``--crucible-run-id``'s row before any test runs. Two sessions given one id at
        once then meet here, and the second is refused up front (``store.RunIdTaken``) instead of losing
        every result at its first write. Released again if the session records nothing (see close)."""
        from .store import DatabaseError, RunIdTaken, StoreError

        if self.is_worker or not self.settings.run_id or self.run_id or self.reserved_run_id:
            return
        try:
            self.reserved_run_id = self.store.start_run(run_id=self.settings.run_id, **self._run_fields())
        except RunIdTaken:
            raise
        except (StoreError, DatabaseError):
            pass  # a database that cannot be written: the first flush reports it as a fault, as without an id

    def _ensure_run(self) -> str:
        if self.run_id is None:
            if self.reserved_run_id is not None:
                self.store.complete_run_start(self.reserved_run_id, **self._late_run_fields())
                self.run_id = self.reserved_run_id
            else:
                self.run_id = self.store.start_run(run_id=self.settings.run_id, **self._run_fields(),
                                                   **self._late_run_fields())
        return self.run_id

    def record(self, score: dict[str, Any]) -> None:
        """Queue one item's score for the store; written in batches (see ``flush``)."""
        outcome = score.get("outcome") or "unknown"
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if self.is_worker:
            return
        # Which embedder measured responseRelevancy (the item's verdict says, whichever process scored it).
        relevancy = (score.get("verdicts") or {}).get("responseRelevancy") or {}
        self.embedder_name = self.embedder_name or relevancy.get("embedder")
        self._pending.append(score)
        if len(self._pending) >= FLUSH_ITEMS or time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write the queued scores in one transaction. A store failure is kept as a fault, never lost silently.

        Batching keeps SQLite commits off the per-item path; a killed process loses at most
        the last FLUSH_ITEMS items (or FLUSH_SECONDS) of its own run, never an earlier run.
        A large run on a machine with a core to spare hands the batch to a writing process instead
        (:mod:`.store.background`, see ``_writer_for_this_run``); the batches it gives back are written here.
        """
        self._flushed_at = time.monotonic()
        if self._pending and self._writer_for_this_run() is not None:
            pending, self._pending = self._pending, []
            if self._hand_over(pending):
                return
        batches, self._taken_back = self._taken_back + ([self._pending] if self._pending else []), []
        self._pending = []
        for index, batch in enumerate(batches):
            try:
                self.store.record_scores(self._ensure_run(), batch)
            except Exception as exc:  # noqa: BLE001 - reported as a fault that fails the session
                self._record_fault(batch, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)  # one line per fault
            except BaseException:
                # Ctrl-C landed in the write: its transaction rolled back, so keep the batch (and those after it)
                # for finish() to write.
                self._pending = [score for later in batches[index:] for score in later] + self._pending
                raise
        if batches and time.monotonic() - self._checkpointed_at >= CHECKPOINT_SECONDS:
            self.checkpoint()

    def _writer_for_this_run(self) -> "BackgroundWriter | None":
        """The writing process of this run, started at its first batch when settings.background_writes allows
        it: "always", or "auto" for a run of at least BACKGROUND_FROM_ITEMS items on a machine with two cores
        or more (a smaller run would not win back the process's start). A SQLite file or a PostgreSQL database."""
        if self._writer is None and not self._writer_decided:
            self._writer_decided = True
            choice, path = self.settings.background_writes, self.settings.db_path
            if choice == "never" or self.is_worker:
                return None
            if choice == "auto" and (self._planned < BACKGROUND_FROM_ITEMS or usable_cores() < 2):
                return None
            from .store.background import BackgroundWriter

            try:
                self._ensure_run()  # the run's row first: the writer's rows point at it
                self._writer = BackgroundWriter(path, CHECKPOINT_SECONDS)
            except Exception:  # noqa: BLE001 - written here instead (a store failure becomes the batch's fault there)
                return None
        return self._writer

    def _hand_over(self, pending: list[dict[str, Any]]) -> bool:
        """Give one batch to the writing process. False: the process is gone, or could not write a batch; it is
        stopped, and what it did not write (this batch included) is in ``_taken_back``, for the session."""
        self._in_flight.append(pending)
        try:
            self._writer.send(self.run_id, pending)
        except Exception:  # noqa: BLE001 - gone (a broken pipe), or a batch pickle cannot carry: written here
            self.stop_writer()
            return False
        except BaseException:
            # Ctrl-C while handing over: the batch may or may not have reached the process; stopping it
            # tells which (a batch it never confirmed is taken back, for finish() to write here).
            self.stop_writer()
            raise
        self._take_answers(self._writer.answers())
        if self._taken_back:
            self.stop_writer()
            return False
        return True

    def _take_answers(self, answers: list[tuple[str | None, tuple[str, str | None] | None]]) -> None:
        """The writing process's answers, one per batch in the order they were handed over (what each means:
        ``store.background.serve``); its checkpoints count as the session's own (see ``checkpoint``). A batch
        it could not write is taken back: the session writes it itself, and only a failure there is a fault (the
        process's connection may fail where the session's does not, e.g. on a file that turned read-only after
        the session opened it and before the process did)."""
        for fault, checkpoint in answers:
            batch = self._in_flight.popleft()
            if fault is not None:
                self._taken_back.append(batch)
            if checkpoint is None:
                continue
            self._checkpointed_at = time.monotonic()
            kind, value = checkpoint
            if kind == "note":
                self.wal_note = value
            elif value not in self.faults:
                self.faults.append(value)

    def stop_writer(self) -> None:
        """Stop the writing process once it has written every batch it received. A batch it never confirmed
        (handed over as Ctrl-C came, or it stopped on its own) is taken back: the session writes it itself."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        self._take_answers(writer.stop())
        self._taken_back.extend(self._in_flight)
        self._in_flight.clear()

    def _record_fault(self, batch: list[dict[str, Any]], reason: str) -> None:
        ids = ", ".join(repr(score.get("item_id")) for score in batch[:5])
        self.faults.append(f"could not record {len(batch)} item(s) ({ids}...) in {self.settings.db_path}: {reason}")
        self.unrecorded += len(batch)  # lost, not retried: the run must say so (see finish)

    def checkpoint(self) -> None:
        """Move what was written into the database file itself (a copy or CI upload of the file alone then
        holds it; after a SIGKILL, all but the last CHECKPOINT_SECONDS). A file that cannot take it is a fault, said once: the run then
        lives in the -wal file too, and a session must never end green on a file that lost it."""
        from .store import StoreError

        self._checkpointed_at = time.monotonic()
        try:
            self.wal_note = self.store.checkpoint()
        except StoreError as exc:
            reason = str(exc).splitlines()[0]
            if reason not in self.faults:
                self.faults.append(reason)

    def finish(self, interrupted: bool, progress: Callable[[str], None] | None = None) -> None:
        """Write what is pending, judge Message Batches, and close the run with its status.
        ``progress``: where progress lines of long judge work go."""
        if self.is_worker:
            return
        self.flush()
        if self._writer is not None:
            self.stop_writer()
            self.flush()  # what it never confirmed
        if self.run_id is None:
            return
        store, s = self.store, self.settings
        if not interrupted and s.judges_answers and s.judge_batch:
            from .judge.embed import default_embedder
            from .evaluation import judge_run_in_batch

            self.embedder = self.embedder or default_embedder()
            self.embedder_name = self.embedder_name or getattr(self.embedder, "name", None)
            self.batch_errors = judge_run_in_batch(store, self.run_id, self.engine, self.embedder, s,
                                                   on_start=lambda n_items: self._watch_batches(n_items, progress),
                                                   rubrics=self.graded_rubrics)
        self.judge_failed = store.count_judge_failed(self.run_id)
        status = "interrupted" if interrupted else "incomplete" if self.judge_failed else "complete"
        summary = self.judge_summary()
        from .judge.engine import JUDGE_COUNTERS

        judge = {
            "stats": {**{name: int(summary.get(name, 0)) for name in ("requests", "cache_hits", "judged", "failures")},
                      **{name: int(summary[name]) for name in JUDGE_COUNTERS if summary.get(name)},
                      **({"selfAgreement": self.self_agreement()} if self.self_agreement() else {})},
            "cost_usd": summary.get("cost_usd"),
            "input_tokens": int(summary.get("input_tokens", 0)),
            "output_tokens": int(summary.get("output_tokens", 0)),
        } if s.uses_judge else None
        self.status = store.finish_run(self.run_id, status=status, golden_hash=store.golden_set_hash(self.run_id, written_canonical=True),
                                       judge=judge, unread_keys=self.unread_config_keys(), skipped=self.skipped,
                                       unrecorded=self.unrecorded,  # a run that lost items is never complete
                                       embedder=self.embedder_name)
        self.checkpoint()  # the closed run, status included, in the file itself

    # -- the gate ----------------------------------------------------------------------------
    def apply_gate(self) -> "GateResult | None":
        """Decide this run's verdict once (comparison, floors, refusals); the summary, the HTML report
        and the exit status all read ``self.gate``."""
        gate_settings = self.settings.gate
        if self.is_worker or (self.status is None and not self.faults):
            return None  # nothing ran
        from .verdict.gate import LOST_HINT, decide_stored, no_baseline, refused_by_fault, skipped, unreadable_baseline

        if not gate_settings.active:  # no baseline and no floor: nothing to judge by
            if gate_settings.asked_without_baseline and self.status not in (None, "interrupted"):
                self.gate = no_baseline(gate_settings, strict=self.settings.strict_config)
            return self.gate
        from .verdict.runs import load_run, read_run
        from .store import StoreError

        if self.status is None:  # the run was never stored, or never closed: nothing to judge it by, never a pass
            lost = f" ({self.unrecorded} items lost)" if self.unrecorded else ""
            self.gate = refused_by_fault(f"this run could not be stored in {self.settings.db_path}{lost}: refusing to compare it\n"
                                       f"HINT: {LOST_HINT}", gate_settings)
            return self.gate
        if self.status == "interrupted":  # the session already exits 2 (interrupted); nothing to judge by
            self.gate = skipped("this run was interrupted: the gate did not compare it", gate_settings)
            return self.gate
        rankings = gate_settings.rescore
        current = load_run(self.store, self.run_id, golden=True, rankings=rankings)
        baseline = None
        if gate_settings.baseline:
            try:
                baseline = read_run(gate_settings.baseline, self.store, workspace=self.settings.workspace, exclude=self.run_id,
                                    golden=True, rankings=rankings)
            except StoreError as exc:
                self.gate = unreadable_baseline(str(exc), gate_settings)
                return self.gate
        self.gate = decide_stored(self.store, current, baseline, gate_settings)
        if gate_settings.asked_without_baseline:  # the floors were judged; the comparison asked for was not
            self.gate.warnings.append("WARNING " + no_baseline(gate_settings, strict=False).refusal.splitlines()[0])
        return self.gate

    def end(self, *, interrupted: bool, html_path: str | None = None, progress: Callable[[str], None] | None = None,
            warn: Callable[[str, str | None, int], bool] | None = None) -> None:
        """Session end, in order: close the run, check the config keys, decide the gate, write the HTML report.
        A step that fails is kept as a fault (it fails the session and the summary names it), never raised.
        ``warn``: how an unread key is reported (see :meth:`check_unread_keys`)."""
        try:
            self.finish(interrupted, progress)
        except Exception as exc:  # noqa: BLE001
            self.faults.append(f"could not finish the run in {self.settings.db_path}: {exc}")
        try:
            self.check_unread_keys(warn)
        except Exception as exc:  # noqa: BLE001 - e.g. a custom showwarning that raises
            self.faults.append(f"could not report the config keys the pipeline never read: {type(exc).__name__}: {exc}")
        try:
            self.apply_gate()
        except Exception as exc:  # noqa: BLE001 - a comparison that cannot run is a fault, not a pass
            reason = f"could not compare with the baseline: {type(exc).__name__}: {exc}"
            self.faults.append(reason)
            if self.settings.gate.active and not self.is_worker:
                # Still a verdict (refused, exit 3) in the terminal and in junit, never only a FAULT line.
                from .verdict.gate import refused_by_fault

                self.gate = refused_by_fault(
                    f"{reason}\nHINT: check the database ({self.settings.db_path}: `crucible runs` reads it), "
                    "restore it or point --crucible-db at a sound copy, and run again", self.settings.gate)
        if html_path and self.run_id is not None:
            try:
                from .report.html import render_report, write_report

                # The page is handed the gate's verdict: it shows what decided the exit code, never a recomputation.
                write_report(html_path, render_report(self.store, self.run_id, gate=self.gate))
            except Exception as exc:  # noqa: BLE001 - a report that cannot be written is a fault, not a crash
                self.faults.append(f"could not write the HTML report to {html_path}: {type(exc).__name__}: {exc}")

    def exit_status(self, status: int) -> int:
        """The session's exit status after the gate, from pytest's (0 passed, 1 tests failed; any other stands):
        the gate's code (1 failed, 3 refused: a refusal outranks failed items), and 1 for a fault or an
        incomplete run (with Message Batches its items passed before the judge failed them); 4 (usage error)
        for a config key the pipeline never read that was made an error (it outranks the rest)."""
        if status not in (0, 1):
            return status
        if self.usage_errors:
            return USAGE_ERROR
        if self.gate is not None:
            status = max(status, self.gate.exit_code)
        if status == 0 and (self.faults or self.status == "incomplete"):
            status = 1
        return status

    def close(self) -> None:
        self.stop_pipeline_calls()
        self.stop_writer()  # a session that never reached finish(): what the process received is still written
        if self._async_runner is not None:
            self._async_runner.close()
        if self._engine is not None:
            self._engine.judge.close()
        if self.reserved_run_id is not None and self.run_id is None:
            try:  # nothing recorded (a usage error, an empty selection): the id is free again
                self.store.release_run(self.reserved_run_id)
            except Exception:  # noqa: BLE001 - a stale reservation only blocks its own id; never mask the session's own error
                pass
            self.reserved_run_id = None
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- what the terminal shows -------------------------------------------------------
    def summary_lines(self, verbose: int = 0) -> list[str]:
        """The crucible section of the terminal summary; ``verbose < 0`` (-q) keeps one line,
        plus every warning, fault and gate failure (those are never hidden)."""
        errors = [line for error in self.usage_errors for line in error.splitlines()]  # last, with their HINT, always
        if self.run_id is None and not self.faults:
            return errors
        from .report.terminal import alerts_only, one_line_summary
        from .report.views import chosen_baseline, gate_lines

        means = self._stored_means()  # read once: the run's lines and its one-line summary both show them
        lines = self._run_lines(verbose, means)
        if self.gate is not None:
            lines += gate_lines(self.gate)
        if verbose < 0:
            gate = None
            if self.gate is not None and self.gate.verdict != "skipped":
                gate = {"passed": "gate passed", "failed": "GATE FAILED", "refused": "GATE REFUSED"}[self.gate.verdict]
                chosen = chosen_baseline(self.gate)  # the run a baseline named by its labels turned out to be
                gate = f"{chosen}; {gate}" if chosen else gate  # the verdict stays last (the line's colour)
            head = [one_line_summary(self.store, self.run_id, gate=gate, means=means)] if self.run_id is not None else []
            skipped = self.gate.summary().splitlines() if self.gate is not None and self.gate.verdict == "skipped" else []
            return head + alerts_only(lines) + skipped + errors
        return lines + errors

    def _stored_means(self) -> tuple | None:
        """The run's ``verdict.runs.stored_means``; None when there is no run or it cannot be read (the readers
        below then meet the database themselves, and say so)."""
        from .verdict.runs import stored_means

        if self.run_id is None:
            return None
        try:
            return stored_means(self.store, self.run_id)
        except Exception:  # noqa: BLE001 - reported by _run_lines, which reads the run again
            return None

    def _run_lines(self, verbose: int, means: tuple | None = None) -> list[str]:
        """The run's own lines (metrics, unread keys, faults, judge errors), before the gate's. The faults are
        shown even when there is no run to read back: they say why."""
        from .report.terminal import fault_lines, run_summary_lines

        if self.run_id is None:
            lines = fault_lines(self.faults)
        else:
            try:
                lines = run_summary_lines(self.store, self.run_id, unread_keys=self.unread_config_keys(), faults=self.faults,
                                          known_keys=self.known_config_keys(),
                                          verbose=verbose, means=means)
            except Exception as exc:  # noqa: BLE001 - a database that broke during the run
                lines = fault_lines([f"could not read the run back from {self.settings.db_path}: {exc}", *self.faults])
        lines.extend(f"JUDGE ERROR {error}" for error in self.batch_errors)
        lines.extend(self.rubric_note() + self.threshold_note())
        if self.unrecorded:
            ran = sum(self.outcomes.values())  # every item handed to record(), written or not
            where = f"this run is {self.status}, never `latest`" if self.status else "the run was not stored"
            lines.append(f"WARNING {self.unrecorded} of {ran} items lost: the database could not record them "
                         f"(see the FAULT lines); {where}")
        if self.wal_note:
            lines.append(f"WARNING {self.wal_note}")
        if self.status == "incomplete" and self.judge_failed:
            lines.append("WARNING run incomplete: some items' judge requests failed after retries; their answer metrics are missing")
        return lines
