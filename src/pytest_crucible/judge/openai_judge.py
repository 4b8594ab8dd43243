"""Any OpenAI-compatible model as the judge (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM, llama.cpp's
server), through the official ``openai`` SDK (the ``openai`` extra).

The same versioned prompts, verdict types, thread pool, retry of an invalid reply and failures as the
Claude judge (:mod:`.model_judge`); what differs is the call:

* **Structured output.** Each request asks for the verdict's JSON schema through ``response_format``
  (``json_schema``, strict). Many self-hosted servers do not take a schema: the first HTTP 400 that
  names ``response_format`` or the schema switches this judge to **JSON mode** (``json_object``, the
  schema written into the system prompt), and the reply is validated just the same; the request that
  met the 400 is sent again at once. The mode is counted per request in the run's judge statistics
  (``jsonMode``) and shown in the summary, so a reader knows how the verdicts were obtained.
* **Identity.** Verdicts and runs record ``openai:<model>`` for api.openai.com and
  ``openai:<model>@<host>`` for any other server: the same model name served by two hosts (an
  official model and a local quantised copy) is two judges, never compared as one.
* **Batch API** (``batch=True``): one JSONL file per batch (``files.create``, purpose ``batch``), a
  batch on ``/v1/chat/completions``, polled until it ends, results matched back by ``custom_id``. A
  server that has no Batch API (HTTP 404/405/501 on the upload: vLLM's and Ollama's servers) is judged
  by direct calls instead, counted (``directInsteadOfBatch``) and said once.
* **Key.** The SDK reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` itself; the key never passes
  through this code, and is redacted from any failure message that echoes it.

Sampling parameters are not sent (reasoning models reject a temperature); verdicts are cached instead.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from .circuit import JudgeUnreachable
from .model_judge import InvalidVerdict, ModelJudge, Refused, batch_parts, parse_verdict, schema_text, verdict_schema
from .prompts import PROMPT_VERSION
from .types import JudgeFailure, JudgeRequest, Usage, Verdict

if TYPE_CHECKING:
    import openai

__all__ = ["OFFICIAL_HOST", "OpenAIJudge", "judge_identity"]

OFFICIAL_HOST = "api.openai.com"
# OpenAI's Batch API takes at most 50,000 requests and a 200 MB input file per batch.
MAX_BATCH_REQUESTS = 50_000
MAX_BATCH_BYTES = 190 * 1024 * 1024
_ENDED = ("completed", "failed", "expired", "cancelled")
# An HTTP 400 whose message names one of these is a server that does not take a JSON schema.
_SCHEMA_REFUSAL = ("response_format", "json_schema", "schema", "structured output", "guided")
_JSON_MODE_INSTRUCTION = ("\n\nAnswer with one JSON object and nothing else. It must match this JSON schema "
                          "(every property required, no others):\n{schema}")


def judge_identity(model: str, base_url: str | None) -> str:
    """What verdicts and runs record for an OpenAI-compatible judge: the provider, the model and, for any
    server but OpenAI's own, its host (``openai:llama3.1@gpu-box``)."""
    host = urlparse(base_url).hostname if base_url else None
    return f"openai:{model}" if not host or host == OFFICIAL_HOST else f"openai:{model}@{host}"


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` of an SDK object, or ``obj[name]`` of the plain dict a batch result holds."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


class OpenAIJudge(ModelJudge):
    """A model behind an OpenAI-compatible Chat Completions API.

    ``api_key`` / ``base_url`` go to ``openai.OpenAI`` (which falls back to ``OPENAI_API_KEY`` /
    ``OPENAI_BASE_URL``), or pass a ready ``client`` (then ``max_retries`` and ``timeout`` are the
    client's, and ``close()`` leaves it open). ``max_tokens`` caps each reply when given (sent as
    ``max_completion_tokens``; left to the server otherwise).
    """

    #: What progress lines call one of its batches.
    batch_name = "batch"
    #: Give up on a batch that has not ended after this many seconds (the API ends every batch within 24 hours).
    max_batch_wait = 25 * 3600.0

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_concurrency: int = 4,
        batch: bool = False,
        max_retries: int = 4,
        timeout: float = 60.0,
        poll_interval: float = 2.0,
        client: openai.OpenAI | None = None,
        prompt_version: str = PROMPT_VERSION,
        max_tokens: int | None = None,
        price_per_mtok: tuple[float, float] | None = None,
    ) -> None:
        import openai  # lazy: only a project that uses this judge loads the SDK

        self._sdk = openai
        self.model_name = model
        self.batch = batch
        self.poll_interval = poll_interval
        self.max_tokens = max_tokens
        self.price_override = price_per_mtok
        self._owns_client = client is None
        if client is None:
            # The SDK's own HTTP client, its attempts watched by the circuit breaker (model_judge._http_client).
            client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries, **self._http_client(timeout))
        self._client = client
        self.max_retries = int(getattr(client, "max_retries", max_retries))
        self.base_url = str(getattr(client, "base_url", "") or "")
        self.host = urlparse(self.base_url).hostname or OFFICIAL_HOST
        self._setup(judge_identity(model, self.base_url), prompt_version=prompt_version, max_concurrency=max_concurrency,
                    secrets=(api_key, getattr(client, "api_key", None)))
        where = "OpenAI API" if self.host == OFFICIAL_HOST else f"OpenAI-compatible API at {self.host}"
        self.label = f"{model} via {where}" + (", Batch API" if batch else "")
        #: "json_schema" until a server refuses schemas, then "json_object" (JSON mode) for the rest of the run.
        self.structured_output = "json_schema"
        self._mode_lock = threading.Lock()
        self._counters = {"jsonMode": 0, "directInsteadOfBatch": 0}
        self.batch_note: str | None = None  # why batch requests went direct, said once
        self.on_progress: Callable[[str, int, int], None] | None = None

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self.model!r}, batch={self.batch}, prompt_version={self.prompt_version!r})"

    def price_model(self) -> str:
        return self.model_name

    def counters(self) -> dict[str, int]:
        with self._lock:
            return {**super().counters(), **{name: value for name, value in self._counters.items() if value}}

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n

    # -- one request ----------------------------------------------------------------------------
    def _params(self, request: JudgeRequest) -> dict[str, Any]:
        # The stable prefix first (the system prompt, any few-shot examples): OpenAI caches a prompt's repeated
        # prefix by itself, without markers.
        system_texts, parts = self.prompt_parts(request)
        system, user = "\n\n".join(system_texts), parts.user
        if self.structured_output == "json_schema":
            response_format: dict[str, Any] = {"type": "json_schema", "json_schema": {
                "name": f"{request.kind}_verdict", "schema": verdict_schema(request.kind), "strict": True}}
        else:
            system += _JSON_MODE_INSTRUCTION.format(schema=schema_text(request.kind))
            response_format = {"type": "json_object"}
        params: dict[str, Any] = {"model": self.model_name, "response_format": response_format,
                                  "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        if self.max_tokens is not None:
            params["max_completion_tokens"] = self.max_tokens
        return params

    def _send(self, params: dict[str, Any]) -> Any:
        if params["response_format"]["type"] == "json_schema" and self.structured_output == "json_object":
            params = self._json_mode(params)  # built before another request found the server takes no schema
        try:
            reply = self._client.chat.completions.create(**params)
        except self._sdk.BadRequestError as err:
            if params["response_format"]["type"] != "json_schema" or not _refuses_schema(err):
                raise
            self._fall_back_to_json_mode()
            params = self._json_mode(params)
            reply = self._client.chat.completions.create(**params)
        return reply

    def _judge_one(self, request: JudgeRequest, attempts: int, problem: str) -> Verdict | JudgeFailure:
        verdict = super()._judge_one(request, attempts, problem)
        if self.structured_output == "json_object":  # counted once per request, however many calls it took
            self._count("jsonMode")
        return verdict

    def _fall_back_to_json_mode(self) -> None:
        with self._mode_lock:
            self.structured_output = "json_object"

    def _json_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        """The same request in JSON mode: the schema moves from ``response_format`` into the system prompt."""
        schema = params["response_format"]["json_schema"]["schema"]
        system, *rest = params["messages"]
        system = {**system, "content": system["content"] + _JSON_MODE_INSTRUCTION.format(schema=json.dumps(schema))}
        return {**params, "response_format": {"type": "json_object"}, "messages": [system, *rest]}

    def _verdict_from_reply(self, request: JudgeRequest, reply: Any) -> Verdict:
        choices = _field(reply, "choices") or []
        if not choices:
            raise InvalidVerdict("the reply has no choices")
        message, finish = _field(choices[0], "message"), _field(choices[0], "finish_reason")
        refusal = _field(message, "refusal") if message is not None else None
        if refusal:
            raise Refused(f"refusal: {refusal}")
        text = (_field(message, "content") if message is not None else None) or ""
        if not text.strip():
            raise InvalidVerdict(f"the reply has no text (finish_reason={finish})")
        try:
            return parse_verdict(request, text)
        except InvalidVerdict as err:
            if finish == "length":
                raise InvalidVerdict(f"{err} (output cut off at the token limit)") from None
            raise

    def _reply_usage(self, reply: Any, *, batch: bool) -> Usage | None:
        usage = _field(reply, "usage")
        if usage is None:
            return None
        prompt = int(_field(usage, "prompt_tokens") or 0)
        output = int(_field(usage, "completion_tokens") or 0)
        details = _field(usage, "prompt_tokens_details")
        cached = min(prompt, int((_field(details, "cached_tokens") if details is not None else 0) or 0))
        cost = self.cost(prompt - cached, output, batch=batch, cache_read_tokens=cached)
        return Usage(input_tokens=prompt - cached, output_tokens=output, cache_read_tokens=cached, requests=1,
                     cost_usd=cost or 0.0)

    # -- the Batch API --------------------------------------------------------------------------
    def _judge_batch(self, requests: list[JudgeRequest]) -> list[Verdict | JudgeFailure]:
        if self.batch_note is not None:  # this server has no Batch API: direct calls, counted
            self._count("directInsteadOfBatch", len(requests))
            return self._run_direct(requests)
        params = [self._params(request) for request in requests]
        out: list[Verdict | JudgeFailure] = []
        for lo, hi in batch_parts(params, MAX_BATCH_REQUESTS, MAX_BATCH_BYTES):
            out.extend(self._judge_one_batch(requests[lo:hi], params[lo:hi]))
        return out

    def _judge_one_batch(self, requests: list[JudgeRequest], params: list[dict[str, Any]]) -> list[Verdict | JudgeFailure]:
        sdk, client = self._sdk, self._client
        ids = {f"{request.kind}-{index:06d}": index for index, request in enumerate(requests)}
        lines = "".join(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": params[i]}) + "\n"
                        for cid, i in ids.items())
        try:
            upload = client.files.create(file=("crucible-judge-batch.jsonl", lines.encode("utf-8")), purpose="batch")
            batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
        except sdk.APIStatusError as err:
            if err.status_code in (404, 405, 501):
                self.batch_note = (f"the server at {self.host} has no Batch API (HTTP {err.status_code}): "
                                   "judged by direct calls at the standard price")
                self._count("directInsteadOfBatch", len(requests))
                return self._run_direct(requests)
            return [self._api_failure(r.kind, err, "creating the batch") for r in requests]
        except (sdk.APIConnectionError, JudgeUnreachable) as err:
            return [self._api_failure(r.kind, err, "creating the batch") for r in requests]
        results: list[Verdict | JudgeFailure | None] = [None] * len(requests)
        invalid: list[tuple[int, str]] = []
        schema_refused: list[int] = []
        deadline = time.monotonic() + self.max_batch_wait
        try:
            self._report_progress(batch, len(requests))
            while batch.status not in _ENDED:
                if time.monotonic() > deadline:
                    message = f"batch {batch.id} did not end within {self.max_batch_wait:.0f}s"
                    return [self._failure(r.kind, f"{r.kind} request failed: {message}") for r in requests]
                time.sleep(self.poll_interval)
                batch = client.batches.retrieve(batch.id)
                self._report_progress(batch, len(requests))
            if batch.status != "completed":
                why = "; ".join(str(_field(e, "message")) for e in (_field(_field(batch, "errors"), "data") or [])) or "no reason given"
                return [self._failure(r.kind, f"{r.kind} request failed: batch {batch.id} ended {batch.status} ({why})")
                        for r in requests]
            for file_id in (batch.output_file_id, batch.error_file_id):
                if not file_id:
                    continue
                for raw in client.files.content(file_id).text.splitlines():
                    if not raw.strip():
                        continue
                    line = json.loads(raw)
                    index = ids.get(line.get("custom_id"))
                    if index is None or results[index] is not None:
                        continue
                    kind, response = requests[index].kind, line.get("response") or {}
                    status, body = response.get("status_code"), response.get("body")
                    if status == 200 and isinstance(body, dict):
                        self._record_usage(body, batch=True)
                        try:
                            results[index] = self._verdict_from_reply(requests[index], body)
                        except Refused as err:
                            results[index] = self._failure(kind, f"judge refused the {kind} request: {err}")
                        except InvalidVerdict as err:
                            invalid.append((index, str(err)))  # retried directly, and counted there
                            continue
                        if params[index]["response_format"]["type"] == "json_object":
                            self._count("jsonMode")
                    elif status == 400 and _refuses_schema(body):
                        schema_refused.append(index)
                        results[index] = self._failure(kind, "schema refused")  # replaced below
                    else:
                        error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
                        reason = f"{error.get('code') or status or 'error'}: {error.get('message') or 'no message'}"
                        results[index] = self._failure(kind, f"{kind} request errored in batch {batch.id}: {reason}")
        except Exception as err:
            return [r if r is not None else self._api_failure(q.kind, err, f"reading batch {batch.id}") for r, q in zip(results, requests)]
        if schema_refused:  # the server takes no schema: JSON mode from now on, these requests again
            self._fall_back_to_json_mode()
            for index, verdict in zip(schema_refused, self._run_direct([requests[i] for i in schema_refused])):
                results[index] = verdict
        if invalid:  # the one retry, through a direct call (standard price)
            retried = self._run_direct([requests[i] for i, _ in invalid], attempts=1, first_problems=[p for _, p in invalid])
            for (index, _), verdict in zip(invalid, retried):
                results[index] = verdict
        return [r if r is not None else self._failure(q.kind, f"{q.kind} request has no result in batch {batch.id}")
                for r, q in zip(results, requests)]

    def _report_progress(self, batch: Any, total: int) -> None:
        if self.on_progress is None:
            return
        counts = _field(batch, "request_counts")
        done = total if batch.status in _ENDED else int((_field(counts, "completed") or 0) + (_field(counts, "failed") or 0))
        self.on_progress(batch.id, min(done, total), total)


def _refuses_schema(err_or_body: Any) -> bool:
    """An HTTP 400 (an SDK error, or a batch line's error body) that says the server does not take the schema."""
    body = getattr(err_or_body, "body", err_or_body)
    text = json.dumps(body).lower() if isinstance(body, (dict, list)) else str(body or "").lower()
    text += " " + str(getattr(err_or_body, "message", "")).lower()
    return any(word in text for word in _SCHEMA_REFUSAL)
