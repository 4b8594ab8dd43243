#!/usr/bin/env bash
# The project's test suite, in a virtual environment that this script sets up itself.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CRUCIBLE_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# Install (editable) when the venv is new or pyproject.toml changed since the last install: source
# edits need no reinstall, and skipping pip saves about 12 s on every run of the everyday loop.
stamp="$venv/.crucible-installed"
wanted="$(cat pyproject.toml | "$venv/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev,example,openai]'
    echo "$wanted" > "$stamp"
fi
# pytest caches its rewritten test modules as bytecode; a shell exporting PYTHONDONTWRITEBYTECODE
# makes it redo that on every run (about 6 s on 2 cores). The caches are git-ignored.
unset PYTHONDONTWRITEBYTECODE
# Both cores (pytest-xdist); pass -n 0 to run in one process.
exec "$venv/bin/python" -m pytest -n auto "$@"
