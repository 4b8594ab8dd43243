"""Benchmark: what Anthropic prompt caching saves on the example project's judge bill (issue 51, part 5).

The example project (example_project/, its retrieval questions, as its README runs them with Claude) is run
twice with ``--crucible-judge=anthropic`` against the tests' Messages API double (tests/mock_anthropic.py),
which reports usage as the API does (``token_usage = "counted"``: about four characters a token; a marked
prefix seen before within 5 minutes is a cache read, a new one a cache write, a prefix below the model's
minimum cacheable length neither):

* **cached**: the requests as the judge sends them (the stable prefix marked ``cache_control``);
* **uncached**: the same requests billed as if nothing were marked (the double ignores the markers).

Each run starts from an empty database with the verdict cache off, so every request is sent. Reported: the
requests, the tokens read from and written to the prompt cache, and the run's cost (``runs.cost_usd``, the
judge's own pricing of the usage it was sent) for each, and the saving.

``--few-shot``: first align Claude by few-shot examples on the repository's 160 labelled cases
(tests/data/calibration, ``crucible judge align --judge anthropic`` against the same double), then judge both runs
with ``--crucible-judge=aligned:FILE``: the examples lengthen the prefixes of the grading and entailment requests.

``--min-tokens``: the minimum cacheable prefix the double applies to the judge model (default 1024, the
double's assumption for a model the Anthropic docs give none: Claude Haiku 5.5).

    .venv/bin/python bench/bench_prompt_cache.py [--few-shot] [--min-tokens 1024] [--model claude-haiku-5-5] [--extra ARG ...]

It reports, it never fails. About a minute per run.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mock_anthropic import DEFAULT_CACHE_MIN_TOKENS, MockAnthropic  # noqa: E402  (the tests' Messages API double)


def few_shot_file(model: str, directory: Path) -> Path:
    """Claude aligned by few-shot examples on tests/data/calibration's labels, against the double."""
    labels = directory / "labels.jsonl"
    labels.write_text("".join((ROOT / "tests" / "data" / "calibration" / name).read_text(encoding="utf-8")
                              for name in ("labels_dev.jsonl", "labels_test.jsonl")), encoding="utf-8")
    out = directory / "aligned.json"
    mock = MockAnthropic().start()
    try:
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-bench-prompt-cache-0000", "ANTHROPIC_BASE_URL": mock.base_url}
        done = subprocess.run([sys.executable, "-m", "pytest_crucible.cli", "judge", "align", str(labels), "--judge", "anthropic",
                               "--judge-model", model, "-o", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    finally:
        mock.stop()
    if done.returncode != 0:
        sys.exit(f"judge align failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return out


def run_once(model: str, minimum: int, honour: bool, extra: list[str], aligned: Path | None) -> dict[str, float]:
    mock = MockAnthropic().start()
    mock.token_usage = "counted"
    mock.cache_min_tokens[model] = minimum
    mock.honour_cache_control = honour
    judge = [f"--crucible-judge=aligned:{aligned}"] if aligned else ["--crucible-judge=anthropic", f"--crucible-judge-model={model}"]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "crucible.db"
            env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-bench-prompt-cache-0000", "ANTHROPIC_BASE_URL": mock.base_url}
            command = [sys.executable, "-m", "pytest", "example_project", "-q", "-p", "no:cacheprovider",
                       "--crucible-config=example_project/configs/baseline.json", *judge, "--crucible-kind=retrieval", "--crucible-judge-cache=off",
                       f"--crucible-db={db}", *extra]
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            if done.returncode not in (0, 1):
                sys.exit(f"the run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            conn = sqlite3.connect(db)
            try:
                cost, estimate, stats = conn.execute(
                    "SELECT cost_usd, cost_estimate_usd, judge_stats FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()
            finally:
                conn.close()
    finally:
        mock.stop()
    stats = json.loads(stats)
    usages = mock.usages
    return {"requests": len(usages), "cost": float(cost or 0.0), "estimate": float(estimate or 0.0),
            "input": sum(u["input_tokens"] for u in usages), "read": sum(u["cache_read_input_tokens"] for u in usages),
            "written": sum(u["cache_creation_input_tokens"] for u in usages),
            "storedRead": stats.get("cacheReadTokens", 0), "storedWritten": stats.get("cacheWriteTokens", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="claude-haiku-5-5")
    parser.add_argument("--min-tokens", type=int, default=DEFAULT_CACHE_MIN_TOKENS)
    parser.add_argument("--few-shot", action="store_true", help="judge with Claude aligned by few-shot examples")
    parser.add_argument("--extra", action="append", default=[], help="another pytest argument (repeatable)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        aligned = few_shot_file(args.model, Path(tmp)) if args.few_shot else None
        runs = {name: run_once(args.model, args.min_tokens, honour, args.extra, aligned)
                for name, honour in (("uncached", False), ("cached", True))}
    judged = f"{args.model}, few-shot aligned on 160 labelled cases" if aligned else args.model
    print(f"example project, retrieval questions, {judged} (minimum cacheable prefix {args.min_tokens} tokens)")
    for name, figures in runs.items():
        print(f"  {name:<9} {figures['requests']:>5} requests  {figures['input']:>10,} input  "
              f"{figures['read']:>10,} cache read  {figures['written']:>9,} cache written  cost ${figures['cost']:.4f}"
              f"  (estimate ${figures['estimate']:.4f})")
    before, after = runs["uncached"]["cost"], runs["cached"]["cost"]
    before, after = round(before, 10), round(after, 10)  # sums of the same prices in another order
    saving = (before - after) / before if before else 0.0
    print(f"  saving   ${before - after + 0.0:.4f} of ${before:.4f} ({saving:.1%})")


if __name__ == "__main__":
    main()
