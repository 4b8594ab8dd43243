"""`crucible golden convert`: a golden file written in another tool's format, so a team's data is never held
here. The reverse of ``golden_set/imports.py``: an item imported from that format gets back the fields it
came with (``metadata.sourceFields``, its source id, its reference passages, a benchmark's grades), and
what the format has no place for is counted by field and reported, never dropped silently.

* ``ragas``: single-turn samples, JSONL (or a JSON array for a ``.json`` path): ``user_input``,
  ``reference``, ``reference_contexts`` (the imported passages, else the cited chunks' text from
  ``--corpus``), ``reference_context_ids`` (the cited chunks).
* ``deepeval``: goldens, a JSON array (or a CSV for a ``.csv`` path, passages ``|``-joined as DeepEval reads
  them): ``input``, ``expected_output``, ``context``, ``additional_metadata`` (the item's id).
* ``langsmith``: examples as JSONL: ``inputs.question``, ``outputs.answer``, ``outputs.contexts``, ``metadata``.
* ``beir``: a folder: ``queries.jsonl``, ``qrels/<split>.tsv`` (a citation's own grade when it was imported,
  else required 2 and acceptable 1) and, with ``--corpus``, ``corpus.jsonl``.

A file of golden conversations only goes to ragas and DeepEval whole, as multi-turn samples
(``golden_set/multiturn.py``); elsewhere a conversation is written turn by turn, and that is counted.

Pure: no pytest, no store.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import Chunk

TARGETS = ("ragas", "deepeval", "langsmith", "beir")
_GRADE = {"required": 2, "acceptable": 1}


@dataclass
class ConvertReport:
    target: str
    output: Path
    written: int = 0
    lost: Counter[str] = field(default_factory=Counter)  # crucible field -> items whose value the target cannot hold
    files: list[str] = field(default_factory=list)

    conversations: int = 0  # written whole (multi-turn samples), and their turns
    turns: int = 0

    def lines(self) -> list[str]:
        what = (f"{self.conversations} conversation(s) ({self.turns} turns) as {self.target} multi-turn samples" if self.conversations
                else f"{self.written} item(s) as {self.target}")
        lines = [f"wrote {what} to {', '.join(self.files) or self.output}"]
        if self.lost:
            lines.append(f"not representable in {self.target}: "
                         + ", ".join(f"{name} ({count} item(s))" for name, count in sorted(self.lost.items())))
        return lines


def _origin(item: dict[str, Any]) -> dict[str, Any]:
    metadata = item.get("metadata") or {}
    origin = metadata.get("importedFrom")
    return origin if isinstance(origin, dict) else {}


def _kept(item: dict[str, Any], target: str) -> dict[str, Any]:
    """The source's own fields, when the item came from ``target``."""
    if _origin(item).get("format") != target:
        return {}
    kept = (item.get("metadata") or {}).get("sourceFields")
    return dict(kept) if isinstance(kept, dict) else {}


def _passages(item: dict[str, Any], chunks: dict[str, Chunk]) -> list[str]:
    imported = (item.get("metadata") or {}).get("referenceContexts")
    if isinstance(imported, list):
        return [str(text) for text in imported]
    return [chunks[c["chunkId"]].text for c in item.get("citations") or [] if c.get("chunkId") in chunks]


def _count_lost(report: ConvertReport, item: dict[str, Any], fields: Iterable[str]) -> None:
    defaults = {"answerable": True, "kind": "retrieval", "questionType": "simple", "status": "active", "toolMatch": "strict"}
    for name in fields:
        value = item.get(name)
        if name == "conversation" and value:  # this target, or a file mixing both kinds, holds single-turn samples
            report.lost[_FLATTENED] += 1
        elif value not in (None, [], {}, "") and value != defaults.get(name):
            report.lost[name] += 1


_FLATTENED = ("conversations (each turn written as a sample of its own, without its history; ragas and DeepEval write "
              "them whole from a file of conversations only)")
# What every target leaves out (its own mapping of the rest follows).
_UNHELD = ("assertions", "concepts", "attack", "expect", "conflictingSources", "answerable", "questionType", "popularity",
           "dynamism", "cluster", "kind", "tags", "status", "expectedTools", "toolMatch", "conversation")


def _names(item: dict[str, Any], target: str) -> dict[str, str]:
    """crucible's key -> the field name the item was imported from, when it came from ``target``."""
    names = _origin(item).get("fields") if _origin(item).get("format") == target else None
    return {key: value for key, value in names.items() if "." not in value} if isinstance(names, dict) else {}


