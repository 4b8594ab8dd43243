"""Claude as the judge, through the official Anthropic SDK.

Every request becomes one Messages call with the versioned prompt of its kind and
a structured-output format (``output_config.format``, a JSON schema derived from
the verdict model); the reply is parsed and validated with pydantic (strict) into
the verdict type, and list lengths that must match are checked. Nothing is ever
defaulted: whatever cannot be judged becomes a :class:`JudgeFailure`.

* Direct mode: a thread pool of ``max_concurrency`` workers per ``judge()`` call,
  and a semaphore that keeps the bound across concurrent calls too. Retries of
  408/409/429/5xx (529 included) and connection errors are the SDK's own, which
  honour ``retry-after-ms`` / ``retry-after``; when the SDK gives up, the request
  fails with a message naming the HTTP status and the request kind. A reply that
  is not valid JSON, or violates the schema, is asked again once.
* Batch mode (``batch=True``): one Message Batch per ``judge()`` call, polled
  every ``poll_interval`` seconds until it ends; results (JSONL, in no particular
  order) are matched back by ``custom_id``. ``errored``, ``canceled``, ``expired``
  and missing results are failures. The one retry of an invalid reply goes through
  the plain Messages API (a second batch could wait for hours).
* Sampling parameters (temperature, top_p) are never sent: the API's current
  default version rejects them. Verdicts are cached by the engine instead.

The SDK is imported in ``__init__``: importing this module costs nothing, and a
project that never builds an ``AnthropicJudge`` never loads ``anthropic``.
API keys never appear in a failure message (they are redacted defensively, even if
an error body echoes one).
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pydantic import ValidationError

from .engine import Judge
from .prices import DEFAULT_JUDGE_MODEL, cost_usd, estimate_tokens, price_for
from .prompts import PROMPT_VERSION, render_prompt
from .types import VERDICT_TYPES, JudgeFailure, JudgeRequest, Usage, Verdict

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicJudge", "verdict_schema", "parse_verdict", "InvalidVerdict", "STAMP_FIELDS"]

#: Verdict fields the engine stamps; never part of what the model is asked to write.
# Verdict fields the judge's own code fills, never asked of the model (not in the output schema).
STAMP_FIELDS = ("judge_model", "prompt_version", "contradicts", "contradicts_source")
RELEVANCE_PROMPT_VERSION = "umbrela-v1"
# Rubric metrics have their own prompt, versioned apart so that a change to it re-judges only rubrics.
RUBRIC_PROMPT_VERSION = "rubric-v1"
# Golden set generation (`crucible golden generate`) writes test cases rather than grading: its own prompts.
GENERATE_PROMPT_VERSION = "generate-v1"
GENERATE_KINDS = ("generate", "answer_check")
# The Message Batches API takes at most 100,000 requests and 256 MB per batch: a large golden set is
# sent in several batches, kept under both with room to spare (a batch over a limit is refused whole).
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 200 * 1024 * 1024

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
_SECRET_RE = re.compile(r"(sk-ant-[A-Za-z0-9_\-]+|Bearer\s+[A-Za-z0-9_\-.=]+)")
_FENCE_RE = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```\s*$", re.DOTALL)


class InvalidVerdict(ValueError):
    """The model's reply is not valid JSON, or does not fit the verdict schema."""


class _Refused(Exception):
    pass


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


@lru_cache(maxsize=None)
def _cached_schema(kind: str) -> str:
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
    return json.loads(_cached_schema(kind))


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
    _check_verdict(request, verdict)
    return verdict


def _check_verdict(request: Any, verdict: Any) -> None:
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


def _answered_locally(request: Any) -> Verdict | None:
    """The verdict of a request that needs no model (entailment of zero claims), else None."""
    if request.kind == "entailment" and not request.claims:
        return VERDICT_TYPES["entailment"](supported=[], reasons=[])
    return None


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# Rough output sizes for a cost estimate (tokens; adaptive thinking comes on top).
def _expected_output_tokens(request: Any) -> int:
    kind = request.kind
    if kind == "claims":
        return 60 + estimate_tokens(request.text)
    if kind == "entailment":
        return 30 + 40 * len(request.claims)
    if kind == "questions":
        return 30 + 30 * request.n
    if kind == "rubric":
        return 80
    if kind == "generate":
        return 250
    if kind == "answer_check":
        return 90
    return 60


