"""Other tools' evaluation data, read as :class:`SourceRecord`s: what `crucible golden import` turns into
golden items (``golden_set/imports.py``). One reader per format, each from the tool's own documentation:

* ``ragas``: samples as JSONL, JSON or CSV (a MultiTurnSample: ``golden_set/multiturn.py``) (``user_input``, ``reference``,
  ``reference_contexts``, ``reference_context_ids``, ``retrieved_contexts``, ``response``; the older
  ``question``, ``ground_truth(s)``, ``contexts``, ``answer``), a testset generator's output included
  (its ``synthesizer_name`` or ``evolution_type`` gives the question type).
* ``deepeval``: goldens as JSON or CSV (``input``, ``expected_output``, ``context``, ``retrieval_context``,
  ``additional_metadata``; a CSV's lists are ``|``-separated, or ``;`` for DeepEval's older reader); a
  ConversationalGolden: ``golden_set/multiturn.py``.
* ``promptfoo``: a ``tests:`` YAML (or JSON) or a tests CSV (``__expected`` columns): ``vars`` hold the
  question, ``contains`` / ``icontains`` / ``equals`` / a literal ``regex`` assertion becomes an assertion,
  an ``equals`` value the reference; other assertion types are counted as not imported.
* ``langsmith``: an exported dataset's examples (``inputs``, ``outputs``, ``metadata``, ``id``; a chat example:
  ``golden_set/multiturn.py``), as JSONL or
  a JSON array; ``--split`` keeps the examples of one ``metadata.dataset_split``.
* ``csv`` / ``jsonl``: any table, its columns named with ``--map``.

``--map KEY=FIELD`` names where a value is for every format (a dotted path in a nested record:
``inputs.query``). Every field a record has that crucible does not model is kept, verbatim, for the way
back out (``crucible golden convert``). A bad record is a :class:`GoldenFileError` naming the file, the
line and the field, yielded in the record's place so the caller decides whether to go on.

Pure: no pytest, no store.
"""

from __future__ import annotations

import ast
import copy
import csv
import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .schema import GoldenFileError, read_records

csv.field_size_limit(1 << 30)  # a cell may hold long passages (the default stops at 128 KiB)

#: The keys ``--map`` takes.
MAP_KEYS = ("question", "reference", "contexts", "context_ids", "id", "kind", "tags")


@dataclass
class SourceRecord:
    """One record of another tool's data, as crucible reads it."""

    line: int
    question: str
    source_id: str | None = None
    reference: str | None = None
    contexts: list[str] = field(default_factory=list)  # the passages an answer rests on, as text
    chunk_ids: list[str] = field(default_factory=list)  # ... or named by chunk id
    judged: list[tuple[str | None, str, int]] = field(default_factory=list)  # (chunk, doc, grade) from qrels
    assertions: list[dict[str, Any]] = field(default_factory=list)
    kind: str | None = None
    question_type: str | None = None
    tags: list[str] = field(default_factory=list)
    expected_tools: list[dict[str, Any]] = field(default_factory=list)  # DeepEval's expected_tools
    turns: list[dict[str, Any]] = field(default_factory=list)  # a conversation's turns (golden_set/multiturn.py)
    kept: dict[str, Any] = field(default_factory=dict)  # the source's fields crucible does not model
    fields: dict[str, str] = field(default_factory=dict)  # crucible's key -> the source's field it was read from
    not_imported: list[str] = field(default_factory=list)  # what the record held that became nothing


Read = Iterator["SourceRecord | GoldenFileError"]

