"""A small, real Anthropic API double for tests: an HTTP server on 127.0.0.1.

The real SDK talks to it over real sockets (``AnthropicJudge(base_url=mock.base_url)``),
so retries, headers, JSONL streaming and URL resolution are the SDK's own. Routes:

* ``POST /v1/messages`` - answers with a Message whose single text block is the
  JSON the pluggable :attr:`MockAnthropic.responder` returns for the request.
* ``POST /v1/messages/batches`` - records a batch and computes every result up front.
* ``GET /v1/messages/batches/{id}`` - ``in_progress`` for the first
  :attr:`polls_until_ended` - 1 polls, then ``ended`` with a ``results_url``
  (relative or absolute, see :attr:`results_url_mode`).
* ``GET /v1/messages/batches/{id}/results`` - JSONL, deliberately NOT in request order.

Usage: :attr:`MockAnthropic.usage`'s fixed counts by default; with ``token_usage = "counted"``, tokens
counted from the text (:func:`count_tokens`, about four characters a token) and the API's prompt caching
(:meth:`MockAnthropic.usage_for`): a block marked ``cache_control`` ends a prefix (everything before it, in the
order tools, system, messages); a prefix sent before within its lifetime (``ttl`` 5m or 1h, refreshed by each
read) is reported as ``cache_read_input_tokens``, a new one as ``cache_creation_input_tokens``, and a prefix
below the model's minimum cacheable length (:data:`CACHE_MIN_TOKENS`) is neither (plain input); more than 4
breakpoints is a 400, as the API answers. Batched requests are counted the same way.

The request kind is read from the marker line every crucible prompt starts with
(``Judge task: <version>/<kind>``). Faults are scripted per route and consumed in
order, or decided per request by :attr:`MockAnthropic.rules` (which see the request and
how many times this exact request was sent before); everything received (paths, headers, bodies) is recorded so a test can assert
what was sent and that a secret never leaks into anything the code under test made.

Use the ``mock_anthropic`` fixture (defined here; tests/conftest.py imports it).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import socket
import ssl
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

MARKER_RE = re.compile(r"Judge task: (?P<version>[\w.-]+)/(?P<kind>\w+)")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
ROUTES = ("messages", "batches_create", "batches_retrieve", "batches_results")
#: Minimum cacheable prompt lengths (tokens) the Anthropic docs state; other models: DEFAULT_CACHE_MIN_TOKENS,
#: the mock's own assumption (the smallest minimum documented for a current model).
CACHE_MIN_TOKENS = {"claude-haiku-4-5": 4096, "claude-sonnet-4-5": 1024}
DEFAULT_CACHE_MIN_TOKENS = 1024
CACHE_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4


def count_tokens(text: str) -> int:
    """The mock's token count of a text: about four characters a token (fewer than the judge's high-side
    estimate of three, as a real tokenizer on English)."""
    return math.ceil(len(text) / 4) if text else 0


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [block for block in content or [] if isinstance(block, dict)]


def prompt_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's content blocks in the order the prompt cache reads them: system, then each message's."""
    blocks = _blocks(body.get("system", ""))
    for message in body.get("messages", []):
        blocks.extend(_blocks(message.get("content", "")))
    return blocks


def system_text(body: dict[str, Any]) -> str:
    """The system prompt of a request body, its blocks joined (a string as it is)."""
    return "".join(block.get("text", "") for block in _blocks(body.get("system", "")))


@dataclass
class MockRequest:
    """One Messages request (direct, or one entry of a batch) as the responder sees it."""

    kind: str | None
    prompt_version: str | None
    system: str
    user: str
    body: dict[str, Any]
    custom_id: str | None = None

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def schema(self) -> dict[str, Any] | None:
        fmt = (self.body.get("output_config") or {}).get("format") or {}
        return fmt.get("schema")


@dataclass
class Fault:
    """A scripted response. kind: status | reset | text | json | raw_body | message | delay
    (``delay``: sleep ``body`` seconds, e.g. past the client's timeout, then answer normally)."""

    kind: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None


