"""The frozen building blocks of the offline judges ``lexical-v1``, ``lexical-v2`` and ``lexical-v3``.

Reading a text into sentences and tokens, the windows of consecutive sentences a claim is checked
against, negation spans, claims, hedges and the phrases that reject a false premise: what
:mod:`pytest_crucible.judge.lexical` (v1) defines its rules with, and what
:mod:`pytest_crucible.judge.lexical_v2` and :mod:`pytest_crucible.judge.lexical_v3` build on.

**Frozen.** A released judge version never changes a verdict: its cache rows are keyed by its name,
and runs judged by it are compared with each other. Every name here is read by v1, v2 and v3, so
changing one changes their verdicts under the same version (tests/test_judge_frozen.py fails and
names the request). A new behaviour goes into a new judge version, in a module of its own, which
may wrap or replace these blocks but never edit them.

Text handling (shared by every kind)
------------------------------------
* **Sentences.**  Lines are grouped into blocks (a blank line, a markdown
  heading or a list item starts a new block; other line breaks are spaces),
  list markers (``-``, ``*``, ``1.``) and markdown emphasis are removed, and a
  block is split after ``.``, ``!`` or ``?`` followed by white space.  Periods
  of common abbreviations (``e.g.``, ``i.e.``, ``etc.``, ``vs.``, ``Dr.``,
  ``Inc.``, ``U.S.``, month names, ``No.`` before a digit, single capital
  initials) do not end a sentence, and decimals (``2.5``) never do because no
  space follows their period.  Citation markers (``[S1]``, ``[S1, S2]``,
  ``[3]``) are stripped everywhere (claims, contexts, answers), so a marker
  never counts as the number 1.  Limit: a sentence that really ends with an
  abbreviation ("... and so on, etc. Next") is not split there.
* **Tokens.**  Lower-cased words and numbers.  Numbers are normalised
  (``1,000`` -> ``1000``, ``2.50`` -> ``2.5``, ``05`` -> ``5``, ``3rd`` ->
  ``3``; ``$20``, ``20%`` and ``20-day`` all give ``20``).  *Content tokens*
  are numbers and words of two letters or more that are not English function
  words (:data:`pytest_crucible.judge.embed.STOPWORDS`), after light suffix
  stripping (``refunds``/``refunded``/``refunding`` -> ``refund``, ``plans``
  -> ``plan``, ``policies`` -> ``policy``).  Limits: no synonyms, no
  paraphrase ("money back" is not "refund"), numbers written as words
  ("thirty") are words, not numbers.
* **Negation.**  ``not``, ``no``, ``never``, ``none``, ``nothing``, ``neither``,
  ``nor``, ``cannot``, ``without`` and any ``...n't`` are negation cues.  They
  are not content tokens; instead a text span is *negated* when a cue lies
  between its first matched content token (looking back up to
  :data:`NEGATION_LOOKBACK` tokens in the same sentence) and its last one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from .embed import STOPWORDS

__all__ = [
    "CITATION",
    "HEDGES",
    "NEGATIONS",
    "NEGATION_LOOKBACK",
    "PREMISE_REJECTION",
    "Support",
    "Token",
    "Window",
    "content_keys",
    "extract_claims",
    "is_hedge_sentence",
    "is_noncommittal",
    "make_windows",
    "normalise",
    "read_tokens",
    "span_negated",
    "split_sentences",
]

NEGATION_LOOKBACK = 2  # tokens before the first matched token that can negate a span

# -- text normalisation ---------------------------------------------------------------------------
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
CITATION = re.compile(r"[ \t]*\[\s*[Ss]?\d+(?:\s*[,;\u2013-]\s*[Ss]?\d+)*\s*\]")
_EMPHASIS = re.compile(r"\*\*|__|`")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_ABBREVIATION = re.compile(
    r"\b(?:e\.g|i\.e|etc|vs|cf|approx|mr|mrs|ms|dr|prof|st|inc|ltd|co|corp|jr|sr|fig|eq|"
    r"a\.m|p\.m|u\.s|u\.k|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.",
    re.IGNORECASE,
)
_NUMBER_ABBREVIATION = re.compile(r"\bno\.(?=\s*\d)", re.IGNORECASE)
_INITIAL = re.compile(r"(?:^|(?<=\s))[A-Z]\.(?=\s)")
_HOLD = "\u2024"  # stands in for a period that does not end a sentence
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")

_TOKEN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:st|nd|rd|th)?|[^\W\d_]+(?:'[^\W\d_]+)*", re.UNICODE)
NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "neither", "nor", "cannot", "without", "nobody", "nowhere"})

_LEAD_IN = re.compile(
    r"^(?:(?:based on|according to|from|per|given) (?:the |my )?(?:provided |given |retrieved |available |above |following )?"
    r"(?:context|documents?|documentation|sources?|passages?|information|excerpts?|text|search results?)"
    r"(?: (?:provided|given|above|below|here|available|you (?:provided|shared)|i (?:have|found)))?\s*,\s*"
    r"|(?:sure|certainly|of course|absolutely|okay|ok|great question|good question)\s*[,!.:-]+\s*)",
    re.IGNORECASE,
)
_BOILERPLATE = re.compile(
    r"^(?:(?:i )?hope (?:this|that|it) helps|(?:please )?let me know\b|feel free\b|(?:is there )?anything else\b"
    r"|(?:great|good|excellent|interesting) question\b|(?:i'm|i am) (?:happy|glad) to help|thanks? (?:you )?for\b"
    r"|.*:$|in (?:summary|conclusion|short)[,.]?$)",
    re.IGNORECASE,
)
_CONTEXT_NOUN = r"(?:context|documents?|documentation|sources?|passages?|text|excerpts?|information provided|provided information|knowledge base|search results?|retrieved \w+)"
HEDGES = re.compile(
    "|".join(
        [
            r"\b(?:i|we) (?:do not|don't|did not|didn't) know\b",
            r"\b(?:i'm|i am|we're|we are) not (?:sure|certain)\b",
            r"\bnot sure\b",
            r"\bunsure\b",
            r"\b(?:i|we)(?: am| are| was| were)? (?:cannot|can not|can't|could not|couldn't|unable to) (?:find|locate|determine|answer|tell|confirm|verify|say|help)\b",
            r"(?:^|[.!?]\s+|,\s*)(?:sorry,?\s*)?(?:cannot|can't|could not|couldn't|unable to) (?:find|locate|determine)\b",
            r"\b(?:there is|there's|there are|i have|i found|we have|i could find|contains?) no (?:relevant |specific |such |available )?(?:information|info|details?|data|mention)\b",
            r"\bno information (?:about|on|regarding|is available|was found)\b",
            r"\b(?:not enough|insufficient|no sufficient) (?:information|context|details?)\b",
            r"\b(?:the )?(?:provided |given |retrieved |available )?" + _CONTEXT_NOUN + r" (?:do|does|did)(?: not|n't) (?:mention|say|specify|state|contain|include|provide|cover|address|discuss|explain)\b",
            r"\b(?:not|n't) (?:mentioned|specified|stated|covered|provided|available|addressed|discussed|found|given)(?: anywhere)? in (?:the |my )?(?:provided |given |retrieved |available )?" + _CONTEXT_NOUN,
            r"\b(?:i|we) (?:do not|don't) have (?:enough |any |that |the |this )?(?:information|details|data|access)\b",
            r"\bit(?: is|'s) (?:unclear|not clear)\b",
            r"\bbeyond (?:the scope|my knowledge)\b",
        ]
    ),
    re.IGNORECASE,
)
_YES_NO = re.compile(r"^\s*(?:yes|no)\s*[.!]?\s*$", re.IGNORECASE)
PREMISE_REJECTION = re.compile(
    "|".join(
        [
            r"\bthere (?:is|are|was|were)(?: not|n't)? no\b",
            r"\bthere (?:is|are|was|were)(?: not|n't) (?:any|a|an)\b",
            r"\bno such\b",
            r"\b(?:does|do|did)(?: not|n't) (?:exist|happen|offer|have|support|provide|include)\b",
            r"\bnever (?:existed|happened|been|offered|had)\b",
            r"\b(?:is|are|was|were)(?: not|n't) (?:true|correct|accurate|possible|the case|available|offered|supported)\b",
            r"\bfalse premise\b",
            r"\bpremise (?:is|seems|appears) (?:false|incorrect|wrong|mistaken)\b",
            r"\bmisconception\b",
            r"\bmistaken\b",
            r"\bcontrary to\b",
            r"\bnot actually\b",
        ]
    ),
    re.IGNORECASE,
)


def normalise(text: str) -> str:
    return text.translate(_QUOTES)


def _protect(block: str) -> str:
    block = _ABBREVIATION.sub(lambda m: m.group(0)[:-1] + _HOLD, block)
    block = _NUMBER_ABBREVIATION.sub(lambda m: m.group(0)[:-1] + _HOLD, block)
    return _INITIAL.sub(lambda m: m.group(0)[:-1] + _HOLD, block)


def _blocks(text: str, keep_headings: bool) -> list[str]:
    blocks: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            continue
        if _HEADING.match(line):
            flush()
            if keep_headings:
                blocks.append(_HEADING.sub("", line).strip())
            continue
        if _LIST_MARKER.match(line):
            flush()
            line = _LIST_MARKER.sub("", line, count=1)
        current.append(line.strip())
    flush()
    return blocks


def split_sentences(text: str, keep_headings: bool = True) -> list[str]:
    """The text's sentences, citation markers and list markers removed (rules in the module docstring)."""
    text = _EMPHASIS.sub("", CITATION.sub("", normalise(text or "")))
    sentences: list[str] = []
    for block in _blocks(text, keep_headings):
        for piece in _SENTENCE_END.split(_protect(block)):
            piece = " ".join(piece.replace(_HOLD, ".").split())
            if piece:
                sentences.append(piece)
    return sentences


