"""Reviewing drafts in a golden file: list them (`crucible golden review`), and accept or reject them
(`crucible golden accept` / `crucible golden reject`).

Accepting or rejecting rewrites the ``status`` value of the named items' lines and nothing else: every
other byte of the file (the line's other keys, their order and spacing, the other lines, CRLF line
endings, a missing final newline, a byte-order mark) is kept. The line is edited as text (a small scanner
finds the top-level ``status`` key of the line's JSON object), the edited line is parsed again to prove
only ``status`` changed, and the file is replaced atomically (a temporary file renamed over it): on any
error nothing is written.

This module never imports pytest and holds no SQL.
"""

from __future__ import annotations

import difflib
import json
import tempfile
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..json_input import shown as _printable
from .schema import GoldenFileError, GoldenItem, load_golden_file

if TYPE_CHECKING:
    from .corpus import Chunk

STATUSES = ("active", "draft", "rejected")
_WS = " \t\r\n"
_BOM = "\ufeff"


class ReviewError(Exception):
    """A review command that cannot do what it was asked; ``str()`` is the whole message (with a HINT).
    Nothing was written."""


@dataclass
class StatusChange:
    """What :func:`set_status` did: the ids it changed, and notes on the ids it left as they were."""

    path: str
    status: str
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        verb = {"active": "accepted", "rejected": "rejected", "draft": "set to draft"}[self.status]
        if not self.changed:
            return f"{verb} 0 items in {self.path}: nothing to change"
        noun = "item" if len(self.changed) == 1 else "items"
        return f"{verb} {len(self.changed)} {noun} in {self.path}: {', '.join(self.changed)}"


# -- listing drafts ------------------------------------------------------------------------------------
def load_items(path: str | Path) -> list[GoldenItem]:
    """Every item of a golden file (any format), or a :class:`ReviewError` naming file:line."""
    try:
        return load_golden_file(path)
    except GoldenFileError as exc:
        raise ReviewError(str(exc)) from None


def source_chunks(item: GoldenItem) -> list[str]:
    """The chunk ids an item was generated from: ``metadata.generatedBy.sourceChunks`` (else [])."""
    generated = item.metadata.get("generatedBy")
    chunks = generated.get("sourceChunks") if isinstance(generated, dict) else None
    if not isinstance(chunks, list):
        return []
    return [str(chunk) for chunk in chunks if isinstance(chunk, (str, int))]


def review_lines(path: str | Path, status: str = "draft", chunks: Sequence[Chunk] | None = None,
                 corpus_name: str = "", width: int = 100) -> list[str]:
    """What `crucible golden review` prints: each item of ``status`` with its question type, question,
    reference, citations and, when ``chunks`` (a loaded corpus) is given, the text of its source passages."""
    items = [item for item in load_items(path) if item.status == status]
    by_id = {chunk.chunk_id: chunk for chunk in chunks} if chunks is not None else {}
    lines: list[str] = []

    def block(label: str, text: str) -> None:
        wrapped = textwrap.wrap(" ".join(text.split()), width=max(width - 13, 20), break_long_words=False,
                                break_on_hyphens=False) or [""]
        lines.append(f"  {label:<10} {wrapped[0]}")
        lines.extend(f"  {'':<10} {rest}" for rest in wrapped[1:])

    for item in items:
        generated = item.metadata.get("generatedBy")
        generator = (generated.get("generator") or generated.get("model")) if isinstance(generated, dict) else None
        imported: dict[str, Any] = item.metadata["importedFrom"] if isinstance(item.metadata.get("importedFrom"), dict) else {}
        if imported.get("format"):
            generator = f"imported from {imported['format']}"
        origin = f", {generator}" if isinstance(generator, str) else ""
        lines.append(f"{item.id}  ({path}:{item.line}, {item.question_type}, {item.kind}{origin})")
        block("question:", item.question)
        reply = item.conversation.assistant if item.conversation is not None else None
        if reply:  # the author's reply: the history replay gives the next turn
            block("assistant:", reply)
        block("reference:", item.reference if item.reference else "(none)")
        if item.assertions:
            block("asserts:", "; ".join(f"[{a.kind}] {a.text}" for a in item.assertions))
        cited = ", ".join((c.chunk_id or c.doc_id) + (" (acceptable)" if c.mode == "acceptable" else "")
                          + (f" (match {c.match_score:g})" if c.match_score is not None and c.match_score < 1 else "")
                          for c in item.citations)
        block("citations:", cited or "(none)")
        passages = item.metadata.get("referenceContexts")
        for number in imported.get("unmatchedContexts") or []:  # what an import could not find: the reviewer's to settle
            if isinstance(passages, list) and isinstance(number, int) and 0 < number <= len(passages):
                block("unmatched:", f"reference passage {number} matched no chunk: {passages[number - 1]}")
        note = item.metadata.get("note")
        if isinstance(note, str) and note.strip():
            block("note:", note)
        for chunk_id in source_chunks(item):
            if chunks is None:
                block("source:", f"{chunk_id} (pass --corpus PATH to read its text)")
            elif chunk_id in by_id:
                block("source:", f"{chunk_id}: {by_id[chunk_id].text}")
            else:
                block("source:", f"{chunk_id}: not in the corpus {corpus_name}".rstrip())
        lines.append("")
    noun = "item" if len(items) == 1 else "items"
    lines.append(f"{len(items)} {status} {noun} in {path}")
    if items and status != "active":
        lines.append(f"HINT: crucible golden accept {path} ID...  (status active: it runs)  |  "
                     f"crucible golden reject {path} ID...  (status rejected: it never runs)")
    return lines


