"""`crucible judge align`: the offline judge fitted to people's labels, measured by cross-validation.

For each judged quantity the labels cover (the labels file of ``crucible judge calibrate``:
:mod:`.calibration`), the cases go through the answer layer a run uses, exactly as calibration sends
them, with the base judge (``lexical-v3``). The cases whose verdict the judge gives (a CRAG grading
request; a faithfulness entailment request: answer claims against the passages) are the ones an aligned
judge re-decides; the others keep the verdict the answer layer gives without a judge (an abstention's
grade, the faithfulness of claims with nothing retrieved) and count in the figures as they are.

* **crag**: a multinomial logistic regression over :data:`~pytest_crucible.judge.lexical_features.CORRECTNESS_FEATURES`;
* **faithful**: a binary logistic regression over :data:`~pytest_crucible.judge.lexical_features.ENTAILMENT_FEATURES`.

Both: the features standardised (mean 0, sd 1 on the fitting cases), L2 penalty with C = 1, lbfgs:
fixed choices, not tuned to any labels. The fit and the folds are scikit-learn's (the ``align`` extra);
the fitted coefficients go into a plain JSON file that :mod:`pytest_crucible.judge.aligned` applies with
numpy.

**Cross-validation.** Stratified k-fold (``--folds``, default 5; shuffled with ``--seed``) over the
cases the model decides: each case is predicted by the model fitted on the other folds, and those
out-of-fold verdicts, with the verdicts the model does not decide, are compared with the labels as
``judge calibrate`` compares the base judge's: Cohen's kappa (the labels the reference), accuracy, the
confusion matrix, and for crag the binary kappa (correct = perfect or acceptable). The kappas' 95%
intervals bootstrap the labels (:func:`pytest_crucible.stats.agreement.kappa_intervals`: the same
resamples for the unaligned and the aligned verdicts, so the difference gets one too). The file's model
is then fitted on every case.

**Refusals** (:class:`AlignmentRefused`, exit 2, nothing written): a quantity with fewer than
:data:`MIN_LABELS` labels the model would decide, or a class of it with fewer than :data:`MIN_PER_CLASS`
(or fewer than the folds): too few to fit and measure anything.

This module never imports pytest and never touches the store.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..metrics.crag import CRAG_GRADES, is_correct
from .calibration import LabelledCase, faithful_verdict, label_set_hash

__all__ = ["MIN_LABELS", "MIN_PER_CLASS", "AlignmentRefused", "agreement", "align", "categories", "check",
           "checked_quantities", "collect", "report_lines"]

MIN_LABELS = 30
MIN_PER_CLASS = 5
N_RESAMPLES = 2000
CONFIDENCE = 0.95
PENALTY_C = 1.0
METHOD = ("logistic regression (multinomial for crag, binary for faithful), L2 penalty C=1.0, lbfgs, "
          "on features standardised over the fitting cases")
_KINDS = {"crag": "correctness", "faithful": "entailment"}
_BINARY = ("correct", "not correct")


class AlignmentRefused(Exception):
    """Too few labels to align on: ``str()`` is the message, then a ``HINT:`` line."""


@dataclass
class _Quantity:
    """One quantity's labelled cases, as the answer layer judged them."""

    name: str
    ids: list[str] = field(default_factory=list)  # the compared cases (a label and a verdict)
    labels: list[Any] = field(default_factory=list)
    unaligned: list[Any] = field(default_factory=list)
    decided: list[int] = field(default_factory=list)  # positions (in the lists above) the model decides
    rows: list[tuple[float, ...]] = field(default_factory=list)  # their features, parallel to ``decided``
    requests: list[Any] = field(default_factory=list)  # the requests an aligned judge re-decides, parallel to ``decided``
    labelled: int = 0  # cases with a label of the quantity, compared or not
    failed: list[str] = field(default_factory=list)  # why the judge gave no verdict on a labelled case (judge errors)


