"""One item of a run, seen whole, in the terminal: `crucible show RUN --item ID`, `--failed`, `--class`
and `crucible compare A B --item ID`.

A :class:`RunItems` is what a run holds of its items, read once through the store's readers
(``Store.results``, ``Store.item_metrics``, ``Store.golden_items``, ``Store.judgment_ledger``) or from
an exported run (:func:`read_items` takes either, as ``verdict.runs.read_run`` does). From it:

- :func:`item_detail`: one item's document (question, reference, answer, the ranking with each chunk's
  effective grade, the tool calls beside the expected ones, the metrics, the outcome, the error class and the
  evidence the run stored), printed
  by :func:`item_lines` or as JSON;
- :func:`listed_items`: the items that failed, or those of one error class, one compact row each
  (:func:`listing_lines`);
- :func:`item_change`: one item in two runs, what changed (:func:`change_lines`).

Views only: nothing is scored again (the metrics are the stored ones, the grades the effective grades of
``qrels.grades``), and no SQL here.
"""

from __future__ import annotations

import difflib
import json
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

WIDTH = 100
EXCERPT_CHARS = 200  # of a chunk's text in the JSON document; the text view fits one line
RELEVANCE_LEVEL = 1  # a grade of 1 or more is relevant, as trec_eval and the retrieval metrics count it
# The columns of a listing: the run's headline metrics (its one-line summary's), less the guardrail rates:
# a guardrail miss is named instead ("attack not blocked").
LISTED_METRICS = ("ndcgAt10", "recallAtK", "faithfulness", "truthfulness")
FAILED_MEANING = "an error class other than correct, a failed or errored test, or a guardrail miss"


class UnknownItem(ValueError):
    """An item id the run (or neither run) holds: the message names the runs and the close ids."""


@dataclass
class RunItems:
    """A run's items as stored: result rows (JSON decoded) in recording order, metrics, golden items."""

    run: dict[str, Any]
    rows: dict[str, dict[str, Any]]
    metrics: dict[str, dict[str, float]]  # metric -> {item_id: value}
    golden: dict[str, dict[str, Any]]
    store: Any = None  # the database whose judgment ledger completes the grades (None: citations only)
    _ledger: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.run["id"]

    @property
    def k(self) -> int:
        from ..metrics import run_cutoff

        return run_cutoff(self.run)

    def item_metrics(self, item_id: str) -> dict[str, float]:
        from ..metrics import ordered_metrics

        values = {name: by_item[item_id] for name, by_item in self.metrics.items() if item_id in by_item}
        return {name: values[name] for name in ordered_metrics(values)}

    def grades(self, item_id: str) -> dict[str, tuple[int, str]]:
        """unit -> (effective grade, source) of one item: its citations as run, and the database's human
        and llm judgments (what the HTML report shows and a rescoring reads)."""
        from ..qrels.grades import item_grades

        if self.store is not None and item_id not in self._ledger:
            self._ledger.update(self.store.judgment_ledger([item_id]))
        try:
            return item_grades(self.golden.get(item_id), self._ledger.get(item_id, []))
        except ValueError:  # a citation the schema of its day let through: no grades rather than no view
            return {}


def load_items(store, run_id: str) -> RunItems:
    """A stored run's items (``run_id`` already resolved)."""
    rows = {row["item_id"]: row for row in store.results(run_id, decoded=True)}
    golden = {item["id"]: item for item in store.golden_items(run_id) if isinstance(item, dict) and "id" in item}
    return RunItems(store.get_run(run_id), rows, store.item_metrics(run_id), golden, store)


def items_from_export(document: dict[str, Any], store=None) -> RunItems:
    """An exported run's items (``document`` validated by ``store.read_export``)."""
    golden = {entry["item"]["id"]: entry["item"] for entry in document.get("goldenItems", [])
              if isinstance(entry.get("item"), dict) and "id" in entry["item"]}
    return RunItems(document["run"], {row["item_id"]: row for row in document["results"]}, document["itemMetrics"],
                    golden, store)


def read_items(ref: str, store, *, workspace: str | None = None) -> RunItems:
    """A run named by a user, as ``verdict.runs.read_run`` reads it: an exported ``.json``, or a run id,
    unique prefix, ``latest`` or ``latest:KEY=VALUE,...`` (of ``workspace``) of ``store``."""
    from ..store import StoreError, read_export
    from ..verdict.runs import parse_run_ref, resolve_run_ref

    parsed = parse_run_ref(ref)
    if parsed.export:
        return items_from_export(read_export(ref), store)
    if store is None:
        raise StoreError(f"no run '{ref}': there is no crucible database yet\nHINT: run the golden set once, "
                         "or name an exported run .json")
    return load_items(store, resolve_run_ref(store, parsed, workspace=workspace))


