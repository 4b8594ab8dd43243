"""Resampling engine shared by the bootstrap and the permutation test.

The random layout is the documented contract of :mod:`.bootstrap` and
:mod:`.permutation`: for ``n`` items and a seed, row ``r`` of either matrix
uses draws ``r*n .. r*n + n - 1`` of ``Mulberry32(seed)`` (row-major), the
bootstrap taking index ``floor(u * n)`` and the permutation sign ``-1`` when
``floor(2u) == 1``.  Both start at draw 0, so the two matrices come from the
*same* draws: one pass over the stream serves both (the sign is the top bit
of the 32-bit output).

What is computed are the row sums ``matrix @ d`` for the paired differences
``d`` of every metric of a comparison, never the ``B x n`` matrix itself
unless it is small:

* A matrix of at most :data:`CACHE_BYTES` (uint8 counts / int8 signs, one
  byte an entry: ``n * B <= 64 MiB``, e.g. n = 1,000 with 10,000 resamples
  is 10 MB) is kept in an LRU cache of that many bytes per kind, so further
  calls with the same ``(n, rows, seed)`` cost one matrix-vector product per
  metric.
* A larger one is streamed: blocks of rows are drawn, turned into counts or
  signs and multiplied with every metric's ``d`` at once, then dropped.  Peak
  memory is a few blocks (``O(max(n, 2**17))`` entries) plus the ``rows x
  metrics`` sums; the stream is drawn once per comparison, not per metric.
  When the items fall into few groups of equal values in every metric (a
  coarse grid: hit rates, reciprocal ranks), a row is counted per group
  instead of per item (:class:`_Groups`): the same integers, at a fraction
  of the cost.

Machine independence: every row sum is computed **exactly**, in integers. Each
metric's ``d`` is written in fixed point, ``q = round(d * 2**s)`` with the
largest ``s`` for which ``n * max|q| < 2**62`` (:class:`FixedPoint`), so
``counts @ q`` and ``signs @ q`` have one exact value whatever the order of
the additions (computed as two float64 BLAS products whose partial sums are
integers below ``2**53``); the float sum is that integer times ``2**-s``. The quantisation moves ``d`` by at most ``2**-(s+1)``, about
``n * max|d| * 2**-63``: below the last bit of a float64 sum of ``n`` terms.
So the sums, and every interval and p-value computed from them, are the same
bits on every CPU, BLAS kernel (``OPENBLAS_CORETYPE``) and thread count,
whether the rows come from the cache or from the stream, and whether a
metric is compared alone or with others.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .prng import Mulberry32, order_steps

__all__ = [
    "CACHE_BYTES",
    "MatrixCache",
    "clear_caches",
    "matvec",
    "matvecs",
    "permutation_signs",
    "resample_counts",
    "resample_sums",
    "rows_per_block",
]

#: Largest compact matrix (bytes) that is cached, and each cache's budget.
CACHE_BYTES = 64 << 20

# Elements per block for the float64 matrix-vector products.  Part of the
# bit-exact contract (see the module docstring): it fixes the gemv shapes.
_MATVEC_ELEMENTS = 1 << 17

_MASK32 = 0xFFFFFFFF
_TWO_POW_M32 = 2.0**-32


class MatrixCache:
    """Thread-safe LRU cache of read-only matrices, bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self._data: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def fits(self, nbytes: int) -> bool:
        return nbytes <= self.max_bytes

    def lookup(self, key: tuple[Any, ...]) -> np.ndarray | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    def store(self, key: tuple[Any, ...], value: np.ndarray) -> np.ndarray:
        """Keep ``value`` (made read-only) if it fits the budget; return it."""
        value.setflags(write=False)
        if not self.fits(value.nbytes):
            return value
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._data[key] = value
            self._bytes += value.nbytes
            while self._bytes > self.max_bytes:
                _, evicted = self._data.popitem(last=False)
                self._bytes -= evicted.nbytes
        return value

    def get(self, key: tuple[Any, ...], build: Callable[[], np.ndarray]) -> np.ndarray:
        hit = self.lookup(key)
        return hit if hit is not None else self.store(key, build())

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