def collect(cases: Sequence[LabelledCase], judge: Any, features: Any = None) -> dict[str, _Quantity]:
    """Every labelled case through the answer layer with the base judge (as ``judge_cases`` does), and the
    requests it sent whose verdicts an aligned judge re-decides, with their features (``features``: request kind
    -> (request, verdict) -> Features, the offline judge's; None: the requests alone, for a model judge)."""
    from ..evaluation.answers import AnswerInputs, score_answers
    from ..judge.embed import default_embedder
    from ..judge.engine import JudgeEngine
    from ..judge.types import CorrectnessRequest, EntailmentRequest

    inputs = [AnswerInputs.from_score(case.as_run_row()) for case in cases]
    scores = score_answers(inputs, JudgeEngine(judge, cache_mode="off"), default_embedder())
    found = {name: _Quantity(name) for name in _KINDS}
    pending: list[tuple[_Quantity, Any]] = []
    for case, item, score in zip(cases, inputs, scores):
        for name, label, verdict in (("crag", case.crag, score.crag_grade),
                                     ("faithful", case.faithful, faithful_verdict(score.metrics.get("faithfulness")))):
            if label is None:
                continue
            quantity = found[name]
            quantity.labelled += 1
            if score.errors:
                quantity.failed.append(str(score.errors[0]))
                continue
            if verdict is None:
                continue
            quantity.ids.append(case.id)
            quantity.labels.append(label)
            quantity.unaligned.append(verdict)
            request: Any = None
            if name == "crag" and "correctness" in score.verdicts:
                request = CorrectnessRequest(question=item.question, answer=item.answer or "", reference=item.reference,
                                             assertions=item.must_assertions, answerable=item.answerable,
                                             false_premise=item.false_premise)
            elif name == "faithful" and "faithfulness" in score.verdicts:
                request = EntailmentRequest(context=item.contexts, claims=tuple(score.verdicts["faithfulness"]["claims"]))
            if request is not None:
                quantity.decided.append(len(quantity.labels) - 1)
                quantity.requests.append(request)
                pending.append((quantity, request))
    if features is not None:
        verdicts = judge.judge([request for _, request in pending])
        for (quantity, request), verdict in zip(pending, verdicts):
            quantity.rows.append(features[request.kind](request, verdict).values)
    return found


def check(quantity: _Quantity, folds: int, path: str, other: str | None) -> None:
    """Refuse a quantity with too few labels the model would decide, or too few of one class."""
    decided = [quantity.labels[i] for i in quantity.decided]
    outside = len(quantity.labels) - len(decided)
    why = (f" ({outside} more case(s) are decided without the judge: abstentions, or claims with nothing retrieved)"
           if outside else "")
    alone = f", or align {other} alone (--only {other})" if other else ""
    more = "label more answers (crucible judge labels export --run latest -o more.jsonl gives you cases to check)"
    if len(decided) < MIN_LABELS:
        raise AlignmentRefused(
            f"{path}: {quantity.name}: {len(decided)} labelled case(s) the judge decides{why}; aligning needs at least "
            f"{MIN_LABELS}\nHINT: {more}{alone}")
    counts = {value: decided.count(value) for value in dict.fromkeys(decided)}
    need = max(MIN_PER_CLASS, folds)
    if len(counts) < 2:
        raise AlignmentRefused(f"{path}: {quantity.name}: every label the judge decides is {_shown(decided[0])}: there is "
                               f"nothing to learn\nHINT: {more}{alone}")
    for value, count in sorted(counts.items(), key=lambda pair: (pair[1], str(pair[0]))):
        if count < need:
            folds_note = f" (one per fold of {folds})" if need > MIN_PER_CLASS else ""
            raise AlignmentRefused(
                f"{path}: {quantity.name}: {count} {_shown(value)} label(s) among the {len(decided)} cases the judge decides"
                f"{why}; every class needs at least {need}{folds_note}\nHINT: label at least {need - count} more "
                f"{_shown(value)} answer(s){' or use fewer --folds' if need > MIN_PER_CLASS else ''}{alone}")


