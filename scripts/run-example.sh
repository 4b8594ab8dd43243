#!/usr/bin/env bash
# The main job: the example project's golden set through the plugin, on the embedded
# SQLite default (example_project/.crucible/crucible.db). No API key needed.
# Extra arguments go to pytest, e.g. --crucible-config=example_project/configs/rerank.json
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CRUCIBLE_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[example]'
config=example_project/configs/baseline.json
for arg in "$@"; do case "$arg" in --crucible-config=*) config="";; esac; done
exec "$venv/bin/python" -m pytest example_project ${config:+--crucible-config=$config} "$@"
