"""A document corpus as chunks: what `crucible golden generate` writes questions from.

Two inputs:

* **A folder** of ``.md`` / ``.txt`` files (recursively, in sorted path order; hidden files and
  folders skipped). ``doc_id`` is the file's path relative to the folder, without its extension
  (``guides/returns``). Each file is split into passages at Markdown headings (``#`` lines) and
  blank lines; paragraphs shorter than :data:`MIN_PASSAGE_CHARS` are merged with the next one of
  the same section (a passage needs some substance to write a question from), and a heading is
  kept at the start of the passage that follows it. Fenced code blocks are never split. Chunk ids
  are ``<doc_id>#p<K>``, K from 1 in file order: a file that does not change keeps its ids.
* **A .jsonl file** of ready chunks, one JSON object per line: ``chunk_id``, ``doc_id``, ``text``
  and an optional ``metadata`` object (``chunkId`` / ``docId`` are accepted too).

A bad input is one :class:`CorpusError` naming the file, the line and the field, with a HINT. An
empty corpus is an error too.

This module never imports pytest.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..json_input import jsonl_object
from ..json_input import shown as _printable

__all__ = ["MIN_PASSAGE_CHARS", "TEXT_SUFFIXES", "Chunk", "CorpusError", "load_corpus", "split_passages"]

#: A paragraph shorter than this is merged with the next one (same section) into one passage.
MIN_PASSAGE_CHARS = 200
#: The files a corpus folder is read from.
TEXT_SUFFIXES = (".md", ".markdown", ".txt")

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(?P<title>.*?)\s*#*\s*$")
_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
_JSONL_FIELDS = {"chunk_id": "chunk_id", "chunkId": "chunk_id", "doc_id": "doc_id", "docId": "doc_id",
                 "text": "text", "metadata": "metadata"}


@dataclass(frozen=True)
class Chunk:
    """One passage of the corpus. Hashable by id, document and text (``metadata`` is left out of the hash)."""

    chunk_id: str
    doc_id: str
    text: str
    metadata: dict = field(default_factory=dict, hash=False, compare=False)


class CorpusError(Exception):
    """A corpus that cannot be read. ``str()`` is the whole user-facing message (problem, then HINT)."""

    def __init__(self, path: str | Path, line: int | None, field_name: str | None, problem: str, hint: str = ""):
        self.path, self.line, self.field, self.problem, self.hint = str(path), line, field_name, problem, hint
        where = self.path if line is None else f"{self.path}:{line}"
        what = f"field '{_printable(field_name)}': {problem}" if field_name else problem
        super().__init__(f"{where}: {what}" + (f"\nHINT: {hint}" if hint else ""))


def load_corpus(path: str | Path) -> list[Chunk]:
    """The chunks of a corpus folder or ``.jsonl`` file (see the module docstring); raises :class:`CorpusError`."""
    root = Path(path)
    if root.is_dir():
        chunks = _load_folder(root)
        if not chunks:
            raise CorpusError(root, None, None, f"no passage found: the folder holds no non-empty {'/'.join(TEXT_SUFFIXES)} file",
                              "point --corpus at a folder of Markdown or text files, or at a .jsonl file of chunks")
        return chunks
    if not root.exists():
        raise CorpusError(root, None, None, "no such file or folder", "check the path given to --corpus")
    if root.suffix.lower() == ".jsonl":
        return _load_jsonl(root)
    if root.suffix.lower() in TEXT_SUFFIXES:
        chunks = _file_chunks(root, root.stem)
        if not chunks:
            raise CorpusError(root, None, None, "no passage found: the file is empty", "give a file with some text")
        return chunks
    raise CorpusError(root, None, None, f"unsupported corpus file type {root.suffix or '(none)'!r}",
                      "give a folder of .md/.txt files, or a .jsonl file with one chunk per line "
                      '({"chunk_id": ..., "doc_id": ..., "text": ...})')


# -- folders ---------------------------------------------------------------------------------------
def _load_folder(root: Path) -> list[Chunk]:
    files = sorted(
        (p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES
         and not any(part.startswith(".") for part in p.relative_to(root).parts)),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    chunks: list[Chunk] = []
    seen: dict[str, Path] = {}
    for file in files:
        doc_id = file.relative_to(root).with_suffix("").as_posix()
        if doc_id in seen:
            raise CorpusError(file, None, None, f"document id {doc_id!r} is also the id of {seen[doc_id]}",
                              "two files differ only by their extension; rename one of them")
        seen[doc_id] = file
        chunks.extend(_file_chunks(file, doc_id, source=file.relative_to(root).as_posix()))
    return chunks


def _file_chunks(file: Path, doc_id: str, source: str | None = None) -> list[Chunk]:
    data = file.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusError(file, line, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})", "save the file as UTF-8") from None
    chunks = []
    for number, (passage, heading) in enumerate(split_passages(text), start=1):
        metadata: dict[str, Any] = {"source": source or file.name}
        if heading:
            metadata["heading"] = heading
        chunks.append(Chunk(chunk_id=f"{doc_id}#p{number}", doc_id=doc_id, text=passage, metadata=metadata))
    return chunks


def split_passages(text: str, min_chars: int = MIN_PASSAGE_CHARS) -> list[tuple[str, str]]:
    """``(passage, heading)`` pairs of one document, in order (see the module docstring)."""
    blocks: list[tuple[str, str]] = []  # ("heading" | "para", text)
    para: list[str] = []
    in_fence = False

    def end_paragraph() -> None:
        if para:
            body = "\n".join(para).strip()
            if body:
                blocks.append(("para", body))
            para.clear()

    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.rstrip()
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            para.append(line)
            continue
        if in_fence:
            para.append(line)
            continue
        heading_match = _HEADING_RE.match(line)
        if heading_match:
            end_paragraph()
            blocks.append(("heading", heading_match["title"].strip()))
        elif not line.strip():
            end_paragraph()
        else:
            para.append(line)
    end_paragraph()

    passages: list[tuple[str, str]] = []
    heading, current = "", list[str]()  # the section's heading, the paragraphs gathered for the next passage

    def flush(at_section_end: bool) -> None:
        if not current:
            return
        if at_section_end and passages and passages[-1][1] == heading and sum(len(p) for p in current) < min_chars:
            # A short last paragraph of a section joins the passage before it rather than standing alone.
            previous, _ = passages.pop()
            passages.append((previous + "\n\n" + "\n\n".join(current), heading))
        else:
            body = "\n\n".join(current)
            passages.append(((heading + "\n\n" + body) if heading else body, heading))
        current.clear()

    for kind, body in blocks:
        if kind == "heading":
            flush(at_section_end=True)
            heading = body
            continue
        current.append(body)
        if sum(len(p) for p in current) >= min_chars:
            flush(at_section_end=False)
    flush(at_section_end=True)
    return passages


# -- .jsonl ----------------------------------------------------------------------------------------
def _load_jsonl(path: Path) -> list[Chunk]:
    data = path.read_bytes()
    chunks: list[Chunk] = []
    where: dict[str, int] = {}
    example = '{"chunk_id": "returns#p1", "doc_id": "returns", "text": "Returns are accepted within 30 days."}'
    for number, raw_bytes in enumerate(data.split(b"\n"), start=1):
        try:
            raw = raw_bytes.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(path, number, None, f"not UTF-8 text ({exc.reason})", "save the file as UTF-8") from None
        if not raw.strip():
            continue

        def fail(field_name: str, problem: str, hint: str, line: int = number) -> CorpusError:
            return CorpusError(path, line, None if field_name == "json" else field_name, problem, hint)

        record = jsonl_object(raw, fail, example=example, object_hint=f"one chunk object per line, e.g. {example}",
                              plain_hint="chunk text must be plain UTF-8 text")
        values: dict[str, Any] = {}
        for key, value in record.items():
            name = _JSONL_FIELDS.get(key)
            if name is None:
                close = difflib.get_close_matches(key, list(_JSONL_FIELDS), n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise fail(key, "unknown field", hint + "a chunk has chunk_id, doc_id, text and an optional metadata object")
            if name in values:
                raise fail(key, f"given twice (as {name} and as its other spelling)", "keep one spelling")
            values[name] = value
        for name in ("chunk_id", "doc_id", "text"):
            value = values.get(name)
            if value is None:
                raise fail(name, "missing", f"every chunk needs chunk_id, doc_id and text, e.g. {example}")
            if not isinstance(value, str) or not value.strip():
                got = json.dumps(value)[:60]
                raise fail(name, f"expected a non-empty string, got {got}", f"e.g. {example}")
        metadata = values.get("metadata", {})
        if not isinstance(metadata, dict):
            raise fail("metadata", f"expected an object, got {type(metadata).__name__}", 'e.g. "metadata": {"title": "Returns"}')
        chunk_id = values["chunk_id"]
        if chunk_id in where:
            raise fail("chunk_id", f"duplicate chunk id {chunk_id!r} (first on line {where[chunk_id]})", "chunk ids must be unique")
        where[chunk_id] = number
        chunks.append(Chunk(chunk_id=chunk_id, doc_id=values["doc_id"], text=values["text"], metadata=dict(metadata)))
    if not chunks:
        raise CorpusError(path, None, None, "no chunk found: the file is empty", f"one chunk per line, e.g. {example}")
    return chunks