# -- the top-level keys of one JSON object line -------------------------------------------------------
@dataclass(frozen=True)
class _Member:
    key: str        # the key, decoded
    key_start: int  # offset of the key's opening quote
    key_end: int    # offset just past its closing quote
    value_start: int
    value_end: int


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _string_end(text: str, pos: int) -> int:
    """Offset just past the JSON string starting at ``pos`` (its opening quote)."""
    pos += 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
            continue
        if char == '"':
            return pos + 1
        pos += 1
    raise ValueError("unterminated string")


def _value_end(text: str, pos: int) -> int:
    """Offset just past the JSON value starting at ``pos``: strings and nesting respected."""
    if pos >= len(text):
        raise ValueError("missing value")
    if text[pos] == '"':
        return _string_end(text, pos)
    if text[pos] in "{[":
        depth = 0
        while pos < len(text):
            char = text[pos]
            if char == '"':
                pos = _string_end(text, pos)
                continue
            if char in "{[":
                depth += 1
            elif char in "}]":
                depth -= 1
                if depth == 0:
                    return pos + 1
            pos += 1
        raise ValueError("unclosed object or array")
    end = pos
    while end < len(text) and text[end] not in _WS + ",}]":
        end += 1
    if end == pos:
        raise ValueError(f"unexpected {text[pos]!r}")
    return end


