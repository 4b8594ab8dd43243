"""Second-stage reranking of BM25 candidates.

First-stage BM25 scores each paragraph in isolation and each query term
independently. Two things go wrong on a knowledge base like ours, where many
documents share vocabulary (several warranty documents, several battery
documents, regional and superseded versions of the same policy):

* a paragraph can match the query's words while sitting in a document about
  something else (the "crash replacement ... list price" paragraph of a
  warranty document for a question about price changes);
* an out-of-date version of a document matches exactly as well as the
  current one.

The reranker rescores the top ``candidatePool`` BM25 candidates with
features that look beyond the single paragraph. For a query with distinct
analysed terms Q, each weighted by its IDF w(t), and a candidate chunk c
(title tokens followed by text tokens):

* ``bm25``       passage BM25 score of c / best passage score in the pool.
* ``document``   BM25 score of c's whole document (title and all paragraphs)
                 / best such score among the pool's documents. This is the
                 classic passage/document evidence combination: a paragraph
                 is more likely relevant when its document is.
* ``coverage``   IDF-weighted share of query terms present in c:
                 sum(w(t) for t in Q if t in c) / sum(w(t) for t in Q).
* ``title``      IDF-weighted share of query terms present in c's title.
* ``proximity``  how tightly the matched terms M cluster: with W the length
                 of the smallest token window containing every term of M,
                 coverage * |M| / W when |M| >= 2, else 0.
* ``phrase``     share of adjacent query-term pairs (bigrams) that also occur
                 adjacently in c.
* ``stale``      1 when c comes from a document marked ``superseded_by``.

    score = 0.30*bm25 + 0.35*document + 0.10*coverage + 0.15*title
          + 0.05*proximity + 0.05*phrase - 0.10*stale

The positive weights sum to 1. They are fixed constants, chosen as round
values, and nothing in this module refers to evaluation data. Ties keep
the BM25 order.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from .index import BM25Index, Hit


@dataclass(frozen=True)
class RerankWeights:
    bm25: float = 0.30
    document: float = 0.35
    coverage: float = 0.10
    title: float = 0.15
    proximity: float = 0.05
    phrase: float = 0.05
    stale: float = 0.10  # subtracted

    def combine(self, f: dict[str, float]) -> float:
        return (
            self.bm25 * f["bm25"]
            + self.document * f["document"]
            + self.coverage * f["coverage"]
            + self.title * f["title"]
            + self.proximity * f["proximity"]
            + self.phrase * f["phrase"]
            - self.stale * f["stale"]
        )


@dataclass(frozen=True)
class ScoredHit:
    index: int
    score: float
    bm25: float
    features: dict[str, float] = field(default_factory=dict)


def min_window(tokens: Sequence[str], terms: set[str]) -> int:
    """Length of the shortest span of *tokens* containing every term in *terms* (0 if none)."""
    need = len(terms)
    if need == 0:
        return 0
    counts: dict[str, int] = {}
    have = 0
    best = len(tokens) + 1
    left = 0
    for right, tok in enumerate(tokens):
        if tok not in terms:
            continue
        counts[tok] = counts.get(tok, 0) + 1
        if counts[tok] == 1:
            have += 1
        while have == need:
            best = min(best, right - left + 1)
            ltok = tokens[left]
            if ltok in terms:
                counts[ltok] -= 1
                if counts[ltok] == 0:
                    have -= 1
            left += 1
    return best if best <= len(tokens) else 0


class FeatureReranker:
    def __init__(self, index: BM25Index, weights: RerankWeights | None = None) -> None:
        self.index = index
        self.weights = weights or RerankWeights()

    def rerank(self, query_terms: Sequence[str], candidates: Sequence[Hit]) -> list[ScoredHit]:
        if not candidates:
            return []
        index = self.index
        q = [t for t in dict.fromkeys(query_terms) if index.known(t)]
        idf = {t: index.idf(t) for t in q}
        idf_total = sum(idf.values()) or 1.0
        q_seq = [t for t in query_terms if index.known(t)]
        q_bigrams = {(a, b) for a, b in itertools.pairwise(q_seq) if a != b}

        doc_scores = index.document_scores(query_terms)
        top_passage = max(h.score for h in candidates) or 1.0
        top_document = max(doc_scores[index.chunks[h.index].doc_id] for h in candidates) or 1.0

        scored = []
        for rank, hit in enumerate(candidates):
            chunk = index.chunks[hit.index]
            analysis = index.analysis[hit.index]
            matched = {t for t in q if t in analysis.token_set}
            coverage = sum(idf[t] for t in matched) / idf_total
            proximity = 0.0
            if len(matched) >= 2:
                window = min_window(analysis.tokens, matched)
                if window:
                    proximity = coverage * len(matched) / window
            features = {
                "bm25": hit.score / top_passage,
                "document": doc_scores[chunk.doc_id] / top_document,
                "coverage": coverage,
                "title": sum(idf[t] for t in q if t in analysis.title_tokens) / idf_total,
                "proximity": proximity,
                "phrase": (len(q_bigrams & analysis.bigrams) / len(q_bigrams)) if q_bigrams else 0.0,
                "stale": 1.0 if chunk.superseded else 0.0,
            }
            score = self.weights.combine(features)
            scored.append((score, -rank, ScoredHit(hit.index, score, hit.score, features)))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [s[2] for s in scored]
