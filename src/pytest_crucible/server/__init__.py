"""``crucible serve``: the HTTP API over the results store (extra ``pytest-crucible[server]``).

This package's ``__init__`` imports neither FastAPI nor uvicorn, so the CLI can tell a user
without the extra what to install; ``app`` holds the application itself, ``serving`` the uvicorn
server around it (read deadlines, the connection limit, the access log), ``limits`` the counters
that bound what clients may cost it (their defaults: ``defaults.ServerLimits``).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

from ..store import StoreError

EXTRA_MISSING = "`crucible serve` needs the server extra: pip install 'pytest-crucible[server]'"
SERVER_MODULES = ("fastapi", "starlette", "uvicorn")


class ServeRefused(StoreError):
    """The server will not start as asked; ``str()`` is the message and its HINT."""


@dataclass
class Listener:
    sock: socket.socket
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int, *, active_keys: int, db: Any) -> Listener:
    """Bind ``host:port`` (0 picks a free port). A socket reachable from other machines is
    refused while the database holds no live key: nobody could use it but it would be open."""
    refusal = ServeRefused(f"refusing to serve {db} on {host}, reachable from other machines, with no API key in it\n"
                           "HINT: create a key first (crucible keys create --workspace NAME --scope runs:read), "
                           "or serve on 127.0.0.1 (the default)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        if active_keys == 0 and not is_loopback(str(address[0])):  # a host name resolves to IPv4 or IPv6: a str
            raise refusal  # before binding anything
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise ServeRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}\n"
                           "HINT: pick another --port (--port 0 picks a free one) or another --host") from None
    bound_host, bound_port = sock.getsockname()[:2]
    if active_keys == 0 and not is_loopback(bound_host):  # the address actually bound decides
        sock.close()
        raise refusal
    sock.listen(128)
    return Listener(sock=sock, host=bound_host, port=bound_port)
