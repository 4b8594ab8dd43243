"""What every model judge shares, whatever API it calls (Claude, any OpenAI-compatible server).

* **One vocabulary.** The versioned prompts (:mod:`pytest_crucible.judge.prompts`), the JSON schema of
  each verdict kind in the structured-outputs subset both APIs accept (:func:`verdict_schema`), and one
  parser (:func:`parse_verdict`): JSON, validated strictly into the verdict type, list lengths checked.
  Nothing is ever defaulted: whatever cannot be judged becomes a :class:`JudgeFailure`.
* **One way to call.** :class:`ModelJudge` runs direct requests on a thread pool of
  ``max_concurrency`` workers, with a semaphore that keeps the bound across concurrent calls too; the
  SDK retries 408/409/429/5xx and connection errors itself (both SDKs honour ``retry-after``); a reply
  that is not valid JSON, or violates the schema, is asked again once; when the SDK gives up, the
  failure names the HTTP status and the request kind. Usage and cost are added up under a lock. A host
  that cannot be reached opens the judge's circuit breaker (:mod:`.circuit`): the rest of the requests
  fail at once with the same reason, counted as not sent (``notSent``).
* **Secrets stay out.** API keys never appear in a failure message: they are redacted, even when an
  error body echoes one.

A subclass says how to build one request (``_params``), send it (``_send``), read its reply
(``_verdict_from_reply``, ``_reply_usage``) and, optionally, judge a batch (``_judge_batch``).

This module never imports pytest or an SDK.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

from pydantic import ValidationError

from .circuit import Circuit, JudgeUnreachable
from .engine import Judge
from .prices import cost_usd, estimate_tokens, price_for
from .prompts import PROMPT_VERSION, PromptParts, render_parts, render_prompt
from .types import VERDICT_TYPES, EntailmentVerdict, JudgeFailure, JudgeRequest, Usage, Verdict

__all__ = [
    "GENERATE_KINDS",
    "GENERATE_PROMPT_VERSION",
    "RELEVANCE_PROMPT_VERSION",
    "RETENTION_PROMPT_VERSION",
    "RUBRIC_PROMPT_VERSION",
    "STAMP_FIELDS",
    "InvalidVerdict",
    "ModelJudge",
    "Refused",
    "answered_locally",
    "batch_parts",
    "check_verdict",
    "expected_output_tokens",
    "parse_verdict",
    "prompt_for",
    "prompt_version_of",
    "schema_text",
    "verdict_schema",
]

# Verdict fields the engine stamps or the judge's own code fills, never asked of the model (not in the output schema).
STAMP_FIELDS = ("judge_model", "prompt_version", "contradicts", "contradicts_source")
RELEVANCE_PROMPT_VERSION = "umbrela-v1"
# Rubric metrics have their own prompt, versioned apart so that a change to it re-judges only rubrics.
RUBRIC_PROMPT_VERSION = "rubric-v1"
# Knowledge retention in golden conversations: versioned apart too, so a change to it re-judges only retention.
RETENTION_PROMPT_VERSION = "retention-v1"
# Golden set generation (`crucible golden generate`) writes test cases rather than grading: its own prompts.
GENERATE_PROMPT_VERSION = "generate-v1"
GENERATE_KINDS = ("generate", "answer_check")

# What each field means, sent as the schema's descriptions (the prompt says it too).
_FIELD_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "claims": {"claims": "Standalone factual claims made by the text, in order; empty when it makes none."},
    "entailment": {
        "supported": "One entry per claim, in the order given: true when the context passages support the claim.",
        "reasons": "One short reason per claim, in the order given.",
    },
    "questions": {
        "questions": "Questions the answer would answer; exactly as many as asked for.",
        "noncommittal": "One entry per question: true when the answer is evasive, vague or says it does not know.",
    },
    "usefulness": {
        "useful": "True when the chunk was useful for arriving at the reference answer.",
        "reason": "One short sentence.",
    },
    "relevance": {
        "grade": "0 unrelated; 1 related but does not answer; 2 partly answers; 3 dedicated to the question with the exact answer.",
        "reason": "One short sentence.",
    },
    "correctness": {
        "grade": "perfect, acceptable (minor flaw), missing (no answer / I don't know) or incorrect (wrong or invented).",
        "reason": "One or two short sentences.",
    },
    "rubric": {
        "score": "The score on the rubric's scale stated in the prompt: for pass/fail 1 (meets the criteria) or 0; "
        "otherwise a whole number from the scale's minimum to its maximum (fully meets the criteria).",
        "reason": "One or two short sentences on what in the answer decided the score.",
    },
    "retention": {
        "contradicted": "Each earlier user message (quoted exactly as given, once) whose statement of fact the "
        "answer contradicts; empty when it contradicts none.",
        "reason": "One short sentence: what the answer says against the user's statement, or that it contradicts none.",
    },
    "generate": {
        "question": "The question, in a user's own words, standing on its own; never copied from a passage.",
        "reference": "A short complete answer (one to three sentences) that follows from the passages alone.",
        "assertions": "One to four short checkable statements a correct answer must make; empty for an unanswerable question.",
        "answerable": "False only for an unanswerable question.",
        "altered_fact": "For a false-premise question, the wrong fact the question assumes; otherwise an empty string.",
    },
    "answer_check": {
        "found": "True when the passages state the answer to the question.",
        "answer": "The answer from the passages only, one to three sentences; \"not found\" when found is false.",
    },
}

# The JSON-schema subset structured outputs accept (and the SDK's own transform emits).
_STRING_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
# Anthropic keys (sk-ant-...), OpenAI keys (sk-..., sk-proj-...) and bearer tokens, wherever an error echoes one.
_SECRET_RE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9_\-.=]+)")
_FENCE_RE = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```\s*$", re.DOTALL)


class InvalidVerdict(ValueError):
    """The model's reply is not valid JSON, or does not fit the verdict schema."""


