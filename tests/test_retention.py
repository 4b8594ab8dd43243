"""Knowledge retention in golden conversations: a later turn's answer that contradicts what the user stated
earlier, judged as the ``retention`` request (offline, by a model through a local server, by a judge of your
own that does not answer it), the per-turn ``knowledgeRetained`` and per-conversation ``knowledgeRetention``."""

from __future__ import annotations

import json
import re

import pytest
from helpers import crucible_cli, db_rows, point_anthropic_at, write_project

from pytest_crucible.evaluation.conversations import conversation_metrics
from pytest_crucible.judge.lexical_retention import VERSION, retention_verdict
from pytest_crucible.judge.lexical_v3 import LexicalJudgeV3
from pytest_crucible.judge.types import RetentionRequest

FAKE_KEY = "sk-ant-test-0000-not-a-real-key-CRUCIBLE"
RODE_80 = "I have ridden my bike 80 km, can I return it?"
ANSWERS = {
    "c01:t1": "Bikes can be returned within 30 days [S1].",
    "c01:t2": "Since you rode 200 km, a wear fee of $20 applies [S1].",
    "c01:t3": "Since you rode 80 km, you still have the full 30 days [S1].",
}
ITEMS = [{"id": "c01", "citations": [{"docId": "returns", "chunkId": "returns#p1"}],
          "reference": "Bikes can be returned within 30 days.",
          "turns": [{"question": RODE_80}, {"question": "Does the return cost anything?"},
                    {"question": "How long do I have to bring it back?"}]}]
CONFTEST = f'''
import pytest

ANSWERS = {ANSWERS!r}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode, history=None):
        answer = ANSWERS["c01:t" + item.id.rsplit(":t", 1)[1]] if mode == "system" else None  # every conversation alike
        return {{"answer": answer, "retrieved": [{{"chunk_id": "returns#p1", "doc_id": "returns",
                                                 "text": "Bikes can be returned within 30 days."}}]}}
    return pipeline
'''
RECORD = "crucible_outcome = record"


def retained(project: pytest.Pytester) -> dict[tuple[str, str], float]:
    return {(item, metric): value for item, metric, value in db_rows(
        project, "SELECT item_id, metric, value FROM item_metrics WHERE metric IN ('knowledgeRetained', 'knowledgeRetention') "
                 "AND run_id = (SELECT id FROM runs ORDER BY rowid DESC LIMIT 1)")}


EXPECTED = {("c01:t2", "knowledgeRetained"): 0.0, ("c01:t3", "knowledgeRetained"): 1.0,
            ("c01:t3", "knowledgeRetention"): 0.5}


# -- the offline heuristic ----------------------------------------------------------------------------------
def _verdict(answer: str, *earlier: str, question: str = "What now?"):
    return retention_verdict(RetentionRequest(earlier=earlier or (RODE_80,), question=question, answer=answer))


def test_lexical_retention_finds_a_value_restated_differently_to_the_user() -> None:
    verdict = _verdict("Since you rode 200 km, a fee applies.")
    assert verdict.contradicted == [RODE_80]
    assert verdict.reason == "the answer says 200 km where the user said 80 km"
    # Written otherwise: glued units, plural nouns, dates and years.
    assert _verdict("As you rode 120km, no.").contradicted == [RODE_80]
    bought = "I bought 3 bikes in 2021."
    assert _verdict("Your 2 bikes are covered.", bought).contradicted == [bought]
    assert _verdict("Since you bought them in 2019, no.", bought).contradicted == [bought]
    assert _verdict("You bought it on March 5, so yes.", "I bought it on March 3.").contradicted == ["I bought it on March 3."]


def test_lexical_retention_keeps_the_same_value_another_unit_and_no_numbers() -> None:
    assert _verdict("Since you rode 80 km, yes.").contradicted == []
    assert _verdict("You rode eighty km? Then yes.", "I rode 80 km.").contradicted == []  # number words read too
    # The same value restated beside another of its unit: the user's value is there, nothing contradicted.
    assert _verdict("You rode 80 km; up to 100 km you can return it.").contradicted == []
    # Another unit is another fact: days are not km.
    assert _verdict("You have 200 days to return it.").contradicted == []
    # Not said to the user: a policy's own value is not a restatement of the user's.
    assert _verdict("Bikes ridden over 200 km cannot be returned.").contradicted == []
    # No numbers at all, on either side.
    assert _verdict("You can return it.", "I want to return my bike.").contradicted == []
    assert _verdict("You can return it.").contradicted == []
    # The turn's own question updates the value: following the update contradicts nothing.
    assert _verdict("Since you rode 90 km, yes.", question="Sorry, it was 90 km actually.").contradicted == []