# -- tokens ---------------------------------------------------------------------------------------
class Token(NamedTuple):
    key: str  # normalised number or stemmed word
    number: bool
    negation: bool
    content: bool
    surface: str


def _normalise_number(raw: str) -> str:
    raw = re.sub(r"(?:st|nd|rd|th)$", "", raw).replace(",", "")
    whole, _, fraction = raw.partition(".")
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def _undouble(word: str) -> str:
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeioulsz":
        return word[:-1]
    return word


def _stem(word: str) -> str:
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "ches", "shes", "xes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) > 4:
        word = _undouble(word[:-2])
    elif word.endswith("ly") and len(word) > 5:
        word = word[:-2]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


@lru_cache(maxsize=8192)
def read_tokens(text: str) -> tuple[Token, ...]:
    tokens: list[Token] = []
    for match in _TOKEN.finditer(CITATION.sub("", normalise(text)).lower()):
        raw = match.group(0)
        if raw[0].isdigit():
            tokens.append(Token(_normalise_number(raw), True, False, True, raw))
            continue
        negation = raw in NEGATIONS or raw.endswith("n't")
        content = not negation and len(raw) >= 2 and raw not in STOPWORDS
        tokens.append(Token(_stem(raw) if content else raw, False, negation, content, raw))
    return tuple(tokens)


