"""A small, exact re-implementation of NIST trec_eval for the crucible metrics.

``crucible trec-eval qrels run`` prints the same lines as
``trec_eval [-q] [-l N] [-c] -m ... qrels run`` for the measures
pytest-crucible uses, so that numbers reported by crucible can be checked
against the tool the IR community trusts.  trec_eval
(https://github.com/usnistgov/trec_eval) is NIST software; we acknowledge the
National Institute of Standards and Technology as its source and as the
source of the reference files the test suite compares against.  No trec_eval
code is used: behaviour was taken from its documentation and checked
against its reference outputs.  Every score is that of the single implementation in
:mod:`pytest_crucible.metrics.retrieval`: :mod:`pytest_crucible.qrels.trec_fast` parses the files and
scores all queries at once with numpy, bit for bit equal to the line readers and the per-query
loop here, which stay the reference (and the fall-back for unusual input and for errors).

Supported measures
------------------
``num_q`` (number of queries evaluated, summary only), ``recip_rank``,
``P_k``, ``recall_k``, ``ndcg_cut_k`` and ``success_k`` (crucible's hit@k)
for any cutoff k >= 1.  trec_eval's ``-m`` syntax is accepted too:
``P.5,10`` means ``P_5 P_10`` and a bare family name means trec_eval's
default cutoffs (5, 10, 15, 20, 30, 100, 200, 500, 1000 for ``P``,
``recall`` and ``ndcg_cut``; 1, 5, 10 for ``success``).

trec_eval conventions reproduced here
-------------------------------------
* **Input formats.**  qrels lines are ``qid iter docno rel`` (exactly four
  whitespace-separated fields, ``iter`` ignored, ``rel`` an integer); run
  lines are ``qid Q0 docno rank score tag`` (six fields; anything after the
  tag is ignored, as trec_eval does).  Blank lines and lines whose first
  non-blank character is ``#`` are skipped; ``#`` elsewhere is an ordinary
  character (docnos such as ``msmarco_doc_00_1#4_16`` are common).  A docno
  judged twice for a query, or retrieved twice for a query, is an error, as
  in trec_eval.
* **Ranking.**  The ``rank`` column is ignored.  Documents are ranked by score,
  highest first; ties are broken by docno in *descending* byte order
  (``"B" before "A"``).  The reference outputs pin this direction: with the
  opposite tie-break the ``-l 2`` reference output is not reproduced.
* **Which queries.**  A query is evaluated when it has judgments in the qrels
  (even if none of them is relevant) and documents in the run.  Run queries
  without judgments are ignored; judged queries the run did not answer are
  ignored too, unless ``complete=True`` (trec_eval ``-c``), which scores them
  0 on every measure and averages over every judged query.
* **Queries with no relevant document** (no grade >= the relevance level)
  are evaluated and averaged in: P, recall and recip_rank are 0 for them and
  ``num_q`` counts them.  nDCG uses every positive grade whatever the level,
  so at ``-l 2`` a query judged only with grade 1 can still have nDCG > 0.
  (:func:`pytest_crucible.metrics.retrieval.retrieval_metrics`, used for
  golden sets, reports such queries as undefined instead.)
* **Averages.**  The ``all`` value of each measure is the arithmetic mean of
  the per-query values over the evaluated queries.
* **Output.**  Each line is ``"%-22s\\t%s\\t%.4f"`` (measure name
  left-justified in 22 columns, query id, value with 4 decimals; ``num_q`` is
  printed as an integer).  With per-query output, queries come in qid order
  (byte-wise string order, so ``"10"`` sorts before ``"9"``) and ``all``
  comes last.  Within a block, measures are in trec_eval's fixed order
  (``num_q``, ``recip_rank``, ``P``, ``recall``, ``ndcg_cut``,
  ``success``), cutoffs ascending, whatever order they were requested in;
  ``num_q`` appears only in the ``all`` block.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, cast

import numpy as np

from pytest_crucible.metrics.retrieval import (
    hit_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)
from pytest_crucible.qrels import trec_fast

__all__ = [
    "DEFAULT_CUTOFFS",
    "DEFAULT_MEASURES",
    "TrecFormatError",
    "evaluate",
    "format_trec_eval",
    "main_trec_eval",
    "parse_measures",
    "rank_run",
    "read_qrels",
    "read_run",
]

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[tuple[str, float]]]

#: Measures printed when none are requested.
DEFAULT_MEASURES = ("num_q", "recip_rank", "P_10", "recall_10", "ndcg_cut_10")

#: trec_eval's default cutoffs for P, recall and ndcg_cut (success: 1, 5, 10).
DEFAULT_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_DEFAULT_SUCCESS_CUTOFFS = (1, 5, 10)

# Measure families with a cutoff, in trec_eval's print order, mapped to the
# one implementation of each formula.
_CUTOFF_FAMILIES: dict[str, Callable[..., float]] = {
    "P": precision_at_k,
    "recall": recall_at_k,
    "ndcg_cut": ndcg_at_k,
    "success": hit_at_k,
}
_FAMILY_ORDER = ("num_q", "recip_rank", "P", "recall", "ndcg_cut", "success")

_QRELS_EXAMPLE = "301 0 FBIS3-10082 1"
_RUN_EXAMPLE = "301 Q0 FBIS3-10082 1 12.5 myrun"


class TrecFormatError(ValueError):
    """A qrels or run file line that cannot be parsed.

    The message names the file, the line number, the field and what was
    expected, followed by a hint; it is a single line.
    """

    def __init__(
        self, path: str | Path, line: int, field: str | None, problem: str, hint: str
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = f"{self.path}, line {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}; hint: {hint}")


# --------------------------------------------------------------------------
# reading


def _text(field: bytes) -> str:
    return field.decode("utf-8", "surrogateescape")


def _content_lines(path: str | Path) -> Iterable[tuple[int, list[bytes]]]:
    """(line number, raw fields) for every non-blank, non-comment line; readers decode what they use."""
    # Read bytes: bytes.split() splits on exactly the ASCII whitespace C's isspace() knows,
    # as trec_eval does, and is much faster than a regex. surrogateescape: docnos are
    # opaque bytes to trec_eval; never fail on them.
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields or fields[0].startswith(b"#"):
                continue
            yield number, fields


def _read_bytes(path: str | Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file (``qid iter docno rel``) into ``{qid: {docno: grade}}``."""
    # numpy parses a well-formed file; anything else (including every error) goes line by line.
    with trec_fast.gc_paused():
        qrels = trec_fast.parse_qrels(_read_bytes(path))
    return qrels if qrels is not None else _read_qrels_lines(path)