def test_lexical_judges_version_retention_apart_from_their_other_kinds() -> None:
    judge = LexicalJudgeV3()
    assert judge.prompt_version_for("retention") == VERSION == "lexical-retention-v1"
    assert judge.prompt_version_for("correctness") == judge.prompt_version == "lexical-v3"
    [verdict] = judge.judge([RetentionRequest(earlier=(RODE_80,), question="q", answer="You rode 200 km.")])
    assert verdict.prompt_version == VERSION and verdict.contradicted == [RODE_80]


def test_knowledge_retention_is_the_share_of_judged_turns() -> None:
    def turn(n, value=None, of=3):
        return {"item_id": f"c:t{n}", "conversation": {"id": "c", "turn": n, "turns": of}, "crag_grade": "perfect",
                "error": None, "knowledgeRetained": value}

    assert conversation_metrics([turn(1), turn(2, 0.0), turn(3, 1.0)])["c:t3"]["knowledgeRetention"] == 0.5
    assert "knowledgeRetention" not in conversation_metrics([turn(1), turn(2), turn(3)])["c:t3"]  # none judged
    assert conversation_metrics([turn(1), turn(3, 1.0)]) == {}  # a turn not in the run: nothing


# -- end to end ---------------------------------------------------------------------------------------------
def test_offline_judge_scores_retention_per_turn_and_per_conversation(pytester: pytest.Pytester) -> None:
    write_project(pytester, ITEMS, CONFTEST, ini=f"crucible_mode = system\n{RECORD}", golden="golden_chat.jsonl")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert retained(pytester) == EXPECTED  # turn 1 has nothing earlier to contradict: no value
    result.stdout.fnmatch_lines(["  knowledgeRetained * 0.5000 * 2", "  knowledgeRetention * 0.5000 * 1",
                                 "  knowledgeRetention: one value per conversation with a judged turn (1)*"])
    db = pytester.path / ".crucible" / "crucible.db"
    shown = crucible_cli("show", "latest", "--item", "c01:t2", "--db", db)
    assert shown.ret == 0
    text = "\n".join(shown.outlines)
    assert f'  contradicts the user\'s earlier message: "{RODE_80}"' in text
    assert "  knowledge retention: the answer says 200 km where the user said 80 km" in text
    document = json.loads(crucible_cli("show", "latest", "--item", "c01:t2", "--json", "--db", db).stdout.str())
    assert document["evidence"]["retention"] == {"contradicted": [RODE_80],
                                                 "reason": "the answer says 200 km where the user said 80 km"}
    assert document["metrics"]["knowledgeRetained"] == 0.0
    assert json.loads(crucible_cli("show", "latest", "--item", "c01:t3", "--json", "--db", db).stdout.str()
                      )["evidence"]["retention"] is None
    # The HTML report's item view shows the same evidence (escaped text, in the turn's details).
    report = pytester.path / "report.html"
    assert crucible_cli("report", "latest", "-o", report, "--db", db).ret == 0
    page = report.read_text()
    from pytest_crucible.report.item_data import decode_items

    evidence = [detail["retention"] for detail in decode_items(page)["detail"] if detail.get("retention")]
    assert [e.get("contradicted") for e in evidence if e.get("contradicted")] == [[RODE_80]]  # one item contradicts
    assert "the answer says 200 km where the user said 80 km" in [e.get("reason") for e in evidence]


def test_component_mode_has_no_retention(pytester: pytest.Pytester) -> None:
    write_project(pytester, ITEMS, CONFTEST, ini=f"crucible_mode = component\n{RECORD}", golden="golden_chat.jsonl")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert retained(pytester) == {}
    assert "knowledgeRetained" not in result.stdout.str()


