"""Where a session's verdict goes besides the terminal: a Markdown file (``--crucible-markdown``), the GitHub
Actions step summary and annotations, and an MLflow tracking server (``--crucible-mlflow``).

Called once at the end of a session, by the process that owns the run (the controller under xdist), after
junit XML and the HTML report are written. Each output is a copy of what the store holds: one that cannot be
written is a warning in the summary, never a changed verdict or exit code.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import github

if TYPE_CHECKING:
    import pytest

    from ..session import CrucibleSession


@dataclass
class Published:
    commands: list[str] = field(default_factory=list)  # workflow commands, printed as they are
    warnings: list[str] = field(default_factory=list)  # shown in the summary, each as an alert


def session_markdown(session: CrucibleSession) -> str:
    """The session's verdict in Markdown: the gate's comparison, else the run's summary, else its faults."""
    from .markdown import marker_line, run_markdown, stored_gate_markdown, text

    workspace = session.settings.workspace
    store = session.store if session.run_id is not None and session.status is not None else None
    if session.gate is not None:
        document = stored_gate_markdown(store, session.gate, workspace=workspace)
    elif store is not None and session.run_id is not None:
        document = run_markdown(store, session.run_id, workspace=workspace)
    else:
        document = "\n".join([marker_line(workspace), "**crucible: no run was recorded**", ""])
    if session.faults:
        document += "\n**Faults** (each fails the session)\n\n" + "".join(f"- {text(fault)}\n" for fault in session.faults)
    return document


def _golden_location(path: str | None, line: Any, rootdir: Path, environ: Mapping[str, str]) -> tuple[str | None, int | None]:
    """A golden item's file as GitHub resolves it (relative to the checkout, GITHUB_WORKSPACE), and its line."""
    if not path:
        return None, None
    where = (rootdir / path).resolve()
    checkout = environ.get("GITHUB_WORKSPACE")
    if checkout:
        with contextlib.suppress(ValueError):  # outside the checkout: the absolute path
            where = where.relative_to(Path(checkout).resolve())
    return str(where), int(line) if isinstance(line, int) else None


def item_annotations(session: CrucibleSession, environ: Mapping[str, str]) -> list[str]:
    """One error per item that failed its checks, pointing at the item's line in its golden file."""
    if session.run_id is None or session.status is None:
        return []
    out = []
    for row in session.store.failed_items(session.run_id):
        message = "; ".join(row["failures"]) or row["error"] or "failed"
        file, line = _golden_location(row["source"], row["line"], session.settings.rootdir, environ)
        out.append(github.item_annotation(str(row["item_id"]), message, file=file, line=line))
    return out


def publish(session: CrucibleSession, environ: Mapping[str, str], *, markdown_path: str | None, step_summary: bool,
            mlflow: bool, junit: str | None, html: str | None) -> Published:
    """Write the session's outputs beyond the terminal; what could not be written comes back as warnings."""
    done = Published()
    if session.is_worker:
        return done
    in_actions = step_summary and github.in_github_actions(environ)
    summary_path = environ.get("GITHUB_STEP_SUMMARY") if in_actions else None
    document = session_markdown(session) if markdown_path or summary_path else ""
    if markdown_path:
        from ..store.files import write_output_file

        try:
            write_output_file(markdown_path, document)
        except OSError as exc:
            done.warnings.append(f"could not write the Markdown verdict to {markdown_path}: {exc.strerror or exc}")
    if summary_path:
        warning = github.append_step_summary(summary_path, document)
        if warning:
            done.warnings.append(warning)
    if in_actions:
        if session.gate is not None:
            done.commands.extend(github.gate_annotations(session.gate))
        done.commands.extend(github.fault_annotation(fault) for fault in session.faults)
        try:
            done.commands.extend(item_annotations(session, environ))
        except Exception as exc:  # the annotations are a view; the run and its verdict stand
            done.warnings.append(f"could not read the failed items for their annotations: {type(exc).__name__}: {exc}")
    if mlflow and session.run_id is not None and session.status is not None:
        from .tracking import log_run

        warning = log_run(session.store, session.run_id, session.gate, junit=junit, html=html)
        if warning:
            done.warnings.append(warning)
    return done


def publish_session(config: pytest.Config, crucible: CrucibleSession) -> Published:
    """:func:`publish` with the session's options (the plugin calls it once, in its terminal summary)."""
    from ..options import wants_mlflow
    from .junit import junit_path

    return publish(crucible, os.environ, markdown_path=config.getoption("crucible_markdown"), junit=junit_path(config),
                   step_summary=bool(config.getini("crucible_step_summary")), mlflow=wants_mlflow(config),
                   html=config.getoption("crucible_html"))
