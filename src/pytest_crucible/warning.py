"""The package's warning category, in a module of its own so that no surface needs the pytest glue."""

from __future__ import annotations

import warnings

import pytest


class CrucibleWarning(pytest.PytestWarning):
    """Warnings from pytest-crucible (filter them with ``-W error::pytest_crucible.CrucibleWarning``)."""


def warn(message: str, filename: str | None = None, lineno: int = 1) -> bool:
    """Emit a CrucibleWarning under the warning filters in force (``-W``, ``filterwarnings``): at
    ``filename:lineno`` when given (as pytest shows its own config warnings), else here. False when a
    filter made it an error: caught here, for the caller to record (never a traceback)."""
    try:
        if filename is None:
            warnings.warn(CrucibleWarning(message), stacklevel=2)
        else:
            warnings.warn_explicit(CrucibleWarning(message), CrucibleWarning, filename, lineno, module="pytest_crucible")
    except CrucibleWarning:
        return False
    return True
