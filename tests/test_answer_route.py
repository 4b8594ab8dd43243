"""One route of an item's judging, its strategy chosen once per session: now, ahead (the prefetch worker)
or batch (Message Batches at session end). End to end, tests/test_judge_overlap.py and
tests/test_judge_e2e.py hold the judge calls' number and order on each route."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_crucible.evaluation.judging import SessionJudging
from pytest_crucible.evaluation.route import AHEAD, BATCH, NOW, AnswerRoute, choose_route
from pytest_crucible.settings import COMPONENT, SYSTEM, Settings


def settings(**chosen: object) -> Settings:
    return Settings(params={}, resolved={}, config_hash="0" * 64, config_path=None, db_path=Path("unused.db"),
                    **chosen)  # type: ignore[arg-type]


def never_asked() -> bool:
    raise AssertionError("the judge was built to choose a route that cannot be ahead")


@pytest.mark.parametrize(("settings", "overlaps", "strategy"), [
    (settings(), False, NOW),
    (settings(concurrency=4), False, NOW),
    (settings(concurrency=4), True, AHEAD),
    (settings(concurrency=4, judge_batch=True), None, BATCH),
    (settings(judge_batch=True), None, BATCH),
    # component mode has no answer layer: with Message Batches asked, pool labels are still judged in the test
    (settings(mode=COMPONENT, label_pool=True, judge_batch=True, concurrency=4), None, NOW),
    (settings(mode=COMPONENT, label_pool=True, concurrency=4), True, AHEAD),
    (settings(mode=COMPONENT, concurrency=4), None, NOW),
    (settings(mode=SYSTEM, concurrency=1), None, NOW),
])
def test_the_strategy_is_chosen_from_the_settings_and_the_judge(settings: Settings, overlaps: bool | None,
                                                                strategy: str) -> None:
    route = choose_route(settings, overlaps=never_asked if overlaps is None else lambda: overlaps)
    assert route.strategy == strategy
    assert route.ahead == (strategy == AHEAD) and route.answers_pending == (strategy == BATCH)
    assert route.answers_in_test == (settings.judges_answers and strategy != BATCH)


def test_the_session_chooses_once() -> None:
    judging = SessionJudging(settings(judge_batch=True))
    assert judging.route is judging.route and judging.route == AnswerRoute(BATCH, judges_answers=True)
    assert judging.judging_ahead() is None  # Message Batches: nothing judged in the prefetch worker
    offline = SessionJudging(settings(concurrency=4, judge_cache="off"))
    assert offline.judging_ahead() is None and offline.route.strategy == NOW  # the offline judge waits on no network
