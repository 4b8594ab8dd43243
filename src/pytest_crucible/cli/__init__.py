"""The ``crucible`` command: a thin door onto the same functions the plugin uses."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from ..defaults import DEFAULT_DB, DEFAULT_SEED, JUDGE_CHOICES, KINDS, MIN_PAIRS, ServerLimits

# Exit codes: 0 done, 1 a failed gate (a significant regression, a missed floor), 2 a usage
# error (argparse's own, or bad input: one line saying what is wrong, then a HINT line),
# 3 a comparison the gate refused (different judges, an incomplete run): gate.EXIT_CODES;
# `crucible merge` also exits 3 when the merged run is not complete (a shard was killed).
EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3

# The example at the end of every command's --help, keyed by the command path ("" is
# `crucible` itself, "qrels override" a nested command). A command without one fails
# tests/test_cli.py; add its entry here when you add a command.
EXAMPLES: dict[str, str] = {
    "": "crucible runs\n"
        "crucible metrics latest --json\n"
        "crucible compare baselines/main.json latest        # exit 1 on a significant regression",
    "schema": "crucible schema golden > golden.schema.json",
    "trec-eval": "crucible trec-eval -q -m ndcg_cut_10 -m P_10 qrels.txt run.txt\n"
                 "crucible trec-eval --json qrels.txt run.txt",
    "runs": "crucible runs --limit 5\n"
            "crucible runs --json --db example_project/.crucible/crucible.db\n"
            "crucible runs --all-workspaces --label model:claude-haiku-5-5",
    "show": "crucible show latest\n"
            "crucible show 01J9Z3 --json      # a unique prefix of the run id",
    "metrics": "crucible metrics latest\n"
               "crucible metrics latest --json   # runId, configHash, n, one block per family, byFacet",
    "compare": "crucible compare baselines/main.json latest\n"
               "crucible compare 01J9Z3 latest --metrics ndcgAt10,mrr --json\n"
               "crucible compare 01J9Z3 latest --facet questionType=multi_hop\n"
               "crucible compare 01J9Z3 latest --ppi              # judged deltas corrected with human labels",
    "export": "crucible export latest -o baselines/main.json\n"
              "crucible export latest --format trec -o run.txt",
    "report": "crucible report latest -o report.html\n"
              "crucible report latest --against baselines/main.json -o report.html",
    "promote": "crucible promote --run 01J9Z3KQ8W5RRB8M2X3VYT4N6D --result RESULT_ID --question \"What is the retention period?\" \\\n"
               "    --assertion \"Audit exports are retained for seven years.\" --citation pol-retention#p2:required \\\n"
               "    --error-class incomplete --by dana\n"
               "crucible promote --json body.json",
    "golden": "crucible golden export --status draft -o golden/golden_promoted.jsonl",
    "golden export": "crucible golden export --status draft -o golden/golden_promoted.jsonl",
    "golden generate": "crucible golden generate --corpus docs/ --n 50 -o golden_generated.jsonl\n"
                       "crucible golden generate --corpus chunks.jsonl --n 200 --batch --max-cost 2.50 \\\n"
                       "    --mix simple=0.6,multi_hop=0.2,false_premise=0.1,unanswerable=0.1 --seed 7\n"
                       "crucible golden generate --corpus docs/ --n 30 --generator lexical   # offline, no API key",
    "golden review": "crucible golden review golden/golden_generated.jsonl\n"
                     "crucible golden review golden/golden_generated.jsonl --corpus corpus.jsonl   # with the source passages",
    "golden accept": "crucible golden accept golden/golden_generated.jsonl gen-1a2b3c4d lex-5e6f7a8b   # status active: they run",
    "golden reject": "crucible golden reject golden/golden_generated.jsonl gen-9c0d1e2f   # status rejected: it never runs",
    "import": "crucible import baselines/main.json --db .crucible/crucible.db",
    "merge": "crucible merge shard-1.db shard-2.db -o run.db\n"
             "crucible compare baselines/main.json latest --db run.db",
    "serve": "crucible keys create --workspace shop --scope runs:read --name ci-dashboard\n"
             "crucible serve --db .crucible/crucible.db --port 8765\n"
             "curl -s http://127.0.0.1:8765/api/v1/evals/runs/RUN_ID/metrics -H \"Authorization: Bearer $ELI_KEY\"",
    "keys": "crucible keys create --workspace shop --scope runs:read --name dashboard   # prints the key once\n"
            "crucible keys list\n"
            "crucible keys revoke 01J9Z3KQ8W5RRB8M2X3VYT4N6D",
    "keys create": "crucible keys create --workspace shop --scope feedback:write --name review-tool\n"
                   "export ELI_KEY=$(crucible keys create --workspace shop --scope runs:read --scope kb:read)",
    "keys list": "crucible keys list --workspace shop\n"
                 "crucible keys list --json",
    "keys revoke": "crucible keys revoke 01J9Z3KQ8W5RRB8M2X3VYT4N6D",
    "qrels": "crucible qrels export --effective -o qrels.txt\n"
             "crucible qrels override ret-001 pol-returns#p2 3 --by dana --note \"states the 30 days\"\n"
             "crucible qrels agreement",
    "qrels import": "crucible qrels import reviews.jsonl --source human --by dana\n"
                    "crucible qrels import umbrela.txt --source llm --judge-model claude-haiku-5-5",
    "qrels export": "crucible qrels export -o ledger.jsonl\n"
                    "crucible qrels export --effective --run latest --format trec -o qrels.txt",
    "qrels override": "crucible qrels override ret-001 pol-returns#p2 3 --by dana --note \"states the 30 days\"\n"
                      "crucible qrels override ret-001 pol-returns 1 --doc --by dana",
    "ablate": "crucible ablate --config example_project/configs/baseline.json \\\n"
              "    --layers instructionPatterns,documentScan,obfuscation --db ablation.db -- example_project",
    "qrels agreement": "crucible qrels agreement\n"
                       "crucible qrels agreement --json",
    "judge": "crucible judge labels export -o labels.jsonl\n"
             "crucible judge calibrate labels.jsonl --judge anthropic",
    "judge calibrate": "crucible judge calibrate labels.jsonl                    # the offline judge (lexical-v2)\n"
                       "crucible judge calibrate labels.jsonl --judge anthropic --judge-model claude-haiku-5-5 --json",
    "judge labels": "crucible judge labels export -o labels.jsonl\n"
                    "crucible judge labels import labels.jsonl --by dana",
    "judge labels import": "crucible judge labels import labels.jsonl --by dana   # keyed by itemId (else id) and the answer\n"
                           "crucible judge labels import --from-feedback          # the promoted corrections' labels\n"
                           "crucible compare baselines/main.json latest --ppi     # the judged deltas corrected with them",
    "judge labels export": "crucible judge labels export -o labels.jsonl\n"
                           "crucible judge labels export -o - --db .crucible/crucible.db",
}


class CrucibleParser(argparse.ArgumentParser):
    """argparse with the house style of errors: what is wrong, then a HINT; exit 2."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\nHINT: `{self.prog} --help` lists the options, with an example\n")


def subcommands(parser: argparse.ArgumentParser, path: str = ""):
    """Every (command path, parser) under ``parser``, itself first ("" for the top level)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                # A command's one-line help from its parent's list doubles as its own description.
                if child.description is None and helps.get(name):
                    child.description = helps[name]
                yield from subcommands(child, f"{path} {name}".strip())


def _add_examples(parser: argparse.ArgumentParser) -> None:
    """Put each command's example from EXAMPLES at the end of its --help."""
    for path, command in subcommands(parser):
        if path in EXAMPLES and not command.epilog:
            command.formatter_class = argparse.RawDescriptionHelpFormatter
            example = EXAMPLES[path]
            command.epilog = ("examples:\n" if "\n" in example else "example:\n") + "\n".join(
                f"  {line}" for line in example.splitlines())


def _write_output(output: str, text: str, message: str) -> None:
    """Write ``text`` to stdout when ``output`` is ``-``, else to the file, and say so."""
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(message)


def _cmd_schema(args: argparse.Namespace) -> int:
    from ..golden_set.schema import golden_json_schema

    print(json.dumps(golden_json_schema(), indent=2))
    return 0


