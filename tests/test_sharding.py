"""Scale-out with pytest-split: the sharding recipe of docs/ci.md, run as written.

The GitHub Actions workflow of docs/ci.md ("Sharding across CI machines (pytest-split)") is read
from the page and played here step by step: the matrix and the run id are filled in, `pytest` runs
through pytester, `crucible` through its CLI entry point, and the artifacts are files copied from
the upload step's path to the download step's. The sharded run, merged, must be the same golden set
run unsharded, item by item and metric by metric.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("pytest_split", reason="pytest-split is not installed (pip install -e '.[dev]' installs it)")
yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (pip install -e '.[dev]' installs it)")

from helpers import RANKED_CONFTEST, write_golden  # noqa: E402

# pytester's in-process runs drop the modules an inner session imported, so each of the many runs
# below would import the plugin's session, scoring and reporting modules again: import them once, here.
import pytest_crucible.evaluation.answers  # noqa: E402
import pytest_crucible.evaluation.concurrency  # noqa: E402
import pytest_crucible.evaluation.scoring  # noqa: E402
import pytest_crucible.metrics.errors  # noqa: E402
import pytest_crucible.report.junit  # noqa: E402
import pytest_crucible.report.terminal  # noqa: E402
import pytest_crucible.report.views  # noqa: E402
import pytest_crucible.session  # noqa: E402
import pytest_crucible.workspace  # noqa: E402,F401
from pytest_crucible.cli import main as crucible_main  # noqa: E402
from pytest_crucible.store import Store  # noqa: E402

DOCS_CI = Path(__file__).resolve().parents[1] / "docs" / "ci.md"
SECTION = "## Sharding across CI machines (pytest-split)"
RUN_ID = "7102938475"  # what ${{ github.run_id }} looks like
CONFIG = "example_project/configs/baseline.json"

UNITS = [("returns#p1", "returns"), ("bikes#p2", "bikes"), ("battery#p1", "battery"), ("faq#p9", "faq"),
         ("nowhere#p1", "nowhere")]

# The project's pipeline is the ranked one of the end-to-end tests; this conftest, beside the golden
# files, overrides it with one whose index is down when the test asks for that.
INDEX_DOWN_CONFTEST = '''
import os

import pytest


@pytest.fixture(scope="session")
def crucible_pipeline(crucible_pipeline):
    if os.environ.get("CRUCIBLE_TEST_INDEX_DOWN") != "1":
        return crucible_pipeline

    def pipeline(question, *, item, config, mode):
        raise ConnectionError("the search index is down")
    return pipeline
'''


def golden_items(prefix: str, count: int, offset: int) -> list[dict]:
    """Items citing units at every rank, some beyond K (config: retrievalLimit 3) and some nowhere,
    so that items differ in their metric values."""
    items = []
    for n in range(count):
        m = n + offset
        chunk, doc = UNITS[m % len(UNITS)]
        citations = [{"docId": doc, "chunkId": chunk, "mode": "required"}]
        if m % 3 == 0:
            citations.append({"docId": UNITS[(m + 1) % 4][1], "mode": "acceptable"})
        items.append({"id": f"{prefix}-{n:03d}", "question": f"question {m}", "questionType": "simple" if m % 2 else "multi_hop",
                      "citations": citations})
    return items


def write_project(root: Path, support: int, billing: int) -> list[str]:
    """An example_project/ laid out as this repository's (pytest.ini, conftest.py, golden/, configs/),
    so the recipe's command lines run unchanged. Returns the item ids."""
    project = root / "example_project"
    (project / "golden").mkdir(parents=True)
    (project / "configs").mkdir()
    (project / "pytest.ini").write_text("[pytest]\ncrucible_golden_files = golden_*.jsonl\n"
                                        "crucible_mode = component\ncrucible_outcome = record\n")
    (project / "conftest.py").write_text(RANKED_CONFTEST)
    (project / "golden" / "conftest.py").write_text(INDEX_DOWN_CONFTEST)
    (project / "configs" / "baseline.json").write_text('{"retrievalLimit": 3}')
    ids = []
    for name, items in (("golden_support.jsonl", golden_items("s", support, 0)), ("golden_billing.jsonl", golden_items("b", billing, 7))):
        write_golden(project / "golden" / name, items)
        ids += [item["id"] for item in items]
    return ids


# -- the recipe, read from docs/ci.md --------------------------------------------------------------
def recipe() -> dict:
    page = DOCS_CI.read_text(encoding="utf-8")
    assert SECTION in page, f"docs/ci.md has no section {SECTION!r}"
    section = page[page.index(SECTION):]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    block = re.search(r"```yaml\n(.*?)```", section, flags=re.S)
    assert block, "the sharding section of docs/ci.md has no ```yaml workflow"
    return yaml.safe_load(block.group(1))


