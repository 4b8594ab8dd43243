"""OpenAIJudge through the real ``openai`` SDK against a real OpenAI-compatible HTTP double on 127.0.0.1.

Nothing here reaches anything but 127.0.0.1: every judge gets ``base_url=mock_openai.base_url`` (the one
judge built for api.openai.com is only constructed, never asked).
"""

from __future__ import annotations

import importlib.util
import json
import threading

import pytest
from mock_anthropic import Fault
from mock_openai import MockOpenAI, OpenAIRequest, openai_error
from test_judge_anthropic import ANSWERS, EXPECTED_TYPES, SAMPLE_REQUESTS, grade_by_number, relevance

from pytest_crucible.judge import prices
from pytest_crucible.judge import select as select_module
from pytest_crucible.judge.engine import JudgeEngine
from pytest_crucible.judge.model_judge import STAMP_FIELDS, schema_text, verdict_schema
from pytest_crucible.judge.openai_judge import OpenAIJudge, judge_identity
from pytest_crucible.judge.select import JudgeSetupError, parse_price, registered_judges
from pytest_crucible.judge.select import make_judge as select_judge
from pytest_crucible.judge.types import EntailmentRequest, EntailmentVerdict, JudgeFailure, RelevanceVerdict

API_KEY = "sk-proj-test-NOT-A-REAL-KEY-abcdef0123456789"
MODEL = "gpt-4.1-mini"
IDENTITY = f"openai:{MODEL}@127.0.0.1"


def make_judge(mock: MockOpenAI, model: str = MODEL, **kwargs) -> OpenAIJudge:
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("timeout", 5.0)
    kwargs.setdefault("poll_interval", 0.01)
    return OpenAIJudge(model, api_key=API_KEY, base_url=mock.base_url, **kwargs)


def chat_entries(mock: MockOpenAI) -> list[dict]:
    return [entry["body"] for entry in mock.received if entry["route"] == "chat"]


def refusal_completion(text: str = "I can't help with grading that.") -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "refusal": text},
                         "finish_reason": "stop", "logprobs": None}]}


def number_of(request: OpenAIRequest) -> int | None:
    """The ``i`` of a ``relevance(i)`` request, else None."""
    if "question number " not in request.user:
        return None
    return int(request.user.split("question number ")[1].split()[0])


# -- 1. structured output through the real SDK ---------------------------------------------------
@pytest.mark.parametrize("kind", sorted(SAMPLE_REQUESTS))
def test_each_verdict_kind_round_trips_with_a_strict_json_schema(mock_openai, kind):
    mock_openai.responder = lambda request: ANSWERS[request.kind]
    judge = make_judge(mock_openai)
    try:
        [verdict] = judge.judge([SAMPLE_REQUESTS[kind]])
    finally:
        judge.close()
    assert type(verdict) is EXPECTED_TYPES[kind]
    assert verdict.model_dump(exclude=set(STAMP_FIELDS)) == ANSWERS[kind]
    [body] = mock_openai.chat_bodies()
    assert body["model"] == MODEL
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == verdict_schema(kind)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "Judge task: " in body["messages"][0]["content"] and f"/{kind}" in body["messages"][0]["content"]
    assert not {"temperature", "top_p", "max_completion_tokens"} & set(body)
    assert judge.structured_output == "json_schema" and judge.counters() == {}


def test_all_kinds_in_one_call_come_back_in_request_order(mock_openai):
    mock_openai.responder = lambda request: ANSWERS[request.kind]
    mock_openai.response_delay = 0.01
    kinds = sorted(SAMPLE_REQUESTS) * 2
    judge = make_judge(mock_openai, max_concurrency=4)
    verdicts = judge.judge([SAMPLE_REQUESTS[k] for k in kinds])
    judge.close()
    assert [type(v) for v in verdicts] == [EXPECTED_TYPES[k] for k in kinds]
    assert mock_openai.counts["chat"] == len(kinds)
    assert mock_openai.max_in_flight <= 4


def test_request_dependent_verdicts_are_not_mixed_up(mock_openai):
    mock_openai.responder = grade_by_number
    verdicts = make_judge(mock_openai, max_concurrency=4).judge([relevance(i) for i in range(8)])
    assert [(v.grade, v.reason) for v in verdicts] == [(i % 4, f"request {i}") for i in range(8)]


def test_max_tokens_is_sent_as_max_completion_tokens(mock_openai):
    make_judge(mock_openai, max_tokens=321).judge([relevance(1)])
    [body] = mock_openai.chat_bodies()
    assert body["max_completion_tokens"] == 321 and "max_tokens" not in body


