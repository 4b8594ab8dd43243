"""What ``lexical-v3`` computes on the way to a verdict, as numbers: the features an aligned judge
(:mod:`pytest_crucible.judge.aligned`, ``crucible judge align``) learns from people's labels.

Nothing here changes a verdict: the functions read a request as ``lexical-v3`` reads it (the same
texts with its lexical negation, the same windows, the same support rule, the same CRAG targets,
coverage and contradictions, through the released functions of :mod:`.lexical_v3` and
:mod:`.lexical_v2`) and report the intermediate figures beside the verdict the judge gave. The
verdict itself is a feature ("the unaligned verdict"), so an aligned model can keep it where people
agree with it and overrule it where they do not.

Two request kinds, one quantity each:

* **correctness** -> :data:`CORRECTNESS_FEATURES` (the CRAG grade): the grade as four 0/1 columns;
  abstention cues (the answer commits to nothing; its share of hedging sentences); whether an answer
  exists (unanswerable, false premise, the premise rejected); the yes/no polarity of the answer
  against the reference's; the coverage of the targets (mean and worst target); the contradiction
  found, by kind (a value: a number or date mismatch; a polarity: negation or antonym; a swapped word);
  the target values the answer leaves out and the values it adds; the embedding similarity of the
  answer to its targets; the answer's length and its length against the targets'.
* **entailment** -> :data:`ENTAILMENT_FEATURES` (faithfulness: is every claim supported?): the share
  of claims supported and whether all are (the unaligned verdict); the claims' support scores (the
  worst and the mean word coverage of their best window); copies; the conflicts that decided a claim
  (a negation or antonym, a missing value, a swapped word); the claims' values found in no passage;
  the embedding similarity of each claim to its closest passage sentence (the worst and the mean);
  the number of claims.

:data:`FEATURES_VERSION` names this list. An aligned judge stores it and is refused when it differs:
a new or changed feature is a new version, and every alignment is fitted again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..metrics.crag import CRAG_GRADES, reference_gives_no_answer
from .lexical_common import Support, is_noncommittal, make_windows, split_sentences
from .lexical_v2 import (
    MAX_WINDOW_SENTENCES,
    NO_ANSWER,
    REFERENCE_NO,
    REFERENCE_YES,
    YES_ANSWER,
    contradiction_v2,
    coverage_v2,
    has_value,
    is_hedge_v2,
    polarity,
    rejects_premise_v2,
    shape_v2,
    targets_v2,
    tokens_v2,
    values_in,
    windows_v2,
)
from .lexical_v3 import support_v3, tokens_v3, with_lexical_negation
from .similarity import similarity
from .types import CorrectnessRequest, CorrectnessVerdict, EntailmentRequest, EntailmentVerdict

__all__ = [
    "BASE_JUDGE",
    "CORRECTNESS_FEATURES",
    "ENTAILMENT_FEATURES",
    "FEATURES_VERSION",
    "Features",
    "correctness_features",
    "entailment_features",
]

#: The judge whose reading these features are.
BASE_JUDGE = "lexical-v3"
#: The name of the feature list below: an aligned judge made with another one is refused.
FEATURES_VERSION = "lexical-v3-features-1"

CORRECTNESS_FEATURES = (
    *(f"unaligned_{grade}" for grade in CRAG_GRADES),  # the unaligned verdict, one 0/1 column per grade
    "noncommittal",  # the answer commits to nothing (an abstention or only hedges)
    "hedged_sentences",  # share of the answer's sentences that hedge
    "no_answer_exists",  # unanswerable, or the reference says the documents do not give the answer
    "false_premise",
    "premise_rejected",  # the answer rejects a premise (a "no", "actually", the reference's correction)
    "polarity_mismatch",  # the answer opens with the opposite of the reference's "Yes"/"No"
    "polarity_match",  # ... with the same one
    "from_assertions",  # graded against must-assertions (else the reference's clauses)
    "targets",  # log(1 + number of targets)
    "coverage",  # the targets' mean coverage by the answer (lexical-v3's grading number)
    "worst_target_coverage",
    "contradiction_value",  # a number, date, amount ... the answer gives where a target gives another
    "contradiction_polarity",  # a target restated with the opposite negation, or an antonym
    "contradiction_swap",  # a target restated with one word swapped for a dissimilar one
    "target_values_missing",  # share of the targets' values the answer does not state
    "answer_values_new",  # share of the answer's values that neither the question nor the targets give
    "similarity",  # embedding cosine of the answer and its targets
    "answer_words",  # log(1 + content words of the answer)
    "length_ratio",  # the answer's content words over the targets', at most 3
)

ENTAILMENT_FEATURES = (
    "unaligned_supported_share",  # share of the claims lexical-v3 supports
    "unaligned_all_supported",  # the unaligned verdict: every claim supported
    "claims",  # log(1 + number of claims)
    "worst_support",  # the lowest support score (word coverage of a claim's best window)
    "mean_support",
    "copied_share",  # share of claims copied from a passage
    "negation_conflict",  # some claim meets its passage with the opposite negation or an antonym
    "value_conflict",  # some claim states a value its best window does not
    "swap_conflict",  # some claim swaps a word of its passage for a dissimilar one
    "claim_values_unmatched",  # share of the claims' values that no passage states
    "worst_similarity",  # the lowest, over claims, embedding cosine with the closest passage sentence
    "mean_similarity",
)


@dataclass(frozen=True)
class Features:
    """One request's features, in the order of their names; ``weakest`` (entailment): the index of the
    claim with the lowest support score, the one an aligned judge marks unsupported when it overrules an
    "every claim supported" verdict."""

    values: tuple[float, ...]
    weakest: int = -1


def _flag(value: object) -> float:
    return 1.0 if value else 0.0


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _read(request: CorrectnessRequest) -> CorrectnessRequest:
    """The request as lexical-v3 reads it (its lexical negation), as ``LexicalJudgeV3._correctness`` does."""
    return request.model_copy(update={
        "question": with_lexical_negation(request.question), "answer": with_lexical_negation(request.answer or ""),
        "reference": with_lexical_negation(request.reference) if request.reference else request.reference,
        "assertions": tuple(with_lexical_negation(a) for a in request.assertions)})


def _contradiction_kind(message: str) -> str:
    """Which kind of contradiction lexical-v2's ``_contradiction`` reported (its frozen wording)."""
    if not message:
        return ""
    if message.startswith("the answer says"):
        return "value"
    if message.startswith(("antonym", "opposite negation")):
        return "polarity"
    return "swap"


