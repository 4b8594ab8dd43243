"""`crucible runs`, `crucible show`, `crucible metrics` and `crucible trend`: which runs the database holds, one
run's figures, and one metric over runs."""

from __future__ import annotations

import argparse
import json
import sys

from ..defaults import KINDS
from .common import EXIT_USAGE, add_workspace_flag, open_store, resolve_run, with_db, workspace_of

EXAMPLES: dict[str, str] = {
    "runs": "crucible runs --limit 5\n"
            "crucible runs --json --db example_project/.crucible/crucible.db\n"
            "crucible runs --all-workspaces --label model:claude-haiku-5-5\n"
            "crucible runs --label branch=main --since 30d",
    "show": "crucible show latest\n"
            "crucible show 01J9Z3 --json          # a unique prefix of the run id\n"
            "crucible show latest --item hd-002   # one item: answer, ranking with grades, metrics, evidence\n"
            "crucible show latest --failed        # the failed items, one line each\n"
            "crucible show latest --class hallucination --json\n"
            "crucible summary latest --format markdown >> \"$GITHUB_STEP_SUMMARY\"",
    "metrics": "crucible metrics latest\n"
               "crucible metrics latest --json   # runId, configHash, n, one block per family, byFacet",
    "trend": "crucible trend ndcg@10 --label branch=main\n"
             "crucible trend recall@10 --label branch=main --since 30d --json",
}


def _label_and_since(args: argparse.Namespace):
    """--label KEY=VALUE (or KEY:VALUE) and --since Nd|Nh|DATE, or a usage error (ValueError)."""
    from ..verdict.runs import parse_label_args, parse_since

    return parse_label_args(args.label or []), parse_since(args.since) if args.since else None


def _cmd_runs(args: argparse.Namespace) -> int:
    from ..verdict.runs import find_runs

    try:
        labels, since = _label_and_since(args)
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args)
    workspace = workspace_of(args, store, announce=True)
    runs = find_runs(store, workspace=workspace, labels=labels, since=since, config_hash=args.config_hash, limit=args.limit)
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
    from ..store.selection import selection_of

    def labels_text(run: dict) -> str:
        chosen = selection_of(run)  # a partial run says so: it is never `latest`
        subset = [f"(subset {chosen.ran}/{chosen.held}{': ' + chosen.by if chosen.by else ''})"] if chosen else []
        return " ".join([f"{key}={value}" for key, value in run_labels(run).items()] + subset)

    rows = [(run, run.get("workspace") or "default", run["config_path"] or "(defaults)", labels_text(run)) for run in runs]
    ws_width = max(len("workspace"), *(len(row[1]) for row in rows))
    config_width = max(len("config"), *(len(row[2]) for row in rows))
    print(f"{'run id':<26}  {'started':<24}  {'status':<11}  {'mode':<9}  {'items':>5}  {'configHash':<12}  "
          f"{'workspace':<{ws_width}}  {'config':<{config_width}}  labels")
    for run, run_workspace, config, shown_labels in rows:
        print(
            f"{run['id']:<26}  {run['started_at']:<24}  {run['status']:<11}  {run['mode']:<9}  "
            f"{run['n_items']:>5}  {run['config_hash'][:12]:<12}  {run_workspace:<{ws_width}}  {config:<{config_width}}  {shown_labels}"
        )
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from ..report.terminal import run_summary_lines
    from ..report.views import run_metrics_document

    store = open_store(args)
    run_id = resolve_run(store, args, args.run)
    if getattr(args, "format", None) == "markdown":
        from ..report.markdown import run_markdown

        sys.stdout.write(run_markdown(store, run_id, workspace=store.get_run(run_id).get("workspace")))
    elif args.json or getattr(args, "format", None) == "json":
        print(json.dumps(run_metrics_document(store, run_id), indent=2))
    else:
        print("\n".join(line.text for line in run_summary_lines(store, run_id)))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    if args.item is None and not args.failed and args.error_class is None:
        return _cmd_metrics(args)
    from ..report import item_view

    if args.format == "markdown":
        print("crucible: --format markdown summarises a run; --item, --failed and --class print text or JSON\n"
              "HINT: leave --format out, or give --json", file=sys.stderr)
        return EXIT_USAGE
    args.json = args.json or args.format == "json"

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


