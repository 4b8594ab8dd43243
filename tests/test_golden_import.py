"""`crucible golden import`, `convert` and `diff`: another tool's evaluation data brought in, written back out,
and two versions of a golden set compared.

Every format is read from a sample file in tests/data/import/ written from that tool's documentation:
ragas (a testset generator's JSONL, an evaluation dataset's JSON, a v0.1 CSV with Python list cells),
DeepEval goldens (JSON, and a CSV with ``;``-joined lists, as DeepEval's older reader takes them, and a JSON additional_metadata cell), promptfoo
(a config's ``tests:`` with a defaultTest, and a CSV with ``__expected`` cells), a LangSmith export, a BEIR
folder, TREC topics with qrels, and a spreadsheet. The corpus is tests/data/import/corpus.jsonl.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import crucible_cli, write_golden

DATA = Path(__file__).parent / "data" / "import"
CORPUS = DATA / "corpus.jsonl"


def items_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def imported(tmp_path: Path, source: str | Path, fmt: str, *extra: str) -> tuple[pytest.RunResult, list[dict]]:
    output = tmp_path / f"golden_{fmt}.jsonl"
    result = crucible_cli("golden", "import", source if isinstance(source, Path) else DATA / source, "--from", fmt,
                          "-o", output, *extra)
    return result, items_of(output) if output.exists() else []


# -- each format ---------------------------------------------------------------------------------------
def test_a_ragas_testset_becomes_drafts_cited_by_the_chunks_its_passages_are_in(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "ragas_testset.jsonl", "ragas", "--corpus", CORPUS)
    assert result.ret == 0, result.stderr
    assert [item["status"] for item in items] == ["draft"] * 3
    first, multi_hop, unmatched = items
    assert first["question"] == "How long do I have to return a bike?"
    assert first["reference"].startswith("Within 30 days")
    assert first["citations"] == [{"docId": "returns", "chunkId": "returns#p1", "mode": "required", "matchScore": 1.0}]
    # a multi-hop sample: each "<n-hop>" passage found in its chunk, and the generator named the question type
    assert {c["chunkId"] for c in multi_hop["citations"]} == {"warranty#p1", "returns#p2"}
    assert multi_hop["questionType"] == "multi_hop"
    origin = first["metadata"]["importedFrom"]
    assert origin["format"] == "ragas" and origin["line"] == 1 and origin["file"].endswith("ragas_testset.jsonl")
    assert first["metadata"]["sourceFields"] == {"synthesizer_name": "single_hop_specific_query_synthesizer"}
    # no id in a ragas sample: a stable hash of the question, the same on every import
    (tmp_path / "again").mkdir()
    assert first["id"].startswith("ragas-") and imported(tmp_path / "again", "ragas_testset.jsonl", "ragas")[1][0]["id"] == first["id"]
    # the passage no chunk holds: listed, and the item marked for review
    assert "citations" not in unmatched and unmatched["metadata"]["importedFrom"]["unmatchedContexts"] == [1]
    out = "\n".join(result.outlines)
    assert "3 of 4 reference passage(s) matched a chunk" in out
    assert "1 of 4 reference passage(s) matched no chunk: the items are marked for review" in out and unmatched["id"] in out


def test_accept_writes_active_items_but_one_whose_passage_matched_nothing_stays_a_draft(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "ragas_testset.jsonl", "ragas", "--corpus", CORPUS, "--accept")
    assert result.ret == 0
    assert [item["status"] for item in items] == ["active", "active", "draft"]
    assert "1 item(s) stay drafts: a reference passage matched no chunk" in result.outlines


def test_ragas_evaluation_samples_keep_what_a_system_returned_and_read_passage_ids(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "ragas_eval.json", "ragas", "--corpus", CORPUS)
    assert result.ret == 0
    sunday, brakes = items
    assert sunday["metadata"]["importedFrom"]["line"] == 2  # the line the object starts on in the JSON array
    # case and whitespace do not stop containment
    assert sunday["citations"] == [{"docId": "stores", "chunkId": "stores#p1", "mode": "required", "matchScore": 1.0}]
    assert sunday["metadata"]["sourceFields"]["response"] == "From noon to five."
    # reference_context_ids name the chunks directly
    assert brakes["citations"] == [{"docId": "warranty", "chunkId": "warranty#p2", "mode": "required"}]


def test_ragas_before_0_2_an_evaluated_samples_contexts_are_kept_not_cited(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "ragas_v1.csv", "ragas", "--corpus", CORPUS)
    assert result.ret == 0
    assert items[0]["reference"] == "Frames are guaranteed for ten years against breakage."  # ground_truth
    assert items[0]["metadata"]["importedFrom"]["row"] == 2
    # an answer is there, so `contexts` is what a system retrieved: kept, not turned into citations
    assert "citations" not in items[0] and "contexts" in items[0]["metadata"]["sourceFields"]
    # the same column in a testset (no answer) holds the passages the question was written from
    testset = tmp_path / "v01_testset.csv"
    testset.write_text('question,contexts,ground_truth,evolution_type\nHow long is the frame warranty?,'
                       '"[\'Frames carry a ten-year warranty against breakage.\']",Ten years.,simple\n')
    result, items = imported(tmp_path, testset, "ragas", "--corpus", CORPUS, "--force")
    assert result.ret == 0 and items[0]["citations"][0]["chunkId"] == "warranty#p1"


@pytest.mark.parametrize("name", ["deepeval_goldens.json", "deepeval_goldens.csv"])
def test_deepeval_goldens_take_their_id_from_additional_metadata(tmp_path: Path, name: str) -> None:
    result, items = imported(tmp_path, name, "deepeval", "--corpus", CORPUS)
    assert result.ret == 0, result.stderr
    first = items[0]
    assert first["id"] in ("warranty-claim", "stores-closed")
    assert first["metadata"]["importedFrom"]["id"] == first["id"]
    assert all(item.get("citations") for item in items)
    if name.endswith(".csv"):  # ";" joins a cell's passages, as DeepEval reads them: both cited
        assert first["metadata"]["referenceContexts"] == ["The eight stores open Tuesday to Saturday", "They are closed on Mondays."]


def test_promptfoo_tests_become_assertions_and_the_rest_is_listed_as_not_imported(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "promptfooconfig.yaml", "promptfoo", "--corpus", CORPUS)
    assert result.ret == 0, result.stderr
    returns, sunday, tyres = items
    assert returns["assertions"] == [{"text": "30 days"}, {"text": "delivery"}]
    assert returns["metadata"]["importedFrom"]["line"] == 11  # the test's line in the YAML
    assert returns["citations"][0]["chunkId"] == "returns#p1"  # vars.context
    assert sunday["id"] == "sunday-hours" and sunday["reference"] == "From 12:00 to 17:00."  # equals: the reference too
    assert tyres["assertions"] == [{"text": "not covered"}]  # a regex without pattern syntax is a literal
    out = "\n".join(result.outlines)
    assert "not imported: assertion type javascript (1), assertion type llm-rubric (3), assertion type regex (a pattern) (1)" in out
    # what was not imported is kept for the way back
    assert {"type": "javascript", "value": "output.length < 200"} in tyres["metadata"]["sourceFields"]["assert"]


def test_promptfoo_csv_expected_cells(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "promptfoo_tests.csv", "promptfoo")
    assert result.ret == 0
    assert items[0]["assertions"] == [{"text": "passport"}]  # icontains: passport
    assert items[1]["reference"] == "two years"  # a plain cell is an equals assertion


def test_promptfoo_asks_which_var_is_the_question_when_it_cannot_tell(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("tests:\n  - vars:\n      topic: returns\n      tone: formal\n")
    result, _ = imported(tmp_path, config, "promptfoo")
    assert result.ret == 2
    assert "promptfooconfig.yaml:2: field 'vars': no question among the vars (topic, tone)" in result.errlines[0]
    result, items = imported(tmp_path, config, "promptfoo", "--map", "question=topic")
    assert result.ret == 0 and items[0]["question"] == "returns"


def test_langsmith_examples_with_a_split(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "langsmith_examples.jsonl", "langsmith")
    assert result.ret == 0
    assert items[0]["id"] == "0b6a1e6c-4a52-4a0f-9a55-0c1f0c3b2f01" and items[0]["question"] == "What is the frame warranty?"
    assert items[0]["reference"] == "Ten years against breakage."
    result, items = imported(tmp_path, "langsmith_examples.jsonl", "langsmith", "--split", "test", "--force")
    assert result.ret == 0 and [item["question"] for item in items] == ["What is the frame warranty?"]


def test_a_spreadsheet_with_map_and_ids_made_valid_and_unique(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "sheet.csv", "csv", "--map", "question=Question", "reference=Answer", "id=ID",
                             "contexts=Evidence", "tags=Area", "--corpus", CORPUS)
    assert result.ret == 0, result.stderr
    assert [item["id"] for item in items] == ["Q-1", "Q/2", "Q-1-2"]
    assert "ids: 2 changed to be valid and unique: 'Q 1' -> 'Q-1', 'Q 1' -> 'Q-1-2'" in result.outlines
    assert items[0]["tags"] == ["stores", "hours"]
    assert items[0]["metadata"]["importedFrom"]["id"] == "Q 1"


def test_beir_queries_become_items_and_their_qrels_citations_and_ledger_rows(tmp_path: Path) -> None:
    db = tmp_path / "crucible.db"
    result, items = imported(tmp_path, DATA / "beir-mini", "beir", "--db", db)
    assert result.ret == 0, result.stderr
    assert [item["id"] for item in items] == ["q1", "q2", "q3"]  # q4 is judged in the dev split only
    assert items[0]["citations"] == [{"docId": "d1", "mode": "required"}, {"docId": "d2", "mode": "acceptable"}]
    assert items[2]["citations"] == [{"docId": "d4", "mode": "acceptable"}]  # grade 1 of the set's 0-2
    rows = sqlite3.connect(db).execute("SELECT query_id, doc_id, grade, source, created_by FROM qrels ORDER BY id").fetchall()
    assert rows == [("q1", "d1", 2, "human", "beir-import"), ("q1", "d2", 1, "human", "beir-import"),
                    ("q1", "d4", 0, "human", "beir-import"), ("q2", "d3", 2, "human", "beir-import"),
                    ("q3", "d4", 1, "human", "beir-import")]
    assert "judgments: 5 read as human judgments by 'beir-import', appended 5 to the qrels ledger; grades onto 0-3: 0->0, 1->1, 2->2" in result.outlines
    result, items = imported(tmp_path, DATA / "beir-mini", "beir", "--split", "dev", "--no-ledger", "--force")
    assert result.ret == 0 and [item["id"] for item in items] == ["q4"]


def test_beir_grades_above_3_are_mapped_and_the_mapping_printed(tmp_path: Path) -> None:
    folder = tmp_path / "graded"
    shutil.copytree(DATA / "beir-mini", folder)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t4\nq1\td2\t1\nq2\td3\t2\n")
    result, items = imported(tmp_path, folder, "beir", "--db", tmp_path / "c.db")
    assert result.ret == 0
    assert "grades onto 0-3: 1->1, 2->2, 4->3" in result.outlines[-2]
    assert items[0]["metadata"]["importedFrom"]["grades"] == {"d1": 4, "d2": 1}  # the source's own, for convert


def test_a_beir_folder_missing_a_part_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(DATA / "beir-mini", folder)
    (folder / "queries.jsonl").unlink()
    result, _ = imported(tmp_path, folder, "beir", "--split", "train")
    assert result.ret == 2
    message = "\n".join(result.errlines)
    assert "a BEIR folder without queries.jsonl and qrels/train.tsv (qrels/ holds: dev, test; --split chooses)" in message
    assert "HINT:" in message and "nothing was imported" in message


def test_trec_topics_and_qrels(tmp_path: Path) -> None:
    result, items = imported(tmp_path, DATA / "trec" / "topics.txt", "trec", "--qrels", DATA / "trec" / "qrels.txt",
                             "--db", tmp_path / "c.db", "--by", "trec assessors")
    assert result.ret == 0, result.stderr
    assert [(item["id"], item["question"]) for item in items] == [("301", "bike return window"), ("302", "frame warranty")]
    assert items[0]["metadata"]["sourceFields"]["desc"] == "How many days after delivery can a bike be returned?"
    assert items[0]["metadata"]["importedFrom"]["line"] == 1 and items[1]["metadata"]["importedFrom"]["line"] == 12
    result, items = imported(tmp_path, DATA / "trec" / "topics.txt", "trec", "--qrels", DATA / "trec" / "qrels.txt",
                             "--no-ledger", "--map", "question=desc", "--force")
    assert items[0]["question"] == "How many days after delivery can a bike be returned?"


def test_without_a_corpus_the_summary_says_retrieval_will_not_be_scored(tmp_path: Path) -> None:
    result, items = imported(tmp_path, "deepeval_goldens.json", "deepeval")
    assert result.ret == 0 and not any("citations" in item for item in items)
    assert ("2 item(s) have no citations: their retrieval metrics will not be scored "
            "(--corpus CHUNKS matches their reference passages to chunks)") in result.outlines


# -- bad input -----------------------------------------------------------------------------------------
def test_a_bad_record_names_file_line_and_field_and_nothing_is_imported(tmp_path: Path) -> None:
    source = tmp_path / "testset.jsonl"
    source.write_text('{"user_input": "fine?", "reference": "yes"}\n{"reference": "no question"}\n'
                      '{"user_input": "kind?", "kind": "sideways"}\n{"user_input": ["a", "list"]}\n')
    output = tmp_path / "golden_ragas.jsonl"
    result, _ = imported(tmp_path, source, "ragas", "--map", "kind=kind")
    assert result.ret == 2 and not output.exists()
    err = "\n".join(result.errlines)
    assert f"{source}:2: field 'user_input or question': missing: the question" in err
    assert f"{source}:3: field 'kind'" in err
    assert f"{source}:4: field 'user_input': expected the question as text" in err
    assert "HINT:" in err and "nothing was imported (3 record(s) with a problem)" in err
    assert "Traceback" not in err
    result, items = imported(tmp_path, source, "ragas", "--map", "kind=kind", "--skip-invalid")
    assert result.ret == 0 and [item["question"] for item in items] == ["fine?"]
    assert "skipped 3 invalid record(s) (--skip-invalid):" in result.outlines


def test_an_existing_output_is_never_replaced_without_force(tmp_path: Path) -> None:
    output = write_golden(tmp_path / "golden_ragas.jsonl", [{"id": "mine", "question": "kept?"}])
    result, _ = imported(tmp_path, "ragas_testset.jsonl", "ragas")
    assert result.ret == 2 and "exists: the import would replace it" in result.errlines[0]
    assert items_of(output) == [{"id": "mine", "question": "kept?"}]
    result, items = imported(tmp_path, "ragas_testset.jsonl", "ragas", "--force")
    assert result.ret == 0 and len(items) == 3


@pytest.mark.parametrize("args, message", [
    (["--map", "question"], "--map 'question': expected KEY=FIELD"),
    (["--map", "answer=A"], "unknown key 'answer'; the keys are question, reference, contexts, context_ids, id, kind, tags"),
    (["--split", "test"], "--split chooses a BEIR qrels split or a LangSmith dataset split"),
    (["--qrels", "q.txt"], "--qrels is read with --from trec only"),
])
def test_usage_mistakes(tmp_path: Path, args: list[str], message: str) -> None:
    result, _ = imported(tmp_path, "ragas_testset.jsonl", "ragas", *args)
    assert result.ret == 2 and message in result.errlines[0] and result.errlines[1].startswith("HINT:")


def test_a_csv_that_is_not_utf8_is_one_error(tmp_path: Path) -> None:
    source = tmp_path / "sheet.csv"
    source.write_bytes("question\nCafé fermé ?\n".encode("latin-1"))
    result, _ = imported(tmp_path, source, "csv")
    assert result.ret == 2 and "not UTF-8 text" in result.errlines[0] and "HINT: save the file as UTF-8" in result.errlines[1]


# -- and back out --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ragas_testset.jsonl", "ragas_eval.json"])
def test_ragas_round_trip_keeps_every_field(tmp_path: Path, name: str) -> None:
    _, _ = imported(tmp_path, name, "ragas", "--corpus", CORPUS)
    back = tmp_path / f"back{Path(name).suffix}"
    result = crucible_cli("golden", "convert", tmp_path / "golden_ragas.jsonl", "--to", "ragas", "-o", back)
    assert result.ret == 0, result.stderr
    original = items_of(DATA / name) if name.endswith(".jsonl") else json.loads((DATA / name).read_text())
    written = items_of(back) if name.endswith(".jsonl") else json.loads(back.read_text())
    assert written == original
    assert any(line.startswith("not representable in ragas: ") and "status" in line for line in result.outlines)


def test_convert_a_written_golden_set_says_what_each_format_cannot_hold(tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.jsonl", [
        {"id": "g1", "question": "How long may I return a bike?", "reference": "30 days.", "tags": ["returns"],
         "assertions": [{"text": "Says 30 days"}], "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}])
    result = crucible_cli("golden", "convert", golden, "--to", "ragas", "-o", tmp_path / "r.jsonl", "--corpus", CORPUS)
    assert result.ret == 0
    sample = items_of(tmp_path / "r.jsonl")[0]
    assert sample == {"user_input": "How long may I return a bike?", "reference": "30 days.",
                      "reference_contexts": [json.loads(CORPUS.read_text().splitlines()[0])["text"]],
                      "reference_context_ids": ["returns#p1"]}
    assert "not representable in ragas: assertions (1 item(s)), id (1 item(s)), tags (1 item(s))" in result.outlines
    result = crucible_cli("golden", "convert", golden, "--to", "deepeval", "-o", tmp_path / "d.json")
    assert json.loads((tmp_path / "d.json").read_text())[0]["additional_metadata"] == {"id": "g1"}
    result = crucible_cli("golden", "convert", golden, "--to", "beir", "-o", tmp_path / "beir", "--corpus", CORPUS)
    assert result.ret == 0
    assert (tmp_path / "beir" / "qrels" / "test.tsv").read_text() == "query-id\tcorpus-id\tscore\ng1\treturns#p1\t2\n"
    assert json.loads((tmp_path / "beir" / "queries.jsonl").read_text()) == {"_id": "g1", "text": "How long may I return a bike?"}
    assert len((tmp_path / "beir" / "corpus.jsonl").read_text().splitlines()) == 6
    # and a BEIR folder written is one the importer reads
    result, items = imported(tmp_path, tmp_path / "beir", "beir", "--no-ledger")
    assert result.ret == 0 and items[0]["citations"] == [{"docId": "returns#p1", "mode": "required"}]


def test_beir_round_trip_keeps_the_grades(tmp_path: Path) -> None:
    imported(tmp_path, DATA / "beir-mini", "beir", "--no-ledger")
    result = crucible_cli("golden", "convert", tmp_path / "golden_beir.jsonl", "--to", "beir", "-o", tmp_path / "back")
    assert result.ret == 0
    positives = [line for line in (DATA / "beir-mini" / "qrels" / "test.tsv").read_text().splitlines() if not line.endswith("\t0")]
    assert (tmp_path / "back" / "qrels" / "test.tsv").read_text().splitlines() == positives
    assert "corpus.jsonl (--corpus CHUNKS writes it)" in result.outlines[-1]


def test_convert_never_replaces_without_force(tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.jsonl", [{"id": "g1", "question": "q?"}])
    (tmp_path / "out.jsonl").write_text("mine\n")
    result = crucible_cli("golden", "convert", golden, "--to", "langsmith", "-o", tmp_path / "out.jsonl")
    assert result.ret == 2 and (tmp_path / "out.jsonl").read_text() == "mine\n"


# -- golden diff ---------------------------------------------------------------------------------------
def test_golden_diff_of_two_files(tmp_path: Path) -> None:
    before = [{"id": "a", "question": "Old wording?", "reference": "R"}, {"id": "b", "question": "B?", "tags": ["x"]},
              {"id": "c", "question": "C?"}]
    after = [{"id": "a", "question": "New wording?", "reference": "R"}, {"id": "b", "question": "B?", "tags": ["x", "y"]},
             {"id": "d", "question": "D?"}]
    a, b = write_golden(tmp_path / "a.jsonl", before), write_golden(tmp_path / "b.jsonl", after)
    result = crucible_cli("golden", "diff", a, b)
    assert result.ret == 1
    out = result.outlines
    assert "added (1): d" in out and "removed (1): c" in out
    assert "changed a: question" in out and "    -Old wording?" in out and "    +New wording?" in out
    assert "changed b: tags" in out
    assert out[-1] == "1 added, 1 removed, 2 changed (1 in content: a comparison with a baseline leaves them out of its pairs)"
    report = json.loads("\n".join(crucible_cli("golden", "diff", a, b, "--json").outlines))
    assert report["changed"][0] == {"id": "a", "contentChanged": True,
                                    "fields": [{"field": "question", "before": "Old wording?", "after": "New wording?"}]}
    # an item written with its defaults and without them is the same item
    write_golden(tmp_path / "c.jsonl", [{**item, "status": "active", "answerable": True} for item in before])
    assert crucible_cli("golden", "diff", a, tmp_path / "c.jsonl").ret == 0
    assert crucible_cli("golden", "diff", a, tmp_path / "missing.jsonl").ret == 2


# -- through pytest ------------------------------------------------------------------------------------
BEIR_CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def crucible_pipeline():
    def pipeline(question, *, item, config, mode):
        ranked = ["d4", "d1", "d2", "d3"]  # the same ranking for every query
        return {"answer": None, "retrieved": [{"chunk_id": f"{d}#1", "doc_id": d} for d in ranked]}
    return pipeline
"""


