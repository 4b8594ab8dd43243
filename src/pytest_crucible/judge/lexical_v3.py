"""``lexical-v3``: the offline judge that never calls a copied sentence a hallucination.

Built on ``lexical-v2`` (:mod:`pytest_crucible.judge.lexical_v2`: values, stems, polarity, swaps),
which stays selectable (``--crucible-judge=lexical-v2``, and ``lexical-v1``) so that runs judged by it
stay comparable. What v3 changes, and why:

* **A copy is supported.** A claim whose words appear in one passage in the same order, after
  normalising case, punctuation, values ("$40" = "forty dollars") and stems, is supported whatever
  the rest of the passage says. The sequence compared holds the claim's content words, its values
  and its negation cues, so the same sentence with its polarity flipped ("... can *not* be
  requested") or one word swapped is no copy and goes through the rules below.
* **Polarity belongs to its sentence.** v2 read the negation of a window of up to three sentences
  over the whole span between the claim's first and last word, so the "not" of a *neighbouring*
  sentence ("Items the libraries do not own can be requested. Each request costs 20 kroner.")
  flipped a verbatim claim about the second one. v3 reads a cue only inside its own sentence's span
  of the claim's words, and tries the smallest window first among equally covering ones, so a
  sentence that supports a claim alone is judged alone, never with its neighbours.
* **Lexical negation** reads as negation on both sides: "abolished", "waived", "lacks", "free of"
  (and, as before, "no", "no longer", "none", "never", "without"): "Vellmark abolished late fees"
  states "no late fees". The cue is added to the text the judge reads (an explicit "not" after
  the word), never to what a verdict quotes.

Everything else (claims, CRAG grading, value reading, swaps, antonyms) is v2's. The figures on the
project's calibration halves are in docs/judge-calibration.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from .lexical_common import NEGATION_LOOKBACK, Support, Window, make_windows, split_sentences
from .lexical_v2 import (
    ANTONYMS,
    MAX_WINDOW_SENTENCES,
    SUPPORT_THRESHOLD,
    LexicalJudgeV2,
    shape_v2,
    support_v2,
    tokens_v2,
)
from .types import CorrectnessRequest, CorrectnessVerdict, EntailmentRequest, EntailmentVerdict, JudgeFailure

__all__ = ["LexicalJudgeV3", "support_v3", "tokens_v3", "with_lexical_negation"]

# Words that say "there is none of X" without a negation word. An explicit "not" is read after each.
_LEXICAL_NEGATION = re.compile(
    r"\b(abolish(?:ed|es|ing)?|waive[ds]?|waiving|lack(?:s|ed|ing)?|free of)\b(?! not\b)", re.IGNORECASE)
# "free of charge" says what "free" says: no negation on one side only.
_FREE_OF_CHARGE = re.compile(r"\bfree of (?:any )?(?:charge|cost)\b", re.IGNORECASE)


@lru_cache(maxsize=16384)
def with_lexical_negation(text: str) -> str:
    """``text`` with an explicit negation after every lexical negation ("waived" -> "waived not")."""
    return _LEXICAL_NEGATION.sub(lambda match: f"{match.group(1)} not", _FREE_OF_CHARGE.sub("free", text))


def _tokens_v3(text: str):
    return tokens_v2(with_lexical_negation(text))


def _copy_sequence(tokens) -> tuple[str, ...]:
    """What a copy must repeat in order: content stems, values (canonically), negation cues."""
    out = []
    for token in tokens:
        if token.value is not None:
            out.append(f"<{token.value.kind}:{token.value.text.lower()}>")
        elif token.negation:
            out.append("<not>")
        elif token.content:
            out.append(token.key)
    return tuple(out)


def _contains(sequence: Sequence[str], part: Sequence[str]) -> bool:
    n = len(part)
    return n > 0 and any(tuple(sequence[i:i + n]) == tuple(part) for i in range(len(sequence) - n + 1))


@lru_cache(maxsize=4096)
def _passage_sequence(passage: str) -> tuple[str, ...]:
    return tuple(item for sentence in split_sentences(passage) for item in _copy_sequence(_tokens_v3(sentence)))


def _copied_from(claim: str, passages: Sequence[str]) -> int | None:
    """The passage (0-based) the claim is copied from, word for word after normalising, or None."""
    wanted = _copy_sequence(_tokens_v3(claim))
    if sum(1 for item in wanted if not item.startswith("<not")) < 2:  # one word is no sentence
        return None
    for index, passage in enumerate(passages):
        if _contains(_passage_sequence(passage), wanted):
            return index
    return None


def _cues(tokens, keys: frozenset[str]) -> int:
    """Negation cues in v2's span of ``keys`` (first to last matched word, and the cues just before
    it), within one sentence's tokens: a neighbouring sentence's cue never counts."""
    matched = [i for i, token in enumerate(tokens) if token.content and token.key in keys]
    if not matched:
        return 0
    start = max(0, matched[0] - NEGATION_LOOKBACK)
    return sum(token.negation for token in tokens[start:matched[-1] + 1])


def _flips_v3(words: frozenset[str], claim_cues: int, window: Window, near_copy: bool) -> tuple[int, list[str]]:
    """v2's negation difference plus antonym swaps, with the negation read sentence by sentence: a cue
    counts only inside its own sentence's span of the claim's words, never across into a neighbour.
    A near copy of one sentence must also have as many cues, mod 2, as that sentence: "non-residents
    can not borrow" is no copy of "non-residents can borrow", though both hold a negation."""
    swaps = [f"{w}/{a}" for w in words if w not in window.keys for a in ANTONYMS.get(w, ()) if a in window.keys]
    keys = words | frozenset(a for w in words for a in ANTONYMS.get(w, ()) if a in window.keys)
    counts = [_cues([t for t, owner in zip(window.tokens, window.sentence_of) if owner == sentence], keys)
              for sentence in range(window.first, window.last + 1)]
    flips = int(any(counts) != (claim_cues > 0)) + len(swaps)
    if not flips % 2 and near_copy and len(counts) == 1 and counts[0] % 2 != claim_cues % 2:
        flips += 1
    return flips, swaps


