"""Profile: where the plugin's per-item cost goes, beside bare pytest, under a sampling profiler.

Run from the repository root (py-spy comes with the dev extra):

    .venv/bin/python bench/profile_overhead.py [--items N] [--rate HZ] [--rounds R] [--top N] [--writes auto|always|never]

The workload is bench/bench_overhead.py's (10,000 golden items in component mode, an in-memory pipeline
returning 10 chunks; bare: one parametrized test calling the same pipeline). Each variant runs under
``py-spy record --subprocesses`` (sampling from outside the process: the profiled code runs at full speed,
unlike cProfile, which slows every Python call and so overstates the plugin's many small functions); the
plugin's background writing process is sampled too. R rounds, interleaved, samples summed.

Printed, in microseconds of CPU per item (samples / rate / items; only samples of running threads count, so
waiting is not cost):

* the total per process (the test process, the writing process) beside bare's;
* self time by area (the innermost Python frame's package: crucible's subpackages, pytest's modules,
  pluggy, pydantic, json, sqlite3 calls appear as the crucible line that called them), plugin beside bare,
  and the difference;
* the plugin's entry points: the outermost crucible frame of each sample (a hook, a fixture, the writer's
  loop), inclusive time per item;
* the crucible functions by inclusive time per item.

It reports, it never fails: the exit code is 0 whenever the runs themselves succeeded.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_overhead as workload  # the same workload, written once

PY = sys.executable
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def py_spy() -> str | None:
    found = Path(PY).with_name("py-spy")
    return str(found) if found.exists() else shutil.which("py-spy")


def record(spy: str, args: list[str], cwd: Path, out: Path, rate: int) -> int:
    """Run ``python ARGS`` under py-spy (raw collapsed stacks into OUT, child processes too); its exit code."""
    command = [spy, "record", "-r", str(rate), "-f", "raw", "--subprocesses", "-o", str(out), "--", PY, *args]
    with open(out.with_suffix(".log"), "wb") as log:
        return subprocess.run(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=workload.CHILD_ENV).returncode


def samples(path: Path) -> Iterable[tuple[str, list[tuple[str, str]], int]]:
    """(process, [(function, file), ...] outermost first, count) per line of a raw py-spy file. The process is
    "writer" for crucible's background writing process, else "test"."""
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        # A process's frame holds its command line, which may hold ';' itself: what is not a Python frame
        # ("function (file:line)") is a piece of one and is dropped.
        matches = (FRAME.match(frame) for frame in stack.split(";") if not frame.startswith("process "))
        frames = [(match["function"], match["file"]) for match in matches if match]
        writer = any(function == "serve" and file.endswith("store/background.py") for function, file in frames)
        if frames:
            yield "writer" if writer else "test", frames, int(count)


def area(file: str) -> str:
    """The package a frame's file belongs to, crucible's and pytest's by module."""
    parts = file.replace("\\", "/").split("/")
    for package in ("pytest_crucible", "_pytest"):
        if package in parts:
            rest = parts[parts.index(package) + 1:]
            return f"{package}/{rest[0].removesuffix('.py')}" if rest else package
    for package in ("pluggy", "pydantic", "pydantic_core", "json", "sqlite3", "pickle", "multiprocessing", "pytest_randomly",
                    "xdist", "hypothesis", "numpy"):
        if package in parts or file.startswith(f"{package}/") or parts[0] == package:
            return package
    if file.startswith("<"):  # <frozen importlib...>, <string>
        return "importlib and builtins"
    if file in ("conftest.py", "test_bare.py") or file.endswith(("/conftest.py", "/test_bare.py")) or file == "pipeline":
        return "the pipeline (conftest)"
    return "other standard library" if "/" not in file else "other"


def crucible(frame: tuple[str, str]) -> bool:
    return "pytest_crucible" in frame[1]


def label(frame: tuple[str, str]) -> str:
    file = frame[1].split("pytest_crucible/")[-1]
    return f"{frame[0]} ({file})"


