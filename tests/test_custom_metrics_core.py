"""The pure core of custom metrics: values, rubrics, thresholds, fingerprints and what a run records."""

from __future__ import annotations

import json
import math
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crucible.evaluation.custom_metrics import (
    CustomMetricError,
    Rubric,
    definitions,
    directions,
    metric,
    parse_rubrics,
    ruler_changes,
    run_python_metrics,
)
from pytest_crucible.evaluation.thresholds import parse_thresholds, threshold_failures
from pytest_crucible.metrics import KNOWN_METRICS, resolve_metric


@given(st.integers(-50, 50), st.integers(1, 100), st.data())
def test_a_rubric_score_is_normalised_onto_zero_one_in_order(low: int, width: int, data) -> None:
    rubric = Rubric(name="r", criteria="c", scale=(low, low + width))
    a, b = sorted(data.draw(st.lists(st.integers(low, low + width), min_size=2, max_size=2)))
    assert 0.0 <= rubric.normalise(a) <= rubric.normalise(b) <= 1.0
    assert rubric.normalise(low) == 0.0 and rubric.normalise(low + width) == 1.0


def test_pass_fail_is_one_or_zero_and_a_scale_is_linear() -> None:
    assert Rubric(name="r", criteria="c").normalise(1) == 1.0 and Rubric(name="r", criteria="c").normalise(0) == 0.0
    assert Rubric(name="r", criteria="c", scale=(1, 5)).normalise(3) == 0.5


def test_applies_to_selects_by_kind_and_any_tag() -> None:
    rubric = Rubric(name="r", criteria="c", applies_to=(("kind", ("retrieval",)), ("tags", ("returns", "refunds"))))
    assert rubric.applies({"tags": ["refunds", "uk"]})  # no kind written: a retrieval question
    assert not rubric.applies({"kind": "adversarial", "tags": ["returns"]})
    assert not rubric.applies({"tags": []})
    assert Rubric(name="r", criteria="c").applies({"kind": "aggregation"})


def test_python_metric_values_are_checked_one_by_one() -> None:
    import numpy as np

    calls = []

    def make(name, value):
        def function(item, result, *, config):
            calls.append(name)
            if isinstance(value, Exception):
                raise value
            return value
        return metric(name)(function)

    metrics = [make("flag", True), make("skip", None), make("npy", np.float32(0.25)), make("inf", math.inf),
               make("text", "0.5"), make("boom", ValueError("no policy id")), make("last", 3)]
    values, errors = run_python_metrics(metrics, None, None, {})
    assert values == {"flag": 1.0, "npy": 0.25, "last": 3.0}
    assert calls == ["flag", "skip", "npy", "inf", "text", "boom", "last"]  # one failing metric never stops the next
    assert [e.split(" (")[0] for e in errors] == ["metric inf", "metric text", "metric boom"]
    assert "returned inf" in errors[0] and "returned str '0.5'" in errors[1] and "raised ValueError: no policy id" in errors[2]


def _compile(source: str):
    namespace: dict = {}
    path = f"/tmp/crucible-fingerprint-{abs(hash(source))}.py"
    with open(path, "w") as handle:
        handle.write(textwrap.dedent(source))
    exec(compile(textwrap.dedent(source), path, "exec"), namespace)
    return namespace["words"]


def test_the_fingerprint_ignores_comments_and_layout_and_sees_any_other_edit() -> None:
    base = _compile("""
        import pytest_crucible as crucible
        @crucible.metric("words")
        def words(item, result, *, config):
            return len(result.answer.split())
        """)
    commented = _compile("""
        import pytest_crucible as crucible
        @crucible.metric("words")
        def words(item, result, *, config):
            # count words
            return len(result.answer.split( ))
        """)
    edited = _compile("""
        import pytest_crucible as crucible
        @crucible.metric("words")
        def words(item, result, *, config):
            return len(result.answer.split(" "))
        """)
    assert base.fingerprint == commented.fingerprint != edited.fingerprint


def test_ruler_changes_warn_on_code_and_refuse_on_rubric_text() -> None:
    words = metric("words", better="lower")(lambda item, result, *, config: 1)
    polite = Rubric(name="polite", criteria="Courteous.")
    a = {"id": "A", "custom_metrics": json.dumps(definitions([words], [polite], judge_model="m", rubric_prompt_version="rubric-v1"))}
    changed_code = [{**row, "fingerprint": "0" * 64} if row["name"] == "words" else row for row in json.loads(a["custom_metrics"])]
    warnings, refusal = ruler_changes(a, {"id": "B", "custom_metrics": changed_code}, None)
    assert refusal is None and len(warnings) == 1 and "custom metric words's code differs" in warnings[0]
    changed_rubric = definitions([words], [Rubric(name="polite", criteria="Courteous and brief.")])
    warnings, refusal = ruler_changes(a, {"id": "B", "custom_metrics": changed_rubric}, None)
    assert refusal is not None and "the rubric 'polite' differs" in refusal
    assert ruler_changes(a, {"id": "B", "custom_metrics": changed_rubric}, ["ndcgAt10", "words"]) == ([], None)
    assert directions(a) == {"polite": "higher", "words": "lower"}
    other_prompt = [{**row, "promptVersion": "rubric-v2"} if row["name"] == "polite" else row for row in json.loads(a["custom_metrics"])]
    warnings, refusal = ruler_changes(a, {"id": "B", "custom_metrics": other_prompt}, None)
    assert refusal is not None and "judged with prompt rubric-v1 in one and rubric-v2 in the other" in refusal


