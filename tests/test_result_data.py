"""A pipeline result read as plain data (evaluation.pipeline.result_data): a dict whose values already have
their fields' exact types is checked without building a model, and must give exactly what the model gives
(the same values, keys and key order, so the same stored JSON), or the same error."""

from __future__ import annotations

import json
import math

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crucible.evaluation import pipeline
from pytest_crucible.evaluation.pipeline import PipelineResult, PipelineResultError, coerce_result, result_data


def through_model(value):
    """What the model makes of a value: its plain dump, or its error's text."""
    try:
        return "ok", json.dumps(coerce_result(value).model_dump(mode="json"))
    except PipelineResultError as exc:
        return "error", str(exc)


def through_result_data(value):
    try:
        return "ok", json.dumps(result_data(value))
    except PipelineResultError as exc:
        return "error", str(exc)


# Values of every kind a pipeline might put in a field: the exact types, ones pydantic converts (int, tuple,
# "true"), ones it refuses, and floats that JSON cannot hold.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(2**60, 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.5, 1.0, -0.0, 1.5]),
                    st.text(max_size=4), st.sampled_from(["", "a#1", "doc", "[S1] x", "true"]))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner), st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), inner, max_size=3)),
    max_leaves=6)
string_lists = st.one_of(st.lists(st.text(max_size=4), max_size=3), st.tuples(st.text(max_size=3)), st.lists(scalars, max_size=2), scalars)


def _spelled(fields: dict, camel: dict[str, str], draw, exact: bool = False) -> dict:
    """The fields with each key in snake_case, camelCase, or (unless exact) both, plus the odd unknown key."""
    out = {}
    for name, value in fields.items():
        spellings = ["snake", "camel"] if exact else ["snake", "snake", "camel", "both"]
        spelling = draw(st.sampled_from(spellings)) if name in camel else "snake"
        if spelling in ("snake", "both"):
            out[name] = value
        if spelling in ("camel", "both"):
            out[camel[name]] = value
    if not exact and draw(st.integers(0, 9)) == 0:
        out[draw(st.sampled_from(["chunkid", "extra", "retreived"]))] = 1
    return out


# The same, of the exact types only (what most pipelines return): the values the fast check reads itself.
exact_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(2**60, 2**70), st.floats(allow_nan=False),
                          st.text(max_size=4))
exact_json = st.recursive(exact_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=6)
exact_strings = st.lists(st.text(max_size=4), max_size=3)


@st.composite
def chunks(draw, exact=False):
    fields = {}
    for name, strategy, exact_strategy in (
            ("chunk_id", st.one_of(st.sampled_from(["a#1", "b#2", ""]), scalars), st.sampled_from(["a#1", "b#2", "c"])),
            ("doc_id", st.one_of(st.sampled_from(["a", "b"]), scalars), st.sampled_from(["a", "b"])),
            ("text", st.one_of(st.text(max_size=5), scalars), st.text(max_size=5)),
            ("score", st.one_of(st.floats(allow_nan=True, allow_infinity=True), scalars),
             st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))),
            ("metadata", st.one_of(st.dictionaries(st.text(max_size=3), json_values, max_size=3), json_values),
             st.dictionaries(st.text(max_size=3), exact_json, max_size=3))):
        if name in ("chunk_id", "doc_id") or draw(st.booleans()):
            fields[name] = draw(exact_strategy if exact else strategy)
    return _spelled(fields, {"chunk_id": "chunkId", "doc_id": "docId"}, draw, exact)


@st.composite
def tool_calls(draw, exact=False):
    """One tool call: a name and arguments (exact: a non-empty str and a dict of JSON values), or, unless exact,
    anything at all in either, a key left out or one no call accepts."""
    if exact:
        call = {"name": draw(st.sampled_from(["lookup", "book", "x"]))}
        if draw(st.booleans()):
            call["arguments"] = draw(st.dictionaries(st.text(max_size=3), exact_json, max_size=3))
        return call
    call = {}
    if draw(st.integers(0, 5)):
        call["name"] = draw(st.one_of(st.sampled_from(["lookup", ""]), scalars))
    if draw(st.booleans()):
        call["arguments"] = draw(st.one_of(st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), json_values, max_size=3),
                                           json_values, st.just('{"a": 1}')))
    if draw(st.integers(0, 9)) == 0:
        call[draw(st.sampled_from(["args", "id"]))] = 1
    return call


