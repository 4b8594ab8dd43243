"""The package's warning category, in a module of its own so that no surface needs the pytest glue."""

from __future__ import annotations

import pytest


class CrucibleWarning(pytest.PytestWarning):
    """Warnings from pytest-crucible (filter them with ``-W error::pytest_crucible.CrucibleWarning``)."""
