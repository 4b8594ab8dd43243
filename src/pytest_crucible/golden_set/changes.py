"""What a golden item says, as opposed to how it is filed: the fields whose change makes an item another
question (``CONTENT_FIELDS``), its content hash, and which of those fields two versions of one item differ in.

A run keeps every golden item as it ran (the store's ``golden_items``), so two runs' versions of one id can
always be compared: a comparison leaves out the items whose content changed (``verdict/comparison.py``), and
``crucible golden diff`` shows every field (``golden_set/diff.py``). Tags, metadata, status and the facets
do not change what an answer is measured against, so they are not content; a turn's earlier turns are.

Pure: no pytest, no store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# In the order a change is reported ("h04 question, reference").
CONTENT_FIELDS: tuple[str, ...] = ("question", "reference", "assertions", "citations", "answerable", "kind", "expectedTools",
                                   "toolMatch", "conversation")
# What of a turn's place in its golden conversation is content: the turns before it (their questions and written
# replies make its history). Its count of turns and its own written reply are not: a turn added after it, or a
# reply written for it, leaves what it is measured on as it was.
_TURN_CONTENT = ("id", "turn", "history")

# A field a file leaves out reads as the schema's default, so an item written with and without its defaults
# has one content.
_DEFAULTS: dict[str, Any] = {"reference": None, "assertions": [], "citations": [], "answerable": True, "kind": "retrieval",
                             "expectedTools": None, "toolMatch": "strict"}
_ASSERTION_DEFAULTS: dict[str, Any] = {"kind": "must", "weight": 1.0, "conceptId": None}
_CITATION_DEFAULTS: dict[str, Any] = {"chunkId": None, "mode": "required"}
_TOOL_DEFAULTS: dict[str, Any] = {"arguments": {}}


def _filled(entries: Any, defaults: dict[str, Any]) -> Any:
    if not isinstance(entries, list):
        return entries
    return [{**defaults, **entry} if isinstance(entry, Mapping) else entry for entry in entries]


def content_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item's content fields, defaults filled in (a golden file's camelCase item, or a stored one)."""
    content = {name: item.get(name, _DEFAULTS.get(name)) for name in CONTENT_FIELDS}
    content["assertions"] = _filled(content["assertions"], _ASSERTION_DEFAULTS)
    content["citations"] = _filled(content["citations"], _CITATION_DEFAULTS)
    turn = content["conversation"]
    if isinstance(turn, Mapping):
        content["conversation"] = {name: turn.get(name) for name in _TURN_CONTENT}
    content["expectedTools"] = _filled(content["expectedTools"], _TOOL_DEFAULTS)
    if isinstance(content["citations"], list):  # how well an import matched a passage is not what the item cites
        for entry in content["citations"]:
            if isinstance(entry, dict):
                entry.pop("matchScore", None)
    if isinstance(content["assertions"], list):
        for entry in content["assertions"]:
            if isinstance(entry, dict) and isinstance(entry.get("weight"), int):
                entry["weight"] = float(entry["weight"])  # 1 and 1.0 are one weight
    return content


def content_hash(item: Mapping[str, Any]) -> str:
    """sha256 of the item's content (:func:`content_of`, canonical JSON): equal exactly when
    :func:`changed_fields` finds nothing."""
    text = json.dumps(content_of(item), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The content fields two versions of one item differ in, in ``CONTENT_FIELDS`` order."""
    a, b = content_of(before), content_of(after)
    return [name for name in CONTENT_FIELDS if a[name] != b[name]]