RUBRIC_SCALE_RE = re.compile(r"^Scale: an integer from (?P<low>-?\d+) \(.*?\) to (?P<high>-?\d+) \(", re.MULTILINE)
RUBRIC_ANSWER_RE = re.compile(r"<answer>\n(?P<answer>.*)\n</answer>", re.DOTALL)


def rubric_scale(user: str) -> tuple[int, int]:
    """``(min, max)`` of the scale line a rubric prompt states (before the data, so an answer cannot fake it)."""
    head = user.split("<question>", 1)[0]
    matches = list(RUBRIC_SCALE_RE.finditer(head))  # the last one: the scale line comes right before the data
    return (int(matches[-1]["low"]), int(matches[-1]["high"])) if matches else (0, 1)


def default_verdict(request: MockRequest) -> dict[str, Any]:
    """A valid verdict for each kind, shaped by the request (claim count, n; a rubric's scale and answer)."""
    kind = request.kind
    if kind == "claims":
        return {"claims": ["The sky is blue.", "Water is wet."]}
    if kind == "entailment":
        count = len(re.findall(r'<claim index="\d+">', request.user))
        return {"supported": [i % 2 == 0 for i in range(count)], "reasons": [f"reason {i + 1}" for i in range(count)]}
    if kind == "questions":
        match = re.search(r"exactly (\d+) questions", request.user)
        n = int(match.group(1)) if match else 3
        return {"questions": [f"Question {i + 1}?" for i in range(n)], "noncommittal": [False] * n}
    if kind == "usefulness":
        return {"useful": True, "reason": "it states the fact"}
    if kind == "relevance":
        return {"grade": 2, "reason": "partly answers"}
    if kind == "correctness":
        return {"grade": "perfect", "reason": "matches the reference"}
    if kind == "rubric":
        # The scale's top, unless the answer says "rude": tests tell rubrics and answers apart by the score.
        low, high = rubric_scale(request.user)
        match = RUBRIC_ANSWER_RE.search(request.user)
        rude = bool(match and re.search(r"\brude\b", match["answer"], re.IGNORECASE))
        return {"score": low if rude else high, "reason": "the answer is rude" if rude else "meets the criteria"}
    if kind == "generate":
        return generate_verdict(request.user)
    if kind == "answer_check":
        return answer_check_verdict(request.user)
    if kind == "retention":
        return {"contradicted": [], "reason": "the answer contradicts none of the user's messages"}
    return {"error": f"mock does not know kind {kind!r}"}


