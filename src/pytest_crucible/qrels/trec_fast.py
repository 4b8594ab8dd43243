"""Columnar fast paths behind ``crucible trec-eval``: TREC files parsed and all queries scored with numpy.

:mod:`pytest_crucible.qrels.trec_eval` calls these first and keeps its line-by-line reader and its
per-query loop over :mod:`pytest_crucible.metrics.retrieval` as the reference: a parser here
returns None for anything it does not handle exactly (a malformed line, a duplicate, an odd
number), and the caller then runs the reference reader, which raises the precise error.  The
values are the reference's bit for bit: the same integer and float operations in the same order
(numbers parsed exactly, DCG summed rank by rank, means summed in qid order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import chain, islice, repeat
from operator import itemgetter
from typing import Any

import numpy as np

from ..json_input import gc_paused

__all__ = ["ParsedRun", "evaluate_bulk", "gc_paused", "parse_qrels", "parse_run"]

_HASH, _MINUS, _PLUS, _DOT, _ZERO = 35, 45, 43, 46, 48
_UNJUDGED = -1  # an unjudged document behaves exactly as a negative grade: never relevant, no gain
# Numbers with more digits are parsed by Python: 15 digits are below 2**53, exact in a float.
_MAX_DIGITS = 15


class ParsedRun(dict[str, list[tuple[str, float]]]):
    """A run as :func:`pytest_crucible.qrels.trec_eval.read_run` returns it (a plain ``{qid: [(docno, score)]}``
    dict), which also keeps the columns it was built from so that evaluation need not rebuild them.

    The columns are used only while the dict still holds exactly the rows they were built with
    (checked item by item, see :func:`_columns_if_intact`), so editing the dict is safe.
    """

    columns: tuple[list[str], np.ndarray, tuple[tuple[str, float], ...], np.ndarray] | None = None  # qids, bounds, rows, scores


# --------------------------------------------------------------------------
# tokenising


_WHITESPACE = np.zeros(256, bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True  # what bytes.split() splits on


def _lines(
    data: bytes | memoryview, fields: int, exact: bool, wanted: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The bytes, and the start and end offsets of the ``wanted`` fields of each content line.

    Splits as ``bytes.split()`` does each ``\\n``-terminated line; blank lines and lines whose first
    field starts with ``#`` are skipped.  None when a line has the wrong number of fields (``exact``:
    exactly ``fields``, else at least) or a control byte that is not whitespace.
    """
    arr = np.frombuffer(data, np.uint8)
    none = np.empty((0, len(wanted)), np.int64)
    if len(arr) == 0:
        return arr, none, none
    blank = arr <= 32  # whitespace, once the other control bytes are ruled out below
    # The blank byte just before each token (but one at offset 0): a token starts after it.
    before = np.flatnonzero(np.greater(blank[:-1], blank[1:]))
    n = len(before) + (not blank[0])  # tokens
    if n == 0:
        return (arr, none, none) if _WHITESPACE[arr].all() else None
    last_start = int(before[-1]) + 1 if len(before) else 0
    tail = np.flatnonzero(blank[last_start:])
    end_last = last_start + (int(tail[0]) if len(tail) else len(arr) - last_start)
    if not blank[0] and np.count_nonzero(blank) == n - 1 + len(arr) - end_last:
        # The common layout: one blank byte between tokens, at ``before``; it says whether a
        # line ends there.
        between = arr[before]
        last = np.empty(n, bool)
        np.equal(between, 10, out=last[:-1])
        last[-1] = True
        spaces = np.count_nonzero(between == 32)
        if spaces + np.count_nonzero(last) - 1 < len(between) and not _WHITESPACE[between].all():
            return None  # a control byte that bytes.split() does not split on
        if not _WHITESPACE[arr[end_last:]].all():
            return None
        first = np.flatnonzero(last) + 1
        count = np.diff(first, prepend=0)
        first -= count
        # Token t spans (edge(t - 1), edge(t)) with edge(t) = before[t], edge(-1) = -1 and
        # edge(n - 1) = end_last: one gather gives every field's start and end.
        steps = sorted({j - 1 for j in wanted} | set(wanted))
        index = first[:, None] + np.asarray(steps)
        edge = before[np.clip(index, 0, max(n - 2, 0))] if n > 1 else np.zeros_like(index)
        for row in {0, len(index) - 1}:  # only the first and last lines reach past before
            edge[row][index[row] == -1] = -1
            edge[row][index[row] == n - 1] = end_last
        content = arr[edge[:, 0] + 1] != _HASH  # wanted holds field 0, so steps[0] is -1
        if not content.all():
            edge, count = edge[content], count[content]
        if (count != fields).any() if exact else (count < fields).any():
            return None
        starts = np.stack([edge[:, steps.index(j - 1)] + 1 for j in wanted], axis=1)
        ends = np.stack([edge[:, steps.index(j)] for j in wanted], axis=1)
        return arr, starts, ends
    if not _WHITESPACE[arr[blank]].all():
        return None
    edges = np.flatnonzero(blank[1:] != blank[:-1]) + 1
    if not blank[0]:
        edges = np.concatenate(([0], edges))
    if len(edges) % 2:
        edges = np.append(edges, len(arr))
    starts, ends = edges[0::2], edges[1::2]
    newlines = np.flatnonzero(arr == 10)
    following = np.searchsorted(newlines, ends[:-1])  # the first newline after each token
    last = np.ones(n, bool)
    has = following < len(newlines)
    last[:-1][~has] = False
    last[:-1][has] = newlines[following[has]] < starts[1:][has]
    first = np.flatnonzero(last) + 1
    count = np.diff(first, prepend=0)
    first -= count
    content = arr[starts[first]] != _HASH
    if not content.all():
        first, count = first[content], count[content]
    if (count != fields).any() if exact else (count < fields).any():
        return None
    at = first[:, None] + np.asarray(wanted)
    return arr, starts[at], ends[at]


