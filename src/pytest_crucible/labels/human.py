"""Human labels of a run's answers, and the judge's bias corrected with them (PPI++).

A judge that systematically over- or under-grades moves every judged mean by that bias. People
label SOME answers (``crucible judge labels import``); prediction-powered inference (PPI++,
:mod:`pytest_crucible.stats.ppi`) then corrects the judge's mean with the judge's error measured on
those answers and gives a valid interval for the mean people would have given.

A label belongs to one answer of one golden item: the item id and :func:`answer_hash` of the answer
text. So a label follows the answer, not the run: a later run that gives the same answer to the same
item (whitespace aside) is labelled too, and a changed answer is not.

How a label becomes a number comparable with the judged metric of the item:

- ``crag`` (perfect / acceptable / missing / incorrect) -> its CRAG score (1, 0.5, 0, -1:
  :func:`pytest_crucible.metrics.crag.crag_score`), against the item's ``truthfulness`` (the judge's
  CRAG score on the same scale);
- ``faithful`` (true / false) -> 1.0 / 0.0, against the item's ``faithfulness`` *as is* (a fraction in
  [0, 1]). The calibration (``crucible judge calibrate``) reads "faithful" as faithfulness == 1.0; PPI
  instead compares the label with the judge's value itself, so the corrected mean is the share of
  answers people call faithful, and the judge's partial credit (0.8: four claims of five supported)
  is part of the bias it measures.

A label made from a promoted correction (``crucible judge labels import --from-feedback``) is authored
by who really wrote the correction: the API key that promoted it over HTTP (``key:<id>``), its
``correctedBy`` kept in the note as a claim (:func:`correction_author`).

When two labels of one kind for the same answer disagree (a relabelling, an import and a review),
the newest one counts (the ledger is append-only: the older one stays there). This module holds no
SQL (the ledger's statements are in ``store/ledgers.py``) and never imports pytest; numpy and scipy
are imported only when a run has labelled answers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..metrics.properties import BUILTIN, REGISTRY

if TYPE_CHECKING:
    from ..stats.ppi import PPIEstimate
    from ..store import Store
    from ..verdict.runs import RunData
    from .calibration import LabelledCase

__all__ = [
    "KINDS",
    "METRIC_OF_KIND",
    "MIN_LABELLED",
    "PPILine",
    "answer_hash",
    "compare_ppi",
    "compare_ppi_for_runs",
    "compare_ppi_lines",
    "correction_author",
    "label_number",
    "label_rows_from_cases",
    "label_rows_from_corrections",
    "ppi_for_run",
    "ppi_lines",
    "ppi_summary_lines",
    "run_ppi_lines",
    "stored_run_ppi",
]

KINDS = ("crag", "faithful")
# label kind -> the judged metric it is compared with
METRIC_OF_KIND = {kind: next(m.name for m in BUILTIN if m.label_kind == kind) for kind in KINDS}  # crag: truthfulness
# The fewest labelled answers PPI++ gives an interval from: with t quantiles its 95% interval covered 0.945 and
# 0.942 at 30 labels in simulation (an informative and a weak judge; 0.93-0.94 at 20, 0.92-0.93 at 10), so
# below 30 the number would claim more than the labels support (docs/statistics.md, the PPI rows).
MIN_LABELLED = 30
HEADER = "judge bias corrected with human labels (PPI++):"


def answer_hash(answer: str | None) -> str:
    """sha256 (hex) of the answer with surrounding whitespace stripped and every run of internal
    whitespace collapsed to one space; None and a blank answer hash as the empty answer."""
    text = " ".join((answer or "").split())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def label_number(kind: str, value: str) -> float:
    """A stored label as a number on its metric's scale: crag -> the CRAG score, faithful -> 1.0 / 0.0."""
    if kind == "crag":
        from ..metrics.crag import crag_score

        return crag_score(value)
    if kind == "faithful":
        if value not in ("true", "false"):
            raise ValueError(f"a faithful label is 'true' or 'false', got {value!r}")
        return 1.0 if value == "true" else 0.0
    raise ValueError(f"unknown label kind {kind!r}; expected one of {', '.join(KINDS)}")


