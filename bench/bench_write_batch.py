"""Benchmark: the store's write of a run's scores at several batch sizes, side by side in one run.

Run from the repository root:

    .venv/bin/python bench/bench_write_batch.py [--items N] [--sizes 50,200,500] [--rounds R]

The scores are real: bench/bench_overhead.py's workload (component mode, 10 retrieved chunks of ~400
characters per item) is run once through the plugin with a conftest that keeps a copy of every batch the
session hands the store. Then, for each size in turn (interleaved, R rounds, best kept), the same scores are
written into a new SQLite file as the recorder writes them (``checkpoint_only_when_asked``, one
``record_scores`` transaction per batch), and a checkpoint moves the log into the file. Printed per size:
CPU µs per item of the writes and of the checkpoint, and the write-ahead log's bytes per item before it.

It reports, it never fails.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_overhead as workload  # the same workload, written once

CAPTURE = '''
import pickle
from pytest_crucible.store.results import ResultsMixin

_record = ResultsMixin.record_scores
_batches = []


def _keep(self, run_id, scores):
    _batches.append(pickle.dumps(scores))
    return _record(self, run_id, scores)


ResultsMixin.record_scores = _keep


def pytest_unconfigure(config):
    with open(OUT, "wb") as handle:
        pickle.dump(_batches, handle)
'''


def capture(tmp: Path, items: int) -> list[dict]:
    plugin_dir, _bare = workload.build(tmp, items)
    out = tmp / "batches.pkl"
    (plugin_dir / "capture_scores.py").write_text(f"OUT = {str(out)!r}\n" + CAPTURE)
    command = [*workload.plugin_cmd(plugin_dir, tmp / "capture.db"), "-p", "capture_scores", "-o", "crucible_background_writes=never"]
    env = {**workload.CHILD_ENV, "PYTHONPATH": str(plugin_dir)}
    done = subprocess.run([sys.executable, *command], cwd=plugin_dir, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the capturing run failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return [score for batch in pickle.loads(out.read_bytes()) for score in pickle.loads(batch)]


def write(scores: list[dict], size: int, folder: Path) -> tuple[float, float, float]:
    """(write CPU µs per item, checkpoint CPU µs per item, log bytes per item) of the scores in batches of ``size``."""
    from pytest_crucible.store import Store

    store = Store.open(folder / "runs.db")
    store.checkpoint_only_when_asked()
    run_id = store.start_run(config_hash="bench", params={}, resolved={}, mode="component", outcome_mode="record")
    started = time.process_time()
    for start in range(0, len(scores), size):
        store.record_scores(run_id, scores[start:start + size])
    writing = time.process_time() - started
    log = (folder / "runs.db-wal").stat().st_size
    started = time.process_time()
    store.checkpoint()
    checkpoint = time.process_time() - started
    store.close()
    n = len(scores)
    return writing / n * 1e6, checkpoint / n * 1e6, log / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--sizes", default="50,200,500")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="crucible-batch-") as name:
        tmp = Path(name)
        workload.prepare_child_env(tmp)
        scores = capture(tmp, args.items)
        best: dict[int, tuple[float, float, float]] = {}
        for round_ in range(args.rounds):
            for size in sizes:
                folder = tmp / f"r{round_}-{size}"
                folder.mkdir()
                measured = write(scores, size, folder)
                kept = best.get(size)
                best[size] = measured if kept is None else (min(kept[0], measured[0]), min(kept[1], measured[1]), measured[2])
    print(f"{len(scores)} scores of bench_overhead's workload; best of {args.rounds} interleaved rounds")
    print(f"{'batch':>6} {'write µs/item':>14} {'checkpoint µs/item':>19} {'log bytes/item':>15}")
    for size in sizes:
        writing, checkpoint, log = best[size]
        print(f"{size:>6} {writing:>14.1f} {checkpoint:>19.1f} {log:>15,.0f}")


if __name__ == "__main__":
    main()
