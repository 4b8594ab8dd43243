"""`crucible golden import`: another tool's evaluation data (``golden_set/sources.py``, ``golden_set/benchmarks.py``)
written as golden items, drafts by default, so ``crucible golden review / accept / reject`` applies.

Each item records where it came from (``metadata.importedFrom``: format, file, line or row, the source's own
id) and keeps the source's fields crucible does not model (``metadata.sourceFields``), so that
``crucible golden convert`` can write them back. Ids come from the source where it has them (made valid
and unique, each change reported), otherwise from a hash of the question (stable across imports).
Reference passages given as text become citations through the corpus (``golden_set/context_match.py``);
a benchmark's judgments become citations and, through the caller, rows of the qrels ledger.

All or nothing: a record with a problem stops the import (every problem is listed, file:line and field)
unless ``skip_invalid``; the output is written whole or not at all, and never replaces a file unless
``force``. The store is the caller's: judgments reach it through ``append_judgments``.

Pure: no pytest, no SQL.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .schema import GoldenFileError, GoldenItem

FORMATS = ("ragas", "deepeval", "promptfoo", "langsmith", "beir", "trec", "csv", "jsonl")
# At most this many problems are listed; the rest are counted.
SHOWN_PROBLEMS = 10
SHOWN = 5
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._@/-]+")


class ImportFailed(Exception):
    """The records that stopped an import (nothing was written)."""

    def __init__(self, problems: list[GoldenFileError]):
        self.problems = problems
        shown = "\n".join(str(problem) for problem in problems[:SHOWN_PROBLEMS])
        more = f"\n... and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""
        super().__init__(f"{shown}{more}\nnothing was imported ({len(problems)} record(s) with a problem); "
                         "fix them, or --skip-invalid imports the others and counts what it skipped")


@dataclass
class ImportRequest:
    path: Path
    fmt: str
    output: Path
    corpus: Path | None = None
    mapping: dict[str, str] = field(default_factory=dict)
    split: str | None = None
    accept: bool = False
    skip_invalid: bool = False
    force: bool = False
    qrels: Path | None = None  # --from trec: the judgments
    by: str = "import"  # the author of a benchmark's judgments in the ledger


@dataclass
class ImportReport:
    request: ImportRequest
    written: int = 0
    accepted: int = 0
    skipped: list[GoldenFileError] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    hashed: int = 0
    contexts: int = 0
    contained: int = 0
    overlapping: int = 0
    weak: int = 0
    unmatched: list[str] = field(default_factory=list)  # item ids, one per unmatched passage
    uncited: int = 0
    unknown_chunks: int = 0
    not_imported: Counter[str] = field(default_factory=Counter)
    kept: Counter[str] = field(default_factory=Counter)
    grades: dict[int, int] = field(default_factory=dict)
    judgments: int = 0
    appended: int | None = None
    missing_docs: list[str] = field(default_factory=list)
    conversations: int = 0  # of the items written, conversations, and their turns
    turns: int = 0

    def lines(self) -> list[str]:
        """What the command prints: what was written, then each thing a reviewer should know."""
        request = self.request
        status = "active (--accept)" if request.accept else "drafts"
        lines = [f"imported {self.written} item(s) from {request.path} ({request.fmt}) into {request.output} as {status}"]
        if self.conversations:
            lines.append(f"conversations: {self.conversations} of them, {self.turns} turn(s) (a test per turn, CONV:t1 ...)")
        if self.accepted and self.accepted < self.written:
            lines.append(f"{self.written - self.accepted} item(s) stay drafts: a reference passage matched no chunk")
        if self.hashed:
            lines.append(f"ids: {self.hashed} from a hash of the question (the source has no id for them)")
        if self.renamed:
            shown = ", ".join(f"{old!r} -> {new!r}" for old, new in self.renamed[:SHOWN])
            lines.append(f"ids: {len(self.renamed)} changed to be valid and unique: {shown}" + (", ..." if len(self.renamed) > SHOWN else ""))
        if self.contexts:
            matched = self.contexts - len(self.unmatched)
            lines.append(f"citations: {matched} of {self.contexts} reference passage(s) matched a chunk ({self.contained} contained, "
                         f"{self.overlapping} by word overlap, {self.weak} of them weak and cited as acceptable)")
        if self.unmatched:
            ids = sorted(set(self.unmatched))
            lines.append(f"{len(self.unmatched)} of {self.contexts} reference passage(s) matched no chunk: the items are marked for review "
                         f"(metadata.importedFrom.unmatchedContexts): {', '.join(ids[:SHOWN])}" + (", ..." if len(ids) > SHOWN else ""))
        if self.unknown_chunks:
            lines.append(f"{self.unknown_chunks} cited chunk id(s) are not in the corpus")
        if self.uncited:
            hint = "" if request.corpus else " (--corpus CHUNKS matches their reference passages to chunks)"
            lines.append(f"{self.uncited} item(s) have no citations: their retrieval metrics will not be scored{hint}")
        if self.kept:
            lines.append("kept in metadata.sourceFields (for crucible golden convert): "
                         + ", ".join(f"{name} ({count})" for name, count in sorted(self.kept.items())))
        if self.not_imported:
            lines.append("not imported: " + ", ".join(f"{what} ({count})" for what, count in sorted(self.not_imported.items())))
        if self.grades:
            mapping = ", ".join(f"{grade}->{mapped}" for grade, mapped in sorted(self.grades.items()))
            where = f"appended {self.appended} to the qrels ledger" if self.appended is not None else "not written to the ledger (--no-ledger)"
            lines.append(f"judgments: {self.judgments} read as human judgments by {request.by!r}, {where}; grades onto 0-3: {mapping}")
        if self.missing_docs:
            lines.append(f"WARNING {len(self.missing_docs)} judged document(s) are not in corpus.jsonl: "
                         + ", ".join(self.missing_docs[:SHOWN]) + (", ..." if len(self.missing_docs) > SHOWN else ""))
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} invalid record(s) (--skip-invalid):")
            lines.extend(f"  {problem}".replace("\n", "\n  ") for problem in self.skipped[:SHOWN_PROBLEMS])
        if not request.accept and self.written:
            lines.append(f"next: crucible golden review {request.output}, then crucible golden accept {request.output} ID ...")
        return lines


def grade_mapping(grades: Iterable[int]) -> dict[int, int]:
    """A benchmark's grades onto crucible's 0-3: kept when they fit, else scaled to the highest; never
    above 3, a positive grade never 0 (it stays relevant), a negative one (TREC's spam) 0."""
    grades = sorted(set(grades))
    top = max(grades, default=0)
    if all(0 <= grade <= 3 for grade in grades):
        return {grade: grade for grade in grades}
    return {grade: 0 if grade <= 0 else max(1, min(3, round(3 * grade / top))) for grade in grades}


def question_id(fmt: str, question: str) -> str:
    """The id of an item whose source has none: stable across imports of the same question."""
    text = " ".join(question.casefold().split())
    return f"{fmt}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:10]}"


def valid_id(raw: str) -> str:
    """``raw`` as an id a golden file and a pytest node id hold: runs of other characters one ``-``."""
    return _ID_UNSAFE.sub("-", raw.strip()).strip("-")


def _records(request: ImportRequest) -> Any:
    from .benchmarks import beir_paths, read_beir, read_beir_qrels, read_trec, read_trec_qrels
    from .sources import read_promptfoo, read_tabular

    shown = str(request.path)
    if request.fmt == "beir":
        _corpus, _queries, qrels = beir_paths(request.path, request.split or "test")
        judged = read_beir_qrels(qrels)
        return judged, read_beir(request.path, request.split or "test", judged, request.mapping.get("question", "text"))
    if request.fmt == "trec":
        assert request.qrels is not None  # the command requires --qrels
        judged = read_trec_qrels(request.qrels, request.by)
        return judged, read_trec(request.path, judged, request.mapping.get("question"))
    if request.fmt == "promptfoo":
        return None, read_promptfoo(request.path, shown, request.mapping)
    return None, read_tabular(request.path, shown, request.fmt, request.mapping, request.split)


def import_golden(request: ImportRequest, append_judgments: Callable[[Iterable[dict[str, Any]]], int] | None = None) -> ImportReport:
    """Read ``request.path``, write ``request.output``; returns what happened. Raises :class:`ImportFailed`
    (records with problems), :class:`GoldenFileError` (a file that cannot be read at all) or
    :class:`~pytest_crucible.golden_set.corpus.CorpusError`. ``append_judgments`` appends a benchmark's
    judgments to the ledger (None: not written)."""
    from ..store.files import writing_output_file

    report = ImportReport(request)
    index = None
    if request.corpus is not None:
        from .context_match import ChunkIndex
        from .corpus import load_corpus

        index = ChunkIndex(load_corpus(request.corpus))
    judged, records = _records(request)
    if judged is not None:
        report.grades = grade_mapping(grade for rows in judged.values() for *_unit, grade in rows)
        if request.fmt == "beir":
            from .benchmarks import beir_paths, check_corpus_ids

            report.missing_docs = check_corpus_ids(beir_paths(request.path, request.split or "test")[0], judged)
    problems: list[GoldenFileError] = []
    judged_items: list[tuple[str, list[tuple[str | None, str, int]]]] = []  # (item id, its judgments: the qrels' own list)
    taken: set[str] = set()
    with writing_output_file(request.output) as handle:
        for record in records:
            if isinstance(record, GoldenFileError):
                problems.append(record)
                continue
            try:
                item = _item(record, request, report, index, taken)
            except GoldenFileError as exc:
                problems.append(exc)
                continue
            handle.write((json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8"))
            if record.judged:
                judged_items.append((item["id"], record.judged))
        if problems and not request.skip_invalid:
            raise ImportFailed(problems)
        if not report.written:
            raise GoldenFileError(str(request.path), None, None, "no record to import" + (f" ({len(problems)} skipped)" if problems else ""),
                                  "check the file and --from; for beir, --split names the qrels split whose queries are imported")
        report.skipped = problems
        report.judgments = sum(len(judged) for _, judged in judged_items)
        if append_judgments is not None and judged_items:  # rows made as the ledger takes them: never all at once
            report.appended = append_judgments(_ledger_rows(judged_items, request, report.grades))
    return report


def _ledger_rows(judged_items: list[tuple[str, list[tuple[str | None, str, int]]]], request: ImportRequest,
                 grades: dict[int, int]) -> Iterator[dict[str, Any]]:
    """A benchmark's judgments as human rows of the qrels ledger, under the items' ids, grades mapped onto 0-3."""
    note = f"imported from {request.fmt} {request.path}"
    for item_id, judged in judged_items:
        for chunk_id, doc_id, grade in judged:
            yield {"query_id": item_id, "chunk_id": chunk_id, "doc_id": None if chunk_id else doc_id,
                   "grade": grades.get(grade, grade), "source": "human", "created_by": request.by, "note": note}


def _item(record: Any, request: ImportRequest, report: ImportReport, index: Any, taken: set[str]) -> dict[str, Any]:
    """One record as a golden item (validated); the report counts what it did."""
    shown = str(request.path)
    if record.source_id:
        item_id = valid_id(record.source_id) or question_id(request.fmt, record.question)
    else:
        item_id = question_id(request.fmt, record.question)
    base, number = item_id, 1
    while item_id in taken:
        number += 1
        item_id = f"{base}-{number}"
    if record.source_id and item_id != record.source_id:
        report.renamed.append((record.source_id, item_id))
    elif not record.source_id and item_id != base:  # the same question twice
        report.renamed.append((base, item_id))
    citations, unmatched = _citations(record, item_id, report, index)
    origin: dict[str, Any] = {"format": request.fmt, "file": shown, "row" if request.path.suffix.lower() in (".csv", ".tsv") else "line": record.line}
    if request.fmt == "beir":
        origin["file"] = str(request.path / "queries.jsonl")
    if record.source_id is not None:
        origin["id"] = record.source_id
    if record.fields:
        origin["fields"] = record.fields
    if unmatched:
        origin["unmatchedContexts"] = unmatched
    positive = {doc_id if chunk_id is None else chunk_id: grade for chunk_id, doc_id, grade in record.judged if grade > 0}
    if positive:  # the source's own grades, for the way back out (a citation keeps only required / acceptable)
        origin["grades"] = positive
    metadata: dict[str, Any] = {"importedFrom": origin}
    if record.contexts:
        metadata["referenceContexts"] = record.contexts
    if record.kept:
        metadata["sourceFields"] = record.kept
    item: dict[str, Any] = {"id": item_id, **({"turns": record.turns} if record.turns else {"question": record.question}),
                            "status": "active" if request.accept and not unmatched else "draft"}
    for key, value in (("reference", record.reference), ("assertions", record.assertions), ("citations", citations),
                       ("kind", record.kind), ("questionType", record.question_type), ("tags", record.tags),
                       ("expectedTools", record.expected_tools)):
        if value:
            item[key] = value
    item["metadata"] = metadata
    if record.turns:  # a conversation: checked as the loader will read it, turn by turn
        from .conversations import conversation_items

        conversation_items(item, shown, record.line)
        report.conversations += 1
        report.turns += len(record.turns)
    else:
        try:
            GoldenItem.model_validate(item)
        except ValidationError as exc:
            from .schema import _validation_error

            raise _validation_error(shown if request.fmt != "beir" else origin["file"], record.line, exc) from None
    taken.add(item_id)
    if not record.source_id:
        report.hashed += 1
    report.written += 1
    report.accepted += item["status"] == "active"
    report.uncited += not citations
    report.not_imported.update(record.not_imported)
    report.kept.update(record.kept.keys())
    return item


def _citations(record: Any, item_id: str, report: ImportReport, index: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """(citations, the 1-based numbers of the passages that matched no chunk)."""
    cited: dict[tuple[str, str | None], dict[str, Any]] = {}

    def cite(doc_id: str, chunk_id: str | None, mode: str, score: float | None = None) -> None:
        entry = {"docId": doc_id, **({"chunkId": chunk_id} if chunk_id else {}), "mode": mode,
                 **({"matchScore": score} if score is not None else {})}
        known = cited.get((doc_id, chunk_id))
        if known is None or (known["mode"] == "acceptable" and mode == "required"):
            cited[doc_id, chunk_id] = entry

    unmatched: list[int] = []
    best = max((grade for grade in report.grades if grade > 0), default=1)  # the set's highest grade is required
    for chunk_id, doc_id, grade in record.judged:
        if grade > 0:
            cite(doc_id, chunk_id, "required" if grade >= best else "acceptable")
    by_chunk = {chunk.chunk_id: chunk for chunk in index.chunks} if index is not None and record.chunk_ids else {}
    for chunk_id in record.chunk_ids:
        chunk = by_chunk.get(chunk_id)
        if index is not None and chunk is None:
            report.unknown_chunks += 1
        cite(chunk.doc_id if chunk else chunk_id.split("#")[0], chunk_id, "required")
    if index is not None:
        for number, passage in enumerate(record.contexts, start=1):
            report.contexts += 1
            matches = index.match(passage)
            if not matches:
                unmatched.append(number)
                report.unmatched.append(item_id)
                continue
            if matches[0].contained:
                report.contained += 1
            else:
                report.overlapping += 1
                report.weak += matches[0].mode == "acceptable"
            for match in matches:
                cite(match.chunk.doc_id, match.chunk.chunk_id, match.mode, match.score)
    return list(cited.values()), unmatched
