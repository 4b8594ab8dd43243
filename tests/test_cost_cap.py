"""--crucible-max-cost counts what will be spent: the requests the judge cache does not answer.

Before, the cap compared the cold estimate (every request at its price), so a fully cached rerun, which sends
no request, was refused at a cap of $0.01 for an estimate of $0.18. Now the newest stored run's answers are
replayed against the cache (``evaluation/cost.py``): the items whose every request is cached cost nothing,
both figures are printed, and the cap compares the second. The real anthropic SDK, against the local
Messages API double.
"""

from __future__ import annotations

import pytest
from helpers import db_rows, point_anthropic_at, return_window_items, returns_conftest, write_project

pytestmark = pytest.mark.slow

ITEMS = return_window_items("c", 6)

CONFTEST = returns_conftest("You can return product {item.id} within 30 days [S1].")

TINY = "--crucible-max-cost=0.00001"


@pytest.fixture
def project(pytester: pytest.Pytester, mock_anthropic, monkeypatch) -> pytest.Pytester:
    point_anthropic_at(monkeypatch, mock_anthropic, "sk-ant-test-cost-cap-0000")
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_outcome = record\ncrucible_judge = anthropic")


def test_a_cached_rerun_passes_a_tiny_cap_that_a_cold_run_is_refused_at(project: pytest.Pytester, mock_anthropic) -> None:
    cold = project.runpytest_subprocess(TINY)  # nothing cached: refused as before, before any request
    assert cold.ret == pytest.ExitCode.USAGE_ERROR
    cold.stderr.fnmatch_lines(["ERROR: --crucible-max-cost=1e-05: the estimated judge cost $0.0* exceeds it; the run was not started"])
    assert mock_anthropic.counts["messages"] == 0

    filled = project.runpytest_subprocess()  # fills the judge cache
    assert filled.ret == pytest.ExitCode.OK, filled.outlines[-20:]
    filled.stdout.fnmatch_lines(["crucible: judge cost estimate: * $0.0* with claude-haiku-5-5 (before cache hits)"])
    calls = mock_anthropic.counts["messages"]
    assert calls > 0

    rerun = project.runpytest_subprocess(TINY)  # every request cached: nothing to spend, the cap passes
    assert rerun.ret == pytest.ExitCode.OK, rerun.outlines[-20:] + rerun.errlines
    rerun.stdout.fnmatch_lines(["crucible: judge cost estimate: * requests, * $0.0* cold, $0.00 after * cached with claude-haiku-5-5"])
    cached = int(rerun.stdout.str().split(" cached with")[0].rsplit(" ", 1)[1].replace(",", ""))
    requests = int(next(line for line in rerun.outlines if line.startswith("judge ")).split(" requests,")[0].rsplit(" ", 1)[1])
    assert cached == requests  # the replay planned the requests the run then made, all of them cached
    rerun.stdout.fnmatch_lines([f"judge * {requests} requests, {requests} cached, 0 judged, 0 failed*"])
    assert mock_anthropic.counts["messages"] == calls  # no request reached the API
    [(_, first), (_, second)] = db_rows(project, "SELECT id, cost_estimate_usd FROM runs ORDER BY rowid")
    assert first > 0 and second == 0  # the run keeps what it expected to spend

    # One item edited since: its requests are not cached, and its cold estimate alone is compared.
    edited = [dict(item) for item in ITEMS]
    edited[0]["question"] = "What is the return window for product zero, in days?"
    write_project(project, edited, CONFTEST, ini="crucible_outcome = record\ncrucible_judge = anthropic")
    partial = project.runpytest_subprocess(TINY)
    assert partial.ret == pytest.ExitCode.USAGE_ERROR, partial.outlines[:12]
    partial.stderr.fnmatch_lines(["ERROR: --crucible-max-cost=1e-05: the estimated judge cost $0.0* ($0.0* cold, * requests cached) "
                                  "exceeds it; the run was not started"])
    assert mock_anthropic.counts["messages"] == calls
