"""Claude as the judge, through the official Anthropic SDK.

Every request becomes one Messages call with the versioned prompt of its kind and
a structured-output format (``output_config.format``, the verdict's JSON schema).
What every model judge shares (prompts, schema, parsing, the thread pool, the one
retry of an invalid reply, failures and redaction) is :mod:`.model_judge`'s.

* Direct mode: retries of 408/409/429/5xx (529 included) are the SDK's own, which
  honour ``retry-after-ms`` / ``retry-after``.
* Batch mode (``batch=True``): one Message Batch per ``judge()`` call, polled
  every ``poll_interval`` seconds until it ends; results (JSONL, in no particular
  order) are matched back by ``custom_id``. ``errored``, ``canceled``, ``expired``
  and missing results are failures. The one retry of an invalid reply goes through
  the plain Messages API (a second batch could wait for hours).
* Prompt caching: each request's stable prefix (the system prompt, the few-shot examples of a few-shot
  alignment, a rubric's own text: the same for every request of its kind) is sent as blocks of their own and
  its last block carries ``cache_control: {"type": "ephemeral"}`` (one breakpoint of the API's four; the
  default 5-minute lifetime), in direct calls and batches alike. The cache works on the exact prefix: a
  second request of the kind within the lifetime is billed a cache read of it instead of input; a prefix
  shorter than the model's minimum cacheable length is neither written nor read (plain input, no error).
  Only the blocks change, never the text: the verdicts and prompt versions stay those of the plain prompt.
  ``usage.cache_creation_input_tokens`` and ``cache_read_input_tokens`` are priced at the table's cache
  rates.
* Sampling parameters (temperature, top_p) are never sent: the API's current
  default version rejects them. Verdicts are cached by the engine instead.

The SDK is imported in ``__init__``: importing this module costs nothing, and a
project that never builds an ``AnthropicJudge`` never loads ``anthropic``.
API keys never appear in a failure message (they are redacted defensively, even if
an error body echoes one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .circuit import JudgeUnreachable
from .model_judge import InvalidVerdict, ModelJudge, Refused, batch_parts, parse_verdict, verdict_schema
from .prices import DEFAULT_JUDGE_MODEL
from .prompts import PROMPT_VERSION
from .types import JudgeFailure, JudgeRequest, Usage, Verdict

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicJudge"]

# The Message Batches API takes at most 100,000 requests and 256 MB per batch: a large golden set is
# sent in several batches, kept under both with room to spare (a batch over a limit is refused whole).
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 200 * 1024 * 1024


class AnthropicJudge(ModelJudge):
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

    #: The API bills a prompt-cache write (1.25x input for 5 minutes): the estimate prices it (model_judge).
    cache_writes_billed = True
    #: What progress lines call one of its batches.
    batch_name = "Message Batch"
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
        client: anthropic.Anthropic | None = None,
        prompt_version: str = PROMPT_VERSION,
        max_tokens: int = 4096,
        effort: str | None = None,
    ) -> None:
        import anthropic  # lazy: only a project that uses this judge loads the SDK

        self._sdk = anthropic
        self.batch = batch
        self.label = f"{model} via Anthropic API" + (", Message Batches" if batch else "")
        self.poll_interval = poll_interval
        self.max_tokens = max_tokens
        self.effort = effort
        self._owns_client = client is None
        if client is None:
            # The SDK's own HTTP client, its attempts watched by the circuit breaker (model_judge._http_client).
            client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=max_retries,
                                         **self._http_client(timeout))
        self._client = client
        self.max_retries = int(getattr(client, "max_retries", max_retries))
        self._setup(model, prompt_version=prompt_version, max_concurrency=max_concurrency,
                    secrets=(api_key, getattr(client, "api_key", None), getattr(client, "auth_token", None)))
        # Called as on_progress(batch_id, done, total) while a Message Batch is polled.
        self.on_progress: Callable[[str, int, int], None] | None = None

    def __repr__(self) -> str:
        return f"AnthropicJudge(model={self.model!r}, batch={self.batch}, prompt_version={self.prompt_version!r})"

    # -- one request ----------------------------------------------------------------------------
    def _params(self, request: JudgeRequest) -> dict[str, Any]:
        system_texts, parts = self.prompt_parts(request)
        system: list[dict[str, Any]] = [{"type": "text", "text": text} for text in system_texts]
        user: list[dict[str, Any]] = [{"type": "text", "text": text} for text in (parts.stable, parts.item) if text]
        if self.prompt_cache:
            # One breakpoint, on the stable prefix's last block: a rubric's text, else the system's last block.
            (user[0] if parts.stable else system[-1])["cache_control"] = {"type": "ephemeral"}
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

    def _send(self, params: dict[str, Any]) -> Any:
        return self._client.messages.create(**params)

    def _verdict_from_reply(self, request: JudgeRequest, message: Any) -> Verdict:
        stop_reason = getattr(message, "stop_reason", None)
        if stop_reason == "refusal":
            details = getattr(message, "stop_details", None)
            category = getattr(details, "category", None) or "unspecified"
            explanation = getattr(details, "explanation", None) or "no explanation"
            raise Refused(f"refusal ({category}): {explanation}")
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
        params = [self._params(request) for request in requests]
        return [verdict for lo, hi in batch_parts(params, MAX_BATCH_REQUESTS, MAX_BATCH_BYTES)
                for verdict in self._judge_one_batch(requests[lo:hi], params[lo:hi])]

    def _judge_one_batch(self, requests: list[JudgeRequest], params: list[dict[str, Any]]) -> list[Verdict | JudgeFailure]:
        sdk, batches = self._sdk, self._client.messages.batches
        results: list[Verdict | JudgeFailure | None] = [None] * len(requests)
        ids = {f"{request.kind}-{index:06d}": index for index, request in enumerate(requests)}
        try:
            batch = batches.create(requests=[{"custom_id": cid, "params": params[i]} for cid, i in ids.items()])
        except (sdk.APIStatusError, sdk.APIConnectionError, JudgeUnreachable) as err:
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
                        results[index] = self._verdict_from_reply(requests[index], outcome.message)
                    except Refused as err:
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
        except Exception as err:
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
    def _reply_usage(self, message: Any, *, batch: bool) -> Usage | None:
        usage = getattr(message, "usage", None)
        if usage is None:
            return None
        input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        cache_read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        cache_write = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        breakdown = getattr(usage, "cache_creation", None)
        write_1h = int(getattr(breakdown, "ephemeral_1h_input_tokens", 0) or 0) if breakdown is not None else 0
        write_1h = min(write_1h, cache_write)
        cost = self.cost(input_tokens, output_tokens, batch=batch, cache_read_tokens=cache_read,
                         cache_write_tokens=cache_write - write_1h, cache_write_1h_tokens=write_1h)
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            requests=1,
            cost_usd=cost or 0.0,
        )
