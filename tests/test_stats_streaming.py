"""Regression of the statistics core, its machine independence, and its bounded memory at large n.

``EXPECTED`` holds, per case, what a user reads (delta, interval, p-value, verdict, planning numbers)
and the full bootstrap and permutation distributions as a SHA-256 prefix of their float64 bytes.
The sums are computed exactly in fixed point (``stats.resampling``), so the distributions are the
same bits on every CPU, BLAS kernel and thread count, cached or streamed, batched or alone: their
digests are pinned exactly, and CI runs these tests again under another ``OPENBLAS_CORETYPE``.
The reported floats are pinned to 1e-9 relative (their last bits may come from numpy reductions
that a CPU's vector width orders differently); the p-value, the verdict and required n exactly.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

from pytest_crucible.stats import Mulberry32, paired_bootstrap_bca, paired_permutation_test, paired_test, paired_tests, resampling
from pytest_crucible.stats.bootstrap import matvec, resample_counts
from pytest_crucible.stats.permutation import permutation_signs
from pytest_crucible.stats.resampling import MatrixCache, resample_sums


def make(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Paired scores from our own PRNG (numpy's distributions may change between versions)."""
    u = Mulberry32(seed).random(2 * n)
    u1, u2 = u[:n], u[n:]
    if kind == "cont":
        return u1, np.clip(0.8 * u1 + 0.25 * u2, 0.0, 1.0)
    if kind == "skew":
        # u**4 rounded once from the exact value: numpy's and the C library's pow round the last bit
        # differently from one CPU to another (x**0.5 is a square root: correctly rounded everywhere).
        q = np.array([float(Fraction(x) ** 4) for x in u1.tolist()])
        return q, u2**0.5 * 0.3 + q
    if kind == "ties":
        return np.round(u1 * 4) / 4, np.round((0.7 * u1 + 0.35 * u2) * 4) / 4
    if kind == "binary":
        return (u1 < 0.6).astype(float), np.where(u2 < 0.3, (u2 < 0.2).astype(float), (u1 < 0.6).astype(float))
    if kind == "grid3":
        return np.floor(u1 * 4) / 3, np.where(u2 < 0.5, np.floor(u2 * 8) / 3, np.floor(u1 * 4) / 3)
    if kind == "identical":
        return u1, u1.copy()
    if kind == "shift":
        return u1, u1 + 0.25
    raise AssertionError(kind)


