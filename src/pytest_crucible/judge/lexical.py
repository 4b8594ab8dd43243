"""``lexical-v1``: an offline, deterministic judge made of documented heuristics.

:class:`LexicalJudge` answers every request kind of
:mod:`pytest_crucible.judge.types` without a model, a network or a random
number: the same request always gets the same verdict, on any machine.  It
exists so that a golden set can run in CI for free and so that the metric
plumbing can be tested end to end.  **It is a lexical heuristic, not a reader**:
it matches words, not meaning.  Use a model judge when the answer metrics
matter; never compare runs judged by ``lexical-v1`` with runs judged by a model
(the judge model is stamped on every verdict for that reason).

Text handling (sentences, tokens, negation) is shared by every kind and by
``lexical-v2`` and ``lexical-v3``: its rules are in
:mod:`pytest_crucible.judge.lexical_common`.

**Frozen.** ``lexical-v2`` and ``lexical-v3`` inherit this class's questions,
usefulness and relevance rules, so an edit here changes the verdicts of all
three under their released versions (tests/test_judge_frozen.py pins them): a
new behaviour goes into a new judge version.

Request kinds
-------------
**retention** -- the one rule of every offline version, versioned apart
(``lexical-retention-v1``): :mod:`pytest_crucible.judge.lexical_retention`.

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

from collections.abc import Callable, Iterable, Sequence

from .engine import Judge
from .lexical_common import (
    NEGATION_LOOKBACK,
    PREMISE_REJECTION,
    Support,
    Window,
    content_keys,
    extract_claims,
    is_noncommittal,
    make_windows,
    normalise,
    read_tokens,
    span_negated,
    split_sentences,
)
from .lexical_retention import VERSION as RETENTION_VERSION
from .lexical_retention import retention_verdict
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
    RetentionRequest,
    RetentionVerdict,
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


def _claim_shape(claim: str) -> tuple[frozenset[str], frozenset[str], bool]:
    tokens = read_tokens(claim)
    keys = frozenset(t.key for t in tokens if t.content)
    numbers = frozenset(t.key for t in tokens if t.number)
    return keys, numbers, span_negated(tokens, [0] * len(tokens), keys)


def _support(claim: str, windows: Sequence[Window], threshold: float = ENTAILMENT_THRESHOLD) -> Support:
    keys, numbers, negated = _claim_shape(claim)
    if not keys:
        return Support(False, 0.0, "the claim has no content word")
    if not windows:
        return Support(False, 0.0, "no context")
    best: tuple[float, Window | None] = (-1.0, None)
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
        if span_negated(window.tokens, window.sentence_of, keys) != negated:
            blocked = blocked or f"negation differs from {window.where()} (coverage {coverage:.2f})"
            continue
        return Support(True, coverage, f"coverage {coverage:.2f} >= {threshold:.2f} in {window.where()}")
    coverage, closest = best
    if blocked:
        return Support(False, coverage, blocked)
    where = f" ({closest.where()})" if closest is not None else ""
    return Support(False, coverage, f"best coverage {coverage:.2f} < {threshold:.2f}{where}")



def _phrase(text: str) -> str:
    words = [t.surface for t in read_tokens(text) if t.content]
    return " ".join(words[:MAX_PHRASE_WORDS])


def _answer_phrase(claims: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    order: dict[str, int] = {}
    for claim in claims:
        for token in read_tokens(claim):
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
    # retention: every offline version answers it by one rule versioned on its own (judge/lexical_retention.py)
    judges_retention = True

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[[JudgeRequest], Verdict | JudgeFailure]] = {
            "claims": self._claims,  # type: ignore[dict-item]
            "entailment": self._entailment,  # type: ignore[dict-item]
            "questions": self._questions,  # type: ignore[dict-item]
            "usefulness": self._usefulness,  # type: ignore[dict-item]
            "relevance": self._relevance,  # type: ignore[dict-item]
            "correctness": self._correctness,  # type: ignore[dict-item]
            "retention": self._retention,  # type: ignore[dict-item]
        }

    def prompt_version_for(self, kind: str) -> str:
        """Retention is versioned apart (its rule is not this version's): the other kinds' cache stays valid."""
        return RETENTION_VERSION if kind == "retention" else self.prompt_version

    def judge(self, requests: Sequence[JudgeRequest], *, now: bool = False) -> list[Verdict | JudgeFailure]:
        """Every request at once, offline (no batches: ``now`` changes nothing)."""
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
                verdict.judge_model, verdict.prompt_version = self.model, self.prompt_version_for(kind)
            results.append(verdict)
        return results

    # retention ------------------------------------------------------------------------------------
    def _retention(self, request: RetentionRequest) -> RetentionVerdict:
        return retention_verdict(request)

    # claims ---------------------------------------------------------------------------------------
    def _claims(self, request: ClaimsRequest) -> ClaimsVerdict:
        return ClaimsVerdict(claims=extract_claims(request.text))

    # entailment -----------------------------------------------------------------------------------
    def _entailment(self, request: EntailmentRequest) -> EntailmentVerdict:
        windows = make_windows(request.context, MAX_WINDOW_SENTENCES)
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
        chunk_keys = frozenset().union(*(w.keys for w in make_windows([request.chunk], 1))) if request.chunk.strip() else frozenset()
        if request.reference.strip():
            windows = make_windows([request.chunk], MAX_WINDOW_SENTENCES)
            sentences = extract_claims(request.reference) or [request.reference]
            for index, sentence in enumerate(sentences):
                result = _support(sentence, windows)
                if result.supported:
                    return UsefulnessVerdict(useful=True, reason=f"supports reference sentence {index + 1}: {result.reason}")
            sentence_windows = make_windows([request.chunk], 1)
            for index, sentence in enumerate(sentences):
                clash = _contradiction(sentence, sentence_windows)
                if clash:
                    return UsefulnessVerdict(useful=False, reason=f"contradicts reference sentence {index + 1}: {clash}")
            target, what = content_keys(request.reference), "reference"
        else:
            target, what = content_keys(request.question), "question (empty reference)"
        if not target:
            return UsefulnessVerdict(useful=False, reason=f"the {what} has no content word")
        overlap = len(target & chunk_keys) / len(target)
        useful = overlap >= USEFUL_OVERLAP
        sign = ">=" if useful else "<"
        return UsefulnessVerdict(useful=useful, reason=f"{overlap:.2f} of the {what}'s content words in the chunk ({sign} {USEFUL_OVERLAP:.2f})")

    # relevance ------------------------------------------------------------------------------------
    def _relevance(self, request: RelevanceRequest) -> RelevanceVerdict:
        keys = content_keys(request.question)
        if not keys:
            return RelevanceVerdict(grade=0, reason="the question has no content word")
        windows = make_windows([request.chunk], RELEVANCE_WINDOW_SENTENCES)
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
        answer_windows = make_windows([answer], MAX_WINDOW_SENTENCES)
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
        sentence_windows = make_windows([answer], 1)
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
    def _rejects_premise(answer: str, reference: str | None, windows: Sequence[Window]) -> str:
        match = PREMISE_REJECTION.search(normalise(answer))
        if match:
            return f"says {match.group(0)!r}"
        for sentence in extract_claims(reference or ""):
            _, _, negated = _claim_shape(sentence)
            if negated and _support(sentence, windows).supported:
                return f"supports the reference's correction {sentence!r}"
        return ""


def _contradiction(target: str, sentence_windows: Iterable[Window]) -> str:
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
        if numbers <= window.numbers and span_negated(window.tokens, window.sentence_of, keys) != negated:
            return f"opposite negation ({window.where()})"
    return ""
