"""Structured fuzzing of every input loader: near-valid inputs, and the contract each must keep.

Shared by the test suite (tests/test_reliability_fuzz.py, a moderate number of examples)
and scripts/fuzz.py (many more, for the figures in docs/reliability.md).

Inputs are not random bytes: they start from valid documents of each format and
mutate them the way real files go wrong - a field of the wrong type, a missing or
an extra field, garbage nested where an object belongs, raw tokens JSON parsers
trip on (NaN, 1e999, a 5000-digit integer, 2000 levels of brackets), lone surrogates
and invalid UTF-8, a BOM, CRLF, truncated lines, duplicated or dropped lines.

The contract (see ``check_message``): every input either loads, or raises the
module's own error type whose text is ONE message of exactly two lines -
``FILE[:LINE]: [field 'F': ]problem`` then ``HINT: ...`` - where the line, when the
format has lines, is a line of the file, and (for line formats) every line before
it loads. Anything else escaping is a defect.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# -- generic value strategies ---------------------------------------------------------------
SPECIAL_TEXT = st.sampled_from([
    "", " ", "\n", "\r", "\t", "\x00", "\x1b[31m", "\u2028", "\u2029", "\x85", "\x0b", "\ufeff", "\u202e",
    "\ud800", "\udfff", "é", "\U0001d518", "'", '"', "\\", "{", "]", ",", "#", "HINT: fake", "doc:", "chunk:",
])
TEXT = st.one_of(st.text(max_size=10), st.lists(st.one_of(st.text(max_size=3), SPECIAL_TEXT), max_size=4).map("".join))
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 5), st.integers(), st.integers(min_value=2**63),
    st.floats(), st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -0.0]), TEXT,
)
GARBAGE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=6)

# Raw JSON text that python's json module reads in surprising ways, or not at all.
RAW_TOKENS = st.sampled_from([
    "NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 5000, "-" + "9" * 4400, "0.1e-99999",
    "[" * 3000 + "]" * 3000, '{"a":' * 1500 + "1" + "}" * 1500, "[" * 400 + "]" * 400, '{"a":' * 300 + "1" + "}" * 300,
    '"\\ud800"', '"\\udc00x"', '"a\\u2028b"', "tru", "nul", '"unterminated', "01", "1.", ".5", "+1", "0x10", "'single'",
])
BAD_BYTES = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc", b"\xf4\x90\x80\x80", b"\x00", b"\r", b"\xef\xbb\xbf"])

_RAW = "@@RAW{}@@"


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, (*prefix, index)))
    return out


def _parent(value: Any, path: tuple) -> Any:
    for part in path[:-1]:
        value = value[part]
    return value


@st.composite
def mutated(draw, base: Any, max_mutations: int = 3, extra_keys: tuple[str, ...] = ()) -> tuple[Any, dict[str, str]]:
    """A deep copy of ``base`` with 1..max_mutations structural mutations; returns (value, raw tokens by marker)."""
    value = copy.deepcopy(base)
    raws: dict[str, str] = {}
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = _paths(value)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "delete", "extra", "raw", "wrap", "empty"]))
        if not path:  # the root
            if action in ("replace", "raw"):
                value = draw(GARBAGE)
            continue
        parent, key = _parent(value, path), path[-1]
        if action == "replace":
            parent[key] = draw(GARBAGE)
        elif action == "delete":
            del parent[key]
        elif action == "extra" and isinstance(parent, dict):
            name = draw(st.one_of(st.sampled_from(extra_keys or ("extra",)), TEXT))
            parent[name] = draw(GARBAGE)
        elif action == "extra" and isinstance(parent, list):
            parent.append(draw(GARBAGE))
        elif action == "raw":
            marker = _RAW.format(len(raws))
            raws[marker] = draw(RAW_TOKENS)
            parent[key] = marker
        elif action == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"value": parent[key]}, json.dumps(parent[key], default=str)]))
        elif action == "empty":
            parent[key] = draw(st.sampled_from(["", [], {}, None, 0]))
    return value, raws


def to_json_text(value: Any, raws: dict[str, str], *, ensure_ascii: bool = True, indent: int | None = None) -> str:
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)
    for marker, raw in raws.items():
        text = text.replace(json.dumps(marker), raw)
    return text


def encode(text: str) -> bytes:
    # A lone surrogate written raw (ensure_ascii=False) becomes bytes that are not UTF-8.
    return text.encode("utf-8", "surrogatepass")


@st.composite
def line_file(draw, lines: list[str]) -> bytes:
    """Join lines into a file and maybe damage it: truncate a line, drop/duplicate/swap lines,
    insert bytes that are not UTF-8, a BOM, CRLF endings, blank lines."""
    lines = list(lines)
    for _ in range(draw(st.integers(0, 2))):
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["truncate", "drop", "duplicate", "swap", "blank", "bytes", "none"]))
        if action == "truncate":
            lines[index] = lines[index][: draw(st.integers(0, max(len(lines[index]) - 1, 0)))]
        elif action == "drop":
            del lines[index]
        elif action == "duplicate":
            lines.insert(index, lines[index])
        elif action == "swap" and len(lines) > 1:
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif action == "blank":
            lines.insert(index, draw(st.sampled_from(["", "   ", "\t", "\r"])))
    data = [encode(line) for line in lines]
    if data and draw(st.booleans()) and draw(st.booleans()):
        index = draw(st.integers(0, len(data) - 1))
        at = draw(st.integers(0, len(data[index])))
        data[index] = data[index][:at] + draw(BAD_BYTES) + data[index][at:]
    newline = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    out = newline.join(data) + (newline if draw(st.booleans()) else b"")
    if draw(st.integers(0, 9)) == 0:
        out = b"\xef\xbb\xbf" + out
    return out


# -- the contract -------------------------------------------------------------------------------
def check_message(message: str, shown_path: str, *, n_lines: int | None = None) -> int | None:
    """Assert the one-message shape (or, for a golden file with several problems, ``N problems in FILE:`` and
    then each problem in that shape, ``... and N more`` past 20); return the line the first names (None: none)."""
    parts = message.split("\n")
    many = re.match(r"(\d+) problems in (.*):$", parts[0])
    if many is not None:
        assert int(many.group(1)) >= 2 and many.group(2) == shown_path, f"a list of problems naming another file: {message!r}"
        listed = parts[1:-1] if parts[-1].startswith("... and ") else parts[1:]
        assert listed and len(listed) % 2 == 0, f"each listed problem is a problem and a HINT line: {message!r}"
        lines = [check_message("\n".join(listed[i:i + 2]), shown_path, n_lines=n_lines) for i in range(0, len(listed), 2)]
        return lines[0]
    assert len(parts) == 2, f"expected 'problem' + 'HINT:' lines, got {len(parts)} lines: {message!r}"
    head, hint = parts
    assert hint.startswith("HINT: ") and hint[6:].strip(), f"no HINT: {message!r}"
    assert head.startswith(shown_path), f"does not name the file {shown_path!r}: {message!r}"
    rest = head[len(shown_path):]
    match = re.match(r"(?::(\d+))?: (.*)$", rest)
    assert match is not None and match.group(2).strip(), f"expected '{shown_path}[:LINE]: problem': {message!r}"
    assert "Traceback" not in message
    line = int(match.group(1)) if match.group(1) else None
    if line is not None and n_lines is not None:
        assert 1 <= line <= max(n_lines, 1), f"line {line} is outside the file (1..{n_lines}): {message!r}"
    return line


def _n_lines(data: bytes) -> int:
    return data.count(b"\n") + 1


def _prefix(data: bytes, line: int) -> bytes:
    """The first line - 1 lines of a file (lines end at "\\n" only, as the loaders read them)."""
    return b"".join(part + b"\n" for part in data.split(b"\n")[: line - 1])


# -- targets ------------------------------------------------------------------------------------
# Each target: a strategy of inputs and a runner(input, workdir) -> "loaded" | "refused" that
# asserts the contract. Any exception other than AssertionError escaping a runner is a defect.

VALID_ITEM = {
    "id": "q-001", "question": "How long do I have to return a bike?", "status": "active",
    "assertions": [{"text": "30 days", "kind": "must", "weight": 1.0, "conceptId": "c-window"}],
    "citations": [{"docId": "pol-returns", "chunkId": "pol-returns#p1", "mode": "required"}, {"docId": "faq"}],
    "concepts": [{"id": "c-window", "grade": "required"}], "reference": "Within 30 days.", "answerable": True,
    "questionType": "simple", "popularity": "head", "dynamism": "slow", "kind": "retrieval", "tags": ["topic:returns"],
    "conflictingSources": ["old-policy"], "attack": {"category": "injection", "vector": "document", "document": "IGNORE"},
    "expect": "blocked", "metadata": {"owner": "dana", "n": 3},
}
GOLDEN_KEYS = (*VALID_ITEM, "questionTyp", "citation", "question_type")


@st.composite
def golden_records(draw) -> list[tuple[Any, dict[str, str]]]:
    records = []
    for index in range(draw(st.integers(1, 4))):
        base = {**VALID_ITEM, "id": f"q-{index:03d}"}
        if draw(st.booleans()):
            base = {"id": base["id"], "question": base["question"]}
        records.append(draw(mutated(base, extra_keys=GOLDEN_KEYS)) if draw(st.integers(0, 2)) else (base, {}))
    return records


@st.composite
def golden_jsonl(draw) -> bytes:
    records = draw(golden_records())
    lines = [to_json_text(value, raws, ensure_ascii=draw(st.booleans())) for value, raws in records]
    if draw(st.integers(0, 5)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["[1, 2]", '"text"', "42", "null", "{", "}", "{}"])))
    return draw(line_file(lines))


@st.composite
def golden_json(draw) -> bytes:
    records = draw(golden_records())
    parts = [to_json_text(value, raws, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2]))) for value, raws in records]
    text = "[\n" + ",\n".join(parts) + "\n]\n"
    shape = draw(st.sampled_from(["array", "array", "array", "truncated", "object", "trailing", "empty"]))
    if shape == "truncated":
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif shape == "object":
        text = parts[0]
    elif shape == "trailing":
        text = text.rstrip().rstrip("]") + ",]"
    elif shape == "empty":
        text = draw(st.sampled_from(["", "   ", "[]", "[", "null"]))
    data = encode(text)
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(BAD_BYTES) + data[at:]
    return data


YAML_SNIPPETS = st.sampled_from([
    "2024-13-45", "2024-02-30 25:99:00", "!!float abc", "!!int 12a", "!!binary '%%%'", "!!binary /w==", "!!timestamp 2020-99-99",
    "!!python/object/apply:os.system ['echo hi']", "!!set {a, b}", "&a [1, 2]", "*undefined", "{a: 1, a: 2}", "[" * 300 + "]" * 300,
    "\t- tab", "'unterminated", "? [a, b]\n  : 1", "!!null ~", "0o17", "0x_ff", ".nan", "-.inf", "1_000", "yes", "~", "|\n  text",
])


@st.composite
def golden_yaml(draw) -> bytes:
    import yaml

    records = draw(golden_records())
    items = []
    for value, raws in records:
        # Raw JSON tokens mean nothing to YAML; they become YAML snippets instead.
        text = yaml.safe_dump([value], allow_unicode=draw(st.booleans()), sort_keys=False) if not raws else (
            "- " + to_json_text(value, {marker: draw(YAML_SNIPPETS) for marker in raws}).replace("\n", " ") + "\n")
        items.append(text)
    text = "".join(items)
    shape = draw(st.sampled_from(["list", "list", "list", "truncated", "mapping", "scalar", "snippet", "bomb"]))
    if shape == "truncated":
        text = text[: draw(st.integers(0, len(text)))]
    elif shape == "mapping":
        text = "items:\n" + "".join("  " + line + "\n" for line in text.splitlines())
    elif shape == "scalar":
        text = draw(st.sampled_from(["just text", "42", "~", "", "---\n---\n", "- 1\n- [2]\n"]))
    elif shape == "snippet":
        text += f"- id: x\n  question: {draw(YAML_SNIPPETS)}\n  metadata: {draw(YAML_SNIPPETS)}\n"
    elif shape == "bomb":  # exponential aliases ("billion laughs")
        levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
        text = "- id: bomb\n  question: q\n  metadata:\n" + "".join(f"    {line}\n" for line in levels)
    return encode(text)


def run_golden(data: bytes, workdir: Path, suffix: str) -> str:
    from pytest_crucible.golden_set.schema import GoldenFileError, load_golden_file

    path = workdir / f"golden_fuzz{suffix}"
    path.write_bytes(data)
    try:
        items = load_golden_file(path, display_path=path.name)
    except GoldenFileError as exc:
        line = check_message(str(exc), path.name, n_lines=_n_lines(data))
        assert line == exc.line
        if suffix == ".jsonl" and line is not None:
            # The error names the FIRST bad line: everything before it loads.
            before = workdir / "golden_prefix.jsonl"
            before.write_bytes(_prefix(data, line))
            try:
                load_golden_file(before)
            except GoldenFileError as earlier:
                if earlier.line is not None:  # a file-level problem (e.g. not UTF-8 before the line) may not name one
                    raise AssertionError(f"error names line {line}, but line {earlier.line} is already bad: {earlier}") from None
        return "refused"
    for item in items:  # what loaded must be usable downstream: dumped as JSON, stored, hashed
        encode_strict(json.dumps(item.to_json(), ensure_ascii=False))
        encode_strict(item.id + item.question)
    return "loaded"


def encode_strict(text: str) -> None:
    text.encode("utf-8")  # raises on a lone surrogate: SQLite could not store it


# qrels ------------------------------------------------------------------------------------------
@st.composite
def qrels_trec(draw) -> bytes:
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        qid = draw(st.sampled_from(["q-001", "q-002", "q 3", "", "#q"]) | TEXT.filter(lambda t: "\n" not in t))
        docno = draw(st.sampled_from(["chunk:returns#p1", "doc:returns", "returns#p2", "doc:", "chunk:", "d\u00a0x"]) | TEXT)
        grade = draw(st.sampled_from(["0", "1", "2", "3", "4", "-1", "2.5", "\u0663", "1e3", "+2", " 3", "", "x"]) | st.integers().map(str))
        columns = [qid, draw(st.sampled_from(["0", "Q0", "x"])), docno, grade]
        if draw(st.integers(0, 4)) == 0:
            columns = columns[: draw(st.integers(0, 3))] + draw(st.lists(st.sampled_from(["1", "0.5", "run"]), max_size=3))
        lines.append(draw(st.sampled_from([" ", "\t", "  ", " \x0b"])).join(columns))
    if draw(st.integers(0, 5)) == 0:
        lines.insert(0, draw(st.sampled_from(["# comment", '{"queryId": "q"}', "q 0 d 1 extra column", ""])))
    return draw(line_file(lines))


VALID_JUDGMENT = {"queryId": "q-001", "chunkId": "returns#p1", "docId": "returns", "grade": 2, "by": "dana", "note": "checked"}
QRELS_KEYS = ("queryId", "chunkId", "docId", "grade", "by", "note", "source", "judgeModel", "promptVersion", "createdBy",
              "runId", "createdAt", "id", "query_id", "grades")


@st.composite
def qrels_jsonl(draw) -> bytes:
    lines = []
    for index in range(draw(st.integers(1, 5))):
        base = {**VALID_JUDGMENT, "chunkId": f"returns#p{index}"}
        if draw(st.booleans()):
            base = {"queryId": "q-001", "docId": f"d{index}", "grade": 1, "source": "llm", "judgeModel": "m"}
        value, raws = draw(mutated(base, extra_keys=QRELS_KEYS)) if draw(st.integers(0, 2)) else (base, {})
        lines.append(to_json_text(value, raws, ensure_ascii=draw(st.booleans())))
    return draw(line_file(lines))


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from pytest_crucible.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _cli_error(stderr: str) -> str:
    assert stderr.startswith("crucible: ") and stderr.endswith("\n"), f"not one crucible error: {stderr!r}"
    return stderr[len("crucible: "):-1]


def empty_db(workdir: Path) -> Path:
    """A fresh, migrated crucible database (copied from a template: opening migrates once)."""
    from pytest_crucible.store import Store

    template = workdir / "template.db"
    if not template.exists():
        Store.open(template).close()
    db = workdir / "fuzz.db"
    for stale in workdir.glob("fuzz.db*"):
        stale.unlink(missing_ok=True)
    shutil.copy(template, db)
    return db


def _count(db: Path, table: str) -> int:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def run_qrels(data: bytes, workdir: Path, suffix: str) -> str:
    """`crucible qrels import FILE`: exit 0, or exit 2 with one message and nothing appended."""
    from pytest_crucible.qrels.formats import QrelsFormatError, read_qrels_file

    path = workdir / f"qrels_fuzz{suffix}"
    path.write_bytes(data)
    db = empty_db(workdir)
    code, _, err = _cli(["qrels", "import", str(path), "--by", "fuzzer", "--db", str(db)])
    if code == 0:
        assert err == ""
        return "loaded"
    assert code == 2, f"exit code {code}"
    line = check_message(_cli_error(err), str(path), n_lines=_n_lines(data))
    assert _count(db, "qrels") == 0, "a refused file appended judgments"
    if line is not None:
        before = workdir / f"qrels_prefix{suffix}"
        before.write_bytes(_prefix(data, line))
        try:
            read_qrels_file(before, by="fuzzer")
        except QrelsFormatError as earlier:
            if earlier.line is not None:
                raise AssertionError(f"error names line {line}, but line {earlier.line} is already bad: {earlier}") from None
    return "refused"


# config -----------------------------------------------------------------------------------------
VALID_CONFIG = {
    "retrieval": {"rerank": True, "graphFusion": False, "understanding": False, "tokenBudget": 3000, "candidatePool": 40},
    "policyMode": "off", "promptVersion": "v2", "retrievalLimit": 5, "chatModelSlot": "chat",
    "labels": {"model": "claude-haiku", "collection": "helpdesk"}, "myOwnKey": {"depth": [1, 2, {"x": None}]},
}
CONFIG_KEYS = (*VALID_CONFIG, "retrievalLimt", "rerank")


@st.composite
def config_files(draw) -> bytes:
    value, raws = draw(mutated(VALID_CONFIG, extra_keys=CONFIG_KEYS)) if draw(st.integers(0, 3)) else (VALID_CONFIG, {})
    text = to_json_text(value, raws, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    lines = text.split("\n")
    return draw(line_file(lines)) if draw(st.integers(0, 3)) == 0 else encode(text)


def run_config(data: bytes, workdir: Path) -> str:
    from pytest_crucible.config import ConfigError, TrackedConfig, config_hash, load_config_file, unread_changed_keys

    path = workdir / "fuzz-config.json"
    path.write_bytes(data)
    try:
        params, resolved = load_config_file(path)
    except ConfigError as exc:
        check_message(str(exc), str(path), n_lines=_n_lines(data))
        return "refused"
    # What loaded is what a run uses: hashed, tracked, stored as JSON.
    config_hash(resolved)
    tracked = TrackedConfig(resolved)
    tracked.to_dict()
    unread_changed_keys(resolved, set())
    encode_strict(json.dumps(params, sort_keys=True) + json.dumps(resolved, sort_keys=True))
    return "loaded"


# exported runs ------------------------------------------------------------------------------------
_EXPORT: dict[str, Any] = {}


def valid_export() -> dict[str, Any]:
    """A real exported run (3 items), made once through the Store API."""
    if not _EXPORT:
        import tempfile

        from pytest_crucible.store import Store

        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(Path(tmp) / "x.db")
            run_id = store.start_run(config_hash="c" * 64, params={"retrievalLimit": 5}, resolved={"retrievalLimit": 5},
                                     mode="system", outcome_mode="record", judge_model="lexical-v1", labels={"model": "m"})
            for i in range(3):
                store.record_score(run_id, {
                    "item_id": f"q{i}", "question": f"Q{i}?", "item": {"id": f"q{i}", "question": f"Q{i}?", "citations": [{"docId": "d"}]},
                    "source": "golden.jsonl", "line": i + 1, "answer": "A [S1]", "retrieved": [{"chunk_id": "d#1", "doc_id": "d", "score": 0.5}],
                    "citations": ["d#1"], "confidence": 0.25 * i, "abstained": i == 2, "latency_ms": 1.5, "outcome": "passed",
                    "metrics": {"ndcgAt10": 1.0 - 0.25 * i, "recallAtK": 1.0, "faithfulness": 0.5}, "error_class": "correct",
                    "crag_grade": "perfect", "verdicts": {"claims": ["A"]}, "assertions": [{"text": "A", "satisfied": True}],
                })
            store.finish_run(run_id, status="complete", golden_hash="g" * 64)
            _EXPORT["doc"] = store.export_run(run_id)
            store.close()
    return copy.deepcopy(_EXPORT["doc"])


@st.composite
def export_files(draw) -> bytes:
    base = valid_export()
    keys = ("format", "version", "run", "goldenItems", "results", "itemMetrics", "item_id", "question", "confidence", "status")
    value, raws = draw(mutated(base, max_mutations=4, extra_keys=keys)) if draw(st.integers(0, 4)) else (base, {})
    text = to_json_text(value, raws, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))
    data = encode(text)
    if draw(st.integers(0, 5)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return data


def run_export(data: bytes, workdir: Path) -> str:
    """`crucible import FILE`, then the comparison input the gate reads from the same file."""
    from pytest_crucible.store import StoreError, read_export
    from pytest_crucible.verdict.runs import run_data_from_export

    path = workdir / "fuzz-export.json"
    path.write_bytes(data)
    db = empty_db(workdir)
    code, _, err = _cli(["import", str(path), "--db", str(db)])
    if code != 0:
        assert code == 2, f"exit code {code}"
        check_message(_cli_error(err), str(path), n_lines=_n_lines(data))
        assert _count(db, "runs") == _count(db, "results") == 0, "a refused export wrote rows"
        with contextlib.suppress(StoreError):  # the gate's reader refuses it too, the same way
            read_export(path)
            raise AssertionError("crucible import refused the file but read_export accepted it")
        return "refused"
    document = read_export(path)
    run_data_from_export(document).means()
    return "loaded"


# promote bodies -----------------------------------------------------------------------------------
PROMOTE_KEYS = ("runId", "resultId", "question", "correctedAssertions", "citations", "errorClass", "tags", "correctedBy",
                "note", "status", "run_id")


def promote_store(workdir: Path) -> tuple[Path, str, str]:
    """A database with one run and one result to promote from (made once per workdir)."""
    from pytest_crucible.store import Store

    db = workdir / "promote.db"
    marker = workdir / "promote.ids"
    if not marker.exists():
        store = Store.open(db)
        run_id = store.start_run(config_hash="c" * 64, params={}, resolved={}, mode="system", outcome_mode="record")
        store.record_score(run_id, {"item_id": "q1", "question": "Q?", "item": {"id": "q1", "question": "Q?"}, "outcome": "failed",
                                    "result_id": "01RESULT0000000000000000001", "metrics": {}})
        store.finish_run(run_id, status="complete", golden_hash=None)
        store.close()
        marker.write_text(run_id)
    return db, marker.read_text(), "01RESULT0000000000000000001"


@st.composite
def promote_bodies(draw, run_id: str, result_id: str) -> bytes:
    base = {"runId": run_id, "resultId": result_id, "question": "How long is the return window?",
            "correctedAssertions": ["30 days", "from delivery"], "citations": [{"docId": "returns", "chunkId": "returns#p1", "mode": "required"}],
            "errorClass": "hallucination", "tags": ["topic:returns"], "correctedBy": "dana", "note": "reviewed"}
    value, raws = draw(mutated(base, extra_keys=PROMOTE_KEYS)) if draw(st.integers(0, 3)) else (base, {})
    data = encode(to_json_text(value, raws, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2]))))
    if draw(st.integers(0, 6)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 6)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(BAD_BYTES) + data[at:]
    return data


def run_promote(data: bytes, workdir: Path) -> str:
    """`crucible promote --json FILE`: a draft item and its feedback row, or one message and no rows."""
    db, _, _ = promote_store(workdir)
    path = workdir / "fuzz-promote.json"
    path.write_bytes(data)
    before = (_count(db, "eval_feedback"), _count(db, "golden_drafts"))
    code, out, err = _cli(["promote", "--json", str(path), "--db", str(db)])
    after = (_count(db, "eval_feedback"), _count(db, "golden_drafts"))
    if code == 0:
        response = json.loads(out)
        assert response["item"]["status"] == "draft" and after == (before[0] + 1, before[1] + 1)
        return "loaded"
    assert code == 2, f"exit code {code}"
    check_message(_cli_error(err), str(path))
    assert after == before, "a refused promote wrote rows"
    return "refused"


# The registry the test module and scripts/fuzz.py share: name -> (strategy factory, runner).
def targets(workdir: Path) -> dict[str, tuple[Callable[[], Any], Callable[[bytes, Path], str]]]:
    _, run_id, result_id = promote_store(workdir)
    return {
        "golden .jsonl": (golden_jsonl, lambda data, wd: run_golden(data, wd, ".jsonl")),
        "golden .json": (golden_json, lambda data, wd: run_golden(data, wd, ".json")),
        "golden YAML": (golden_yaml, lambda data, wd: run_golden(data, wd, ".yaml")),
        "qrels TREC": (qrels_trec, lambda data, wd: run_qrels(data, wd, ".txt")),
        "qrels .jsonl": (qrels_jsonl, lambda data, wd: run_qrels(data, wd, ".jsonl")),
        "config": (config_files, run_config),
        "exported run": (export_files, run_export),
        "promote body": (lambda: promote_bodies(run_id, result_id), run_promote),
    }
