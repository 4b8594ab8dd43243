"""The verdict as Markdown, as GitHub workflow commands and as CSV: what a reviewer reads on a pull request,
and what no golden text can break or inject."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest

from pytest_crucible.report import github, markdown, tables
from pytest_crucible.verdict.gate import GateSettings, decide
from pytest_crucible.verdict.runs import RunData

ITEMS = [f"q{i:02d}" for i in range(16)]
BASE = dict(zip(ITEMS, [0.9, 0.8, 0.85, 0.7, 0.95, 0.6, 0.75, 0.8, 0.9, 0.65, 0.7, 0.85, 0.8, 0.9, 0.75, 0.7]))
HOSTILE = "What is `rm -rf` | <script>alert(1)</script> **bold** [link](http://x) ::error::owned\n=SUM(A1)"


def run(run_id: str, metrics: dict[str, dict[str, float]], questions: dict[str, str] | None = None, **row) -> RunData:
    items = sorted({item for values in metrics.values() for item in values})
    golden = [{"id": item, "question": (questions or {}).get(item, f"question {item}")} for item in items]
    return RunData(run={"id": run_id, "config_hash": "h-" + run_id, "status": "complete",
                        "resolved": json.dumps(row.pop("resolved", {"retrievalLimit": 10})), **row},
                   metrics=metrics, item_ids=items, golden=golden)


def regressed_pair(questions: dict[str, str] | None = None) -> tuple[RunData, RunData]:
    worse = {item: value - 0.3 - 0.01 * (i % 3) for i, (item, value) in enumerate(BASE.items())}
    steady = dict.fromkeys(ITEMS, 0.5)
    baseline = run("01BASE", {"ndcgAt10": BASE, "mrr": steady}, questions)  # one golden set: no item changed
    current = run("01CAND", {"ndcgAt10": worse, "mrr": steady}, questions, resolved={"retrievalLimit": 20})
    return baseline, current


def failing_result(questions: dict[str, str] | None = None):
    baseline, current = regressed_pair(questions)
    return decide(current, baseline, GateSettings(baseline="01BASE")), baseline, current


def test_a_failed_gate_reads_verdict_first_then_a_table_of_every_metric() -> None:
    result, baseline, current = failing_result()
    assert result.verdict == "failed"
    text = markdown.gate_markdown(result, changed=markdown.changed_items(result.comparison, baseline, current), workspace="shop")
    lines = text.splitlines()
    assert lines[0] == "<!-- crucible:shop -->"
    assert lines[1] == "**GATE FAILED**: 1 of 2 gated metrics regressed"
    header = lines.index("| metric | baseline | this run | delta | 95% CI | p | verdict |")
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]] for line in lines[header + 2:header + 4]}
    assert set(rows) == {"ndcgAt10", "mrr"}
    assert rows["ndcgAt10"][-1] == "**regressed**" and rows["ndcgAt10"][2].startswith("-0.3")
    assert rows["mrr"][-1].startswith("ns")
    assert "- retrievalLimit: 10 → 20" in text
    assert "<summary>Items that changed most (16)</summary>" in text and text.rstrip().endswith("</details>")


def test_a_passed_and_a_refused_gate_say_so_on_the_first_line() -> None:
    baseline = run("01BASE", {"ndcgAt10": BASE})
    same = decide(run("01CAND", {"ndcgAt10": dict(BASE)}), baseline, GateSettings(baseline="01BASE"))
    assert markdown.gate_markdown(same).splitlines()[0] == "**gate passed: no significant regression**"
    few = {item: BASE[item] for item in ITEMS[:3]}
    refused = decide(run("01CAND", {"ndcgAt10": few}), run("01BASE", {"ndcgAt10": few}), GateSettings(baseline="01BASE"))
    assert refused.verdict == "refused"
    first = markdown.gate_markdown(refused).splitlines()[0]
    assert first.startswith("**GATE REFUSED**: ") and "pairs" in first


def test_hostile_golden_text_is_shown_as_text_and_never_as_markup() -> None:
    result, baseline, current = failing_result(dict.fromkeys(ITEMS, HOSTILE))
    text = markdown.gate_markdown(result, changed=markdown.changed_items(result.comparison, baseline, current))
    assert "<script>" not in text and "&lt;script&gt;" in text
    rows = [line for line in text.splitlines() if line.startswith("| q")]
    assert rows, text
    for row in rows:  # the question's pipe never adds a column; its backticks never open a code span
        assert len(re.findall(r"(?<!\\)\|", row)) == 7, row
        assert "`" not in row.replace("\\`", "")
        assert "[link](" not in row.replace("\\[link\\](", "") and "\\[link\\](" in row
    assert "\n=SUM" not in text  # the question's newline is a space: one row per item


def test_the_comment_stays_under_githubs_limit_and_keeps_the_verdict() -> None:
    long = dict.fromkeys(ITEMS, "why " * 5000)
    result, baseline, current = failing_result(long)
    changed = markdown.changed_items(result.comparison, baseline, current) * 400
    text = markdown.gate_markdown(result, changed=changed, limit=20_000)
    assert len(text) <= 20_000
    assert text.splitlines()[0] == "**GATE FAILED**: 1 of 2 gated metrics regressed"
    assert "the first" in text  # it says that more items changed than are shown


def test_workflow_command_values_are_escaped_as_github_documents() -> None:
    assert github.escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert github.escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    line = github.command("error", "bad\n::error::injected", title="t: x, y", file="golden.jsonl", line=7)
    assert line == "::error title=t%3A x%2C y,file=golden.jsonl,line=7::bad%0A::error::injected"
    assert "\n" not in line  # the injected command stays inside the message, on the same line


def test_a_regression_becomes_one_error_annotation_per_regressed_metric() -> None:
    result, _, _ = failing_result()
    annotations = github.gate_annotations(result)
    errors = [a for a in annotations if a.startswith("::error")]
    assert len(errors) == 1
    assert errors == ["::error title=crucible gate::ndcgAt10 regressed 0.787 -> 0.478 (p < 0.001)"]


def test_a_refusal_is_a_warning_annotation() -> None:
    few = {item: BASE[item] for item in ITEMS[:3]}
    refused = decide(run("01CAND", {"ndcgAt10": few}), run("01BASE", {"ndcgAt10": few}), GateSettings(baseline="01BASE"))
    annotations = github.gate_annotations(refused)
    assert annotations and annotations[0].startswith("::warning title=crucible gate::") and "%0AHINT" in annotations[0]


def test_the_step_summary_is_appended_and_an_unwritable_path_is_a_warning(tmp_path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("# earlier step\n")
    assert github.append_step_summary(str(path), "**gate passed**\n") is None
    assert path.read_text() == "# earlier step\n\n**gate passed**\n"
    warning = github.append_step_summary(str(tmp_path / "missing" / "summary.md"), "x")
    assert warning is not None and "GITHUB_STEP_SUMMARY" in warning


@pytest.mark.parametrize("value", ["=HYPERLINK(\"http://x\")", "+1", "-cmd", "@SUM(A1)", "\tx"])
def test_a_text_cell_is_never_a_formula(value: str) -> None:
    parsed = list(csv.reader(io.StringIO(tables.to_csv(["question"], [[value]]))))
    assert parsed[1] == ["'" + value]


def test_csv_is_rfc_4180_and_numbers_stay_numbers() -> None:
    document = tables.to_csv(["id", "question", "score"], [["q1", 'say "hi", then\nstop', -0.25], ["q2", None, 1]])
    assert document.endswith("\r\n") and document.count("\r\n") == 3
    assert list(csv.reader(io.StringIO(document))) == [["id", "question", "score"], ["q1", 'say "hi", then\nstop', "-0.25"],
                                                      ["q2", "", "1"]]


def test_a_comparison_table_has_both_values_for_each_item_and_metric() -> None:
    result, baseline, current = failing_result()
    header, rows = tables.comparison_table(result.comparison, baseline, current)
    assert header == ["item", "kind", "metric", "baseline", "this_run", "delta", "worse"]
    assert len(rows) == 2 * len(ITEMS)
    first = next(row for row in rows if row[0] == "q00" and row[2] == "ndcgAt10")
    assert first[3] == pytest.approx(0.9) and first[4] == pytest.approx(0.6) and first[6] is True


# -- the whole comment, as a reviewer reads it, against a file kept in the repository -----------------------
GOLDEN_MARKDOWN = Path(__file__).parent / "data" / "markdown"


def _comparisons() -> dict[str, str]:
    """The four comments a pull request can get: a failed, a passed, a refused and a subset comparison."""
    from pytest_crucible.verdict.gate import decide_stored

    settings = GateSettings(baseline="01BASE")
    result, baseline, current = failing_result({"q03": HOSTILE})
    failed = markdown.gate_markdown(result, changed=markdown.changed_items(result.comparison, baseline, current),
                                    workspace="shop")
    better = {item: min(1.0, value + 0.01 * (i % 2)) for i, (item, value) in enumerate(BASE.items())}
    base = run("01BASE", {"ndcgAt10": BASE})
    passed_result = decide(run("01CAND", {"ndcgAt10": better}), base, settings)
    passed = markdown.gate_markdown(passed_result, workspace="shop",
                                    changed=markdown.changed_items(passed_result.comparison, base, run("01CAND", {"ndcgAt10": better})))
    few = {item: BASE[item] for item in ITEMS[:3]}
    refused = markdown.gate_markdown(decide(run("01CAND", {"ndcgAt10": few}), run("01BASE", {"ndcgAt10": few}), settings),
                                     workspace="shop")
    chosen = run("01CAND", {"ndcgAt10": {item: BASE[item] for item in ITEMS[:2]}},
                 selection=json.dumps({"ran": 2, "held": len(ITEMS), "by": "-k q00 or q01"}))
    subset = markdown.gate_markdown(decide_stored(None, chosen, base, settings), workspace="shop")
    return {"failed": failed, "passed": passed, "refused": refused, "subset": subset}


@pytest.mark.parametrize("name", ["failed", "passed", "refused", "subset"])
def test_the_comment_is_the_one_kept_in_the_repository(name: str) -> None:
    """tests/data/markdown/NAME.md is the comment exactly: a change to any line of it is a change reviewers see.
    CRUCIBLE_REWRITE_GOLDEN=1 rewrites the files (then read the diff before committing it)."""
    text = _comparisons()[name]
    path = GOLDEN_MARKDOWN / f"{name}.md"
    if os.environ.get("CRUCIBLE_REWRITE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (CRUCIBLE_REWRITE_GOLDEN=1 rewrites it)"