def _stored(kind: str, label: Any) -> str:
    """A label as the ledger stores it (TEXT): the CRAG grade, or 'true' / 'false'."""
    return ("true" if label else "false") if kind == "faithful" else str(label)


def _rows(item_id: str, answer: str | None, labels: Mapping[str, Any], **extra: Any) -> list[dict[str, Any]]:
    digest = answer_hash(answer)
    return [{"item_id": item_id, "answer_hash": digest, "kind": kind, "value": _stored(kind, labels[kind]), **extra}
            for kind in KINDS if labels.get(kind) is not None]


def label_rows_from_cases(cases: Sequence[LabelledCase], *, source: str = "import", created_by: str | None = None,
                          note: str | None = None) -> list[dict[str, Any]]:
    """Ledger rows of the labels of a labels file (``calibration.read_labels_file``), in file order.

    Each case labels the answer ``answer`` of the golden item ``itemId`` when the case names one, else
    of the golden item whose id is the case's ``id``."""
    rows = []
    for case in cases:
        rows.extend(_rows(case.item_id or case.id, case.answer, {"crag": case.crag, "faithful": case.faithful},
                          source=source, created_by=created_by, note=note))
    return rows


def label_rows_from_corrections(corrections: Sequence[dict[str, Any]], *,
                                created_by: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """(ledger rows, corrections skipped) from promoted corrections (``store.ledgers.promoted_corrections``),
    labelled as ``crucible judge labels export`` labels them (``calibration.labels_from_corrections``),
    source ``feedback``, authored by :func:`correction_author`. A correction that names no result (no
    answer, no item) is skipped."""
    from .calibration import labels_from_corrections

    lines, skipped = labels_from_corrections(corrections)
    by_id = {row["id"]: row for row in corrections}
    rows = []
    for line in lines:
        if not line.get("itemId"):
            skipped += 1
            continue
        author, note = correction_author(by_id[line["id"]], created_by=created_by)
        rows.extend(_rows(line["itemId"], line["answer"], line["labels"], source="feedback", created_by=author, note=note))
    return rows, skipped


def correction_author(correction: Mapping[str, Any], *, created_by: str | None = None) -> tuple[str | None, str]:
    """(author, note) of the labels of a promoted correction. Promoted over HTTP: the API key that sent it,
    ``key:<id>`` (its name, when it has one, and the reviewer ``correctedBy`` claimed go in the note, as
    claims: any key holder could write any ``correctedBy``). From the command line (no key): the reviewer it
    names, else ``created_by``. The note starts with ``feedback <id>``, the eval_feedback row."""
    from ..json_input import key_author

    note = f"feedback {correction['id']}"
    key_id, claimed = correction.get("api_key_id"), correction.get("corrected_by")
    if not key_id:
        return claimed or created_by, note
    author = key_author(key_id)
    if correction.get("api_key_name"):
        note += f"; promoted by {author} ({correction['api_key_name']})"
    if claimed and claimed != author:
        note += f"; claimed by {claimed}"
    return author, note


def _number(value: float, sign: bool = False) -> str:
    """Two decimals, never "-0.00" (a difference that rounds to nothing is +0.00)."""
    value = round(value, 2) + 0.0
    return f"{value:+.2f}" if sign else f"{value:.2f}"


def _newest(labels: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], float]:
    """(item id, answer hash, kind) -> the label's number; ``labels`` oldest first, so the newest wins."""
    found = {}
    for label in labels:
        found[(label["item_id"], label["answer_hash"], label["kind"])] = label_number(label["kind"], label["value"])
    return found


# What each corrected metric can be: truthfulness is a CRAG score (-1 .. 1), faithfulness a share.
METRIC_RANGES = {metric: REGISTRY[metric].range for metric in METRIC_OF_KIND.values()}