def _read_qrels_lines(path: str | Path) -> Qrels:
    """The reference reader: one line at a time, with the precise error for a bad line."""
    by_query: dict[bytes, dict[bytes, int]] = {}  # decoded once at the end, as in read_run
    for number, fields in _content_lines(path):
        if len(fields) != 4:
            hint = f"a qrels line looks like '{_QRELS_EXAMPLE}'"
            if len(fields) >= 6:
                hint += "; this looks like a run line: are the qrels and run arguments swapped?"
            raise TrecFormatError(
                path, number, None,
                f"expected 4 whitespace-separated fields (qid iter docno rel), got {len(fields)}",
                hint,
            )
        qid, docno = fields[0], fields[2]
        try:
            grade = int(fields[3])
        except ValueError:
            raise TrecFormatError(
                path, number, "rel",
                f"expected an integer relevance grade, got {_text(fields[3])!r}",
                "grades are integers such as 0 (non-relevant), 1, 2, or -1 (unjudged)",
            ) from None
        judged = by_query.get(qid)
        if judged is None:
            judged = by_query[qid] = {}
        elif docno in judged:
            raise TrecFormatError(
                path, number, "docno",
                f"document {_text(docno)!r} is judged twice for query {_text(qid)!r} "
                f"(first on line {_first_line(path, qid, docno)})",
                "keep one judgment per (qid, docno), as trec_eval requires",
            )
        judged[docno] = grade
    return {_text(qid): {_text(docno): grade for docno, grade in judged.items()} for qid, judged in by_query.items()}


def read_run(path: str | Path) -> Run:
    """Read a TREC run file (``qid Q0 docno rank score tag``) into ``{qid: [(docno, score)]}``.

    Rows keep file order; use :func:`rank_run` for trec_eval's ranking.  The
    rank column and anything after the tag are ignored, as in trec_eval.
    """
    with trec_fast.gc_paused():
        run = trec_fast.parse_run(_read_bytes(path))
    return run if run is not None else _read_run_lines(path)


