"""One verdict everywhere: the session gate, `crucible compare`, the HTTP compare endpoint and the HTML
report (`crucible report --against`) give the same verdict, failures and exit code on the same pair
of runs with the same options. Hypothesis generates the pairs: random values, missing items and
metrics, incomplete and interrupted runs, items whose judging failed, different judges, floors,
non-inferiority margins, the family-wise correction on or off, gated metrics that were never measured,
metrics at K measured at two different K.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
from pathlib import Path

import httpx
import pytest
from api_server import new_key, serve_in_thread
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pytest_crucible.cli import main as crucible
from pytest_crucible.store import Store
from pytest_crucible.verdict.gate import GateSettings, gate_of_session_run

WORKSPACE = "agree"
METRICS = ("ndcgAt10", "mrr", "faithfulness", "noiseSensitivity", "abstainRate", "precisionAtK")
VALUES = (0.0, 0.25, 0.5, 0.75, 1.0)
_ids = itertools.count()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One database and one real server for every generated pair (each pair adds its own two runs)."""
    db = tmp_path_factory.mktemp("agreement") / "crucible.db"
    Store.open(db).close()
    key = new_key(db, WORKSPACE, "runs:read")
    with serve_in_thread(db) as url:
        yield db, url, key


@st.composite
def pairs(draw):
    n = draw(st.integers(min_value=2, max_value=16))
    items = [f"q{i:02d}" for i in range(n)]
    metrics = draw(st.lists(st.sampled_from(METRICS), min_size=1, max_size=3, unique=True))
    shift = draw(st.sampled_from((0.0, 0.0, -0.5, 0.5)))
    base = {(item, metric): draw(st.sampled_from(VALUES)) for item in items for metric in metrics}

    def side(candidate: bool):
        dropped = set(draw(st.lists(st.sampled_from(items), max_size=2)))
        rows = {}
        for item in items:
            if item in dropped:
                continue
            values = {}
            for metric in metrics:
                if draw(st.integers(0, 9)) == 0:  # a metric missing for this item
                    continue
                value = base[item, metric]
                if candidate:
                    value = min(1.0, max(0.0, value + shift + draw(st.sampled_from((-0.1, 0.0, 0.1)))))
                values[metric] = value
            rows[item] = values
        status = draw(st.sampled_from(("complete", "complete", "incomplete") if candidate
                                      else ("complete", "complete", "incomplete", "interrupted")))
        judge_failed = set(draw(st.lists(st.sampled_from(sorted(rows) or items), min_size=1, max_size=2))) if status == "incomplete" else set()
        return {"rows": rows, "status": status, "judge_failed": judge_failed}

    a, b = side(False), side(True)
    b["judge"] = draw(st.sampled_from(("lexical-v1", "lexical-v1", "lexical-v1", "claude-haiku-5-5")))
    a["judge"] = "lexical-v1"
    a["k"], b["k"] = 10, draw(st.sampled_from((10, 10, 5)))  # the cutoff each run measured its metrics at K at
    options = {
        "gate": draw(st.none() | st.lists(st.sampled_from([*metrics, "recallAtK"]), min_size=1, max_size=2, unique=True)),
        "floors": draw(st.lists(st.tuples(st.sampled_from(metrics), st.sampled_from((0.25, 0.5, 0.75))), max_size=2)),
        "allow_incomplete": draw(st.booleans()),
        "multiple": draw(st.sampled_from(("none", "holm"))),
        "margins": draw(st.lists(st.tuples(st.sampled_from(metrics), st.sampled_from((0.1, 0.3))), max_size=1)),
    }
    return a, b, options


