"""Your own metrics: Python metrics (``@crucible.metric``) and rubric metrics (model-judged, declared as data).

A custom metric's values go wherever the built-ins go (the item's metrics, the store, the
comparison, the gate), so this module only says what one *is*: how it is declared and checked,
how it runs on one item, and what a run records of it (:func:`definitions`: name, kind,
direction, where it was defined, a fingerprint of its code or rubric text) so that a comparison
can tell when the ruler changed (:func:`ruler_changes`). Finding the metrics in a pytest session
(conftest modules, the ``crucible_metrics`` ini key, the ``pytest_crucible_register_metrics``
hook) is the plugin's; this module never imports pytest, and only the standard library at import
time (a conftest that imports ``pytest_crucible`` to decorate a function stays cheap).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import math
import numbers
import os
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..metrics.properties import BETTER

__all__ = [
    "CustomMetricError",
    "PythonMetric",
    "Rubric",
    "check_metrics",
    "definitions",
    "directions",
    "load_rubrics_file",
    "metric",
    "parse_rubrics",
    "ruler_changes",
    "run_python_metrics",
]

NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
PYTHON, RUBRIC = "python", "rubric"
# What a rubric's "appliesTo" may select on: golden item fields (a list field matches on any of its values).
APPLIES_TO_FIELDS = {"kind": "kind", "tags": "tags", "questionType": "questionType"}
RUBRIC_FIELDS = ("name", "criteria", "scale", "steps", "appliesTo")
RUBRIC_HINT = ('HINT: a rubric is {"name": "politeness", "criteria": "The answer is courteous.", '
               '"scale": "pass_fail" or [1, 5], "steps": [...], "appliesTo": {"kind": ["retrieval"]}} (docs/custom-metrics.md)')


class CustomMetricError(ValueError):
    """A custom metric that cannot be used (a bad name, direction or rubric): one message naming where it is."""


def shown_path(path: str) -> str:
    """A file path as messages show it: relative to the working directory when it is below it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


