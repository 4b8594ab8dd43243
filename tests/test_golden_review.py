"""Reviewing drafts: `crucible golden review / accept / reject`, the rejected status, lexical drafts."""

from __future__ import annotations

import json
import re

import pytest
from helpers import RANKED_CONFTEST, crucible_cli, write_golden

from pytest_crucible.golden_set.corpus import Chunk
from pytest_crucible.golden_set.lexical import lexical_drafts
from pytest_crucible.golden_set.review import set_status, with_status
from pytest_crucible.golden_set.schema import GoldenItem, load_golden_file

# CRLF line endings, odd spacing, unicode (raw and escaped), a "status" inside a string, in metadata and
# in a list, a key without status, and no final newline.
LINES = [
    '{"id": "gen-1", "question": "Qué garantía?", "status": "draft", "metadata": {"status": "draft"}}',
    '{ "id" : "gen-2" ,"question":"Is \\"status\\": \\"draft\\" text?",   "tags" : ["status"] }',
    '{"id":"gen-3","status":"draft","question":"日本語 ✓ \\u00e9","reference":"x"}',
    '{"id": "keep", "question": "Untouched?", "status": "draft"}',
]
ORIGINAL = "\r\n".join(LINES).encode("utf-8")


def write(tmp_path, data: bytes = ORIGINAL, name: str = "golden_gen.jsonl"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_accept_and_reject_change_only_the_status_values(tmp_path) -> None:
    path = write(tmp_path)
    result = crucible_cli("golden", "accept", path, "gen-1", "gen-3")
    assert result.ret == 0, result.errlines
    assert result.outlines == [f"accepted 2 items in {path}: gen-1, gen-3"]
    expected = ORIGINAL.replace(b'"status": "draft", "metadata"', b'"status": "active", "metadata"', 1) \
                       .replace(b'"gen-3","status":"draft"', b'"gen-3","status":"active"', 1)
    assert path.read_bytes() == expected  # metadata.status, CRLF, unicode, no final newline: all kept

    result = crucible_cli("golden", "reject", path, "gen-2")
    assert result.ret == 0, result.errlines
    assert result.outlines == [f"rejected 1 item in {path}: gen-2"]
    # No status key: inserted after the last member with the line's own separators (" ," and " : ").
    expected = expected.replace(b'"tags" : ["status"] }', b'"tags" : ["status"] ,"status" : "rejected" }', 1)
    assert path.read_bytes() == expected
    statuses = {item.id: item.status for item in load_golden_file(path)}
    assert statuses == {"gen-1": "active", "gen-2": "rejected", "gen-3": "active", "keep": "draft"}


def test_a_byte_order_mark_and_a_final_newline_are_kept(tmp_path) -> None:
    data = b"\xef\xbb\xbf" + b'{"id": "a", "question": "Q?", "status":"draft"}\n\n{"id": "b", "question": "R?"}\n'
    path = write(tmp_path, data)
    change = set_status(path, ["a", "b"], "rejected")
    assert change.changed == ["a", "b"]
    assert path.read_bytes() == b"\xef\xbb\xbf" + (
        b'{"id": "a", "question": "Q?", "status":"rejected"}\n\n{"id": "b", "question": "R?", "status": "rejected"}\n')


def test_with_status_respects_strings_and_nesting() -> None:
    line = '{"metadata": {"status": "x", "a": [1, {"status": "y"}]}, "id": "z", "question": "\\"status\\":", "status": "draft"}'
    assert with_status(line, "active") == line.replace('"status": "draft"}', '"status": "active"}')
    with pytest.raises(ValueError, match="more than once"):
        with_status('{"id": "a", "status": "draft", "status": "draft"}', "active")


def test_unknown_ids_are_one_error_and_the_file_is_untouched(tmp_path) -> None:
    path = write(tmp_path)
    result = crucible_cli("golden", "accept", path, "gen-1", "gen-11", "nope")
    assert result.ret == 2
    assert result.errlines == [f"crucible: {path}: no item with id 'gen-11', 'nope' (nothing was changed)",
                               f"HINT: did you mean gen-1? `crucible golden review {path}` lists the drafts and their ids"]
    assert path.read_bytes() == ORIGINAL
    assert not [p for p in tmp_path.iterdir() if p.name != path.name]  # no temporary file left behind


def test_a_file_that_does_not_load_is_named_at_its_line_and_untouched(tmp_path) -> None:
    data = ORIGINAL.replace(b'"keep", "question"', b'"keep" "question"')
    path = write(tmp_path, data)
    result = crucible_cli("golden", "reject", path, "gen-1")
    assert result.ret == 2
    assert result.errlines[0].startswith(f"crucible: {path}:4: not valid JSON") and result.errlines[1].startswith("HINT: ")
    assert path.read_bytes() == data

    twice = write(tmp_path, b'{"id": "a", "question": "Q?"}\n{"id": "a", "question": "R?"}\n', name="golden_twice.jsonl")
    result = crucible_cli("golden", "reject", twice, "a")
    assert result.ret == 2 and "golden_twice.jsonl:2: field 'id': duplicate id 'a'" in result.errlines[0]


def test_an_item_already_in_that_status_is_a_note(tmp_path) -> None:
    path = write(tmp_path, b'{"id": "a", "question": "Q?"}\n{"id": "b", "question": "R?", "status": "draft"}\n')
    result = crucible_cli("golden", "accept", path, "a", "b", "b")
    assert result.ret == 0
    assert result.errlines == [f"crucible: note: {path}:1: 'a' is already active: left as it is"]
    assert result.outlines == [f"accepted 1 item in {path}: b"]
    before = path.read_bytes()
    result = crucible_cli("golden", "accept", path, "b")
    assert result.outlines == [f"accepted 0 items in {path}: nothing to change"] and path.read_bytes() == before


def test_only_jsonl_files_are_edited(tmp_path) -> None:
    path = write(tmp_path, b'[{"id": "a", "question": "Q?", "status": "draft"}]', name="golden.json")
    result = crucible_cli("golden", "accept", path, "a")
    assert result.ret == 2 and "edit .jsonl golden files only" in result.errlines[0]


# -- review -----------------------------------------------------------------------------------------
GENERATED = [
    {"id": "gen-a", "question": "How long is the return window?", "reference": "Thirty days.", "status": "draft",
     "questionType": "simple", "citations": [{"docId": "returns", "chunkId": "returns#p1"}],
     "metadata": {"generatedBy": {"generator": "llm-v1", "sourceChunks": ["returns#p1"]}}},
    {"id": "gen-b", "question": "Old question?", "status": "rejected"},
    {"id": "q-1", "question": "Active question?"},
]


def test_review_lists_the_drafts(tmp_path) -> None:
    path = write(tmp_path, "".join(json.dumps(item) + "\n" for item in GENERATED).encode())
    result = crucible_cli("golden", "review", path)
    assert result.ret == 0
    out = "\n".join(result.outlines)
    assert f"gen-a  ({path}:1, simple, retrieval, llm-v1)" in out
    assert "question:  How long is the return window?" in out and "reference: Thirty days." in out
    assert "citations: returns#p1" in out
    assert "source:    returns#p1 (pass --corpus PATH to read its text)" in out
    assert "gen-b" not in out and "q-1" not in out
    assert f"1 draft item in {path}" in out
    rejected = crucible_cli("golden", "review", path, "--status", "rejected")
    assert "gen-b" in "\n".join(rejected.outlines) and "gen-a" not in "\n".join(rejected.outlines)


def test_review_shows_the_source_passage_with_a_corpus(tmp_path) -> None:
    path = write(tmp_path, "".join(json.dumps(item) + "\n" for item in GENERATED).encode())
    source = tmp_path / "corpus.jsonl"
    source.write_text(json.dumps({"chunk_id": "returns#p1", "doc_id": "returns", "text": "Bikes can be returned within thirty days."})
                      + "\n")
    result = crucible_cli("golden", "review", path, "--corpus", source)
    assert result.ret == 0, result.errlines
    assert "source:    returns#p1: Bikes can be returned within thirty days." in "\n".join(result.outlines)

    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"chunk_id": "faq#p9", "doc_id": "faq", "text": "Opening hours."}) + "\n")
    result = crucible_cli("golden", "review", path, "--corpus", other)
    assert f"source: returns#p1: not in the corpus {other}" in " ".join(" ".join(result.outlines).split())  # wrapped
    result = crucible_cli("golden", "review", path, "--corpus", tmp_path / "missing.jsonl")
    assert result.ret == 2 and len(result.errlines) == 2 and result.errlines[1].startswith("HINT: ")


