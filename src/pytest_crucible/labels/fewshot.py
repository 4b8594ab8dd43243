"""`crucible judge align LABELS --judge anthropic|openai|module:Class`: a model judge aligned by few-shot examples.

The offline judge is aligned by fitting small models (:mod:`.alignment`); a model judge is aligned by showing it
people's labels. For each quantity the labels cover (crag: the CRAG grade; faithful: "is every claim supported?"),
examples are chosen from the labelled cases the judge decides (:func:`select_examples`: the same number of each
class, the cases the unaligned judge got wrong first, then in a seeded order) and sent after the system prompt of
that quantity's request kind (:func:`pytest_crucible.judge.aligned.examples_text`), in the stable prefix the prompt
cache keeps.

**Cross-validation**, as the offline path measures it: the decided cases are split into k stratified, seeded folds
(:func:`stratified_folds`); each fold is judged by the model with examples chosen from the other folds only (never a
case of the fold it judges), and those verdicts are compared with the labels beside the unaligned judge's, by the
same code and in the same report (:func:`.alignment.agreement`, :func:`.alignment.report_lines`). The file's
examples are then chosen from every decided case.

**Cost first.** Before any request, :func:`estimate` prices every request the command will send (the labelled
cases through the answer layer unaligned, then one request per decided case with examples), high-side
(:func:`~pytest_crucible.judge.prices.estimate_tokens`; the prompts' stable prefixes as cache writes; the longest
cases as the examples); over ``max_cost`` the command refuses (:class:`CostRefused`): nothing sent, nothing written.

The refusals of the offline path apply (fewer than 30 labels the judge decides, a class under 5). This module
never imports pytest, never touches the store and needs no scikit-learn.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from .alignment import AlignmentRefused, agreement, categories, checked_quantities, collect
from .calibration import LabelledCase, label_set_hash

__all__ = ["EXAMPLES_PER_CLASS", "CostRefused", "align_model_judge", "estimate", "select_examples", "stratified_folds"]

#: Examples of each class a quantity's prompt shows (crag: up to 4 classes, faithful: 2).
EXAMPLES_PER_CLASS = 2
#: Output tokens allowed per request in the estimate (verdicts are short; high-side).
_OUTPUT_TOKENS = 200


class CostRefused(AlignmentRefused):
    """The estimate exceeds ``--max-cost``: nothing was sent."""


def stratified_folds(labels: Sequence[Any], folds: int, seed: int) -> list[list[int]]:
    """Positions of ``labels`` in ``folds`` folds, each class dealt round the folds in a seeded order (sorted)."""
    rng = random.Random(seed)
    out: list[list[int]] = [[] for _ in range(folds)]
    by_class: dict[str, list[int]] = {}
    for position, label in enumerate(labels):
        by_class.setdefault(repr(label), []).append(position)
    dealt = 0
    for key in sorted(by_class):
        positions = by_class[key]
        rng.shuffle(positions)
        for offset, position in enumerate(positions):
            out[(dealt + offset) % folds].append(position)
        dealt += len(positions)
    return [sorted(fold) for fold in out]


def select_examples(positions: Sequence[int], labels: Sequence[Any], unaligned: Sequence[Any], classes: Sequence[Any],
                    per_class: int, seed: int) -> list[int]:
    """``per_class`` positions of each class among ``positions`` (all a class has, when fewer): the cases the
    unaligned judge got wrong first, each group in a seeded order."""
    rng = random.Random(seed)
    chosen: list[int] = []
    for value in classes:
        candidates = [p for p in positions if labels[p] == value]
        rng.shuffle(candidates)
        candidates.sort(key=lambda p: unaligned[p] == labels[p])  # stable: wrong ones first, the shuffle within
        chosen.extend(candidates[:per_class])
    return chosen


def _case_tokens(case: LabelledCase) -> int:
    from ..judge.prices import estimate_tokens

    texts = [case.question, case.answer or "", case.reference or "", *case.contexts,
             *(str(assertion.get("text", "")) for assertion in case.assertions)]
    return sum(estimate_tokens(text) for text in texts)


def estimate(cases: Sequence[LabelledCase], judge: Any, *, per_class: int, only: Sequence[str] = ()) -> dict[str, Any]:
    """Requests, tokens and USD (None: the model has no price) of everything the command sends, high-side: every
    answer-layer request of a case (2 per passage + 8) holds all of the case's text; every cross-validation
    request holds its case and the longest cases as examples; the stable prefixes priced as cache writes."""
    from ..judge.model_judge import schema_text
    from ..judge.prices import estimate_tokens
    from ..judge.prompts import available_kinds, load_prompt

    kinds = available_kinds()
    system = max(estimate_tokens(load_prompt("crucible-v1", kind)[0]) + estimate_tokens(schema_text(kind)) for kind in kinds)
    sizes = sorted((_case_tokens(case) for case in cases), reverse=True)
    plain = sum((2 * len(case.contexts) + 8) for case in cases)
    prefix_in = plain * system
    rest_in = sum((2 * len(case.contexts) + 8) * _case_tokens(case) for case in cases)
    covered = [name for name in ("crag", "faithful") if (not only or name in only)
               and any((case.crag if name == "crag" else case.faithful) is not None for case in cases)]
    cv = 0
    for name in covered:
        labelled = [case for case in cases if (case.crag if name == "crag" else case.faithful) is not None]
        shots = sum(sizes[: per_class * len(categories(name))])
        cv += len(labelled)
        prefix_in += len(labelled) * (system + shots)
        rest_in += sum(_case_tokens(case) for case in labelled)
    requests = plain + cv
    written = prefix_in if getattr(judge, "cache_writes_billed", False) else 0
    usd = judge.cost(prefix_in + rest_in - written, requests * _OUTPUT_TOKENS, batch=False, requests=None,
                     cache_write_tokens=written)
    return {"requests": requests, "unaligned": plain, "crossValidation": cv, "inputTokens": prefix_in + rest_in,
            "outputTokens": requests * _OUTPUT_TOKENS, "usd": usd}


def _example(quantity: Any, position: int) -> dict[str, Any]:
    from ..judge.prompts import render_parts

    index = quantity.decided[position]
    request = quantity.requests[position]
    return {"id": quantity.ids[index], "label": quantity.labels[index], "text": render_parts(request).item.strip()}


def _value(name: str, verdict: Any) -> Any:
    return verdict.grade if name == "crag" else all(verdict.supported)


def _cross_validate(name: str, quantity: Any, make: Callable[[], Any], folds: int, seed: int,
                    per_class: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the file's examples, the cross-validated figures) of one quantity."""
    from ..judge.aligned import QUANTITIES, examples_text
    from ..judge.types import JudgeFailure

    kind = QUANTITIES[name][0]
    labels = [quantity.labels[i] for i in quantity.decided]
    unaligned = [quantity.unaligned[i] for i in quantity.decided]
    classes = [c for c in categories(name) if c in set(labels)]
    aligned = list(quantity.unaligned)
    for test in stratified_folds(labels, folds, seed):
        held_out = set(test)
        picked = select_examples([p for p in range(len(labels)) if p not in held_out], labels, unaligned, classes,
                                 per_class, seed)
        judge = make()
        judge.examples = {kind: examples_text(name, [_example(quantity, p) for p in picked])}
        try:
            verdicts = judge.judge([quantity.requests[p] for p in test])
        finally:
            judge.close()
        failed = [v for v in verdicts if isinstance(v, JudgeFailure)]
        if failed:
            raise AlignmentRefused(f"{name}: the judge failed on {len(failed)} cross-validation request(s): {failed[0].message}"
                                   "\nHINT: run the command again (nothing was written); docs/reliability.md says what a "
                                   "judge failure means")
        for position, verdict in zip(test, verdicts):
            aligned[quantity.decided[position]] = _value(name, verdict)
    examples = [_example(quantity, p) for p in select_examples(range(len(labels)), labels, unaligned, classes, per_class, seed)]
    figures = {"n": len(quantity.labels), "nModel": len(labels),
               "labels": {str(c).lower(): labels.count(c) for c in categories(name) if c in set(labels)},
               **agreement(name, quantity.labels, quantity.unaligned, aligned, seed)}
    return examples, figures