# -- golden set generation (generate-v1): deterministic, shaped by the passages ---------------------------
PASSAGE_RE = re.compile(r'<passage index="\d+"(?: id="(?P<id>[^"]*)")?>\n(?P<text>.*?)\n</passage>', re.DOTALL)
QUESTION_RE = re.compile(r"<question>\n(?P<question>.*?)\n</question>", re.DOTALL)
MOCK_STOP = frozenset(["the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "is", "are", "was", "were", "be", "by", "at", "as", "it", "its", "this", "that", "from", "what", "which", "how", "when", "who", "why", "does", "do", "did", "can", "said", "about", "relate", "given", "rule", "rules", "apply"])
#: Words no test corpus uses: an unanswerable mock question is made of them, so its answer check finds nothing.
OUTSIDE_WORDS = ("zeppelin", "lunar", "tariff", "quarterly")


def mock_passages(user: str) -> list[tuple[str, str]]:
    """(id, text) of each passage of a generate-v1 prompt ("" ids in an answer check)."""
    return [(m["id"] or "", m["text"]) for m in PASSAGE_RE.finditer(user)]


def mock_sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip() for p in parts if len(re.findall(r"\w+", p)) >= 4]


def mock_keywords(text: str, n: int = 3) -> list[str]:
    """The n longest content words of a text (ties alphabetical)."""
    found = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", text) if w.lower() not in MOCK_STOP and len(w) > 3}
    return sorted(found, key=lambda w: (-len(w), w))[:n]


def generate_verdict(user: str) -> dict[str, Any]:
    """A generate verdict built from the request's passages: the reference is a sentence of each source
    passage and the question names that sentence's longest words (so the answer check finds it again)."""
    qtype = re.search(r"^Question type: (\w+)", user, re.MULTILINE)[1]
    variant = re.search(r"This is variation (\d+)", user)
    nth = int(variant[1]) if variant else 0
    passages = mock_passages(user)
    picked = []
    for _, text in passages:
        sentences = mock_sentences(text) or [text.strip()]
        picked.append(sentences[nth % len(sentences)])
    if qtype == "unanswerable":
        topic = mock_keywords(passages[0][1], 1) if passages else ["service"]
        return {"question": f"What {' '.join(OUTSIDE_WORDS)} rules apply to {topic[0]}?",
                "reference": "The documents do not answer this.", "assertions": [], "answerable": False, "altered_fact": ""}
    keys = [mock_keywords(sentence) for sentence in picked]
    if qtype in ("multi_hop", "comparison"):
        first, second = keys[0] + ["a"] * 3, keys[-1] + ["b"] * 3
        question = f"How do {first[0]} and {second[0]} relate, given {first[1]} and {second[1]}?"
        return {"question": question, "reference": " ".join(picked), "assertions": picked, "answerable": True,
                "altered_fact": ""}
    words = keys[0] + ["it"] * 3
    if qtype == "false_premise":
        return {"question": f"Why does {words[0]} rule out {words[1]} and {words[2]}?",
                "reference": f"That premise is wrong. {picked[0]}", "assertions": [picked[0]], "answerable": True,
                "altered_fact": f"{words[0]} rules out {words[1]}"}
    return {"question": f"What is said about {words[0]}, {words[1]} and {words[2]}?", "reference": picked[0],
            "assertions": [picked[0]], "answerable": True, "altered_fact": ""}


def answer_check_verdict(user: str) -> dict[str, Any]:
    """The sentences of the passages that hold the most of the question's content words; "not found" when
    the passages hold fewer than half of those words."""
    match = QUESTION_RE.search(user)
    question = match["question"] if match else ""
    wanted = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", question) if w.lower() not in MOCK_STOP and len(w) > 3}
    sentences = [s for _, text in mock_passages(user) for s in (mock_sentences(text) or [text])]
    everything = {w.lower() for s in sentences for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", s)}
    if not wanted or len(wanted & everything) * 2 < len(wanted):
        return {"found": False, "answer": "not found"}
    scored = [(len(wanted & {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", s)}), s) for s in sentences]
    best = max(score for score, _ in scored)
    return {"found": True, "answer": " ".join(s for score, s in scored if score >= max(1, best // 2 + best % 2) and score)}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


class ScriptedFaults:
    """Scripted responses, consumed in order per route: the same controls for every API double
    (``MODEL_ROUTE``: the route of model calls, the default of the controls that take one)."""

    MODEL_ROUTE = "messages"
    faults: dict[str, Any]

    def fail_status(self, status: int, times: int = 1, *, headers: dict[str, str] | None = None, body: Any = None,
                    route: str | None = None) -> None:
        """The next ``times`` responses on ``route`` are HTTP ``status`` (with ``retry-after-ms: 1`` unless headers say
        otherwise; the API's error body unless ``body`` is given)."""
        hdrs = {"retry-after-ms": "1"} if headers is None else dict(headers)
        for _ in range(times):
            self.faults[route or self.MODEL_ROUTE].append(Fault("status", status=status, headers=hdrs, body=body))

    def fail_reset(self, times: int = 1, *, route: str | None = None) -> None:
        """The next ``times`` requests on ``route`` get their connection reset without a response."""
        for _ in range(times):
            self.faults[route or self.MODEL_ROUTE].append(Fault("reset"))

    def reply_text(self, text: str, times: int = 1) -> None:
        """The next ``times`` model calls answer 200 with this raw text as the model's output (e.g. malformed JSON)."""
        for _ in range(times):
            self.faults[self.MODEL_ROUTE].append(Fault("text", body=text))

    def reply_json(self, obj: Any, times: int = 1) -> None:
        """The next ``times`` model calls answer 200 with this JSON as the model's output (e.g. schema-violating)."""
        for _ in range(times):
            self.faults[self.MODEL_ROUTE].append(Fault("json", body=obj))

    def reply_raw_body(self, body: str, times: int = 1, *, route: str | None = None) -> None:
        """The next ``times`` responses on ``route`` are 200 with this (not the API's shape) HTTP body."""
        for _ in range(times):
            self.faults[route or self.MODEL_ROUTE].append(Fault("raw_body", body=body))


class MockAnthropic(ScriptedFaults):
    """The server plus its controls. Create through the ``mock_anthropic`` fixture."""

    def __init__(self) -> None:
        self.responder: Callable[[MockRequest], dict[str, Any] | str] = default_verdict
        self.usage: dict[str, int] = {"input_tokens": 1000, "output_tokens": 100}
        self.token_usage = "fixed"  # or "counted": tokens counted from the text, with prompt caching (usage_for)
        self.cache_min_tokens: dict[str, int] = dict(CACHE_MIN_TOKENS)
        self.honour_cache_control = True  # False: bill every request as if no block were marked (a baseline)
        self.clock: Callable[[], float] = time.monotonic  # what the cache's lifetimes are measured on
        self.prompt_cache: dict[str, float] = {}  # prefix key -> when it expires (clock seconds)
        self.cache_events: Counter[str] = Counter()  # "read", "write", "below_minimum"
        self.usages: list[dict[str, Any]] = []  # every usage reported (direct and batched), in order
        self.thinking_block = False  # put a thinking block before the text block
        self.response_delay = 0.0  # seconds each POST /v1/messages takes
        self.polls_until_ended = 2
        self.results_url_mode = "relative"  # or "absolute"
        self.batch_outcomes: dict[int, str] = {}  # request index in the next batch -> errored|expired|canceled|missing
        self.shuffle_seed = 1234
        self.faults: dict[str, deque[Fault]] = {route: deque() for route in ROUTES}
        # Per-request faults for POST /v1/messages, tried after the scripted queue: rule(request,
        # attempt) -> Fault | None, attempt = how many times this exact body was sent before.
        self.rules: list[Callable[[MockRequest, int], Fault | None]] = []
        self.faults_served: Counter[str] = Counter()  # "status:429", "reset", "delay", "text", ...
        self._attempts: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()  # by route name
        self.paths: Counter[str] = Counter()  # by "METHOD /path"
        self.received: list[dict[str, Any]] = []  # method, path, headers, body
        self.batches: dict[str, dict[str, Any]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        # flight_key(body: the parsed JSON request) -> a label (e.g. which golden item a request judges):
        # max_labels_in_flight is the most distinct labels in flight at once (1: items judged one after another).
        self.flight_key: Callable[[Any], str] | None = None
        self.labels_in_flight: Counter[str] = Counter()
        self.max_labels_in_flight = 0
        self._lock = threading.Lock()
        self._ids = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> MockAnthropic:
        mock = self

        class Handler(_Handler):
            server_mock = mock

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}"
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
    def reply_message(self, overrides: dict[str, Any], times: int = 1) -> None:
        """The next ``times`` messages answer 200 with a normal Message updated by ``overrides`` (e.g. a refusal)."""
        for _ in range(times):
            self.faults["messages"].append(Fault("message", body=overrides))

    # -- what happened -----------------------------------------------------------------------
    def headers_received(self) -> list[dict[str, str]]:
        return [entry["headers"] for entry in self.received]

    def message_bodies(self) -> list[dict[str, Any]]:
        """Bodies of every POST /v1/messages, plus the params of every batched request."""
        bodies: list[dict[str, Any]] = []
        for entry in self.received:
            if entry["route"] == "messages":
                bodies.append(entry["body"])
            elif entry["route"] == "batches_create":
                bodies.extend(item["params"] for item in entry["body"].get("requests", []))
        return bodies

    # -- internals ---------------------------------------------------------------------------
    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_mock{self._ids:04d}"

    def _next_fault(self, route: str, body: dict[str, Any] | None = None) -> Fault | None:
        with self._lock:
            if self.faults[route]:
                return self.faults[route].popleft()
            if route != "messages" or not self.rules or body is None:
                return None
            key = json.dumps(body, sort_keys=True)
            attempt = self._attempts[key]
            self._attempts[key] += 1
        request = self.parse_request(body)
        for rule in self.rules:
            fault = rule(request, attempt)
            if fault is not None:
                return fault
        return None

    def parse_request(self, body: dict[str, Any], custom_id: str | None = None) -> MockRequest:
        # A message's blocks are one text, as the model reads them (a prompt split for the cache is the same text).
        system = system_text(body)
        user = "\n".join("".join(str(block.get("text", "")) for block in _blocks(message.get("content", "")))
                         for message in body.get("messages", []))
        marker = MARKER_RE.search(system) or MARKER_RE.search(user)
        return MockRequest(
            kind=marker["kind"] if marker else None,
            prompt_version=marker["version"] if marker else None,
            system=system,
            user=user,
            body=body,
            custom_id=custom_id,
        )

    def usage_for(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The usage the API would report for this request and reply (see the module doc)."""
        usage: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                                 "cache_read_input_tokens": 0}
        if self.token_usage != "counted":
            usage.update(self.usage)
            return usage
        blocks = prompt_blocks(body)
        schema = json.dumps((body.get("output_config") or {}).get("format") or {})
        sizes = [count_tokens(str(block.get("text", ""))) for block in blocks]
        total = sum(sizes) + count_tokens(schema)
        model = str(body.get("model", ""))
        minimum = self.cache_min_tokens.get(model, DEFAULT_CACHE_MIN_TOKENS)
        marks = [i for i, block in enumerate(blocks) if block.get("cache_control")] if self.honour_cache_control else []
        read = written = written_1h = 0
        with self._lock:
            now = self.clock()
            keys, hit = [], -1
            for i in marks:
                prefix = sum(sizes[: i + 1])
                if prefix < minimum:
                    self.cache_events["below_minimum"] += 1
                    continue
                plain = [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks[: i + 1]]
                key = json.dumps([model, plain], sort_keys=True)
                ttl = CACHE_TTL_SECONDS[str(blocks[i]["cache_control"].get("ttl", "5m"))]
                keys.append((i, prefix, key, ttl))
                if self.prompt_cache.get(key, -math.inf) > now:
                    hit = len(keys) - 1
            if hit >= 0:
                read = keys[hit][1]
                self.cache_events["read"] += 1
            for position, (_, prefix, key, ttl) in enumerate(keys):
                if position > hit:  # a longer prefix than the one read: written now
                    self.cache_events["write"] += 1
                    more = prefix - read - written - written_1h
                    if ttl > CACHE_TTL_SECONDS["5m"]:
                        written_1h += more
                    else:
                        written += more
                self.prompt_cache[key] = now + ttl  # written, or refreshed by the read
        usage.update(input_tokens=total - read - written - written_1h, output_tokens=count_tokens(text),
                     cache_read_input_tokens=read, cache_creation_input_tokens=written + written_1h,
                     cache_creation={"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": written_1h})
        with self._lock:
            self.usages.append(usage)
        return usage

    def message(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.thinking_block:
            content.append({"type": "thinking", "thinking": "Let me look at the passages.", "signature": "mock-signature"})
        content.append({"type": "text", "text": text})
        usage = self.usage_for(body, text)
        return {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "unknown"),
            "content": content,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }

    def answer_text(self, request: MockRequest) -> str:
        answer = self.responder(request)
        return answer if isinstance(answer, str) else json.dumps(answer)

    def batch_object(self, batch: dict[str, Any]) -> dict[str, Any]:
        ended = batch["ended_at"] is not None
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for line in batch["lines"]:
                counts[line["result"]["type"]] += 1
            counts["expired"] += batch["missing"]
        else:
            counts["processing"] = batch["size"]
        results_url = None
        if ended:
            path = f"/v1/messages/batches/{batch['id']}/results"
            results_url = path if self.results_url_mode == "relative" else self.base_url + path
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": _iso(batch["created_at"]),
            "expires_at": _iso(batch["created_at"] + timedelta(hours=24)),
            "ended_at": _iso(batch["ended_at"]),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": results_url,
        }

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        batch_id = self._next_id("msgbatch")
        outcomes, self.batch_outcomes = self.batch_outcomes, {}
        lines: list[dict[str, Any]] = []
        missing = 0
        for index, item in enumerate(body.get("requests", [])):
            custom_id, params = item["custom_id"], item["params"]
            outcome = outcomes.get(index, "succeeded")
            if outcome == "missing":
                missing += 1
                continue
            if outcome == "succeeded":
                text = self.answer_text(self.parse_request(params, custom_id))
                result: dict[str, Any] = {"type": "succeeded", "message": self.message(params, text)}
            elif outcome == "errored":
                result = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": f"mock error for request {index}"},
                        "request_id": None,
                    },
                }
            else:
                result = {"type": outcome}
            lines.append({"custom_id": custom_id, "result": result})
        batch = {
            "id": batch_id,
            "size": len(body.get("requests", [])),
            "lines": lines,
            "missing": missing,
            "polls": 0,
            "created_at": _now(),
            "ended_at": None,
        }
        with self._lock:
            self.batches[batch_id] = batch
        return self.batch_object(batch)

    def poll_batch(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            batch["polls"] += 1
            if batch["ended_at"] is None and batch["polls"] >= self.polls_until_ended:
                batch["ended_at"] = _now()
        return self.batch_object(batch)

    def batch_results(self, batch_id: str) -> str | None:
        batch = self.batches.get(batch_id)
        if batch is None or batch["ended_at"] is None:
            return None
        lines = list(batch["lines"])
        random.Random(self.shuffle_seed).shuffle(lines)
        if len(lines) > 1 and lines == batch["lines"]:
            lines = lines[1:] + lines[:1]  # never in request order
        return "".join(json.dumps(line) + "\n" for line in lines)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one response = headers + body in two writes; no 40 ms Nagle stall
    server_mock: MockAnthropic
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing ----------------------------------------------------------------------------
    def _send(self, status: int, payload: Any, *, headers: dict[str, str] | None = None, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_mock")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, *, headers: dict[str, str] | None = None, body: Any = None) -> None:
        payload = body if body is not None else {
            "type": "error",
            "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
            "request_id": "req_mock",
        }
        self._send(status, payload, headers=headers)

    def _reset(self) -> None:
        # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.close()

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return {"_unparsed": raw.decode("utf-8", "replace")}

    def _route(self, method: str) -> tuple[str, str | None]:
        path = self.path.split("?", 1)[0].rstrip("/")
        if method == "POST" and path == "/v1/messages":
            return "messages", None
        if method == "POST" and path == "/v1/messages/batches":
            return "batches_create", None
        match = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", path)
        if method == "GET" and match:
            return ("batches_results" if match.group(2) else "batches_retrieve"), match.group(1)
        return "unknown", None

    def _record(self, method: str, route: str, body: Any) -> None:
        mock = self.server_mock
        with mock._lock:
            mock.counts[route] += 1
            mock.paths[f"{method} {self.path.split('?', 1)[0]}"] += 1
            mock.received.append({"method": method, "path": self.path, "route": route, "headers": dict(self.headers.items()), "body": body})

    def _apply_fault(self, fault: Fault, body: dict[str, Any]) -> None:
        mock = self.server_mock
        with mock._lock:
            mock.faults_served[f"status:{fault.status}" if fault.kind == "status" else fault.kind] += 1
        if fault.kind == "delay":
            time.sleep(float(fault.body))
            try:  # the client has usually given up by now
                self._send(200, mock.message(body, mock.answer_text(mock.parse_request(body))))
            except OSError:
                self.close_connection = True
        elif fault.kind == "status":
            self._error(fault.status, f"mock {fault.status}", headers=fault.headers, body=fault.body)
        elif fault.kind == "reset":
            self._reset()
        elif fault.kind == "text":
            self._send(200, mock.message(body, str(fault.body)))
        elif fault.kind == "json":
            self._send(200, mock.message(body, json.dumps(fault.body)))
        elif fault.kind == "message":
            message = mock.message(body, mock.answer_text(mock.parse_request(body)))
            message.update(fault.body)
            self._send(200, message)
        elif fault.kind == "raw_body":
            self._send(200, str(fault.body))
        else:  # pragma: no cover - a typo in a test
            self._error(500, f"unknown mock fault {fault.kind!r}")

    # -- methods -----------------------------------------------------------------------------
    def do_POST(self) -> None:
        mock = self.server_mock
        route, _ = self._route("POST")
        body = self._read_body()
        self._record("POST", route, body)
        if route == "unknown":
            self._error(404, f"no route POST {self.path}")
            return
        label = mock.flight_key(body) if mock.flight_key is not None and route == "messages" else None
        with mock._lock:
            mock.in_flight += 1
            mock.max_in_flight = max(mock.max_in_flight, mock.in_flight)
            if label is not None:
                mock.labels_in_flight[label] += 1
                mock.max_labels_in_flight = max(mock.max_labels_in_flight, len(+mock.labels_in_flight))
        try:
            if route == "messages" and mock.response_delay:
                time.sleep(mock.response_delay)
            fault = mock._next_fault(route, body)
            breakpoints = sum(1 for block in prompt_blocks(body) if block.get("cache_control")) if route == "messages" else 0
            if fault is not None:
                self._apply_fault(fault, body)
            elif breakpoints > MAX_BREAKPOINTS:
                self._error(400, f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}.")
            elif route == "messages":
                request = mock.parse_request(body)
                self._send(200, mock.message(body, mock.answer_text(request)))
            else:
                self._send(200, mock.create_batch(body))
        finally:
            with mock._lock:
                mock.in_flight -= 1
                if label is not None:
                    mock.labels_in_flight[label] -= 1

    def do_GET(self) -> None:
        mock = self.server_mock
        route, batch_id = self._route("GET")
        self._record("GET", route, None)
        if route == "unknown" or batch_id is None:
            self._error(404, f"no route GET {self.path}")
            return
        fault = mock._next_fault(route)
        if fault is not None:
            self._apply_fault(fault, {})
            return
        if route == "batches_retrieve":
            batch = mock.poll_batch(batch_id)
            if batch is None:
                self._error(404, f"no batch {batch_id}")
            else:
                self._send(200, batch)
        else:
            results = mock.batch_results(batch_id)
            if results is None:
                self._error(404, f"no results for batch {batch_id}")
            else:
                self._send(200, results, content_type="application/binary")


@pytest.fixture
def mock_anthropic(monkeypatch):
    """A running :class:`MockAnthropic` on 127.0.0.1 (a free port), stopped after the test.

    The SDK speaks plain HTTP to it, so no certificate is ever checked: the SDK's TLS trust is pointed
    at a directory of certificates (read lazily) rather than the CA bundle file, which every new
    client would otherwise parse again (about 40 ms each, for every judge a test makes)."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("SSL_CERT_DIR", os.environ.get("SSL_CERT_DIR") or ssl.get_default_verify_paths().openssl_capath)
    server = MockAnthropic().start()
    try:
        yield server
    finally:
        server.stop()
