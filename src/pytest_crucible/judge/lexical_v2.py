"""``lexical-v2``: the offline judge, reading values and polarity, not only shared words.

Deterministic, offline and fast like ``lexical-v1`` (:mod:`pytest_crucible.judge.lexical`), which
stays selectable (``--crucible-judge=lexical-v1``) so that runs judged by it stay comparable. It
is still a heuristic, not a reader: measure it on your own labels with ``crucible judge
calibrate`` (docs/judge-calibration.md has its figures on the project's calibration set). What
it changes, kind by kind:

Reading a text
--------------
* **Values** are read by :mod:`pytest_crucible.judge.quantities`: "$40" = "40 dollars" = "forty
  dollars", "two weeks" = "14 days", "7 pm" = "19:00", "half" = "50%", weekdays and dates ("mid-October"
  meets "October 15"), "about $45" within 10% of "$44.50". A claim is checked value by value (every
  value it states must be one the passage states), never digit by digit.
* **Words** are stemmed with the Snowball English stemmer ("cancellation", "cancelling" ->
  "cancel"); hyphenated words stay one word ("e-bikes", "check-in"); "before" and "after" are
  content words (they change what a sentence says).
* **Polarity.** Negation cues as in v1, plus the prefix "non-" ("non-refundable"). A small table
  of antonyms (:data:`ANTONYMS`: open/closed, keep/stop, include/exclude, allow/ban, before/after,
  more/less, ...) counts as a flip: a claim and a passage disagree when the number of negation
  differences plus antonym swaps between them is odd, so "nothing stops working" agrees with
  "keeps working" and "stops working" contradicts it.
* **Abstentions** add topic-first and deflecting phrasings to v1's hedges: "X isn't listed in
  what I was given", "I'm not able to answer that", "there's nothing about X".
* **Claims** are v1's, with a hedging lead-in cut ("I think so: it looks like X", "If I'm reading
  it correctly, X" -> "X"): how sure an answer sounds is not a fact to find in the passages.

Request kinds (others as in v1: questions, usefulness, relevance)
------------------------------------------------------------------
**entailment** -- a claim is supported by a window of 1-3 consecutive sentences of one passage
when the window holds every value the claim states, the same polarity (rule above), no
*substitution*, and at least :data:`SUPPORT_THRESHOLD` of the claim's words -- or any share of
them (:data:`VALUE_ANCHORED_COVERAGE`) when every value of the claim is a typed one (a time, an
amount of money, a duration, a percentage, a date or a weekday, not a bare number): such values
rarely meet in one window by chance, and they carry the claim ("leave your pitch by eleven in the
morning" / "check-out is by 11:00"). A substitution, looked for in a near copy (coverage >=
:data:`NEAR_COPY`): a claim word missing from the window, framed by the same neighbours there as
in the claim, with a different word in its place that is no synonym of it (embedding cosine below
:data:`SWAP_SIMILARITY`, :mod:`pytest_crucible.judge.similarity`): "team license" for "personal
license", "dispensed" for "signed"; or a qualifier ("before", "after", "except", "unless") one side
has between neighbours the other has side by side ("the day of travel" / "the day before travel").
A near copy (coverage >= :data:`SUPPORT_THRESHOLD`) with the opposite polarity or a swap is not
supported, whatever a weaker window says.

**correctness** -- the CRAG grade:

1. a noncommittal answer is *missing*, or *perfect* when no answer exists (the question is
   unanswerable, rests on a false premise, or the reference itself says the documents do not
   give the answer);
2. false premise: as v1 (the answer must reject it); no answer exists: a committal answer is
   *incorrect*; when the answer does not reject a false premise but states the correcting
   must-assertions (coverage >= :data:`PERFECT_COVERAGE`, no contradiction), it is *perfect*;
3. **polarity**: the reference opens with "Yes" or "No" and the answer opens with the opposite
   -> *incorrect*;
4. the targets are the must-assertions (a lead such as "Says" or "Corrects the premise:" cut),
   else the reference's clauses (sentences split at ";", parentheses left out: they add detail the
   question did not ask for); a target's *words* leave out words of the question (an answer need
   not repeat the question).
   A **contradiction** makes the answer *incorrect*: a target value missing from the answer
   while the answer states a value of the same kind that the reference and the question never
   mention ("50%" where the reference says "25%"); a target sentence the answer restates
   (coverage >= :data:`OPPOSITE_RESTATED`) with the opposite polarity; a swapped word as in
   entailment (coverage >= :data:`RESTATED`). The verdict names the contradicted target
   (``contradicts``), which the failure evidence quotes;
5. otherwise the *coverage* -- each target's share of its words and values (a value weighs
   :data:`VALUE_WEIGHT` words) found in the answer, averaged over targets -- grades it: >=
   :data:`PERFECT_COVERAGE` *perfect*; >= :data:`ACCEPTABLE_COVERAGE`, or an answer opening
   with the reference's own "Yes"/"No", *acceptable*; else *incorrect*. Every target that holds a
   value counts once more in the mean: values are what questions ask for.

``lexical-v3`` builds on :func:`tokens_v2`, :func:`shape_v2` and :func:`support_v2`: like the blocks of
:mod:`pytest_crucible.judge.lexical_common` they are frozen (an edit changes v2's and v3's verdicts).

Limits: paraphrase with no shared word and no shared value ("money back" for "refund") is not
recognised; the antonym table is small and English only; a wrong answer that shares the
reference's words and values in another arrangement is not caught.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

import snowballstemmer

from ..metrics.crag import reference_gives_no_answer
from .embed import STOPWORDS
from .lexical import LexicalJudge
from .lexical_common import (
    CITATION,
    HEDGES,
    NEGATIONS,
    PREMISE_REJECTION,
    Support,
    Window,
    extract_claims,
    is_noncommittal,
    make_windows,
    normalise,
    span_negated,
    split_sentences,
)
from .quantities import PLACEHOLDER, Value, read_values, same_value
from .similarity import similarity
from .types import (
    ClaimsRequest,
    ClaimsVerdict,
    CorrectnessRequest,
    CorrectnessVerdict,
    EntailmentRequest,
    EntailmentVerdict,
    JudgeFailure,
    QuestionsRequest,
    QuestionsVerdict,
)

__all__ = [
    "ACCEPTABLE_COVERAGE",
    "ANTONYMS",
    "NEAR_COPY",
    "NO_ANSWER",
    "PERFECT_COVERAGE",
    "REFERENCE_NO",
    "REFERENCE_YES",
    "RESTATED",
    "SUPPORT_THRESHOLD",
    "VALUE_WEIGHT",
    "YES_ANSWER",
    "LexicalJudgeV2",
    "contradiction_v2",
    "coverage_v2",
    "has_value",
    "is_hedge_v2",
    "polarity",
    "rejects_premise_v2",
    "shape_v2",
    "support_v2",
    "targets_v2",
    "tokens_v2",
    "values_in",
    "windows_v2",
]

SUPPORT_THRESHOLD = 0.7  # share of a claim's words in one window
NEAR_COPY = 0.6  # coverage from which a single different word is a swap, not a paraphrase
RESTATED = 0.6  # share of a target's words and values an answer sentence needs to be compared with it
OPPOSITE_RESTATED = 0.8  # ... and to contradict it by polarity (a looser restatement may just rephrase)
VALUE_WEIGHT = 2  # a value counts as this many words in a target's coverage
PERFECT_COVERAGE = 0.7
ACCEPTABLE_COVERAGE = 0.3
MAX_WINDOW_SENTENCES = 3
VALUE_ANCHORED_COVERAGE = 0.0  # a claim whose every value is typed and in the window needs only this share of its words
SWAP_SIMILARITY = 0.2  # a replaced word less similar than this is a swap, not a synonym

# Opposites, as Snowball stems: a swap flips polarity like a negation does.
_ANTONYM_PAIRS = [
    ("open", "close"), ("includ", "exclud"), ("allow", "ban"), ("allow", "prohibit"), ("allow", "forbidden"),
    ("permit", "prohibit"), ("keep", "stop"), ("increas", "decreas"), ("increas", "reduc"), ("more", "less"),
    ("more", "fewer"), ("befor", "after"), ("earlier", "later"), ("earliest", "latest"), ("minimum", "maximum"),
    ("accept", "reject"), ("accept", "declin"), ("requir", "option"), ("mandatori", "option"), ("same", "differ"),
    ("full", "partial"), ("add", "remov"), ("lowest", "highest"), ("low", "high"), ("insid", "outsid"),
    ("abov", "below"), ("over", "under"), ("free", "paid"), ("win", "lose"), ("valid", "invalid"),
    ("avail", "unavail"), ("legal", "illeg"), ("possibl", "imposs"), ("refund", "forfeit"),
]
ANTONYMS: dict[str, frozenset[str]] = {}
for _a, _b in _ANTONYM_PAIRS:
    ANTONYMS[_a] = ANTONYMS.get(_a, frozenset()) | {_b}
    ANTONYMS[_b] = ANTONYMS.get(_b, frozenset()) | {_a}

_CONTENT_FUNCTION_WORDS = frozenset({"before", "after", "same"})
_STOPWORDS = (STOPWORDS - _CONTENT_FUNCTION_WORDS) | {"also", "just", "simply", "actually", "generally", "usually"}
_QUALIFIERS = frozenset({"befor", "after", "except", "unless"})
_WORD = re.compile(rf"{PLACEHOLDER}\d+x|[^\W\d_]+(?:[-'][^\W\d_]+)*", re.UNICODE)
_STEMMER = snowballstemmer.stemmer("english")

_MORE_HEDGES = re.compile(
    "|".join([
        r"\b(?:is|are|was|were)(?: not|n't) (?:listed|mentioned|specified|stated|included|given|covered|provided|shown)"
        r"(?: anywhere)? in\b",
        r"\b(?:not|n't|un)(?: be)? ?able to (?:answer|help|say|tell|confirm|find)\b",
        r"\b(?:can't|cannot|can not|couldn't|could not) (?:answer|help|say|tell|confirm)\b",
        r"\bthere(?:'s| is) nothing (?:about|on|regarding|in)\b",
        r"\b(?:i|we) (?:have|had|found|see) no (?:information|details?|data|mention)\b",
        r"\bno information about\b",
        r"\bthat i can see\b",
    ]),
    re.IGNORECASE,
)
_YES = re.compile(r"^\W*(?:yes|yeah|yep|sure|certainly|of course|absolutely|correct|you can)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(?:(?:unfortunately|sadly|sorry)\W+)?(?:no|nope|not|nothing|never|none)\b", re.IGNORECASE)
_REFERENCE_YES = re.compile(r"^\W*yes\s*[,.;:!]", re.IGNORECASE)
_REFERENCE_NO = re.compile(r"^\W*no\s*[,.;:!]", re.IGNORECASE)
# A committal claim wrapped in a hedge ("I think so: it looks like X", "If I'm reading it correctly, X")
# is the claim X: the wrapper is how sure the answer sounds, not a fact to find in the passages.
_EPISTEMIC_LEAD = re.compile(
    r"^(?:(?:i think|i believe|i guess|i suppose)(?: so)?\s*[:,]?\s*|(?:it |that )?(?:looks|seems|sounds|appears) "
    r"(?:like|that|as if)\s+|if i(?:'m| am) (?:reading|understanding) [^,]{0,60}(?:correctly|right),\s*|"
    r"as far as i (?:can tell|know),\s*|(?:probably|likely|apparently|presumably),\s*)+",
    re.IGNORECASE,
)


def _claims_of(text: str) -> list[str]:
    claims: list[str] = []
    for claim in extract_claims(text, _is_hedge):
        bare = _EPISTEMIC_LEAD.sub("", normalise(claim)).strip()
        bare = bare[:1].upper() + bare[1:] if bare else claim
        if bare not in claims:
            claims.append(bare)
    return claims


def _is_hedge(sentence: str) -> bool:
    text = normalise(sentence)
    return bool(HEDGES.search(text) or _MORE_HEDGES.search(text))


# -- tokens ---------------------------------------------------------------------------------------
class _Token(NamedTuple):
    key: str  # Snowball stem, or "" for values and function words
    number: bool  # always False: values are compared as values (see ``value``)
    negation: bool
    content: bool
    surface: str
    value: Value | None = None


@lru_cache(maxsize=16384)
def _stem(word: str) -> str:
    return "-".join(_STEMMER.stemWord(part) for part in word.split("-"))


@lru_cache(maxsize=8192)
def tokens_v2(text: str) -> tuple[_Token, ...]:
    replaced, values = read_values(CITATION.sub("", normalise(text)))
    tokens: list[_Token] = []
    for match in _WORD.finditer(replaced):
        raw = match.group(0)
        if raw.startswith(PLACEHOLDER) and raw.endswith("x") and raw[len(PLACEHOLDER):-1].isdigit():
            value = values[int(raw[len(PLACEHOLDER):-1])]
            tokens.append(_Token("", False, False, False, value.text, value))
            continue
        word = raw.lower()
        if word.startswith("non-") and len(word) > 4:
            tokens.append(_Token("", False, True, False, "non-"))
            word = word[4:]
        negation = word in NEGATIONS or word.endswith("n't")
        if word.endswith("'s"):
            word = word[:-2]
        content = not negation and len(word) >= 2 and word not in _STOPWORDS
        tokens.append(_Token(_stem(word) if content else word, False, negation, content, raw))
    return tuple(tokens)


class _Shape(NamedTuple):
    words: frozenset[str]
    values: tuple[Value, ...]  # required values (soft ones left out)
    negated: bool


@lru_cache(maxsize=8192)
def shape_v2(text: str) -> _Shape:
    tokens = tokens_v2(text)
    words = frozenset(t.key for t in tokens if t.content)
    values = tuple(t.value for t in tokens if t.value is not None and not t.value.soft)
    return _Shape(words, values, span_negated(tokens, [0] * len(tokens), words))


def _sequence(tokens: Sequence[_Token]) -> tuple[str, ...]:
    return tuple(t.key if t.content or t.value is None else f"<{t.value.kind}>" for t in tokens if t.content or t.value is not None)


def _values_in(tokens: Sequence[_Token]) -> list[Value]:
    return [t.value for t in tokens if t.value is not None]


def _has_value(value: Value, pool: Sequence[Value]) -> bool:
    return any(same_value(value, other) for other in pool)


def _windows_v2(passages: Sequence[str], max_sentences: int) -> list[Window]:
    return make_windows(passages, max_sentences, tokens_v2)


def _flips(words: frozenset[str], negated: bool, window: Window) -> tuple[int, list[str]]:
    """Negation difference plus antonym swaps between a claim and the window (odd = opposite meaning)."""
    swaps = [f"{w}/{a}" for w in words if w not in window.keys for a in ANTONYMS.get(w, ()) if a in window.keys]
    window_negated = span_negated(window.tokens, window.sentence_of, words | frozenset(
        a for w in words for a in ANTONYMS.get(w, ()) if a in window.keys))
    return int(window_negated != negated) + len(swaps), swaps


def _surfaces(tokens: Sequence[_Token]) -> dict[str, str]:
    return {t.key: t.surface for t in tokens if t.content}


def _swap(claim_tokens: Sequence[_Token], window: Window, ignore: frozenset[str] = frozenset()) -> str:
    """A word of the claim that the window replaces by a dissimilar word between the same neighbours.

    "personal license" -> "team license": the claim's word ``u`` sits between neighbours ``a`` and
    ``b`` (one of them at either end of the claim), the window has ``a X b`` with ``X`` not in the
    claim, and ``X`` is no synonym of ``u`` (embedding similarity < :data:`SWAP_SIMILARITY`). Also a
    qualifier the window holds between the claim's neighbours and the claim leaves out ("the day
    before travel" -> "the day of travel").
    """
    claim = _sequence(claim_tokens)
    words = frozenset(key for key in claim if not key.startswith("<"))
    theirs = _sequence(window.tokens)
    claim_surface, their_surface = _surfaces(claim_tokens), _surfaces(window.tokens)
    for i, word in enumerate(claim):
        if word.startswith("<") or word in window.keys or word in ignore or ANTONYMS.get(word, frozenset()) & window.keys:
            continue
        # the neighbours that must frame the replacement: one on each side, or two on the side that has
        # two when the word ends the claim (one neighbour alone matches by chance too often)
        before = claim[max(0, i - 2) : i] if i + 1 == len(claim) else claim[i - 1 : i]
        after = claim[i + 1 : i + 3] if i == 0 else claim[i + 1 : i + 2]
        if len(before) + len(after) < 2:
            continue
        for k, other in enumerate(theirs):
            if other.startswith("<") or other in words or other in ignore:
                continue
            if tuple(theirs[max(0, k - len(before)) : k]) != tuple(before):
                continue
            if tuple(theirs[k + 1 : k + 1 + len(after)]) != tuple(after):
                continue
            if similarity(claim_surface.get(word, word), their_surface.get(other, other)) < SWAP_SIMILARITY:
                return f"{claim_surface.get(word, word)!r} where the text says {their_surface.get(other, other)!r}"
    for i in range(1, len(claim) - 1):
        if claim[i] in _QUALIFIERS and claim[i] not in window.keys:
            for k in range(len(theirs) - 1):
                if theirs[k] == claim[i - 1] and theirs[k + 1] == claim[i + 1]:
                    return f"leaves out {claim_surface.get(claim[i], claim[i])!r}"
    for k in range(1, len(theirs) - 1):
        if theirs[k] in _QUALIFIERS and theirs[k] not in words:
            for i in range(len(claim) - 1):
                if claim[i] == theirs[k - 1] and claim[i + 1] == theirs[k + 1]:
                    return f"leaves out {their_surface.get(theirs[k], theirs[k])!r}"
    return ""


def _v2_flips(shape: _Shape, claim_tokens: Sequence[_Token], window: Window, coverage: float) -> tuple[int, list[str]]:
    return _flips(shape.words, shape.negated, window)


def support_v2(claim: str, windows: Sequence[Window], *, flips: Callable[..., tuple[int, list[str]]] = _v2_flips,
             smallest_first: bool = False, name_best: bool = False) -> Support:
    """Is the claim supported by one window? (the rule is in the module docstring). lexical-v3 reuses the
    rule with its own reading of polarity (``flips(shape, claim_tokens, window, coverage)``), the smallest
    window first among equally covering ones, and the best window named when none supports the claim."""
    shape = shape_v2(claim)
    if not shape.words and not shape.values:
        return Support(False, 0.0, "the claim has no content word")
    if not windows:
        return Support(False, 0.0, "no context")
    claim_tokens = tokens_v2(claim)
    # typed values (times, money, dates, durations, percentages) rarely meet in one window by chance
    anchored = bool(shape.values) and all(v.kind != "number" for v in shape.values)
    scored = []
    for window in windows:
        antonym_hits = {w for w in shape.words if w not in window.keys and ANTONYMS.get(w, frozenset()) & window.keys}
        # values are content too: they count with the words (and every one must match, below)
        pool = _values_in(window.tokens)
        found = len(shape.words & window.keys) + len(antonym_hits) + sum(_has_value(v, pool) for v in shape.values)
        scored.append((found / (len(shape.words) + len(shape.values)), window))
    scored.sort(key=(lambda pair: (-pair[0], pair[1].last - pair[1].first)) if smallest_first else (lambda pair: -pair[0]))
    best = scored[0][0]
    for coverage, window in scored:
        if coverage < (VALUE_ANCHORED_COVERAGE if anchored else SUPPORT_THRESHOLD):
            break
        problem = ""
        missing = [v.text for v in shape.values if not _has_value(v, _values_in(window.tokens))]
        flips_found, swaps = flips(shape, claim_tokens, window, coverage)
        if missing:
            problem = f"value {', '.join(missing)} not in {window.where()}"
        elif flips_found % 2:
            problem = f"{'antonym ' + ', '.join(swaps) if swaps else 'negation differs'} in {window.where()}"
        elif coverage >= NEAR_COPY and len(shape.words) >= 2:
            swapped = _swap(claim_tokens, window)
            problem = f"{swapped} ({window.where()})" if swapped else ""
        if problem:
            if coverage >= SUPPORT_THRESHOLD and not missing:  # a near copy that says the opposite
                return Support(False, coverage, problem)
            continue
        if coverage >= SUPPORT_THRESHOLD:
            return Support(True, coverage, f"coverage {coverage:.2f} in {window.where()}")
        if anchored and coverage >= VALUE_ANCHORED_COVERAGE:
            return Support(True, coverage, f"every value in {window.where()} (word coverage {coverage:.2f})")
    where = f", in {scored[0][1].where()}" if name_best else ""
    return Support(False, best, f"no window supports it (best word coverage {best:.2f}{where})")


# -- correctness ------------------------------------------------------------------------------------
# Must-assertions are often written about the answer ("Says the battery is recalled", "Corrects the
# premise: ..."): the lead is how the answer should put it, not a word it must contain.
_ASSERTION_LEAD = re.compile(
    r"^\s*(?:(?:it|the answer) )?(?:says|states|gives|mentions|explains|notes|tells|confirms|recommends|warns|lists|"
    r"names|quotes|points out|corrects the premise|rejects the premise|clarifies)(?: that)?\s*[:,]?\s*",
    re.IGNORECASE,
)


class _Targets(NamedTuple):
    texts: list[str]  # what the answer is graded against
    quotes: list[str]  # what each text is quoted as in failure evidence: its assertion, or its whole sentence
    source: str  # "assertion" or "reference sentence"


def _targets(request: CorrectnessRequest) -> _Targets:
    texts, quotes = [], []
    for assertion in request.assertions:
        text = _ASSERTION_LEAD.sub("", assertion).strip()
        if text:
            texts.append(text)
            quotes.append(assertion)
    if texts:
        return _Targets(texts, quotes, "assertion")
    for sentence in split_sentences(request.reference or ""):
        for clause in sentence.split(";"):
            clause = re.sub(r"^\W*(?:yes|no)\s*[,.:!]\s*", "", clause.strip(), flags=re.IGNORECASE)
            # a parenthesis in a reference adds detail the question did not ask for
            clause = re.sub(r"\s*\([^()]*\)", "", clause) if re.sub(r"\([^()]*\)", "", clause).strip(" .") else clause
            shape = shape_v2(clause)
            if (shape.words or shape.values) and not _is_hedge(clause):
                texts.append(clause)
                quotes.append(sentence)
    return _Targets(texts, quotes, "reference sentence")


def _polarity(text: str, yes: re.Pattern[str], no: re.Pattern[str]) -> str:
    if yes.search(text):
        return "yes"
    if no.search(text):
        return "no"
    return ""


class LexicalJudgeV2(LexicalJudge):
    """Offline, deterministic judge (``lexical-v2``): values, stems and polarity, not understanding."""

    model = "lexical-v2"
    prompt_version = "lexical-v2"
    label = "lexical-v2 (offline heuristic)"

    def _claims(self, request: ClaimsRequest) -> ClaimsVerdict:
        return ClaimsVerdict(claims=_claims_of(request.text))

    def _entailment(self, request: EntailmentRequest) -> EntailmentVerdict:
        windows = _windows_v2(request.context, MAX_WINDOW_SENTENCES)
        results = [support_v2(claim, windows) for claim in request.claims]
        return EntailmentVerdict(supported=[r.supported for r in results], reasons=[r.reason for r in results])

    def _questions(self, request: QuestionsRequest) -> QuestionsVerdict:
        verdict = super()._questions(request)
        if is_noncommittal(request.answer, _is_hedge):
            verdict.noncommittal = [True] * len(verdict.noncommittal)
        return verdict

    def _correctness(self, request: CorrectnessRequest) -> CorrectnessVerdict | JudgeFailure:
        answer = request.answer or ""
        no_answer = not request.answerable or reference_gives_no_answer(request.reference)
        if is_noncommittal(answer, _is_hedge):
            if request.false_premise:
                return CorrectnessVerdict(grade="perfect", reason="abstained on a false-premise question")
            if no_answer:
                return CorrectnessVerdict(grade="perfect", reason="abstained where no answer exists")
            return CorrectnessVerdict(grade="missing", reason="the answer is noncommittal (abstention or hedge)")
        answer_windows = _windows_v2([answer], MAX_WINDOW_SENTENCES)
        if request.false_premise:
            rejection = self._rejects_premise_v2(answer, request.reference, answer_windows)
            if rejection:
                return CorrectnessVerdict(grade="perfect", reason=f"rejects the false premise ({rejection})")
            targets = _targets(request)
            if (targets.texts and not self._contradiction(request, targets.texts, answer)[0]
                    and self._coverage(request, targets.texts, answer) >= PERFECT_COVERAGE):
                return CorrectnessVerdict(grade="perfect", reason=f"states the correcting {targets.source}s")
            return CorrectnessVerdict(grade="incorrect", reason="answers as if the false premise held")
        if no_answer:
            return CorrectnessVerdict(grade="incorrect", reason="answers a question to which no answer exists")
        reference = request.reference or ""
        expected = _polarity(reference, _REFERENCE_YES, _REFERENCE_NO) if not request.assertions else ""
        given = _polarity(answer, _YES, _NO)
        if expected and given and expected != given:
            return CorrectnessVerdict(grade="incorrect", reason=f"answers {given!r} where the reference says {expected!r}",
                                      contradicts=split_sentences(reference)[0], contradicts_source="reference sentence")
        targets = _targets(request)
        if not targets.texts:
            if expected and given == expected:
                return CorrectnessVerdict(grade="perfect", reason=f"answers {given!r} as the reference does")
            return JudgeFailure(kind="correctness", message="nothing to grade against: no assertions and no reference")
        clash, index = self._contradiction(request, targets.texts, answer)
        if clash:
            return CorrectnessVerdict(grade="incorrect", reason=f"contradicts the {targets.source}s: {clash}",
                                      contradicts=targets.quotes[index], contradicts_source=targets.source)
        coverage = self._coverage(request, targets.texts, answer)
        tally = f"coverage {coverage:.2f} of {len(targets.texts)} {targets.source}(s)"
        if coverage >= PERFECT_COVERAGE:
            return CorrectnessVerdict(grade="perfect", reason=tally)
        if coverage >= ACCEPTABLE_COVERAGE or (expected and given == expected):
            return CorrectnessVerdict(grade="acceptable", reason=tally + (f"; answers {given!r} as the reference does" if given else ""))
        return CorrectnessVerdict(grade="incorrect", reason=tally)

    @staticmethod
    def _coverage(request: CorrectnessRequest, targets: Sequence[str], answer: str) -> float:
        """Each target's share of its words (question words left out) and values found in the answer, averaged."""
        question_words = shape_v2(request.question).words
        answer_tokens = tuple(t for w in _windows_v2([answer], 1) for t in w.tokens)
        answer_words = frozenset(t.key for t in answer_tokens if t.content)
        answer_values = _values_in(answer_tokens)
        scores: list[float] = []
        for target in targets:
            shape = shape_v2(target)
            words = (shape.words - question_words) or shape.words
            found = len(words & answer_words) + VALUE_WEIGHT * sum(_has_value(v, answer_values) for v in shape.values)
            total = len(words) + VALUE_WEIGHT * len(shape.values)
            score = found / total if total else 1.0
            scores.extend([score] * (2 if shape.values else 1))  # values are what questions ask for
        return sum(scores) / len(scores)

    @staticmethod
    def _contradiction(request: CorrectnessRequest, targets: Sequence[str], answer: str) -> tuple[str, int]:
        """What contradicts which target (its index), or ("", -1)."""
        known = _values_in(tokens_v2(request.reference or "")) + _values_in(tokens_v2(request.question))
        for target in request.assertions:
            known += _values_in(tokens_v2(target))
        question_words = shape_v2(request.question).words
        sentences = _windows_v2([answer], 1)
        answer_values = [v for w in sentences for v in _values_in(w.tokens)]
        for index, target in enumerate(targets):
            shape = shape_v2(target)
            where = f"{index + 1} ({target!r})"
            for value in shape.values:
                if _has_value(value, answer_values):
                    continue
                for sentence in sentences:
                    for other in _values_in(sentence.tokens):
                        if other.soft or _has_value(other, known):
                            continue
                        if other.kind == value.kind or "number" in (other.kind, value.kind):
                            return f"the answer says {other.text!r} where target {where} says {value.text!r}", index
            if not shape.words:
                continue
            for sentence in sentences:
                antonyms = {w for w in shape.words if w not in sentence.keys and ANTONYMS.get(w, frozenset()) & sentence.keys}
                pool = _values_in(sentence.tokens)
                found = len(shape.words & sentence.keys) + len(antonyms) + sum(_has_value(v, pool) for v in shape.values)
                coverage = found / (len(shape.words) + len(shape.values))
                if coverage < RESTATED:
                    continue
                flips, swaps = _flips(shape.words, shape.negated, sentence)
                if flips % 2 and coverage >= OPPOSITE_RESTATED:
                    what = f"antonym {', '.join(swaps)}" if swaps else "opposite negation"
                    return f"{what} against target {where}", index
                swapped = _swap(tokens_v2(target), sentence, ignore=question_words)
                if swapped and len(shape.words) >= 2:
                    return f"{swapped} against target {where}", index
        return "", -1

    @staticmethod
    def _rejects_premise_v2(answer: str, reference: str | None, windows: Sequence[Window]) -> str:
        match = PREMISE_REJECTION.search(normalise(answer))
        if match:
            return f"says {match.group(0)!r}"
        if _NO.search(answer):
            return "answers 'no'"
        for sentence in extract_claims(reference or "", _is_hedge):
            if shape_v2(sentence).negated and support_v2(sentence, windows).supported:
                return f"supports the reference's correction {sentence!r}"
        return ""


# -- public names of v2's reading, for what is built on it (judge/lexical_features.py: the numbers an aligned
# judge learns from). Frozen like everything above: an edit changes v2's and v3's verdicts.
YES_ANSWER, NO_ANSWER, REFERENCE_YES, REFERENCE_NO = _YES, _NO, _REFERENCE_YES, _REFERENCE_NO
has_value, is_hedge_v2, polarity, targets_v2, values_in, windows_v2 = _has_value, _is_hedge, _polarity, _targets, _values_in, _windows_v2
coverage_v2 = LexicalJudgeV2._coverage
contradiction_v2 = LexicalJudgeV2._contradiction
rejects_premise_v2 = LexicalJudgeV2._rejects_premise_v2
