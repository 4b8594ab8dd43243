"""`crucible golden import`: a 100,000-query BEIR set in bounded memory, and reference passages matched through
the chunk index instead of a scan of the corpus per passage.

1. **BEIR at 10,000 and 100,000 queries** (3 judgments a query, a 300,000-document corpus): the import runs
   in a process of its own (`crucible golden import DIR --from beir --no-ledger`), and its peak resident
   memory is set beside a reference process that imports the same modules and then holds what a
   load-everything import would: every query and every judgment parsed, every item built as a
   ``GoldenItem``. Reported: each one's peak above a bare interpreter with the same imports, and wall time.
2. **Passages against chunks**: 2,000 passages (1,000 copied from chunks, 500 paraphrased by dropping and
   swapping words, 500 that match nothing) against 50,000 chunks: ``ChunkIndex.match`` against the same
   rule applied by a scan of every chunk per passage (containment, then the best word overlap). Reported:
   both times, the ratio, and whether the two chose the same chunks for every passage.

    .venv/bin/python bench/bench_golden_import.py
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = [f"w{i}" for i in range(20_000)]
PREAMBLE = "import resource, sys\nfrom pytest_crucible.cli import main\nfrom pytest_crucible.golden_set import imports, schema, sources, benchmarks\n"
PEAK = "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def make_beir(folder: Path, queries: int, rng: random.Random) -> None:
    (folder / "qrels").mkdir(parents=True)
    docs = 3 * queries if queries <= 100_000 else 300_000
    with (folder / "corpus.jsonl").open("w") as out:
        for d in range(docs):
            out.write(json.dumps({"_id": f"d{d}", "title": "", "text": " ".join(rng.choices(WORDS, k=30))}) + "\n")
    with (folder / "queries.jsonl").open("w") as out:
        for q in range(queries):
            out.write(json.dumps({"_id": f"q{q}", "text": " ".join(rng.choices(WORDS, k=8))}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for q in range(queries):
            for d in rng.sample(range(docs), 3):
                out.write(f"q{q}\td{d}\t{rng.choice((0, 1, 2))}\n")


def child(code: str) -> tuple[int, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PREAMBLE + code + "\n" + PEAK], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return int(done.stdout.strip().splitlines()[-1]), time.perf_counter() - started


NAIVE = """
import json
from pathlib import Path
from pytest_crucible.golden_set.schema import GoldenItem
folder = Path(sys.argv[1] if len(sys.argv) > 1 else {folder!r})
judged = {{}}
for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
    q, d, g = line.split("\\t")
    judged.setdefault(q, []).append((d, int(g)))
queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
items = [GoldenItem.model_validate({{"id": r["_id"], "question": r["text"], "status": "draft",
         "citations": [{{"docId": d, "mode": "required"}} for d, g in judged.get(r["_id"], []) if g > 0]}}) for r in queries]
lines = [json.dumps(item.to_json()) for item in items]
"""


def bench_beir() -> list[str]:
    rows = ["| queries | judgments | import peak above bare (MiB) | load-everything peak above bare (MiB) | ratio | import wall (s) |",
            "|---:|---:|---:|---:|---:|---:|"]
    rng = random.Random(7)
    bare, _ = child("pass")
    for queries in (10_000, 100_000):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "beir"
            make_beir(folder, queries, rng)
            out = Path(tmp) / "golden.jsonl"
            peak, wall = child(f"rc = main(['golden', 'import', {str(folder)!r}, '--from', 'beir', '--no-ledger', '-o', {str(out)!r}])\n"
                               "assert rc == 0, rc")
            naive, _ = child(NAIVE.format(folder=str(folder)))
            written = sum(1 for _ in out.open())
            assert written > 0
        above, naive_above = (peak - bare) / 1024, (naive - bare) / 1024
        rows.append(f"| {queries:,} | {3 * queries:,} | {above:.0f} | {naive_above:.0f} | {above / naive_above:.2f} | {wall:.1f} |")
        print(rows[-1], flush=True)
    return rows


def bench_matching() -> list[str]:
    from pytest_crucible.golden_set.context_match import MATCH_THRESHOLD, MIN_SPANNED_WORDS, ChunkIndex, _words, normalised
    from pytest_crucible.golden_set.corpus import Chunk

    rng = random.Random(11)
    chunks = [Chunk(f"doc{i // 4}#p{i % 4 + 1}", f"doc{i // 4}", " ".join(rng.choices(WORDS, k=40))) for i in range(50_000)]
    passages = []
    for _ in range(1_000):
        words = rng.choice(chunks).text.split()
        start = rng.randrange(0, 20)
        passages.append(" ".join(words[start:start + 15]))
    for _ in range(500):
        words = rng.choice(chunks).text.split()
        kept = [w for w in words if rng.random() > 0.25]
        rng.shuffle(kept)
        passages.append(" ".join(kept))
    passages += [" ".join(rng.choices(WORDS, k=15)) for _ in range(500)]

    started = time.perf_counter()
    index = ChunkIndex(chunks)
    built = time.perf_counter() - started
    started = time.perf_counter()
    indexed = [[m.chunk.chunk_id for m in index.match(p)] for p in passages]
    matched = time.perf_counter() - started

    texts = [normalised(c.text) for c in chunks]
    word_sets = [_words(t) for t in texts]
    started = time.perf_counter()
    scanned = []
    for passage in passages:
        text, words = normalised(passage), _words(normalised(passage))
        contained = [chunks[i].chunk_id for i in range(len(chunks))
                     if text in texts[i] or (len(word_sets[i]) >= MIN_SPANNED_WORDS and texts[i] in text)]
        if contained:
            scanned.append(contained)
            continue
        shares = [len(words & ws) / len(words) for ws in word_sets]
        best = max(range(len(chunks)), key=shares.__getitem__)
        scanned.append([chunks[best].chunk_id] if shares[best] >= MATCH_THRESHOLD else [])
    scan = time.perf_counter() - started
    same = sum(a == b for a, b in zip(indexed, scanned, strict=True))
    line = (f"| 2,000 passages x 50,000 chunks | index built {built:.2f} s + matched {matched:.2f} s | scan {scan:.1f} s | "
            f"{scan / (built + matched):.0f}x | {same} of {len(passages)} passages: the same chunks |")
    print(line, flush=True)
    return ["| what | `ChunkIndex` | a scan per passage | speed-up | agreement |", "|---|---:|---:|---:|---|", line]


if __name__ == "__main__":
    print("\n".join(bench_beir()))
    print()
    print("\n".join(bench_matching()))
