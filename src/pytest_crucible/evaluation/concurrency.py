"""Calling the pipeline for many golden items at once, results still read one item at a time.

With ``--crucible-concurrency=N`` the runner calls the pipeline for the items just ahead
of the test that is running (a window of 2N selected items), N at a time; each test then
takes its own result, so outcomes, reports and their order stay per item. Sync pipelines
run in worker threads; ``async def`` pipelines run on one background event loop (so
clients bound to a loop keep working). A rate-limit error (HTTP 429, or an exception
whose class name says RateLimit) halves the concurrency and retries the call after a
back-off; each success adds one slot back (additive increase, multiplicative decrease).
Any other exception is that item's error and nothing else's.

The turns of a golden conversation under live history (``evaluation/conversations.py``) are called in
turn order, each once the one before it has its answer: the prefetcher hands a conversation to one worker,
which calls its turns one after another, while other conversations and items run beside it.

A judge whose requests wait on a network (``Judge.overlaps``) judges each item in the same worker
right after its pipeline call (``then``), so the judge's requests of the items in the window wait on
the provider together; the test finds its item judged (``Outcome.ahead``).

This module never imports pytest.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conversations import ConversationCalls

RATE_LIMIT_RETRIES = 8
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 2.0


def is_rate_limit(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    return status == 429 or "ratelimit" in type(exc).__name__.lower().replace("_", "")


class AsyncRunner:
    """One event loop in a daemon thread, for ``async def`` pipelines."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, awaitable) -> Any:
        __tracebackhide__ = True
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="crucible-async", daemon=True).start()
                self._loop = loop
        future = asyncio.run_coroutine_threadsafe(_await(awaitable), self._loop)
        try:
            return future.result()
        except BaseException as exc:  # the pipeline's own frames first, not concurrent.futures'
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code is not _await.__code__:
                tb = tb.tb_next
            if tb is None:
                raise
            raise exc.with_traceback(tb)  # noqa: B904 - the same exception, its chain unchanged

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None


async def _await(awaitable):
    __tracebackhide__ = True
    return await awaitable


EXPECTED_SIGNATURE = "pipeline(question, *, item, config, mode)"


class PipelineSignatureError(TypeError):
    """The ``crucible_pipeline`` fixture returned something that cannot be called as
    ``pipeline(question, *, item, config, mode)``: a usage error, not an item's failure."""


def check_signature(pipeline: Any) -> None:
    """Raise :class:`PipelineSignatureError` when ``pipeline`` cannot take the pipeline's arguments
    (``**kwargs`` and defaults are fine). A callable whose signature Python cannot read is trusted."""
    if not callable(pipeline):
        raise PipelineSignatureError(
            f"the crucible_pipeline fixture returned {type(pipeline).__name__} {_short_repr(pipeline)}, which is not callable\n"
            f"    expected: {EXPECTED_SIGNATURE} -> crucible.PipelineResult | dict\n"
            "HINT: the fixture returns the pipeline function itself (return pipeline), not the result of calling it")
    try:
        signature = inspect.signature(pipeline)
    except (TypeError, ValueError):  # builtins, some C callables: nothing to check
        return
    try:
        signature.bind("question", item=None, config=None, mode=None)
    except TypeError as exc:
        name = getattr(pipeline, "__name__", None) or type(pipeline).__name__
        raise PipelineSignatureError(
            "the crucible_pipeline fixture returned a callable with the wrong signature\n"
            f"    expected: {EXPECTED_SIGNATURE}\n"
            f"    got:      {name}{signature}  ({exc})\n"
            "HINT: take the question positionally and item, config and mode as keyword arguments "
            "(or **kwargs for the ones you do not use)") from None


def takes_history(pipeline: Any) -> bool:
    """Whether ``pipeline`` can be called with ``history=`` (a parameter of that name, or ``**kwargs``): only
    then is a conversation's turn called with the conversation so far. A signature Python cannot read: no."""
    try:
        parameters = inspect.signature(pipeline).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is p.VAR_KEYWORD or (p.name == "history" and p.kind is not p.POSITIONAL_ONLY) for p in parameters)


def error_text(exc: BaseException) -> str:
    """How a pipeline's exception is stored as the item's error: ``ValueError: the message``."""
    return f"{type(exc).__name__}: {exc}"


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def call_pipeline(pipeline: Callable[..., Any], runner: AsyncRunner, question: str, **kwargs: Any) -> Any:
    __tracebackhide__ = True  # the user's pipeline frame comes first in a failure
    result = pipeline(question, **kwargs)
    if inspect.isawaitable(result):
        result = runner.run(result)
    return result


class AdaptiveLimit:
    """A counting limit between 1 and ``ceiling`` that halves on rate limits and grows by one on success."""

    def __init__(self, ceiling: int):
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling
        self.in_use = 0
        self.lowest = self.ceiling
        self._cond = threading.Condition()

    def acquire(self) -> None:
        with self._cond:
            while self.in_use >= self.limit:
                self._cond.wait()
            self.in_use += 1

    def release(self, *, rate_limited: bool = False) -> None:
        with self._cond:
            self.in_use -= 1
            if rate_limited:
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
            elif self.limit < self.ceiling:
                self.limit += 1
            self._cond.notify_all()


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    latency_ms: float = 0.0
    # The item's score when it was scored ahead of its test (evaluation.judge_ahead), else None.
    ahead: Any = None


