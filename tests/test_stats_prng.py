"""Mulberry32 must be bit-exact with the JavaScript reference generator.

Reference data: tests/data/mulberry32.json, produced by
``node tests/data/make_mulberry32.js > tests/data/mulberry32.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.stats import Mulberry32

DATA = json.loads((Path(__file__).parent / "data" / "mulberry32.json").read_text())
STREAMS = {s["seed"]: s for s in DATA["streams"]}
M32 = 0xFFFFFFFF


def _imul(x: int, y: int) -> int:
    return (x * y) & M32


def scalar_mulberry32(seed: int, count: int) -> list[int]:
    """Independent, line-by-line scalar transcription of the JS generator."""
    a = seed & M32
    out = []
    for _ in range(count):
        a = (a + 0x6D2B79F5) & M32
        t = _imul(a ^ (a >> 15), 1 | a)
        t = ((t + _imul(t ^ (t >> 7), 61 | t)) & M32) ^ t
        out.append((t ^ (t >> 14)) & M32)
    return out


def test_reference_file_covers_required_seeds():
    seeds = set(STREAMS)
    assert {0, 1, 1337, 2**31 - 1, 2**32 - 1, -5} <= seeds
    assert STREAMS[1337]["count"] >= 1000
    assert all(s["count"] >= 50 and len(s["values"]) == s["count"] for s in DATA["streams"])
    assert "node tests/data/make_mulberry32.js" in DATA["command"]


def test_first_values_seed_1337():
    assert Mulberry32(1337).random(3).tolist() == [
        0.1844118325971067,
        0.18998925131745636,
        0.8104719922412187,
    ]


@pytest.mark.parametrize("seed", sorted(STREAMS))
def test_matches_javascript_reference(seed):
    ref = np.array(STREAMS[seed]["values"], dtype=np.float64)
    got = Mulberry32(seed).random(ref.size)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, ref)  # bit-exact
    raw = Mulberry32(seed).uint32(ref.size)
    assert raw.dtype == np.uint32
    np.testing.assert_array_equal(raw.astype(np.float64) / 2**32, ref)


@pytest.mark.parametrize("case", DATA["integers"], ids=lambda c: f"{c['seed']}-{c['high']}")
def test_integers_match_javascript_floor(case):
    got = Mulberry32(case["seed"]).integers(case["high"], case["count"])
    assert got.dtype == np.int64
    assert got.tolist() == case["values"]


@pytest.mark.parametrize("sizes", [[1, 999], [3, 7, 990], [500, 500], [1000], [0, 10, 0, 990]])
def test_continuation_across_calls(sizes):
    ref = np.array(STREAMS[1337]["values"])
    rng = Mulberry32(1337)
    parts = [rng.random(k) for k in sizes]
    np.testing.assert_array_equal(np.concatenate(parts), ref)
    assert rng.position == 1000


def test_continuation_mixed_methods_and_chunk_boundaries():
    # Large draws are generated in 65536-element blocks internally; splitting
    # across and inside block boundaries must not change the stream.
    full = Mulberry32(99).uint32(300_000)
    rng = Mulberry32(99)
    parts = [
        rng.uint32(1),
        rng.uint32(65_535),
        rng.random(65_537),
        rng.uint32((3, 7)),
        rng.integers(2**20, 100_000),
        rng.uint32(300_000 - 1 - 65_535 - 65_537 - 21 - 100_000),
    ]
    as_u32 = [
        parts[0],
        parts[1],
        (parts[2] * 2**32).astype(np.uint32),
        parts[3].ravel(),
        None,
        parts[5],
    ]
    np.testing.assert_array_equal(np.concatenate(as_u32[:4]), full[: 1 + 65_535 + 65_537 + 21])
    lo = 1 + 65_535 + 65_537 + 21
    np.testing.assert_array_equal(
        parts[4], (full[lo : lo + 100_000].astype(np.float64) / 2**32 * 2**20).astype(np.int64)
    )
    np.testing.assert_array_equal(parts[5], full[lo + 100_000 :])


@pytest.mark.parametrize("width", [5, 70_001])  # rows inside one block, rows across the 65536-draw block
def test_rows_in_another_order_are_the_same_draws(width):
    """Mulberry32.rows with steps: every row's draws in the order given, the stream continued as in C order."""
    from pytest_crucible.stats.prng import order_steps

    order = np.random.default_rng(width).permutation(width)
    rng = Mulberry32(31)
    rng.uint32(3)
    got = rng.rows(np.empty((3, width), dtype=np.uint32), order_steps(order))
    assert rng.position == 3 + 3 * width
    np.testing.assert_array_equal(got, Mulberry32(31).uint32(3 + 3 * width)[3:].reshape(3, width)[:, order])
    with pytest.raises(ValueError, match="one step per position"):
        rng.rows(np.empty((2, width + 1), dtype=np.uint32), order_steps(order))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(min_value=-(2**40), max_value=2**40), skip=st.integers(0, 70_000))
def test_vectorized_equals_scalar_transcription(seed, skip):
    rng = Mulberry32(seed)
    rng.uint32(skip)
    got = rng.uint32(20).tolist()
    assert got == scalar_mulberry32(seed, skip + 20)[skip:]


def test_seed_is_reduced_mod_2_32_like_js_int32():
    np.testing.assert_array_equal(Mulberry32(-1).uint32(20), Mulberry32(2**32 - 1).uint32(20))
    np.testing.assert_array_equal(Mulberry32(2**32 + 5).uint32(20), Mulberry32(5).uint32(20))
    np.testing.assert_array_equal(Mulberry32(np.int64(1337)).random(3), Mulberry32(1337).random(3))


def test_shapes_are_row_major():
    flat = Mulberry32(7).random(12)
    grid = Mulberry32(7).random((3, 4))
    assert grid.shape == (3, 4)
    np.testing.assert_array_equal(grid.ravel(), flat)
    assert Mulberry32(7).random().shape == ()
    assert Mulberry32(7).random(0).shape == (0,)
    assert Mulberry32(7).integers(5, (2, 0)).shape == (2, 0)


def test_integers_is_floor_of_random_times_high():
    for high in (1, 2, 3, 10, 1000, 2**31 + 11):
        u = Mulberry32(3).random(5000)
        got = Mulberry32(3).integers(high, 5000)
        np.testing.assert_array_equal(got, np.floor(u * high).astype(np.int64))
        assert got.min() >= 0 and got.max() < high


def test_random_range_and_rough_uniformity():
    u = Mulberry32(2024).random(200_000)
    assert u.min() >= 0.0 and u.max() < 1.0
    # mean of U(0,1) has sd sqrt(1/12/200000) ~ 0.00065; 5 sd tolerance
    assert abs(u.mean() - 0.5) < 0.0033


def test_bad_arguments():
    with pytest.raises(TypeError):
        Mulberry32(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Mulberry32(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Mulberry32(1).integers(0, 3)
    with pytest.raises(ValueError):
        Mulberry32(1).random(-1)


def test_stats_package_never_imports_pytest():
    import ast

    import pytest_crucible.stats as stats_pkg

    pkg_dir = Path(stats_pkg.__file__).parent
    for path in sorted(pkg_dir.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in {"pytest", "_pytest", "hypothesis"}, f"{path.name} imports {name}"
