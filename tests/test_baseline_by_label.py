"""A baseline chosen by its labels (`latest:branch=main`), everywhere a run is named, and the history:
`crucible runs --label/--since`, `crucible trend` and the report's trend plot."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

import pytest
from helpers import crucible_cli, db_rows, write_project

from pytest_crucible.store import Store, StoreError
from pytest_crucible.verdict.runs import parse_label_args, parse_run_ref, parse_since

N_ITEMS = 30
ITEMS = [{"id": f"g-{i:03d}", "question": f"question {i}", "citations": [{"docId": f"doc{i}", "mode": "required"}]}
         for i in range(N_ITEMS)]

# The relevant document first for every item under "improve"; else second for every third item.
CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        n = int(item.id.split("-")[1])
        rank = 0 if config.get("improve") or n % 3 else 1
        docs = [f"noise{j}" for j in range(5)]
        docs.insert(rank, f"doc{n}")
        return {"answer": "a", "retrieved": [{"chunk_id": d + "#1", "doc_id": d} for d in docs]}
    return pipeline
"""

MALFORMED = {
    "latest:branch": "got 'branch' (no '=')",
    "latest:=x": "got '=x' (no key)",
    "latest:branch=": "got 'branch=' (no value)",
}
EXAMPLE = ("HINT: e.g. latest:branch=main, or latest:branch=main,model=gpt-x (every label must match; "
           "workspace=NAME reads that workspace)")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return write_project(pytester, ITEMS, CONFTEST, ini="crucible_mode = component\ncrucible_outcome = record",
                         configs={"base.json": {}, "improved.json": {"improve": True}})


def run_ids(project: pytest.Pytester) -> list[str]:
    return [row[0] for row in db_rows(project, "SELECT id FROM runs ORDER BY rowid")]


def three_runs(project: pytest.Pytester) -> tuple[str, str, str]:
    """Two runs labelled branch=main (the newer one improved) and, after them, one labelled branch=feature."""
    for config, branch in (("base.json", "main"), ("improved.json", "main"), ("base.json", "feature")):
        assert project.runpytest(f"--crucible-config={config}", f"--crucible-label=branch={branch}").ret == pytest.ExitCode.OK
    first, second, feature = run_ids(project)
    return first, second, feature


# -- the plugin ----------------------------------------------------------------------------------
def test_pytest_compares_with_the_newest_run_of_main(project: pytest.Pytester) -> None:
    first, main, feature = three_runs(project)
    result = project.runpytest("--crucible-config=base.json", "--crucible-baseline=latest:branch=main", "--junitxml=junit.xml")
    current = run_ids(project)[-1]
    # The newest main run measured the improved config, so this one (base) regressed: exit 1. Against the
    # newest run of all (feature, the same base config) nothing would have moved.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    started = db_rows(project, "SELECT started_at FROM runs WHERE id = ?", [main])[0][0]
    result.stdout.fnmatch_lines([f"baseline latest:branch=main is run {main} (started {started})",
                                 f"baseline {main} -> this run {current}", "GATE FAILED ndcgAt10 regressed:*"])
    assert first not in result.stdout.str() and feature not in result.stdout.str()
    properties = {prop.get("name"): prop.get("value")
                  for prop in ET.parse(project.path / "junit.xml").getroot().iter("property")}
    assert properties["crucible.baseline"] == main and properties["crucible.runId"] == current
    assert properties["crucible.verdict"] == "failed"

    # A build of main itself (labelled branch=main) is compared with the main run before it, never with itself;
    # -q keeps one line, which names the run chosen.
    result = project.runpytest("-q", "--crucible-config=improved.json", "--crucible-label=branch=main",
                               "--crucible-baseline=latest:branch=main")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"crucible run {run_ids(project)[-1][:10]} complete, {N_ITEMS} items: *; "
                                 f"baseline latest:branch=main is run {main}; gate passed"])


def test_no_matching_run_is_a_usage_error_naming_the_labels_and_the_values(project: pytest.Pytester) -> None:
    three_runs(project)
    workspace, db = project.path.name, project.path / ".crucible" / "crucible.db"
    result = project.runpytest("--crucible-baseline=latest:branch=release,model=chat")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: --crucible-baseline=latest:branch=release,model=chat: no complete run labelled branch=release,model=chat "
        f"in workspace '{workspace}' of {db}",
        "HINT: the complete runs there carry branch: feature, main; model: chat; a run gets a label from "
        "--crucible-label branch=release or the config file's \"labels\"",
    ])
    assert len(run_ids(project)) == 3  # refused before any test ran: no run was started