def content_keys(text: str) -> frozenset[str]:
    return frozenset(token.key for token in read_tokens(text) if token.content)


# -- windows of sentences, negation spans ------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    passage: int  # 0-based index of the passage
    first: int  # 0-based index of the first sentence
    last: int  # 0-based index of the last sentence (inclusive)
    tokens: tuple[Any, ...]  # a version's own tokens: Token here, lexical-v2 reads values too
    sentence_of: tuple[int, ...]  # sentence index of each token
    keys: frozenset[str]
    numbers: frozenset[str]

    def where(self) -> str:
        sentences = f"sentence {self.first + 1}" if self.first == self.last else f"sentences {self.first + 1}-{self.last + 1}"
        return f"passage {self.passage + 1}, {sentences}"


@lru_cache(maxsize=4096)
def _passage_sentences(passage: str, tokenise: Callable[[str], tuple] = read_tokens) -> tuple[tuple[Token, ...], ...]:
    return tuple(tokenise(sentence) for sentence in split_sentences(passage))


def make_windows(passages: Sequence[str], max_sentences: int, tokenise: Callable[[str], tuple] = read_tokens) -> list[Window]:
    """Every run of 1..max_sentences consecutive sentences of one passage (``tokenise`` reads a sentence)."""
    windows: list[Window] = []
    for p, passage in enumerate(passages):
        sentences = _passage_sentences(passage, tokenise)
        for first in range(len(sentences)):
            for last in range(first, min(first + max_sentences, len(sentences))):
                tokens: list[Token] = []
                owner: list[int] = []
                for index in range(first, last + 1):
                    tokens.extend(sentences[index])
                    owner.extend([index] * len(sentences[index]))
                keys = frozenset(t.key for t in tokens if t.content)
                numbers = frozenset(t.key for t in tokens if t.number)
                windows.append(Window(p, first, last, tuple(tokens), tuple(owner), keys, numbers))
    return windows


def span_negated(tokens: Sequence[Any], owner: Sequence[int], keys: frozenset[str]) -> bool:
    """A negation cue between the first and last token whose key is in ``keys``."""
    matched = [i for i, token in enumerate(tokens) if token.content and token.key in keys]
    if not matched:
        return False
    start = matched[0]
    for _ in range(NEGATION_LOOKBACK):
        if start > 0 and owner[start - 1] == owner[matched[0]]:
            start -= 1
    return any(token.negation for token in tokens[start : matched[-1] + 1])


class Support(NamedTuple):
    supported: bool
    coverage: float
    reason: str




# -- claims and hedges ------------------------------------------------------------------------
def is_hedge_sentence(sentence: str) -> bool:
    return bool(HEDGES.search(normalise(sentence)))


def extract_claims(text: str, is_hedge: Callable[[str], bool] = is_hedge_sentence) -> list[str]:
    """The claims of a text: its sentences minus boilerplate, hedges and duplicates."""
    claims: list[str] = []
    for sentence in split_sentences(text, keep_headings=False):
        sentence = _LEAD_IN.sub("", sentence).strip()
        if not sentence or _BOILERPLATE.search(sentence) or is_hedge(sentence):
            continue
        if not content_keys(sentence):
            continue
        sentence = sentence[0].upper() + sentence[1:]
        if sentence not in claims:
            claims.append(sentence)
    return claims


def is_noncommittal(answer: str, is_hedge: Callable[[str], bool] = is_hedge_sentence) -> bool:
    """The answer commits to nothing: empty, or only hedges/boilerplate (a bare yes/no commits)."""
    if not answer or not answer.strip():
        return True
    if _YES_NO.match(CITATION.sub("", normalise(answer))):
        return False
    return not extract_claims(answer, is_hedge)

