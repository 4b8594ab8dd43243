"""Retrieval benchmarks read as :class:`~pytest_crucible.golden_set.sources.SourceRecord`s: a BEIR folder, or
TREC topics with a qrels file. Their queries become golden items, their human judgments the items' citations
(and rows of the qrels ledger, which the import command appends).

* **BEIR**: a folder holding ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
  ``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``, a header line first). The
  queries judged in the split become items; a corpus id is a document (``doc:<id>``).
* **TREC**: a topics file (the classic ``<top> <num> <title> <desc> <narr>`` blocks, ``<topic number=..>``
  blocks, or ``qid<TAB>text`` lines) and a TREC qrels file (``qid iter docno grade``, read by
  ``qrels/formats.py``: ``doc:X`` a document, a bare docno a chunk).

Memory stays bounded at 100,000 queries: queries are streamed, only the qrels (a few numbers a judgment)
and the corpus ids the qrels name are held, and the corpus is read for its ids alone, one line at a time.

Pure: no pytest, no store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from .schema import GoldenFileError
from .sources import Read, SourceRecord

#: The three parts of a BEIR folder.
BEIR_PARTS = ("corpus.jsonl", "queries.jsonl", "qrels/")

Judgments = dict[str, list[tuple[str | None, str, int]]]  # query id -> (chunk id, doc id, grade)


def beir_paths(folder: Path, split: str) -> tuple[Path, Path, Path]:
    """corpus.jsonl, queries.jsonl and qrels/<split>.tsv of a BEIR folder; a missing part is named."""
    if not folder.is_dir():
        raise GoldenFileError(str(folder), None, None, "is not a folder",
                              "--from beir reads a BEIR dataset folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    corpus, queries, qrels = folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"
    missing = [name for name, path in (("corpus.jsonl", corpus), ("queries.jsonl", queries)) if not path.is_file()]
    if not qrels.is_file():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        missing.append(f"qrels/{split}.tsv" + (f" (qrels/ holds: {', '.join(found)}; --split chooses)" if found else ""))
    if missing:
        raise GoldenFileError(str(folder), None, None, f"a BEIR folder without {' and '.join(missing)}",
                              "a BEIR dataset holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv (BEIR's own layout)")
    return corpus, queries, qrels


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(number, text) of a text file's lines, one at a time (a corpus may be larger than memory)."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise GoldenFileError(str(path), number, None, f"not UTF-8 text ({exc.reason})", "save the file as UTF-8") from None
    except OSError as exc:
        raise GoldenFileError(str(path), None, None, f"cannot read the file: {exc.strerror}", "check the path") from None


def read_beir_qrels(path: Path) -> Judgments:
    judged: Judgments = {}
    for number, text in _lines(path):
        if not text.strip():
            continue
        cells = text.split("\t")
        if number == 1 and cells[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue  # the header
        if len(cells) != 3:
            raise GoldenFileError(str(path), number, "columns", f"expected 3 tab-separated cells, got {len(cells)}",
                                  "a BEIR qrels line is query-id<TAB>corpus-id<TAB>score")
        try:
            grade = int(cells[2].strip())
        except ValueError:
            raise GoldenFileError(str(path), number, "score", f"expected a whole number, got {cells[2].strip()!r}",
                                  "BEIR scores are graded relevance: 0, 1, 2, ...") from None
        judged.setdefault(cells[0].strip(), []).append((None, cells[1].strip(), grade))
    return judged


def check_corpus_ids(corpus: Path, judged: Judgments) -> list[str]:
    """The judged documents corpus.jsonl does not hold (each line parsed for its ``_id`` only)."""
    wanted = {doc for rows in judged.values() for _chunk, doc, _grade in rows}
    for number, text in _lines(corpus):
        if not text.strip():
            continue
        try:
            doc_id = json.loads(text).get("_id")
        except (ValueError, AttributeError):
            raise GoldenFileError(str(corpus), number, None, "not a JSON object", 'a BEIR corpus line is {"_id": ..., "text": ...}') from None
        wanted.discard(str(doc_id))
        if not wanted:
            break
    return sorted(wanted)


def read_beir(folder: Path, split: str, judged: Judgments, question_field: str = "text") -> Read:
    """The queries of queries.jsonl judged in ``judged``, streamed, with their judgments."""
    _corpus, queries, _qrels = beir_paths(folder, split)
    shown = str(queries)
    for number, text in _lines(queries):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except ValueError as exc:
            yield GoldenFileError(shown, number, None, f"not valid JSON: {exc}", 'a BEIR query line is {"_id": "q1", "text": "..."}')
            continue
        if not isinstance(record, dict) or "_id" not in record:
            yield GoldenFileError(shown, number, "_id", "missing", 'a BEIR query line is {"_id": "q1", "text": "..."}')
            continue
        query_id = str(record["_id"])
        if query_id not in judged:
            continue  # a query of another split
        question = record.get(question_field)
        if not isinstance(question, str) or not question.strip():
            yield GoldenFileError(shown, number, question_field, "missing: the query's text", "--map question=FIELD names another")
            continue
        kept = {key: value for key, value in record.items() if key not in ("_id", question_field)}
        yield SourceRecord(number, question, source_id=query_id, judged=judged[query_id], kept=kept)


# ------------------------------------------------------------------------------------------------- TREC
_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_TAG = re.compile(r"<(num|title|desc|narr)>", re.I)
_TOPIC = re.compile(r"<topic\s+number=\"?([^\">\s]+)\"?[^>]*>(.*?)</topic>", re.S | re.I)
_CHILD = re.compile(r"<(\w+)>(.*?)</\1>", re.S)
_LABEL = re.compile(r"^\s*(Number|Topic|Description|Narrative)\s*:\s*", re.I)


def read_trec_qrels(path: Path, by: str) -> Judgments:
    from ..qrels.formats import read_qrels_file

    judged: Judgments = {}
    for row in read_qrels_file(path, source="human", by=by):
        doc = row["doc_id"] or row["chunk_id"]
        judged.setdefault(row["query_id"], []).append((row["chunk_id"], doc, int(row["grade"])))
    return judged


def _topics(text: str) -> Iterator[tuple[int, str, dict[str, str]]]:
    """(line, topic id, fields) of a topics file in any of the three layouts."""
    def line_at(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    if _TOP.search(text):
        for block in _TOP.finditer(text):
            body, fields = block.group(1), {}
            marks = list(_TAG.finditer(body))
            for mark, following in zip(marks, [*marks[1:], None], strict=True):
                value = body[mark.end():following.start() if following else len(body)]
                fields[mark.group(1).lower()] = " ".join(_LABEL.sub("", value).split())
            yield line_at(block.start()), fields.pop("num", ""), fields
    elif _TOPIC.search(text):
        for block in _TOPIC.finditer(text):
            fields = {tag.lower(): " ".join(value.split()) for tag, value in _CHILD.findall(block.group(2))}
            yield line_at(block.start()), block.group(1), fields
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                qid, _, query = line.partition("\t")
                yield number, qid.strip(), {"title": query.strip()}


def read_trec(path: Path, judged: Judgments, question_field: str | None = None) -> Read:
    shown = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise GoldenFileError(shown, None, None, f"cannot read the file: {exc.strerror}", "check the path") from None
    except UnicodeDecodeError as exc:
        raise GoldenFileError(shown, None, None, f"not UTF-8 text ({exc.reason})", "save the file as UTF-8") from None
    for line, topic, fields in _topics(text):
        if not topic:
            yield GoldenFileError(shown, line, "num", "missing: the topic's number", "<num> Number: 301")
            continue
        if topic not in judged:
            continue
        name = question_field or next((key for key in ("title", "query", "question", "desc") if fields.get(key)), "title")
        question = fields.get(name, "")
        if not question:
            yield GoldenFileError(shown, line, name, "missing: the topic's text", "--map question=desc takes the description")
            continue
        kept = {key: value for key, value in fields.items() if key != name}
        yield SourceRecord(line, question, source_id=topic, judged=judged[topic], kept=kept)
