"""What every `crucible` command shares: the exit codes, the house style of usage errors, the
`--db` and `--workspace` flags, and how a run named on the command line is found."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from ..defaults import DEFAULT_DB

# Exit codes: 0 done, 1 a failed gate (a significant regression, a missed floor), 2 a usage
# error (argparse's own, or bad input: one line saying what is wrong, then a HINT line),
# 3 a comparison the gate refused (different judges, an incomplete run): gate.EXIT_CODES;
# `crucible merge` also exits 3 when the merged run is not complete (a shard was killed).
EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3


class CrucibleParser(argparse.ArgumentParser):
    """argparse with the house style of errors: what is wrong, then a HINT; exit 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\nHINT: `{self.prog} --help` lists the options, with an example\n")


def with_db(cmd: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `--db` flag of a command that reads or writes the results database."""
    cmd.add_argument("--db", default=None, metavar="PATH|URL",
                     help="the results database, a SQLite file or a PostgreSQL URL (default: CRUCIBLE_DB, else the one "
                          f"the plugin writes: ini crucible_db, else {DEFAULT_DB}, "
                          "under pytest's rootdir, the nearest directory up from here whose pytest.ini, pyproject.toml, "
                          f"tox.ini or setup.cfg configures pytest; without one, {DEFAULT_DB} here)")
    return cmd


def add_workspace_flag(cmd: argparse.ArgumentParser) -> None:
    """Reading commands read the current project's workspace; --workspace reads another."""
    cmd.add_argument("--workspace", default=None, metavar="NAME",
                     help="workspace whose runs are listed and whose newest run is `latest` (default: the current "
                          "project's: CRUCIBLE_WORKSPACE, ini crucible_workspace, else the project directory's name)")


def open_store(args: argparse.Namespace):
    from ..store import Store

    return Store.open(args.db, create=False)


def workspace_of(args: argparse.Namespace, store, *, announce: bool = False) -> str | None:
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


def _reading_workspace(store, args: argparse.Namespace, ref: str) -> str | None:
    """The workspace a `latest` reference reads when it names none: the one being read."""
    from ..verdict.runs import parse_run_ref

    parsed = parse_run_ref(ref)
    return workspace_of(args, store) if parsed.latest and parsed.workspace is None else None


def resolve_run(store, args: argparse.Namespace, ref: str, **options) -> str:
    """A run named on the command line (`verdict.runs.resolve_run_ref`): ids and prefixes in any
    workspace (the file is the user's own), `latest` and `latest:KEY=VALUE,...` in the workspace being read."""
    from ..verdict.runs import resolve_run_ref

    return resolve_run_ref(store, ref, workspace=_reading_workspace(store, args, ref), **options)


def read_run_ref(store, args: argparse.Namespace, ref: str, **options):
    """A run named on the command line: an exported .json, an id or prefix (any workspace), or
    `latest` / `latest:KEY=VALUE,...` (of the workspace being read)."""
    from ..verdict.runs import is_export_path, read_run

    workspace = None if is_export_path(ref) else _reading_workspace(store, args, ref)
    return read_run(ref, store, workspace=workspace, **options)


def write_output(output: str, text: str, message: str) -> None:
    """Write ``text`` to stdout when ``output`` is ``-``, else to the file, and say so."""
    from ..store.files import write_output_file

    if output == "-":
        sys.stdout.write(text)
    else:
        write_output_file(output, text)
        print(message)


def write_text(output: str, text: str) -> None:
    from ..qrels.formats import QrelsFormatError
    from ..store.files import write_output_file

    if output == "-":
        sys.stdout.write(text)
        return
    try:
        write_output_file(output, text)
    except OSError as exc:
        raise QrelsFormatError(output, None, None, f"cannot write: {exc.strerror or exc}", "check the -o path") from None


def at_least(minimum: float, kind: type = int):
    """An argparse type: a number of ``kind`` no smaller than ``minimum``."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected at least {minimum:g}, got {text}")
        return value
    return parse
