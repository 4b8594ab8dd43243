"""A judge written in Python by the team (docs/judges.md): their own model client, a rules engine, anything.

The team's class speaks the judge protocol every built-in judge speaks: ``judge(requests)`` takes a list
of typed requests (:mod:`pytest_crucible.judge.types`) and returns one verdict per request, in order. A
class that judges one request at a time may define ``judge_one(request)`` instead; an exception there
fails that request only.
Its ``name`` and ``version`` are its identity: every verdict and run records them, the cache is keyed by
them (a new ``version`` re-judges everything), and a run judged by it is never compared with a run
judged by another judge. :class:`CustomJudge` wraps it so that the engine treats it like any judge:

* a verdict may be the verdict model itself or a plain dict, validated into the request kind's verdict
  type and checked like a model's reply (one ``supported`` per claim, a rubric score on its scale);
* whatever goes wrong (it raises, returns the wrong number of verdicts, a verdict that does not fit)
  becomes a :class:`JudgeFailure` naming the judge, the request kind and the reason: the item is an
  error, never a silent pass;
* ``max_concurrency`` (optional, default 1): that many slices of a call's requests (or, with
  ``judge_one``, that many requests) are judged on threads at once.

This module never imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from .engine import Judge
from .model_judge import InvalidVerdict, check_verdict
from .types import VERDICT_TYPES, JudgeFailure, JudgeRequest, Usage, Verdict

__all__ = ["CustomJudge", "CustomJudgeError"]


class CustomJudgeError(ValueError):
    """The team's judge cannot be used as written; ``str()`` names what to fix."""


class CustomJudge(Judge):
    def __init__(self, impl: Any, source: str, *, reserved: Sequence[str] = ()) -> None:
        self.impl, self.source = impl, source
        for field in ("name", "version"):
            value = getattr(impl, field, None)
            if not isinstance(value, str) or not value.strip():
                raise CustomJudgeError(f"judge {source}: '{field}' must be a non-empty string, got {value!r}\n"
                                       f"HINT: set it on the class, e.g. {field} = "
                                       f"{'acme-judge' if field == 'name' else '2026-12-01'!r}: it is the judge's identity")
        name = impl.name.strip()
        if name in reserved or name.startswith(("openai:", "claude-")):
            raise CustomJudgeError(f"judge {source}: name {impl.name!r} is a built-in judge's\n"
                                   "HINT: give your judge its own name, so its verdicts are never mistaken for another's")
        self._one: Callable[[JudgeRequest], Any] | None = getattr(impl, "judge_one", None) if not callable(getattr(impl, "judge", None)) else None
        if not callable(getattr(impl, "judge", None)) and not callable(self._one):
            raise CustomJudgeError(f"judge {source}: it has no judge(requests) method (nor judge_one(request))\n"
                                   "HINT: def judge(self, requests): return [one verdict per request, in order]")
        self.model = impl.name.strip()
        self.prompt_version = impl.version.strip()
        self.label = f"{self.model} (your judge, {source})"  # the version shows as its prompts
        self.grades_rubrics = bool(getattr(impl, "grades_rubrics", False))
        # retention requests (golden conversations) are sent only to a judge that says it answers them, so that a
        # judge written before the kind existed is never handed a request it does not know (the metric is left out)
        self.judges_retention = bool(getattr(impl, "judges_retention", False))
        concurrency = getattr(impl, "max_concurrency", 1)
        if concurrency is None:
            concurrency = 1
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise CustomJudgeError(f"judge {source}: 'max_concurrency' must be a whole number of at least 1, got "
                                   f"{concurrency!r}\nHINT: the requests judged at once, e.g. max_concurrency = 4")
        self.max_concurrency = concurrency

    def __repr__(self) -> str:
        return f"CustomJudge({self.model!r}, version={self.prompt_version!r}, source={self.source!r})"

    def judge(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        """Your judge's verdicts, checked (it has no batches: ``now`` changes nothing and is not passed on)."""
        requests = list(requests)
        if not requests:
            return []
        if self._one is not None:
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests)),
                                    thread_name_prefix="crucible-custom-judge") as pool:
                return list(pool.map(self._judge_single, requests))
        slices = max(1, min(self.max_concurrency, len(requests)))
        size = -(-len(requests) // slices)
        parts = [requests[i:i + size] for i in range(0, len(requests), size)]
        if len(parts) == 1:
            return self._judge_part(parts[0])
        with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="crucible-custom-judge") as pool:
            return [verdict for part in pool.map(self._judge_part, parts) for verdict in part]

    def _judge_part(self, requests: list[JudgeRequest]) -> list[Verdict | JudgeFailure]:
        try:
            answered = list(self.impl.judge(list(requests)))
        except Exception as err:
            return [self._failure(r.kind, f"raised {type(err).__name__}: {err}") for r in requests]
        if len(answered) != len(requests):
            return [self._failure(r.kind, f"returned {len(answered)} verdicts for {len(requests)} requests") for r in requests]
        return [self._verdict(request, item) for request, item in zip(requests, answered)]

    def _judge_single(self, request: JudgeRequest) -> Verdict | JudgeFailure:
        try:
            assert self._one is not None  # only judge_one judges call this
            return self._verdict(request, self._one(request))
        except Exception as err:
            return self._failure(request.kind, f"raised {type(err).__name__}: {err}")

    def _verdict(self, request: JudgeRequest, item: Any) -> Verdict | JudgeFailure:
        if isinstance(item, JudgeFailure):
            return JudgeFailure(kind=request.kind, message=f"judge {self.model}: {item.message}")
        verdict_type = VERDICT_TYPES[request.kind]
        try:
            if isinstance(item, Verdict):
                if not isinstance(item, verdict_type):
                    raise InvalidVerdict(f"returned a {type(item).__name__} for a {request.kind} request "
                                         f"(expected {verdict_type.__name__})")
                verdict = item.model_copy(deep=True)
            elif isinstance(item, dict):
                verdict = verdict_type.model_validate(item)
            else:
                raise InvalidVerdict(f"returned {type(item).__name__} for a {request.kind} request "
                                     f"(expected a {verdict_type.__name__} or a dict)")
            check_verdict(request, verdict)
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                                 for e in err.errors(include_url=False))
            return self._failure(request.kind, f"{request.kind} verdict does not fit {verdict_type.__name__}: {problems}")
        except InvalidVerdict as err:
            return self._failure(request.kind, str(err))
        return verdict

    def usage(self) -> Usage:
        spent = getattr(self.impl, "usage", None)
        value = spent() if callable(spent) else None
        if isinstance(value, Usage):
            return value.model_copy()
        return Usage.model_validate(value) if isinstance(value, dict) else Usage()

    def close(self) -> None:
        closer = getattr(self.impl, "close", None)
        if callable(closer):
            closer()

    def _failure(self, kind: str, message: str) -> JudgeFailure:
        return JudgeFailure(kind=kind, message=f"judge {self.model} ({self.source}): {message}")