def _window(arr: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """``arr[o:o + width]`` for each offset, as the rows of a new matrix (bytes outside arr: 32)."""
    if len(offsets) and offsets.min() >= 0 and offsets.max() <= len(arr) - width:
        # arr seen as overlapping ``width``-byte strings, one per offset: one copy per row
        windows = np.ndarray((len(arr) - width + 1,), np.dtype(("S", width)), arr, strides=(1,))
        return windows[offsets].view(np.uint8).reshape(len(offsets), width)
    at = offsets[:, None] + np.arange(width)
    rows = np.where((at >= 0) & (at < len(arr)), arr[np.clip(at, 0, max(len(arr) - 1, 0))], 32)
    return rows.astype(np.uint8)


def _chars(arr: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The tokens as rows of bytes, NUL-padded on the right (tokens hold no NUL)."""
    length = end - start
    width = max(int(length.max()), 1)
    chars = _window(arr, start, width)
    if length.min() < width:
        chars *= np.arange(width) < length[:, None]
    return chars


def _strings(arr: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[str]:
    """The tokens ``arr[start:end]`` as str, decoded as the reference does (UTF-8, surrogateescape)."""
    if len(start) == 0:
        return []
    chars = _chars(arr, start, end)
    width = chars.shape[1]
    if not (chars >= 128).any():  # ASCII: each byte is its code point
        return chars.astype(np.uint32).view(np.dtype(("U", width))).ravel().tolist()
    tokens = chars.view(np.dtype(("S", width))).ravel().tolist()
    return [token.decode("utf-8", "surrogateescape") for token in tokens]


_POW10 = 10.0 ** np.arange(_MAX_DIGITS + 3)  # exact in float64 up to 10**22


def _numbers(arr: np.ndarray, start: np.ndarray, end: np.ndarray, integer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Decimal tokens ``[+-]digits[.digits]`` parsed exactly; and the indices of the others.

    A float is ``m / 10**d`` with both operands exact (m < 10**15 < 2**53), so IEEE division
    rounds it correctly, as ``float()`` does.  ``integer`` admits no dot.  Tokens outside this
    form are left for the caller to give to ``float()``/``int()``.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, np.int64 if integer else np.float64), np.zeros(0, np.int64)
    length = end - start
    width = min(int(length.max()), _MAX_DIGITS + 2)
    cols = np.arange(width)
    # Right-aligned (the last column is the last character), as digit values; the bytes left of
    # the token become 0 (leading zeros change nothing), and so do a sign and the dot.
    digit = _window(arr, end - width, width) - np.uint8(_ZERO)
    digit *= cols >= (width - length)[:, None]
    lead = arr[start]
    signed = (lead == _MINUS) | (lead == _PLUS)
    short = length <= width
    if signed.any():
        rows = np.flatnonzero(signed & short)
        digit[rows, width - length[rows]] = 0
    dot = digit == np.uint8(_DOT - _ZERO + 256)
    per_column = dot.sum(axis=0)
    (dot_columns,) = np.nonzero(per_column)
    ok = short.copy()
    decimals: np.ndarray | int
    remove_dot: np.ndarray | None
    if len(dot_columns) == 1 and per_column[dot_columns[0]] == n and not integer:
        # Fixed precision (every token's dot in the same column): one weight vector drops the dot.
        column = int(dot_columns[0])
        digit[:, column] = 0
        weights = _POW10[width - 1 - cols]
        weights[:column] /= 10
        weights[column] = 0
        decimals = np.full(n, width - 1 - column)
        ndigits = length - signed - 1
        remove_dot = None
    else:
        digit[dot] = 0
        dots = dot.sum(axis=1)
        ok &= (dots == 0) if integer else (dots <= 1)
        ndigits = length - signed - dots
        weights = _POW10[width - 1 - cols]
        if len(dot_columns):
            remove_dot = dots > 0
            decimals = np.where(remove_dot, width - 1 - np.argmax(dot, axis=1), 0)
        else:
            remove_dot, decimals = None, 0
    if (digit > 9).any():
        ok &= (digit <= 9).all(axis=1)
    ok &= (ndigits >= 1) & (ndigits <= _MAX_DIGITS)  # "." or "-" alone is not a number
    # Every partial sum is an integer below 2**53 (checked), so the float product is exact in any order.
    mantissa = digit.astype(np.float64) @ weights
    ok &= mantissa < 2.0**53
    if integer:
        values = mantissa.astype(np.int64)
        np.negative(values, out=values, where=lead == _MINUS)
        return values, np.flatnonzero(~ok)
    if remove_dot is not None:
        # The dot counted as a 0 digit: take it out of the mantissa.
        scale = _POW10[decimals]
        mantissa = np.where(remove_dot, mantissa // (scale * 10) * scale + mantissa % scale, mantissa)
    values = mantissa / _POW10[decimals]
    np.negative(values, out=values, where=lead == _MINUS)
    return values, np.flatnonzero(~ok)


_CHUNK = 1 << 20  # bytes of whole lines parsed at a time: the temporaries stay in cache


def _columns(
    data: bytes, fields: int, exact: bool, wanted: tuple[int, int, int], integer: bool
) -> tuple[list[str], list[int], list[str], np.ndarray, list[tuple[int, Any]]] | None:
    """The qid, docno and number fields of every content line, or None (see :func:`_lines`).

    Returns the qids of the runs of equal consecutive qids and the length of each run, the
    docnos, the numbers, and ``(index, value)`` for the numbers Python had to parse.
    """
    view = memoryview(data)
    qids: list[bytes] = []
    sizes: list[int] = []
    docnos: list[str] = []
    numbers: list[np.ndarray] = []
    odd_numbers: list[tuple[int, Any]] = []
    parse = int if integer else float
    done, position = 0, 0
    while position < len(data):
        cut = data.find(b"\n", min(position + _CHUNK, len(data)) - 1)
        cut = len(data) if cut < 0 else cut + 1
        lines = _lines(view[position:cut], fields, exact, wanted)
        position = cut
        if lines is None:
            return None
        arr, start, end = lines
        if len(start) == 0:
            continue
        values, odd = _numbers(arr, start[:, 2], end[:, 2], integer)
        for i in odd.tolist():
            try:
                odd_numbers.append((done + i, parse(arr[start[i, 2]:end[i, 2]].tobytes())))
            except ValueError:
                return None
        numbers.append(values)
        docnos += _strings(arr, start[:, 1], end[:, 1])
        chars = _chars(arr, start[:, 0], end[:, 0])
        keys = chars.view(np.dtype(("S", chars.shape[1]))).ravel()
        firsts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        runs = np.diff(np.append(firsts, len(keys))).tolist()
        names = keys[firsts].tolist()
        if qids and qids[-1] == names[0]:  # a query's lines go on in this chunk
            sizes[-1] += runs.pop(0)
            names.pop(0)
        qids += names
        sizes += runs
        done += len(start)
    values = np.concatenate(numbers) if numbers else np.zeros(0, np.int64 if integer else np.float64)
    return [qid.decode("utf-8", "surrogateescape") for qid in qids], sizes, docnos, values, odd_numbers


# --------------------------------------------------------------------------
# readers


def parse_qrels(data: bytes) -> dict[str, dict[str, int]] | None:
    """``{qid: {docno: grade}}`` from qrels bytes, or None to let the reference reader decide."""
    columns = _columns(data, 4, True, (0, 2, 3), integer=True)
    if columns is None:
        return None
    qids, sizes, docnos, values, odd = columns
    grades = values.tolist()
    for i, grade in odd:
        grades[i] = grade  # may not fit an int64
    pairs = zip(docnos, grades)
    judged = [dict(islice(pairs, size)) for size in sizes]
    if any(map(int.__lt__, map(len, judged), sizes)):
        return None  # judged twice
    out = dict(zip(qids, judged))
    if len(out) < len(qids):  # a query's lines are not contiguous: merge its runs
        out = {}
        for qid, more in zip(qids, judged):
            before = out.setdefault(qid, more)
            if before is not more:
                if before.keys() & more.keys():
                    return None
                before.update(more)
    return out


def parse_run(data: bytes) -> ParsedRun | None:
    """``{qid: [(docno, score)]}`` (file order) from run bytes, or None to let the reference reader decide."""
    columns = _columns(data, 6, False, (0, 2, 4), integer=False)
    if columns is None:
        return None
    qids, sizes, docnos, scores, odd = columns
    for i, score in odd:
        scores[i] = score
    if not np.isfinite(scores).all():
        return None
    names = iter(docnos)
    if any(map(int.__lt__, [len(set(islice(names, size))) for size in sizes], sizes)):
        return None  # retrieved twice
    pairs = zip(docnos, scores.tolist())
    lists = [list(islice(pairs, size)) for size in sizes]
    run = ParsedRun(zip(qids, lists))
    if len(run) == len(qids):  # each query's lines contiguous: the columns are its rows
        # A tuple: once its rows are untracked the garbage collector no longer scans it, unlike a list.
        rows = tuple(chain.from_iterable(lists))
        run.columns = (qids, np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))), rows, scores)
        return run
    run = ParsedRun()  # a query's lines are not contiguous: merge its runs
    for qid, more in zip(qids, lists):
        before = run.setdefault(qid, more)
        if before is not more:
            before.extend(more)
            if len(set(map(itemgetter(0), before))) < len(before):
                return None
    return run


# --------------------------------------------------------------------------
# evaluation


def _columns_if_intact(
    run: Mapping[str, Any],
) -> tuple[list[str], np.ndarray, tuple[tuple[str, float], ...], np.ndarray] | None:
    """The columns a :class:`ParsedRun` was built from (qids, bounds, rows, scores), if its rows
    still equal those."""
    columns = getattr(run, "columns", None)
    if type(run) is not ParsedRun or columns is None:
        return None
    qids, bounds, rows, _scores = columns
    values = list(run.values())
    if list(run) != qids or list(map(len, values)) != np.diff(bounds).tolist():
        return None
    # tuple == tuple compares item by item, identity first: fast while the rows are untouched.
    if tuple(chain.from_iterable(values)) != rows:
        return None
    return columns


def _ragged_columns(
    qids: Sequence[str], run: Mapping[str, Any]
) -> tuple[np.ndarray, list[str], np.ndarray, list[int]] | None:
    """Lengths, docnos and scores of the evaluated queries' rows, in qid order, and the queries with
    a repeated docno (left to the reference).  None unless every row is a ``(str, float)`` pair in
    a list or tuple (an iterator is left to the reference, which reads it once)."""
    lists = [run.get(qid, ()) for qid in qids]
    if not all(isinstance(rows, (list, tuple)) for rows in lists):
        return None
    flat = list(chain.from_iterable(lists))
    if flat and set(map(len, flat)) != {2}:
        return None
    docnos = list(map(itemgetter(0), flat))
    scores = list(map(itemgetter(1), flat))
    if not set(map(type, docnos)) <= {str} or not set(map(type, scores)) <= {float}:
        return None
    values = np.array(scores, dtype=np.float64)
    if not np.isfinite(values).all():
        return None
    lengths = np.fromiter(map(len, lists), np.int64, len(lists))
    repeated, a = [], 0
    for i, n in enumerate(lengths.tolist()):
        if len(set(docnos[a:a + n])) < n:
            repeated.append(i)
        a += n
    return lengths, docnos, values, repeated


def _byte_key(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _discounts(n: int) -> np.ndarray:
    # math.log2, not np.log2: the very values the reference divides by.
    return np.array([math.log2(rank + 1) for rank in range(1, n + 1)], dtype=np.float64)


def _width_classes(lengths: np.ndarray) -> list[np.ndarray]:
    """Row indices grouped by length (powers of two), so that a padded matrix wastes at most half."""
    cls = np.zeros(len(lengths), np.int64)
    positive = lengths > 0
    cls[positive] = np.ceil(np.log2(lengths[positive])).astype(np.int64) + 1
    return [np.flatnonzero(cls == c) for c in np.unique(cls)]


def _padded(values: np.ndarray, first: np.ndarray, lengths: np.ndarray, width: int, fill: Any) -> np.ndarray:
    """Rows ``values[first[i]:first[i] + lengths[i]]`` as a matrix ``width`` wide, padded with ``fill``."""
    if len(first) and (lengths == width).all() and (np.diff(first) == width).all():
        return values[first[0]:first[0] + len(first) * width].reshape(len(first), width)  # no gaps: a view
    cols = np.arange(width)
    inside = cols < lengths[:, None]
    matrix = np.full((len(first), width), fill, dtype=values.dtype)
    matrix[inside] = values[(first[:, None] + cols)[inside]]
    return matrix


def _ideal_dcg(grades: np.ndarray, first: np.ndarray, lengths: np.ndarray, cutoffs: Sequence[int]) -> np.ndarray:
    """Ideal DCG at each cutoff (columns) of each query (rows): its positive grades, best first."""
    out = np.zeros((len(first), len(cutoffs)))
    if not cutoffs:
        return out
    for members in _width_classes(lengths):
        width = int(lengths[members].max())
        if width == 0:
            continue
        best = -np.sort(-_padded(grades, first[members], lengths[members], width, 0), axis=1)
        best = best[:, :max(cutoffs)]
        # Non-positive grades add 0.0; np.cumsum adds rank by rank, as the reference loop.
        dcg = np.cumsum(np.where(best > 0, best, 0) / _discounts(best.shape[1]), axis=1)
        for j, k in enumerate(cutoffs):
            out[members, j] = dcg[:, min(k, best.shape[1]) - 1]
    return out


def _rank_rows(scores: np.ndarray, valid: np.ndarray, names: Any, first: np.ndarray) -> np.ndarray:
    """Column order of each row: score descending, ties by docno descending (bytes), as trec_eval."""
    keys = np.where(valid, -scores, np.inf)
    order = np.argsort(keys, axis=1, kind="stable")
    ordered = np.take_along_axis(keys, order, axis=1)
    tied = (ordered[:, 1:] == ordered[:, :-1]) & valid[:, 1:]  # valid is a prefix of each row
    rows, cols = np.nonzero(tied)
    if len(rows) == 0:
        return order
    # Each run of equal scores (consecutive tied columns in a row) is reordered by docno.
    breaks = np.flatnonzero((np.diff(rows) != 0) | (np.diff(cols) != 1)) + 1
    for group_rows, group_cols in zip(np.split(rows, breaks), np.split(cols, breaks)):
        row, a, b = int(group_rows[0]), int(group_cols[0]), int(group_cols[-1]) + 2
        members = order[row, a:b].tolist()
        docno_keys = [_byte_key(name) for name in names([int(first[row]) + c for c in members])]
        order[row, a:b] = [c for _key, c in sorted(zip(docno_keys, members), reverse=True)]
    return order


def _grade_lookup(judgments: list[Mapping[str, int]]) -> Any:
    """get(judged, docno, default) for every query's judgments at C speed when they are dicts."""
    if all(type(judged) is dict for judged in judgments):
        return dict.get
    return lambda judged, docno, default: judged.get(docno, default)


def evaluate_bulk(
    qids: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Any],
    families: Sequence[tuple[str, int | None]],
    relevance_level: int,
    reference: Any,
) -> np.ndarray | None:
    """Per-query values (rows: ``qids``; columns: ``families`` as (family, cutoff)) or None.

    None when the input is not plain str docnos, float scores and int grades: the caller then
    uses the reference loop.  Queries with a repeated docno in the run are scored by
    ``reference(qid, column)``.
    """
    n = len(qids)
    judgments = [qrels[qid] for qid in qids]
    judged = list(chain.from_iterable(j.values() for j in judgments))
    if not set(map(type, judged)) <= {int}:
        return None
    try:
        judged_grades = np.array(judged, dtype=np.int64)
    except OverflowError:
        return None
    columns = _columns_if_intact(run)
    repeated: list[int] = []
    if columns is not None:
        run_qids, bounds, pairs, all_scores = columns

        def names(items: list[int]) -> list[str]:
            return list(map(itemgetter(0), map(pairs.__getitem__, items)))

        where = dict(zip(run_qids, range(len(run_qids))))
        segment = np.array([where.get(q, -1) for q in qids], dtype=np.int64)
        first = np.where(segment >= 0, bounds[segment], 0)
        lengths = np.where(segment >= 0, bounds[segment + 1] - first, 0)
    else:
        ragged = _ragged_columns(qids, run)
        if ragged is None:
            return None
        lengths, docnos, all_scores, repeated = ragged
        first = np.cumsum(lengths) - lengths

        def names(items: list[int]) -> list[str]:
            return list(map(docnos.__getitem__, items))

    judged_lengths = np.fromiter(map(len, judgments), np.int64, n)
    judged_first = np.cumsum(judged_lengths) - judged_lengths
    judged_rows = np.repeat(np.arange(n), judged_lengths)
    relevant_judged = (judged_grades >= 0) & (judged_grades >= relevance_level)
    num_rel = np.bincount(judged_rows[relevant_judged], minlength=n)
    cutoffs = sorted({k for family, k in families if family == "ndcg_cut" and k is not None})
    ideal = _ideal_dcg(judged_grades, judged_first, judged_lengths, cutoffs)
    deepest = max((k for family, k in families if k is not None), default=1)
    wants_rr = any(family == "recip_rank" for family, _ in families)
    get = _grade_lookup(judgments)

    values = np.zeros((n, len(families)))
    for members in _width_classes(lengths):
        width = int(lengths[members].max())
        if width == 0:
            continue  # nothing retrieved: every measure is 0
        starts, sizes = first[members], lengths[members]
        valid = np.arange(width) < sizes[:, None]
        order = _rank_rows(_padded(all_scores, starts, sizes, width, 0.0), valid, names, starts)
        # Grades in rank order, looked up only as deep as needed: to the deepest cutoff, and for
        # recip_rank on to the first relevant document (widening for the rows not there yet).
        graded = np.full((len(members), width), _UNJUDGED, np.int64)
        rows, a, b = np.arange(len(members)), 0, min(width, max(deepest, 16))
        while len(rows):
            r, c = np.nonzero(valid[rows, a:b])
            r, c = rows[r], c + a
            items = (starts[r] + order[r, c]).tolist()
            graded[r, c] = np.fromiter(
                map(get, [judgments[q] for q in members[r].tolist()], names(items), repeat(_UNJUDGED)),
                np.int64, len(items),
            )
            if not wants_rr or b >= width:
                break
            found = graded[rows, :b]
            rows = rows[~((found >= 0) & (found >= relevance_level)).any(axis=1)]
            a, b = b, min(width, 2 * b)
        relevant = (graded >= 0) & (graded >= relevance_level)
        depth = min(deepest, width)
        hits = np.cumsum(relevant[:, :depth], axis=1)
        dcg = np.cumsum(np.where(graded[:, :depth] > 0, graded[:, :depth], 0) / _discounts(depth), axis=1)
        rel = num_rel[members]
        for j, (family, k) in enumerate(families):
            if family == "recip_rank":
                values[members, j] = np.where(relevant.any(axis=1), 1.0 / (np.argmax(relevant, axis=1) + 1), 0.0)
                continue
            assert k is not None  # every family but recip_rank has a cutoff
            at = min(k, width) - 1
            if family == "P":
                values[members, j] = hits[:, at] / k
            elif family == "recall":
                values[members, j] = np.divide(hits[:, at], rel, out=np.zeros(len(members)), where=rel > 0)
            elif family == "success":
                values[members, j] = hits[:, at] > 0
            else:  # ndcg_cut
                best = ideal[members, cutoffs.index(k)]
                values[members, j] = np.divide(dcg[:, at], best, out=np.zeros(len(members)), where=best > 0)
    for q in repeated:
        values[q] = [reference(qids[q], j) for j in range(len(families))]
    return values