def _ragas(item: dict[str, Any], chunks: dict[str, Chunk], report: ConvertReport) -> dict[str, Any]:
    kept, names = _kept(item, "ragas"), _names(item, "ragas")
    sample = {names.get("question", "user_input"): item["question"]}
    if item.get("reference"):
        sample.setdefault(names.get("reference", "reference"), item["reference"])
    passages = _passages(item, chunks)
    if passages:
        sample[names.get("contexts", "reference_contexts")] = passages
    ids = [c["chunkId"] for c in item.get("citations") or [] if c.get("chunkId")]
    if ids and _origin(item).get("format") != "ragas":
        sample["reference_context_ids"] = ids
    for key, value in kept.items():  # the ground truths beyond the first stay as they were
        sample[key] = value
    _count_lost(report, item, _UNHELD)
    if _origin(item).get("format") != "ragas" or _origin(item).get("id"):
        report.lost["id"] += 1  # a ragas sample has no id
    return sample


def _deepeval(item: dict[str, Any], chunks: dict[str, Chunk], report: ConvertReport) -> dict[str, Any]:
    golden = {"input": item["question"], **_kept(item, "deepeval")}
    if item.get("reference"):
        golden["expected_output"] = item["reference"]
    passages = _passages(item, chunks)
    if passages:
        golden["context"] = passages
    extra = dict(golden.get("additional_metadata") or {})
    extra["id"] = item["id"]
    golden["additional_metadata"] = extra
    if item.get("expectedTools"):
        golden["expected_tools"] = [{"name": tool["name"], **({"input_parameters": tool["arguments"]} if tool.get("arguments") else {})}
                                    for tool in item["expectedTools"]]
    _count_lost(report, item, [name for name in _UNHELD if name != "expectedTools"])
    return golden


def _langsmith(item: dict[str, Any], chunks: dict[str, Chunk], report: ConvertReport) -> dict[str, Any]:
    kept = _kept(item, "langsmith")
    example: dict[str, Any] = {**kept, "inputs": {**(kept.get("inputs") or {}), "question": item["question"]}}
    outputs = dict(kept.get("outputs") or {})
    if item.get("reference"):
        outputs["answer"] = item["reference"]
    passages = _passages(item, chunks)
    if passages:
        outputs["contexts"] = passages
    example["outputs"] = outputs
    metadata = dict(kept.get("metadata") or {})
    if _origin(item).get("format") == "langsmith" and _origin(item).get("id"):
        example["id"] = _origin(item)["id"]
    else:
        metadata["crucible_id"] = item["id"]
    if item.get("tags"):
        metadata["tags"] = item["tags"]
    example["metadata"] = metadata
    _count_lost(report, item, [name for name in _UNHELD if name != "tags"])
    return example


_ROWS = {"ragas": _ragas, "deepeval": _deepeval, "langsmith": _langsmith}


