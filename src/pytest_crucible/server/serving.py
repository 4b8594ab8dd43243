"""uvicorn as `crucible serve` runs it: a deadline on each request's head, the connection limit,
and an access log that never shows an API key.

uvicorn times out only idle keep-alive connections: a client that sends half a request line and
then nothing held its connection open for as long as it liked (600 of them stayed open 75 s).
:class:`HeadDeadlineH11Protocol` closes a connection whose request line and headers are not all
in within ``ServerLimits.read_timeout`` seconds; ``app.BodySizeLimit`` gives the body the same
deadline. The protocol builds on uvicorn's own h11 protocol (``uvicorn.protocols.http.h11_impl``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..defaults import ServerLimits
from .keys import KEY_PREFIX
from .app import create_app

#: Largest request line and headers accepted (h11's buffer for an incomplete event); beyond, 400.
MAX_HEAD_BYTES = 16 * 1024
ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[REDACTED]"


class HeadDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose next request line and headers are not all
    in within ``head_timeout`` seconds of the connection opening or of the previous response. The
    time the server takes to answer never counts: the deadline stops once the head is in."""

    def __init__(self, *args: Any, head_timeout: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def on_response_complete(self) -> None:
        self._await_head()  # before uvicorn reads a pipelined request that may already be buffered
        super().on_response_complete()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the head is in (or the connection is done with)
            self._stop_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_deadline()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._stop_head_deadline()
        if not self.transport.is_closing():
            self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


_KEY_MARK = re.compile(re.escape(KEY_PREFIX) + "_", re.IGNORECASE)


def _holds_key(text: str, decode=unquote_plus) -> bool:
    """Whether ``text`` holds a key's prefix, percent-encoded any number of times (up to 5) or not."""
    for _ in range(5):
        if _KEY_MARK.search(text):
            return True
        decoded = decode(text)
        if decoded == text:
            return False
        text = decoded
    return True  # still encoded after five rounds: not a value anyone needs to read in a log


def redact_keys(target: str) -> str:
    """A request target (``path?query``, as uvicorn logs it) without API keys: a query parameter whose
    name or value holds a key (``crk_...``, percent-encoded or not) keeps its name and loses its value;
    a path segment holding one is replaced whole. Keys belong in the Authorization header; a client that puts one in
    the URL leaks it to every log on its way, and this server's log at least does not keep it."""
    path, mark, query = target.partition("?")
    path = "/".join(REDACTED if _holds_key(segment, unquote) else segment for segment in path.split("/"))
    parts = []
    for part in query.split("&") if mark else []:
        name, equals, value = part.partition("=")
        if _holds_key(name):
            part = REDACTED
        elif _holds_key(value):
            part = f"{name}{equals}{REDACTED}"
        parts.append(part)
    return path + mark + "&".join(parts)


class RedactKeysFilter(logging.Filter):
    """Rewrites the request target of uvicorn's access log records (``'%s - "%s %s HTTP/%s" %d'``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3 and isinstance(record.args[2], str):
            record.args = (*record.args[:2], redact_keys(record.args[2]), *record.args[3:])
        return True


def build_server(db_path: str | Path, limits: ServerLimits = ServerLimits(), *, log_level: str = "info",
                 lifespan: str = "auto") -> uvicorn.Server:
    """The uvicorn server of `crucible serve` over ``db_path``: run it with ``.run(sockets=[...])``."""
    config = uvicorn.Config(
        create_app(db_path, limits), log_level=log_level, lifespan=lifespan,
        http=functools.partial(HeadDeadlineH11Protocol, head_timeout=limits.read_timeout),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]  (a float works: it is a call_later delay)
        limit_concurrency=limits.max_connections,
        server_header=False,
    )
    access_log = logging.getLogger(ACCESS_LOGGER)  # configured by uvicorn.Config above; filters survive that
    if not any(isinstance(existing, RedactKeysFilter) for existing in access_log.filters):
        access_log.addFilter(RedactKeysFilter())
    return uvicorn.Server(config)