# (kind, n, data seed, seed, n_resamples, n_permutations, confidence) ->
# (delta, ci_low, ci_high, p_value, significant, mde, required_n, sd_diff,
#  bootstrap sums digest, permutation sums digest or None when exact)
EXPECTED = {
    ('cont', 2, 1, 1337, 10000, 10000, 0.95): ('0x1.0130c2b800000p-3', '0x1.a6823d5999980p-8', '0x1.f52d738533333p-3', '0x1.0000000000000p-1', False, '0x1.55c6794a79039p-2', 15, '0x1.590cc17c7b6d8p-3', '0d2aac4443d69709b9c3d51f', None),
    ('cont', 3, 2, 1337, 10000, 10000, 0.95): ('0x1.4a8f965777778p-4', '-0x1.950eef4ccccc0p-7', '0x1.16ba800b11111p-3', '0x1.0000000000000p-1', False, '0x1.1923320bac95cp-3', 9, '0x1.5b9ee1556d1bcp-4', '90c5009c61112f27ec87ef7a', None),
    ('binary', 5, 3, 7, 2000, 2000, 0.95): ('-0x1.999999999999ap-3', '-0x1.999999999999ap-1', '0x0.0p+0', '0x1.0000000000000p+0', False, '0x1.1ee1e023803a6p-1', 40, '0x1.c9f25c5bfeddap-2', '20800e837aebdbeca377a02d', None),
    ('ties', 13, 4, 1337, 10000, 10000, 0.95): ('0x1.3b13b13b13b14p-4', '0x0.0p+0', '0x1.89d89d89d89d9p-3', '0x1.4000000000000p-2', False, '0x1.2acce650a1ef1p-3', 47, '0x1.808bef4151305p-3', 'fc29e354593d4623e475a56f', None),
    ('cont', 14, 5, 99, 3000, 10000, 0.9): ('0x1.4cb5ac6075087p-7', '-0x1.079002d6b1e2ap-5', '0x1.1b43cebcc5805p-4', '0x1.84e05601e4eb0p-1', False, '0x1.5edcf1642b2d4p-4', 997, '0x1.d4985e499c152p-4', 'ed51ded50e0b1136ab267706', 'cb5d35933f0ebc6eac75f06c'),
    ('skew', 30, 6, 1337, 500, 700, 0.95): ('0x1.88af17f6ba5edp-3', '0x1.6273af3eb4b1fp-3', '0x1.b937a0344cbbcp-3', '0x1.75f50b522b17cp-10', True, '0x1.ec455b68870cep-6', None, '0x1.e134b8974c0ebp-5', '4c94f198f373347584ef86fc', 'b57b5f6fe0eb38f293f737bb'),
    ('ties', 57, 7, -1, 4000, 4000, 0.99): ('0x1.0d79435e50d79p-4', '0x1.1f7047dc11f70p-8', '0x1.f7047dc11f704p-4', '0x1.602aff4bd2300p-7', True, '0x1.11b1a24f6f531p-4', None, '0x1.70c7f7dd6c2a0p-3', '3009d51d6b6f7ef2e90413b7', '89dd86e8e46af56625796f4d'),
    ('binary', 200, 8, 1337, 10000, 10000, 0.95): ('0x1.47ae147ae147bp-7', '-0x1.47ae147ae147bp-5', '0x1.eb851eb851eb8p-5', '0x1.ad93849ece781p-1', False, '0x1.252f5f8075efcp-4', 10247, '0x1.71fe1873035a5p-2', '86b65b438e48b4318e6f9f60', 'eaa8b61d4c449b43e6669ade'),
    ('grid3', 300, 9, 4294967301, 5000, 5000, 0.95): ('0x1.7e4b17e4b17e3p-6', '-0x1.23456789abce0p-6', '0x1.0c8238609e9cfp-4', '0x1.3bbd0b35e71f3p-2', False, '0x1.eefe14d3b984ep-5', 2012, '0x1.7e87a9cdb6301p-2', '86c7f17d9fe27a8db0d66fc2', '4c74790a52ceaac1ad63d484'),
    ('identical', 100, 10, 1337, 10000, 10000, 0.95): ('0x0.0p+0', '0x0.0p+0', '0x0.0p+0', '0x1.0000000000000p+0', False, '0x0.0p+0', None, '0x0.0p+0', 'f8c784aa6b57396e7c5e094c', 'f8c784aa6b57396e7c5e094c'),
    ('shift', 40, 11, 1337, 10000, 10000, 0.95): ('0x1.0000000000000p-2', '0x1.0000000000000p-2', '0x1.0000000000000p-2', '0x1.a3637230afb37p-14', True, '0x0.0p+0', None, '0x0.0p+0', '23a65336b354e9d507e8a1bc', 'd52f107b62865290765b9eb6'),
    ('cont', 1000, 12, 1337, 10000, 10000, 0.95): ('0x1.7e49418193ddfp-6', '0x1.1f4616971bf7ep-6', '0x1.e2e2f71cd3af2p-6', '0x1.a3637230afb37p-14', True, '0x1.1608c94cef855p-7', None, '0x1.8849a0786f418p-4', 'b47d6508b86673732633d923', 'd43c54f0fa15f53ed0dc469e'),
    ('binary', 1000, 13, 1337, 100, 1000, 0.95): ('0x1.0e5604189374cp-5', '0x1.0deca6e87a42ep-7', '0x1.ae5203dee9ea8p-5', '0x1.05e1d27a3ee9cp-8', True, '0x1.1189f425f7e7ep-5', None, '0x1.81f1e1420ca59p-2', 'b786acb9177a0b53329e5142', '0571b82ef68b3528c62dd1e5'),
    ('skew', 1000, 14, 4242, 1000, 50, 0.8): ('0x1.9c368cd88cb58p-3', '0x1.969304bfd4463p-3', '0x1.a2825fe0090f9p-3', '0x1.4141414141414p-6', True, '0x1.956734f3509bbp-8', None, '0x1.1dff8a136165ep-4', '35b850d9de73d23fe8f78d07', 'a3b4170056308d2eaf6faf38'),
    ('grid3', 7000, 15, 1337, 1500, 1500, 0.95): ('-0x1.448f2a3a51b98p-11', '-0x1.47ae147ae147dp-7', '0x1.080defea10e9fp-7', '0x1.cc26e2d5df985p-1', False, '0x1.9a534197f6777p-7', 2864221, '0x1.7eeefcf74d2bfp-2', '80c5877dbf7ae881c679a8cc', '5142bf63bd29e0d6e9de91d6'),
    ('cont', 20000, 16, 1337, 4000, 3000, 0.95): ('0x1.956b67d890972p-6', '0x1.7f62ac987f10dp-6', '0x1.a9cf6cdfdaaa8p-6', '0x1.5d68ab4acff93p-12', True, '0x1.e10564246f264p-10', None, '0x1.7b65f10e0e877p-4', 'ab3a7df04b74fcaab98257d5', '81d67e41c3d7066808fd77da'),
    ('binary', 20000, 17, 5, 3000, 4000, 0.95): ('0x1.39c0ebedfa440p-6', '0x1.c779a6b50b0f2p-7', '0x1.8ec2366cc1ca5p-6', '0x1.0614174a4911ep-12', True, '0x1.e568893919184p-8', None, '0x1.7edbce301727ep-2', 'fa7ed50aed1d5d393113ada4', 'd8bbbed23eab7d006bde8841'),
}


