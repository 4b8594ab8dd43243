"""The public API type-checks for a user who runs ``mypy --strict`` on their tests: the lazily loaded
names (``PipelineResult``, ``Retrieved``, ``ItemScore``, ``CrucibleWarning``) are their classes, not
``Any``, and ``@crucible.metric`` is a typed decorator (the package ships ``py.typed``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[dev]' installs it)")

USER_CODE = textwrap.dedent('''
    from __future__ import annotations

    import warnings
    from typing import Any

    import pytest_crucible as crucible
    from pytest_crucible import CrucibleWarning, ItemScore, PipelineResult, Retrieved


    @crucible.golden("golden/faq.jsonl", questionType="multi_hop")
    def test_answers(golden_item: Any) -> None:
        pass


    @crucible.metric("answerWords", better="lower")
    def answer_words(item: Any, result: PipelineResult, *, config: Any) -> float | None:
        return float(len((result.answer or "").split()))


    @crucible.metric
    def cited(item: Any, result: PipelineResult, *, config: Any) -> float | None:
        return float(len(result.citations))


    def pipeline(question: str) -> PipelineResult:
        return PipelineResult(answer=question, retrieved=[Retrieved(chunk_id="a#1", doc_id="a", text="t", score=1.0)])


    def item_of(score: ItemScore) -> str:
        return score.item_id


    class StrictWarning(CrucibleWarning):
        pass


    warnings.simplefilter("error", CrucibleWarning)
    answer_words({}, pipeline("q"), config={})
    assert cited.name == "cited"
''')


@pytest.mark.slow
def test_the_public_api_type_checks_under_mypy_strict(tmp_path) -> None:
    (tmp_path / "test_user.py").write_text(USER_CODE, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
                           "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_wrong_direction_is_a_type_error(tmp_path) -> None:
    # the check above can fail: a typo in ``better`` is caught before any session runs
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        from typing import Any
        import pytest_crucible as crucible

        @crucible.metric("answerWords", better="hihger")
        def answer_words(item: Any, result: Any, *, config: Any) -> float | None:
            return None
    '''), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
                           "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "better" in done.stdout, done.stdout + done.stderr
