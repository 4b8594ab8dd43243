"""The ``crucible`` command: a thin door onto the same functions the plugin uses."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

DEFAULT_DB = ".crucible/crucible.db"


def _cmd_schema(args: argparse.Namespace) -> int:
    from .golden_set import golden_json_schema

    print(json.dumps(golden_json_schema(), indent=2))
    return 0


def _cmd_trec_eval(args: argparse.Namespace) -> int:
    from .trec_eval import main_trec_eval

    return main_trec_eval(
        qrels_path=args.qrels,
        run_path=args.run,
        measures=args.measures or None,
        per_query=args.per_query,
        relevance_level=args.level,
        complete=args.complete,
    )


def _open_store(args: argparse.Namespace):
    from .store import Store

    return Store.open(args.db, create=False)


def _cmd_runs(args: argparse.Namespace) -> int:
    store = _open_store(args)
    runs = store.list_runs(limit=args.limit)
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print(f"no runs in {store.path}")
        return 0
    print(f"{'run id':<26}  {'started':<24}  {'status':<11}  {'mode':<9}  {'items':>5}  {'configHash':<12}  config")
    for run in runs:
        print(
            f"{run['id']:<26}  {run['started_at']:<24}  {run['status']:<11}  {run['mode']:<9}  "
            f"{run['n_items']:>5}  {run['config_hash'][:12]:<12}  {run['config_path'] or '(defaults)'}"
        )
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from .report.terminal import run_summary_lines

    store = _open_store(args)
    run_id = store.resolve_run(args.run)
    print("\n".join(run_summary_lines(store, run_id)))
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from .report.terminal import run_summary_lines
    from .report.views import run_metrics_json

    store = _open_store(args)
    run_id = store.resolve_run(args.run)
    if args.json:
        print(json.dumps(run_metrics_json(store.run_data(run_id)), indent=2))
    else:
        print("\n".join(run_summary_lines(store, run_id)))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from .report.views import comparison_lines
    from .stats.compare import ComparisonRefused, compare_run_data
    from .store import read_export, run_data_from_export

    store = _open_store(args)

    def load(ref: str):
        if ref.endswith(".json"):
            return run_data_from_export(read_export(ref))
        return store.run_data(store.resolve_run(ref))

    try:
        comparison = compare_run_data(load(args.a), load(args.b), seed=args.seed, multiple=args.multiple,
                                      metrics=args.metrics.split(",") if args.metrics else None)
    except ComparisonRefused as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(comparison.to_json(), indent=2))
    else:
        print("\n".join(comparison_lines(comparison)))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    store = _open_store(args)
    run_id = store.resolve_run(args.run)
    text = json.dumps(store.export_run(run_id), indent=1, sort_keys=True) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"exported run {run_id} to {args.output}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from .store import Store, read_export

    document = read_export(args.file)
    store = Store.open(args.db)
    run_id, added = store.import_run(document, source=args.file)
    print(f"{'imported' if added else 'already present:'} run {run_id} into {store.path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crucible", description="Read and compare pytest-crucible evaluation runs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    schema = sub.add_parser("schema", help="print the JSON Schema of a file format")
    schema.add_argument("kind", choices=["golden"], help="golden: one golden item (for editor validation)")
    schema.set_defaults(func=_cmd_schema)

    trec = sub.add_parser("trec-eval", help="evaluate a TREC run file against TREC qrels, in trec_eval's output format")
    trec.add_argument("qrels", help="qrels file: 'query iter docno grade' per line")
    trec.add_argument("run", help="run file: 'query Q0 docno rank score tag' per line")
    trec.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                      help="P_k, recall_k, recip_rank, ndcg_cut_k, success_k, num_q (repeatable; trec_eval forms like P.5,10 work too)")
    trec.add_argument("-q", dest="per_query", action="store_true", help="also print per-query values")
    trec.add_argument("-l", dest="level", type=int, default=1, metavar="LEVEL",
                      help="relevance level: grades >= LEVEL count as relevant (default 1)")
    trec.add_argument("-c", dest="complete", action="store_true",
                      help="average over every query in the qrels (missing queries score 0), as trec_eval -c")
    trec.set_defaults(func=_cmd_trec_eval)

    def with_db(cmd: argparse.ArgumentParser) -> argparse.ArgumentParser:
        cmd.add_argument("--db", default=DEFAULT_DB, help=f"SQLite results file (default {DEFAULT_DB})")
        return cmd

    runs = with_db(sub.add_parser("runs", help="list the runs in the database"))
    runs.add_argument("--limit", type=int, default=None)
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=_cmd_runs)

    show = with_db(sub.add_parser("show", help="summarise one run"))
    show.add_argument("run", help="run id, unique prefix, or latest")
    show.set_defaults(func=_cmd_show)

    metrics = with_db(sub.add_parser("metrics", help="a run's metrics (--json: the spec's metrics shape)"))
    metrics.add_argument("run", help="run id, unique prefix, or latest")
    metrics.add_argument("--json", action="store_true")
    metrics.set_defaults(func=_cmd_metrics)

    compare = with_db(sub.add_parser("compare", help="paired comparison of two runs behind two significance gates"))
    compare.add_argument("a", help="baseline: run id, prefix, latest, or an exported run .json")
    compare.add_argument("b", help="candidate: run id, prefix, latest, or an exported run .json")
    compare.add_argument("--json", action="store_true")
    compare.add_argument("--seed", type=int, default=1337)
    compare.add_argument("--metrics", default=None, metavar="M1,M2", help="only these metrics")
    compare.add_argument("--multiple", choices=["none", "holm"], default="none", help="p-value correction across metrics")
    compare.set_defaults(func=_cmd_compare)

    export = with_db(sub.add_parser("export", help="write one run as JSON (commit it as a CI baseline)"))
    export.add_argument("run", help="run id, unique prefix, or latest")
    export.add_argument("-o", "--output", required=True, help="output file, or - for stdout")
    export.set_defaults(func=_cmd_export)

    importer = with_db(sub.add_parser("import", help="add an exported run to the database"))
    importer.add_argument("file")
    importer.set_defaults(func=_cmd_import)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .store import StoreError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StoreError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