# -- one run ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PPILine:
    """PPI++ for one judged metric of a run: ``estimate`` is None when fewer than MIN_LABELLED answers
    with a judged value are labelled."""

    metric: str
    kind: str
    n_labelled: int
    n_unlabelled: int
    estimate: PPIEstimate | None
    note: str | None = None  # why there is no estimate, when it is not too few labels

    def text(self) -> str:
        if self.estimate is None and self.note:
            return f"{self.metric}  {self.n_labelled} labelled answers; {self.note}"
        if self.estimate is None:
            more = MIN_LABELLED - self.n_labelled
            return (f"{self.metric}  {self.n_labelled} labelled answer{'s' if self.n_labelled != 1 else ''}; "
                    f"PPI needs at least {MIN_LABELLED} (label {more} more)")
        e = self.estimate
        # The normal interval can pass the metric's bounds on few labels; the mean cannot, so the shown
        # interval stops there (it covers the mean whenever the unclipped one does).
        low, high = METRIC_RANGES.get(self.metric, (float("-inf"), float("inf")))
        return (f"{self.metric}  judge {_number(e.judge_mean)}  ppi {_number(e.estimate)} "
                f"[{_number(max(low, e.ci_low))}, {_number(min(high, e.ci_high))}]  ({e.n_labelled} labelled, "
                f"bias {_number(e.bias, True)})")


def no_variance(values: Sequence[float]) -> str | None:
    """:func:`pytest_crucible.stats.ppi.no_variance` (imported when asked: numpy stays out of a session without labels)."""
    from ..stats.ppi import no_variance as why

    return why(values)


def _answers(results_rows: Iterable[Mapping[str, Any]] | Mapping[str, str | None]) -> dict[str, str]:
    """item id -> hash of its answer, from result rows (``item_id``, ``answer``) or a mapping item id -> answer."""
    if isinstance(results_rows, Mapping):
        return {item_id: answer_hash(answer) for item_id, answer in results_rows.items()}
    return {row["item_id"]: answer_hash(row.get("answer")) for row in results_rows}


def ppi_for_run(results_rows: Iterable[Mapping[str, Any]] | Mapping[str, str | None],
                item_metrics: Mapping[str, Mapping[str, float]], labels: Iterable[Mapping[str, Any]], *,
                alpha: float = 0.05) -> list[PPILine]:
    """PPI++ of ``truthfulness`` (crag labels) and ``faithfulness`` (faithful labels) over a run's items.

    Each result is paired with the labels of its answer (item id, :func:`answer_hash` of ``answer``; the
    newest label per kind). Labelled: items with a label of the kind and a judged value of its metric;
    unlabelled: items with a judged value and no label. A metric with no labelled item gets no line; one
    with fewer than MIN_LABELLED gets a line without an estimate. ``labels``: ledger rows, oldest first
    (``store.ledgers.human_labels_for_items``)."""
    hashes = _answers(results_rows)
    newest = _newest(labels)
    lines = []
    for kind in KINDS:
        metric = METRIC_OF_KIND[kind]
        judged = item_metrics.get(metric) or {}
        labelled_y, labelled_f, unlabelled_f = [], [], []
        for item_id in sorted(judged):
            label = newest.get((item_id, hashes[item_id], kind)) if item_id in hashes else None
            if label is None:
                unlabelled_f.append(float(judged[item_id]))
            else:
                labelled_y.append(label)
                labelled_f.append(float(judged[item_id]))
        if not labelled_y:
            continue
        estimate, note = None, no_variance(labelled_y)
        if len(labelled_y) >= MIN_LABELLED and note is None:
            from ..stats.ppi import ppi_mean

            estimate = ppi_mean(labelled_y, labelled_f, unlabelled_f, alpha=alpha)
        lines.append(PPILine(metric, kind, len(labelled_y), len(unlabelled_f), estimate,
                             note if len(labelled_y) >= MIN_LABELLED else None))
    return lines


def ppi_summary_lines(results_rows: Iterable[Mapping[str, Any]] | Mapping[str, str | None],
                      item_metrics: Mapping[str, Mapping[str, float]], labels: Iterable[Mapping[str, Any]]) -> list[str]:
    """The summary's lines, e.g.::

        judge bias corrected with human labels (PPI++):
          truthfulness  judge 0.41  ppi 0.35 [0.28, 0.42]  (40 labelled, bias +0.06)

    (``judge``: the judge's mean over every judged item; ``ppi``: the corrected mean and its 95%
    interval; ``bias``: mean(judge - label) on the labelled items, + when the judge over-grades).
    Nothing at all when no answer of the run with a judged value is labelled."""
    return ppi_lines(ppi_for_run(results_rows, item_metrics, labels))


