"""The applied pipeline config: defaults, validation, canonical hash, read tracking.

A config file holds the *full* pipeline config the runner applies, not a label.
``{}`` means the defaults, and the hash is taken over the *resolved* config, so
``{}`` and ``{"retrievalLimit": 10}`` identify the same run setup.

This module never imports pytest.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .json_input import json_problem, shown, value_problem

DEFAULT_CONFIG: dict[str, Any] = {
    "retrieval": {
        "rerank": False,
        "graphFusion": False,
        "understanding": False,
        "tokenBudget": 3000,
        "candidatePool": 40,
    },
    "policyMode": "off",
    "promptVersion": "default",
    "retrievalLimit": 10,
    "chatModelSlot": "chat",
}

# Expected types of the known keys; extra keys (the user's own) pass through untouched.
_KNOWN_TYPES: dict[str, tuple[type, ...]] = {
    "retrieval": (dict,),
    "retrieval.rerank": (bool,),
    "retrieval.graphFusion": (bool,),
    "retrieval.understanding": (bool,),
    "retrieval.tokenBudget": (int,),
    "retrieval.candidatePool": (int,),
    "policyMode": (str,),
    "promptVersion": (str,),
    "retrievalLimit": (int,),
    "chatModelSlot": (str,),
}
_POSITIVE = {"retrieval.tokenBudget", "retrieval.candidatePool", "retrievalLimit"}


class ConfigError(Exception):
    """A config file that cannot be applied. ``str()`` is the whole user-facing message."""


def _line_of_key(text: str, key: str) -> int | None:
    needle = json.dumps(key)
    offset = text.find(needle)
    return None if offset < 0 else text.count("\n", 0, offset) + 1


def _check_types(data: Mapping[str, Any], path: str, text: str, prefix: str = "") -> None:
    for key, value in data.items():
        dotted = prefix + key
        expected = _KNOWN_TYPES.get(dotted)
        if expected is not None:
            # bool is an int in Python; a count of true makes no sense.
            wrong = not isinstance(value, expected) or (bool not in expected and isinstance(value, bool))
            if not wrong and dotted in _POSITIVE and value < 1:
                wrong = True
            if wrong:
                line = _line_of_key(text, key)
                where = f"{path}:{line}" if line else path
                want = " or ".join(t.__name__ for t in expected).replace("dict", "object").replace("str", "string").replace("int", "integer").replace("bool", "boolean")
                if dotted in _POSITIVE:
                    want = "a positive integer"
                raise ConfigError(
                    f"{where}: field '{dotted}': expected {want}, got {json.dumps(value)}\n"
                    f"HINT: the default is {json.dumps(_default_at(dotted))}; every key is in docs/configuration.md."
                )
        if isinstance(value, dict) and dotted in _KNOWN_TYPES:
            _check_types(value, path, text, dotted + ".")


def _default_at(dotted: str) -> Any:
    node: Any = DEFAULT_CONFIG
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def resolve_config(params: Mapping[str, Any], *, source: str = "<config>", text: str = "") -> dict[str, Any]:
    """Validate ``params`` and fill in the defaults."""
    if not isinstance(params, Mapping):
        raise ConfigError(f"{source}: expected a JSON object at the top level, got {type(params).__name__}\nHINT: {{}} means the defaults.")
    _check_types(params, source, text)
    run_labels(params, source=source, text=text)  # validated here; labels describe the run, not its setup
    if params.get(RUBRICS_KEY) is not None:
        from .evaluation.custom_metrics import CustomMetricError, parse_rubrics
        from .metrics import KNOWN_METRICS

        try:
            parse_rubrics(params[RUBRICS_KEY], source=source, text=text, builtins=KNOWN_METRICS)
        except CustomMetricError as exc:
            raise ConfigError(str(exc)) from None
    return deep_merge(DEFAULT_CONFIG, {key: value for key, value in params.items() if key not in (LABELS_KEY, RUBRICS_KEY)})


# A config's top-level "labels" object tags the run (model, collection, mode, ...). It is
# kept out of the resolved config, so relabelling a run never changes its configHash.
LABELS_KEY = "labels"
# "rubrics" declares rubric metrics (docs/custom-metrics.md): how the run is measured, not how the pipeline
# is set up, so they stay out of the resolved config and its hash too (a changed rubric refuses a comparison).
RUBRICS_KEY = "rubrics"
STANDARD_LABELS = ("model", "collection", "mode")


def run_labels(params: Mapping[str, Any], *, source: str = "<config>", text: str = "") -> dict[str, str]:
    labels = params.get(LABELS_KEY, {}) if isinstance(params, Mapping) else {}
    line = _line_of_key(text, LABELS_KEY)
    where = f"{source}:{line}" if line else source
    if not isinstance(labels, Mapping) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in labels.values()):
        raise ConfigError(f"{where}: field 'labels': expected an object of strings, got {json.dumps(labels)}\n"
                          'HINT: e.g. "labels": {"model": "claude-haiku", "collection": "helpdesk", "mode": "hybrid"}')
    return {str(key): str(value) for key, value in labels.items()}


def parse_labels(values: Iterable[str], *, separators: str = "=", option: str = "--crucible-label",
                 expected: str | None = None, example: str = "--crucible-label model=claude-haiku --crucible-label mode=dense",
                 need_value: bool = False, once: bool = False,
                 error: Callable[[str, str], Exception] | None = None) -> dict[str, str]:
    """The one parser of ``KEY=VALUE`` label strings (``--crucible-label``, a command's ``--label``, the
    API's ``label``, the pieces of ``latest:KEY=VALUE,...``): each split at the first of ``separators`` (a
    value may hold more), key and value stripped; a later key wins unless ``once``. A bad string raises
    ``error(value, problem)`` (default: ValueError ``OPTION 'VALUE': expected EXPECTED`` with a HINT)."""
    expected = expected or " or ".join(f"KEY{sep}VALUE" for sep in separators)
    labels: dict[str, str] = {}
    for value in values:
        at = min((i for i in (value.find(sep) for sep in separators) if i >= 0), default=-1)
        key, rest = (value[:at].strip(), value[at + 1:].strip()) if at >= 0 else (value.strip(), "")
        problem = ("nothing" if not value.strip() else
                   f"no {' or '.join(repr(sep) for sep in separators)}" if at < 0 else "no key" if not key else
                   "no value" if need_value and not rest else f"'{key}' given twice" if once and key in labels else None)
        if problem:
            raise (error or _label_error(option, expected, example))(value, problem)
        labels[key] = rest
    return labels


def _label_error(option: str, expected: str, example: str) -> Callable[[str, str], Exception]:
    return lambda value, _problem: ValueError(f"{option} {value!r}: expected {expected}\nHINT: e.g. {example}")


def parse_label_options(values: list[str]) -> dict[str, str]:
    """``--crucible-label key=value`` options as a dict."""
    return parse_labels(values)


def load_config_file(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a config file: returns (params as written, resolved config)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}\nHINT: --crucible-config takes a path to a JSON file, e.g. configs/baseline.json") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})\nHINT: save the file as UTF-8") from None
    try:
        params = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f"{path}:{exc.lineno}" if isinstance(exc, json.JSONDecodeError) else str(path)
        raise ConfigError(f"{where}: not valid JSON: {json_problem(exc)}\nHINT: a config file is one JSON object; {{}} means the defaults.") from None
    unusable = value_problem(params)
    if unusable is not None:
        loc, problem = unusable
        key_line = _line_of_key(text, loc[0]) if loc and isinstance(loc[0], str) else None
        dotted = shown(".".join(map(str, loc)))
        raise ConfigError(f"{path}{f':{key_line}' if key_line else ''}: field '{dotted}': {problem}\n"
                          "HINT: a config holds plain JSON values; keep your own keys a few levels deep.")
    return params, resolve_config(params, source=str(path), text=text)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def config_hash(resolved: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the resolved config: the identity of a run setup."""
    return hashlib.sha256(canonical_json(resolved).encode("utf-8")).hexdigest()


