"""The crucible section of a pytest session's terminal summary: the run's lines (metrics, faults, judge
errors, what was lost or stopped), then the gate's; under -q one line, plus every alert.

A view: it reads what the session decided at its end (the run, its status, the one ``GateResult``) and
the stored run; it decides nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store.schema import RunStatus
from ..verdict.gate import PASSED, SKIPPED
from .lines import Level, SummaryLine, alert, alerts, plain

if TYPE_CHECKING:
    from ..session import CrucibleSession
    from ..verdict.runs import StoredMeans


def session_summary_lines(session: CrucibleSession, verbose: int = 0) -> list[SummaryLine]:
    """``verbose < 0`` (-q) keeps one line, plus every warning, fault and gate failure (those are never hidden).
    The usage errors come last, with their HINT, always."""
    errors = [line for error in session.usage_errors if error.splitlines() for line in alert(*_first_and_rest(error))]
    if session.run_id is None and not session.faults:
        return errors
    from .terminal import alerts_only, one_line_summary
    from .views import VERDICT_LEVELS, chosen_baseline, gate_lines

    means = _stored_means(session)  # read once: the run's lines and its one-line summary both show them
    lines = _run_lines(session, verbose, means)
    never_retrieved = session.sightings.hint()
    if never_retrieved:
        lines += plain([never_retrieved])
    gate = session.gate
    if gate is not None:
        lines += gate_lines(gate)
    red = _red_without_the_gate(session)
    if verbose >= 0:
        return lines + red + errors
    ending, level = None, Level.PLAIN
    if gate is not None and gate.verdict != SKIPPED:
        chosen = chosen_baseline(gate)  # the run a baseline named by its labels turned out to be
        ending = f"{chosen}; {gate.verdict.headline}" if chosen else gate.verdict.headline  # the verdict stays last
        level = VERDICT_LEVELS[gate.verdict]  # the line's colour is the verdict's
    head = ([SummaryLine(one_line_summary(session.store, session.run_id, gate=ending, means=means), level)]
            if session.run_id is not None else [])
    skipped = plain(gate.summary().splitlines()) if gate is not None and gate.verdict == SKIPPED else []
    return head + alerts_only(lines) + skipped + red + errors


def _red_without_the_gate(session: CrucibleSession) -> list[SummaryLine]:
    """The last word when the build is red although the gate passed: under the strict outcome, items that failed
    their checks make pytest's exit status 1 whatever the gate said, and "gate passed" just above reads as green."""
    gate = session.gate
    if gate is None or gate.verdict != PASSED or not session.settings.strict or session.run_id is None:
        return []
    from ..store.aggregates import result_tally

    failed = result_tally(session.store, session.run_id)["outcomes"].get("failed", 0)
    if not failed:
        return []
    items = "item" if failed == 1 else "items"
    return alert(f"build failed: {failed} {items} failed their checks (strict outcome); the gate passed: "
                 "--crucible-outcome=record lets the gate decide")


def _first_and_rest(message: str) -> tuple[str, list[str]]:
    first, *rest = message.splitlines() or [""]
    return first, rest


def _stored_means(session: CrucibleSession) -> StoredMeans | None:
    """The run's ``verdict.runs.stored_means``; None when there is no run or it cannot be read (the readers
    below then meet the database themselves, and say so)."""
    from ..verdict.runs import stored_means

    if session.run_id is None:
        return None
    try:
        return stored_means(session.store, session.run_id)
    except Exception:
        return None


def _run_lines(session: CrucibleSession, verbose: int, means: StoredMeans | None = None) -> list[SummaryLine]:
    """The run's own lines (metrics, unread keys, faults, judge errors), before the gate's. The faults are
    shown even when there is no run to read back: they say why."""
    from .terminal import fault_lines, run_summary_lines

    recorder, status = session.recorder, session.status
    if session.run_id is None:
        lines = alerts(fault_lines(session.faults))
    else:
        try:
            lines = run_summary_lines(session.store, session.run_id, unread_keys=session.unread_config_keys(),
                                      faults=session.faults, known_keys=session.config.known_keys(), verbose=verbose, means=means)
        except Exception as exc:
            lines = alerts(fault_lines([f"could not read the run back from {session.settings.db_path}: {exc}", *session.faults]))
    lines.extend(alerts(f"JUDGE ERROR {error}" for error in session.judging.batch_errors))
    lines.extend(alerts(session.judging.alerts()))
    lines.extend(plain(session.judging.notes()))
    if recorder.unrecorded:
        ran = sum(session.outcomes.values())  # every item handed to record(), written or not
        where = f"this run is {status}, never `latest`" if status else "the run was not stored"
        lines.append(SummaryLine(f"WARNING {recorder.unrecorded} of {ran} items lost: the database could not record them "
                                 f"(see the FAULT lines); {where}", Level.ALERT))
    if recorder.wal_note:
        lines.append(SummaryLine(f"WARNING {recorder.wal_note}", Level.ALERT))
    stopped = session.stopped
    if stopped:
        shown = ", ".join(stopped[:10]) + (f" (+{len(stopped) - 10} more)" if len(stopped) > 10 else "")
        many = len(stopped) != 1
        lines.append(SummaryLine(f"WARNING {len(stopped)} item{'s' if many else ''} stopped before {'their' if many else 'its'} "
                                 f"evaluation ended (pytest-timeout): {shown}; stored errored with the reason, and this run "
                                 f"is {status or RunStatus.INCOMPLETE}", Level.ALERT))
    if status == RunStatus.INCOMPLETE and session.judge_failed:
        lines.append(SummaryLine("WARNING run incomplete: some items' judge requests failed after retries; their answer "
                                 "metrics are missing", Level.ALERT))
    return lines
