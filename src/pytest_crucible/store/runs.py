"""The runs table (``RunsMixin``, a part of ``Store``): a run opened, filled in once its tests are collected,
released or closed with its status; runs marked interrupted when their process is gone; runs listed, read
back and named (``resolve_run``: through :func:`.refs.resolve_run_ref`, as every surface names a run).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..defaults import DEFAULT_K
from .database import Connection, RunIdTaken, RunNotFound, StoreError, locate, read_only_rows, utc_now
from .refs import resolve_run_ref
from .ulid import new_ulid

if TYPE_CHECKING:
    from .postgres import DatabaseURL


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunsMixin(Connection):
    """The runs of ``Store``: one row per run, written at its start and its end."""

    def _update_run(self, run_id: str, values: dict[str, Any]) -> None:
        assignments = ", ".join(f"{column} = ?" for column in values)
        self.db.conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*values.values(), run_id])

    def start_run(self, *, config_hash: str, params: dict, resolved: dict, mode: str, outcome_mode: str,
                  config_path: str | None = None, git_commit: str | None = None, pytest_args: list[str] | None = None,
                  run_id: str | None = None, judge_model: str | None = None, judge_prompt_version: str | None = None,
                  judge_label: str | None = None, cost_estimate_usd: float | None = None,
                  workspace: str = "default", labels: dict[str, str] | None = None,
                  kinds: list[str] | None = None, custom_metrics: list[dict[str, Any]] | None = None, repeats: int = 1,
                  eval_k: int | None = None, error_classes: int | None = None, conversation_history: str | None = None) -> str:
        """Open a run. ``eval_k``: the cutoff its metrics at K are measured at (ini crucible_k). ``custom_metrics``: the definitions of the custom metrics it measures (see
        ``custom_metrics.definitions``), kept with the run so a comparison sees a changed ruler."""
        fixed_id = run_id
        run_id = run_id or new_ulid()
        try:
            with self.db.conn:
                self._insert("runs", {
                    "id": run_id,
                    "started_at": utc_now(),
                    "status": "running",
                    "config_hash": config_hash,
                    "config_path": config_path,
                    "params": json.dumps(params, sort_keys=True),
                    "resolved": json.dumps(resolved, sort_keys=True),
                    "mode": mode,
                    "outcome_mode": outcome_mode,
                    "git_commit": git_commit,
                    "pytest_args": json.dumps(pytest_args or []),
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "judge_model": judge_model,
                    "judge_prompt_version": judge_prompt_version,
                    "judge_label": judge_label,
                    "cost_estimate_usd": cost_estimate_usd,
                    "workspace": workspace,
                    "labels": json.dumps(labels or {}, sort_keys=True),
                    "kinds": json.dumps(sorted(kinds)) if kinds else None,
                    "custom_metrics": json.dumps(custom_metrics, sort_keys=True) if custom_metrics else None,
                    "repeats": repeats,
                    "eval_k": int(eval_k or DEFAULT_K),
                    "error_classes": error_classes,
                    "conversation_history": conversation_history,
                })
        except sqlite3.IntegrityError:
            if fixed_id is None:
                raise
            raise RunIdTaken(self._taken_message(fixed_id)) from None
        return run_id

    def _taken_message(self, run_id: str) -> str:
        row = self.db.conn.execute("SELECT status, host, pid, started_at FROM runs WHERE id = ?", [run_id]).fetchone()
        return _run_id_taken_message(self.path, run_id, row)

    def complete_run_start(self, run_id: str, *, judge_model: str | None = None, judge_prompt_version: str | None = None,
                           judge_label: str | None = None, cost_estimate_usd: float | None = None,
                           custom_metrics: list[dict[str, Any]] | None = None) -> None:
        """Fill in what a reserved run (``start_run`` before collection) learns only once its tests are
        collected: the judge, the cost estimate, the custom metrics of conftest files below the root."""
        with self.db.conn:
            self._update_run(run_id, {
                "judge_model": judge_model,
                "judge_prompt_version": judge_prompt_version,
                "judge_label": judge_label,
                "cost_estimate_usd": cost_estimate_usd,
                "custom_metrics": json.dumps(custom_metrics, sort_keys=True) if custom_metrics else None,
            })

    def release_run(self, run_id: str) -> bool:
        """Delete a reserved run that recorded nothing (its session stopped before its first result), so
        its id can be used again. Only this process's own row, still running and empty, is ever deleted."""
        with self.db.conn:
            deleted = self.db.conn.execute(
                "DELETE FROM runs WHERE id = ? AND status = 'running' AND host = ? AND pid = ? "
                "AND NOT EXISTS (SELECT 1 FROM results WHERE run_id = ?)",
                [run_id, socket.gethostname(), os.getpid(), run_id]).rowcount
        return bool(deleted)

    def finish_run(self, run_id: str, *, status: str, golden_hash: str | None, judge: dict[str, Any] | None = None,
                   unread_keys: list[str] | None = None, skipped: int = 0, unrecorded: int = 0,
                   embedder: str | None = None, selection: str | None = None) -> str:
        """Close a run and return its status. ``selection``: what it selected of its golden set, as
        ``store.selection.Selection.to_json`` (None: all of it). ``judge``: stats (requests, cache hits, ...), tokens and cost
        to keep with it; ``unread_keys``: changed config keys the pipeline never read (``crucible ablate``
        reads them); ``skipped``: golden items not run (drafts); ``unrecorded``: items that ran but whose
        scores could not be written (a full disk). A run that would be complete but scored no item is
        ``failed``: it measured nothing, so it is never a baseline and never ``latest``. A run that lost
        items is at best ``incomplete``, and counts them in ``n_items`` but not in ``n_scored`` or
        ``n_errored`` (see ``runs.unrecorded_items``): its means would silently leave them out."""
        values: dict[str, Any] = {"status": status, "finished_at": utc_now(), "golden_hash": golden_hash,
                                  "unread_keys": json.dumps(unread_keys or []), "n_skipped": skipped, "selection": selection}
        if embedder:  # the embedder responseRelevancy was measured with (``embedder``: its name)
            values["embedder"] = embedder
        if judge:
            values.update(
                judge_stats=json.dumps(judge.get("stats") or {}, sort_keys=True),
                cost_usd=judge.get("cost_usd"),
                input_tokens=judge.get("input_tokens"),
                output_tokens=judge.get("output_tokens"),
            )
        with self.db.conn:
            n_items, n_errored = self.db.conn.execute(
                "SELECT COUNT(*), COUNT(error) FROM results WHERE run_id = ?", [run_id]).fetchone()
            values.update(n_items=n_items + unrecorded, n_errored=n_errored, n_scored=n_items - n_errored)
            if unrecorded and status == "complete":
                values["status"] = "incomplete"
            if n_items - n_errored == 0 and values["status"] in ("complete", "incomplete"):
                values["status"] = "failed"
            self._update_run(run_id, values)
        return values["status"]

    def mark_dead_runs_interrupted(self) -> int:
        """A run still 'running' whose process is gone (killed, crashed) was interrupted; its counts are those of
        the results it stored (its session never closed it to count them)."""
        host = socket.gethostname()
        rows = self.db.conn.execute("SELECT id, pid FROM runs WHERE status = 'running' AND host = ?", [host]).fetchall()
        dead = [run_id for run_id, pid in rows if pid is not None and pid != os.getpid() and not _pid_alive(pid)]
        if dead:
            counts = self._stored_counts(dead)
            with self.db.conn:
                for run_id in dead:
                    self._update_run(run_id, {"status": "interrupted", **counts.get(run_id, {})})
        return len(dead)

    def _stored_counts(self, run_ids: list[str]) -> dict[str, dict[str, int]]:
        """n_items, n_scored, n_errored of runs as their stored results say (a run never closed has none of its own)."""
        if not run_ids:
            return {}
        rows = self.db.conn.execute(f"SELECT run_id, COUNT(*), COUNT(error) FROM results WHERE run_id IN "
                                    f"({', '.join('?' * len(run_ids))}) GROUP BY run_id", run_ids).fetchall()
        return {run_id: {"n_items": n, "n_errored": errored, "n_scored": n - errored} for run_id, n, errored in rows}

    def list_runs(self, limit: int | None = None, *, workspace: str | None = None, config_hash: str | None = None,
                  labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Newest first; ``workspace=None`` means every workspace, ``labels`` must all match."""
        where, params = [], []
        if workspace is not None:
            where.append("workspace = ?")
            params.append(workspace)
        if config_hash:
            # A prefix, taken literally: % and _ in it are not wildcards. (LIKE: either case of hex digits.)
            where.append("config_hash LIKE ? ESCAPE '\\'")
            params.append(config_hash.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        for key, value in (labels or {}).items():
            where.append("json_extract(labels, '$.' || json_quote(?)) = ?")
            params.extend([key, value])
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY started_at DESC, rowid DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        runs = [dict(row) for row in self.db.query(sql, params)]
        # A run not closed yet (running, or killed and marked interrupted) is counted from its stored results,
        # as `crucible show` counts it.
        counts = self._stored_counts([run["id"] for run in runs if run.get("finished_at") is None])
        for run in runs:
            run.update(counts.get(run["id"], {}))
        return runs

    def workspaces(self) -> dict[str, int]:
        """workspace -> number of runs, by name."""
        return dict(self.db.conn.execute("SELECT workspace, COUNT(*) FROM runs GROUP BY workspace ORDER BY workspace").fetchall())

    def get_run(self, run_id: str) -> dict[str, Any]:
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        if not rows:
            raise RunNotFound(f"no run with id {run_id} in {self.path}\n{self._runs_hint()}")
        return rows[0]

    def has_run(self, run_id: str, *, workspace: str | None = None) -> bool:
        """Whether the run exists (in ``workspace`` when given; ``None`` means any workspace)."""
        return self.db.conn.execute("SELECT 1 FROM runs WHERE id = ? AND (? IS NULL OR workspace = ?)",
                                    [run_id, workspace, workspace]).fetchone() is not None

    def resolve_run(self, ref: str, *, exclude: str | None = None, workspace: str | None = None) -> str:
        """A run id from 'latest' (newest complete run of the whole golden set, of ``workspace`` when given: a partial
        selection, ``-k`` or ``--lf``, is never 'latest'), ``latest:KEY=VALUE,...`` or a unique id prefix:
        :func:`.refs.resolve_run_ref`, the one resolver.

        Ids and prefixes resolve in every workspace: the workspace only says which run is 'latest'."""
        return resolve_run_ref(self, ref, workspace=workspace, exclude=exclude)

    def run_id_from_prefix(self, ref: str) -> str:
        """The run whose id is ``ref`` or starts with it (in any workspace, either case); RunNotFound or an
        ambiguous prefix's StoreError otherwise."""
        if self.db.conn.execute("SELECT 1 FROM runs WHERE id = ?", [ref]).fetchone():
            return ref
        # LIKE is case-insensitive in SQLite: ULID prefixes work in either case.
        matches = [row[0] for row in self.db.conn.execute("SELECT id FROM runs WHERE id LIKE ? || '%' ORDER BY id", [ref])]
        if not matches:
            raise RunNotFound(f"no run matches '{ref}' in {self.path}\n{self._runs_hint()}")
        if len(matches) > 1:
            raise StoreError(f"'{ref}' matches {len(matches)} runs ({', '.join(matches[:3])}...)\nHINT: give more characters of the run id")
        return matches[0]

    def _runs_hint(self) -> str:
        """The hint of a run that is not there: the newest runs that are (a typo shows against them)."""
        newest = [f"{run_id} ({config or 'no config'}, {started[:10]})" for run_id, config, started in self.db.conn.execute(
            "SELECT id, config_path, started_at FROM runs ORDER BY started_at DESC, id DESC LIMIT 3")]
        if not newest:
            return "HINT: this database holds no run yet (a pytest session with --crucible-config records one)"
        return f"HINT: the newest runs here are {', '.join(newest)}; `crucible runs --all-workspaces` lists them all"

    def unread_keys(self, run_id: str) -> list[str]:
        """The changed config keys the pipeline never read in this run (empty for runs stored before schema 8)."""
        row = self.db.conn.execute("SELECT unread_keys FROM runs WHERE id = ?", [run_id]).fetchone()
        return json.loads(row[0]) if row and row[0] else []


def run_id_taken(db_path: str | Path | DatabaseURL, run_id: str) -> str | None:
    """Why the database (if it exists yet) cannot take a run with this fixed id, or None; never writes."""
    rows = read_only_rows(db_path, "SELECT status, host, pid, started_at FROM runs WHERE id = ?", [run_id])
    return _run_id_taken_message(locate(db_path), run_id, rows[0]) if rows else None


def _run_id_taken_message(path: Path | DatabaseURL, run_id: str, row: Any) -> str:
    """One message for a fixed run id the database holds: a finished run, or a session writing it now."""
    if row is None:
        return f"--crucible-run-id={run_id}: {path} refused the run id"
    status, host, pid, started = (row[key] for key in ("status", "host", "pid", "started_at")) if isinstance(row, dict) else row
    if status == "running" and host == socket.gethostname() and pid is not None and _pid_alive(pid):
        who = f"another session (pid {pid}, started {started}) is writing a run with this id right now"
    elif status == "running":
        who = f"a session on {host} (pid {pid}, started {started}) is writing a run with this id"
    else:
        who = f"it already has a run with this id ({status}, started {started})"
    return (f"--crucible-run-id={run_id}: {path}: {who}\n"
            "HINT: give each session its own id, or its own database (one per shard; join them with "
            "`crucible merge SHARD.db ... -o RUN.db`)")