def digest(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).hexdigest()[:24]


def record(t) -> tuple:
    return (t.delta.hex(), t.ci_low.hex(), t.ci_high.hex(), t.p_value.hex(), t.significant,
            t.mde.hex(), t.required_n, t.sd_diff.hex())


def assert_reads(t, want) -> None:
    """``t`` reads as recorded: the p-value, the verdict and required n exactly, the floats to 1e-9."""
    assert (t.p_value.hex(), t.significant, t.required_n) == (want[3], want[4], want[6])
    for got, expected in zip((t.delta, t.ci_low, t.ci_high, t.mde, t.sd_diff), (want[0], want[1], want[2], want[5], want[7])):
        assert got == pytest.approx(float.fromhex(expected), rel=1e-9, abs=1e-15)


def is_exact(n: int, P: int) -> bool:
    return n < 62 and (1 << n) <= P


@pytest.fixture(params=["default", "stream", "1MiB"])
def budget(request, monkeypatch):
    """Cache budget: the default (64 MiB), none (everything streamed), or
    1 MiB (small count matrices cached while larger sign matrices stream)."""
    resampling.clear_caches()
    if request.param != "default":
        size = 0 if request.param == "stream" else 1 << 20
        monkeypatch.setattr(resampling._COUNTS_CACHE, "max_bytes", size)
        monkeypatch.setattr(resampling._SIGNS_CACHE, "max_bytes", size)
    yield request.param
    resampling.clear_caches()


CASE_IDS = [f"{c[0]}-{c[1]}-B{c[4]}-P{c[5]}" for c in EXPECTED]


def skip_redundant(budget: str, n: int) -> None:
    # n = 20,000 already mixes a streamed and a cached matrix under the default budget
    if budget != "default" and n >= 20_000:
        pytest.skip("covered under the default budget")


@pytest.mark.parametrize("case", list(EXPECTED), ids=CASE_IDS)
def test_paired_test_is_bit_identical(case, budget):
    kind, n, data_seed, seed, B, P, confidence = case
    skip_redundant(budget, n)
    a, b = make(kind, n, data_seed)
    for _ in range(2 if n * max(B, P) <= 10**7 else 1):  # cold, then warm (cache hits)
        t = paired_test(a, b, seed=seed, n_resamples=B, n_permutations=P, confidence=confidence)
        assert_reads(t, EXPECTED[case])
    if n * max(B, P) > 10**7:
        return  # the two halves below stream the same large matrices again
    boot = paired_bootstrap_bca(a, b, seed=seed, n_resamples=B, confidence=confidence)
    assert [boot.delta, boot.ci_low, boot.ci_high] == pytest.approx([float.fromhex(x) for x in EXPECTED[case][:3]], rel=1e-9, abs=1e-15)
    assert paired_permutation_test(a, b, seed=seed, n_permutations=P).hex() == EXPECTED[case][3]


@pytest.mark.parametrize("case", list(EXPECTED), ids=CASE_IDS)
def test_distributions_are_bit_identical(case, budget):
    kind, n, data_seed, seed, B, P, _confidence = case
    skip_redundant(budget, n)
    a, b = make(kind, n, data_seed)
    d = b - a
    want_boot, want_perm = EXPECTED[case][8:]
    # the sums of the streamed (or cached) engine, bootstrap and permutation in one pass
    perm_vectors = [] if is_exact(n, P) else [d]
    boot_sums, perm_sums = resample_sums(n, seed, [d], B, perm_vectors, P)
    assert digest(boot_sums[0]) == want_boot
    assert (digest(perm_sums[0]) if perm_vectors else None) == want_perm
    # the materialised matrices times d (the pre-streaming computation)
    if n * max(B, P) > 10**7:
        return  # 60-80 MB matrices: the digests above already pin the sums
    assert digest(matvec(resample_counts(n, B, seed), d)) == want_boot
    if perm_vectors:
        assert digest(matvec(permutation_signs(n, P, seed), d)) == want_perm


