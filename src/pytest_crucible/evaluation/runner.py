"""How one session calls the pipeline and evaluates an item: the pipeline's signature checked once, the
calls made ahead of the tests when concurrency allows (the prefetcher, judging each answer as it arrives
when the judge waits on a network), an async pipeline run in one event loop, repeats combined."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..golden_set.schema import GoldenItem
    from . import ItemVerdict
    from .concurrency import AsyncRunner, Outcome, Prefetcher
    from .judging import SessionJudging


class ItemRunner:
    """The items of one session, in run order. ``judging`` supplies the judge, ledger and calibration."""

    def __init__(self, judging: SessionJudging) -> None:
        self.judging = judging
        self.evaluated = 0  # pipeline calls made (an unread config key means something only after one)
        self._run_order: list[tuple[str, GoldenItem]] = []
        self._prefetcher: Prefetcher | None = None
        self._async_runner: AsyncRunner | None = None
        self._checked_pipeline: Any = None
        self._result_keys_explained = False

    def plan(self, selected: list[tuple[str, GoldenItem]]) -> None:
        # Only the prefetcher reads the order: without it, the golden items are not held here too.
        self._run_order = selected if self.judging.settings.concurrency > 1 else []

    @property
    def async_runner(self) -> AsyncRunner:
        if self._async_runner is None:
            from .concurrency import AsyncRunner

            self._async_runner = AsyncRunner()
        return self._async_runner

    def run_pipeline(self, key: str, golden: GoldenItem, pipeline: Any, config: Any) -> Outcome:
        """Call the pipeline for one item (or take the result the prefetcher already has).
        Raises PipelineSignatureError (before any call) when the pipeline cannot take its arguments."""
        __tracebackhide__ = True  # the user's pipeline frame comes first in a failure
        from .concurrency import Outcome, Prefetcher, call_pipeline, check_signature

        if pipeline is not self._checked_pipeline:  # once per pipeline object, not once per item
            check_signature(pipeline)
            self._checked_pipeline = pipeline
        self.evaluated += 1
        settings = self.judging.settings
        kwargs = {"config": config, "mode": settings.mode}
        if settings.concurrency > 1:
            if self._prefetcher is None and self._run_order:
                self._prefetcher = Prefetcher(pipeline, self._run_order, concurrency=settings.concurrency,
                                              kwargs=kwargs, runner=self.async_runner, then=self.judging.judging_ahead())
                self._run_order = []  # the prefetcher holds each golden item until its test takes it
            if self._prefetcher is not None and key in self._prefetcher:
                return self._prefetcher.take(key)
        started = time.perf_counter()
        try:
            value = call_pipeline(pipeline, self.async_runner, golden.question, item=golden, **kwargs)
        except Exception as exc:
            return Outcome(error=exc, latency_ms=(time.perf_counter() - started) * 1000.0)
        return Outcome(value=value, latency_ms=(time.perf_counter() - started) * 1000.0)

    def evaluate(self, key: str, golden: GoldenItem, pipeline: Any, config: Any, embedder: Any) -> ItemVerdict:
        """Run one item's pipeline (or take the prefetched result) and evaluate it, each repeat."""
        __tracebackhide__ = True
        from . import evaluate

        judging, s = self.judging, self.judging.settings
        if embedder is not None:
            judging.embedder = embedder  # Message Batches judge at session end with the same embedder
        verdicts = []
        for repeat in range(s.repeat):  # the first call may come from the prefetcher; repeats are called here
            outcome = self.run_pipeline(key if repeat == 0 else "", golden, pipeline, config)
            verdicts.append(evaluate(golden, outcome, settings=s, ledger=judging.ledger_rows(golden.id),
                                     engine=judging.engine if s.uses_judge else None, embedder=embedder,
                                     explain_keys=not self._result_keys_explained, rubrics=judging.graded_rubrics,
                                     calibration=judging.calibration, route=judging.route))
            self._result_keys_explained = self._result_keys_explained or verdicts[-1].explained_keys
        if s.repeat == 1:
            return verdicts[0]
        from .repeats import combine

        return combine(golden.id, verdicts, s.repeat_pass)

    def stop(self) -> None:
        """No more pipeline calls ahead of the tests (the session is ending)."""
        if self._prefetcher is not None:
            self._prefetcher.close()

    def close(self) -> None:
        self.stop()
        if self._async_runner is not None:
            self._async_runner.close()
