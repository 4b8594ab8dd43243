"""Reading and writing relevance judgments (qrels) and run files as text.

Two qrels formats are read and written:

- **TREC qrels** (any file not ending in ``.jsonl``): ``qid iter docno grade`` per line,
  as NIST trec_eval reads them. The docno is a *unit* of :mod:`pytest_crucible.qrels.grades`:
  ``doc:<id>`` judges a whole document, ``chunk:<id>`` a chunk, and a bare docno (a file
  from elsewhere) is a chunk id. What we write always uses the prefixed form, so a file
  we wrote reads back to the same units. The ``iter`` column is written as 0 and ignored.
- **JSONL**: one object per line, camelCase keys: ``queryId``, ``chunkId`` and/or
  ``docId``, ``grade``, and optionally ``note``, ``by``; every ledger column we export
  (``source``, ``judgeModel``, ``promptVersion``, ``createdBy``, ``runId``,
  ``createdAt``, ``id``) is accepted back, so an exported ledger re-imports.

Grades are integers 0..3 (0 not relevant .. 3 the exact answer). Only ``human``
(stamped with who) and ``llm`` (stamped with the judge model) judgments can be
imported: ``provenance`` judgments are the golden set's citations.

A TREC run file (``qid Q0 docno rank score tag``) of a crucible run holds, per query,
the ranking *units* the plugin scored (see :func:`pytest_crucible.metrics.retrieval.ranking_units`),
so ``crucible trec-eval`` on an exported effective qrels file and that run file
recomputes the plugin's retrieval metrics.

Every input error is a :class:`QrelsFormatError` naming the file, the line and the
field, what was expected, and a hint. This module never imports pytest.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, overload

from ..json_input import jsonl_object, reviewer_name, shown
from ..metrics.retrieval import ranking_units

__all__ = [
    "GRADES",
    "IMPORT_SOURCES",
    "QrelsFormatError",
    "attach_doc_ids",
    "chunk_doc_map",
    "format_effective_qrels",
    "format_qrels",
    "format_trec_run",
    "grade_problem",
    "parse_grade",
    "parse_unit",
    "read_qrels_file",
    "run_rankings",
]

GRADES = (0, 1, 2, 3)
IMPORT_SOURCES = ("human", "llm")
FORMATS = ("trec", "jsonl")

# trec_eval splits fields on C isspace(), not on Unicode whitespace.
_WS = " \t\n\r\f\v"
_FIELD_SPLIT = re.compile(r"[ \t\n\r\f\v]+")
_TREC_QRELS_EXAMPLE = "q-001 0 chunk:returns#p1 3"
_JSONL_EXAMPLE = '{"queryId": "q-001", "chunkId": "returns#p1", "grade": 3}'
_GRADE_HINT = "grades are 0 (not relevant), 1 (related), 2 (partly answers), 3 (the exact answer)"

# Ledger columns, in export order, and their camelCase names in JSONL.
_LEDGER_COLUMNS = {
    "id": "id",
    "query_id": "queryId",
    "chunk_id": "chunkId",
    "doc_id": "docId",
    "grade": "grade",
    "source": "source",
    "judge_model": "judgeModel",
    "prompt_version": "promptVersion",
    "created_by": "createdBy",
    "note": "note",
    "run_id": "runId",
    "created_at": "createdAt",
}
_JSONL_KEYS = (*_LEDGER_COLUMNS.values(), "by")


class QrelsFormatError(ValueError):
    """A qrels file (or a judgment given on the command line) that cannot be used.

    ``str()`` is the whole user-facing message: ``file:line: field 'x': problem``
    then a ``HINT:`` line, the convention of golden-file errors.
    """

    def __init__(self, path: str | Path | None, line: int | None, field: str | None, problem: str, hint: str = ""):
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.problem = problem
        self.hint = hint
        where = ":".join(part for part in (self.path, None if line is None else str(line)) if part)
        what = f"field '{shown(field)}': {problem}" if field else problem
        message = f"{where}: {what}" if where else what
        if hint:
            message += f"\nHINT: {hint}"
        super().__init__(message)


# --------------------------------------------------------------------------
# small parsers shared by the file readers and the command line


def parse_unit(docno: str) -> tuple[str | None, str | None]:
    """(chunk_id, doc_id) of a TREC docno: ``doc:<id>``, ``chunk:<id>``, or a bare chunk id."""
    if docno.startswith("doc:"):
        return None, docno[4:] or None
    if docno.startswith("chunk:"):
        return docno[6:] or None, None
    return docno or None, None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        if digits.isascii() and digits.isdigit():
            return int(text)
    return None


def parse_grade(value: Any) -> int | None:
    """The grade as an int when ``value`` is an integer 0..3 (an int or its text), else None."""
    grade = _as_int(value)
    return grade if grade in GRADES else None


def grade_problem(value: Any) -> tuple[str, str]:
    """(problem, hint) for a grade that :func:`parse_grade` refused: what was expected and,
    for grades from other scales (trec_eval's -1, wider scales), what to do about it."""
    shown = repr(value) if isinstance(value, str) else json.dumps(value)
    problem = f"expected an integer grade 0..3, got {shown}"
    grade = _as_int(value)
    if grade is not None and grade < 0:
        return problem, (f"trec_eval files use {grade} for 'in the pool but not judged': drop those lines "
                         f"(an unjudged unit already counts as not relevant); {_GRADE_HINT}")
    if grade is not None:
        return problem, f"this ledger uses the 4-level UMBRELA scale: map a wider scale onto 0..3 before importing; {_GRADE_HINT}"
    return problem, _GRADE_HINT


# --------------------------------------------------------------------------
# reading


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    """(line number, text) of every line, each decoded as UTF-8 on its own, so that the
    first bad line, whatever is wrong with it, is the one an error names."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise QrelsFormatError(path, None, None, f"cannot read the qrels file: {exc.strerror or exc}",
                               "check the path; TREC qrels ('qid iter docno grade') or .jsonl judgments") from None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise QrelsFormatError(path, number, "encoding", f"not valid UTF-8 (byte {raw[exc.start]:#04x})",
                                   "save the file as UTF-8") from None
        yield number, line.rstrip("\r")


def _check_source(path: Path, line: int | None, source: Any) -> str:
    if source == "provenance":
        raise QrelsFormatError(
            path, line, "source", "provenance judgments cannot be imported: they are the golden set's citations",
            "edit the citations in the golden file to change them; import corrections as --source human --by NAME "
            "(or judge output as --source llm --judge-model MODEL)")
    if source not in IMPORT_SOURCES:
        raise QrelsFormatError(path, line, "source", f"expected 'human' or 'llm', got {source!r}",
                               "human judgments need --by NAME, llm judgments need --judge-model MODEL")
    return source


def _row(path: Path, line: int, *, query_id: str, chunk_id: str | None, doc_id: str | None, grade: int, source: str,
         by: str | None, judge_model: str | None, prompt_version: str | None, note: str | None,
         run_id: str | None = None, created_at: str | None = None) -> dict[str, Any]:
    source = _check_source(path, line, source)
    if source == "human":
        if not by:
            raise QrelsFormatError(path, line, "by", "a human judgment needs the name of who made it",
                                   "pass --by NAME (or give a 'by' key on each JSONL line)")
        try:
            by = reviewer_name(str(by))
        except ValueError as exc:
            raise QrelsFormatError(path, line, "by", f"the name {exc}",
                                   "pass --by NAME (or a 'by' key on the JSONL line): the person who judged") from None
        if judge_model:
            raise QrelsFormatError(path, line, "judgeModel", f"a human judgment has no judge model, got {judge_model!r}",
                                   "is this an llm judgment? then its source is 'llm'")
        judge_model = None
    elif not judge_model:
        raise QrelsFormatError(path, line, "judgeModel", "an llm judgment needs the judge model that made it",
                               "pass --judge-model MODEL (or give a 'judgeModel' key on each JSONL line)")
    return {
        "query_id": query_id,
        "chunk_id": chunk_id,
        "doc_id": doc_id,
        "grade": grade,
        "source": source,
        "judge_model": judge_model,
        "prompt_version": prompt_version,
        "created_by": by,
        "note": note,
        "run_id": run_id,
        "created_at": created_at,
    }


def _read_trec(path: Path, source: str, by: str | None, judge_model: str | None, note: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    first_seen: dict[tuple[str, str], int] = {}
    for number, line in _lines(path):
        text = line.strip(_WS)
        if not text or text.startswith("#"):
            continue
        fields = _FIELD_SPLIT.split(text)
        if len(fields) != 4:
            hint = f"a TREC qrels line looks like '{_TREC_QRELS_EXAMPLE}' (qid iter docno grade)"
            if len(fields) >= 6:
                hint += "; this looks like a run line (qid Q0 docno rank score tag)"
            if text.startswith("{"):
                hint += "; JSON lines are read from files named *.jsonl"
            raise QrelsFormatError(path, number, "columns", f"expected 4 whitespace-separated fields, got {len(fields)}", hint)
        qid, _iteration, docno, rel = fields
        grade = parse_grade(rel)
        if grade is None:
            problem, hint = grade_problem(rel)
            raise QrelsFormatError(path, number, "grade", problem, hint)
        chunk_id, doc_id = parse_unit(docno)
        if chunk_id is None and doc_id is None:
            raise QrelsFormatError(path, number, "docno", f"expected a unit after the prefix, got {docno!r}",
                                   "a docno is doc:<doc id>, chunk:<chunk id>, or a bare chunk id")
        unit = f"chunk:{chunk_id}" if chunk_id else f"doc:{doc_id}"
        if (qid, unit) in first_seen:
            raise QrelsFormatError(path, number, "docno",
                                   f"{unit} is judged twice for query {qid!r} (first on line {first_seen[qid, unit]})",
                                   "keep one judgment per query and unit, as trec_eval requires")
        first_seen[qid, unit] = number
        rows.append(_row(path, number, query_id=qid, chunk_id=chunk_id, doc_id=doc_id, grade=grade, source=source, by=by,
                         judge_model=judge_model, prompt_version=None, note=note))
    return rows


@overload
def _text_field(path: Path, line: int, obj: Mapping[str, Any], key: str, *, required: Literal[True]) -> str: ...
@overload
def _text_field(path: Path, line: int, obj: Mapping[str, Any], key: str, *, required: bool = False) -> str | None: ...
def _text_field(path: Path, line: int, obj: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise QrelsFormatError(path, line, key, "missing", f"a judgment line looks like {_JSONL_EXAMPLE}")
        return None
    if not isinstance(value, str) or not value:
        shown = json.dumps(value)
        hint = "ids are JSON strings: quote them" if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            f"a judgment line looks like {_JSONL_EXAMPLE}"
        raise QrelsFormatError(path, line, key, f"expected a non-empty string, got {shown}", hint)
    return value


def _read_jsonl(path: Path, source: str, by: str | None, judge_model: str | None, note: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    snake = {snake_name: camel for snake_name, camel in _LEDGER_COLUMNS.items() if snake_name != camel}
    for number, line in _lines(path):
        if not line.strip():
            continue
        obj = jsonl_object(line, functools.partial(QrelsFormatError, path, number),
                           example=_JSONL_EXAMPLE, object_hint=f"one JSON object per line, e.g. {_JSONL_EXAMPLE}",
                           plain_hint="judgments hold plain text and numbers")
        for key in obj:
            if key not in _JSONL_KEYS:
                if key in snake:
                    hint = f"keys are camelCase: did you mean '{snake[key]}'?"
                else:
                    close = difflib.get_close_matches(key, _JSONL_KEYS, n=1)
                    hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(_JSONL_KEYS)}"
                raise QrelsFormatError(path, number, key, "unknown key", hint)
        query_id = _text_field(path, number, obj, "queryId", required=True)
        chunk_id = _text_field(path, number, obj, "chunkId")
        doc_id = _text_field(path, number, obj, "docId")
        if chunk_id is None and doc_id is None:
            raise QrelsFormatError(path, number, "chunkId", "a judgment needs a 'chunkId' or a 'docId'",
                                   "chunkId judges one chunk; docId alone judges the whole document")
        if "grade" not in obj:
            raise QrelsFormatError(path, number, "grade", "missing", _GRADE_HINT)
        grade = parse_grade(obj["grade"]) if not isinstance(obj["grade"], str) else None
        if grade is None:
            problem, hint = grade_problem(obj["grade"])
            if isinstance(obj["grade"], str):
                hint = "write the grade as a JSON number, not a string; " + _GRADE_HINT
            raise QrelsFormatError(path, number, "grade", problem, hint)
        line_by = _text_field(path, number, obj, "by")
        created_by = _text_field(path, number, obj, "createdBy")
        if line_by and created_by and line_by != created_by:
            raise QrelsFormatError(path, number, "by", f"'by' ({line_by!r}) and 'createdBy' ({created_by!r}) disagree",
                                   "give one of them")
        line_note = obj.get("note")
        if line_note is not None and not isinstance(line_note, str):
            raise QrelsFormatError(path, number, "note", f"expected a string, got {json.dumps(line_note)}", "notes are free text")
        line_source = obj.get("source", source)
        line_model = obj.get("judgeModel")
        if line_model is not None and not isinstance(line_model, str):
            raise QrelsFormatError(path, number, "judgeModel", f"expected a string, got {json.dumps(line_model)}",
                                   "the judge model's name, e.g. claude-sonnet-4-5")
        rows.append(_row(
            path, number, query_id=query_id, chunk_id=chunk_id, doc_id=doc_id, grade=grade, source=line_source,
            by=line_by or created_by or by, judge_model=line_model or judge_model,
            prompt_version=_text_field(path, number, obj, "promptVersion"),
            note=line_note if line_note is not None else note,
            run_id=_text_field(path, number, obj, "runId"), created_at=_text_field(path, number, obj, "createdAt"),
        ))
    return rows


def read_qrels_file(path: str | Path, *, source: str = "human", by: str | None = None, judge_model: str | None = None,
                    note: str | None = None) -> list[dict[str, Any]]:
    """Ledger rows (to append with ``Store.append_qrels``) from a TREC qrels or ``.jsonl`` file.

    ``source``, ``by``, ``judge_model`` and ``note`` stamp every row; a JSONL line's own
    ``source``, ``by``/``createdBy``, ``judgeModel`` and ``note`` take precedence. A
    human row needs ``by``, an llm row a ``judge_model``. Raises :class:`QrelsFormatError`.
    """
    path = Path(path)
    _check_source(path, None, source)
    if path.name.endswith(".jsonl"):
        return _read_jsonl(path, source, by, judge_model, note)
    return _read_trec(path, source, by, judge_model, note)


# --------------------------------------------------------------------------
# writing


def _unit(row: Mapping[str, Any]) -> str:
    chunk = row.get("chunk_id")
    return f"chunk:{chunk}" if chunk else f"doc:{row.get('doc_id')}"


def _token(value: str, what: str) -> str:
    if not value or any(c in _WS for c in value):
        raise QrelsFormatError(None, None, what, f"{value!r} is empty or contains whitespace, which a TREC file cannot hold",
                               "use --format jsonl for these judgments")
    return value


def format_qrels(rows: Iterable[Mapping[str, Any]], fmt: str) -> str:
    """Ledger rows as a TREC qrels file or as JSONL (every ledger column, camelCase keys).

    TREC holds one grade per query and unit, so a ledger that judged a unit more than
    once (a human override, or several sources) is refused: export its effective grades
    (:func:`format_effective_qrels`) or use JSONL.
    """
    rows = list(rows)
    if fmt == "jsonl":
        return "".join(
            json.dumps({camel: row.get(column) for column, camel in _LEDGER_COLUMNS.items()}, ensure_ascii=False) + "\n"
            for row in rows
        )
    if fmt != "trec":
        raise ValueError(f"unknown qrels format {fmt!r}: expected one of {', '.join(FORMATS)}")
    lines = []
    seen: dict[tuple[str, str], Mapping[str, Any]] = {}
    for row in rows:
        query, unit = row["query_id"], _unit(row)
        if (query, unit) in seen:
            sources = sorted({seen[query, unit]["source"], row["source"]})
            raise QrelsFormatError(
                None, None, "docno",
                f"the ledger judges {unit} of query {query!r} more than once ({', '.join(sources)}); "
                "a TREC qrels file holds one grade per query and unit",
                "--effective exports the grades the metrics use; --format jsonl exports the whole ledger")
        seen[query, unit] = row
        lines.append(f"{_token(query, 'queryId')} 0 {_token(unit, 'docno')} {int(row['grade'])}\n")
    return "".join(lines)


def format_effective_qrels(effective: Mapping[str, Mapping[str, int]], fmt: str) -> str:
    """``{query: {unit: grade}}`` (e.g. ``Store.effective_qrels``) as TREC qrels or JSONL.

    Queries in byte order, units sorted; units judged 0 are kept (they are judged, and
    trec_eval evaluates a query that has only such judgments).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown qrels format {fmt!r}: expected one of {', '.join(FORMATS)}")
    out = []
    for query in sorted(effective, key=lambda q: q.encode("utf-8", "surrogateescape")):
        for unit in sorted(effective[query]):
            grade = int(effective[query][unit])
            if fmt == "trec":
                out.append(f"{_token(query, 'queryId')} 0 {_token(unit, 'docno')} {grade}\n")
            else:
                kind, _, ident = unit.partition(":")
                record = {"queryId": query, "chunkId": ident if kind == "chunk" else None,
                          "docId": ident if kind == "doc" else None, "grade": grade}
                out.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(out)


def _retrieved_pairs(retrieved: Any) -> list[tuple[Any, Any]]:
    if isinstance(retrieved, str):
        retrieved = json.loads(retrieved)
    pairs = []
    for chunk in retrieved or []:
        chunk_id = chunk.get("chunk_id", chunk.get("chunkId"))
        doc_id = chunk.get("doc_id", chunk.get("docId"))
        pairs.append((chunk_id, doc_id))
    return pairs


def run_rankings(results: Iterable[Mapping[str, Any]], qrels: Mapping[str, Mapping[str, int]],
                 k: int | None = None) -> dict[str, list[str]]:
    """query -> the ranking units the plugin scores for each result row.

    ``results`` are ``Store.results`` rows (``item_id``, ``retrieved``: a JSON list or a
    list of ``{chunk_id, doc_id}``); ``qrels`` the run's effective qrels. The whole
    retrieved list is kept unless ``k`` is given (the plugin's MRR reads the whole
    ranking and its nDCG@10 ten ranks, whatever the cutoff K). Results that
    retrieved nothing have no ranking and are left out.
    """
    rankings: dict[str, list[str]] = {}
    for row in results:
        pairs = _retrieved_pairs(row.get("retrieved"))
        if not pairs:
            continue
        units = ranking_units(pairs, qrels.get(row["item_id"], {}))
        rankings[row["item_id"]] = units if k is None else units[:k]
    return rankings


def format_trec_run(run_rankings: Mapping[str, Iterable[str]], tag: str = "crucible") -> str:
    """A TREC run file (``qid Q0 docno rank score tag``) of ``{query: [unit, ...]}``.

    The score of rank r among n units is n - r + 1: strictly descending, so trec_eval's
    ordering (score descending, docno descending on ties) is exactly the rank order.
    ``ranking_units`` makes every unit of a ranking distinct (a repeat becomes a unique
    ``dup:<rank>:<chunk>`` key), as trec_eval requires.
    """
    tag = _token(tag, "tag")
    lines = []
    for query in sorted(run_rankings, key=lambda q: q.encode("utf-8", "surrogateescape")):
        units = list(run_rankings[query])
        if len(set(units)) != len(units):
            raise ValueError(f"query {query!r}: a ranking unit repeats; build rankings with ranking_units()")
        for rank, unit in enumerate(units, start=1):
            lines.append(f"{_token(query, 'queryId')} Q0 {_token(unit, 'docno')} {rank} {len(units) - rank + 1} {tag}\n")
    return "".join(lines)


# --------------------------------------------------------------------------
# chunk -> document, so an imported chunk judgment knows its document


def chunk_doc_map(results: Iterable[Mapping[str, Any]] = (), golden_items: Iterable[Mapping[str, Any]] = ()) -> dict[str, str]:
    """chunk id -> doc id as seen in retrieved lists and golden citations.

    A chunk seen under two different documents is left out (ambiguous).
    """
    seen: dict[str, set[str]] = {}
    for row in results:
        for chunk_id, doc_id in _retrieved_pairs(row.get("retrieved")):
            if chunk_id and doc_id:
                seen.setdefault(chunk_id, set()).add(doc_id)
    for item in golden_items:
        for citation in item.get("citations") or []:
            if citation.get("chunkId") and citation.get("docId"):
                seen.setdefault(citation["chunkId"], set()).add(citation["docId"])
    return {chunk: next(iter(docs)) for chunk, docs in seen.items() if len(docs) == 1}


def attach_doc_ids(rows: Iterable[dict[str, Any]], chunk_docs: Mapping[str, str]) -> list[dict[str, Any]]:
    """Fill the doc id of chunk judgments that lack one, where the chunk's document is known.

    A chunk-level llm judgment that knows its document never shadows a document-level
    human or provenance judgment (see :func:`pytest_crucible.qrels.grades.effective_grades`).
    """
    out = []
    for row in rows:
        if row.get("chunk_id") and not row.get("doc_id") and row["chunk_id"] in chunk_docs:
            row = {**row, "doc_id": chunk_docs[row["chunk_id"]]}
        out.append(row)
    return out
