"""Fuzz every input loader with many near-valid inputs and print the counts per target.

    .venv/bin/python scripts/fuzz.py                    # 5000 inputs per target
    .venv/bin/python scripts/fuzz.py -n 20000 --seed 7  # more, reproducibly
    .venv/bin/python scripts/fuzz.py --target config    # one target

The inputs and the contract are tests/fuzzing.py's (the test suite runs the same
targets with fewer examples). An input "loads", or is "refused" with one clear error;
anything else (an exception that is not the loader's own error, or an error that breaks
the message contract) "escaped" and is printed. Exit status 1 when anything escaped.
The figures in docs/reliability.md come from this script.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import fuzzing  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402


def fuzz_target(name: str, strategy, runner, workdir: Path, examples: int, random_seed: int) -> tuple[Counter, list[str]]:
    outcomes: Counter[str] = Counter()
    escapes: list[str] = []

    # Generate only (no shrinking: nothing raises), no example database, no deadline.
    @seed(random_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def run(data: bytes) -> None:
        try:
            outcomes[runner(data, workdir)] += 1
        except Exception as exc:
            outcomes["escaped"] += 1
            if len(escapes) < 5:
                escapes.append(f"{type(exc).__name__}: {str(exc)[:300]}\n  input: {data[:300]!r}\n"
                               + "".join(traceback.format_exception(exc)[-3:]))

    run()
    return outcomes, escapes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--examples", type=int, default=5000, help="inputs per target (default 5000)")
    parser.add_argument("--seed", type=int, default=20261130, help="random seed (default 20261130)")
    parser.add_argument("--target", action="append", help="only this target (repeatable); default every target")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="crucible-fuzz-") as tmp:
        workdir = Path(tmp)
        registry = fuzzing.targets(workdir)
        names = args.target or list(registry)
        unknown = [name for name in names if name not in registry]
        if unknown:
            parser.error(f"unknown target(s) {unknown}; known: {', '.join(registry)}")
        print(f"{'target':<14} {'inputs':>7} {'loaded':>7} {'refused':>8} {'escaped':>8} {'seconds':>8}")
        total: Counter[str] = Counter()
        failed = False
        for name in names:
            strategy, runner = registry[name]
            started = time.perf_counter()
            outcomes, escapes = fuzz_target(name, strategy, runner, workdir, args.examples, args.seed)
            tried = sum(outcomes.values())
            total.update(outcomes)
            total["inputs"] += tried
            print(f"{name:<14} {tried:>7} {outcomes['loaded']:>7} {outcomes['refused']:>8} {outcomes['escaped']:>8} "
                  f"{time.perf_counter() - started:>8.1f}", flush=True)
            for escape in escapes:
                failed = True
                print("  ESCAPED " + escape.replace("\n", "\n  "))
        print(f"{'total':<14} {total['inputs']:>7} {total['loaded']:>7} {total['refused']:>8} {total['escaped']:>8}")
    return 1 if failed or total["escaped"] else 0


if __name__ == "__main__":
    sys.exit(main())