# Where each format keeps a value, in the order looked for; --map comes first.
_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "ragas": {"question": ("user_input", "question"), "reference": ("reference", "ground_truth", "ground_truths"),
              "contexts": ("reference_contexts",), "context_ids": ("reference_context_ids",), "id": ("id", "sample_id")},
    "deepeval": {"question": ("input",), "reference": ("expected_output",), "contexts": ("context",),
                 "id": ("additional_metadata.id", "id")},
    "langsmith": {"question": tuple(f"inputs.{name}" for name in ("question", "input", "query", "user_input", "q", "text")),
                  "reference": tuple(f"outputs.{name}" for name in ("answer", "output", "reference", "expected", "ground_truth",
                                                                     "expected_output")),
                  "contexts": ("outputs.contexts", "outputs.reference_contexts", "outputs.context", "inputs.contexts",
                               "inputs.context"),
                  "id": ("id", "example_id")},
    "table": {"question": ("question", "query", "user_input", "input", "prompt"),
              "reference": ("reference", "answer", "ground_truth", "expected_output", "expected"),
              "contexts": ("contexts", "context", "reference_contexts"), "context_ids": ("context_ids", "chunk_ids"),
              "id": ("id", "qid", "query_id", "_id"), "kind": ("kind",), "tags": ("tags",)},
}
# A CSV cell holding a list: ragas writes Python's repr, others JSON; DeepEval joins passages with "|" (its
# save_as, and its reader since 2026-08) or, in files written for its older reader, with ";": the first of
# these the cell holds is the one.
_DELIMITER = {"deepeval": ("|", ";")}
# ragas' testset generators -> the question type the item records.
_RAGAS_TYPES = (("multi_hop", "multi_hop"), ("multi_context", "multi_hop"), ("conditional", "conditional"),
                ("comparison", "comparison"))

_MISSING = object()


def lookup(record: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a nested record (a top-level key may itself hold a dot), or ``_MISSING``."""
    if path in record:
        return record[path]
    head, dot, rest = path.partition(".")
    if dot and isinstance(record.get(head), Mapping):
        return lookup(record[head], rest)
    return _MISSING


def _without(record: Mapping[str, Any], paths: list[str]) -> dict[str, Any]:
    """A deep copy of ``record`` without the values at ``paths`` (a nested object left empty goes too)."""
    kept = copy.deepcopy(dict(record))
    for path in paths:
        if path in kept:
            kept.pop(path)
            continue
        head, _, rest = path.partition(".")
        if isinstance(kept.get(head), dict):
            kept[head] = _without(kept[head], [rest])
            if not kept[head]:
                kept.pop(head)
    return kept


def text_list(value: Any, delimiters: tuple[str, ...] = ()) -> list[str] | None:
    """A list of texts from a list, or from one cell: a JSON or Python list literal, text joined with the first
    of ``delimiters`` it holds, or a single text. None: not texts."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(entry) for entry in value] if all(isinstance(e, (str, int, float)) for e in value) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return []
    if text.startswith("[") and text.endswith("]"):
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, list):
                return text_list(parsed)
    delimiter = next((mark for mark in delimiters if mark in text), None)
    if delimiter is not None:
        return [part.strip() for part in text.split(delimiter) if part.strip()]
    return [text]


class _Fields:
    """The values of one record, looked up through --map and the format's aliases, each use remembered."""

    def __init__(self, shown: str, line: int, record: Mapping[str, Any], aliases: dict[str, tuple[str, ...]],
                 mapping: Mapping[str, str], fmt: str):
        self.shown, self.line, self.record, self.fmt = shown, line, record, fmt
        self.aliases, self.mapping = aliases, mapping
        self.used: list[str] = []
        self.found: dict[str, str] = {}

    def find(self, key: str) -> tuple[str | None, Any]:
        paths = (self.mapping[key],) if key in self.mapping else self.aliases.get(key, ())
        for path in paths:
            value = lookup(self.record, path)
            if value is not _MISSING:
                self.used.append(path)
                self.found[key] = path
                return path, value
        return None, None

    def error(self, name: str | None, problem: str, hint: str) -> GoldenFileError:
        return GoldenFileError(self.shown, self.line, name, problem, hint)

    def question(self) -> str:
        path, value = self.find("question")
        if path is None:
            looked = self.mapping.get("question") or " or ".join(self.aliases["question"][:3])
            has = ", ".join(str(key) for key in list(self.record)[:8]) or "no fields"
            guess = _looks_like(self.record)
            other = (f"it looks like --from {guess}" if guess and guess != self.fmt else "or is the file another --from format?")
            raise self.error(looked, "missing: the question", f"a {self.fmt} record holds its question in {looked}, and this "
                             f"one has {has}; --map question=FIELD names the field ({other})")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise self.error(path, f"expected the question as text, got {json.dumps(value, default=str)[:60]}",
                             "--map question=FIELD names the field holding it")
        return value

    def text(self, key: str) -> str | None:
        path, value = self.find(key)
        if isinstance(value, list) and key == "reference":  # ground_truths: the first is the reference,
            value = value[0] if value else None
            self.used.remove(path or "")  # and the list is kept as it was
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise self.error(path, f"expected text, got {type(value).__name__}", f"--map {key}=FIELD names a text field")
        return value

    def texts(self, key: str) -> list[str]:
        path, value = self.find(key)
        texts = text_list(value, _DELIMITER.get(self.fmt, ()))
        if texts is None:
            raise self.error(path, f"expected a list of texts, got {type(value).__name__}",
                             'a list like ["first passage", "second passage"] (in a CSV cell too)')
        return [text for text in texts if text.strip()]

    def kept(self) -> dict[str, Any]:
        return _without(self.record, self.used)