class Prefetcher:
    """Calls the pipeline ahead of the tests, for a window of the selected items in run order."""

    def __init__(self, pipeline: Callable[..., Any], items: Sequence[tuple[str, Any]], *, concurrency: int,
                 kwargs: dict[str, Any], runner: AsyncRunner, then: Callable[[Any, Outcome], None] | None = None,
                 conversations: ConversationCalls | None = None):
        """``then(golden, outcome)``: run in the worker after each call (judging ahead); it must not raise.
        ``conversations``: how a golden conversation's turn is called (its history), and which turns must
        be called one after another (``group``)."""
        self.pipeline = pipeline
        self.then = then
        self.conversations = conversations
        self.order = [key for key, _ in items]
        self.items = dict(items)
        # A conversation's turns (under live history) are called by one worker, in turn order.
        self.group: dict[str, str] = {}
        members: dict[str, list[tuple[int, str]]] = {}
        for key, golden in items:
            group = conversations.group(golden) if conversations is not None else None
            if group is not None:
                self.group[key] = group
                members.setdefault(group, []).append((golden.conversation.turn, key))
        self.members = {group: [key for _, key in sorted(turns)] for group, turns in members.items()}
        self.position = {key: index for index, key in enumerate(self.order)}
        self.window = 2 * concurrency
        self.kwargs = kwargs
        self.runner = runner
        self.limit = AdaptiveLimit(concurrency)
        self.rate_limited = 0
        self._futures: dict[str, Future] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=concurrency + 1, thread_name_prefix="crucible-pipeline")
        self._closed = False

    def __contains__(self, key: str) -> bool:
        """True while the item's outcome has not been taken (a re-run of its test calls the pipeline itself)."""
        return key in self.items

    def _call(self, key: str) -> Outcome:
        __tracebackhide__ = True
        golden = self.items[key]
        if self.conversations is not None and golden.conversation is not None:
            outcome = self.conversations.outcome(golden, self._attempts)
        else:
            outcome = self._attempts(golden, None)
        if outcome.error is None and self.then is not None and not self._closed:
            self.then(golden, outcome)
        return outcome

    def _attempts(self, golden: Any, history: list[dict[str, str]] | None) -> Outcome:
        """One pipeline call for ``golden`` (``history``: passed when not None), retried after rate limits."""
        __tracebackhide__ = True
        extra = {} if history is None else {"history": history}
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            self.limit.acquire()
            started = time.perf_counter()
            try:
                value = call_pipeline(self.pipeline, self.runner, golden.question, item=golden, **self.kwargs, **extra)
            except Exception as exc:
                limited = is_rate_limit(exc) and attempt < RATE_LIMIT_RETRIES
                self.limit.release(rate_limited=limited)
                if limited:
                    with self._lock:
                        self.rate_limited += 1
                    time.sleep(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt))
                    continue
                return Outcome(error=exc, latency_ms=(time.perf_counter() - started) * 1000.0)
            self.limit.release()
            return Outcome(value=value, latency_ms=(time.perf_counter() - started) * 1000.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _fill(self, upto: int) -> None:
        with self._lock:
            while not self._closed and self._next < min(upto, len(self.order)):
                key = self.order[self._next]
                self._next += 1
                if key in self._futures:  # submitted with its conversation
                    continue
                group = self.group.get(key)
                if group is None:
                    self._futures[key] = self._pool.submit(self._call, key)
                    continue
                turns: list[tuple[str, Future]] = [(member, Future()) for member in self.members[group] if member not in self._futures]
                self._futures.update(turns)
                self._pool.submit(self._call_in_turn, turns)

    def _call_in_turn(self, turns: list[tuple[str, Future]]) -> None:
        """The turns of one conversation, one after another: each outcome into its own future."""
        for key, future in turns:
            if not future.set_running_or_notify_cancel():  # cancelled: the session is ending
                continue
            try:
                future.set_result(self._call(key))
            except BaseException as exc:  # never a lost future: its test meets the exception
                future.set_exception(exc)

    def take(self, key: str) -> Outcome:
        """This item's outcome (waits for it); keeps the window ahead of it filled."""
        self._fill(self.position[key] + 1 + self.window)
        with self._lock:
            future = self._futures.pop(key, None)
        try:
            if future is None:  # not submitted (the window was closed): call now
                return self._call(key)
            return future.result()
        finally:
            with self._lock:
                self.items.pop(key, None)  # the golden item is its test's from here on

    def close(self) -> None:
        """Cancel calls not started yet (e.g. after -x stopped the session)."""
        with self._lock:
            self._closed = True
            for future in self._futures.values():
                future.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)