def expand(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        assert name in context, f"the recipe uses ${{{{ {name} }}}}, which this test does not fill in"
        return context[name]
    return re.sub(r"\$\{\{\s*([^}]*?)\s*\}\}", value, text)


@dataclass
class Step:
    what: str
    code: int | None  # None: not run (an earlier step failed and this one has no `if: always()`)
    result: pytest.RunResult | None = None


@dataclass
class Job:
    steps: list[Step] = field(default_factory=list)

    @property
    def pytest_result(self) -> pytest.RunResult:
        [result] = [step.result for step in self.steps if step.result is not None]
        return result


def play(job: dict, pytester: pytest.Pytester, artifacts: Path, context: dict[str, str]) -> Job:
    """Run one job's steps in pytester's directory as a runner would: a failed step skips the rest,
    except steps with `if: always()`. Checkout, setup-python and pip install are already done."""
    done = Job()
    failed = False
    for raw in job["steps"]:
        condition = str(raw.get("if", ""))
        if failed and "always()" not in condition:
            done.steps.append(Step(raw.get("run") or raw["uses"], None))
            continue
        uses, command, options = raw.get("uses", ""), raw.get("run"), raw.get("with", {})
        if uses.startswith(("actions/checkout@", "actions/setup-python@")) or (command or "").startswith("pip install "):
            continue
        if uses.startswith("actions/upload-artifact@"):
            target = artifacts / expand(options["name"], context)
            target.mkdir(parents=True, exist_ok=True)
            for pattern in expand(options["path"], context).split():  # upload-artifact's paths are globs
                for path in sorted(pytester.path.glob(pattern)):
                    shutil.copy(path, target / path.name)
            done.steps.append(Step(uses, 0))
            continue
        if uses.startswith("actions/download-artifact@"):
            assert options.get("merge-multiple") is True
            into = pytester.path / options["path"]
            into.mkdir(parents=True, exist_ok=True)
            for artifact in sorted(artifacts.iterdir()):
                if fnmatch.fnmatch(artifact.name, options["pattern"]):
                    for path in artifact.iterdir():
                        shutil.copy(path, into / path.name)
            done.steps.append(Step(uses, 0))
            continue
        assert command, f"a step this test cannot play: {raw}"
        line = expand(" ".join(command.split()), context)
        argv = shlex.split(line)
        if argv[0] == "pytest":
            result = pytester.runpytest(*argv[1:])
            step = Step(line, int(result.ret), result)
        else:
            assert argv[0] == "crucible", f"the recipe runs a command this test does not know: {line}"
            step = Step(line, crucible_main(argv[1:]))
        done.steps.append(step)
        failed = failed or step.code != 0
    return done


def run_shards(pytester: pytest.Pytester, workflow: dict, artifacts: Path, groups=None) -> dict[int, Job]:
    shard = workflow["jobs"]["shard"]
    return {group: play(shard, pytester, artifacts, {"matrix.group": str(group), "github.run_id": RUN_ID})
            for group in (groups or shard["strategy"]["matrix"]["group"])}


def run_merge(pytester: pytest.Pytester, workflow: dict, artifacts: Path) -> Job:
    return play(workflow["jobs"]["merge"], pytester, artifacts, {"github.run_id": RUN_ID})


def make_baseline(pytester: pytest.Pytester, n_items: int) -> str:
    """docs/ci.md's "Once: commit a baseline": the whole set unsharded, exported. Returns its run id."""
    result = pytester.runpytest("example_project", f"--crucible-config={CONFIG}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=n_items)
    (pytester.path / "baselines").mkdir()
    db = "example_project/.crucible/crucible.db"
    assert crucible_main(["export", "latest", "--db", db, "-o", "baselines/main.json"]) == 0
    return json.loads((pytester.path / "baselines" / "main.json").read_text())["run"]["id"]


def scored_items(db: Path, run_id: str) -> dict[str, dict]:
    """item id -> what the store holds for it: its metrics and its result, minus what differs per run
    (ids, timestamps, latency)."""
    store = Store.open_read_only(db)
    try:
        metrics = store.item_metrics(run_id)
        items = {}
        for row in store.results(run_id, decoded=True):
            kept = {key: value for key, value in row.items() if key not in ("run_id", "result_id", "recorded_at", "latency_ms")}
            kept["metrics"] = {name: values[row["item_id"]] for name, values in metrics.items() if row["item_id"] in values}
            items[row["item_id"]] = kept
        return items
    finally:
        store.close()


def stored_run(db: Path, run_id: str) -> dict:
    store = Store.open_read_only(db)
    try:
        return store.get_run(run_id)
    finally:
        store.close()


def test_the_recipe_is_a_github_matrix_with_a_merge_job() -> None:
    workflow = recipe()
    shard, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    assert shard["strategy"] == {"fail-fast": False, "matrix": {"group": [1, 2, 3]}}
    assert merge["needs"] == "shard" and merge["if"] == "${{ !cancelled() }}"
    [pytest_line] = [" ".join(step["run"].split()) for step in shard["steps"] if step.get("run", "").startswith("pytest ")]
    for flag in ("--splits 3", "--group ${{ matrix.group }}", "--crucible-run-id=${{ github.run_id }}",
                 "--crucible-db=shard-${{ matrix.group }}.db"):
        assert flag in pytest_line
    assert any("pytest-split" in step.get("run", "") for step in shard["steps"] if step.get("run", "").startswith("pip install"))
    uploads = [step for step in shard["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    # The database and its -wal file, if one is left (a killed shard): the run is whole only with both.
    assert [step["with"]["path"] for step in uploads] == ["shard-${{ matrix.group }}.db*"] and uploads[0]["if"] == "always()"
    # The merge names every shard: a missing one is an error, never a smaller "complete" run.
    [merge_line] = [step["run"] for step in merge["steps"] if step.get("run", "").startswith("crucible merge")]
    assert "*" not in merge_line and all(f"shards/shard-{n}.db" in merge_line for n in (1, 2, 3))


def test_three_shards_merged_are_the_unsharded_run(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    ids = write_project(pytester.path, support=180, billing=120)
    assert len(ids) == 300
    baseline_id = make_baseline(pytester, 300)
    workflow, artifacts = recipe(), pytester.path / "artifacts"

    shards = run_shards(pytester, workflow, artifacts)
    for group, job in shards.items():
        assert [step.code for step in job.steps] == [0, 0], [step.what for step in job.steps]
        result = job.pytest_result
        result.assert_outcomes(passed=100, deselected=200)  # evenly: no stored durations
        out = result.stdout.str()
        assert "[pytest-split] No test durations found" in out and f"[pytest-split] Running group {group}/3" in out
        assert "[pytest-split] Splitting tests with algorithm: least_duration" in out
        assert f"run {RUN_ID}  status complete  mode component" in out and "items 100 (100 passed)" in out

    capsys.readouterr()
    merge = run_merge(pytester, workflow, artifacts)
    out = capsys.readouterr().out
    assert [(step.what.split()[1], step.code) for step in merge.steps if step.what.startswith("crucible ")] == [
        ("merge", 0), ("compare", 0), ("report", 0)]
    assert f"merged run {RUN_ID} from 3 shard(s) into run.db: 300 items, status complete" in out
    assert "  300 paired items, seed 1337" in out and "gate passed: no significant regression" in out
    assert (pytester.path / "crucible-report.html").stat().st_size > 0
    assert sorted(path.name for path in (artifacts / "crucible").iterdir()) == ["crucible-report.html", "run.db"]

    # The shards are disjoint and cover the set.
    parts = {group: set(scored_items(pytester.path / "shards" / f"shard-{group}.db", RUN_ID)) for group in (1, 2, 3)}
    assert [len(part) for part in parts.values()] == [100, 100, 100]
    assert not (parts[1] & parts[2] or parts[1] & parts[3] or parts[2] & parts[3])
    assert parts[1] | parts[2] | parts[3] == set(ids)

    # The merged run is the unsharded run, item by item.
    merged = scored_items(pytester.path / "run.db", RUN_ID)
    single = scored_items(pytester.path / "example_project" / ".crucible" / "crucible.db", baseline_id)
    assert sorted(merged) == sorted(single) == sorted(ids)
    differing = [item_id for item_id in ids if merged[item_id] != single[item_id]]
    assert differing == []
    assert all(len(item["metrics"]) >= 5 for item in merged.values())
    assert len({item["metrics"]["ndcgAt10"] for item in merged.values()}) > 2  # items differ: the pairing is tested
    run, whole = stored_run(pytester.path / "run.db", RUN_ID), stored_run(
        pytester.path / "example_project" / ".crucible" / "crucible.db", baseline_id)
    assert (run["status"], run["n_items"], run["n_scored"]) == ("complete", 300, 300)
    assert (run["golden_hash"], run["config_hash"], run["mode"]) == (whole["golden_hash"], whole["config_hash"], whole["mode"])


def test_stored_durations_name_the_golden_items_and_still_partition(pytester: pytest.Pytester) -> None:
    """docs/ci.md's balanced shards: --store-durations records golden items under their node ids, and
    shards split by those durations still run every item exactly once."""
    ids = write_project(pytester.path, support=40, billing=20)
    result = pytester.runpytest("example_project", f"--crucible-config={CONFIG}", "--store-durations")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    durations = json.loads((pytester.path / ".test_durations").read_text())
    assert sorted(durations) == sorted(f"golden/golden_{'support' if i.startswith('s') else 'billing'}.jsonl::{i}" for i in ids)

    workflow, artifacts = recipe(), pytester.path / "artifacts"
    # The first item carries the session's setup: make its time dominate, as a slow fixture would.
    durations[min(durations)] = 10 * sum(durations.values())
    (pytester.path / ".test_durations").write_text(json.dumps(durations))
    shards = run_shards(pytester, workflow, artifacts)
    seen: list[str] = []
    for group, job in shards.items():
        assert [step.code for step in job.steps] == [0, 0]
        assert "No test durations found" not in job.pytest_result.stdout.str()
        seen += scored_items(artifacts / f"shard-{group}" / f"shard-{group}.db", RUN_ID)
    assert sorted(seen) == sorted(ids)

    # Why the recipe passes --splitting-algorithm least_duration: pytest-split's default cuts
    # consecutive runs of equal time and leaves the last shard empty; it exits 5, with no database.
    result = pytester.runpytest("example_project", f"--crucible-config={CONFIG}", "--splits", "3", "--group", "3",
                                "--crucible-run-id=other", "--crucible-db=empty-shard.db")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.assert_outcomes(deselected=60)
    assert not (pytester.path / "empty-shard.db").exists()


def test_a_lost_or_failed_shard_never_merges_into_a_complete_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    write_project(pytester.path, support=20, billing=10)
    make_baseline(pytester, 30)
    workflow, artifacts = recipe(), pytester.path / "artifacts"
    run_shards(pytester, workflow, artifacts, groups=[1, 3])

    # Shard 2's runner died before its upload: the merge names the missing file and writes nothing.
    capsys.readouterr()
    merge = run_merge(pytester, workflow, artifacts)
    assert [(step.what.split()[1], step.code) for step in merge.steps if step.what.startswith("crucible ")] == [
        ("merge", 2), ("compare", None), ("report", 2)]
    assert "crucible: shard database not found: shards/shard-2.db" in capsys.readouterr().err
    assert not (pytester.path / "run.db").exists()

    # Shard 2 ran, but its pipeline failed on every item: its items fail (even under crucible_outcome =
    # record), its run is stored as failed, and its database is still uploaded (`if: always()`).
    monkeypatch.setenv("CRUCIBLE_TEST_INDEX_DOWN", "1")
    broken = run_shards(pytester, workflow, artifacts, groups=[2])[2]
    monkeypatch.delenv("CRUCIBLE_TEST_INDEX_DOWN")
    assert [step.code for step in broken.steps] == [1, 0]
    broken.pytest_result.assert_outcomes(failed=10, deselected=20)
    assert stored_run(artifacts / "shard-2" / "shard-2.db", RUN_ID)["status"] == "failed"

    # The merge exits 3 and the gate does not run; the report of what ran is still written (it exits 3
    # too: its comparison with the baseline is refused) and uploaded.
    merge = run_merge(pytester, workflow, artifacts)
    assert [(step.what.split()[1], step.code) for step in merge.steps if step.what.startswith("crucible ")] == [
        ("merge", 3), ("compare", None), ("report", 3)]
    assert f"crucible: the merged run {RUN_ID} is incomplete: shards/shard-2.db is failed\n" in capsys.readouterr().err
    merged = stored_run(pytester.path / "run.db", RUN_ID)
    assert (merged["status"], merged["n_items"]) == ("incomplete", 30)
    assert (artifacts / "crucible" / "crucible-report.html").stat().st_size > 0


def test_a_shard_estimates_the_judge_cost_of_its_own_items(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anthropic")  # imported once here, not again by the inner run
    write_project(pytester.path, support=20, billing=10)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-never-sent")  # --collect-only: no request is made
    result = pytester.runpytest("example_project", f"--crucible-config={CONFIG}", "--crucible-mode=system",
                                "--crucible-judge=anthropic", "--collect-only", "-q", "--splits", "3", "--group", "1")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    out = result.stdout.str()
    assert "10/30 tests collected (20 deselected)" in out
    # 4 judge requests per item without a reference: 40 for the shard's 10 items, not the whole set's 120.
    requests = re.search(r"crucible: judge cost estimate: (\d+) requests", out)
    assert requests is not None and int(requests.group(1)) == 40, out
