"""CRAG answer grades, truthfulness and abstention detection (standard library only).

Scores
------
The CRAG benchmark (Yang et al., "CRAG -- Comprehensive RAG Benchmark",
NeurIPS 2024 Datasets & Benchmarks, arXiv:2406.04744) grades every answer on a
four-level scale and scores a wrong answer strictly below an honest
abstention:

============  =======  ================================================
grade         score    meaning
============  =======  ================================================
perfect        +1.0    fully correct and grounded
acceptable     +0.5    correct, with a minor omission or imprecision
missing         0.0    an honest abstention ("I don't know")
incorrect      -1.0    a wrong claim or a hallucination
============  =======  ================================================

**Truthfulness** is the mean score over the graded results, so it lies in
[-1, 1]: a system that always abstains scores 0, one that is right half the
time and wrong the other half also scores 0, and every hallucination costs as
much as one perfect answer earns.  Grades are matched case-insensitively after
stripping surrounding whitespace; any other value raises ``ValueError``.

Abstention
----------
:func:`is_abstention` decides whether an answer *is* an abstention -- the whole
answer is essentially "I don't know" -- not whether it contains such a phrase.
The rule, applied to the answer lower-cased, with typographic apostrophes
folded to ``'`` and split into word tokens and sentence breaks (``. ! ? ; :``
and newlines):

1. ``None``, the empty string and whitespace-only answers are abstentions.
2. Otherwise the answer must contain one of :data:`ABSTENTION_PHRASES`
   (matched on whole words, so ``"unknown"`` does not match ``"know"``).
3. Everything *before* the first such phrase must be filler
   (:data:`FILLER_WORDS`: pronouns, articles, auxiliaries, prepositions,
   politeness such as "sorry"/"unfortunately", and words about the act of
   answering such as "documents", "context", "provided").  So
   "Unfortunately, based on the provided documents, I cannot find ..." counts,
   "Seven years; no information on exports." does not.
4. After the phrase (other abstention phrases removed), the rest of the same
   clause may add at most :data:`MAX_TOPIC_WORDS` (8) content words -- enough
   to restate the topic ("I cannot find the retention period for audit
   exports") -- and everything after the first sentence break or contrast word
   (:data:`CONTRAST_WORDS`: "but", "however", "although", ...) must be filler
   only.  "I don't know. The policy says seven years." and "I don't know the
   exact date, but it was probably 2021." are therefore *not* abstentions.

A content word is any word token (numbers included) that is neither in
:data:`FILLER_WORDS` nor in :data:`CONTRAST_WORDS` (so "I'm sorry, but I don't
know" is an abstention).  The rule is deliberately conservative: when in doubt an
answer is *not* an abstention, so it is still graded by the judge and a claim
cannot hide behind a leading disclaimer.  The cost is that some abstentions
phrased topic-first ("The retention period is not mentioned in the
documents.") are not detected here; the judge still grades them ``missing``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = [
    "ABSTENTION_PHRASES",
    "CONTRAST_WORDS",
    "CRAG_GRADES",
    "CRAG_SCORES",
    "FILLER_WORDS",
    "MAX_TOPIC_WORDS",
    "crag_score",
    "is_abstention",
    "is_correct",
    "truthfulness",
]

CRAG_SCORES: dict[str, float] = {"perfect": 1.0, "acceptable": 0.5, "missing": 0.0, "incorrect": -1.0}
CRAG_GRADES: tuple[str, ...] = tuple(CRAG_SCORES)

# --------------------------------------------------------------------------
# grades and truthfulness


def _normalise_grade(grade: object) -> str:
    if isinstance(grade, str):
        key = grade.strip().lower()
        if key in CRAG_SCORES:
            return key
    allowed = ", ".join(CRAG_GRADES)
    raise ValueError(f"unknown CRAG grade {grade!r}; expected one of: {allowed}")


def crag_score(grade: str) -> float:
    """The CRAG score of one grade: perfect 1.0, acceptable 0.5, missing 0.0, incorrect -1.0."""
    return CRAG_SCORES[_normalise_grade(grade)]


def is_correct(grade: str) -> bool:
    """True for ``perfect`` and ``acceptable``; False for ``missing`` and ``incorrect``."""
    return _normalise_grade(grade) in ("perfect", "acceptable")


def truthfulness(grades: Sequence[str]) -> float | None:
    """Mean CRAG score of ``grades``, in [-1, 1]; ``None`` when there are no grades."""
    scores = [crag_score(g) for g in grades]
    if not scores:
        return None
    return math.fsum(scores) / len(scores)


# --------------------------------------------------------------------------
# abstention

#: Phrases that mark an honest "I don't know" answer (lower case, ``'`` apostrophes).
ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know",
    "i do not know",
    "i dont know",
    "i'm not sure",
    "i am not sure",
    "cannot find",
    "can not find",
    "can't find",
    "could not find",
    "couldn't find",
    "unable to find",
    "did not find",
    "didn't find",
    "no information",
    "no relevant information",
    "no mention",
    "not able to answer",
    "unable to answer",
    "cannot answer",
    "can not answer",
    "can't answer",
    "could not answer",
    "couldn't answer",
    "cannot be answered",
    "can't be answered",
    "cannot be determined",
    "can't be determined",
    "not possible to answer",
    "don't have enough information",
    "do not have enough information",
    "don't have any information",
    "do not have any information",
    "don't have information",
    "do not have information",
    "don't have that information",
    "do not have that information",
    "not enough information",
    "insufficient information",
    "the documents do not say",
    "the documents don't say",
    "the documents do not mention",
    "the documents don't mention",
    "the documents do not contain",
    "the documents don't contain",
    "the context does not say",
    "the context doesn't say",
    "the context does not mention",
    "the context doesn't mention",
    "the context does not contain",
    "the context doesn't contain",
    "the sources do not say",
    "the sources don't say",
    "the sources do not mention",
    "the sources don't mention",
)

#: Most content words an abstention may add after its phrase, in the same clause.
MAX_TOPIC_WORDS = 8

#: Words after which an answer that goes on with content words is an answer attempt.
CONTRAST_WORDS: frozenset[str] = frozenset(
    {"but", "however", "although", "though", "except", "yet", "nevertheless", "nonetheless", "instead"}
)

#: Words that never count as content: function words, politeness, words about answering.
FILLER_WORDS: frozenset[str] = frozenset(
    ["a", "an", "the", "this", "that", "these", "those", "it", "its", "it's", "there", "there's", "here", "i", "i'm", "i've", "i'd", "i'll", "me", "my", "we", "we're", "our", "you", "you're", "your", "they", "their", "them", "am", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "doesn't", "don't", "didn't", "isn't", "aren't", "wasn't", "weren't", "have", "has", "had", "haven't", "hasn't", "can", "can't", "cannot", "could", "couldn't", "would", "wouldn't", "should", "shouldn't", "will", "won't", "may", "might", "must", "shall", "not", "no", "nor", "any", "anything", "some", "something", "nothing", "enough", "to", "of", "in", "on", "at", "by", "for", "from", "with", "about", "into", "onto", "over", "under", "as", "than", "then", "so", "such", "and", "or", "if", "whether", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "also", "either", "neither", "too", "very", "really", "quite", "just", "only", "even", "all", "more", "most", "much", "sorry", "unfortunately", "afraid", "apologies", "apologize", "apologise", "regret", "regrettably", "please", "thank", "thanks", "kindly", "ok", "okay", "well", "hmm", "based", "given", "according", "provided", "available", "supplied", "retrieved", "shared", "attached", "above", "below", "document", "documents", "doc", "docs", "context", "contexts", "source", "sources", "passage", "passages", "text", "texts", "excerpt", "excerpts", "snippet", "snippets", "material", "materials", "record", "records", "data", "information", "info", "detail", "details", "answer", "answers", "answering", "question", "questions", "query", "specific", "specifically", "exact", "exactly", "relevant", "sufficient", "certain", "sure", "able", "unable", "find", "found", "say", "says", "said", "mention", "mentions", "mentioned", "state", "states", "stated", "contain", "contains", "contained", "include", "includes", "included", "cover", "covers", "covered", "address", "addresses", "addressed", "know", "knowledge", "determine", "determined", "tell", "rephrase", "clarify", "clarification", "assist", "help", "ask", "asking", "asked"]
)

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'"})
_TOKEN = re.compile(r"[0-9]+(?:[.,][0-9]+)*|[a-z0-9]+(?:'[a-z]+)*|[.!?;:\n]")
_BREAK = frozenset(".!?;:\n")
_PHRASE_TOKENS: tuple[tuple[str, ...], ...] = tuple(
    sorted({tuple(_TOKEN.findall(p)) for p in ABSTENTION_PHRASES}, key=len, reverse=True)
)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.translate(_APOSTROPHES).lower())


def _is_content(token: str) -> bool:
    return token not in _BREAK and token not in FILLER_WORDS and token not in CONTRAST_WORDS


def _phrase_at(tokens: list[str], i: int) -> int:
    """Length of the longest abstention phrase starting at ``tokens[i]`` (0 if none)."""
    for phrase in _PHRASE_TOKENS:
        if tuple(tokens[i : i + len(phrase)]) == phrase:
            return len(phrase)
    return 0


def is_abstention(answer: str | None) -> bool:
    """True when the whole answer is essentially an honest "I don't know".

    See the module docstring for the exact rule; ``None`` and blank answers are
    abstentions.
    """
    if answer is None or not answer.strip():
        return True
    tokens = _tokens(answer)
    # 2. find the first abstention phrase
    start = length = 0
    for i in range(len(tokens)):
        length = _phrase_at(tokens, i)
        if length:
            start = i
            break
    if not length:
        return False
    # 3. nothing but filler before it
    if any(_is_content(t) for t in tokens[:start]):
        return False
    # 4. the rest, with further abstention phrases removed
    rest: list[str] = []
    i = start + length
    while i < len(tokens):
        more = _phrase_at(tokens, i)
        if more:
            i += more
            continue
        rest.append(tokens[i])
        i += 1
    cut = next((k for k, t in enumerate(rest) if t in _BREAK or t in CONTRAST_WORDS), len(rest))
    clause, after = rest[:cut], rest[cut:]
    if sum(_is_content(t) for t in clause) > MAX_TOPIC_WORDS:
        return False
    return not any(_is_content(t) for t in after)


_NO_ANSWER_REFERENCE = re.compile(
    r"^\W*(?:the )?(?:provided |given |retrieved |available )?(?:documents?|documentation|context|sources?|passages?|"
    r"corpus|information|knowledge base|texts?)\s+(?:do|does|did)(?: not|n't) (?:say|give|mention|specify|state|contain|"
    r"include|provide|cover|address|describe|list)\b",
    re.IGNORECASE,
)


def reference_gives_no_answer(reference: str | None) -> bool:
    """The reference itself says there is no answer: it opens with "The documents do not say/give/mention ...".

    A golden item or a labelled case whose reference reads so is unanswerable unless it says otherwise:
    an honest abstention is then the perfect answer.
    """
    return bool(reference and _NO_ANSWER_REFERENCE.search(reference.replace("\u2019", "'")))