def _read_run_lines(path: str | Path) -> Run:
    """The reference reader: one line at a time, with the precise error for a bad line."""
    # The hot loop of `crucible trec-eval` (a run has a line per query and document): each query's
    # documents go into a dict (file order kept, a duplicate found by one lookup), a query id is
    # decoded once, and a score is parsed from its bytes. Line numbers are only needed for an
    # error, which is rare: they are found again then (_first_line).
    by_query: dict[bytes, dict[bytes, float]] = {}
    for number, fields in _content_lines(path):
        if len(fields) < 6:
            hint = f"a run line looks like '{_RUN_EXAMPLE}'"
            if len(fields) == 4:
                hint += "; this looks like a qrels line: are the qrels and run arguments swapped?"
            raise TrecFormatError(
                path, number, None,
                f"expected 6 whitespace-separated fields (qid Q0 docno rank score tag), "
                f"got {len(fields)}",
                hint,
            )
        qid, docno = fields[0], fields[2]
        try:
            score = float(fields[4])
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise TrecFormatError(
                path, number, "score",
                f"expected a finite number in column 5, got {_text(fields[4])!r}",
                "column 5 is the retrieval score (higher ranks first); column 4 is the rank",
            )
        documents = by_query.get(qid)
        if documents is None:
            documents = by_query[qid] = {}
        elif docno in documents:
            raise TrecFormatError(
                path, number, "docno",
                f"document {_text(docno)!r} is retrieved twice for query {_text(qid)!r} "
                f"(first on line {_first_line(path, qid, docno)})",
                "remove duplicate rows; trec_eval rejects runs with duplicate documents",
            )
        documents[docno] = score
    return {_text(qid): [(_text(docno), score) for docno, score in documents.items()]
            for qid, documents in by_query.items()}


def _first_line(path: str | Path, qid: bytes, docno: bytes) -> int:
    """The line on which (qid, docno) first appears (for the duplicate's message)."""
    return next(number for number, fields in _content_lines(path) if fields[0] == qid and fields[2] == docno)


# --------------------------------------------------------------------------
# ranking and evaluation


def _byte_key(text: str) -> bytes:
    # trec_eval compares ids with strcmp, i.e. byte by byte.
    return text.encode("utf-8", "surrogateescape")


def rank_run(rows: Iterable[tuple[str, float]]) -> list[str]:
    """Docnos in trec_eval's rank order: score descending, ties by docno descending."""
    rows = list(rows)
    # For ASCII ids str order is byte order; only other ids need the (slower) byte key.
    if all(docno.isascii() for docno, _ in rows):
        ordered = sorted(rows, key=lambda row: (row[1], row[0]), reverse=True)
    else:
        ordered = sorted(rows, key=lambda row: (row[1], _byte_key(row[0])), reverse=True)
    return [docno for docno, _score in ordered]


def _split_measure(name: str) -> tuple[str, int | None]:
    """'P_10' -> ('P', 10); 'recip_rank' -> ('recip_rank', None)."""
    if name in ("num_q", "recip_rank"):
        return name, None
    for family in _CUTOFF_FAMILIES:
        digits = name[len(family) + 1:]
        if name.startswith(family + "_") and digits.isascii() and digits.isdigit() and int(digits) >= 1:
            return family, int(digits)
    raise ValueError(
        f"unknown measure {name!r}: supported are num_q, recip_rank, P_k, recall_k, "
        f"ndcg_cut_k, success_k (k >= 1), or trec_eval's P.5,10 form"
    )


def parse_measures(measures: Iterable[str]) -> list[str]:
    """Expand and order measure names the way trec_eval prints them.

    Accepts ``P_10``, trec_eval's ``P.5,10`` and bare families (``P`` =
    default cutoffs).  Duplicates are dropped.
    """
    wanted: set[tuple[str, int | None]] = set()
    for raw in measures:
        raw = raw.strip()
        family, _, params = raw.partition(".")
        if family in _CUTOFF_FAMILIES and (params or raw == family):
            defaults = _DEFAULT_SUCCESS_CUTOFFS if family == "success" else DEFAULT_CUTOFFS
            cutoffs = params.split(",") if params else [str(c) for c in defaults]
            for cutoff in cutoffs:
                wanted.add(_split_measure(f"{family}_{cutoff.strip()}"))
        else:
            wanted.add(_split_measure(raw))
    ordered = sorted(wanted, key=lambda m: (_FAMILY_ORDER.index(m[0]), m[1] or 0))
    return [family if cutoff is None else f"{family}_{cutoff}" for family, cutoff in ordered]