def test_entailment_of_no_claims_needs_no_call(mock_openai):
    nothing = EntailmentRequest(context=("a passage",), claims=())
    verdicts = make_judge(mock_openai).judge([nothing, relevance(1)])
    assert verdicts[0] == EntailmentVerdict(supported=[], reasons=[])
    assert isinstance(verdicts[1], RelevanceVerdict)
    assert mock_openai.counts["chat"] == 1
    assert make_judge(mock_openai, batch=True).judge([]) == []
    assert mock_openai.counts["files_create"] == 0


# -- 2. identity ----------------------------------------------------------------------------------
def test_identity_names_the_host_of_any_server_but_openais(mock_openai, monkeypatch):
    judge = make_judge(mock_openai)
    assert judge.model == IDENTITY
    assert "127.0.0.1" in judge.label and MODEL in judge.label
    assert make_judge(mock_openai, batch=True).label.endswith(", Batch API")
    assert judge_identity("gpt-4o", "https://api.openai.com/v1") == "openai:gpt-4o"
    assert judge_identity("llama3.1", "http://gpu-box:8000/v1") == "openai:llama3.1@gpu-box"
    assert judge_identity("gpt-4o", None) == "openai:gpt-4o"
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    official = OpenAIJudge("gpt-4o", api_key=API_KEY)  # constructed only: never asked
    assert official.model == "openai:gpt-4o"
    assert official.label == "gpt-4o via OpenAI API"
    assert sum(mock_openai.counts.values()) == 0


def test_engine_stamps_the_identity_and_serves_the_cache(mock_openai):
    engine = JudgeEngine(make_judge(mock_openai))
    [verdict] = engine.run([relevance(2)])
    assert (verdict.judge_model, verdict.prompt_version) == (IDENTITY, "umbrela-v1")
    assert engine.run([relevance(2)])[0].grade == verdict.grade
    assert mock_openai.counts["chat"] == 1


def test_a_plugin_can_register_a_configured_openai_judge(mock_openai):
    judge = make_judge(mock_openai)
    registered = registered_judges([judge])
    assert list(registered) == [IDENTITY]
    assert select_judge(IDENTITY, registered=registered) is judge


# -- 3. a server that takes no JSON schema: JSON mode ----------------------------------------------
def test_schema_refusal_switches_to_json_mode_once(mock_openai):
    mock_openai.schema_support = False
    requests = [relevance(i) for i in range(4)] + [SAMPLE_REQUESTS["entailment"]]
    judge = make_judge(mock_openai, max_concurrency=1)
    verdicts = judge.judge(requests)
    assert [type(v) for v in verdicts] == [RelevanceVerdict] * 4 + [EntailmentVerdict]
    assert judge.structured_output == "json_object"
    assert mock_openai.schema_rejections == 1
    bodies = chat_entries(mock_openai)
    assert len(bodies) == len(requests) + 1  # the refused request was sent again at once
    assert bodies[0]["response_format"]["type"] == "json_schema"
    assert all(b["response_format"] == {"type": "json_object"} for b in bodies[1:])
    for body in bodies[1:]:
        system = body["messages"][0]["content"]
        kind = "entailment" if "/entailment" in system else "relevance"
        assert schema_text(kind) in system and "Answer with one JSON object" in system
    assert judge.counters() == {"jsonMode": len(requests)}
    judge.judge([relevance(9)])
    assert mock_openai.schema_rejections == 1
    assert judge.counters() == {"jsonMode": len(requests) + 1}


