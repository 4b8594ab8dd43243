"""`python -m pytest_crucible.cli`: the `crucible` command."""

import sys

from . import main

sys.exit(main())
