"""The counters that bound what a client of `crucible serve` may cost: events per subject per
window (failed keys per address, promotes per key), work in flight (compares), and answers kept
(compares of complete runs). Plain Python and thread-safe: the event loop and the worker threads
both call them. Which limit applies where is decided in ``app``; the defaults in ``ServerLimits``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from typing import Callable, Generic, Hashable, TypeVar

Answer = TypeVar("Answer")


class WindowLimit:
    """At most ``limit`` events per subject in any ``window`` seconds (a sliding log per subject).

    The subjects remembered are capped (the least recently seen is forgotten first), so a caller
    inventing a new subject per request costs a bounded amount of memory."""

    def __init__(self, limit: int, window: float = 60.0, *, max_subjects: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.limit, self.window, self.max_subjects, self.clock = limit, window, max_subjects, clock
        self._events: OrderedDict[Hashable, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, subject: Hashable, now: float) -> deque[float]:
        events = self._events.get(subject)
        if events is None:
            events = self._events[subject] = deque()
            while len(self._events) > self.max_subjects:
                self._events.popitem(last=False)
        self._events.move_to_end(subject)
        while events and events[0] <= now - self.window:
            events.popleft()
        return events

    def _wait(self, events: deque[float], now: float) -> int | None:
        if len(events) < self.limit:
            return None
        return max(1, math.ceil(events[0] + self.window - now))

    def retry_after(self, subject: Hashable) -> int | None:
        """Whole seconds until ``subject`` may have another event; None when it may now."""
        with self._lock:
            now = self.clock()
            return self._wait(self._recent(subject, now), now)

    def record(self, subject: Hashable) -> None:
        with self._lock:
            now = self.clock()
            self._recent(subject, now).append(now)

    def take(self, subject: Hashable) -> int | None:
        """Record an event if ``subject`` may have one now (None); else the seconds to wait, recording nothing."""
        with self._lock:
            now = self.clock()
            events = self._recent(subject, now)
            wait = self._wait(events, now)
            if wait is None:
                events.append(now)
            return wait


class ConcurrencyBound:
    """At most ``limit`` pieces of work at once; a caller over it is turned away, never queued
    (a queue would only move the wait into the client's timeout)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._in_flight = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self._in_flight >= self.limit:
                return False
            self._in_flight += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._in_flight -= 1


class AnswerCache(Generic[Answer]):
    """The ``size`` most recently used answers, by key (least recently used forgotten first)."""

    def __init__(self, size: int):
        self.size = size
        self._answers: OrderedDict[Hashable, Answer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Answer | None:
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            return answer

    def put(self, key: Hashable, answer: Answer) -> None:
        with self._lock:
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)
