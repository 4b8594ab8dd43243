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
                                  (read only in system mode);
* ``guardrails.layers.<name>``  - switch one input defence layer off
                                  (see :mod:`helpdesk.guardrails`; all on by default).

Input defences: the question and the retrieved chunks go through
:class:`~helpdesk.guardrails.InputScanner` before the answerer sees them. When a
golden item carries a document attack (``item.attack.vector == "document"``), its
planted text is added to the ranking as chunk ``planted:<item id>`` of document
``planted``, ranked first, the way a poisoned knowledge-base page would arrive.

A golden conversation's follow-up ("And if I bought it online?") says little on its own: with
``history`` (the earlier turns as ``{"role", "content"}`` messages, which pytest-crucible passes on each
turn of a conversation) the retrieval query reads the user's earlier questions of the conversation, the
last :data:`HISTORY_TURNS` of them, before this one; the answerer and the guardrails read this question
alone.

Tools: a question that needs the order or store systems (an order number, a stock check, a service booking)
also returns the calls it needs as ``tool_calls`` (see :mod:`helpdesk.tools`).

A blocked question returns ``blocked=True``, ``blocked_by=<layer>``, no answer
(``answer`` is None: nothing was generated, and the refusal the user sees is the
application's business), the retrieved list as it was, and the scanner's reason
in ``metadata["guardrail"]``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .answer import ExtractiveAnswerer
from .concepts import ConceptGlossary
from .corpus import Chunk, Corpus, load_corpus
from .guardrails import InputScanner
from .index import BM25Index
from .rerank import FeatureReranker, RerankWeights
from .text import analyze
from .tools import plan_tool_calls

DEFAULT_CONFIG: Mapping[str, Any] = {
    "retrievalLimit": 10,
    "retrieval": {"rerank": False, "candidatePool": 40, "tokenBudget": 3000},
}

MODES = ("system", "component")
# The user's earlier questions of a conversation that a follow-up's query reads (the nearest ones).
HISTORY_TURNS = 2


def contextual_query(question: str, history: Sequence[Mapping[str, Any]] | None) -> str:
    """The question with the user's last HISTORY_TURNS questions of the conversation before it: a follow-up
    ("And if I bought it online?") retrieves what the conversation is about."""
    earlier = [str(message.get("content") or "") for message in history or () if message.get("role") == "user"]
    return " ".join([*earlier[-HISTORY_TURNS:], question]) if earlier else question


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
        self.scanner = InputScanner()

    @classmethod
    def from_directory(cls, path: str | Path, **kwargs: Any) -> HelpdeskRAG:
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

    @staticmethod
    def planted_chunk(item: Any) -> Chunk | None:
        """The poisoned page a document attack plants, or None (see the module docstring)."""
        attack = getattr(item, "attack", None)
        if attack is None or getattr(attack, "vector", None) != "document" or not getattr(attack, "document", None):
            return None
        return Chunk(chunk_id=f"planted:{item.id}", doc_id="planted", title="", text=attack.document, position=1)

    def _concepts(self, chunk: Chunk) -> list[str]:
        known = self.chunk_concepts.get(chunk.chunk_id)
        return known if known is not None else self.glossary.detect([f"{chunk.title}\n{chunk.text}"])

    # -- harness entry point ---------------------------------------------------
    def __call__(
        self,
        question: str,
        *,
        item: Any = None,
        config: Mapping[str, Any] | None = None,
        mode: str = "system",
        history: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        cfg = DEFAULT_CONFIG if config is None else config
        started = time.perf_counter()
        query = contextual_query(question, history)

        limit = int(cfg["retrievalLimit"])
        retrieval_cfg = cfg["retrieval"]
        rerank = bool(retrieval_cfg["rerank"])
        pool = int(retrieval_cfg["candidatePool"]) if rerank else None

        ranked = self.retrieve(query, limit=limit, rerank=rerank, candidate_pool=pool or 0)
        planted = self.planted_chunk(item)
        if planted is not None:
            # A poisoned page that made it to the top of the ranking.
            ranked = [(planted, ranked[0][1] if ranked else 0.0), *ranked][:limit]
        retrieved = [
            {"chunk_id": c.chunk_id, "doc_id": c.doc_id, "text": c.text, "score": round(float(s), 6),
             # Corpus metadata the evaluation reads: concepts (near misses) and validity (stale sources).
             "metadata": {"concepts": self._concepts(c),
                          **{key: c.metadata[key] for key in ("superseded_by", "valid_to", "updated") if c.metadata.get(key)}}}
            for c, s in ranked
        ]
        # Detected concepts: those of the retrieved chunks, in order of first appearance.
        concepts = list(dict.fromkeys(cid for c, _ in ranked for cid in self._concepts(c)))
        metadata: dict[str, Any] = {
            "reranked": rerank,
            "retrieval_limit": limit,
            "candidate_pool": pool,
            "query_terms": analyze(query),
            "stale_chunks": [c.chunk_id for c, _ in ranked if c.superseded],
        }

        verdict = self.scanner.scan(question, [(c.chunk_id, c.text) for c, _ in ranked], config=cfg)
        if verdict is not None:
            metadata["guardrail"] = verdict.to_dict()
            metadata["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
            return {
                "answer": None,
                "retrieved": retrieved,
                "citations": [],
                "confidence": None,
                "abstained": False,
                "detected_concepts": concepts,
                "blocked": True,
                "blocked_by": verdict.layer,
                "metadata": metadata,
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
        # The account and store tools the question needs (helpdesk/tools.py), in both modes: choosing them is
        # part of finding what to answer from. A blocked question calls none.
        result.update(detected_concepts=concepts, blocked=False, metadata=metadata, tool_calls=plan_tool_calls(question))
        return result
