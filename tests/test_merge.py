"""Sharded runs: `crucible merge` joins the shard databases of one --crucible-run-id."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from helpers import RANKED_CONFTEST, write_golden

from pytest_crucible.cli import main as crucible_main
from pytest_crucible.golden_set.schema import golden_set_hash
from pytest_crucible.store import Store, StoreError
from pytest_crucible.store.merge import merge_shards

RANKED_UNITS = [("returns#p1", "returns"), ("bikes#p2", "bikes"), ("battery#p1", "battery"), ("faq#p9", "faq")]
# Twelve items whose cited units sit at different ranks, so every item has its own metric values.
ITEMS = [
    {"id": f"q-{n:02d}", "question": f"question {n}", "questionType": "simple" if n % 2 else "multi_hop",
     "citations": [{"docId": RANKED_UNITS[n % 4][1], "chunkId": RANKED_UNITS[n % 4][0], "mode": "required"}]
     + ([{"docId": RANKED_UNITS[(n + 1) % 4][1], "mode": "acceptable"}] if n % 3 == 0 else [])
     + ([{"docId": "nowhere", "chunkId": "nowhere#p1", "mode": "acceptable"}] if n % 5 == 0 else [])}
    for n in range(1, 13)
]
FIRST_HALF = [item["id"] for item in ITEMS[:6]]
SHARD_1 = " or ".join(FIRST_HALF)
SHARD_2 = f"not ({SHARD_1})"

CONFTEST = RANKED_CONFTEST  # the deterministic pipeline of the end-to-end tests (component mode here)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_golden(pytester.path / "golden_support.jsonl", ITEMS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ncrucible_mode = component\n")
    (pytester.path / "rerank.json").write_text('{"retrieval": {"rerank": true}}')
    return pytester


def run_shard(project: pytest.Pytester, db: str, selection: str, *args: str, passed: int = 6) -> Path:
    result = project.runpytest("--crucible-run-id=ci-42", f"--crucible-db={db}", "-k", selection, *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=passed)
    return project.path / db


def rows(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def metric_table(db: Path, run_id: str) -> dict[tuple[str, str], float]:
    return {(item, metric): value for item, metric, value in
            rows(db, "SELECT item_id, metric, value FROM item_metrics WHERE run_id = ?", [run_id])}


def test_merged_shards_are_the_unsharded_run(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard1 = run_shard(project, "shard1.db", SHARD_1)
    shard2 = run_shard(project, "shard2.db", SHARD_2)
    [(hash1,)] = rows(shard1, "SELECT golden_hash FROM runs")
    [(hash2,)] = rows(shard2, "SELECT golden_hash FROM runs")
    assert hash1 != hash2  # each shard saw half of the golden set

    merged = project.path / "merged.db"
    capsys.readouterr()
    assert crucible_main(["merge", str(shard1), str(shard2), "-o", str(merged)]) == 0
    out = capsys.readouterr().out
    [(run_id, status, n_items, golden_hash, mode, pid)] = rows(merged, "SELECT id, status, n_items, golden_hash, mode, pid FROM runs")
    assert (run_id, status, n_items, mode, pid) == ("ci-42", "complete", 12, "component", None)
    assert f"merged run ci-42 from 2 shard(s) into {merged}: 12 items, status complete, goldenHash {golden_hash[:12]}" in out
    # Recomputed over the union of the shards' golden items (the shards' own hashes cover halves).
    assert golden_hash == golden_set_hash(json.loads(item) for (item,) in rows(shard1, "SELECT item FROM golden_items")
                                          + rows(shard2, "SELECT item FROM golden_items"))
    assert sorted(row[0] for row in rows(merged, "SELECT item_id FROM results")) == [item["id"] for item in ITEMS]
    assert sorted(row[0] for row in rows(merged, "SELECT item_id FROM golden_items")) == [item["id"] for item in ITEMS]

    # The merged run, exported, is the baseline of the whole suite run unsharded: nothing regressed.
    exported = project.path / "merged-run.json"
    assert crucible_main(["export", "--db", str(merged), "ci-42", "-o", str(exported)]) == 0
    result = project.runpytest(f"--crucible-baseline={exported}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=12 + 1)  # the items and the gate (crucible::gate)
    result.stdout.fnmatch_lines(["baseline ci-42 -> this run *", "  12 paired items, seed 1337, p Holm-adjusted over *"])

    single_db = project.path / ".crucible" / "crucible.db"
    [(single_id, single_hash, single_n)] = rows(single_db, "SELECT id, golden_hash, n_items FROM runs")
    assert single_hash == golden_hash and single_n == 12
    single, sharded = metric_table(single_db, single_id), metric_table(merged, "ci-42")
    assert len(sharded) > 12 * 4 and sharded == single  # same metrics, same values, per item
    # The ledger holds the same judgments as the unsharded run's.
    judgments = "SELECT query_id, chunk_id, doc_id, grade, source, judge_model FROM qrels ORDER BY 1, 2, 3"
    assert rows(merged, judgments) == rows(single_db, judgments)

    capsys.readouterr()
    assert crucible_main(["compare", "--db", str(single_db), str(exported), single_id, "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)
    assert comparison["pairedItems"] == 12 and comparison["configChanges"] == {}
    assert all(metric["delta"] == 0 for metric in comparison["metrics"].values())
    assert crucible_main(["compare", "--db", str(merged), "ci-42", "ci-42"]) == 0

    # Merging again into the same output is refused and changes nothing.
    before = dump(merged)
    assert crucible_main(["merge", str(shard1), str(shard2), "-o", str(merged)]) == 2
    assert "already has a run ci-42" in capsys.readouterr().err
    assert dump(merged) == before


def test_shards_of_different_configs_are_refused(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard1 = run_shard(project, "shard1.db", SHARD_1)
    shard2 = run_shard(project, "shard2.db", SHARD_2, "--crucible-config=rerank.json")
    [(config1,)] = rows(shard1, "SELECT config_hash FROM runs")
    [(config2,)] = rows(shard2, "SELECT config_hash FROM runs")
    assert config1 != config2
    output = project.path / "merged.db"
    capsys.readouterr()
    assert crucible_main(["merge", str(shard1), str(shard2), "-o", str(output)]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("crucible: run ci-42: the shards are not one run: config_hash differs:")
    assert f"{config1} in {shard1}" in first and f"{config2} in {shard2}" in first
    assert not output.exists()


def test_overlapping_shards_are_refused_naming_the_items(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard1 = run_shard(project, "shard1.db", SHARD_1)
    shard2 = run_shard(project, "shard2.db", f"q-05 or q-06 or {SHARD_2}", passed=8)
    output = project.path / "merged.db"
    with pytest.raises(StoreError) as refused:
        merge_shards([shard1, shard2], output)
    assert str(refused.value).splitlines()[0] == (
        f"2 item(s) scored by more than one shard: q-05 ({shard1}, {shard2}); q-06 ({shard1}, {shard2})")
    assert not output.exists()


# -- unit level: shards written through the Store API ------------------------------------------
def make_shard(path: Path, item_ids, *, run_id: str = "ci-7", status: str = "complete", config_hash: str = "c" * 64,
               judge: dict | None = None, versions: dict | None = None, human: list | None = None) -> Path:
    store = Store.open(path)
    store.start_run(run_id=run_id, config_hash=config_hash, params={}, resolved={}, mode="component", outcome_mode="strict")
    for n, item_id in enumerate(item_ids):
        item = {"id": item_id, "question": (versions or {}).get(item_id, f"question {item_id}"),
                "citations": [{"docId": "d1", "mode": "required"}]}
        store.record_score(run_id, {"item_id": item_id, "item": item, "question": item["question"], "outcome": "passed",
                                    "metrics": {"recallAtK": 1.0, "ndcgAt10": 0.5 + n / 100},
                                    "qrels_rows": [{"query_id": item_id, "doc_id": "d2", "grade": 2, "source": "llm", "judge_model": "m"}],
                                    "cache_rows": [{"key": f"k-{item_id}", "judge_model": "m", "prompt_version": "v", "kind": "rel",
                                                    "request": "{}", "verdict": "{}"}]})
    store.append_qrels(human or [])
    store.finish_run(run_id, status=status, golden_hash="ignored", judge=judge)
    store.close()
    return path


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_a_failure_mid_merge_leaves_the_output_unchanged(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a.db", ["x-1", "x-2"])
    b = make_shard(tmp_path / "b.db", ["x-3"])
    output = make_shard(tmp_path / "out.db", ["y-1"], run_id="earlier")
    conn = sqlite3.connect(output)
    conn.execute("CREATE TRIGGER refuse_metrics BEFORE INSERT ON item_metrics WHEN NEW.run_id = 'ci-7'"
                 " BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
    conn.commit()
    conn.close()
    before = dump(output)
    with pytest.raises(StoreError, match=r"merging run ci-7 failed, nothing was written: disk says no"):
        merge_shards([a, b], output)
    assert dump(output) == before


def test_a_failure_in_a_new_output_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_crucible.store import merge

    a = make_shard(tmp_path / "a.db", ["x-1"])

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk says no")

    monkeypatch.setattr(merge, "_add_qrels", broken)
    with pytest.raises(StoreError, match="nothing was written"):
        merge_shards([a], tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()


def test_status_sums_and_ledger_of_a_merge(tmp_path: Path) -> None:
    note = {"query_id": "x-1", "doc_id": "d1", "grade": 0, "source": "human", "created_by": "ann", "created_at": "2024-01-01T00:00:00.000Z"}
    judge = {"stats": {"requests": 3, "cache_hits": 1}, "cost_usd": 0.25, "input_tokens": 100, "output_tokens": 10}
    a = make_shard(tmp_path / "a.db", ["x-1", "x-2"], judge=judge, human=[note])
    b = make_shard(tmp_path / "b.db", ["x-3"], status="incomplete", judge=judge, human=[note])
    report = merge_shards([a, b], tmp_path / "out.db")
    assert (report.run_id, report.items, report.status) == ("ci-7", 3, "incomplete")
    assert report.shards == [str(a), str(b)]
    out = tmp_path / "out.db"
    [(status, n_items, stats, cost, tokens_in, tokens_out, golden_hash)] = rows(
        out, "SELECT status, n_items, judge_stats, cost_usd, input_tokens, output_tokens, golden_hash FROM runs")
    assert (status, n_items, json.loads(stats), cost, tokens_in, tokens_out) == (
        "incomplete", 3, {"requests": 6, "cache_hits": 2}, 0.5, 200, 20)
    assert golden_hash == report.golden_hash == golden_set_hash(
        {"id": i, "question": f"question {i}", "citations": [{"docId": "d1", "mode": "required"}]} for i in ("x-1", "x-2", "x-3"))
    # 3 provenance + 3 llm judgments, and the one human judgment both shards carried, once.
    assert report.qrels_added == 7 and rows(out, "SELECT source, COUNT(*) FROM qrels GROUP BY source ORDER BY 1") == [
        ("human", 1), ("llm", 3), ("provenance", 3)]
    assert report.cache_rows_added == 3
    # Merged again into a second output, the ledger there keeps a distinct later human judgment.
    later = {**note, "grade": 3, "created_at": "2024-02-01T00:00:00.000Z"}
    make_shard(tmp_path / "c.db", ["z-1"], run_id="other", human=[note, later])
    assert merge_shards([tmp_path / "c.db"], out).qrels_added == 1 + 1 + 1  # provenance, llm, the later human one
    assert rows(out, "SELECT grade FROM qrels WHERE source = 'human' ORDER BY id") == [(0,), (3,)]

    c = make_shard(tmp_path / "c2.db", ["x-4"], status="interrupted")
    assert merge_shards([a, c], tmp_path / "out2.db").status == "interrupted"


def test_choosing_the_run_and_refusing_mixed_shards(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a.db", ["x-1"])
    b = make_shard(tmp_path / "b.db", ["x-2"])
    make_shard(a, ["x-1"], run_id="ci-8")
    make_shard(b, ["x-2"], run_id="ci-8")
    with pytest.raises(StoreError, match=r"the shards share 2 runs \(ci-7, ci-8\): which one to merge\?"):
        merge_shards([a, b], tmp_path / "out.db")
    assert merge_shards([a, b], tmp_path / "out.db", run_id="ci-8").items == 2
    with pytest.raises(StoreError, match=r"run ci-9 is not in .*a\.db, .*b\.db"):
        merge_shards([a, b], tmp_path / "out.db", run_id="ci-9")

    lone = make_shard(tmp_path / "lone.db", ["x-3"], run_id="ci-1")
    with pytest.raises(StoreError, match=r"no run id is in every shard \(.*a\.db holds ci-7, ci-8; .*lone\.db holds ci-1\)"):
        merge_shards([a, lone], tmp_path / "out3.db")

    # One golden item in two versions.
    v1 = make_shard(tmp_path / "v1.db", ["x-1", "x-2"])
    v2 = make_shard(tmp_path / "v2.db", ["x-2", "x-3"], versions={"x-2": "reworded"})
    with pytest.raises(StoreError, match=r"golden items differ between shards \(same id, different item\): x-2 \(.*v1\.db, .*v2\.db\)"):
        merge_shards([v1, v2], tmp_path / "out4.db")
    assert not (tmp_path / "out4.db").exists()


def test_missing_shard_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_shard(tmp_path / "a.db", ["x-1"])
    missing = tmp_path / "shard2.db"
    assert crucible_main(["merge", str(a), str(missing), "-o", str(tmp_path / "out.db")]) == 2
    assert capsys.readouterr().err == f"crucible: shard database not found: {missing}\n"
    assert not (tmp_path / "out.db").exists()
    assert crucible_main(["merge", str(a), str(a), "-o", str(tmp_path / "out.db")]) == 2
    assert "is given twice" in capsys.readouterr().err
    assert crucible_main(["merge", str(a), "-o", str(a)]) == 2
    assert "the output is one of the shards" in capsys.readouterr().err


def test_a_killed_shard_makes_merge_and_compare_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = make_shard(tmp_path / "whole.db", ["x-1", "x-2", "x-3"])
    killed = make_shard(tmp_path / "killed.db", ["x-4"], status="interrupted")
    merged = tmp_path / "run.db"
    assert crucible_main(["merge", str(whole), str(killed), "-o", str(merged)]) == 3
    err = capsys.readouterr().err
    assert f"the merged run ci-7 is interrupted: {killed} is interrupted" in err and "HINT: re-run the shard" in err
    assert str(whole) not in err.splitlines()[-2]  # the complete shard is not named
    # The merged run is written, and every door refuses it as a candidate unless told otherwise.
    baseline = make_shard(tmp_path / "base.db", ["x-1", "x-2", "x-3", "x-4"], run_id="base")
    exported = tmp_path / "base.json"
    assert crucible_main(["export", "base", "-o", str(exported), "--db", str(baseline)]) == 0
    capsys.readouterr()
    assert crucible_main(["compare", str(exported), "ci-7", "--db", str(merged)]) == 3
    assert "GATE REFUSED this run is interrupted" in capsys.readouterr().err
    assert crucible_main(["compare", str(exported), "ci-7", "--db", str(merged), "--allow-incomplete", "--min-pairs", "2"]) == 0
    # Whole shards merge to a complete run and exit 0.
    assert crucible_main(["merge", str(whole), "-o", str(tmp_path / "whole-run.db")]) == 0


def test_a_failed_shard_or_lost_items_never_merge_into_a_complete_run(tmp_path: Path) -> None:
    whole = make_shard(tmp_path / "whole.db", ["x-1", "x-2"])
    failed = make_shard(tmp_path / "failed.db", [], status="failed")  # a shard that recorded nothing
    report = merge_shards([whole, failed], tmp_path / "out.db")
    assert report.status == "incomplete"
    # A shard that lost items (its n_items counts them) passes the loss on to the merged run.
    lossy = make_shard(tmp_path / "lossy.db", ["x-3"])
    conn = sqlite3.connect(lossy)
    with conn:
        conn.execute("UPDATE runs SET status = 'incomplete', n_items = 3")
    conn.close()
    report = merge_shards([whole, lossy], tmp_path / "out2.db")
    assert (report.status, report.items) == ("incomplete", 5)
    assert rows(tmp_path / "out2.db", "SELECT n_items, n_scored FROM runs") == [(5, 3)]


# A pipeline that waits for the file `go` (at most 60 s) before it answers: a session held mid-run. With
# HOLD_AFTER_CONFIGURE set, a session that has passed its configure-time check of the run id waits there until
# the other session holds the id: the two meet where both have checked and neither has started.
HELD_CONFTEST = CONFTEST.replace("    def pipeline(question, *, item, config, mode):\n",
                                 "    def pipeline(question, *, item, config, mode):\n"
                                 "        wait_for(lambda: pathlib.Path('go').exists())\n") + """