def store_run(db: Path, side: dict) -> str:
    store = Store.open(db)
    try:
        run_id = store.start_run(run_id=f"AGREE{next(_ids):06d}", config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10},
                                 mode="system", outcome_mode="record", judge_model=side["judge"], judge_prompt_version="v1",
                                 workspace=WORKSPACE, eval_k=side["k"])
        store.record_scores(run_id, [
            {"item_id": item, "question": f"{item}?", "item": {"id": item, "question": f"{item}?"}, "outcome": "passed",
             "metrics": values, "judge_errors": ["timeout"] if item in side["judge_failed"] else []}
            for item, values in side["rows"].items()])
        store.finish_run(run_id, status=side["status"], golden_hash=None)
        return run_id
    finally:
        store.close()


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = crucible(list(argv))
    return code, out.getvalue(), err.getvalue()


def gate_flags(options: dict) -> list[str]:
    flags = ["--multiple", options["multiple"]]
    if options["gate"]:
        flags += ["--gate", ",".join(options["gate"])]
    for metric, floor in options["floors"]:
        flags += ["--fail-under", f"{metric}={floor}"]
    for metric, margin in options["margins"]:
        flags += ["--margin", f"{metric}={margin}"]
    if options["allow_incomplete"]:
        flags.append("--allow-incomplete")
    return flags


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=pairs())
def test_session_cli_api_and_html_give_one_verdict(served, tmp_path, pair) -> None:
    db, url, key = served
    a_side, b_side, options = pair
    a, b = store_run(db, a_side), store_run(db, b_side)
    gate_settings = GateSettings(baseline=a, gate=tuple(options["gate"]) if options["gate"] else None,
                                 floors=tuple(options["floors"]), multiple=options["multiple"],
                                 margins=tuple(options["margins"]), allow_incomplete=options["allow_incomplete"])

    # The session gate, as the plugin runs it at session end (the run is this session's own).
    store = Store.open(db)
    try:
        gate = gate_of_session_run(store, b, b_side["status"], gate_settings, db_path=db, workspace=WORKSPACE)
    finally:
        store.close()

    code, out, _err = cli("compare", a, b, "--db", str(db), "--json", *gate_flags(options))
    document = json.loads(out)

    params = [("a", a), ("b", b), ("multiple", options["multiple"]), ("allowIncomplete", str(options["allow_incomplete"]).lower())]
    if options["gate"]:
        params.append(("gate", ",".join(options["gate"])))
    params += [("failUnder", f"{metric}={floor}") for metric, floor in options["floors"]]
    params += [("margin", f"{metric}={margin}") for metric, margin in options["margins"]]
    response = httpx.get(f"{url}/api/v1/evals/runs/compare", params=params, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code in (200, 409), response.text
    api = response.json()["gate"] if response.status_code == 200 else {"verdict": "refused", "exitCode": 3}

    page = tmp_path / "report.html"
    report_code, _, _ = cli("report", b, "--against", a, "-o", str(page), "--db", str(db), *gate_flags(options))
    [html_verdict] = re.findall(r'id="gate-verdict" data-verdict="(\w+)"', page.read_text(encoding="utf-8"))

    event(f"verdict {gate.verdict}")
    verdicts = {"session": gate.verdict, "cli": document["gate"]["verdict"], "api": api["verdict"], "html": html_verdict}
    assert len(set(verdicts.values())) == 1, verdicts
    assert gate.exit_code == code == api["exitCode"], (gate.exit_code, code, api)
    assert report_code == (3 if gate.verdict == "refused" else 0)
    assert gate.failures == document["gate"]["failures"]
    if response.status_code == 200:
        assert api["failures"] == gate.failures
        assert gate.comparison is not None and document["metrics"] == response.json()["metrics"]
    # The verdict follows its rules: a refusal is never a pass, a pass has no failures.
    assert (gate.verdict == "passed") == (code == 0) == (not gate.failures and gate.refusal is None)
    if b_side["judge"] != a_side["judge"]:
        assert gate.verdict == "refused"
    if "incomplete" in (a_side["status"], b_side["status"]) or a_side["status"] == "interrupted":
        assert gate.verdict == "refused" or options["allow_incomplete"]