def _looks_like(record: Mapping[str, Any]) -> str | None:
    """The format a record's own fields say it is in (for the hint of a record read with another ``--from``)."""
    from .multiturn import is_deepeval_conversation, langsmith_messages_key

    if "user_input" in record:
        return "ragas"
    if "input" in record or is_deepeval_conversation(record):
        return "deepeval"
    if isinstance(record.get("inputs"), Mapping) or langsmith_messages_key(record):
        return "langsmith"
    return None


def _record(fields: _Fields) -> SourceRecord:
    record = SourceRecord(fields.line, fields.question(), source_id=fields.text("id"), reference=fields.text("reference"),
                          contexts=fields.texts("contexts"), chunk_ids=fields.texts("context_ids"), kind=fields.text("kind"))
    path, value = fields.find("tags")
    if isinstance(value, str) and not value.strip().startswith("["):
        record.tags = [tag.strip() for tag in value.split(",") if tag.strip()]
    elif path is not None:
        record.tags = fields.texts("tags")
    return record


def _tables(path: Path, shown: str) -> Iterator[tuple[int, Any]]:
    """(line, record) of a .csv/.tsv (rows as dicts), .json (an array), .yaml or .jsonl file."""
    if path.suffix.lower() in (".csv", ".tsv"):
        yield from _csv_rows(path, shown)
        return
    for line, record, _vetted in read_records(path, shown):
        yield line, record


