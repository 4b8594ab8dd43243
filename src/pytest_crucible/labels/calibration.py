"""Judge calibration: how far a judge agrees with human labels (`crucible judge calibrate`).

A labels file (``.jsonl``) holds one human-labelled case per line::

    {"id": "c001", "question": "...", "contexts": ["passage", "..."], "answer": "...",
     "reference": "...", "labels": {"crag": "perfect", "faithful": true}}

(``reference`` may be absent or null; either label may be absent, not both. An optional ``itemId`` names
the golden item whose answer was labelled: ``crucible judge labels import`` keys the labels by it, else by
``id``; calibration ignores it.) A case may carry everything else a run's judge sees of a golden item:
``assertions`` (the golden item's shape, validated by its :class:`~pytest_crucible.golden_set.schema.Assertion`),
``answerable``, ``questionType`` (a false premise is graded as one) and ``abstained`` (the pipeline said it
abstained). Each case goes through the answer layer exactly as an item of a real run does: the same plain
result row a run builds (the golden item's reference, assertions, answerable and question type under
``item``) read by :meth:`AnswerInputs.from_score <pytest_crucible.evaluation.answers.AnswerInputs.from_score>`
into :func:`pytest_crucible.evaluation.answers.score_answers`, the same :class:`JudgeEngine` and its
cache, the default embedder; an answer that is blank or an honest "I don't know" is an
abstention, as in a run. The judge's verdicts compared with the labels:

- ``crag``: the CRAG grade (perfect / acceptable / missing / incorrect); also binarised as
  correct (perfect, acceptable) vs not;
- ``faithful``: the faithfulness metric is 1.0 (every claim of the answer supported by the
  contexts) -> true, below 1.0 -> false; absent (an abstention, no claims) -> not compared.

A case whose judge requests failed has no verdict and is not compared. Agreement is Cohen's
kappa (:func:`pytest_crucible.stats.agreement.cohen_kappa`, the one ``crucible qrels agreement``
uses) with the human labels as the reference: labels of one kind that use one category only make
that kappa undefined, and the figures say why (``kappaUndefined``, which the gate's warning quotes).
:func:`labels_from_run` writes a stored run's items as cases to label (its judge's verdicts prefilled),
:func:`labels_from_corrections` the promoted corrections. This module never imports pytest and never
touches the store.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..json_input import jsonl_object
from ..metrics.crag import CRAG_GRADES, is_abstention, is_correct, reference_gives_no_answer
from ..qrels.formats import QrelsFormatError

__all__ = [
    "LABEL_KEYS",
    "CaseVerdict",
    "LabelledCase",
    "LabelsFormatError",
    "calibration_figures",
    "faithful_verdict",
    "judge_cases",
    "label_set_hash",
    "labels_from_corrections",
    "labels_from_run",
    "read_labels_file",
    "stored_kappa",
]

CASE_KEYS = ("id", "itemId", "question", "contexts", "answer", "reference", "answerable", "assertions", "questionType",
             "abstained", "labels")
LABEL_KEYS = ("crag", "faithful")
BINARY = ("correct", "not correct")
FAITHFUL = (True, False)
_EXAMPLE = ('{"id": "c001", "question": "...", "contexts": ["..."], "answer": "...", "reference": "...", '
            '"labels": {"crag": "perfect", "faithful": true}}')


class LabelsFormatError(QrelsFormatError):
    """A labels file that cannot be used: ``file:line: field 'x': problem`` then a ``HINT:`` line."""


@dataclass(frozen=True)
class LabelledCase:
    id: str
    question: str
    contexts: tuple[str, ...]
    answer: str | None
    reference: str | None
    crag: str | None  # the human CRAG label, None when absent
    faithful: bool | None  # the human faithfulness label, None when absent
    line: int = 0
    answerable: bool = True  # False: the corpus cannot answer; an abstention is then perfect, as in a run
    item_id: str | None = None  # the golden item whose answer was labelled ("itemId"); None: absent (`id` is used)
    # The golden item's assertions as a run passes them (text, kind, weight, conceptId), in file order.
    assertions: tuple[dict[str, Any], ...] = ()
    question_type: str = "simple"  # the golden item's questionType: false_premise is graded as one
    abstained: bool = False  # the pipeline said it abstained ("abstained": true), whatever the answer's text

    def canonical(self) -> dict[str, Any]:
        labels = {key: value for key, value in (("crag", self.crag), ("faithful", self.faithful)) if value is not None}
        # What the judge sees beyond the original format is hashed only when given: older files keep their hash.
        extra = {**({} if self.answerable else {"answerable": False}),
                 **({"assertions": list(self.assertions)} if self.assertions else {}),
                 **({"questionType": self.question_type} if self.question_type != "simple" else {}),
                 **({"abstained": True} if self.abstained else {})}
        return {"id": self.id, "question": self.question, "contexts": list(self.contexts), "answer": self.answer,
                "reference": self.reference, "labels": labels, **extra}

    def as_run_row(self) -> dict[str, Any]:
        """The plain result row a run hands the answer layer for a golden item with these fields
        (``AnswerInputs.from_score``'s input: the row, the golden item under ``item``)."""
        item = {"id": self.item_id or self.id, "question": self.question, "reference": self.reference,
                "assertions": [dict(assertion) for assertion in self.assertions], "answerable": self.answerable,
                "questionType": self.question_type}
        return {"item_id": self.id, "question": self.question, "answer": self.answer, "item": item,
                # as a run records it: the pipeline's flag, or an answer that is blank or an "I don't know"
                "abstained": self.abstained or is_abstention(self.answer),
                "retrieved": [{"chunk_id": "", "text": text} for text in self.contexts]}


@dataclass
class CaseVerdict:
    crag: str | None = None
    faithful: bool | None = None
    errors: list[str] = field(default_factory=list)


# -- reading ------------------------------------------------------------------------------------
def _string(path: Path, line: int, obj: dict[str, Any], key: str, *, required: bool, empty: bool = False) -> str | None:
    if key not in obj or obj[key] is None:
        if required and key not in obj:
            raise LabelsFormatError(path, line, key, "missing", f"a labels line looks like {_EXAMPLE}")
        if required and key != "answer":
            raise LabelsFormatError(path, line, key, "expected a string, got null", f"a labels line looks like {_EXAMPLE}")
        return None
    value = obj[key]
    if not isinstance(value, str) or (not empty and not value.strip()):
        hint = "ids are JSON strings: quote them" if key == "id" and isinstance(value, (int, float)) else \
            f"a labels line looks like {_EXAMPLE}"
        raise LabelsFormatError(path, line, key, f"expected a non-empty string, got {json.dumps(value)}", hint)
    return value


def _case(path: Path, line: int, obj: Any, seen: dict[str, int]) -> LabelledCase:
    for key in obj:
        # Other keys are metadata for people (a domain, why the case is there) and are ignored,
        # unless they look like a misspelt field, which would silently drop what it holds.
        close = difflib.get_close_matches(key, CASE_KEYS, n=1, cutoff=0.75) if key not in CASE_KEYS else []
        if close:
            raise LabelsFormatError(path, line, key, "unknown key", f"did you mean '{close[0]}'? (other keys are ignored as metadata)")
    case_id = _string(path, line, obj, "id", required=True)
    assert case_id is not None
    if case_id in seen:
        raise LabelsFormatError(path, line, "id", f"{case_id!r} is used twice (first on line {seen[case_id]})",
                                "give every case its own id")
    item_id = _string(path, line, obj, "itemId", required=False)
    question = _string(path, line, obj, "question", required=True)
    answer = _string(path, line, obj, "answer", required=True, empty=True)  # blank or null: an abstention
    reference = _string(path, line, obj, "reference", required=False)
    # Absent, a case is unanswerable when its reference says the documents give no answer.
    answerable = obj.get("answerable", not reference_gives_no_answer(obj.get("reference") if isinstance(obj.get("reference"), str) else None))
    if not isinstance(answerable, bool):
        raise LabelsFormatError(path, line, "answerable", f"expected true or false, got {json.dumps(answerable)}",
                                "false when the contexts cannot answer the question (an abstention is then right)")
    assertions = _assertions(path, line, obj)
    question_type = obj.get("questionType", "simple")
    if question_type is None:
        question_type = "simple"
    from ..golden_set.schema import QUESTION_TYPES

    if question_type not in QUESTION_TYPES:
        close = difflib.get_close_matches(str(question_type), QUESTION_TYPES, n=1)
        raise LabelsFormatError(path, line, "questionType",
                                f"expected one of {', '.join(QUESTION_TYPES)}, got {json.dumps(question_type)}",
                                f"did you mean '{close[0]}'?" if close else "the golden item's questionType (only false_premise "
                                "changes how the judge grades)")
    abstained = obj.get("abstained", False)
    if abstained is None:
        abstained = False
    if not isinstance(abstained, bool):
        raise LabelsFormatError(path, line, "abstained", f"expected true or false, got {json.dumps(abstained)}",
                                "true when the pipeline said it abstained (a blank or \"I don't know\" answer is one anyway)")
    if "contexts" not in obj:
        raise LabelsFormatError(path, line, "contexts", "missing",
                                "the retrieved passages the answer was written from, as a list of strings ([] for none)")
    contexts = obj["contexts"]
    if not isinstance(contexts, list) or not all(isinstance(text, str) for text in contexts):
        raise LabelsFormatError(path, line, "contexts", f"expected a list of strings, got {json.dumps(contexts)[:80]}",
                                'the retrieved passages as a list of strings, e.g. ["passage one", "passage two"]')
    if "labels" not in obj:
        raise LabelsFormatError(path, line, "labels", "missing", 'the human labels, e.g. {"crag": "perfect", "faithful": true}')
    labels = obj["labels"]
    if not isinstance(labels, dict):
        raise LabelsFormatError(path, line, "labels", f"expected an object, got {json.dumps(labels)[:80]}",
                                'the human labels, e.g. {"crag": "perfect", "faithful": true}')
    for key in labels:
        if key not in LABEL_KEYS:
            close = difflib.get_close_matches(key, LABEL_KEYS, n=1)
            raise LabelsFormatError(path, line, f"labels.{key}", "unknown label",
                                    f"did you mean '{close[0]}'?" if close else f"known labels: {', '.join(LABEL_KEYS)}")
    crag = labels.get("crag")
    if crag is not None and crag not in CRAG_GRADES:
        raise LabelsFormatError(path, line, "labels.crag", f"expected one of {', '.join(CRAG_GRADES)}, got {json.dumps(crag)}",
                                "CRAG grades: perfect (right, complete), acceptable (right, minor flaw), missing (no answer "
                                "or I don't know), incorrect (wrong or hallucinated)")
    faithful = labels.get("faithful")
    if faithful is not None and not isinstance(faithful, bool):
        raise LabelsFormatError(path, line, "labels.faithful", f"expected true or false, got {json.dumps(faithful)}",
                                "true: every claim of the answer is supported by the contexts (JSON true/false, not a string)")
    if crag is None and faithful is None:
        raise LabelsFormatError(path, line, "labels", "no label: expected 'crag', 'faithful' or both",
                                'e.g. "labels": {"crag": "acceptable", "faithful": true}')
    seen[case_id] = line
    return LabelledCase(case_id, question or "", tuple(contexts), answer, reference, crag, faithful, line, answerable,
                        item_id=item_id, assertions=assertions, question_type=question_type, abstained=abstained)


_ASSERTION_EXAMPLE = '"assertions": [{"text": "Says returns take 30 days", "kind": "must"}]'


def _assertions(path: Path, line: int, obj: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """A golden item's ``assertions`` (text, kind must/should, weight, conceptId), validated as a golden
    file validates them (:class:`~pytest_crucible.golden_set.schema.Assertion`); absent or null: none."""
    value = obj.get("assertions")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise LabelsFormatError(path, line, "assertions", f"expected a list of objects, got {json.dumps(value)[:80]}",
                                f"the golden item's assertions, e.g. {_ASSERTION_EXAMPLE}")
    from pydantic import ValidationError

    from ..golden_set.schema import Assertion, field_path

    known = sorted(info.alias or name for name, info in Assertion.model_fields.items())
    found = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise LabelsFormatError(path, line, f"assertions[{index}]", f"expected an object, got {json.dumps(entry)[:80]}",
                                    f"the golden item's assertions, e.g. {_ASSERTION_EXAMPLE}")
        try:
            assertion = Assertion.model_validate(entry)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            where = field_path(["assertions", index, *error["loc"]])
            if error["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
                raise LabelsFormatError(path, line, where, "unknown key", f"did you mean '{close[0]}'?" if close else
                                        f"an assertion holds {', '.join(known)}, as in a golden item") from None
            got = "" if error["type"] == "missing" else f" (got {json.dumps(error.get('input'), default=str)[:80]})"
            problem = error["msg"] + got
            raise LabelsFormatError(path, line, where, problem,
                                    "as in a golden item: text (required), kind must or should (default must), weight >= 0 "
                                    "(default 1), conceptId (optional)") from None
        found.append(assertion.model_dump(by_alias=True, mode="json"))
    return tuple(found)


def read_labels_file(path: str | Path) -> list[LabelledCase]:
    """Every case of a labels file, in file order; a bad line raises :class:`LabelsFormatError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LabelsFormatError(path, None, None, f"cannot read the labels file: {exc.strerror or exc}",
                                f"check the path; a .jsonl file with one labelled case per line, e.g. {_EXAMPLE}") from None
    cases: list[LabelledCase] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise LabelsFormatError(path, number, "encoding", f"not valid UTF-8 (byte {raw[exc.start]:#04x})",
                                    "save the file as UTF-8") from None
        if not text.strip():
            continue
        obj = jsonl_object(text, functools.partial(LabelsFormatError, path, number),
                           example=_EXAMPLE, object_hint=f"one labelled case per line, e.g. {_EXAMPLE}",
                           plain_hint="labels hold plain text")
        cases.append(_case(path, number, obj, seen))
    if not cases:
        raise LabelsFormatError(path, None, None, "no labelled case in the file",
                                f"one JSON object per line, e.g. {_EXAMPLE}")
    return cases


def label_set_hash(cases: Sequence[LabelledCase]) -> str:
    """sha256 of the cases as read (canonical JSON, in file order): the same labels, the same hash."""
    text = "\n".join(json.dumps(case.canonical(), sort_keys=True, ensure_ascii=False) for case in cases)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- judging ------------------------------------------------------------------------------------
def judge_cases(cases: Sequence[LabelledCase], engine: Any, embedder: Any) -> list[CaseVerdict]:
    """The judge's verdicts on every case, through the answer layer a real run uses: each case becomes
    the result row a run builds for a golden item with its fields (:meth:`LabelledCase.as_run_row`), read
    by the run's own ``AnswerInputs.from_score`` (so assertions, answerable and a false premise reach the
    judge exactly as in a run)."""
    from ..evaluation.answers import AnswerInputs, score_answers

    inputs = [AnswerInputs.from_score(case.as_run_row()) for case in cases]
    return [CaseVerdict(crag=score.crag_grade, faithful=faithful_verdict(score.metrics.get("faithfulness")),
                        errors=list(score.errors))
            for score in score_answers(inputs, engine, embedder)]


def faithful_verdict(faithfulness: float | None) -> bool | None:
    """The judge's faithful verdict from its faithfulness metric: 1.0 (every claim supported) -> true,
    below -> false, absent (no claims: an abstention) -> None."""
    return None if faithfulness is None else faithfulness >= 1.0


def _binary(grade: str) -> str:
    return BINARY[0] if is_correct(grade) else BINARY[1]


def _confusion(pairs: Sequence[tuple[Any, Any]], categories: Sequence[Any], names: Sequence[str]) -> dict[str, dict[str, int]]:
    from ..stats.agreement import confusion_matrix

    matrix = confusion_matrix(pairs, categories)
    return {names[i]: {names[j]: matrix[i][j] for j in range(len(names))} for i in range(len(names))}


def stored_kappa(calibration: dict[str, Any], kind: str, *, binary: bool = False) -> tuple[float | None, str | None]:
    """(kappa, why it is undefined) of one label kind in a stored calibration row (a ``judge_calibrations``
    row): the one reading of it for the gate's warning, the run summary and a judged failure."""
    column, key = (f"kappa_{kind}_binary", "kappaBinaryUndefined") if binary else (f"kappa_{kind}", "kappaUndefined")
    kappa = calibration.get(column)
    figures = (calibration.get("figures") or {}).get(kind)
    return kappa, (figures.get(key) if kappa is None and isinstance(figures, dict) else None)


def _undefined(kind: str, kappa: Any, categories: Sequence[str] = ()) -> str | None:
    """Why a kappa of the calibration is undefined (None when it is a number): no case compared, or
    people's labels of the kind use one category only (``cohen_kappa(..., reference=0)``'s rule)."""
    if kappa.kappa is not None:
        return None
    if kappa.n == 0:
        return f"no {kind} label was compared"
    if kappa.single_category is None:
        return None
    if isinstance(kappa.single_category, bool):  # faithful: say which verdict the labels lack
        return f"your labels have no '{json.dumps(not kappa.single_category)}' cases"
    shown = f"'{kappa.single_category}'" + (f" ({' or '.join(categories)})" if categories else "")
    return f"your labels use one category only: {shown}"


def calibration_figures(cases: Sequence[LabelledCase], verdicts: Sequence[CaseVerdict]) -> dict[str, Any]:
    """The figures of ``crucible judge calibrate --json`` (without the judge): per label kind n, accuracy,
    Cohen's kappa (people's labels the reference: ``kappaUndefined`` says why a kappa is null) and the
    confusion matrix (``confusion[human label][judge verdict]``), and every case."""
    from ..stats.agreement import cohen_kappa

    crag = [(c.crag, v.crag) for c, v in zip(cases, verdicts) if c.crag is not None and v.crag is not None]
    faithful = [(c.faithful, v.faithful) for c, v in zip(cases, verdicts) if c.faithful is not None and v.faithful is not None]
    four = cohen_kappa(crag, reference=0)
    binary = cohen_kappa([(_binary(a), _binary(b)) for a, b in crag], reference=0)
    faith = cohen_kappa(faithful, reference=0)
    # keyed by the kappa's single category, whatever its type
    groups: dict[Hashable, tuple[str, ...]] = {BINARY[0]: ("perfect", "acceptable"), BINARY[1]: ("missing", "incorrect")}
    return {
        "crag": {"n": four.n, "accuracy": four.observed if four.n else None, "kappa": four.kappa,
                 "kappaUndefined": _undefined("crag", four),
                 "kappaBinary": binary.kappa, "accuracyBinary": binary.observed if binary.n else None,
                 "kappaBinaryUndefined": _undefined("crag", binary, groups.get(binary.single_category, ())),
                 "confusion": _confusion(crag, CRAG_GRADES, CRAG_GRADES)},
        "faithful": {"n": faith.n, "accuracy": faith.observed if faith.n else None, "kappa": faith.kappa,
                     "kappaUndefined": _undefined("faithful", faith),
                     "confusion": _confusion(faithful, FAITHFUL, ("true", "false"))},
        "nLabels": sum(1 for case, verdict in zip(cases, verdicts)
                       if (case.crag is not None and verdict.crag is not None)
                       or (case.faithful is not None and verdict.faithful is not None)),
        "judgeFailed": [case.id for case, verdict in zip(cases, verdicts) if verdict.errors],
        "cases": [{"id": case.id, "crag": {"label": case.crag, "verdict": verdict.crag},
                   "faithful": {"label": case.faithful, "verdict": verdict.faithful}}
                  for case, verdict in zip(cases, verdicts)],
    }


def disagreements(figures: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """(case id, label kind, human label, judge verdict) of every compared case where they differ."""
    found = []
    for case in figures["cases"]:
        for kind in LABEL_KEYS:
            label, verdict = case[kind]["label"], case[kind]["verdict"]
            if label is not None and verdict is not None and label != verdict:
                found.append((case["id"], kind, label, verdict))
    return found


# -- reviewed corrections -> a labels file ----------------------------------------------------------
def labels_from_corrections(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """(labels lines, corrections skipped) from promoted corrections (``store.ledgers.promoted_corrections``).

    The mapping (docs/judge-calibration.md): the case is the result the correction came from: its
    question, answer, retrieved chunks' texts as contexts, and the golden item's reference (else the
    corrected assertions of the draft, joined). ``crag``: an abstained result -> missing; the
    reviewer's class ``correct`` -> perfect; any other class -> incorrect. ``faithful``:
    ``hallucination`` -> false, ``correct`` -> true, other classes leave it out. A correction that
    names no result has no answer to label and is skipped. ``itemId``: the golden item of that result
    (what ``crucible judge labels import`` keys the labels by), when the correction names one.
    """
    lines, skipped = [], 0
    for row in rows:
        if row.get("question") is None:
            skipped += 1
            continue
        retrieved = json.loads(row["retrieved"]) if isinstance(row.get("retrieved"), str) else row.get("retrieved") or []
        golden = json.loads(row["golden_item"]) if row.get("golden_item") else {}
        draft = json.loads(row["draft_item"]) if row.get("draft_item") else {}
        reference = golden.get("reference") or " ".join(a.get("text", "") for a in draft.get("assertions") or []) or None
        answer = row.get("answer")
        error_class = row.get("error_class")
        if row.get("abstained") or is_abstention(answer):
            crag = "missing"
        else:
            crag = "perfect" if error_class == "correct" else "incorrect"
        labels: dict[str, Any] = {"crag": crag}
        if error_class in ("hallucination", "correct"):
            labels["faithful"] = error_class == "correct"
        lines.append({"id": row["id"], **({"itemId": row["item_id"]} if row.get("item_id") else {}), "question": row["question"],
                      "contexts": [chunk.get("text") or "" for chunk in retrieved if isinstance(chunk, dict)],
                      "answer": answer, "reference": reference, "labels": labels})
    return lines, skipped


# -- a stored run -> cases to label -------------------------------------------------------------------
RUN_SKIPS = {"no_answer": "without an answer (pipeline error or blocked)", "judge_failed": "whose judging failed",
             "no_verdict": "without a judge verdict (no answer layer: a component run, or nothing to grade)"}


def _run_faithful(row: dict[str, Any], metrics: dict[str, float]) -> bool | None:
    """The run's faithful verdict on the stored answer: every claim supported (its stored verdicts), else its
    faithfulness metric (0.0 for claims with nothing retrieved). With --crucible-repeat the metric is a
    mean over repeats while the stored answer and verdicts are one repeat's: the verdicts come first."""
    verdict = (row.get("verdicts") or {}).get("faithfulness")
    if isinstance(verdict, dict) and verdict.get("supported"):
        return faithful_verdict(1.0 if all(verdict["supported"]) else 0.0)
    return faithful_verdict(metrics.get("faithfulness"))


def labels_from_run(run: dict[str, Any], results: Sequence[dict[str, Any]], golden_items: Sequence[dict[str, Any]],
                    metrics: dict[str, dict[str, float]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(labels lines, items skipped per reason of :data:`RUN_SKIPS`) from one stored run: ``run`` (``get_run``),
    its ``results(decoded=True)``, its ``golden_items`` and ``item_metrics``.

    One case per item that has an answer and a judge verdict, in item id order: ``id`` and ``itemId`` the
    item's id; its question, answer and the retrieved chunks' texts in rank order (``contexts``); from the
    golden item as the run ran it, ``reference``, ``assertions``, ``answerable`` and ``questionType``;
    ``abstained`` as the run recorded it. So calibrating the case hands the judge what the run handed it.
    ``labels`` are the run's own verdicts (its CRAG grade; faithful from its faithfulness), a starting point
    for a person to check: ``note`` says so on every line (metadata, ignored by the readers).
    """
    items = {item["id"]: item for item in golden_items}
    note = f"labels prefilled with the verdicts of judge {run.get('judge_model') or '?'} in run {run['id']}: check each one"
    lines: list[dict[str, Any]] = []
    skipped = dict.fromkeys(RUN_SKIPS, 0)
    for row in sorted(results, key=lambda r: r["item_id"]):
        item_id = row["item_id"]
        if row.get("error") or row.get("blocked"):
            skipped["no_answer"] += 1
            continue
        if row.get("judge_errors"):
            skipped["judge_failed"] += 1
            continue
        labels = {key: value for key, value in (("crag", row.get("crag_grade")),
                                                ("faithful", _run_faithful(row, metrics.get(item_id) or {})))
                  if value is not None}
        if not labels:
            skipped["no_verdict"] += 1
            continue
        item = items.get(item_id) or {}
        retrieved = row.get("retrieved") or []
        lines.append({"id": item_id, "itemId": item_id, "question": row["question"],
                      "contexts": [chunk.get("text") or "" for chunk in retrieved if isinstance(chunk, dict)],
                      "answer": row.get("answer"), "reference": item.get("reference"),
                      "assertions": list(item.get("assertions") or []), "answerable": bool(item.get("answerable", True)),
                      "questionType": item.get("questionType") or "simple", "abstained": bool(row.get("abstained")),
                      "labels": labels, "note": note})
    return lines, {reason: n for reason, n in skipped.items() if n}
