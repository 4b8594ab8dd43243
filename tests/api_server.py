"""The HTTP API under test: uvicorn in a thread of the test process, on a free 127.0.0.1 port,
and a stored-run database made through the Store API."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from pytest_crucible.defaults import ServerLimits
from pytest_crucible.server.keys import create_key
from pytest_crucible.store import Store

ITEMS = 12


def add_run(store: Store, *, workspace: str, shift: float = 0.0, judge: str | None = "claude-haiku-5-5",
            prompt: str = "crucible-v1", labels: dict[str, str] | None = None, config_hash: str = "9f2c" + "0" * 60,
            questions: dict[int, str] | None = None) -> str:
    """A complete run of ITEMS items with retrieval, RAGAS and abstention metrics; ``shift`` moves nDCG up;
    ``questions``: item number -> its question, when not the usual one (an item edited under its id)."""
    run_id = store.start_run(config_hash=config_hash, params={}, resolved={"retrievalLimit": 10}, mode="system",
                             outcome_mode="record", judge_model=judge, judge_prompt_version=prompt if judge else None,
                             workspace=workspace, labels=labels or {"model": "chat", "collection": workspace})
    for i in range(ITEMS):
        kind = "multi_hop" if i % 2 else "simple"
        item = {"id": f"q{i:02d}", "question": (questions or {}).get(i, f"question {i}?"), "questionType": kind, "tags": ["topic:returns"],
                "citations": [{"docId": f"doc{i}", "mode": "required"}]}
        store.record_score(run_id, {
            "item_id": item["id"], "question": item["question"], "item": item, "outcome": "passed",
            "answer": "an answer [S1]", "confidence": 0.5 + 0.04 * i, "crag_grade": "perfect" if i % 3 else "incorrect",
            "error_class": "correct" if i % 3 else "hallucination", "error_evidence": None if i % 3 else "claim 1 unsupported",
            "metrics": {"ndcgAt10": min(1.0, 0.4 + 0.03 * i + shift), "recallAtK": 0.5 + 0.02 * (i % 5),
                        "faithfulness": 0.7 + 0.01 * (i % 4), "truthfulness": 1.0 if i % 3 else -1.0},
        })
    store.finish_run(run_id, status="complete", golden_hash="g" * 64)
    return run_id


def make_db(tmp_path: Path, *workspaces: str) -> tuple[Path, dict[str, list[str]]]:
    """A database with two complete runs per workspace (default: shop); workspace -> run ids."""
    db = tmp_path / "crucible.db"
    store = Store.open(db)
    runs = {workspace: [add_run(store, workspace=workspace), add_run(store, workspace=workspace, shift=0.2)]
            for workspace in workspaces or ("shop",)}
    store.close()
    return db, runs


def new_key(db: Path, workspace: str, *scopes: str, name: str | None = None) -> str:
    store = Store.open(db, create=False)
    try:
        return create_key(store.db.conn, workspace=workspace, scopes=scopes, name=name)[1]
    finally:
        store.close()


@contextmanager
def serve_in_thread(db: Path, limits: ServerLimits = ServerLimits(), *, forwarded_allow_ips: tuple[str, ...] = ()) -> Iterator[str]:
    """Serve ``db`` as `crucible serve` does (``serving.build_server``) until the block ends; yields the base URL."""
    with server_in_thread(db, limits, forwarded_allow_ips=forwarded_allow_ips) as (url, _):
        yield url


@contextmanager
def server_in_thread(db: Path, limits: ServerLimits = ServerLimits(), *,
                     forwarded_allow_ips: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """As serve_in_thread, yielding the base URL and the ``uvicorn.Server`` (its ``server_state`` holds the
    open connections)."""
    from pytest_crucible.server import listen
    from pytest_crucible.server.serving import build_server

    listener = listen("127.0.0.1", 0, active_keys=1, db=db)
    server = build_server(db, limits, log_level="warning", lifespan="off", forwarded_allow_ips=forwarded_allow_ips)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener.sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a start-up bound, not a speed assertion
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield listener.url, server
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.sock.close()


# The tests speak plain HTTP to 127.0.0.1, so no certificate is ever checked; one context for every
# client spares each new httpx.Client loading the CA bundle again (tens of ms each, hundreds of clients).
_TLS = ssl.create_default_context()


def client(base_url: str, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    # trust_env off: no proxy from the environment may sit between the test and 127.0.0.1.
    return httpx.Client(base_url=base_url, headers=headers, timeout=60, trust_env=False, verify=_TLS)
