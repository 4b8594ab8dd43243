"""The HTTP API over the results store (FastAPI): the spec's endpoints, nothing more.

Each endpoint calls the core function the CLI calls (``run_metrics_document``,
``compare_run_data``, ``promote``, ``Store.list_runs``). Read endpoints open the database
read-only, per request; promote writes through the normal Store. Every ``/api/`` request
needs a bearer key (``pytest_crucible.server.keys``), looked up per request so a revocation
holds from the next one; a key sees its own workspace only, and a run of another
workspace answers exactly as a run that does not exist.

What a client may cost is bounded (``ServerLimits``; the counters in ``limits``): wrong keys per
address, compares computed at once (each in a pool of its own, so they never hold up a key check
or a list), promotes per key, the time to send a body. Compares of complete runs are answered
from memory the second time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..defaults import CHANGED_ITEMS, CHANGED_ITEMS_CHOICES, DEFAULT_SEED, MIN_PAIRS, MULTIPLE, ServerLimits
from ..golden_set.promote import PromoteError, PromoteNotFound, PromoteRequest, parse_request, promote
from ..golden_set.schema import field_path
from ..json_input import json_problem, shown
from ..report.views import run_metrics_document, run_summary_json
from ..store import DatabaseError, RunNotFound, Store, StoreError, is_locked
from ..store.ledgers import ledger_marks
from ..store.schema import RunStatus
from ..verdict.gate import REFUSED, GateSettings, decide_stored, parse_floors, parse_margins, parse_metric_list
from ..verdict.runs import load_run, metric_names, parse_run_ref, resolve_run_ref
from ..workspace import parse_label_filters
from .keys import READ_SCOPES, WRITE_FEEDBACK_SCOPE, ApiKey, authenticate, upgrade_legacy_hash
from .limits import AnswerCache, ConcurrencyBound, InFlightPerSubject, WindowLimit
from .models import ComparisonDocument, ErrorBody, FieldProblem, PromoteResponse, RunList, RunMetrics

if TYPE_CHECKING:
    from ..store.postgres import DatabaseURL

log = logging.getLogger("pytest_crucible.server")

MAX_BODY_BYTES = 64 * 1024
#: Most label filters in one run list: each is a JSON lookup in SQL, and ~1000 of them overflow SQLite's expression tree.
MAX_LABEL_FILTERS = 20
#: Seconds a client turned away by the compare bound is asked to wait (a compare takes about one).
COMPARE_RETRY_AFTER = 2
#: Seconds a client turned away by the metrics bound, or by its key's requests in flight, is asked to wait.
BUSY_RETRY_AFTER = 1
#: Threads checking keys: a pool of their own, so a key check never waits behind other work.
AUTH_THREADS = 4
REALM = 'Bearer realm="crucible"'
RUNS_HINT = "GET /api/v1/evals/runs lists the runs this key can read"

Result = TypeVar("Result")


async def _in_pool(pool: ThreadPoolExecutor, work: Callable[..., Result], *args: Any) -> Result:
    """``work(*args)`` in one of ``pool``'s threads, awaited without holding the event loop."""
    return await asyncio.get_running_loop().run_in_executor(pool, partial(work, *args))


class ApiError(Exception):
    """An answer other than 2xx, rendered as :class:`ErrorBody`."""

    def __init__(self, status: int, error: str, message: str, hint: str | None = None,
                 headers: dict[str, str] | None = None, fields: list[FieldProblem] | None = None):
        super().__init__(message)
        self.status, self.body, self.headers = status, ErrorBody(error=error, message=message, hint=hint, fields=fields), headers

    def response(self) -> JSONResponse:
        return AsciiJSONResponse(self.body.model_dump(exclude_none=True), status_code=self.status, headers=self.headers)


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: an error message quoting odd input can always be sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _split_hint(text: str) -> tuple[str, str | None]:
    """A core message ("...\\nHINT: ...") as (message, hint)."""
    message, _, hint = str(text).partition("\nHINT: ")
    return message.strip(), hint.strip() or None


