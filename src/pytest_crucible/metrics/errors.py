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
4. ``hallucination`` -- an answer claim the retrieved context does not
   support, or a judge grade of ``incorrect`` (which includes answering a
   false-premise or unanswerable question as if its premise held).  It
   outranks the citation and completeness classes: a wrong claim matters more
   than a wrong marker or an omission.
5. ``citation_error`` -- every claim is supported, but the answer cites
   nothing, or cites a chunk that supports none of its claims ("right claim,
   wrong or missing [Sn] marker").
6. ``incomplete`` -- what was said is right but not enough: an unsatisfied
   must-assertion, a judge grade of ``missing`` or ``acceptable`` on an
   answerable item, or an abstention on an answerable item.
7. ``correct`` -- nothing above fired; an abstention on an unanswerable item
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

The inputs accept lists for the tuple fields (converted to tuples); a bare
string for a tuple field raises ``TypeError`` (it would otherwise be read as a
sequence of one-character ids).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_crucible.metrics.crag import CRAG_GRADES

__all__ = ["ERROR_CLASSES", "ClassificationInputs", "ErrorVerdict", "classify"]

ERROR_CLASSES: tuple[str, ...] = (
    "retrieval_miss",
    "stale",
    "conflict_mishandled",
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
)


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

    def __post_init__(self) -> None:
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
    """The class of one result and one human-readable sentence of evidence."""

    error_class: str
    evidence: str

    def __post_init__(self) -> None:
        if self.error_class not in ERROR_CLASSES:
            raise ValueError(f"unknown error class {self.error_class!r}; expected one of: {', '.join(ERROR_CLASSES)}")


def _names(items: tuple[str, ...], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f" (+{len(items) - limit} more)"
    return shown


def _quoted(items: tuple[str, ...], limit: int = 3) -> str:
    return _names(tuple(f'"{item}"' for item in items), limit)


def _plural(items: tuple[str, ...], singular: str, plural: str) -> str:
    return singular if len(items) == 1 else plural


def classify(inputs: ClassificationInputs) -> ErrorVerdict:
    """The error class of one result: the first rule, in ``ERROR_CLASSES`` order, that fires."""
    x = inputs
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

    # 4. hallucination
    if answered:
        if x.unsupported_claims:
            word = _plural(x.unsupported_claims, "claim", "claims")
            return ErrorVerdict(
                "hallucination",
                f"Answer {word} not supported by the retrieved context: {_quoted(x.unsupported_claims)}.",
            )
        if x.crag_grade == "incorrect":
            if not x.answerable or false_premise:
                what = "false-premise" if false_premise else "unanswerable"
                detail = f" on a {what} item (question type {x.question_type}), answered as if it held"
            else:
                detail = ""
            return ErrorVerdict("hallucination", f"The judge graded the answer incorrect (CRAG -1){detail}.")
        if not x.answerable and x.crag_grade is None:
            return ErrorVerdict(
                "hallucination",
                f"The item is unanswerable (question type {x.question_type}) and the answer did not abstain; "
                "no judge grade says it rejected the question.",
            )

    # 5. citation_error (answerable items only; claims are supported at this point)
    if answered and x.answerable:
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

    # 6. incomplete / 7. correct
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
    return ErrorVerdict(
        "correct", f"All checks passed: required evidence retrieved, claims supported and cited{graded}."
    )