def test_an_imported_benchmark_runs_with_its_judgments_and_diff_reads_the_run(pytester: pytest.Pytester, monkeypatch) -> None:
    from helpers import COMPONENT_RECORD, db_rows

    monkeypatch.chdir(pytester.path)
    shutil.copytree(DATA / "beir-mini", pytester.path / "beir-mini")
    pytester.makeconftest(BEIR_CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\n")
    result = crucible_cli("golden", "import", "beir-mini", "--from", "beir", "--accept", "-o", "golden_beir.jsonl")
    assert result.ret == 0, result.stderr
    run = pytester.runpytest("-p", "no:randomly")
    assert run.ret == pytest.ExitCode.OK
    run.stdout.fnmatch_lines(["*3 passed*"])
    # the ledger's grades are the ones scored: q1's relevant documents d1 (2) and d2 (1) at ranks 2 and 3; d4,
    # judged 0, at rank 1 is not relevant
    values = dict(db_rows(pytester, "SELECT item_id, value FROM item_metrics WHERE metric = 'mrr'"))
    assert values == {"q1": 0.5, "q2": 0.25, "q3": 1.0}
    # the golden file as the run ran it, against the file edited since
    assert crucible_cli("golden", "diff", "latest", "golden_beir.jsonl").ret == 0
    items = items_of(pytester.path / "golden_beir.jsonl")
    items[1]["question"] = "how long is a frame guaranteed"
    write_golden(pytester.path / "golden_beir.jsonl", items)
    result = crucible_cli("golden", "diff", "latest", "golden_beir.jsonl")
    assert result.ret == 1
    assert "changed q2: question" in result.outlines and "    +how long is a frame guaranteed" in result.outlines


# -- the passage matcher -------------------------------------------------------------------------------
def _index():
    from pytest_crucible.golden_set.context_match import ChunkIndex
    from pytest_crucible.golden_set.corpus import load_corpus

    return ChunkIndex(load_corpus(CORPUS))


def test_containment_either_way_is_a_required_match() -> None:
    index = _index()
    [match] = index.match("  BEYOND 150 km a return is refused. ")
    assert (match.chunk.chunk_id, match.score, match.mode) == ("returns#p2", 1.0, "required")
    # a passage spanning two chunks cites both
    spanning = index.match("Returns\n\nA bike can be returned within 30 days of delivery. It must come back with its charger, "
                           "keys and manual. Bikes ridden between 50 and 150 km are taken back with a usage fee of 10% of the "
                           "price. Beyond 150 km a return is refused.")
    assert [m.chunk.chunk_id for m in spanning] == ["returns#p1", "returns#p2"]


def test_word_overlap_is_strong_weak_or_nothing() -> None:
    from pytest_crucible.golden_set.context_match import MATCH_THRESHOLD, STRONG_MATCH

    index = _index()
    # the chunk's words, reordered, one of six not there: no containment, a strong overlap
    [strong] = index.match("a warranty claim needs the frame number and the receipt")
    assert (strong.chunk.chunk_id, strong.score, strong.mode, strong.contained) == ("warranty#p2", 0.8333, "required", False)
    # three words in four: a weak match, acceptable
    [weak] = index.match("wear parts such as tyres and chains are not covered by the warranty for cargo bikes")
    assert weak.chunk.chunk_id == "warranty#p2" and MATCH_THRESHOLD <= weak.score < STRONG_MATCH and weak.mode == "acceptable"
    # every word, in another order: a full overlap, still not a containment
    [full] = index.match("proof of purchase and the frame number: a warranty claim needs them")
    assert full.score == 1.0 and not full.contained
    assert index.match("helmets are sold at every Lisbon kiosk") == []
    assert index.match("   ") == []


def test_a_short_chunk_inside_a_passage_is_not_a_containment() -> None:
    from pytest_crucible.golden_set.context_match import ChunkIndex
    from pytest_crucible.golden_set.corpus import Chunk

    index = ChunkIndex([Chunk("h#p1", "h", "Returns"), Chunk("r#p1", "r", "Bikes are returned within thirty days of delivery")])
    [match] = index.match("Returns: bikes are returned within thirty days of delivery, with the charger")
    assert match.chunk.chunk_id == "r#p1"  # the one-word heading is in the passage too, but is no evidence


def test_an_empty_source_imports_nothing_and_says_so(tmp_path: Path) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_text("\n")
    result, _ = imported(tmp_path, source, "ragas")
    assert result.ret == 2 and "no record to import" in result.errlines[0]
    assert not (tmp_path / "golden_ragas.jsonl").exists()


def test_the_same_question_twice_gets_two_ids_and_the_change_is_reported(tmp_path: Path) -> None:
    source = tmp_path / "twice.jsonl"
    source.write_text('{"user_input": "Same?"}\n{"user_input": "same?  "}\n')
    result, items = imported(tmp_path, source, "ragas")
    assert result.ret == 0
    first, second = (item["id"] for item in items)
    assert second == f"{first}-2"
    assert f"ids: 1 changed to be valid and unique: '{first}' -> '{second}'" in result.outlines


def test_a_semicolon_csv_and_a_long_cell(tmp_path: Path) -> None:
    source = tmp_path / "sheet.csv"
    passage = "Refunds are accepted within 14 days. " * 5000  # 185,000 characters: beyond csv's default field limit
    source.write_text(f'question;reference;contexts\nHow long?;14 days;"{passage}"\n', encoding="utf-8")
    result, items = imported(tmp_path, source, "csv")
    assert result.ret == 0, result.stderr
    assert items[0]["reference"] == "14 days" and items[0]["metadata"]["referenceContexts"] == [passage.strip()]


def test_a_jsonl_line_that_is_not_json_is_one_problem_among_the_others(tmp_path: Path) -> None:
    source = tmp_path / "testset.jsonl"
    source.write_text('{"user_input": "fine?"}\n{not json\n{"reference": "no question"}\n')
    result, _ = imported(tmp_path, source, "ragas")
    err = "\n".join(result.errlines)
    assert result.ret == 2 and f"{source}:2: not valid JSON" in err and f"{source}:3: field 'user_input or question'" in err


# -- golden check, and a golden file's problems all at once ----------------------------------------------
BAD_GOLDEN = [
    '{"id": "a", "question": "fine?", "citations": [{"docId": "returns", "chunkId": "returns#p9"}]}',
    '{"id": "b", "question": ""}',
    '{"id": "c", "question": "typo?", "questionType": "multihop"}',
    'not json at all',
    '{"id": "a", "question": "again?"}',
]


def test_golden_check_lists_every_problem_and_every_citation_the_corpus_does_not_hold(tmp_path: Path) -> None:
    golden = tmp_path / "golden_bad.jsonl"
    golden.write_text("\n".join(BAD_GOLDEN) + "\n")
    result = crucible_cli("golden", "check", golden)
    assert result.ret == 1
    problems = [line for line in result.outlines if line.startswith(str(golden))]
    assert [line.split(":")[1] for line in problems] == ["2", "3", "4", "5"]
    assert result.outlines[-1] == "4 problem(s) in 1 golden file(s), 1 valid item(s)"
    cites = write_golden(tmp_path / "golden_cites.jsonl", [
        {"id": "d", "question": "q?", "citations": [{"docId": "warranty", "chunkId": "returns#p2"}, {"docId": "nope"},
                                                    {"docId": "stores", "chunkId": "stores#p9"}, {"docId": "stores"}]}])
    result = crucible_cli("golden", "check", cites, "--corpus", CORPUS)
    assert result.ret == 1
    out = "\n".join(result.outlines)
    assert f"{cites}:1: field 'citations[0].docId': chunk 'returns#p2' belongs to document 'returns', not 'warranty'" in out
    assert f"{cites}:1: field 'citations[1].docId': document 'nope' is not in the corpus" in out
    assert f"{cites}:1: field 'citations[2].chunkId': chunk 'stores#p9' is not in the corpus\nHINT: did you mean 'stores#p2'?" in out
    assert result.outlines[-1] == f"3 problem(s) in 1 golden file(s), 1 valid item(s), 4 citation(s) checked against {CORPUS}"
    fine = write_golden(tmp_path / "golden_fine.jsonl", [{"id": "e", "question": "q?", "citations": [{"docId": "stores"}]}])
    assert crucible_cli("golden", "check", fine, "--corpus", CORPUS).ret == 0
    assert crucible_cli("golden", "check", tmp_path / "missing.jsonl").ret == 2
    # The corpus's findings and the file's own, in one list in line order (as an editor walks the file).
    result = crucible_cli("golden", "check", golden, "--corpus", CORPUS)
    problems = [line for line in result.outlines if line.startswith(str(golden))]
    assert [line.split(":")[1] for line in problems] == ["1", "2", "3", "4", "5"]


def test_a_pytest_run_reports_every_problem_of_a_golden_file_at_once(pytester: pytest.Pytester) -> None:
    from helpers import COMPONENT_RECORD, RANKED_CONFTEST

    (pytester.path / "golden_bad.jsonl").write_text("\n".join(BAD_GOLDEN) + "\n")
    pytester.makeconftest(RANKED_CONFTEST)
    pytester.makeini(f"[pytest]\n{COMPONENT_RECORD}\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*4 problems in golden_bad.jsonl:*", "*golden_bad.jsonl:2: field 'question'*",
                                 "*golden_bad.jsonl:3: field 'questionType'*", "*golden_bad.jsonl:4: not valid JSON*",
                                 "*golden_bad.jsonl:5: field 'id': duplicate id 'a'*"])