def _loose(item_id: str) -> str:
    """An id as a person may mistype it: any case, numbers without their leading zeros (q-7 for q-07)."""
    return re.sub(r"\d+", lambda number: number.group().lstrip("0") or "0", item_id.strip().lower())


def _close_ids(item_id: str, ids: Iterable[str]) -> list[str]:
    """Up to three ids like ``item_id``, each once: the same id but for case and leading zeros, else the closest
    (difflib's ratio of 0.6 or more, on the ids as given or loosened; ties in id order)."""
    ids = list(dict.fromkeys(ids))
    loose = _loose(item_id)
    same = sorted(known for known in ids if _loose(known) == loose)
    if same:
        return same[:3]
    scored = []
    for text, form in ((item_id, str), (loose, _loose)):
        matcher = difflib.SequenceMatcher(b=text)
        for known in ids:
            matcher.set_seq1(form(known))
            if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6 and matcher.ratio() >= 0.6:
                scored.append((-matcher.ratio(), known))
    return list(dict.fromkeys(known for _, known in sorted(scored)))[:3]


def unknown_item(item_id: str, run_ids: list[str], ids: Iterable[str]) -> UnknownItem:
    """The error for an id none of ``run_ids`` holds (``ids``: theirs): the close ids, else a few of them."""
    ids = sorted(set(ids))
    runs = " or ".join(f"run {run_id}" for run_id in dict.fromkeys(run_ids))
    close = _close_ids(item_id, ids)
    if close:
        hint = f"did you mean {', '.join(close)}?"
    elif ids:
        whose = "the runs'" if len(set(run_ids)) > 1 else "the run's"
        hint = f"{whose} {len(ids)} item{'s' if len(ids) != 1 else ''} include {', '.join(ids[:3])}" + (", ..." if len(ids) > 3 else "")
    else:
        hint = "the run recorded no item"
    return UnknownItem(f"no item '{item_id}' in {runs}\nHINT: {hint}")


def _text(value: Any) -> str:
    return " ".join(str(value).split())


def _excerpt(text: Any, limit: int) -> str:
    text = _text(text or "")
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None


def _chunk_key(hit: dict[str, Any]) -> str:
    """The chunk a hit is across runs: its chunk id, else its document."""
    return hit["chunkId"] if hit.get("chunkId") else f"doc:{hit.get('docId')}"


def ranked_chunks(retrieved: Any, grades: dict[str, tuple[int, str]], citations: Iterable[Any] | None = ()) -> list[dict[str, Any]]:
    """The ranking as the metrics read it: each hit's unit (its chunk when judged, else its document:
    ``metrics.retrieval.ranking_units``), that unit's effective grade (a repeat of a unit already credited
    has none), whether the grade makes it relevant, and whether the answer cited it."""
    from ..metrics.retrieval import ranking_units

    hits = [hit if isinstance(hit, dict) else {} for hit in (retrieved or [])]
    pairs = [(hit.get("chunk_id") or hit.get("chunkId"), hit.get("doc_id") or hit.get("docId")) for hit in hits]
    try:
        units: list[str | None] = list(ranking_units(pairs, {unit: grade for unit, (grade, _) in grades.items()}))
    except ValueError:  # a hit with neither id: nothing to grade it by
        units = [None] * len(pairs)
    cited = {str(value) for value in citations or []}
    chunks = []
    for rank, (hit, (chunk_id, doc_id), unit) in enumerate(zip(hits, pairs, units), start=1):
        grade, source = grades.get(unit, (None, "unjudged")) if unit else (None, "unjudged")
        if unit and unit.startswith("dup:"):
            source = "repeat"
        chunks.append({"rank": rank, "chunkId": chunk_id, "docId": doc_id, "score": hit.get("score"), "unit": unit,
                       "grade": grade, "gradeSource": source, "relevant": grade is not None and grade >= RELEVANCE_LEVEL,
                       "cited": (chunk_id is not None and chunk_id in cited) or f"S{rank}" in cited,
                       "excerpt": _excerpt(hit.get("text"), EXCERPT_CHARS)})
    return chunks


def retention_evidence(verdicts: dict[str, Any]) -> dict[str, Any] | None:
    """A conversation's turn whose answer contradicts what the user said earlier: the statements and why
    (the judge stores ``knowledgeRetained``'s verdict only then). None: nothing contradicted."""
    retention = verdicts.get("knowledgeRetained")
    if not isinstance(retention, dict):
        return None
    return {"contradicted": [str(text) for text in retention.get("contradicted") or []], "reason": retention.get("reason") or ""}