@st.composite
def steps(draw, exact=False):
    step = {}
    if draw(st.integers(0, 4)):
        step["retrieved"] = draw(st.lists(chunks(exact=exact), max_size=3) if exact else
                                 st.one_of(st.lists(chunks(), max_size=3), st.tuples(chunks()), scalars))
    if draw(st.booleans()):
        step["metadata"] = draw(st.dictionaries(st.text(max_size=3), exact_json if exact else json_values, max_size=2))
    if not exact and draw(st.integers(0, 9)) == 0:
        step["retreived"] = []
    return step


@st.composite
def results(draw, exact=False):
    fields = {}
    metadata = st.dictionaries(st.text(max_size=3), exact_json if exact else json_values, max_size=3)
    for name, strategy, exact_strategy in (
            ("answer", st.one_of(st.text(max_size=8), st.sampled_from(["see [S1] and [S3]", "[S9]"]), scalars),
             st.one_of(st.none(), st.text(max_size=8), st.sampled_from(["see [S1] and [S3]", "[S9]", "[S2] [S1] [S2]"]))),
            ("retrieved", st.one_of(st.lists(chunks(), max_size=3), st.tuples(chunks()), scalars), st.lists(chunks(exact=True), max_size=4)),
            ("citations", string_lists, exact_strings),
            ("confidence", scalars, st.one_of(st.none(), st.floats(0.0, 1.0))),
            ("abstained", scalars, st.booleans()),
            ("detected_concepts", string_lists, exact_strings),
            ("blocked", scalars, st.booleans()),
            ("blocked_by", scalars, st.one_of(st.none(), st.text(max_size=4))),
            ("metadata", st.one_of(metadata, json_values), metadata),
            ("tool_calls", st.one_of(st.lists(tool_calls(), max_size=3), st.tuples(tool_calls()), scalars),
             st.lists(tool_calls(exact=True), max_size=3)),
            ("steps", st.one_of(st.lists(steps(), max_size=3), st.tuples(steps()), scalars),
             st.one_of(st.none(), st.lists(steps(exact=True), max_size=3)))):
        if draw(st.booleans()):
            fields[name] = draw(exact_strategy if exact else strategy)
    return _spelled(fields, {"detected_concepts": "detectedConcepts", "blocked_by": "blockedBy", "tool_calls": "toolCalls"}, draw, exact)


@st.composite
def nearly_exact_results(draw):
    """An exact result with one value swapped for any value at all: the edge of the fast check."""
    value = draw(results(exact=True))
    wild = draw(results())
    if wild and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(wild)))
        value[key] = wild[key]
    elif value.get("retrieved"):
        index = draw(st.integers(0, len(value["retrieved"]) - 1))
        value["retrieved"][index] = {**value["retrieved"][index], **draw(chunks())}
    return value


@settings(max_examples=examples(1500), deadline=None)
@given(st.one_of(results(exact=True), nearly_exact_results(), results()))
def test_plain_data_is_what_the_model_gives(value) -> None:
    assert through_result_data(value) == through_model(value)


@pytest.mark.parametrize("value", [
    {"retrieved": [{"chunk_id": "a#1", "doc_id": "a", "text": "t", "score": 2.5, "metadata": {"page": 3, "tags": ["x"]}}],
     "answer": "See [S1].", "confidence": 0.75, "detectedConcepts": ["c"], "metadata": {"nested": {"k": [1, None, True]}}},
    {"retrieved": [{"chunkId": "a#1", "docId": "a"}], "answer": None},
    {"retrieved": [], "blocked": True, "blockedBy": "input-filter"},
    {"retrieved": [{"chunk_id": "a#1", "doc_id": "a"}], "tool_calls": [{"name": "lookup", "arguments": {"city": "Leeds", "n": [1, 2.5]}},
                                                                      {"name": "book"}],
     "steps": [{"retrieved": [{"chunk_id": "b#1", "doc_id": "b"}]}, {"retrieved": [], "metadata": {"query": "x"}}]},
    {"toolCalls": [], "steps": []},
])
def test_a_result_of_exact_types_builds_no_model(value, monkeypatch: pytest.MonkeyPatch) -> None:
    # The per-item path of a large run: such a result is read without pydantic, and still equals the model's dump.
    expected = coerce_result(value).model_dump(mode="json")
    monkeypatch.setattr(pipeline, "coerce_result", lambda *args, **kwargs: pytest.fail("validated through the model"))
    assert json.dumps(result_data(value)) == json.dumps(expected)