def test_a_run_names_a_cited_chunk_no_ranking_ever_held(pytester: pytest.Pytester) -> None:
    from helpers import COMPONENT_RECORD, RANKED_CONFTEST, write_project

    items = [{"id": f"q{i}", "question": f"question {i}", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}
             for i in range(11)]
    items.append({"id": "typo", "question": "q?", "citations": [{"docId": "returns", "chunkId": "retruns#p1"}]})
    project = write_project(pytester, items, RANKED_CONFTEST, ini=COMPONENT_RECORD)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.OK  # a hint, not a failure
    result.stdout.fnmatch_lines(["NOTE cited but never retrieved by any item: retruns#p1 (typo): check the id*"])
    # too few items to tell a wrong id from a miss: no hint
    small = project.runpytest("-k", "q1 or q2 or typo")
    assert "NOTE cited but never retrieved" not in small.stdout.str()


@pytest.mark.parametrize("topics", [
    '<topics>\n<topic number="7" type="static">\n  <query>frame warranty</query>\n  <question>How long is a frame guaranteed?</question>\n'
    '  <narrative>Motor warranty alone is not relevant.</narrative>\n</topic>\n</topics>\n',
    "7\tframe warranty\n",
])
def test_trec_topics_in_the_other_layouts(tmp_path: Path, topics: str) -> None:
    (tmp_path / "topics.txt").write_text(topics)
    (tmp_path / "qrels.txt").write_text("7 0 doc:d3 1\n")
    result, items = imported(tmp_path, tmp_path / "topics.txt", "trec", "--qrels", tmp_path / "qrels.txt", "--no-ledger")
    assert result.ret == 0, result.stderr
    assert [(item["id"], item["question"]) for item in items] == [("7", "frame warranty")]
    assert items[0]["citations"] == [{"docId": "d3", "mode": "required"}]


