"""A released offline judge version never changes a verdict.

The cache is keyed by the judge's name and version, and runs judged by ``lexical-v1`` are compared
with runs judged by ``lexical-v1``: a change in its heuristics would make old cache rows lie and
runs look better or worse for nothing. tests/data/judge-verdicts/lexical-vN.json pin the verdicts
of each version on a fixed set of requests (tests/data/judge-verdicts/make.py wrote them); every
version judges them again here. A new behaviour goes into a new version, with its own file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_crucible.judge.select import make_judge
from pytest_crucible.judge.types import REQUEST_TYPES, JudgeFailure

DATA = Path(__file__).resolve().parent / "data" / "judge-verdicts"
VERSIONS = ("lexical-v1", "lexical-v2", "lexical-v3")
KINDS_ANSWERED = {"claims", "entailment", "questions", "usefulness", "relevance", "correctness"}


def pinned(version: str) -> list[dict[str, Any]]:
    data = json.loads((DATA / f"{version}.json").read_text(encoding="utf-8"))
    assert data["judge"] == version
    return data["entries"]


def judged_again(version: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    requests = [REQUEST_TYPES[entry["kind"]].model_validate(entry["request"]) for entry in entries]
    judge = make_judge(version)
    assert (judge.model, judge.prompt_version) == (version, version)
    out = []
    for entry, verdict in zip(entries, judge.judge(requests)):
        answer = ({"failure": verdict.model_dump(mode="json")} if isinstance(verdict, JudgeFailure)
                  else {"verdict": verdict.model_dump(mode="json")})
        out.append({"kind": entry["kind"], "request": entry["request"], **answer})
    return out


def first_difference(expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> str:
    for index, (want, have) in enumerate(zip(expected, got)):
        if want != have:
            request = json.dumps(want["request"], ensure_ascii=False)[:300]
            return (f"request {index} ({want['kind']}): {request}\n"
                    f"  pinned: {json.dumps(want.get('verdict') or want.get('failure'), ensure_ascii=False)}\n"
                    f"  now:    {json.dumps(have.get('verdict') or have.get('failure'), ensure_ascii=False)}")
    return f"{len(expected)} pinned entries, {len(got)} judged"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_released_version_gives_its_pinned_verdicts(version: str) -> None:
    expected = pinned(version)
    got = judged_again(version, expected)
    assert got == expected, (f"{version} changed a verdict; a new behaviour belongs in a new judge version "
                             f"(judge/select.py), never in a released one:\n{first_difference(expected, got)}")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_pinned_requests_cover_every_kind_the_offline_judge_answers(version: str) -> None:
    entries = pinned(version)
    assert len(entries) >= 80
    answered = {entry["kind"] for entry in entries if "verdict" in entry}
    assert answered == KINDS_ANSWERED
    # and the kinds it cannot answer come back as failures, never as a default verdict
    failed = {entry["kind"] for entry in entries if "failure" in entry}
    assert {"rubric", "generate", "answer_check"} <= failed


def test_the_versions_disagree_somewhere() -> None:
    """Three files of the same verdicts would pin one judge three times, not three judges."""
    def contents(version: str) -> list[dict[str, Any]]:
        return [{k: v for k, v in entry.get("verdict", {}).items() if k not in ("judge_model", "prompt_version")}
                for entry in pinned(version)]

    v1, v2, v3 = (contents(version) for version in VERSIONS)
    assert v1 != v2 and v2 != v3


def test_a_changed_verdict_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure says which request changed and how, so the change can be found."""
    entries = pinned("lexical-v1")[:5]
    changed = json.loads(json.dumps(entries))
    changed[3]["verdict" if "verdict" in changed[3] else "failure"] = {"changed": True}
    message = first_difference(changed, entries)
    assert message.startswith(f"request 3 ({entries[3]['kind']})")
    assert '"changed": true' in message