def _cmd_trec_eval(args: argparse.Namespace) -> int:
    from ..qrels.trec_eval import main_trec_eval

    return main_trec_eval(
        qrels_path=args.qrels,
        run_path=args.run,
        measures=args.measures or None,
        per_query=args.per_query,
        relevance_level=args.level,
        complete=args.complete,
        as_json=args.json,
    )


def _open_store(args: argparse.Namespace):
    from ..store import Store

    return Store.open(args.db, create=False)


def _workspace(args: argparse.Namespace, store, *, announce: bool = False) -> str | None:
    """The workspace listings and `latest` read (None: all): --all-workspaces, --workspace, else
    the current project's (CRUCIBLE_WORKSPACE, ini crucible_workspace, the project directory's name),
    or the only workspace of a file that holds no other (``announce``: say so on stderr)."""
    from ..workspace import default_workspace, reading_workspace

    if getattr(args, "all_workspaces", False):
        return None
    if getattr(args, "workspace", None):
        return args.workspace
    workspace, note = reading_workspace(default_workspace(), store.workspaces())
    if note and announce:
        print(f"crucible: {note}", file=sys.stderr)
    return workspace


def _resolve_run(store, args: argparse.Namespace, ref: str, **options) -> str:
    """A run named on the command line: ids and prefixes in any workspace (the file is the
    user's own), `latest` in the workspace being read."""
    if ref == "latest":
        return store.resolve_run(ref, workspace=_workspace(args, store), **options)
    return store.resolve_run(ref, **options)


def _cmd_runs(args: argparse.Namespace) -> int:
    from ..workspace import parse_label_filters

    store = _open_store(args)
    try:
        labels = parse_label_filters(args.label or [], "--label")
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    workspace = _workspace(args, store, announce=True)
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
    for run, run_workspace, config, run_labels in rows:
        print(
            f"{run['id']:<26}  {run['started_at']:<24}  {run['status']:<11}  {run['mode']:<9}  "
            f"{run['n_items']:>5}  {run['config_hash'][:12]:<12}  {run_workspace:<{ws_width}}  {config:<{config_width}}  {run_labels}"
        )
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from ..report.terminal import run_summary_lines
    from ..report.views import run_metrics_document

    store = _open_store(args)
    run_id = _resolve_run(store, args, args.run)
    if args.json:
        print(json.dumps(run_metrics_document(store, run_id), indent=2))
    else:
        print("\n".join(run_summary_lines(store, run_id)))
    return 0


def _gate_settings(args: argparse.Namespace, baseline: str | None, k: int | None = None, runs=None):
    """The gate's settings from compare/report flags: the same GateSettings the plugin builds
    (``k``: the candidate's retrievalLimit, for metric names as the terminal shows them). ``runs``: the
    runs compared, whose custom metrics may be named; None: not read yet, so a name nothing built in
    defines waits for them (checked again once they are read) while every other bad flag fails now."""
    from ..verdict.gate import GateSettings, parse_floors, parse_metric_list
    from ..metrics import UnknownMetric

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
                        multiple=args.multiple, seed=args.seed, allow_incomplete=args.allow_incomplete,
                        metrics=parsed(parse_metric_list, getattr(args, "metrics", None), "--metrics"), min_pairs=args.min_pairs,
                        rescore=args.rescore, cluster=args.cluster)


def _read_run(store, args: argparse.Namespace, ref: str, **options):
    """A run named on the command line: an exported .json, an id or prefix (any workspace), or
    `latest` (of the workspace being read)."""
    from ..verdict.runs import is_export_path, read_run

    workspace = None if is_export_path(ref) or ref != "latest" else _workspace(args, store)
    return read_run(ref, store, workspace=workspace, **options)


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..metrics.facets import items_in_facet, parse_facet
    from ..verdict.gate import decide_stored
    from ..report.views import gate_lines

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
    store = _open_store(args)
    a, b = (_read_run(store, args, ref, golden=True, rankings=args.rescore) for ref in (args.a, args.b))
    if args.facet:
        # An item is in the facet when the baseline's version of it is (items are paired by id).
        keep = items_in_facet(a.golden or b.golden, facet, value)
        a, b = a.restricted(keep), b.restricted(keep)
    try:  # metric names as the terminal shows them (recall@10) are read against the candidate's K
        settings = _gate_settings(args, args.a, b.resolved.get("retrievalLimit"), runs=(a, b))
    except ValueError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = decide_stored(store, b, a, settings)
    ppi = None
    if args.ppi:  # read after the verdict and beside it: it never changes the verdict or the exit code
        from ..labels.human import compare_ppi_for_runs

        ppi = compare_ppi_for_runs(store, a, b, args.a, args.b)
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
    for line in gate_lines(result):
        alert = line.startswith(("GATE FAILED", "GATE REFUSED")) or (result.refusal and line.startswith("HINT"))
        if alert:
            print(line, file=sys.stderr)
        elif not args.json:
            print(line)
    if ppi is not None and not args.json:
        from ..labels.human import compare_ppi_lines

        print("\n".join(compare_ppi_lines(ppi)))
    return result.exit_code


