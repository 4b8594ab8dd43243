"""`crucible golden import / convert / check / diff`: a team's existing evaluation data brought in, written back out
in its tool's format, golden files checked whole (and against a corpus), and two versions of a golden set compared. The work is in ``golden_set/imports.py``,
``golden_set/convert.py`` and ``golden_set/diff.py``; the commands read arguments, own the database (the
qrels ledger a benchmark's judgments are appended to) and print."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_USAGE, add_workspace_flag, open_store, with_db

EXAMPLES: dict[str, str] = {
    "golden import": "crucible golden import testset.jsonl --from ragas --corpus chunks.jsonl -o golden/golden_imported.jsonl\n"
                     "crucible golden import goldens.json --from deepeval --corpus docs/ -o golden/golden_deepeval.jsonl\n"
                     "crucible golden import promptfooconfig.yaml --from promptfoo -o golden/golden_promptfoo.jsonl\n"
                     "crucible golden import dataset.jsonl --from langsmith --map question=inputs.query "
                     "reference=outputs.answer -o golden/golden_ls.jsonl\n"
                     "crucible golden import scifact/ --from beir --split test -o golden/golden_scifact.jsonl\n"
                     "crucible golden import topics.txt --from trec --qrels qrels.txt -o golden/golden_trec.jsonl\n"
                     "crucible golden import sheet.csv --from csv --map question=Question reference=Answer id=ID "
                     "-o golden/golden_sheet.jsonl",
    "golden convert": "crucible golden convert golden/golden.jsonl --to ragas -o testset.jsonl --corpus chunks.jsonl\n"
                      "crucible golden convert golden/golden.jsonl --to beir -o beir-export/ --corpus chunks.jsonl",
    "golden check": "crucible golden check golden/*.jsonl\n"
                    "crucible golden check golden/golden_support.jsonl --corpus chunks.jsonl   # every citation against the chunks",
    "golden diff": "crucible golden diff golden/golden.jsonl golden/golden.new.jsonl\n"
                   "crucible golden diff latest golden/golden.jsonl   # what changed since the newest run\n"
                   "crucible golden diff 01J9Z3KQ8W 01JA0B2C3D --json",
}


def _usage(problem: str, hint: str) -> int:
    print(f"crucible: {problem}\nHINT: {hint}", file=sys.stderr)
    return EXIT_USAGE


def _mapping(pairs: list[str]) -> dict[str, str] | str:
    """--map KEY=FIELD ... as a dict, or the problem."""
    from ..golden_set.sources import MAP_KEYS

    mapping: dict[str, str] = {}
    for pair in pairs:
        key, equals, name = pair.partition("=")
        if not equals or not name.strip():
            return f"--map {pair!r}: expected KEY=FIELD, e.g. question=Question"
        if key not in MAP_KEYS:
            return f"--map {pair!r}: unknown key {key!r}; the keys are {', '.join(MAP_KEYS)}"
        mapping[key] = name.strip()
    return mapping


def _cmd_golden_import(args: argparse.Namespace) -> int:
    from ..golden_set.corpus import CorpusError
    from ..golden_set.imports import ImportFailed, ImportRequest, import_golden
    from ..golden_set.schema import GoldenFileError
    from ..json_input import reviewer_name

    mapping = _mapping(args.map or [])
    if isinstance(mapping, str):
        return _usage(mapping, "--map question=COLUMN reference=COLUMN contexts=COLUMN id=COLUMN kind=COLUMN tags=COLUMN")
    source, output = Path(args.path), Path(args.output)
    if not source.exists():
        return _usage(f"{source}: no such file or folder", "the first argument is the file (or BEIR folder) to import")
    if args.fmt == "trec" and not args.qrels:
        return _usage("--from trec needs --qrels FILE", "a TREC import reads the topics file and its qrels: --qrels qrels.txt")
    if args.qrels and args.fmt != "trec":
        return _usage(f"--qrels is read with --from trec only (--from {args.fmt} carries its judgments itself, if any)",
                      "drop --qrels; `crucible qrels import FILE` appends judgments to the ledger")
    if args.split is not None and args.fmt not in ("beir", "langsmith"):
        return _usage(f"--split chooses a BEIR qrels split or a LangSmith dataset split, not a part of a {args.fmt} file",
                      "drop --split")
    if args.corpus and args.fmt in ("beir", "trec"):
        return _usage(f"--corpus is not read with --from {args.fmt}: its judgments name the documents",
                      "drop --corpus")
    if output.exists() and not args.force:
        return _usage(f"{output} exists: the import would replace it", "--force replaces it, or -o names a new file")
    if output.resolve() == source.resolve():
        return _usage(f"-o {output} is the file being imported", "-o names a new file")
    try:
        by = reviewer_name(args.by or f"{args.fmt}-import")
    except ValueError as exc:
        return _usage(f"--by {exc}", "--by names who made the judgments (a team, or a benchmark)")
    request = ImportRequest(source, args.fmt, output, corpus=Path(args.corpus) if args.corpus else None, mapping=mapping,
                            split=args.split, accept=args.accept, skip_invalid=args.skip_invalid, force=args.force,
                            qrels=Path(args.qrels) if args.qrels else None, by=by)
    append = None
    if args.fmt in ("beir", "trec") and not args.no_ledger:
        from ..store import Store

        append = Store.open(args.db).append_qrels
    try:
        report = import_golden(request, append)
    except ImportFailed as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (GoldenFileError, CorpusError) as exc:
        print(f"crucible: {exc}\nnothing was imported", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(report.lines()))
    return EXIT_OK


def _read_items(path: str) -> list[dict]:
    from ..golden_set.schema import load_golden_file

    return [item.to_json() for item in load_golden_file(path)]


def _cmd_golden_convert(args: argparse.Namespace) -> int:
    from ..golden_set.convert import convert_golden
    from ..golden_set.corpus import CorpusError, load_corpus
    from ..golden_set.schema import GoldenFileError

    output = Path(args.output)
    if output.exists() and not args.force and (output.is_file() or any(output.iterdir())):
        return _usage(f"{output} exists: converting would replace what it holds", "--force replaces it, or -o names a new path")
    if args.to == "beir" and output.is_file():
        return _usage(f"{output} is a file: --to beir writes a folder", "-o names a folder")
    try:
        items = _read_items(args.file)
        chunks = load_corpus(args.corpus) if args.corpus else []
    except (GoldenFileError, CorpusError) as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    report = convert_golden(items, args.to, output, chunks=chunks, split=args.split)
    print("\n".join(report.lines()))
    return EXIT_OK


def _golden_of(args: argparse.Namespace, name: str) -> tuple[list[dict], str]:
    """The items of a golden file, or of a stored run (an id, a prefix, latest), and how to name them."""
    from ..golden_set.schema import GoldenFileError, GoldenItem
    from .common import resolve_run

    if Path(name).is_file():
        return _read_items(name), name
    if Path(name).suffix.lower() in (".jsonl", ".json", ".yaml", ".yml") or "/" in name:
        raise GoldenFileError(name, None, None, "no such golden file", "name a golden file, or a run: an id, a prefix, latest")
    store = open_store(args)
    run_id = resolve_run(store, args, name)
    items = []
    for stored in store.golden_items(run_id):
        try:  # the defaults a file leaves out, filled in as for a file's items
            items.append(GoldenItem.model_validate(stored).to_json())
        except ValueError:
            items.append(stored)
    return items, f"run {run_id}"


def _cmd_golden_diff(args: argparse.Namespace) -> int:
    from ..golden_set.diff import diff_golden, render_diff
    from ..golden_set.schema import GoldenFileError

    try:
        before, name_a = _golden_of(args, args.a)
        after, name_b = _golden_of(args, args.b)
    except GoldenFileError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    diff = diff_golden(before, after)
    if args.json:
        print(json.dumps({"a": name_a, "b": name_b, **diff.to_json()}, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_diff(diff, name_a, name_b))
    return EXIT_OK if diff.equal else 1


def _cmd_golden_check(args: argparse.Namespace) -> int:
    from ..golden_set.check import check_golden_files
    from ..golden_set.corpus import CorpusError, load_corpus

    missing = [name for name in args.files if not Path(name).is_file()]
    if missing:
        return _usage(f"{missing[0]}: no such golden file", "name golden files (.jsonl, .json, .yaml)")
    try:
        chunks = load_corpus(args.corpus) if args.corpus else None
    except CorpusError as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    report = check_golden_files(args.files, chunks)
    for problem in report.problems:
        print(problem)
    against = f", {report.citations} citation(s) checked against {args.corpus}" if args.corpus else ""
    verdict = "no problem" if report.ok else f"{len(report.problems)} problem(s)"
    print(f"{verdict} in {report.files} golden file(s), {report.items} valid item(s){against}")
    return EXIT_OK if report.ok else 1


def add_golden_io(golden_sub) -> None:
    """`import`, `convert` and `diff` under `crucible golden`."""
    from ..golden_set.convert import TARGETS
    from ..golden_set.imports import FORMATS

    command = with_db(golden_sub.add_parser(
        "import", help="another tool's evaluation data (ragas, DeepEval, promptfoo, LangSmith, BEIR, TREC, a table) as draft golden items"))
    command.add_argument("path", help="the file to import (for --from beir: the dataset's folder)")
    command.add_argument("--from", dest="fmt", required=True, choices=FORMATS, help="the format the file is in")
    command.add_argument("-o", "--output", required=True, metavar="FILE", help="the golden file to write (.jsonl)")
    command.add_argument("--corpus", default=None, metavar="PATH",
                         help="a corpus folder or chunks .jsonl: reference passages given as text are matched to its chunks "
                              "and become citations (without it, such items have no citations)")
    command.add_argument("--map", nargs="+", default=None, metavar="KEY=FIELD",
                         help="where a value is: question, reference, contexts, context_ids, id, kind, tags "
                              "(a column, or a dotted path like inputs.query)")
    command.add_argument("--split", default=None, metavar="NAME",
                         help="beir: the qrels split (default test); langsmith: keep the examples of this dataset split")
    command.add_argument("--qrels", default=None, metavar="FILE", help="--from trec: the TREC qrels file of the topics")
    command.add_argument("--by", default=None, metavar="NAME",
                         help="beir/trec: who made the judgments, as the qrels ledger records them (default FORMAT-import)")
    command.add_argument("--no-ledger", dest="no_ledger", action="store_true",
                         help="beir/trec: write the items only, not the judgments to the qrels ledger")
    command.add_argument("--accept", action="store_true",
                         help="write the items active (they run) instead of draft; an item whose passage matched no chunk stays a draft")
    command.add_argument("--skip-invalid", dest="skip_invalid", action="store_true",
                         help="import the valid records and count the others (default: a record with a problem imports nothing)")
    command.add_argument("--force", action="store_true", help="replace the output file if it exists")
    command.set_defaults(func=_cmd_golden_import)

    convert = golden_sub.add_parser("convert", help="write a golden file in another tool's format (ragas, DeepEval, LangSmith, BEIR)")
    convert.add_argument("file", help="a golden file (.jsonl, .json or .yaml)")
    convert.add_argument("--to", required=True, choices=TARGETS, help="the format to write")
    convert.add_argument("-o", "--output", required=True, metavar="PATH",
                         help="the file to write (.jsonl, .json; deepeval also .csv); for --to beir a folder")
    convert.add_argument("--corpus", default=None, metavar="PATH",
                         help="the corpus the citations name: its chunks' text becomes the reference contexts (and BEIR's corpus.jsonl)")
    convert.add_argument("--split", default="test", metavar="NAME", help="--to beir: the qrels split to write (default test)")
    convert.add_argument("--force", action="store_true", help="replace what the output holds")
    convert.set_defaults(func=_cmd_golden_convert)

    check = golden_sub.add_parser("check", help="validate golden files without running them: every problem at once; "
                                                  "with --corpus, every citation against the corpus (exit 1 on a problem)")
    check.add_argument("files", nargs="+", metavar="FILE", help="golden files (.jsonl, .json, .yaml)")
    check.add_argument("--corpus", default=None, metavar="PATH",
                       help="a corpus folder or chunks .jsonl: every cited chunk and document must exist, a chunk under its own docId")
    check.set_defaults(func=_cmd_golden_check)

    diff = with_db(golden_sub.add_parser(
        "diff", help="added, removed and changed items of two golden sets (files or runs); exit 0 equal, 1 different"))
    diff.add_argument("a", help="a golden file, or a run (an id, a prefix, latest)")
    diff.add_argument("b", help="a golden file, or a run")
    diff.add_argument("--json", action="store_true", help="the differences as JSON")
    add_workspace_flag(diff)
    diff.set_defaults(func=_cmd_golden_diff)
