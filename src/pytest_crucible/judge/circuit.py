"""A model judge that cannot reach its host fails fast: the circuit breaker every model judge shares.

Without it, a run with a configured model judge and no network waits out every request's retries: a
connection refused costs each request about 7 s of the SDK's back-off, a host that accepts and never
answers costs each attempt the whole read timeout (32 items ran for more than 10 minutes). The breaker
watches every HTTP attempt the SDK makes (:func:`guarded_http_client`, the SDK's own client with
:meth:`send` observed): after :data:`UNREACHABLE_AFTER` attempts in a row that could not connect (refused,
no such host, connect timeout) or got no answer (read timeout), from at least two different requests,
it opens, and every attempt after that is refused at once with the same reason, without a retry. Any
answer from the host (a verdict, a 429, a 529, a 500) resets the count: rate limits and overloads keep
the SDK's back-off and ``retry-after``. One request whose reply keeps outlasting the timeout does not
open it alone (the host answers the others); it fails as before, after its retries.

The breaker stays open for the rest of the session: an item whose judge requests failed already makes
the run ``incomplete`` (the gate refuses it), so a host that comes back could not save the verdict, and
probing it again would cost the read timeout each time.

This module never imports pytest or an SDK (the SDK's client class and error class are passed in).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["CONNECT_TIMEOUT", "UNREACHABLE_AFTER", "Circuit", "JudgeUnreachable", "guarded_http_client"]

#: Attempts in a row that could not connect or got no answer (from two requests or more) that open the circuit.
UNREACHABLE_AFTER = 3
#: Seconds a model judge's SDK client waits for a TCP connection (the read timeout is the judge's ``timeout``):
#: a host that takes longer is not reachable from here.
CONNECT_TIMEOUT = 10.0


class JudgeUnreachable(Exception):
    """An attempt refused because the judge's host is unreachable (the circuit is open). Each model judge raises
    a subclass that is also its SDK's base error, which the SDK passes on as it is: never retried."""


class Circuit:
    """The breaker of one model judge (every thread's requests): see the module doc. ``host``: where the
    requests go (``host[:port]``), named in every refusal."""

    def __init__(self, host: str, threshold: int = UNREACHABLE_AFTER):
        self.host, self.threshold = host, threshold
        self.reason: str | None = None  # why it opened; None while closed
        self.not_sent = 0  # requests refused before any attempt of theirs went out
        self.guarded = False  # the SDK client's attempts are watched (else the judge reports each request's outcome)
        self._lock = threading.Lock()
        self._streak: list[object] = []  # the request of each failed attempt in a row
        self._local = threading.local()

    def begin(self) -> None:
        """A new request on this thread (the SDK's retries of it are its attempts)."""
        self._local.request, self._local.attempts = object(), 0

    def refusal(self) -> str | None:
        """The message refusing a request now (the circuit is open), or None. Counted as not sent when no attempt
        of this thread's request went out yet."""
        if self.reason is None:
            return None
        with self._lock:
            if not getattr(self._local, "attempts", 0):
                self.not_sent += 1
        return f"judge unreachable at {self.host} ({self.reason})"

    def attempt(self) -> None:
        """An attempt goes out."""
        self._local.attempts = getattr(self._local, "attempts", 0) + 1

    def failed(self, what: str) -> None:
        """An attempt could not connect, or got no answer: ``what`` says which (e.g. ``connection refused``)."""
        request = getattr(self._local, "request", None) or object()
        with self._lock:
            self._streak.append(request)
            if self.reason is None and len(self._streak) >= self.threshold and len({id(r) for r in self._streak}) >= 2:
                self.reason = f"{what}; {len(self._streak)} attempts in a row"

    def answered(self) -> None:
        """The host answered an attempt (any HTTP status): it is reachable."""
        if self._streak:
            with self._lock:
                self._streak.clear()


def describe(err: BaseException) -> str:
    """What a transport failure says, short: ``could not connect: [Errno 111] Connection refused``."""
    name = type(err).__name__
    if name == "ConnectTimeout":
        return "no connection within the connect timeout"
    if name in ("ReadTimeout", "WriteTimeout"):
        return "no answer within the timeout"
    return f"could not connect: {err or name}"


def guarded_http_client(base: type, circuit: Circuit, refused: type[Exception], **kwargs: Any) -> Any:
    """An instance of the SDK's HTTP client class ``base`` (``DefaultHttpxClient``: its defaults, proxies from the
    environment) whose every attempt the ``circuit`` watches: refused with ``refused(message)`` while it is open,
    counted when it could not connect or got no answer, the count reset when the host answers."""
    import httpx2  # the transport both SDKs are built on

    unreachable = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.ReadTimeout, httpx2.WriteTimeout)

    class Guarded(base):  # the SDK's class, known only at run time
        def send(self, request: Any, **options: Any) -> Any:
            refusal = circuit.refusal()
            if refusal is not None:
                raise refused(refusal)
            circuit.attempt()
            try:
                response = super().send(request, **options)
            except unreachable as err:
                circuit.failed(describe(err))
                raise
            circuit.answered()
            return response

    circuit.guarded = True
    return Guarded(**kwargs)