@pytest.mark.parametrize("ref", list(MALFORMED))
def test_a_malformed_reference_is_one_usage_error_with_an_example(project: pytest.Pytester, ref: str) -> None:
    result = project.runpytest(f"--crucible-baseline={ref}")  # no database yet: the reference is checked first
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --crucible-baseline={ref}: run reference '{ref}': expected "
                                 f"latest:KEY=VALUE[[],KEY=VALUE...[]], {MALFORMED[ref]}", EXAMPLE])
    assert not (project.path / ".crucible" / "crucible.db").exists() or run_ids(project) == []


# -- the crucible command on the same runs ----------------------------------------------------------
def test_cli_reads_references_runs_and_the_trend(project: pytest.Pytester, monkeypatch) -> None:
    first, main, feature = three_runs(project)
    monkeypatch.chdir(project.path)  # the project's database and workspace, as a user in it would
    from pytest_crucible.workspace import default_db

    db = default_db()  # as the command names it

    result = crucible_cli("show", "latest:branch=main")
    assert result.ret == 0 and f"run {main}  status complete" in result.stdout.str()
    result = crucible_cli("compare", "latest:branch=main", "latest:branch=feature", "--json")
    assert result.ret == 1  # the feature run measured the base config: a regression from main's improved one
    assert (json.loads(result.stdout.str())["a"], json.loads(result.stdout.str())["b"]) == (main, feature)
    result = crucible_cli("report", feature, "--against", "latest:branch=main", "-o", project.path / "r.html")
    assert f"wrote the report of run {feature} against latest:branch=main (run {main}) to " in result.stdout.str()
    result = crucible_cli("report", first, "--against", f"latest:branch=main,workspace={project.path.name}",
                          "-o", project.path / "r.html")
    assert f"(run {main})" in result.stdout.str()  # the report names the newest other main run

    result = crucible_cli("show", "latest:branch=release")
    assert result.ret == 2
    assert result.stderr.lines == [
        f"crucible: no complete run labelled branch=release in workspace '{project.path.name}' of {db}",
        "HINT: the complete runs there carry branch: feature, main; a run gets a label from --crucible-label "
        "branch=release or the config file's \"labels\""]
    for ref, problem in MALFORMED.items():
        result = crucible_cli("compare", ref, "latest")
        assert result.ret == 2
        assert result.stderr.lines == [f"crucible: run reference '{ref}': expected latest:KEY=VALUE[,KEY=VALUE...], {problem}",
                                       EXAMPLE]

    result = crucible_cli("runs", "--label", "branch=main", "--since", "30d")
    assert result.ret == 0
    listed = [line.split()[0] for line in result.stdout.lines[1:]]
    assert listed == [main, first]  # newest first, the feature run left out
    assert [run["id"] for run in json.loads(crucible_cli("runs", "--label", "branch:feature", "--json").stdout.str())] == [feature]
    tomorrow = (datetime.now(timezone.utc) + timedelta(days=1)).date().isoformat()
    assert crucible_cli("runs", "--since", tomorrow).stdout.lines == [f"no runs match in {db} (workspace '{project.path.name}')"]

    result = crucible_cli("trend", "ndcg@10", "--label", "branch=main")
    assert result.ret == 0
    means = {}
    for run_id in (first, main):
        values = [row[0] for row in db_rows(project, "SELECT value FROM item_metrics WHERE run_id = ? AND metric = 'ndcgAt10'",
                                            [run_id])]
        means[run_id] = sum(values) / len(values)
    lines = result.stdout.lines
    assert lines[0] == f"ndcg@10 over 2 complete runs of workspace '{project.path.name}' labelled branch=main, oldest first"
    assert [line.split()[2] for line in lines[2:4]] == [first[:10], main[:10]]
    assert [line.split()[3] for line in lines[2:4]] == [f"{means[first]:.4f}", f"{means[main]:.4f}"]
    config_hashes = dict(db_rows(project, "SELECT id, config_hash FROM runs"))
    assert lines[3].endswith(f"configHash {config_hashes[first][:8]} -> {config_hashes[main][:8]}")
    assert lines[4] == f"trend ▁█  min {means[first]:.4f}  max {means[main]:.4f}  last - first {means[main] - means[first]:+.4f}"

    document = json.loads(crucible_cli("trend", "ndcgAt10", "--label", "branch=main", "--json").stdout.str())
    assert (document["metric"], document["shown"], document["labels"]) == ("ndcgAt10", "ndcg@10", {"branch": "main"})
    assert [(run["runId"], run["n"], run["otherK"]) for run in document["runs"]] == [(first, N_ITEMS, False), (main, N_ITEMS, False)]
    assert [run["mean"] for run in document["runs"]] == pytest.approx([means[first], means[main]])
    assert document["runs"][1]["changed"] == {"configHash": [config_hashes[first], config_hashes[main]]}

    result = crucible_cli("trend", "ndgc@10")
    assert result.ret == 2 and result.stderr.lines[1].startswith("HINT: did you mean ndcg@10")

    # The report of a labelled run plots its headline metrics over the runs with the same labels.
    assert crucible_cli("report", main, "-o", project.path / "main.html").ret == 0
    html = (project.path / "main.html").read_text(encoding="utf-8")
    assert html.count('class="trend-plot"') == 1 and "over 2 runs" in html and f"run {first}" in html
    assert crucible_cli("report", feature, "-o", project.path / "feature.html").ret == 0
    assert 'id="trend"' not in (project.path / "feature.html").read_text(encoding="utf-8")  # the only feature run


