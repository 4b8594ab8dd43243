"""Pool labelling: grade the retrieved chunks that nobody has judged yet (UMBRELA-style).

For each of the top-k retrieved chunks whose unit has no effective judgment, the judge
engine grades relevance 0-3 (0 unrelated, 1 related but does not answer, 2 partly
answers, 3 dedicated to the question with the exact answer). The verdicts become
``llm`` rows of the qrels ledger, stamped with the judge model and prompt version, so
the next run finds them judged and asks nothing (and the engine's cache would answer
anyway). This module never imports pytest.
"""

from __future__ import annotations

from typing import Any

from ..golden_set.schema import GoldenItem
from ..judge.types import JudgeFailure, RelevanceRequest
from ..metrics.retrieval import ranking_units
from .pipeline import ranking_of


def label_pool(item: GoldenItem, data: dict[str, Any], k: int, judgments: dict[str, tuple[int, str]], engine) -> tuple[list[dict[str, Any]], list[str]]:
    """Judge the unjudged top-k chunks of a result (``data``: ``pipeline.result_data``); returns (new llm ledger rows, errors)."""
    qrels = {unit: grade for unit, (grade, _) in judgments.items()}
    top = ranking_of(data)[:k]
    units = ranking_units([(chunk["chunk_id"], chunk["doc_id"]) for chunk in top], qrels)
    # Duplicate units ("dup:...") are already counted once; only fresh chunks are graded.
    wanted = [chunk for chunk, unit in zip(top, units) if unit.startswith("chunk:") and unit not in qrels]
    if not wanted:
        return [], []
    # now=True: the grades feed this item's retrieval metrics, so they cannot wait for a Message Batch.
    verdicts = engine.run([RelevanceRequest(question=item.question, chunk=chunk["text"]) for chunk in wanted], now=True)
    rows, errors = [], []
    for chunk, verdict in zip(wanted, verdicts):
        if isinstance(verdict, JudgeFailure):
            errors.append(f"relevance of {chunk['chunk_id']}: {verdict.message}")
            continue
        rows.append({
            "query_id": item.id, "chunk_id": chunk["chunk_id"], "doc_id": chunk["doc_id"], "grade": int(verdict.grade),
            "source": "llm", "judge_model": verdict.judge_model, "prompt_version": verdict.prompt_version,
        })
    return rows, errors