def test_the_data_is_a_copy_the_pipeline_may_reuse() -> None:
    chunk = {"chunk_id": "a#1", "doc_id": "a", "metadata": {"tags": ["x"]}}
    value = {"retrieved": [chunk], "citations": ["a#1"], "metadata": {"k": [1]}}
    data = result_data(value)
    chunk["metadata"]["tags"].append("changed")
    value["citations"].append("b#2")
    value["metadata"]["k"].append(2)
    assert data["retrieved"][0]["metadata"] == {"tags": ["x"]}
    assert data["citations"] == ["a#1"] and data["metadata"] == {"k": [1]}


def test_values_the_model_converts_are_converted_as_it_does() -> None:
    value = {"retrieved": [{"chunk_id": "a#1", "doc_id": "a", "score": 3, "metadata": {"nan": math.nan, "pair": (1, 2)}}],
             "confidence": 1, "citations": ("a#1",)}
    data = result_data(value)
    assert data["retrieved"][0]["score"] == 3.0 and type(data["retrieved"][0]["score"]) is float
    assert data["retrieved"][0]["metadata"] == {"nan": None, "pair": [1, 2]}
    assert data["confidence"] == 1.0 and data["citations"] == ["a#1"]


def test_a_generator_of_chunks_is_read_once_by_the_model() -> None:
    value = {"retrieved": ({"chunk_id": f"a#{i}", "doc_id": "a"} for i in range(3))}
    assert [chunk["chunk_id"] for chunk in result_data(value)["retrieved"]] == ["a#0", "a#1", "a#2"]


def test_errors_are_the_models() -> None:
    with pytest.raises(PipelineResultError, match=r"unknown key 'retrieved\[0\]\.chunkid' \(did you mean 'chunk_id'\?\)"):
        result_data({"retrieved": [{"chunkid": "a#1", "doc_id": "a"}]})
    with pytest.raises(PipelineResultError, match="field 'confidence': Input should be less than or equal to 1"):
        result_data({"retrieved": [], "confidence": 1.5})


def test_a_pipeline_result_gives_its_dump() -> None:
    model = PipelineResult(answer="x [S1]", retrieved=[{"chunk_id": "a#1", "doc_id": "a"}])
    assert result_data(model) == model.model_dump(mode="json")


@pytest.mark.parametrize("metadata, reason", [
    ({"embedding": object()}, "Unable to serialize unknown type"),
    ("deep", "serialization depth"),
])
def test_metadata_that_cannot_be_stored_is_one_clear_error(metadata, reason) -> None:
    # Before, such a result passed validation and crashed the scoring with a traceback.
    if metadata == "deep":
        metadata = inner = {}
        for _ in range(3000):
            inner["a"] = {}
            inner = inner["a"]
    with pytest.raises(PipelineResultError, match="cannot be stored as JSON: .*" + reason) as caught:
        result_data({"retrieved": [{"chunk_id": "a#1", "doc_id": "a", "metadata": metadata}]})
    assert "HINT: metadata takes JSON values" in str(caught.value)
    assert "\n" not in caught.value.problem  # the stored problem is one line


def test_steps_are_scored_as_one_ranking_in_order_of_first_appearance() -> None:
    def chunk(chunk_id):
        return {"chunk_id": chunk_id, "doc_id": chunk_id.split("#")[0]}

    value = {"retrieved": [chunk("c#1"), chunk("d#1")], "answer": "See [S3] and [S4].",
             "steps": [{"retrieved": [chunk("a#1"), chunk("b#1"), chunk("a#1")]}, {"retrieved": [chunk("b#1"), chunk("c#1")]}]}
    merged = ["a#1", "b#1", "c#1", "d#1"]  # step 1, the chunk step 2 added, then the top level's new one
    assert [c["chunk_id"] for c in pipeline.ranking_of(result_data(value))] == merged
    result = coerce_result(value)
    assert [c.chunk_id for c in result.ranking()] == merged
    assert result.cited_chunk_ids() == ["c#1", "d#1"]  # [Sn] counts in the ranking scored
    # Without steps the ranking is `retrieved` as returned, duplicates and all (the retrieval metrics count them).
    plain = {"retrieved": [chunk("a#1"), chunk("a#1")]}
    assert [c["chunk_id"] for c in pipeline.ranking_of(result_data(plain))] == ["a#1", "a#1"]
    # steps: [] is a pipeline that took no retrieval step: its top-level chunks, once each.
    assert [c["chunk_id"] for c in pipeline.ranking_of(result_data({**plain, "steps": []}))] == ["a#1"]
