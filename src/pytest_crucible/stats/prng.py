"""Mulberry32: a tiny 32-bit PRNG, bit-exact with the common JavaScript version.

The reference generator (as found in many JavaScript code bases) is::

    function mulberry32(a) {
      return function () {
        a |= 0; a = a + 0x6D2B79F5 | 0;
        let t = Math.imul(a ^ a >>> 15, 1 | a);
        t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
        return ((t ^ t >>> 14) >>> 0) / 4294967296;
      };
    }

Why this generator: resampling indices and sign flips drawn from it can be
reproduced outside Python (a JavaScript report, another language) from the
seed alone, and its state is just a 32-bit counter, so draw ``i`` (0-based)
depends only on ``a_i = seed + (i + 1) * 0x6D2B79F5 (mod 2**32)``.  That lets
us compute whole arrays of draws with vectorized ``uint32`` numpy arithmetic;
numpy's wrapping ``uint32`` multiplication keeps exactly the low 32 bits of
the product, which is what ``Math.imul`` returns (signedness only changes how
those bits are read).

It is *not* a cryptographic or high-quality generator (its period is 2**32
and every 32-bit output does not appear exactly once), but it is more than
adequate for drawing bootstrap indices and permutation signs.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import Union

import numpy as np

__all__ = ["Mulberry32", "order_steps"]

_GOLDEN = np.uint32(0x6D2B79F5)
_MASK32 = 0xFFFFFFFF
_TWO_POW_M32 = 2.0**-32
_CHUNK = 1 << 16  # draws per vectorized block (256 KiB of uint32)
# k * GOLDEN mod 2**32 for k < _CHUNK, built once: streaming callers ask for
# many small blocks (one resample row of 100,000 items at a time), and
# rebuilding it on every call would add two full passes to each block.
_STEPS = np.arange(_CHUNK, dtype=np.uint32) * _GOLDEN
_STEPS.setflags(write=False)

SizeLike = Union[int, "tuple[int, ...]", None]


def _normalize_size(size: SizeLike) -> tuple[tuple[int, ...], int]:
    """Return ``(shape, count)`` for a numpy-style ``size`` argument."""
    if size is None:
        return (), 1
    if isinstance(size, (int, numbers.Integral)):
        shape: tuple[int, ...] = (int(size),)
    else:
        shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"size must be non-negative, got {size!r}")
    count = 1
    for s in shape:
        count *= s
    return shape, count


class Mulberry32:
    """Vectorized Mulberry32 stream.

    ``seed`` is any Python/numpy integer; like JavaScript's ``a |= 0`` it is
    reduced modulo 2**32 (so ``-1`` and ``2**32 - 1`` give the same stream).

    Successive calls continue the stream: ``rng.random(3); rng.random(5)``
    yields the same 8 numbers as ``rng.random(8)``.  All draws come in C
    (row-major) order, so ``rng.random((r, c))`` fills row 0 first.
    """

    __slots__ = ("_counter", "_seed")

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
        self._seed: int = int(seed) & _MASK32
        self._counter: int = 0  # number of 32-bit draws consumed so far

    @property
    def seed(self) -> int:
        """The seed reduced to an unsigned 32-bit integer."""
        return self._seed

    @property
    def position(self) -> int:
        """How many 32-bit outputs have been consumed."""
        return self._counter

    def __repr__(self) -> str:
        return f"Mulberry32(seed={self._seed}, position={self._counter})"

    def advance(self, count: int) -> None:
        """Skip the next ``count`` outputs, as if they had been drawn (the stream is counter-based: draw ``i``
        depends on the seed and ``i`` only)."""
        if count < 0:
            raise ValueError(f"count must be non-negative, got {count}")
        self._counter += int(count)

    # -- core -----------------------------------------------------------
    def _blocks(self, count: int, steps: np.ndarray = _STEPS, out: np.ndarray | None = None
                ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(offset, uint32 block)`` covering the next ``count`` outputs.

        The outputs come in rows of ``len(steps)``, row ``r``'s entry ``j`` being output ``r * len(steps) + k``
        where ``steps[j] = k * GOLDEN mod 2**32`` (:func:`order_steps`); the default steps are ``0, 1, 2, ...``,
        the stream's own order. Works in cache-sized chunks: the dozen elementwise passes then stay in L2
        cache, which is several times faster than whole-array passes for millions of draws. The yielded
        block is a view of ``out`` (flat, ``count`` long) when given, else a scratch buffer that is
        overwritten by the next iteration (callers copy/convert it).
        """
        start = self._counter
        self._counter += count
        if count == 0:
            return
        width = steps.shape[0]
        chunk = min(_CHUNK, count, width)
        a_buf = np.empty(chunk, dtype=np.uint32)
        t_buf = np.empty(chunk, dtype=np.uint32)
        u_buf = np.empty(chunk, dtype=np.uint32)
        for row in range(0, count, width):
            # State of global draw i (0-based): seed + (i + 1) * GOLDEN mod 2**32; a row's draws are its first
            # draw's state plus their steps.
            base = np.uint32((self._seed + (start + row + 1) * 0x6D2B79F5) & _MASK32)
            for lo in range(row, min(count, row + width), chunk):
                m = min(chunk, count - lo, row + width - lo)
                a, t, u = a_buf[:m], t_buf[:m], u_buf[:m]
                np.add(steps[lo - row : lo - row + m], base, out=a)
                # t = imul(a ^ (a >>> 15), 1 | a)
                np.right_shift(a, np.uint32(15), out=t)
                np.bitwise_xor(t, a, out=t)
                np.bitwise_or(a, np.uint32(1), out=a)
                np.multiply(t, a, out=t)
                # t = (t + imul(t ^ (t >>> 7), 61 | t)) ^ t      (a is scratch now)
                np.right_shift(t, np.uint32(7), out=u)
                np.bitwise_xor(u, t, out=u)
                np.bitwise_or(t, np.uint32(61), out=a)
                np.multiply(u, a, out=u)
                np.add(u, t, out=u)
                np.bitwise_xor(u, t, out=u)
                # result = (t ^ (t >>> 14)) >>> 0, written where the caller wants it (no copy)
                np.right_shift(u, np.uint32(14), out=a)
                result = u if out is None else out[lo : lo + m]
                np.bitwise_xor(u, a, out=result)
                yield lo, result

    # -- public API -----------------------------------------------------
    def uint32(self, n: SizeLike = None, *, out: np.ndarray | None = None) -> np.ndarray:
        """Next raw 32-bit outputs (``(t ^ t >>> 14) >>> 0`` in the JS code).

        ``n`` is an int or a shape tuple; ``None`` gives a 0-d array.  With
        ``out`` (a C-contiguous uint32 array, ``n`` left out) the next
        ``out.size`` outputs are written into it in C order and it is
        returned: streaming callers reuse one buffer for every block.
        """
        if out is not None:
            if n is not None:
                raise TypeError("give either n or out, not both")
            return self.rows(out)
        shape, count = _normalize_size(n)
        buf = np.empty(count, dtype=np.uint32)
        for _ in self._blocks(count, out=buf):
            pass
        return buf.reshape(shape)

    def rows(self, out: np.ndarray, steps: np.ndarray | None = None) -> np.ndarray:
        """The next ``out.size`` outputs written into ``out`` (a writeable C-contiguous uint32 array) and
        returned: in C order, or with ``steps`` (:func:`order_steps` of an order of ``out.shape[-1]``
        positions) each row of ``out.shape[-1]`` outputs in that order: ``out[r, j]`` is output ``order[j]`` of
        row ``r``. The stream is counter-based, so reordering a row costs nothing: a reader that sums a row
        by groups of positions draws it group by group."""
        if out.dtype != np.uint32 or not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("out must be a writeable C-contiguous uint32 array")
        if steps is not None and (out.ndim == 0 or steps.shape != (out.shape[-1],)):
            raise ValueError(f"steps must give one step per position of a row ({out.shape[-1:]}), got {steps.shape}")
        for _ in self._blocks(out.size, _STEPS if steps is None else steps, out.reshape(-1)):
            pass
        return out

    def random(self, n: SizeLike = None) -> np.ndarray:
        """Next floats in ``[0, 1)``: ``uint32 / 2**32`` exactly as in JS."""
        shape, count = _normalize_size(n)
        out = np.empty(count, dtype=np.float64)
        for lo, block in self._blocks(count):
            dst = out[lo : lo + block.size]
            dst[...] = block
            dst *= _TWO_POW_M32  # exact: scaling by a power of two
        return out.reshape(shape)

    def integers(self, high: int, size: SizeLike = None) -> np.ndarray:
        """Integers in ``[0, high)`` as ``floor(random() * high)`` (int64).

        This is the JavaScript idiom ``Math.floor(rng() * high)`` and is how
        resampling indices are drawn.  ``(u / 2**32) * high`` is computed as
        ``u * (high * 2**-32)``: both are the single correctly rounded float64
        product of the same exact real number, so results match the JS idiom
        bit for bit.  (Like the JS idiom it is very slightly non-uniform when
        ``high`` is not a power of two, by at most ``high / 2**32`` in
        probability per value.)
        """
        if isinstance(high, bool) or not isinstance(high, numbers.Integral):
            raise TypeError(f"high must be an integer, got {type(high).__name__}")
        high = int(high)
        if high < 1:
            raise ValueError(f"high must be >= 1, got {high}")
        if high > 2**53:
            raise ValueError("high must be <= 2**53")
        shape, count = _normalize_size(size)
        scale = float(high) * _TWO_POW_M32
        out = np.empty(count, dtype=np.int64)
        buf = np.empty(min(_CHUNK, count), dtype=np.float64)
        for lo, block in self._blocks(count):
            f = buf[: block.size]
            np.multiply(block, scale, out=f)  # uint32 -> float64 is exact
            # truncation == floor for non-negative values
            out[lo : lo + block.size] = f
        return out.reshape(shape)


def order_steps(order: np.ndarray) -> np.ndarray:
    """``order[j] * GOLDEN mod 2**32`` as uint32: the steps with which :meth:`Mulberry32.rows` draws every row
    in ``order`` (a sequence of positions in a row, e.g. a permutation), built once for all the rows."""
    steps = np.asarray(order).astype(np.uint32) * _GOLDEN  # wrapping uint32 product: exactly mod 2**32
    steps.setflags(write=False)
    return steps
