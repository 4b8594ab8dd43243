"""Anthropic prompt caching: the Claude judge marks each request's stable prefix (the system prompt, a rubric's
own text, few-shot examples) with ``cache_control``, and the run's cost counts cache writes and reads at the
price table's rates. Through the real anthropic SDK against the Messages API double, which reports usage as
the API does (``token_usage = "counted"``: writes, reads within the lifetime, nothing below the minimum)."""

from __future__ import annotations

import json

import pytest
from helpers import crucible_cli, db_rows, point_anthropic_at, return_window_items, returns_conftest, write_project
from mock_anthropic import MockAnthropic, count_tokens, prompt_blocks

from pytest_crucible.judge.anthropic_judge import AnthropicJudge
from pytest_crucible.judge.prices import cost_usd
from pytest_crucible.judge.prompts import render_prompt
from pytest_crucible.judge.types import CorrectnessRequest, RubricRequest

MODEL = "claude-haiku-5-5"


def judge_for(mock: MockAnthropic, **kwargs) -> AnthropicJudge:
    kwargs.setdefault("max_concurrency", 1)
    return AnthropicJudge(MODEL, api_key="sk-ant-test-cache-0000", base_url=mock.base_url, max_retries=0,
                          timeout=5.0, poll_interval=0.01, **kwargs)


def grading(i: int) -> CorrectnessRequest:
    return CorrectnessRequest(question=f"How long is the return window of product {i}?", answer="30 days.",
                              reference="The return window is 30 days.", assertions=("30 days",))


def rubric(i: int) -> RubricRequest:
    return RubricRequest(name="politeness", criteria="The answer is courteous and does not blame the customer.",
                         steps=("Read the answer.", "Decide whether it is courteous."),
                         question=f"Where is parcel {i}?", answer="It is on its way.")


def counted(mock: MockAnthropic, minimum: int) -> None:
    mock.token_usage = "counted"
    mock.cache_min_tokens[MODEL] = minimum


def text_of(blocks) -> str:
    return "".join(block["text"] for block in blocks)


def test_the_stable_prefix_alone_carries_cache_control_and_the_text_is_unchanged(mock_anthropic) -> None:
    judge = judge_for(mock_anthropic)
    try:
        judge.judge([grading(1), rubric(1)])
    finally:
        judge.close()
    plain, graded = mock_anthropic.message_bodies()
    # a grading request: the system prompt is the prefix, the user message has no marker
    assert [block.get("cache_control") for block in plain["system"]] == [{"type": "ephemeral"}]
    assert not any("cache_control" in block for block in plain["messages"][0]["content"])
    assert (text_of(plain["system"]), text_of(plain["messages"][0]["content"])) == render_prompt(grading(1))
    # a rubric request: the rubric's own text ends the prefix; the question and answer come after it
    assert not any("cache_control" in block for block in graded["system"])
    head, item = graded["messages"][0]["content"]
    assert head["cache_control"] == {"type": "ephemeral"} and "cache_control" not in item
    assert head["text"].startswith("Rubric: politeness") and "Where is parcel" not in head["text"]
    assert item["text"].startswith("<question>\nWhere is parcel 1?")
    assert (text_of(graded["system"]), head["text"] + item["text"]) == render_prompt(rubric(1), "rubric-v1")
    assert all(sum("cache_control" in block for block in prompt_blocks(body)) == 1 for body in (plain, graded))


def test_a_second_request_of_a_kind_is_billed_as_a_cache_read(mock_anthropic) -> None:
    counted(mock_anthropic, 200)
    judge = judge_for(mock_anthropic)
    try:
        judge.judge([grading(1)])
        judge.judge([grading(2), grading(3)])
        usage = judge.usage()
    finally:
        judge.close()
    first, second, third = mock_anthropic.usages
    prefix = count_tokens(text_of(mock_anthropic.message_bodies()[0]["system"]))
    assert (first["cache_creation_input_tokens"], first["cache_read_input_tokens"]) == (prefix, 0)
    assert (second["cache_creation_input_tokens"], second["cache_read_input_tokens"]) == (0, prefix)
    assert (third["cache_creation_input_tokens"], third["cache_read_input_tokens"]) == (0, prefix)
    assert usage.cache_write_tokens == prefix and usage.cache_read_tokens == 2 * prefix
    expected = sum(cost_usd(MODEL, u["input_tokens"], u["output_tokens"], requests=1,
                            cache_read_tokens=u["cache_read_input_tokens"],
                            cache_write_tokens=u["cache_creation_input_tokens"]) for u in mock_anthropic.usages)
    assert usage.cost_usd == pytest.approx(expected)
    uncached = sum(cost_usd(MODEL, u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"],
                            u["output_tokens"], requests=1) for u in mock_anthropic.usages)
    assert usage.cost_usd < uncached