def test_schema_refusal_with_requests_in_flight(mock_openai):
    mock_openai.schema_support = False
    mock_openai.response_delay = 0.02
    judge = make_judge(mock_openai, max_concurrency=3)
    verdicts = judge.judge([relevance(i) for i in range(9)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert 1 <= mock_openai.schema_rejections <= 3
    assert mock_openai.counts["chat"] == 9 + mock_openai.schema_rejections
    assert judge.counters()["jsonMode"] == 9



@pytest.mark.parametrize("batch", [False, True])
def test_json_mode_counts_requests_not_calls(mock_openai, batch):
    mock_openai.schema_support = False
    # In JSON mode, the first answer to each request is not JSON; the one retry is valid.
    mock_openai.rules.append(lambda request, attempt: Fault("text", body="not json")
                             if request.response_format == {"type": "json_object"} and (request.custom_id or attempt == 0) else None)
    judge = make_judge(mock_openai, max_concurrency=1, batch=batch)
    judge.structured_output = "json_object" if batch else "json_schema"  # a batch already known to need JSON mode
    verdicts = judge.judge([relevance(1), relevance(2)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert judge.counters() == {"jsonMode": 2}

def test_json_mode_through_the_engine(mock_openai):
    mock_openai.schema_support = False
    judge = make_judge(mock_openai, max_concurrency=1)
    engine = JudgeEngine(judge)
    verdicts = engine.run([relevance(i) for i in range(3)])
    assert all(isinstance(v, RelevanceVerdict) and v.judge_model == IDENTITY for v in verdicts)
    assert engine.stats.as_dict() == {"requests": 3, "cache_hits": 0, "judged": 3, "failures": 0}
    assert engine.judge.counters() == {"jsonMode": 3}
    engine.run([relevance(i) for i in range(3)])  # from the cache: nothing more judged in JSON mode
    assert engine.stats.cache_hits == 3 and engine.judge.counters() == {"jsonMode": 3}
    assert mock_openai.counts["chat"] == 4


def test_a_400_not_about_the_schema_does_not_switch_modes(mock_openai):
    mock_openai.fail_status(400, headers={}, body=openai_error("'messages' is too long", 400, param="messages"))
    judge = make_judge(mock_openai)
    [failure] = judge.judge([relevance(1)])
    assert isinstance(failure, JudgeFailure) and "HTTP 400" in failure.message and "not retried" in failure.message
    assert judge.structured_output == "json_schema" and judge.counters() == {}
    assert mock_openai.counts["chat"] == 1


# -- 4. malformed output --------------------------------------------------------------------------
def test_invalid_json_is_asked_again_once(mock_openai):
    mock_openai.reply_text("not json")
    [verdict] = make_judge(mock_openai).judge([relevance(10)])
    assert isinstance(verdict, RelevanceVerdict)
    assert mock_openai.counts["chat"] == 2


def test_invalid_json_twice_is_a_failure_naming_the_kind(mock_openai):
    mock_openai.reply_text("not json", times=2)
    [failure] = make_judge(mock_openai).judge([relevance(11)])
    assert isinstance(failure, JudgeFailure) and failure.kind == "relevance"
    assert failure.message.startswith("judge returned invalid JSON: ")
    assert "relevance request" in failure.message and "after 1 retry" in failure.message
    assert mock_openai.counts["chat"] == 2


@pytest.mark.parametrize("case", ["unexpected field", "entailment length", "wrong type"])
def test_schema_violating_json_is_a_failure(mock_openai, case):
    kind, bad, words = {
        "unexpected field": ("relevance", {"grade": 2, "reason": "x", "score": 9}, "unexpected field"),
        "entailment length": ("entailment", {"supported": [True], "reasons": ["a"]}, "'supported' entries for 3 claims"),
        "wrong type": ("usefulness", {"useful": "yes", "reason": "x"}, "does not fit the schema"),
    }[case]
    mock_openai.responder = lambda request: bad
    [failure] = make_judge(mock_openai).judge([SAMPLE_REQUESTS[kind]])
    assert isinstance(failure, JudgeFailure) and failure.kind == kind
    assert failure.message.startswith("judge returned invalid JSON: ") and words in failure.message
    assert mock_openai.counts["chat"] == 2


def test_schema_violation_then_valid(mock_openai):
    mock_openai.reply_json({"supported": [True], "reasons": ["a"]})
    [verdict] = make_judge(mock_openai).judge([SAMPLE_REQUESTS["entailment"]])
    assert isinstance(verdict, EntailmentVerdict) and len(verdict.supported) == 3


def test_refusal_is_a_failure_without_retry(mock_openai):
    mock_openai.reply_completion(refusal_completion("I can't grade that."))
    [failure] = make_judge(mock_openai).judge([relevance(13)])
    assert isinstance(failure, JudgeFailure) and "refus" in failure.message and "I can't grade that." in failure.message
    assert mock_openai.counts["chat"] == 1


def test_output_cut_off_at_the_token_limit(mock_openai):
    cut = {"choices": [{"index": 0, "message": {"role": "assistant", "content": '{"grade": 1, "rea', "refusal": None},
                        "finish_reason": "length", "logprobs": None}]}
    mock_openai.reply_completion(cut, times=2)
    [failure] = make_judge(mock_openai, max_tokens=16).judge([relevance(14)])
    assert isinstance(failure, JudgeFailure) and "token limit" in failure.message
    assert mock_openai.counts["chat"] == 2


def test_a_response_body_that_is_not_json_is_asked_again(mock_openai):
    mock_openai.reply_raw_body("<html>502 from a proxy</html>")
    [verdict] = make_judge(mock_openai).judge([relevance(12)])
    assert isinstance(verdict, RelevanceVerdict)
    assert mock_openai.counts["chat"] == 2


def test_every_kind_of_bad_reply_in_one_call_fails_only_its_request(mock_openai):
    def rule(request: OpenAIRequest, attempt: int):
        number = number_of(request)
        return {
            1: Fault("text", body="no json here"),
            2: Fault("message", body=refusal_completion()),
            3: Fault("status", status=400, body=openai_error("bad request", 400)),
            4: Fault("json", body={"grade": 9, "reason": "out of range"}),
            5: Fault("raw_body", body="}{"),
        }.get(number)

    mock_openai.rules.append(rule)
    verdicts = make_judge(mock_openai, max_concurrency=3).judge([relevance(i) for i in range(7)])
    assert [isinstance(v, JudgeFailure) for v in verdicts] == [False, True, True, True, True, True, False]
    assert all(v.kind == "relevance" for v in verdicts if isinstance(v, JudgeFailure))
    assert "invalid JSON" in verdicts[1].message and "refus" in verdicts[2].message
    assert "HTTP 400" in verdicts[3].message and "invalid JSON" in verdicts[4].message
    assert "not JSON" in verdicts[5].message


# -- 5. HTTP errors -------------------------------------------------------------------------------
def test_500_is_retried_by_the_sdk_then_succeeds(mock_openai):
    mock_openai.fail_status(500)
    [verdict] = make_judge(mock_openai).judge([relevance(5)])
    assert isinstance(verdict, RelevanceVerdict)
    assert mock_openai.counts["chat"] == 2
    assert [h.get("x-stainless-retry-count") for h in mock_openai.headers_received()] == ["0", "1"]


def test_persistent_500_names_the_status_and_the_retries(mock_openai):
    mock_openai.fail_status(500, times=10)
    [failure] = make_judge(mock_openai, max_retries=2).judge([relevance(7)])
    assert mock_openai.counts["chat"] == 3
    assert isinstance(failure, JudgeFailure) and failure.kind == "relevance"
    assert "HTTP 500" in failure.message and "relevance request" in failure.message and "after 2 retries" in failure.message


def test_400_is_not_retried(mock_openai):
    mock_openai.fail_status(400, headers={})
    [failure] = make_judge(mock_openai).judge([relevance(8)])
    assert mock_openai.counts["chat"] == 1
    assert "HTTP 400" in failure.message and "not retried" in failure.message and "mock 400" in failure.message


def test_connection_reset_is_a_failure(mock_openai):
    mock_openai.fail_reset(times=5)
    [failure] = make_judge(mock_openai, max_retries=1).judge([relevance(9)])
    assert isinstance(failure, JudgeFailure) and failure.kind == "relevance"
    assert "could not connect" in failure.message and "after 1 retries" in failure.message
    assert mock_openai.counts["chat"] == 2


def test_connection_reset_once_then_success(mock_openai):
    mock_openai.fail_reset()
    [verdict] = make_judge(mock_openai, max_retries=1).judge([relevance(9)])
    assert isinstance(verdict, RelevanceVerdict)



def test_a_reply_slower_than_the_timeout_is_a_failure(mock_openai):
    mock_openai.faults["chat"].append(Fault("delay", body=1.0))
    [failure] = make_judge(mock_openai, timeout=0.2, max_retries=0).judge([relevance(4)])
    assert isinstance(failure, JudgeFailure) and "timed out" in failure.message and "relevance request" in failure.message


def test_the_concurrency_bound_holds_across_concurrent_calls(mock_openai):
    mock_openai.response_delay = 0.03
    judge = make_judge(mock_openai, max_concurrency=2)
    results: list = []
    threads = [threading.Thread(target=lambda: results.extend(judge.judge([relevance(i) for i in range(4)]))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 12 and all(isinstance(v, RelevanceVerdict) for v in results)
    assert mock_openai.counts["chat"] == 12
    assert mock_openai.max_in_flight <= 2

# -- 6. the Batch API -----------------------------------------------------------------------------
def test_batch_results_out_of_order_are_matched_by_custom_id(mock_openai):
    mock_openai.responder = grade_by_number
    mock_openai.polls_until_ended = 3
    judge = make_judge(mock_openai, batch=True)
    verdicts = judge.judge([relevance(i) for i in range(6)])
    assert [(v.grade, v.reason) for v in verdicts] == [(i % 4, f"request {i}") for i in range(6)]
    assert mock_openai.counts["files_create"] == 1 and mock_openai.counts["batches_create"] == 1
    assert mock_openai.counts["chat"] == 0
    assert mock_openai.counts["batches_retrieve"] >= 2
    [batch] = mock_openai.batches.values()
    sent = [custom_id for custom_id, _ in batch["entries"]]
    returned = [json.loads(line)["custom_id"] for line in mock_openai.file_text(batch["output_file_id"]).splitlines()]
    assert sorted(returned) == sorted(sent) and returned != sent  # really out of order
    upload = next(e for e in mock_openai.received if e["route"] == "files_create")["body"]
    assert upload["purpose"] == "batch"
    lines = [json.loads(line) for line in upload["file"]["content"].splitlines()]
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" for line in lines)
    assert all(line["body"]["response_format"]["type"] == "json_schema" for line in lines)
    assert judge.counters() == {} and judge.batch_note is None


def test_an_errored_batch_line_fails_only_its_request(mock_openai):
    mock_openai.batch_outcomes = {1: "errored", 4: "expired", 5: "missing"}
    verdicts = make_judge(mock_openai, batch=True).judge([relevance(i) for i in range(6)])
    failed = [i for i, v in enumerate(verdicts) if isinstance(v, JudgeFailure)]
    assert failed == [1, 4, 5]
    assert "server_error" in verdicts[1].message and "errored in batch" in verdicts[1].message
    assert "batch_expired" in verdicts[4].message
    assert "no result" in verdicts[5].message
    assert all(isinstance(verdicts[i], RelevanceVerdict) for i in (0, 2, 3))
    assert mock_openai.counts["chat"] == 0


def test_a_batch_line_with_an_http_error_status_fails_only_its_request(mock_openai):
    mock_openai.status_errors_to_error_file = True
    mock_openai.rules.append(lambda request, attempt: Fault("status", status=500) if number_of(request) == 2 else None)
    verdicts = make_judge(mock_openai, batch=True).judge([relevance(i) for i in range(3)])
    assert isinstance(verdicts[2], JudgeFailure) and "500" in verdicts[2].message
    assert isinstance(verdicts[0], RelevanceVerdict) and isinstance(verdicts[1], RelevanceVerdict)


@pytest.mark.parametrize("status", ["expired", "cancelled", "failed"])
def test_a_batch_that_does_not_complete_fails_every_request(mock_openai, status):
    mock_openai.batch_final_status = status
    verdicts = make_judge(mock_openai, batch=True).judge([relevance(0), SAMPLE_REQUESTS["claims"]])
    assert [v.kind for v in verdicts] == ["relevance", "claims"]
    for verdict in verdicts:
        assert isinstance(verdict, JudgeFailure) and f"ended {status}" in verdict.message
    if status == "failed":
        assert "scripted to fail" in verdicts[0].message
    assert mock_openai.counts["chat"] == 0


def test_a_batch_on_a_server_without_schemas_is_judged_again_in_json_mode(mock_openai):
    mock_openai.schema_support = False
    judge = make_judge(mock_openai, batch=True)
    verdicts = judge.judge([relevance(i) for i in range(3)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert judge.structured_output == "json_object"
    assert mock_openai.schema_rejections == 3
    assert [b["response_format"]["type"] for b in chat_entries(mock_openai)] == ["json_object"] * 3
    assert judge.counters() == {"jsonMode": 3}
    # The next batch is sent in JSON mode from the start.
    verdicts = judge.judge([relevance(i) for i in range(3, 5)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert mock_openai.schema_rejections == 3 and mock_openai.counts["chat"] == 3
    assert mock_openai.counts["batches_create"] == 2
    assert judge.counters() == {"jsonMode": 5}


def test_invalid_json_in_a_batch_result_is_retried_once_directly(mock_openai):
    mock_openai.responder = grade_by_number
    mock_openai.rules.append(
        lambda request, attempt: Fault("text", body='{"grade": 2, "reason": "cut') if request.custom_id and number_of(request) == 1 else None)
    mock_openai.usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    judge = make_judge(mock_openai, batch=True)
    verdicts = judge.judge([relevance(i) for i in range(3)])
    assert [v.grade for v in verdicts] == [0, 1, 2]
    assert mock_openai.counts["chat"] == 1
    usage = judge.usage()
    assert usage.requests == 4
    one = (1000 * 0.40 + 100 * 1.60) / 1e6
    assert usage.cost_usd == pytest.approx(3 * one * 0.5 + one)  # three batched, one direct


def test_invalid_json_in_a_batch_and_its_retry_is_a_failure(mock_openai):
    mock_openai.rules.append(lambda request, attempt: Fault("text", body="nope") if number_of(request) == 1 else None)
    verdicts = make_judge(mock_openai, batch=True).judge([relevance(i) for i in range(3)])
    assert isinstance(verdicts[1], JudgeFailure)
    assert verdicts[1].message.startswith("judge returned invalid JSON") and "after 1 retry" in verdicts[1].message
    assert mock_openai.counts["chat"] == 1
    assert isinstance(verdicts[0], RelevanceVerdict) and isinstance(verdicts[2], RelevanceVerdict)


def test_a_refusal_in_a_batch_is_not_retried(mock_openai):
    mock_openai.rules.append(lambda request, attempt: Fault("message", body=refusal_completion()) if number_of(request) == 0 else None)
    verdicts = make_judge(mock_openai, batch=True).judge([relevance(0), relevance(1)])
    assert isinstance(verdicts[0], JudgeFailure) and "refus" in verdicts[0].message
    assert isinstance(verdicts[1], RelevanceVerdict)
    assert mock_openai.counts["chat"] == 0


def test_batch_progress_is_reported_until_the_total(mock_openai):
    mock_openai.polls_until_ended = 3
    judge = make_judge(mock_openai, batch=True)
    calls: list[tuple[str, int, int]] = []
    judge.on_progress = lambda batch_id, done, total: calls.append((batch_id, done, total))
    judge.judge([relevance(i) for i in range(4)])
    [batch_id] = mock_openai.batches
    assert len(calls) >= 2
    assert calls[-1] == (batch_id, 4, 4)
    assert all(call[0] == batch_id and call[2] == 4 and 0 <= call[1] <= 4 for call in calls)
    assert [call[1] for call in calls] == sorted(call[1] for call in calls)


def test_a_batch_that_cannot_be_created_fails_every_request(mock_openai):
    mock_openai.fail_status(500, times=10, route="files_create")
    verdicts = make_judge(mock_openai, batch=True, max_retries=1).judge([relevance(0), SAMPLE_REQUESTS["claims"]])
    assert mock_openai.counts["files_create"] == 2 and mock_openai.counts["batches_create"] == 0
    for verdict in verdicts:
        assert isinstance(verdict, JudgeFailure) and "HTTP 500" in verdict.message and "creating the batch" in verdict.message


def test_batch_judge_answers_now_through_direct_calls(mock_openai):
    judge = make_judge(mock_openai, batch=True)
    [verdict] = judge.judge([relevance(0)], now=True)
    assert isinstance(verdict, RelevanceVerdict)
    assert mock_openai.counts["chat"] == 1 and mock_openai.counts["files_create"] == 0


# -- 7. a server without the Batch API --------------------------------------------------------------
def test_no_batch_api_falls_back_to_direct_calls_once(mock_openai):
    mock_openai.batch_support = False
    judge = make_judge(mock_openai, batch=True)
    verdicts = judge.judge([relevance(i) for i in range(3)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert mock_openai.counts["chat"] == 3 and mock_openai.counts["files_create"] == 1
    assert judge.batch_note is not None and "no Batch API" in judge.batch_note and "127.0.0.1" in judge.batch_note
    assert judge.counters() == {"directInsteadOfBatch": 3}
    verdicts = judge.judge([relevance(i) for i in range(3, 5)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert mock_openai.counts["files_create"] == 1  # not tried again
    assert mock_openai.counts["chat"] == 5
    assert judge.counters() == {"directInsteadOfBatch": 5}


def test_no_batch_api_and_no_schema_counts_both(mock_openai):
    mock_openai.batch_support = False
    mock_openai.schema_support = False
    judge = make_judge(mock_openai, batch=True, max_concurrency=1)
    verdicts = judge.judge([relevance(i) for i in range(2)])
    assert all(isinstance(v, RelevanceVerdict) for v in verdicts)
    assert judge.counters() == {"jsonMode": 2, "directInsteadOfBatch": 2}


# -- 8. usage and cost -----------------------------------------------------------------------------
@pytest.mark.parametrize("model", [MODEL, "gpt-4.1-mini-2025-04-14"])
def test_usage_and_cost_from_the_usage_fields(mock_openai, model):
    mock_openai.usage = {"prompt_tokens": 2000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 500}}
    judge = make_judge(mock_openai, model=model)
    judge.judge([relevance(i) for i in range(3)])
    usage = judge.usage()
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens, usage.requests) == (4500, 1500, 900, 3)
    per_request = (1500 * 0.40 + 500 * 0.10 + 300 * 1.60) / 1e6
    assert usage.cost_usd == pytest.approx(3 * per_request)
    assert judge.priced is True


def test_batch_usage_gets_the_batch_discount(mock_openai):
    mock_openai.usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    judge = make_judge(mock_openai, batch=True)
    judge.judge([relevance(i) for i in range(4)])
    usage = judge.usage()
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (4000, 400, 4)
    assert usage.cost_usd == pytest.approx(4 * (1000 * 0.40 + 100 * 1.60) / 1e6 * 0.5)


def test_direct_calls_instead_of_a_batch_are_billed_at_the_standard_price(mock_openai):
    mock_openai.batch_support = False
    mock_openai.usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    judge = make_judge(mock_openai, batch=True)
    judge.judge([relevance(i) for i in range(2)])
    assert judge.usage().cost_usd == pytest.approx(2 * (1000 * 0.40 + 100 * 1.60) / 1e6)


def test_invalid_replies_still_count_as_spent(mock_openai):
    mock_openai.usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    mock_openai.reply_text("nope", times=2)
    judge = make_judge(mock_openai)
    judge.judge([relevance(15)])
    assert judge.usage().requests == 2 and judge.usage().input_tokens == 2000


def test_unpriced_model_counts_tokens_but_no_cost(mock_openai):
    mock_openai.usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    judge = make_judge(mock_openai, model="my-local-llama")
    assert judge.model == "openai:my-local-llama@127.0.0.1"
    judge.judge([relevance(16)])
    usage = judge.usage()
    assert judge.priced is False
    assert usage.cost_usd == 0.0 and (usage.input_tokens, usage.output_tokens, usage.requests) == (1000, 100, 1)
    assert judge.estimate_usd([relevance(16)]) is None


def test_a_price_override_prices_any_model(mock_openai):
    mock_openai.usage = {"prompt_tokens": 2000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 500}}
    judge = make_judge(mock_openai, model="my-local-llama", price_per_mtok=(1.0, 2.0))
    judge.judge([relevance(i) for i in range(2)])
    assert judge.priced is True
    # Cached input at the input rate (the override has one input price).
    assert judge.usage().cost_usd == pytest.approx(2 * (2000 * 1.0 + 300 * 2.0) / 1e6)
    estimate = judge.estimate_usd([relevance(1)])
    assert estimate is not None and estimate > 0
    # An override is the price paid: no batch discount applied on top of it.
    batched = make_judge(mock_openai, model="my-local-llama", price_per_mtok=(1.0, 2.0), batch=True)
    assert batched.estimate_usd([relevance(1)]) == pytest.approx(estimate)


def test_a_zero_price_override_is_priced_and_free(mock_openai):
    judge = make_judge(mock_openai, model="my-local-llama", price_per_mtok=(0.0, 0.0))
    judge.judge([relevance(1)])
    assert judge.priced is True and judge.usage().cost_usd == 0.0 and judge.estimate_usd([relevance(1)]) == 0.0


def test_cost_estimate_is_halved_in_batch_mode(mock_openai):
    requests = list(SAMPLE_REQUESTS.values())
    direct = make_judge(mock_openai).estimate_usd(requests)
    batched = make_judge(mock_openai, batch=True).estimate_usd(requests)
    assert direct and direct > 0 and batched == pytest.approx(direct / 2)
    assert make_judge(mock_openai, model="gpt-4o-mini").estimate_usd(requests) < direct  # $0.15 vs $0.40 input
    assert sum(mock_openai.counts.values()) == 0


def test_openai_prices_in_the_table():
    mini = prices.price_for("gpt-4.1-mini")
    assert mini is not None and (mini.input_per_mtok, mini.output_per_mtok, mini.batch_multiplier) == (0.40, 1.60, 0.5)
    assert prices.price_for("gpt-4.1-mini-2025-04-14") is mini
    four_o_mini = prices.price_for("gpt-4o-mini")
    assert four_o_mini is not None and (four_o_mini.input_per_mtok, four_o_mini.output_per_mtok) == (0.15, 0.60)
    assert prices.price_for("my-local-llama") is None


# -- 9. secrets -------------------------------------------------------------------------------------
def test_api_key_is_redacted_and_sent_only_in_the_authorization_header(mock_openai):
    echo = openai_error(f"Incorrect API key provided: {API_KEY}. (Authorization: Bearer {API_KEY})", 401)
    mock_openai.fail_status(401, body=echo, headers={})
    judge = make_judge(mock_openai, max_retries=1)
    failures = judge.judge([relevance(17)])
    mock_openai.reply_text(f"not json {API_KEY}", times=2)
    failures += judge.judge([relevance(18)])
    assert all(isinstance(f, JudgeFailure) for f in failures)
    assert "HTTP 401" in failures[0].message and "not retried" in failures[0].message
    assert "[REDACTED]" in failures[0].message and "[REDACTED]" in failures[1].message
    # A batch too: the uploaded file carries request bodies, never the key.
    batched = make_judge(mock_openai, batch=True)
    assert isinstance(batched.judge([relevance(19)])[0], RelevanceVerdict)
    produced = [f.message for f in failures] + [judge.label, repr(judge), judge.usage().model_dump_json(), judge.model]
    assert not [text for text in produced if API_KEY in text or "sk-proj-" in text]
    assert not [entry for entry in mock_openai.received if API_KEY in json.dumps(entry["body"])]
    for headers in mock_openai.headers_received():
        carrying = {name.lower() for name, value in headers.items() if API_KEY in value}
        assert carrying == {"authorization"}
        assert {name.lower(): value for name, value in headers.items()}["authorization"] == f"Bearer {API_KEY}"



def test_a_key_from_the_environment_is_redacted_whatever_it_looks_like(mock_openai, monkeypatch):
    secret = "local-gateway-token-7f3a9c2e51"  # not shaped like an OpenAI key: only the exact value can catch it
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("OPENAI_BASE_URL", mock_openai.base_url)
    mock_openai.fail_status(401, headers={}, body=openai_error(f"key {secret} is not valid here", 401))
    judge = select_judge("openai", model="my-local-llama")
    [failure] = judge.judge([relevance(1)])
    assert isinstance(failure, JudgeFailure) and "HTTP 401" in failure.message
    assert secret not in failure.message and "[REDACTED]" in failure.message


def test_an_injected_client_is_used_and_left_open(mock_openai):
    import openai

    client = openai.OpenAI(api_key=API_KEY, base_url=mock_openai.base_url, max_retries=0)
    judge = OpenAIJudge(MODEL, client=client)
    assert judge.model == IDENTITY and judge.max_retries == 0
    mock_openai.fail_status(500)
    [failure] = judge.judge([relevance(3)])
    assert isinstance(failure, JudgeFailure) and "after 0 retries" in failure.message
    [verdict] = judge.judge([relevance(3)])
    judge.close()
    assert isinstance(verdict, RelevanceVerdict)
    assert not client.is_closed()
    client.close()

# -- 10. make_judge("openai") ---------------------------------------------------------------------
def test_make_judge_openai_needs_a_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with pytest.raises(JudgeSetupError, match="--crucible-judge-model") as info:
        select_judge("openai")
    assert "HINT:" in str(info.value)


def test_make_judge_openai_needs_an_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(JudgeSetupError, match="OPENAI_API_KEY") as info:
        select_judge("openai", model=MODEL)
    assert "HINT:" in str(info.value)


def test_make_judge_openai_without_the_sdk_names_the_extra(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    real = importlib.util.find_spec
    monkeypatch.setattr(select_module.importlib.util, "find_spec",
                        lambda name, *args, **kwargs: None if name == "openai" else real(name, *args, **kwargs))
    with pytest.raises(JudgeSetupError) as info:
        select_judge("openai", model=MODEL)
    assert "pip install 'pytest-crucible[openai]'" in str(info.value)


def test_make_judge_openai_reads_the_environment(mock_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", mock_openai.base_url)
    judge = select_judge("openai", model=MODEL)
    assert isinstance(judge, OpenAIJudge) and judge.model == IDENTITY and judge.batch is False
    [verdict] = judge.judge([relevance(1)])
    judge.close()
    assert isinstance(verdict, RelevanceVerdict)
    [headers] = mock_openai.headers_received()
    assert {name.lower(): value for name, value in headers.items()}["authorization"] == f"Bearer {API_KEY}"
    batched = select_judge("openai", model="my-local-llama", batch=True, price_per_mtok=(1.0, 2.0))
    assert batched.batch is True and batched.priced is True and batched.price_override == (1.0, 2.0)


# -- 11. parse_price ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [("0.40,1.60", (0.4, 1.6)), (" 0.40 , 1.60 ", (0.4, 1.6)), ("0", (0.0, 0.0)),
                                            ("2", (2.0, 2.0)), ("", None), ("   ", None)])
def test_parse_price(text, expected):
    assert parse_price(text, "crucible_judge_price_per_mtok") == expected


@pytest.mark.parametrize("text", ["abc", "-1", "1,2,3", "1,-2", "nan", "inf", "1e999,2", "0.4,"])
def test_parse_price_rejects_nonsense_naming_the_key(text):
    with pytest.raises(JudgeSetupError) as info:
        parse_price(text, "crucible_judge_price_per_mtok")
    message = str(info.value)
    assert message.startswith("crucible_judge_price_per_mtok = ") and repr(text.strip()) in message and "HINT:" in message

