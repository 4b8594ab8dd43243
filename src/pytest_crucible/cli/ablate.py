"""`crucible ablate`: each guardrail defence layer's exact contribution, with a significance verdict.

The golden set runs once with every layer on, then once per layer with only that
layer switched off (``guardrails.layers.NAME: false`` in the applied config). Each
run is a normal pytest session through the plugin, in a subprocess, into one
database, with a fixed run id; the runs are then compared item by item with the
same paired test as ``crucible compare``. A layer's contribution is

    rate without the layer - rate with every layer on

for attackSuccessRate (the attacks only this layer stops) and falsePositiveRate
(the clean questions only this layer refuses; negative means the layer costs
false positives). Residual risk is the all-layers-on attackSuccessRate, reported
with its Wilson interval. This module never imports pytest.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..defaults import DEFAULT_SEED
from .common import EXIT_OK, EXIT_USAGE, with_db

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

EXAMPLES: dict[str, str] = {
    "ablate": "crucible ablate --config example_project/configs/baseline.json \\\n"
              "    --layers instructionPatterns,documentScan,obfuscation --db ablation.db -- example_project",
}

ALL_ON = "all-layers-on"


class AblationError(Exception):
    """An ablation that could not run; ``str()`` is the user-facing message."""


@dataclass
class LayerResult:
    layer: str
    run_id: str
    comparison: Any  # comparison.Comparison: the all-on run (a) against this layer off (b)
    unread: bool = False  # the pipeline never read guardrails.layers.<layer>: the name is probably wrong


@dataclass
class Ablation:
    base_run: str
    base_summary: dict[str, Any]
    layers: list[LayerResult] = field(default_factory=list)
    seed: int = DEFAULT_SEED


def variant_params(params: dict[str, Any], layer: str | None) -> dict[str, Any]:
    """The config as written with ``layer`` switched off (None: every layer on), labelled so."""
    from ..config import deep_merge

    variant = params if layer is None else deep_merge(params, {"guardrails": {"layers": {layer: False}}})
    return {**variant, "labels": {**(params.get("labels") or {}), "ablation": f"without-{layer}" if layer else ALL_ON}}


def _run_id(stamp: str, layer: str | None) -> str:
    return f"ablate-{stamp}-{layer or 'base'}"[:64]


def run_ablation(config_path: str | None, layers: Sequence[str], *, db: str | Path, pytest_args: Sequence[str] = (),
                 kinds: str | None = "adversarial", seed: int = DEFAULT_SEED,
                 run: Callable[..., subprocess.CompletedProcess] | None = None,
                 echo: Callable[[str], None] = lambda line: None) -> Ablation:
    """Run the set with every layer on and once per layer switched off (``run``: how a command runs,
    default ``subprocess.run``), then compare."""
    import subprocess
    import tempfile
    from pathlib import Path

    from ..config import ConfigError, load_config_file
    from ..metrics.guardrail import GUARDRAIL_METRICS
    from ..store import Store, new_ulid
    from ..verdict.comparison import compare_run_data
    from ..verdict.runs import load_run

    layers = [name.strip() for name in layers if name.strip()]
    if not layers:
        raise AblationError("no layers to ablate\nHINT: --layers instructionPatterns,documentScan")
    bad = [name for name in layers if not name.replace("_", "").replace("-", "").isalnum()]
    if bad:
        raise AblationError(f"--layers: {bad[0]!r} is not a layer name (letters, digits, - and _)\nHINT: --layers patterns,docscan")
    try:
        params = load_config_file(config_path)[0] if config_path else {}
    except ConfigError as exc:
        raise AblationError(str(exc)) from None
    db = Path(db).absolute()
    stamp = new_ulid()[-10:].lower()
    run_ids: dict[str | None, str] = {}
    with tempfile.TemporaryDirectory(prefix="crucible-ablate-") as scratch:
        for layer in [None, *layers]:
            config_file = Path(scratch) / f"{layer or 'base'}.json"
            config_file.write_text(json.dumps(variant_params(params, layer), indent=2))
            run_id = _run_id(stamp, layer)
            command = [sys.executable, "-m", "pytest", *pytest_args, f"--crucible-config={config_file}",
                       f"--crucible-db={db}", f"--crucible-run-id={run_id}", "--crucible-outcome=record",
                       "-p", "no:cacheprovider", "-q"]
            if kinds:
                command.append(f"--crucible-kind={kinds}")
            echo(f"ablate: {'every layer on' if layer is None else f'without {layer}'} (run {run_id})")
            done = (run or subprocess.run)(command, capture_output=True, text=True)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
                raise AblationError(f"the run {'with every layer on' if layer is None else f'without {layer}'} "
                                    f"exited {done.returncode}:\n{tail}\n"
                                    "HINT: record outcome fails only on pipeline errors; run the same pytest command to see them")
            run_ids[layer] = run_id
    store = Store.open(db, create=False)
    try:
        base = run_ids[None]
        base_summary = _guardrail_summary(store, base)
        if not base_summary:
            raise AblationError("the runs have no guardrail items (no attacks and no clean items of kind adversarial)\n"
                                "HINT: give golden items an \"attack\" and kind \"adversarial\"; see docs/golden-format.md")
        ablation = Ablation(base_run=base, base_summary=base_summary, seed=seed)
        # With the golden items: attacks written from one source are clustered here as the gate clusters them.
        with_all = load_run(store, base, golden=True)
        for layer in layers:
            # Each layer answers its own question (what does it do to the guardrail rates?), read one by one:
            # an ablation report, not a gate, so the rates are tested at full alpha (--crucible-multiple=none).
            comparison = compare_run_data(with_all, load_run(store, run_ids[layer], golden=True), metrics=list(GUARDRAIL_METRICS),
                                          seed=seed, multiple="none")
            # The run itself recorded which changed config keys its pipeline never read.
            unread = f"guardrails.layers.{layer}=false" in store.unread_keys(run_ids[layer])
            ablation.layers.append(LayerResult(layer=layer, run_id=run_ids[layer], comparison=comparison, unread=unread))
    finally:
        store.close()
    return ablation


def _guardrail_summary(store, run_id: str) -> dict[str, Any] | None:
    from ..report.views import run_guardrails

    return run_guardrails(store.golden_items(run_id), store.item_metrics(run_id), store.results(run_id))


def guardrail_row(comparison, metric: str):
    """The comparison row of a guardrail metric (the adversarial kind's, when the runs mix kinds)."""
    return next((m for m in comparison.metrics.values() if m.metric == metric), None)


def ablation_lines(ablation: Ablation) -> list[str]:
    """The report: residual risk with every layer on, then each layer's contribution (fits 100 columns)."""
    from ..metrics.guardrail import GUARDRAIL_METRICS, describe_rate
    from ..report.views import p_text, verdict_text

    s = ablation.base_summary

    lines = [f"every layer on (run {ablation.base_run}): residual risk",
             *(f"  {describe_rate(name, s[name])}" for name in GUARDRAIL_METRICS if name in s),
             "contribution = rate without the layer - rate with every layer on",
             f"  paired over items, seed {ablation.seed}",
             f"  {'layer':<20} {'metric':<18} {'without':>7} {'contrib':>8} {'95% CI':>16} {'p':>5}  verdict"]
    for result in ablation.layers:
        for name in GUARDRAIL_METRICS:
            m = guardrail_row(result.comparison, name)
            if m is None or m.b is None:
                continue
            delta = f"{m.delta:+8.4f}" if m.delta is not None else f"{m.b - m.a:+8.4f}"
            ci = f"[{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]" if m.ci else "-"
            # Removing a layer that works *raises* a lower-is-better rate: here that is "significant".
            verdict = "significant" if m.significant else verdict_text(m, compact=True)
            lines.append(f"  {result.layer[:20]:<20} {name:<18} {m.b:7.4f} {delta} {ci:>16} {p_text(m.p)}  {verdict}")
        if result.unread:
            lines.append(f"WARNING the pipeline never read guardrails.layers.{result.layer}: is the layer name right?")
    return lines


def ablation_json(ablation: Ablation) -> dict[str, Any]:
    from ..metrics.guardrail import GUARDRAIL_METRICS

    return {
        "baseRun": ablation.base_run,
        "seed": ablation.seed,
        "residual": ablation.base_summary,
        "layers": [
            {"layer": r.layer, "runId": r.run_id, "layerNameUnread": r.unread,
             "contribution": {name: {"without": m.b, "delta": m.delta if m.delta is not None else (m.b - m.a if m.b is not None and m.a is not None else None),
                                     "ci": list(m.ci) if m.ci else None, "p": m.p, "significant": m.significant}
                              for name in GUARDRAIL_METRICS if (m := guardrail_row(r.comparison, name)) is not None}}
            for r in ablation.layers
        ],
    }


def _cmd_ablate(args: argparse.Namespace) -> int:
    echo = (lambda line: print(line, file=sys.stderr)) if args.json else print
    try:
        ablation = run_ablation(args.config, args.layers.split(","), db=args.db, pytest_args=args.pytest_args,
                                kinds=None if args.kind == "all" else args.kind, seed=args.seed, echo=echo)
    except AblationError as exc:
        print(f"crucible ablate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(ablation_json(ablation), indent=2))
    else:
        print("\n".join(ablation_lines(ablation)))
    return EXIT_OK


def add_ablate(sub) -> None:
    ablate = with_db(sub.add_parser("ablate", help="each guardrail layer's contribution: one run per layer switched off"))
    ablate.add_argument("--config", metavar="PATH", help="the base pipeline config (default: the defaults)")
    ablate.add_argument("--layers", required=True, metavar="A,B,...", help="guardrail layers to switch off one at a time")
    ablate.add_argument("--kind", default="adversarial", metavar="KIND[,KIND]",
                        help="golden item kinds to run (default adversarial; 'all' runs every kind)")
    ablate.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the paired test (default {DEFAULT_SEED})")
    ablate.add_argument("--json", action="store_true", help="print the contributions as JSON")
    ablate.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="passed to pytest, e.g. -- example_project")
    ablate.set_defaults(func=_cmd_ablate)