def ppi_lines(estimates: Sequence[PPILine]) -> list[str]:
    """The summary's PPI++ lines of estimates already made (nothing when there is none)."""
    return [HEADER, *(f"  {line.text()}" for line in estimates)] if estimates else []


def stored_run_ppi(store: Store, run_id: str, metrics: Iterable[str]) -> list[PPILine]:
    """:func:`ppi_for_run` of a stored run whose measured ``metrics`` include a judged one that people label,
    its labels read from the ledger; [] when nobody labelled one of its answers. It reads the answers and
    the item metrics only then: most runs have no label, and a large run's rows are many."""
    from ..store import aggregates

    if not set(metrics) & set(METRIC_OF_KIND.values()) or not aggregates.has_human_labels(store, run_id):
        return []
    from ..store.ledgers import human_labels_for_items

    results_rows = aggregates.result_columns(store, run_id, ("item_id", "answer"))
    item_metrics = store.item_metrics(run_id)
    labels = human_labels_for_items(store, (row["item_id"] for row in results_rows))
    return ppi_for_run(results_rows, item_metrics, labels) if labels else []


def run_ppi_lines(store: Store, results_rows: Sequence[Mapping[str, Any]],
                  item_metrics: Mapping[str, Mapping[str, float]]) -> list[str]:
    """:func:`ppi_summary_lines` of a stored run, its labels read from the ledger (the terminal summary)."""
    if not any(metric in item_metrics for metric in METRIC_OF_KIND.values()):
        return []
    from ..store.ledgers import human_labels_for_items

    labels = human_labels_for_items(store, (row["item_id"] for row in results_rows))
    return ppi_summary_lines(results_rows, item_metrics, labels) if labels else []


# -- two runs: the paired difference ---------------------------------------------------------------
def compare_ppi(a_answers: Iterable[Mapping[str, Any]] | Mapping[str, str | None], a_metrics: Mapping[str, Mapping[str, float]],
                b_answers: Iterable[Mapping[str, Any]] | Mapping[str, str | None], b_metrics: Mapping[str, Mapping[str, float]],
                labels: Iterable[Mapping[str, Any]], *, alpha: float = 0.05) -> dict[str, Any]:
    """PPI++ of the paired difference B - A of ``truthfulness`` and ``faithfulness`` (the JSON of
    ``crucible compare --ppi``).

    Pairs: items judged for the metric in both runs. Labelled pairs: the answer of A and the answer of B
    are both labelled (the same answer in both runs is one label, read twice); unlabelled pairs: labelled
    in neither run; a pair labelled in one run only is left out (``labelledInOneRun``), as
    :func:`pytest_crucible.stats.ppi.ppi_paired_difference` takes them. ``judgeDelta``: the judge's mean
    difference over the pairs PPI reads (labelled and unlabelled); ``delta`` and ``ci``: the corrected
    difference and its 95% interval, None below MIN_LABELLED labelled pairs (``note`` says why)."""
    hashes_a, hashes_b = _answers(a_answers), _answers(b_answers)
    newest = _newest(labels)
    document: dict[str, Any] = {"direction": "b - a", "alpha": alpha, "metrics": {}}
    for kind in KINDS:
        metric = METRIC_OF_KIND[kind]
        judged_a, judged_b = a_metrics.get(metric) or {}, b_metrics.get(metric) or {}
        paired = sorted(set(judged_a) & set(judged_b))
        ya, yb, fa, fb, ua, ub = [], [], [], [], [], []
        one_sided = inherited = 0
        for item_id in paired:
            label_a = newest.get((item_id, hashes_a[item_id], kind)) if item_id in hashes_a else None
            label_b = newest.get((item_id, hashes_b[item_id], kind)) if item_id in hashes_b else None
            if label_a is not None and label_b is not None:
                inherited += hashes_a.get(item_id) == hashes_b.get(item_id)  # one label, read through an unchanged answer
                ya.append(label_a)
                yb.append(label_b)
                fa.append(float(judged_a[item_id]))
                fb.append(float(judged_b[item_id]))
            elif label_a is None and label_b is None:
                ua.append(float(judged_a[item_id]))
                ub.append(float(judged_b[item_id]))
            else:
                one_sided += 1
        entry: dict[str, Any] = {"kind": kind, "pairs": len(paired), "labelledPairs": len(ya), "unlabelledPairs": len(ua),
                                 "labelledInOneRun": one_sided, "inheritedLabels": inherited, "judgeDelta": None,
                                 "delta": None, "ci": None, "note": None}
        if ua or fa:
            entry["judgeDelta"] = (sum(fb) - sum(fa) + sum(ub) - sum(ua)) / (len(fa) + len(ua))
        if not paired:
            entry["note"] = "not judged in both runs"
        elif one_sided:
            # Items labelled in one run only: their answer changed (an unchanged one carries its label to the
            # other run). Leaving them out keeps exactly the unchanged answers: a sample chosen by the change
            # itself, whose corrected difference is biased towards 0. The design needs both answers labelled.
            entry["note"] = (f"{one_sided} item{'s' if one_sided != 1 else ''} labelled in one run only: label the other "
                             "run's answer of each (the same items must be labelled in both runs)")
        elif len(ya) < MIN_LABELLED:
            entry["note"] = (f"{len(ya)} labelled pair{'s' if len(ya) != 1 else ''}; PPI needs at least {MIN_LABELLED} "
                             f"(label {MIN_LABELLED - len(ya)} more, the answers of both runs: crucible judge labels import)")
        elif no_variance([b - a for a, b in zip(ya, yb)]):
            entry["note"] = no_variance([b - a for a, b in zip(ya, yb)])
        else:
            from ..stats.ppi import ppi_paired_difference

            estimate = ppi_paired_difference(ya, yb, fa, fb, ua, ub, alpha=alpha)
            entry.update(judgeDelta=estimate.judge_mean, delta=estimate.estimate, ci=[estimate.ci_low, estimate.ci_high],
                         se=estimate.se, lam=estimate.lam, bias=estimate.bias, classical=estimate.classical,
                         classicalCi=list(estimate.classical_ci))
        document["metrics"][metric] = entry
    return document


