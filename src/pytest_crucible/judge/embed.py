"""Text embedders: the :class:`Embedder` protocol, the default :class:`WordLlamaEmbedder` and a
dependency-free stand-in, :class:`HashingEmbedder` (the default before 2026-12-02; a run records the
name of the embedder its responseRelevancy came from, and a comparison leaves that metric out when the
two runs' embedders differ).

Response relevancy (see :mod:`pytest_crucible.metrics.answer`) compares the
embedding of a golden question with the embeddings of questions generated from
the answer.  Anything with a ``name`` and an ``embed(texts)`` method returning
one L2-normalised row per text can do that job: a sentence-transformers model,
an API client, or the :class:`HashingEmbedder` below.

:class:`HashingEmbedder` (``name = "hashing-v1"``) is **a stand-in for a real
embedding model**, not one.  It needs nothing beyond numpy, is deterministic
across processes, machines and Python versions, and captures *lexical*
similarity only: two texts are close when they share words, word pairs or
pieces of words.  It knows no synonyms ("refund" and "money back" are
unrelated to it) and no word order beyond adjacent pairs.  Plug a real model in
when semantic similarity matters; scores from different embedders must never be
compared with each other (the embedder's ``name`` says which one produced a
score).

Features of :class:`HashingEmbedder`, per text:

* words: lower-cased ``\\w+`` runs (Unicode letters and digits); English
  function words (:data:`STOPWORDS`) are dropped, unless the text has nothing
  else, in which case all its words are kept (so a non-empty text never embeds
  to the zero vector because of stopwords alone);
* ``w:<word>`` unigrams (weight 1.0), ``b:<word> <word>`` adjacent bigrams of
  the kept words (weight 0.7) and ``c:<3-gram>`` character 3-grams of each kept
  word padded with ``#`` at both ends (weight 0.3; they make "refund",
  "refunds" and "refunded" close);
* sublinear term frequency: a feature seen ``tf`` times counts
  ``weight * (1 + ln tf)``;
* signed feature hashing: each feature string is hashed with BLAKE2b (8-byte
  digest, fixed personalisation -- never Python's salted ``hash()``); the
  digest modulo ``dim`` picks the column and its top bit the sign, so
  collisions cancel out on average instead of piling up;
* the row is L2-normalised; a text without any word (empty, punctuation only)
  is the zero vector, whose cosine with anything is 0 by our convention.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["STOPWORDS", "Embedder", "HashingEmbedder", "WordLlamaEmbedder", "cosine", "default_embedder"]

# English function words: articles, pronouns, auxiliaries, prepositions,
# conjunctions, question words and fillers.  Negations ("not", "no", "never")
# are listed too: they carry polarity, not topic (the lexical judge tracks them
# separately).
STOPWORDS: frozenset[str] = frozenset(
    ["a", "an", "the", "this", "that", "these", "those", "there", "here", "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours", "he", "him", "his", "she", "her", "hers", "it", "its", "they", "them", "their", "theirs", "myself", "yourself", "itself", "ourselves", "themselves", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "done", "have", "has", "had", "having", "can", "could", "will", "would", "shall", "should", "may", "might", "must", "ought", "of", "in", "on", "at", "by", "for", "with", "without", "to", "from", "into", "onto", "upon", "about", "above", "below", "over", "under", "between", "among", "through", "during", "before", "after", "since", "until", "till", "than", "then", "as", "and", "or", "but", "nor", "so", "yet", "if", "else", "because", "while", "whereas", "although", "though", "unless", "whether", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "all", "any", "both", "each", "either", "neither", "few", "more", "most", "other", "some", "such", "own", "same", "no", "not", "never", "none", "nothing", "nobody", "nowhere", "only", "just", "also", "too", "very", "really", "quite", "rather", "again", "further", "once", "ever", "even", "still", "already", "s", "t", "d", "ll", "m", "re", "ve", "y", "don", "doesn", "didn", "isn", "aren", "wasn", "weren", "won", "wouldn", "shouldn", "couldn", "hasn", "haven", "hadn", "mustn", "can't", "cannot", "couldn't", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't", "wouldn't", "shouldn't", "hasn't", "haven't", "hadn't", "mustn't", "it's", "i'm", "you're", "we're", "they're", "i've", "we've", "let's", "that's", "there's", "what's", "please", "thanks", "thank", "yes", "ok", "okay"]
)

_WORD = re.compile(r"\w+", re.UNICODE)
_PERSON = b"crucible-hash-v1"  # BLAKE2b personalisation (at most 16 bytes)
_WEIGHTS = {"w": 1.0, "b": 0.7, "c": 0.3}


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors for response relevancy."""

    #: Identifies the embedder (and its configuration) in stored results.
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, shape ``(len(texts), dim)``, every non-zero row L2-normalised."""
        ...


@lru_cache(maxsize=1 << 16)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest()
    value = int.from_bytes(digest, "little")
    sign = -1.0 if value >> 63 else 1.0
    return value % dim, sign


def _features(text: str) -> Counter[str]:
    words = _WORD.findall(text.lower())
    kept = [word for word in words if word not in STOPWORDS] or words
    features: Counter[str] = Counter()
    for word in kept:
        features["w:" + word] += 1
        padded = f"#{word}#"
        for start in range(len(padded) - 2):
            features["c:" + padded[start : start + 3]] += 1
    for first, second in itertools.pairwise(kept):
        features[f"b:{first} {second}"] += 1
    return features


class HashingEmbedder:
    """Deterministic hashed bag of words, word pairs and character 3-grams.

    A dependency-free stand-in for a real embedding model (see the module
    docstring for the exact features and their limits).
    """

    def __init__(self, dim: int = 2048):
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self.dim = int(dim)
        self.name = "hashing-v1" if self.dim == 2048 else f"hashing-v1/d{self.dim}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def embed_one(self, text: str) -> np.ndarray:
        row = np.zeros(self.dim, dtype=np.float64)
        # Sorted: the float sums are then independent of Counter insertion order.
        for feature, tf in sorted(_features(text).items()):
            index, sign = _bucket(feature, self.dim)
            row[index] += sign * _WEIGHTS[feature[0]] * (1.0 + math.log(tf))
        norm = float(np.linalg.norm(row))
        return row / norm if norm > 0.0 else row

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float64)
        return np.vstack([self.embed_one(text) for text in texts])


class WordLlamaEmbedder:
    """The default embedder: the static word embeddings bundled with the ``wordllama`` package (256
    dimensions, loaded offline from the wheel, about 0.2 s once per process, shared with the offline
    judge's word similarity: :mod:`pytest_crucible.judge.similarity`). A text's vector is the normalised
    mean of its token vectors, so "How long is the warranty?" and "What is the warranty period?" are
    close where the hashing stand-in sees two different word sets. Still no sentence model: word order
    and negation do not move it."""

    name = "wordllama-l2-supercat-256"

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(name={self.name!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from .similarity import _load

        # A blank text embeds to a zero row (cosine 0 with anything), as the hashing one's does.
        rows = np.zeros((len(texts), 256))
        filled = [i for i, text in enumerate(texts) if text.strip()]
        if filled:
            rows[filled] = np.asarray(_load().embed([texts[i] for i in filled], norm=True), dtype=np.float64)
        return rows


def default_embedder() -> Embedder:
    """The embedder a run uses unless the project's ``crucible_embedder`` fixture says otherwise."""
    return WordLlamaEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors; 0.0 when either is the zero vector."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"vectors of different sizes: {a.shape[0]} and {b.shape[0]}")
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))
