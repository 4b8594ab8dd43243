"""Golden conversations as they run: the history each turn is called with, and the per-conversation metrics
a run records once its turns are judged.

History (``history=``, passed to a pipeline that takes it: a ``history`` parameter or ``**kwargs``): the
earlier turns as messages, ``[{"role": "user", "content": question}, {"role": "assistant", "content": ...}]``.

- ``live`` (the default): the assistant's messages are the pipeline's own answers to the earlier turns, so
  a turn is called once the turn before it has its answer. Each turn's call is made once per process and
  kept: a turn whose earlier turn did not run in this process (``-k`` selecting one turn, a shard, pytest-xdist
  without ``--dist loadgroup``, a plugin reordering the tests) calls the earlier turns itself, and when one
  of those turns' own tests runs later it takes the answer made for the history instead of calling again, so
  the history and the recorded answer are one call. Answers made only for a history are never recorded: the
  test that needed them warns (``CrucibleWarning``) and names those of its earlier turns that the session did
  not select (or, on a pytest-xdist worker not under ``--dist loadgroup``, that another worker may run). A turn whose earlier turn errored (the
  pipeline raised, or returned a result that does not validate) is not called on a broken history: it is
  stored errored, "turn 1 errored: ...".
- ``replay``: the assistant's messages are the replies the golden file writes (``assistant``), so every turn
  is measured on a fixed history and turns run independently, concurrently too; an earlier turn's error does
  not touch a later turn, and a turn whose earlier turn has no written reply is a collection error
  (``golden_set.conversations.check_replay``).

Per-conversation metrics (``conversation_metrics``): ``conversationSuccess`` (1 when every turn is correct
by its CRAG grade, perfect or acceptable, else 0) and ``turnsToFirstFailure`` (the 1-based number of the
first turn that is not correct, an errored turn included; the number of turns + 1 when none fails; higher is
better for both). They are stored as item metrics of the conversation's last turn (so the summary, the
comparison and every view read them like any metric, one value per conversation), computed when the run
closes from the stored grades (``record_conversation_metrics``), and only for a conversation whose every turn
is in the run and graded: a conversation with a turn not run, or not judged, has none. ``knowledgeRetention``
(higher is better) is the share of the conversation's turns with a stored ``knowledgeRetained`` (turn 2 and
later, answered and judged: the answer contradicts no fact the user stated earlier) that retained, stored on
the last turn too, for a conversation whose every turn is in the run; none when no turn of it was judged.

No pytest here; ``record_conversation_metrics`` works through the store's functions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..metrics.crag import is_correct

if TYPE_CHECKING:
    from ..golden_set.schema import GoldenItem
    from ..store import Store
    from .concurrency import Outcome

# One pipeline call for a turn: (the turn, its history or None when the pipeline takes none) -> its outcome.
TurnCall = Callable[["GoldenItem", "list[dict[str, str]] | None"], "Outcome"]

CONVERSATION_SUCCESS = "conversationSuccess"
TURNS_TO_FIRST_FAILURE = "turnsToFirstFailure"
KNOWLEDGE_RETAINED = "knowledgeRetained"
KNOWLEDGE_RETENTION = "knowledgeRetention"


class EarlierTurnError(Exception):
    """A turn not called: an earlier turn of its conversation errored, so its live history is broken. The
    message is the stored reason ("turn 1 errored: ValueError: ...")."""


class ConversationCalls:
    """The turns of the golden conversations one process calls (thread-safe: the prefetcher's workers and the
    tests share it). ``live``: crucible_conversation = live; ``takes_history``: the pipeline accepts ``history=``."""

    def __init__(self, *, live: bool, takes_history: bool) -> None:
        self.live = live
        self.takes_history = takes_history
        self._kept: dict[str, dict[int, Outcome]] = {}  # conversation -> turn -> the outcome of its (latest) call
        self._for_history: set[str] = set()  # turns called for a later turn's history whose own test has not run
        # test's turn id -> the earlier turns called for its history alone (the warning its test gives)
        self.called_for_history: dict[str, list[str]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def group(self, golden: GoldenItem) -> str | None:
        """The turns that must be called one after another share a group: a conversation's, under live history."""
        return golden.conversation.id if self.live and golden.conversation is not None else None

    def _lock(self, conversation: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(conversation, threading.Lock())

    def outcome(self, golden: GoldenItem, call: TurnCall, *, keep: bool = True) -> Outcome:
        """The outcome of the turn ``golden``: its own call with its history, or the call made for a later turn's
        history (taken once). ``keep``: this call is the turn's answer in later turns' histories (not a repeat)."""
        from .concurrency import Outcome

        turn = golden.conversation
        assert turn is not None  # only turns come here
        with self._lock(turn.id):
            kept = self._kept.setdefault(turn.id, {})
            if keep and golden.id in self._for_history:
                self._for_history.discard(golden.id)
                return kept[turn.turn]
            history = self._history(golden, kept, call)
            if isinstance(history, EarlierTurnError):
                return Outcome(error=history)
            outcome = call(golden, history if self.takes_history else None)
            if keep:
                kept[turn.turn] = outcome
            return outcome

    def _history(self, golden: GoldenItem, kept: dict[int, Outcome], call: TurnCall) -> list[dict[str, str]] | EarlierTurnError:
        turn = golden.conversation
        assert turn is not None
        messages: list[dict[str, str]] = []
        for number, earlier in enumerate(turn.history, start=1):
            if not self.live:
                messages += [{"role": "user", "content": earlier.question}, {"role": "assistant", "content": earlier.assistant or ""}]
                continue
            outcome = kept.get(number)
            if outcome is None:  # not run in this process yet: called now, for this history (and its own test, later)
                item = golden.earlier_turn(number)
                if item is None:  # pragma: no cover - a turn is always loaded with its conversation
                    return EarlierTurnError(f"turn {number} of conversation {turn.id} was not loaded")
                outcome = kept[number] = call(item, list(messages) if self.takes_history else None)
                self._for_history.add(item.id)
                self.called_for_history.setdefault(golden.id, []).append(item.id)
            answer, problem = answer_of(outcome)
            if problem is not None:
                return EarlierTurnError(f"turn {number} errored: {problem}")
            messages += [{"role": "user", "content": earlier.question}, {"role": "assistant", "content": answer}]
        return messages


def answer_of(outcome: Outcome) -> tuple[str, str | None]:
    """(the answer an outcome holds, "" when it holds none; the problem that makes it an error, or None)."""
    from .concurrency import error_text
    from .pipeline import PipelineResultError, coerce_result

    if outcome.error is not None:
        return "", str(outcome.error) if isinstance(outcome.error, EarlierTurnError) else error_text(outcome.error)
    try:
        result = coerce_result(outcome.value, explain_keys=False)
    except PipelineResultError as exc:
        return "", exc.problem
    return result.answer or "", None


def history_warning(turn_id: str, called: Sequence[str]) -> str:
    """What the test of ``turn_id`` says when its history needed calls of earlier turns that did not run here."""
    many = len(called) > 1
    return (f"golden conversation turn {turn_id}: its earlier turn{'s' if many else ''} {', '.join(called)} "
            f"{'are' if many else 'is'} not run by this process (-k or another selection, a shard, pytest-xdist without "
            f"--dist loadgroup), so the pipeline was called for {'them' if many else 'it'} to make the live history; "
            "an answer made for a history alone is not recorded (docs/golden-format.md#conversations)")


# -- per-conversation metrics -------------------------------------------------------------------------------
def conversation_metrics(turns: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{last turn's item id: {conversationSuccess, turnsToFirstFailure, knowledgeRetention}}`` from one run's
    turns, each ``{"item_id", "conversation": {"id", "turn", "turns"}, "crag_grade", "error", "knowledgeRetained"}``.
    A conversation with a turn missing from the run gets nothing; one with a turn neither errored nor graded
    gets no conversationSuccess or turnsToFirstFailure; one with no turn's knowledgeRetained no knowledgeRetention."""
    by_conversation: dict[str, dict[int, Mapping[str, Any]]] = {}
    sizes: dict[str, int] = {}
    for row in turns:
        turn = row.get("conversation") or {}
        if not isinstance(turn, Mapping) or not isinstance(turn.get("id"), str):
            continue
        by_conversation.setdefault(turn["id"], {})[int(turn["turn"])] = row
        sizes[turn["id"]] = int(turn["turns"])
    values: dict[str, dict[str, float]] = {}
    for conversation, rows in by_conversation.items():
        size = sizes[conversation]
        if sorted(rows) != list(range(1, size + 1)):
            continue
        last = rows[size]["item_id"]
        retained = [float(rows[n][KNOWLEDGE_RETAINED]) for n in range(2, size + 1) if rows[n].get(KNOWLEDGE_RETAINED) is not None]
        if retained:
            values.setdefault(last, {})[KNOWLEDGE_RETENTION] = sum(retained) / len(retained)
        correct = []
        for number in range(1, size + 1):
            row = rows[number]
            grade = row.get("crag_grade")
            if row.get("error"):
                correct.append(False)
            elif grade:
                correct.append(is_correct(grade))
            else:
                break
        if len(correct) < size:  # a turn not graded (component mode, a judge that failed): unknown
            continue
        first_failure = next((number for number, ok in enumerate(correct, start=1) if not ok), size + 1)
        values.setdefault(last, {}).update({CONVERSATION_SUCCESS: float(all(correct)), TURNS_TO_FIRST_FAILURE: float(first_failure)})
    return values


def record_conversation_metrics(store: Store, run_id: str) -> int:
    """Compute the run's per-conversation metrics from its stored turns and store them on each conversation's
    last turn; returns how many conversations got them."""
    from ..store.conversations import add_item_metrics, run_turns

    values = conversation_metrics(run_turns(store, run_id))
    add_item_metrics(store, run_id, values)
    return len(values)