class AnthropicJudge(Judge):
    """Claude through the Anthropic API (optionally the Message Batches API, at half price).

    ``api_key`` / ``base_url`` go to ``anthropic.Anthropic`` (which falls back to
    ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``), or pass a ready ``client``
    (then ``max_retries`` and ``timeout`` are the client's, and ``close()`` leaves it
    open). ``max_retries`` is the SDK's retry budget per call; ``timeout`` is in
    seconds. ``max_tokens`` caps each reply (adaptive thinking counts towards it);
    ``effort`` (low, medium, high, ...) is sent as ``output_config.effort`` only when
    given, since older models reject it. An entailment request with no claims is
    answered locally (empty lists) without a call.
    """

    paid = True
    grades_rubrics = True
    #: Give up on a batch that has not ended after this many seconds (the API ends every batch within 24 hours).
    max_batch_wait = 25 * 3600.0

    def __init__(
        self,
        model: str = DEFAULT_JUDGE_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_concurrency: int = 4,
        batch: bool = False,
        max_retries: int = 4,
        timeout: float = 60.0,
        poll_interval: float = 2.0,
        client: "anthropic.Anthropic | None" = None,
        prompt_version: str = PROMPT_VERSION,
        max_tokens: int = 4096,
        effort: str | None = None,
    ) -> None:
        import anthropic  # lazy: only a project that uses this judge loads the SDK

        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self._sdk = anthropic
        self.model = model
        self.prompt_version = prompt_version
        self.batch = batch
        self.label = f"{model} via Anthropic API" + (", Message Batches" if batch else "")
        self.max_concurrency = max_concurrency
        self.poll_interval = poll_interval
        self.max_tokens = max_tokens
        self.effort = effort
        self._owns_client = client is None
        if client is None:
            client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout)
        self._client = client
        self.max_retries = int(getattr(client, "max_retries", max_retries))
        candidates = {api_key, getattr(client, "api_key", None), getattr(client, "auth_token", None)}
        self._secrets = tuple(sorted((s for s in candidates if isinstance(s, str) and s), key=len, reverse=True))
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._usage = Usage()
        self.priced = price_for(model) is not None
        # Called as on_progress(batch_id, done, total) while a Message Batch is polled.
        self.on_progress: Callable[[str, int, int], None] | None = None

    def prompt_version_for(self, kind: str) -> str:
        # Graded relevance (pool labelling, written into qrels) has its own UMBRELA-style prompt.
        if kind == "relevance":
            return RELEVANCE_PROMPT_VERSION
        if kind == "rubric":
            return RUBRIC_PROMPT_VERSION
        if kind in GENERATE_KINDS:
            return GENERATE_PROMPT_VERSION
        return self.prompt_version

    def __repr__(self) -> str:
        return f"AnthropicJudge(model={self.model!r}, batch={self.batch}, prompt_version={self.prompt_version!r})"

    # -- Judge interface ----------------------------------------------------------------------
    def judge(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        """``now``: answer through the Messages API even in batch mode (the caller cannot wait for a batch)."""
        results: list[Verdict | JudgeFailure | None] = [_answered_locally(request) for request in requests]
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

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    # -- cost estimate ------------------------------------------------------------------------
    def estimate_usd(self, requests: Sequence[JudgeRequest]) -> float | None:
        """A rough, high-side cost for judging ``requests`` (None when the model has no price).

        Input from :func:`~pytest_crucible.judge.prices.estimate_tokens` over the
        rendered prompts and schema; output from typical verdict sizes. Adaptive
        thinking tokens, which some models spend on top, are not included.
        """
        total = 0.0
        for request in requests:
            system, user = render_prompt(request, self.prompt_version_for(request.kind))
            tokens_in = estimate_tokens(system) + estimate_tokens(user) + estimate_tokens(_cached_schema(request.kind))
            cost = cost_usd(self.model, tokens_in, _expected_output_tokens(request), batch=self.batch, requests=1)
            if cost is None:
                return None
            total += cost
        return total

    # -- one request ----------------------------------------------------------------------------
    def _params(self, request: JudgeRequest) -> dict[str, Any]:
        system, user = render_prompt(request, self.prompt_version_for(request.kind))
        output_config: dict[str, Any] = {"format": {"type": "json_schema", "schema": verdict_schema(request.kind)}}
        if self.effort is not None:
            output_config["effort"] = self.effort
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "output_config": output_config,
        }

    def _run_direct(self, requests: list[JudgeRequest], *, attempts: int = 2, first_problems: list[str] | None = None) -> list[Verdict | JudgeFailure]:
        problems = first_problems or [""] * len(requests)
        workers = min(self.max_concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crucible-judge") as pool:
            return list(pool.map(lambda pair: self._safe_one(pair[0], attempts, pair[1]), zip(requests, problems)))

    def _safe_one(self, request: JudgeRequest, attempts: int, problem: str) -> Verdict | JudgeFailure:
        try:
            return self._judge_one(request, attempts, problem)
        except Exception as err:  # noqa: BLE001 - one bad request must not sink the others
            return self._failure(request.kind, f"{request.kind} request failed: {type(err).__name__}: {err}")

    def _judge_one(self, request: JudgeRequest, attempts: int, problem: str) -> Verdict | JudgeFailure:
        sdk, kind = self._sdk, request.kind
        params = self._params(request)
        for _ in range(attempts):
            try:
                with self._slots:
                    message = self._client.messages.create(**params)
            except sdk.APIStatusError as err:
                return self._status_failure(kind, err)
            except sdk.APIConnectionError as err:
                what = "timed out" if isinstance(err, sdk.APITimeoutError) else "could not connect"
                return self._failure(kind, f"{kind} request failed: {what} ({err}) after {self.max_retries} retries")
            except json.JSONDecodeError as err:  # the HTTP body itself was not JSON
                problem = f"the API response body is not JSON ({err})"
                continue
            self._record_usage(message, batch=False)
            try:
                return self._verdict_from_message(request, message)
            except _Refused as err:
                return self._failure(kind, f"judge refused the {kind} request: {err}")
            except InvalidVerdict as err:
                problem = str(err)
        # Every way here is a second invalid reply: two attempts, or a batch result and one direct retry.
        return self._failure(kind, f"judge returned invalid JSON: {problem} ({kind} request, after 1 retry)")

    def _verdict_from_message(self, request: JudgeRequest, message: Any) -> Verdict:
        stop_reason = getattr(message, "stop_reason", None)
        if stop_reason == "refusal":
            details = getattr(message, "stop_details", None)
            category = getattr(details, "category", None) or "unspecified"
            explanation = getattr(details, "explanation", None) or "no explanation"
            raise _Refused(f"refusal ({category}): {explanation}")
        text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
        if not text.strip():
            raise InvalidVerdict(f"the reply has no text (stop_reason={stop_reason})")
        try:
            return parse_verdict(request, text)
        except InvalidVerdict as err:
            if stop_reason == "max_tokens":
                raise InvalidVerdict(f"{err} (output cut off at max_tokens={self.max_tokens})") from None
            raise

    # -- batches --------------------------------------------------------------------------------
    def _judge_batch(self, requests: list[JudgeRequest]) -> list[Verdict | JudgeFailure]:
        """Judge through Message Batches, in as many batches as the API's limits per batch need (at most
        MAX_BATCH_REQUESTS requests and about MAX_BATCH_BYTES of request bodies each), one after the other."""
        parts, start, size = [], 0, 0
        params = [self._params(request) for request in requests]
        for index, body in enumerate(params):
            size += len(json.dumps(body)) + 64  # + the custom id and the framing
            if index > start and (index - start >= MAX_BATCH_REQUESTS or size > MAX_BATCH_BYTES):
                parts.append((start, index))
                start, size = index, len(json.dumps(body)) + 64
        parts.append((start, len(requests)))
        return [verdict for lo, hi in parts for verdict in self._judge_one_batch(requests[lo:hi], params[lo:hi])]

    def _judge_one_batch(self, requests: list[JudgeRequest], params: list[dict[str, Any]]) -> list[Verdict | JudgeFailure]:
        sdk, batches = self._sdk, self._client.messages.batches
        results: list[Verdict | JudgeFailure | None] = [None] * len(requests)
        ids = {f"{request.kind}-{index:06d}": index for index, request in enumerate(requests)}
        try:
            batch = batches.create(requests=[{"custom_id": cid, "params": params[i]} for cid, i in ids.items()])
        except (sdk.APIStatusError, sdk.APIConnectionError) as err:
            return [self._api_failure(r.kind, err, "creating the Message Batch") for r in requests]
        deadline = time.monotonic() + self.max_batch_wait
        try:
            self._report_progress(batch, len(requests))
            while batch.processing_status != "ended":
                if time.monotonic() > deadline:
                    message = f"Message Batch {batch.id} did not end within {self.max_batch_wait:.0f}s"
                    return [self._failure(r.kind, f"{r.kind} request failed: {message}") for r in requests]
                time.sleep(self.poll_interval)
                batch = batches.retrieve(batch.id)
                self._report_progress(batch, len(requests))
            lines = batches.results(batch.id)
            invalid: list[tuple[int, str]] = []
            for line in lines:
                index = ids.get(line.custom_id)
                if index is None or results[index] is not None:
                    continue
                kind, outcome = requests[index].kind, line.result
                if outcome.type == "succeeded":
                    self._record_usage(outcome.message, batch=True)
                    try:
                        results[index] = self._verdict_from_message(requests[index], outcome.message)
                    except _Refused as err:
                        results[index] = self._failure(kind, f"judge refused the {kind} request: {err}")
                    except InvalidVerdict as err:
                        invalid.append((index, str(err)))
                elif outcome.type == "errored":
                    inner = getattr(getattr(outcome, "error", None), "error", None)
                    reason = f"{getattr(inner, 'type', 'error')}: {getattr(inner, 'message', 'no message')}"
                    results[index] = self._failure(kind, f"{kind} request errored in Message Batch {batch.id}: {reason}")
                elif outcome.type == "expired":
                    results[index] = self._failure(kind, f"{kind} request expired in Message Batch {batch.id} before it was processed")
                elif outcome.type == "canceled":
                    results[index] = self._failure(kind, f"{kind} request was canceled in Message Batch {batch.id}")
                else:
                    results[index] = self._failure(kind, f"{kind} request has unknown result type {outcome.type!r} in Message Batch {batch.id}")
        except Exception as err:  # noqa: BLE001 - API errors, and a results stream that breaks off
            where = f"reading Message Batch {batch.id}"
            return [r if r is not None else self._api_failure(q.kind, err, where) for r, q in zip(results, requests)]
        if invalid:  # the one retry, through the plain Messages API (standard price)
            retried = self._run_direct([requests[i] for i, _ in invalid], attempts=1, first_problems=[p for _, p in invalid])
            for (index, _), verdict in zip(invalid, retried):
                results[index] = verdict
        return [
            r if r is not None else self._failure(q.kind, f"{q.kind} request has no result in Message Batch {batch.id}")
            for r, q in zip(results, requests)
        ]

    def _report_progress(self, batch: Any, total: int) -> None:
        if self.on_progress is None:
            return
        counts = getattr(batch, "request_counts", None)
        processing = getattr(counts, "processing", total) if counts is not None else total
        done = total if batch.processing_status == "ended" else max(0, total - int(processing or 0))
        self.on_progress(batch.id, done, total)

    # -- usage and failures ---------------------------------------------------------------------
    def _record_usage(self, message: Any, *, batch: bool) -> None:
        usage = getattr(message, "usage", None)
        if usage is None:
            return
        input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        cache_read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        cache_write = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        breakdown = getattr(usage, "cache_creation", None)
        write_1h = int(getattr(breakdown, "ephemeral_1h_input_tokens", 0) or 0) if breakdown is not None else 0
        write_1h = min(write_1h, cache_write)
        cost = cost_usd(
            self.model,
            input_tokens,
            output_tokens,
            batch=batch,
            requests=1,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write - write_1h,
            cache_write_1h_tokens=write_1h,
        )
        spent = Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            requests=1,
            cost_usd=cost or 0.0,
        )
        with self._lock:
            self._usage.add(spent)

    def _status_failure(self, kind: str, err: Any) -> JudgeFailure:
        status = err.status_code
        error_type = getattr(err, "type", None) or "error"
        detail = getattr(err, "api_message", None) or "no message"
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
        return self._failure(kind, f"{kind} request failed: {type(err).__name__}: {err} (while {where})")

    def _failure(self, kind: str, message: str) -> JudgeFailure:
        return JudgeFailure(kind=kind, message=self._redact(message))

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[REDACTED]")
        return _SECRET_RE.sub("[REDACTED]", text)
