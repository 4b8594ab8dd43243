"""The errors a user meets first: each one clear, once, and without the plugin's own traceback."""

from __future__ import annotations

import json

import pytest
from helpers import RANKED_CONFTEST, db_rows, write_golden

ITEMS = [{"id": f"q-{i:03d}", "question": f"Question {i}?", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}
         for i in range(1, 14)]


def add_golden_file(pytester: pytest.Pytester, items=ITEMS, name="golden_support.jsonl") -> None:
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    write_golden(path, items)


def pipeline_conftest(body: str) -> str:
    return f"import pytest\n\n@pytest.fixture(scope='session')\ndef crucible_pipeline():\n{body}\n    return pipeline\n"


def output(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


# -- 1. no crucible_pipeline fixture ---------------------------------------------------------
@pytest.mark.parametrize("route", ["golden-file", "marker"])
def test_missing_pipeline_fixture_is_one_usage_error(pytester: pytest.Pytester, route: str) -> None:
    if route == "golden-file":
        add_golden_file(pytester)
    else:
        add_golden_file(pytester, name="data/items.jsonl")
        pytester.makepyfile(test_marked="""
            import pytest_crucible as crucible

            @crucible.golden("data/items.jsonl")
            def test_item(golden_item):
                pass
            """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: no crucible_pipeline fixture: define one in conftest.py that returns a callable",
        "    pipeline(question, *, item, config, mode) -> crucible.PipelineResult | dict",
        "HINT: see the README quickstart.",
    ])
    text = output(result)
    assert text.count("no crucible_pipeline fixture") == 1  # once, not once per item
    for absent in ("Traceback", "pytest_crucible", "plugin.py", "raise pytest", "ERROR at setup", "UsageError"):
        assert absent not in text


@pytest.mark.slow
def test_missing_pipeline_fixture_under_xdist_stops_the_worker_and_exits_4(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    result = pytester.runpytest_subprocess("-n", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["no crucible_pipeline fixture: define one in conftest.py that returns a callable",
                                 "HINT: see the README quickstart."])
    text = output(result)
    assert "INTERNALERROR" not in text and "Traceback" not in text and "pytest_crucible" not in text
    assert text.count("ERROR golden_support.jsonl::") == 1  # the worker stopped after its first item


# -- 2. a pipeline with the wrong signature ----------------------------------------------------
def test_wrong_pipeline_signature_is_one_usage_error(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(pipeline_conftest(
        "    def pipeline(question):\n"
        "        raise AssertionError('never called')"))
    result = pytester.runpytest("--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: the crucible_pipeline fixture returned a callable with the wrong signature",
        "    expected: pipeline(question, *, item, config, mode)",
        "    got:      pipeline(question)  (got an unexpected keyword argument 'item')",
        "HINT: take the question positionally and item, config and mode as keyword arguments (or **kwargs *)",
    ])
    text = output(result)
    assert text.count("wrong signature") == 1
    for absent in ("Traceback", "pytest_crucible", "TypeError", "never called", "FAILED"):
        assert absent not in text
    assert not (pytester.path / ".crucible" / "crucible.db").exists() or db_rows(pytester, "SELECT COUNT(*) FROM results") == [(0,)]

    # Signatures that accept the arguments (**kwargs, defaults, keyword-or-positional, async) still work.
    for definition in ("def pipeline(question, **kwargs):", "def pipeline(question, *, item, config, mode='system', extra=None):",
                       "def pipeline(question, item=None, config=None, mode=None):", "async def pipeline(question, *, item, **rest):"):
        pytester.makeconftest(pipeline_conftest(
            f"    {definition}\n"
            "        return {'answer': 'Within 30 days [S1].', 'retrieved': [{'chunk_id': 'returns#p1', 'doc_id': 'returns'}]}"))
        result = pytester.runpytest("--crucible-outcome=record", "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.OK, definition
        result.assert_outcomes(passed=len(ITEMS))


def test_wrong_signature_with_concurrency_stops_before_any_call(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester)
    pytester.makeconftest(pipeline_conftest(
        "    def pipeline(question, item):\n"
        "        raise AssertionError('never called')"))
    result = pytester.runpytest("--crucible-concurrency=4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*got:      pipeline(question, item)  (got an unexpected keyword argument 'config')"])
    assert "never called" not in output(result)


def test_check_signature_unit() -> None:
    import functools

    from pytest_crucible.evaluation.concurrency import PipelineSignatureError, check_signature

    class Pipeline:
        def __call__(self, question, *, item, config, mode):
            return {}

    def full(question, *, item, config, mode, extra):
        return {}

    check_signature(Pipeline())
    check_signature(functools.partial(full, extra=1))
    check_signature(lambda question, **kwargs: {})
    with pytest.raises(PipelineSignatureError, match=r"got:      full\(question, \*, item, config, mode, extra\)"):
        check_signature(full)
    with pytest.raises(PipelineSignatureError, match=r"returned dict .* which is not callable"):
        check_signature({"answer": "x"})


def test_signature_is_checked_once_per_pipeline_object(tmp_path, monkeypatch) -> None:
    from pytest_crucible.evaluation import concurrency
    from pytest_crucible.golden_set.schema import GoldenItem
    from pytest_crucible.session import CrucibleSession, Settings

    checked = []
    real = concurrency.check_signature
    monkeypatch.setattr(concurrency, "check_signature", lambda pipeline: (checked.append(pipeline), real(pipeline)))
    session = CrucibleSession(settings=Settings(params={}, resolved={"retrievalLimit": 10}, config_hash="h" * 64,
                                                config_path=None, db_path=tmp_path / "c.db", mode="component"))

    def pipeline(question, *, item, config, mode):
        return {"retrieved": []}

    golden = GoldenItem.model_validate({"id": "q", "question": "Q?"})
    for _ in range(5):
        assert session.run_pipeline("k", golden, pipeline, {}).value == {"retrieved": []}
    assert checked == [pipeline]
    session.close()


# -- 3. a returned dict with a wrong key -------------------------------------------------------
def test_wrong_result_key_says_did_you_mean_once_then_one_line(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, ITEMS[:3])
    pytester.makeconftest(pipeline_conftest(
        "    def pipeline(question, *, item, config, mode):\n"
        "        return {'answr': 'Within 30 days.', 'retrieved_chunks': [{'chunk_id': 'returns#p1', 'doc_id': 'returns'}]}"))
    result = pytester.runpytest("--crucible-outcome=record")  # an invalid result fails even when only recording
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=3)
    problem = ("crucible_pipeline returned an invalid result: unknown keys 'answr' (did you mean 'answer'?), "
               "'retrieved_chunks' (did you mean 'retrieved'?)")
    result.stdout.fnmatch_lines([
        f"golden item q-001: {problem}",
        "    a result accepts: answer, retrieved, citations, confidence, abstained, detected_concepts, blocked, blocked_by, "
        "metadata, tool_calls, steps (snake_case or camelCase)",
        "    a retrieved chunk accepts: chunk_id, doc_id, text, score, metadata",
        "    a tool call accepts: name, arguments; a step accepts: retrieved, metadata",
        "HINT: build the result as crucible.PipelineResult(...) to have its keys checked where you write them",
    ])
    later = [f"golden item {item}: {problem}; the accepted keys are listed at the first such failure" for item in ("q-002", "q-003")]
    assert all(line in result.stdout.lines for line in later)
    # Once among the failures (the short test summary repeats whole messages when CI is set: not counted).
    failures = result.stdout.str().split("short test summary info")[0]
    assert failures.count("a result accepts:") == 1
    assert "All traceback entries are hidden" not in result.stdout.str()  # the message alone, no pytest footnote
    assert db_rows(pytester, "SELECT item_id, outcome, error FROM results ORDER BY item_id") == [
        (item, "error", problem) for item in ("q-001", "q-002", "q-003")]



