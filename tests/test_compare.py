"""Run comparison: pairing, directions, refusals, config differences, JSON shape."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.report.views import run_metrics_json
from pytest_crucible.verdict.comparison import (
    ComparisonRefused,
    compare_run_data,
    floor_failures,
)
from pytest_crucible.verdict.runs import RunData


def run(run_id: str, metrics: dict[str, dict[str, float]], resolved: dict | None = None, **extra) -> RunData:
    items = sorted({item for values in metrics.values() for item in values})
    row = {"id": run_id, "config_hash": "h-" + run_id, "resolved": json.dumps(resolved or {"retrievalLimit": 10}), **extra}
    return RunData(run=row, metrics=metrics, item_ids=items)


BASE = {f"q{i:02d}": v for i, v in enumerate([0.2, 0.4, 0.5, 0.3, 0.6, 0.1, 0.5, 0.4, 0.2, 0.3, 0.7, 0.5, 0.4, 0.6, 0.3, 0.2])}


def test_clear_improvement_is_significant_and_verdict_follows_direction() -> None:
    better = {item: value + 0.2 + 0.01 * (i % 3) for i, (item, value) in enumerate(BASE.items())}
    comparison = compare_run_data(run("A", {"ndcgAt10": BASE, "aurc": BASE}), run("B", {"ndcgAt10": better, "aurc": better}))
    ndcg, aurc = comparison.metrics["ndcgAt10"], comparison.metrics["aurc"]
    assert ndcg.significant and ndcg.verdict == "improved" and ndcg.ci[0] > 0 and ndcg.p < 0.05
    # The same rise in a lower-is-better metric is a regression.
    assert aurc.significant and aurc.verdict == "regressed" and aurc.regressed


def test_noise_is_not_significant_and_reports_power() -> None:
    noisy = {item: value + (0.05 if i % 2 else -0.05) for i, (item, value) in enumerate(BASE.items())}
    m = compare_run_data(run("A", {"mrr": BASE}), run("B", {"mrr": noisy})).metrics["mrr"]
    assert not m.significant and m.verdict == "not significant"
    assert m.mde is not None and m.mde > 0


def test_pairs_by_item_id_and_counts_dropped_pairs() -> None:
    a = run("A", {"ndcgAt10": {"x": 0.1, "y": 0.2, "z": 0.3}, "recallAtK": {"x": 1.0, "y": 1.0}})
    b = run("B", {"ndcgAt10": {"y": 0.4, "z": 0.5, "w": 0.9}, "recallAtK": {"y": 1.0, "z": 0.0}})
    comparison = compare_run_data(a, b)
    assert comparison.paired_items == 2  # y and z
    assert comparison.metrics["ndcgAt10"].n == 2 and comparison.metrics["ndcgAt10"].dropped == 0
    assert comparison.metrics["ndcgAt10"].delta == pytest.approx(0.2)
    recall = comparison.metrics["recallAtK"]
    assert (recall.n, recall.dropped) == (1, 1) and recall.delta is None and "not tested" in recall.note
    # Every item left out of the pairs is named with its reason (none is dropped silently).
    assert comparison.excluded == [{"id": "w", "run": "A", "reason": "missing from A"},
                                   {"id": "x", "run": "B", "reason": "missing from B"}]
    assert comparison.to_json()["excluded"] == comparison.excluded


def test_errored_items_and_kind_changes_are_excluded_with_their_reason() -> None:
    a = run("A", {"ndcgAt10": {"p": 0.5, "q": 0.5, "r": 0.5}})
    b = run("B", {"ndcgAt10": {"p": 0.7, "r": 0.7}})
    b.item_ids.append("q")
    b.errored["q"] = "ValueError: index not built\nTraceback ..."
    a.kinds.update(p="retrieval", r="retrieval")
    b.kinds.update(p="retrieval", r="adversarial")
    comparison = compare_run_data(a, b)
    assert comparison.paired_items == 1 and comparison.metrics["ndcgAt10"].n == 1
    assert comparison.excluded == [{"id": "q", "run": "B", "reason": "errored in B: ValueError: index not built"},
                                   {"id": "r", "run": "A", "reason": "different kind (retrieval in A, adversarial in B)"}]


def test_an_older_offline_baseline_names_the_option_that_makes_the_runs_comparable() -> None:
    current = run("A", {"faithfulness": BASE}, judge_model="lexical-v3", judge_prompt_version="lexical-v3")
    for older in ("lexical-v2", "lexical-v1"):
        baseline = run("B", {"faithfulness": BASE}, judge_model=older, judge_prompt_version=older)
        with pytest.raises(ComparisonRefused, match=f"--crucible-judge={older}; lexical-v3 is the offline default, "
                                                   "lexical-v2, lexical-v1 stay selectable"):
            compare_run_data(current, baseline)


def test_different_judges_are_refused_naming_both() -> None:
    a = run("A", {"faithfulness": BASE}, judge_model="claude-haiku-5-5", judge_prompt_version="v1")
    b = run("B", {"faithfulness": BASE}, judge_model="lexical-v1", judge_prompt_version="v1")
    with pytest.raises(ComparisonRefused, match="different judge models \\(claude-haiku-5-5 vs lexical-v1\\)"):
        compare_run_data(a, b)
    c = run("C", {"faithfulness": BASE}, judge_model="claude-haiku-5-5", judge_prompt_version="v2")
    with pytest.raises(ComparisonRefused, match="different judge prompt versions"):
        compare_run_data(a, c)


def test_two_few_shot_alignments_of_one_model_are_refused_as_different_prompts() -> None:
    a = run("A", {"faithfulness": BASE}, judge_model="claude-haiku-5-5", judge_prompt_version="crucible-v1+aligned-0123456789ab")
    for other in ("crucible-v1+aligned-ba9876543210", "crucible-v1"):
        b = run("B", {"faithfulness": BASE}, judge_model="claude-haiku-5-5", judge_prompt_version=other)
        with pytest.raises(ComparisonRefused, match=r"(?s)different judge prompt versions .*\+aligned-<hash> is one `crucible "
                                                    r"judge align` file; other examples, or none, are other prompts"):
            compare_run_data(a, b)


def test_config_difference_is_reported_and_many_changes_warn() -> None:
    one = compare_run_data(run("A", {"mrr": BASE}), run("B", {"mrr": BASE}, {"retrievalLimit": 10, "rerank": True}))
    assert one.config_changes == {"rerank": (None, True)} and not one.warnings
    two = compare_run_data(run("A", {"mrr": BASE}), run("B", {"mrr": BASE}, {"retrievalLimit": 5, "rerank": True}))
    assert len(two.config_changes) == 2
    assert any("isolate one variable" in w for w in two.warnings)


def test_json_has_the_spec_shape() -> None:
    better = {item: value + 0.2 for item, value in BASE.items()}
    document = compare_run_data(run("A", {"ndcgAt10": BASE}), run("B", {"ndcgAt10": better})).to_json()
    assert {"a", "b", "pairedItems", "seed", "metrics"} <= set(document)
    assert (document["a"], document["b"], document["pairedItems"], document["seed"]) == ("A", "B", 16, 1337)
    entry = document["metrics"]["ndcgAt10"]
    assert set(entry) == {"a", "b", "delta", "ci", "p", "significant"}
    assert len(entry["ci"]) == 2 and entry["significant"] is True
    json.dumps(document)  # plain JSON all the way down


def test_metrics_json_leaves_out_families_not_computed() -> None:
    document = run_metrics_json(run("A", {"ndcgAt10": {"x": 0.5, "y": 1.0}, "recallAtK": {"x": 1.0}}))
    assert document == {"runId": "A", "configHash": "h-A", "n": 2, "retrieval": {"recallAtK": 1.0, "ndcgAt10": 0.75}}


def test_holm_makes_the_gate_stricter() -> None:
    slightly = {item: value + (0.06 if i % 4 else -0.02) for i, (item, value) in enumerate(BASE.items())}
    metrics = {f"m{i}": BASE for i in range(6)}
    candidate = {f"m{i}": slightly if i == 0 else BASE for i in range(6)}
    plain = compare_run_data(run("A", metrics), run("B", candidate), multiple="none").metrics["m0"]
    holm = compare_run_data(run("A", metrics), run("B", candidate)).metrics["m0"]  # Holm is the default
    assert holm.p >= plain.p and holm.p_unadjusted == plain.p


def test_floors() -> None:
    assert floor_failures({"ndcgAt10": 0.55, "aurc": 0.2}, {"ndcgAt10": 0.6, "aurc": 0.1, "mrr": 0.5}) == [
        "ndcgAt10 = 0.5500 is below the floor 0.6",
        "aurc = 0.2000 is above the floor 0.1",
        "mrr: no value in this run (floor 0.5)",
    ]
    assert floor_failures({"ndcgAt10": 0.6}, {"ndcgAt10": 0.6}) == []


scores = st.lists(st.floats(0, 1, allow_nan=False).map(lambda x: round(x, 4)), min_size=6, max_size=30)


@settings(max_examples=40, deadline=None)
@given(scores, st.randoms(use_true_random=False))
def test_swapping_runs_negates_delta_and_interval(values, rnd) -> None:
    a = {f"i{k}": v for k, v in enumerate(values)}
    b = {f"i{k}": round(min(1.0, max(0.0, v + rnd.uniform(-0.3, 0.3))), 4) for k, v in enumerate(values)}
    ab = compare_run_data(run("A", {"m": a}), run("B", {"m": b}), n_resamples=2000, n_permutations=2000).metrics["m"]
    ba = compare_run_data(run("B", {"m": b}), run("A", {"m": a}), n_resamples=2000, n_permutations=2000).metrics["m"]
    assert ab.delta == pytest.approx(-ba.delta, abs=1e-12)
    assert ab.ci[0] == pytest.approx(-ba.ci[1], abs=1e-9) and ab.ci[1] == pytest.approx(-ba.ci[0], abs=1e-9)
    assert ab.p == pytest.approx(ba.p) and ab.significant == ba.significant


@settings(max_examples=40, deadline=None)
@given(scores)
def test_identical_runs_are_never_significant(values) -> None:
    a = {f"i{k}": v for k, v in enumerate(values)}
    m = compare_run_data(run("A", {"m": a}), run("B", {"m": dict(a)})).metrics["m"]
    assert (m.delta, m.ci, m.p, m.significant) == (0.0, (0.0, 0.0), 1.0, False)


def test_runs_read_from_a_store_compare(tmp_path) -> None:
    from pytest_crucible.store import Store
    from pytest_crucible.verdict.runs import load_run

    store = Store.open(tmp_path / "c.db")
    ids = []
    for shift in (0.0, 0.25):
        run_id = store.start_run(config_hash="h", params={}, resolved={"retrievalLimit": 10}, mode="system", outcome_mode="record")
        for item, value in BASE.items():
            store.record_score(run_id, {"item_id": item, "question": "q", "item": {"id": item, "question": "q"},
                                        "outcome": "passed", "metrics": {"ndcgAt10": value + shift}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        ids.append(run_id)
    comparison = compare_run_data(load_run(store, ids[0]), load_run(store, store.resolve_run("latest")))
    assert (comparison.a, comparison.b, comparison.paired_items) == (ids[0], ids[1], len(BASE))
    assert comparison.metrics["ndcgAt10"].delta == pytest.approx(0.25)
    assert comparison.metrics["ndcgAt10"].verdict == "improved"


def test_response_relevancy_measured_with_two_embedders_is_left_out_with_the_reason() -> None:
    shifted = {item: value + 0.3 for item, value in BASE.items()}
    metrics_a, metrics_b = {"ndcgAt10": BASE, "responseRelevancy": BASE}, {"ndcgAt10": BASE, "responseRelevancy": shifted}
    same = compare_run_data(run("A", metrics_a, embedder="wordllama-l2-supercat-256"),
                            run("B", metrics_b, embedder="wordllama-l2-supercat-256"))
    assert same.metrics["responseRelevancy"].significant and not same.warnings
    other = compare_run_data(run("A", metrics_a, embedder="hashing-v1"), run("B", metrics_b, embedder="wordllama-l2-supercat-256"))
    assert "responseRelevancy" not in other.metrics and "ndcgAt10" in other.metrics
    assert ("the ruler changed: responseRelevancy was measured with embedder hashing-v1 in A and "
            "wordllama-l2-supercat-256 in B, so it is left out of the comparison") in other.warnings[0]
    older = compare_run_data(run("A", metrics_a), run("B", metrics_b, embedder="wordllama-l2-supercat-256"))
    assert "responseRelevancy" not in older.metrics
    assert "not recorded (hashing-v1 unless crucible_embedder was overridden) in A" in older.warnings[0]


def test_a_pass_that_is_only_a_lack_of_power_says_so() -> None:
    from pytest_crucible.verdict.gate import GateSettings, decide

    # 16 items, a real but noisy drop of about 0.06: not significant, yet the interval allows a drop
    # larger than these pairs could detect. The build passes (nothing was shown to regress) and says why
    # that pass is weak; a metric whose interval is tight around 0 gets no such line.
    noisy = {item: value - (0.25 if i % 3 == 0 else -0.02) for i, (item, value) in enumerate(BASE.items())}
    result = decide(run("B", {"ndcgAt10": noisy, "mrr": BASE}), run("A", {"ndcgAt10": BASE, "mrr": BASE}), GateSettings(baseline="A"))
    assert result.passed
    m = result.comparison.metrics["ndcgAt10"]
    assert not m.significant and -m.ci[0] > m.mde
    [line] = [w for w in result.warnings if "underpowered" in w]
    assert line.startswith(f"WARNING underpowered: ndcgAt10 is not significant, but a drop of up to {-m.ci[0]:.3f} is not ruled out")
    assert "mrr" not in line
    assert result.to_json()["warnings"] == result.warnings  # every surface reads the same lines


def test_metrics_at_k_measured_at_different_k_are_never_compared() -> None:
    from pytest_crucible.verdict.gate import GateSettings, decide

    better = {item: min(1.0, value + 0.3) for item, value in BASE.items()}
    at_10 = run("A", {"precisionAtK": BASE, "ndcgAt10": BASE}, eval_k=10)
    at_1 = run("B", {"precisionAtK": better, "ndcgAt10": BASE}, eval_k=1)
    result = decide(at_1, at_10, GateSettings(baseline="A", gate=("ndcgAt10",)))
    # precision@1 against precision@10 is left out, said in the warnings every surface shows; nDCG@10 is compared.
    assert result.passed and set(result.comparison.metrics) == {"ndcgAt10"}
    [warning] = [w for w in result.comparison.warnings if "ruler changed" in w]
    assert "K = 10 in A and K = 1 in B (ini crucible_k)" in warning and "precision@10 vs precision@1" in warning
    assert "--crucible-rescore" in warning
    assert result.comparison.to_json()["warnings"] == result.comparison.warnings
    # Gating on it refuses (exit 3), named or through the default gate (every metric): the gate cannot
    # judge a metric measured with two rulers, and a pass without it would be a pass nobody measured.
    for gate in (("precisionAtK",), None):
        gated = decide(at_1, at_10, GateSettings(baseline="A", gate=gate))
        assert gated.verdict == "refused" and gated.exit_code == 3
        assert gated.refusal.startswith("refusing to gate precisionAtK: the metrics at K were cut off at K = 10 in A and K = 1 in B")
        assert "HINT: add --crucible-rescore (crucible compare --rescore) to score both runs at K = 10" in gated.refusal


def test_the_cutoff_is_the_rulers_not_the_pipelines() -> None:
    """Two pipelines returning different numbers of chunks, measured at one K, are one ruler: their
    precision@10 rows are compared (the retrievalLimit change is a config change, not a ruler change).
    A run recorded before the cutoff was its own setting was measured at its retrievalLimit."""
    better = {item: min(1.0, value + 0.3) for item, value in BASE.items()}
    one = compare_run_data(run("A", {"precisionAtK": BASE}, {"retrievalLimit": 10}, eval_k=10),
                           run("B", {"precisionAtK": better}, {"retrievalLimit": 1}, eval_k=10))
    assert one.metrics["precisionAtK"].verdict == "improved"
    assert not [w for w in one.warnings if "ruler" in w]
    legacy = compare_run_data(run("A", {"precisionAtK": BASE}, {"retrievalLimit": 5}),
                              run("B", {"precisionAtK": better}, {"retrievalLimit": 1}, eval_k=5))
    assert legacy.metrics["precisionAtK"].verdict == "improved" and run("A", {}, {"retrievalLimit": 5}).k == 5


def test_rescore_measures_both_runs_at_the_baselines_k(tmp_path) -> None:
    """--crucible-rescore / crucible compare --rescore: the candidate's stored rankings are scored again at
    the baseline's K, so precision@10 meets precision@10; the note says which K was used."""
    from pytest_crucible.store import Store
    from pytest_crucible.verdict.gate import GateSettings, decide
    from pytest_crucible.verdict.ruler import prepare_pair
    from pytest_crucible.verdict.runs import load_run

    store = Store.open(tmp_path / "k.db")
    ids = []
    for k in (10, 2):
        run_id = store.start_run(config_hash=f"h{k}", params={}, resolved={"retrievalLimit": 10}, mode="component",
                                 outcome_mode="record", eval_k=k)
        for i in range(12):
            item = {"id": f"q{i}", "question": "q", "citations": [{"docId": "d", "chunkId": f"c{i}", "mode": "required"}]}
            ranking = [{"chunk_id": f"x{j}", "doc_id": "x"} for j in range(i % 4)] + [{"chunk_id": f"c{i}", "doc_id": "d"}]
            hit = i % 4 < k
            store.record_score(run_id, {"item_id": item["id"], "question": "q", "item": item, "outcome": "passed",
                                        "retrieved": ranking, "metrics": {"precisionAtK": (1 / k) if hit else 0.0}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        ids.append(run_id)
    baseline, current = (load_run(store, run_id, golden=True, rankings=True) for run_id in ids)
    assert (baseline.k, current.k) == (10, 2)
    assert decide(current, baseline, GateSettings(baseline=ids[0], gate=("precisionAtK",))).verdict == "refused"
    current, baseline, notes = prepare_pair(store, current, baseline, rescore=True)
    assert (baseline.k, current.k) == (10, 10)
    assert "at the baseline's K = 10 (this run was measured at K = 2)" in notes[0]
    # The same rankings at one K: precision@10 is 0.1 for every item in both runs.
    assert set(current.metrics["precisionAtK"].values()) == {0.1} == set(baseline.metrics["precisionAtK"].values())
    result = decide(current, baseline, GateSettings(baseline=ids[0], gate=("precisionAtK",)), notes)
    assert result.passed and result.comparison.metrics["precisionAtK"].delta == 0.0
    store.close()


def test_a_non_finite_value_refuses_the_comparison_naming_the_metric_item_and_run() -> None:
    from pytest_crucible.verdict.comparison import ComparisonRefused, compare_run_data
    from pytest_crucible.verdict.runs import RunData

    items = [f"q{i}" for i in range(8)]
    a = RunData(run={"id": "A"}, metrics={"mrr": dict.fromkeys(items, 0.5)}, item_ids=items)
    b = RunData(run={"id": "B"}, metrics={"mrr": {**dict.fromkeys(items, 0.5), "q3": float("nan")}}, item_ids=items)
    with pytest.raises(ComparisonRefused) as refused:
        compare_run_data(a, b)
    assert str(refused.value).startswith("mrr of item q3 is nan in run B: a comparison needs finite numbers\nHINT: ")
    b.metrics["mrr"]["q3"] = float("inf")
    with pytest.raises(ComparisonRefused, match="mrr of item q3 is inf in run B"):
        compare_run_data(a, b)