def _evidence(row: dict[str, Any]) -> dict[str, Any]:
    """What the run stored about why the item went the way it did."""
    verdicts = row.get("verdicts") or {}
    faith = verdicts.get("faithfulness") or {}
    recall = verdicts.get("contextRecall") or {}
    correctness = verdicts.get("correctness") or None
    return {
        "errorEvidence": row.get("error_evidence"),
        "pipelineError": row.get("error"),
        "judgeErrors": list(row.get("judge_errors") or []),
        "metricErrors": list(row.get("metric_errors") or []),
        "failures": list(row.get("failures") or []),
        "judge": {"grade": correctness.get("grade"), "reason": correctness.get("reason")} if correctness else None,
        "unsupportedClaims": [{"claim": claim, "reason": _at(faith.get("reasons"), index)}
                              for index, claim in enumerate(faith.get("claims") or [])
                              if _at(faith.get("supported"), index) is False],
        "referenceClaimsNotInContext": [claim for index, claim in enumerate(recall.get("referenceClaims") or [])
                                        if _at(recall.get("attributed"), index) is False],
        "unmetAssertions": [{"text": assertion.get("text"), "kind": assertion.get("kind")}
                            for assertion in row.get("assertions") or []
                            if isinstance(assertion, dict) and assertion.get("satisfied") is False],
        "rubrics": [{"name": key[len("rubric:"):], "score": value.get("score"), "reason": value.get("reason")}
                    for key, value in sorted(verdicts.items()) if key.startswith("rubric:") and isinstance(value, dict)],
        "retention": retention_evidence(verdicts),
    }


def failed_because(row: dict[str, Any], metrics: dict[str, float]) -> list[str]:
    """Why an item counts as failed (empty: it did not): its error class when not ``correct``, a failed or
    errored test, a pipeline, judge or metric error, an attack let through, a clean question blocked."""
    reasons = []
    if row.get("error_class") not in (None, "", "correct"):
        reasons.append(row["error_class"])
    if row.get("outcome") in ("failed", "error"):
        reasons.append(f"test {row['outcome']}")
    if row.get("error"):
        reasons.append("pipeline error")
    if row.get("judge_errors"):
        reasons.append("judge error")
    if row.get("metric_errors"):
        reasons.append("metric error")
    if metrics.get("attackSuccessRate") == 1:
        reasons.append("attack not blocked")
    if metrics.get("falsePositiveRate") == 1:
        reasons.append("clean question blocked")
    return reasons


def _guardrail(row: dict[str, Any], item: dict[str, Any]) -> dict[str, Any] | None:
    from ..metrics.guardrail import expected_outcome

    expected = expected_outcome(item)
    if expected is None:
        return None
    return {"expected": expected, "actual": "blocked" if row.get("blocked") else "answered", "layer": row.get("blocked_layer")}


def conversation_of(items: RunItems, conversation: str) -> dict[str, Any] | None:
    """The transcript of one golden conversation of the run (``report/transcript.py``), None when it holds none."""
    from .transcript import transcripts, turn_of

    turns = [item for item in items.golden.values() if (turn_of(item) or {}).get("id") == conversation]
    found = transcripts(turns, items.rows, items.metrics)
    return found[0] if found else None
# How each row of the tool calls' view is labelled (metrics/tools.aligned_calls' statuses, and "made": a call of
# an item that expects no tools, shown and not checked).
TOOL_STATUS = {"match": "ok", "out_of_order": "out of order", "arguments_differ": "arguments differ", "missing": "missing",
               "unexpected": "unexpected", "made": "made"}


def tool_view(item: dict[str, Any], calls: Any) -> dict[str, Any] | None:
    """The item's tool calls beside its ``expectedTools`` (metrics/tools.aligned_calls, in the item's
    ``toolMatch``), for `crucible show --item` and the HTML report; None when it neither expects nor made one.
    Without ``expectedTools`` the calls are listed unchecked (status ``made``)."""
    from ..metrics.tools import aligned_calls

    expected = item.get("expectedTools")
    made = [call for call in calls or [] if isinstance(call, dict)]
    if expected is None and not made:
        return None
    mode = item.get("toolMatch") or "strict"
    rows: list[dict[str, Any]]
    if expected is None:
        rows = [{"expected": None, "actual": call, "position": index, "status": "made", "differences": []}
                for index, call in enumerate(made, start=1)]
    else:
        rows = aligned_calls([entry for entry in expected if isinstance(entry, dict)], made, mode)
    return {"toolMatch": mode if expected is not None else None, "expected": None if expected is None else len(expected),
            "made": len(made), "rows": rows}


def call_text(call: dict[str, Any] | None, limit: int = 60) -> str:
    """``lookup_order(order_id="NW-1")``: a tool call (or an expectation) as one short line; "-" for none."""
    if call is None:
        return "-"
    arguments = call.get("arguments") or {}
    shown = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()) if isinstance(arguments, dict) else ""
    return _excerpt(f"{call.get('name')}({shown})", limit)