def test_metadata_that_cannot_be_stored_fails_the_item_and_is_recorded(pytester: pytest.Pytester) -> None:
    # A numpy array in a chunk's metadata validates, then cannot be stored: one clear failure with a hint,
    # the item recorded with its problem, the other items scored (before: a traceback, and the item lost).
    add_golden_file(pytester, ITEMS[:2])
    pytester.makeconftest(pipeline_conftest(
        "    import numpy\n"
        "    def pipeline(question, *, item, config, mode):\n"
        "        metadata = {'embedding': numpy.zeros(3)} if item.id == 'q-001' else {'page': 3}\n"
        "        return {'retrieved': [{'chunk_id': 'returns#p1', 'doc_id': 'returns', 'metadata': metadata}]}"))
    result = pytester.runpytest("--crucible-outcome=record")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, passed=1)
    problem = "crucible_pipeline returned a result that cannot be stored as JSON: Unable to serialize unknown type: <class 'numpy.ndarray'>"
    result.stdout.fnmatch_lines([f"golden item q-001: {problem}", "HINT: metadata takes JSON values *.tolist()*"])
    assert "Traceback" not in result.stdout.str() and "pydantic_core" not in result.stdout.str()
    assert db_rows(pytester, "SELECT item_id, outcome, error FROM results ORDER BY item_id") == [
        ("q-001", "error", problem), ("q-002", "passed", None)]

def test_wrong_key_inside_a_retrieved_chunk_unit() -> None:
    from pytest_crucible.evaluation.pipeline import PipelineResultError, coerce_result

    with pytest.raises(PipelineResultError) as raised:
        coerce_result({"retrieved": [{"chunkId": "a#1", "docid": "a"}]}, explain_keys=False)
    assert raised.value.problem == ("crucible_pipeline returned an invalid result: unknown key 'retrieved[0].docid' "
                                    "(did you mean 'doc_id'?); 1 more problem(s)")
    assert raised.value.unknown_keys == ("retrieved[0].docid",)
    # camelCase is accepted, and a valid result raises nothing.
    assert coerce_result({"retrieved": [{"chunkId": "a#1", "docId": "a"}]}, explain_keys=False).retrieved[0].doc_id == "a"


