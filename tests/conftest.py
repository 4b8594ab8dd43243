"""Shared test setup.

pytester's in-process runs remove the modules an inner session imported; numpy
refuses to be imported twice in one process, so load it (and the plugin's lazily
imported core) once, up front.
"""

import numpy  # noqa: F401
import scipy.special  # noqa: F401

import pytest_crucible.comparison  # noqa: F401
import pytest_crucible.store  # noqa: F401
from mock_anthropic import mock_anthropic  # noqa: E402,F401  (fixture: a local Messages API server)
