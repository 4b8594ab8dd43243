"""First-stage retrieval: BM25 over chunks with the ``bm25s`` library.

Every chunk is indexed as ``title + text`` so that a document's title helps all
of its paragraphs. A second, document-level BM25 index (title plus all
paragraphs of a document) supplies the passage-versus-document evidence the
reranker uses. The index also keeps, per chunk, the analysed token sequence
and the title tokens, which the reranker needs for its coverage, proximity
and phrase features; computing them once at build time keeps queries fast.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

from .corpus import Chunk, Corpus
from .text import analyze


@dataclass(frozen=True)
class ChunkAnalysis:
    tokens: tuple[str, ...]          # title tokens followed by text tokens
    token_set: frozenset[str]
    title_tokens: frozenset[str]
    bigrams: frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Hit:
    index: int       # position of the chunk in Corpus.chunks
    score: float


class BM25Index:
    """BM25 (Lucene variant, k1=1.2, b=0.75) over the chunks of a corpus."""

    def __init__(self, corpus: Corpus, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.corpus = corpus
        self.chunks: Sequence[Chunk] = corpus.chunks
        self.analysis: list[ChunkAnalysis] = []
        corpus_tokens: list[list[str]] = []
        for chunk in self.chunks:
            title = analyze(chunk.title)
            body = analyze(chunk.text)
            tokens = title + body
            corpus_tokens.append(tokens)
            self.analysis.append(
                ChunkAnalysis(
                    tokens=tuple(tokens),
                    token_set=frozenset(tokens),
                    title_tokens=frozenset(title),
                    bigrams=frozenset(itertools.pairwise(tokens)),
                )
            )

        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index(corpus_tokens, show_progress=False)

        # Document-level index: one entry per document, in corpus order.
        self.doc_ids = [d.doc_id for d in corpus.documents]
        self._doc_position = {doc_id: i for i, doc_id in enumerate(self.doc_ids)}
        doc_tokens = [analyze(d.title) + analyze(" ".join(d.paragraphs)) for d in corpus.documents]
        self._doc_bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._doc_bm25.index(doc_tokens, show_progress=False)

        # Document frequencies for the reranker / answerer (same smoothing as BM25's IDF).
        n = len(corpus_tokens)
        df: dict[str, int] = {}
        for a in self.analysis:
            for tok in a.token_set:
                df[tok] = df.get(tok, 0) + 1
        self._n_docs = n
        self._df = df

    def idf(self, term: str) -> float:
        """Lucene-style IDF; unseen terms get the maximum value."""
        df = self._df.get(term, 0)
        return math.log(1.0 + (self._n_docs - df + 0.5) / (df + 0.5))

    def known(self, term: str) -> bool:
        return term in self._df

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every chunk for the analysed query."""
        known = [t for t in query_tokens if t in self._df]
        if not known:
            return np.zeros(len(self.chunks), dtype=np.float32)
        return self._bm25.get_scores(known)

    def document_scores(self, query_tokens: Sequence[str]) -> dict[str, float]:
        """BM25 score of every whole document for the analysed query, by doc id."""
        known = [t for t in query_tokens if t in self._df]
        if not known:
            return dict.fromkeys(self.doc_ids, 0.0)
        scores = self._doc_bm25.get_scores(known)
        return {doc_id: float(scores[i]) for i, doc_id in enumerate(self.doc_ids)}

    def search(self, query_tokens: Sequence[str], k: int) -> list[Hit]:
        """Top *k* chunks by BM25 score, ties broken by corpus order.

        Chunks that match no query term (score 0) are never returned, so a
        question made only of stopwords or unknown words retrieves nothing.
        """
        scores = self.scores(query_tokens)
        k = max(0, min(k, len(scores)))
        order = np.argsort(-scores, kind="stable")[:k]
        return [Hit(index=int(i), score=float(scores[i])) for i in order if scores[i] > 0]