# -- 4. a pipeline that raises -----------------------------------------------------------------
RAISING = (
    "    def fetch(question):\n"
    "        raise ConnectionError('vector store unreachable')\n"
    "    {kind}def pipeline(question, *, item, config, mode):\n"
    "        return fetch(question)\n")


@pytest.mark.parametrize("kind, args", [("", []), ("async ", []), ("", ["--crucible-concurrency=2"]), ("marker", [])],
                         ids=["sync", "async", "concurrent", "marker"])
def test_raising_pipeline_shows_the_users_frames_first(pytester: pytest.Pytester, kind: str, args: list[str]) -> None:
    if kind == "marker":
        add_golden_file(pytester, ITEMS[:2], name="data/items.jsonl")
        pytester.makepyfile(test_marked="""
            import pytest_crucible as crucible

            @crucible.golden("data/items.jsonl")
            def test_item(golden_item):
                pass
            """)
    else:
        add_golden_file(pytester, ITEMS[:2])
    pytester.makeconftest(pipeline_conftest(RAISING.format(kind="" if kind == "marker" else kind)))
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    failures = text[text.index("= FAILURES ="):text.index("= crucible =")]
    assert failures.count(">       return fetch(question)") == 2  # the user's frames: the pipeline, then what it called
    assert failures.count(">       raise ConnectionError('vector store unreachable')") == 2
    assert "pytest_crucible/" not in failures and "CrucibleSession(" not in failures
    assert "concurrent/futures" not in failures and "_await" not in failures
    # The user's pipeline is the first frame of each failure.
    for section in failures.split(" golden item ")[1:] if kind != "marker" else failures.split(" test_item[")[1:]:
        frames = [line for line in section.splitlines() if line.startswith("    ") and "def " in line]
        assert frames[0].strip().endswith("def pipeline(question, *, item, config, mode):")


# -- 5. golden files that match no pattern -----------------------------------------------------
def test_near_miss_golden_files_are_named_with_a_hint(pytester: pytest.Pytester) -> None:
    add_golden_file(pytester, ITEMS[:1], name="golden-library.jsonl")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "golden_library.json").write_text(json.dumps(ITEMS[1:2]))
    add_golden_file(pytester, ITEMS[:1], name=".hidden/golden-hidden.jsonl")
    add_golden_file(pytester, ITEMS[:1], name="venv/golden-venv.jsonl")
    pytester.makeconftest(RANKED_CONFTEST)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([
        "WARNING no golden items collected: 2 file(s) look like golden files but match no crucible_golden_files pattern "
        "(golden_*.jsonl, *.golden.jsonl): golden-library.jsonl, data/golden_library.json",
        "HINT: rename them to match a pattern (e.g. golden-library.jsonl -> golden_library.jsonl), or set the patterns in "
        "your pytest configuration: crucible_golden_files = golden_*.jsonl *.golden.jsonl golden-*.jsonl golden_*.json",
    ])
    assert "golden-hidden" not in result.stdout.str() and "golden-venv" not in result.stdout.str()

    # Only where pytest was pointed: a run of data/ names data's file alone.
    result = pytester.runpytest("data")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["WARNING no golden items collected: 1 file(s) *: data/golden_library.json"])
    assert "golden-library.jsonl" not in result.stdout.str()

    # The suggested patterns work.
    pytester.makeini("[pytest]\ncrucible_golden_files = golden_*.jsonl *.golden.jsonl golden-*.jsonl golden_*.json\n")
    result = pytester.runpytest("--crucible-outcome=record")
    result.assert_outcomes(passed=2)
    assert "WARNING no golden items" not in result.stdout.str()

    # A near miss beside a golden file that was collected: no warning (the session has golden items).
    pytester.makeini("[pytest]\n")
    add_golden_file(pytester, ITEMS[1:2])
    result = pytester.runpytest("--crucible-outcome=record")
    result.assert_outcomes(passed=1)
    assert "WARNING no golden items" not in result.stdout.str()


def test_near_misses_are_capped(pytester: pytest.Pytester) -> None:
    for i in range(30):
        add_golden_file(pytester, ITEMS[:1], name=f"golden-{i:02d}.jsonl")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["WARNING no golden items collected: 20+ file(s) * (+15 more)"])


# -- 6. the wording of the error-class evidence ------------------------------------------------
def test_unanswerable_and_false_premise_evidence_wording() -> None:
    from pytest_crucible.metrics.errors import ClassificationInputs, classify

    unanswerable = classify(ClassificationInputs(answerable=False, crag_grade="incorrect", cited_chunk_ids=("a",)))
    assert unanswerable.evidence == ("The judge graded the answer incorrect (CRAG -1) on an unanswerable item (question type simple), "
                                     "answered although the corpus cannot support an answer.")
    premise = classify(ClassificationInputs(answerable=False, question_type="false_premise", crag_grade="incorrect"))
    assert premise.evidence == ("The judge graded the answer incorrect (CRAG -1) on a false-premise item "
                                "(question type false_premise), answered as if it held.")