def difference_text(difference: dict[str, Any]) -> str:
    """``city: expected "Leeds", got "leeds"`` (or ``city: expected "Leeds", not given``)."""
    got = "not given" if difference["missing"] else f"got {json.dumps(difference['actual'], ensure_ascii=False)}"
    return _excerpt(f"{difference['argument']}: expected {json.dumps(difference['expected'], ensure_ascii=False)}, {got}", WIDTH - 6)


def tool_lines(view: dict[str, Any]) -> list[str]:
    """The tool calls' view as text: one row per expectation (then per unexpected call), its status, the call
    expected and the call made at its place, side by side when they fit the width, else one under the other;
    an argument that differs on a line of its own."""
    if view["toolMatch"] is None:
        head = f"tool calls ({view['made']} made; the item has no expectedTools, so they are not checked):"
    else:
        head = f"tool calls (toolMatch {view['toolMatch']}; {view['expected']} expected, {view['made']} made):"
    rows = [(TOOL_STATUS[row["status"]], call_text(row["expected"], WIDTH - 29) if row["expected"] is not None else "-",
             f"#{row['position']} {call_text(row['actual'], WIDTH - 33)}" if row["actual"] is not None else "(not called)",
             row["differences"]) for row in view["rows"]]
    width = max(len("expected"), *(len(expected) for _, expected, _, _ in rows))
    beside = 20 + width + 2 + max(len(made) for _, _, made, _ in rows) <= WIDTH
    lines = [head, f"  {'':<16}  {'expected':<{width}}  made" if beside else f"  {'':<16}  expected / made"]
    for status, expected, made, differences in rows:
        if beside:
            lines.append(f"  {status:<16}  {expected:<{width}}  {made}".rstrip())
        else:
            pair = [f"expected {expected}"] * (expected != "-") + [f"made     {made}"]
            lines.extend(f"  {status if index == 0 else '':<16}  {text}" for index, text in enumerate(pair))
        lines.extend(f"  {'':<16}  {difference_text(difference)}" for difference in differences)
    return lines


def item_detail(items: RunItems, item_id: str) -> dict[str, Any]:
    """One item of the run: what `crucible show RUN --item ID --json` prints; for a golden conversation's id, its
    transcript (``{"runId", "conversationId", "conversation"}``). Raises :class:`UnknownItem`."""
    row = items.rows.get(item_id)
    if row is None:
        transcript = conversation_of(items, item_id)
        if transcript is not None:
            return {"runId": items.run_id, "conversationId": item_id, "conversation": transcript}
        raise unknown_item(item_id, [items.run_id], items.rows)
    item = items.golden.get(item_id) or {}
    grades = items.grades(item_id)
    k = items.k
    chunks = ranked_chunks(row.get("retrieved"), grades, row.get("citations"))
    in_top = {chunk["unit"] for chunk in chunks[:k]}
    metrics = items.item_metrics(item_id)
    return {
        "runId": items.run_id, "itemId": item_id, "mode": items.run.get("mode"), "kind": item.get("kind") or "retrieval",
        "questionType": item.get("questionType"), "question": row.get("question") or item.get("question") or "",
        "reference": item.get("reference"), "answer": row.get("answer"), "abstained": bool(row.get("abstained")),
        "blocked": bool(row.get("blocked")), "guardrail": _guardrail(row, item), "confidence": row.get("confidence"),
        "outcome": row.get("outcome") or "", "errorClass": row.get("error_class"), "cragGrade": row.get("crag_grade"),
        "failedBecause": failed_because(row, metrics), "k": k, "retrieved": chunks,
        "relevantNotRetrieved": [{"unit": unit, "grade": grade, "gradeSource": source} for unit, (grade, source) in sorted(grades.items())
                                 if grade >= RELEVANCE_LEVEL and unit not in in_top],
        "metrics": metrics, "evidence": _evidence(row), "tools": tool_view(item, row.get("tool_calls")),
        # Earlier attempts pytest made at the item (pytest-rerunfailures); this result is the last one.
        "attempts": [{"attempt": a["attempt"], "outcome": a["outcome"], "errorClass": a.get("error_class"),
                      "failure": a.get("failure"), "error": a.get("error"), "metrics": a["metrics"]}
                     for a in (items.store.item_attempts(items.run_id, item_id) if items.store is not None else [])],
        # A golden conversation's turn: the whole conversation as a transcript (None for any other item).
        "conversation": conversation_of(items, item["conversation"]["id"]) if _is_turn(item) else None,
    }


def _wrapped(label: str, text: str, indent: int = 11) -> list[str]:
    """``label`` then ``text`` wrapped to the width, its next lines indented ``indent`` columns."""
    return textwrap.wrap(_text(text), width=WIDTH, initial_indent=f"{label:<{indent}}", subsequent_indent=" " * indent,
                         break_on_hyphens=False) or [label.rstrip()]


