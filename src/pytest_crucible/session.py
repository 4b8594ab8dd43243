"""The one stateful object of a pytest session, kept in ``config.stash``.

It is built from frozen :class:`Settings` and knows nothing about pytest: the
plugin feeds it scores and asks it for the summary. Only the process that owns
the run (the controller under xdist) opens the store.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import TrackedConfig, unread_changed_keys

MODES = ("system", "component")


@dataclass(frozen=True)
class Settings:
    params: dict[str, Any]
    resolved: dict[str, Any]
    config_hash: str
    config_path: str | None
    db_path: Path
    mode: str = "system"
    outcome_mode: str = "strict"
    include_drafts: bool = False
    golden_patterns: tuple[str, ...] = ("golden_*.jsonl", "*.golden.jsonl")
    rootdir: Path = Path(".")
    pytest_args: tuple[str, ...] = ()

    @property
    def retrieval_limit(self) -> int:
        return int(self.resolved["retrievalLimit"])


def git_commit(directory: Path) -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@dataclass
class CrucibleSession:
    settings: Settings
    is_worker: bool = False
    run_id: str | None = None
    evaluated: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    config_reads: set[str] = field(default_factory=set)
    status: str | None = None
    _store: Any = None
    _tracked: TrackedConfig | None = None

    # -- the config handed to the pipeline ---------------------------------------
    @property
    def tracked_config(self) -> TrackedConfig:
        if self._tracked is None:
            self._tracked = TrackedConfig(self.settings.resolved, self.config_reads)
        return self._tracked

    def unread_config_keys(self) -> list[str]:
        if not self.evaluated:
            return []
        return unread_changed_keys(self.settings.resolved, self.config_reads)

    # -- the run in the store ------------------------------------------------------
    @property
    def store(self):
        if self._store is None:
            from .store import Store

            self._store = Store.open(self.settings.db_path)
        return self._store

    def _ensure_run(self) -> str:
        if self.run_id is None:
            s = self.settings
            self.run_id = self.store.start_run(
                config_hash=s.config_hash,
                params=s.params,
                resolved=s.resolved,
                mode=s.mode,
                outcome_mode=s.outcome_mode,
                config_path=s.config_path,
                git_commit=git_commit(s.rootdir),
                pytest_args=list(s.pytest_args),
            )
        return self.run_id

    def record(self, score: dict[str, Any]) -> None:
        """Store one item's score. A store failure is kept as a fault, never lost silently."""
        outcome = score.get("outcome") or "unknown"
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if self.is_worker:
            return
        try:
            self.store.record_score(self._ensure_run(), score)
        except Exception as exc:  # noqa: BLE001 - reported as a fault that fails the session
            self.faults.append(f"could not record item {score.get('item_id')!r} in {self.settings.db_path}: {exc}")

    def finish(self, interrupted: bool) -> None:
        if self.is_worker or self.run_id is None:
            return
        from .golden_set import golden_set_hash

        store = self.store
        self.status = "interrupted" if interrupted else "complete"
        store.finish_run(self.run_id, status=self.status, golden_hash=golden_set_hash(store.golden_items(self.run_id)))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- what the terminal shows -------------------------------------------------------
    def summary_lines(self) -> list[str]:
        if self.run_id is None:
            return []
        from .report.terminal import run_summary_lines

        return run_summary_lines(self.store, self.run_id, unread_keys=self.unread_config_keys(), faults=self.faults)
