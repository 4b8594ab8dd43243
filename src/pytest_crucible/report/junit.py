"""The gate and the run as junit XML sees them (and every other reporter of test reports).

The gate becomes a test case of its own, ``crucible::gate`` (classname ``crucible``, name ``gate``):
reports sent through ``pytest_runtest_logreport`` at session end, before pytest's junitxml writes
its file. It fails with every ``GATE FAILED`` line (the first is the message), is an error when the
gate refused (the refusal and its HINT), is skipped or passes. The session's faults (items the
database could not record, a report that could not be written) fail a test case of their own,
``crucible::faults``, with every ``FAULT`` line: a dashboard is red when the items are green but the
run was not stored whole, gate or no gate. The testsuite carries the run and the
verdict as <properties> (``crucible.runId``, ``crucible.configHash``, ``crucible.baseline``,
``crucible.verdict``, and ``crucible.changedItems`` when golden items were edited since the baseline),
through junitxml's own object. Everything is read from the ``GateResult``,
never recomputed. pytest is imported only where the reports are built (the plugin calls
:func:`report_to_junit` from its pytest_sessionfinish).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from ..session import CrucibleSession
    from ..verdict.gate import GateResult

GATE_NODEID = "crucible::gate"
GATE_LOCATION = ("crucible", None, "crucible gate")
FAULTS_NODEID = "crucible::faults"
FAULTS_LOCATION = ("crucible", None, "crucible faults")


class CaseCrash:
    """What junit takes as the message (and the terminal's short summary as the reason)."""

    def __init__(self, message: str, nodeid: str):
        self.message, self.nodeid = message, nodeid

    def __str__(self) -> str:
        return f"{self.nodeid}: {self.message}"


class CaseRepr:
    """The longrepr of a crucible test case's report: junit's message is the first line (``reprcrash``), its
    text every line (``str``); the terminal prints one pointer to those lines, which the crucible summary at
    the end prints at every verbosity (they are alerts: never hidden by -q or -qq)."""

    def __init__(self, lines: list[str], pointer: str, nodeid: str = GATE_NODEID):
        self.lines, self.pointer = lines, pointer
        self.reprcrash = CaseCrash(lines[0], nodeid)

    def toterminal(self, tw) -> None:
        tw.line(self.pointer)

    def __str__(self) -> str:
        return "\n".join(self.lines)


def gate_case(gate: GateResult) -> tuple[str, str, Any]:
    """(outcome, when, longrepr) of the gate's test case: failed at call, failed at setup (an error:
    refused), skipped, or passed."""
    from ..verdict.gate import FAILED, REFUSED, SKIPPED

    if gate.verdict == FAILED:
        n = len(gate.failures)
        lines = [f"{FAILED.headline} {reason}" for reason in gate.failures] or [gate.summary()]
        return "failed", "call", CaseRepr(lines, f"the gate failed ({n} reason{'s' if n != 1 else ''}): "
                                                 f"see the {FAILED.headline} lines at the end")
    if gate.verdict == REFUSED:
        first, *rest = (gate.refusal or "").splitlines() or [""]
        return "failed", "setup", CaseRepr([f"{REFUSED.headline} {first}", *rest],
                                           f"the gate refused to compare: see the {REFUSED.headline} line at the end")
    if gate.verdict == SKIPPED:
        return "skipped", "call", (GATE_LOCATION[0], 0, f"Skipped: {gate.summary()}")
    return "passed", "call", None


def faults_case(faults: list[str]) -> tuple[str, str, Any]:
    """(outcome, when, longrepr) of the faults' test case: failed at call, one line per fault."""
    from .terminal import fault_lines  # here: plugin.py imports this module in every pytest session

    n = len(faults)
    pointer = f"{n} fault{'s' if n != 1 else ''}: the run was not recorded or reported whole, see the FAULT lines at the end"
    return "failed", "call", CaseRepr(fault_lines(faults), pointer, FAULTS_NODEID)


def suite_properties(crucible: CrucibleSession) -> dict[str, str]:
    """The testsuite <properties>: the run, and the gate's verdict and baseline when a gate was asked for."""
    gate = crucible.gate
    properties = {"crucible.runId": crucible.run_id, "crucible.configHash": crucible.settings.config_hash}
    if gate is not None:
        properties["crucible.baseline"] = gate.baseline.run_id if gate.baseline is not None else None
        properties["crucible.verdict"] = gate.verdict
        # golden items edited since the baseline, left out of the pairs or compared anyway (refused: the gate's case says it)
        properties["crucible.changedItems"] = gate.comparison.changed_line() if gate.comparison is not None else None
    return {name: value for name, value in properties.items() if value is not None}


def report_to_junit(session, crucible: CrucibleSession) -> None:
    """On the controller, after the gate decided and before junitxml writes its file: the gate's test case
    (only when a gate was asked for), the faults' test case (only when there are faults), then the testsuite
    properties (only with --junitxml)."""
    if crucible.gate is not None:
        _report_case(session, GATE_NODEID, GATE_LOCATION, *gate_case(crucible.gate))
    if crucible.faults:
        _report_case(session, FAULTS_NODEID, FAULTS_LOCATION, *faults_case(crucible.faults))
    config = session.config
    xml = next((plugin for plugin in config.pluginmanager.get_plugins() if hasattr(plugin, "add_global_property")), None)
    if xml is not None and config.getoption("xmlpath", None):
        for name, value in suite_properties(crucible).items():
            xml.add_global_property(name, value)


def _report_case(session, nodeid: str, location: tuple, outcome: str, when: str, longrepr: Any) -> None:
    """setup, the verdict's phase, teardown (junitxml closes a test case on its teardown report). Every
    reporter receives them: the terminal counts the case and names it in its short summary. The exit
    status stays as the session decided it, and the case does not count towards --maxfail."""
    import pytest  # here: the rest of this module is pure

    phases = ([("setup", "passed", None)] if when == "call" else []) + [(when, outcome, longrepr), ("teardown", "passed", None)]
    testsfailed = session.testsfailed
    session.testsfailed = testsfailed - 1  # pytest counts a failed report towards --maxfail: the case is not an item
    for phase, phase_outcome, phase_longrepr in phases:
        report = pytest.TestReport(nodeid, location, {}, phase_outcome, phase_longrepr, phase)
        if phase == when:  # read by the plugin's pytest_report_teststatus while the report is sent (not a
            # TestReport field: an attribute of ours, set and removed through the instance's __dict__)
            report.__dict__["crucible_live_status"] = ("error" if when == "setup" else outcome), "", ""
        session.config.hook.pytest_runtest_logreport(report=report)
        report.__dict__.pop("crucible_live_status", None)
    session.testsfailed = testsfailed


def junit_path(config: pytest.Config) -> str | None:
    """Where pytest's junitxml writes (``--junitxml``, or the ini ``junit_xml``...), None without it."""
    return next((getattr(plugin, "logfile", None) for plugin in config.pluginmanager.get_plugins()
                 if hasattr(plugin, "add_global_property")), None)


def restrict_junit_file(config: pytest.Config) -> None:
    """The junit file holds the questions and verdicts too: give it crucible's file mode (junitxml's truncating
    open keeps it). junitxml reports its own error when it cannot write there."""
    junit = junit_path(config)
    if junit:
        from ..store.files import restrict

        with contextlib.suppress(OSError):
            restrict(Path(junit))
