"""A stored run in the team's MLflow tracking server (``--crucible-mlflow``; the ``mlflow`` extra).

One MLflow run per crucible run: the config's values as params, every aggregate metric, the gate's verdict,
the run id and config hash as tags, the junit XML and HTML report as artifacts, and the per-item metrics as
a CSV table. MLflow's own settings apply as its users expect (``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME``; the workspace names the experiment otherwise). The tracker is a copy of what
the store holds: a tracker that cannot be reached is one warning, never a changed verdict or a lost run.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store import Store
    from ..verdict.gate import GateResult

EXTRA_HINT = "pip install 'pytest-crucible[mlflow]' (or mlflow itself) in the environment pytest runs in"
PARAM_VALUE_LIMIT = 6000  # what an MLflow tracking server accepts for one param's value
# MLflow names: letters, digits, underscores, dashes, periods, spaces, colons and slashes.
_NOT_IN_A_NAME = re.compile(r"[^\w\-. :/]")


class TrackerMissing(Exception):
    """``--crucible-mlflow`` without MLflow installed: a usage error, said before any test runs."""


def require_mlflow() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError as exc:
        raise TrackerMissing(f"--crucible-mlflow needs MLflow, which is not installed ({exc})\nHINT: {EXTRA_HINT}") from None


def mlflow_name(name: str) -> str:
    """A crucible metric name as MLflow accepts it (``recall@10`` -> ``recall_at_10``)."""
    return _NOT_IN_A_NAME.sub("_", name.replace("@", "_at_"))


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flat(inner, f"{prefix}{key}.")
    else:
        yield prefix[:-1], value


def run_params(resolved: dict[str, Any]) -> dict[str, str]:
    """The applied config as MLflow params: one per leaf (``retrieval.rerank``), values cut to what a server takes."""
    import json

    params = {}
    for key, value in _flat(resolved):
        shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        params[mlflow_name(key)] = shown[:PARAM_VALUE_LIMIT]
    return params


def log_run(store: Store, run_id: str, gate: GateResult | None, *, junit: str | None = None,
            html: str | None = None) -> str | None:
    """Log the stored run ``run_id`` to MLflow; returns a warning when it could not (else None)."""
    try:
        import mlflow
    except ImportError:
        return f"--crucible-mlflow: MLflow is not installed; the run was not logged to a tracker\nHINT: {EXTRA_HINT}"
    from ..verdict.runs import load_run
    from .tables import item_table, to_csv

    uri = mlflow.get_tracking_uri()
    saved = _quick_retries()
    try:
        current = load_run(store, run_id)
        row = current.run
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or f"crucible/{row.get('workspace') or 'default'}"
        mlflow.set_experiment(experiment)
        tags = {"crucible.run_id": run_id, "crucible.config_hash": str(row.get("config_hash") or ""),
                "crucible.status": str(row.get("status") or ""), "crucible.workspace": str(row.get("workspace") or ""),
                "crucible.verdict": gate.verdict.value if gate is not None else "not gated"}
        if gate is not None and gate.baseline is not None:
            tags["crucible.baseline"] = gate.baseline.run_id
        with mlflow.start_run(run_name=run_id, tags=tags):
            mlflow.log_params(run_params(current.resolved))
            mlflow.log_metrics({mlflow_name(name): value for name, value in current.means().items()})
            with tempfile.TemporaryDirectory(prefix="crucible-mlflow-") as scratch:
                header, rows = item_table(store, run_id)
                table = Path(scratch) / "crucible_items.csv"
                table.write_text(to_csv(header, rows), encoding="utf-8")
                mlflow.log_artifact(str(table))
            for path in (junit, html):
                if path and Path(path).is_file():
                    mlflow.log_artifact(path)
    except Exception as exc:  # the tracker is a copy: its failure never reaches the verdict
        first = str(exc).splitlines()[0] if str(exc) else ""
        return (f"could not log run {run_id} to MLflow at {uri}: {type(exc).__name__}: {first}\n"
                "HINT: the run and its verdict are in the store as usual (crucible show); check MLFLOW_TRACKING_URI and the server")
    finally:
        _restore(saved)
    return None


# MLflow retries a request to a server for minutes by default; a CI job waiting on a tracker that is down
# would hang that long. Unless the user set them, a few quick retries are enough for a copy.
_QUICK_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


def _quick_retries() -> dict[str, str | None]:
    saved = {name: os.environ.get(name) for name in _QUICK_RETRIES}
    for name, value in _QUICK_RETRIES.items():
        os.environ.setdefault(name, value)
    return saved


def _restore(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
