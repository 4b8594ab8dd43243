"""Exactness tests: pytest_crucible.qrels.trec_eval against trec_eval's own outputs.

The reference files in ../shared/vectors/trec_eval/ are trec_eval's test data
and expected outputs.  trec_eval is NIST software: we acknowledge the National
Institute of Standards and Technology as the source of these files.

Which file is which (verified below from the files themselves):

* ``out.test.aq``  = ``trec_eval -q -a qrels.test results.test``
* ``out.test.aql`` = ``trec_eval -q -a -l 2 qrels.rel_level results.test``
* ``out.test.aqc`` = ``trec_eval -q -a -c qrels.test results.trunc``
  (results.trunc lacks query 302 and has junk after the tag on a few lines)
* ``out.comment.test`` = ``trec_eval qrels.comment.test results.comment.test``
  (summary only; docnos contain ``#``)
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.qrels import trec_fast
from pytest_crucible.qrels.trec_eval import (
    DEFAULT_CUTOFFS,
    TrecFormatError,
    _evaluate_per_query,
    _read_qrels_lines,
    _read_run_lines,
    evaluate,
    format_trec_eval,
    main_trec_eval,
    parse_measures,
    rank_run,
    read_qrels,
    read_run,
)

REF = Path(__file__).resolve().parents[1].parent / "shared" / "vectors" / "trec_eval"

CORE = ["P_10", "recall_10", "recip_rank", "ndcg_cut_10", "num_q"]
# every default cutoff: P, recall, ndcg_cut at 9 cutoffs; success at 1, 5, 10
FAMILIES = ["num_q", "recip_rank", "P", "recall", "ndcg_cut", "success"]


@pytest.fixture(scope="module")
def ref() -> Path:
    if not REF.is_dir():
        pytest.skip(
            "../shared/vectors/trec_eval not found: these exactness tests need the "
            "project's shared reference files beside the checkout"
        )
    return REF


def expected_lines(path: Path, measures: list[str]) -> list[str]:
    """The lines of a trec_eval output file for the given measures, in order."""
    names = set(parse_measures(measures))
    return [
        line
        for line in path.read_text().splitlines()
        if line.split("\t")[0].strip() in names
    ]


def produce(qrels: Path, run: Path, measures: list[str], level: int = 1,
            per_query: bool = True, complete: bool = False) -> list[str]:
    per_q, summary = evaluate(read_qrels(qrels), read_run(run), measures, level, complete)
    return format_trec_eval(per_q, summary, measures, per_query).splitlines()


CASES = {
    # name: (qrels, run, expected output, -l, -c)
    "aq": ("qrels.test", "results.test", "out.test.aq", 1, False),
    "aql": ("qrels.rel_level", "results.test", "out.test.aql", 2, False),
    "aqc": ("qrels.test", "results.trunc", "out.test.aqc", 1, True),
}


# --------------------------------------------------------------------------
# exactness


@pytest.mark.parametrize("case", ["aq", "aql"])
def test_core_measures_match_trec_eval_q_output(ref: Path, case: str) -> None:
    qrels, run, out, level, complete = CASES[case]
    got = produce(ref / qrels, ref / run, CORE, level, complete=complete)
    want = expected_lines(ref / out, CORE)
    assert len(want) == 3 * 4 + 5  # 3 queries x 4 measures, then all + num_q
    assert got == want


@pytest.mark.parametrize("case", ["aq", "aql", "aqc"])
def test_every_default_cutoff_matches(ref: Path, case: str) -> None:
    # P, recall and ndcg_cut at 5, 10, 15, 20, 30, 100, 200, 500, 1000, and
    # success_1/5/10 (crucible's hit@k), per query and in the "all" block
    qrels, run, out, level, complete = CASES[case]
    got = produce(ref / qrels, ref / run, FAMILIES, level, complete=complete)
    want = expected_lines(ref / out, FAMILIES)
    assert len(want) == 4 * (1 + 3 * len(DEFAULT_CUTOFFS) + 3) + 1
    assert got == want


def test_complete_flag_scores_missing_query_zero(ref: Path) -> None:
    # results.trunc has no query 302; -c prints it with zeros and averages over 3
    per_q, summary = evaluate(
        read_qrels(ref / "qrels.test"), read_run(ref / "results.trunc"), CORE, complete=True
    )
    assert set(per_q["302"].values()) == {0.0}
    assert summary["num_q"] == 3
    per_q, summary = evaluate(
        read_qrels(ref / "qrels.test"), read_run(ref / "results.trunc"), CORE
    )
    assert list(per_q) == ["301", "303"] and summary["num_q"] == 2


def test_summary_only_with_hash_in_docnos(ref: Path) -> None:
    measures = ["num_q", "recip_rank", "P"]
    got = produce(ref / "qrels.comment.test", ref / "results.comment.test", measures,
                  per_query=False)
    assert got == expected_lines(ref / "out.comment.test", measures)
    assert got[0] == "num_q                 \tall\t31"


def test_plain_summary_matches_out_test(ref: Path) -> None:
    measures = ["num_q", "recip_rank", "P"]
    got = produce(ref / "qrels.test", ref / "results.test", measures, per_query=False)
    assert got == expected_lines(ref / "out.test", measures)


@pytest.mark.parametrize("case", ["aq", "aql"])
def test_reference_files_pair_with_these_qrels(ref: Path, case: str) -> None:
    # num_rel printed by trec_eval = judged docs with grade >= -l, per query;
    # this proves which qrels file and level produced each output file.
    qrels_name, _run, out, level, _complete = CASES[case]
    qrels = read_qrels(ref / qrels_name)
    for line in (ref / out).read_text().splitlines():
        name, qid, value = (part.strip() for part in line.split("\t"))
        if name == "num_rel" and qid != "all":
            assert int(value) == sum(1 for g in qrels[qid].values() if g >= level)


# --------------------------------------------------------------------------
# conventions pinned by the reference data


def test_rank_run_ties_break_by_docno_descending() -> None:
    rows = [("A", 1.0), ("C", 2.0), ("B", 1.0), ("D", 1.0), ("b", 1.0)]
    # score first; equal scores: byte-wise descending docno ("b" > "D" > "B")
    assert rank_run(rows) == ["C", "b", "D", "B", "A"]


def test_opposite_tie_break_would_not_reproduce_trec_eval(ref: Path) -> None:
    qrels = read_qrels(ref / "qrels.rel_level")
    run = read_run(ref / "results.test")
    ascending = {
        qid: sorted(rows, key=lambda r: (-r[1], r[0])) for qid, rows in run.items()
    }
    # feed that order through with strictly decreasing fake scores
    forced = {
        qid: [(doc, float(-i)) for i, (doc, _s) in enumerate(rows)]
        for qid, rows in ascending.items()
    }
    per_q, summary = evaluate(qrels, forced, FAMILIES, relevance_level=2)
    got = format_trec_eval(per_q, summary, FAMILIES, True).splitlines()
    assert got != expected_lines(ref / "out.test.aql", FAMILIES)


def test_ndcg_with_level_uses_grades_below_it(ref: Path) -> None:
    # Zeroing grades below -l 2 changes nDCG, so trec_eval must be using them.
    qrels = read_qrels(ref / "qrels.rel_level")
    thresholded = {
        qid: {d: (g if g >= 2 else 0) for d, g in docs.items()} for qid, docs in qrels.items()
    }
    measures = ["ndcg_cut"]
    want = expected_lines(ref / "out.test.aql", measures)
    run = read_run(ref / "results.test")
    assert produce(ref / "qrels.rel_level", ref / "results.test", measures, 2) == want
    per_q, summary = evaluate(thresholded, run, measures, relevance_level=2)
    assert format_trec_eval(per_q, summary, measures, True).splitlines() != want


# --------------------------------------------------------------------------
# semantics without reference files


def test_query_without_relevant_docs_is_averaged_in() -> None:
    # trec_eval evaluates every judged query that has results: one with no
    # relevant document scores 0 on P/recall/recip_rank and counts in num_q.
    qrels = {"q1": {"a": 1}, "q2": {"b": 0, "c": 1}}
    run = {"q1": [("a", 1.0)], "q2": [("c", 1.0)], "q3": [("z", 1.0)]}  # q3 unjudged: ignored
    per_q, summary = evaluate(qrels, run, ["num_q", "recip_rank", "P_1", "ndcg_cut_1"],
                              relevance_level=2)
    assert list(per_q) == ["q1", "q2"]
    assert per_q["q2"]["recip_rank"] == 0.0 and per_q["q2"]["P_1"] == 0.0
    # nDCG ignores the level: c (grade 1) at rank 1 is the ideal ranking
    assert per_q["q2"]["ndcg_cut_1"] == 1.0
    assert summary["num_q"] == 2
    assert summary["recip_rank"] == 0.0 and summary["ndcg_cut_1"] == 1.0


def test_qids_in_byte_order_and_line_format() -> None:
    qrels = {"9": {"a": 1}, "10": {"a": 1}}
    run = {"9": [("a", 1.0)], "10": [("x", 2.0), ("a", 1.0)]}
    per_q, summary = evaluate(qrels, run, ["recip_rank", "num_q"])
    text = format_trec_eval(per_q, summary, ["recip_rank", "num_q"], True)
    assert text == (
        "recip_rank            \t10\t0.5000\n"
        "recip_rank            \t9\t1.0000\n"
        "num_q                 \tall\t2\n"
        "recip_rank            \tall\t0.7500\n"
    )


def test_no_common_queries_is_an_error() -> None:
    with pytest.raises(ValueError, match="no queries with both"):
        evaluate({"q1": {"a": 1}}, {"q2": [("a", 1.0)]}, ["P_5"])


def test_parse_measures() -> None:
    assert parse_measures(["ndcg_cut_10", "P.20,5", "recip_rank", "num_q", "P_5"]) == [
        "num_q", "recip_rank", "P_5", "P_20", "ndcg_cut_10",
    ]
    assert parse_measures(["recall"]) == [f"recall_{k}" for k in DEFAULT_CUTOFFS]
    assert parse_measures(["success"]) == ["success_1", "success_5", "success_10"]
    for bad in ["map", "P_0", "P_x", "P.", "ndcg"]:
        with pytest.raises(ValueError, match="unknown measure"):
            parse_measures([bad])


# --------------------------------------------------------------------------
# input errors


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("reader", "name", "text", "line", "field", "expected"),
    [
        (read_qrels, "my.qrels", "q1 0 a 1\nq1 0 b\n", 2, None, "expected 4 whitespace-separated fields"),
        (read_qrels, "my.qrels", "q1 0 a 1\n\n# note\nq1 0 b high\n", 4, "rel", "expected an integer"),
        (read_qrels, "my.qrels", "q1 0 a 1\nq1 0 a 0\n", 2, "docno", "judged twice"),
        (read_run, "my.run", "q1 Q0 a 1 2.5 run\nq1 Q0 b 2 1.5\n", 2, None, "expected 6 whitespace-separated fields"),
        (read_run, "my.run", "q1 Q0 a 1 2.5 run\nq1 Q0 b 2 high run\n", 2, "score", "expected a finite number"),
        (read_run, "my.run", "q1 Q0 a 1 nan run\n", 1, "score", "expected a finite number"),
        (read_run, "my.run", "q1 Q0 a 1 2.5 run\nq1 Q0 a 2 1.5 run\n", 2, "docno", "retrieved twice"),
    ],
)
def test_format_errors_name_file_line_field(  # type: ignore[no-untyped-def]
    tmp_path, reader, name, text, line, field, expected
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(TrecFormatError) as info:
        reader(path)
    message = str(info.value)
    assert str(path) in message and f"line {line}" in message and expected in message
    assert "hint:" in message and "\n" not in message
    if field:
        assert f"field '{field}'" in message
    assert (info.value.line, info.value.field) == (line, field)


def test_swapped_arguments_hint(tmp_path: Path) -> None:
    run = _write(tmp_path, "run.txt", "q1 Q0 a 1 2.5 run\n")
    qrels = _write(tmp_path, "qrels.txt", "q1 0 a 1\n")
    with pytest.raises(TrecFormatError, match="swapped"):
        read_qrels(run)
    with pytest.raises(TrecFormatError, match="swapped"):
        read_run(qrels)


def test_readers_skip_comments_blanks_and_trailing_junk(tmp_path: Path) -> None:
    qrels = _write(tmp_path, "q", "# header\n\nq1 0 doc#1 2\n  q1\t0\tb 0\n")
    run = _write(tmp_path, "r", "# run\nq1 Q0 doc#1 1 2.5 tag extra junk\n\nq1 Q0 b 2 3 tag\n")
    assert read_qrels(qrels) == {"q1": {"doc#1": 2, "b": 0}}
    assert read_run(run) == {"q1": [("doc#1", 2.5), ("b", 3.0)]}


# --------------------------------------------------------------------------
# CLI helper


def test_main_prints_trec_eval_output(tmp_path: Path) -> None:
    qrels = _write(tmp_path, "q", "q1 0 a 1\nq1 0 b 1\n")
    run = _write(tmp_path, "r", "q1 Q0 x 1 3 t\nq1 Q0 a 2 2 t\n")
    out, err = io.StringIO(), io.StringIO()
    assert main_trec_eval(qrels, run, ["recip_rank", "P_2"], per_query=True,
                          stdout=out, stderr=err) == 0
    assert err.getvalue() == ""
    assert out.getvalue() == (
        "recip_rank            \tq1\t0.5000\n"
        "P_2                   \tq1\t0.5000\n"
        "recip_rank            \tall\t0.5000\n"
        "P_2                   \tall\t0.5000\n"
    )


def test_main_default_measures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = _write(tmp_path, "q", "q1 0 a 1\n")
    run = _write(tmp_path, "r", "q1 Q0 a 1 1 t\n")
    assert main_trec_eval(qrels, run) == 0
    names = [line.split("\t")[0].strip() for line in capsys.readouterr().out.splitlines()]
    assert names == ["num_q", "recip_rank", "P_10", "recall_10", "ndcg_cut_10"]


@pytest.mark.parametrize(
    ("qrels_text", "run_text", "measures", "expected"),
    [
        ("q1 0 a x\n", "q1 Q0 a 1 1 t\n", None, "line 1, field 'rel'"),
        ("q1 0 a 1\n", "q1 Q0 a 1\n", None, "line 1"),
        ("q1 0 a 1\n", "q1 Q0 a 1 1 t\n", ["map"], "unknown measure 'map'"),
        ("q1 0 a 1\n", "q2 Q0 a 1 1 t\n", None, "no queries with both"),
    ],
)
def test_main_bad_input_exit_2_one_line(  # type: ignore[no-untyped-def]
    tmp_path, qrels_text, run_text, measures, expected
) -> None:
    qrels = _write(tmp_path, "q", qrels_text)
    run = _write(tmp_path, "r", run_text)
    out, err = io.StringIO(), io.StringIO()
    assert main_trec_eval(qrels, run, measures, stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    message = err.getvalue()
    assert message.count("\n") == 1 and expected in message
    assert "Traceback" not in message


def test_main_missing_file(tmp_path: Path) -> None:
    err = io.StringIO()
    missing = tmp_path / "nope.qrels"
    assert main_trec_eval(missing, missing, stdout=io.StringIO(), stderr=err) == 2
    assert str(missing) in err.getvalue() and err.getvalue().count("\n") == 1


# --------------------------------------------------------------------------
# the numpy fast paths (pytest_crucible.qrels.trec_fast) against the reference: the line-by-line
# readers and the per-query loop over the functions of pytest_crucible.metrics.retrieval

# Few distinct values, so that ties, repeated scores and shared docnos are frequent; "é" and
# "\udcff" (a raw byte) make byte order differ from str order.
QIDS = st.sampled_from(["1", "2", "9", "10", "q", "é"])
DOCNOS = st.sampled_from(["a", "b", "c", "A", "B", "d1", "D1", "é", "ab", "a#1", "zz", "\udcff"])
SCORES = st.sampled_from([0.0, -0.0, 1.0, 1.5, -2.25, 3.0, 0.1, 1e-9, 1000.0, 0.30000000000000004])
GRADES = st.integers(-2, 3)
EVAL_MEASURES = ["num_q", "recip_rank", "P_1", "P_3", "P_10", "recall_2", "recall_5",
                 "ndcg_cut_1", "ndcg_cut_3", "ndcg_cut_20", "success_1", "success_5"]


def reference_evaluate(qrels, run, measures, level, complete):  # type: ignore[no-untyped-def]
    """What evaluate() returned before the fast path: the per-query loop and a sum in qid order."""
    names = parse_measures(measures)
    per_measure = [name for name in names if name != "num_q"]
    qids = sorted((q for q in qrels if complete or q in run), key=lambda q: q.encode("utf-8", "surrogateescape"))
    rows = _evaluate_per_query(qids, qrels, run, per_measure, level)
    per_query = {qid: dict(zip(per_measure, row)) for qid, row in zip(qids, rows)}
    summary: dict[str, float] = {}
    for name in names:
        if name == "num_q":
            summary[name] = len(qids)
        else:
            total = 0.0
            for qid in qids:
                total += per_query[qid][name]
            summary[name] = total / len(qids)
    return per_query, summary


def assert_same_evaluation(qrels, run, measures, level, complete) -> None:  # type: ignore[no-untyped-def]
    if not any(complete or q in run for q in qrels):
        with pytest.raises(ValueError, match="no queries with both"):
            evaluate(qrels, run, measures, level, complete)
        return
    got = evaluate(qrels, run, measures, level, complete)
    want = reference_evaluate(qrels, run, measures, level, complete)
    assert got == want  # exactly equal floats, not approximately
    assert repr(got) == repr(want)  # and the same order and types


@st.composite
def judged_and_run(draw):  # type: ignore[no-untyped-def]
    qrels = draw(st.dictionaries(QIDS, st.dictionaries(DOCNOS, GRADES, max_size=8), max_size=5))
    run = draw(st.dictionaries(
        QIDS, st.lists(st.tuples(DOCNOS, SCORES), max_size=20, unique_by=lambda row: row[0]), max_size=5))
    return qrels, run


@settings(max_examples=examples(300), deadline=None)
@given(judged_and_run(), st.integers(-1, 3), st.booleans())
def test_bulk_evaluation_equals_the_per_query_reference(data, level, complete) -> None:  # type: ignore[no-untyped-def]
    qrels, run = data
    assert_same_evaluation(qrels, run, EVAL_MEASURES, level, complete)


def _trec_lines(qrels, run) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    qrels_text = "".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items())
    run_text = "".join(f"{q} Q0 {d} {i} {s!r} tag\n" for q, rows in run.items() for i, (d, s) in enumerate(rows, 1))
    return qrels_text, run_text


def _write_bytes(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@settings(max_examples=examples(150), deadline=None)
@given(judged_and_run(), st.integers(0, 2), st.booleans())
def test_files_read_fast_and_evaluate_as_the_reference(tmp_path_factory, data, level, complete) -> None:  # type: ignore[no-untyped-def]
    qrels, run = data
    qrels_text, run_text = _trec_lines(qrels, run)
    folder = tmp_path_factory.mktemp("fast")
    qrels_path = _write_bytes(folder / "qrels", qrels_text)
    run_path = _write_bytes(folder / "run", run_text)
    # the numpy readers take these well-formed files (no fall-back) and agree with the line readers
    assert trec_fast.parse_qrels(qrels_path.read_bytes()) is not None
    assert trec_fast.parse_run(run_path.read_bytes()) is not None
    with chunks_of(30):  # a query's lines cut across chunks
        chunked_qrels, chunked_run = read_qrels(qrels_path), read_run(run_path)
    fast_qrels, fast_run = read_qrels(qrels_path), read_run(run_path)
    assert repr(fast_qrels) == repr(_read_qrels_lines(qrels_path)) == repr({q: j for q, j in qrels.items() if j})
    assert repr(fast_run) == repr(_read_run_lines(run_path)) == repr({q: rows for q, rows in run.items() if rows})
    assert repr(chunked_qrels) == repr(fast_qrels)
    assert repr(chunked_run) == repr(fast_run) and chunked_run.columns is not None
    # evaluated from the columns the reader kept, and from a plain dict
    assert_same_evaluation(fast_qrels, fast_run, EVAL_MEASURES, level, complete)
    assert_same_evaluation(fast_qrels, dict(fast_run), EVAL_MEASURES, level, complete)
    assert_same_evaluation(fast_qrels, chunked_run, EVAL_MEASURES, level, complete)


def test_bulk_evaluation_deep_rankings_and_odd_inputs() -> None:
    # Longer rankings than the property test draws: the first relevant document deep down (the
    # grade lookup widens past 16, 32, 64), lengths in several width classes, many ties.
    import random

    rng = random.Random(19)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[tuple[str, float]]] = {}
    for q in range(60):
        docs = [f"d{i}" for i in rng.sample(range(400), 200)]
        depth = rng.choice([0, 1, 3, 17, 40, 100, 150])
        run[f"q{q}"] = [(d, float(rng.randint(0, 30))) for d in docs[:depth]]
        judged = rng.sample(docs, 30)
        qrels[f"q{q}"] = {d: rng.choice([-1, 0, 0, 0, 1, 2]) for d in judged}
    for measures in (["recip_rank", "P_5", "ndcg_cut_5"], ["num_q", "P", "recall", "ndcg_cut", "success"]):
        for level in (1, 2):
            assert_same_evaluation(qrels, run, measures, level, complete=True)
    # a repeated docno (scored by the reference for that query), an int score, a float grade
    repeated = {**run, "q1": run["q1"] + run["q1"][:2]}
    assert_same_evaluation(qrels, repeated, ["recip_rank", "P_5", "ndcg_cut_5"], 1, False)
    assert_same_evaluation(qrels, {**run, "q2": [("d1", 3), ("d2", 2.5)]}, ["P_5", "recip_rank"], 1, False)
    assert_same_evaluation({**qrels, "q3": {"d1": 1.5}}, run, ["ndcg_cut_5"], 1, False)


def test_parsed_run_columns_are_not_used_once_the_run_is_edited(tmp_path: Path) -> None:
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}}
    path = _write(tmp_path, "r", "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 c 1 1.0 t\n")
    run = read_run(path)
    assert isinstance(run, trec_fast.ParsedRun) and run.columns is not None
    before = evaluate(qrels, run, ["recip_rank", "ndcg_cut_2"])
    assert before == reference_evaluate(qrels, run, ["recip_rank", "ndcg_cut_2"], 1, False)
    run["q1"][0] = ("a", 0.5)  # b now ranks first
    assert_same_evaluation(qrels, run, ["recip_rank", "ndcg_cut_2"], 1, False)
    assert evaluate(qrels, run, ["recip_rank", "ndcg_cut_2"]) != before
    del run["q2"]
    assert_same_evaluation(qrels, run, ["recip_rank", "ndcg_cut_2"], 1, False)


# Raw lines for the readers: separators, line ends, comments and numbers of every kind,
# well-formed or not, so that both readers must agree on the result or on the error.
SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\t", " \t", "\x0b", "\x0c", "\r"])
LINE_ENDS = st.sampled_from(["\n", "\n", "\n", "\r\n", " \n", "\n\n", "\n# a comment\n", "\n  \t\n", "\n #x y\n"])
NUMBERS = st.one_of(
    st.sampled_from(["1", "0", "-1", "+2", "01", "1.5", "-0.25", ".5", "5.", "-0", "-0.0", "1e3", "1E-2",
                     "1_0", "12345678901234567890", "123456789012345.5", "0.1234567890123456", "nan", "inf",
                     "-inf", "x", "1.2.3", "--1", "+", ".", "1e", "\u0661", "1\x01"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**20), 10**20).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=6).map(str),
)


GOOD_GRADES = st.one_of(st.sampled_from(["1", "0", "-1", "+2", "01", "1_0", "-0"]), st.integers(-(10**20), 10**20).map(str))
GOOD_SCORES = st.one_of(
    st.sampled_from(["1", "-0", "1.5", ".5", "5.", "-0.0", "1e3", "1_0.5", "123456789012345.5", "0.1234567890123456"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.decimals(allow_nan=False, allow_infinity=False, places=4).map(str),
)


@st.composite
def raw_file(draw, fields: int, well_formed: bool = False) -> str:  # type: ignore[no-untyped-def]
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        qid = draw(QIDS)
        if well_formed:
            docno = draw(st.one_of(DOCNOS, st.just("#d")))
            number = draw(GOOD_GRADES if fields == 4 else GOOD_SCORES)
            count = draw(st.sampled_from([fields, fields + 1, fields + 2] if fields == 6 else [fields]))
        else:
            docno = draw(st.one_of(DOCNOS, st.sampled_from(["#d", "d#", "\x1cd"])))
            number = draw(NUMBERS)
            count = draw(st.sampled_from([fields, fields, fields, fields - 1, fields + 1, fields + 2]))
        if fields == 4:
            values = [qid, "0", docno, number]
        else:
            values = [qid, "Q0", docno, "1", number, "tag"]
        values = [*values, "junk", "more"][:count]
        sep = draw(SEPARATORS)
        lines.append(draw(st.sampled_from(["", " ", "\t"])) + sep.join(values) + draw(LINE_ENDS))
    text = "".join(lines)
    return text[:-1] if text and draw(st.booleans()) else text  # sometimes no final newline


def _outcome(reader, path: Path):  # type: ignore[no-untyped-def]
    try:
        return "ok", repr(reader(path))
    except TrecFormatError as exc:
        return "error", str(exc), exc.line, exc.field


@settings(max_examples=examples(300), deadline=None)
@given(raw_file(4))
def test_qrels_reader_agrees_with_the_line_reader(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    path = _write_bytes(tmp_path_factory.mktemp("q") / "qrels", text)
    assert _outcome(read_qrels, path) == _outcome(_read_qrels_lines, path)


@settings(max_examples=examples(300), deadline=None)
@given(raw_file(6))
def test_run_reader_agrees_with_the_line_reader(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    path = _write_bytes(tmp_path_factory.mktemp("r") / "run", text)
    assert _outcome(read_run, path) == _outcome(_read_run_lines, path)


@settings(max_examples=examples(300), deadline=None)
@given(raw_file(4, well_formed=True), raw_file(6, well_formed=True))
def test_well_formed_files_take_the_fast_path(tmp_path_factory, qrels_text: str, run_text: str) -> None:  # type: ignore[no-untyped-def]
    # odd spacing, CRLF, comments, blank lines, junk after the tag, no final newline, numbers
    # float()/int() accept in any spelling: numpy parses them all, exactly as the line readers
    folder = tmp_path_factory.mktemp("w")
    qrels_path, run_path = _write_bytes(folder / "qrels", qrels_text), _write_bytes(folder / "run", run_text)
    for parse, reader, lines, path in ((trec_fast.parse_qrels, read_qrels, _read_qrels_lines, qrels_path),
                                       (trec_fast.parse_run, read_run, _read_run_lines, run_path)):
        want = _outcome(lines, path)
        for chunk in (1, 13, trec_fast._CHUNK):  # files are parsed a chunk of lines at a time
            with chunks_of(chunk):
                if want[0] == "ok":  # a docno twice is the only error left
                    assert repr(parse(path.read_bytes())) == want[1]
                else:
                    assert parse(path.read_bytes()) is None
        assert _outcome(reader, path) == want


@contextmanager
def chunks_of(size: int) -> Iterator[None]:
    saved = trec_fast._CHUNK
    trec_fast._CHUNK = size
    try:
        yield
    finally:
        trec_fast._CHUNK = saved


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=False, allow_infinity=False, width=64), st.integers(0, 17)),
                min_size=1, max_size=50))
def test_scores_parse_exactly_as_float(values) -> None:  # type: ignore[no-untyped-def]
    # fixed-precision columns (one decimal point column for all) and mixed ones, as printed by runs
    tokens = [f"{v:.{p}f}" if abs(v) < 1e17 else repr(v) for v, p in values]
    # 15 digits and a dot: with the dot read as a digit the mantissa passes 2**53
    tokens += ["99999999999999.9", "9999999999999.99", "-99999999999999.7", "0.999999999999999", "5."]
    data = "".join(f"q Q0 d{i} 1 {t} x\n" for i, t in enumerate(tokens)).encode()
    run = trec_fast.parse_run(data)
    assert run is not None
    assert [repr(score) for _doc, score in run["q"]] == [repr(float(t)) for t in tokens]
    fixed = [f"{v % 1e6:.6f}" for v, _p in values]
    run = trec_fast.parse_run("".join(f"q Q0 d{i} 1 {t} x\n" for i, t in enumerate(fixed)).encode())
    assert run is not None
    assert [repr(score) for _doc, score in run["q"]] == [repr(float(t)) for t in fixed]


def test_runs_given_as_iterators_are_read_once() -> None:
    qrels = {"q1": {"a": 1, "b": 2}}
    want = evaluate(qrels, {"q1": [("a", 1.0), ("b", 2.0)]}, ["recip_rank", "ndcg_cut_2"])
    assert evaluate(qrels, {"q1": iter([("a", 1.0), ("b", 2.0)])}, ["recip_rank", "ndcg_cut_2"]) == want
