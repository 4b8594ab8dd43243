"""A judge written by the team (CustomJudge) and how a judge name becomes a judge (select.make_judge), at unit level."""

from __future__ import annotations

import re
import sys
import textwrap
import threading
import uuid

import pytest

from pytest_crucible.judge.custom_judge import CustomJudge, CustomJudgeError
from pytest_crucible.judge.engine import JudgeEngine
from pytest_crucible.judge.lexical_v3 import LexicalJudgeV3
from pytest_crucible.judge.select import JudgeSetupError, make_judge, registered_judges
from pytest_crucible.judge.types import (
    ClaimsRequest,
    ClaimsVerdict,
    EntailmentRequest,
    EntailmentVerdict,
    JudgeFailure,
    RelevanceRequest,
    RelevanceVerdict,
    RubricRequest,
    Usage,
)

CLAIMS = ClaimsRequest(question="When did it open?", text="The bridge opened in 1932. It is 500 m long.")
ENTAILMENT = EntailmentRequest(context=("The bridge opened in 1932.",), claims=("opened 1932", "painted red"))


def relevance(i: int) -> RelevanceRequest:
    return RelevanceRequest(question=f"question number {i}", chunk=f"chunk {i}")


def answer(request) -> dict:
    """A valid verdict dict for each kind used here, shaped by the request."""
    if request.kind == "relevance":
        number = int(request.question.split()[-1])
        return {"grade": number % 4, "reason": f"request {number}"}
    if request.kind == "claims":
        return {"claims": [part.strip() + "." for part in request.text.split(".") if part.strip()]}
    if request.kind == "entailment":
        return {"supported": [c.endswith("1932") for c in request.claims], "reasons": ["r"] * len(request.claims)}
    raise AssertionError(f"unexpected kind {request.kind}")


class DictJudge:
    """Returns plain dicts from judge(requests); counts what it was asked."""

    name = "acme-judge"
    version = "2026-12-01"

    def __init__(self) -> None:
        self.calls = 0
        self.judged = 0

    def judge(self, requests):
        self.calls += 1
        self.judged += len(requests)
        return [answer(r) for r in requests]


class OneJudge:
    name = "acme-one"
    version = "v1"

    def judge_one(self, request):
        if request.kind == "relevance" and request.question.endswith(" 2"):
            raise ValueError("cannot grade request 2")
        return answer(request)


def wrap(impl, source: str = "tests") -> CustomJudge:
    return CustomJudge(impl, source)


# -- verdicts ------------------------------------------------------------------------------------------
def test_dict_verdicts_are_typed_stamped_and_cached():
    impl = DictJudge()
    engine = JudgeEngine(wrap(impl))
    requests = [relevance(1), CLAIMS, ENTAILMENT]
    verdicts = engine.run(requests)
    assert [type(v) for v in verdicts] == [RelevanceVerdict, ClaimsVerdict, EntailmentVerdict]
    assert (verdicts[0].grade, verdicts[0].reason) == (1, "request 1")
    assert verdicts[1].claims == ["The bridge opened in 1932.", "It is 500 m long."]
    assert verdicts[2].supported == [True, False]
    assert {(v.judge_model, v.prompt_version) for v in verdicts} == {("acme-judge", "2026-12-01")}
    assert (impl.calls, impl.judged) == (1, 3)
    again = engine.run(requests)
    assert (impl.calls, impl.judged) == (1, 3)  # the engine's cache served every one
    assert [v.model_dump() for v in again] == [v.model_dump() for v in verdicts]
    assert engine.stats.as_dict() == {"requests": 6, "cache_hits": 3, "judged": 3, "failures": 0}
    rows = engine.drain_cache_rows()
    assert {(row["judge_model"], row["prompt_version"]) for row in rows} == {("acme-judge", "2026-12-01")}


def test_a_new_version_is_judged_again():
    first = JudgeEngine(wrap(DictJudge()))
    first.run([relevance(1)])

    class Newer(DictJudge):
        version = "2026-12-02"

    impl = Newer()
    second = JudgeEngine(wrap(impl))
    second.load_cache(first.drain_cache_rows())
    [verdict] = second.run([relevance(1)])
    assert impl.judged == 1 and verdict.prompt_version == "2026-12-02"


def test_identity_and_label():
    judge = wrap(DictJudge(), "acme.judges:DictJudge")
    assert (judge.model, judge.prompt_version) == ("acme-judge", "2026-12-01")
    assert "acme-judge" in judge.label and "acme.judges:DictJudge" in judge.label
    assert judge.grades_rubrics is False and judge.max_concurrency == 1
    assert judge.judge([]) == []


