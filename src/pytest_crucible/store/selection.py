"""What a run selected of its golden set, as its row records it (column ``selection``).

A run that ran fewer golden items than its golden files hold (``-k``, ``-m``, ``--deselect``, ``--lf``, a node id,
a shard of pytest-split) is a *partial selection*: it is stored and can be named by its id, but it is never
``latest`` and never a baseline by default, and a comparison with it says it compared the selected items only.
NULL in the column is a full run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Selection:
    """``ran`` of the ``held`` golden items ran, selected ``by`` (e.g. ``-k h0``; empty when unknown)."""

    ran: int
    held: int
    by: str = ""

    def describe(self) -> str:
        """``9 of 32 golden items selected (-k h0)``."""
        return f"{self.ran} of {self.held} golden item{'s' if self.held != 1 else ''} selected" + (f" ({self.by})" if self.by else "")

    def to_json(self) -> str:
        return json.dumps({"ran": self.ran, "held": self.held, "by": self.by}, sort_keys=True)


def selection_of(run: dict[str, Any]) -> Selection | None:
    """The selection a run row records (None: a full run, or a row written before runs recorded it)."""
    raw = run.get("selection")
    if not raw:
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
        return Selection(int(value["ran"]), int(value["held"]), str(value.get("by") or ""))
    except (ValueError, TypeError, KeyError):
        return Selection(0, 0, "unreadable selection")  # partial all the same: never taken for a full run


def merged_selection(selections: list[Selection | None], ran: int) -> Selection | None:
    """The selection of shards merged into one run of ``ran`` items: full (None) once the shards together ran
    every item their golden files hold; else still partial."""
    partial = [selection for selection in selections if selection is not None]
    if len(partial) < len(selections) or not partial:
        return None  # a shard ran the whole set: the merge has it all
    held = max(selection.held for selection in partial)
    if ran >= held:
        return None
    return Selection(ran, held, "merged shards")


def subset_line(selection: Selection) -> str:
    """The gate's line for a comparison of a partial selection."""
    return f"subset: {selection.describe()}; only the selected items were compared"
