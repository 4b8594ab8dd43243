"""Golden set loading: formats, line numbers, errors, filters, schema, hash."""

from __future__ import annotations

import json

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

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
    # An item asks one question or holds a conversation's turns (each with its own question), never both.
    assert schema["required"] == ["id"] and schema["oneOf"] == [{"required": ["question"]}, {"required": ["turns"]}]
    assert schema["additionalProperties"] is False and "conversation" not in props
    turn = schema["$defs"]["GoldenTurn"]
    assert turn["required"] == ["question"] and turn["additionalProperties"] is False
    assert set(turn["properties"]) == {"question", "reference", "assertions", "citations", "answerable", "kind", "tags",
                                       "questionType", "expectedTools", "toolMatch", "assistant"}


# -- lines whose text proves them plain skip the walk of their values: nothing else changes ---------------
def _loaded_or_error(path) -> object:
    try:
        return [(item.to_json(), item.line, item.source) for item in load_golden_file(path, display_path=path.name)]
    except GoldenFileError as exc:
        return str(exc)


PLAIN = '{"id": "p", "question": "q"}'


@pytest.mark.parametrize("line", [
    '{"id": "a", "question": "caf\\u00e9", "metadata": {"k": [1, {"x": null}]}}',  # cleared by the text check
    '{"id": "a", "question": "caf\\u00e9 \\ud83d\\ude00", "metadata": {"\\ud83d\\ude00": 1}}',  # surrogate pair: fine
    '{"id": "a", "question": "q \\\\ud800"}',  # an escaped backslash, then "ud800": no surrogate
    '{"id": "a\\ud800", "question": "q"}',
    '{"id": "a", "question": "q", "metadata": {"k\\uDFFF": 1}}',
    '{"id": "a", "question": "q", "metadata": ' + "[" * 99 + "]" * 99 + "}",  # 100 levels: the limit
    '{"id": "a", "question": "q", "metadata": ' + "[" * 100 + "]" * 100 + "}",  # 101 levels
    '{"id": "a", "question": "q", "metadata": {"n": [' + ",".join(["0"] * 99_996) + "]}}",  # 100,001 values
    '{"id": "a", "question": "q", "metadata": {"n": [' + ",".join(["0"] * 99_995) + "]}}",  # 100,000 values: the limit
])
@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_the_text_check_loads_what_the_walk_of_every_value_loads(tmp_path, monkeypatch, line, suffix) -> None:
    from pytest_crucible.golden_set import schema

    lines = [PLAIN.replace('"p"', '"p1"'), PLAIN.replace('"p"', '"p2"'), line]
    path = tmp_path / f"golden_t{suffix}"
    path.write_text("\n".join(lines) + "\n" if suffix == ".jsonl" else "[\n" + ",\n".join(lines) + "\n]\n")
    fast = _loaded_or_error(path)
    monkeypatch.setattr(schema, "_surely_usable", lambda text: False)
    assert fast == _loaded_or_error(path)


def test_a_line_the_text_check_cannot_clear_still_names_its_line_and_field(tmp_path) -> None:
    path = tmp_path / "golden_x.jsonl"
    pair = "\\ud83d\\ude00"  # an escaped surrogate pair: its values are walked
    path.write_text(f'{PLAIN}\n{{"id": "b", "question": "q{pair}"}}\n{{"id": "c", "question": "q{pair}", "popularity": "viral"}}\n')
    with pytest.raises(GoldenFileError) as info:
        load_golden_file(path, display_path="golden_x.jsonl")
    assert str(info.value).startswith("golden_x.jsonl:3: field 'popularity': Input should be 'head', 'torso' or 'tail' (got \"viral\")")

    path.write_text(f'{PLAIN}\n{{"id": "b", "question": "q{pair}"}}\n{{"id": "c", "question": "q", "metadata": {{"k": "\\udc00"}}}}\n')
    with pytest.raises(GoldenFileError) as info:
        load_golden_file(path, display_path="golden_x.jsonl")
    assert str(info.value).startswith("golden_x.jsonl:3: field 'metadata.k': not valid Unicode (a lone surrogate \\udc00)")


# Plain text, or text with lone surrogates (json.dumps writes them as escapes), backslashes and "u" next to
# them (built from characters: st.text leaves surrogates out).
_json_text = st.text(max_size=3) | st.lists(st.characters() | st.sampled_from(["\ud800", "\udfff", "\\", "u", "d", "8"]),
                                            max_size=3).map("".join)
_json_leaves = st.none() | st.booleans() | st.integers() | _json_text


