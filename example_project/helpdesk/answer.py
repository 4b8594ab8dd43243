"""Extractive answering with citations and abstention.

The answerer never invents text: it selects sentences from the retrieved
chunks that fit in the context budget and stitches them together, citing each
one as ``[Sn]`` where n is the 1-based rank of its chunk in the retrieved list.

Sentence score
    IDF-weighted share of the question's terms found in the sentence, plus
    half the weight of the remaining terms that appear in the sentence's
    context, i.e. the chunk's title and other sentences (a sentence from
    "Price List 2026" answers a "price" question even if it never says
    "price"; "It is not compatible with the Fast Charger 6A" is about the
    bike its paragraph names). The result is multiplied by a mild rank prior,
    1 - 0.03 * (rank - 1), because retrieval order is evidence too. Terms
    that appear nowhere in the corpus still count in the denominator, so
    questions about things the documents never mention score low.

Confidence
    base = 0.5 * answer coverage  (all selected sentences together, same
                                   context rule, no rank prior)
         + 0.3 * best sentence score
         + 0.2 * best chunk coverage among the top three retrieved chunks
    confidence = base * (0.5 + 0.5 * entity consistency)
                      * (1 - 0.5 * unknown share)

    Entity consistency is the share of the named entities in the question
    (products, plans, systems from :mod:`helpdesk.concepts`) that also occur
    in the documents the answer cites (whole documents, because a paragraph
    often refers back to an entity named earlier, e.g. "both plans"); it is 1
    when the question names none. An answer about the Vela E2 to a question
    about the Kestrel Trail is therefore heavily discounted.

    The unknown share is the IDF-weighted share of question terms that occur
    nowhere in the knowledge base. Words the documents never use ("dental",
    "showroom") are the strongest lexical hint that the topic is not covered.

Below ``abstain_below`` the answerer abstains: the answer text is a fixed
"I don't know" sentence and nothing is cited.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .concepts import ConceptGlossary
from .corpus import Chunk
from .index import BM25Index
from .text import analyze, raw_tokens, split_sentences

ABSTAIN_TEXT = "I don't know based on the available documents."


def approx_tokens(text: str) -> int:
    """Approximate token count used for the context budget: 1.3 tokens per word."""
    return math.ceil(len(text.split()) * 1.3)


@dataclass
class Answer:
    text: str
    citations: list[str]
    confidence: float
    abstained: bool
    context_chunks: int = 0
    context_tokens: int = 0
    sentences: list[dict] = field(default_factory=list)


@dataclass
class _Candidate:
    rank: int          # 1-based rank of the chunk in the retrieved list
    order: int         # sentence position inside the chunk
    chunk: Chunk
    text: str
    score: float
    terms: frozenset[str]


class ExtractiveAnswerer:
    def __init__(
        self,
        index: BM25Index,
        *,
        max_sentences: int = 3,
        follow_ratio: float = 0.8,
        abstain_below: float = 0.4,
        glossary: ConceptGlossary | None = None,
    ) -> None:
        self.index = index
        self.glossary = glossary or ConceptGlossary()
        self.max_sentences = max_sentences
        self.follow_ratio = follow_ratio
        self.abstain_below = abstain_below

    # -- scoring ---------------------------------------------------------
    def query_weights(self, question: str) -> dict[str, float]:
        return {t: self.index.idf(t) for t in dict.fromkeys(analyze(question))}

    @staticmethod
    def coverage(weights: dict[str, float], tokens: set[str] | frozenset[str]) -> float:
        total = sum(weights.values())
        if total <= 0:
            return 0.0
        return sum(w for t, w in weights.items() if t in tokens) / total

    def retrieval_confidence(
        self, question: str, ranked: Sequence[tuple[Chunk, float]]
    ) -> float:
        """Confidence from retrieval alone (used in component mode)."""
        weights = self.query_weights(question)
        if not ranked or not weights:
            return 0.0
        cov = self._best_chunk_coverage(weights, ranked)
        return round(min(1.0, cov), 4)

    def _best_chunk_coverage(self, weights, ranked) -> float:
        best = 0.0
        for chunk, _ in ranked[:3]:
            tokens = set(analyze(chunk.title)) | set(analyze(chunk.text))
            best = max(best, self.coverage(weights, tokens))
        return best

    def _document_text(self, chunk: Chunk) -> str:
        try:
            doc = self.index.corpus.document(chunk.doc_id)
        except KeyError:  # a chunk from outside the corpus (a planted page) stands for itself
            return chunk.title + "\n" + chunk.text
        return doc.title + "\n" + "\n".join(doc.paragraphs)

    def _context_credit(self, weights, terms, context_terms) -> float:
        return self.coverage(weights, terms) + 0.5 * self.coverage(weights, context_terms - terms)

    # -- answering ---------------------------------------------------------
    def answer(
        self, question: str, ranked: Sequence[tuple[Chunk, float]], token_budget: int
    ) -> Answer:
        weights = self.query_weights(question)

        context: list[tuple[int, Chunk]] = []
        used = 0
        for rank, (chunk, _score) in enumerate(ranked, start=1):
            cost = approx_tokens(chunk.text)
            if used + cost > token_budget:
                break
            context.append((rank, chunk))
            used += cost

        if not weights or not context:
            return Answer(ABSTAIN_TEXT, [], 0.0, True, len(context), used)

        candidates: list[_Candidate] = []
        for rank, chunk in context:
            chunk_terms = set(analyze(chunk.title)) | set(analyze(chunk.text))
            prior = max(0.5, 1.0 - 0.03 * (rank - 1))
            for order, sentence in enumerate(split_sentences(chunk.text)):
                terms = frozenset(analyze(sentence))
                score = prior * self._context_credit(weights, terms, chunk_terms)
                candidates.append(_Candidate(rank, order, chunk, sentence, score, terms))

        candidates.sort(key=lambda c: (-c.score, c.rank, c.order))
        best = candidates[0]
        chosen = [best]
        covered = set(best.terms)
        for cand in candidates[1:]:
            if len(chosen) >= self.max_sentences:
                break
            if cand.score < self.follow_ratio * best.score:
                break
            new_terms = (cand.terms - covered) & weights.keys()
            if not new_terms and cand.chunk.chunk_id != best.chunk.chunk_id:
                continue
            if any(_same_text(cand.text, c.text) for c in chosen):
                continue
            chosen.append(cand)
            covered |= cand.terms

        answer_terms = set().union(*(c.terms for c in chosen))
        answer_context = set().union(
            *(set(analyze(c.chunk.title)) | set(analyze(c.chunk.text)) for c in chosen)
        )
        answer_cov = self._context_credit(weights, answer_terms, answer_context)
        top_cov = self._best_chunk_coverage(weights, ranked)
        base = 0.5 * min(1.0, answer_cov) + 0.3 * min(1.0, best.score) + 0.2 * top_cov

        asked = self.glossary.detect([question])
        if asked:
            cited_text = [self._document_text(c.chunk) for c in chosen]
            present = set(self.glossary.detect(cited_text))
            consistency = sum(1 for cid in asked if cid in present) / len(asked)
        else:
            consistency = 1.0
        unknown_share = self.coverage(weights, {t for t in weights if not self.index.known(t)})
        confidence = base * (0.5 + 0.5 * consistency) * (1.0 - 0.5 * unknown_share)
        confidence = round(min(1.0, max(0.0, confidence)), 4)

        if confidence < self.abstain_below:
            return Answer(ABSTAIN_TEXT, [], confidence, True, len(context), used)

        chosen.sort(key=lambda c: (c.rank, c.order))
        parts, citations = [], []
        for cand in chosen:
            parts.append(f"{cand.text} [S{cand.rank}]")
            if cand.chunk.chunk_id not in citations:
                citations.append(cand.chunk.chunk_id)
        return Answer(
            text=" ".join(parts),
            citations=citations,
            confidence=confidence,
            abstained=False,
            context_chunks=len(context),
            context_tokens=used,
            sentences=[
                {"chunk_id": c.chunk.chunk_id, "rank": c.rank, "score": round(c.score, 4)}
                for c in chosen
            ],
        )


def _same_text(a: str, b: str) -> bool:
    return raw_tokens(a) == raw_tokens(b)
