"""The HTTP API over the results store (FastAPI): the spec's endpoints, nothing more.

Each endpoint calls the core function the CLI calls (``run_metrics_document``,
``compare_run_data``, ``promote``, ``Store.list_runs``). Read endpoints open the database
read-only, per request; promote writes through the normal Store. Every ``/api/`` request
needs a bearer key (``pytest_crucible.keys``), looked up per request so a revocation
holds from the next one; a key sees its own workspace only, and a run of another
workspace answers exactly as a run that does not exist.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..golden_set import field_path
from ..json_input import json_problem, shown
from ..keys import READ_SCOPES, WRITE_FEEDBACK_SCOPE, ApiKey, authenticate
from ..promote import PromoteError, PromoteNotFound, PromoteRequest, parse_request, promote
from ..report.views import run_metrics_document, run_summary_json
from ..defaults import DEFAULT_SEED, MIN_PAIRS
from ..gate import GateSettings, decide_stored, parse_floors, parse_metric_list
from ..runs import load_run
from ..store import Store, StoreError
from ..workspace import parse_label_filters
from .models import ComparisonDocument, ErrorBody, FieldProblem, PromoteResponse, RunList, RunMetrics

log = logging.getLogger("pytest_crucible.server")

MAX_BODY_BYTES = 64 * 1024
REALM = 'Bearer realm="crucible"'
RUNS_HINT = "GET /api/v1/evals/runs lists the runs this key can read"


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
    """Refuse request bodies over ``max_bytes`` with 413, declared or streamed (the body is buffered: it is small)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = ApiError(413, "too_large", f"the request body is larger than {self.max_bytes} bytes",
                             hint="a promote body is one correction: a question, its assertions and citations")
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await too_large.response()(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await too_large.response()(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def bearer_token(headers: Headers) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class BearerAuth:
    """Every ``/api/`` request needs a live key: 401 before routing, validation or any lookup of data."""

    def __init__(self, app: ASGIApp, db_path: Path):
        self.app, self.db_path = app, db_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        token = bearer_token(Headers(scope=scope))
        try:
            key = await run_in_threadpool(self._lookup, token) if token else None
        except ApiError as exc:
            await exc.response()(scope, receive, send)
            return
        if key is None:
            error = ApiError(401, "unauthorized", "a valid API key is required" if token else "no API key: send Authorization: Bearer KEY",
                             hint="create one with `crucible keys create --workspace NAME --scope runs:read`",
                             headers={"WWW-Authenticate": f'{REALM}, error="invalid_token"' if token else REALM})
            await error.response()(scope, receive, send)
            return
        scope.setdefault("state", {})["api_key"] = key
        await self.app(scope, receive, send)

    def _lookup(self, token: str) -> ApiKey | None:
        with _reading(self.db_path) as store:
            return authenticate(store, token)


@contextmanager
def _reading(db_path: Path) -> Iterator[Store]:
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
    def dependency(request: Request, _: Any = Security(bearer_scheme)) -> ApiKey:
        key: ApiKey = request.state.api_key
        if not key.allows(*any_of):
            raise ApiError(403, "forbidden", f"this key lacks the scope {' or '.join(any_of)}",
                           hint=f"create a key with --scope {any_of[0]}",
                           headers={"WWW-Authenticate": f'{REALM}, error="insufficient_scope", scope="{" ".join(any_of)}"'})
        return key
    return dependency


read_key = _key_with_scope(*READ_SCOPES)
feedback_key = _key_with_scope(WRITE_FEEDBACK_SCOPE)


def feedback_key_of_path(workspaceId: str, key: ApiKey = Depends(feedback_key)) -> ApiKey:  # noqa: N803 (the spec's name)
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


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {401: "no key, or not a live one", 403: "the key lacks the scope (or the workspace)",
                 404: "no such run in the key's workspace", 409: "the runs cannot be compared",
                 413: "request body over 64 KiB", 422: "a parameter or the body is invalid",
                 503: "the results database cannot be read"}
    return {status: {"model": ErrorBody, "description": described[status]} for status in statuses}


# -- the application ---------------------------------------------------------------------------
def create_app(db_path: str | Path) -> FastAPI:
    db_path = Path(db_path)
    app = FastAPI(
        title="pytest-crucible",
        version=__version__,
        description="Read runs' metrics, compare two runs behind two significance gates, and promote a reviewed "
                    "correction into a draft golden item. Every /api/ call needs a bearer key scoped to one workspace.",
        docs_url=None, redoc_url=None,  # those pages load scripts from a CDN; /openapi.json is the document
    )
    app.add_middleware(BearerAuth, db_path=db_path)
    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)  # added last: runs first

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
             responses=_errors(401, 403, 422, 503), tags=["runs"], operation_id="listRuns",
             summary="List the runs of the key's workspace")
    def list_runs(
        key: ApiKey = Depends(read_key),
        workspace: str | None = Query(None, description="only the key's own workspace can be read"),
        config_hash: str | None = Query(None, alias="configHash", max_length=64, description="configHash or a prefix of it"),
        label: list[str] = Query([], description="KEY:VALUE; repeat to require several labels"),
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
             responses=_errors(401, 403, 404, 409, 422, 503), tags=["runs"], operation_id="compareRuns",
             summary="Paired comparison of two runs")
    def compare_two_runs(
        a: str = Query(..., min_length=1, description="Baseline run id."),
        b: str = Query(..., min_length=1, description="Candidate run id."),
        gate: str | None = Query(None, max_length=2000, description="M1,M2: the gated metrics (default every compared one)."),
        failUnder: list[str] = Query([], description="METRIC=VALUE: an absolute floor on b's mean (repeatable)."),  # noqa: N803
        seed: int = Query(DEFAULT_SEED, description="Seed of the bootstrap and the permutation test."),
        multiple: Literal["none", "holm"] = Query("none", description="p-value correction across metrics."),
        allowIncomplete: bool = Query(False, description="Compare an incomplete or interrupted run on the items it has "  # noqa: N803
                                                         "instead of refusing (409)."),
        rescore: bool = Query(False, description="Score both runs' retrieval metrics from their stored rankings against "
                                                 "today's relevance grades."),
        minPairs: int = Query(MIN_PAIRS, ge=2, description="Fewest pairs a gated metric needs; with fewer the gate "  # noqa: N803
                                                           "refuses (409)."),
        key: ApiKey = Depends(read_key),
    ) -> Any:
        """Per-metric deltas over the shared golden items, BCa bootstrap CIs, permutation p-values and a
        two-gate significant flag (seeded, deterministic), with the gate's verdict: the one the plugin and
        `crucible compare` give on the same pair with the same options. Refuses (409) runs judged by
        different judge models or prompt versions, and incomplete runs unless allowIncomplete.
        Bearer · kb:read or runs:read."""
        with _reading(db_path) as store:
            baseline = load_run(store, _run_of_workspace(store, a, key.workspace), golden=True, rankings=rescore)
            candidate = load_run(store, _run_of_workspace(store, b, key.workspace), golden=True, rankings=rescore)
            k = candidate.resolved.get("retrievalLimit")  # metric names as the terminal shows them (recall@10)
            parsed = {}
            for field, parse in (("failUnder", lambda: parse_floors(failUnder, "failUnder", k)),
                                 ("gate", lambda: parse_metric_list(gate, "gate", k))):
                try:
                    parsed[field] = parse()
                except ValueError as exc:
                    message, hint = _split_hint(str(exc))
                    raise ApiError(422, "invalid_request", f"query: {message}", hint=hint,
                                   fields=[FieldProblem(location="query", field=field, message=message)]) from None
            settings = GateSettings(baseline=a, gate=parsed["gate"], floors=parsed["failUnder"], seed=seed, multiple=multiple,
                                    allow_incomplete=allowIncomplete, min_pairs=minPairs, rescore=rescore)
            result = decide_stored(store, candidate, baseline, settings)
        if result.verdict == "refused":
            message, hint = _split_hint(result.refusal or "the runs cannot be compared")
            raise ApiError(409, "conflict", message, hint=hint)
        return {**result.comparison.to_json(), "gate": result.to_json()}

    @app.get("/api/v1/evals/runs/{id}/metrics", response_model=RunMetrics, response_model_exclude_unset=True,
             responses=_errors(401, 403, 404, 422, 503), tags=["runs"], operation_id="getRunMetrics",
             summary="A run's metrics")
    def run_metrics(id: str, key: ApiKey = Depends(read_key)) -> Any:  # noqa: A002 (the spec's name)
        """Retrieval, RAGAS and abstention metrics for one run, overall and by question facet.
        Judge-based metrics name the judge model and prompt version. Bearer · kb:read or runs:read."""
        with _reading(db_path) as store:
            return run_metrics_document(store, _run_of_workspace(store, id, key.workspace))

    @app.post("/api/w/{workspaceId}/evals/feedback/promote", status_code=201, response_model=PromoteResponse,
              response_model_exclude_unset=True, responses=_errors(401, 403, 404, 413, 422, 503), tags=["feedback"],
              operation_id="promoteFeedback",
              summary="Promote a reviewed correction into a draft golden item")
    def promote_correction(workspaceId: str, body: PromoteRequest, key: ApiKey = Depends(feedback_key_of_path)) -> Any:  # noqa: N803
        """Creates the draft golden item (must-assertions, citation anchors, tags) and the linked eval_feedback
        row in one transaction; a validation or write failure leaves both out. The run must belong to the
        workspace, and resultId (when given) to the run. Calls no model. Bearer · feedback:write."""
        try:
            # The core's own checks as well (text SQLite can store, sane nesting), as `crucible promote` runs them.
            body = parse_request(body.model_dump(by_alias=True, exclude_unset=True), source="body")
        except PromoteError as exc:
            message, hint = _split_hint(str(exc))
            raise ApiError(422, "invalid_request", message, hint=hint) from None
        if body.corrected_by is None:
            body = body.model_copy(update={"corrected_by": f"key:{key.id}"})
        try:
            store = Store.open(db_path, create=False)
        except StoreError as exc:
            log.error("cannot open the results database for writing: %s", exc)
            raise ApiError(503, "unavailable", "the results database cannot be written right now",
                           hint="the server's operator: see the server log") from None
        try:
            return promote(store, body, source="body", workspace=key.workspace)
        except PromoteNotFound as exc:
            message, _ = _split_hint(str(exc))
            raise ApiError(404, "not_found", message, hint=RUNS_HINT) from None
        except PromoteError as exc:
            message, hint = _split_hint(str(exc))
            raise ApiError(422, "invalid_request", message, hint=hint) from None
        except sqlite3.Error as exc:
            # promote() writes both rows in one transaction, so a refused write left neither.
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
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
