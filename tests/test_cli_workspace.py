"""Workspaces in the CLI: reads default to the current project's workspace; ids resolve everywhere."""

from __future__ import annotations

import json

import pytest
from helpers import RANKED_CONFTEST

from pytest_crucible.cli import main
from pytest_crucible.store import Store
from pytest_crucible.workspace import default_workspace, parse_label_filters, reading_workspace


@pytest.fixture(autouse=True)
def no_workspace_from_the_environment(monkeypatch):
    monkeypatch.delenv("CRUCIBLE_WORKSPACE", raising=False)


@pytest.mark.parametrize("name, text, expected", [
    ("pytest.ini", "[pytest]\ncrucible_workspace = shop-ini\n", "shop-ini"),
    ("pytest.ini", "", "proj"),  # pytest.ini marks the project even when empty
    ("pyproject.toml", '[tool.pytest.ini_options]\ncrucible_workspace = "shop-toml"\n', "shop-toml"),
    ("pyproject.toml", '[tool.pytest]\ncrucible_workspace = "shop-native"\n', "shop-native"),
    ("pyproject.toml", '[project]\nname = "x"\n', "proj"),
    ("tox.ini", "[pytest]\ncrucible_workspace = shop-tox\n", "shop-tox"),
    ("setup.cfg", "[tool:pytest]\ncrucible_workspace = shop-cfg\n", "shop-cfg"),
    # pytest's rule: a setup.cfg without [tool:pytest] is no config file; with no setup.py either,
    # the rootdir is the directory pytest runs from.
    ("setup.cfg", "[metadata]\nname = x\n", "deep"),
    ("setup.py", "", "proj"),
    ("pytest.toml", '[pytest]\ncrucible_workspace = "shop-pytest-toml"\n', "shop-pytest-toml"),
    ("pyproject.toml", "this is = = not toml", "proj"),
])
def test_default_workspace_follows_the_project_config(tmp_path, name, text, expected) -> None:
    project = tmp_path / "proj"
    (project / "src" / "deep").mkdir(parents=True)
    (project / name).write_text(text)
    assert default_workspace(project / "src" / "deep", environ={}) == expected
    assert default_workspace(project / "src", environ={"CRUCIBLE_WORKSPACE": "from-env"}) == "from-env"


def test_default_workspace_without_a_project_is_the_directory_name(tmp_path) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert default_workspace(lonely, environ={}) in ("lonely", *[p.name for p in lonely.parents])