# -- agents and conversations on the way in and out ------------------------------------------------------
AGENT_GOLDENS = [  # DeepEval's Golden with expected_tools: ToolCall objects as JSON, or plain names
    {"input": "Where is order 7?", "expected_output": "Shipped on Monday.",
     "expected_tools": [{"name": "lookup_order", "input_parameters": {"order_id": 7}, "description": "orders"}],
     "additional_metadata": {"id": "order-7"}},
    {"input": "Cancel order 9", "expected_tools": ["lookup_order", "cancel_order"], "additional_metadata": {"id": "cancel-9"}},
]


def test_deepeval_expected_tools_become_expected_tool_calls_and_go_back_out(tmp_path: Path) -> None:
    source = tmp_path / "agent_goldens.json"
    source.write_text(json.dumps(AGENT_GOLDENS))
    result, items = imported(tmp_path, source, "deepeval")
    assert result.ret == 0, result.stderr
    assert [item["expectedTools"] for item in items] == [
        [{"name": "lookup_order", "arguments": {"order_id": 7}}], [{"name": "lookup_order"}, {"name": "cancel_order"}]]
    assert "expected_tools" not in items[0]["metadata"].get("sourceFields", {})
    golden = tmp_path / "golden_deepeval.jsonl"
    for name in ("back.json", "back.csv"):  # DeepEval's JSON, and a CSV with the calls as a JSON cell
        result = crucible_cli("golden", "convert", golden, "--to", "deepeval", "-o", tmp_path / name)
        assert result.ret == 0, result.stderr
        assert not any("expectedTools" in line for line in result.outlines)
        again, round_trip = imported(tmp_path, tmp_path / name, "deepeval", "--force")
        assert again.ret == 0, again.stderr
        assert [item["expectedTools"] for item in round_trip] == [item["expectedTools"] for item in items]
    assert json.loads((tmp_path / "back.json").read_text())[0]["expected_tools"] == [
        {"name": "lookup_order", "input_parameters": {"order_id": 7}}]
    # ragas' single-turn samples hold no tool calls: said, not dropped silently
    result = crucible_cli("golden", "convert", golden, "--to", "ragas", "-o", tmp_path / "r.jsonl")
    assert any(line.startswith("not representable in ragas: ") and "expectedTools (2 item(s))" in line
               for line in result.outlines)


