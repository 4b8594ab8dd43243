"""`crucible compare` and `crucible report`: the gate's verdict on two runs, in the terminal or as an HTML page
(the same `verdict.gate.decide_stored` the plugin's session ends with, the same options)."""

from __future__ import annotations

import argparse
import json
import sys

from ..defaults import CHANGED_ITEMS, CHANGED_ITEMS_CHOICES, DEFAULT_SEED, KINDS, MIN_PAIRS, MULTIPLE, MULTIPLE_CHOICES
from .common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, add_workspace_flag, open_store, read_run_ref, resolve_run, with_db, workspace_of

EXAMPLES: dict[str, str] = {
    "compare": "crucible compare baselines/main.json latest\n"
               "crucible compare latest:branch=main latest     # the newest run labelled branch=main\n"
               "crucible compare 01J9Z3 latest --metrics ndcgAt10,mrr --json\n"
               "crucible compare 01J9Z3 latest --facet questionType=multi_hop\n"
               "crucible compare 01J9Z3 latest --ppi              # judged deltas corrected with human labels\n"
               "crucible compare baselines/main.json latest --format markdown > comment.md   # for the pull request\n"
               "crucible compare baselines/main.json latest --item hd-002   # one item: answers, rankings, metrics",
    "report": "crucible report latest -o report.html\n"
              "crucible report latest --against baselines/main.json -o report.html\n"
              "crucible report latest --against latest:branch=main -o report.html",
}


def _gate_settings(args: argparse.Namespace, baseline: str | None, k: int | None = None, runs=None):
    """The gate's settings from compare/report flags: the same GateSettings the plugin builds
    (``k``: the candidate's cutoff K, for metric names as the terminal shows them). ``runs``: the
    runs compared, whose custom metrics may be named; None: not read yet, so a name nothing built in
    defines waits for them (checked again once they are read) while every other bad flag fails now."""
    from ..metrics import UnknownMetric
    from ..verdict.gate import GateSettings, parse_floors, parse_margins, parse_metric_list

    if args.min_pairs < 2:
        raise ValueError(f"--min-pairs {args.min_pairs}: a paired test needs at least 2 pairs\nHINT: leave it out (default {MIN_PAIRS})")
    from ..verdict.runs import metric_names

    custom = metric_names(runs or ())

    def parsed(parse, *parse_args):
        try:
            return parse(*parse_args, k, custom)
        except UnknownMetric:
            if runs is not None:
                raise
            return None

    return GateSettings(baseline=baseline, gate=parsed(parse_metric_list, args.gate, "--gate"),
                        floors=parsed(parse_floors, args.fail_under or [], "--fail-under") or (),
                        margins=parsed(parse_margins, args.margin or [], "--margin") or (),
                        multiple=args.multiple, seed=args.seed, allow_incomplete=args.allow_incomplete,
                        metrics=parsed(parse_metric_list, getattr(args, "metrics", None), "--metrics"), min_pairs=args.min_pairs,
                        rescore=args.rescore, cluster=args.cluster, changed_items=args.changed_items)


def add_gate_flags(cmd: argparse.ArgumentParser) -> None:
    """The plugin's gate options, for the commands that give its verdict (compare, report --against)."""
    cmd.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="N",
                     help=f"seed of the bootstrap and the permutation test (default {DEFAULT_SEED}, as --crucible-seed)")
    cmd.add_argument("--multiple", choices=MULTIPLE_CHOICES, default=MULTIPLE,
                     help="p-value correction across the gated metrics (default holm: the chance of a false regression "
                          "anywhere in the family stays at or below 0.05; none: each metric at full alpha)")
    cmd.add_argument("--gate", default=None, metavar="M1,M2",
                     help="metrics whose significant regression fails the gate (default every compared one, as --crucible-gate)")
    cmd.add_argument("--margin", dest="margin", action="append", default=[], metavar="METRIC=DROP",
                     help="non-inferiority margin, e.g. ndcgAt10=0.02: the metric passes only when its interval rules "
                          "out a drop larger than DROP (repeatable, as --crucible-margin)")
    cmd.add_argument("--fail-under", dest="fail_under", action="append", default=[], metavar="METRIC=VALUE",
                     help="absolute floor on the candidate's mean, e.g. ndcgAt10=0.6 (repeatable, as --crucible-fail-under)")
    cmd.add_argument("--min-pairs", dest="min_pairs", type=int, default=MIN_PAIRS, metavar="N",
                     help=f"fewest pairs a gated metric needs; with fewer the gate refuses, exit 3 (default {MIN_PAIRS}, "
                          "as ini crucible_min_pairs)")
    cmd.add_argument("--rescore", action="store_true",
                     help="score both runs' retrieval metrics from their stored rankings against today's relevance "
                          "grades, so a judgment added between the runs does not move the ruler (as --crucible-rescore)")
    cmd.add_argument("--changed-items", dest="changed_items", choices=CHANGED_ITEMS_CHOICES, default=CHANGED_ITEMS,
                     help="golden items edited under their id since the baseline: exclude leaves them out of the pairs "
                          "(default), include compares them anyway, refuse refuses, exit 3 (as --crucible-changed-items)")
    cmd.add_argument("--allow-incomplete", dest="allow_incomplete", action="store_true",
                     help="compare an incomplete or interrupted run on the items it has instead of refusing "
                          "(as --crucible-allow-incomplete)")
    cmd.add_argument("--cluster", choices=["field", "doc", "none"], default="field",
                     help="how items that move together are clustered: field (the golden item's cluster, default), doc "
                          "(the first required citation's document) or none (as --crucible-cluster)")


