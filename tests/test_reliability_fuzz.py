"""Bad input gets one clear error, never a traceback: every loader fuzzed with near-valid inputs.

The inputs and the contract live in tests/fuzzing.py; scripts/fuzz.py runs the same
targets with many more examples for docs/reliability.md. Here each target runs a
moderate, derandomized number of examples, and the defects fuzzing found are pinned
one by one below.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import fuzzing
import pytest
from hypothesis import HealthCheck, given, settings

# Examples per target in the suite (scripts/fuzz.py runs thousands).
SUITE_EXAMPLES = 150
NAMES = ["golden .jsonl", "golden .json", "golden YAML", "qrels TREC", "qrels .jsonl", "config", "exported run", "promote body"]


def matches(text: str, pattern: str) -> bool:
    """fnmatch with '*' only: brackets in the pattern are literal (field paths have them)."""
    import fnmatch

    return fnmatch.fnmatchcase(text, pattern.replace("[", "[[]"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_input_loads_or_is_one_clear_error(name: str, workdir: Path) -> None:
    strategy, runner = fuzzing.targets(workdir)[name]
    outcomes: Counter[str] = Counter()

    @settings(max_examples=SUITE_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def check(data: bytes) -> None:
        outcomes[runner(data, workdir)] += 1

    check()
    # Near-valid inputs: both sides of the contract are exercised.
    assert outcomes["loaded"] > 0 and outcomes["refused"] > 0, outcomes


# -- the defects fuzzing found, pinned ------------------------------------------------------------------
def _golden_error(tmp_path: Path, name: str, data: bytes) -> str:
    from pytest_crucible.golden_set.schema import GoldenFileError, load_golden_file

    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(GoldenFileError) as info:
        load_golden_file(path, display_path=name)
    fuzzing.check_message(str(info.value), name)
    return str(info.value)


@pytest.mark.parametrize("line, expected", [
    ('{"id": "a", "question": "q", "metadata": {"n": ' + "1" * 5000 + "}}", "golden.jsonl:2: not valid JSON: *digits*"),
    ('{"id": "a", "question": "q", "metadata": ' + "[" * 3000 + "]" * 3000 + "}", "golden.jsonl:2: not valid JSON: nested too deeply*"),
    ('{"id": "a", "question": "q", "metadata": ' + "[" * 300 + "]" * 300 + "}", "golden.jsonl:2: field 'metadata*': nested more than 100 levels deep"),
    ('{"id": "a\\ud800", "question": "q"}', "golden.jsonl:2: field 'id': not valid Unicode (a lone surrogate *)"),
    ('{"id": "a", "question": "q", "assertions": [{"text": "t", "weight": Infinity}]}', "golden.jsonl:2: field 'assertions[0].weight': *finite*"),
    ('{"id": "a", "question": "q", "metadata": {"k\\nHINT: x": 1}, "extra\\nline": 1}', "golden.jsonl:2: field 'extra\\nline': unknown field"),
])
def test_golden_jsonl_defects_found_by_fuzzing(tmp_path: Path, line: str, expected: str) -> None:
    message = _golden_error(tmp_path, "golden.jsonl", b'{"id": "ok", "question": "q"}\n' + line.encode() + b"\n")
    assert matches(message.split("\n")[0], expected), message


def test_golden_jsonl_splits_lines_on_newline_only(tmp_path: Path) -> None:
    from pytest_crucible.golden_set.schema import load_golden_file

    # U+2028, U+0085 and friends are legal raw inside JSON strings (ensure_ascii=False writes them).
    items = [{"id": f"q{i}", "question": f"line{sep}break"} for i, sep in enumerate(["\u2028", "\u2029", "\x85", "\x0b", "\x1c"])]
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    loaded = load_golden_file(path)
    assert [(item.id, item.question, item.line) for item in loaded] == [(i["id"], i["question"], n + 1) for n, i in enumerate(items)]


def test_golden_files_with_a_bom_load(tmp_path: Path) -> None:
    from pytest_crucible.golden_set.schema import load_golden_file

    for name, text in (("g.jsonl", '{"id": "a", "question": "q"}\n'), ("g.json", '[{"id": "a", "question": "q"}]'),
                       ("g.yaml", "- id: a\n  question: q\n")):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert [item.id for item in load_golden_file(tmp_path / name)] == ["a"]


def test_golden_not_utf8_names_the_line(tmp_path: Path) -> None:
    message = _golden_error(tmp_path, "golden.jsonl", b'{"id": "a", "question": "q"}\n{"id": "b", "question": "caf\xe9"}\n')
    assert message.startswith("golden.jsonl:2: not UTF-8 text")


@pytest.mark.parametrize("snippet, line", [
    ("created: 2024-13-45", 3), ("n: !!int 12a", 3), ("x: !!float abc", 3), ("raw: !!binary /w==", 3),
])
def test_golden_yaml_value_errors_name_the_item(tmp_path: Path, snippet: str, line: int) -> None:
    text = f"- id: a\n  question: q\n- id: b\n  question: q\n  metadata:\n    {snippet}\n"
    message = _golden_error(tmp_path, "golden.yaml", text.encode())
    assert message.startswith(f"golden.yaml:{line}: "), message


def test_golden_yaml_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    text = "- id: bomb\n  question: q\n  metadata:\n" + "".join(f"    {line}\n" for line in levels)
    message = _golden_error(tmp_path, "golden.yaml", text.encode())
    assert message.startswith("golden.yaml:1: field 'metadata") and "more than" in message


@pytest.mark.parametrize("name, content, expected", [
    ("q.jsonl", '{"queryId": "q", "chunkId": "c", "grade": ' + "1" * 5000 + "}\n", "q.jsonl:1: field 'json': not valid JSON*"),
    ("q.jsonl", '{"queryId": "q\\udc00", "chunkId": "c", "grade": 1}\n', "q.jsonl:1: field 'queryId': not valid Unicode*"),
    ("q.jsonl", '{"queryId": "q", "chunkId": "c", "grade": 1, "bad\\nkey": 1}\n', "q.jsonl:1: field 'bad\\nkey': unknown key"),
])
def test_qrels_defects_found_by_fuzzing(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str) -> None:
    from pytest_crucible.cli import main

    path = tmp_path / name
    path.write_text(content)
    assert main(["qrels", "import", str(path), "--by", "dana", "--db", str(tmp_path / "c.db")]) == 2
    err = capsys.readouterr().err
    message = err[len("crucible: "):-1]
    fuzzing.check_message(message, str(path))
    assert matches(message.split("\n")[0], f"{tmp_path}/{expected}"), message


@pytest.mark.parametrize("content, expected", [
    ('{"myKey": ' + "[" * 500 + "]" * 500 + "}", "field 'myKey*': nested more than 100 levels deep"),
    ('{"myKey": ' + "[" * 3000 + "]" * 3000 + "}", "not valid JSON: nested too deeply*"),
    ('{"retrievalLimit": ' + "1" * 5000 + "}", "not valid JSON: *digits*"),
    ('{"myKey": "\\ud800"}', "field 'myKey': not valid Unicode*"),
])
def test_config_defects_found_by_fuzzing(tmp_path: Path, content: str, expected: str) -> None:
    from pytest_crucible.config import ConfigError, load_config_file

    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    fuzzing.check_message(str(info.value), str(path))
    assert matches(str(info.value).split("\n")[0].split(": ", 1)[1], expected), str(info.value)


def test_config_with_a_bom_loads(tmp_path: Path) -> None:
    from pytest_crucible.config import load_config_file

    (tmp_path / "c.json").write_bytes(b'\xef\xbb\xbf{"retrievalLimit": 5}')
    assert load_config_file(tmp_path / "c.json")[1]["retrievalLimit"] == 5


def _mutated_export(change) -> dict:
    document = fuzzing.valid_export()
    change(document)
    return document


@pytest.mark.parametrize("change, field", [
    (lambda d: d["goldenItems"][0].pop("item_id"), "goldenItems[0]"),
    (lambda d: d["goldenItems"].__setitem__(1, "x"), "goldenItems[1]"),
    (lambda d: d["results"][0].__setitem__("confidence", "high"), "results[0].confidence"),
    (lambda d: d["results"][1].__setitem__("abstained", "yes"), "results[1].abstained"),
    (lambda d: d["results"][1].__setitem__("retrieved", {"a": 1}), "results[1].retrieved"),
    (lambda d: d["results"].append(dict(d["results"][0])), "results[3].item_id"),
    (lambda d: d["itemMetrics"]["ndcgAt10"].__setitem__("q0", float("nan")), "itemMetrics.ndcgAt10"),
    (lambda d: d["itemMetrics"]["ndcgAt10"].__setitem__("q0", 10**400), "itemMetrics.ndcgAt10"),
    (lambda d: d["results"][0].__setitem__("confidence", 2**70), "results[0].confidence"),
    (lambda d: d["run"].__setitem__("n_items", [1]), "run.n_items"),
    (lambda d: d["run"].__setitem__("labels", {"a": 1}), "run.labels"),
    (lambda d: d["run"].__setitem__("id", "run\ud800"), "run.id"),
])
def test_exported_run_defects_found_by_fuzzing(tmp_path: Path, capsys: pytest.CaptureFixture[str], change, field: str) -> None:
    from pytest_crucible.cli import main
    from pytest_crucible.store import StoreError, read_export

    path = tmp_path / "run.json"
    path.write_text(json.dumps(_mutated_export(change)))
    with pytest.raises(StoreError) as info:
        read_export(path)
    fuzzing.check_message(str(info.value), str(path))
    assert f"field '{field}'" in str(info.value), str(info.value)
    assert main(["import", str(path), "--db", str(tmp_path / "c.db")]) == 2
    assert capsys.readouterr().err == f"crucible: {info.value}\n"


@pytest.mark.parametrize("data, expected", [
    (b"\xff{}", "not UTF-8*"),
    (b'{"runId": ' + b"[" * 3000 + b"]" * 3000 + b"}", "not valid JSON: nested too deeply*"),
    (b'{"runId": ' + b"1" * 5000 + b"}", "not valid JSON: *digits*"),
    (b"[1, 2]", "field '(body)': Input should be a valid dictionary*"),
    (b'{"runId": "r", "question": "q\\ud800", "correctedAssertions": ["a"], "errorClass": "hallucination"}', "field 'question': not valid Unicode*"),
])
def test_promote_body_defects_found_by_fuzzing(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, expected: str) -> None:
    from pytest_crucible.cli import main

    db, _, _ = fuzzing.promote_store(tmp_path)
    path = tmp_path / "body.json"
    path.write_bytes(data)
    assert main(["promote", "--json", str(path), "--db", str(db)]) == 2
    message = capsys.readouterr().err[len("crucible: "):-1]
    fuzzing.check_message(message, str(path))
    assert matches(message.split("\n")[0], f"{path}: {expected}"), message


def test_promote_body_file_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_crucible.cli import main

    db, _, _ = fuzzing.promote_store(tmp_path)
    assert main(["promote", "--json", str(tmp_path / "missing.json"), "--db", str(db)]) == 2
    message = capsys.readouterr().err[len("crucible: "):-1]
    fuzzing.check_message(message, str(tmp_path / "missing.json"))
    assert "cannot read" in message
