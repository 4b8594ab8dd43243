"""The ``crucible`` command: a thin door onto the same functions the plugin uses.

This module only assembles the parser and dispatches. Each command group lives in a module of its
own that owns its parsers and handlers: ``runs`` (runs, show, metrics, trend), ``compare`` (compare,
report), ``transfer`` (export, import, merge), ``golden`` (golden ..., promote, schema), ``qrels``
(qrels ..., trec-eval), ``judge`` (judge calibrate, judge align, judge labels ...), ``serve`` (serve, keys ...)
and ``ablate``. A handler imports what it needs inside its function: ``crucible --help`` loads no
numpy, no pydantic and no store.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import ablate, compare, golden, golden_io, judge, qrels, runs, serve, transfer
from .common import EXIT_OK, EXIT_USAGE, CrucibleParser

# Every command, in the order `crucible --help` lists them.
COMMANDS = (golden.add_schema, qrels.add_trec, runs.add_runs, runs.add_show, runs.add_metrics, runs.add_trend, compare.add_compare,
            transfer.add_export, compare.add_report, golden.add_promote, golden.add_golden, transfer.add_import,
            transfer.add_merge, transfer.add_copy, qrels.add_qrels, judge.add_judge, ablate.add_ablate, serve.add_serve, serve.add_keys)

# The example at the end of every command's --help, keyed by the command path ("" is `crucible`
# itself, "qrels override" a nested command). A command without one fails tests/test_cli.py: add
# its entry to the EXAMPLES of the module that defines the command.
EXAMPLES: dict[str, str] = {
    "": "crucible runs\n"
        "crucible metrics latest --json\n"
        "crucible compare baselines/main.json latest        # exit 1 on a significant regression",
    **runs.EXAMPLES, **compare.EXAMPLES, **transfer.EXAMPLES, **golden.EXAMPLES, **golden_io.EXAMPLES, **qrels.EXAMPLES, **judge.EXAMPLES,
    **serve.EXAMPLES, **ablate.EXAMPLES,
}


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


def build_parser() -> argparse.ArgumentParser:
    parser = CrucibleParser(prog="crucible", description=(
        "Read and compare pytest-crucible evaluation runs.\n\n"
        "exit status: 0 done; 1 a failed gate (compare: a significant regression or a missed floor); 2 a usage error\n"
        "(what is wrong, then a HINT); 3 a refused comparison (different judges, an incomplete or failed run, too few pairs)"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(sub)
    _add_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..qrels.formats import QrelsFormatError
    from ..store import StoreError
    from ..store.files import FileModeError

    args = build_parser().parse_args(argv)
    if "db" in vars(args) and args.db is None:
        from ..workspace import default_db

        args.db = str(default_db())  # the project's database, found from the current directory
    try:
        return args.func(args)
    except (StoreError, QrelsFormatError, FileModeError) as exc:
        print(f"crucible: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file named on the command line that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"crucible: {where}{exc.strerror or exc}\nHINT: check the path (an output cannot go under a file, or where you cannot write)", file=sys.stderr)
        return EXIT_USAGE


