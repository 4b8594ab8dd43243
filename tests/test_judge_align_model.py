"""`crucible judge align --judge anthropic|openai`: a model judge aligned by few-shot examples from the labels.

End to end through the CLI against the local Messages and OpenAI-compatible doubles (tests/mock_anthropic.py,
tests/mock_openai.py): the cross-validated report (the offline path's), examples balanced per class and never
from the fold they judge (read from what the doubles received), the cost estimate and --max-cost before any
request, the plain JSON file and its identity in the prompt version, a hand-edited file refused, and a run
judged by ``--crucible-judge=aligned:FILE`` sending the examples in its prompts' stable prefix."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import crucible_cli, db_rows, free_port, made_once, returns_conftest, write_project
from mock_anthropic import MockAnthropic, default_verdict, system_text

from pytest_crucible.judge.aligned import identity_of
from pytest_crucible.judge.select import JudgeSetupError, make_judge
from pytest_crucible.labels.fewshot import select_examples, stratified_folds

CALIBRATION = Path(__file__).resolve().parent / "data" / "calibration"
KEY = "sk-ant-test-fewshot-0000"
EXAMPLE_RE = re.compile(r'<example index="\d+">\n(?P<text>.*?)\nPeople\'s verdict: (?P<label>[^\n]*)\n</example>', re.DOTALL)
INTRO = "Examples labelled by the people this judge is aligned to"


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "labels.jsonl"
    path.write_text("".join((CALIBRATION / name).read_text(encoding="utf-8") for name in ("labels_dev.jsonl", "labels_test.jsonl")),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def dev_labels(tmp_path_factory) -> Path:
    """The 80 development cases and the test cases labelled `missing` (the class the judge decides least often):
    enough of every class, for the tests that align once more to check something other than the figures, at 92
    cases' requests instead of 160's."""
    path = tmp_path_factory.mktemp("dev-labels") / "labels.jsonl"
    missing = [line for line in (CALIBRATION / "labels_test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
               if json.loads(line)["labels"]["crag"] == "missing"]
    path.write_text((CALIBRATION / "labels_dev.jsonl").read_text(encoding="utf-8") + "".join(missing), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server():
    mock = MockAnthropic().start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANTHROPIC_API_KEY", KEY)
        patch.setenv("ANTHROPIC_BASE_URL", mock.base_url)
        yield mock
    mock.stop()


@pytest.fixture(scope="module")
def aligned(labels: Path, server: MockAnthropic, tmp_path_factory):
    """The few-shot alignment of Claude on the 160 labelled cases: the file, what was printed, what was sent (made
    once per test session, helpers.made_once: the tests only read it)."""
    server.responder = claims_of_the_answer

    def align(folder: Path) -> dict:
        server.received.clear()
        result = crucible_cli("judge", "align", labels, "--judge", "anthropic", "-o", folder / "claude.json")
        assert result.ret == 0, result.errlines
        return {"ret": int(result.ret), "outlines": result.outlines, "errlines": result.errlines, "bodies": server.message_bodies()}

    folder, made = made_once(tmp_path_factory, "aligned-claude", align)
    server.received.clear()
    return folder / "claude.json", pytest.RunResult(made["ret"], made["outlines"], made["errlines"], 0.0), made["bodies"]


def claims_of_the_answer(request) -> dict:
    """The mock's verdicts, with one claim per answer (its text), so that each case's entailment request is its own."""
    if request.kind == "claims":
        match = re.search(r"<text>\n(?P<text>.*?)\n</text>", request.user, re.DOTALL)
        return {"claims": [match["text"][:200] if match else "The answer says something."]}
    return default_verdict(request)


def examples_in(body: dict) -> list[tuple[str, str]]:
    return [(m["text"], m["label"]) for m in EXAMPLE_RE.finditer(system_text(body))]


def item_text(body: dict) -> str:
    return "".join(block["text"] for block in body["messages"][0]["content"]).strip()


def test_the_report_is_the_offline_paths_and_the_file_holds_balanced_examples(aligned) -> None:
    out, result, _ = aligned
    text = "\n".join(result.outlines)
    assert result.outlines[0].startswith("aligning claude-haiku-5-5 to 160 labelled case(s) from ")
    assert "stratified 5-fold cross-validation, seed 1337" in text and "few-shot: 2 example(s) of each class" in text
    assert "crag: 160 labels compared, 147 decided by the model" in text and "faithful: 147 labels compared" in text
    for title in ("kappa", "binary kappa", "accuracy", "aligned - unaligned kappa", "human / judge"):
        assert f"  {title}" in text
    document = json.loads(out.read_text())
    identity = identity_of(document["contentHash"])
    assert f"wrote {out}: judge {identity} (crag, faithful aligned; in its prompts as few-shot examples)" in text
    assert document["baseJudge"] == {"method": "few-shot", "judge": "anthropic", "model": "claude-haiku-5-5",
                                     "promptVersion": "crucible-v1"}
    crag, faithful = document["quantities"]["crag"], document["quantities"]["faithful"]
    assert crag["method"] == faithful["method"] == "few-shot"
    assert sorted(e["label"] for e in crag["examples"]) == sorted(["perfect", "acceptable", "missing", "incorrect"] * 2)
    assert sorted(e["label"] for e in faithful["examples"]) == [False, False, True, True]
    assert {"kappa", "kappaCi", "accuracy", "confusion"} <= set(crag["cv"]["aligned"])


def test_the_cost_estimate_is_printed_before_any_request(aligned) -> None:
    _, result, _ = aligned
    [line] = [line for line in result.errlines if "judge cost estimate" in line]
    assert re.fullmatch(r"crucible: judge cost estimate: \d+ requests \(\d+ to judge the labelled cases unaligned, "
                        r"\d+ cross-validated with examples\), ~[\d,]+ input \+ ~[\d,]+ output tokens, \$\d+\.\d\d with "
                        r"claude-haiku-5-5", line), line


def test_examples_never_come_from_the_fold_they_judge(aligned) -> None:
    _, _, bodies = aligned
    folds: dict[str, list[dict]] = defaultdict(list)
    for body in bodies:
        if INTRO in system_text(body):
            assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}  # the examples are in the cached prefix
            assert body["system"][-1]["text"].startswith(INTRO)
            folds[body["system"][-1]["text"]].append(body)
    kinds = [re.search(r"Judge task: [\w.-]+/(\w+)", system_text(group[0]))[1] for group in folds.values()]
    assert sorted(kinds) == ["correctness"] * 5 + ["entailment"] * 5  # one set of examples per fold and quantity
    assert sum(len(group) for group in folds.values()) == 147 + 147  # every decided case judged once, with examples
    for group in folds.values():
        shown = {text for text, _ in examples_in(group[0])}
        judged = {item_text(body) for body in group}
        assert shown and not shown & judged, "an example came from the fold it judges"
        labels = [label for _, label in examples_in(group[0])]
        assert len(set(labels)) in (2, 4) and all(labels.count(label) == 2 for label in labels)  # balanced


def test_folds_are_stratified_and_examples_balanced_with_the_unaligned_mistakes_first() -> None:
    labels = ["a"] * 10 + ["b"] * 5
    folds = stratified_folds(labels, 5, seed=7)
    assert sorted(p for fold in folds for p in fold) == list(range(15))
    assert all([labels[p] for p in fold].count("a") == 2 and [labels[p] for p in fold].count("b") == 1 for fold in folds)
    assert stratified_folds(labels, 5, seed=7) == folds != stratified_folds(labels, 5, seed=8)
    unaligned = ["a"] * 7 + ["b"] * 3 + ["b"] * 4 + ["a"]  # wrong: positions 7-9 (a labelled as b) and 14 (b as a)
    picked = select_examples(range(15), labels, unaligned, ["a", "b"], 2, seed=7)
    assert [labels[p] for p in picked] == ["a", "a", "b", "b"]
    assert set(picked[:2]) <= {7, 8, 9} and 14 in picked[2:]
    assert len(select_examples(range(15), labels, unaligned, ["a", "b"], 6, seed=7)) == 6 + 5  # all a class has


def test_the_prompt_version_names_the_examples(aligned, dev_labels: Path, server: MockAnthropic, tmp_path: Path) -> None:
    out, _, _ = aligned
    other = tmp_path / "one.json"
    assert crucible_cli("judge", "align", dev_labels, "--judge", "anthropic", "-o", other, "--examples", "1",
                        "--only", "crag").ret == 0
    first, second = make_judge(f"aligned:{out}"), make_judge(f"aligned:{other}")
    try:
        assert first.model == second.model == "claude-haiku-5-5"
        versions = {judge.prompt_version for judge in (first, second)}
        assert versions == {f"crucible-v1+{identity_of(json.loads(path.read_text())['contentHash'])}" for path in (out, other)}
        assert len(versions) == 2
        assert first.prompt_version_for("correctness") == first.prompt_version
        assert first.prompt_version_for("relevance") == "umbrela-v1"  # kinds with prompts of their own keep them
        assert set(first.examples) == {"correctness", "entailment"} and set(second.examples) == {"correctness"}
    finally:
        first.close()
        second.close()


def test_max_cost_refuses_before_any_request_and_writes_nothing(labels: Path, server: MockAnthropic, tmp_path: Path) -> None:
    server.received.clear()
    out = tmp_path / "never.json"
    result = crucible_cli("judge", "align", labels, "--judge", "anthropic", "-o", out, "--max-cost", "0.01")
    assert result.ret == 2
    assert any("judge cost estimate" in line for line in result.errlines)
    assert any(line.startswith("crucible: --max-cost=0.01: the estimated cost $") and "nothing was sent and nothing written" in line
               for line in result.errlines), result.errlines
    assert server.received == [] and not out.exists()


def test_a_judge_that_cannot_be_reached_is_named_never_taken_for_too_few_labels(labels: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # nothing listens there: every request fails (the circuit opens)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    out = tmp_path / "never.json"
    result = crucible_cli("judge", "align", labels, "--judge", "anthropic", "-o", out)
    assert result.ret == 2 and not out.exists()
    refusal = next(line for line in result.errlines if line.startswith(f"crucible: {labels}: "))
    assert "the judge failed on" in refusal and f"judge unreachable at 127.0.0.1:{port}" in refusal, result.errlines
    assert "labelled case(s) the judge decides" not in refusal  # not "label more answers"
    assert result.errlines[-1].startswith("HINT: check the judge")


def test_a_hand_edited_few_shot_file_is_refused(aligned, tmp_path: Path) -> None:
    out, _, _ = aligned
    document = json.loads(out.read_text())
    document["quantities"]["crag"]["examples"][0]["label"] = "incorrect"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document, indent=2))
    with pytest.raises(JudgeSetupError) as refused:
        make_judge(f"aligned:{edited}")
    message = str(refused.value)
    assert "field 'contentHash': does not match the file's content" in message
    assert f"HINT: re-align with your labels: crucible judge align LABELS.jsonl --judge anthropic -o {edited} --force" in message


def test_an_openai_compatible_model_aligns_too(dev_labels: Path, mock_openai, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fewshot-openai-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", mock_openai.base_url)
    out = tmp_path / "openai.json"
    result = crucible_cli("judge", "align", dev_labels, "--judge", "openai", "--judge-model", "gpt-4.1-mini", "-o", out,
                          "--only", "crag")
    assert result.ret == 0, result.errlines
    document = json.loads(out.read_text())
    assert document["baseJudge"]["judge"] == "openai" and document["baseJudge"]["model"] == "gpt-4.1-mini"
    [decided] = [int(m[2]) for line in result.outlines if (m := re.search(r"crag: (\d+) labels compared, (\d+) decided", line))]
    assert 30 <= decided <= 80
    systems = [body["messages"][0]["content"] for body in mock_openai.chat_bodies()]
    assert sum(INTRO in system for system in systems) == decided  # each decided case judged once more, with examples
    judge = make_judge(f"aligned:{out}")
    try:
        assert judge.prompt_version == f"crucible-v1+{identity_of(document['contentHash'])}"
    finally:
        judge.close()


CONFTEST = returns_conftest("You can return product {item.id} within 30 days [S1].")


def test_a_run_judged_by_the_aligned_file_sends_the_examples(aligned, pytester: pytest.Pytester, server: MockAnthropic) -> None:
    out, _, _ = aligned
    items = [{"id": f"c-{i}", "question": f"What is the return window for product {i}?",
              "reference": "The return window is 30 days.", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}
             for i in range(3)]
    project = write_project(pytester, items, CONFTEST, ini="crucible_outcome = record\ncrucible_judge = aligned:judges/aligned.json")
    (project.path / "judges").mkdir()
    (project.path / "judges" / "aligned.json").write_text(out.read_text())
    server.received.clear()
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    identity = identity_of(json.loads(out.read_text())["contentHash"])
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for body in server.message_bodies():
        by_kind[re.search(r"Judge task: [\w.-]+/(\w+)", system_text(body))[1]].append(body)
    assert by_kind["correctness"] and by_kind["entailment"]
    for kind, bodies in by_kind.items():
        carries = [INTRO in system_text(body) for body in bodies]
        assert all(carries) if kind in ("correctness", "entailment") else not any(carries), kind
    [(model, version)] = db_rows(project, "SELECT judge_model, judge_prompt_version FROM runs")
    assert (model, version) == ("claude-haiku-5-5", f"crucible-v1+{identity}")
    result.stdout.fnmatch_lines([f"*few-shot {identity} (crag, faithful aligned)*"])


def test_a_judge_of_your_own_that_is_a_model_judge_aligns_by_its_import_path(dev_labels: Path, server: MockAnthropic,
                                                                            tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "team_judges.py").write_text(
        "from pytest_crucible.judge.anthropic_judge import AnthropicJudge\n\n\n"
        "class TeamClaude(AnthropicJudge):\n"
        "    def __init__(self, model='claude-haiku-5-5'):\n"
        "        super().__init__(model, max_retries=0, timeout=5.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "team.json"
    result = crucible_cli("judge", "align", dev_labels, "--judge", "team_judges:TeamClaude", "-o", out, "--only", "crag")
    assert result.ret == 0, result.errlines
    document = json.loads(out.read_text())
    assert document["baseJudge"]["judge"] == "team_judges:TeamClaude"
    judge = make_judge(f"aligned:{out}")
    try:
        assert type(judge).__name__ == "TeamClaude" and set(judge.examples) == {"correctness"}
        assert judge.prompt_version == f"crucible-v1+{identity_of(document['contentHash'])}"
    finally:
        judge.close()