# -- Python metrics ------------------------------------------------------------------------
class PythonMetric:
    """A function decorated with ``@crucible.metric``: still callable as the function it wraps."""

    def __init__(self, name: Any, better: Any, function: Callable[..., Any]):
        self.name, self.better, self.function = name, better, function
        self.__doc__ = getattr(function, "__doc__", None)
        self.__wrapped__ = function
        self._fingerprint: str | None = None
        self._checked = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._checked:  # a session checks its metrics as it registers them; a direct call checks here
            problem = argument_problem(self.name, self.better)
            if problem is not None:
                raise CustomMetricError(f"@crucible.metric at {self.origin}: {problem}\nHINT: see docs/custom-metrics.md")
            self._checked = True
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<crucible metric {self.name!r} ({self.origin})>"

    @property
    def function_name(self) -> str:
        return getattr(self.function, "__qualname__", None) or getattr(self.function, "__name__", None) or repr(self.function)

    @property
    def file(self) -> str:
        code = getattr(self.function, "__code__", None)
        return code.co_filename if code is not None else (inspect.getsourcefile(self.function) or "?")

    @property
    def line(self) -> int:
        code = getattr(self.function, "__code__", None)
        return code.co_firstlineno if code is not None else 0

    @property
    def module(self) -> str:
        return getattr(self.function, "__module__", None) or "?"

    @property
    def origin(self) -> str:
        """``conftest.py:12 (answer_words)``: where the metric is defined, for every message about it."""
        return f"{shown_path(self.file)}:{self.line} ({self.function_name})"

    @property
    def fingerprint(self) -> str:
        """sha256 of the function's code as Python reads it (comments and layout do not count, any other edit
        does), so a comparison of runs measured by different code says the ruler changed."""
        if self._fingerprint is None:
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(self.function)))
                text = ast.dump(_without_docstrings(tree))
            except (OSError, TypeError, SyntaxError):  # no source file (a REPL, a frozen module): the bytecode
                code = getattr(self.function, "__code__", None)
                text = repr((code.co_code, code.co_consts, code.co_names)) if code is not None else repr(self.function)
            self._fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self._fingerprint


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """The tree with every docstring removed: rewording one does not change what the metric measures."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def read_only(value: Any) -> Any:
    """A config as a metric sees it: mappings and lists read-only all the way down, so a metric cannot change
    the config recorded with the run (or what the next item's metric reads)."""
    from types import MappingProxyType

    if isinstance(value, Mapping):
        return MappingProxyType({key: read_only(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(read_only(item) for item in value)
    return value


def metric(name: Any = None, *, better: Any = "higher") -> Any:
    """``@crucible.metric("answerWords", better="lower")``: a per-item metric of your own.

    The function is called as ``function(item, result, *, config)`` with the golden item, the
    validated pipeline result and the resolved config, and returns a number, or None when the
    metric does not apply to the item (never NaN). ``better``: "higher", "lower", or None (a
    change is reported, never a regression). ``@crucible.metric`` or ``@crucible.metric()`` names the
    metric after the function.
    Problems (a bad name or direction) are reported by the session with the function's file and line."""
    if callable(name) and not isinstance(name, str):  # bare @crucible.metric
        return PythonMetric(name.__name__, better, name)

    def register(function: Callable[..., Any]) -> PythonMetric:
        return PythonMetric(getattr(function, "__name__", None) if name is None else name, better, function)

    return register


def name_problem(name: Any, builtins: Iterable[str]) -> str | None:
    """Why ``name`` cannot name a custom metric (None: it can)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        return (f"the name {name!r} is not usable: use a letter, then letters, digits or _ (at most 64), "
                "e.g. answerWords")
    clash = next((builtin for builtin in builtins if builtin.lower() == name.lower()), None)
    if clash is not None:
        return f"the name {name!r} is the built-in metric {clash}: choose another name (e.g. {name}Custom)"
    return None


def argument_problem(name: Any, better: Any, builtins: Iterable[str] | None = None) -> str | None:
    """Why ``@crucible.metric(name, better=better)`` cannot be used (None: it can): the one check of its
    arguments (``builtins``: the built-in metric names a custom one may not take; None: every one)."""
    if builtins is None:
        from ..metrics import KNOWN_METRICS

        builtins = KNOWN_METRICS
    problem = name_problem(name, builtins)
    if problem is None and better not in BETTER:
        problem = f"better={better!r}: expected \"higher\", \"lower\" or None (a change is reported, never a regression)"
    return problem


def _metric_problem(found: PythonMetric, builtins: Sequence[str]) -> str | None:
    problem = argument_problem(found.name, found.better, builtins)
    if problem is None and not callable(found.function):
        problem = "it decorates something that is not a function"
    if problem is None:
        try:
            inspect.signature(found.function).bind(None, None, config=None)
        except TypeError:
            problem = "the function must accept (item, result, *, config)"
        except ValueError:  # no signature to read (a builtin): called as it is
            pass
    return problem


def check_metrics(found: Iterable[Any], builtins: Sequence[str], rubrics: Sequence[Rubric] = ()) -> tuple[PythonMetric, ...]:
    """The Python metrics of a session, in name order, each once. Raises :class:`CustomMetricError` for the
    first one that cannot be used: not made by ``@crucible.metric``, a bad name or direction, a name of a
    built-in, a name two different metrics (or a metric and a rubric) share."""
    by_name: dict[str, PythonMetric] = {}
    for candidate in found:
        if not isinstance(candidate, PythonMetric):
            raise CustomMetricError(f"pytest_crucible_register_metrics returned {candidate!r}: expected metrics made with "
                                    "@crucible.metric\nHINT: return [answer_words, ...], the decorated functions")
        problem = _metric_problem(candidate, builtins)
        if problem is not None:
            raise CustomMetricError(f"@crucible.metric at {candidate.origin}: {problem}\nHINT: see docs/custom-metrics.md")
        other = by_name.get(candidate.name)
        if other is not None and other is not candidate and other.function is not candidate.function:
            raise CustomMetricError(f"two custom metrics are named {candidate.name!r}: {other.origin} and {candidate.origin}\n"
                                    "HINT: rename one of them")
        by_name[candidate.name] = candidate
    for rubric in rubrics:
        if rubric.name in by_name:
            raise CustomMetricError(f"the rubric {rubric.name!r} ({rubric.origin}) and the Python metric "
                                    f"{by_name[rubric.name].origin} share a name\nHINT: rename one of them")
    return tuple(by_name[name] for name in sorted(by_name))


def metrics_in(namespaces: Iterable[Any]) -> list[PythonMetric]:
    """The metrics defined at the top level of modules (conftest.py files, the ini key's modules), in order."""
    found: list[PythonMetric] = []
    for namespace in namespaces:
        values = vars(namespace).values() if hasattr(namespace, "__dict__") else ()
        found.extend(value for value in list(values) if isinstance(value, PythonMetric) and value not in found)
    return found


def _numpy_bool(value: Any) -> bool:
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")


def value_problem(value: Any) -> str | None:
    """Why a metric's return value cannot be stored (None: it can; None itself means "does not apply")."""
    if value is None or isinstance(value, bool) or _numpy_bool(value):
        return None
    if not isinstance(value, numbers.Real):
        return f"returned {type(value).__name__} {_clip(repr(value))}"
    if not math.isfinite(float(value)):
        return f"returned {float(value)}"
    return None


def run_python_metrics(metrics: Sequence[PythonMetric], item: Any, result: Any,
                       config: Mapping[str, Any]) -> tuple[dict[str, float], list[str]]:
    """(values, errors) of every Python metric on one item. A metric that raises, or returns something that
    is not a finite number or None, is one error naming it; the other metrics still run. A bool counts as
    1.0 / 0.0 (a pass/fail check), None leaves the item out of the metric."""
    values: dict[str, float] = {}
    errors: list[str] = []
    for found in metrics:
        try:
            value = found.function(item, result, config=config)
        except Exception as exc:
            errors.append(f"metric {found.name} ({found.origin}) raised {type(exc).__name__}: {_clip(str(exc), 200)}")
            continue
        problem = value_problem(value)
        if problem is not None:
            errors.append(f"metric {found.name} ({found.origin}) {problem}: return a number, or None when the metric "
                          "does not apply to the item (never NaN)")
        elif value is not None:
            values[found.name] = float(value)
    return values, errors


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- rubric metrics -------------------------------------------------------------------------
@dataclass(frozen=True)
class Rubric:
    """A model-judged metric declared as data; its value is the judge's score normalised to [0, 1]."""

    name: str
    criteria: str
    scale: tuple[int, int] | None = None  # None: pass/fail
    steps: tuple[str, ...] = ()
    applies_to: tuple[tuple[str, tuple[str, ...]], ...] = ()
    origin: str = "config"  # where it is declared (file:line), for messages
    better: str = field(default="higher", init=False)

    @property
    def pass_fail(self) -> bool:
        return self.scale is None

    def as_data(self) -> dict[str, Any]:
        """The rubric as declared (what its fingerprint is taken over)."""
        data: dict[str, Any] = {"name": self.name, "criteria": self.criteria,
                                "scale": "pass_fail" if self.scale is None else list(self.scale)}
        if self.steps:
            data["steps"] = list(self.steps)
        if self.applies_to:
            data["appliesTo"] = {key: list(values) for key, values in self.applies_to}
        return data

    @property
    def fingerprint(self) -> str:
        text = json.dumps(self.as_data(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def applies(self, item: Mapping[str, Any]) -> bool:
        """Whether the rubric grades this golden item (its JSON): every appliesTo field must match."""
        for key, allowed in self.applies_to:
            value = item.get(key)
            if value is None and key == "kind":
                value = "retrieval"
            values = value if isinstance(value, list) else [value]
            if not any(str(v) in allowed for v in values if v is not None):
                return False
        return True

    def request(self, question: str, answer: str, reference: str | None) -> Any:
        from ..judge.types import RubricRequest

        low, high = self.scale or (0, 1)
        return RubricRequest(name=self.name, criteria=self.criteria, steps=self.steps, pass_fail=self.pass_fail,
                             scale_min=low, scale_max=high, question=question, answer=answer, reference=reference)

    def normalise(self, score: int) -> float:
        """The judge's score on [0, 1]: pass/fail as 1.0 / 0.0, a scale [lo, hi] as (score - lo) / (hi - lo)."""
        low, high = self.scale or (0, 1)
        return (score - low) / (high - low)


def _line_of(text: str, needle: str, start: int = 0) -> tuple[int | None, int]:
    offset = text.find(needle, start) if text else -1
    return (None, start) if offset < 0 else (text.count("\n", 0, offset) + 1, offset)


def parse_rubrics(value: Any, *, source: str, text: str = "", builtins: Sequence[str] = ()) -> tuple[Rubric, ...]:
    """Rubrics as written (a JSON list, from the config's "rubrics" or a rubrics file), checked field by field.
    Raises :class:`CustomMetricError` naming the file, the line and the field, with a HINT."""
    key_line, offset = _line_of(text, '"rubrics"')
    if not isinstance(value, list):
        where = f"{source}:{key_line}" if key_line else source
        raise CustomMetricError(f"{where}: field 'rubrics': expected a list of rubrics, got {json.dumps(value)[:60]}\n{RUBRIC_HINT}")
    rubrics: list[Rubric] = []
    for index, entry in enumerate(value):
        line = key_line
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            needle = json.dumps(entry["name"], ensure_ascii=False)
            found, at = _line_of(text, needle, offset)
            line, offset = (found, at + len(needle)) if found else (line, offset)

        def bad(field_name: str, problem: str, *, line=line, index=index) -> CustomMetricError:
            where = f"{source}:{line}" if line else source
            return CustomMetricError(f"{where}: field 'rubrics[{index}].{field_name}': {problem}\n{RUBRIC_HINT}")

        if not isinstance(entry, dict):
            where = f"{source}:{line}" if line else source
            raise CustomMetricError(f"{where}: field 'rubrics[{index}]': expected an object\n{RUBRIC_HINT}")
        unknown = sorted(set(entry) - set(RUBRIC_FIELDS))
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], RUBRIC_FIELDS, n=1)
            raise bad(unknown[0], "unknown field" + (f" (did you mean {close[0]!r}?)" if close else f"; the fields are {', '.join(RUBRIC_FIELDS)}"))
        problem = name_problem(entry.get("name"), builtins) if "name" in entry else "missing: every rubric needs a name"
        if problem is not None:
            raise bad("name", problem)
        criteria = entry.get("criteria")
        if not isinstance(criteria, str) or not criteria.strip():
            raise bad("criteria", "expected the criteria the answer is graded on, as text")
        scale = entry.get("scale", "pass_fail")
        if scale == "pass_fail":
            bounds = None
        elif (isinstance(scale, list) and len(scale) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in scale)
              and scale[0] < scale[1] and scale[1] - scale[0] <= 100):
            bounds = (scale[0], scale[1])
        else:
            raise bad("scale", f"expected \"pass_fail\" or [LOW, HIGH] (integers, LOW < HIGH, at most 100 apart), got {json.dumps(scale)[:40]}")
        steps = entry.get("steps", [])
        if not isinstance(steps, list) or not all(isinstance(step, str) and step.strip() for step in steps):
            raise bad("steps", "expected a list of evaluation steps, as text")
        applies = entry.get("appliesTo", {})
        if not isinstance(applies, dict):
            raise bad("appliesTo", 'expected an object such as {"kind": ["retrieval"]}')
        selection = []
        for key, allowed in applies.items():
            if key not in APPLIES_TO_FIELDS:
                raise bad(f"appliesTo.{key}", f"unknown: a rubric applies by {', '.join(APPLIES_TO_FIELDS)}")
            if isinstance(allowed, str):
                allowed = [allowed]
            if not isinstance(allowed, list) or not allowed or not all(isinstance(v, str) for v in allowed):
                raise bad(f"appliesTo.{key}", "expected a list of values, e.g. [\"retrieval\"]")
            selection.append((key, tuple(allowed)))
        if any(rubric.name == entry["name"] for rubric in rubrics):
            raise bad("name", f"{entry['name']!r} is declared twice")
        rubrics.append(Rubric(name=entry["name"], criteria=criteria.strip(), scale=bounds, steps=tuple(s.strip() for s in steps),
                              applies_to=tuple(sorted(selection)), origin=f"{source}:{line}" if line else source))
    return tuple(rubrics)


def load_rubrics_file(path: str, builtins: Sequence[str] = ()) -> tuple[Rubric, ...]:
    """The rubrics of a JSON file (a list, or an object with a "rubrics" list): the ini key ``crucible_rubrics``."""
    from ..json_input import json_problem

    shown = shown_path(path)  # every message names the file the same way
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
    except OSError as exc:
        raise CustomMetricError(f"{shown}: cannot read the rubrics file: {exc.strerror}\n"
                                "HINT: ini crucible_rubrics names a JSON file of rubrics, relative to the rootdir") from None
    except UnicodeDecodeError as exc:
        raise CustomMetricError(f"{shown}: not UTF-8 text ({exc.reason})\nHINT: save the file as UTF-8") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f"{shown}:{exc.lineno}" if isinstance(exc, json.JSONDecodeError) else shown
        raise CustomMetricError(f"{where}: not valid JSON: {json_problem(exc)}\n{RUBRIC_HINT}") from None
    if isinstance(data, dict) and set(data) == {"rubrics"}:
        data = data["rubrics"]
    return parse_rubrics(data, source=shown, text=text, builtins=builtins)


# -- what a run records, and what a comparison reads of it ----------------------------------
def definitions(python: Sequence[PythonMetric], rubrics: Sequence[Rubric], *, judge_model: str | None = None,
                rubric_prompt_version: str | None = None) -> list[dict[str, Any]]:
    """What a run records of its custom metrics (plain JSON): the ruler its values were measured with."""
    rows = [{"name": m.name, "kind": PYTHON, "better": m.better, "origin": m.origin, "module": m.module,
             "fingerprint": m.fingerprint} for m in python]
    rows += [{"name": r.name, "kind": RUBRIC, "better": r.better, "origin": r.origin, "fingerprint": r.fingerprint,
              "rubric": r.as_data(), "judgeModel": judge_model, "promptVersion": rubric_prompt_version} for r in rubrics]
    return sorted(rows, key=lambda row: row["name"])


def read_definitions(run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> definition, from a run row (its ``custom_metrics`` column, JSON text or a list)."""
    value = run.get("custom_metrics")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    return {row["name"]: row for row in value or [] if isinstance(row, dict) and isinstance(row.get("name"), str)}


def directions(run: Mapping[str, Any]) -> dict[str, str | None]:
    """name -> "higher" | "lower" | None of the custom metrics a run recorded."""
    return {name: row.get("better") for name, row in read_definitions(run).items()}


def ruler_changes(a: Mapping[str, Any], b: Mapping[str, Any], compared: Iterable[str] | None) -> tuple[list[str], str | None]:
    """(warnings, refusal) for two runs' custom metrics: a Python metric whose code or direction changed is
    a warning (the ruler moved: a difference may be the code's); a rubric whose text changed refuses the
    comparison (the judge was asked another question). ``compared``: the metrics compared (None: all)."""
    left, right = read_definitions(a), read_definitions(b)
    wanted = None if compared is None else set(compared)
    warnings: list[str] = []
    for name in sorted(set(left) & set(right)):
        if wanted is not None and name not in wanted:
            continue
        old, new = left[name], right[name]
        if RUBRIC in (old.get("kind"), new.get("kind")) and old.get("fingerprint") != new.get("fingerprint"):
            return warnings, (f"refusing to compare run {a.get('id')} with run {b.get('id')}: the rubric {name!r} differs "
                              f"between them ({old.get('origin')} vs {new.get('origin')}), so the judge was asked another question\n"
                              f"HINT: give an edited rubric a new name (e.g. {name}V2) and re-run the baseline with it, or leave "
                              f"{name} out of the comparison (crucible compare --metrics ...)")
        if old.get("kind") == RUBRIC and old.get("promptVersion") != new.get("promptVersion"):
            return warnings, (f"refusing to compare run {a.get('id')} with run {b.get('id')}: the rubric {name!r} was judged "
                              f"with prompt {old.get('promptVersion')} in one and {new.get('promptVersion')} in the other\n"
                              f"HINT: judge-based metrics are only comparable under the same prompt; re-run the baseline, or "
                              f"leave {name} out of the comparison (crucible compare --metrics ...)")
        if old.get("fingerprint") != new.get("fingerprint"):
            warnings.append(f"the ruler changed: custom metric {name}'s code differs between the runs "
                            f"({old.get('origin')}, {str(old.get('fingerprint'))[:8]} vs {new.get('origin')}, "
                            f"{str(new.get('fingerprint'))[:8]}): part of its difference may be the code's, not the pipeline's")
        if old.get("better") != new.get("better"):
            warnings.append(f"custom metric {name}'s direction changed (better={old.get('better')!r} in "
                            f"{a.get('id')}, {new.get('better')!r} in {b.get('id')}): the newer run's direction is used")
    return warnings, None