def test_verdict_models_are_taken_as_they_are():
    class ModelJudge:
        name, version = "acme-models", "1"

        def judge(self, requests):
            return [RelevanceVerdict(grade=3, reason="exact") for _ in requests]

    [verdict] = wrap(ModelJudge()).judge([relevance(0)])
    assert isinstance(verdict, RelevanceVerdict) and verdict.grade == 3


def test_judge_one_and_an_exception_fails_only_its_request():
    judge = wrap(OneJudge(), "acme:OneJudge")
    verdicts = judge.judge([relevance(1), relevance(2), relevance(3), CLAIMS])
    assert [type(v) for v in verdicts] == [RelevanceVerdict, JudgeFailure, RelevanceVerdict, ClaimsVerdict]
    failure = verdicts[1]
    assert failure.kind == "relevance"
    assert "acme-one" in failure.message and "acme:OneJudge" in failure.message
    assert "ValueError" in failure.message and "cannot grade request 2" in failure.message


def test_an_exception_in_judge_fails_the_whole_call():
    class Broken:
        name, version = "acme-broken", "1"

        def judge(self, requests):
            raise ConnectionError("model server down")

    verdicts = wrap(Broken()).judge([relevance(1), CLAIMS])
    assert [v.kind for v in verdicts] == ["relevance", "claims"]
    for failure in verdicts:
        assert isinstance(failure, JudgeFailure)
        assert "acme-broken" in failure.message and "ConnectionError" in failure.message and "model server down" in failure.message


def test_failures_reach_the_engine_stats_and_are_never_cached():
    class Broken:
        name, version = "acme-broken", "1"

        def __init__(self):
            self.calls = 0

        def judge(self, requests):
            self.calls += 1
            raise RuntimeError("nope")

    impl = Broken()
    engine = JudgeEngine(wrap(impl))
    engine.run([relevance(1)])
    engine.run([relevance(1)])
    assert impl.calls == 2 and engine.stats.failures == 2 and engine.stats.judged == 0
    assert engine.drain_cache_rows() == []


class Returns:
    """judge(requests) returns whatever the test sets."""

    name, version = "acme-returns", "1"

    def __init__(self, value):
        self.value = value

    def judge(self, requests):
        return self.value(requests) if callable(self.value) else self.value


BAD_RETURNS = {
    "too few verdicts": ([relevance(1), relevance(2)], lambda rs: [answer(rs[0])], "returned 1 verdicts for 2 requests"),
    "too many verdicts": ([relevance(1)], lambda rs: [answer(rs[0])] * 2, "returned 2 verdicts for 1 requests"),
    "wrong verdict type": ([ENTAILMENT], lambda rs: [RelevanceVerdict(grade=1)], "RelevanceVerdict"),
    "wrong number of supported": ([ENTAILMENT], lambda rs: [EntailmentVerdict(supported=[True], reasons=[])], "'supported'"),
    "wrong number of supported (dict)": ([ENTAILMENT], lambda rs: [{"supported": [True, True, True]}], "'supported'"),
    "dict that does not fit": ([relevance(1)], lambda rs: [{"grade": 7, "reason": "x"}], "does not fit RelevanceVerdict"),
    "dict with an unknown field": ([relevance(1)], lambda rs: [{"grade": 1, "score": 3}], "does not fit RelevanceVerdict"),
    "not a verdict at all": ([relevance(1)], lambda rs: ["grade 2"], "returned str"),
    "not a list": ([relevance(1)], lambda rs: None, "TypeError"),
}


@pytest.mark.parametrize("case", sorted(BAD_RETURNS))
def test_what_does_not_fit_is_a_failure_naming_the_judge(case):
    requests, value, words = BAD_RETURNS[case]
    verdicts = wrap(Returns(value), "acme:Returns").judge(requests)
    assert len(verdicts) == len(requests)
    for request, failure in zip(requests, verdicts):
        assert isinstance(failure, JudgeFailure) and failure.kind == request.kind
        assert failure.message.startswith("judge acme-returns (acme:Returns): ")
        assert words in failure.message


def test_a_rubric_score_off_its_scale_is_a_failure():
    rubric = RubricRequest(name="tone", criteria="courteous", question="q", answer="a", pass_fail=False, scale_min=1, scale_max=5)
    ok, bad = wrap(Returns(lambda rs: [{"score": 5}, {"score": 9}])).judge([rubric, rubric])
    assert ok.score == 5
    assert isinstance(bad, JudgeFailure) and "outside the scale 1 to 5" in bad.message


def test_a_failure_returned_by_the_judge_keeps_its_reason():
    [failure] = wrap(Returns(lambda rs: [JudgeFailure(kind="relevance", message="no GPU left")])).judge([relevance(1)])
    assert isinstance(failure, JudgeFailure) and "acme-returns" in failure.message and "no GPU left" in failure.message