def _score(name: str, ranking: Sequence[str], judged: Mapping[str, int], level: int) -> float:
    family, cutoff = _split_measure(name)
    if family == "recip_rank":
        # the metric's Mapping[Hashable, int] is invariant in its key type; it only reads the grades
        return reciprocal_rank(ranking, cast(Mapping[Hashable, int], judged), level)
    return _CUTOFF_FAMILIES[family](ranking, judged, cutoff, level)


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Iterable[tuple[str, float]]],
    measures: Iterable[str],
    relevance_level: int = 1,
    complete: bool = False,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Score ``run`` against ``qrels`` like trec_eval.

    Returns ``(per_query, all)``: ``per_query`` maps each evaluated qid (in
    trec_eval's order) to ``{measure: value}`` without ``num_q``; ``all``
    holds the mean of each measure over those queries and, if requested,
    ``num_q`` as an int.  ``complete=True`` is trec_eval's ``-c``.  Raises
    ValueError for an unknown measure or when no query has both judgments and
    results (trec_eval's "No queries with both results and relevance info").
    """
    with trec_fast.gc_paused():
        return _evaluate(qrels, run, measures, relevance_level, complete)


def _evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Iterable[tuple[str, float]]],
    measures: Iterable[str],
    relevance_level: int,
    complete: bool,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    names = parse_measures(measures)
    query_measures = [name for name in names if name != "num_q"]
    qids = sorted(
        (qid for qid in qrels if complete or qid in run), key=_byte_key
    )
    if not qids:
        raise ValueError("no queries with both results and relevance judgments")

    families = [_split_measure(name) for name in query_measures]

    def reference(qid: str, column: int) -> float:
        return _score(query_measures[column], rank_run(run.get(qid, ())), qrels[qid], relevance_level)

    # All queries at once with numpy; the per-query loop below is the reference it must equal.
    values = trec_fast.evaluate_bulk(qids, qrels, run, families, relevance_level, reference)
    if values is None:
        values = np.array(_evaluate_per_query(qids, qrels, run, query_measures, relevance_level),
                          dtype=np.float64).reshape(len(qids), len(query_measures))
    rows = values.tolist()
    per_query = {qid: dict(zip(query_measures, row)) for qid, row in zip(qids, rows)}

    # Summed in qid order from 0.0, as trec_eval accumulates (np.add.accumulate is sequential).
    totals = np.add.accumulate(np.vstack([np.zeros(len(query_measures)), values]), axis=0)[-1].tolist()
    means = dict(zip(query_measures, totals))
    summary: dict[str, float] = {}
    for name in names:
        summary[name] = len(qids) if name == "num_q" else means[name] / len(qids)
    return per_query, summary


def _evaluate_per_query(
    qids: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Iterable[tuple[str, float]]],
    measures: Sequence[str],
    relevance_level: int,
) -> list[list[float]]:
    """The reference evaluation: each query ranked and scored by the functions in metrics.retrieval."""
    rows = []
    for qid in qids:
        ranking = rank_run(run.get(qid, ()))
        rows.append([_score(name, ranking, qrels[qid], relevance_level) for name in measures])
    return rows


# --------------------------------------------------------------------------
# output and CLI helper


def _line(name: str, qid: str, value: float) -> str:
    shown = str(int(value)) if name == "num_q" else f"{value:.4f}"
    return f"{name:<22}\t{qid}\t{shown}"


def format_trec_eval(
    per_query: Mapping[str, Mapping[str, float]],
    all: Mapping[str, float],
    measures: Iterable[str],
    per_query_output: bool,
) -> str:
    """Render results exactly as trec_eval prints them (newline-terminated)."""
    names = parse_measures(measures)
    lines: list[str] = []
    if per_query_output:
        for qid in sorted(per_query, key=_byte_key):
            lines.extend(
                _line(name, qid, per_query[qid][name]) for name in names if name != "num_q"
            )
    lines.extend(_line(name, "all", all[name]) for name in names)
    return "".join(line + "\n" for line in lines)


def main_trec_eval(
    qrels_path: str | Path,
    run_path: str | Path,
    measures: Sequence[str] | None = None,
    per_query: bool = False,
    relevance_level: int = 1,
    complete: bool = False,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    as_json: bool = False,
) -> int:
    """CLI helper: evaluate and print; return 0, or 2 with a one-line error.

    ``measures`` defaults to :data:`DEFAULT_MEASURES`; ``per_query`` is
    trec_eval's ``-q``, ``relevance_level`` its ``-l``, ``complete`` its ``-c``.
    ``as_json`` prints ``{"all": {measure: value}, "perQuery": {qid: {...}}}``
    instead (``perQuery`` only with ``per_query``).
    """
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    wanted = list(measures if measures else DEFAULT_MEASURES)
    try:
        parse_measures(wanted)  # fail on a bad measure before reading big files
        qrels = read_qrels(qrels_path)
        run = read_run(run_path)
        results, summary = evaluate(qrels, run, wanted, relevance_level, complete)
    except OSError as exc:
        name = exc.filename if exc.filename is not None else ""
        print(f"crucible trec-eval: error: cannot read {name!s}: {exc.strerror or exc}", file=err)
        return 2
    except ValueError as exc:  # includes TrecFormatError
        print(f"crucible trec-eval: error: {exc}", file=err)
        return 2
    if as_json:
        import json

        document: dict[str, object] = {"all": summary}
        if per_query:
            document["perQuery"] = {qid: results[qid] for qid in sorted(results, key=_byte_key)}
        out.write(json.dumps(document, indent=2) + "\n")
        return 0
    out.write(format_trec_eval(results, summary, wanted, per_query))
    return 0