# -- the pure parts ------------------------------------------------------------------------------
def test_references_parse_once_for_every_surface() -> None:
    assert parse_run_ref("latest").latest and not parse_run_ref("latest").labels
    ref = parse_run_ref("latest: branch = main ,model=gpt-x,workspace=shop")
    assert (ref.labels, ref.workspace, ref.wanted) == ((("branch", "main"), ("model", "gpt-x")), "shop", "branch=main,model=gpt-x")
    assert not parse_run_ref("latest:branch=main.json").export  # a label's value, not a file
    assert parse_run_ref("baselines/main.json").export and not parse_run_ref("01J9Z3").latest
    for bad, problem in {**MALFORMED, "latest:": "got '' (nothing)", "latest:a=1,a=2": "got 'a=2' ('a' given twice)"}.items():
        with pytest.raises(StoreError) as raised:
            parse_run_ref(bad)
        assert str(raised.value).splitlines() == [f"run reference '{bad}': expected latest:KEY=VALUE[,KEY=VALUE...], {problem}",
                                                  EXAMPLE]
    assert parse_label_args(["branch=main", "model:claude:haiku", "x = a=b"]) == {"branch": "main", "model": "claude:haiku", "x": "a=b"}
    with pytest.raises(ValueError, match="expected KEY:VALUE or KEY=VALUE"):
        parse_label_args(["branch"])
    now = datetime(2025, 6, 30, 12, tzinfo=timezone.utc)
    assert parse_since("30d", now=now) == now - timedelta(days=30)
    assert parse_since("12h", now=now) == now - timedelta(hours=12)
    assert parse_since("2025-06-01", now=now) == datetime(2025, 6, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="expected Nd"):
        parse_since("30x")


def _store_run(store: Store, workspace: str, labels: dict[str, str], *, k: int = 10, status: str = "complete",
               recall: float = 0.5, kinds: tuple[str, ...] = ("retrieval",) * 3) -> str:
    run_id = store.start_run(config_hash="ab" * 32, params={}, resolved={"retrievalLimit": k}, mode="component",
                             outcome_mode="record", workspace=workspace, labels=labels, eval_k=k)
    for i, kind in enumerate(kinds):
        item = {"id": f"q{i}", "question": "Q", "kind": kind}
        store.record_score(run_id, {"item_id": f"q{i}", "question": "Q", "item": item, "outcome": "passed",
                                    "metrics": {"recallAtK": recall + (0.3 if kind == "adversarial" else 0.0), "ndcgAt10": 0.5}})
    store.finish_run(run_id, status=status, golden_hash="g")
    return run_id


