"""`crucible judge align`: the offline judge fitted to people's labels, measured by stratified k-fold
cross-validation, written as a plain JSON file, and used as a judge like any other
(`--crucible-judge=aligned:FILE`): the fit and its figures, the refusals, the file's round trip, its
identity, the hand-edited and foreign files refused, and runs judged by it kept apart from others."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import crucible_cli, db_rows, write_project

from pytest_crucible.evaluation.answers import AnswerInputs
from pytest_crucible.judge.aligned import AlignedJudge, artifact_text, identity_of, load_aligned_judge, read_artifact
from pytest_crucible.judge.embed import default_embedder
from pytest_crucible.judge.engine import JudgeEngine
from pytest_crucible.judge.lexical_features import CORRECTNESS_FEATURES, ENTAILMENT_FEATURES, correctness_features
from pytest_crucible.judge.select import JudgeSetupError, make_judge
from pytest_crucible.judge.types import CorrectnessRequest, EntailmentRequest
from pytest_crucible.labels.alignment import AlignmentRefused, align
from pytest_crucible.labels.calibration import judge_cases, read_labels_file
from pytest_crucible.metrics.crag import CRAG_GRADES
from pytest_crucible.stats.agreement import cohen_kappa, kappa_intervals

CALIBRATION = Path(__file__).resolve().parent / "data" / "calibration"


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> Path:
    """The project's 160 hand-labelled cases (both halves): enough of every CRAG class and of both faithful
    verdicts among the cases the judge decides (the development half alone has 3 'missing' ones)."""
    path = tmp_path_factory.mktemp("labels") / "labels.jsonl"
    path.write_text("".join((CALIBRATION / name).read_text(encoding="utf-8") for name in ("labels_dev.jsonl", "labels_test.jsonl")),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def aligned(labels: Path) -> tuple[Path, list[str]]:
    """The file `crucible judge align` writes for them, and what it printed."""
    out = labels.parent / "judges" / "aligned.json"
    result = crucible_cli("judge", "align", labels, "--judge", "lexical", "-o", out)
    assert result.ret == 0, result.errlines
    return out, result.outlines


# -- the fit and its figures ------------------------------------------------------------------------------
def test_align_prints_unaligned_and_aligned_side_by_side_and_writes_the_file(aligned) -> None:
    out, lines = aligned
    document = json.loads(out.read_text())
    judge = identity_of(document["contentHash"])
    text = "\n".join(lines)
    assert lines[0].startswith("aligning lexical-v3 to 160 labelled case(s) from ")
    assert "stratified 5-fold cross-validation, seed 1337; kappa intervals: 95% bootstrap over the labels (2000 resamples)" in text
    assert "crag: 160 labels compared, 147 decided by the model (perfect 48, acceptable 32, missing 11, incorrect 56); " \
           "13 decided without the judge, as they are" in text
    assert "faithful: 132 labels compared, 132 decided by the model (true 73, false 59)" in text
    for title in ("kappa", "binary kappa", "accuracy", "binary accuracy", "aligned - unaligned kappa", "human / judge"):
        assert any(line.lstrip().startswith(title) for line in lines), title
    assert f"wrote {out}: judge {judge} (crag, faithful aligned; the others stay lexical-v3's)" in text
    assert document["baseJudge"] == {"model": "lexical-v3", "promptVersion": "lexical-v3", "features": "lexical-v3-features-1"}
    assert document["labels"]["cases"] == 160 and len(document["labels"]["hash"]) == 64
    assert set(document["libraries"]) == {"pytest-crucible", "scikit-learn", "numpy"}
    assert document["fit"]["folds"] == 5 and document["fit"]["seed"] == 1337
    crag, faithful = document["quantities"]["crag"], document["quantities"]["faithful"]
    assert crag["classes"] == list(CRAG_GRADES) and faithful["classes"] == [False, True]
    assert crag["features"] == list(CORRECTNESS_FEATURES) and faithful["features"] == list(ENTAILMENT_FEATURES)
    assert len(crag["coef"]) == 4 and len(faithful["coef"]) == 1


def test_the_unaligned_figures_are_the_calibration_figures_of_the_base_judge(aligned, labels) -> None:
    """The left column is exactly what `crucible judge calibrate` measures of lexical-v3 on the same labels."""
    from pytest_crucible.labels.calibration import calibration_figures

    out, _ = aligned
    cv = {name: q["cv"] for name, q in json.loads(out.read_text())["quantities"].items()}
    cases = read_labels_file(labels)
    figures = calibration_figures(cases, judge_cases(cases, JudgeEngine(make_judge("lexical"), cache_mode="off"), default_embedder()))
    for name in ("crag", "faithful"):
        assert cv[name]["n"] == figures[name]["n"]
        assert cv[name]["unaligned"]["kappa"] == round(figures[name]["kappa"], 4)
        assert cv[name]["unaligned"]["accuracy"] == round(figures[name]["accuracy"], 4)
        assert cv[name]["unaligned"]["confusion"] == figures[name]["confusion"]
    assert cv["crag"]["unaligned"]["kappaBinary"] == round(figures["crag"]["kappaBinary"], 4)


def test_the_cross_validated_figures_hold_together(aligned) -> None:
    out, _ = aligned
    for name, quantity in json.loads(out.read_text())["quantities"].items():
        cv = quantity["cv"]
        for side in ("unaligned", "aligned"):
            block = cv[side]
            low, high = block["kappaCi"]
            assert -1 <= low <= block["kappa"] <= high <= 1, (name, side)
            matrix = block["confusion"]
            assert sum(map(sum, (row.values() for row in matrix.values()))) == cv["n"]
            assert sum(matrix[label][label] for label in matrix) / cv["n"] == pytest.approx(block["accuracy"], abs=1e-4)
        low, high = cv["kappaDifferenceCi"]
        assert low <= cv["aligned"]["kappa"] - cv["unaligned"]["kappa"] <= high
        # The verdicts the model does not decide count unchanged: the human label's row totals are the same.
        assert {k: sum(v.values()) for k, v in cv["aligned"]["confusion"].items()} == \
               {k: sum(v.values()) for k, v in cv["unaligned"]["confusion"].items()}


def test_the_fit_is_deterministic_for_a_seed_and_another_seed_is_another_judge(aligned, labels, tmp_path) -> None:
    out, _ = aligned
    cases = read_labels_file(labels)
    # In-process, the same labels, folds and seed: the same file, byte for byte.
    again = artifact_text(align(cases, path=str(labels)))
    assert again == out.read_text()
    other = tmp_path / "other.json"
    assert crucible_cli("judge", "align", labels, "-o", other, "--seed", "7", "--only", "faithful").ret == 0
    assert read_artifact(other)["fit"]["seed"] == 7
    assert identity_of(read_artifact(other)["contentHash"]) != identity_of(read_artifact(out)["contentHash"])


# -- the refusals ----------------------------------------------------------------------------------------
def _subset(path: Path, keep) -> list[dict]:
    return [line for line in map(json.loads, path.read_text().splitlines()) if keep(line)]


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_too_few_labels_or_a_rare_class_is_refused_and_nothing_is_written(tmp_path, labels) -> None:
    out = tmp_path / "aligned.json"
    # The development half: 3 'missing' grades reach the judge (9 are abstentions graded without it).
    result = crucible_cli("judge", "align", CALIBRATION / "labels_dev.jsonl", "-o", out)
    assert result.ret == 2 and not out.exists()
    assert result.errlines == [
        f"crucible: {CALIBRATION / 'labels_dev.jsonl'}: crag: 3 'missing' label(s) among the 71 cases the judge decides (9 more "
        "case(s) are decided without the judge: abstentions, or claims with nothing retrieved); every class needs at least 5",
        "HINT: label at least 2 more 'missing' answer(s), or align faithful alone (--only faithful)"]
    # ... and aligning faithful alone is allowed
    assert crucible_cli("judge", "align", CALIBRATION / "labels_dev.jsonl", "-o", out, "--only", "faithful").ret == 0
    assert list(read_artifact(out)["quantities"]) == ["faithful"]

    # 29 faithful labels: too few to fit and measure.
    few = _write(tmp_path / "few.jsonl", [{**line, "labels": {"faithful": line["labels"]["faithful"]}}
                                          for line in _subset(labels, lambda line: "faithful" in line["labels"]
                                                              and not line["answer"].lower().startswith("i "))][:29])
    result = crucible_cli("judge", "align", few, "-o", tmp_path / "few.json")
    assert result.ret == 2 and not (tmp_path / "few.json").exists()
    assert "faithful: " in result.errlines[0] and "aligning needs at least 30" in result.errlines[0]
    assert result.errlines[1].startswith("HINT: label more answers")

    # 4 unfaithful answers among 64: a class below 5.
    true = _subset(labels, lambda line: line["labels"].get("faithful") is True and line["contexts"])[:60]
    false = _subset(labels, lambda line: line["labels"].get("faithful") is False and line["contexts"])[:4]
    rare = _write(tmp_path / "rare.jsonl", [{**line, "labels": {"faithful": line["labels"]["faithful"]}} for line in true + false])
    result = crucible_cli("judge", "align", rare, "-o", tmp_path / "rare.json")
    assert result.ret == 2 and not (tmp_path / "rare.json").exists()
    assert "faithful: 4 'false' label(s) among the" in result.errlines[0] and "every class needs at least 5" in result.errlines[0]
    # more folds than a class has labels: the class needs one per fold
    result = crucible_cli("judge", "align", CALIBRATION / "labels_dev.jsonl", "-o", out, "--force", "--only", "faithful",
                          "--folds", "40")
    assert result.ret == 2 and "every class needs at least 40 (one per fold of 40)" in result.errlines[0]
    assert "or use fewer --folds" in result.errlines[1]


def test_align_refuses_to_overwrite_a_file_without_force(tmp_path) -> None:
    out = tmp_path / "aligned.json"
    out.write_text("mine")
    result = crucible_cli("judge", "align", CALIBRATION / "labels_dev.jsonl", "-o", out, "--only", "faithful")
    assert result.ret == 2 and out.read_text() == "mine"
    assert result.errlines == [f"crucible: {out} exists: judge align never overwrites a file",
                               "HINT: another -o path, or --force to replace it (runs judged by the old file keep its identity)"]
    assert crucible_cli("judge", "align", CALIBRATION / "labels_dev.jsonl", "-o", out, "--only", "faithful", "--force").ret == 0
    assert read_artifact(out)["format"] == "crucible-aligned-judge"


def test_a_bad_labels_file_is_the_calibrate_loaders_error(tmp_path) -> None:
    good = json.loads((CALIBRATION / "labels_dev.jsonl").read_text().splitlines()[0])
    for lines, expected in (
        ([good, {**good, "id": "x", "labels": {"crag": "great"}}], "labels.jsonl:2: field 'labels.crag': expected one of"),
        ([good, good], "labels.jsonl:2: field 'id': 'dev-001' is used twice (first on line 1)"),
        ([good, {key: value for key, value in good.items() if key != "question"} | {"id": "y"}], "labels.jsonl:2: field 'question': missing"),
        ([good, {**good, "id": "z", "labels": {"faithfull": True}}], "labels.jsonl:2: field 'labels.faithfull': unknown label"),
    ):
        path = _write(tmp_path / "labels.jsonl", lines)
        result = crucible_cli("judge", "align", path, "-o", tmp_path / "out.json")
        assert result.ret == 2 and not (tmp_path / "out.json").exists()
        assert expected in result.errlines[0] and result.errlines[1].startswith("HINT: "), result.errlines
    assert crucible_cli("judge", "align", path, "-o", tmp_path / "out.json", "--judge", "lexical-v2").ret == 2  # lexical-v3 or a model judge


def test_alignment_needs_labels_of_a_quantity(tmp_path) -> None:
    cases = read_labels_file(CALIBRATION / "labels_dev.jsonl")
    with pytest.raises(AlignmentRefused, match="no crag label to align on"):
        align([case for case in cases if case.crag is None], path="x.jsonl", only=("crag",))


# -- the file: round trip, identity, refusals -------------------------------------------------------------
def test_the_loaded_judge_judges_the_cases_as_the_in_process_model_does(aligned, labels) -> None:
    out, _ = aligned
    document = json.loads(out.read_text())
    loaded = load_aligned_judge(out)
    in_memory = AlignedJudge(document)
    assert loaded.model == loaded.prompt_version == identity_of(document["contentHash"])
    assert loaded.label.startswith(f"{loaded.model} (lexical-v3 aligned on crag, faithful to 160 labelled cases")
    cases = read_labels_file(labels)
    verdicts = judge_cases(cases, JudgeEngine(loaded, cache_mode="off"), default_embedder())
    assert verdicts == judge_cases(cases, JudgeEngine(in_memory, cache_mode="off"), default_embedder())
    # ... and each grade is the fitted model's decision on the base judge's features, applied by hand
    base = make_judge("lexical-v3")
    model = in_memory.models["crag"]
    for case, verdict in zip(cases, verdicts):
        item = AnswerInputs.from_score(case.as_run_row())
        if not (item.has_answer and item.gradable):
            continue
        request = CorrectnessRequest(question=item.question, answer=item.answer or "", reference=item.reference,
                                     assertions=item.must_assertions, answerable=item.answerable, false_premise=item.false_premise)
        [unaligned] = base.judge([request])
        assert verdict.crag == model.decide([correctness_features(request, unaligned).values])[0][0]
    # the aligned judge changed some verdicts of the base judge, on both quantities
    plain = judge_cases(cases, JudgeEngine(base, cache_mode="off"), default_embedder())
    assert any(a.crag != b.crag for a, b in zip(plain, verdicts))
    assert any(a.faithful != b.faithful for a, b in zip(plain, verdicts))


def test_an_aligned_judge_passes_other_requests_to_its_base_and_needs_no_scikit_learn(aligned, monkeypatch) -> None:
    out, _ = aligned
    for name in [module for module in sys.modules if module == "sklearn" or module.startswith("sklearn.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # importing it now fails
    judge = make_judge(f"aligned:{out}")
    base = make_judge("lexical")
    entail = EntailmentRequest(context=("Bikes can be returned within 30 days.",), claims=("Bikes can be returned within 30 days.",
                                                                                         "Returns are free."))
    from pytest_crucible.judge.types import ClaimsRequest, RelevanceRequest, RubricRequest

    others = [ClaimsRequest(question="q", text="Bikes can be returned. They ship fast."),
              RelevanceRequest(question="q", chunk="Bikes can be returned within 30 days.")]
    got, want = judge.judge(others), base.judge(others)
    assert [v.model_dump(exclude={"judge_model", "prompt_version"}) for v in got] == \
           [v.model_dump(exclude={"judge_model", "prompt_version"}) for v in want]
    assert all(v.judge_model == judge.model for v in got)
    [verdict] = judge.judge([entail])
    assert len(verdict.supported) == 2 and len(verdict.reasons) == 2
    [failure] = judge.judge([RubricRequest(name="tone", criteria="polite", question="q", answer="a")])
    assert failure.kind == "rubric"  # the offline judge grades no rubric, aligned or not
    assert judge.grades_rubrics is False and judge.paid is False


def _stamped(document: dict) -> str:
    return artifact_text({key: value for key, value in document.items() if key != "contentHash"})


def test_a_hand_edited_foreign_or_malformed_file_is_refused_with_a_hint(aligned, tmp_path) -> None:
    out, _ = aligned
    document = json.loads(out.read_text())
    bad = tmp_path / "bad.json"
    realign = f"HINT: re-align with your labels: crucible judge align LABELS.jsonl --judge lexical -o {bad} --force"

    def refused(text: str) -> list[str]:
        bad.write_text(text)
        with pytest.raises(JudgeSetupError) as info:
            make_judge(f"aligned:{bad}")
        return str(info.value).splitlines()

    edited = json.loads(out.read_text())
    edited["quantities"]["crag"]["coef"][0][0] += 1.0
    assert refused(json.dumps(edited)) == [
        f"aligned judge {bad}: field 'contentHash': does not match the file's content: the file was edited after "
        "`crucible judge align` wrote it", realign]
    foreign = json.loads(out.read_text())
    foreign["baseJudge"]["features"] = "lexical-v3-features-0"
    assert refused(_stamped(foreign)) == [f"aligned judge {bad}: field 'baseJudge': made for lexical-v3 lexical-v3 with features "
                                          "lexical-v3-features-0; this version computes lexical-v3-features-1", realign]
    older = json.loads(out.read_text())
    older["baseJudge"]["model"] = "lexical-v2"
    assert refused(_stamped(older))[0] == (f"aligned judge {bad}: field 'baseJudge.model': made for judge \"lexical-v2\", which "
                                           "this version cannot align (it aligns lexical-v3)")
    unknown = json.loads(out.read_text())
    unknown["quantities"]["relevance"] = unknown["quantities"]["crag"]
    assert refused(_stamped(unknown))[0] == f"aligned judge {bad}: field 'quantities.relevance': unknown quantity (known: crag, faithful)"
    short = json.loads(out.read_text())
    short["quantities"]["faithful"]["coef"][0] = short["quantities"]["faithful"]["coef"][0][:-1]
    assert refused(_stamped(short)) == [f"aligned judge {bad}: field 'quantities.faithful.coef[0]': expected a list of "
                                        f"{len(ENTAILMENT_FEATURES)} finite numbers", realign]
    scale = json.loads(out.read_text())
    scale["quantities"]["crag"]["scale"][0] = 0
    assert "field 'quantities.crag.scale': expected a list of" in refused(_stamped(scale))[0]
    classes = json.loads(out.read_text())
    classes["quantities"]["faithful"]["classes"] = [0, 1]
    assert "field 'quantities.faithful.classes': expected [false, true], got [0, 1]" in refused(_stamped(classes))[0]
    assert refused("{not json")[0].startswith(f"aligned judge {bad}: not a JSON document (line 1)")
    assert refused("[1, 2]")[0] == f"aligned judge {bad}: field '(the document)': expected an object, got [1, 2]"
    assert refused(json.dumps({"format": "something"}))[0] == (f"aligned judge {bad}: field 'format': expected "
                                                              "'crucible-aligned-judge', got \"something\"")
    no_hash = {key: value for key, value in document.items() if key != "contentHash"}
    assert refused(json.dumps(no_hash))[0] == f"aligned judge {bad}: field 'contentHash': missing"
    with pytest.raises(JudgeSetupError, match=r"cannot read the aligned judge: No such file"):
        make_judge(f"aligned:{tmp_path / 'absent.json'}")
    with pytest.raises(JudgeSetupError, match=r"needs the aligned judge's file: aligned:PATH"):
        make_judge("aligned")
    # The CLI says the same, exit 2, no traceback.
    bad.write_text(json.dumps(edited))
    result = crucible_cli("judge", "calibrate", CALIBRATION / "labels_dev.jsonl", "--judge", f"aligned:{bad}",
                          "--db", tmp_path / "c.db")
    assert result.ret == 2 and result.errlines[0].startswith(f"crucible: aligned judge {bad}: field 'contentHash'")
    assert result.errlines[1] == realign and "Traceback" not in "\n".join(result.errlines)


def test_calibrating_on_the_labels_it_was_aligned_on_warns_that_it_is_in_sample(aligned, labels, tmp_path) -> None:
    out, _ = aligned
    result = crucible_cli("judge", "calibrate", labels, "--judge", f"aligned:{out}", "--db", tmp_path / "c.db")
    assert result.ret == 0
    judge = load_aligned_judge(out).model
    assert result.outlines[0].startswith(f"judge {judge} (lexical-v3 aligned on crag, faithful")
    assert any(line.startswith(f"crucible: warning: {judge} was aligned on these very labels") for line in result.errlines)
    other = crucible_cli("judge", "calibrate", CALIBRATION / "labels_dev.jsonl", "--judge", f"aligned:{out}", "--db", tmp_path / "c.db")
    assert other.ret == 0 and not other.errlines
    stored = db_rows(tmp_path / "c.db", "SELECT DISTINCT judge_model, prompt_version FROM judge_calibrations")
    assert stored == [(judge, judge)]


# -- the kappa's bootstrap --------------------------------------------------------------------------------
def test_kappa_intervals_are_paired_and_deterministic() -> None:
    truth = ["a", "b", "a", "c", "b", "a", "c", "a", "b", "b"] * 4
    noisy = ["a", "b", "b", "c", "b", "a", "a", "a", "b", "c"] * 4
    first = kappa_intervals(truth, noisy, truth, categories=("a", "b", "c"), n_resamples=500, seed=3)
    assert first == kappa_intervals(truth, noisy, truth, categories=("a", "b", "c"), n_resamples=500, seed=3)
    assert first.second == (1.0, 1.0)  # a rater equal to the reference: kappa 1 in every resample
    point = cohen_kappa(list(zip(truth, noisy)), reference=0).kappa
    assert first.first is not None and first.first[0] < point < first.first[1]
    assert first.difference is not None and first.difference[0] == pytest.approx(1 - first.first[1])
    assert first.undefined == 0 and (first.n_resamples, first.confidence, first.seed) == (500, 0.95, 3)
    same = kappa_intervals(truth, noisy, noisy, categories=("a", "b", "c"), n_resamples=200)
    assert same.difference == (0.0, 0.0)
    with pytest.raises(ValueError, match="one length"):
        kappa_intervals(truth, noisy[:-1], truth, categories=("a", "b", "c"))


# -- runs judged by it ------------------------------------------------------------------------------------
FACTS = [("How long is the return window?", "Bikes can be returned within 30 days.", "returns", "returns#p1"),
         ("How long does the battery take to charge?", "The PB500 battery charges in 4 hours.", "battery", "battery#p1"),
         ("When is the shop open?", "Opening hours are 9 to 5.", "faq", "faq#p9")]
# Six items (the gate compares at least six pairs), each question twice with another answer.
ITEMS = [{"id": f"r-{i + 1}", "question": question, "reference": reference, "citations": [{"docId": doc, "chunkId": chunk}]}
         for i, (question, reference, doc, chunk) in enumerate(FACTS * 2)]
CONFTEST = """
import pytest

