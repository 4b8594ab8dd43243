"""Runs in and out of a database: `crucible export` (JSON or a TREC run file), `crucible import`,
`crucible merge` (the shards of one sharded run), and `crucible copy` (from one store into another)."""

from __future__ import annotations

import argparse
import json
import sys

from .common import EXIT_REFUSED, EXIT_USAGE, add_workspace_flag, open_store, resolve_run, with_db, write_output, write_text

EXAMPLES: dict[str, str] = {
    "export": "crucible export latest -o baselines/main.json\n"
              "crucible export latest --format trec -o run.txt\n"
              "crucible export latest --format csv -o items.csv          # one row per item, for a spreadsheet\n"
              "crucible export latest --format openmetrics -o metrics.txt  # GitLab's metrics report",
    "import": "crucible import baselines/main.json --db .crucible/crucible.db",
    "merge": "crucible merge shard-1.db shard-2.db -o run.db\n"
             "crucible compare baselines/main.json latest --db run.db",
    "copy": "crucible copy .crucible/crucible.db \"$CRUCIBLE_DB\"      # a file's history into the team's database\n"
            "crucible copy \"$CRUCIBLE_DB\" local.db --run latest   # one run back into a file",
}


def _cmd_export(args: argparse.Namespace) -> int:
    store = open_store(args)
    run_id = resolve_run(store, args, args.run)
    if args.format == "trec":
        return _export_trec_run(store, run_id, args.output)
    if args.format in ("csv", "parquet", "openmetrics"):
        return _export_table(store, run_id, args.format, args.output)
    text = json.dumps(store.export_run(run_id), indent=1, sort_keys=True) + "\n"
    write_output(args.output, text, f"exported run {run_id} to {args.output}")
    return 0


def _export_table(store, run_id: str, form: str, output: str) -> int:
    """One row per item (csv, parquet), or the run's means as GitLab's metrics report reads them (openmetrics)."""
    from ..report.tables import ParquetUnavailable, item_table, openmetrics, to_csv, to_parquet
    from ..verdict.runs import load_run

    if form == "openmetrics":
        write_output(output, openmetrics(load_run(store, run_id).means()), f"exported the means of run {run_id} to {output}")
        return 0
    header, rows = item_table(store, run_id)
    if form == "csv":
        write_output(output, to_csv(header, rows), f"exported {len(rows)} items of run {run_id} as CSV to {output}")
        return 0
    if output == "-":
        print("crucible: --format parquet writes a file, not stdout\nHINT: give -o run.parquet", file=sys.stderr)
        return EXIT_USAGE
    try:
        to_parquet(header, rows, output)
    except ParquetUnavailable as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"exported {len(rows)} items of run {run_id} as Parquet to {output}")
    return 0


def _export_trec_run(store, run_id: str, output: str) -> int:
    from ..qrels.formats import format_trec_run, run_rankings

    rankings = run_rankings(store.results(run_id), store.effective_qrels(run_id))
    write_text(output, format_trec_run(rankings, tag=f"crucible-{run_id}"))
    if output != "-":
        print(f"exported the ranked units of run {run_id} ({len(rankings)} queries) as a TREC run to {output}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from ..store import Store, read_export

    document = read_export(args.file)
    store = Store.open(args.db)
    run_id, added = store.import_run(document, source=args.file)
    print(f"{'imported' if added else 'already present:'} run {run_id} into {store.path}")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from ..store import locate
    from ..store.merge import merge_shards

    report = merge_shards(args.shards, args.output, run_id=args.run_id)
    for warning in report.warnings:
        print(f"crucible: warning: {warning}", file=sys.stderr)
    print(f"merged run {report.run_id} from {len(report.shards)} shard(s) into {locate(args.output)}: "
          f"{report.items} items, status {report.status}, goldenHash {report.golden_hash[:12]}")
    print(f"qrels: {report.qrels_added} judgment(s) added; judge cache: {report.cache_rows_added} row(s) added")
    from ..store.schema import RunStatus

    if report.status != RunStatus.COMPLETE:
        # The merge is written (the whole shards' results are worth reading), but a CI step that
        # merges must not go on as if the run were whole: the gate would refuse it anyway.
        unfinished = ", ".join(f"{shard} is {status}" for shard, status in report.shard_statuses.items() if status != RunStatus.COMPLETE)
        print(f"crucible: the merged run {report.run_id} is {report.status}: {unfinished or 'a shard did not finish'}\n"
              "HINT: re-run the shard that stopped (`crucible runs --db SHARD` shows each shard's status); "
              "the gate refuses this run unless --allow-incomplete", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def _cmd_copy(args: argparse.Namespace) -> int:
    from ..store import locate
    from ..store.copy import copy_store

    report = copy_store(args.source, args.destination, run_ids=args.run or None)
    added = ", ".join(f"{table} {count}" for table, count in report.rows_added.items() if count)
    print(f"copied {len(report.runs_copied)} run(s) from {locate(args.source)} to {locate(args.destination)}"
          + (f" ({len(report.runs_present)} already there)" if report.runs_present else "")
          + f"; ledger rows added: {added or 'none'}")
    if report.runs_running:
        print(f"crucible: left out {len(report.runs_running)} run(s) still running ({', '.join(report.runs_running[:3])}"
              f"{', ...' if len(report.runs_running) > 3 else ''}): copy them once they finish", file=sys.stderr)
    return 0


def add_export(sub) -> None:
    export = with_db(sub.add_parser("export", help="write one run as JSON (commit it as a CI baseline)"))
    export.add_argument("run", help="run id, unique prefix, or latest")
    export.add_argument("-o", "--output", required=True, help="output file, or - for stdout")
    export.add_argument("--format", choices=["json", "trec", "csv", "parquet", "openmetrics"], default="json",
                        help="json: the whole run (default); trec: a TREC run file of the ranked units the plugin "
                             "scored, for `crucible trec-eval` with `crucible qrels export --effective`; csv: one row "
                             "per item (id, kind, question, outcome, error class, every metric, latency); parquet: the "
                             "same table (needs pyarrow: the parquet extra); openmetrics: the run's means as GitLab's "
                             "metrics report reads them")
    export.set_defaults(func=_cmd_export)
    add_workspace_flag(export)


def add_import(sub) -> None:
    importer = with_db(sub.add_parser("import", help="add an exported run to the database"))
    importer.add_argument("file")
    importer.set_defaults(func=_cmd_import)


def add_merge(sub) -> None:
    merge = sub.add_parser("merge", help="join the shard databases of one sharded run (--crucible-run-id) into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD.db", help="the shards' --crucible-db files")
    merge.add_argument("-o", "--output", required=True, metavar="RUN.db|URL",
                       help="crucible database to add the merged run to (created if missing): a SQLite file, or a "
                            "team's PostgreSQL database")
    merge.add_argument("--run-id", dest="run_id", default=None, metavar="ID",
                       help="the run to merge (default: the one run id every shard holds)")
    merge.set_defaults(func=_cmd_merge)


def add_copy(sub) -> None:
    copy = sub.add_parser("copy", help="copy runs and ledgers from one database into another (SQLite or PostgreSQL "
                                       "either way); copying twice adds nothing")
    copy.add_argument("source", metavar="SOURCE", help="the database to read: a SQLite file or a postgresql:// URL")
    copy.add_argument("destination", metavar="DEST", help="the database to add to (created if missing)")
    copy.add_argument("--run", action="append", default=[], metavar="RUN",
                      help="copy only this run (id, unique prefix or latest; repeatable); the ledgers are copied whole")
    copy.set_defaults(func=_cmd_copy)
