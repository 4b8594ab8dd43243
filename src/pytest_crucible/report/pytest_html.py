"""Crucible's column in pytest-html's report (``pytest --html=report.html``), through pytest-html's own hooks.

Each golden item's row shows its outcome, error class and headline metrics; the gate's verdict is the row of
its own test case, ``crucible::gate`` (:mod:`.junit` sends it to every reporter), with the verdict in this
column. Registered only when pytest-html is installed and writing a report; nothing changes without it.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from ..session import CrucibleSession

#: The metrics a row shows, in this order, when the item has them.
ROW_METRICS = ("ndcgAt10", "recallAtK", "mrr", "faithfulness", "truthfulness", "attackSuccessRate")
PLUGIN_NAME = "crucible-pytest-html"


def writes_html_report(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("html") and bool(getattr(config.option, "htmlpath", None))


def cell_text(score: dict[str, Any], k: int | None = None) -> str:
    """``passed, correct: ndcg@10 1.000 recall@10 1.000``: what an item's row shows of its score (``k``: the run's K)."""
    from ..metrics import display_name

    metrics = score.get("metrics") or {}
    shown = " ".join(f"{display_name(name, k)} {metrics[name]:.3f}" for name in ROW_METRICS if name in metrics)
    head = ", ".join(part for part in (score.get("outcome") or "", score.get("error_class") or "") if part)
    return f"{head}: {shown}" if shown else head


class HtmlColumn:
    """pytest-html's hooks, bound to the session whose gate the gate's row shows."""

    def __init__(self, crucible: CrucibleSession):
        self.crucible = crucible

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.insert(2, '<th class="sortable" data-column-type="crucible">crucible</th>')

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        from .junit import GATE_NODEID

        text = getattr(report, "crucible_html", "") or ""
        if report.nodeid == GATE_NODEID and self.crucible.gate is not None:
            text = self.crucible.gate.summary()
        cells.insert(2, f"<td>{html.escape(text)}</td>")


def register(config: pytest.Config, crucible: CrucibleSession) -> None:
    if writes_html_report(config) and not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(HtmlColumn(crucible), PLUGIN_NAME)