def test_batched_paired_tests_equal_one_at_a_time(budget):
    """All cases in one call: metrics grouped by n share one stream per n."""
    if budget == "1MiB":
        pytest.skip("default and streamed cover it")
    by_options: dict[tuple, list] = {}
    for case in EXPECTED:
        if case[1] < 20_000:
            by_options.setdefault((case[3], case[4], case[5], case[6]), []).append(case)
    # several metrics on the same n with the same options, plus other n
    extra = [("cont", 1000, 101, 1337, 10_000, 10_000, 0.95), ("skew", 1000, 102, 1337, 10_000, 10_000, 0.95),
             ("binary", 1000, 103, 1337, 10_000, 10_000, 0.95), ("identical", 1000, 104, 1337, 10_000, 10_000, 0.95),
             ("shift", 1000, 105, 1337, 10_000, 10_000, 0.95), ("ties", 13, 106, 1337, 10_000, 10_000, 0.95)]
    for case in extra:
        by_options.setdefault((case[3], case[4], case[5], case[6]), []).append(case)
    for (seed, B, P, confidence), cases in by_options.items():
        pairs = [make(kind, n, ds) for kind, n, ds, *_ in cases]
        batch = paired_tests(pairs, seed=seed, n_resamples=B, n_permutations=P, confidence=confidence)
        assert len(batch) == len(cases)
        for case, (a, b), t in zip(cases, pairs, batch):
            if case in EXPECTED:
                assert_reads(t, EXPECTED[case])
            else:
                single = paired_test(a, b, seed=seed, n_resamples=B, n_permutations=P, confidence=confidence)
                assert t == single


def test_batched_validation_matches_single():
    with pytest.raises(ValueError, match="same length"):
        paired_tests([([0, 1], [1, 1]), ([0, 1, 2], [1, 1])])
    with pytest.raises(ValueError, match="alpha"):
        paired_tests([([0, 1], [1, 1])], alpha=2.0)
    with pytest.raises(ValueError, match="power"):
        paired_tests([([0, 1], [1, 1])], power=1.0)
    with pytest.raises(TypeError, match="seed"):
        paired_tests([([0, 1], [1, 1])], seed=1.5)
    with pytest.raises(ValueError, match="n_permutations"):
        paired_tests([([0, 1], [1, 1])], n_permutations=0)
    assert paired_tests([]) == []


# ---------------------------------------------------------------------------
# bounded memory
# ---------------------------------------------------------------------------
def test_large_n_streams_without_a_b_by_n_matrix():
    """n = 50,000 with 2,000 resamples and permutations: the whole uint8 count
    matrix alone would be 100 MB (and 800 MB as float64); the streamed pass
    holds a few blocks of rows and the sums, and caches nothing."""
    n, B = 50_000, 2_000
    pairs = [make(kind, n, 200 + i) for i, kind in enumerate(["cont", "binary"])]
    resampling.clear_caches()
    tracemalloc.start()
    try:
        results = paired_tests(pairs, seed=1337, n_resamples=B, n_permutations=B)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(results) == 2 and all(r.ci_low <= r.delta <= r.ci_high for r in results)
    # per-block buffers (~28 bytes x 2 rows x 50,000) + sums (2 x 2 x 16 kB) + differences
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert resampling._COUNTS_CACHE.nbytes == 0 and resampling._SIGNS_CACHE.nbytes == 0


