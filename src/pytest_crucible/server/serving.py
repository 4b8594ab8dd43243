"""uvicorn as `crucible serve` runs it: deadlines on each request's head and on each response a client
does not read, the connection limit, client addresses that only a named proxy can set, and an access
log that shows neither an API key nor anything a client wrote to pass for a log entry.

uvicorn times out only idle keep-alive connections: a client that sends half a request line and
then nothing held its connection open for as long as it liked (600 of them stayed open 75 s), and so
did a client that pipelines requests and never reads the answers (its connection waits on a full send
buffer). :class:`HeadDeadlineH11Protocol` closes a connection whose request line and headers are not
all in within ``ServerLimits.read_timeout`` seconds, and one whose send buffer stays full for
``ServerLimits.write_timeout`` seconds; ``app.BodySizeLimit`` gives the body the read deadline. The
protocol builds on uvicorn's own h11 protocol (``uvicorn.protocols.http.h11_impl``).

uvicorn believes ``X-Forwarded-For`` from 127.0.0.1 unless told otherwise, and `crucible serve` listens
there: every local client passed for a proxy and could name any address it liked (a new one per wrong
key, another client's to lock it out, or text shaped as a log entry). Here no proxy is trusted unless
the operator names it (``--forwarded-allow-ips``), and a forwarded address that is not an IP address
is ``invalid``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import re
import socket
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import unquote, unquote_plus

import h11
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..defaults import ServerLimits
from .app import create_app
from .keys import KEY_PREFIX

#: Largest request line and headers accepted (h11's buffer for an incomplete event); beyond, 400.
MAX_HEAD_BYTES = 16 * 1024
ACCESS_LOGGER = "uvicorn.access"
#: The loggers whose lines may carry what a client sent (a path, a query): filtered by SafeLogFilter.
CLIENT_TEXT_LOGGERS = ("uvicorn.error", "pytest_crucible.server")
REDACTED = "[REDACTED]"
#: How a client address that is not an IP address is logged and counted (a forwarded header's text).
INVALID_ADDRESS = "invalid"


class HeadDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with two deadlines.

    - The head: a connection whose next request line and headers are not all in within
      ``head_timeout`` seconds of the connection opening or of the previous response is closed. The
      time the server takes to answer never counts: the deadline stops once the head is in.
    - The client reading: a connection whose send buffer stays full (asyncio's flow control paused
      writing: the client reads nothing, or too slowly to ever empty it) for ``write_timeout`` seconds
      is aborted. Closing it politely would wait for the buffer to drain, which is for ever."""

    def __init__(self, *args: Any, head_timeout: float, write_timeout: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self.write_timeout = head_timeout if write_timeout is None else write_timeout
        self._head_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None

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
        self._stop_write_deadline()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.write_timeout, self._write_too_slow)

    def resume_writing(self) -> None:
        self._stop_write_deadline()
        super().resume_writing()

    def _stop_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_too_slow(self) -> None:
        self._write_deadline = None
        if self.flow is not None and self.flow.write_paused:
            address = f"{self.client[0]}:{self.client[1]:d}" if self.client else "a client"  # the socket's peer: never a header
            self.logger.warning("closing the connection of %s: it read none of the answers for %g s", address,
                                self.write_timeout)
            sock = self.transport.get_extra_info("socket")
            if sock is not None:  # a reset, not a close: the kernel drops what it still holds for the client too
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.transport.abort()  # drops the buffered answers; connection_lost frees the request waiting on them

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
#: A run of the characters a key's id and secret are made of, long enough to hold a secret or most of one
#: (a secret is 43 of them: 32 random bytes, base64url). Without both cases it is no secret: hex digests
#: (configHash) and ULIDs (run and key ids, upper case) stay readable; a secret lacks a case once in 10^9.
_SECRET_LIKE = re.compile(r"[A-Za-z0-9_-]{32,}")


def _key_shaped(text: str) -> bool:
    return any(re.search("[a-z]", run) and re.search("[A-Z]", run) for run in _SECRET_LIKE.findall(text))


def _holds_key(text: str, decode=unquote_plus) -> bool:
    """Whether ``text`` holds a key, whole (``crk_<id>_<secret>``), without its prefix (``<id>_<secret>``,
    ``crk+_...``), or a bare secret, or just the prefix; percent-encoded any number of times (up to 5) or not."""
    for _ in range(5):
        if _KEY_MARK.search(text) or _key_shaped(text):
            return True
        decoded = decode(text)
        if decoded == text:
            return False
        text = decoded
    return True  # still encoded after five rounds: not a value anyone needs to read in a log


def redact_text(text: str) -> str:
    """Free text (a log message) without key-shaped strings: each run holding a key or a secret, or the
    key prefix and what follows it, becomes ``[REDACTED]``."""
    text = _SECRET_LIKE.sub(lambda run: REDACTED if _key_shaped(run.group()) else run.group(), text)
    return re.sub(re.escape(KEY_PREFIX) + r"_[A-Za-z0-9_-]*", REDACTED, text, flags=re.IGNORECASE)


#: What a URI may hold as it is (RFC 3986 unreserved, reserved and %); anything else in a logged target is
#: percent-encoded, so no quote, bar, space or control character from a client ever reaches a log line raw.
_URI_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%")


def _uri_text(text: str) -> str:
    return "".join(char if char in _URI_CHARACTERS else "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
                   for char in text)


def printable(text: str) -> str:
    """``text`` with every character that is not printable (control characters, CR, LF, the line and
    paragraph separators, U+0085) written as a ``\\x``/``\\u`` escape: one log record, one line."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def logged_address(text: str) -> str:
    """A client address as uvicorn logs it (``host:port``) if its host is an IP address, else ``invalid``."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit():
        return INVALID_ADDRESS
    if host == INVALID_ADDRESS:
        return text
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return INVALID_ADDRESS
    return text


