"""The one stateful object of a pytest session, kept in ``config.stash``: the conductor of one run.

It is built from frozen :class:`~pytest_crucible.settings.Settings` and knows nothing about pytest: the
plugin hands it each item and its score and asks it for the verdict and the summary; it never calls back
into the plugin. The work is done by its parts: :class:`~.evaluation.runner.ItemRunner` calls the
pipeline and evaluates an item, :class:`~.evaluation.judging.SessionJudging` owns the judge, and
:class:`~.store.recorder.RunRecorder` writes the run (only the process that owns it, the controller under
xdist, opens the store). The session keeps the order of events, the faults, and the one
:class:`~.verdict.gate.GateResult`.

The sequence, as the plugin drives it:

1. ``plan`` (the items collected) and ``reserve_run`` (the run's row, ``running``, before any test);
2. per item ``evaluate`` then ``record`` (with ``note_stopped`` for an item pytest-timeout stopped);
3. ``end`` once, at session finish: the run closed with its status, the config keys checked, the gate
   decided, the HTML report written; every step's failure is kept as a fault, never raised;
4. ``exit_status`` and ``summary_lines`` read what ``end`` decided;
5. ``close`` last (at unconfigure, also when ``end`` never ran): the pipeline calls, the writing
   process, the judge and the store released. A run that never reached ``end`` (SIGKILL) stays ``running`` and
   is marked ``interrupted`` by the next session that opens the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import ConfigUse, TrackedConfig
from .defaults import ERROR_CLASSES_VERSION
from .evaluation.conversations import record_conversation_metrics
from .evaluation.judging import SessionJudging
from .evaluation.runner import ItemRunner
from .evaluation.sightings import CitationSightings
from .settings import Settings
from .store.recorder import RunRecorder
from .store.schema import RunStatus
from .workspace import git_commit

if TYPE_CHECKING:
    from .evaluation import ItemVerdict
    from .evaluation.answers import CostEstimate
    from .golden_set.schema import GoldenItem
    from .judge.engine import JudgeEngine
    from .report.lines import SummaryLine
    from .store import Store
    from .store.selection import Selection
    from .verdict.gate import GateResult

# pytest's exit code for a usage error (the session is pure: no pytest import).
USAGE_ERROR = 4


@dataclass
class CrucibleSession:
    settings: Settings
    is_worker: bool = False
    status: str | None = None  # the run's status once ``end`` closed it (a RunStatus value)
    gate: GateResult | None = None
    outcomes: dict[str, int] = field(default_factory=dict)  # every item's outcome, recorded or not
    sightings: CitationSightings = field(default_factory=CitationSightings)  # cited chunks no ranking ever held
    faults: list[str] = field(default_factory=list)  # each one fails the session and is shown
    usage_errors: list[str] = field(default_factory=list)  # exit 4, shown last (a config key made an error)
    skipped: int = 0  # golden items collected but not run (drafts)
    stopped: list[str] = field(default_factory=list)  # items pytest-timeout stopped (the run is then incomplete)
    selection: Selection | None = None  # what was selected of the golden set, when less than all of it
    judge_failed: int = 0
    config: ConfigUse = field(init=False)
    judging: SessionJudging = field(init=False)
    items: ItemRunner = field(init=False)
    recorder: RunRecorder = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.judging = SessionJudging(s)
        self.items = ItemRunner(self.judging)
        self.config = ConfigUse(s.resolved, s.config_path, s.baseline_config_keys)
        self.recorder = RunRecorder(s.db_path, run_fields=self._run_fields, faults=self.faults, fixed_id=s.run_id,
                                    background_writes=s.background_writes)

    # -- before the tests ----------------------------------------------------------------------------
    def plan(self, selected: list[tuple[str, GoldenItem]], skipped: int, selection: Selection | None = None) -> None:
        """The golden items this session will run, in run order (the prefetcher calls ahead along it),
        and how many it collected but skips (drafts), counted with the run. ``selection``: what was selected
        when that is less than the golden files hold (-k, --lf, a shard: store.selection), recorded with the run."""
        self.selection, self.skipped = selection, skipped
        self.items.plan(selected)
        self.recorder.planned = len(selected)

    def reserve_run(self) -> None:
        """Write the run's row before any test runs (see ``RunRecorder.reserve``)."""
        if not self.is_worker:
            self.recorder.reserve(self._run_fields())

    def add_custom_metrics(self, found: tuple) -> None:
        """Python metrics found after configure (a conftest.py imported during collection) join the session's."""
        known = {m.name for m in self.settings.custom_metrics}
        late = tuple(m for m in found if m.name not in known)
        if late:
            from dataclasses import replace

            merged = tuple(sorted(self.settings.custom_metrics + late, key=lambda m: m.name))
            self.settings = self.judging.settings = replace(self.settings, custom_metrics=merged)

    @property
    def engine(self) -> JudgeEngine:
        return self.judging.engine

    def estimate_judge_cost(self, golden: list[GoldenItem]) -> CostEstimate | None:
        return self.judging.estimate_cost(golden)

    # -- each item ----------------------------------------------------------------------------------------
    def evaluate(self, key: str, golden: GoldenItem, pipeline: Any, config: Any, embedder: Any) -> ItemVerdict:
        """Run one item's pipeline (or take the prefetched result) and evaluate it."""
        __tracebackhide__ = True
        return self.items.evaluate(key, golden, pipeline, config, embedder)

    def run_pipeline(self, key: str, golden: GoldenItem, pipeline: Any, config: Any) -> Any:
        __tracebackhide__ = True
        return self.items.run_pipeline(key, golden, pipeline, config)

    def note_stopped(self, item_id: str) -> None:
        """An item whose evaluation was stopped from outside (pytest-timeout): its errored score follows."""
        self.stopped.append(item_id)

    def record(self, score: dict[str, Any], *, rerun: bool = False) -> None:
        """One item's score for the run. ``rerun``: pytest will run the item again (pytest-rerunfailures):
        this attempt is kept, and written with the item's last one."""
        if not rerun:
            outcome = score.get("outcome") or "unknown"
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            self.sightings.add(score)
            # Which embedder measured responseRelevancy (the item's verdict says, whichever process scored it).
            relevancy = (score.get("verdicts") or {}).get("responseRelevancy") or {}
            self.judging.embedder_name = self.judging.embedder_name or relevancy.get("embedder")
        if not self.is_worker and self.recorder.record(score, rerun=rerun):
            self.recorder.flush(self.judging.run_fields)

    def stop_pipeline_calls(self) -> None:
        self.items.stop()

    # -- the config handed to the pipeline ---------------------------------------------------------------
    @property
    def tracked_config(self) -> TrackedConfig:
        return self.config.tracked

    def unread_config_keys(self) -> list[str]:
        """Changed config keys the pipeline never read (none when no pipeline ran)."""
        return self.config.unread_keys() if self.items.evaluated else []

    # -- the workers under xdist ---------------------------------------------------------------------------
    def worker_output(self) -> dict[str, Any]:
        """What a worker reports at its end (plain types): config reads, evaluations, stopped items, judging."""
        selection = self.selection
        return {"reads": sorted(self.config.reads), "evaluated": self.items.evaluated, "stopped": list(self.stopped),
                "selection": {"ran": selection.ran, "held": selection.held, "by": selection.by} if selection else None,
                **self.judging.worker_output()}

    def add_worker_output(self, output: dict[str, Any]) -> None:
        self.config.reads.update(output["reads"])
        self.stopped.extend(output.get("stopped") or [])
        if output.get("selection") and self.selection is None:  # every worker collects the same items
            from .store.selection import Selection

            self.selection = Selection(**output["selection"])
        self.items.evaluated += output["evaluated"]
        self.judging.add_worker_output(output)

    # -- the run in the store --------------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.recorder.store

    @property
    def run_id(self) -> str | None:
        return self.recorder.run_id

    def adopt_run(self, run_id: str, status: str) -> None:
        """Take a run recorded elsewhere as this session's (its gate and summary read it): for tools and tests."""
        self.recorder.run_id, self.status = run_id, status

    def _run_fields(self) -> dict[str, Any]:
        """What a run's row says of its settings (known before any test is collected)."""
        s = self.settings
        return dict(workspace=s.workspace, labels=s.labels, kinds=list(s.kinds) if s.kinds else None, config_hash=s.config_hash,
                    params=s.params, resolved=s.resolved, mode=s.mode, outcome_mode=s.outcome_mode, config_path=s.config_path,
                    git_commit=git_commit(s.rootdir), pytest_args=list(s.pytest_args), repeats=s.repeat, eval_k=s.k,
                    error_classes=ERROR_CLASSES_VERSION, conversation_history=s.conversation)

    def _close_run(self, interrupted: bool, progress: Callable[[str], object] | None) -> None:
        """Write what is pending, judge Message Batches, and close the run with its status."""
        if self.is_worker:
            return
        recorder = self.recorder
        for latest in recorder.held_attempts():  # stopped before its next attempt: the latest one is its result
            self.record(latest)
        recorder.write_everything(self.judging.run_fields)
        if recorder.run_id is None:
            return
        if not interrupted:
            self.judging.judge_run_in_batch(self.store, recorder.run_id, progress)
        record_conversation_metrics(self.store, recorder.run_id)  # once every turn is graded (Message Batches: above)
        self.judge_failed = self.store.count_judge_failed(recorder.run_id)
        status = (RunStatus.INTERRUPTED if interrupted
                  else RunStatus.INCOMPLETE if self.judge_failed or self.stopped else RunStatus.COMPLETE)
        self.status = recorder.close_run(status.value, judge=self.judging.run_stats(), unread_keys=self.unread_config_keys(),
                                         skipped=self.skipped, embedder=self.judging.embedder_name,
                                         selection=self.selection.to_json() if self.selection is not None else None)

    # -- the end -----------------------------------------------------------------------------------------
    def end(self, *, interrupted: bool, html_path: str | None = None, progress: Callable[[str], object] | None = None,
            warn: Callable[[str, str | None, int], bool] | None = None) -> None:
        """Session end, in order: close the run, check the config keys, decide the gate, write the HTML report.
        A step that fails is kept as a fault (it fails the session and the summary names it), never raised.
        ``warn``: how an unread key is reported (see :meth:`.config.ConfigUse.unread_keys_error`)."""
        try:
            self._close_run(interrupted, progress)
        except Exception as exc:
            self.faults.append(f"could not finish the run in {self.settings.db_path}: {exc}")
        try:
            error = None if self.is_worker or not self.items.evaluated else \
                self.config.unread_keys_error(strict=self.settings.strict_config, warn=warn)
            if error:
                self.usage_errors.append(error)
        except Exception as exc:
            self.faults.append(f"could not report the config keys the pipeline never read: {type(exc).__name__}: {exc}")
        try:
            if not self.is_worker and (self.status is not None or self.faults):  # else nothing ran
                from .verdict.gate import gate_of_session_run

                s = self.settings
                self.gate = gate_of_session_run(self.recorder.store if self.status is not None else None, self.run_id, self.status,
                                                s.gate, db_path=s.db_path, workspace=s.workspace,
                                                unrecorded=self.recorder.unrecorded, strict_config=s.strict_config)
        except Exception as exc:
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
            except Exception as exc:
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
        if status == 0 and (self.faults or self.status == RunStatus.INCOMPLETE):
            status = 1
        return status

    def close(self) -> None:
        """Release everything the session holds (safe to call more than once, and when ``end`` never ran)."""
        self.items.close()
        self.recorder.close()  # a session that never reached end(): what the writing process received is still written
        self.judging.close()

    # -- what the terminal shows ---------------------------------------------------------------------------
    def summary_lines(self, verbose: int = 0) -> list[SummaryLine]:
        """The crucible section of the terminal summary (:func:`~.report.session_summary.session_summary_lines`)."""
        from .report.session_summary import session_summary_lines

        return session_summary_lines(self, verbose)
