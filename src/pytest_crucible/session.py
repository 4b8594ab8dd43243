"""The one stateful object of a pytest session, kept in ``config.stash``.

It is built from frozen :class:`Settings` and knows nothing about pytest: the
plugin feeds it scores and asks it for the summary. Only the process that owns
the run (the controller under xdist) opens the store.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import TrackedConfig, unread_changed_keys

MODES = ("system", "component")
# Scores are written in batches of this many items, or at least this often.
FLUSH_ITEMS = 50
FLUSH_SECONDS = 2.0


@dataclass(frozen=True)
class Settings:
    params: dict[str, Any]
    resolved: dict[str, Any]
    config_hash: str
    config_path: str | None
    db_path: Path
    mode: str = "system"
    outcome_mode: str = "strict"
    include_drafts: bool = False
    golden_patterns: tuple[str, ...] = ("golden_*.jsonl", "*.golden.jsonl")
    rootdir: Path = Path(".")
    pytest_args: tuple[str, ...] = ()
    # The session gate: baseline is a run id, "latest", or an exported run (PATH.json).
    baseline: str | None = None
    baseline_export: dict[str, Any] | None = None
    gate: tuple[str, ...] | None = None
    floors: tuple[tuple[str, float], ...] = ()
    multiple: str = "none"
    seed: int = 1337
    # --crucible-allow-incomplete: gate an incomplete or interrupted run (either side) on the items it has.
    allow_incomplete: bool = False
    # The judge of the answer layer (system mode only).
    judge: str = "auto"
    judge_model: str | None = None
    judge_batch: bool = False
    judge_cache: str = "readwrite"
    max_cost: float | None = None
    label_pool: bool = False
    concurrency: int = 1
    # Shards on several machines share one run id; `crucible merge` joins them.
    run_id: str | None = None
    # Who the run belongs to and how it is tagged (never part of the configHash).
    workspace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    # --crucible-kind: the question kinds this run selected (None: every kind).
    kinds: tuple[str, ...] | None = None

    @property
    def retrieval_limit(self) -> int:
        return int(self.resolved["retrievalLimit"])


def git_commit(directory: Path) -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@dataclass
class CrucibleSession:
    settings: Settings
    is_worker: bool = False
    run_id: str | None = None
    evaluated: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    config_reads: set[str] = field(default_factory=set)
    status: str | None = None
    comparison: Any = None
    gate_failures: list[str] = field(default_factory=list)
    gate_checked: bool = False
    # Why the gate did not run although asked to (an interrupted run), and its warnings.
    gate_skipped: str | None = None
    # Why the gate would not compare this run at all (shown in the HTML report instead of a comparison).
    gate_refusal: str | None = None
    gate_warnings: list[str] = field(default_factory=list)
    # Items of this run whose judging failed (they have no judge-based metrics).
    judge_error_items: int = 0
    # Counters reported by xdist workers (their engines ran the judge).
    worker_judge: dict[str, float] = field(default_factory=dict)
    cost_estimate: Any = None
    # Where progress lines of long judge work go (the plugin sets pytest's terminal writer).
    progress_writer: Any = None
    batch_errors: list[str] = field(default_factory=list)
    embedder: Any = None
    _store: Any = None
    _tracked: TrackedConfig | None = None
    _engine: Any = None
    _ledger: dict[str, list[dict[str, Any]]] | None = None
    _prefetcher: Any = None
    _async_runner: Any = None
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _flushed_at: float = field(default_factory=time.monotonic)

    # -- calling the pipeline --------------------------------------------------------------
    @property
    def async_runner(self):
        if self._async_runner is None:
            from .concurrency import AsyncRunner

            self._async_runner = AsyncRunner()
        return self._async_runner

    def run_pipeline(self, key: str, golden, pipeline, config, selected=None):
        """Call the pipeline for one item (or take the result the prefetcher already has).

        ``selected`` gives the remaining selected items in run order as (key, golden item),
        asked for only when concurrency is on and nothing is prefetched yet.
        """
        from .concurrency import Outcome, Prefetcher, call_pipeline

        kwargs = {"config": config, "mode": self.settings.mode}
        if self.settings.concurrency > 1:
            if self._prefetcher is None and selected is not None:
                self._prefetcher = Prefetcher(pipeline, selected(), concurrency=self.settings.concurrency,
                                              kwargs=kwargs, runner=self.async_runner)
            if self._prefetcher is not None and key in self._prefetcher:
                return self._prefetcher.take(key)
        started = time.perf_counter()
        try:
            value = call_pipeline(pipeline, self.async_runner, golden.question, item=golden, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the item's own error
            return Outcome(error=exc, latency_ms=(time.perf_counter() - started) * 1000.0)
        return Outcome(value=value, latency_ms=(time.perf_counter() - started) * 1000.0)

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

    # -- the judge ---------------------------------------------------------------------------------
    @property
    def judges_answers(self) -> bool:
        return self.settings.mode == "system"

    @property
    def uses_judge(self) -> bool:
        return self.judges_answers or self.settings.label_pool

    def ledger_rows(self, query_id: str) -> list[dict[str, Any]]:
        """The human and llm judgments of one query, loaded once per session (read-only)."""
        if self._ledger is None:
            from .store import read_only_rows

            self._ledger = {}
            for row in read_only_rows(self.settings.db_path, "SELECT * FROM qrels WHERE source IN ('human', 'llm') ORDER BY id"):
                self._ledger.setdefault(row["query_id"], []).append(row)
        return self._ledger.get(query_id, [])

    @property
    def engine(self):
        """The session's judge engine, its cache preloaded from the database (read-only)."""
        if self._engine is None:
            from .judge.engine import JudgeEngine
            from .judge.select import make_judge, read_cache_rows

            s = self.settings
            engine = JudgeEngine(make_judge(s.judge, model=s.judge_model, batch=s.judge_batch), cache_mode=s.judge_cache)
            if s.judge_cache != "off":
                engine.load_cache(read_cache_rows(s.db_path, engine.model))
            self._engine = engine
        return self._engine

    def score_answer_layer(self, score, embedder) -> None:
        """Judge one item's answer layer now (the non-batch path), into its ItemScore."""
        from .answers import AnswerInputs, score_answers

        self.embedder = embedder
        [result] = score_answers([AnswerInputs.from_score(score.to_plain())], self.engine, embedder)
        score.metrics.update(result.metrics)
        score.judge_errors.extend(result.errors)
        score.verdicts = result.verdicts
        score.assertions = result.assertions
        score.crag_grade = result.crag_grade
        score.unsupported_claims = result.unsupported_claims
        score.supporting_chunk_ids = result.supporting_chunk_ids

    def score_answers_in_batch(self) -> None:
        """Message Batches: judge every recorded item of the run at once, at session end."""
        from .answers import AnswerInputs, score_answers
        from .embed import HashingEmbedder
        from .scoring import classify_score, missing_required_citations

        store = self.store
        document = store.export_run(self.run_id)
        items = {golden["item_id"]: golden["item"] for golden in document["goldenItems"]}
        rows = [{**row, "item": items[row["item_id"]]} for row in document["results"] if not row.get("error") and not row.get("blocked")]
        self._watch_batches(len(rows))
        results = score_answers([AnswerInputs.from_score(row) for row in rows], self.engine, self.embedder or HashingEmbedder())
        for row, result in zip(rows, results):
            row.update(assertions=result.assertions, crag_grade=result.crag_grade, unsupported_claims=result.unsupported_claims,
                       supporting_chunk_ids=result.supporting_chunk_ids,
                       missing_citations=missing_required_citations(row["item"], row["retrieved"], self.settings.retrieval_limit))
            error_class, evidence = (None, None) if result.errors else classify_score(row, mode=self.settings.mode)
            store.add_answer_scores(self.run_id, row["item_id"], result.metrics, result.errors, result.verdicts, result.assertions,
                                    error_class=error_class, error_evidence=evidence, crag_grade=result.crag_grade)
            self.batch_errors.extend(f"golden item {row['item_id']}: judge failed: {error}" for error in result.errors)
        store.add_cache_rows(self.engine.drain_cache_rows())

    def _watch_batches(self, n_items: int) -> None:
        """Progress lines while Message Batches are processed (one Progress per batch)."""
        if self.progress_writer is None or not hasattr(self.engine.judge, "on_progress"):
            return
        from .progress import Progress

        watched: dict[str, Progress] = {}

        def on_progress(batch_id: str, done: int, total: int) -> None:
            if batch_id not in watched:
                label = f"Message Batch {len(watched) + 1} for {n_items} items ({batch_id})"
                watched[batch_id] = Progress(label, total, self.progress_writer, unit="judge requests")
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
        return totals

    # -- the run in the store ------------------------------------------------------
    @property
    def store(self):
        if self._store is None:
            from .store import Store

            self._store = Store.open(self.settings.db_path)
        return self._store

    def _ensure_run(self) -> str:
        if self.run_id is None:
            s = self.settings
            judge = self.engine.judge if self.uses_judge else None
            self.run_id = self.store.start_run(
                run_id=s.run_id,
                workspace=s.workspace,
                labels=s.labels,
                kinds=list(s.kinds) if s.kinds else None,
                judge_model=judge.model if judge else None,
                judge_prompt_version=judge.prompt_version if judge else None,
                judge_label=judge.label if judge else None,
                cost_estimate_usd=self.cost_estimate.cost_usd if self.cost_estimate else None,
                config_hash=s.config_hash,
                params=s.params,
                resolved=s.resolved,
                mode=s.mode,
                outcome_mode=s.outcome_mode,
                config_path=s.config_path,
                git_commit=git_commit(s.rootdir),
                pytest_args=list(s.pytest_args),
            )
        return self.run_id

    def record(self, score: dict[str, Any]) -> None:
        """Queue one item's score for the store; written in batches (see ``flush``)."""
        outcome = score.get("outcome") or "unknown"
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if self.is_worker:
            return
        self._pending.append(score)
        if len(self._pending) >= FLUSH_ITEMS or time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write the queued scores in one transaction. A store failure is kept as a fault, never lost silently.

        Batching keeps SQLite commits off the per-item path; a killed process loses at most
        the last FLUSH_ITEMS items (or FLUSH_SECONDS) of its own run, never an earlier run.
        """
        self._flushed_at = time.monotonic()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self.store.record_scores(self._ensure_run(), pending)
        except Exception as exc:  # noqa: BLE001 - reported as a fault that fails the session
            ids = ", ".join(repr(score.get("item_id")) for score in pending[:5])
            self.faults.append(f"could not record {len(pending)} item(s) ({ids}...) in {self.settings.db_path}: {exc}")
        except BaseException:
            # Ctrl-C landed in the write: its transaction rolled back, so keep the batch for finish() to write.
            self._pending = pending + self._pending
            raise

    def finish(self, interrupted: bool) -> None:
        if self.is_worker:
            return
        self.flush()
        if self.run_id is None:
            return
        from .golden_set import golden_set_hash

        store = self.store
        if not interrupted and self.judges_answers and self.settings.judge_batch:
            self.score_answers_in_batch()
        judge_errors = store.db.conn.execute(
            "SELECT COUNT(*) FROM results WHERE run_id = ? AND judge_errors != '[]'", [self.run_id]).fetchone()[0]
        self.judge_error_items = judge_errors
        self.status = "interrupted" if interrupted else "incomplete" if judge_errors else "complete"
        summary = self.judge_summary()
        judge = {
            "stats": {name: int(summary.get(name, 0)) for name in ("requests", "cache_hits", "judged", "failures")},
            "cost_usd": summary.get("cost_usd"),
            "input_tokens": int(summary.get("input_tokens", 0)),
            "output_tokens": int(summary.get("output_tokens", 0)),
        } if self.uses_judge else None
        store.finish_run(self.run_id, status=self.status, golden_hash=golden_set_hash(store.golden_items(self.run_id)), judge=judge)

    # -- the gate ----------------------------------------------------------------------------
    def apply_gate(self) -> list[str]:
        """Compare this run with the baseline and check the floors; returns one reason per failure."""
        s = self.settings
        if self.is_worker or self.run_id is None or self.status is None or not (s.baseline or s.floors):
            return []
        if self.status == "interrupted":  # the session already exits 2 (interrupted); nothing to judge by
            self.gate_skipped = "this run was interrupted: the gate did not compare it"
            return []
        from .stats.compare import ComparisonRefused, compare_run_data, floor_failures, regression_reasons
        from .store import StoreError, run_data_from_export

        self.gate_checked = True
        if self.status != "complete":
            if not s.allow_incomplete:
                n = self.judge_error_items
                reason = (f"this run is {self.status} ({n} item{'s' if n != 1 else ''} without judge-based metrics): "
                          "refusing to compare it; pass --crucible-allow-incomplete to compare the items it has")
                self.gate_failures = [reason]
                self.gate_refusal = reason
                return [reason]
            self.gate_warnings.append(f"WARNING comparing an incomplete run (--crucible-allow-incomplete): "
                                      f"{self.judge_error_items} item(s) have no judge-based metrics and are left out of those")
        store = self.store
        current = store.run_data(self.run_id)
        reasons: list[str] = []
        if s.baseline:
            try:
                if s.baseline_export is not None:
                    baseline = run_data_from_export(s.baseline_export)
                else:
                    baseline = store.run_data(store.resolve_run(s.baseline, exclude=self.run_id, workspace=s.workspace))
                status = baseline.run.get("status")
                if status != "complete":  # only with --crucible-allow-incomplete (refused at configure time otherwise)
                    self.gate_warnings.append(f"WARNING comparing against a baseline that is {status} (--crucible-allow-incomplete): "
                                              "only the items and metrics it has are paired")
                self.comparison = compare_run_data(baseline, current, seed=s.seed, multiple=s.multiple)
            except (ComparisonRefused, StoreError) as exc:
                reasons.append(str(exc).splitlines()[0])
            else:
                gated = set(s.gate) if s.gate else set(self.comparison.metrics)
                for name in sorted(gated - set(self.comparison.metrics)):
                    reasons.append(f"gated metric {name} was not measured in either run")
                reasons.extend(regression_reasons(self.comparison, gated))
        reasons.extend(floor_failures(current.means(), dict(s.floors)))
        self.gate_failures = reasons
        return reasons

    def gate_lines(self) -> list[str]:
        if self.gate_skipped:
            return [f"gate skipped: {self.gate_skipped}"]
        if not self.gate_checked:
            return []
        from .report.views import comparison_lines

        s = self.settings
        lines: list[str] = list(self.gate_warnings)
        if self.comparison is not None:
            lines.extend(comparison_lines(self.comparison, set(s.gate) if s.gate else None))
        if self.gate_failures:
            lines.extend(f"GATE FAILED {reason}" for reason in self.gate_failures)
        else:
            what = "no significant regression" if s.baseline else "all floors met"
            lines.append(f"gate passed: {what}" + (" and all floors met" if s.baseline and s.floors else ""))
        return lines

    def close(self) -> None:
        self.stop_pipeline_calls()
        if self._async_runner is not None:
            self._async_runner.close()
        if self._engine is not None:
            self._engine.judge.close()
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- what the terminal shows -------------------------------------------------------
    def summary_lines(self, verbose: int = 0) -> list[str]:
        """The crucible section of the terminal summary; ``verbose < 0`` (-q) keeps one line,
        plus every warning, fault and gate failure (those are never hidden)."""
        if self.run_id is None:
            return []
        from .report.terminal import ALERT_PREFIXES, one_line_summary

        if verbose < 0:
            lines = self._full_summary_lines(verbose)
            gate = None
            if self.gate_checked:
                gate = "GATE FAILED" if self.gate_failures else "gate passed"
            return [one_line_summary(self.store, self.run_id, gate=gate)] + [line for line in lines if line.startswith(ALERT_PREFIXES)]
        return self._full_summary_lines(verbose)

    def _full_summary_lines(self, verbose: int) -> list[str]:
        from .report.terminal import run_summary_lines

        lines = run_summary_lines(self.store, self.run_id, unread_keys=self.unread_config_keys(), faults=self.faults, verbose=verbose)
        lines.extend(f"JUDGE ERROR {error}" for error in self.batch_errors)
        if self.status == "incomplete":
            lines.append("WARNING run incomplete: some items' judge requests failed after retries; their answer metrics are missing")
        return lines + self.gate_lines()
