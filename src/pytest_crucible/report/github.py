"""GitHub Actions: the verdict in the job's step summary and as annotations on the run's page.

Workflow commands (``::error title=...::message``) are lines the runner reads from a step's output; a value
that holds a newline or ``::`` could otherwise start a command of its own, so every value is escaped the way
GitHub documents it (``%``, CR and LF in a message; also ``:`` and ``,`` in a property). The step summary is
a Markdown file whose path the runner puts in ``GITHUB_STEP_SUMMARY``; each step appends to it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..verdict.gate import GateResult

ANNOTATION_TITLE = "crucible gate"


def in_github_actions(environ: Mapping[str, str]) -> bool:
    return environ.get("GITHUB_ACTIONS") == "true"


def escape_data(value: object) -> str:
    """A workflow command's message: ``%`` first, so an escape is never escaped twice."""
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: object) -> str:
    """A workflow command's property value (``title=``, ``file=``): a message's escapes, and ``:`` and ``,``,
    which end a property."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: object, **properties: object) -> str:
    """``::name key=value,...::message``, every part escaped; properties that are None are left out."""
    given = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items() if value is not None)
    return f"::{name}{' ' + given if given else ''}::{escape_data(message)}"


def gate_annotations(result: GateResult) -> list[str]:
    """What a reviewer must see on the run's page: an error per regressed metric and per other failure,
    a warning for a refusal and for each of the gate's warnings."""
    from ..verdict.gate import FAILED, REFUSED

    lines: list[str] = []
    if result.verdict == FAILED:
        comparison = result.comparison
        described = set()
        if comparison is not None:
            gated = set(result.gated) if result.gated is not None else None
            for name, m in comparison.metrics.items():
                if m.regressed and (gated is None or name in gated) and m.a is not None and m.b is not None:
                    p = "p < 0.001" if m.p is not None and m.p < 0.001 else f"p = {m.p:.3f}" if m.p is not None else "p -"
                    kind = f" ({m.kind} questions)" if m.kind else ""
                    lines.append(command("error", f"{comparison.label(m.metric)}{kind} regressed {m.a:.3f} -> {m.b:.3f} ({p})",
                                         title=ANNOTATION_TITLE))
                    described.add(m.metric)
        for reason in result.failures:
            if not any(reason.startswith(metric) or f" {metric} " in reason for metric in described):
                lines.append(command("error", reason, title=ANNOTATION_TITLE))
    elif result.verdict == REFUSED:
        lines.append(command("warning", result.refusal or "the gate refused to compare", title=ANNOTATION_TITLE))
    lines.extend(command("warning", warning, title=ANNOTATION_TITLE) for warning in result.warnings)
    return lines


def item_annotation(item_id: str, message: str, *, file: str | None, line: int | None) -> str:
    """An item's threshold failure, pointing at its line in the golden file."""
    return command("error", message, title=f"crucible item {item_id}", file=file, line=line)


def fault_annotation(fault: str) -> str:
    return command("warning", fault, title="crucible fault")


def append_step_summary(path: str, markdown: str) -> str | None:
    """Append ``markdown`` to the step summary in one write (a reader never sees half of it); returns the
    warning to show when the file cannot be written (the run and its verdict stand), else None."""
    data = ("\n" + markdown if not markdown.startswith("\n") else markdown).encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        return f"could not write the step summary to {path} (GITHUB_STEP_SUMMARY): {exc.strerror or exc}"
    try:
        written = os.write(fd, data)
        if written != len(data):
            return f"the step summary at {path} (GITHUB_STEP_SUMMARY) was cut short: the disk may be full"
    except OSError as exc:
        return f"could not write the step summary to {path} (GITHUB_STEP_SUMMARY): {exc.strerror or exc}"
    finally:
        os.close(fd)
    return None
