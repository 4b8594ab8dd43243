"""The one reading of a run a user names, for every surface (the plugin's ``--crucible-baseline``,
``crucible compare/report/show/copy``, the HTTP API, ``Store.resolve_run``): :func:`parse_run_ref` reads
the reference (a run id or prefix, ``latest``, ``latest:KEY=VALUE,...``, an exported ``.json``) and
:func:`resolve_run_ref` finds the stored run it names; :func:`find_runs` picks runs by workspace, labels
and start time. ``verdict/runs.py`` re-exports them beside the run model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .database import RunNotFound, StoreError
from .schema import RunStatus

if TYPE_CHECKING:
    from .runs import RunsMixin as Store  # all a reference needs of the store: its runs

# Run statuses a gate takes at face value; any other needs --crucible-allow-incomplete.
COMPLETE = RunStatus.COMPLETE
LATEST = "latest"
# In ``latest:KEY=VALUE,...`` this key picks the workspace; every other key is a label.
WORKSPACE_KEY = "workspace"
REF_EXAMPLE = "latest:branch=main, or latest:branch=main,model=gpt-x (every label must match; workspace=NAME reads that workspace)"
# Label values a no-match HINT lists per key before it says how many more there are.
HINT_VALUES = 12


def is_export_path(ref: str) -> bool:
    """Whether a run reference names an exported run file rather than a stored run (the one test)."""
    if ref.startswith(LATEST + ":"):  # a run chosen by its labels, whatever its values end with
        return False
    return ref.endswith(".json") or Path(ref).is_file()


@dataclass(frozen=True)
class RunRef:
    """A run as a user named it: ``text`` as given; ``latest`` (the newest complete run, of ``workspace``
    when the reference names one, with every one of ``labels``); else an exported run file (``export``)
    or a run id or unique prefix."""

    text: str
    latest: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    workspace: str | None = None

    @property
    def export(self) -> bool:
        """Whether it names an exported run file (asked only where a file may be read: never by the HTTP API)."""
        return not self.latest and is_export_path(self.text)

    @property
    def wanted(self) -> str:
        """The labels as the reference gives them: ``branch=main,model=gpt-x``."""
        return ",".join(f"{key}={value}" for key, value in self.labels)


def parse_run_ref(ref: str | RunRef) -> RunRef:
    """Read a run reference: a run id or unique prefix, ``latest``, ``latest:KEY=VALUE[,KEY=VALUE...]``
    (``workspace=NAME`` picks the workspace instead of a label), or an exported run (``PATH.json``).
    Raises ``StoreError`` with an example for a malformed ``latest:`` reference."""
    if isinstance(ref, RunRef):
        return ref
    if ref == LATEST:
        return RunRef(ref, latest=True)
    if not ref.startswith(LATEST + ":"):
        return RunRef(ref)
    from ..config import parse_labels

    def bad(piece: str, problem: str) -> Exception:
        return StoreError(f"run reference '{ref}': expected latest:KEY=VALUE[,KEY=VALUE...], got '{piece}' ({problem})"
                          f"\nHINT: e.g. {REF_EXAMPLE}")

    labels = parse_labels([part.strip() for part in ref[len(LATEST) + 1:].split(",")], need_value=True, once=True, error=bad)
    workspace = labels.pop(WORKSPACE_KEY, None)
    return RunRef(ref, latest=True, labels=tuple(labels.items()), workspace=workspace)


def resolve_run_ref(store: Store, ref: str | RunRef, *, workspace: str | None = None, exclude: str | None = None,
                    place: str | None = None) -> str:
    """The id of the stored run ``ref`` names (:func:`parse_run_ref`): an id or unique prefix in any workspace;
    ``latest`` the newest complete run of ``workspace`` (the reference's ``workspace=`` over the caller's;
    None: every workspace) other than ``exclude``, with every label the reference gives.

    Raises ``RunNotFound`` naming the labels and the workspace, whose HINT lists the values the complete runs
    there do carry for those keys. ``place``: how that message names where it looked (default: the workspace
    and the database file; the HTTP API names no local path)."""
    parsed = parse_run_ref(ref)
    if not parsed.latest:
        return store.run_id_from_prefix(parsed.text)
    workspace = parsed.workspace if parsed.workspace is not None else workspace
    found = find_runs(store, workspace=workspace, labels=dict(parsed.labels), complete=True, exclude=exclude, limit=1)
    if found:
        return found[0]["id"]
    if not parsed.labels and place is None:  # plain `latest`: why a run would not be one, and where else to look
        where = f"workspace '{workspace}' of {store.path}" if workspace is not None else str(store.path)
        raise RunNotFound(f"no complete run in {where}\nHINT: run the whole golden set once to make a baseline "
                          "(a run of a selection, -k, -m or --lf, is never `latest`: name it by its id)"
                          + (", or pick another workspace (--workspace NAME; `crucible runs --all-workspaces` lists them)"
                             if workspace is not None else ""))
    raise RunNotFound(_no_match(store, parsed, workspace, exclude, place))


def _no_match(store: Store, ref: RunRef, workspace: str | None, exclude: str | None, place: str | None) -> str:
    """Why no run matched ``ref``, then a HINT: the values its label keys take in the complete runs there."""
    where = place or (f"workspace '{workspace}' of {store.path}" if workspace is not None else str(store.path))
    if not ref.labels:
        return f"no complete run in {where}\nHINT: run the golden set once to make one"
    others = [run for run in find_runs(store, workspace=workspace, labels=dict(ref.labels)) if run["id"] != exclude]
    statuses = sorted({str(run.get("status")) for run in others})
    why = (f" ({len(others)} run{'s' if len(others) != 1 else ''} with these labels, none complete: {', '.join(statuses)})"
           if others else "")
    first = ref.labels[0]
    return (f"no complete run labelled {ref.wanted} in {where}{why}\n"
            f"HINT: {carried_labels(store, [key for key, _ in ref.labels], workspace, exclude)}; a run gets a label "
            f"from --crucible-label {first[0]}={first[1]} or the config file's \"labels\"")


def carried_labels(store: Store, keys: Iterable[str], workspace: str | None, exclude: str | None = None) -> str:
    """The values the complete runs of ``workspace`` (other than ``exclude``) carry for each label key:
    "the complete runs there carry branch: feature-x, main; model: gpt-x" (a no-match's HINT)."""
    complete = find_runs(store, workspace=workspace, complete=True, exclude=exclude)
    if not complete:
        return "there is no other complete run there" if exclude else "there is no complete run there yet"
    carried = []
    for key in keys:
        values = sorted({labels[key] for labels in map(labels_of, complete) if key in labels})
        shown = ", ".join(values[:HINT_VALUES]) + (f" and {len(values) - HINT_VALUES} more" if len(values) > HINT_VALUES else "")
        carried.append(f"{key}: {shown or '(no complete run has this label)'}")
    return "the complete runs there carry " + "; ".join(carried)


def labels_of(run: dict[str, Any]) -> dict[str, str]:
    """A run row's labels (stored as JSON text, or already a mapping)."""
    raw = run.get("labels")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    return {str(key): str(value) for key, value in raw.items()} if isinstance(raw, dict) else {}


def started_at(run: dict[str, Any]) -> datetime:
    """When a run started, as an aware UTC datetime (the store writes ISO text: ``2025-06-01T10:00:00.000Z``)."""
    value = run.get("started_at")
    if not isinstance(value, datetime):
        value = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def find_runs(store: Store, *, workspace: str | None = None, labels: dict[str, str] | None = None,
              since: datetime | None = None, config_hash: str | None = None, complete: bool = False,
              exclude: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Run rows, newest first: of ``workspace`` (None: every one), with every one of ``labels``, started at or
    after ``since``, ``complete`` ones only when asked (complete runs of the whole golden set: a partial selection
    is never a baseline by default), never ``exclude``; at most ``limit``."""
    filtered = since is not None or complete or exclude is not None
    rows = store.list_runs(None if filtered else limit, workspace=workspace, config_hash=config_hash, labels=labels or None)
    found = []
    for run in rows:
        if since is not None and started_at(run) < since:
            break  # newest first: every later row started earlier still
        if (complete and (run.get("status") != COMPLETE or run.get("selection"))) or run["id"] == exclude:
            continue
        found.append(run)
        if limit and len(found) >= limit:
            break
    return found