# -- the rejected status in a run -------------------------------------------------------------------
RUN_ITEMS = [
    {"id": "q-active", "question": "What is the return window?", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
    {"id": "q-draft", "question": "What is the return window, again?", "status": "draft",
     "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
    {"id": "q-rejected", "question": "What is the return window, rejected?", "status": "rejected",
     "citations": [{"docId": "returns", "chunkId": "returns#p1"}]},
]


def _project(pytester: pytest.Pytester):
    pytester.makeconftest(RANKED_CONFTEST)
    path = pytester.path / "golden_support.jsonl"
    write_golden(path, RUN_ITEMS)
    return path


def test_a_rejected_item_never_runs_even_with_include_drafts(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest("-rs", "--crucible-include-drafts")
    result.assert_outcomes(passed=2, deselected=1)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1, deselected=1)  # the draft skipped, the rejected item deselected
    assert "q-rejected" not in result.stdout.str()
    pytester.makepyfile(test_marker="""
        import pytest_crucible as crucible

        @crucible.golden("golden_support.jsonl")
        def test_marked(golden_item):
            assert golden_item.status != "rejected"
        """)
    result = pytester.runpytest("test_marker.py", "--crucible-include-drafts", "-v")
    result.assert_outcomes(passed=2, deselected=1)


def test_an_accepted_draft_runs_without_the_flag(pytester: pytest.Pytester) -> None:
    path = _project(pytester)
    assert crucible_cli("golden", "accept", path, "q-draft").ret == 0
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*q-draft PASSED*"])


# -- lexical drafts ---------------------------------------------------------------------------------
CORPUS = [
    Chunk("returns#p1", "returns", "Bikes can be returned within thirty days of delivery with the original receipt.", {}),
    Chunk("battery#p1", "battery", "The PB500 battery charges in four hours; its thermistor stops charging when hot.", {}),
    Chunk("bikes#p2", "bikes", "The Vela and the Corsa share the PB500 battery and the same frame geometry.", {}),
    Chunk("warranty#p1", "warranty", "The warranty covers the frame for ten years and is transferable to a second owner.", {}),
    Chunk("faq#p9", "faq", "Shop opening hours are nine to five; bikes can be collected on Saturdays.", {}),
    Chunk("dup#1", "dup", "Identical passage about lanyards.", {}),
    Chunk("dup#2", "dup", "Identical passage about lanyards.", {}),
]


def test_lexical_drafts_are_valid_deterministic_and_cite_their_passage() -> None:
    items = lexical_drafts(CORPUS, 10, seed=7)
    assert items == lexical_drafts(CORPUS, 10, seed=7)
    assert {item["citations"][0]["chunkId"] for item in items} == {"returns#p1", "battery#p1", "bikes#p2", "warranty#p1", "faq#p9"}
    by_chunk = {chunk.chunk_id: chunk for chunk in CORPUS}
    for item in items:
        golden = GoldenItem.model_validate(item)
        assert golden.status == "draft" and golden.reference is None and golden.kind == "retrieval"
        assert golden.question_type == "simple" and golden.tags == ["generated", "retrieval-only"]
        assert re.fullmatch(r"lex-[0-9a-f]{8,}", golden.id)
        chunk = by_chunk[item["citations"][0]["chunkId"]]
        assert item["citations"] == [{"docId": chunk.doc_id, "chunkId": chunk.chunk_id}]
        generated = item["metadata"]["generatedBy"]
        assert generated["generator"] == "lexical-v1" and generated["sourceChunks"] == [chunk.chunk_id]
        assert item["metadata"]["note"] == "retrieval-only draft: no reference answer"
        terms = generated["terms"]
        assert len(terms) >= 2
        words = set(re.findall(r"\w+", chunk.text.casefold()))
        for term in terms:
            assert term in words and term.casefold() in item["question"].casefold()  # from this passage
        others = [c for c in CORPUS if c.chunk_id != chunk.chunk_id]
        assert not any(all(term in set(re.findall(r"\w+", c.text.casefold())) for term in terms) for c in others)
    assert len({item["id"] for item in items}) == len(items)
    battery = next(item for item in items if item["citations"][0]["chunkId"] == "battery#p1")
    assert battery["metadata"]["generatedBy"]["terms"][0] in {"charging", "pb500", "thermistor", "charges", "hot", "four"}


def test_lexical_drafts_choose_n_chunks_by_seed() -> None:
    two = lexical_drafts(CORPUS, 2, seed=1)
    assert len(two) == 2 and two == lexical_drafts(CORPUS, 2, seed=1)
    chosen = {frozenset(item["citations"][0]["chunkId"] for item in lexical_drafts(CORPUS, 2, seed=s)) for s in range(20)}
    assert len(chosen) > 1  # the seed picks the chunks
    assert lexical_drafts(CORPUS, 0) == [] and lexical_drafts([], 3) == []
    assert lexical_drafts(CORPUS[:1], 3) == []  # one passage: no term is distinctive


CONVERSATION = ('{"id": "c01", "status": "draft", "turns": [{"question": "Which bikes ship free?"}, '
                '{"question": "And how fast do they ship?"}]}')


def test_a_conversation_is_accepted_by_its_id_or_a_turns_id_and_all_its_turns_follow(tmp_path) -> None:
    path = write(tmp_path, (CONVERSATION + "\n" + LINES[3] + "\n").encode())
    result = crucible_cli("golden", "accept", path, "c01")
    assert result.ret == 0, result.errlines
    assert result.outlines == [f"accepted 1 item in {path}: c01"]
    assert {item.id: item.status for item in load_golden_file(path)} == {"c01:t1": "active", "c01:t2": "active",
                                                                         "keep": "draft"}
    # A turn's id, which `golden review` lists, names its conversation: one line, one status.
    result = crucible_cli("golden", "reject", path, "c01:t2")
    assert result.ret == 0, result.errlines
    assert result.errlines == ["crucible: note: 'c01:t2' is a turn of conversation 'c01': a conversation has one "
                               "status, set for all its turns"]
    assert result.outlines == [f"rejected 1 item in {path}: c01"]
    assert {item.id: item.status for item in load_golden_file(path)}["c01:t1"] == "rejected"


def test_all_accepts_every_draft_and_leaves_the_others(tmp_path) -> None:
    data = "\n".join([LINES[0], LINES[3], '{"id": "done", "question": "Kept?", "status": "rejected"}',
                      CONVERSATION]).encode()
    path = write(tmp_path, data)
    result = crucible_cli("golden", "accept", path, "--all")
    assert result.ret == 0, result.errlines
    assert result.outlines == [f"accepted 3 items in {path}: gen-1, keep, c01"]
    statuses = {item.id: item.status for item in load_golden_file(path)}
    assert statuses == {"gen-1": "active", "keep": "active", "done": "rejected", "c01:t1": "active", "c01:t2": "active"}
    # Nothing left to accept: a note, exit 0, the file untouched.
    before = path.read_bytes()
    result = crucible_cli("golden", "accept", path, "--all")
    assert (result.ret, result.outlines) == (0, [f"accepted 0 items in {path}: nothing to change"])
    assert result.errlines == [f"crucible: note: {path}: no drafts: nothing to change"]
    assert path.read_bytes() == before


def test_all_and_ids_together_or_neither_is_a_usage_error(tmp_path) -> None:
    path = write(tmp_path)
    for args in (("gen-1", "--all"), ()):
        result = crucible_cli("golden", "accept", path, *args)
        assert result.ret == 2
        assert result.errlines[-1].startswith("HINT: ")
        assert path.read_bytes() == ORIGINAL
