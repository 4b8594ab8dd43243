"""The crucible command: schema, runs, show, and its error handling."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_crucible.cli import main
from pytest_crucible.store import Store


def test_schema_golden_prints_the_json_schema(capsys) -> None:
    assert main(["schema", "golden"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "pytest-crucible golden item"
    assert "questionType" in schema["properties"]


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("crucible")
    if not exe.exists():
        pytest.skip("the crucible console script is not installed beside this Python (pip install -e . first)")
    done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "trec-eval" in done.stdout and "schema" in done.stdout


def test_runs_and_show_read_the_store(tmp_path, database, capsys) -> None:
    db = database
    store = Store.open(db)
    run_id = store.start_run(config_hash="ab" * 32, params={}, resolved={"retrievalLimit": 10}, mode="component",
                             outcome_mode="record", config_path="configs/base.json")
    store.record_score(run_id, {"item_id": "q1", "question": "Q", "item": {"id": "q1", "question": "Q"}, "outcome": "passed",
                                "metrics": {"ndcgAt10": 0.5, "recallAtK": 1.0}})
    store.finish_run(run_id, status="complete", golden_hash="g")
    store.close()

    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert run_id in out and "component" in out and "configs/base.json" in out

    assert main(["runs", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == run_id

    assert main(["show", "latest", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id}  status complete  mode component  outcome record" in out
    assert re.search(r"recall@10 +1\.0000 +1", out) and re.search(r"ndcg@10 +0\.5000 +1", out)


def test_missing_database_is_one_line_error(tmp_path, capsys) -> None:
    assert main(["runs", "--db", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err
    assert "no crucible database here" in err and "Traceback" not in err
    assert not (tmp_path / "none.db").exists()  # reading never creates files


def test_metrics_by_facet_and_compare_restricted_to_a_facet(tmp_path, database, capsys) -> None:
    db = database
    store = Store.open(db)
    ids = []
    for shift in (0.0, 0.5):
        run_id = store.start_run(config_hash="h", params={}, resolved={"retrievalLimit": 10}, mode="component", outcome_mode="record")
        for i in range(8):
            kind = "multi_hop" if i % 2 else "simple"
            item = {"id": f"q{i}", "question": "Q", "questionType": kind, "tags": ["topic:x"]}
            value = 0.2 + 0.01 * i + (shift if kind == "multi_hop" else 0.0)
            store.record_score(run_id, {"item_id": item["id"], "question": "Q", "item": item, "outcome": "passed",
                                        "metrics": {"ndcgAt10": value}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        ids.append(run_id)
    store.close()
    assert main(["metrics", "latest", "--json", "--db", str(db)]) == 0
    by_facet = json.loads(capsys.readouterr().out)["byFacet"]
    assert by_facet["questionType"]["simple"] == {"n": 4, "ndcgAt10": pytest.approx(0.23)}
    assert by_facet["tag"]["topic:x"]["n"] == 8
    # A facet holds few items: --min-pairs 2 lets the gate judge them (the default 6 would refuse, exit 3).
    assert main(["compare", ids[0], ids[1], "--facet", "questionType=simple", "--json", "--db", str(db)]) == 3
    capsys.readouterr()
    assert main(["compare", ids[0], ids[1], "--facet", "questionType=simple", "--json", "--db", str(db), "--min-pairs", "2"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["facet"] == "questionType=simple" and document["pairedItems"] == 4
    assert document["metrics"]["ndcgAt10"]["delta"] == 0.0
    assert main(["compare", ids[0], ids[1], "--facet", "questionType=multi_hop", "--json", "--db", str(db), "--min-pairs", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["ndcgAt10"]["delta"] == pytest.approx(0.5)
    assert main(["compare", ids[0], ids[1], "--facet", "colour=red", "--db", str(db)]) == 2
    assert "expected FACET=VALUE" in capsys.readouterr().err


# -- help, exit codes and --json on every read command ------------------------------------------
from pytest_crucible.cli import EXAMPLES, build_parser, subcommands  # noqa: E402


def test_every_command_help_ends_with_an_example() -> None:
    """Walks every parser, nested ones and any added later included."""
    paths = dict(subcommands(build_parser()))
    assert {"", "compare", "qrels override", "golden export"} <= set(paths)
    missing = [path or "crucible" for path, parser in paths.items()
               if not re.search(r"^examples?:\n  crucible ", parser.format_help(), flags=re.M)]
    assert missing == [], f"commands whose --help has no example (add them to the EXAMPLES of their cli/ module): {missing}"
    assert set(EXAMPLES) <= set(paths), f"EXAMPLES names commands that do not exist: {set(EXAMPLES) - set(paths)}"
    for path, parser in paths.items():
        if path:
            assert parser.description, f"crucible {path} --help has no description"


@pytest.mark.parametrize("argv", [
    [],
    ["nope"],
    ["compare", "only-one"],
    ["schema", "table"],
    ["qrels"],
    ["qrels", "override", "q1", "c1", "3"],  # --by is required
    ["runs", "--limit", "many"],
])
def test_argparse_errors_exit_2_with_a_hint(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "HINT: `crucible" in err and "--help` lists the options" in err


def _two_runs(db: Path, shift: float) -> list[str]:
    """Two complete runs of 8 items; the second's ndcgAt10 is the first's plus shift (plus a little noise)."""
    store = Store.open(db)
    ids = []
    for k, delta in enumerate((0.0, shift)):
        run_id = store.start_run(config_hash=f"h{k}", params={}, resolved={"retrievalLimit": 10}, mode="component",
                                 outcome_mode="record")
        for i in range(8):
            value = 0.5 + 0.03 * i + (delta + 0.01 * (i % 3) if k else 0.0)
            store.record_score(run_id, {"item_id": f"q{i}", "question": "Q", "item": {"id": f"q{i}", "question": "Q"},
                                        "outcome": "passed", "metrics": {"ndcgAt10": value, "mrr": 0.5}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        ids.append(run_id)
    store.close()
    return ids


def test_compare_exits_1_on_a_significant_regression_only(tmp_path, database, capsys) -> None:
    db = database
    base, worse = _two_runs(db, -0.2)
    assert main(["compare", base, worse, "--db", str(db)]) == 1
    captured = capsys.readouterr()
    assert re.search(r"ndcgAt10 .* regressed", captured.out)
    assert captured.err.startswith("GATE FAILED ndcgAt10 regressed: ")
    assert main(["compare", base, worse, "--json", "--db", str(db)]) == 1  # stdout stays pure JSON
    assert json.loads(capsys.readouterr().out)["verdicts"]["ndcgAt10"] == "regressed"
    assert main(["compare", base, worse, "--metrics", "mrr", "--db", str(db)]) == 0  # only mrr compared: unchanged
    assert main(["compare", worse, base, "--db", str(db)]) == 0  # the other way round it is an improvement
    assert "GATE FAILED" not in capsys.readouterr().err


def test_every_read_command_has_json_that_parses(tmp_path, database, capsys) -> None:
    db = database
    base, other = _two_runs(db, 0.0)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\nq2 0 b 2\n")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 a 1 2.0 t\nq2 Q0 c 1 2.0 t\nq2 Q0 b 2 1.0 t\n")
    commands = [
        ["runs"], ["show", "latest"], ["metrics", base], ["compare", base, other], ["qrels", "agreement"],
    ]
    for argv in commands:
        assert main([*argv, "--json", "--db", str(db)]) == 0, argv
        json.loads(capsys.readouterr().out)
    assert main(["trec-eval", "--json", "-q", "-m", "recip_rank", "-m", "P_2", str(qrels), str(run)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["all"] == {"recip_rank": 0.75, "P_2": 0.5}
    assert document["perQuery"]["q2"] == {"recip_rank": 0.5, "P_2": 0.5}


def test_errors_are_one_line_and_a_hint_with_exit_2(tmp_path, capsys) -> None:
    db = tmp_path / "c.db"
    base, _ = _two_runs(db, 0.0)
    bad = [
        ["runs", "--db", str(tmp_path / "none.db")],
        ["show", "ZZZZ", "--db", str(db)],
        ["compare", base, "latest", "--facet", "colour=red", "--db", str(db)],
        ["compare", base, str(tmp_path / "missing.json"), "--db", str(db)],
        ["export", base, "-o", str(db / "sub" / "run.json"), "--db", str(db)],  # a missing folder is made; not under a file
        ["report", base, "-o", str(db / "r.html"), "--db", str(db)],  # a file where a directory should be
        ["import", str(tmp_path / "missing.json"), "--db", str(db)],
        ["promote", "--question", "Q", "--db", str(db)],
        ["promote", "--json", str(tmp_path / "missing.json"), "--db", str(db)],
        ["qrels", "override", "q1", "c1", "7", "--by", "ann", "--db", str(db)],
        ["qrels", "import", str(tmp_path / "missing.jsonl"), "--by", "ann", "--db", str(db)],
        ["golden", "export", "-o", str(db / "g.jsonl"), "--db", str(db)],
    ]
    for argv in bad:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        lines = err.rstrip("\n").split("\n")
        assert len(lines) == 2 and lines[0].startswith("crucible: ") and lines[1].startswith("HINT: "), (argv, err)


def test_every_help_example_parses() -> None:
    """The examples are real command lines: each one parses with the current options."""
    import shlex

    parser = build_parser()
    checked = 0
    for path, example in EXAMPLES.items():
        for command in example.replace("\\\n", " ").splitlines():
            words = shlex.split(re.split(r"\s#\s", command)[0])  # a trailing comment; '#' inside a chunk id stays
            if not words or words[0] != "crucible":
                continue
            redirect = next((i for i, word in enumerate(words) if word in (">", ">>")), None)
            if redirect is not None:
                words = words[:redirect]
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"the example of `crucible {path}` does not parse: {command}")
            checked += 1
    assert checked >= len(EXAMPLES)
