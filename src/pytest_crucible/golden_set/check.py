"""`crucible golden check FILE... [--corpus CORPUS]`: golden files validated without running anything, every
problem of a file at once (``schema.golden_file_problems``), and, with a corpus, every citation checked
against it: a cited chunk that does not exist, a cited document that does not exist, a chunk cited under
another document's ``docId``. Each finding names the file, the line and the field, with a HINT.

Pure: no pytest, no store.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import Chunk
from .schema import GoldenFileError, GoldenItem


@dataclass
class CheckReport:
    files: int = 0
    items: int = 0
    citations: int = 0
    problems: list[GoldenFileError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _near(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    return f"did you mean {close[0]!r}? " if close else ""


def citation_problems(items: Sequence[GoldenItem], chunks: Sequence[Chunk], shown: str) -> list[GoldenFileError]:
    """The citations of ``items`` (one golden file's) that the corpus does not hold as written."""
    by_chunk = {chunk.chunk_id: chunk for chunk in chunks}
    docs = sorted({chunk.doc_id for chunk in chunks})
    known_docs = set(docs)
    chunk_ids = sorted(by_chunk)
    problems = []
    for item in items:
        for number, citation in enumerate(item.citations):
            where = f"citations[{number}]"
            if citation.chunk_id is not None:
                chunk = by_chunk.get(citation.chunk_id)
                if chunk is None:
                    problems.append(GoldenFileError(
                        shown, item.line, f"{where}.chunkId", f"chunk {citation.chunk_id!r} is not in the corpus",
                        f"{_near(citation.chunk_id, chunk_ids)}a citation names a chunk id as the corpus writes it "
                        "(a folder's chunks are <doc>#p<K>); no ranking can ever contain a chunk that does not exist"))
                elif chunk.doc_id != citation.doc_id:
                    problems.append(GoldenFileError(
                        shown, item.line, f"{where}.docId",
                        f"chunk {citation.chunk_id!r} belongs to document {chunk.doc_id!r}, not {citation.doc_id!r}",
                        f'write "docId": "{chunk.doc_id}" (a doc-level match would otherwise look for the wrong document)'))
            elif citation.doc_id not in known_docs:
                problems.append(GoldenFileError(
                    shown, item.line, f"{where}.docId", f"document {citation.doc_id!r} is not in the corpus",
                    f"{_near(citation.doc_id, docs)}a folder's document id is its path without the extension"))
    return problems


def check_golden_files(paths: Sequence[str | Path], chunks: Sequence[Chunk] | None = None) -> CheckReport:
    """Every problem of the golden files (each file read whole), and of their citations against ``chunks``."""
    from .schema import golden_file_problems

    report = CheckReport()
    for path in paths:
        report.files += 1
        items, problems = golden_file_problems(path)
        report.items += len(items)
        report.citations += sum(len(item.citations) for item in items)
        if chunks is not None:
            problems = problems + citation_problems(items, chunks, str(path))
        # A file's problems in line order, as an editor walks it (stable: a line's own order is kept).
        report.problems += sorted(problems, key=lambda problem: problem.line or 0)
    return report
