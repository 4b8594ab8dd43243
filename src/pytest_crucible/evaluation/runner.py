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
    from .conversations import ConversationCalls
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
        self._conversations: ConversationCalls | None = None  # the golden conversations' turns, once one runs
        self._planned_turns: frozenset[str] = frozenset()  # the golden conversations' turns this session selected
        # Set at collection: an xdist worker whose scheduler may give a conversation's turns to other workers too
        # (not --dist loadgroup), so a selected turn may run elsewhere.
        self.turns_may_split = False

    def plan(self, selected: list[tuple[str, GoldenItem]]) -> None:
        # Only the prefetcher reads the order: without it, the golden items are not held here too.
        self._run_order = selected if self.judging.settings.concurrency > 1 else []
        self._planned_turns = frozenset(golden.id for _, golden in selected if golden.conversation is not None)

    @property
    def async_runner(self) -> AsyncRunner:
        if self._async_runner is None:
            from .concurrency import AsyncRunner

            self._async_runner = AsyncRunner()
        return self._async_runner

    def run_pipeline(self, key: str, golden: GoldenItem, pipeline: Any, config: Any) -> Outcome:
        """Call the pipeline for one item (or take the result the prefetcher already has); a golden conversation's
        turn with its history (``evaluation/conversations.py``). ``key``: the test's (empty for a repeat).
        Raises PipelineSignatureError (before any call) when the pipeline cannot take its arguments."""
        __tracebackhide__ = True  # the user's pipeline frame comes first in a failure
        from .concurrency import Prefetcher, check_signature

        if pipeline is not self._checked_pipeline:  # once per pipeline object, not once per item
            check_signature(pipeline)
            self._checked_pipeline = pipeline
        self.evaluated += 1
        settings = self.judging.settings
        kwargs = {"config": config, "mode": settings.mode}
        conversations = self._turns(pipeline) if golden.conversation is not None or self._run_order_has_turns else None
        if settings.concurrency > 1:
            if self._prefetcher is None and self._run_order:
                self._prefetcher = Prefetcher(pipeline, self._run_order, concurrency=settings.concurrency, kwargs=kwargs,
                                              runner=self.async_runner, then=self.judging.judging_ahead(), conversations=conversations)
                self._run_order = []  # the prefetcher holds each golden item until its test takes it
            if self._prefetcher is not None and key in self._prefetcher:
                return self._warned(golden, self._prefetcher.take(key))
        if conversations is None or golden.conversation is None:
            return self._call(pipeline, golden, kwargs, None)
        outcome = conversations.outcome(golden, lambda turn, history: self._call(pipeline, turn, kwargs, history), keep=bool(key))
        return self._warned(golden, outcome)

    def _call(self, pipeline: Any, golden: GoldenItem, kwargs: dict[str, Any], history: list[dict[str, str]] | None) -> Outcome:
        __tracebackhide__ = True
        from .concurrency import Outcome, call_pipeline

        extra = {} if history is None else {"history": history}
        started = time.perf_counter()
        try:
            value = call_pipeline(pipeline, self.async_runner, golden.question, item=golden, **kwargs, **extra)
        except Exception as exc:
            return Outcome(error=exc, latency_ms=(time.perf_counter() - started) * 1000.0)
        return Outcome(value=value, latency_ms=(time.perf_counter() - started) * 1000.0)

    @property
    def _run_order_has_turns(self) -> bool:
        return any(golden.conversation is not None for _, golden in self._run_order)

    def _turns(self, pipeline: Any) -> ConversationCalls:
        """The session's conversation calls, made at the first turn (a pipeline without ``history``: warned once)."""
        if self._conversations is None:
            import warnings

            from ..warning import CrucibleWarning
            from .concurrency import takes_history
            from .conversations import ConversationCalls

            self._conversations = ConversationCalls(live=self.judging.settings.conversation == "live",
                                                    takes_history=takes_history(pipeline))
            if not self._conversations.takes_history:
                warnings.warn(CrucibleWarning(
                    "the golden set holds conversations, and the pipeline takes no history parameter: each turn is answered "
                    "without the conversation so far\nHINT: add history=None to the pipeline's parameters (or **kwargs): it "
                    "receives the earlier turns as [{'role': 'user' | 'assistant', 'content': ...}]"), stacklevel=2)
        return self._conversations

    def _warned(self, golden: GoldenItem, outcome: Outcome) -> Outcome:
        """The outcome, once the test has warned of earlier turns called for its history that will not run here
        (not selected, or perhaps run by another xdist worker): a selected turn whose test comes later in this
        process takes the answer made for the history, and needs no word."""
        called = self._conversations.called_for_history.pop(golden.id, None) if self._conversations is not None else None
        called = [turn for turn in called or () if self.turns_may_split or turn not in self._planned_turns]
        if called:
            import warnings

            from ..warning import CrucibleWarning
            from .conversations import history_warning

            # Said where the conversation is written, as a golden item's failure is.
            warnings.warn_explicit(CrucibleWarning(history_warning(golden.id, called)), CrucibleWarning,
                                   filename=golden.source or "golden file", lineno=golden.line or 1)
        return outcome

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
