"""`crucible qrels import|export|override|agreement` (the relevance-judgment ledger) and `crucible trec-eval`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .common import EXIT_USAGE, add_workspace_flag, open_store, resolve_run, with_db, workspace_of, write_text

EXAMPLES: dict[str, str] = {
    "trec-eval": "crucible trec-eval -q -m ndcg_cut_10 -m P_10 qrels.txt run.txt\n"
                 "crucible trec-eval --json qrels.txt run.txt",
    "qrels": "crucible qrels export --effective -o qrels.txt\n"
             "crucible qrels override ret-001 pol-returns#p2 3 --by dana --note \"states the 30 days\"\n"
             "crucible qrels agreement",
    "qrels import": "crucible qrels import reviews.jsonl --source human --by dana\n"
                    "crucible qrels import umbrela.txt --source llm --judge-model claude-haiku-5-5",
    "qrels export": "crucible qrels export -o ledger.jsonl\n"
                    "crucible qrels export --effective --run latest --format trec -o qrels.txt",
    "qrels override": "crucible qrels override ret-001 pol-returns#p2 3 --by dana --note \"states the 30 days\"\n"
                      "crucible qrels override ret-001 pol-returns 1 --doc --by dana",
    "qrels agreement": "crucible qrels agreement\n"
                       "crucible qrels agreement --json",
}


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

    store = open_store(args)
    fmt = args.format or ("trec" if args.effective else "jsonl")
    if args.effective:
        run_id = resolve_run(store, args, args.run)
        text = format_effective_qrels(store.effective_qrels(run_id), fmt)
        what = f"the effective judgments of run {run_id}"
    else:
        text = format_qrels(store.qrels_rows(), fmt)
        what = "the qrels ledger"
    write_text(args.output, text)
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
    from ..json_input import reviewer_name
    from ..qrels.formats import QrelsFormatError, grade_problem, parse_grade
    from ..qrels.grades import unit_key

    grade = parse_grade(args.grade)
    if grade is None:
        problem, hint = grade_problem(args.grade)
        raise QrelsFormatError(None, None, "GRADE", problem, hint)
    try:
        args.by = reviewer_name(args.by)
    except ValueError as exc:
        raise QrelsFormatError(None, None, "--by", f"the name {exc}", "pass --by NAME, the person who judged") from None
    store = open_store(args)
    unknown = _unknown_judgment_target(store, args.query, args.unit, doc=args.doc)
    if unknown and not args.force:
        problem, suggestion, hint = unknown
        print(f"crucible: {problem}{suggestion}\nHINT: {hint}", file=sys.stderr)
        return EXIT_USAGE
    if unknown:
        print(f"crucible: warning: {unknown[0]}; judged anyway (--force)", file=sys.stderr)
    chunk_id, doc_id = (None, args.unit) if args.doc else (args.unit, _chunk_docs(store).get(args.unit))
    unit = f"doc:{doc_id}" if args.doc else f"chunk:{chunk_id}"
    before, _ = _query_judgments(store, args.query, workspace_of(args, store))
    store.append_qrels([{"query_id": args.query, "chunk_id": chunk_id, "doc_id": doc_id, "grade": grade,
                         "source": "human", "created_by": args.by, "note": args.note}])
    after, _ = _query_judgments(store, args.query, workspace_of(args, store))
    history = [row for row in store.qrels_rows(query_ids=[args.query]) if unit_key(row) == unit]
    print(f"{args.query} {unit}: effective grade {_describe(before, unit, doc_id)} -> {_describe(after, unit, doc_id)}, by {args.by}")
    print(f"the ledger keeps all {len(history)} judgment(s) of this unit; every metric now reads the newest human one")
    return 0


def _cmd_qrels_agreement(args: argparse.Namespace) -> int:
    from collections import Counter

    from ..qrels.grades import agreement

    store = open_store(args)
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


def add_trec(sub) -> None:
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


def add_qrels(sub) -> None:
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
    add_workspace_flag(q_export)
    add_workspace_flag(q_override)