# -- middleware: pure ASGI, so they answer before any routing or body parsing ------------------
class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` with 413, declared or streamed (the body is buffered: it is
    small), and bodies not all in within ``read_timeout`` seconds with 408 (a trickled body held its
    connection for as long as the client liked). Both answers close the connection."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES, read_timeout: float = ServerLimits.read_timeout):
        self.app, self.max_bytes, self.read_timeout = app, max_bytes, read_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            declared = Headers(scope=scope).get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                raise self._too_large()
            with anyio.fail_after(self.read_timeout):
                body = await self._read(receive)
        except TimeoutError:
            await ApiError(408, "request_timeout", f"the request body did not arrive within {self.read_timeout:g} s",
                           hint="send the whole body at once", headers={"Connection": "close"}).response()(scope, receive, send)
            return
        except ApiError as refused:
            await refused.response()(scope, receive, send)
            return
        if body is None:
            return  # the client went away
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _too_large(self) -> ApiError:
        return ApiError(413, "too_large", f"the request body is larger than {self.max_bytes} bytes",
                        hint="a promote body is one correction: a question, its assertions and citations",
                        headers={"Connection": "close"})

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body; None when the client went away. Raises the 413 as soon as it is too large."""
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise self._too_large()
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)


def bearer_token(headers: Headers) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def client_address(scope: Scope) -> str:
    """The client's address: the socket peer's, or, from a proxy named by ``crucible serve --forwarded-allow-ips``,
    its X-Forwarded-For (an IP address, or ``invalid``: ``serving.ClientAddressCheck``)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class BearerAuth:
    """Every ``/api/`` request needs a live key: 401 before routing, validation or any lookup of data.

    An address that sent ``failures.limit`` wrong keys within the window is answered 429 at once, with
    Retry-After, whatever key it sends: no key is looked up or hashed for it until the window moves on.
    Keys are checked in a pool of threads of their own, so no other work can hold a check up."""

    def __init__(self, app: ASGIApp, db_path: Path | DatabaseURL, failures: WindowLimit, pool: ThreadPoolExecutor):
        self.app, self.db_path, self.failures, self.pool = app, db_path, failures, pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        token = bearer_token(Headers(scope=scope))
        address = client_address(scope)
        wait = self.failures.retry_after(address) if token else None
        try:
            if wait is not None:
                raise ApiError(429, "too_many_requests", f"too many requests with a wrong API key from this address; "
                                                         f"retry in {wait} s", hint="check the key the client sends",
                               headers={"Retry-After": str(wait)})
            key = await _in_pool(self.pool, self._lookup, token) if token else None
        except ApiError as exc:
            await exc.response()(scope, receive, send)
            return
        if key is None:
            if token:
                self.failures.record(address)
            error = ApiError(401, "unauthorized", "a valid API key is required" if token else "no API key: send Authorization: Bearer KEY",
                             hint="create one with `crucible keys create --workspace NAME --scope runs:read`",
                             headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"' if token else REALM})
            await error.response()(scope, receive, send)
            return
        scope.setdefault("state", {})["api_key"] = key
        await self.app(scope, receive, send)

    def _lookup(self, token: str) -> ApiKey | None:
        with _reading(self.db_path) as store:
            key = authenticate(store, token)
        if key is not None and key.legacy_hash:
            self._upgrade(key, token)
        return key

    def _upgrade(self, key: ApiKey, token: str) -> None:
        """Store the key's HMAC hash in place of its legacy PBKDF2 one (keys.upgrade_legacy_hash), once;
        a failure costs only the speed-up: the key keeps working."""
        try:
            store = Store.open(self.db_path, create=False)
        except StoreError as exc:
            log.warning("cannot re-hash API key %s (it keeps working, checked the slow way): %s", key.id, exc)
            return
        try:
            upgrade_legacy_hash(store, token)
        except DatabaseError as exc:
            log.warning("cannot re-hash API key %s (it keeps working, checked the slow way): %s", key.id, exc)
        finally:
            store.close()


class KeyInFlight:
    """At most ``in_flight.limit`` requests of one key at once, on every ``/api/`` endpoint: beyond, 429 with
    Retry-After at once, before any work, the key check included. One client (a key) can then hold only so
    many of the key-checking threads, the metrics and compare slots and the database connections, however
    many requests it sends. Counted by the key as sent, before BearerAuth checks it: a wrong key only
    shares its count with the same wrong key (and is capped per address by BearerAuth)."""

    def __init__(self, app: ASGIApp, in_flight: InFlightPerSubject):
        self.app, self.in_flight = app, in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = bearer_token(Headers(scope=scope)) if scope["type"] == "http" and scope["path"].startswith("/api/") else None
        if token is None:  # not an /api/ request, or no key (BearerAuth answers 401)
            await self.app(scope, receive, send)
            return
        subject = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()  # no secret kept, even in memory
        if not self.in_flight.try_acquire(subject):
            await ApiError(429, "too_many_requests", f"this key has {self.in_flight.limit} requests in flight, as many as "
                                                     "one key may; nothing was done for this one",
                           hint=f"wait for an answer before sending more; retry after {BUSY_RETRY_AFTER} s (the operator "
                                "can raise crucible serve --max-key-in-flight)",
                           headers={"Retry-After": str(BUSY_RETRY_AFTER)}).response()(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight.release(subject)


@contextmanager
def _reading(db_path: Path | DatabaseURL) -> Iterator[Store]:
    try:
        store = Store.open_read_only(db_path)
    except StoreError as exc:
        # The operator's log gets the file and the reason; a client never sees local paths.
        log.error("cannot read the results database: %s", exc)
        raise ApiError(503, "unavailable", "the results database cannot be read right now",
                       hint="the server's operator: see the server log") from None
    try:
        yield store
    finally:
        store.close()


# -- dependencies ------------------------------------------------------------------------------
# Declared so the OpenAPI document names the scheme; the key itself was checked by BearerAuth.
bearer_scheme = HTTPBearer(auto_error=False, bearerFormat="crk_<id>_<secret>",
                           description="An API key from `crucible keys create`, scoped to one workspace.")


def _key_with_scope(*any_of: str):
    # async (it only reads the request's state): a sync dependency would take a worker thread.
    async def dependency(request: Request, _: Any = Security(bearer_scheme)) -> ApiKey:
        key: ApiKey = request.state.api_key
        if not key.allows(*any_of):
            raise ApiError(403, "forbidden", f"this key lacks the scope {' or '.join(any_of)}",
                           hint=f"create a key with --scope {any_of[0]}",
                           headers={"WWW-Authenticate": f'{REALM}, error="insufficient_scope", scope="{" ".join(any_of)}"'})
        return key
    return dependency


read_key = _key_with_scope(*READ_SCOPES)
feedback_key = _key_with_scope(WRITE_FEEDBACK_SCOPE)


async def feedback_key_of_path(workspaceId: str, key: ApiKey = Depends(feedback_key)) -> ApiKey:
    """A feedback:write key of the path's workspace. Decided from the path and the key alone, never
    from stored data, so the same 403 answers for a workspace that exists and one that does not."""
    if workspaceId != key.workspace:
        raise ApiError(403, "forbidden", f"this key writes to workspace '{key.workspace}' only",
                       hint=f"POST /api/w/{key.workspace}/evals/feedback/promote, or use a key of that workspace")
    return key


def _run_of_workspace(store: Store, run_id: str, workspace: str) -> str:
    """The run, if it is the key's workspace's; the same 404 for another workspace's and for none."""
    if not store.has_run(run_id, workspace=workspace):
        raise ApiError(404, "not_found", f"no run {run_id}", hint=RUNS_HINT)
    return run_id


def _resolve_refs(db_path: Path | DatabaseURL, refs: dict[str, str], workspace: str) -> list[str]:
    """The run ids the query's run references name (field -> reference): a run id of the key's workspace,
    or ``latest`` / ``latest:KEY=VALUE,...`` in it (``verdict.runs.resolve_run_ref``, as the CLI and the plugin).
    A malformed reference is a 422, another workspace's a 403, no matching run a 404."""
    ids = []
    with _reading(db_path) as store:
        for field, ref in refs.items():
            try:
                parsed = parse_run_ref(ref)
            except StoreError as exc:
                message, hint = _split_hint(str(exc))
                raise ApiError(422, "invalid_request", f"query: {message}", hint=hint,
                               fields=[FieldProblem(location="query", field=field, message=message)]) from None
            if not parsed.latest:
                ids.append(ref)  # a run id, checked with the comparison's identity
                continue
            if len(parsed.labels) > MAX_LABEL_FILTERS:
                message = f"{field}: {len(parsed.labels)} labels, at most {MAX_LABEL_FILTERS}"
                raise ApiError(422, "invalid_request", f"query: {message}", hint="name fewer labels",
                               fields=[FieldProblem(location="query", field=field, message=message)])
            if parsed.workspace not in (None, workspace):
                raise ApiError(403, "forbidden", f"this key reads workspace '{workspace}' only",
                               hint=f"leave out workspace= in {field}, or use a key of that workspace")
            try:
                ids.append(resolve_run_ref(store, parsed, workspace=workspace, place=f"workspace '{workspace}'"))
            except RunNotFound as exc:
                message, hint = _split_hint(str(exc))
                raise ApiError(404, "not_found", message, hint=hint or RUNS_HINT) from None
    return ids


def _comparison_identity(db_path: Path | DatabaseURL, a: str, b: str, workspace: str) -> tuple[Any, ...] | None:
    """What a comparison of runs ``a`` and ``b`` depends on besides its options, when both are complete
    (None otherwise: a running, incomplete or interrupted run may still change, so its comparison is
    never kept). Raises the 404 of a run that is not the workspace's, before anything else is read."""
    with _reading(db_path) as store:
        runs = [store.get_run(_run_of_workspace(store, run_id, workspace)) for run_id in (a, b)]
        if any(run["status"] != RunStatus.COMPLETE for run in runs):
            return None
        # A complete run never changes; the judgments and calibrations a comparison also reads may grow.
        return a, runs[0]["finished_at"], b, runs[1]["finished_at"], ledger_marks(store)


def _query_value(field: str, parse: Callable[[], Result]) -> Result:
    """``parse()``, its ValueError answered 422 naming the query parameter ``field``."""
    try:
        return parse()
    except ValueError as exc:
        message, hint = _split_hint(str(exc))
        raise ApiError(422, "invalid_request", f"query: {message}", hint=hint,
                       fields=[FieldProblem(location="query", field=field, message=message)]) from None


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {401: "no key, or not a live one", 403: "the key lacks the scope (or the workspace)",
                 404: "no such run in the key's workspace", 408: "the request body did not arrive in time",
                 409: "the runs cannot be compared", 413: "request body over 64 KiB",
                 422: "a parameter or the body is invalid",
                 429: "too many wrong keys from this address (every endpoint), as many requests in flight as one key "
                      "may have (every endpoint), or promotes by this key; see Retry-After",
                 503: "the results database cannot be read, or (compare, metrics) the server computes as many as it "
                      "takes at once; see Retry-After"}
    return {status: {"model": ErrorBody, "description": described[status]} for status in statuses}


# -- the application ---------------------------------------------------------------------------
def create_app(db_path: str | Path | DatabaseURL, limits: ServerLimits = ServerLimits()) -> FastAPI:
    from ..store import locate

    db_path = locate(db_path)  # a SQLite file or a PostgreSQL URL
    app = FastAPI(
        title="pytest-crucible",
        version=__version__,
        description="Read runs' metrics, compare two runs behind two significance gates, and promote a reviewed "
                    "correction into a draft golden item. Every /api/ call needs a bearer key scoped to one workspace.",
        docs_url=None, redoc_url=None,  # those pages load scripts from a CDN; /openapi.json is the document
        # A slash-redirect's Location is built from the client's Host header (an open redirect): 404 instead.
        redirect_slashes=False,
    )
    compare_bound = ConcurrencyBound(limits.max_compares)
    compare_pool = ThreadPoolExecutor(max(1, limits.max_compares), thread_name_prefix="crucible-compare")
    compare_answers: AnswerCache[tuple[Any, ...]] = AnswerCache(limits.compare_cache, per_owner=limits.compare_cache_per_key)
    metrics_bound = ConcurrencyBound(limits.max_metrics)
    metrics_pool = ThreadPoolExecutor(max(1, limits.max_metrics), thread_name_prefix="crucible-metrics")
    promotes = WindowLimit(limits.promotes_per_minute)
    app.add_middleware(BearerAuth, db_path=db_path, failures=WindowLimit(limits.auth_failures),
                       pool=ThreadPoolExecutor(AUTH_THREADS, thread_name_prefix="crucible-auth"))
    app.add_middleware(KeyInFlight, in_flight=InFlightPerSubject(limits.key_in_flight))  # runs before BearerAuth
    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES, read_timeout=limits.read_timeout)  # added last: runs first

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = []
        for error in exc.errors():
            location, *path = error["loc"] or ("request",)
            problem = error["msg"] if error["type"] != "extra_forbidden" else "unknown field"
            if error["type"] == "json_invalid":
                path, problem = [], f"not valid JSON: {error.get('ctx', {}).get('error', 'decode error')}"
            fields.append(FieldProblem(location=str(location), field=shown(field_path([p for p in path if p != "body"])),
                                       message=problem))
        first = fields[0]
        what = f"field '{first.field}': " if first.field else ""
        return ApiError(422, "invalid_request", f"{first.location}: {what}{first.message}", fields=fields,
                        hint="see /openapi.json for the parameters and the body this endpoint takes").response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, (ValueError, RecursionError)):
            # The framework's answer to a body its JSON reader gave up on (too deep, too many digits).
            problem = f"not valid JSON: {json_problem(exc.__cause__)}"
            return ApiError(422, "invalid_request", f"body: {problem}", fields=[FieldProblem(location="body", field="", message=problem)],
                            hint="the body is one JSON object; see /openapi.json").response()
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
        message = str(exc.detail)
        if exc.status_code in (404, 405):  # the router's: no such endpoint (a missing run has its own answer)
            message = f"no endpoint {request.method} {request.url.path}"
        return ApiError(exc.status_code, code, message, hint="/openapi.json lists the endpoints",
                        headers=getattr(exc, "headers", None)).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return ApiError(500, "internal", "the server failed on this request", hint="the server's operator: see the server log").response()

    @app.get("/api/v1/evals/runs", response_model=RunList, response_model_exclude_unset=True,
             responses=_errors(401, 403, 408, 422, 429, 503), tags=["runs"], operation_id="listRuns",
             summary="List the runs of the key's workspace")
    def list_runs(
        key: ApiKey = Depends(read_key),
        workspace: str | None = Query(None, description="only the key's own workspace can be read"),
        config_hash: str | None = Query(None, alias="configHash", max_length=64, description="configHash or a prefix of it"),
        label: list[str] = Query([], max_length=MAX_LABEL_FILTERS, description="KEY:VALUE; repeat to require several labels"),
        limit: int = Query(100, ge=1, le=1000),
    ) -> Any:
        """Newest first. Bearer · kb:read or runs:read."""
        if workspace is not None and workspace != key.workspace:
            raise ApiError(403, "forbidden", f"this key reads workspace '{key.workspace}' only",
                           hint="leave out workspace, or use a key of that workspace")
        try:
            labels = parse_label_filters(label)
        except ValueError as exc:
            message, hint = _split_hint(str(exc))
            raise ApiError(422, "invalid_request", f"query: {message}", hint=hint,
                           fields=[FieldProblem(location="query", field="label", message=message)]) from None
        with _reading(db_path) as store:
            runs = store.list_runs(limit, workspace=key.workspace, config_hash=config_hash, labels=labels)
        return {"runs": [run_summary_json(run) for run in runs]}

    @app.get("/api/v1/evals/runs/compare", response_model=ComparisonDocument, response_model_exclude_unset=True,
             responses=_errors(401, 403, 404, 408, 409, 422, 429, 503), tags=["runs"], operation_id="compareRuns",
             summary="Paired comparison of two runs")
    async def compare_two_runs(
        a: str = Query(..., min_length=1, max_length=2000, description="Baseline: a run id, latest (the newest complete "
                       "run of the key's workspace) or latest:KEY=VALUE[,KEY=VALUE...] (the newest complete run with "
                       "those labels, e.g. latest:branch=main)."),
        b: str = Query(..., min_length=1, max_length=2000, description="Candidate: a run id, latest or "
                       "latest:KEY=VALUE[,KEY=VALUE...]."),
        gate: str | None = Query(None, max_length=2000, description="M1,M2: the gated metrics (default every compared one)."),
        failUnder: list[str] = Query([], description="METRIC=VALUE: an absolute floor on b's mean (repeatable)."),
        margin: list[str] = Query([], description="METRIC=DROP: a non-inferiority margin; the metric passes only when "
                                                  "its interval rules out a drop larger than DROP (repeatable)."),
        seed: int = Query(DEFAULT_SEED, description="Seed of the bootstrap and the permutation test."),
        multiple: Literal["holm", "none"] = Query(MULTIPLE, description="p-value correction across the gated metrics "
                                                  "(default holm: family-wise error at or below alpha)."),
        allowIncomplete: bool = Query(False, description="Compare an incomplete or interrupted run on the items it has "
                                                         "instead of refusing (409)."),
        rescore: bool = Query(False, description="Score both runs' retrieval metrics from their stored rankings against "
                                                 "today's relevance grades."),
        minPairs: int = Query(MIN_PAIRS, ge=2, description="Fewest pairs a gated metric needs; with fewer the gate "
                                                           "refuses (409)."),
        changedItems: Literal[CHANGED_ITEMS_CHOICES] = Query(CHANGED_ITEMS, description="Golden items edited "  # type: ignore[valid-type]
                              "under their id since the baseline: exclude leaves them out of the pairs (listed in "
                              "changedItems and excluded), include compares them anyway, refuse refuses (409)."),
        key: ApiKey = Depends(read_key),
    ) -> Any:
        """Per-metric deltas over the shared golden items, BCa bootstrap CIs, permutation p-values and a
        two-gate significant flag (seeded, deterministic), with the gate's verdict: the one the plugin and
        `crucible compare` give on the same pair with the same options. Refuses (409) runs judged by
        different judge models or prompt versions, and incomplete runs unless allowIncomplete. A compare of
        two complete runs is answered from memory the next time; the server computes a bounded number at
        once, and answers 503 with Retry-After beyond it. Bearer · kb:read or runs:read."""

        def compute() -> tuple[Any, ...]:
            try:
                with _reading(db_path) as store:
                    baseline = load_run(store, _run_of_workspace(store, a, key.workspace), golden=True, rankings=rescore)
                    candidate = load_run(store, _run_of_workspace(store, b, key.workspace), golden=True, rankings=rescore)
                    k = candidate.k  # metric names as the terminal shows them (recall@10)
                    custom = metric_names((baseline, candidate))
                    floors = _query_value("failUnder", lambda: parse_floors(failUnder, "failUnder", k, custom))
                    margins = _query_value("margin", lambda: parse_margins(margin, "margin", k, custom))
                    gated = _query_value("gate", lambda: parse_metric_list(gate, "gate", k, custom))
                    settings = GateSettings(baseline=a, gate=gated, floors=floors, seed=seed, margins=margins,
                                            multiple=multiple, allow_incomplete=allowIncomplete, min_pairs=minPairs,
                                            rescore=rescore, changed_items=changedItems)
                    result = decide_stored(store, candidate, baseline, settings)
            finally:
                compare_bound.release()  # here, not in the awaiting request: the work ends when this thread is done
            if result.verdict == REFUSED:
                return (REFUSED, *_split_hint(result.refusal or "the runs cannot be compared"))
            assert result.comparison is not None  # a pair the gate did not refuse was compared (verdict.gate.decide)
            return ("compared", {**result.comparison.to_json(), "gate": result.to_json()})

        # Cheap, and first: a run of another workspace is a 404 whatever is kept or computed. A reference
        # (latest:branch=main) is resolved once, here: what is kept and computed is the pair of runs it named now.
        a, b = await run_in_threadpool(_resolve_refs, db_path, {"a": a, "b": b}, key.workspace)
        identity = await run_in_threadpool(_comparison_identity, db_path, a, b, key.workspace)
        remembered = None if identity is None else (identity, gate, tuple(failUnder), tuple(margin), seed, multiple, allowIncomplete,
                                                     rescore, minPairs, changedItems)
        answer = None if remembered is None else compare_answers.get(remembered)
        if answer is None:
            if not compare_bound.try_acquire():
                raise ApiError(503, "busy", f"the server is computing {limits.max_compares} compare(s), as many as it takes "
                                            "at once; nothing was computed for this request",
                               hint=f"retry after {COMPARE_RETRY_AFTER} s (the operator can raise crucible serve --max-compares)",
                               headers={"Retry-After": str(COMPARE_RETRY_AFTER)})
            answer = await _in_pool(compare_pool, compute)
            if remembered is not None:  # in the key's share: one key cannot push out every other key's answers
                compare_answers.put(remembered, answer, owner=key.id)
        if answer[0] == REFUSED:
            raise ApiError(409, "conflict", answer[1], hint=answer[2])
        return answer[1]

    @app.get("/api/v1/evals/runs/{id}/metrics", response_model=RunMetrics, response_model_exclude_unset=True,
             responses=_errors(401, 403, 404, 408, 422, 429, 503), tags=["runs"], operation_id="getRunMetrics",
             summary="A run's metrics")
    async def run_metrics(id: str, key: ApiKey = Depends(read_key)) -> Any:
        """Retrieval, RAGAS and abstention metrics for one run, overall and by question facet.
        Judge-based metrics name the judge model and prompt version. The server computes a bounded number
        at once, and answers 503 with Retry-After beyond it. Bearer · kb:read or runs:read."""

        def compute() -> Any:
            try:
                with _reading(db_path) as store:
                    return run_metrics_document(store, _run_of_workspace(store, id, key.workspace))
            finally:
                metrics_bound.release()  # here: the work ends when this thread is done

        if not metrics_bound.try_acquire():
            raise ApiError(503, "busy", f"the server is computing {limits.max_metrics} metrics document(s), as many as it "
                                        "takes at once; nothing was computed for this request",
                           hint=f"retry after {BUSY_RETRY_AFTER} s (the operator can raise crucible serve --max-metrics)",
                           headers={"Retry-After": str(BUSY_RETRY_AFTER)})
        return await _in_pool(metrics_pool, compute)

    @app.post("/api/w/{workspaceId}/evals/feedback/promote", status_code=201, response_model=PromoteResponse,
              response_model_exclude_unset=True, responses=_errors(401, 403, 404, 408, 413, 422, 429, 503), tags=["feedback"],
              operation_id="promoteFeedback",
              summary="Promote a reviewed correction into a draft golden item")
    def promote_correction(workspaceId: str, body: PromoteRequest, key: ApiKey = Depends(feedback_key_of_path)) -> Any:
        """Creates the draft golden item (must-assertions, citation anchors, tags) and the linked eval_feedback
        row in one transaction; a validation or write failure leaves both out. The run must belong to the
        workspace, and resultId (when given) to the run. The feedback row records the key that wrote it,
        apart from correctedBy (the reviewer the caller claims; the key, as key:<id>, when left out), and the
        response returns it as promotedBy (key:<id>). correctedBy is NFKC-normalised and trimmed; an empty name,
        one over 100 characters, one mixing Latin with Cyrillic or Greek letters, or one reading as another
        key's key:<id> (any case, width or look-alike) is a 422. A key promotes at most a set number of
        corrections a minute (429 beyond). Calls no model. Bearer · feedback:write."""
        wait = promotes.take(key.id)
        if wait is not None:
            raise ApiError(429, "too_many_requests", f"this key sent {limits.promotes_per_minute} promotes within a minute; "
                                                     f"retry in {wait} s",
                           hint="the operator can raise crucible serve --max-promotes", headers={"Retry-After": str(wait)})
        try:
            # The core's own checks as well (text SQLite can store, no control characters, sane nesting), as
            # `crucible promote` runs them.
            body = parse_request(body.model_dump(by_alias=True, exclude_unset=True), source="body")
        except PromoteError as exc:
            message, hint = _split_hint(str(exc))
            raise ApiError(422, "invalid_request", message, hint=hint) from None
        if body.corrected_by is None:
            body = body.model_copy(update={"corrected_by": f"key:{key.id}"})
        # promote() checks correctedBy (json_input.reviewer_name: no other key's key:<id>, in any case, width or
        # look-alike letters; not empty, not over 100 characters, not mixing scripts) and returns promotedBy.
        try:
            store = Store.open(db_path, create=False)
        except StoreError as exc:
            log.error("cannot open the results database for writing: %s", exc)
            raise ApiError(503, "unavailable", "the results database cannot be written right now",
                           hint="the server's operator: see the server log") from None
        try:
            return promote(store, body, source="body", workspace=key.workspace, api_key_id=key.id)
        except PromoteNotFound as exc:
            message, _ = _split_hint(str(exc))
            raise ApiError(404, "not_found", message, hint=RUNS_HINT) from None
        except PromoteError as exc:
            message, hint = _split_hint(str(exc))
            raise ApiError(422, "invalid_request", message, hint=hint) from None
        except DatabaseError as exc:
            # promote() writes both rows in one transaction, so a refused write left neither.
            if is_locked(exc):
                raise ApiError(503, "unavailable", "the results database is busy; nothing was written", hint="retry",
                               headers={"Retry-After": "1"}) from None
            log.exception("promote failed in the database")
            raise ApiError(500, "write_failed", "the database refused the write; it was rolled back and nothing was written",
                           hint="the server's operator: see the server log") from None
        finally:
            store.close()

    return app


def openapi_document(app: FastAPI | None = None) -> dict[str, Any]:
    """The OpenAPI document the server serves at /openapi.json (docs/openapi.json keeps a copy)."""
    return (app or create_app(Path("crucible.db"))).openapi()


def openapi_text() -> str:
    return json.dumps(openapi_document(), indent=2) + "\n"
