"""The counters that bound what a client of `crucible serve` may cost: events per subject per
window (failed keys per address, promotes per key), work in flight (compares, metrics; requests per
key), and answers kept (compares of complete runs, with a share per key). Plain Python and
thread-safe: the event loop and the worker threads both call them. Which limit applies where is
decided in ``app``; the defaults in ``ServerLimits``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

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


class InFlightPerSubject:
    """At most ``limit`` pieces of work at once per subject (requests per key); a caller over it is
    turned away. Only subjects with work in flight are remembered."""

    def __init__(self, limit: int):
        self.limit = limit
        self._in_flight: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def try_acquire(self, subject: Hashable) -> bool:
        with self._lock:
            count = self._in_flight.get(subject, 0)
            if count >= self.limit:
                return False
            self._in_flight[subject] = count + 1
            return True

    def release(self, subject: Hashable) -> None:
        with self._lock:
            count = self._in_flight.get(subject, 0) - 1
            if count > 0:
                self._in_flight[subject] = count
            else:
                self._in_flight.pop(subject, None)


class AnswerCache(Generic[Answer]):
    """The ``size`` most recently used answers, by key (least recently used forgotten first).

    An answer may name the owner that asked for it (``put(..., owner=)``): an owner holding
    ``per_owner`` answers replaces its own least recently used one with a new one, so it can never
    push out more than ``per_owner`` answers of the others, however many new keys it invents. Any
    owner's ``get`` finds every answer (the owner only decides whose share a new answer counts in)."""

    def __init__(self, size: int, per_owner: int | None = None):
        self.size, self.per_owner = size, per_owner
        self._answers: OrderedDict[Hashable, Answer] = OrderedDict()
        self._owner_of: dict[Hashable, Hashable] = {}
        self._owned: dict[Hashable, OrderedDict[Hashable, None]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Answer | None:
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
                owner = self._owner_of.get(key)
                if owner is not None:
                    self._owned[owner].move_to_end(key)
            return answer

    def put(self, key: Hashable, answer: Answer, owner: Hashable | None = None) -> None:
        with self._lock:
            if key not in self._answers and owner is not None:
                owned = self._owned.setdefault(owner, OrderedDict())
                while self.per_owner is not None and len(owned) >= max(1, self.per_owner):
                    self._forget(next(iter(owned)))
                owned[key] = None
                self._owner_of[key] = owner
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.size:
                self._forget(next(iter(self._answers)))

    def _forget(self, key: Hashable) -> None:
        del self._answers[key]
        owner = self._owner_of.pop(key, None)
        if owner is not None:
            owned = self._owned[owner]
            del owned[key]
            if not owned:
                del self._owned[owner]
