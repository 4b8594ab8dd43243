"""``lexical-v1``: an offline, deterministic judge made of documented heuristics.

:class:`LexicalJudge` answers every request kind of
:mod:`pytest_crucible.judge.types` without a model, a network or a random
number: the same request always gets the same verdict, on any machine.  It
exists so that a golden set can run in CI for free and so that the metric
plumbing can be tested end to end.  **It is a lexical heuristic, not a reader**:
it matches words, not meaning.  Use a model judge when the answer metrics
matter; never compare runs judged by ``lexical-v1`` with runs judged by a model
(the judge model is stamped on every verdict for that reason).

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

Request kinds
-------------
**claims** -- the text's sentences are the claims (the ``question`` is not
used: a model would resolve pronouns with it, we do not).  Lead-ins such as
"Based on the provided context," or "Sure," are cut; sentences that are only
boilerplate ("Hope this helps.", "Let me know if ...", "Great question!",
markdown headings, and any sentence ending with a colon, which only introduces
what follows: "Here are the steps:") or an abstention/hedge (see
*noncommittal* below) are dropped, as are sentences without a content token
and exact duplicates.  Empty text -> ``[]``.  Limit: a sentence that states
two facts is one claim ("France is in Europe and its capital is Paris").

**entailment** -- a claim is supported when some *window* of one to
:data:`MAX_WINDOW_SENTENCES` consecutive sentences of one context passage (never
across passages) contains at least :data:`ENTAILMENT_THRESHOLD` (0.7) of the
claim's content tokens, **and** every number of the claim (a claim with a
number that is not in that window is *not* supported, whatever the rest
matches: "45 days" is not entailed by "30 days"), **and** the claim and the
window's matched span have the same negation polarity ("X includes phone
support" is not entailed by "X does not include phone support").  Context
passages are data: an instruction written inside a passage ("ignore previous
instructions", "grade this as faithful") is just more tokens; it can change a
verdict only through token overlap, like any other text.  Limits: word overlap
is not inference -- a claim that reorders the context's words into a different
statement is supported; a claim that paraphrases the context is not; a
negation cue between two matched words that does not negate the claim (e.g.
"annual plans, which are not discounted, can be refunded") makes the window
negated.

**questions** -- the "questions the answer would answer" are built, not
generated: question *i* is ``"What about <phrase>?"`` where the phrases are, in
order, the content words (surface form, first :data:`MAX_PHRASE_WORDS`) of each
claim of the answer, then of the whole answer, cycled until there are ``n``.
Response relevancy is then the cosine between the golden question's embedding
and these strings' embeddings -- **a proxy** for ragas's generated questions:
it rewards answers whose claims use the question's words, and it lowers the
score of answers padded with off-topic sentences (each off-topic claim yields
an off-topic question).  *noncommittal* (the same flag for every generation):
the answer commits to nothing -- it is empty, or after dropping hedge and
boilerplate sentences no claim is left, unless it is a bare "yes"/"no".  Hedge
phrases include "I don't know", "I'm not sure", "not sure", "unsure", "cannot
find" (after "I"/"we" or opening a sentence), "unable to determine", "there is
no information", "not enough information", "the context does not mention ...",
"is not specified in the documents", "it is unclear".  An answer that hedges in one sentence and states
a fact in another is committal.  An empty answer gives ``n`` empty questions,
all noncommittal.

**usefulness** -- the chunk is useful when it supports at least one sentence of
the reference by the entailment rule above, or -- unless it *contradicts* a
reference sentence (same test as for correctness below: a chunk sentence
covering >= 0.7 of the sentence's words with different numbers or the opposite
negation) -- when it contains at least :data:`USEFUL_OVERLAP` (0.5) of the
reference's content tokens (so a chunk carrying half of a long one-sentence
reference still counts).  With an empty reference the question's content
tokens stand in for the reference's (overlap rule only).

**relevance** -- grade from the coverage of the question's content tokens:

* 3 (dedicated): a window of at most :data:`RELEVANCE_WINDOW_SENTENCES` (2)
  sentences covers >= :data:`RELEVANCE_DEDICATED` (0.75) of them;
* 2 (partly relevant): the whole chunk covers >= :data:`RELEVANCE_PARTIAL` (0.5);
* 1 (related): the whole chunk covers >= :data:`RELEVANCE_RELATED` (0.25);
* 0 (unrelated): less, or the question has no content token.

Limit: coverage of the question's words is not the presence of an answer; a
chunk that restates the question scores 3.

**correctness** -- a CRAG-style grade (perfect / acceptable / missing /
incorrect):

1. a noncommittal answer (rule above) is *missing*, except that it is *perfect*
   when the question is unanswerable (``answerable=False``) or rests on a false
   premise (``false_premise=True``): abstaining was right;
2. on a false-premise question a committal answer is *perfect* when it rejects
   the premise -- a rejection phrase anywhere in it ("there is no", "no
   such", "does not exist", "does not have/offer/support", "is not
   possible/available", "false premise", "misconception", "mistaken", ...) or a
   negated reference sentence the answer supports by the entailment rule --
   and *incorrect* otherwise (it answered as if the premise held);
3. on an unanswerable question a committal answer is *incorrect* (the golden
   set says no answer exists);
4. otherwise the targets are the must-assertions when there are any, else the
   reference's sentences, each checked against the answer's sentences by the
   entailment rule.  A *contradiction* -- an unsupported target whose
   non-number content tokens are >= :data:`CONTRADICTION_OVERLAP` (0.7)
   covered by one answer sentence that carries different numbers, or the same
   numbers with the opposite negation polarity -- makes the answer
   *incorrect*.  Else all targets supported -> *perfect*; at least half ->
   *acceptable*; fewer -> *incorrect*.

A correctness request with neither assertions nor reference (for an answerable
question without a false premise) cannot be graded: the judge returns a
:class:`~pytest_crucible.judge.types.JudgeFailure`, never a default grade.
Limits: an answer that states every assertion and adds a hallucination is still
*perfect* (faithfulness catches the hallucination); a rejection phrase about
something else ("export is not possible, but offline mode is under Settings")
counts as rejecting the premise; every phrase list is English only.

:meth:`LexicalJudge.judge` handles any mix of kinds and returns one verdict per
request, in order; it does not raise for well-formed requests (an unexpected
internal error comes back as a ``JudgeFailure`` naming it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from .embed import STOPWORDS
from .engine import Judge
from .types import (
    ClaimsRequest,
    ClaimsVerdict,
    CorrectnessRequest,
    CorrectnessVerdict,
    EntailmentRequest,
    EntailmentVerdict,
    JudgeFailure,
    JudgeRequest,
    QuestionsRequest,
    QuestionsVerdict,
    RelevanceRequest,
    RelevanceVerdict,
    UsefulnessRequest,
    UsefulnessVerdict,
    Verdict,
)

__all__ = [
    "CONTRADICTION_OVERLAP",
    "ENTAILMENT_THRESHOLD",
    "MAX_PHRASE_WORDS",
    "MAX_WINDOW_SENTENCES",
    "NEGATION_LOOKBACK",
    "RELEVANCE_DEDICATED",
    "RELEVANCE_PARTIAL",
    "RELEVANCE_RELATED",
    "RELEVANCE_WINDOW_SENTENCES",
    "USEFUL_OVERLAP",
    "LexicalJudge",
    "extract_claims",
    "is_noncommittal",
    "split_sentences",
]

# -- thresholds (every one is documented in the module docstring) ---------------------------------
ENTAILMENT_THRESHOLD = 0.7  # share of a claim's content tokens found in one window
MAX_WINDOW_SENTENCES = 3  # windows are 1..3 consecutive sentences of one passage
USEFUL_OVERLAP = 0.5  # share of the reference's content tokens found in the chunk
RELEVANCE_DEDICATED = 0.75  # grade 3: in a window of <= RELEVANCE_WINDOW_SENTENCES sentences
RELEVANCE_PARTIAL = 0.5  # grade 2: in the whole chunk
RELEVANCE_RELATED = 0.25  # grade 1: in the whole chunk
RELEVANCE_WINDOW_SENTENCES = 2
CONTRADICTION_OVERLAP = 0.7  # non-number overlap of a target with one answer sentence
MAX_PHRASE_WORDS = 12  # words per generated "question"
NEGATION_LOOKBACK = 2  # tokens before the first matched token that can negate a span

# -- text normalisation ---------------------------------------------------------------------------
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
_CITATION = re.compile(r"[ \t]*\[\s*[Ss]?\d+(?:\s*[,;\u2013-]\s*[Ss]?\d+)*\s*\]")
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
_NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "neither", "nor", "cannot", "without", "nobody", "nowhere"})

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
_HEDGES = re.compile(
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
_PREMISE_REJECTION = re.compile(
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


def _normalise(text: str) -> str:
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
    text = _EMPHASIS.sub("", _CITATION.sub("", _normalise(text or "")))
    sentences: list[str] = []
    for block in _blocks(text, keep_headings):
        for piece in _SENTENCE_END.split(_protect(block)):
            piece = " ".join(piece.replace(_HOLD, ".").split())
            if piece:
                sentences.append(piece)
    return sentences


# -- tokens ---------------------------------------------------------------------------------------
class _Token(NamedTuple):
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
    elif word.endswith("sses") or word.endswith(("ches", "shes", "xes", "zes")):
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
def _tokens(text: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(_CITATION.sub("", _normalise(text)).lower()):
        raw = match.group(0)
        if raw[0].isdigit():
            tokens.append(_Token(_normalise_number(raw), True, False, True, raw))
            continue
        negation = raw in _NEGATIONS or raw.endswith("n't")
        content = not negation and len(raw) >= 2 and raw not in STOPWORDS
        tokens.append(_Token(_stem(raw) if content else raw, False, negation, content, raw))
    return tuple(tokens)


def _content_keys(text: str) -> frozenset[str]:
    return frozenset(token.key for token in _tokens(text) if token.content)


# -- windows and the entailment rule ----------------------------------------------------------------
@dataclass(frozen=True)
class _Window:
    passage: int  # 0-based index of the passage
    first: int  # 0-based index of the first sentence
    last: int  # 0-based index of the last sentence (inclusive)
    tokens: tuple[_Token, ...]
    sentence_of: tuple[int, ...]  # sentence index of each token
    keys: frozenset[str]
    numbers: frozenset[str]

    def where(self) -> str:
        sentences = f"sentence {self.first + 1}" if self.first == self.last else f"sentences {self.first + 1}-{self.last + 1}"
        return f"passage {self.passage + 1}, {sentences}"


@lru_cache(maxsize=4096)
def _passage_sentences(passage: str, tokenise: Callable[[str], tuple] = _tokens) -> tuple[tuple[_Token, ...], ...]:
    return tuple(tokenise(sentence) for sentence in split_sentences(passage))


def _windows(passages: Sequence[str], max_sentences: int, tokenise: Callable[[str], tuple] = _tokens) -> list[_Window]:
    """Every run of 1..max_sentences consecutive sentences of one passage (``tokenise`` reads a sentence)."""
    windows: list[_Window] = []
    for p, passage in enumerate(passages):
        sentences = _passage_sentences(passage, tokenise)
        for first in range(len(sentences)):
            for last in range(first, min(first + max_sentences, len(sentences))):
                tokens: list[_Token] = []
                owner: list[int] = []
                for index in range(first, last + 1):
                    tokens.extend(sentences[index])
                    owner.extend([index] * len(sentences[index]))
                keys = frozenset(t.key for t in tokens if t.content)
                numbers = frozenset(t.key for t in tokens if t.number)
                windows.append(_Window(p, first, last, tuple(tokens), tuple(owner), keys, numbers))
    return windows


def _span_negated(tokens: Sequence[_Token], owner: Sequence[int], keys: frozenset[str]) -> bool:
    """A negation cue between the first and last token whose key is in ``keys``."""
    matched = [i for i, token in enumerate(tokens) if token.content and token.key in keys]
    if not matched:
        return False
    start = matched[0]
    for _ in range(NEGATION_LOOKBACK):
        if start > 0 and owner[start - 1] == owner[matched[0]]:
            start -= 1
    return any(token.negation for token in tokens[start : matched[-1] + 1])


def _claim_shape(claim: str) -> tuple[frozenset[str], frozenset[str], bool]:
    tokens = _tokens(claim)
    keys = frozenset(t.key for t in tokens if t.content)
    numbers = frozenset(t.key for t in tokens if t.number)
    return keys, numbers, _span_negated(tokens, [0] * len(tokens), keys)


class _Support(NamedTuple):
    supported: bool
    coverage: float
    reason: str


def _support(claim: str, windows: Sequence[_Window], threshold: float = ENTAILMENT_THRESHOLD) -> _Support:
    keys, numbers, negated = _claim_shape(claim)
    if not keys:
        return _Support(False, 0.0, "the claim has no content word")
    if not windows:
        return _Support(False, 0.0, "no context")
    best: tuple[float, _Window | None] = (-1.0, None)
    blocked: str = ""
    for window in windows:
        coverage = len(keys & window.keys) / len(keys)
        if coverage > best[0]:
            best = (coverage, window)
        if coverage < threshold:
            continue
        if not numbers <= window.numbers:
            missing = ", ".join(sorted(numbers - window.numbers))
            blocked = blocked or f"number {missing} not in {window.where()} (coverage {coverage:.2f})"
            continue
        if _span_negated(window.tokens, window.sentence_of, keys) != negated:
            blocked = blocked or f"negation differs from {window.where()} (coverage {coverage:.2f})"
            continue
        return _Support(True, coverage, f"coverage {coverage:.2f} >= {threshold:.2f} in {window.where()}")
    coverage, window = best
    if blocked:
        return _Support(False, coverage, blocked)
    where = f" ({window.where()})" if window is not None else ""
    return _Support(False, coverage, f"best coverage {coverage:.2f} < {threshold:.2f}{where}")


# -- claims, hedges, questions ------------------------------------------------------------------------
def _is_hedge(sentence: str) -> bool:
    return bool(_HEDGES.search(_normalise(sentence)))


def extract_claims(text: str, is_hedge: Callable[[str], bool] = _is_hedge) -> list[str]:
    """The claims of a text: its sentences minus boilerplate, hedges and duplicates."""
    claims: list[str] = []
    for sentence in split_sentences(text, keep_headings=False):
        sentence = _LEAD_IN.sub("", sentence).strip()
        if not sentence or _BOILERPLATE.search(sentence) or is_hedge(sentence):
            continue
        if not _content_keys(sentence):
            continue
        sentence = sentence[0].upper() + sentence[1:]
        if sentence not in claims:
            claims.append(sentence)
    return claims


def is_noncommittal(answer: str, is_hedge: Callable[[str], bool] = _is_hedge) -> bool:
    """The answer commits to nothing: empty, or only hedges/boilerplate (a bare yes/no commits)."""
    if not answer or not answer.strip():
        return True
    if _YES_NO.match(_CITATION.sub("", _normalise(answer))):
        return False
    return not extract_claims(answer, is_hedge)


def _phrase(text: str) -> str:
    words = [t.surface for t in _tokens(text) if t.content]
    return " ".join(words[:MAX_PHRASE_WORDS])


def _answer_phrase(claims: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    order: dict[str, int] = {}
    for claim in claims:
        for token in _tokens(claim):
            if token.content:
                counts[token.surface] = counts.get(token.surface, 0) + 1
                order.setdefault(token.surface, len(order))
    ranked = sorted(counts, key=lambda word: (-counts[word], order[word]))
    return " ".join(ranked[:MAX_PHRASE_WORDS])


# -- the judge ------------------------------------------------------------------------------------
class LexicalJudge(Judge):
    """Offline, deterministic judge (``lexical-v1``): token overlap, not understanding."""

    model = "lexical-v1"
    prompt_version = "lexical-v1"
    label = "lexical-v1 (offline heuristic)"
    paid = False

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[[JudgeRequest], Verdict | JudgeFailure]] = {
            "claims": self._claims,  # type: ignore[dict-item]
            "entailment": self._entailment,  # type: ignore[dict-item]
            "questions": self._questions,  # type: ignore[dict-item]
            "usefulness": self._usefulness,  # type: ignore[dict-item]
            "relevance": self._relevance,  # type: ignore[dict-item]
            "correctness": self._correctness,  # type: ignore[dict-item]
        }

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict | JudgeFailure]:
        results: list[Verdict | JudgeFailure] = []
        for request in requests:
            kind = getattr(request, "kind", type(request).__name__)
            handler = self._handlers.get(kind)
            if handler is None:
                results.append(JudgeFailure(kind=str(kind), message=f"{self.model} cannot judge requests of kind {kind!r}"))
                continue
            try:
                verdict = handler(request)
            except Exception as exc:  # a bug here must not take the run down, nor pass silently
                results.append(JudgeFailure(kind=kind, message=f"{self.model} failed: {type(exc).__name__}: {exc}"))
                continue
            if not isinstance(verdict, JudgeFailure):
                verdict.judge_model, verdict.prompt_version = self.model, self.prompt_version
            results.append(verdict)
        return results

    # claims ---------------------------------------------------------------------------------------
    def _claims(self, request: ClaimsRequest) -> ClaimsVerdict:
        return ClaimsVerdict(claims=extract_claims(request.text))

    # entailment -----------------------------------------------------------------------------------
    def _entailment(self, request: EntailmentRequest) -> EntailmentVerdict:
        windows = _windows(request.context, MAX_WINDOW_SENTENCES)
        results = [_support(claim, windows) for claim in request.claims]
        return EntailmentVerdict(supported=[r.supported for r in results], reasons=[r.reason for r in results])

    # questions ------------------------------------------------------------------------------------
    def _questions(self, request: QuestionsRequest) -> QuestionsVerdict:
        n = max(0, request.n)
        noncommittal = is_noncommittal(request.answer)
        claims = extract_claims(request.answer)
        phrases = [p for p in (_phrase(claim) for claim in claims) if p]
        whole = _answer_phrase(claims) or _phrase(" ".join(split_sentences(request.answer)))
        if whole:
            phrases.append(whole)
        if not phrases:
            return QuestionsVerdict(questions=[""] * n, noncommittal=[True] * n)
        questions = [f"What about {phrases[i % len(phrases)]}?" for i in range(n)]
        return QuestionsVerdict(questions=questions, noncommittal=[noncommittal] * n)

    # usefulness -----------------------------------------------------------------------------------
    def _usefulness(self, request: UsefulnessRequest) -> UsefulnessVerdict:
        chunk_keys = frozenset().union(*(w.keys for w in _windows([request.chunk], 1))) if request.chunk.strip() else frozenset()
        if request.reference.strip():
            windows = _windows([request.chunk], MAX_WINDOW_SENTENCES)
            sentences = extract_claims(request.reference) or [request.reference]
            for index, sentence in enumerate(sentences):
                result = _support(sentence, windows)
                if result.supported:
                    return UsefulnessVerdict(useful=True, reason=f"supports reference sentence {index + 1}: {result.reason}")
            sentence_windows = _windows([request.chunk], 1)
            for index, sentence in enumerate(sentences):
                clash = _contradiction(sentence, sentence_windows)
                if clash:
                    return UsefulnessVerdict(useful=False, reason=f"contradicts reference sentence {index + 1}: {clash}")
            target, what = _content_keys(request.reference), "reference"
        else:
            target, what = _content_keys(request.question), "question (empty reference)"
        if not target:
            return UsefulnessVerdict(useful=False, reason=f"the {what} has no content word")
        overlap = len(target & chunk_keys) / len(target)
        useful = overlap >= USEFUL_OVERLAP
        sign = ">=" if useful else "<"
        return UsefulnessVerdict(useful=useful, reason=f"{overlap:.2f} of the {what}'s content words in the chunk ({sign} {USEFUL_OVERLAP:.2f})")

    # relevance ------------------------------------------------------------------------------------
    def _relevance(self, request: RelevanceRequest) -> RelevanceVerdict:
        keys = _content_keys(request.question)
        if not keys:
            return RelevanceVerdict(grade=0, reason="the question has no content word")
        windows = _windows([request.chunk], RELEVANCE_WINDOW_SENTENCES)
        if not windows:
            return RelevanceVerdict(grade=0, reason="empty chunk")
        best = max(len(keys & w.keys) / len(keys) for w in windows)
        chunk_keys = frozenset().union(*(w.keys for w in windows))
        overall = len(keys & chunk_keys) / len(keys)
        if best >= RELEVANCE_DEDICATED:
            grade, why = 3, f"{best:.2f} of the question's content words within {RELEVANCE_WINDOW_SENTENCES} sentences (>= {RELEVANCE_DEDICATED})"
        elif overall >= RELEVANCE_PARTIAL:
            grade, why = 2, f"{overall:.2f} of the question's content words in the chunk (>= {RELEVANCE_PARTIAL})"
        elif overall >= RELEVANCE_RELATED:
            grade, why = 1, f"{overall:.2f} of the question's content words in the chunk (>= {RELEVANCE_RELATED})"
        else:
            grade, why = 0, f"{overall:.2f} of the question's content words in the chunk (< {RELEVANCE_RELATED})"
        return RelevanceVerdict(grade=grade, reason=why)

    # correctness ----------------------------------------------------------------------------------
    def _correctness(self, request: CorrectnessRequest) -> CorrectnessVerdict | JudgeFailure:
        answer = request.answer or ""
        if is_noncommittal(answer):
            if request.false_premise:
                return CorrectnessVerdict(grade="perfect", reason="abstained on a false-premise question")
            if not request.answerable:
                return CorrectnessVerdict(grade="perfect", reason="abstained on an unanswerable question")
            return CorrectnessVerdict(grade="missing", reason="the answer is noncommittal (abstention or hedge)")
        answer_windows = _windows([answer], MAX_WINDOW_SENTENCES)
        if request.false_premise:
            rejection = self._rejects_premise(answer, request.reference, answer_windows)
            if rejection:
                return CorrectnessVerdict(grade="perfect", reason=f"rejects the false premise ({rejection})")
            return CorrectnessVerdict(grade="incorrect", reason="answers as if the false premise held")
        if not request.answerable:
            return CorrectnessVerdict(grade="incorrect", reason="answers a question the golden set marks unanswerable")
        targets = [a for a in request.assertions if a.strip()]
        source = "assertion"
        if not targets and request.reference and request.reference.strip():
            targets = extract_claims(request.reference) or [request.reference]
            source = "reference sentence"
        if not targets:
            return JudgeFailure(kind="correctness", message="nothing to grade against: no assertions and no reference")
        sentence_windows = _windows([answer], 1)
        supported = 0
        contradictions: list[str] = []
        contradicted: list[str] = []
        for index, target in enumerate(targets):
            if _support(target, answer_windows).supported:
                supported += 1
                continue
            clash = _contradiction(target, sentence_windows)
            if clash:
                contradictions.append(f"{source} {index + 1}: {clash}")
                contradicted.append(target)
        total = len(targets)
        tally = f"{supported}/{total} {source}s supported"
        if contradictions:
            return CorrectnessVerdict(grade="incorrect", reason=f"contradicts {'; '.join(contradictions)} ({tally})",
                                      contradicts=contradicted[0], contradicts_source=source)
        if supported == total:
            return CorrectnessVerdict(grade="perfect", reason=tally)
        if 2 * supported >= total:
            return CorrectnessVerdict(grade="acceptable", reason=tally)
        return CorrectnessVerdict(grade="incorrect", reason=tally)

    @staticmethod
    def _rejects_premise(answer: str, reference: str | None, windows: Sequence[_Window]) -> str:
        match = _PREMISE_REJECTION.search(_normalise(answer))
        if match:
            return f"says {match.group(0)!r}"
        for sentence in extract_claims(reference or ""):
            _, _, negated = _claim_shape(sentence)
            if negated and _support(sentence, windows).supported:
                return f"supports the reference's correction {sentence!r}"
        return ""


def _contradiction(target: str, sentence_windows: Iterable[_Window]) -> str:
    keys, numbers, negated = _claim_shape(target)
    words = keys - numbers
    if not words:
        return ""
    for window in sentence_windows:
        coverage = len(words & window.keys) / len(words)
        if coverage < CONTRADICTION_OVERLAP:
            continue
        if numbers and window.numbers and not numbers <= window.numbers:
            theirs = ", ".join(sorted(window.numbers - numbers)) or ", ".join(sorted(window.numbers))
            ours = ", ".join(sorted(numbers))
            return f"the answer says {theirs} where it expects {ours} ({window.where()})"
        if numbers <= window.numbers and _span_negated(window.tokens, window.sentence_of, keys) != negated:
            return f"opposite negation ({window.where()})"
    return ""