def redact_keys(target: str) -> str:
    """A request target (``path?query``, as uvicorn logs it) without API keys: a query parameter whose
    name or value holds a key (``crk_...``, ``<id>_<secret>``, a bare secret; percent-encoded or not)
    keeps its name and loses its value; a path segment holding one is replaced whole. Keys belong in the
    Authorization header; a client that puts one in the URL leaks it to every log on its way, and this
    server's log at least does not keep it."""
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
    """Rewrites uvicorn's access log records (``'%s - "%s %s HTTP/%s" %d'``): the client address is an IP
    address or ``invalid``, the request target holds no key and only characters a URI may hold (a quote,
    a bar, a space or a line break is percent-encoded), and every other text is printable."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        client, method, target = args[:3] if isinstance(args, tuple) and len(args) >= 3 else (None, None, None)
        if isinstance(args, tuple) and isinstance(client, str) and isinstance(method, str) and isinstance(target, str):
            address = logged_address(client) if client else client
            rest = tuple(printable(arg) if isinstance(arg, str) else arg for arg in args[3:])
            record.args = (address, _uri_text(printable(method)), _uri_text(redact_keys(target)), *rest)
        else:
            SafeLogFilter.clean(record)
        return True


class SafeLogFilter(logging.Filter):
    """Any other log record that may quote a client (uvicorn's errors, this server's own): no key-shaped
    string and no character that is not printable, in the message or in its arguments."""

    @staticmethod
    def clean(record: logging.LogRecord) -> None:
        if isinstance(record.msg, str):
            record.msg = printable(redact_text(record.msg))
        if isinstance(record.args, tuple):  # numbers stay numbers (%d); text and exceptions are cleaned
            record.args = tuple(printable(redact_text(str(arg))) if isinstance(arg, (str, BaseException)) else arg
                                for arg in record.args)

    def filter(self, record: logging.LogRecord) -> bool:
        self.clean(record)
        return True


def trusted_proxies(addresses: Iterable[str]) -> tuple[str, ...]:
    """The proxies whose ``X-Forwarded-For`` a server believes: IP addresses or networks (``10.0.0.5``,
    ``10.0.0.0/24``, ``::1``), normalised; anything else raises ValueError (uvicorn would take a typo as
    a host name that never matches)."""
    trusted = []
    for text in addresses:
        text = text.strip()
        try:
            trusted.append(str(ipaddress.ip_network(text, strict=False)) if "/" in text else str(ipaddress.ip_address(text)))
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24)") from None
    return tuple(trusted)


class ClientAddressCheck:
    """After uvicorn's ProxyHeadersMiddleware: a client address that a trusted proxy's header set is kept
    only if it is an IP address (normalised: how the wrong-key limit counts it); any other text becomes
    ``invalid``, for the limits and the log alike."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] in ("http", "websocket") and client:
            try:
                address = str(ipaddress.ip_address(str(client[0])))
                port = client[1] if isinstance(client[1], int) and 0 <= client[1] <= 65535 else 0
                scope["client"] = (address, port)
            except ValueError:
                scope["client"] = (INVALID_ADDRESS, 0)
        await self.app(scope, receive, send)


def build_app(db_path: str | Path, limits: ServerLimits = ServerLimits(), *,
              forwarded_allow_ips: Iterable[str] = ()) -> ASGIApp:
    """The application as `crucible serve` serves it: with the proxies named in ``forwarded_allow_ips``
    trusted to set the client address (``X-Forwarded-For``), and none when it is empty (the default)."""
    app: ASGIApp = create_app(db_path, limits)
    trusted = trusted_proxies(forwarded_allow_ips)
    if trusted:
        # uvicorn types the scope as its own TypedDicts, starlette as a mapping: the same ASGI callable
        app = cast(ASGIApp, ProxyHeadersMiddleware(cast(Any, ClientAddressCheck(app)), trusted_hosts=list(trusted)))
    return app


def build_server(db_path: str | Path, limits: ServerLimits = ServerLimits(), *, log_level: str = "info",
                 lifespan: Literal["auto", "on", "off"] = "auto", forwarded_allow_ips: Iterable[str] = ()) -> uvicorn.Server:
    """The uvicorn server of `crucible serve` over ``db_path``: run it with ``.run(sockets=[...])``.
    ``forwarded_allow_ips``: the proxies whose ``X-Forwarded-For`` names the client (none by default)."""
    config = uvicorn.Config(
        build_app(db_path, limits, forwarded_allow_ips=forwarded_allow_ips), log_level=log_level, lifespan=lifespan,
        # uvicorn calls its protocol class to make each connection's protocol: a partial of one does the same
        http=cast("type[asyncio.Protocol]", functools.partial(HeadDeadlineH11Protocol, head_timeout=limits.read_timeout,
                                                              write_timeout=limits.write_timeout)),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]  # a float works: it is a call_later delay
        limit_concurrency=limits.max_connections,
        server_header=False,
        # uvicorn's default believes X-Forwarded-For from 127.0.0.1 (FORWARDED_ALLOW_IPS): build_app adds
        # the proxy middleware itself, for the proxies named, and only then.
        proxy_headers=False,
    )
    access_log = logging.getLogger(ACCESS_LOGGER)  # configured by uvicorn.Config above; filters survive that
    if not any(isinstance(existing, RedactKeysFilter) for existing in access_log.filters):
        access_log.addFilter(RedactKeysFilter())
    for name in CLIENT_TEXT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, SafeLogFilter) for existing in logger.filters):
            logger.addFilter(SafeLogFilter())
    return uvicorn.Server(config)
