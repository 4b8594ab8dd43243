#!/usr/bin/env bash
# The project's test suite, in a virtual environment that this script sets up itself.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CRUCIBLE_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev,example]'
# Both cores (pytest-xdist); pass -n 0 to run in one process.
exec "$venv/bin/python" -m pytest -n auto "$@"
