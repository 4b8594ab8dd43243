"""The gate's verdict as GitHub-flavoured Markdown: for a pull-request comment, a CI job's step summary, a chat.

A view of a :class:`~pytest_crucible.verdict.gate.GateResult`, never a recomputation: the verdict line first
(what a reviewer reads in a notification), a table per kind of question, the config difference, the notes on
the ruler, then the items that changed most in a collapsed block. Every text that comes from a run (golden
questions, config values, warnings) is escaped, so no golden item can change the comment's layout or inject
HTML, and the whole stays under GitHub's 65,536-character limit for a comment.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .views import p_text, verdict_text

if TYPE_CHECKING:
    from ..store import Store
    from ..verdict.comparison import Comparison, MetricComparison
    from ..verdict.gate import GateResult
    from ..verdict.runs import RunData

# GitHub refuses a comment (and truncates a step summary's view) beyond this many characters.
COMMENT_LIMIT = 65_536
CHANGED_SHOWN = 25  # the items in the collapsed block, at most (fewer when the comment would not fit)
QUESTION_WIDTH = 90

# The punctuation Markdown reads as syntax inside a line (code spans, emphasis, links and images, table cells,
# strikethrough); a backslash makes each one literal. Every line this module writes starts with its own
# syntax ("| ", "- "), so what marks a line's start (#, >, 1.) never reaches one. < and & are HTML-escaped.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")


def text(value: object) -> str:
    """Run-supplied text as literal Markdown on one line: HTML escaped (no tag, no entity), Markdown's
    punctuation backslash-escaped (no link, emphasis, code span or table cell break), newlines as spaces."""
    one_line = " ".join(str(value).split())
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(one_line, quote=False))


def marker_line(workspace: str) -> str:
    """The hidden first line that lets a CI job find and edit its own comment (one per workspace)."""
    return f"<!-- crucible:{html.escape(' '.join(workspace.split()))} -->"


@dataclass(frozen=True)
class ChangedItem:
    """One item whose value of a metric moved between the runs."""

    item_id: str
    question: str
    metric: str
    before: float
    after: float
    worse: bool  # moved in the metric's worse direction
    error_class: str | None = None

    @property
    def change(self) -> float:
        return abs(self.after - self.before)


def changed_items(comparison: Comparison, baseline: RunData, current: RunData, *, questions: dict[str, str] | None = None,
                  error_classes: dict[str, str] | None = None) -> list[ChangedItem]:
    """The paired items whose value of a compared metric changed, the worse moves first, then the largest.
    ``questions``: item id -> question (default: the runs' golden items, when they were read with theirs)."""
    if questions is None:
        questions = {str(item.get("id")): str(item.get("question") or "") for item in current.golden or baseline.golden}
    found: list[ChangedItem] = []
    for m in comparison.metrics.values():
        before, after = baseline.metrics.get(m.metric, {}), current.metrics.get(m.metric, {})
        for item_id in sorted(set(before) & set(after)):
            if m.kind is not None and current.kinds.get(item_id, "retrieval") != m.kind:
                continue
            a, b = before[item_id], after[item_id]
            if a == b:
                continue
            worse = m.direction is not None and (b < a if m.higher_is_better else b > a)
            found.append(ChangedItem(item_id, questions.get(item_id, ""), comparison.label(m.metric), a, b, worse,
                                     (error_classes or {}).get(item_id)))
    unique = {(c.item_id, c.metric): c for c in found}  # a metric compared per kind appears once per item
    return sorted(unique.values(), key=lambda c: (not c.worse, -c.change, c.item_id, c.metric))


def headline(result: GateResult) -> str:
    """The verdict first: ``**GATE FAILED**: 2 of 9 gated metrics regressed``."""
    from ..verdict.gate import FAILED, REFUSED

    if result.verdict == REFUSED:
        reason = (result.refusal or "").splitlines()[0] if result.refusal else ""
        return f"**{REFUSED.headline}**: {text(reason)}"
    if result.verdict == FAILED:
        parts = []
        gated = _gated_rows(result)
        regressed = [m for m in gated if m.regressed or m.verdict in ("inferior", "inconclusive")]
        if regressed:
            parts.append(f"{len(regressed)} of {len(gated)} gated metric{'s' if len(gated) != 1 else ''} regressed")
        other = len(result.failures) - len(regressed)
        if other > 0 or not parts:
            parts.append(f"{max(other, 1)} other reason{'s' if max(other, 1) != 1 else ''} (below)")
        return f"**{FAILED.headline}**: " + "; ".join(parts)
    return f"**{text(result.summary())}**"  # passed, or skipped with its reason


def _gated_rows(result: GateResult) -> list[MetricComparison]:
    if result.comparison is None:
        return []
    gated = set(result.gated) if result.gated is not None else None
    return [m for name, m in result.comparison.metrics.items() if gated is None or name in gated]


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _table(comparison: Comparison, rows: Sequence[tuple[str, MetricComparison]], gated: set[str] | None) -> list[str]:
    lines = ["| metric | baseline | this run | delta | 95% CI | p | verdict |",
             "|:--|--:|--:|--:|:-:|--:|:--|"]
    for name, m in rows:
        label = comparison.label(m.metric) + (" (not gated)" if gated is not None and name not in gated else "")
        ci = f"[{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]" if m.ci else "–"
        delta = f"{m.delta:+.4f}" if m.delta is not None else "–"
        verdict = text(verdict_text(m, compact=True))
        if m.regressed:
            verdict = f"**{verdict}**"  # the row a reviewer looks for
        lines.append(f"| {text(label)} | {_number(m.a)} | {_number(m.b)} | {delta} | {ci} | {p_text(m.p).strip()} | {verdict} |")
    return lines


def comparison_section(comparison: Comparison, gated: set[str] | None) -> list[str]:
    """One table per kind of question (a single table when the runs do not mix kinds)."""
    clusters = f", {comparison.clusters} clusters" if comparison.clusters is not None else ""
    lines = [f"Baseline `{text(comparison.a)}` → this run `{text(comparison.b)}`: {comparison.paired_items} paired items{clusters}, seed {comparison.seed}."]
    by_kind: dict[str | None, list[tuple[str, MetricComparison]]] = {}
    for name, m in comparison.metrics.items():
        by_kind.setdefault(m.kind, []).append((name, m))
    for kind, rows in by_kind.items():
        lines.append("")
        if kind is not None:
            lines.extend([f"**{text(kind)} questions**", ""])
        lines.extend(_table(comparison, rows, gated))
    if any(verdict_text(m, compact=True).startswith("ns") for m in comparison.metrics.values()):
        lines.extend(["", "_ns: not significant (the CI holds 0 or p ≥ 0.05); mde: the smallest change these pairs can detect; "
                          "need n: the items it would take to detect this delta._"])
    return lines


def _config_section(comparison: Comparison) -> list[str]:
    if not comparison.config_changes:
        return []
    lines = ["", "**Config changes**", ""]
    lines.extend(f"- {text(key)}: {text(json.dumps(old))} → {text(json.dumps(new))}" for key, (old, new) in comparison.config_changes.items())
    return lines


def _notes_section(result: GateResult) -> list[str]:
    notes = [*result.warnings, *(result.comparison.warnings if result.comparison is not None else [])]
    if result.verdict.value == "failed":
        notes.extend(f"GATE FAILED {reason}" for reason in result.failures)
    if result.verdict.value == "refused" and result.refusal:
        notes.extend(result.refusal.splitlines()[1:])
    if result.comparison is not None and result.comparison.excluded:
        n = len(result.comparison.excluded)
        notes.append(f"{n} item{'s' if n != 1 else ''} left out of the pairs (crucible compare --json lists them)")
    if not notes:
        return []
    return ["", "**Notes**", "", *(f"- {text(note)}" for note in dict.fromkeys(notes))]


def _changed_block(changed: Sequence[ChangedItem], shown: int) -> list[str]:
    if not changed or shown <= 0:
        return []
    rows = changed[:shown]
    more = f", the first {len(rows)} shown" if len(changed) > len(rows) else ""
    lines = ["", "<details>", f"<summary>Items that changed most ({len(changed)}{more})</summary>", "",
             "| item | question | metric | before | after | error class |", "|:--|:--|:--|--:|--:|:--|"]
    for c in rows:
        question = c.question if len(c.question) <= QUESTION_WIDTH else c.question[:QUESTION_WIDTH - 1] + "…"
        after = f"**{c.after:.4f}**" if c.worse else f"{c.after:.4f}"
        lines.append(f"| {text(c.item_id)} | {text(question)} | {text(c.metric)} | {c.before:.4f} | {after} | {text(c.error_class or '')} |")
    return [*lines, "", "</details>"]


def gate_markdown(result: GateResult, *, changed: Sequence[ChangedItem] = (), workspace: str | None = None,
                  limit: int = COMMENT_LIMIT) -> str:
    """The whole comment: marker, verdict line, tables, config changes, notes, the changed items (as many
    of them as fit under ``limit`` characters; the rest is left out, never the verdict)."""
    head = [marker_line(workspace)] if workspace is not None else []
    head.append(headline(result))
    body: list[str] = []
    if result.comparison is not None:
        body.extend(["", *comparison_section(result.comparison, set(result.gated) if result.gated is not None else None)])
        body.extend(_config_section(result.comparison))
    body.extend(_notes_section(result))
    shown = min(len(changed), CHANGED_SHOWN)
    while True:
        document = "\n".join([*head, *body, *_changed_block(changed, shown)]) + "\n"
        if len(document) <= limit or shown == 0:
            break
        shown = shown // 2 if shown > 4 else shown - 1
    if len(document) > limit:  # a comparison of hundreds of metrics: cut the tables, keep the verdict line
        cut = "\n\n_(cut to fit a comment: `crucible compare --format json` has everything)_\n"
        document = document[:limit - len(cut)].rsplit("\n", 1)[0] + cut
    return document


def summary_markdown(lines: Iterable[str], *, title: str) -> str:
    """A run's summary lines (``crucible summary``) as a Markdown block: a title and the lines verbatim in
    a fenced block, so their alignment survives (the fence is longer than any backtick run inside)."""
    body = list(lines)
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([f"**{text(title)}**", "", fence + "text", *body, fence]) + "\n"


def stored_gate_markdown(store: Store | None, result: GateResult, *, workspace: str | None = None,
                         limit: int = COMMENT_LIMIT) -> str:
    """:func:`gate_markdown` with the items that changed most, their questions and error classes read from the
    store that holds the candidate run (none when it is an exported file)."""
    changed: list[ChangedItem] = []
    current, baseline = result.current, result.baseline
    if result.comparison is not None and current is not None and baseline is not None:
        questions = error_classes = None
        if store is not None and store.has_run(current.run_id):
            from ..store.aggregates import golden_fields, result_columns

            questions = {str(row.get("id")): str(row.get("question") or "") for row in golden_fields(store, current.run_id, ("id", "question"))}
            error_classes = {str(row["item_id"]): row["error_class"] for row in result_columns(store, current.run_id, ("item_id", "error_class"))
                             if row["error_class"]}
        changed = changed_items(result.comparison, baseline, current, questions=questions, error_classes=error_classes)
    return gate_markdown(result, changed=changed, workspace=workspace, limit=limit)


def run_markdown(store: Store, run_id: str, *, workspace: str | None = None) -> str:
    """A run with no gate (``crucible show --format markdown``, a step summary without a baseline): its
    one-line summary first, then the terminal's summary lines in a fenced block."""
    from .terminal import one_line_summary, run_summary_lines

    head = [marker_line(workspace)] if workspace is not None else []
    lines = [line.text for line in run_summary_lines(store, run_id)]
    return "\n".join([*head, summary_markdown(lines, title=one_line_summary(store, run_id)).rstrip("\n")]) + "\n"
