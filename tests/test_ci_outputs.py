"""Where the verdict reaches reviewers, through pytest itself: a Markdown file, the GitHub Actions step summary
and annotations, CSV and OpenMetrics exports, an MLflow tracking store (a real one, on disk)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import crucible_cli, free_port, write_project
from test_gate_e2e import CONFTEST, ITEMS, N_ITEMS

HOSTILE = {"id": "g-999", "question": "Why `rm` | <script>x</script>\n::error::owned =SUM(A1)",
           "citations": [{"docId": "absent", "mode": "required"}]}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_mode = component\ncrucible_workspace = shop",
                         configs={"base.json": {}, "degraded.json": {"degrade": True}})


def in_actions(monkeypatch, pytester: pytest.Pytester) -> str:
    summary = pytester.path / "step-summary.md"
    summary.write_text("# an earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    return str(summary)


def regressed_run(project: pytest.Pytester, *args: str, before=None, subprocess: bool = False) -> pytest.RunResult:
    """A baseline, then a run whose retrieval regressed, compared with it (``before``: called between the two;
    ``subprocess``: the second in a process of its own)."""
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    if before is not None:
        before()
    run = project.runpytest_subprocess if subprocess else project.runpytest
    return run("--crucible-config=degraded.json", "--crucible-baseline=latest", *args)


def test_a_regression_in_github_actions_reaches_the_step_summary_and_the_annotations(project, monkeypatch) -> None:
    summaries: list[str] = []
    result = regressed_run(project, before=lambda: summaries.append(in_actions(monkeypatch, project)))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = Path(summaries[0]).read_text()
    assert text.startswith("# an earlier step\n")  # appended, never replaced
    ours = text.split("# an earlier step\n", 1)[1].lstrip("\n").splitlines()
    assert ours[0] == "<!-- crucible:shop -->"
    assert re.fullmatch(r"\*\*GATE FAILED\*\*: 2 of \d+ gated metrics regressed", ours[1]), ours[1]
    assert any(line.startswith("| ndcgAt10 |") and line.endswith("| **regressed** |") for line in ours)
    assert "<summary>Items that changed most" in text
    commands = [line for line in result.outlines if line.startswith("::")]
    assert any(re.fullmatch(r"::error title=crucible gate::ndcgAt10 regressed 0\.\d+ -> 0\.\d+ \(p [<=] 0\.\d+\)", c) for c in commands), commands
    assert any(c.startswith("::error title=crucible gate::mrr regressed") for c in commands)


def test_the_step_summary_is_written_once_under_xdist(project, monkeypatch) -> None:
    pytest.importorskip("xdist")
    summary = in_actions(monkeypatch, project)
    result = regressed_run(project, "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert Path(summary).read_text().count("<!-- crucible:shop -->") == 2  # the baseline's run and this one, one each


def test_an_item_that_fails_points_at_its_golden_line_and_hostile_text_injects_nothing(pytester, monkeypatch) -> None:
    project = write_project(pytester, [*ITEMS[:7], HOSTILE], CONFTEST, ini="crucible_mode = component")
    summary = in_actions(monkeypatch, project)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = next(n for n, text in enumerate((project.path / "golden_set.jsonl").read_text().splitlines(), 1) if "g-999" in text)
    item = [c for c in result.outlines if c.startswith("::error title=crucible item g-999")]
    assert len(item) == 1 and item[0].startswith(f"::error title=crucible item g-999,file=golden_set.jsonl,line={line}::retrieval_miss")
    # Nothing the golden set holds starts a workflow command of its own, and the summary shows it as text.
    assert not [c for c in result.outlines if c.startswith("::error::")]
    # The run's summary lines are in a fenced block there: text, never HTML (the fence outlasts any backticks).
    text = Path(summary).read_text()
    outside = "".join(re.split(r"(?ms)^(`{3,})text$.*?^\1$", text)[0::2])
    assert "<script>" not in outside and "```text" in text


def test_an_unwritable_step_summary_is_a_warning_and_changes_no_verdict(project, monkeypatch) -> None:
    in_actions(monkeypatch, project)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "no-such-folder" / "summary.md"))
    result = project.runpytest("--crucible-config=base.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["WARNING could not write the step summary to *no-such-folder*summary.md (GITHUB_STEP_SUMMARY)*"])


def test_the_step_summary_can_be_turned_off(project, monkeypatch) -> None:
    summaries: list[str] = []
    result = regressed_run(project, "-o", "crucible_step_summary=false", before=lambda: summaries.append(in_actions(monkeypatch, project)))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert Path(summaries[0]).read_text() == "# an earlier step\n"
    assert not [line for line in result.outlines if line.startswith("::")]


def test_outside_github_actions_nothing_is_printed_for_it(project, monkeypatch) -> None:
    result = regressed_run(project)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert not [line for line in result.outlines if line.startswith("::")]


def test_the_markdown_file_says_failed_refused_and_passed(project) -> None:
    path = project.path / "comment.md"
    result = regressed_run(project, f"--crucible-markdown={path}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert path.read_text().splitlines()[1].startswith("**GATE FAILED**: ")
    # Too few pairs: refused, and the comment says so on its first line.
    result = project.runpytest("--crucible-config=base.json", "--crucible-baseline=latest", "-k", "g-001 or g-002",
                               "-o", "crucible_min_pairs=6", f"--crucible-markdown={path}")
    first = path.read_text().splitlines()[1]
    assert first.startswith(("**GATE REFUSED**", "**not gated: subset")), first
    result = project.runpytest("--crucible-config=base.json", f"--crucible-markdown={path}")
    assert result.ret == pytest.ExitCode.OK
    assert path.read_text().splitlines()[1].startswith("**crucible run ")


def test_compare_prints_markdown_and_csv_with_the_gates_exit_code(project) -> None:
    regressed_run(project)
    db = str(project.path / ".crucible" / "crucible.db")
    runs = json.loads(crucible_cli("runs", "--json", "--db", db, "--all-workspaces").stdout.str())
    baseline, candidate = runs[-1]["id"], runs[0]["id"]
    markdown = crucible_cli("compare", baseline, candidate, "--db", db, "--format", "markdown")
    assert markdown.ret == 1
    assert markdown.stdout.lines[1].startswith("**GATE FAILED**: ")
    table = crucible_cli("compare", baseline, candidate, "--db", db, "--format", "csv")
    assert table.ret == 1
    rows = list(csv.DictReader(io.StringIO(table.stdout.str())))
    ndcg = [row for row in rows if row["metric"] == "ndcgAt10"]
    assert len(ndcg) == N_ITEMS and {row["worse"] for row in ndcg} == {"true", "false"}
    assert "GATE FAILED ndcgAt10 regressed" in table.stderr.str()


def test_export_writes_csv_and_openmetrics(project) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    db = str(project.path / ".crucible" / "crucible.db")
    done = crucible_cli("export", "latest", "--db", db, "--format", "csv", "-o", "-", "--workspace", "shop")
    assert done.ret == 0
    rows = list(csv.DictReader(io.StringIO(done.stdout.str())))
    assert len(rows) == N_ITEMS and {"id", "kind", "question", "outcome", "error_class", "ndcgAt10", "latency_ms"} <= set(rows[0])
    metrics = crucible_cli("export", "latest", "--db", db, "--format", "openmetrics", "-o", "-", "--workspace", "shop").stdout.str()
    lines = metrics.splitlines()
    assert lines[-1] == "# EOF" and all(re.fullmatch(r"crucible_[A-Za-z0-9_]+ -?[0-9.e+-]+", line) for line in lines[:-1])
    assert any(line.startswith("crucible_ndcgAt10 ") for line in lines)


def refuse_import(monkeypatch, package: str) -> None:
    """Imports of ``package`` fail from now on, as if it were not installed."""
    import builtins

    real_import = builtins.__import__

    def refused(name, *args, **kwargs):
        if name.split(".")[0] == package:
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refused)


def test_parquet_is_a_table_of_every_item(project) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    db, out = str(project.path / ".crucible" / "crucible.db"), project.path / "run.parquet"
    assert crucible_cli("export", "latest", "--db", db, "--format", "parquet", "-o", str(out), "--workspace", "shop").ret == 0
    table = pq.read_table(out)
    assert table.num_rows == N_ITEMS and {"id", "question", "ndcgAt10", "latency_ms"} <= set(table.column_names)


def test_parquet_without_pyarrow_names_the_extra(project, monkeypatch) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    refuse_import(monkeypatch, "pyarrow")
    db = str(project.path / ".crucible" / "crucible.db")
    done = crucible_cli("export", "latest", "--db", db, "--format", "parquet", "-o", str(project.path / "run.parquet"),
                         "--workspace", "shop")
    assert done.ret == 2
    assert "pyarrow" in done.stderr.str() and "pytest-crucible[parquet]" in done.stderr.str()


def _mlflow_installed() -> bool:
    # Looked up, never imported: MLflow's imports, once in this process, break the in-process runs of later tests.
    return importlib.util.find_spec("mlflow") is not None


_READ_MLFLOW_STORE = """
import json, sys
import mlflow
uri = sys.argv[1]
runs = mlflow.search_runs(experiment_names=["crucible/shop"], output_format="list")
client = mlflow.MlflowClient(tracking_uri=uri)
print(json.dumps([{"tags": r.data.tags, "params": r.data.params, "metrics": r.data.metrics,
                   "artifacts": sorted(a.path for a in client.list_artifacts(r.info.run_id))} for r in runs]))
