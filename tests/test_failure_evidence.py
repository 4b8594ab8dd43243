"""Strict failures show their evidence (the answer, the claim, the assertion, the reference sentence,
the markers, the dates, the confidence), and retrieved chunks without text are not hallucinations.

End to end through pytest (system mode, the offline lexical judge), plus the classes that are easier
to set up through the real scoring path by hand (citation_error, stale)."""

from __future__ import annotations

import pytest
from helpers import db_rows, write_golden

from pytest_crucible.cli import main
from pytest_crucible.evaluation.answers import AnswerInputs, score_answers
from pytest_crucible.evaluation.pipeline import PipelineResult
from pytest_crucible.evaluation.scoring import classify_score, score_item
from pytest_crucible.golden_set.schema import GoldenItem
from pytest_crucible.judge.embed import HashingEmbedder
from pytest_crucible.judge.engine import JudgeEngine
from pytest_crucible.judge.lexical import LexicalJudge

QUESTION = "How long do I have to return a bike?"
REFERENCE = "Bikes can be returned within 30 days of delivery."
TWO_FACTS = {"reference": "Bikes can be returned within 30 days of delivery. Refunds take 5 days.",
             "assertions": [{"text": "Bikes can be returned within 30 days.", "kind": "must"},
                            {"text": "Refunds take 5 days.", "kind": "must"}]}
CITES_RETURNS = {"citations": [{"docId": "returns"}]}

GOLDEN = [
    {"id": "h-1", "question": QUESTION, "reference": REFERENCE, **CITES_RETURNS},
    {"id": "h-2", "question": QUESTION, "reference": REFERENCE, "citations": [{"docId": "returns-2024"}]},
    {"id": "i-1", "question": QUESTION, **TWO_FACTS, **CITES_RETURNS, "metadata": {"confidenceThreshold": 0.5}},
    {"id": "t-1", "question": QUESTION, "reference": REFERENCE, **CITES_RETURNS},
    {"id": "t-2", "question": QUESTION, "reference": REFERENCE, **CITES_RETURNS},
]

CONFTEST = """
import copy
import pytest

RETURNS = {"chunk_id": "returns#p1", "doc_id": "returns", "text": "Bikes can be returned within 30 days of delivery."}
REFUNDS = {"chunk_id": "refunds#p1", "doc_id": "refunds", "text": "Refunds take 5 days after we receive the bike."}
OLD = {"chunk_id": "returns-2024#p1", "doc_id": "returns-2024", "text": "Bikes can be returned within 14 days of delivery."}
NO_TEXT = [{"chunk_id": "returns#p1", "doc_id": "returns"}, {"chunk_id": "refunds#p1", "doc_id": "refunds", "text": " "}]

RESULTS = {
    # a claim the retrieved context does not support
    "h-1": {"answer": "Bikes can be returned within 90 days of delivery [S1].", "retrieved": [RETURNS], "confidence": 0.9},
    # supported by the (old) context, but the judge finds it contradicts the reference
    "h-2": {"answer": "Bikes can be returned within 14 days of delivery [S1].", "retrieved": [OLD], "confidence": 0.7},
    # one of two must-assertions missing, answered below the item's confidence threshold
    "i-1": {"answer": "Bikes can be returned within 30 days of delivery [S1].", "retrieved": [RETURNS, REFUNDS],
            "confidence": 0.4},
    # chunks without text: nothing to check the claims against
    "t-1": {"answer": "Bikes can be returned within 30 days of delivery [S1].", "retrieved": NO_TEXT},
    "t-2": {"answer": "Bikes can be returned within 30 days of delivery.", "retrieved": NO_TEXT},
}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        return copy.deepcopy(RESULTS[item.id])
    return pipeline
"""

WARNING = ("WARNING 2 item(s) returned retrieved chunks without text: the answer metrics that read the context "
           "(faithfulness, contextPrecision, contextRecall, noiseSensitivity) were skipped for them; "
           "return each chunk's text in `retrieved` to measure them")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # the offline lexical judge
    write_golden(pytester.path / "golden_returns.jsonl", GOLDEN)
    pytester.makeconftest(CONFTEST)
    return pytester