def _compare_item(args: argparse.Namespace) -> int:
    """`compare A B --item ID`: one item in both runs, side by side (no verdict: exit 0)."""
    from ..report import item_view

    other = [flag for flag, given in (("--metrics", args.metrics), ("--facet", args.facet), ("--kind", args.kind),
                                      ("--ppi", args.ppi)) if given]
    if other:
        print(f"crucible: --item shows one item; {' and '.join(other)} select{'s' if len(other) == 1 else ''} "
              "what the comparison of the runs covers\nHINT: leave out --item to compare the runs, or the other flags",
              file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args)
    a, b = (item_view.read_items(ref, store, workspace=workspace_of(args, store)) for ref in (args.a, args.b))
    try:
        change = item_view.item_change(a, b, args.item)
    except item_view.UnknownItem as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(change, indent=2) if args.json else "\n".join(item_view.change_lines(change)))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..metrics.facets import items_in_facet, parse_facet
    from ..report.lines import texts
    from ..report.views import gate_lines
    from ..verdict.gate import FAILED, REFUSED, decide_stored

    if args.format == "json":
        args.json = True  # --format json is --json, for the comparison and for --item alike
    if args.item is not None:
        return _compare_item(args)
    form = "json" if args.json else args.format
    try:
        _gate_settings(args, args.a)  # bad flags are a usage error before any file is read
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.kind:
        if args.facet:
            print("crucible: --kind and --facet cannot be combined\nHINT: --kind K is --facet kind=K", file=sys.stderr)
            return EXIT_USAGE
        args.facet = f"kind={args.kind}"
    if args.facet:
        try:
            facet, value = parse_facet(args.facet)
        except ValueError as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return EXIT_USAGE
    store = open_store(args)
    from ..verdict.runs import FACET_FIELDS

    golden = FACET_FIELDS if args.facet else True  # a facet reads the items' facets too
    a, b = (read_run_ref(store, args, ref, golden=golden, rankings=args.rescore) for ref in (args.a, args.b))
    if args.facet:
        # An item is in the facet when the baseline's version of it is (items are paired by id).
        keep = items_in_facet(a.golden or b.golden, facet, value)
        a, b = a.restricted(keep), b.restricted(keep)
    try:  # metric names as the terminal shows them (recall@10) are read against the candidate's K
        settings = _gate_settings(args, args.a, b.k, runs=(a, b))
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = decide_stored(store, b, a, settings)
    ppi = None
    if args.ppi:  # read after the verdict and beside it: it never changes the verdict or the exit code
        from ..labels.human import compare_ppi_for_runs

        ppi = compare_ppi_for_runs(store, a, b, args.a, args.b)
    if form in ("markdown", "csv"):
        return _print_document(store, result, a, b, form)
    if args.json:
        document = result.comparison.to_json() if result.comparison is not None else {"a": a.run_id, "b": b.run_id}
        document["gate"] = result.to_json()
        if ppi is not None:
            document["ppi"] = ppi
        if args.facet:
            document["facet"] = args.facet
        print(json.dumps(document, indent=2))
    elif args.facet:
        print(f"facet {args.facet}")
    # The same verdict as the plugin's gate, in the same words: the table on stdout, what failed on stderr.
    verdicts = (FAILED.headline, REFUSED.headline)
    for line in texts(gate_lines(result)):
        alert = line.startswith(verdicts) or (result.refusal and line.startswith("HINT"))
        if alert:
            print(line, file=sys.stderr)
        elif not args.json:
            print(line)
    if ppi is not None and not args.json:
        from ..labels.human import compare_ppi_lines

        print("\n".join(compare_ppi_lines(ppi)))
    return result.exit_code


def _print_document(store, result, a, b, form: str) -> int:
    """The verdict as Markdown (a pull-request comment) or the pairs as CSV on stdout; for CSV, what failed
    or was refused goes to stderr, as the table's lines do."""
    from ..report.lines import texts
    from ..report.views import gate_lines
    from ..verdict.gate import FAILED, REFUSED

    if form == "markdown":
        from ..report.markdown import stored_gate_markdown

        sys.stdout.write(stored_gate_markdown(store, result, workspace=b.run.get("workspace")))
        return result.exit_code
    from ..report.tables import comparison_table, to_csv

    if result.comparison is not None:
        sys.stdout.write(to_csv(*comparison_table(result.comparison, a, b)))
    for line in texts(gate_lines(result)):
        if line.startswith((FAILED.headline, REFUSED.headline)) or (result.refusal and line.startswith("HINT")):
            print(line, file=sys.stderr)
    return result.exit_code