"""


def test_a_run_is_logged_to_a_real_mlflow_store(project, monkeypatch) -> None:
    if not _mlflow_installed():
        pytest.skip("MLflow is not installed (the mlflow extra)")
    store = project.path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's on-disk store, the one needing no server
    result = regressed_run(project, "--crucible-mlflow", "--junitxml=junit.xml", subprocess=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    read = subprocess.run([sys.executable, "-c", _READ_MLFLOW_STORE, store.as_uri()],
                          capture_output=True, text=True, check=True, timeout=120)
    runs = json.loads(read.stdout.strip().splitlines()[-1])
    assert len(runs) == 1  # only the run that asked for it
    run = runs[0]
    assert run["tags"]["crucible.verdict"] == "failed" and run["tags"]["crucible.run_id"]
    assert run["tags"]["crucible.config_hash"] and run["params"]["degrade"] == "true"
    assert 0 <= run["metrics"]["ndcgAt10"] <= 1
    assert {"crucible_items.csv", "junit.xml"} <= set(run["artifacts"])


def test_a_tracker_that_is_down_is_a_warning_never_a_changed_verdict(project, monkeypatch) -> None:
    if not _mlflow_installed():
        pytest.skip("MLflow is not installed (the mlflow extra)")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    result = project.runpytest_subprocess("--crucible-config=base.json", "--crucible-mlflow")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["WARNING could not log run * to MLflow at http://127.0.0.1:*",
                                 "HINT: the run and its verdict are in the store as usual*"])


def test_mlflow_asked_for_but_not_installed_is_a_usage_error_before_any_test(project, monkeypatch) -> None:
    # A package that fails to import, ahead of the real one on the path: MLflow as if it were not installed.
    hidden = project.mkdir("hidden")
    (hidden / "mlflow").mkdir()
    (hidden / "mlflow" / "__init__.py").write_text("raise ImportError(\"No module named 'mlflow'\")\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH")])))
    result = project.runpytest_subprocess("--crucible-config=base.json", "--crucible-mlflow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --crucible-mlflow needs MLflow, which is not installed*",
                                 "HINT: pip install 'pytest-crucible[[]mlflow[]]'*"])


@pytest.mark.slow
def test_the_comment_renders_as_github_shows_it_with_hostile_text_as_text(pytester, monkeypatch) -> None:
    """The Markdown of a failed gate, rendered as GitHub renders a comment, in a real browser."""
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip(f"{chromium} is not installed (apt-get install -y --no-install-recommends chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed (the dev extra)")
    pytest.importorskip("markdown_it", reason="markdown-it-py is not installed (the dev extra)")
    spec = importlib.util.spec_from_file_location("render_markdown", Path(__file__).parents[1] / "scripts" / "render-markdown.py")
    assert spec is not None and spec.loader is not None
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)

    hostile = HOSTILE["question"]
    items = [{**item, "question": hostile} if item["id"] == "g-001" else item for item in ITEMS]  # g-001 regresses
    project = write_project(pytester, items, CONFTEST, ini="crucible_mode = component\ncrucible_workspace = shop",
                            configs={"base.json": {}, "degraded.json": {"degrade": True}})
    comment = project.path / "comment.md"
    assert regressed_run(project, f"--crucible-markdown={comment}").ret == pytest.ExitCode.TESTS_FAILED
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=render.CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_content(render.github_html(comment.read_text(encoding="utf-8")))
            assert page.locator("script").count() == 0  # the golden set's <script> is text, not an element
            assert page.locator(".comment > p").first.inner_text().startswith("GATE FAILED: 2 of ")
            assert page.locator(".comment > p strong").first.inner_text() == "GATE FAILED"
            gate = page.locator("table").first
            header = [cell.strip() for cell in gate.locator("th").all_inner_texts()]
            assert header == ["metric", "baseline", "this run", "delta", "95% CI", "p", "verdict"]
            ndcg = gate.locator("tr", has_text="ndcgAt10")
            assert ndcg.locator("td").count() == len(header) and ndcg.locator("td strong").inner_text() == "regressed"
            # The changed items are collapsed, as on GitHub; opened, the hostile question is one cell of plain text.
            details = page.locator("details")
            assert details.locator("summary").inner_text().startswith("Items that changed most")
            assert not details.locator("table").is_visible()
            details.locator("summary").click()
            row = details.locator("tr", has_text="g-001").first
            cells = row.locator("td")
            assert cells.count() == 6 and cells.nth(1).inner_text() == " ".join(hostile.split())
            assert row.locator("code, a, em, strong:not(:last-child)").count() <= 1  # at most the bold new value
        finally:
            browser.close()


def test_a_run_that_is_not_there_names_the_runs_that_are(project) -> None:
    assert project.runpytest("--crucible-config=base.json").ret == pytest.ExitCode.OK
    db = str(project.path / ".crucible" / "crucible.db")
    newest = json.loads(crucible_cli("runs", "--json", "--db", db).stdout.str())[0]["id"]
    for argv in (["compare", "01NOPE", "latest", "--format", "markdown"], ["summary", "01NOPE", "--format", "markdown"],
                 ["export", "01NOPE", "--format", "csv", "-o", "items.csv"]):
        result = crucible_cli(*argv, "--db", db)
        assert result.ret == 2, argv
        assert result.errlines[0] == f"crucible: no run matches '01NOPE' in {db}"
        assert result.errlines[1].startswith(f"HINT: the newest runs here are {newest} (base.json, ")
    assert not (project.path / "items.csv").exists()
