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

    for name, func, helptext in (("runs", _cmd_runs, "list the runs in the database"),
                                 ("show", _cmd_show, "summarise one run (RUN: id, unique prefix or latest)")):
        cmd = sub.add_parser(name, help=helptext)
        cmd.add_argument("--db", default=DEFAULT_DB, help=f"SQLite results file (default {DEFAULT_DB})")
        if name == "runs":
            cmd.add_argument("--limit", type=int, default=None)
            cmd.add_argument("--json", action="store_true")
        else:
            cmd.add_argument("run")
        cmd.set_defaults(func=func)
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
