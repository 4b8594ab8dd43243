"""`crucible golden generate|review|accept|reject|export`, `crucible promote` and `crucible schema golden`:
golden items drafted, reviewed, promoted from reviews, and their JSON Schema."""

from __future__ import annotations

import argparse
import json
import sys

from ..defaults import DEFAULT_SEED
from .common import EXIT_OK, EXIT_USAGE, add_workspace_flag, at_least, open_store, with_db, workspace_of, write_output
from .golden_io import add_golden_io

EXAMPLES: dict[str, str] = {
    "schema": "crucible schema golden > golden.schema.json",
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
}


def _cmd_schema(args: argparse.Namespace) -> int:
    from ..golden_set.schema import golden_json_schema

    print(json.dumps(golden_json_schema(), indent=2))
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..golden_set.promote import promote

    if args.json:
        try:
            text = sys.stdin.read() if args.json == "-" else Path(args.json).read_text(encoding="utf-8-sig")
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
    store = open_store(args)
    print(json.dumps(promote(store, body, source=source), indent=2))
    return 0


def _cmd_golden_export(args: argparse.Namespace) -> int:
    from ..golden_set.promote import draft_items

    store = open_store(args)
    workspace = workspace_of(args, store)  # drafts belong to their run's workspace (the message below names it)
    items = draft_items(store, workspace=workspace)
    text = "".join(json.dumps(item, sort_keys=True) + "\n" for item in items)
    of = "" if workspace is None else f" of workspace '{workspace}'"
    write_output(args.output, text, f"wrote {len(items)} draft golden item(s){of} to {args.output}; "
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
        change = set_status(args.file, args.ids, args.new_status, every_draft=args.every_draft)
    except ReviewError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in change.notes:
        print(f"crucible: note: {note}", file=sys.stderr)
    print(change.summary())
    return EXIT_OK


def _cmd_golden_generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..golden_set.corpus import CorpusError, load_corpus
    from ..golden_set.generate import (
        GenerateError,
        chunking_note,
        default_against,
        estimate_requests,
        finish_drafts,
        generate_items,
        items_jsonl,
        parse_mix,
        plan_generation,
        questions_of_golden_files,
    )
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
        if output is not None and appending and output.resolve() not in {Path(path).resolve() for path in against}:
            against.append(output)
        existing = questions_of_golden_files(against)
        if args.generator != "lexical":
            plan, notes = plan_generation(chunks, args.n, mix, seed=args.seed)
    except (CorpusError, GenerateError, GoldenFileError) as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    docs = len({chunk.doc_id for chunk in chunks})
    print(f"corpus {args.corpus}: {len(chunks)} chunk(s) of {docs} document(s); "
          f"{len(existing)} existing question(s) from {len(against)} golden file(s) to avoid", file=info)
    note = chunking_note(args.corpus, chunks)  # citations of crucible's chunks, not of the pipeline's
    if note:
        print(note, file=info)
    if args.generator == "lexical":
        try:
            from ..golden_set.lexical import lexical_drafts
        except ImportError:
            print("crucible: the offline lexical generator is not installed in this version\n"
                  "HINT: use --generator anthropic (needs ANTHROPIC_API_KEY)", file=sys.stderr)
            return EXIT_USAGE
        report = finish_drafts(lexical_drafts(chunks, args.n, seed=args.seed), existing)
    else:
        from ..judge.engine import JudgeEngine
        from ..judge.select import JudgeSetupError, make_judge, read_cache_rows
        from ..store import Store

        try:
            judge = make_judge(args.generator, model=args.judge_model, batch=args.batch)
        except JudgeSetupError as exc:
            # The judge's own words, in this command's options; the offline way out is the lexical generator.
            first, _, hint = str(exc).replace("--crucible-judge-model", "--judge-model").partition("\n")
            hint = hint.removeprefix("HINT: ").split(", or use the offline judge")[0]
            print(f"crucible: {first.replace('--crucible-judge=', '--generator ')}\n"
                  f"HINT: {hint + ', or ' if hint else ''}draft items offline with --generator lexical", file=sys.stderr)
            return EXIT_USAGE
        if not judge.grades_rubrics:  # an offline heuristic cannot write questions
            print(f"crucible: --generator {args.generator}: {judge.label} cannot write test cases\n"
                  "HINT: --generator anthropic or openai (a model), or lexical for offline drafts", file=sys.stderr)
            return EXIT_USAGE
        from ..judge.model_judge import ModelJudge

        assert isinstance(judge, ModelJudge)  # the one kind of built-in judge that grades rubrics (checked above)
        engine = JudgeEngine(judge, cache_mode="readwrite")
        engine.load_cache(read_cache_rows(args.db, engine.model))  # read only: nothing is written before a refusal
        uncached = [p for p in plan
                    if p.request.cache_key(engine.model, judge.prompt_version_for(p.request.kind)) not in engine.cache]
        checks = estimate_requests(uncached, chunks)
        estimate = judge.estimate_usd([*(p.request for p in uncached), *checks])
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
    if output is not None and appending:
        text = output.read_bytes()
        ends_with_newline = not text or text.endswith(b"\n")
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(("" if ends_with_newline else "\n") + items_jsonl(report.items))
        print(f"added {len(report.items)} draft item(s) to {args.output} (its earlier lines are unchanged); "
              f"review each one: crucible golden review {args.output}", file=info)
        return EXIT_OK
    write_output(args.output, items_jsonl(report.items),
                  f"wrote {len(report.items)} draft item(s) to {args.output}; review each one: crucible golden review {args.output}")
    return EXIT_OK


def add_schema(sub) -> None:
    schema = sub.add_parser("schema", help="print the JSON Schema of a file format")
    schema.add_argument("kind", choices=["golden"], help="golden: one golden item (for editor validation)")
    schema.set_defaults(func=_cmd_schema)


def add_promote(sub) -> None:
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


def add_golden(sub) -> None:
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
    golden_generate.add_argument("--n", type=at_least(1), default=20, metavar="N", help="items to generate (default 20)")
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
    golden_generate.add_argument("--generator", default="anthropic", metavar="GENERATOR",
                                 help="anthropic: Claude writes and checks the items (needs ANTHROPIC_API_KEY, default); "
                                      "openai: any OpenAI-compatible model (OPENAI_API_KEY, OPENAI_BASE_URL, --judge-model; "
                                      "the openai extra); package.module:ClassName: a judge of your own that answers "
                                      "generate requests; lexical: offline drafts from the text itself")
    golden_generate.add_argument("--judge-model", dest="judge_model", default=None, metavar="M",
                                 help="the model: a Claude model (default the judge's default model), or the model an "
                                      "OpenAI-compatible server serves (required with --generator openai)")
    golden_generate.add_argument("--batch", action="store_true", help="send the requests as Message Batches (50%% off, slower)")
    golden_generate.add_argument("--max-cost", dest="max_cost", type=at_least(0, float), default=None, metavar="USD",
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
        command.add_argument("ids", nargs="*", metavar="ID",
                             help="the items' ids (a golden conversation's id, or one of its turns': its status is one)")
        command.add_argument("--all", dest="every_draft", action="store_true",
                             help=f"{action} every draft of the file (e.g. after a reviewed `crucible golden import`)")
        command.set_defaults(func=_cmd_golden_status, new_status=status)
    add_golden_io(golden_sub)
    add_workspace_flag(golden_export)
