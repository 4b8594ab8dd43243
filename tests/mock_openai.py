"""A small, real OpenAI-compatible API double for tests: an HTTP server on 127.0.0.1.

The real ``openai`` SDK talks to it over real sockets (``base_url=mock.base_url``, which ends in
``/v1``), so retries, headers, multipart uploads and URL resolution are the SDK's own. Routes:

* ``POST /v1/chat/completions`` - a ``chat.completion`` whose single choice's content is the JSON the
  pluggable :attr:`MockOpenAI.responder` returns for the request. With :attr:`schema_support` off, a
  ``response_format`` of type ``json_schema`` is refused with a 400 (``json_object`` is accepted).
* ``POST /v1/files`` (multipart/form-data), ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``.
* ``POST /v1/batches`` - reads the input file's JSONL and computes every result up front.
* ``GET /v1/batches/{id}`` - ``validating`` when created, ``in_progress`` for the first
  :attr:`polls_until_ended` - 1 polls, then :attr:`batch_final_status` (``completed``) with an output
  file (JSONL, deliberately NOT in request order) and, when some requests failed, an error file.

With :attr:`batch_support` off, the files and batches routes answer 404 (an OpenAI-compatible server
without the Batch API). The request kind is read from the marker line every crucible prompt holds
(``Judge task: <version>/<kind>``). Faults are scripted per route and consumed in order, or decided per
request by :attr:`MockOpenAI.rules` (which see the request and how many times this exact request was
sent before; they decide each line of a batch too); everything received (paths, headers, parsed bodies,
uploaded files) is recorded so a test can assert what was sent and that a secret never leaks.

The request object, the verdicts, the fault record and the HTTP plumbing are mock_anthropic's.
Use the ``mock_openai`` fixture (defined here; tests/conftest.py imports it).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from email.message import Message
from email.parser import BytesHeaderParser
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from mock_anthropic import MARKER_RE, Fault, MockRequest, ScriptedFaults, _Handler, default_verdict

__all__ = ["MARKER_RE", "SCHEMA_UNSUPPORTED", "Fault", "MockOpenAI", "OpenAIRequest", "default_verdict", "mock_openai",
           "openai_error", "parse_multipart"]

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    408: "timeout",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "requests",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "timeout",
}
ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
ROUTES = ("chat", "files_create", "files_retrieve", "files_content", "batches_create", "batches_retrieve")
BATCH_ROUTES = frozenset(ROUTES[1:])  # what batch_support=False takes away
CHAT_ENDPOINT = "/v1/chat/completions"


def openai_error(message: str, status: int = 400, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "server_error"), "param": param,
                      "code": code if code is not None else ERROR_CODES.get(status)}}


SCHEMA_UNSUPPORTED = openai_error("response_format of type 'json_schema' is not supported by this server",
                                  400, param="response_format")


class OpenAIRequest(MockRequest):
    """One chat request (direct, or one line of a batch) as the responder sees it: ``system`` is the
    system (or developer) messages' text, ``user`` the user messages' text."""

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")

    @property
    def schema(self) -> dict[str, Any] | None:
        fmt = self.response_format or {}
        return (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None


def _content_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def parse_multipart(content_type: str, raw: bytes) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """(fields, files) of a multipart/form-data body; a file is ``{"filename", "content_type", "data"}``.
    Split on the exact delimiter (CRLF, ``--``, boundary) so a file's bytes come back unchanged."""
    header = Message()
    header["content-type"] = content_type
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/form-data" or not isinstance(boundary, str) or not boundary:
        raise ValueError(f"not multipart/form-data with a boundary: {content_type!r}")
    chunks = (b"\r\n" + raw).split(b"\r\n--" + boundary.encode("latin-1"))
    if len(chunks) < 2:
        raise ValueError("no multipart delimiter in the body")
    fields: dict[str, str] = {}
    files: dict[str, dict[str, Any]] = {}
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):  # the close delimiter
            break
        _, _, part = chunk.partition(b"\r\n")  # the rest of the delimiter line (transport padding)
        if part.startswith(b"\r\n"):
            head, data = b"", part[2:]
        else:
            head, sep, data = part.partition(b"\r\n\r\n")
            if not sep:
                raise ValueError("a multipart part without a blank line after its headers")
        headers = BytesHeaderParser().parsebytes(head + b"\r\n\r\n")
        name = headers.get_param("name", header="content-disposition")
        if not name:
            raise ValueError("a multipart part without a name")
        name = str(name)
        filename = headers.get_filename()
        if filename is None:
            fields[name] = data.decode("utf-8")
        else:
            files[name] = {"filename": filename, "content_type": headers.get("content-type"), "data": data}
    return fields, files