class Refused(Exception):
    """The model declined to answer (a refusal stop reason); never retried."""


# -- schema -------------------------------------------------------------------------------------
def _subset(node: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    """One pydantic JSON-schema node rewritten into the structured-outputs subset.

    Kept: type, properties, items, enum/const, anyOf, required, description,
    ``additionalProperties: false`` on every object (all properties required), the
    supported string formats, ``minItems`` 0 or 1. Dropped: titles and defaults.
    Numeric bounds are not supported: a small integer range becomes an ``enum``
    (which is), anything else moves into the description.
    """
    out: dict[str, Any] = {}
    notes: list[str] = []
    if "enum" in node or "const" in node:
        # Literal values: like the SDK's transform, keep the values and drop the type.
        out["enum"] = list(node["enum"]) if "enum" in node else [node["const"]]
    elif "anyOf" in node:
        out["anyOf"] = [_subset(variant) for variant in node["anyOf"]]
    else:
        kind = node["type"]
        if kind == "object":
            props = {name: _subset(sub) for name, sub in node.get("properties", {}).items()}
            out.update(type="object", properties=props, additionalProperties=False, required=list(props))
        elif kind == "array":
            out["type"] = "array"
            if "items" in node:
                out["items"] = _subset(node["items"])
            if node.get("minItems") in (0, 1):
                out["minItems"] = node["minItems"]
            elif "minItems" in node:
                notes.append(f"at least {node['minItems']} items")
        elif kind in ("integer", "number"):
            low, high = node.get("minimum"), node.get("maximum")
            if kind == "integer" and low is not None and high is not None and 0 <= high - low <= 20:
                out["enum"] = list(range(int(low), int(high) + 1))
            else:
                out["type"] = kind
                if low is not None:
                    notes.append(f"minimum {low}")
                if high is not None:
                    notes.append(f"maximum {high}")
        elif kind == "string":
            out["type"] = "string"
            if node.get("format") in _STRING_FORMATS:
                out["format"] = node["format"]
        else:
            out["type"] = kind
    text = description or node.get("description")
    if notes:
        text = (text + " " if text else "") + "(" + ", ".join(notes) + ")"
    if text:
        out["description"] = text
    return out


@cache
def schema_text(kind: str) -> str:
    verdict_type = VERDICT_TYPES[kind]
    source = verdict_type.model_json_schema()
    if "$defs" in source:  # pragma: no cover - the verdict models are flat
        raise ValueError(f"verdict {verdict_type.__name__} uses nested models; flatten it for structured outputs")
    descriptions = _FIELD_DESCRIPTIONS.get(kind, {})
    props = {
        name: _subset(sub, descriptions.get(name))
        for name, sub in source.get("properties", {}).items()
        if name not in STAMP_FIELDS
    }
    schema = {"type": "object", "properties": props, "additionalProperties": False, "required": list(props)}
    return json.dumps(schema)


def verdict_schema(kind: str) -> dict[str, Any]:
    """The JSON schema the model must answer ``kind`` requests in (a fresh copy)."""
    return json.loads(schema_text(kind))


# -- parsing ------------------------------------------------------------------------------------
def parse_verdict(request: JudgeRequest, text: str) -> Verdict:
    """The verdict in ``text`` (the model's JSON), validated for ``request``; raises :class:`InvalidVerdict`."""
    stripped = text.strip()
    fenced = _FENCE_RE.match(stripped)
    if fenced:
        stripped = fenced.group("body").strip()
    try:
        data = json.loads(stripped)
    except ValueError as err:
        raise InvalidVerdict(f"not JSON ({err}): {_clip(text)}") from None
    if not isinstance(data, dict):
        raise InvalidVerdict(f"expected a JSON object, got {type(data).__name__}: {_clip(text)}")
    allowed = set(verdict_schema(request.kind)["properties"])
    unexpected = sorted(set(data) - allowed)
    if unexpected:
        raise InvalidVerdict(f"unexpected field(s) {', '.join(unexpected)} in {request.kind} verdict")
    try:
        verdict = VERDICT_TYPES[request.kind].model_validate(data, strict=True)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or '(root)'}: {e['msg']}" for e in err.errors(include_url=False)
        )
        raise InvalidVerdict(f"{request.kind} verdict does not fit the schema: {problems}") from None
    check_verdict(request, verdict)
    return verdict