CHUNKS = [("returns#p1", "returns", "Bikes can be returned within 30 days of delivery."),
          ("battery#p1", "battery", "The PB500 battery charges in 4 hours."), ("faq#p9", "faq", "Opening hours are 9 to 5.")]
ANSWERS = {"r-1": "You can return a bike within 30 days [S1].", "r-2": "It charges in 6 hours.", "r-3": "From 9 to 5.",
           "r-4": "Returns are not accepted.", "r-5": "The PB500 battery charges in 4 hours.", "r-6": "I am not sure, maybe 9 to 5."}

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        retrieved = [{"chunk_id": c, "doc_id": d, "text": t} for c, d, t in CHUNKS]
        return {"answer": None if mode == "component" else ANSWERS[item.id], "retrieved": retrieved, "confidence": 0.8}
    return pipeline
"""


@pytest.mark.slow
def test_runs_judged_by_the_aligned_judge_record_its_identity_and_are_not_compared_with_others(
        aligned, pytester: pytest.Pytester) -> None:
    out, _ = aligned
    project = write_project(pytester, ITEMS, CONFTEST, ini="crucible_outcome = record")
    (project.path / "judges").mkdir()
    (project.path / "judges" / "aligned.json").write_text(out.read_text())
    identity = load_aligned_judge(out).model
    result = project.runpytest_subprocess("--crucible-judge=aligned:judges/aligned.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"judge {identity} (lexical-v3 aligned on crag, faithful to 160 labelled cases, offline): "
                                 "* requests, * cached, * judged, 0 failed*"])
    db = project.path / ".crucible" / "crucible.db"
    [(first, model, prompts)] = db_rows(db, "SELECT id, judge_model, judge_prompt_version FROM runs")
    assert model == prompts == identity
    assert db_rows(db, "SELECT DISTINCT judge_model FROM judge_cache") == [(identity,)]
    assert db_rows(db, "SELECT COUNT(*) FROM item_metrics WHERE metric = 'truthfulness'") == [(6,)]

    # The ini key names it too (relative to the rootdir), and the cache serves the same judge's verdicts.
    (project.path / "pytest.ini").write_text("[pytest]\ncrucible_outcome = record\ncrucible_judge = aligned:judges/aligned.json\n")
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"judge {identity} *: * requests, * cached, 0 judged, 0 failed*"])

    # A run judged by lexical-v3 is another ruler: the comparison is refused (exit 3), naming both judges.
    result = project.runpytest_subprocess("--crucible-judge=lexical")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    runs = [row[0] for row in db_rows(db, "SELECT id FROM runs ORDER BY rowid")]
    refused = crucible_cli("compare", first, runs[-1], "--db", db)
    assert refused.ret == 3
    said = refused.outlines + refused.errlines
    assert f"GATE REFUSED refusing to compare run {first} with run {runs[-1]}: different judge models ({identity} vs lexical-v3)" in said
    assert any(line.startswith("HINT: ") and "an aligned judge is named by its file's content" in line for line in said)
    same = crucible_cli("compare", first, runs[1], "--db", db)  # the same aligned judge: compared
    assert same.ret == 0, same.outlines + same.errlines

    # A broken file is a usage error before any test runs, naming the file and the field.
    edited = json.loads(out.read_text())
    edited["fit"]["seed"] = 2
    (project.path / "judges" / "aligned.json").write_text(json.dumps(edited))
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini option crucible_judge: aligned judge */judges/aligned.json: field 'contentHash': "
                                 "does not match the file's content*", "HINT: re-align with your labels*"])
    assert len(db_rows(db, "SELECT id FROM runs")) == 3