class MockOpenAI(ScriptedFaults):
    """The server plus its controls. Create through the ``mock_openai`` fixture."""

    MODEL_ROUTE = "chat"

    def __init__(self) -> None:
        self.responder: Callable[[OpenAIRequest], dict[str, Any] | str] = default_verdict
        # Fixed {"prompt_tokens", "completion_tokens"} for every completion; None: chars / 4 of prompt and reply.
        self.usage: dict[str, int] | None = None
        self.schema_support = True  # False: response_format json_schema -> 400
        self.batch_support = True  # False: the files and batches routes -> 404
        self.response_delay = 0.0  # seconds each POST /v1/chat/completions takes
        self.polls_until_ended = 2
        self.batch_final_status = "completed"  # or failed | expired | cancelled: how batches created from now end
        # request index (line order) in the next batch -> errored | expired (an error-file line) | missing (no line)
        self.batch_outcomes: dict[int, str] = {}
        # True: non-200 lines go to the error file (as the real API does), not the output file.
        self.status_errors_to_error_file = False
        self.shuffle_seed = 1234
        self.faults: dict[str, deque[Fault]] = {route: deque() for route in ROUTES}
        # Per-request faults for chat (and every line of a batch), tried after the scripted queue:
        # rule(request, attempt) -> Fault | None, attempt = how many times this exact body was sent before.
        # In a batch, a "status" fault makes a line with that status_code, "reset" an error-file line, and
        # Fault("batch_error", body={"code", "message"}) an error-file line with that error.
        self.rules: list[Callable[[OpenAIRequest, int], Fault | None]] = []
        self.faults_served: Counter[str] = Counter()  # "status:429", "reset", "text", ...
        self.schema_rejections = 0  # requests (direct or batched) refused for their json_schema response_format
        self._attempts: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()  # by route name
        self.paths: Counter[str] = Counter()  # by "METHOD /path"
        self.received: list[dict[str, Any]] = []  # method, path, route, headers, body
        self.files: dict[str, dict[str, Any]] = {}  # id -> {"id", "filename", "purpose", "data", "created_at"}
        self.batches: dict[str, dict[str, Any]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.RLock()
        self._ids = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what the SDK's ``base_url`` (or OPENAI_BASE_URL) takes."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> MockOpenAI:
        mock = self

        class Handler(_OpenAIHandler):
            server_mock = mock

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # -- fault controls ----------------------------------------------------------------------
    def reply_completion(self, overrides: dict[str, Any], times: int = 1) -> None:
        """The next ``times`` chat completions answer 200 with a normal completion updated by ``overrides``
        (top-level keys, e.g. ``{"choices": [...]}`` for a refusal or ``finish_reason: "length"``)."""
        for _ in range(times):
            self.faults["chat"].append(Fault("message", body=overrides))

    # -- what happened -----------------------------------------------------------------------
    def headers_received(self) -> list[dict[str, str]]:
        return [entry["headers"] for entry in self.received]

    def chat_bodies(self) -> list[dict[str, Any]]:
        """Bodies of every POST /v1/chat/completions, plus the body of every line of every batch created."""
        bodies: list[dict[str, Any]] = []
        for entry in self.received:
            if entry["route"] == "chat":
                bodies.append(entry["body"])
            elif entry["route"] == "batches_create":
                batch = next((b for b in self.batches.values() if b["request"] is entry["body"]), None)
                if batch is not None:
                    bodies.extend(params for _, params in batch["entries"])
        return bodies

    def file_text(self, file_id: str) -> str:
        return self.files[file_id]["data"].decode("utf-8")

    # -- requests and replies ----------------------------------------------------------------
    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}mock{self._ids:04d}"

    def parse_request(self, body: dict[str, Any], custom_id: str | None = None) -> OpenAIRequest:
        system_parts: list[str] = []
        user_parts: list[str] = []
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            if message.get("role") in ("system", "developer"):
                system_parts.append(_content_text(message.get("content")))
            elif message.get("role") == "user":
                user_parts.append(_content_text(message.get("content")))
        system, user = "\n".join(system_parts), "\n".join(user_parts)
        marker = MARKER_RE.search(system) or MARKER_RE.search(user)
        return OpenAIRequest(
            kind=marker["kind"] if marker else None,
            prompt_version=marker["version"] if marker else None,
            system=system,
            user=user,
            body=body,
            custom_id=custom_id,
        )

    def answer_text(self, request: OpenAIRequest) -> str:
        answer = self.responder(request)
        return answer if isinstance(answer, str) else json.dumps(answer)

    def completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """A ``chat.completion`` whose single choice says ``text``."""
        prompt = "\n".join(_content_text(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))
        usage = {"prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(text)}
        usage.update(self.usage or {})
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {
            "id": self._next_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "unknown"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": usage,
            "system_fingerprint": "fp_mock",
        }

    message = completion  # the name mock_anthropic's shared fault handling calls

    def _schema_rejected(self, body: dict[str, Any]) -> bool:
        fmt = body.get("response_format")
        if self.schema_support or not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            return False
        with self._lock:
            self.schema_rejections += 1
        return True

    def decide(self, body: dict[str, Any], custom_id: str | None = None) -> Fault | None:
        """What becomes of one chat request past the scripted queue: a schema refusal, a rule's fault, or None."""
        if self._schema_rejected(body):
            return Fault("schema", status=400, body=SCHEMA_UNSUPPORTED)
        if not self.rules:
            return None
        with self._lock:
            key = json.dumps(body, sort_keys=True)
            attempt = self._attempts[key]
            self._attempts[key] += 1
        request = self.parse_request(body, custom_id)
        for rule in self.rules:
            fault = rule(request, attempt)
            if fault is not None:
                return fault
        return None

    def _next_fault(self, route: str, body: dict[str, Any] | None = None) -> Fault | None:
        with self._lock:
            if self.faults[route]:
                return self.faults[route].popleft()
        if route != "chat" or body is None:
            return None
        return self.decide(body)

    # -- files -------------------------------------------------------------------------------
    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        entry = {"id": self._next_id("file-"), "filename": filename, "purpose": purpose, "data": data,
                 "created_at": int(time.time())}
        with self._lock:
            self.files[entry["id"]] = entry
        return self.file_object(entry)

    @staticmethod
    def file_object(entry: dict[str, Any]) -> dict[str, Any]:
        return {"id": entry["id"], "object": "file", "bytes": len(entry["data"]), "created_at": entry["created_at"],
                "filename": entry["filename"], "purpose": entry["purpose"], "status": "processed",
                "expires_at": None, "status_details": None}

    # -- batches -----------------------------------------------------------------------------
    def _batch_line(self, custom_id: str, params: dict[str, Any], fault: Fault | None) -> tuple[str, dict[str, Any]]:
        """("output" | "error", line) for one batched request, by what :meth:`decide` made of it."""
        line_id = self._next_id("batch_req_")
        if fault is not None and fault.kind != "schema":
            with self._lock:
                self.faults_served[f"status:{fault.status}" if fault.kind == "status" else fault.kind] += 1
        if fault is not None and fault.kind in ("reset", "batch_error"):
            error = dict(fault.body) if isinstance(fault.body, dict) else {"code": "server_error", "message": "mock: the request was dropped"}
            return "error", {"id": line_id, "custom_id": custom_id, "response": None, "error": error}
        status, body = 200, None
        if fault is None or fault.kind == "delay":
            body = self.completion(params, self.answer_text(self.parse_request(params, custom_id)))
        elif fault.kind in ("status", "schema"):
            status = fault.status
            body = fault.body if fault.body is not None else openai_error(f"mock {fault.status}", fault.status)
        elif fault.kind == "text":
            body = self.completion(params, str(fault.body))
        elif fault.kind == "json":
            body = self.completion(params, json.dumps(fault.body))
        elif fault.kind == "message":
            body = self.completion(params, self.answer_text(self.parse_request(params, custom_id)))
            body.update(fault.body)
        elif fault.kind == "raw_body":
            body = str(fault.body)
        else:  # pragma: no cover - a typo in a test
            status, body = 500, openai_error(f"unknown mock fault {fault.kind!r}", 500)
        line = {"id": line_id, "custom_id": custom_id,
                "response": {"status_code": status, "request_id": f"req_mock{line_id[-4:]}", "body": body}, "error": None}
        return ("error" if status != 200 and self.status_errors_to_error_file else "output"), line

    def create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, Batch or error body) for POST /v1/batches."""
        file = self.files.get(str(body.get("input_file_id")))
        if file is None:
            return 400, openai_error(f"Invalid 'input_file_id': {body.get('input_file_id')!r}. File not found.", param="input_file_id")
        if file["purpose"] != "batch":
            return 400, openai_error("The input file must have purpose 'batch'.", param="input_file_id")
        if body.get("endpoint") != CHAT_ENDPOINT:
            return 400, openai_error(f"Invalid 'endpoint': {body.get('endpoint')!r}.", param="endpoint")
        if body.get("completion_window") != "24h":
            return 400, openai_error("Invalid 'completion_window': only '24h' is supported.", param="completion_window")
        entries, errors = self._read_input(file["data"])
        final = "failed" if errors else self.batch_final_status
        if final == "failed" and not errors:
            errors = [{"code": "mock_failure", "message": "mock: the batch was scripted to fail", "line": None, "param": None}]
        outcomes, self.batch_outcomes = self.batch_outcomes, {}
        results: list[tuple[str, dict[str, Any]]] = []
        if not errors:
            for index, (custom_id, params) in enumerate(entries):
                outcome = outcomes.get(index, "succeeded")
                if outcome == "missing":
                    continue
                if outcome in ("errored", "expired"):
                    code, message = (("batch_expired", "This request could not be executed before the completion window expired.")
                                     if outcome == "expired" else ("server_error", f"mock error for request {index}"))
                    results.append(("error", {"id": self._next_id("batch_req_"), "custom_id": custom_id, "response": None,
                                              "error": {"code": code, "message": message}}))
                else:
                    results.append(self._batch_line(custom_id, params, self.decide(params, custom_id)))
        now = int(time.time())
        batch = {
            "id": self._next_id("batch_"),
            "request": body,
            "entries": entries,
            "results": results,
            "final_status": final,
            "errors": errors,
            "status": "validating",
            "polls": 0,
            "created_at": now,
            "in_progress_at": None,
            "ended_at": None,
            "output_file_id": None,
            "error_file_id": None,
        }
        with self._lock:
            self.batches[batch["id"]] = batch
        return 200, self.batch_object(batch)

    @staticmethod
    def _read_input(data: bytes) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
        """(custom_id, body) of each line of a batch input file, and the validation errors (as the API lists them)."""
        entries: list[tuple[str, dict[str, Any]]] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        model = None

        def error(code: str, message: str, number: int, param: str | None = None) -> None:
            errors.append({"code": code, "message": message, "line": number, "param": param})

        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                error("invalid_json_line", "This line is not parseable as valid JSON.", number)
                continue
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str) or not isinstance(item.get("body"), dict):
                error("missing_required_parameter", "A line needs a string 'custom_id' and an object 'body'.", number)
                continue
            custom_id, params = item["custom_id"], item["body"]
            if custom_id in seen:
                error("duplicate_custom_id", f"The custom_id {custom_id!r} is used more than once.", number, "custom_id")
            if item.get("method") != "POST":
                error("invalid_method", "The method must be POST.", number, "method")
            if item.get("url") != CHAT_ENDPOINT:
                error("invalid_url", f"The url must be {CHAT_ENDPOINT}, as the batch's endpoint.", number, "url")
            if model is not None and params.get("model") != model:
                error("mismatched_model", "Every line of a batch must use the same model.", number, "body.model")
            model = params.get("model") if model is None else model
            seen.add(custom_id)
            entries.append((custom_id, params))
        if not entries and not errors:
            error("empty_file", "The input file has no requests.", 1)
        return entries, errors

    def _finish(self, batch: dict[str, Any]) -> None:
        """End a batch as scripted, writing its output and error files (output NOT in request order)."""
        batch["status"] = batch["final_status"]
        batch["ended_at"] = int(time.time())
        if batch["status"] == "failed":
            return
        for where in ("output", "error"):
            lines = [line for kind, line in batch["results"] if kind == where]
            if not lines:
                continue
            shuffled = list(lines)
            random.Random(self.shuffle_seed).shuffle(shuffled)
            if len(shuffled) > 1 and shuffled == lines:
                shuffled = shuffled[1:] + shuffled[:1]  # never in request order
            data = "".join(json.dumps(line) + "\n" for line in shuffled).encode("utf-8")
            batch[f"{where}_file_id"] = self.add_file(data, f"{batch['id']}_{where}.jsonl", "batch_output")["id"]

    def batch_object(self, batch: dict[str, Any]) -> dict[str, Any]:
        status = batch["status"]
        ended = batch["ended_at"] is not None
        total = len(batch["entries"])
        counts = {"total": total, "completed": 0, "failed": 0}
        usage = None
        if ended and status != "failed":
            ok = [line["response"]["body"] for _, line in batch["results"]
                  if line["response"] is not None and line["response"]["status_code"] == 200]
            counts["completed"] = len(ok)
            counts["failed"] = len(batch["results"]) - len(ok)
            tokens_in = sum(body["usage"]["prompt_tokens"] for body in ok if isinstance(body, dict) and "usage" in body)
            tokens_out = sum(body["usage"]["completion_tokens"] for body in ok if isinstance(body, dict) and "usage" in body)
            usage = {"input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens_out,
                     "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens_in + tokens_out}
        request = batch["request"]
        return {
            "id": batch["id"],
            "object": "batch",
            "endpoint": request.get("endpoint"),
            "model": batch["entries"][0][1].get("model") if batch["entries"] else None,
            "errors": {"object": "list", "data": batch["errors"]} if batch["errors"] else None,
            "input_file_id": request.get("input_file_id"),
            "completion_window": request.get("completion_window"),
            "status": status,
            "output_file_id": batch["output_file_id"],
            "error_file_id": batch["error_file_id"],
            "created_at": batch["created_at"],
            "in_progress_at": batch["in_progress_at"],
            "expires_at": batch["created_at"] + 24 * 3600,
            "finalizing_at": batch["ended_at"] if ended and status == "completed" else None,
            "completed_at": batch["ended_at"] if status == "completed" else None,
            "failed_at": batch["ended_at"] if status == "failed" else None,
            "expired_at": batch["ended_at"] if status == "expired" else None,
            "cancelling_at": batch["ended_at"] if status == "cancelled" else None,
            "cancelled_at": batch["ended_at"] if status == "cancelled" else None,
            "request_counts": counts,
            "usage": usage,
            "metadata": request.get("metadata"),
        }

    def poll_batch(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            batch["polls"] += 1
            if batch["ended_at"] is None:
                if batch["polls"] >= self.polls_until_ended:
                    self._finish(batch)
                else:
                    batch["status"] = "in_progress"
                    batch["in_progress_at"] = batch["in_progress_at"] or int(time.time())
            return self.batch_object(batch)


class _OpenAIHandler(_Handler):
    """mock_anthropic's plumbing (send, reset, record, scripted faults) with OpenAI's routes and errors."""

    server_mock: MockOpenAI  # type: ignore[assignment]

    def _send(self, status: int, payload: Any, *, headers: dict[str, str] | None = None, content_type: str = "application/json") -> None:
        super()._send(status, payload, headers={"x-request-id": "req_mock", **(headers or {})}, content_type=content_type)

    def _error(self, status: int, message: str, *, headers: dict[str, str] | None = None, body: Any = None,
               param: str | None = None) -> None:
        self._send(status, body if body is not None else openai_error(message, status, param=param), headers=headers)

    def _apply_fault(self, fault: Fault, body: dict[str, Any]) -> None:
        if fault.kind == "schema":  # not a scripted fault: counted in schema_rejections
            self._error(400, "", body=fault.body)
        elif fault.kind == "batch_error":  # a batch-only rule answer, sent to a direct request
            self._error(500, str((fault.body or {}).get("message", "mock batch error")))
        else:
            super()._apply_fault(fault, body)

    def _read_raw(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _parse(self, route: str, raw: bytes) -> tuple[Any, dict[str, Any] | None]:
        """(body as recorded, the uploaded file for files_create). A multipart upload is recorded as
        ``{**fields, "file": {"filename", "content_type", "bytes", "content" (text)}}``."""
        content_type = self.headers.get("Content-Type") or ""
        if content_type.lower().startswith("multipart/"):
            try:
                fields, files = parse_multipart(content_type, raw)
            except (ValueError, UnicodeDecodeError) as exc:
                return {"_unparsed": raw.decode("utf-8", "replace"), "_error": str(exc)}, None
            recorded: dict[str, Any] = dict(fields)
            for name, item in files.items():
                recorded[name] = {"filename": item["filename"], "content_type": item["content_type"],
                                  "bytes": len(item["data"]), "content": item["data"].decode("utf-8", "replace")}
            return recorded, files.get("file")
        if not raw:
            return {}, None
        try:
            return json.loads(raw), None
        except ValueError:
            return {"_unparsed": raw.decode("utf-8", "replace")}, None

    def _route(self, method: str) -> tuple[str, str | None]:
        path = self.path.split("?", 1)[0].rstrip("/")
        if method == "POST":
            return {"/v1/chat/completions": "chat", "/v1/files": "files_create", "/v1/batches": "batches_create"}.get(path, "unknown"), None
        match = re.fullmatch(r"/v1/files/([\w-]+)(/content)?", path)
        if method == "GET" and match:
            return ("files_content" if match.group(2) else "files_retrieve"), match.group(1)
        match = re.fullmatch(r"/v1/batches/([\w-]+)", path)
        if method == "GET" and match:
            return "batches_retrieve", match.group(1)
        return "unknown", None

    def _unavailable(self, method: str, route: str) -> bool:
        if route == "unknown" or (route in BATCH_ROUTES and not self.server_mock.batch_support):
            self._error(404, f"Invalid URL ({method} {self.path.split('?', 1)[0]})")
            return True
        return False

    # -- methods -----------------------------------------------------------------------------
    def do_POST(self) -> None:
        mock = self.server_mock
        route, _ = self._route("POST")
        body, upload = self._parse(route, self._read_raw())
        self._record("POST", route, body)
        if self._unavailable("POST", route):
            return
        if route == "chat":
            self._chat(body)
            return
        fault = mock._next_fault(route)
        if fault is not None:
            self._apply_fault(fault, body)
        elif route == "files_create":
            if upload is None or not isinstance(body.get("purpose"), str):
                self._error(400, "A multipart upload needs a 'file' part and a 'purpose' field.", param="file")
            else:
                self._send(200, mock.add_file(upload["data"], upload["filename"], body["purpose"]))
        else:
            if not isinstance(body, dict) or "_unparsed" in body:
                self._error(400, "We could not parse the JSON body of your request.")
                return
            status, payload = mock.create_batch(body)
            self._send(status, payload)

    def _chat(self, body: Any) -> None:
        mock = self.server_mock
        if not isinstance(body, dict) or "_unparsed" in body:
            self._error(400, "We could not parse the JSON body of your request.")
            return
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            self._error(400, "'model' and 'messages' are required.", param="messages")
            return
        with mock._lock:
            mock.in_flight += 1
            mock.max_in_flight = max(mock.max_in_flight, mock.in_flight)
        try:
            if mock.response_delay:
                time.sleep(mock.response_delay)
            fault = mock._next_fault("chat", body)
            if fault is not None:
                self._apply_fault(fault, body)
            else:
                self._send(200, mock.completion(body, mock.answer_text(mock.parse_request(body))))
        finally:
            with mock._lock:
                mock.in_flight -= 1

    def do_GET(self) -> None:
        mock = self.server_mock
        route, item_id = self._route("GET")
        self._record("GET", route, None)
        if self._unavailable("GET", route) or item_id is None:
            return
        fault = mock._next_fault(route)
        if fault is not None:
            self._apply_fault(fault, {})
            return
        if route == "batches_retrieve":
            batch = mock.poll_batch(item_id)
            if batch is None:
                self._error(404, f"No batch found with id '{item_id}'.", param="batch_id")
            else:
                self._send(200, batch)
            return
        entry = mock.files.get(item_id)
        if entry is None:
            self._error(404, f"No such File object: {item_id}", param="id")
        elif route == "files_retrieve":
            self._send(200, mock.file_object(entry))
        else:
            self._send(200, entry["data"], content_type="application/octet-stream")


@pytest.fixture
def mock_openai(monkeypatch):
    """A running :class:`MockOpenAI` on 127.0.0.1 (a free port), stopped after the test.

    Same TLS trick as the ``mock_anthropic`` fixture (the SDK's trust store is read lazily from a
    directory, not parsed from the CA bundle for every client). No SDK environment variable is set:
    a test sets OPENAI_BASE_URL (``mock.base_url``) and OPENAI_API_KEY itself."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("SSL_CERT_DIR", os.environ.get("SSL_CERT_DIR") or ssl.get_default_verify_paths().openssl_capath)
    server = MockOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
