"""A golden conversation of a run as a chat transcript: each turn's question, the answer the pipeline gave, the
ids it retrieved, the turn's grade and outcome, and the conversation's own metrics. One view, read by the HTML
report (its "Conversations" section) and by `crucible show RUN --item ID` (a turn, or a conversation's id).

A view: it reads stored rows (results and golden items as the store returns them) and scores nothing."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

# Retrieved ids shown per turn: the top of the ranking (the whole ranking is in the item's own view).
RETRIEVED_SHOWN = 5
CONVERSATION_METRICS = ("conversationSuccess", "turnsToFirstFailure", "knowledgeRetention")


def turn_of(item: Any) -> dict[str, Any] | None:
    """A golden item's place in its conversation (``{"id", "turn", "turns", "history", ...}``), None for an item
    that is not a turn."""
    turn = item.get("conversation") if isinstance(item, Mapping) else None
    return turn if isinstance(turn, dict) and isinstance(turn.get("id"), str) else None


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _retrieved_ids(retrieved: Any) -> list[str]:
    chunks = _decoded(retrieved)
    if not isinstance(chunks, list):
        return []
    ids = [str(chunk.get("chunk_id") or chunk.get("doc_id") or "?") for chunk in chunks if isinstance(chunk, Mapping)]
    return ids[:RETRIEVED_SHOWN]


def transcripts(golden: Iterable[Mapping[str, Any]], rows: Mapping[str, Mapping[str, Any]],
                metrics: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """One transcript per conversation among ``golden`` (the run's golden items, turns or not), in conversation id
    order: ``{"id", "turns", "missing", "metrics", "messages"}``, a message per turn the run holds, in turn order.
    ``rows``: the turns' result rows by item id; ``metrics``: metric -> {item id: value}."""
    by_conversation: dict[str, dict[int, Mapping[str, Any]]] = {}
    sizes: dict[str, int] = {}
    for item in golden:
        turn = turn_of(item)
        if turn is None:
            continue
        by_conversation.setdefault(turn["id"], {})[int(turn["turn"])] = item
        sizes[turn["id"]] = int(turn.get("turns") or 0)
    shown = []
    for conversation in sorted(by_conversation):
        items = by_conversation[conversation]
        messages = []
        for number in sorted(items):
            item = items[number]
            row = rows.get(item["id"]) or {}
            written = (turn_of(item) or {}).get("assistant")
            messages.append({
                "turn": number, "itemId": item["id"], "question": row.get("question") or item.get("question") or "",
                "answer": row.get("answer"), "written": written, "retrieved": _retrieved_ids(row.get("retrieved")),
                "grade": row.get("crag_grade"), "outcome": row.get("outcome") or ("not run" if not row else ""),
                "error": row.get("error"), "abstained": bool(row.get("abstained")), "blocked": bool(row.get("blocked")),
            })
        last = items[max(items)]["id"]
        values = {name: metrics[name][last] for name in CONVERSATION_METRICS if last in metrics.get(name, {})}
        size = max(sizes[conversation], max(items))
        shown.append({"id": conversation, "turns": size, "missing": [n for n in range(1, size + 1) if n not in items],
                      "metrics": values, "messages": messages})
    return shown


def failed_first(conversations: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` conversations for a page: those with a turn that errored, failed or is not correct first."""
    def troubled(conversation: dict[str, Any]) -> bool:
        return any(m["error"] or m["outcome"] in ("failed", "error") or m["grade"] in ("incorrect", "missing")
                   for m in conversation["messages"])

    return sorted(conversations, key=lambda c: not troubled(c))[:limit]


def transcript_lines(conversation: dict[str, Any], width: int = 100, current: str | None = None) -> list[str]:
    """The transcript as text (`crucible show`): a header, then per turn the question, the answer and what
    measured it; ``current``: the turn the user asked for, marked."""
    about = f"{conversation['turns']} turn{'s' if conversation['turns'] != 1 else ''}"
    if conversation["missing"]:
        about += f", turn{'s' if len(conversation['missing']) > 1 else ''} {', '.join(map(str, conversation['missing']))} not in this run"
    values = ", ".join(f"{name} {value:g}" for name, value in conversation["metrics"].items())
    lines = [f"conversation {conversation['id']} ({about})" + (f": {values}" if values else "")]

    def wrapped(label: str, text: str) -> list[str]:
        return textwrap.wrap(text, width=width, initial_indent=f"    {label:<10}", subsequent_indent=" " * 14,
                             break_on_hyphens=False) or [f"    {label}"]

    for message in conversation["messages"]:
        mark = "  <- this item" if message["itemId"] == current else ""
        lines.append(f"  turn {message['turn']} ({message['itemId']}){mark}")
        lines.extend(wrapped("user", message["question"]))
        answer = message["answer"]
        if message["error"]:
            answer_text = f"(errored: {message['error']})"
        elif message["blocked"]:
            answer_text = "(blocked by a guardrail: no answer)"
        else:
            answer_text = answer if answer is not None else "(no answer)"
        lines.extend(wrapped("assistant", answer_text))
        if message["written"]:
            lines.extend(wrapped("written", message["written"]))
        graded = ", ".join(part for part in (
            message["outcome"], f"CRAG {message['grade']}" if message["grade"] else "", "abstained" if message["abstained"] else "",
            "retrieved " + (", ".join(message["retrieved"]) or "nothing")) if part)
        lines.extend(wrapped("", graded))
    return lines