def test_a_prefix_below_the_minimum_is_neither_written_nor_read(mock_anthropic) -> None:
    counted(mock_anthropic, 100_000)
    judge = judge_for(mock_anthropic)
    try:
        judge.judge([grading(1), grading(2)])
    finally:
        judge.close()
    assert all(u["cache_creation_input_tokens"] == u["cache_read_input_tokens"] == 0 for u in mock_anthropic.usages)
    assert mock_anthropic.cache_events["below_minimum"] == 2
    assert judge.usage().cache_read_tokens == judge.usage().cache_write_tokens == 0


def test_the_cache_lapses_after_its_lifetime_and_a_rubric_keys_its_own_prefix(mock_anthropic) -> None:
    counted(mock_anthropic, 200)
    now = [0.0]
    mock_anthropic.clock = lambda: now[0]
    judge = judge_for(mock_anthropic)
    try:
        judge.judge([rubric(1), rubric(2)])  # written, then read
        now[0] += 301  # past the 5-minute lifetime of the last read
        judge.judge([rubric(3)])  # written again
        judge.judge([grading(1)])  # another prefix: written
    finally:
        judge.close()
    reads = [u["cache_read_input_tokens"] > 0 for u in mock_anthropic.usages]
    writes = [u["cache_creation_input_tokens"] > 0 for u in mock_anthropic.usages]
    assert reads == [False, True, False, False] and writes == [True, False, True, True]


def test_batched_requests_carry_the_marker_and_are_billed_the_same_way(mock_anthropic) -> None:
    counted(mock_anthropic, 200)
    judge = judge_for(mock_anthropic, batch=True)
    try:
        verdicts = judge.judge([grading(i) for i in range(3)])
    finally:
        judge.close()
    assert all(v.grade == "perfect" for v in verdicts)
    assert all(body["system"][-1]["cache_control"] == {"type": "ephemeral"} for body in mock_anthropic.message_bodies())
    assert sorted(u["cache_read_input_tokens"] > 0 for u in mock_anthropic.usages) == [False, True, True]
    assert judge.usage().cache_read_tokens > 0


def test_the_estimate_never_counts_a_cache_read_and_prices_a_possible_write(mock_anthropic) -> None:
    counted(mock_anthropic, 200)
    requests = [grading(i) for i in range(5)] + [rubric(i) for i in range(5)]
    judge = judge_for(mock_anthropic)
    unmarked = judge_for(mock_anthropic)
    unmarked.prompt_cache = False
    try:
        estimate = judge.estimate_usd(requests)
        judge.judge(requests)
        spent = judge.usage().cost_usd
    finally:
        judge.close()
        unmarked.close()
    assert estimate is not None and estimate >= spent
    # Haiku 5.5's minimum is not in the price table: every marked prefix is priced as a cache write (1.25x input)
    assert estimate > unmarked.estimate_usd(requests)


def test_a_run_stores_and_prints_a_cost_that_counts_cache_writes_and_reads(pytester: pytest.Pytester, mock_anthropic,
                                                                           monkeypatch) -> None:
    counted(mock_anthropic, 200)
    point_anthropic_at(monkeypatch, mock_anthropic, "sk-ant-test-cache-run-0000")
    items = return_window_items("c", 4)
    conftest = returns_conftest("You can return product {item.id} within 30 days [S1].")
    project = write_project(pytester, items, conftest, ini="crucible_outcome = record\ncrucible_judge = anthropic")
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [(cost, stats)] = db_rows(project, "SELECT cost_usd, judge_stats FROM runs")
    stats = json.loads(stats)
    usages = mock_anthropic.usages
    assert stats["cacheReadTokens"] == sum(u["cache_read_input_tokens"] for u in usages) > 0
    assert stats["cacheWriteTokens"] == sum(u["cache_creation_input_tokens"] for u in usages) > 0
    expected = sum(cost_usd(MODEL, u["input_tokens"], u["output_tokens"], requests=1,
                            cache_read_tokens=u["cache_read_input_tokens"],
                            cache_write_tokens=u["cache_creation_input_tokens"]) for u in usages)
    assert cost == pytest.approx(expected)
    result.stdout.fnmatch_lines([f"*cost ${cost:.4f} (* in / * out tokens; cache {stats['cacheReadTokens']:,} read, "
                                f"{stats['cacheWriteTokens']:,} written)*"])
    # the HTML report says the same cost, cache tokens included (one text for both)
    page = project.path / "report.html"
    report = crucible_cli("report", "latest", "--db", project.path / ".crucible" / "crucible.db", "-o", page)
    assert report.ret == 0, report.stderr
    assert (f"<dt>cost</dt><dd>${cost:.4f} (" in page.read_text()
            and f"cache {stats['cacheReadTokens']:,} read, {stats['cacheWriteTokens']:,} written)" in page.read_text())
