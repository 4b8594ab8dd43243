"""`crucible judge calibrate`, `crucible judge align` and `crucible judge labels import|export`: the judge against
people's labels (`align` fits the offline judge to them; `labels export` writes the promoted corrections, or with
--run a stored run's items, as a labels file)."""

from __future__ import annotations

import argparse
import json
import sys

from ..defaults import DEFAULT_SEED
from .common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, add_workspace_flag, at_least, open_store, resolve_run, with_db, workspace_of, write_output

EXAMPLES: dict[str, str] = {
    "judge": "crucible judge labels export -o labels.jsonl\n"
             "crucible judge calibrate labels.jsonl --judge anthropic",
    "judge calibrate": "crucible judge calibrate labels.jsonl                    # the offline judge (lexical-v3)\n"
                       "crucible judge calibrate labels.jsonl --judge anthropic --judge-model claude-haiku-5-5 --json",
    "judge align": "crucible judge align labels.jsonl --judge lexical -o judges/aligned.json   # CV report, then the file\n"
                   "pytest --crucible-judge=aligned:judges/aligned.json                 # runs judged by it\n"
                   "crucible judge calibrate more_labels.jsonl --judge aligned:judges/aligned.json\n"
                   "crucible judge align labels.jsonl --judge anthropic -o judges/claude.json --max-cost 1  # few-shot",
    "judge labels": "crucible judge labels export -o labels.jsonl\n"
                    "crucible judge labels import labels.jsonl --by dana",
    "judge labels import": "crucible judge labels import labels.jsonl --by dana   # keyed by itemId (else id) and the answer\n"
                           "crucible judge labels import --from-feedback          # this workspace's promoted corrections' "
                           "labels, by the keys that sent them\n"
                           "crucible judge labels import --from-feedback --all-workspaces  # every workspace's (says which)\n"
                           "crucible compare baselines/main.json latest --ppi     # the judged deltas corrected with them",
    "judge labels export": "crucible judge labels export -o labels.jsonl               # the promoted corrections\n"
                           "crucible judge labels export --run latest -o labels.jsonl  # a run's items, its judge's "
                           "verdicts prefilled: check each\n"
                           "crucible judge calibrate labels.jsonl                      # once checked: the judge sees "
                           "what the run's saw\n"
                           "crucible judge labels export -o - --db .crucible/crucible.db",
}


def _cmd_judge_calibrate(args: argparse.Namespace) -> int:
    from ..judge.embed import default_embedder
    from ..judge.engine import JudgeEngine
    from ..judge.select import JudgeSetupError, make_judge, read_cache_rows
    from ..labels.calibration import calibration_figures, disagreements, judge_cases, label_set_hash, read_labels_file
    from ..store import Store
    from ..store.ledgers import add_judge_calibration

    cases = read_labels_file(args.labels)  # a bad file is one error naming file:line before any judge work
    try:
        judge = make_judge(args.judge, model=args.judge_model)
    except JudgeSetupError as exc:
        print(f"crucible: {str(exc).replace('--crucible-judge=', '--judge ').replace('--crucible-judge-model', '--judge-model')}",
              file=sys.stderr)
        return EXIT_USAGE
    store = Store.open(args.db)
    # The engine of a real run: the database's cache is read first and every new verdict is written back.
    engine = JudgeEngine(judge, cache_mode="readwrite")
    engine.load_cache(read_cache_rows(store.path, engine.model))
    try:
        verdicts = judge_cases(cases, engine, default_embedder())
    finally:
        store.add_cache_rows(engine.drain_cache_rows())
        judge.close()
    figures = calibration_figures(cases, verdicts)
    crag, faithful = figures["crag"], figures["faithful"]
    fitted_on = getattr(judge, "labels_hash", None)
    if fitted_on is not None and fitted_on == label_set_hash(cases):
        print(f"crucible: warning: {engine.model} was aligned on these very labels: its agreement with them is in-sample "
              "and flatters it; the cross-validated figures `crucible judge align` printed are the honest ones (or calibrate "
              "on labels it never saw)", file=sys.stderr)
    # A calibration on the cases a failing judge happened to answer is not the judge's: shown, never remembered
    # (a run's summary would call the judge calibrated).
    failed = [verdict.errors[0] for verdict in verdicts if verdict.errors]
    stored = None if failed else add_judge_calibration(store, {
        "judge_model": engine.model, "prompt_version": engine.prompt_version, "label_set_hash": label_set_hash(cases),
        "n_crag": crag["n"], "kappa_crag": crag["kappa"], "kappa_crag_binary": crag["kappaBinary"],
        "n_faithful": faithful["n"], "kappa_faithful": faithful["kappa"],
        "figures": {key: value for key, value in figures.items() if key != "cases"} | {"stats": engine.stats.as_dict()}})
    if args.json:
        print(json.dumps({"judge": {"model": engine.model, "promptVersion": engine.prompt_version},
                          "labels": {"file": args.labels, "cases": len(cases), "hash": label_set_hash(cases)},
                          "stats": engine.stats.as_dict(), "calibrationId": stored["id"] if stored else None, **figures}, indent=2))
        return _not_remembered(failed, len(cases)) if failed else EXIT_OK

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
        for name, key in (("kappa", "kappaUndefined"), ("binary kappa", "kappaBinaryUndefined")):
            if block.get(key):  # undefined, and why: people's labels of the kind use one category only
                print(f"  {name} undefined: {block[key]}")
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
    if stored is None:
        return _not_remembered(failed, len(cases))
    print(f"remembered as calibration {stored['id']} in {store.path}: the summary of runs judged by "
          f"{engine.model} ({engine.prompt_version}) shows it")
    return EXIT_OK