def test_usage_and_close_are_passed_through():
    closed = []

    class Metered(DictJudge):
        def usage(self):
            return {"input_tokens": 10, "output_tokens": 2, "requests": 1, "cost_usd": 0.5}

        def close(self):
            closed.append(True)

    judge = wrap(Metered())
    assert judge.usage() == Usage(input_tokens=10, output_tokens=2, requests=1, cost_usd=0.5)
    judge.close()
    assert closed == [True]
    assert wrap(DictJudge()).usage() == Usage()


# -- concurrency --------------------------------------------------------------------------------------
def test_judge_one_runs_requests_on_several_threads_at_once():
    lock = threading.Condition()
    state = {"active": 0, "peak": 0}
    threads: set[str] = set()

    class Parallel:
        name, version, max_concurrency = "acme-parallel", "1", 3

        def judge_one(self, request):
            with lock:
                state["active"] += 1
                state["peak"] = max(state["peak"], state["active"])
                threads.add(threading.current_thread().name)
                lock.notify_all()
                # Wait (bounded) for a second request to be in at the same time: no timing assumption.
                lock.wait_for(lambda: state["peak"] > 1, timeout=5)
                state["active"] -= 1
            return answer(request)

    judge = wrap(Parallel())
    assert judge.max_concurrency == 3
    verdicts = judge.judge([relevance(i) for i in range(9)])
    assert [v.grade for v in verdicts] == [i % 4 for i in range(9)]
    assert 1 < state["peak"] <= 3
    assert len(threads) > 1 and all(name.startswith("crucible-custom-judge") for name in threads)


def test_judge_with_max_concurrency_is_called_on_slices_in_order():
    seen: list[list[int]] = []
    guard = threading.Lock()

    class Sliced:
        name, version, max_concurrency = "acme-sliced", "1", 3

        def judge(self, requests):
            with guard:
                seen.append([int(r.question.split()[-1]) for r in requests])
            return [answer(r) for r in requests]

    verdicts = wrap(Sliced()).judge([relevance(i) for i in range(7)])
    assert [v.reason for v in verdicts] == [f"request {i}" for i in range(7)]
    assert len(seen) == 3 and sorted(n for part in seen for n in part) == list(range(7))
    assert all(part == sorted(part) for part in seen)


def test_without_max_concurrency_one_thread_judges_in_order():
    order: list[int] = []

    class Serial:
        name, version = "acme-serial", "1"

        def judge_one(self, request):
            order.append(int(request.question.split()[-1]))
            return answer(request)

    wrap(Serial()).judge([relevance(i) for i in range(5)])
    assert order == list(range(5))


# -- setup errors: make_judge("module:Class") ------------------------------------------------------------
JUDGES_MODULE = '''
class Good:
    name = "acme-good"
    version = "2026-12-01"
    grades_rubrics = True

    def judge(self, requests):
        return [{"grade": 2, "reason": "ok"} for _ in requests]

class NoName:
    version = "1"
    def judge(self, requests):
        return []

class BlankVersion:
    name = "acme-blank"
    version = "  "
    def judge(self, requests):
        return []

class NumberVersion:
    name = "acme-number"
    version = 3
    def judge(self, requests):
        return []

class Lexical:
    name = "lexical"
    version = "1"
    def judge(self, requests):
        return []

class Anthropic:
    name = "anthropic"
    version = "1"
    def judge(self, requests):
        return []

class OpenAILike:
    name = "openai:gpt-4o"
    version = "1"
    def judge(self, requests):
        return []

class NoMethod:
    name = "acme-nomethod"
    version = "1"

class JudgeNotCallable:
    name = "acme-notcallable"
    version = "1"
    judge = "yes"

class SpacedBuiltinName:
    name = " lexical-v3 "
    version = "1"
    def judge(self, requests):
        return []

class BadConcurrency:
    name = "acme-badconcurrency"
    version = "1"
    max_concurrency = "many"
    def judge(self, requests):
        return []

class Exploding:
    name = "acme-exploding"
    version = "1"
    def __init__(self):
        raise RuntimeError("ACME_ENDPOINT is not set")
    def judge(self, requests):
        return []
'''


@pytest.fixture
def judges_module(tmp_path, monkeypatch):
    """A module of judge classes, importable under a name of its own (removed from sys.modules afterwards)."""
    name = f"crucible_test_judges_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(JUDGES_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))  # also restores sys.path as it was
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_a_class_by_import_path_becomes_a_judge(judges_module):
    judge = make_judge(f"{judges_module}:Good")
    assert isinstance(judge, CustomJudge)
    assert (judge.model, judge.prompt_version, judge.grades_rubrics) == ("acme-good", "2026-12-01", True)
    assert judge.source == f"{judges_module}:Good"
    [verdict] = judge.judge([relevance(1)])
    assert isinstance(verdict, RelevanceVerdict) and verdict.grade == 2


