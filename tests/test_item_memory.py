"""A finished golden item keeps nothing of crucible's in memory: its golden item is released once its test
has run (and recorded), whether the pipeline is called in the test or ahead of it. Failures still point
at the item's line in its golden file."""

from __future__ import annotations

import pytest
from helpers import write_golden

ITEMS = [{"id": f"m-{i}", "question": f"What does item {i} cost?", "citations": [{"docId": f"doc{i}"}]} for i in range(6)]

CONFTEST = """
import pytest
from pytest_crucible.collection import GOLDEN_ITEM_KEY, SESSION_KEY

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        doc = f"doc{n}" if n != 4 else "elsewhere"   # m-4 misses its required citation
        return {"answer": None, "retrieved": [{"chunk_id": f"{doc}#1", "doc_id": doc, "text": "x"}]}
    return pipeline

def pytest_sessionfinish(session):
    held = sum(GOLDEN_ITEM_KEY in item.stash for item in session.items)
    prefetcher = session.config.stash[SESSION_KEY].items._prefetcher
    waiting = len(prefetcher.items) if prefetcher is not None else 0
    print(f"\\nheld after the run: {held} in items, {waiting} in the prefetcher")

def pytest_runtest_logreport(report):
    if report.when == "call" and report.failed:
        print(f"\\nfailed at {report.location}")
"""


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_golden_items_are_released_after_their_tests(pytester: pytest.Pytester, concurrency: str) -> None:
    write_golden(pytester.path / "golden_set.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("-s", "--crucible-mode=component", f"--crucible-concurrency={concurrency}", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["held after the run: 0 in items, 0 in the prefetcher"])
    # The failure still names the item's own line of the golden file (line 5 holds m-4, 0-based 4).
    result.stdout.fnmatch_lines(["failed at ('golden_set.jsonl', 4, 'golden item m-4')", "*_ golden item m-4 _*"])
