"""The one judge engine: every judge-based metric goes through :class:`JudgeEngine`.

A :class:`Judge` answers a list of typed requests with verdicts (or failures), in
order. The engine puts a cache in front of it (key: sha256 of judge model, prompt
version, request kind and canonical request), stamps every verdict, counts cache
hits, calls and usage, and collects new cache entries as plain rows so that the
process that owns the database writes them (workers never write SQLite).

This module never imports pytest.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .types import VERDICT_TYPES, JudgeFailure, JudgeRequest, Usage, Verdict

#: Counters a judge may report (:meth:`Judge.counters`), kept in the run's judge statistics when non-zero.
JUDGE_COUNTERS = ("jsonMode", "directInsteadOfBatch", "notSent")


class Judge(ABC):
    """The one judge protocol: everything the engine, the session's judging and the CLI ask of a judge.

    Every judge implements it: the offline heuristics (``judge/lexical*.py``), the model judges
    (``judge/model_judge.py`` and its Claude and OpenAI-compatible subclasses) and a judge of your own,
    which :class:`~pytest_crucible.judge.custom_judge.CustomJudge` wraps (docs/judges.md: your class says
    ``name`` and ``version``; they become its :attr:`model` and :attr:`prompt_version`).

    * **Identity**: :attr:`model` and :attr:`prompt_version` (per request kind:
      :meth:`prompt_version_for`) are what every verdict, cache key and run row stores; runs judged under
      different identities are never compared.
    * **Judging**: :meth:`judge` answers a list of requests, one verdict or failure each, in order.
    * **Batches**: a judge with :attr:`batch` true sends its requests as batches (cheaper, answered
      later); the engine then passes ``now=True`` when the caller cannot wait, and the judge answers
      through direct calls. A judge without batches is never passed ``now``. While a batch is polled
      the judge reports ``on_progress(batch_id, done, total)`` when the session set it.
    * **What the session reads**: :attr:`label`, :attr:`paid`, :attr:`grades_rubrics`, :attr:`judges_retention`, :attr:`overlaps`,
      :meth:`usage`, :meth:`counters`, and :meth:`close` at the end.
    """

    #: The exact model id stored on every verdict (e.g. "claude-haiku-5-5", "lexical-v1").
    model: str
    #: Version of the prompts (or heuristics) that produced the verdicts.
    prompt_version: str
    #: What outputs print, e.g. "lexical-v1 (offline heuristic)".
    label: str
    #: True when requests cost money (a cost estimate is printed before a run).
    paid: bool = False
    #: True when the judge can grade a user-written rubric (a model can; the offline heuristics cannot).
    grades_rubrics: bool = False
    #: True when the judge answers ``retention`` requests (knowledge retention in golden conversations); a judge
    #: that does not is never sent one: the metric is left unscored and the session says so once.
    judges_retention: bool = False
    #: True when its requests wait on a network and it may be called from many threads at once, bounding its own
    #: requests in flight: the session then judges the items ahead of their tests, several items at a time. The
    #: offline judges compute (threads would only share one core) and a judge of your own is called one call at
    #: a time (its max_concurrency), so they say False.
    overlaps: bool = False
    #: True when :meth:`judge` sends batches (``--crucible-judge-batch``): verdicts at session end, unless ``now``.
    batch: bool = False
    #: What a batch is called in progress lines (e.g. "Message Batch").
    batch_name: str = "batch"
    #: Set by the session to watch batches: called as ``on_progress(batch_id, done, total)`` while one is polled.
    on_progress: Callable[[str, int, int], None] | None = None
    #: Where a model judge sends its requests (``host[:port]``), named when it could not reach it (``notSent``).
    endpoint: str | None = None

    @abstractmethod
    def judge(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        """One verdict (or failure) per request, in the same order.

        ``now`` (passed only to a judge with :attr:`batch` true): the caller needs the verdicts before it
        goes on, so answer through direct calls instead of a batch."""

    def prompt_version_for(self, kind: str) -> str:
        """The prompt version of one request kind (a judge may version some prompts apart)."""
        return self.prompt_version

    def usage(self) -> Usage:
        """Tokens and cost spent so far (zero for offline judges)."""
        return Usage()

    def counters(self) -> dict[str, int]:
        """How some requests were judged, when it matters to a reader (e.g. ``jsonMode``: requests answered
        in JSON mode because the server takes no schema; ``notSent``: refused, the host unreachable); added to
        the run's judge statistics."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


@dataclass
class EngineStats:
    requests: int = 0
    cache_hits: int = 0
    judged: int = 0
    failures: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "judged": self.judged, "failures": self.failures}