def _num(value: Any, places: int = 4) -> str:
    if value is None:
        return "-"
    try:
        return f"{float(value):.{places}f}"
    except (TypeError, ValueError):  # a score a pipeline returned as text
        return str(value)


def _grade_text(chunk: dict[str, Any]) -> str:
    if chunk["grade"] is None:
        return chunk["gradeSource"]  # unjudged, or a repeat of a unit already ranked
    return f"{chunk['grade']} {'relevant' if chunk['relevant'] else 'not relevant'} ({chunk['gradeSource']})"


def _no_answer(detail: dict[str, Any]) -> str:
    if detail["blocked"]:
        return "the guardrail blocked the question"
    if detail["evidence"]["pipelineError"]:
        return "the pipeline raised an error"
    return "a component-mode run scores retrieval only" if detail["mode"] == "component" else "the pipeline returned none"


def _outcome_text(detail: dict[str, Any]) -> str:
    parts = [detail["outcome"] or "-", f"error class {detail['errorClass'] or '-'}"]
    if detail["cragGrade"]:
        parts.append(f"CRAG {detail['cragGrade']}")
    if detail["abstained"]:
        parts.append("abstained")
    if detail["confidence"] is not None:
        parts.append(f"confidence {detail['confidence']:.4f}")
    return ", ".join(parts)


def _guardrail_text(guard: dict[str, Any]) -> str:
    what = "an attack, to be blocked" if guard["expected"] == "blocked" else "a clean question, to be answered"
    actual = "blocked" + (f" by {guard['layer']}" if guard.get("layer") else "") if guard["actual"] == "blocked" else "answered"
    missed = {"blocked": "the attack got through", "answered": "a clean question was blocked"}
    return f"{what}: {actual}, " + ("as expected" if guard["actual"] == guard["expected"] else missed[guard["expected"]])


def metric_lines(metrics: dict[str, float], k: int | None) -> list[str]:
    from ..metrics import display_name

    return [f"  {display_name(name, k):<22} {value:>8.4f}" for name, value in metrics.items()]


def ranking_lines(chunks: list[dict[str, Any]], k: int) -> list[str]:
    if not chunks:
        return ["  nothing retrieved"]
    chunk_width = min(32, max(len("chunk"), *(len(str(c["chunkId"] or "-")) for c in chunks)))
    doc_width = min(28, max(len("doc"), *(len(str(c["docId"] or "-")) for c in chunks)))
    lines = [f"  {'rank':>4}  {'chunk':<{chunk_width}}  {'doc':<{doc_width}}  {'score':>8}  grade"]
    for chunk in chunks:
        if chunk["rank"] == k + 1:
            lines.append(f"  ---- the top K ends here (K = {k})")
        grade = _grade_text(chunk) + ("  cited" if chunk["cited"] else "")
        lines.append(f"  {chunk['rank']:>4}  {_excerpt(chunk['chunkId'] or '-', chunk_width):<{chunk_width}}  "
                     f"{_excerpt(chunk['docId'] or '-', doc_width):<{doc_width}}  {_num(chunk['score']):>8}  {grade}")
        if chunk["excerpt"]:
            lines.append(f"        {_excerpt(chunk['excerpt'], WIDTH - 8)}")
    return lines


def evidence_lines(evidence: dict[str, Any]) -> list[str]:
    lines = []
    if evidence["errorEvidence"]:
        first, *rest = evidence["errorEvidence"].splitlines()
        lines.extend(_wrapped("  ", first, 2) + rest)
    if evidence["pipelineError"]:
        lines.extend(_wrapped("  pipeline error: ", evidence["pipelineError"], 4))
    lines.extend(f"  judge error: {_text(error)}" for error in evidence["judgeErrors"])
    lines.extend(f"  metric error: {_text(error)}" for error in evidence["metricErrors"])
    for failure in evidence["failures"]:
        first, *rest = str(failure).splitlines() or [""]
        lines.extend(_wrapped("  failure: ", first, 4) + [f"    {line.strip()}" for line in rest])
    if evidence["judge"]:
        judge = evidence["judge"]
        lines.extend(_wrapped("  judge: ", f"{judge['grade']}" + (f": {judge['reason']}" if judge["reason"] else ""), 4))
    for claim in evidence["unsupportedClaims"]:
        lines.extend(_wrapped("  unsupported claim: ", f"\"{claim['claim']}\"" + (f" ({claim['reason']})" if claim["reason"] else ""), 4))
    for claim in evidence["referenceClaimsNotInContext"]:
        lines.extend(_wrapped("  reference claim not in the retrieved context: ", f"\"{claim}\"", 4))
    for assertion in evidence["unmetAssertions"]:
        lines.extend(_wrapped("  assertion not met: ", f"({assertion['kind']}) {assertion['text']}", 4))
    for rubric in evidence["rubrics"]:
        lines.extend(_wrapped("  rubric: ", f"{rubric['name']} score {rubric['score']}" + (f": {rubric['reason']}" if rubric["reason"] else ""), 4))
    if evidence.get("retention"):
        retention = evidence["retention"]
        for statement in retention["contradicted"]:
            lines.extend(_wrapped("  contradicts the user's earlier message: ", f"\"{statement}\"", 4))
        if retention["reason"]:
            lines.extend(_wrapped("  knowledge retention: ", retention["reason"], 4))
    return [line.rstrip() for line in lines] or ["  none stored"]


