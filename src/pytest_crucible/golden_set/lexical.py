"""Lexical drafts: known-item retrieval questions written from each passage's own distinctive terms,
with no model (the generator ``lexical-v1``).

For each chosen passage, its terms are scored by TF-IDF against the corpus (a term in every passage
scores nothing); the top few that, together, occur in no other passage become a question such as
"Which passage covers PB500, charging and thermistor?", citing that passage. Such an item checks only that
a passage can be found by its own rare words: it has no reference answer, says nothing about questions
real users ask, and is a draft a person reviews (``crucible golden review``) before it counts.

Deterministic: the same chunks, ``n`` and ``seed`` give the same items, byte for byte.

This module never imports pytest and holds no SQL.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .corpus import Chunk

GENERATOR = "lexical-v1"
NOTE = "retrieval-only draft: no reference answer"
TAGS = ("generated", "retrieval-only")
TERMS = 3       # terms a question names
MAX_TERMS = 5   # at most this many when fewer leave the question matching another passage too
MIN_TERMS = 2   # a passage with fewer distinctive terms gets no question

_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
_TEMPLATES = (
    "Which passage covers {terms}?",
    "Which passage mentions {terms}?",
    "Find the passage about {terms}."
)
# Common English words: never distinctive, whatever the corpus.
_STOPWORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "either", "else", "ever", "every", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "however", "if", "in", "into", "is", "it", "its", "itself", "just", "least", "less", "like", "made", "make", "many", "may", "me", "might", "more", "most", "much", "must", "my", "myself", "neither", "no", "nor", "not", "now", "of", "off", "often", "on", "once", "one", "only", "or", "other", "others", "our", "ours", "ourselves", "out", "over", "own", "per", "rather", "same", "shall", "she", "should", "since", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "though", "through", "thus", "to", "too", "two", "under", "until", "up", "upon", "us", "use", "used", "uses", "using", "very", "via", "was", "we", "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within", "without", "would", "yet", "you", "your", "yours", "yourself", "yourselves"])


def _terms(text: str) -> list[tuple[str, str]]:
    """(normalised term, surface form) of each word of ``text`` that could be distinctive, in text order."""
    found = []
    for match in _WORD.finditer(text):
        surface = match.group(0).strip("-'")
        term = surface.casefold()
        if len(term) < 3 or term in _STOPWORDS or term.replace("-", "").isdigit():
            continue
        found.append((term, surface))
    return found


def _join(terms: Sequence[str]) -> str:
    return terms[0] if len(terms) == 1 else f"{', '.join(terms[:-1])} and {terms[-1]}"


def distinctive_terms(chunks: Sequence[Chunk]) -> list[list[tuple[str, str]]]:
    """For each chunk, its candidate terms ``(term, surface form)`` best first: TF-IDF against the
    corpus (ties: first occurrence in the passage), terms found in every passage left out."""
    per_chunk = [_terms(chunk.text) for chunk in chunks]
    df: Counter[str] = Counter()
    for found in per_chunk:
        df.update({term for term, _ in found})
    total = len(chunks)
    ranked = []
    for found in per_chunk:
        counts = Counter(term for term, _ in found)
        surface: dict[str, str] = {}
        first: dict[str, int] = {}
        for position, (term, form) in enumerate(found):
            surface.setdefault(term, form)
            first.setdefault(term, position)
        scored = [(counts[term] * math.log(total / df[term]), term) for term in counts if df[term] < total]
        scored.sort(key=lambda pair: (-pair[0], first[pair[1]]))
        ranked.append([(term, surface[term]) for _, term in scored])
    return ranked


def lexical_drafts(chunks: Sequence[Chunk], n: int, *, seed: int = 1337) -> list[dict[str, Any]]:
    """Up to ``n`` draft golden items (camelCase dicts), one per chosen chunk: a known-item retrieval
    question from the chunk's distinctive terms, citing the chunk. Chunks are chosen at random (``seed``)
    among those whose terms single them out; the items come back in corpus order."""
    if n <= 0 or not chunks:
        return []
    ranked = distinctive_terms(chunks)
    postings: dict[str, set[int]] = {}  # term -> the passages holding it
    for position, chunk in enumerate(chunks):
        for term, _ in _terms(chunk.text):
            postings.setdefault(term, set()).add(position)
    text_count = Counter(" ".join(chunk.text.split()) for chunk in chunks)
    rng = random.Random(seed)
    order = list(range(len(chunks)))
    rng.shuffle(order)
    chosen: list[tuple[int, list[str]]] = []
    seen_chunks: set[str] = set()
    for index in order:
        if len(chosen) >= n:
            break
        chunk = chunks[index]
        if chunk.chunk_id in seen_chunks or text_count[" ".join(chunk.text.split())] > 1:
            continue  # a passage that appears twice cannot be the one known item
        picked = _unique_terms(index, ranked[index], postings)
        if picked is not None:
            seen_chunks.add(chunk.chunk_id)
            chosen.append((index, picked))
    chosen.sort()
    items = []
    used_ids: set[str] = set()
    for index, surfaces in chosen:
        chunk = chunks[index]
        template = _TEMPLATES[random.Random(f"{seed}:{chunk.chunk_id}").randrange(len(_TEMPLATES))]
        question = template.format(terms=_join(surfaces))
        items.append({
            "id": _item_id(chunk.chunk_id, question, used_ids),
            "question": question,
            "status": "draft",
            "kind": "retrieval",
            "questionType": "simple",
            "citations": [{"docId": chunk.doc_id, "chunkId": chunk.chunk_id}],
            "tags": list(TAGS),
            "metadata": {
                "generatedBy": {"generator": GENERATOR, "sourceChunks": [chunk.chunk_id],
                                "terms": [term.casefold() for term in surfaces]},
                "note": NOTE,
            },
        })
    return items


def _unique_terms(index: int, candidates: list[tuple[str, str]], postings: dict[str, set[int]]) -> list[str] | None:
    """The surface forms of the fewest top terms (at least TERMS when there are that many, at most
    MAX_TERMS) that no other passage holds all of; None when no such set exists."""
    if len(candidates) < MIN_TERMS:
        return None
    for size in range(min(TERMS, len(candidates)), min(MAX_TERMS, len(candidates)) + 1):
        top = candidates[:size]
        holding = set.intersection(*(postings[term] for term, _ in top))  # passages holding every one of them
        if holding == {index}:
            return [form for _, form in top]
    return None


def _item_id(chunk_id: str, question: str, used: set[str]) -> str:
    digest = hashlib.sha256(f"{GENERATOR}\0{chunk_id}\0{question}".encode()).hexdigest()
    for length in range(8, len(digest) + 1, 2):
        candidate = f"lex-{digest[:length]}"
        if candidate not in used:
            used.add(candidate)
            return candidate
    raise AssertionError("unreachable: distinct chunks give distinct digests")