def test_a_model_judge_is_asked_retention_and_its_cache_serves_the_rerun(pytester: pytest.Pytester, mock_anthropic,
                                                                         monkeypatch) -> None:
    from mock_anthropic import default_verdict

    def responder(request):
        if request.kind == "retention" and "200 km" in request.user:
            return {"contradicted": [RODE_80], "reason": "the user said 80 km"}
        return default_verdict(request)

    mock_anthropic.responder = responder
    point_anthropic_at(monkeypatch, mock_anthropic, FAKE_KEY)
    write_project(pytester, ITEMS, CONFTEST, ini=f"crucible_mode = system\n{RECORD}\ncrucible_judge = anthropic",
                  golden="golden_chat.jsonl")

    def retention_requests():
        parsed = [mock_anthropic.parse_request(body) for body in mock_anthropic.message_bodies()]
        return [request for request in parsed if request.kind == "retention"]

    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    sent = retention_requests()
    assert len(sent) == 2 and {request.prompt_version for request in sent} == {"retention-v1"}  # turns 2 and 3
    by_answer = {re.search(r"<answer>\n(.*)\n</answer>", r.user, re.S).group(1): r.user for r in sent}  # type: ignore[union-attr]
    assert set(by_answer) == {ANSWERS["c01:t2"], ANSWERS["c01:t3"]}
    for user in by_answer.values():  # the user's earlier messages, in order, as data
        assert f'<user_message index="1">\n{RODE_80}\n</user_message>' in user
    assert '<user_message index="2">\nDoes the return cost anything?\n</user_message>' in by_answer[ANSWERS["c01:t3"]]
    assert retained(pytester) == EXPECTED
    # The same run again: every retention verdict comes from the cache.
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(retention_requests()) == 2
    assert retained(pytester) == EXPECTED


OWN_JUDGE = '''
from pytest_crucible.judge.lexical_v3 import LexicalJudgeV3


class RulesJudge:
    """A judge of the team's own written before the retention kind: it answers what the offline judge does."""

    name = "rules-judge"
    version = "1"

    def __init__(self):
        self.inner = LexicalJudgeV3()

    def judge(self, requests):
        for request in requests:
            assert request.kind != "retention", "never sent a kind it does not say it judges"
        return self.inner.judge(requests)
'''


def test_a_judge_of_your_own_without_retention_leaves_it_out_with_a_note(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(rules_judge=OWN_JUDGE)
    write_project(pytester, ITEMS, CONFTEST, ini=f"crucible_mode = system\n{RECORD}\ncrucible_judge = rules_judge:RulesJudge",
                  golden="golden_chat.jsonl")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert retained(pytester) == {}
    result.stdout.fnmatch_lines(["NOTE rules-judge does not judge the request kind 'retention': knowledgeRetained and "
                                 "knowledgeRetention not scored (2 conversation turns)"])
    assert result.stdout.str().count("does not judge the request kind 'retention'") == 1
    # The other judged metrics are there: only retention is left out.
    assert db_rows(pytester, "SELECT COUNT(*) FROM item_metrics WHERE metric = 'conversationSuccess'") == [(1,)]


def test_another_retention_version_leaves_only_retention_out_of_the_comparison(pytester: pytest.Pytester,
                                                                              monkeypatch) -> None:
    six = [{**ITEMS[0], "id": f"c{n:02d}"} for n in range(1, 7)]  # enough conversations (clusters) for the gate
    write_project(pytester, six, CONFTEST, ini=f"crucible_mode = system\n{RECORD}", golden="golden_chat.jsonl")
    assert pytester.runpytest().ret == pytest.ExitCode.OK
    [(stats,)] = db_rows(pytester, "SELECT judge_stats FROM runs")
    assert json.loads(stats)["retentionPrompt"] == "lexical-retention-v1"
    # The offline retention rule moves on (a new version): its verdicts are judged again, the other kinds' are not.
    monkeypatch.setattr("pytest_crucible.judge.lexical.RETENTION_VERSION", "lexical-retention-v2")
    result = pytester.runpytest("--crucible-baseline=latest")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*the ruler changed: knowledgeRetained and knowledgeRetention were judged with retention "
                                 "prompt lexical-retention-v1 in * and lexical-retention-v2 in *, so they are left out*"])
    comparison = result.stdout.str().split("\nbaseline ", 1)[1].splitlines()
    assert not [line for line in comparison if line.startswith(("  knowledgeRetained ", "  knowledgeRetention "))]
    assert [line for line in comparison if line.startswith("  conversationSuccess ")]  # the other metrics compared
    assert retained(pytester)[("c06:t3", "knowledgeRetention")] == 0.5
    rows = db_rows(pytester, "SELECT prompt_version, COUNT(*) FROM judge_cache GROUP BY prompt_version ORDER BY 1")
    assert [version for version, _ in rows] == ["lexical-retention-v1", "lexical-retention-v2", "lexical-v3"]
