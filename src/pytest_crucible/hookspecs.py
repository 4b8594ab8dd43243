"""The hooks pytest-crucible adds to pytest's (registered by the plugin through ``pytest_addhooks``).

Declared with pluggy's marker for pytest's project name, so this module imports no pytest.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_crucible_register_metrics(config: Any) -> Any:
    """Return custom metrics (functions decorated with ``@crucible.metric``) for every session: how a
    plugin or a shared package adds its metrics without a conftest.py. Called once per session, at
    configure time (in each xdist worker too); each implementation returns a list (or None). See docs/custom-metrics.md."""


@hookspec
def pytest_crucible_register_judges(config: Any) -> Any:
    """Return judges of your own (a class with ``name``, ``version`` and ``judge(requests)``, or an
    instance of one; a list of them, or None), selected by name with ``--crucible-judge=NAME`` or ini
    ``crucible_judge``. Called once per session, at configure time (in each xdist worker too). See
    docs/judges.md."""
