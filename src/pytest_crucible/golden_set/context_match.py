"""Reference passages given as text, found among a corpus's chunks: how an imported item's contexts become
citations (`crucible golden import --corpus`).

Most evaluation datasets carry the passages an answer rests on as text; crucible cites chunks. A passage
is matched in two steps:

1. **Containment**, after case and whitespace are normalised: the passage found inside a chunk (an
   excerpt), or chunks found whole inside the passage (a passage that spans several chunks). Score 1.0.
2. Otherwise **word overlap**: the share of the passage's words (function words left out) that one chunk
   holds. The best chunk matches when the share reaches :data:`MATCH_THRESHOLD`; at :data:`STRONG_MATCH`
   or above it is a ``required`` citation, below that a weak match, ``acceptable``.

The chunks are indexed once (an inverted index of their words): a passage is compared only with the
chunks holding its rarest words, never with the whole corpus, so matching stays fast at 100,000 chunks.

Pure: no pytest, no store.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .corpus import Chunk

#: A passage matches a chunk holding at least this share of its words.
MATCH_THRESHOLD = 0.5
#: A match this strong (or a containment) is a ``required`` citation; a weaker one ``acceptable``.
STRONG_MATCH = 0.8
# A passage is compared with the chunks that hold one of its RAREST rarest words: a chunk holding half of
# the passage's words is all but certain to hold one of them.
RAREST = 8

# A chunk found inside a passage counts only when it has this many words: a heading alone is in many passages.
MIN_SPANNED_WORDS = 5

_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
_HOP_MARK = re.compile(r"<\d+-hop>")


def normalised(text: str) -> str:
    """Text as containment compares it: casefolded, every run of whitespace one space, trimmed, and without
    the markers ragas' multi-hop testsets put before each passage (``<1-hop>``), which are not its text."""
    return _SPACE.sub(" ", _HOP_MARK.sub(" ", text).casefold()).strip()


def _words(text: str) -> frozenset[str]:
    from ..judge.embed import STOPWORDS

    words = _WORD.findall(text)
    return frozenset(word for word in words if word not in STOPWORDS) or frozenset(words)


@dataclass(frozen=True)
class ChunkMatch:
    chunk: Chunk
    score: float  # 1.0: contained; else the share of the passage's words the chunk holds
    contained: bool = False

    @property
    def mode(self) -> str:
        return "required" if self.score >= STRONG_MATCH else "acceptable"


class ChunkIndex:
    """The chunks of a corpus, indexed by their words, to match passages against."""

    def __init__(self, chunks: Sequence[Chunk]):
        self.chunks = list(chunks)
        self._text = [normalised(chunk.text) for chunk in self.chunks]
        self._words = [_words(text) for text in self._text]
        self._postings: dict[str, list[int]] = {}
        for position, words in enumerate(self._words):
            for word in words:
                self._postings.setdefault(word, []).append(position)

    def match(self, passage: str) -> list[ChunkMatch]:
        """The chunks ``passage`` matches (see the module docstring), best first; empty: no chunk."""
        text = normalised(passage)
        words = _words(text)
        if not words:
            return []
        known = sorted((word for word in words if word in self._postings), key=lambda word: len(self._postings[word]))
        candidates = sorted({position for word in known[:RAREST] for position in self._postings[word]})
        contained = [position for position in candidates if text in self._text[position]
                     or (len(self._words[position]) >= MIN_SPANNED_WORDS and self._text[position] in text)]
        if contained:
            return [ChunkMatch(self.chunks[position], 1.0, contained=True) for position in contained]
        best, best_share = None, 0.0
        for position in candidates:
            share = len(words & self._words[position]) / len(words)
            if share > best_share:
                best, best_share = position, share
        if best is None or best_share < MATCH_THRESHOLD:
            return []
        return [ChunkMatch(self.chunks[best], round(best_share, 4))]