def _cmd_report(args: argparse.Namespace) -> int:
    from ..report.html import render_report, write_report

    # A gate needs a baseline (--against) or a floor (--fail-under): either one is never ignored.
    gated = bool(args.against or args.fail_under)
    if gated:
        try:
            settings = _gate_settings(args, args.against)
        except ValueError as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return EXIT_USAGE
    store = open_store(args)
    run_id = resolve_run(store, args, args.run)
    gate = baseline = None
    if gated:
        from ..verdict.gate import decide_stored
        from ..verdict.runs import load_run

        # The verdict `crucible compare AGAINST RUN` gives, decided once and handed to the page.
        baseline = (read_run_ref(store, args, args.against, exclude=run_id, golden=True, rankings=args.rescore)
                    if args.against else None)
        current = load_run(store, run_id, golden=True, rankings=args.rescore)
        try:  # now that the runs are read, a custom metric's name is known
            settings = _gate_settings(args, args.against, current.k,
                                      runs=[run for run in (current, baseline) if run is not None])
        except ValueError as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return EXIT_USAGE
        gate = decide_stored(store, current, baseline, settings)
    html = render_report(store, run_id, gate=gate)
    # A refusal is the one verdict that fails this command: the page says why nothing was compared.
    from ..verdict.gate import REFUSED

    code = EXIT_REFUSED if gate is not None and gate.verdict == REFUSED else EXIT_OK
    if args.output == "-":
        sys.stdout.write(html)
        return code
    try:
        path = write_report(args.output, html)
    except OSError as exc:
        print(f"crucible: {args.output}: cannot write the report: {exc.strerror or exc}\n"
              "HINT: check the -o path; its directory must exist", file=sys.stderr)
        return EXIT_USAGE
    chosen = f" (run {baseline.run_id})" if baseline is not None and args.against.startswith("latest") else ""
    print(f"wrote the report of run {run_id}" + (f" against {args.against}{chosen}" if args.against else "") + f" to {path}")
    if gate is not None:
        print(gate.summary())
    return code


def add_compare(sub) -> None:
    compare = with_db(sub.add_parser("compare", help="paired comparison of two runs behind two significance gates; "
                                                      "exit 1 when B regressed significantly or missed a floor, 3 when the comparison is refused"))
    compare.add_argument("a", help="baseline: run id, prefix, latest, latest:KEY=VALUE[,...] (the newest complete run "
                                   "with those labels, e.g. latest:branch=main), or an exported run .json")
    compare.add_argument("b", help="candidate: run id, prefix, latest, latest:KEY=VALUE[,...], or an exported run .json")
    compare.add_argument("--json", action="store_true",
                         help="print JSON: a, b, pairedItems, seed, metrics (delta, ci, p, significant), verdicts, power "
                              "(the same as --format json)")
    compare.add_argument("--format", choices=["text", "json", "markdown", "csv"], default="text",
                         help="text: the table (default); json: as --json; markdown: the verdict first, a table per kind "
                              "of question, the config change, the notes and the items that changed most, for a "
                              "pull-request comment (under GitHub's 65,536 characters); csv: one row per item and "
                              "metric with both runs' values")
    compare.add_argument("--metrics", default=None, metavar="M1,M2", help="only these metrics")
    add_gate_flags(compare)
    compare.add_argument("--facet", default=None, metavar="FACET=VALUE",
                         help="compare only the items of one facet value, e.g. questionType=multi_hop or tag=topic:returns")
    compare.add_argument("--ppi", action="store_true",
                         help="also print truthfulness and faithfulness deltas corrected for the judge's bias with human "
                              "labels (PPI++, `crucible judge labels import`), over the items labelled in both runs "
                              "(--json: under \"ppi\"); never changes the gate's verdict or the exit code")
    compare.add_argument("--kind", default=None, choices=KINDS,
                         help="compare only the items of one kind (the same as --facet kind=KIND)")
    compare.add_argument("--item", default=None, metavar="ID",
                         help="instead of the comparison, one item in both runs side by side: the answers, the "
                              "rankings (chunks that entered or left the top K, with their grades), each metric in a "
                              "and b and the difference, the outcomes (--json: the item's document); exit 0")
    compare.set_defaults(func=_cmd_compare)
    add_workspace_flag(compare)


def add_report(sub) -> None:
    report = with_db(sub.add_parser("report", help="write one run as a self-contained HTML report"))
    report.add_argument("run", help="run id, unique prefix, latest, or latest:KEY=VALUE[,...]")
    report.add_argument("--against", default=None, metavar="BASELINE",
                        help="compare with a baseline: run id, prefix, latest (newest other complete run), "
                             "latest:KEY=VALUE[,...] (the newest other complete run with those labels, e.g. "
                             "latest:branch=main), or an exported run .json")
    report.add_argument("-o", "--output", required=True, help="output .html file, or - for stdout")
    add_gate_flags(report)
    report.set_defaults(func=_cmd_report)
    add_workspace_flag(report)