def _conversations(items: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]] | None:
    """The items' conversations, each its turns in order, when every item is a turn of one (a ragas or DeepEval
    dataset holds single-turn or multi-turn samples, never both); else None."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        conversation = item.get("conversation")
        if not isinstance(conversation, dict):
            return None
        groups.setdefault(conversation["id"], []).append(item)
    return [sorted(turns, key=lambda turn: turn["conversation"]["turn"]) for turns in groups.values()] or None


def _multi_turn(turns: list[dict[str, Any]], target: str, chunks: dict[str, Chunk], report: ConvertReport) -> dict[str, Any]:
    """One conversation as a ragas MultiTurnSample or a DeepEval ConversationalGolden, the fields it came with
    restored; what the sample has no place for counted once per conversation."""
    from .multiturn import deepeval_golden, ragas_sample

    first, conversation_id = turns[0], turns[0]["conversation"]["id"]
    report.conversations += 1
    report.turns += len(turns)
    kept = _kept(first, target)
    if target == "ragas":
        row = {**ragas_sample(turns), **kept}
        held = {"conversation", "expectedTools"}
        if _origin(first).get("format") != "ragas" or _origin(first).get("id"):
            report.lost["id"] += 1  # a ragas sample has no id
        if any(turn.get("expectedTools") for turn in turns[:-1]):
            report.lost["expectedTools' turns (ragas checks reference_tool_calls over the whole conversation)"] += 1
        if any(turn.get("citations") for turn in turns):
            report.lost["citations (a MultiTurnSample has no reference contexts)"] += 1
    else:
        row = {**deepeval_golden(turns), **kept}
        held = {"conversation"}
        passages = list(dict.fromkeys(text for turn in turns for text in _passages(turn, chunks)))
        if passages:
            row["context"] = passages
        row["additional_metadata"] = {**(row.get("additional_metadata") or {}), "id": conversation_id}
    if any(turn.get("reference") for turn in turns[:-1]):
        report.lost["references of turns before the last (the sample's reference is the conversation's)"] += 1
    for name in (name for name in _UNHELD if name not in held):
        probe = ConvertReport(target, report.output)
        for turn in turns:
            _count_lost(probe, turn, [name])
        if probe.lost:
            report.lost[name] += 1
    return row


def convert_golden(items: Sequence[dict[str, Any]], target: str, output: Path, *, chunks: Sequence[Chunk] = (),
                   split: str = "test") -> ConvertReport:
    """Write ``items`` (a golden file's, as dicts) to ``output`` in ``target``'s format."""
    from ..store.files import write_output_file

    report = ConvertReport(target, output)
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    if target == "beir":
        _write_beir(items, output, by_id, split, report)
        return report
    conversations = _conversations(items) if target in ("ragas", "deepeval") else None
    if conversations is not None:
        rows = [_multi_turn(turns, target, by_id, report) for turns in conversations]
    else:
        rows = [_ROWS[target](item, by_id, report) for item in items]
    report.written = len(rows)
    suffix = output.suffix.lower()
    if target == "deepeval" and suffix == ".csv":
        text = _deepeval_csv(rows, multi_turn=conversations is not None)
    elif suffix == ".json":
        text = json.dumps(rows, ensure_ascii=False, indent=2) + "\n"
    else:
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    write_output_file(output, text)
    report.files.append(str(output))
    return report


def _deepeval_csv(rows: list[dict[str, Any]], *, multi_turn: bool = False) -> str:
    buffer = io.StringIO()
    if multi_turn:  # DeepEval's columns for ConversationalGoldens, the turns a cell of JSON
        columns = ["scenario", "turns", "expected_outcome", "user_description", "context", "name", "comments", "additional_metadata"]
        rows = [{**row, "turns": json.dumps(row["turns"], ensure_ascii=False)} for row in rows]
    else:
        columns = ["input", "actual_output", "expected_output", "context", "retrieval_context", "additional_metadata"]
    if any(row.get("expected_tools") for row in rows):  # a cell of JSON, as the import reads it back
        columns.append("expected_tools")
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = dict(row)
        for name in ("context", "retrieval_context"):
            if isinstance(cells.get(name), list):
                cells[name] = "|".join(cells[name])  # DeepEval's own delimiter for passages (its save_as and reader)
        cells["additional_metadata"] = json.dumps(cells.get("additional_metadata") or {}, ensure_ascii=False)
        if cells.get("expected_tools"):
            cells["expected_tools"] = json.dumps(cells["expected_tools"], ensure_ascii=False)
        writer.writerow(cells)
    return buffer.getvalue()


def _write_beir(items: Sequence[dict[str, Any]], folder: Path, chunks: dict[str, Chunk], split: str, report: ConvertReport) -> None:
    from ..store.files import write_output_file

    queries, qrels, units = [], ["query-id\tcorpus-id\tscore"], []
    for item in items:
        origin = _origin(item)
        query_id = str(origin["id"]) if origin.get("format") == "beir" and origin.get("id") else item["id"]
        queries.append(json.dumps({"_id": query_id, "text": item["question"], **_kept(item, "beir")}, ensure_ascii=False))
        grades: dict[str, Any] = origin["grades"] if isinstance(origin.get("grades"), dict) else {}
        for citation in item.get("citations") or []:
            unit = citation.get("chunkId") or citation["docId"]
            units.append(unit)
            qrels.append(f"{query_id}\t{unit}\t{grades.get(unit, _GRADE[citation.get('mode', 'required')])}")
        _count_lost(report, item, [*_UNHELD, "reference"])
    report.written = len(items)
    write_output_file(folder / "queries.jsonl", "".join(line + "\n" for line in queries))
    write_output_file(folder / "qrels" / f"{split}.tsv", "".join(line + "\n" for line in qrels))
    report.files += [str(folder / "queries.jsonl"), str(folder / "qrels" / f"{split}.tsv")]
    if chunks:
        docs: dict[str, list[str]] = {}
        for chunk in chunks.values():
            docs.setdefault(chunk.doc_id, []).append(chunk.text)
        lines = [json.dumps({"_id": chunk.chunk_id, "title": "", "text": chunk.text}, ensure_ascii=False) for chunk in chunks.values()]
        lines += [json.dumps({"_id": doc, "title": "", "text": "\n\n".join(texts)}, ensure_ascii=False)
                  for doc, texts in docs.items() if doc not in chunks and doc in set(units)]
        write_output_file(folder / "corpus.jsonl", "".join(line + "\n" for line in lines))
        report.files.append(str(folder / "corpus.jsonl"))
    else:
        report.lost["corpus.jsonl (--corpus CHUNKS writes it)"] = len(items)
