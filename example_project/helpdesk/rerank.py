"""Second-stage reranking of BM25 candidates.

BM25 scores each query term independently, so a chunk that repeats one rare
term (a product name, say) can outrank a chunk that answers the question and
mentions every term once. The reranker rescores the top ``candidatePool``
BM25 candidates with features that look at the query as a whole.

For a query with distinct analysed terms Q, each weighted by its IDF w(t),
and a candidate chunk c (title tokens followed by text tokens):

* ``bm25``      BM25 score of c divided by the best BM25 score in the pool.
* ``coverage``  IDF-weighted share of query terms present in c:
                sum(w(t) for t in Q if t in c) / sum(w(t) for t in Q).
* ``proximity`` how tightly the matched terms M cluster: with W the length of
                the smallest token window containing every term of M,
                coverage * |M| / W when |M| >= 2, else 0.
* ``title``     IDF-weighted share of query terms present in c's title.
* ``phrase``    share of adjacent query-term pairs (bigrams) that also occur
                adjacently in c.
* ``stale``     1 when c comes from a document marked ``superseded_by``.

    score = 0.30*bm25 + 0.35*coverage + 0.10*proximity
          + 0.15*title + 0.10*phrase - 0.10*stale

The weights are fixed, sum to 1 for the positive features, and are not fitted
to any evaluation data. Ties keep the BM25 order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .index import BM25Index, ChunkAnalysis, Hit


@dataclass(frozen=True)
class RerankWeights:
    bm25: float = 0.30
    coverage: float = 0.35
    proximity: float = 0.10
    title: float = 0.15
    phrase: float = 0.10
    stale: float = 0.10


@dataclass(frozen=True)
class ScoredHit:
    index: int
    score: float
    bm25: float
    features: dict[str, float] = field(default_factory=dict)


def min_window(tokens: Sequence[str], terms: set[str]) -> int:
    """Length of the shortest span of *tokens* containing every term in *terms*."""
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

    def features(
        self,
        query_terms: Sequence[str],
        analysis: ChunkAnalysis,
        bm25_norm: float,
        superseded: bool,
    ) -> dict[str, float]:
        q = [t for t in dict.fromkeys(query_terms) if self.index.known(t)]
        weights = {t: self.index.idf(t) for t in q}
        total = sum(weights.values()) or 1.0
        matched = {t for t in q if t in analysis.token_set}
        coverage = sum(weights[t] for t in matched) / total
        title = sum(weights[t] for t in q if t in analysis.title_tokens) / total

        proximity = 0.0
        if len(matched) >= 2:
            window = min_window(analysis.tokens, matched)
            if window:
                proximity = coverage * len(matched) / window

        q_seq = [t for t in query_terms if self.index.known(t)]
        bigrams = {(a, b) for a, b in zip(q_seq, q_seq[1:]) if a != b}
        phrase = len(bigrams & analysis.bigrams) / len(bigrams) if bigrams else 0.0

        return {
            "bm25": bm25_norm,
            "coverage": coverage,
            "proximity": proximity,
            "title": title,
            "phrase": phrase,
            "stale": 1.0 if superseded else 0.0,
        }

    def rerank(self, query_terms: Sequence[str], candidates: Sequence[Hit]) -> list[ScoredHit]:
        if not candidates:
            return []
        top = max(h.score for h in candidates) or 1.0
        w = self.weights
        scored = []
        for rank, hit in enumerate(candidates):
            chunk = self.index.chunks[hit.index]
            f = self.features(
                query_terms, self.index.analysis[hit.index], hit.score / top, chunk.superseded
            )
            score = (
                w.bm25 * f["bm25"]
                + w.coverage * f["coverage"]
                + w.proximity * f["proximity"]
                + w.title * f["title"]
                + w.phrase * f["phrase"]
                - w.stale * f["stale"]
            )
            scored.append((score, -rank, ScoredHit(hit.index, score, hit.score, f)))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [s[2] for s in scored]
