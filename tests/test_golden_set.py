"""Golden set loading: formats, line numbers, errors, filters, schema, hash."""

from __future__ import annotations

import json

import pytest

from pytest_crucible.golden_set.schema import (
    GoldenFileError,
    GoldenItem,
    filter_items,
    golden_json_schema,
    golden_set_hash,
    load_golden_file,
)

ITEM = {"id": "a", "question": "What is the return window?", "citations": [{"docId": "returns", "chunkId": "returns#p1"}]}


def test_jsonl_items_keep_file_order_lines_and_defaults(tmp_path) -> None:
    path = tmp_path / "golden_x.jsonl"
    path.write_text(json.dumps(ITEM) + "\n\n" + json.dumps({**ITEM, "id": "b", "status": "draft"}) + "\n")
    items = load_golden_file(path, display_path="golden_x.jsonl")
    assert [(item.id, item.line, item.source) for item in items] == [("a", 1, "golden_x.jsonl"), ("b", 3, "golden_x.jsonl")]
    first = items[0]
    assert first.status == "active" and first.kind == "retrieval" and first.answerable is True
    assert first.citations[0].mode == "required" and first.citations[0].chunk_id == "returns#p1"
    # Round trip: the stored JSON is the file's camelCase spelling.
    assert first.to_json()["citations"][0] == {"docId": "returns", "chunkId": "returns#p1", "mode": "required"}
    assert GoldenItem.model_validate(first.to_json()).to_json() == first.to_json()


def test_json_array_reports_the_line_of_the_bad_item(tmp_path) -> None:
    path = tmp_path / "set.json"
    path.write_text('[\n  {"id": "a", "question": "q"},\n  {"id": "b",\n   "question": "q", "popularity": "viral"}\n]\n')
    with pytest.raises(GoldenFileError) as info:
        load_golden_file(path, display_path="set.json")
    assert info.value.line == 3
    assert str(info.value).startswith("set.json:3: field 'popularity': Input should be 'head', 'torso' or 'tail' (got \"viral\")")


def test_json_array_loads_with_lines(tmp_path) -> None:
    path = tmp_path / "set.json"
    path.write_text('[\n  {"id": "a", "question": "q"},\n\n  {"id": "b", "question": "q"}\n]')
    assert [item.line for item in load_golden_file(path)] == [2, 4]


def test_yaml_items_with_lines(tmp_path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "set.yaml"
    path.write_text("- id: a\n  question: q\n- id: b\n  question: q2\n  questionType: multi_hop\n")
    items = load_golden_file(path)
    assert [(item.id, item.line, item.question_type) for item in items] == [("a", 1, "simple"), ("b", 3, "multi_hop")]


@pytest.mark.parametrize("line, field, fragment", [
    ('{"id": "a", "question": "q", "assertions": [{"text": "x", "kind": "could"}]}', "assertions[0].kind", "'must' or 'should'"),
    ('{"id": "a", "question": "q", "assertions": [{"text": "x", "weight": -1}]}', "assertions[0].weight", "greater than or equal to 0"),
    ('{"id": "a", "question": "  "}', "question", "must not be blank"),
    ('{"id": "a", "question": "q", "concepts": [{"id": "c", "grade": "maybe"}]}', "concepts[0].grade", "'required', 'acceptable' or 'irrelevant'"),
    ('{"id": "a", "question": "q", "tags": "topic:x"}', "tags", "valid list"),
    ('["a"]', None, "expected a JSON object for an item, got list"),
])
def test_errors_name_line_and_field(tmp_path, line, field, fragment) -> None:
    path = tmp_path / "golden_e.jsonl"
    path.write_text(json.dumps(ITEM) + "\n" + line + "\n")
    with pytest.raises(GoldenFileError) as info:
        load_golden_file(path, display_path="golden_e.jsonl")
    error = info.value
    assert (error.path, error.line, error.field) == ("golden_e.jsonl", 2, field)
    assert fragment in str(error)
    assert "HINT:" in str(error)


def test_unreadable_file_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "golden_bin.jsonl"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(GoldenFileError, match="not UTF-8 text"):
        load_golden_file(path)


def test_filters_match_values_lists_and_tags() -> None:
    items = [
        GoldenItem(id="a", question="q", question_type="simple", tags=["topic:returns"]),
        GoldenItem(id="b", question="q", question_type="multi_hop", tags=["topic:battery", "hard"]),
        GoldenItem(id="c", question="q", question_type="comparison", answerable=False),
    ]
    assert [i.id for i in filter_items(items, {"questionType": "multi_hop"})] == ["b"]
    assert [i.id for i in filter_items(items, {"question_type": ["simple", "comparison"]})] == ["a", "c"]
    assert [i.id for i in filter_items(items, {"tags": "hard"})] == ["b"]
    assert [i.id for i in filter_items(items, {"answerable": False, "questionType": "comparison"})] == ["c"]
    with pytest.raises(GoldenFileError, match="did you mean 'tags'"):
        filter_items(items, {"tag": "hard"})


def test_golden_set_hash_ignores_order_but_not_content() -> None:
    a, b = {"id": "a", "question": "q"}, {"id": "b", "question": "q"}
    assert golden_set_hash([a, b]) == golden_set_hash([b, a])
    assert golden_set_hash([a, b]) != golden_set_hash([a, {**b, "question": "changed"}])


def test_json_schema_describes_camel_case_fields() -> None:
    schema = golden_json_schema()
    props = schema["properties"]
    assert {"id", "question", "questionType", "citations", "answerable", "popularity", "dynamism", "kind", "tags"} <= set(props)
    assert schema["required"] == ["id", "question"]
    assert schema["additionalProperties"] is False
