"""Benchmark: what importing the plugin module costs a pytest session, next to pytest's own import.

Run from the repository root:

    .venv/bin/python bench/bench_import.py [--repeat N] [--before SRC]

pytest imports ``pytest_crucible.plugin`` (the ``pytest11`` entry point) in every session of every
project the package is installed in, golden files or not, so its import time is paid by everyone.
Each repetition is a fresh interpreter running ``python -X importtime -c "import pytest_crucible.plugin"``;
the figures are the cumulative microseconds importtime reports for ``pytest`` (the reference: the
plugin imports it first) and for ``pytest_crucible.plugin``, whose own share is plugin minus pytest.
Interleaved with the same command for ``import pytest`` alone, so both see the same machine. Median
of N (default 21). ``--before SRC`` measures another source tree of the package side by side in the
same run (its ``src`` directory first on PYTHONPATH, e.g. a ``git worktree`` of the commit before a
change), so a change's effect is read from one run, not from two days. Also lists the package's modules the import loads, and whether any heavy library
(numpy, scipy, pydantic, anthropic, sqlite3, jinja2) came with it: none should.

It reports, it never fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HEAVY = ("numpy", "scipy", "pydantic", "anthropic", "sqlite3", "jinja2", "fastapi", "openai", "psycopg")


def importtime(statement: str, source: str | None = None) -> dict[str, int]:
    """module -> cumulative microseconds, from one fresh interpreter's -X importtime report
    (``source``: a source tree of the package to import instead of the installed one)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's machine caches bytecode
    if source:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True,
                          check=True, env=env)
    found = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = line[len("import time:"):].split("|")
        found[name.strip()] = int(cumulative)
    return found


def measure(source: str | None, label: str, results: dict[str, list]) -> None:
    modules = importtime("import pytest_crucible.plugin", source)
    results.setdefault(label, []).append((modules["pytest_crucible.plugin"], modules.get("pytest", 0), modules))


def report(label: str, runs: list, pytest_ms: float) -> None:
    total_ms = statistics.median(total for total, _, _ in runs) / 1000
    own_ms = statistics.median(total - pytest for total, pytest, _ in runs) / 1000
    modules = runs[-1][2]
    ours = sorted(name for name in modules if name.startswith("pytest_crucible"))
    heavy = sorted(name for name in modules if name.split(".")[0] in HEAVY)
    print(f"{label}: import pytest_crucible.plugin {total_ms:7.1f} ms (pytest included); "
          f"the plugin's own share {own_ms:6.1f} ms = {own_ms / pytest_ms:.2f}x pytest's import")
    print(f"  package modules loaded ({len(ours)}): {', '.join(ours)}")
    print(f"  heavy libraries loaded: {', '.join(heavy) or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--before", default=None, metavar="SRC",
                        help="another source tree's src/ directory, measured side by side")
    args = parser.parse_args()
    trees = {"this tree": None, **({f"before ({args.before})": args.before} if args.before else {})}
    for source in trees.values():
        importtime("import pytest_crucible.plugin", source)  # warm the bytecode caches once
    results: dict[str, list] = {}
    pytest_alone = []
    for _ in range(args.repeat):
        for label, source in trees.items():
            measure(source, label, results)
        pytest_alone.append(importtime("import pytest")["pytest"])
    pytest_ms = statistics.median(pytest_alone) / 1000
    print(f"python {sys.version.split()[0]}, median of {args.repeat} fresh interpreters each (-X importtime), interleaved")
    print(f"import pytest (alone): {pytest_ms:.1f} ms")
    for label in trees:
        report(label, results[label], pytest_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
