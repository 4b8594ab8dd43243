"""One error class per result: a diagnosable distribution instead of a bag of failures.

:func:`classify` takes plain facts the plugin has already computed for one
result (:class:`ClassificationInputs`) and returns the first class, in
:data:`ERROR_CLASSES` order, whose rule fires, with one sentence of evidence
naming the citation, claim, assertion or document that decided it.

Precedence (first rule that fires wins) and why
-----------------------------------------------
1. ``retrieval_miss`` -- the item is answerable and a required citation was
   not retrieved within K.  Everything downstream was working without the
   evidence, so a wrong, unsupported or missing answer is a *symptom*; fix the
   corpus or the retriever first.  It fires even when the answer happens to be
   right (it then came from the model's memory, not from the evidence) and
   when the answer abstained (abstaining was the right reaction to missing
   evidence; the cause is still retrieval).
2. ``stale`` -- the item's dynamism is ``slow`` or ``fast`` and the answer
   cites or relies on a chunk whose document is superseded or past its
   ``valid_to``.  A wrong claim grounded in an out-of-date source is explained
   better by the source than by "the model made it up", and the fix is
   content hygiene, not prompting; so it outranks hallucination.  It fires
   even if the claim is still right today: the grounding is out of date.
3. ``conflict_mishandled`` -- the golden item names conflicting source
   documents and the answer does not surface the disagreement.  Picking one
   side silently is the defect even if the side picked matches the reference;
   it outranks hallucination because an unsupported-looking claim is often the
   one side's claim judged against the other side's text.
4. ``wrong_passage`` -- the answer is faithful (every claim is supported by
   a retrieved chunk, and the judge said which) but graded ``incorrect`` on an
   answerable item whose required citations were all retrieved, and no chunk
   it rests on is a required one: the evidence reached the generator, and the
   answer was taken from another passage.  The fix is which chunk is picked
   (reranking, the prompt's use of the context), not the generator's
   grounding, so it is never called a hallucination.  An answer resting on a
   required chunk itself and still graded incorrect is left to the grade
   (``hallucination``, with the reference sentence the judge says it
   contradicts): the passage and the reference disagree, and the golden item
   or the document is the first suspect.
5. ``hallucination`` -- an answer claim the retrieved context does not
   support, or a judge grade of ``incorrect`` that the claims' support does not
   explain (no per-chunk verdicts, or answering a false-premise or
   unanswerable question as if its premise held).  It outranks the citation
   and completeness classes: a wrong claim matters more than a wrong marker or
   an omission.
6. ``citation_error`` -- every claim is supported, but the answer cites
   nothing, or cites a chunk that supports none of its claims ("right claim,
   wrong or missing [Sn] marker").
7. ``incomplete`` -- what was said is right but not enough: an unsatisfied
   must-assertion, a judge grade of ``missing`` or ``acceptable`` on an
   answerable item, or an abstention on an answerable item.
8. ``correct`` -- nothing above fired; an abstention on an unanswerable item
   is correct.

Rules and edge decisions
------------------------
* *Unanswerable items* (``answerable=False``): required citations are ignored
  (there is no evidence to miss).  Abstaining is ``correct`` and skips the
  must-assertions (they describe an answer; an abstention cannot satisfy them
  literally).  Not abstaining is ``hallucination`` when the judge graded it
  ``incorrect`` or did not grade it at all (an unjudged substantive answer to a
  question the corpus cannot support asserts something unsupported), and is
  otherwise classified by the remaining rules, except ``citation_error``
  (a well-formed rejection of a premise may have nothing to cite) and the
  grade-based ``incomplete`` rule (``missing``/``acceptable`` only mean
  "incomplete" when an answer was possible).
* *Abstentions* (``abstained=True``) assert nothing: ``stale``,
  ``conflict_mishandled``, ``hallucination`` and ``citation_error`` never fire
  for them, even if a claim extractor produced claims (those restate the
  question) or the judge graded the abstention ``incorrect``.  An abstention
  on an answerable item is ``retrieval_miss`` when a required citation is
  missing, else ``incomplete``.
* *Dynamism* is compared case-insensitively; ``static``, ``None`` and any
  other value never make a source stale (a superseded document about a fact
  that does not change is not a cause of error).
* *Citations*: ``supporting_chunk_ids`` empty means "not known", so only the
  "cites nothing" half of the citation rule can fire.  When it is known, a
  cited id that is not among the supporting chunks (including an id that was
  never retrieved) is a wrong marker.
* *Judge grade* ``None`` means "not judged": grade-based rules do not fire
  (except the unanswerable rule above).  Grades are matched
  case-insensitively; an unknown grade raises ``ValueError``.
* *Evidence* lists at most three ids/claims and says how many more there are.
  It is one sentence; :attr:`ErrorVerdict.details` adds the lines that show it
  (each text trimmed to :data:`DETAIL_WIDTH` characters), and
  :attr:`ErrorVerdict.text` joins both, as a strict failure shows them:

  - ``hallucination``: the answer and the first unsupported claim; when the
    judge's grade decided, the reference sentence (or must-assertion) the
    answer contradicts or does not cover, when the judge names one, and the
    judge's reason;
  - ``incomplete``: the answer (the headline names the first unsatisfied
    must-assertion) and, for a grade, the judge's reason;
  - ``citation_error``: the cited chunks (with their ``[Sn]`` markers) against
    the chunks that support the claims;
  - ``stale``: the stale chunk and its ``validTo`` / ``supersededBy``;
  - ``conflict_mishandled``: the answer;
  - a wrong answer or a wrong abstention (``hallucination``, ``incomplete``)
    and any answer below the item's confidence threshold: the confidence,
    against that threshold when the item has one.
* *Chunks without text* (``context_has_text=False``: every retrieved chunk came
  back without its text): the claims could not be checked against the context,
  so neither the unsupported-claim rule nor ``citation_error`` fires; the
  judge's grade against the reference still does.

The inputs accept lists for the tuple fields (converted to tuples); a bare
string for a tuple field raises ``TypeError`` (it would otherwise be read as a
sequence of one-character ids).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pytest_crucible.defaults import ERROR_CLASSES_VERSION
from pytest_crucible.metrics.crag import CRAG_GRADES

__all__ = ["DETAIL_WIDTH", "ERROR_CLASSES", "ERROR_CLASSES_VERSION", "ClassificationInputs", "ErrorVerdict", "StaleSource", "classify"]

ERROR_CLASSES: tuple[str, ...] = (
    "retrieval_miss",
    "stale",
    "conflict_mishandled",
    "wrong_passage",
    "hallucination",
    "citation_error",
    "incomplete",
    "correct",
)


#: Dynamism values for which a superseded source counts as stale.
STALE_DYNAMISM = frozenset({"slow", "fast"})

_TUPLE_FIELDS = (
    "missing_required_citations",
    "unsupported_claims",
    "cited_chunk_ids",
    "supporting_chunk_ids",
    "stale_cited",
    "conflicting_docs",
    "unsatisfied_must",
    "retrieved_chunk_ids",
    "correctness_targets",
    "required_chunk_ids",
)

#: Each text quoted in the evidence (an answer, a claim, a reference sentence) is cut to about this many characters.
DETAIL_WIDTH = 160


class StaleSource(NamedTuple):
    """A stale chunk and why: its ``validTo`` date and what superseded it (either may be None)."""

    chunk_id: str
    valid_to: str | None = None
    superseded_by: str | None = None


@dataclass(frozen=True)
class ClassificationInputs:
    """What the plugin knows about one result; every field is a plain value.

    ``missing_required_citations``: ids of required citations not retrieved within K.
    ``unsupported_claims``: answer claims the retrieved context does not support.
    ``cited_chunk_ids``: what the answer cites.
    ``supporting_chunk_ids``: retrieved chunks that support at least one answer
    claim; empty = not known.
    ``stale_cited``: cited or relied-on chunks whose document is superseded or
    past ``valid_to``.
    ``conflicting_docs``: doc ids the golden item marks as conflicting; empty =
    no conflict to handle.
    ``answer_mentions_conflict``: the answer surfaces the disagreement.
    ``unsatisfied_must``: reasons from the must-assertion check.
    ``crag_grade``: perfect | acceptable | missing | incorrect, or ``None`` when not judged.

    For the evidence only (they never change the class, except ``context_has_text``):
    ``answer``, ``confidence`` and ``confidence_threshold`` (the item's, if it has one);
    ``retrieved_chunk_ids`` in rank order (``[Sn]`` is the n-th); ``stale_sources``: the
    stale chunks with their ``validTo`` / ``supersededBy``; ``judge_reason``: the judge's reason
    for its grade; ``judge_contradicts``: the judge's own (source, text) of the target it says
    the answer contradicts; ``correctness_targets``: what the judge graded against, in order (the
    must-assertions, else the reference sentences), quoted when there is only one. ``context_has_text``: False when every retrieved
    chunk came back without text (claims could not be checked against the context).
    """

    answerable: bool
    question_type: str = "simple"
    dynamism: str | None = None
    abstained: bool = False
    missing_required_citations: tuple[str, ...] = ()
    unsupported_claims: tuple[str, ...] = ()
    cited_chunk_ids: tuple[str, ...] = ()
    supporting_chunk_ids: tuple[str, ...] = ()
    stale_cited: tuple[str, ...] = ()
    conflicting_docs: tuple[str, ...] = ()
    answer_mentions_conflict: bool = False
    unsatisfied_must: tuple[str, ...] = ()
    crag_grade: str | None = None
    answer: str | None = None
    confidence: float | None = None
    confidence_threshold: float | None = None
    retrieved_chunk_ids: tuple[str, ...] = ()
    stale_sources: tuple[StaleSource, ...] = ()
    judge_reason: str | None = None
    judge_contradicts: tuple[str, ...] = ()  # (source, text) of the target the judge says the answer contradicts
    correctness_targets: tuple[str, ...] = ()
    context_has_text: bool = True
    required_chunk_ids: tuple[str, ...] = ()  # the item's required citations (chunk ids, else doc ids): evidence only

    def __post_init__(self) -> None:
        object.__setattr__(self, "stale_sources", tuple(StaleSource(*source) for source in self.stale_sources))
        for name in _TUPLE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, (str, bytes)):
                raise TypeError(f"{name} must be a sequence of strings, not a single string ({value!r})")
            object.__setattr__(self, name, tuple(str(v) for v in value))
        if self.crag_grade is not None:
            grade = self.crag_grade.strip().lower() if isinstance(self.crag_grade, str) else self.crag_grade
            if grade not in CRAG_GRADES:
                raise ValueError(f"unknown CRAG grade {self.crag_grade!r}; expected one of: {', '.join(CRAG_GRADES)} or None")
            object.__setattr__(self, "crag_grade", grade)


@dataclass(frozen=True)
class ErrorVerdict:
    """The class of one result, one human-readable sentence of evidence, and the lines that show it
    (the answer, the claim, the reference sentence, the markers, the dates, the confidence)."""

    error_class: str
    evidence: str
    details: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.error_class not in ERROR_CLASSES:
            raise ValueError(f"unknown error class {self.error_class!r}; expected one of: {', '.join(ERROR_CLASSES)}")
        object.__setattr__(self, "details", tuple(self.details))

    @property
    def text(self) -> str:
        """The sentence, then one indented line per detail: what a strict failure and the store show."""
        return "".join([self.evidence, *(f"\n    {detail}" for detail in self.details)])


def _trim(text: str, width: int = DETAIL_WIDTH) -> str:
    """One line of at most ``width`` characters (whitespace collapsed, '...' where it was cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3].rstrip() + "..."


def _marker(x: ClassificationInputs, chunk_id: str) -> str:
    """``chunk_id [Sn]`` when the chunk was retrieved (n = its rank), else ``chunk_id (not retrieved)``."""
    if chunk_id in x.retrieved_chunk_ids:
        return f"{chunk_id} [S{x.retrieved_chunk_ids.index(chunk_id) + 1}]"
    return f"{chunk_id} (not retrieved)" if x.retrieved_chunk_ids else chunk_id


def _markers(x: ClassificationInputs, chunk_ids: tuple[str, ...]) -> str:
    return _names(tuple(_marker(x, c) for c in chunk_ids))


def _answer_line(x: ClassificationInputs) -> list[str]:
    return [] if x.answer is None else [f'answer: "{_trim(x.answer)}"']


def _confidence_line(x: ClassificationInputs, *, always: bool) -> list[str]:
    """The pipeline's confidence, against the item's threshold when it has one; ``always``: also
    when it is not below the threshold (a wrong answer or abstention given with that confidence)."""
    if x.confidence is None:
        return []
    if x.confidence_threshold is None:
        return [f"confidence: {x.confidence:g}"] if always else []
    below = x.confidence < x.confidence_threshold
    if not (always or (below and not x.abstained)):
        return []
    relation = "below" if below else "at or above"
    return [f"confidence: {x.confidence:g} ({relation} the item's threshold {x.confidence_threshold:g})"]


def _grade_lines(x: ClassificationInputs) -> list[str]:
    """For a grade-based verdict: the reference sentence or must-assertion the judge says the answer
    contradicts, else the only one it graded against (not covered or contradicted), then its reason."""
    lines = []
    if len(x.judge_contradicts) == 2:
        source, target = x.judge_contradicts
        lines.append(f'{source} the answer contradicts: "{_trim(target)}"')
    elif len(x.correctness_targets) == 1 and x.crag_grade in ("incorrect", "acceptable") and x.answerable:
        lines.append(f'expected (the answer contradicts or does not cover it): "{_trim(x.correctness_targets[0])}"')
    if x.judge_reason:
        lines.append(f"judge: {_trim(x.judge_reason)}")
    return lines


def _names(items: tuple[str, ...], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f" (+{len(items) - limit} more)"
    return shown


def _quoted(items: tuple[str, ...], limit: int = 3) -> str:
    return _names(tuple(f'"{_trim(item)}"' for item in items), limit)


def _plural(items: tuple[str, ...], singular: str, plural: str) -> str:
    return singular if len(items) == 1 else plural


def classify(inputs: ClassificationInputs) -> ErrorVerdict:
    """The error class of one result: the first rule, in ``ERROR_CLASSES`` order, that fires, with its
    sentence of evidence and the detail lines that show it."""
    verdict = _decide(inputs)
    return ErrorVerdict(verdict.error_class, verdict.evidence, _details(inputs, verdict.error_class))


def _details(x: ClassificationInputs, error_class: str) -> tuple[str, ...]:
    """What shows the evidence of ``error_class`` (see the module docstring), each text trimmed."""
    lines: list[str] = []
    if error_class == "stale":
        for source in x.stale_sources[:1]:
            why = [f"validTo {source.valid_to}" if source.valid_to else "",
                   f"supersededBy {source.superseded_by}" if source.superseded_by else ""]
            lines.append(f"stale chunk: {_marker(x, source.chunk_id)}: " + ", ".join(w for w in why if w))
        lines += _answer_line(x)
    elif error_class == "conflict_mishandled":
        lines += _answer_line(x)
    elif error_class == "wrong_passage":
        lines += _answer_line(x)
        lines += _grade_lines(x)
    elif error_class == "hallucination":
        lines += _answer_line(x)
        if x.unsupported_claims and x.context_has_text:
            lines.append(f'unsupported claim: "{_trim(x.unsupported_claims[0])}"')
        else:
            lines += _grade_lines(x)
    elif error_class == "citation_error":
        cited = _markers(x, x.cited_chunk_ids) if x.cited_chunk_ids else "nothing"
        supporting = (_markers(x, x.supporting_chunk_ids) if x.supporting_chunk_ids
                      else "not known (no judge verdict per chunk)")
        lines.append(f"cited: {cited}; the chunks that support the claims: {supporting}")
    elif error_class == "incomplete":
        lines += _answer_line(x)
        if not x.abstained and not x.unsatisfied_must:
            lines += _grade_lines(x)
    if error_class != "correct":  # a wrong answer or abstention, or an answer below the item's threshold
        lines += _confidence_line(x, always=error_class in ("wrong_passage", "hallucination", "incomplete"))
    return tuple(lines)


def _decide(x: ClassificationInputs) -> ErrorVerdict:
    """The class and its sentence (``classify`` adds the details)."""
    answered = not x.abstained
    dynamism = x.dynamism.strip().lower() if isinstance(x.dynamism, str) else None
    false_premise = x.question_type.strip().lower() == "false_premise"

    # 1. retrieval_miss
    if x.answerable and x.missing_required_citations:
        miss = x.missing_required_citations
        word = _plural(miss, "citation", "citations")
        return ErrorVerdict(
            "retrieval_miss",
            f"Required {word} {_names(miss)} not retrieved within K, so the evidence never reached the answer.",
        )

    # 2. stale
    if answered and dynamism in STALE_DYNAMISM and x.stale_cited:
        word = _plural(x.stale_cited, "source", "sources")
        return ErrorVerdict(
            "stale",
            f"The answer relies on stale {word} {_names(x.stale_cited)} (superseded or past valid_to) "
            f"on a {dynamism}-changing item.",
        )

    # 3. conflict_mishandled
    if answered and x.conflicting_docs and not x.answer_mentions_conflict:
        return ErrorVerdict(
            "conflict_mishandled",
            f"Sources {_names(x.conflicting_docs)} disagree and the answer does not surface the conflict.",
        )

    # 4. wrong_passage: faithful to what was retrieved, and wrong (rule 1 found every required citation retrieved)
    if (answered and x.answerable and not false_premise and x.crag_grade == "incorrect" and not x.unsupported_claims
            and x.context_has_text and x.supporting_chunk_ids):
        required = set(x.required_chunk_ids)
        if required and not required & set(x.supporting_chunk_ids):
            return ErrorVerdict(
                "wrong_passage",
                f"The answer is faithful to the retrieved context but wrong: it rests on {_markers(x, x.supporting_chunk_ids)}, "
                f"not on the required {_markers(x, x.required_chunk_ids)}, which was retrieved.",
            )

    # 5. hallucination
    if answered:
        if x.unsupported_claims and x.context_has_text:
            word = _plural(x.unsupported_claims, "claim", "claims")
            return ErrorVerdict(
                "hallucination",
                f"Answer {word} not supported by the retrieved context: {_quoted(x.unsupported_claims)}.",
            )
        if x.crag_grade == "incorrect":
            if false_premise:
                detail = f" on a false-premise item (question type {x.question_type}), answered as if it held"
            elif not x.answerable:
                detail = (f" on an unanswerable item (question type {x.question_type}), "
                          "answered although the corpus cannot support an answer")
            else:
                detail = ""
            return ErrorVerdict("hallucination", f"The judge graded the answer incorrect (CRAG -1){detail}.")
        if not x.answerable and x.crag_grade is None:
            return ErrorVerdict(
                "hallucination",
                f"The item is unanswerable (question type {x.question_type}) and the answer did not abstain; "
                "no judge grade says it rejected the question.",
            )

    # 6. citation_error (answerable items only; claims are supported at this point, unless the
    # retrieved chunks had no text to check them against: then the rule cannot be applied)
    if answered and x.answerable and x.context_has_text:
        if not x.cited_chunk_ids:
            known = f" (supporting chunks: {_names(x.supporting_chunk_ids)})" if x.supporting_chunk_ids else ""
            return ErrorVerdict(
                "citation_error", f"The answer cites nothing although its claims are supported{known}."
            )
        if x.supporting_chunk_ids:
            supporting = set(x.supporting_chunk_ids)
            wrong = tuple(c for c in x.cited_chunk_ids if c not in supporting)
            if wrong:
                word = _plural(wrong, "chunk", "chunks")
                verb = "supports" if len(wrong) == 1 else "support"
                return ErrorVerdict(
                    "citation_error",
                    f"Cited {word} {_names(wrong)} {verb} none of the answer's claims "
                    f"(supporting: {_names(x.supporting_chunk_ids)}).",
                )

    # 7. incomplete / 8. correct
    if not x.answerable:
        if x.abstained:
            return ErrorVerdict("correct", "Abstained on an unanswerable item, which is the correct behaviour.")
    elif x.abstained:
        return ErrorVerdict("incomplete", "The answer abstained on an answerable item.")
    if x.unsatisfied_must:
        word = _plural(x.unsatisfied_must, "assertion", "assertions")
        return ErrorVerdict("incomplete", f"Must-{word} not satisfied: {_quoted(x.unsatisfied_must)}.")
    if x.answerable and x.crag_grade in ("missing", "acceptable"):
        meaning = "no answer" if x.crag_grade == "missing" else "a minor omission"
        return ErrorVerdict("incomplete", f"The judge graded the answer {x.crag_grade} ({meaning}).")

    if not x.answerable:
        return ErrorVerdict(
            "correct", f"The unanswerable item was handled correctly (judge grade {x.crag_grade})."
        )
    graded = f", judge grade {x.crag_grade}" if x.crag_grade else ", not judged"
    if not x.context_has_text:
        return ErrorVerdict(
            "correct", f"Required evidence retrieved{graded}; the claims and citations were not checked "
                       "because the retrieved chunks have no text."
        )
    return ErrorVerdict(
        "correct", f"All checks passed: required evidence retrieved, claims supported and cited{graded}."
    )