def compare_ppi_lines(document: Mapping[str, Any]) -> list[str]:
    """``crucible compare --ppi``'s lines, e.g.::

        judge bias corrected with human labels (PPI++), B - A (never changes the gate's verdict):
          truthfulness  judge delta +0.05  ppi delta +0.02 [-0.04, +0.08]  (12 labelled pairs)
    """
    lines = ["judge bias corrected with human labels (PPI++), B - A (never changes the gate's verdict):"]
    for metric, entry in document["metrics"].items():
        if entry["delta"] is None:
            judge = f"judge delta {_number(entry['judgeDelta'], True)}  " if entry["judgeDelta"] is not None else ""
            lines.append(f"  {metric}  {judge}{entry['note']}")
            continue
        low, high = entry["ci"]
        n = entry["labelledPairs"]
        lines.append(f"  {metric}  judge delta {_number(entry['judgeDelta'], True)}  ppi delta {_number(entry['delta'], True)} "
                     f"[{_number(low, True)}, {_number(high, True)}]  ({n} labelled pair{'s' if n != 1 else ''})")
    return lines


def compare_ppi_for_runs(store: Store, a: RunData, b: RunData, a_ref: str, b_ref: str) -> dict[str, Any]:
    """:func:`compare_ppi` of two runs as ``crucible compare`` read them (``a_ref``/``b_ref``: how they were
    named: an exported run's answers come from its file, a stored run's from the store), with the labels
    of their items read from the ledger."""
    from ..store import read_export
    from ..store.ledgers import human_labels_for_items, run_answers
    from ..verdict.runs import is_export_path

    def answers(run: RunData, ref: str) -> dict[str, str | None]:
        if is_export_path(ref):
            return {row["item_id"]: row.get("answer") for row in read_export(ref)["results"]}
        return run_answers(store, run.run_id)

    a_answers, b_answers = answers(a, a_ref), answers(b, b_ref)
    labels = human_labels_for_items(store, set(a_answers) | set(b_answers))
    return compare_ppi(a_answers, a.metrics, b_answers, b.metrics, labels)
