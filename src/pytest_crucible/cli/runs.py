"""`crucible runs`, `crucible show` and `crucible metrics`: which runs the database holds, and one run's figures."""

from __future__ import annotations

import argparse
import json
import sys

from .common import EXIT_USAGE, add_workspace_flag, open_store, resolve_run, with_db, workspace_of


EXAMPLES: dict[str, str] = {
    "runs": "crucible runs --limit 5\n"
            "crucible runs --json --db example_project/.crucible/crucible.db\n"
            "crucible runs --all-workspaces --label model:claude-haiku-5-5",
    "show": "crucible show latest\n"
            "crucible show 01J9Z3 --json          # a unique prefix of the run id\n"
            "crucible show latest --item hd-002   # one item: answer, ranking with grades, metrics, evidence\n"
            "crucible show latest --failed        # the failed items, one line each\n"
            "crucible show latest --class hallucination --json",
    "metrics": "crucible metrics latest\n"
               "crucible metrics latest --json   # runId, configHash, n, one block per family, byFacet",
}


def _cmd_runs(args: argparse.Namespace) -> int:
    from ..workspace import parse_label_filters

    store = open_store(args)
    try:
        labels = parse_label_filters(args.label or [], "--label")
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    workspace = workspace_of(args, store, announce=True)
    runs = store.list_runs(limit=args.limit, workspace=workspace, config_hash=args.config_hash, labels=labels)
    counts = store.workspaces()
    if not runs and workspace is not None and workspace not in counts and counts:
        # Say where the runs are rather than "no runs": the file holds other projects' runs.
        print(f"no runs in workspace '{workspace}' of {store.path}; {sum(counts.values())} run(s) in "
              f"{len(counts)} other workspace(s): {', '.join(counts)}\n"
              "HINT: crucible runs --all-workspaces, or --workspace NAME", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        if not counts:
            print(f"no runs in {store.path}")
        elif workspace is None or workspace in counts:
            print(f"no runs match in {store.path}" + (f" (workspace '{workspace}')" if workspace else ""))
        return 0
    from ..report.views import run_labels

    rows = [(run, run.get("workspace") or "default", run["config_path"] or "(defaults)",
             " ".join(f"{key}={value}" for key, value in run_labels(run).items())) for run in runs]
    ws_width = max(len("workspace"), *(len(row[1]) for row in rows))
    config_width = max(len("config"), *(len(row[2]) for row in rows))
    print(f"{'run id':<26}  {'started':<24}  {'status':<11}  {'mode':<9}  {'items':>5}  {'configHash':<12}  "
          f"{'workspace':<{ws_width}}  {'config':<{config_width}}  labels")
    for run, run_workspace, config, labels_text in rows:
        print(
            f"{run['id']:<26}  {run['started_at']:<24}  {run['status']:<11}  {run['mode']:<9}  "
            f"{run['n_items']:>5}  {run['config_hash'][:12]:<12}  {run_workspace:<{ws_width}}  {config:<{config_width}}  {labels_text}"
        )
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from ..report.terminal import run_summary_lines
    from ..report.views import run_metrics_document

    store = open_store(args)
    run_id = resolve_run(store, args, args.run)
    if args.json:
        print(json.dumps(run_metrics_document(store, run_id), indent=2))
    else:
        print("\n".join(run_summary_lines(store, run_id)))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    if args.item is None and not args.failed and args.error_class is None:
        return _cmd_metrics(args)
    from ..report import item_view

    if args.item is not None and (args.failed or args.error_class is not None):
        print("crucible: --item shows one item; --failed and --class list several\n"
              "HINT: give --item ID alone, or --failed and/or --class CLASS", file=sys.stderr)
        return EXIT_USAGE
    try:
        error_class = item_view.check_error_class(args.error_class) if args.error_class is not None else None
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args)
    items = item_view.load_items(store, resolve_run(store, args, args.run))
    if args.item is not None:
        try:
            document = item_view.item_detail(items, args.item)
        except item_view.UnknownItem as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return EXIT_USAGE
        lines = item_view.item_lines(document)
    else:
        document = item_view.listed_items(items, failed=args.failed, error_class=error_class)
        lines = item_view.listing_lines(document)
    print(json.dumps(document, indent=2) if args.json else "\n".join(lines))
    return 0


def add_runs(sub) -> None:
    runs = with_db(sub.add_parser("runs", help="list the runs of the current workspace (--all-workspaces: of every one)"))
    runs.add_argument("--limit", type=int, default=None, metavar="N", help="only the N newest runs")
    runs.add_argument("--json", action="store_true", help="print the runs as a JSON array (newest first)")
    runs.add_argument("--all-workspaces", dest="all_workspaces", action="store_true",
                      help="list the runs of every workspace (default: the current project's workspace)")
    runs.add_argument("--config-hash", dest="config_hash", default=None, metavar="HASH", help="only runs of this configHash (or prefix)")
    runs.add_argument("--label", action="append", default=None, metavar="KEY:VALUE",
                      help="only runs with this label, e.g. model:claude-haiku-5-5 (repeatable: all must match)")
    runs.set_defaults(func=_cmd_runs)
    add_workspace_flag(runs)


def add_show(sub) -> None:
    show = with_db(sub.add_parser("show", help="summarise one run (the same as metrics), or show one item of it, "
                                                "or list its failed items"))
    show.add_argument("run", help="run id, unique prefix, or latest")
    show.add_argument("--json", action="store_true", help="print JSON: the metrics (as `crucible metrics --json`); "
                                                           "with --item the item's document, with --failed/--class the list")
    show.add_argument("--item", default=None, metavar="ID",
                      help="one item: its question, reference, answer, retrieved chunks with their grades, metrics, "
                           "outcome, error class and the evidence stored for it")
    show.add_argument("--failed", action="store_true",
                      help="list the items that failed, one line each: an error class other than correct, a failed "
                           "or errored test, or a guardrail miss (an attack let through, a clean question blocked)")
    show.add_argument("--class", dest="error_class", default=None, metavar="CLASS",
                      help="list the items of one error class (retrieval_miss, stale, conflict_mishandled, "
                           "hallucination, citation_error, incomplete, correct)")
    show.set_defaults(func=_cmd_show)
    add_workspace_flag(show)


def add_metrics(sub) -> None:
    metrics = with_db(sub.add_parser("metrics", help="a run's metrics (--json: the spec's metrics shape)"))
    metrics.add_argument("run", help="run id, unique prefix, or latest")
    metrics.add_argument("--json", action="store_true",
                         help="print JSON: runId, configHash, n, one block per metric family, byFacet")
    metrics.set_defaults(func=_cmd_metrics)
    add_workspace_flag(metrics)