def test_a_deepeval_tool_call_without_a_name_is_named_at_its_line(tmp_path: Path) -> None:
    source = tmp_path / "agent_goldens.json"
    source.write_text(json.dumps([AGENT_GOLDENS[0], {"input": "Q?", "expected_tools": [{"input_parameters": {}}]}], indent=1))
    line = next(number for number, text in enumerate(source.read_text().splitlines(), 1) if '"Q?"' in text) - 1
    result, items = imported(tmp_path, source, "deepeval")
    assert result.ret == 2 and items == []
    assert result.errlines[0] == f"crucible: {source}:{line}: field 'expected_tools': tool call 1 has no name"
    assert result.errlines[1].startswith("HINT: DeepEval writes a list of tool calls")


def test_a_conversation_converted_to_single_turn_samples_says_its_history_is_lost(tmp_path: Path) -> None:
    # LangSmith holds single-turn examples; ragas and DeepEval hold one kind of sample per dataset, so a file
    # mixing conversations and single items flattens the conversations there too (whole: test_golden_import_conversations)
    golden = write_golden(tmp_path / "golden.jsonl", [
        {"id": "c01", "turns": [{"question": "Which bikes ship free?"}, {"question": "And how fast?"}]},
        {"id": "single", "question": "Where are the stores?"}])
    for target in ("ragas", "deepeval", "langsmith"):
        result = crucible_cli("golden", "convert", golden, "--to", target, "-o", tmp_path / f"{target}.jsonl")
        assert result.ret == 0, result.stderr
        assert result.outlines[0].startswith(f"wrote 3 item(s) as {target}")
        assert any("conversations (each turn written as a sample of its own, without its history; ragas and DeepEval "
                   "write them whole from a file of conversations only) (2 item(s))" in line
                   for line in result.outlines), result.outlines