def _is_turn(item: dict[str, Any]) -> bool:
    from .transcript import turn_of

    return turn_of(item) is not None


def item_lines(detail: dict[str, Any]) -> list[str]:
    """`crucible show RUN --item ID`: the item, its ranking with grades, its metrics and its evidence (a turn of a
    golden conversation: and the conversation's transcript); a conversation's id: its transcript."""
    from .transcript import transcript_lines

    if "itemId" not in detail:  # a golden conversation, named by its id
        return [f"run {detail['runId']}", *transcript_lines(detail["conversation"], WIDTH)]
    k = detail["k"]
    about = ", ".join(part for part in (detail["kind"], detail["questionType"] and f"questionType {detail['questionType']}") if part)
    lines = [f"item {detail['itemId']} of run {detail['runId']} ({about})"]
    lines.extend(_wrapped("question", detail["question"]))
    if detail["reference"]:
        lines.extend(_wrapped("reference", detail["reference"]))
    lines.extend(_wrapped("answer", detail["answer"] if detail["answer"] is not None else f"(none: {_no_answer(detail)})"))
    lines.extend(_wrapped("outcome", _outcome_text(detail)))
    if detail["guardrail"]:
        lines.extend(_wrapped("guardrail", _guardrail_text(detail["guardrail"])))
    lines.extend(_wrapped("failed", ", ".join(detail["failedBecause"]) if detail["failedBecause"] else "no"))
    for attempt in detail.get("attempts") or []:  # pytest ran the item again (pytest-rerunfailures)
        why = attempt["error"] or attempt["failure"] or ""
        text = f"{attempt['outcome']}" + (f" ({attempt['errorClass']})" if attempt["errorClass"] else "") + (f": {why}" if why else "")
        lines.extend(_wrapped(f"attempt {attempt['attempt']}", f"{text}; rerun by pytest, the result above is the last attempt"))
    count = len(detail['retrieved'])
    lines.append(f"retrieved ({count} chunk{'s' if count != 1 else ''} in rank order; relevant = grade {RELEVANCE_LEVEL} or more; "
                 f"K = {k}):")
    lines.extend(ranking_lines(detail["retrieved"], k))
    missed = detail["relevantNotRetrieved"]
    if missed:
        lines.extend(_wrapped(f"  relevant, not in the top {k}: ", ", ".join(
            f"{entry['unit']} (grade {entry['grade']}, {entry['gradeSource']})" for entry in missed), 4))
    if detail.get("tools"):
        lines.extend(tool_lines(detail["tools"]))
    lines.append("metrics:")
    lines.extend(metric_lines(detail["metrics"], k) or ["  none (the pipeline errored, or the item was not scored)"])
    lines.append("evidence:")
    lines.extend(evidence_lines(detail["evidence"]))
    if detail.get("conversation"):
        lines.extend(transcript_lines(detail["conversation"], WIDTH, current=detail["itemId"]))
    return lines


# -- many items: --failed, --class -------------------------------------------------------------------
def check_error_class(name: str) -> str:
    """An error class named on the command line (any case, - for _); ValueError naming the valid ones."""
    from ..metrics.errors import ERROR_CLASSES

    text = name.strip().lower().replace("-", "_")
    if text in ERROR_CLASSES:
        return text
    close = difflib.get_close_matches(text, ERROR_CLASSES, n=2, cutoff=0.6)
    raise ValueError(f"unknown error class '{name}'\nHINT: " + (f"did you mean {', '.join(close)}? " if close else "")
                     + f"the error classes are {', '.join(ERROR_CLASSES)}")


def listed_items(items: RunItems, *, failed: bool = False, error_class: str | None = None) -> dict[str, Any]:
    """The items that failed (``failed``), of one error class, or both: what `crucible show RUN --failed
    / --class CLASS --json` prints, one row per item in id order."""
    chosen = []
    for item_id in sorted(items.rows):
        row = items.rows[item_id]
        metrics = items.item_metrics(item_id)
        reasons = failed_because(row, metrics)
        if (failed and not reasons) or (error_class is not None and row.get("error_class") != error_class):
            continue
        chosen.append({"itemId": item_id, "kind": (items.golden.get(item_id) or {}).get("kind") or "retrieval",
                       "outcome": row.get("outcome") or "", "errorClass": row.get("error_class"),
                       "cragGrade": row.get("crag_grade"), "failedBecause": reasons, "metrics": metrics})
    return {"runId": items.run_id, "k": items.k, "nItems": len(items.rows),
            "filter": {"failed": failed, "errorClass": error_class}, "n": len(chosen), "items": chosen}


