"""What a run will spend on its judge, before it starts: the cold estimate and what the judge cache takes off it.

The cold estimate (:func:`.answers.estimate_answer_layer_cost`) knows no answer yet and counts every request
at its price. A rerun of unchanged items with an unchanged pipeline sends none of them: the judge cache
answers. So the newest stored run of the same workspace, config and mode is read back (its answers and the
chunks it retrieved), and each selected item's judge requests are planned from it exactly as the answer
layer plans them (:func:`.answers.score_answers`, the pool's relevance requests) against the cache alone,
never the judge. An item whose every request is in the cache costs nothing more; any other item (new,
edited, errored, a request not cached) is counted at its cold estimate. What a cap compares is the second
figure (``CostEstimate.to_spend``), and both are printed: ``$0.18 cold, $0.00 after 540 cached``.

The figure assumes the pipeline answers as it did in that run; a pipeline that answers differently sends
the requests of the new answers (the judge's usage at the end says what was spent). With
``--crucible-repeat`` (answers that vary) nothing is taken off; with ``--crucible-judge-repeat`` the repeats
past the first, which never read the cache, still count. This module never imports pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..judge.engine import Judge, JudgeEngine
from ..judge.types import JudgeFailure, JudgeRequest, RelevanceRequest, Verdict

if TYPE_CHECKING:
    from ..golden_set.schema import GoldenItem
    from ..settings import Settings
    from .answers import CostEstimate
    from .custom_metrics import Rubric


class _CacheOnly(Judge):
    """The session judge's identity, answering nothing: every request that reaches it is a cache miss."""

    def __init__(self, judge: Judge):
        self._judge = judge
        self.model, self.prompt_version, self.label = judge.model, judge.prompt_version, judge.label
        self.judges_retention = judge.judges_retention  # the same requests planned as the run's judge is sent
        self.misses = 0

    def prompt_version_for(self, kind: str) -> str:
        return self._judge.prompt_version_for(kind)

    def judge(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        self.misses += len(requests)
        return [JudgeFailure(kind=request.kind, message="not cached") for request in requests]


class _Flat:
    """An embedder for the replay: responseRelevancy's value is never used, only the requests before it."""

    name = "cost-estimate"

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        return np.ones((len(texts), 1))


def previous_results(settings: Settings, item_ids: set[str]) -> list[dict[str, Any]]:
    """The selected items' results in the newest finished run of this workspace, config and mode (read only;
    none when the database holds none, or cannot be read)."""
    from ..store import Store, StoreError
    from ..store.refs import find_runs

    try:
        store = Store.open_read_only(settings.db_path)
    except StoreError:
        return []
    try:
        for run in find_runs(store, workspace=settings.workspace, config_hash=settings.config_hash):
            if run["status"] == "running" or run.get("mode") != settings.mode or run["config_hash"] != settings.config_hash:
                continue
            rows = [row for row in store.results(run["id"], decoded=True) if row["item_id"] in item_ids]
            if rows:
                return rows
        return []
    except Exception:  # an estimate: a database it cannot read takes nothing off
        return []
    finally:
        store.close()


def cached_items(golden: Sequence[GoldenItem], settings: Settings, engine: JudgeEngine,
                 rubrics: Sequence[Rubric] = ()) -> tuple[set[str], int]:
    """The ids of the items whose every judge request the cache holds (their stored answers replayed), and how
    many requests that is."""
    from .answers import AnswerInputs, score_answers

    if settings.judge_cache == "off" or settings.repeat > 1 or not engine.cache:
        return set(), 0
    by_id = {item.id: item for item in golden}
    cached, requests = set(), 0
    for row in previous_results(settings, set(by_id)):
        if row.get("error") or row.get("blocked"):
            continue  # judged differently, or not at all, the next time: counted cold
        item = by_id[row["item_id"]]
        probe = _CacheOnly(engine.judge)
        replay = JudgeEngine(probe, cache_mode="read", cache=engine.cache)
        if settings.label_pool:
            chunks = [chunk for chunk in (row.get("retrieved") or [])[: settings.k] if chunk.get("text")]
            replay.run([RelevanceRequest(question=item.question, chunk=chunk["text"]) for chunk in chunks])
        if settings.judges_answers:
            score = {**row, "question": item.question, "item": item.to_json()}  # the golden item as it is now, edits and all
            score_answers([AnswerInputs.from_score(score, rubrics)], replay, _Flat())
        if probe.misses == 0 and replay.stats.requests:
            cached.add(item.id)
            requests += replay.stats.requests
    return cached, requests


def after_cache(cold: CostEstimate, golden: Sequence[GoldenItem], settings: Settings, engine: JudgeEngine,
                estimate: Any, rubrics: Sequence[Rubric] = ()) -> CostEstimate:
    """``cold`` with what the cache answers taken off (``estimate(items)``: the cold estimate of some items)."""
    cached, requests = cached_items(golden, settings, engine, rubrics)
    if not cached:
        return cold
    cold_part = estimate([item for item in golden if item.id not in cached])
    if settings.judge_repeat > 1:  # the repeats past the first never read the cache
        again = estimate([item for item in golden if item.id in cached])
        share = (settings.judge_repeat - 1) / settings.judge_repeat
        spend = None if cold_part.cost_usd is None or again.cost_usd is None else cold_part.cost_usd + again.cost_usd * share
    else:
        spend = cold_part.cost_usd
    return replace(cold, cached_requests=requests, uncached_cost_usd=spend)