def object_members(text: str) -> tuple[list[_Member], int]:
    """The top-level members of the JSON object ``text`` holds, and the offset of its closing brace."""
    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "{":
        raise ValueError("not a JSON object")
    pos = _skip_ws(text, pos + 1)
    members: list[_Member] = []
    if pos < len(text) and text[pos] == "}":
        return members, pos
    while True:
        if pos >= len(text) or text[pos] != '"':
            raise ValueError("expected a key")
        key_end = _string_end(text, pos)
        key = json.loads(text[pos:key_end])
        colon = _skip_ws(text, key_end)
        if colon >= len(text) or text[colon] != ":":
            raise ValueError("expected ':'")
        value_start = _skip_ws(text, colon + 1)
        value_end = _value_end(text, value_start)
        members.append(_Member(key, pos, key_end, value_start, value_end))
        pos = _skip_ws(text, value_end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
            continue
        if pos < len(text) and text[pos] == "}":
            return members, pos
        raise ValueError("expected ',' or '}'")


def with_status(line: str, status: str) -> str:
    """``line`` (one JSON object) with its top-level ``status`` value set to ``status``; every other
    character kept. A missing key is added after the last member, with the line's own separators
    (those between its first two members)."""
    members, close = object_members(line)
    value = json.dumps(status)
    found = [member for member in members if member.key == "status"]
    if len(found) > 1:
        raise ValueError("the key 'status' appears more than once")
    if found:
        member = found[0]
        edited = line[:member.value_start] + value + line[member.value_end:]
    elif members:
        first, last = members[0], members[-1]
        key_value = line[first.key_end:first.value_start]  # ':' or ': ' or ' : '
        between = line[first.value_end:members[1].key_start] if len(members) > 1 else ", "
        edited = line[:last.value_end] + between + '"status"' + key_value + value + line[last.value_end:]
    else:
        edited = line[:close] + '"status": ' + value + line[close:]
    before, after = json.loads(line), json.loads(edited)
    if after != {**before, "status": status}:  # the proof: only status changed
        raise ValueError("the edit changed more than the status")
    return edited


# -- accept / reject -------------------------------------------------------------------------------
def set_status(path: str | Path, ids: Sequence[str], status: str, *, every_draft: bool = False) -> StatusChange:
    """Set the ``status`` of the items ``ids`` of the ``.jsonl`` golden file ``path`` to ``status``
    (``every_draft``: of every draft, and ``ids`` must be empty).

    A golden conversation is one line, so its status is one value: it is named by its id, and a turn's id
    (``c01:t2``) sets its conversation's status, with a note saying so. Raises :class:`ReviewError`
    (nothing written) on a file that does not load, an unknown id, or a line that cannot be edited. An
    item already in ``status`` is left as it is, with a note."""
    if status not in STATUSES:
        raise ReviewError(f"unknown status '{status}'\nHINT: one of {', '.join(STATUSES)}")
    path = Path(path)
    shown = str(path)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        raise ReviewError(f"{shown}: accept and reject edit .jsonl golden files only (one item per line)\n"
                          f"HINT: set \"status\" by hand in a {path.suffix} file, or keep generated drafts in a .jsonl file")
    if every_draft and ids:
        raise ReviewError("--all names every draft: give either --all or item ids, not both\n"
                          f"HINT: `crucible golden review {shown}` lists the drafts and their ids")
    if not ids and not every_draft:
        raise ReviewError("no item ids given\nHINT: `crucible golden review FILE` lists the drafts and their ids; "
                          "--all names every draft")
    items = load_items(path)
    records: dict[str, list[GoldenItem]] = {}  # a line's id (an item's, or a conversation's) -> its items
    for item in items:
        records.setdefault(item.conversation.id if item.conversation else item.id, []).append(item)
    change = StatusChange(shown, status)
    wanted: list[str] = []
    if every_draft:
        wanted = [record for record, its in records.items() if its[0].status == "draft"]
        if not wanted:
            change.notes.append(f"{shown}: no drafts: nothing to change")
    unknown: list[str] = []
    turns = {item.id: item.conversation.id for item in items if item.conversation}
    for item_id in dict.fromkeys(ids):  # an id named twice is changed once
        if item_id in records:
            wanted.append(item_id)
        elif item_id in turns:
            conversation = turns[item_id]
            change.notes.append(f"'{_printable(item_id)}' is a turn of conversation '{_printable(conversation)}': "
                                f"a conversation has one status, set for all its turns")
            wanted.append(conversation)
        else:
            unknown.append(item_id)
    if unknown:
        every = list(records) + list(turns)
        close = [match for item_id in unknown for match in difflib.get_close_matches(item_id, every, n=1)]
        hint = (f"did you mean {', '.join(dict.fromkeys(close))}? " if close else "") + \
            f"`crucible golden review {shown}` lists the drafts and their ids"
        names = ", ".join(f"'{_printable(item_id)}'" for item_id in unknown)
        raise ReviewError(f"{shown}: no item with id {names} (nothing was changed)\nHINT: {hint}")

    data = path.read_bytes()
    lines = data.split(b"\n")  # as the loader splits them: "\r" stays with its line
    changed_items: set[str] = set()
    for record in dict.fromkeys(wanted):
        item = records[record][0]
        if item.status == status:
            change.notes.append(f"{shown}:{item.line}: '{_printable(record)}' is already {status}: left as it is")
            continue
        index = item.line - 1
        text = lines[index].decode("utf-8")
        bom = _BOM if index == 0 and text.startswith(_BOM) else ""
        try:
            edited = with_status(text[len(bom):], status)
        except (ValueError, RecursionError) as exc:
            raise ReviewError(f"{shown}:{item.line}: cannot set the status of '{_printable(record)}': {exc} "
                              f"(nothing was changed)\nHINT: edit its \"status\" by hand") from None
        lines[index] = (bom + edited).encode("utf-8")
        change.changed.append(record)
        changed_items.update(turn.id for turn in records[record])
    if change.changed:
        new_data = b"\n".join(lines)
        _check_only_status_changed(path, new_data, items, changed_items, status)
        write_atomically(path, new_data)
    return change


def _check_only_status_changed(path: Path, new_data: bytes, before: Iterable[GoldenItem], changed: set[str],
                               status: str) -> None:
    """Load the edited file as the plugin would (from a temporary copy) and compare it item by item."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        copy.write_bytes(new_data)
        try:
            after = {item.id: item for item in load_golden_file(copy, display_path=str(path))}
        except GoldenFileError as exc:
            raise ReviewError(f"the edited file would not load: {exc} (nothing was changed)") from None
    for item in before:
        expected: dict[str, Any] = dict(item.to_json())
        if item.id in changed:
            expected["status"] = status
        other = after.get(item.id)
        if other is None or other.to_json() != expected or other.line != item.line:
            raise ReviewError(f"{path}:{item.line}: the edit would change '{_printable(item.id)}' beyond its status "
                              "(nothing was changed)\nHINT: this is a bug in crucible; edit \"status\" by hand")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the golden file ``path`` with ``data`` whole, keeping its permission bits (it is the
    user's file, not an output). A failure leaves the original as it was."""
    from ..store.files import write_output_file

    write_output_file(path, data, mode=path.stat().st_mode & 0o7777)