def leaf_paths(value: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, item in value.items():
        dotted = prefix + str(key)
        if isinstance(item, Mapping) and item:
            yield from leaf_paths(item, dotted + ".")
        else:
            yield dotted, item


def changed_keys(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """Leaf keys whose value differs from the default (including keys with no default)."""
    defaults = dict(leaf_paths(DEFAULT_CONFIG))
    return {key: value for key, value in leaf_paths(resolved) if key not in defaults or defaults[key] != value}


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Leaf keys that differ between two resolved configs: key -> (a value, b value)."""
    left, right = dict(leaf_paths(a)), dict(leaf_paths(b))
    missing = object()
    diff = {}
    for key in sorted(set(left) | set(right)):
        old, new = left.get(key, missing), right.get(key, missing)
        if old != new:
            diff[key] = (None if old is missing else old, None if new is missing else new)
    return diff


class TrackedConfig(dict):
    """The resolved config as handed to the pipeline, remembering which keys were read.

    It is a real ``dict`` (``isinstance`` checks and ``json.dumps`` work), with
    nested objects wrapped the same way. Reads go into a shared set of dotted
    paths, so the runner can warn about a changed key the pipeline never used.
    """

    def __init__(self, data: Mapping[str, Any], reads: set[str] | None = None, prefix: str = ""):
        self._reads: set[str] = set() if reads is None else reads
        self._prefix = prefix
        super().__init__(
            {
                key: TrackedConfig(value, self._reads, f"{prefix}{key}.") if isinstance(value, Mapping) else value
                for key, value in data.items()
            }
        )

    @property
    def reads(self) -> set[str]:
        return self._reads

    def _mark(self, key: Any) -> None:
        self._reads.add(f"{self._prefix}{key}")

    def __getitem__(self, key: Any) -> Any:
        self._mark(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._mark(key)
        return super().get(key, default)

    def items(self):
        for key in self.keys():
            self._mark(key)
        return super().items()

    def values(self):
        for key in self.keys():
            self._mark(key)
        return super().values()

    def to_dict(self) -> dict[str, Any]:
        """A plain copy; counts as reading every key."""
        return {key: value.to_dict() if isinstance(value, TrackedConfig) else copy.deepcopy(value) for key, value in self.items()}

    def __deepcopy__(self, memo: dict) -> TrackedConfig:
        return TrackedConfig(self.to_dict(), self._reads, self._prefix)

    def __reduce__(self):
        return (dict, (self.to_dict(),))


def unread_changed_keys(resolved: Mapping[str, Any], reads: set[str]) -> list[str]:
    """Changed keys the pipeline never read, formatted ``key=value`` for the warning."""
    return [
        f"{key}={json.dumps(value)}"
        for key, value in changed_keys(resolved).items()
        if key not in reads
    ]


def unread_key_message(key: str, known: Iterable[str] = ()) -> str:
    """The CrucibleWarning's text for one unread key (``key=value``, as :func:`unread_changed_keys` gives it);
    ``known``: keys it may be a typo of (what the pipeline read, the baseline's keys), for a did-you-mean.
    The default config's keys are always among them."""
    name = key.split("=", 1)[0]
    guess = closest_key(name, [*known, *(path for path, _ in leaf_paths(DEFAULT_CONFIG))])
    return (f"config key {key} was never read by the pipeline: is the config applied?"
            + (f" (did you mean {guess}?)" if guess else ""))


def closest_key(name: str, known: Iterable[str]) -> str | None:
    """The dotted key ``name`` is most likely a typo of: the whole path, else its last part among the
    known keys' last parts under the same parent (``retrieval.rernak`` -> ``retrieval.rerank``)."""
    import difflib

    candidates = sorted(set(known) - {name})
    whole = difflib.get_close_matches(name, candidates, n=1, cutoff=0.8)
    if whole:
        return whole[0]
    parent, _, leaf = name.rpartition(".")
    siblings = {key.rpartition(".")[2]: key for key in candidates if key.rpartition(".")[0] == parent}
    close = difflib.get_close_matches(leaf, list(siblings), n=1, cutoff=0.75)
    return siblings[close[0]] if close else None


def unread_keys_error(keys: list[str], why: str, config_path: str | None) -> str:
    """The usage error when unread keys fail the session (``why``: what made them an error), with its HINT."""
    where = f"remove it from {config_path}" if config_path else "remove it from the config file"
    return (f"ERROR config key{'s' if len(keys) != 1 else ''} never read by the pipeline ({why}): {', '.join(keys)}\n"
            f"HINT: make the pipeline apply each key (read it from its config argument), or {where}")


def key_line(path: str | None, key: str) -> int:
    """The 1-based line of the config file where an unread key (``a.b=value``) is written (1: not found)."""
    name = json.dumps(key.split("=", 1)[0].rsplit(".", 1)[-1])
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines() if path else []
    except (OSError, ValueError):
        lines = []
    return next((number for number, line in enumerate(lines, 1) if name in line), 1)


class ConfigUse:
    """What a session's pipeline did with its config: the keys it read (through :class:`TrackedConfig`, in any
    process: xdist workers report theirs), and the changed keys it never read, which make an unapplied
    config a label rather than an experiment."""

    def __init__(self, resolved: Mapping[str, Any], config_path: str | None, baseline_keys: Iterable[str] = ()):
        self.resolved, self.config_path = resolved, config_path
        self.reads: set[str] = set()
        self._baseline_keys = set(baseline_keys)
        self._tracked: TrackedConfig | None = None

    @property
    def tracked(self) -> TrackedConfig:
        """The one config object every pipeline call of the session is handed."""
        if self._tracked is None:
            self._tracked = TrackedConfig(self.resolved, self.reads)
        return self._tracked

    def unread_keys(self) -> list[str]:
        return unread_changed_keys(self.resolved, self.reads)

    def known_keys(self) -> set[str]:
        """Config keys an unread key may be a typo of: what the pipeline read, and the baseline's keys."""
        return self.reads | self._baseline_keys

    def unread_keys_error(self, *, strict: bool, warn: Callable[[str, str | None, int], bool] | None) -> str | None:
        """The usage error (exit 4) for changed keys never read, or None. Under ``crucible_strict_config`` every
        such key is one; else each goes through ``warn(message, config file, line)`` (the plugin's CrucibleWarning,
        under pytest's warning filters), which returns False when a filter made it an error: those keys are then
        a usage error too. (The summary lists them either way.)"""
        if warn is None and not strict:
            return None
        keys, path = self.unread_keys(), self.config_path
        if strict:
            why = "crucible_strict_config = true"
        else:
            assert warn is not None
            why = "a warning filter makes CrucibleWarning an error"
            keys = [key for key in keys if not warn(unread_key_message(key, self.known_keys()), path, key_line(path, key))]
        return unread_keys_error(keys, why, path) if keys else None
