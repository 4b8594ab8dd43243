"""Repeats end to end: --crucible-repeat calls the pipeline N times per item, keeps every repeat, averages
the item's metrics over them, names the flaky items, and applies crucible_repeat_pass in strict mode;
--crucible-judge-repeat measures the judge's self-agreement."""

from __future__ import annotations

import json
import math

import pytest
from helpers import db_rows, write_project

ITEMS = [{"id": f"q-{i}", "question": f"Return window {i}?", "reference": "Within 30 days.",
          "citations": [{"docId": "returns", "chunkId": "returns#p1"}]} for i in range(6)]

# Call n of an item (0, 1, 2, ...): q-1 misses its citation on every call but the last of three,
# q-2 raises on its second call; every answer is one word longer than the one before.
CONFTEST = '''
import itertools
import pytest
import pytest_crucible as crucible

CALLS = {}

@crucible.metric("answerWords", better="lower")
def answer_words(item, result, *, config):
    return len(result.answer.split())

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = CALLS[item.id] = CALLS.get(item.id, -1) + 1
        if item.id == "q-2" and n == 1 and config.get("raise", False):
            raise RuntimeError("the model timed out")
        cited = [{"chunk_id": "returns#p1", "doc_id": "returns", "text": "You can return it within 30 days."}]
        other = [{"chunk_id": "ship#p1", "doc_id": "ship", "text": "Bikes ship in five days."}]
        retrieved = other if item.id == "q-1" and n < 2 else cited
        return {"answer": "You can return it within 30 days" + " indeed" * n + " [S1].", "retrieved": retrieved}
    return pipeline
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_mode = component", configs={"raising.json": {"raise": True}})


def test_every_repeat_is_kept_and_the_item_value_is_their_mean(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-repeat=3", "--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.OK
    assert db_rows(project, "SELECT COUNT(*), COUNT(DISTINCT item_id) FROM item_repeats") == [(18, 6)]
    words = json.loads(db_rows(project, "SELECT metrics FROM item_repeats WHERE item_id = 'q-0' ORDER BY repeat")[0][0])
    assert words["answerWords"] == 8
    # 8, 9 and 10 words: the item's value is 9; recall 0, 0, 1 for q-1: 1/3.
    assert db_rows(project, "SELECT value FROM item_metrics WHERE item_id = 'q-0' AND metric = 'answerWords'") == [(9.0,)]
    [(recall,)] = db_rows(project, "SELECT value FROM item_metrics WHERE item_id = 'q-1' AND metric = 'recallAtK'")
    assert recall == pytest.approx(1 / 3)
    assert db_rows(project, "SELECT repeats FROM runs") == [(3,)]
    result.stdout.fnmatch_lines(["repeats 3 per item (item values are their means): 1 flaky item (q-1 1/3 passed)",
                                 "  within-item sd: recall@10 0.0962, precision@10 0.0096, *", "    answerWords 1.0000"])


def test_strict_mode_needs_the_share_of_repeats_crucible_repeat_pass_asks_for(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-repeat=3", "--crucible-outcome=strict")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines([
        "golden item q-1: 2 of 3 repeats failed (crucible_repeat_pass = 1 needs 3 to pass)",
        "repeat 1: retrieval_miss: *", "repeat 2: retrieval_miss: *"])
    assert project.runpytest("--crucible-repeat=3", "--crucible-outcome=strict", "-o", "crucible_repeat_pass=0.33").ret == pytest.ExitCode.OK
    assert project.runpytest("--crucible-repeat=3", "--crucible-outcome=strict", "-o", "crucible_repeat_pass=0.34").ret == 1


def test_a_pipeline_error_on_any_repeat_is_the_item_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-repeat=3", "--crucible-outcome=record", "--crucible-config=raising.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: the model timed out*"])
    outcomes = db_rows(project, "SELECT repeat, outcome FROM item_repeats WHERE item_id = 'q-2' ORDER BY repeat")
    assert outcomes == [(0, "passed"), (1, "error"), (2, "passed")]


def test_the_judge_repeat_reports_self_agreement(project: pytest.Pytester) -> None:
    result = project.runpytest("--crucible-mode=system", "--crucible-outcome=record", "--crucible-judge=lexical",
                               "--crucible-judge-repeat=2")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["  self-agreement over 2 judgings: claims 1.00 (n *), correctness 1.00 (n *),*"])
    [(stats,)] = db_rows(project, "SELECT judge_stats FROM runs")
    agreement = json.loads(stats)["selfAgreement"]
    assert agreement["judgings"] == 2 and all(agreed == total > 0 for agreed, total in agreement["kinds"].values())


@pytest.mark.parametrize(("args", "expected"), [
    (["--crucible-repeat=0"], "ERROR: --crucible-repeat=0: expected a positive integer"),
    (["--crucible-repeat=2", "--crucible-judge-batch"], "ERROR: --crucible-repeat / --crucible-judge-repeat cannot be combined with --crucible-judge-batch*"),
    (["-o", "crucible_repeat_pass=1.5"], "ERROR: ini option crucible_repeat_pass = '1.5': expected a share in (0, 1]"),
])
def test_bad_repeat_options_are_usage_errors(project: pytest.Pytester, args: list[str], expected: str) -> None:
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_the_html_report_shows_the_repeats(project: pytest.Pytester) -> None:
    assert project.runpytest("--crucible-repeat=3", "--crucible-outcome=record", "--crucible-html=report.html").ret == 0
    page = (project.path / "report.html").read_text()
    from pytest_crucible.report.item_data import decode_items

    details = decode_items(page)["detail"]  # the page's script draws "repeats (3; the item's values are their means)"
    assert details and all(len(detail.get("repeats", [])) == 3 for detail in details)


def test_the_cost_estimate_multiplies_by_the_repeats() -> None:
    from pathlib import Path

    from pytest_crucible.config import resolve_config
    from pytest_crucible.evaluation import estimate_cost
    from pytest_crucible.golden_set.schema import GoldenItem
    from pytest_crucible.settings import Settings

    class Judge:
        model = "claude-haiku-5-5"

        def cost(self, tokens_in, tokens_out, *, batch, requests=None):
            from pytest_crucible.judge.prices import cost_usd

            return cost_usd(self.model, tokens_in, tokens_out, batch=batch, requests=requests)

    items = [GoldenItem.model_validate(item) for item in ITEMS]
    base = Settings(params={}, resolved=resolve_config({}), config_hash="h", config_path=None, db_path=Path("x.db"))
    once = estimate_cost(items, base, Judge())
    from dataclasses import replace

    six = estimate_cost(items, replace(base, repeat=3, judge_repeat=2), Judge())
    assert six.requests == 6 * once.requests and six.cost_usd == pytest.approx(6 * once.cost_usd)


def test_pass_rates_and_variance_components_plan_the_repeats() -> None:
    from pytest_crucible.evaluation.repeats import pass_rates, variance_components

    # 4 items x 3 repeats: a and b always pass, c passes once, d never.
    outcomes = {"a": "PPP", "b": "PPP", "c": "PFF", "d": "FFF"}
    rows = [{"item_id": item, "repeat": r, "outcome": "passed" if o == "P" else "failed", "metrics": {}}
            for item, pattern in outcomes.items() for r, o in enumerate(pattern)]
    assert pass_rates(rows) == [(3, 0.5, 0.75, 4)]  # pass^3: a, b; pass@3: a, b, c
    assert pass_rates([]) == []
    # an item stopped after 2 of its 3 repeats is not counted in pass^3: it has its own pass^2
    stopped = rows + [{"item_id": "e", "repeat": r, "outcome": "passed", "metrics": {}} for r in range(2)]
    assert pass_rates(stopped) == [(3, 0.5, 0.75, 4), (2, 1.0, 1.0, 1)]

    # Items far apart with little wiggle: the items' own spread dominates, repeats cannot halve the noise.
    steady = [{"item_id": f"i{i}", "outcome": "passed", "metrics": {"ndcgAt10": i / 10 + (0.01 if r else -0.01)}}
              for i in range(10) for r in range(2)]
    between, within, needed = variance_components(steady, 2)["ndcgAt10"]
    assert within == pytest.approx(0.0002) and between > 100 * within and needed is None
    # Items alike, calls noisy: within-item noise dominates; halving the variance of the mean takes
    # within / (total / 2 - between) repeats.
    noisy = [{"item_id": f"i{i}", "outcome": "passed", "metrics": {"faithfulness": (0.2, 0.8, 0.5)[r] + 0.001 * i}}
             for i in range(10) for r in range(3)]
    between, within, needed = variance_components(noisy, 3)["faithfulness"]
    total = between + within / 3
    assert within == pytest.approx(0.09) and needed == math.ceil(within / (total / 2 - between)) and needed >= 6
