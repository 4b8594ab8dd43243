"""A pytest process killed mid-run: the file stays sound, earlier runs stay intact, the run is marked interrupted."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from pytest_crucible.store import Store

CONFTEST = """
import os, time
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        if os.environ.get("SLOW") == "1":
            with open("progress.txt", "a") as fh:
                fh.write(item.id + "\\n")
            time.sleep(0.05)
        return {"answer": None, "retrieved": [{"chunk_id": item.id + "#1", "doc_id": item.id}]}
    return pipeline
"""


def test_sigkill_mid_run(pytester: pytest.Pytester) -> None:
    items = [{"id": f"k-{i:03d}", "question": "q", "citations": [{"docId": f"k-{i:03d}"}]} for i in range(300)]
    (pytester.path / "golden_kill.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\n")
    db = pytester.path / ".crucible" / "crucible.db"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    assert subprocess.run(command, cwd=pytester.path, capture_output=True, timeout=300).returncode == 0
    conn = sqlite3.connect(db)
    before = conn.execute("SELECT id, status, n_items FROM runs").fetchall()
    before_metrics = conn.execute("SELECT item_id, metric, value FROM item_metrics ORDER BY item_id, metric").fetchall()
    conn.close()
    assert before[0][1:] == ("complete", 300)

    process = subprocess.Popen(command, cwd=pytester.path, env={**os.environ, "SLOW": "1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress = pytester.path / "progress.txt"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not progress.exists() or len(progress.read_text().split()) < 120):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert len(progress.read_text().split()) < 300  # killed in the middle

    store = Store.open(db)  # detects the dead run
    conn = store.db.conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = conn.execute("SELECT id, status, n_items FROM runs ORDER BY rowid").fetchall()
    assert runs[0] == before[0]  # the earlier run is unchanged
    assert conn.execute("SELECT item_id, metric, value FROM item_metrics WHERE run_id = ? ORDER BY item_id, metric",
                        [before[0][0]]).fetchall() == before_metrics
    killed_id, killed_status, _ = runs[1]
    assert killed_status == "interrupted"
    kept = conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", [killed_id]).fetchone()[0]
    assert 50 <= kept < 300  # finished items were kept, up to the last unwritten batch
    store.close()