@pytest.fixture
def run(project):
    result = project.runpytest("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    return result


def _failure(result, item_id: str) -> list[str]:
    """The lines of one item's failure message: its first line, then the indented evidence lines."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith(f"golden item {item_id}: "))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        block.append(line)
    return block


def test_hallucination_shows_the_answer_the_unsupported_claim_and_the_confidence(run) -> None:
    assert _failure(run, "h-1") == [
        'golden item h-1: hallucination: Answer claim not supported by the retrieved context: '
        '"Bikes can be returned within 90 days of delivery.".',
        '    answer: "Bikes can be returned within 90 days of delivery [S1]."',
        '    unsupported claim: "Bikes can be returned within 90 days of delivery."',
        "    confidence: 0.9",
    ]


def test_hallucination_by_the_judge_shows_the_reference_sentence_it_contradicts(run) -> None:
    first, *evidence = _failure(run, "h-2")
    assert first == "golden item h-2: hallucination: The judge graded the answer incorrect (CRAG -1)."
    assert evidence[:2] == [
        '    answer: "Bikes can be returned within 14 days of delivery [S1]."',
        '    reference sentence the answer contradicts: "Bikes can be returned within 30 days of delivery."',
    ]
    assert evidence[2].startswith("    judge: contradicts the reference sentences: the answer says '14 days' where target 1")
    assert evidence[3:] == ["    confidence: 0.7"]


def test_incomplete_shows_the_unsatisfied_must_assertion_the_answer_and_the_threshold(run) -> None:
    assert _failure(run, "i-1") == [
        "golden item i-1: incomplete: Must-assertion not satisfied: "
        "\"must-assertion 'Refunds take 5 days.' is not stated by the answer\".",
        '    answer: "Bikes can be returned within 30 days of delivery [S1]."',
        "    confidence: 0.4 (below the item's threshold 0.5)",
    ]


def test_long_texts_are_trimmed(project) -> None:
    long_answer = "Bikes can be returned within 90 days of delivery " + "and then some more words " * 20 + "[S1]."
    conftest = (project.path / "conftest.py").read_text().replace(
        '"Bikes can be returned within 90 days of delivery [S1]."', repr(long_answer))
    project.makeconftest(conftest)
    result = project.runpytest("-p", "no:xdist", "-k", "h-1")
    first, answer, claim, _ = _failure(result, "h-1")
    for line in (answer, claim):
        quoted = line.split(": ", 1)[1]
        assert len(quoted) <= 162 and quoted.endswith('..."'), line  # 160 characters and the quotes
    assert len(first) < 260


def test_chunks_without_text_are_not_hallucinations_and_warn_once(run, project, capsys) -> None:
    classes = dict(db_rows(project, "SELECT item_id, error_class FROM results"))
    assert classes["t-1"] == classes["t-2"] == "correct"  # not hallucination, and no citation_error for t-2
    assert classes["h-1"] == "hallucination"
    run.assert_outcomes(passed=2, failed=3)
    assert [line for line in run.outlines if "without text" in line] == [WARNING]

    metrics = {}
    for item_id, metric, value in db_rows(project, "SELECT item_id, metric, value FROM item_metrics"):
        metrics.setdefault(item_id, {})[metric] = value
    for item_id in ("t-1", "t-2"):
        for name in ("faithfulness", "contextPrecision", "contextRecall", "noiseSensitivity"):
            assert name not in metrics[item_id], (item_id, name)
        assert metrics[item_id]["truthfulness"] == 1.0  # graded against the reference all the same
    assert "faithfulness" in metrics["h-1"] and "contextRecall" in metrics["i-1"]

    # `crucible show` reads the same stored rows and says it too.
    capsys.readouterr()
    assert main(["show", "latest", "--db", str(project.path / ".crucible" / "crucible.db")]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if "without text" in line] == [WARNING]


def test_the_warning_is_one_line_in_quiet_mode_too(project) -> None:
    result = project.runpytest("-p", "no:xdist", "-q", "-k", "t-")
    assert result.ret == pytest.ExitCode.OK
    assert [line for line in result.outlines if "without text" in line] == [WARNING]


# -- the classes easier to build by hand, through the real scoring path ---------------------------------
RETURNS = {"chunk_id": "returns#p1", "doc_id": "returns", "text": REFERENCE}
SHIPPING = {"chunk_id": "ship#p1", "doc_id": "ship", "text": "Orders ship within five working days."}
OLD = {"chunk_id": "returns-2024#p1", "doc_id": "returns-2024", "text": "Bikes can be returned within 14 days of delivery.",
       "metadata": {"superseded_by": "returns", "valid_to": "2025-01-31"}}


def evidence(item: dict, result: dict) -> tuple[str, str]:
    golden = GoldenItem.model_validate({"question": QUESTION, **item})
    plain = score_item(golden, PipelineResult.model_validate(result), k=10).to_plain()
    [answer] = score_answers([AnswerInputs.from_score(plain)], JudgeEngine(LexicalJudge()), HashingEmbedder())
    plain.update(assertions=answer.assertions, crag_grade=answer.crag_grade, unsupported_claims=answer.unsupported_claims,
                 supporting_chunk_ids=answer.supporting_chunk_ids, verdicts=answer.verdicts)
    return classify_score(plain, mode="system", today="2026-11-30")


def test_citation_error_shows_the_cited_markers_against_the_supporting_chunks() -> None:
    error_class, text = evidence({"id": "e", "reference": REFERENCE, **CITES_RETURNS},
                                 {"answer": "Bikes can be returned within 30 days of delivery [S2].", "retrieved": [RETURNS, SHIPPING]})
    assert error_class == "citation_error"
    assert text.splitlines()[1:] == ["    cited: ship#p1 [S2]; the chunks that support the claims: returns#p1 [S1]"]


def test_stale_shows_the_chunk_and_its_dates() -> None:
    error_class, text = evidence({"id": "s", "reference": REFERENCE, "dynamism": "slow", "citations": [{"docId": "returns", "mode": "acceptable"}]},
                                 {"answer": "Bikes can be returned within 14 days of delivery [S1].", "retrieved": [OLD, RETURNS]})
    assert error_class == "stale"
    assert text.splitlines()[1:] == [
        "    stale chunk: returns-2024#p1 [S1]: validTo 2025-01-31, supersededBy returns",
        '    answer: "Bikes can be returned within 14 days of delivery [S1]."',
    ]


def test_a_wrong_abstention_shows_its_confidence() -> None:
    error_class, text = evidence({"id": "a", "reference": REFERENCE, **CITES_RETURNS, "metadata": {"confidenceThreshold": 0.5}},
                                 {"answer": "I don't know.", "abstained": True, "confidence": 0.2, "retrieved": [RETURNS]})
    assert error_class == "incomplete"
    assert text.splitlines() == ["The answer abstained on an answerable item.", '    answer: "I don\'t know."',
                                 "    confidence: 0.2 (below the item's threshold 0.5)"]