def _not_remembered(failed: list[str], cases: int) -> int:
    print(f"crucible: the judge failed on {len(failed)} of {cases} labelled case(s) (first: {failed[0]}): this calibration "
          "is not remembered, its figures rest on the cases the judge happened to answer\nHINT: check the judge (its API "
          "key, its address, its rate limits: docs/reliability.md) and run the command again", file=sys.stderr)
    return EXIT_REFUSED


def _cmd_judge_align(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..labels.calibration import read_labels_file

    offline = args.judge in ("lexical", "lexical-v3")
    if not offline and (args.judge.startswith(("lexical", "aligned")) or args.judge == "auto"):
        print(f"crucible: --judge {args.judge}: align the offline judge (lexical, lexical-v3) or a model judge (anthropic, "
              "openai, package.module:Class)\nHINT: crucible judge align LABELS.jsonl --judge lexical -o judges/aligned.json",
              file=sys.stderr)
        return EXIT_USAGE
    if Path(args.output).exists() and not args.force:
        print(f"crucible: {args.output} exists: judge align never overwrites a file\n"
              f"HINT: another -o path, or --force to replace it (runs judged by the old file keep its identity)", file=sys.stderr)
        return EXIT_USAGE
    cases = read_labels_file(args.labels)  # a bad file is one error naming file:line before any fitting
    try:
        from ..judge.select import JudgeSetupError
        from ..labels.alignment import AlignmentRefused, align, report_lines

        if offline:
            document = align(cases, path=args.labels, folds=args.folds, seed=args.seed, only=args.only or ())
        else:  # a model judge: few-shot examples, the cost estimate and --max-cost before any request
            from ..labels.fewshot import align_model_judge

            document = align_model_judge(cases, judge_name=args.judge, model=args.judge_model, path=args.labels,
                                         folds=args.folds, seed=args.seed, only=args.only or (), per_class=args.examples,
                                         max_cost=args.max_cost, say=lambda line: print(f"crucible: {line}", file=sys.stderr))
    except JudgeSetupError as exc:
        print(f"crucible: {str(exc).replace('--crucible-judge=', '--judge ').replace('--crucible-judge-model', '--judge-model')}",
              file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        if exc.name != "sklearn" and not (exc.name or "").startswith("sklearn."):
            raise
        print("crucible: judge align fits with scikit-learn, which is not installed (using an aligned judge needs only numpy)\n"
              "HINT: pip install 'pytest-crucible[align]'", file=sys.stderr)
        return EXIT_USAGE
    except AlignmentRefused as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from ..judge.aligned import artifact_text, read_artifact
    from ..store.files import write_output_file

    write_output_file(args.output, artifact_text(document))
    written = read_artifact(args.output)  # what every run reads back, checked the same way
    judge = f"aligned-{written['contentHash'][:12]}"
    stays = f"the others stay {written['baseJudge']['model']}'s" if offline else "in its prompts as few-shot examples"
    if args.json:
        print(json.dumps({"judge": judge, "file": args.output, "labels": written["labels"], "fit": written["fit"],
                          "cv": {name: q["cv"] for name, q in written["quantities"].items()}}, indent=2))
        return EXIT_OK
    print("\n".join(report_lines(written, args.labels)))
    print(f"\nwrote {args.output}: judge {judge} ({', '.join(written['quantities'])} aligned; {stays})\n"
          f"use it: pytest --crucible-judge=aligned:{args.output}, or crucible judge calibrate OTHER.jsonl --judge aligned:{args.output}")
    return EXIT_OK


def _cmd_judge_labels_export(args: argparse.Namespace) -> int:
    if args.run is not None:
        return _export_run_cases(args)
    from ..labels.calibration import labels_from_corrections

    store = open_store(args)
    corrections, read = _corrections_of_workspace(store, args)
    lines, skipped = labels_from_corrections(corrections)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    note = f" ({skipped} correction(s) without a result skipped)" if skipped else ""
    write_output(args.output, text, f"wrote {len(lines)} labelled case(s) from promoted corrections to {args.output}{note}; "
                                     "check each label, then: crucible judge calibrate " + args.output)
    print(read, file=sys.stderr if args.output == "-" else sys.stdout)
    return EXIT_OK


def _corrections_of_workspace(store, args: argparse.Namespace) -> tuple[list[dict], str]:
    """(the promoted corrections to read, the line saying whose): those of the current project's workspace
    (--workspace NAME: of another), or of every workspace with --all-workspaces. A correction belongs to
    the workspace of the run it corrects: another workspace's key holders wrote the others."""
    from ..store.ledgers import promoted_corrections

    workspace = workspace_of(args, store)
    corrections = promoted_corrections(store, workspace=workspace)
    if workspace is None:
        counts: dict[str, int] = {}
        for row in corrections:
            counts[row["workspace"]] = counts.get(row["workspace"], 0) + 1
        each = ", ".join(f"'{name}' {n}" for name, n in sorted(counts.items())) or "none"
        return corrections, f"promoted corrections read: {len(corrections)}, of every workspace (--all-workspaces): {each}"
    others = len(promoted_corrections(store)) - len(corrections)
    left = f"; {others} of other workspaces left out (--all-workspaces reads them)" if others else ""
    return corrections, f"promoted corrections read: {len(corrections)}, of workspace '{workspace}'{left}"


def _export_run_cases(args: argparse.Namespace) -> int:
    """`--run RUN`: the run's items as cases to label, what its judge saw, its verdicts as the labels to check."""
    from ..labels.calibration import RUN_SKIPS, labels_from_run

    store = open_store(args)
    run_id = resolve_run(store, args, args.run)
    lines, skipped = labels_from_run(store.get_run(run_id), store.results(run_id, decoded=True),
                                     store.golden_items(run_id), store.item_metrics(run_id))
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    note = "; skipped: " + ", ".join(f"{n} item(s) {RUN_SKIPS[reason]}" for reason, n in skipped.items()) if skipped else ""
    write_output(args.output, text, f"wrote {len(lines)} case(s) of run {run_id} to {args.output}{note}\n"
                                     "their labels are the judge's own verdicts: check each one, then: "
                                     f"crucible judge calibrate {args.output}")
    if not lines and skipped.get("no_verdict"):
        print(f"crucible: warning: run {run_id} has no judged answer to label (a component run judges none: run the golden "
              "set in system mode, --crucible-mode=system)", file=sys.stderr)
    return EXIT_OK


def _cmd_judge_labels_import(args: argparse.Namespace) -> int:
    from ..json_input import reviewer_name
    from ..labels.calibration import read_labels_file
    from ..labels.human import answer_hash, label_rows_from_cases, label_rows_from_corrections
    from ..store import Store
    from ..store.ledgers import add_human_labels, stored_answers

    if (args.labels is None) == (not args.from_feedback):
        print("crucible: judge labels import reads a labels file or the promoted corrections (--from-feedback), one of the two\n"
              "HINT: crucible judge labels import LABELS.jsonl, or crucible judge labels import --from-feedback", file=sys.stderr)
        return EXIT_USAGE
    if args.labels is not None and (args.workspace or args.all_workspaces):
        print(f"crucible: {'--workspace' if args.workspace else '--all-workspaces'} chooses whose promoted corrections "
              "--from-feedback reads; a labels file is yours as it is\n"
              "HINT: crucible judge labels import --from-feedback --all-workspaces, or drop the flag", file=sys.stderr)
        return EXIT_USAGE
    if args.by is not None:
        try:
            args.by = reviewer_name(args.by)
        except ValueError as exc:
            print(f"crucible: --by: {exc}\nHINT: --by NAME, the person who labelled", file=sys.stderr)
            return EXIT_USAGE
    skipped, read = 0, None
    if args.labels is not None:
        # A bad file is one error naming file:line before the database is touched.
        rows = label_rows_from_cases(read_labels_file(args.labels), source="import", created_by=args.by, note=args.note)
        store = Store.open(args.db)
    else:
        store = open_store(args)  # the corrections live in an existing database
        corrections, read = _corrections_of_workspace(store, args)
        rows, skipped = label_rows_from_corrections(corrections, created_by=args.by)
    added = add_human_labels(store, rows)
    answers = {(row["item_id"], row["answer_hash"]) for row in rows}
    if read is not None:
        print(read)
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


def add_judge(sub) -> None:
    judge = sub.add_parser("judge", help="the judge: calibrate it against human labels, export labels from reviews")
    judge_sub = judge.add_subparsers(dest="judge_command", required=True, metavar="ACTION")
    calibrate = with_db(judge_sub.add_parser(
        "calibrate", help="run human-labelled cases through the judge; accuracy, Cohen's kappa, confusion, disagreements"))
    calibrate.add_argument("labels", metavar="LABELS.jsonl",
                           help="one labelled case per line: id, question, contexts, answer, reference, "
                                "optionally assertions, answerable, questionType, and labels {crag, faithful} "
                                "(docs/judge-calibration.md)")
    calibrate.add_argument("--judge", default="lexical", metavar="JUDGE",
                           help="lexical: the offline judge, lexical-v3 (default); lexical-v2, lexical-v1: the earlier "
                                "offline judges; anthropic: Claude (needs ANTHROPIC_API_KEY); openai: an OpenAI-compatible "
                                "model (OPENAI_API_KEY, OPENAI_BASE_URL, --judge-model); aligned:FILE: the offline judge "
                                "aligned to your labels (crucible judge align); package.module:ClassName: a judge of your own")
    calibrate.add_argument("--judge-model", dest="judge_model", default=None, metavar="M",
                           help="the model with --judge anthropic (default: the plugin's default judge model) or "
                                "--judge openai (required)")
    calibrate.add_argument("--json", action="store_true",
                           help="print JSON: judge, crag and faithful (n, accuracy, kappa, confusion), cases")
    calibrate.set_defaults(func=_cmd_judge_calibrate)
    aligner = judge_sub.add_parser(
        "align", help="fit the offline judge to human labels (per quantity: crag, faithful); print its cross-validated "
                      "agreement beside the unaligned judge's; write the aligned judge as a JSON file")
    aligner.add_argument("labels", metavar="LABELS.jsonl", help="the labels file `crucible judge calibrate` reads "
                                                                 "(docs/judge-calibration.md): at least 30 labels of a quantity")
    aligner.add_argument("--judge", default="lexical", metavar="JUDGE",
                         help="the judge to align: lexical (the offline judge, lexical-v3, the default: fitted models), or "
                              "a model judge, anthropic, openai or package.module:Class (few-shot examples from the labels)")
    aligner.add_argument("--judge-model", dest="judge_model", default=None, metavar="M",
                         help="the model of a model judge (--judge openai: required)")
    aligner.add_argument("--examples", type=at_least(1), default=2, metavar="N",
                         help="a model judge: examples of each class in its prompt (default 2)")
    aligner.add_argument("--max-cost", dest="max_cost", type=float, default=None, metavar="USD",
                         help="a model judge: refuse before any request when the estimated cost exceeds USD")
    aligner.add_argument("-o", "--output", required=True, metavar="FILE", help="the aligned judge, a JSON file (e.g. judges/aligned.json)")
    aligner.add_argument("--force", action="store_true", help="replace -o FILE when it exists")
    aligner.add_argument("--folds", type=at_least(2), default=5, metavar="K", help="stratified cross-validation folds (default 5)")
    aligner.add_argument("--seed", type=at_least(0), default=None, metavar="N",
                         help=f"the seed of the folds and of the bootstrap (default: the plugin's, {DEFAULT_SEED})")
    aligner.add_argument("--only", action="append", choices=["crag", "faithful"], default=None,
                         help="align this quantity alone (repeatable; default: every quantity the labels cover)")
    aligner.add_argument("--json", action="store_true", help="print the judge, the file and the CV figures as JSON")
    aligner.set_defaults(func=_cmd_judge_align)
    judge_labels = judge_sub.add_parser("labels", help="labels files for `crucible judge calibrate`; the labels ledger PPI++ reads")
    judge_labels_sub = judge_labels.add_subparsers(dest="judge_labels_command", required=True, metavar="ACTION")
    labels_export = with_db(judge_labels_sub.add_parser(
        "export", help="write a labels file to start from: the promoted corrections of the database, or a run's items "
                       "(--run) with what its judge saw and its verdicts to check"))
    labels_export.add_argument("-o", "--output", required=True, help="a .jsonl file, or - for stdout")
    labels_export.add_argument("--run", default=None, metavar="RUN",
                               help="instead of the corrections: this run's items (run id, unique prefix, or latest), each "
                                    "with its question, retrieved texts, answer, reference, assertions and answerable, "
                                    "labelled with the judge's own verdicts for you to check")
    add_workspace_flag(labels_export)
    labels_export.add_argument("--all-workspaces", dest="all_workspaces", action="store_true",
                               help="the promoted corrections of every workspace (default: the current project's "
                                    "workspace's; --workspace NAME: another's)")
    labels_export.set_defaults(func=_cmd_judge_labels_export)
    labels_import = with_db(judge_labels_sub.add_parser(
        "import", help="append human labels of answers to the database's append-only ledger (what `compare --ppi` and "
                       "the run summary correct the judge's bias with)"))
    labels_import.add_argument("labels", nargs="?", default=None, metavar="LABELS.jsonl",
                               help="a labels file (the `crucible judge calibrate` format); each case labels the answer "
                                    "`answer` of the golden item `itemId`, else of the golden item whose id is `id`")
    labels_import.add_argument("--from-feedback", dest="from_feedback", action="store_true",
                               help="instead of a file: the labels of the current project's workspace's promoted "
                                    "corrections (as `crucible judge labels export` writes them; source feedback), each "
                                    "authored by the API key that promoted it (key:<id>; the claimed reviewer is noted)")
    labels_import.add_argument("--workspace", default=None, metavar="NAME",
                               help="with --from-feedback: the corrections of this workspace (default: the current "
                                    "project's: CRUCIBLE_WORKSPACE, ini crucible_workspace, else the project directory's name)")
    labels_import.add_argument("--all-workspaces", dest="all_workspaces", action="store_true",
                               help="with --from-feedback: the corrections of every workspace (says which it read)")
    labels_import.add_argument("--by", default=None, metavar="NAME",
                               help="who labelled (kept with every label; with --from-feedback, of the corrections "
                                    "promoted from the command line without --by)")
    labels_import.add_argument("--note", default=None, metavar="TEXT", help="a note stamped on every imported label")
    labels_import.set_defaults(func=_cmd_judge_labels_import)