def test_pytest_ini_wins_over_pyproject_in_the_same_directory(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ncrucible_workspace = "toml"\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\ncrucible_workspace = ini\n")
    assert default_workspace(tmp_path, environ={}) == "ini"


def test_reading_workspace_and_label_filters() -> None:
    assert reading_workspace("shop", {"shop": 2, "other": 1}) == ("shop", None)
    assert reading_workspace("shop", {}) == ("shop", None)
    assert reading_workspace("shop", {"other": 1, "third": 1}) == ("shop", None)
    workspace, note = reading_workspace("checkout", {"ci-runner": 3})
    assert workspace == "ci-runner" and "only workspace" in note
    assert parse_label_filters(["model:claude:haiku", " mode : dense "]) == {"model": "claude:haiku", "mode": "dense"}
    with pytest.raises(ValueError, match="expected KEY:VALUE"):
        parse_label_filters(["model=x"])


def _db_with_workspaces(path) -> dict[str, str]:
    store = Store.open(path)
    runs = {}
    for name, workspace, labels in (("shop-1", "shop", {"model": "a"}), ("other", "other", {"model": "b"}),
                                    ("shop-2", "shop", {"model": "b", "mode": "rerank"}), ("third", "third", {})):
        run_id = store.start_run(config_hash=name.ljust(64, "0"), params={}, resolved={}, mode="component",
                                 outcome_mode="record", workspace=workspace, labels=labels)
        for item in ("q1", "q2"):
            store.record_score(run_id, {"item_id": item, "question": "Q", "item": {"id": item, "question": "Q"},
                                        "outcome": "passed", "metrics": {"ndcgAt10": 0.5}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        runs[name] = run_id
    store.close()
    return runs


@pytest.fixture
def shop(tmp_path, monkeypatch):
    """The CLI run from inside project 'shop' (workspace from its pytest.ini), on a shared database."""
    project = tmp_path / "checkout"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\ncrucible_workspace = shop\n")
    monkeypatch.chdir(project)
    db = tmp_path / "shared.db"
    return db, _db_with_workspaces(db)


def test_runs_lists_the_current_workspace_with_workspace_and_labels_columns(shop, capsys) -> None:
    db, runs = shop
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert "workspace" in header and header.endswith("labels")
    assert [row.split()[0] for row in rows] == [runs["shop-2"], runs["shop-1"]]
    assert rows[0].endswith("  shop       (defaults)  mode=rerank model=b")
    assert main(["runs", "--all-workspaces", "--db", str(db)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 4
    assert main(["runs", "--workspace", "other", "--json", "--db", str(db)]) == 0
    assert [run["id"] for run in json.loads(capsys.readouterr().out)] == [runs["other"]]
    assert main(["runs", "--all-workspaces", "--label", "model:b", "--json", "--db", str(db)]) == 0
    assert [run["id"] for run in json.loads(capsys.readouterr().out)] == [runs["shop-2"], runs["other"]]
    assert main(["runs", "--config-hash", "shop-1", "--json", "--db", str(db)]) == 0
    assert [run["id"] for run in json.loads(capsys.readouterr().out)] == [runs["shop-1"]]
    assert main(["runs", "--label", "nocolon", "--db", str(db)]) == 2
    assert "expected KEY:VALUE" in capsys.readouterr().err


def test_an_empty_current_workspace_says_where_the_runs_are(shop, monkeypatch, capsys) -> None:
    db, _ = shop
    monkeypatch.setenv("CRUCIBLE_WORKSPACE", "newcomer")
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"no runs in workspace 'newcomer' of {db}; 4 run(s) in 3 other workspace(s): other, shop, third",
        "HINT: crucible runs --all-workspaces, or --workspace NAME",
    ]
    assert main(["runs", "--json", "--db", str(db)]) == 0  # stdout stays JSON; the note goes to stderr
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "HINT: crucible runs --all-workspaces" in captured.err


def test_latest_is_the_current_workspace_and_ids_resolve_in_any(shop, capsys) -> None:
    db, runs = shop
    assert main(["metrics", "latest", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["runId"] == runs["shop-2"]  # not "third", the newest overall
    assert main(["metrics", "latest", "--json", "--workspace", "other", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["runId"] == runs["other"]
    # An explicit id or prefix names one run, whatever its workspace (the file is the user's own).
    assert main(["metrics", runs["third"], "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["runId"] == runs["third"]
    assert main(["compare", runs["other"], "latest", "--json", "--db", str(db), "--min-pairs", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["b"] == runs["shop-2"]
    assert main(["metrics", "latest", "--workspace", "nobody", "--db", str(db)]) == 2
    lines = capsys.readouterr().err.rstrip("\n").split("\n")
    assert lines[0] == f"crucible: no complete run in workspace 'nobody' of {db}" and lines[1].startswith("HINT: ")


def test_a_file_of_one_other_workspace_reads_as_it_is(tmp_path, monkeypatch, capsys) -> None:
    # A CI artifact read from a checkout whose directory has another name.
    store = Store.open(tmp_path / "ci.db")
    run_id = store.start_run(config_hash="h", params={}, resolved={}, mode="component", outcome_mode="record",
                             workspace="ci-runner-7")
    store.record_score(run_id, {"item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?"}, "outcome": "passed",
                                "metrics": {"ndcgAt10": 1.0}})
    store.finish_run(run_id, status="complete", golden_hash=None)
    store.close()
    monkeypatch.setenv("CRUCIBLE_WORKSPACE", "laptop")
    assert main(["show", "latest", "--db", str(tmp_path / "ci.db")]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["runs", "--db", str(tmp_path / "ci.db")]) == 0
    captured = capsys.readouterr()
    assert run_id in captured.out
    assert "workspace 'laptop' has no runs here; reading 'ci-runner-7'" in captured.err


def test_runs_of_the_plugin_carry_the_ini_workspace(pytester: pytest.Pytester, capsys) -> None:
    (pytester.path / "golden_set.jsonl").write_text(
        json.dumps({"id": "q1", "question": "Return window?", "citations": [{"docId": "returns"}]}) + "\n")
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini("[pytest]\ncrucible_workspace = helpdesk\ncrucible_mode = component\n")
    assert pytester.runpytest().ret == pytest.ExitCode.OK
    assert pytester.runpytest("--crucible-workspace=search").ret == pytest.ExitCode.OK
    db = str(pytester.path / ".crucible" / "crucible.db")
    capsys.readouterr()
    # pytester runs in the project directory: the CLI reads the same ini the plugin did.
    assert main(["runs", "--json", "--db", db]) == 0
    assert [run["workspace"] for run in json.loads(capsys.readouterr().out)] == ["helpdesk"]
    assert main(["runs", "--all-workspaces", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "helpdesk" in out and "search" in out and f"collection={pytester.path.name}" in out