def check_verdict(request: Any, verdict: Any) -> None:
    """What the schema cannot say: list lengths that must match the request, a rubric score within its scale."""
    kind = request.kind
    if kind == "entailment":
        expected = len(request.claims)
        if len(verdict.supported) != expected:
            raise InvalidVerdict(f"entailment verdict has {len(verdict.supported)} 'supported' entries for {expected} claims")
        if verdict.reasons and len(verdict.reasons) != expected:
            raise InvalidVerdict(f"entailment verdict has {len(verdict.reasons)} reasons for {expected} claims")
    elif kind == "questions":
        if not verdict.questions:
            raise InvalidVerdict("questions verdict has no questions")
        if len(verdict.noncommittal) != len(verdict.questions):
            raise InvalidVerdict(
                f"questions verdict has {len(verdict.noncommittal)} noncommittal flags for {len(verdict.questions)} questions"
            )
    elif kind == "rubric":
        # The schema is one per kind, so the scale (which varies per rubric) is checked here.
        low, high = (0, 1) if request.pass_fail else (request.scale_min, request.scale_max)
        if not low <= verdict.score <= high:
            scale = "the pass/fail scale (0 or 1)" if request.pass_fail else f"the scale {low} to {high}"
            raise InvalidVerdict(f"rubric verdict score {verdict.score} is outside {scale} of rubric {request.name!r}")


def answered_locally(request: Any) -> Verdict | None:
    """The verdict of a request that needs no model (entailment of zero claims), else None."""
    if request.kind == "entailment" and not request.claims:
        return EntailmentVerdict(supported=[], reasons=[])
    return None


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# Rough output sizes for a cost estimate (tokens; adaptive thinking comes on top).
def expected_output_tokens(request: Any) -> int:
    kind = request.kind
    if kind == "claims":
        return 60 + estimate_tokens(request.text)
    if kind == "entailment":
        return 30 + 40 * len(request.claims)
    if kind == "questions":
        return 30 + 30 * request.n
    if kind in ("rubric", "retention"):
        return 80
    if kind == "generate":
        return 250
    if kind == "answer_check":
        return 90
    return 60


def prompt_version_of(kind: str, base: str = PROMPT_VERSION) -> str:
    """The prompt version a request kind is asked with: ``base`` (the answer-layer prompts), or the kind's
    own versioned prompt (relevance, rubrics, knowledge retention and golden set generation are versioned apart)."""
    # Graded relevance (pool labelling, written into qrels) has its own UMBRELA-style prompt.
    if kind == "relevance":
        return RELEVANCE_PROMPT_VERSION
    if kind == "rubric":
        return RUBRIC_PROMPT_VERSION
    if kind == "retention":
        return RETENTION_PROMPT_VERSION
    if kind in GENERATE_KINDS:
        return GENERATE_PROMPT_VERSION
    return base


def prompt_for(request: JudgeRequest) -> tuple[str, str]:
    """``(system, user)``: the versioned prompt a model judge sends for ``request`` (what a judge of your own
    can send its model, so that it is asked exactly what Claude and OpenAI-compatible models are asked)."""
    return render_prompt(request, prompt_version_of(request.kind))