def _cmd_trend(args: argparse.Namespace) -> int:
    from ..report.trend import describe, metric_trends, trend_document, trend_lines

    try:
        labels, since = _label_and_since(args)
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args)
    workspace = workspace_of(args, store, announce=True)
    try:
        trends = metric_trends(store, args.metric, workspace=workspace, labels=labels, since=since, kind=args.kind,
                               limit=args.limit)
    except ValueError as exc:  # an unknown metric (did you mean), or recall@5 when the newest run's K is 10
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(trend_document(trends, args.kind), indent=2))
    elif not trends[0].points:
        from ..verdict.runs import carried_labels

        print(f"no {describe(trends[0])} in {store.path}\nHINT: " + (f"{carried_labels(store, labels, workspace)}; " if labels else "")
              + "`crucible runs" + "".join(f" --label {key}={value}" for key, value in labels.items())
              + "` lists the runs, complete or not")
    else:
        print("\n".join(trend_lines(trends, args.kind)))
    return 0


def add_runs(sub) -> None:
    runs = with_db(sub.add_parser("runs", help="list the runs of the current workspace (--all-workspaces: of every one)"))
    runs.add_argument("--limit", type=int, default=None, metavar="N", help="only the N newest runs")
    runs.add_argument("--json", action="store_true", help="print the runs as a JSON array (newest first)")
    runs.add_argument("--all-workspaces", dest="all_workspaces", action="store_true",
                      help="list the runs of every workspace (default: the current project's workspace)")
    runs.add_argument("--config-hash", dest="config_hash", default=None, metavar="HASH", help="only runs of this configHash (or prefix)")
    add_label_flags(runs, "runs")
    runs.set_defaults(func=_cmd_runs)
    add_workspace_flag(runs)


def add_label_flags(cmd: argparse.ArgumentParser, what: str) -> None:
    cmd.add_argument("--label", action="append", default=None, metavar="KEY=VALUE",
                     help=f"only {what} with this label, e.g. branch=main or model=claude-haiku-5-5 (KEY:VALUE also; "
                          "repeatable: all must match)")
    cmd.add_argument("--since", default=None, metavar="Nd|Nh|DATE",
                     help=f"only {what} started in the last N days (30d) or hours (12h), or since an ISO date (2025-06-01)")


def add_trend(sub) -> None:
    trend = with_db(sub.add_parser("trend", help="one metric's run mean over the complete runs, oldest first, with what "
                                                  "changed between them and a sparkline"))
    trend.add_argument("metric", help="a metric, as stored (ndcgAt10, recallAtK) or as shown (ndcg@10, recall@10)")
    add_label_flags(trend, "runs")
    trend.add_argument("--kind", default=None, choices=KINDS,
                       help="only the items of one kind of question (runs that mix kinds otherwise get one table per kind)")
    trend.add_argument("--limit", type=int, default=50, metavar="N", help="only the N newest matching runs (default 50)")
    trend.add_argument("--json", action="store_true",
                       help="print JSON: metric, shown, k, workspace, labels, since, kind, and runs (oldest first: runId, "
                            "startedAt, mean, n (byKind instead when the runs mix kinds), configHash, labels, k, otherK, changed)")
    trend.set_defaults(func=_cmd_trend)
    add_workspace_flag(trend)


def add_show(sub) -> None:
    show = with_db(sub.add_parser("show", aliases=["summary"],
                                  help="summarise one run (the same as metrics), or show one item of it, or list its "
                                       "failed items (`crucible summary` is the same command)"))
    show.add_argument("run", help="run id, unique prefix, latest, or latest:KEY=VALUE[,...] (the newest complete run "
                                  "with those labels)")
    show.add_argument("--json", action="store_true", help="print JSON: the metrics (as `crucible metrics --json`); "
                                                           "with --item the item's document, with --failed/--class the list")
    show.add_argument("--format", choices=["text", "json", "markdown"], default="text",
                      help="text (default); json: as --json; markdown: the run's summary for a pull request or a CI "
                           "step summary")
    show.add_argument("--item", default=None, metavar="ID",
                      help="one item: its question, reference, answer, retrieved chunks with their grades, metrics, "
                           "outcome, error class and the evidence stored for it")
    show.add_argument("--failed", action="store_true",
                      help="list the items that failed, one line each: an error class other than correct, a failed "
                           "or errored test, or a guardrail miss (an attack let through, a clean question blocked)")
    show.add_argument("--class", dest="error_class", default=None, metavar="CLASS",
                      help="list the items of one error class (retrieval_miss, stale, conflict_mishandled, wrong_passage, "
                           "hallucination, citation_error, incomplete, correct)")
    show.set_defaults(func=_cmd_show)
    add_workspace_flag(show)


def add_metrics(sub) -> None:
    metrics = with_db(sub.add_parser("metrics", help="a run's metrics (--json: the spec's metrics shape)"))
    metrics.add_argument("run", help="run id, unique prefix, latest, or latest:KEY=VALUE[,...]")
    metrics.add_argument("--json", action="store_true",
                         help="print JSON: runId, configHash, n, one block per metric family, byFacet")
    metrics.set_defaults(func=_cmd_metrics)
    add_workspace_flag(metrics)
