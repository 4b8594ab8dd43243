"""`crucible serve` (the HTTP API) and `crucible keys create|list|revoke` (who may call it)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys

from ..defaults import ServerLimits
from .common import EXIT_OK, EXIT_USAGE, at_least, open_store, with_db

EXAMPLES: dict[str, str] = {
    "serve": "crucible keys create --workspace shop --scope runs:read --name ci-dashboard\n"
             "crucible serve --db .crucible/crucible.db --port 8765\n"
             "curl -s http://127.0.0.1:8765/api/v1/evals/runs/RUN_ID/metrics -H \"Authorization: Bearer $ELI_KEY\"",
    "keys": "crucible keys create --workspace shop --scope runs:read --name dashboard   # prints the key once\n"
            "crucible keys list\n"
            "crucible keys revoke 01J9Z3KQ8W5RRB8M2X3VYT4N6D",
    "keys create": "crucible keys create --workspace shop --scope feedback:write --name review-tool\n"
                   "export ELI_KEY=$(crucible keys create --workspace shop --scope runs:read --scope kb:read)",
    "keys list": "crucible keys list --workspace shop\n"
                 "crucible keys list --json",
    "keys revoke": "crucible keys revoke 01J9Z3KQ8W5RRB8M2X3VYT4N6D",
}


def _server_extra_missing(exc: ModuleNotFoundError) -> bool:
    from ..server import EXTRA_MISSING, SERVER_MODULES

    if (exc.name or "").split(".")[0] not in SERVER_MODULES:
        return False
    print(f"crucible: {EXTRA_MISSING}", file=sys.stderr)
    return True


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..server import is_loopback, listen
    from ..server.keys import active_key_count

    try:  # the framework is an optional extra: imported only here
        from ..server.app import openapi_text
        from ..server.serving import build_server
    except ModuleNotFoundError as exc:
        if _server_extra_missing(exc):
            return EXIT_USAGE
        raise
    if args.openapi:
        sys.stdout.write(openapi_text())
        return EXIT_OK
    store = open_store(args)  # a normal open migrates the file; read endpoints then open it read-only
    keys = active_key_count(store)
    store.close()
    listener = listen(args.host, args.port, active_keys=keys, db=store.path)  # a URL's str() hides its password
    print(f"serving {store.path} on {listener.url} (OpenAPI document: {listener.url}/openapi.json); Ctrl+C stops", flush=True)
    if keys == 0:
        print("crucible: no API key yet, so every request gets 401\n"
              "HINT: crucible keys create --workspace NAME --scope runs:read", file=sys.stderr, flush=True)
    elif not is_loopback(listener.host):
        print("crucible: warning: plain HTTP on an address other machines can reach; put TLS in front of it "
              "(a reverse proxy)", file=sys.stderr, flush=True)
    limits = ServerLimits(max_compares=args.max_compares, max_metrics=args.max_metrics, key_in_flight=args.max_key_in_flight,
                          max_connections=args.max_connections, read_timeout=args.read_timeout,
                          write_timeout=args.write_timeout, auth_failures=args.max_auth_failures,
                          promotes_per_minute=args.max_promotes)
    build_server(args.db, limits, forwarded_allow_ips=args.forwarded_allow_ips).run(sockets=[listener.sock])
    return EXIT_OK


def _cmd_keys_create(args: argparse.Namespace) -> int:
    from ..server.keys import create_key

    store = open_store(args)
    row, key = create_key(store, workspace=args.workspace, scopes=args.scope, name=args.name)
    print(key)  # alone on stdout, so `export ELI_KEY=$(crucible keys create ...)` works
    print(f"created key {row['id']} for workspace '{row['workspace']}' with scope(s) {', '.join(row['scopes'])}; "
          "this is the only time the key is shown (only a salted hash of it is stored)", file=sys.stderr)
    return EXIT_OK


def _cmd_keys_list(args: argparse.Namespace) -> int:
    from ..server.keys import list_keys

    store = open_store(args)
    rows = list_keys(store, workspace=args.workspace)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print(f"no API keys in {store.path}" + (f" for workspace '{args.workspace}'" if args.workspace else ""))
        print("HINT: crucible keys create --workspace NAME --scope runs:read")
        return EXIT_OK
    ws_width = max(len("workspace"), *(len(row["workspace"]) for row in rows))
    name_width = max(len("name"), *(len(row["name"] or "-") for row in rows))
    print(f"{'key id':<26}  {'workspace':<{ws_width}}  {'name':<{name_width}}  {'created':<24}  {'revoked':<24}  scopes")
    for row in rows:
        print(f"{row['id']:<26}  {row['workspace']:<{ws_width}}  {row['name'] or '-':<{name_width}}  {row['createdAt']:<24}  "
              f"{row['revokedAt'] or '-':<24}  {' '.join(row['scopes'])}")
    return EXIT_OK


def _cmd_keys_revoke(args: argparse.Namespace) -> int:
    from ..server.keys import revoke_key

    store = open_store(args)
    row, revoked = revoke_key(store, args.key)
    if revoked:
        print(f"revoked key {row['id']} ({row['name'] or 'no name'}, workspace '{row['workspace']}'): "
              "a server refuses it from its next request on")
    else:
        print(f"key {row['id']} was already revoked at {row['revokedAt']}")
    return EXIT_OK


def proxy_addresses(text: str) -> tuple[str, ...]:
    """An argparse type: a comma list of IP addresses or networks (the proxies whose X-Forwarded-For is believed)."""
    addresses = tuple(part.strip() for part in text.split(",") if part.strip())
    for address in addresses:
        try:
            ipaddress.ip_network(address, strict=False) if "/" in address else ipaddress.ip_address(address)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{address!r} is not an IP address or network "
                                             "(e.g. 127.0.0.1 or 10.0.0.0/24; a comma list for several)") from None
    return addresses


def add_serve(sub) -> None:
    serve = with_db(sub.add_parser("serve", help="serve the HTTP API over the database (needs pytest-crucible[server])"))
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; another address needs an API key in the database)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    serve.add_argument("--openapi", action="store_true", help="print the OpenAPI document and exit")
    limits = ServerLimits()
    serve.add_argument("--max-compares", dest="max_compares", type=at_least(1), default=limits.max_compares, metavar="N",
                       help=f"compares computed at once; more answer 503 with Retry-After (default {limits.max_compares})")
    serve.add_argument("--max-metrics", dest="max_metrics", type=at_least(1), default=limits.max_metrics, metavar="N",
                       help=f"metrics documents computed at once; more answer 503 with Retry-After (default {limits.max_metrics})")
    serve.add_argument("--max-key-in-flight", dest="max_key_in_flight", type=at_least(1), default=limits.key_in_flight,
                       metavar="N", help="requests one key may have in flight at once; more answer 429 with Retry-After "
                                         f"(default {limits.key_in_flight})")
    serve.add_argument("--max-connections", dest="max_connections", type=at_least(1), default=limits.max_connections,
                       metavar="N", help=f"open connections; a request beyond them answers 503 (default {limits.max_connections})")
    serve.add_argument("--read-timeout", dest="read_timeout", type=at_least(0.1, float), default=limits.read_timeout,
                       metavar="SECONDS", help="seconds a client has to send a request's headers, and again its body "
                                               f"(default {limits.read_timeout:g})")
    serve.add_argument("--write-timeout", dest="write_timeout", type=at_least(0.1, float), default=limits.write_timeout,
                       metavar="SECONDS", help="seconds an answer may wait on a client that reads none of it; then its "
                                               f"connection is closed (default {limits.write_timeout:g})")
    serve.add_argument("--max-auth-failures", dest="max_auth_failures", type=at_least(1), default=limits.auth_failures,
                       metavar="N", help="requests with a wrong key per client address per minute; more answer 429 "
                                         f"(default {limits.auth_failures})")
    serve.add_argument("--max-promotes", dest="max_promotes", type=at_least(1), default=limits.promotes_per_minute,
                       metavar="N", help=f"promotes per key per minute; more answer 429 (default {limits.promotes_per_minute})")
    serve.add_argument("--forwarded-allow-ips", dest="forwarded_allow_ips", type=proxy_addresses, default=(), metavar="IPS",
                       help="the reverse proxies (IP addresses or networks, comma-separated) whose X-Forwarded-For header "
                            "names the client; default none: the client is the connection's peer, whatever it sends")
    serve.set_defaults(func=_cmd_serve)


def add_keys(sub) -> None:
    keys = sub.add_parser("keys", help="API keys of `crucible serve`: create, list, revoke")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    keys_create = with_db(keys_sub.add_parser("create", help="create a key and print it once (only its salted hash is kept)"))
    keys_create.add_argument("--workspace", required=True, metavar="NAME", help="the one workspace the key can reach")
    keys_create.add_argument("--scope", action="append", required=True, metavar="SCOPE",
                             help="runs:read or kb:read (metrics, compare, list), feedback:write (promote); repeatable")
    keys_create.add_argument("--name", default=None, metavar="NAME", help="what the key is for (shown by keys list)")
    keys_create.set_defaults(func=_cmd_keys_create)
    keys_list = with_db(keys_sub.add_parser("list", help="list the keys (never their secrets)"))
    keys_list.add_argument("--workspace", default=None, metavar="NAME", help="only the keys of this workspace")
    keys_list.add_argument("--json", action="store_true", help="print the keys as a JSON array")
    keys_list.set_defaults(func=_cmd_keys_list)
    keys_revoke = with_db(keys_sub.add_parser("revoke", help="revoke a key: refused from the next request on"))
    keys_revoke.add_argument("key", metavar="ID", help="the key id (`crucible keys list`), or the key itself")
    keys_revoke.set_defaults(func=_cmd_keys_revoke)