def test_trend_marks_runs_measured_at_another_k_and_skips_incomplete_runs(tmp_path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    at_5 = _store_run(store, "shop", {"branch": "main"}, k=5, recall=0.4)
    _store_run(store, "shop", {"branch": "main"}, status="incomplete", recall=0.9)
    newest = _store_run(store, "shop", {"branch": "main"}, recall=0.6)
    store.close()
    result = crucible_cli("trend", "recall@10", "--workspace", "shop", "--db", db)
    assert result.ret == 0
    lines = result.stdout.lines
    assert lines[0] == "recall@10 over 2 complete runs of workspace 'shop', oldest first"
    assert lines[2].split()[2:5] == [at_5[:10], "0.4000*", "3"] and lines[3].split()[2:5] == [newest[:10], "0.6000", "3"]
    assert lines[3].endswith("K 5 -> 10")
    assert lines[4] == "* measured at K = 5, not K = 10 as the newest run: a different ruler (recall@5, not recall@10)"
    # nDCG@10 is cut at 10 whatever K: no mark.
    assert "*" not in "".join(crucible_cli("trend", "ndcg@10", "--workspace", "shop", "--db", db).stdout.lines[2:4])
    result = crucible_cli("trend", "recall@10", "--workspace", "shop", "--label", "branch=dev", "--db", db)
    assert result.stdout.lines == [f"no complete runs of workspace 'shop' labelled branch=dev in {db}",
                                   "HINT: the complete runs there carry branch: main; `crucible runs --label branch=dev` "
                                   "lists the runs, complete or not"]
    # One matching run, but not complete: the no-match names its status.
    store = Store.open(db)
    _store_run(store, "shop", {"branch": "dev"}, status="interrupted")
    store.close()
    result = crucible_cli("show", "latest:branch=dev", "--workspace", "shop", "--db", db)
    assert result.ret == 2
    assert result.stderr.lines[0] == (f"crucible: no complete run labelled branch=dev in workspace 'shop' of {db} "
                                      "(1 run with these labels, none complete: interrupted)")


# -- the HTTP API's compare --------------------------------------------------------------------------
def test_the_api_compare_takes_a_reference_of_the_keys_workspace(tmp_path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from api_server import add_run, client, new_key, serve_in_thread

    db = tmp_path / "crucible.db"
    store = Store.open(db)
    main = add_run(store, workspace="shop", labels={"branch": "main"})
    candidate = add_run(store, workspace="shop", shift=0.2, labels={"branch": "feature"})
    add_run(store, workspace="search-team", labels={"branch": "release"})
    store.close()
    key = new_key(db, "shop", "runs:read")
    with serve_in_thread(db) as url, client(url, key) as http:
        compare = "/api/v1/evals/runs/compare"
        answer = http.get(compare, params={"a": "latest:branch=main", "b": candidate})
        assert answer.status_code == 200
        assert (answer.json()["a"], answer.json()["b"]) == (main, candidate)
        assert http.get(compare, params={"a": "latest:branch=main", "b": "latest"}).json()["b"] == candidate

        missing = http.get(compare, params={"a": "latest:branch=release", "b": candidate})
        assert missing.status_code == 404
        assert missing.json()["message"] == "no complete run labelled branch=release in workspace 'shop'"
        assert missing.json()["hint"].startswith("the complete runs there carry branch: feature, main;")
        assert str(db) not in missing.text  # a client never sees local paths

        malformed = http.get(compare, params={"a": "latest:branch", "b": candidate})
        assert malformed.status_code == 422
        assert malformed.json()["message"] == ("query: run reference 'latest:branch': expected latest:KEY=VALUE[,KEY=VALUE...], "
                                               "got 'branch' (no '=')")
        other = http.get(compare, params={"a": "latest:workspace=search-team", "b": candidate})
        assert other.status_code == 403


def test_runs_that_mix_kinds_get_one_trend_per_kind(tmp_path) -> None:
    db = tmp_path / "c.db"
    store = Store.open(db)
    runs = [_store_run(store, "shop", {"branch": "main"}, recall=recall, kinds=("retrieval", "retrieval", "adversarial"))
            for recall in (0.2, 0.4)]
    store.close()
    lines = crucible_cli("trend", "recall@10", "--workspace", "shop", "--db", db).stdout.lines
    assert lines[1] == "these runs mix kinds of question: one table per kind, never a mean across them (--kind KIND shows one)"
    assert lines[2] == "retrieval questions:" and [line.split()[3:5] for line in lines[4:6]] == [["0.2000", "2"], ["0.4000", "2"]]
    assert lines[7] == "adversarial questions:" and [line.split()[3:5] for line in lines[9:11]] == [["0.5000", "1"], ["0.7000", "1"]]
    document = json.loads(crucible_cli("trend", "recall@10", "--workspace", "shop", "--db", db, "--json").stdout.str())
    assert [run["runId"] for run in document["runs"]] == runs and "mean" not in document["runs"][0]
    assert document["runs"][1]["byKind"] == {"retrieval": {"mean": pytest.approx(0.4), "n": 2},
                                             "adversarial": {"mean": pytest.approx(0.7), "n": 1}}
    document = json.loads(crucible_cli("trend", "recall@10", "--workspace", "shop", "--db", db, "--json",
                                       "--kind", "adversarial").stdout.str())
    assert document["kind"] == "adversarial" and [run["mean"] for run in document["runs"]] == pytest.approx([0.5, 0.7])