def _csv_rows(path: Path, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise GoldenFileError(shown, None, None, f"cannot read the file: {exc.strerror}", "check the path") from None
    except UnicodeDecodeError as exc:
        raise GoldenFileError(shown, None, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                              "save the file as UTF-8 (a spreadsheet's 'CSV UTF-8')") from None
    header = text.split("\n", 1)[0]
    # The header line's own separator: a spreadsheet saved as CSV in many locales separates cells with ";".
    delimiter = "\t" if path.suffix.lower() == ".tsv" else max((",", ";", "\t"), key=header.count) if header else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    if not reader.fieldnames:
        raise GoldenFileError(shown, 1, None, "no header row", "the first row names the columns, e.g. question,reference")
    start = reader.line_num + 1
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:
            raise GoldenFileError(shown, reader.line_num, None, f"not valid CSV: {exc}", "check the quoting around that line") from None
        if None in row:
            raise GoldenFileError(shown, start, None, f"{len(reader.fieldnames) + len(row[None])} cells in a row of "
                                  f"{len(reader.fieldnames)} columns", "quote a cell that holds the delimiter")
        yield start, {key: value for key, value in row.items() if key is not None and value != ""}  # an empty cell: no value
        start = reader.line_num + 1


def _not_an_object(shown: str, line: int, record: Any, what: str) -> GoldenFileError:
    return GoldenFileError(shown, line, None, f"expected an object for {what}, got {type(record).__name__}",
                           f"one {what} per line (or per element of a JSON array)")


def read_tabular(path: Path, shown: str, fmt: str, mapping: Mapping[str, str], split: str | None = None) -> Read:
    """The records of a ragas, deepeval, langsmith, csv or jsonl file."""
    aliases = _ALIASES.get(fmt, _ALIASES["table"])
    for line, record in _tables(path, shown):
        if isinstance(record, GoldenFileError):  # a line that is not JSON
            yield record
            continue
        if not isinstance(record, dict):
            yield _not_an_object(shown, line, record, "a record")
            continue
        if fmt == "langsmith" and split is not None and split not in _splits(record):
            continue
        if fmt == "deepeval" and isinstance(record.get("additional_metadata"), str):  # a CSV cell holds it as JSON
            try:
                record["additional_metadata"] = json.loads(record["additional_metadata"])
            except ValueError:
                yield GoldenFileError(shown, line, "additional_metadata", "not a JSON object",
                                      'DeepEval reads this cell as JSON, e.g. {"id": "q-1"}')
                continue
        fields = _Fields(shown, line, record, aliases, _ragas_contexts(record, mapping) if fmt == "ragas" else mapping, fmt)
        if "question" not in mapping and _is_conversation(fmt, record):
            yield _conversation(fields, fmt)
            continue
        try:
            source = _record(fields)
            if fmt == "langsmith" and "question" not in mapping and not any(p.startswith("inputs.") for p in fields.used):
                raise fields.error("inputs", "no question found", "--map question=inputs.FIELD names it")
            if fmt == "ragas":
                source.question_type = _ragas_type(record)
        except GoldenFileError as exc:
            yield exc
            continue
        source.kept = fields.kept()
        source.fields = fields.found
        if fmt == "deepeval" and source.kept.get("expected_tools") not in (None, "", []):
            try:
                source.expected_tools = _deepeval_tools(source.kept.pop("expected_tools"))
            except ValueError as exc:
                yield GoldenFileError(shown, line, "expected_tools", str(exc),
                                      'DeepEval writes a list of tool calls: [{"name": "search", "input_parameters": {...}}]')
                continue
            source.fields["expectedTools"] = "expected_tools"
        if fmt == "ragas" and "reference_context_ids" in record:  # cited, and kept as written for the way back
            source.kept["reference_context_ids"] = record["reference_context_ids"]
        yield source


def _is_conversation(fmt: str, record: Mapping[str, Any]) -> bool:
    from .multiturn import is_deepeval_conversation, is_ragas_conversation, langsmith_messages_key

    return ((fmt == "ragas" and is_ragas_conversation(record)) or (fmt == "deepeval" and is_deepeval_conversation(record))
            or (fmt == "langsmith" and langsmith_messages_key(record) is not None))


def _conversation(fields: _Fields, fmt: str) -> SourceRecord | GoldenFileError:
    """A ragas MultiTurnSample, a DeepEval ConversationalGolden or a LangSmith chat example as a record with
    turns (golden_set/multiturn.py); its questions, joined, are what an id made from a hash hashes."""
    from .multiturn import MultiTurnError, deepeval_turns, langsmith_messages_key, langsmith_turns, ragas_turns

    record = fields.record
    try:
        if fmt == "langsmith":
            key = langsmith_messages_key(record) or ""
            turns, not_imported, reply = langsmith_turns(record, key)
            read_from = [f"inputs.{key}", *([f"outputs.{reply}"] if reply else [])]
        else:
            turns, not_imported = (ragas_turns if fmt == "ragas" else deepeval_turns)(record)
            read_from = [name for name in _TURN_SOURCES[fmt] if name in record]
        source = SourceRecord(fields.line, "\n".join(turn["question"] for turn in turns), source_id=fields.text("id"),
                              contexts=fields.texts("contexts"), turns=turns, not_imported=not_imported)
    except MultiTurnError as exc:
        return fields.error(exc.field, exc.problem, exc.hint)
    except GoldenFileError as exc:
        return exc
    fields.used.extend(read_from)
    source.kept = fields.kept()
    source.fields = {**fields.found, "turns": read_from[0]}
    return source


# The fields a conversation's turns are read from, by format (golden_set/multiturn.py reads them).
_TURN_SOURCES = {"ragas": ("user_input", "reference", "reference_tool_calls"), "deepeval": ("turns", "expected_outcome")}


def _deepeval_tools(value: Any) -> list[dict[str, Any]]:
    """DeepEval's ``expected_tools`` (ToolCall objects as JSON, or names; a CSV cell as JSON) as the item's
    ``expectedTools``: the name, and the input parameters as the arguments a call must include."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [name.strip() for name in value.split(";") if name.strip()]
    if not isinstance(value, list):
        raise ValueError(f"expected a list of tool calls, got {type(value).__name__}")
    tools: list[dict[str, Any]] = []
    for number, call in enumerate(value, 1):
        if isinstance(call, str) and call.strip():
            call = {"name": call}
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"tool call {number} has no name")
        arguments = call.get("input_parameters", call.get("inputParameters")) or {}
        if not isinstance(arguments, dict):
            raise ValueError(f"tool call {number} ('{name}'): input_parameters is not an object")
        tools.append({"name": name, "arguments": arguments} if arguments else {"name": name})
    return tools


def _splits(record: Mapping[str, Any]) -> list[str]:
    value = (record.get("metadata") or {}).get("dataset_split") if isinstance(record.get("metadata"), Mapping) else None
    return [value] if isinstance(value, str) else [str(v) for v in value] if isinstance(value, list) else []


def _ragas_contexts(record: Mapping[str, Any], mapping: Mapping[str, str]) -> Mapping[str, str]:
    """ragas before 0.2 named a sample's passages ``contexts``: in a testset (no answer yet, or an
    ``evolution_type``) they are the passages the question was written from, the reference; in an evaluated
    sample they are what a system retrieved, which is kept, not cited."""
    if "contexts" in mapping or "reference_contexts" in record or "contexts" not in record:
        return mapping
    if ("answer" in record or "response" in record) and "evolution_type" not in record:
        return mapping
    return {**mapping, "contexts": "contexts"}


def _ragas_type(record: Mapping[str, Any]) -> str | None:
    made_by = str(record.get("synthesizer_name") or record.get("evolution_type") or "")
    return next((kind for marker, kind in _RAGAS_TYPES if marker in made_by), "simple" if made_by else None)


# --------------------------------------------------------------------------------------------- promptfoo
_QUESTION_VARS = ("question", "query", "input", "user_input", "prompt", "text")
_REFERENCE_VARS = ("reference", "expected", "answer", "ground_truth", "expected_output")
_CONTEXT_VARS = ("context", "contexts", "reference_contexts")
_IMPORTED_ASSERTIONS = ("contains", "icontains", "equals", "regex")
_EXPECTED = re.compile(r"^(?P<type>(?:not-)?[a-z][a-z0-9-]*(?:\([^)]*\))?)\s*:\s*(?P<value>.*)$", re.S)
_ASSERTION_TYPES = frozenset(["contains", "icontains", "equals", "regex", "starts-with", "contains-any", "contains-all", "icontains-any", "icontains-all", "is-json", "contains-json", "is-xml", "contains-xml", "is-sql", "contains-sql", "javascript", "fn", "eval", "python", "grade", "grader", "llm-rubric", "similar", "model-graded-closedqa", "model-graded-factuality", "factuality", "answer-relevance", "context-faithfulness", "context-recall", "context-relevance", "levenshtein", "rouge-n", "bleu", "webhook", "cost", "latency", "perplexity", "classifier", "moderation", "g-eval", "select-best", "is-refusal", "is-valid-openai-tools-call"])
_REGEX_SYNTAX = re.compile(r"(?<!\\)[.^$*+?()\[\]{}|]|\\[dDwWsSbB]")


def _expected_cell(text: str) -> dict[str, Any]:
    """A promptfoo CSV ``__expected`` cell as an assertion: ``type: value``, or plain text (``equals``)."""
    match = _EXPECTED.match(text.strip())
    if match:
        kind = match["type"]
        base = kind.split("(")[0].removeprefix("not-")
        if base in _ASSERTION_TYPES:
            return {"type": kind, "value": match["value"]}
    return {"type": "equals", "value": text}


def _promptfoo_tests(path: Path, shown: str) -> Iterator[tuple[int, Any, dict[str, Any]]]:
    """(line, test, defaultTest) of a promptfoo tests file: a CSV, a list of tests, or a config whose
    ``tests:`` is a list or a ``file://`` path to a CSV."""
    if path.suffix.lower() in (".csv", ".tsv"):
        for line, row in _csv_rows(path, shown):
            test: dict[str, Any] = {"vars": {k: v for k, v in row.items() if not k.startswith("__")}}
            asserts = [_expected_cell(v) for k, v in row.items() if k.startswith("__expected") and v and v.strip()]
            if asserts:
                test["assert"] = asserts
            if row.get("__description"):
                test["description"] = row["__description"]
            metadata = {k.removeprefix("__metadata:"): v for k, v in row.items() if k.startswith("__metadata:") and v}
            if metadata:
                test["metadata"] = metadata
            yield line, test, {}
        return
    if path.suffix.lower() == ".jsonl":
        for line, record in _tables(path, shown):
            yield line, record, {}
        return
    config, tests_node = _promptfoo_config(path, shown)
    default: dict[str, Any] = {}
    if isinstance(config, dict) and isinstance(config.get("defaultTest"), dict):
        default = config["defaultTest"]
    tests = config.get("tests") if isinstance(config, dict) else config
    if isinstance(tests, str):
        target = path.parent / tests.removeprefix("file://")
        if not target.is_file():
            raise GoldenFileError(shown, None, "tests", f"names {tests!r}, which is not a file", "tests: file://tests.csv, relative to this file")
        for line, test, _ in _promptfoo_tests(target, str(target)):
            yield line, test, default
        return
    if not isinstance(tests, list):
        raise GoldenFileError(shown, 1, "tests", "expected a list of tests", "tests:\n  - vars: {question: ...}\n    assert: [...]")
    for test, line in zip(tests, tests_node, strict=True):
        yield line, test, default


