"""The helpdesk pipeline: retrieve, optionally rerank, then answer.

``HelpdeskRAG`` is a plain callable so that a test harness can drive it::

    rag = HelpdeskRAG.from_directory("corpus")
    out = rag("Can I return an e-bike I rode 80 km?", item=None,
              config={"retrievalLimit": 10,
                      "retrieval": {"rerank": True, "candidatePool": 40,
                                    "tokenBudget": 3000}},
              mode="system")

Configuration keys read (and only when they matter):

* ``retrievalLimit``            - length of the returned ranking;
* ``retrieval.rerank``          - enable the second-stage reranker;
* ``retrieval.candidatePool``   - BM25 candidates given to the reranker
                                  (read only when reranking);
* ``retrieval.tokenBudget``     - context budget for the answerer
                                  (read only in system mode).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from .answer import ExtractiveAnswerer
from .concepts import ConceptGlossary
from .corpus import Chunk, Corpus, load_corpus
from .index import BM25Index
from .rerank import FeatureReranker, RerankWeights
from .text import analyze

DEFAULT_CONFIG: Mapping[str, Any] = {
    "retrievalLimit": 10,
    "retrieval": {"rerank": False, "candidatePool": 40, "tokenBudget": 3000},
}

MODES = ("system", "component")


class HelpdeskRAG:
    """Question answering over the Northwind Cycleworks knowledge base."""

    def __init__(
        self,
        corpus: Corpus,
        *,
        rerank_weights: RerankWeights | None = None,
        abstain_below: float = 0.4,
    ) -> None:
        self.corpus = corpus
        self.index = BM25Index(corpus)
        self.reranker = FeatureReranker(self.index, rerank_weights)
        self.glossary = ConceptGlossary()
        # Corpus metadata: the concept ids each chunk mentions (title included), tagged once at load.
        self.chunk_concepts = {
            chunk.chunk_id: self.glossary.detect([f"{chunk.title}\n{chunk.text}"]) for chunk in self.index.chunks
        }
        self.answerer = ExtractiveAnswerer(
            self.index, abstain_below=abstain_below, glossary=self.glossary
        )

    @classmethod
    def from_directory(cls, path: str | Path, **kwargs: Any) -> "HelpdeskRAG":
        return cls(load_corpus(path), **kwargs)

    # -- retrieval -----------------------------------------------------------
    def retrieve(
        self, question: str, *, limit: int, rerank: bool, candidate_pool: int = 0
    ) -> list[tuple[Chunk, float]]:
        """Final ranking as (chunk, score) pairs, best first, at most *limit* long."""
        terms = analyze(question)
        if not rerank:
            hits = self.index.search(terms, limit)
            return [(self.index.chunks[h.index], h.score) for h in hits]

        hits = self.index.search(terms, max(candidate_pool, limit))
        reranked = self.reranker.rerank(terms, hits[:candidate_pool])
        ranking = [(self.index.chunks[h.index], h.score) for h in reranked]
        ranking += [(self.index.chunks[h.index], h.score) for h in hits[candidate_pool:]]
        return ranking[:limit]

    # -- harness entry point ---------------------------------------------------
    def __call__(
        self,
        question: str,
        *,
        item: Any = None,
        config: Mapping[str, Any] | None = None,
        mode: str = "system",
    ) -> dict[str, Any]:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        cfg = DEFAULT_CONFIG if config is None else config
        started = time.perf_counter()

        limit = int(cfg["retrievalLimit"])
        retrieval_cfg = cfg["retrieval"]
        rerank = bool(retrieval_cfg["rerank"])
        pool = int(retrieval_cfg["candidatePool"]) if rerank else None

        ranked = self.retrieve(question, limit=limit, rerank=rerank, candidate_pool=pool or 0)
        retrieved = [
            {"chunk_id": c.chunk_id, "doc_id": c.doc_id, "text": c.text, "score": round(float(s), 6),
             # Corpus metadata the evaluation reads: concepts (near misses) and validity (stale sources).
             "metadata": {"concepts": self.chunk_concepts[c.chunk_id],
                          **{key: c.metadata[key] for key in ("superseded_by", "valid_to", "updated") if c.metadata.get(key)}}}
            for c, s in ranked
        ]
        # Detected concepts: those of the retrieved chunks, in order of first appearance.
        concepts = list(dict.fromkeys(cid for c, _ in ranked for cid in self.chunk_concepts[c.chunk_id]))
        metadata: dict[str, Any] = {
            "reranked": rerank,
            "retrieval_limit": limit,
            "candidate_pool": pool,
            "query_terms": analyze(question),
            "stale_chunks": [c.chunk_id for c, _ in ranked if c.superseded],
        }

        if mode == "component":
            result = {
                "answer": None,
                "retrieved": retrieved,
                "citations": [],
                "confidence": self.answerer.retrieval_confidence(question, ranked),
                "abstained": False,
            }
        else:
            budget = int(retrieval_cfg["tokenBudget"])
            ans = self.answerer.answer(question, ranked, budget)
            metadata.update(
                token_budget=budget,
                context_chunks=ans.context_chunks,
                context_tokens=ans.context_tokens,
                answer_sentences=ans.sentences,
            )
            result = {
                "answer": ans.text,
                "retrieved": retrieved,
                "citations": ans.citations,
                "confidence": ans.confidence,
                "abstained": ans.abstained,
            }

        metadata["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
        result.update(detected_concepts=concepts, blocked=False, metadata=metadata)
        return result