def batch_parts(bodies: Sequence[dict[str, Any]], max_requests: int, max_bytes: int) -> list[tuple[int, int]]:
    """``(start, end)`` ranges of ``bodies`` that each fit one batch of an API that takes at most
    ``max_requests`` requests and about ``max_bytes`` of request bodies per batch (a batch over a limit
    is refused whole, so a large golden set goes in several)."""
    parts, start, size = [], 0, 0
    for index, body in enumerate(bodies):
        size += len(json.dumps(body)) + 64  # + the custom id and the framing
        if index > start and (index - start >= max_requests or size > max_bytes):
            parts.append((start, index))
            start, size = index, len(json.dumps(body)) + 64
    parts.append((start, len(bodies)))
    return parts


class ModelJudge(Judge):
    """A judge that asks a model through an API: the parts every provider shares (see the module doc).

    Subclasses set ``self._sdk`` (the SDK module: its ``APIStatusError``, ``APIConnectionError`` and
    ``APITimeoutError``), ``self._client`` (built with :meth:`_http_client` when they build it),
    ``self.max_retries`` and call :meth:`_setup`.
    """

    paid = True
    #: Mark each request's stable prefix for the API's prompt cache (where the API takes a marker).
    prompt_cache = True
    grades_rubrics = True
    judges_retention = True
    overlaps = True  # a semaphore bounds the requests in flight across every caller's threads
    # set by the subclass (see the class doc)
    _sdk: Any
    _client: Any
    max_retries: int
    _circuit: Circuit
    #: USD per million input and output tokens that replace the price table (ini crucible_judge_price_per_mtok):
    #: a self-hosted model, or a contract price. Cached input is billed at the input rate, and no batch discount.
    price_override: tuple[float, float] | None = None
    #: Few-shot examples by request kind, as the text sent after the system prompt (a few-shot alignment's:
    #: :mod:`.aligned`, which also sets ``prompt_version`` to ``<prompts>+aligned-<hash12>``); part of the stable prefix.
    examples: Mapping[str, str] = {}
    #: The API bills a prompt-cache write for a marked prefix (Anthropic): the cost estimate prices it so.
    cache_writes_billed = False

    def _setup(self, model: str, *, prompt_version: str, max_concurrency: int, secrets: Sequence[Any]) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        # The circuit: built with the client (``_http_client``), or here for a client passed ready (then each
        # request's outcome feeds it); named by the host the client sends to.
        self.endpoint = self._breaker().host = _host_of(getattr(self._client, "base_url", None))
        self.model = model
        self.prompt_version = prompt_version
        self.max_concurrency = max_concurrency
        self._secrets = tuple(sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True))
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._usage = Usage()

    def prompt_version_for(self, kind: str) -> str:
        return prompt_version_of(kind, self.prompt_version)

    def prompt_parts(self, request: JudgeRequest) -> tuple[tuple[str, ...], PromptParts]:
        """``(system blocks, parts)``: the versioned prompt of ``request`` with this judge's few-shot examples of its
        kind after the system prompt. The system blocks and ``parts.stable`` are the stable prefix (the same for
        every request of the kind: what the prompt cache keeps); ``parts.item`` is the request's own part."""
        # The prompt files of the version (a few-shot alignment's version adds "+aligned-<hash12>" to them).
        parts = render_parts(request, prompt_version_of(request.kind, self.prompt_version.partition("+")[0]))
        shots = self.examples.get(request.kind)
        return ((parts.system, shots) if shots else (parts.system,)), parts

    # -- Judge interface ----------------------------------------------------------------------
    def judge(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        """``now``: answer through direct calls even in batch mode (the caller cannot wait for a batch)."""
        results: list[Verdict | JudgeFailure | None] = [answered_locally(request) for request in requests]
        pending = [index for index, result in enumerate(results) if result is None]
        if pending:
            todo = [requests[index] for index in pending]
            answered = self._judge_batch(todo) if self.batch and not now else self._run_direct(todo)
            for index, verdict in zip(pending, answered):
                results[index] = verdict
        return results  # type: ignore[return-value]

    def usage(self) -> Usage:
        with self._lock:
            return self._usage.model_copy()

    def counters(self) -> dict[str, int]:
        """``notSent``: requests refused before any attempt went out, the host being unreachable (the circuit)."""
        return {"notSent": self._circuit.not_sent} if self._circuit.not_sent else {}

    # -- the circuit breaker ----------------------------------------------------------------------
    def _breaker(self) -> Circuit:
        """This judge's circuit (:mod:`.circuit`)."""
        if getattr(self, "_circuit", None) is None:
            self._circuit = Circuit("the API")
        return self._circuit

    def _http_client(self, timeout: float) -> dict[str, Any]:
        """The client options a subclass that builds its SDK client passes: the SDK's own HTTP client, every attempt
        watched by the circuit (refused at once, without a retry, while it is open), and a connect timeout of at
        most CONNECT_TIMEOUT seconds (``timeout`` is the read timeout, the longest a reply may take)."""
        import httpx2

        from .circuit import CONNECT_TIMEOUT, guarded_http_client

        sdk = self._sdk
        base_error = getattr(sdk, "AnthropicError", None) or sdk.OpenAIError
        refused = type("JudgeUnreachable", (JudgeUnreachable, base_error), {})
        circuit = self._breaker()
        return {"timeout": httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
                "http_client": guarded_http_client(sdk.DefaultHttpxClient, circuit, refused)}

    def close(self) -> None:
        if getattr(self, "_owns_client", False):
            self._client.close()

    # -- cost estimate ------------------------------------------------------------------------
    def price_model(self) -> str:
        """The model id the price table is looked up with."""
        return self.model

    @property
    def priced(self) -> bool:
        return self.price_override is not None or price_for(self.price_model()) is not None

    def cost(self, input_tokens: int, output_tokens: int, *, batch: bool, requests: int | None = 1,
             **cache: int) -> float | None:
        """USD for the tokens of ``requests`` replies (one by default; None: the price table's base band), None
        when the model has no price."""
        if self.price_override is not None:
            rate_in, rate_out = self.price_override
            return ((input_tokens + sum(cache.values())) * rate_in + output_tokens * rate_out) / 1_000_000
        return cost_usd(self.price_model(), input_tokens, output_tokens, batch=batch, requests=requests, **cache)

    def estimate_usd(self, requests: Sequence[JudgeRequest]) -> float | None:
        """A rough, high-side cost for judging ``requests`` (None when the model has no price).

        Input from :func:`~pytest_crucible.judge.prices.estimate_tokens` over the rendered prompts (few-shot
        examples included) and schema; output from typical verdict sizes. Prompt caching never lowers it: where
        the API bills a cache write (``cache_writes_billed``), a stable prefix that may reach the model's
        minimum cacheable length (:func:`~pytest_crucible.judge.prices.cache_min_tokens`; every prefix when
        the table has no minimum) is priced as a write on every request, and no cache read is ever counted.
        Thinking tokens, which some models spend on top, are not included.
        """
        from .prices import cache_min_tokens

        minimum = cache_min_tokens(self.price_model()) if self.cache_writes_billed and self.prompt_cache else None
        total = 0.0
        for request in requests:
            system, parts = self.prompt_parts(request)
            prefix = sum(estimate_tokens(block) for block in system) + estimate_tokens(parts.stable)
            rest = estimate_tokens(parts.item) + estimate_tokens(schema_text(request.kind))
            written = prefix if minimum is not None and prefix >= minimum else 0
            cost = self.cost(prefix - written + rest, expected_output_tokens(request), batch=self.batch,
                             cache_write_tokens=written)
            if cost is None:
                return None
            total += cost
        return total

    # -- what a provider implements -------------------------------------------------------------
    def _params(self, request: JudgeRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _send(self, params: dict[str, Any]) -> Any:
        """One API call; raises the SDK's errors."""
        raise NotImplementedError

    def _verdict_from_reply(self, request: JudgeRequest, reply: Any) -> Verdict:
        """The verdict in a reply; raises :class:`InvalidVerdict` or :class:`Refused`."""
        raise NotImplementedError

    def _reply_usage(self, reply: Any, *, batch: bool) -> Usage | None:
        raise NotImplementedError

    def _judge_batch(self, requests: list[JudgeRequest]) -> list[Verdict | JudgeFailure]:
        return self._run_direct(requests)

    # -- direct calls ---------------------------------------------------------------------------
    def _run_direct(self, requests: list[JudgeRequest], *, attempts: int = 2, first_problems: list[str] | None = None) -> list[Verdict | JudgeFailure]:
        problems = first_problems or [""] * len(requests)
        workers = min(self.max_concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crucible-judge") as pool:
            return list(pool.map(lambda pair: self._safe_one(pair[0], attempts, pair[1]), zip(requests, problems)))

    def _safe_one(self, request: JudgeRequest, attempts: int, problem: str) -> Verdict | JudgeFailure:
        try:
            return self._judge_one(request, attempts, problem)
        except Exception as err:
            return self._failure(request.kind, f"{request.kind} request failed: {type(err).__name__}: {err}")

    def _judge_one(self, request: JudgeRequest, attempts: int, problem: str) -> Verdict | JudgeFailure:
        sdk, kind, circuit = self._sdk, request.kind, self._circuit
        circuit.begin()
        refusal = circuit.refusal()
        if refusal is not None:
            return self._failure(kind, f"{kind} request not sent: {refusal}")
        params = self._params(request)
        for _ in range(attempts):
            try:
                with self._slots:
                    if not circuit.guarded:  # a client passed ready: the request is the one attempt the circuit sees
                        if (refusal := circuit.refusal()) is not None:
                            raise JudgeUnreachable(refusal)
                        circuit.attempt()
                    reply = self._send(params)
                circuit.answered()
            except JudgeUnreachable as err:
                return self._failure(kind, f"{kind} request failed: {err}")
            except sdk.APIStatusError as err:
                circuit.answered()
                return self._status_failure(kind, err)
            except sdk.APIConnectionError as err:
                timed_out = isinstance(err, sdk.APITimeoutError)
                if not circuit.guarded:  # its attempts were not watched: the request's outcome counts once
                    circuit.failed("no answer within the timeout" if timed_out else f"could not connect: {err}")
                what = "timed out" if timed_out else "could not connect"
                return self._failure(kind, f"{kind} request failed: {what} ({err}) after {self.max_retries} retries")
            except json.JSONDecodeError as err:  # the HTTP body itself was not JSON
                problem = f"the API response body is not JSON ({err})"
                continue
            self._record_usage(reply, batch=False)
            try:
                return self._verdict_from_reply(request, reply)
            except Refused as err:
                return self._failure(kind, f"judge refused the {kind} request: {err}")
            except InvalidVerdict as err:
                problem = str(err)
        # Every way here is a second invalid reply: two attempts, or a batch result and one direct retry.
        return self._failure(kind, f"judge returned invalid JSON: {problem} ({kind} request, after 1 retry)")

    # -- usage and failures ---------------------------------------------------------------------
    def _record_usage(self, reply: Any, *, batch: bool) -> None:
        spent = self._reply_usage(reply, batch=batch)
        if spent is not None:
            with self._lock:
                self._usage.add(spent)

    def _status_failure(self, kind: str, err: Any) -> JudgeFailure:
        status = err.status_code
        error_type = getattr(err, "type", None) or "error"
        detail = getattr(err, "api_message", None) or _body_message(err) or "no message"
        retryable = status in (408, 409, 429) or status >= 500
        tries = f"after {self.max_retries} retries" if retryable else "not retried"
        request_id = getattr(err, "request_id", None)
        suffix = f"; request-id {request_id}" if request_id else ""
        return self._failure(kind, f"{kind} request failed with HTTP {status} ({error_type}) {tries}: {detail}{suffix}")

    def _api_failure(self, kind: str, err: Any, where: str) -> JudgeFailure:
        if isinstance(err, self._sdk.APIStatusError):
            failure = self._status_failure(kind, err)
            return JudgeFailure(kind=kind, message=f"{failure.message} (while {where})")
        if isinstance(err, self._sdk.APIConnectionError):
            return self._failure(kind, f"{kind} request failed: could not reach the API ({err}) while {where}")
        if isinstance(err, JudgeUnreachable):
            return self._failure(kind, f"{kind} request failed: {err} (while {where})")
        return self._failure(kind, f"{kind} request failed: {type(err).__name__}: {err} (while {where})")

    def _failure(self, kind: str, message: str) -> JudgeFailure:
        return JudgeFailure(kind=kind, message=self._redact(message))

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[REDACTED]")
        return _SECRET_RE.sub("[REDACTED]", text)


def _host_of(base_url: Any) -> str:
    """``host[:port]`` of the API's base URL (what a refusal names)."""
    from urllib.parse import urlsplit

    parts = urlsplit(str(base_url or ""))
    return (parts.hostname or "the API") + (f":{parts.port}" if parts.port else "")


def _body_message(err: Any) -> str | None:
    """The ``error.message`` of an API error body (OpenAI-style servers), if it has one."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
    return None
