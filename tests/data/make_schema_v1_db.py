"""Make tests/data/crucible-schema-v1.db: a database as schema version 1 wrote it.

Run once, from the repository root: python tests/data/make_schema_v1_db.py
The file is committed; the migration test opens a copy and checks nothing is lost.
"""

import sqlite3
from pathlib import Path

from pytest_crucible.store.schema import MIGRATIONS

path = Path(__file__).with_name("crucible-schema-v1.db")
path.unlink(missing_ok=True)
conn = sqlite3.connect(path)
conn.executescript(f"BEGIN;\n{MIGRATIONS[0]}\nPRAGMA user_version = 1;\nCOMMIT;")
runs = [
    ("01KZRUNA00000000000000000", "2026-11-01T10:00:00.000Z", "complete", '{}', "system"),
    ("01KZRUNB00000000000000000", "2026-11-02T10:00:00.000Z", "interrupted", '{"retrieval": {"rerank": true}}', "component"),
]
for run_id, started, status, params, mode in runs:
    conn.execute(
        "INSERT INTO runs (id, started_at, finished_at, status, config_hash, config_path, params, resolved, mode, outcome_mode,"
        " golden_hash, n_items, git_commit, pytest_args, host, pid) VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, 'strict', 'g', 2, NULL, '[]', 'h', 1)",
        [run_id, started, started, status, "c" * 64, params, '{"retrievalLimit": 10}', mode],
    )
    for item, value in (("q1", 1.0), ("q2", 0.5)):
        conn.execute(
            "INSERT INTO results (run_id, item_id, question, answer, retrieved, citations, outcome, recorded_at)"
            " VALUES (?, ?, 'Q?', 'A', '[]', '[]', 'passed', ?)", [run_id, item, started])
        conn.execute("INSERT INTO item_metrics VALUES (?, ?, 'ndcgAt10', ?)", [run_id, item, value])
        conn.execute("INSERT INTO golden_items VALUES (?, ?, 'golden_x.jsonl', 1, ?)", [run_id, item, f'{{"id": "{item}", "question": "Q?"}}'])
conn.execute("INSERT INTO qrels (query_id, doc_id, grade, source, judge_model, created_at) VALUES ('q1', 'd1', 3, 'provenance', '', 'x')")
conn.commit()
conn.execute("VACUUM")
conn.close()
print(f"wrote {path}")
