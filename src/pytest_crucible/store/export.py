"""A run as a self-contained JSON document (``ExportMixin``, a part of ``Store``: ``export_run`` and
``import_run``), and the checks an exported file passes before any of it is believed: its shape and
every value it puts in a column (:func:`validate_export`, :func:`read_export`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .database import Connection, StoreError
from .results import _JSON_RESULT_COLUMNS

EXPORT_FORMAT = "pytest-crucible-run"
EXPORT_VERSION = 1
_RUN_COLUMNS = ("id", "started_at", "finished_at", "status", "config_hash", "config_path", "params", "resolved", "mode",
                "outcome_mode", "golden_hash", "n_items", "git_commit", "pytest_args", "judge_model", "judge_prompt_version",
                "host", "pid", "judge_label", "judge_stats", "cost_estimate_usd", "cost_usd", "input_tokens", "output_tokens",
                "workspace", "labels", "kinds", "unread_keys", "n_scored", "n_errored", "n_skipped", "custom_metrics", "repeats",
                "embedder", "eval_k", "selection", "error_classes", "conversation_history")


class ExportMixin(Connection):
    """Export and import of ``Store``."""

    if TYPE_CHECKING:  # RunsMixin's and ResultsMixin's (store/runs.py, store/results.py)
        def get_run(self, run_id: str) -> dict[str, Any]: ...
        def results(self, run_id: str, *, decoded: bool = False) -> list[dict[str, Any]]: ...
        def item_metrics(self, run_id: str) -> dict[str, dict[str, float]]: ...
        def _write_items(self, run_id: str, *, golden: Iterable[dict[str, Any]] = (), results: Iterable[dict[str, Any]] = (),
                         metrics: Iterable[tuple[str, str, Any]] = (), replace: bool = False) -> None: ...

    def export_run(self, run_id: str) -> dict[str, Any]:
        """One run as a self-contained JSON document (commit it to use as a CI baseline)."""
        run = self.get_run(run_id)
        results = self.results(run_id, decoded=True)
        golden = [
            {"item_id": item_id, "source": source, "line": line, "item": json.loads(item)}
            for item_id, source, line, item in self.db.conn.execute(
                "SELECT item_id, source, line, item FROM golden_items WHERE run_id = ? ORDER BY item_id", [run_id])
        ]
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "run": run,
            "goldenItems": golden,
            "results": results,
            "itemMetrics": self.item_metrics(run_id),
        }

    def import_run(self, document: dict[str, Any], source: str = "<export>") -> tuple[str, bool]:
        """Add an exported run; returns (run id, whether it was new). Same id, same data: no-op."""
        document = validate_export(document, source)
        run = document["run"]
        run_id = run["id"]
        existing = self.db.conn.execute("SELECT config_hash, started_at FROM runs WHERE id = ?", [run_id]).fetchone()
        if existing is not None:
            if tuple(existing) == (run["config_hash"], run["started_at"]):
                return run_id, False
            raise StoreError(f"{source}: run {run_id} already exists in {self.path} with different content\nHINT: import into another --db")
        try:
            with self.db.conn:
                # Exports older than schema 6 carry no workspace or labels: the columns' defaults apply.
                self._insert("runs", {key: run[key] for key in _RUN_COLUMNS if run.get(key) is not None})
                self._write_items(run_id, golden=document["goldenItems"], results=document["results"],
                                  metrics=[(item_id, metric, value) for metric, values in document["itemMetrics"].items()
                                           for item_id, value in values.items()])
        except (sqlite3.Error, OverflowError) as exc:  # validate_export checks the columns; this is the last line of defence
            raise StoreError(f"{source}: cannot import run {run_id}: {exc}; nothing was written\n"
                             "HINT: make the file with `crucible export RUN -o FILE`") from None
        return run_id, True





# What each exported column may hold (None/absent is allowed unless the column is required).
_TEXT, _INT, _NUMBER, _FLAG, _LIST, _JSON_TEXT = "a string", "an integer", "a finite number", "true/false or 0/1", "a list", "JSON text"
_RUN_TYPES = {
    **dict.fromkeys(("finished_at", "config_path", "golden_hash", "git_commit", "judge_model", "judge_prompt_version", "host",
                     "judge_label", "workspace", "embedder", "conversation_history"), _TEXT),
    **dict.fromkeys(("params", "resolved", "pytest_args", "judge_stats", "labels", "kinds", "unread_keys", "custom_metrics",
                     "selection"), _JSON_TEXT),
    **dict.fromkeys(("n_items", "pid", "input_tokens", "output_tokens", "n_scored", "n_errored", "n_skipped", "repeats", "eval_k",
                     "error_classes"), _INT),
    **dict.fromkeys(("cost_estimate_usd", "cost_usd"), _NUMBER),
}
_RESULT_TYPES = {
    **dict.fromkeys(("answer", "error", "result_id", "error_class", "error_evidence", "blocked_layer"), _TEXT),
    **dict.fromkeys((*_JSON_RESULT_COLUMNS, "tool_calls"), _LIST),
    **dict.fromkeys(("confidence", "latency_ms"), _NUMBER),
    **dict.fromkeys(("abstained", "blocked"), _FLAG),
}
_RUN_CHOICES = {"status": ("running", "complete", "incomplete", "interrupted", "failed"), "mode": ("system", "component")}


def _fits(value: Any, kind: str) -> bool:
    import math

    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    if kind == _NUMBER:  # SQLite binds a Python int only within 64 bits
        if isinstance(value, int) and not isinstance(value, bool):
            return abs(value) < 2**63
        return isinstance(value, float) and math.isfinite(value)
    if kind == _FLAG:
        return isinstance(value, bool) or value in (0, 1)
    if kind == _LIST:
        return isinstance(value, list)
    if kind == _JSON_TEXT:
        if not isinstance(value, str):
            return False
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            return False
        return True
    raise AssertionError(kind)


def validate_export(document: Any, source: str) -> dict[str, Any]:
    """Check an exported run's shape and every value it puts in a column; the error names the file and the field."""
    from ..golden_set.schema import field_path
    from ..json_input import shown, value_problem

    def bad(field: str, expected: str, *, got: Any = None, show: bool = False) -> StoreError:
        also = f", got {json.dumps(got, default=str)[:60]}" if show else ""
        return StoreError(f"{source}: field '{shown(field)}': expected {expected}{also}\n"
                          "HINT: make the file with `crucible export RUN -o FILE`")

    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise bad("format", f"'{EXPORT_FORMAT}' (this is not an exported crucible run)")
    if document.get("version") != EXPORT_VERSION:
        raise bad("version", f"{EXPORT_VERSION}, got {json.dumps(document.get('version'), default=str)[:40]}")
    unusable = value_problem(document, max_values=None)
    if unusable is not None:
        loc, problem = unusable
        raise StoreError(f"{source}: field '{shown(field_path(loc))}': {problem}\nHINT: make the file with `crucible export RUN -o FILE`")
    run = document.get("run")
    if not isinstance(run, dict):
        raise bad("run", "an object")
    for key in ("id", "started_at", "config_hash", "resolved", "params", "mode", "outcome_mode", "status"):
        if not isinstance(run.get(key), str):
            raise bad(f"run.{key}", "a string")
    for key, choices in _RUN_CHOICES.items():
        if run[key] not in choices:
            raise bad(f"run.{key}", " or ".join(choices), got=run[key], show=True)
    for key, kind in _RUN_TYPES.items():
        if run.get(key) is not None and not _fits(run[key], kind):
            raise bad(f"run.{key}", kind, got=run[key], show=True)
    if not isinstance(json.loads(run["resolved"]), dict):
        raise bad("run.resolved", "the JSON text of an object")
    for key, container in (("goldenItems", list), ("results", list), ("itemMetrics", dict)):
        if not isinstance(document.get(key), container):
            raise bad(key, "a list" if container is list else "an object")
    seen: set[str] = set()
    for index, golden in enumerate(document["goldenItems"]):
        if not isinstance(golden, dict) or not isinstance(golden.get("item_id"), str) or not isinstance(golden.get("item"), dict):
            raise bad(f"goldenItems[{index}]", "an object with item_id (a string) and item (an object)")
        if golden["item_id"] in seen:
            raise bad(f"goldenItems[{index}].item_id", "an item id used once", got=golden["item_id"], show=True)
        seen.add(golden["item_id"])
        if golden["item"].get("id", golden["item_id"]) != golden["item_id"]:  # the pairing and the kinds read item.id
            raise bad(f"goldenItems[{index}].item.id", "the same id as item_id", got=golden["item"]["id"], show=True)
        for key, kind in (("source", _TEXT), ("line", _INT)):
            if golden.get(key) is not None and not _fits(golden[key], kind):
                raise bad(f"goldenItems[{index}].{key}", kind, got=golden[key], show=True)
    seen, result_ids = set(), set()
    for index, row in enumerate(document["results"]):
        if not isinstance(row, dict) or not isinstance(row.get("item_id"), str) or not isinstance(row.get("question"), str):
            raise bad(f"results[{index}]", "an object with item_id and question")
        if row["item_id"] in seen:
            raise bad(f"results[{index}].item_id", "an item id used once", got=row["item_id"], show=True)
        seen.add(row["item_id"])
        for key in ("outcome", "recorded_at"):
            if not isinstance(row.get(key), str):
                raise bad(f"results[{index}].{key}", "a string", got=row.get(key), show=True)
        for key, kind in _RESULT_TYPES.items():
            if row.get(key) is not None and not _fits(row[key], kind):
                raise bad(f"results[{index}].{key}", kind, got=row[key], show=True)
        for key in ("retrieved", "tool_calls"):
            if not all(isinstance(entry, dict) for entry in row.get(key) or []):
                raise bad(f"results[{index}].{key}", "a list of objects")
        if row.get("crag_grade") is not None and row["crag_grade"] not in ("perfect", "acceptable", "missing", "incorrect"):
            raise bad(f"results[{index}].crag_grade", "perfect, acceptable, missing or incorrect", got=row["crag_grade"], show=True)
        if row.get("result_id") is not None:
            if row["result_id"] in result_ids:
                raise bad(f"results[{index}].result_id", "a result id used once", got=row["result_id"], show=True)
            result_ids.add(row["result_id"])
    for metric, values in document["itemMetrics"].items():
        if not isinstance(values, dict) or not all(_fits(v, _NUMBER) for v in values.values()):
            raise bad(f"itemMetrics.{metric}", "an object of item id -> finite number")
    return document



def read_export(path: str | Path) -> dict[str, Any]:
    from ..json_input import json_problem

    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the exported run: {exc.strerror}\nHINT: make one with `crucible export RUN -o FILE`") from None
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})\nHINT: make the file with `crucible export RUN -o FILE`") from None
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"{path}: not valid JSON ({json_problem(exc)})\nHINT: make the file with `crucible export RUN -o FILE`") from None
    return validate_export(document, str(path))