def checked_quantities(found: dict[str, _Quantity], folds: int, path: str, only: Sequence[str]) -> list[str]:
    """The quantities to align (those the labels cover, or ``only``), each checked: :class:`AlignmentRefused`."""
    wanted = [name for name in _KINDS if found[name].labelled and (not only or name in only)]
    if not wanted:
        kinds = " or ".join(only or _KINDS)
        raise AlignmentRefused(f"{path}: no {kinds} label to align on\nHINT: label the answers' "
                               f"{kinds} (\"labels\": {{\"crag\": ..., \"faithful\": ...}}; docs/judge-calibration.md)")
    for name in wanted:
        if found[name].failed:  # a fit on the cases the judge happened to answer is not the labels' fit
            quantity = found[name]
            raise AlignmentRefused(
                f"{path}: {name}: the judge failed on {len(quantity.failed)} of {quantity.labelled} labelled case(s) "
                f"(first: {quantity.failed[0]}); nothing was written\nHINT: check the judge (its API key, its address, "
                "its rate limits: docs/reliability.md) and run the command again")
    for name in wanted:
        other = next((n for n in wanted if n != name), None)
        check(found[name], folds, path, other)
    return wanted


def _shown(value: Any) -> str:
    return f"'{str(value).lower()}'" if isinstance(value, bool) else f"'{value}'"


