"""Shared test setup.

pytester's in-process runs remove the modules an inner session imported; numpy
refuses to be imported twice in one process, so load it (and the plugin's lazily
imported core, the anthropic SDK and the judges) once, up front: an inner session
that imported them itself would import them again each time (seconds per run).
"""

import anthropic  # noqa: F401
import numpy  # noqa: F401
import scipy.special  # noqa: F401

import pytest_crucible.comparison  # noqa: F401
import pytest_crucible.evaluation.answers  # noqa: F401
import pytest_crucible.judge.anthropic_judge  # noqa: F401
import pytest_crucible.judge.lexical_v2  # noqa: F401
import pytest_crucible.report.html  # noqa: F401
import pytest_crucible.store  # noqa: F401
from mock_anthropic import mock_anthropic  # noqa: E402,F401  (fixture: a local Messages API server)