@pytest.mark.parametrize("cls, words", [
    ("NoName", "'name' must be a non-empty string"),
    ("BlankVersion", "'version' must be a non-empty string"),
    ("NumberVersion", "'version' must be a non-empty string"),
    ("Lexical", "name 'lexical' is a built-in judge's"),
    ("Anthropic", "name 'anthropic' is a built-in judge's"),
    ("OpenAILike", "name 'openai:gpt-4o' is a built-in judge's"),
    ("NoMethod", "has no judge(requests) method"),
    ("JudgeNotCallable", "has no judge(requests) method"),
])
def test_a_class_that_cannot_be_a_judge_is_a_setup_error_with_a_hint(judges_module, cls, words):
    with pytest.raises(JudgeSetupError) as info:
        make_judge(f"{judges_module}:{cls}")
    message = str(info.value)
    assert words in message
    assert f"{judges_module}:{cls}" in message
    assert any(line.startswith("HINT: ") for line in message.splitlines()[1:])


def test_a_built_in_name_padded_with_spaces_is_still_refused(judges_module):
    with pytest.raises(JudgeSetupError, match="is a built-in judge's"):
        make_judge(f"{judges_module}:SpacedBuiltinName")


def test_a_max_concurrency_that_is_not_a_number_is_a_setup_error(judges_module):
    with pytest.raises(JudgeSetupError, match="max_concurrency"):
        make_judge(f"{judges_module}:BadConcurrency")

def test_a_constructor_that_raises_is_a_setup_error(judges_module):
    with pytest.raises(JudgeSetupError, match="creating it raised RuntimeError: ACME_ENDPOINT is not set"):
        make_judge(f"{judges_module}:Exploding")


def test_custom_judge_error_directly():
    with pytest.raises(CustomJudgeError, match="'name' must be a non-empty string"):
        CustomJudge(object(), "tests")


def test_a_missing_class_or_module_is_a_clear_setup_error(tmp_path, monkeypatch):
    package = f"crucible_test_pkg_{uuid.uuid4().hex[:10]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "mod.py").write_text("class Present:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, package, raising=False)
    monkeypatch.delitem(sys.modules, f"{package}.mod", raising=False)

    with pytest.raises(JudgeSetupError) as info:
        make_judge(f"{package}.mod:Missing")
    message = str(info.value)
    assert f"module '{package}.mod' has no 'Missing'" in message and "HINT:" in message

    with pytest.raises(JudgeSetupError) as info:
        make_judge("nosuchmodule_for_crucible:X")
    message = str(info.value)
    assert "cannot import module 'nosuchmodule_for_crucible'" in message and "HINT:" in message

    with pytest.raises(JudgeSetupError, match=re.escape("expected package.module:ClassName")):
        make_judge(f"{package}.mod:")


def test_an_unknown_name_lists_the_choices():
    with pytest.raises(JudgeSetupError) as info:
        make_judge("no-such-judge", registered={"acme-good": DictJudge})
    message = str(info.value)
    assert "unknown judge 'no-such-judge'" in message and "lexical" in message and "openai" in message
    assert "acme-good" in message and "HINT:" in message


# -- registered judges ----------------------------------------------------------------------------------
class RegisteredA(DictJudge):
    name = "acme-a"


class RegisteredB(DictJudge):
    name = "acme-b"


def test_registered_judges_from_what_the_hooks_returned():
    instance = RegisteredB()
    lexical = LexicalJudgeV3()
    found = registered_judges([RegisteredA, [instance, lexical], None, (DictJudge,)])
    assert found == {"acme-a": RegisteredA, "acme-b": instance, "lexical-v3": lexical, "acme-judge": DictJudge}
    assert registered_judges([None, []]) == {}


def test_a_registered_judge_without_a_name_is_a_setup_error():
    class Nameless:
        version = "1"

        def judge(self, requests):
            return []

    with pytest.raises(JudgeSetupError, match="has no name"):
        registered_judges([Nameless])


def test_make_judge_picks_a_registered_judge():
    instance = RegisteredB()
    registered = registered_judges([RegisteredA, instance])
    judge = make_judge("acme-a", registered=registered)
    assert isinstance(judge, CustomJudge) and judge.model == "acme-a" and isinstance(judge.impl, RegisteredA)
    assert "registered as 'acme-a'" in judge.label
    wrapped = make_judge("acme-b", registered=registered)
    assert wrapped.impl is instance  # an instance is used as it is
    [verdict] = wrapped.judge([relevance(1)])
    assert isinstance(verdict, RelevanceVerdict) and instance.judged == 1
    # A built-in judge name still means the built-in judge.
    assert isinstance(make_judge("lexical", registered=registered), LexicalJudgeV3)
