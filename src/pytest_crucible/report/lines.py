"""A line of the terminal summary and its level: what the line is (an alert, good news, a plain fact) is
said where the line is made, so the plugin colours it, and -q keeps it, without reading its words again."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple


class Level(Enum):
    """How a summary line is shown: its colour, and whether -q keeps it."""

    PLAIN = "plain"
    GOOD = "good"  # green: a metric that improved, a gate that passed
    BAD = "bad"  # red, but not an alert: a regressed metric's row, -q's line ending in a failed gate
    ALERT = "alert"  # red, and never hidden by -q: a warning, a fault, a gate failure or refusal, an error
    ALERT_DETAIL = "alert detail"  # the rest of an alert (a wrapped warning's indented lines, a HINT): kept with it

    @property
    def markup(self) -> dict[str, bool]:
        """The keyword arguments of pytest's ``TerminalReporter.write_line`` for this level."""
        return _MARKUP[self]

    @property
    def alert(self) -> bool:
        """Whether -q keeps the line."""
        return self in (Level.ALERT, Level.ALERT_DETAIL)


_MARKUP: dict[Level, dict[str, bool]] = {Level.PLAIN: {}, Level.GOOD: {"green": True}, Level.BAD: {"red": True},
                                         Level.ALERT: {"red": True}, Level.ALERT_DETAIL: {}}


class SummaryLine(NamedTuple):
    text: str
    level: Level = Level.PLAIN


def plain(lines: Iterable[str]) -> list[SummaryLine]:
    return [SummaryLine(line) for line in lines]


def alert(first: str, rest: Iterable[str] = ()) -> list[SummaryLine]:
    """An alert's first line and the lines that continue it."""
    return [SummaryLine(first, Level.ALERT), *(SummaryLine(line, Level.ALERT_DETAIL) for line in rest)]


def alerts(lines: Iterable[str]) -> list[SummaryLine]:
    """Alerts of one line each (``FAULT ...``, ``JUDGE ERROR ...``)."""
    return [SummaryLine(line, Level.ALERT) for line in lines]


def texts(lines: Iterable[SummaryLine]) -> list[str]:
    """The words alone, for a surface without colour (``crucible show``, ``crucible compare``)."""
    return [line.text for line in lines]