def correctness_features(request: CorrectnessRequest, verdict: CorrectnessVerdict) -> Features:
    """The features of a CRAG grading request, beside ``verdict``, the grade ``lexical-v3`` gave it."""
    read = _read(request)
    answer = read.answer or ""
    sentences = split_sentences(answer) or [answer]
    targets = targets_v2(read)
    texts = targets.texts
    coverage = coverage_v2(read, texts, answer) if texts else 0.0
    worst = min((coverage_v2(read, [text], answer) for text in texts), default=0.0)
    clash = _contradiction_kind(contradiction_v2(read, texts, answer)[0]) if texts else ""
    expected = polarity(read.reference or "", REFERENCE_YES, REFERENCE_NO) if not read.assertions else ""
    given = polarity(answer, YES_ANSWER, NO_ANSWER)
    answer_tokens = tuple(t for w in windows_v2([answer], 1) for t in w.tokens)
    answer_values = values_in(answer_tokens)
    target_values = [v for text in texts for v in shape_v2(text).values]
    known = values_in(tokens_v2(read.reference or "")) + values_in(tokens_v2(read.question)) + \
        [v for text in read.assertions for v in values_in(tokens_v2(text))]
    answer_words = sum(1 for t in answer_tokens if t.content)
    target_words = sum(len(shape_v2(text).words) for text in texts)
    windows = windows_v2([answer], MAX_WINDOW_SENTENCES)
    rejected = bool(rejects_premise_v2(answer, read.reference, windows))
    values = (
        *(_flag(verdict.grade == grade) for grade in CRAG_GRADES),
        _flag(is_noncommittal(answer, is_hedge_v2)),
        _share(sum(1 for s in sentences if is_hedge_v2(s)), len(sentences)),
        _flag(not read.answerable or reference_gives_no_answer(read.reference)),
        _flag(read.false_premise),
        _flag(rejected),
        _flag(expected and given and expected != given),
        _flag(expected and given == expected),
        _flag(targets.source == "assertion" and texts),
        math.log1p(len(texts)),
        coverage,
        worst,
        _flag(clash == "value"),
        _flag(clash == "polarity"),
        _flag(clash == "swap"),
        _share(sum(1 for v in target_values if not has_value(v, answer_values)), len(target_values)),
        _share(sum(1 for v in answer_values if not has_value(v, known)), len(answer_values)),
        similarity(request.answer or "", " ".join(texts) or request.reference or ""),
        math.log1p(answer_words),
        min(3.0, answer_words / target_words) if target_words else 0.0,
    )
    return Features(tuple(float(v) for v in values))


def _conflict(support: Support) -> str:
    """What decided an unsupported claim, from the support rule's frozen wording (lexical-v2's ``support_v2``)."""
    reason = support.reason
    if support.supported or reason.startswith("no window supports"):
        return ""
    if reason.startswith("value "):
        return "value"
    if reason.startswith(("antonym", "negation differs")):
        return "negation"
    if "where the text says" in reason or reason.startswith("leaves out"):
        return "swap"
    return ""


def _closest_sentence(claim: str, sentences: Sequence[str]) -> float:
    return max((similarity(claim, sentence) for sentence in sentences), default=0.0)


def entailment_features(request: EntailmentRequest, verdict: EntailmentVerdict) -> Features:
    """The features of an entailment request (are these claims supported by these passages?), beside
    ``verdict``, the flags ``lexical-v3`` gave it. A request without claims has no features (empty)."""
    claims = request.claims
    if not claims:
        return Features(())
    windows = make_windows(request.context, MAX_WINDOW_SENTENCES, tokens_v3)
    supports = [support_v3(claim, request.context, windows) for claim in claims]
    conflicts = [_conflict(support) for support in supports]
    passage_values = [v for passage in request.context for v in values_in(tokens_v3(passage))]
    claim_values = [v for claim in claims for v in shape_v2(with_lexical_negation(claim)).values]
    sentences = [sentence for passage in request.context for sentence in split_sentences(passage)]
    closest = [_closest_sentence(claim, sentences) for claim in claims]
    scores = [support.coverage for support in supports]
    supported = list(verdict.supported)
    values = (
        _share(sum(supported), len(supported)),
        _flag(supported and all(supported)),
        math.log1p(len(claims)),
        min(scores),
        sum(scores) / len(scores),
        _share(sum(1 for support in supports if support.reason.startswith("copied from")), len(supports)),
        _flag("negation" in conflicts),
        _flag("value" in conflicts),
        _flag("swap" in conflicts),
        _share(sum(1 for v in claim_values if not has_value(v, passage_values)), len(claim_values)),
        min(closest),
        sum(closest) / len(closest),
    )
    weakest = min(range(len(claims)), key=lambda i: (scores[i], i))
    return Features(tuple(float(v) for v in values), weakest)
