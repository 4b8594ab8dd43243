"""ULIDs: sortable unique ids (48-bit millisecond time + 80 random bits, Crockford base32)."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two characters (10 bits) per lookup: half the steps of one character at a time.
_PAIRS = [high + low for high in _ALPHABET for low in _ALPHABET]
_TIME_SHIFTS = (40, 30, 20, 10, 0)  # 48 bits of time: 10 characters, the first two bits zero
_RANDOM_SHIFTS = (70, 60, 50, 40, 30, 20, 10, 0)  # 80 random bits: 16 characters
_RANDOM_BYTES = 10


def _encode(value: int, shifts: tuple[int, ...]) -> str:
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in shifts])


def new_ulids(count: int, timestamp_ms: int | None = None) -> list[str]:
    """``count`` new ULIDs of one millisecond, in ascending order: ids made together (a batch of results)
    sort in the order they are handed out, and after every id of an earlier millisecond."""
    ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    head = _encode(ms, _TIME_SHIFTS)
    randomness = os.urandom(_RANDOM_BYTES * count)  # one read for the batch
    return sorted([head + _encode(int.from_bytes(randomness[start:start + _RANDOM_BYTES], "big"), _RANDOM_SHIFTS)
                   for start in range(0, len(randomness), _RANDOM_BYTES)])


def new_ulid(timestamp_ms: int | None = None) -> str:
    return new_ulids(1, timestamp_ms)[0]