def test_rubric_parsing_rejects_what_it_cannot_use() -> None:
    text = json.dumps([{"name": "polite", "criteria": "Courteous.", "scale": [1, 5], "appliesTo": {"kind": "retrieval"}}], indent=1)
    [rubric] = parse_rubrics(json.loads(text), source="r.json", text=text, builtins=KNOWN_METRICS)
    assert rubric.scale == (1, 5) and rubric.applies_to == (("kind", ("retrieval",)),) and rubric.origin == "r.json:3"
    for bad in ([{"name": "x", "criteria": "c", "scale": [1, 1]}], [{"name": "x", "criteria": "c", "scale": [True, 5]}],
                [{"name": "x", "criteria": "c", "steps": "one"}], [{"name": "mrr", "criteria": "c"}], {"name": "x"}, ["x"]):
        with pytest.raises(CustomMetricError):
            parse_rubrics(bad, source="r.json", builtins=KNOWN_METRICS)


def test_thresholds_parse_and_hold_at_their_bound() -> None:
    resolve = lambda name: resolve_metric(name, 10, ("answerWords",))  # noqa: E731
    thresholds = parse_thresholds(["faithfulness>=0.8", "answerWords<=80", "recall@10>0", "mrr<1"], resolve)
    assert [(t.metric, t.op, t.value) for t in thresholds] == [("faithfulness", ">=", 0.8), ("answerWords", "<=", 80.0),
                                                               ("recallAtK", ">", 0.0), ("mrr", "<", 1.0)]
    assert threshold_failures(thresholds, {"faithfulness": 0.8, "answerWords": 80, "recallAtK": 0.5, "mrr": 0.5}) == []
    failures = threshold_failures(thresholds, {"faithfulness": 0.79, "answerWords": 81, "recallAtK": 0.0})
    assert failures == ["faithfulness = 0.79 crosses the threshold faithfulness>=0.8 (crucible_thresholds)",
                        "answerWords = 81 crosses the threshold answerWords<=80 (crucible_thresholds)",
                        "recallAtK = 0 crosses the threshold recallAtK>0 (crucible_thresholds)"]
    for bad in ("faithfulness=0.8", "faithfulness>=nan", "faithfulness>=", "recall@5>=0.5"):
        with pytest.raises(ValueError):
            parse_thresholds([bad], resolve)


def test_an_exported_run_keeps_its_custom_metrics_and_shards_must_agree_on_them(tmp_path) -> None:
    from pytest_crucible.store import Store, StoreError, read_export
    from pytest_crucible.store.merge import merge_shards
    from pytest_crucible.verdict.runs import run_data_from_export

    words = metric("words", better="lower")(lambda item, result, *, config: 1)
    item = {"id": "q1", "question": "q?"}
    score = {"item_id": "q1", "question": "q?", "item": item, "retrieved": [], "metrics": {"words": 3.0}, "outcome": "passed"}
    paths = []
    for name, better in (("a", "lower"), ("b", "higher")):
        paths.append(tmp_path / f"{name}.db")
        store = Store.open(paths[-1])
        defined = definitions([metric("words", better=better)(words.function)], [])
        run = store.start_run(run_id="shared", config_hash="h", params={}, resolved={"retrievalLimit": 10}, mode="system",
                              outcome_mode="record", custom_metrics=defined)
        store.record_scores(run, [score])
        store.finish_run(run, status="complete", golden_hash=None)
        store.close()
    store = Store.open(paths[0])
    (tmp_path / "a.json").write_text(json.dumps(store.export_run("shared")))
    store.close()
    exported = run_data_from_export(read_export(tmp_path / "a.json"))
    assert exported.directions == {"words": "lower"} and exported.metrics["words"] == {"q1": 3.0}
    with pytest.raises(StoreError, match="custom_metrics differs"):
        merge_shards(paths, tmp_path / "merged.db")


def test_docstrings_numpy_bools_empty_parentheses_and_a_read_only_config() -> None:
    import numpy as np

    from pytest_crucible.evaluation.custom_metrics import read_only

    plain = _compile("""
        def words(item, result, *, config):
            return 1
        """)
    documented = _compile('''
        def words(item, result, *, config):
            """Counts words."""
            return 1
        ''')
    assert metric()(plain).fingerprint == metric()(documented).fingerprint
    assert metric()(plain).name == "words"
    assert run_python_metrics([metric("flag")(lambda item, result, *, config: np.bool_(True))], None, None, {}) == ({"flag": 1.0}, [])
    config = read_only({"retrieval": {"rerank": True}, "stops": ["a"]})
    with pytest.raises(TypeError):
        config["retrieval"]["rerank"] = False
    assert config["stops"] == ("a",)
