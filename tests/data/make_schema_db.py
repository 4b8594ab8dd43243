"""Make tests/data/crucible-schema-vN.db with the Store API of the code that wrote schema N.

The database is written by the pytest_crucible found on PYTHONPATH, so it is exactly what
that version wrote. From the repository root (read-only use of git: a throwaway worktree):

    git worktree add /tmp/crucible-v3 5a5d2c0
    PYTHONPATH=/tmp/crucible-v3/src .venv/bin/python tests/data/make_schema_db.py
    git worktree remove /tmp/crucible-v3

Commits used (the last commit at each schema version): v2 052435a, v3 5a5d2c0, v4 03209e4,
v5 418f1d7, v6 ea2a414, v7 724b073; v9 the tree just before schema 10 (drafts by workspace, the
promoting key on the feedback row); v10 fd63b3d, the tree just before schema 11 (custom metrics); v11 3fdad0d (before repeats and human labels); v12 163fe98 (before runs recorded their embedder); v13 8efe5a4 (before runs recorded their cutoff K); v14 2735f66 (before runs recorded their selection and items their attempts); v15 6dce8b5 (before runs recorded their error class set); v16 808dde7 (before results kept an agent's tool calls); v17 5509b42 (before runs recorded their conversations' history); v18 fc42823 (before values were stored once, in contents; its export pinned beside it: ``crucible-schema-v18-export.json``); and ``--name v4-42be2d4`` from 42be2d4, the first v4, which wrote results without
the crag_grade column the v4 migration gained a commit later. (v1 is tests/data/make_schema_v1_db.py.)

What the version can hold is written through its own API: two runs (one complete, one
incomplete), results with answers, verdicts and metrics, judge cache rows, provenance
qrels, and - where the version has them - llm and human judgments, concepts, error classes,
feedback rows and a promoted draft. tests/test_schema_migrations.py reads each file with plain
sqlite3 before and after the current code migrates it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sqlite3
from pathlib import Path

import pytest_crucible
from pytest_crucible.store import Store
from pytest_crucible.store.schema import SCHEMA_VERSION

HERE = Path(__file__).resolve().parent
RUN_A, RUN_B = "01KZSCHEMARUNA0000000000000", "01KZSCHEMARUNB0000000000000"


def call(method, **kwargs):
    """Call a Store method with the keyword arguments this version accepts."""
    accepted = inspect.signature(method).parameters
    return method(**{key: value for key, value in kwargs.items() if key in accepted})


def score(run: str, n: int, *, mode: str) -> dict:
    item = {"id": f"q{n}", "question": f"How long is warranty {n}?", "reference": f"{n} years.",
            "citations": [{"docId": "warranty", "chunkId": f"warranty#p{n}", "mode": "required"}, {"docId": "faq", "mode": "acceptable"}],
            "concepts": [{"id": "c-warranty", "grade": "required"}], "tags": ["topic:warranty"]}
    return {
        "item_id": item["id"], "question": item["question"], "item": item, "source": "golden_warranty.jsonl", "line": n,
        "answer": None if mode == "component" else f"The warranty lasts {n} years [S1].",
        "retrieved": [{"chunk_id": f"warranty#p{n}", "doc_id": "warranty", "text": "...", "score": 0.9},
                      {"chunk_id": "faq#p1", "doc_id": "faq", "text": "...", "score": 0.4}],
        "citations": [f"warranty#p{n}"], "confidence": 0.3 * n, "abstained": n == 3, "latency_ms": 12.5 + n,
        "outcome": "failed" if n == 2 else "passed", "failures": ["missed warranty#p2"] if n == 2 else [],
        "metrics": {"ndcgAt10": 1.0 / n, "recallAtK": 1.0, **({"faithfulness": 0.5 + 0.1 * n} if mode == "system" else {})},
        "verdicts": {"correctness": {"grade": "perfect", "reason": "ok"}} if mode == "system" else None,
        "judge_errors": [f"claims request failed for q{n}"] if run == RUN_B and n == 1 else [],
        "pool": {"judged": 2, "unjudged": 0}, "assertions": [{"text": f"{n} years", "satisfied": True}],
        "result_id": f"01KZSCHEMARES{'A' if run == RUN_A else 'B'}{n:013d}", "error_class": "hallucination" if n == 2 else "correct",
        "error_evidence": "claim unsupported" if n == 2 else None, "crag_grade": "incorrect" if n == 2 else "perfect",
        "cache_rows": [{"key": f"{run}-{n}", "judge_model": "lexical-v1", "prompt_version": "lexical-v1", "kind": "claims",
                        "request": json.dumps({"text": item["question"]}), "verdict": json.dumps({"claims": [f"{n} years"]})}],
    }


def write(path: Path) -> None:
    store = Store.open(path)
    for run, mode, status, items in ((RUN_A, "system", "complete", (1, 2, 3)), (RUN_B, "component", "incomplete", (1, 2))):
        call(store.start_run, run_id=run, config_hash=("a" if run == RUN_A else "b") * 64, params={"retrievalLimit": 5},
             resolved={"retrievalLimit": 5, "retrieval": {"rerank": run == RUN_B}}, mode=mode, outcome_mode="record",
             config_path="configs/base.json", git_commit="0" * 40, pytest_args=["-q"], judge_model="lexical-v1",
             judge_prompt_version="lexical-v1", judge_label="lexical-v1 (offline heuristic)", cost_estimate_usd=0.0)
        for n in items:
            store.record_score(run, score(run, n, mode=mode))
        call(store.finish_run, run_id=run, status=status if SCHEMA_VERSION >= 2 else "complete", golden_hash="g" * 64,
             judge={"stats": {"requests": 6}, "cost_usd": 0.0, "input_tokens": 100, "output_tokens": 10})
    if hasattr(store, "append_qrels"):  # schema 3: llm and human judgments
        store.append_qrels([
            {"query_id": "q1", "chunk_id": "faq#p1", "doc_id": "faq", "grade": 1, "source": "llm", "judge_model": "claude-x", "prompt_version": "umbrela-v1"},
            {"query_id": "q1", "chunk_id": "warranty#p1", "doc_id": "warranty", "grade": 2, "source": "human", "created_by": "dana", "note": "partly"},
            {"query_id": "q1", "chunk_id": "warranty#p1", "doc_id": "warranty", "grade": 3, "source": "human", "created_by": "bob"},
        ])
    try:  # schema 4: a promoted correction (draft golden item + feedback row)
        from pytest_crucible.golden_set.promote import promote
    except ImportError:
        pass
    else:
        promote(store, {"runId": RUN_A, "resultId": score(RUN_A, 2, mode="system")["result_id"], "question": "How long is warranty 2?",
                        "correctedAssertions": ["2 years"], "citations": [{"docId": "warranty", "chunkId": "warranty#p2"}],
                        "errorClass": "hallucination", "tags": ["topic:warranty"], "correctedBy": "dana"})
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default=None, help="file name part (default vN, N = the imported schema version)")
    args = parser.parse_args()
    name = args.name or f"v{SCHEMA_VERSION}"
    print(f"schema {SCHEMA_VERSION} from {pytest_crucible.__file__}")
    path = HERE / f"crucible-schema-{name}.db"
    for stale in HERE.glob(f"crucible-schema-{name}.db*"):
        stale.unlink()
    write(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
    conn.execute("VACUUM")
    conn.close()
    print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