def profile(paths: list[Path]) -> dict[str, collections.Counter]:
    """Counters of one variant's samples: per process, self time by area, entry points, inclusive functions."""
    tally = {name: collections.Counter() for name in ("process", "area", "entry", "inclusive")}
    for path in paths:
        for process, frames, count in samples(path):
            tally["process"][process] += count
            tally["area"][area(frames[-1][1])] += count
            mine = [frame for frame in frames if crucible(frame)]
            if mine:
                tally["entry"][f"{label(mine[0])}{' [writer]' if process == 'writer' else ''}"] += count
                for name in {label(frame) for frame in mine}:
                    tally["inclusive"][name] += count
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=250, help="samples per second (py-spy --rate)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant, interleaved, samples summed")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--writes", default="auto", choices=("auto", "always", "never"), help="ini crucible_background_writes")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="copy the raw py-spy files (collapsed stacks) into DIR")
    opts = parser.parse_args()
    workload.PLUGIN_OPTIONS[:] = ["-o", f"crucible_background_writes={opts.writes}"]
    spy = py_spy()
    if spy is None:
        print("py-spy not found: install the dev extra (pip install -e '.[dev]')")
        return 0
    import pytest

    print(f"python {platform.python_version()}, pytest {pytest.__version__}, {os.cpu_count()} CPUs, {platform.machine()}; "
          f"py-spy at {opts.rate} Hz, {opts.rounds} round(s)")
    print(f"workload: {opts.items} golden items, component mode, in-memory pipeline (bench/bench_overhead.py); "
          f"crucible_background_writes = {opts.writes}")
    with tempfile.TemporaryDirectory(prefix="crucible-profile-") as name:
        tmp = Path(name)
        workload.prepare_child_env(tmp)
        warm = tmp / "warmup"
        warm.mkdir()
        warm_plugin, warm_bare = workload.build(warm, 50)  # untimed: fills the bytecode cache
        workload.run_child(workload.plugin_cmd(warm_plugin, warm / "warm.db"), warm_plugin, warm / "plugin.log")
        workload.run_child(workload.bare_cmd(), warm_bare, warm / "bare.log")
        plugin_dir, bare_dir = workload.build(tmp, opts.items)
        files: dict[str, list[Path]] = {"plugin": [], "bare": []}
        for round_ in range(1, opts.rounds + 1):
            plugin_args = workload.plugin_cmd(plugin_dir, tmp / f"run-{round_}.db")
            for variant, args, cwd in (("plugin", plugin_args, plugin_dir), ("bare", workload.bare_cmd(), bare_dir)):
                out = tmp / f"{variant}-{round_}.txt"
                rc = record(spy, args, cwd, out, opts.rate)
                if rc != 0 or not out.exists():
                    print(f"{variant} run {round_} failed (exit {rc}):\n" + out.with_suffix(".log").read_text(errors="replace")[-3000:])
                    return 0
                files[variant].append(out)
        plugin, bare = profile(files["plugin"]), profile(files["bare"])
        if opts.keep:
            opts.keep.mkdir(parents=True, exist_ok=True)
            for path in (*files["plugin"], *files["bare"]):
                shutil.copy(path, opts.keep / path.name)

    def us(count: int) -> float:
        return count / opts.rate / opts.items / opts.rounds * 1e6

    plugin_total, bare_total = sum(plugin["process"].values()), sum(bare["process"].values())
    print()
    print(f"CPU per item (µs): plugin {us(plugin_total):.1f} (test process {us(plugin['process']['test']):.1f}, "
          f"writing process {us(plugin['process']['writer']):.1f}), bare {us(bare_total):.1f}; "
          f"ratio {plugin_total / max(bare_total, 1):.2f}x, extra {us(plugin_total - bare_total):.1f} µs per item")
    print()
    print("self time by area, µs per item (innermost Python frame)")
    print(f"  {'area':36s} {'plugin':>8s} {'bare':>8s} {'extra':>8s}")
    areas = sorted(set(plugin["area"]) | set(bare["area"]), key=lambda a: -(plugin["area"][a] - bare["area"][a]))
    for name in areas[:opts.top]:
        p, b = us(plugin["area"][name]), us(bare["area"][name])
        if max(p, b) >= 0.5:
            print(f"  {name:36s} {p:8.1f} {b:8.1f} {p - b:+8.1f}")
    print()
    print("crucible's entry points (outermost crucible frame), inclusive µs per item")
    for name, count in plugin["entry"].most_common(opts.top):
        print(f"  {us(count):8.1f}  {name}")
    print()
    print("crucible functions by inclusive time, µs per item")
    for name, count in plugin["inclusive"].most_common(opts.top):
        print(f"  {us(count):8.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