# "No, ...", "Unfortunately not: ..." open an answer to a yes/no question: the word answers the question,
# it does not negate the claim that follows.
_ANSWER_WORD = re.compile(r"^\W*(?:(?:unfortunately|sadly|sorry)\W+)?(?:no|not|nope|yes)\s*[:,;.!\u2013\u2014-]+\s*",
                          re.IGNORECASE)


def _support_v3(claim: str, passages: Sequence[str], windows: Sequence[Window]) -> Support:
    """Is the claim supported? A copy first, then v2's window rule (:func:`lexical_v2.support_v2`) with the
    polarity read per sentence, the smallest window first and the best window named."""
    claim = _ANSWER_WORD.sub("", claim) or claim
    copied = _copied_from(claim, passages)
    if copied is not None:
        return Support(True, 1.0, f"copied from passage {copied + 1}")
    text = with_lexical_negation(claim)
    claim_cues = _cues(tokens_v2(text), shape_v2(text).words)

    def flips(shape, claim_tokens, window, coverage):
        return _flips_v3(shape.words, claim_cues, window, coverage >= SUPPORT_THRESHOLD)

    return support_v2(text, windows, flips=flips, smallest_first=True, name_best=True)


class LexicalJudgeV3(LexicalJudgeV2):
    """Offline, deterministic judge (``lexical-v3``): v2 with copies supported, polarity read per
    sentence and lexical negation."""

    model = "lexical-v3"
    prompt_version = "lexical-v3"
    label = "lexical-v3 (offline heuristic)"

    def _entailment(self, request: EntailmentRequest) -> EntailmentVerdict:
        windows = make_windows(request.context, MAX_WINDOW_SENTENCES, _tokens_v3)
        results = [_support_v3(claim, request.context, windows) for claim in request.claims]
        return EntailmentVerdict(supported=[r.supported for r in results], reasons=[r.reason for r in results])

    def _correctness(self, request: CorrectnessRequest) -> CorrectnessVerdict | JudgeFailure:
        # v2's grading on the texts as v3 reads them; what the verdict quotes is the original text.
        read = request.model_copy(update={
            "question": with_lexical_negation(request.question), "answer": with_lexical_negation(request.answer or ""),
            "reference": with_lexical_negation(request.reference) if request.reference else request.reference,
            "assertions": tuple(with_lexical_negation(a) for a in request.assertions)})
        verdict = super()._correctness(read)
        if isinstance(verdict, CorrectnessVerdict):
            originals = {with_lexical_negation(text): text
                         for text in (*request.assertions, *split_sentences(request.reference or ""))}
            verdict.contradicts = originals.get(verdict.contradicts, verdict.contradicts)
            for shown, original in originals.items():
                if shown != original:
                    verdict.reason = verdict.reason.replace(shown, original)
        return verdict


# Public names of v3's reading, for what is built on it (judge/lexical_features.py); frozen like the rest.
support_v3, tokens_v3 = _support_v3, _tokens_v3
