"""Loading the Markdown knowledge base.

Each document is one ``<doc_id>.md`` file::

    # Title
    updated: 2026-05-01
    valid_to: 2026-03-31          (optional)
    superseded_by: other-doc-id   (optional)

    First paragraph ...

    Second paragraph ...

The metadata block runs from the line after the title to the first blank line.
Every paragraph after it becomes one chunk with id ``<doc_id>#p<N>`` (N from 1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_META_LINE = re.compile(r"^([a-z][a-z_]*):\s*(.+?)\s*$")


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    title: str
    text: str
    position: int
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def superseded(self) -> bool:
        """True when the source document has been replaced by a newer one."""
        return bool(self.metadata.get("superseded_by"))


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    metadata: Mapping[str, str]
    paragraphs: tuple[str, ...]

    def chunks(self) -> Iterator[Chunk]:
        for n, paragraph in enumerate(self.paragraphs, start=1):
            yield Chunk(
                chunk_id=f"{self.doc_id}#p{n}",
                doc_id=self.doc_id,
                title=self.title,
                text=paragraph,
                position=n,
                metadata=self.metadata,
            )


class CorpusFormatError(ValueError):
    pass


def parse_document(doc_id: str, raw: str) -> Document:
    lines = raw.replace("\r\n", "\n").split("\n")
    if not lines or not lines[0].startswith("# "):
        raise CorpusFormatError(f"{doc_id}: first line must be '# Title'")
    title = lines[0][2:].strip()

    metadata: dict[str, str] = {}
    i = 1
    while i < len(lines) and lines[i].strip():
        match = _META_LINE.match(lines[i].strip())
        if not match:
            raise CorpusFormatError(f"{doc_id}: unexpected line in metadata block: {lines[i]!r}")
        metadata[match.group(1)] = match.group(2)
        i += 1

    body = "\n".join(lines[i:])
    paragraphs = tuple(
        " ".join(block.split()) for block in re.split(r"\n\s*\n", body) if block.strip()
    )
    if not paragraphs:
        raise CorpusFormatError(f"{doc_id}: document has no paragraphs")
    return Document(doc_id=doc_id, title=title, metadata=metadata, paragraphs=paragraphs)


@dataclass(frozen=True)
class Corpus:
    documents: tuple[Document, ...]
    chunks: tuple[Chunk, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_chunk", {c.chunk_id: c for c in self.chunks})
        object.__setattr__(self, "_by_doc", {d.doc_id: d for d in self.documents})

    def chunk(self, chunk_id: str) -> Chunk:
        return self._by_chunk[chunk_id]  # type: ignore[attr-defined]

    def document(self, doc_id: str) -> Document:
        return self._by_doc[doc_id]  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.chunks)


def load_corpus(directory: str | Path) -> Corpus:
    """Read every ``*.md`` file in *directory* (sorted by name for determinism)."""
    directory = Path(directory)
    paths = sorted(directory.glob("*.md"))
    if not paths:
        raise FileNotFoundError(f"no Markdown documents found in {directory}")
    documents = tuple(parse_document(p.stem, p.read_text(encoding="utf-8")) for p in paths)
    chunks = tuple(chunk for doc in documents for chunk in doc.chunks())
    return Corpus(documents=documents, chunks=chunks)
