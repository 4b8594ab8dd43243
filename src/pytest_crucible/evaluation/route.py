"""The one route of an item's judging, its strategy chosen once per session (``SessionJudging.route``).

Every item goes the same way: the pipeline is called, then the item is scored (pool labels, then the
answer layer: RAGAS metrics, CRAG grade, assertions, rubrics), then classified. The strategy only says
where and when the judging happens:

- ``now``: in the item's test, right after its pipeline call;
- ``ahead``: the same judging, in the prefetch worker right after the pipeline call, so that a judge that
  waits on a network (``Judge.overlaps``) waits for many items at once; the test reads the score;
- ``batch``: the answer layer is left pending in the test (no error class yet) and the whole run is
  judged in Message Batches at session end (pool labels are still judged in the test).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

NOW, AHEAD, BATCH = "now", "ahead", "batch"


@dataclass(frozen=True)
class AnswerRoute:
    """Where one session judges its items (see the module docstring)."""

    strategy: str = NOW
    judges_answers: bool = False  # False in component mode: no answer to judge

    @property
    def answers_in_test(self) -> bool:
        """Whether an item's answer layer is judged before its verdict (now, or ahead of the test)."""
        return self.judges_answers and self.strategy != BATCH

    @property
    def answers_pending(self) -> bool:
        """Whether an item's answer layer (and so its error class) arrives at session end."""
        return self.strategy == BATCH

    @property
    def ahead(self) -> bool:
        """Whether the prefetch worker judges each item after calling its pipeline."""
        return self.strategy == AHEAD


def choose_route(settings: Settings, overlaps: Callable[[], bool]) -> AnswerRoute:
    """The session's route. ``overlaps``: whether its judge waits on a network, asked only when the
    prefetcher could judge ahead (a judge is used, concurrency > 1, no Message Batches): it builds the judge."""
    if settings.judges_answers and settings.judge_batch:
        strategy = BATCH
    elif settings.uses_judge and not settings.judge_batch and settings.concurrency > 1 and overlaps():
        strategy = AHEAD
    else:
        strategy = NOW
    return AnswerRoute(strategy, settings.judges_answers)