@pytest.mark.parametrize("threads", [False, True])
def test_items_in_few_groups_give_the_matrix_products(monkeypatch, threads):
    """Metrics on a coarse grid (hit rates, ranks): a streamed row is counted per group of items with the same
    values, a permutation row drawn group by group; the sums are the count and sign matrices' own products, bit
    for bit. The bootstrap tests fewer vectors than the permutation (a constant shift), so each side has its
    own groups."""
    n, rows = 70_001, 13
    rng = np.random.default_rng(5)
    hits = np.where(rng.random(n) < 0.1, 1.0, 0.0) - np.where(rng.random(n) < 0.1, 1.0, 0.0)
    ranks = 1.0 / rng.integers(1, 11, n) - 1.0 / rng.integers(1, 11, n)
    shift = np.full(n, 0.25)
    resampling.clear_caches()
    for cache in (resampling._COUNTS_CACHE, resampling._SIGNS_CACHE):
        monkeypatch.setattr(cache, "max_bytes", 0)  # streamed, never kept
    if threads:
        monkeypatch.setattr(resampling, "_THREADED_DRAWS", 0)
        monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert resampling._Groups.of_halves(resampling._halves([resampling.fixed_point(v, n) for v in (hits, ranks)])) is not None
    boot, perm = resample_sums(n, 3, [hits, ranks], rows, [hits, ranks, shift], rows + 2)
    monkeypatch.undo()
    resampling.clear_caches()
    counts, signs = resample_counts(n, rows, 3), permutation_signs(n, rows + 2, 3)
    for j, vector in enumerate((hits, ranks)):
        assert boot[j].tobytes() == matvec(counts, vector).tobytes()
    for j, vector in enumerate((hits, ranks, shift)):
        assert perm[j].tobytes() == matvec(signs, vector).tobytes()
    resampling.clear_caches()


def test_cache_is_bounded_in_bytes():
    cache = MatrixCache(max_bytes=250)
    for i in range(5):
        cache.store(("k", i), np.zeros(100, dtype=np.uint8))
    assert cache.nbytes == 200 and cache.lookup(("k", 0)) is None and cache.lookup(("k", 4)) is not None
    big = cache.store(("big",), np.zeros(300, dtype=np.uint8))  # over budget: returned, not kept
    assert not big.flags.writeable and cache.lookup(("big",)) is None and cache.nbytes == 200
    cache.clear()
    assert cache.nbytes == 0


def test_small_matrices_are_cached_large_ones_not(monkeypatch):
    resampling.clear_caches()
    assert resampling.CACHE_BYTES == 64 << 20
    monkeypatch.setattr(resampling._COUNTS_CACHE, "max_bytes", 1 << 20)
    monkeypatch.setattr(resampling._SIGNS_CACHE, "max_bytes", 1 << 20)
    d = np.linspace(-1, 1, 100)
    resample_sums(100, 7, [d], 10_000, [d], 10_000)  # 1,000,000 bytes each: cached
    assert resampling._COUNTS_CACHE.nbytes == 1_000_000 == resampling._SIGNS_CACHE.nbytes
    e = np.linspace(-1, 1, 200)
    resample_sums(200, 7, [e], 10_000, [e], 10_000)  # 2 MB each: streamed, not cached
    assert resampling._COUNTS_CACHE.nbytes == 1_000_000 == resampling._SIGNS_CACHE.nbytes
    resampling.clear_caches()


def test_mulberry_fills_a_buffer_continuing_the_stream():
    rng = Mulberry32(99)
    buf = np.empty((3, 70_000), dtype=np.uint32)  # crosses the 65,536-draw chunk
    first = rng.uint32(5)
    assert rng.uint32(out=buf) is buf
    np.testing.assert_array_equal(np.concatenate([first, buf.ravel()]), Mulberry32(99).uint32(5 + buf.size))
    assert rng.position == 5 + buf.size
    with pytest.raises(TypeError):
        rng.uint32(3, out=buf)
    with pytest.raises(ValueError):
        rng.uint32(out=np.empty(4, dtype=np.int64))


_THREADS_SCRIPT = """
import hashlib
import numpy as np
from pytest_crucible.stats.resampling import resample_sums
d = np.random.default_rng(3).normal(0.0, 0.3, 70_001)
boot, perm = resample_sums(70_001, 11, [d], 201, [d], 201)  # two-row blocks and a lone last row
grid = np.round(d, 1)  # a coarse grid: rows counted per group of items
grouped = resample_sums(70_001, 11, [grid], 201, [grid], 201)
print(hashlib.sha256(boot.tobytes() + perm.tobytes() + grouped[0].tobytes() + grouped[1].tobytes()).hexdigest())
"""


def test_large_n_sums_do_not_depend_on_the_blas_thread_count():
    """Above 2**16 items a single long dot product would be split across OpenBLAS threads (last bits
    varying with OPENBLAS_NUM_THREADS); rows are computed two at a time, never alone."""
    import os
    import subprocess
    import sys

    digests = {subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], capture_output=True, text=True, check=True,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}).stdout
               for threads in ("1", "2")}
    assert len(digests) == 1, digests