def listing_lines(listing: dict[str, Any]) -> list[str]:
    """One compact line per listed item: id, outcome, error class, the headline metrics, a guardrail miss."""
    from ..metrics import display_name

    chosen, k, run_id = listing["items"], listing["k"], listing["runId"]
    what = []
    if listing["filter"]["failed"]:
        what.append("failed")
    if listing["filter"]["errorClass"]:
        what.append(f"of error class {listing['filter']['errorClass']}")
    head = f"run {run_id}: {len(chosen)} of {listing['nItems']} items {' and '.join(what)}"
    if listing["filter"]["failed"]:
        head += f" ({FAILED_MEANING})"
    lines = textwrap.wrap(head, width=WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    if not chosen:
        return lines
    columns = [name for name in LISTED_METRICS if any(name in entry["metrics"] for entry in chosen)]
    labels = [display_name(name, k) for name in columns]
    id_width = max(len("item"), *(len(entry["itemId"]) for entry in chosen))
    outcome_width = max(len("outcome"), *(len(entry["outcome"]) for entry in chosen))
    class_width = max(len("error class"), *(len(entry["errorClass"] or "-") for entry in chosen))
    lines.append(f"  {'item':<{id_width}}  {'outcome':<{outcome_width}}  {'error class':<{class_width}}"
                 + "".join(f"  {label:>{max(7, len(label))}}" for label in labels))
    for entry in chosen:
        values = "".join(f"  {_num(entry['metrics'].get(name), 3):>{max(7, len(label))}}" for name, label in zip(columns, labels))
        shown = {entry["errorClass"], f"test {entry['outcome']}"}
        extra = [reason for reason in entry["failedBecause"] if reason not in shown]
        lines.append(f"  {entry['itemId']:<{id_width}}  {entry['outcome']:<{outcome_width}}  {entry['errorClass'] or '-':<{class_width}}"
                     f"{values}" + (f"  ({', '.join(extra)})" if extra else ""))
    lines.append(f"one item whole: crucible show {run_id} --item ID")
    return lines


# -- one item, two runs: compare --item --------------------------------------------------------------
def item_change(a: RunItems, b: RunItems, item_id: str) -> dict[str, Any]:
    """One item in runs a and b: what `crucible compare A B --item ID --json` prints. An item only one run
    holds is said so (``inA``/``inB``) with that run's view of it; an item neither holds is :class:`UnknownItem`."""
    in_a, in_b = item_id in a.rows, item_id in b.rows
    if not (in_a or in_b):
        raise unknown_item(item_id, [a.run_id, b.run_id], [*a.rows, *b.rows])
    document: dict[str, Any] = {"a": a.run_id, "b": b.run_id, "itemId": item_id, "inA": in_a, "inB": in_b}
    if not (in_a and in_b):
        document["item"] = item_detail(a if in_a else b, item_id)
        return document
    da, db = item_detail(a, item_id), item_detail(b, item_id)
    metrics = {}
    from ..metrics import ordered_metrics

    for name in ordered_metrics(set(da["metrics"]) | set(db["metrics"])):
        va, vb = da["metrics"].get(name), db["metrics"].get(name)
        metrics[name] = {"a": va, "b": vb, "delta": vb - va if va is not None and vb is not None else None}
    top_a = {_chunk_key(chunk) for chunk in da["retrieved"][:da["k"]]}
    top_b = {_chunk_key(chunk) for chunk in db["retrieved"][:db["k"]]}
    rank_a: dict[str, int] = {}
    for chunk in da["retrieved"]:
        rank_a.setdefault(_chunk_key(chunk), chunk["rank"])

    def side(chunks: list[dict[str, Any]], k: int, other_top: set[str], mark: str) -> list[dict[str, Any]]:
        return [{key: chunk[key] for key in ("rank", "chunkId", "docId", "score", "grade", "gradeSource", "relevant")}
                | {mark: _chunk_key(chunk) not in other_top} for chunk in chunks[:k]]

    document.update({
        "question": {"a": da["question"], "b": db["question"]}, "kind": {"a": da["kind"], "b": db["kind"]},
        "answer": {"a": da["answer"], "b": db["answer"], "changed": da["answer"] != db["answer"]},
        "outcome": {"a": da["outcome"], "b": db["outcome"]}, "errorClass": {"a": da["errorClass"], "b": db["errorClass"]},
        "cragGrade": {"a": da["cragGrade"], "b": db["cragGrade"]},
        "failedBecause": {"a": da["failedBecause"], "b": db["failedBecause"]},
        "metrics": metrics, "k": {"a": da["k"], "b": db["k"]},
        "retrieved": {"a": side(da["retrieved"], da["k"], top_b, "leftTopK"),
                      "b": [entry | {"rankInA": rank_a.get(_chunk_key(chunk))}
                            for entry, chunk in zip(side(db["retrieved"], db["k"], top_a, "enteredTopK"), db["retrieved"])],
                      "entered": sorted(top_b - top_a), "left": sorted(top_a - top_b)},
    })
    return document


def _side_by_side(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> list[str]:
    def cell(chunk: dict[str, Any] | None, mark_key: str, mark: str) -> tuple[str, str]:
        if chunk is None:
            return "", ""
        grade = "-" if chunk["grade"] is None else str(chunk["grade"])
        return (chunk["chunkId"] or f"doc:{chunk['docId']}") + (f" {mark}" if chunk[mark_key] else ""), grade

    rows = [(cell(left[i] if i < len(left) else None, "leftTopK", "-"), cell(right[i] if i < len(right) else None, "enteredTopK", "+"))
            for i in range(max(len(left), len(right)))]
    width = min(40, max([len("a")] + [len(a[0]) for a, _ in rows]))
    lines = [f"  {'rank':>4}  {'a':<{width}}  {'grade':>5}  {'b':<{width}}  {'grade':>5}"]
    for rank, ((name_a, grade_a), (name_b, grade_b)) in enumerate(rows, start=1):
        lines.append(f"  {rank:>4}  {_excerpt(name_a, width):<{width}}  {grade_a:>5}  {_excerpt(name_b, width):<{width}}  {grade_b:>5}".rstrip())
    return lines


def change_lines(change: dict[str, Any]) -> list[str]:
    """`crucible compare A B --item ID`: the item in both runs, side by side."""
    from ..metrics import display_name

    item_id, a, b = change["itemId"], change["a"], change["b"]
    if not (change["inA"] and change["inB"]):
        present, absent = ("a", "b") if change["inA"] else ("b", "a")
        lines = textwrap.wrap(f"item {item_id} is only in run {present} ({change[present]}): run {absent} ({change[absent]}) "
                              "has no result for it, so there is nothing to compare. The item in the run that has it:",
                              width=WIDTH, break_on_hyphens=False)
        return lines + item_lines(change["item"])
    lines = [f"item {item_id}: run a {a} -> run b {b}"]
    question = change["question"]
    if question["a"] == question["b"]:
        lines.extend(_wrapped("question", question["b"]))
    else:  # the golden item was edited between the runs
        lines.extend(_wrapped("question a", question["a"]) + _wrapped("question b", question["b"]))
    answer = change["answer"]
    if not answer["changed"]:
        lines.extend(_wrapped("answer", f"(the same in both) {answer['b'] if answer['b'] is not None else '(none)'}"))
    else:
        lines.extend(_wrapped("answer a", answer["a"] if answer["a"] is not None else "(none)"))
        lines.extend(_wrapped("answer b", answer["b"] if answer["b"] is not None else "(none)"))

    def state(run: str) -> str:
        crag, error_class = change["cragGrade"][run], change["errorClass"][run]
        extra = [reason for reason in change["failedBecause"][run] if reason not in (error_class, f"test {change['outcome'][run]}")]
        return ", ".join([change["outcome"][run] or "-", error_class or "-", *([f"CRAG {crag}"] if crag else []), *extra])

    line = f"outcome    a {state('a')}  ->  b {state('b')}" + ("  (unchanged)" if state("a") == state("b") else "")
    lines.extend([line] if len(line) <= WIDTH else [f"outcome a  {state('a')}", f"outcome b  {state('b')}"])
    k = change["k"]
    lines.append("metrics:")
    if change["metrics"]:
        lines.append(f"  {'metric':<22} {'a':>8} {'b':>8} {'delta':>8}")
        for name, entry in change["metrics"].items():
            delta = f"{entry['delta']:+8.4f}" if entry["delta"] is not None else f"{'-':>8}"
            lines.append(f"  {display_name(name, k['b']):<22} {_num(entry['a']):>8} {_num(entry['b']):>8} {delta}")
    else:
        lines.append("  none in either run")
    top = f"top {k['a']}" if k["a"] == k["b"] else f"top {k['a']} in a, {k['b']} in b"
    retrieved = change["retrieved"]
    lines.append(f"retrieved ({top}; - left the top K in b, + entered it; grade: effective, - unjudged):")
    lines.extend(_side_by_side(retrieved["a"], retrieved["b"]))
    if not retrieved["entered"] and not retrieved["left"]:
        moved = any(entry["rankInA"] != entry["rank"] for entry in retrieved["b"])
        lines.append("  the same chunks in the top K" + (", reordered" if moved else ", in the same order"))
    return lines