def _fit(rows: Any, labels: Any, classes: Sequence[Any], multinomial: bool) -> dict[str, Any]:
    """The logistic model of one quantity fitted on these rows: its part of the file (classes in ``classes``'s order)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale < 1e-12] = 1.0  # a constant feature: left as it is (z = 0)
    model = LogisticRegression(C=PENALTY_C, max_iter=10_000)
    model.fit((rows - mean) / scale, labels)
    fitted = [_plain(c) for c in model.classes_]
    coef, intercept = model.coef_, model.intercept_
    if not multinomial:
        order = [0, 1]
    else:
        if len(fitted) == 2:  # scikit-learn fits one row for two classes: as two rows, softmax(0, s) = sigmoid(s)
            coef, intercept = np.vstack([np.zeros_like(coef[0]), coef[0]]), np.array([0.0, intercept[0]])
        order = [fitted.index(c) for c in classes if c in fitted]
        coef, intercept = coef[order], intercept[order]
    return {"classes": [fitted[i] for i in order], "mean": [float(v) for v in mean], "scale": [float(v) for v in scale],
            "coef": [[float(v) for v in row] for row in np.atleast_2d(coef)], "intercept": [float(v) for v in np.atleast_1d(intercept)]}


def _plain(value: Any) -> Any:
    """A numpy scalar as the JSON value it stands for."""
    return value.item() if hasattr(value, "item") else value


def categories(name: str) -> tuple[Any, ...]:
    return CRAG_GRADES if name == "crag" else (True, False)


def _binary(grade: str) -> str:
    return _BINARY[0] if is_correct(grade) else _BINARY[1]


def agreement(name: str, labels: Sequence[Any], unaligned: Sequence[Any], aligned: Sequence[Any], seed: int) -> dict[str, Any]:
    """Both sets of verdicts against the labels: kappa (with its bootstrap interval), accuracy, confusion."""
    from ..stats.agreement import cohen_kappa, confusion_matrix, kappa_intervals

    def block(truth: Sequence[Any], first: Sequence[Any], second: Sequence[Any], categories: Sequence[Hashable],
              suffix: str = "") -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        intervals = kappa_intervals(truth, first, second, categories=categories, n_resamples=N_RESAMPLES,
                                    confidence=CONFIDENCE, seed=seed)
        names = [str(c).lower() for c in categories]
        out = []
        for verdicts, ci in ((first, intervals.first), (second, intervals.second)):
            kappa = cohen_kappa(list(zip(truth, verdicts)), reference=0)
            entry: dict[str, Any] = {f"kappa{suffix}": _round(kappa.kappa), f"kappa{suffix}Ci": _interval(ci),
                     f"accuracy{suffix}": _round(kappa.observed)}
            if not suffix:
                matrix = confusion_matrix(list(zip(truth, verdicts)), categories)
                entry["confusion"] = {names[i]: {names[j]: matrix[i][j] for j in range(len(names))} for i in range(len(names))}
            out.append(entry)
        return out[0], out[1], {f"kappa{suffix}DifferenceCi": _interval(intervals.difference)}

    unaligned_block, aligned_block, difference = block(labels, unaligned, aligned, categories(name))
    if name == "crag":
        extra = block([_binary(v) for v in labels], [_binary(v) for v in unaligned], [_binary(v) for v in aligned],
                      _BINARY, "Binary")
        unaligned_block |= extra[0]
        aligned_block |= extra[1]
        difference |= extra[2]
    return {"unaligned": unaligned_block, "aligned": aligned_block, **difference}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def _interval(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else [round(pair[0], 4), round(pair[1], 4)]


def _cross_validate(quantity: _Quantity, folds: int, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the file's model fitted on every decided case, the cross-validated figures)."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    from ..judge.aligned import LinearModel

    rows = np.asarray(quantity.rows, dtype=np.float64)
    decided = [quantity.labels[i] for i in quantity.decided]
    labels = np.asarray(decided, dtype=object if quantity.name == "crag" else bool)
    multinomial = quantity.name == "crag"
    classes = [c for c in categories(quantity.name) if c in set(decided)] if multinomial else [False, True]
    out_of_fold: list[Any] = [None] * len(decided)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for train, test in splitter.split(rows, labels):
        part = LinearModel.from_dict(quantity.name, {**_fit(rows[train], labels[train], classes, multinomial), "features": [""] * rows.shape[1]})
        for position, verdict in zip(test, part.decide(rows[test])[0]):
            out_of_fold[int(position)] = verdict
    aligned = list(quantity.unaligned)
    for position, verdict in zip(quantity.decided, out_of_fold):
        aligned[position] = verdict
    figures = {"n": len(quantity.labels), "nModel": len(decided),
               "labels": {str(c).lower(): decided.count(c) for c in categories(quantity.name) if c in set(decided)},
               **agreement(quantity.name, quantity.labels, quantity.unaligned, aligned, seed)}
    return _fit(rows, labels, classes, multinomial), figures


def align(cases: Sequence[LabelledCase], *, path: str, folds: int = 5, seed: int | None = None,
          only: Sequence[str] = ()) -> dict[str, Any]:
    """The aligned judge's document (:mod:`pytest_crucible.judge.aligned`'s format, without its ``contentHash``:
    ``artifact_text`` adds it) for these labelled cases, with each quantity's cross-validated figures under
    ``quantities.<name>.cv``. ``only``: align these quantities alone. Raises :class:`AlignmentRefused`."""
    import importlib.metadata

    import numpy as np

    from .. import __version__
    from ..defaults import DEFAULT_SEED
    from ..judge.aligned import FORMAT, FORMAT_VERSION, QUANTITIES, base_judges
    from ..judge.lexical_features import BASE_JUDGE

    seed = DEFAULT_SEED if seed is None else seed
    base = base_judges()[BASE_JUDGE]
    collecting = base.make()
    try:
        found = collect(cases, collecting, base.features)
    finally:
        collecting.close()
    wanted = checked_quantities(found, folds, path, only)
    quantities: dict[str, Any] = {}
    for name in wanted:
        fitted, figures = _cross_validate(found[name], folds, seed)
        kind, model = QUANTITIES[name]
        quantities[name] = {"requestKind": kind, "model": model, "features": list(base.feature_names[kind]), **fitted,
                            "cv": figures}
    judge = base.make()
    return {
        "format": FORMAT, "formatVersion": FORMAT_VERSION,
        "baseJudge": {"model": judge.model, "promptVersion": judge.prompt_version, "features": base.features_version},
        "labels": {"hash": label_set_hash(cases), "cases": len(cases),
                   "counts": {name: found[name].labelled for name in _KINDS if found[name].labelled}},
        "libraries": {"pytest-crucible": __version__, "scikit-learn": importlib.metadata.version("scikit-learn"),
                      "numpy": np.__version__},
        "fit": {"method": METHOD, "folds": folds, "seed": seed, "bootstrapResamples": N_RESAMPLES, "confidence": CONFIDENCE},
        "quantities": quantities,
    }


# -- the report ------------------------------------------------------------------------------------------
def _number(value: float | None, digits: int = 2) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def _ci(pair: Sequence[float] | None, signed: bool = False) -> str:
    if pair is None:
        return "[undefined]"
    form = "+.2f" if signed else ".2f"
    return f"[{pair[0]:{form}}, {pair[1]:{form}}]"


def report_lines(document: dict[str, Any], labels_path: str) -> list[str]:
    """What ``crucible judge align`` prints: per quantity, unaligned and aligned side by side."""
    fit = document["fit"]
    base = document["baseJudge"]["model"]
    lines = [f"aligning {base} to {document['labels']['cases']} labelled case(s) from {labels_path} "
             f"(labels sha256 {document['labels']['hash'][:12]})",
             f"stratified {fit['folds']}-fold cross-validation, seed {fit['seed']}; kappa intervals: {round(fit['confidence'] * 100)}% "
             f"bootstrap over the labels ({fit['bootstrapResamples']} resamples)"]
    if fit.get("examplesPerClass"):  # a model judge aligned by few-shot examples
        lines.append(f"few-shot: {fit['examplesPerClass']} example(s) of each class in the prompt, each fold's chosen from "
                     "the other folds only (the unaligned judge's mistakes first)")
    for name, quantity in document["quantities"].items():
        cv = quantity["cv"]
        labels = ", ".join(f"{label} {count}" for label, count in cv["labels"].items())
        outside = cv["n"] - cv["nModel"]
        rest = f"; {outside} decided without the judge, as they are" if outside else ""
        lines += ["", f"{name}: {cv['n']} labels compared, {cv['nModel']} decided by the model ({labels}){rest}",
                  f"  {'':<17}{'unaligned':<24}aligned (cross-validated)"]
        rows = [("kappa", "kappa", "kappaCi")] + ([("binary kappa", "kappaBinary", "kappaBinaryCi")] if name == "crag" else [])
        for title, key, ci in rows:
            left = f"{_number(cv['unaligned'][key])} {_ci(cv['unaligned'][ci])}"
            lines.append(f"  {title:<17}{left:<24}{_number(cv['aligned'][key])} {_ci(cv['aligned'][ci])}")
        for title, key in [("accuracy", "accuracy")] + ([("binary accuracy", "accuracyBinary")] if name == "crag" else []):
            lines.append(f"  {title:<17}{_number(cv['unaligned'][key], 3):<24}{_number(cv['aligned'][key], 3)}")
        lines.append(f"  aligned - unaligned kappa {_ci(cv['kappaDifferenceCi'], signed=True)}"
                     + (f", binary {_ci(cv['kappaBinaryDifferenceCi'], signed=True)}" if name == "crag" else ""))
        columns = list(cv["unaligned"]["confusion"])
        width = max(11, *(len(c) + 1 for c in columns))
        lines.append(f"  {'human / judge':<14}" + "".join(f"{c:>{width}}" for c in columns) + "   |"
                     + "".join(f"{c:>{width}}" for c in columns) + "   (unaligned | aligned)")
        for label in columns:
            left = "".join(f"{cv['unaligned']['confusion'][label][c]:>{width}}" for c in columns)
            right = "".join(f"{cv['aligned']['confusion'][label][c]:>{width}}" for c in columns)
            lines.append(f"  {label:<14}{left}   |{right}")
    return lines
