"""The ``crucible`` command: a thin door onto the same functions the plugin uses."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

DEFAULT_DB = ".crucible/crucible.db"

# Exit codes: 0 done, 1 a failed gate (compare found a significant regression), 2 a usage
# error (argparse's own, or bad input: one line saying what is wrong, then a HINT line),
# 3 a comparison refused (runs judged by different judges).
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
            "crucible runs --json --db example_project/.crucible/crucible.db",
    "show": "crucible show latest\n"
            "crucible show 01J9Z3 --json      # a unique prefix of the run id",
    "metrics": "crucible metrics latest\n"
               "crucible metrics latest --json   # runId, configHash, n, one block per family, byFacet",
    "compare": "crucible compare baselines/main.json latest\n"
               "crucible compare 01J9Z3 latest --metrics ndcgAt10,mrr --json\n"
               "crucible compare 01J9Z3 latest --facet questionType=multi_hop",
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
    "import": "crucible import baselines/main.json --db .crucible/crucible.db",
    "merge": "crucible merge shard-1.db shard-2.db -o run.db\n"
             "crucible compare baselines/main.json latest --db run.db",
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


def _cmd_metrics(args: argparse.Namespace) -> int:
    from .report.terminal import run_summary_lines
    from .report.views import run_metrics_json

    store = _open_store(args)
    run_id = store.resolve_run(args.run)
    if args.json:
        print(json.dumps(run_metrics_json(store.run_data(run_id), store.golden_items(run_id), store.results(run_id)), indent=2))
    else:
        print("\n".join(run_summary_lines(store, run_id)))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from .facets import items_in_facet, parse_facet
    from .report.views import comparison_lines
    from .stats.compare import ComparisonRefused, compare_run_data
    from .store import read_export, run_data_from_export

    store = _open_store(args)

    def load(ref: str):
        """(RunData, golden items as run) from a run id/prefix/latest or an exported .json."""
        if ref.endswith(".json"):
            document = read_export(ref)
            return run_data_from_export(document), [golden["item"] for golden in document["goldenItems"]]
        run_id = store.resolve_run(ref)
        return store.run_data(run_id), store.golden_items(run_id)

    (a, items_a), (b, items_b) = load(args.a), load(args.b)
    if args.facet:
        try:
            facet, value = parse_facet(args.facet)
        except ValueError as exc:
            print(f"crucible: {exc}", file=sys.stderr)
            return 2
        # An item is in the facet when the baseline's version of it is (items are paired by id).
        keep = items_in_facet(items_a or items_b, facet, value)
        a, b = a.restricted(keep), b.restricted(keep)
    try:
        comparison = compare_run_data(a, b, seed=args.seed, multiple=args.multiple,
                                      metrics=args.metrics.split(",") if args.metrics else None)
    except ComparisonRefused as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return 3
    if args.json:
        document = comparison.to_json()
        if args.facet:
            document["facet"] = args.facet
        print(json.dumps(document, indent=2))
    else:
        if args.facet:
            print(f"facet {args.facet}")
        print("\n".join(comparison_lines(comparison)))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    store = _open_store(args)
    run_id = store.resolve_run(args.run)
    if args.format == "trec":
        return _export_trec_run(store, run_id, args.output)
    text = json.dumps(store.export_run(run_id), indent=1, sort_keys=True) + "\n"
    _write_output(args.output, text, f"exported run {run_id} to {args.output}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .report.html import render_report, write_report
    from .stats.compare import ComparisonRefused

    store = _open_store(args)
    run_id = store.resolve_run(args.run)
    try:
        html = render_report(store, run_id, against=args.against)
    except ComparisonRefused as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return 3
    if args.output == "-":
        sys.stdout.write(html)
        return 0
    try:
        path = write_report(args.output, html)
    except OSError as exc:
        print(f"crucible: {args.output}: cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote the report of run {run_id}" + (f" against {args.against}" if args.against else "") + f" to {path}")
    return 0


def _export_trec_run(store, run_id: str, output: str) -> int:
    from .qrels_io import format_trec_run, run_rankings

    rankings = run_rankings(store.results(run_id), store.effective_qrels(run_id))
    _write_text(output, format_trec_run(rankings, tag=f"crucible-{run_id}"))
    if output != "-":
        print(f"exported the ranked units of run {run_id} ({len(rankings)} queries) as a TREC run to {output}")
    return 0


def _write_text(output: str, text: str) -> None:
    from .qrels_io import QrelsFormatError

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
    from .qrels_io import chunk_doc_map

    results, items = [], []
    for run in store.list_runs():
        results.extend(store.results(run["id"]))
        items.extend(store.golden_items(run["id"]))
    return chunk_doc_map(results, items)


def _cmd_qrels_import(args: argparse.Namespace) -> int:
    from .qrels_io import attach_doc_ids, read_qrels_file
    from .store import Store

    rows = read_qrels_file(args.file, source=args.source, by=args.by, judge_model=args.judge_model, note=args.note)
    store = Store.open(args.db)
    if any(row["chunk_id"] and not row["doc_id"] for row in rows):
        rows = attach_doc_ids(rows, _chunk_docs(store))
    added = store.append_qrels(rows)
    print(f"read {len(rows)} judgment(s) from {args.file}: {added} added to {store.path}, {len(rows) - added} already present")
    return 0


def _cmd_qrels_export(args: argparse.Namespace) -> int:
    from .qrels_io import format_effective_qrels, format_qrels

    store = _open_store(args)
    fmt = args.format or ("trec" if args.effective else "jsonl")
    if args.effective:
        run_id = store.resolve_run(args.run)
        text = format_effective_qrels(store.effective_qrels(run_id), fmt)
        what = f"the effective judgments of run {run_id}"
    else:
        text = format_qrels(store.qrels_rows(), fmt)
        what = "the qrels ledger"
    _write_text(args.output, text)
    if args.output != "-":
        print(f"exported {what} ({text.count(chr(10))} lines, {fmt}) to {args.output}")
    return 0


def _query_judgments(store, query: str) -> tuple[dict, bool]:
    """(unit -> (effective grade, source), whether the query is known) for one query:
    its citations in the newest complete run (if it has the item), human and llm rows."""
    from .metrics.retrieval import provenance_qrels
    from .qrels import effective_grades
    from .store import RunNotFound

    provenance, known = {}, False
    try:
        run_id = store.resolve_run("latest")
    except RunNotFound:
        run_id = None
    for item in store.golden_items(run_id) if run_id else []:
        if item["id"] == query:
            provenance, known = provenance_qrels(item.get("citations") or []), True
    rows = store.qrels_rows(query_ids=[query], sources=("human", "llm"))
    return effective_grades(provenance, rows), known or bool(store.qrels_rows(query_ids=[query]))


def _describe(judgments: dict, unit: str, doc_id: str | None) -> str:
    if unit in judgments:
        grade, source = judgments[unit]
        return f"{grade} ({source})"
    doc_unit = f"doc:{doc_id}" if doc_id else None
    if unit.startswith("chunk:") and doc_unit in judgments:
        grade, source = judgments[doc_unit]
        return f"unjudged as a chunk, counted for {doc_unit}: {grade} ({source})"
    return "unjudged"


def _cmd_qrels_override(args: argparse.Namespace) -> int:
    from .qrels import unit_key
    from .qrels_io import QrelsFormatError, grade_problem, parse_grade

    grade = parse_grade(args.grade)
    if grade is None:
        problem, hint = grade_problem(args.grade)
        raise QrelsFormatError(None, None, "GRADE", problem, hint)
    if not args.by.strip():
        raise QrelsFormatError(None, None, "--by", "a human judgment needs the name of who made it", "pass --by NAME")
    store = _open_store(args)
    chunk_id, doc_id = (None, args.unit) if args.doc else (args.unit, _chunk_docs(store).get(args.unit))
    unit = f"doc:{doc_id}" if args.doc else f"chunk:{chunk_id}"
    before, known = _query_judgments(store, args.query)
    if not known:
        print(f"crucible: warning: query {args.query!r} is neither in the latest run nor in the ledger; is the id right?",
              file=sys.stderr)
    store.append_qrels([{"query_id": args.query, "chunk_id": chunk_id, "doc_id": doc_id, "grade": grade,
                         "source": "human", "created_by": args.by, "note": args.note}])
    after, _ = _query_judgments(store, args.query)
    history = [row for row in store.qrels_rows(query_ids=[args.query]) if unit_key(row) == unit]
    print(f"{args.query} {unit}: effective grade {_describe(before, unit, doc_id)} -> {_describe(after, unit, doc_id)}, by {args.by}")
    print(f"the ledger keeps all {len(history)} judgment(s) of this unit; every metric now reads the newest human one")
    return 0


def _cmd_qrels_agreement(args: argparse.Namespace) -> int:
    from collections import Counter

    from .qrels import agreement

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


def _cmd_import(args: argparse.Namespace) -> int:
    from .store import Store, read_export

    document = read_export(args.file)
    store = Store.open(args.db)
    run_id, added = store.import_run(document, source=args.file)
    print(f"{'imported' if added else 'already present:'} run {run_id} into {store.path}")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from .store.merge import merge_shards

    report = merge_shards(args.shards, args.output, run_id=args.run_id)
    for warning in report.warnings:
        print(f"crucible: warning: {warning}", file=sys.stderr)
    print(f"merged run {report.run_id} from {len(report.shards)} shard(s) into {args.output}: "
          f"{report.items} items, status {report.status}, goldenHash {report.golden_hash[:12]}")
    print(f"qrels: {report.qrels_added} judgment(s) added; judge cache: {report.cache_rows_added} row(s) added")
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    from .promote import promote

    if args.json:
        text = sys.stdin.read() if args.json == "-" else open(args.json, encoding="utf-8").read()
        try:
            body = json.loads(text)
        except json.JSONDecodeError as exc:
            print(f"crucible: {args.json}:{exc.lineno}: not valid JSON: {exc.msg}\nHINT: the body is one JSON object", file=sys.stderr)
            return 2
        source = "stdin" if args.json == "-" else args.json
    else:
        missing = [flag for flag, value in (("--run", args.run), ("--question", args.question), ("--assertion", args.assertion),
                                            ("--error-class", args.error_class)) if not value]
        if missing:
            print(f"crucible: promote needs {', '.join(missing)} (or --json FILE)", file=sys.stderr)
            return 2
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
    from .promote import draft_items

    items = draft_items(_open_store(args))
    text = "".join(json.dumps(item, sort_keys=True) + "\n" for item in items)
    _write_output(args.output, text, f"wrote {len(items)} draft golden item(s) to {args.output}; "
                                     "review them, move them into your golden set, set status active")
    return 0


def _cmd_ablate(args: argparse.Namespace) -> int:
    from .ablation import AblationError, ablation_json, ablation_lines, run_ablation

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


def build_parser() -> argparse.ArgumentParser:
    parser = CrucibleParser(prog="crucible", description="Read and compare pytest-crucible evaluation runs.")
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

    show = with_db(sub.add_parser("show", help="summarise one run (the same as metrics)"))
    show.add_argument("run", help="run id, unique prefix, or latest")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_cmd_metrics)

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
    compare.add_argument("--facet", default=None, metavar="FACET=VALUE",
                         help="compare only the items of one facet value, e.g. questionType=multi_hop or tag=topic:returns")
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

    golden = sub.add_parser("golden", help="golden items promoted from reviews")
    golden_sub = golden.add_subparsers(dest="golden_command", required=True, metavar="ACTION")
    golden_export = with_db(golden_sub.add_parser("export", help="write draft items in the golden file format"))
    golden_export.add_argument("--status", choices=["draft"], default="draft")
    golden_export.add_argument("-o", "--output", required=True, help="a .jsonl file, or - for stdout")
    golden_export.set_defaults(func=_cmd_golden_export)

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
    q_override.set_defaults(func=_cmd_qrels_override)

    q_agreement = with_db(qrels_sub.add_parser("agreement", help="Cohen's kappa between llm and human judgments"))
    q_agreement.add_argument("--json", action="store_true", help="print the kappas and the judgment counts as JSON")
    q_agreement.set_defaults(func=_cmd_qrels_agreement)

    ablate = with_db(sub.add_parser("ablate", help="each guardrail layer's contribution: one run per layer switched off"))
    ablate.add_argument("--config", metavar="PATH", help="the base pipeline config (default: the defaults)")
    ablate.add_argument("--layers", required=True, metavar="A,B,...", help="guardrail layers to switch off one at a time")
    ablate.add_argument("--kind", default="adversarial", metavar="KIND[,KIND]",
                        help="golden item kinds to run (default adversarial; 'all' runs every kind)")
    ablate.add_argument("--seed", type=int, default=1337, help="seed of the paired test (default 1337)")
    ablate.add_argument("--json", action="store_true", help="print the contributions as JSON")
    ablate.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="passed to pytest, e.g. -- example_project")
    ablate.set_defaults(func=_cmd_ablate)
    _add_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .qrels_io import QrelsFormatError
    from .store import StoreError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (StoreError, QrelsFormatError) as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