def _promptfoo_config(path: Path, shown: str) -> tuple[Any, list[int]]:
    """The config (or list of tests) and the line of each test."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenFileError(shown, None, None, f"cannot read the file: {getattr(exc, 'strerror', None) or exc}",
                              "a promptfoo config in UTF-8") from None
    if path.suffix.lower() == ".json":
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise GoldenFileError(shown, getattr(exc, "lineno", None), None, f"not valid JSON: {exc}", "check the file") from None
        tests = config.get("tests") if isinstance(config, dict) else config
        return config, [1] * len(tests) if isinstance(tests, list) else []
    try:
        import yaml
    except ImportError:
        raise GoldenFileError(shown, None, None, "a promptfoo YAML needs PyYAML", "pip install pyyaml") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise GoldenFileError(shown, mark.line + 1 if mark else None, None, f"not valid YAML: {getattr(exc, 'problem', exc)}",
                              "check indentation and quoting") from None
    tests_node = node
    if isinstance(node, yaml.MappingNode):
        tests_node = next((value for key, value in node.value if key.value == "tests"), None)
    lines = [child.start_mark.line + 1 for child in tests_node.value] if isinstance(tests_node, yaml.SequenceNode) else []
    return config, lines


def read_promptfoo(path: Path, shown: str, mapping: Mapping[str, str]) -> Read:
    for line, test, default in _promptfoo_tests(path, shown):
        if isinstance(test, GoldenFileError):
            yield test
            continue
        if not isinstance(test, dict):
            yield _not_an_object(shown, line, test, "a test")
            continue
        variables = {**(default.get("vars") or {}), **(test.get("vars") or {})}
        vars_mapping = {key: value.removeprefix("vars.") for key, value in mapping.items()}
        aliases = {"question": _QUESTION_VARS if len(variables) != 1 else tuple(variables), "reference": _REFERENCE_VARS,
                   "contexts": _CONTEXT_VARS, "id": ()}
        fields = _Fields(shown, line, variables, aliases, vars_mapping, "promptfoo")
        try:
            question = fields.question()
            record = SourceRecord(line, question, reference=fields.text("reference"), contexts=fields.texts("contexts"))
        except GoldenFileError as exc:
            if exc.problem == "missing: the question":
                exc = GoldenFileError(shown, line, "vars", f"no question among the vars ({', '.join(variables) or 'none'})",
                                      "--map question=VAR names the var holding the question")
            yield exc
            continue
        metadata: dict[str, Any] = test["metadata"] if isinstance(test.get("metadata"), dict) else {}
        record.source_id = str(metadata["id"]) if metadata.get("id") is not None else None
        record.kept = {key: value for key, value in test.items() if key not in ("vars", "assert")}
        unused = fields.kept()
        if unused:
            record.kept["vars"] = unused
        for assertion in [*(default.get("assert") or []), *(test.get("assert") or [])]:
            _promptfoo_assertion(record, assertion)
        yield record


def _promptfoo_assertion(record: SourceRecord, assertion: Any) -> None:
    if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str):
        record.not_imported.append("an assertion without a type")
        return
    kind, value = assertion["type"], assertion.get("value")
    literal = kind == "regex" and isinstance(value, str) and not _REGEX_SYNTAX.search(value)
    if kind not in _IMPORTED_ASSERTIONS or not isinstance(value, str) or not value.strip() or (kind == "regex" and not literal):
        record.not_imported.append(f"assertion type {kind}" + (" (a pattern)" if kind == "regex" else ""))
        record.kept.setdefault("assert", []).append(assertion)
        return
    text = value.replace("\\", "") if kind == "regex" else value
    entry: dict[str, Any] = {"text": text}
    weight = assertion.get("weight")
    if isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight >= 0:
        entry["weight"] = weight
    record.assertions.append(entry)
    if kind == "equals" and record.reference is None:
        record.reference = value