import os, pathlib, sqlite3, time

def wait_for(condition):
    deadline = time.monotonic() + 60
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)

def holds_run(db):
    try:
        return bool(sqlite3.connect(db).execute("SELECT 1 FROM runs").fetchall())
    except sqlite3.Error:
        return False

def pytest_sessionstart(session):
    if os.environ.get("HOLD_AFTER_CONFIGURE") and not hasattr(session.config, "workerinput"):
        pathlib.Path("configured").write_text("")
        wait_for(lambda: holds_run(os.environ["HOLD_AFTER_CONFIGURE"]))
"""


def _session(project: pytest.Pytester, db: Path, *args: str, hold_after_configure: bool = False) -> subprocess.Popen:
    env = {**os.environ, "HOLD_AFTER_CONFIGURE": str(db) if hold_after_configure else ""}
    return subprocess.Popen([*project._getpytestargs(), "-p", "no:cacheprovider", "--crucible-run-id=ci-42",
                             f"--crucible-db={db}", *args], cwd=project.path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def _wait_for(condition) -> None:
    deadline = time.monotonic() + 60
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition()


@pytest.mark.parametrize("extra", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_two_sessions_with_one_run_id_at_once_the_second_is_refused_before_its_tests_run(
        project: pytest.Pytester, extra: tuple[str, ...]) -> None:
    project.makeconftest(HELD_CONFTEST)
    db = project.path / "shard.db"
    # The second session passes its configure-time check (the id is free), then waits; the first takes the id.
    second = _session(project, db, *extra, hold_after_configure=True)
    _wait_for(lambda: (project.path / "configured").exists())
    first = _session(project, db)
    try:
        out, err = second.communicate(timeout=120)
        assert second.returncode == pytest.ExitCode.USAGE_ERROR, out + err
        assert "--crucible-run-id=ci-42" in err and "another session (pid " in err and "is writing a run with this id right now" in err
        assert "HINT: give each session its own id, or its own database" in err
        assert "INTERNALERROR" not in out + err and "Traceback" not in out + err
        assert " passed" not in out and " failed" not in out  # refused before any test ran

        # A third session started now is refused by the configure-time check, with the same message.
        third = project.runpytest("--crucible-run-id=ci-42", f"--crucible-db={db}")
        assert third.ret == pytest.ExitCode.USAGE_ERROR
        assert "is writing a run with this id right now" in third.stderr.str()
    finally:
        (project.path / "go").write_text("")
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    assert rows(db, "SELECT id, status, n_items FROM runs") == [("ci-42", "complete", 12)]
    [(resolved, eval_k)] = rows(db, "SELECT resolved, eval_k FROM runs")
    assert json.loads(resolved)["retrievalLimit"] >= 1 and eval_k == 10


def _has_run(db: Path, run_id: str) -> bool:
    try:
        return bool(rows(db, "SELECT 1 FROM runs WHERE id = ?", [run_id]))
    except sqlite3.Error:  # the file is being created
        return False


def test_a_run_id_whose_session_recorded_nothing_can_be_used_again(project: pytest.Pytester) -> None:
    db = project.path / "shard.db"
    nothing = project.runpytest("--crucible-run-id=ci-7", f"--crucible-db={db}", "-k", "no-such-item")
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    (project.path / "golden_broken.jsonl").write_text('{"id": "x", "question": ')
    broken = project.runpytest("--crucible-run-id=ci-7", f"--crucible-db={db}")
    assert broken.ret != pytest.ExitCode.OK
    (project.path / "golden_broken.jsonl").unlink()
    assert not _has_run(db, "ci-7")  # neither session kept the id it reserved

    again = project.runpytest("--crucible-run-id=ci-7", f"--crucible-db={db}")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()
    assert rows(db, "SELECT id, status, n_items FROM runs") == [("ci-7", "complete", 12)]
    reused = project.runpytest("--crucible-run-id=ci-7", f"--crucible-db={db}")  # sequential reuse: refused up front
    assert reused.ret == pytest.ExitCode.USAGE_ERROR
    assert "already has a run with this id" in reused.stderr.str()