def align_model_judge(cases: Sequence[LabelledCase], *, judge_name: str, model: str | None, path: str, folds: int = 5,
                      seed: int | None = None, only: Sequence[str] = (), per_class: int = EXAMPLES_PER_CLASS,
                      max_cost: float | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    """The few-shot alignment's document (:mod:`pytest_crucible.judge.aligned`'s few-shot format, without its
    ``contentHash``). Says the cost estimate first; raises :class:`CostRefused` over ``max_cost`` (before any
    request), :class:`AlignmentRefused` for too few labels."""
    from .. import __version__
    from ..defaults import DEFAULT_SEED
    from ..judge.aligned import FEW_SHOT, FORMAT, FORMAT_VERSION, QUANTITIES
    from ..judge.prompts import PROMPT_VERSION
    from ..judge.select import make_judge
    from .alignment import CONFIDENCE, N_RESAMPLES

    seed = DEFAULT_SEED if seed is None else seed

    def make() -> Any:
        return make_judge(judge_name, model=model)

    judge = make()
    try:
        if not hasattr(judge, "prompt_parts"):
            raise AlignmentRefused(f"--judge {judge_name}: {judge.model} does not send crucible's prompts, so it cannot "
                                   "take few-shot examples\nHINT: align a model judge (anthropic, openai, or a class "
                                   "that subclasses pytest_crucible.judge.model_judge.ModelJudge), or the offline judge "
                                   "(--judge lexical)")
        cost = estimate(cases, judge, per_class=per_class, only=only)
        price = f"${cost['usd']:.2f}" if cost["usd"] is not None else "price unknown (set crucible_judge_price_per_mtok)"
        say(f"judge cost estimate: {cost['requests']} requests ({cost['unaligned']} to judge the labelled cases unaligned, "
            f"{cost['crossValidation']} cross-validated with examples), ~{cost['inputTokens']:,} input + "
            f"~{cost['outputTokens']:,} output tokens, {price} with {judge.model}")
        if max_cost is not None and (cost["usd"] is None or cost["usd"] > max_cost):
            why = "its price is unknown" if cost["usd"] is None else f"the estimated cost {price} exceeds it"
            raise CostRefused(f"--max-cost={max_cost:g}: {why}; nothing was sent and nothing written\n"
                              f"HINT: a higher --max-cost, fewer labels, or --only crag / --only faithful")
        found = collect(cases, judge)
        base_model = model or judge.model
    finally:
        judge.close()
    wanted = checked_quantities(found, folds, path, only)
    quantities: dict[str, Any] = {}
    for name in wanted:
        examples, figures = _cross_validate(name, found[name], make, folds, seed, per_class)
        quantities[name] = {"requestKind": QUANTITIES[name][0], "method": FEW_SHOT,
                            "classes": [c for c in categories(name) if c in set(found[name].labels)],
                            "examples": examples, "cv": figures}
    return {
        "format": FORMAT, "formatVersion": FORMAT_VERSION,
        "baseJudge": {"method": FEW_SHOT, "judge": judge_name, "model": base_model, "promptVersion": PROMPT_VERSION},
        "labels": {"hash": label_set_hash(cases), "cases": len(cases),
                   "counts": {name: found[name].labelled for name in found if found[name].labelled}},
        "libraries": {"pytest-crucible": __version__},
        "fit": {"method": f"few-shot: {per_class} examples per class, the unaligned judge's mistakes first, seeded",
                "folds": folds, "seed": seed, "examplesPerClass": per_class, "bootstrapResamples": N_RESAMPLES,
                "confidence": CONFIDENCE},
        "quantities": quantities,
    }
