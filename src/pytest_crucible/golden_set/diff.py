"""`crucible golden diff A B`: two versions of a golden set (a golden file, or the items a stored run ran)
compared item by item: added, removed, and changed items field by field, a changed text shown as a unified
diff. Each item is compared as a golden file holds it with its defaults filled in (``GoldenItem.to_json``),
so an item written with and without its defaults is one item. A change to a content field
(``golden_set/changes.py``) is flagged: a comparison with a baseline leaves that item out.

Pure: no pytest, no store.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .changes import CONTENT_FIELDS, content_of

_LEFT_OUT = frozenset(CONTENT_FIELDS) - {"citations"}


@dataclass
class GoldenDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)  # id -> (field, before, after)

    @property
    def equal(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def content_changed(self) -> list[str]:
        """The changed items a comparison with a baseline leaves out: a content field other than the citations
        changed (a citation change moves the ruler instead: ``verdict/ruler.py``)."""
        return [item for item, fields in self.changed.items() if any(_content_change(*change) for change in fields)]

    def to_json(self) -> dict[str, Any]:
        left_out = set(self.content_changed())
        return {"equal": self.equal, "added": self.added, "removed": self.removed,
                "changed": [{"id": item, "contentChanged": item in left_out,
                             "fields": [{"field": name, "before": before, "after": after} for name, before, after in fields]}
                            for item, fields in self.changed.items()]}


def _content_change(name: str, before: Any, after: Any) -> bool:
    """Whether a changed field changes what the item is measured against (a turn: its earlier turns, not its count of turns)."""
    if name == "conversation":
        return content_of({name: before})[name] != content_of({name: after})[name]
    return name in _LEFT_OUT


def diff_golden(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> GoldenDiff:
    """The difference between two golden sets, each a list of items as dicts (camelCase, defaults filled)."""
    a = {item["id"]: item for item in before}
    b = {item["id"]: item for item in after}
    result = GoldenDiff(added=sorted(set(b) - set(a)), removed=sorted(set(a) - set(b)))
    for item in sorted(set(a) & set(b)):
        names = list(dict.fromkeys([*a[item], *b[item]]))
        ordered = [name for name in CONTENT_FIELDS if name in names] + [name for name in names if name not in CONTENT_FIELDS]
        fields = [(name, a[item].get(name), b[item].get(name)) for name in ordered if a[item].get(name) != b[item].get(name)]
        if fields:
            result.changed[item] = fields
    return result


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines() or [""]
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True).splitlines()


def render_diff(diff: GoldenDiff, name_a: str, name_b: str) -> str:
    """The difference as text: the items added and removed, then each changed item's fields."""
    if diff.equal:
        return f"{name_a} and {name_b} hold the same golden items\n"
    out = [f"--- {name_a}", f"+++ {name_b}"]
    for title, ids in (("added", diff.added), ("removed", diff.removed)):
        if ids:
            out.append(f"{title} ({len(ids)}): {', '.join(ids)}")
    for item, fields in diff.changed.items():
        out.append(f"changed {item}: {', '.join(name for name, _, _ in fields)}")
        for name, before, after in fields:
            out.append(f"  {name}:")
            unified = difflib.unified_diff(_lines(before), _lines(after), lineterm="", n=2)
            out.extend(f"    {line}" for line in list(unified)[2:])  # the two file header lines are the item's
    content = diff.content_changed()
    summary = f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed"
    if content:
        summary += f" ({len(content)} in content: a comparison with a baseline leaves them out of its pairs)"
    out.append(summary)
    return "\n".join(out) + "\n"
