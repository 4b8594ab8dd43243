"""Progress lines of long judge work: done/total, elapsed, ETA; throttled, never spammed."""

from __future__ import annotations

from pytest_crucible.progress import Progress, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_carry_done_total_elapsed_and_eta() -> None:
    clock, lines = Clock(), []
    progress = Progress("Message Batch 1 for 52 items", 200, lines.append, unit="judge requests", interval=10, clock=clock)
    progress.update(0)
    clock.now += 30
    progress.update(50)  # 50 in 30 s: 150 left at the same rate is 90 s
    clock.now += 5
    progress.update(60)  # throttled: less than 10 s since the last line
    clock.now += 85
    progress.update(200)
    assert lines == [
        "crucible: Message Batch 1 for 52 items: 0/200 judge requests (0%), elapsed 0s",
        "crucible: Message Batch 1 for 52 items: 50/200 judge requests (25%), elapsed 30s, ETA 1m30s",
        "crucible: Message Batch 1 for 52 items: 200/200 judge requests (100%), elapsed 2m00s",
    ]


def test_the_final_line_is_never_throttled_and_never_repeated() -> None:
    clock, lines = Clock(), []
    progress = Progress("pool", 3, lines.append, interval=60, clock=clock)
    progress.update(1)
    progress.update(3)
    progress.update(3)
    assert [line.split(": ", 2)[2][:3] for line in lines] == ["1/3", "3/3"]


def test_durations() -> None:
    assert [format_duration(s) for s in (0, 59.4, 61, 3599, 3600, 7322)] == ["0s", "59s", "1m01s", "59m59s", "1h00m", "2h02m"]
