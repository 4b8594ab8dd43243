"""Progress of long judge work: done / total, elapsed, ETA, as plain lines.

Lines go through a writer the caller supplies (the plugin hands in pytest's
terminal reporter), at most one per ``interval`` seconds plus the final one, so a
CI log gets a handful of lines rather than a flood, and nothing is written with
carriage returns that would garble pytest's or xdist's own output. This module
never imports pytest.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Reports ``label: done/total (pct), elapsed E, ETA T`` through ``write``.

    The ETA assumes the remaining work goes at the average rate so far; it is left
    out until something is done (no rate yet)."""

    def __init__(self, label: str, total: int, write: Callable[[str], object], *, unit: str = "",
                 interval: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.write, self.unit = label, total, write, unit
        self.interval, self.clock = interval, clock
        self.started = clock()
        self._last_write: float | None = None
        self._last_done = -1

    def line(self, done: int) -> str:
        elapsed = self.clock() - self.started
        share = done / self.total if self.total else 1.0
        text = f"crucible: {self.label}: {done}/{self.total}{(' ' + self.unit) if self.unit else ''} ({share:.0%}), elapsed {format_duration(elapsed)}"
        if 0 < done < self.total:
            text += f", ETA {format_duration(elapsed / done * (self.total - done))}"
        return text

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        now = self.clock()
        final = done >= self.total
        due = self._last_write is None or now - self._last_write >= self.interval
        if done != self._last_done and (final or due):
            self.write(self.line(done))
            self._last_write, self._last_done = now, done
