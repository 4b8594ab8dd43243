"""Join the shard databases of one sharded run into one run.

CI splits a suite across machines: every shard runs with the same
``--crucible-run-id`` and its own ``--crucible-db``. :func:`merge_shards` checks that
the shards belong together (same run, same configuration and judge, no item scored
twice, one version of every golden item) and writes the joined run into another
crucible database in one transaction: either the whole run arrives, or nothing does.

Shards are opened with :meth:`Store.open` (``create=False``): a shard written by an
older pytest-crucible is migrated in place, a ``running`` run whose process is gone is
marked ``interrupted``, and the file is switched to WAL mode. Nothing else in a shard
is changed. This module never imports pytest.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import Store, StoreError, utc_now
from .schema import RunStatus

__all__ = ["MergeReport", "merge_shards"]

# Columns every shard's run must agree on: a merged run is one experiment.
_MUST_AGREE = ("config_hash", "judge_model", "judge_prompt_version", "mode", "custom_metrics", "embedder", "eval_k")
_JUDGE_SUMS = ("cost_estimate_usd", "cost_usd", "input_tokens", "output_tokens")
_SHOWN = 10  # item ids / run ids named in one message before "and N more"


@dataclass
class MergeReport:
    run_id: str
    shards: list[str]
    items: int
    golden_hash: str
    status: str
    qrels_added: int
    cache_rows_added: int
    feedback_added: int = 0
    output: str = ""
    warnings: list[str] = field(default_factory=list)
    # shard file -> the status of its run (what the merged status comes from)
    shard_statuses: dict[str, str] = field(default_factory=dict)


@dataclass
class _Shard:
    path: Path
    store: Store
    run: dict[str, Any]
    golden: list[dict[str, Any]]
    results: list[dict[str, Any]]

    @property
    def name(self) -> str:
        return str(self.path)


def _listing(values: Sequence[str], limit: int = _SHOWN) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _rows(store: Store, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    return [dict(row) for row in store.db.query(sql, list(params))]


def _check_paths(shard_paths: Sequence[str | Path], output_path: Path) -> list[Path]:
    if not shard_paths:
        raise StoreError("merge needs at least one shard database")
    paths = [Path(p) for p in shard_paths]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise StoreError(f"shard database not found: {', '.join(missing)}")
    seen: dict[Path, Path] = {}
    for path in paths:
        resolved = path.resolve()
        if resolved in seen:
            raise StoreError(f"shard {path} is given twice (also as {seen[resolved]}): each shard is merged once")
        seen[resolved] = path
    if output_path.resolve() in seen:
        raise StoreError(f"{output_path}: the output is one of the shards\nHINT: merge into a new file, e.g. -o merged.db")
    return paths


def _pick_run(paths: list[Path], stores: list[Store], run_id: str | None) -> str:
    held = [[row[0] for row in store.db.conn.execute("SELECT id FROM runs ORDER BY started_at, id")] for store in stores]

    def holdings() -> str:
        return "; ".join(f"{path} holds {_listing(ids, 5) if ids else 'no runs'}" for path, ids in zip(paths, held))

    if run_id is not None:
        lacking = [str(path) for path, ids in zip(paths, held) if run_id not in ids]
        if lacking:
            raise StoreError(f"run {run_id} is not in {', '.join(lacking)} ({holdings()})\n"
                             "HINT: every shard must run with the same --crucible-run-id")
        return run_id
    common = set(held[0]).intersection(*held[1:])
    if len(common) == 1:
        return common.pop()
    if not common:
        raise StoreError(f"no run id is in every shard ({holdings()})\n"
                         "HINT: run every shard with the same --crucible-run-id, or pass --run-id")
    raise StoreError(f"the shards share {len(common)} runs ({_listing(sorted(common), 5)}): which one to merge?\n"
                     "HINT: pass --run-id ID")


def _check_agreement(shards: list[_Shard]) -> None:
    problems = []
    for column in _MUST_AGREE:
        by_value: dict[Any, list[str]] = {}
        for shard in shards:
            if column == "embedder" and shard.run.get(column) is None:
                continue  # a shard that measured no answer relevancy records no embedder
            by_value.setdefault(shard.run.get(column), []).append(shard.name)
        if len(by_value) > 1:
            problems.append(f"{column} differs: " + ", ".join(
                f"{value if value is not None else '(none)'} in {', '.join(names)}" for value, names in by_value.items()))
    if problems:
        raise StoreError(f"run {shards[0].run['id']}: the shards are not one run: {'; '.join(problems)}\n"
                         "HINT: every shard must run the same config, mode, judge and custom metrics; re-run the odd shard")


def _union_golden(shards: list[_Shard]) -> dict[str, dict[str, Any]]:
    """item id -> golden_items row (item parsed); refuses two versions of one item."""
    union: dict[str, dict[str, Any]] = {}
    seen_in: dict[str, list[str]] = {}
    conflicts: list[str] = []
    for shard in shards:
        for row in shard.golden:
            item_id = row["item_id"]
            seen_in.setdefault(item_id, []).append(shard.name)
            if item_id not in union:
                union[item_id] = row
            elif row["item"] != union[item_id]["item"] and item_id not in conflicts:
                conflicts.append(item_id)
    if conflicts:
        where = "; ".join(f"{item_id} ({', '.join(seen_in[item_id])})" for item_id in conflicts[:_SHOWN])
        more = f" and {len(conflicts) - _SHOWN} more" if len(conflicts) > _SHOWN else ""
        raise StoreError(f"golden items differ between shards (same id, different item): {where}{more}\n"
                         "HINT: every shard must read the same golden set; re-run the shards from one commit")
    return union


def _check_no_overlap(shards: list[_Shard]) -> None:
    scored_by: dict[str, list[str]] = {}
    for shard in shards:
        for row in shard.results:
            scored_by.setdefault(row["item_id"], []).append(shard.name)
    twice = sorted(item_id for item_id, names in scored_by.items() if len(names) > 1)
    if twice:
        where = "; ".join(f"{item_id} ({', '.join(scored_by[item_id])})" for item_id in twice[:_SHOWN])
        more = f" and {len(twice) - _SHOWN} more" if len(twice) > _SHOWN else ""
        raise StoreError(f"{len(twice)} item(s) scored by more than one shard: {where}{more}\n"
                         "HINT: the shards' selections must not overlap (each item in exactly one shard)")


def _merged_status(statuses: Iterable[str]) -> RunStatus:
    statuses = set(statuses)
    if statuses & {RunStatus.INTERRUPTED, RunStatus.RUNNING}:
        return RunStatus.INTERRUPTED
    if statuses == {RunStatus.FAILED}:  # no shard scored an item
        return RunStatus.FAILED
    if statuses & {RunStatus.INCOMPLETE, RunStatus.FAILED}:  # a failed shard beside others: its items are missing from the whole
        return RunStatus.INCOMPLETE
    return RunStatus.COMPLETE


def _sum(values: Iterable[Any]) -> Any:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _judge_stats(runs: list[dict[str, Any]]) -> str | None:
    total: dict[str, Any] = {}
    versions: dict[str, set[str]] = {}
    present = False
    for run in runs:
        if not run.get("judge_stats"):
            continue
        present = True
        for name, value in json.loads(run["judge_stats"]).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[name] = total.get(name, 0) + value
            elif isinstance(value, str):  # a version (retentionPrompt): kept when every shard that has one agrees
                versions.setdefault(name, set()).add(value)
    total.update({name: values.pop() for name, values in versions.items() if len(values) == 1})
    return json.dumps(total, sort_keys=True) if present else None


def _common(runs: list[dict[str, Any]], column: str) -> Any:
    values = {run.get(column) for run in runs}
    return values.pop() if len(values) == 1 else None


def _merged_run(shards: list[_Shard], golden_hash: str, n_items: int, warnings: list[str]) -> dict[str, Any]:
    runs = [shard.run for shard in shards]
    # Columns not compared (config_path, params, resolved, outcome_mode, judge_label,
    # pytest_args) are the first shard's: params/resolved follow from config_hash.
    run = dict(runs[0])
    finished = [r["finished_at"] for r in runs if r.get("finished_at")]
    run.update(
        status=_merged_status(r["status"] for r in runs),
        started_at=min(r["started_at"] for r in runs),
        finished_at=max(finished) if finished else None,
        golden_hash=golden_hash,
        n_items=n_items,
        judge_stats=_judge_stats(runs),
        **{column: _sum(r.get(column) for r in runs) for column in ("n_scored", "n_errored", "n_skipped")},
        # A key counts as unread only when no shard's pipeline read it.
        unread_keys=json.dumps(sorted(set.intersection(*(set(json.loads(r.get("unread_keys") or "[]")) for r in runs)))),
        git_commit=_common(runs, "git_commit"),
        host=_common(runs, "host"),
        pid=None,  # no process owns a merged run
        # Shards are partial selections (pytest-split deselects the other shards' items): together, the whole set.
        selection=_merged_selection(runs, n_items + sum(r.get("n_skipped") or 0 for r in runs)),
        **{column: _sum(r.get(column) for r in runs) for column in _JUDGE_SUMS},
    )
    commits = sorted({str(r.get("git_commit")) for r in runs})
    if len(commits) > 1:
        warnings.append(f"the shards ran different git commits ({', '.join(commits)}); the merged run records none")
    return run


def _merged_selection(runs: list[dict[str, Any]], n_items: int) -> str | None:
    from .selection import merged_selection, selection_of

    merged = merged_selection([selection_of(run) for run in runs], n_items)
    return merged.to_json() if merged is not None else None


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _insert_rows(conn: sqlite3.Connection, table: str, rows: Iterable[dict[str, Any]], *, verb: str = "INSERT") -> int:
    columns = _columns(conn, table)
    added = 0
    for row in rows:
        present = [column for column in columns if column in row]
        cursor = conn.execute(
            f"{verb} INTO {table} ({', '.join(present)}) VALUES ({', '.join('?' for _ in present)})",
            [row[column] for column in present])
        added += max(cursor.rowcount, 0)
    return added


def _add_qrels(out: Store, rows: list[dict[str, Any]]) -> int:
    """The shards' judgments are copies of ledger rows: the store's one duplicate rule for them
    (``Store._write_qrels`` with ``copied=True``; the output numbers its own ledger)."""
    return out._write_qrels(rows, utc_now(), copied=True)


def merge_shards(shard_paths: Sequence[str | Path], output_path: str | Path, *, run_id: str | None = None) -> MergeReport:
    """Merge one run spread over shard databases into ``output_path`` (created if missing).

    Raises :class:`StoreError` (nothing written) when the shards are not one run: a
    different config, mode or judge, two versions of a golden item, an item scored by two
    shards, or a run id already in the output.
    """
    from ..golden_set.schema import golden_set_hash
    from . import is_file, locate

    named = [locate(path) for path in shard_paths if not is_file(path)]
    if named:  # a shard is one session's own file (sessions that share a PostgreSQL database write their own runs)
        raise StoreError(f"{named[0]}: crucible merge joins SQLite shard files (each shard's --crucible-db)\n"
                         "HINT: give each shard its own file (--crucible-db=shard-N.db); the merge may go into a PostgreSQL database (-o URL)")
    if not is_file(output_path):
        return _merge_into_server(shard_paths, locate(output_path), run_id)
    output_path = Path(output_path)
    paths = _check_paths(shard_paths, output_path)
    stores: list[Store] = []
    try:
        for path in paths:
            stores.append(Store.open(path, create=False))
        run_id = _pick_run(paths, stores, run_id)
        shards = []
        for path, store in zip(paths, stores):
            golden = _rows(store, "SELECT item_id, source, line, item FROM golden_items WHERE run_id = ? ORDER BY item_id", [run_id])
            for row in golden:
                row["item"] = json.loads(row["item"])
            shards.append(_Shard(path, store, store.get_run(run_id), golden, store.results(run_id, decoded=True)))
        _check_agreement(shards)
        union = _union_golden(shards)
        _check_no_overlap(shards)

        golden_hash = golden_set_hash(row["item"] for row in union.values())
        warnings: list[str] = []
        # A shard's n_items counts the items it lost (a full disk): they stay lost in the merged run.
        n_items = sum(max(shard.run.get("n_items") or 0, len(shard.results)) for shard in shards)
        run = _merged_run(shards, golden_hash, n_items, warnings)
        # Every judgment of the ledger, oldest first across shards (the newest human one wins).
        qrels = sorted(((row["created_at"], index, row["id"], row) for index, shard in enumerate(shards)
                        for row in _rows(shard.store, "SELECT * FROM qrels ORDER BY id")), key=lambda entry: entry[:3])
        report = MergeReport(run_id=run_id, shards=[shard.name for shard in shards], items=n_items, golden_hash=golden_hash,
                             status=run["status"], qrels_added=0, cache_rows_added=0, output=str(output_path), warnings=warnings,
                             shard_statuses={shard.name: shard.run["status"] for shard in shards})
        _write(shards, output_path, run, union, [entry[3] for entry in qrels], report)
        return report
    finally:
        for store in stores:
            store.close()


def _write(shards: list[_Shard], output_path: Path, run: dict[str, Any], union: dict[str, dict[str, Any]],
           qrels: list[dict[str, Any]], report: MergeReport) -> None:
    run_id = run["id"]
    created = not output_path.exists()
    out = None
    failed = True
    try:
        out = Store.open(output_path)
        conn = out.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", [run_id]).fetchone():
                raise StoreError(f"{output_path}: already has a run {run_id}; nothing was merged\n"
                                 "HINT: merge into another file, or a fresh one")
            _insert_rows(conn, "runs", [run])
            out._write_items(run_id, golden=union.values())
            for shard in shards:
                store = shard.store
                metrics = store.db.conn.execute("SELECT item_id, metric, value FROM item_metrics WHERE run_id = ? ORDER BY rowid", [run_id])
                out._write_items(run_id, results=shard.results, metrics=metrics)
                for table in ("item_repeats", "item_attempts"):
                    _insert_rows(conn, table, _rows(store, f"SELECT * FROM {table} WHERE run_id = ?", [run_id]))
                _insert_rows(conn, "golden_concepts", _rows(store, "SELECT * FROM golden_concepts WHERE run_id = ?", [run_id]),
                             verb="INSERT OR IGNORE")
                cache = _rows(store, "SELECT * FROM judge_cache ORDER BY key")
                report.cache_rows_added += _insert_rows(conn, "judge_cache", cache, verb="INSERT OR IGNORE")
                feedback = _rows(store, "SELECT * FROM eval_feedback WHERE run_id = ? ORDER BY id", [run_id])
                report.feedback_added += _insert_rows(conn, "eval_feedback", feedback, verb="INSERT OR IGNORE")
            report.qrels_added = _add_qrels(out, qrels)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        failed = False
    except sqlite3.Error as exc:
        raise StoreError(f"{output_path}: merging run {run_id} failed, nothing was written: {exc}") from None
    finally:
        if out is not None:
            out.close()
        if failed and created:
            # The output did not exist before: leave no half-made file behind.
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{output_path}{suffix}").unlink(missing_ok=True)


def _merge_into_server(shard_paths: Sequence[str | Path], output: Any, run_id: str | None) -> MergeReport:
    """Merge the shard files into a team's PostgreSQL database: the same merge into a new file beside
    nothing else, then ``crucible copy`` of that run (idempotent: a run already there is left as it is)."""
    import tempfile

    from .copy import copy_store

    with tempfile.TemporaryDirectory(prefix="crucible-merge-") as folder:
        merged = Path(folder) / "merged.db"
        report = merge_shards(shard_paths, merged, run_id=run_id)
        copied = copy_store(merged, output, run_ids=[report.run_id])
    if copied.runs_present:
        report.warnings.append(f"run {report.run_id} was already in {output}: left as it was")
    return report