def _cmd_export(args: argparse.Namespace) -> int:
    store = _open_store(args)
    run_id = _resolve_run(store, args, args.run)
    if args.format == "trec":
        return _export_trec_run(store, run_id, args.output)
    text = json.dumps(store.export_run(run_id), indent=1, sort_keys=True) + "\n"
    _write_output(args.output, text, f"exported run {run_id} to {args.output}")
    return 0


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
    store = _open_store(args)
    run_id = _resolve_run(store, args, args.run)
    gate = None
    if gated:
        from ..verdict.gate import decide_stored
        from ..verdict.runs import load_run

        # The verdict `crucible compare AGAINST RUN` gives, decided once and handed to the page.
        baseline = (_read_run(store, args, args.against, exclude=run_id, golden=True, rankings=args.rescore)
                    if args.against else None)
        current = load_run(store, run_id, golden=True, rankings=args.rescore)
        try:  # now that the runs are read, a custom metric's name is known
            settings = _gate_settings(args, args.against, current.resolved.get("retrievalLimit"),
                                      runs=[run for run in (current, baseline) if run is not None])
        except ValueError as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return EXIT_USAGE
        gate = decide_stored(store, current, baseline, settings)
    html = render_report(store, run_id, gate=gate)
    # A refusal is the one verdict that fails this command: the page says why nothing was compared.
    code = EXIT_REFUSED if gate is not None and gate.verdict == "refused" else EXIT_OK
    if args.output == "-":
        sys.stdout.write(html)
        return code
    try:
        path = write_report(args.output, html)
    except OSError as exc:
        print(f"crucible: {args.output}: cannot write the report: {exc.strerror or exc}\n"
              "HINT: check the -o path; its directory must exist", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote the report of run {run_id}" + (f" against {args.against}" if args.against else "") + f" to {path}")
    if gate is not None:
        print(gate.summary())
    return code


def _export_trec_run(store, run_id: str, output: str) -> int:
    from ..qrels.formats import format_trec_run, run_rankings

    rankings = run_rankings(store.results(run_id), store.effective_qrels(run_id))
    _write_text(output, format_trec_run(rankings, tag=f"crucible-{run_id}"))
    if output != "-":
        print(f"exported the ranked units of run {run_id} ({len(rankings)} queries) as a TREC run to {output}")
    return 0


def _write_text(output: str, text: str) -> None:
    from ..qrels.formats import QrelsFormatError

    if output == "-":
        sys.stdout.write(text)
        return
    try:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise QrelsFormatError(output, None, None, f"cannot write: {exc.strerror or exc}", "check the -o path") from None


# -- qrels: the relevance-judgment ledger ------------------------------------------------------
def _chunk_docs(store) -> dict[str, str]:
    """chunk id -> doc id over every stored run (retrieved lists and golden citations)."""
    from ..qrels.formats import chunk_doc_map

    results, items = [], []
    for run in store.list_runs():
        results.extend(store.results(run["id"]))
        items.extend(store.golden_items(run["id"]))
    return chunk_doc_map(results, items)


def _cmd_qrels_import(args: argparse.Namespace) -> int:
    from ..qrels.formats import attach_doc_ids, read_qrels_file
    from ..store import Store

    rows = read_qrels_file(args.file, source=args.source, by=args.by, judge_model=args.judge_model, note=args.note)
    store = Store.open(args.db)
    if any(row["chunk_id"] and not row["doc_id"] for row in rows):
        rows = attach_doc_ids(rows, _chunk_docs(store))
    added = store.append_qrels(rows)
    print(f"read {len(rows)} judgment(s) from {args.file}: {added} added to {store.path}, {len(rows) - added} already present")
    return 0


def _cmd_qrels_export(args: argparse.Namespace) -> int:
    from ..qrels.formats import format_effective_qrels, format_qrels

    store = _open_store(args)
    fmt = args.format or ("trec" if args.effective else "jsonl")
    if args.effective:
        run_id = _resolve_run(store, args, args.run)
        text = format_effective_qrels(store.effective_qrels(run_id), fmt)
        what = f"the effective judgments of run {run_id}"
    else:
        text = format_qrels(store.qrels_rows(), fmt)
        what = "the qrels ledger"
    _write_text(args.output, text)
    if args.output != "-":
        print(f"exported {what} ({text.count(chr(10))} lines, {fmt}) to {args.output}")
    return 0


def _query_judgments(store, query: str, workspace: str | None = None) -> tuple[dict, bool]:
    """(unit -> (effective grade, source), whether the query is known) for one query:
    its citations in the newest complete run of ``workspace`` (if it has the item), human and llm rows."""
    from ..qrels.grades import item_grades
    from ..store import RunNotFound

    golden = None
    try:
        run_id = store.resolve_run("latest", workspace=workspace)
    except RunNotFound:
        run_id = None
    for item in store.golden_items(run_id) if run_id else []:
        if item["id"] == query:
            golden = item
    judgments = item_grades(golden, store.judgment_ledger([query]).get(query, []))
    return judgments, golden is not None or bool(store.qrels_rows(query_ids=[query]))


def _describe(judgments: dict, unit: str, doc_id: str | None) -> str:
    if unit in judgments:
        grade, source = judgments[unit]
        return f"{grade} ({source})"
    doc_unit = f"doc:{doc_id}" if doc_id else None
    if unit.startswith("chunk:") and doc_unit in judgments:
        grade, source = judgments[doc_unit]
        return f"unjudged as a chunk, counted for {doc_unit}: {grade} ({source})"
    return "unjudged"


def _unknown_judgment_target(store, query: str, unit: str, *, doc: bool) -> tuple[str, str, str] | None:
    """(problem, did-you-mean, hint) when the database knows nothing of ``query`` (no run's golden
    item, no judgment) or of ``unit`` for it (never retrieved for it, cited by none of its golden
    items, never judged); None when both are known. The ledger is append-only: a typo judged once
    stays there forever."""
    from difflib import get_close_matches

    def did_you_mean(word: str, known: Sequence[str]) -> str:
        close = [repr(name) for name in get_close_matches(word, known, n=3)]
        return f"; did you mean {', '.join(close[:-1]) + ' or ' if close[:-1] else ''}{close[-1]}?" if close else ""

    force = "or pass --force to judge it anyway (the ledger is append-only: a judgment stays forever)"
    queries = store.known_query_ids()
    if query not in queries:
        return (f"unknown query {query!r}: no run of {store.path} has a golden item with this id and no judgment names it",
                did_you_mean(query, queries), f"check the id against your golden set, {force}")
    kind, prefix = ("document", "doc:") if doc else ("chunk", "chunk:")
    if prefix + unit in (units := store.known_units(query)):
        return None
    known = sorted(name[len(prefix):] for name in units if name.startswith(prefix))
    suggestion = did_you_mean(unit, known)
    if not suggestion and known:
        suggestion = f"; its known {kind}s: {', '.join(known[:5])}" + (f" and {len(known) - 5} more" if len(known) > 5 else "")
    return (f"unknown {kind} {unit!r} for query {query!r}: no run retrieved it for this item, no golden citation names it "
            "and no judgment does", suggestion, f"check the {kind} id{'' if doc else ' (with --doc it is a document id)'}, {force}")


def _cmd_qrels_override(args: argparse.Namespace) -> int:
    from ..qrels.grades import unit_key
    from ..qrels.formats import QrelsFormatError, grade_problem, parse_grade

    grade = parse_grade(args.grade)
    if grade is None:
        problem, hint = grade_problem(args.grade)
        raise QrelsFormatError(None, None, "GRADE", problem, hint)
    if not args.by.strip():
        raise QrelsFormatError(None, None, "--by", "a human judgment needs the name of who made it", "pass --by NAME")
    store = _open_store(args)
    unknown = _unknown_judgment_target(store, args.query, args.unit, doc=args.doc)
    if unknown and not args.force:
        problem, suggestion, hint = unknown
        print(f"crucible: {problem}{suggestion}\nHINT: {hint}", file=sys.stderr)
        return EXIT_USAGE
    if unknown:
        print(f"crucible: warning: {unknown[0]}; judged anyway (--force)", file=sys.stderr)
    chunk_id, doc_id = (None, args.unit) if args.doc else (args.unit, _chunk_docs(store).get(args.unit))
    unit = f"doc:{doc_id}" if args.doc else f"chunk:{chunk_id}"
    before, _ = _query_judgments(store, args.query, _workspace(args, store))
    store.append_qrels([{"query_id": args.query, "chunk_id": chunk_id, "doc_id": doc_id, "grade": grade,
                         "source": "human", "created_by": args.by, "note": args.note}])
    after, _ = _query_judgments(store, args.query, _workspace(args, store))
    history = [row for row in store.qrels_rows(query_ids=[args.query]) if unit_key(row) == unit]
    print(f"{args.query} {unit}: effective grade {_describe(before, unit, doc_id)} -> {_describe(after, unit, doc_id)}, by {args.by}")
    print(f"the ledger keeps all {len(history)} judgment(s) of this unit; every metric now reads the newest human one")
    return 0


def _cmd_qrels_agreement(args: argparse.Namespace) -> int:
    from collections import Counter

    from ..qrels.grades import agreement

    store = _open_store(args)
    rows = store.qrels_rows()
    report = agreement(rows)
    counts = Counter(row["source"] for row in rows)
    report["judgments"] = {source: counts.get(source, 0) for source in ("provenance", "llm", "human")}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    shown = ", ".join(f"{source} {n}" for source, n in report["judgments"].items())
    print(f"judgments in the ledger: {shown}")
    if not report["pairs"]:
        print("no pairs: no (query, unit) is judged by both an llm and a human, so there is no agreement to measure")
        print("HINT: override some llm-judged units with `crucible qrels override` or import human judgments to audit the judge")
        return 0

    def fmt(value) -> str:
        return "undefined" if value is None else f"{value:.4f}"

    four, binary = report["fourLevel"], report["binary"]
    print(f"llm vs human over {report['pairs']} pair(s) (the newest judgment of each per query and unit)")
    print(f"  4-level    kappa {fmt(four['kappa'])}  observed {four['observed']:.4f}  expected {four['expected']:.4f}")
    print(f"  binary >={binary['threshold']}  kappa {fmt(binary['kappa'])}  observed {binary['observed']:.4f}  "
          f"expected {binary['expected']:.4f}")
    return 0


# -- judge: calibration against human labels --------------------------------------------------
def _cmd_judge_calibrate(args: argparse.Namespace) -> int:
    from ..labels.calibration import calibration_figures, disagreements, judge_cases, label_set_hash, read_labels_file
    from ..judge.embed import HashingEmbedder
    from ..judge.engine import JudgeEngine
    from ..judge.select import JudgeSetupError, make_judge, read_cache_rows
    from ..store import Store
    from ..store.ledgers import add_judge_calibration

    cases = read_labels_file(args.labels)  # a bad file is one error naming file:line before any judge work
    try:
        judge = make_judge(args.judge, model=args.judge_model)
    except JudgeSetupError as exc:
        print(f"crucible: {str(exc).replace('--crucible-judge=', '--judge ')}", file=sys.stderr)
        return EXIT_USAGE
    store = Store.open(args.db)
    # The engine of a real run: the database's cache is read first and every new verdict is written back.
    engine = JudgeEngine(judge, cache_mode="readwrite")
    engine.load_cache(read_cache_rows(store.path, engine.model))
    try:
        verdicts = judge_cases(cases, engine, HashingEmbedder())
    finally:
        store.add_cache_rows(engine.drain_cache_rows())
        judge.close()
    figures = calibration_figures(cases, verdicts)
    crag, faithful = figures["crag"], figures["faithful"]
    stored = add_judge_calibration(store, {
        "judge_model": engine.model, "prompt_version": engine.prompt_version, "label_set_hash": label_set_hash(cases),
        "n_crag": crag["n"], "kappa_crag": crag["kappa"], "kappa_crag_binary": crag["kappaBinary"],
        "n_faithful": faithful["n"], "kappa_faithful": faithful["kappa"],
        "figures": {key: value for key, value in figures.items() if key != "cases"} | {"stats": engine.stats.as_dict()}})
    if args.json:
        print(json.dumps({"judge": {"model": engine.model, "promptVersion": engine.prompt_version},
                          "labels": {"file": args.labels, "cases": len(cases), "hash": stored["label_set_hash"]},
                          "stats": engine.stats.as_dict(), "calibrationId": stored["id"], **figures}, indent=2))
        return EXIT_OK

    def number(value, digits: int = 2) -> str:
        return "undefined" if value is None else f"{value:.{digits}f}"

    stats = engine.stats
    prompts = f", prompts {engine.prompt_version}" if engine.prompt_version != engine.model else ""
    print(f"judge {judge.label}{prompts}: {len(cases)} labelled case(s) from {args.labels}")
    print(f"judge work: {stats.requests} requests, {stats.cache_hits} cached, {stats.judged} judged, {stats.failures} failed")
    for kind, block in (("crag", crag), ("faithful", faithful)):
        if not block["n"]:
            print(f"{kind}: no case compared (no {kind} label, or no verdict for the labelled cases)")
            continue
        extra = f"  binary kappa {number(block['kappaBinary'])} (accuracy {number(block['accuracyBinary'], 3)})" \
            if kind == "crag" else ""
        print(f"{kind}: n {block['n']}  accuracy {number(block['accuracy'], 3)}  kappa {number(block['kappa'])}{extra}")
        columns = list(block["confusion"])
        print("  " + "human / judge".ljust(14) + "".join(f"{name:>11}" for name in columns))
        for label, row in block["confusion"].items():
            print(f"  {label:<14}" + "".join(f"{row[name]:>11}" for name in columns))
    if figures["judgeFailed"]:
        print(f"judge failed on {len(figures['judgeFailed'])} case(s), not compared: {', '.join(figures['judgeFailed'][:10])}")
    found = disagreements(figures)
    print(f"disagreements ({len(found)})" + (":" if found else ": none"))
    width = max((len(case_id) for case_id, *_ in found), default=0)
    for case_id, kind, label, verdict in found:
        label, verdict = (json.dumps(v) if isinstance(v, bool) else v for v in (label, verdict))
        print(f"  {case_id:<{width}}  {kind:<8}  human {label}, judge {verdict}")
    print(f"remembered as calibration {stored['id']} in {store.path}: the summary of runs judged by "
          f"{engine.model} ({engine.prompt_version}) shows it")
    return EXIT_OK


def _cmd_judge_labels_export(args: argparse.Namespace) -> int:
    from ..labels.calibration import labels_from_corrections
    from ..store.ledgers import promoted_corrections

    lines, skipped = labels_from_corrections(promoted_corrections(_open_store(args)))
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    note = f" ({skipped} correction(s) without a result skipped)" if skipped else ""
    _write_output(args.output, text, f"wrote {len(lines)} labelled case(s) from promoted corrections to {args.output}{note}; "
                                     "check each label, then: crucible judge calibrate " + args.output)
    return EXIT_OK


def _cmd_judge_labels_import(args: argparse.Namespace) -> int:
    from ..labels.calibration import read_labels_file
    from ..labels.human import answer_hash, label_rows_from_cases, label_rows_from_corrections
    from ..store import Store
    from ..store.ledgers import add_human_labels, promoted_corrections, stored_answers

    if (args.labels is None) == (not args.from_feedback):
        print("crucible: judge labels import reads a labels file or the promoted corrections (--from-feedback), one of the two\n"
              "HINT: crucible judge labels import LABELS.jsonl, or crucible judge labels import --from-feedback", file=sys.stderr)
        return EXIT_USAGE
    skipped = 0
    if args.labels is not None:
        # A bad file is one error naming file:line before the database is touched.
        rows = label_rows_from_cases(read_labels_file(args.labels), source="import", created_by=args.by, note=args.note)
        store = Store.open(args.db)
    else:
        store = _open_store(args)  # the corrections live in an existing database
        rows, skipped = label_rows_from_corrections(promoted_corrections(store), created_by=args.by)
    added = add_human_labels(store, rows)
    answers = {(row["item_id"], row["answer_hash"]) for row in rows}
    print(f"imported {added} labels ({len(rows) - added} already there) for {len(answers)} answers")
    if skipped:
        print(f"{skipped} correction(s) without a result (no answer to label) skipped")
    known = {(item_id, answer_hash(answer)) for item_id, answer in stored_answers(store, {item for item, _ in answers})}
    unmatched = len(answers - known)
    if unmatched:
        print(f"crucible: warning: {unmatched} of the {len(answers)} labelled answers match no result in {store.path} "
              "(same item id, same answer text, whitespace aside): their labels count once a run gives that answer",
              file=sys.stderr)
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    from ..store import Store, read_export

    document = read_export(args.file)
    store = Store.open(args.db)
    run_id, added = store.import_run(document, source=args.file)
    print(f"{'imported' if added else 'already present:'} run {run_id} into {store.path}")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from ..store.merge import merge_shards

    report = merge_shards(args.shards, args.output, run_id=args.run_id)
    for warning in report.warnings:
        print(f"crucible: warning: {warning}", file=sys.stderr)
    print(f"merged run {report.run_id} from {len(report.shards)} shard(s) into {args.output}: "
          f"{report.items} items, status {report.status}, goldenHash {report.golden_hash[:12]}")
    print(f"qrels: {report.qrels_added} judgment(s) added; judge cache: {report.cache_rows_added} row(s) added")
    if report.status != "complete":
        # The merge is written (the whole shards' results are worth reading), but a CI step that
        # merges must not go on as if the run were whole: the gate would refuse it anyway.
        unfinished = ", ".join(f"{shard} is {status}" for shard, status in report.shard_statuses.items() if status != "complete")
        print(f"crucible: the merged run {report.run_id} is {report.status}: {unfinished or 'a shard did not finish'}\n"
              "HINT: re-run the shard that stopped (`crucible runs --db SHARD` shows each shard's status); "
              "the gate refuses this run unless --allow-incomplete", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    from ..golden_set.promote import promote

    if args.json:
        try:
            text = sys.stdin.read() if args.json == "-" else open(args.json, encoding="utf-8-sig").read()
        except OSError as exc:
            print(f"crucible: {args.json}: cannot read the request body: {exc.strerror or exc}\n"
                  "HINT: --json takes a file holding one JSON object, or - for stdin", file=sys.stderr)
            return EXIT_USAGE
        except UnicodeDecodeError as exc:
            print(f"crucible: {args.json}: not UTF-8 text ({exc.reason} at byte {exc.start})\nHINT: save the body as UTF-8",
                  file=sys.stderr)
            return EXIT_USAGE
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as exc:
            from ..json_input import json_problem

            where = f"{args.json}:{exc.lineno}" if isinstance(exc, json.JSONDecodeError) else args.json
            print(f"crucible: {where}: not valid JSON: {json_problem(exc)}\nHINT: the body is one JSON object", file=sys.stderr)
            return 2
        source = "stdin" if args.json == "-" else args.json
    else:
        missing = [flag for flag, value in (("--run", args.run), ("--question", args.question), ("--assertion", args.assertion),
                                            ("--error-class", args.error_class)) if not value]
        if missing:
            print(f"crucible: promote needs {', '.join(missing)} (or --json FILE)\n"
                  "HINT: `crucible promote --help` shows an example", file=sys.stderr)
            return EXIT_USAGE
        citations = []
        for text in args.citation or []:
            doc, _, mode = text.partition(":")
            doc_id, _, chunk_id = doc.partition("#")
            citations.append({"docId": doc_id, **({"chunkId": doc} if chunk_id else {}), "mode": mode or "required"})
        body = {"runId": args.run, "resultId": args.result, "question": args.question, "correctedAssertions": args.assertion,
                "citations": citations, "errorClass": args.error_class, "tags": args.tag or [], "correctedBy": args.by,
                "note": args.note}
        body = {key: value for key, value in body.items() if value is not None}
        source = "promote"
    if args.by and "correctedBy" not in body:
        body["correctedBy"] = args.by
    store = _open_store(args)
    print(json.dumps(promote(store, body, source=source), indent=2))
    return 0


def _cmd_golden_export(args: argparse.Namespace) -> int:
    from ..golden_set.promote import draft_items

    store = _open_store(args)
    workspace = _workspace(args, store)  # drafts belong to their run's workspace (the message below names it)
    items = draft_items(store, workspace=workspace)
    text = "".join(json.dumps(item, sort_keys=True) + "\n" for item in items)
    of = "" if workspace is None else f" of workspace '{workspace}'"
    _write_output(args.output, text, f"wrote {len(items)} draft golden item(s){of} to {args.output}; "
                                     "review them, move them into your golden set, set status active")
    return 0


def _cmd_golden_review(args: argparse.Namespace) -> int:
    from ..golden_set.review import ReviewError, review_lines

    chunks = None
    if args.corpus:
        try:
            from ..golden_set import corpus
        except ImportError:
            print("crucible: --corpus needs the corpus reader (pytest_crucible.golden_set.corpus), which this install lacks\n"
                  "HINT: run the review without --corpus", file=sys.stderr)
            return EXIT_USAGE
        try:
            chunks = corpus.load_corpus(args.corpus)
        except (getattr(corpus, "CorpusError", ValueError), ValueError) as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        lines = review_lines(args.file, status=args.status, chunks=chunks, corpus_name=args.corpus or "")
    except ReviewError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(lines))
    return EXIT_OK


def _cmd_golden_status(args: argparse.Namespace) -> int:
    """`crucible golden accept` and `crucible golden reject`: set the items' status, every other byte kept."""
    from ..golden_set.review import ReviewError, set_status

    try:
        change = set_status(args.file, args.ids, args.new_status)
    except ReviewError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in change.notes:
        print(f"crucible: note: {note}", file=sys.stderr)
    print(change.summary())
    return EXIT_OK


def _cmd_golden_generate(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from ..golden_set.corpus import CorpusError, load_corpus
    from ..golden_set.generate import (GenerateError, default_against, estimate_requests, finish_drafts, generate_items,
                                  items_jsonl, parse_mix, plan_generation, questions_of_golden_files)
    from ..golden_set.schema import GoldenFileError

    info = sys.stderr if args.output == "-" else sys.stdout  # with the items on stdout, the rest goes to stderr
    try:
        mix = parse_mix(args.mix)
        chunks = load_corpus(args.corpus)
        # An output file that exists is added to, never overwritten: its reviewed items (accepted, rejected) keep
        # their status, and its questions, rejected ones too, are not generated again.
        output = Path(args.output) if args.output != "-" else None
        appending = output is not None and output.exists()
        against = list(args.against) if args.against is not None else default_against(Path.cwd())
        if appending and output.resolve() not in {Path(path).resolve() for path in against}:
            against.append(output)
        existing = questions_of_golden_files(against)
        if args.generator == "anthropic":
            plan, notes = plan_generation(chunks, args.n, mix, seed=args.seed)
    except (CorpusError, GenerateError, GoldenFileError) as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    docs = len({chunk.doc_id for chunk in chunks})
    print(f"corpus {args.corpus}: {len(chunks)} chunk(s) of {docs} document(s); "
          f"{len(existing)} existing question(s) from {len(against)} golden file(s) to avoid", file=info)
    if args.generator == "lexical":
        try:
            from ..golden_set.lexical import lexical_drafts
        except ImportError:
            print("crucible: the offline lexical generator is not installed in this version\n"
                  "HINT: use --generator anthropic (needs ANTHROPIC_API_KEY)", file=sys.stderr)
            return EXIT_USAGE
        report = finish_drafts(lexical_drafts(chunks, args.n, seed=args.seed), existing)
    else:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print("crucible: --generator anthropic needs an API key: ANTHROPIC_API_KEY is not set\n"
                  "HINT: export ANTHROPIC_API_KEY=..., or draft items offline with --generator lexical", file=sys.stderr)
            return EXIT_USAGE
        from ..judge.engine import JudgeEngine
        from ..judge.select import make_judge, read_cache_rows
        from ..store import Store

        judge = make_judge("anthropic", model=args.judge_model, batch=args.batch)
        engine = JudgeEngine(judge, cache_mode="readwrite")
        engine.load_cache(read_cache_rows(args.db, engine.model))  # read only: nothing is written before a refusal
        uncached = [p for p in plan
                    if p.request.cache_key(engine.model, judge.prompt_version_for(p.request.kind)) not in engine.cache]
        checks = estimate_requests(uncached, chunks)
        estimate = judge.estimate_usd([p.request for p in uncached] + checks)
        shown = "unknown (no price for this model)" if estimate is None else f"${estimate:.4f}"
        print(f"estimated cost {shown}: {len(uncached)} generation request(s) and up to {len(checks)} answer check(s) "
              f"({len(plan) - len(uncached)} of {len(plan)} generations cached; {judge.label})", file=info)
        if args.max_cost is not None and (estimate is None or estimate > args.max_cost):
            judge.close()
            print(f"crucible: --max-cost {args.max_cost:g}: the estimated cost {shown} exceeds it; nothing was sent\n"
                  "HINT: generate fewer items (--n), use --batch (50% off), a cheaper --judge-model, or raise the limit",
                  file=sys.stderr)
            return EXIT_USAGE
        store = Store.open(args.db)
        try:
            report = generate_items(chunks, plan, engine, existing_questions=existing, notes=notes)
        finally:
            store.add_cache_rows(engine.drain_cache_rows())
            judge.close()
        stats, usage = engine.stats, judge.usage()
        print(f"judge work: {stats.requests} requests, {stats.cache_hits} cached, {stats.judged} judged, "
              f"{stats.failures} failed; spent ${usage.cost_usd:.4f}", file=info)
    for note in report.notes:
        print(f"note: {note}", file=info)
    for message in report.failures[:5]:
        print(f"crucible: {message}", file=sys.stderr)
    print(report.summary(), file=info)
    if appending:
        text = output.read_bytes()
        ends_with_newline = not text or text.endswith(b"\n")
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(("" if ends_with_newline else "\n") + items_jsonl(report.items))
        print(f"added {len(report.items)} draft item(s) to {args.output} (its earlier lines are unchanged); "
              f"review each one: crucible golden review {args.output}", file=info)
        return EXIT_OK
    _write_output(args.output, items_jsonl(report.items),
                  f"wrote {len(report.items)} draft item(s) to {args.output}; review each one: crucible golden review {args.output}")
    return EXIT_OK


def _cmd_ablate(args: argparse.Namespace) -> int:
    from .ablate import AblationError, ablation_json, ablation_lines, run_ablation

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


# -- serve and keys: the HTTP API and who may call it ------------------------------------------
def _server_extra_missing(exc: ModuleNotFoundError) -> bool:
    from ..server import EXTRA_MISSING, SERVER_MODULES

    if (exc.name or "").split(".")[0] not in SERVER_MODULES:
        return False
    print(f"crucible: {EXTRA_MISSING}", file=sys.stderr)
    return True


def _cmd_serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..server.keys import active_key_count
    from ..server import is_loopback, listen

    try:  # the framework is an optional extra: imported only here
        from ..server.app import openapi_text
        from ..server.serving import build_server
    except ModuleNotFoundError as exc:
        if _server_extra_missing(exc):
            return EXIT_USAGE
        raise
    if args.openapi:
        sys.stdout.write(openapi_text())
        return EXIT_OK
    store = _open_store(args)  # a normal open migrates the file; read endpoints then open it read-only
    keys = active_key_count(store)
    store.close()
    listener = listen(args.host, args.port, active_keys=keys, db=Path(args.db))
    print(f"serving {args.db} on {listener.url} (OpenAPI document: {listener.url}/openapi.json); Ctrl+C stops", flush=True)
    if keys == 0:
        print("crucible: no API key yet, so every request gets 401\n"
              "HINT: crucible keys create --workspace NAME --scope runs:read", file=sys.stderr, flush=True)
    elif not is_loopback(listener.host):
        print("crucible: warning: plain HTTP on an address other machines can reach; put TLS in front of it "
              "(a reverse proxy)", file=sys.stderr, flush=True)
    limits = ServerLimits(max_compares=args.max_compares, max_connections=args.max_connections,
                          read_timeout=args.read_timeout, auth_failures=args.max_auth_failures,
                          promotes_per_minute=args.max_promotes)
    build_server(args.db, limits).run(sockets=[listener.sock])
    return EXIT_OK


def _cmd_keys_create(args: argparse.Namespace) -> int:
    from ..server.keys import create_key

    store = _open_store(args)
    row, key = create_key(store, workspace=args.workspace, scopes=args.scope, name=args.name)
    print(key)  # alone on stdout, so `export ELI_KEY=$(crucible keys create ...)` works
    print(f"created key {row['id']} for workspace '{row['workspace']}' with scope(s) {', '.join(row['scopes'])}; "
          "this is the only time the key is shown (only a salted hash of it is stored)", file=sys.stderr)
    return EXIT_OK


def _cmd_keys_list(args: argparse.Namespace) -> int:
    from ..server.keys import list_keys

    store = _open_store(args)
    rows = list_keys(store, workspace=args.workspace)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print(f"no API keys in {store.path}" + (f" for workspace '{args.workspace}'" if args.workspace else ""))
        print("HINT: crucible keys create --workspace NAME --scope runs:read")
        return EXIT_OK
    ws_width = max(len("workspace"), *(len(row["workspace"]) for row in rows))
    name_width = max(len("name"), *(len(row["name"] or "-") for row in rows))
    print(f"{'key id':<26}  {'workspace':<{ws_width}}  {'name':<{name_width}}  {'created':<24}  {'revoked':<24}  scopes")
    for row in rows:
        print(f"{row['id']:<26}  {row['workspace']:<{ws_width}}  {row['name'] or '-':<{name_width}}  {row['createdAt']:<24}  "
              f"{row['revokedAt'] or '-':<24}  {' '.join(row['scopes'])}")
    return EXIT_OK


def _cmd_keys_revoke(args: argparse.Namespace) -> int:
    from ..server.keys import revoke_key

    store = _open_store(args)
    row, revoked = revoke_key(store, args.key)
    if revoked:
        print(f"revoked key {row['id']} ({row['name'] or 'no name'}, workspace '{row['workspace']}'): "
              "a server refuses it from its next request on")
    else:
        print(f"key {row['id']} was already revoked at {row['revokedAt']}")
    return EXIT_OK


def _at_least(minimum: float, kind: type = int):
    """An argparse type: a number of ``kind`` no smaller than ``minimum``."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if not value >= minimum:  # `not >=`: NaN is refused too
            raise argparse.ArgumentTypeError(f"expected at least {minimum:g}, got {text}")
        return value
    return parse


def add_gate_flags(cmd: argparse.ArgumentParser) -> None:
    """The plugin's gate options, for the commands that give its verdict (compare, report --against)."""
    cmd.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="N",
                     help=f"seed of the bootstrap and the permutation test (default {DEFAULT_SEED}, as --crucible-seed)")
    cmd.add_argument("--multiple", choices=["none", "holm"], default="none", help="p-value correction across metrics")
    cmd.add_argument("--gate", default=None, metavar="M1,M2",
                     help="metrics whose significant regression fails the gate (default every compared one, as --crucible-gate)")
    cmd.add_argument("--fail-under", dest="fail_under", action="append", default=[], metavar="METRIC=VALUE",
                     help="absolute floor on the candidate's mean, e.g. ndcgAt10=0.6 (repeatable, as --crucible-fail-under)")
    cmd.add_argument("--min-pairs", dest="min_pairs", type=int, default=MIN_PAIRS, metavar="N",
                     help=f"fewest pairs a gated metric needs; with fewer the gate refuses, exit 3 (default {MIN_PAIRS}, "
                          "as ini crucible_min_pairs)")
    cmd.add_argument("--rescore", action="store_true",
                     help="score both runs' retrieval metrics from their stored rankings against today's relevance "
                          "grades, so a judgment added between the runs does not move the ruler (as --crucible-rescore)")
    cmd.add_argument("--allow-incomplete", dest="allow_incomplete", action="store_true",
                     help="compare an incomplete or interrupted run on the items it has instead of refusing "
                          "(as --crucible-allow-incomplete)")
    cmd.add_argument("--cluster", choices=["field", "doc", "none"], default="field",
                     help="how items that move together are clustered: field (the golden item's cluster, default), doc "
                          "(the first required citation's document) or none (as --crucible-cluster)")


def build_parser() -> argparse.ArgumentParser:
    parser = CrucibleParser(prog="crucible", description=(
        "Read and compare pytest-crucible evaluation runs.\n\n"
        "exit status: 0 done; 1 a failed gate (compare: a significant regression or a missed floor); 2 a usage error\n"
        "(what is wrong, then a HINT); 3 a refused comparison (different judges, an incomplete or failed run, too few pairs)"))
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
    trec.add_argument("--json", action="store_true", help="print JSON: {all: {measure: value}, perQuery: {...} with -q}")
    trec.set_defaults(func=_cmd_trec_eval)

    def with_db(cmd: argparse.ArgumentParser) -> argparse.ArgumentParser:
        cmd.add_argument("--db", default=None, metavar="PATH",
                         help=f"SQLite results file (default: the one the plugin writes: ini crucible_db, else {DEFAULT_DB}, "
                              "under pytest's rootdir, the nearest directory up from here whose pytest.ini, pyproject.toml, "
                              f"tox.ini or setup.cfg configures pytest; without one, {DEFAULT_DB} here)")
        return cmd

    runs = with_db(sub.add_parser("runs", help="list the runs of the current workspace (--all-workspaces: of every one)"))
    runs.add_argument("--limit", type=int, default=None, metavar="N", help="only the N newest runs")
    runs.add_argument("--json", action="store_true", help="print the runs as a JSON array (newest first)")
    runs.add_argument("--all-workspaces", dest="all_workspaces", action="store_true",
                      help="list the runs of every workspace (default: the current project's workspace)")
    runs.add_argument("--config-hash", dest="config_hash", default=None, metavar="HASH", help="only runs of this configHash (or prefix)")
    runs.add_argument("--label", action="append", default=None, metavar="KEY:VALUE",
                      help="only runs with this label, e.g. model:claude-haiku-5-5 (repeatable: all must match)")
    runs.set_defaults(func=_cmd_runs)

    show = with_db(sub.add_parser("show", help="summarise one run (the same as metrics)"))
    show.add_argument("run", help="run id, unique prefix, or latest")
    show.add_argument("--json", action="store_true", help="print the metrics as JSON (as `crucible metrics --json`)")
    show.set_defaults(func=_cmd_metrics)

    metrics = with_db(sub.add_parser("metrics", help="a run's metrics (--json: the spec's metrics shape)"))
    metrics.add_argument("run", help="run id, unique prefix, or latest")
    metrics.add_argument("--json", action="store_true",
                         help="print JSON: runId, configHash, n, one block per metric family, byFacet")
    metrics.set_defaults(func=_cmd_metrics)

    compare = with_db(sub.add_parser("compare", help="paired comparison of two runs behind two significance gates; "
                                                      "exit 1 when B regressed significantly or missed a floor, 3 when the comparison is refused"))
    compare.add_argument("a", help="baseline: run id, prefix, latest, or an exported run .json")
    compare.add_argument("b", help="candidate: run id, prefix, latest, or an exported run .json")
    compare.add_argument("--json", action="store_true",
                         help="print JSON: a, b, pairedItems, seed, metrics (delta, ci, p, significant), verdicts, power")
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
    compare.set_defaults(func=_cmd_compare)

    export = with_db(sub.add_parser("export", help="write one run as JSON (commit it as a CI baseline)"))
    export.add_argument("run", help="run id, unique prefix, or latest")
    export.add_argument("-o", "--output", required=True, help="output file, or - for stdout")
    export.add_argument("--format", choices=["json", "trec"], default="json",
                        help="json: the whole run (default); trec: a TREC run file of the ranked units the plugin "
                             "scored, for `crucible trec-eval` with `crucible qrels export --effective`")
    export.set_defaults(func=_cmd_export)

    report = with_db(sub.add_parser("report", help="write one run as a self-contained HTML report"))
    report.add_argument("run", help="run id, unique prefix, or latest")
    report.add_argument("--against", default=None, metavar="BASELINE",
                        help="compare with a baseline: run id, prefix, latest (newest other complete run), or an exported run .json")
    report.add_argument("-o", "--output", required=True, help="output .html file, or - for stdout")
    add_gate_flags(report)
    report.set_defaults(func=_cmd_report)

    promote = with_db(sub.add_parser("promote", help="turn a reviewed correction into a draft golden item (+ feedback row)"))
    promote.add_argument("--run", help="run id the correction comes from")
    promote.add_argument("--result", help="result id in that run (optional)")
    promote.add_argument("--question")
    promote.add_argument("--assertion", action="append", help="a corrected must-assertion (repeatable)")
    promote.add_argument("--citation", action="append", metavar="DOC[#CHUNK][:required|acceptable]", help="citation anchor (repeatable)")
    promote.add_argument("--error-class", dest="error_class")
    promote.add_argument("--tag", action="append")
    promote.add_argument("--by", help="who corrected it")
    promote.add_argument("--note")
    promote.add_argument("--json", metavar="FILE|-", help="the request body as JSON (the spec's promote contract)")
    promote.set_defaults(func=_cmd_promote)

    golden = sub.add_parser("golden", help="golden items: generated from a corpus, reviewed, promoted from reviews, exported")
    golden_sub = golden.add_subparsers(dest="golden_command", required=True, metavar="ACTION")
    golden_export = with_db(golden_sub.add_parser("export", help="write draft items in the golden file format"))
    golden_export.add_argument("--status", choices=["draft"], default="draft")
    golden_export.add_argument("-o", "--output", required=True, help="a .jsonl file, or - for stdout")
    golden_export.add_argument("--all-workspaces", dest="all_workspaces", action="store_true",
                               help="the drafts of every workspace (default: the current project's workspace)")
    golden_export.set_defaults(func=_cmd_golden_export)
    golden_generate = with_db(golden_sub.add_parser(
        "generate", help="draft golden items written from a corpus by Claude (or offline), filtered, as status draft"))
    golden_generate.add_argument("--corpus", required=True, metavar="PATH",
                                 help="a folder of .md/.txt files (split into passages at headings and blank lines), "
                                      "or a .jsonl file of chunks (chunk_id, doc_id, text, metadata)")
    golden_generate.add_argument("--n", type=_at_least(1), default=20, metavar="N", help="items to generate (default 20)")
    golden_generate.add_argument("-o", "--output", default="golden_generated.jsonl", metavar="FILE",
                                 help="where the kept items go, one per line (default golden_generated.jsonl; - for stdout)")
    golden_generate.add_argument("--mix", default=None, metavar="TYPE=W,...",
                                 help="share of each question type, summing to 1 (default simple=0.5,multi_hop=0.2,"
                                      "comparison=0.1,false_premise=0.1,unanswerable=0.1)")
    golden_generate.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="N",
                                 help=f"which chunks are drawn (default {DEFAULT_SEED}); the same seed draws the same ones")
    golden_generate.add_argument("--against", nargs="+", default=None, metavar="FILE",
                                 help="golden files a new question must not duplicate (default: every golden_*.jsonl and "
                                      "*.golden.jsonl below the current directory, except the output)")
    golden_generate.add_argument("--generator", choices=["anthropic", "lexical"], default="anthropic",
                                 help="anthropic: Claude writes and checks the items (needs ANTHROPIC_API_KEY, default); "
                                      "lexical: offline drafts from the text itself")
    golden_generate.add_argument("--judge-model", dest="judge_model", default=None, metavar="M",
                                 help="the Claude model (default the judge's default model)")
    golden_generate.add_argument("--batch", action="store_true", help="send the requests as Message Batches (50%% off, slower)")
    golden_generate.add_argument("--max-cost", dest="max_cost", type=_at_least(0, float), default=None, metavar="USD",
                                 help="refuse (exit 2, nothing sent) when the estimated cost is above USD")
    golden_generate.set_defaults(func=_cmd_golden_generate)
    golden_review = golden_sub.add_parser("review", help="list the drafts of a golden file, with their source passages")
    golden_review.add_argument("file", help="a golden file (.jsonl, .json or .yaml)")
    golden_review.add_argument("--status", choices=["draft", "rejected", "active"], default="draft",
                               help="list the items of this status (default draft)")
    golden_review.add_argument("--corpus", default=None, metavar="PATH",
                               help="the corpus the drafts were generated from: prints the text of each item's "
                                    "metadata.generatedBy.sourceChunks")
    golden_review.set_defaults(func=_cmd_golden_review)
    for action, status, what in (("accept", "active", "set items' status to active: they run"),
                                 ("reject", "rejected", "set items' status to rejected: they never run")):
        command = golden_sub.add_parser(action, help=f"{what} (only those values change in the file)")
        command.add_argument("file", help="a .jsonl golden file")
        command.add_argument("ids", nargs="+", metavar="ID", help="the items' ids")
        command.set_defaults(func=_cmd_golden_status, new_status=status)

    importer = with_db(sub.add_parser("import", help="add an exported run to the database"))
    importer.add_argument("file")
    importer.set_defaults(func=_cmd_import)

    merge = sub.add_parser("merge", help="join the shard databases of one sharded run (--crucible-run-id) into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD.db", help="the shards' --crucible-db files")
    merge.add_argument("-o", "--output", required=True, metavar="RUN.db",
                       help="crucible database to add the merged run to (created if missing)")
    merge.add_argument("--run-id", dest="run_id", default=None, metavar="ID",
                       help="the run to merge (default: the one run id every shard holds)")
    merge.set_defaults(func=_cmd_merge)

    qrels = sub.add_parser("qrels", help="the relevance-judgment ledger: import, export, override, agreement")
    qrels_sub = qrels.add_subparsers(dest="qrels_command", required=True, metavar="QRELS_COMMAND")

    q_import = with_db(qrels_sub.add_parser("import", help="append judgments from a TREC qrels or .jsonl file"))
    q_import.add_argument("file", help="TREC qrels ('qid iter docno grade'; docno doc:<id>, chunk:<id> or a chunk id) "
                                       "or .jsonl (queryId, chunkId/docId, grade)")
    q_import.add_argument("--source", default="human", metavar="human|llm",
                          help="who judged: human (needs --by) or llm (needs --judge-model); default human")
    q_import.add_argument("--by", default=None, metavar="NAME", help="who made the human judgments")
    q_import.add_argument("--judge-model", dest="judge_model", default=None, metavar="M", help="the llm judge's model")
    q_import.add_argument("--note", default=None, metavar="TEXT", help="a note stamped on every imported judgment")
    q_import.set_defaults(func=_cmd_qrels_import)

    q_export = with_db(qrels_sub.add_parser("export", help="write the ledger, or a run's effective judgments"))
    q_export.add_argument("--format", choices=["trec", "jsonl"], default=None,
                          help="default: trec with --effective, jsonl for the whole ledger")
    q_export.add_argument("--effective", action="store_true",
                          help="the effective grade of every judged unit of a run's items (what the metrics read)")
    q_export.add_argument("--run", default="latest", help="with --effective: run id, unique prefix, or latest (default)")
    q_export.add_argument("-o", "--output", default="-", help="output file, or - for stdout (default)")
    q_export.set_defaults(func=_cmd_qrels_export)

    q_override = with_db(qrels_sub.add_parser("override", help="append a human judgment of one unit (the newest human one wins)"))
    q_override.add_argument("query", help="golden item id")
    q_override.add_argument("unit", metavar="CHUNK", help="chunk id (a doc id with --doc)")
    q_override.add_argument("grade", metavar="GRADE", help="0 not relevant, 1 related, 2 partly answers, 3 the exact answer")
    q_override.add_argument("--by", required=True, metavar="NAME", help="who makes this judgment")
    q_override.add_argument("--note", default=None, metavar="TEXT", help="why")
    q_override.add_argument("--doc", action="store_true", help="CHUNK is a document id: judge the whole document")
    q_override.add_argument("--force", action="store_true",
                            help="judge a query or unit the database does not know (no run's golden item, never retrieved "
                                 "for the item, not cited, never judged); without it such a typo is refused, since the "
                                 "append-only ledger would keep it forever")
    q_override.set_defaults(func=_cmd_qrels_override)

    q_agreement = with_db(qrels_sub.add_parser("agreement", help="Cohen's kappa between llm and human judgments"))
    q_agreement.add_argument("--json", action="store_true", help="print the kappas and the judgment counts as JSON")
    q_agreement.set_defaults(func=_cmd_qrels_agreement)

    judge = sub.add_parser("judge", help="the judge: calibrate it against human labels, export labels from reviews")
    judge_sub = judge.add_subparsers(dest="judge_command", required=True, metavar="ACTION")
    calibrate = with_db(judge_sub.add_parser(
        "calibrate", help="run human-labelled cases through the judge; accuracy, Cohen's kappa, confusion, disagreements"))
    calibrate.add_argument("labels", metavar="LABELS.jsonl",
                           help="one labelled case per line: id, question, contexts, answer, reference, "
                                "labels {crag, faithful} (docs/judge-calibration.md)")
    calibrate.add_argument("--judge", choices=[c for c in JUDGE_CHOICES if c != "auto"], default="lexical",
                           help="lexical: the offline judge, lexical-v2 (default); lexical-v1: the previous offline "
                                "judge; anthropic: Claude (needs ANTHROPIC_API_KEY)")
    calibrate.add_argument("--judge-model", dest="judge_model", default=None, metavar="M",
                           help="the Claude model with --judge anthropic (default: the plugin's default judge model)")
    calibrate.add_argument("--json", action="store_true",
                           help="print JSON: judge, crag and faithful (n, accuracy, kappa, confusion), cases")
    calibrate.set_defaults(func=_cmd_judge_calibrate)
    judge_labels = judge_sub.add_parser("labels", help="labels files for `crucible judge calibrate`; the labels ledger PPI++ reads")
    judge_labels_sub = judge_labels.add_subparsers(dest="judge_labels_command", required=True, metavar="ACTION")
    labels_export = with_db(judge_labels_sub.add_parser(
        "export", help="write the promoted corrections of the database as a labels file to start from"))
    labels_export.add_argument("-o", "--output", required=True, help="a .jsonl file, or - for stdout")
    labels_export.set_defaults(func=_cmd_judge_labels_export)
    labels_import = with_db(judge_labels_sub.add_parser(
        "import", help="append human labels of answers to the database's append-only ledger (what `compare --ppi` and "
                       "the run summary correct the judge's bias with)"))
    labels_import.add_argument("labels", nargs="?", default=None, metavar="LABELS.jsonl",
                               help="a labels file (the `crucible judge calibrate` format); each case labels the answer "
                                    "`answer` of the golden item `itemId`, else of the golden item whose id is `id`")
    labels_import.add_argument("--from-feedback", dest="from_feedback", action="store_true",
                               help="instead of a file: the labels of the promoted corrections (as `crucible judge labels "
                                    "export` writes them; source feedback)")
    labels_import.add_argument("--by", default=None, metavar="NAME", help="who labelled (kept with every label)")
    labels_import.add_argument("--note", default=None, metavar="TEXT", help="a note stamped on every imported label")
    labels_import.set_defaults(func=_cmd_judge_labels_import)

    ablate = with_db(sub.add_parser("ablate", help="each guardrail layer's contribution: one run per layer switched off"))
    ablate.add_argument("--config", metavar="PATH", help="the base pipeline config (default: the defaults)")
    ablate.add_argument("--layers", required=True, metavar="A,B,...", help="guardrail layers to switch off one at a time")
    ablate.add_argument("--kind", default="adversarial", metavar="KIND[,KIND]",
                        help="golden item kinds to run (default adversarial; 'all' runs every kind)")
    ablate.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the paired test (default {DEFAULT_SEED})")
    ablate.add_argument("--json", action="store_true", help="print the contributions as JSON")
    ablate.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="passed to pytest, e.g. -- example_project")
    ablate.set_defaults(func=_cmd_ablate)

    serve = with_db(sub.add_parser("serve", help="serve the HTTP API over the database (needs pytest-crucible[server])"))
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; another address needs an API key in the database)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    serve.add_argument("--openapi", action="store_true", help="print the OpenAPI document and exit")
    limits = ServerLimits()
    serve.add_argument("--max-compares", dest="max_compares", type=_at_least(1), default=limits.max_compares, metavar="N",
                       help=f"compares computed at once; more answer 503 with Retry-After (default {limits.max_compares})")
    serve.add_argument("--max-connections", dest="max_connections", type=_at_least(1), default=limits.max_connections,
                       metavar="N", help=f"open connections; a request beyond them answers 503 (default {limits.max_connections})")
    serve.add_argument("--read-timeout", dest="read_timeout", type=_at_least(0.1, float), default=limits.read_timeout,
                       metavar="SECONDS", help="seconds a client has to send a request's headers, and again its body "
                                               f"(default {limits.read_timeout:g})")
    serve.add_argument("--max-auth-failures", dest="max_auth_failures", type=_at_least(1), default=limits.auth_failures,
                       metavar="N", help="requests with a wrong key per client address per minute; more answer 429 "
                                         f"(default {limits.auth_failures})")
    serve.add_argument("--max-promotes", dest="max_promotes", type=_at_least(1), default=limits.promotes_per_minute,
                       metavar="N", help=f"promotes per key per minute; more answer 429 (default {limits.promotes_per_minute})")
    serve.set_defaults(func=_cmd_serve)

    keys = sub.add_parser("keys", help="API keys of `crucible serve`: create, list, revoke")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    keys_create = with_db(keys_sub.add_parser("create", help="create a key and print it once (only its salted hash is kept)"))
    keys_create.add_argument("--workspace", required=True, metavar="NAME", help="the one workspace the key can reach")
    keys_create.add_argument("--scope", action="append", required=True, metavar="SCOPE",
                             help="runs:read or kb:read (metrics, compare, list), feedback:write (promote); repeatable")
    keys_create.add_argument("--name", default=None, metavar="NAME", help="what the key is for (shown by keys list)")
    keys_create.set_defaults(func=_cmd_keys_create)
    keys_list = with_db(keys_sub.add_parser("list", help="list the keys (never their secrets)"))
    keys_list.add_argument("--workspace", default=None, metavar="NAME", help="only the keys of this workspace")
    keys_list.add_argument("--json", action="store_true", help="print the keys as a JSON array")
    keys_list.set_defaults(func=_cmd_keys_list)
    keys_revoke = with_db(keys_sub.add_parser("revoke", help="revoke a key: refused from the next request on"))
    keys_revoke.add_argument("key", metavar="ID", help="the key id (`crucible keys list`), or the key itself")
    keys_revoke.set_defaults(func=_cmd_keys_revoke)

    # Reading commands read the current project's workspace; --workspace reads another.
    for reader in (runs, show, metrics, compare, export, report, q_export, q_override, golden_export):
        reader.add_argument("--workspace", default=None, metavar="NAME",
                            help="workspace whose runs are listed and whose newest run is `latest` (default: the current "
                                 "project's: CRUCIBLE_WORKSPACE, ini crucible_workspace, else the project directory's name)")
    _add_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..qrels.formats import QrelsFormatError
    from ..store import StoreError

    args = build_parser().parse_args(argv)
    if "db" in vars(args) and args.db is None:
        from ..workspace import default_db

        args.db = str(default_db())  # the project's database, found from the current directory
    try:
        return args.func(args)
    except (StoreError, QrelsFormatError) as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file named on the command line that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"crucible: {where}{exc.strerror or exc}\nHINT: check the path (an output's directory must exist)", file=sys.stderr)
        return EXIT_USAGE