@dataclass
class JudgeEngine:
    judge: Judge
    cache_mode: str = "readwrite"
    # key -> verdict JSON; preloaded from the store, grown as verdicts arrive.
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: EngineStats = field(default_factory=EngineStats)
    # New cache rows not yet written to the store (drained by the owner of the database).
    pending_cache_rows: list[dict[str, Any]] = field(default_factory=list)
    # --crucible-judge-repeat: every request is judged this many times; the repeats past the first go to the
    # judge directly (never the cache) and are compared with the verdict used: kind -> [all agreed, requests].
    judge_repeat: int = 1
    agreement: dict[str, list[int]] = field(default_factory=dict)
    # Requests of an optional kind never sent because the judge does not answer that kind: kind -> count.
    not_asked: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def model(self) -> str:
        return self.judge.model

    @property
    def prompt_version(self) -> str:
        return self.judge.prompt_version

    def answers_kind(self, kind: str) -> bool:
        """Whether the judge answers an optional request kind (``retention``); a request it does not answer is
        counted in :attr:`not_asked` (what the session's note reports) and the caller leaves its metric out."""
        if kind != "retention" or self.judge.judges_retention:
            return True
        with self._lock:
            self.not_asked[kind] = self.not_asked.get(kind, 0) + 1
        return False

    def load_cache(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.cache[row["key"]] = json.loads(row["verdict"]) if isinstance(row["verdict"], str) else dict(row["verdict"])

    def run(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        """Judge a batch of requests, serving what it can from the cache.

        ``now``: the caller needs the verdicts before it goes on (pool labelling, inside an item's
        test), so a batch judge answers them through its direct API instead of a Message Batch."""
        results: list[Verdict | JudgeFailure | None] = [None] * len(requests)
        misses: list[int] = []
        keys = [request.cache_key(self.model, self.judge.prompt_version_for(request.kind)) for request in requests]
        with self._lock:
            self.stats.requests += len(requests)
            for index, (request, key) in enumerate(zip(requests, keys)):
                cached = self.cache.get(key) if self.cache_mode != "off" else None
                if cached is not None:
                    results[index] = VERDICT_TYPES[request.kind].model_validate(cached)
                    self.stats.cache_hits += 1
                else:
                    misses.append(index)
        # Identical requests in one call (e.g. an answer that restates the reference: the same claims
        # request twice) are sent once; the copies are served like cache hits.
        first: dict[str, int] = {}
        for index in misses:
            first.setdefault(keys[index], index)
        unique = list(first.values())
        if unique:
            todo = [requests[i] for i in unique]
            answered = self._ask(todo, now)
            if len(answered) != len(unique):
                raise RuntimeError(f"judge {self.model} returned {len(answered)} verdicts for {len(unique)} requests")
            with self._lock:
                for index, verdict in zip(unique, answered):
                    if isinstance(verdict, JudgeFailure):
                        self.stats.failures += 1
                    else:
                        verdict.judge_model = self.model
                        verdict.prompt_version = self.judge.prompt_version_for(requests[index].kind)
                        self.stats.judged += 1
                        self._remember(keys[index], requests[index], verdict)
                    results[index] = verdict
                for index in misses:
                    if results[index] is None:
                        original = results[first[keys[index]]]
                        if isinstance(original, JudgeFailure):
                            self.stats.failures += 1
                            results[index] = original
                        elif original is not None:  # always: the first copy was answered above
                            self.stats.cache_hits += 1
                            results[index] = original.model_copy(deep=True)
        if self.judge_repeat > 1 and requests:
            self._judge_again(requests, results, now)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def _ask(self, requests: Sequence[JudgeRequest], now: bool) -> list[Verdict | JudgeFailure]:
        # ``now`` only reaches a batch judge: a judge without batches (e.g. a plugin's Judge subclass written
        # before the keyword existed) is called as it always was.
        return self.judge.judge(requests, now=True) if now and self.judge.batch else self.judge.judge(requests)

    def _judge_again(self, requests: Sequence[JudgeRequest], used: list[Verdict | JudgeFailure], now: bool) -> None:
        """Self-agreement: judge every request ``judge_repeat - 1`` more times, past the cache, and count per
        kind the requests whose every verdict equals the one used (a failure never agrees)."""
        def content(verdict: Verdict | JudgeFailure) -> Any:
            if isinstance(verdict, JudgeFailure):
                return None
            return verdict.model_dump(mode="json", exclude={"judge_model", "prompt_version"})

        agree = [content(verdict) is not None for verdict in used]
        wanted = [content(verdict) for verdict in used]
        for _ in range(self.judge_repeat - 1):
            again = self._ask(list(requests), now)
            with self._lock:
                self.stats.judged += sum(1 for verdict in again if not isinstance(verdict, JudgeFailure))
                self.stats.failures += sum(1 for verdict in again if isinstance(verdict, JudgeFailure))
            for index, verdict in enumerate(again):
                agree[index] = agree[index] and content(verdict) == wanted[index]
        with self._lock:
            for request, agreed in zip(requests, agree):
                counts = self.agreement.setdefault(request.kind, [0, 0])
                counts[0] += int(agreed)
                counts[1] += 1

    def _remember(self, key: str, request: JudgeRequest, verdict: Verdict) -> None:
        data = verdict.model_dump(mode="json")
        if self.cache_mode != "off":
            self.cache[key] = data
        if self.cache_mode == "readwrite":
            self.pending_cache_rows.append(
                {
                    "key": key,
                    "judge_model": self.model,
                    "prompt_version": verdict.prompt_version,
                    "kind": request.kind,
                    "request": json.dumps(request.payload(), sort_keys=True),
                    "verdict": json.dumps(data, sort_keys=True),
                }
            )

    def drain_cache_rows(self) -> list[dict[str, Any]]:
        with self._lock:
            rows, self.pending_cache_rows = self.pending_cache_rows, []
        return rows
