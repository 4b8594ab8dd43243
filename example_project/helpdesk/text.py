"""Tokenisation shared by indexing, reranking and answering.

Text is lower-cased, split into alphanumeric runs (so ``PB-500`` gives ``pb`` and
``500``), stripped of stopwords and reduced with a small deterministic
suffix-stripping stemmer. The same function is used for documents and queries,
which is all BM25 needs.
"""

from __future__ import annotations

import re
from functools import lru_cache

from bm25s.stopwords import STOPWORDS_EN

_TOKEN = re.compile(r"[a-z0-9]+")

# bm25s ships a minimal English list; questions also carry a lot of
# interrogative and auxiliary words that say nothing about the topic.
_EXTRA_STOPWORDS = {
    "about", "after", "again", "all", "also", "am", "any", "anything", "can", "could",
    "did", "do", "does", "doing", "done", "from", "get", "got", "had", "has", "have",
    "having", "he", "her", "here", "him", "his", "how", "i", "its", "just", "me",
    "many", "might", "more", "most", "much", "must", "my", "our", "ours", "please", "she",
    "should", "so", "some", "than", "them", "those", "too", "us", "very", "want",
    "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "would", "you", "your", "yours", "been", "being", "s", "t", "d", "ll", "re", "ve",
    "m", "let", "anyone", "someone", "know", "tell", "need", "im", "dont", "don",
    "doesn", "isn", "didn", "cant", "won", "only", "own",
}
STOPWORDS = frozenset(STOPWORDS_EN) | frozenset(_EXTRA_STOPWORDS)

_NO_S_STRIP = ("ss", "us", "is", "as", "ous")
_KEEP_DOUBLE = set("lsz")
_VOWELS = set("aeiou")


def _is_cvc(w: str) -> bool:
    """consonant-vowel-consonant ending, e.g. 'rid' in riding, 'tak' in taking."""
    return (
        len(w) == 3
        and w[0] not in _VOWELS
        and w[1] in _VOWELS
        and w[2] not in _VOWELS
        and w[2] not in "wxy"
    )


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Strip common English inflections, deterministically.

    * plurals: ``batteries`` -> ``battery``, ``chargers`` -> ``charger``
      (not after ss/us/is/as/ous: ``atlas``, ``bonus`` stay);
    * ``-ing`` / ``-ed``: ``charging``/``charged`` -> ``charg``, ``stopped`` ->
      ``stop``; a three-letter consonant-vowel-consonant stem gets its ``e``
      back (``riding`` -> ``ride``, ``taking`` -> ``take``);
    * a final silent ``e`` on words of five letters or more (``charge`` ->
      ``charg``, ``service`` -> ``servic``); short words such as ``care`` or
      ``rate`` are kept whole so they do not collide with ``car`` or ``rat``.

    Numbers, codes and words of three letters or fewer are returned unchanged.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(_NO_S_STRIP):
        w = w[:-1]

    stripped = False
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("ing") and len(w) - 3 >= 3 and _VOWELS & set(w[:-3]):
        w, stripped = w[:-3], True
    elif w.endswith("ed") and not w.endswith("eed") and len(w) - 2 >= 3 and _VOWELS & set(w[:-2]):
        w, stripped = w[:-2], True
    if stripped:
        if len(w) >= 3 and w[-1] == w[-2] and w[-1] not in _VOWELS | _KEEP_DOUBLE:
            w = w[:-1]
        elif _is_cvc(w):
            w = w + "e"
        return w

    if w.endswith("e") and len(w) >= 5:
        w = w[:-1]
    return w


def raw_tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric runs, before stopword removal and stemming."""
    return _TOKEN.findall(text.lower())


def analyze(text: str) -> list[str]:
    """The token sequence used everywhere: stopwords removed, words stemmed.

    Single letters are dropped; single digits are kept (``2 years`` matters).
    """
    out = []
    for tok in raw_tokens(text):
        if tok in STOPWORDS or (len(tok) == 1 and not tok.isdigit()):
            continue
        out.append(stem(tok))
    return out


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences on ., ! or ? followed by a capital/digit."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"(€£])", text.strip())
    return [p.strip() for p in parts if p.strip()]
