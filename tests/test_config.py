"""The applied config: defaults, hash identity, validation errors, read tracking."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crucible.config import (
    DEFAULT_CONFIG,
    ConfigError,
    TrackedConfig,
    config_diff,
    config_hash,
    load_config_file,
    resolve_config,
    unread_changed_keys,
)


def test_empty_params_and_explicit_defaults_hash_the_same() -> None:
    assert config_hash(resolve_config({})) == config_hash(resolve_config({"retrievalLimit": 10}))
    assert config_hash(resolve_config({})) == config_hash(resolve_config({"retrieval": {"rerank": False}}))
    assert config_hash(resolve_config({})) != config_hash(resolve_config({"retrieval": {"rerank": True}}))


def test_resolved_config_keeps_extra_keys_and_nested_defaults() -> None:
    resolved = resolve_config({"retrieval": {"rerank": True}, "myIndex": {"name": "v2"}})
    assert resolved["retrieval"] == {**DEFAULT_CONFIG["retrieval"], "rerank": True}
    assert resolved["myIndex"] == {"name": "v2"}
    assert resolved["retrievalLimit"] == 10 and resolved["policyMode"] == "off"


@given(st.permutations(list(DEFAULT_CONFIG)))
def test_hash_ignores_key_order(order) -> None:
    shuffled = {key: copy.deepcopy(DEFAULT_CONFIG[key]) for key in order}
    assert config_hash(resolve_config(shuffled)) == config_hash(resolve_config({}))


@pytest.mark.parametrize("text, message", [
    ('{"retrievalLimit": 0}', "c.json:1: field 'retrievalLimit': expected a positive integer, got 0"),
    ('{"retrievalLimit": true}', "field 'retrievalLimit': expected a positive integer, got true"),
    ('{\n "retrieval": {\n  "candidatePool": "40"}}', "c.json:3: field 'retrieval.candidatePool': expected a positive integer, got \"40\""),
    ('{"policyMode": 3}', "field 'policyMode': expected string, got 3"),
    ('{"retrieval": []}', "field 'retrieval': expected object, got []"),
    ('[1]', "expected a JSON object at the top level"),
    ('{"a": 1,}', "c.json:1: not valid JSON"),
])
def test_bad_config_files_name_file_line_and_field(tmp_path, text, message) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert message in str(info.value).replace(str(tmp_path) + "/", "")
    assert "HINT:" in str(info.value)


def test_tracked_config_records_reads_through_every_access_path() -> None:
    tracked = TrackedConfig(resolve_config({"retrieval": {"rerank": True}}))
    assert isinstance(tracked, dict) and isinstance(tracked["retrieval"], dict)
    assert json.loads(json.dumps(tracked))["retrieval"]["rerank"] is True
    tracked.reads.clear()
    tracked["retrieval"].get("rerank")
    tracked.get("policyMode")
    assert tracked.reads == {"retrieval", "retrieval.rerank", "policyMode"}
    tracked.reads.clear()
    dict(tracked["retrieval"].items())
    assert "retrieval.candidatePool" in tracked.reads


def test_unread_changed_keys_lists_only_changed_and_unread() -> None:
    resolved = resolve_config({"retrieval": {"rerank": True, "candidatePool": 40}, "extra": "x"})
    assert unread_changed_keys(resolved, set()) == ['retrieval.rerank=true', 'extra="x"']
    assert unread_changed_keys(resolved, {"retrieval.rerank", "extra"}) == []


def test_config_diff_lists_changed_leaves() -> None:
    a, b = resolve_config({}), resolve_config({"retrieval": {"rerank": True}, "promptVersion": "v3"})
    assert config_diff(a, b) == {"promptVersion": ("default", "v3"), "retrieval.rerank": (False, True)}


def test_every_label_surface_reads_labels_with_the_one_parser() -> None:
    from pytest_crucible.config import parse_label_options, parse_labels
    from pytest_crucible.store import StoreError
    from pytest_crucible.verdict.runs import parse_label_args, parse_run_ref
    from pytest_crucible.workspace import parse_label_filters

    assert parse_labels([" model = a=b ", "mode=dense", "mode=hybrid"]) == {"model": "a=b", "mode": "hybrid"}
    assert parse_label_options(["x=1"]) == parse_label_args(["x:1"]) == parse_label_filters(["x:1"]) == {"x": "1"}
    with pytest.raises(ValueError, match=r"^--crucible-label 'model': expected KEY=VALUE\nHINT: e\.g\. --crucible-label model="):
        parse_label_options(["model"])
    with pytest.raises(ValueError, match=r"^label '=x': expected KEY:VALUE"):
        parse_label_filters(["=x"])
    assert parse_run_ref("latest:branch=main,workspace=ci").labels == (("branch", "main"),)
    with pytest.raises(StoreError, match=r"got 'branch=' \(no value\)"):
        parse_run_ref("latest:branch=")
    with pytest.raises(StoreError, match=r"got 'workspace=b' \('workspace' given twice\)"):
        parse_run_ref("latest:workspace=a,workspace=b")