_COUNTS_CACHE = MatrixCache(CACHE_BYTES)
_SIGNS_CACHE = MatrixCache(CACHE_BYTES)


def clear_caches(kind: str = "all") -> None:
    """Drop cached matrices (``"counts"``, ``"signs"`` or ``"all"``); results unchanged."""
    if kind in ("counts", "all"):
        _COUNTS_CACHE.clear()
    if kind in ("signs", "all"):
        _SIGNS_CACHE.clear()


def rows_per_block(n: int, rows_total: int) -> int:
    """Rows per block of the streamed and cached products: bounded memory (the sums are exact, so the
    partition does not change a bit of them). Never one row alone when there are more: OpenBLAS splits a
    single row's long dot product across its threads, which costs milliseconds a call on a busy machine
    (n = 100,000: 2 rows a block took 0.2 ms, 1 row 8 ms)."""
    return max(min(2, rows_total), min(rows_total, _MATVEC_ELEMENTS // max(n, 1)))


class FixedPoint:
    """A metric's differences in fixed point, ready for exact products with an integer matrix.

    ``q = round(d * 2**shift)`` (int64) with the largest ``shift`` for which any row sum ``c @ q``
    (``sum |c| <= n``: a bootstrap row's counts, a row of signs) stays below ``2**62``. ``q`` is
    split as ``hi * 2**k + lo`` (``0 <= lo < 2**k``, ``k = 53 - bits(n)``) so that both halves'
    row sums are integers below ``2**53``: float64 BLAS computes them exactly, in any order, on any
    kernel and thread count (an FMA included), at BLAS speed."""

    __slots__ = ("hi", "k", "lo", "shift")

    def __init__(self, vector: np.ndarray, n: int) -> None:
        bits = max(1, n).bit_length()
        if bits > 44:
            raise ValueError(f"{n} items: more than the exact resampling sums support (2**44)")
        top = float(np.max(np.abs(vector))) if vector.shape[0] else 0.0
        self.shift = 62 - math.frexp(top)[1] - bits if top > 0.0 else 0  # top < 2**frexp(top)[1]
        q = np.rint(np.ldexp(vector, self.shift)).astype(np.int64)
        self.k = 53 - bits
        self.hi = np.right_shift(q, self.k).astype(np.float64)  # floor(q / 2**k), exact (|hi| < 2**(62-k))
        self.lo = np.bitwise_and(q, (1 << self.k) - 1).astype(np.float64)


def fixed_point(vector: np.ndarray, n: int) -> FixedPoint:
    return FixedPoint(np.ascontiguousarray(vector, dtype=np.float64), n)


def _halves(fixed: Sequence[FixedPoint]) -> np.ndarray:
    """Every metric's two halves as the columns of one ``(n, 2 * metrics)`` float64 matrix (hi, lo, hi, lo, ...)."""
    return np.ascontiguousarray(np.stack([half for vector in fixed for half in (vector.hi, vector.lo)], axis=1))


def _gemm(block: np.ndarray, fixed: Sequence[FixedPoint], halves: np.ndarray, out: np.ndarray, lo: int) -> None:
    """``out[j, lo : lo + rows] = block @ d_j`` for every metric ``j`` at once: one BLAS product of the block
    with every metric's halves (:func:`_halves`), each partial sum an integer below ``2**53`` whatever the
    order (so exact, as :func:`_gemv`), joined in int64 and scaled back metric by metric."""
    sums = (block @ halves).astype(np.int64)
    for j, vector in enumerate(fixed):
        hi = sums[:, 2 * j]
        np.left_shift(hi, vector.k, out=hi)
        hi += sums[:, 2 * j + 1]
        np.ldexp(hi.astype(np.float64), -vector.shift, out=out[j, lo : lo + block.shape[0]])


def _gemv(block: np.ndarray, fixed: FixedPoint, out: np.ndarray) -> None:
    """``out = block @ d`` for a float64 block of integers (counts or signs) and ``d`` in fixed point:
    two BLAS products whose every partial sum is an integer below ``2**53`` (so exact), joined in
    int64, scaled back once. The same bits on every machine (see the module docstring)."""
    hi = (block @ fixed.hi).astype(np.int64)
    lo = (block @ fixed.lo).astype(np.int64)
    np.left_shift(hi, fixed.k, out=hi)
    hi += lo
    np.ldexp(hi.astype(np.float64), -fixed.shift, out=out)


# ---------------------------------------------------------------------------
# products with a materialised (cached) compact matrix
# ---------------------------------------------------------------------------
def matvecs(matrix: np.ndarray, vectors: Sequence[np.ndarray], out: np.ndarray) -> np.ndarray:
    """``out[j] = matrix @ vectors[j]`` in float64 for a compact integer matrix.

    Rows are widened to float64 in small blocks (which stay in cache), once
    for all vectors, and multiplied exactly with each vector in fixed point
    (:class:`FixedPoint`), so the compact matrix never needs a full copy.
    """
    rows_total, n = matrix.shape
    rows = rows_per_block(n, rows_total)
    buf = np.empty((rows, n), dtype=np.float64)
    fixed = [fixed_point(vector, n) for vector in vectors]
    if not fixed:
        return out
    halves = _halves(fixed)
    for lo in range(0, rows_total, rows):
        m = min(rows, rows_total - lo)
        blk = buf[:m]
        blk[...] = matrix[lo : lo + m]
        _gemm(blk, fixed, halves, out, lo)
    return out


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` in float64 for a compact integer ``matrix``."""
    out = np.empty((1, matrix.shape[0]), dtype=np.float64)
    return matvecs(matrix, [vector], out)[0]


# ---------------------------------------------------------------------------
# streaming
# ---------------------------------------------------------------------------
class _Target:
    """One side (bootstrap counts or permutation signs) of a streaming pass."""

    __slots__ = ("fixed", "groups", "halves", "keep", "out", "rows", "totals", "vectors")

    def __init__(self, rows: int, vectors: Sequence[np.ndarray], out: np.ndarray, keep: np.ndarray | None) -> None:
        self.rows = rows
        self.vectors = list(vectors)
        # The exact form the sums use, every metric's halves as the columns of one matrix (multiplied with a
        # block in one product); each metric's own halves dropped once copied (bounded memory). ``totals``:
        # each metric's sum of q (an exact integer), for the permutation sums taken from the sign bits alone.
        self.fixed = []
        self.totals = []
        # (no vectors: an empty matrix, never multiplied, as nothing is fixed)
        self.halves = np.empty((self.vectors[0].shape[0] if self.vectors else 0, 2 * len(self.vectors)))
        for j, v in enumerate(self.vectors):
            fixed = fixed_point(v, v.shape[0])
            self.halves[:, 2 * j], self.halves[:, 2 * j + 1] = fixed.hi, fixed.lo
            self.totals.append((int(fixed.hi.astype(np.int64).sum()) << fixed.k) + int(fixed.lo.astype(np.int64).sum()))
            fixed.hi = fixed.lo = None
            self.fixed.append(fixed)
        self.out = out  # (len(vectors), rows) float64 sums, filled block by block
        self.keep = keep  # matrix being filled for the cache, or None
        self.groups: _Groups | None = None  # set by _stream when the items fall into few groups


class _Groups:
    """A target's items grouped by their values in every metric (equal rows of its halves), used when there
    are at most half as many groups as items (metrics on a coarse grid: hit rates, ranks, grades). A row of
    the stream then needs only its counts per group: ``group_counts @ group_halves`` is the same exact
    integer as ``counts @ halves``, each partial sum still an integer below ``2**53`` (the counts add up to
    the same ``n``), at a fraction of the cost. ``of``: each item's group; ``starts``: where each group
    begins in ``order`` (the items group by group), the order a permutation row is drawn in so that a
    group's flips are one contiguous sum; ``steps``: that order as :meth:`Mulberry32.rows` takes it."""

    __slots__ = ("halves", "of", "starts", "steps")

    def __init__(self, halves: np.ndarray, of: np.ndarray, order: np.ndarray, starts: np.ndarray) -> None:
        self.halves = halves
        self.of = of
        self.starts = starts
        self.steps = order_steps(order)

    @classmethod
    def of_halves(cls, halves: np.ndarray) -> _Groups | None:
        """The groups of equal rows of ``halves`` (n x 2 * metrics), or None when they are more than n / 2."""
        n = halves.shape[0]
        order = np.lexsort(halves.T)  # equal rows next to each other; which order within a group is immaterial
        ordered = halves[order]
        first = np.ones(n, dtype=bool)
        np.any(ordered[1:] != ordered[:-1], axis=1, out=first[1:])
        starts = np.flatnonzero(first)
        if 2 * starts.shape[0] > n:
            return None
        # each item's group, in the narrowest integers (a smaller table to look draws up in)
        of = np.empty(n, dtype=np.min_scalar_type(starts.shape[0] - 1))
        of[order] = np.cumsum(first) - 1
        return cls(np.ascontiguousarray(ordered[starts]), of, order, starts)


# Items below which a bootstrap index floor(u * n / 2**32) is computed in integers: u * n < 2**53, so the
# float64 product of Mulberry32.integers is exact and both give the same index.
_INTEGER_INDEX_ITEMS = 1 << 21


def _stage_rows(width: int, block: int) -> int:
    """Rows multiplied together with a target's halves (``width`` rows of them: items, or groups): a block, and
    8 rows above 2**16 items, where a block is 2 rows (n = 100,000: a product of 8 rows took 0.6 s per 10,000
    rows, of 2 rows 1.7 s: the halves are read once for all the rows of a product; 6.4 MB of staged rows);
    rows of a few groups as many as 2**17 entries hold (one product for thousands of rows)."""
    return max(block, 8) if width > 1 << 16 else max(block, _MATVEC_ELEMENTS // width)


class _Stage:
    """Rows of the stream (a bootstrap row's counts, a permutation row's sign bits) waiting for one product
    with a matrix of halves (:func:`_halves`), shared by both targets when they test the same vectors."""

    __slots__ = ("buf", "dest", "halves", "used")

    def __init__(self, halves: np.ndarray, rows: int) -> None:
        self.halves = halves
        self.buf = np.empty((rows, halves.shape[0]), dtype=np.float64)
        self.used = 0
        self.dest: list[tuple[_Target, int, bool]] = []  # each staged row: its target, its row there, sign bits or not

    def add(self, values: np.ndarray, target: _Target, lo: int, flipped: bool) -> None:
        for i in range(values.shape[0]):
            if self.used == self.buf.shape[0]:
                self.flush()
            self.buf[self.used] = values[i]
            self.dest.append((target, lo + i, flipped))
            self.used += 1

    def flush(self) -> None:
        """``out[j, row] = row @ d_j`` for every staged row and metric: one BLAS product of the rows with every
        metric's halves, each partial sum an integer below ``2**53`` whatever the order (so exact, as
        :func:`_gemv`), joined in int64 and scaled back metric by metric; a row of sign bits (1: flipped)
        gives ``signs @ q = sum(q) - 2 * (bits @ q)``."""
        if not self.used:
            return
        sums = (self.buf[: self.used] @ self.halves).astype(np.int64)
        groups: dict[tuple[int, bool], tuple[_Target, bool, list[int], list[int]]] = {}
        for position, (target, row, flipped) in enumerate(self.dest):
            group = groups.setdefault((id(target), flipped), (target, flipped, [], []))
            group[2].append(position)
            group[3].append(row)
        for target, flipped, positions, rows in groups.values():
            for j, (vector, total) in enumerate(zip(target.fixed, target.totals)):
                value = sums[positions, 2 * j]
                np.left_shift(value, vector.k, out=value)
                value += sums[positions, 2 * j + 1]
                if flipped:
                    value = np.int64(total) - 2 * value  # |sum of q| < 2**62: no overflow
                target.out[j, rows] = np.ldexp(value.astype(np.float64), -vector.shift)
        self.used = 0
        self.dest = []


def _stream(n: int, seed: int, boot: _Target | None, perm: _Target | None) -> None:
    """Draw the stream once, block by block, feeding both targets.

    Blocks are ``G = rows_per_block(n, max rows)`` rows; every sum is an exact integer (:class:`FixedPoint`),
    so neither the partition of the rows nor the order of the products changes a bit of the results. A
    target that fills a matrix for the cache multiplies each block as it comes; the others' rows are
    staged and multiplied several at a time (:func:`_stage_rows`).
    """
    n_boot = boot.rows if boot is not None else 0
    n_perm = perm.rows if perm is not None else 0
    total = max(n_boot, n_perm)
    if total == 0:
        return
    block = rows_per_block(n, total)
    shared = (boot is not None and perm is not None and boot.fixed and len(boot.vectors) == len(perm.vectors)
              and all(a is b for a, b in zip(boot.vectors, perm.vectors)))
    targets = [target for target in (boot, perm) if target is not None]
    if all(target.keep is None for target in targets):  # a matrix for the cache is kept item by item
        for target in targets[:1] if shared else targets:
            if target.fixed:
                target.groups = _Groups.of_halves(target.halves)
                if target.groups is not None:
                    target.halves = target.groups.halves
    if shared:
        assert boot is not None and perm is not None  # implied by shared
        perm.halves, perm.groups = boot.halves, boot.groups  # the same vectors: one product serves both
    workers = _workers(n, total, boot, perm)
    if workers == 1:
        _stream_rows(n, seed, boot, perm, 0, total, block)
        return
    from concurrent.futures import ThreadPoolExecutor

    blocks = -(-total // block)
    cut = -(-blocks // workers) * block  # whole blocks to each thread
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(_stream_rows, n, seed, boot, perm, lo, min(total, lo + cut), block)
                       for lo in range(0, total, cut)]:
            future.result()


# Draws (rows x items) from which a pass is split over two threads, when the machine has two CPUs or more: the
# stream is counter-based (draw i depends on the seed and i only) and every sum is exact, so each thread
# draws and sums its own rows and the results are the same bits. numpy's loops, bincount and BLAS release
# the GIL. (n = 100,000 with 10,000 resamples and permutations: 1e9 draws.)
_THREADED_DRAWS = 1 << 28


def _workers(n: int, total: int, boot: _Target | None, perm: _Target | None) -> int:
    import os

    if n * total < _THREADED_DRAWS or any(target is not None and target.keep is not None for target in (boot, perm)):
        return 1
    return max(1, min(2, os.cpu_count() or 1))


def _stream_rows(n: int, seed: int, boot: _Target | None, perm: _Target | None, first: int, last: int,
                 block: int) -> None:
    """Rows ``first .. last - 1`` of a pass (draws ``first * n`` on), in blocks of ``block`` rows."""
    n_boot = boot.rows if boot is not None else 0
    n_perm = perm.rows if perm is not None else 0
    rng = Mulberry32(seed)
    rng.advance(first * n)
    ubuf = np.empty((block, n), dtype=np.uint32)
    fbuf = np.empty((block, n), dtype=np.float64) if n >= _INTEGER_INDEX_ITEMS or any(
        target is not None and target.keep is not None for target in (boot, perm)) else None
    stages: dict[int, _Stage] = {}

    def stage(target: _Target) -> _Stage:
        if id(target.halves) not in stages:
            stages[id(target.halves)] = _Stage(target.halves, _stage_rows(target.halves.shape[0], block))
        return stages[id(target.halves)]

    # A permutation row in groups is drawn group by group; a bootstrap row's counts do not depend on the order
    # of its draws (each draw's index depends on its value only).
    steps = perm.groups.steps if perm is not None and perm.groups is not None else None
    if boot is not None:
        scale = float(n) * _TWO_POW_M32  # as in Mulberry32.integers
        ibuf = np.empty((block, n), dtype=np.int64)
        width = n if boot.groups is None else boot.groups.halves.shape[0]  # bins of a row's counts
        gbuf = np.empty((block, n), dtype=boot.groups.of.dtype) if boot.groups is not None else None
        offsets = (np.arange(block, dtype=np.int64) * width)[:, None]  # row r counts into bins r*width ..
    for lo in range(first, last, block):
        g = min(block, last - lo)
        u = rng.rows(ubuf[:g], steps)
        if boot is not None and lo < n_boot:
            m = min(g, n_boot - lo)
            idx = ibuf[:m]
            if n < _INTEGER_INDEX_ITEMS:
                np.multiply(u[:m], np.int64(n), out=idx)  # u * n, exact
                np.right_shift(idx, 32, out=idx)  # floor(u * n / 2**32): the float path's index, exactly
            else:
                assert fbuf is not None  # allocated for n >= _INTEGER_INDEX_ITEMS
                f = fbuf[:m]
                np.multiply(u[:m], scale, out=f)  # exact uint32 -> float64, one rounding
                np.copyto(idx, f, casting="unsafe")  # truncation == floor (f >= 0)
            if boot.groups is not None:
                assert gbuf is not None  # allocated when the bootstrap has groups
                idx = boot.groups.of.take(idx, out=gbuf[:m], mode="clip")  # each draw's group (idx < n: no clipping)
            if m > 1:  # one bincount for the whole block (many small rows at small n)
                idx = np.add(idx, offsets[:m], out=idx if idx.dtype == offsets.dtype else None)
            counts = np.bincount(idx.reshape(-1), minlength=m * width).reshape(m, width)  # each row's draws per item or group
            if boot.keep is not None:
                assert fbuf is not None  # allocated when a target keeps its matrix
                top = int(counts.max())
                if top > np.iinfo(boot.keep.dtype).max:  # never for n >= 256 in practice
                    boot.keep = boot.keep.astype(np.min_scalar_type(max(top, n)))
                boot.keep[lo : lo + m] = counts
                if boot.fixed:
                    f = fbuf[:m]
                    f[...] = counts
                    _gemm(f, boot.fixed, boot.halves, boot.out, lo)
            elif boot.fixed:
                stage(boot).add(counts, boot, lo, False)
        if perm is not None and lo < n_perm:
            m = min(g, n_perm - lo)
            bits = u[:m]
            np.right_shift(bits, np.uint32(31), out=bits)  # floor(2u) (u no longer needed)
            if perm.keep is not None:
                assert fbuf is not None  # allocated when a target keeps its matrix
                f = fbuf[:m]
                np.multiply(bits, -2.0, out=f)
                f += 1.0  # sign = 1 - 2 * bit, exactly +-1
                perm.keep[lo : lo + m] = f
                if perm.fixed:
                    _gemm(f, perm.fixed, perm.halves, perm.out, lo)
            elif perm.fixed:
                if perm.groups is not None:
                    bits = np.add.reduceat(bits, perm.groups.starts, axis=1)  # each group's flips
                stage(perm).add(bits, perm, lo, True)
    for pending in stages.values():
        pending.flush()


def _plan(
    cache: MatrixCache,
    key: tuple[Any, ...],
    n: int,
    rows: int,
    vectors: Sequence[np.ndarray],
    out: np.ndarray,
    dtype: Any,
    force_keep: bool = False,
) -> tuple[np.ndarray | None, _Target | None]:
    """Use the cached matrix if there is one, else plan a streaming target
    (which also fills the matrix for the cache when it fits the budget)."""
    hit = cache.lookup(key)
    if hit is not None:
        return hit, None
    keep = np.empty((rows, n), dtype=dtype) if force_keep or cache.fits(rows * n) else None
    return None, _Target(rows, vectors, out, keep)


def resample_sums(
    n: int,
    seed: int,
    boot_vectors: Sequence[np.ndarray],
    n_resamples: int,
    perm_vectors: Sequence[np.ndarray],
    n_permutations: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap sums ``counts @ d`` and permutation sums ``signs @ d``.

    ``boot_vectors`` / ``perm_vectors``: float64 length-``n`` vectors (one
    per metric; either may be empty).  Returns arrays of shape
    ``(len(boot_vectors), n_resamples)`` and ``(len(perm_vectors),
    n_permutations)``.  Cached matrices are used when present, small ones
    are cached on the way, large ones are streamed; the results are the same
    bits in every case.
    """
    seed &= _MASK32
    # contiguous float64 (a no-op for paired_differences' output), written in fixed point once per call
    boot_vectors = [np.ascontiguousarray(v, dtype=np.float64) for v in boot_vectors]
    perm_vectors = [np.ascontiguousarray(v, dtype=np.float64) for v in perm_vectors]
    boot_out = np.empty((len(boot_vectors), n_resamples), dtype=np.float64)
    perm_out = np.empty((len(perm_vectors), n_permutations), dtype=np.float64)
    boot = perm = None
    counts_key = ("counts", n, n_resamples, seed)
    signs_key = ("signs", n, n_permutations, seed)
    if boot_vectors:
        counts, boot = _plan(_COUNTS_CACHE, counts_key, n, n_resamples, boot_vectors, boot_out, np.uint8)
        if counts is not None:
            matvecs(counts, boot_vectors, boot_out)
    if perm_vectors:
        signs, perm = _plan(_SIGNS_CACHE, signs_key, n, n_permutations, perm_vectors, perm_out, np.int8)
        if signs is not None:
            matvecs(signs, perm_vectors, perm_out)
    if boot is not None or perm is not None:
        _stream(n, seed, boot, perm)
    if boot is not None and boot.keep is not None:
        _COUNTS_CACHE.store(counts_key, boot.keep)
    if perm is not None and perm.keep is not None:
        _SIGNS_CACHE.store(signs_key, perm.keep)
    return boot_out, perm_out


def _matrix(kind: str, n: int, rows: int, seed: int) -> np.ndarray:
    seed &= _MASK32
    cache, dtype = (_COUNTS_CACHE, np.uint8) if kind == "counts" else (_SIGNS_CACHE, np.int8)
    key = (kind, n, rows, seed)
    hit, target = _plan(cache, key, n, rows, [], np.empty((0, rows)), dtype, force_keep=True)
    if hit is not None:
        return hit
    assert target is not None and target.keep is not None
    _stream(n, seed, target if kind == "counts" else None, target if kind == "signs" else None)
    return cache.store(key, target.keep)  # read-only; kept only if it fits


def resample_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Read-only ``(n_resamples, n)`` bootstrap count matrix (cached if small).

    ``counts[r, i]`` = how often item ``i`` appears in resample ``r``; uint8
    in practice (wider only if a count exceeded 255).  The statistics never
    need it whole above :data:`CACHE_BYTES`; this materialises it on request.
    """
    return _matrix("counts", n, n_resamples, seed)


def permutation_signs(n: int, n_permutations: int, seed: int) -> np.ndarray:
    """Read-only ``(n_permutations, n)`` int8 matrix of +-1 signs (cached if small)."""
    return _matrix("signs", n, n_permutations, seed)