@settings(max_examples=examples(300), deadline=None)
@given(st.recursive(_json_leaves, lambda children: st.lists(children, max_size=4) | st.dictionaries(_json_text, children, max_size=4),
                    max_leaves=30))
def test_text_the_check_clears_never_holds_a_value_the_walk_refuses(value) -> None:
    from pytest_crucible.golden_set import schema
    from pytest_crucible.json_input import value_problem

    # Small limits, so that random values reach them.
    text = json.dumps(value)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "MAX_DEPTH", 3)
        patch.setattr(schema, "MAX_VALUES", 16)
        cleared = schema._surely_usable(text)
    if cleared:
        assert value_problem(json.loads(text), max_depth=3, max_values=16) is None


# -- an agent's expected tool calls ----------------------------------------------------------------------
TOOLS = {"id": "t", "question": "Where is order NW-1?", "expectedTools": [{"name": "lookup_order", "arguments": {"order_id": "NW-1"}},
                                                                         {"name": "notify"}], "toolMatch": "superset"}


def test_expected_tools_load_with_their_match_mode(tmp_path) -> None:
    path = tmp_path / "golden_t.jsonl"
    path.write_text(json.dumps(TOOLS) + "\n" + json.dumps({"id": "u", "question": "q", "expectedTools": []}) + "\n")
    first, second = load_golden_file(path)
    assert [(tool.name, tool.arguments) for tool in first.expected_tools or []] == [("lookup_order", {"order_id": "NW-1"}), ("notify", {})]
    assert first.tool_match == "superset" and second.tool_match == "strict" and second.expected_tools == []
    assert second.to_json()["expectedTools"] == [] and second.to_json()["toolMatch"] == "strict"  # [] expects no call at all
    # An item without tools is stored as before (its golden set hash unchanged): no tool fields in its JSON.
    plain = GoldenItem.model_validate({"id": "p", "question": "q"}).to_json()
    assert "expectedTools" not in plain and "toolMatch" not in plain


@pytest.mark.parametrize("change, field, problem, hint", [
    ({"toolMatch": "unorderd"}, "toolMatch", "Input should be 'strict', 'unordered', 'subset' or 'superset' (got \"unorderd\")",
     "did you mean 'unordered'?"),
    ({"toolMatch": "Subset"}, "toolMatch", "(got \"Subset\")", "did you mean 'subset'?"),
    ({"toolMatch": "exact"}, "toolMatch", "(got \"exact\")", "use one of the allowed values exactly as written"),
    ({"expectedTools": [{"nme": "lookup_order"}]}, "expectedTools[0].nme", "unknown field; also wrong: expectedTools[0].name",
     "did you mean 'name'?"),
    ({"expectedTools": [{"name": ""}]}, "expectedTools[0].name", "at least 1 character", ""),
    ({"expectedTools": [{"name": "x", "arguments": ["NW-1"]}]}, "expectedTools[0].arguments", "a valid dictionary", ""),
    ({"expectedTools": {"name": "x"}}, "expectedTools", "a valid list", ""),
])
def test_a_bad_tool_expectation_is_one_error_naming_line_and_field(tmp_path, change, field, problem, hint) -> None:
    path = tmp_path / "golden_t.jsonl"
    path.write_text(json.dumps(ITEM) + "\n" + json.dumps({**TOOLS, **change}) + "\n")
    with pytest.raises(GoldenFileError) as info:
        load_golden_file(path, display_path="golden_t.jsonl")
    error = info.value
    assert (error.line, error.field) == (2, field) and problem in error.problem, str(error)
    assert hint in error.hint and str(error).startswith(f"golden_t.jsonl:2: field '{field}': ")


def test_expected_tools_are_content() -> None:
    from pytest_crucible.golden_set.changes import changed_fields

    before = GoldenItem.model_validate(TOOLS).to_json()
    assert changed_fields(before, {**before, "toolMatch": "subset"}) == ["toolMatch"]
    assert changed_fields(before, {**before, "expectedTools": [{"name": "lookup_order"}]}) == ["expectedTools"]
    # Written with or without the defaults, one content; an item without tools is unchanged by the new fields.
    assert changed_fields(before, {**TOOLS, "expectedTools": [{"name": "lookup_order", "arguments": {"order_id": "NW-1"}},
                                                              {"name": "notify", "arguments": {}}]}) == []
    assert changed_fields({"id": "p", "question": "q"}, GoldenItem.model_validate({"id": "p", "question": "q"}).to_json()) == []
